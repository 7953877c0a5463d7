"""Input validation shared by the estimators: tables with missing values, never mutated."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import validate_data


def _numeric_frame(X: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``X`` with float64 columns; None / pd.NA become NaN.

    Raises a ``ValueError`` naming every column that is not numeric.
    """
    bad = []
    columns = {}
    for name in X.columns:
        column = X[name]
        if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
            columns[name] = column.astype("float64")
            continue
        converted = pd.to_numeric(column, errors="coerce")
        # A cell that was present but did not parse as a number is an error,
        # not a missing value.
        if (converted.isna() & column.notna()).any():
            bad.append(name)
        else:
            columns[name] = converted.astype("float64")
    if bad:
        raise ValueError(
            f"X has non-numeric columns {bad!r}: NeuMiss needs numeric features "
            "(encode categories first, e.g. with sklearn's OneHotEncoder); "
            "missing cells may be NaN, None or pd.NA."
        )
    return pd.DataFrame(columns, index=X.index)


def check_features(estimator, X, *, reset: bool) -> np.ndarray:
    """Validate ``X`` for ``estimator`` and return a new float64 array with NaN.

    ``reset=True`` (fit) records ``n_features_in_`` and ``feature_names_in_``;
    ``reset=False`` (predict) checks them. Infinite values, complex or
    non-numeric data, 1-D or empty arrays raise ``ValueError``. The caller's
    object is never modified: the result is always a fresh array.
    """
    if isinstance(X, pd.DataFrame):
        X = _numeric_frame(X)
    X = validate_data(
        estimator,
        X,
        reset=reset,
        dtype=np.float64,
        ensure_all_finite="allow-nan",
        ensure_min_samples=1,
        copy=True,
    )
    return X


def check_training_data(estimator, X, y, *, y_numeric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``(X, y)`` at fit time; NaN allowed in ``X`` only.

    Returns fresh arrays: X float64 (n, d) with NaN, y (n,).
    """
    if y is None:
        name = type(estimator).__name__
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    if isinstance(X, pd.DataFrame):
        X = _numeric_frame(X)
    X, y = validate_data(
        estimator,
        X,
        y,
        reset=True,
        dtype=np.float64,
        ensure_all_finite="allow-nan",
        y_numeric=y_numeric,
        copy=True,
    )
    return X, np.array(y, copy=True)
