"""Fit time, accuracy and peak memory of NeuMissRegressor against the paper's protocol.

Issue-2 targets, one MCAR dataset per row (50% missing, SNR 10, n_val = n_test = 1e4):

    d=10, n_train=1e4, depth 5 | d=50, n_train=1e5, depth 4

For each row it fits ``NeuMissRegressor`` with default settings (only ``depth``
set; ``auto`` leaves it at its default) and, with ``--paper``, the paper's protocol
(SGD, batch 10, lr 1e-2/d, ReduceLROnPlateau factor 0.2 patience 2, stop when
lr < 5e-6, 100 epochs max), and with ``--hgb`` scikit-learn's
HistGradientBoostingRegressor (defaults), every fit on one thread.
Each fit runs in a fresh child process, whose peak resident memory is read
from ``getrusage``; the child also reports fit seconds and R² - Bayes rate.

Usage: python benchmarks/bench_core.py [--paper] [--hgb] [--rows 10:10000:auto 50:100000:4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time


def fit_one(d: int, n_train: int, depth, protocol: str, seed: int, queue) -> None:
    import torch
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.metrics import r2_score
    from threadpoolctl import threadpool_limits

    from neumiss import NeuMissRegressor
    from neumiss.simulation import make_regression

    torch.set_num_threads(1)
    threadpool_limits(1)
    X, y, truth = make_regression(n_train, d, mechanism="MCAR", random_state=seed)
    X_test, y_test = truth.sample(10_000, random_state=seed + 1)
    bayes = truth.bayes_rate(X_test, y_test)
    if protocol == "paper":
        # The paper's network (one, linear head, independent weights, no residual) and its
        # training; at depth "auto" the paper's depth 5.
        params = dict(optimizer="sgd", batch_size=10, learning_rate=1e-2 / d, max_epochs=100,
                      patience=100, lr_patience=2, ensemble_size=1, mlp_depth=0,
                      residual=False, weight_sharing="independent")
        depth = 5 if depth == "auto" else depth
    else:
        params = {}
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if protocol == "hgb":
        model = HistGradientBoostingRegressor(random_state=seed).fit(X, y)
    else:
        params = params if depth == "auto" else {**params, "depth": depth}
        model = NeuMissRegressor(random_state=seed, **params).fit(X, y)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gap = r2_score(y_test, model.predict(X_test)) - bayes
    chosen = "" if protocol == "hgb" else f"{model.best_depth_}, {model.n_epochs_}"
    queue.put(dict(seconds=seconds, gap=gap, chosen=chosen, peak_mib=peak_mib,
                   data_mib=base_rss / 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=["10:10000:auto", "50:100000:4"],
                        help="d:n_train:depth triples")
    parser.add_argument("--paper", action="store_true", help="also run the paper's protocol")
    parser.add_argument("--hgb", action="store_true", help="also fit HistGradientBoosting")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    protocols = ["defaults"] + ["paper"] * args.paper + ["hgb"] * args.hgb
    names = {"defaults": "neumiss defaults", "paper": "paper (SGD, batch 10)",
             "hgb": "HistGradientBoosting"}
    print("| d | n_train | depth | protocol | fit s | depth, epochs | R2 - Bayes | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in args.rows:
        d, n_train, depth = row.split(":")
        depth = depth if depth == "auto" else int(depth)
        for protocol in protocols:
            queue = ctx.Queue()
            child = ctx.Process(target=fit_one,
                                args=(int(d), int(n_train), depth, protocol, args.seed, queue))
            child.start()
            result = queue.get()
            child.join()
            print(f"| {d} | {n_train} | {depth} | {names[protocol]} | {result['seconds']:.2f} | "
                  f"{result['chosen']} | {result['gap']:+.4f} | {result['peak_mib']:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
