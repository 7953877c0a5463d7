"""Cross-conformal intervals and prediction sets for small tables: CV+ (Barber, Candès,
Ramdas and Tibshirani, 2021, "Predictive inference with the jackknife+"), over the bounds
of ``"split"``, ``"cqr"`` or ``"cqr-mondrian"``, and over the class scores of every
set method (Romano, Sesia and Candès, 2020, "Classification with valid and adaptive
coverage", its CV+ form).

A split leaves few rows to calibrate on a small table (22 of 116 rows at the default
``calibration_fraction``), and the conformal quantile of so few scores is far out in
their tail: intervals twice the ideal width. CV+ lets **every row calibrate**: the
rows are cut into ``K`` folds, a base model is fitted without each fold, and each row
``i`` gets the score ``E_i`` of the model that did not see it (out of fold). A test row
``x`` gets, for each row ``i``, the bounds of that model widened by ``E_i``:
``lo_k(i)(x) - E_i`` and ``hi_k(i)(x) + E_i``; its interval runs from the
``floor(alpha (n + 1))``-th smallest lower end to the ``ceil((1 - alpha)(n + 1))``-th
smallest upper end. The coverage is at least ``1 - 2 alpha`` in theory and close to
``1 - alpha`` in practice (the paper's experiments, and
``results/intervals/small_tables.md``). The ranks are the usual ones
(``calibration_confidence`` does not apply).

Prediction sets (:class:`~neumiss.intervals.ConformalClassifier`): with ``E_i`` the
out-of-fold score of row ``i`` (LAC or APS, of its own class) and ``s_k(x; m)`` the
score of class ``k`` of test row ``x`` under model ``m``, class ``k`` is in the set of
``x`` when ``#{i : E_i < s_k(x; m_k(i)) - t} < ceil((1 - alpha)(n + 1))``: ``s_k(x)``,
seen by each row's own fold model, is not beyond that many calibration scores, ``t`` the
split sets' :data:`~._ranks.SCORE_TOLERANCE` (a calibration score equal to ``s_k(x)`` up
to float32 rounding does not count as below it: a fold network that scores two rows
alike, rows of one mask whose observed values it ignores, gives them the same score in
one runtime and scores a unit apart in another). With a single model scoring every row
this is the split rule ``s_k(x) <= Q + t``, ``Q`` the ``ceil((1 - alpha)(n + 1))``-th
smallest ``E_i`` (fewer than that many scores lie strictly below ``s_k(x) - t`` exactly
when that one does not). The coverage is at least
``1 - 2 alpha`` (less a term of order ``K / n``) in theory, close to ``1 - alpha`` in
practice; the rank falls as ``alpha`` grows, so the sets are nested in ``alpha``
(within either regime of a Mondrian cell, below). A LAC set may be empty, an APS set
never is (the most probable class scores 0, below no score).

``"cqr-mondrian"`` and the ``"-mondrian"`` set methods: the rows' mask cells are drawn
from all rows (each row both trains and calibrates); a test row whose cell holds enough
rows for ``alpha`` (:func:`~neumiss.intervals.required_calibration_rows`) is calibrated
on that cell's rows only (valid within the cell), the others on all rows (marginal):
which cells are which is :func:`~._cells.own_cells`. A cell switching from its own rows
to all rows as ``alpha`` decreases may give a narrower interval or a smaller set:
nesting in ``alpha`` holds within either regime, not across it. An empty interval (CQR
bounds wider than needed, large ``alpha``) is returned as its midpoint, as for a split;
the CV+ ranks are not symmetric, so that midpoint need not lie in the interval of a
smaller ``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import KFold

from ._cells import assign_cells, own_cells
from ._methods import input_mask, ordered, take_rows
from ._ranks import SCORE_TOLERANCE, lower_rank, upper_rank

#: Below this many rows, ``cv="auto"`` calibrates by CV+ rather than a split
#: (measured: ``results/intervals/small_tables.md``).
CROSS_ROWS = 500
#: Folds of ``cv="auto"``.
FOLDS = 10
#: Largest number of (test row, calibration row) pairs held at once.
_PAIRS_PER_CHUNK = 2**22


@dataclass(frozen=True)
class CrossCalibration:
    """What a cross-conformal fit keeps.

    Parameters
    ----------
    estimator : the base model fitted on all rows (whose masks draw the cells).
    estimators : list of K fitted base models, each without one fold.
    scores : ndarray of shape (n,)
        The out-of-fold score of every row.
    folds : ndarray of int of shape (n,)
        The fold of every row (the index of the model that did not see it).
    cells : ndarray of int of shape (n,)
    cell_patterns, cell_of_count : the partition of masks, drawn from all rows.
    """

    estimator: object
    estimators: list
    scores: np.ndarray
    folds: np.ndarray
    cells: np.ndarray
    cell_patterns: np.ndarray
    cell_of_count: np.ndarray


def cross_fit(method, make_base, X, y, n_folds: int, rng,
              check=None) -> tuple[list, np.ndarray, np.ndarray]:
    """Fit ``n_folds`` base models (``make_base(seed)``, each without one fold of the
    shuffled rows) and score every row out of fold: ``(models, scores, folds)``.
    ``check(model, y_train, fold)``, when given, may refuse a fold's model before it
    scores (a class absent from its training rows)."""
    n = y.shape[0]
    folds = np.empty(n, dtype=np.int64)
    scores = np.empty(n)
    models = []
    splitter = KFold(n_folds, shuffle=True, random_state=rng.randint(np.iinfo(np.int32).max))
    for k, (train, held) in enumerate(splitter.split(np.zeros((n, 1)))):
        model = make_base(int(rng.randint(np.iinfo(np.int32).max)))
        models.append(model.fit(take_rows(X, train), y[train]))
        if check is not None:
            check(model, y[train], k)
        folds[held] = k
        scores[held] = method.scores(model, take_rows(X, held), y[held])
    return models, scores, folds


def calibration_groups(method, calibration: CrossCalibration, X, alpha: float):
    """The calibration rows each test row of ``X`` is calibrated on: pairs ``(rows,
    test)`` of indices of calibration rows and of the test rows calibrated on them,
    one pair per group: all rows, and for a Mondrian method each mask cell that
    :func:`~._cells.own_cells` calibrates on its own rows at ``alpha``."""
    groups = np.full(len(X), -1)  # -1: calibrated on all rows; c: on cell c's
    if method.mondrian:
        cells = assign_cells(input_mask(calibration.estimator, X),
                             calibration.cell_patterns, calibration.cell_of_count)
        groups = np.where(own_cells(calibration, alpha)[cells], cells, -1)
    for group in np.unique(groups):
        rows = np.flatnonzero(calibration.cells == group) if group >= 0 else np.arange(
            calibration.scores.shape[0])
        yield rows, np.flatnonzero(groups == group)


def cross_intervals(method, calibration: CrossCalibration, X, alpha: float) -> np.ndarray:
    """The CV+ intervals (n, 2) of the rows of ``X`` (module docstring), an empty one
    made its midpoint (:func:`~._methods.ordered`)."""
    bounds = np.stack([method.bounds(model, X) for model in calibration.estimators])  # (K, N, 2)
    out = np.empty((bounds.shape[1], 2))
    for rows, test in calibration_groups(method, calibration, X, alpha):
        out[test] = _plus_bounds(bounds[:, test], calibration.folds[rows],
                                 calibration.scores[rows], alpha)
    return ordered(out)


def cross_sets(method, calibration: CrossCalibration, X, alpha: float) -> np.ndarray:
    """The CV+ prediction sets of the rows of ``X``, bool (N, n_classes) (module
    docstring): class ``k`` is in the set of ``x`` when fewer than
    ``ceil((1 - alpha)(n + 1))`` of its group's ``n`` calibration rows ``i`` score out of
    fold strictly below ``s_k(x) - SCORE_TOLERANCE`` under the model that did not see row
    ``i``."""
    scores = np.stack([method.class_scores(model, X)
                       for model in calibration.estimators])  # (K, N, n_classes)
    out = np.empty(scores.shape[1:], dtype=bool)
    for rows, test in calibration_groups(method, calibration, X, alpha):
        out[test] = _plus_sets(scores[:, test], calibration.folds[rows],
                               calibration.scores[rows], alpha)
    return out


def _plus_bounds(bounds: np.ndarray, folds: np.ndarray, scores: np.ndarray,
                 alpha: float) -> np.ndarray:
    """The CV+ bounds (N, 2) from the fold models' bounds (K, N, 2) and the calibration
    rows' folds and scores (n,), by test rows in chunks of ``N n`` pairs."""
    n = scores.shape[0]
    low_rank, high_rank = lower_rank(n, alpha), upper_rank(n, alpha)
    out = np.empty((bounds.shape[1], 2))
    step = max(1, _PAIRS_PER_CHUNK // n)
    for start in range(0, bounds.shape[1], step):
        part = bounds[:, start:start + step]  # (K, m, 2)
        lows = part[folds, :, 0].T - scores  # (m, n)
        highs = part[folds, :, 1].T + scores
        out[start:start + step, 0] = np.partition(lows, low_rank - 1, axis=1)[:, low_rank - 1]
        out[start:start + step, 1] = np.partition(highs, high_rank - 1, axis=1)[:, high_rank - 1]
    return out


def _plus_sets(class_scores: np.ndarray, folds: np.ndarray, scores: np.ndarray,
               alpha: float) -> np.ndarray:
    """The CV+ sets (N, n_classes) from the fold models' class scores (K, N, n_classes)
    and the calibration rows' folds and scores (n,): for each fold ``k``, the number of
    its rows scoring strictly below ``s_k(x) - SCORE_TOLERANCE`` is a binary search in
    their sorted scores, so memory stays ``K N n_classes`` (no (test row, calibration row)
    pairs)."""
    below = np.zeros(class_scores.shape[1:], dtype=np.int64)
    for k in range(class_scores.shape[0]):
        below += np.searchsorted(np.sort(scores[folds == k]), class_scores[k] - SCORE_TOLERANCE,
                                 side="left")
    return below < upper_rank(scores.shape[0], alpha)
