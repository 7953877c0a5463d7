"""d >> n and absurd learning rates: does NeuMiss end near ridge and never below the mean?

Checks the training loop's divergence guard (``neumiss.network.train``):
n = 500 training rows, d = 2000 Gaussian features with 30% MCAR NaN, y linear in
X. For each design it prints the test R² of RidgeCV on mean-imputed data, of the
training mean, and of NeuMissRegressor (the defaults, then learning_rate=100),
with the fit time and the DivergenceWarning, if any::

    .venv/bin/python benchmarks/divergence_check.py            # both designs, d = 2000
    .venv/bin/python benchmarks/divergence_check.py --d 300    # faster
    .venv/bin/python benchmarks/divergence_check.py --params '{"depth": 3, "mlp_depth": 0}'

Designs: ``isotropic`` (X ~ N(0, I), y = X beta + noise, beta ~ N(0, 1/d), noise
sd 0.1) and ``paper`` (the paper's covariance B B^T + diag, y = 1 + sum(X) +
noise at SNR 10, as tests/conftest.py draws it). Criteria: NeuMiss
at most 0.05 below ridge, and never below the training mean.

Measured runs: ``results/README.md`` (learning rate and divergence at d >> n).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score

from neumiss import NeuMissRegressor


def isotropic(n, d, n_test, rng):
    beta = rng.normal(size=d) / np.sqrt(d)
    X = rng.normal(size=(n + n_test, d))
    y = X @ beta + 0.1 * rng.normal(size=n + n_test)
    return X, y


def paper(n, d, n_test, rng):
    B = rng.normal(size=(d, max(1, d // 2)))
    cov = B @ B.T + np.diag(rng.uniform(0.01, 0.1, size=d))
    mean = rng.normal(size=d)
    # X = mean + Z B^T + sqrt(diag) noise: the same law as multivariate_normal, faster.
    X = mean + rng.normal(size=(n + n_test, B.shape[1])) @ B.T
    X += rng.normal(size=X.shape) * np.sqrt(np.diag(cov) - (B**2).sum(axis=1))
    signal = X.sum(axis=1)
    noise_sd = np.sqrt(np.ones(d) @ cov @ np.ones(d) / 10.0)
    return X, 1.0 + signal + rng.normal(scale=noise_sd, size=n + n_test)


DESIGNS = {"isotropic": isotropic, "paper": paper}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--d", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    parser.add_argument("--params", type=json.loads, default={},
                        help="NeuMissRegressor parameters besides the defaults (JSON)")
    parser.add_argument("--learning-rates", nargs="+", type=float, default=[None, 100.0],
                        help="learning rates to try (default: the estimator's, then 100)")
    args = parser.parse_args()
    print(f"n = {args.n}, d = {args.d}, 30% MCAR, params {args.params or 'default'}")
    print("| design | model | test R² | R² − ridge | R² − mean | fit s | warning |")
    print("|---|---|---|---|---|---|---|")
    for name in args.designs:
        rng = np.random.default_rng(0)
        X, y = DESIGNS[name](args.n, args.d, args.n_test, rng)
        X[rng.random(X.shape) < 0.3] = np.nan
        X_train, y_train, X_test, y_test = X[: args.n], y[: args.n], X[args.n :], y[args.n :]
        fill = np.nanmean(X_train, axis=0)
        ridge = RidgeCV(alphas=np.logspace(-3, 6, 40)).fit(
            np.where(np.isnan(X_train), fill, X_train), y_train
        )
        r2_ridge = r2_score(y_test, ridge.predict(np.where(np.isnan(X_test), fill, X_test)))
        r2_mean = r2_score(y_test, np.full_like(y_test, y_train.mean()))
        print(f"| {name} | RidgeCV (alpha {ridge.alpha_:.3g}) | {r2_ridge:.4f} | 0 | "
              f"{r2_ridge - r2_mean:+.4f} | | |")
        print(f"| {name} | training mean | {r2_mean:.4f} | {r2_mean - r2_ridge:+.4f} | 0 | | |")
        for lr in args.learning_rates:
            params = dict(args.params, random_state=0)
            if lr is not None:
                params["learning_rate"] = lr
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = NeuMissRegressor(**params).fit(X_train, y_train)
            seconds = time.perf_counter() - start
            r2 = r2_score(y_test, model.predict(X_test))
            messages = sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught})
            label = "NeuMiss " + ("default lr" if lr is None else f"learning_rate={lr:g}")
            print(f"| {name} | {label} | {r2:.4f} | {r2 - r2_ridge:+.4f} | {r2 - r2_mean:+.4f} | "
                  f"{seconds:.0f} | {len(messages)} warning(s){': ' if messages else ''}"
                  f"{messages[0] if messages else ''} |", flush=True)


if __name__ == "__main__":
    main()
