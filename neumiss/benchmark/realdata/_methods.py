"""The methods compared on real data: each builds an unfitted estimator for a task's kind.

Every method takes the task's DataFrame as it is (numeric columns with NaN,
``category`` columns for factors, ``boolean`` and ``Int64`` with pd.NA). The
baselines are the models of the same names in the registry of
:mod:`neumiss.baselines`; those that take numbers only get the table dummy-coded
first (:class:`DummyEncoder`):

* ``hgb``: HistGradientBoosting with its defaults, NaN handled natively,
  categories from the dtype.
* ``mean_mask_linear``: numeric columns imputed by their mean plus a missing
  indicator per column with missing values, categories one-hot with missing
  as its own category, all standardized, then ``RidgeCV`` / ``LogisticRegression``
  (default C).
* ``mice_linear``: categories one-hot, a missing category making its whole
  group missing (first category dropped: dummy coding), ``IterativeImputer``
  over numeric and one-hot columns, then ``LinearRegression`` / ``LogisticRegression``.
* ``em``: :class:`neumiss.baselines.EMRegressor` on the same dummy-coded table
  (regression only).
* ``catboost``, ``lightgbm``: the anchors a user would try next, with their defaults,
  missing values and categories native, one thread (skipped, with the reason, where
  their optional packages are not installed).
* ``realmlp``, ``tabm``: the tabular networks of pytabkit with its tuned defaults
  (RealMLP-TD, TabM-D) behind median imputation and missing indicators, categories
  as pytabkit encodes them, on the CPU with one thread (optional as the two above).
* ``neumiss``: ``NeuMissRegressor()`` / ``NeuMissClassifier()`` with the
  package's defaults, given the DataFrame itself.
* ``neumiss_mlp``: depth and weight sharing chosen on validation, residual, 2
  hidden layers, one network trained with patience 8 and ``tol=0``
  (:data:`NEUMISS_MLP`).
* More NeuMiss configurations by label: :func:`neumiss_method`.

Estimators are imported when built, so that listing methods imports no torch.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

from ._tasks import KINDS

#: NeuMiss with a two-layer MLP head, one network: the defaults without the ensemble
#: (results/realdata/README.md, "Protocol and methods").
NEUMISS_MLP = {
    "depth": "auto", "weight_sharing": "auto", "residual": True, "mlp_depth": 2,
    "ensemble_size": 1, "patience": 8, "lr_patience": 2, "tol": 0.0,
}
#: The registry's task of each kind of real-data task.
_TASK = {"regression": "regression", "binary": "classification"}
LABEL_PATTERN = re.compile(r"[A-Za-z0-9_.+-]+")


@dataclass(frozen=True)
class RealMethod:
    """A compared method.

    ``build(kind, random_state)`` returns an unfitted estimator for a task of
    ``kind`` (module-level functions or partials of them, so that child
    processes can receive it). ``config`` (JSON-able) is recorded with every
    run: a label run again must have the same config. ``torch``: whether its
    process should warm torch up before the first timed fit.
    """

    name: str
    build: Callable[[str, int], object]
    kinds: tuple[str, ...] = KINDS
    config: Mapping = field(default_factory=dict)
    torch: bool = False
    baseline: str | None = None

    def unavailable(self) -> str | None:
        """Why this method cannot run here (an optional package is missing), or None."""
        if self.baseline is None:
            return None
        from ...baselines import BASELINES

        return BASELINES[self.baseline].unavailable()

    def config_json(self) -> str:
        """``config`` as the JSON text stored in ``runs.csv``."""
        return json.dumps(self.config, sort_keys=True)


class DummyEncoder(TransformerMixin, BaseEstimator):
    """Numeric columns as they are, categories dummy-coded with missing groups.

    Wraps :class:`neumiss.tables.TableEncoder` (one column per category seen
    at fit, a missing category making its whole group NaN) and drops the first
    column of each category group, so that the columns are not collinear.
    Output: float64 of shape (n_samples, n_columns), NaN = missing.
    """

    def fit(self, X, y=None):
        from ...tables import TableEncoder

        self.encoder_ = TableEncoder().fit(X)
        keep, start = [], 0
        for column in self.encoder_.columns_:
            first = 1 if column.kind == "categorical" else 0
            keep += range(start + first, start + column.width)
            start += column.width
        self.columns_ = np.asarray(keep, dtype=np.int64)
        return self

    def transform(self, X):
        return self.encoder_.transform(X)[:, self.columns_]


def _baseline(name: str, kind: str, random_state: int):
    """The registry's baseline ``name`` for a task of ``kind``; it takes the table as it is."""
    from ...baselines import make_baseline

    return make_baseline(name, _TASK[kind], random_state)


