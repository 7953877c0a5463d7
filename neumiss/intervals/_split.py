"""What the conformal estimators share: a base model fitted on part of the rows, the
others held out to calibrate, and the mask cells of their Mondrian methods.

:class:`SplitConformal` is the base of :class:`~neumiss.intervals.ConformalRegressor`
(intervals) and :class:`~neumiss.intervals.ConformalClassifier` (prediction sets).
A subclass names its methods (``_methods``: name -> method object, each with
``needs``, ``keeps_rows``, ``confident``, ``default_estimator`` and ``scores``, as
:class:`~._methods.IntervalMethod`) and how its targets are read (:meth:`_targets`);
the split, the calibration scores, the cells, the checks of ``alpha`` and the choice of
a cross-conformal (CV+) fit (``cv``, :mod:`._cross`) are here.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, clone
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
from ..estimators import save_estimator
from ._cells import assign_cells, mask_cells
from ._cross import CROSS_ROWS, FOLDS, CrossCalibration, cross_fit
from ._methods import Calibration, input_mask, take_rows
from ._ranks import required_calibration_rows

#: Parameters both conformal estimators take, with their constraints (``method`` is
#: each estimator's own).
PARAMETER_CONSTRAINTS = {
    "estimator": AnyOf(NoneValue(), InstanceOf(BaseEstimator, "a scikit-learn estimator")),
    "alpha": Real(0, 1, closed="neither"),
    "calibration_fraction": Real(0, 1, closed="neither"),
    "calibration_confidence": AnyOf(NoneValue(), Real(0, 1, closed="neither")),
    "cv": AnyOf(NoneValue(), Options("auto"), Integer(2)),
    "random_state": AnyOf(
        NoneValue(), Integer(0, 2**32 - 1), InstanceOf(np.random.RandomState, "a RandomState")
    ),
}


def check_alpha(alpha, n_calibration: int | None = None,
                confidence: float | None = None) -> float:
    """``alpha`` as a float in (0, 1); with ``n_calibration``, also enough rows for it
    (at ``confidence``, see :func:`~neumiss.intervals.required_calibration_rows`)."""
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


def calibration_split(n: int, calibration_fraction: float,
                      random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """The rows a split fit of ``n`` rows trains on and those it calibrates on (sorted
    indices, ``ceil(calibration_fraction * n)`` calibrating), drawn by the next permutation
    of ``random_state`` (int, RandomState or None). A split ``fit`` draws them first from
    its ``random_state``: the same seed gives the fit's rows (to calibrate another method
    on the same rows, as the interval benchmark does)."""
    n_cal = int(math.ceil(calibration_fraction * n))
    order = check_random_state(random_state).permutation(n)
    return np.sort(order[n_cal:]), np.sort(order[:n_cal])


class SplitConformal(BaseEstimator):
    """Split conformal prediction: the fit and calibration both estimators share
    (module docstring). Not used on its own."""

    #: The methods, by name (the subclass's).
    _methods: dict = {}
    #: Fitted attributes a model file must hold (:func:`neumiss.load`).
    _saved_attributes = ("estimator_", "calibration_scores_", "n_features_in_")
    #: The method that gives a cross-conformal fit's intervals or sets (the subclass's).
    _predicts = ""

    def _method(self):
        """The method object ``method`` names."""
        check_params(type(self).__name__, {"method": self.method}, self._parameter_constraints)
        return self._methods[self.method]

    def _confidence(self, method) -> float | None:
        """``calibration_confidence`` where ``method`` uses it, else None."""
        return self.calibration_confidence if method.confident else None

    def _base_estimator(self, seed: int):
        """A clone of ``estimator`` (checked for what the method needs; ``seed`` as its
        ``random_state`` when that is None), or the default seeded with ``seed``."""
        method = self._method()
        if self.estimator is None:
            return method.default_estimator(self.alpha, seed)
        if not callable(getattr(self.estimator, method.needs, None)):
            usable = [name for name, other in self._methods.items()
                      if callable(getattr(self.estimator, other.needs, None))]
            raise ValueError(
                f"{type(self).__name__}: method={self.method!r} needs an estimator with a "
                f"{method.needs}() method (e.g. {method.example}), got "
                f"{type(self.estimator).__name__}"
                + (f"; with it, use method={' or '.join(map(repr, usable))}" if usable else "")
            )
        base = clone(self.estimator)
        if base.get_params().get("random_state", 0) is None:  # unseeded: seeded from ours
            base.set_params(random_state=seed)
        return base

    def _targets(self, y) -> np.ndarray:
        """The checked targets ``y`` as the method scores them (fit-time attributes may
        be set, e.g. ``classes_``)."""
        return y

    def _check_base(self, base, y_train, fold: int | None = None) -> None:
        """Refuse a base model fitted on ``y_train`` that the method cannot use (``fold``:
        the fold a cross-conformal fit's model was fitted without, None for a split)."""

    def _folds(self, n: int, method) -> int | None:
        """The number of folds of a cross-conformal fit of ``n`` rows (``cv``: ``"auto"``
        gives :data:`~._cross.FOLDS` below :data:`~._cross.CROSS_ROWS` rows), or None for
        a split."""
        name = type(self).__name__
        if self.cv is None or (self.cv == "auto" and (n >= CROSS_ROWS or method.keeps_rows)):
            return None
        if method.keeps_rows:
            raise ValueError(f"{name}: method={method.name!r} has no cross-conformal mode "
                             "(cv): give cv=None or another method")
        folds = FOLDS if self.cv == "auto" else int(self.cv)
        if folds > n:
            raise ValueError(f"{name}: cv={self.cv} folds need at least as many rows, got {n}")
        return folds

    def fit(self, X, y):
        """Fit the base model on ``1 - calibration_fraction`` of the rows, calibrate on the
        rest; or, for a cross-conformal fit (``cv``), fit one base model without each fold
        and one on all rows, every row calibrating out of fold.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features), NaN = missing
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        X, y = check_training_data(self, X, y, y_numeric=self._y_numeric, tables=True)
        y = self._targets(y)
        method = self._method()
        n = y.shape[0]
        rng = check_random_state(self.random_state)
        n_folds = self._folds(n, method)
        for name in ("fold_estimators_", "calibration_folds_", "calibration_rows_",
                     "calibration_targets_"):  # of an earlier fit
            self.__dict__.pop(name, None)
        if n_folds is not None:
            self._fit_cross(X, y, method, n_folds, rng)
            return self
        train, cal = calibration_split(n, self.calibration_fraction, rng)
        n_cal = cal.size
        check_alpha(self.alpha, n_cal, self._confidence(method))
        if n - n_cal < 2:
            raise ValueError(
                f"{type(self).__name__}: {n} rows leave {n - n_cal} to train the base model "
                f"with calibration_fraction={self.calibration_fraction}; give more rows"
            )
        base = self._base_estimator(int(rng.randint(np.iinfo(np.int32).max)))
        self.estimator_ = base.fit(take_rows(X, train), y[train])
        self._check_base(self.estimator_, y[train])
        X_cal, y_cal = take_rows(X, cal), y[cal]
        self.calibration_scores_ = method.scores(self.estimator_, X_cal, y_cal)
        self.cell_patterns_, self.cell_of_count_ = mask_cells(
            input_mask(self.estimator_, take_rows(X, train)), n_cal / train.size
        )
        self.calibration_cells_ = assign_cells(input_mask(self.estimator_, X_cal),
                                               self.cell_patterns_, self.cell_of_count_)
        if method.keeps_rows:
            self.calibration_rows_ = X_cal
            self.calibration_targets_ = y_cal
        return self

    def _fit_cross(self, X, y, method, n_folds: int, rng) -> None:
        """Cross-conformal fit (:mod:`._cross`): ``n_folds`` base models each scoring the
        fold it did not see, every row calibrating; ``estimator_`` is fitted on all rows
        (``predict``, and the model whose residuals the intervals stand for)."""
        check_alpha(self.alpha, y.shape[0])
        models, self.calibration_scores_, self.calibration_folds_ = cross_fit(
            method, self._base_estimator, X, y, n_folds, rng, self._check_base)
        self.fold_estimators_ = models
        self.estimator_ = self._base_estimator(int(rng.randint(np.iinfo(np.int32).max))).fit(X, y)
        self._check_base(self.estimator_, y)
        mask = input_mask(self.estimator_, X)
        self.cell_patterns_, self.cell_of_count_ = mask_cells(mask, 1.0)
        self.calibration_cells_ = assign_cells(mask, self.cell_patterns_, self.cell_of_count_)

    def _calibrated(self, alpha=None) -> tuple[object, Calibration, float, float | None]:
        """The method, the fitted calibration, ``alpha`` (the fit-time one for None)
        checked against the calibration rows, and the confidence the method uses."""
        check_is_fitted(self, "estimator_")
        if self.cross_conformal_:
            raise ValueError(f"{type(self).__name__}: a cross-conformal fit (cv) has no single "
                             f"margin; {self._predicts} gives its CV+ output")
        method = self._method()
        confidence = self._confidence(method)
        alpha = check_alpha(self.alpha if alpha is None else alpha,
                            self.calibration_scores_.shape[0], confidence)
        calibration = Calibration(
            self.estimator_, self.calibration_scores_, self.calibration_cells_,
            self.cell_patterns_, self.cell_of_count_, getattr(self, "calibration_rows_", None),
            getattr(self, "calibration_targets_", None),
        )
        return method, calibration, alpha, confidence

    def _cross_calibrated(self, alpha=None) -> tuple[object, CrossCalibration, float]:
        """The method, the cross-conformal calibration and ``alpha`` (the fit-time one for
        None) checked against the number of rows (the usual ranks: no confidence)."""
        method = self._method()
        if method.keeps_rows:
            raise ValueError(f"{type(self).__name__}: method={method.name!r} has no "
                             "cross-conformal mode: refit with cv=None")
        alpha = check_alpha(self.alpha if alpha is None else alpha,
                            self.calibration_scores_.shape[0])
        return method, CrossCalibration(
            self.estimator_, self.fold_estimators_, self.calibration_scores_,
            self.calibration_folds_, self.calibration_cells_, self.cell_patterns_,
            self.cell_of_count_), alpha

    @property
    def cross_conformal_(self) -> bool:
        """Whether the fit calibrated by CV+ (every row) rather than a split."""
        check_is_fitted(self, "estimator_")
        return hasattr(self, "fold_estimators_")

    def summary(self) -> str:
        """How the intervals or sets are calibrated, in a few lines (R's ``print`` and
        ``summary``): the method, a split or cross-conformal calibration, and the mask
        cells calibrated on their own rows (the others on all rows: marginal)."""
        check_is_fitted(self, "estimator_")
        method = self._method()
        n = self.calibration_scores_.shape[0]
        lines = [f"{type(self).__name__}, method {method.name!r}, alpha {self.alpha:g}"]
        if self.cross_conformal_:
            lines.append(f"calibration: cross-conformal (CV+, {len(self.fold_estimators_)} "
                         f"folds), every one of the {n} rows calibrating")
        else:
            lines.append(f"calibration: split, {n} held-out rows")
        if method.mondrian:
            sizes = np.bincount(self.calibration_cells_, minlength=len(self.cell_of_count_))
            sizes = sizes[:int(max(self.cell_patterns_.shape[0], self.cell_of_count_.max() + 1))]
            needed = required_calibration_rows(
                self.alpha, None if self.cross_conformal_ else self._confidence(method))
            own = int((sizes >= needed).sum())
            lines.append(
                f"validity: per missingness pattern cell for {own} of {sizes.size} cells "
                f"({int(sizes[sizes >= needed].sum())} rows), marginal for the others"
                if own else "validity: marginal (no mask cell holds enough rows)")
        else:
            lines.append("validity: marginal (on average over rows)")
        return "\n".join(lines)

    def _features(self, X):
        """``X`` checked against the fit's columns."""
        check_is_fitted(self, "estimator_")
        return check_features(self, X, reset=False, tables=True)

    def predict(self, X) -> np.ndarray:
        """Predictions of the base model, shape (n,) (the median for a quantile head)."""
        return self.estimator_.predict(self._features(X))

    def save(self, path) -> None:
        """Write the fitted model (base model, calibration scores, and for the methods
        that keep them the calibration rows: mind that the file then holds data) to
        ``path``; :func:`neumiss.load` reads it."""
        check_is_fitted(self, "estimator_")
        save_estimator(self, path)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
