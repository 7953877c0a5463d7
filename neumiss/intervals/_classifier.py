"""Prediction sets for classifiers, valid for every missingness pattern.

:class:`ConformalClassifier` is :class:`~neumiss.intervals.ConformalRegressor`'s
design for classes: a base classifier fitted on part of the rows, the others held out
to calibrate a conformity score of its probabilities (LAC or APS,
:mod:`._sets`), on all calibration rows (``"lac"``, ``"aps"``: valid marginally) or
within the cells of masks (``"lac-mondrian"``, the default, and ``"aps-mondrian"``:
valid within each cell under any missingness mechanism), with the same cells, the same
``calibration_confidence`` and the same checks of ``alpha``. The set of a row holds the
classes that cannot be ruled out at level ``1 - alpha``.

On small tables a split leaves few calibration rows (46-84 on tables of 228-418 rows):
below ``CROSS_ROWS`` rows, ``cv="auto"`` (the default) calibrates by CV+ instead, every
row scored by a fold model that did not see it, and a class kept when fewer than
``ceil((1 - alpha)(n + 1))`` out-of-fold scores lie below its score under each row's fold
model (:mod:`._cross`, the regressor's design); ``summary()`` says which calibration a
fit used and which mask cells are calibrated on their own rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin

from ..checks import Options, check_class_labels
from ._cross import cross_sets
from ._methods import cell_margins
from ._sets import SET_METHODS
from ._split import PARAMETER_CONSTRAINTS, SplitConformal


class ConformalClassifier(ClassifierMixin, SplitConformal):
    """Prediction sets with a coverage guarantee, with missing values in X.

    Parameters
    ----------
    estimator : classifier or None, default=None
        The base model, cloned at ``fit``; it needs ``predict_proba``. None takes
        ``NeuMissClassifier()`` seeded from ``random_state``; a given estimator whose
        ``random_state`` is None is seeded from it too.
    method : {"lac", "aps", "lac-mondrian", "aps-mondrian"}, default="lac-mondrian"
        The conformity score (LAC: smallest sets on average, possibly empty; APS: sets
        that grow with the uncertainty of each row, never empty; :mod:`._sets`) and
        where it is calibrated: on all calibration rows (valid on average over rows),
        or ``"-mondrian"`` within the cells of masks
        (:func:`~neumiss.intervals.mask_cells`, the rule of ``ConformalRegressor``):
        valid within each cell, under any missingness mechanism.
    alpha : float in (0, 1), default=0.1
        Miscoverage: the set holds the true class with probability ``1 - alpha``.
    calibration_fraction : float in (0, 1), default=0.25
        Share of the rows held out to calibrate; the base model trains on the others.
    calibration_confidence : float in (0, 1) or None, default=0.75
        The probability, over the draw of the calibration rows, that the coverage
        (of a cell for the Mondrian methods) is at least ``1 - alpha``; None: on
        average over draws (:func:`~neumiss.intervals.confident_rank`). A split only.
    cv : "auto", int >= 2 or None, default="auto"
        Cross-conformal calibration (CV+, :mod:`._cross`) with this many folds, every
        row calibrating: for small tables, where a split leaves few calibration rows.
        ``"auto"``: 10 folds below ``CROSS_ROWS`` (500) rows, a split otherwise. None:
        always a split. It fits ``cv + 1`` base models (one on all rows); every class
        needs a row in the training rows of every fold.
    random_state : int, RandomState or None, default=None
        Seeds the split (or the folds), and the base model when it has no seed of its own.

    Attributes
    ----------
    estimator_ : the fitted base model.
    classes_ : ndarray of shape (n_classes,)
        The class labels, the columns of the sets.
    calibration_scores_ : ndarray of shape (n_calibration,)
        The score of each calibration row's own class; of every row, out of fold, for a
        cross-conformal fit.
    fold_estimators_, calibration_folds_ : for a cross-conformal fit only
        The base models fitted without each fold, and the fold of each row.
    cell_patterns_, cell_of_count_, calibration_cells_ : as ``ConformalRegressor``'s.
    n_features_in_, feature_names_in_ : as the estimators'.

    Notes
    -----
    Empty sets: LAC returns them (as MAPIE's LAC does) when no class reaches the
    threshold; they count as misses in the guarantee. APS never returns one.

    Examples
    --------
    >>> import neumiss
    >>> from neumiss.intervals import ConformalClassifier
    >>> X, y, _ = neumiss.simulation.make_regression(2000, 5, random_state=0)
    >>> labels = (y > 0).astype(int)
    >>> base = neumiss.NeuMissClassifier(ensemble_size=1, depth=2, max_epochs=5)
    >>> model = ConformalClassifier(base, random_state=0).fit(X, labels)
    >>> sets, sizes = model.predict_set(X[:3])
    >>> sets.shape, sizes.shape
    ((3, 2), (3,))
    """

    _methods = SET_METHODS
    _y_numeric = False
    _saved_attributes = (*SplitConformal._saved_attributes, "classes_")
    _predicts = "predict_set"
    _parameter_constraints = PARAMETER_CONSTRAINTS | {"method": Options(*SET_METHODS)}

    def __init__(
        self, estimator=None, *, method="lac-mondrian", alpha=0.1, calibration_fraction=0.25,
        calibration_confidence=0.75, cv="auto", random_state=None,
    ):
        self.estimator = estimator
        self.method = method
        self.alpha = alpha
        self.calibration_fraction = calibration_fraction
        self.calibration_confidence = calibration_confidence
        self.cv = cv
        self.random_state = random_state

    def _targets(self, y):
        check_class_labels(y)
        self.classes_ = np.unique(y)
        if self.classes_.shape[0] < 2:
            raise ValueError(f"ConformalClassifier needs at least 2 classes in y; got only "
                             f"{self.classes_[0].tolist()!r}")
        return y

    def _check_base(self, base, y_train, fold=None):
        missed = np.setdiff1d(self.classes_, y_train)
        if missed.size:
            where = (
                "the rows that train the base model (the others calibrate): give more rows of "
                "that class or lower calibration_fraction" if fold is None else
                f"the training rows of fold {fold} of the cross-conformal fit (cv={self.cv!r}: "
                f"all its rows fell in that fold): give more rows of that class, cv=None (a "
                f"split) or more folds")
            raise ValueError(
                f"ConformalClassifier: class {missed[0].tolist()!r} has no row among {where}")
        if not np.array_equal(np.asarray(base.classes_), self.classes_):
            raise ValueError(
                f"ConformalClassifier: the base model's classes_ {list(base.classes_)!r} are "
                f"not those of y {list(self.classes_)!r}"
            )

    def predict_proba(self, X) -> np.ndarray:
        """The base model's class probabilities, shape (n_samples, n_classes)."""
        return self.estimator_.predict_proba(self._features(X))

    def predict_set(self, X, alpha=None) -> tuple[np.ndarray, np.ndarray]:
        """Prediction sets at level ``1 - alpha``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features), NaN = missing
        alpha : float in (0, 1) or None
            None: the fit-time ``alpha``; another value recalibrates from the stored
            scores. Sets are nested: a smaller ``alpha`` never drops a class (a
            cross-conformal Mondrian fit: within either regime of the row's cell, its own
            rows or all rows, which it switches to when ``alpha`` asks for more rows than
            the cell holds; :mod:`._cross`).

        Returns
        -------
        sets : ndarray of bool of shape (n_samples, n_classes)
            ``sets[i, k]``: class ``classes_[k]`` cannot be ruled out for row ``i``.
            A LAC set may be empty (class docstring), an APS set never is.
        sizes : ndarray of int of shape (n_samples,)
            The number of classes in each set.
        """
        if self.cross_conformal_:
            method, calibration, alpha = self._cross_calibrated(alpha)
            sets = cross_sets(method, calibration, self._features(X), alpha)
        else:
            method, calibration, alpha, confidence = self._calibrated(alpha)
            sets = method.sets(calibration, self._features(X), alpha, confidence)
        return sets, sets.sum(axis=1)

    def cell_margins(self, alpha=None) -> np.ndarray:
        """``Q`` of each mask cell (the Mondrian methods), shape (n_cells,), as
        ``ConformalRegressor.cell_margins``; a split fit only (a cross-conformal fit
        has no single margin)."""
        _, calibration, alpha, confidence = self._calibrated(alpha)
        return cell_margins(calibration, alpha, confidence)

    def to_onnx(self, path=None, **kwargs):
        """Export to ONNX with outputs ``label``, ``probabilities``, ``set`` and
        ``set_size`` (at the fit-time ``alpha``); see :func:`~._onnx.export_set_onnx`."""
        from ._onnx import export_set_onnx  # onnx is loaded only when exporting

        return export_set_onnx(self, path, **kwargs)
