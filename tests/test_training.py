"""Mini-batch training (neumiss.network._training) and its parts, each on its own: early
stopping with its best-weights restore, the plateau learning-rate schedule, the divergence
guard with its back-off and constant fallback, the progress report, the automatic batch
size and learning rate."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from neumiss.network import (
    AUTO_BATCH_SIZE,
    GPU_AUTO_BATCH_SIZE,
    NeuMissNetwork,
    TrainingConfig,
    TrainingData,
    auto_batch_size,
    auto_learning_rate,
    train,
)
from neumiss.network._divergence import (
    BACKOFF_FACTOR,
    DIVERGENCE_EPOCHS,
    EXPLOSION_FACTOR,
    DivergenceGuard,
)
from neumiss.network._optimizer import Steps
from neumiss.network._stopping import ABANDON_EPOCHS, Checkpoint, EarlyStopping, abandon_level
from neumiss.network._training import PlateauSchedule, TrainingResult

CPU = torch.device("cpu")


def _mse(output, target):
    return (output[:, 0] - target) ** 2


def _data(n=120, d=3, seed=0, constant=None):
    """Rows with 20% of the entries missing; a linear target, or ``constant``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.linspace(1.0, -1.0, d) + 0.1 * rng.normal(size=n)
    y = y if constant is None else np.full(n, constant)
    mask = rng.random((n, d)) < 0.2
    return TrainingData(torch.as_tensor(np.where(mask, 0.0, X), dtype=torch.float32),
                        torch.as_tensor(mask, dtype=torch.float32),
                        torch.as_tensor(y, dtype=torch.float32))


def _weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in module.state_dict().items()}


def _shift(module: nn.Module, by: float) -> None:
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(by)


def _assert_weights(module: nn.Module, expected: dict[str, torch.Tensor]) -> None:
    for name, value in module.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0)


# ------------------------------------------------------------------ early stopping


def test_early_stopping_restores_the_weights_of_the_lowest_loss():
    network = nn.Linear(2, 1)
    stopping = EarlyStopping(network, patience=5, tol=0.0)
    initial = _weights(network)
    assert (stopping.best_epoch, stopping.best_loss) == (0, math.inf)
    assert math.isnan(stopping.best_score)
    for epoch, loss in enumerate([1.0, 0.5, 0.7], start=1):
        _shift(network, 1.0)
        if epoch == 2:
            best = _weights(network)
        stopping.update(epoch, loss, -loss)
    assert (stopping.best_epoch, stopping.best_loss, stopping.best_score) == (2, 0.5, -0.5)
    stopping.restore()
    _assert_weights(network, best)
    assert not torch.equal(network.weight, initial["weight"])


def test_early_stopping_without_a_finite_epoch_keeps_the_initial_weights():
    network = nn.Linear(2, 1)
    initial = _weights(network)
    stopping = EarlyStopping(network, patience=1, tol=0.0)
    _shift(network, 3.0)
    stopping.update(1, math.nan, math.nan)
    stopping.restore()
    assert stopping.best_epoch == 0
    _assert_weights(network, initial)


def test_early_stopping_counts_only_relative_improvements():
    # tol = 0.1: 0.95 and 0.92 are new lows, yet not 10% below 1.0.
    stopping = EarlyStopping(nn.Linear(2, 1), patience=2, tol=0.1)
    stopping.update(1, 1.0, 0.0)
    stopping.update(2, 0.95, 0.0)
    assert not stopping.should_stop(2)
    stopping.update(3, 0.92, 0.0)
    assert stopping.should_stop(3) and stopping.best_epoch == 3
    loose = EarlyStopping(nn.Linear(2, 1), patience=2, tol=0.0)
    for epoch, loss in enumerate([1.0, 0.95, 0.92], start=1):
        loose.update(epoch, loss, 0.0)
    assert not loose.should_stop(3)


