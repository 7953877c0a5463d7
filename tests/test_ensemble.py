"""Ensembles of NeuMiss networks: members, averaging, and one graph, file and pickle."""

import pickle

import numpy as np
import onnxruntime as ort
import pytest
import torch

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.network import EnsembleNetwork

from .conftest import gaussian_regression


@pytest.fixture(scope="module")
def data():
    draw, *_ = gaussian_regression(4, 800, np.random.default_rng(7), missing_rate=0.3)
    return draw(800)


def _members(ensemble):
    return list(ensemble.network_.members)


def test_members_train_together_on_one_split_and_end_with_one_choice(data, monkeypatch):
    X, y = data
    calls = []
    search = neumiss.estimators._fitting.search_depths

    def spy(*args, **kwargs):
        calls.append(kwargs["n_members"])
        return search(*args, **kwargs)

    monkeypatch.setattr(neumiss.estimators._fitting, "search_depths", spy)
    model = NeuMissRegressor(depth=[1, 2], ensemble_size=3, max_epochs=6, random_state=0)
    model.fit(X[:600], y[:600], validation_data=(X[600:], y[600:]))
    assert calls == [3]  # one search trains the three members
    assert isinstance(model.network_, EnsembleNetwork) and len(model.members_) == 3
    for member in _members(model):
        assert member.block.depth == model.best_depth_
        assert member.block.weight_sharing == model.weight_sharing_
        assert (member.skip is None) == (model.mlp_depth_ == 0)
    # One shared block; heads from different initialisations: different validation losses.
    first, second = _members(model)[:2]
    torch.testing.assert_close(first.block.W_mix, second.block.W_mix, rtol=0, atol=0)
    assert not torch.equal(first.head[-1].bias, second.head[-1].bias)
    assert len({m["val_loss"] for m in model.members_}) == 3
    # The ensemble's validation score is its own, at least the members' mean here.
    score = model.score(X[600:], y[600:])
    assert model.validation_score_ == pytest.approx(score, abs=1e-4)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(restored.predict(X[600:]), model.predict(X[600:]), rtol=1e-6)



@pytest.mark.parametrize("scheme", ["holdout", "out_of_fold"])
def test_members_train_on_every_row_or_out_of_fold_on_all_but_their_fold(data, scheme,
                                                                          monkeypatch):
    # Members differ by their heads' initialization, not by resamples of the rows: held
    # out, every batch weighs every row alike for every member; out of fold, member k
    # gives its own fold weight 0 and every other row weight 1.
    X, y = data
    seen = []
    step = neumiss.network._graphs.batch_loss

    def spy(network, batch, loss_fn):
        seen.append(batch.member_weight)
        return step(network, batch, loss_fn)

    monkeypatch.setattr(neumiss.network._graphs, "batch_loss", spy)
    fraction = 0.1 if scheme == "holdout" else "auto"
    model = NeuMissRegressor(ensemble_size=3, max_epochs=2, validation_fraction=fraction,
                             random_state=0).fit(X[:600], y[:600])
    assert model.validation_scheme_ == scheme and seen
    if scheme == "holdout":
        assert all(weight is None for weight in seen)
    else:
        for weight in seen:
            assert weight.shape[1] == 3 and set(weight.unique().tolist()) <= {0.0, 1.0}
            assert torch.all(weight.sum(dim=1) == 2)  # each row out of one member's loss

def test_one_member_is_a_network_of_its_own(data):
    X, y = data
    model = NeuMissRegressor(depth=2, ensemble_size=1, max_epochs=3, random_state=0).fit(X, y)
    assert isinstance(model.network_, neumiss.network.NeuMissNetwork)
    assert len(model.members_) == 1


def test_regression_averages_the_members_predictions(data):
    X, y = data
    model = NeuMissRegressor(depth=2, ensemble_size=3, max_epochs=4, random_state=0).fit(X, y)
    x, mask = model.preprocessor_.transform(X)
    with torch.no_grad():
        outputs = [m(torch.from_numpy(x), torch.from_numpy(mask))[:, 0].numpy() for m in
                   _members(model)]
    expected = np.mean(outputs, axis=0) * model.y_scale_ + model.y_mean_
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-5, atol=1e-6)


