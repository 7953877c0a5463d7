"""Mini-batch training of a network on ``(x, mask) -> target``.

:func:`train` is a loop over epochs that hands each epoch's losses to small
objects: the optimizer and its plateau learning-rate schedule
(:class:`PlateauSchedule`), early stopping with the best weights
(:class:`~._stopping.EarlyStopping`), the divergence guard with its back-off and
constant fallback (:class:`~._divergence.DivergenceGuard`), and the callbacks
(:mod:`~._callbacks`: the progress bar, and any the caller hangs on the loop).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import warn_user
from ._callbacks import Callback, EpochLosses, ProgressBar
from ._data import LossFunction, ScoreFunction, TrainingData, evaluate_loss
from ._divergence import EXACT_LOSS, DivergenceGuard, DivergenceWarning
from ._graphs import GraphedSteps, eager_step, graphs_pay
from ._optimizer import Steps
from ._stopping import Checkpoint, EarlyStopping, abandon_level, copy_state

#: Largest mini-batch of the automatic batch size (:func:`auto_batch_size`).
AUTO_BATCH_SIZE = 2048
#: The same on a CUDA device, where batches of :data:`AUTO_BATCH_SIZE` rows leave the card
#: waiting on kernel launches (results/README.md, "Measurements behind the network defaults").
GPU_AUTO_BATCH_SIZE = 16384


#: Smallest mini-batch of the automatic batch size (or every row, on smaller tables): a
#: step of 32 rows costs what one of 16 does, and halves a small table's steps (real
#: suite, tables of 117-1,757 rows: the same ranks on both halves, 16-26% less fit time;
#: results/realdata/README.md, "Steps of 32 rows on small tables").
MIN_AUTO_BATCH_SIZE = 32
#: Mini-batches per epoch of the automatic batch size on large tables.
AUTO_STEPS_PER_EPOCH = 8
#: On small tables, an epoch has at least ``AUTO_SMALL_TABLE_ROWS / n_train`` steps.
AUTO_SMALL_TABLE_ROWS = 64_000


def auto_batch_size(n_train: int, device: torch.device | None = None) -> int:
    """``min(n_train // 8, n_train**2 // 64,000)`` rows, within ``[MIN_AUTO_BATCH_SIZE,
    cap]`` (at most ``n_train``).

    A small network's step costs about the same at 100 rows as at 1,000 (it is bound by
    the operations launched, not by arithmetic). Large tables therefore train in
    epochs of :data:`AUTO_STEPS_PER_EPOCH` well-filled steps (from about 8,000 rows),
    batches of ``cap`` rows beyond; small tables, whose fits are short anyway, in
    epochs of about ``64,000 / n_train`` steps (fewer under about 1,400 rows, whose
    steps take :data:`MIN_AUTO_BATCH_SIZE` rows), which fit them better. ``cap`` is
    :data:`AUTO_BATCH_SIZE`, or :data:`GPU_AUTO_BATCH_SIZE` on a CUDA ``device``."""
    cap = GPU_AUTO_BATCH_SIZE if device is not None and device.type == "cuda" else AUTO_BATCH_SIZE
    rows = min(n_train // AUTO_STEPS_PER_EPOCH, n_train**2 // AUTO_SMALL_TABLE_ROWS)
    return int(min(n_train, cap, max(MIN_AUTO_BATCH_SIZE, rows)))


#: The automatic learning rate (:func:`auto_learning_rate`): its value up to
#: ``AUTO_LEARNING_RATE_FEATURES`` input columns, then decreasing as 1 / sqrt(columns).
AUTO_LEARNING_RATE = 1e-2
AUTO_LEARNING_RATE_FEATURES = 64


def auto_learning_rate(n_features: int) -> float:
    """``AUTO_LEARNING_RATE * min(1, sqrt(AUTO_LEARNING_RATE_FEATURES / n_features))``.

    Adam moves every weight by about the learning rate per step, so a layer
    with ``n_features`` inputs changes its outputs by ``sqrt(n_features)``
    (independent steps) to ``n_features`` (aligned steps) times as much; every
    layer of a NeuMiss network has ``n_features`` inputs (the MLP head's width
    is ``n_features`` by default). Scaling by ``1 / sqrt(n_features)`` keeps the
    step of a layer's outputs about constant without the underfitting of a
    ``1 / n_features`` scaling (results/README.md, "Measurements behind the
    network defaults"; the script is benchmarks/divergence_check.py).
    """
    return AUTO_LEARNING_RATE * min(1.0, math.sqrt(AUTO_LEARNING_RATE_FEATURES / n_features))


#: The largest automatic width of the MLP head's hidden layers (:func:`auto_mlp_width`).
AUTO_MLP_WIDTH = 64


def auto_mlp_width(n_features: int) -> int:
    """``min(n_features, AUTO_MLP_WIDTH)``: the hidden layers of the MLP head are as wide
    as the encoded columns, at most :data:`AUTO_MLP_WIDTH`. On wide tables a head of
    ``d`` units costs ``d^2`` per row and layer, and the MLP of a wide table fits little
    beyond the linear skip: at d = 200, n = 1e5 the two 200-unit layers of five members
    made depth 0's training 2.9 times as slow as 64 units (37 s against 13 s, in one
    comparison) at the same score (R² - Bayes -0.0444 both; the whole fit 88 s, 129 s
    before); on the real suite's widest tables
    the same scores (msq_neuroticism, 72 encoded columns: R² 0.197 -> 0.198;
    seatbelt_fatalities 0.863 both). Below 64 columns the head keeps their number:
    wider heads help the small nonlinear tables (un_lifeexp R² 0.882 -> 0.892) but
    lose on small binary ones and double the reference fit of 10k x 10
    (results/realdata/README.md, "tried, not kept")."""
    return min(int(n_features), AUTO_MLP_WIDTH)


@contextlib.contextmanager
def torch_threads(n_jobs: int | None) -> Iterator[None]:
    """Run the block with ``n_jobs`` torch CPU threads (scikit-learn's convention:
    None = 1, -1 = all cores, -2 = all but one), then restore the previous setting."""
    n_cpus = os.cpu_count() or 1
    n = 1 if n_jobs is None else (n_jobs if n_jobs > 0 else max(1, n_cpus + 1 + n_jobs))
    previous = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass(frozen=True)
class TrainingConfig:
    """Optimisation settings; the estimators' defaults are these (see their docstrings).

    ``batch_size=None`` means :func:`auto_batch_size` of the number of training rows.
    """

    optimizer: str = "adam"
    learning_rate: float = 1e-2
    batch_size: int | None = None
    max_epochs: int = 100
    patience: int = 3
    lr_patience: int = 1
    lr_factor: float = 0.2
    min_learning_rate: float = 1e-6
    weight_decay: float = 0.0
    tol: float = 2e-3


#: The curves of :attr:`TrainingResult.history`, one value per epoch.
HISTORY = ("train_loss", "val_loss", "val_score", "lr")


@dataclass
class TrainingResult:
    """What :func:`train` learned: per-epoch curves and the best epoch.

    ``best_epoch`` is 0 when no epoch was kept (the initial weights, or the
    constant predictor when ``constant`` is True). ``backoffs`` lists each
    divergence: its ``epoch``, ``cause``, whether it was ``overfitting`` (the training
    rows fitted better than by the constant, the validation rows worse) and the learning
    rate ``lr`` after it.
    ``constant`` is True when the network was set to the constant predictor
    because no epoch beat it on validation. ``constant_loss`` is that
    predictor's validation loss (NaN when it was not computed). ``rejected``
    says why the best validation epoch was not kept (it fit the training rows
    worse than the constant), or is None. ``warning`` is
    :func:`divergence_report`'s message, or None.
    """

    history: dict[str, list[float]] = field(default_factory=dict)
    best_epoch: int = 0
    best_val_loss: float = math.inf
    best_val_score: float = math.nan
    n_epochs: int = 0
    backoffs: list[dict] = field(default_factory=list)
    constant: bool = False
    constant_loss: float = math.nan
    rejected: str | None = None
    warning: str | None = None

    def record(self, epoch: int, train_loss: float, val_loss: float, val_score: float,
               lr: float) -> None:
        """Append epoch ``epoch``'s losses, score and learning rate to :attr:`history`."""
        for key, value in zip(HISTORY, (train_loss, val_loss, val_score, lr)):
            self.history[key].append(value)
        self.n_epochs = epoch


