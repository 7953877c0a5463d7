"""Prediction intervals: the oracle, ConformalRegressor's methods against explicit
loops, coverage on simulated data, bad input, the quantile head, save/load, ONNX.

Most tests use a fast linear base model with quantiles (:class:`LinearQuantiles`)
so that the conformal logic is checked independently of network training.
"""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta, norm
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression

import neumiss
from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import (
    ConformalRegressor,
    assign_cells,
    confident_rank,
    mask_cells,
    required_calibration_rows,
    upper_rank,
)
from neumiss.simulation import predictive_variance

ALPHA = 0.1


class LinearQuantiles(RegressorMixin, BaseEstimator):
    """Mean imputation + least squares; quantiles ``center -+ spread (1 + n_missing / 2)``."""

    def __init__(self, spread=1.0):
        self.spread = spread

    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        self.n_features_in_ = X.shape[1]
        self.mean_ = np.nanmean(X, axis=0)
        design = np.column_stack([np.where(np.isnan(X), self.mean_, X), np.ones(len(X))])
        self.coef_ = np.linalg.lstsq(design, y, rcond=None)[0]
        return self

    def predict(self, X):
        X = np.asarray(X, dtype=float)
        return np.where(np.isnan(X), self.mean_, X) @ self.coef_[:-1] + self.coef_[-1]

    def predict_quantiles(self, X):
        center = self.predict(X)
        half = self.spread * (1 + np.isnan(np.asarray(X, dtype=float)).sum(axis=1) / 2)
        return np.column_stack([center - half, center, center + half])


def _data(n, d=3, missing_rate=0.4, seed=0, mechanism="MCAR"):
    X, y, truth = neumiss.simulation.make_regression(
        n, d, mechanism=mechanism, missing_rate=missing_rate, random_state=seed
    )
    return X, y, truth


# ------------------------------------------------------------------ the oracle


def _explicit_variance(X, cov, coef, noise_var, sigma_tilde=None):
    """Var(y | x_obs, m) row by row: Schur complement, then the self-masking posterior."""
    out = np.empty(len(X))
    for i, row in enumerate(X):
        mis = np.isnan(row)
        obs = ~mis
        if not mis.any():
            out[i] = noise_var
            continue
        s = cov[np.ix_(mis, mis)]
        if obs.any():
            s = s - cov[np.ix_(mis, obs)] @ np.linalg.solve(cov[np.ix_(obs, obs)],
                                                            cov[np.ix_(obs, mis)])
        if sigma_tilde is not None:  # Gaussian prior times Gaussian masking bumps
            s = np.linalg.inv(np.linalg.inv(s) + np.diag(1 / sigma_tilde[mis] ** 2))
        out[i] = coef[mis] @ s @ coef[mis] + noise_var
    return out


@pytest.mark.parametrize("mechanism", ["MCAR", "MAR", "gaussian_sm"])
def test_predictive_variance_matches_explicit_conditioning(mechanism):
    X, _, truth = _data(300, d=5, missing_rate=0.4, mechanism=mechanism)
    sigma = truth.mechanism_params["sigma_tilde"] if mechanism == "gaussian_sm" else None
    expected = _explicit_variance(X, truth.cov, truth.coef, truth.noise_var, sigma)
    np.testing.assert_allclose(truth.predictive_variance(X), expected, rtol=1e-9)


def test_predictive_variance_matches_monte_carlo_under_self_masking():
    # y - E[y | x_obs, m] has, within each mask, the predicted variance.
    _, _, truth = _data(1000, d=3, missing_rate=0.3, mechanism="gaussian_sm", seed=3)
    X, y = truth.sample(200_000, random_state=4)
    residual = y - truth.bayes_predict(X)
    variance = truth.predictive_variance(X)
    patterns, inverse = np.unique(np.isnan(X), axis=0, return_inverse=True)
    for k in range(len(patterns)):
        rows = inverse.ravel() == k
        if rows.sum() > 5000:
            assert np.var(residual[rows]) == pytest.approx(variance[rows][0], rel=0.05)
            assert np.ptp(variance[rows]) < 1e-9  # depends on the mask only


