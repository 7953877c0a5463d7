"""Missingness mechanisms of the NeuMiss paper, usable on any complete array.

:class:`MCAR`, :class:`MAR`, :class:`GaussianSelfMasking` and
:class:`ProbitSelfMasking` are configured in ``__init__``, calibrated on
complete data with ``fit(X, mean=None, cov=None)``, and then give
``missing_proba(X)`` (``P(M = 1 | X)`` entrywise), ``sample_mask(X,
random_state)`` and ``apply(X, random_state)`` (a copy of ``X`` with NaN)::

    mask = MCAR(missing_rate=0.3).fit(X).sample_mask(X, random_state=0)
    X_nan = GaussianSelfMasking(0.4, k=2).fit(X).apply(X, random_state=0)

Masks are boolean arrays with ``True`` = missing, same shape as ``X``.
Conventions for the self-masking mechanisms follow the authors' released code
(``marineLM/NeuMiss``), which produced the published figures.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import norm
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..checks import (
    AnyOf,
    Boolean,
    InstanceOf,
    Integer,
    NoneValue,
    Real,
    check_params,
)
from . import _bayes as bayes

MISSING_RATE = Real(0, 1, closed="left")
RANDOM_STATE = AnyOf(
    NoneValue(),
    Integer(0),
    InstanceOf(
        (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence),
        "a numpy Generator, BitGenerator or SeedSequence",
    ),
)


def check_complete(X, n_features: int | None = None) -> np.ndarray:
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


class Mechanism(BaseEstimator):
    """Shared sampling logic: a mask entry is missing with probability ``missing_proba``."""

    #: constructor parameter -> constraint, checked by ``fit`` (:func:`neumiss.checks.check_params`)
    _parameter_constraints = {"missing_rate": MISSING_RATE}
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
        X = check_complete(X)
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
        return self._proba(check_complete(X, self.n_features_in_))

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
        X = check_complete(X)
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


class MCAR(Mechanism):
    """Missing completely at random: each entry missing independently with ``missing_rate``.

    Parameters
    ----------
    missing_rate : float in [0, 1), default=0.5
    """

    def __init__(self, missing_rate=0.5):
        self.missing_rate = missing_rate

    def _proba(self, X):
        return np.full(X.shape, self.missing_rate_)


class MAR(Mechanism):
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
        **Mechanism._parameter_constraints,
        "p_obs": Real(0, 1, closed="left"),
        "random_state": RANDOM_STATE,
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


class GaussianSelfMasking(Mechanism):
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
        **Mechanism._parameter_constraints,
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


class ProbitSelfMasking(Mechanism):
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
        **Mechanism._parameter_constraints,
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


#: Mechanism name (those of :data:`MECHANISM_NAMES`, in that order) -> class.
MECHANISMS = dict(
    zip(bayes.MECHANISM_NAMES, (MCAR, MAR, GaussianSelfMasking, ProbitSelfMasking), strict=True)
)
