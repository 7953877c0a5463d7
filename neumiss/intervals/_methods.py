"""The interval methods of :class:`~neumiss.intervals.ConformalRegressor`: split
conformal prediction, CQR and CQR within mask cells (Mondrian); the missing-data
augmentation methods are in :mod:`._mda`.

Every method widens the bounds ``[lo(x), hi(x)]`` of a base model by a margin
``Q`` calibrated on held-out rows: the interval is ``[lo(x) - Q, hi(x) + Q]`` and
the conformity score of a row ``(x, y)`` is how far ``y`` lies outside the bounds,
``max(lo(x) - y, y - hi(x))`` (the absolute residual when ``lo = hi = f(x)``).
The methods differ in the bounds (a point prediction or the quantile head's lowest
and highest quantiles) and in the calibration rows that set ``Q`` for a test row.

A method object holds no data: the fitted base model and what the fit kept of its
calibration rows are a :class:`Calibration`, shared by all methods, so a fitted
``ConformalRegressor`` switches methods without refitting. Each method computes its
intervals from it in numpy (:meth:`IntervalMethod.intervals`) and writes the same
computation as ONNX nodes (:meth:`IntervalMethod.onnx_interval`, which loads
``onnx`` only when called).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..estimators import NeuMissQuantileRegressor, NeuMissRegressor
from ._cells import assign_cells, group_starts
from ._ranks import confident_rank, required_calibration_rows


@dataclass(frozen=True)
class Calibration:
    """A fitted base model and what a fit keeps of its calibration rows.

    Parameters
    ----------
    estimator : fitted estimator
        The base model.
    scores : ndarray of shape (n,)
        Conformity scores of the ``n`` calibration rows (module docstring).
    cells : ndarray of int of shape (n,)
        The mask cell of each calibration row (:func:`~neumiss.intervals.assign_cells`).
    cell_patterns : ndarray of bool of shape (k, p)
    cell_of_count : ndarray of int of shape (p + 1,)
        The partition of masks into cells (:func:`~neumiss.intervals.mask_cells`).
    rows : ndarray of shape (n, p) (NaN = missing), DataFrame, or None
    targets : ndarray of shape (n,) or None
        The calibration rows and their targets, for the methods that keep them
        (:attr:`IntervalMethod.keeps_rows`).
    """

    estimator: object
    scores: np.ndarray
    cells: np.ndarray
    cell_patterns: np.ndarray
    cell_of_count: np.ndarray
    rows: object = None
    targets: np.ndarray | None = None


class IntervalMethod(ABC):
    """A conformal interval method: the base model's bounds widened by a margin.

    Subclasses give the bounds (:meth:`bounds`, :meth:`onnx_bounds`) and the base
    model they come from; this class calibrates one margin on all calibration rows.
    """

    #: The value of ``ConformalRegressor(method=...)`` that selects the method.
    name = ""
    #: The base model's method the bounds come from.
    needs = "predict_quantiles"
    #: A base model that has it, named in the error when a given one has not.
    example = "NeuMissQuantileRegressor"
    #: Whether the method needs the calibration rows themselves (a fit then keeps them).
    keeps_rows = False
    #: Whether the margin is calibrated within each mask cell (else on all rows).
    mondrian = False
    #: Whether ``calibration_confidence`` sets the rank of the margin (else the usual
    #: rank ``ceil((1 - alpha)(n + 1))``, :func:`~neumiss.intervals.confident_rank`).
    confident = True

    @abstractmethod
    def default_estimator(self, alpha: float, seed: int):
        """The base model used when none is given, unfitted."""

    @abstractmethod
    def bounds(self, estimator, X) -> np.ndarray:
        """The bounds ``lo(x)``, ``hi(x)`` of a fitted base model, shape (n, 2)."""

    def scores(self, estimator, X, y) -> np.ndarray:
        """Conformity scores of rows ``(X, y)``, shape (n,): how far ``y`` lies outside
        the bounds (negative inside)."""
        return outside(self.bounds(estimator, X), y)

    def margin(self, calibration: Calibration, X, alpha: float, confidence: float | None):
        """``Q`` for the rows of ``X``: a float, or an ndarray of shape (n,)."""
        return conformal_quantile(calibration.scores, alpha, confidence)

    def intervals(self, calibration: Calibration, X, alpha: float,
                  confidence: float | None) -> np.ndarray:
        """The intervals of the rows of ``X`` at level ``1 - alpha``, shape (n, 2)
        (an empty one made its midpoint, :func:`ordered`)."""
        bounds = self.bounds(calibration.estimator, X)
        q = self.margin(calibration, X, alpha, confidence)
        return ordered(np.column_stack([bounds[:, 0] - q, bounds[:, 1] + q]))

    def onnx_interval(self, g, calibration: Calibration, alpha: float,
                      confidence: float | None) -> tuple[str, str]:
        """Add to graph ``g`` (:class:`neumiss.export.Graph`, inputs ``X`` and ``M``) the
        nodes of :meth:`intervals` and of the point prediction ``y``; return the names
        of the lower and upper bounds (N,) before :func:`ordered`."""
        from . import _onnx  # loads onnx: only when exporting

        base = calibration.estimator
        _, low, high = self.onnx_bounds(g, base, _onnx.network(g, base))
        q = self.onnx_margin(g, calibration, alpha, confidence)
        return g.op("Sub", [low, q], "raw_lower"), g.op("Add", [high, q], "raw_upper")

    @abstractmethod
    def onnx_bounds(self, g, base, own: str) -> tuple[str, str, str]:
        """Add ``y`` (N,) to graph ``g``; return its name and those of the bounds (N,),
        from ``own``: the base model's network output (N, n_outputs), a quantile head's
        sorted per row."""

    def onnx_margin(self, g, calibration: Calibration, alpha: float,
                    confidence: float | None) -> str:
        """Name of ``Q`` in graph ``g``: a scalar or one per input row (N,)."""
        q = conformal_quantile(calibration.scores, alpha, confidence)
        return g.constant("calibration_quantile", q, np.float64)


class SplitMethod(IntervalMethod):
    """``"split"``: split conformal prediction around a point prediction ``f(x)``.

    The score is the absolute residual ``|y - f(x)|``, the interval ``f(x) -+ Q``
    with ``Q`` the :func:`~neumiss.intervals.confident_rank`-th smallest calibration
    score. Valid on average over the rows only (marginally), under any mechanism.
    """

    name = "split"
    needs = "predict"

    def default_estimator(self, alpha, seed):
        return NeuMissRegressor(random_state=seed)

    def bounds(self, estimator, X):
        center = estimator.predict(X)
        return np.column_stack([center, center])

    def onnx_bounds(self, g, base, own):
        from . import _onnx  # loads onnx: only when exporting

        y = _onnx.point(g, base, own)
        return y, y, y


class CQRMethod(IntervalMethod):
    """``"cqr"``: conformalized quantile regression (Romano, Patterson and Candès,
    2019) over a quantile head (the first and last columns of ``predict_quantiles``,
    e.g. :class:`~neumiss.estimators.NeuMissQuantileRegressor`).

    Scores ``max(q_lo(x) - y, y - q_hi(x))``, interval ``[q_lo - Q, q_hi + Q]``, ``Q``
    as for :class:`SplitMethod`. Valid on average over the rows only (marginally).
    """

    name = "cqr"

    def default_estimator(self, alpha, seed):
        levels = (alpha / 2, 0.5, 1 - alpha / 2)
        return NeuMissQuantileRegressor(quantiles=levels, random_state=seed)

    def bounds(self, estimator, X):
        return quantile_bounds(estimator, X)

    def onnx_bounds(self, g, base, own):
        from . import _onnx  # loads onnx: only when exporting

        return (_onnx.point(g, base, own), *_onnx.quantile_columns(g, base, own))


class MondrianMethod(CQRMethod):
    """``"cqr-mondrian"``: CQR within cells of masks (:func:`~neumiss.intervals.mask_cells`).

    Each pattern frequent enough in the training rows is a cell, the others are
    grouped by their number of missing entries; a test row takes the margin of its
    cell (:func:`cell_margins`). The coverage holds within each cell under **any**
    missingness mechanism (MNAR included), as rows of one cell stay exchangeable; it
    is mask-conditional for the frequent patterns.
    """

    name = "cqr-mondrian"
    mondrian = True

    def margin(self, calibration, X, alpha, confidence):
        cells = assign_cells(input_mask(calibration.estimator, X), calibration.cell_patterns,
                             calibration.cell_of_count)
        return cell_margins(calibration, alpha, confidence)[cells]

    def onnx_margin(self, g, calibration, alpha, confidence):
        """The margin (N,) of each input row's cell (:func:`~._onnx.onnx_cells`)."""
        from . import _onnx  # loads onnx: only when exporting

        cell = _onnx.onnx_cells(g, calibration.estimator, calibration.cell_patterns,
                                calibration.cell_of_count)
        margins = cell_margins(calibration, alpha, confidence)
        return g.op("Gather", [g.constant("cell_margins", margins, np.float64), cell],
                    "cell_margin", axis=0)


