"""Scoring exported models anywhere: files in row batches, pandas, Dask and Spark.

Owns the torch-free scorer (numpy and ONNX Runtime only; ``export/score.py`` is that
module), the table reader shared by every scoring path, and file scoring in constant
memory. May import every layer below it.
"""

from ._files import (
    BATCH_ROWS,
    load_model,
    onnx_bytes,
    score_dask,
    score_file,
    score_frame,
    spark_schema,
)
from ._table_scorer import NeuMissOnnxModel, ScoringError

__all__ = [
    "BATCH_ROWS",
    "NeuMissOnnxModel",
    "ScoringError",
    "load_model",
    "onnx_bytes",
    "score_dask",
    "score_file",
    "score_frame",
    "spark_schema",
]
