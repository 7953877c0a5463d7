"""Data-parallel fitting where the rows live: the engines' statistics (Dask, Spark), the
training of every process with DDP, and the fits they launch."""

import numpy as np
import pandas as pd
import pytest

from neumiss import NeuMissRegressor
from neumiss.estimators._parallel_fit import dask_workers

dd = pytest.importorskip("dask.dataframe", reason="Dask is in the dev extra")


def _table(n=1200, seed=0):
    """A regression table with missing values, a column far from 0 and a categorical one."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)) * [1, 10, 1e3] + [0, 5, 1e6], columns=list("abc"))
    X = X.mask(rng.random(X.shape) < 0.2)
    X["k"] = rng.choice(["u", "v", "w"], n)
    y = pd.Series(X["a"].fillna(0) * 2 + (X["k"] == "u") + rng.normal(size=n), name="y")
    return X, y


def _small(**params):
    """An estimator that fits in a fraction of a second."""
    return NeuMissRegressor(**{"depth": 1, "mlp_depth": 0, "weight_sharing": "shared",
                               "ensemble_size": 1, "max_epochs": 3, "random_state": 0,
                               **params})


@pytest.fixture(autouse=True)
def one_process_group_at_a_time(tmp_path_factory):
    """The tests here start process groups (Dask workers, torchrun, Spark's
    TorchDistributor), each as many processes as this machine has cores: one test at a
    time across the pytest-xdist workers (a lock in their shared temporary folder), so
    that two groups never contend for the cores and the rendezvous side by side."""
    from filelock import FileLock

    with FileLock(tmp_path_factory.getbasetemp().parent / "neumiss-process-groups.lock"):
        yield


@pytest.fixture
def synchronous():
    import dask

    with dask.config.set(scheduler="synchronous"):
        yield


def _assert_statistics_give_fits_standardization(table, X_sample, y_sample):
    """``table``'s statistics, with the encoder of a fit on every row (the sample), give
    that fit's standardizer and target scale."""
    from neumiss.estimators._engines import PartitionEncoder, fitted_preprocessing

    sample = _small().fit(X_sample, y_sample)
    expected, y_moments = sample.preprocessor_, (sample.y_mean_, sample.y_scale_)
    fitted_preprocessing(sample, sample, table.statistics(PartitionEncoder(sample)))
    for name in ("mean_", "scale_", "inverse_bound_", "lower_", "upper_"):
        np.testing.assert_allclose(getattr(sample.preprocessor_, name), getattr(expected, name),
                                   rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose((sample.y_mean_, sample.y_scale_), y_moments, rtol=1e-12)


def test_dask_statistics_give_fits_standardization(synchronous):
    """One pass of Dask reductions over 4 partitions gives the standardizer and target scale
    ``fit`` computes in memory on the same rows (the sample is every row here)."""
    from neumiss.estimators._engines import DaskTable

    X, y = _table()
    table = DaskTable(dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4))
    X_sample, y_sample = table.sample(table.count(), seed=0)
    assert len(X_sample) == len(X)
    _assert_statistics_give_fits_standardization(table, X_sample, y_sample)


def _partitions(frames, meta):
    return dd.from_map(lambda i: frames[i], range(len(frames)), meta=meta,
                       enforce_metadata=False)


def test_dask_statistics_refuse_a_partition_without_a_column_or_with_an_unseen_category(
        synchronous):
    from neumiss.estimators._engines import DaskTable, PartitionEncoder

    X, y = _table(400)
    sample = _small().fit(X.iloc[:200], y.iloc[:200])
    y_parts = _partitions([y.iloc[:200], y.iloc[200:]], y.iloc[:0])
    lacking = _partitions([X.iloc[:200], X.iloc[200:].drop(columns="b")], X.iloc[:0])
    with pytest.raises(ValueError, match=r"partition 1 of X has no column 'b'"):
        DaskTable(lacking, y_parts).statistics(PartitionEncoder(sample))
    unseen = X.copy()
    unseen.loc[300, "k"] = "z"
    with pytest.raises(ValueError, match=r"partition 1: column 'k' holds categories the "
                                         r"sample .* did not: \['z'\]"):
        DaskTable(_partitions([unseen.iloc[:200], unseen.iloc[200:]], X.iloc[:0]),
                  y_parts).statistics(PartitionEncoder(sample))


