"""The report of the real-data suite: ``summary.md`` and ``figure.png`` from ``runs.csv``.

Per task and method: the mean and standard deviation (ddof=1) of each metric
over the folds of all repeats (5 folds x 2 repeats = 10 by default). The
ranking metric is R² for regression (higher is better) and the log loss for
binary tasks (lower is better). Over tasks, for each method:

* **mean rank**: its rank among the methods run on a task (1 = best, ties
  share the mean rank), averaged over the tasks it ran on (also per kind);
* **within 1 std**: the number of tasks where its mean is within one standard
  deviation of the best method's folds of the best mean;
* **fit seconds**: the mean over all its fits.

A method that ran on fewer of a task's folds than another method did (a run still under
way, to be resumed, or a fit that failed on a fold) is shown there with its number of
folds, but neither ranked nor counted there, nor taken as the best: its mean is over other
folds than theirs.

The same table, and the tasks by methods, follow for each half of the suite's split
(tuning and confirmation: each task's ``half``).

``figure.png`` shows, per task, each method's score minus the best method's,
fold by fold (paired on the folds, which are the same for every method): the
mean and, as error bars, the standard deviation of that difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ._methods import METHODS
from ._protocol import RANKING_METRIC
from ._store import RUNS_FILE, read_runs
from ._tasks import HALVES, KINDS, TASKS

SUMMARY_FILE = "summary.md"
FIGURE_FILE = "figure.png"
METRIC_TITLES = {"r2": "R²", "log_loss": "log loss", "auc": "AUC", "accuracy": "accuracy"}
#: Metrics shown per kind of task, the ranking metric first.
SHOWN_METRICS = {"regression": ("r2",), "binary": ("log_loss", "auc", "accuracy")}


def load_runs(path) -> pd.DataFrame:
    """``runs.csv`` as a DataFrame, with ``metric`` (the ranking metric's value) and
    ``utility`` (the same, signed so that higher is better)."""
    read_runs(path)  # checks the columns, drops a cut last line
    text = {c: str for c in ("task", "method", "kind", "test_digest", "config", "params",
                             "finished_at")}
    return add_utility(pd.read_csv(path, dtype=text))


def add_utility(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``runs`` (columns of ``runs.csv``) with ``metric`` and ``utility`` columns."""
    runs = runs.copy()
    runs["metric"] = np.nan
    runs["utility"] = np.nan
    for kind, (metric, higher_is_better) in RANKING_METRIC.items():
        rows = runs["kind"] == kind
        runs.loc[rows, "metric"] = runs.loc[rows, metric]
        runs.loc[rows, "utility"] = runs.loc[rows, metric] * (1 if higher_is_better else -1)
    return runs


def _ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """The distinct ``values``: those of ``order`` in its order, then the others sorted."""
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, method) of a frame from :func:`add_utility`.

    Returns
    -------
    DataFrame, one row per (task, method), tasks and methods in table order,
    with columns task, method, kind, n_rows, n_features, missing_share,
    n_folds, ``<metric>_mean`` and ``<metric>_std`` for R², log loss, AUC
    and accuracy, utility_mean, fit_seconds (mean), complete (whether it ran on as
    many folds as the task's most), rank (within the task, among the complete; NaN
    for the others) and within_std (within one std of the best method's folds of the
    best mean; False where not complete).
    """
    grouped = runs.groupby(["task", "method"], sort=False)
    summary = grouped.agg(
        kind=("kind", "first"),
        n_rows=("n_rows", "first"),
        n_features=("n_features", "first"),
        missing_share=("missing_share", "first"),
        n_folds=("utility", "size"),
        utility_mean=("utility", "mean"),
        fit_seconds=("fit_seconds", "mean"),
    )
    for metric in METRIC_TITLES:
        summary[f"{metric}_mean"] = grouped[metric].mean()
        summary[f"{metric}_std"] = grouped[metric].std()
    summary = summary.reset_index()
    task_order = {t: i for i, t in enumerate(_ordered(summary["task"], tuple(TASKS)))}
    method_order = {m: i for i, m in enumerate(_ordered(summary["method"], tuple(METHODS)))}
    summary = summary.sort_values(
        ["task", "method"], key=lambda c: c.map(task_order if c.name == "task" else method_order)
    ).reset_index(drop=True)
    summary["complete"] = summary["n_folds"] == summary.groupby(
        "task", sort=False)["n_folds"].transform("max")
    by_task = summary[summary["complete"]].groupby("task", sort=False)
    summary["rank"] = by_task["utility_mean"].rank(ascending=False, method="average")
    best = summary.loc[by_task["utility_mean"].idxmax()].set_index("task")
    metric = summary["kind"].map({k: m for k, (m, _) in RANKING_METRIC.items()})
    mean = np.array([summary.at[i, f"{m}_mean"] for i, m in metric.items()])
    best_mean = np.array([best.at[t, f"{m}_mean"] for t, m in zip(summary["task"], metric)])
    best_std = np.array([best.at[t, f"{m}_std"] for t, m in zip(summary["task"], metric)])
    summary["within_std"] = (np.abs(mean - best_mean) <= np.nan_to_num(best_std)) & (
        summary["complete"])
    return summary


def rank_methods(summary: pd.DataFrame) -> pd.DataFrame:
    """Per method, from :func:`summarize`: ``n_tasks`` (those it is ranked on),
    ``mean_rank`` and its mean per kind (``mean_rank_regression``, ``mean_rank_binary``;
    NaN where it is ranked on none), ``n_within_std`` and ``fit_seconds`` (mean over the
    tasks it is ranked on of the per-fold mean)."""
    table = summary.groupby("method", sort=False).agg(
        n_tasks=("rank", "count"),
        mean_rank=("rank", "mean"),
        n_within_std=("within_std", "sum"),
    )
    table["fit_seconds"] = summary[summary["complete"]].groupby("method")["fit_seconds"].mean()
    for kind in KINDS:
        part = summary[summary["kind"] == kind]
        table[f"mean_rank_{kind}"] = part.groupby("method")["rank"].mean()
    return table.reset_index()


def _fmt(value: float, digits: int = 3) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _mean_std(row: pd.Series, metric: str) -> str:
    return f"{_fmt(row[f'{metric}_mean'])} ± {_fmt(row[f'{metric}_std'])}"


def _not_ranked(row: pd.Series, full: int) -> str:
    """What follows the figures of a method's row of :func:`summarize`: nothing where it is
    ranked, else on how many of the task's ``full`` folds it ran."""
    return "" if row["complete"] else f" ({int(row['n_folds'])}/{full} folds, not ranked)"