def test_oracle_interval_is_mean_plus_minus_normal_quantile():
    X, _, truth = _data(50, d=4)
    interval = truth.oracle_interval(X, 0.2)
    half = norm.ppf(0.9) * np.sqrt(truth.predictive_variance(X))
    np.testing.assert_allclose(interval.mean(axis=1), truth.bayes_predict(X))
    np.testing.assert_allclose(interval[:, 1] - interval[:, 0], 2 * half)


def test_predictive_variance_refuses_probit_self_masking():
    with pytest.raises(NotImplementedError, match="probit"):
        predictive_variance(np.zeros((2, 2)), np.eye(2), np.ones(2), 1.0, mechanism="probit_sm")


# ---------------------------------------------------------- methods, explicitly


def _kth(values, rank):
    return np.sort(values)[rank - 1]


def _fitted(method, n=120, seed=0, alpha=ALPHA, d=3):
    X, y, _ = _data(n, d=d, seed=seed)
    model = ConformalRegressor(LinearQuantiles(), method=method, alpha=alpha,
                               random_state=seed).fit(X, y)
    X_test, _, _ = _data(12, d=d, seed=seed + 100)
    return model, X_test


def _cqr_scores(base, X, y):
    q = base.predict_quantiles(X)
    return np.maximum(q[:, 0] - y, y - q[:, 2])


def _rank(n, alpha, confidence):
    """The rank of the calibration quantile, from the Beta law of the coverage of the
    k-th smallest of n scores: the smallest k with P(coverage < 1 - alpha) <= 1 - confidence."""
    if confidence is None:
        return math.ceil((1 - alpha) * (n + 1))
    return next(k for k in range(1, n + 1) if beta.cdf(1 - alpha, k, n + 1 - k) <= 1 - confidence)


@pytest.mark.parametrize("confidence", [0.75, None, 0.95])
def test_split_and_cqr_use_the_conformal_rank(confidence):
    for method in ("split", "cqr"):
        model, X_test = _fitted(method)
        model.set_params(calibration_confidence=confidence)
        base, scores = model.estimator_, model.calibration_scores_
        n = scores.size
        q = _kth(scores, _rank(n, ALPHA, confidence))
        expected = (np.column_stack([base.predict(X_test) - q, base.predict(X_test) + q])
                    if method == "split"
                    else base.predict_quantiles(X_test)[:, [0, 2]] + [-q, q])
        np.testing.assert_allclose(model.predict_interval(X_test), expected)


def _nested_loop(model, x, alpha):
    """CP-MDA-Nested for one row, one calibration row at a time."""
    base = model.estimator_
    rows, ys = model.calibration_rows_, model.calibration_targets_
    lows, highs = [], []
    for row, y in zip(rows, ys):
        union = np.isnan(row) | np.isnan(x)
        score = _cqr_scores(base, np.where(union, np.nan, row)[None], np.array([y]))[0]
        q = base.predict_quantiles(np.where(union, np.nan, x)[None])[0]
        lows.append(q[0] - score)
        highs.append(q[2] + score)
    n = len(ys)
    return (_kth(lows, math.floor(alpha * (n + 1))), _kth(highs, math.ceil((1 - alpha) * (n + 1))))


def _exact_loop(model, x, alpha):
    """CP-MDA-Exact for one row: calibration rows with a mask inside x's, re-masked."""
    base = model.estimator_
    rows, ys = model.calibration_rows_, model.calibration_targets_
    mask = np.isnan(x)
    inside = [k for k, row in enumerate(rows) if not (np.isnan(row) & ~mask).any()]
    if len(inside) < math.ceil(1 / alpha - 1):
        return _nested_loop(model, x, alpha)
    remasked = np.where(mask, np.nan, rows[inside])
    scores = _cqr_scores(base, remasked, ys[inside])
    q = _kth(scores, math.ceil((1 - alpha) * (len(inside) + 1)))
    bounds = base.predict_quantiles(x[None])[0]
    return bounds[0] - q, bounds[2] + q


@pytest.mark.parametrize("method,loop", [("cqr-mda-nested", _nested_loop),
                                         ("cqr-mda-exact", _exact_loop)])
