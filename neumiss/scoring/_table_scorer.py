#!/usr/bin/env python
"""Score a CSV table with a NeuMiss ONNX model, using only numpy and onnxruntime.

Usage::

    python export/score.py model.onnx input.csv > predictions.csv

(``export/score.py`` is this file: it is also the module
``neumiss.scoring._table_scorer``, whose table rules ``neumiss score`` reuses; it
imports neither torch nor neumiss, so it can be copied alone next to a model.)

The table rules, defined here once for both scorers (each function documents its own):
missing values are empty cells, ``NA`` and ``nan`` in any case (:data:`MISSING_TOKENS`),
cells are compared with their spaces stripped, except that a cell spelled exactly as a
category seen at fit is that category; the first line is a header when it spells the
model's feature names or holds no number (:func:`locate_columns`); columns are matched by
name when there is a header (:func:`match_columns`); categorical and boolean columns, and
numeric ones with ``levels``, are encoded as the metadata ``encoding`` says
(:func:`encode_columns`). The scorer refuses
what ``predict`` refuses: values too far from the training data (:meth:`NeuMissOnnxModel.
check_range`), a file changed since its export (the metadata's ``integrity_sha256``,
:func:`verify_digest`) and outputs that are not finite. Errors are :class:`ScoringError`,
naming the file, the line or row (1-based) and the column; the command prints them on
one line and exits with 1. Output: :func:`output_columns`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys

import numpy as np
import onnxruntime as ort

PRODUCER = "neumiss"
#: Cell texts read as missing values, compared after stripping and lower-casing.
MISSING_TOKENS = frozenset({"", "na", "nan"})
#: Cell texts of a boolean column, compared after stripping and lower-casing.
BOOLEAN_TOKENS = {"true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0}
#: Rows times calibration rows scored at once by an interval model that embeds them.
CHUNK_PAIRS = 2**20
#: Rows per ONNX Runtime call: few enough for the graph's intermediate arrays (a few per
#: layer, each rows x width floats) to stay in the processor's cache.
CHUNK_ROWS = 4096
#: Largest absolute standardized value ``predict`` accepts (``neumiss.tables``).
MAX_STANDARDIZED = 1e30
#: Metadata key of the file's digest (``neumiss.export.DIGEST_KEY``).
DIGEST_KEY = "integrity_sha256"


class ScoringError(ValueError):
    """A model or input the scorer cannot use; the message says what and where."""


class RowError(ScoringError):
    """An error that already names its row over the whole input."""


def verify_digest(content: bytes, where: str, expected: bool) -> None:
    """Check the SHA-256 digest an export writes as the last metadata property: that of
    the file with the digest's 64 hex digits written as zeros. ``expected``: the metadata
    holds one (files exported before digests hold none, and are not checked). Raises
    :class:`ScoringError` if the file was changed since its export (or has no digest).
    """
    key = DIGEST_KEY.encode()
    marker = bytes([0x0A, len(key)]) + key + bytes([0x12, 64])  # key, then 64-byte value
    at = content.rfind(marker)
    if at < 0 and not expected:
        return
    start = at + len(marker)
    blank = content[:start] + b"0" * 64 + content[start + 64:]
    if at < 0 or hashlib.sha256(blank).hexdigest().encode() != content[start : start + 64]:
        raise ScoringError(f"{where} fails its integrity check: the file was changed after "
                           "its export (damaged, or edited); export the model again")


def check_not_input(input_path: str, output_path: str | None) -> None:
    """Refuse an output path that names the input file (also through a link)."""
    if output_path in (None, "-") or input_path == "-" or not os.path.exists(output_path):
        return
    if os.path.samefile(input_path, output_path):
        raise ScoringError(f"{output_path} is the input file {input_path}: the predictions "
                           "would replace it; choose another output")


def cell_error(where: str, position: int, column: dict, text) -> ScoringError:
    """A cell that does not fit its column: ``where`` (a line, or a file), the column's
    1-based position among the model's columns and its name."""
    expected = "true or false" if column["kind"] == "boolean" else "a number"
    return ScoringError(f"{where}, column {position + 1} ({column['name']}): {text!r} is not "
                        f"{expected} (missing values are empty cells, NA or nan)")


