"""Members trained together (neumiss.network.StackedNetwork) and the data-driven start
(neumiss.network._start): each member computes what it computes alone, each learns from its
own loss, the block starts as the analytic block of the data's moments and each head's
linear part as the penalized linear fit on the block's output (ridge by its normal
equations, logistic regression by scikit-learn)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neumiss.network import (
    EnsembleNetwork,
    NeuMissNetwork,
    StackedNetwork,
    TrainingData,
    analytic_network,
)
from neumiss.network._data import (
    MIN_TWO_VALUED_COLUMNS,
    batch_loss,
    missing_columns,
    two_valued_columns,
)
from neumiss.network._losses import BinaryLogLoss, SquaredError
from neumiss.network._ridge import ridge_penalty
from neumiss.network._stacked import GivenBlockOutput
from neumiss.network._start import (
    LINEAR_PENALTY,
    observed_moments,
    pairwise_moments,
    start_from_moments,
    start_linear_parts,
)

#: Knots of a spline term on 4 columns: 3 ramps on column 0, 2 on column 2 (shared).
RAMPS = (np.array([0, 0, 0, 2, 2]), np.array([-1.0, -0.2, 0.5, -0.5, 0.3]),
         np.array([0.8, 0.7, 1.2, 0.8, 1.5]))


def _members(n, seed, n_ramps=0, **shape):
    members = []
    for k in range(n):
        network = NeuMissNetwork(4, n_ramps=n_ramps, **shape)
        network.reset_parameters(torch.Generator().manual_seed(seed + k))
        if n_ramps:
            network.encoding.set_ramps(*RAMPS)
        with torch.no_grad():  # the MLP's last layer starts at zero: give it weights
            for parameter in network.parameters():
                parameter.add_(0.1 * torch.randn(parameter.shape,
                                                 generator=torch.Generator().manual_seed(k)))
        members.append(network.eval())
    for member in members[1:]:  # members trained together share the first one's block
        member.block.load_state_dict(members[0].block.state_dict())
    return members


def _rows(n, seed, d=4):
    rng = np.random.default_rng(seed)
    mask = (rng.random((n, d)) < 0.3).astype(np.float32)
    x = np.where(mask > 0, 0.0, rng.normal(size=(n, d))).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(mask)


def _assert_same_outputs_and_gradients(members, x, mask, reference, shortcuts):
    """The members stacked with the shortcuts ``shortcuts`` (StackedNetwork's arguments
    after ``combine``) give the outputs and the gradients (of their sum of squares) of
    the members stacked with ``reference``."""
    outputs, grads = [], []
    for arguments in (reference, shortcuts):
        stacked = StackedNetwork(members, "mean", *arguments)
        out = stacked.member_outputs(x, mask)
        out.square().sum().backward()
        outputs.append(out.detach())
        grads.append({name: p.grad for name, p in stacked.named_parameters()})
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-5)


SHAPES = st.fixed_dictionaries({
    "depth": st.integers(0, 4),
    "weight_sharing": st.sampled_from(["independent", "shared"]),
    "residual": st.booleans(),
    "mlp_depth": st.integers(0, 2),
    "n_outputs": st.sampled_from([1, 3]),
    "mask_skip": st.booleans(),
    "n_ramps": st.sampled_from([0, len(RAMPS[0])]),
})


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 4), seed=st.integers(0, 1000))
def test_each_member_computes_what_it_computes_alone(shape, n_members, seed):
    members = _members(n_members, seed, **shape)
    stacked = StackedNetwork(members, "mean")
    x, mask = _rows(33, seed)
    with torch.no_grad():
        outputs = stacked.member_outputs(x, mask)
        assert outputs.shape == (n_members, 33, shape["n_outputs"])
        for k, member in enumerate(members):
            torch.testing.assert_close(outputs[k], member(x, mask), rtol=1e-5, atol=1e-5)
        for k, member in enumerate(stacked.networks()):  # and back, as separate networks
            torch.testing.assert_close(member(x, mask), members[k](x, mask))


@pytest.mark.parametrize("mlp_depth", [0, 2])
def test_the_heads_read_the_ramps_centred_and_give_them_back_as_they_are(mlp_depth):
    members = _members(3, 5, n_ramps=len(RAMPS[0]), mlp_depth=mlp_depth, n_outputs=2)
    stacked = StackedNetwork(members, "mean")
    x, mask = _rows(20, 5)
    block_out = stacked.block(x, mask)
    ramps = members[0].encoding(block_out)
    inputs = stacked._head_inputs(x, mask)
    torch.testing.assert_close(inputs[:, 4:], ramps - members[0].encoding.centres())
    # the heads' biases absorb the centres: each member's function and weights unchanged
    for k, member in enumerate(stacked.networks()):
        for name, value in member.named_parameters():
            torch.testing.assert_close(value, dict(members[k].named_parameters())[name])
    first = f"head__{0}__bias"
    assert not torch.allclose(stacked.heads[first],
                              torch.stack([m.head[0].bias for m in members]))


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 4), seed=st.integers(0, 1000),
       two_valued=st.booleans())
def test_each_row_held_out_is_scored_by_the_member_that_held_it_out(shape, n_members, seed,
                                                                     two_valued):
    """``held_out_outputs`` (out-of-fold validation): row ``i``'s output is what member
    ``held_out_by[i]`` computes alone, members holding out no row included, with the
    sparse product of two-valued columns or the dense one; the members' outputs are
    those :meth:`member_outputs` gives."""
    members = _members(n_members, seed, **shape)
    x, mask = _rows(33, seed)
    shortcuts = (None, None)
    if two_valued:  # column 1 complete, at 0.4 or 1.4
        x[:, 1], mask[:, 1] = 0.4 + (torch.arange(33) % 3 == 0).float(), 0.0
        shortcuts = (None, (torch.tensor([1]), torch.tensor([0.4]), torch.tensor([1.0])))
    stacked = StackedNetwork(members, "mean", *shortcuts).eval()
    held_out_by = torch.from_numpy(
        np.random.default_rng(seed).integers(0, max(n_members - 1, 1), 33))
    with torch.no_grad():
        output = stacked.held_out_outputs(x, mask, held_out_by)
        every = stacked.member_outputs(x, mask)
    assert output.shape == (33, shape["n_outputs"])
    for k, member in enumerate(members):
        rows = held_out_by == k
        with torch.no_grad():
            alone = member(x[rows], mask[rows])
        torch.testing.assert_close(output[rows], alone, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(output[rows], every[k, rows], rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 3), seed=st.integers(0, 1000),
       complete=st.lists(st.booleans(), min_size=4, max_size=4), bounded=st.booleans())
def test_the_blocks_shortcut_for_complete_columns_changes_nothing(shape, n_members, seed,
                                                                  complete, bounded):
    """``missing`` (the only columns that may be missing, as the search passes them;
    :func:`missing_columns` is tested below): the same outputs and the same gradients
    as the full block, on every shape, with any set of complete columns (all of them
    included: W_mix then reaches nothing), within a range that bounds observed values
    and imputations alike or without one."""
    members = _members(n_members, seed, **shape)
    if bounded:
        for member in members:
            member.block.set_range(torch.full((4,), -0.6), torch.tensor([0.5, 0.9, 0.7, 1.2]))
    x, mask = _rows(33, seed)
    mask[:, torch.tensor(complete)] = 0.0
    missing = mask.any(dim=0).nonzero().squeeze(1)
    _assert_same_outputs_and_gradients(members, x, mask, (None,), (missing,))
    # the members given back compute the full block, whatever the rows
    assert all(member(x, mask).shape == (33, shape["n_outputs"])
               for member in StackedNetwork(members, "mean", missing).networks())


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 3), seed=st.integers(0, 1000),
       shortcut=st.booleans())
def test_the_sparse_product_of_two_valued_columns_changes_nothing(shape, n_members, seed,
                                                                  shortcut):
    """``two_valued`` (columns observed in every row and of two values, as the search
    passes them; :func:`two_valued_columns` is tested below): the same outputs and
    gradients as the dense product, on every shape, rows at the base value in every such
    column included, with or without the block's shortcut."""
    members = _members(n_members, seed, **shape)
    x, mask = _rows(33, seed)
    columns = torch.tensor([1, 3])
    base, step = torch.tensor([-0.3, 0.0]), torch.tensor([1.7, 1.0])
    away = torch.from_numpy(np.random.default_rng(seed).integers(0, 2, (33, 2))).float()
    away[:5] = 0.0  # rows at the base in both columns: empty sums
    x[:, columns], mask[:, columns] = base + step * away, 0.0
    missing = mask.any(dim=0).nonzero().squeeze(1) if shortcut else None
    _assert_same_outputs_and_gradients(members, x, mask, (missing, None),
                                       (missing, (columns, base, step)))


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 3), seed=st.integers(0, 1000))
def test_heads_on_a_frozen_blocks_outputs_learn_as_through_the_block(shape, n_members, seed):
    """``on_block_outputs``: a frozen block's outputs computed once give the members'
    outputs and the heads' gradients that the block itself gives, on every shape; the
    block is back after the ``with``, and a block that trains is left in place."""
    members = _members(n_members, seed, **shape)
    x, mask = _rows(33, seed)
    data = TrainingData(x, mask, torch.zeros(33))
    outputs, grads = [], []
    for precomputed in (False, True):
        stacked = StackedNetwork(members, "mean")
        block = stacked.block.requires_grad_(False)
        if precomputed:
            with stacked.on_block_outputs(data, None) as (rows, none):
                assert none is None and isinstance(stacked.block, GivenBlockOutput)
                out = stacked.member_outputs(rows.x, rows.mask)
            assert stacked.block is block
        else:
            out = stacked.member_outputs(x, mask)
        out.square().sum().backward()
        outputs.append(out.detach())
        grads.append({name: p.grad for name, p in stacked.named_parameters()
                      if p.requires_grad})
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    assert grads[1].keys() == grads[0].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-5)
    training = StackedNetwork(members, "mean")
    with training.on_block_outputs(data) as (rows,):
        assert rows is data and not isinstance(training.block, GivenBlockOutput)


