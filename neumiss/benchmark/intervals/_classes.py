"""Prediction sets in the interval benchmark (``--task classification``): simulated
classes with missing values, the conformal sets against the oracle set.

A run draws ``n_train`` rows of the paper's simulation (as the regression runs) and cuts
``y`` at its terciles into three classes. Given ``(X_obs, M)``, ``y`` is Gaussian (the
Bayes predictor and :meth:`~neumiss.simulation.SimulationTruth.predictive_variance`),
so the true class probabilities are known: the **oracle set** keeps the most probable
classes until they hold ``1 - alpha`` (the smallest set with that coverage for every
row). Each :data:`METHODS` of :class:`~neumiss.intervals.ConformalClassifier` is fitted
at ``alpha`` over one NeuMiss classifier (``"lac"`` and ``"aps"`` fitted with the same
seed, hence the same split, or below ``CROSS_ROWS`` training rows the same CV+ folds, and
the same networks; their Mondrian forms recalibrate the same scores), with MAPIE's LAC
on the calibration rows of the split fit where MAPIE is installed (:mod:`._mapie`), and
scored on ``n_test`` fresh rows per number of missing entries:
``classes_runs.csv`` gets rows, rows covered, summed set sizes (the method's and the
oracle's) and empty sets; ``classes_summary.md`` pools them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.base import clone

from .._store import read_rows
from ._mapie import MAPIE_METHODS, mapie_sets, mapie_unavailable
from ._runner import ALPHA, BASE_PARAMS, KEY_COLUMNS, N_FEATURES, IntervalRun, Task, simulate

#: Methods compared: ConformalClassifier methods, MAPIE's LAC (:mod:`._mapie`; left out
#: where MAPIE is not installed), and the oracle set.
METHODS = ("lac", "aps", "lac-mondrian", "aps-mondrian", *MAPIE_METHODS, "oracle")
#: The issue's grid: MCAR, MAR and self-masking, 20 repeats.
MECHANISMS = ("MCAR", "MAR", "gaussian_sm")
MISSING_RATES = (0.3,)
N_TRAIN = (2000,)
N_TEST = 10_000
N_CLASSES = 3
RUNS_FILE = "classes_runs.csv"
SUMMARY_FILE = "classes_summary.md"
#: Fewest test rows of a group of rows with the same number of missing entries (per
#: run) for its coverage to count (the issue: groups with >= 100 test rows).
MIN_GROUP_ROWS = 100

COLUMNS = (*KEY_COLUMNS, "method", "n_missing", "n_rows", "n_covered", "size_sum",
           "oracle_size_sum", "n_empty", "fit_seconds")


def class_probabilities(truth, X, cuts: np.ndarray) -> np.ndarray:
    """``P(class k | X_obs, M)`` (n, len(cuts) + 1): the Gaussian law of ``y`` given
    what is observed, between consecutive ``cuts``."""
    center = truth.bayes_predict(X)[:, None]
    scale = np.sqrt(truth.predictive_variance(X))[:, None]
    edges = norm.cdf((np.concatenate([[-np.inf], cuts, [np.inf]]) - center) / scale)
    return np.diff(edges, axis=1)


def oracle_sets(proba: np.ndarray, alpha: float) -> np.ndarray:
    """The most probable classes of each row until they hold ``1 - alpha``, bool (n, k)."""
    order = np.argsort(-proba, axis=1)
    held = np.cumsum(np.take_along_axis(proba, order, axis=1), axis=1)
    keep = np.concatenate([np.ones((len(proba), 1), bool), held[:, :-1] < 1 - alpha], axis=1)
    sets = np.zeros_like(keep)
    np.put_along_axis(sets, order, keep, axis=1)
    return sets


def conformal_sets(X, labels, X_test, seed: int, alpha: float, params: dict,
                   imputed=None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The sets of ``X_test`` (bool (n_test, n_classes), columns the sorted labels) of
    every :class:`~neumiss.intervals.ConformalClassifier` method of :data:`METHODS`, and
    MAPIE's where it is installed (``imputed`` as :func:`~._mapie.mapie_sets` takes it),
    fitted on ``(X, labels)`` over ``NeuMissClassifier(**params)`` with ``seed``; and
    the seconds each took (fit and sets). ``ConformalClassifier`` is fitted as its
    default ``cv="auto"`` fits it: by CV+ below ``CROSS_ROWS`` rows; MAPIE's split LAC
    then takes the split fit of the same seed (its training and calibration rows, its
    network), as on larger tables."""
    from ...estimators import NeuMissClassifier
    from ...intervals import ConformalClassifier

    sets, seconds = {}, {}
    for score in ("lac", "aps"):
        start = time.perf_counter()
        model = ConformalClassifier(NeuMissClassifier(**params), method=score, alpha=alpha,
                                    random_state=seed).fit(X, labels)
        for method in (score, f"{score}-mondrian"):
            sets[method] = model.set_params(method=method).predict_set(X_test)[0]
            seconds[method] = time.perf_counter() - start
        if score == "lac" and mapie_unavailable() is None:
            start = time.perf_counter()
            if model.cross_conformal_:  # MAPIE's split: the split fit of the same seed
                model = clone(model).set_params(cv=None).fit(X, labels)
            sets |= mapie_sets(model, X, labels, X_test, seed, imputed)
            seconds |= dict.fromkeys(MAPIE_METHODS, time.perf_counter() - start)
    return sets, seconds