def test_parquet_table_reads_chunks_into_the_statistics_fit_computes(tmp_path):
    """``ParquetTable`` (fit_parquet's driver): the rows counted from the files' metadata,
    a sample of every row when the table is small, and moments merged over chunks of 100
    rows across 3 files that give the standardizer and target scale ``fit`` computes."""
    from neumiss.estimators._engines import ParquetTable

    X, y = _table()
    table = ParquetTable(_parquet_folder(tmp_path / "rows", X, y, 3), "y", batch_rows=100)
    assert table.count() == len(X)
    X_sample, y_sample = table.sample(table.count(), seed=0)
    pd.testing.assert_frame_equal(X_sample, X)
    np.testing.assert_array_equal(y_sample, y)
    _assert_statistics_give_fits_standardization(table, X_sample, y_sample)


def test_parquet_table_samples_a_share_of_the_rows_and_names_a_file_with_unseen_categories(
        tmp_path, monkeypatch):
    from neumiss.estimators import _engines
    from neumiss.estimators._engines import ParquetTable, PartitionEncoder

    X, y = _table(2000)
    X.loc[1900, "k"] = "z"  # in the last file only
    table = ParquetTable(_parquet_folder(tmp_path / "rows", X, y, 4), "y", batch_rows=128)
    monkeypatch.setattr(_engines, "SAMPLE_ROWS", 500)
    X_sample, y_sample = table.sample(2000, seed=1)
    assert 400 < len(X_sample) < 600 and len(y_sample) == len(X_sample)
    again, _ = table.sample(2000, seed=1)
    pd.testing.assert_frame_equal(again, X_sample)  # one seed, one sample
    sample = _small().fit(X.iloc[:1000], y.iloc[:1000])
    with pytest.raises(ValueError, match=r"file part-3.parquet: column 'k' holds categories "
                                         r"the sample .* did not: \['z'\]"):
        table.statistics(PartitionEncoder(sample))


def test_dask_table_refuses_an_empty_partition_and_unaligned_y(synchronous):
    from neumiss.estimators._engines import DaskTable

    X, y = _table(400)
    empty = DaskTable(_partitions([X, X.iloc[:0]], X.iloc[:0]),
                      _partitions([y, y.iloc[:0]], y.iloc[:0]))
    with pytest.raises(ValueError, match="partition 1 of X is empty"):
        empty.count()
    shorter = DaskTable(_partitions([X.iloc[:200], X.iloc[200:]], X.iloc[:0]),
                        _partitions([y.iloc[:200], y.iloc[250:]], y.iloc[:0]))
    with pytest.raises(ValueError, match="partition 1: X has 200 rows and y 150"):
        shorter.count()
    with pytest.raises(ValueError, match="y must be a Dask Series of the same partitions"):
        DaskTable(dd.from_pandas(X, npartitions=2), y)


@pytest.fixture(scope="module")
def dask_client():
    """A Dask cluster of 2 worker processes of one thread each."""
    distributed = pytest.importorskip("distributed", reason="Dask is in the dev extra")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def _classes(n=2000, seed=1):
    X, y = _table(n, seed)
    return X, pd.Series(np.where(y > y.median(), "high", "low"), name="y")


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_dask_fit_trains_on_two_workers_and_saves_an_ordinary_model(dask_client, kind,
                                                                    tmp_path):
    """``fit`` with Dask collections: 2 workers train data-parallel; the model predicts
    what it predicts after a save and load, and learns the signal. The classifier's rows
    are read from 4 Parquet files, ``y`` a column of them (Dask may then fuse small files
    into fewer partitions when it optimizes a computation: X and y must stay aligned)."""
    import neumiss
    from neumiss import NeuMissClassifier

    X, y = _table(2000) if kind == "regressor" else _classes()
    params = {"depth": "auto", "mlp_depth": 0, "ensemble_size": 2, "max_epochs": 15,
              "random_state": 0}
    estimator = (NeuMissRegressor if kind == "regressor" else NeuMissClassifier)(**params)
    if kind == "regressor":
        X_dask, y_dask = dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4)
    else:
        rows = dd.read_parquet(_parquet_folder(tmp_path / "rows", X, y, 4))
        X_dask, y_dask = rows.drop(columns="y"), rows["y"]
    returned = estimator.fit(X_dask, y_dask)
    assert returned is estimator and estimator.best_depth_ in neumiss.network.AUTO_DEPTHS
    assert estimator.validation_scheme_ == "holdout" and estimator.n_epochs_ >= 1
    assert estimator.n_validation_rows_ == 200  # a tenth of each worker's 1,000 rows
    assert estimator.get_params() == {**estimator.get_params(), **params}  # as given
    path = tmp_path / "model.neumiss"
    estimator.save(path)
    loaded = neumiss.load(path)
    if kind == "regressor":
        np.testing.assert_array_equal(loaded.predict(X), estimator.predict(X))
        assert estimator.score(X, y) > 0.5
    else:
        np.testing.assert_array_equal(loaded.predict_proba(X), estimator.predict_proba(X))
        assert estimator.score(X, y) > 0.7