def test_two_valued_columns_are_observed_in_every_row_with_two_values():
    d = MIN_TWO_VALUED_COLUMNS + 2
    x = torch.zeros(4, d)
    x[:, 0] = torch.tensor([0.0, 1.0, 0.5, 1.0])  # three values
    x[:, 2] = torch.tensor([-0.2, 0.8, 0.8, 0.8])  # two values, 0.8 the most frequent
    mask = torch.zeros(4, d)
    mask[3, 1] = 1.0  # missing once
    train = TrainingData(x, mask, torch.zeros(4))
    columns, base, step = two_valued_columns(train, None)
    assert torch.equal(columns, torch.tensor([2, *range(3, d)]))
    assert base[0] == pytest.approx(0.8) and step[0] == pytest.approx(-1.0)
    assert torch.equal(base[1:], torch.zeros(d - 3)) and torch.equal(step[1:], torch.zeros(d - 3))
    val_x = torch.zeros(2, d)
    val_x[0, 5], val_x[1, 5] = 2.0, 3.0  # with the training rows' 0: three values
    val = TrainingData(val_x, torch.zeros(2, d), torch.zeros(2))
    assert two_valued_columns(train, val) is None  # 31 left: fewer than worth it
    assert two_valued_columns(iter([train])) is None  # streamed rows: not known
    meta = TrainingData(x.to("meta"), mask.to("meta"), torch.zeros(4, device="meta"))
    assert two_valued_columns(meta) is None  # off the CPU (a GPU's graphed steps): dense


