"""Bayes predictors of a linear response from Gaussian covariates with missing values.

Paper: Le Morvan et al., "NeuMiss networks", NeurIPS 2020, Propositions 2.1 and 2.2.
With ``y = intercept + X @ coef + noise`` and ``X ~ N(mean, cov)``, the Bayes
predictor (best predictor for the squared loss given the observed entries and the
missingness pattern) is

    f*(X_obs, M) = intercept + coef_obs @ X_obs + coef_mis @ E[X_mis | X_obs, M].

* MCAR and MAR (eq. 3): ``E[X_mis | X_obs, M] = mu_mis|obs``, the Gaussian
  conditional mean ``mean_mis + cov_mis,obs cov_obs^-1 (X_obs - mean_obs)``.
* Gaussian self-masking (eq. 5, Assumption 4 with ``D = diag(sigma_tilde^2)``):
  ``E[X_mis | X_obs, M] = (Id + D_mis S^-1)^-1 (mu_tilde_mis + D_mis S^-1 mu_mis|obs)``
  with ``S = cov_mis|obs``. This module evaluates the equivalent form (the
  supplement's ``a_M``)
  ``mu_mis|obs + (D_mis^-1 + P_mis,mis)^-1 D_mis^-1 (mu_tilde_mis - mu_mis|obs)``,
  where ``P = cov^-1`` and ``S^-1 = P_mis,mis`` (Schur complement): on top of the
  Gaussian conditional mean, one ``q x q`` inverse per pattern with ``q`` missing
  entries, and no ``S`` to form or invert.
* Probit self-masking has no closed form: a ``NotImplementedError`` is raised.

The same conditioning gives the whole predictive distribution (the oracle of
prediction intervals): ``y | X_obs, M`` is Gaussian with the Bayes predictor as
mean and variance ``coef_mis^T C coef_mis + noise_var``, where
``C = Cov(X_mis | X_obs, M)`` is ``P_mis,mis^-1`` under MCAR and MAR (the mask
carries no information beyond ``X_obs``) and ``(P_mis,mis + D_mis^-1)^-1``
under Gaussian self-masking (the masking factor of each missing entry is a
Gaussian bump of variance ``sigma_tilde^2``): :func:`predictive_variance`.

Every computation is batched over missingness patterns (stacks of matrices for
all patterns with the same number of missing entries), never looped per row.
"""

from __future__ import annotations

import numpy as np

from ._gaussian import _BATCH_ENTRIES, conditional_mean, group_patterns

#: Names of the missingness mechanisms, defined here only: :data:`MECHANISMS`
#: maps them, in this order, to their classes; :func:`bayes_predict` understands them.
MECHANISM_NAMES = ("MCAR", "MAR", "gaussian_sm", "probit_sm")


def conditional_expectation(X, mean, cov, mechanism="MCAR", **params):
    """``E[X_mis | X_obs, M]`` under ``X ~ N(mean, cov)`` and a missingness mechanism.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NaN where missing. Not modified.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive definite.
    mechanism : {"MCAR", "MAR", "gaussian_sm", "probit_sm"}, default="MCAR"
    **params
        For ``"gaussian_sm"``: ``mu_tilde`` and ``sigma_tilde``, arrays of shape
        (n_features,) (peak location and width of the masking function,
        ``sigma_tilde > 0``). No parameters for the other mechanisms.

    Returns
    -------
    X_filled : ndarray of shape (n_samples, n_features)
        Copy of ``X`` with each missing entry replaced by its conditional expectation.

    Raises
    ------
    NotImplementedError
        For ``"probit_sm"``, which has no closed-form conditional expectation.
    """
    _check_mechanism(mechanism, params)
    X_filled = conditional_mean(X, mean, cov)
    if mechanism == "gaussian_sm":
        d = X_filled.shape[1]
        mu_tilde = _check_vector(params["mu_tilde"], "mu_tilde", d)
        sigma_tilde = _check_vector(params["sigma_tilde"], "sigma_tilde", d)
        if np.any(sigma_tilde <= 0):
            raise ValueError("sigma_tilde must be positive")
        mask = np.isnan(np.asarray(X, dtype=np.float64))
        _self_masking_correction(
            X_filled, mask, np.asarray(cov, dtype=np.float64), mu_tilde, sigma_tilde**2
        )
    return X_filled


def bayes_predict(X, mean, cov, coef, intercept=0.0, mechanism="MCAR", **params):
    """Bayes predictor ``E[y | X_obs, M]`` of ``y = intercept + X @ coef + noise``.

    Paper eq. 3 (MCAR, MAR) and eq. 5 (Gaussian self-masking).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NaN where missing. Not modified.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive definite.
    coef : array-like of shape (n_features,)
    intercept : float, default=0.0
    mechanism : {"MCAR", "MAR", "gaussian_sm", "probit_sm"}, default="MCAR"
    **params
        ``mu_tilde`` and ``sigma_tilde`` for ``"gaussian_sm"`` (see
        :func:`conditional_expectation`).

    Returns
    -------
    y_pred : ndarray of shape (n_samples,)

    Raises
    ------
    NotImplementedError
        For ``"probit_sm"``, which has no closed-form Bayes predictor.
    """
    X_filled = conditional_expectation(X, mean, cov, mechanism, **params)
    coef = _check_vector(coef, "coef", X_filled.shape[1])
    if not np.isscalar(intercept) or not np.isfinite(intercept):
        raise ValueError(f"intercept must be a finite number, got {intercept!r}")
    return float(intercept) + X_filled @ coef


