"""The evaluation protocol: cross-validation folds, seeds and metrics.

Each task is cross-validated with :data:`N_FOLDS` folds, repeated; the folds
of a repeat depend only on the task's target, the repeat and the base seed, so
every method sees the same folds (stratified on the class for binary tasks).
Metrics: R² for regression; for binary tasks the log loss (the ranking
metric), the ROC AUC and the accuracy at probability 0.5.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.metrics import accuracy_score, log_loss, r2_score, roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold

N_FOLDS = 5
DEFAULT_REPEATS = 2

#: The ranking metric of each kind of task, and whether higher is better.
RANKING_METRIC = {"regression": ("r2", True), "binary": ("log_loss", False)}
#: Metric columns of ``runs.csv`` (NaN where they do not apply).
METRICS = ("r2", "log_loss", "auc", "accuracy")


def _seed(*key: int) -> int:
    """A 31-bit seed derived from the integers ``key`` (independent streams per key)."""
    return int(np.random.SeedSequence(list(key)).generate_state(1)[0] >> 1)


def fold_indices(
    y: np.ndarray, kind: str, repeat: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The :data:`N_FOLDS` (train rows, test rows) pairs of one repeat.

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
        The task's target (binary: 0/1, used to stratify).
    kind : {"regression", "binary"}
    repeat, seed : int
        The shuffling seed is derived from both; the method is not involved.

    Returns
    -------
    list of (ndarray, ndarray) of int row indices, the test rows of the folds
    partitioning ``range(n_rows)``.
    """
    splitter_class = StratifiedKFold if kind == "binary" else KFold
    splitter = splitter_class(N_FOLDS, shuffle=True, random_state=_seed(seed, repeat))
    return list(splitter.split(np.zeros((len(y), 1)), y))


def method_seed(seed: int, repeat: int, fold: int) -> int:
    """``random_state`` of the methods fitted on one fold (the same for every method)."""
    return _seed(seed, repeat, fold, 1)


def score(kind: str, y_true: np.ndarray, prediction: np.ndarray) -> dict[str, float]:
    """The metrics of one fold, a dict with the keys of :data:`METRICS`.

    ``prediction``: predicted values (regression) or probabilities of class 1
    (binary), shape (n_test,). Metrics that do not apply are NaN (and AUC when
    the test fold has one class).
    """
    metrics = dict.fromkeys(METRICS, math.nan)
    if kind == "regression":
        metrics["r2"] = float(r2_score(y_true, prediction))
        return metrics
    metrics["log_loss"] = float(log_loss(y_true, prediction, labels=[0, 1]))
    metrics["accuracy"] = float(accuracy_score(y_true, prediction >= 0.5))
    if len(np.unique(y_true)) == 2:
        metrics["auc"] = float(roc_auc_score(y_true, prediction))
    return metrics