def test_missing_columns_are_those_missing_in_some_row_of_the_rows_in_memory():
    d = 64  # 64 x 62 multiply-adds spared per row: worth the shortcut
    mask = torch.zeros(4, d)
    mask[0, 2] = mask[2, 2] = 1.0
    train = TrainingData(torch.zeros(4, d), mask, torch.zeros(4))
    val_mask = torch.zeros(2, d)
    val_mask[0, 0] = 1.0
    val = TrainingData(torch.zeros(2, d), val_mask, torch.zeros(2))
    assert torch.equal(missing_columns(train, None), torch.tensor([2]))
    assert torch.equal(missing_columns(train, val), torch.tensor([0, 2]))
    full = TrainingData(torch.zeros(1, d), torch.ones(1, d), torch.zeros(1))
    assert missing_columns(train, full) is None  # every column: no shortcut
    assert missing_columns(iter([train]), val) is None  # streamed rows: not known
    narrow = TrainingData(torch.zeros(4, 3), mask[:, :3], torch.zeros(4))
    assert missing_columns(narrow) is None  # 3 x 2 spared per row: not worth it


@pytest.mark.parametrize(("combine", "n_outputs"),
                         [("mean", 1), ("binary_probability", 1), ("probability", 3)])
def test_the_combined_output_is_the_ensembles(combine, n_outputs):
    members = _members(3, 0, depth=2, mlp_depth=1, n_outputs=n_outputs)
    stacked = StackedNetwork(members, combine)
    x, mask = _rows(20, 1)
    with torch.no_grad():
        expected = EnsembleNetwork(members, combine)(x, mask)
        torch.testing.assert_close(stacked(x, mask), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(stacked.to_network()(x, mask), expected)
    alone = StackedNetwork(members[:1], combine)
    assert isinstance(alone.to_network(), NeuMissNetwork)
    with torch.no_grad():
        torch.testing.assert_close(alone(x, mask), members[0](x, mask))


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, n_members=st.integers(1, 3), seed=st.integers(0, 1000),
       weight=st.floats(0.0, 1.0))
