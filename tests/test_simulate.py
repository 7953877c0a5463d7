"""The paper's simulated data (neumiss.simulation): Gaussian covariates, missingness
mechanisms, the ground truth and its further samples."""

import dataclasses

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import expit
from scipy.stats import norm

from neumiss.simulation import (
    MAR,
    MCAR,
    MECHANISM_NAMES,
    MECHANISMS,
    GaussianSelfMasking,
    ProbitSelfMasking,
    make_regression,
)


def _expected_rate(proba_of_x, mean, sd):
    """E[P(M=1 | X)] for X ~ N(mean, sd^2), by numerical integration."""
    value, _ = quad(
        lambda x: proba_of_x(x) * norm.pdf(x, mean, sd),
        mean - 12 * sd,
        mean + 12 * sd,
        points=[mean],
        limit=200,
    )
    return value


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_output_shapes_and_reproducibility(mechanism):
    X, y, truth = make_regression(300, 7, mechanism=mechanism, random_state=3)
    assert X.shape == (300, 7) and X.dtype == np.float64 and y.shape == (300,)
    assert np.isnan(X).any() and np.isfinite(y).all()
    assert truth.mechanism == mechanism and truth.mean.shape == (7,) and truth.cov.shape == (7, 7)
    X2, y2, _ = make_regression(300, 7, mechanism=mechanism, random_state=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    X3, _, _ = make_regression(300, 7, mechanism=mechanism, random_state=4)
    assert not np.array_equal(np.isnan(X), np.isnan(X3))


@pytest.mark.parametrize("prop_latent, n_latent", [(0.5, 5), (0.3, 3), (0.0, 1)])
def test_covariance_is_low_rank_plus_small_diagonal(prop_latent, n_latent):
    _, _, truth = make_regression(10, 10, prop_latent=prop_latent, random_state=0)
    cov = truth.cov
    np.testing.assert_allclose(cov, cov.T)
    eigvals = np.linalg.eigvalsh(cov)
    # B B^T has rank n_latent, the diagonal lies in [0.01, 0.1]: by Weyl's
    # inequalities exactly d - n_latent eigenvalues lie in [0.01, 0.1].
    small = eigvals[eigvals <= 0.1 + 1e-12]
    assert small.size == 10 - n_latent
    assert small.min() >= 0.01 - 1e-12
    np.testing.assert_array_equal(truth.coef, np.ones(10))
    assert truth.intercept == 1.0


def test_truth_sample_matches_the_model():
    _, _, truth = make_regression(10, 6, snr=4.0, random_state=1)
    X, y, X_complete = truth.sample(200_000, random_state=2, return_complete=True)
    np.testing.assert_array_equal(np.isnan(X), ~np.isclose(X, X_complete, equal_nan=False))
    np.testing.assert_allclose(X_complete.mean(0), truth.mean, atol=0.05)
    np.testing.assert_allclose(np.cov(X_complete, rowvar=False), truth.cov, atol=0.1, rtol=0.02)
    signal = truth.intercept + X_complete @ truth.coef
    noise = y - signal
    expected_noise_var = truth.coef @ truth.cov @ truth.coef / 4.0
    assert truth.noise_var == pytest.approx(expected_noise_var)
    assert noise.var() == pytest.approx(expected_noise_var, rel=0.02)
    assert abs(noise.mean()) < 0.05 * np.sqrt(expected_noise_var)


@pytest.mark.parametrize("link", ["linear", "square", "cube", "stairs"])
def test_links_reach_the_requested_snr(link):
    _, _, truth = make_regression(10, 5, link=link, snr=3.0, random_state=0)
    X, y, X_complete = truth.sample(300_000, random_state=1, return_complete=True)
    signal = truth.signal(X_complete)
    assert np.var(signal) / truth.noise_var == pytest.approx(3.0, rel=0.05)
    assert np.var(y - signal) == pytest.approx(truth.noise_var, rel=0.02)
    s = X_complete @ truth.coef
    center, scale = truth.mean @ truth.coef, np.sqrt(truth.coef @ truth.cov @ truth.coef)
    u = (s - center) / scale
    expected = {"linear": u, "square": u**2, "cube": u**3, "stairs": np.floor(2 * u) / 2}[link]
    np.testing.assert_allclose(signal, truth.intercept + center + scale * expected)


@pytest.mark.parametrize(
    "mechanism, params",
    [
        ("MCAR", {}),
        ("MAR", {}),
        ("gaussian_sm", {}),
        ("probit_sm", {}),
        ("probit_sm", {"standardize": True}),
        ("gaussian_sm", {"k": 0.5}),
    ],
)
@pytest.mark.parametrize("missing_rate", [0.5, 0.2])
def test_new_samples_reach_missing_rate(mechanism, params, missing_rate):
    _, _, truth = make_regression(
        5_000, 20, mechanism=mechanism, missing_rate=missing_rate, random_state=0, **params
    )
    X, _ = truth.sample(40_000, random_state=1)
    rates = np.isnan(X).mean(axis=0)
    if mechanism == "MAR":
        observed = truth.mechanism_params["observed_features"]
        assert observed.size == 2  # 10% of 20 features
        np.testing.assert_array_equal(rates[observed], 0.0)
        rates = np.delete(rates, observed)
    # 40k Bernoulli draws: sd <= 0.0025; the MAR calibration sample adds a little.
    np.testing.assert_allclose(rates, missing_rate, atol=0.02)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_zero_missing_rate_gives_complete_data(mechanism):
    X, _, truth = make_regression(2_000, 5, mechanism=mechanism, missing_rate=0.0, random_state=0)
    assert not np.isnan(X).any()
    assert not np.isnan(truth.sample(2_000, random_state=1)[0]).any()


def test_mar_calibration_is_exact_and_depends_on_observed_features_only():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3_000, 12)) @ rng.standard_normal((12, 12)) + 3.0
    mech = MAR(missing_rate=0.3, p_obs=0.25, random_state=0).fit(X)
    assert mech.observed_features_.size == 3
    observed, incomplete = mech.observed_features_, mech.incomplete_features_
    np.testing.assert_array_equal(np.sort(np.r_[observed, incomplete]), np.arange(12))
    expected = expit(X[:, observed] @ mech.coef_ + mech.intercept_)
    np.testing.assert_allclose(expected.mean(axis=0), 0.3, atol=1e-8)
    proba = mech.missing_proba(X)
    np.testing.assert_allclose(proba[:, incomplete], expected)
    np.testing.assert_array_equal(proba[:, observed], 0.0)
    # Changing the incomplete features does not change their missingness probability.
    X_changed = X.copy()
    X_changed[:, incomplete] = rng.standard_normal((3_000, incomplete.size))
    np.testing.assert_array_equal(mech.missing_proba(X_changed), proba)
    # The logit has a standard deviation between 2 and 10.
    logit_sd = (X[:, observed] @ mech.coef_).std(axis=0)
    assert np.all((logit_sd > 1.8) & (logit_sd < 10.5))


