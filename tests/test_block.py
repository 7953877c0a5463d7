"""NeuMissBlock: the mask trick, gradients, shapes and the depth convention."""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neumiss import NeuMissBlock, NeuMissNetwork


def random_mask(batch, d, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, d, generator=g) < 0.5).float()


@pytest.mark.parametrize("seed", range(5))
def test_masking_weight_rows_and_columns_equals_masking_input_and_output(seed):
    # Paper Section 3.3: (W * mbar mbar^T) v == (W (v * mbar)) * mbar, per sample.
    g = torch.Generator().manual_seed(seed)
    d = 7
    W = torch.randn(d, d, generator=g, dtype=torch.float64)
    v = torch.randn(d, generator=g, dtype=torch.float64)
    mbar = 1.0 - random_mask(1, d, seed)[0].double()
    left = (W * torch.outer(mbar, mbar)) @ v
    right = (W @ (v * mbar)) * mbar
    torch.testing.assert_close(left, right)


@pytest.mark.parametrize("depth", [0, 1, 2, 4])
@pytest.mark.parametrize("weights", ["independent", "shared"])
@pytest.mark.parametrize("residual", [False, True])
def test_block_equals_per_sample_masked_matrices(depth, weights, residual):
    """The batched block equals an explicit per-sample computation on obs/mis submatrices."""
    torch.manual_seed(depth)
    d, batch = 6, 16
    block = NeuMissBlock(d, depth=depth, weight_sharing=weights, residual=residual).double()
    with torch.no_grad():
        for p in block.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(batch, d, dtype=torch.float64)
    mask = random_mask(batch, d, depth).double()
    mask[0] = 0.0  # a row with nothing missing
    mask[1] = 1.0  # a row with everything missing
    x = x * (1 - mask)
    out = block(x, mask)
    mu = block.mu.detach()
    iterations = [w.detach() for w in block.iteration_weights()]
    for i in range(batch):
        obs = mask[i] == 0
        mis = ~obs
        c = x[i, obs] - mu[obs]
        h = c @ block.S0.detach()[np.ix_(obs, obs)] if depth >= 1 else c
        for W in iterations:
            h = h @ W[np.ix_(obs, obs)] + (c if residual else 0.0)
        expected = x[i].clone()
        expected[mis] = mu[mis] + h @ block.W_mix.detach()[np.ix_(obs, mis)]
        torch.testing.assert_close(out[i], expected)


def test_depth_convention_counts_matrices_before_w_mix():
    assert NeuMissBlock(5, depth=0).S0 is None
    assert len(NeuMissBlock(5, depth=0).iteration_weights()) == 0
    assert len(NeuMissBlock(5, depth=1).iteration_weights()) == 0
    assert len(NeuMissBlock(5, depth=4).iteration_weights()) == 3
    shared = NeuMissBlock(5, depth=4, weight_sharing="shared")
    assert len(shared.neumann_layers) == 1
    assert all(w is shared.neumann_layers[0] for w in shared.iteration_weights())
    n_params = sum(p.numel() for p in NeuMissBlock(5, depth=4).parameters())
    assert n_params == 5 + 5 * 25  # mu, S0, 3 iterations, W_mix


def test_no_gradient_flows_to_missing_inputs():
    torch.manual_seed(0)
    d = 8
    net = NeuMissNetwork(d, depth=3, mlp_depth=1, mlp_width=5)
    mask = random_mask(32, d, 1)
    x = (torch.randn(32, d) * (1 - mask)).requires_grad_(True)
    net(x, mask).sum().backward()
    assert torch.all(x.grad[mask.bool()] == 0)
    assert torch.any(x.grad[~mask.bool()] != 0)


def test_observed_entries_pass_through_unchanged():
    block = NeuMissBlock(4, depth=2)
    x = torch.randn(10, 4)
    mask = random_mask(10, 4, 3)
    x = x * (1 - mask)
    out = block(x, mask)
    torch.testing.assert_close(out[mask == 0], x[mask == 0])


