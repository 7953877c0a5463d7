"""ConformalRegressor: what a fit keeps, how ``method`` and ``calibration_confidence``
select the calibration, coverage on simulated data, bad input, save and load.

Most tests use a fast linear base model with quantiles (:class:`LinearQuantiles`)
so that the conformal logic is checked independently of network training.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LinearRegression
from sklearn.preprocessing import StandardScaler

import neumiss
from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import (
    METHODS,
    ConformalRegressor,
    CQRMethod,
    assign_cells,
    required_calibration_rows,
)

from ._interval_helpers import (
    ALPHA,
    TINY,
    LinearQuantiles,
    categorical_model,
    conformal_rank,
    kth,
    simulated,
)


def _fitted(method, n=120, seed=0, alpha=ALPHA, d=3):
    X, y, _ = simulated(n, d=d, seed=seed)
    model = ConformalRegressor(LinearQuantiles(), method=method, alpha=alpha, cv=None,
                               random_state=seed).fit(X, y)
    X_test, _, _ = simulated(12, d=d, seed=seed + 100)
    return model, X_test


def test_the_methods_are_the_ones_the_parameter_accepts():
    assert tuple(METHODS) == ConformalRegressor._parameter_constraints["method"].values
    assert all(method.name == name for name, method in METHODS.items())


@pytest.mark.parametrize("method", ["cqr", "cqr-mda-exact"])
def test_the_fit_keeps_the_scores_and_cells_of_its_calibration_rows(method):
    X, y, _ = simulated(200, seed=1)
    model = ConformalRegressor(LinearQuantiles(), method=method, cv=None,
                               random_state=0).fit(X, y)
    n_cal = 50  # ceil(0.25 n)
    assert model.calibration_scores_.shape == model.calibration_cells_.shape == (n_cal,)
    if method == "cqr":
        assert not hasattr(model, "calibration_rows_")
        return
    rows, targets = model.calibration_rows_, model.calibration_targets_
    assert rows.shape == (n_cal, 3) and {tuple(r) for r in np.nan_to_num(rows)} <= {
        tuple(r) for r in np.nan_to_num(X)}
    np.testing.assert_array_equal(model.calibration_scores_,
                                  CQRMethod().scores(model.estimator_, rows, targets))
    np.testing.assert_array_equal(model.calibration_cells_, assign_cells(
        np.isnan(rows), model.cell_patterns_, model.cell_of_count_))


@pytest.mark.parametrize("confidence", [0.75, None, 0.95])
def test_split_and_cqr_use_the_conformal_rank(confidence):
    for method in ("split", "cqr"):
        model, X_test = _fitted(method)
        model.set_params(calibration_confidence=confidence)
        base, scores = model.estimator_, model.calibration_scores_
        q = kth(scores, conformal_rank(scores.size, ALPHA, confidence))
        assert model.calibration_quantile() == q
        expected = (np.column_stack([base.predict(X_test) - q, base.predict(X_test) + q])
                    if method == "split"
                    else base.predict_quantiles(X_test)[:, [0, 2]] + [-q, q])
        np.testing.assert_allclose(model.predict_interval(X_test), expected)


def test_mondrian_calibrates_each_cell_on_its_own_rows():
    model, X_test = _fitted("cqr-mondrian", n=400)
    cells = assign_cells(np.isnan(X_test), model.cell_patterns_, model.cell_of_count_)
    scores, cal_cells = model.calibration_scores_, model.calibration_cells_
    expected = []
    for x, cell in zip(X_test, cells):
        own = scores[cal_cells == cell]
        if own.size >= 14:  # (1 - 0.1)^14 <= 1 - 0.75
            q = kth(own, conformal_rank(own.size, ALPHA, 0.75))
        else:  # all rows' margin, or the cell's largest score if larger
            q = max([kth(scores, conformal_rank(scores.size, ALPHA, 0.75)), *own])
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


def test_set_params_method_switches_without_refitting():
    # A fit with an MDA method keeps everything every quantile method needs: switching
    # gives what a fit with that method gives (same split, same deterministic base model).
    X, y, _ = simulated(300, seed=2)
    X_test, _, _ = simulated(30, seed=3)
    model = ConformalRegressor(LinearQuantiles(), method="cqr-mda-exact", random_state=0)
    model.fit(X, y)
    for method in ("cqr", "cqr-mondrian", "cqr-mda-nested"):
        fresh = ConformalRegressor(LinearQuantiles(), method=method, cv=None,
                                   random_state=0).fit(X, y)
        np.testing.assert_array_equal(model.set_params(method=method).predict_interval(X_test),
                                      fresh.predict_interval(X_test))


def test_a_method_the_fit_cannot_serve_is_refused_after_set_params():
    model, X_test = _fitted("cqr")
    with pytest.raises(ValueError, match="'cqr-mda-nested' needs the calibration rows"):
        model.set_params(method="cqr-mda-nested").predict_interval(X_test)
    with pytest.raises(ValueError, match="method must be one of"):
        model.set_params(method="jackknife").predict_interval(X_test)


# -------------------------------------------------------------------- coverage


def test_coverage_on_simulated_data():
    # The mask-conditional method covers every group of rows with the same number of
    # missing entries (within the noise of ~260 calibration rows per fully observed
    # mask), split conformal only on average: it misses on the rows with most missing.
    X, y, truth = simulated(8000, d=4, missing_rate=0.4, seed=5)
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
    X, y, _ = simulated(100)
    with pytest.raises(ValueError, match="alpha"):
        ConformalRegressor(LinearQuantiles(), alpha=alpha).fit(X, y)
    model, X_test = _fitted("cqr")
    with pytest.raises(ValueError, match="alpha"):
        model.predict_interval(X_test, alpha=alpha)


def test_too_few_calibration_rows_says_how_many_are_needed():
    X, y, _ = simulated(20)
    with pytest.raises(ValueError, match="needs at least 9 calibration rows.*got 5"):
        ConformalRegressor(LinearQuantiles(), alpha=0.1, calibration_fraction=0.25,
                           calibration_confidence=None, cv=None).fit(X, y)
    with pytest.raises(ValueError, match="needs at least 14 calibration rows.*got 5.*lower "
                                         "calibration_confidence"):
        ConformalRegressor(LinearQuantiles(), alpha=0.1, calibration_fraction=0.25,
                           cv=None).fit(X, y)
    model, X_test = _fitted("split", n=120)  # 30 calibration rows
    with pytest.raises(ValueError, match="alpha=0.01 needs at least 138 calibration rows"):
        model.predict_interval(X_test, alpha=0.01)
    with pytest.raises(ValueError, match="calibration_confidence"):
        ConformalRegressor(LinearQuantiles(), calibration_confidence=1.0).fit(X, y)


def test_a_base_model_without_quantiles_is_refused_for_cqr():
    X, y, _ = simulated(100)
    for method in ("cqr", "cqr-mda-exact", "cqr-mda-nested"):
        with pytest.raises(ValueError, match="predict_quantiles.*LinearRegression; with "
                           "it, use method='split'$"):
            ConformalRegressor(LinearRegression(), method=method).fit(X, y)
    with pytest.raises(ValueError, match=r"predict\(\) method .*got StandardScaler$"):
        ConformalRegressor(StandardScaler(), method="split").fit(X, y)  # no method fits it
    with pytest.raises(ValueError, match="method must be one of"):
        ConformalRegressor(method="jackknife").fit(X, y)


def test_default_base_models_follow_alpha_and_method():
    X, y, _ = simulated(400)
    small = dict(depth=1, ensemble_size=1, max_epochs=2)
    model = ConformalRegressor(alpha=0.2, random_state=0)
    base = model._base_estimator(0)
    assert isinstance(base, NeuMissQuantileRegressor) and base.quantiles == (0.1, 0.5, 0.9)
    assert isinstance(model.set_params(method="split")._base_estimator(0), NeuMissRegressor)
    fitted = ConformalRegressor(NeuMissQuantileRegressor(**small), cv=None,
                                random_state=0).fit(X, y)
    assert fitted.calibration_scores_.shape == (100,)
    assert fitted.predict(X[:5]).shape == (5,)


@pytest.mark.slow
def test_importing_the_regressor_loads_no_onnx():
    code = ("import sys; from neumiss import ConformalRegressor; import neumiss.intervals; "
            "assert 'onnx' not in sys.modules, 'onnx loaded'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------ save, load


def _neumiss_model(method):
    X, y, truth = simulated(800, d=3, missing_rate=0.4)
    base = (NeuMissRegressor if method == "split" else NeuMissQuantileRegressor)(**TINY)
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


def test_mda_methods_keep_a_table_with_categorical_columns(tmp_path):
    # The augmentation re-masks input columns (a categorical one as a whole); saving
    # keeps the table's dtypes.
    model, test = categorical_model()
    interval = model.predict_interval(test)
    assert (interval[:, 0] <= interval[:, 1]).all()
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert isinstance(loaded.calibration_rows_["c"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(loaded.predict_interval(test), interval)


def test_an_unseeded_base_model_is_seeded_from_random_state():
    """A given base model without a seed of its own: two fits with the same random_state
    give the same intervals (its seed drawn from ours); one with a seed keeps it."""
    X, y, _ = neumiss.simulation.make_regression(600, 4, random_state=0)
    base = NeuMissRegressor(depth=1, max_epochs=3, ensemble_size=1)
    first, second = (ConformalRegressor(base, method="split", random_state=3).fit(X, y)
                     for _ in range(2))
    np.testing.assert_array_equal(first.predict_interval(X), second.predict_interval(X))
    assert first.estimator_.random_state is not None and base.random_state is None
    seeded = ConformalRegressor(base.set_params(random_state=11), method="split",
                                random_state=3).fit(X, y)
    assert seeded.estimator_.random_state == 11