def test_gaussian_self_masking_authors_convention():
    _, _, truth = make_regression(100, 8, mechanism="gaussian_sm", missing_rate=0.5, random_state=0)
    params = truth.mechanism_params
    sd = np.sqrt(np.diag(truth.cov))
    np.testing.assert_allclose(params["mu_tilde"], truth.mean + 2 * sd)
    np.testing.assert_array_equal(params["K"], 1.0)
    ratio = params["sigma_tilde"] / sd
    np.testing.assert_allclose(ratio, ratio[0])
    for j in range(8):
        rate = _expected_rate(
            lambda x, j=j: (
                params["K"][j]
                * np.exp(-0.5 * (x - params["mu_tilde"][j]) ** 2 / params["sigma_tilde"][j] ** 2)
            ),
            truth.mean[j],
            sd[j],
        )
        assert rate == pytest.approx(0.5, abs=1e-7)


def test_gaussian_self_masking_fixed_width_solves_k_or_refuses():
    rng = np.random.default_rng(0)
    X = rng.normal(2.0, 3.0, size=(50_000, 3))
    mech = GaussianSelfMasking(missing_rate=0.2, k=2, sigma_scale=1.0).fit(X)
    mean, sd = X.mean(0), X.std(0)
    np.testing.assert_allclose(mech.sigma_tilde_, sd)
    assert np.all((mech.K_ > 0) & (mech.K_ < 1))
    for j in range(3):
        rate = _expected_rate(
            lambda x, j=j: mech.K_[j] * np.exp(-0.5 * ((x - mech.mu_tilde_[j]) / sd[j]) ** 2),
            mean[j],
            sd[j],
        )
        assert rate == pytest.approx(0.2, abs=1e-7)
    # Values near mu_tilde are the most often missing.
    mask = mech.sample_mask(X, random_state=1)
    near = np.abs(X - mech.mu_tilde_) < 0.5 * sd
    far = np.abs(X - mech.mu_tilde_) > 2.5 * sd
    assert mask[near].mean() > 0.8 * mech.K_[0] and mask[far].mean() < 0.1
    with pytest.raises(ValueError, match="unreachable"):
        GaussianSelfMasking(missing_rate=0.5, k=2, sigma_scale=1.0).fit(X)


