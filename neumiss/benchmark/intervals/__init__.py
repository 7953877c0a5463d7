"""The interval suite of ``neumiss benchmark --suite intervals``: conformal prediction
intervals with missing values, against the oracle interval.

Modules: :mod:`._runner` (the grid, one simulated run, ``runs.csv``),
:mod:`._report` (pooled groups, ``summary.md``, ``summary.csv``, ``figure.png``),
:mod:`._classes` (prediction sets on simulated classes, ``--classification``),
:mod:`._mapie` (MAPIE's LAC beside them, optional) and :mod:`._real` (the sets on the
real-data suite's binary tasks, ``--classification --real``).
Nothing here imports torch until a run starts.
"""

from ._report import MIN_GROUP_ROWS, format_summary, pool_groups, summarize, write_report
from ._runner import COLUMNS, METHODS, IntervalRun, execute_run, plan, run_intervals

__all__ = [
    "COLUMNS", "METHODS", "MIN_GROUP_ROWS", "IntervalRun", "execute_run", "format_summary",
    "plan", "pool_groups", "run_intervals", "summarize", "write_report",
]
