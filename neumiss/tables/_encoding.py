"""Mixed-type tables to numeric features with NaN: one-hot categories, missing groups.

:class:`TableEncoder` turns a validated table into the float64 matrix the
network's preprocessing works on:

* numeric columns (integers, floats, numeric strings) pass through, NaN = missing;
* boolean columns become one 0/1 column (one-hot of two categories, less the
  redundant one), missing stays missing;
* categorical columns (pandas ``category``, ``object`` or ``string`` of
  text) become one column per category seen at fit. A missing category marks
  **its whole group missing** (NaN in every column of the group), so NeuMiss
  treats it as a missing value and not as "none of the categories".
  A category not seen at fit is treated as missing, with a warning. Columns
  with more than :data:`MAX_CATEGORIES` categories keep the most frequent ones
  and share one ``<other>`` column for the rest, with a warning.

numpy arrays are all numeric. The encoder's state is plain data (column
names, kinds and categories), which the model file and the ONNX metadata
record so that ``export/score.py`` can encode a CSV with numpy alone.
"""

from __future__ import annotations

import numbers
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

#: Most one-hot columns a categorical column may take; beyond it the least
#: frequent categories share one ``<other>`` column.
MAX_CATEGORIES = 100

#: Name of the shared column of infrequent categories, after ``"<column>="``.
OTHER = "<other>"

KINDS = ("numeric", "boolean", "categorical")


class ColumnEncoding(NamedTuple):
    """How one input column is encoded.

    ``categories`` (categorical only) are the one-hot columns in order, as
    strings; ``other`` says whether a last ``<other>`` column follows them.
    """

    name: object
    kind: str
    categories: tuple[str, ...] = ()
    other: bool = False

    @property
    def width(self) -> int:
        """Number of encoded columns."""
        return len(self.categories) + self.other if self.kind == "categorical" else 1

    def output_names(self) -> list[str]:
        if self.kind != "categorical":
            return [str(self.name)]
        names = [f"{self.name}={c}" for c in self.categories]
        return names + ([f"{self.name}={OTHER}"] if self.other else [])


def _category_strings(values: pd.Series) -> pd.Series:
    """Categories as the strings the encoding compares (``str`` of each value)."""
    return values.map(str, na_action="ignore")


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))


def plain_column(column: pd.Series) -> pd.Series:
    """``column`` with an Arrow-backed dtype (``read_parquet(dtype_backend="pyarrow")``,
    ``convert_dtypes``) as the numpy-backed one it stands for: numbers as float64 (NaN =
    missing), booleans as pandas ``boolean``, text as ``object`` (None = missing).
    Other columns are returned as they are."""
    if not isinstance(column.dtype, pd.ArrowDtype):
        return column
    kind = column.dtype.pyarrow_dtype
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return pd.Series(column.to_numpy(dtype=np.float64, na_value=np.nan), index=column.index,
                         name=column.name)
    if pa.types.is_boolean(kind):
        return column.astype("boolean")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return column.astype(object).where(column.notna(), None)
    return column


def _column_kind(name, column: pd.Series) -> str:
    """``numeric``, ``boolean`` or ``categorical`` for a DataFrame column; errors name it."""
    dtype = column.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype) \
            or isinstance(dtype, pd.PeriodDtype):
        raise ValueError(
            f"column {name!r} holds dates or durations ({dtype}): convert it to numbers "
            "first (e.g. days since a reference date)"
        )
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if pd.api.types.is_numeric_dtype(dtype):
        if pd.api.types.is_complex_dtype(dtype):
            raise ValueError(f"column {name!r} holds complex numbers: NeuMiss needs real numbers")
        return "numeric"
    present = column.dropna()
    if present.map(lambda v: isinstance(v, (bool, np.bool_))).all() and len(present):
        return "boolean"
    is_number = present.map(_is_number)
    if is_number.all():
        return "numeric"
    if is_number.any():
        examples = [present[is_number].iloc[0], present[~is_number].iloc[0]]
        raise ValueError(
            f"column {name!r} mixes numbers and text (e.g. {examples[0]!r} and "
            f"{examples[1]!r}): make it all numbers or all categories"
        )
    non_text = present[~present.map(lambda v: isinstance(v, str))]
    if len(non_text):
        raise ValueError(
            f"column {name!r} holds values that are neither numbers nor text "
            f"(e.g. {non_text.iloc[0]!r} of type {type(non_text.iloc[0]).__name__})"
        )
    parsed = pd.to_numeric(present, errors="coerce")
    return "numeric" if parsed.notna().all() else "categorical"


