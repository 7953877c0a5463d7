"""Gaussian conditioning (neumiss.simulation) against direct per-row computations with
explicit inverses."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import neumiss.simulation._gaussian as gaussian
from neumiss.simulation import (
    PatternLayout,
    conditional_mean,
    conditional_moments,
    group_patterns,
)


def _gaussian(d, rank, rng):
    """Mean and covariance B B^T + diag(eps) (rank ``rank`` plus a small diagonal)."""
    B = rng.standard_normal((d, rank))
    return rng.standard_normal(d), B @ B.T + np.diag(rng.uniform(0.01, 0.1, d))


def _data(n, d, rng, missing_rate=0.5):
    mean, cov = _gaussian(d, max(1, d // 2), rng)
    X = rng.multivariate_normal(mean, cov, n)
    X[rng.random((n, d)) < missing_rate] = np.nan
    X[0] = np.nan  # a row with nothing observed
    X[1] = rng.standard_normal(d)  # a complete row
    return X, mean, cov


def _per_row_reference(X, mean, cov):
    """Conditional means, sum of conditional covariances and log-likelihood, row by row."""
    n, d = X.shape
    filled = X.copy()
    cov_sum = np.zeros((d, d))
    loglik = 0.0
    for i in range(n):
        mis = np.isnan(X[i])
        obs = ~mis
        if not obs.any():
            filled[i] = mean
            cov_sum += cov
            continue
        inv_obs = np.linalg.inv(cov[np.ix_(obs, obs)])
        regression = cov[np.ix_(mis, obs)] @ inv_obs
        filled[i, mis] = mean[mis] + regression @ (X[i, obs] - mean[obs])
        cov_sum[np.ix_(mis, mis)] += cov[np.ix_(mis, mis)] - regression @ cov[np.ix_(obs, mis)]
        loglik += multivariate_normal(mean[obs], cov[np.ix_(obs, obs)]).logpdf(X[i, obs])
    return filled, cov_sum, loglik


# (n, d): many rows per pattern, a mix, and (almost) one row per pattern.
SHAPES = [(400, 3), (300, 6), (120, 14)]


@pytest.fixture(params=["precision", "observed"], autouse=True)
def route(request, monkeypatch):
    """Run each test with both routes: patterns with few missing entries through the
    precision matrix (default), or every pattern through its observed block."""
    if request.param == "observed":
        monkeypatch.setattr(gaussian, "_PRECISION_RCOND", 2.0)  # no pivot passes: no Q
        assert gaussian._precision(np.eye(2))[0] is None
    return request.param


@pytest.mark.parametrize(("n", "d"), SHAPES)
def test_conditional_mean_matches_per_row_inverse(n, d):
    X, mean, cov = _data(n, d, np.random.default_rng(d))
    X_before = X.copy()
    expected, _, _ = _per_row_reference(X, mean, cov)
    filled = conditional_mean(X, mean, cov)
    np.testing.assert_allclose(filled, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(X, X_before)  # input untouched
    np.testing.assert_array_equal(filled[0], mean)  # nothing observed -> mean
    np.testing.assert_array_equal(filled[1], X[1])  # complete row unchanged
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(filled[observed], X[observed])


@pytest.mark.parametrize(("n", "d"), SHAPES)
def test_conditional_moments_match_per_row_inverse(n, d):
    X, mean, cov = _data(n, d, np.random.default_rng(10 + d))
    expected_filled, expected_cov_sum, expected_loglik = _per_row_reference(X, mean, cov)
    moments = conditional_moments(X, mean, cov)
    np.testing.assert_allclose(moments.filled, expected_filled, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(moments.cond_cov_sum, expected_cov_sum, rtol=1e-8, atol=1e-8)
    assert moments.loglik == pytest.approx(expected_loglik, rel=1e-10)


def test_small_batches_give_the_same_result(monkeypatch):
    """Patterns and rows split over many memory-capped batches: same numbers."""
    X, mean, cov = _data(300, 5, np.random.default_rng(3))
    whole = conditional_moments(X, mean, cov)
    monkeypatch.setattr(gaussian, "_BATCH_ENTRIES", 20)
    layout = PatternLayout(np.isnan(X))
    for precision_route in (False, True):
        batches = layout.batches(precision_route)
        assert len(batches) > 5
        assert any(len(batch.other_rows) > 1 for batch in batches)
    split = conditional_moments(X, mean, cov, layout=layout)
    np.testing.assert_allclose(split.filled, whole.filled, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(split.cond_cov_sum, whole.cond_cov_sum, rtol=1e-10, atol=1e-10)
    assert split.loglik == pytest.approx(whole.loglik, rel=1e-12)


def test_group_patterns_round_trip():
    rng = np.random.default_rng(0)
    mask = rng.random((500, 7)) < 0.3
    patterns, inverse = group_patterns(mask)
    np.testing.assert_array_equal(patterns[inverse], mask)
    assert len(np.unique(patterns, axis=0)) == len(patterns)
    assert inverse.shape == (500,)
    # 0/1 float masks are accepted and give the same grouping.
    patterns_f, inverse_f = group_patterns(mask.astype(float))
    np.testing.assert_array_equal(patterns_f, patterns)
    np.testing.assert_array_equal(inverse_f, inverse)


def test_group_patterns_more_than_eight_features_and_empty():
    """Packed bits span several bytes; rows differing only in the last bit stay apart."""
    mask = np.zeros((3, 17), dtype=bool)
    mask[1, 16] = True
    mask[2, 0] = True
    patterns, inverse = group_patterns(mask)
    assert len(patterns) == 3
    np.testing.assert_array_equal(patterns[inverse], mask)
    patterns, inverse = group_patterns(np.zeros((0, 4), dtype=bool))
    assert patterns.shape == (0, 4) and inverse.shape == (0,)


def test_singular_covariance_gives_least_squares_solution():
    """Rank-2 covariance: data lie in a plane, so 2 observed entries determine the others.

    Observed blocks of size >= 3 are singular and must be pseudo-inverted; the conditional
    mean then recovers the missing entries exactly.
    """
    rng = np.random.default_rng(1)
    d, n = 8, 200
    B = rng.standard_normal((d, 2))
    mean = rng.standard_normal(d)
    cov = B @ B.T
    X_full = mean + rng.standard_normal((n, 2)) @ B.T
    X = X_full.copy()
    mask = rng.random((n, d)) < 0.4
    mask[:, :2] = False  # at least two observed entries per row
    X[mask] = np.nan
    filled = conditional_mean(X, mean, cov)
    np.testing.assert_allclose(filled, X_full, rtol=1e-6, atol=1e-6)
    moments = conditional_moments(X, mean, cov)
    assert np.isfinite(moments.cond_cov_sum).all()
    assert np.isfinite(moments.loglik)


def test_near_singular_covariance_matches_per_row_inverse():
    """Condition number ~1e8 (below the pseudo-inverse threshold): still the exact answer."""
    rng = np.random.default_rng(2)
    d = 6
    B = rng.standard_normal((d, 3))
    cov = B @ B.T + 1e-7 * np.eye(d)
    mean = np.zeros(d)
    X = rng.multivariate_normal(mean, cov, 100)
    X[rng.random(X.shape) < 0.4] = np.nan
    expected, _, _ = _per_row_reference(X, mean, cov)
    np.testing.assert_allclose(conditional_mean(X, mean, cov), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("X", "mean", "cov", "message"),
    [
        (np.zeros(3), np.zeros(3), np.eye(3), "X must be a 2D"),
        (np.array([[np.inf, 0.0, 1.0]]), np.zeros(3), np.eye(3), "X contains infinite"),
        (np.zeros((2, 3)), np.zeros(2), np.eye(3), "mean must have shape"),
        (np.zeros((2, 3)), np.array([0, np.nan, 0]), np.eye(3), "mean must contain only"),
        (np.zeros((2, 3)), np.zeros(3), np.eye(2), "cov must be a square"),
        (np.zeros((2, 3)), np.zeros(3), np.triu(np.ones((3, 3))), "cov must be symmetric"),
        (np.zeros((2, 3)), np.zeros(3), np.full((3, 3), np.nan), "cov must contain only"),
    ],
)
def test_bad_inputs_raise_clear_errors(X, mean, cov, message):
    with pytest.raises(ValueError, match=message):
        conditional_mean(X, mean, cov)
    with pytest.raises(ValueError, match=message):
        conditional_moments(X, mean, cov)


def test_bad_mask_and_layout_raise():
    with pytest.raises(ValueError, match="mask must be a 2D"):
        group_patterns(np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="mask must be boolean or contain only 0"):
        group_patterns(np.full((2, 2), 0.5))
    layout = PatternLayout(np.zeros((4, 3), dtype=bool))
    with pytest.raises(ValueError, match="layout was built for a mask of shape"):
        conditional_moments(np.zeros((5, 3)), np.zeros(3), np.eye(3), layout=layout)
