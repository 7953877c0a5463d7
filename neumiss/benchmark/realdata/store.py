"""``runs.csv`` of the real-data suite: one row per (task, method, repeat, fold).

Rows are appended and flushed as folds finish (with
:class:`neumiss.benchmark.store.RunsWriter`); on start, the runs already there
are skipped, so rerunning a command resumes it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

from ..store import remove_incomplete_last_line
from .protocol import METRICS


class RealRun(NamedTuple):
    """One fit: a method on one fold of one repeat of a task. The resume key of ``runs.csv``."""

    task: str
    method: str
    repeat: int
    fold: int
    seed: int

    @classmethod
    def from_row(cls, row: dict) -> RealRun:
        """The run of a ``runs.csv`` row (strings as read from the file)."""
        return cls(str(row["task"]), str(row["method"]), int(row["repeat"]), int(row["fold"]),
                   int(row["seed"]))

    def describe(self) -> str:
        """A one-line label, for progress and error messages."""
        return f"{self.task} {self.method} repeat={self.repeat} fold={self.fold}"


#: Columns of ``runs.csv``: the key, the task's size, the fold, the metrics, the fit.
#: ``missing_share``: share of missing feature cells in the task; ``test_digest``: a
#: hash of the fold's test rows (equal for every method); ``config``: the method's
#: settings (JSON); ``params``: what the fit chose and its warnings (JSON).
COLUMNS = RealRun._fields + (
    "kind", "n_rows", "n_features", "missing_share", "n_train", "n_test", "test_digest",
    *METRICS, "fit_seconds", "threads", "config", "params", "finished_at",
)
RUNS_FILE = "runs.csv"


def read_runs(path) -> list[dict]:
    """Rows of a real-data ``runs.csv`` (strings); [] when there is none.

    A last line cut short by a killed writer is removed. Raises ``ValueError``
    for other columns, or naming the line of a row whose key is not valid.
    """
    path = Path(path)
    if not path.exists():
        return []
    remove_incomplete_last_line(path)
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return []
        if tuple(reader.fieldnames) != COLUMNS:
            raise ValueError(
                f"{path} has columns {reader.fieldnames}, expected {list(COLUMNS)}; it was not "
                "written by this version of the real-data suite: use another --out"
            )
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        try:
            RealRun.from_row(row)
        except ValueError as error:
            raise ValueError(f"{path}, line {line}: {error}; fix or remove that line") from None
    return rows
