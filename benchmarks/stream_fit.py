"""Streaming training (``neumiss.estimators.fit_stream``) against the in-memory fit.

    python benchmarks/stream_fit.py                 # 1e6 training rows, d = 50
    python benchmarks/stream_fit.py --rows 1e5 --features 10

Simulates one MCAR data set (50% missing, SNR 10), writes the training rows to a
Parquet file (row groups of a tenth of the rows) and 1e5 test rows beside it, then, each in a
fresh process, fits ``NeuMissRegressor(depth=4, mlp_depth=2, weight_sharing="shared",
ensemble_size=1, random_state=0)``:

* in memory: the Parquet file read whole, ``fit(X, y)`` (10% validation split);
* streaming: ``fit_stream(model, parquet_chunks(path, "y", batch_rows=n // 10))``
  (the first chunk, a tenth of the rows, held out).

Prints, for each: fit seconds, epochs, test R² and its gap to the Bayes rate,
and the process's peak resident memory (Linux ``VmHWM``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

import pandas as pd

PARAMS = dict(depth=4, mlp_depth=2, weight_sharing="shared", ensemble_size=1, random_state=0)


def _peak_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def _fit(mode: str, folder: str, chunk_rows: int, queue) -> None:
    from neumiss import NeuMissRegressor
    from neumiss.estimators import fit_stream, parquet_chunks

    model = NeuMissRegressor(**PARAMS)
    started = time.perf_counter()
    if mode == "in memory":
        table = pd.read_parquet(f"{folder}/train.parquet")
        model.fit(table.drop(columns="y"), table["y"].to_numpy())
    else:
        fit_stream(model, parquet_chunks(f"{folder}/train.parquet", "y", batch_rows=chunk_rows))
    seconds = time.perf_counter() - started
    test = pd.read_parquet(f"{folder}/test.parquet")
    r2 = model.score(test.drop(columns=["y", "bayes"]), test["y"].to_numpy())
    queue.put((seconds, model.n_epochs_, r2, _peak_mb()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--features", type=int, default=50)
    args = parser.parse_args()
    from sklearn.metrics import r2_score

    from neumiss.simulation import make_regression

    n, d = int(args.rows), args.features
    with tempfile.TemporaryDirectory() as folder:
        X, y, truth = make_regression(n, d, mechanism="MCAR", random_state=0)
        columns = [f"x{j}" for j in range(d)]
        pd.DataFrame(X, columns=columns).assign(y=y).to_parquet(
            f"{folder}/train.parquet", row_group_size=n // 10)
        X_test, y_test = truth.sample(100_000, random_state=1)
        bayes = truth.bayes_predict(X_test)
        pd.DataFrame(X_test, columns=columns).assign(y=y_test, bayes=bayes).to_parquet(
            f"{folder}/test.parquet")
        bayes_r2 = r2_score(y_test, bayes)
        del X, y
        size = Path(f"{folder}/train.parquet").stat().st_size / 1e6
        print(f"n={n:,} d={d} MCAR ({size:.0f} MB of Parquet), Bayes R2 {bayes_r2:.4f}")
        print(f"{'fit':<11}{'seconds':>9}{'epochs':>8}{'test R2':>9}{'gap':>9}{'peak MB':>9}")
        context = mp.get_context("spawn")
        for mode in ("in memory", "streaming"):
            queue = context.Queue()
            child = context.Process(target=_fit, args=(mode, folder, n // 10, queue))
            child.start()
            seconds, epochs, r2, peak = queue.get()
            child.join()
            print(f"{mode:<11}{seconds:>9.1f}{epochs:>8}{r2:>9.4f}{r2 - bayes_r2:>+9.4f}"
                  f"{peak:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