@pytest.mark.parametrize("lam, standardize", [(0.5, False), (0.5, True), (-2.0, False)])
def test_probit_self_masking_rate_and_slope(lam, standardize):
    rng = np.random.default_rng(0)
    mean_true, sd_true = np.array([1.0, -2.0]), np.array([0.5, 4.0])
    cov = np.diag(sd_true**2)
    X = rng.normal(mean_true, sd_true, size=(100_000, 2))
    mech = ProbitSelfMasking(missing_rate=0.3, lam=lam, standardize=standardize)
    mech.fit(X, mean=mean_true, cov=cov)
    expected_lam = lam / sd_true if standardize else np.full(2, lam)
    np.testing.assert_allclose(mech.lam_, expected_lam)
    for j in range(2):
        rate = _expected_rate(
            lambda x, j=j: norm.cdf(mech.lam_[j] * (x - mech.mu_tilde_[j])),
            mean_true[j],
            sd_true[j],
        )
        assert rate == pytest.approx(0.3, abs=1e-7)
    proba = mech.missing_proba(X)
    np.testing.assert_allclose(proba, norm.cdf(mech.lam_ * (X - mech.mu_tilde_)))
    # Self-masking: the probability is monotone in the feature's own value.
    order = np.argsort(X[:, 1])
    assert np.all(np.sign(lam) * np.diff(proba[order, 1]) >= 0)
    assert np.isnan(mech.apply(X, random_state=0)).mean() == pytest.approx(0.3, abs=0.01)


def test_mechanisms_on_user_arrays_do_not_mutate_and_are_reproducible():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1_000, 6))
    X_before = X.copy()
    for mech in (
        MCAR(0.4),
        MAR(0.4, random_state=0),
        GaussianSelfMasking(0.4),
        ProbitSelfMasking(0.4),
    ):
        mech.fit(X)
        mask = mech.sample_mask(X, random_state=5)
        assert mask.dtype == bool and mask.shape == X.shape
        np.testing.assert_array_equal(mask, mech.sample_mask(X, random_state=5))
        X_nan = mech.apply(X, random_state=5)
        np.testing.assert_array_equal(np.isnan(X_nan), mask)
        np.testing.assert_array_equal(X_nan[~mask], X[~mask])
        np.testing.assert_array_equal(X, X_before)


def test_mcar_mask_is_independent_of_values():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100_000, 3))
    mask = MCAR(0.25).fit(X).sample_mask(X, random_state=1)
    np.testing.assert_allclose(mask.mean(0), 0.25, atol=0.01)
    np.testing.assert_allclose(mask[X > 1].mean(), mask[X < -1].mean(), atol=0.015)
    # Entries are independent: a pair is jointly missing with probability 0.25^2.
    assert (mask[:, 0] & mask[:, 1]).mean() == pytest.approx(0.0625, abs=0.005)