def width_error(where: str, expected: int, got: int) -> ScoringError:
    """A line with the wrong number of cells."""
    return ScoringError(f"{where}: expected {expected} columns, got {got}")


def unused_note(names: list[str]) -> str:
    """The note on columns the model does not use."""
    return f"columns the model does not use, ignored: {names}"


def unseen_note(name: str, values: set) -> str:
    """The note on a column's categories not seen at fit (a few of them)."""
    return (f"column {name!r} has categories not seen at fit, scored as missing: "
            f"{sorted(values)[:5]!r}")


def open_text(path: str):
    """The CSV file ``path`` (``-``: standard input) as text for :mod:`csv`, without BOM."""
    return sys.stdin if path == "-" else open(path, newline="", encoding="utf-8-sig")


def not_text_error(path: str, error: UnicodeDecodeError) -> ScoringError:
    """A file that is not UTF-8 text."""
    return ScoringError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})")


def _parse_cell(text: str) -> float | None:
    """The cell's number, NaN when it is a missing token, None when it is not a number."""
    stripped = text.strip()
    if stripped.lower() in MISSING_TOKENS:
        return float("nan")
    try:
        value = float(stripped)
    except ValueError:
        return None
    # float() also reads "inf", "infinity" and "1_000": not numbers in a data table.
    if not np.isfinite(value) or "_" in stripped:
        return None
    return value


