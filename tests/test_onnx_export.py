"""ONNX export: parity with the torch estimators, graph structure, metadata, CLI."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.cli import main as cli_main
from neumiss.export import DEFAULT_OPSET, MIN_OPSET, PRODUCER, export_onnx

from .conftest import FAST, linear_data, paper

D = 4
FIT = dict(max_epochs=3, batch_size=200, random_state=0)

REGRESSOR_CONFIGS = {
    "depth0": dict(depth=0),
    "depth1": dict(depth=1),
    "depth2": dict(depth=2),
    "depth3-shared": dict(depth=3, weight_sharing="shared"),
    "depth3-residual": dict(depth=3, residual=True),
    "depth3-weights-auto": dict(depth=[3], weight_sharing="auto", residual=True),
    "depth4-shared-residual-mlp": dict(
        depth=4, weight_sharing="shared", residual=True, mlp_depth=2, mlp_width=6
    ),
    "depth2-mask-skip": dict(depth=2, residual=True, mask_skip=True),
    "depth1-mask-skip-mlp": dict(depth=1, mlp_depth=1, mask_skip=True),
}
CLASSIFIER_CONFIGS = {
    "binary-int-mlp": (dict(depth=2, mlp_depth=1), np.array([3, 7])),
    "binary-bool": (dict(depth=1), np.array([False, True])),
    "multiclass-str": (  # 3 epochs of 3 steps would not beat the class frequencies yet
        dict(depth=3, weight_sharing="shared", residual=True, max_epochs=8),
        np.array(["a", "b", "c"]),
    ),
    "multiclass-float-mlp": (dict(depth=0, mlp_depth=1), np.array([0.0, 1.0, 2.0, 4.0])),
    "multiclass-mask-skip": (dict(depth=1, mask_skip=True), np.array(["u", "v", "w"])),
}


def _features(rng, n):
    """Correlated features with offsets and scales, so the standardization matters."""
    z = rng.normal(size=(n, D))
    z[:, 1:] += z[:, :1]
    return z * np.array([3.0, 0.5, 10.0, 1.0]) + np.array([10.0, -2.0, 50.0, 0.0])


def _with_missing(rng, X):
    """NaN at random (30%), plus whole rows missing and rows complete."""
    X = X.copy()
    X[rng.random(X.shape) < 0.3] = np.nan
    X[::7] = np.nan
    X[1::11] = _features(rng, len(X[1::11]))
    return X


@pytest.fixture(scope="module")
def train():
    rng = np.random.default_rng(0)
    X = _features(rng, 600)
    y = X @ np.array([1.0, -2.0, 0.1, 0.5]) + 0.3 * rng.normal(size=600)
    return _with_missing(rng, X), y


@pytest.fixture(scope="module")
def regressors(train):
    X, y = train
    return {
        name: paper(NeuMissRegressor, **c, **FIT).fit(X, y)
        for name, c in REGRESSOR_CONFIGS.items()
    }


@pytest.fixture(scope="module")
def classifiers(train):
    X, y = train
    fitted = {}
    for name, (cfg, classes) in CLASSIFIER_CONFIGS.items():
        edges = np.quantile(y, np.linspace(0, 1, len(classes) + 1)[1:-1])
        fitted[name] = paper(NeuMissClassifier, **{**FIT, **cfg}).fit(
            X, classes[np.digitize(y, edges)]
        )
    return fitted


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(model, X):
    """ONNX Runtime outputs for ``X`` with NaN: inputs built as the contract says."""
    missing = np.isnan(X)
    feeds = {
        "X": np.where(missing, 0.0, X).astype(np.float32),
        "M": missing.astype(np.float32),
    }
    session = _session(model)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))


def _scoring_sets(n_rows):
    rng = np.random.default_rng(n_rows)
    if n_rows == 1:
        mixed = _features(rng, 1)
        mixed[0, [0, 2]] = np.nan
        return [np.full((1, D), np.nan), _features(rng, 1), mixed]
    X = _with_missing(rng, _features(rng, n_rows))
    assert np.isnan(X).all(axis=1).any() and (~np.isnan(X)).all(axis=1).any()
    return [X]


@pytest.mark.parametrize("n_rows", [1, 100_000])
@pytest.mark.parametrize("name", REGRESSOR_CONFIGS)
def test_regressor_matches_predict(regressors, name, n_rows):
    estimator = regressors[name]
    model = export_onnx(estimator)
    for X in _scoring_sets(n_rows):
        y = _run(model, X)["y"]
        assert y.shape == (len(X),) and y.dtype == np.float64
        np.testing.assert_allclose(y, estimator.predict(X), rtol=0, atol=1e-5 * estimator.y_scale_)


def test_regressor_keeps_precision_for_a_large_target_offset(train):
    """y_mean / y_scale ~ 1e7: a float32 output could not hold 1e-5 * y_scale."""
    X, y = train
    estimator = paper(NeuMissRegressor, depth=1, **FIT).fit(X, y + 3e7)
    X_test = _scoring_sets(500)[0]
    expected = estimator.predict(X_test)
    assert np.spacing(np.float32(expected.max())) > 1e-5 * estimator.y_scale_
    y_onnx = _run(export_onnx(estimator), X_test)["y"]
    np.testing.assert_allclose(y_onnx, expected, rtol=0, atol=1e-5 * estimator.y_scale_)


@pytest.mark.parametrize("n_rows", [1, 100_000])
@pytest.mark.parametrize("name", CLASSIFIER_CONFIGS)
def test_classifier_matches_predict_proba(classifiers, name, n_rows):
    estimator = classifiers[name]
    model = export_onnx(estimator)
    for X in _scoring_sets(n_rows):
        out = _run(model, X)
        proba = estimator.predict_proba(X)
        assert out["probabilities"].shape == proba.shape
        np.testing.assert_allclose(out["probabilities"], proba, rtol=0, atol=1e-5)
        # Labels must agree except where float32 rounding could flip a near tie.
        logits = estimator.decision_function(X)
        if logits.ndim == 1:
            margin = np.abs(logits)
        else:
            top2 = np.sort(logits, axis=1)[:, -2:]
            margin = top2[:, 1] - top2[:, 0]
        clear = margin > 1e-4
        assert clear.mean() > 0.99
        np.testing.assert_array_equal(out["label"][clear], estimator.predict(X)[clear])
        assert out["label"].dtype.kind == estimator.classes_.dtype.kind or (
            out["label"].dtype == object and estimator.classes_.dtype.kind == "U"
        )


def _consumers(model, tensor):
    return [n for n in model.graph.node if tensor in n.input]


@pytest.mark.parametrize("name", REGRESSOR_CONFIGS)
def test_graph_uses_plain_mask_products(regressors, name):
    estimator = regressors[name]
    model = export_onnx(estimator)
    ops = {n.op_type for n in model.graph.node}
    allowed = {"Sub", "Div", "Mul", "Add", "Max", "Min", "MatMul", "Gemm", "Relu", "Squeeze",
               "Cast"}  # Max, Min: the clipping to the training range
    assert ops <= allowed, ops - allowed
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
    # M feeds Mul nodes (every ⊙M), the one Sub computing 1 - M, whose consumers are all
    # Mul, and with mask_skip one MatMul: the mask's own linear term in the head.
    m_users = _consumers(model, "M")
    subs = [n for n in m_users if n.op_type == "Sub"]
    mask_skip = int(estimator.mask_skip_)
    assert len(subs) == 1 and {n.op_type for n in m_users} == {"Sub", "Mul"} | (
        {"MatMul"} if mask_skip else set())
    assert sum(n.op_type == "MatMul" for n in m_users) == mask_skip
    obs_users = _consumers(model, subs[0].output[0])
    assert {n.op_type for n in obs_users} == {"Mul"}
    # One masking of the standardized input, of c, and one per matrix before W_mix.
    depth = estimator.best_depth_
    assert len(obs_users) == 2 + depth
    # The block's matrices, and the linear skip around an MLP head.
    skip = int(estimator.mlp_depth > 0)
    assert sum(n.op_type == "MatMul" for n in model.graph.node) == depth + 1 + skip + mask_skip
    assert sum(n.op_type == "Gemm" for n in model.graph.node) == estimator.mlp_depth + 1
    # Shared weights are stored once: S0, one iteration matrix, W_mix.
    block = [t for t in model.graph.initializer if t.name.startswith("block.")]
    matrices = [t for t in block if len(t.dims) == 2]
    expected = depth + 1 if estimator.weight_sharing == "independent" else min(depth, 2) + 1
    assert len(matrices) == expected


def test_classifier_graph_ops(classifiers):
    for estimator in classifiers.values():
        ops = {n.op_type for n in export_onnx(estimator).graph.node}
        assert not ops & {"IsNaN", "Where", "If", "Loop"}
        assert "Gather" in ops


def test_metadata_and_checker(tmp_path, train):
    X, y = train
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    labels = np.where(y > np.median(y), "yes", "no")
    estimator = paper(NeuMissClassifier, depth="auto", mlp_depth=1, max_epochs=1,
                      random_state=0)
    estimator.fit(frame, labels)
    path = tmp_path / "model.onnx"
    returned = export_onnx(estimator, path)
    model = onnx.load(path)
    assert model.SerializeToString() == returned.SerializeToString()
    onnx.checker.check_model(model, full_check=True)
    assert model.producer_name == PRODUCER
    assert model.opset_import[0].version == DEFAULT_OPSET
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["feature_names"]) == ["a", "b", "c", "d"]
    assert json.loads(meta["classes"]) == ["no", "yes"]
    assert int(meta["depth"]) == estimator.best_depth_
    assert meta["task"] == "classification" and meta["weight_sharing"] == "independent"
    assert json.loads(meta["residual"]) is False and int(meta["mlp_depth"]) == 1
    assert "M" in meta["input_contract"] and meta["neumiss_version"]
    assert [i.name for i in model.graph.input] == ["X", "M"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and dims[1].dim_value == 4
    # A DataFrame in and ONNX out agree too.
    out = _run(model, X)
    np.testing.assert_allclose(out["probabilities"], estimator.predict_proba(frame), atol=1e-5)


@pytest.mark.parametrize("opset", [MIN_OPSET, onnx.defs.onnx_opset_version()])
def test_other_opsets_give_the_same_outputs(regressors, opset):
    estimator = regressors["depth3-residual"]
    X = _scoring_sets(200)[0]
    model = export_onnx(estimator, opset=opset)
    assert model.opset_import[0].version == opset
    np.testing.assert_allclose(
        _run(model, X)["y"], estimator.predict(X), rtol=0, atol=1e-5 * estimator.y_scale_
    )


@pytest.mark.parametrize("opset", [MIN_OPSET - 1, onnx.defs.onnx_opset_version() + 1, True, "17"])
def test_bad_opset(regressors, opset):
    message = rf"^export_onnx: opset must be an integer in \[{MIN_OPSET}, "
    with pytest.raises(ValueError, match=message):
        export_onnx(regressors["depth1"], opset=opset)


def test_rejects_unfitted_and_foreign_estimators():
    with pytest.raises(NotFittedError):
        export_onnx(NeuMissRegressor())
    foreign = LinearRegression().fit(np.eye(3), np.arange(3.0))
    with pytest.raises(TypeError, match="NeuMissRegressor or NeuMissClassifier.*LinearRegression"):
        export_onnx(foreign)


def test_cli_export(tmp_path, regressors, capsys):
    estimator = regressors["depth2"]
    saved, onnx_path = tmp_path / "model.pt", tmp_path / "model.onnx"
    estimator.save(saved)
    assert cli_main(["export", str(saved), str(onnx_path), "--opset", "15"]) == 0
    assert "wrote" in capsys.readouterr().out
    model = onnx.load(onnx_path)
    assert model.opset_import[0].version == 15
    X = _scoring_sets(50)[0]
    np.testing.assert_allclose(
        _run(model, X)["y"], estimator.predict(X), rtol=0, atol=1e-5 * estimator.y_scale_
    )


@pytest.mark.parametrize("case", ["not-a-model", "missing-file", "bad-opset"])
def test_cli_export_errors_are_messages(tmp_path, regressors, capsys, case):
    saved = tmp_path / "model.pt"
    opset = "17"
    if case == "not-a-model":
        saved.write_text("hello")
    elif case == "bad-opset":
        regressors["depth1"].save(saved)
        opset = "3"
    assert cli_main(["export", str(saved), str(tmp_path / "out.onnx"), "--opset", opset]) == 1
    err = capsys.readouterr().err
    assert err.startswith("neumiss export: error:") and "Traceback" not in err
    assert not (tmp_path / "out.onnx").exists()


def test_onnx_export_refuses_scales_float32_cannot_carry(tmp_path):
    X, y = linear_data(150, 3)
    X[:, 1] *= 1e100
    model = paper(NeuMissRegressor, **FAST).fit(X, y)
    with pytest.raises(ValueError, match=r"float32.*\['1'\]"):
        model.to_onnx(tmp_path / "m.onnx")
