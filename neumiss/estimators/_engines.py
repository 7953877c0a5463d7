"""The statistics of a data-parallel fit, computed where the rows live: Dask, Spark, or a
folder of Parquet files read in chunks.

A data-parallel fit (:mod:`~neumiss.estimators._parallel_fit`) brings no more than a
sample of the rows to the driver. Its table (:class:`DaskTable`, :class:`SparkTable`,
:class:`ParquetTable`) gives:

1. :meth:`~DaskTable.count`: the number of rows (per partition for Dask, whose empty
   partitions, and partitions of ``X`` and ``y`` of different lengths, are refused);
2. :meth:`~DaskTable.sample`: at most :data:`SAMPLE_ROWS` rows, drawn by the engine, on
   which an ordinary ``fit`` chooses the encoding (categories, target statistics,
   indicators, heavy tails, log target) and the network (depth, head, learning rate);
3. :meth:`~DaskTable.statistics`: one pass of the engine's own reductions (Dask's
   ``count``, ``mean``, ``std``, ``min``, ``max``; Spark's aggregate functions; for files,
   moments merged chunk by chunk, :class:`~._streaming.RunningMoments`) over
   every row encoded by the sample's encoder (:class:`PartitionEncoder`, which refuses a
   partition without a column, and a category the sample did not see): each encoded
   column's count, mean, deviation and range, and the target's, or its classes.

:func:`fitted_preprocessing` merges them into the ``preprocessor_`` (a
:class:`~neumiss.tables.Standardizer`) and the target's encoding that ``fit`` and
``fit_stream`` produce. The values are shifted by the sample's means before the sums:
the engine's one-pass deviations then do not cancel on columns far from 0.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..checks import check_features
from ..tables import MAX_STANDARDIZED, RELATIVE_SCALE_THRESHOLD, Standardizer

#: Most rows of the sample the encoding and the network are chosen on (brought to the
#: driver): the search's cost and the driver's memory do not grow with the table.
SAMPLE_ROWS = 50_000


class ColumnStatistics(NamedTuple):
    """Count, mean, population deviation, least and largest observed value of each column
    (each ndarray (n_columns,), float64; NaN where a column has no observed entry)."""

    count: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    lowest: np.ndarray
    highest: np.ndarray

    def mean_scale(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and scale as :func:`neumiss.tables.observed_mean_scale` gives them: a
        column without observed entries has mean 0, one whose deviation is negligible
        against its largest absolute value (constant) scale 1."""
        observed = self.count > 0
        peak = np.fmax(np.abs(self.lowest), np.abs(self.highest))
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = self.std / peak
        constant = ~(spread > RELATIVE_SCALE_THRESHOLD) | ~np.isfinite(self.std)
        return np.where(observed, self.mean, 0.0), np.where(constant | ~observed, 1.0, self.std)


class TableStatistics(NamedTuple):
    """What :meth:`DaskTable.statistics` gives: the encoded columns' statistics, the
    target's (regression: one column) or its class labels (classification)."""

    columns: ColumnStatistics
    target: ColumnStatistics | None
    classes: np.ndarray | None


def fitted_preprocessing(estimator, sample, statistics: TableStatistics) -> None:
    """Set ``estimator``'s ``preprocessor_`` and target encoding from ``statistics`` of
    every row, its encoder and choices being those of ``sample`` (the estimator fitted on
    the sample): the columns the sample compresses (heavy tails) keep the sample's robust
    centre and scale; every column's range is that of all rows. A class the sample did not
    see is refused."""
    columns, tails = statistics.columns, sample.preprocessor_
    mean, scale = columns.mean_scale()
    heavy = tails.inverse_bound_ > 0
    standardizer = Standardizer.from_state({
        "mean": np.where(heavy, tails.mean_, mean), "scale": np.where(heavy, tails.scale_, scale),
        "inverse_bound": tails.inverse_bound_,
        "lower": np.full(mean.shape, -MAX_STANDARDIZED),
        "upper": np.full(mean.shape, MAX_STANDARDIZED)})
    observed = columns.count > 0
    lower, upper = standardizer._scaled(np.stack([columns.lowest, columns.highest]))
    standardizer.lower_ = np.where(observed, lower, -MAX_STANDARDIZED)
    standardizer.upper_ = np.where(observed, upper, MAX_STANDARDIZED)
    estimator.preprocessor_ = standardizer
    if statistics.target is not None:
        (y_mean,), (y_scale,) = statistics.target.mean_scale()
        estimator.y_mean_, estimator.y_scale_ = float(y_mean), float(y_scale)
        return
    unseen = np.setdiff1d(statistics.classes, sample.classes_)
    if unseen.size:
        raise ValueError(
            f"y has classes the sample of {SAMPLE_ROWS} rows did not hold: "
            f"{unseen.tolist()[:5]!r}; a class this rare cannot be learned: drop its rows")


