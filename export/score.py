#!/usr/bin/env python
"""Score a CSV table with a NeuMiss ONNX model, using only numpy and onnxruntime.

Usage::

    python export/score.py model.onnx input.csv > predictions.csv

Empty cells, ``NA`` and ``nan`` (any case) are missing values. The first line is
a header when it spells the model's feature names, or when none of its cells is
a number (``--header yes/no`` forces it); if both the header and the model carry
feature names they must match, in order. Categorical and boolean columns are
encoded as the model's metadata ``encoding`` says: one 0/1 column per category
seen at fit (a missing or unseen category marks the whole group missing; unseen
ones are reported on standard error), booleans as 0/1 (``true``/``false``/``1``/``0``).
Output: one column ``prediction`` for a regressor (and ``lower``, ``upper``
for an interval model, whose ONNX outputs are ``y``, ``lower``, ``upper``);
``label`` and one ``proba_<class>`` column per class for a classifier.

As a library (``importlib`` on this file): :class:`NeuMissOnnxModel` scores
encoded arrays, :func:`build_inputs` turns an array with NaN, or an explicit
``(X, M)`` pair, into the model's float32 inputs and rejects NaN in observed
entries, :func:`encode_rows` encodes rows of text cells. Errors are
:class:`ScoringError`; the command prints them and exits with 1.
"""

from __future__ import annotations

import argparse
import csv
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


class ScoringError(ValueError):
    """A model or input the scorer cannot use; the message says what and where."""


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

    Parameters
    ----------
    path : str
        The ``.onnx`` file.
    session_options : onnxruntime.SessionOptions, optional

    Attributes
    ----------
    task : {"regression", "classification"}
    n_features : int
        Columns of the input table.
    n_encoded : int
        Columns of the graph's inputs ``X`` and ``M`` (one per category of a
        categorical column).
    feature_names : list of str or None
    encoding : list of dict
        Per input column: ``name``, ``kind`` ("numeric", "boolean" or
        "categorical"), ``categories`` and ``other`` (a last shared column).
    classes : list or None
        Class labels in the order of the probability columns (classifier).

    Raises
    ------
    ScoringError
        If the file is not an ONNX model, or not one exported by neumiss.
    """

    def __init__(self, path: str, session_options: ort.SessionOptions | None = None) -> None:
        if not os.path.isfile(path):
            raise ScoringError(f"{path}: no such model file")
        try:
            self.session = ort.InferenceSession(
                path, sess_options=session_options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own classes for bad files
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ScoringError(f"{path} is not a readable ONNX model ({reason})") from None
        meta = self.session.get_modelmeta()
        props = self.props = meta.custom_metadata_map
        inputs = [i.name for i in self.session.get_inputs()]
        if meta.producer_name != PRODUCER or "task" not in props or inputs != ["X", "M"]:
            raise ScoringError(
                f"{path} is an ONNX model but not one exported by neumiss "
                f"(producer {meta.producer_name!r}, inputs {inputs})"
            )
        self.task = props["task"]
        self.n_features = int(props["n_features"])
        self.feature_names = json.loads(props["feature_names"])
        self.classes = json.loads(props["classes"])
        # Contract version 1 had no encoding: every column numeric.
        names = self.feature_names or list(range(self.n_features))
        self.encoding = json.loads(props.get("encoding", "null")) or [
            {"name": name, "kind": "numeric", "categories": [], "other": False} for name in names
        ]
        self.n_encoded = sum(_width(column) for column in self.encoding)

    def predict(self, X, M=None) -> dict[str, np.ndarray]:
        """Run the model on encoded ``X`` (NaN = missing) or on an explicit ``(X, M)`` pair.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_encoded)
            The input table's columns as :func:`encode_rows` writes them (the
            table itself when every column is numeric).
        M : array-like of shape (n_samples, n_encoded), optional
            1 / True = missing. When omitted, the NaN entries of ``X`` are missing.

        Returns
        -------
        dict
            ``{"y": (n,) float64}`` for a regressor, ``{"label": (n,),
            "probabilities": (n, n_classes) float32}`` for a classifier.
        """
        x, m = build_inputs(X, M, n_features=self.n_encoded)
        names = [o.name for o in self.session.get_outputs()]
        # Interval models augmented with their calibration rows hold N * n_calibration
        # rows at once: score them in chunks of bounded size.
        n_cal = int(self.props.get("embedded_calibration_rows", 0))
        step = max(1, CHUNK_PAIRS // max(1, n_cal)) if n_cal else max(1, x.shape[0])
        chunks = [self.session.run(names, {"X": x[i : i + step], "M": m[i : i + step]})
                  for i in range(0, x.shape[0], step)]
        chunks = chunks or [self.session.run(names, {"X": x, "M": m})]
        return {name: np.concatenate([c[k] for c in chunks]) for k, name in enumerate(names)}


def build_inputs(X, M=None, *, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The model's inputs ``(X with 0 where missing, M)``, both float32 (n, d).

    Parameters
    ----------
    X : array-like of shape (n, d)
        Feature values; NaN marks a missing value when ``M`` is omitted.
    M : array-like of shape (n, d), optional
        1 / True = missing, 0 / False = observed. Where ``M`` says missing the
        value of ``X`` is ignored; where it says observed ``X`` must be finite.
    n_features : int, optional
        Expected ``d``.

    Raises
    ------
    ScoringError
        Wrong shapes, a mask with values other than 0 and 1, or a NaN / infinite
        value of ``X`` at an observed entry. The arguments are never modified.
    """
    try:
        X = np.array(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"X must be a numeric array: {exc}") from None
    if X.ndim != 2:
        raise ScoringError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if n_features is not None and X.shape[1] != n_features:
        raise ScoringError(f"X has {X.shape[1]} columns, the model expects {n_features}")
    if M is None:
        missing = np.isnan(X)
    else:
        M = np.asarray(M)
        if M.shape != X.shape:
            raise ScoringError(f"M has shape {M.shape}, X has shape {X.shape}: they must match")
        if M.dtype != np.bool_ and not np.isin(M, (0, 1)).all():
            raise ScoringError("M must hold only 0 / 1 (or False / True); 1 = missing")
        missing = M.astype(bool)
    x = np.where(missing, 0.0, X).astype(np.float32)
    bad = ~np.isfinite(x)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(X[row, col]) else "an infinite (or float32-overflowing) value"
        raise ScoringError(
            f"X has {kind} at row {row}, column {col} where M says observed "
            f"({int(bad.sum())} such entries); mark missing values in M (1) instead"
        )
    return x, missing.astype(np.float32)