def set_rows(sets: dict, labels: np.ndarray, n_missing: np.ndarray, seconds: dict,
             sums: dict | None = None) -> list[dict]:
    """Per method of ``sets`` (in the order of :data:`METHODS`) and number of missing
    entries (``n_missing``, per test row): rows, rows whose set holds their label, summed
    set sizes, empty sets, the method's ``seconds``, and the per-group sums of the
    per-row arrays of ``sums`` (column name -> (n_test,))."""
    rows = []
    for method in [name for name in METHODS if name in sets]:
        covered = sets[method][np.arange(labels.size), labels]
        size = sets[method].sum(axis=1)
        for q in np.unique(n_missing):
            group = n_missing == q
            rows.append({
                "method": method, "n_missing": int(q), "n_rows": int(group.sum()),
                "n_covered": int(covered[group].sum()), "size_sum": int(size[group].sum()),
                "n_empty": int((size[group] == 0).sum()),
                "fit_seconds": f"{seconds[method]:.2f}",
            } | {name: int(values[group].sum()) for name, values in (sums or {}).items()})
    return rows


def execute_classes_run(run: IntervalRun, seed: int = 0, n_test: int = N_TEST,
                        n_features: int = N_FEATURES, alpha: float = ALPHA,
                        base_params: dict | None = None) -> list[dict]:
    """Simulate, fit and score one classification run; its ``classes_runs.csv`` rows."""
    params = dict(BASE_PARAMS if base_params is None else base_params)
    X, y, truth, X_test, y_test, model_seed = simulate(run, seed, n_test, n_features)
    cuts = np.quantile(y, np.arange(1, N_CLASSES) / N_CLASSES)
    labels, labels_test = np.digitize(y, cuts), np.digitize(y_test, cuts)
    sets, seconds = conformal_sets(X, labels, X_test, model_seed, alpha, params)
    sets["oracle"] = oracle_sets(class_probabilities(truth, X_test, cuts), alpha)
    seconds["oracle"] = 0.0
    key = dict(zip(KEY_COLUMNS, run.key()))
    return [key | row for row in set_rows(
        sets, labels_test, np.isnan(X_test).sum(axis=1), seconds,
        {"oracle_size_sum": sets["oracle"].sum(axis=1)})]


def check_set_row(row: dict) -> None:
    """Refuse a row of a prediction sets' runs file whose method is unknown or whose
    counts are not whole numbers (ValueError)."""
    if row["method"] not in METHODS:
        raise ValueError(f"unknown method {row['method']!r}")
    int(row["n_rows"]), int(row["n_covered"]), int(row["size_sum"])


def read_classes_runs(path) -> list[dict]:
    """Rows of a ``classes_runs.csv`` (strings); [] when there is none."""
    return read_rows(path, COLUMNS, check_set_row, "interval benchmark (classification)")


