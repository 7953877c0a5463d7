"""``log_target``: the regressor fits ``log y`` and predicts ``exp`` of it, when asked or
("auto") when ``y`` is positive and log-normal-like; every scorer and saved model agrees."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neumiss
from neumiss import NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.estimators import LOG_SCALE_SKEWNESS, LOG_TARGET_SKEWNESS, fit_stream
from neumiss.intervals import ConformalRegressor
from neumiss.scoring import score_frame

from .conftest import FAST, PROPERTY
from .test_deploy_fixes import SCORER

ort = pytest.importorskip("onnxruntime")


def sales_table(n=800, seed=0, missing=0.2):
    """A city (8 categories whose sizes multiply y), a season and a price, NaN in the
    numbers: y log-normal, its effects multiplicative; and y."""
    rng = np.random.default_rng(seed)
    city = rng.integers(0, 8, n)
    season, price = rng.normal(size=n), rng.normal(size=n)
    log_y = 3 + 1.2 * np.arange(8)[city] * 0.5 + 0.6 * season - 0.4 * price
    y = np.exp(log_y + 0.3 * rng.normal(size=n))
    frame = pd.DataFrame({"city": pd.Categorical([f"c{c}" for c in city]),
                          "season": season, "price": price})
    for column in ("season", "price"):
        frame.loc[rng.random(n) < missing, column] = np.nan
    return frame, y


def moment_skewness(values):
    """The sample skewness m3 / m2^1.5 written out (central moments, divisor n)."""
    centred = values - values.mean()
    return np.mean(centred**3) / np.mean(centred**2) ** 1.5


def test_auto_takes_the_log_of_a_positive_skewed_target_only():
    X, y = sales_table()
    assert moment_skewness(y) > LOG_TARGET_SKEWNESS
    assert abs(moment_skewness(np.log(y))) < LOG_SCALE_SKEWNESS
    assert NeuMissRegressor(**FAST).fit(X, y).log_target_ is True
    shifted = y - np.median(y)  # the same tail, but not positive
    assert NeuMissRegressor(**FAST).fit(X, shifted).log_target_ is False
    symmetric = np.log(y)  # positive but not skewed
    assert NeuMissRegressor(**FAST).fit(X, symmetric + 10).log_target_ is False
    # Positive and skewed, but log y is far more skewed the other way (values near 0).
    near_zero = y.copy()
    near_zero[:10] = 1e-9
    assert moment_skewness(near_zero) > LOG_TARGET_SKEWNESS
    assert abs(moment_skewness(np.log(near_zero))) > LOG_SCALE_SKEWNESS
    assert NeuMissRegressor(**FAST).fit(X, near_zero).log_target_ is False
    assert NeuMissRegressor(**FAST, log_target=False).fit(X, y).log_target_ is False
    assert NeuMissRegressor(**FAST).fit(X, np.full(len(y), 3.0)).log_target_ is False


def test_the_fit_is_the_raw_fit_of_log_y():
    frame, y = sales_table(n=500)
    on_log = NeuMissRegressor(**FAST, log_target=True).fit(frame, y)
    of_log = NeuMissRegressor(**FAST, log_target=False).fit(frame, np.log(y))
    assert on_log.y_mean_ == pytest.approx(np.log(y).mean(), rel=1e-12)
    np.testing.assert_allclose(on_log.predict(frame), np.exp(of_log.predict(frame)), rtol=1e-6)
    quantile = NeuMissQuantileRegressor(**FAST, log_target=True).fit(frame, y)
    raw_quantile = NeuMissQuantileRegressor(**FAST, log_target=False).fit(frame, np.log(y))
    np.testing.assert_allclose(quantile.predict_quantiles(frame),
                               np.exp(raw_quantile.predict_quantiles(frame)), rtol=1e-6)


def test_a_multiplicative_target_is_fitted_better_on_the_log_scale():
    frame, y = sales_table(n=3000, seed=3)
    train, test = slice(0, 2000), slice(2000, None)
    params = dict(depth=0, mlp_depth=0, spline=False, ensemble_size=1, random_state=0)
    logged = NeuMissRegressor(**params).fit(frame[train], y[train])
    raw = NeuMissRegressor(**params, log_target=False).fit(frame[train], y[train])
    assert logged.log_target_ and not raw.log_target_
    # A linear model of log y is exact here; on the raw scale it cannot bend.
    assert logged.score(frame[test], y[test]) > raw.score(frame[test], y[test]) + 0.1
    assert (logged.predict(frame[test]) > 0).all()


def test_targets_that_are_not_positive_are_refused_by_name():
    frame, y = sales_table(n=300)
    with pytest.raises(ValueError, match="log_target=True needs a positive y.*-1.0"):
        NeuMissRegressor(**FAST, log_target=True).fit(frame, np.r_[y[:-1], -1.0])
    with pytest.raises(ValueError, match="validation_data: y_val must be positive.*0.0; "
                                         "fit with log_target=False"):
        NeuMissRegressor(**FAST, log_target=True).fit(
            frame, y, validation_data=(frame[:20], np.r_[0.0, y[1:20]]))
    with pytest.raises(ValueError, match="log_target"):
        NeuMissRegressor(**FAST, log_target="log").fit(frame, y)


def test_pattern_models_are_linear_models_of_log_y():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 3))
    y = np.exp(X @ [0.7, -0.5, 0.3] + 0.2 * rng.normal(size=1500))
    X[rng.random(X.shape) < 0.3] = np.nan
    model = NeuMissRegressor(depth=2, mlp_depth=0, spline=False, ensemble_size=1,
                             max_epochs=5, random_state=0, log_target=True).fit(X, y)
    row = np.array([[0.5, np.nan, -1.0]])
    linear = model.pattern_model(np.isnan(row[0]))
    log_prediction = linear.intercept + linear.coef @ row[0, [0, 2]]
    assert model.predict(row)[0] == pytest.approx(np.exp(log_prediction), rel=1e-5)


def test_scorers_intervals_and_saved_models_agree_with_predict(tmp_path):
    frame, y = sales_table(n=600)
    model = NeuMissRegressor(**FAST).fit(frame, y)
    assert model.log_target_
    expected = model.predict(frame)
    path = tmp_path / "model.onnx"
    onnx_model = model.to_onnx(str(path))
    assert "Exp" in {node.op_type for node in onnx_model.graph.node}
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert meta["log_target"] == "true"
    np.testing.assert_allclose(score_frame(frame, str(path))["prediction"], expected, rtol=1e-5)
    csv = tmp_path / "in.csv"
    frame.to_csv(csv, index=False)
    assert SCORER.main([str(path), str(csv), "-o", str(tmp_path / "out.csv")]) == 0
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out.csv")["prediction"], expected, rtol=1e-5)
    model.save(tmp_path / "model.neumiss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = neumiss.load(tmp_path / "model.neumiss")
    assert loaded.log_target_ is True
    np.testing.assert_array_equal(loaded.predict(frame), expected)
    intervals = ConformalRegressor(NeuMissRegressor(**FAST), method="split",
                                   random_state=0).fit(frame, y)
    assert intervals.estimator_.log_target_
    scored = score_frame(frame, intervals.to_onnx().SerializeToString())
    np.testing.assert_allclose(scored[["lower", "upper"]].to_numpy(),  # float32 graph: in
                               intervals.predict_interval(frame),  # units of y's size
                               rtol=1e-5, atol=1e-6 * np.abs(y).max())


def test_a_stream_takes_the_log_only_when_asked():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 3))
    y = np.exp(X @ [0.7, -0.5, 0.3] + 0.3 * rng.normal(size=1200))
    chunks = [(X[i : i + 400], y[i : i + 400]) for i in range(0, 1200, 400)]
    params = dict(depth=1, mlp_depth=0, weight_sharing="shared", ensemble_size=1,
                  max_epochs=3, random_state=0)
    assert fit_stream(NeuMissRegressor(**params), chunks).log_target_ is False
    streamed = fit_stream(NeuMissRegressor(**params, log_target=True), chunks)
    assert streamed.log_target_ and streamed.y_mean_ == pytest.approx(np.log(y).mean())
    with pytest.raises(ValueError, match="chunk 1: y must be positive"):
        fit_stream(NeuMissRegressor(**params, log_target=True),
                   [chunks[0], (chunks[1][0], -chunks[1][1])])


@PROPERTY
@given(factor=st.floats(1e-3, 1e3))
def test_rescaling_y_rescales_the_predictions(factor):
    frame, y = sales_table(n=300)
    base = NeuMissRegressor(**FAST).fit(frame, y).predict(frame)
    scaled = NeuMissRegressor(**FAST).fit(frame, factor * y)
    assert scaled.log_target_
    np.testing.assert_allclose(scaled.predict(frame), factor * base, rtol=1e-4)