#: The smallest learning-rate reduction the plateau schedule makes (torch's ``eps``).
LR_EPS = 1e-8


class PlateauSchedule:
    """The optimizer of a training and its plateau learning-rate schedule.

    The learning rate is multiplied by ``config.lr_factor`` after more than
    ``config.lr_patience`` epochs in a row whose loss is not ``config.tol``
    (relative) below the best, the rule of
    :class:`torch.optim.lr_scheduler.ReduceLROnPlateau` (``mode="min"``,
    ``threshold_mode="rel"``), which needs a ``torch.optim.Optimizer``
    (see :mod:`~neumiss.network._optimizer` for why there is none). As
    there, a reduction smaller than ``LR_EPS`` is skipped.

    Parameters
    ----------
    network : nn.Module
        Its parameters are optimised.
    config : TrainingConfig
        The optimizer, the starting learning rate and the schedule's settings.
    """

    def __init__(self, network: nn.Module, config: TrainingConfig) -> None:
        self.network = network
        self.config = config
        self.restart(config.learning_rate)

    def restart(self, learning_rate: float) -> None:
        """A new optimizer (no moments) and schedule, starting at ``learning_rate``."""
        self.optimizer = Steps(self.network.parameters(), self.config.optimizer, learning_rate,
                               self.config.weight_decay)
        self._best, self._bad_epochs = math.inf, 0

    @property
    def learning_rate(self) -> float:
        return self.optimizer.lr

    @property
    def exhausted(self) -> bool:
        """Whether the learning rate fell below ``config.min_learning_rate``."""
        return self.learning_rate < self.config.min_learning_rate

    def step(self, loss: float) -> None:
        """Record an epoch's monitored loss (the schedule may lower the learning rate)."""
        if loss < self._best * (1.0 - self.config.tol):
            self._best, self._bad_epochs = loss, 0
            return
        self._bad_epochs += 1
        if self._bad_epochs > self.config.lr_patience:
            reduced = self.optimizer.lr * self.config.lr_factor
            if self.optimizer.lr - reduced > LR_EPS:
                self.optimizer.lr = reduced
            self._bad_epochs = 0


