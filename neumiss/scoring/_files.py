"""Scoring at any scale with an exported model: files in row batches, pandas, Dask, Spark.

Every path runs the ONNX graph with ONNX Runtime (no torch at scoring time) and
reuses the torch-free scorer ``export/score.py`` (:mod:`._table_scorer`) for what
the model's metadata says: columns matched by name (:func:`match_columns`),
categories and booleans encoded (:func:`encode_columns`), outputs named
(:func:`output_columns`), and for the rules of CSV tables: missing-value tokens,
header detection and the messages naming a bad line, cell or column (the input files
are read by :mod:`._readers`).

* :func:`score_file`: a CSV or Parquet file to a CSV or Parquet file, read and
  written in row batches (the ``neumiss score`` command), in memory that does not
  grow with the file.
* :func:`score_frame`: a pandas DataFrame (also the body of a Spark
  ``mapInPandas`` function).
* :func:`score_dask`: a Dask DataFrame, partition by partition.

``model`` is an ONNX file written by ``neumiss export`` / ``to_onnx()``, its bytes,
or a model file written by ``save()`` (exported in memory first: that needs torch).
"""

from __future__ import annotations

import csv
import functools
import io
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort
import pyarrow as pa

from ._readers import read_source
from ._table_scorer import (
    CHUNK_ROWS,
    NeuMissOnnxModel,
    RowError,
    ScoringError,
    check_not_input,
    encode_columns,
    match_columns,
    output_columns,
    unseen_note,
    unused_note,
)

if TYPE_CHECKING:
    import pandas as pd

#: File formats by name ending.
FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: Rows per batch read, scored and written (Parquet): Parquet decodes large batches
#: faster; ONNX Runtime scores them in chunks of ``CHUNK_ROWS`` rows.
BATCH_ROWS = 65536
_SAVED_MODEL_MAGIC = b"PK\x03\x04"  # save() writes a torch.save zip archive



def onnx_bytes(model) -> bytes:
    """The ONNX graph of ``model``: an ``.onnx`` path, its bytes, or a ``save()`` file."""
    if isinstance(model, bytes):
        return model
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise ScoringError(f"{path}: no such model file")
    with open(path, "rb") as handle:
        content = handle.read()
    if not content.startswith(_SAVED_MODEL_MAGIC):
        return content
    from ..estimators import load  # torch: only for model files written by save()

    return load(path).to_onnx().SerializeToString()  # intervals (y, lower, upper) or sets


def load_model(model, threads: int | None = None) -> NeuMissOnnxModel:
    """A :class:`NeuMissOnnxModel` for ``model`` (see :func:`onnx_bytes`).

    ``threads``: ONNX Runtime's threads within an operator (None: all cores).
    """
    options = ort.SessionOptions()
    # Idle threads sleep instead of spinning: on a machine shared with other work (or
    # with the reader thread), spinning threads take the processors the work needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    name = model if isinstance(model, bytes) else os.fspath(model)
    loaded = NeuMissOnnxModel(onnx_bytes(model), options)
    if not isinstance(name, bytes):
        loaded.path = name
    return loaded


#: Per float type: the integer type of its bits, and a quiet NaN's bits.
_NAN_BITS = {pa.float32(): (np.int32, np.float32(np.nan).view(np.int32)),
             pa.float64(): (np.int64, np.float64(np.nan).view(np.int64))}


def _numbers(array: pa.Array) -> np.ndarray:
    """A numeric column as a float array, NaN where null: read from the Arrow buffers
    (several times faster than ``pyarrow.compute.fill_null`` on small batches)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not pa.types.is_floating(array.type):
        array = array.cast(pa.float64())
    if array.null_count == 0:
        return array.to_numpy(zero_copy_only=False)
    if array.type not in _NAN_BITS:  # float16
        array = array.cast(pa.float64())
    validity, data = array.buffers()
    end = array.offset + len(array)
    values = np.frombuffer(data, dtype=array.type.to_pandas_dtype(), count=end)[array.offset:]
    null = np.unpackbits(np.frombuffer(validity, np.uint8), count=end,
                         bitorder="little")[array.offset:] == 0
    # NaN at the nulls as a bitwise OR of the values' bits with a NaN's (whose exponent and
    # first mantissa bit are all ones): a few times faster than np.where.
    integer, nan = _NAN_BITS[array.type]
    bits = np.multiply(null, nan, dtype=integer)
    return np.bitwise_or(values.view(integer), bits, out=bits).view(values.dtype)


def _cells(array: pa.Array) -> np.ndarray:
    """The cells of a boolean or categorical column as objects: text as it is, None
    for null, other values as ``str`` of the Python value (as the estimator compares)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return array.to_numpy(zero_copy_only=False)
    return np.array([None if v is None else str(v) for v in array.to_pylist()], dtype=object)