def test_a_range_bounds_the_estimates_and_leaves_observed_entries_as_they_are():
    block = NeuMissBlock(4, depth=3, weight_sharing="shared", residual=True)
    with torch.no_grad():
        block.W_mix.mul_(50.0)  # estimates far beyond the range below
    lower, upper = torch.tensor([-1.0, -2.0, -0.5, -3.0]), torch.tensor([1.0, 2.0, 0.5, 3.0])
    x = torch.maximum(torch.minimum(torch.randn(64, 4), upper), lower)
    mask = random_mask(64, 4, 1)
    x = x * (1 - mask)
    free = block(x, mask)
    bounded = block.set_range(lower.numpy(), upper.numpy())(x, mask)
    assert ((free < lower) | (free > upper))[mask == 1].any()  # the case is tested
    assert torch.equal(bounded[mask == 0], x[mask == 0])
    torch.testing.assert_close(bounded, torch.clamp(free, lower, upper), rtol=0, atol=0)
    # the range follows the block (copies, dtype) but is not one of its weights
    assert "lower" not in block.state_dict() and "upper" not in block.state_dict()
    double = copy.deepcopy(block).double()
    assert double.lower.dtype == torch.float64
    torch.testing.assert_close(double(x.double(), mask.double()).float(), bounded)


@pytest.mark.parametrize("lower, upper, message", [
    ([0.0, 0.0], [1.0, 1.0, 1.0], "each of shape \\(3,\\), got shapes \\(2,\\) and \\(3,\\)"),
    ([0.0, 2.0, 0.0], [1.0, 1.0, 1.0], "the range needs lower <= upper"),
])
def test_a_bad_range_is_refused(lower, upper, message):
    with pytest.raises(ValueError, match=message):
        NeuMissBlock(3).set_range(lower, upper)


def test_forward_nan_builds_mask():
    block = NeuMissBlock(3, depth=2)
    x = torch.tensor([[1.0, float("nan"), 2.0], [float("nan")] * 3])
    mask = torch.isnan(x).float()
    expected = block(torch.nan_to_num(x, nan=0.0), mask)
    torch.testing.assert_close(block.forward_nan(x), expected)
    assert not torch.isnan(block.forward_nan(x)).any()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_features": 0}, "NeuMissBlock: n_features must be an integer >= 1, got 0"),
        ({"n_features": 3, "depth": -1}, "depth must be an integer >= 0, got -1"),
        ({"n_features": 3, "weight_sharing": "tied"},
         "weight_sharing must be one of 'independent', 'shared'"),
    ],
)
def test_block_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NeuMissBlock(**kwargs)


@pytest.mark.parametrize(
    ("cls", "kwargs", "name"),
    [
        (NeuMissBlock, {"n_features": True}, "n_features"),
        (NeuMissBlock, {"depth": True}, "depth"),
        (NeuMissBlock, {"n_features": 3.0}, "n_features"),
        (NeuMissBlock, {"residual": 1}, "residual"),
        (NeuMissBlock, {"residual": "yes"}, "residual"),
        (NeuMissNetwork, {"n_outputs": True}, "n_outputs"),
        (NeuMissNetwork, {"depth": np.True_}, "depth"),
        (NeuMissNetwork, {"mlp_depth": True}, "mlp_depth"),
        (NeuMissNetwork, {"mlp_width": True}, "mlp_width"),
        (NeuMissNetwork, {"residual": 0}, "residual"),
    ],
)
def test_booleans_are_not_numbers_and_numbers_not_booleans(cls, kwargs, name):
    with pytest.raises(ValueError, match=f"^{cls.__name__}: {name} must be "):
        cls(**{"n_features": 3, **kwargs})


def test_numpy_integers_and_booleans_are_valid_arguments():
    net = NeuMissNetwork(
        np.int64(4), n_outputs=np.int64(2), depth=np.int64(3), residual=np.True_,
        mlp_depth=np.int64(1), mlp_width=np.int64(5),
    )
    assert net.block.depth == 3 and type(net.block.depth) is int
    assert net.block.residual is True
    assert net(torch.zeros(2, 4), torch.zeros(2, 4)).shape == (2, 2)


def test_network_output_shape_and_repeatable_init():
    net = NeuMissNetwork(6, n_outputs=3, depth=2, mlp_depth=2, mlp_width=4)
    x, mask = torch.zeros(5, 6), torch.zeros(5, 6)
    assert net(x, mask).shape == (5, 3)
    a = NeuMissNetwork(6, depth=2)
    b = NeuMissNetwork(6, depth=2)
    a.reset_parameters(torch.Generator().manual_seed(1))
    b.reset_parameters(torch.Generator().manual_seed(1))
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb)


