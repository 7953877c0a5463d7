"""The divergence guard of a training: the constant predictor, the rules that say an epoch
diverged, the back-off of the learning rate and the fallback to the constant."""

from __future__ import annotations

import math

import torch
from torch import nn

from ._data import LossFunction, ScoreFunction, TrainingData, evaluate_loss, mean_loss
from ._optimizer import minimize_lbfgs
from ._stopping import Checkpoint, copy_state

#: An epoch *explodes* when its validation loss is above this many times the loss of
#: the constant predictor (the best constant output on the training rows).
EXPLOSION_FACTOR = 10.0
#: Consecutive epochs whose validation loss is above the constant predictor's, none
#: of them lower than every earlier epoch's, that count as a divergence.
DIVERGENCE_EPOCHS = 3
#: After a divergence the best weights are restored and the learning rate is
#: multiplied by this factor (while it stays at or above ``min_learning_rate``).
BACKOFF_FACTOR = 0.1
#: :meth:`DivergenceGuard.reject` compares training losses on at most this many rows.
REJECT_ROWS = 20_000


class DivergenceWarning(UserWarning):
    """Training diverged or overfitted (its learning rate was lowered), or never beat a
    constant prediction."""


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
    loss_fn: LossFunction,
) -> torch.Tensor:
    """The constant output, shape (n_outputs,), of lowest mean (case-weighted) loss on ``data``.

    The mean of the targets for a squared loss, the log-odds or log-frequencies
    of the classes for a logistic or cross-entropy loss: found by SciPy's
    L-BFGS-B on ``loss_fn`` (convex in a constant output; its gradient from
    autograd, in float64), so any loss works.
    """
    with torch.no_grad():
        network.eval()
        n_outputs = network(data.x[:1], data.mask[:1]).shape[1]
    device = data.x.device
    value = torch.zeros(n_outputs, dtype=torch.float64, device=device, requires_grad=True)
    minimize_lbfgs(lambda: mean_loss(loss_fn(value.float().expand(len(data), -1), data.target),
                                     data.weight), [value])
    return value.detach().float().clamp(-1e4, 1e4)


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


