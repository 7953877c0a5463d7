"""Missing-data augmentation over CQR (Zaffran, Dieuleveut, Josse and Romano,
"Conformal prediction with missing values", ICML 2023): intervals valid
conditionally on the mask under MCAR.

Both methods re-mask calibration rows with (part of) a test row's mask, so they keep
the calibration rows (:attr:`~._methods.Calibration.rows`), the model file and the
ONNX graph too. They keep the ranks of their paper (no ``calibration_confidence``).
Under self-masking they lose their guarantee (re-masking an observed value does not
make it look like a missing one) and over-cover.
"""

from __future__ import annotations

import numpy as np

from ..simulation import group_patterns
from ._methods import (
    Calibration,
    CQRMethod,
    conformal_quantile,
    missing,
    ordered,
    outside,
    quantile_bounds,
    remask,
    take_rows,
)
from ._ranks import lower_rank, required_calibration_rows, upper_rank

#: Largest number of (test row, calibration row) pairs held at once by the nested method.
_PAIRS_PER_CHUNK = 2**22


class MDANestedMethod(CQRMethod):
    """``"cqr-mda-nested"``: CP-MDA-Nested.

    For a test row with mask ``m``, every calibration row ``k`` is re-masked with
    ``m ∪ m_k`` and scored again, and the test row is predicted under the same
    augmented mask; this gives one interval per calibration row,
    ``[q_lo(x, m ∪ m_k) - s_k, q_hi(x, m ∪ m_k) + s_k]``. The lower bound is the
    ``floor(alpha (n + 1))``-th smallest of their lower ends, the upper bound the
    ``ceil((1 - alpha)(n + 1))``-th smallest of their upper ends. Under MCAR the
    coverage holds conditionally on each mask, at ``1 - 2 alpha`` in theory (as for
    the jackknife+) and near ``1 - alpha`` in the paper's experiments; the test row is
    predicted with union masks, which hold more missing entries than its own, so the
    intervals are wider than those of :class:`MDAExactMethod`.
    """

    name = "cqr-mda-nested"
    keeps_rows = True
    confident = False

    def intervals(self, calibration, X, alpha, confidence):
        _check_rows(self, calibration)
        mask_cal = missing(calibration.rows)
        patterns, inverse = group_patterns(missing(X))
        out = np.empty((inverse.shape[0], 2))
        for j, pattern in enumerate(patterns):
            rows = np.flatnonzero(inverse == j)
            out[rows] = self._mask_intervals(calibration, take_rows(X, rows), pattern, mask_cal,
                                             alpha)
        return ordered(out)

    def _mask_intervals(self, calibration: Calibration, X, pattern: np.ndarray,
                        mask_cal: np.ndarray, alpha: float) -> np.ndarray:
        """The intervals (n, 2) of the rows ``X``, all of mask ``pattern`` (bool (p,));
        ``mask_cal``: the masks of the calibration rows."""
        return _nested_intervals(calibration, X, pattern, alpha)

    def onnx_interval(self, g, calibration, alpha, confidence):
        """One batch holds the input rows, the calibration rows re-masked with
        ``M ∪ m_k`` and the input rows re-masked the same way: ``N (1 + 2 n)`` rows,
        memory growing as ``N n d``."""
        from . import _onnx  # loads onnx: only when exporting

        _check_rows(self, calibration)
        base = calibration.estimator
        x_all, m_all, counts = _onnx_augmented_batch(g, calibration)
        own, cal, test = _onnx.split_rows(g, _onnx.network(g, base, x_all, m_all), counts,
                                          ["own_raw", "cal_raw", "test_raw"])
        _, low, high = self.onnx_bounds(g, base, own)
        return self._onnx_mask_bounds(g, calibration, alpha, (low, high),
                                      _onnx_pair_scores(g, calibration, cal, test))

    def _onnx_mask_bounds(self, g, calibration: Calibration, alpha: float,
                          own: tuple[str, str], pairs: tuple[str, str, str]) -> tuple[str, str]:
        """Names of the lower and upper bounds (N,), from ``own``, the bounds (N,) of the
        input rows under their own masks, and ``pairs``, the scores and widened bounds
        (N, n) of :func:`_onnx_pair_scores`."""
        from . import _onnx  # loads onnx: only when exporting

        n_cal = calibration.targets.shape[0]
        _, lows, highs = pairs
        return (_onnx.kth_smallest(g, lows, lower_rank(n_cal, alpha), "nested_lower"),
                _onnx.kth_smallest(g, highs, upper_rank(n_cal, alpha), "nested_upper"))


