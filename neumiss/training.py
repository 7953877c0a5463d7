"""Mini-batch training of a network on ``(x, mask) -> target`` with early stopping."""

from __future__ import annotations

import contextlib
import copy
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

OPTIMIZERS = ("adam", "sgd")

#: Largest mini-batch of the automatic batch size (:func:`auto_batch_size`).
AUTO_BATCH_SIZE = 2048


def auto_batch_size(n_train: int) -> int:
    """``min(AUTO_BATCH_SIZE, max(8, n_train // 64))``: about 64 steps per epoch on small
    data, batches large enough to average out gradient noise on large data (see
    results/README.md, "Training defaults")."""
    return int(min(AUTO_BATCH_SIZE, max(8, n_train // 64)))


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


@dataclass(frozen=True)
class TrainingConfig:
    """Optimisation settings; the estimators' defaults are these (see their docstrings).

    ``batch_size=None`` means :func:`auto_batch_size` of the number of training rows.
    """

    optimizer: str = "adam"
    learning_rate: float = 1e-2
    batch_size: int | None = None
    max_epochs: int = 100
    patience: int = 8
    lr_patience: int = 2
    lr_factor: float = 0.2
    min_learning_rate: float = 1e-6
    weight_decay: float = 0.0
    tol: float = 0.0


@dataclass
class TrainingResult:
    """What :func:`train` learned: per-epoch curves and the best epoch."""

    history: dict[str, list[float]] = field(default_factory=dict)
    best_epoch: int = 0
    best_val_loss: float = math.inf
    n_epochs: int = 0

    @property
    def best_val_score(self) -> float:
        """``history["val_score"]`` at the best epoch (the restored weights)."""
        return self.history["val_score"][self.best_epoch - 1]


def _make_optimizer(network: nn.Module, config: TrainingConfig) -> torch.optim.Optimizer:
    params = network.parameters()
    if config.optimizer == "adam":
        return torch.optim.Adam(
            params, lr=config.learning_rate, weight_decay=config.weight_decay
        )
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {config.optimizer!r}")


def _mean(losses: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Mean of per-row ``losses`` (n,) times ``weight`` (n,) when given.

    Training weights are scaled to a mean of 1 over the training rows, so that
    a batch of zero-weight rows simply contributes no gradient.
    """
    return losses.mean() if weight is None else (losses * weight).mean()


@torch.no_grad()
def evaluate_loss(
    network: nn.Module,
    data: TrainingData,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunk: int = 65536,
) -> float:
    """Mean (case-weighted) loss of ``network`` over ``data``, evaluated in chunks of rows."""
    network.eval()
    total = 0.0
    for start in range(0, len(data), chunk):
        stop = start + chunk
        out = network(data.x[start:stop], data.mask[start:stop])
        losses = loss_fn(out, data.target[start:stop])
        if data.weight is None:
            total += float(losses.mean()) * out.shape[0]
        else:
            total += float((losses * data.weight[start:stop]).sum())
    size = len(data) if data.weight is None else float(data.weight.sum())
    return total / max(size, 1e-300)


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
) -> TrainingResult:
    """Train ``network`` in place; on return it holds the best validation weights.

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

    ``loss_fn(output, target)`` returns the loss of each row, shape (batch,);
    batches and epochs average it, weighted by the data's ``weight`` if any. ``score_fn`` maps a
    validation loss to a score shown in the progress bar and history (e.g. R²).
    """
    optimizer = _make_optimizer(network, config)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=config.lr_factor, patience=config.lr_patience,
        threshold=config.tol, threshold_mode="rel",
    )
    result = TrainingResult(history={"train_loss": [], "val_loss": [], "val_score": [], "lr": []})
    best_state = copy.deepcopy(network.state_dict())
    reference_loss, last_improving_epoch = math.inf, 0
    n = len(train_data)
    batch_size = auto_batch_size(n) if config.batch_size is None else min(config.batch_size, n)
    bar = tqdm(
        range(1, config.max_epochs + 1),
        desc=description,
        disable=verbose <= 0,
        leave=verbose > 1,
        unit="epoch",
    )
    for epoch in bar:
        network.train()
        order = torch.randperm(n, generator=generator).to(train_data.x.device)
        running = torch.zeros((), device=train_data.x.device)  # no host sync per step
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            losses = loss_fn(network(train_data.x[idx], train_data.mask[idx]),
                             train_data.target[idx])
            weight = None if train_data.weight is None else train_data.weight[idx]
            loss = _mean(losses, weight)
            loss.backward()
            optimizer.step()
            running += loss.detach() * idx.shape[0]
        train_loss = float(running) / n
        if not math.isfinite(train_loss):
            raise FloatingPointError(
                f"training diverged at epoch {epoch} (loss {train_loss}); "
                "lower learning_rate or use optimizer='adam'"
            )
        val_loss = evaluate_loss(network, val_data, loss_fn) if val_data is not None else train_loss
        lr = optimizer.param_groups[0]["lr"]
        history = result.history
        history["train_loss"].append(train_loss)
        history["val_loss"].append(val_loss)
        history["val_score"].append(score_fn(val_loss) if score_fn is not None else -val_loss)
        history["lr"].append(lr)
        result.n_epochs = epoch
        if val_loss < result.best_val_loss:
            result.best_val_loss = val_loss
            result.best_epoch = epoch
            best_state = copy.deepcopy(network.state_dict())
        if val_loss < reference_loss * (1.0 - config.tol):
            reference_loss, last_improving_epoch = val_loss, epoch
        bar.set_postfix(
            train_loss=f"{train_loss:.4g}", val_loss=f"{val_loss:.4g}",
            val_score=f"{history['val_score'][-1]:.4g}",
        )
        scheduler.step(val_loss)
        if epoch - last_improving_epoch >= config.patience:
            break
        if optimizer.param_groups[0]["lr"] < config.min_learning_rate:
            break
    bar.close()
    network.load_state_dict(best_state)
    network.eval()
    return result
