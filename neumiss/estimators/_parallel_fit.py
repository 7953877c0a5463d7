"""Fitting where the rows live: a NeuMiss estimator trained data-parallel on Dask, on Spark,
or by ``torchrun`` processes on a folder of Parquet files.

:func:`fit_dask` (``estimator.fit`` with a Dask DataFrame), :func:`fit_spark` and
:func:`fit_parquet` run the same plan:

1. the engine (files: this machine, a chunk at a time) counts the rows, draws a sample
   of at most :data:`~neumiss.estimators._engines.SAMPLE_ROWS`, on which an ordinary
   ``fit`` chooses the encoding and the network (depth, head, learning rate), calling
   the estimator's ``callbacks`` (they become its ``callbacks_``), and computes the
   columns' statistics over every row in one pass (:mod:`~neumiss.estimators._engines`);
2. :func:`worker_estimator` is that choice as an estimator of one candidate (integer
   depths, the learning rate found, each process's batch the one a process would take
   on its share of the rows, as DDP's per-process batches), with the encoder of the
   sample and the standardization of every row;
3. one process per worker (Dask: a task on each worker; Spark: ``TorchDistributor``;
   files: ``torchrun``) runs :func:`train_rank` on its own partitions, its members
   started from the sample's network: every process prepares its rows,
   holds out its share of validation rows, and trains the same network with DDP
   (:func:`~neumiss.network.data_parallel`), local steps whose weights are averaged every
   few steps (:class:`~neumiss.network.ModelAveraging`), early stopping on the validation
   loss of all of them (:func:`~neumiss.network.all_reduced_loss`); rank 0 returns the fitted
   estimator, whose fitted attributes the caller's estimator takes.

The result is an ordinary fitted estimator: ``predict``, ``save`` and ``to_onnx`` work as
after ``fit``. A process that fails (or a worker that dies) fails the fit with an error
naming it; nothing is written.
"""

from __future__ import annotations

import datetime
import gc
import math
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from sklearn.base import clone
from sklearn.model_selection import train_test_split

from ..checks import check_params
from ..network import EnsembleNetwork, EvenBatches, StackedNetwork, auto_batch_size
from ._engines import TARGET_COLUMN, PartitionEncoder, fitted_preprocessing
from ._fitting import (
    HOLDOUT_FRACTION,
    FitPlan,
    FitRows,
    draw_seed,
    refuse_class_weight,
    training_data,
)

#: How long a process waits for the others (to start, or in a collective operation)
#: before it fails: a process that died is noticed by its peers' closed connections
#: sooner; this bounds the wait when it hangs instead.
PROCESS_TIMEOUT = datetime.timedelta(minutes=10)

#: The fitted attributes of the sample's estimator a worker's estimator keeps: the
#: columns, their encoding and the target's (its scale and moments come from every row).
SAMPLE_ATTRIBUTES = ("n_features_in_", "feature_names_in_", "encoder_", "log_target_",
                     "classes_")


def check_parallel_params(estimator) -> None:
    """Refuse what a data-parallel fit cannot do: validate without held-out rows (the
    training loss of each process is its own), a spline term, or train on a GPU (gloo is
    for CPUs)."""
    if estimator.validation_fraction == 0:
        raise ValueError("a data-parallel fit validates on held-out rows of every worker: "
                         "validation_fraction must be above 0 (or 'auto')")
    if estimator.spline is True:
        raise ValueError("a data-parallel fit has no spline term (its knots are quantiles "
                         "of the rows): use spline=False or 'auto' (False here)")
    if estimator.device != "cpu":
        raise ValueError(f"a data-parallel fit trains on CPUs (gloo): device must be 'cpu', "
                         f"got {estimator.device!r}")
    refuse_class_weight(estimator, "a data-parallel fit")