class NeuMissOnnxModel:
    """An ONNX model exported by ``neumiss.export_onnx``, ready to score.

    ``path``: the ``.onnx`` file or its content. Attributes: ``task`` ("regression" or
    "classification"), ``n_features`` (input columns), ``n_encoded`` (columns of the
    graph's ``X`` and ``M``), ``feature_names`` (or None), ``encoding`` (per input
    column: ``name``, ``kind`` ("numeric", "boolean" or "categorical"), ``categories``,
    ``other``; ``statistics`` for target statistics, ``levels`` for a numeric column's
    indicators), ``classes`` (classifier, in order).
    Raises :class:`ScoringError` for a file that is not an ONNX model exported by
    neumiss, or that fails its integrity check (:func:`verify_digest`).
    """

    def __init__(self, path: str | bytes,
                 session_options: ort.SessionOptions | None = None) -> None:
        if isinstance(path, bytes):
            path, content = "the ONNX bytes", path
        elif not os.path.isfile(path):
            raise ScoringError(f"{path}: no such model file")
        else:
            with open(path, "rb") as handle:
                content = handle.read()
        self.path = path
        try:
            self.session = ort.InferenceSession(content, sess_options=session_options,
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for bad files
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ScoringError(f"{path} is not a readable ONNX model ({reason})") from None
        meta = self.session.get_modelmeta()
        props = meta.custom_metadata_map
        inputs = [i.name for i in self.session.get_inputs()]
        if meta.producer_name != PRODUCER or "task" not in props or inputs != ["X", "M"]:
            raise ScoringError(f"{path} is an ONNX model but not one exported by neumiss "
                               f"(producer {meta.producer_name!r}, inputs {inputs})")
        self.task = props["task"]
        self.n_features = int(props["n_features"])
        self.feature_names = json.loads(props["feature_names"])
        self.classes = json.loads(props["classes"])
        # Contract version 1 had no encoding: every column numeric.
        names = self.feature_names or list(range(self.n_features))
        self.encoding = json.loads(props.get("encoding", "null")) or [
            {"name": name, "kind": "numeric", "categories": [], "other": False} for name in names
        ]
        widths = [_width(column) for column in self.encoding]
        self.n_encoded = sum(widths)
        verify_digest(content, path, DIGEST_KEY in props)
        # Per encoded column (absent before format 2's digest): mean, scale, inverse_bound.
        standardization = json.loads(props.get("standardization", "null"))
        self._range = None if standardization is None else tuple(
            np.asarray(standardization[key], dtype=np.float64)
            for key in ("mean", "scale", "inverse_bound"))
        self.column_of = np.repeat(np.arange(len(self.encoding)), widths)

    def check_range(self, X: np.ndarray, where=lambda row: f"row {row + 1}",
                    M: np.ndarray | None = None) -> None:
        """Refuse observed values of encoded ``X`` (n, n_encoded) further from the training
        data than ``predict`` accepts: more than :data:`MAX_STANDARDIZED` deviations from
        the column's training mean (after the tails' compression). ``where(i)`` names row
        ``i`` of ``X``; ``M`` (1 = missing) when not the NaN of ``X``. Raises
        :class:`RowError` naming the first such cell's row and column."""
        if self._range is None:
            return
        # The standardization is increasing in x: when X's smallest and largest values (NaN
        # ignored) are in range for every column, all are (one pass over X, not several in
        # float64); infinite values (or no rows) take the full check.
        X = np.asarray(X)
        low_high = np.zeros((2, self.n_encoded)) + [[np.fmin.reduce(X, None, initial=np.nan)],
                                                    [np.fmax.reduce(X, None, initial=np.nan)]]
        if np.isfinite(low_high).all() and not self._too_far(low_high).any():
            return
        too_far = self._too_far(X) & (True if M is None else ~np.asarray(M, dtype=bool))
        if too_far.any():
            row, col = np.argwhere(too_far)[0]
            position = int(self.column_of[col])
            raise RowError(
                f"{where(int(row))}, column {position + 1} ({self.encoding[position]['name']}): "
                f"{float(X[row, col]):.7g} is too far from the training data for the network: "
                f"more than {MAX_STANDARDIZED:g} standard deviations from the column's training "
                f"mean ({int(too_far.sum())} such cells)")

    def _too_far(self, X: np.ndarray) -> np.ndarray:
        """The finite values of encoded ``X`` too far (not NaN; infinity: build_inputs)."""
        mean, scale, bound = self._range
        with np.errstate(over="ignore", invalid="ignore"):
            z = (np.asarray(X, dtype=np.float64) - mean) / scale
            z = z / np.hypot(1.0, z * bound) if bound.any() else z
        return np.isfinite(z) & (np.abs(z) > MAX_STANDARDIZED)

    def check_outputs(self, outputs: list, where) -> None:
        """Refuse outputs that are not finite (a damaged or edited graph): a
        :class:`RowError` naming the model file and ``where`` of the first rows."""
        bad = np.zeros(len(outputs[0]), dtype=bool)
        for values in outputs:
            if values.dtype.kind == "f":
                bad |= ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
        if bad.any():
            rows = [where(int(i)) for i in np.flatnonzero(bad)[:5]]
            raise RowError(f"{self.path}: the outputs of {', '.join(rows)}"
                           f"{' and others' if bad.sum() > 5 else ''} are not finite although "
                           "their inputs are in range: the graph is damaged or was edited")

    def predict(self, X, M=None, *, overwrite: bool = False,
                where=lambda row: f"row {row + 1}") -> dict[str, np.ndarray]:
        """Run the model on encoded ``X`` (n, n_encoded), NaN = missing, or on an explicit
        ``(X, M)`` pair (``M``: 1 / True = missing).

        ``X`` holds the table's columns as :func:`encode_rows` writes them; a float32
        ``X`` may be overwritten with ``overwrite`` (:func:`build_inputs`). Rows are
        scored in chunks of :data:`CHUNK_ROWS`; errors name rows with ``where(i)``
        (:meth:`check_range`, :meth:`check_outputs`), or over all of ``X``.

        Returns the graph's outputs by name (``y``, ``label``, ``probabilities``, ...).
        """
        X, M = _checked(X, M, self.n_encoded)
        names = [o.name for o in self.session.get_outputs()]
        # Rows in chunks, each filled and scored while in the processor's cache; interval
        # models that embed their calibration rows hold N * n_calibration rows at once.
        n_cal = int(self.session.get_modelmeta().custom_metadata_map.get(
            "embedded_calibration_rows", 0))
        step = min(CHUNK_ROWS, max(1, CHUNK_PAIRS // n_cal)) if n_cal else CHUNK_ROWS
        chunks = []
        for i in range(0, max(len(X), 1), step):
            here = lambda row, i=i: where(i + row)  # noqa: E731
            self.check_range(X[i : i + step], here, None if M is None else M[i : i + step])
            try:
                x, m = _filled(X[i : i + step], None if M is None else M[i : i + step],
                               overwrite)
            except ScoringError:
                build_inputs(X, M)  # raises the error numbered over all rows
                raise
            chunks.append(self.session.run(names, {"X": x, "M": m}))
            self.check_outputs(chunks[-1], here)
        if len(chunks) == 1:
            return dict(zip(names, chunks[0], strict=True))
        return {name: np.concatenate([c[k] for c in chunks]) for k, name in enumerate(names)}


def build_inputs(X, M=None, *, n_features: int | None = None,
                 overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The model's inputs ``(X with 0 where missing, M)``, both float32 (n, d).

    ``X`` (n, d): NaN marks a missing value when ``M`` (1 / True = missing) is omitted;
    where ``M`` says missing the value of ``X`` is ignored, where it says observed it
    must be finite. ``n_features``: the expected ``d``. ``overwrite``: with a float32
    ``X`` and no ``M``, write the zeros into ``X`` itself (otherwise the arguments are
    never modified). Raises :class:`ScoringError` for wrong shapes, a mask of other values
    than 0 and 1, or a NaN or infinite value at an observed entry.
    """
    return _filled(*_checked(X, M, n_features), overwrite)


def _checked(X, M, n_features: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` (float32 or float64) and ``M`` as arrays, their shapes and ``M``'s values checked."""
    try:
        X = np.asarray(X, dtype=np.float32 if getattr(X, "dtype", None) == np.float32
                       else np.float64)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"X must be a numeric array: {exc}") from None
    if X.ndim != 2:
        raise ScoringError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if n_features is not None and X.shape[1] != n_features:
        raise ScoringError(f"X has {X.shape[1]} columns, the model expects {n_features}")
    if M is not None:
        M = np.asarray(M)
        if M.shape != X.shape:
            raise ScoringError(f"M has shape {M.shape}, X has shape {X.shape}: they must match")
        if M.dtype != np.bool_ and not np.isin(M, (0, 1)).all():
            raise ScoringError("M must hold only 0 / 1 (or False / True); 1 = missing")
    return X, M


def _filled(X: np.ndarray, M: np.ndarray | None, overwrite: bool):
    """:func:`build_inputs` of arrays already :func:`_checked`."""
    missing = np.isnan(X) if M is None else M.astype(bool)
    if overwrite and M is None and X.dtype == np.float32:
        x = X
    else:
        with np.errstate(over="ignore"):  # float32 overflow: reported below where observed
            x = X.astype(np.float32)
    # x = 0 where missing, as a bitwise AND of x's bits with 0 (missing) or all ones: several
    # times faster than a masked copy when missing entries are scattered.
    keep_bits = np.subtract(missing.view(np.int8), np.int8(1)).astype(np.int32)
    np.bitwise_and(x.view(np.int32), keep_bits, out=x.view(np.int32))
    if not np.isfinite(x).all():
        bad = ~np.isfinite(x)
        row, col = np.argwhere(bad)[0]
        kind = ("NaN" if M is not None and np.isnan(X[row, col])
                else "an infinite (or float32-overflowing) value")
        raise ScoringError(
            f"X has {kind} at row {row}, column {col} where M says observed "
            f"({int(bad.sum())} such entries); mark missing values in M (1) instead"
        )
    return x, missing.astype(np.float32)


def is_header(cells: list[str], model: NeuMissOnnxModel) -> bool:
    """Whether a first line is a header: it spells the model's feature names, or none of
    its cells is a number and at least one is not a missing token."""
    names = model.feature_names
    if names is not None and [c.strip() for c in cells] == [str(n) for n in names]:
        return True
    numbers = [_parse_cell(c) for c in cells]
    return all(v is None or np.isnan(v) for v in numbers) and any(v is None for v in numbers)


def _width(column: dict) -> int:
    """Encoded columns of an input column: value (+ levels), categories (+ other), statistics."""
    if column["kind"] != "categorical":
        return 1 + len(column.get("levels") or ())
    return len(column.get("statistic_names") or column["categories"]) + bool(column["other"])


def _text_codes(texts: np.ndarray, column: dict, unseen: dict | None) -> np.ndarray:
    """Per cell of a boolean or categorical column: its one-hot position, -1 if missing
    (or an unseen category), -2 if not a boolean. Each distinct text is looked at once.

    A cell spelled as a category seen at fit is that category (even ``NA`` or `` a``),
    first as it is, then both with their spaces stripped; else a missing token (stripped,
    any case) is missing."""
    texts = np.where(np.equal(texts, None), "", texts)
    distinct, inverse = np.unique(texts.astype(str), return_inverse=True)
    index = {c: i for i, c in enumerate(column["categories"])}
    stripped = {}
    for c, i in index.items():
        stripped.setdefault(c.strip(), i)
    other = len(index) if column["other"] else None
    codes = np.empty(len(distinct), dtype=np.int64)
    for k, raw in enumerate(distinct):
        text = raw.strip()
        if raw in index or text in stripped:  # a category seen at fit, even "NA" or " a"
            codes[k] = index.get(raw, stripped.get(text))
        elif text.lower() in MISSING_TOKENS:
            codes[k] = -1
        elif column["kind"] == "boolean":
            value = BOOLEAN_TOKENS.get(text.lower())
            codes[k] = -2 if value is None else int(value)
        else:
            if other is None and unseen is not None:
                unseen.setdefault(str(column["name"]), set()).add(text)
            codes[k] = -1 if other is None else other
    return codes[inverse.reshape(-1)]


def encode_columns(columns: list, model: NeuMissOnnxModel, *, unseen: dict | None = None,
                   where=lambda row: f"row {row}", dtype=np.float64) -> np.ndarray:
    """Encode the model's input columns: ``dtype`` array (n, n_encoded), NaN = missing.

    ``columns``: ``n_features`` arrays (n,) in the model's order; numbers (NaN = missing)
    for a numeric column, cells (text, numbers, bools or None) for the others, read by
    :func:`_text_codes`. ``unseen`` is filled with column name -> categories not seen at
    fit; ``where(i)`` names row ``i`` in errors. Raises :class:`ScoringError` for a boolean
    cell that is not one, naming its row and column.
    """
    n = len(columns[0]) if columns else 0
    out = np.zeros((n, model.n_encoded), dtype=dtype)
    start = 0
    for position, (values, column) in enumerate(zip(columns, model.encoding, strict=True)):
        width = _width(column)
        block = out[:, start : start + width]
        start += width
        if column["kind"] == "numeric":  # the value, then its levels' indicators (0/1/NaN)
            block[:, 0] = values
            if width > 1:
                block[:, 1:] = block[:, :1] == np.asarray(column["levels"], dtype)
                block[np.isnan(block[:, 0]), 1:] = np.nan
            continue
        codes = _text_codes(np.asarray(values, dtype=object), column, unseen)
        if (codes == -2).any():
            row = int(np.flatnonzero(codes == -2)[0])
            raise cell_error(where(row), position, column, values[row])
        if column["kind"] == "boolean":
            block[:, 0] = np.where(codes < 0, np.nan, codes)
            continue
        block[codes < 0] = np.nan
        rows = np.flatnonzero(codes >= 0)  # each category's target statistics, or one-hot row
        block[rows] = np.asarray(column.get("statistics") or np.eye(width))[codes[rows]]
    return out


def encode_rows(rows: list[list[str]], model: NeuMissOnnxModel, lines: list[int] | None = None,
                unseen: dict | None = None, path: str = "") -> np.ndarray:
    """Encode rows of text cells (``n_features`` per row) for the model: float64
    (n, n_encoded), NaN = missing. ``lines``: each row's line, and ``path`` the file, for
    errors (a cell that does not fit its column); ``unseen`` as :func:`encode_columns`.
    """
    lines = list(range(1, len(rows) + 1)) if lines is None else lines
    place = f"{path}, line " if path else "line "
    columns = []
    for position, column in enumerate(model.encoding):
        cells = [cells[position] for cells in rows]
        if column["kind"] == "numeric":
            numbers = [_parse_cell(text) for text in cells]
            if None in numbers:
                row = numbers.index(None)
                raise cell_error(f"{place}{lines[row]}", position, column, cells[row])
            cells = np.array(numbers, dtype=np.float64)
        columns.append(cells)
    return encode_columns(columns, model, unseen=unseen,
                          where=lambda row: f"{place}{lines[row]}")


def match_columns(names: list[str], model: NeuMissOnnxModel, *, where: str = "the header",
                  kept=()) -> list[int]:
    """Positions in ``names`` (a table's column names) of the model's input columns:
    by name when the model has feature names (any order, others ignored), else all
    columns in order. Raises :class:`ScoringError` for an absent column (naming it),
    a name twice, or another count; ``kept`` columns are not called unexpected.
    """
    names = [str(n).strip() for n in names]
    if model.feature_names is None:
        if len(names) != model.n_features:
            raise width_error(where, model.n_features, len(names))
        return list(range(model.n_features))
    expected = [str(e) for e in model.feature_names]
    missing = [e for e in expected if e not in names]
    if missing:
        unexpected = [n for n in names if n not in expected and n not in kept]
        raise ScoringError(
            f"{where}: missing {missing}, unexpected {unexpected} (the model's columns: "
            f"{expected}, in any order)"
        )
    twice = sorted({e for e in expected if names.count(e) > 1})
    if twice:
        raise ScoringError(f"{where}: columns {twice} appear more than once")
    return [names.index(e) for e in expected]


def unused_columns(names: list[str], positions: list[int]) -> list[str]:
    """The names of ``names`` not at ``positions``: columns the model ignores."""
    kept = set(positions)
    return [str(n).strip() for i, n in enumerate(names) if i not in kept]


def locate_columns(first: list[str], model: NeuMissOnnxModel, header: str = "auto",
                   where: str = "line 1", kept=()) -> tuple[list[int], list[str] | None]:
    """Where the model's columns are in a table whose first line has the cells ``first``,
    and the header's names (stripped; None when ``first`` is data). ``header`` ("auto",
    "yes", "no"; "auto": :func:`is_header`); ``where`` names the line in errors; ``kept``
    as :func:`match_columns`.
    """
    if header == "yes" or (header == "auto" and is_header(first, model)):
        names = [c.strip() for c in first]
        return match_columns(names, model, where=f"{where} (header)", kept=kept), names
    if len(first) != model.n_features:
        error = width_error(where, model.n_features, len(first))
        raise ScoringError(f"{error} (and no header naming them)")
    return list(range(model.n_features)), None


def read_table(path: str, model: NeuMissOnnxModel, header: str = "auto") -> np.ndarray:
    """Read a CSV file (``-``: standard input) into the model's encoded features,
    float64 (n, n_encoded), NaN = missing.

    ``header`` ("auto", "yes", "no"): whether the first line holds column names
    (:func:`locate_columns`; columns are then matched by name). Raises
    :class:`ScoringError` for a line of another width, a cell that does not fit its
    column or lies too far from the training data, a missing column (each naming the
    file, line and column), an empty table or a file that is not UTF-8 text. Unseen
    categories are scored as missing and reported on standard error.
    """
    positions, width = list(range(model.n_features)), model.n_features
    rows, lines = [], []
    try:
        with open_text(path) as handle:
            for line_number, cells in enumerate(csv.reader(handle), start=1):
                if not cells:  # blank line
                    continue
                if line_number == 1:  # a blank first line: no header
                    positions, names = locate_columns(cells, model, header)
                    width = len(cells)
                    if names is not None:
                        ignored = unused_columns(names, positions)
                        if ignored:
                            print(f"score.py: note: {unused_note(ignored)}", file=sys.stderr)
                        continue
                if len(cells) != width:
                    raise width_error(f"line {line_number}", width, len(cells))
                rows.append([cells[p] for p in positions])
                lines.append(line_number)
    except UnicodeDecodeError as exc:
        raise not_text_error(path, exc) from None
    if not rows:
        raise ScoringError(f"{path}: no data rows")
    unseen: dict[str, set] = {}
    encoded = encode_rows(rows, model, lines=lines, unseen=unseen, path=path)
    model.check_range(encoded, where=lambda row: f"{path}, line {lines[row]}")
    for name, values in unseen.items():
        print(f"score.py: warning: {unseen_note(name, values)}", file=sys.stderr)
    return encoded


def output_columns(model: NeuMissOnnxModel, outputs: dict[str, np.ndarray]) -> dict:
    """The predictions as named columns (n,): ``prediction`` (regressor; ``lower``, ``upper``
    for an interval model), or ``label`` and ``proba_<class>`` per class (classifier;
    a set model also a boolean ``set_<class>`` per class and ``set_size``)."""
    if model.task == "regression":
        bounds = {k: outputs[k] for k in ("lower", "upper") if k in outputs}
        return {"prediction": outputs["y"], **bounds}
    sets = {"set": "set"} if "set" in outputs else {}  # a ConformalClassifier's sets
    return {"label": outputs["label"], **{f"{kind}_{c}": outputs[name][:, k] for kind, name in
            ({"proba": "probabilities"} | sets).items() for k, c in enumerate(model.classes)},
            **({"set_size": outputs["set_size"]} if sets else {})}


def write_predictions(stream, model: NeuMissOnnxModel, outputs: dict[str, np.ndarray]) -> None:
    """Write the predictions as CSV (:func:`output_columns`), each number as the shortest
    text that reads back to the same float64 (``y``) or float32 (probabilities)."""
    columns = output_columns(model, outputs)
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(zip(*(map(str, values) for values in columns.values()), strict=True))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="score.py", description="Score a CSV table with a NeuMiss ONNX model."
    )
    parser.add_argument("model", help="ONNX file written by neumiss.export_onnx / neumiss export")
    parser.add_argument("input", help="CSV file of features ('-' for standard input)")
    parser.add_argument("-o", "--output", help="write predictions here instead of stdout")
    parser.add_argument(
        "--header", choices=("auto", "yes", "no"), default="auto",
        help="whether the first line holds column names (default: auto-detect)",
    )
    parser.add_argument(
        "--debug", action="store_true",
        help="on an error, show the full Python traceback instead of one line",
    )
    args = parser.parse_args(argv)
    try:
        check_not_input(args.input, args.output)
        model = NeuMissOnnxModel(args.model)
        X = read_table(args.input, model, header=args.header)
        outputs = model.predict(X)
        if args.output is None:
            write_predictions(sys.stdout, model, outputs)
        else:
            with open(args.output, "w", newline="", encoding="utf-8") as stream:
                write_predictions(stream, model, outputs)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("score.py: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of the predictions went away (e.g. `| head`)
        return 1
    except Exception as exc:  # one line, whatever failed (csv.Error, onnxruntime, ...)
        if args.debug:
            raise
        message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        if not isinstance(exc, (ScoringError, OSError)):
            message = f"{message or type(exc).__name__} ({type(exc).__name__})"
        print(f"score.py: error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
