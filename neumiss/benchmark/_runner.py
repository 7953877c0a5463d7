"""Running the benchmark: each run in a child process, its time and memory, ``runs.csv``.

* **Isolation and memory**: each run executes in a fresh child process
  (``forkserver`` where available, else ``spawn``). The child simulates its
  data, resets the kernel's resident-set high-water mark
  (``/proc/self/clear_refs``), fits, and reports ``VmHWM`` minus the resident
  size just before the fit: the extra memory the fit needed, whoever allocated
  it (numpy, torch, R). One-time runtime set-up (torch's first fit, starting
  R) is done before the reset, untimed. Linux only; NaN elsewhere.
* **Threads**: each fit runs with ``threads`` threads (torch and the
  BLAS/OpenMP pools); one by default (see results/README.md).
* **Resume**: runs already in ``runs.csv`` are skipped (see :mod:`._store`);
  the Bayes rate of a data set already seen is passed on, not recomputed.
"""

from __future__ import annotations

import datetime
import gc
import json
import math
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from ..checks import Integer, check_params
from ._data import RunSpec, bayes_rate, simulate_run
from ._methods import METHODS, RunSettings, r2_of
from ._processes import limited_threads, worker_context
from ._report import write_report
from ._store import RUNS_FILE, RunsWriter, read_runs

#: What a run gives back: ``("ok", its runs.csv row)`` or ``("error", traceback text)``.
Outcome = tuple[str, object]


def _proc_status_kb(field: str) -> float:
    """The value (kB) of ``field`` in ``/proc/self/status``; OSError if absent."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def _reset_peak_memory() -> float | None:
    """Reset the resident-set high-water mark; return the current resident size (kB).

    None when the platform cannot do it (no ``/proc/self/clear_refs``).
    """
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return _proc_status_kb("VmRSS")
    except OSError:
        return None


def _peak_memory_mb(baseline_kb: float | None) -> float:
    """Peak resident size since :func:`_reset_peak_memory`, minus its baseline, in MB."""
    if baseline_kb is None:
        return math.nan
    return max(0.0, _proc_status_kb("VmHWM") - baseline_kb) / 1024.0


def execute_run(spec: RunSpec, settings: RunSettings, bayes_r2: float | None = None) -> dict:
    """Simulate the data of ``spec``, fit its method, and return its ``runs.csv`` row.

    Parameters
    ----------
    spec : RunSpec
    settings : RunSettings
    bayes_r2 : float or None
        The data set's Bayes rate when already known (it is the same for every
        method); computed when None.

    Returns
    -------
    dict with the keys of :data:`~neumiss.benchmark._store.COLUMNS`.
    """
    method = METHODS[spec.method]
    data = simulate_run(spec)
    if bayes_r2 is None:
        bayes_r2 = bayes_rate(spec, data)
    with limited_threads(settings.threads):
        if method.warm_up is not None:
            method.warm_up()
        gc.collect()
        baseline = _reset_peak_memory()
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, params = method.fit(data, settings)
        fit_seconds = time.perf_counter() - start
        peak_mb = _peak_memory_mb(baseline)
        r2 = r2_of(model, data.X_test, data.y_test)
    if caught:  # recorded with the run rather than printed over the progress bar
        params["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:200] for w in caught})
    return {
        **spec._asdict(),
        "r2": r2,
        "bayes_r2": bayes_r2,
        "r2_minus_bayes": r2 - bayes_r2,
        "fit_seconds": fit_seconds,
        "peak_memory_mb": peak_mb,
        "threads": settings.threads,
        "params": json.dumps(params, sort_keys=True),
        "finished_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _execute_catching_errors(
    spec: RunSpec, settings: RunSettings, bayes_r2: float | None
) -> Outcome:
    """:func:`execute_run`, its exception turned into an ``("error", traceback)`` outcome."""
    try:
        return "ok", execute_run(spec, settings, bayes_r2)
    except Exception:  # one failed run must not stop the benchmark
        return "error", traceback.format_exc()


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _child_main(spec, settings, bayes_r2, connection) -> None:
    """Entry point of a run's child process: send the outcome back through ``connection``.

    Ctrl-C reaches the whole process group: the child ignores it, and the
    parent, which handles it, stops the child with SIGTERM, on which the child
    exits quietly (through ``SystemExit``, so that its semaphores and other
    resources are released). A parent gone before the outcome is sent (its end
    of the pipe closed) ends the child quietly too, without a traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        outcome = _execute_catching_errors(spec, settings, bayes_r2)
        try:
            connection.send(outcome)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            pass  # the parent was stopped: nobody is waiting for this run
    finally:
        connection.close()


