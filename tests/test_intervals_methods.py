"""Each interval method on its own: its scores, margins and intervals from a
hand-made :class:`~neumiss.intervals.Calibration`, against an explicit computation."""

import math

import numpy as np
import pytest

from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import (
    Calibration,
    CQRMethod,
    MDAExactMethod,
    MDANestedMethod,
    MondrianMethod,
    SplitMethod,
)

from ._interval_helpers import (
    FixedQuantiles,
    conformal_rank,
    kth,
    nested_lower_rank,
    usual_rank,
)

BASE = FixedQuantiles()


def _rows(n, d=2, missing_rate=0.3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < missing_rate] = np.nan
    return X, rng.normal(scale=2.0, size=n)


def _calibration(scores, cells=None, patterns=None, count=(0, 0, 0), **rows):
    """A calibration of ``BASE``: by default one cell, no frequent pattern, 2 features."""
    cells = np.zeros(len(scores), np.int64) if cells is None else np.asarray(cells)
    patterns = np.zeros((0, 2), bool) if patterns is None else patterns
    return Calibration(BASE, np.asarray(scores, float), cells, patterns,
                       np.asarray(count, np.int64), **rows)


@pytest.mark.parametrize("confidence", [None, 0.75])
def test_split_scores_absolute_residuals_and_widens_the_point_prediction(confidence):
    X, y = _rows(30)
    scores = SplitMethod().scores(BASE, X, y)
    np.testing.assert_array_equal(scores, np.abs(y - np.nansum(X, axis=1)))
    X_test, _ = _rows(5, seed=1)
    q = kth(scores, conformal_rank(30, 0.1, confidence))
    center = np.nansum(X_test, axis=1)
    np.testing.assert_array_equal(
        SplitMethod().intervals(_calibration(scores), X_test, 0.1, confidence),
        np.column_stack([center - q, center + q]))


def test_cqr_scores_the_distance_outside_the_quantiles_and_widens_them():
    X, y = _rows(30)
    scores = CQRMethod().scores(BASE, X, y)
    for x, target, score in zip(X, y, scores):
        center, half = np.nansum(x), 1 + np.isnan(x).sum()
        distance = abs(target - center) - half  # negative inside the bounds
        assert score == pytest.approx(distance, abs=1e-12)
    X_test, _ = _rows(5, seed=1)
    q = kth(scores, conformal_rank(30, 0.2, None))
    bounds = BASE.predict_quantiles(X_test)[:, [0, 2]]
    np.testing.assert_allclose(CQRMethod().intervals(_calibration(scores), X_test, 0.2, None),
                               bounds + [-q, q])


def test_an_interval_emptied_by_a_negative_margin_becomes_its_midpoint():
    # Calibration rows with two missing entries: y at the center, 3 inside both bounds.
    cal = np.full((20, 2), np.nan)
    scores = CQRMethod().scores(BASE, cal, np.zeros(20))
    np.testing.assert_array_equal(scores, -3.0)
    test = np.array([[1.0, 2.0], [np.nan, np.nan]])  # half-widths 1 (emptied) and 3
    interval = CQRMethod().intervals(_calibration(scores), test, 0.1, None)
    np.testing.assert_array_equal(interval, [[3.0, 3.0], [0.0, 0.0]])


def test_mondrian_margins_are_each_cells_quantile_or_the_fallback():
    # Cell 0: the fully observed pattern (40 rows); cell 1: every other mask (5 rows,
    # fewer than the 9 that alpha = 0.1 needs).
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(size=40), rng.normal(size=5) + 1.0])
    cells = np.repeat([0, 1], [40, 5])
    calibration = _calibration(scores, cells, patterns=np.zeros((1, 2), bool), count=(1, 1, 1))
    everyone = kth(scores, conformal_rank(45, 0.1, None))
    own = kth(scores[:40], conformal_rank(40, 0.1, None))
    fallback = max(everyone, scores[40:].max())
    test = np.array([[1.0, 2.0], [np.nan, 2.0], [np.nan, np.nan]])
    np.testing.assert_array_equal(MondrianMethod().margin(calibration, test, 0.1, None),
                                  [own, fallback, fallback])
    bounds = BASE.predict_quantiles(test)[:, [0, 2]]
    np.testing.assert_allclose(MondrianMethod().intervals(calibration, test, 0.1, None),
                               bounds + np.array([-1, 1]) * [[own], [fallback], [fallback]])


