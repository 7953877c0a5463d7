"""``neumiss benchmark``: the paper's simulation study (Section 5.4, Figure 5), rerun.

The grid crosses missingness mechanisms, numbers of features ``d`` and
training-set sizes; each cell is repeated with fresh simulated data
(:func:`neumiss.simulate.make_regression`: Gaussian covariates, linear
response with SNR 10, 50% missing values), plus validation and test sets of
``n_val`` and ``n_test`` rows from the same distribution. A *run* is one
method on one (cell, repeat). For each run the benchmark records the test R²,
the Bayes rate (R² of the Bayes predictor on the same test set; none for
probit self-masking), the fit seconds and the peak memory of the fit, and
appends one row to ``runs.csv``. ``summary.md`` (medians, with the paper's
published NeuMiss and EM medians beside them) and ``figure.png`` (boxplots in
the style of the paper's Figure 5) are rebuilt from that file.

Protocol choices
----------------
* **NeuMiss**: one :class:`~neumiss.NeuMissRegressor` (residual connections,
  ``weights="auto"``: a shared Neumann matrix, untied at the chosen depth when
  that improves validation) with ``depth`` = the candidate ``neumiss_depths``: it
  trains on all of n_train, early-stops on the benchmark's validation set and
  keeps the depth with the best validation loss, as the paper chose depth on a
  validation set. Each depth starts from the weights learned at the previous
  one. The recorded fit seconds are the total over all candidate depths.
* **MLP** (0-imputation + mask, one hidden layer): one fit per width among
  ``mlp_widths`` multiples of ``d`` (the paper: ``d`` to ``100 d``), the best
  R² on the validation set kept.
* The other methods are fitted on the training set and do not see the
  validation set.
* **Isolation and memory**: each run executes in a fresh child process
  (``forkserver`` where available, else ``spawn``). The child simulates its
  data, resets the kernel's resident-set high-water mark
  (``/proc/self/clear_refs``), fits, and reports ``VmHWM`` minus the resident
  size just before the fit: the extra memory the fit needed, whoever allocated
  it (numpy, torch, R). One-time runtime set-up (torch's first fit, starting
  R) is done before the reset, untimed. Linux only; NaN elsewhere.
* **Threads**: each fit runs with ``threads`` threads (torch and the
  BLAS/OpenMP pools); on a loaded two-core machine one thread was several times
  faster for NeuMiss than two.
* **Resume**: rows are appended and flushed to ``runs.csv`` as runs finish; on
  start, runs already there (same method, mechanism, ``d``, ``n_train``,
  ``n_val``, ``n_test``, repeat and seed) are skipped, so a killed benchmark
  restarted with the same command only computes what is missing.
* **Probit self-masking** has no Bayes predictor: its gap is the test R² minus
  the best R² of the methods in ``runs.csv`` on the same (cell, repeat),
  computed when the table is built (as in the paper).

Command line: ``neumiss benchmark --help`` (also ``python -m neumiss.benchmark``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gc
import json
import math
import multiprocessing
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

#: Mechanisms of :mod:`neumiss.simulate`, in the paper's order.
MECHANISMS = ("MCAR", "MAR", "gaussian_sm", "probit_sm")
MECHANISM_TITLES = {
    "MCAR": "MCAR",
    "MAR": "MAR (logistic)",
    "gaussian_sm": "Gaussian self-masking",
    "probit_sm": "Probit self-masking",
}
#: Mechanisms without a Bayes predictor: gaps are taken to the best method of the repeat.
NO_BAYES_PREDICTOR = ("probit_sm",)

#: The paper's grid.
PAPER_N_FEATURES = (10, 20, 50)
PAPER_N_TRAIN = (10_000, 20_000, 100_000)
PAPER_N_VAL = 10_000
PAPER_N_TEST = 10_000
PAPER_REPEATS = 20

#: Candidate NeuMiss depths (chosen per run on the validation set); the same
#: as ``neumiss.estimators.AUTO_DEPTHS``, repeated so that the command line
#: does not import torch before a run starts.
NEUMISS_DEPTHS = (0, 2, 4, 8, 16)
#: NeuMissRegressor settings other than its defaults: residual connections
#: (an option of the authors' code; the paper's figure shows the variant
#: without) and one Neumann matrix shared by all iterations (the authors' 2021
#: follow-up) gave smaller gaps in our trials, most at n_train = 1e5 and d = 50
#: (MCAR, depth 8: -0.038 shared against -0.046 independent). ``weights="auto"``
#: then unties the shared matrix when that improves validation (MCAR, d = 10,
#: n_train = 1e5: -0.0029 against -0.0068 shared). A short patience with a
#: relative tolerance (3 epochs, learning rate cut after 2, improvements below
#: 0.2% not counted) halves the fit time and, at d = 50 and n_train = 1e4,
#: overfits less (MCAR, 3 repeats: -0.138 / -0.150 / -0.138 against
#: -0.150 / -0.162 / -0.159).
NEUMISS_PARAMS = {
    "residual": True, "weights": "auto", "patience": 3, "lr_patience": 1, "tol": 2e-3,
}
#: Candidate MLP widths, as multiples of d (chosen per run on the validation set).
MLP_WIDTHS = (1, 5, 20)

#: Published medians of the paper (test R² minus Bayes rate; for probit
#: self-masking minus the best method of the repeat), 20 repeats each, from the
#: results tables released with the authors' code:
#: (mechanism, d, n_train, EM (R's norm), NeuMiss, NeuMiss depth shown).
PAPER_MEDIANS = (
    ("MCAR", 10, 10_000, -0.0002, -0.0236, 3),
    ("MCAR", 10, 20_000, -0.0001, -0.0153, 6),
    ("MCAR", 10, 100_000, -0.0000, -0.0053, 8),
    ("MCAR", 20, 10_000, -0.0004, -0.0671, 2),
    ("MCAR", 20, 20_000, -0.0002, -0.0456, 3),
    ("MCAR", 20, 100_000, -0.0001, -0.0210, 7),
    ("MCAR", 50, 10_000, -0.8686, -0.1708, 0),
    ("MCAR", 50, 20_000, -0.8677, -0.1466, 1),
    ("MCAR", 50, 100_000, -0.8680, -0.0589, 4),
    ("MAR", 10, 10_000, -0.0002, -0.0119, 4),
    ("MAR", 10, 20_000, -0.0001, -0.0086, 4),
    ("MAR", 10, 100_000, -0.0000, -0.0060, 7),
    ("MAR", 20, 10_000, -0.0003, -0.0361, 1),
    ("MAR", 20, 20_000, -0.0002, -0.0265, 2),
    ("MAR", 20, 100_000, -0.0000, -0.0187, 5),
    ("MAR", 50, 10_000, -0.6673, -0.1123, 0),
    ("MAR", 50, 20_000, -0.8318, -0.0967, 1),
    ("MAR", 50, 100_000, -0.8921, -0.0618, 4),
    ("gaussian_sm", 10, 10_000, -0.1206, -0.0179, 2),
    ("gaussian_sm", 10, 20_000, -0.1188, -0.0106, 6),
    ("gaussian_sm", 10, 100_000, -0.1198, -0.0041, 6),
    ("gaussian_sm", 20, 10_000, -0.0952, -0.0499, 1),
    ("gaussian_sm", 20, 20_000, -0.0956, -0.0337, 2),
    ("gaussian_sm", 20, 100_000, -0.0948, -0.0153, 5),
    ("gaussian_sm", 50, 10_000, -1.1952, -0.1583, 0),
    ("gaussian_sm", 50, 20_000, -1.2165, -0.1177, 0),
    ("gaussian_sm", 50, 100_000, -1.1920, -0.0497, 3),
    ("probit_sm", 10, 10_000, -0.1211, -0.0024, 2),
    ("probit_sm", 10, 20_000, -0.1300, -0.0008, 4),
    ("probit_sm", 10, 100_000, -0.1401, -0.0007, 8),
    ("probit_sm", 20, 10_000, -0.0887, -0.0031, 1),
    ("probit_sm", 20, 20_000, -0.1038, -0.0008, 2),
    ("probit_sm", 20, 100_000, -0.1206, -0.0010, 5),
    ("probit_sm", 50, 10_000, -1.1935, -0.0261, 0),
    ("probit_sm", 50, 20_000, -1.1878, -0.0157, 0),
    ("probit_sm", 50, 100_000, -1.1983, -0.0009, 3),
)

#: Columns identifying a run (the resume key), then its results, in ``runs.csv``.
KEY_COLUMNS = ("method", "mechanism", "n_features", "n_train", "n_val", "n_test", "repeat", "seed")
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
SUMMARY_FILE = "summary.md"
FIGURE_FILE = "figure.png"


# --------------------------------------------------------------------------- runs


class RunSpec(NamedTuple):
    """One run: a method on one simulated data set. Also the resume key of ``runs.csv``."""

    method: str
    mechanism: str
    n_features: int
    n_train: int
    n_val: int
    n_test: int
    repeat: int
    seed: int

    @classmethod
    def from_row(cls, row: dict) -> RunSpec:
        """The spec of a ``runs.csv`` row (values as read from the file, i.e. strings)."""
        text = ("method", "mechanism")
        return cls(*(str(row[c]) if c in text else int(row[c]) for c in cls._fields))

    def dataset(self) -> RunSpec:
        """Key of the data set, shared by every method run on it (method left empty)."""
        return self._replace(method="")

    def describe(self) -> str:
        return (
            f"{self.method} {self.mechanism} d={self.n_features} n_train={self.n_train} "
            f"repeat={self.repeat}"
        )


@dataclass(frozen=True)
class Dataset:
    """Simulated train / validation / test sets of one (cell, repeat).

    Arrays: ``X_*`` of shape (n_*, d) with NaN for missing entries, ``y_*`` of shape (n_*,).
    ``random_state`` seeds the methods fitted on it.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    truth: object
    random_state: int


