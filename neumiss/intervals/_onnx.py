"""ONNX export of a fitted :class:`~neumiss.conformal.ConformalRegressor`: outputs
``y``, ``lower`` and ``upper``.

The inputs are those of every NeuMiss graph (``X`` and ``M``, see
:mod:`neumiss.onnx_export`); the base model's network is the same graph. The
interval is exactly what ``predict_interval(X)`` computes at the fit-time
``alpha``:

* ``"split"``: ``y -+ Q``, ``Q`` the stored calibration quantile;
* ``"cqr"``: ``[q_lo - Q, q_hi + Q]`` from the quantile head (its outputs
  sorted by ``TopK``, as ``predict_quantiles`` sorts them), ``y`` its median;
* ``"cqr-mondrian"``: the same with the margin of the row's mask cell (the
  frequent patterns and the cell of each count of missing entries are constants);
* ``"cqr-mda-exact"`` and ``"cqr-mda-nested"``: the missing-data augmentation
  needs the calibration rows, which are **embedded in the file** as constants
  (``calibration_x``, ``calibration_m``, ``calibration_y``): whoever gets the
  file gets those rows of the training data, a privacy matter to weigh before
  sharing it. For each of the ``N`` input rows the graph evaluates the network
  on the ``n`` calibration rows re-masked with ``M ∪ m_k`` and on the input row
  re-masked the same way (``N (1 + 2 n)`` rows in one batch, so memory grows
  as ``N n d``: score in chunks of a few hundred rows), then takes the ranks
  of :mod:`neumiss.conformal` with ``TopK`` and ``GatherElements``.

Metadata adds ``interval_method``, ``alpha``, ``n_calibration`` and
``embedded_calibration_rows`` (0 for ``"split"`` and ``"cqr"``) to those of
the base model (``task`` is ``"regression"``, ``estimator`` ``ConformalRegressor``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from sklearn.utils.validation import check_is_fitted

from ..export import (
    DEFAULT_OPSET,
    Graph,
    check_exportable,
    finish_model,
    metadata,
    network_output,
    smallest,
)
from ._ranks import lower_rank, required_calibration_rows, upper_rank


def _check_conformal(model) -> None:
    """A fitted conformal model (duck-typed: this module sits below :mod:`neumiss.conformal`)."""
    if not hasattr(model, "calibration_quantile"):
        raise TypeError(
            f"export_interval_onnx expects a fitted ConformalRegressor, got "
            f"{type(model).__module__}.{type(model).__name__}"
        )
    check_is_fitted(model, "estimator_")


def _column(g: Graph, values: str, index: int, name: str) -> str:
    """Column ``index`` of a (rows, k) tensor, as (rows,)."""
    return g.op("Gather", [values, g.constant(f"index_{index}", index, np.int64)], name, axis=1)


def _scaled(g: Graph, base, values: str, name: str) -> str:
    """Network outputs in units of ``y``, float64: ``raw * y_scale_ + y_mean_``."""
    double = g.op("Cast", [values], f"{name}_double", to=TensorProto.DOUBLE)
    scaled = g.op("Mul", [double, g.constant("y_scale", base.y_scale_, np.float64)],
                  f"{name}_scaled")
    return g.op("Add", [scaled, g.constant("y_mean", base.y_mean_, np.float64)], name)


def _kth_smallest(g: Graph, values: str, rank: int, name: str) -> str:
    """The ``rank``-th smallest (1-based, a constant) of each row of (N, n): (N,)."""
    return _column(g, smallest(g, values, rank, f"{name}_topk"), rank - 1, name)


def export_interval_onnx(model, path=None, *, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """Export a fitted ConformalRegressor to ONNX with outputs ``y``, ``lower``, ``upper``.

    Parameters
    ----------
    model : fitted ConformalRegressor
        Its base model must be a NeuMiss regressor (``NeuMissRegressor`` or
        ``NeuMissQuantileRegressor`` for ``"split"``, the latter otherwise).
    path : str or path-like, optional
    opset : int, default=17

    Returns
    -------
    onnx.ModelProto
        Inputs ``X``, ``M`` float32 (N, d); outputs ``y``, ``lower``, ``upper``
        float64 (N,), at the fit-time ``alpha`` (module docstring).
    """
    _check_conformal(model)
    base = model.estimator_
    check_exportable(base, opset)
    g = Graph()
    method, alpha = model.method, float(model.alpha)
    mda = method.startswith("cqr-mda")
    if mda:
        x_all, m_all, n_rows = _augmented_batch(g, model)
        raw = network_output(g, base, x_all, m_all)
    else:
        raw = network_output(g, base)
    quantile_head = hasattr(base, "predict_quantiles")
    if quantile_head:  # quantiles sorted per row, as predict_quantiles does
        n_q = len(base.quantiles)
        raw = smallest(g, raw, n_q, "raw_sorted")
    if mda:
        g.nodes.append(helper.make_node("Split", [raw, n_rows], ["own_raw", "cal_raw", "test_raw"],
                                        name="split_parts", axis=0))
        own = "own_raw"
    else:
        own = raw
    point = int(np.flatnonzero(np.asarray(base.quantiles) == 0.5)[0]) if quantile_head else 0
    y = _scaled(g, base, _column(g, own, point, "own_y_raw"), "y")
    if method == "split":
        low, high = y, y
    else:
        low = _scaled(g, base, _column(g, own, 0, "own_low_raw"), "own_low")
        high = _scaled(g, base, _column(g, own, n_q - 1, "own_high_raw"), "own_high")
    if mda:
        lower, upper = _mda_bounds(g, model, base, low, high, alpha)
    elif method == "cqr-mondrian":
        margin = _cell_margin(g, model)
        lower, upper = g.op("Sub", [low, margin], "raw_lower"), g.op("Add", [high, margin],
                                                                     "raw_upper")
    else:
        q = g.constant("calibration_quantile", model.calibration_quantile(), np.float64)
        lower, upper = g.op("Sub", [low, q], "raw_lower"), g.op("Add", [high, q], "raw_upper")
    # An empty interval (lower > upper) becomes its midpoint, as predict_interval does.
    mid = g.op("Mul", [g.op("Add", [lower, upper], "bound_sum"),
                       g.constant("half", 0.5, np.float64)], "midpoint")
    g.op("Min", [lower, mid], "lower")
    g.op("Max", [upper, mid], "upper")
    outputs = [helper.make_tensor_value_info(name, TensorProto.DOUBLE, ["N"])
               for name in ("y", "lower", "upper")]
    meta = metadata(base, "regression") | {
        "estimator": type(model).__name__,
        "base_estimator": type(base).__name__,
        "interval_method": method,
        "alpha": repr(alpha),
        "n_calibration": str(model.calibration_scores_.shape[0]),
        "embedded_calibration_rows": str(model.calibration_scores_.shape[0] if mda else 0),
    }
    return finish_model(g, base, outputs, meta, opset, path)


def _cell_margin(g: Graph, model) -> str:
    """``"cqr-mondrian"``: the margin (N,) of each row's mask cell (:mod:`neumiss.mask_cells`):
    the index of its pattern among the frequent ones, else the cell of its count."""
    axis1 = g.constant("axis_1", [1], np.int64)
    count = g.op("Cast", [g.op("ReduceSum", ["M", axis1], "n_missing_float", keepdims=0)],
                 "n_missing", to=TensorProto.INT64)
    cell = g.op("Gather", [g.constant("cell_of_count", model.cell_of_count_, np.int64), count],
                "count_cell", axis=0)
    patterns = model.cell_patterns_
    if patterns.shape[0]:
        axis0, axis2 = g.constant("axis_0", [0], np.int64), g.constant("axis_2", [2], np.int64)
        difference = g.op("Abs", [g.op("Sub", [
            g.op("Unsqueeze", ["M", axis1], "M_3d"),
            g.op("Unsqueeze", [g.constant("cell_patterns", patterns.astype(np.float32)), axis0],
                 "cell_patterns_3d")], "pattern_difference")], "pattern_distance")
        same = g.op("Cast", [g.op("Equal", [g.op("ReduceSum", [difference, axis2],
                                                 "n_different", keepdims=0),
                                            g.constant("zero", 0.0)], "same_pattern")],
                    "same_pattern_float", to=TensorProto.FLOAT)
        frequent = g.op("Greater", [g.op("ReduceSum", [same, axis1], "n_same", keepdims=0),
                                    g.constant("zero", 0.0)], "frequent")
        index = g.op("ArgMax", [same], "pattern_cell", axis=1, keepdims=0)
        cell = g.op("Where", [frequent, index, cell], "cell")
    return g.op("Gather", [g.constant("cell_margins", model.cell_margins(), np.float64), cell],
                "cell_margin", axis=0)


def _encoded_calibration_rows(model) -> np.ndarray:
    """The calibration rows as the graph's ``X`` columns (encoded, NaN = missing): a
    missing categorical input marks its whole group, as re-masking it does in Python."""
    return model.estimator_.encoder_.transform(model.calibration_rows_)


def _augmented_batch(g: Graph, model) -> tuple[str, str, str]:
    """One batch of the input rows, the calibration rows re-masked with ``M ∪ m_k``
    (N n rows) and the input rows re-masked the same way (N n rows): names of its
    ``X``, its ``M`` and of the three parts' row counts (int64 (3,))."""
    rows = _encoded_calibration_rows(model)
    missing = np.isnan(rows)
    d = rows.shape[1]
    cal_x = g.constant("calibration_x", np.where(missing, 0.0, rows))
    cal_m = g.constant("calibration_m", missing.astype(np.float32))
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