class DivergenceGuard:
    """The divergence rules of :func:`train`, its back-off and its constant fallback.

    The *constant predictor* is the constant output of lowest training loss
    (:func:`constant_output`). An epoch diverges when a loss is not finite,
    when a loss exceeds its ceiling (:data:`EXPLOSION_FACTOR` times the larger
    of the constant predictor's and the initial network's loss, on the
    training and on the monitored rows), or after :data:`DIVERGENCE_EPOCHS`
    consecutive epochs above the constant predictor's loss that each fail to
    lower the lowest loss of the earlier epochs (a network still improving from
    a poor start is left alone). When the constant predictor is exact (loss at
    most :data:`EXACT_LOSS`), only non-finite losses diverge.

    Parameters
    ----------
    network : nn.Module
        The network about to be trained (its initial weights set the ceilings).
    train_data : TrainingData
    val_data : TrainingData or None
        The monitored rows; None: the training rows.
    loss_fn : callable ``(output, target) -> (n,) losses``

    Attributes
    ----------
    constant : Tensor of shape (n_outputs,)
        The constant predictor's output.
    loss, train_loss : float
        Its loss on the monitored and on the training rows.
    backoffs : list of dict
        Each divergence: its ``epoch``, ``cause``, whether it was ``overfitting`` and the
        learning rate ``lr`` after it.
    stopped : str or None
        Why training stopped at a divergence (the learning rate would fall
        below the minimum), or None.
    """

    def __init__(self, network: nn.Module, train_data: TrainingData,
                 val_data: TrainingData | None, loss_fn: LossFunction) -> None:
        monitor = train_data if val_data is None else val_data
        self.network = network
        self.loss_fn = loss_fn
        self._setter = getattr(network, "set_constant_output", None)
        self.constant = constant_output(network, train_data, loss_fn)
        self.loss = evaluate_loss(_Constant(self.constant), monitor, loss_fn)
        self.train_loss = (self.loss if val_data is None
                           else evaluate_loss(_Constant(self.constant), train_data, loss_fn))
        self.initial_loss = evaluate_loss(network, monitor, loss_fn)
        self.start_kept = False  # whether the first candidate is the initial weights
        self._ceilings = self._explosion_ceilings()
        self.backoffs: list[dict] = []
        self.stopped: str | None = None
        self._lowest = math.inf  # the lowest monitored loss of an epoch (not the constant's)
        self._above = 0  # consecutive stalled epochs above the constant predictor's loss
        self._overfitting = False  # whether the last cause :meth:`check` gave is overfitting

    def _explosion_ceilings(self) -> tuple[float, float] | None:
        """The ceilings of the training and monitored losses, or None (exact constant)."""
        if not (self.loss > EXACT_LOSS and self.train_loss > EXACT_LOSS):
            return None
        initial = self.initial_loss if math.isfinite(self.initial_loss) else 0.0
        return (EXPLOSION_FACTOR * max(self.train_loss, initial),
                EXPLOSION_FACTOR * max(self.loss, initial))

    @property
    def can_predict_constant(self) -> bool:
        """Whether the network has ``set_constant_output`` (a
        :class:`~neumiss.network.NeuMissNetwork` does): then the constant predictor is
        the first candidate and the fallback."""
        return self._setter is not None

    def candidate(self, score_fn: ScoreFunction) -> Checkpoint | None:
        """The constant predictor as weights of the network (its initial weights with
        ``set_constant_output``), or None when the network cannot predict a constant.
        The network is left unchanged."""
        if self._setter is None:
            return None
        initial = copy_state(self.network)
        self._setter(self.constant)
        state = copy_state(self.network)
        self.network.load_state_dict(initial)
        return Checkpoint(state, self.loss, score_fn(self.loss))

    def first_candidate(self, score_fn: ScoreFunction) -> Checkpoint | None:
        """The first candidate an epoch must beat: the initial weights when their monitored
        loss is below the constant predictor's (a network started from the data,
        :mod:`~neumiss.network._start`: training then only ever replaces a good start by
        better weights; :attr:`start_kept` is set), else :meth:`candidate`."""
        if self._setter is None or not (math.isfinite(self.initial_loss)
                                        and self.initial_loss < self.loss):
            return self.candidate(score_fn)
        self.start_kept = True
        return Checkpoint(copy_state(self.network), self.initial_loss,
                          score_fn(self.initial_loss))

    def check(self, train_loss: float, val_loss: float) -> str | None:
        """Why an epoch with these losses (the training one its running mean) diverged, or
        None. Counts the epochs in a row above the constant predictor's loss."""
        cause = _divergence(train_loss, val_loss, self._ceilings)
        self._overfitting = False
        if cause is not None:
            return cause
        stalled = val_loss >= self._lowest
        self._lowest = min(self._lowest, val_loss)
        if self._ceilings is None or not (val_loss > self.loss and stalled):
            self._above = 0
            return None
        self._above += 1
        if self._above < DIVERGENCE_EPOCHS:
            return None
        cause = (f"validation loss above the constant predictor's ({self.loss:.3g}) "
                 f"for {self._above} epochs")
        self._overfitting = train_loss < self.train_loss
        if self._overfitting:
            cause += (f" while the training loss was below its ({train_loss:.3g} against "
                      f"{self.train_loss:.3g})")
        return cause

    def back_off(self, epoch: int, cause: str, learning_rate: float,
                 min_learning_rate: float) -> float | None:
        """Record a divergence at ``epoch`` (``cause``: the last :meth:`check` gave) and
        return the learning rate to restart from, ``learning_rate`` times
        :data:`BACKOFF_FACTOR`; None when that would fall below ``min_learning_rate``
        (training stops, :attr:`stopped` says why)."""
        lowered = learning_rate * BACKOFF_FACTOR
        backoff = {"epoch": epoch, "cause": cause, "overfitting": self._overfitting}
        if lowered < min_learning_rate:
            self.backoffs.append({**backoff, "lr": learning_rate})
            self.stopped = (f"the learning rate would fall below min_learning_rate "
                            f"({min_learning_rate:g})")
            return None
        self.backoffs.append({**backoff, "lr": lowered})
        self._above = 0
        return lowered

    def reject(self, train_data: TrainingData, best_epoch: int,
               constant_kept: bool = False) -> str | None:
        """Why the network's weights, those of ``best_epoch`` (0: the initial weights),
        were replaced by the constant predictor (set in the network), or None when they
        are kept or are that constant already (``constant_kept``). They are replaced when
        they fit the training rows worse than the constant: weights blown up that happen
        to spare the few validation rows. Beyond :data:`REJECT_ROWS` training rows, both
        losses are measured on that many evenly spaced ones (d = 200, n = 1e5: 2.5 s for
        a depth-16 block on all of them). Only with the exploding-loss rules (the
        constant is not exact) and a network that can predict the constant."""
        if self._ceilings is None or self._setter is None or constant_kept:
            return None
        constant_train_loss = self.train_loss
        if len(train_data) > REJECT_ROWS:  # both losses on evenly spaced rows
            rows = torch.linspace(0, len(train_data) - 1, REJECT_ROWS,
                                  device=train_data.device).long()
            train_data = train_data.subset(rows)
            constant_train_loss = evaluate_loss(_Constant(self.constant), train_data,
                                                self.loss_fn)
        kept_train_loss = evaluate_loss(self.network, train_data, self.loss_fn)
        if kept_train_loss <= constant_train_loss:
            return None
        self._setter(self.constant)
        weights = f"the weights of epoch {best_epoch}" if best_epoch else "the initial weights"
        return (f"{weights} fit the training rows worse than "
                f"the constant predictor (loss {kept_train_loss:.4g} against "
                f"{constant_train_loss:.4g}), although they beat it on validation")
