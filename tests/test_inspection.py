"""scikit-learn's inspection tools on NeuMiss estimators whose inputs have missing values:
permutation importance and partial dependence (the brute method, through predict)."""

import numpy as np
import pandas as pd
from sklearn.inspection import partial_dependence, permutation_importance

from neumiss import NeuMissClassifier, NeuMissRegressor
from tests.conftest import FAST, paper


def _data(n=300, seed=0):
    """A numeric column that matters, one that does not, and a categorical one that
    matters; NaN (or None) in each."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"signal": rng.normal(size=n), "noise": rng.normal(size=n),
                          "group": rng.choice(["a", "b"], n)})
    y = 2 * frame["signal"] + np.where(frame["group"] == "a", 1.0, -1.0)
    y = y + 0.1 * rng.normal(size=n)
    frame.loc[rng.random(n) < 0.2, "signal"] = np.nan
    frame.loc[rng.random(n) < 0.2, "noise"] = np.nan
    frame.loc[rng.random(n) < 0.2, "group"] = None
    return frame, y.to_numpy()


def test_permutation_importance_ranks_the_columns_with_missing_values():
    frame, y = _data()
    model = paper(NeuMissRegressor, **{**FAST, "max_epochs": 30}).fit(frame, y)
    result = permutation_importance(model, frame, y, n_repeats=3, random_state=0)
    importance = dict(zip(frame.columns, result.importances_mean, strict=True))
    assert np.isfinite(result.importances).all()
    assert importance["signal"] > importance["group"] > importance["noise"]
    assert abs(importance["noise"]) < 0.05
    classifier = paper(NeuMissClassifier, **{**FAST, "max_epochs": 30}).fit(frame, y > 0)
    result = permutation_importance(classifier, frame, y > 0, n_repeats=3, random_state=0,
                                    scoring="neg_log_loss")
    assert result.importances_mean[0] > result.importances_mean[1]


def test_partial_dependence_is_the_mean_prediction_at_each_value():
    frame, y = _data()
    model = paper(NeuMissRegressor, **FAST).fit(frame, y)
    # a column with NaN: scikit-learn's percentile grid would be NaN, so the grid is given
    grid = np.quantile(frame["signal"].dropna(), [0.05, 0.5, 0.95])
    result = partial_dependence(model, frame, ["signal"], custom_values={"signal": grid})
    expected = [model.predict(frame.assign(signal=v)).mean() for v in grid]
    np.testing.assert_allclose(result["average"][0], expected, rtol=1e-10)
    # the linear head: each row is linear in an observed value, so is the average
    values = np.linspace(-2, 2, 5)
    linear = partial_dependence(model, frame, ["signal"], custom_values={"signal": values})
    np.testing.assert_allclose(np.diff(linear["average"][0], 2), 0, atol=1e-6)
    groups = partial_dependence(model, frame, ["group"], categorical_features=["group"],
                                custom_values={"group": ["a", "b"]})
    assert groups["average"][0][0] > groups["average"][0][1]  # a: +1, b: -1


def test_partial_dependence_of_a_complete_column_uses_the_default_grid():
    frame, y = _data()
    frame["signal"] = frame["signal"].fillna(0.0)
    classifier = paper(NeuMissClassifier, **FAST).fit(frame, y > 0)
    result = partial_dependence(classifier, frame, ["signal"], grid_resolution=4)
    assert np.isfinite(result["grid_values"][0]).all()
    assert result["average"].shape == (1, 4)
    # the probability of the positive class grows with the signal
    assert np.all(np.diff(result["average"][0]) > 0)
