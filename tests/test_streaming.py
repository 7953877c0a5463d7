"""neumiss.estimators._streaming: standardization merged over chunks, fit_stream, parquet_chunks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.estimators import RunningMoments, fit_stream, parquet_chunks
from neumiss.tables import observed_mean_scale

values = st.one_of(st.just(np.nan), st.floats(-1e6, 1e6, allow_nan=False, width=64))


@settings(max_examples=30, deadline=None)
@given(X=arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 4)), elements=values),
       cuts=st.lists(st.integers(0, 40), max_size=5))
def test_moments_merged_over_any_chunks_equal_those_of_the_whole(X, cuts):
    X[:, 0] = 3.0 if X.shape[1] > 1 else X[:, 0]  # a constant column, when there are two
    moments = RunningMoments(X.shape[1])
    for chunk in np.split(X, sorted(c for c in cuts if c < X.shape[0])):
        moments.update(chunk)
    mean, scale = moments.mean_scale()
    expected_mean, expected_scale = observed_mean_scale(X)
    peak = float(np.abs(np.where(np.isnan(X), 0, X)).max())
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-9, atol=1e-9 * peak)
    np.testing.assert_allclose(scale, expected_scale, rtol=1e-6, atol=1e-9 * peak)


@pytest.mark.parametrize("magnitude", [1e-223, 1.0, 1e300])
def test_moments_hold_at_any_magnitude(magnitude):
    # Squares of values near 1e-223 underflow and near 1e300 overflow: the moments
    # are kept in units of the running peak, which grows from chunk to chunk.
    X = np.array([[0.7], [1.0], [np.nan], [0.3], [-2.5]]) * magnitude
    moments = RunningMoments(1)
    for chunk in (X[:2], X[2:4], X[4:]):
        moments.update(chunk)
    mean, scale = moments.mean_scale()
    expected_mean, expected_scale = observed_mean_scale(X)
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-12)
    np.testing.assert_allclose(scale, expected_scale, rtol=1e-12)
    assert scale[0] != 1.0


@pytest.fixture(scope="module")
def data():
    X, y, truth = neumiss.simulation.make_regression(3000, 4, random_state=0)
    return X, y, truth


PARAMS = dict(depth=2, weight_sharing="shared", ensemble_size=1, mlp_depth=0, random_state=0,
              max_epochs=8)


@pytest.mark.slow
def test_fit_stream_standardizes_as_fit_and_learns_as_well(data):
    X, y, truth = data
    X_test, y_test = truth.sample(2000, random_state=1)
    chunks = [(X[i : i + 750], y[i : i + 750]) for i in range(0, len(X), 750)]
    streamed = fit_stream(NeuMissRegressor(**PARAMS), chunks)
    in_memory = NeuMissRegressor(**PARAMS).fit(X, y)
    np.testing.assert_allclose(streamed.preprocessor_.mean_, in_memory.preprocessor_.mean_,
                               rtol=1e-10)
    np.testing.assert_allclose(streamed.preprocessor_.scale_, in_memory.preprocessor_.scale_,
                               rtol=1e-10)
    assert streamed.y_mean_ == pytest.approx(in_memory.y_mean_, rel=1e-10)
    assert streamed.y_scale_ == pytest.approx(in_memory.y_scale_, rel=1e-10)
    assert streamed.learning_rate_ == in_memory.learning_rate_
    assert streamed.n_epochs_ >= 2 and streamed.best_depth_ == 2
    assert streamed.mask_skip_ is False  # "auto" needs the rows in memory to decide
    assert streamed.score(X_test, y_test) > in_memory.score(X_test, y_test) - 0.02
    assert streamed.validation_score_ == pytest.approx(max(streamed.history_["val_score"]))


@pytest.mark.slow
def test_streamed_classifier_saves_and_exports(data, tmp_path):
    X, y, _ = data
    labels = np.where(y > np.median(y), "high", "low")
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    validation = (frame.iloc[:500], labels[:500])
    chunks = [(frame.iloc[i : i + 1250], labels[i : i + 1250]) for i in range(500, 3000, 1250)]
    model = fit_stream(NeuMissClassifier(**PARAMS), chunks, validation_data=validation)
    assert list(model.classes_) == ["high", "low"]
    assert list(model.feature_names_in_) == list(frame.columns)
    assert model.score(frame, labels) > 0.7
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    model.to_onnx(tmp_path / "m.onnx")


def test_parquet_chunks_stream_a_file(data, tmp_path):
    X, y, _ = data
    frame = pd.DataFrame(X[:2000], columns=[f"f{j}" for j in range(X.shape[1])]).assign(y=y[:2000])
    frame.to_parquet(tmp_path / "train.parquet")
    source = parquet_chunks(tmp_path / "train.parquet", "y", batch_rows=500)
    sizes = [len(chunk_y) for _, chunk_y in source()]
    assert sizes == [500] * 4 and sizes == [len(chunk_y) for _, chunk_y in source()]
    model = fit_stream(NeuMissRegressor(**{**PARAMS, "max_epochs": 2}), source)
    assert list(model.feature_names_in_) == [f"f{j}" for j in range(X.shape[1])]
    with pytest.raises(ValueError, match="no target column 'target'"):
        parquet_chunks(tmp_path / "train.parquet", "target")
    (tmp_path / "parts").mkdir()
    with pytest.raises(ValueError, match="no .parquet files"):
        parquet_chunks(tmp_path / "parts", "y")
    for k in range(2):  # a folder of files, read in name order
        frame.iloc[1000 * k : 1000 * (k + 1)].to_parquet(tmp_path / "parts" / f"{k}.parquet")
    folder = parquet_chunks(tmp_path / "parts", "y", batch_rows=600)
    assert [len(chunk_y) for _, chunk_y in folder()] == [600, 400, 600, 400]
    np.testing.assert_array_equal(np.concatenate([chunk_y for _, chunk_y in folder()]),
                                  y[:2000])


def test_fit_stream_refuses_what_it_cannot_do(data):
    X, y, _ = data
    chunks = [(X[:100], y[:100]), (X[100:200], y[100:200])]
    with pytest.raises(TypeError, match="not an iterator or generator"):
        fit_stream(NeuMissRegressor(**PARAMS), iter(chunks))
    with pytest.raises(ValueError, match="set depth and mlp_depth to integers"):
        fit_stream(NeuMissRegressor(**{**PARAMS, "depth": "auto"}), chunks)
    with pytest.raises(ValueError, match="mlp_depth='auto'"):
        fit_stream(NeuMissRegressor(**{**PARAMS, "mlp_depth": "auto"}), chunks)
    with pytest.raises(ValueError, match="the stream of chunks is empty"):
        fit_stream(NeuMissRegressor(**PARAMS), [])
    table = pd.DataFrame({"x": X[:100, 0], "c": ["a", "b"] * 50})
    with pytest.raises(ValueError, match="numeric columns only"):
        fit_stream(NeuMissRegressor(**PARAMS), [(table, y[:100])])
    with pytest.raises(ValueError, match="the stream has one chunk"):
        fit_stream(NeuMissRegressor(**PARAMS), chunks[:1])
    with pytest.raises(ValueError, match="chunk 1: y has shape"):
        fit_stream(NeuMissRegressor(**PARAMS), [chunks[0], (X[:10], y[:9])])
