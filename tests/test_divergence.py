"""A training that diverges or cannot beat a constant says so and never ends worse than
the constant predictor (the training loop's guard, and the estimators through it)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from neumiss import NeuMissRegressor
from neumiss.network import (
    DivergenceWarning,
    NeuMissNetwork,
    TrainingConfig,
    TrainingData,
    _divergence,
    constant_output,
    train,
)

from .conftest import linear_data, paper


def _tensors(X, y):
    missing = np.isnan(X)
    return TrainingData(
        torch.from_numpy(np.where(missing, 0.0, X).astype(np.float32)),
        torch.from_numpy(missing.astype(np.float32)),
        torch.as_tensor(y, dtype=torch.float32),
    )


def _mse(output, target):
    return (output[:, 0] - target) ** 2


def _train(y_val_sign=1.0, **config):
    X, y = linear_data(300, 3)
    y = (y - y.mean()) / y.std()
    network = NeuMissNetwork(3, depth=2)
    generator = torch.Generator().manual_seed(0)
    network.reset_parameters(generator)
    train_data, val_data = _tensors(X[:240], y[:240]), _tensors(X[240:], y_val_sign * y[240:])
    result = train(network, train_data, val_data, _mse, TrainingConfig(**config), generator)
    return network, result, val_data


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_a_huge_learning_rate_backs_off_and_never_ends_worse_than_a_constant(optimizer):
    with pytest.warns(DivergenceWarning, match="diverged .* learning rate lowered from 1000"):
        network, result, val_data = _train(optimizer=optimizer, learning_rate=1e3,
                                           max_epochs=30)
    assert result.backoffs and result.backoffs[-1]["lr"] < 1e3
    assert not result.backoffs[0]["overfitting"]
    assert "non-finite" in result.backoffs[0]["cause"] or "exploding" in result.backoffs[0]["cause"]
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)
    assert torch.isfinite(output).all()
    assert result.best_val_loss <= result.constant_loss


def test_validation_loss_above_the_constant_for_epochs_backs_off_then_falls_back():
    # The validation targets are minus the training ones: the better the fit, the worse
    # on validation, so the constant predictor must win.
    with pytest.warns(DivergenceWarning, match="training overfitted .* above the constant "
                      "predictor's .* while the training loss was below") as caught:
        network, result, val_data = _train(y_val_sign=-1.0, max_epochs=30)
    assert "diverged" not in str(caught[0].message)
    assert "features that carry information on the target" in str(caught[0].message)
    assert result.backoffs and all(b["overfitting"] for b in result.backoffs)
    assert result.constant and result.best_epoch == 0
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)[:, 0]
    assert torch.allclose(output, output[0].expand_as(output))  # a constant
    assert result.best_val_loss == pytest.approx(result.constant_loss, rel=1e-5)


@pytest.mark.parametrize("reject_rows", [20_000, 100])
def test_weights_worse_than_the_constant_on_the_training_rows_are_not_kept(monkeypatch,
                                                                            reject_rows):
    # Validation targets are the initial network's own outputs (a perfect validation
    # score), training targets are noise: the kept epoch beats the constant on
    # validation only, so the constant predictor replaces it; also when the training
    # losses are compared on 100 of the 240 rows only.
    monkeypatch.setattr(_divergence, "REJECT_ROWS", reject_rows)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    network = NeuMissNetwork(3, depth=1)
    generator = torch.Generator().manual_seed(0)
    network.reset_parameters(generator)
    val_data = _tensors(X[240:], np.zeros(60))
    with torch.no_grad():
        own = network(val_data.x, val_data.mask)[:, 0]
    val_data = TrainingData(val_data.x, val_data.mask, own)
    train_data = _tensors(X[:240], rng.normal(size=240))
    config = TrainingConfig(learning_rate=1e-6, max_epochs=1)
    with pytest.warns(DivergenceWarning, match="fit the training rows worse than the constant"):
        result = train(network, train_data, val_data, _mse, config, generator)
    assert result.constant and result.rejected is not None and result.best_epoch == 0
    rows = np.linspace(0, 239, min(reject_rows, 240)).astype(int)  # the rows compared
    constant = float(np.mean((train_data.target.numpy()[rows]
                              - train_data.target.numpy().mean()) ** 2))
    assert f"against {constant:.4g}" in result.rejected


def test_a_normal_training_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        _, result, _ = _train(max_epochs=20)
    assert not result.backoffs and not result.constant and result.warning is None
    assert result.best_val_loss < 0.5 * result.constant_loss


def test_constant_output_is_the_mean_the_log_odds_or_the_log_frequencies():
    X, y = linear_data(200, 2)
    network = NeuMissNetwork(2, depth=1)
    value = constant_output(network, _tensors(X, y), _mse)
    assert float(value[0]) == pytest.approx(y.mean(), abs=1e-4)
    labels = (y > np.quantile(y, 0.7)).astype(np.float32)
    data = _tensors(X, labels)

    def bce(output, target):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            output[:, 0], target, reduction="none")

    p = labels.mean()
    assert float(constant_output(network, data, bce)[0]) == pytest.approx(
        np.log(p / (1 - p)), abs=1e-3)
    classes = np.digitize(y, np.quantile(y, [0.2, 0.5]))
    data = TrainingData(data.x, data.mask, torch.as_tensor(classes))

    def cross_entropy(output, target):
        return torch.nn.functional.cross_entropy(output, target, reduction="none")

    three = NeuMissNetwork(2, n_outputs=3, depth=1)
    probabilities = torch.softmax(constant_output(three, data, cross_entropy), dim=0).numpy()
    np.testing.assert_allclose(probabilities, np.bincount(classes) / len(classes), atol=1e-3)


def test_estimator_with_learning_rate_100_warns_and_predicts_sensibly():
    X, y = linear_data(400, 4)
    with pytest.warns(DivergenceWarning):
        model = paper(NeuMissRegressor, learning_rate=100.0, max_epochs=15,
                      random_state=0).fit(X[:300], y[:300])
    prediction = model.predict(X[300:])
    assert np.isfinite(prediction).all()
    # Never far below the training mean (R² 0 up to the test sample's noise).
    assert model.score(X[300:], y[300:]) > -0.05


def test_estimator_that_cannot_beat_the_training_mean_predicts_it_and_says_so():
    # Validation targets of the opposite sign: whatever the network learns from y is
    # worse on validation than the training mean, which it must then predict.
    X, y = linear_data(200, 3)
    y = y - y.mean() + 5.0
    with pytest.warns(DivergenceWarning, match="no epoch beat the constant predictor"):
        model = paper(NeuMissRegressor, max_epochs=8, random_state=0).fit(
            X, y, validation_data=(X, 10.0 - y))
    prediction = model.predict(X)
    assert np.ptp(prediction) < 1e-6 * np.std(y)
    assert prediction[0] == pytest.approx(5.0, abs=1e-4)


def test_overfitting_that_an_epoch_survives_does_not_warn():
    # The validation rows hold the training rows' relation plus noise: training fits the
    # training rows ever better and, late, the validation rows worse than the constant
    # (the back-offs are overfitting), yet early epochs beat the constant: early stopping
    # kept one, which is its ordinary work, not a divergence to warn about.
    X, y = linear_data(300, 3)
    y = (y - y.mean()) / y.std()
    rng = np.random.default_rng(0)
    network = NeuMissNetwork(3, depth=2)
    generator = torch.Generator().manual_seed(0)
    network.reset_parameters(generator)
    train_data = _tensors(X[:40], y[:40] + rng.normal(scale=2.0, size=40))
    val_data = _tensors(X[240:], y[240:])
    config = TrainingConfig(learning_rate=0.05, max_epochs=200, patience=200, lr_patience=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        result = train(network, train_data, val_data, _mse, config, generator)
    assert result.backoffs and all(b["overfitting"] for b in result.backoffs)
    assert not result.constant and result.warning is None
    assert result.best_val_loss < result.constant_loss