def test_a_candidate_is_kept_until_an_epoch_beats_it():
    network = nn.Linear(2, 1)
    candidate = _weights(network)
    stopping = EarlyStopping(network, patience=3, tol=0.0,
                             candidate=Checkpoint(candidate, 0.5, 0.75))
    _shift(network, 1.0)
    stopping.update(1, 0.6, 0.7)  # worse than the candidate: not kept, but an improvement
    assert (stopping.best_epoch, stopping.best_loss, stopping.best_score) == (0, 0.5, 0.75)
    assert not stopping.should_stop(3)
    stopping.restore()
    _assert_weights(network, candidate)
    _shift(network, 1.0)
    stopping.update(2, 0.4, 0.8)
    assert stopping.best_epoch == 2


def test_a_restart_counts_improvements_anew_from_the_best_loss():
    stopping = EarlyStopping(nn.Linear(2, 1), patience=2, tol=0.1)
    stopping.update(1, 1.0, 0.0)
    stopping.update(2, 0.5, 0.0)
    stopping.restart(5)
    assert not stopping.should_stop(6) and stopping.should_stop(7)
    stopping.update(6, 0.46, 0.0)  # below the best, not 10% below it
    assert stopping.should_stop(7)
    stopping.update(7, 0.44, 0.0)
    assert not stopping.should_stop(8)


def test_early_stopping_abandons_after_epochs_above_a_loss_beaten_by_far():
    # Patience 5 would go on; ABANDON_EPOCHS epochs in a row above 1.0 stop it.
    stopping = EarlyStopping(nn.Linear(2, 1), patience=5, tol=0.0, abandon_above=1.0)
    losses = [0.9] + [1.2 + 0.1 * k for k in range(ABANDON_EPOCHS)]
    for epoch, loss in enumerate(losses, start=1):
        stopping.update(epoch, loss, 0.0)
        assert stopping.should_stop(epoch) == (epoch == len(losses))
    assert stopping.best_epoch == 1
    never = EarlyStopping(nn.Linear(2, 1), patience=5, tol=0.0)
    for epoch in range(1, 4):
        never.update(epoch, 1e9 / epoch, 0.0)  # improving: no stop without a level
        assert not never.should_stop(epoch)


@pytest.mark.parametrize("best_seen, constant, expected", [
    (0.2, 1.0, 0.25),  # 25% above the best seen
    (0.01, 1.0, 0.01 + 0.05 * 0.99),  # 5% of the way to the constant's loss
    (math.inf, 1.0, math.inf), (0.2, math.inf, math.inf), (1.2, 1.0, math.inf)])
def test_the_abandon_level_is_behind_both_relatively_and_against_the_constant(
        best_seen, constant, expected):
    assert abandon_level(best_seen, constant) == pytest.approx(expected)


# ------------------------------------------------------------------ learning-rate schedule


def test_plateau_schedule_lowers_the_rate_after_lr_patience_flat_epochs():
    config = TrainingConfig(learning_rate=0.1, lr_patience=1, lr_factor=0.5, tol=0.01,
                            min_learning_rate=0.03)
    schedule = PlateauSchedule(nn.Linear(2, 1), config)
    assert schedule.learning_rate == 0.1 and not schedule.exhausted
    schedule.step(1.0)
    schedule.step(0.995)  # less than 1% lower: a flat epoch, within lr_patience
    assert schedule.learning_rate == 0.1
    schedule.step(0.994)  # the second flat epoch
    assert schedule.learning_rate == pytest.approx(0.05)
    schedule.step(0.5)
    schedule.step(0.5)
    schedule.step(0.5)
    assert schedule.learning_rate == pytest.approx(0.025) and schedule.exhausted


@pytest.mark.parametrize("optimizer, kind", [("adam", torch.optim.Adam),
                                             ("sgd", torch.optim.SGD)])
