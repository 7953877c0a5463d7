"""Temperature scaling of the classifier and honest out-of-fold validation."""

import math

import numpy as np
import onnxruntime as ort
import pytest
import torch
from scipy.special import expit
from sklearn.metrics import log_loss

import neumiss
from neumiss import NeuMissClassifier
from neumiss.network import TEMPERATURE_BOUNDS, TrainingData, fit_temperature


class _Logits(torch.nn.Module):
    """A fixed 'network' returning given logits (n, 1), whatever its inputs."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.as_tensor(logits, dtype=torch.float32)[:, None]

    def forward(self, x, mask):
        return self.logits


def _bce(output, target):
    return torch.nn.functional.binary_cross_entropy_with_logits(output[:, 0], target,
                                                                reduction="none")


def _data(target, weight=None):
    n = len(target)
    return TrainingData(torch.zeros(n, 1), torch.zeros(n, 1),
                        torch.as_tensor(target, dtype=torch.float32),
                        None if weight is None else torch.as_tensor(weight, dtype=torch.float32))


@pytest.mark.parametrize("true_temperature", [0.5, 1.0, 3.0])
def test_the_fitted_temperature_minimises_the_log_loss_as_a_grid_search_does(true_temperature):
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=4000)
    target = (rng.random(4000) < expit(logits / true_temperature)).astype(float)
    fitted = fit_temperature(_Logits(logits), _data(target), _bce)
    grid = np.exp(np.linspace(np.log(0.2), np.log(20), 2001))
    scaled = logits[None, :] / grid[:, None]  # (2001, n): the mean log loss at each T
    losses = np.mean(np.logaddexp(0, scaled) - target * scaled, axis=1)
    assert fitted.temperature == pytest.approx(grid[int(np.argmin(losses))], rel=0.01)
    assert fitted.temperature == pytest.approx(true_temperature, rel=0.15)
    assert fitted.val_loss <= fitted.val_loss_before
    assert fitted.val_loss == pytest.approx(min(losses), abs=1e-4)


def test_case_weights_weigh_the_rows_of_the_temperature():
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=2.0, size=2000)
    target = (rng.random(2000) < expit(logits)).astype(float)
    flat = (rng.random(2000) < 0.5).astype(float)  # labels unrelated to the logits
    both = np.concatenate([target, flat])
    weight = np.concatenate([np.ones(2000), np.zeros(2000)])  # the unrelated rows weigh 0
    weighted = fit_temperature(_Logits(np.tile(logits, 2)), _data(both, weight), _bce)
    unweighted = fit_temperature(_Logits(np.tile(logits, 2)), _data(both), _bce)
    alone = fit_temperature(_Logits(logits), _data(target), _bce)
    assert weighted.temperature == pytest.approx(alone.temperature, rel=1e-3)
    assert unweighted.temperature > 1.5 * alone.temperature


def test_uninformative_logits_are_flattened_to_the_bound():
    rng = np.random.default_rng(2)
    logits = rng.normal(scale=5.0, size=1000)
    target = (rng.random(1000) < 0.5).astype(float)
    fitted = fit_temperature(_Logits(logits), _data(target), _bce)
    assert fitted.temperature == pytest.approx(TEMPERATURE_BOUNDS[1], rel=0.01)


def _binary_table(n, seed=0, missing=0.4, n_noise=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4 + n_noise))
    y = (rng.random(n) < expit(X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3])).astype(int)
    X[rng.random(X.shape) < missing] = np.nan
    return X, y


def test_calibration_divides_the_logits_and_keeps_classes_and_ranking(tmp_path):
    X, y = _binary_table(800, n_noise=6)
    params = dict(ensemble_size=1, validation_fraction=0.25, mlp_depth=2, depth=0,
                  max_epochs=15, random_state=0)
    plain = NeuMissClassifier(calibration="none", **params).fit(X, y)
    calibrated = NeuMissClassifier(**params).fit(X, y)
    assert not hasattr(plain, "temperature_")
    temperature = calibrated.temperature_
    assert temperature != 1.0 and calibrated.calibration_result_["temperature"] == temperature
    np.testing.assert_allclose(calibrated.decision_function(X),
                               plain.decision_function(X) / temperature, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(calibrated.predict(X), plain.predict(X))
    # the validation log loss it reports is that of the calibrated model on those rows
    result = calibrated.calibration_result_
    assert result["val_loss"] < result["val_loss_before"]
    assert result["val_loss_before"] == pytest.approx(-plain.validation_score_, rel=1e-5)
    # saved, loaded and exported, the probabilities are the calibrated ones
    calibrated.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    np.testing.assert_array_equal(loaded.predict_proba(X), calibrated.predict_proba(X))
    assert loaded.temperature_ == temperature
    calibrated.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    missing = np.isnan(X)
    feeds = {"X": np.where(missing, 0, X).astype(np.float32), "M": missing.astype(np.float32)}
    np.testing.assert_allclose(session.run(["probabilities"], feeds)[0],
                               calibrated.predict_proba(X), atol=1e-5)


def test_an_ensemble_out_of_fold_is_calibrated_on_each_rows_held_out_member():
    X, y = _binary_table(1300, seed=3, n_noise=8)
    X_train, y_train, X_test = X[:300], y[:300], X[300:]
    params = dict(depth=0, max_epochs=10, random_state=0)
    plain = NeuMissClassifier(calibration="none", **params).fit(X_train, y_train)
    calibrated = NeuMissClassifier(**params).fit(X_train, y_train)
    assert calibrated.validation_scheme_ == "out_of_fold"
    # the loss before calibration is the out-of-fold one the search validated on
    result = calibrated.calibration_result_
    assert result["val_loss_before"] == pytest.approx(-plain.validation_score_, rel=1e-5)
    assert result["val_loss"] <= result["val_loss_before"]
    # each member's logits divided by T: the ensemble's ranking is kept
    for member, fitted in zip(plain.network_.members, calibrated.network_.members):
        torch.testing.assert_close(fitted.head[-1].bias * calibrated.temperature_,
                                   member.head[-1].bias, rtol=1e-5, atol=1e-6)
    p_plain = plain.predict_proba(X_test)[:, 1]
    p_cal = calibrated.predict_proba(X_test)[:, 1]
    assert np.corrcoef(np.argsort(np.argsort(p_plain)), np.argsort(np.argsort(p_cal)))[0, 1] \
        > 0.999


def test_multiclass_logits_share_one_temperature():
    X, y = _binary_table(600, seed=4)
    labels = np.digitize(np.nan_to_num(X[:, 0]) + y, [0.0, 1.0])
    params = dict(ensemble_size=1, validation_fraction=0.3, depth=0, mlp_depth=0,
                  max_epochs=10, random_state=0)
    plain = NeuMissClassifier(calibration="none", **params).fit(X, labels)
    calibrated = NeuMissClassifier(**params).fit(X, labels)
    scaled = plain.decision_function(X) / calibrated.temperature_
    np.testing.assert_allclose(calibrated.decision_function(X), scaled, rtol=1e-4, atol=1e-5)


def test_without_validation_rows_nothing_is_calibrated():
    X, y = _binary_table(300, seed=5)
    model = NeuMissClassifier(validation_fraction=0, max_epochs=3, random_state=0).fit(X, y)
    assert model.temperature_ == 1.0 and model.calibration_result_ is None


def test_calibration_is_checked():
    X, y = _binary_table(100, seed=6)
    with pytest.raises(ValueError, match="calibration"):
        NeuMissClassifier(calibration="isotonic").fit(X, y)


def _observed_means(model, X):
    x, mask = model.preprocessor_.transform(model.encoder_.transform(X))
    return np.nanmean(np.where(mask == 0, x, np.nan), axis=0)


def test_out_of_fold_the_shared_block_trains_only_with_rows_enough_for_its_parameters():
    params = dict(depth=1, mlp_depth=0, max_epochs=20, random_state=0, calibration="none")
    # 10 columns: a block of depth 1 holds 2 d^2 + d = 210 parameters, under 10 rows each
    # on 400 rows
    X, y = _binary_table(400, seed=7, n_noise=6)
    oof = NeuMissClassifier(**params).fit(X, y)
    holdout = NeuMissClassifier(validation_fraction=0.2, **params).fit(X, y)
    assert oof.validation_scheme_ == "out_of_fold" and oof.n_epochs_ > 0
    # the block keeps its start from the moments: its means stay the observed ones
    for member in oof.network_.members:
        np.testing.assert_allclose(member.block.mu.detach().numpy(), _observed_means(oof, X),
                                   atol=1e-5)
    # held out, the block trains: its means move from the observed ones
    moved = holdout.network_.members[0].block.mu.detach().numpy()
    assert not np.allclose(moved, _observed_means(oof, X), atol=1e-3)
    # out of fold, the validation loss is an honest estimate: within noise of a test loss
    X_test, y_test = _binary_table(2000, seed=8, n_noise=6)
    test_loss = log_loss(y_test, oof.predict_proba(X_test)[:, 1])
    assert abs(-oof.validation_score_ - test_loss) < 0.05 + 3 * math.sqrt(0.25 / 400)
    # 4 columns: 36 parameters, 11 rows each: out of fold too, the block trains
    X, y = _binary_table(400, seed=7)
    few = NeuMissClassifier(**params).fit(X, y)
    assert few.validation_scheme_ == "out_of_fold"
    assert not np.allclose(few.network_.members[0].block.mu.detach().numpy(),
                           _observed_means(few, X), atol=1e-3)


def test_a_block_of_depth_0_keeps_its_start_held_out_or_out_of_fold():
    """Depth 0's block, the order-0 estimate from the moments, is never trained: its means
    stay the observed ones of the training rows, validated out of fold or on other rows."""
    X, y = _binary_table(400, seed=7)
    held_out = _binary_table(200, seed=9)
    for validation_data in (None, held_out):
        model = NeuMissClassifier(depth=0, mlp_depth=0, max_epochs=20, random_state=0,
                                  calibration="none").fit(X, y, validation_data=validation_data)
        assert model.n_epochs_ > 0
        for member in model.network_.members:
            np.testing.assert_allclose(member.block.mu.detach().numpy(),
                                       _observed_means(model, X), atol=1e-5)
