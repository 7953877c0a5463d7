"""Prediction sets on the development suite's binary tasks (``neumiss benchmark --suite
intervals --classification --real``): real tables with their real missing values.

Each binary task of :mod:`neumiss.benchmark.realdata` is cross-validated as the
real-data suite does (its folds, stratified, and its per-fold seeds): on each fold's
training rows :func:`~._classes.conformal_sets` fits ``ConformalClassifier`` over one
NeuMiss classifier (and MAPIE's LAC where MAPIE is installed, ``mapie-lac-mice`` over the
suite's dummy-coded ``mice_linear``), and the sets are scored on the fold's test rows
per number of missing entries. There is no oracle: coverage and set size only.
``real_classes_runs.csv`` gets one row per task, repeat, fold, method and number of
missing entries, written when a task's repeat ends (a rerun resumes there);
``real_classes_summary.md`` pools the folds and repeats of each task.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from pathlib import Path

import numpy as np

from .._processes import limited_threads
from .._store import RunsWriter, read_rows
from ._classes import METHODS, MIN_GROUP_ROWS, check_set_row, conformal_sets, set_rows
from ._runner import ALPHA, BASE_PARAMS

RUNS_FILE = "real_classes_runs.csv"
SUMMARY_FILE = "real_classes_summary.md"
#: Cross-validation repeats of the suite by default (each of 5 folds).
REPEATS = 1
KEY_COLUMNS = ("task", "repeat", "fold")
COLUMNS = (*KEY_COLUMNS, "method", "n_missing", "n_rows", "n_covered", "size_sum", "n_empty",
           "fit_seconds")


def binary_tasks(names=None, half: str | None = None) -> list:
    """The suite's binary tasks among ``names`` (None: all), of ``half`` (None: both)."""
    from ..realdata._tasks import select_tasks

    return [task for task in select_tasks(names, half) if task.kind == "binary"]


def execute_task(task, cache, repeat: int, seed: int = 0, alpha: float = ALPHA,
                 base_params: dict | None = None) -> list[dict]:
    """The ``real_classes_runs.csv`` rows of the folds of one repeat of ``task``
    (loaded from ``cache``)."""
    from ..realdata._cache import load_task
    from ..realdata._methods import METHODS as REAL_METHODS
    from ..realdata._protocol import fold_indices, method_seed

    params = dict(BASE_PARAMS if base_params is None else base_params)
    X, y = load_task(task, cache)
    n_missing = X.isna().sum(axis=1).to_numpy()
    rows = []
    for fold, (train, test) in enumerate(fold_indices(y, "binary", repeat, seed)):
        fold_seed = method_seed(seed, repeat, fold)
        imputed = REAL_METHODS["mice_linear"].build("binary", fold_seed)
        sets, seconds = conformal_sets(X.iloc[train], y[train], X.iloc[test], fold_seed,
                                       alpha, params, imputed)
        key = {"task": task.name, "repeat": repeat, "fold": fold}
        rows += [key | row for row in set_rows(sets, y[test], n_missing[test], seconds)]
    return rows


def read_real_classes_runs(path) -> list[dict]:
    """Rows of a ``real_classes_runs.csv`` (strings); [] when there is none."""
    return read_rows(path, COLUMNS, check_set_row, "interval benchmark (real binary tasks)")


def run_real_classes(tasks: list, out: Path, cache, *, repeats: int = REPEATS, seed: int = 0,
                     threads: int | None = 1, progress: bool = True) -> tuple[int, int]:
    """Run the repeats of ``tasks`` that ``out/real_classes_runs.csv`` lacks, in this
    process with ``threads`` threads (None: the process's); return (task repeats
    computed, task repeats skipped)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUNS_FILE
    done = {(row["task"], row["repeat"]) for row in read_real_classes_runs(path)}
    todo = [(task, k) for task in tasks for k in range(repeats)
            if (task.name, str(k)) not in done]
    writer = RunsWriter(path, COLUMNS)
    try:
        with contextlib.nullcontext() if threads is None else limited_threads(threads):
            for count, (task, repeat) in enumerate(todo, start=1):
                for row in execute_task(task, cache, repeat, seed):
                    writer.write(row)
                if progress:
                    print(f"[{count}/{len(todo)}] {task.name}, repeat {repeat}: done",
                          flush=True)
    finally:
        writer.close()
    return len(todo), len(tasks) * repeats - len(todo)


def summarize_real_classes(rows: list[dict]) -> dict:
    """``{task: {method: stats}}`` pooled over the folds and repeats: ``rows``,
    ``coverage``, ``size`` (mean set size), ``empty`` (share of empty sets) and
    ``lowest_group``: the lowest coverage among the groups of rows with the same number
    of missing entries holding at least :data:`~._classes.MIN_GROUP_ROWS` rows per
    repeat (NaN where none does)."""
    totals = defaultdict(lambda: np.zeros(4))  # (task, method): rows, covered, size, empty
    groups = defaultdict(lambda: np.zeros(2))  # (task, method, q): rows, covered
    repeats = defaultdict(set)
    for row in rows:
        key = (row["task"], row["method"])
        counts = [int(row[c]) for c in ("n_rows", "n_covered", "size_sum", "n_empty")]
        totals[key] += counts
        groups[(*key, int(row["n_missing"]))] += counts[:2]
        repeats[row["task"]].add(row["repeat"])
    summary = defaultdict(dict)
    for (task, method), (n, covered, size, empty) in totals.items():
        big = [c / r for (t, m, _), (r, c) in groups.items()
               if (t, m) == (task, method) and r / len(repeats[task]) >= MIN_GROUP_ROWS]
        summary[task][method] = {"rows": int(n) // len(repeats[task]), "coverage": covered / n,
                                 "size": size / n, "empty": empty / n,
                                 "lowest_group": min(big, default=np.nan)}
    return summary


def format_real_classes_summary(summary: dict, alpha: float = ALPHA) -> str:
    """``real_classes_summary.md``: one table, a line per task and method."""
    lines = [
        "# Prediction sets on the development suite's binary tasks", "",
        f"alpha = {alpha} (target coverage {1 - alpha:.2f}); each task cross-validated "
        "(5 folds, the real-data suite's), pooled over the folds and repeats; lowest "
        "group: the lowest coverage among the groups of rows with the same number of "
        f"missing entries holding >= {MIN_GROUP_ROWS} rows (- where none does).", "",
        "| task | rows | method | coverage | lowest group | set size | empty |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in sorted(summary):
        for method in [name for name in METHODS if name in summary[task]]:
            stats = summary[task][method]
            group = "-" if np.isnan(stats["lowest_group"]) else f"{stats['lowest_group']:.3f}"
            lines.append(f"| {task} | {stats['rows']} | {method} | {stats['coverage']:.3f} "
                         f"| {group} | {stats['size']:.3f} | {stats['empty']:.3f} |")
    return "\n".join(lines) + "\n"


def write_real_classes_report(out: Path) -> list[Path]:
    """Write ``real_classes_summary.md`` from ``out/real_classes_runs.csv``; the paths
    written."""
    path = out / SUMMARY_FILE
    path.write_text(format_real_classes_summary(summarize_real_classes(
        read_real_classes_runs(out / RUNS_FILE))))
    return [path]