def test_the_shared_block_is_computed_once_and_a_changed_block_on_its_own(data, monkeypatch):
    X, y = data
    model = NeuMissRegressor(depth=2, ensemble_size=3, max_epochs=2, random_state=0).fit(X, y)
    members = _members(model)
    x, mask = (torch.from_numpy(a) for a in model.preprocessor_.transform(X))

    def by_members():
        with torch.no_grad():
            return torch.stack([m(x, mask) for m in members]).mean(dim=0)

    calls = []
    for member in members:
        forward = member.block.forward
        monkeypatch.setattr(member.block, "forward",
                            lambda *a, forward=forward: calls.append(1) or forward(*a))
    with torch.no_grad():
        torch.testing.assert_close(model.network_(x, mask), by_members(), rtol=0, atol=0)
        assert len(calls) == 1 + 3  # once for the ensemble, then once per member
        members[1].block.W_mix.add_(0.1)  # the cached comparison sees the change
        calls.clear()
        torch.testing.assert_close(model.network_(x, mask), by_members(), rtol=0, atol=0)
        assert len(calls) == 2 + 3


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classification_averages_the_members_probabilities(data, n_classes):
    X, y = data
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    model = NeuMissClassifier(depth=2, ensemble_size=3, max_epochs=4, random_state=0)
    model.fit(X, labels)
    x, mask = (torch.from_numpy(a) for a in model.preprocessor_.transform(X))
    with torch.no_grad():
        logits = [m(x, mask) for m in _members(model)]
    if n_classes == 2:
        p1 = np.mean([torch.sigmoid(z)[:, 0].numpy() for z in logits], axis=0)
        expected = np.column_stack([1 - p1, p1])
    else:
        expected = np.mean([torch.softmax(z, dim=1).numpy() for z in logits], axis=0)
    np.testing.assert_allclose(model.predict_proba(X), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(model.predict(X), model.classes_[expected.argmax(axis=1)])


@pytest.mark.parametrize("task, mask_skip", [("regression", False), ("binary", False),
                                             ("multiclass", False), ("regression", True),
                                             ("multiclass", True)])
def test_ensemble_exports_saves_and_pickles_as_one_model(data, task, mask_skip, tmp_path):
    X, y = data
    if task == "regression":
        model = NeuMissRegressor(depth=2, ensemble_size=2, mlp_depth=1, max_epochs=3,
                                 mask_skip=mask_skip, random_state=0).fit(X, y)
    else:
        labels = y > np.median(y) if task == "binary" else np.digitize(y, [-1.0, 1.0])
        model = NeuMissClassifier(depth=2, ensemble_size=2, max_epochs=3, mask_skip=mask_skip,
                                  random_state=0).fit(X, labels)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    clone = pickle.loads(pickle.dumps(model))
    method = "predict" if task == "regression" else "predict_proba"
    expected = getattr(model, method)(X)
    np.testing.assert_array_equal(getattr(loaded, method)(X), expected)
    np.testing.assert_array_equal(getattr(clone, method)(X), expected)
    model.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    missing = np.isnan(X)
    feeds = {"X": np.where(missing, 0, X).astype(np.float32), "M": missing.astype(np.float32)}
    output = "y" if task == "regression" else "probabilities"
    scale = model.y_scale_ if task == "regression" else 1.0
    np.testing.assert_allclose(session.run([output], feeds)[0], expected, rtol=1e-4,
                               atol=1e-5 * scale)


@pytest.mark.parametrize("shared_block", [True, False])
def test_the_ensembles_graph_is_one_member_wide_and_row_by_row(data, tmp_path, shared_block):
    X, y = data
    # a shared block, held-out rows: the MLP network trained, not an untrained candidate
    model = NeuMissRegressor(depth=2, ensemble_size=3, mlp_depth=2, max_epochs=2,
                             weight_sharing="shared", validation_fraction=0.2,
                             random_state=0).fit(X, y)
    assert model.best_epoch_ > 0
    if not shared_block:  # a model file from before members shared their block
        with torch.no_grad():
            model.network_.members[1].block.W_mix.add_(0.1)
    graph = neumiss.export.export_onnx(model).graph
    blocks = sum(node.op_type == "MatMul" and "W_mix" in node.input[1] for node in graph.node)
    assert blocks == (1 if shared_block else 3)
    assert sum(node.op_type in ("Gemm", "MatMul") and ".head." in node.output[0]
               for node in graph.node) == 3  # one node per head layer, for every member
    # the mean over the members is folded into the last layer and the skip: one output
    # column, never the K members' outputs side by side
    assert not {"Reshape", "ReduceSum"} & {node.op_type for node in graph.node}
    weights = {t.name: list(t.dims) for t in graph.initializer}
    assert weights["members.head.4.weight"][1] == 1 and weights["members.skip.weight"][1] == 1
    model.to_onnx(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    missing = np.isnan(X)
    feeds = {"X": np.where(missing, 0, X).astype(np.float32), "M": missing.astype(np.float32)}
    whole = session.run(["y"], feeds)[0]
    np.testing.assert_allclose(whole, model.predict(X), rtol=1e-4, atol=1e-5 * model.y_scale_)
    parts = [session.run(["y"], {k: v[i : i + 7] for k, v in feeds.items()})[0]
             for i in range(0, len(X), 7)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_impute_averages_the_members_blocks(data):
    X, y = data
    model = NeuMissRegressor(depth=2, ensemble_size=2, max_epochs=3, random_state=0).fit(X, y)
    imputed = model.impute(X)
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(imputed[observed], X[observed])
    assert np.isfinite(imputed).all()


def test_the_members_equal_blocks_impute_as_one_block_and_unequal_ones_average(data):
    X, y = data
    model = NeuMissRegressor(depth=2, ensemble_size=3, max_epochs=2, random_state=0).fit(X, y)
    members = _members(model)
    x, mask = (torch.from_numpy(a) for a in model.preprocessor_.transform(X))
    with torch.no_grad():
        torch.testing.assert_close(model.network_.block(x, mask), members[0].block(x, mask),
                                   rtol=0, atol=0)
        members[2].block.W_mix.add_(0.1)
        expected = torch.stack([m.block(x, mask) for m in members]).mean(dim=0)
        torch.testing.assert_close(model.network_.block(x, mask), expected, rtol=0, atol=0)


def test_ensemble_network_needs_two_members_and_a_known_rule():
    from neumiss.network import NeuMissNetwork

    member = NeuMissNetwork(3)
    with pytest.raises(ValueError, match="at least 2 members"):
        EnsembleNetwork([member], "mean")
    with pytest.raises(ValueError, match="combine must be one of"):
        EnsembleNetwork([member, NeuMissNetwork(3)], "median")
