"""The real-data suite of ``neumiss benchmark --suite real``: R data sets with missing values.

Data sets of Debian's R data packages are exported once to a local cache
(``bash scripts/setup_realdata.sh``); each :class:`Task` names one, its target
and the columns it drops. Every method is cross-validated on the same folds
(5 folds x 2 repeats), one thread per fit; ``runs.csv`` gets one row per fit
and ``summary.md`` and ``figure.png`` are rebuilt from it.

Modules: :mod:`._tasks` (the tasks), :mod:`._cache` (exporting and loading the
data sets), :mod:`._protocol` (folds, seeds, metrics), :mod:`._methods` (the
compared methods), :mod:`._store` (``runs.csv``), :mod:`._runner` (running the
folds), :mod:`._report` (tables and figure). ``python -m neumiss.benchmark.realdata
[CACHE]`` exports the data sets. None imports torch until a NeuMiss fit starts.
"""

from ._cache import DEFAULT_CACHE, CacheMissingError, export_datasets, load_task, read_dataset
from ._methods import DEFAULT_METHODS, METHODS, NEUMISS_MLP, RealMethod, neumiss_method
from ._protocol import DEFAULT_REPEATS, N_FOLDS, fold_indices, score
from ._report import format_summary, load_runs, plot_figure, rank_methods, summarize, write_report
from ._runner import SuiteResult, execute_run, plan, run_suite
from ._store import COLUMNS, RealRun, read_runs
from ._tasks import HALVES, TASKS, Task, select_tasks, split_halves

__all__ = [
    "COLUMNS",
    "CacheMissingError",
    "DEFAULT_CACHE",
    "DEFAULT_METHODS",
    "DEFAULT_REPEATS",
    "HALVES",
    "METHODS",
    "NEUMISS_MLP",
    "N_FOLDS",
    "RealMethod",
    "RealRun",
    "SuiteResult",
    "TASKS",
    "Task",
    "execute_run",
    "export_datasets",
    "fold_indices",
    "format_summary",
    "load_runs",
    "load_task",
    "neumiss_method",
    "plan",
    "plot_figure",
    "rank_methods",
    "read_dataset",
    "read_runs",
    "run_suite",
    "score",
    "select_tasks",
    "split_halves",
    "summarize",
    "write_report",
]
