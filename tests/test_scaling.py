"""Scale: features and targets at any power of ten give the same fit, in their units;
values far outside the training range give finite predictions or an error naming them."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neumiss import NeuMissRegressor

from .conftest import FAST, PROPERTY, linear_data, paper


@pytest.mark.slow
@PROPERTY
@given(
    k=st.integers(-300, 300),
    columns=st.lists(st.booleans(), min_size=3, max_size=3),
    j=st.integers(-300, 300),
)
def test_predictions_are_invariant_to_powers_of_ten_of_features_and_target(k, columns, j):
    X, y = linear_data(150, 3)
    factor = np.where(columns, 10.0**k, 1.0)
    base = paper(NeuMissRegressor, **FAST).fit(X, y).predict(X)
    scaled = paper(NeuMissRegressor, **FAST).fit(X * factor, y * 10.0**j)
    np.testing.assert_allclose(
        scaled.predict(X * factor) / 10.0**j, base, rtol=1e-5, atol=1e-5 * np.std(base)
    )


@pytest.mark.parametrize("k", [-300, -13, 300])
def test_extreme_units_of_one_feature_change_nothing(k):
    X, y = linear_data(150, 3)
    base = paper(NeuMissRegressor, **FAST).fit(X, y)
    X_scaled = X.copy()
    X_scaled[:, 0] *= 10.0**k
    scaled = paper(NeuMissRegressor, **FAST).fit(X_scaled, y)
    assert np.isfinite(scaled.preprocessor_.scale_).all()
    assert scaled.preprocessor_.scale_[0] == pytest.approx(
        base.preprocessor_.scale_[0] * 10.0**k, rel=1e-12)
    np.testing.assert_allclose(scaled.predict(X_scaled), base.predict(X), rtol=1e-6, atol=1e-6)


def test_a_target_at_1e300_or_1e_300_is_learned():
    X, y = linear_data(200, 3)
    base = paper(NeuMissRegressor, **FAST).fit(X, y)
    for k in (300, -300):
        model = paper(NeuMissRegressor, **FAST).fit(X, y * 10.0**k)
        assert np.isfinite(model.y_scale_) and model.y_scale_ > 0
        prediction = model.predict(X)
        assert np.isfinite(prediction).all()
        np.testing.assert_allclose(prediction / 10.0**k, base.predict(X), rtol=1e-6, atol=1e-9)
        assert model.score(X, y * 10.0**k) == pytest.approx(base.score(X, y), abs=1e-6)


def test_values_far_outside_the_training_range_are_named_at_predict():
    X, y = linear_data(200, 3)
    model = paper(NeuMissRegressor, **FAST).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)
    rows = pd.DataFrame([[0.0, 1.0, 2.0], [1e40, 0.0, np.nan]], columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"rows \[1\] \(columns \['a'\]\)"):
        model.predict(rows)


@PROPERTY
@given(X=arrays(np.float64, (4, 3),
                elements=st.one_of(st.floats(-1e300, 1e300), st.just(np.nan))))
def test_predict_is_finite_or_an_error_naming_rows(fitted, X):
    regressor, classifier = fitted
    for predict in (regressor.predict, classifier.predict_proba, regressor.impute):
        try:
            out = predict(X)
        except ValueError as error:
            assert re.search(r"rows \[\d", str(error)), str(error)
        else:
            assert np.isfinite(out).all()