class MDAExactMethod(MDANestedMethod):
    """``"cqr-mda-exact"``: CP-MDA-Exact, with CP-MDA-Nested as fallback.

    A test row with mask ``m`` is calibrated on the calibration rows whose mask lies
    inside ``m`` (``m_k ⊆ m``), re-masked with ``m``: under MCAR they are exchangeable
    with the test row, so the coverage is ``1 - alpha`` for every mask, and the test
    row keeps its own prediction. A mask with fewer such rows than
    :func:`~neumiss.intervals.required_calibration_rows` (where the paper's Exact gives
    an infinite interval) is calibrated as by :class:`MDANestedMethod`.
    """

    name = "cqr-mda-exact"

    def _mask_intervals(self, calibration, X, pattern, mask_cal, alpha):
        inside = np.flatnonzero(~(mask_cal & ~pattern).any(axis=1))
        if inside.size < required_calibration_rows(alpha):
            return super()._mask_intervals(calibration, X, pattern, mask_cal, alpha)
        cal = take_rows(calibration.rows, inside)
        cal_bounds = quantile_bounds(calibration.estimator,
                                     remask(cal, np.broadcast_to(pattern, cal.shape)))
        q = conformal_quantile(outside(cal_bounds, calibration.targets[inside]), alpha)
        bounds = quantile_bounds(calibration.estimator, X)
        return np.column_stack([bounds[:, 0] - q, bounds[:, 1] + q])

    def _onnx_mask_bounds(self, g, calibration, alpha, own, pairs):
        """Where the input row's mask has enough calibration rows inside it, the Exact
        bounds ``own -+ q``, else the nested ones."""
        nested_lower, nested_upper = super()._onnx_mask_bounds(g, calibration, alpha, own, pairs)
        q, enough = _onnx_exact_margin(g, calibration, alpha, pairs[0])
        lower = g.op("Where", [enough, g.op("Sub", [own[0], q], "exact_lower"), nested_lower],
                     "mda_lower")
        upper = g.op("Where", [enough, g.op("Add", [own[1], q], "exact_upper"), nested_upper],
                     "mda_upper")
        return lower, upper


def _check_rows(method, calibration: Calibration) -> None:
    """Refuse a calibration without rows (a fit with another method kept none)."""
    if calibration.rows is None:
        raise ValueError(
            f"ConformalRegressor: method={method.name!r} needs the calibration rows, which "
            f"only a fit with a 'cqr-mda-*' method keeps: fit again"
        )


