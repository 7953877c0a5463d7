"""Input files of ``neumiss score`` read in row batches: Parquet, and CSV with the table
rules of ``export/score.py`` (:mod:`._table_scorer`).

A CSV file is read by pyarrow's number reader, fast; from a cell it refuses (a missing
token with spaces around it, text in a numeric column), the file is read on as text and
the numbers parsed by the scorer's rules, so that both scorers read the same cells and
name the same line of a bad one. pyarrow's ``csv``, ``parquet`` and ``compute`` modules
are imported by the readers that use them: a run loads those of its format only (each
takes a few hundredths of a second to import, at every start of ``neumiss score``).
"""

from __future__ import annotations

import csv
import functools
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ._table_scorer import (
    MISSING_TOKENS,
    NeuMissOnnxModel,
    ScoringError,
    _parse_cell,
    cell_error,
    locate_columns,
    match_columns,
    not_text_error,
    open_text,
    unused_columns,
    width_error,
)

#: Bytes of CSV text per batch (about 16k rows of 50 numbers).
CSV_BLOCK_BYTES = 1 << 23


def missing_spellings() -> list[str]:
    """Every spelling of :data:`MISSING_TOKENS` in upper and lower case, sorted: for readers
    that compare cells with null markers as they are (pyarrow's ``null_values``)."""
    return sorted({"".join(letters) for token in MISSING_TOKENS
                   for letters in itertools.product(*zip(token, token.upper()))})


#: Cells of numeric CSV columns read as missing (pyarrow compares them as they are).
NULL_TOKENS = missing_spellings()


@functools.cache
def _missing_tokens() -> pa.Array:
    """The missing tokens, compared with stripped and lower-cased cells of a text read
    (built on first use: ``pa.array`` of a list loads pandas, half a second)."""
    return pa.array(sorted(MISSING_TOKENS))


def _numeric_type(kind) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_decimal(kind) or pa.types.is_null(kind))


def check_column_types(schema: pa.Schema, names: list[str], model: NeuMissOnnxModel,
                       source: str) -> None:
    """Refuse input columns that are not numbers where the model takes numbers.

    ``names``: the input columns in the model's order. Categorical and boolean
    columns of the model take any type (cells are compared as text).

    Raises
    ------
    ScoringError
        Naming every such column and its type.
    """
    bad = [
        f"{name} ({schema.field(name).type})"
        for name, column in zip(names, model.encoding, strict=True)
        if column["kind"] == "numeric" and not _numeric_type(schema.field(name).type)
    ]
    if bad:
        raise ScoringError(
            f"{source}: columns {bad} are not numeric, and the model takes them as numbers "
            "(its encoding has categories only for the columns it saw as text at fit)"
        )



@dataclass
class _Source:
    """An input file's batches, the names in them of the model's columns (in its order)
    and of the kept ones (output name -> batch name), its rows if known, the unused columns,
    and how an error names a row (0-based over the file) as a spreadsheet shows it."""

    batches: Iterator[pa.RecordBatch]
    model_columns: list[str]
    kept: dict[str, str]
    total_rows: int | None
    ignored: list[str]
    place: Callable[[int], str]


def _parquet_source(path: str, model: NeuMissOnnxModel, keep: list[str],
                    batch_rows: int) -> _Source:
    import pyarrow.parquet as pq

    try:
        # Column chunks read in 1 MB pieces, not prefetched whole: memory stays about
        # one row group of the selected columns (1M rows x 50 floats: 0.2 GB) plus a batch.
        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (OSError, pa.ArrowException) as error:
        raise ScoringError(f"{path} is not a readable Parquet file ({error})") from None
    names = parquet.schema_arrow.names
    positions = match_columns(names, model, where=path, kept=keep)
    selected = [names[p] for p in positions]
    check_column_types(parquet.schema_arrow, selected, model, path)
    absent = [k for k in keep if k not in names]
    if absent:
        raise ScoringError(f"{path}: --keep columns {absent} are not in the file")
    wanted = list(dict.fromkeys(selected + keep))
    # Decoded in the reading thread alone: batches are scored in parallel (score_file), and
    # Arrow's own threads would only compete with them (more processor time, no speed).
    return _Source(parquet.iter_batches(batch_size=batch_rows, columns=wanted, use_threads=False),
                   selected,
                   {k: k for k in keep}, parquet.metadata.num_rows,
                   unused_columns(names, positions + [names.index(k) for k in keep]),
                   lambda row: f"{path}, row {row + 1}")


#: pyarrow's message for a row of the wrong width.
_CSV_WIDTH_ERROR = re.compile(r"Expected (\d+) columns, got (\d+): (.*)", re.S)


def _csv_error(path: str, error: pa.ArrowInvalid) -> ScoringError:
    """pyarrow's error on a CSV file, in the words of ``export/score.py``: pyarrow does
    not name the line of a row of the wrong width, so the message names the row's text."""
    width = _CSV_WIDTH_ERROR.search(str(error))
    if width:
        return width_error(f"{path}, the row {width[3].strip()!r}", int(width[1]), int(width[2]))
    return ScoringError(f"{path}: {' '.join(str(error).split())}")