def conformal_quantile(scores: np.ndarray, alpha: float, confidence: float | None = None) -> float:
    """The :func:`~neumiss.intervals.confident_rank`-th smallest of ``n`` scores (``n``
    large enough): with ``confidence=None``, the ``ceil((1 - alpha)(n + 1))``-th."""
    rank = confident_rank(scores.size, alpha, confidence)
    return float(np.partition(scores, rank - 1)[rank - 1])


def cell_margins(calibration: Calibration, alpha: float, confidence: float | None) -> np.ndarray:
    """``Q`` of each mask cell, shape (n_cells,): the :func:`conformal_quantile` of the
    calibration scores of the cell.

    A cell with fewer rows than :func:`~neumiss.intervals.required_calibration_rows`
    takes the larger of all rows' quantile and its own largest score. Its own largest
    score is its quantile at the strictest ``alpha`` its rows allow (the rank is then
    its row count), so margins only grow as ``alpha`` decreases and intervals are
    nested in ``alpha``; with the quantile of all rows alone, a cell could get a
    narrower interval at a stricter level.
    """
    n_cells = int(max(calibration.cell_patterns.shape[0], calibration.cell_of_count.max() + 1))
    margins = np.full(n_cells, conformal_quantile(calibration.scores, alpha, confidence))
    for cell in range(n_cells):
        scores = calibration.scores[calibration.cells == cell]
        if scores.size >= required_calibration_rows(alpha, confidence):
            margins[cell] = conformal_quantile(scores, alpha, confidence)
        elif scores.size:
            margins[cell] = max(margins[cell], float(scores.max()))
    return margins