def test_truth_is_frozen_and_read_only():
    _, _, truth = make_regression(50, 4, mechanism="gaussian_sm", random_state=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        truth.noise_var = 1.0
    with pytest.raises(ValueError):
        truth.cov[0, 0] = 5.0
    with pytest.raises(TypeError):
        truth.mechanism_params["k"] = 3
    with pytest.raises(ValueError):
        truth.mechanism_params["mu_tilde"][0] = 0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mechanism": "MNAR"}, "mechanism must be one of .*MAR.*MCAR.*gaussian_sm.*probit_sm"),
        ({"missing_rate": 1.0}, r"make_regression: missing_rate must be a number in \[0, 1\)"),
        ({"missing_rate": -0.1}, "missing_rate"),
        ({"n_features": 0}, "make_regression: n_features must be an integer >= 1, got 0"),
        ({"n_samples": 0}, "n_samples must be an integer >= 1"),
        ({"n_samples": 2.5}, "n_samples must be an integer >= 1, got 2.5"),
        ({"snr": 0}, "snr must be a finite number > 0 or inf, got 0"),
        ({"snr": -1.0}, "snr"),
        ({"prop_latent": 1.5}, r"prop_latent must be a number in \[0, 1\]"),
        ({"link": "exp"}, "link must be one of 'linear', 'square', 'cube', 'stairs'"),
        ({"random_state": -1}, "random_state must be None, an integer >= 0 or a numpy Generator"),
        ({"mechanism": "MAR", "n_features": 1}, "at least 2 features"),
        ({"mechanism": "MAR", "p_obs": 1.0}, r"MAR: p_obs must be a number in \[0, 1\)"),
        (
            {"mechanism": "probit_sm", "lam": 0.0},
            "ProbitSelfMasking: lam must be a number < 0 or a finite number > 0, got 0.0",
        ),
        (
            {"mechanism": "gaussian_sm", "sigma_scale": -1.0},
            "GaussianSelfMasking: sigma_scale must be None or a finite number > 0",
        ),
        ({"mechanism": "gaussian_sm", "k": np.nan}, "k must be a finite number, got nan"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    args = {"n_samples": 20, "n_features": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        make_regression(**args)


@pytest.mark.parametrize(
    ("kwargs", "owner", "name"),
    [
        ({"n_samples": True}, "make_regression", "n_samples"),
        ({"n_features": np.True_}, "make_regression", "n_features"),
        ({"missing_rate": False}, "make_regression", "missing_rate"),
        ({"snr": True}, "make_regression", "snr"),
        ({"prop_latent": True}, "make_regression", "prop_latent"),
        ({"random_state": True}, "make_regression", "random_state"),
        ({"mechanism": "MAR", "p_obs": False}, "MAR", "p_obs"),
        ({"mechanism": "gaussian_sm", "k": True}, "GaussianSelfMasking", "k"),
        ({"mechanism": "gaussian_sm", "sigma_scale": True}, "GaussianSelfMasking", "sigma_scale"),
        ({"mechanism": "probit_sm", "lam": True}, "ProbitSelfMasking", "lam"),
        ({"mechanism": "probit_sm", "standardize": 1}, "ProbitSelfMasking", "standardize"),
        ({"mechanism": "probit_sm", "standardize": "no"}, "ProbitSelfMasking", "standardize"),
    ],
    ids=repr,
)
def test_booleans_are_not_numbers_and_numbers_not_booleans(kwargs, owner, name):
    args = {"n_samples": 20, "n_features": 5, **kwargs}
    with pytest.raises(ValueError, match=f"^{owner}: {name} must be "):
        make_regression(**args)


@pytest.mark.parametrize(
    ("mechanism", "name"),
    [
        (MCAR(missing_rate=True), "missing_rate"),
        (MAR(random_state=True), "random_state"),
        (ProbitSelfMasking(standardize=np.float64(1.0)), "standardize"),
    ],
    ids=repr,
)
def test_mechanism_fit_checks_its_parameters(mechanism, name):
    with pytest.raises(ValueError, match=f"^{type(mechanism).__name__}: {name} must be "):
        mechanism.fit(np.random.default_rng(0).standard_normal((10, 3)))


def test_truth_sample_checks_its_arguments():
    _, _, truth = make_regression(20, 3, random_state=0)
    with pytest.raises(ValueError, match="^SimulationTruth.sample: n_samples must be an integer"):
        truth.sample(True)
    with pytest.raises(ValueError, match="^SimulationTruth.sample: random_state must be"):
        truth.sample(5, random_state="seed")


def test_numpy_scalars_and_infinite_snr_are_valid():
    python = make_regression(30, 4, missing_rate=0.3, snr=5.0, prop_latent=0.5, random_state=1)
    numpy = make_regression(
        np.int64(30),
        np.int32(4),
        missing_rate=np.float64(0.3),
        snr=np.float32(5.0),
        prop_latent=np.float64(0.5),
        random_state=np.int64(1),
    )
    for a, b in zip(python[:2], numpy[:2]):
        np.testing.assert_array_equal(a, b)
    _, _, truth = make_regression(30, 4, mechanism="probit_sm", snr=np.inf, standardize=np.True_)
    assert truth.noise_var == 0.0
    _, y, X_complete = truth.sample(30, random_state=0, return_complete=True)
    np.testing.assert_allclose(y, truth.signal(X_complete))


def test_mechanism_names_are_those_of_bayes_in_order():
    # The benchmark relies on this order.
    assert tuple(MECHANISMS) == MECHANISM_NAMES == ("MCAR", "MAR", "gaussian_sm", "probit_sm")
    assert [cls.__name__ for cls in MECHANISMS.values()] == [
        "MCAR", "MAR", "GaussianSelfMasking", "ProbitSelfMasking"
    ]


def test_unknown_mechanism_parameter_is_named():
    with pytest.raises(TypeError, match="'lam'.*'MCAR'"):
        make_regression(20, 5, mechanism="MCAR", lam=0.5)
    with pytest.raises(TypeError, match="'k'.*valid ones: \\['lam', 'standardize'\\]"):
        make_regression(20, 5, mechanism="probit_sm", k=2)


def test_mechanisms_reject_incomplete_or_mismatched_input():
    X = np.ones((10, 3))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="complete"):
        MCAR(0.2).fit(X)
    mech = MCAR(0.2).fit(np.ones((10, 3)))
    with pytest.raises(ValueError, match="fitted on 3"):
        mech.sample_mask(np.ones((10, 4)))
    with pytest.raises(ValueError, match="missing_rate"):
        MCAR(1.5).fit(np.ones((10, 3)))
