"""Hard to break (issue 13): every class of bad or extreme input gets a correct result or a
clear error, never a silent wrong result nor a traceback.

Classes: training divergence; scale (features and target at any power of ten, tiny
deviations, values far outside the training range); row and column order; input and
parameter types; model files (damaged, crafted, numpy-scalar parameters); the command
line and the scorer; R's console; the README's commands.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.model_selection import GridSearchCV

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss import cli as neumiss_cli
from neumiss.benchmark._grid import grid
from neumiss.estimators import FORMAT_VERSION, payload_digest
from neumiss.network import (
    DivergenceWarning,
    NeuMissNetwork,
    TrainingConfig,
    TrainingData,
    constant_output,
    train,
)
from neumiss.tables import mean_scale, observed_mean_scale

from .conftest import interrupt_after_first_row, paper

ROOT = Path(__file__).resolve().parent.parent
FAST = {"depth": 1, "max_epochs": 4, "random_state": 0}
PROPERTY = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def linear_data(n=200, d=3, seed=0, missing=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1) + np.arange(d)
    y = X @ np.linspace(1.0, -1.0, d) + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < missing] = np.nan
    return X, y


def one_line_error(text: str) -> str:
    """The text of a one-line error message; fails on tracebacks and several lines."""
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


# ------------------------------------------------------------------ divergence


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
    assert "non-finite" in result.backoffs[0]["cause"] or "exploding" in result.backoffs[0]["cause"]
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)
    assert torch.isfinite(output).all()
    assert result.best_val_loss <= result.constant_loss


def test_validation_loss_above_the_constant_for_epochs_backs_off_then_falls_back():
    # The validation targets are minus the training ones: the better the fit, the worse
    # on validation, so the constant predictor must win.
    with pytest.warns(DivergenceWarning, match="above the constant predictor"):
        network, result, val_data = _train(y_val_sign=-1.0, max_epochs=30)
    assert result.constant and result.best_epoch == 0
    with torch.no_grad():
        output = network(val_data.x, val_data.mask)[:, 0]
    assert torch.allclose(output, output[0].expand_as(output))  # a constant
    assert result.best_val_loss == pytest.approx(result.constant_loss, rel=1e-5)


def test_weights_worse_than_the_constant_on_the_training_rows_are_not_kept():
    # Validation targets are the initial network's own outputs (a perfect validation
    # score), training targets are noise: the kept epoch beats the constant on
    # validation only, so the constant predictor replaces it.
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


# ------------------------------------------------------------------ scale


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


def test_onnx_export_refuses_scales_float32_cannot_carry(tmp_path):
    X, y = linear_data(150, 3)
    X[:, 1] *= 1e100
    model = paper(NeuMissRegressor, **FAST).fit(X, y)
    with pytest.raises(ValueError, match=r"float32.*\['1'\]"):
        model.to_onnx(tmp_path / "m.onnx")


# ------------------------------------------------------------------ order


@pytest.fixture(scope="module")
def fitted():
    X, y = linear_data(300, 3)
    regressor = paper(NeuMissRegressor, **FAST).fit(X, y)
    classifier = paper(NeuMissClassifier, **FAST).fit(X, y > np.median(y))
    return regressor, classifier


@PROPERTY
@given(order=st.permutations(list(range(12))))
def test_predictions_follow_the_rows_in_any_order(fitted, order):
    X, _ = linear_data(12, 3, seed=4)
    regressor, classifier = fitted
    np.testing.assert_allclose(regressor.predict(X[order]), regressor.predict(X)[order],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(classifier.predict_proba(X[order]),
                               classifier.predict_proba(X)[order], rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def frame_model():
    X, y = linear_data(300, 4)
    frame = pd.DataFrame(X, columns=["w", "x", "y", "z"])
    return frame, paper(NeuMissRegressor, **FAST).fit(frame, y)


@PROPERTY
@given(columns=st.permutations(["w", "x", "y", "z"]))
def test_a_dataframe_with_reordered_columns_is_refused_then_reordered_by_name(
    frame_model, columns
):
    # Decision: as scikit-learn does, columns in another order are refused (a silent
    # positional mix-up is the danger); selecting them by name gives the same predictions.
    frame, model = frame_model
    shuffled = frame[columns]
    if columns == ["w", "x", "y", "z"]:
        np.testing.assert_array_equal(model.predict(shuffled), model.predict(frame))
        return
    with pytest.raises(ValueError, match="same order"):
        model.predict(shuffled)
    np.testing.assert_array_equal(
        model.predict(shuffled[list(model.feature_names_in_)]), model.predict(frame)
    )


# ------------------------------------------------------------------ types


@pytest.mark.parametrize(
    "column, kind",
    [(pd.date_range("2020-01-01", periods=60), "dates"),
     (pd.to_timedelta(np.arange(60), "D"), "durations|time"),
     (np.arange(60) * (1 + 1j), "complex")],
)
def test_date_duration_and_complex_columns_are_refused_by_name(column, kind):
    X, y = linear_data(60, 2)
    frame = pd.DataFrame(X, columns=["a", "b"])
    frame["odd"] = column
    with pytest.raises(ValueError, match=rf"'odd'.*({kind})"):
        paper(NeuMissRegressor, **FAST).fit(frame, y)


@pytest.mark.parametrize("param, value", [("residual", "no"), ("residual", 1),
                                          ("verbose", "yes"), ("compress_tails", "True")])
def test_boolean_parameters_take_only_booleans(param, value):
    X, y = linear_data(60, 2)
    with pytest.raises(ValueError, match=param):
        paper(NeuMissRegressor, **FAST, **{param: value}).fit(X, y)


def test_numpy_scalars_are_accepted_everywhere():
    X, y = linear_data(80, 2)
    model = paper(NeuMissRegressor, depth=np.int64(1), learning_rate=np.float32(0.01),
                  residual=np.bool_(True), max_epochs=np.int32(2), random_state=np.int64(0))
    assert np.isfinite(model.fit(X, y).predict(X)).all()


def test_mixed_class_labels_and_duplicate_columns_are_clear_errors():
    X, y = linear_data(60, 2)
    with pytest.raises(ValueError, match="mixes class labels.*number 1.*text 'a'"):
        paper(NeuMissClassifier, **FAST).fit(X, np.array([1, "a"] * 30, dtype=object))
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        paper(NeuMissRegressor, **FAST).fit(pd.DataFrame(X, columns=["a", "a"]), y)


# ------------------------------------------------------------------ model files


@pytest.fixture(scope="module")
def saved(tmp_path_factory, fitted):
    path = tmp_path_factory.mktemp("files") / "model.pt"
    fitted[0].save(path)
    return path, torch.load(path, weights_only=True)


def _write(payload, path, rehash=True):
    if rehash:
        payload["sha256"] = payload_digest(payload)
    torch.save(payload, path)
    return path


def _copy(payload):
    return {k: dict(v) if isinstance(v, dict) else v for k, v in payload.items()}


DAMAGES = {
    "unknown parameter": (lambda p: p["params"].update(colour="red"),
                          r"unknown parameters \['colour'\]"),
    "missing parameter": (lambda p: p["params"].pop("ensemble_size"),
                          r"lacks the parameters \['ensemble_size'\]"),
    "invalid parameter": (lambda p: p["params"].update(residual="no"), "residual must be"),
    "missing attributes": (lambda p: [p["attributes"].pop(k) for k in ("y_mean_", "encoder_")],
                           r"lacks the fitted attributes \['encoder_', 'y_mean_'\]"),
    "foreign attribute": (lambda p: p["attributes"].update(predict="x"),
                          "attributes that save.. never writes"),
    "wrong tensor shape": (lambda p: p["state_dict"].update({"block.W_mix": torch.zeros(2, 2)}),
                           r"wrong shape: block.W_mix \(2, 2\) instead of \(3, 3\)"),
    "missing tensor": (lambda p: p["state_dict"].pop("block.mu"), r"missing \['block.mu'\]"),
    "non-finite weights": (lambda p: p["state_dict"].update(
        {"block.mu": torch.full((3,), float("nan"))}), "non-finite weights"),
    "format_version as a string": (lambda p: p.update(format_version="2"),
                                   "format_version '2', not an integer"),
    "no class key": (lambda p: p.pop("class"), "no estimator class"),
    "unknown class": (lambda p: p.update({"class": "Pipeline"}), "unknown estimator class"),
    "scaling of the wrong length": (
        lambda p: p["attributes"]["preprocessor_"]["__standardizer__"].update(
            scale={"__ndarray__": [1.0], "dtype": "<f8"}), "preprocessor_.scale_"),
    "attributes not a table": (lambda p: p.update(attributes=[1, 2]), "no 'attributes' table"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_every_malformed_model_file_is_a_value_error_naming_file_and_problem(
    saved, tmp_path, damage
):
    path, good = saved
    change, message = DAMAGES[damage]
    payload = _copy(good)
    payload["attributes"] = {k: (dict(v) if isinstance(v, dict) else v)
                             for k, v in payload["attributes"].items()}
    if "preprocessor_" in payload["attributes"]:
        inner = dict(payload["attributes"]["preprocessor_"]["__standardizer__"])
        payload["attributes"]["preprocessor_"] = {"__standardizer__": inner}
    change(payload)
    for rehash in (True, False):  # a crafted file (digest recomputed), and a modified one
        bad = _write(dict(payload), tmp_path / f"bad-{rehash}.pt", rehash=rehash)
        with pytest.raises(ValueError) as error:
            neumiss.load(bad)
        text = str(error.value)
        assert str(bad) in text
        if rehash or "format_version" in damage:
            assert re.search(message, text), text
        else:
            assert re.search("integrity check|no estimator class", text), text


def test_older_and_newer_formats_are_refused_with_what_to_do(saved, tmp_path):
    _, good = saved
    for version, advice in ((FORMAT_VERSION - 1, "refit and save"), (FORMAT_VERSION + 1,
                                                                        "upgrade neumiss")):
        bad = _write({**_copy(good), "format_version": version}, tmp_path / "v.pt")
        with pytest.raises(ValueError, match=advice):
            neumiss.load(bad)


def test_flipped_bytes_inside_a_tensor_fail_the_integrity_check(saved, tmp_path):
    path, good = saved
    raw = bytearray(path.read_bytes())
    start = bytes(raw).find(good["state_dict"]["block.W_mix"].numpy().tobytes())
    assert start > 0
    raw[start + 6] ^= 0x40
    (tmp_path / "flipped.pt").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="flipped.pt: damaged model file: it failed its "
                                         "integrity check"):
        neumiss.load(tmp_path / "flipped.pt")


@PROPERTY
@given(position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused_or_changes_nothing(fitted, saved, tmp_path_factory,
                                                       position, bit):
    path, _ = saved
    raw = bytearray(path.read_bytes())
    raw[int(position * len(raw))] ^= 1 << bit
    damaged = tmp_path_factory.mktemp("flip") / "m.pt"
    damaged.write_bytes(bytes(raw))
    X, _ = linear_data(20, 3, seed=7)
    try:
        loaded = neumiss.load(damaged)
    except ValueError as error:
        assert str(damaged) in str(error)
    else:  # a byte torch never reads (zip padding, a record's comment): same model
        np.testing.assert_array_equal(loaded.predict(X), fitted[0].predict(X))


def test_truncated_and_foreign_files_are_refused(saved, tmp_path):
    path, _ = saved
    (tmp_path / "cut.pt").write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="not a neumiss model file"):
        neumiss.load(tmp_path / "cut.pt")
    with pytest.raises(FileNotFoundError):
        neumiss.load(tmp_path / "absent.pt")


def test_grid_search_best_estimator_with_numpy_scalars_round_trips(tmp_path):
    X, y = linear_data(150, 3)
    search = GridSearchCV(
        paper(NeuMissRegressor, **FAST),
        {"learning_rate": np.logspace(-3, -2, 2), "depth": np.array([0, 1])}, cv=2,
    ).fit(X, y)
    best = search.best_estimator_
    assert isinstance(best.learning_rate, np.floating)
    best.save(tmp_path / "best.pt")
    loaded = neumiss.load(tmp_path / "best.pt")
    assert type(loaded.learning_rate) is float and type(loaded.depth) is int
    assert loaded.get_params() == best.get_params()
    np.testing.assert_array_equal(loaded.predict(X), best.predict(X))


# ------------------------------------------------------------------ command line


def test_cli_description_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        neumiss_cli.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "The neumiss command line" in out and "--debug" in out


def test_benchmark_out_under_a_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert neumiss_cli.main(["benchmark", "--quick", "--out", str(tmp_path / "file" / "sub")]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "is under" in line and "a file, not a folder" in line


def test_benchmark_needs_two_test_rows(capsys):
    with pytest.raises(SystemExit) as exit_info:
        neumiss_cli.main(["benchmark", "--n-test", "1"])
    assert exit_info.value.code == 2
    assert "at least 2 test rows" in one_line_error(capsys.readouterr().err)
    with pytest.raises(ValueError, match=r"n_test must be integers >= 2 \(a test R² needs"):
        grid(n_test=1)


def test_any_command_failure_is_one_line_unless_debug(monkeypatch, capsys):
    import neumiss.commands._export as export_command

    def broken(args):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(export_command, "run", broken)
    assert neumiss_cli.main(["export", "a.pt", "b.onnx"]) == 1
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("neumiss export: error: something broke (RuntimeError")
    with pytest.raises(RuntimeError):
        neumiss_cli.main(["--debug", "export", "a.pt", "b.onnx"])
    with pytest.raises(RuntimeError):
        neumiss_cli.main(["export", "a.pt", "b.onnx", "--debug"])


def test_export_of_a_damaged_file_is_one_line(saved, tmp_path, capsys):
    path, _ = saved
    (tmp_path / "cut.pt").write_bytes(path.read_bytes()[:100])
    assert neumiss_cli.main(["export", str(tmp_path / "cut.pt"), str(tmp_path / "m.onnx")]) == 1
    assert "not a neumiss model file" in one_line_error(capsys.readouterr().err)


@pytest.fixture(scope="module")
def score():
    spec = importlib.util.spec_from_file_location("score", ROOT / "export" / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCORER_INPUTS = {
    "short header": (b"age,income,score\n1,2,3\n", r"missing \['tenure'\]"),
    "not UTF-8": (b"\xff\xfe1,2,3,4\n", "not UTF-8"),
    "NUL byte": (b"age,income,score,tenure\n1,2\x00,3,4\n", "line 2, column 2"),
    "empty": (b"", "no data rows"),
}


@pytest.mark.parametrize("case", list(SCORER_INPUTS))
def test_scorer_failures_are_one_line(score, tmp_path, capsys, case):
    content, message = SCORER_INPUTS[case]
    (tmp_path / "in.csv").write_bytes(content)
    model = ROOT / "export" / "fixtures" / "regressor" / "model.onnx"
    assert score.main([str(model), str(tmp_path / "in.csv")]) == 1
    assert re.search(message, one_line_error(capsys.readouterr().err))


def test_scorer_unreadable_model_and_output_are_one_line(score, tmp_path, capsys):
    inputs = ROOT / "export" / "fixtures" / "regressor" / "inputs.csv"
    (tmp_path / "m.onnx").write_bytes(b"garbage")
    assert score.main([str(tmp_path / "m.onnx"), str(inputs)]) == 1
    assert "not a readable ONNX model" in one_line_error(capsys.readouterr().err)
    model = ROOT / "export" / "fixtures" / "regressor" / "model.onnx"
    assert score.main([str(model), str(inputs), "-o", str(tmp_path / "no" / "p.csv")]) == 1
    one_line_error(capsys.readouterr().err)


@pytest.mark.slow
def test_sigterm_during_a_benchmark_is_clean_and_the_run_resumes(tmp_path):
    command = [
        sys.executable, "-m", "neumiss.cli", "benchmark", "--mechanisms", "MCAR",
        "--n-features", "5", "--n-train", "40000", "--n-val", "500", "--n-test", "500",
        "--repeats", "3", "--methods", "impute_mask_lr", "neumiss", "--neumiss-depths", "0",
        "1", "--out", str(tmp_path), "--no-progress",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT)
    runs = tmp_path / "runs.csv"
    interrupt_after_first_row(process, runs, "benchmark")
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert one_line_error(err).startswith("terminated: finished runs are in")
    finished = len(runs.read_text().splitlines()) - 1
    assert finished >= 1
    again = subprocess.run([*command[:command.index("--repeats") + 1], "1",
                            *command[command.index("--repeats") + 2:]],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0 and "Traceback" not in again.stderr
    assert "already in" in again.stdout


@pytest.mark.slow
def test_r_console_stays_quiet():
    pytest.importorskip("rpy2")
    # Loading norm, and with it installed, two EM fits through it (em_norm): R's
    # messages (library paths, norm's iteration counter) must not reach the console.
    code = (
        "import numpy as np\n"
        "from neumiss import rbridge\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(60, 3))\n"
        "X[rng.random(X.shape) < 0.2] = np.nan\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        rbridge.load_norm()\n"
        "    except ImportError:\n"
        "        continue\n"
        "    rbridge.em_norm(X)\n"
        "    print('em_norm ran')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if "could not start R" in result.stderr:
        pytest.skip("R does not start here")
    assert result.returncode == 0, result.stderr
    output = result.stdout.replace("em_norm ran\n", "") + result.stderr
    assert "R[write to console]" not in output
    assert "contains no packages" not in output
    assert output.strip() == ""


# ------------------------------------------------------------------ README


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_commands_run_from_the_virtual_environment():
    for line in _readme_commands():
        first = line.split()[0]
        assert first not in ("neumiss", "python", "pytest"), (
            f"README command without .venv/bin/: {line}")


def test_readme_snippet_writes_no_model_file_in_the_checkout():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"## Python in ten lines\n\n```python\n(.*?)```", text, flags=re.S)[1]
    assert 'save("' not in snippet and 'to_onnx("' not in snippet
    assert "tempfile" in snippet
