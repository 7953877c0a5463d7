"""The oracle interval of the simulated data (the interval benchmark's reference): the
conditional variance of ``y`` given the observed entries and the mask."""

import numpy as np
import pytest
from scipy.stats import norm

from neumiss.simulation import predictive_variance

from ._interval_helpers import simulated


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
    X, _, truth = simulated(300, d=5, missing_rate=0.4, mechanism=mechanism)
    sigma = truth.mechanism_params["sigma_tilde"] if mechanism == "gaussian_sm" else None
    expected = _explicit_variance(X, truth.cov, truth.coef, truth.noise_var, sigma)
    np.testing.assert_allclose(truth.predictive_variance(X), expected, rtol=1e-9)


def test_predictive_variance_matches_monte_carlo_under_self_masking():
    # y - E[y | x_obs, m] has, within each mask, the predicted variance.
    _, _, truth = simulated(1000, d=3, missing_rate=0.3, mechanism="gaussian_sm", seed=3)
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
    X, _, truth = simulated(50, d=4)
    interval = truth.oracle_interval(X, 0.2)
    half = norm.ppf(0.9) * np.sqrt(truth.predictive_variance(X))
    np.testing.assert_allclose(interval.mean(axis=1), truth.bayes_predict(X))
    np.testing.assert_allclose(interval[:, 1] - interval[:, 0], 2 * half)


def test_predictive_variance_refuses_probit_self_masking():
    with pytest.raises(NotImplementedError, match="probit"):
        predictive_variance(np.zeros((2, 2)), np.eye(2), np.ones(2), 1.0, mechanism="probit_sm")