def divergence_report(
    description: str, result: TrainingResult, config: TrainingConfig, stopped: str | None = None
) -> str | None:
    """The :class:`DivergenceWarning` message of a training, or None when all went well:
    also when its only back-offs were overfitting and an epoch beat the constant predictor
    (early stopping's ordinary work, its best epoch kept)."""
    overfitting = bool(result.backoffs) and all(b["overfitting"] for b in result.backoffs)
    if overfitting and not result.constant and result.rejected is None:
        return None
    parts = []
    if result.backoffs:
        first = result.backoffs[0]
        parts.append(
            f"training {'overfitted' if overfitting else 'diverged'} {len(result.backoffs)} "
            f"time(s), first at epoch {first['epoch']} ({first['cause']}): the best weights "
            f"were restored and the learning rate lowered from {config.learning_rate:g} to "
            f"{result.backoffs[-1]['lr']:g}"
        )
    if stopped is not None:
        parts.append(f"stopped: {stopped}")
    if result.rejected is not None:
        parts.append(result.rejected)
    if result.constant and result.constant_loss > EXACT_LOSS:
        parts.append(
            f"no epoch beat the constant predictor on validation (loss "
            f"{result.constant_loss:.4g}): the network predicts that constant (the training "
            "mean, or the class frequencies)"
        )
    if not parts:
        return None
    if overfitting and result.rejected is None:
        hint = ("it learned the training rows but not what holds beyond them: more rows, "
                "some weight_decay, a smaller network, or features that carry information "
                "on the target, may help")
    elif result.backoffs or stopped is not None or result.rejected is not None:
        hint = "a lower learning_rate, some weight_decay or a smaller network may help"
    else:
        hint = (f"all {result.n_epochs} epochs were worse: more epochs (max_epochs), or "
                "features that carry information on the target, may help")
    return f"{description}: {'; '.join(parts)}; {hint}"


