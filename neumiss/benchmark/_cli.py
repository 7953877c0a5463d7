"""``neumiss benchmark``: the paper's simulation study (Section 5.4, Figure 5), rerun;
with ``--suite real``, the real-data suite (:mod:`neumiss.benchmark.realdata`); with
``--suite intervals``, prediction intervals (:mod:`neumiss.benchmark.intervals`).

``configure_parser`` and ``run`` implement the command of :mod:`neumiss.cli`;
:func:`main` is ``python -m neumiss.benchmark``. Nothing here imports torch
before a run starts, so ``--help`` and bad options answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from ._data import MECHANISMS
from ._grid import (
    PAPER_N_FEATURES,
    PAPER_N_TEST,
    PAPER_N_TRAIN,
    PAPER_N_VAL,
    PAPER_REPEATS,
    grid,
)
from ._methods import DEFAULT_METHODS, METHODS, MLP_WIDTHS, RunSettings
from ._report import FIGURE_FILE, SUMMARY_FILE, write_report
from ._runner import run_benchmark
from ._store import RUNS_FILE, read_runs
from .intervals import _classes as interval_classes
from .intervals import _real as interval_real
from .intervals import _runner as interval_runner
from .realdata import _methods as real_methods
from .realdata._cache import DEFAULT_CACHE
from .realdata._protocol import DEFAULT_REPEATS as REAL_REPEATS
from .realdata._tasks import HALVES, TASKS, select_tasks

SUITES = ("simulated", "real", "intervals")
#: Default output folders of the suites.
OUT = {"simulated": Path("benchmark_results"), "real": Path("benchmark_results") / "realdata",
       "intervals": Path("benchmark_results") / "intervals"}
#: Options of some suites only (argparse destinations), refused with the others.
SUITE_OPTIONS = {
    "simulated": ("mechanisms", "n_features", "n_train", "n_val", "n_test", "quick",
                  "neumiss_depths", "mlp_widths", "methods", "jobs", "threads"),
    "real": ("tasks", "half", "cache", "neumiss_params", "methods", "jobs", "threads"),
    "intervals": ("mechanisms", "n_train", "n_test", "missing_rates", "jobs", "threads",
                  "classification", "real", "tasks", "half", "cache"),
}

#: The ``--quick`` preset: a small grid, to try the command or check a change.
QUICK = {
    "mechanisms": ("MCAR", "gaussian_sm"),
    "n_features": (10,),
    "n_train": (10_000,),
    "n_val": 2_000,
    "n_test": 2_000,
    "repeats": 2,
    "methods": ("em", "mice_lr", "impute_mask_lr", "hgb", "neumiss"),
}


def _positive_int(text: str) -> int:
    """``text`` as an integer >= 1, also written like ``1e4``; ArgumentTypeError otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(value)


def _test_rows(text: str) -> int:
    """``text`` as a number of test rows: an integer >= 2, since R² needs 2 rows."""
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"expected at least 2 test rows (a test R² needs 2), got {text!r}"
        )
    return value


def _non_negative_int(text: str) -> int:
    """``text`` as an integer >= 0; ArgumentTypeError otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _labelled_params(text: str) -> tuple[str, dict]:
    """``LABEL=JSON`` as ``(label, params dict)``; ArgumentTypeError naming the problem."""
    label, equals, params = text.partition("=")
    if not equals or not real_methods.LABEL_PATTERN.fullmatch(label):
        raise argparse.ArgumentTypeError(
            f"expected LABEL=JSON with a label of letters, digits and _.+-, got {text!r}"
        )
    if label in real_methods.METHODS or label in METHODS:
        raise argparse.ArgumentTypeError(f"label {label!r} is a built-in method's name")
    try:
        values = json.loads(params)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"{label}: invalid JSON {params!r} ({error})") from None
    if not isinstance(values, dict):
        raise argparse.ArgumentTypeError(f"{label}: expected a JSON object, got {params!r}")
    return label, values


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``neumiss benchmark`` to ``parser``."""
    parser.epilog = (
        "Rerunning the same command resumes: runs already in OUT/runs.csv are skipped. "
        "Options left out take the paper's values, or the --quick preset's "
        f"({', '.join(f'{k}={v}' for k, v in QUICK.items())}). "
        "--suite real cross-validates methods on R data sets with missing values "
        "(set up once with: bash scripts/setup_realdata.sh)."
    )
    parser.add_argument(
        "--suite", choices=SUITES, default="simulated",
        help="simulated: the paper's grid (default); real: the real-data suite; "
        "intervals: conformal prediction intervals against the oracle",
    )
    _add_grid_options(parser)
    _add_run_options(parser)
    _add_interval_options(parser.add_argument_group("interval suite (--suite intervals)"))
    _add_real_options(parser.add_argument_group("real suite (--suite real)"))


