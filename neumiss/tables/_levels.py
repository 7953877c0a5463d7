"""Indicator columns for the values of integer columns: which values get one
(:func:`integer_levels`), and which columns keep theirs when not all of them can
(:func:`levels_within_budget`).

Indicator columns (``integer_levels``) let a network fit a separate effect per value of a
coded column. A table of many coded items (a questionnaire: 135 items of six answers)
would get more indicators than other columns, and the block, whose cost grows as the
square of its columns, would cost over four times as much. Within that budget (as many
indicators as other encoded columns), :func:`levels_within_budget` keeps the columns
whose values explain the target beyond a straight line the most: a person's education
(a code of 1 to 8, "in college" among them) says much more about their age than its
code's line does, an item's answer little more than its line.

The screen reads the training rows' target once per column: the share of the target's
variance that a mean per value explains beyond the column's least-squares line, less the
share that the extra means would explain by chance (one row's share, ``1 / n``, per mean
beyond the line's two parameters). Columns are kept greedily in decreasing share while
their indicators fit in what is left of the budget; a column whose share is below
:data:`MIN_NONLINEAR_SHARE` keeps none. Without a target every indicator is dropped.
"""

from __future__ import annotations

import numpy as np

#: Distinct observed values of a numeric column of integers that gets indicator columns
#: (``integer_levels``): from LEVELS_MIN (fewer: the value alone says everything) to
#: LEVELS_MAX (more: a measurement rather than a code).
LEVELS_MIN, LEVELS_MAX = 3, 32

#: Rows a value needs at fit for its own indicator column (rarer values share "none").
LEVEL_MIN_ROWS = 10

#: Over the budget, a column keeps its indicators only when its per-value means explain
#: this share of the target's variance at least beyond its line and chance
#: (:func:`nonlinear_share`): half the gain ``integer_levels="auto"`` asks of all the
#: indicators together (``LEVELS_MIN_GAIN``), so that many items of a small effect each do
#: not crowd out the columns that carry one.
MIN_NONLINEAR_SHARE = 0.01


def integer_levels(values: np.ndarray) -> tuple[float, ...]:
    """The values of a numeric column (float array, NaN = missing) that get indicator
    columns: those seen :data:`LEVEL_MIN_ROWS` times at least, when the observed values
    are :data:`LEVELS_MIN` to :data:`LEVELS_MAX` distinct integers of at most 2**24 in
    absolute value and two of them at least are that frequent; else none."""
    head = values[:256]  # most columns are not integers: seen in their first values
    if np.any(np.abs(head - np.round(head)) > 0):  # NaN compares False
        return ()
    observed = values[~np.isnan(values)]
    if np.any(observed != np.round(observed)):
        return ()
    distinct, counts = np.unique(observed, return_counts=True)
    if not LEVELS_MIN <= distinct.size <= LEVELS_MAX or np.abs(distinct).max() > 2**24:
        return ()  # beyond 2**24, float32 scorers could not tell neighbouring integers
    frequent = distinct[counts >= LEVEL_MIN_ROWS]
    return tuple(map(float, frequent)) if frequent.size >= 2 else ()


def nonlinear_share(values: np.ndarray, levels: tuple[float, ...], target: np.ndarray) -> float:
    """The share of ``target``'s variance that a mean per value of ``values`` explains beyond
    its least-squares line, less ``(groups - 2) / n`` (chance), over the ``n`` rows where
    the value is observed.

    Parameters
    ----------
    values : ndarray of shape (n_samples,), float, NaN = missing
    levels : the values with an indicator column; the other values share one group.
    target : ndarray of shape (n_samples, k)
        The target (k = 1), or the indicators of its classes.
    """
    observed = ~np.isnan(values)
    v, t = values[observed], target[observed]
    n = v.shape[0]
    total = float(((t - t.mean(axis=0)) ** 2).sum())
    if n < 3 or total <= 0.0 or np.ptp(v) == 0.0:
        return 0.0
    design = np.column_stack([np.ones(n), v])
    coef, *_ = np.linalg.lstsq(design, t, rcond=None)
    linear = float(((t - design @ coef) ** 2).sum())
    group = np.where(np.isin(v, levels), np.searchsorted(levels, v), len(levels))
    counts = np.bincount(group, minlength=len(levels) + 1)
    sums = np.stack([np.bincount(group, t[:, j], minlength=counts.size)
                     for j in range(t.shape[1])], axis=1)
    means = sums / np.maximum(counts, 1)[:, None]
    within = float(((t - means[group]) ** 2).sum())
    groups = int((counts > 0).sum())
    return (linear - within) / total - (groups - 2) / n


def levels_within_budget(levels: dict[int, tuple[float, ...]], values: dict[int, np.ndarray],
                         budget: int, target: np.ndarray | None) -> dict[int, tuple[float, ...]]:
    """The columns (positions) that keep their levels, and those levels.

    Parameters
    ----------
    levels : position -> the column's levels (``integer_levels``), for every column that
        has some.
    values : position -> the column's values, ndarray of shape (n_samples,), NaN = missing.
    budget : int
        Most indicator columns in all (the other encoded columns' count).
    target : ndarray of shape (n_samples, k), or None
        The target (k = 1) or its classes' indicators; None keeps no levels.
    """
    if sum(map(len, levels.values())) <= budget:
        return dict(levels)
    if target is None:
        return {}
    shares = {p: nonlinear_share(values[p], levels[p], target) for p in levels}
    kept, left = {}, budget
    for position in sorted(levels, key=lambda p: (-shares[p], p)):
        if shares[position] >= MIN_NONLINEAR_SHARE and len(levels[position]) <= left:
            kept[position] = levels[position]
            left -= len(levels[position])
    return kept
