"""Mask cells of the Mondrian method: frequent patterns alone, the others pooled by
their number of missing entries."""

import numpy as np

from neumiss.intervals import assign_cells, mask_cells


def test_mask_cells_keep_frequent_patterns_and_pool_counts():
    rng = np.random.default_rng(0)
    mask = rng.random((4000, 4)) < 0.3
    patterns, count_cells = mask_cells(mask, 0.25, cell_rows=100)
    distinct, counts = np.unique(mask, axis=0, return_counts=True)
    assert {p.tobytes() for p in patterns} == {p.tobytes() for p in distinct[counts * 0.25 >= 100]}
    assert (np.diff(count_cells) >= 0).all() and count_cells[0] == len(patterns)
    cells = assign_cells(mask, patterns, count_cells)
    for row, cell in zip(mask[:200], cells[:200]):
        match = [k for k, p in enumerate(patterns) if (p == row).all()]
        assert cell == (match[0] if match else count_cells[row.sum()])
    others = cells >= len(patterns)  # every pooled cell is expected to hold 100 rows
    assert (np.bincount(cells[others])[len(patterns):] * 0.25 >= 100).all()


def test_a_small_partition_by_hand():
    # 3 features, 1 calibration row expected per training row. Patterns with at least
    # `cell_rows` rows are cells; the others are pooled by count of missing entries,
    # consecutive counts until a cell is full, and a last cell too small joins the
    # one before.
    mask = np.array([[0, 0, 0]] * 30 + [[1, 0, 0]] * 3 + [[0, 1, 0]] * 3
                    + [[1, 1, 0]] * 2 + [[0, 1, 1]] * 2 + [[1, 1, 1]] * 5, dtype=bool)
    patterns, count_cells = mask_cells(mask, 1.0, cell_rows=4)
    np.testing.assert_array_equal(patterns, [[False, False, False], [True, True, True]])
    # Count 1 (6 rows) fills cell 2; count 2 (4 rows) fills cell 3; count 3 (no row
    # left) would be cell 4 and joins cell 3.
    np.testing.assert_array_equal(count_cells, [2, 2, 3, 3])
    rows = np.array([[0, 0, 0], [1, 1, 1], [0, 0, 1], [1, 0, 1], [1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(assign_cells(rows, patterns, count_cells), [0, 1, 2, 3, 1])
    # Cells of 10 rows: only the fully observed pattern is frequent; counts 0-2 (10 rows)
    # fill cell 1, and count 3 (5 rows) joins it.
    patterns, count_cells = mask_cells(mask, 1.0, cell_rows=10)
    np.testing.assert_array_equal(patterns, [[False, False, False]])
    np.testing.assert_array_equal(count_cells, [1, 1, 1, 1])
