"""Checking what users pass in: declared parameter constraints and validated tables.

Owns :func:`check_params` and its constraint types (:class:`Integer`, :class:`Real`,
:class:`Options`, ...), and the validation of feature tables and targets with missing
values (never mutated, errors naming the argument and column), and :func:`warn_user`, whose
warnings point at the user's call. The bottom layer: it
imports nothing from neumiss.
"""

from ._constraints import (
    AnyOf,
    Boolean,
    InstanceOf,
    Integer,
    NoneValue,
    Options,
    Pattern,
    Real,
    SequenceOf,
    check_params,
)
from ._warnings import warn_user

#: names of ``_validation``, which loads scikit-learn: imported on first use, so that
#: commands which only check parameters (``neumiss score``) start in a fraction of a second
_VALIDATION = frozenset({"check_class_labels", "check_features", "check_training_data"})

__all__ = [
    "AnyOf",
    "Boolean",
    "InstanceOf",
    "Integer",
    "NoneValue",
    "Options",
    "Pattern",
    "Real",
    "SequenceOf",
    "check_class_labels",
    "check_features",
    "check_params",
    "check_training_data",
    "warn_user",
]


def __getattr__(name: str):
    if name not in _VALIDATION:
        raise AttributeError(f"module 'neumiss.checks' has no attribute {name!r}")
    from . import _validation

    value = getattr(_validation, name)
    globals()[name] = value  # later lookups skip __getattr__
    return value
