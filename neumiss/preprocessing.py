"""The fitted preprocessing between a user's table and a NeuMiss network.

:class:`Standardizer` maps validated float64 features with NaN to the
network's two inputs: standardized values with 0 where missing, and the mask.
The estimators call it in ``fit``, ``predict`` and ``impute``; the ONNX
exporter writes its ``mean_`` and ``scale_`` into the graph, so that the
graph's preprocessing and ``predict``'s are the same numbers.
"""

from __future__ import annotations

import numpy as np


def observed_mean_scale(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the observed (non-NaN) entries of each column.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), NaN = missing.

    Returns
    -------
    mean, scale : ndarrays of shape (n_features,)
        Columns without observed entries get mean 0; a scale that is 0 or
        negligible against the mean (constant or empty column) is replaced by 1.
    """
    observed = ~np.isnan(X)
    count = np.maximum(observed.sum(axis=0), 1)
    mean = np.where(observed, X, 0.0).sum(axis=0) / count
    var = (np.where(observed, X - mean, 0.0) ** 2).sum(axis=0) / count
    scale = np.sqrt(var)
    return mean, np.where(scale > 1e-12 * np.maximum(1.0, np.abs(mean)), scale, 1.0)


#: A numeric column has heavy tails when an observed value lies beyond this many
#: robust standard deviations (interquartile range / 1.349) from its median; a
#: Gaussian sample of 10^7 values stays within about 5.7.
HEAVY_TAIL_THRESHOLD = 8.0
#: Heavy-tailed columns are compressed smoothly beyond this many robust deviations.
CLIP_BOUND = 3.0


def _heavy_tailed(X: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which of ``columns`` have heavy tails, with their medians and robust scales.

    Returns boolean, center and scale arrays of shape (n_features,); center and
    scale are meaningful where the boolean is True.
    """
    heavy = np.zeros(X.shape[1], dtype=bool)
    center, scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
    for j in np.flatnonzero(columns):
        values = X[:, j][~np.isnan(X[:, j])]
        if values.size < 2:
            continue
        q1, median, q3 = np.percentile(values, [25, 50, 75])
        spread = (q3 - q1) / 1.349
        if not spread > 1e-12 * max(1.0, abs(median)):
            continue  # mostly constant: the standard scaling applies
        if np.max(np.abs(values - median)) > HEAVY_TAIL_THRESHOLD * spread:
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

    Parameters
    ----------
    compress_tails : bool, default=False
    numeric : ndarray of bool, shape (n_features,), optional
        The columns that may be compressed (default: all); one-hot columns are not.

    Attributes (after :meth:`fit`)
    ------------------------------
    mean_, scale_ : ndarray of shape (n_features,), float64
        Subtracted, then divided by.
    inverse_bound_ : ndarray of shape (n_features,), float64
        ``1 / CLIP_BOUND`` for compressed columns, 0 for the others.
    """

    def __init__(self, compress_tails: bool = False, numeric: np.ndarray | None = None) -> None:
        self.compress_tails = compress_tails
        self.numeric = numeric

    def fit(self, X: np.ndarray) -> Standardizer:
        """Learn the scaling from ``X`` (n_samples, n_features), NaN = missing."""
        self.mean_, self.scale_ = observed_mean_scale(X)
        self.inverse_bound_ = np.zeros(X.shape[1])
        if self.compress_tails:
            numeric = np.ones(X.shape[1], bool) if self.numeric is None else self.numeric
            heavy, center, scale = _heavy_tailed(X, np.asarray(numeric, dtype=bool))
            self.mean_[heavy], self.scale_[heavy] = center[heavy], scale[heavy]
            self.inverse_bound_[heavy] = 1.0 / CLIP_BOUND
        return self

    def transform(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The network's inputs for ``X`` (n_samples, n_features), NaN = missing.

        Returns
        -------
        x : ndarray (n_samples, n_features), float32
            ``z / sqrt(1 + (z * inverse_bound_)^2)`` with ``z = (X - mean_) / scale_``
            (``z`` itself where ``inverse_bound_`` is 0), 0 where missing.
        mask : ndarray (n_samples, n_features), float32
            1.0 where ``X`` is missing, 0.0 where observed.
        """
        mask = np.isnan(X)
        x = (X - self.mean_) / self.scale_
        if self.inverse_bound_.any():
            x = x / np.sqrt(1.0 + (x * self.inverse_bound_) ** 2)
        x[mask] = 0.0
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
        """The fitted numbers, for saving: ``mean``, ``scale`` and ``inverse_bound``."""
        return {"mean": self.mean_, "scale": self.scale_, "inverse_bound": self.inverse_bound_}

    @classmethod
    def from_state(cls, state: dict) -> Standardizer:
        """A fitted standardizer from :meth:`get_state`'s dictionary."""
        standardizer = cls()
        standardizer.mean_ = np.asarray(state["mean"], dtype=np.float64)
        standardizer.scale_ = np.asarray(state["scale"], dtype=np.float64)
        standardizer.inverse_bound_ = np.asarray(state["inverse_bound"], dtype=np.float64)
        return standardizer