@pytest.mark.parametrize("alpha", [0.1, 0.25])
def test_mda_methods_match_a_loop_over_calibration_rows(method, loop, alpha):
    model, X_test = _fitted(method, n=80, alpha=alpha)
    expected = np.array([loop(model, x, alpha) for x in X_test])
    np.testing.assert_allclose(model.predict_interval(X_test), expected, rtol=1e-12)


def test_exact_falls_back_to_nested_only_for_masks_with_few_rows():
    model, X_test = _fitted("cqr-mda-exact", n=40)
    exact = model.predict_interval(X_test)
    nested = model.set_params(method="cqr-mda-nested").predict_interval(X_test)
    rows = model.calibration_rows_
    for x, e, n in zip(X_test, exact, nested):
        inside = (~(np.isnan(rows) & ~np.isnan(x)).any(axis=1)).sum()
        if inside < 9:
            np.testing.assert_allclose(e, n)


def test_mask_cells_keep_frequent_patterns_and_pool_counts():
    rng = np.random.default_rng(0)
    mask = rng.random((4000, 4)) < 0.3
    patterns, count_cells = mask_cells(mask, 0.25, cell_rows=100)
    distinct, counts = np.unique(mask, axis=0, return_counts=True)
    assert {p.tobytes() for p in patterns} == {p.tobytes() for p in distinct[counts * 0.25 >= 100]}
    assert (np.diff(count_cells) >= 0).all() and count_cells[0] == len(patterns)
    cells = assign_cells(mask, patterns, count_cells)
    for row, cell in zip(mask[:200], cells[:200]):
        match = [k for k, p in enumerate(patterns) if (p == row).all()]
        assert cell == (match[0] if match else count_cells[row.sum()])
    others = cells >= len(patterns)  # every pooled cell is expected to hold 100 rows
    assert (np.bincount(cells[others])[len(patterns):] * 0.25 >= 100).all()


def test_mondrian_calibrates_each_cell_on_its_own_rows():
    model, X_test = _fitted("cqr-mondrian", n=400)
    cells = assign_cells(np.isnan(X_test), model.cell_patterns_, model.cell_of_count_)
    scores, cal_cells = model.calibration_scores_, model.calibration_cells_
    expected = []
    for x, cell in zip(X_test, cells):
        own = scores[cal_cells == cell]
        if own.size >= 14:  # (1 - 0.1)^14 <= 1 - 0.75
            q = _kth(own, _rank(own.size, ALPHA, 0.75))
        else:  # all rows' margin, or the cell's largest score if larger
            q = max([_kth(scores, _rank(scores.size, ALPHA, 0.75)), *own])
        bounds = model.estimator_.predict_quantiles(x[None])[0]
        expected.append((bounds[0] - q, bounds[2] + q))
    np.testing.assert_allclose(model.predict_interval(X_test), expected)


def test_mondrian_margins_grow_as_alpha_decreases_also_where_a_cell_falls_back():
    model, _ = _fitted("cqr-mondrian", n=2000)
    cells = model.calibration_cells_
    sizes = np.bincount(cells)
    small = int(np.argmin(sizes))  # its own quantile at alpha = 0.1, too few rows at 0.02
    assert required_calibration_rows(0.1, 0.75) <= sizes[small]
    assert sizes[small] < required_calibration_rows(0.02, 0.75)
    # A hard cell: its scores are the largest, so all rows' quantile at 0.02 lies
    # among them, below its own quantile at 0.1.
    model.calibration_scores_ = np.where(cells == small, model.calibration_scores_ + 10,
                                         model.calibration_scores_)
    margins = np.array([model.cell_margins(alpha) for alpha in (0.2, 0.1, 0.05, 0.02, 0.01)])
    assert (np.diff(margins, axis=0) >= 0).all()
    assert margins[-1, small] == model.calibration_scores_[cells == small].max()


# -------------------------------------------------------------------- coverage


