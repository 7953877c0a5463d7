"""The methods NeuMiss is compared with: EM, MICE, imputation + mask + linear model or MLP,
the gradient-boosting anchors (CatBoost, LightGBM) and the tabular-network anchors
(RealMLP, TabM from pytabkit).

Owns the baseline regressors of the paper (Section 5.4), the boosting anchors with native
missing values and categories, the network anchors behind median imputation and missing
indicators (the anchors' packages optional), the bridge to R's ``norm`` EM
through rpy2, and the one registry of baselines (:data:`BASELINES`, name -> factory,
:func:`make_baseline`) that every benchmark suite and the R adapter build their baselines
from. May import :mod:`neumiss.checks`, :mod:`neumiss.simulation` and :mod:`neumiss.tables`;
importing it loads neither torch, pytabkit nor rpy2 (R starts when ``norm`` is first used).
"""

from ._baselines import (
    EMRegressor,
    ImputeMaskLinearRegressor,
    ImputeMaskMLPRegressor,
    MICERegressor,
)
from ._boosting import MISSING_CATEGORY, CatBoostTableClassifier, CatBoostTableRegressor
from ._rbridge import NormEMRegressor, em_norm, load_norm
from ._registry import BASELINES, TASKS, Baseline, make_baseline

__all__ = [
    "BASELINES",
    "Baseline",
    "CatBoostTableClassifier",
    "CatBoostTableRegressor",
    "EMRegressor",
    "ImputeMaskLinearRegressor",
    "ImputeMaskMLPRegressor",
    "MICERegressor",
    "MISSING_CATEGORY",
    "NormEMRegressor",
    "TASKS",
    "em_norm",
    "load_norm",
    "make_baseline",
]
