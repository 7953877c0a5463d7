"""Mixed-type tables to numeric features with NaN: one-hot categories, missing groups,
target statistics for categories too many to one-hot encode.

:class:`TableEncoder` turns a validated table into the float64 matrix the
network's preprocessing works on:

* numeric columns (integers, floats, numeric strings) pass through, NaN = missing;
  with ``integer_levels``, a column of few distinct integers (a count, a month, a year,
  a grade: :data:`LEVELS_MIN` to :data:`LEVELS_MAX` distinct values) also gets one
  indicator column per value seen :data:`LEVEL_MIN_ROWS` times at least, ``name=value``,
  beside the value itself: missing where the value is, all 0 for another value (rare at
  fit or unseen), so that a network fits a separate effect per value and the
  interactions of two such columns (a month x year effect) as readily as a tree. A table
  whose indicators would outnumber its other encoded columns (a questionnaire of coded
  items) keeps those of the columns that explain the target beyond a line the most, as
  many as the other columns (:func:`~._levels.levels_within_budget`); none without a target;
* boolean columns become one 0/1 column (one-hot of two categories, less the
  redundant one), missing stays missing;
* categorical columns (pandas ``category``, ``object`` or ``string`` of
  text) become one column per category seen at fit. A missing category marks
  **its whole group missing** (NaN in every column of the group), so NeuMiss
  treats it as a missing value and not as "none of the categories".
  A cell is a category seen at fit when spelled as it, or when equal to it once both are
  stripped of their spaces (:func:`category_codes`, the scorers' rule); a category not
  seen at fit is treated as missing, with a warning when such cells are more than
  :data:`UNSEEN_WARNING_SHARE` of the column's observed cells.
* a categorical column with more categories than :func:`one_hot_limit` allows
  (:data:`MAX_CATEGORIES`, or one per :data:`ROWS_PER_CATEGORY` observed rows up to
  :data:`MAX_ONE_HOT`: a postcode, a product code) is embedded by **target
  statistics** when the encoder is fitted with the target (the estimators do): each
  category becomes its smoothed mean of the target (one column; one per class for more
  than two classes), scikit-learn's
  :class:`~sklearn.preprocessing.TargetEncoder` with empirical-Bayes shrinkage
  towards the overall mean, so that a rare category says little. The training rows
  get **cross-fitted** values (:meth:`TableEncoder.fit_transform`: each row's value
  is computed without its own target, on :data:`TARGET_FOLDS` folds), new rows the
  statistics of all the training rows. A missing category is missing (NaN) in these
  columns too. Without a target, such a column keeps its most frequent categories
  and shares one ``<other>`` column for the rest, with a warning.

numpy arrays are all numeric (their integer columns get indicators too). The encoder's
state is plain data (column names, kinds, categories and levels), which the model file and
the ONNX metadata record so that ``export/score.py`` can encode a CSV with numpy alone.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from ..checks import warn_user
from ._levels import integer_levels, levels_within_budget

#: One-hot columns a categorical column may take whatever its rows; beyond
#: (:func:`one_hot_limit`), the column is encoded by its categories' target statistics
#: (fitted with a target), or else the least frequent categories share one ``<other>``
#: column.
MAX_CATEGORIES = 100

#: A column of more categories is still one-hot encoded, up to :data:`MAX_ONE_HOT`
#: columns, when its observed rows number this many per category: a category's own
#: column then lets the network fit its interactions (a country's trend over the years),
#: which one target statistic cannot (measured: ``results/realdata/README.md``).
ROWS_PER_CATEGORY = 20
MAX_ONE_HOT = 250

#: A category not seen at fit is read as missing; a warning says so when such cells are
#: more than this share of a column's observed cells in the rows transformed: a handful of
#: rare levels in a test fold (a level seen by no training row) is what missing values
#: are for, a column of new categories is a sign of another encoding.
UNSEEN_WARNING_SHARE = 0.05

#: Name of the shared column of infrequent categories, after ``"<column>="``.
OTHER = "<other>"

#: Folds of the cross-fitting that gives the training rows their target statistics.
TARGET_FOLDS = 5

#: Name of a target-statistic column, after ``"<column>:"`` (and ``"=<class>"`` per class).
TARGET = "target"

KINDS = ("numeric", "boolean", "categorical")


class ColumnEncoding(NamedTuple):
    """How one input column is encoded.

    ``categories`` (categorical only) are the categories seen at fit, as strings, in
    order: the one-hot columns, or the rows of ``statistics``; ``other`` says whether a
    last ``<other>`` column follows the one-hot ones. ``statistics`` (target-encoded
    columns only) holds one tuple per category, its target statistics (the encoded
    columns, named by ``statistic_names``). ``levels`` (numeric only) are the values
    given an indicator column after the value's own (``integer_levels``).
    """

    name: object
    kind: str
    categories: tuple[str, ...] = ()
    other: bool = False
    statistics: tuple[tuple[float, ...], ...] = ()
    statistic_names: tuple[str, ...] = ()
    levels: tuple[float, ...] = ()

    @property
    def target_encoded(self) -> bool:
        """Whether the column is encoded by its categories' target statistics."""
        return bool(self.statistic_names)

    def category_values(self) -> np.ndarray:
        """Each category's encoded values (n_categories [+ 1 for ``<other>``], width): its
        target statistics, or its one-hot row."""
        if self.target_encoded:
            return np.asarray(self.statistics, dtype=np.float64)
        return np.eye(self.width)

    @property
    def width(self) -> int:
        """Number of encoded columns."""
        if self.kind != "categorical":
            return 1 + len(self.levels)
        if self.target_encoded:
            return len(self.statistic_names)
        return len(self.categories) + self.other

    def output_names(self) -> list[str]:
        if self.kind != "categorical":
            return [str(self.name)] + [f"{self.name}={value:g}" for value in self.levels]
        if self.target_encoded:
            return [f"{self.name}:{s}" for s in self.statistic_names]
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


