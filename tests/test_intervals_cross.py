"""Cross-conformal intervals (CV+) of ConformalRegressor on small tables: the intervals
by hand, when ``cv="auto"`` uses them, Mondrian cells large enough or not, coverage,
``summary``, bad input, save and load."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neumiss
from neumiss.estimators import NeuMissQuantileRegressor
from neumiss.intervals import CROSS_ROWS, ConformalClassifier, ConformalRegressor, assign_cells
from neumiss.intervals._cells import own_cells

from ._interval_helpers import (
    ALPHA,
    TINY,
    LinearQuantiles,
    imputed_logistic,
    kth,
    nested_lower_rank,
    simulated,
    simulated_classes,
    usual_rank,
)


def _cross(method="cqr", n=150, seed=0, cv=10, d=3):
    X, y, truth = simulated(n, d=d, seed=seed)
    model = ConformalRegressor(LinearQuantiles(), method=method, cv=cv,
                               random_state=seed).fit(X, y)
    return model, X, y, truth.sample(40, random_state=seed + 100)[0]


def test_every_row_is_scored_by_the_model_that_did_not_see_it():
    model, X, y, _ = _cross()
    assert model.cross_conformal_ and len(model.fold_estimators_) == 10
    assert model.calibration_scores_.shape == model.calibration_folds_.shape == (150,)
    for k, fold_model in enumerate(model.fold_estimators_):
        held = model.calibration_folds_ == k
        bounds = fold_model.predict_quantiles(X[held])[:, [0, 2]]
        np.testing.assert_allclose(model.calibration_scores_[held],
                                   np.maximum(bounds[:, 0] - y[held], y[held] - bounds[:, 1]))
        # the fold model is the least-squares fit of the other rows
        np.testing.assert_allclose(fold_model.coef_,
                                   LinearQuantiles().fit(X[~held], y[~held]).coef_)
    np.testing.assert_allclose(model.estimator_.coef_, LinearQuantiles().fit(X, y).coef_)


@pytest.mark.parametrize("method", ["split", "cqr"])
def test_cv_plus_intervals_by_hand(method):
    model, _, _, X_test = _cross(method)
    scores, folds, n = model.calibration_scores_, model.calibration_folds_, 150
    low_rank, high_rank = nested_lower_rank(n, ALPHA), usual_rank(n, ALPHA)
    expected = []
    for x in X_test:
        bounds = np.array([m.predict_quantiles(x[None])[0, [0, 2]] if method == "cqr"
                           else np.repeat(m.predict(x[None]), 2)
                           for m in model.fold_estimators_])  # (K, 2)
        expected.append((kth(bounds[folds, 0] - scores, low_rank),
                         kth(bounds[folds, 1] + scores, high_rank)))
    np.testing.assert_allclose(model.predict_interval(X_test), expected)


@pytest.mark.parametrize("alpha", [ALPHA, 0.01])
def test_mondrian_calibrates_a_large_cell_on_its_rows_and_a_small_one_on_all(alpha):
    model, _, _, X_test = _cross("cqr-mondrian", n=400)
    own = own_cells(model._cross_calibrated()[1], alpha)
    sizes = np.bincount(model.calibration_cells_)
    np.testing.assert_array_equal(own, sizes >= (9 if alpha == ALPHA else 99))
    assert own.all() if alpha == ALPHA else (own.any() and not own.all())
    cells = assign_cells(np.isnan(X_test), model.cell_patterns_, model.cell_of_count_)
    interval = model.predict_interval(X_test, alpha=alpha)
    folds, scores = model.calibration_folds_, model.calibration_scores_
    for x, cell, got in zip(X_test, cells, interval):
        rows = model.calibration_cells_ == cell if own[cell] else np.ones(400, bool)
        n = rows.sum()
        bounds = np.array([m.predict_quantiles(x[None])[0, [0, 2]]
                           for m in model.fold_estimators_])
        low = kth(bounds[folds[rows], 0] - scores[rows], nested_lower_rank(n, alpha))
        high = kth(bounds[folds[rows], 1] + scores[rows], usual_rank(n, alpha))
        np.testing.assert_allclose(got, (low, high))
    text = model.summary()
    assert "cross-conformal (CV+, 10 folds), every one of the 400 rows" in text
    assert f"per missingness pattern cell for {sizes.size} of {sizes.size} cells" in text


def _regressor(cv, n):
    X, y, _ = simulated(n)
    return ConformalRegressor(LinearQuantiles(), method="cqr", cv=cv, random_state=0).fit(X, y)


def _classifier(cv, n):
    X, labels, _ = simulated_classes(n)
    return ConformalClassifier(imputed_logistic(), cv=cv, random_state=0).fit(X, labels)


@pytest.mark.parametrize("fit", [_regressor, _classifier], ids=["regressor", "classifier"])
def test_auto_uses_cv_plus_below_the_measured_row_count_only(fit):
    small = fit("auto", 120)
    assert small.cross_conformal_ and len(small.fold_estimators_) == 10
    large = fit("auto", CROSS_ROWS)
    assert not large.cross_conformal_ and "calibration: split, 125 held-out rows" in (
        large.summary())
    split = fit(None, 120)
    assert not split.cross_conformal_ and split.calibration_scores_.shape == (30,)

def test_coverage_and_width_on_small_tables():
    # Over tables of 100 rows, CV+ covers 1 - alpha on average and its intervals are
    # narrower than those of a split, which calibrates on 25 rows.
    coverage, ratio = [], []
    for seed in range(12):
        X, y, truth = simulated(100, seed=seed, missing_rate=0.3)
        X_test, y_test = truth.sample(2000, random_state=seed + 50)
        widths = {}
        for cv in (None, 10):
            model = ConformalRegressor(LinearQuantiles(spread=0.5), method="cqr", cv=cv,
                                       random_state=seed).fit(X, y)
            interval = model.predict_interval(X_test)
            widths[cv] = (interval[:, 1] - interval[:, 0]).mean()
            if cv:
                coverage.append(((y_test >= interval[:, 0]) & (y_test <= interval[:, 1])).mean())
        ratio.append(widths[10] / widths[None])
    assert 0.87 <= np.mean(coverage) <= 0.95, coverage
    assert np.mean(ratio) < 0.95, ratio


@settings(max_examples=15, deadline=None)
@given(alpha_low=st.floats(0.05, 0.5), alpha_high=st.floats(0.05, 0.5),
       method=st.sampled_from(["split", "cqr"]))
def test_cv_plus_intervals_are_nested_in_alpha(cross_models, alpha_low, alpha_high, method):
    alpha_low, alpha_high = sorted((alpha_low, alpha_high))
    model, X_test = cross_models[method]
    # Where the narrower CV+ interval would be empty, its midpoint is returned, which
    # the wider one need not hold (its ranks are not symmetric, unlike a split's margin).
    wide = model.predict_interval(X_test, alpha=alpha_low)
    narrow = model.predict_interval(X_test, alpha=alpha_high)
    assert (narrow[:, 0] <= narrow[:, 1]).all()
    kept = narrow[:, 0] < narrow[:, 1]
    assert (wide[kept, 0] <= narrow[kept, 0]).all() and (wide[kept, 1] >= narrow[kept, 1]).all()


@pytest.fixture(scope="module")
def cross_models():
    return {method: _cross(method)[::3] for method in ("split", "cqr")}


@pytest.mark.parametrize("fit", [_regressor, _classifier], ids=["regressor", "classifier"])
def test_cv_is_auto_none_or_as_many_folds_as_rows_at_most(fit):
    for cv in (1, "loo"):
        with pytest.raises(ValueError, match="cv must be"):
            fit(cv, 100)
    with pytest.raises(ValueError, match="cv=200 folds need at least as many rows, got 100"):
        fit(200, 100)


def test_bad_input_is_refused():
    X, y, _ = simulated(100)
    with pytest.raises(ValueError, match="'cqr-mda-nested' has no cross-conformal mode"):
        ConformalRegressor(LinearQuantiles(), method="cqr-mda-nested", cv=5).fit(X, y)
    with pytest.raises(ValueError, match="alpha=0.01 needs at least 99 calibration rows"):
        ConformalRegressor(LinearQuantiles(), alpha=0.01, cv=5).fit(X[:50], y[:50])
    model, _, _, X_test = _cross()
    with pytest.raises(ValueError, match="no single margin"):
        model.calibration_quantile()
    with pytest.raises(ValueError, match="has no cross-conformal mode"):
        model.set_params(method="cqr-mda-exact").predict_interval(X_test)


def test_a_cross_conformal_model_survives_save_and_load(tmp_path):
    X, y, truth = simulated(120, d=3)
    X_test = truth.sample(30, random_state=1)[0]
    model = ConformalRegressor(NeuMissQuantileRegressor(**TINY), cv=3, random_state=0).fit(X, y)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert loaded.cross_conformal_ and len(loaded.fold_estimators_) == 3
    np.testing.assert_array_equal(loaded.predict_interval(X_test), model.predict_interval(X_test))
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    assert loaded.summary() == model.summary()