def test_coverage_on_simulated_data():
    # The mask-conditional method covers every group of rows with the same number of
    # missing entries (within the noise of ~260 calibration rows per fully observed
    # mask), split conformal only on average: it misses on the rows with most missing.
    X, y, truth = _data(8000, d=4, missing_rate=0.4, seed=5)
    X_test, y_test = truth.sample(8000, random_state=6)
    n_missing = np.isnan(X_test).sum(axis=1)
    worst = {}
    for method in ("split", "cqr-mda-exact", "cqr-mondrian"):
        model = ConformalRegressor(LinearQuantiles(spread=0.5), method=method,
                                   random_state=0).fit(X, y)
        interval = model.predict_interval(X_test)
        covered = (y_test >= interval[:, 0]) & (y_test <= interval[:, 1])
        assert 0.88 <= covered.mean() <= 0.93, method
        groups = [covered[n_missing == q].mean() for q in range(5) if (n_missing == q).sum() > 800]
        worst[method] = min(groups)
    assert min(worst["cqr-mda-exact"], worst["cqr-mondrian"]) >= 0.85 > worst["split"], worst


def test_the_confident_rank_covers_with_the_asked_probability_over_calibration_draws():
    # Uniform scores: the coverage of a margin is the margin itself. Over many draws of
    # 60 calibration scores, the confident margin covers less than 0.9 in at most 20%
    # of the draws (binomial noise allowed), the rank below it in more; the usual rank
    # covers 0.9 on average only, and falls below it in about half of the draws.
    rng = np.random.default_rng(0)
    n, draws = 60, 20000
    ordered = np.sort(rng.random((draws, n)), axis=1)
    k = confident_rank(n, 0.1, 0.8)
    assert (ordered[:, k - 1] < 0.9).mean() <= 0.2 + 0.01
    assert (ordered[:, k - 2] < 0.9).mean() > 0.2 + 0.01
    usual = ordered[:, upper_rank(n, 0.1) - 1]
    assert usual.mean() >= 0.9 - 0.005 and 0.3 < (usual < 0.9).mean() < 0.7
    assert confident_rank(15, 0.1, 0.8) == 16  # beyond n: too few rows for that confidence
    assert required_calibration_rows(0.1, 0.8) == 16 == confident_rank(16, 0.1, 0.8)


@settings(max_examples=20, deadline=None)
@given(alpha_low=st.floats(0.05, 0.5), alpha_high=st.floats(0.05, 0.5),
       method=st.sampled_from(["split", "cqr", "cqr-mda-nested", "cqr-mondrian"]))
def test_intervals_are_ordered_and_nested_in_alpha(fitted_models, alpha_low, alpha_high, method):
    alpha_low, alpha_high = sorted((alpha_low, alpha_high))
    model, X_test = fitted_models[method]
    wide = model.predict_interval(X_test, alpha=alpha_low)
    narrow = model.predict_interval(X_test, alpha=alpha_high)
    assert (narrow[:, 0] <= narrow[:, 1]).all()
    assert (wide[:, 0] <= narrow[:, 0]).all() and (wide[:, 1] >= narrow[:, 1]).all()


@pytest.fixture(scope="module")
def fitted_models():
    return {method: _fitted(method, n=150)
            for method in ("split", "cqr", "cqr-mda-nested", "cqr-mondrian")}


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize("alpha", [0, 1, 1.5, -0.1, "0.1"])
def test_alpha_outside_the_unit_interval_is_refused(alpha):
    X, y, _ = _data(100)
    with pytest.raises(ValueError, match="alpha"):
        ConformalRegressor(LinearQuantiles(), alpha=alpha).fit(X, y)
    model, X_test = _fitted("cqr")
    with pytest.raises(ValueError, match="alpha"):
        model.predict_interval(X_test, alpha=alpha)


def test_too_few_calibration_rows_says_how_many_are_needed():
    X, y, _ = _data(20)
    with pytest.raises(ValueError, match="needs at least 9 calibration rows.*got 5"):
        ConformalRegressor(LinearQuantiles(), alpha=0.1, calibration_fraction=0.25,
                           calibration_confidence=None).fit(X, y)
    with pytest.raises(ValueError, match="needs at least 14 calibration rows.*got 5.*lower "
                                         "calibration_confidence"):
        ConformalRegressor(LinearQuantiles(), alpha=0.1, calibration_fraction=0.25).fit(X, y)
    model, X_test = _fitted("split", n=120)  # 30 calibration rows
    with pytest.raises(ValueError, match="alpha=0.01 needs at least 138 calibration rows"):
        model.predict_interval(X_test, alpha=0.01)
    with pytest.raises(ValueError, match="calibration_confidence"):
        ConformalRegressor(LinearQuantiles(), calibration_confidence=1.0).fit(X, y)


