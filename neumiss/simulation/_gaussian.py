"""Gaussian conditioning with missing values, vectorized over missingness patterns.

For a Gaussian vector ``x ~ N(mean, cov)`` observed on the entries ``obs`` and missing on
``mis``, the conditional distribution of the missing block is Gaussian with

* mean ``mean_mis + cov_mis,obs cov_obs^{-1} (x_obs - mean_obs)`` (paper, eq. 3),
* covariance ``cov_mis|obs = cov_mis,mis - cov_mis,obs cov_obs^{-1} cov_obs,mis``.

Both need one matrix inverse per distinct missingness pattern. Rows are grouped by pattern,
patterns by the size of that inverse, and every group is handled with batched linear algebra
(a stack of inverses by recursive block elimination): there is no Python loop over rows,
nor over patterns.

A pattern is handled on its smaller side. With ``P`` the inverse of ``cov_obs`` embedded in
a ``d x d`` zero matrix and ``w = P (x - mean)``,

* ``E[x | x_obs] = mean + cov w`` (on the observed entries this gives back ``x_obs``),
* the conditional covariance of ``x`` embedded in ``d x d`` (zero on the observed rows and
  columns) is ``cov - cov P cov``, so its sum over rows is ``n cov - cov (sum P) cov``.

With more observed than missing entries, the precision matrix ``Q = cov^{-1}`` gives the
same from an inverse of the smaller ``Q_mis,mis``: ``cov_mis|obs = Q_mis,mis^{-1}``,
``E[x_mis | x_obs] = mean_mis - Q_mis,mis^{-1} (Q (x - mean)_obs)_mis`` and
``log det cov_obs = log det cov + log det Q_mis,mis``. This route needs a well-conditioned
``cov``; otherwise every pattern goes through ``cov_obs``.
"""

import functools
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

# Largest number of float64 matrix entries held in one batch (about 32 MB), here and in
# the Bayes predictors: bounds the memory of a stack of per-pattern matrices.
_BATCH_ENTRIES = 2**22

# Relative pivot (and eigenvalue) threshold below which a covariance block is treated as
# singular and pseudo-inverted (see _spd_inverse).
_RCOND = 1e-10

# Relative pivot threshold of ``cov`` for the precision route (condition number < ~1e8).
_PRECISION_RCOND = 1e-8


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
    """Patterns handled together, and their rows (see :class:`PatternLayout`)."""

    on_missing: bool  # the indices are the missing entries (precision route)
    indices: np.ndarray  # (n_batch_patterns, size): observed, or missing, entries
    counts: np.ndarray  # (n_batch_patterns,): number of rows of each pattern
    first_rows: np.ndarray  # (n_batch_patterns,): one row of each pattern, aligned
    other_rows: list  # [(rows, local pattern index)] for the remaining rows, in chunks


