"""NeuMiss networks: supervised learning with missing values.

Le Morvan, Josse, Moreau, Scornet, Varoquaux. "NeuMiss networks: differentiable
programming for supervised learning with missing values." NeurIPS 2020.

Names are imported on first use, so ``import neumiss`` loads neither torch
nor onnx; ``neumiss.NeuMissRegressor`` loads the estimators (and torch).
"""

from __future__ import annotations

import importlib

from ._version import __version__

#: public name -> module defining it (classes and functions), or None (a submodule)
_EXPORTS = {
    "NeuMissBlock": "neumiss.network",
    "NeuMissNetwork": "neumiss.network",
    "NeuMissRegressor": "neumiss.estimators",
    "NeuMissQuantileRegressor": "neumiss.estimators",
    "ConformalRegressor": "neumiss.intervals",
    "ConformalClassifier": "neumiss.intervals",
    "NeuMissClassifier": "neumiss.estimators",
    "load": "neumiss.estimators",
    "fit_spark": "neumiss.estimators",
    "export_onnx": "neumiss.export",
    # The layers, as attributes.
    "checks": None,
    "simulation": None,
    "tables": None,
    "network": None,
    "export": None,
    "estimators": None,
    "baselines": None,
    "intervals": None,
    "scoring": None,
    # Names of earlier versions' modules, kept for attribute access
    # (neumiss.simulate.make_regression, neumiss.conformal.ConformalRegressor, ...).
    "simulate": "neumiss.simulation",
    "bayes": "neumiss.simulation",
    "analytic": "neumiss.network",
    "conformal": "neumiss.intervals",
}

#: Earlier module names that now stand for a whole layer.
_MODULE_ALIASES = frozenset({"simulate", "bayes", "analytic", "conformal"})

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'neumiss' has no attribute {name!r}")
    module_name = _EXPORTS[name]
    if module_name is None:
        value = importlib.import_module(f"neumiss.{name}")
    elif name in _MODULE_ALIASES:
        value = importlib.import_module(module_name)
    else:
        value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
