"""Benchmark EMRegressor on the paper's simulated data (Section 5.4, MCAR).

For each number of features d: x ~ N(mu, Sigma), Sigma = B B^T + diag(eps) with B (d, d/2)
standard normal and eps ~ U[0.01, 0.1], mu ~ N(0, 1); y = 1 + sum(x) + noise with
signal-to-noise ratio 10; 50% of the entries of x missing completely at random. Reports the
fit time (wall clock and CPU), the number of E-steps and the test R^2 minus the R^2 of the
Bayes predictor E[y | x_obs] computed from the true parameters (the oracle),
all from :func:`neumiss.simulation.make_regression`.

Usage::

    python benchmarks/bench_em.py                      # d = 20, 50, 100; n = 1e5
    python benchmarks/bench_em.py --d 20 --n 100000 --repeats 3
"""

import argparse
import json
import os
import time

from neumiss.baselines import EMRegressor
from neumiss.simulation import make_regression


def run(d, n_train, n_test, missing_rate, seed, tol):
    X, y, truth = make_regression(
        n_train, d, mechanism="MCAR", missing_rate=missing_rate, random_state=seed
    )
    X_test, y_test = truth.sample(n_test, random_state=seed + 1)
    oracle_r2 = truth.bayes_rate(X_test, y_test)
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