@dataclass
class Scored:
    """Counts of a scoring run: ``rows``, ``seconds``; ``unseen`` categories per column."""

    rows: int = 0
    seconds: float = 0.0
    unseen: dict[str, set] = field(default_factory=dict)


def score_batch(model: NeuMissOnnxModel, columns: list, first_row: int = 0,
                unseen: dict | None = None,
                place: Callable[[int], str] = lambda row: f"row {row + 1}") -> dict:
    """Predictions for one batch: :func:`output_columns` of the model's outputs.

    ``columns``: the model's input columns, in its order, as Arrow or numpy
    arrays (numbers for numeric columns; anything for the others).
    ``first_row``: the batch's first row (0-based) over the input; ``place(row)`` names
    such a row in error messages (default ``row <row + 1>``).
    """
    encoded = []
    for values, column in zip(columns, model.encoding, strict=True):
        if column["kind"] == "numeric":
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                values = _numbers(values)
        elif isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = _cells(values)
        encoded.append(values)
    # Encoded and scored CHUNK_ROWS rows at a time: each chunk's X stays in the processor's
    # cache from its writing, column by column, to ONNX Runtime's reading.
    parts = []
    for start in range(0, max(len(encoded[0]) if encoded else 0, 1), CHUNK_ROWS):
        first = first_row + start
        where = lambda row, first=first: place(first + row)  # noqa: E731
        X = encode_columns([values[start : start + CHUNK_ROWS] for values in encoded], model,
                           unseen=unseen, dtype=np.float32, where=where)
        try:
            parts.append(model.predict(X, overwrite=True, where=where))
        except RowError:
            raise
        except ScoringError as error:  # build_inputs numbers rows and columns from 0
            raise ScoringError(f"rows {first + 1}-{first + len(X)}: {error}") from None
    return output_columns(model, parts[0] if len(parts) == 1 else
                          {name: np.concatenate([p[name] for p in parts]) for name in parts[0]})


def score_frame(frame: pd.DataFrame, model, *, keep=()) -> pd.DataFrame:
    """Predictions for a pandas DataFrame, with its index.

    Parameters
    ----------
    frame : DataFrame of shape (n, n_columns)
        The model's columns matched by name (any order; others ignored); NaN,
        None and pd.NA are missing values.
    model : NeuMissOnnxModel, or what :func:`load_model` takes
    keep : sequence of str
        Columns of ``frame`` copied into the result, first (e.g. an id).

    Returns
    -------
    DataFrame of shape (n, len(keep) + n_outputs)
        ``keep``, then ``prediction``, or ``label`` and ``proba_<class>`` columns.
    """
    import pandas as pd  # here: scoring files does not need it (half a second to import)

    if not isinstance(model, NeuMissOnnxModel):
        model = load_model(model)
    positions = match_columns(list(frame.columns), model, where="the DataFrame", kept=keep)
    columns = []
    for position, column in zip(positions, model.encoding, strict=True):
        series = frame.iloc[:, position]
        if column["kind"] == "numeric":
            if not (pd.api.types.is_numeric_dtype(series.dtype)
                    or series.isna().all()) or pd.api.types.is_bool_dtype(series.dtype):
                raise ScoringError(
                    f"the DataFrame: column {column['name']!r} is not numeric ({series.dtype}), "
                    "and the model takes it as numbers"
                )
            columns.append(series.to_numpy(dtype=np.float64, na_value=np.nan))
        else:
            columns.append(series.astype(object).where(series.notna(), None)
                           .map(lambda v: v if v is None else str(v)).to_numpy())
    # Rows named by position and index label: a Dask partition's positions start at 1.
    outputs = pd.DataFrame(score_batch(
        model, columns, place=lambda row: f"row {row + 1} (index {frame.index[row]})"),
        index=frame.index)
    return pd.concat([frame[list(keep)], outputs], axis=1) if keep else outputs


