"""Gaussian conditioning with missing values, vectorized over missingness patterns.

For a Gaussian vector ``x ~ N(mean, cov)`` observed on the entries ``obs`` and missing on
``mis``, the conditional distribution of the missing block is Gaussian with

* mean ``mean_mis + cov_mis,obs cov_obs^{-1} (x_obs - mean_obs)`` (paper, eq. 3),
* covariance ``cov_mis|obs = cov_mis,mis - cov_mis,obs cov_obs^{-1} cov_obs,mis``.

Both only depend on the inverse of ``cov_obs``, one matrix per distinct missingness pattern.
Rows are grouped by pattern, patterns are grouped by their number ``k`` of observed entries,
and every group is handled with batched linear algebra (a stack of ``k x k`` inverses by
recursive block elimination), so there is no Python loop over rows, nor over patterns.

Two identities keep the work per pattern to one ``k x k`` inverse. Let ``P`` be
``cov_obs^{-1}`` embedded in a ``d x d`` zero matrix and ``w = P (x - mean)`` (zero on the
missing entries). Then

* ``E[x | x_obs] = mean + cov w`` (on the observed entries this gives back ``x_obs``),
* the conditional covariance of ``x`` embedded in ``d x d`` (zero on observed rows and
  columns) is ``cov - cov P cov``, so its sum over rows is ``n cov - cov (sum P) cov``.
"""

import itertools
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = [
    "ConditionalMoments",
    "PatternLayout",
    "conditional_mean",
    "conditional_moments",
    "group_patterns",
]

# Largest number of float64 matrix entries held in one batch (about 32 MB).
_BATCH_ENTRIES = 2**22

# Relative pivot (and eigenvalue) threshold below which a covariance block is treated as
# singular and pseudo-inverted (see _spd_inverse).
_RCOND = 1e-10


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


class _PatternBatch(NamedTuple):
    """Patterns sharing ``k`` observed entries, and their rows (see :class:`PatternLayout`)."""

    k: int
    observed: np.ndarray  # (n_batch_patterns, k): indices of the observed entries
    counts: np.ndarray  # (n_batch_patterns,): number of rows of each pattern
    first_rows: np.ndarray  # (n_batch_patterns,): one row of each pattern, aligned
    other_rows: list  # [(rows, local pattern index)] for the remaining rows, in chunks