def _is_header(cells: list[str], model: NeuMissOnnxModel) -> bool:
    names = model.feature_names
    if names is not None and [c.strip() for c in cells] == [str(n) for n in names]:
        return True
    numbers = [_parse_cell(c) for c in cells]
    return all(v is None or np.isnan(v) for v in numbers) and any(v is None for v in numbers)


def _width(column: dict) -> int:
    if column["kind"] != "categorical":
        return 1
    return len(column["categories"]) + bool(column["other"])


def encode_rows(rows: list[list[str]], model: NeuMissOnnxModel, lines: list[int] | None = None,
                unseen: dict | None = None) -> np.ndarray:
    """Encode rows of text cells for the model: float64 (n, n_encoded), NaN = missing.

    Parameters
    ----------
    rows : list of lists of str
        One list of ``n_features`` cells per row.
    model : NeuMissOnnxModel
    lines : list of int, optional
        Line number of each row, for error messages (default 1, 2, ...).
    unseen : dict, optional
        Filled with column name -> set of categories not seen at fit (scored as missing).

    Raises
    ------
    ScoringError
        A numeric cell that is not a number, or a boolean cell that is not one,
        with its line and column.
    """
    lines = list(range(1, len(rows) + 1)) if lines is None else lines
    out = np.zeros((len(rows), model.n_encoded), dtype=np.float64)
    start = 0
    for col, column in enumerate(model.encoding):
        width = _width(column)
        block = out[:, start : start + width]
        index = {c: i for i, c in enumerate(column["categories"])}
        for r, cells in enumerate(rows):
            text = cells[col].strip()
            if text.lower() in MISSING_TOKENS:
                block[r] = np.nan
                continue
            if column["kind"] == "categorical":
                position = index.get(text, len(index) if column["other"] else None)
                if position is None:
                    block[r] = np.nan
                    if unseen is not None:
                        unseen.setdefault(str(column["name"]), set()).add(text)
                else:
                    block[r, position] = 1.0
                continue
            value = (
                BOOLEAN_TOKENS.get(text.lower()) if column["kind"] == "boolean"
                else _parse_cell(text)
            )
            if value is None:
                expected = "true or false" if column["kind"] == "boolean" else "a number"
                raise ScoringError(
                    f"line {lines[r]}, column {col + 1} ({column['name']}): {cells[col]!r} "
                    f"is not {expected} (missing values are empty cells, NA or nan)"
                )
            block[r] = value
        start += width
    return out