def _output_meta(model: NeuMissOnnxModel) -> pd.DataFrame:
    """An empty frame with :func:`score_frame`'s columns and dtypes."""
    import pandas as pd

    if model.task == "regression":  # an interval model: also lower and upper
        outputs = {o.name for o in model.session.get_outputs()}
        names = ["prediction", *(k for k in ("lower", "upper") if k in outputs)]
        return pd.DataFrame({name: np.empty(0, dtype=np.float64) for name in names})
    labels = np.asarray(model.classes)
    label_dtype = object if labels.dtype.kind in "US" else labels.dtype
    columns = {"label": np.empty(0, dtype=label_dtype),
               **{f"proba_{c}": np.empty(0, np.float32) for c in model.classes}}
    if "set" in {o.name for o in model.session.get_outputs()}:  # a ConformalClassifier
        columns |= {f"set_{c}": np.empty(0, dtype=bool) for c in model.classes}
        columns["set_size"] = np.empty(0, dtype=np.int64)
    return pd.DataFrame(columns)


_SPARK_TYPES = {"f": "double", "i": "bigint", "b": "boolean", "O": "string"}


def spark_schema(model, *, keep: str = "") -> str:
    """The Spark DDL schema of :func:`score_frame`'s result, for ``mapInPandas``.

    ``keep``: the DDL of the kept columns, first (e.g. ``"id bigint"``).
    """
    if not isinstance(model, NeuMissOnnxModel):
        model = load_model(model)
    meta = _output_meta(model)
    fields = [f"`{name}` {'float' if meta[name].dtype == np.float32 else _SPARK_TYPES[kind]}"
              for name, kind in zip(meta.columns, (meta[c].dtype.kind for c in meta), strict=True)]
    return ", ".join([keep, *fields] if keep else fields)


@functools.lru_cache(maxsize=4)
def _worker_model(content: bytes) -> NeuMissOnnxModel:
    """One model per worker process and ONNX graph (one thread: partitions run in parallel)."""
    return load_model(content, threads=1)


def _score_partition(frame: pd.DataFrame, content: bytes) -> pd.DataFrame:
    return score_frame(frame, _worker_model(content))


def score_dask(ddf, model):
    """Predictions for a Dask DataFrame, one partition at a time on the workers.

    The ONNX graph (a few kB to MB) travels with the tasks, so workers need no
    access to the model file; each worker process builds its ONNX Runtime
    session once. Partitions keep their index, so the result aligns with
    ``ddf`` (``ddf.join(score_dask(ddf, path))``).

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The model's columns, matched by name (:func:`score_frame`).
    model : ``.onnx`` path, ONNX bytes, or a ``save()`` file

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy: ``prediction``, or ``label`` and ``proba_<class>`` columns.
    """
    content = onnx_bytes(model)
    meta = _output_meta(_worker_model(content))
    return ddf.map_partitions(_score_partition, content, meta=meta)


# ------------------------------------------------------------------ files
def _arrow_column(values: np.ndarray) -> pa.Array:
    """An output column (n,) as Arrow: numbers wrapped as they are (``pa.array`` would first
    import pandas, 0.3-0.4 s of a scoring run, to check for pandas objects), others
    (class labels of text) by ``pa.array``."""
    if values.dtype.kind not in "iuf":
        return pa.array(values)
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def file_format(path: str) -> str:
    """``csv`` or ``parquet`` from the name's ending (``-``, an output: CSV to standard output)."""
    if path == "-":
        return "csv"
    for ending, kind in FORMATS.items():
        if str(path).lower().endswith(ending):
            return kind
    raise ScoringError(
        f"{path}: cannot tell the format from the name; end it with .csv or .parquet"
    )


def _in_order(work: Callable, items: Iterator, workers: int) -> Iterator:
    """``work(item)`` for each of ``items``, in order, computed by ``workers`` threads.

    The caller's thread takes the items (reads the file) and uses the results (writes)
    while the threads work (pyarrow, numpy and ONNX Runtime release the GIL); at most
    ``workers + 2`` items are taken ahead, so memory stays a few batches per thread.
    """
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        try:
            for item in items:
                pending.append(pool.submit(work, item))
                if len(pending) >= workers + 2:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # an error or an interruption: no more batches started
            for future in pending:
                future.cancel()


