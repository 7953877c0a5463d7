"""Prediction intervals by conformal prediction, valid per missingness pattern.

Owns :class:`ConformalRegressor` and :class:`ConformalClassifier` (prediction sets,
:mod:`._sets`), the interval methods it selects (split, CQR, Mondrian
cells of missingness patterns, the MDA methods: one class each, with its calibration,
its intervals and its ONNX form), the cells and the conformal ranks. May import every
layer below it, up to :mod:`neumiss.baselines`; loads ``onnx`` only when exporting.
"""

from ._cells import assign_cells, mask_cells
from ._classifier import ConformalClassifier
from ._conformal import METHODS, ConformalRegressor
from ._cross import CROSS_ROWS
from ._mda import MDAExactMethod, MDANestedMethod
from ._methods import (
    Calibration,
    CQRMethod,
    IntervalMethod,
    MondrianMethod,
    SplitMethod,
    take_rows,
)
from ._ranks import confident_rank, required_calibration_rows, upper_rank
from ._sets import SET_METHODS, APSScore, LACScore, SetMethod
from ._split import calibration_split

__all__ = [
    "CROSS_ROWS",
    "METHODS",
    "SET_METHODS",
    "APSScore",
    "CQRMethod",
    "Calibration",
    "ConformalClassifier",
    "ConformalRegressor",
    "IntervalMethod",
    "LACScore",
    "MDAExactMethod",
    "MDANestedMethod",
    "MondrianMethod",
    "SetMethod",
    "SplitMethod",
    "assign_cells",
    "calibration_split",
    "confident_rank",
    "mask_cells",
    "required_calibration_rows",
    "take_rows",
    "upper_rank",
]