def test_a_blend_outputs_the_weighted_sum_of_both_networks_members(shape, n_members, seed,
                                                                  weight):
    # the linear heads on the same block, with the same terms and knots (as the search
    # fits them), from other seeds
    network = StackedNetwork(_members(n_members, seed, **shape), "mean")
    linear_members = _members(n_members, seed + 7, **{**shape, "mlp_depth": 0})
    generator = torch.Generator().manual_seed(seed)
    for member in linear_members:
        member.block.load_state_dict(network.block.state_dict())
        with torch.no_grad():  # every head weight unlike the other network's
            for name, parameter in member.named_parameters():
                if not name.startswith("block."):
                    parameter.add_(torch.randn(parameter.shape, generator=generator))
    linear = StackedNetwork(linear_members, "mean")
    blend = network.blended_with(linear, weight)
    x, mask = _rows(29, seed)
    with torch.no_grad():
        expected = (weight * network.member_outputs(x, mask)
                    + (1 - weight) * linear.member_outputs(x, mask))
        torch.testing.assert_close(blend.member_outputs(x, mask), expected,
                                   rtol=1e-5, atol=1e-5)
        # the blend is a network of the same shape, the two it came from unchanged
        assert blend.heads.keys() == network.heads.keys()
        torch.testing.assert_close(network.member_outputs(x, mask),
                                   StackedNetwork(_members(n_members, seed, **shape),
                                                  "mean").member_outputs(x, mask))


def test_a_blend_with_mlp_heads_in_place_of_linear_ones_is_refused():
    network = StackedNetwork(_members(2, 0, mlp_depth=1), "mean")
    with pytest.raises(ValueError, match="blends with linear heads"):
        network.blended_with(network, 0.5)


def test_a_constant_output_is_every_members():
    stacked = StackedNetwork(_members(2, 0, depth=1, mlp_depth=2, n_outputs=3), "probability")
    stacked.set_constant_output(torch.tensor([0.5, -1.0, 2.0]))
    x, mask = _rows(5, 0)
    with torch.no_grad():
        outputs = stacked.member_outputs(x, mask)
    torch.testing.assert_close(outputs, torch.tensor([0.5, -1.0, 2.0]).expand(2, 5, 3))


def test_each_member_learns_from_its_own_loss():
    members = _members(3, 0, depth=2, mlp_depth=1)
    stacked = StackedNetwork(members, "mean")
    x, mask = _rows(40, 2)
    batch = TrainingData(x, mask, torch.randn(40), torch.rand(40) + 0.5)

    def squared(output, target):
        return (output[:, 0] - target) ** 2

    batch_loss(stacked, batch, squared).backward()
    block_grads = []
    for k, member in enumerate(members):
        member.zero_grad()
        batch_loss(member, batch, squared).backward()
        for name, parameter in member.named_parameters():
            if name.startswith("block."):
                continue
            stacked_grad = stacked.heads[name.replace(".", "__")].grad[k]
            # The training loss is the members' mean: each head gets 1/K of its gradient.
            torch.testing.assert_close(stacked_grad * 3, parameter.grad, rtol=1e-4, atol=1e-6)
        block_grads.append({name: p.grad for name, p in member.block.named_parameters()})
    for name, parameter in stacked.block.named_parameters():  # the shared block: their mean
        expected = torch.stack([grads[name] for grads in block_grads]).mean(dim=0)
        torch.testing.assert_close(parameter.grad, expected, rtol=1e-4, atol=1e-6)