def simulate(spec: RunSpec) -> Dataset:
    """Draw the data of ``spec`` (identical for every method; the method name is ignored).

    The random streams derive from ``spec.seed`` and the cell and repeat, so a
    run can be recomputed alone, in any order, in any process.
    """
    from .simulate import make_regression

    sequence = np.random.SeedSequence(
        spec.seed,
        spawn_key=(MECHANISMS.index(spec.mechanism), spec.n_features, spec.n_train, spec.repeat),
    )
    train, val, test, model = (np.random.default_rng(s) for s in sequence.spawn(4))
    X_train, y_train, truth = make_regression(
        spec.n_train, spec.n_features, mechanism=spec.mechanism, random_state=train
    )
    X_val, y_val = truth.sample(spec.n_val, random_state=val)
    X_test, y_test = truth.sample(spec.n_test, random_state=test)
    return Dataset(
        X_train, y_train, X_val, y_val, X_test, y_test, truth,
        random_state=int(model.integers(2**31 - 1)),
    )


def bayes_rate(spec: RunSpec, data: Dataset) -> float:
    """R² of the Bayes predictor on the test set; NaN for mechanisms without one."""
    if spec.mechanism in NO_BAYES_PREDICTOR:
        return math.nan
    return float(data.truth.bayes_rate(data.X_test, data.y_test))


