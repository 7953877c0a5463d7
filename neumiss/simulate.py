"""Simulated data of the NeuMiss paper: Gaussian covariates, a linear response, missing values.

Paper: Le Morvan et al., "NeuMiss networks", NeurIPS 2020, Section 5.4 and the
supplement ("Additional results"). Conventions for the self-masking
mechanisms follow the authors' released code (``marineLM/NeuMiss``), which
produced the published figures.

Two layers of API:

* Missingness mechanisms usable on any complete array: :class:`MCAR`,
  :class:`MAR`, :class:`GaussianSelfMasking`, :class:`ProbitSelfMasking`.
  Each is configured in ``__init__``, calibrated on complete data with
  ``fit(X, mean=None, cov=None)``, and then gives ``missing_proba(X)``
  (``P(M = 1 | X)`` entrywise), ``sample_mask(X, random_state)`` and
  ``apply(X, random_state)`` (a copy of ``X`` with NaN)::

      mask = MCAR(missing_rate=0.3).fit(X).sample_mask(X, random_state=0)
      X_nan = GaussianSelfMasking(0.4, k=2).fit(X).apply(X, random_state=0)

* :func:`make_regression` draws a ground truth (mean, covariance, response
  model, calibrated mechanism) and one data set, and returns the truth as a
  frozen :class:`SimulationTruth`. Further sets from the *same* distribution
  (validation, test) come from ``truth.sample``::

      X_train, y_train, truth = make_regression(20_000, 10, mechanism="MAR", random_state=0)
      X_test, y_test = truth.sample(10_000, random_state=1)
      r2_bayes = truth.bayes_rate(X_test, y_test)

Masks are boolean arrays with ``True`` = missing, same shape as ``X``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import norm
from sklearn.base import BaseEstimator
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_is_fitted

from neumiss import bayes
from neumiss.bayes import bayes_predict
from neumiss.constraints import (
    AnyOf,
    Boolean,
    InstanceOf,
    Integer,
    NoneValue,
    Options,
    Real,
    check_params,
)

LINKS = ("linear", "square", "cube", "stairs")


# --------------------------------------------------------------------------- validation

_MISSING_RATE = Real(0, 1, closed="left")
_RANDOM_STATE = AnyOf(
    NoneValue(),
    Integer(0),
    InstanceOf(
        (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence),
        "a numpy Generator, BitGenerator or SeedSequence",
    ),
)

#: Arguments of :func:`make_regression` (and ``n_samples``, ``random_state`` of
#: :meth:`SimulationTruth.sample`).
_MAKE_REGRESSION_CONSTRAINTS = {
    "n_samples": Integer(1),
    "n_features": Integer(1),
    "missing_rate": _MISSING_RATE,
    "snr": AnyOf(Real(0, None, closed="neither"), Options(math.inf)),
    "prop_latent": Real(0, 1),
    "link": Options(*LINKS),
    "random_state": _RANDOM_STATE,
}


def _check_complete(X, n_features: int | None = None) -> np.ndarray:
    """2-D float64 array without NaN or inf (a view when already so; never written to)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X must be complete (no NaN or inf) to simulate missing values")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, the mechanism was fitted on {n_features}")
    return X