def worker_estimator(estimator, sample, statistics, n_rows: int, n_processes: int):
    """The estimator every process trains: ``estimator``'s parameters with the choices of
    ``sample`` (``estimator`` fitted on the sample) as one candidate, the encoder of the
    sample, the standardization of ``statistics`` (every row's), a seed drawn from
    ``random_state``, and each process's batch: ``batch_size``, or the automatic batch of
    its share (``1 / n_processes``) of the ``n_rows`` rows' training rows: the global
    batch is ``n_processes`` times larger, and each epoch ``1 / n_processes`` of one
    process's steps, whose cost does not halve with half the rows (results/README.md,
    issue 46). Its members start from the sample's network (``sample_network``), trained further
    on every row. It has no callbacks: they would run in other processes, where their
    state is lost, and one that stops a process's training early would leave the others
    waiting for it (the sample's fit calls them, in this process: :func:`_plan`)."""
    fraction = estimator.validation_fraction
    fraction = HOLDOUT_FRACTION if fraction == "auto" else float(fraction)
    share = math.ceil((n_rows - math.ceil(fraction * n_rows)) / n_processes)
    batch = (auto_batch_size(share) if estimator.batch_size == "auto"
             else int(estimator.batch_size))
    worker = clone(estimator).set_params(
        depth=sample.best_depth_, mlp_depth=sample.mlp_depth_,
        weight_sharing=sample.weight_sharing_, mask_skip=sample.mask_skip_, spline=False,
        integer_levels=sample.encoder_.has_levels, learning_rate=sample.learning_rate_,
        batch_size=batch, validation_fraction=fraction,
        random_state=draw_seed(estimator.random_state), verbose=0, callbacks=None)
    for name in SAMPLE_ATTRIBUTES:
        if hasattr(sample, name):
            setattr(worker, name, getattr(sample, name))
    fitted_preprocessing(worker, sample, statistics)
    worker.sample_network = sample.network_
    return worker


class PartitionRows:
    """The rows of one process of a data-parallel fit, for
    :class:`~neumiss.estimators._fitting.FitPlan`: its partitions ``frames`` (DataFrames
    of the columns of ``X`` and ``y`` in the column ``target``), encoded with the fitted
    ``encoder_`` and ``preprocessor_`` of the estimator (not refitted), a
    ``validation_fraction`` share of them held out
    (drawn with the seed and the process's rank); the training rows are cut into as many
    batches as every other process's (:class:`~neumiss.network.EvenBatches`). The members
    start from the network of the sample (``start``)."""

    #: This process trains with the others (:func:`~neumiss.network.data_parallel`).
    parallel = True

    def __init__(self, frames: list[pd.DataFrame], target: str) -> None:
        self.frames, self.target = frames, target

    def prepare(self, estimator, device: torch.device) -> None:
        if not self.frames:
            raise ValueError(f"process {dist.get_rank()} of {dist.get_world_size()} has no "
                             "rows: give every process some (fewer processes, or more "
                             "partitions or files)")
        X = pd.concat(self.frames, ignore_index=True)
        y = X.pop(self.target).to_numpy()
        self.x, self.mask = estimator.preprocessor_.transform(
            estimator.encoder_.transform(X[list(estimator.feature_names_in_)]))
        self.y = estimator._encode_validation_target(y)
        self.estimator, self.device = estimator, device
        network = estimator.sample_network
        members = list(network.members) if isinstance(network, EnsembleNetwork) else [network]
        self.start = StackedNetwork(members, estimator._get_loss().combine)

    def split(self, seed: int) -> FitRows:
        estimator, y, n_rows = self.estimator, self.y, len(self.y)
        n_val = min(n_rows - 1, math.ceil(estimator.validation_fraction * n_rows))
        if n_val < 1:
            raise ValueError(f"a worker holds {n_rows} row(s): too few to hold some out "
                             "for validation; give every worker more rows")
        train_idx, val_idx = train_test_split(
            np.arange(n_rows), test_size=n_val, random_state=seed + dist.get_rank(),
            stratify=estimator._get_loss().stratify(y, n_val))
        rows = [training_data(estimator, self.x[index], self.mask[index], y[index], None,
                              self.device) for index in (train_idx, val_idx)]
        return FitRows(EvenBatches(rows[0]), rows[1], y[val_idx], None)


