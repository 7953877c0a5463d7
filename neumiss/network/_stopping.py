"""Early stopping: when a training stops, and which weights it keeps."""

from __future__ import annotations

import copy
import math
from typing import NamedTuple

import torch
from torch import nn


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

    Parameters
    ----------
    network : nn.Module
        The network being trained (in place).
    patience : int
    tol : float
    candidate : Checkpoint or None
        The weights an epoch must beat to be kept. None: the current weights,
        with an infinite loss (any finite epoch beats them).

    Attributes
    ----------
    best_epoch : int
        The epoch of the weights kept, 0 for ``candidate`` or the initial weights.
    best_loss, best_score : float
        Their loss and score (inf and NaN for the initial weights).
    """

    def __init__(self, network: nn.Module, patience: int, tol: float,
                 candidate: Checkpoint | None = None) -> None:
        self.network = network
        self.patience = patience
        self.tol = tol
        if candidate is None:
            candidate = Checkpoint(copy.deepcopy(network.state_dict()), math.inf, math.nan)
        self._best_state, self.best_loss, self.best_score = candidate
        self.best_epoch = 0
        self._reference_loss = math.inf
        self._last_improving_epoch = 0

    def update(self, epoch: int, loss: float, score: float) -> None:
        """Record ``epoch``'s loss and score; copy the network's weights if they are the best."""
        if loss < self.best_loss:
            self.best_loss, self.best_score, self.best_epoch = loss, score, epoch
            self._best_state = copy.deepcopy(self.network.state_dict())
        if loss < self._reference_loss * (1.0 - self.tol):
            self._reference_loss, self._last_improving_epoch = loss, epoch

    def should_stop(self, epoch: int) -> bool:
        """Whether ``patience`` epochs up to ``epoch`` have not improved."""
        return epoch - self._last_improving_epoch >= self.patience

    def restart(self, epoch: int) -> None:
        """Count improvements anew from ``epoch``, against the best loss (after a back-off)."""
        self._reference_loss, self._last_improving_epoch = self.best_loss, epoch

    def restore(self) -> None:
        """Load the weights kept into the network."""
        self.network.load_state_dict(self._best_state)
