"""Running the interval benchmark: one simulated data set per cell and repeat.

Below :data:`~neumiss.intervals.CROSS_ROWS` training rows (the small-table
regime, e.g. ``--n-train 100 200 500``), ``"cqr-mondrian"`` is fitted as its default
``cv="auto"`` fits it, by CV+ (every row calibrating); the other methods keep a split
(``"split"`` with ``cv=None``: the baseline as published).

A run draws ``n_train`` rows of the paper's simulation (d features, linear
response, SNR 10) under one mechanism and missing rate, fits the conformal
methods (:data:`METHODS`) at ``alpha``, and scores them on ``n_test`` fresh
rows against the oracle interval (:meth:`neumiss.simulation.SimulationTruth.oracle_interval`).
Results are kept per number of missing entries: ``runs.csv`` gets one row per
run, method and count ``q`` of missing entries, with the test rows of that
group, how many intervals covered ``y``, and the summed widths of the method's
and the oracle's intervals (so that groups can be pooled at report time).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._processes import finished_futures, limited_threads
from .._store import RUNS_FILE, RunsWriter, read_rows

#: Methods compared: ConformalRegressor methods, and the oracle itself.
METHODS = ("split", "cqr", "cqr-mda-exact", "cqr-mda-nested", "cqr-mondrian", "oracle")
#: The issue's grid.
MECHANISMS = ("MCAR", "gaussian_sm")
MISSING_RATES = (0.2, 0.5)
N_TRAIN = (10_000, 100_000)
N_FEATURES = 10
N_TEST = 20_000
ALPHA = 0.1
#: Base models: the estimators' defaults, but one network (CPU time of the benchmark).
BASE_PARAMS = {"ensemble_size": 1}
#: Baselines run as published, with the usual conformal rank (``calibration_confidence=None``);
#: ``"cqr-mondrian"`` runs with the default ``calibration_confidence``.
USUAL_RANK = ("split", "cqr")

KEY_COLUMNS = ("mechanism", "missing_rate", "n_train", "repeat")
COLUMNS = (*KEY_COLUMNS, "method", "n_missing", "n_rows", "n_covered", "width_sum",
           "oracle_width_sum", "fit_seconds", "predict_seconds")


class IntervalRun(NamedTuple):
    """One data set of the benchmark."""

    mechanism: str
    missing_rate: float
    n_train: int
    repeat: int

    def key(self) -> tuple[str, str, str, str]:
        """The run as its ``runs.csv`` key columns (strings)."""
        return (self.mechanism, repr(float(self.missing_rate)), str(self.n_train),
                str(self.repeat))

    def seed(self, base: int) -> int:
        """A seed of its own for every run, the same whatever else is run."""
        index = (MECHANISMS.index(self.mechanism) if self.mechanism in MECHANISMS else 9,
                 int(round(self.missing_rate * 100)), self.n_train, self.repeat)
        return int(np.random.SeedSequence([base, *index]).generate_state(1)[0])


def plan(mechanisms=MECHANISMS, missing_rates=MISSING_RATES, n_train=N_TRAIN,
         repeats: int = 1) -> list[IntervalRun]:
    """Every run of the grid, smallest first."""
    return [IntervalRun(m, float(r), int(n), k) for n in sorted(n_train) for m in mechanisms
            for r in missing_rates for k in range(repeats)]


def read_interval_runs(path) -> list[dict]:
    """Rows of an interval ``runs.csv`` (strings); [] when there is none."""

    def check(row):
        if row["method"] not in METHODS:
            raise ValueError(f"unknown method {row['method']!r}")
        int(row["n_rows"]), int(row["n_covered"]), float(row["width_sum"])

    return read_rows(path, COLUMNS, check, "interval benchmark")


def simulate(run: IntervalRun, seed: int, n_test: int, n_features: int) -> tuple:
    """The run's rows, drawn from its seed: ``X`` (n_train, d) with NaN, ``y``, the
    simulation's ``truth``, ``n_test`` test rows ``X_test``, ``y_test``, and the seed of
    the models fitted on them (drawn next from the same stream)."""
    from ...simulation import make_regression

    rng = np.random.default_rng(run.seed(seed))
    X, y, truth = make_regression(run.n_train, n_features, mechanism=run.mechanism,
                                  missing_rate=run.missing_rate, random_state=rng)
    X_test, y_test = truth.sample(n_test, random_state=rng)
    return X, y, truth, X_test, y_test, int(rng.integers(2**31 - 1))


def execute_run(run: IntervalRun, seed: int = 0, n_test: int = N_TEST,
                n_features: int = N_FEATURES, alpha: float = ALPHA,
                base_params: dict | None = None) -> list[dict]:
    """Simulate, fit and score one run; its ``runs.csv`` rows."""
    from ...estimators import NeuMissQuantileRegressor, NeuMissRegressor
    from ...intervals import CROSS_ROWS, ConformalRegressor

    params = dict(BASE_PARAMS if base_params is None else base_params)
    X, y, truth, X_test, y_test, model_seed = simulate(run, seed, n_test, n_features)
    oracle = truth.oracle_interval(X_test, alpha)
    intervals, fit_seconds, predict_seconds = {"oracle": oracle}, {"oracle": 0.0}, {}

    start = time.perf_counter()
    split = ConformalRegressor(NeuMissRegressor(**params), method="split", alpha=alpha,
                               calibration_confidence=None, cv=None,
                               random_state=model_seed).fit(X, y)
    fit_seconds["split"] = time.perf_counter() - start
    # One quantile head serves the CQR methods: they share the split, the base
    # model, the calibration scores and rows, and differ only in predict_interval.
    start = time.perf_counter()
    levels = (alpha / 2, 0.5, 1 - alpha / 2)
    cqr = ConformalRegressor(NeuMissQuantileRegressor(levels, **params), method="cqr-mda-exact",
                             alpha=alpha, random_state=model_seed).fit(X, y)
    seconds = time.perf_counter() - start
    confidence = cqr.calibration_confidence
    if run.n_train < CROSS_ROWS:  # small tables: "cqr-mondrian" as cv="auto" fits it (CV+)
        start = time.perf_counter()
        cross = ConformalRegressor(NeuMissQuantileRegressor(levels, **params), alpha=alpha,
                                   random_state=model_seed).fit(X, y)
        fit_seconds["cqr-mondrian"] = time.perf_counter() - start
    for method in METHODS[:-1]:
        model = split if method == "split" else cqr.set_params(
            method=method, calibration_confidence=None if method in USUAL_RANK else confidence)
        if method == "cqr-mondrian" and run.n_train < CROSS_ROWS:
            model = cross
        fit_seconds.setdefault(method, seconds)
        start = time.perf_counter()
        intervals[method] = model.predict_interval(X_test)
        predict_seconds[method] = time.perf_counter() - start
    predict_seconds["oracle"] = 0.0
    return _rows(run, intervals, y_test, np.isnan(X_test).sum(axis=1), fit_seconds,
                 predict_seconds)


def _rows(run, intervals, y, n_missing, fit_seconds, predict_seconds) -> list[dict]:
    """Per method and number of missing entries: rows, covered, width sums."""
    oracle_width = intervals["oracle"][:, 1] - intervals["oracle"][:, 0]
    rows = []
    for method, bounds in intervals.items():
        covered = (y >= bounds[:, 0]) & (y <= bounds[:, 1])
        width = bounds[:, 1] - bounds[:, 0]
        for q in np.unique(n_missing):
            group = n_missing == q
            rows.append(dict(zip(KEY_COLUMNS, run.key())) | {
                "method": method, "n_missing": int(q), "n_rows": int(group.sum()),
                "n_covered": int(covered[group].sum()),
                "width_sum": repr(float(width[group].sum())),
                "oracle_width_sum": repr(float(oracle_width[group].sum())),
                "fit_seconds": f"{fit_seconds[method]:.2f}",
                "predict_seconds": f"{predict_seconds[method]:.2f}",
            })
    return rows


class Task(NamedTuple):
    """What the suite runs: intervals (:data:`REGRESSION`) or prediction sets
    (:data:`~._classes.CLASSIFICATION`): one run's rows, and where they are kept."""

    execute: Callable[..., list[dict]]
    runs_file: str
    columns: tuple[str, ...]
    read: Callable[[Path], list[dict]]