def _execute_isolated(
    specs: Iterable[RunSpec],
    settings: RunSettings,
    bayes_lookup: Callable[[RunSpec], float | None],
    jobs: int,
) -> Iterator[tuple[RunSpec, Outcome]]:
    """Run each spec in its own child process, up to ``jobs`` at a time.

    Yields ``(spec, outcome)`` as runs finish. ``bayes_lookup`` is asked when a
    run starts, so a Bayes rate computed by an earlier run is reused.
    """
    # this module and torch imported once, by the server, not by every run
    context = worker_context(preload=(__name__, "neumiss.network"))
    pending = iter(specs)
    running = {}  # receiving connection -> (process, spec)
    try:
        while True:
            while len(running) < jobs:
                spec = next(pending, None)
                if spec is None:
                    break
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_child_main,
                    args=(spec, settings, bayes_lookup(spec), sender),
                    name=f"neumiss-benchmark {spec.describe()}",
                )
                process.start()
                sender.close()
                running[receiver] = (process, spec)
            if not running:
                return
            for receiver in wait(list(running)):
                process, spec = running.pop(receiver)
                try:
                    outcome = receiver.recv()
                except EOFError:
                    process.join()
                    outcome = ("error", f"the run's process died (exit code {process.exitcode})")
                receiver.close()
                process.join()
                yield spec, outcome
    finally:
        for process, _ in running.values():
            process.terminate()
            process.join()


def _execute_in_process(
    specs: Iterable[RunSpec],
    settings: RunSettings,
    bayes_lookup: Callable[[RunSpec], float | None],
) -> Iterator[tuple[RunSpec, Outcome]]:
    """Run the specs one after the other in this process (no memory isolation);
    yields ``(spec, outcome)``."""
    for spec in specs:
        yield spec, _execute_catching_errors(spec, settings, bayes_lookup(spec))


@dataclass
class BenchmarkResult:
    """What :func:`run_benchmark` did: counts of runs and the failures' tracebacks."""

    out: Path
    n_computed: int
    n_skipped: int
    failures: list[tuple[RunSpec, str]]


def run_benchmark(
    specs: Sequence[RunSpec],
    out,
    *,
    settings: RunSettings | None = None,
    jobs: int = 1,
    progress: bool = True,
    in_process: bool = False,
    tracebacks: bool = False,
) -> BenchmarkResult:
    """Run the specs not yet in ``out/runs.csv``, append their rows, then rebuild the report.

    Parameters
    ----------
    specs : sequence of RunSpec
        Usually from :func:`~neumiss.benchmark._grid.grid`.
    out : path
        Folder of ``runs.csv``, ``summary.md`` and ``figure.png`` (created if needed).
    settings : RunSettings, default=None
        None: ``RunSettings()``.
    jobs : int, default=1
        Runs executing at the same time (each in its own process). With more
        jobs than free cores the fit seconds measure contention too.
    progress : bool, default=True
        Show a tqdm progress bar (on stderr).
    in_process : bool, default=False
        Run in this process, one after the other, instead of child processes:
        no memory isolation (peak memory then includes what earlier runs
        left allocated); for debugging.
    tracebacks : bool, default=False
        Print a failed run's whole traceback on standard error, not only its
        last line (``BenchmarkResult.failures`` holds it either way).

    Returns
    -------
    BenchmarkResult
    """
    from tqdm.auto import tqdm

    check_params("run_benchmark", {"jobs": jobs}, {"jobs": Integer(1)})
    settings = RunSettings() if settings is None else settings
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / RUNS_FILE
    finished = read_runs(runs_path)
    done = {RunSpec.from_row(row) for row in finished}
    bayes_cache = {
        RunSpec.from_row(row).data_key(): float(row["bayes_r2"]) for row in finished
    }
    todo = [spec for spec in dict.fromkeys(specs) if spec not in done]
    n_skipped = len(set(specs) & done)

    def bayes_lookup(spec: RunSpec) -> float | None:
        return bayes_cache.get(spec.data_key())

    if in_process:
        outcomes = _execute_in_process(todo, settings, bayes_lookup)
    else:
        outcomes = _execute_isolated(todo, settings, bayes_lookup, jobs)
    failures = []
    writer = RunsWriter(runs_path)
    bar = tqdm(total=len(todo), desc="benchmark", unit="run", disable=not progress)
    try:
        for spec, (status, value) in outcomes:
            if status == "ok":
                writer.write(value)
                bayes_cache[spec.data_key()] = value["bayes_r2"]
                bar.set_postfix_str(
                    f"{spec.describe()}: R2 {value['r2']:.4f} in {value['fit_seconds']:.1f} s"
                )
            else:
                failures.append((spec, value))
                if tracebacks:
                    bar.write(f"FAILED {spec.describe()}:\n{value}", file=sys.stderr)
                else:
                    last = str(value).strip().splitlines()[-1] if str(value).strip() else ""
                    bar.write(f"FAILED {spec.describe()}: {last}", file=sys.stderr)
            bar.update()
    finally:
        outcomes.close()  # stops the children still running, if interrupted
        bar.close()
        writer.close()
    if read_runs(runs_path):
        write_report(out)
    return BenchmarkResult(out, len(todo) - len(failures), n_skipped, failures)