def _check_header(header: list[str], model: NeuMissOnnxModel) -> None:
    names = [h.strip() for h in header]
    expected = model.feature_names
    if len(names) != model.n_features:
        detail = ""
        if expected is not None:
            expected = [str(e) for e in expected]
            missing = [e for e in expected if e not in names]
            unexpected = [n for n in names if n not in expected]
            detail = (f": missing {missing}, unexpected {unexpected} "
                      f"(expected, in order: {expected})")
        raise ScoringError(
            f"line 1 (header): expected {model.n_features} columns, got {len(names)}{detail}"
        )
    if expected is None or names == [str(e) for e in expected]:
        return
    expected = [str(e) for e in expected]
    if sorted(names) == sorted(expected):
        raise ScoringError(
            f"the columns are in a different order than the model's features: "
            f"expected {expected}, got {names}"
        )
    missing = [e for e in expected if e not in names]
    unexpected = [n for n in names if n not in expected]
    raise ScoringError(
        f"the columns differ from the model's features: missing {missing}, "
        f"unexpected {unexpected} (expected, in order: {expected})"
    )


def read_table(path: str, model: NeuMissOnnxModel, header: str = "auto") -> np.ndarray:
    """Read a CSV file into the model's encoded features, float64 (n, n_encoded), NaN = missing.

    Parameters
    ----------
    path : str, or "-" for standard input
    model : NeuMissOnnxModel
        Gives the expected columns, their encoding and, if any, the feature names.
    header : {"auto", "yes", "no"}
        Whether the first line holds column names; "auto": when it spells the
        model's feature names, or none of its cells is a number.

    Raises
    ------
    ScoringError
        Wrong number of columns, a cell that does not fit its column, bad
        column names (each message gives the line and column), an empty table,
        or a file that is not UTF-8 text. Categories not seen at fit are scored
        as missing and reported on standard error.
    """
    d = model.n_features
    rows, lines = [], []
    handle = sys.stdin if path == "-" else open(path, newline="", encoding="utf-8-sig")
    try:
        with handle:
            for line_number, cells in enumerate(csv.reader(handle), start=1):
                if not cells:  # blank line
                    continue
                if line_number == 1 and (
                    header == "yes" or (header == "auto" and _is_header(cells, model))
                ):
                    _check_header(cells, model)
                    continue
                if len(cells) != d:
                    raise ScoringError(
                        f"line {line_number}: expected {d} columns, got {len(cells)}"
                    )
                rows.append(cells)
                lines.append(line_number)
    except UnicodeDecodeError as exc:
        raise ScoringError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not rows:
        raise ScoringError(f"{path}: no data rows")
    unseen: dict[str, set] = {}
    encoded = encode_rows(rows, model, lines=lines, unseen=unseen)
    for name, values in unseen.items():
        print(
            f"score.py: warning: column {name!r} has categories not seen at fit, scored as "
            f"missing: {sorted(values)[:5]!r}",
            file=sys.stderr,
        )
    return encoded


def write_predictions(stream, model: NeuMissOnnxModel, outputs: dict[str, np.ndarray]) -> None:
    """Write the predictions as CSV: ``prediction`` (with ``lower`` and ``upper`` for an
    interval model), or ``label`` and ``proba_<class>``.

    Numbers are written with the shortest text that reads back to the same
    float64 (``y``) or float32 (probabilities).
    """
    writer = csv.writer(stream, lineterminator="\n")
    if model.task == "regression":
        bounds = [outputs[k] for k in ("lower", "upper") if k in outputs]
        writer.writerow(["prediction", *(("lower", "upper") if bounds else ())])
        writer.writerows([str(v) for v in row] for row in zip(outputs["y"], *bounds))
        return
    writer.writerow(["label", *(f"proba_{c}" for c in model.classes)])
    for label, proba in zip(outputs["label"], outputs["probabilities"], strict=True):
        writer.writerow([label, *(str(p) for p in proba)])


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
