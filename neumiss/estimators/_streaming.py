"""Training beyond memory: a NeuMiss estimator fitted from a stream of ``(X, y)`` chunks.

:func:`fit_stream` runs the estimators' one fit
(:class:`~neumiss.estimators._fitting.FitPlan`) on :class:`StreamRows`, which
holds a chunk at a time (plus the held-out one, and the next one read) and
supplies only the rows and their statistics:

1. a first pass over the stream records the columns (from the first chunk), the
   standardization of each encoded column over its observed entries and of the
   target (:class:`RunningMoments`: per-chunk moments merged with Chan et al.'s
   formula, in float64) or the classes;
2. each epoch then streams the chunks again, shuffling the rows within each
   chunk; the held-out rows (the stream's first chunk, or ``validation_data``)
   drive early stopping. Each member trains its one network with
   :func:`neumiss.network.train` without its divergence guard, which needs the
   training rows in memory.

The result is an ordinary fitted estimator (``predict``, ``save``, ``to_onnx``).
:func:`parquet_chunks` streams a Parquet file or dataset folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from ..checks import check_features, check_training_data
from ..network import TrainingData
from ..tables import MAX_STANDARDIZED, RELATIVE_SCALE_THRESHOLD, Standardizer, TableEncoder
from ._fitting import FitPlan, FitRows, refuse_class_weight, training_data, validation_rows


class RunningMoments:
    """Count, mean and sum of squared deviations of the observed (non-NaN) entries of
    each column, over chunks of rows, in float64 and at any magnitude.

    Each chunk's moments are merged into the running ones with the pairwise
    formula of Chan, Golub and LeVeque (1979), so the result does not depend on
    how the rows are cut into chunks (up to rounding), and no sum of squares of
    raw values is formed. As :func:`neumiss.tables.mean_scale` does,
    the moments are kept in units of each column's largest absolute value so
    far (``peak``), rescaled when a chunk raises it: values near 1e±300 neither
    overflow nor underflow.
    """

    def __init__(self, n_columns: int) -> None:
        self.count = np.zeros(n_columns)
        self.peak = np.zeros(n_columns)
        self.mean = np.zeros(n_columns)  # in units of peak
        self.m2 = np.zeros(n_columns)  # in units of peak squared

    def update(self, X: np.ndarray) -> RunningMoments:
        """Merge the observed entries of ``X`` (n, n_columns), NaN = missing."""
        X = np.asarray(X, dtype=np.float64)
        observed = ~np.isnan(X)
        values = np.where(observed, X, 0.0)
        peak = np.maximum(self.peak, np.abs(values).max(axis=0, initial=0.0))
        unit = np.where(peak > 0, peak, 1.0)
        ratio = np.where(peak > 0, self.peak / unit, 0.0)  # old unit in the new one
        self.mean, self.m2, self.peak = self.mean * ratio, self.m2 * ratio**2, peak
        values = values / unit
        count = observed.sum(axis=0).astype(np.float64)
        mean = np.divide(values.sum(axis=0), count, out=np.zeros_like(count), where=count > 0)
        m2 = (np.where(observed, values - mean, 0.0) ** 2).sum(axis=0)
        total = self.count + count
        share = np.divide(count, total, out=np.zeros_like(total), where=total > 0)
        delta = mean - self.mean
        self.m2 = self.m2 + m2 + delta**2 * self.count * share
        self.mean = self.mean + delta * share
        self.count = total
        return self

    def _spread(self) -> np.ndarray:
        """The population standard deviation per column, in units of ``peak`` (0 for a
        column without observed entries)."""
        return np.sqrt(np.divide(self.m2, self.count, out=np.zeros_like(self.m2),
                                 where=self.count > 0))

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population standard deviation per column, in the columns' units;
        NaN for a column without observed entries."""
        observed = self.count > 0
        return (np.where(observed, self.mean * self.peak, np.nan),
                np.where(observed, self._spread() * self.peak, np.nan))

    def mean_scale(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and (population) standard deviation per column, as
        :func:`neumiss.tables.observed_mean_scale` gives them: a column without
        observed entries has mean 0, and a scale that is negligible against the
        column's largest absolute value (or not positive) is replaced by 1."""
        spread = self._spread()
        scale = spread * self.peak
        constant = ~(spread > RELATIVE_SCALE_THRESHOLD) | ~np.isfinite(scale) | ~(scale > 0)
        return self.mean * self.peak, np.where(constant, 1.0, scale)


def parquet_chunks(path, target: str, *, batch_rows: int = 65536,
                   columns: list[str] | None = None) -> Callable[[], Iterator]:
    """A source of ``(X, y)`` chunks read from a Parquet file or folder of files.

    Parameters
    ----------
    path : str or path
        A ``.parquet`` file, or a folder: its ``*.parquet`` files (subfolders
        included), in name order.
    target : str
        The column holding ``y``.
    batch_rows : int
        Rows per chunk (at most).
    columns : list of str, optional
        The feature columns (default: every column of the first file but ``target``).

    Returns
    -------
    callable
        Each call starts a new pass: an iterator of ``(DataFrame (n, n_features),
        ndarray (n,))`` pairs. Files are read one at a time, column chunks in 1 MB
        pieces: memory stays about a row group, whatever the data's size.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"{path}: no .parquet files in this folder")
    names = pq.ParquetFile(files[0]).schema_arrow.names
    if target not in names:
        raise ValueError(f"{path}: no target column {target!r} (columns: {names})")
    features = columns if columns is not None else [n for n in names if n != target]

    def chunks() -> Iterator:
        for file in files:
            reader = pq.ParquetFile(file, pre_buffer=False, buffer_size=1 << 20)
            for batch in reader.iter_batches(batch_size=batch_rows, columns=[*features, target]):
                frame = batch.to_pandas()
                yield frame[features], frame[target].to_numpy()

    return chunks


def _passes(chunks) -> Callable[[], Iterator]:
    """``chunks`` as a callable that starts a new pass: a callable, or a re-iterable."""
    if callable(chunks):
        return chunks
    if not isinstance(chunks, Iterable) or iter(chunks) is chunks:
        raise TypeError(
            "chunks must be read several times (once for the statistics, once per epoch): "
            "pass a list of (X, y) pairs, or a function returning a new iterator of them "
            "(e.g. neumiss.estimators.parquet_chunks), not an iterator or generator"
        )
    return lambda: iter(chunks)


def _check_one_candidate(estimator) -> None:
    """A stream trains one network per member: no search, which would need a pass per
    candidate."""
    if (not isinstance(estimator.depth, int) or estimator.weight_sharing == "auto"
            or estimator.mlp_depth == "auto"):
        raise ValueError(
            "fit_stream trains one network per member: set depth and mlp_depth to integers "
            "and weight_sharing to 'shared' or 'independent' (got depth="
            f"{estimator.depth!r}, mlp_depth={estimator.mlp_depth!r}, "
            f"weight_sharing={estimator.weight_sharing!r})"
        )


def _first_pass(estimator, passes) -> int:
    """Set the columns, ``encoder_``, ``preprocessor_`` and the target's encoding from one
    pass over the stream; returns the number of rows."""
    n_rows, moments, target, classes = 0, None, RunningMoments(1), set()
    lowest = highest = None  # (d,) the observed range of each column so far
    if estimator._y_numeric:  # "auto" would need the whole target's skewness first: False
        estimator.log_target_ = estimator.log_target is True
    for index, (X, y) in enumerate(passes()):
        if index == 0:
            X, y = check_training_data(estimator, X, y, y_numeric=estimator._y_numeric,
                                       tables=True)
            estimator.encoder_ = TableEncoder().fit(X)
            if not estimator.encoder_.is_identity:
                raise ValueError(
                    "fit_stream takes numeric columns only (the categories of a text "
                    "column are not known before the whole stream is read): encode them "
                    "as numbers first"
                )
            moments = RunningMoments(estimator.encoder_.n_features_out_)
        else:
            X = check_features(estimator, X, reset=False, tables=True)
            y = np.asarray(y)
            if y.shape != (X.shape[0],):
                raise ValueError(f"chunk {index}: y has shape {y.shape}, X has {X.shape[0]} rows")
        encoded = estimator.encoder_.transform(X)
        moments.update(encoded)
        low = np.fmin.reduce(encoded, axis=0, initial=np.inf)  # fmin skips NaN
        high = np.fmax.reduce(encoded, axis=0, initial=-np.inf)
        lowest = low if lowest is None else np.fmin(lowest, low)
        highest = high if highest is None else np.fmax(highest, high)
        if estimator._y_numeric:
            y = y.astype(np.float64)
            if not np.isfinite(y).all():
                raise ValueError(f"chunk {index}: y contains NaN or infinity")
            target.update(estimator._fitted_scale(y, f"chunk {index}: y")[:, None])
        else:
            classes.update(np.unique(y).tolist())
        n_rows += X.shape[0]
    if moments is None:
        raise ValueError("the stream of chunks is empty")
    mean, scale = moments.mean_scale()
    observed = np.isfinite(lowest)  # a column never observed keeps open bounds
    with np.errstate(invalid="ignore"):
        lower, upper = (lowest - mean) / scale, (highest - mean) / scale
    estimator.preprocessor_ = Standardizer.from_state(
        {"mean": mean, "scale": scale, "inverse_bound": np.zeros_like(mean),
         "lower": np.where(observed, lower, -MAX_STANDARDIZED),
         "upper": np.where(observed, upper, MAX_STANDARDIZED)})
    if estimator._y_numeric:
        estimator.y_mean_, estimator.y_scale_ = (float(v[0]) for v in target.mean_scale())
    else:
        estimator._encode_target(np.array(sorted(classes)))  # sets classes_, refuses one class
    return n_rows


def _chunk_rows(estimator, X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A chunk standardized: ``x``, ``mask`` (n, n_encoded) and encoded ``y`` (n,)."""
    estimator.encoder_.check_input(X)
    X = estimator.encoder_.transform(check_features(estimator, X, reset=False, tables=True))
    return (*estimator.preprocessor_.transform(X),
            estimator._encode_validation_target(np.asarray(y)))


class _ChunkRows:
    """The training rows of a stream as :func:`neumiss.network.train` reads them: each
    epoch reads the chunks again (the first one skipped when it is held out) and
    shuffles the rows within each chunk."""

    def __init__(self, estimator, passes, skip_first: bool, n_rows: int, device) -> None:
        self.estimator, self.passes, self.skip_first = estimator, passes, skip_first
        self.n_rows, self.device = n_rows, device

    def __len__(self) -> int:
        return self.n_rows

    def batches(self, batch_size: int, generator: torch.Generator) -> Iterator[TrainingData]:
        for index, (X, y) in enumerate(self.passes()):
            if not (self.skip_first and index == 0):
                rows = training_data(self.estimator, *_chunk_rows(self.estimator, X, y), None,
                                     self.device)
                yield from rows.batches(batch_size, generator)


class StreamRows:
    """The rows of :func:`fit_stream` for :class:`~neumiss.estimators._fitting.FitPlan`:
    the chunks, standardized with the statistics of a first pass, and the held-out
    rows every member validates on (``validation_data``, or the stream's first chunk).

    Parameters
    ----------
    chunks : callable returning an iterator, or a re-iterable, of ``(X, y)`` pairs
    validation_data : pair (X_val, y_val) or None
    """

    #: One process trains (:func:`~neumiss.estimators._fitting.train_one_candidate`), its
    #: members from new weights.
    parallel, start = False, None

    def __init__(self, chunks, validation_data=None) -> None:
        self.passes = _passes(chunks)
        self.validation_data = validation_data

    def prepare(self, estimator, device: torch.device) -> None:
        """Check that ``estimator`` trains one candidate, read the stream once for the
        statistics, and set the validation rows."""
        _check_one_candidate(estimator)
        n_rows = _first_pass(estimator, self.passes)
        if self.validation_data is not None:
            x, mask, self.y_val = validation_rows(estimator, self.validation_data)
            n_train = n_rows
        else:
            X_val, y_val = next(iter(self.passes()))
            if len(y_val) == n_rows:
                raise ValueError(
                    "the stream has one chunk, which is held out for early stopping: "
                    "cut it into several chunks, or give validation_data"
                )
            x, mask, self.y_val = _chunk_rows(estimator, X_val, y_val)
            n_train = n_rows - len(self.y_val)
        self.val = training_data(estimator, x, mask, self.y_val, None, device)
        self.rows = _ChunkRows(estimator, self.passes, self.validation_data is None, n_train,
                               device)

    def split(self, seed: int) -> FitRows:
        """Every member's rows: the stream trains, the held-out rows validate."""
        return FitRows(self.rows, self.val, self.y_val, None,
                       "holdout" if self.validation_data is None else "validation_data")


def fit_stream(estimator, chunks, *, validation_data=None):
    """Fit ``estimator`` (a NeuMissRegressor or NeuMissClassifier) on a stream of chunks.

    Parameters
    ----------
    estimator : NeuMissRegressor or NeuMissClassifier
        Its parameters apply, with integers ``depth`` and ``mlp_depth`` and
        ``weight_sharing`` "shared" or "independent" (one network per member: no search, which
        would need a pass per candidate). ``validation_fraction`` is not used.
    chunks : callable returning an iterator, or a re-iterable (e.g. a list)
        Of ``(X, y)`` pairs: ``X`` array or DataFrame (n_i, n_features) of
        numeric columns, NaN = missing; ``y`` (n_i,). Read once for the
        statistics, then once per epoch; the first chunk is held out for early
        stopping unless ``validation_data`` is given.
    validation_data : pair (X_val, y_val), optional

    Returns
    -------
    estimator, fitted: ``predict``, ``save`` and ``to_onnx`` work as after ``fit``.
    """
    refuse_class_weight(estimator, "a fit of a stream")
    return FitPlan(estimator, StreamRows(chunks, validation_data)).fit()
