"""Prediction intervals by conformal prediction, valid per missingness pattern.

Owns :class:`ConformalRegressor`, the interval methods it selects (split, CQR, Mondrian
cells of missingness patterns, the MDA methods), the cells and the conformal ranks, and
each method's ONNX form. May import every layer below it, up to
:mod:`neumiss.baselines`.
"""

from ._cells import assign_cells, mask_cells
from ._conformal import ConformalRegressor
from ._ranks import confident_rank, required_calibration_rows, upper_rank

__all__ = [
    "ConformalRegressor",
    "assign_cells",
    "confident_rank",
    "mask_cells",
    "required_calibration_rows",
    "upper_rank",
]