# --------------------------------------------------------------------------- methods


def _r2(model, X, y) -> float:
    from sklearn.metrics import r2_score

    return float(r2_score(y, model.predict(X)))


def _select_on_validation(candidates: dict, data: Dataset) -> tuple[object, dict]:
    """Fit each candidate on the training set and keep the best on the validation set.

    Parameters
    ----------
    candidates : dict
        Hyperparameter value -> unfitted estimator.
    data : Dataset

    Returns
    -------
    model : the best fitted estimator
    params : dict
        ``choice`` (its hyperparameter value), ``val_r2`` and ``seconds``
        (validation R² and fit-plus-validation seconds of each candidate).
    """
    best_value, best_model, scores, seconds = None, None, {}, {}
    for value, estimator in candidates.items():
        start = time.perf_counter()
        model = estimator.fit(data.X_train, data.y_train)
        scores[value] = _r2(model, data.X_val, data.y_val)
        seconds[str(value)] = round(time.perf_counter() - start, 2)
        if best_model is None or scores[value] > scores[best_value]:
            best_value, best_model = value, model
    val_r2 = {str(k): round(v, 5) for k, v in scores.items()}
    return best_model, {"choice": best_value, "val_r2": val_r2, "seconds": seconds}


def _fit_neumiss(data: Dataset, settings: RunSettings):
    from .estimators import NeuMissRegressor

    # One estimator tries every depth (each warm-started from the previous one)
    # and keeps the best on the validation set; as in the paper it trains on all
    # of n_train and early-stops on the validation set.
    model = NeuMissRegressor(
        depth=list(settings.neumiss_depths), random_state=data.random_state, **NEUMISS_PARAMS
    ).fit(data.X_train, data.y_train, validation_data=(data.X_val, data.y_val))
    results = model.depth_results_
    untied = model.untied_result_
    return model, {
        "depth": model.best_depth_,
        "weights": model.weights_,
        "untied_val_r2": None if untied is None else round(untied["val_score"], 5),
        "untied_seconds": None if untied is None else round(untied["seconds"], 2),
        "epochs": model.n_epochs_,
        "val_r2": {str(k): round(r["val_score"], 5) for k, r in results.items()},
        "seconds": {str(k): round(r["seconds"], 2) for k, r in results.items()},
    }


def _fit_mlp(data: Dataset, settings: RunSettings):
    from .baselines import ImputeMaskMLPRegressor

    d = data.X_train.shape[1]
    candidates = {
        q * d: ImputeMaskMLPRegressor(width=q * d, random_state=data.random_state)
        for q in settings.mlp_widths
    }
    model, params = _select_on_validation(candidates, data)
    return model, {"width": params.pop("choice"), **params}


def _fit_plain(make_estimator: Callable[[int], object]):
    """A method fitting one estimator on the training set, without hyperparameter search."""

    def fit(data: Dataset, settings: RunSettings):
        model = make_estimator(data.random_state).fit(data.X_train, data.y_train)
        params = {}
        if getattr(model, "n_iter_", None) is not None:  # EM: E-steps; boosting: trees
            params["n_iter"] = int(np.max(model.n_iter_))
        if getattr(model, "converged_", None) is not None:
            params["converged"] = bool(model.converged_)
        return model, params

    return fit


def _em(random_state):
    from .baselines import EMRegressor

    return EMRegressor()


def _norm_em(random_state):
    from .rbridge import NormEMRegressor

    return NormEMRegressor()


def _mice_lr(random_state):
    from .baselines import MICERegressor

    return MICERegressor(random_state=random_state)


def _impute_mask_lr(random_state):
    from .baselines import ImputeMaskLinearRegressor

    return ImputeMaskLinearRegressor()


def _hgb(random_state):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(random_state=random_state)


def _norm_unavailable() -> str | None:
    """Why R's ``norm`` cannot be used here, or None when it can."""
    from . import rbridge

    try:
        rbridge.load_norm()
    except ImportError as exc:
        return str(exc)
    return None