def _moments(X: np.ndarray, mean, cov) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and variance: the given population ones, else estimated from X."""
    d = X.shape[1]
    if (mean is None) != (cov is None):
        raise ValueError("pass both mean and cov, or neither (then they are estimated from X)")
    if mean is None:
        return X.mean(axis=0), X.var(axis=0)
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    if mean.shape != (d,) or cov.shape != (d, d):
        raise ValueError(
            f"mean must have shape ({d},) and cov ({d}, {d}), got {mean.shape} and {cov.shape}"
        )
    return mean, np.diag(cov).copy()


# --------------------------------------------------------------------------- mechanisms


class _Mechanism(BaseEstimator):
    """Shared sampling logic: a mask entry is missing with probability ``missing_proba``."""

    #: constructor parameter -> constraint, checked by ``fit`` (:mod:`neumiss.constraints`)
    _parameter_constraints = {"missing_rate": _MISSING_RATE}
    #: calibrated attributes reported by ``fitted_params``
    _fitted_attributes: tuple[str, ...] = ()

    def fit(self, X, mean=None, cov=None):
        """Calibrate the mechanism on complete data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Complete data (no NaN).
        mean : array-like of shape (n_features,), optional
            Known population mean of ``X``; with ``cov``, used instead of the
            empirical moments where the mechanism needs them.
        cov : array-like of shape (n_features, n_features), optional
            Known population covariance of ``X``.

        Returns
        -------
        self
        """
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        X = _check_complete(X)
        self.missing_rate_ = float(self.missing_rate)
        self.n_features_in_ = X.shape[1]
        self._fit(X, mean, cov)
        return self

    def _fit(self, X, mean, cov):
        """Mechanism-specific calibration (sets the fitted attributes)."""

    def missing_proba(self, X) -> np.ndarray:
        """Probability that each entry is missing given the complete data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), complete.

        Returns
        -------
        ndarray of shape (n_samples, n_features), values in [0, 1].
        """
        check_is_fitted(self)
        return self._proba(_check_complete(X, self.n_features_in_))

    def sample_mask(self, X, random_state=None) -> np.ndarray:
        """Draw a missingness mask for complete data ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), complete.
        random_state : int, numpy.random.Generator or None
            Source of the Bernoulli draws.

        Returns
        -------
        mask : bool ndarray of shape (n_samples, n_features), True = missing.
        """
        proba = self.missing_proba(X)
        rng = np.random.default_rng(random_state)
        return rng.random(proba.shape) < proba

    def apply(self, X, random_state=None) -> np.ndarray:
        """Copy of ``X`` (float64) with the entries of a drawn mask set to NaN.

        Shapes: (n_samples, n_features) -> (n_samples, n_features).
        """
        X = _check_complete(X)
        return np.where(self.sample_mask(X, random_state), np.nan, X)

    def fitted_params(self) -> dict:
        """Constructor parameters and calibrated values, names without trailing ``_``.

        This is what :class:`SimulationTruth` stores as ``mechanism_params``.
        """
        check_is_fitted(self)
        params = {k: v for k, v in self.get_params().items() if k != "random_state"}
        for attr in self._fitted_attributes:
            params[attr.rstrip("_")] = getattr(self, attr)
        return params


class MCAR(_Mechanism):
    """Missing completely at random: each entry missing independently with ``missing_rate``.

    Parameters
    ----------
    missing_rate : float in [0, 1), default=0.5
    """

    def __init__(self, missing_rate=0.5):
        self.missing_rate = missing_rate

    def _proba(self, X):
        return np.full(X.shape, self.missing_rate_)


class MAR(_Mechanism):
    """Missing at random through a logistic model of always-observed features.

    A random ``max(1, floor(p_obs * d))`` features are always observed. Each
    other feature ``j`` is missing with probability
    ``expit(X[:, observed] @ coef_[:, j] + intercept_[j])``, where the weights
    are standard normal draws rescaled so that the logit has a standard
    deviation drawn uniformly in [2, 10] (as in the authors' code), and the
    intercept is found by root finding (``brentq``) so that the empirical
    missing rate of feature ``j`` on the calibration data ``X`` equals
    ``missing_rate``. The mechanism is MAR because the observed features
    drive the missingness of the others.

    Parameters
    ----------
    missing_rate : float in [0, 1), default=0.5
        Missing rate of each incomplete feature.
    p_obs : float in [0, 1), default=0.1
        Proportion of always-observed features (at least one).
    random_state : int, numpy.random.Generator or None
        Draws the observed features and the weights at ``fit``.

    Attributes
    ----------
    observed_features_ : ndarray of int, shape (n_observed,)
    incomplete_features_ : ndarray of int, shape (n_incomplete,)
    coef_ : ndarray of shape (n_observed, n_incomplete)
    intercept_ : ndarray of shape (n_incomplete,)
    """

    _parameter_constraints = {
        **_Mechanism._parameter_constraints,
        "p_obs": Real(0, 1, closed="left"),
        "random_state": _RANDOM_STATE,
    }
    _fitted_attributes = ("observed_features_", "incomplete_features_", "coef_", "intercept_")

    def __init__(self, missing_rate=0.5, p_obs=0.1, random_state=None):
        self.missing_rate = missing_rate
        self.p_obs = p_obs
        self.random_state = random_state

    def _fit(self, X, mean, cov):
        d = X.shape[1]
        n_observed = max(1, int(self.p_obs * d))
        if n_observed >= d:
            raise ValueError(f"MAR needs at least 2 features (one always observed), X has {d}")
        rng = np.random.default_rng(self.random_state)
        observed = np.sort(rng.choice(d, n_observed, replace=False))
        incomplete = np.setdiff1d(np.arange(d), observed)
        if cov is None:
            cov_obs = np.atleast_2d(np.cov(X[:, observed], rowvar=False))
        else:
            cov_obs = np.asarray(cov, dtype=np.float64)[np.ix_(observed, observed)]
        coef = rng.standard_normal((n_observed, incomplete.size))
        logit_std = np.sqrt(np.einsum("ij,ik,kj->j", coef, cov_obs, coef))
        target_std = rng.uniform(2.0, 10.0, size=incomplete.size)
        coef *= np.divide(target_std, logit_std, out=np.ones_like(logit_std), where=logit_std > 0)

        scores = X[:, observed] @ coef
        rate = self.missing_rate_
        intercept = np.full(incomplete.size, -np.inf)
        if rate > 0:
            for j, z in enumerate(scores.T):
                intercept[j] = brentq(
                    lambda b, z=z: expit(z + b).mean() - rate,
                    logit(rate) - z.max(),
                    logit(rate) - z.min(),
                    xtol=1e-10,
                )
        self.observed_features_ = observed
        self.incomplete_features_ = incomplete
        self.coef_ = coef
        self.intercept_ = intercept

    def _proba(self, X):
        proba = np.zeros(X.shape)
        proba[:, self.incomplete_features_] = expit(
            X[:, self.observed_features_] @ self.coef_ + self.intercept_
        )
        return proba


class GaussianSelfMasking(_Mechanism):
    """Gaussian self-masking (paper Assumption 4), MNAR.

    ``P(M_k = 1 | X_k) = K_k exp(-(X_k - mu_tilde_k)^2 / (2 sigma_tilde_k^2))`` with
    ``mu_tilde_k = mu_k + k * s_k`` (``mu_k``, ``s_k``: mean and standard
    deviation of feature ``k``). For Gaussian ``X_k`` the expected missing rate
    is ``K_k sqrt(r / (1 + r)) exp(-k^2 / (2 (1 + r)))`` with
    ``r = sigma_tilde_k^2 / s_k^2``; it is set to ``missing_rate`` by:

    * ``sigma_scale=None`` (default, the authors' code): ``K_k = 1`` and ``r``
      found by root finding; every rate in [0, 1) is reachable.
    * ``sigma_scale=c``: ``sigma_tilde_k = c * s_k`` and ``K_k`` solved in
      closed form; a ``ValueError`` is raised when that needs ``K_k > 1``
      (e.g. ``k=2, c=1`` reaches at most 26% missing).

    Parameters
    ----------
    missing_rate : float in [0, 1), default=0.5
    k : float, default=2.0
        Offset of the masking peak, in standard deviations (paper: 2).
    sigma_scale : float > 0 or None, default=None

    Attributes
    ----------
    mu_tilde_, sigma_tilde_, K_ : ndarray of shape (n_features,)
    """

    _parameter_constraints = {
        **_Mechanism._parameter_constraints,
        "k": Real(),
        "sigma_scale": AnyOf(NoneValue(), Real(0, None, closed="neither")),
    }
    _fitted_attributes = ("mu_tilde_", "sigma_tilde_", "K_")

    def __init__(self, missing_rate=0.5, k=2.0, sigma_scale=None):
        self.missing_rate = missing_rate
        self.k = k
        self.sigma_scale = sigma_scale

    def _fit(self, X, mean, cov):
        mean, var = _moments(X, mean, cov)
        rate, k2 = self.missing_rate_, float(self.k) ** 2

        def log_rate(ratio):  # log expected missing rate for K = 1
            return 0.5 * np.log(ratio / (1.0 + ratio)) - k2 / (2.0 * (1.0 + ratio))

        if self.sigma_scale is not None:
            ratio = float(self.sigma_scale) ** 2
            K = rate / np.exp(log_rate(ratio))
            if K > 1.0:
                raise ValueError(
                    f"missing_rate={rate} is unreachable with k={self.k}, "
                    f"sigma_scale={self.sigma_scale}: the largest possible rate is "
                    f"{np.exp(log_rate(ratio)):.4f}; lower k, raise sigma_scale or "
                    "use sigma_scale=None"
                )
        elif rate == 0.0:
            ratio, K = 1.0, 0.0
        else:
            K = 1.0
            log_ratio = brentq(
                lambda t: log_rate(np.exp(t)) - np.log(rate), -60.0, 60.0, xtol=1e-12
            )
            ratio = np.exp(log_ratio)
        std = np.sqrt(var)
        self.mu_tilde_ = mean + self.k * std
        self.sigma_tilde_ = np.sqrt(ratio) * std
        self.K_ = np.full(X.shape[1], K)

    def _proba(self, X):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (X - self.mu_tilde_) / self.sigma_tilde_
        # A constant feature (sigma_tilde = 0) is missing only at exactly mu_tilde.
        z = np.where(self.sigma_tilde_ > 0, z, np.where(X == self.mu_tilde_, 0.0, np.inf))
        return self.K_ * np.exp(-0.5 * z**2)


class ProbitSelfMasking(_Mechanism):
    """Probit self-masking, MNAR: ``P(M_k = 1 | X_k) = Phi(lam_k (X_k - mu_tilde_k))``.

    ``lam_k = lam`` (default, the authors' code, paper ``lambda = 0.5``) or
    ``lam / s_k`` with ``standardize=True`` (``s_k``: standard deviation of
    feature ``k``), so the steepness is in units of the feature's spread.
    ``mu_tilde_k`` is solved in closed form so that the expected missing rate
    for Gaussian ``X_k``, ``Phi(lam_k (mu_k - mu_tilde_k) / sqrt(1 + lam_k^2 s_k^2))``,
    equals ``missing_rate``. A negative ``lam`` masks low values instead of
    high ones. There is no closed-form Bayes predictor for this mechanism.

    Parameters
    ----------
    missing_rate : float in [0, 1), default=0.5
    lam : float, nonzero, default=0.5
    standardize : bool, default=False

    Attributes
    ----------
    lam_, mu_tilde_ : ndarray of shape (n_features,)
    """

    _parameter_constraints = {
        **_Mechanism._parameter_constraints,
        "lam": AnyOf(Real(None, 0, closed="neither"), Real(0, None, closed="neither")),
        "standardize": Boolean(),
    }
    _fitted_attributes = ("lam_", "mu_tilde_")

    def __init__(self, missing_rate=0.5, lam=0.5, standardize=False):
        self.missing_rate = missing_rate
        self.lam = lam
        self.standardize = standardize

    def _fit(self, X, mean, cov):
        mean, var = _moments(X, mean, cov)
        lam = np.full(X.shape[1], float(self.lam))
        if self.standardize:
            if np.any(var <= 0):
                raise ValueError("standardize=True needs every feature to have a positive variance")
            lam = lam / np.sqrt(var)
        with np.errstate(divide="ignore"):
            quantile = norm.ppf(self.missing_rate_)  # -inf for a rate of 0
        self.lam_ = lam
        self.mu_tilde_ = mean - quantile * np.sqrt(1.0 + lam**2 * var) / lam

    def _proba(self, X):
        return norm.cdf(self.lam_ * (X - self.mu_tilde_))


#: Mechanism name (those of :data:`neumiss.bayes.MECHANISMS`, in that order) -> class.
MECHANISMS = dict(
    zip(bayes.MECHANISMS, (MCAR, MAR, GaussianSelfMasking, ProbitSelfMasking), strict=True)
)


# --------------------------------------------------------------------------- response model


def _stairs(u):
    return np.floor(2.0 * u) / 2.0


_LINK_FUNCTIONS = {
    "linear": lambda u: u,
    "square": np.square,
    "cube": lambda u: u**3,
    "stairs": _stairs,
}


def _link_variance(link: str) -> float:
    """Var(g(U)) for U ~ N(0, 1) and the link's function g."""
    if link == "linear":
        return 1.0
    if link == "square":
        return 2.0
    if link == "cube":
        return 15.0
    levels = np.arange(-80, 80) / 2.0  # floor(2u)/2 = level  <=>  u in [level, level + 1/2)
    proba = norm.cdf(levels + 0.5) - norm.cdf(levels)
    return float(proba @ levels**2 - (proba @ levels) ** 2)


def _signal(X, mean, cov, coef, intercept, link):
    center = mean @ coef
    scale = np.sqrt(coef @ cov @ coef)
    return intercept + center + scale * _LINK_FUNCTIONS[link]((X @ coef - center) / scale)


def _read_only(value):
    """A read-only copy of an array; other values unchanged."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.setflags(write=False)
    return value


def _draw_gaussian(mean, cov, n_samples, rng):
    chol = np.linalg.cholesky(cov)
    return mean + rng.standard_normal((n_samples, mean.shape[0])) @ chol.T


# --------------------------------------------------------------------------- ground truth


@dataclass(frozen=True)
class SimulationTruth:
    """Ground truth of a simulation, able to draw more data from the same distribution.

    ``X ~ N(mean, cov)``; with ``s = X @ coef``, ``m = mean @ coef`` and
    ``tau = sqrt(coef @ cov @ coef)`` the response is
    ``y = intercept + m + tau * g((s - m) / tau) + noise``, ``g`` the link
    (``linear``: ``y = intercept + X @ coef + noise``); ``noise ~ N(0, noise_var)``
    with ``noise_var = tau^2 Var(g(U)) / snr``. Arrays are read-only.

    Attributes
    ----------
    mean : ndarray (d,)
    cov : ndarray (d, d)
    intercept : float
    coef : ndarray (d,)
    noise_var : float
    snr : float
    link : str
    mechanism : str
        Name of the missingness mechanism, a key of :data:`MECHANISMS`.
    mechanism_params : mapping
        Its parameters and calibrated values (see ``fitted_params`` of the
        mechanism classes), e.g. ``mu_tilde``, ``sigma_tilde``, ``K`` for ``gaussian_sm``.
    missingness : fitted mechanism object (MCAR, MAR, ...)
    """

    mean: np.ndarray
    cov: np.ndarray
    intercept: float
    coef: np.ndarray
    noise_var: float
    snr: float
    link: str
    mechanism: str
    mechanism_params: MappingProxyType
    missingness: _Mechanism

    @property
    def n_features(self) -> int:
        return self.mean.shape[0]

    def sample(self, n_samples, random_state=None, return_complete=False):
        """Draw a new data set from this distribution.

        Parameters
        ----------
        n_samples : int >= 1
        random_state : int, numpy.random.Generator or None
        return_complete : bool, default=False
            Also return the complete covariates (before masking).

        Returns
        -------
        X : ndarray (n_samples, d), float64 with NaN for missing entries
        y : ndarray (n_samples,)
        X_complete : ndarray (n_samples, d), only if ``return_complete``
        """
        check_params(
            "SimulationTruth.sample",
            {"n_samples": n_samples, "random_state": random_state},
            _MAKE_REGRESSION_CONSTRAINTS,
        )
        rng = np.random.default_rng(random_state)
        X_complete = _draw_gaussian(self.mean, self.cov, n_samples, rng)
        y = self.signal(X_complete) + np.sqrt(self.noise_var) * rng.standard_normal(n_samples)
        X = np.where(self.missingness.sample_mask(X_complete, rng), np.nan, X_complete)
        return (X, y, X_complete) if return_complete else (X, y)

    def signal(self, X_complete) -> np.ndarray:
        """Noise-free response ``E[y | X]`` for complete covariates. Shape (n, d) -> (n,)."""
        X_complete = _check_complete(X_complete, self.n_features)
        return _signal(X_complete, self.mean, self.cov, self.coef, self.intercept, self.link)

    def bayes_predict(self, X) -> np.ndarray:
        """Bayes predictor ``E[y | X_obs, M]`` (paper eq. 3 or eq. 5).

        Available for the linear link and the MCAR, MAR and Gaussian
        self-masking mechanisms. Shape (n, d) with NaN -> (n,).
        """
        if self.link != "linear":
            raise NotImplementedError(
                f"the Bayes predictor is only implemented for link='linear', not {self.link!r}"
            )
        params = {}
        if isinstance(self.missingness, GaussianSelfMasking):
            params = {
                "mu_tilde": self.mechanism_params["mu_tilde"],
                "sigma_tilde": self.mechanism_params["sigma_tilde"],
            }
        return bayes_predict(
            X, self.mean, self.cov, self.coef, self.intercept, mechanism=self.mechanism, **params
        )

    def bayes_rate(self, X, y) -> float:
        """R² of the Bayes predictor on ``(X, y)``: the paper's estimate of the Bayes rate."""
        return float(r2_score(y, self.bayes_predict(X)))


def make_regression(
    n_samples,
    n_features,
    mechanism="MCAR",
    missing_rate=0.5,
    snr=10.0,
    prop_latent=0.5,
    link="linear",
    random_state=None,
    **mechanism_params,
):
    """Draw a NeuMiss simulation ground truth and one data set (paper Section 5.4).

    ``cov = B B^T + diag(eps)`` with ``B`` of shape
    ``(n_features, max(1, floor(prop_latent * n_features)))`` standard normal and
    ``eps ~ U[0.01, 0.1]``; ``mean ~ N(0, 1)``; intercept 1 and coefficients
    all ones (as in the paper); the noise variance gives the requested
    signal-to-noise ratio (``coef @ cov @ coef / snr`` for the linear link).
    The missingness mechanism is calibrated once, on the complete covariates
    of this data set with the true mean and covariance, then kept fixed in the
    returned truth: ``truth.sample`` draws more data from the same distribution.

    Parameters
    ----------
    n_samples : int >= 1
    n_features : int >= 1
    mechanism : {"MCAR", "MAR", "gaussian_sm", "probit_sm"}, default="MCAR"
    missing_rate : float in [0, 1), default=0.5
        Per-feature missing rate (of the incomplete features for MAR).
    snr : float > 0, default=10
        ``Var(signal) / Var(noise)``; ``np.inf`` gives no noise.
    prop_latent : float in [0, 1], default=0.5
        Rank of ``B`` relative to ``n_features`` (fewer factors: stronger correlations).
    link : {"linear", "square", "cube", "stairs"}, default="linear"
        Function ``g`` applied to the standardized ``X @ coef`` (see
        :class:`SimulationTruth`); ``stairs`` is ``floor(2 u) / 2``.
    random_state : int, numpy.random.Generator or None
    **mechanism_params
        Passed to the mechanism class: ``p_obs`` (MAR), ``k`` and
        ``sigma_scale`` (gaussian_sm), ``lam`` and ``standardize`` (probit_sm).

    Returns
    -------
    X : ndarray (n_samples, n_features), float64 with NaN for missing entries
    y : ndarray (n_samples,)
    truth : SimulationTruth
    """
    check_params(
        "make_regression",
        {
            "n_samples": n_samples,
            "n_features": n_features,
            "missing_rate": missing_rate,
            "snr": snr,
            "prop_latent": prop_latent,
            "link": link,
            "random_state": random_state,
        },
        _MAKE_REGRESSION_CONSTRAINTS,
    )
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {sorted(MECHANISMS)}, got {mechanism!r}")
    mechanism_cls = MECHANISMS[mechanism]
    allowed = set(mechanism_cls._get_param_names()) - {"missing_rate", "random_state"}
    unknown = sorted(set(mechanism_params) - allowed)
    if unknown:
        raise TypeError(
            f"unknown parameter(s) {unknown} for mechanism {mechanism!r}; "
            f"valid ones: {sorted(allowed)}"
        )

    rng = np.random.default_rng(random_state)
    n_latent = max(1, int(prop_latent * n_features))
    B = rng.standard_normal((n_features, n_latent))
    cov = B @ B.T + np.diag(rng.uniform(0.01, 0.1, size=n_features))
    mean = rng.standard_normal(n_features)
    coef = np.ones(n_features)
    noise_var = float(coef @ cov @ coef * _link_variance(link) / snr)

    kwargs = dict(mechanism_params)
    if "random_state" in mechanism_cls._get_param_names():
        kwargs["random_state"] = rng
    missingness = mechanism_cls(missing_rate=float(missing_rate), **kwargs)
    for array in (mean, cov, coef):
        array.setflags(write=False)
    # Draw the complete data, calibrate the mechanism on it, then mask it.
    X_complete = _draw_gaussian(mean, cov, n_samples, rng)
    y = _signal(X_complete, mean, cov, coef, 1.0, link)
    y = y + np.sqrt(noise_var) * rng.standard_normal(n_samples)
    missingness.fit(X_complete, mean=mean, cov=cov)
    X = np.where(missingness.sample_mask(X_complete, rng), np.nan, X_complete)
    truth = SimulationTruth(
        mean=mean,
        cov=cov,
        intercept=1.0,
        coef=coef,
        noise_var=noise_var,
        snr=float(snr),
        link=link,
        mechanism=mechanism,
        mechanism_params=MappingProxyType(
            {key: _read_only(value) for key, value in missingness.fitted_params().items()}
        ),
        missingness=missingness,
    )
    return X, y, truth
