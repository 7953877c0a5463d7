"""``neumiss benchmark``: the paper's simulation study (Section 5.4, Figure 5), rerun.

A *run* is one method on one (cell, repeat) of the paper's grid. For each run
the benchmark records the test R², the Bayes rate (R² of the Bayes predictor
on the same test set; none for probit self-masking), the fit seconds and the
peak memory of the fit, and appends one row to ``runs.csv``. ``summary.md``
(medians, with the paper's published NeuMiss and EM medians beside them) and
``figure.png`` (boxplots in the style of the paper's Figure 5) are rebuilt
from that file.

Modules: :mod:`._data` (a run's key and simulated data), :mod:`._grid` (the paper's
grid, the runs of a grid, the paper's medians), :mod:`._methods`
(the compared methods), :mod:`._runner` (running them, isolated and measured),
:mod:`._store` (``runs.csv``), :mod:`._report` (table and figure), :mod:`._cli`
(the command: ``neumiss benchmark --help``, also ``python -m neumiss.benchmark``).
The real-data suite (``neumiss benchmark --suite real``) is the subpackage
:mod:`.realdata`; its tasks and runner are re-exported here as ``TASKS``,
``Task`` and ``run_suite``. None imports torch until a run starts.
"""

from . import realdata
from ._data import MECHANISMS, RunSpec, SimulatedData, simulate_run
from ._grid import PAPER_MEDIANS, grid
from ._methods import DEFAULT_METHODS, METHODS, NEUMISS_PARAMS, Method, RunSettings
from ._report import add_gaps, format_summary, load_runs, plot_figure, summarize, write_report
from ._runner import BenchmarkResult, execute_run, run_benchmark
from ._store import COLUMNS, read_runs
from .realdata import TASKS, Task, run_suite

__all__ = [
    "BenchmarkResult",
    "COLUMNS",
    "DEFAULT_METHODS",
    "MECHANISMS",
    "METHODS",
    "Method",
    "NEUMISS_PARAMS",
    "PAPER_MEDIANS",
    "RunSettings",
    "RunSpec",
    "SimulatedData",
    "TASKS",
    "Task",
    "add_gaps",
    "execute_run",
    "format_summary",
    "grid",
    "load_runs",
    "plot_figure",
    "read_runs",
    "realdata",
    "run_benchmark",
    "run_suite",
    "simulate_run",
    "summarize",
    "write_report",
]
