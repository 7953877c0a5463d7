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


class Standardizer:
    """Standardize each feature by the mean and deviation of its observed entries.

    Attributes (after :meth:`fit`)
    ------------------------------
    mean_, scale_ : ndarray of shape (n_features,), float64
        Subtracted, then divided by (see :func:`observed_mean_scale`).
    """

    def fit(self, X: np.ndarray) -> Standardizer:
        """Learn ``mean_`` and ``scale_`` from ``X`` (n_samples, n_features), NaN = missing."""
        self.mean_, self.scale_ = observed_mean_scale(X)
        return self

    def transform(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The network's inputs for ``X`` (n_samples, n_features), NaN = missing.

        Returns
        -------
        x : ndarray (n_samples, n_features), float32
            ``(X - mean_) / scale_``, 0 where missing.
        mask : ndarray (n_samples, n_features), float32
            1.0 where ``X`` is missing, 0.0 where observed.
        """
        mask = np.isnan(X)
        x = (X - self.mean_) / self.scale_
        x[mask] = 0.0
        return x.astype(np.float32), mask.astype(np.float32)

    def inverse_transform(self, x: np.ndarray) -> np.ndarray:
        """Standardized values (n_samples, n_features) back in the features' units, float64."""
        return np.asarray(x, dtype=np.float64) * self.scale_ + self.mean_

    def get_state(self) -> dict[str, np.ndarray]:
        """The fitted numbers, for saving: ``{"mean": mean_, "scale": scale_}``."""
        return {"mean": self.mean_, "scale": self.scale_}

    @classmethod
    def from_state(cls, state: dict) -> Standardizer:
        """A fitted standardizer from :meth:`get_state`'s dictionary."""
        standardizer = cls()
        standardizer.mean_ = np.asarray(state["mean"], dtype=np.float64)
        standardizer.scale_ = np.asarray(state["scale"], dtype=np.float64)
        return standardizer