def test_the_steps_are_torchs_and_a_restart_forgets_the_moments(optimizer, kind):
    torch.manual_seed(0)
    network, reference = nn.Linear(3, 2), nn.Linear(3, 2)
    reference.load_state_dict(network.state_dict())
    schedule = PlateauSchedule(network, TrainingConfig(optimizer=optimizer, learning_rate=0.05,
                                                       weight_decay=0.01))
    torch_optimizer = kind(reference.parameters(), lr=0.05, weight_decay=0.01)
    for step in range(5):
        x = torch.randn(8, 3, generator=torch.Generator().manual_seed(step))
        for model, opt in ((network, schedule.optimizer), (reference, torch_optimizer)):
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            opt.step()
    for value, expected in zip(network.parameters(), reference.parameters()):
        torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)
    first = schedule.optimizer
    schedule.restart(0.001)
    assert schedule.optimizer is not first and schedule.learning_rate == 0.001
    if optimizer == "adam":
        assert all(float(m.abs().sum()) == 0.0 for m in schedule.optimizer._moments)


@settings(max_examples=30, deadline=None)
@given(losses=st.lists(st.floats(0.1, 2.0), min_size=1, max_size=25),
       patience=st.integers(0, 3), tol=st.sampled_from([0.0, 2e-3, 0.05]))
def test_the_plateau_rule_is_reduce_lr_on_plateaus(losses, patience, tol):
    config = TrainingConfig(learning_rate=0.1, lr_patience=patience, tol=tol, lr_factor=0.2)
    schedule = PlateauSchedule(nn.Linear(2, 1), config)
    torch_optimizer = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch_optimizer, factor=0.2, patience=patience, threshold=tol, threshold_mode="rel")
    for loss in losses:
        schedule.step(loss)
        plateau.step(loss)
        assert schedule.learning_rate == pytest.approx(torch_optimizer.param_groups[0]["lr"])


def test_adams_counts_follow_each_parameter_bit_for_bit_with_torchs_fused_adam():
    # a parameter without a gradient at a step is not stepped, nor is its count: the
    # second layer trains on odd steps only, so its bias correction lags the first's
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    reference = copy.deepcopy(network)
    steps = Steps(network.parameters(), "adam", lr=0.05, weight_decay=0.01)
    torch_adam = torch.optim.Adam(reference.parameters(), lr=0.05, weight_decay=0.01,
                                  fused=True)
    for step in range(6):
        x = torch.randn(8, 3, generator=torch.Generator().manual_seed(step))
        for model, opt in ((network, steps), (reference, torch_adam)):
            opt.zero_grad()
            out = model(x) if step % 2 else model[0](x)
            (out ** 2).mean().backward()
            opt.step()
    for value, expected in zip(network.parameters(), reference.parameters()):
        assert torch.equal(value, expected)
    assert [float(c) for c in steps._counts] == [6.0, 6.0, 3.0, 3.0]


def test_steps_refuse_parameters_of_two_dtypes():
    parameters = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    with pytest.raises(ValueError, match="one device and dtype"):
        Steps(parameters, "adam", lr=0.1)


def test_an_unknown_optimizer_is_refused():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        PlateauSchedule(nn.Linear(2, 1), TrainingConfig(optimizer="rmsprop"))


# ------------------------------------------------------------------ divergence guard


def _guard(network=None, constant=None):
    if network is None:  # seeded: the tests must not depend on the global random state
        network = NeuMissNetwork(3, depth=1)
        network.reset_parameters(torch.Generator().manual_seed(0))
    train_data, val_data = _data(constant=constant), _data(60, seed=1, constant=constant)
    return DivergenceGuard(network, train_data, val_data, _mse), network, train_data, val_data


def test_the_constant_predictor_is_the_training_mean():
    guard, _, train_data, val_data = _guard()
    mean = float(train_data.target.mean())
    assert float(guard.constant[0]) == pytest.approx(mean, abs=1e-5)
    assert guard.train_loss == pytest.approx(float(((train_data.target - mean) ** 2).mean()))
    assert guard.loss == pytest.approx(float(((val_data.target - mean) ** 2).mean()))