class PartitionEncoder:
    """Encode the rows of one partition with an estimator fitted on the sample: the
    encoded columns (minus ``shift``, the sample's means) as a DataFrame of float64
    columns ``c0 ... c{d-1}``, then the target (regression: on the fitted scale, minus
    the sample's mean) in a column ``y`` when given.

    Raises ValueError naming ``where`` (the partition) for a missing column, a
    category the sample did not see, and a target that is not finite (or not positive
    with ``log_target_``).
    """

    def __init__(self, sample) -> None:
        self.sample = sample
        self.shift = sample.preprocessor_.mean_
        self.names = [f"c{j}" for j in range(len(self.shift))]
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        """Dask's name for the encoder (a fitted estimator has no deterministic one)."""
        return self.token

    def __call__(self, X: pd.DataFrame, y=None, where: str = "a partition") -> pd.DataFrame:
        sample = self.sample
        missing = [name for name in sample.feature_names_in_ if name not in X.columns]
        if missing:
            raise ValueError(f"{where} of X has no column {missing[0]!r} (missing columns: "
                             f"{missing}); every partition needs the columns "
                             f"{list(sample.feature_names_in_)}")
        X = check_features(sample, X[list(sample.feature_names_in_)], reset=False, tables=True)
        unseen = sample.encoder_.unseen_categories(X)
        if unseen:
            name, values = next(iter(unseen.items()))
            raise ValueError(
                f"{where}: column {name!r} holds categories the sample of at most "
                f"{SAMPLE_ROWS} rows did not: {values!r}; the encoding is chosen on the "
                "sample: group rare categories (or make them missing) before fitting")
        frame = pd.DataFrame(sample.encoder_.transform(X) - self.shift, columns=self.names,
                             index=X.index)
        if y is not None and hasattr(sample, "y_mean_"):
            frame["y"] = self.target(np.asarray(y), where) - sample.y_mean_
        return frame

    def target(self, y: np.ndarray, where: str) -> np.ndarray:
        """A regression target on the fitted scale (float64), checked."""
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: y must be numeric") from exc
        if not np.isfinite(y).all():
            raise ValueError(f"{where}: y contains NaN or infinity")
        return self.sample._fitted_scale(y, f"{where}: y")


def _statistics(count, mean, std, lowest, highest, shift) -> ColumnStatistics:
    """:class:`ColumnStatistics` of shifted values, shifted back."""
    values = [np.asarray(v, dtype=np.float64) for v in (count, mean, std, lowest, highest)]
    count, mean, std, lowest, highest = values
    return ColumnStatistics(count, mean + shift, std, lowest + shift, highest + shift)


#: The column that holds ``y`` beside ``X`` in each partition of :attr:`DaskTable.rows`.
TARGET_COLUMN = "__neumiss_target__"


def _with_target(X: pd.DataFrame, y: pd.Series, partition_info=None) -> pd.DataFrame:
    """A partition of ``X`` with its ``y`` as :data:`TARGET_COLUMN`; refuses partitions
    of different lengths, naming the partition."""
    if len(X) != len(y):
        number = "?" if partition_info is None else partition_info["number"]
        raise ValueError(f"partition {number}: X has {len(X)} rows and y {len(y)}: X and "
                         "y must be cut into the same partitions")
    return X.assign(**{TARGET_COLUMN: np.asarray(y)})


def _partition_frame(rows: pd.DataFrame, encoder: PartitionEncoder,
                     partition_info=None) -> pd.DataFrame:
    """:class:`PartitionEncoder` over a partition of :attr:`DaskTable.rows`, named by
    number."""
    number = "?" if partition_info is None else partition_info["number"]
    return encoder(rows.drop(columns=[TARGET_COLUMN]), rows[TARGET_COLUMN],
                   where=f"partition {number}")


