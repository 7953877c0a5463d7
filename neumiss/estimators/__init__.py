"""The scikit-learn estimators and their model files.

Owns :class:`NeuMissRegressor`, :class:`NeuMissQuantileRegressor` and
:class:`NeuMissClassifier` (parameters, validation in ``fit``, the fit orchestration of
members, seeds and search), the exact linear model of each missingness pattern of a
linear-head network (``pattern_model``), fitting from a stream of chunks, and saving
and loading models without pickle (:func:`load`). May import every layer below it:
:mod:`neumiss.checks`, :mod:`neumiss.simulation`, :mod:`neumiss.tables`,
:mod:`neumiss.network` and :mod:`neumiss.export`.
"""

from ._estimators import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from ._persistence import FORMAT_VERSION, MODEL_CLASSES, load, payload_digest, save_estimator
from ._streaming import RunningMoments, fit_stream, parquet_chunks

__all__ = [
    "FORMAT_VERSION",
    "MODEL_CLASSES",
    "NeuMissClassifier",
    "NeuMissQuantileRegressor",
    "NeuMissRegressor",
    "RunningMoments",
    "fit_stream",
    "load",
    "parquet_chunks",
    "payload_digest",
    "save_estimator",
]
