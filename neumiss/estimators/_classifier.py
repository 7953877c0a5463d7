"""The scikit-learn classifier built on :class:`~neumiss.network.NeuMissNetwork`:
:class:`NeuMissClassifier` (binary or multiclass; :func:`neumiss.load` reads it back),
and the weights of its classes (``class_weight``).

Its fitting machinery is :class:`neumiss.estimators._base.BaseNeuMiss`, shared with
:class:`~neumiss.estimators.NeuMissRegressor`.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from ..checks import AnyOf, InstanceOf, NoneValue, Options, check_class_labels
from ..network import BinaryLogLoss, MultinomialLogLoss
from ._base import DEFAULTS, BaseNeuMiss, parameters_of


class NeuMissClassifier(ClassifierMixin, BaseNeuMiss):
    """NeuMiss network classifier (binary or multiclass) with missing values in X.

    Same network and parameters as :class:`NeuMissRegressor` (but ``log_target``); the
    head outputs one logit (binary, logistic loss) or one per class (softmax
    cross-entropy). ``history_["val_score"]`` is minus the validation log-loss.

    Parameters
    ----------
    calibration : {"temperature", "none"}, default="temperature"
        ``"temperature"``: after the search, the logits of every member are divided by
        one temperature ``T`` fitted by minimising the log loss on the validation rows
        (temperature scaling, Guo et al. 2017: out of fold on small tables, each row
        scored by the member that held it out; else the held-out rows or
        ``validation_data``), so that the probabilities are not overconfident where the
        training rows are few. A single network keeps its ranking (ROC AUC) and every
        predicted class; an ensemble (averaged probabilities) keeps them but where its
        members disagree. ``1 / T`` is folded into the heads' output layers: ``predict_proba``,
        ONNX and R compute the calibrated probabilities alike. Without validation rows
        (``validation_fraction=0``) ``T`` is 1. ``"none"`` keeps the trained logits.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight``, in every loss of the fit
        (training, validation, the linear start, the temperature): a dict maps class
        labels to non-negative weights (classes not in it weigh 1); ``"balanced"`` weighs
        each class ``n_samples / (n_classes * count)`` (scikit-learn's
        ``compute_class_weight``), on the rows of ``fit``. As in scikit-learn, the
        probabilities are then those of the reweighted classes: a class weighted up is
        predicted more often and its probabilities are too high for the original
        frequencies (use it to trade precision for recall, not for calibrated
        probabilities). Fits of rows in memory only (``fit``), not streams, Dask or
        Spark.
    other parameters
        As :class:`NeuMissRegressor`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    temperature_ : float
        The temperature ``T`` the logits were divided by (1: not calibrated); with
        ``calibration="none"`` the attribute is absent.
    class_weight_ : ndarray of shape (n_classes,)
        The weight of each class of ``classes_`` (all 1 without ``class_weight``).
    calibration_result_ : dict or None
        ``temperature``, and the validation log loss before (``val_loss_before``) and
        after (``val_loss``) it; None without validation rows or calibration.
    start_C_ : float
        The inverse penalty (scikit-learn's ``C``) of the logistic regression the kept
        heads' linear part started from: chosen on the held-out rows when a binary
        classifier validates out of fold (half-decade steps from 1), else 1.
    plus those of :class:`NeuMissRegressor` except ``y_mean_``, ``y_scale_`` and
    ``log_target_``.
    """

    _y_numeric = False
    _score_metric = ("log loss", -1.0)

    _parameter_constraints = {
        **BaseNeuMiss._parameter_constraints,
        "calibration": Options("temperature", "none"),
        "class_weight": AnyOf(NoneValue(), Options("balanced"),
                              InstanceOf(dict, "a dict of class labels to weights")),
    }

    def __init__(
        self,
        depth=DEFAULTS["depth"],
        *,
        mlp_depth=DEFAULTS["mlp_depth"],
        mlp_width=DEFAULTS["mlp_width"],
        weight_sharing=DEFAULTS["weight_sharing"],
        residual=DEFAULTS["residual"],
        mask_skip=DEFAULTS["mask_skip"],
        spline=DEFAULTS["spline"],
        compress_tails=DEFAULTS["compress_tails"],
        integer_levels=DEFAULTS["integer_levels"],
        ensemble_size=DEFAULTS["ensemble_size"],
        optimizer=DEFAULTS["optimizer"],
        learning_rate=DEFAULTS["learning_rate"],
        batch_size=DEFAULTS["batch_size"],
        max_epochs=DEFAULTS["max_epochs"],
        validation_fraction=DEFAULTS["validation_fraction"],
        patience=DEFAULTS["patience"],
        lr_patience=DEFAULTS["lr_patience"],
        tol=DEFAULTS["tol"],
        weight_decay=DEFAULTS["weight_decay"],
        random_state=DEFAULTS["random_state"],
        device=DEFAULTS["device"],
        n_jobs=DEFAULTS["n_jobs"],
        verbose=DEFAULTS["verbose"],
        callbacks=DEFAULTS["callbacks"],
        calibration="temperature",
        class_weight=None,
    ):
        super().__init__(**parameters_of(BaseNeuMiss, locals()))
        self.calibration = calibration
        self.class_weight = class_weight

    def _encode_target(self, y):
        check_class_labels(y)
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y; got only one "
                f"class: {self.classes_[0]!r}"
            )
        self.class_weight_ = self._class_weights(encoded)
        return encoded

    def _class_weights(self, encoded) -> np.ndarray:
        """The weight of each class of ``classes_`` that ``class_weight`` gives, for the
        encoded targets ``encoded`` (n,): float64 (n_classes,)."""
        n_classes = len(self.classes_)
        if self.class_weight is None:
            return np.ones(n_classes)
        if isinstance(self.class_weight, str):  # "balanced", checked with the parameters
            return compute_class_weight("balanced", classes=np.arange(n_classes), y=encoded)
        labels = self.classes_.tolist()
        unknown = [key for key in self.class_weight if key not in labels]
        if unknown:
            raise ValueError(f"class_weight has labels that are not classes of y: "
                             f"{unknown!r} (the classes: {labels!r})")
        weights = np.ones(n_classes)
        for key, value in self.class_weight.items():
            if not (isinstance(value, Real) and not isinstance(value, bool)
                    and np.isfinite(value) and value >= 0):
                raise ValueError(f"class_weight[{key!r}] must be a finite number >= 0, "
                                 f"got {value!r}")
            weights[labels.index(key)] = float(value)
        return weights

    def _case_weights(self, encoded, sample_weight):
        if self.class_weight is None:
            return sample_weight
        weights = self.class_weight_[encoded]
        return weights if sample_weight is None else weights * sample_weight

    def _encode_validation_target(self, y):
        unknown = np.setdiff1d(y, self.classes_)
        if unknown.size:
            raise ValueError(
                f"validation_data: y_val has labels not seen in y: {unknown.tolist()!r}"
            )
        return np.searchsorted(self.classes_, y)

    def _get_loss(self):
        n_classes = len(self.classes_)
        return BinaryLogLoss() if n_classes == 2 else MultinomialLogLoss(n_classes)

    def decision_function(self, X):
        """Logits: shape (n_samples,) for two classes, (n_samples, n_classes) otherwise."""
        out = self._forward(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities, ndarray of shape (n_samples, n_classes), rows sum to 1."""
        raw = self._forward(X)  # checks that the estimator is fitted first
        return self._get_loss().inverse_link(raw)

    def predict(self, X):
        """Most probable class of each row, ndarray of shape (n_samples,)."""
        out = self._forward(X)
        index = (out[:, 0] > 0).astype(int) if out.shape[1] == 1 else out.argmax(axis=1)
        return self.classes_[index]