def test_mlp_head_starts_as_the_linear_head_and_keeps_it_representable():
    torch.manual_seed(0)
    net = NeuMissNetwork(5, n_outputs=2, depth=2, mlp_depth=2, mlp_width=7)
    net.reset_parameters(torch.Generator().manual_seed(3))
    x, mask = torch.randn(9, 5), (torch.rand(9, 5) < 0.3).float()
    h = net.block(x * (1 - mask), mask)
    # At initialisation the MLP adds only its last bias: the head is linear in h.
    linear = h @ net.skip.weight.T + net.head[-1].bias
    torch.testing.assert_close(net(x * (1 - mask), mask), linear)
    # Any linear head is exactly representable: skip weights, MLP output a constant.
    with torch.no_grad():
        net.head[-1].weight.zero_()
        net.skip.weight.copy_(torch.randn(2, 5))
        net.head[-1].bias.copy_(torch.tensor([0.5, -1.0]))
    expected = h @ net.skip.weight.T + torch.tensor([0.5, -1.0])
    torch.testing.assert_close(net(x * (1 - mask), mask), expected)
    assert NeuMissNetwork(5, depth=2).skip is None  # the paper's network is unchanged


@pytest.mark.parametrize("weights", ["independent", "shared"])
def test_warm_start_copies_shared_parameters_and_keeps_new_ones(weights):
    shallow = NeuMissNetwork(4, depth=2, weight_sharing=weights)
    deep = NeuMissNetwork(4, depth=4, weight_sharing=weights)
    shallow.reset_parameters(torch.Generator().manual_seed(0))
    deep.reset_parameters(torch.Generator().manual_seed(1))
    fresh = {name: p.clone() for name, p in deep.named_parameters()}
    copied = deep.warm_start_from(shallow)
    source = dict(shallow.named_parameters())
    assert set(copied) == set(source)  # every parameter of the shallow network has a twin
    for name, p in deep.named_parameters():
        expected = source[name] if name in copied else fresh[name]
        torch.testing.assert_close(p, expected)
    n_new = {"independent": 2, "shared": 0}[weights]  # iterations 2 and 3 are new
    assert len(fresh) - len(copied) == n_new


def test_warm_start_from_depth_zero_skips_missing_s0():
    flat = NeuMissNetwork(3, depth=0)
    deep = NeuMissNetwork(3, depth=1)
    copied = deep.warm_start_from(flat)
    assert "block.S0" not in copied and "block.W_mix" in copied


def test_untying_a_shared_network_keeps_its_function():
    shared = NeuMissNetwork(5, depth=4, weight_sharing="shared", residual=True)
    shared.reset_parameters(torch.Generator().manual_seed(0))
    untied = NeuMissNetwork(5, depth=4, weight_sharing="independent", residual=True)
    untied.reset_parameters(torch.Generator().manual_seed(1))
    copied = untied.warm_start_from(shared)
    assert {f"block.neumann_layers.{i}" for i in range(3)} <= set(copied)
    x = torch.randn(20, 5, generator=torch.Generator().manual_seed(2))
    mask = random_mask(20, 5, seed=3)
    torch.testing.assert_close(untied(x * (1 - mask), mask), shared(x * (1 - mask), mask))


@pytest.mark.parametrize("n_features, n_outputs", [(5, 1), (3, 3), (1, 1)])
def test_an_mlp_head_warm_started_from_a_linear_head_keeps_its_function(n_features, n_outputs):
    # mlp_depth="auto" fine-tunes the MLP head from the chosen linear network: it must
    # start as the same function, also when a hidden layer has the linear head's shape.
    linear = NeuMissNetwork(n_features, n_outputs=n_outputs, depth=3, weight_sharing="shared")
    linear.reset_parameters(torch.Generator().manual_seed(0))
    with torch.no_grad():
        linear.head[-1].bias.uniform_(-2, 2, generator=torch.Generator().manual_seed(5))
    mlp = NeuMissNetwork(n_features, n_outputs=n_outputs, depth=3, weight_sharing="shared",
                         mlp_depth=2)
    mlp.reset_parameters(torch.Generator().manual_seed(1))
    copied = mlp.warm_start_from(linear)
    assert "skip.weight" in copied and not any(name.startswith("head.0") for name in copied)
    x = torch.randn(20, n_features, generator=torch.Generator().manual_seed(2))
    mask = random_mask(20, n_features, seed=3)
    torch.testing.assert_close(mlp(x * (1 - mask), mask), linear(x * (1 - mask), mask))


