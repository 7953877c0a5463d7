"""ONNX export of a fitted :class:`~neumiss.intervals.ConformalRegressor`: outputs
``y``, ``lower`` and ``upper``; and the graph pieces the interval methods share.

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

Metadata adds ``interval_method``, ``alpha``, ``n_calibration`` and
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
    finish_model,
    metadata,
    network_output,
    smallest,
    target_units,
)


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
    method, calibration, alpha, confidence = model._calibrated()
    base = calibration.estimator
    check_exportable(base, opset)
    g = Graph()
    lower, upper = method.onnx_interval(g, calibration, alpha, confidence)
    # An empty interval (lower > upper) becomes its midpoint, as predict_interval does.
    mid = g.op("Mul", [g.op("Add", [lower, upper], "bound_sum"),
                       g.constant("half", 0.5, np.float64)], "midpoint")
    g.op("Min", [lower, mid], "lower")
    g.op("Max", [upper, mid], "upper")
    outputs = [helper.make_tensor_value_info(name, TensorProto.DOUBLE, ["N"])
               for name in ("y", "lower", "upper")]
    n_calibration = calibration.scores.shape[0]
    meta = metadata(base, "regression") | {
        "estimator": type(model).__name__,
        "base_estimator": type(base).__name__,
        "interval_method": method.name,
        "alpha": repr(alpha),
        "n_calibration": str(n_calibration),
        "embedded_calibration_rows": str(n_calibration if method.keeps_rows else 0),
    }
    return finish_model(g, base, outputs, meta, opset, path)


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