def predictive_variance(X, cov, coef, noise_var, mechanism="MCAR", **params):
    """``Var(y | X_obs, M)`` of ``y = intercept + X @ coef + noise``, noise ~ N(0, noise_var).

    Under MCAR, MAR and Gaussian self-masking, ``y`` given the observed entries
    and the mask is Gaussian with mean :func:`bayes_predict` and this variance,
    ``coef_mis^T Cov(X_mis | X_obs, M) coef_mis + noise_var`` (module docstring):
    the oracle prediction interval is ``mean +- z_{1-alpha/2} sqrt(variance)``.
    It depends on the mask only, not on the observed values.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NaN where missing (only the mask is used). Not modified.
    cov : array-like of shape (n_features, n_features)
        Symmetric positive definite.
    coef : array-like of shape (n_features,)
    noise_var : float >= 0
    mechanism : {"MCAR", "MAR", "gaussian_sm", "probit_sm"}, default="MCAR"
    **params
        ``mu_tilde`` and ``sigma_tilde`` for ``"gaussian_sm"`` (only
        ``sigma_tilde`` enters the variance).

    Returns
    -------
    variance : ndarray of shape (n_samples,)

    Raises
    ------
    NotImplementedError
        For ``"probit_sm"``, whose conditional distribution has no closed form.
    """
    _check_mechanism(mechanism, params)
    mask = np.isnan(np.asarray(X, dtype=np.float64))
    d = mask.shape[1]
    coef = _check_vector(coef, "coef", d)
    if not np.isscalar(noise_var) or not np.isfinite(noise_var) or noise_var < 0:
        raise ValueError(f"noise_var must be a finite number >= 0, got {noise_var!r}")
    cov = np.asarray(cov, dtype=np.float64)
    precision = np.linalg.inv(cov)
    precision = (precision + precision.T) / 2
    extra = np.zeros(d)
    if mechanism == "gaussian_sm":
        extra = 1.0 / _check_vector(params["sigma_tilde"], "sigma_tilde", d) ** 2
    patterns, inverse = group_patterns(mask)
    n_missing = patterns.sum(axis=1)
    per_pattern = np.zeros(patterns.shape[0])
    for q in np.unique(n_missing[n_missing > 0]):
        for group in _chunks(np.flatnonzero(n_missing == q), q * q):
            mis = np.nonzero(patterns[group])[1].reshape(group.size, q)
            posterior_precision = precision[mis[:, :, None], mis[:, None, :]]
            posterior_precision += extra[mis][:, :, None] * np.eye(q)
            b = coef[mis]
            solved = np.linalg.solve(posterior_precision, b[:, :, None])[:, :, 0]
            per_pattern[group] = np.einsum("gi,gi->g", b, solved)
    return per_pattern[inverse] + float(noise_var)


def _check_mechanism(mechanism, params):
    if mechanism not in MECHANISM_NAMES:
        raise ValueError(f"mechanism must be one of {list(MECHANISM_NAMES)}, got {mechanism!r}")
    if mechanism == "probit_sm":
        raise NotImplementedError(
            "no closed-form Bayes predictor exists for probit self-masking: "
            "E[X_mis | X_obs, M] involves a multivariate Gaussian integral of a product of "
            "probit functions (the paper scores this setting against the best method instead)"
        )
    expected = {"mu_tilde", "sigma_tilde"} if mechanism == "gaussian_sm" else set()
    if set(params) != expected:
        unknown = sorted(set(params) - expected)
        missing = sorted(expected - set(params))
        raise TypeError(
            f"mechanism {mechanism!r} takes parameters {sorted(expected)}; "
            f"unknown: {unknown}, missing: {missing}"
        )


def _check_vector(value, name, n_features):
    value = np.asarray(value, dtype=np.float64)
    if value.shape != (n_features,):
        raise ValueError(f"{name} must have shape ({n_features},), got {value.shape}")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must contain only finite values")
    return value


def _chunks(indices, item_entries):
    """Split ``indices`` in slices holding at most ``_BATCH_ENTRIES`` matrix entries."""
    step = max(1, _BATCH_ENTRIES // max(1, item_entries))
    for start in range(0, indices.size, step):
        yield indices[start : start + step]


def _self_masking_correction(X_filled, mask, cov, mu_tilde, d_diag):
    """In place: ``X_mis += (D_mis^-1 + P_mis,mis)^-1 D_mis^-1 (mu_tilde_mis - X_mis)``.

    ``X_filled`` (n, d) holds the Gaussian conditional means on the entries of
    ``mask``; ``P = cov^-1`` and ``D = diag(d_diag)``.
    """
    precision = np.linalg.inv(cov)
    precision = (precision + precision.T) / 2
    d_inv = 1.0 / d_diag
    patterns, inverse = group_patterns(mask)
    n_missing = patterns.sum(axis=1)
    local = np.empty(patterns.shape[0], dtype=np.intp)
    for q in np.unique(n_missing[n_missing > 0]):
        for group in _chunks(np.flatnonzero(n_missing == q), q * q):
            mis = np.nonzero(patterns[group])[1].reshape(group.size, q)
            mask_precision = d_inv[mis]  # diagonal of D_mis^-1, (G, q)
            posterior_precision = precision[mis[:, :, None], mis[:, None, :]]
            posterior_precision += mask_precision[:, :, None] * np.eye(q)
            gain = np.linalg.inv(posterior_precision) * mask_precision[:, None, :]
            local[:] = -1
            local[group] = np.arange(group.size)
            for rows in _chunks(np.flatnonzero(local[inverse] >= 0), q * q):
                which = local[inverse[rows]]
                cols = mis[which]
                current = X_filled[rows[:, None], cols]
                step = np.einsum("rij,rj->ri", gain[which], mu_tilde[cols] - current)
                X_filled[rows[:, None], cols] = current + step