def _seen_categories(name, column: pd.Series) -> list[str]:
    """The categories of ``column`` as strings: categorical dtype order, else sorted."""
    present = column.dropna()
    if isinstance(column.dtype, pd.CategoricalDtype):
        seen = set(present.astype(object))
        ordered = [c for c in column.dtype.categories if c in seen]
    else:
        ordered = sorted(set(present))
    categories = [str(c) for c in ordered]
    if len(set(categories)) != len(categories):
        raise ValueError(f"column {name!r} has categories that print alike: {categories!r}")
    return categories


def one_hot_limit(n_observed: int) -> int:
    """Most one-hot columns of a categorical column observed in ``n_observed`` rows at
    fit: :data:`MAX_CATEGORIES`, or one per :data:`ROWS_PER_CATEGORY` rows up to
    :data:`MAX_ONE_HOT`."""
    return max(MAX_CATEGORIES, min(MAX_ONE_HOT, n_observed // ROWS_PER_CATEGORY))


def _fit_categories(name, column: pd.Series, categories: list[str],
                    limit: int) -> ColumnEncoding:
    """One-hot ``categories``, capped by frequency at ``limit`` columns
    (:func:`one_hot_limit`)."""
    if len(categories) <= limit:
        return ColumnEncoding(name, "categorical", tuple(categories))
    counts = _category_strings(column.dropna()).value_counts()
    kept = set(counts.index[: limit - 1])
    warn_user(
        f"column {name!r} has {len(categories):,} categories: the {limit - 1} most "
        f"frequent are one-hot encoded and the others share one '{OTHER}' column. Fit "
        "with the target to encode it by target statistics, encode it yourself, or drop it."
    )
    return ColumnEncoding(
        name, "categorical", tuple(c for c in categories if c in kept), other=True
    )


def _target_statistics(name, column: pd.Series, categories: list[str], y: np.ndarray,
                       classes, random_state) -> tuple[ColumnEncoding, np.ndarray]:
    """The target statistics of ``column``'s categories, by scikit-learn's
    :class:`~sklearn.preprocessing.TargetEncoder` on the rows where it is observed.

    Returns the column's encoding (statistics from all the rows) and the rows'
    cross-fitted statistics, float64 of shape (n_samples, width), NaN where the
    category is missing: those of an encoder fitted without the row's fold (folds
    stratified by class when every class fills them), as ``TargetEncoder.fit_transform``
    computes them. A category absent from a fold's training rows gets that fold's
    overall mean. A class's probability is the statistic of its indicator (0/1), as
    scikit-learn computes it for a binary target, so that a fold without some class
    still gives every column.
    """
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.preprocessing import TargetEncoder

    present = column.notna().to_numpy()
    text = _category_strings(column[present]).to_numpy(dtype=object).reshape(-1, 1)
    codes = y[present]
    if classes is None:
        names, targets = (TARGET,), codes.astype(np.float64)[:, None]
    elif len(classes) == 2:  # the probability of the second class
        names, targets = (TARGET,), (codes == 1).astype(np.float64)[:, None]
    else:  # one probability per class: its indicator's statistics
        names = tuple(f"{TARGET}={c}" for c in classes)
        targets = (codes[:, None] == np.arange(len(classes))).astype(np.float64)

    def statistics(train: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """The statistics of the categories (rows None) or of ``text[rows]``, learned on
        ``text[train]``: (n, width)."""
        columns = []
        for target in targets[train].T:
            encoder = TargetEncoder(categories=[np.array(categories, dtype=object)],
                                    target_type="continuous").fit(text[train], target)
            columns.append(encoder.encodings_[0] if rows is None
                           else encoder.transform(text[rows])[:, 0])
        return np.stack(columns, axis=1)

    classes_fill_folds = (classes is not None
                          and np.bincount(codes, minlength=len(classes)).min() >= TARGET_FOLDS)
    folds = (StratifiedKFold if classes_fill_folds else KFold)(
        TARGET_FOLDS, shuffle=True, random_state=random_state)
    values = np.empty((len(codes), len(names)))
    for train, held in folds.split(text, codes if classes_fill_folds else None):
        values[held] = statistics(train, held)
    crossfitted = np.full((len(column), len(names)), np.nan)
    crossfitted[present] = values
    table = statistics(np.arange(len(codes)), None)  # (n_categories, width)
    encoding = ColumnEncoding(name, "categorical", tuple(categories),
                              statistics=tuple(tuple(map(float, row)) for row in table),
                              statistic_names=names)
    return encoding, crossfitted


class TableEncoder:
    """Encode a table (DataFrame or numeric array) to float64 features with NaN.

    Parameters
    ----------
    integer_levels : bool, default=False
        Give the numeric columns of few distinct integers indicator columns of their
        frequent values beside the value (:func:`integer_levels`).

    Attributes
    ----------
    columns_ : list of ColumnEncoding
        One per input column, in order.
    n_features_out_ : int
        Number of encoded columns.
    """

    def __init__(self, integer_levels: bool = False) -> None:
        self.integer_levels = integer_levels

    def fit(self, X, y=None, *, classes=None, random_state=None) -> TableEncoder:
        """Learn each column's kind and categories (and target statistics, given ``y``).

        Parameters
        ----------
        X : DataFrame, or ndarray of shape (n_samples, n_features) (all numeric)
        y : ndarray of shape (n_samples,), optional
            The target, for the columns of more categories than :func:`one_hot_limit`:
            numbers (regression), or class codes ``0 .. len(classes) - 1``.
        classes : sequence, optional
            The class labels of ``y``'s codes (classification); None for a numeric target.
        random_state : int, optional
            Seed of the cross-fitting folds (:meth:`fit_transform`).
        """
        self._fit(X, y, classes, random_state)
        return self

    def fit_transform(self, X, y=None, *, classes=None, random_state=None) -> np.ndarray:
        """:meth:`fit`, then the encoded ``X``, with **cross-fitted** target statistics:
        a row's statistics are computed on the :data:`TARGET_FOLDS` - 1 folds without it,
        so that the network never learns from a value that holds the row's own target."""
        crossfitted = self._fit(X, y, classes, random_state)
        out = self.transform(X)
        starts = np.cumsum([0] + [c.width for c in self.columns_])
        for position, values in crossfitted.items():
            out[:, starts[position] : starts[position + 1]] = values
        return out

    def _fit(self, X, y, classes, random_state) -> dict[int, np.ndarray]:
        """Fit; returns the cross-fitted statistics (n_samples, width) per target-encoded
        column position."""
        crossfitted, numbers = {}, {}  # numbers: position -> the values of a column with levels
        if isinstance(X, pd.DataFrame):
            self.columns_ = []
            for position, name in enumerate(X.columns):
                column = plain_column(X[name])
                kind = _column_kind(name, column)
                if kind != "categorical":
                    levels = ()
                    if kind == "numeric" and self.integer_levels:
                        values = _numbers(name, column)
                        levels = integer_levels(values)
                        if levels:
                            numbers[position] = values
                    self.columns_.append(ColumnEncoding(name, kind, levels=levels))
                    continue
                categories = _seen_categories(name, column)
                limit = one_hot_limit(int(column.notna().sum()))
                if y is None or len(categories) <= limit:
                    self.columns_.append(_fit_categories(name, column, categories, limit))
                    continue
                encoding, crossfitted[position] = _target_statistics(
                    name, column, categories, np.asarray(y), classes, random_state)
                self.columns_.append(encoding)
        else:
            values = np.asarray(X, dtype=np.float64)
            numbers = dict(enumerate(values.T))
            self.columns_ = [ColumnEncoding(j, "numeric", levels=integer_levels(numbers[j])
                                            if self.integer_levels else ())
                             for j in range(values.shape[1])]
        self._screen_levels(numbers, y, classes)
        self.n_features_out_ = sum(c.width for c in self.columns_)
        return crossfitted

    def _screen_levels(self, numbers: dict[int, np.ndarray], y, classes) -> None:
        """Keep at most as many indicators as other encoded columns: those of the columns
        that explain ``y`` beyond a line the most (:func:`~._levels.levels_within_budget`)."""
        levels = {p: c.levels for p, c in enumerate(self.columns_) if c.levels}
        budget = sum(c.width - len(c.levels) for c in self.columns_)
        target = None
        if y is not None:
            target = (np.asarray(y, dtype=np.float64)[:, None] if classes is None else
                      (np.asarray(y)[:, None] == np.arange(len(classes))).astype(np.float64))
        kept = levels_within_budget(levels, numbers, budget, target)
        self.columns_ = [c._replace(levels=kept.get(p, ())) for p, c in enumerate(self.columns_)]

    @property
    def is_identity(self) -> bool:
        """Whether every column is numeric without indicators (the encoding only converts
        to float)."""
        return all(c.kind == "numeric" and not c.levels for c in self.columns_)

    @property
    def has_levels(self) -> bool:
        """Whether some numeric column has indicator columns (``integer_levels``)."""
        return any(c.levels for c in self.columns_)

    def output_names(self) -> list[str]:
        """Names of the encoded columns: ``name``, ``name=category`` (one-hot) or
        ``name:target`` (``name:target=class`` per class: target statistics)."""
        return [n for c in self.columns_ for n in c.output_names()]

    def numeric_columns(self) -> np.ndarray:
        """Boolean array over the encoded columns: True for the values of numeric input
        columns (not for their indicators)."""
        return self._numeric_places() == 0

    def indicator_columns(self) -> np.ndarray:
        """Boolean array over the encoded columns: True for the indicators of the integer
        values of numeric columns (``integer_levels``)."""
        return self._numeric_places() > 0

    def _numeric_places(self) -> np.ndarray:
        """Per encoded column, its place among those of its numeric input column (0: the
        value, then its indicators), -1 for the columns of other inputs."""
        return np.array([k if c.kind == "numeric" else -1 for c in self.columns_
                         for k in range(c.width)], dtype=np.int64)

    def input_index(self) -> np.ndarray:
        """For each encoded column, the index of the input column it comes from."""
        return np.repeat(np.arange(len(self.columns_)), [c.width for c in self.columns_])

    def transform(self, X) -> np.ndarray:
        """Encoded features, float64 of shape ``(n_samples, n_features_out_)``, NaN = missing.

        ``X`` must have the fitted columns (the estimators check names and
        count first); it is never modified. A DataFrame gives a new array; a
        float64 array is returned as it is (prediction only reads it; fitting passes a copy).
        """
        if not isinstance(X, pd.DataFrame):
            self.check_input(X)
            if self.is_identity:
                return np.asarray(X, dtype=np.float64)
            X = pd.DataFrame(np.asarray(X, dtype=np.float64))
        out = np.empty((X.shape[0], self.n_features_out_), dtype=np.float64)
        start = 0
        for position, encoding in enumerate(self.columns_):
            block = out[:, start : start + encoding.width]
            _encode_column(encoding, plain_column(X.iloc[:, position]), block)
            start += encoding.width
        return out

    def unseen_categories(self, X: pd.DataFrame) -> dict:
        """The categories of ``X`` (a DataFrame with the fitted columns) that no column
        seen at fit holds, as ``{column name: sorted list of up to 5 of them}``, for the
        categorical columns without an ``<other>`` column (``transform`` would read them
        as missing); columns without such categories are left out."""
        unseen = {}
        for position, encoding in enumerate(self.columns_):
            if encoding.kind != "categorical" or encoding.other:
                continue
            text = _category_strings(plain_column(X.iloc[:, position]).dropna())
            new = set(text[~text.isin(encoding.categories)])
            if new:
                unseen[encoding.name] = sorted(new)[:5]
        return unseen

    def check_input(self, X) -> None:
        """Refuse an input that is not a DataFrame when some column is boolean or
        categorical: an array has no column names to match, nor cells of categories.

        Raises
        ------
        ValueError
            Naming the columns the encoder expects and the kind of each.
        """
        if all(c.kind == "numeric" for c in self.columns_) or isinstance(X, pd.DataFrame):
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
            | ({"statistics": [list(row) for row in c.statistics],
                "statistic_names": list(c.statistic_names)} if c.target_encoded else {})
            | ({"levels": list(c.levels)} if c.levels else {})
            for c in self.columns_
        ]

    @classmethod
    def from_state(cls, state: list[dict]) -> TableEncoder:
        """A fitted encoder from :meth:`get_state`'s list."""
        encoder = cls()
        encoder.columns_ = [
            ColumnEncoding(c["name"], c["kind"], tuple(c["categories"]), bool(c["other"]),
                           tuple(tuple(float(v) for v in row) for row in c.get("statistics", [])),
                           tuple(c.get("statistic_names", [])),
                           tuple(float(v) for v in c.get("levels", [])))
            for c in state
        ]
        encoder.n_features_out_ = sum(c.width for c in encoder.columns_)
        return encoder


def _numbers(name, column: pd.Series) -> np.ndarray:
    """A numeric column's values, float64 (n,), NaN = missing; a cell that is not a
    number raises, naming the column."""
    missing = column.isna().to_numpy()
    numbers = column
    if not pd.api.types.is_numeric_dtype(column.dtype):
        numbers = pd.to_numeric(column.astype(object).where(~missing), errors="coerce")
    values = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    unparsed = np.isnan(values) & ~missing
    if unparsed.any():
        raise ValueError(
            f"column {name!r} was numeric at fit but holds "
            f"{column[unparsed].iloc[0]!r}: expected a number or a missing value"
        )
    return values


def category_codes(texts: np.ndarray, categories: tuple[str, ...]) -> np.ndarray:
    """Each text's position in ``categories`` (int64, -1 when none): a text spelled as a
    category is that category, else one equal to a category once both are stripped of
    their spaces is the first such category (``"Nice "`` is ``"Nice"``). The scorers of
    ONNX files (``export/score.py``) read category cells by the same rule."""
    index = {c: i for i, c in enumerate(categories)}
    stripped = {}
    for c, i in index.items():
        stripped.setdefault(c.strip(), i)
    codes = np.array([index.get(t, -1) for t in texts], dtype=np.int64)
    for k in np.flatnonzero(codes < 0):
        codes[k] = stripped.get(texts[k].strip(), -1)
    return codes


def _encode_column(encoding: ColumnEncoding, column: pd.Series, out: np.ndarray) -> None:
    """Write the encoding of ``column`` into ``out`` (n_samples, encoding.width)."""
    name = encoding.name
    missing = column.isna().to_numpy()
    if encoding.kind == "numeric":
        values = _numbers(name, column)
        if np.isinf(values).any():
            raise ValueError(f"Input X contains infinity in column {name!r}")
        out[:, 0] = values
        if encoding.levels:
            out[:, 1:] = values[:, None] == np.asarray(encoding.levels)
            out[missing, 1:] = np.nan
        return
    if encoding.kind == "boolean":
        present = column[~missing]
        valid = present.map(lambda v: isinstance(v, (bool, np.bool_)) or v in (0, 1))
        if not valid.all():
            raise ValueError(
                f"column {name!r} was boolean at fit but holds {present[~valid].iloc[0]!r}: "
                "expected True, False, 0, 1 or a missing value"
            )
        out[:, 0] = np.where(missing, np.nan, 0.0)
        out[~missing, 0] = present.astype(bool).to_numpy(dtype=np.float64)
        return
    text = _category_strings(column[~missing]).to_numpy()
    codes = category_codes(text, encoding.categories)
    unseen = codes < 0
    if encoding.other:
        codes[unseen] = len(encoding.categories)
        unseen[:] = False
    elif unseen.any() and unseen.mean() > UNSEEN_WARNING_SHARE:
        examples = sorted(set(text[unseen]))[:5]
        warn_user(
            f"column {name!r} has categories not seen at fit, treated as missing: {examples!r}"
        )
    out[:] = np.nan
    out[np.flatnonzero(~missing)[~unseen]] = encoding.category_values()[codes[~unseen]]
