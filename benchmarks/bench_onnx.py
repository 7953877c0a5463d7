"""Benchmark: ONNX Runtime scoring vs the torch estimator's ``predict``, same machine, same run.

    python benchmarks/bench_onnx.py [--features 50] [--depth 5] [--rows 100000]

Fits a NeuMissRegressor briefly (the weights' values do not change the cost),
exports it, then times on the same table with 30% missing values:

* torch: ``estimator.predict(X)`` from the NaN table (validation, standardization,
  forward pass in chunks);
* ONNX end to end: building ``X`` (0 where missing) and ``M`` from the NaN table,
  then ``session.run``;
* ONNX run only: ``session.run`` on ready inputs;
* single-row latency of both (median over repeated one-row calls).

Each batch timing is the best of ``--repeats`` runs after one warm-up run.
Prints rows per second, the ONNX / torch ratio, the model file size and the
largest difference between the two predictions.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

from neumiss import NeuMissRegressor
from neumiss.export import export_onnx


def best_time(function, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def median_latency(function, calls: int) -> float:
    function()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0,
                        help="ONNX Runtime intra-op threads (0: its default, one per core)")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    d = args.features
    X_train = rng.normal(size=(5000, d))
    y_train = X_train @ rng.normal(size=d)
    X_train[rng.random(X_train.shape) < 0.3] = np.nan
    estimator = NeuMissRegressor(depth=args.depth, max_epochs=2, random_state=0)
    estimator.fit(X_train, y_train)

    X = rng.normal(size=(args.rows, d))
    X[rng.random(X.shape) < 0.3] = np.nan

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        export_onnx(estimator, path)
        size = os.path.getsize(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def onnx_inputs(table):
        missing = np.isnan(table)
        return {"X": np.where(missing, 0.0, table).astype(np.float32),
                "M": missing.astype(np.float32)}

    feeds = onnx_inputs(X)
    t_torch = best_time(lambda: estimator.predict(X), args.repeats)
    t_onnx = best_time(lambda: session.run(["y"], onnx_inputs(X)), args.repeats)
    t_run = best_time(lambda: session.run(["y"], feeds), args.repeats)
    row = X[:1]
    lat_torch = median_latency(lambda: estimator.predict(row), 200)
    lat_onnx = median_latency(lambda: session.run(["y"], onnx_inputs(row)), 200)
    diff = np.abs(session.run(["y"], feeds)[0] - estimator.predict(X)).max() / estimator.y_scale_

    print(f"d={d}, depth={args.depth}, rows={args.rows}, torch threads={torch.get_num_threads()}, "
          f"ORT intra-op threads={args.threads or 'default'}, ORT {ort.__version__}, "
          f"torch {torch.__version__}, {os.cpu_count()} cores")
    print(f"{'':28s}{'seconds':>10s}{'rows/s':>14s}")
    for label, seconds in [("torch predict", t_torch), ("ONNX end to end (build X,M)", t_onnx),
                           ("ONNX session.run only", t_run)]:
        print(f"{label:28s}{seconds:10.4f}{args.rows / seconds:14,.0f}")
    print(f"ratio ONNX end to end / torch (rows/s): {t_torch / t_onnx:.2f}x; "
          f"run only: {t_torch / t_run:.2f}x")
    print(f"single-row latency: torch {lat_torch * 1e6:.0f} us, ONNX {lat_onnx * 1e6:.0f} us "
          f"({lat_torch / lat_onnx:.1f}x)")
    print(f"model file: {size:,} bytes ({size / 1024:.1f} KiB)")
    print(f"max |ONNX - torch| / y_scale: {diff:.2e}")


if __name__ == "__main__":
    main()
