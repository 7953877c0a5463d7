"""The R package's Python side (r_wrapper/inst/python/neumiss_r.py) for coef(), importance()
and plot(type = "pdp"): plain lists in and out, scikit-learn's inspection tools inside."""

import numpy as np
import pandas as pd
from sklearn.inspection import permutation_importance

from neumiss import ConformalRegressor, NeuMissQuantileRegressor
from tests.conftest import FAST, linear_data, paper
from tests.test_baselines import _r_adapter


def _table(X):
    """A numeric matrix as the R side sends a table (NaN = missing)."""
    return {"names": [f"x{j}" for j in range(X.shape[1])],
            "columns": [{"kind": "numeric", "values": list(X[:, j])} for j in range(X.shape[1])]}


def test_pattern_model_of_an_interval_fit_is_its_median_model():
    adapter = _r_adapter()
    X, y = linear_data(300, 3)
    base = paper(NeuMissQuantileRegressor, quantiles=(0.05, 0.5, 0.95), **FAST)
    model = ConformalRegressor(base, method="cqr", alpha=0.1, random_state=0).fit(X, y)
    result = adapter.pattern_model(model, [False, True, False])
    linear = model.estimator_.pattern_model([1])
    assert result == {"intercept": float(linear.intercept[1]), "coef": list(linear.coef[1]),
                      "names": ["0", "2"]}


def test_importance_and_partial_dependence_are_scikit_learns(fitted):
    adapter = _r_adapter()
    regressor = fitted[0]
    X, y = linear_data(300, 3)
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    model = type(regressor)(**regressor.get_params()).fit(frame, y)
    result = adapter.permutation_importance(model, _table(X), list(y), 2, "r2", 0)
    expected = permutation_importance(model, frame, y, n_repeats=2, scoring="r2",
                                      random_state=0)
    assert result["importance"] == list(expected.importances_mean)
    assert result["sd"] == list(expected.importances_std)
    grid = [-1.0, 0.0, 1.0]
    result = adapter.partial_dependence(model, _table(X), "x1", grid, False)
    assert result["n_outputs"] == 1
    expected = [model.predict(frame.assign(x1=v)).mean() for v in grid]
    np.testing.assert_allclose(result["average"], expected, rtol=1e-12)