#: The suite's prediction sets, for :func:`~._runner.run_intervals`.
CLASSIFICATION = Task(execute_classes_run, RUNS_FILE, COLUMNS, read_classes_runs)


def summarize_classes(rows: list[dict]) -> dict:
    """``{setting: {method: stats}}``, stats over the repeats: marginal coverage, the
    lowest coverage of a group of rows with the same number of missing entries (groups
    with at least :data:`MIN_GROUP_ROWS` test rows per run), mean set size, its ratio to
    the oracle's, and the share of empty sets; and ``pooled_groups``, the coverage of
    each such group over all the repeats together."""
    runs = defaultdict(lambda: defaultdict(list))
    pooled = defaultdict(lambda: np.zeros(3))  # (setting, method, q): covered, rows, runs
    for row in rows:
        runs[tuple(row[c] for c in KEY_COLUMNS)][row["method"]].append(row)
        key = (tuple(row[c] for c in KEY_COLUMNS[:3]), row["method"], int(row["n_missing"]))
        pooled[key] += (int(row["n_covered"]), int(row["n_rows"]), 1)
    summary = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for (setting, method, _), (covered, n, n_runs) in pooled.items():
        if n / n_runs >= MIN_GROUP_ROWS:  # a group's coverage over all the repeats
            summary[setting][method]["pooled_groups"].append(covered / n)
    for run, methods in runs.items():
        for method, groups in methods.items():
            n = sum(int(g["n_rows"]) for g in groups)
            stats = summary[run[:3]][method]
            stats["coverage"].append(sum(int(g["n_covered"]) for g in groups) / n)
            stats["worst_group"].append(min(
                (int(g["n_covered"]) / int(g["n_rows"]) for g in groups
                 if int(g["n_rows"]) >= MIN_GROUP_ROWS), default=np.nan))
            size = sum(int(g["size_sum"]) for g in groups)
            stats["size"].append(size / n)
            stats["size_ratio"].append(size / sum(int(g["oracle_size_sum"]) for g in groups))
            stats["empty"].append(sum(int(g["n_empty"]) for g in groups) / n)
    return summary


def format_classes_summary(summary: dict, alpha: float = ALPHA) -> str:
    """``classes_summary.md``: one table per setting, one line per method."""
    lines = [
        "# Prediction sets with missing values (simulated, 3 classes)", "",
        f"alpha = {alpha} (target coverage {1 - alpha:.2f}); mean over the repeats "
        "(min-max); lowest group: the lowest coverage among the groups of test rows with "
        f"the same number of missing entries holding >= {MIN_GROUP_ROWS} rows, in each "
        "repeat, and (pooled) over all the repeats together; size / oracle: mean set size "
        "over the oracle set's (the true class probabilities).", "",
    ]
    for setting in sorted(summary):
        mechanism, rate, n_train = setting
        repeats = len(next(iter(summary[setting].values()))["coverage"])
        lines += [f"## {mechanism}, {float(rate):.0%} missing, n_train = {n_train} "
                  f"({repeats} repeats)", "",
                  "| method | coverage | lowest group | (pooled) | set size | size / oracle "
                  "| empty |", "|---|---|---|---|---|---|---|"]
        for method in METHODS:
            if method not in summary[setting]:
                continue
            stats = summary[setting][method]
            spread = [f"{np.mean(v):.3f} ({np.min(v):.3f}-{np.max(v):.3f})"
                      for v in (stats["coverage"], stats["worst_group"], stats["size"],
                                stats["size_ratio"])]
            pooled = min(stats["pooled_groups"], default=np.nan)
            lines.append("| " + " | ".join([method, *spread[:2], f"{pooled:.3f}", *spread[2:],
                                            f"{np.mean(stats['empty']):.3f}"]) + " |")
        lines.append("")
    return "\n".join(lines)


def write_classes_report(out: Path) -> list[Path]:
    """Write ``classes_summary.md`` from ``out/classes_runs.csv``; the paths written."""
    path = out / SUMMARY_FILE
    path.write_text(format_classes_summary(summarize_classes(
        read_classes_runs(out / RUNS_FILE))))
    return [path]