def _bold_best(cells: list[str], values: Sequence[float], higher_is_better: bool) -> list[str]:
    """``cells`` with the one(s) of the best value in bold."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return cells
    best = max(finite) if higher_is_better else min(finite)
    return [f"**{c}**" if v == best else c for c, v in zip(cells, values)]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


#: The method whose choices :func:`format_choices` tabulates: the defaults.
CHOSEN_BY = "neumiss"
#: What a NeuMiss fit chose (keys of the ``params`` column, ``fitted_info``), by title.
CHOICES = {"depth": "depth", "head": "head", "spline": "spline term", "mask_skip": "mask term",
           "weight_sharing": "weights", "log_target": "log target",
           "integer_levels": "value indicators"}


def _counts(values: pd.Series) -> str:
    """``value ×count`` of each distinct value, most frequent first (ties by value)."""
    counts = values.value_counts()
    counts = counts.sort_index(key=lambda index: index.astype(str)).sort_values(
        ascending=False, kind="stable")
    return ", ".join(f"{value} ×{count}" for value, count in counts.items())


def format_choices(runs: pd.DataFrame, method: str = CHOSEN_BY) -> list[str]:
    """A markdown section: per task, what ``method``'s fits chose over the folds (from
    the ``params`` column): block depths, heads (linear or an MLP's hidden layers), how
    many folds kept the spline term, the mask's term, the log of the target and indicator
    columns for integer values, the weight modes and the median epochs. Empty without
    rows of ``method`` with those choices."""
    part = runs[runs["method"] == method]
    if part.empty or "params" not in part:
        return []
    params = part["params"].map(lambda text: json.loads(text) if isinstance(text, str)
                                else {})
    if not params.map(lambda p: "depth" in p).all():
        return []
    choices = pd.DataFrame(list(params), index=part.index)
    choices["task"] = part["task"]
    choices["head"] = choices["mlp_depth"].map(
        lambda d: "linear" if d == 0 else f"MLP ({int(d)} layers)")
    rows = []
    for task, group in choices.groupby("task", sort=False):
        n = len(group)
        row = [task, str(n), _counts(group["depth"]), _counts(group["head"])]
        for key in ("spline", "mask_skip", "log_target", "integer_levels"):
            kept = group[key].fillna(0).astype(bool).sum() if key in group else 0
            row.append(f"{kept}/{n}")
        weights = group.get("mlp_weight", pd.Series(dtype=float)).dropna()
        row += [_fmt(weights.median(), 2) if len(weights) else "-",
                _counts(group["weight_sharing"]), _fmt(group["epochs"].median(), 0)]
        rows.append(row)
    titles = [CHOICES[key] for key in ("spline", "mask_skip", "log_target", "integer_levels")]
    return [
        "", f"## What `{method}` chose", "",
        "Per task, over its folds: the block's depth (0: the order-0 estimate from the "
        "moments, untrained, feeding the head), "
        "the head, in how many folds the heads kept the spline term, the mask's own term, "
        "the log of the target and indicator columns for integer values, the median weight "
        "of the MLP head in the head kept (``mlp_weight_``: 0 the linear head, 1 an MLP "
        "head alone, between their blend; - where not recorded), the weight mode "
        "and the median number of epochs of the network kept (0: kept untrained).",
        "",
    ] + _table(["task", "folds", CHOICES["depth"], CHOICES["head"], *titles,
                "MLP weight", CHOICES["weight_sharing"], "epochs"], rows)


def format_summary(summary: pd.DataFrame, runs: pd.DataFrame | None = None,
                   halves: Mapping[str, str] | None = None) -> str:
    """``summary.md``: the methods' ranks over all tasks, then per half of the suite's split
    (``halves``: task -> "tuning" or "confirmation"; default: the ``half`` of each task of
    :data:`TASKS`) the methods' ranks over its tasks and its tasks by methods (tasks in
    neither half last; without halves, all tasks in one table), what the defaults chose per
    task (with ``runs``, :func:`format_choices`), then one table per task."""
    if halves is None:
        halves = {name: task.half for name, task in TASKS.items() if task.half is not None}
    tasks = list(dict.fromkeys(summary["task"]))
    lines = [
        "# neumiss benchmark: real data",
        "",
        "Mean ± standard deviation over the cross-validation folds (5 per repeat, the "
        "same folds for every method). Regression: R² (higher is better); binary: log loss "
        "(lower is better). Best in bold.",
        "",
        "## Methods over tasks",
        "",
        "Mean rank among the methods run on each task (1 = best); within 1 std: tasks where "
        "the method's mean is within one standard deviation (the best method's, over folds) "
        "of the best mean; fit seconds: mean per fit."
        + ("" if summary["complete"].all() else
           " A method that ran on fewer of a task's folds than the others is shown there "
           "with its number of folds, and not ranked there."),
        "",
    ]
    lines += _methods_table(summary)
    split = [half for half in HALVES if any(halves.get(task) == half for task in tasks)]
    if not split:
        lines += ["", "## Ranking metric per task", ""]
        lines += _ranking_table(summary, tasks)
    for half in split:
        part_tasks = [task for task in tasks if halves.get(task) == half]
        part = summary[summary["task"].isin(part_tasks)]
        lines += [
            "", f"## The {half} half ({len(part_tasks)} of {len(tasks)} tasks)", "",
            f"The methods over the tasks of the {half} half (as above), then the ranking "
            "metric per task.",
            "",
        ]
        lines += _methods_table(part) + [""] + _ranking_table(part, part_tasks)
    rest = [task for task in tasks if halves.get(task) not in HALVES]
    if split and rest:
        lines += ["", f"## Tasks in neither half ({len(rest)} of {len(tasks)} tasks)", ""]
        lines += _ranking_table(summary[summary["task"].isin(rest)], rest)
    if runs is not None:
        lines += format_choices(runs)
    for task in tasks:
        lines += _task_table(summary[summary["task"] == task], task)
    return "\n".join(lines) + "\n"


def _methods_table(summary: pd.DataFrame) -> list[str]:
    """The markdown table of :func:`rank_methods` of ``summary``: each method's mean rank
    (over all tasks and per kind), tasks within one std of the best, mean fit seconds."""
    ranks = rank_methods(summary).set_index("method")
    rows = []
    for method in _ordered(summary["method"], tuple(METHODS)):
        r = ranks.loc[method]
        rows.append([
            method, _fmt(r["mean_rank"], 2), _fmt(r["mean_rank_regression"], 2),
            _fmt(r["mean_rank_binary"], 2), f"{int(r['n_within_std'])}/{int(r['n_tasks'])}",
            _fmt(r["fit_seconds"], 2),
        ])
    return _table(["method", "mean rank", "regression", "binary", "within 1 std",
                   "fit seconds"], rows)


def _ranking_table(summary: pd.DataFrame, tasks: list[str]) -> list[str]:
    """The markdown table of each task's ranking metric by method (those of ``summary``),
    the best ranked in bold."""
    methods = _ordered(summary["method"], tuple(METHODS))
    rows = []
    for task in tasks:
        part = summary[summary["task"] == task].set_index("method")
        kind = part["kind"].iloc[0]
        metric, higher = RANKING_METRIC[kind]
        full = int(part["n_folds"].max())
        values = [part.at[m, f"{metric}_mean"] if m in part.index and part.at[m, "complete"]
                  else math.nan for m in methods]
        cells = [_mean_std(part.loc[m], metric) + _not_ranked(part.loc[m], full)
                 if m in part.index else "" for m in methods]
        head = [task, f"{METRIC_TITLES[metric]}", str(int(part["n_rows"].iloc[0]))]
        rows.append(head + _bold_best(cells, values, higher))
    return _table(["task", "metric", "rows", *methods], rows)


def _task_table(part: pd.DataFrame, task: str) -> list[str]:
    """One task's section: what the data set is, then its metrics, rank and fit seconds
    per method, the best of each metric in bold."""
    first = part.iloc[0]
    kind = first["kind"]
    lines = [
        "", f"## {task}", "",
        f"{kind}, {int(first['n_rows'])} rows, {int(first['n_features'])} features, "
        f"{100 * first['missing_share']:.1f}% of feature cells missing; "
        f"{int(part['n_folds'].max())} folds.",
        "",
    ]
    metrics = SHOWN_METRICS[kind]
    full = int(part["n_folds"].max())
    columns = []
    for metric in metrics:
        higher = metric != "log_loss"
        cells = [_mean_std(row, metric) for _, row in part.iterrows()]
        ranked = part[f"{metric}_mean"].where(part["complete"])
        columns.append(_bold_best(cells, list(ranked), higher))
    rows = [
        [row["method"] + _not_ranked(row, full), *(column[i] for column in columns),
         _fmt(row["rank"], 1), _fmt(row["fit_seconds"], 2)]
        for i, (_, row) in enumerate(part.iterrows())
    ]
    return lines + _table(["method", *(METRIC_TITLES[m] for m in metrics), "rank",
                           "fit seconds"], rows)


def paired_differences(runs: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Per (task, method): mean and std over folds of its utility minus the best method's
    (the best ranked by mean, on the same fold); 0 for the best method itself."""
    ranked = summary[summary["complete"]]
    best = ranked.loc[ranked.groupby("task", sort=False)["utility_mean"].idxmax()]
    best_runs = runs.merge(best[["task", "method"]], on=["task", "method"])
    fold = ["task", "repeat", "fold", "seed"]
    paired = runs.merge(best_runs[fold + ["utility"]], on=fold, suffixes=("", "_best"))
    paired["difference"] = paired["utility"] - paired["utility_best"]
    table = paired.groupby(["task", "method"], sort=False)["difference"].agg(["mean", "std"])
    return table.reset_index()