def _mda_bounds(g: Graph, model, base, own_low: str, own_high: str, alpha: float):
    """Lower and upper bounds (N,) of CP-MDA-Exact (with the nested fallback) or -Nested."""
    y_cal = model.calibration_targets_
    n_cal = y_cal.shape[0]
    n_q = len(base.quantiles)
    grid = g.constant("grid_shape", [-1, n_cal], np.int64)

    def per_pair(column: int, part: str, name: str) -> str:
        values = _scaled(g, base, _column(g, part, column, f"{name}_raw"), f"{name}_flat")
        return g.op("Reshape", [values, grid], name)  # (N, n)

    cal_low, cal_high = per_pair(0, "cal_raw", "cal_low"), per_pair(n_q - 1, "cal_raw", "cal_high")
    y = g.constant("calibration_y", y_cal, np.float64)
    scores = g.op("Max", [g.op("Sub", [cal_low, y], "score_low"),
                          g.op("Sub", [y, cal_high], "score_high")], "scores")
    test_low = per_pair(0, "test_raw", "test_low")
    test_high = per_pair(n_q - 1, "test_raw", "test_high")
    nested_lower = _kth_smallest(g, g.op("Sub", [test_low, scores], "nested_lows"),
                                 lower_rank(n_cal, alpha), "nested_lower")
    nested_upper = _kth_smallest(g, g.op("Add", [test_high, scores], "nested_highs"),
                                 upper_rank(n_cal, alpha), "nested_upper")
    if model.method == "cqr-mda-nested":
        return nested_lower, nested_upper
    # Exact: calibration rows whose mask lies inside M (no entry observed in the
    # input row and missing in the calibration row), ranked among themselves.
    cal_m = g.constant("calibration_m",
                       np.isnan(_encoded_calibration_rows(model)).astype(np.float32))
    axis0, axis1 = g.constant("axis_0", [0], np.int64), g.constant("axis_1", [1], np.int64)
    outside = g.op("Mul", [g.op("Unsqueeze", [cal_m, axis0], "cal_m_3d_exact"),
                           g.op("Sub", [g.constant("one", 1.0),
                                        g.op("Unsqueeze", ["M", axis1], "M_3d_exact")],
                                "obs_3d")], "outside")
    eligible = g.op("Equal", [g.op("ReduceSum", [outside, g.constant("axis_2", [2], np.int64)],
                                   "n_outside", keepdims=0), g.constant("zero", 0.0)], "eligible")
    kept = g.op("Where", [eligible, scores, g.constant("infinity", np.inf, np.float64)], "kept")
    ordered = smallest(g, kept, n_cal, "ordered")
    count = g.op("ReduceSum", [g.op("Cast", [eligible], "eligible_double", to=TensorProto.DOUBLE),
                               axis1], "n_eligible", keepdims=1)  # (N, 1)
    rank = g.op("Ceil", [g.op("Sub", [g.op("Mul", [g.op("Add", [count, g.constant(
        "one_double", 1.0, np.float64)], "count_plus_1"), g.constant(
        "level", 1 - alpha, np.float64)], "rank_real"), g.constant("tiny", 1e-9, np.float64)],
        "rank_shifted")], "rank")
    index = g.op("Cast", [g.op("Clip", [rank, g.constant("one_double", 1.0, np.float64),
                                        g.constant("n_cal_double", n_cal, np.float64)],
                               "rank_clipped")], "rank_int", to=TensorProto.INT64)
    index = g.op("Sub", [index, g.constant("one_int", 1, np.int64)], "rank_index")
    q = g.op("Squeeze", [g.op("GatherElements", [ordered, index], "q_2d", axis=1), axis1], "q")
    enough = g.op("GreaterOrEqual", [g.op("Squeeze", [count, axis1], "n_eligible_1d"),
                                     g.constant("required", required_calibration_rows(alpha),
                                                np.float64)], "enough")
    lower = g.op("Where", [enough, g.op("Sub", [own_low, q], "exact_lower"), nested_lower],
                 "mda_lower")
    upper = g.op("Where", [enough, g.op("Add", [own_high, q], "exact_upper"), nested_upper],
                 "mda_upper")
    return lower, upper
