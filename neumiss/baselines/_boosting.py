"""Gradient-boosting anchors with native missing values and categories: CatBoost, LightGBM.

They are what a user would try next on a table with missing values, so the real-data
suite times NeuMiss against them. Both take the table as it is: NaN (or pd.NA) for
missing values, ``category`` / text columns as categories. Both run on one thread, as
every method of the suite is timed (their own thread pools ignore torch's and BLAS's
limits). Their packages are optional (``pip install 'neumiss[anchors]'``) and imported
when a model is fitted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

#: The category standing for a missing category cell (CatBoost refuses NaN there).
MISSING_CATEGORY = "<missing>"
#: Boosting rounds of CatBoost (its own default).
CATBOOST_ITERATIONS = 1000


def categorical_columns(X: pd.DataFrame) -> list:
    """Columns of ``X`` that are categories (pandas ``category``, ``object`` or ``string``)."""
    return [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)
            or pd.api.types.is_object_dtype(X[c]) or pd.api.types.is_string_dtype(X[c])]


def as_float_frame(X) -> pd.DataFrame:
    """``X`` as a data frame whose non-categorical columns (float, ``Int64``, ``boolean``)
    are float64, pd.NA as NaN. An array becomes a frame of float64 columns."""
    if not isinstance(X, pd.DataFrame):
        return pd.DataFrame(np.asarray(X, dtype=np.float64))
    categorical = set(categorical_columns(X))
    return X.astype({c: "float64" for c in X.columns if c not in categorical})


def seed_integer(random_state) -> int | None:
    """An integer seed for a library that takes only integers (None stays None)."""
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return random_state
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


class _CatBoostTable(BaseEstimator):
    """CatBoost on a table with NaN and category columns (see the module docstring).

    Parameters
    ----------
    iterations : int, default=1000
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    model_ : CatBoostRegressor or CatBoostClassifier
    categorical_ : list
        The columns given to CatBoost as categories.
    """

    def __init__(self, iterations=CATBOOST_ITERATIONS, random_state=None):
        self.iterations = iterations
        self.random_state = random_state

    def _table(self, X) -> pd.DataFrame:
        """The table CatBoost reads: numbers as float64, categories as text."""
        X = as_float_frame(X).copy()
        for c in self.categorical_:
            X[c] = X[c].astype(object).where(X[c].notna(), MISSING_CATEGORY).astype(str)
        return X

    def fit(self, X, y):
        import catboost

        frame = as_float_frame(X)
        self.categorical_ = categorical_columns(frame)
        model = (catboost.CatBoostRegressor if isinstance(self, RegressorMixin)
                 else catboost.CatBoostClassifier)
        self.model_ = model(
            iterations=self.iterations, random_seed=seed_integer(self.random_state), thread_count=1,
            cat_features=self.categorical_, verbose=False, allow_writing_files=False,
        )
        self.model_.fit(self._table(frame), np.asarray(y))
        self.n_features_in_ = frame.shape[1]
        return self

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        return np.asarray(self.model_.predict(self._table(X))).reshape(len(X))


class CatBoostTableRegressor(RegressorMixin, _CatBoostTable):
    """CatBoost regression on a table with missing values and categories."""


class CatBoostTableClassifier(ClassifierMixin, _CatBoostTable):
    """CatBoost classification on a table with missing values and categories."""

    def fit(self, X, y):
        super().fit(X, y)
        self.classes_ = np.asarray(self.model_.classes_)
        return self

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        return self.model_.predict_proba(self._table(X))


def lightgbm_model(task: str, random_state):
    """LightGBM with its defaults on one thread; categories from the ``category`` dtype."""
    import lightgbm
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    model = lightgbm.LGBMRegressor if task == "regression" else lightgbm.LGBMClassifier
    return make_pipeline(
        FunctionTransformer(_categories_as_category),
        model(n_jobs=1, random_state=seed_integer(random_state), verbose=-1),
    )


def _categories_as_category(X) -> pd.DataFrame:
    """:func:`as_float_frame`, text columns as ``category`` (what LightGBM splits on)."""
    frame = as_float_frame(X)
    return frame.astype({c: "category" for c in categorical_columns(frame)})
