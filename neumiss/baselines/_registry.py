"""The one registry of baselines: name -> factory of an unfitted estimator.

Every benchmark suite and the R adapter build their baselines here, so that a name means
the same model (same parameters, same seeding) wherever it is run. A factory takes the
task (``"regression"`` or ``"classification"``) and ``random_state`` (the seed of the
estimator's own randomness; deterministic models ignore it).

Inputs: numeric arrays or data frames with NaN for missing values; ``hgb``, ``catboost``,
``lightgbm``, ``realmlp``, ``tabm`` and ``mean_mask_linear`` also take ``category`` (or
text) columns. Callers with
categorical tables dummy-code them first for the other baselines.

scikit-learn's models are imported when built, so that listing the registry is cheap.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._baselines import (
    EMRegressor,
    ImputeMaskLinearRegressor,
    ImputeMaskMLPRegressor,
    MICERegressor,
)
from ._boosting import (
    CatBoostTableClassifier,
    CatBoostTableRegressor,
    as_float_frame,
    categorical_columns,
    lightgbm_model,
)
from ._networks import pytabkit_model
from ._rbridge import NormEMRegressor

__all__ = ["BASELINES", "TASKS", "Baseline", "make_baseline"]

TASKS = ("regression", "classification")
#: Ridge penalties tried by ``mean_mask_linear`` (leave-one-out CV).
RIDGE_ALPHAS = tuple(np.logspace(-3, 3, 13))


@dataclass(frozen=True)
class Baseline:
    """A baseline: ``build(task, random_state)`` returns it unfitted, for one of ``tasks``.

    ``requires`` names the optional packages its fit imports.
    """

    name: str
    build: Callable[[str, int | None], object]
    tasks: tuple[str, ...] = ("regression",)
    requires: tuple[str, ...] = ()

    def unavailable(self) -> str | None:
        """Why this baseline cannot be fitted here (a package it needs is missing), or None."""
        missing = [name for name in self.requires if importlib.util.find_spec(name) is None]
        if not missing:
            return None
        return (f"{' and '.join(missing)} not installed "
                "(pip install 'neumiss[anchors]' installs CatBoost, LightGBM and pytabkit)")


def _em(task, random_state):
    """:class:`EMRegressor` with its defaults (deterministic)."""
    return EMRegressor()


def _norm_em(task, random_state):
    """:class:`NormEMRegressor`, R's ``norm`` EM as in the paper (deterministic)."""
    return NormEMRegressor()


def _mice_lr(task, random_state):
    """:class:`MICERegressor`: iterative imputation, then a linear regression."""
    return MICERegressor(random_state=random_state)


def _impute_mask_lr(task, random_state):
    """:class:`ImputeMaskLinearRegressor`: linear regression on [X with 0 for NaN, mask]."""
    return ImputeMaskLinearRegressor()


def _mlp(task, random_state):
    """:class:`ImputeMaskMLPRegressor`, its width chosen on validation (callers may set it)."""
    return ImputeMaskMLPRegressor(random_state=random_state)


def _hgb(task, random_state):
    """Gradient boosting with missing values handled natively, categories from the dtype."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    model = (HistGradientBoostingRegressor if task == "regression"
             else HistGradientBoostingClassifier)
    return model(categorical_features="from_dtype", random_state=random_state)


def _linear(task):
    """The linear model ending the ``mice_linear`` pipeline."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    return LinearRegression() if task == "regression" else LogisticRegression(max_iter=1000)


def _mice_linear(task, random_state):
    """Iterative imputation, standardization, then a linear or logistic regression."""
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        IterativeImputer(random_state=random_state, keep_empty_features=True),
        StandardScaler(), _linear(task),
    )


def _mean_mask_linear(task, random_state):
    """Mean imputation with a missing indicator per incomplete column, categories one-hot
    (missing as its own category), standardization, then ``RidgeCV`` or a logistic
    regression (default C)."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

    columns = ColumnTransformer([
        ("numeric", SimpleImputer(strategy="mean", add_indicator=True, keep_empty_features=True),
         make_column_selector(dtype_include="number")),
        ("categories", OneHotEncoder(handle_unknown="ignore", sparse_output=False),
         categorical_columns),
    ])
    model = (RidgeCV(alphas=RIDGE_ALPHAS) if task == "regression"
             else LogisticRegression(max_iter=1000))
    return make_pipeline(FunctionTransformer(as_float_frame), columns, StandardScaler(), model)


def _catboost(task, random_state):
    """CatBoost with its defaults (1000 rounds), NaN and categories native, one thread."""
    model = CatBoostTableRegressor if task == "regression" else CatBoostTableClassifier
    return model(random_state=random_state)


def _lightgbm(task, random_state):
    """LightGBM with its defaults, NaN and categories native, one thread."""
    return lightgbm_model(task, random_state)


def _realmlp(task, random_state):
    """pytabkit's RealMLP-TD behind median imputation and missing indicators, one thread."""
    return pytabkit_model("realmlp", task, random_state)


def _tabm(task, random_state):
    """pytabkit's TabM-D behind median imputation and missing indicators, one thread."""
    return pytabkit_model("tabm", task, random_state)


#: Baselines by name.
BASELINES = {baseline.name: baseline for baseline in (
    Baseline("em", _em),
    Baseline("norm_em", _norm_em),
    Baseline("mice_lr", _mice_lr),
    Baseline("impute_mask_lr", _impute_mask_lr),
    Baseline("mlp", _mlp),
    Baseline("hgb", _hgb, TASKS),
    Baseline("mice_linear", _mice_linear, TASKS),
    Baseline("mean_mask_linear", _mean_mask_linear, TASKS),
    Baseline("catboost", _catboost, TASKS, requires=("catboost",)),
    Baseline("lightgbm", _lightgbm, TASKS, requires=("lightgbm",)),
    Baseline("realmlp", _realmlp, TASKS, requires=("pytabkit",)),
    Baseline("tabm", _tabm, TASKS, requires=("pytabkit",)),
)}


def make_baseline(name: str, task: str = "regression", random_state=None):
    """An unfitted baseline of :data:`BASELINES`.

    Parameters
    ----------
    name : str
        A key of :data:`BASELINES`.
    task : {"regression", "classification"}, default="regression"
    random_state : int, RandomState instance or None
        Seeds the estimator's own randomness (ignored by deterministic baselines).

    Raises
    ------
    ValueError
        For an unknown name, or a task the baseline does not take.
    """
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    baseline = BASELINES[name]
    if task not in baseline.tasks:
        raise ValueError(f"baseline {name!r} takes {' or '.join(baseline.tasks)}, not {task!r}")
    return baseline.build(task, random_state)
