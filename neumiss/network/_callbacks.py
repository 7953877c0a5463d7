"""Hooks on the training loop, as skorch's callbacks hang on its fit loop.

:func:`~neumiss.network.train` calls every :class:`Callback` it is given at the start of
training, after each epoch (with the epoch's losses, :class:`EpochLosses`) and at the
end (with the :class:`~neumiss.network.TrainingResult`). A callback watches (a progress
bar: :class:`ProgressBar`, the loop's own; a log) or asks the loop to stop after an
epoch; the loop's own rules (early stopping, the plateau schedule, the divergence guard)
stay the loop's, so that a callback cannot break what they guarantee (the best weights
restored, a diverged epoch never kept).
"""

from __future__ import annotations

from typing import NamedTuple

from torch import nn
from tqdm.auto import tqdm


class EpochLosses(NamedTuple):
    """What an epoch measured: the mean training loss, the validation loss (the training
    loss without validation rows), its score (e.g. R²) and the learning rate it ran at."""

    train_loss: float
    val_loss: float
    val_score: float
    learning_rate: float


class Callback:
    """A hook of the training loop; each method does nothing unless overridden."""

    def on_train_begin(self, network: nn.Module, config) -> None:
        """Before the first epoch of ``network``'s training under ``config`` (a
        :class:`~neumiss.network.TrainingConfig`)."""

    def on_epoch_end(self, epoch: int, losses: EpochLosses) -> bool:
        """After epoch ``epoch`` (1, 2, ...); True asks the loop to stop after it (an
        epoch that diverged is handled by the loop's guard first)."""
        return False

    def on_train_end(self, result) -> None:
        """Once the weights kept are restored and ``result`` (the
        :class:`~neumiss.network._training.TrainingResult` :func:`~neumiss.network.train`
        returns) is complete."""


class ProgressBar(Callback):
    """The progress bar of a training (tqdm): one step per epoch, its losses and score
    shown; hidden with ``verbose <= 0``, left on screen when done with ``verbose > 1``."""

    def __init__(self, description: str, verbose: int) -> None:
        self.description, self.verbose = description, verbose
        self._bar = None

    def on_train_begin(self, network, config):
        self._bar = tqdm(total=config.max_epochs, desc=self.description, unit="epoch",
                         disable=self.verbose <= 0, leave=self.verbose > 1)

    def on_epoch_end(self, epoch, losses):
        self._bar.update(1)
        self._bar.set_postfix(train_loss=f"{losses.train_loss:.4g}",
                              val_loss=f"{losses.val_loss:.4g}",
                              val_score=f"{losses.val_score:.4g}")
        return False

    def on_train_end(self, result):
        self._bar.close()
