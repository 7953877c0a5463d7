"""Running the real-data suite: every (task, method, repeat, fold), timed, into ``runs.csv``.

Runs execute in a pool of ``jobs`` worker processes (each loads a task's data
once and reuses it), or in this process (``in_process=True``, for tests and
debugging). Each fit runs with ``threads`` threads (torch and the BLAS/OpenMP
pools), one by default; NeuMiss methods warm torch up once per process before
their first timed fit. Rows already in ``runs.csv`` are skipped.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sys
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...checks import Integer, check_params
from .._processes import finished_futures, limited_threads
from .._store import RunsWriter
from ._cache import DEFAULT_CACHE, load_task
from ._methods import RealMethod, fitted_info, predict
from ._protocol import DEFAULT_REPEATS, N_FOLDS, fold_indices, method_seed, score
from ._report import write_report
from ._store import COLUMNS, RUNS_FILE, RealRun, read_runs
from ._tasks import Task

#: Data of the tasks this process has loaded: (task name, cache) -> (X, y).
_LOADED: dict = {}
#: Whether this process has already run a NeuMiss fit (torch's one-time set-up).
_TORCH_WARM = []


def plan(
    tasks: Sequence[Task], methods: Sequence[RealMethod], *, repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
) -> list[RealRun]:
    """Every run, repeat by repeat and fold by fold (a partial run covers every task early);
    a method only on the kinds of task it handles."""
    check_params("plan", {"repeats": repeats, "seed": seed},
                 {"repeats": Integer(1), "seed": Integer(0)})
    return [
        RealRun(task.name, method.name, repeat, fold, seed)
        for repeat in range(repeats)
        for fold in range(N_FOLDS)
        for task in tasks
        for method in methods
        if task.kind in method.kinds
    ]


def _load(task: Task, cache) -> tuple:
    """``load_task(task, cache)``, loaded once per process."""
    key = (task.name, str(cache))
    if key not in _LOADED:
        _LOADED[key] = load_task(task, cache)
    return _LOADED[key]


def _warm_up_torch() -> None:
    """One tiny NeuMiss fit per process, so that torch's set-up is not timed."""
    if not _TORCH_WARM:
        from .._methods import _warm_up_torch as warm_up

        warm_up()
        _TORCH_WARM.append(True)


