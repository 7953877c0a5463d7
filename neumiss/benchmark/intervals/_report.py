"""Tables and figure of the interval benchmark, from its ``runs.csv``.

Groups are the numbers of missing entries of the test rows; the sparse ends
(e.g. no or all entries missing) are pooled into their neighbour until every
group holds at least :data:`MIN_GROUP_ROWS` test rows per run, so that a
group's coverage is not noise (its standard error is then at most 0.013 at
90%). Per setting and method: marginal coverage, the lowest group coverage and
the mean width over the oracle's, as mean and spread (min to max) over the repeats.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from ._runner import KEY_COLUMNS, METHODS, read_interval_runs

SUMMARY_FILE = "summary.md"
TABLE_FILE = "summary.csv"
FIGURE_FILE = "figure.png"
#: Fewest test rows per group (per run) after pooling the sparse ends.
MIN_GROUP_ROWS = 500

_SETTING = ("mechanism", "missing_rate", "n_train")


def pool_groups(counts: dict[int, int], minimum: int = MIN_GROUP_ROWS) -> list[list[int]]:
    """Consecutive numbers of missing entries, pooled from both ends until each group
    has ``minimum`` rows (``counts``: rows per number); one group if all are too few."""
    keys = sorted(counts)
    groups = [[k] for k in keys]
    while len(groups) > 1 and sum(counts[k] for k in groups[0]) < minimum:
        groups[1] = groups[0] + groups[1]
        groups.pop(0)
    while len(groups) > 1 and sum(counts[k] for k in groups[-1]) < minimum:
        groups[-2] = groups[-2] + groups[-1]
        groups.pop()
    return groups


def summarize(rows: list[dict]) -> dict:
    """``{setting: {method: stats}}``; stats: per repeat marginal coverage, lowest group
    coverage and width ratio, and per pooled group (label) coverage and width ratio.
    The groups of a setting are pooled once, from its mean rows per run and count."""
    by_run = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        run = tuple(row[c] for c in KEY_COLUMNS)
        by_run[run][row["method"]][int(row["n_missing"])] = (
            int(row["n_rows"]), int(row["n_covered"]), float(row["width_sum"]),
            float(row["oracle_width_sum"]),
        )
    counts = defaultdict(lambda: defaultdict(float))
    runs_per_setting = defaultdict(int)
    for run, methods in by_run.items():
        runs_per_setting[run[:3]] += 1
        for q, values in methods["oracle"].items():
            counts[run[:3]][q] += values[0]
    groups = {setting: pool_groups({q: n / runs_per_setting[setting] for q, n in c.items()})
              for setting, c in counts.items()}
    result = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for run, methods in by_run.items():
        setting = run[:3]
        for method, per_q in methods.items():
            stats = result[setting][method]
            total = np.sum([per_q[q] for q in per_q], axis=0)
            stats["coverage"].append(total[1] / total[0])
            stats["width_ratio"].append(total[2] / total[3])
            coverages = []
            for group in groups[setting]:
                present = [per_q[q] for q in group if q in per_q]
                n, covered, width, oracle = np.sum(present, axis=0)
                label = f"{group[0]}" if len(group) == 1 else f"{group[0]}-{group[-1]}"
                stats["groups"].append((label, covered / n, width / oracle))
                coverages.append(covered / n)
            stats["min_group_coverage"].append(min(coverages))
    return result


def _mean_spread(values) -> str:
    values = np.asarray(values, dtype=float)
    if values.size == 1:
        return f"{values[0]:.3f}"
    return f"{values.mean():.3f} ({values.min():.3f}–{values.max():.3f})"


def _setting_label(setting) -> str:
    mechanism, rate, n_train = setting
    name = {"MCAR": "MCAR", "gaussian_sm": "Gaussian self-masking"}.get(mechanism, mechanism)
    return f"{name}, {float(rate):.0%} missing, n_train={int(n_train):.0e}".replace("+0", "")


def _ordered(summary: dict) -> list:
    return sorted(summary, key=lambda s: (int(s[2]), s[0], float(s[1])))


def format_summary(summary: dict) -> str:
    """The markdown table: one line per setting and method."""
    lines = [
        "| setting | method | repeats | marginal coverage | lowest group coverage "
        "| width / oracle |",
        "|---|---|---|---|---|---|",
    ]
    for setting in _ordered(summary):
        for method in METHODS:
            stats = summary[setting].get(method)
            if stats is None:
                continue
            lines.append(
                f"| {_setting_label(setting)} | {method} | {len(stats['coverage'])} "
                f"| {_mean_spread(stats['coverage'])} "
                f"| {_mean_spread(stats['min_group_coverage'])} "
                f"| {_mean_spread(stats['width_ratio'])} |"
            )
    return "\n".join(lines) + "\n"


def format_csv(summary: dict) -> str:
    """The same as a CSV of means, plus the per-group values (``group`` column)."""
    lines = ["mechanism,missing_rate,n_train,method,group,coverage,width_ratio,repeats"]
    for setting in _ordered(summary):
        for method in METHODS:
            stats = summary[setting].get(method)
            if stats is None:
                continue
            head = f"{setting[0]},{setting[1]},{setting[2]},{method}"
            repeats = len(stats["coverage"])
            lines.append(f"{head},all,{np.mean(stats['coverage']):.4f},"
                         f"{np.mean(stats['width_ratio']):.4f},{repeats}")
            for label, coverage, ratio in _group_means(stats):
                lines.append(f"{head},{label},{coverage:.4f},{ratio:.4f},{repeats}")
    return "\n".join(lines) + "\n"


def _group_means(stats) -> list[tuple[str, float, float]]:
    """Per group label (in order of first appearance): mean coverage and width ratio."""
    values = defaultdict(list)
    for label, coverage, ratio in stats["groups"]:
        values[label].append((coverage, ratio))
    return [(label, *np.mean(v, axis=0)) for label, v in values.items()]


def plot_figure(summary: dict, path: Path) -> None:
    """Coverage and width / oracle per group, every method side by side: one column per
    mechanism and missing rate, two rows (coverage, width) per training size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = _ordered(summary)
    columns = sorted({s[:2] for s in settings}, key=lambda c: (c[0], float(c[1])))
    sizes = sorted({s[2] for s in settings}, key=int)
    fig, axes = plt.subplots(2 * len(sizes), len(columns), squeeze=False,
                             figsize=(3.6 * len(columns), 2.6 * 2 * len(sizes)))
    colors = dict(zip(METHODS, ("tab:red", "tab:orange", "tab:blue", "tab:purple", "tab:green",
                                "black")))
    for ax in axes.ravel():
        ax.set_visible(False)
    for setting in settings:
        column, row = columns.index(setting[:2]), 2 * sizes.index(setting[2])
        top, bottom = axes[row, column], axes[row + 1, column]
        methods = [m for m in METHODS if m in summary[setting]]
        width = 0.8 / len(methods)
        for k, method in enumerate(methods):
            groups = _group_means(summary[setting][method])
            x = np.arange(len(groups)) + (k - (len(methods) - 1) / 2) * width
            top.bar(x, [g[1] for g in groups], width, color=colors[method], label=method)
            bottom.bar(x, [g[2] for g in groups], width, color=colors[method])
        labels = [g[0] for g in _group_means(summary[setting][methods[0]])]
        for ax in (top, bottom):
            ax.set_visible(True)
            ax.set_xticks(np.arange(len(labels)), labels, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
        top.axhline(0.9, color="grey", lw=0.8, ls="--")
        top.set_ylim(0.6, 1.0)
        bottom.axhline(1.0, color="grey", lw=0.8, ls="--")
        bottom.set_ylim(0, 2.6)
        top.set_title(_setting_label(setting), fontsize=8)
        bottom.set_xlabel("missing entries (test rows pooled to >= 500 per group)", fontsize=7)
        if column == 0:
            top.set_ylabel("coverage (target 0.9)", fontsize=8)
            bottom.set_ylabel("mean width / oracle's", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="lower left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out: Path) -> list[Path]:
    """``summary.md``, ``summary.csv`` and ``figure.png`` from ``out/runs.csv``."""
    from .._store import RUNS_FILE

    summary = summarize(read_interval_runs(out / RUNS_FILE))
    (out / SUMMARY_FILE).write_text(format_summary(summary))
    (out / TABLE_FILE).write_text(format_csv(summary))
    plot_figure(summary, out / FIGURE_FILE)
    return [out / SUMMARY_FILE, out / TABLE_FILE, out / FIGURE_FILE]
