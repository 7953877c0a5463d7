"""The paper's simulated world: Gaussian covariates, missingness mechanisms, Bayes predictors.

Owns the vectorized Gaussian conditioning over missingness patterns, the MCAR, MAR and
self-masking mechanisms, :func:`make_regression` and the Bayes predictors they imply.
Numpy and scipy only (no torch). May import :mod:`neumiss.checks`.
"""

from ._bayes import (
    MECHANISM_NAMES,
    bayes_predict,
    conditional_expectation,
    predictive_variance,
)
from ._datasets import LINKS, SimulationTruth, make_regression
from ._gaussian import (
    ConditionalMoments,
    PatternLayout,
    conditional_mean,
    conditional_moments,
    group_patterns,
)
from ._mechanisms import MAR, MCAR, MECHANISMS, GaussianSelfMasking, ProbitSelfMasking

__all__ = [
    "ConditionalMoments",
    "GaussianSelfMasking",
    "LINKS",
    "MAR",
    "MCAR",
    "MECHANISMS",
    "MECHANISM_NAMES",
    "PatternLayout",
    "ProbitSelfMasking",
    "SimulationTruth",
    "bayes_predict",
    "conditional_expectation",
    "conditional_mean",
    "conditional_moments",
    "group_patterns",
    "make_regression",
    "predictive_variance",
]
