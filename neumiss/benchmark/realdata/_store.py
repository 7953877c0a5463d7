"""``runs.csv`` of the real-data suite: one row per (task, method, repeat, fold).

Rows are appended and flushed as folds finish (with
:class:`neumiss.benchmark._store.RunsWriter`); on start, the runs already there
are skipped, so rerunning a command resumes it.
"""

from __future__ import annotations

from typing import NamedTuple

from .._store import read_rows
from ._protocol import METRICS


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
    """Rows of a real-data ``runs.csv`` (see :func:`neumiss.benchmark._store.read_rows`):
    a row's key must be valid."""
    return read_rows(path, COLUMNS, RealRun.from_row, "real-data suite")
