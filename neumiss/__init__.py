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
    "NeuMissBlock": "neumiss.block",
    "NeuMissNetwork": "neumiss.block",
    "NeuMissRegressor": "neumiss.estimators",
    "NeuMissQuantileRegressor": "neumiss.estimators",
    "ConformalRegressor": "neumiss.conformal",
    "NeuMissClassifier": "neumiss.estimators",
    "load": "neumiss.conformal",
    "export_onnx": "neumiss.onnx_export",
    "analytic": None,
    "conformal": None,
    "bayes": None,
    "simulate": None,
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'neumiss' has no attribute {name!r}")
    module_name = _EXPORTS[name]
    if module_name is None:
        value = importlib.import_module(f"neumiss.{name}")
    else:
        value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
