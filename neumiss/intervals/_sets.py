"""The set methods of :class:`~neumiss.intervals.ConformalClassifier`: a conformity
score of the class probabilities (LAC or APS), calibrated on all calibration rows or
within the mask cells (Mondrian).

A score ``s_k(x)`` is given for every class ``k`` of a row; a calibration row scores
``s_y(x)`` for its own class ``y``, and the prediction set of a test row holds the
classes whose score is within the margin ``Q`` (the conformal quantile of the
calibration scores, of the row's cell for the Mondrian methods): a class is kept
exactly when a calibration row of that class and score would have counted as
covered, so ``P(y in set) >= 1 - alpha``.

* LAC (least ambiguous set-valued classifier, Sadinle, Lei and Wasserman, 2019):
  ``s_k = 1 - p_k``; the set is ``{k : 1 - p_k <= Q}``. It gives the smallest sets on
  average, but a row whose classes all have small probabilities gets an **empty set**
  (as with MAPIE's LAC, which keeps them): kept empty here too. An empty set says that
  no class is plausible enough at this level: such a row is unlike the calibration
  rows, and it counts as a miss in the coverage guarantee.
* APS (adaptive prediction sets, Romano, Sesia and Candès, 2020): ``s_k`` is the
  probability mass of the classes more probable than ``k``, plus ``p_k``; the set is
  ``{k : s_k <= Q}`` (MAPIE's ``include_last_label=False``, not randomized), to which
  the most probable class is added when it is not there: the set is then
  deterministic (the same in Python, ONNX and R) and **never empty**. Adding the class
  that crosses ``Q`` instead (``include_last_label=True``) keeps nearly every class on
  three balanced classes (coverage 1.00, 2.9 classes of 3 on simulated data); the
  randomized set is exact but differs from call to call. Its sets grow with the
  model's uncertainty on each row. With two classes it keeps both on every row as
  soon as the model errs on more than ``alpha`` of the calibration rows (the score of
  a misclassified row is 1): prefer LAC there.

Ties between probabilities: a class counts the mass of the classes strictly more
probable than it, so tied classes are kept or dropped together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..estimators import NeuMissClassifier
from ._cells import assign_cells
from ._methods import Calibration, cell_margins, conformal_quantile, input_mask

#: Largest number of (row, class, class) triples APS holds at once.
_TRIPLES_PER_CHUNK = 2**22


class SetScore(ABC):
    """A conformity score of class probabilities, and the set it keeps."""

    @abstractmethod
    def class_scores(self, proba: np.ndarray) -> np.ndarray:
        """``s_k(x)`` of every class of every row (n, n_classes), from ``proba`` (same shape)."""

    @abstractmethod
    def kept(self, proba: np.ndarray, margin) -> np.ndarray:
        """The sets (bool (n, n_classes)) at margin ``Q`` (a float or one per row, (n,))."""


class LACScore(SetScore):
    """``s_k = 1 - p_k``, set ``{k : s_k <= Q}`` (module docstring: it may be empty)."""

    def class_scores(self, proba):
        return 1.0 - proba

    def kept(self, proba, margin):
        return self.class_scores(proba) <= np.reshape(margin, (-1, 1))


class APSScore(SetScore):
    """``s_k`` = mass of the classes more probable than ``k``, plus ``p_k``; the set keeps
    the classes with ``s_k <= Q`` and the most probable (module docstring: never empty)."""

    def class_scores(self, proba):
        return mass_before(proba) + proba

    def kept(self, proba, margin):
        before = mass_before(proba)
        return (before + proba <= np.reshape(margin, (-1, 1))) | (before == 0)


def mass_before(proba: np.ndarray) -> np.ndarray:
    """For each class of each row, the summed probability of the classes strictly more
    probable than it, (n, n_classes); by rows in chunks, holding (rows, k, k) at once."""
    n, k = proba.shape
    out = np.empty_like(proba)
    step = max(1, _TRIPLES_PER_CHUNK // (k * k))
    for start in range(0, n, step):
        p = proba[start:start + step]
        out[start:start + step] = np.einsum("nj,njk->nk", p, p[:, :, None] > p[:, None, :])
    return out


class SetMethod:
    """A set method: a score (:class:`SetScore`), calibrated on all calibration rows
    (marginal validity) or within mask cells (``mondrian``: valid within each cell of
    masks under any missingness mechanism, mask-conditional for the frequent patterns,
    as :class:`~neumiss.intervals.MondrianMethod`)."""

    #: The base model's method the scores come from.
    needs = "predict_proba"
    #: A base model that has it, named in the error when a given one has not.
    example = "NeuMissClassifier"
    keeps_rows = False
    confident = True

    def __init__(self, name: str, score: SetScore, mondrian: bool):
        self.name = name
        self.score = score
        self.mondrian = mondrian

    def default_estimator(self, alpha, seed):
        return NeuMissClassifier(random_state=seed)

    def scores(self, estimator, X, y) -> np.ndarray:
        """The score of each row's own class ``y`` (labels of ``estimator.classes_``), (n,)."""
        index = np.searchsorted(estimator.classes_, y)
        scores = self.score.class_scores(estimator.predict_proba(X))
        return scores[np.arange(index.shape[0]), index]

    def margin(self, calibration: Calibration, X, alpha: float, confidence: float | None):
        """``Q`` for the rows of ``X``: a float, or one per row (n,) for the Mondrian method."""
        if not self.mondrian:
            return conformal_quantile(calibration.scores, alpha, confidence)
        cells = assign_cells(input_mask(calibration.estimator, X), calibration.cell_patterns,
                             calibration.cell_of_count)
        return cell_margins(calibration, alpha, confidence)[cells]

    def sets(self, calibration: Calibration, X, alpha: float,
             confidence: float | None) -> np.ndarray:
        """The prediction sets of the rows of ``X`` at level ``1 - alpha``: bool
        (n, n_classes), columns in the order of ``classes_``."""
        proba = calibration.estimator.predict_proba(X)
        return self.score.kept(proba, self.margin(calibration, X, alpha, confidence))


#: The methods of :class:`~neumiss.intervals.ConformalClassifier`, by name.
SET_METHODS: dict[str, SetMethod] = {
    method.name: method
    for method in (SetMethod("lac", LACScore(), False), SetMethod("aps", APSScore(), False),
                   SetMethod("lac-mondrian", LACScore(), True),
                   SetMethod("aps-mondrian", APSScore(), True))
}
