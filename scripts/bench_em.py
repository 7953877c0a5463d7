"""Benchmark EMRegressor on the paper's simulated data (Section 5.4, MCAR).

For each number of features d: x ~ N(mu, Sigma), Sigma = B B^T + diag(eps) with B (d, d/2)
standard normal and eps ~ U[0.01, 0.1], mu ~ N(0, 1); y = 1 + sum(x) + noise with
signal-to-noise ratio 10; 50% of the entries of x missing completely at random. Reports the
fit time (wall clock and CPU), the number of E-steps and the test R^2 minus the R^2 of the
Bayes predictor E[y | x_obs] computed from the true parameters (the oracle).

Usage::

    python scripts/bench_em.py                      # d = 20, 50, 100; n = 1e5
    python scripts/bench_em.py --d 20 --n 100000 --repeats 3
"""

import argparse
import json
import os
import time

import numpy as np
from sklearn.metrics import r2_score

from neumiss.baselines import EMRegressor
from neumiss.gaussian import conditional_mean


def simulate(d, n_train, n_test, missing_rate, rng):
    """Paper's MCAR Gaussian data; returns train/test sets and the true joint (y, x)."""
    B = rng.standard_normal((d, d // 2))
    cov_x = B @ B.T + np.diag(rng.uniform(0.01, 0.1, d))
    mu = rng.standard_normal(d)
    beta = np.ones(d)
    var_signal = beta @ cov_x @ beta
    noise_sd = np.sqrt(var_signal / 10)
    mean = np.concatenate([[1 + beta @ mu], mu])
    cov = np.empty((d + 1, d + 1))
    cov[0, 0] = var_signal + noise_sd**2
    cov[0, 1:] = cov[1:, 0] = cov_x @ beta
    cov[1:, 1:] = cov_x

    def draw(n):
        X = rng.multivariate_normal(mu, cov_x, n)
        y = 1 + X @ beta + noise_sd * rng.standard_normal(n)
        X[rng.random(X.shape) < missing_rate] = np.nan
        return X, y

    return draw(n_train), draw(n_test), (mean, cov)


def run(d, n_train, n_test, missing_rate, seed, tol):
    rng = np.random.default_rng(seed)
    (X, y), (X_test, y_test), (mean, cov) = simulate(d, n_train, n_test, missing_rate, rng)
    oracle = conditional_mean(np.column_stack([np.full(n_test, np.nan), X_test]), mean, cov)
    oracle_r2 = r2_score(y_test, oracle[:, 0])
    wall, cpu = time.perf_counter(), time.process_time()
    model = EMRegressor(tol=tol).fit(X, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    r2 = model.score(X_test, y_test)
    return {
        "d": d,
        "n_train": n_train,
        "seed": seed,
        "fit_wall_s": round(wall, 2),
        "fit_cpu_s": round(cpu, 2),
        "n_iter": model.n_iter_,
        "converged": model.converged_,
        "r2": round(r2, 5),
        "oracle_r2": round(oracle_r2, 5),
        "r2_minus_oracle": round(r2 - oracle_r2, 5),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--d", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--n", type=int, default=100_000, help="training rows")
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--missing-rate", type=float, default=0.5)
    parser.add_argument("--tol", type=float, default=EMRegressor().tol)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    for d in args.d:
        for repeat in range(args.repeats):
            result = run(d, args.n, args.n_test, args.missing_rate, args.seed + repeat, args.tol)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