def execute_run(
    run: RealRun, task: Task, method: RealMethod, cache=DEFAULT_CACHE, threads: int = 1
) -> dict:
    """Fit ``method`` on the training rows of ``run``'s fold, score its test rows.

    Returns
    -------
    dict with the keys of :data:`COLUMNS`.
    """
    X, y = _load(task, cache)
    train, test = fold_indices(y, task.kind, run.repeat, run.seed)[run.fold]
    with limited_threads(threads):
        if method.torch:
            _warm_up_torch()
        estimator = method.build(task.kind, method_seed(run.seed, run.repeat, run.fold))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model = estimator.fit(X.iloc[train], y[train])
            fit_seconds = time.perf_counter() - start
            prediction = predict(model, task.kind, X.iloc[test])
    params = fitted_info(model)
    if caught:
        params["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:200] for w in caught})
    return {
        **run._asdict(),
        "kind": task.kind,
        "n_rows": len(y),
        "n_features": X.shape[1],
        "missing_share": round(float(X.isna().to_numpy().mean()), 5),
        "n_train": len(train),
        "n_test": len(test),
        "test_digest": hashlib.sha1(np.sort(test).astype(np.int64).tobytes()).hexdigest()[:12],
        **score(task.kind, y[test], prediction),
        "fit_seconds": fit_seconds,
        "threads": threads,
        "config": method.config_json(),
        "params": json.dumps(params, sort_keys=True),
        "finished_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _execute_catching_errors(run, task, method, cache, threads) -> tuple[str, object]:
    """:func:`execute_run` as ``("ok", row)``, or ``("error", traceback)`` when it raises."""
    try:
        return "ok", execute_run(run, task, method, cache, threads)
    except Exception:  # one failed fold must not stop the suite
        return "error", traceback.format_exc()


def _outcomes(
    runs: Sequence[RealRun], tasks: dict, methods: dict, cache, threads: int, jobs: int,
    in_process: bool,
) -> Iterator[tuple[RealRun, tuple[str, object]]]:
    """``(run, outcome)`` pairs as runs finish, in this process or in ``jobs`` workers."""
    def arguments(run):
        return run, tasks[run.task], methods[run.method], cache, threads

    if in_process:
        for run in runs:
            yield run, _execute_catching_errors(*arguments(run))
        return
    calls = {run: arguments(run) for run in runs}
    for run, future in finished_futures(_execute_catching_errors, calls, jobs):
        try:
            yield run, future.result()
        except Exception as error:  # the worker process died
            yield run, ("error", f"the worker process failed: {error!r}")


@dataclass
class SuiteResult:
    """What :func:`run_suite` did: counts of runs and the failures' tracebacks."""

    out: Path
    n_computed: int
    n_skipped: int
    failures: list[tuple[RealRun, str]]


def _check_configs(finished: list[dict], methods: Sequence[RealMethod], path: Path) -> None:
    """ValueError when a method already in ``path`` was run with another config."""
    recorded = {row["method"]: row["config"] for row in finished}
    for method in methods:
        config = recorded.get(method.name)
        if config is not None and config != method.config_json():
            raise ValueError(
                f"method {method.name!r} is in {path} with config {config}, not "
                f"{method.config_json()}: give this configuration another label, or use "
                "another --out"
            )


def run_suite(
    tasks: Sequence[Task],
    methods: Sequence[RealMethod],
    out,
    *,
    cache=DEFAULT_CACHE,
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
    jobs: int = 1,
    threads: int = 1,
    progress: bool = True,
    in_process: bool = False,
) -> SuiteResult:
    """Run the folds not yet in ``out/runs.csv``, append their rows, rebuild the report.

    Parameters
    ----------
    tasks, methods : sequences of Task and RealMethod
    out : path
        Folder of ``runs.csv``, ``summary.md`` and ``figure.png`` (created if needed).
    cache : path
        The exported data sets (see :mod:`._cache`); every task is loaded here
        first, so a missing data set stops the suite before any fit.
    repeats, seed : int
        Cross-validation repeats, base seed of the folds and of the methods.
    jobs : int
        Worker processes. With more jobs than free cores the fit seconds
        measure contention too.
    threads : int
        Threads per fit.
    progress : bool
        A tqdm progress bar on stderr.
    in_process : bool
        Run in this process, one after the other (for tests and debugging).

    Returns
    -------
    SuiteResult
    """
    from tqdm.auto import tqdm

    check_params("run_suite", {"jobs": jobs, "threads": threads},
                 {"jobs": Integer(1), "threads": Integer(1)})
    out = Path(out)
    for task in tasks:  # fail early, with the setup hint, when the cache is incomplete
        _load(task, cache)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / RUNS_FILE
    finished = read_runs(runs_path)
    _check_configs(finished, methods, runs_path)
    done = {RealRun.from_row(row) for row in finished}
    runs = plan(tasks, methods, repeats=repeats, seed=seed)
    todo = [run for run in runs if run not in done]
    outcomes = _outcomes(
        todo, {t.name: t for t in tasks}, {m.name: m for m in methods}, cache, threads, jobs,
        in_process,
    )
    failures = []
    writer = RunsWriter(runs_path, COLUMNS)
    bar = tqdm(total=len(todo), desc="real-data suite", unit="fit", disable=not progress)
    try:
        for run, (status, value) in outcomes:
            if status == "ok":
                writer.write(value)
                metric = "r2" if value["kind"] == "regression" else "log_loss"
                bar.set_postfix_str(f"{run.describe()}: {metric} {value[metric]:.4f} in "
                                    f"{value['fit_seconds']:.1f} s")
            else:
                failures.append((run, value))
                bar.write(f"FAILED {run.describe()}:\n{value}", file=sys.stderr)
            bar.update()
    finally:
        outcomes.close()
        bar.close()
        writer.close()
    if read_runs(runs_path):
        write_report(out)
    return SuiteResult(out, len(todo) - len(failures), len(runs) - len(todo), failures)
