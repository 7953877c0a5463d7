"""The local cache of exported R data sets: writing it (through R) and reading it back.

``export_datasets.R`` (package data beside this module) writes, per data set,
``PACKAGE.DATASET.csv`` and ``PACKAGE.DATASET.json`` (each column's R type;
factor levels in order). :func:`read_dataset` rebuilds the R types as pandas
dtypes: numeric -> ``float64``, integer -> ``Int64``, logical -> ``boolean``,
factor -> ``category`` (R's levels, in order; ordered factors ordered),
character -> ``object``; an empty CSV field (R's NA) is missing in every type.
:func:`load_task` applies a :class:`~.tasks.Task` to give the features and target.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ._tasks import Task

#: Where ``scripts/setup_realdata.sh`` puts the cache unless told otherwise.
DEFAULT_CACHE = Path("benchmark_results") / "realdata_cache"
SETUP_HINT = "run `bash scripts/setup_realdata.sh [CACHE_DIR]` to export the R data sets"
R_TYPES = ("numeric", "integer", "logical", "factor", "character")


class CacheMissingError(FileNotFoundError):
    """A data set is not in the cache; the message says how to export it."""


def _paths(cache, package: str, dataset: str) -> tuple[Path, Path]:
    """The CSV and JSON files of ``package::dataset`` in ``cache``."""
    stem = f"{package}.{dataset}"
    return Path(cache) / f"{stem}.csv", Path(cache) / f"{stem}.json"


def export_datasets(tasks: Iterable[Task], cache=DEFAULT_CACHE) -> None:
    """Export the data sets of ``tasks`` into ``cache`` with ``Rscript`` (skipping those there).

    Raises ``RuntimeError`` when Rscript is not installed or the export fails.
    """
    rscript = shutil.which("Rscript")
    if rscript is None:
        raise RuntimeError(f"Rscript not found: {SETUP_HINT} (it installs R as root)")
    sources = list(dict.fromkeys(task.source for task in tasks))
    script = resources.files(__package__) / "export_datasets.R"
    with resources.as_file(script) as path:
        result = subprocess.run([rscript, str(path), str(cache), *sources], check=False)
    if result.returncode != 0:
        raise RuntimeError(f"export_datasets.R failed (exit {result.returncode}); see above")


def read_schema(cache, package: str, dataset: str) -> dict:
    """The JSON schema of an exported data set: ``source`` and ``columns`` (name, type, ...).

    Raises :class:`CacheMissingError` when it is not in ``cache``.
    """
    csv_path, json_path = _paths(cache, package, dataset)
    for path in (json_path, csv_path):
        if not path.exists():
            raise CacheMissingError(f"{package}::{dataset} is not in {cache} (no {path.name}): "
                                    f"{SETUP_HINT}")
    return json.loads(json_path.read_text(encoding="utf-8"))


def read_dataset(cache, package: str, dataset: str) -> pd.DataFrame:
    """An exported data set as a DataFrame with the R types rebuilt (see the module doc).

    Raises :class:`CacheMissingError` when it is not in ``cache``, ``ValueError``
    naming the file and column when the CSV does not match its schema.
    """
    schema = read_schema(cache, package, dataset)
    csv_path, _ = _paths(cache, package, dataset)
    columns = schema["columns"]
    text = pd.read_csv(
        csv_path, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8"
    )
    names = [c["name"] for c in columns]
    if list(text.columns) != names:
        raise ValueError(f"{csv_path}: columns {list(text.columns)} differ from its schema's "
                         f"{names}; export it again")
    return pd.DataFrame({c["name"]: _typed(text[c["name"]], c, csv_path) for c in columns})


def _typed(values: pd.Series, column: dict, path: Path) -> pd.Series:
    """The text column ``values`` (NaN = missing) as the pandas dtype of its R type."""
    name, kind = column["name"], column["type"]
    if kind not in R_TYPES:
        raise ValueError(f"{path}: column {name!r} has unknown type {kind!r}")
    if kind in ("numeric", "integer"):
        numbers = pd.to_numeric(values, errors="coerce")
        bad = numbers.isna() & values.notna()
        if kind == "integer" and not bad.any():
            bad = numbers.notna() & (numbers != np.round(numbers))
        if bad.any():
            raise ValueError(f"{path}: column {name!r} ({kind}) holds {values[bad].iloc[0]!r}")
        return numbers.astype("Int64" if kind == "integer" else "float64")
    if kind == "logical":
        present = values.dropna()
        if not present.isin(["TRUE", "FALSE"]).all():
            odd = present[~present.isin(["TRUE", "FALSE"])].iloc[0]
            raise ValueError(f"{path}: column {name!r} (logical) holds {odd!r}")
        return values.map({"TRUE": True, "FALSE": False}).astype("boolean")
    if kind == "factor":
        levels = column["levels"]
        unknown = values.notna() & ~values.isin(levels)
        if unknown.any():
            raise ValueError(f"{path}: column {name!r} holds {values[unknown].iloc[0]!r}, "
                             f"not one of its levels {levels}")
        dtype = pd.CategoricalDtype(levels, ordered=bool(column.get("ordered", False)))
        return values.astype(dtype)
    return values.astype(object)


def load_task(task: Task, cache=DEFAULT_CACHE) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and target of ``task`` from the cache.

    Returns
    -------
    X : DataFrame of shape (n_rows, n_features)
        The data set less the target and ``task.drop``, rows filtered by
        ``task.keep`` and with a missing target removed, index reset. Factors
        and text columns are ``category`` columns, missing values NaN / pd.NA.
    y : ndarray of shape (n_rows,)
        float64 for regression; int64 0/1 for binary tasks (1 = ``task.positive``).

    Raises
    ------
    CacheMissingError
        When the data set is not in ``cache``.
    ValueError
        Naming the task and column when the task does not fit the data set.
    """
    data = read_dataset(cache, task.package, task.dataset)
    check_task(task, {c: str(data[c].dtype) for c in data.columns})
    for column, values in task.keep.items():
        data = data[_is_one_of(data[column], values, task, column)]
    data = data[data[task.target].notna()].reset_index(drop=True)
    target = data[task.target]
    X = data.drop(columns=[task.target, *task.drop])
    for column in task.numeric:
        numbers = pd.to_numeric(X[column].astype(object), errors="coerce")
        if (numbers.isna() & X[column].notna()).any():
            raise ValueError(f"task {task.name!r}: column {column!r} has labels that are not "
                             "numbers; remove it from `numeric`")
        X[column] = numbers.astype("float64")
    # Text columns become categories (levels sorted, as R's factor() makes them), so that
    # every method, HistGradientBoosting's categories from the dtype included, reads them.
    text = [c for c in X.columns if pd.api.types.is_object_dtype(X[c])]
    X = X.astype({c: pd.CategoricalDtype(sorted(X[c].dropna().unique())) for c in text})
    if task.kind == "regression":
        if not pd.api.types.is_numeric_dtype(target):
            raise ValueError(f"task {task.name!r}: regression target {task.target!r} is "
                             f"{target.dtype}, not numeric")
        return X, target.to_numpy(dtype=np.float64)
    if pd.api.types.is_numeric_dtype(target):
        y = target.astype("float64") == float(task.positive)
    else:
        y = target.astype(str) == task.positive
    if y.all() or not y.any():
        values = sorted(target.astype(str).unique())
        raise ValueError(f"task {task.name!r}: positive class {task.positive!r} leaves one "
                         f"class in {task.target!r} (values: {values})")
    return X, y.to_numpy(dtype=np.int64)


def _is_one_of(column: pd.Series, values, task: Task, name: str) -> pd.Series:
    """Whether each cell of ``column`` is one of the text ``values``: as numbers in a
    numeric column (``"2"`` keeps 2.0), as text otherwise."""
    if not pd.api.types.is_numeric_dtype(column):
        return column.astype(str).isin(values)
    try:
        numbers = [float(value) for value in values]
    except ValueError:
        raise ValueError(f"task {task.name!r}: `keep` of the numeric column {name!r} must be "
                         f"numbers written as text, got {list(values)}") from None
    return column.isin(numbers).fillna(False).astype(bool)


def check_task(task: Task, column_types: dict) -> None:
    """Check that the columns ``task`` names exist; ``column_types``: column -> type name.

    Raises ``ValueError`` naming the task and the missing columns.
    """
    named = {task.target, *task.drop, *task.keep, *task.numeric}
    missing = sorted(named - set(column_types))
    if missing:
        raise ValueError(f"task {task.name!r}: {task.source} has no column(s) {missing}; "
                         f"its columns: {list(column_types)}")
    if not set(column_types) - {task.target, *task.drop}:
        raise ValueError(f"task {task.name!r}: no feature left after dropping {task.drop}")
