"""MAPIE's LAC sets in the classification runs of the interval benchmark (optional).

MAPIE (``pip install 'neumiss[mapie]'``, its 1.x API) is the reference a user would
try for prediction sets; the issue's target is a mean set size no larger than its LAC
on the same base model. Both methods here are split conformal with MAPIE's
``SplitConformalClassifier`` (``conformity_score="lac"``, ``confidence_level = 1 -
alpha``, ``prefit=True``), calibrated on the **same calibration rows** as the run's split
:class:`~neumiss.intervals.ConformalClassifier` (:func:`~neumiss.intervals.calibration_split`
with its seed; below ``CROSS_ROWS`` rows, where the run's sets are CV+, the split fit of
the same seed):

* ``"mapie-lac"``: over the very NeuMiss classifier ``ConformalClassifier`` fitted
  (its ``estimator_``), so that only the calibration differs;
* ``"mapie-lac-mice"``: over the benchmark's imputation + logistic baseline
  (``mice_linear``: iterative imputation, standardization, logistic regression),
  fitted on the same training rows: MAPIE as a user without NeuMiss would run it.

Where MAPIE is not installed the runs leave these methods out
(:func:`mapie_unavailable` says why).
"""

from __future__ import annotations

import importlib.util

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

#: The MAPIE methods of the classification runs.
MAPIE_METHODS = ("mapie-lac", "mapie-lac-mice")


def mapie_unavailable() -> str | None:
    """Why the MAPIE methods cannot run here (MAPIE is not installed), or None."""
    if importlib.util.find_spec("mapie") is None:
        return "mapie not installed (pip install 'neumiss[mapie]' installs it)"
    return None


class Fitted(ClassifierMixin, BaseEstimator):
    """A fitted classifier as MAPIE's prefit mode is given it: its classes and
    probabilities, nothing else. MAPIE probes a model holding ``n_features_in_`` with an
    array of zeros, which a NeuMiss model fitted on a DataFrame with categories refuses
    (it asks for the DataFrame); this one holds no ``n_features_in_``."""

    def __init__(self, model):
        self.model = model

    @property
    def classes_(self) -> np.ndarray:
        """The model's class labels, the columns of :meth:`predict_proba`."""
        return self.model.classes_

    def predict_proba(self, X) -> np.ndarray:
        """The model's probabilities of ``X``, (n, n_classes)."""
        return self.model.predict_proba(X)

    def predict(self, X) -> np.ndarray:
        """The model's predicted labels of ``X``, (n,)."""
        return self.model.predict(X)


def lac_sets(estimator, X_cal, y_cal, X_test, alpha: float) -> np.ndarray:
    """MAPIE's split LAC sets over the fitted ``estimator``, calibrated on ``(X_cal,
    y_cal)``, for ``X_test`` at miscoverage ``alpha``: bool (n_test, n_classes), the
    columns in the order of ``estimator.classes_``."""
    from mapie.classification import SplitConformalClassifier

    mapie = SplitConformalClassifier(Fitted(estimator), confidence_level=1 - alpha,
                                     conformity_score="lac", prefit=True)
    return mapie.conformalize(X_cal, y_cal).predict_set(X_test)[1][:, :, 0]


def mapie_sets(model, X, y, X_test, seed: int, imputed=None) -> dict[str, np.ndarray]:
    """``{method: sets}`` of :data:`MAPIE_METHODS` for ``X_test``, bool (n_test,
    n_classes): ``model`` is a split :class:`~neumiss.intervals.ConformalClassifier`
    fitted on ``(X, y)`` (an array or a DataFrame) with ``random_state=seed`` (int),
    whose training and calibration rows, base model and ``alpha`` the MAPIE methods
    share. ``imputed``: the unfitted ``mice_linear`` model that takes ``X`` (None: the
    registry's, for numeric arrays; a table with categories needs them dummy-coded)."""
    from ...baselines import make_baseline
    from ...intervals import calibration_split, take_rows

    train, cal = calibration_split(len(y), model.calibration_fraction, seed)
    if imputed is None:
        imputed = make_baseline("mice_linear", "classification", random_state=seed)
    imputed.fit(take_rows(X, train), y[train])
    X_cal, y_cal = take_rows(X, cal), y[cal]
    return {
        "mapie-lac": lac_sets(model.estimator_, X_cal, y_cal, X_test, model.alpha),
        "mapie-lac-mice": lac_sets(imputed, X_cal, y_cal, X_test, model.alpha),
    }
