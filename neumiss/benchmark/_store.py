"""``runs.csv``, the benchmark's record: one row per finished run.

Rows are appended and flushed to disk as runs finish; on start, runs already
there (same method, mechanism, ``d``, ``n_train``, ``n_val``, ``n_test``,
repeat and seed) are skipped, so a killed benchmark restarted with the same
command only computes what is missing.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

from ._data import RunSpec

#: Columns identifying a run (the resume key), then its results, in ``runs.csv``.
KEY_COLUMNS = RunSpec._fields
RESULT_COLUMNS = (
    "r2",
    "bayes_r2",
    "r2_minus_bayes",
    "fit_seconds",
    "peak_memory_mb",
    "threads",
    "params",
    "finished_at",
)
COLUMNS = KEY_COLUMNS + RESULT_COLUMNS
RUNS_FILE = "runs.csv"


def remove_incomplete_last_line(path: Path) -> None:
    """Cut a last line that does not end with a newline (a writer killed mid-row) off ``path``."""
    with open(path, "rb+") as handle:
        content = handle.read()
        if content and not content.endswith(b"\n"):
            keep = content.rfind(b"\n") + 1
            handle.truncate(keep)
            print(
                f"{path}: removed an incomplete last line (a run interrupted while writing)",
                file=sys.stderr,
            )


def read_rows(path, columns, check_row, suite: str, hint: str = "") -> list[dict]:
    """Rows of a runs file (strings), after checking its columns; [] when there is none.

    A last line cut short by a killed writer is removed from the file.
    ``check_row(row)`` raises ``ValueError`` for a bad row. Raises ``ValueError``
    for other columns (naming ``suite``), or naming the file and line of a bad
    row, with ``hint`` appended.
    """
    path = Path(path)
    if not path.exists():
        return []
    remove_incomplete_last_line(path)
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return []
        if tuple(reader.fieldnames) != tuple(columns):
            raise ValueError(
                f"{path} has columns {reader.fieldnames}, expected {list(columns)}; "
                f"it was not written by this version of the {suite}: use another --out"
            )
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        try:
            check_row(row)
        except ValueError as error:
            raise ValueError(
                f"{path}, line {line}: {error}{hint}; fix or remove that line"
            ) from None
    return rows


def _check_run_row(row: dict) -> None:
    RunSpec.from_row(row)
    float(row["bayes_r2"])


def read_runs(path) -> list[dict]:
    """Rows of a ``runs.csv`` of the simulated grid (see :func:`read_rows`): a row's
    key and Bayes rate must be numbers."""
    return read_rows(path, COLUMNS, _check_run_row, "benchmark",
                     " (missing numbers are written 'nan')")


class RunsWriter:
    """Appends rows to a runs file (writing the header if the file is new or empty),
    each flushed to disk before the next run. ``columns``: the file's columns,
    those of this benchmark's ``runs.csv`` by default."""

    def __init__(self, path: Path, columns: tuple[str, ...] = COLUMNS):
        new = not path.exists() or path.stat().st_size == 0
        self._handle = open(path, "a", newline="")
        # "\n" line ends, as the committed results files have (csv's default is "\r\n")
        self._writer = csv.DictWriter(self._handle, fieldnames=columns, lineterminator="\n")
        if new:
            self._writer.writeheader()
            self._sync()

    def write(self, row: dict) -> None:
        """Append ``row`` (a dict with the file's columns as keys) and flush it to disk."""
        self._writer.writerow(row)
        self._sync()

    def _sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the file."""
        self._handle.close()