class PatternLayout:
    """Rows of a mask grouped by missingness pattern, reusable across calls.

    Patterns are grouped by their number ``k`` of observed entries into batches whose stack
    of ``k x k`` observed covariances fits a fixed memory budget. Building the layout once
    and passing it to :func:`conditional_moments` avoids regrouping the rows at every EM
    iteration.

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
    batches : list
        Per batch: ``k``, the observed indices of its patterns (n_batch_patterns, k), their
        row counts, one row of each pattern (aligned with the patterns, so that the usual
        case of distinct rows needs no gathering), and the other rows with their pattern.
        Patterns with no observed entry are in no batch.
    """

    def __init__(self, mask):
        self.mask = _check_mask(mask)
        patterns, inverse = group_patterns(self.mask)
        n_observed = self.mask.shape[1] - patterns.sum(axis=1)
        order = np.argsort(n_observed, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.patterns = patterns[order]
        self.inverse = rank[inverse]
        n_observed = n_observed[order]
        counts = np.bincount(self.inverse, minlength=order.size)
        row_order = np.argsort(self.inverse, kind="stable")
        row_start = np.concatenate([[0], np.cumsum(counts)])
        is_first = np.zeros(row_order.size, dtype=bool)
        is_first[row_start[:-1]] = True
        self.batches = []
        for k in np.unique(n_observed[n_observed > 0]):
            k = int(k)
            lo, hi = np.searchsorted(n_observed, [k, k + 1])
            step = max(1, _BATCH_ENTRIES // (k * k))
            for start in range(lo, hi, step):
                stop = min(start + step, hi)
                span = slice(row_start[start], row_start[stop])
                rows, first = row_order[span], is_first[span]
                others = rows[~first]
                self.batches.append(
                    _PatternBatch(
                        k=k,
                        observed=np.nonzero(~self.patterns[start:stop])[1].reshape(-1, k),
                        counts=counts[start:stop].astype(float),
                        first_rows=rows[first],
                        other_rows=[
                            (chunk, self.inverse[chunk] - start)
                            for chunk in np.array_split(others, range(step, others.size, step))
                            if chunk.size
                        ],
                    )
                )


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
    ``cov_obs`` is inverted by block Cholesky elimination, one per distinct pattern,
    batched over the patterns that share a number of observed entries. A ``cov_obs`` that
    is (nearly) singular, with a condition number around 1e10 or more, is inverted with a
    pseudo-inverse (least-squares solution) instead.
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
    # The work is many small matrix products: BLAS threads only add overhead (and contend
    # for the cores on a busy machine).
    with threadpool_limits(limits=1, user_api="blas"):
        return _solve_patterns_serial(X, layout, mean, cov, accumulate)


def _solve_patterns_serial(X, layout, mean, cov, accumulate):
    n, d = X.shape
    weights = np.zeros((n, d))
    prec_flat = np.zeros(d * d) if accumulate else None
    loglik = 0.0
    for batch in layout.batches:
        obs, k = batch.observed, batch.k
        # Flat indices of the observed block of ``cov``, for the gather and the scatter-add.
        flat_index = obs[:, :, None] * d + obs[:, None, :]
        inv, logdet = _spd_inverse(cov.ravel()[flat_index])
        if accumulate and k < d:
            prec_flat += np.bincount(
                flat_index.ravel(),
                weights=(inv * batch.counts[:, None, None]).ravel(),
                minlength=d * d,
            )
        row_groups = itertools.chain(
            [(batch.first_rows, obs, inv, logdet)],
            ((rows, obs[local], inv[local], logdet[local]) for rows, local in batch.other_rows),
        )
        for rows, cols, rows_inv, rows_logdet in row_groups:
            resid = X[rows[:, None], cols] - mean[cols]
            w = np.matmul(rows_inv, resid[:, :, None])[:, :, 0]
            weights[rows[:, None], cols] = w
            if accumulate:
                quad = np.einsum("ij,ij->i", resid, w)
                loglik -= 0.5 * float(np.sum(quad + rows_logdet + k * np.log(2 * np.pi)))
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

    A matrix with a pivot below ``_RCOND`` times its largest diagonal entry (condition
    number around ``1 / _RCOND`` or more, or not positive definite) gets instead the
    pseudo-inverse and pseudo-log-determinant from its eigendecomposition, dropping the
    eigenvalues below ``_RCOND`` times the largest (a least-squares solution).
    """
    largest = np.abs(np.diagonal(mats, axis1=1, axis2=2)).max(axis=1)
    inv, logdet, ok = _block_spd_inverse(mats, _RCOND * largest)
    failed = np.flatnonzero(~ok)
    if failed.size:
        eigval, eigvec = np.linalg.eigh(mats[failed])
        keep = eigval > _RCOND * np.maximum(eigval[:, -1:], 0)
        safe = np.where(keep, eigval, 1.0)
        scaled = eigvec * np.where(keep, 1 / safe, 0.0)[:, None, :]
        inv[failed] = scaled @ eigvec.transpose(0, 2, 1)
        logdet[failed] = np.log(safe).sum(axis=1)
    return inv, logdet


def _block_spd_inverse(mats, floor):
    """Recursive 2 x 2 block inversion of a stack of SPD matrices (Schur complements).

    With ``mats = [[A, B], [B^T, C]]`` and ``S = C - B^T A^{-1} B``, the inverse is
    ``[[A^{-1} + T S^{-1} T^T, -T S^{-1}], [-S^{-1} T^T, S^{-1}]]`` with ``T = A^{-1} B``, and
    ``log det = log det A + log det S``. This is block Cholesky elimination, stable for SPD
    matrices; unlike a LAPACK call per matrix its work is in batched matrix products, which
    is much faster for the small matrices of missingness patterns.

    Parameters
    ----------
    mats : ndarray of shape (batch, k, k)
    floor : ndarray of shape (batch,)
        Smallest acceptable pivot of each matrix.

    Returns
    -------
    inv : ndarray of shape (batch, k, k)
    logdet : ndarray of shape (batch,)
    ok : ndarray of shape (batch,), bool
        False where a pivot was not above ``floor``; ``inv`` and ``logdet`` are then
        meaningless (but finite) for that matrix.
    """
    k = mats.shape[-1]
    if k == 1:
        pivot = mats[:, 0, 0]
        ok = pivot > floor
        safe = np.where(ok, pivot, 1.0)
        return (1 / safe)[:, None, None], np.log(safe), ok
    h = k // 2
    inv_a, logdet_a, ok_a = _block_spd_inverse(mats[:, :h, :h], floor)
    b = mats[:, :h, h:]
    t = inv_a @ b
    inv_s, logdet_s, ok_s = _block_spd_inverse(mats[:, h:, h:] - b.transpose(0, 2, 1) @ t, floor)
    u = t @ inv_s
    inv = np.empty_like(mats)
    inv[:, :h, :h] = inv_a + u @ t.transpose(0, 2, 1)
    inv[:, :h, h:] = -u
    inv[:, h:, :h] = -u.transpose(0, 2, 1)
    inv[:, h:, h:] = inv_s
    return inv, logdet_a + logdet_s, ok_a & ok_s


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