def _warm_up_torch() -> None:
    """One tiny NeuMiss fit, so that torch's one-time set-up is not timed with the real fit."""
    from .estimators import NeuMissRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3))
    X[rng.random(X.shape) < 0.3] = np.nan
    NeuMissRegressor(depth=2, max_epochs=2, random_state=0).fit(X, rng.standard_normal(64))


def _warm_up_r() -> None:
    """Start R and load ``norm`` before the timed fit."""
    from . import rbridge

    rbridge.load_norm()


@dataclass(frozen=True)
class Method:
    """A compared method: ``fit(data, settings) -> (fitted model, params dict)``.

    ``unavailable()`` returns why the method cannot run on this machine (None
    when it can). ``warm_up()``, if given, runs in the run's process before the
    timed fit: one-time runtime set-up (starting R, torch's first call) is paid
    by every fresh process, not by a fit in a user's session.
    """

    label: str
    fit: Callable
    unavailable: Callable[[], str | None] = lambda: None
    warm_up: Callable[[], None] | None = None


#: Methods by command-line name, in the order of tables and figures.
METHODS = {
    "em": Method("EM", _fit_plain(_em)),
    "norm_em": Method("EM (R norm)", _fit_plain(_norm_em), _norm_unavailable, _warm_up_r),
    "mice_lr": Method("MICE+LR", _fit_plain(_mice_lr)),
    "impute_mask_lr": Method("0-impute+mask LR", _fit_plain(_impute_mask_lr)),
    "mlp": Method("MLP", _fit_mlp),
    "hgb": Method("HistGradientBoosting", _fit_plain(_hgb)),
    "neumiss": Method("NeuMiss", _fit_neumiss, warm_up=_warm_up_torch),
}
#: Methods run when none are named (R's norm is opt-in: it needs R, and fails above d = 30).
DEFAULT_METHODS = ("em", "mice_lr", "impute_mask_lr", "mlp", "hgb", "neumiss")

#: The ``--quick`` preset: a few minutes on two cores.
QUICK = {
    "mechanisms": ("MCAR", "gaussian_sm"),
    "n_features": (10,),
    "n_train": (10_000,),
    "n_val": 2_000,
    "n_test": 2_000,
    "repeats": 2,
    "methods": ("em", "mice_lr", "impute_mask_lr", "hgb", "neumiss"),
}


@dataclass(frozen=True)
class RunSettings:
    """How runs execute (not part of the resume key)."""

    neumiss_depths: tuple[int, ...] = NEUMISS_DEPTHS
    mlp_widths: tuple[int, ...] = MLP_WIDTHS
    threads: int = 1


# --------------------------------------------------------------------------- one run


def _proc_status_kb(field: str) -> float:
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


@contextmanager
def _thread_limit(threads: int):
    """Run torch and the BLAS/OpenMP pools with ``threads`` threads, then restore them."""
    import torch
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(previous)


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
    dict with the keys of :data:`COLUMNS`.
    """
    method = METHODS[spec.method]
    data = simulate(spec)
    if bayes_r2 is None:
        bayes_r2 = bayes_rate(spec, data)
    with _thread_limit(settings.threads):
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
        r2 = _r2(model, data.X_test, data.y_test)
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


def _outcome(spec: RunSpec, settings: RunSettings, bayes_r2: float | None) -> tuple[str, object]:
    """``("ok", row)`` or ``("error", traceback text)``."""
    try:
        return "ok", execute_run(spec, settings, bayes_r2)
    except Exception:  # one failed run must not stop the benchmark
        return "error", traceback.format_exc()


def _child_main(spec, settings, bayes_r2, connection) -> None:
    """Entry point of a run's child process: send the outcome back through ``connection``."""
    try:
        connection.send(_outcome(spec, settings, bayes_r2))
    finally:
        connection.close()