def outside(bounds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """How far each ``y`` (n,) lies outside its bounds (n, 2), negative inside: (n,)."""
    return np.maximum(bounds[:, 0] - y, y - bounds[:, 1])


def quantile_bounds(estimator, X) -> np.ndarray:
    """A quantile head's lowest and highest quantiles, shape (n, 2)."""
    return estimator.predict_quantiles(X)[:, [0, -1]]


def ordered(bounds: np.ndarray) -> np.ndarray:
    """Intervals (n, 2) with an empty one (lower > upper) replaced by its midpoint:
    ``[min(lower, mid), max(upper, mid)]``, as the ONNX graph computes it. The
    midpoint covers a continuous ``y`` no more often than the empty set does."""
    mid = bounds.mean(axis=1)
    return np.column_stack([np.minimum(bounds[:, 0], mid), np.maximum(bounds[:, 1], mid)])


def missing(X) -> np.ndarray:
    """The mask of an input table, bool (n_samples, n_features), True = missing."""
    if isinstance(X, pd.DataFrame):
        return X.isna().to_numpy()
    return np.isnan(np.asarray(X, dtype=np.float64))


def input_mask(estimator, X) -> np.ndarray:
    """The mask of the input columns as the fitted base model sees them, bool (n, p):
    :func:`missing`, and also a category not seen at fit (which the model encodes as
    missing, and the ONNX graph, which gets only the encoded mask, cannot tell apart)."""
    encoder = getattr(estimator, "encoder_", None)  # any base model with the methods needed
    if encoder is None or encoder.is_identity:
        return missing(X)
    with warnings.catch_warnings():  # predict has already warned of unseen categories
        warnings.simplefilter("ignore", UserWarning)
        encoded = encoder.transform(X)
    return np.isnan(encoded[:, group_starts(estimator)])


def take_rows(X, index: np.ndarray):
    """Rows ``index`` of an array or DataFrame."""
    return X.iloc[index] if isinstance(X, pd.DataFrame) else X[index]


def remask(X, mask: np.ndarray):
    """``X`` (array or DataFrame) with the entries of ``mask`` (bool, its shape) made
    missing: NaN, or the column's missing value (a categorical column's whole group
    is then missing for the estimator)."""
    if isinstance(X, pd.DataFrame):
        return X.mask(mask)
    return np.where(mask, np.nan, X)
