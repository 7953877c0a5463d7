"""Piecewise-linear encodings of the block's output: the heads' additive splines.

A linear head fits one slope per feature; many real targets bend with a feature
(a growth curve in age, a saturating dose). Beside the linear part, a head with a
spline term adds ``sum_r w_r ramp_r(h)`` where each ramp is a piecewise-linear
encoding of one column of the block's output ``h`` on a bin between two of its
quantiles (the numeric embeddings of tabular networks, Gorishniy et al. 2022):

    ramp_r(h) = clip((h[:, feature_r] - left_r) / width_r, 0, 1)

With the linear term, the ramps of a column span every continuous function of it
that is linear between its knots (the bins' edges): an additive spline model, fitted
in closed form at depth 0 like the linear head (:func:`~neumiss.network._start.start_linear_parts`).
The knots are fixed at fit (buffers, not trained); a ramp is an ordinary
``Gather``, ``Sub``, ``Div`` and ``Clip`` in ONNX.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

#: Bins per column of the spline term (quantile bins of its observed values).
SPLINE_BINS = 16

#: Ramps of a network at most: a wide table gets fewer bins per column
#: (:func:`spline_bins`), so that the linear fit stays a few hundred columns.
SPLINE_MAX_RAMPS = 512


def spline_bins(n_features: int) -> int:
    """Bins per column for ``n_features`` columns: :data:`SPLINE_BINS`, fewer for wide
    tables (at most :data:`SPLINE_MAX_RAMPS` ramps in all); 1 or less means no spline."""
    return min(SPLINE_BINS, SPLINE_MAX_RAMPS // max(int(n_features), 1))


def quantile_ramps(x: np.ndarray, mask: np.ndarray, n_bins: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ramps of ``n_bins`` quantile bins of each column's observed values.

    Parameters
    ----------
    x, mask : ndarray of shape (n, d)
        Values (any where missing) and the mask (True or 1 = missing).
    n_bins : int
        Bins per column; equal quantiles merge, and a column with fewer than three
        distinct knots (binary, constant, never observed) gets no ramp: the linear
        term already fits any function of two values.

    Returns
    -------
    feature : ndarray of shape (R,), int64
        The column of each ramp.
    left, width : ndarray of shape (R,), float64
        Each ramp's left knot and its bin's width (> 0).
    """
    observed = np.asarray(mask) < 0.5
    levels = np.linspace(0.0, 1.0, int(n_bins) + 1)
    feature, left, width = [], [], []
    for j in range(x.shape[1]):
        values = x[observed[:, j], j]
        if values.size == 0:
            continue
        knots = np.unique(np.quantile(values, levels))
        if knots.size < 3:
            continue
        feature.append(np.full(knots.size - 1, j))
        left.append(knots[:-1])
        width.append(np.diff(knots))
    if not feature:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    return (np.concatenate(feature).astype(np.int64), np.concatenate(left),
            np.concatenate(width))


class PiecewiseLinearEncoding(nn.Module):
    """``n_ramps`` ramps of the block's output, ``clip((h[..., feature] - left) / width,
    0, 1)``: (..., d) -> (..., n_ramps).

    The knots are buffers (saved with the weights, not trained), set by
    :meth:`set_ramps`; a new encoding's ramps read column 0 with width 1.
    """

    def __init__(self, n_ramps: int) -> None:
        super().__init__()
        self.n_ramps = int(n_ramps)
        self.register_buffer("feature", torch.zeros(self.n_ramps, dtype=torch.int64))
        self.register_buffer("left", torch.zeros(self.n_ramps))
        self.register_buffer("width", torch.ones(self.n_ramps))

    @torch.no_grad()
    def set_ramps(self, feature, left, width) -> None:
        """Set the knots: ``feature`` (R,) column indices, ``left`` and ``width`` (R,)."""
        for name, value in (("feature", feature), ("left", left), ("width", width)):
            buffer = getattr(self, name)
            value = torch.as_tensor(np.asarray(value))
            if value.shape != buffer.shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, the encoding "
                                 f"holds {self.n_ramps} ramps")
            buffer.copy_(value.to(buffer.dtype))

    def centres(self) -> torch.Tensor:
        """``1 - (j + 0.5) / B`` for the ``j``-th of the ``B`` ramps of its column (they are
        in order, :func:`quantile_ramps`), shape (n_ramps,): the ramp's mean over the
        training rows were the bins of equal mass (as quantile bins are) and the values
        spread evenly within them; whatever the spread, within ``0.5 / B`` of that mean (a
        ramp is 1 above its bin and 0 below it). The ramps of a column are far from
        centred, the first near 1, the last near 0: the training subtracts these
        (:class:`~neumiss.network.StackedNetwork`)."""
        counts = torch.bincount(self.feature)  # ramps per column
        first = torch.cumsum(counts, 0) - counts  # the index of each column's first ramp
        position = torch.arange(self.n_ramps, device=self.feature.device) - first[self.feature]
        return (1.0 - (position + 0.5) / counts[self.feature]).to(self.left.dtype)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Shapes: (..., d) -> (..., n_ramps)."""
        # index_select, not h[..., feature]: the same gather, and its backward (index_add)
        # costs half of advanced indexing's (index_put with accumulation)
        return ((h.index_select(-1, self.feature) - self.left) / self.width).clamp(0.0, 1.0)

    def extra_repr(self) -> str:
        return f"n_ramps={self.n_ramps}"