def _context():
    """Start method for the runs' children: a preloaded forkserver where available."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["neumiss"])
        return context
    return multiprocessing.get_context("spawn")


def _execute_isolated(
    specs: Iterable[RunSpec],
    settings: RunSettings,
    bayes_lookup: Callable[[RunSpec], float | None],
    jobs: int,
) -> Iterator[tuple[RunSpec, tuple[str, object]]]:
    """Run each spec in its own child process, up to ``jobs`` at a time.

    Yields ``(spec, outcome)`` as runs finish. ``bayes_lookup`` is asked when a
    run starts, so a Bayes rate computed by an earlier run is reused.
    """
    context = _context()
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
) -> Iterator[tuple[RunSpec, tuple[str, object]]]:
    """Run the specs one after the other in this process (no memory isolation)."""
    for spec in specs:
        yield spec, _outcome(spec, settings, bayes_lookup(spec))


# --------------------------------------------------------------------------- runs.csv


def read_runs(path) -> list[dict]:
    """Rows of a ``runs.csv`` (strings), after checking its columns.

    A last line cut short by a killed writer is removed from the file.
    """
    path = Path(path)
    if not path.exists():
        return []
    with open(path, "rb+") as handle:
        content = handle.read()
        if content and not content.endswith(b"\n"):
            keep = content.rfind(b"\n") + 1
            handle.truncate(keep)
            print(
                f"{path}: removed an incomplete last line (a run interrupted while writing)",
                file=sys.stderr,
            )
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return []
        if tuple(reader.fieldnames) != COLUMNS:
            raise ValueError(
                f"{path} has columns {reader.fieldnames}, expected {list(COLUMNS)}; "
                "it was not written by this version of the benchmark: use another --out"
            )
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        try:
            RunSpec.from_row(row)
            float(row["bayes_r2"])
        except ValueError as error:
            raise ValueError(
                f"{path}, line {line}: {error} (missing numbers are written 'nan'); "
                "fix or remove that line"
            ) from None
    return rows


class _RunsWriter:
    """Appends rows to ``runs.csv``, each flushed to disk before the next run."""

    def __init__(self, path: Path):
        new = not path.exists() or path.stat().st_size == 0
        self._handle = open(path, "a", newline="")
        self._writer = csv.DictWriter(self._handle, fieldnames=COLUMNS)
        if new:
            self._writer.writeheader()
            self._sync()

    def write(self, row: dict) -> None:
        self._writer.writerow(row)
        self._sync()

    def _sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


# --------------------------------------------------------------------------- the benchmark


@dataclass
class BenchmarkResult:
    """What :func:`run_benchmark` did: counts of runs and the failures' tracebacks."""

    out: Path
    n_computed: int
    n_skipped: int
    failures: list[tuple[RunSpec, str]]


def _check_names(values, valid, what: str) -> tuple:
    values = tuple(values)
    unknown = [v for v in values if v not in valid]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; valid: {', '.join(valid)}")
    if not values:
        raise ValueError(f"give at least one {what}; valid: {', '.join(valid)}")
    return values


def _check_ints(values, what: str, minimum: int) -> tuple[int, ...]:
    values = tuple(values) if isinstance(values, Iterable) else (values,)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int | np.integer)]
    bad += [v for v in values if v not in bad and v < minimum]
    if bad or not values:
        raise ValueError(f"{what} must be integers >= {minimum}, got {list(values)}")
    return tuple(int(v) for v in values)


def grid(
    *,
    mechanisms: Sequence[str] = MECHANISMS,
    n_features: Sequence[int] = PAPER_N_FEATURES,
    n_train: Sequence[int] = PAPER_N_TRAIN,
    n_val: int = PAPER_N_VAL,
    n_test: int = PAPER_N_TEST,
    repeats: int = PAPER_REPEATS,
    methods: Sequence[str] = DEFAULT_METHODS,
    seed: int = 0,
) -> list[RunSpec]:
    """All runs of a grid, repeat by repeat (a partial benchmark covers every cell early).

    Raises ``ValueError`` naming the argument for unknown names or bad sizes.
    """
    mechanisms = _check_names(mechanisms, MECHANISMS, "mechanism(s)")
    methods = _check_names(methods, tuple(METHODS), "method(s)")
    n_features = _check_ints(n_features, "n_features", 2)
    n_train = _check_ints(n_train, "n_train", 2)
    (n_val,) = _check_ints(n_val, "n_val", 1)
    (n_test,) = _check_ints(n_test, "n_test", 1)
    (repeats,) = _check_ints(repeats, "repeats", 1)
    (seed,) = _check_ints(seed, "seed", 0)
    return [
        RunSpec(method, mechanism, d, n, n_val, n_test, repeat, seed)
        for repeat in range(repeats)
        for mechanism in mechanisms
        for d in n_features
        for n in n_train
        for method in methods
    ]


