"""A cross-conformal fold model's encoded inputs, computed inside the ONNX graph from the
encoded inputs of the model of all rows.

A CV+ graph (:mod:`._onnx`) takes one encoded input: ``X`` and ``M``, float32 (N, d), the
table encoded by the model of all rows (``estimator.encoder_``, 0 where missing, 1 in
``M``). Each fold model learned its own :class:`~neumiss.tables.TableEncoder` from its
own training rows, a subset of them, so its layout (d_k columns) may lack a category or an
integer level too rare to reach them, or have a level that the model of all rows left
without an indicator. :func:`fold_inputs` maps ``X`` and ``M`` to the fold's layout:
what ``fold.encoder_.transform`` gives on the raw rows, 0 where missing, and its mask,
the fold network's inputs. Column by column:

* a numeric column's value, a boolean column, and a column encoded alike by both
  encoders: the same column;
* the indicator of an integer level ``v`` (``name=v``): the indicator of ``v`` of the
  model of all rows when it has one, else ``value == v`` on the value (float32: exact for
  every value float32 holds, the integers of ``integer_levels`` included; a value within
  float32 rounding of ``v`` but not ``v`` would compare equal); missing where the value
  is. A value without an indicator of the fold gives all its indicators 0, as the
  encoder does;
* a one-hot category: the columns of the categories of the model of all rows that the
  fold reads as it (:func:`~neumiss.tables.category_codes` of their names: itself, or a
  category spelled alike but for spaces); a category the fold never saw marks the
  fold's whole group missing, as the encoder reads an unseen category.

A column is the largest of its value sources (``Gather`` and ``Max``: no arithmetic, so
the copies are exact), an indicator the comparison of its value; its mask the largest of
its mask sources (the ``M`` column of its value, and the ``X`` columns of the categories
the fold never saw); every missing entry is then set to 0 (``Where``).

Target statistics cannot be mapped: ``X`` holds those of the model of all rows, from
which the category, and so a fold model's statistic, cannot be told (two categories may
share one). :func:`fold_sources` refuses them, as it refuses a column that the fold
encodes as another kind, or with an ``<other>`` column, otherwise than the model of all
rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from ..tables import category_codes


@dataclass(frozen=True)
class FoldSources:
    """Where each of a fold model's ``d_k`` encoded columns comes from in the graph's
    input (``X``, ``M``: (N, d)).

    Parameters
    ----------
    values : ndarray of int64 of shape (d_k, s)
        The columns of ``X`` whose largest is the column's value (each row padded by
        repeating its first column).
    masks : ndarray of int64 of shape (d_k, t)
        The columns of ``[M, X]`` (N, 2 d) whose largest is the column's mask (padded so).
    levels : ndarray of float64 of shape (d_k,)
        The level an indicator compares its value with, NaN for a column that is copied.
    """

    values: np.ndarray
    masks: np.ndarray
    levels: np.ndarray


def fold_sources(encoder, fold_encoder) -> FoldSources | None:
    """How ``fold_encoder``'s columns are read from those of ``encoder`` (the model of all
    rows'), both fitted :class:`~neumiss.tables.TableEncoder` of the same input columns;
    None when every column is encoded alike (the graph's ``X`` and ``M`` are the fold's).

    Raises
    ------
    ValueError
        Naming the column, for a target-encoded column encoded otherwise, a column of
        another kind, or an ``<other>`` column encoded otherwise.
    """
    if list(encoder.columns_) == list(fold_encoder.columns_):
        return None
    d = int(encoder.n_features_out_)
    starts = np.cumsum([0] + [c.width for c in encoder.columns_])
    columns = []
    for start, own, fold in zip(starts[:-1], encoder.columns_, fold_encoder.columns_,
                                strict=True):
        columns += _column_sources(own, fold, int(start), d)
    values, masks, levels = zip(*columns)
    return FoldSources(_padded(values), _padded(masks), np.array(levels, dtype=np.float64))


def _column_sources(own, fold, start: int, d: int) -> list[tuple[list, list, float]]:
    """``(value sources, mask sources, level)`` of each of ``fold``'s encoded columns
    (a :class:`~neumiss.tables.ColumnEncoding`) from ``own``'s, which start at column
    ``start`` of ``X`` (of ``d`` columns)."""
    if own == fold:
        return [([start + j], [start + j], np.nan) for j in range(own.width)]
    name = own.name
    if own.kind != fold.kind:
        raise ValueError(f"column {name!r} is {fold.kind} for it but {own.kind} for the model "
                         "of all rows: give the column a dtype (e.g. category or float)")
    if own.target_encoded or fold.target_encoded:
        raise ValueError(
            f"column {name!r} is encoded by target statistics, which each model learns "
            "from its own training rows: the graph's X holds those of the model of all "
            "rows, from which the category, and so a fold model's statistic, cannot be "
            "told. Refit with cv=None (a split: one model), or encode the column yourself "
            "(fewer categories, one-hot encoded, or numbers)")
    if own.other or fold.other:
        raise ValueError(f"column {name!r} has an '<other>' column (categories fitted "
                         "without the target), which each model draws from its own rows: "
                         "refit with cv=None")
    if own.kind == "numeric":
        return [([start], [start], np.nan)] + [
            ([start + 1 + own.levels.index(v)], [start], np.nan) if v in own.levels
            else ([start], [start], v) for v in fold.levels]
    # one-hot (a boolean column, without fitted state, is encoded alike: copied above);
    # the fold's categories, seen in a subset of the rows, are some of own's, in order
    codes = category_codes(np.array(own.categories, dtype=object), fold.categories)
    unseen = [d + start + i for i in np.flatnonzero(codes < 0)]  # in [M, X]: X's columns
    return [([start + i for i in np.flatnonzero(codes == j)], [start] + unseen, np.nan)
            for j in range(len(fold.categories))]


def _padded(sources) -> np.ndarray:
    """Lists of column indices as an int64 array (n, longest), each row padded by
    repeating its first index (the largest of a column and itself is the column)."""
    width = max(len(s) for s in sources)
    return np.array([list(s) + [s[0]] * (width - len(s)) for s in sources], dtype=np.int64)


def fold_inputs(g, sources: FoldSources | None, x_in: str = "X",
                m_in: str = "M") -> tuple[str, str]:
    """Add to graph ``g`` (a :class:`~neumiss.export.Graph`) a fold model's encoded inputs
    from the graph's ``x_in`` and ``m_in`` (float32 (N, d)) as ``sources`` says
    (:func:`fold_sources`). Returns the names of its ``X`` (0 where missing) and ``M``
    (1 where missing), float32 (N, d_k); ``x_in`` and ``m_in`` themselves for None."""
    if sources is None:
        return x_in, m_in
    both = g.op("Concat", [m_in, x_in], "fold_mask_sources", axis=1)  # (N, 2 d)
    value = _largest(g, x_in, sources.values, "fold_values")
    mask = _largest(g, both, sources.masks, "fold_M")
    compared = ~np.isnan(sources.levels)
    if compared.any():  # an integer level of the fold without an indicator of all rows'
        equal = g.op("Equal", [value, g.constant("fold_levels", np.nan_to_num(sources.levels))],
                     "fold_level_equal")
        value = g.op("Where", [g.constant("fold_compared", compared, np.bool_),
                               g.op("Cast", [equal], "fold_indicators", to=TensorProto.FLOAT),
                               value], "fold_values_indicators")
    missing = g.op("Cast", [mask], "fold_missing", to=TensorProto.BOOL)
    return g.op("Where", [missing, g.constant("fold_zero", 0.0), value], "fold_X"), mask


def _largest(g, values: str, columns: np.ndarray, name: str) -> str:
    """The largest of ``values``' columns ``columns`` (d_k, s) per row: (N, d_k)."""
    gathered = [g.op("Gather", [values, g.constant(f"{name}_columns_{j}", columns[:, j],
                                                   np.int64)], f"{name}_{j}", axis=1)
                for j in range(columns.shape[1])]
    return gathered[0] if len(gathered) == 1 else g.op("Max", gathered, name)
