"""``clone_module`` makes the copy ``copy.deepcopy`` makes: the same classes, attributes,
tensors and flags, nothing mutable shared with the original, shared objects shared once."""

from __future__ import annotations

import copy
import gc
import weakref

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.network import StackedNetwork, clone_module, float64_copy
from neumiss.network import _clone as clone
from neumiss.network._clone import _FLOAT64_COPIES
from tests.test_stacked import SHAPES, _members, _rows


def _assert_same_copy(ours, reference, original, path="module"):
    """``ours`` and ``reference`` (deepcopy's) alike value for value; neither shares a
    mutable container or a tensor's memory with ``original``."""
    assert type(ours) is type(reference), path
    if isinstance(ours, nn.Module):
        mine, theirs = ours.__getstate__(), reference.__getstate__()
        source = original.__getstate__()
        assert list(mine) == list(theirs), path
        for name in mine:
            _assert_same_copy(mine[name], theirs[name], source[name], f"{path}.{name}")
    elif isinstance(ours, torch.Tensor):
        assert (ours.dtype, ours.shape, ours.requires_grad) == (
            reference.dtype, reference.shape, reference.requires_grad), path
        assert torch.equal(ours, reference), path
        assert ours.numel() == 0 or ours.data_ptr() != original.data_ptr(), path
    elif isinstance(ours, (dict, list, set)):
        assert ours is not original, f"{path} is shared with the original"
        assert type(ours) is type(reference) and len(ours) == len(reference), path
        if isinstance(ours, dict):
            assert list(ours) == list(reference), path
            for key in ours:
                _assert_same_copy(ours[key], reference[key], original[key], f"{path}[{key!r}]")
        elif isinstance(ours, list):
            for i, (a, b, c) in enumerate(zip(ours, reference, original)):
                _assert_same_copy(a, b, c, f"{path}[{i}]")
        else:
            assert ours == reference, path
    elif isinstance(ours, tuple):
        for i, (a, b, c) in enumerate(zip(ours, reference, original, strict=True)):
            _assert_same_copy(a, b, c, f"{path}[{i}]")
    else:
        assert ours == reference, (path, ours, reference)


def _fitted_network(name):
    """The network of a regressor or a (three-class) classifier fitted on 160 rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 4))
    X[rng.random(X.shape) < 0.25] = np.nan
    y = np.nan_to_num(X) @ np.array([1.0, -2.0, 0.5, 0.0]) + rng.normal(size=160)
    if name == "regressor":
        return NeuMissRegressor(depth=2, spline=True, max_epochs=3,
                                random_state=0).fit(X, y).network_
    return NeuMissClassifier(max_epochs=3, random_state=0).fit(
        X, np.digitize(y, [-1.0, 1.0])).network_


@pytest.mark.parametrize("name", ["regressor", "classifier"])
def test_a_fitted_estimators_network_is_copied_as_deepcopy_copies_it(name):
    network = _fitted_network(name)
    clone = clone_module(network)
    _assert_same_copy(clone, copy.deepcopy(network), network)
    x, mask = _rows(20, 0)
    with torch.no_grad():
        assert torch.equal(clone(x, mask), network(x, mask))


@settings(max_examples=20, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 3), seed=st.integers(0, 1000),
       shortcut=st.booleans())
def test_stacked_networks_and_their_members_are_copied_as_deepcopy_copies_them(
        shape, n_members, seed, shortcut):
    """The stacked network (its template kept outside the module tree, its buffers, a
    block frozen or not; with a spline term or not) and the members it gives back."""
    members = _members(n_members, seed, **shape)
    x, mask = _rows(17, seed)
    missing = mask.any(dim=0).nonzero().squeeze(1) if shortcut else None
    stacked = StackedNetwork(members, "mean", missing)
    stacked.block.requires_grad_(seed % 2 == 0)
    for module in (stacked, *stacked.networks()):
        clone = clone_module(module)
        _assert_same_copy(clone, copy.deepcopy(module), module)
        with torch.no_grad():
            assert torch.equal(clone(x, mask), module(x, mask))


class _Tied(nn.Module):
    """Objects reached twice: a submodule, a parameter, a list of names."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = self.first
        self.scale = nn.Parameter(torch.ones(3))
        self.inner = nn.Module()
        self.inner.scale = self.scale
        self.names = ["a", "b"]
        self.inner.names = self.names
        self.__dict__["outside"] = nn.Linear(2, 2)  # a module outside the tree

    def forward(self, x):
        return self.second(self.first(x)) * self.inner.scale


