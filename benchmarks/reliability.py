"""Reliability of the classifier's probabilities on the real-data suite's binary tasks.

Out-of-fold probabilities of ``NeuMissClassifier()`` (the package's defaults, of the
checkout on ``PYTHONPATH``) on the first cross-validation repeat of each binary task
(the suite's folds and seeds), written to ``OUT/predictions_LABEL.csv``; with
``--plot``, the reliability diagram (observed frequency of the event against the mean
predicted probability, in equal-count bins: ``sklearn.calibration.calibration_curve``)
of every label found in ``OUT``, pooled over the tasks of each half of the suite.

Usage (from a checkout, the real-data cache exported by ``scripts/setup_realdata.sh``)::

    python benchmarks/reliability.py --label after --out results/realdata/reliability
    python benchmarks/reliability.py --plot --out results/realdata/reliability
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from sklearn.calibration import calibration_curve
from sklearn.metrics import log_loss

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from neumiss import NeuMissClassifier  # noqa: E402
from neumiss.benchmark.realdata._cache import DEFAULT_CACHE, load_task  # noqa: E402
from neumiss.benchmark.realdata._protocol import fold_indices, method_seed  # noqa: E402
from neumiss.benchmark.realdata._tasks import TASKS  # noqa: E402

#: Equal-count bins of the reliability diagram.
N_BINS = 10


def predictions(cache, seed: int = 0) -> pd.DataFrame:
    """Out-of-fold probabilities of the defaults on the first repeat of every binary task:
    columns task, half, fold, y, p."""
    frames = []
    for task in TASKS.values():
        if task.kind != "binary":
            continue
        X, y = load_task(task, cache)
        for fold, (train, test) in enumerate(fold_indices(y, "binary", 0, seed)):
            model = NeuMissClassifier(random_state=method_seed(seed, 0, fold))
            model.fit(X.iloc[train], y[train])
            p = model.predict_proba(X.iloc[test])[:, list(model.classes_).index(1)]
            frames.append(pd.DataFrame({"task": task.name, "half": task.half, "fold": fold,
                                        "y": y[test], "p": p}))
        print(task.name, "done", flush=True)
    return pd.concat(frames, ignore_index=True)


def plot(out: Path) -> None:
    """``OUT/reliability.png`` and ``OUT/reliability.md`` from every ``predictions_*.csv``."""
    runs = {path.stem.removeprefix("predictions_"): pd.read_csv(path)
            for path in sorted(out.glob("predictions_*.csv"))}
    halves = ("tuning", "confirmation")
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    rows = []
    for ax, half in zip(axes, halves):
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfectly calibrated")
        for label, frame in runs.items():
            part = frame[frame.half == half]
            observed, predicted = calibration_curve(part.y, part.p, n_bins=N_BINS,
                                                    strategy="quantile")
            ax.plot(predicted, observed, marker="o", label=label)
            per_task = part.groupby("task").apply(
                lambda t: log_loss(t.y, t.p, labels=[0, 1]), include_groups=False)
            rows.append({"half": half, "label": label, "tasks": len(per_task),
                         "mean log loss over tasks": round(float(per_task.mean()), 4),
                         "largest bin gap": round(float(np.abs(observed - predicted).max()),
                                                  3)})
        ax.set_title(f"{half} half: binary tasks pooled")
        ax.set_xlabel("mean predicted probability (equal-count bins)")
        ax.legend(loc="upper left")
    axes[0].set_ylabel("observed frequency")
    figure.tight_layout()
    figure.savefig(out / "reliability.png", dpi=110)
    table = pd.DataFrame(rows)
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(False)]
    (out / "reliability.md").write_text("\n".join(lines) + "\n")
    print(table.to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/realdata/reliability"))
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--label", help="name of this checkout's predictions (e.g. after)")
    parser.add_argument("--plot", action="store_true", help="draw every label in OUT")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.label:
        predictions(args.cache).to_csv(args.out / f"predictions_{args.label}.csv", index=False)
    if args.plot:
        plot(args.out)


if __name__ == "__main__":
    main()
