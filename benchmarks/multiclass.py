"""Multiclass tables outside the real-data suite (which has binary tasks only).

``sklearn.datasets.make_classification`` (half the columns informative, one Gaussian
cluster per class), a share of the cells set missing completely at random; ``--repeats``
stratified splits of each table, a quarter held out each time; ``NeuMissClassifier()``
(the defaults) against HistGradientBoosting, each fitted on one thread: fit seconds, test
log loss and accuracy per split and their mean ± std over the splits, and what the
defaults chose (depth, head, spline term, epochs).

Usage (from a checkout)::

    python benchmarks/multiclass.py [--rows 8000 20000 --classes 5 --features 30
                                     --repeats 3 --out results/realdata/multiclass.csv]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from neumiss import NeuMissClassifier


def table(n_rows: int, n_classes: int, n_features: int, missing: float, seed: int):
    """``X`` (n_rows, n_features) with NaN for missing cells and class labels ``y``."""
    X, y = make_classification(n_rows, n_features, n_informative=n_features // 2,
                               n_classes=n_classes, n_clusters_per_class=1,
                               random_state=seed)
    X[np.random.default_rng(seed).random(X.shape) < missing] = np.nan
    return X, y


def measure(model, X_train, X_test, y_train, y_test) -> dict:
    """Fit ``model``, then its fit seconds, test log loss and accuracy."""
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    proba = model.predict_proba(X_test)
    return {"fit_seconds": round(seconds, 2), "log_loss": round(log_loss(y_test, proba), 4),
            "accuracy": round(accuracy_score(y_test, proba.argmax(axis=1)), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8000, 20000])
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--missing", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="splits of each table")
    parser.add_argument("--out", help="CSV file for the rows (printed either way)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for n_rows in args.rows:
        X, y = table(n_rows, args.classes, args.features, args.missing, args.seed)
        for repeat in range(args.repeats):
            seed = args.seed + repeat
            split = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
            key = {"rows": n_rows, "repeat": repeat}
            defaults = NeuMissClassifier(random_state=seed)
            rows.append(key | {"method": "neumiss", **measure(defaults, *split),
                               "chose": f"depth {defaults.best_depth_}, mlp_depth "
                                        f"{defaults.mlp_depth_}, spline {defaults.spline_}, "
                                        f"{defaults.n_epochs_} epochs"})
            hgb = HistGradientBoostingClassifier(random_state=seed)
            rows.append(key | {"method": "hgb", **measure(hgb, *split), "chose": ""})
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False))
    spread = frame.groupby(["rows", "method"], sort=False)[
        ["fit_seconds", "log_loss", "accuracy"]].agg(["mean", "std"]).round(4)
    print(spread.to_string())
    if args.out:
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
