"""On a CUDA GPU: fits, predictions, model files and ONNX graphs of a model trained there,
and no host synchronization per training step. Every test here skips without a GPU (the
CPU tests cover the same logic: tests/test_gpu_logic.py); they run on a GPU machine with
``pytest tests/test_gpu.py``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import neumiss
from neumiss.network import NeuMissNetwork, StackedNetwork, TrainingData, _graphs
from neumiss.network._graphs import GraphedSteps, graphs_pay
from neumiss.network._optimizer import Steps
from neumiss.network._training import _train_epoch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (none is visible to torch)")

CUDA = torch.device("cuda")


def _data(n=4000, d=8, seed=0):
    X, y, truth = neumiss.simulation.make_regression(n, d, mechanism="MCAR", random_state=seed)
    return X, y, truth


def test_a_fit_on_the_gpu_scores_as_the_fit_on_the_cpu(monkeypatch):
    X, y, truth = _data()
    X_test, y_test = truth.sample(4000, random_state=1)
    scores = {}
    for device, graphs in (("cpu", False), ("cuda", False), ("cuda", True)):
        monkeypatch.setattr(_graphs, "USE_CUDA_GRAPHS", graphs)
        model = neumiss.NeuMissRegressor(random_state=0, device=device).fit(X, y)
        scores[device, graphs] = model.score(X_test, y_test)
    assert next(model.network_.parameters()).device.type == "cuda"
    # Different kernels, different rounding: the same fit up to the noise of training.
    assert max(scores.values()) - min(scores.values()) < 0.02, scores


def test_a_model_trained_on_the_gpu_predicts_the_same_from_its_file_and_onnx(tmp_path):
    X, y, _ = _data(n=2000)
    model = neumiss.NeuMissRegressor(random_state=0, device="cuda", max_epochs=5).fit(X, y)
    on_gpu = model.predict(X)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert loaded.device == "cpu"
    np.testing.assert_allclose(loaded.predict(X), on_gpu, rtol=1e-5, atol=1e-5)
    model.to_onnx(tmp_path / "m.onnx")
    scorer = neumiss.scoring.load_model(tmp_path / "m.onnx")
    np.testing.assert_allclose(scorer.predict(X)["y"], on_gpu, rtol=1e-5, atol=1e-5)


def test_a_classifier_trains_and_predicts_on_the_gpu():
    X, y, _ = _data()
    labels = (y > np.median(y)).astype(int)
    model = neumiss.NeuMissClassifier(random_state=0, device="cuda", max_epochs=10)
    proba = model.fit(X, labels).predict_proba(X)
    assert proba.shape == (len(X), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    assert model.score(X, labels) > 0.7


def _training_case(n, d=40, n_members=3, missing=False, seed=0):
    """Rows on the GPU (case weights, each member on all but its fold of rows) and a
    stacked network with the mask's term and an MLP head; with ``missing``, only the
    first 10 columns go missing and the network takes the block's shortcut."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator)
    mask = (torch.rand(n, d, generator=generator) < 0.3).float()
    if missing:
        mask[:, 10:] = 0.0
    data = TrainingData((x * (1 - mask)).to(CUDA), mask.to(CUDA),
                        torch.randn(n, generator=generator).to(CUDA),
                        weight=torch.rand(n, generator=generator).to(CUDA) * 2,
                        member_weight=torch.stack([torch.arange(n) % n_members != k
                                                   for k in range(n_members)], 1).float().to(CUDA))
    torch.manual_seed(seed)
    members = [NeuMissNetwork(d, depth=3, residual=True, mlp_depth=1, mlp_width=16,
                              mask_skip=True) for _ in range(n_members)]
    columns = torch.arange(10, device=CUDA) if missing else None
    return data, StackedNetwork(members, "mean", columns).to(CUDA)


def _squared(output, target):
    return (output.squeeze(-1) - target) ** 2


def test_steps_replayed_from_a_graph_train_as_eager_steps():
    # 20 full batches and a partial one an epoch, three epochs, the learning rate lowered
    # (a new recording) before the last: the weights of both paths agree.
    states = []
    for graphed in (False, True):
        data, network = _training_case(20 * 128 + 50)
        optimizer = Steps(network.parameters(), "adam", 1e-2)
        graphs = GraphedSteps(128) if graphed else None
        generator = torch.Generator().manual_seed(1)
        losses = []
        for epoch in range(3):
            if epoch == 2:
                optimizer.lr = 2e-3
            losses.append(_train_epoch(network, data, optimizer, _squared, 128, generator,
                                       graphs))
        states.append((losses, {k: v.cpu() for k, v in network.state_dict().items()}))
    # The same kernels on the same numbers, up to the GPU's order of summation (which
    # Adam's normalized steps carry on): a skipped or stale batch would be far off.
    np.testing.assert_allclose(states[1][0], states[0][0], rtol=1e-3)
    for name, value in states[0][1].items():
        torch.testing.assert_close(states[1][1][name], value, rtol=1e-3, atol=1e-4,
                                   msg=name)


def test_graphs_train_rows_on_the_gpu_with_enough_full_batches():
    data, _ = _training_case(8 * 100 + 99)
    assert graphs_pay(data, 100)  # 8 full batches
    assert not graphs_pay(data, 113)  # 7 full batches


def _sync_warnings(action) -> int:
    """How many synchronizing CUDA operations ``action()`` performs (torch's sync debug
    mode, 'warn')."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            action()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def test_the_sync_detector_sees_a_host_read():
    value = torch.ones(3, device=CUDA)
    assert _sync_warnings(lambda: float(value.sum())) >= 1


@pytest.mark.parametrize("missing", [False, True])
def test_training_steps_do_not_wait_for_the_gpu(missing):
    # The synchronizations of an epoch (its shuffle's transfer, the loss read at its end)
    # must not grow with the number of steps: 4 and 32 steps make as many.
    data, network = _training_case(4096, missing=missing)
    optimizer = Steps(network.parameters(), "adam", 1e-3)
    generator = torch.Generator().manual_seed(0)
    counts = {steps: _sync_warnings(lambda steps=steps: _train_epoch(
        network, data, optimizer, _squared, len(data) // steps, generator))
        for steps in (4, 32)}
    assert counts[32] == counts[4], counts


def test_replayed_steps_do_not_wait_for_the_gpu():
    data, network = _training_case(64 * 64)
    optimizer = Steps(network.parameters(), "adam", 1e-3)
    generator = torch.Generator().manual_seed(0)
    graphs = GraphedSteps(64)
    _train_epoch(network, data, optimizer, _squared, 64, generator, graphs)  # records
    counts = {rows: _sync_warnings(lambda rows=rows: _train_epoch(
        network, data.rows(0, rows), optimizer, _squared, 64, generator, graphs))
        for rows in (16 * 64, 64 * 64)}
    assert counts[16 * 64] == counts[64 * 64], counts


def test_an_epoch_on_the_gpu_visits_every_row_once_in_a_repeatable_order():
    n = 1000
    data = TrainingData(torch.arange(n, dtype=torch.float32, device=CUDA)[:, None],
                        torch.zeros(n, 1, device=CUDA), torch.zeros(n, device=CUDA))
    orders = [torch.cat([batch.x[:, 0] for batch in data.batches(
        64, torch.Generator().manual_seed(seed))]).long().cpu() for seed in (0, 0, 1)]
    assert torch.equal(orders[0].sort().values, torch.arange(n))
    assert torch.equal(orders[0], orders[1]) and not torch.equal(orders[0], orders[2])