def _mda_calibration(n=40, seed=0):
    rows, targets = _rows(n, d=3, missing_rate=0.4, seed=seed)
    return _calibration(CQRMethod().scores(BASE, rows, targets), rows=rows, targets=targets)


def _cqr_score(row, target):
    low, _, high = BASE.predict_quantiles(row[None])[0]
    return max(low - target, target - high)


def _nested_loop(calibration, x, alpha):
    """CP-MDA-Nested for one row, one calibration row at a time."""
    lows, highs = [], []
    for row, target in zip(calibration.rows, calibration.targets):
        union = np.isnan(row) | np.isnan(x)
        score = _cqr_score(np.where(union, np.nan, row), target)
        low, _, high = BASE.predict_quantiles(np.where(union, np.nan, x)[None])[0]
        lows.append(low - score)
        highs.append(high + score)
    n = len(lows)
    return kth(lows, nested_lower_rank(n, alpha)), kth(highs, usual_rank(n, alpha))


def _exact_loop(calibration, x, alpha):
    """CP-MDA-Exact for one row: calibration rows with a mask inside x's, re-masked."""
    mask = np.isnan(x)
    inside = [k for k, row in enumerate(calibration.rows) if not (np.isnan(row) & ~mask).any()]
    if len(inside) < math.ceil(1 / alpha - 1):
        return _nested_loop(calibration, x, alpha)
    scores = [_cqr_score(np.where(mask, np.nan, calibration.rows[k]), calibration.targets[k])
              for k in inside]
    q = kth(scores, usual_rank(len(inside), alpha))
    low, _, high = BASE.predict_quantiles(x[None])[0]
    return low - q, high + q


@pytest.mark.parametrize("method,loop", [(MDANestedMethod(), _nested_loop),
                                         (MDAExactMethod(), _exact_loop)])
@pytest.mark.parametrize("alpha", [0.1, 0.25])
def test_mda_methods_match_a_loop_over_calibration_rows(method, loop, alpha):
    calibration = _mda_calibration()
    X_test, _ = _rows(12, d=3, missing_rate=0.4, seed=1)
    expected = np.array([loop(calibration, x, alpha) for x in X_test])
    np.testing.assert_allclose(method.intervals(calibration, X_test, alpha, None), expected,
                               rtol=1e-12)


def test_exact_differs_from_nested_only_for_masks_with_enough_rows_inside():
    calibration = _mda_calibration(n=30)
    X_test, _ = _rows(20, d=3, missing_rate=0.4, seed=2)
    exact = MDAExactMethod().intervals(calibration, X_test, 0.1, None)
    nested = MDANestedMethod().intervals(calibration, X_test, 0.1, None)
    rows = calibration.rows
    inside = np.array([(~(np.isnan(rows) & ~np.isnan(x)).any(axis=1)).sum() for x in X_test])
    assert (inside < 9).any() and (inside >= 9).any()
    np.testing.assert_array_equal(exact[inside < 9], nested[inside < 9])
    assert not np.array_equal(exact[inside >= 9], nested[inside >= 9])


@pytest.mark.parametrize("method", [MDAExactMethod(), MDANestedMethod()])
def test_mda_methods_need_the_calibration_rows(method):
    with pytest.raises(ValueError, match=f"method='{method.name}' needs the calibration rows"):
        method.intervals(_calibration(np.zeros(20)), np.zeros((2, 2)), 0.1, None)


def test_what_each_method_asks_of_the_base_model_and_the_fit():
    for method in (SplitMethod(), CQRMethod(), MondrianMethod()):
        assert method.confident and not method.keeps_rows
    for method in (MDAExactMethod(), MDANestedMethod()):
        assert method.keeps_rows and not method.confident
    assert isinstance(SplitMethod().default_estimator(0.2, 3), NeuMissRegressor)
    head = MondrianMethod().default_estimator(0.2, 3)
    assert isinstance(head, NeuMissQuantileRegressor) and head.random_state == 3
    assert head.quantiles == (0.1, 0.5, 0.9)