def test_non_finite_and_exploding_losses_diverge_at_once():
    guard, *_ = _guard()
    assert "non-finite" in guard.check(math.nan, 1.0)
    assert "non-finite" in guard.check(1.0, math.inf)
    # The ceiling is at least EXPLOSION_FACTOR times the constant predictor's loss.
    assert guard.check(0.5 * guard.train_loss, 0.5 * guard.loss) is None
    cause = guard.check(0.5 * guard.train_loss, 1e6 * EXPLOSION_FACTOR * guard.loss)
    assert cause.startswith("exploding loss: validation")


def test_stalled_epochs_above_the_constant_diverge_unless_one_is_a_new_low():
    guard, *_ = _guard()
    above = 2.0 * guard.loss
    # The first epoch sets the lowest loss; the stalled epochs after it count.
    assert all(guard.check(1.0, above) is None for _ in range(DIVERGENCE_EPOCHS))
    assert f"for {DIVERGENCE_EPOCHS} epochs" in guard.check(1.0, above)
    improving, *_ = _guard()
    assert all(improving.check(1.0, above * (1 - 0.01 * k)) is None for k in range(10))


def test_with_an_exact_constant_only_non_finite_losses_diverge():
    guard, network, train_data, _ = _guard(constant=3.0)
    assert guard.loss < 1e-10
    assert all(guard.check(1e9, 1e9) is None for _ in range(2 * DIVERGENCE_EPOCHS))
    assert guard.check(math.nan, 1.0) is not None
    _shift(network, 1.0)
    assert guard.reject(train_data, best_epoch=3) is None


def test_back_off_lowers_the_rate_then_stops_below_the_minimum():
    guard, *_ = _guard()
    assert guard.back_off(4, "cause", 0.1, 1e-3) == pytest.approx(0.1 * BACKOFF_FACTOR)
    assert guard.backoffs == [{"epoch": 4, "cause": "cause", "overfitting": False,
                               "lr": 0.1 * BACKOFF_FACTOR}]
    assert guard.stopped is None
    assert guard.back_off(9, "again", 0.005, 1e-3) is None
    assert guard.backoffs[-1] == {"epoch": 9, "cause": "again", "overfitting": False,
                                  "lr": 0.005}
    assert "min_learning_rate (0.001)" in guard.stopped


def test_back_off_counts_the_stalled_epochs_anew():
    guard, *_ = _guard()
    above = 2.0 * guard.loss
    for _ in range(DIVERGENCE_EPOCHS):
        guard.check(1.0, above)
    guard.back_off(3, "cause", 0.1, 1e-6)
    assert all(guard.check(1.0, above) is None for _ in range(DIVERGENCE_EPOCHS - 1))
    assert guard.check(1.0, above) is not None


@pytest.mark.parametrize("overfitting", [False, True])
def test_a_stall_above_the_constant_is_overfitting_when_the_training_rows_fit_better(
        overfitting):
    guard, *_ = _guard()
    train_loss = guard.train_loss * (0.5 if overfitting else 1.5)
    # the first epoch sets the lowest loss; the next DIVERGENCE_EPOCHS stall above it
    causes = [guard.check(train_loss, 2.0 * guard.loss) for _ in range(DIVERGENCE_EPOCHS + 1)]
    assert causes[-1] is not None and causes[:-1] == [None] * DIVERGENCE_EPOCHS
    assert ("while the training loss was below" in causes[-1]) == overfitting
    guard.back_off(DIVERGENCE_EPOCHS, causes[-1], 0.1, 1e-6)
    assert guard.backoffs[-1]["overfitting"] == overfitting
    guard.check(float("nan"), 1.0)  # an explosion after it is a divergence
    guard.back_off(DIVERGENCE_EPOCHS + 1, "nan", 0.01, 1e-6)
    assert not guard.backoffs[-1]["overfitting"]