def test_dask_fit_asks_the_scheduler_for_its_workers(dask_client, monkeypatch):
    """The client's cached scheduler information, which its periodic update leaves
    without workers (distributed 2026.8), is not what the fit reads: with that cache
    empty it still trains on both workers, and ``dask_workers`` names them."""
    from distributed import Client

    workers = dask_workers(dask_client)
    assert len(workers) == 2 and all(w["host"] == "127.0.0.1" for w in workers.values())
    emptied = {**dask_client.scheduler_info(), "workers": {}}
    monkeypatch.setattr(Client, "scheduler_info", lambda self, *args, **kwargs: emptied)
    X, y = _table(2000)
    estimator = _small().fit(dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4))
    assert estimator.n_validation_rows_ == 200  # a tenth of each worker's 1,000 rows


def test_dask_fit_without_workers_says_so(dask_client, monkeypatch):
    """A scheduler without workers is refused by name, before any computation."""
    from neumiss.estimators import _parallel_fit

    monkeypatch.setattr(_parallel_fit, "dask_workers", lambda client: {})
    X, y = _table(200)
    estimator = _small()
    with pytest.raises(ValueError, match="its scheduler .* has none: start some"):
        estimator.fit(dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2))
    assert not hasattr(estimator, "network_")


def _die():
    """Kill the process that runs this (a Dask worker, from ``client.run``)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def _training_tasks(dask_scheduler):
    """The training processes of a data-parallel fit running on the scheduler's workers."""
    return [key for key, task in dask_scheduler.tasks.items()
            if str(key).startswith("neumiss-rank") and task.state == "processing"]


def test_dask_fit_fails_naming_a_worker_that_dies(dask_client, monkeypatch):
    """A worker killed while the processes train fails the fit with an error naming it;
    the estimator stays unfitted. (A small sample: the data-parallel training of 1,000
    epochs runs for long after the sample's.)"""
    from neumiss.estimators import _engines

    monkeypatch.setattr(_engines, "SAMPLE_ROWS", 200)
    import contextlib
    import threading
    import time

    X, y = _table(2000)
    rank_1 = list(dask_workers(dask_client))[1]

    def kill_rank_1():
        for _ in range(600):  # until the training tasks run (at most a minute)
            if dask_client.run_on_scheduler(_training_tasks):
                time.sleep(0.5)
                with contextlib.suppress(Exception):  # its answer never comes
                    dask_client.run(_die, workers=[rank_1])
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_rank_1)
    killer.start()
    estimator = _small(max_epochs=1000, patience=1000, lr_patience=1000, tol=0.0)
    try:
        with pytest.raises(RuntimeError, match=f"the worker of rank 1 on worker {rank_1} died"):
            estimator.fit(dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4))
    finally:
        killer.join()
    assert not hasattr(estimator, "network_")