def test_what_is_shared_in_the_original_is_shared_once_in_the_copy():
    module = _Tied()
    clone = clone_module(module)
    assert clone.first is clone.second and clone.first is not module.first
    assert clone.inner.scale is clone.scale and clone.scale is not module.scale
    assert clone.inner.names is clone.names and clone.names is not module.names
    assert clone.outside is not module.outside
    _assert_same_copy(clone, copy.deepcopy(module), module)


def test_the_copy_changes_alone():
    """Weights changed in place, a hook, a buffer and a list attribute added to the copy
    leave the original as it was."""
    module = _Tied()
    before = {name: value.clone() for name, value in module.state_dict().items()}
    clone = clone_module(module)
    calls = []
    clone.first.register_forward_hook(lambda *args: calls.append(1))
    clone.register_buffer("extra", torch.zeros(1), persistent=False)
    clone.names.append("c")
    with torch.no_grad():
        for parameter in clone.parameters():
            parameter.add_(1.0)
    module(torch.ones(2, 3))
    assert not calls
    assert "extra" not in module._non_persistent_buffers_set
    assert module.names == ["a", "b"]
    for name, value in module.state_dict().items():
        assert torch.equal(value, before[name]), name
    clone(torch.ones(2, 3))
    assert calls


class _OwnCopy(nn.Linear):
    """A module with its own ``__deepcopy__``, which the copy must call."""

    def __deepcopy__(self, memo):
        copied = nn.Linear(self.in_features, self.out_features)
        copied.load_state_dict(self.state_dict())
        copied.marked = True
        return copied


def test_a_module_with_its_own_copy_protocol_is_copied_by_it():
    holder = nn.Sequential(_OwnCopy(2, 2))
    clone = clone_module(holder)
    assert clone[0].marked and torch.equal(clone[0].weight, holder[0].weight)


def test_a_float64_copy_is_made_once_while_the_module_is_unchanged():
    module = _Tied()
    copied = float64_copy(module)
    assert float64_copy(module) is copied
    assert all(p.dtype == torch.float64 for p in copied.parameters())
    assert not copied.training
    x = torch.randn(4, 3, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(copied(x), clone_module(module).double()(x))


@pytest.mark.parametrize("change", ["in place", "load_state_dict", "data", "replaced", "buffer"])
def test_a_float64_copy_follows_every_change_of_the_module(change):
    module = _Tied()
    before = float64_copy(module)
    with torch.no_grad():
        if change == "in place":
            module.first.bias.add_(1.0)
        elif change == "load_state_dict":
            module.load_state_dict({k: v + 1.0 for k, v in module.state_dict().items()})
        elif change == "data":
            module.first.bias.data = module.first.bias.data + 1.0
        elif change == "replaced":
            module.scale = nn.Parameter(module.scale + 1.0)
        else:
            module.register_buffer("extra", torch.ones(1))
    after = float64_copy(module)
    assert after is not before
    assert torch.equal(after.double().state_dict()["first.bias"],
                       module.double().state_dict()["first.bias"])
    x = torch.randn(4, 3, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(after(x), clone_module(module).double()(x))


def test_a_large_modules_float64_copy_is_made_at_every_call(monkeypatch):
    monkeypatch.setattr(clone, "FLOAT64_KEPT_ELEMENTS", 14)  # _Tied holds 3 + 9 + 3
    module = _Tied()
    first = float64_copy(module)
    assert float64_copy(module) is not first and module not in _FLOAT64_COPIES
    monkeypatch.setattr(clone, "FLOAT64_KEPT_ELEMENTS", 15)
    assert float64_copy(module) is float64_copy(module)


def test_float64_copies_go_with_their_modules():
    module = _Tied()
    made = weakref.ref(float64_copy(module))
    assert module in _FLOAT64_COPIES
    del module
    gc.collect()
    assert made() is None


def test_predictions_follow_weights_changed_after_a_prediction():
    """The estimator's float64 copy is made again when ``network_`` changes in place: the
    members' last bias raised by one moves every prediction by the same amount."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(160, 4))
    X[rng.random(X.shape) < 0.2] = np.nan
    model = NeuMissRegressor(max_epochs=2, random_state=0).fit(X, np.nan_to_num(X[:, 0]))
    first = model.predict(X[:5])
    members = getattr(model.network_, "members", [model.network_])
    with torch.no_grad():
        for member in members:
            member.head[-1].bias.add_(1.0)
    moved = model.predict(X[:5]) - first
    assert moved[0] > 0
    np.testing.assert_allclose(moved, moved[0], rtol=1e-9)