def _nested_intervals(calibration: Calibration, X, pattern: np.ndarray,
                      alpha: float) -> np.ndarray:
    """CP-MDA-Nested for rows ``X`` of mask ``pattern``: the calibration rows are
    scored once under ``pattern ∪ m_k``, the rows predicted once per distinct
    augmented mask. Shape (n, 2)."""
    base, X_cal, y_cal = calibration.estimator, calibration.rows, calibration.targets
    n_cal, n = y_cal.shape[0], X.shape[0]
    rank_low = lower_rank(n_cal, alpha)  # >= 1: alpha was checked against n_cal
    rank_high = upper_rank(n_cal, alpha)
    out = np.empty((n, 2))
    union = missing(X_cal) | pattern
    scores = outside(quantile_bounds(base, remask(X_cal, union)), y_cal)
    augmented, which = group_patterns(union)
    n_aug = augmented.shape[0]
    step = max(1, _PAIRS_PER_CHUNK // max(n_cal, n_aug))
    for start in range(0, n, step):
        chunk = np.arange(start, min(n, start + step))
        repeated = take_rows(X, np.repeat(chunk, n_aug))
        remasked = remask(repeated, np.tile(augmented, (chunk.size, 1)))
        bounds = quantile_bounds(base, remasked).reshape(chunk.size, n_aug, 2)
        lower = bounds[:, which, 0] - scores
        upper = bounds[:, which, 1] + scores
        out[chunk, 0] = np.partition(lower, rank_low - 1, axis=1)[:, rank_low - 1]
        out[chunk, 1] = np.partition(upper, rank_high - 1, axis=1)[:, rank_high - 1]
    return out


def _encoded_rows(calibration: Calibration) -> np.ndarray:
    """The calibration rows as the graph's ``X`` columns (encoded, NaN = missing): a
    missing categorical input marks its whole group, as re-masking it does in Python."""
    return calibration.estimator.encoder_.transform(calibration.rows)


def _onnx_augmented_batch(g, calibration: Calibration) -> tuple[str, str, str]:
    """One batch of the input rows, the calibration rows re-masked with ``M ∪ m_k``
    (N n rows) and the input rows re-masked the same way (N n rows): names of its
    ``X``, its ``M`` and of the three parts' row counts (int64 (3,))."""
    rows = _encoded_rows(calibration)
    absent = np.isnan(rows)
    d = rows.shape[1]
    cal_x = g.constant("calibration_x", np.where(absent, 0.0, rows))
    cal_m = g.constant("calibration_m", absent.astype(np.float32))
    axis0, axis1 = g.constant("axis_0", [0], np.int64), g.constant("axis_1", [1], np.int64)
    test_m = g.op("Unsqueeze", ["M", axis1], "M_3d")  # (N, 1, d)
    union = g.op("Max", [test_m, g.op("Unsqueeze", [cal_m, axis0], "cal_m_3d")], "union")
    keep = g.op("Sub", [g.constant("one", 1.0), union], "union_obs")
    cal_x_3d = g.op("Unsqueeze", [cal_x, axis0], "cal_x_3d")
    flat = g.constant("flat_shape", [-1, d], np.int64)
    cal_aug = g.op("Reshape", [g.op("Mul", [cal_x_3d, keep], "cal_aug_3d"), flat], "cal_aug")
    test_x_3d = g.op("Unsqueeze", ["X", axis1], "X_3d")
    test_aug = g.op("Reshape", [g.op("Mul", [test_x_3d, keep], "test_aug_3d"), flat], "test_aug")
    union_flat = g.op("Reshape", [union, flat], "union_flat")
    x_all = g.op("Concat", ["X", cal_aug, test_aug], "x_all", axis=0)
    m_all = g.op("Concat", ["M", union_flat, union_flat], "m_all", axis=0)
    n = g.op("Gather", [g.op("Shape", ["X"], "X_shape"), g.constant("index_0", 0, np.int64)],
             "n_rows")
    n_aug = g.op("Mul", [n, g.constant("n_calibration", rows.shape[0], np.int64)], "n_aug")
    n_1d, n_aug_1d = (g.op("Unsqueeze", [v, axis0], f"{v}_1d") for v in (n, n_aug))
    counts = g.op("Concat", [n_1d, n_aug_1d, n_aug_1d], "part_rows", axis=0)
    return x_all, m_all, counts


def _onnx_pair_scores(g, calibration: Calibration, cal: str, test: str) -> tuple[str, str, str]:
    """For each (input row, calibration row ``k``) pair, (N, n): the score ``s_k`` of row
    ``k`` under ``M ∪ m_k``, and the input row's bounds under that mask widened by it
    (``q_lo - s_k``, ``q_hi + s_k``); from ``cal`` and ``test``, the network outputs
    (N n, n_outputs) of the re-masked calibration and input rows."""
    from . import _onnx  # loads onnx: only when exporting

    base = calibration.estimator
    n_cal = calibration.targets.shape[0]
    n_q = len(base.quantiles)
    grid = g.constant("grid_shape", [-1, n_cal], np.int64)

    def per_pair(column: int, part: str, name: str) -> str:
        values = _onnx.scaled(g, base, _onnx.column(g, part, column, f"{name}_raw"),
                              f"{name}_flat")
        return g.op("Reshape", [values, grid], name)  # (N, n)

    cal_low, cal_high = per_pair(0, cal, "cal_low"), per_pair(n_q - 1, cal, "cal_high")
    y = g.constant("calibration_y", calibration.targets, np.float64)
    scores = g.op("Max", [g.op("Sub", [cal_low, y], "score_low"),
                          g.op("Sub", [y, cal_high], "score_high")], "scores")
    test_low, test_high = per_pair(0, test, "test_low"), per_pair(n_q - 1, test, "test_high")
    return (scores, g.op("Sub", [test_low, scores], "nested_lows"),
            g.op("Add", [test_high, scores], "nested_highs"))


def _onnx_exact_margin(g, calibration: Calibration, alpha: float,
                       scores: str) -> tuple[str, str]:
    """CP-MDA-Exact's margin (N,) of each input row, the conformal quantile of its
    ``scores`` (N, n) of the calibration rows whose mask lies inside ``M`` (no entry
    observed in the input row and missing in the calibration row), and whether there
    are enough such rows (N,)."""
    from ..export import smallest  # loads onnx: only when exporting
    from . import _onnx

    n_cal = calibration.targets.shape[0]
    cal_m = g.constant("calibration_m", np.isnan(_encoded_rows(calibration)).astype(np.float32))
    axis0, axis1 = g.constant("axis_0", [0], np.int64), g.constant("axis_1", [1], np.int64)
    outside_m = g.op("Mul", [g.op("Unsqueeze", [cal_m, axis0], "cal_m_3d_exact"),
                             g.op("Sub", [g.constant("one", 1.0),
                                          g.op("Unsqueeze", ["M", axis1], "M_3d_exact")],
                                  "obs_3d")], "outside")
    eligible = g.op("Equal", [g.op("ReduceSum", [outside_m, g.constant("axis_2", [2], np.int64)],
                                   "n_outside", keepdims=0), g.constant("zero", 0.0)], "eligible")
    kept = g.op("Where", [eligible, scores, g.constant("infinity", np.inf, np.float64)], "kept")
    ordered_scores = smallest(g, kept, n_cal, "ordered")
    count = g.op("ReduceSum", [_onnx.cast(g, eligible, "eligible_double", np.float64), axis1],
                 "n_eligible", keepdims=1)  # (N, 1)
    one = g.constant("one_double", 1.0, np.float64)
    rank = g.op("Ceil", [g.op("Sub", [g.op("Mul", [g.op("Add", [count, one], "count_plus_1"),
                                                   g.constant("level", 1 - alpha, np.float64)],
                                            "rank_real"),
                                      g.constant("tiny", 1e-9, np.float64)], "rank_shifted")],
                "rank")
    index = _onnx.cast(g, g.op("Clip", [rank, one, g.constant("n_cal_double", n_cal, np.float64)],
                               "rank_clipped"), "rank_int", np.int64)
    index = g.op("Sub", [index, g.constant("one_int", 1, np.int64)], "rank_index")
    q = g.op("Squeeze", [g.op("GatherElements", [ordered_scores, index], "q_2d", axis=1), axis1],
             "q")
    enough = g.op("GreaterOrEqual", [g.op("Squeeze", [count, axis1], "n_eligible_1d"),
                                     g.constant("required", required_calibration_rows(alpha),
                                                np.float64)], "enough")
    return q, enough