@pytest.mark.slow
def test_spark_fit_trains_with_torch_distributor_and_refuses_unseen_categories(monkeypatch,
                                                                              tmp_path):
    """``fit_spark`` on a local session: 2 processes started by ``TorchDistributor`` train
    a model whose predictions equal its own after a save and load (and its ONNX
    export's); a category the sample did not hold is refused by name."""
    import sys

    import neumiss
    from neumiss.scoring import load_model, score_frame

    from .test_scoring import _spark_session

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # workers: this Python
    spark = _spark_session()
    X, y = _table(2000)
    estimator = NeuMissRegressor(depth=1, mlp_depth=0, weight_sharing="shared",
                                 ensemble_size=2, max_epochs=15, random_state=0)
    try:
        df = spark.createDataFrame(X.assign(y=y)).repartition(4)
        assert neumiss.fit_spark(estimator, df, label_col="y", num_processes=2) is estimator
        unseen = X.assign(y=y)
        unseen.loc[7, "k"] = "z"
        monkeypatch.setattr("neumiss.estimators._engines.SAMPLE_ROWS", 1000)
        with pytest.raises(ValueError, match=r"column 'k' holds categories .* \['z'\]"):
            neumiss.fit_spark(_small(), spark.createDataFrame(unseen), label_col="y")
    finally:
        spark.stop()
    path = tmp_path / "model.neumiss"
    estimator.save(path)
    np.testing.assert_array_equal(neumiss.load(path).predict(X), estimator.predict(X))
    estimator.to_onnx(tmp_path / "model.onnx")
    onnx = score_frame(X, load_model(str(tmp_path / "model.onnx")))["prediction"]
    np.testing.assert_allclose(onnx, estimator.predict(X), rtol=1e-4, atol=1e-4)
    assert estimator.score(X, y) > 0.5


def _parquet_folder(folder, X, y, n_files):
    """``X`` with ``y`` as column ``y`` in ``n_files`` Parquet files of ``folder``."""
    folder.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(X)), n_files)):
        X.iloc[rows].assign(y=y.iloc[rows]).to_parquet(folder / f"part-{i}.parquet")
    return folder


def test_a_rank_frees_its_ddp_wrapper_before_the_group_is_destroyed(synchronous, tmp_path):
    """After ``train_rank`` (one process, a group of one), no DDP wrapper is left alive,
    even with the cycle collector off: a wrapper kept by a reference cycle holds the gloo
    group until the interpreter's exit, where freeing it aborted torchrun's processes."""
    import gc

    from torch.nn.parallel import DistributedDataParallel

    from neumiss.estimators._engines import TARGET_COLUMN, DaskTable
    from neumiss.estimators._parallel_fit import _plan, train_rank

    X, y = _table(600)
    table = DaskTable(dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2))
    payload, _ = _plan(_small(), table, 1)
    gc.disable()
    try:
        train_rank(payload, [X.assign(**{TARGET_COLUMN: y})], TARGET_COLUMN, 0, 1,
                   f"file://{tmp_path / 'rendezvous'}")
        alive = [o for o in gc.get_objects() if isinstance(o, DistributedDataParallel)]
    finally:
        gc.enable()
    assert alive == []


def test_a_data_parallel_fit_calls_the_callbacks_on_the_samples_fit_only(synchronous,
                                                                         tmp_path):
    """The sample's fit, in this process, calls the estimator's callbacks (its
    ``callbacks_`` become the estimator's); the processes' training calls none: the
    pickled worker has no callbacks, so their classes need not exist there."""
    import pickle

    from neumiss.estimators._engines import TARGET_COLUMN, DaskTable
    from neumiss.estimators._parallel_fit import _plan, adopt, train_rank
    from neumiss.network import History, describe_training

    X, y = _table(600)
    table = DaskTable(dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2))
    estimator = _small(callbacks=[History()])
    payload, callbacks = _plan(estimator, table, 1)
    assert pickle.loads(payload).callbacks is None
    (history,) = callbacks
    assert [training["description"] for training in history.trainings] == [
        describe_training("NeuMissRegressor", "depth search", 1, "shared", 0)]
    fitted = train_rank(payload, [X.assign(**{TARGET_COLUMN: y})], TARGET_COLUMN, 0, 1,
                        f"file://{tmp_path / 'rendezvous'}")
    assert pickle.loads(fitted).callbacks_ == []
    assert adopt(estimator, fitted, callbacks).callbacks_ is callbacks
    assert estimator.callbacks[0].trainings == []  # the parameter's is never called


