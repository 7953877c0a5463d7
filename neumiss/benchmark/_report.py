"""The report of ``runs.csv``: the gaps, ``summary.md`` (medians) and ``figure.png``.

The paper's performance measure is the *gap*: the test R² minus the Bayes
rate. Probit self-masking has no Bayes predictor: its gap is the test R² minus
the best R² of the methods in ``runs.csv`` on the same (cell, repeat),
computed when the table is built (as in the paper). ``summary.md`` puts the
paper's published NeuMiss and EM medians beside ours; ``figure.png`` draws
boxplots in the style of the paper's Figure 5.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ._data import MECHANISMS, NO_BAYES_PREDICTOR
from ._grid import PAPER_MEDIANS
from ._methods import METHODS
from ._store import KEY_COLUMNS, RUNS_FILE, read_runs

MECHANISM_TITLES = {
    "MCAR": "MCAR",
    "MAR": "MAR (logistic)",
    "gaussian_sm": "Gaussian self-masking",
    "probit_sm": "Probit self-masking",
}
SUMMARY_FILE = "summary.md"
FIGURE_FILE = "figure.png"


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


def _label(method: str) -> str:
    """The display name of ``method`` (its command-line name if it is not in METHODS)."""
    return METHODS[method].label if method in METHODS else method


def format_summary(summary: pd.DataFrame) -> str:
    """Markdown tables of :func:`summarize`: gaps per mechanism beside the paper's, then costs."""
    methods = _ordered(summary["method"], tuple(METHODS))
    probit = ("; under probit self-masking, which has no Bayes predictor, minus the best "
              "method's R² on the same repeat" if "probit_sm" in set(summary["mechanism"])
              else "")
    lines = [
        "# neumiss benchmark: medians",
        "",
        "Each method's column gives its median *gap* over the runs: its test R² minus the "
        f"Bayes rate (the R² of the exact conditional expectation{probit}). 0 is the best "
        "possible; closer to 0 is better.",
        "",
        "Other columns: `d` features, `n_train` training rows, `runs` repeats of the cell. "
        "`NeuMiss depth`: the depth NeuMiss chose on its validation rows, one per run "
        "(`16/16`: 16 in both runs), that is the Neumann iterations of its block; at depth "
        "0, none: each missing value is estimated by its mean plus one linear function of "
        "the observed values, the same for every pattern of missing values. `paper EM` and "
        "`paper NeuMiss (depth)`: "
        "the medians published in the paper (20 repeats; EM is R's norm), with NeuMiss's "
        "best depth there.",
    ]
    if "neumiss_default" in methods:
        lines[-1] += (" `NeuMiss` is the paper's network (linear head, depth chosen); "
                      "`NeuMiss (defaults)` is `NeuMissRegressor()` as it comes.")
    for mechanism in _ordered(summary["mechanism"], MECHANISMS):
        lines += ["", f"## {MECHANISM_TITLES.get(mechanism, mechanism)}", ""]
        lines += _gap_table(summary[summary["mechanism"] == mechanism], mechanism, methods)
    lines += [
        "",
        "## Fit seconds and peak memory (medians)",
        "",
        "Seconds of `fit` (NeuMiss and MLP: all candidate depths / widths, with their "
        "validation predictions); MB: peak resident memory added by the fit.",
        "",
    ]
    lines += _cost_table(summary, methods)
    return "\n".join(lines) + "\n"


def _gap_table(part: pd.DataFrame, mechanism: str, methods: list[str]) -> list[str]:
    """The markdown table of one mechanism's median gaps, the paper's beside them."""
    paper = {(p.mechanism, p.n_features, p.n_train): p for p in PAPER_MEDIANS}
    header = ["d", "n_train", "runs"] + [_label(m) for m in methods]
    header += ["NeuMiss depth"] * ("neumiss" in methods)
    header += ["paper EM", "paper NeuMiss (depth)"]
    lines = _table_head(header)
    for (d, n), rows in part.groupby(["n_features", "n_train"], sort=True):
        by_method = rows.set_index("method")
        cells = [str(d), _fmt_count(n), str(int(by_method["n_runs"].max()))]
        cells += [_fmt(by_method["gap"].get(m)) for m in methods]
        if "neumiss" in methods:
            cells.append(by_method["choices"].get("neumiss", ""))
        published = paper.get((mechanism, d, n))
        if published is None:
            cells += ["", ""]
        else:
            neumiss = f"{_fmt(published.neumiss)} ({published.neumiss_depth})"
            cells += [_fmt(published.em), neumiss]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cost_table(summary: pd.DataFrame, methods: list[str]) -> list[str]:
    """The markdown table of median fit seconds and peak memory per cell and method."""
    lines = _table_head(["mechanism", "d", "n_train"] + [_label(m) for m in methods])
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
    return lines


def _ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """The distinct ``values``: those of ``order`` in its order, then the others sorted."""
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


def _table_head(header: list[str]) -> list[str]:
    """The two first lines of a markdown table with columns ``header``."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]


def _fmt_count(n: int) -> str:
    """``10000`` as ``1e4``, ``20000`` as ``2e4``; other counts as they are."""
    exponent = len(str(n)) - 1
    if n >= 1000 and n % 10**exponent == 0:
        return f"{n // 10**exponent}e{exponent}"
    return str(n)


def _fmt(value) -> str:
    """A gap with sign and 4 decimals; "" for a missing one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:+.4f}"


def plot_figure(runs: pd.DataFrame, path) -> None:
    """Save to ``path`` boxplots of the gap in the style of the paper's Figure 5.

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
    methods = _ordered(runs["method"], tuple(METHODS))
    groups = sorted(set(zip(runs["n_features"], runs["n_train"])))
    colors = plt.get_cmap("tab10").colors
    step = len(methods) + 1
    height = max(3.0, 0.22 * step * len(groups) + 1.5)
    fig, axes = plt.subplots(
        1, len(mechanisms), figsize=(4.2 * len(mechanisms) + 1.5, height), sharey=True,
        squeeze=False,
    )
    for ax, mechanism in zip(axes[0], mechanisms):
        _draw_panel(ax, runs[runs["mechanism"] == mechanism], mechanism, groups, methods,
                    colors, horizontal)
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


def _draw_panel(ax, part: pd.DataFrame, mechanism: str, groups: list, methods: list[str],
                colors, horizontal: dict) -> None:
    """One mechanism's panel of :func:`plot_figure`: a group of boxes per (d, n_train),
    one box per method with the runs as dots, x the gap on a symmetric log scale."""
    step = len(methods) + 1
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


def write_report(out) -> tuple[Path, Path]:
    """Rebuild ``summary.md`` and ``figure.png`` from ``out/runs.csv``; return their paths."""
    out = Path(out)
    runs = load_runs(out / RUNS_FILE)
    summary_path, figure_path = out / SUMMARY_FILE, out / FIGURE_FILE
    summary_path.write_text(format_summary(summarize(runs)))
    plot_figure(runs, figure_path)
    return summary_path, figure_path
