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
  probability mass of the classes strictly more probable than ``k`` (the APS score with
  the randomization's uniform at 0), and the set is ``{k : s_k <= Q}``. The most probable
  class scores exactly 0, so the set is **never empty**; it is deterministic (the same in
  Python, ONNX and R) and, being ``{k : s_k <= Q}`` for the very score calibrated, holds
  the level without the conservatism of keeping the class that crosses ``Q``. Measured
  on three simulated classes: the inclusive score (``s_k`` with ``k``'s own mass) with the
  most probable class added covered 0.95-0.96 for a nominal 0.90; this one covers
  near 0.90 (``results/intervals/README.md``). Its sets grow with the model's uncertainty
  on each row; a calibration row whose class is the most probable scores 0, so when the
  model errs on fewer than ``alpha`` of the rows the sets are the most probable class and
  cover as often as the model is right.

Ties between probabilities: tied classes score the same, so they are kept or dropped
together. A class within :data:`~._ranks.SCORE_TOLERANCE` above the margin is kept too: the network
computes its probabilities in float32, which two runtimes (torch, ONNX Runtime) may round
a few units apart, and a test row scoring exactly the margin (rows of one mask whose
observed values the model ignores: the same probability as a calibration row) must be
kept by both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..estimators import NeuMissClassifier
from ._cells import assign_cells
from ._methods import Calibration, cell_margins, conformal_quantile, input_mask
from ._ranks import SCORE_TOLERANCE

#: Largest number of (row, class, class) triples APS holds at once.
_TRIPLES_PER_CHUNK = 2**22


class SetScore(ABC):
    """A conformity score of class probabilities, and the set it keeps."""

    @abstractmethod
    def class_scores(self, proba: np.ndarray) -> np.ndarray:
        """``s_k(x)`` of every class of every row (n, n_classes), from ``proba`` (same shape)."""

    @abstractmethod
    def onnx_scores(self, g, proba: str) -> str:
        """Add :meth:`class_scores` to graph ``g``: ``proba`` float64 (N, n_classes);
        returns the name of the scores, float64 (N, n_classes)."""

    def kept(self, proba: np.ndarray, margin) -> np.ndarray:
        """The sets ``{k : s_k <= Q}`` (bool (n, n_classes)) at margin ``Q`` (a float or
        one per row, (n,)), up to :data:`~._ranks.SCORE_TOLERANCE`."""
        return self.class_scores(proba) <= np.reshape(margin, (-1, 1)) + SCORE_TOLERANCE

    def onnx_kept(self, g, proba: str, margin: str) -> str:
        """Add :meth:`kept` to graph ``g``: ``proba`` float64 (N, n_classes), ``margin``
        float64 (N, 1); returns the name of the sets, bool (N, n_classes)."""
        within = g.op("Add", [margin, g.constant("score_tolerance", SCORE_TOLERANCE,
                                                 np.float64)], "margin_within")
        return g.op("LessOrEqual", [self.onnx_scores(g, proba), within], "set")


class LACScore(SetScore):
    """``s_k = 1 - p_k``, set ``{k : s_k <= Q}`` (module docstring: it may be empty)."""

    def class_scores(self, proba):
        return 1.0 - proba

    def onnx_scores(self, g, proba):
        return g.op("Sub", [g.constant("one_double", 1.0, np.float64), proba], "class_scores")


class APSScore(SetScore):
    """``s_k =`` the mass of the classes more probable than ``k``; the set keeps the
    classes with ``s_k <= Q`` (module docstring: the most probable always, never empty)."""

    def class_scores(self, proba):
        return mass_above(proba)

    def onnx_scores(self, g, proba):
        """``above[n, k] = sum_j p[n, j] [p[n, j] > p[n, k]]`` from an (N, k, k)
        comparison, as :func:`mass_above`."""
        from . import _onnx  # loads onnx: only when exporting

        axis1 = g.constant("axis_1", [1], np.int64)
        p_j = g.op("Unsqueeze", [proba, g.constant("axis_2", [2], np.int64)], "p_j")
        p_k = g.op("Unsqueeze", [proba, axis1], "p_k")
        more = _onnx.cast(g, g.op("Greater", [p_j, p_k], "more_probable"), "more_double",
                          np.float64)
        return g.op("ReduceSum", [g.op("Mul", [more, p_j], "mass_terms"), axis1],
                    "class_scores", keepdims=0)


def probabilities(estimator, X) -> np.ndarray:
    """The class probabilities of a fitted classifier, float64 (n, n_classes): the sets
    and scores are computed in float64, as the ONNX graph computes them."""
    return np.asarray(estimator.predict_proba(X), dtype=np.float64)


def mass_above(proba: np.ndarray) -> np.ndarray:
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

    def class_scores(self, estimator, X) -> np.ndarray:
        """``s_k(x)`` of every class of every row of ``X`` under the fitted ``estimator``,
        float64 (n, n_classes), columns in the order of ``estimator.classes_``."""
        return self.score.class_scores(probabilities(estimator, X))

    def scores(self, estimator, X, y) -> np.ndarray:
        """The score of each row's own class ``y`` (labels of ``estimator.classes_``), (n,)."""
        index = np.searchsorted(estimator.classes_, y)
        return self.class_scores(estimator, X)[np.arange(index.shape[0]), index]

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
        proba = probabilities(calibration.estimator, X)
        return self.score.kept(proba, self.margin(calibration, X, alpha, confidence))

    def onnx_sets(self, g, calibration: Calibration, alpha: float, confidence: float | None,
                  proba: str) -> str:
        """Add :meth:`sets` to graph ``g`` (inputs ``X``, ``M``), from the probabilities
        ``proba`` float64 (N, n_classes); the margin, of all rows or of each row's cell,
        is an initializer. Returns the name of the sets, bool (N, n_classes)."""
        from . import _onnx  # loads onnx: only when exporting

        if self.mondrian:
            cell = _onnx.onnx_cells(g, calibration.estimator, calibration.cell_patterns,
                              calibration.cell_of_count)
            margin = g.op("Gather", [g.constant("cell_margins", cell_margins(
                calibration, alpha, confidence), np.float64), cell], "cell_margin", axis=0)
            margin = g.op("Unsqueeze", [margin, g.constant("axis_1", [1], np.int64)], "margin")
        else:
            margin = g.constant("calibration_quantile", [[conformal_quantile(
                calibration.scores, alpha, confidence)]], np.float64)
        return self.score.onnx_kept(g, proba, margin)


#: The methods of :class:`~neumiss.intervals.ConformalClassifier`, by name.
SET_METHODS: dict[str, SetMethod] = {
    method.name: method
    for method in (SetMethod("lac", LACScore(), False), SetMethod("aps", APSScore(), False),
                   SetMethod("lac-mondrian", LACScore(), True),
                   SetMethod("aps-mondrian", APSScore(), True))
}
