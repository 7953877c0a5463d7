"""Gaussian conditioning with missing values, vectorized over missingness patterns.

For a Gaussian vector ``x ~ N(mean, cov)`` observed on the entries ``obs`` and missing on
``mis``, the conditional distribution of the missing block is Gaussian with

* mean ``mean_mis + cov_mis,obs cov_obs^{-1} (x_obs - mean_obs)`` (paper, eq. 3),
* covariance ``cov_mis|obs = cov_mis,mis - cov_mis,obs cov_obs^{-1} cov_obs,mis``.

Both only depend on the inverse of ``cov_obs``, one matrix per distinct missingness pattern.
Rows are grouped by pattern, patterns are grouped by their number ``k`` of observed entries,
and every group is handled with batched linear algebra (a stack of ``k x k`` Cholesky
factorizations and inverses), so there is no Python loop over rows, nor over patterns.

Two identities keep the work per pattern to one ``k x k`` inverse. Let ``P`` be
``cov_obs^{-1}`` embedded in a ``d x d`` zero matrix and ``w = P (x - mean)`` (zero on the
missing entries). Then

* ``E[x | x_obs] = mean + cov w`` (on the observed entries this gives back ``x_obs``),
* the conditional covariance of ``x`` embedded in ``d x d`` (zero on observed rows and
  columns) is ``cov - cov P cov``, so its sum over rows is ``n cov - cov (sum P) cov``.
"""

from typing import NamedTuple

import numpy as np
import torch

__all__ = [
    "ConditionalMoments",
    "PatternLayout",
    "conditional_mean",
    "conditional_moments",
    "group_patterns",
]

# Largest number of float64 matrix entries held in one batch (about 32 MB).
_BATCH_ENTRIES = 2**22


