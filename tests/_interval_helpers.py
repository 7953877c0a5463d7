"""Fast base models and data for the interval tests.

The conformal logic is checked with base models whose bounds are known in closed form
(:class:`FixedQuantiles`) or fitted by least squares in milliseconds
(:class:`LinearQuantiles`), independently of network training.
"""

import functools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy.stats import beta
from sklearn.base import BaseEstimator, RegressorMixin

import neumiss

ALPHA = 0.1
#: A small NeuMiss network, for the tests that need one (save/load, ONNX).
TINY = dict(depth=1, mlp_depth=0, ensemble_size=2, max_epochs=3, random_state=0)


class LinearQuantiles(RegressorMixin, BaseEstimator):
    """Mean imputation + least squares; quantiles ``center -+ spread (1 + n_missing / 2)``."""

    def __init__(self, spread=1.0):
        self.spread = spread

    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        self.n_features_in_ = X.shape[1]
        self.mean_ = np.nanmean(X, axis=0)
        design = np.column_stack([np.where(np.isnan(X), self.mean_, X), np.ones(len(X))])
        self.coef_ = np.linalg.lstsq(design, y, rcond=None)[0]
        return self

    def predict(self, X):
        X = np.asarray(X, dtype=float)
        return np.where(np.isnan(X), self.mean_, X) @ self.coef_[:-1] + self.coef_[-1]

    def predict_quantiles(self, X):
        center = self.predict(X)
        half = self.spread * (1 + np.isnan(np.asarray(X, dtype=float)).sum(axis=1) / 2)
        return np.column_stack([center - half, center, center + half])


class FixedQuantiles:
    """A fitted base model without fit: ``f(x)`` the sum of the observed entries,
    quantiles ``f(x) -+ (1 + n_missing)``, so that re-masking a row changes both."""

    def predict(self, X):
        return np.nansum(np.asarray(X, dtype=float), axis=1)

    def predict_quantiles(self, X):
        center = self.predict(X)
        half = 1.0 + np.isnan(np.asarray(X, dtype=float)).sum(axis=1)
        return np.column_stack([center - half, center, center + half])


def simulated(n, d=3, missing_rate=0.4, seed=0, mechanism="MCAR"):
    """``(X, y, truth)`` of :func:`neumiss.simulation.make_regression`."""
    return neumiss.simulation.make_regression(
        n, d, mechanism=mechanism, missing_rate=missing_rate, random_state=seed
    )


def kth(values, rank):
    """The ``rank``-th smallest (1-based) of ``values``, by sorting."""
    return np.sort(values)[rank - 1]


def _exact(alpha):
    """``alpha`` as the fraction it stands for (0.1 -> 1/10, 1/3 -> 1/3), so that the ranks
    below are computed in exact arithmetic, not rounded across a whole number."""
    return Fraction(alpha).limit_denominator(10_000)


def usual_rank(n, alpha):
    """``ceil((1 - alpha)(n + 1))``, in exact arithmetic."""
    return math.ceil((1 - _exact(alpha)) * (n + 1))


def nested_lower_rank(n, alpha):
    """``floor(alpha (n + 1))``, in exact arithmetic."""
    return math.floor(_exact(alpha) * (n + 1))


def conformal_rank(n, alpha, confidence):
    """The rank of the calibration quantile, from the Beta law of the coverage of the
    k-th smallest of n scores: the smallest k with P(coverage < 1 - alpha) <= 1 - confidence
    (the usual ``ceil((1 - alpha)(n + 1))`` for None)."""
    if confidence is None:
        return usual_rank(n, alpha)
    return next(k for k in range(1, n + 1) if beta.cdf(1 - alpha, k, n + 1 - k) <= 1 - confidence)


@functools.lru_cache(maxsize=1)
def categorical_model():
    """A ``"cqr-mda-exact"`` model of a DataFrame with a numeric, a categorical and a text
    column (30% missing each), and 40 of its rows; shared: do not modify it."""
    from neumiss.estimators import NeuMissQuantileRegressor
    from neumiss.intervals import ConformalRegressor

    rng = np.random.default_rng(0)
    n = 900
    frame = pd.DataFrame({
        "a": rng.normal(size=n), "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
        "s": rng.choice(["u", "v"], n).astype(object),
    })
    y = frame["a"] + 2.0 * (frame["c"] == "y") + rng.normal(scale=0.3, size=n)
    for column in frame:
        frame.loc[rng.random(n) < 0.3, column] = np.nan
    model = ConformalRegressor(NeuMissQuantileRegressor(**TINY), method="cqr-mda-exact",
                               random_state=0).fit(frame, y)
    return model, frame.iloc[:40]


def simulated_classes(n, d=3, n_classes=3, missing_rate=0.4, seed=0, mechanism="MCAR"):
    """``(X, labels, sample)``: :func:`simulated` with ``y`` cut at its quantiles into
    ``n_classes`` classes; ``sample(n, seed)`` draws more rows of the same distribution."""
    X, y, truth = simulated(n, d=d, missing_rate=missing_rate, seed=seed, mechanism=mechanism)
    cuts = np.quantile(y, np.arange(1, n_classes) / n_classes)

    def sample(n_rows, random_state):
        X_new, y_new = truth.sample(n_rows, random_state=random_state)
        return X_new, np.digitize(y_new, cuts)

    return X, np.digitize(y, cuts), sample


def imputed_logistic():
    """Mean imputation with missing indicators + logistic regression: a fast classifier
    with ``predict_proba``."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(SimpleImputer(add_indicator=True), LogisticRegression())
