"""Intervals on small tables: a split against cross-conformal calibration (CV+).

For each table size ``n`` and repeat, draws ``n`` rows of the paper's simulation
(10 features, 20% MCAR, SNR 10) and 5000 test rows, fits ``ConformalRegressor``
with ``cv=None`` (a split) and ``cv=10`` (CV+) for ``"cqr-mondrian"`` and
``"split"`` (base models with one network), and scores coverage and mean width
against the **oracle width of the same base model** (``estimator_``): its bounds
widened by the margin that covers exactly ``1 - alpha`` of the test rows.

    python benchmarks/small_tables.py --n 100 200 500 1000 --repeats 5 \
        --out results/intervals/small_tables.csv

Writes one CSV row per (n, repeat, method, calibration) and prints the means per
(n, method, calibration). This is what set ``CROSS_ROWS`` (results/intervals/small_tables.md).
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ALPHA = 0.1
COLUMNS = ("n", "repeat", "method", "calibration", "coverage", "width", "oracle_width",
           "fit_seconds")


def oracle_width(model, X_test, y_test, alpha=ALPHA) -> float:
    """Mean width of ``model.estimator_``'s bounds widened by the margin that covers
    exactly ``1 - alpha`` of the test rows."""
    bounds = model._method().bounds(model.estimator_, X_test)
    scores = np.maximum(bounds[:, 0] - y_test, y_test - bounds[:, 1])
    return float((bounds[:, 1] - bounds[:, 0]).mean() + 2 * np.quantile(scores, 1 - alpha))


def run(n: int, repeat: int, n_test: int = 5000) -> list[dict]:
    """One table: both methods, both calibrations."""
    import neumiss
    from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor
    from neumiss.intervals import ConformalRegressor

    X, y, truth = neumiss.simulation.make_regression(n, 10, missing_rate=0.2,
                                                     random_state=repeat)
    X_test, y_test = truth.sample(n_test, random_state=10_000 + repeat)
    rows = []
    for method in ("cqr-mondrian", "split"):
        base = (NeuMissRegressor if method == "split" else NeuMissQuantileRegressor)(
            ensemble_size=1)
        for calibration, cv in (("split", None), ("cv+", 10)):
            start = time.perf_counter()
            model = ConformalRegressor(base, method=method, alpha=ALPHA, cv=cv,
                                       random_state=repeat).fit(X, y)
            seconds = time.perf_counter() - start
            interval = model.predict_interval(X_test)
            covered = (y_test >= interval[:, 0]) & (y_test <= interval[:, 1])
            rows.append({
                "n": n, "repeat": repeat, "method": method, "calibration": calibration,
                "coverage": float(covered.mean()),
                "width": float((interval[:, 1] - interval[:, 0]).mean()),
                "oracle_width": oracle_width(model, X_test, y_test),
                "fit_seconds": round(seconds, 2),
            })
    return rows


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Means per (n, method, calibration): coverage, width / oracle width, seconds."""
    frame = frame.assign(ratio=frame["width"] / frame["oracle_width"])
    return frame.groupby(["n", "method", "calibration"]).agg(
        repeats=("repeat", "size"), coverage=("coverage", "mean"),
        min_coverage=("coverage", "min"), ratio=("ratio", "mean"),
        max_ratio=("ratio", "max"), fit_seconds=("fit_seconds", "mean")).round(3)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("small_tables.csv"))
    args = parser.parse_args(argv)
    done = set()
    if args.out.exists():
        done = {(int(r["n"]), int(r["repeat"])) for r in csv.DictReader(args.out.open())}
    new = not args.out.exists()
    with args.out.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        if new:
            writer.writeheader()
        for n in args.n:
            for repeat in range(args.repeats):
                if (n, repeat) in done:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for row in run(n, repeat):
                        writer.writerow(row)
                handle.flush()
                print(f"n={n} repeat {repeat}: done", flush=True)
    print(summarize(pd.read_csv(args.out)).to_string())


if __name__ == "__main__":
    main()
