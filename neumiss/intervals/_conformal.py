"""Prediction intervals by conformal prediction, valid for every missingness pattern.

:class:`ConformalRegressor` fits a base model on part of the rows and calibrates on
the others (split conformal prediction), by one of five methods (``method``), each an
object that states its guarantee and the mechanisms it holds under
(:mod:`._methods`, :mod:`._mda`):

* ``"split"`` and ``"cqr"`` (conformalized quantile regression): valid on average
  over the rows only (marginally), under any missingness mechanism; rows with many
  missing entries may be under-covered.
* ``"cqr-mondrian"`` (the default): CQR within cells of masks, valid within each
  cell under **any** mechanism (MNAR included), mask-conditional for the frequent
  patterns.
* ``"cqr-mda-exact"`` and ``"cqr-mda-nested"``: missing-data augmentation, valid
  conditionally on each mask under MCAR (Nested at ``1 - 2 alpha`` in theory, with
  wider intervals); they over-cover under self-masking.

``calibration_confidence`` (default 0.75) makes the margins of ``"split"``,
``"cqr"`` and ``"cqr-mondrian"`` hold with that probability over the draw of the
calibration rows (:func:`~neumiss.intervals.confident_rank`), rather than on average
over draws, where a small cell covers less than ``1 - alpha`` in nearly half of the
draws; the price is a slightly wider interval, which vanishes as cells grow. None
gives the usual rank ``ceil((1 - alpha)(n + 1))``. The MDA methods keep the ranks of
their paper.

Every quantile method shares the base model, the calibration scores and the mask
cells: ``set_params(method=...)`` after a fit with a ``"cqr-mda-*"`` method (which
also keeps the calibration rows) switches between them without refitting. The
calibration scores (and, for the MDA methods, the calibration rows themselves) are
kept, so ``predict_interval(X, alpha=...)`` recalibrates exactly at any other
``alpha``. The quantile head, though, was trained at the levels of the fit-time
``alpha`` (``alpha/2`` and ``1 - alpha/2``): at another ``alpha`` the coverage
guarantee still holds, but the intervals may be wider than a head trained at that
level would give.

On small tables a split leaves too few calibration rows: below ``CROSS_ROWS`` rows,
``cv="auto"`` (the default) calibrates ``"split"``, ``"cqr"`` and ``"cqr-mondrian"`` by
CV+ instead, every row scored by a fold model that did not see it (:mod:`._cross`);
``summary()`` says which calibration a fit used.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin

from ..checks import Options
from ._cross import cross_intervals
from ._mda import MDAExactMethod, MDANestedMethod
from ._methods import (
    CQRMethod,
    IntervalMethod,
    MondrianMethod,
    SplitMethod,
    cell_margins,
    conformal_quantile,
)
from ._split import PARAMETER_CONSTRAINTS, SplitConformal

#: The methods of :class:`ConformalRegressor`, by name.
METHODS: dict[str, IntervalMethod] = {
    method.name: method
    for method in (SplitMethod(), CQRMethod(), MDAExactMethod(), MDANestedMethod(),
                   MondrianMethod())
}


class ConformalRegressor(RegressorMixin, SplitConformal):
    """Prediction intervals with a coverage guarantee, with missing values in X.

    Parameters
    ----------
    estimator : estimator or None, default=None
        The base model, cloned at ``fit``. ``"split"`` needs ``predict``;
        the ``"cqr*"`` methods need ``predict_quantiles`` (the
        first and last columns are the lower and upper quantiles), e.g.
        :class:`~neumiss.estimators.NeuMissQuantileRegressor`. None takes
        ``NeuMissRegressor()`` for ``"split"`` and
        ``NeuMissQuantileRegressor(quantiles=(alpha/2, 0.5, 1 - alpha/2))``
        otherwise, seeded from ``random_state``; a given estimator whose
        ``random_state`` is None is seeded from it too, so that a fit with
        ``random_state`` set repeats.
    method : {"split", "cqr", "cqr-mda-exact", "cqr-mda-nested", "cqr-mondrian"}, \
