"""How much of the trees' score on the real-data suite comes from interactions.

Gradient boosting (``HistGradientBoosting`` with the suite's defaults: NaN native,
categories from the dtype) is fitted twice on each task's folds (both repeats, the
suite's folds and seeds): as it is, and restricted to an additive model
(``interaction_cst="no_interactions"``: every tree splits on one feature). The gap
between the two is what the trees gain from interactions; a NeuMiss head that is
linear in its spline's ramps fits an additive model too, so a task whose trees lead
the defaults with a large gap is one where only interactions pay. ``--drop`` refits
both without the named columns (a column that identifies clusters of rows, for
example). Runs on the tasks of the tuning half unless ``--tasks`` or ``--half`` says
otherwise. The defaults' scores are read from ``--runs`` (the suite's ``runs.csv``).

Usage (from a checkout, the real-data cache exported by ``scripts/setup_realdata.sh``)::

    python benchmarks/tree_interactions.py --out results/realdata/tree_interactions.csv
    python benchmarks/tree_interactions.py --tasks tbc_hgt --drop nocc --out FILE.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from neumiss.benchmark.realdata._cache import DEFAULT_CACHE, load_task
from neumiss.benchmark.realdata._methods import METHODS, predict
from neumiss.benchmark.realdata._protocol import (
    RANKING_METRIC,
    fold_indices,
    method_seed,
    score,
)
from neumiss.benchmark.realdata._report import add_utility
from neumiss.benchmark.realdata._tasks import select_tasks

#: The suite's cross-validation repeats.
REPEATS = 2
#: The variants fitted, as ``HistGradientBoosting`` keyword arguments.
VARIANTS = {"hgb": {}, "hgb_additive": {"interaction_cst": "no_interactions"}}


def task_scores(task, cache, drop: tuple[str, ...] = (), seed: int = 0) -> pd.DataFrame:
    """One row per variant, repeat and fold of ``task``: its ranking metric (R² or log
    loss) on the fold's test rows."""
    X, y = load_task(task, cache)
    X = X.drop(columns=[c for c in drop if c in X.columns])
    metric = RANKING_METRIC[task.kind][0]
    rows = []
    for repeat in range(REPEATS):
        for fold, (train, test) in enumerate(fold_indices(y, task.kind, repeat, seed)):
            for variant, options in VARIANTS.items():  # the suite's hgb, then constrained
                fitted = METHODS["hgb"].build(task.kind, method_seed(seed, repeat, fold))
                fitted.set_params(**options).fit(X.iloc[train], y[train])
                predicted = predict(fitted, task.kind, X.iloc[test])
                rows.append({"task": task.name, "half": task.half, "metric": metric,
                             "variant": variant, "repeat": repeat, "fold": fold,
                             "score": score(task.kind, y[test], predicted)[metric]})
    return pd.DataFrame(rows)


def summary(scores: pd.DataFrame, runs: pd.DataFrame | None) -> pd.DataFrame:
    """Per task: the mean of each variant, the interaction gain (hgb less additive, made
    positive when it helps) with the std of its per-fold values, and the defaults'
    mean from ``runs`` (``neumiss`` rows, the same folds) where given."""
    wide = scores.pivot_table(index=["task", "half", "metric", "repeat", "fold"],
                              columns="variant", values="score").reset_index()
    higher = dict(RANKING_METRIC.values())  # metric -> higher is better
    sign = np.where(wide["metric"].map(higher), 1.0, -1.0)
    wide["interaction_gain"] = sign * (wide["hgb"] - wide["hgb_additive"])
    if runs is not None:  # the defaults' ranking metric on each fold
        defaults = add_utility(runs[runs["method"] == "neumiss"]).rename(
            columns={"metric": "neumiss"})
        wide = wide.merge(defaults[["task", "repeat", "fold", "neumiss"]],
                          on=["task", "repeat", "fold"], how="left")
    table = wide.groupby(["task", "half", "metric"], sort=False).agg(
        hgb=("hgb", "mean"), hgb_additive=("hgb_additive", "mean"),
        interaction_gain=("interaction_gain", "mean"),
        gain_std=("interaction_gain", "std"),
        **({"neumiss": ("neumiss", "mean")} if runs is not None else {}))
    return table.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", help="task names (default: the half's)")
    parser.add_argument("--half", default="tuning", choices=("tuning", "confirmation"))
    parser.add_argument("--drop", nargs="+", default=(), help="columns left out of the fits")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--runs", default="results/realdata/runs.csv",
                        help="the suite's runs.csv, for the defaults' scores ('' for none)")
    parser.add_argument("--out", required=True, help="the summary's CSV")
    args = parser.parse_args()
    tasks = select_tasks(args.tasks, args.half)
    scores = pd.concat([task_scores(task, args.cache, tuple(args.drop)) for task in tasks])
    runs = pd.read_csv(args.runs) if args.runs else None
    table = summary(scores, runs)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False, float_format="%.4f")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