def _add_grid_options(parser: argparse.ArgumentParser) -> None:
    """The options of the simulated grid (the interval suite takes some of them)."""
    parser.add_argument(
        "--mechanisms", nargs="+", choices=MECHANISMS, metavar="MECHANISM",
        help=f"missingness mechanisms, among {', '.join(MECHANISMS)} (default: all)",
    )
    parser.add_argument(
        "--n-features", nargs="+", type=_positive_int, metavar="D",
        help=f"numbers of features (default: {' '.join(map(str, PAPER_N_FEATURES))})",
    )
    parser.add_argument(
        "--n-train", nargs="+", type=_positive_int, metavar="N",
        help="training-set sizes, e.g. 1e4 2e4 1e5 (the default)",
    )
    parser.add_argument(
        "--n-val", type=_positive_int, help=f"validation rows (default: {PAPER_N_VAL})"
    )
    parser.add_argument(
        "--n-test", type=_test_rows, help=f"test rows, at least 2 (default: {PAPER_N_TEST})"
    )
    parser.add_argument(
        "--repeats", type=_positive_int,
        help=f"simulations per cell (default: {PAPER_REPEATS}); real suite: cross-validation "
        f"repeats (default: {REAL_REPEATS})",
    )
    real_names = tuple(real_methods.METHODS)
    parser.add_argument(
        "--methods", nargs="+", choices=tuple(dict.fromkeys(METHODS | real_methods.METHODS)),
        metavar="METHOD",
        help=f"methods, among {', '.join(METHODS)} (default: {' '.join(DEFAULT_METHODS)}); "
        f"real suite: among {', '.join(real_names)} (default: all)",
    )
    parser.add_argument(
        "--out", type=Path,
        help=f"folder of runs.csv, summary.md and figure.png (default: {OUT['simulated']}; "
        f"real suite: {OUT['real']})",
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of how runs execute, and of the simulated methods' searches."""
    parser.add_argument("--quick", action="store_true", help="small preset, a few minutes")
    parser.add_argument(
        "--jobs", type=_positive_int, default=1,
        help="runs at the same time, each in its own process (default: 1)",
    )
    parser.add_argument(
        "--threads", type=_positive_int, default=1, help="threads per run (default: 1)"
    )
    parser.add_argument(
        "--neumiss-depths", nargs="+", type=_non_negative_int, metavar="DEPTH",
        help="NeuMiss depths tried, the best on validation kept (default: those of "
        "NeuMissRegressor(depth='auto'))",
    )
    parser.add_argument(
        "--mlp-widths", nargs="+", type=_positive_int, metavar="Q",
        help="MLP hidden widths tried, as multiples of d, the best on validation kept "
        f"(default: {' '.join(map(str, MLP_WIDTHS))})",
    )
    parser.add_argument(
        "--seed", type=_non_negative_int, default=0, help="base random seed (default: 0)"
    )
    parser.add_argument(
        "--report-only", action="store_true",
        help="only rebuild summary.md and figure.png from OUT/runs.csv",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _add_interval_options(intervals) -> None:
    """The options of the interval suite only, added to the argument group ``intervals``."""
    intervals.add_argument(
        "--missing-rates", nargs="+", type=float, metavar="RATE",
        help="missing rates (default: "
        f"{' '.join(map(str, interval_runner.MISSING_RATES))}); the suite's other defaults: "
        f"mechanisms {' '.join(interval_runner.MECHANISMS)}, d={interval_runner.N_FEATURES}, "
        f"--n-train {' '.join(map(str, interval_runner.N_TRAIN))}, "
        f"--n-test {interval_runner.N_TEST}, 1 repeat, alpha={interval_runner.ALPHA}",
    )
    intervals.add_argument(
        "--classification", action="store_true",
        help="prediction sets of ConformalClassifier on simulated classes (y cut at its "
        "terciles) against the oracle set, into OUT/classes_runs.csv and "
        "OUT/classes_summary.md (defaults: mechanisms "
        f"{' '.join(interval_classes.MECHANISMS)}, missing rate "
        f"{' '.join(map(str, interval_classes.MISSING_RATES))}, --n-train "
        f"{' '.join(map(str, interval_classes.N_TRAIN))}, --n-test {interval_classes.N_TEST})",
    )
    intervals.add_argument(
        "--real", action="store_true",
        help="with --classification: the sets on the real-data suite's binary tasks "
        "(--tasks, --half and --cache select them; --repeats: cross-validation repeats, "
        f"default {REAL_REPEATS}) instead of simulated classes, into "
        f"OUT/{interval_real.RUNS_FILE} and OUT/{interval_real.SUMMARY_FILE}",
    )


def _add_real_options(real) -> None:
    """The options of the real-data suite only, added to the argument group ``real``."""
    real.add_argument(
        "--tasks", nargs="+", choices=tuple(TASKS), metavar="TASK",
        help=f"tasks, among {', '.join(TASKS)} (default: all)",
    )
    real.add_argument(
        "--half", choices=HALVES,
        help="only the tasks (of --tasks, or all) in this half of the suite's split",
    )
    real.add_argument(
        "--cache", type=Path,
        help=f"folder of the exported R data sets (default: {DEFAULT_CACHE})",
    )
    real.add_argument(
        "--neumiss-params", nargs="+", type=_labelled_params, metavar="LABEL=JSON",
        help="NeuMiss configurations run as methods named LABEL, e.g. "
        "'mlp2_wd={\"mlp_depth\": 2, \"weight_decay\": 1e-4}' (estimator parameters; "
        "random_state is set per fold); run besides --methods, or alone when --methods is "
        "not given",
    )


def _misplaced_options(args: argparse.Namespace) -> str | None:
    """An error message for options or methods of the other suite, None when all fit."""
    other = {name for options in SUITE_OPTIONS.values() for name in options}
    other -= set(SUITE_OPTIONS[args.suite])
    given = [f"--{name.replace('_', '-')}" for name in sorted(other)
             if getattr(args, name) not in (None, False, 1)]
    if given:
        return f"{', '.join(given)}: not an option of --suite {args.suite}"
    valid = METHODS if args.suite == "simulated" else real_methods.METHODS
    if args.suite == "intervals":
        return None
    foreign = [m for m in args.methods or () if m not in valid]
    if foreign:
        return (f"methods {foreign} are not in --suite {args.suite}; valid: "
                f"{', '.join(valid)}")
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that runs stop cleanly."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``):
    the runs' child processes are stopped and finished runs stay recorded."""

    def handler(signum, frame):
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(error: KeyboardInterrupt, out: Path, what: str) -> int:
    """Print the one-line message of an interrupted run; return its exit status."""
    terminated = isinstance(error, Terminated)
    print(
        f"\n{'terminated' if terminated else 'interrupted'}: finished {what} are in "
        f"{out / RUNS_FILE}; rerun the same command to resume",
        file=sys.stderr,
    )
    return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


def _folder_problem(out: Path) -> str | None:
    """Why ``out`` cannot be the output folder (a file, or under one), or None."""
    for folder in (out, *out.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "is a file" if folder == out else f"is under {folder}, a file"
                return f"--out {out} {where}, not a folder"
            return None
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``neumiss benchmark`` with parsed ``args``; return the exit status."""
    problem = _misplaced_options(args) or _folder_problem(
        args.out or OUT[args.suite]
    )
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    with _sigterm_interrupts():
        if args.suite == "real":
            return _run_real(args)
        if args.suite == "intervals":
            return _run_intervals(args)
        return _run_simulated(args)


def _rewrite_report(out, read, write) -> int:
    """``--report-only``: rebuild the report in folder ``out`` from its ``runs.csv``
    (``read`` and ``write`` are the suite's); return the exit status."""
    if not read(out / RUNS_FILE):
        print(f"error: no runs in {out / RUNS_FILE}", file=sys.stderr)
        return 1
    for path in write(out):
        print(f"wrote {path}")
    return 0


def _show_report(summary, figure) -> None:
    """Print a suite's summary table and where it and its figure are, if it was written."""
    if summary.exists():
        print(summary.read_text())
        print(f"table: {summary} (its columns are explained at its top)\n"
              f"figure: {figure} (an image: open it)")


def _run_simulated(args: argparse.Namespace) -> int:
    """``neumiss benchmark`` (the simulated suite); return the exit status."""
    out = args.out or OUT["simulated"]
    if args.report_only:
        return _rewrite_report(out, read_runs, write_report)
    preset = QUICK if args.quick else {}
    options = {
        "mechanisms": args.mechanisms or preset.get("mechanisms", MECHANISMS),
        "n_features": args.n_features or preset.get("n_features", PAPER_N_FEATURES),
        "n_train": args.n_train or preset.get("n_train", PAPER_N_TRAIN),
        "n_val": args.n_val or preset.get("n_val", PAPER_N_VAL),
        "n_test": args.n_test or preset.get("n_test", PAPER_N_TEST),
        "repeats": args.repeats or preset.get("repeats", PAPER_REPEATS),
        "methods": args.methods or preset.get("methods", DEFAULT_METHODS),
        "seed": args.seed,
    }
    methods = _available(METHODS, options["methods"])
    if not methods:
        print("error: none of the requested methods can run here", file=sys.stderr)
        return 1
    options["methods"] = methods
    try:
        specs = grid(**options)
        settings = RunSettings(
            neumiss_depths=None if args.neumiss_depths is None else tuple(args.neumiss_depths),
            mlp_widths=tuple(args.mlp_widths or MLP_WIDTHS),
            threads=args.threads,
        )
        result = run_benchmark(
            specs, out, settings=settings, jobs=args.jobs, progress=not args.no_progress,
            tracebacks=getattr(args, "debug", False),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        return _interrupted(error, out, "runs")
    print(
        f"{result.n_computed} runs computed, {result.n_skipped} already in {out / RUNS_FILE}, "
        f"{len(result.failures)} failed"
        + (" (neumiss --debug benchmark ... prints their tracebacks)" if result.failures else "")
    )
    _show_report(out / SUMMARY_FILE, out / FIGURE_FILE)
    return 1 if result.failures else 0


def _run_real(args: argparse.Namespace) -> int:
    """``neumiss benchmark --suite real``: run the real-data suite; return the exit status."""
    from .realdata import _report as real_report
    from .realdata._cache import CacheMissingError
    from .realdata._runner import run_suite
    from .realdata._store import read_runs as read_real_runs

    out = args.out or OUT["real"]
    if args.report_only:
        return _rewrite_report(out, read_real_runs, real_report.write_report)
    configs = dict(args.neumiss_params or ())
    names = args.methods or (() if configs else real_methods.DEFAULT_METHODS)
    try:
        methods = [real_methods.METHODS[name]
                   for name in _available(real_methods.METHODS, names)]
        for label, params in configs.items():
            method = real_methods.neumiss_method(label, params)
            real_methods.check_neumiss_params(method)
            methods.append(method)
        result = run_suite(
            select_tasks(args.tasks, args.half), methods, out,
            cache=args.cache or DEFAULT_CACHE, repeats=args.repeats or REAL_REPEATS,
            seed=args.seed, jobs=args.jobs, threads=args.threads,
            progress=not args.no_progress,
        )
    except CacheMissingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        return _interrupted(error, out, "folds")
    print(
        f"{result.n_computed} fits computed, {result.n_skipped} already in {out / RUNS_FILE}, "
        f"{len(result.failures)} failed"
    )
    _show_report(out / real_report.SUMMARY_FILE, out / real_report.FIGURE_FILE)
    return 1 if result.failures else 0


def _available(methods: dict, names) -> list[str]:
    """The ``names`` (keys of ``methods``, duplicates dropped) whose method can run here;
    the others are named on stderr with the reason."""
    available = []
    for name in dict.fromkeys(names):
        reason = methods[name].unavailable() if name in methods else None
        if reason is None:
            available.append(name)
        else:
            print(f"skipping method {name!r}: {reason}", file=sys.stderr)
    return available


def _say_mapie_skipped() -> None:
    """Name the MAPIE methods on stderr, with the reason, where MAPIE is not installed."""
    if reason := interval_classes.mapie_unavailable():
        print(f"skipping methods {', '.join(map(repr, interval_classes.MAPIE_METHODS))}: "
              f"{reason}", file=sys.stderr)


def _run_interval_real(args: argparse.Namespace) -> int:
    """``neumiss benchmark --suite intervals --classification --real``; the exit status."""
    from .realdata._cache import CacheMissingError

    out = args.out or OUT["intervals"]
    tasks = interval_real.binary_tasks(args.tasks, args.half)
    if not args.classification or not tasks:
        print("error: --real needs --classification and a binary task among --tasks "
              "(and --half)", file=sys.stderr)
        return 2
    if not args.report_only:
        _say_mapie_skipped()
        try:
            computed, skipped = interval_real.run_real_classes(
                tasks, out, args.cache or DEFAULT_CACHE, repeats=args.repeats or REAL_REPEATS,
                seed=args.seed, threads=args.threads, progress=not args.no_progress)
        except CacheMissingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as error:
            return _interrupted(error, out, "task repeats")
        print(f"{computed} task repeats computed, {skipped} already in "
              f"{out / interval_real.RUNS_FILE}")
    if not interval_real.read_real_classes_runs(out / interval_real.RUNS_FILE):
        print(f"error: no runs in {out / interval_real.RUNS_FILE}", file=sys.stderr)
        return 1
    for path in interval_real.write_real_classes_report(out):
        print(f"wrote {path}")
    print((out / interval_real.SUMMARY_FILE).read_text())
    return 0


def _run_intervals(args: argparse.Namespace) -> int:
    """``neumiss benchmark --suite intervals``; return the exit status."""
    from .intervals import _report as interval_report

    if args.real:
        return _run_interval_real(args)
    if args.tasks or args.half or args.cache:
        print("error: --tasks, --half and --cache select real tasks: add --classification "
              "--real", file=sys.stderr)
        return 2
    out = args.out or OUT["intervals"]
    grid = interval_classes if args.classification else interval_runner
    task = interval_classes.CLASSIFICATION if args.classification else interval_runner.REGRESSION
    if not args.report_only:
        rates = args.missing_rates or grid.MISSING_RATES
        if not all(0 < rate < 1 for rate in rates):
            print(f"error: --missing-rates must lie in (0, 1), got {rates}", file=sys.stderr)
            return 2
        if "probit_sm" in (args.mechanisms or ()):
            print("error: --suite intervals: probit_sm has no closed-form oracle interval; "
                  "use MCAR, MAR or gaussian_sm", file=sys.stderr)
            return 2
        if args.classification:
            _say_mapie_skipped()
        runs = interval_runner.plan(
            args.mechanisms or grid.MECHANISMS, rates, args.n_train or grid.N_TRAIN,
            args.repeats or 1,
        )
        try:
            computed, skipped = interval_runner.run_intervals(
                runs, out, seed=args.seed, n_test=args.n_test or grid.N_TEST,
                progress=not args.no_progress, jobs=args.jobs, threads=args.threads,
                task=task,
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as error:
            return _interrupted(error, out, "runs")
        print(f"{computed} runs computed, {skipped} already in {out / grid.RUNS_FILE}")
    if not task.read(out / grid.RUNS_FILE):
        print(f"error: no runs in {out / grid.RUNS_FILE}", file=sys.stderr)
        return 1
    report = (interval_classes.write_classes_report if args.classification
              else interval_report.write_report)
    for path in report(out):
        print(f"wrote {path}")
    summary = (interval_classes.SUMMARY_FILE if args.classification
               else interval_report.SUMMARY_FILE)
    print((out / summary).read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m neumiss.benchmark [options]``; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m neumiss.benchmark",
        description=__doc__.splitlines()[0].replace("``", "").rstrip(";") + ".",
    )
    configure_parser(parser)
    return run(parser.parse_args(argv))
