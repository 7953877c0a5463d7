"""The scikit-learn estimators and their model files.

Owns :class:`NeuMissRegressor`, :class:`NeuMissQuantileRegressor` and
:class:`NeuMissClassifier` (parameters, validation in ``fit``, the fit orchestration of
members, seeds and search), the exact linear model of each missingness pattern of a
linear-head network (``pattern_model``), fitting from a stream of chunks, fitting
data-parallel where the rows live (Dask, Spark, torchrun on Parquet files), and saving
and loading models without pickle (:func:`load`). May import every layer below it:
:mod:`neumiss.checks`, :mod:`neumiss.simulation`, :mod:`neumiss.tables`,
:mod:`neumiss.network` and :mod:`neumiss.export`.
"""

from ._classifier import NeuMissClassifier
from ._parallel_fit import fit_parquet, fit_spark
from ._persistence import FORMAT_VERSION, MODEL_CLASSES, load, payload_digest, save_estimator
from ._quantile import NeuMissQuantileRegressor
from ._regressor import LOG_SCALE_SKEWNESS, LOG_TARGET_SKEWNESS, NeuMissRegressor
from ._streaming import RunningMoments, fit_stream, parquet_chunks

__all__ = [
    "FORMAT_VERSION",
    "LOG_SCALE_SKEWNESS",
    "LOG_TARGET_SKEWNESS",
    "MODEL_CLASSES",
    "NeuMissClassifier",
    "NeuMissQuantileRegressor",
    "NeuMissRegressor",
    "RunningMoments",
    "fit_parquet",
    "fit_spark",
    "fit_stream",
    "load",
    "parquet_chunks",
    "payload_digest",
    "save_estimator",
]