class _Sink:
    """Writes record batches to a CSV or Parquet file (or CSV to standard output)."""

    def __init__(self, path: str, kind: str) -> None:
        self.path, self.kind, self.writer, self.handle = path, kind, None, None

    def write(self, batch: pa.RecordBatch) -> None:
        if self.writer is None:
            target = sys.stdout.buffer if self.path == "-" else self.path
            if self.kind == "parquet":
                import pyarrow.parquet as pq  # pyarrow's formats: only those a run uses

                # No dictionary for float columns (predictions, probabilities): their values
                # rarely repeat, and trying one costs several times the rest of the writing.
                coded = [f.name for f in batch.schema if not pa.types.is_floating(f.type)]
                self.writer = pq.ParquetWriter(target, batch.schema, use_dictionary=coded)
            else:
                import pyarrow.csv as pcsv

                # The header as export/score.py writes it, names quoted only where needed
                # (pyarrow's writer quotes every name).
                header = io.StringIO()
                csv.writer(header, lineterminator="\n").writerow(batch.schema.names)
                if target is not sys.stdout.buffer:
                    target = self.handle = open(target, "wb")  # closed by close()
                target.write(header.getvalue().encode())
                options = pcsv.WriteOptions(include_header=False, quoting_style="needed")
                self.writer = pcsv.CSVWriter(target, batch.schema, write_options=options)
        self.writer.write_batch(batch)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.handle is not None:
            self.handle.close()


class _NoBar:
    """What :func:`score_file` updates when no progress bar is shown."""

    def update(self, rows: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int | None, shown: bool):
    """tqdm's bar of ``total`` rows on standard error, or a :class:`_NoBar`: tqdm is
    imported only for a bar (a tenth of a second of every start of ``neumiss score``)."""
    if not shown:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=" rows", unit_scale=True, file=sys.stderr,
                desc="neumiss score")


def score_file(model, input_path: str, output_path: str, *, keep: list[str] = (),
               header: str = "auto", batch_rows: int = BATCH_ROWS, threads: int | None = None,
               progress: bool = False, note: Callable[[str], None] | None = None) -> Scored:
    """Score a CSV or Parquet file into a CSV or Parquet file, batch by batch.

    Memory stays that of a few batches whatever the file's length. The output
    is written to ``OUTPUT.partial`` and renamed at the end, so a failed run
    leaves no truncated output.

    Parameters
    ----------
    model : NeuMissOnnxModel, or what :func:`load_model` takes
    input_path, output_path : str
        ``.csv`` or ``.parquet`` (``.pq``); ``output_path`` ``-`` writes CSV to
        standard output.
    keep : list of str
        Input columns copied into the output, before the predictions (e.g. an id).
    header : {"auto", "yes", "no"}
        CSV input only, as in ``export/score.py``.
    batch_rows : int
        Rows per batch (Parquet input; CSV batches hold about 8 MB of text).
    threads : int, optional
        Batches scored at once, each by one ONNX Runtime thread (default: all cores;
        a ``model`` loaded by the caller keeps its own session's threads).
    progress : bool
        A progress bar on standard error.
    note : callable, optional
        Called with each note after success: columns ignored, categories not seen at fit.

    Returns
    -------
    Scored
    """
    started = time.perf_counter()
    if not isinstance(model, NeuMissOnnxModel):
        model = load_model(model, threads=1)
    workers = threads or os.cpu_count() or 1
    if input_path == "-":
        raise ScoringError("the input must be a file (standard input is not read)")
    kind_in, kind_out = file_format(input_path), file_format(output_path)
    check_not_input(input_path, output_path)
    source = read_source(input_path, kind_in, model, list(keep), header, batch_rows)
    partial = output_path if output_path == "-" else f"{output_path}.partial"
    sink, result = _Sink(partial, kind_out), Scored(unseen={})
    bar = _progress_bar(source.total_rows, progress)

    def numbered(batches):  # each batch with the number of rows before it
        first = 0
        for batch in batches:
            yield batch, first
            first += batch.num_rows

    def scored(item) -> pa.RecordBatch:
        batch, first = item
        columns = [batch.column(name) for name in source.model_columns]
        outputs = score_batch(model, columns, first, result.unseen, source.place)
        kept = {(k if k not in outputs else f"input_{k}"): batch.column(name)
                for k, name in source.kept.items()}
        columns = {**kept, **{k: _arrow_column(v) for k, v in outputs.items()}}
        return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))

    try:
        for batch in _in_order(scored, numbered(source.batches), workers):
            sink.write(batch)
            result.rows += batch.num_rows
            bar.update(batch.num_rows)
        if result.rows == 0:
            raise ScoringError(f"{input_path}: no data rows")
        sink.close()
        if partial != output_path:
            os.replace(partial, output_path)
    except BaseException:
        sink.close()
        if partial != output_path and os.path.exists(partial):
            os.remove(partial)
        raise
    finally:
        bar.close()
    # Notes come after success, so that a failure stays one line.
    notes = [unused_note(source.ignored)] if source.ignored else []
    notes += [unseen_note(name, values) for name, values in result.unseen.items()]
    for message in notes if note is not None else ():
        note(message)
    result.seconds = time.perf_counter() - started
    return result
