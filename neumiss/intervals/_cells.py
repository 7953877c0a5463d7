"""A partition of missingness patterns into cells, for Mondrian conformal prediction.

Frequent patterns are cells of their own; the rows of the other patterns are
grouped by their number of missing entries, consecutive numbers pooled until
each cell is expected to hold enough calibration rows. The partition is drawn
from the masks of the *training* rows only (not the calibration rows), so
conformal prediction within each cell keeps its exact guarantee: coverage
``1 - alpha`` conditionally on the cell, under any missingness mechanism
(MNAR included), because rows of one cell stay exchangeable whatever made
their values missing. A frequent pattern's coverage is thus mask-conditional.

A partition is two arrays: ``patterns`` (k, p) bool, the frequent patterns
(cells ``0 .. k-1``), and ``count_cells`` (p + 1,) int, the cell of a row of
any other pattern with ``q`` missing entries (cells ``k ..``).
"""

from __future__ import annotations

import numpy as np

from ..simulation import group_patterns
from ._ranks import required_calibration_rows

#: Calibration rows a cell is expected to hold. Smaller cells follow the
#: coverage of each count of missing entries more closely (a cell pooling counts
#: whose coverages differ under-covers the hardest: results/intervals/README.md);
#: 50 rows leave a finite margin at the default ``calibration_confidence`` (14 rows
#: at alpha = 0.1, 28 at 0.05).
CELL_ROWS = 50


def mask_cells(mask, rows_per_training_row: float, cell_rows: int = CELL_ROWS):
    """The partition of the patterns of ``mask`` (training rows, bool (n, p)).

    ``rows_per_training_row``: calibration rows expected per training row
    (``n_calibration / n_training``). Returns ``(patterns, count_cells)``.
    """
    mask = np.asarray(mask, dtype=bool)
    p = mask.shape[1]
    patterns, inverse = group_patterns(mask)
    expected = np.bincount(inverse, minlength=patterns.shape[0]) * rows_per_training_row
    frequent = expected >= cell_rows
    others = ~frequent[inverse]
    per_count = np.bincount(mask[others].sum(axis=1), minlength=p + 1) * rows_per_training_row
    count_cells = np.empty(p + 1, dtype=np.int64)
    cell, filled = int(frequent.sum()), 0.0
    for q in range(p + 1):  # consecutive counts pooled until a cell is full enough
        count_cells[q] = cell
        filled += per_count[q]
        if filled >= cell_rows and q < p:
            cell, filled = cell + 1, 0.0
    if filled < cell_rows and cell > frequent.sum():  # the rest joins the last full cell
        count_cells[count_cells == cell] = cell - 1
    return patterns[frequent], count_cells


def assign_cells(mask, patterns, count_cells) -> np.ndarray:
    """The cell of each row of ``mask`` (bool (n, p)): int64 (n,)."""
    mask = np.asarray(mask, dtype=bool)
    distinct, inverse = group_patterns(mask)
    index = {row.tobytes(): k for k, row in enumerate(np.asarray(patterns, dtype=bool))}
    cells = np.array([index.get(row.tobytes(), -1) for row in distinct], dtype=np.int64)
    other = cells < 0
    cells[other] = np.asarray(count_cells)[distinct[other].sum(axis=1)]
    return cells[inverse]


def group_starts(estimator) -> np.ndarray:
    """The first encoded column of each input column of a fitted base model, int (p,)."""
    widths = [column.width for column in estimator.encoder_.columns_]
    return np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)


def own_cells(calibration, alpha: float) -> np.ndarray:
    """Whether each mask cell of ``calibration`` (``cells``, ``cell_patterns``,
    ``cell_of_count``) holds enough rows to be calibrated on its own at ``alpha``
    (:func:`~neumiss.intervals.required_calibration_rows`), bool (n_cells,)."""
    n_cells = int(max(calibration.cell_patterns.shape[0], calibration.cell_of_count.max() + 1))
    sizes = np.bincount(calibration.cells, minlength=n_cells)
    return sizes >= required_calibration_rows(alpha)
