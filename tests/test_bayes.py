"""The Bayes predictors (neumiss.simulation) against a direct per-row implementation of the
paper's formulas."""

import itertools

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error, r2_score

from neumiss.simulation import bayes_predict, conditional_expectation, make_regression


def _bayes_per_row(x, mean, cov, coef, intercept, mu_tilde=None, sigma_tilde=None):
    """Paper eq. 3 (mu_tilde is None) or eq. 5, one row, explicit inverses."""
    mis, obs = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
    pred = intercept + coef[obs] @ x[obs]
    if mis.size == 0:
        return pred
    cov_mm = cov[np.ix_(mis, mis)]
    if obs.size:
        inv_obs = np.linalg.inv(cov[np.ix_(obs, obs)])
        cov_mo = cov[np.ix_(mis, obs)]
        mu_cond = mean[mis] + cov_mo @ inv_obs @ (x[obs] - mean[obs])
        cov_cond = cov_mm - cov_mo @ inv_obs @ cov_mo.T
    else:
        mu_cond, cov_cond = mean[mis], cov_mm
    if mu_tilde is None:
        expected = mu_cond
    else:
        d_s_inv = np.diag(sigma_tilde[mis] ** 2) @ np.linalg.inv(cov_cond)
        expected = np.linalg.inv(np.eye(mis.size) + d_s_inv) @ (mu_tilde[mis] + d_s_inv @ mu_cond)
    return pred + coef[mis] @ expected


@pytest.fixture
def random_problem():
    rng = np.random.default_rng(0)
    d = 7
    A = rng.standard_normal((d, d))
    cov = A @ A.T + 0.1 * np.eye(d)
    mean = rng.standard_normal(d)
    X = rng.multivariate_normal(mean, cov, size=400)
    X[rng.random(X.shape) < 0.45] = np.nan
    X[:3] = np.nan  # rows with every entry missing
    X[3:6] = rng.standard_normal((3, d))  # complete rows
    params = {
        "coef": rng.standard_normal(d),
        "intercept": 0.7,
        "mu_tilde": mean + rng.uniform(-2, 2, d),
        "sigma_tilde": rng.uniform(0.3, 2.0, d),
    }
    return X, mean, cov, params


