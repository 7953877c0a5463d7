"""pattern_model(): the exact linear model a linear-head NeuMiss network applies to the rows
of one missingness pattern, checked against the estimators' own predictions."""

import numpy as np
import pandas as pd
import pytest

from neumiss import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from tests.conftest import FAST, linear_data, paper


def _patterns(X):
    """The distinct missingness patterns of ``X`` and the rows of each."""
    mask = np.isnan(X)
    patterns, inverse = np.unique(mask, axis=0, return_inverse=True)
    return [(pattern, np.flatnonzero(inverse.ravel() == k)) for k, pattern in enumerate(patterns)]


def test_every_pattern_of_an_ensemble_regressor_predicts_by_its_model():
    X, y = linear_data(300, 3)
    X[:, 1] = X[:, 1] * 1000 + 5000  # a column far from the standardized scale
    model = paper(NeuMissRegressor, **{**FAST, "depth": 2, "ensemble_size": 3}).fit(X, y)
    predictions = model.predict(X)
    for pattern, rows in _patterns(X):
        linear = model.pattern_model(pattern)
        assert linear.missing.tolist() == pattern.tolist()
        assert linear.feature_names.tolist() == [str(j) for j in np.flatnonzero(~pattern)]
        by_model = linear.intercept + X[np.ix_(rows, ~pattern)] @ linear.coef
        np.testing.assert_allclose(by_model, predictions[rows], rtol=1e-6, atol=1e-6)
    # the same pattern given as indices or as a boolean row
    np.testing.assert_array_equal(model.pattern_model([1]).coef,
                                  model.pattern_model([False, True, False]).coef)
    assert model.pattern_model().coef.shape == (3,)
    everything = model.pattern_model([0, 1, 2])
    assert everything.coef.shape == (0,)
    assert everything.intercept == pytest.approx(model.predict(np.full((1, 3), np.nan))[0])


def test_categorical_columns_have_one_coefficient_per_category():
    rng = np.random.default_rng(1)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["u", "v", "w"], n)})
    y = 2 * frame["x"] + frame["g"].map({"u": 0.0, "v": 1.0, "w": -1.0}) + rng.normal(size=n)
    frame.loc[:40, "x"] = np.nan
    frame.loc[41:80, "g"] = None
    model = paper(NeuMissRegressor, **FAST).fit(frame, y)
    linear = model.pattern_model()
    assert linear.feature_names.tolist() == ["x", "g=u", "g=v", "g=w"]
    complete = frame.iloc[81:]
    encoded = np.column_stack([complete["x"]] + [complete["g"] == c for c in "uvw"])
    np.testing.assert_allclose(linear.intercept + encoded @ linear.coef,
                               model.predict(complete), rtol=1e-6, atol=1e-6)
    without_x = model.pattern_model(["x"])
    assert without_x.feature_names.tolist() == ["g=u", "g=v", "g=w"]
    rows = frame.iloc[:41]
    np.testing.assert_allclose(
        without_x.intercept + np.column_stack([rows["g"] == c for c in "uvw"]) @ without_x.coef,
        model.predict(rows), rtol=1e-6, atol=1e-6)


def test_classifiers_give_the_model_of_their_logits():
    X, y = linear_data(300, 3)
    binary = paper(NeuMissClassifier, **FAST).fit(X, y > np.median(y))
    three = paper(NeuMissClassifier, **FAST).fit(X, np.digitize(y, np.quantile(y, [0.3, 0.6])))
    for model in (binary, three):
        logits = model.decision_function(X)
        for pattern, rows in _patterns(X):
            linear = model.pattern_model(pattern)
            by_model = linear.intercept + X[np.ix_(rows, ~pattern)] @ np.transpose(linear.coef)
            np.testing.assert_allclose(by_model, logits[rows], rtol=1e-6, atol=1e-6)
    assert three.pattern_model([0]).coef.shape == (3, 2)
    assert three.pattern_model([0]).intercept.shape == (3,)


def test_quantile_regressor_gives_one_model_per_quantile_before_sorting():
    X, y = linear_data(300, 3)
    model = paper(NeuMissQuantileRegressor, **FAST).fit(X, y)
    pattern, rows = _patterns(X)[0]
    linear = model.pattern_model(pattern)
    assert linear.coef.shape == (3, int((~pattern).sum()))
    by_model = linear.intercept + X[np.ix_(rows, ~pattern)] @ linear.coef.T
    np.testing.assert_allclose(np.sort(by_model, axis=1), model.predict_quantiles(X[rows]),
                               rtol=1e-6, atol=1e-6)


def test_networks_that_are_not_linear_have_no_model():
    X, y = linear_data(300, 3)
    mlp = paper(NeuMissRegressor, **{**FAST, "mlp_depth": 1}).fit(X, y)
    with pytest.raises(ValueError, match=r"MLP head \(1 hidden layer\(s\)\).*mlp_depth=0"):
        mlp.pattern_model()
    ensemble = paper(NeuMissClassifier, **{**FAST, "ensemble_size": 2}).fit(X, y > 0)
    with pytest.raises(ValueError, match="averages their probabilities.*ensemble_size=1"):
        ensemble.pattern_model()
    heavy = X.copy()
    heavy[:5, 2] = 1e4  # far tails: compressed
    compressed = paper(NeuMissRegressor, **FAST).fit(heavy, y)  # compressed by default
    with pytest.raises(ValueError, match=r"column\(s\) 2 are compressed.*compress_tails=False"):
        compressed.pattern_model()
    # the pattern without that column is linear, and so is every one uncompressed
    assert compressed.pattern_model([2]).coef.shape == (2,)
    linear = paper(NeuMissRegressor, **{**FAST, "compress_tails": False}).fit(heavy, y)
    assert linear.pattern_model().coef.shape == (3,)


def test_a_network_found_nonlinear_at_the_check_points_is_refused(fitted, monkeypatch):
    regressor = fitted[0]
    apply = regressor._apply_encoded
    monkeypatch.setattr(regressor, "_apply_encoded", lambda X: np.tanh(apply(X)))
    with pytest.raises(ValueError, match="not affine in the observed values"):
        regressor.pattern_model()


@pytest.mark.parametrize("missing, message", [
    ([True, False], r"one value per feature \(3\), got shape \(2,\)"),
    (["a"], r"holds 'a', which is not a feature of the model \(indices 0 to 2\)"),
    ([3], "holds 3"),
])
def test_bad_patterns_are_refused(fitted, missing, message):
    with pytest.raises(ValueError, match=message):
        fitted[0].pattern_model(missing)