def _dummy_coded(name: str, kind: str, random_state: int):
    """The registry's baseline ``name`` after a :class:`DummyEncoder`, as one flat pipeline
    (its last step is the model, whose iterations :func:`fitted_info` reads)."""
    from sklearn.pipeline import Pipeline, make_pipeline

    model = _baseline(name, kind, random_state)
    steps = [step for _, step in model.steps] if isinstance(model, Pipeline) else [model]
    return make_pipeline(DummyEncoder(), *steps)


def _baseline_method(name: str, build: Callable = _baseline, torch: bool = False) -> RealMethod:
    """The real-data method of the registry's baseline ``name``, for the kinds it takes
    (``torch``: a torch model, whose process warms torch up before the first timed fit)."""
    from ...baselines import BASELINES

    kinds = tuple(k for k in KINDS if _TASK[k] in BASELINES[name].tasks)
    return RealMethod(name, functools.partial(build, name), kinds=kinds, torch=torch,
                      baseline=name)


def _neumiss(params: Mapping, kind: str, random_state: int):
    from ...estimators import NeuMissClassifier, NeuMissRegressor

    model = NeuMissRegressor if kind == "regression" else NeuMissClassifier
    return model(**params, random_state=random_state)


def neumiss_method(name: str, params: Mapping) -> RealMethod:
    """A NeuMiss method with estimator ``params`` (``random_state`` is set per fold).

    Raises ``ValueError`` for a label that is not made of letters, digits and
    ``_.+-``, or for ``random_state`` in ``params``. The parameters themselves
    are checked by :func:`check_neumiss_params`.
    """
    if not LABEL_PATTERN.fullmatch(name):
        raise ValueError(f"method label {name!r}: use letters, digits and _.+- only")
    if "random_state" in params:
        raise ValueError(f"method {name!r}: random_state is set per fold, leave it out")
    return RealMethod(name, functools.partial(_neumiss, dict(params)), config=dict(params),
                      torch=True)


def check_neumiss_params(method: RealMethod) -> None:
    """Build ``method`` for both kinds and check its parameters (imports torch).

    Raises ``ValueError`` naming the method and the bad parameter.
    """
    from ...checks import check_params

    for kind in method.kinds:
        try:
            estimator = method.build(kind, 0)
            check_params(type(estimator).__name__, estimator.get_params(deep=False),
                         estimator._parameter_constraints)
        except (TypeError, ValueError) as error:
            raise ValueError(f"method {method.name!r}: {error}") from None


#: Built-in methods by command-line name, in the order of tables.
METHODS = {method.name: method for method in (
    _baseline_method("hgb"),
    _baseline_method("mean_mask_linear"),
    _baseline_method("mice_linear", _dummy_coded),
    _baseline_method("em", _dummy_coded),
    _baseline_method("catboost"),
    _baseline_method("lightgbm"),
    _baseline_method("realmlp", torch=True),
    _baseline_method("tabm", torch=True),
    neumiss_method("neumiss", {}),
    neumiss_method("neumiss_mlp", NEUMISS_MLP),
)}
DEFAULT_METHODS = tuple(METHODS)


def fitted_info(model) -> dict:
    """What a fitted model chose or ran, for the ``params`` column: iterations,
    convergence, NeuMiss depth, weights, head (and the MLP heads' weight in their blend
    with the linear heads), epochs and indicator columns (those it has)."""
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    info = {}
    for attribute, key in (("n_iter_", "n_iter"), ("converged_", "converged"),
                           ("best_depth_", "depth"), ("weight_sharing_", "weight_sharing"),
                           ("mlp_depth_", "mlp_depth"), ("mlp_weight_", "mlp_weight"),
                           ("mask_skip_", "mask_skip"),
                           ("spline_", "spline"), ("log_target_", "log_target"),
                           ("n_epochs_", "epochs")):
        value = getattr(final, attribute, None)
        if value is None:
            continue
        if isinstance(value, (np.ndarray, list, tuple)):
            value = np.max(value)
        info[key] = value.item() if isinstance(value, np.generic) else value
    encoder = getattr(final, "encoder_", None)
    if getattr(encoder, "has_levels", False):  # the indicators integer_levels kept
        info["integer_levels"] = int(encoder.indicator_columns().sum())
    return info


def predict(model, kind: str, X: pd.DataFrame) -> np.ndarray:
    """Predictions of ``model``, shape (n_rows,): values (regression) or P(class 1) (binary)."""
    if kind == "regression":
        return np.asarray(model.predict(X), dtype=np.float64)
    classes = list(model.classes_)
    return np.asarray(model.predict_proba(X)[:, classes.index(1)], dtype=np.float64)
