"""The analytic NeuMiss weights (neumiss.network): the Neumann iterates of paper Prop. 3."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neumiss import NeuMissBlock, NeuMissNetwork
from neumiss.network import analytic_network, set_analytic_weights, set_chebyshev_weights
from neumiss.network._analytic import CHEBYSHEV_RESIDUAL, chebyshev_condition, chebyshev_steps
from neumiss.simulation import bayes_predict

D = 6


@pytest.fixture(scope="module")
def problem():
    """SPD covariance rescaled to spectral radius 0.9, MCAR data, random coefficients."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((D, D))
    cov = A @ A.T + D * np.eye(D)
    cov *= 0.9 / np.linalg.eigvalsh(cov)[-1]
    mean = rng.standard_normal(D)
    X = rng.multivariate_normal(mean, cov, size=4_000)
    X[rng.random(X.shape) < 0.5] = np.nan
    return {"X": X, "mean": mean, "cov": cov, "coef": rng.standard_normal(D), "intercept": 0.3}


def _predict(network, X):
    mask = np.isnan(X)
    with torch.no_grad():
        out = network(torch.as_tensor(np.where(mask, 0.0, X)), torch.as_tensor(mask, dtype=float))
    return out.numpy()[:, 0]


def _neumann_per_row(x, mean, cov, coef, intercept, order, S0):
    """Paper eq. 4 for one row, iterating eq. 6 explicitly."""
    mis, obs = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
    cov_obs = cov[np.ix_(obs, obs)]
    S = S0[np.ix_(obs, obs)]
    for _ in range(order):
        S = (np.eye(obs.size) - cov_obs) @ S + np.eye(obs.size)
    imputed = mean[mis] + cov[np.ix_(mis, obs)] @ S @ (x[obs] - mean[obs])
    return intercept + coef[obs] @ x[obs] + coef[mis] @ imputed