default="cqr-mondrian"
        See the module docstring, and for each method its class
        (:data:`~neumiss.intervals.METHODS`). The ``"cqr-mda-*"`` methods keep the
        calibration rows (the model file too): they re-mask input columns (a
        categorical column as a whole).
    alpha : float in (0, 1), default=0.1
        Miscoverage: intervals hold ``y`` with probability ``1 - alpha``.
    calibration_fraction : float in (0, 1), default=0.25
        Share of the rows held out to calibrate; the base model trains on the others.
    calibration_confidence : float in (0, 1) or None, default=0.75
        For ``"split"``, ``"cqr"`` and ``"cqr-mondrian"``: the probability, over
        the draw of the calibration rows, that the coverage of a cell (of all
        rows for the first two) is at least ``1 - alpha``; None: at least
        ``1 - alpha`` on average over draws (module docstring).
    cv : "auto", int >= 2 or None, default="auto"
        Cross-conformal calibration (CV+, :mod:`._cross`) with this many folds, every
        row calibrating, for ``"split"``, ``"cqr"`` and ``"cqr-mondrian"``: for small
        tables, where a split leaves too few calibration rows and wide intervals.
        ``"auto"``: 10 folds below ``CROSS_ROWS`` (500) rows, a split otherwise. None:
        always a split. It fits ``cv + 1`` base models (one on all rows).
    random_state : int, RandomState or None, default=None
        Seeds the split (or the folds), and the base model when it has no seed of its own.

    Attributes
    ----------
    estimator_ : the fitted base model.
    calibration_scores_ : ndarray of shape (n_calibration,)
        Conformity scores of the calibration rows (without augmentation); of every
        row, out of fold, for a cross-conformal fit.
    fold_estimators_, calibration_folds_ : for a cross-conformal fit only
        The base models fitted without each fold, and the fold of each row.
    calibration_rows_, calibration_targets_ : for the ``"cqr-mda-*"`` methods only
        The calibration rows (as given: an array, NaN = missing, or a DataFrame)
        and their targets.
    cell_patterns_, cell_of_count_ : ndarrays
        The partition of masks (:func:`~neumiss.intervals.mask_cells`), drawn from the training
        rows' masks, used by ``"cqr-mondrian"``.
    calibration_cells_ : ndarray of shape (n_calibration,)
        The cell of each calibration row.
    n_features_in_, feature_names_in_ : as the estimators'.

    Examples
    --------
    >>> import neumiss
    >>> from neumiss.intervals import ConformalRegressor
    >>> X, y, truth = neumiss.simulation.make_regression(2000, 5, random_state=0)
    >>> base = neumiss.NeuMissQuantileRegressor(ensemble_size=1, depth=2, max_epochs=5)
    >>> model = ConformalRegressor(base, random_state=0).fit(X, y)
    >>> model.predict_interval(X[:3]).shape
    (3, 2)
    """

    _methods = METHODS
    _y_numeric = True
    _predicts = "predict_interval"
    _parameter_constraints = PARAMETER_CONSTRAINTS | {"method": Options(*METHODS)}

    def __init__(
        self, estimator=None, *, method="cqr-mondrian", alpha=0.1, calibration_fraction=0.25,
        calibration_confidence=0.75, cv="auto", random_state=None,
    ):
        self.estimator = estimator
        self.method = method
        self.alpha = alpha
        self.calibration_fraction = calibration_fraction
        self.calibration_confidence = calibration_confidence
        self.cv = cv
        self.random_state = random_state

    # ----------------------------------------------------------------- predict
    def predict_interval(self, X, alpha=None) -> np.ndarray:
        """Prediction intervals at level ``1 - alpha``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features), NaN = missing
        alpha : float in (0, 1) or None
            None: the fit-time ``alpha``. Another value recalibrates from the
            stored scores (module docstring: the quantile head keeps its levels).

        Returns
        -------
        ndarray of shape (n_samples, 2): lower and upper bounds, lower <= upper.
        A CQR interval whose margin is negative and larger than the quantiles'
        spread would be empty (lower > upper): it is returned as the point
        midway, which covers a continuous ``y`` no more often than the empty
        set does (never).
        """
        if self.cross_conformal_:
            method, calibration, alpha = self._cross_calibrated(alpha)
            return cross_intervals(method, calibration, self._features(X), alpha)
        method, calibration, alpha, confidence = self._calibrated(alpha)
        return method.intervals(calibration, self._features(X), alpha, confidence)

    def calibration_quantile(self, alpha=None) -> float:
        """``Q``: the margin ``"split"`` and ``"cqr"`` add to their bounds, the
        :func:`~neumiss.intervals.confident_rank`-th smallest calibration score (with
        ``calibration_confidence=None``, the ``ceil((1 - alpha)(n + 1))``-th)."""
        _, calibration, alpha, confidence = self._calibrated(alpha)
        return conformal_quantile(calibration.scores, alpha, confidence)

    def cell_margins(self, alpha=None) -> np.ndarray:
        """``Q`` of each mask cell (``"cqr-mondrian"``), shape (n_cells,): the conformal
        quantile of the calibration scores of the cell (at ``calibration_confidence``);
        a cell with too few rows takes the larger of all rows' quantile and its own
        largest score, so that intervals are nested in ``alpha``
        (:func:`~._methods.cell_margins`)."""
        _, calibration, alpha, confidence = self._calibrated(alpha)
        return cell_margins(calibration, alpha, confidence)

    # ------------------------------------------------------------- persistence
    def to_onnx(self, path=None, **kwargs):
        """Export to ONNX with outputs ``y``, ``lower`` and ``upper`` (at the fit-time
        ``alpha``); see :func:`~._onnx.export_interval_onnx`, and mind that the
        ``"cqr-mda-*"`` methods embed the calibration rows in the file."""
        from ._onnx import export_interval_onnx  # onnx is loaded only when exporting

        return export_interval_onnx(self, path, **kwargs)
