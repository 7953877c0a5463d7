"""Throughput and peak memory of ``neumiss score`` on a large simulated table.

    python benchmarks/score_throughput.py                      # 10M rows x 50 features, Parquet
    python benchmarks/score_throughput.py --rows 2e6 --format csv --ensemble-size 1

Fits a ``NeuMissRegressor(depth=4)`` on 20,000 simulated rows (MCAR, 50% missing;
its accuracy does not matter here), exports it to ONNX, writes the input table
in chunks of 1M rows (float32 columns ``x0 ...``, never the whole table in
memory), then runs ``neumiss score MODEL INPUT OUTPUT`` as a child process and
reports its wall time, rows/s, peak resident memory (the child's ``VmHWM``,
Linux), the processor time it used per million rows (user + system, all threads:
less sensitive than the wall time to other work on the machine) and the load
average (1 minute) before and after; then the start-up: the same command on the
table's first 10 rows (best of three: wall and processor seconds). Files go to
``--workdir`` (default: a
temporary folder, removed after; an existing ``input.*`` there is reused, whatever
``--rows``).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

CHUNK_ROWS = 1_000_000


def write_table(path: Path, n_rows: int, n_features: int, kind: str, seed: int) -> None:
    """The input table, written chunk by chunk: standard normal values, 50% missing."""
    rng = np.random.default_rng(seed)
    schema = pa.schema([(f"x{j}", pa.float32()) for j in range(n_features)])
    writer = (pq.ParquetWriter(path, schema) if kind == "parquet"
              else pcsv.CSVWriter(path, schema))
    for start in range(0, n_rows, CHUNK_ROWS):
        rows = min(CHUNK_ROWS, n_rows - start)
        values = rng.standard_normal((rows, n_features), dtype=np.float32)
        values[rng.random((rows, n_features), dtype=np.float32) < 0.5] = np.nan
        writer.write_batch(pa.RecordBatch.from_arrays(
            [pa.array(values[:, j], from_pandas=True) for j in range(n_features)], schema=schema))
    writer.close()


def _startup(command: list[str], folder: Path, source: Path, kind: str) -> tuple[float, float]:
    """Wall and processor seconds (best of three) of ``command`` (``neumiss score MODEL
    INPUT OUTPUT ...``) on the first 10 rows of ``source``: what a call costs before
    scoring (imports, the model's session)."""
    small = folder / f"ten.{kind}"
    if kind == "parquet":
        pq.write_table(pq.read_table(source).slice(0, 10), small)
    else:
        pcsv.write_csv(pcsv.read_csv(source).slice(0, 10), small)
    command = [*command[:5], str(small), str(folder / f"ten_out.{kind}"), *command[7:]]
    best = (math.inf, math.inf)
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        best = (min(best[0], wall), min(best[1], cpu))
    return best


def _high_water_kb(pid: int) -> int:
    """Peak resident memory of process ``pid`` so far (Linux ``VmHWM``), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    parser.add_argument("--ensemble-size", type=int, default=5,
                        help="networks of the model (the estimator's default: 5)")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    parser.add_argument("--workdir", default=None, help="keep the files here")
    args = parser.parse_args()
    n_rows = int(args.rows)
    folder = Path(args.workdir or tempfile.mkdtemp(prefix="neumiss-score-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        from neumiss import NeuMissRegressor
        from neumiss.simulation import make_regression

        X, y, _ = make_regression(20_000, args.features, random_state=0)
        model = NeuMissRegressor(depth=4, ensemble_size=args.ensemble_size, max_epochs=3,
                                 random_state=0).fit(X, y)
        model.to_onnx(folder / "model.onnx")
        source = folder / f"input.{args.format}"
        if not source.exists():
            started = time.perf_counter()
            write_table(source, n_rows, args.features, args.format, seed=1)
            print(f"wrote {source} ({source.stat().st_size / 1e9:.2f} GB) in "
                  f"{time.perf_counter() - started:.0f} s")
        load = os.getloadavg()
        command = [sys.executable, "-m", "neumiss.cli", "score", str(folder / "model.onnx"),
                   str(source), str(folder / f"predictions.{args.format}"), "--quiet"]
        if args.threads is not None:
            command += ["--threads", str(args.threads)]
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        child = subprocess.Popen(command)
        peak_kb = 0
        while child.poll() is None:  # the child's own high-water mark (ru_maxrss would
            peak_kb = max(peak_kb, _high_water_kb(child.pid))  # count this parent's at fork)
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        if child.returncode != 0:
            sys.exit(f"neumiss score failed (exit status {child.returncode})")
        print(f"{' '.join(command[2:])}\n{n_rows:,} rows x {args.features} features "
              f"({args.format}, ensemble of {args.ensemble_size}, {os.cpu_count()} cores): "
              f"{seconds:.1f} s, {n_rows / seconds:,.0f} rows/s, "
              f"peak RSS {peak_kb / 1024:,.0f} MB, {cpu / n_rows * 1e6:.2f} CPU s per 1M rows; "
              f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
        wall, cpu = _startup(command, folder, source, args.format)
        print(f"start-up (10 rows, best of 3): {wall:.2f} s, {cpu:.2f} CPU s")
    finally:
        if args.workdir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
