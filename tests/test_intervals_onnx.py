"""ONNX export of ConformalRegressor: ``y``, ``lower`` and ``upper`` of every method
against ``predict`` and ``predict_interval``, and the metadata."""

import numpy as np
import pytest

from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import ConformalRegressor

from ._interval_helpers import TINY, categorical_model, simulated

ort = pytest.importorskip("onnxruntime")


def _run(onnx_model, encoded):
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    missing = np.isnan(encoded)
    return session.run(["y", "lower", "upper"], {
        "X": np.where(missing, 0, encoded).astype(np.float32), "M": missing.astype(np.float32)})


def _model(method, base_class=None, n=800, d=3, missing_rate=0.4, n_test=60):
    X, y, truth = simulated(n, d=d, missing_rate=missing_rate)
    if base_class is None:
        base_class = NeuMissRegressor if method == "split" else NeuMissQuantileRegressor
    model = ConformalRegressor(base_class(**TINY), method=method, random_state=0).fit(X, y)
    return model, truth.sample(n_test, random_state=1)[0]


@pytest.mark.parametrize("method", ["split", "cqr", "cqr-mda-exact", "cqr-mda-nested",
                                    "cqr-mondrian"])
def test_onnx_export_computes_the_same_intervals(tmp_path, method):
    if method == "cqr-mondrian":  # with frequent patterns (cells of their own) and counts
        model, X_test = _model(method, n=2400, d=2, missing_rate=0.3, n_test=300)
        assert 0 < len(model.cell_patterns_) < 4
    else:
        model, X_test = _model(method)
    onnx_model = model.to_onnx(tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").stat().st_size > 0
    y, lower, upper = _run(onnx_model, X_test)
    interval = model.predict_interval(X_test)
    np.testing.assert_allclose(y, model.predict(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lower, interval[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(upper, interval[:, 1], rtol=1e-5, atol=1e-5)
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert meta["interval_method"] == method and meta["estimator"] == "ConformalRegressor"
    assert meta["alpha"] == "0.1" and meta["n_calibration"] == str(model.calibration_scores_.size)
    embedded = meta["embedded_calibration_rows"]
    assert embedded == (str(model.calibration_scores_.size) if "mda" in method else "0")


def test_split_over_a_quantile_head_exports_its_median():
    model, X_test = _model("split", NeuMissQuantileRegressor, n=600, n_test=30)
    y, lower, upper = _run(model.to_onnx(), X_test)
    np.testing.assert_allclose(y, model.predict(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.column_stack([lower, upper]), model.predict_interval(X_test),
                               rtol=1e-5, atol=1e-5)


def test_mda_graph_remasks_encoded_categorical_columns_as_python_does():
    model, test = categorical_model()
    _, lower, upper = _run(model.to_onnx(), model.estimator_.encoder_.transform(test))
    np.testing.assert_allclose(np.column_stack([lower, upper]), model.predict_interval(test),
                               rtol=1e-5, atol=1e-5)