def test_member_weights_weigh_the_rows_of_each_members_loss():
    members = _members(2, 0, depth=1, mlp_depth=0)
    stacked = StackedNetwork(members, "mean")
    x, mask = _rows(30, 4)
    target, case = torch.randn(30), torch.rand(30) + 0.5
    chosen = torch.stack([torch.arange(30) < 10, torch.arange(30) >= 20], dim=1).float()

    def squared(output, target):
        return (output[:, 0] - target) ** 2

    loss = batch_loss(stacked, TrainingData(x, mask, target, case, chosen), squared)
    with torch.no_grad():
        expected = sum(float((squared(m(x, mask), target) * case * chosen[:, k]).sum())
                       for k, m in enumerate(members)) / 60
    assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_observed_moments_are_the_pairwise_complete_ones():
    rng = np.random.default_rng(0)
    values = rng.multivariate_normal([1.0, -1.0, 0.0], [[2, 0.8, 0.3], [0.8, 1, 0.2],
                                                       [0.3, 0.2, 0.5]], size=500)
    missing = rng.random(values.shape) < 0.3
    x, mask = np.where(missing, 0.0, values), missing.astype(np.float32)
    data = TrainingData(torch.tensor(x, dtype=torch.float32), torch.from_numpy(mask),
                        torch.zeros(500))
    mean, cov = observed_moments(data)
    frame = pd.DataFrame(np.where(missing, np.nan, values))
    np.testing.assert_allclose(mean, frame.mean(), rtol=1e-5)
    np.testing.assert_allclose(cov, frame.cov(), rtol=1e-4, atol=1e-6)  # positive definite here
    # A never-observed column: mean 0, variance 1, no covariance; and a subsample.
    mask[:, 2] = 1.0
    data = TrainingData(data.x, torch.from_numpy(mask), data.target)
    mean, cov = observed_moments(data, max_rows=200)
    assert mean[2] == 0.0 and cov[2, 2] == pytest.approx(1.0) and cov[0, 2] == pytest.approx(0)
    assert np.linalg.eigvalsh(cov).min() > 0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # pandas, on 1-row pairs
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), share=st.floats(0.0, 0.95),
       offset=st.floats(-1e3, 1e3))