def run_benchmark(
    specs: Sequence[RunSpec],
    out,
    *,
    settings: RunSettings = RunSettings(),
    jobs: int = 1,
    progress: bool = True,
    in_process: bool = False,
) -> BenchmarkResult:
    """Run the specs not yet in ``out/runs.csv``, append their rows, then rebuild the report.

    Parameters
    ----------
    specs : sequence of RunSpec
        Usually from :func:`grid`.
    out : path
        Folder of ``runs.csv``, ``summary.md`` and ``figure.png`` (created if needed).
    settings : RunSettings
    jobs : int, default=1
        Runs executing at the same time (each in its own process). With more
        jobs than free cores the fit seconds measure contention too.
    progress : bool, default=True
        Show a tqdm progress bar (on stderr).
    in_process : bool, default=False
        Run in this process, one after the other, instead of child processes:
        no memory isolation (peak memory then includes what earlier runs
        left allocated); for debugging.

    Returns
    -------
    BenchmarkResult
    """
    from tqdm.auto import tqdm

    (jobs,) = _check_ints(jobs, "jobs", 1)
    (threads,) = _check_ints(settings.threads, "threads", 1)
    _check_ints(settings.neumiss_depths, "neumiss_depths", 0)
    _check_ints(settings.mlp_widths, "mlp_widths", 1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / RUNS_FILE
    finished = read_runs(runs_path)
    done = {RunSpec.from_row(row) for row in finished}
    bayes_cache = {
        RunSpec.from_row(row).dataset(): float(row["bayes_r2"]) for row in finished
    }
    todo = [spec for spec in dict.fromkeys(specs) if spec not in done]
    n_skipped = len(set(specs) & done)

    def bayes_lookup(spec: RunSpec) -> float | None:
        return bayes_cache.get(spec.dataset())

    if in_process:
        outcomes = _execute_in_process(todo, settings, bayes_lookup)
    else:
        outcomes = _execute_isolated(todo, settings, bayes_lookup, jobs)
    failures = []
    writer = _RunsWriter(runs_path)
    bar = tqdm(total=len(todo), desc="benchmark", unit="run", disable=not progress)
    try:
        for spec, (status, value) in outcomes:
            if status == "ok":
                writer.write(value)
                bayes_cache[spec.dataset()] = value["bayes_r2"]
                bar.set_postfix_str(
                    f"{spec.describe()}: R2 {value['r2']:.4f} in {value['fit_seconds']:.1f} s"
                )
            else:
                failures.append((spec, value))
                bar.write(f"FAILED {spec.describe()}:\n{value}", file=sys.stderr)
            bar.update()
    finally:
        outcomes.close()  # stops the children still running, if interrupted
        bar.close()
        writer.close()
    if read_runs(runs_path):
        write_report(out)
    return BenchmarkResult(out, len(todo) - len(failures), n_skipped, failures)


# --------------------------------------------------------------------------- report


def load_runs(path) -> pd.DataFrame:
    """``runs.csv`` as a DataFrame with a ``gap`` column (see :func:`add_gaps`)."""
    read_runs(path)  # checks the columns, drops a cut last line
    text = {"method": str, "mechanism": str, "params": str, "finished_at": str}
    return add_gaps(pd.read_csv(path, dtype=text))


def add_gaps(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``runs`` (columns of ``runs.csv``) with ``gap``, the paper's performance measure.

    ``gap`` is the test R² minus the Bayes rate, or, for mechanisms without a
    Bayes predictor (probit self-masking), minus the best test R² of all the
    methods run on the same data set (same cell, repeat and seed).
    """
    runs = runs.copy()
    dataset = [c for c in KEY_COLUMNS if c != "method"]
    best = runs.groupby(dataset)["r2"].transform("max")
    no_bayes = runs["mechanism"].isin(NO_BAYES_PREDICTOR)
    runs["gap"] = np.where(no_bayes, runs["r2"] - best, runs["r2"] - runs["bayes_r2"])
    return runs


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Medians per (mechanism, d, n_train, method) of a frame from :func:`add_gaps`.

    Returns
    -------
    DataFrame with columns mechanism, n_features, n_train, method, n_runs,
    gap, fit_seconds, peak_memory_mb (medians) and choices (hyperparameters
    chosen on validation, e.g. NeuMiss depths, one per run).
    """
    cell = ["mechanism", "n_features", "n_train", "method"]

    def choices(params: pd.Series) -> str:
        picked = []
        for text in params:
            values = json.loads(text)
            picked += [str(values[k]) for k in ("depth", "width") if k in values]
        return "/".join(picked)

    summary = runs.groupby(cell, sort=False).agg(
        n_runs=("gap", "size"),
        gap=("gap", "median"),
        fit_seconds=("fit_seconds", "median"),
        peak_memory_mb=("peak_memory_mb", "median"),
        choices=("params", choices),
    )
    return summary.reset_index()


def _paper_lookup() -> dict:
    return {(m, d, n): (em, nm, depth) for m, d, n, em, nm, depth in PAPER_MEDIANS}


def _ordered_methods(names: Iterable[str]) -> list[str]:
    present = set(names)
    return [m for m in METHODS if m in present] + sorted(present - set(METHODS))


def _label(method: str) -> str:
    return METHODS[method].label if method in METHODS else method


def format_summary(summary: pd.DataFrame) -> str:
    """Markdown tables of :func:`summarize`: gaps per mechanism beside the paper's, then costs."""
    paper = _paper_lookup()
    methods = _ordered_methods(summary["method"])
    lines = [
        "# neumiss benchmark: medians",
        "",
        "Gap = test R² minus the Bayes rate (probit self-masking: minus the best method of "
        "the same repeat); closer to 0 is better. `paper` columns: the published medians "
        "(20 repeats, EM = R's norm; NeuMiss with its best depth). `NeuMiss depth`: the "
        "depth chosen on the validation set, one per repeat.",
    ]
    for mechanism in _ordered(summary["mechanism"], MECHANISMS):
        part = summary[summary["mechanism"] == mechanism]
        header = ["d", "n_train", "runs"] + [_label(m) for m in methods]
        header += ["NeuMiss depth"] * ("neumiss" in methods)
        header += ["paper EM", "paper NeuMiss (depth)"]
        lines += ["", f"## {MECHANISM_TITLES.get(mechanism, mechanism)}", ""]
        lines += _table_head(header)
        for (d, n), rows in part.groupby(["n_features", "n_train"], sort=True):
            by_method = rows.set_index("method")
            cells = [str(d), _fmt_count(n), str(int(by_method["n_runs"].max()))]
            cells += [_fmt(by_method["gap"].get(m)) for m in methods]
            if "neumiss" in methods:
                cells.append(by_method["choices"].get("neumiss", ""))
            em, neumiss, depth = paper.get((mechanism, d, n), (math.nan, math.nan, None))
            cells += [_fmt(em), f"{_fmt(neumiss)} ({depth})" if depth is not None else ""]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Fit seconds and peak memory (medians)",
        "",
        "Seconds of `fit` (NeuMiss and MLP: all candidate depths / widths, with their "
        "validation predictions); MB: peak resident memory added by the fit.",
        "",
    ]
    lines += _table_head(["mechanism", "d", "n_train"] + [_label(m) for m in methods])
    order = {m: i for i, m in enumerate(MECHANISMS)}
    keys = sorted(
        summary.groupby(["mechanism", "n_features", "n_train"]).groups,
        key=lambda k: (order.get(k[0], len(order)), k[0], k[1], k[2]),
    )
    for mechanism, d, n in keys:
        rows = summary[
            (summary["mechanism"] == mechanism)
            & (summary["n_features"] == d)
            & (summary["n_train"] == n)
        ].set_index("method")
        cells = [mechanism, str(d), _fmt_count(n)]
        for m in methods:
            if m in rows.index:
                memory = rows.at[m, "peak_memory_mb"]
                memory_text = "" if math.isnan(memory) else f", {memory:.0f} MB"
                cells.append(f"{rows.at[m, 'fit_seconds']:.1f} s{memory_text}")
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


def _table_head(header: list[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]


def _fmt_count(n: int) -> str:
    """``10000`` as ``1e4``, ``20000`` as ``2e4``; other counts as they are."""
    exponent = len(str(n)) - 1
    if n >= 1000 and n % 10**exponent == 0:
        return f"{n // 10**exponent}e{exponent}"
    return str(n)


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:+.4f}"


def plot_figure(runs: pd.DataFrame, path) -> None:
    """Boxplots of the gap in the style of the paper's Figure 5.

    One panel per mechanism; in each, one group of boxes per (d, n_train),
    one box per method, with the runs as dots; x is the gap on a symmetric
    log scale (linear within 1e-3 of 0), as the paper's self-masking panels
    use a log scale.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # ``vert`` was replaced by ``orientation`` in matplotlib 3.10.
    new_api = tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) >= (3, 10)
    horizontal = {"orientation": "horizontal"} if new_api else {"vert": False}
    mechanisms = _ordered(runs["mechanism"], MECHANISMS)
    methods = _ordered_methods(runs["method"])
    groups = sorted(set(zip(runs["n_features"], runs["n_train"])))
    colors = plt.get_cmap("tab10").colors
    step = len(methods) + 1
    height = max(3.0, 0.22 * step * len(groups) + 1.5)
    fig, axes = plt.subplots(
        1, len(mechanisms), figsize=(4.2 * len(mechanisms) + 1.5, height), sharey=True,
        squeeze=False,
    )
    for ax, mechanism in zip(axes[0], mechanisms):
        part = runs[runs["mechanism"] == mechanism]
        for g, (d, n) in enumerate(groups):
            for j, method in enumerate(methods):
                values = part.loc[
                    (part["n_features"] == d) & (part["n_train"] == n) & (part["method"] == method),
                    "gap",
                ].to_numpy()
                if values.size == 0:
                    continue
                box = ax.boxplot(
                    values, positions=[g * step + j], widths=0.7, **horizontal,
                    patch_artist=True, manage_ticks=False,
                    flierprops={"markersize": 2},
                    medianprops={"color": "black"},
                )
                color = colors[j % len(colors)]
                box["boxes"][0].set_facecolor(color)
                # The runs themselves: with few repeats a box is a mere line.
                ax.scatter(
                    values, np.full(values.size, g * step + j), s=10, color=color,
                    edgecolors="black", linewidths=0.3, zorder=3,
                )
            if g:
                ax.axhline(g * step - 1, color="0.85", linewidth=0.8)
        ax.axvline(0.0, color="0.4", linewidth=0.8, linestyle="--")
        ax.set_xscale("symlog", linthresh=1e-3)
        ax.set_xlim(right=max(5e-4, 2.0 * part["gap"].max()))
        reference = "best method" if mechanism in NO_BAYES_PREDICTOR else "Bayes rate"
        ax.set_xlabel(f"R² − {reference}")
        ax.set_title(MECHANISM_TITLES.get(mechanism, mechanism))
        ax.grid(axis="x", color="0.9")
    axes[0][0].set_yticks(
        [g * step + (len(methods) - 1) / 2 for g in range(len(groups))],
        [f"d={d}\nn={_fmt_count(n)}" for d, n in groups],
    )
    axes[0][0].invert_yaxis()
    handles = [
        matplotlib.patches.Patch(facecolor=colors[j % len(colors)], label=_label(m))
        for j, m in enumerate(methods)
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(methods), frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(out) -> tuple[Path, Path]:
    """Rebuild ``summary.md`` and ``figure.png`` from ``out/runs.csv``; return their paths."""
    out = Path(out)
    runs = load_runs(out / RUNS_FILE)
    summary_path, figure_path = out / SUMMARY_FILE, out / FIGURE_FILE
    summary_path.write_text(format_summary(summarize(runs)))
    plot_figure(runs, figure_path)
    return summary_path, figure_path


# --------------------------------------------------------------------------- command line


def _count(text: str) -> int:
    """A positive count, also written like ``1e4``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(value)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``neumiss benchmark`` to ``parser``."""
    parser.epilog = (
        "Rerunning the same command resumes: runs already in OUT/runs.csv are skipped. "
        "Options left out take the paper's values, or the --quick preset's "
        f"({', '.join(f'{k}={v}' for k, v in QUICK.items())})."
    )
    parser.add_argument(
        "--mechanisms", nargs="+", choices=MECHANISMS, metavar="MECHANISM",
        help=f"missingness mechanisms, among {', '.join(MECHANISMS)} (default: all)",
    )
    parser.add_argument(
        "--n-features", nargs="+", type=_count, metavar="D",
        help=f"numbers of features (default: {' '.join(map(str, PAPER_N_FEATURES))})",
    )
    parser.add_argument(
        "--n-train", nargs="+", type=_count, metavar="N",
        help="training-set sizes, e.g. 1e4 2e4 1e5 (the default)",
    )
    parser.add_argument("--n-val", type=_count, help=f"validation rows (default: {PAPER_N_VAL})")
    parser.add_argument("--n-test", type=_count, help=f"test rows (default: {PAPER_N_TEST})")
    parser.add_argument(
        "--repeats", type=_count, help=f"simulations per cell (default: {PAPER_REPEATS})"
    )
    parser.add_argument(
        "--methods", nargs="+", choices=tuple(METHODS), metavar="METHOD",
        help=f"methods, among {', '.join(METHODS)} (default: {' '.join(DEFAULT_METHODS)})",
    )
    parser.add_argument(
        "--out", default="benchmark_results", type=Path,
        help="folder of runs.csv, summary.md and figure.png (default: benchmark_results)",
    )
    parser.add_argument("--quick", action="store_true", help="small preset, a few minutes")
    parser.add_argument(
        "--jobs", type=_count, default=1,
        help="runs at the same time, each in its own process (default: 1)",
    )
    parser.add_argument("--threads", type=_count, default=1, help="threads per run (default: 1)")
    parser.add_argument(
        "--neumiss-depths", nargs="+", type=_non_negative, default=list(NEUMISS_DEPTHS),
        metavar="DEPTH", help="NeuMiss depths tried, the best on validation kept (default: "
        f"{' '.join(map(str, NEUMISS_DEPTHS))})",
    )
    parser.add_argument(
        "--mlp-widths", nargs="+", type=_count, default=list(MLP_WIDTHS), metavar="Q",
        help="MLP hidden widths tried, as multiples of d, the best on validation kept "
        f"(default: {' '.join(map(str, MLP_WIDTHS))})",
    )
    parser.add_argument(
        "--seed", type=_non_negative, default=0, help="base random seed (default: 0)"
    )
    parser.add_argument(
        "--report-only", action="store_true",
        help="only rebuild summary.md and figure.png from OUT/runs.csv",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Run ``neumiss benchmark`` with parsed ``args``; return the exit status."""
    out = args.out
    if args.report_only:
        if not read_runs(out / RUNS_FILE):
            print(f"error: no runs in {out / RUNS_FILE}", file=sys.stderr)
            return 1
        for path in write_report(out):
            print(f"wrote {path}")
        return 0
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
    methods = []
    for name in dict.fromkeys(options["methods"]):
        reason = METHODS[name].unavailable()
        if reason is None:
            methods.append(name)
        else:
            print(f"skipping method {name!r}: {reason}", file=sys.stderr)
    if not methods:
        print("error: none of the requested methods can run here", file=sys.stderr)
        return 1
    options["methods"] = methods
    try:
        specs = grid(**options)
        settings = RunSettings(
            neumiss_depths=tuple(args.neumiss_depths),
            mlp_widths=tuple(args.mlp_widths),
            threads=args.threads,
        )
        result = run_benchmark(
            specs, out, settings=settings, jobs=args.jobs, progress=not args.no_progress
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished runs are in {out / RUNS_FILE}; "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return 130
    print(
        f"{result.n_computed} runs computed, {result.n_skipped} already in {out / RUNS_FILE}, "
        f"{len(result.failures)} failed"
    )
    if (out / SUMMARY_FILE).exists():
        print((out / SUMMARY_FILE).read_text())
        print(f"table: {out / SUMMARY_FILE}\nfigure: {out / FIGURE_FILE}")
    return 1 if result.failures else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m neumiss.benchmark [options]``."""
    parser = argparse.ArgumentParser(
        prog="python -m neumiss.benchmark", description=__doc__.splitlines()[0]
    )
    configure_parser(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    # Run the module under its import name, so that child processes find the same objects.
    from neumiss import benchmark

    sys.exit(benchmark.main())