def plot_figure(runs: pd.DataFrame, summary: pd.DataFrame, path) -> None:
    """Save to ``path`` each method's score minus the best method's, per task, with the
    standard deviation over folds as error bars; one panel per kind of task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    differences = paired_differences(runs, summary)
    methods = _ordered(summary["method"], tuple(METHODS))
    kinds = [k for k in KINDS if (summary["kind"] == k).any()]
    colors = plt.get_cmap("tab10").colors
    n_tasks = max(summary[summary["kind"] == k]["task"].nunique() for k in kinds)
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(6.0 * len(kinds), 0.5 * n_tasks * (1 + 0.12 * len(methods)) + 2),
        squeeze=False,
    )
    x_titles = {"regression": "R² − best R²", "binary": "best log loss − log loss"}
    offsets = np.linspace(-0.3, 0.3, len(methods)) if len(methods) > 1 else np.zeros(1)
    for ax, kind in zip(axes[0], kinds):
        tasks = list(dict.fromkeys(summary.loc[summary["kind"] == kind, "task"]))
        for j, method in enumerate(methods):
            part = differences[differences["method"] == method].set_index("task")
            present = [t for t in tasks if t in part.index]
            ax.errorbar(
                part.loc[present, "mean"], [tasks.index(t) + offsets[j] for t in present],
                xerr=part.loc[present, "std"].fillna(0.0), fmt="o", markersize=4, capsize=2,
                color=colors[j % len(colors)], label=method,
            )
        ax.axvline(0.0, color="0.4", linewidth=0.8, linestyle="--")
        ax.set_xscale("symlog", linthresh=0.01)
        shown = differences[differences["task"].isin(tasks)]
        low = (shown["mean"] - shown["std"].fillna(0.0)).min()
        high = (shown["mean"] + shown["std"].fillna(0.0)).max()
        ax.set_xlim(1.3 * min(low, -0.01), 1.3 * max(high, 0.01))  # error bars in full
        ax.set_yticks(range(len(tasks)), tasks)
        ax.invert_yaxis()
        ax.set_xlabel(x_titles[kind])
        ax.set_title(f"{kind} ({METRIC_TITLES[RANKING_METRIC[kind][0]]})")
        ax.grid(axis="x", color="0.9")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:  # a method absent from the first panel (none yet) is added
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(out) -> tuple[Path, Path]:
    """Rebuild ``summary.md`` and ``figure.png`` from ``out/runs.csv``; return their paths."""
    out = Path(out)
    runs = load_runs(out / RUNS_FILE)
    summary = summarize(runs)
    summary_path, figure_path = out / SUMMARY_FILE, out / FIGURE_FILE
    summary_path.write_text(format_summary(summary, runs))
    plot_figure(runs, summary, figure_path)
    return summary_path, figure_path