@pytest.mark.parametrize("depth", [0, 1, 2, 5])
@pytest.mark.parametrize("start", ["identity", "inverse_diagonal"])
def test_network_computes_neumann_approximation(problem, depth, start):
    p = problem
    X = p["X"][:300]
    S0 = np.eye(D) if start == "identity" else np.diag(1 / np.diag(p["cov"]))
    network = analytic_network(
        p["mean"],
        p["cov"],
        p["coef"],
        p["intercept"],
        depth=depth,
        S0=None if start == "identity" or depth == 0 else S0,
    )
    if depth == 0:
        S0 = np.eye(D)
    expected = [
        _neumann_per_row(x, p["mean"], p["cov"], p["coef"], p["intercept"], max(depth - 1, 0), S0)
        for x in X
    ]
    np.testing.assert_allclose(_predict(network, X), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_error_decays_geometrically_below_proposition_3_bound(problem):
    p = problem
    X = p["X"]
    bayes = bayes_predict(X, p["mean"], p["cov"], p["coef"], p["intercept"])
    nu = np.linalg.eigvalsh(p["cov"])[0]
    # E_M ||Id - S0_obs cov_obs||_2^2 with S0 = Id, over the patterns of the sample.
    start_error = np.mean(
        [
            np.linalg.norm(np.eye(obs.sum()) - p["cov"][np.ix_(obs, obs)], 2) ** 2
            if obs.any()
            else 0
            for obs in ~np.isnan(X)
        ]
    )
    errors = []
    for order in range(1, 16):
        network = analytic_network(p["mean"], p["cov"], p["coef"], p["intercept"], depth=order + 1)
        errors.append(np.mean((_predict(network, X) - bayes) ** 2))
        bound = (1 - nu) ** (2 * order) * (p["coef"] @ p["coef"]) / nu * start_error
        assert errors[-1] <= bound
    errors = np.array(errors)
    ratios = errors[1:] / errors[:-1]
    assert np.all(ratios < 1)
    # Each eigen-direction of cov_obs shrinks by (1 - lambda)^2 <= (1 - nu)^2 per iteration.
    assert np.all(ratios <= (1 - nu) ** 2 * 1.02)
    assert errors[-1] < 1e-3 * errors[0]


def test_deep_analytic_network_matches_bayes_predictor(problem):
    p = problem
    bayes = bayes_predict(p["X"], p["mean"], p["cov"], p["coef"], p["intercept"])
    network = analytic_network(p["mean"], p["cov"], p["coef"], p["intercept"], depth=120)
    np.testing.assert_allclose(_predict(network, p["X"]), bayes, rtol=0, atol=1e-6)


def test_normalize_makes_large_covariances_converge(problem):
    p = problem
    cov = 5.0 * p["cov"]  # spectral radius 4.5: plain Neumann iterations diverge
    bayes = bayes_predict(p["X"], p["mean"], cov, p["coef"], p["intercept"])
    normalized = analytic_network(
        p["mean"], cov, p["coef"], p["intercept"], depth=120, normalize=True
    )
    np.testing.assert_allclose(_predict(normalized, p["X"]), bayes, rtol=0, atol=1e-6)
    plain = analytic_network(p["mean"], cov, p["coef"], p["intercept"], depth=20)
    assert np.max(np.abs(_predict(plain, p["X"]) - bayes)) > 1.0


def test_shared_weights_block_gives_same_output(problem):
    p = problem
    X = torch.as_tensor(p["X"][:200])
    blocks = [
        NeuMissBlock(D, depth=4, weight_sharing=weights, residual=True).double()
        for weights in ("independent", "shared")
    ]
    outputs = [set_analytic_weights(b, p["mean"], p["cov"]).forward_nan(X) for b in blocks]
    torch.testing.assert_close(outputs[0], outputs[1])
    # Observed entries pass through, missing ones get the order-3 conditional mean.
    observed = ~torch.isnan(X)
    torch.testing.assert_close(outputs[0][observed], X[observed])


def test_float32_block_keeps_its_dtype(problem):
    block = NeuMissBlock(D, depth=2, residual=True)
    set_analytic_weights(block, problem["mean"], problem["cov"])
    assert block.W_mix.dtype == torch.float32
    np.testing.assert_allclose(block.W_mix.detach().numpy(), problem["cov"].T, rtol=1e-6)
    np.testing.assert_allclose(block.mu.detach().numpy(), problem["mean"], rtol=1e-6)


def test_bad_arguments(problem):
    mean, cov = problem["mean"], problem["cov"]
    with pytest.raises(ValueError, match="residual=True"):
        set_analytic_weights(NeuMissBlock(D, depth=3, residual=False), mean, cov)
    with pytest.raises(ValueError, match="cov must have shape"):
        set_analytic_weights(NeuMissBlock(D, depth=1), mean, cov[:-1, :-1])
    with pytest.raises(ValueError, match="symmetric"):
        set_analytic_weights(NeuMissBlock(D, depth=1), mean, cov + np.triu(cov, 1))
    with pytest.raises(ValueError, match="depth-0 block has no S0"):
        set_analytic_weights(NeuMissBlock(D, depth=0), mean, cov, S0=np.eye(D))
    with pytest.raises(TypeError, match="NeuMissBlock"):
        set_analytic_weights(torch.nn.Linear(D, D), mean, cov)
    with pytest.raises(ValueError, match="coef must have shape"):
        analytic_network(mean, cov, np.ones(D + 1))


def test_normalize_runs_the_iterates_at_the_midpoint_scale_of_the_spectrum(problem):
    # The network is eq. 4 with the iterates of cov / s started from s Id, s the midpoint
    # of cov's extreme eigenvalues: every pattern's Id - cov_obs / s then contracts by at
    # most (kappa - 1) / (kappa + 1), faster than the spectral radius's 1 - 1 / kappa.
    p = problem
    rng = np.random.default_rng(5)
    A = rng.standard_normal((D, 3))
    cov = 3.0 * (A @ A.T + 0.05 * np.eye(D))  # ill-conditioned, spectral radius above 1
    eigenvalues = np.linalg.eigvalsh(cov)
    scale = (eigenvalues[0] + eigenvalues[-1]) / 2
    kappa = eigenvalues[-1] / eigenvalues[0]
    X = p["X"][:200]
    depth = 8
    network = analytic_network(p["mean"], cov, p["coef"], p["intercept"], depth=depth,
                               normalize=True)
    by_hand = [_neumann_per_row(x, p["mean"], cov / scale, p["coef"], p["intercept"],
                                depth - 1, scale * np.eye(D)) for x in X]
    np.testing.assert_allclose(_predict(network, X), by_hand, rtol=0, atol=1e-8)
    for x in X[~np.isnan(X).all(axis=1)]:
        obs = ~np.isnan(x)
        step = np.eye(obs.sum()) - cov[np.ix_(obs, obs)] / scale
        assert np.abs(np.linalg.eigvalsh(step)).max() <= (kappa - 1) / (kappa + 1) + 1e-12
    # closer to the Bayes predictor than the same depth run at the spectral radius
    bayes = bayes_predict(X, p["mean"], cov, p["coef"], p["intercept"])
    radius = eigenvalues[-1]
    at_radius = [_neumann_per_row(x, p["mean"], cov / radius, p["coef"], p["intercept"],
                                  depth - 1, radius * np.eye(D)) for x in X]
    assert np.abs(_predict(network, X) - bayes).mean() < np.abs(np.array(at_radius) - bayes).mean()


def test_normalize_names_its_scales_and_refuses_others(problem):
    p = problem
    cov = 4.0 * p["cov"]
    radius = np.linalg.eigvalsh(cov)[-1]
    block = NeuMissBlock(D, depth=3, residual=True)
    set_analytic_weights(block, p["mean"], cov, normalize="radius")
    np.testing.assert_allclose(block.W_mix.detach().numpy(), cov.T / radius, atol=1e-12)
    np.testing.assert_allclose(block.S0.detach().numpy(), radius * np.eye(D), atol=1e-12)
    with pytest.raises(ValueError, match="normalize must be a bool, 'midpoint' or 'radius'"):
        set_analytic_weights(block, p["mean"], cov, normalize="spectral")


# ------------------------------------------------------------------ Chebyshev steps


def _ill_conditioned(seed=5, kappa_floor=0.05):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((D, 3))
    return 3.0 * (A @ A.T + kappa_floor * np.eye(D))


def _richardson_per_row(x, mean, cov, coef, intercept, steps):
    """Eq. 4 with ``c cov_obs^-1`` approximated by Richardson steps, iterated explicitly."""
    mis, obs = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
    cov_obs, c = cov[np.ix_(obs, obs)], x[obs] - mean[obs]
    z = np.zeros(obs.size)
    for step in steps:
        z = z + step * (c - cov_obs @ z)
    imputed = mean[mis] + cov[np.ix_(mis, obs)] @ z
    return intercept + coef[obs] @ x[obs] + coef[mis] @ imputed


def _chebyshev_network(p, cov, depth, dtype=torch.float64):
    network = NeuMissNetwork(D, depth=depth, weight_sharing="independent", residual=True)
    network = network.to(dtype)
    set_chebyshev_weights(network.block, p["mean"], cov)
    with torch.no_grad():
        network.head[-1].weight.copy_(torch.as_tensor(p["coef"][None, :], dtype=dtype))
        network.head[-1].bias.fill_(p["intercept"])
    return network.eval()


def test_the_interval_is_the_widest_that_d_chebyshev_steps_reduce_tenfold():
    for steps in (1, 4, 16, 32):
        kappa = chebyshev_condition(steps)
        # 1 / T_D((kappa + 1) / (kappa - 1)) = 0.1, T_D(x) = cosh(D arccosh x) for x >= 1
        ratio = (kappa + 1) / (kappa - 1)
        assert np.cosh(steps * np.arccosh(ratio)) == pytest.approx(1 / CHEBYSHEV_RESIDUAL)
    assert chebyshev_condition(16) == pytest.approx(115, rel=0.01)


def test_chebyshev_weights_run_richardson_at_the_chebyshev_nodes(problem):
    # The network is eq. 4 with D Richardson steps whose inverses are the Chebyshev nodes
    # of [lambda_min, lambda_max] (kappa below chebyshev_condition(D): the whole spectrum),
    # taken here in their natural order: the error polynomial does not depend on it.
    p = problem
    cov = _ill_conditioned(kappa_floor=0.2)
    eigenvalues = np.linalg.eigvalsh(cov)
    lower, upper = eigenvalues[0], eigenvalues[-1]
    depth = 16
    assert upper / lower < chebyshev_condition(depth)
    k = np.arange(depth)
    nodes = (upper + lower) / 2 + (upper - lower) / 2 * np.cos(np.pi * (2 * k + 1) / (2 * depth))
    X = p["X"][:200]
    network = _chebyshev_network(p, cov, depth)
    by_hand = [_richardson_per_row(x, p["mean"], cov, p["coef"], p["intercept"], 1 / nodes)
               for x in X]
    np.testing.assert_allclose(_predict(network, X), by_hand, rtol=0, atol=1e-9)
    # every pattern's error shrinks by at least the Chebyshev bound 1 / T_D
    bound = 1 / np.cosh(depth * np.arccosh((upper + lower) / (upper - lower)))
    for x in X[~np.isnan(X).all(axis=1)]:
        obs = ~np.isnan(x)
        cov_obs = cov[np.ix_(obs, obs)]
        error = np.eye(obs.sum())
        for node in nodes:
            error = error @ (np.eye(obs.sum()) - cov_obs / node)
        assert np.abs(np.linalg.eigvalsh((error + error.T) / 2)).max() <= bound + 1e-12
    # closer to the Bayes predictor than one scale (the midpoint) at the same depth
    bayes = bayes_predict(X, p["mean"], cov, p["coef"], p["intercept"])
    midpoint = analytic_network(p["mean"], cov, p["coef"], p["intercept"], depth=depth,
                                normalize="midpoint")
    assert (np.abs(_predict(network, X) - bayes).mean()
            < 0.5 * np.abs(_predict(midpoint, X) - bayes).mean())


def test_chebyshev_steps_keep_the_partial_products_bounded_in_float32(problem):
    # Depth 32 on the widest interval it is run on (kappa 459): with the largest steps
    # first the partial products grow past 1e14 on the interval, with the smallest first
    # the products of the steps left (which multiply each step's rounding errors) do; in
    # the order taken both stay below 30, and a float32 block computes what the float64
    # one does.
    depth, upper = 32, 1.0
    lower = upper / chebyshev_condition(depth)
    lam = np.linspace(lower, upper, 4001)

    def peak(steps):  # the largest partial product, and product of the steps left
        factors = 1 - steps[:, None] * lam[None, :]
        return max(np.abs(np.cumprod(factors, axis=0)).max(),
                   np.abs(np.cumprod(factors[::-1], axis=0)).max())

    steps = chebyshev_steps(lower, upper, depth)
    assert peak(steps) < 30
    assert peak(np.sort(steps)) > 1e14 and peak(np.sort(steps)[::-1]) > 1e14
    np.testing.assert_allclose(np.sort(1 / steps), np.sort(
        (upper + lower) / 2 + (upper - lower) / 2
        * np.cos(np.pi * (2 * np.arange(depth) + 1) / (2 * depth))))
    p = problem
    cov = _ill_conditioned(kappa_floor=1e-4)
    X = p["X"][:300]
    exact = _predict(_chebyshev_network(p, cov, depth), X)
    mask = np.isnan(X)
    with torch.no_grad():
        single = _chebyshev_network(p, cov, depth, torch.float32)(
            torch.as_tensor(np.where(mask, 0.0, X), dtype=torch.float32),
            torch.as_tensor(mask, dtype=torch.float32)).numpy()[:, 0]
    np.testing.assert_allclose(single, exact, rtol=0, atol=1e-3 * np.abs(exact).max())


def test_chebyshev_weights_need_one_matrix_per_iteration(problem):
    p = problem
    with pytest.raises(ValueError, match="weight_sharing='independent'"):
        set_chebyshev_weights(NeuMissBlock(D, depth=3, weight_sharing="shared", residual=True),
                              p["mean"], p["cov"])
    with pytest.raises(ValueError, match="depth 1 or more"):
        set_chebyshev_weights(NeuMissBlock(D, depth=0), p["mean"], p["cov"])
    with pytest.raises(ValueError, match="residual must be in"):
        set_chebyshev_weights(NeuMissBlock(D, depth=2, residual=True), p["mean"], p["cov"],
                              residual=1.0)
    with pytest.raises(ValueError, match="residual connection"):
        set_chebyshev_weights(NeuMissBlock(D, depth=2), p["mean"], p["cov"])
    block = NeuMissBlock(D, depth=2, residual=True)
    before = {name: value.clone() for name, value in block.state_dict().items()}
    singular = np.ones((D, D))
    with pytest.raises(ValueError, match="positive definite"):
        set_chebyshev_weights(block, p["mean"], singular)
    for name, value in block.state_dict().items():  # left as it was
        torch.testing.assert_close(value, before[name])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), depth=st.integers(1, 12), rank=st.integers(1, D),
       ridge=st.floats(1e-3, 1.0), scale=st.floats(1e-2, 1e2))
