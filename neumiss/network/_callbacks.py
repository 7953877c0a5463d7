"""Hooks on the training loop, as skorch's callbacks hang on its fit loop.

:func:`~neumiss.network.train` calls every :class:`Callback` it is given at the start of
training, after each step, after each epoch (with the epoch's losses, :class:`EpochLosses`)
and at the end (with the :class:`~neumiss.network.TrainingResult`). A callback watches (a
progress bar: :class:`ProgressBar`, the loop's own; a log), acts between steps (the
data-parallel fit's :class:`~neumiss.network.ModelAveraging`) or asks the loop to stop after
an epoch; the loop's own rules (early stopping, the plateau schedule, the divergence guard)
stay the loop's, so that a callback cannot break what they guarantee (the best weights
restored, a diverged epoch never kept). Before the start, the loop tells each callback which
training begins (:meth:`Callback.set_training`, as Keras's ``set_model``): the estimators'
fits run several (the candidates of the search), each described by
:func:`describe_training`. :class:`History` records them all.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
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
    """A hook of the training loop; each ``on_`` method does nothing unless overridden.

    ``training`` is the description of the training under way (:meth:`set_training`):
    read it in :meth:`on_train_begin` to tell the trainings of one fit apart.
    """

    #: The description of the training under way (:meth:`set_training`).
    training: str = ""

    def set_training(self, description: str) -> None:
        """Called by the loop just before :meth:`on_train_begin`: ``description`` says
        which training begins (the estimators': :func:`describe_training`, e.g.
        ``"NeuMissRegressor depth search (depth=16, shared, mlp_depth=2)"``); kept as
        ``training``."""
        self.training = description

    def on_train_begin(self, network: nn.Module, config) -> None:
        """Before the first epoch of ``network``'s training under ``config`` (a
        :class:`~neumiss.network.TrainingConfig`)."""

    def on_batch_end(self, network: nn.Module) -> None:
        """After each training step (the optimizer's update of ``network``), before the
        next batch: for what acts between steps (the data-parallel fit's averaging of
        the processes' weights, :class:`~neumiss.network.ModelAveraging`)."""

    def on_epoch_end(self, epoch: int, losses: EpochLosses) -> bool:
        """After epoch ``epoch`` (1, 2, ...); True asks the loop to stop after it (an
        epoch that diverged is handled by the loop's guard first)."""
        return False

    def on_train_end(self, result) -> None:
        """Once the weights kept are restored and ``result`` (the
        :class:`~neumiss.network._training.TrainingResult` :func:`~neumiss.network.train`
        returns) is complete."""


class ProgressBar(Callback):
    """The progress bar of a training (tqdm), labelled by its description (``training``):
    one step per epoch, its losses and score shown; hidden with ``verbose <= 0``, left on
    screen when done with ``verbose > 1``."""

    def __init__(self, verbose: int) -> None:
        self.verbose = verbose
        self._bar = None

    def on_train_begin(self, network, config):
        self._bar = tqdm(total=config.max_epochs, desc=self.training, unit="epoch",
                         disable=self.verbose <= 0, leave=self.verbose > 1)

    def on_epoch_end(self, epoch, losses):
        self._bar.update(1)
        self._bar.set_postfix(train_loss=f"{losses.train_loss:.4g}",
                              val_loss=f"{losses.val_loss:.4g}",
                              val_score=f"{losses.val_score:.4g}")
        return False

    def on_train_end(self, result):
        self._bar.close()
        self._bar = None  # a closed bar is not kept: the callback copies and pickles


#: The columns of :meth:`History.to_frame`.
HISTORY_COLUMNS = ("training", "description", "epoch", *EpochLosses._fields, "kept")


class History(Callback):
    """Every training's losses, epoch by epoch, with its description: hung on an
    estimator (``callbacks=[History()]``), every candidate of its search and the final
    training; read them with :meth:`History.to_frame`.

    ``trainings`` holds one entry per training, in the order they ran: its description
    (``training``), its :class:`EpochLosses` per epoch and the epoch whose weights it
    kept (``best_epoch``; 0: none, or not known until it ends).
    """

    def __init__(self) -> None:
        self.trainings: list[dict] = []

    def __repr__(self) -> str:
        return f"History(<{len(self.trainings)} trainings>)"

    def on_train_begin(self, network, config):
        self.trainings.append({"description": self.training, "epochs": [], "best_epoch": 0})

    def on_epoch_end(self, epoch, losses):
        self.trainings[-1]["epochs"].append((epoch, losses))
        return False

    def on_train_end(self, result):
        self.trainings[-1]["best_epoch"] = result.best_epoch

    def to_frame(self) -> pd.DataFrame:
        """One row per epoch of every training (columns :data:`HISTORY_COLUMNS`):
        ``training`` (0, 1, ... in the order they ran), ``description``, ``epoch`` (1,
        2, ...), the :class:`EpochLosses` fields and ``kept`` (True on the epoch whose
        weights the training kept)."""
        rows = [(index, training["description"], epoch, *losses,
                 epoch == training["best_epoch"])
                for index, training in enumerate(self.trainings)
                for epoch, losses in training["epochs"]]
        return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def describe_training(label: str, stage: str, depth: int, weight_sharing: str,
                      mlp_depth: int) -> str:
    """The description of one training of an estimator's fit (progress bars, warnings,
    ``Callback.training``): ``label`` (the estimator), ``stage`` (``"depth
    search"``, ``"identity chain"``, ``"untied fine-tune"``, ``"head fine-tune"``,
    ``"stream"``, ``"data-parallel"``) and the candidate's depth, weights and head."""
    return f"{label} {stage} (depth={depth}, {weight_sharing}, mlp_depth={mlp_depth})"
