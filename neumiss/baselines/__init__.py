"""The methods NeuMiss is compared with: EM, MICE, imputation + mask + linear model or MLP.

Owns the baseline regressors of the paper (Section 5.4), the bridge to R's ``norm`` EM
through rpy2, and the one registry of baselines (name -> factory) used by every benchmark
suite and the R adapter. May import :mod:`neumiss.checks`, :mod:`neumiss.simulation`,
:mod:`neumiss.tables` and, for the registry, :mod:`neumiss.estimators`.
"""

from ._baselines import (
    EMRegressor,
    ImputeMaskLinearRegressor,
    ImputeMaskMLPRegressor,
    MICERegressor,
)
from ._rbridge import NormEMRegressor, em_norm, load_norm

__all__ = [
    "EMRegressor",
    "ImputeMaskLinearRegressor",
    "ImputeMaskMLPRegressor",
    "MICERegressor",
    "NormEMRegressor",
    "em_norm",
    "load_norm",
]
