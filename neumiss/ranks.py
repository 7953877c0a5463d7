"""The ranks of split conformal prediction (used by :mod:`neumiss.conformal` and its
ONNX export, :mod:`neumiss.onnx_intervals`).

With ``n`` exchangeable calibration scores, the ``ceil((1 - alpha)(n + 1))``-th
smallest bounds a new score with probability at least ``1 - alpha``; a rank
beyond ``n`` would be an infinite bound.
"""

from __future__ import annotations

import math


def required_calibration_rows(alpha: float) -> int:
    """The fewest calibration rows that give a finite interval at level ``1 - alpha``.

    ``ceil((1 - alpha)(n + 1)) <= n`` (and ``floor(alpha (n + 1)) >= 1`` for the
    nested lower bound) hold exactly when ``n >= 1/alpha - 1``.
    """
    return max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))


def upper_rank(n: int, alpha: float) -> int:
    """``ceil((1 - alpha)(n + 1))``: the rank (1-based) of the calibration quantile."""
    return math.ceil((1.0 - alpha) * (n + 1) - 1e-9)


def lower_rank(n: int, alpha: float) -> int:
    """``floor(alpha (n + 1))``: the rank (1-based) of CP-MDA-Nested's lower bound."""
    return math.floor(alpha * (n + 1) + 1e-9)
