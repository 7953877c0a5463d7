"""Early stopping: when a training stops, and which weights it keeps."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

#: Epochs in a row above ``abandon_above`` after which :class:`EarlyStopping` stops.
ABANDON_EPOCHS = 1

#: :func:`abandon_level`: how far above the lowest validation loss seen elsewhere an
#: epoch's is far behind, relative to that loss and as a share of the constant
#: predictor's loss above it (both must be exceeded).
ABANDON_MARGIN = 0.25
ABANDON_SHARE = 0.05


def abandon_level(best_seen: float, constant_loss: float) -> float:
    """The validation loss above which a training is far behind a network that validated
    ``best_seen`` (a start's or another candidate's), for a constant predictor validating
    ``constant_loss``: ``best_seen`` plus the larger of :data:`ABANDON_MARGIN` times it
    and :data:`ABANDON_SHARE` of the constant's loss above it. Infinite when either is
    not finite, or nothing beats the constant."""
    if not (math.isfinite(best_seen) and math.isfinite(constant_loss)) \
            or best_seen >= constant_loss:
        return math.inf
    return best_seen + max(ABANDON_MARGIN * best_seen,
                           ABANDON_SHARE * (constant_loss - best_seen))


def copy_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s state dict: its tensors cloned, detached (a tenth of
    ``copy.deepcopy``'s time, which also copies each submodule's metadata)."""
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


class Checkpoint(NamedTuple):
    """Weights (a state dict, copied) and their monitored loss and score."""

    state: dict[str, torch.Tensor]
    loss: float
    score: float


class EarlyStopping:
    """Early stopping on the monitored loss, keeping the weights of its lowest value.

    An epoch *improves* when its loss is below ``(1 - tol)`` times the loss of
    the last improving epoch (``tol`` is relative, as ReduceLROnPlateau's
    threshold); :meth:`should_stop` after ``patience`` epochs without
    improvement. The weights kept (:meth:`restore`) are those of the lowest
    loss seen, improving or not; before any epoch beats it, ``candidate``'s.
    With ``abandon_above`` (a loss another network already beats by far), it
    also stops after :data:`ABANDON_EPOCHS` epochs in a row whose loss is above it.

    Parameters
    ----------
    network : nn.Module
        The network being trained (in place).
    patience : int
    tol : float
    candidate : Checkpoint or None
        The weights an epoch must beat to be kept. None: the current weights,
        with an infinite loss (any finite epoch beats them).
    abandon_above : float
        Infinite: no such stop.

    Attributes
    ----------
    best_epoch : int
        The epoch of the weights kept, 0 for ``candidate`` or the initial weights.
    best_loss, best_score : float
        Their loss and score (inf and NaN for the initial weights).
    """

    def __init__(self, network: nn.Module, patience: int, tol: float,
                 candidate: Checkpoint | None = None, abandon_above: float = math.inf
                 ) -> None:
        self.network = network
        self.patience = patience
        self.tol = tol
        if candidate is None:
            candidate = Checkpoint(copy_state(network), math.inf, math.nan)
        self._best_state, self.best_loss, self.best_score = candidate
        self.best_epoch = 0
        self._reference_loss = math.inf
        self._last_improving_epoch = 0
        self.abandon_above = abandon_above
        self._epochs_above = 0

    def update(self, epoch: int, loss: float, score: float) -> None:
        """Record ``epoch``'s loss and score; copy the network's weights if they are the best."""
        if loss < self.best_loss:
            self.best_loss, self.best_score, self.best_epoch = loss, score, epoch
            self._best_state = copy_state(self.network)
        if loss < self._reference_loss * (1.0 - self.tol):
            self._reference_loss, self._last_improving_epoch = loss, epoch
        self._epochs_above = self._epochs_above + 1 if loss > self.abandon_above else 0

    def should_stop(self, epoch: int) -> bool:
        """Whether ``patience`` epochs up to ``epoch`` have not improved, or the last
        :data:`ABANDON_EPOCHS` were above ``abandon_above``."""
        return (epoch - self._last_improving_epoch >= self.patience
                or self._epochs_above >= ABANDON_EPOCHS)

    def restart(self, epoch: int) -> None:
        """Count improvements anew from ``epoch``, against the best loss (after a back-off)."""
        self._reference_loss, self._last_improving_epoch = self.best_loss, epoch

    def restore(self) -> None:
        """Load the weights kept into the network."""
        self.network.load_state_dict(self._best_state)