def _fit_categories(name, column: pd.Series) -> ColumnEncoding:
    """The categories of ``column``: categorical dtype order, else sorted; capped by frequency."""
    present = column.dropna()
    if isinstance(column.dtype, pd.CategoricalDtype):
        seen = set(present.astype(object))
        ordered = [c for c in column.dtype.categories if c in seen]
    else:
        ordered = sorted(set(present))
    categories = [str(c) for c in ordered]
    if len(set(categories)) != len(categories):
        raise ValueError(f"column {name!r} has categories that print alike: {categories!r}")
    if len(categories) <= MAX_CATEGORIES:
        return ColumnEncoding(name, "categorical", tuple(categories))
    counts = _category_strings(present).value_counts()
    kept = set(counts.index[: MAX_CATEGORIES - 1])
    warnings.warn(
        f"column {name!r} has {len(categories):,} categories: the {MAX_CATEGORIES - 1} most "
        f"frequent are one-hot encoded and the others share one '{OTHER}' column. To use "
        "it fully, encode it yourself (e.g. as numbers or a target encoding), or drop it.",
        UserWarning,
        stacklevel=4,
    )
    return ColumnEncoding(
        name, "categorical", tuple(c for c in categories if c in kept), other=True
    )


class TableEncoder:
    """Encode a table (DataFrame or numeric array) to float64 features with NaN.

    Attributes
    ----------
    columns_ : list of ColumnEncoding
        One per input column, in order.
    n_features_out_ : int
        Number of encoded columns.
    """

    def fit(self, X) -> TableEncoder:
        """Learn each column's kind and categories.

        Parameters
        ----------
        X : DataFrame, or ndarray of shape (n_samples, n_features) (all numeric)
        """
        if isinstance(X, pd.DataFrame):
            self.columns_ = []
            for name in X.columns:
                column = plain_column(X[name])
                kind = _column_kind(name, column)
                if kind == "categorical":
                    self.columns_.append(_fit_categories(name, column))
                else:
                    self.columns_.append(ColumnEncoding(name, kind))
        else:
            self.columns_ = [ColumnEncoding(i, "numeric") for i in range(X.shape[1])]
        self.n_features_out_ = sum(c.width for c in self.columns_)
        return self

    @property
    def is_identity(self) -> bool:
        """Whether every column is numeric (the encoding only converts to float)."""
        return all(c.kind == "numeric" for c in self.columns_)

    def output_names(self) -> list[str]:
        """Names of the encoded columns: ``name`` or ``name=category``."""
        return [n for c in self.columns_ for n in c.output_names()]

    def numeric_columns(self) -> np.ndarray:
        """Boolean array over the encoded columns: True for those of numeric input columns."""
        return np.repeat([c.kind == "numeric" for c in self.columns_],
                         [c.width for c in self.columns_])

    def input_index(self) -> np.ndarray:
        """For each encoded column, the index of the input column it comes from."""
        return np.repeat(np.arange(len(self.columns_)), [c.width for c in self.columns_])

    def transform(self, X) -> np.ndarray:
        """Encoded features, float64 of shape ``(n_samples, n_features_out_)``, NaN = missing.

        ``X`` must have the fitted columns (the estimators check names and
        count first); it is never modified. A DataFrame gives a new array; a
        float64 array is returned as it is (the estimators pass a copy).
        """
        if not isinstance(X, pd.DataFrame):
            self.check_input(X)
            return np.asarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], self.n_features_out_), dtype=np.float64)
        start = 0
        for position, encoding in enumerate(self.columns_):
            block = out[:, start : start + encoding.width]
            _encode_column(encoding, plain_column(X.iloc[:, position]), block)
            start += encoding.width
        return out

    def check_input(self, X) -> None:
        """Refuse an input that is not a DataFrame when some column is boolean or
        categorical: an array has no column names to match, nor cells of categories.

        Raises
        ------
        ValueError
            Naming the columns the encoder expects and the kind of each.
        """
        if self.is_identity or isinstance(X, pd.DataFrame):
            return
        expected = ", ".join(
            f"{c.name!r} ({c.kind}" + (f": {list(c.categories)[:5]!r}" if c.categories else "")
            + ")" for c in self.columns_)
        raise ValueError(
            "the model was fitted on a DataFrame with boolean or categorical columns: pass a "
            f"DataFrame with the columns {expected}, not an array"
        )

    def get_state(self) -> list[dict]:
        """Plain data for saving and for the ONNX metadata: one dict per column."""
        return [
            {"name": c.name, "kind": c.kind, "categories": list(c.categories), "other": c.other}
            for c in self.columns_
        ]

    @classmethod
    def from_state(cls, state: list[dict]) -> TableEncoder:
        """A fitted encoder from :meth:`get_state`'s list."""
        encoder = cls()
        encoder.columns_ = [
            ColumnEncoding(c["name"], c["kind"], tuple(c["categories"]), bool(c["other"]))
            for c in state
        ]
        encoder.n_features_out_ = sum(c.width for c in encoder.columns_)
        return encoder