def test_any_chebyshev_block_runs_the_richardson_steps_of_its_interval(seed, depth, rank,
                                                                       ridge, scale):
    # Any positive definite covariance, any depth: the block's output is eq. 4 with the
    # Richardson steps at the Chebyshev nodes of [max(lambda_min, lambda_max / kappa_D),
    # lambda_max], iterated explicitly (in float64), in whatever order.
    rng = np.random.default_rng(seed)
    factor = rng.standard_normal((D, rank))
    cov = scale * (factor @ factor.T + ridge * np.eye(D))
    eigenvalues = np.linalg.eigvalsh(cov)
    upper = eigenvalues[-1]
    lower = max(eigenvalues[0], upper / chebyshev_condition(depth))
    k = np.arange(depth)
    nodes = (upper + lower) / 2 + (upper - lower) / 2 * np.cos(np.pi * (2 * k + 1) / (2 * depth))
    mean, coef = rng.standard_normal(D), rng.standard_normal(D)
    X = rng.multivariate_normal(mean, cov, size=50)
    X[rng.random(X.shape) < 0.4] = np.nan
    problem = {"mean": mean, "coef": coef, "intercept": 0.5}
    network = _chebyshev_network(problem, cov, depth)
    by_hand = [_richardson_per_row(x, mean, cov, coef, 0.5, 1 / nodes) for x in X]
    np.testing.assert_allclose(_predict(network, X), by_hand, rtol=1e-7,
                               atol=1e-7 * np.abs(by_hand).max())