def group_patterns(mask):
    """Group the rows of a missingness mask by distinct pattern.

    Parameters
    ----------
    mask : array-like of shape (n_samples, n_features)
        Boolean (or 0/1) mask, True / 1 where the entry is missing.

    Returns
    -------
    patterns : ndarray of shape (n_patterns, n_features), dtype bool
        The distinct rows of ``mask``, in lexicographic order of their packed bits.
    inverse : ndarray of shape (n_samples,), dtype intp
        Pattern index of every row: ``patterns[inverse]`` equals ``mask``.
    """
    mask = _check_mask(mask)
    n, d = mask.shape
    if n == 0:
        return np.zeros((0, d), dtype=bool), np.zeros(0, dtype=np.intp)
    # Pack each row into bytes and compare rows as opaque byte strings: much faster than
    # np.unique(axis=0) on the boolean matrix.
    packed = np.ascontiguousarray(np.packbits(mask, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return mask[first], inverse.reshape(-1).astype(np.intp, copy=False)


class PatternLayout:
    """Rows of a mask grouped by missingness pattern, reusable across calls.

    Patterns are sorted by their number of observed entries, so that each batch of
    patterns shares the size of its observed block. Building the layout once and passing it
    to :func:`conditional_moments` avoids regrouping the rows at every EM iteration.

    Parameters
    ----------
    mask : array-like of shape (n_samples, n_features)
        Boolean (or 0/1) mask, True / 1 where the entry is missing.

    Attributes
    ----------
    mask : ndarray of shape (n_samples, n_features), dtype bool
    patterns : ndarray of shape (n_patterns, n_features), dtype bool
        Distinct patterns, sorted by increasing number of observed entries.
    inverse : ndarray of shape (n_samples,)
        Pattern index of each row (``patterns[inverse]`` equals ``mask``).
    counts : ndarray of shape (n_patterns,)
        Number of rows of each pattern.
    n_observed : ndarray of shape (n_patterns,)
        Number of observed entries of each pattern (non-decreasing).
    row_order : ndarray of shape (n_samples,)
        Row indices sorted by pattern; the rows of pattern ``p`` are
        ``row_order[row_start[p]:row_start[p + 1]]``.
    row_start : ndarray of shape (n_patterns + 1,)
    """

    def __init__(self, mask):
        self.mask = _check_mask(mask)
        patterns, inverse = group_patterns(self.mask)
        n_features = self.mask.shape[1]
        n_observed = n_features - patterns.sum(axis=1)
        order = np.argsort(n_observed, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.patterns = patterns[order]
        self.n_observed = n_observed[order]
        self.inverse = rank[inverse]
        self.counts = np.bincount(self.inverse, minlength=order.size)
        self.row_order = np.argsort(self.inverse, kind="stable")
        self.row_start = np.concatenate([[0], np.cumsum(self.counts)])

    def batches(self):
        """Yield ``(start, stop, k)``: pattern ranges sharing ``k >= 1`` observed entries.

        Ranges are capped so that a stack of their ``k x k`` observed covariances stays
        within a fixed memory budget.
        """
        for k in np.unique(self.n_observed):
            if k == 0:
                continue
            lo, hi = np.searchsorted(self.n_observed, [k, k + 1])
            step = max(1, _BATCH_ENTRIES // (int(k) * int(k)))
            for start in range(lo, hi, step):
                yield start, min(start + step, hi), int(k)


class ConditionalMoments(NamedTuple):
    """Output of :func:`conditional_moments`.

    Attributes
    ----------
    filled : ndarray of shape (n_samples, n_features)
        ``X`` with every missing entry replaced by its conditional expectation.
    cond_cov_sum : ndarray of shape (n_features, n_features)
        Sum over rows of the conditional covariance of ``x`` given ``x_obs`` (zero on the
        observed rows and columns of each row), so that
        ``sum_i E[x_i x_i^T | x_obs] = filled.T @ filled + cond_cov_sum``.
    loglik : float
        Observed-data log-likelihood ``sum_i log N(x_obs_i; mean_obs, cov_obs)``.
    """

    filled: np.ndarray
    cond_cov_sum: np.ndarray
    loglik: float


def conditional_mean(X, mean, cov):
    """Replace missing entries by their conditional expectation under ``N(mean, cov)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, NaN where missing. Not modified.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive (semi-)definite covariance.

    Returns
    -------
    X_filled : ndarray of shape (n_samples, n_features)
        Copy of ``X`` where each missing entry is
        ``E[x_mis | x_obs] = mean_mis + cov_mis,obs cov_obs^{-1} (x_obs - mean_obs)``.
        Rows with every entry missing get ``mean``; complete rows are returned unchanged.

    Notes
    -----
    ``cov_obs`` is inverted through a Cholesky factorization, one per distinct pattern,
    batched over the patterns that share a number of observed entries. A ``cov_obs`` that
    is not numerically positive definite is inverted with a pseudo-inverse (least-squares
    solution) instead.
    """
    X, mean, cov = _check_inputs(X, mean, cov)
    mask = np.isnan(X)
    partial = np.flatnonzero(mask.any(axis=1) & ~mask.all(axis=1))
    filled = np.where(mask, mean, X)
    if partial.size:
        layout = PatternLayout(mask[partial])
        weights, _, _ = _solve_patterns(X[partial], layout, mean, cov, accumulate=False)
        filled[partial] = np.where(mask[partial], mean + weights @ cov, X[partial])
    return filled


def conditional_moments(X, mean, cov, layout=None):
    """Expected sufficient statistics of ``N(mean, cov)`` given the observed entries.

    This is the E-step of the EM algorithm for a Gaussian with missing values.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, NaN where missing. Not modified.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive (semi-)definite covariance.
    layout : PatternLayout, optional
        Precomputed grouping of ``np.isnan(X)``; pass it when calling repeatedly with the
        same missingness (EM iterations). It is not checked against ``X``.

    Returns
    -------
    ConditionalMoments
        Named tuple ``(filled, cond_cov_sum, loglik)``.
    """
    X, mean, cov = _check_inputs(X, mean, cov)
    if layout is None:
        layout = PatternLayout(np.isnan(X))
    elif layout.mask.shape != X.shape:
        raise ValueError(
            f"layout was built for a mask of shape {layout.mask.shape}, X has shape {X.shape}."
        )
    mask = layout.mask
    weights, prec_sum, loglik = _solve_patterns(X, layout, mean, cov, accumulate=True)
    filled = np.where(mask, mean + weights @ cov, X)
    # Rows without missing entries have a zero conditional covariance: leave them out of
    # n * cov - cov (sum P) cov rather than relying on the cancellation.
    n_incomplete = np.count_nonzero(mask.any(axis=1))
    cond_cov_sum = n_incomplete * cov - cov @ prec_sum @ cov
    cond_cov_sum = (cond_cov_sum + cond_cov_sum.T) / 2
    return ConditionalMoments(filled, cond_cov_sum, loglik)


def _solve_patterns(X, layout, mean, cov, accumulate):
    """Apply ``cov_obs^{-1}`` of every row's pattern to its centered observed entries.

    Returns
    -------
    weights : ndarray of shape (n_samples, n_features)
        ``cov_obs^{-1} (x_obs - mean_obs)`` on the observed entries, 0 on the missing ones.
    prec_sum : ndarray of shape (n_features, n_features) or None
        Sum over incomplete rows of ``cov_obs^{-1}`` embedded in a zero ``d x d`` matrix
        (only when ``accumulate``).
    loglik : float or None
        Observed-data log-likelihood (only when ``accumulate``).
    """
    n, d = X.shape
    weights = np.zeros((n, d))
    prec_flat = np.zeros(d * d) if accumulate else None
    loglik = 0.0
    for start, stop, k in layout.batches():
        obs = np.nonzero(~layout.patterns[start:stop])[1].reshape(-1, k)
        inv, logdet = _spd_inverse(cov[obs[:, :, None], obs[:, None, :]])
        if accumulate and k < d:
            counts = layout.counts[start:stop].astype(float)
            flat_index = (obs[:, :, None] * d + obs[:, None, :]).ravel()
            prec_flat += np.bincount(
                flat_index, weights=(inv * counts[:, None, None]).ravel(), minlength=d * d
            )
        rows = layout.row_order[layout.row_start[start] : layout.row_start[stop]]
        step = max(1, _BATCH_ENTRIES // (k * k))
        for row_start in range(0, rows.size, step):
            chunk = rows[row_start : row_start + step]
            local = layout.inverse[chunk] - start
            cols = obs[local]
            resid = X[chunk[:, None], cols] - mean[cols]
            w = np.matmul(inv[local], resid[:, :, None])[:, :, 0]
            weights[chunk[:, None], cols] = w
            if accumulate:
                quad = np.einsum("ij,ij->i", resid, w)
                loglik -= 0.5 * float(np.sum(quad + logdet[local] + k * np.log(2 * np.pi)))
    prec_sum = prec_flat.reshape(d, d) if accumulate else None
    return weights, prec_sum, (loglik if accumulate else None)


def _spd_inverse(mats):
    """Inverses and log-determinants of a stack of symmetric positive definite matrices.

    Parameters
    ----------
    mats : ndarray of shape (batch, k, k)

    Returns
    -------
    inv : ndarray of shape (batch, k, k)
    logdet : ndarray of shape (batch,)

    Matrices whose Cholesky factorization fails (not numerically positive definite) get
    their pseudo-inverse and pseudo-log-determinant instead, from an eigendecomposition
    dropping eigenvalues below ``k * eps * largest eigenvalue``.
    """
    tmats = torch.from_numpy(np.ascontiguousarray(mats))
    chol, info = torch.linalg.cholesky_ex(tmats)
    inv = torch.cholesky_inverse(chol)
    logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(dim=-1)
    failed = torch.nonzero(info).ravel()
    if failed.numel():
        eigval, eigvec = torch.linalg.eigh(tmats[failed])
        k = mats.shape[-1]
        keep = eigval > k * np.finfo(float).eps * eigval[:, -1:].clamp(min=0)
        inv_val = torch.where(keep, 1 / torch.where(keep, eigval, 1.0), 0.0)
        inv[failed] = (eigvec * inv_val[:, None, :]) @ eigvec.mT
        logdet[failed] = torch.where(keep, torch.log(torch.where(keep, eigval, 1.0)), 0.0).sum(-1)
    return inv.numpy(), logdet.numpy()


def _check_mask(mask):
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(
            f"mask must be a 2D array (n_samples, n_features), got shape {mask.shape}."
        )
    if mask.dtype != bool:
        if not np.isin(mask, (0, 1)).all():
            raise ValueError("mask must be boolean or contain only 0 (observed) and 1 (missing).")
        mask = mask.astype(bool)
    return mask


def _check_inputs(X, mean, cov):
    """Validate ``X`` (NaN = missing), ``mean`` and ``cov``; return float64 arrays."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2D array (n_samples, n_features), got shape {X.shape}.")
    if np.isinf(X).any():
        raise ValueError("X contains infinite values; only NaN is allowed, for missing entries.")
    d = X.shape[1]
    mean = np.asarray(mean, dtype=float)
    if mean.shape != (d,):
        raise ValueError(f"mean must have shape ({d},) to match X, got {mean.shape}.")
    if not np.isfinite(mean).all():
        raise ValueError("mean must contain only finite values.")
    cov = np.asarray(cov, dtype=float)
    if cov.shape != (d, d):
        raise ValueError(f"cov must be a square matrix of shape ({d}, {d}), got {cov.shape}.")
    if not np.isfinite(cov).all():
        raise ValueError("cov must contain only finite values.")
    scale = max(float(np.abs(cov).max(initial=0.0)), np.finfo(float).tiny)
    if not np.allclose(cov, cov.T, rtol=0, atol=1e-8 * scale):
        raise ValueError("cov must be symmetric.")
    return X, mean, (cov + cov.T) / 2