def test_a_base_model_without_quantiles_is_refused_for_cqr():
    X, y, _ = _data(100)
    for method in ("cqr", "cqr-mda-exact", "cqr-mda-nested"):
        with pytest.raises(ValueError, match="predict_quantiles.*LinearRegression"):
            ConformalRegressor(LinearRegression(), method=method).fit(X, y)
    with pytest.raises(ValueError, match="method must be one of"):
        ConformalRegressor(method="jackknife").fit(X, y)


def test_mda_methods_remask_categorical_columns_as_a_whole(tmp_path):
    # A DataFrame with a categorical and a text column: the augmentation re-masks input
    # columns, saving keeps the table's dtypes, and ONNX (encoded columns) agrees.
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    n = 900
    frame = pd.DataFrame({
        "a": rng.normal(size=n), "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
        "s": rng.choice(["u", "v"], n).astype(object),
    })
    y = frame["a"] + 2.0 * (frame["c"] == "y") + rng.normal(scale=0.3, size=n)
    for column in frame:
        frame.loc[rng.random(n) < 0.3, column] = np.nan
    model = ConformalRegressor(NeuMissQuantileRegressor(**_TINY), method="cqr-mda-exact",
                               random_state=0).fit(frame, y)
    test = frame.iloc[:40]
    interval = model.predict_interval(test)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert isinstance(loaded.calibration_rows_["c"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(loaded.predict_interval(test), interval)
    encoded = model.estimator_.encoder_.transform(test)
    missing = np.isnan(encoded)
    session = ort.InferenceSession(model.to_onnx().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    lower, upper = session.run(["lower", "upper"], {
        "X": np.where(missing, 0, encoded).astype(np.float32), "M": missing.astype(np.float32)})
    np.testing.assert_allclose(np.column_stack([lower, upper]), interval, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- quantile head

_TINY = dict(depth=1, mlp_depth=0, ensemble_size=2, max_epochs=3, random_state=0)


def test_quantile_head_trains_the_pinball_loss():
    X, y, _ = _data(600, d=3)
    model = NeuMissQuantileRegressor((0.1, 0.5, 0.9), **_TINY).fit(X, y)
    q = model.predict_quantiles(X)
    assert q.shape == (600, 3) and (np.diff(q, axis=1) >= 0).all()
    np.testing.assert_allclose(model.predict(X), q[:, 1])
    import torch

    out = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
    model.quantiles = (0.2, 0.5)
    loss = model._loss(out, torch.tensor([1.0, 0.0])).numpy()
    # pinball(1 - 0) at 0.2 = 0.2; (1 - 1) = 0; (0 - 2) at 0.2 = 1.6; (0 + 1) at 0.5 = 0.5
    np.testing.assert_allclose(loss, [(0.2 + 0.0) / 2, (1.6 + 0.5) / 2], rtol=1e-6)


@pytest.mark.parametrize("quantiles", [(0.1, 0.9), (0.5, 0.1), (0.0, 0.5), ()])
def test_quantile_head_refuses_bad_levels(quantiles):
    X, y, _ = _data(100)
    with pytest.raises(ValueError, match="quantiles"):
        NeuMissQuantileRegressor(quantiles, **_TINY).fit(X, y)


def test_default_base_models_follow_alpha_and_method():
    X, y, _ = _data(400)
    small = dict(depth=1, ensemble_size=1, max_epochs=2)
    model = ConformalRegressor(alpha=0.2, random_state=0)
    base = model._base_estimator(0)
    assert isinstance(base, NeuMissQuantileRegressor) and base.quantiles == (0.1, 0.5, 0.9)
    assert isinstance(model.set_params(method="split")._base_estimator(0), NeuMissRegressor)
    fitted = ConformalRegressor(NeuMissQuantileRegressor(**small), random_state=0).fit(X, y)
    assert fitted.calibration_scores_.shape == (100,)
    assert fitted.predict(X[:5]).shape == (5,)


# ---------------------------------------------------------- save, load, ONNX


def _neumiss_model(method):
    X, y, truth = _data(800, d=3, missing_rate=0.4)
    base = (NeuMissRegressor if method == "split" else NeuMissQuantileRegressor)(**_TINY)
    model = ConformalRegressor(base, method=method, random_state=0).fit(X, y)
    return model, truth.sample(60, random_state=1)[0]


@pytest.mark.parametrize("method", ["split", "cqr-mda-exact"])
def test_save_and_load_give_the_same_intervals(tmp_path, method):
    model, X_test = _neumiss_model(method)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert isinstance(loaded, ConformalRegressor) and loaded.method == method
    np.testing.assert_array_equal(loaded.predict_interval(X_test), model.predict_interval(X_test))
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    assert isinstance(loaded.get_params()["estimator"], type(model.estimator))


def test_a_modified_conformal_model_file_is_refused(tmp_path):
    import torch

    model, _ = _neumiss_model("cqr")
    model.save(tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    payload["attributes"]["calibration_scores_"]["__ndarray__"][0] = 0.0
    torch.save(payload, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="integrity"):
        neumiss.load(tmp_path / "m.pt")


@pytest.mark.parametrize("method", ["split", "cqr", "cqr-mda-exact", "cqr-mda-nested",
                                    "cqr-mondrian"])
def test_onnx_export_computes_the_same_intervals(tmp_path, method):
    ort = pytest.importorskip("onnxruntime")
    if method == "cqr-mondrian":  # with frequent patterns (cells of their own) and counts
        X, y, truth = _data(2400, d=2, missing_rate=0.3)
        model = ConformalRegressor(NeuMissQuantileRegressor(**_TINY), method=method,
                                   random_state=0).fit(X, y)
        X_test = truth.sample(300, random_state=1)[0]
        assert 0 < len(model.cell_patterns_) < 4
    else:
        model, X_test = _neumiss_model(method)
    onnx_model = model.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    missing = np.isnan(X_test)
    y, lower, upper = session.run(["y", "lower", "upper"], {
        "X": np.where(missing, 0, X_test).astype(np.float32), "M": missing.astype(np.float32)})
    interval = model.predict_interval(X_test)
    np.testing.assert_allclose(y, model.predict(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lower, interval[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(upper, interval[:, 1], rtol=1e-5, atol=1e-5)
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert meta["interval_method"] == method and meta["estimator"] == "ConformalRegressor"
    embedded = meta["embedded_calibration_rows"]
    assert embedded == (str(model.calibration_scores_.size) if "mda" in method else "0")


def test_split_over_a_quantile_head_exports_its_median(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    X, y, truth = _data(600, d=3)
    model = ConformalRegressor(NeuMissQuantileRegressor(**_TINY), method="split",
                               random_state=0).fit(X, y)
    X_test = truth.sample(30, random_state=2)[0]
    missing = np.isnan(X_test)
    session = ort.InferenceSession(model.to_onnx().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    y_onnx, lower, upper = session.run(["y", "lower", "upper"], {
        "X": np.where(missing, 0, X_test).astype(np.float32), "M": missing.astype(np.float32)})
    np.testing.assert_allclose(y_onnx, model.predict(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.column_stack([lower, upper]), model.predict_interval(X_test),
                               rtol=1e-5, atol=1e-5)


def test_quantile_regressor_exports_its_median_and_quantiles(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    X, y, truth = _data(500, d=3)
    model = NeuMissQuantileRegressor((0.1, 0.5, 0.9), **_TINY).fit(X, y)
    model.to_onnx(tmp_path / "q.onnx")
    X_test = truth.sample(40, random_state=2)[0]
    missing = np.isnan(X_test)
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    y_onnx, quantiles = session.run(["y", "quantiles"], {
        "X": np.where(missing, 0, X_test).astype(np.float32), "M": missing.astype(np.float32)})
    np.testing.assert_allclose(quantiles, model.predict_quantiles(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_onnx, model.predict(X_test), rtol=1e-5, atol=1e-5)


def test_quantile_head_has_the_regressor_parameters_and_defaults():
    quantile = NeuMissQuantileRegressor().get_params()
    assert quantile.pop("quantiles") == (0.05, 0.5, 0.95)
    assert quantile == NeuMissRegressor().get_params()
