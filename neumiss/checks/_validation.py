"""Input validation shared by the estimators: tables with missing values, never mutated."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_consistent_length, validate_data


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


def _text_error(X) -> ValueError | None:
    """For an array of objects or strings with text that does not read as a number (which
    ``validate_data`` refused), an error naming the first such column and cell: a
    DataFrame, whose text columns the estimators encode as categories, is what such a
    table needs. None for any other input."""
    if not isinstance(X, np.ndarray) or X.dtype.kind not in "OUS" or X.ndim != 2:
        return None
    for j in range(X.shape[1]):
        for value in X[:, j]:
            if not isinstance(value, (str, bytes)):
                continue  # numbers, missing cells; other objects have validate_data's error
            try:
                float(value)
            except ValueError:
                return ValueError(
                    f"column {j} of X holds text (e.g. {value!r}): pass X as a pandas "
                    "DataFrame, whose text columns are encoded as categories, or encode "
                    "that column as numbers"
                )
    return None


def _check_frame(estimator, X: pd.DataFrame, *, reset: bool) -> pd.DataFrame:
    """Check a table's column names and size, leaving its values to the encoder."""
    duplicated = X.columns[X.columns.duplicated()].unique().tolist()
    if duplicated:
        raise ValueError(f"X has duplicate column names {duplicated!r}: give each column its own")
    validate_data(estimator, X, reset=reset, skip_check_array=True)
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(
            f"Found array with {X.shape[0]} sample(s) and {X.shape[1]} feature(s) "
            f"(shape={X.shape}) while a minimum of 1 is required by {type(estimator).__name__}."
        )
    return X


def check_features(estimator, X, *, reset: bool, tables: bool = False, copy: bool = True):
    """Validate ``X`` for ``estimator``; NaN (None, pd.NA in a DataFrame) marks missing values.

    ``reset=True`` (fit) records ``n_features_in_`` and ``feature_names_in_``;
    ``reset=False`` (predict) checks them. The caller's object is never modified.

    Returns
    -------
    With ``tables=True`` and a DataFrame: the DataFrame itself, its names and
    size checked (its columns may be of any type; :class:`neumiss.tables.TableEncoder`
    reads them). Otherwise a new float64 array of shape (n_samples, n_features), or with
    ``copy=False`` (for a caller that only reads it: prediction) ``X`` itself when it is
    one already; infinite values, complex or non-numeric data, 1-D or empty arrays raise
    ``ValueError``.
    """
    if isinstance(X, pd.DataFrame):
        if tables:
            return _check_frame(estimator, X, reset=reset)
        X = _numeric_frame(X)
    try:
        return validate_data(
            estimator,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
            copy=copy,
        )
    except ValueError as error:
        raise (_text_error(X) or error) from None


def check_training_data(estimator, X, y, *, y_numeric: bool, tables: bool = False):
    """Validate ``(X, y)`` at fit time; NaN allowed in ``X`` only (class labels,
    ``y_numeric=False``: a missing label is a ``ValueError`` naming how many and where).

    Returns ``X`` as :func:`check_features` does and a new array ``y`` of shape (n,).
    """
    if y is None:
        name = type(estimator).__name__
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    if not y_numeric:
        _check_labels_present(y)
    if tables and isinstance(X, pd.DataFrame):
        # y first: validating y alone forgets feature names, which X then records.
        y = validate_data(estimator, X="no_validation", y=y, y_numeric=y_numeric)
        X = _check_frame(estimator, X, reset=True)
        check_consistent_length(X, y)
        return X, np.array(y, copy=True)
    if isinstance(X, pd.DataFrame):
        X = _numeric_frame(X)
    try:
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
    except ValueError as error:
        raise (_text_error(X) or error) from None
    return X, np.array(y, copy=True)


def _check_labels_present(y) -> None:
    """Refuse missing class labels (None, NaN, pd.NA): ``ValueError`` with their count and
    the first's position."""
    missing = np.flatnonzero(pd.isna(np.asarray(y, dtype=object).ravel()))
    if missing.size:
        raise ValueError(
            f"y has {missing.size} missing class label{'s' if missing.size > 1 else ''} "
            f"(None, NaN or pd.NA; the first at position {missing[0]}): drop those rows "
            "or give them a class"
        )


def check_class_labels(y: np.ndarray) -> None:
    """Refuse class labels that mix kinds (numbers and text): they have no order, and
    ``"1"`` and ``1`` would be two classes. ``ValueError`` naming the kinds and examples."""
    if y.dtype != object:
        return
    kinds = {}
    for value in y:
        if isinstance(value, (bool, np.bool_)):
            kind = "boolean"
        elif isinstance(value, (int, float, np.number)):
            kind = "number"
        elif isinstance(value, str):
            kind = "text"
        else:
            kind = type(value).__name__
        kinds.setdefault(kind, value)
    if len(kinds) > 1:
        examples = ", ".join(f"{kind} {value!r}" for kind, value in kinds.items())
        raise ValueError(
            f"y mixes class labels of different kinds ({examples}); give labels of one "
            "kind, e.g. all text (y.astype(str)) or all numbers"
        )