def train_rank(payload: bytes, frames, target: str, rank: int, n_processes: int,
               init_method: str = "env://") -> bytes:
    """The training of process ``rank`` of ``n_processes``: ``payload`` (the pickled
    :func:`worker_estimator`) fitted data-parallel on ``frames`` with ``y`` in their column
    ``target`` (:class:`PartitionRows`)
    in a gloo process group reached at ``init_method`` (``validation_score_`` is the score
    of the validation loss over every process's held-out rows, against the variance of
    rank 0's). Returns rank 0's fitted estimator,
    pickled (its network's state dict among its attributes), in every process (a
    launcher may keep any one's: ``TorchDistributor`` keeps the last to finish)."""
    estimator = pickle.loads(payload)
    dist.init_process_group("gloo", init_method=init_method, rank=rank,
                            world_size=n_processes, timeout=PROCESS_TIMEOUT)
    try:
        FitPlan(estimator, PartitionRows(frames, target)).fit()
        n_validation = torch.tensor([estimator.n_validation_rows_])
        dist.all_reduce(n_validation)  # every process's held-out rows validated
        estimator.n_validation_rows_ = int(n_validation)
        fitted = [pickle.dumps(estimator) if rank == 0 else None]
        dist.broadcast_object_list(fitted, src=0)
    finally:
        # The DDP wrapper of the training holds the group, and a reference cycle may keep
        # it past the training: freed here, while the group is destroyed, not at the
        # interpreter's exit, where stopping gloo's threads aborts the process (SIGABRT).
        gc.collect()
        dist.destroy_process_group()
    return fitted[0]


def adopt(estimator, payload: bytes, callbacks: list):
    """``estimator`` with the fitted attributes of the pickled fitted estimator
    ``payload`` (rank 0's): the model a ``fit`` would have left; its ``callbacks_`` are
    ``callbacks``, those the sample's fit called (:func:`_plan`)."""
    fitted = pickle.loads(payload)
    for name, value in vars(fitted).items():
        if name.endswith("_") and not name.startswith("_"):
            setattr(estimator, name, value)
    estimator.callbacks_ = callbacks
    return estimator


def _plan(estimator, table, n_processes: int) -> tuple[bytes, list]:
    """Steps 1 and 2 of the module docstring on ``table`` (a
    :class:`~neumiss.estimators._engines.DaskTable`, ``SparkTable`` or ``ParquetTable``):
    the pickled :func:`worker_estimator` for ``n_processes`` processes, and the callbacks the
    sample's fit called (its ``callbacks_``: the data-parallel training calls none)."""
    check_params(type(estimator).__name__, estimator.get_params(deep=False),
                 estimator._parameter_constraints)
    check_parallel_params(estimator)
    n_rows = table.count()
    X_sample, y_sample = table.sample(n_rows, draw_seed(estimator.random_state))
    # The data-parallel training has no spline term (its knots are quantiles of the rows).
    sample = clone(estimator).set_params(spline=False).fit(X_sample, y_sample)
    statistics = table.statistics(PartitionEncoder(sample))
    worker = worker_estimator(estimator, sample, statistics, n_rows, n_processes)
    return pickle.dumps(worker), sample.callbacks_