def _csv_source(path: str, model: NeuMissOnnxModel, keep: list[str], header: str) -> _Source:
    import pyarrow.csv as pcsv

    try:
        with open_text(path) as handle:
            first = next(csv.reader(handle), None)
    except UnicodeDecodeError as exc:
        raise not_text_error(path, exc) from None
    if not first:
        raise ScoringError(f"{path}: no data rows")
    positions, names = locate_columns(first, model, header, where=f"{path}, line 1", kept=keep)
    has_header = names is not None
    names = names or [str(i) for i in range(len(first))]
    absent = [k for k in keep if k not in names]
    if absent:
        raise ScoringError(f"{path}: --keep columns {absent} are not in the header")
    slots = [f"c{i}" for i in range(len(names))]
    types = {slots[p]: pa.float64() if column["kind"] == "numeric" else pa.string()
             for p, column in zip(positions, model.encoding, strict=True)}
    kept = [slots[names.index(k)] for k in keep]
    types.update({k: pa.string() for k in kept if k not in types})
    # Lines as a spreadsheet numbers them (pyarrow skips blank lines: none are expected).
    place = lambda row: f"{path}, line {row + 1 + has_header}"  # noqa: E731
    reader = functools.partial(
        pcsv.open_csv, path,
        read_options=pcsv.ReadOptions(column_names=slots, skip_rows=int(has_header),
                                      block_size=CSV_BLOCK_BYTES),
    )
    include = list(dict.fromkeys([slots[p] for p in positions] + kept))
    numeric = {slots[p]: (k, column) for k, (p, column)
               in enumerate(zip(positions, model.encoding, strict=True))
               if column["kind"] == "numeric"}

    batches = _csv_batches(path, reader, types, include, numeric, place)
    return _Source(batches, [slots[p] for p in positions], dict(zip(keep, kept)), None,
                   unused_columns(names, positions + [names.index(k) for k in keep]), place)


def _csv_batches(path: str, reader: Callable, types: dict, include: list[str], numeric: dict,
                 place: Callable[[int], str]) -> Iterator[pa.RecordBatch]:
    """The batches of ``reader`` (``pcsv.open_csv`` of ``path`` given its convert options),
    ``types`` and ``include`` its columns; ``numeric``, ``place``: see :func:`_text_numbers`.

    pyarrow's number reader is fast, but reads the missing tokens only as they are: from a
    cell it refuses (`` NA``, or text), the file is read on as text from the next row,
    with the rules of ``export/score.py``, which name the line of a bad cell.
    """
    import pyarrow.csv as pcsv

    done = 0
    try:
        for batch in reader(convert_options=pcsv.ConvertOptions(
                column_types=types, include_columns=include, null_values=NULL_TOKENS,
                strings_can_be_null=False)):
            yield batch
            done += batch.num_rows
        return
    except pa.ArrowInvalid:
        pass
    first = 0
    try:
        for batch in reader(convert_options=pcsv.ConvertOptions(
                column_types={**types, **dict.fromkeys(numeric, pa.string())},
                include_columns=include, strings_can_be_null=False)):
            skip, first = min(max(done - first, 0), batch.num_rows), first + batch.num_rows
            if skip < batch.num_rows:
                yield _text_numbers(batch.slice(skip), numeric, first - batch.num_rows + skip,
                                    place)
    except pa.ArrowInvalid as error:
        raise _csv_error(path, error) from None


def _text_numbers(batch: pa.RecordBatch, numeric: dict, first: int,
                  place: Callable[[int], str]) -> pa.RecordBatch:
    """``batch`` with its ``numeric`` columns (name -> the model's position and column),
    read as text, as numbers: cells stripped, missing tokens null (:func:`_parse_cell`).
    ``first``: the batch's first row over the file, named by ``place`` in errors."""
    import pyarrow.compute as pc

    columns = {}
    for name, array in zip(batch.schema.names, batch.columns, strict=True):
        if name in numeric:
            text = pc.utf8_trim_whitespace(array)
            missing = pc.is_in(pc.utf8_lower(text), value_set=_missing_tokens())
            text = pc.if_else(missing, None, text)
            try:
                array = pc.cast(text, pa.float64())
                finite = pc.all(pc.is_finite(array)).as_py() is not False
            except pa.ArrowInvalid:
                finite = False
            if not finite:  # Arrow and Python may differ on a cell: Python decides
                cells = text.to_pylist()
                values = [np.nan if c is None else _parse_cell(c) for c in cells]
                if None in values:
                    row = values.index(None)
                    position, column = numeric[name]
                    raise cell_error(place(first + row), position, column, cells[row])
                array = pa.array(values, pa.float64())
        columns[name] = array
    return pa.RecordBatch.from_pydict(columns)


def read_source(path: str, kind: str, model: NeuMissOnnxModel, keep: list[str], header: str,
                batch_rows: int) -> _Source:
    """The :class:`_Source` of the input file ``path`` of format ``kind``."""
    if kind == "parquet":
        return _parquet_source(path, model, keep, batch_rows)
    return _csv_source(path, model, keep, header)
