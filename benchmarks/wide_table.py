"""Wide tables (d >> n): fit time of NeuMissRegressor as d grows, and its test R².

    .venv/bin/python benchmarks/wide_table.py                       # d = 250 ... 2000
    .venv/bin/python benchmarks/wide_table.py --d 2000 --design isotropic

n = 500 training rows with 20% MCAR NaN (proteomics- or expression-like tables),
``NeuMissRegressor(random_state=0, max_epochs=2)`` (``--params`` adds or overrides
parameters), for each ``--d``: the fit's wall and processor seconds (all threads),
the depth and head chosen, and the test R² on ``--n-test`` rows beside RidgeCV on
mean-imputed data and the training mean (the designs of ``divergence_check.py``).
Target: d = 2,000 fitted in 60 s at most, within 0.05 of ridge.

Measured runs: ``results/README.md`` (wide tables).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from divergence_check import DESIGNS
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score

from neumiss import NeuMissRegressor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--d", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--missing-rate", type=float, default=0.2)
    parser.add_argument("--design", choices=DESIGNS, default="paper")
    parser.add_argument("--params", type=json.loads, default={"max_epochs": 2},
                        help="NeuMissRegressor parameters besides random_state=0 (JSON)")
    args = parser.parse_args()
    print(f"n = {args.n}, {args.missing_rate:.0%} MCAR, {args.design} design, "
          f"params {args.params}")
    print("| d | fit s | CPU s | depth | mlp_depth | test R² | ridge R² | R² − ridge | "
          "R² − mean |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in args.d:
        rng = np.random.default_rng(0)
        X, y = DESIGNS[args.design](args.n, d, args.n_test, rng)
        X[rng.random(X.shape) < args.missing_rate] = np.nan
        X_train, y_train, X_test, y_test = X[: args.n], y[: args.n], X[args.n :], y[args.n :]
        fill = np.nanmean(X_train, axis=0)
        ridge = RidgeCV(alphas=np.logspace(-3, 6, 40)).fit(
            np.where(np.isnan(X_train), fill, X_train), y_train)
        r2_ridge = r2_score(y_test, ridge.predict(np.where(np.isnan(X_test), fill, X_test)))
        r2_mean = r2_score(y_test, np.full_like(y_test, y_train.mean()))
        wall, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = NeuMissRegressor(**{"random_state": 0, **args.params}).fit(X_train, y_train)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        r2 = r2_score(y_test, model.predict(X_test))
        print(f"| {d} | {wall:.1f} | {cpu:.1f} | {model.best_depth_} | {model.mlp_depth_} | "
              f"{r2:.4f} | {r2_ridge:.4f} | {r2 - r2_ridge:+.4f} | {r2 - r2_mean:+.4f} |",
              flush=True)


if __name__ == "__main__":
    main()
