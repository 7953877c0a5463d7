"""The fitted preprocessing between a user's table and a NeuMiss network.

:class:`Standardizer` maps validated float64 features with NaN to the
network's two inputs: standardized values with 0 where missing, and the mask.
The estimators call it in ``fit``, ``predict`` and ``impute``; the ONNX
exporter writes its ``mean_`` and ``scale_`` into the graph, so that the
graph's preprocessing and ``predict``'s are the same numbers.
"""

from __future__ import annotations

import numpy as np

#: A column (or target) is constant when its standard deviation is at most this
#: fraction of its largest absolute value: relative, so that a feature in units of
#: 1e-13 is standardized like any other, while float rounding noise of a constant
#: column (about 1e-16 of its value) is not blown up.
RELATIVE_SCALE_THRESHOLD = 1e-12


def mean_scale(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of finite ``values`` (1-D), in float64, at any magnitude.

    The values are first divided by their largest absolute value, so that
    neither the sum of squares overflows (values near 1e300) nor underflows
    (values near 1e-300). A deviation at most :data:`RELATIVE_SCALE_THRESHOLD`
    times that largest value (a constant column), or no value at all, gives a
    scale of 1; no values give a mean of 0.

    Returns
    -------
    mean, scale : float
        Finite, ``scale > 0``; multiplying ``values`` by ``10**k`` multiplies both
        by ``10**k`` (up to rounding), as long as they stay finite.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 0.0, 1.0
    peak = float(np.max(np.abs(values)))
    if not peak > 0:
        return 0.0, 1.0
    unit = values / peak
    centre = float(unit.mean())
    spread = float(np.sqrt(np.mean((unit - centre) ** 2)))
    mean = centre * peak
    scale = spread * peak
    if not (spread > RELATIVE_SCALE_THRESHOLD and np.isfinite(scale) and scale > 0):
        scale = 1.0
    return mean, scale


def observed_values(X: np.ndarray) -> list[np.ndarray]:
    """The observed (non-NaN) entries of each column of ``X`` (n_samples, n_features), each
    a contiguous float64 array (n_observed_j,), in row order."""
    columns = np.asfortranarray(X, dtype=np.float64)  # one copy: each column contiguous
    return [column[~np.isnan(column)] for column in columns.T]


def observed_mean_scale(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the observed (non-NaN) entries of each column.

    Computed column by column by :func:`mean_scale`, in float64 and relative to
    the column's magnitude: the scaling does not depend on the features' units
    (``X * 10**k`` for any ``k`` whose values stay finite gives the same
    standardized values).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), NaN = missing.

    Returns
    -------
    mean, scale : ndarrays of shape (n_features,)
        Columns without observed entries get mean 0; a scale that is negligible
        against the column's largest absolute value (constant or empty column) is
        replaced by 1.
    """
    return _mean_scales(observed_values(X))


def _mean_scales(values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mean_scale` of each column's observed ``values`` (:func:`observed_values`),
    as two arrays of shape (n_features,)."""
    mean, scale = np.zeros(len(values)), np.ones(len(values))
    for j, column in enumerate(values):
        mean[j], scale[j] = mean_scale(column)
    return mean, scale


def scaled_r2_score(y_true, y_pred, scale: float, sample_weight=None) -> float:
    """scikit-learn's R², computed on ``y / scale``: the same number, without the
    overflow (or underflow) of squares of targets near 1e±300."""
    from sklearn.metrics import r2_score

    y_true = np.asarray(y_true, dtype=np.float64)
    return float(r2_score(y_true / scale, np.asarray(y_pred) / scale, sample_weight=sample_weight))


#: Largest absolute standardized value (column deviations from the training
#: mean) the network accepts: beyond, float32 arithmetic would overflow.
MAX_STANDARDIZED = 1e30


def describe_cells(bad: np.ndarray, columns=None, row_offset: int = 0) -> str:
    """``rows [..] (columns [..])`` for the True cells of ``bad`` (n, d), a few of each."""
    rows = np.flatnonzero(bad.any(axis=1)) + row_offset
    cols = np.flatnonzero(bad.any(axis=0))
    names = [columns[j] if columns is not None else int(j) for j in cols[:10]]
    more_rows = f" and {rows.size - 10} more" if rows.size > 10 else ""
    more_cols = f" and {cols.size - 10} more" if cols.size > 10 else ""
    return f"rows {rows[:10].tolist()}{more_rows} (columns {names}{more_cols})"


def check_outputs_finite(values: np.ndarray, what: str = "predictions") -> np.ndarray:
    """``values`` (n,) or (n, k), if all finite; otherwise a ``ValueError`` naming the rows."""
    values = np.asarray(values)
    bad = ~np.isfinite(values)
    if bad.any():
        rows = np.flatnonzero(bad.reshape(values.shape[0], -1).any(axis=1))
        raise ValueError(
            f"the {what} of rows {rows[:10].tolist()}{' and more' if rows.size > 10 else ''} "
            "are not finite (NaN or infinity): their feature values lie too far outside the "
            "training range for float32 arithmetic"
        )
    return values


#: A numeric column has heavy tails when an observed value lies beyond this many
#: robust standard deviations (interquartile range / 1.349) from its median; a
#: Gaussian sample of 10^7 values stays within about 5.7.
HEAVY_TAIL_THRESHOLD = 8.0
#: Heavy-tailed columns are compressed smoothly beyond this many robust deviations.
CLIP_BOUND = 3.0


def _heavy_tailed(values: list[np.ndarray], columns: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which of ``columns`` have heavy tails, with their medians and robust scales, from
    the observed ``values`` of each column (:func:`observed_values`).

    Returns boolean, center and scale arrays of shape (n_features,); center and
    scale are meaningful where the boolean is True.
    """
    heavy = np.zeros(len(values), dtype=bool)
    center, scale = np.zeros(len(values)), np.ones(len(values))
    for j in np.flatnonzero(columns):
        column = values[j]
        if column.size < 2:
            continue
        q1, median, q3 = np.percentile(column, [25, 50, 75])
        spread = (q3 - q1) / 1.349
        if not spread > RELATIVE_SCALE_THRESHOLD * np.max(np.abs(column)):
            continue  # mostly constant: the standard scaling applies
        if np.max(np.abs(column - median)) > HEAVY_TAIL_THRESHOLD * spread:
            heavy[j], center[j], scale[j] = True, median, spread
    return heavy, center, scale


class Standardizer:
    """Standardize each feature; optionally compress the heavy tails of numeric ones.

    Each column is centred and scaled by the mean and deviation of its observed
    entries. With ``compress_tails``, a numeric column whose tails are heavy
    (:data:`HEAVY_TAIL_THRESHOLD`) is centred and scaled by its median and
    robust deviation instead, then compressed smoothly,
    ``z / sqrt(1 + (z / CLIP_BOUND)^2)`` (the smooth clipping of RealMLP,
    Holzmüller et al. 2024): nearly the identity within a few deviations,
    bounded by ``CLIP_BOUND`` beyond. Other columns are left linear, so
    Gaussian data are only standardized.

    Every column's values are then clipped to the range of its observed training
    values: a row beyond it (a country ten times richer than any seen in
    training) is scored as one at the edge, as a tree would score it, instead of
    by extrapolating a linear function far outside the data.

    Parameters
    ----------
    compress_tails : bool, default=False
    numeric : ndarray of bool, shape (n_features,), optional
        The columns that may be compressed (default: all); one-hot columns are not.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (n_features,), float64
        Subtracted, then divided by.
    inverse_bound_ : ndarray of shape (n_features,), float64
        ``1 / CLIP_BOUND`` for compressed columns, 0 for the others.
    lower_, upper_ : ndarray of shape (n_features,), float64
        The range of the standardized (and compressed) observed training values;
        ``-/+ MAX_STANDARDIZED`` for a column never observed.
    """

    def __init__(self, compress_tails: bool = False, numeric: np.ndarray | None = None) -> None:
        self.compress_tails = compress_tails
        self.numeric = numeric

    def fit(self, X: np.ndarray) -> Standardizer:
        """Learn the scaling from ``X`` (n_samples, n_features), NaN = missing."""
        values = observed_values(X)
        self.mean_, self.scale_ = _mean_scales(values)
        self.inverse_bound_ = np.zeros(X.shape[1])
        if self.compress_tails:
            numeric = np.ones(X.shape[1], bool) if self.numeric is None else self.numeric
            heavy, center, scale = _heavy_tailed(values, np.asarray(numeric, dtype=bool))
            self.mean_[heavy], self.scale_[heavy] = center[heavy], scale[heavy]
            self.inverse_bound_[heavy] = 1.0 / CLIP_BOUND
        # The range of each column's standardized values (fmin / fmax skip NaN without
        # copying the rows): NaN for a column never observed, which gets the widest one.
        z = self._scaled(X)
        lower, upper = np.fmin.reduce(z, axis=0), np.fmax.reduce(z, axis=0)
        self.lower_ = np.where(np.isnan(lower), -MAX_STANDARDIZED, lower)
        self.upper_ = np.where(np.isnan(upper), MAX_STANDARDIZED, upper)
        return self

    def _scaled(self, X: np.ndarray) -> np.ndarray:
        """``(X - mean_) / scale_``, compressed where ``inverse_bound_`` says; NaN stays.
        A new array (the operations after the first are in place)."""
        with np.errstate(over="ignore", invalid="ignore"):
            z = X - self.mean_
            z /= self.scale_
            if self.inverse_bound_.any():
                # hypot: no overflow of the square for values far in the tails.
                z /= np.hypot(1.0, z * self.inverse_bound_)
        return z

    def transform(
        self, X: np.ndarray, *, row_offset: int = 0, columns=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The network's inputs for ``X`` (n_samples, n_features), NaN = missing.

        Error messages number rows from ``row_offset`` (for chunks of a table)
        and name columns by ``columns`` (default: their positions).

        Returns
        -------
        x : ndarray (n_samples, n_features), float32
            ``z / sqrt(1 + (z * inverse_bound_)^2)`` with ``z = (X - mean_) / scale_``
            (``z`` itself where ``inverse_bound_`` is 0), clipped to
            ``[lower_, upper_]``, 0 where missing.
        mask : ndarray (n_samples, n_features), float32
            1.0 where ``X`` is missing, 0.0 where observed.

        Raises
        ------
        ValueError
            When an observed value lies more than :data:`MAX_STANDARDIZED`
            deviations from its column's mean (float32 would overflow), naming
            its rows and columns.
        """
        mask = np.isnan(X)
        x = self._scaled(X)
        too_far = ~mask & ~(np.abs(x) <= MAX_STANDARDIZED)
        if too_far.any():
            raise ValueError(
                f"X has values too far from the training data for the network at "
                f"{describe_cells(too_far, columns, row_offset)}: more than "
                f"{MAX_STANDARDIZED:g} standard deviations from the column's training mean"
            )
        np.maximum(x, self.lower_, out=x)  # np.clip's result, without its copies
        np.minimum(x, self.upper_, out=x)
        np.copyto(x, 0.0, where=mask)
        return x.astype(np.float32), mask.astype(np.float32)

    def inverse_transform(self, x: np.ndarray) -> np.ndarray:
        """Network-side values (n_samples, n_features) back in the features' units, float64.

        Compressed values at or beyond the bound map to ±inf.
        """
        x = np.asarray(x, dtype=np.float64)
        if self.inverse_bound_.any():
            with np.errstate(divide="ignore", invalid="ignore"):
                inside = 1.0 - (x * self.inverse_bound_) ** 2
                x = np.where(inside > 0, x / np.sqrt(np.maximum(inside, 0)), np.sign(x) * np.inf)
        return x * self.scale_ + self.mean_

    def get_state(self) -> dict[str, np.ndarray]:
        """The fitted numbers, for saving: ``mean``, ``scale``, ``inverse_bound``, ``lower``
        and ``upper``."""
        return {"mean": self.mean_, "scale": self.scale_, "inverse_bound": self.inverse_bound_,
                "lower": self.lower_, "upper": self.upper_}

    @classmethod
    def from_state(cls, state: dict) -> Standardizer:
        """A fitted standardizer from :meth:`get_state`'s dictionary."""
        standardizer = cls()
        standardizer.mean_ = np.asarray(state["mean"], dtype=np.float64)
        standardizer.scale_ = np.asarray(state["scale"], dtype=np.float64)
        standardizer.inverse_bound_ = np.asarray(state["inverse_bound"], dtype=np.float64)
        # Files written before the clipping: no bounds.
        width = standardizer.mean_.shape
        standardizer.lower_ = np.asarray(state.get("lower", np.full(width, -MAX_STANDARDIZED)),
                                         dtype=np.float64)
        standardizer.upper_ = np.asarray(state.get("upper", np.full(width, MAX_STANDARDIZED)),
                                         dtype=np.float64)
        return standardizer
