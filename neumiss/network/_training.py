"""Mini-batch training of a network on ``(x, mask) -> target`` with early stopping."""

from __future__ import annotations

import contextlib
import copy
import math
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

OPTIMIZERS = ("adam", "sgd")

#: Largest mini-batch of the automatic batch size (:func:`auto_batch_size`).
AUTO_BATCH_SIZE = 2048
#: The same on a GPU, where steps of 2048 rows are bound by kernel launches (an H200:
#: 0.9 s per epoch of 1e6 rows at 2048, 0.13 s at 16384, same gap to the Bayes rate).
GPU_AUTO_BATCH_SIZE = 16384


def auto_batch_size(n_train: int, device: torch.device | None = None) -> int:
    """``min(cap, max(8, n_train // 64))``: about 64 steps per epoch on small data,
    batches large enough to average out gradient noise on large data (see
    results/README.md, "Training defaults"). ``cap`` is :data:`AUTO_BATCH_SIZE`, or
    :data:`GPU_AUTO_BATCH_SIZE` on a CUDA ``device``."""
    cap = GPU_AUTO_BATCH_SIZE if device is not None and device.type == "cuda" else AUTO_BATCH_SIZE
    return int(min(cap, max(8, n_train // 64)))


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
    is ``n_features`` by default). Measured at n = 500, d = 2000 (the paper's
    covariance design, ``benchmarks/divergence_check.py``): 1e-2 diverges (test
    R² 0.05 against ridge's 0.30), 1 / n_features scaling (3.2e-4) stops
    early, underfitted (0.16), and 1 / sqrt(n_features) scaling (1.8e-3)
    ends within 0.05 of ridge (0.256).
    """
    return AUTO_LEARNING_RATE * min(1.0, math.sqrt(AUTO_LEARNING_RATE_FEATURES / n_features))


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


@dataclass
class TrainingData:
    """Tensors of one split, all on the training device.

    x : (n, d) float32, missing entries 0; mask : (n, d) float32, 1 = missing;
    target : (n,) float32 (regression, binary) or int64 (multiclass);
    weight : (n,) float32 case weights, or None (every row counts once); training
        weights have a mean of 1.
    """

    x: torch.Tensor
    mask: torch.Tensor
    target: torch.Tensor
    weight: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.x.shape[0]

    def subset(self, index: torch.Tensor) -> TrainingData:
        """The rows ``index`` (a 1-D integer tensor on the data's device), copied."""
        weight = None if self.weight is None else self.weight[index]
        return TrainingData(self.x[index], self.mask[index], self.target[index], weight)

    def rows(self, start: int, stop: int) -> TrainingData:
        """Rows ``start:stop``, as views (no copy)."""
        weight = None if self.weight is None else self.weight[start:stop]
        return TrainingData(self.x[start:stop], self.mask[start:stop], self.target[start:stop],
                            weight)

    @property
    def device(self) -> torch.device:
        return self.x.device

    def batches(self, batch_size: int, generator: torch.Generator) -> Iterator[TrainingData]:
        """One epoch's mini-batches: the rows shuffled with ``generator`` (one gather),
        then cut into views of ``batch_size`` rows."""
        order = torch.randperm(len(self), generator=generator).to(self.device)
        shuffled = self.subset(order)
        for start in range(0, len(self), batch_size):
            yield shuffled.rows(start, start + batch_size)


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


#: An epoch *explodes* when its validation loss is above this many times the loss of
#: the constant predictor (the best constant output on the training rows).
EXPLOSION_FACTOR = 10.0
#: Consecutive epochs whose validation loss is above the constant predictor's, none
#: of them lower than every earlier epoch's, that count as a divergence.
DIVERGENCE_EPOCHS = 3
#: After a divergence the best weights are restored and the learning rate is
#: multiplied by this factor (while it stays at or above ``min_learning_rate``).
BACKOFF_FACTOR = 0.1


class DivergenceWarning(UserWarning):
    """Training diverged (its learning rate was lowered), or never beat a constant prediction."""


@dataclass
class TrainingResult:
    """What :func:`train` learned: per-epoch curves and the best epoch.

    ``best_epoch`` is 0 when no epoch was kept (the initial weights, or the
    constant predictor when ``constant`` is True). ``backoffs`` lists each
    divergence: its ``epoch``, ``cause`` and the learning rate ``lr`` after it.
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


def _make_optimizer(
    network: nn.Module, config: TrainingConfig, learning_rate: float | None = None
) -> torch.optim.Optimizer:
    params = network.parameters()
    lr = config.learning_rate if learning_rate is None else learning_rate
    if config.optimizer == "adam":
        # The fused step (one kernel for all parameters) is about 0.3 ms faster per
        # step on a CPU: most of a small network's step time.
        return torch.optim.Adam(params, lr=lr, weight_decay=config.weight_decay, fused=True)
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=config.weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {config.optimizer!r}")


def _make_scheduler(optimizer: torch.optim.Optimizer, config: TrainingConfig):
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=config.lr_factor, patience=config.lr_patience,
        threshold=config.tol, threshold_mode="rel",
    )


def _mean(losses: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Mean of per-row ``losses`` (n,) times ``weight`` (n,) when given.

    Training weights are scaled to a mean of 1 over the training rows, so that
    a batch of zero-weight rows simply contributes no gradient.
    """
    return losses.mean() if weight is None else (losses * weight).mean()


def _chunk_losses(
    network: nn.Module,
    data: TrainingData,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunk: int,
) -> Iterator[tuple[slice, torch.Tensor]]:
    """``(rows, losses)`` of ``network`` (in eval mode) per chunk of ``chunk`` rows of
    ``data``: the rows' slice and their losses, shape (rows,). Callers disable grad."""
    network.eval()
    for start in range(0, len(data), chunk):
        rows = slice(start, start + chunk)
        yield rows, loss_fn(network(data.x[rows], data.mask[rows]), data.target[rows])


@torch.no_grad()
def evaluate_loss(
    network: nn.Module,
    data: TrainingData,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunk: int = 65536,
) -> float:
    """Mean (case-weighted) loss of ``network`` over ``data``, evaluated in chunks of rows."""
    total = 0.0
    for rows, losses in _chunk_losses(network, data, loss_fn, chunk):
        if data.weight is None:
            total += float(losses.mean()) * losses.shape[0]
        else:
            total += float((losses * data.weight[rows]).sum())
    size = len(data) if data.weight is None else float(data.weight.sum())
    return total / max(size, 1e-300)


@torch.no_grad()
def row_losses(
    network: nn.Module,
    data: TrainingData,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunk: int = 65536,
) -> torch.Tensor:
    """The loss of ``network`` on each row of ``data``, shape (n,), evaluated in chunks."""
    return torch.cat([losses for _, losses in _chunk_losses(network, data, loss_fn, chunk)])


class _Constant(nn.Module):
    """A network that outputs ``value`` (n_outputs,) for every row."""

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.value = value

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.value.expand(x.shape[0], -1)


def constant_output(
    network: nn.Module,
    data: TrainingData,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """The constant output, shape (n_outputs,), of lowest mean (case-weighted) loss on ``data``.

    The mean of the targets for a squared loss, the log-odds or log-frequencies
    of the classes for a logistic or cross-entropy loss: found by L-BFGS on
    ``loss_fn`` (convex in a constant output), so any loss works.
    """
    with torch.no_grad():
        network.eval()
        n_outputs = network(data.x[:1], data.mask[:1]).shape[1]
    value = torch.zeros(n_outputs, device=data.x.device, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [value], lr=1.0, max_iter=100, line_search_fn="strong_wolfe",
        tolerance_grad=1e-9, tolerance_change=1e-12,
    )

    def closure():
        optimizer.zero_grad()
        loss = _mean(loss_fn(value.expand(len(data), -1), data.target), data.weight)
        loss.backward()
        return loss

    optimizer.step(closure)
    return value.detach().clamp(-1e4, 1e4)


#: A constant predictor whose loss is at most this is exact (a constant target):
#: the divergence rules, which compare losses with it, are then off.
EXACT_LOSS = 1e-10


def _divergence(
    train_loss: float, val_loss: float, ceilings: tuple[float, float] | None
) -> str | None:
    """Why an epoch diverged at once (non-finite or exploding loss), or None.

    ``ceilings`` are :data:`EXPLOSION_FACTOR` times the larger of the constant
    predictor's and the initial network's loss, on the training and on the
    validation rows (None: no such rule). The training loss is the epoch's
    running mean: an epoch that exploded on its way is caught even if its last
    weights happen to look fine on the few validation rows.
    """
    if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
        return f"non-finite loss (training {train_loss:.3g}, validation {val_loss:.3g})"
    if ceilings is not None:
        for name, loss, ceiling in zip(("training", "validation"), (train_loss, val_loss),
                                       ceilings):
            if loss > ceiling:
                return (
                    f"exploding loss: {name} {loss:.3g}, over {EXPLOSION_FACTOR:g} times the "
                    "constant predictor's and the initial network's"
                )
    return None


def divergence_report(
    description: str, result: TrainingResult, config: TrainingConfig, stopped: str | None = None
) -> str | None:
    """The :class:`DivergenceWarning` message of a training, or None when all went well."""
    parts = []
    if result.backoffs:
        first = result.backoffs[0]
        parts.append(
            f"training diverged {len(result.backoffs)} time(s), first at epoch {first['epoch']} "
            f"({first['cause']}): the best weights were restored and the learning rate lowered "
            f"from {config.learning_rate:g} to {result.backoffs[-1]['lr']:g}"
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
    if result.backoffs or stopped is not None or result.rejected is not None:
        hint = "a lower learning_rate, some weight_decay or a smaller network may help"
    else:
        hint = (f"all {result.n_epochs} epochs were worse: more epochs (max_epochs), or "
                "features that carry information on the target, may help")
    return f"{description}: {'; '.join(parts)}; {hint}"


def train(
    network: nn.Module,
    train_data: TrainingData,
    val_data: TrainingData | None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    config: TrainingConfig,
    generator: torch.Generator,
    score_fn: Callable[[float], float] | None = None,
    verbose: int = 0,
    description: str = "NeuMiss",
    guard: bool = True,
    warn: bool = True,
) -> TrainingResult:
    """Train ``network`` in place; on return it holds the best validation weights.

    ``train_data`` is a :class:`TrainingData`, or, with ``guard=False``, any
    source of rows with ``len`` (the number of rows), ``device`` and
    ``batches(batch_size, generator)`` (one epoch's mini-batches), such as the
    chunks read from disk by :func:`neumiss.streaming.fit_stream`.

    Each epoch shuffles the training rows with ``generator`` (repeatable on
    CPU), takes mini-batch steps, then evaluates the validation loss.
    An epoch *improves* when its validation loss is below ``(1 - tol)`` times
    the loss of the last improving epoch (``tol`` is relative, as
    ReduceLROnPlateau's threshold). The learning rate is multiplied by
    ``lr_factor`` after ``lr_patience`` epochs without improvement (ReduceLROnPlateau);
    training stops after ``patience`` epochs without improvement, when the
    learning rate falls below ``min_learning_rate`` or at ``max_epochs``. The
    weights kept are those of the lowest validation loss seen, improving or
    not. Without validation data, the training loss plays its role.

    Divergence (with ``guard``, the default): the *constant predictor* is the
    constant output of lowest training loss (:func:`constant_output`), and the
    first candidate to beat: an epoch is kept only if its validation loss is
    below the constant predictor's. An epoch diverges when a loss is not
    finite, when its validation loss exceeds :data:`EXPLOSION_FACTOR` times
    the larger of the constant predictor's and the initial network's, or
    after :data:`DIVERGENCE_EPOCHS` consecutive epochs above the constant
    predictor's loss that each fail to lower the lowest loss of the earlier
    epochs (a network still improving from a poor start is left alone). Then
    the best weights so far are restored (with a
    :class:`~neumiss.block.NeuMissNetwork`, ``set_constant_output`` makes the
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
    """
    if guard and not isinstance(train_data, TrainingData):
        raise TypeError("the divergence guard needs the training rows in memory (TrainingData)")
    monitor = val_data if val_data is not None else train_data
    constant = constant_loss = constant_train_loss = ceilings = None
    if guard:
        constant = constant_output(network, train_data, loss_fn)
        constant_loss = evaluate_loss(_Constant(constant), monitor, loss_fn)
        constant_train_loss = (
            constant_loss if val_data is None
            else evaluate_loss(_Constant(constant), train_data, loss_fn)
        )
        if constant_loss > EXACT_LOSS and constant_train_loss > EXACT_LOSS:
            initial_loss = evaluate_loss(network, monitor, loss_fn)
            initial_loss = initial_loss if math.isfinite(initial_loss) else 0.0
            ceilings = (EXPLOSION_FACTOR * max(constant_train_loss, initial_loss),
                        EXPLOSION_FACTOR * max(constant_loss, initial_loss))
    optimizer = _make_optimizer(network, config)
    scheduler = _make_scheduler(optimizer, config)
    result = TrainingResult(history={"train_loss": [], "val_loss": [], "val_score": [], "lr": []})
    result.constant_loss = math.nan if constant_loss is None else constant_loss
    best_state = copy.deepcopy(network.state_dict())
    setter = getattr(network, "set_constant_output", None)
    if constant_loss is not None and setter is not None:
        # The constant predictor is the first candidate: the initial weights with the
        # head set to the constant. An epoch is kept only if it beats it, and a
        # divergence before that restarts from it.
        setter(constant)
        best_state, initial = copy.deepcopy(network.state_dict()), best_state
        network.load_state_dict(initial)
        result.best_val_loss = constant_loss
        result.best_val_score = score_fn(constant_loss) if score_fn is not None else -constant_loss
        result.constant = True
    reference_loss, last_improving_epoch, above_constant = math.inf, 0, 0
    network_best = math.inf  # the lowest validation loss of an epoch (not the constant's)
    stopped = None
    n = len(train_data)
    batch_size = (auto_batch_size(n, train_data.device) if config.batch_size is None
                  else min(config.batch_size, n))
    bar = tqdm(
        range(1, config.max_epochs + 1),
        desc=description,
        disable=verbose <= 0,
        leave=verbose > 1,
        unit="epoch",
    )
    for epoch in bar:
        network.train()
        running = torch.zeros((), device=train_data.device)  # no host sync per step
        for batch in train_data.batches(batch_size, generator):
            optimizer.zero_grad(set_to_none=True)
            loss = _mean(loss_fn(network(batch.x, batch.mask), batch.target), batch.weight)
            loss.backward()
            optimizer.step()
            running += loss.detach() * len(batch)
        train_loss = float(running) / n
        if val_data is None:
            val_loss = train_loss
        else:
            val_loss = evaluate_loss(network, val_data, loss_fn)
        lr = optimizer.param_groups[0]["lr"]
        history = result.history
        history["train_loss"].append(train_loss)
        history["val_loss"].append(val_loss)
        score = score_fn(val_loss) if score_fn is not None else -val_loss
        history["val_score"].append(score)
        history["lr"].append(lr)
        result.n_epochs = epoch
        cause = _divergence(train_loss, val_loss, ceilings) if guard else None
        if cause is None and not math.isfinite(train_loss):
            raise FloatingPointError(
                f"training diverged at epoch {epoch} (loss {train_loss}); "
                "lower learning_rate or use optimizer='adam'"
            )
        if cause is None:
            improved_best = val_loss < result.best_val_loss
            if improved_best:
                result.best_val_loss, result.best_val_score = val_loss, score
                result.best_epoch, result.constant = epoch, False
                best_state = copy.deepcopy(network.state_dict())
            if val_loss < reference_loss * (1.0 - config.tol):
                reference_loss, last_improving_epoch = val_loss, epoch
            stalled = val_loss >= network_best
            network_best = min(network_best, val_loss)
            if ceilings is not None and val_loss > constant_loss and stalled:
                above_constant += 1
                if above_constant >= DIVERGENCE_EPOCHS:
                    cause = (
                        f"validation loss above the constant predictor's ({constant_loss:.3g}) "
                        f"for {above_constant} epochs"
                    )
            else:
                above_constant = 0
        bar.set_postfix(
            train_loss=f"{train_loss:.4g}", val_loss=f"{val_loss:.4g}",
            val_score=f"{score:.4g}",
        )
        if cause is not None:
            network.load_state_dict(best_state)
            lr = optimizer.param_groups[0]["lr"] * BACKOFF_FACTOR
            if lr < config.min_learning_rate:
                result.backoffs.append(
                    {"epoch": epoch, "cause": cause, "lr": optimizer.param_groups[0]["lr"]}
                )
                stopped = (
                    f"the learning rate would fall below min_learning_rate "
                    f"({config.min_learning_rate:g})"
                )
                break
            result.backoffs.append({"epoch": epoch, "cause": cause, "lr": lr})
            optimizer = _make_optimizer(network, config, lr)
            scheduler = _make_scheduler(optimizer, config)
            reference_loss = result.best_val_loss
            last_improving_epoch, above_constant = epoch, 0
            continue
        scheduler.step(val_loss)
        if epoch - last_improving_epoch >= config.patience:
            break
        if optimizer.param_groups[0]["lr"] < config.min_learning_rate:
            break
    bar.close()
    network.load_state_dict(best_state)
    if result.best_epoch == 0 and not result.constant:  # every epoch diverged: initial weights
        result.best_val_loss = evaluate_loss(network, monitor, loss_fn)
        result.best_val_score = (
            score_fn(result.best_val_loss) if score_fn is not None else -result.best_val_loss
        )
    if (ceilings is not None and not result.constant and setter is not None
            and result.best_epoch > 0):
        # Kept for its validation loss, yet worse than the constant on the rows it was
        # trained on: weights blown up that happen to spare the few validation rows.
        kept_train_loss = evaluate_loss(network, train_data, loss_fn)
        if not kept_train_loss <= constant_train_loss:
            result.rejected = (
                f"the weights of epoch {result.best_epoch} fit the training rows worse than "
                f"the constant predictor (loss {kept_train_loss:.4g} against "
                f"{constant_train_loss:.4g}), although they beat it on validation"
            )
            setter(constant)
            result.constant, result.best_epoch = True, 0
            result.best_val_loss = evaluate_loss(network, monitor, loss_fn)
            result.best_val_score = (
                score_fn(result.best_val_loss) if score_fn is not None else -result.best_val_loss
            )
    network.eval()
    if guard:
        result.warning = divergence_report(description, result, config, stopped)
        if warn and result.warning is not None:
            warnings.warn(result.warning, DivergenceWarning, stacklevel=2)
    return result