def test_the_constant_candidate_leaves_the_network_unchanged():
    guard, network, _, val_data = _guard()
    initial = _weights(network)
    candidate = guard.candidate(lambda loss: 1.0 - loss)
    _assert_weights(network, initial)
    assert guard.can_predict_constant
    assert (candidate.loss, candidate.score) == (guard.loss, 1.0 - guard.loss)
    network.load_state_dict(candidate.state)
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)[:, 0]
    torch.testing.assert_close(output, guard.constant.expand_as(output))


class _Plain(nn.Module):
    """A network without ``set_constant_output``."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x, mask):
        return self.linear(x)


def test_a_network_that_cannot_predict_a_constant_has_no_candidate_nor_fallback():
    guard, network, train_data, _ = _guard(_Plain())
    assert not guard.can_predict_constant and guard.candidate(lambda loss: -loss) is None
    with torch.no_grad():
        network.linear.weight.mul_(1e3)
    assert guard.reject(train_data, best_epoch=2) is None


def test_weights_worse_than_the_constant_on_the_training_rows_are_replaced_by_it():
    guard, network, train_data, val_data = _guard()
    # the constant is kept already: nothing to replace, whatever the weights
    assert guard.reject(train_data, best_epoch=0, constant_kept=True) is None
    with torch.no_grad():
        network.head[-1].weight.mul_(100.0)
    reason = guard.reject(train_data, best_epoch=2)
    assert reason.startswith("the weights of epoch 2 fit the training rows worse")
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)[:, 0]
    torch.testing.assert_close(output, guard.constant.expand_as(output))


# ------------------------------------------------------------------ progress report


def test_the_progress_bar_shows_each_epoch_when_verbose(capsys):
    from neumiss.network import EpochLosses, ProgressBar

    for verbose in (1, 0):
        progress = ProgressBar(verbose=verbose)
        progress.set_training("Net")
        progress.on_train_begin(None, TrainingConfig(max_epochs=3))
        for epoch in (1, 2, 3):
            assert progress.on_epoch_end(epoch, EpochLosses(0.5, 0.25, 0.75, 0.01)) is False
        progress.on_train_end(TrainingResult())
        shown = capsys.readouterr().err
        if verbose:
            assert "Net" in shown and "train_loss=0.5" in shown and "val_score=0.75" in shown
            assert "3/3" in shown
        else:
            assert shown == ""


def test_callbacks_see_every_epoch_and_can_stop_the_training():
    """A callback is told the training's description, then called at the start, after each
    epoch with its losses (those of the history) and at the end with the result; True
    after an epoch stops the training there, and the weights kept are still the best
    epoch's."""
    from neumiss.network import Callback

    class Recorder(Callback):
        def __init__(self, stop_after):
            self.calls, self.stop_after = [], stop_after

        def on_train_begin(self, network, config):
            self.calls.append(("begin", self.training, config.max_epochs))

        def on_epoch_end(self, epoch, losses):
            self.calls.append((epoch, losses.val_loss))
            return epoch == self.stop_after

        def on_train_end(self, result):
            self.calls.append(("end", result.n_epochs))

    config = TrainingConfig(max_epochs=10, patience=100, learning_rate=0.05)
    for stop_after, epochs in ((None, 10), (3, 3)):
        network, generator = NeuMissNetwork(3, depth=1), torch.Generator().manual_seed(0)
        network.reset_parameters(generator)
        recorder = Recorder(stop_after)
        result = train(network, _data(), _data(60, seed=1), _mse, config, generator,
                       description="Net(depth=1)", callbacks=[recorder])
        assert result.n_epochs == epochs
        assert recorder.calls == [("begin", "Net(depth=1)", 10),
                                  *zip(range(1, epochs + 1), result.history["val_loss"]),
                                  ("end", epochs)]
        assert result.best_val_loss == min(result.history["val_loss"])


