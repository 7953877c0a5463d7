"""Fit time, accuracy and peak memory of NeuMissRegressor against the paper's protocol.

Issue-2 targets, one MCAR dataset per row (50% missing, SNR 10, n_val = n_test = 1e4):

    d=10, n_train=1e4, depth 5 | d=50, n_train=1e5, depth 4

For each row it fits ``NeuMissRegressor`` with default settings (only ``depth``
set) and, with ``--paper``, the paper's protocol (SGD, batch 10, lr 1e-2/d,
ReduceLROnPlateau factor 0.2 patience 2, stop when lr < 5e-6, 100 epochs max).
Each fit runs in a fresh child process, whose peak resident memory is read
from ``getrusage``; the child also reports fit seconds and R² - Bayes rate.

Usage: python benchmarks/bench_core.py [--paper] [--rows 10:10000:5 50:100000:4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time


def fit_one(d: int, n_train: int, depth: int, paper: bool, seed: int, queue) -> None:
    import torch
    from sklearn.metrics import r2_score

    from neumiss import NeuMissRegressor
    from neumiss.simulation import make_regression

    torch.set_num_threads(1)
    X, y, truth = make_regression(n_train, d, mechanism="MCAR", random_state=seed)
    X_test, y_test = truth.sample(10_000, random_state=seed + 1)
    bayes = truth.bayes_rate(X_test, y_test)
    if paper:
        params = dict(optimizer="sgd", batch_size=10, learning_rate=1e-2 / d, max_epochs=100,
                      patience=100, lr_patience=2)
    else:
        params = {}
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    model = NeuMissRegressor(depth=depth, random_state=seed, **params).fit(X, y)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gap = r2_score(y_test, model.predict(X_test)) - bayes
    queue.put(dict(seconds=seconds, gap=gap, epochs=model.n_epochs_, peak_mib=peak_mib,
                   data_mib=base_rss / 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=["10:10000:5", "50:100000:4"],
                        help="d:n_train:depth triples")
    parser.add_argument("--paper", action="store_true", help="also run the paper's protocol")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    print("| d | n_train | depth | protocol | fit s | epochs | R2 - Bayes | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in args.rows:
        d, n_train, depth = (int(v) for v in row.split(":"))
        for paper in ([False, True] if args.paper else [False]):
            queue = ctx.Queue()
            child = ctx.Process(target=fit_one, args=(d, n_train, depth, paper, args.seed, queue))
            child.start()
            result = queue.get()
            child.join()
            name = "paper (SGD, batch 10)" if paper else "neumiss defaults"
            print(f"| {d} | {n_train} | {depth} | {name} | {result['seconds']:.1f} | "
                  f"{result['epochs']} | {result['gap']:+.4f} | {result['peak_mib']:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
