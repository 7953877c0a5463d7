"""The ranks of split conformal prediction (used by the interval methods, in numpy
and in their ONNX form).

With ``n`` exchangeable calibration scores, the ``ceil((1 - alpha)(n + 1))``-th
smallest bounds a new score with probability at least ``1 - alpha``; a rank
beyond ``n`` would be an infinite bound. That probability is over the draw of
the calibration rows too: one draw may cover less. The coverage of the
``k``-th smallest score, given the calibration rows, follows a
``Beta(k, n + 1 - k)`` law (continuous scores), so the smallest ``k`` with
``P(Beta(k, n + 1 - k) < 1 - alpha) <= 1 - confidence`` covers at least
``1 - alpha`` with probability ``confidence`` over the calibration draw
(training-conditional validity; Vovk 2012, "Conditional validity of inductive
conformal predictors"): :func:`confident_rank`.
"""

from __future__ import annotations

import math

from scipy.stats import binom

#: How far above a margin (or above a calibration score, for CV+) a class score is still
#: within it: 2^-17, about 128 float32 units at probability 1, far above the rounding by
#: which two runtimes (torch, ONNX Runtime) may compute a network's probabilities apart,
#: and far below any margin's precision (the calibration scores' spacing).
SCORE_TOLERANCE = 2.0**-17


def required_calibration_rows(alpha: float, confidence: float | None = None) -> int:
    """The fewest calibration rows that give a finite interval at level ``1 - alpha``.

    ``ceil((1 - alpha)(n + 1)) <= n`` (and ``floor(alpha (n + 1)) >= 1`` for the
    nested lower bound) hold exactly when ``n >= 1/alpha - 1``. With a
    ``confidence`` (:func:`confident_rank`), the largest score must already
    suffice: ``(1 - alpha)^n <= 1 - confidence``.
    """
    expected = max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))
    if confidence is None:
        return expected
    return max(expected, math.ceil(math.log1p(-confidence) / math.log1p(-alpha) - 1e-9))


def upper_rank(n: int, alpha: float) -> int:
    """``ceil((1 - alpha)(n + 1))``: the rank (1-based) of the calibration quantile."""
    return math.ceil((1.0 - alpha) * (n + 1) - 1e-9)


def lower_rank(n: int, alpha: float) -> int:
    """``floor(alpha (n + 1))``: the rank (1-based) of CP-MDA-Nested's lower bound."""
    return math.floor(alpha * (n + 1) + 1e-9)


def confident_rank(n: int, alpha: float, confidence: float | None) -> int:
    """The rank (1-based) of the calibration quantile that covers ``1 - alpha`` with
    probability ``confidence`` over the calibration draw (module docstring):
    the smallest ``k`` with ``P(Binomial(n, 1 - alpha) >= k) <= 1 - confidence``,
    i.e. one more than the ``confidence``-quantile of that binomial;
    :func:`upper_rank` when ``confidence`` is None. ``n + 1`` (an infinite
    bound) when even ``k = n`` is not enough.
    """
    if confidence is None:
        return upper_rank(n, alpha)
    return int(binom.ppf(confidence, n, 1.0 - alpha)) + 1