def _train_epoch(network: nn.Module, data, optimizer: Steps, loss_fn: LossFunction,
                 batch_size: int, generator: torch.Generator,
                 graphs: GraphedSteps | None = None,
                 callbacks: Sequence[Callback] = ()) -> float:
    """One pass of mini-batch steps over ``data`` (shuffled with ``generator``), each
    replayed from a CUDA graph by ``graphs`` when given and followed by the callbacks'
    :meth:`~neumiss.network.Callback.on_batch_end` (those that define it); returns the
    mean of the batches' losses, weighted by their number of rows."""
    network.train()
    step = eager_step if graphs is None else graphs.step
    hooks = [callback.on_batch_end for callback in callbacks
             if type(callback).on_batch_end is not Callback.on_batch_end]
    running = torch.zeros((), device=data.device)  # summed on the device: no host sync per step
    for batch in data.batches(batch_size, generator):
        running += step(network, optimizer, loss_fn, batch) * len(batch)
        for hook in hooks:
            hook(network)
    return float(running) / len(data)


def _check_finite(epoch: int, train_loss: float) -> None:
    """Without the guard nothing diverges (so no cause is returned): a non-finite
    training loss is an error."""
    if not math.isfinite(train_loss):
        raise FloatingPointError(
            f"training diverged at epoch {epoch} (loss {train_loss}); "
            "lower learning_rate or use optimizer='adam'"
        )


def _negated(loss: float) -> float:
    """The default score: minus the loss."""
    return -loss


def _batch_size(batch_size: int | None, data) -> int:
    """``batch_size``, at most the number of rows; None: :func:`auto_batch_size`."""
    if batch_size is None:
        return auto_batch_size(len(data), data.device)
    return min(batch_size, len(data))


def _back_off(divergence: DivergenceGuard, stopping: EarlyStopping, schedule: PlateauSchedule,
              epoch: int, cause: str) -> bool:
    """After a divergence at ``epoch``: restore the best weights, restart the optimizer at a
    lower learning rate and count improvements anew; False when training stops instead."""
    stopping.restore()
    learning_rate = divergence.back_off(epoch, cause, schedule.learning_rate,
                                        schedule.config.min_learning_rate)
    if learning_rate is None:
        return False
    schedule.restart(learning_rate)
    stopping.restart(epoch)
    return True


def _kept(result: TrainingResult, stopping: EarlyStopping, divergence: DivergenceGuard | None,
          train_data: TrainingData) -> None:
    """Record in ``result`` the weights kept (restored in the network) and the guard's
    outcome; with the guard, replace weights that fit the training rows worse than the
    constant predictor by it."""
    stopping.restore()
    result.best_epoch, result.best_val_loss = stopping.best_epoch, stopping.best_loss
    result.best_val_score = stopping.best_score
    if divergence is None:
        return
    result.constant = (stopping.best_epoch == 0 and divergence.can_predict_constant
                       and not divergence.start_kept)
    result.backoffs, result.constant_loss = divergence.backoffs, divergence.loss
    result.rejected = divergence.reject(train_data, result.best_epoch, result.constant)
    if result.rejected is not None:
        result.constant, result.best_epoch = True, 0