def test_mcar_matches_per_row_inverse(random_problem):
    X, mean, cov, p = random_problem
    X_before = X.copy()
    expected = [_bayes_per_row(x, mean, cov, p["coef"], p["intercept"]) for x in X]
    for mechanism in ("MCAR", "MAR"):
        pred = bayes_predict(X, mean, cov, p["coef"], p["intercept"], mechanism=mechanism)
        np.testing.assert_allclose(pred, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(X, X_before)


def test_gaussian_self_masking_matches_paper_eq5(random_problem):
    X, mean, cov, p = random_problem
    X_before = X.copy()
    pred = bayes_predict(
        X,
        mean,
        cov,
        p["coef"],
        p["intercept"],
        mechanism="gaussian_sm",
        mu_tilde=p["mu_tilde"],
        sigma_tilde=p["sigma_tilde"],
    )
    expected = [
        _bayes_per_row(x, mean, cov, p["coef"], p["intercept"], p["mu_tilde"], p["sigma_tilde"])
        for x in X
    ]
    np.testing.assert_allclose(pred, expected, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(X, X_before)
    # The self-masking correction really changes the prediction on incomplete rows.
    mcar = bayes_predict(X, mean, cov, p["coef"], p["intercept"])
    incomplete = np.isnan(X).any(axis=1)
    assert np.all(np.abs(pred - mcar)[incomplete] > 1e-6)
    np.testing.assert_allclose(pred[~incomplete], mcar[~incomplete])


def test_gaussian_self_masking_on_paper_covariance():
    """Ill-conditioned covariance of the paper (B B^T + small diagonal), d = 30."""
    X, _, truth = make_regression(150, 30, mechanism="gaussian_sm", random_state=4)
    p = truth.mechanism_params
    expected = [
        _bayes_per_row(x, truth.mean, truth.cov, truth.coef, 1.0, p["mu_tilde"], p["sigma_tilde"])
        for x in X
    ]
    np.testing.assert_allclose(truth.bayes_predict(X), expected, rtol=1e-7, atol=1e-7)


def test_conditional_expectation_keeps_observed_entries(random_problem):
    X, mean, cov, p = random_problem
    filled = conditional_expectation(
        X, mean, cov, "gaussian_sm", mu_tilde=p["mu_tilde"], sigma_tilde=p["sigma_tilde"]
    )
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(filled[observed], X[observed])
    assert np.isfinite(filled).all()
    # Every-entry-missing rows: E[X | M] under the product of N(mean, cov) and the mask.
    d_diag = np.diag(p["sigma_tilde"] ** 2)
    expected = mean + cov @ np.linalg.solve(cov + d_diag, p["mu_tilde"] - mean)
    np.testing.assert_allclose(filled[0], expected)


def _simple_baselines(X_train, y_train, X_test):
    """Predictions of mean imputation + LR and of 0-imputation + mask + LR."""
    means = np.nanmean(X_train, axis=0)
    out = []
    for features in (
        lambda X: np.where(np.isnan(X), means, X),
        lambda X: np.hstack([np.nan_to_num(X), np.isnan(X)]),
    ):
        model = LinearRegression().fit(features(X_train), y_train)
        out.append(model.predict(features(X_test)))
    return out


@pytest.mark.parametrize("mechanism", ["MCAR", "MAR", "gaussian_sm"])
def test_bayes_predictor_beats_simple_predictors(mechanism):
    X_train, y_train, truth = make_regression(20_000, 8, mechanism=mechanism, random_state=0)
    X_test, y_test = truth.sample(20_000, random_state=1)
    bayes_mse = mean_squared_error(y_test, truth.bayes_predict(X_test))
    for baseline in _simple_baselines(X_train, y_train, X_test):
        assert bayes_mse < 0.97 * mean_squared_error(y_test, baseline)
    if mechanism == "gaussian_sm":
        # Ignoring the self-masking (eq. 3 instead of eq. 5) costs accuracy.
        mar_formula = bayes_predict(X_test, truth.mean, truth.cov, truth.coef, truth.intercept)
        assert bayes_mse < 0.9 * mean_squared_error(y_test, mar_formula)


def test_gaussian_self_masking_predictor_is_unbiased_given_the_mask():
    """E[y - f*(X_obs, M) | M] = 0: residual means vanish on the rows missing each feature."""
    _, _, truth = make_regression(100, 5, mechanism="gaussian_sm", random_state=2)
    X, y = truth.sample(200_000, random_state=3)
    mask = np.isnan(X)
    residual_sm = y - truth.bayes_predict(X)
    residual_mar = y - bayes_predict(X, truth.mean, truth.cov, truth.coef, truth.intercept)
    for j in range(5):
        rows = mask[:, j]
        se = residual_sm[rows].std() / np.sqrt(rows.sum())
        assert abs(residual_sm[rows].mean()) < 4 * se
        assert abs(residual_mar[rows].mean()) > 10 * se


def test_mcar_r2_matches_theoretical_bayes_rate():
    """Bayes R² = 1 - (noise + E_M[coef_mis' cov_mis|obs coef_mis]) / Var(y), all 2^d patterns."""
    d, rate = 6, 0.4
    _, _, truth = make_regression(100, d, mechanism="MCAR", missing_rate=rate, random_state=5)
    cov, coef = truth.cov, truth.coef
    expected_mse = truth.noise_var
    for pattern in itertools.product([False, True], repeat=d):
        mis = np.flatnonzero(pattern)
        obs = np.flatnonzero(~np.array(pattern))
        if mis.size == 0:
            continue
        cond = cov[np.ix_(mis, mis)]
        if obs.size:
            cond = (
                cond
                - cov[np.ix_(mis, obs)]
                @ np.linalg.inv(cov[np.ix_(obs, obs)])
                @ cov[np.ix_(obs, mis)]
            )
        expected_mse += rate**mis.size * (1 - rate) ** obs.size * coef[mis] @ cond @ coef[mis]
    theoretical_r2 = 1 - expected_mse / (coef @ cov @ coef + truth.noise_var)
    X, y = truth.sample(200_000, random_state=6)
    assert truth.bayes_rate(X, y) == pytest.approx(theoretical_r2, abs=0.005)
    assert truth.bayes_rate(X, y) == pytest.approx(r2_score(y, truth.bayes_predict(X)))


def test_probit_self_masking_has_no_closed_form():
    X, _, truth = make_regression(50, 4, mechanism="probit_sm", random_state=0)
    with pytest.raises(NotImplementedError, match="no closed-form"):
        truth.bayes_predict(X)
    with pytest.raises(NotImplementedError, match="no closed-form"):
        bayes_predict(X, truth.mean, truth.cov, truth.coef, 1.0, mechanism="probit_sm")


def test_nonlinear_link_has_no_bayes_predictor():
    X, _, truth = make_regression(50, 4, link="square", random_state=0)
    with pytest.raises(NotImplementedError, match="link='linear'"):
        truth.bayes_predict(X)


def test_bad_arguments(random_problem):
    X, mean, cov, p = random_problem
    coef = p["coef"]
    with pytest.raises(ValueError, match="mechanism must be one of"):
        bayes_predict(X, mean, cov, coef, mechanism="MNAR")
    with pytest.raises(TypeError, match="missing: \\['sigma_tilde'\\]"):
        bayes_predict(X, mean, cov, coef, mechanism="gaussian_sm", mu_tilde=mean)
    with pytest.raises(TypeError, match="unknown: \\['k'\\]"):
        bayes_predict(X, mean, cov, coef, mechanism="MCAR", k=2)
    with pytest.raises(ValueError, match="coef must have shape"):
        bayes_predict(X, mean, cov, coef[:-1])
    with pytest.raises(ValueError, match="sigma_tilde must be positive"):
        bayes_predict(
            X,
            mean,
            cov,
            coef,
            mechanism="gaussian_sm",
            mu_tilde=mean,
            sigma_tilde=np.zeros_like(mean),
        )
    with pytest.raises(ValueError, match="intercept"):
        bayes_predict(X, mean, cov, coef, intercept=np.nan)
