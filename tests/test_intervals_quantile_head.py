"""The quantile head (:class:`~neumiss.estimators.NeuMissQuantileRegressor`), the base
model of the CQR methods: its loss, its levels and its ONNX export."""

import numpy as np
import pytest

from neumiss.estimators import NeuMissQuantileRegressor, NeuMissRegressor

from ._interval_helpers import TINY, simulated


def test_quantile_head_trains_the_pinball_loss():
    X, y, _ = simulated(600, d=3)
    model = NeuMissQuantileRegressor((0.1, 0.5, 0.9), **TINY).fit(X, y)
    q = model.predict_quantiles(X)
    assert q.shape == (600, 3) and (np.diff(q, axis=1) >= 0).all()
    np.testing.assert_allclose(model.predict(X), q[:, 1])
    import torch

    out = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
    model.quantiles = (0.2, 0.5)
    loss = model._get_loss()(out, torch.tensor([1.0, 0.0])).numpy()
    # pinball(1 - 0) at 0.2 = 0.2; (1 - 1) = 0; (0 - 2) at 0.2 = 1.6; (0 + 1) at 0.5 = 0.5
    np.testing.assert_allclose(loss, [(0.2 + 0.0) / 2, (1.6 + 0.5) / 2], rtol=1e-6)


@pytest.mark.parametrize("quantiles", [(0.1, 0.9), (0.5, 0.1), (0.0, 0.5), ()])
def test_quantile_head_refuses_bad_levels(quantiles):
    X, y, _ = simulated(100)
    with pytest.raises(ValueError, match="quantiles"):
        NeuMissQuantileRegressor(quantiles, **TINY).fit(X, y)


def test_quantile_regressor_exports_its_median_and_quantiles(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    X, y, truth = simulated(500, d=3)
    model = NeuMissQuantileRegressor((0.1, 0.5, 0.9), **TINY).fit(X, y)
    model.to_onnx(tmp_path / "q.onnx")
    X_test = truth.sample(40, random_state=2)[0]
    missing = np.isnan(X_test)
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    y_onnx, quantiles = session.run(["y", "quantiles"], {
        "X": np.where(missing, 0, X_test).astype(np.float32), "M": missing.astype(np.float32)})
    np.testing.assert_allclose(quantiles, model.predict_quantiles(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_onnx, model.predict(X_test), rtol=1e-5, atol=1e-5)


def test_quantile_head_has_the_regressor_parameters_and_defaults():
    quantile = NeuMissQuantileRegressor().get_params()
    assert quantile.pop("quantiles") == (0.05, 0.5, 0.95)
    assert quantile == NeuMissRegressor().get_params()
