"""The Standardizer: observed-entry scaling at any magnitude, and the smooth compression
of heavy tails."""

import numpy as np
import onnxruntime as ort
import pytest

from neumiss import NeuMissRegressor
from neumiss.tables import CLIP_BOUND, Standardizer, mean_scale, observed_mean_scale

from .conftest import paper


def heavy_table(n=3000, seed=0):
    """Column 0 Gaussian, column 1 log-normal (heavy right tail), column 2 one-hot-like 0/1."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.normal(size=n), np.exp(2.0 * rng.normal(size=n)), (rng.random(n) < 0.02) * 1.0,
    ])
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def test_observed_mean_scale_ignores_missing_entries():
    X = np.array([[1.0, np.nan], [3.0, 5.0], [np.nan, 5.0]])
    mean, scale = observed_mean_scale(X)
    np.testing.assert_allclose(mean, [2.0, 5.0])
    np.testing.assert_allclose(scale, [1.0, 1.0])  # constant column: scale 1


def test_gaussian_columns_are_only_standardized():
    X = heavy_table()
    plain = Standardizer().fit(X)
    compressing = Standardizer(compress_tails=True, numeric=np.array([True, True, False])).fit(X)
    x_plain, mask = plain.transform(X)
    x_comp, mask_comp = compressing.transform(X)
    np.testing.assert_array_equal(mask, mask_comp)
    np.testing.assert_array_equal(x_comp[:, [0, 2]], x_plain[:, [0, 2]])
    # The log-normal column is compressed: bounded by CLIP_BOUND, median at 0, order kept.
    np.testing.assert_array_equal(compressing.inverse_bound_, [0.0, 1.0 / CLIP_BOUND, 0.0])
    observed = ~np.isnan(X[:, 1])
    assert np.abs(x_comp[observed, 1]).max() < CLIP_BOUND
    assert compressing.mean_[1] == pytest.approx(np.nanmedian(X[:, 1]))
    order = np.argsort(X[observed, 1])
    assert np.all(np.diff(x_comp[observed, 1][order]) >= 0)


def test_columns_not_marked_numeric_are_never_compressed():
    X = heavy_table()
    standardizer = Standardizer(compress_tails=True, numeric=np.zeros(3, bool)).fit(X)
    assert not standardizer.inverse_bound_.any()


def test_inverse_transform_undoes_the_compression():
    X = heavy_table()
    standardizer = Standardizer(compress_tails=True).fit(X)
    x, mask = standardizer.transform(X)
    back = standardizer.inverse_transform(x.astype(np.float64))
    observed = mask == 0
    np.testing.assert_allclose(back[observed], X[observed], rtol=1e-3, atol=1e-4)


def test_state_round_trip():
    X = heavy_table()
    standardizer = Standardizer(compress_tails=True).fit(X)
    again = Standardizer.from_state(standardizer.get_state())
    np.testing.assert_array_equal(again.transform(X)[0], standardizer.transform(X)[0])


def test_compressed_model_exports_to_onnx(tmp_path):
    # The paper's single network: the compression under test is in the standardization,
    # whatever the network after it (MLP heads and ensembles: test_onnx_export, test_ensemble).
    X = heavy_table(800)
    y = np.nan_to_num(X[:, 0]) + np.log(np.nan_to_num(X[:, 1], nan=1.0))
    model = paper(NeuMissRegressor, compress_tails=True, max_epochs=5, random_state=0)
    model.fit(X, y)
    assert model.preprocessor_.inverse_bound_[1] > 0
    model.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    missing = np.isnan(X)
    feeds = {"X": np.where(missing, 0, X).astype(np.float32), "M": missing.astype(np.float32)}
    np.testing.assert_allclose(
        session.run(["y"], feeds)[0], model.predict(X), rtol=1e-4, atol=1e-4 * model.y_scale_
    )


def test_scales_are_relative_to_each_column():
    X = np.array([[1e-13, 1e300, 1e6, 5.0], [3e-13, -1e300, 1e6 + 1e-9, 5.0],
                  [np.nan, 2e300, 1e6, 5.0]])
    mean, scale = observed_mean_scale(X)
    assert np.isfinite(mean).all() and np.isfinite(scale).all()
    assert scale[0] == pytest.approx(1e-13)  # tiny but real: kept
    assert scale[1] == pytest.approx(np.std([1.0, -1.0, 2.0]) * 1e300)
    assert scale[2] == 1.0 and scale[3] == 1.0  # constant up to rounding, and constant
    assert mean_scale(np.array([])) == (0.0, 1.0)
    assert mean_scale(np.zeros(3)) == (0.0, 1.0)


def test_values_beyond_the_training_range_are_scored_at_its_edge(tmp_path):
    X = heavy_table(600)
    y = np.nan_to_num(X[:, 0]) + 0.1 * np.nan_to_num(X[:, 1])
    model = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(X, y)
    pre = model.preprocessor_
    x, mask = pre.transform(X)
    observed = mask == 0
    # The bounds are the standardized training range of each column.
    for j in range(3):
        column = x[observed[:, j], j]
        assert pre.lower_[j] == pytest.approx(column.min(), rel=1e-6)
        assert pre.upper_[j] == pytest.approx(column.max(), rel=1e-6)
    # Rows far beyond it predict as the rows at its edge, on every scoring path.
    edge = np.array([[np.nanmax(X[:, 0]), np.nanmin(X[:, 1]), np.nan]])
    beyond = np.array([[np.nanmax(X[:, 0]) + 1e6, np.nanmin(X[:, 1]) - 1e6, np.nan]])
    assert model.predict(beyond)[0] == pytest.approx(model.predict(edge)[0], rel=1e-6)
    model.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    rows = np.vstack([beyond, X[:50]])
    missing = np.isnan(rows)
    feeds = {"X": np.where(missing, 0, rows).astype(np.float32), "M": missing.astype(np.float32)}
    np.testing.assert_allclose(session.run(["y"], feeds)[0], model.predict(rows), rtol=1e-4,
                               atol=1e-4 * model.y_scale_)


def test_a_file_without_bounds_does_not_clip():
    X = heavy_table(200)
    state = Standardizer().fit(X).get_state()
    del state["lower"], state["upper"]  # a standardizer saved before the clipping
    old = Standardizer.from_state(state)
    far = np.array([[100.0, 1e4, 1.0]])
    expected = (far - old.mean_) / old.scale_
    np.testing.assert_allclose(old.transform(far)[0], expected.astype(np.float32), rtol=1e-6)