def test_a_callback_is_called_after_every_step_with_the_network_trained():
    """``on_batch_end``: once after each optimizer step (120 rows in batches of 32: 4 steps
    an epoch), given the network, whose weights have just moved."""
    from neumiss.network import Callback

    class Steps(Callback):
        def __init__(self):
            self.weights = []

        def on_batch_end(self, network):
            self.weights.append(network.block.mu.detach().clone())

    network, generator = NeuMissNetwork(3, depth=1), torch.Generator().manual_seed(0)
    network.reset_parameters(generator)
    steps = Steps()
    config = TrainingConfig(max_epochs=3, patience=100, batch_size=32, learning_rate=0.05)
    result = train(network, _data(), _data(60, seed=1), _mse, config, generator,
                   callbacks=[steps])
    assert result.n_epochs == 3 and len(steps.weights) == 3 * 4
    assert all(not torch.equal(a, b) for a, b in zip(steps.weights, steps.weights[1:]))


# ------------------------------------------------------------------ train


def test_train_records_every_epoch_and_keeps_the_best():
    network = NeuMissNetwork(3, depth=1)
    generator = torch.Generator().manual_seed(0)
    network.reset_parameters(generator)
    config = TrainingConfig(max_epochs=6, patience=100, learning_rate=0.05)
    val_data = _data(60, seed=1)
    result = train(network, _data(), val_data, _mse, config, generator)
    assert result.n_epochs == 6
    assert all(len(curve) == 6 for curve in result.history.values())
    losses = result.history["val_loss"]
    assert result.best_epoch == 1 + int(np.argmin(losses)) and not result.constant
    assert result.history["val_score"] == [-loss for loss in losses]
    with torch.no_grad():  # the network holds the best epoch's weights
        kept_loss = float(_mse(network(val_data.x, val_data.mask), val_data.target).mean())
    assert result.best_val_loss == pytest.approx(kept_loss, rel=1e-5)
    assert not network.training


def test_train_without_the_guard_raises_on_a_non_finite_loss():
    network = NeuMissNetwork(3, depth=1)
    with pytest.raises(FloatingPointError, match="training diverged at epoch 1"):
        train(network, _data(constant=np.inf), None, _mse,
              TrainingConfig(max_epochs=3), torch.Generator(), guard=False)


def test_the_guard_needs_the_training_rows_in_memory():
    class Stream:
        device = CPU

        def __len__(self):
            return 10

    with pytest.raises(TypeError, match="in memory"):
        train(NeuMissNetwork(3, depth=1), Stream(), None, _mse, TrainingConfig(),
              torch.Generator())


# ------------------------------------------------------------------ automatic settings


@pytest.mark.parametrize("n_train, cpu, cuda", [
    (10, 10, 10), (300, 32, 32), (1_000, 32, 32), (2_000, 62, 62), (9_000, 1125, 1125),
    (100_000, AUTO_BATCH_SIZE, 12500),
    (10_000_000, AUTO_BATCH_SIZE, GPU_AUTO_BATCH_SIZE),
])
def test_automatic_batch_size_is_larger_on_cuda(n_train, cpu, cuda):
    assert auto_batch_size(n_train) == auto_batch_size(n_train, CPU) == cpu
    assert auto_batch_size(n_train, torch.device("cuda")) == cuda


def test_automatic_learning_rate_falls_as_one_over_the_root_of_the_columns():
    assert auto_learning_rate(1) == auto_learning_rate(64) == 1e-2
    assert auto_learning_rate(256) == pytest.approx(5e-3)
    assert auto_learning_rate(2000) ** 2 * 2000 == pytest.approx(auto_learning_rate(64) ** 2 * 64)


