"""ONNX export of a fitted :class:`~neumiss.intervals.ConformalRegressor` (outputs
``y``, ``lower`` and ``upper``) and :class:`~neumiss.intervals.ConformalClassifier`
(``label``, ``probabilities``, ``set`` and ``set_size``); and the graph pieces the
interval and set methods share.

The inputs are those of every NeuMiss graph (``X`` and ``M``, see
:mod:`neumiss.export`); the base model's network is the same graph. The interval
is exactly what ``predict_interval(X)`` computes at the fit-time ``alpha``: each
method writes its own computation (:meth:`~._methods.IntervalMethod.onnx_interval`),
with its calibration as constants. The ``"cqr-mda-*"`` methods need the calibration
rows, which are then **embedded in the file** (``calibration_x``, ``calibration_m``,
``calibration_y``): whoever gets the file gets those rows of the training data, a
privacy matter to weigh before sharing it; and their graph evaluates the network on
``N (1 + 2 n)`` rows for ``N`` input rows and ``n`` calibration rows, so memory grows
as ``N n d``: score in chunks of a few hundred rows.

A cross-conformal (CV+) fit's graph holds its fold networks (each a subgraph of its
own) and the rows' out-of-fold scores and folds, no rows: the bounds are ranks picked
after a sort, the sets counts of comparisons with the scores (:func:`cross_interval`,
:func:`cross_set`); metadata ``calibration`` says ``"cv+"`` (with ``n_folds``) or
``"split"``. Each fold network reads its own encoding of the columns (learned from its
own training rows), computed in the graph from ``X`` and ``M``
(:mod:`._fold_encoding`); a column of target statistics cannot be, and is refused
(:func:`exportable_cross`).

Metadata adds ``interval_method`` (``set_method``), ``alpha``, ``n_calibration`` and
``embedded_calibration_rows`` (0 for the methods that keep no rows) to those of the
base model (``task`` is ``"regression"``, ``estimator`` ``ConformalRegressor``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..export import (
    DEFAULT_OPSET,
    Graph,
    check_exportable,
    classifier_outputs,
    finish_model,
    metadata,
    network_output,
    smallest,
    target_units,
)
from ._cells import group_starts, own_cells
from ._fold_encoding import fold_inputs, fold_sources
from ._ranks import SCORE_TOLERANCE, lower_rank, upper_rank


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
        float64 (N,), at the fit-time ``alpha``.
    """
    g = Graph()
    if model.cross_conformal_:
        method, calibration, alpha = exportable_cross(model, opset)
        base = calibration.estimator
        method.onnx_bounds(g, base, network(g, base))  # y, from the model of all rows
        lower, upper = cross_interval(g, method, calibration, alpha)
        embedded, scheme = 0, {"calibration": "cv+",
                               "n_folds": str(len(calibration.estimators))}
    else:
        method, calibration, alpha, confidence = model._calibrated()
        base = calibration.estimator
        check_exportable(base, opset)
        lower, upper = method.onnx_interval(g, calibration, alpha, confidence)
        embedded = calibration.scores.shape[0] if method.keeps_rows else 0
        scheme = {"calibration": "split"}
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
        "interval_method": method.name,
        "alpha": repr(alpha),
        "n_calibration": str(calibration.scores.shape[0]),
        "embedded_calibration_rows": str(embedded),
    } | scheme
    return finish_model(g, base, outputs, meta, opset, path)