class DaskTable:
    """The rows of a Dask DataFrame ``X`` and a Dask Series ``y`` of the same partitions,
    as one Dask DataFrame :attr:`rows` (``y`` in its column :data:`TARGET_COLUMN`), so
    that every computation cuts ``X`` and ``y`` alike.

    Raises
    ------
    ValueError
        When ``y`` is not a Dask Series of as many partitions as ``X``.
    """

    def __init__(self, X, y) -> None:
        import dask.dataframe as dd

        if not isinstance(X, dd.DataFrame):
            raise ValueError(f"X must be a Dask DataFrame with a Dask y, got {type(X).__name__}")
        if not isinstance(y, dd.Series) or y.npartitions != X.npartitions:
            raise ValueError(
                "with a Dask DataFrame X, y must be a Dask Series of the same partitions "
                f"({X.npartitions}), got {type(y).__name__}"
                + (f" of {y.npartitions} partitions" if isinstance(y, dd.Series) else ""))
        meta = X._meta.assign(**{TARGET_COLUMN: y._meta.to_numpy()})
        self.rows = X.map_partitions(_with_target, y, meta=meta, align_dataframes=False,
                                     enforce_metadata=False)  # columns: PartitionEncoder

    def count(self) -> int:
        """The number of rows; refuses an empty partition, and partitions of ``X`` and
        ``y`` of different lengths."""
        lengths = np.asarray(self.rows.map_partitions(len).compute())
        for number, n_rows in enumerate(lengths):
            if n_rows == 0:
                raise ValueError(f"partition {number} of X is empty: remove empty "
                                 "partitions first (e.g. X.repartition(npartitions=...))")
        return int(lengths.sum())

    def sample(self, n_rows: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        """At most about :data:`SAMPLE_ROWS` rows drawn uniformly."""
        fraction = min(1.0, SAMPLE_ROWS / n_rows)
        rows = self.rows.sample(frac=fraction, random_state=seed).compute()
        return rows.drop(columns=[TARGET_COLUMN]), rows[TARGET_COLUMN].to_numpy()

    def statistics(self, encoder: PartitionEncoder) -> TableStatistics:
        """:class:`TableStatistics` of every row, from one ``dask.compute``."""
        import dask

        regression = hasattr(encoder.sample, "y_mean_")
        meta = pd.DataFrame({name: pd.Series(dtype=np.float64)
                             for name in encoder.names + (["y"] if regression else [])})
        encoded = self.rows.map_partitions(_partition_frame, encoder, meta=meta)
        reductions = [encoded.count(), encoded.mean(), encoded.std(ddof=0), encoded.min(),
                      encoded.max()]
        if not regression:
            reductions.append(self.rows[TARGET_COLUMN].drop_duplicates())
        results = dask.compute(*reductions)
        values = [np.asarray(v, dtype=np.float64) for v in results[:5]]
        return _table_statistics(values, encoder, regression, results[5:])


def _table_statistics(values, encoder: PartitionEncoder, regression: bool,
                      classes) -> TableStatistics:
    """:class:`TableStatistics` from the five reductions of the encoded columns (and the
    target's last, for a regression) and ``(distinct labels,)`` of a classification."""
    d = len(encoder.names)
    columns = _statistics(*(v[:d] for v in values), encoder.shift)
    if regression:
        target = _statistics(*(v[d:] for v in values), np.array([encoder.sample.y_mean_]))
        return TableStatistics(columns, target, None)
    return TableStatistics(columns, None, np.unique(np.asarray(classes[0])))


class _SparkBatches:
    """The ``mapInPandas`` body of :meth:`SparkTable.statistics`: each Arrow batch of a
    Spark partition encoded by :class:`PartitionEncoder` (missing values as nulls)."""

    def __init__(self, encoder: PartitionEncoder, label: str) -> None:
        self.encoder, self.label = encoder, label

    def __call__(self, batches):
        from pyspark import TaskContext

        where = f"Spark partition {TaskContext.get().partitionId()}"
        for frame in batches:
            yield self.encoder(frame.drop(columns=[self.label]), frame[self.label], where)


class SparkTable:
    """The rows of a Spark DataFrame ``df``: the columns ``features`` and ``label``."""

    def __init__(self, df, label: str) -> None:
        if label not in df.columns:
            raise ValueError(f"df has no label column {label!r} (columns: {df.columns})")
        self.label = label
        self.features = [name for name in df.columns if name != label]
        self.df = df

    def count(self) -> int:
        n_rows = int(self.df.count())
        if n_rows == 0:
            raise ValueError("df has no rows")
        return n_rows

    def sample(self, n_rows: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        """At most about :data:`SAMPLE_ROWS` rows drawn by Spark."""
        fraction = min(1.0, SAMPLE_ROWS / n_rows)
        rows = self.df.sample(fraction=fraction, seed=seed).toPandas()
        return rows[self.features], rows[self.label].to_numpy()

    def statistics(self, encoder: PartitionEncoder) -> TableStatistics:
        """:class:`TableStatistics` of every row, from one Spark aggregation (and, for a
        classification, the distinct labels)."""
        from pyspark.sql import functions as F

        regression = hasattr(encoder.sample, "y_mean_")
        names = encoder.names + (["y"] if regression else [])
        schema = ", ".join(f"{name} double" for name in names)
        encoded = self.df.mapInPandas(_SparkBatches(encoder, self.label), schema)
        reductions = (F.count, F.avg, F.stddev_pop, F.min, F.max)
        row = _spark_result(encoded.agg(*[f(name) for f in reductions for name in names]))
        values = np.array([np.nan if v is None else v for v in row], dtype=np.float64)
        values = values.reshape(len(reductions), len(names))
        classes = None if regression else (
            self.df.select(self.label).distinct().toPandas()[self.label].to_numpy(),)
        return _table_statistics(list(values), encoder, regression, classes)


def _spark_result(frame):
    """The first row of the Spark DataFrame ``frame``; the ValueError of
    :class:`PartitionEncoder` raised in a Python worker (a bad partition) raised again
    here as itself, not as Spark's report of the worker's traceback."""
    from pyspark.errors import PythonException

    try:
        return frame.first()
    except PythonException as exc:
        lines = [line for line in str(exc).splitlines() if line.startswith("ValueError: ")]
        if not lines:
            raise
        raise ValueError(lines[-1].removeprefix("ValueError: ")) from exc


class ParquetTable:
    """The rows of a folder of Parquet files (column ``target`` is ``y``), read on this
    machine one chunk of at most ``batch_rows`` rows at a time
    (:func:`~neumiss.estimators.parquet_chunks`), file by file in name order: the driver
    holds the sample and one chunk, whatever the files' sizes (a Dask partition is a whole
    file)."""

    def __init__(self, path, target: str, batch_rows: int = 65536) -> None:
        self.files = sorted(Path(path).rglob("*.parquet"))
        self.target, self.batch_rows = target, batch_rows

    def _chunks(self):
        """``(file name, X chunk, y chunk)`` over every file."""
        from ._streaming import parquet_chunks

        for file in self.files:
            for X, y in parquet_chunks(file, self.target, batch_rows=self.batch_rows)():
                yield file.name, X, y

    def count(self) -> int:
        """The number of rows, from the files' metadata (no row is read)."""
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(file).metadata.num_rows for file in self.files)

    def sample(self, n_rows: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        """At most about :data:`SAMPLE_ROWS` rows, each row kept with the same probability
        (a draw per chunk from one generator seeded by ``seed``)."""
        fraction, rng = min(1.0, SAMPLE_ROWS / n_rows), np.random.default_rng(seed)
        frames, targets = [], []
        for _, X, y in self._chunks():
            keep = rng.random(len(y)) < fraction
            frames.append(X[keep])
            targets.append(y[keep])
        return pd.concat(frames, ignore_index=True), np.concatenate(targets)

    def statistics(self, encoder: PartitionEncoder) -> TableStatistics:
        """:class:`TableStatistics` of every row, from one pass over the chunks, each
        encoded by ``encoder`` (its errors name the file)."""
        from ._streaming import RunningMoments

        regression = hasattr(encoder.sample, "y_mean_")
        width = len(encoder.names) + regression
        moments = RunningMoments(width)
        lowest, highest = np.full(width, np.nan), np.full(width, np.nan)
        classes = []
        for name, X, y in self._chunks():
            encoded = encoder(X, y, where=f"file {name}").to_numpy(dtype=np.float64)
            moments.update(encoded)
            lowest = np.fmin(lowest, np.nanmin(encoded, axis=0, initial=np.inf))
            highest = np.fmax(highest, np.nanmax(encoded, axis=0, initial=-np.inf))
            if not regression:
                classes.append(np.unique(y))
        observed = moments.count > 0
        values = [moments.count, *moments.mean_std(), np.where(observed, lowest, np.nan),
                  np.where(observed, highest, np.nan)]
        return _table_statistics(values, encoder, regression,
                                 None if regression else (np.concatenate(classes),))