def test_deepening_an_mlp_head_restarts_its_mlp_part():
    # The depth search deepens with keep_mlp=False: the block, the skip and the last bias
    # carry over, the hidden layers keep their fresh draw and the MLP's output starts at 0.
    shallow = NeuMissNetwork(4, depth=2, weight_sharing="shared", mlp_depth=2)
    shallow.reset_parameters(torch.Generator().manual_seed(0))
    with torch.no_grad():  # a trained MLP part
        shallow.head[-1].weight.uniform_(-1, 1, generator=torch.Generator().manual_seed(4))
        shallow.head[-1].bias.fill_(0.7)
    deep = NeuMissNetwork(4, depth=4, weight_sharing="shared", mlp_depth=2)
    deep.reset_parameters(torch.Generator().manual_seed(1))
    fresh = {name: p.clone() for name, p in deep.head.named_parameters()}
    copied = deep.warm_start_from(shallow, keep_mlp=False)
    assert "skip.weight" in copied and "head.4.bias" in copied
    assert not {"head.0.weight", "head.2.weight", "head.4.weight"} & set(copied)
    for name, value in deep.head.named_parameters():
        expected = shallow.head.get_parameter(name) if name == "4.bias" else fresh[name]
        torch.testing.assert_close(value, expected)
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(2))
    mask = random_mask(20, 4, seed=3)
    h = deep.block(x * (1 - mask), mask)
    torch.testing.assert_close(deep(x * (1 - mask), mask), h @ shallow.skip.weight.T + 0.7)
    # By default (the fine-tunes at one depth) the MLP carries over.
    kept = NeuMissNetwork(4, depth=4, weight_sharing="shared", mlp_depth=2)
    assert "head.0.weight" in kept.warm_start_from(shallow)


def test_a_linear_head_warm_started_from_an_mlp_head_computes_its_skip_part():
    mlp = NeuMissNetwork(4, depth=2, weight_sharing="shared", mlp_depth=2)
    mlp.reset_parameters(torch.Generator().manual_seed(0))
    with torch.no_grad():  # a trained MLP part, which the linear head leaves out
        mlp.head[-1].weight.uniform_(-1, 1, generator=torch.Generator().manual_seed(4))
    linear = NeuMissNetwork(4, depth=2, weight_sharing="shared")
    linear.reset_parameters(torch.Generator().manual_seed(1))
    linear.warm_start_from(mlp)
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(2))
    mask = random_mask(20, 4, seed=3)
    h = mlp.block(x * (1 - mask), mask)
    expected = h @ mlp.skip.weight.T + mlp.head[-1].bias
    torch.testing.assert_close(linear(x * (1 - mask), mask), expected)
    assert not torch.allclose(mlp(x * (1 - mask), mask), expected)


def test_mask_skip_uses_informative_missingness():
    # y depends on whether x0 is missing, not on its value: the mask's own linear term in
    # the head carries it, and the linear start fits it.
    from sklearn.metrics import r2_score

    from neumiss import NeuMissRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    missing = rng.random(900) < 0.4
    y = X[:, 1] + 3.0 * missing + 0.3 * rng.normal(size=900)
    X[missing, 0] = np.nan
    scores = {}
    for mask_skip in (False, True):
        model = NeuMissRegressor(depth=0, mlp_depth=0, ensemble_size=1, max_epochs=5,
                                 mask_skip=mask_skip, random_state=0).fit(X[:600], y[:600])
        scores[mask_skip] = r2_score(y[600:], model.predict(X[600:]))
    # Without it, only a learned imputed value far from the data can flag the missing
    # rows to a linear head, and training gets there only partly.
    assert scores[True] > 0.95 and scores[True] > scores[False] + 0.05, scores
    weight = model.network_.mask_skip.weight.detach().numpy()[0]
    assert weight[0] * model.y_scale_ == pytest.approx(3.0, abs=0.3)  # in y's units