def _started_at_the_coefficients(noise: float) -> tuple[TrainingData, NeuMissNetwork]:
    """400 rows of a linear target of 3 complete features with ``noise``, and a depth-0
    network whose linear head starts at the noiseless coefficients."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3)).astype(np.float32)
    y = x @ np.array([1.0, -1.0, 0.5], dtype=np.float32) + noise * rng.normal(size=400)
    data = TrainingData(torch.from_numpy(x), torch.zeros(400, 3),
                        torch.tensor(y, dtype=torch.float32))
    network = NeuMissNetwork(3, depth=0)
    with torch.no_grad():
        network.block.mu.zero_()
        network.head[-1].weight.copy_(torch.tensor([[1.0, -1.0, 0.5]]))
        network.head[-1].bias.zero_()
    return data, network


def test_a_start_better_than_every_epoch_is_kept():
    # The network starts at the least-squares fit of the training rows; a learning rate
    # far too high ruins every epoch, so the start is what training keeps.
    data, network = _started_at_the_coefficients(0.1)
    start = {name: value.clone() for name, value in network.state_dict().items()}
    train_rows, val_rows = data.rows(0, 300), data.rows(300, 400)
    config = TrainingConfig(learning_rate=10.0, max_epochs=3, optimizer="sgd")
    result = train(network, train_rows, val_rows, _mse, config, torch.Generator().manual_seed(0),
                   warn=False)
    assert result.best_epoch == 0 and not result.constant and result.rejected is None
    for name, value in network.state_dict().items():
        torch.testing.assert_close(value, start[name])
    assert result.best_val_loss == pytest.approx(float(((val_rows.target - val_rows.x
                                                         @ torch.tensor([1.0, -1.0, 0.5]))
                                                        ** 2).mean()), rel=1e-5)


@pytest.mark.parametrize("keep_start", [True, False])
def test_without_the_guard_keep_start_keeps_a_start_no_epoch_beats(keep_start):
    """A network started at the noiseless coefficients, trained with a learning rate that
    makes the epochs worse: ``keep_start`` keeps the start (the data-parallel fit's warm
    start from the sample's network); without it an epoch is kept, however worse."""
    data, network = _started_at_the_coefficients(0.3)
    start = _weights(network)
    config = TrainingConfig(learning_rate=0.5, max_epochs=3, optimizer="sgd")
    result = train(network, data.rows(0, 300), data.rows(300, 400), _mse, config,
                   torch.Generator().manual_seed(0), guard=False, keep_start=keep_start)
    start_loss = float(((data.target[300:] - data.x[300:] @ torch.tensor([1.0, -1.0, 0.5]))
                        ** 2).mean())
    if keep_start:
        assert result.best_epoch == 0
        assert result.best_val_loss == pytest.approx(start_loss, rel=1e-5)
        _assert_weights(network, start)
    else:
        assert result.best_epoch >= 1 and result.best_val_loss > 1.2 * start_loss


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 60), batch_size=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_each_epochs_batches_are_the_rows_of_one_permutation_each_once(n, batch_size, seed):
    """Epoch after epoch (each gathered into the buffer of the one before), the batches hold
    the rows of the next ``randperm(n)`` drawn from the generator, in that order, every
    column of every row with them; no batch is empty and the data is left as it was."""
    x = torch.arange(2.0 * n).reshape(n, 2)
    data = TrainingData(x, (x % 3 == 0).float(), x[:, 0] * 10, x[:, 1], x.repeat(1, 2),
                        torch.arange(n))
    fields = ("x", "mask", "target", "weight", "member_weight", "held_out_by")
    before = [getattr(data, field).clone() for field in fields]
    generator, drawn = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    for _ in range(3):
        batches = list(data.batches(batch_size, generator))
        order = torch.randperm(n, generator=drawn)
        assert [len(batch) for batch in batches] == [
            min(batch_size, n - start) for start in range(0, n, batch_size)]
        for field in fields:
            joined = torch.cat([getattr(batch, field) for batch in batches])
            assert torch.equal(joined, getattr(data, field)[order]), field
    assert all(torch.equal(getattr(data, field), value) for field, value in zip(fields, before))