def _free_port() -> int:
    """A TCP port free on this machine now (rank 0's rendezvous, on a Dask worker)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def dask_workers(client) -> dict[str, dict]:
    """The workers the scheduler of ``client`` holds now, by address: each one's identity
    (``host``, ``nthreads``, ...), asked of the scheduler. ``client.scheduler_info()``
    returns the client's cached copy, which its periodic update (every 2 s) overwrites,
    and recent versions of distributed (2026.8) update it without the workers: read just
    after that, every worker looked gone (a fit failed naming both as dead)."""
    return client.sync(client.scheduler.identity)["workers"]


def fit_dask(estimator, X, y):
    """Fit ``estimator`` on a Dask DataFrame ``X`` and a Dask Series ``y`` of the same
    partitions, one training process on each worker of the current Dask client (the
    module docstring); returns ``estimator``, fitted.

    Raises
    ------
    RuntimeError
        When a process fails or its worker dies, naming them.
    """
    from distributed import get_client

    from ._engines import DaskTable

    try:
        client = get_client()
    except ValueError as exc:
        raise ValueError("fitting a Dask DataFrame trains on the workers of a Dask client: "
                         "start one first (distributed.Client)") from exc
    identities = dask_workers(client)
    workers = list(identities)
    if not workers:
        raise ValueError("fitting a Dask DataFrame trains on the workers of the current Dask "
                         f"client, and its scheduler ({client.scheduler.address}) has none: "
                         "start some, or wait for them (client.wait_for_workers)")
    table = DaskTable(X, y)
    payload, callbacks = _plan(estimator, table, len(workers))
    parts = client.compute(table.rows.to_delayed())
    host = identities[workers[0]]["host"]
    port = client.run(_free_port, workers=[workers[0]])[workers[0]]
    token = uuid.uuid4().hex
    futures = [client.submit(train_rank, payload, parts[rank::len(workers)], TARGET_COLUMN,
                             rank, len(workers), f"tcp://{host}:{port}", workers=[worker],
                             allow_other_workers=False, pure=False,
                             key=f"neumiss-rank-{rank}-{token}")
               for rank, worker in enumerate(workers)]
    return adopt(estimator, _wait_for_ranks(client, workers, futures), callbacks)


#: Seconds between two looks at the training processes of :func:`fit_dask`.
POLL_SECONDS = 0.2


def _wait_for_ranks(client, workers: list[str], futures) -> bytes:
    """Rank 0's result once every process is done; a RuntimeError naming the workers
    that died, or the ranks that failed (and their errors), as soon as one does."""
    while True:
        alive = set(dask_workers(client))
        dead = [f"rank {rank} on worker {worker}" for rank, worker in enumerate(workers)
                if worker not in alive]
        failed = [(rank, workers[rank], future.exception())
                  for rank, future in enumerate(futures) if future.status == "error"]
        if dead or failed:
            client.cancel(futures)
            reasons = ([f"the worker of {what} died" for what in dead]
                       + [f"rank {rank} on worker {worker} failed: {error!r}"
                          for rank, worker, error in failed])
            raise RuntimeError("the data-parallel fit failed, no model was fitted: "
                               + "; ".join(reasons)) from (failed[0][2] if failed else None)
        if all(future.status == "finished" for future in futures):
            return futures[0].result()
        time.sleep(POLL_SECONDS)


def _train_files(payload: bytes, folder: str, label: str) -> bytes:
    """:func:`train_rank` of the process ``torchrun`` (or ``TorchDistributor``) started
    (``RANK`` and ``WORLD_SIZE`` in its environment) on its share of the Parquet files
    of ``folder``: every ``WORLD_SIZE``-th file from the ``RANK``-th, in name order."""
    rank, n_processes = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    files = sorted(Path(folder).rglob("*.parquet"))[rank::n_processes]
    frames = [frame for frame in map(pd.read_parquet, files) if len(frame)]
    return train_rank(payload, frames, label, rank, n_processes)


def fit_spark(estimator, df, label_col: str = "y", num_processes: int = 2, *,
              staging_dir=None, local_mode: bool = True):
    """Fit ``estimator`` on a Spark DataFrame: its column ``label_col`` is ``y``, the
    others ``X``; ``num_processes`` training processes started by Spark's
    ``TorchDistributor`` (the module docstring). Returns ``estimator``, fitted.

    Parameters
    ----------
    estimator : NeuMissRegressor or NeuMissClassifier
    df : pyspark.sql.DataFrame
    label_col : str
    num_processes : int
        Training processes (each a share of ``df``'s partitions).
    staging_dir : str, optional
        Where the executors write the rows as Parquet files for the processes to read
        (a folder in it, removed afterwards): on a cluster, a path every node reaches;
        default: the system's temporary folder (one machine).
    local_mode : bool
        ``TorchDistributor``'s: the processes run on the driver's machine (True), or as
        Spark tasks on the executors.

    Raises
    ------
    RuntimeError
        When a training process fails or dies (``TorchDistributor``'s error chained).
    """
    from pyspark.ml.torch.distributor import TorchDistributor

    from ._engines import SparkTable

    table = SparkTable(df, label_col)
    payload, callbacks = _plan(estimator, table, num_processes)
    with tempfile.TemporaryDirectory(dir=staging_dir, prefix="neumiss-rows-") as staging:
        rows = str(Path(staging) / "rows")
        df.select(*table.features, label_col).write.parquet(rows)
        distributor = TorchDistributor(num_processes=num_processes, local_mode=local_mode,
                                       use_gpu=False)
        try:
            fitted = distributor.run(_train_files, payload, rows, label_col)
        except Exception as exc:
            raise RuntimeError(f"the data-parallel fit failed, no model was fitted: a "
                               f"training process of {num_processes} failed: {exc}") from exc
    return adopt(estimator, fitted, callbacks)


def fit_parquet(estimator, path, target: str, num_processes: int = 2):
    """Fit ``estimator`` on a folder of Parquet files (column ``target`` is ``y``, the
    others ``X``): the sample and the statistics read on this machine a chunk at a time
    (:class:`~._engines.ParquetTable`: the driver's memory does not grow with the files),
    the training by ``num_processes`` processes started with ``torchrun``, each reading its
    share of the files (every ``num_processes``-th, in name order). Returns ``estimator``,
    fitted.

    Raises
    ------
    RuntimeError
        When a training process fails or dies (``torchrun``'s report of it included);
        no model is fitted.
    """
    from ._engines import ParquetTable

    _check_files(path, target)
    payload, callbacks = _plan(estimator, ParquetTable(path, target), num_processes)
    with tempfile.TemporaryDirectory(prefix="neumiss-torchrun-") as folder:
        plan, fitted = Path(folder) / "plan.pickle", Path(folder) / "fitted.pickle"
        plan.write_bytes(payload)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={num_processes}", "-m", __name__, str(plan),
                   str(path), target, str(fitted)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            errors = dict.fromkeys(line.strip() for line in done.stderr.splitlines()
                                   if "Error" in line or "exitcode" in line
                                   or "what():" in line or "terminate" in line)
            raise RuntimeError("the data-parallel fit failed, no model was fitted: torchrun "
                               f"exited with {done.returncode}: " + "; ".join(errors))
        return adopt(estimator, fitted.read_bytes(), callbacks)


def _check_files(path, target: str) -> None:
    """Refuse a folder without Parquet files, or whose files do not all hold the columns
    of the first (the target among them), naming the file (their schemas only are read)."""
    import pyarrow.parquet as pq

    files = sorted(Path(path).rglob("*.parquet"))
    if not files:
        raise ValueError(f"{path}: no .parquet files in this folder")
    names = pq.read_schema(files[0]).names
    if target not in names:
        raise ValueError(f"{files[0]}: no target column {target!r} (columns: {names})")
    for file in files[1:]:
        missing = [name for name in names if name not in pq.read_schema(file).names]
        if missing:
            raise ValueError(f"{file} has no column {missing[0]!r} (missing: {missing}); "
                             f"every file needs the columns of {files[0].name}: {names}")


def main(argv: list[str]) -> None:
    """The process ``torchrun`` starts (:func:`fit_parquet`): ``PLAN FOLDER TARGET OUT``;
    rank 0 writes the fitted estimator to ``OUT`` once whole (a rename)."""
    plan, folder, target, out = argv
    fitted = _train_files(Path(plan).read_bytes(), folder, target)
    if int(os.environ["RANK"]) == 0:
        partial = Path(f"{out}.partial")
        partial.write_bytes(fitted)
        partial.replace(out)


if __name__ == "__main__":
    main(sys.argv[1:])
    # The model file is written and closed and the process group destroyed: the process
    # ends without the interpreter's teardown of its modules, so that ``torchrun`` returns
    # as soon as every process has ended (results/README.md, issue 46). A failure above
    # raises and exits as usual.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