REGRESSION = Task(execute_run, RUNS_FILE, COLUMNS, read_interval_runs)


def _execute_with_threads(run: IntervalRun, seed: int, n_test: int, threads: int | None,
                          execute: Callable[..., list[dict]] = execute_run) -> list[dict]:
    """The run's rows (``execute``: :func:`execute_run` or its classification twin) with
    ``threads`` threads for torch and the BLAS/OpenMP pools (None: as the process has
    them)."""
    with contextlib.nullcontext() if threads is None else limited_threads(threads):
        return execute(run, seed=seed, n_test=n_test)


def _finished(todo: list[IntervalRun], seed: int, n_test: int, jobs: int,
              threads: int | None, task: Task) -> Iterator[tuple[IntervalRun, list[dict]]]:
    """``(run, its rows)`` as runs finish: in this process, or in ``jobs`` worker
    processes (:func:`~neumiss.benchmark._processes.finished_futures`)."""
    if jobs == 1:
        for run in todo:
            yield run, _execute_with_threads(run, seed, n_test, threads, task.execute)
        return
    calls = {run: (run, seed, n_test, threads, task.execute) for run in todo}
    for run, future in finished_futures(_execute_with_threads, calls, jobs):
        yield run, future.result()


def run_intervals(runs: list[IntervalRun], out: Path, *, seed: int = 0, n_test: int = N_TEST,
                  progress: bool = True, jobs: int = 1, threads: int | None = None,
                  task: Task = REGRESSION) -> tuple[int, int]:
    """Run what ``out/runs.csv`` (``task.runs_file``: ``classes_runs.csv`` for prediction
    sets) lacks, ``jobs`` runs at a time (each in a worker process when more than one), each
    with ``threads`` threads (None: the process's); return (runs computed, runs
    skipped). A run's rows are written when it finishes, so an interrupted benchmark
    resumes where it stopped; the rows do not depend on ``jobs``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / task.runs_file
    done = {tuple(row[c] for c in KEY_COLUMNS) for row in task.read(path)}
    todo = [run for run in runs if run.key() not in done]
    writer = RunsWriter(path, task.columns)
    try:
        for k, (run, rows) in enumerate(_finished(todo, seed, n_test, jobs, threads, task),
                                        start=1):
            for row in rows:
                writer.write(row)
            if progress:
                print(f"[{k}/{len(todo)}] {run.mechanism} {run.missing_rate:.0%} missing, "
                      f"n_train={run.n_train}, repeat {run.repeat}: done", flush=True)
    finally:
        writer.close()
    return len(todo), len(runs) - len(todo)