def _measure_kept(result: TrainingResult, network: nn.Module, train_data, val_data,
                  loss_fn: LossFunction, score_fn: ScoreFunction, evaluate) -> None:
    """When the weights kept are no epoch's (every epoch diverged, or the constant replaced
    them), their loss, measured anew, in ``result``."""
    if result.best_epoch == 0 and (result.rejected is not None or not result.constant):
        result.best_val_loss = (evaluate_loss(network, train_data, loss_fn) if val_data is None
                                else evaluate(network, val_data, loss_fn))
        result.best_val_score = score_fn(result.best_val_loss)


def _first_candidate(network: nn.Module, val_data: TrainingData | None, loss_fn: LossFunction,
                     score_fn: ScoreFunction, divergence: DivergenceGuard | None,
                     keep_start: bool, evaluate) -> Checkpoint | None:
    """The weights an epoch must beat to be kept (:class:`~._stopping.EarlyStopping`): the
    guard's, the initial weights with ``keep_start`` and validation rows, else None."""
    if divergence is not None:
        return divergence.first_candidate(score_fn)
    if not keep_start or val_data is None:
        return None
    loss = evaluate(network, val_data, loss_fn)
    return Checkpoint(copy_state(network), loss, score_fn(loss))


def train(
    network: nn.Module,
    train_data: TrainingData,
    val_data: TrainingData | None,
    loss_fn: LossFunction,
    config: TrainingConfig,
    generator: torch.Generator,
    score_fn: ScoreFunction | None = None,
    verbose: int = 0,
    description: str = "NeuMiss",
    guard: bool = True,
    warn: bool = True,
    best_seen: float = math.inf,
    evaluate: Callable[[nn.Module, TrainingData, LossFunction], float] = evaluate_loss,
    keep_start: bool = False,
    callbacks: Sequence[Callback] = (),
) -> TrainingResult:
    """Train ``network`` in place; on return it holds the best validation weights.

    ``train_data`` is a :class:`TrainingData`, or, with ``guard=False``, any
    source of rows with ``len`` (the number of rows), ``device`` and
    ``batches(batch_size, generator)`` (one epoch's mini-batches), such as the
    chunks read from disk by :func:`neumiss.estimators.fit_stream`.

    Each epoch shuffles the training rows with ``generator`` (repeatable on
    CPU), takes mini-batch steps, then evaluates the validation loss.
    An epoch *improves* when its validation loss is below ``(1 - tol)`` times
    the loss of the last improving epoch (``tol`` is relative, as
    ReduceLROnPlateau's threshold). The learning rate is multiplied by
    ``lr_factor`` after ``lr_patience`` epochs without improvement (ReduceLROnPlateau);
    training stops after ``patience`` epochs without improvement, when the
    learning rate falls below ``min_learning_rate`` or at ``max_epochs``, or, with
    the guard (below) and ``best_seen`` (the validation loss of another network: a
    start, another candidate), once :data:`~neumiss.network._stopping.ABANDON_EPOCHS`
    epochs in a row are far behind it (:func:`~neumiss.network._stopping.abandon_level`). The
    weights kept are those of the lowest validation loss seen, improving or
    not. Without validation data, the training loss plays its role.

    Divergence (with ``guard``, the default): the *constant predictor* is the
    constant output of lowest training loss (:func:`constant_output`), and the
    first candidate to beat: an epoch is kept only if its validation loss is
    below the constant predictor's, or below the initial weights' when those
    beat it (a network started from the data; then ``best_epoch`` 0 keeps them).
    An epoch diverges when a loss is not finite, when its validation loss
    exceeds :data:`EXPLOSION_FACTOR` times the larger of the constant
    predictor's and the initial network's, or
    after :data:`DIVERGENCE_EPOCHS` consecutive epochs above the constant
    predictor's loss that each fail to lower the lowest loss of the earlier
    epochs (a network still improving from a poor start is left alone). Then
    the best weights so far are restored (with a
    :class:`~neumiss.network.NeuMissNetwork`, ``set_constant_output`` makes the
    constant predictor of the initial weights), the optimizer restarts with
    the learning rate times :data:`BACKOFF_FACTOR`, and training goes on;
    when that rate would fall below ``min_learning_rate`` training stops. If
    no epoch beat the constant predictor, or the best one fits the training
    rows worse than it (weights blown up that spare the validation rows), the
    network predicts the constant on return (``result.constant``). A
    diverged epoch is never kept. The outcome is summed up in
    ``result.warning`` (:func:`divergence_report`), emitted as a
    :class:`DivergenceWarning` when ``warn``.

    ``loss_fn(output, target)`` returns the loss of each row, shape (batch,);
    batches and epochs average it, weighted by the data's ``weight`` if any. ``score_fn`` maps a
    validation loss to a score shown in the progress bar and history (e.g. R²).
    ``evaluate(network, val_data, loss_fn)`` is the validation loss (by default
    :func:`evaluate_loss`; a data-parallel training's is over every process's rows,
    :func:`~neumiss.network._parallel.all_reduced_loss`). Without the guard,
    ``keep_start`` makes the initial weights (a network started from another fit) the
    first candidate to beat: an epoch is kept only if it validates better.

    ``callbacks`` (:class:`~neumiss.network.Callback`) are told the training's ``description``
    (:meth:`~neumiss.network.Callback.set_training`), then called at the start, after each
    step, after each epoch, and at the end, after the progress bar (``verbose``); one that
    returns True after an epoch stops the training there (the best weights are kept as when
    early stopping ends it).
    """
    if guard and not isinstance(train_data, TrainingData):
        raise TypeError("the divergence guard needs the training rows in memory (TrainingData)")
    score_fn = _negated if score_fn is None else score_fn
    divergence = DivergenceGuard(network, train_data, val_data, loss_fn) if guard else None
    schedule = PlateauSchedule(network, config)
    stopping = EarlyStopping(
        network, config.patience, config.tol,
        _first_candidate(network, val_data, loss_fn, score_fn, divergence, keep_start,
                         evaluate),
        math.inf if divergence is None else abandon_level(best_seen, divergence.loss))
    callbacks = [ProgressBar(verbose), *callbacks]
    for callback in callbacks:
        callback.set_training(description)
        callback.on_train_begin(network, config)
    result = TrainingResult(history={key: [] for key in HISTORY})
    batch_size = _batch_size(config.batch_size, train_data)
    graphs = GraphedSteps(batch_size) if graphs_pay(train_data, batch_size) else None
    for epoch in range(1, config.max_epochs + 1):
        train_loss = _train_epoch(network, train_data, schedule.optimizer, loss_fn, batch_size,
                                  generator, graphs, callbacks)
        val_loss = train_loss if val_data is None else evaluate(network, val_data, loss_fn)
        losses = EpochLosses(train_loss, val_loss, score_fn(val_loss), schedule.learning_rate)
        result.record(epoch, *losses)
        cause = (_check_finite(epoch, train_loss) if divergence is None
                 else divergence.check(train_loss, val_loss))
        asked = [callback.on_epoch_end(epoch, losses) for callback in callbacks]
        if cause is None:
            stopping.update(epoch, val_loss, losses.val_score)
            schedule.step(val_loss)
            if stopping.should_stop(epoch) or schedule.exhausted or any(asked):
                break
        elif not _back_off(divergence, stopping, schedule, epoch, cause):
            break
    _kept(result, stopping, divergence, train_data)
    _measure_kept(result, network, train_data, val_data, loss_fn, score_fn, evaluate)
    network.eval()
    if divergence is not None:
        result.warning = divergence_report(description, result, config, divergence.stopped)
        if warn and result.warning is not None:
            warn_user(result.warning, DivergenceWarning)
    for callback in callbacks:
        callback.on_train_end(result)
    return result