@settings(max_examples=40, deadline=None)
@given(n_rows=st.integers(0, 5000), n_features=st.integers(1, 3000))
def test_row_chunks_cut_the_rows_once_each_in_aligned_chunks(n_rows, n_features):
    from neumiss.network._block import ALIGNED_ROWS, CACHED_FLOATS, row_chunks

    chunks = row_chunks(n_rows, n_features, torch.device("cpu"))
    covered = np.concatenate([np.arange(n_rows)[rows] for rows in chunks])
    assert np.array_equal(covered, np.arange(n_rows))
    assert all(rows.start % ALIGNED_ROWS == 0 for rows in chunks)
    sizes = [len(range(n_rows)[rows]) for rows in chunks]
    assert max(sizes) <= max(ALIGNED_ROWS, CACHED_FLOATS // n_features)


@settings(max_examples=25, deadline=None)
@given(n_rows=st.integers(1, 400), n_features=st.integers(1, 40), depth=st.integers(0, 5),
       residual=st.booleans(), floats=st.sampled_from([8, 64 * 40, 2**18]),
       seed=st.integers(0, 2**16))
def test_a_tables_output_in_chunks_is_the_forward_output(
        n_rows, n_features, depth, residual, floats, seed):
    import neumiss.network._block as block_module

    generator = torch.Generator().manual_seed(seed)
    block = NeuMissBlock(n_features, depth=depth, weight_sharing="shared", residual=residual)
    block.reset_parameters(generator)
    mask = (torch.rand(n_rows, n_features, generator=generator) < 0.3).float()
    x = torch.randn(n_rows, n_features, generator=generator) * (1 - mask)
    missing = mask.any(dim=0).nonzero().squeeze(1)
    with torch.no_grad(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(block_module, "CACHED_FLOATS", floats)  # chunks of 64 rows and more
        for columns in (None, missing):
            # to float32 rounding: the bits follow the CPU's choice of product kernels
            torch.testing.assert_close(block.table_output(x, mask, columns),
                                       block(x, mask, columns), rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(n_rows=st.integers(1, 60), n_features=st.integers(1, 12), depth=st.integers(1, 4),
       weights=st.sampled_from(["independent", "shared"]), residual=st.booleans(),
       complete_share=st.sampled_from([0.0, 0.5, 0.9, 1.0]), bounded=st.booleans(),
       given_missing=st.booleans(), seed=st.integers(0, 2**16))
def test_the_iterations_run_on_incomplete_rows_only_for_the_same_outputs_and_gradients(
        n_rows, n_features, depth, weights, residual, complete_share, bounded, given_missing,
        seed):
    """A complete row's output is its ``x`` (bounded), bit for bit; the others', and every
    gradient, are those of every row through the iterations (``_estimate``)."""
    generator = torch.Generator().manual_seed(seed)
    block = NeuMissBlock(n_features, depth=depth, weight_sharing=weights,
                         residual=residual).double()
    block.reset_parameters(generator)
    with torch.no_grad():
        for parameter in block.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator,
                                             dtype=torch.float64))
    if bounded:
        block.set_range(-np.ones(n_features), np.ones(n_features))
    mask = (torch.rand(n_rows, n_features, generator=generator, dtype=torch.float64) < 0.4)
    complete = torch.rand(n_rows, generator=generator) < complete_share
    mask = (mask & ~complete[:, None]).double()
    x = 2 * torch.randn(n_rows, n_features, generator=generator, dtype=torch.float64) * (1 - mask)
    missing = mask.any(dim=0).nonzero().squeeze(1) if given_missing else None
    upstream = torch.randn(n_rows, n_features, generator=generator, dtype=torch.float64)

    def run(forward):
        block.zero_grad(set_to_none=True)
        out = forward(x, mask, missing)
        (out * upstream).sum().backward()
        # every weight gets a gradient, zero when every row is complete (as through every
        # row): Adam steps on it, and data-parallel training finds every weight used
        return out.detach(), [p.grad.clone() for p in block.parameters()]

    out, grads = run(block)
    expected, expected_grads = run(block._estimate)
    observed = ~mask.bool().any(dim=1)  # the complete rows
    kept = x[observed] if not bounded else torch.clamp(x[observed], -1.0, 1.0)
    assert torch.equal(out[observed], kept)
    torch.testing.assert_close(out, expected)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad)