def export_set_onnx(model, path=None, *, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """Export a fitted ConformalClassifier to ONNX: the base classifier's outputs
    ``label`` and ``probabilities``, and the prediction sets at the fit-time ``alpha``.

    Parameters
    ----------
    model : fitted ConformalClassifier
        Its base model must be a ``NeuMissClassifier``.
    path : str or path-like, optional
    opset : int, default=17

    Returns
    -------
    onnx.ModelProto
        Inputs ``X``, ``M`` float32 (N, d); outputs ``label`` (N,), ``probabilities``
        float32 (N, n_classes), ``set`` bool (N, n_classes) (columns in the order of
        metadata ``classes``) and ``set_size`` int64 (N,). A split's margins are
        initializers; a cross-conformal fit's graph holds its fold networks and the
        out-of-fold scores (:func:`cross_set`). Set membership compares the class scores
        (of the probabilities in float64) with them, as ``predict_set``: the same sets,
        but for a class whose score lies within float32 rounding of a calibration score
        (the graph's probabilities are float32).
    """
    g = Graph()
    if model.cross_conformal_:
        method, calibration, alpha = exportable_cross(model, opset)
        base = calibration.estimator
        outputs = classifier_outputs(g, base, network_output(g, base))
        kept = cross_set(g, method, calibration, alpha)
        scheme = {"calibration": "cv+", "n_folds": str(len(calibration.estimators))}
    else:
        method, calibration, alpha, confidence = model._calibrated()
        base = calibration.estimator
        check_exportable(base, opset)
        outputs = classifier_outputs(g, base, network_output(g, base))
        kept = method.onnx_sets(g, calibration, alpha, confidence,
                                cast(g, "probabilities", "probabilities_double", np.float64))
        scheme = {"calibration": "split"}
    g.op("ReduceSum", [cast(g, kept, "set_int", np.int64), g.constant("axis_1", [1], np.int64)],
         "set_size", keepdims=0)
    n_classes = len(base.classes_)
    outputs += [helper.make_tensor_value_info("set", TensorProto.BOOL, ["N", n_classes]),
                helper.make_tensor_value_info("set_size", TensorProto.INT64, ["N"])]
    meta = metadata(base, "classification") | {
        "estimator": type(model).__name__,
        "base_estimator": type(base).__name__,
        "set_method": method.name,
        "alpha": repr(alpha),
        "n_calibration": str(calibration.scores.shape[0]),
        "embedded_calibration_rows": "0",
    } | scheme
    return finish_model(g, base, outputs, meta, opset, path)


def exportable_cross(model, opset: int):
    """The method, cross-conformal calibration and ``alpha`` of a fitted CV+ ``model``,
    checked for export: every network exportable, and every fold model's encoded inputs
    computable from those of the model of all rows, the graph's one encoded ``X`` and
    ``M`` (:func:`~._fold_encoding.fold_sources`). Each model draws its encoding from its
    own training rows: a category or an integer level too rare to reach a fold's is
    mapped inside the graph (:func:`fold_outputs`) as the fold's encoder reads it; a
    column encoded by target statistics, which every model learns anew, cannot be, and
    is refused (``ValueError`` naming the column and the fold model: refit with
    ``cv=None``, or encode the column yourself)."""
    method, calibration, alpha = model._cross_calibrated()
    encoder = calibration.estimator.encoder_
    check_exportable(calibration.estimator, opset)
    for k, estimator in enumerate(calibration.estimators):
        check_exportable(estimator, opset)
        try:
            fold_sources(encoder, estimator.encoder_)
        except ValueError as error:
            raise ValueError(f"{type(model).__name__}: cannot export fold model {k} of the "
                             f"cross-conformal fit: {error}") from None
    return method, calibration, alpha


def cross_interval(g: Graph, method, calibration, alpha: float) -> tuple[str, str]:
    """Add the CV+ bounds (:func:`~._cross.cross_intervals`) to graph ``g``: each fold
    model's bounds (N,) (its network a subgraph of its own, :func:`fold_outputs`), gathered
    by the calibration rows' folds (N, n) and widened by their scores (initializers);
    the ranks of each row's group (its own cell or all rows) picked after a sort, the
    other rows set to +inf. Returns the names of the lower and upper bounds (N,)
    before the midpoint of an empty interval."""
    axis1 = g.constant("axis_1", [1], np.int64)

    def bounds(sub, fold_model, x_in, m_in):
        _, low, high = method.onnx_bounds(sub, fold_model, network(sub, fold_model, x_in, m_in))
        return [low, high]

    lows, highs = zip(*fold_outputs(g, calibration, bounds, 1))
    folds = g.constant("calibration_folds", calibration.folds, np.int64)
    scores = g.constant("calibration_scores", calibration.scores, np.float64)
    low_ends = g.op("Sub", [g.op("Gather", [g.op("Concat", lows, "fold_lows", axis=1), folds],
                                 "row_lows", axis=1), scores], "low_ends")
    high_ends = g.op("Add", [g.op("Gather", [g.op("Concat", highs, "fold_highs", axis=1), folds],
                                  "row_highs", axis=1), scores], "high_ends")
    n = calibration.scores.shape[0]
    if not method.mondrian:
        return (kth_smallest(g, low_ends, lower_rank(n, alpha), "raw_lower"),
                kth_smallest(g, high_ends, upper_rank(n, alpha), "raw_upper"))
    member, group, sizes = row_groups(g, calibration, alpha)
    infinity = g.constant("infinity", np.inf, np.float64)
    ends = []
    for values, ranks, name in ((low_ends, [lower_rank(s, alpha) for s in sizes], "raw_lower"),
                                (high_ends, [upper_rank(s, alpha) for s in sizes], "raw_upper")):
        ordered_ends = smallest(g, g.op("Where", [member, values, infinity], f"{name}_ends"), n,
                                f"{name}_sorted")
        index = g.op("Unsqueeze", [group_values(g, np.asarray(ranks) - 1, group,
                                                f"{name}_index"), axis1], f"{name}_row_index_2d")
        picked = g.op("GatherElements", [ordered_ends, index], f"{name}_picked", axis=1)
        ends.append(g.op("Squeeze", [picked, axis1], name))
    return ends[0], ends[1]


def cross_set(g: Graph, method, calibration, alpha: float) -> str:
    """Add the CV+ sets (:func:`~._cross.cross_sets`) to graph ``g``: each fold model's
    class scores (N, n_classes) (its network a subgraph, :func:`fold_outputs`), less
    ``SCORE_TOLERANCE``, gathered by the calibration rows' folds (N, n_classes, n) and
    compared with their out-of-fold scores (initializers); the comparisons counted over
    the rows of each test row's group (its own cell or all rows), and the count compared
    with the group's rank ``ceil((1 - alpha)(n_group + 1))``. Memory: ``N n_classes n``.
    Returns the name of the sets, bool (N, n_classes)."""

    def class_scores(sub, fold_model, x_in, m_in):
        classifier_outputs(sub, fold_model, network_output(sub, fold_model, x_in, m_in))
        return [method.score.onnx_scores(sub, cast(sub, "probabilities", "probabilities_double",
                                                   np.float64))]

    axis1, axis2 = g.constant("axis_1", [1], np.int64), g.constant("axis_2", [2], np.int64)
    (columns,) = zip(*fold_outputs(g, calibration, class_scores, 2))
    fold_scores = g.op("Sub", [g.op("Concat", list(columns), "fold_class_scores", axis=2),
                               g.constant("score_tolerance", SCORE_TOLERANCE, np.float64)],
                       "fold_scores_within")  # (N, n_classes, K), before the gather to n
    row_scores = g.op("Gather", [fold_scores, g.constant("calibration_folds",
                                                         calibration.folds, np.int64)],
                      "row_class_scores", axis=2)  # (N, n_classes, n)
    below = g.op("Less", [g.constant("calibration_scores", calibration.scores, np.float64),
                          row_scores], "calibration_below")
    n = calibration.scores.shape[0]
    if method.mondrian:
        member, group, sizes = row_groups(g, calibration, alpha)
        below = g.op("And", [below, g.op("Unsqueeze", [member, axis1], "row_members_3d")],
                     "group_below")
        rank = g.op("Unsqueeze", [group_values(g, [upper_rank(s, alpha) for s in sizes], group,
                                               "rank"), axis1], "row_rank")
    else:
        rank = g.constant("rank", upper_rank(n, alpha), np.int64)
    count = g.op("ReduceSum", [cast(g, below, "below_int", np.int64), axis2], "n_below",
                 keepdims=0)
    return g.op("Less", [count, rank], "set")


def fold_outputs(g: Graph, calibration, build, axis: int) -> list[list[str]]:
    """For each fold model of ``calibration`` (a :class:`~._cross.CrossCalibration`):
    ``build(sub, model, x_in, m_in)`` adds its outputs to a graph of its own, given the
    names of the model's encoded inputs (float32 (N, d_k): the graph's ``X`` and ``M``
    mapped to its own encoding, :func:`~._fold_encoding.fold_inputs`), merged into ``g``
    with the prefix ``fold<k>_`` (:func:`merge`); returns, per model, the names of those
    outputs in ``g`` with a new ``axis`` (for their ``Concat`` along it)."""
    new_axis = g.constant(f"axis_{axis}", [axis], np.int64)
    encoder = calibration.estimator.encoder_
    outputs = []
    for k, model in enumerate(calibration.estimators):
        sub = Graph()
        names = build(sub, model, *fold_inputs(sub, fold_sources(encoder, model.encoder_)))
        merge(g, sub, f"fold{k}_")
        outputs.append([g.op("Unsqueeze", [f"fold{k}_{name}", new_axis],
                             f"fold{k}_output{j}_{axis}d") for j, name in enumerate(names)])
    return outputs


def row_groups(g: Graph, calibration, alpha: float) -> tuple[str, str, np.ndarray]:
    """The group of calibration rows each input row is calibrated on, for a Mondrian
    method: group 0 all rows, then one group per cell calibrated on its own rows
    (:func:`~._cells.own_cells`). Returns the names of each input row's members (bool
    (N, n)) and group (int64 (N,)), and the groups' sizes (n_groups,)."""
    own_mask = own_cells(calibration, alpha)
    own = np.flatnonzero(own_mask)
    n = calibration.scores.shape[0]
    members = np.vstack([np.ones(n, dtype=bool), calibration.cells[None, :] == own[:, None]])
    group_of_cell = np.zeros(own_mask.size, dtype=np.int64)
    group_of_cell[own] = np.arange(1, own.size + 1)
    cell = onnx_cells(g, calibration.estimator, calibration.cell_patterns,
                      calibration.cell_of_count)
    group = group_values(g, group_of_cell, cell, "row_group")
    member = g.op("Gather", [g.constant("group_members", members, np.bool_), group],
                  "row_members", axis=0)
    return member, group, members.sum(axis=1)


def group_values(g: Graph, values, index: str, name: str) -> str:
    """``values`` (int, one per group or cell) of each row's ``index`` (int64 (N,)): (N,)."""
    return g.op("Gather", [g.constant(f"{name}_values", np.asarray(values), np.int64), index],
                name, axis=0)


def merge(g: Graph, sub: Graph, prefix: str, keep=("X", "M")) -> None:
    """Add the nodes and initializers of ``sub`` to ``g``, every name but the inputs
    ``keep`` prefixed with ``prefix``: a second network in one graph (the builders of
    :mod:`neumiss.export` name their nodes the same in every graph)."""

    def rename(name: str) -> str:
        return name if not name or name in keep else prefix + name

    for node in sub.nodes:
        node.input[:] = [rename(name) for name in node.input]
        node.output[:] = [rename(name) for name in node.output]
        node.name = rename(node.name)
        g.nodes.append(node)
    for name, tensor in sub.initializers.items():
        tensor.name = rename(name)
        g.initializers[tensor.name] = tensor


def network(g: Graph, base, x_in: str = "X", m_in: str = "M") -> str:
    """The base model's network output (rows, n_outputs) for tensors ``x_in`` and
    ``m_in``; a quantile head's sorted per row, as ``predict_quantiles`` sorts them."""
    raw = network_output(g, base, x_in, m_in)
    if hasattr(base, "predict_quantiles"):
        raw = smallest(g, raw, len(base.quantiles), "raw_sorted")
    return raw


def point(g: Graph, base, own: str) -> str:
    """``y``, the point prediction (N,) from the network output ``own``: the median
    of a quantile head, as ``predict``."""
    index = (int(np.flatnonzero(np.asarray(base.quantiles) == 0.5)[0])
             if hasattr(base, "predict_quantiles") else 0)
    return scaled(g, base, column(g, own, index, "own_y_raw"), "y")


def quantile_columns(g: Graph, base, own: str) -> tuple[str, str]:
    """A quantile head's lowest and highest quantiles (N,) from its sorted output ``own``."""
    low = scaled(g, base, column(g, own, 0, "own_low_raw"), "own_low")
    high = scaled(g, base, column(g, own, len(base.quantiles) - 1, "own_high_raw"), "own_high")
    return low, high


def column(g: Graph, values: str, index: int, name: str) -> str:
    """Column ``index`` of a (rows, k) tensor, as (rows,)."""
    return g.op("Gather", [values, g.constant(f"index_{index}", index, np.int64)], name, axis=1)


def scaled(g: Graph, base, values: str, name: str) -> str:
    """Network outputs in units of ``y``, float64, as ``base.predict``
    (:func:`~neumiss.export.target_units`)."""
    return target_units(g, base, cast(g, values, f"{name}_double", np.float64), name)


def cast(g: Graph, values: str, name: str, dtype) -> str:
    """``values`` cast to the numpy ``dtype``."""
    return g.op("Cast", [values], name, to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def kth_smallest(g: Graph, values: str, rank: int, name: str) -> str:
    """The ``rank``-th smallest (1-based, a constant) of each row of (N, n): (N,)."""
    return column(g, smallest(g, values, rank, f"{name}_topk"), rank - 1, name)


def split_rows(g: Graph, values: str, counts: str, names: list[str]) -> list[str]:
    """``values`` cut along its rows into parts of ``counts`` (int64 (len(names),)) rows."""
    g.nodes.append(helper.make_node("Split", [values, counts], names, name="split_parts", axis=0))
    return names


def onnx_cells(g, estimator, cell_patterns: np.ndarray, cell_of_count: np.ndarray) -> str:
    """Add to graph ``g`` the cell (int64 (N,)) of each input row, as :func:`assign_cells`:
    the index of its mask among the frequent patterns, else the cell of its number of
    missing entries (the mask of the input columns of the fitted base ``estimator``)."""
    axis1 = g.constant("axis_1", [1], np.int64)
    mask = g.op("Gather", ["M", g.constant("group_starts", group_starts(estimator), np.int64)],
                "M_columns", axis=1)
    count = cast(g, g.op("ReduceSum", [mask, axis1], "n_missing_float", keepdims=0),
                       "n_missing", np.int64)
    cell = g.op("Gather", [g.constant("cell_of_count", cell_of_count, np.int64), count],
                "count_cell", axis=0)
    if cell_patterns.shape[0]:
        axis0, axis2 = g.constant("axis_0", [0], np.int64), g.constant("axis_2", [2], np.int64)
        difference = g.op("Abs", [g.op("Sub", [
            g.op("Unsqueeze", [mask, axis1], "M_3d"),
            g.op("Unsqueeze", [g.constant("cell_patterns", cell_patterns.astype(np.float32)),
                               axis0], "cell_patterns_3d")], "pattern_difference")],
            "pattern_distance")
        same = cast(g, g.op("Equal", [
            g.op("ReduceSum", [difference, axis2], "n_different", keepdims=0),
            g.constant("zero", 0.0)], "same_pattern"), "same_pattern_float", np.float32)
        frequent = g.op("Greater", [g.op("ReduceSum", [same, axis1], "n_same", keepdims=0),
                                    g.constant("zero", 0.0)], "frequent")
        index = g.op("ArgMax", [same], "pattern_cell", axis=1, keepdims=0)
        cell = g.op("Where", [frequent, index, cell], "cell")
    return cell