class PatternLayout:
    """Rows of a mask grouped by missingness pattern, reusable across calls.

    Building the layout once and passing it to :func:`conditional_moments` avoids
    regrouping the rows at every EM iteration.

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
        self._n_observed = n_observed[order]
        self._counts = np.bincount(self.inverse, minlength=order.size)
        self._row_order = np.argsort(self.inverse, kind="stable")
        self._row_start = np.concatenate([[0], np.cumsum(self._counts)])
        self._batches = {}

    def batches(self, precision_route):
        """Batches of patterns sharing the size of the matrix to invert (cached).

        Parameters
        ----------
        precision_route : bool
            If True, patterns with fewer missing than observed entries are batched by their
            missing entries (complete rows included, with none); otherwise every pattern is
            batched by its observed entries. Patterns with nothing observed are left out.

        Returns
        -------
        list of _PatternBatch
            Each batch holds the indices of its patterns, their row counts, one row of each
            pattern (aligned with the patterns, so that the usual case of distinct rows needs
            no gathering) and the other rows with their pattern, in chunks. A batch's stack of
            matrices fits a fixed memory budget.
        """
        if precision_route not in self._batches:
            self._batches[precision_route] = list(self._make_batches(precision_route))
        return self._batches[precision_route]

    def _make_batches(self, precision_route):
        n_features = self.mask.shape[1]
        is_first = np.zeros(self._row_order.size, dtype=bool)
        is_first[self._row_start[:-1]] = True
        for k in np.unique(self._n_observed):
            on_missing = precision_route and n_features - k < k
            size = int(n_features - k if on_missing else k)
            if size == 0 and not on_missing:
                continue
            lo, hi = np.searchsorted(self._n_observed, [k, k + 1])
            step = max(1, _BATCH_ENTRIES // max(1, size * size))
            for start in range(lo, hi, step):
                stop = min(start + step, hi)
                span = slice(self._row_start[start], self._row_start[stop])
                rows, first = self._row_order[span], is_first[span]
                others = rows[~first]
                selected = self.patterns[start:stop] if on_missing else ~self.patterns[start:stop]
                yield _PatternBatch(
                    on_missing=on_missing,
                    indices=np.nonzero(selected)[1].reshape(stop - start, size),
                    counts=self._counts[start:stop].astype(float),
                    first_rows=rows[first],
                    other_rows=[
                        (chunk, self.inverse[chunk] - start)
                        for chunk in np.array_split(others, range(step, others.size, step))
                        if chunk.size
                    ],
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


def _serial_blas(func):
    """Run ``func`` with single-threaded BLAS.

    The work here is mostly many small matrix products, for which BLAS threads only add
    overhead, and contend for the cores on a busy machine.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper


@_serial_blas
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
    One matrix is inverted per distinct pattern, by block Cholesky elimination batched over
    the patterns that share its size: ``cov_obs``, or ``Q_mis,mis`` from the precision
    matrix when fewer entries are missing than observed (see the module docstring). A
    (nearly) singular ``cov_obs``, with a condition number around 1e10 or more, is inverted
    with a pseudo-inverse (least-squares solution) instead.
    """
    X, mean, cov = _check_inputs(X, mean, cov)
    mask = np.isnan(X)
    partial = np.flatnonzero(mask.any(axis=1) & ~mask.all(axis=1))
    filled = np.where(mask, mean, X)
    if partial.size:
        solved = _solve_patterns(X[partial], PatternLayout(mask[partial]), mean, cov, False)
        filled[partial] = solved.fill(X[partial], mask[partial], mean, cov)
    return filled


@_serial_blas
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
    solved = _solve_patterns(X, layout, mean, cov, accumulate=True)
    cond_cov_sum = solved.n_through_obs * cov - cov @ solved.prec_sum @ cov + solved.mis_cov_sum
    cond_cov_sum = (cond_cov_sum + cond_cov_sum.T) / 2
    return ConditionalMoments(solved.fill(X, layout.mask, mean, cov), cond_cov_sum, solved.loglik)


class _Solved(NamedTuple):
    """Per-pattern solves of :func:`_solve_patterns`.

    Attributes
    ----------
    weights : ndarray of shape (n_samples, n_features)
        ``cov_obs^{-1} (x_obs - mean_obs)`` on the observed entries of the rows handled
        through ``cov_obs``; 0 elsewhere.
    correction : ndarray of shape (n_samples, n_features)
        ``mean_mis - E[x_mis | x_obs]`` on the missing entries of the rows handled through
        the precision matrix; 0 elsewhere.
    prec_sum : ndarray of shape (n_features, n_features) or None
        Sum of ``P`` (``cov_obs^{-1}`` embedded in zeros) over the incomplete rows handled
        through ``cov_obs``.
    n_through_obs : int or None
        Number of those rows, plus the rows with nothing observed (``P = 0``).
    mis_cov_sum : ndarray of shape (n_features, n_features) or None
        Sum of the embedded ``cov_mis|obs`` over the rows handled through the precision.
    loglik : float or None
        Observed-data log-likelihood. The last four are only computed with ``accumulate``.
    """

    weights: np.ndarray
    correction: np.ndarray
    prec_sum: np.ndarray
    n_through_obs: int
    mis_cov_sum: np.ndarray
    loglik: float

    def fill(self, X, mask, mean, cov):
        """``X`` with each missing entry replaced by its conditional expectation."""
        return np.where(mask, mean + self.weights @ cov - self.correction, X)


def _solve_patterns(X, layout, mean, cov, accumulate):
    """Solve every row's pattern; see :class:`_Solved` for the output."""
    n, d = X.shape
    mask = layout.mask
    centered = np.where(mask, 0.0, X - mean)
    precision, logdet_cov = _precision(cov)
    projected = None if precision is None else centered @ precision
    weights = np.zeros((n, d))
    correction = np.zeros((n, d))
    sums = {False: np.zeros(d * d), True: np.zeros(d * d)}  # by on_missing
    n_through_obs = np.count_nonzero(mask.all(axis=1))
    loglik = 0.0
    for batch in layout.batches(precision is not None):
        idx, on_missing = batch.indices, batch.on_missing
        size = idx.shape[1]
        # Flat indices of the block to invert, for the gather and the scatter-add.
        flat_index = idx[:, :, None] * d + idx[:, None, :]
        source = precision if on_missing else cov
        inv, logdet = _spd_inverse(source.ravel()[flat_index])
        if accumulate and (on_missing or size < d):
            sums[on_missing] += np.bincount(
                flat_index.ravel(),
                weights=(inv * batch.counts[:, None, None]).ravel(),
                minlength=d * d,
            )
            n_through_obs += 0 if on_missing else int(batch.counts.sum())
        row_groups = itertools.chain(
            [(batch.first_rows, idx, inv, logdet)],
            ((rows, idx[local], inv[local], logdet[local]) for rows, local in batch.other_rows),
        )
        # Through the precision: correction_mis = Q_mis,mis^{-1} (Q (x - mean)_obs)_mis, with
        # Q (x - mean)_obs in ``projected``. Otherwise: weights_obs = cov_obs^{-1} (x - mean)_obs.
        rhs_source, output = (projected, correction) if on_missing else (centered, weights)
        for rows, cols, rows_inv, rows_logdet in row_groups:
            rhs = rhs_source[rows[:, None], cols]
            solution = np.matmul(rows_inv, rhs[:, :, None])[:, :, 0]
            output[rows[:, None], cols] = solution
            if accumulate:
                quad = np.einsum("ij,ij->i", rhs, solution)
                n_obs = d - size if on_missing else size
                if on_missing:
                    # (x - mean)_obs^T cov_obs^{-1} (x - mean)_obs = r^T Q r - rhs^T solution
                    quad = np.einsum("ij,ij->i", centered[rows], projected[rows]) - quad
                    rows_logdet = logdet_cov + rows_logdet
                loglik -= 0.5 * float(np.sum(quad + rows_logdet + n_obs * np.log(2 * np.pi)))
    if not accumulate:
        return _Solved(weights, correction, None, None, None, None)
    return _Solved(
        weights,
        correction,
        sums[False].reshape(d, d),
        n_through_obs,
        sums[True].reshape(d, d),
        loglik,
    )


def _precision(cov):
    """``(cov^{-1}, log det cov)``, or ``(None, None)`` if ``cov`` is ill-conditioned."""
    largest = np.abs(np.diagonal(cov)).max(initial=0.0)
    inv, logdet, ok = _block_spd_inverse(cov[None], np.array([_PRECISION_RCOND * largest]))
    return (inv[0], float(logdet[0])) if ok[0] and largest > 0 else (None, None)


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
    if mats.shape[-1] == 0:
        return np.zeros(mats.shape), np.zeros(len(mats))
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
        # A failed pivot is dropped (inverse 0), which keeps the rest finite.
        return np.where(ok, 1 / safe, 0.0)[:, None, None], np.log(safe), ok
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