def _encode_column(encoding: ColumnEncoding, column: pd.Series, out: np.ndarray) -> None:
    """Write the encoding of ``column`` into ``out`` (n_samples, encoding.width)."""
    name = encoding.name
    missing = column.isna().to_numpy()
    if encoding.kind == "numeric":
        if not pd.api.types.is_numeric_dtype(column.dtype):
            column = pd.to_numeric(column.astype(object).where(~missing), errors="coerce")
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        unparsed = np.isnan(values) & ~missing
        if unparsed.any():
            raise ValueError(
                f"column {name!r} was numeric at fit but holds "
                f"{column[unparsed].iloc[0]!r}: expected a number or a missing value"
            )
        if np.isinf(values).any():
            raise ValueError(f"Input X contains infinity in column {name!r}")
        out[:, 0] = values
        return
    if encoding.kind == "boolean":
        present = column[~missing]
        valid = present.map(lambda v: isinstance(v, (bool, np.bool_)) or v in (0, 1)).all()
        if not valid:
            raise ValueError(
                f"column {name!r} was boolean at fit but holds {present.iloc[0]!r}"
            )
        out[:, 0] = np.where(missing, np.nan, 0.0)
        out[~missing, 0] = present.astype(bool).to_numpy(dtype=np.float64)
        return
    text = _category_strings(column[~missing]).to_numpy()
    index = {c: i for i, c in enumerate(encoding.categories)}
    codes = np.array([index.get(t, -1) for t in text], dtype=np.int64)
    unseen = codes < 0
    if encoding.other:
        codes[unseen] = len(encoding.categories)
        unseen[:] = False
    elif unseen.any():
        examples = sorted(set(text[unseen]))[:5]
        warnings.warn(
            f"column {name!r} has categories not seen at fit, treated as missing: {examples!r}",
            UserWarning,
            stacklevel=5,
        )
    rows = np.flatnonzero(~missing)
    out[:] = 0.0
    out[missing] = np.nan
    out[rows[unseen]] = np.nan
    out[rows[~unseen], codes[~unseen]] = 1.0