def test_fit_parquet_trains_with_torchrun_on_a_folder(tmp_path):
    """``fit_parquet``: 2 processes started by torchrun, each reading 2 of 4 files, train
    a model that predicts as after a save and load and learns the signal."""
    import neumiss
    from neumiss.estimators import fit_parquet

    X, y = _table(2000)
    folder = _parquet_folder(tmp_path / "rows", X, y, 4)
    estimator = fit_parquet(_small(max_epochs=10, ensemble_size=2), folder, "y", 2)
    estimator.save(tmp_path / "model.neumiss")
    np.testing.assert_array_equal(neumiss.load(tmp_path / "model.neumiss").predict(X),
                                  estimator.predict(X))
    assert estimator.score(X, y) > 0.5


def test_fit_parquet_refuses_a_file_without_a_column_and_a_process_without_rows(tmp_path):
    from neumiss.estimators import fit_parquet

    X, y = _table(400)
    folder = _parquet_folder(tmp_path / "rows", X, y, 2)
    X.iloc[:10].drop(columns="b").assign(y=y.iloc[:10]).to_parquet(folder / "part-2.parquet")
    with pytest.raises(ValueError, match=r"part-2.parquet has no column 'b'"):
        fit_parquet(_small(), folder, "y", 2)
    one_file = _parquet_folder(tmp_path / "one", X, y, 1)
    estimator = _small()
    with pytest.raises(RuntimeError, match="torchrun exited with 1: .*process 1 of 2 has no rows"):
        fit_parquet(estimator, one_file, "y", 2)
    assert not hasattr(estimator, "network_")


def _local_steps(rank: int, folder: str) -> None:
    """One of two gloo processes: a small network trained data-parallel on this rank's own
    rows (4 steps an epoch, 2 epochs), the weights averaged every second step; saves the
    sum of its weights after each step and its final weights."""
    import torch
    import torch.distributed as dist

    from neumiss.network import (
        Callback,
        EvenBatches,
        ModelAveraging,
        NeuMissNetwork,
        StackedNetwork,
        TrainingConfig,
        TrainingData,
        all_reduced_loss,
        data_parallel,
        train,
    )

    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank,
                            world_size=2)
    try:
        generator = torch.Generator().manual_seed(rank)  # each rank its rows and its start
        x = torch.randn(64, 3, generator=generator)
        data = TrainingData(x, torch.zeros(64, 3), x.sum(1) + torch.randn(64, generator=generator))
        member = NeuMissNetwork(3, depth=1)
        member.reset_parameters(generator)
        network = StackedNetwork([member], "mean")
        sums = []

        class Sums(Callback):
            def on_batch_end(self, wrapped):
                sums.append(float(sum(p.double().sum() for p in network.parameters())))

        train(data_parallel(network), EvenBatches(data), data,
              lambda output, target: (output[..., 0] - target) ** 2,
              TrainingConfig(max_epochs=2, batch_size=16, patience=5),
              torch.Generator().manual_seed(0), guard=False, evaluate=all_reduced_loss,
              callbacks=[ModelAveraging(period=2), Sums()])
        torch.save({"sums": sums, "weights": [p.detach() for p in network.parameters()]},
                   f"{folder}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_data_parallel_processes_take_local_steps_and_average_their_weights(tmp_path):
    """Local SGD: from rank 0's start, each process steps on its own rows alone, and every
    second step (the averager counts from its first) their weights are averaged, so that
    they agree after the 1st, 3rd, ... steps and differ after the others; the network kept
    (validated on averaged weights) is the same in both."""
    import torch
    import torch.multiprocessing

    torch.multiprocessing.spawn(_local_steps, args=(str(tmp_path),), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in (0, 1)]
    sums = np.array([rank["sums"] for rank in ranks])  # (2 ranks, 8 steps)
    assert sums.shape == (2, 8)
    np.testing.assert_allclose(sums[0, ::2], sums[1, ::2], rtol=1e-6)
    assert (np.abs(sums[0, 1::2] - sums[1, 1::2]) > 1e-6).all()
    for mine, other in zip(*(rank["weights"] for rank in ranks)):
        torch.testing.assert_close(mine, other)
