"""Prediction intervals by conformal prediction, valid for every missingness pattern.

:class:`ConformalRegressor` fits a base model on part of the rows and
calibrates on the others (split conformal prediction). Five methods:

* ``"split"``: absolute residuals ``|y - f(x)|`` of a point predictor; the
  interval is ``f(x) -+ Q``, ``Q`` the ``ceil((1 - alpha)(n + 1))``-th smallest
  calibration score. Valid on average over the rows only (marginally).
* ``"cqr"``: conformalized quantile regression (Romano, Patterson, Candès
  2019) over a quantile head (:class:`~neumiss.estimators.NeuMissQuantileRegressor`):
  scores ``max(q_lo(x) - y, y - q_hi(x))``, interval ``[q_lo - Q, q_hi + Q]``.
  Marginally valid too.
* ``"cqr-mda-exact"`` and ``"cqr-mda-nested"``: missing-data
  augmentation over CQR (Zaffran, Dieuleveut, Josse and Romano, "Conformal
  prediction with missing values", ICML 2023), valid conditionally on the
  mask under MCAR. CP-MDA-Exact calibrates a test row with mask ``m`` on the
  calibration rows whose mask lies inside ``m`` (``m_k ⊆ m``), re-masked with
  ``m``: they are exchangeable with the test row under MCAR, so the coverage is
  ``1 - alpha`` for every mask, and the test row keeps its own prediction.
  A mask with fewer such rows than :func:`~neumiss.ranks.required_calibration_rows` (where
  the paper's Exact gives an infinite interval) falls back to CP-MDA-Nested.
  CP-MDA-Nested: for a test row with mask ``m``, every
  calibration row ``k`` is re-masked with ``m ∪ m_k`` and scored again, and the
  test row is predicted under the same augmented mask ``m ∪ m_k``; this gives
  one interval per calibration row, ``[q_lo(x, m ∪ m_k) - s_k, q_hi(x, m ∪ m_k) + s_k]``.
  The lower bound is the ``floor(alpha (n + 1))``-th smallest of their lower
  ends, the upper bound the ``ceil((1 - alpha)(n + 1))``-th smallest of their
  upper ends. Under MCAR the coverage holds conditionally on each mask, at
  ``1 - 2 alpha`` in theory (as for the jackknife+) and near ``1 - alpha`` in
  practice in the paper's experiments; but every test row is predicted
  with the union masks, which hold more missing entries than its own, so the
  intervals are wider (on the benchmark's 50% MCAR data, n_train = 1e5, 1.9
  times the oracle's width against 1.06 for Exact, at 0.97 coverage;
  ``results/intervals/``).
* ``"cqr-mondrian"`` (the default): CQR within cells of masks
  (:mod:`neumiss.mask_cells`): each pattern frequent enough in the training
  rows is a cell, the others are grouped by their number of missing entries.
  The coverage holds within each cell under **any** missingness mechanism
  (MNAR included), as rows of one cell stay exchangeable; it is
  mask-conditional for the frequent patterns only. Under self-masking, the MDA
  methods lose their guarantee (re-masking an observed value does not make it
  look like a missing one) and over-cover.

``calibration_confidence`` (default 0.75) makes the margins of ``"split"``,
``"cqr"`` and ``"cqr-mondrian"`` hold with that probability over the draw of
the calibration rows (:func:`neumiss.ranks.confident_rank`), rather than on
average over draws: a cell of 100 calibration rows covers 0.9 on average but
below 0.9 in nearly half of the draws, below 0.87 in one out of seven; the
confident rank keeps each cell at or above 0.9 in three draws out of four, for
a slightly wider interval (at most +0.01 coverage with thousands of rows per
cell). None gives the usual rank
``ceil((1 - alpha)(n + 1))``. The MDA methods keep the ranks of their paper.

Every quantile method shares the base model, the calibration scores and the
mask cells: ``set_params(method=...)`` after a fit with a ``"cqr-mda-*"``
method (which also keeps the calibration rows) switches between them without
refitting. The calibration scores (and, for the MDA methods, the
calibration rows themselves) are kept, so ``predict_interval(X, alpha=...)``
recalibrates exactly at any other ``alpha``. The quantile head, though, was
trained at the levels of the fit-time ``alpha`` (``alpha/2`` and
``1 - alpha/2``): at another ``alpha`` the coverage guarantee still holds, but
the intervals may be wider than a head trained at that level would give.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..checks import (
    AnyOf,
    InstanceOf,
    Integer,
    NoneValue,
    Options,
    Real,
    check_features,
    check_params,
    check_training_data,
)
from ..estimators import (
    NeuMissQuantileRegressor,
    NeuMissRegressor,
    save_estimator,
)
from ..simulation import group_patterns
from ._cells import assign_cells, mask_cells
from ._ranks import confident_rank, lower_rank, required_calibration_rows, upper_rank

#: The methods of :class:`ConformalRegressor`.
METHODS = ("split", "cqr", "cqr-mda-exact", "cqr-mda-nested", "cqr-mondrian")
#: Methods that need a quantile head (``predict_quantiles``).
QUANTILE_METHODS = ("cqr", "cqr-mda-exact", "cqr-mda-nested", "cqr-mondrian")
#: Methods that keep the calibration rows (mask-conditional, by missing-data augmentation).
MDA_METHODS = ("cqr-mda-exact", "cqr-mda-nested")
#: Largest number of (test row, calibration row) pairs held at once by the nested method.
_PAIRS_PER_CHUNK = 2**22


def _check_alpha(alpha, n_calibration: int | None = None,
                 confidence: float | None = None) -> float:
    """``alpha`` as a float in (0, 1); with ``n_calibration``, also enough rows for it
    (at ``confidence``, see :func:`~neumiss.ranks.required_calibration_rows`)."""
    if not Real(0, 1, closed="neither").accepts(alpha):
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    needed = required_calibration_rows(alpha, confidence)
    if n_calibration is not None and n_calibration < needed:
        rule = ("n >= 1/alpha - 1" if confidence is None else
                f"(1 - alpha)^n <= 1 - calibration_confidence = {1 - confidence:g}")
        raise ValueError(
            f"alpha={alpha} needs at least {needed} calibration rows ({rule}), got "
            f"{n_calibration}: give more rows, raise calibration_fraction or raise alpha"
            + ("" if confidence is None else ", or lower calibration_confidence")
        )
    return float(alpha)


def _missing(X) -> np.ndarray:
    """The mask of an input table, bool (n_samples, n_features), True = missing."""
    if isinstance(X, pd.DataFrame):
        return X.isna().to_numpy()
    return np.isnan(np.asarray(X, dtype=np.float64))


class ConformalRegressor(RegressorMixin, BaseEstimator):
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
        otherwise, seeded from ``random_state``.
    method : {"split", "cqr", "cqr-mda-exact", "cqr-mda-nested", "cqr-mondrian"}, \
default="cqr-mondrian"
        See the module docstring. The ``"cqr-mda-*"`` methods keep the
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
    random_state : int, RandomState or None, default=None
        Seeds the split and the default base model.

    Attributes
    ----------
    estimator_ : the fitted base model.
    calibration_scores_ : ndarray of shape (n_calibration,)
        Conformity scores of the calibration rows (without augmentation).
    calibration_rows_, calibration_targets_ : for the ``"cqr-mda-*"`` methods only
        The calibration rows (as given: an array, NaN = missing, or a DataFrame)
        and their targets.
    cell_patterns_, cell_of_count_ : ndarrays
        The partition of masks (:mod:`neumiss.mask_cells`), drawn from the training
        rows' masks, used by ``"cqr-mondrian"``.
    calibration_cells_ : ndarray of shape (n_calibration,)
        The cell of each calibration row.
    n_features_in_, feature_names_in_ : as the estimators'.

    Examples
    --------
    >>> import neumiss
    >>> from neumiss.conformal import ConformalRegressor
    >>> X, y, truth = neumiss.simulate.make_regression(2000, 5, random_state=0)
    >>> base = neumiss.NeuMissQuantileRegressor(ensemble_size=1, depth=2, max_epochs=5)
    >>> model = ConformalRegressor(base, random_state=0).fit(X, y)
    >>> model.predict_interval(X[:3]).shape
    (3, 2)
    """

    #: Fitted attributes a model file must hold (:mod:`neumiss.persistence`).
    _saved_attributes = ("estimator_", "calibration_scores_", "n_features_in_")

    _parameter_constraints = {
        "estimator": AnyOf(NoneValue(), InstanceOf(BaseEstimator, "a scikit-learn estimator")),
        "method": Options(*METHODS),
        "alpha": Real(0, 1, closed="neither"),
        "calibration_fraction": Real(0, 1, closed="neither"),
        "calibration_confidence": AnyOf(NoneValue(), Real(0, 1, closed="neither")),
        "random_state": AnyOf(
            NoneValue(), Integer(0, 2**32 - 1), InstanceOf(np.random.RandomState, "a RandomState")
        ),
    }

    def __init__(
        self, estimator=None, *, method="cqr-mondrian", alpha=0.1, calibration_fraction=0.25,
        calibration_confidence=0.75, random_state=None,
    ):
        self.estimator = estimator
        self.method = method
        self.alpha = alpha
        self.calibration_fraction = calibration_fraction
        self.calibration_confidence = calibration_confidence
        self.random_state = random_state

    # --------------------------------------------------------------------- fit
    def _base_estimator(self, seed: int):
        """A clone of ``estimator`` (checked for what the method needs), or the default."""
        if self.estimator is None:
            if self.method == "split":
                return NeuMissRegressor(random_state=seed)
            levels = (self.alpha / 2, 0.5, 1 - self.alpha / 2)
            return NeuMissQuantileRegressor(quantiles=levels, random_state=seed)
        needs = "predict_quantiles" if self.method in QUANTILE_METHODS else "predict"
        if not callable(getattr(self.estimator, needs, None)):
            raise ValueError(
                f"ConformalRegressor: method={self.method!r} needs an estimator with a "
                f"{needs}() method (e.g. NeuMissQuantileRegressor), got "
                f"{type(self.estimator).__name__}"
            )
        return clone(self.estimator)

    def fit(self, X, y):
        """Fit the base model on ``1 - calibration_fraction`` of the rows, calibrate on the rest.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features), NaN = missing
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        X, y = check_training_data(self, X, y, y_numeric=True, tables=True)
        y = y.astype(np.float64)
        n = y.shape[0]
        n_cal = int(math.ceil(self.calibration_fraction * n))
        _check_alpha(self.alpha, n_cal, self._confidence())
        if n - n_cal < 2:
            raise ValueError(
                f"ConformalRegressor: {n} rows leave {n - n_cal} to train the base model with "
                f"calibration_fraction={self.calibration_fraction}; give more rows"
            )
        rng = check_random_state(self.random_state)
        order = rng.permutation(n)
        train, cal = np.sort(order[n_cal:]), np.sort(order[:n_cal])
        base = self._base_estimator(int(rng.randint(np.iinfo(np.int32).max)))
        self.estimator_ = base.fit(_rows(X, train), y[train])
        X_cal, y_cal = _rows(X, cal), y[cal]
        self.calibration_scores_ = self._scores(X_cal, y_cal)
        self.cell_patterns_, self.cell_of_count_ = mask_cells(
            _missing(_rows(X, train)), n_cal / train.size
        )
        self.calibration_cells_ = assign_cells(_missing(X_cal), self.cell_patterns_,
                                               self.cell_of_count_)
        if self.method in MDA_METHODS:
            self.calibration_rows_ = X_cal
            self.calibration_targets_ = y_cal
        return self

    def _scores(self, X, y) -> np.ndarray:
        """Conformity scores of rows ``(X, y)``, shape (n,)."""
        if self.method == "split":
            return np.abs(y - self.estimator_.predict(X))
        bounds = self._quantile_bounds(X)
        return np.maximum(bounds[:, 0] - y, y - bounds[:, 1])

    def _quantile_bounds(self, X) -> np.ndarray:
        """The base model's lowest and highest quantiles, shape (n, 2)."""
        quantiles = self.estimator_.predict_quantiles(X)
        return quantiles[:, [0, -1]]

    # ----------------------------------------------------------------- predict
    def predict(self, X) -> np.ndarray:
        """Point predictions of the base model (the median for a quantile head), shape (n,)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(check_features(self, X, reset=False, tables=True))

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
        check_is_fitted(self, "estimator_")
        alpha = _check_alpha(self.alpha if alpha is None else alpha,
                             self.calibration_scores_.shape[0], self._confidence())
        X = check_features(self, X, reset=False, tables=True)
        if self.method in MDA_METHODS:
            return _ordered(self._mda_intervals(X, alpha))
        if self.method == "cqr-mondrian":
            q = self.cell_margins(alpha)[assign_cells(_missing(X), self.cell_patterns_,
                                                      self.cell_of_count_)]
        else:
            q = self.calibration_quantile(alpha)
        if self.method == "split":
            center = self.estimator_.predict(X)
            return np.column_stack([center - q, center + q])
        bounds = self._quantile_bounds(X)
        return _ordered(np.column_stack([bounds[:, 0] - q, bounds[:, 1] + q]))

    def calibration_quantile(self, alpha=None) -> float:
        """``Q``: the margin ``"split"`` and ``"cqr"`` add to their bounds, the
        :func:`~neumiss.ranks.confident_rank`-th smallest calibration score (with
        ``calibration_confidence=None``, the ``ceil((1 - alpha)(n + 1))``-th)."""
        check_is_fitted(self, "estimator_")
        scores = self.calibration_scores_
        confidence = self._confidence()
        alpha = _check_alpha(self.alpha if alpha is None else alpha, scores.shape[0], confidence)
        return _conformal_quantile(scores, alpha, confidence)

    def cell_margins(self, alpha=None) -> np.ndarray:
        """``Q`` of each mask cell (``"cqr-mondrian"``), shape (n_cells,): the conformal
        quantile of the calibration scores of the cell (at ``calibration_confidence``).

        A cell with fewer rows than :func:`~neumiss.ranks.required_calibration_rows`
        takes the larger of all rows' quantile and its own largest score. Its own
        largest score is its quantile at the strictest ``alpha`` its rows allow
        (the rank is then its row count), so margins only grow as ``alpha``
        decreases and intervals are nested in ``alpha``; with the quantile of all
        rows alone, a cell could get a narrower interval at a stricter level."""
        check_is_fitted(self, "estimator_")
        confidence = self._confidence()
        alpha = _check_alpha(self.alpha if alpha is None else alpha,
                             self.calibration_scores_.shape[0], confidence)
        n_cells = int(max(self.cell_patterns_.shape[0], self.cell_of_count_.max() + 1))
        margins = np.full(n_cells, self.calibration_quantile(alpha))
        for cell in range(n_cells):
            scores = self.calibration_scores_[self.calibration_cells_ == cell]
            if scores.size >= required_calibration_rows(alpha, confidence):
                margins[cell] = _conformal_quantile(scores, alpha, confidence)
            elif scores.size:
                margins[cell] = max(margins[cell], float(scores.max()))
        return margins

    def _confidence(self) -> float | None:
        """``calibration_confidence`` where the method uses it, else None."""
        return None if self.method in MDA_METHODS else self.calibration_confidence

    def _mda_intervals(self, X, alpha: float) -> np.ndarray:
        """CP-MDA-Exact or -Nested (module docstring) for the rows of ``X`` (an array
        or a DataFrame, like the calibration rows).

        Rows are grouped by mask ``m``; with ``"cqr-mda-exact"``, a mask with
        enough calibration rows whose mask is inside ``m`` is calibrated on
        them (re-masked with ``m``), the others by the nested rule.
        """
        mask_cal = _missing(self.calibration_rows_)
        patterns, inverse = group_patterns(_missing(X))
        out = np.empty((inverse.shape[0], 2))
        for j, pattern in enumerate(patterns):
            rows = np.flatnonzero(inverse == j)
            if self.method == "cqr-mda-exact":
                inside = np.flatnonzero(~(mask_cal & ~pattern).any(axis=1))
                if inside.size >= required_calibration_rows(alpha):
                    out[rows] = self._exact_rows(_rows(X, rows), pattern, inside, alpha)
                    continue
            out[rows] = self._nested_rows(_rows(X, rows), pattern, alpha)
        return out

    def _exact_rows(self, X, pattern, inside, alpha) -> np.ndarray:
        """CQR on the calibration rows ``inside`` re-masked with ``pattern``, for rows ``X``
        of that mask: shape (n, 2)."""
        cal = _rows(self.calibration_rows_, inside)
        y_cal = self.calibration_targets_[inside]
        cal_bounds = self._quantile_bounds(_remask(cal, np.broadcast_to(pattern, cal.shape)))
        q = _conformal_quantile(np.maximum(cal_bounds[:, 0] - y_cal, y_cal - cal_bounds[:, 1]),
                                alpha)
        bounds = self._quantile_bounds(X)
        return np.column_stack([bounds[:, 0] - q, bounds[:, 1] + q])

    def _nested_rows(self, X, pattern, alpha) -> np.ndarray:
        """CP-MDA-Nested for rows ``X`` of mask ``pattern``: the calibration rows are
        scored once under ``pattern ∪ m_k``, the rows predicted once per distinct
        augmented mask. Shape (n, 2)."""
        X_cal, y_cal = self.calibration_rows_, self.calibration_targets_
        n_cal, n = y_cal.shape[0], X.shape[0]
        rank_low = lower_rank(n_cal, alpha)  # >= 1 by _check_alpha
        rank_high = upper_rank(n_cal, alpha)
        out = np.empty((n, 2))
        union = _missing(X_cal) | pattern
        cal_bounds = self._quantile_bounds(_remask(X_cal, union))
        scores = np.maximum(cal_bounds[:, 0] - y_cal, y_cal - cal_bounds[:, 1])
        augmented, which = group_patterns(union)
        n_aug = augmented.shape[0]
        step = max(1, _PAIRS_PER_CHUNK // max(n_cal, n_aug))
        for start in range(0, n, step):
            chunk = np.arange(start, min(n, start + step))
            repeated = _rows(X, np.repeat(chunk, n_aug))
            remasked = _remask(repeated, np.tile(augmented, (chunk.size, 1)))
            bounds = self._quantile_bounds(remasked).reshape(chunk.size, n_aug, 2)
            lower = bounds[:, which, 0] - scores
            upper = bounds[:, which, 1] + scores
            out[chunk, 0] = np.partition(lower, rank_low - 1, axis=1)[:, rank_low - 1]
            out[chunk, 1] = np.partition(upper, rank_high - 1, axis=1)[:, rank_high - 1]
        return out

    # ------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the fitted model (base model, calibration scores, and for
        the ``"cqr-mda-*"`` methods the calibration rows: mind that the file then holds
        data) to ``path``; :func:`neumiss.load` reads it."""
        check_is_fitted(self, "estimator_")
        save_estimator(self, path)

    def to_onnx(self, path=None, **kwargs):
        """Export to ONNX with outputs ``y``, ``lower`` and ``upper`` (at the fit-time
        ``alpha``); see :func:`neumiss.onnx_intervals.export_interval_onnx`, and mind
        that the ``"cqr-mda-*"`` methods embed the calibration rows in the file."""
        from ._onnx import export_interval_onnx  # onnx is loaded only when exporting

        return export_interval_onnx(self, path, **kwargs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _conformal_quantile(scores: np.ndarray, alpha: float, confidence: float | None = None) -> float:
    """The :func:`~neumiss.ranks.confident_rank`-th smallest of ``n`` scores (n large
    enough): with ``confidence=None``, the ``ceil((1 - alpha)(n + 1))``-th."""
    rank = confident_rank(scores.size, alpha, confidence)
    return float(np.partition(scores, rank - 1)[rank - 1])


def _ordered(bounds: np.ndarray) -> np.ndarray:
    """Intervals (n, 2) with an empty one (lower > upper) replaced by its midpoint:
    ``[min(lower, mid), max(upper, mid)]``, as the ONNX graph computes it."""
    mid = bounds.mean(axis=1)
    return np.column_stack([np.minimum(bounds[:, 0], mid), np.maximum(bounds[:, 1], mid)])


def _rows(X, index: np.ndarray):
    """Rows ``index`` of an array or DataFrame."""
    return X.iloc[index] if isinstance(X, pd.DataFrame) else X[index]


def _remask(X, mask: np.ndarray):
    """``X`` (array or DataFrame) with the entries of ``mask`` (bool, its shape) made
    missing: NaN, or the column's missing value (a categorical column's whole group
    is then missing for the estimator)."""
    if isinstance(X, pd.DataFrame):
        return X.mask(mask)
    return np.where(mask, np.nan, X)
