"""Simulated data of the NeuMiss paper: Gaussian covariates, a linear response, missing values.

Paper: Le Morvan et al., "NeuMiss networks", NeurIPS 2020, Section 5.4 and the
supplement ("Additional results"). Conventions for the self-masking
mechanisms follow the authors' released code (``marineLM/NeuMiss``), which
produced the published figures.

Two layers of API:

* Missingness mechanisms usable on any complete array: :class:`MCAR`,
  :class:`MAR`, :class:`GaussianSelfMasking`, :class:`ProbitSelfMasking`
  (from :mod:`neumiss.simulation`)::

      mask = MCAR(missing_rate=0.3).fit(X).sample_mask(X, random_state=0)

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
from scipy.stats import norm
from sklearn.metrics import r2_score

from ..checks import AnyOf, Integer, Options, Real, check_params
from ._bayes import bayes_predict, predictive_variance
from ._mechanisms import (
    MAR,
    MCAR,
    MECHANISMS,
    MISSING_RATE,
    RANDOM_STATE,
    GaussianSelfMasking,
    Mechanism,
    ProbitSelfMasking,
    check_complete,
)

__all__ = [
    "LINKS", "MAR", "MCAR", "MECHANISMS", "GaussianSelfMasking", "ProbitSelfMasking",
    "SimulationTruth", "make_regression",
]

LINKS = ("linear", "square", "cube", "stairs")


#: Arguments of :func:`make_regression` (and ``n_samples``, ``random_state`` of
#: :meth:`SimulationTruth.sample`).
_MAKE_REGRESSION_CONSTRAINTS = {
    "n_samples": Integer(1),
    "n_features": Integer(1),
    "missing_rate": MISSING_RATE,
    "snr": AnyOf(Real(0, None, closed="neither"), Options(math.inf)),
    "prop_latent": Real(0, 1),
    "link": Options(*LINKS),
    "random_state": RANDOM_STATE,
}


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
    missingness: Mechanism

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
        X_complete = check_complete(X_complete, self.n_features)
        return _signal(X_complete, self.mean, self.cov, self.coef, self.intercept, self.link)

    def bayes_predict(self, X) -> np.ndarray:
        """Bayes predictor ``E[y | X_obs, M]`` (paper eq. 3 or eq. 5).

        Available for the linear link and the MCAR, MAR and Gaussian
        self-masking mechanisms. Shape (n, d) with NaN -> (n,).
        """
        return bayes_predict(
            X, self.mean, self.cov, self.coef, self.intercept, mechanism=self.mechanism,
            **self._bayes_params(),
        )

    def _bayes_params(self) -> dict:
        """The mechanism's parameters the closed forms need; refuses nonlinear links."""
        if self.link != "linear":
            raise NotImplementedError(
                f"the Bayes predictor is only implemented for link='linear', not {self.link!r}"
            )
        if isinstance(self.missingness, GaussianSelfMasking):
            return {
                "mu_tilde": self.mechanism_params["mu_tilde"],
                "sigma_tilde": self.mechanism_params["sigma_tilde"],
            }
        return {}

    def predictive_variance(self, X) -> np.ndarray:
        """``Var(y | X_obs, M)``: with :meth:`bayes_predict`, the Gaussian law of ``y``
        given what is observed (the oracle of prediction intervals).

        Same availability as :meth:`bayes_predict`. Shape (n, d) with NaN -> (n,).
        """
        return predictive_variance(
            X, self.cov, self.coef, self.noise_var, mechanism=self.mechanism,
            **self._bayes_params(),
        )

    def oracle_interval(self, X, alpha) -> np.ndarray:
        """The shortest interval holding ``y`` with probability ``1 - alpha`` given
        ``(X_obs, M)``: ``mean -+ z_{1 - alpha/2} sd``. Shape (n, d) -> (n, 2)."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        center = self.bayes_predict(X)
        half = norm.ppf(1 - alpha / 2) * np.sqrt(self.predictive_variance(X))
        return np.column_stack([center - half, center + half])

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
    check_params("make_regression", {
        "n_samples": n_samples, "n_features": n_features, "missing_rate": missing_rate,
        "snr": snr, "prop_latent": prop_latent, "link": link, "random_state": random_state,
    }, _MAKE_REGRESSION_CONSTRAINTS)
    mechanism_cls = _mechanism_class(mechanism, mechanism_params)
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


def _mechanism_class(mechanism, mechanism_params):
    """The mechanism class named ``mechanism``, once ``mechanism_params`` are known to be
    some of its parameters (``missing_rate`` and ``random_state`` are make_regression's)."""
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
    return mechanism_cls