def test_pairwise_moments_are_pandas_pairwise_complete_ones(seed, n, share, offset):
    # Any share missing, columns or pairs with no row or a single one, values far from 0.
    rng = np.random.default_rng(seed)
    values = offset + rng.normal(size=(n, 4)) * [1.0, 10.0, 0.1, 1.0]
    observed = rng.random(values.shape) >= share
    mean, cov = pairwise_moments(values, observed)
    frame = pd.DataFrame(np.where(observed, values, np.nan))
    np.testing.assert_allclose(mean, frame.mean().fillna(0.0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(cov, frame.cov().fillna(0.0), rtol=1e-7, atol=1e-9)


def test_the_data_start_is_the_analytic_block_of_the_moments():
    rng = np.random.default_rng(1)
    cov = np.array([[1.0, 0.6, 0.2, 0.0], [0.6, 1.0, 0.3, 0.1], [0.2, 0.3, 1.0, 0.4],
                    [0.0, 0.1, 0.4, 1.0]])
    mean = rng.normal(size=4)
    network = NeuMissNetwork(4, depth=5, residual=True, weight_sharing="shared", mlp_depth=0)
    assert start_from_moments(network, mean, cov)
    expected = analytic_network(mean, cov, np.zeros(4), depth=5, normalize=True)
    x, mask = _rows(30, 3)
    with torch.no_grad():
        torch.testing.assert_close(network.block(x, mask).double(),
                                   expected.block(x.double(), mask.double()),
                                   rtol=1e-5, atol=1e-5)
    plain = NeuMissNetwork(4, depth=3, residual=False)
    before = {name: value.clone() for name, value in plain.state_dict().items()}
    assert not start_from_moments(plain, mean, cov)  # its iterations cannot compute them
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(value, before[name])


_squared, _logistic = SquaredError(), BinaryLogLoss()  # losses given to the linear start


def _started(n, n_members, mlp_depth, seed=0, mask_skip=False, n_ramps=0):
    x, mask = _rows(n, seed)
    networks = [NeuMissNetwork(4, depth=2, residual=True, mlp_depth=mlp_depth,
                               mask_skip=mask_skip, n_ramps=n_ramps) for _ in range(n_members)]
    for k, network in enumerate(networks):
        network.reset_parameters(torch.Generator().manual_seed(k))
        if n_ramps:
            network.encoding.set_ramps(*RAMPS)
        network.block.load_state_dict(networks[0].block.state_dict())  # shared, as stacked
    with torch.no_grad():
        features = networks[0].block(x, mask).double().numpy()
    return networks, x, mask, features


@pytest.mark.parametrize("squared", [False, True], ids=["lbfgs", "normal-equations"])
@pytest.mark.parametrize("mlp_depth, mask_skip, spline", [
    (0, False, False), (2, False, False), (0, True, False), (2, True, False), (0, True, True),
    (2, False, True)])
def test_the_linear_start_is_each_members_ridge_fit_on_the_blocks_output(mlp_depth, mask_skip,
                                                                         spline, squared):
    # The same minimum by L-BFGS on the loss, or (squared=True) by the closed form.
    n_ramps = len(RAMPS[0]) if spline else 0
    networks, x, mask, features = _started(300, 3, mlp_depth, mask_skip=mask_skip,
                                           n_ramps=n_ramps)
    # the spline's ramps of the block's output, computed here from the knots
    feature, left, width = RAMPS
    ramps = np.clip((features[:, feature] - left) / width, 0.0, 1.0)
    p = 4 + 4 * mask_skip + n_ramps  # the block's output, the mask, the ramps
    rng = np.random.default_rng(4)
    target = features @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 + rng.normal(0, 0.5, 300)
    target = target + 0.8 * mask.numpy()[:, 1]  # informative missingness
    target = target + 1.5 * np.maximum(features[:, 0], 0.0)  # a bend
    member_weight = rng.poisson(1.0, (300, 3)).astype(np.float32)
    case_weight = rng.uniform(0.5, 1.5, 300).astype(np.float32)
    data = TrainingData(x, mask, torch.tensor(target, dtype=torch.float32),
                        torch.from_numpy(case_weight), torch.from_numpy(member_weight))
    start_linear_parts(networks, data, _squared, squared=squared)
    inputs = [features, *([mask.numpy()] if mask_skip else []), *([ramps] if spline else [])]
    design = np.hstack([*inputs, np.ones((300, 1))])
    # L-BFGS: mean(w (y - Hb - c)^2) + P / (2n) |b|^2, i.e. alpha = P / 2 on the sum; the
    # normal equations: the penalty chosen by leave-one-out error on the case weights.
    alpha = LINEAR_PENALTY / 2 if not squared else ridge_penalty(
        *(torch.from_numpy(np.asarray(a, dtype=np.float64))
          for a in (design[:, :p], target, case_weight)))
    # the ramps are nearly collinear with their column: L-BFGS's minimum is flatter there
    atol = 1e-3 if spline and not squared else 2e-4
    for k, network in enumerate(networks):
        # the normal equations with an unpenalized intercept, solved independently
        w = case_weight * member_weight[:, k]
        gram = design.T @ (w[:, None] * design) / 300
        gram[:p, :p] += alpha / 300 * np.eye(p)
        solution = np.linalg.solve(gram, design.T @ (w * target) / 300)
        linear = network.head[-1] if mlp_depth == 0 else network.skip
        np.testing.assert_allclose(linear.weight.detach().numpy()[0], solution[:4], atol=atol)
        if mask_skip:
            np.testing.assert_allclose(network.mask_skip.weight.detach().numpy()[0],
                                       solution[4:8], atol=atol)
        if spline:
            np.testing.assert_allclose(network.spline.weight.detach().numpy()[0],
                                       solution[p - n_ramps : p], atol=atol)
        np.testing.assert_allclose(network.head[-1].bias.item(), solution[p], atol=atol)
        with torch.no_grad():  # the network computes that linear function (MLP part zero)
            np.testing.assert_allclose(network(x, mask)[:, 0].numpy(), design @ solution,
                                       atol=1e-3)


@pytest.mark.parametrize("logistic", [False, True], ids=["lbfgs", "newton"])
def test_the_logistic_start_is_scikit_learns_penalized_logistic_regression(logistic):
    from sklearn.linear_model import LogisticRegression

    networks, x, mask, features = _started(400, 1, 0, seed=2)
    logits = features @ np.array([1.5, -1.0, 0.0, 2.0]) - 0.5
    target = (np.random.default_rng(3).random(400) < 1 / (1 + np.exp(-logits))).astype(float)
    data = TrainingData(x, mask, torch.tensor(target, dtype=torch.float32))
    start_linear_parts(networks, data, _logistic, logistic=logistic)
    # sum of log losses + |b|^2 / (2C) is n times the mean loss + P / (2n) |b|^2.
    expected = LogisticRegression(C=1.0 / LINEAR_PENALTY, tol=1e-10).fit(features, target)
    np.testing.assert_allclose(networks[0].head[-1].weight.detach().numpy()[0],
                               expected.coef_[0], atol=2e-3)
    np.testing.assert_allclose(networks[0].head[-1].bias.item(), expected.intercept_[0],
                               atol=2e-3)


def test_newton_and_lbfgs_solve_the_same_logistic_start_on_the_ramps(monkeypatch):
    # Many correlated columns (the spline's ramps beside the block's output): Newton's
    # method (few columns) and L-BFGS with the closed-form gradient (beyond
    # NEWTON_MAX_COLUMNS) reach the same minimum; Newton's objective is not above
    # L-BFGS's, and its gradient vanishes.
    import neumiss.network._start as start

    networks, x, mask, features = _started(300, 2, 0, seed=5, n_ramps=len(RAMPS[0]))
    feature, left, width = RAMPS
    design = np.hstack([features, np.clip((features[:, feature] - left) / width, 0.0, 1.0)])
    logits = np.sin(2.0 * features[:, 0]) + features[:, 1]
    target = (np.random.default_rng(8).random(300) < 1 / (1 + np.exp(-logits))).astype(float)
    member_weight = np.random.default_rng(9).poisson(1.0, (300, 2)).astype(float)
    args = [torch.from_numpy(a) for a in (design, target, member_weight)]
    penalty = LINEAR_PENALTY / 600

    def objective(weight, bias, k):
        z = design @ weight[k, 0] + bias[k, 0]
        loss = member_weight[:, k] @ (np.logaddexp(0.0, z) - target * z) / 300
        return loss + penalty * weight[k, 0] @ weight[k, 0]

    newton = [t.numpy() for t in start._logistic(*args, penalty)]
    monkeypatch.setattr(start, "NEWTON_MAX_COLUMNS", 0)
    lbfgs = [t.numpy() for t in start._logistic(*args, penalty)]
    for k in range(2):
        assert objective(*newton, k) <= objective(*lbfgs, k) + 1e-12
        assert objective(*newton, k) == pytest.approx(objective(*lbfgs, k), rel=1e-5)
        z = design @ newton[0][k, 0] + newton[1][k, 0]
        residual = member_weight[:, k] * (1 / (1 + np.exp(-z)) - target) / 300
        gradient = design.T @ residual + 2 * penalty * newton[0][k, 0]
        np.testing.assert_allclose(gradient, 0.0, atol=1e-8)
        assert abs(residual.sum()) < 1e-8


def test_the_closed_form_logistic_gradient_finds_each_members_iterative_minimum():
    # Members on their own weighted rows, the mask's term too: both paths minimise the
    # same objective, each member's its own (sklearn's logistic regression per member).
    from sklearn.linear_model import LogisticRegression

    solutions = []
    for logistic in (False, True):
        networks, x, mask, features = _started(300, 3, 2, seed=4, mask_skip=True)
        logits = features @ np.array([1.0, -1.0, 0.5, 0.0]) + 1.2 * mask.numpy()[:, 0]
        target = (np.random.default_rng(6).random(300) < 1 / (1 + np.exp(-logits)))
        member_weight = np.random.default_rng(7).poisson(1.0, (300, 3)).astype(np.float32)
        data = TrainingData(x, mask, torch.tensor(target, dtype=torch.float32),
                            None, torch.from_numpy(member_weight))
        weight, bias = start_linear_parts(networks, data, _logistic, logistic=logistic)
        solutions.append(np.concatenate([weight.numpy().reshape(3, -1),
                                         bias.numpy().reshape(3, 1)], axis=1))
    # the iterative start (L-BFGS) stops within 2e-4 of the minimum; Newton's method converges to it
    np.testing.assert_allclose(solutions[1], solutions[0], atol=5e-4)
    design = np.hstack([features, mask.numpy()])
    for k in range(3):
        expected = LogisticRegression(C=1.0 / LINEAR_PENALTY, tol=1e-10).fit(
            design, target, sample_weight=member_weight[:, k])
        np.testing.assert_allclose(solutions[1][k, :-1], expected.coef_[0], atol=1e-5)
        np.testing.assert_allclose(solutions[1][k, -1], expected.intercept_[0], atol=1e-5)
