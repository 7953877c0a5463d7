"""The depth and head search (neumiss.network._search): the one-standard-error rule, the
chain's choice and its patience, the fine-tunes, and search_depths end to end."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from neumiss.network import (
    DEPTH_PATIENCE,
    UNTIE_ROWS_PER_PARAMETER,
    Candidate,
    MultinomialLogLoss,
    NeuMissBlock,
    NeuMissNetwork,
    Objective,
    SquaredError,
    StackedNetwork,
    TargetLoss,
    TrainingConfig,
    TrainingData,
    clearly_better,
    search_depths,
    set_analytic_weights,
    set_chebyshev_weights,
)
from neumiss.network._choice import (
    OUT_OF_FOLD_ROWS_PER_PARAMETER,
    DepthChoice,
    identity_depth,
    trains_block,
    try_identity_chain,
    worth_untying,
)
from neumiss.network._data import evaluate_loss
from neumiss.network._search import BLEND_WEIGHTS, IDENTITY_STEPS_PER_EPOCH, DepthSearch
from neumiss.network._start import (
    MIDPOINT_ROWS_PER_FEATURE,
    data_ramps,
    moment_scale,
    observed_moments,
)
from neumiss.network._stopping import ABANDON_EPOCHS, ABANDON_MARGIN, abandon_level
from neumiss.network._training import TrainingResult


def _mse(output, target):
    return (output[:, 0] - target) ** 2


class _MeanSquares(TargetLoss):
    """The squared error as a loss object that does not say so (``squared`` False): the
    linear starts are fitted iteratively, as for any other loss."""

    def __call__(self, output, target):
        return _mse(output, target)


OBJECTIVE = Objective(_MeanSquares(), lambda loss: -loss)


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=n)
    mask = rng.random(X.shape) < 0.2
    return TrainingData(torch.as_tensor(np.where(mask, 0.0, X), dtype=torch.float32),
                        torch.as_tensor(mask, dtype=torch.float32),
                        torch.as_tensor(y, dtype=torch.float32))


def _build(depth, weight_sharing, mlp_depth, mask_skip=False, n_ramps=0):
    return NeuMissNetwork(3, depth=depth, weight_sharing=weight_sharing, residual=True,
                          mlp_depth=mlp_depth, mask_skip=mask_skip, n_ramps=n_ramps)


def _candidate(depth, val_loss=1.0):
    """A candidate that was not trained: only its depth and validation loss matter."""
    return Candidate(depth, "shared", 0, None, TrainingResult(best_val_loss=val_loss), 0.0)


# ------------------------------------------------------------------ one-standard-error rule


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(3, 300), shift=st.floats(-0.5, 0.5))
def test_clearly_better_is_the_one_standard_error_rule(seed, n, shift):
    # Independent check: the paired t statistic of the per-row differences below -1.
    rng = np.random.default_rng(seed)
    reference = rng.gamma(2.0, size=n)
    losses = reference + shift + rng.normal(scale=0.5, size=n)
    t = stats.ttest_rel(losses, reference).statistic
    if abs(abs(t) - 1.0) > 1e-6:
        expected = bool(t < -1.0)
        as_tensors = torch.as_tensor(losses), torch.as_tensor(reference)
        assert clearly_better(*as_tensors) == expected
        # Equal case weights of any scale change nothing.
        assert clearly_better(*as_tensors, torch.full((n,), 3.5)) == expected


def test_clearly_better_needs_more_than_a_chance_gain():
    rng = np.random.default_rng(0)
    reference = torch.as_tensor(rng.gamma(2.0, size=40))
    noise = torch.as_tensor(rng.normal(scale=1.0, size=40))
    noisy_gain = reference - 0.02 + noise - noise.mean()  # 0.02 lower on average
    assert noisy_gain.mean() < reference.mean() and not clearly_better(noisy_gain, reference)
    assert clearly_better(reference - 0.02, reference)  # the same gain on every row
    # A zero-weight row does not count.
    worse_on_one = reference - 0.1
    worse_on_one[0] += 100.0
    weight = torch.ones(40)
    assert not clearly_better(worse_on_one, reference)
    weight[0] = 0.0
    assert clearly_better(worse_on_one, reference, weight)


def test_float32_rounding_is_never_clearly_better():
    # The same losses computed twice in float32 differ by rounding alone: no gain, even
    # when every row's difference happens to be negative.
    reference = torch.as_tensor(np.random.default_rng(1).gamma(2.0, size=500), dtype=torch.float32)
    rounded = reference * (1 - 2e-7)
    assert (rounded < reference).all() and not clearly_better(rounded, reference)
    assert clearly_better(reference * (1 - 1e-4), reference)  # a real gain, however small


# ------------------------------------------------------------------ the chain's choice


def test_a_deeper_depth_replaces_the_best_only_when_clearly_better():
    rng = np.random.default_rng(0)
    reference = torch.as_tensor(rng.gamma(2.0, size=50))
    noise = torch.as_tensor(rng.normal(scale=1.0, size=50))
    choice = DepthChoice()
    assert choice.offer(_candidate(0), reference)
    assert choice.best.depth == 0
    assert choice.offer(_candidate(1), reference - 0.02 + noise - noise.mean())
    assert choice.best.depth == 0  # a chance gain
    assert choice.offer(_candidate(2), reference - 0.5)
    assert choice.best.depth == 2


def test_the_chain_stops_after_patience_depths_that_do_not_replace_the_best():
    losses = torch.linspace(1.0, 2.0, 30)
    choice = DepthChoice()
    choice.offer(_candidate(0), losses)
    assert all(choice.offer(_candidate(k), losses + 1.0) for k in range(1, DEPTH_PATIENCE))
    assert choice.offer(_candidate(8), losses - 1.0)  # a replacement counts anew
    verdicts = [choice.offer(_candidate(9 + k), losses) for k in range(DEPTH_PATIENCE)]
    assert verdicts == [True] * (DEPTH_PATIENCE - 1) + [False]
    assert choice.best.depth == 8


def test_without_validation_rows_a_lower_loss_replaces_the_best():
    choice = DepthChoice()
    choice.offer(_candidate(0, val_loss=1.0), None)
    choice.offer(_candidate(1, val_loss=0.999), None)
    assert choice.best.depth == 1
    choice.offer(_candidate(2, val_loss=0.999), None)
    assert choice.best.depth == 1


def test_zero_weight_validation_rows_do_not_count_in_the_choice():
    reference = torch.linspace(1.0, 2.0, 40).double()
    worse_on_one = reference - 0.1
    worse_on_one[0] += 100.0
    weight = torch.ones(40)
    weight[0] = 0.0
    for weights, replaced in ((None, False), (weight, True)):
        choice = DepthChoice(weights)
        choice.offer(_candidate(0), reference)
        choice.offer(_candidate(1), worse_on_one)
        assert (choice.best.depth == 1) == replaced


def test_untying_needs_an_iteration_and_enough_rows_per_parameter():
    needed = UNTIE_ROWS_PER_PARAMETER * (2 + 1) * 4**2
    assert worth_untying(2, 4, needed) and not worth_untying(2, 4, needed - 1)
    assert not worth_untying(1, 4, 10**9)


# ------------------------------------------------------------------ training the candidates


def test_a_fine_tune_is_kept_when_it_is_better():
    search = DepthSearch(_build, _data(160, 0), _data(60, 1), OBJECTIVE, seed=0)
    config = TrainingConfig(max_epochs=3)
    best = search.fit(1, "shared", 2, None, config)
    kept, summary = search.fine_tune(best, "shared", 0, config)
    assert summary["epochs"] >= 1
    assert (kept is not best) == (summary["val_loss"] < best.val_loss)
    assert kept.mlp_depth == (0 if kept is not best else 2)
    if kept is not best:
        assert kept.result.best_val_loss == summary["val_loss"]
        assert all(member.skip is None for member in kept.network.networks())


def test_candidates_start_from_the_same_seeds():
    search = DepthSearch(_build, _data(160, 0), _data(60, 1), OBJECTIVE, seed=3, n_members=2)
    config = TrainingConfig(max_epochs=2)
    first, again = (search.fit(2, "shared", 0, None, config) for _ in range(2))
    for (name, value), other in zip(first.network.state_dict().items(),
                                    again.network.state_dict().values()):
        torch.testing.assert_close(value, other, rtol=0, atol=0, msg=name)
    assert first.result.history == again.result.history


def test_member_k_starts_its_head_from_seed_plus_k_and_the_block_from_member_0():
    search = DepthSearch(_build, _data(160, 0), None, OBJECTIVE, seed=3, n_members=3)
    members = search.members(2, "shared", 2, None).networks()
    for k, member in enumerate(members):
        alone = _build(2, "shared", 2)
        alone.reset_parameters(torch.Generator().manual_seed(3 + k))
        first = _build(2, "shared", 2)
        first.reset_parameters(torch.Generator().manual_seed(3))
        expected = {**alone.state_dict(),
                    **{f"block.{n}": v for n, v in first.block.state_dict().items()}}
        for name, value in member.state_dict().items():
            torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)


def test_the_data_start_sets_every_new_block_and_a_fine_tune_keeps_the_trained_one():
    data = _data(400, 0)
    mean, cov = observed_moments(data)
    search = DepthSearch(_build, data, None, OBJECTIVE, seed=0, n_members=2,
                         moments=(mean, cov))
    started = search.members(3, "shared", 0, None).networks()
    expected = _build(3, "shared", 0)
    set_analytic_weights(expected.block, mean, cov, normalize=True)
    for member in started:
        for (name, value), other in zip(member.block.state_dict().items(),
                                        expected.block.state_dict().values()):
            torch.testing.assert_close(value, other, msg=name)
    trained = search.fit(3, "shared", 0, None, TrainingConfig(max_epochs=2))
    tuned = search.members(3, "independent", 0, trained.network).networks()
    torch.testing.assert_close(tuned[1].block.neumann_layers[0],
                               trained.network.networks()[1].block.neumann_layers[0])


@pytest.mark.parametrize("better", [False, True])
def test_search_depths_trains_deeper_while_depths_replace_the_best(monkeypatch, better):
    monkeypatch.setattr("neumiss.network._choice.clearly_better", lambda *args: better)
    depths = [0, 1, 2, 3, 4]
    result = search_depths(_build, depths, "shared", [0], _data(160, 0), _data(60, 1),
                           OBJECTIVE, TrainingConfig(max_epochs=3, learning_rate=0.05), seed=0,
                           n_members=2)
    trained = depths if better else depths[: 1 + DEPTH_PATIENCE]
    assert list(result.depth_results) == trained
    assert result.best.depth == trained[-1 if better else 0]
    assert result.best.network.n_members == 2
    assert result.untied is None and result.heads == {}


def test_a_moments_start_is_solved_once_whatever_the_head_depth(monkeypatch):
    import neumiss.network._start as start_module

    train, val = _correlated(400, 0, 0.9), _correlated(200, 1, 0.9)
    solves = []
    solve = start_module.lbfgs
    monkeypatch.setattr(start_module, "lbfgs",
                        lambda *args, **kwargs: solves.append(1) or solve(*args, **kwargs))

    def search():
        return DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                           moments=observed_moments(train))

    cached = search()
    linear, mlp = (cached.members(3, "shared", head, None) for head in (0, 2))
    assert len(solves) == 1  # the MLP heads' skip reuses the linear heads' solution
    fresh = search().members(3, "shared", 2, None)
    assert len(solves) == 2
    for one, other, alone in zip(linear.networks(), mlp.networks(), fresh.networks()):
        torch.testing.assert_close(other.skip.weight, alone.skip.weight)
        torch.testing.assert_close(other.head[-1].bias, alone.head[-1].bias)
        torch.testing.assert_close(one.head[-1].weight, alone.skip.weight)
        torch.testing.assert_close(one.head[-1].bias, alone.head[-1].bias)


# ------------------------------------------------------------------ the linear head at depth 0


def test_at_depth_0_the_linear_head_is_the_ridge_fit_on_the_block_untrained():
    from sklearn.linear_model import Ridge, RidgeCV

    from neumiss.network._ridge import RIDGE_PENALTIES

    objective = Objective(SquaredError(), lambda loss: -loss)
    train, val = _data(300, 0), _data(150, 1)
    # each member on all but its fold, as out of fold
    folds = torch.arange(300) % 2
    train = dataclasses.replace(train, member_weight=torch.stack(
        [folds != 0, folds != 1], dim=1).float())
    search = DepthSearch(_build, train, val, objective, seed=0, n_members=2,
                         moments=observed_moments(train))
    trained = search.fit(0, "shared", 2, None, TrainingConfig(max_epochs=3))
    _, summary = search.fitted_linear_head(trained)
    fitted = search.members(0, "shared", 0, trained.network, refit_linear=True)  # its heads
    assert (fitted.depth, summary["epochs"]) == (0, 0)
    with torch.no_grad():
        features = trained.network.block(train.x, train.mask).double().numpy()
        output = fitted(val.x, val.mask)
    alpha = RidgeCV(alphas=RIDGE_PENALTIES).fit(features, train.target.double().numpy()).alpha_
    assert summary["val_loss"] == pytest.approx(float(_mse(output, val.target).mean()), rel=1e-5)
    for k, (member, before) in enumerate(zip(fitted.networks(), trained.network.networks())):
        torch.testing.assert_close(member.block.mu, before.block.mu)  # the block it keeps
        # sum_i w_ik (y_i - f_i . beta - b)^2 + alpha |beta|^2, by sklearn, alpha chosen by
        # leave-one-out error on all the training rows
        ridge = Ridge(alpha=alpha).fit(
            features, train.target.double().numpy(), sample_weight=train.member_weight[:, k])
        np.testing.assert_allclose(member.head[-1].weight.detach().numpy()[0], ridge.coef_,
                                   rtol=1e-4, atol=1e-5)
        assert float(member.head[-1].bias.detach()) == pytest.approx(ridge.intercept_, abs=1e-5)


@pytest.mark.parametrize("nonlinear", [False, True])
@pytest.mark.parametrize("out_of_fold", [False, True])
def test_the_blend_kept_has_the_weight_of_lowest_validation_loss(nonlinear, out_of_fold):
    # y = 2 x0 x1 + x2: the MLP head learns what no linear head fits; on a linear target
    # it has little to add. Each weight's blend scored as a network, apart.
    def rows(n, seed):
        data = _data(n, seed)
        if not nonlinear:
            return data
        x = data.x.double()
        return dataclasses.replace(data, target=(2 * x[:, 0] * x[:, 1] + x[:, 2]).float())

    objective = Objective(SquaredError(), lambda loss: -loss)
    train, val = rows(600, 0), rows(300, 1)
    if out_of_fold:  # every row validates, scored by the member that held it out
        held_out_by = torch.arange(600) % 2
        train = dataclasses.replace(train, member_weight=torch.stack(
            [held_out_by != 0, held_out_by != 1], dim=1).float())
        val = dataclasses.replace(train, member_weight=None, held_out_by=held_out_by)
    search = DepthSearch(_build, train, val, objective, seed=0, n_members=2,
                         moments=observed_moments(train))
    trained = search.fit(0, "shared", 2, None,
                         TrainingConfig(max_epochs=40, learning_rate=0.02))
    linear = search.members(0, "shared", 0, trained.network, refit_linear=True)
    losses = [evaluate_loss(trained.network.blended_with(linear, weight), val, objective.loss)
              for weight in BLEND_WEIGHTS]
    kept, summary = search.fitted_linear_head(trained)
    weight = summary["mlp_weight"]
    assert losses[BLEND_WEIGHTS.index(weight)] == pytest.approx(min(losses), rel=3e-6)
    assert kept.val_loss == pytest.approx(min(losses), rel=1e-5)
    if max(losses) <= min(losses) * (1 + 1e-6):  # one function: the most linear blend
        assert weight == 0.0
    assert search.blend_weight(trained.network, linear, chunk=7) == weight  # in chunks
    if nonlinear:
        assert weight > 0.5
    else:  # the MLP heads have little to add: the linear heads within 0.5% of the best blend
        assert losses[0] <= min(losses) * 1.005
    assert summary["epochs"] == 0 and summary["val_loss"] == pytest.approx(losses[0], rel=1e-5)
    if weight == 0.0:
        assert kept.mlp_depth == 0
    elif weight == 1.0:
        assert kept is trained
    else:  # the MLP heads' shape, and their training
        assert kept.mlp_depth == 2 and kept.result.n_epochs == trained.result.n_epochs
        assert kept.mlp_weight == weight


def test_search_depths_fits_the_linear_head_at_depth_0_and_fine_tunes_it_deeper(monkeypatch):
    def nonlinear(n, seed):  # y = x0 x1 + x2: the MLP head learns, its MLP moves from 0
        data = _data(n, seed)
        x = data.x.double()
        return dataclasses.replace(data, target=(x[:, 0] * x[:, 1] + x[:, 2]).float())

    calls = []
    for name in ("fitted_linear_head", "fine_tune"):
        method = getattr(DepthSearch, name)
        monkeypatch.setattr(DepthSearch, name, lambda self, best, *args, name=name, method=method:
                            calls.append((name, best.depth)) or method(self, best, *args))
    for depth in (0, 2):
        result = search_depths(_build, [depth], "shared", [2, 0], nonlinear(400, 0),
                               nonlinear(200, 1), OBJECTIVE,
                               TrainingConfig(max_epochs=3, learning_rate=0.02), seed=0,
                               n_members=2)
        assert list(result.heads) == [0]
    assert calls == [("fitted_linear_head", 0), ("fine_tune", 2)]


# ------------------------------------------------------------------ screening the depths


def _correlated(n, seed, rho):
    """Three features of correlation ``rho``, y = x0 + x1 / 2 + x2 / 4 + noise, 40% MCAR:
    where ``rho`` is large the conditional expectation recovers much of a missing entry."""
    rng = np.random.default_rng(seed)
    cov = np.full((3, 3), rho) + (1.0 - rho) * np.eye(3)
    X = rng.multivariate_normal(np.zeros(3), cov, size=n)
    y = X @ [1.0, 0.5, 0.25] + 0.1 * rng.normal(size=n)
    mask = rng.random(X.shape) < 0.4
    return TrainingData(torch.as_tensor(np.where(mask, 0.0, X), dtype=torch.float32),
                        torch.as_tensor(mask, dtype=torch.float32),
                        torch.as_tensor(y, dtype=torch.float32))


@pytest.mark.parametrize("val_rho, n_val, deeper_kept",
                         [(0.9, 400, True), (-0.45, 400, False), (0.6, 60, False)])
def test_screen_trains_a_deeper_depth_only_when_its_start_validates_clearly_better(
        val_rho, n_val, deeper_kept):
    # Training rows of correlation 0.9: the depth-3 block imputes a missing entry from
    # the observed ones. Validation rows alike (it helps), of negative correlation (it
    # imputes the wrong sign: mean imputation validates better), or few and of weaker
    # correlation (it validates better, but within a standard error).
    train, val = _correlated(800, 0, 0.9), _correlated(n_val, 1, val_rho)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))
    rows = {}
    for depth in (0, 3):  # the losses of each data start, computed here from its outputs
        network = search.members(depth, "shared", 0, None)
        with torch.no_grad():
            rows[depth] = _mse(network(val.x, val.mask), val.target).double().numpy()
    expected = {depth: float(losses.mean()) for depth, losses in rows.items()}
    difference = rows[3] - rows[0]
    standard_error = difference.std() / np.sqrt(n_val - 1)
    kept, starts = search.screen([0, 3], "shared")
    assert kept == ([0, 3] if deeper_kept else [0])
    assert bool(difference.mean() + standard_error < 0) is deeper_kept
    if val_rho == 0.6:  # lower, but not clearly: not trained
        assert expected[3] < expected[0]
    for depth in (0, 3):
        assert starts[depth]["val_loss"] == pytest.approx(expected[depth], rel=1e-5)
        assert starts[depth]["val_score"] == pytest.approx(-expected[depth], rel=1e-5)


# validation rows unlike the training rows: the trained networks may validate worse than a constant
@pytest.mark.filterwarnings("ignore::neumiss.network.DivergenceWarning")
@pytest.mark.parametrize("val_rho", [0.9, -0.45])
def test_search_depths_trains_only_the_screened_depths(val_rho):
    train, val = _correlated(400, 0, 0.9), _correlated(200, 1, val_rho)
    arguments = (_build, [0, 3], "shared", [0], train, val, OBJECTIVE,
                 TrainingConfig(max_epochs=1), 0)
    screened = search_depths(*arguments, n_members=2, screen_depths=True)
    assert list(screened.starts) == [0, 3]
    better = screened.starts[3]["val_loss"] < screened.starts[0]["val_loss"]
    assert better is (val_rho > 0)
    assert list(screened.depth_results) == ([0, 3] if val_rho > 0 else [0])
    # without screening every depth trains (the chain's own rule decides), and no start
    # is reported; nor without validation rows, where there is nothing to compare on
    assert list(search_depths(*arguments, n_members=2).depth_results) == [0, 3]
    assert search_depths(*arguments, n_members=2).starts is None
    alone = search_depths(_build, [0, 3], "shared", [0], train, None, OBJECTIVE,
                          TrainingConfig(max_epochs=1), 0, n_members=2, screen_depths=True)
    assert alone.starts is None and list(alone.depth_results) == [0, 3]


def test_the_search_abandons_a_candidate_far_behind_the_lowest_loss_it_has_seen():
    # The search records the lowest validation loss of the starts it screened and of the
    # candidates it trained, and a candidate far behind it (here: a loss set far below
    # any it can reach) stops after ABANDON_EPOCHS epochs, where patience trains it on.
    train, val = _correlated(400, 0, 0.9), _correlated(200, 1, 0.9)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))
    search.mask_term_helps()  # starts of a term's decision are not networks it returns:
    assert search.best_loss == math.inf  # a single depth asked for is never abandoned
    _, starts = search.screen([0, 3], "shared")
    assert search.best_loss == min(start["val_loss"] for start in starts.values())
    config = TrainingConfig(max_epochs=8, patience=8)
    patient = search.fit(3, "shared", 2, None, config)
    assert patient.result.n_epochs == 8
    assert search.best_loss == min(patient.val_loss, *(s["val_loss"] for s in starts.values()))
    constant = float(((val.target - train.target.mean()) ** 2).mean())
    search.best_loss = 0.01 * patient.val_loss
    assert abandon_level(search.best_loss, constant) < patient.val_loss
    abandoned = search.fit(3, "shared", 2, None, config)
    assert abandoned.result.n_epochs == ABANDON_EPOCHS


# ------------------------------------------------------------------ the mask's own term


def _self_masked(n, seed):
    """y = x0 + x1 + noise, x0 missing where it is above 0.5 (self-masking): mean
    imputation misses what the mask says of y."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=n)
    mask = np.zeros(X.shape, dtype=bool)
    mask[:, 0] = X[:, 0] > 0.5
    return TrainingData(torch.as_tensor(np.where(mask, 0.0, X), dtype=torch.float32),
                        torch.as_tensor(mask, dtype=torch.float32),
                        torch.as_tensor(y, dtype=torch.float32))


@pytest.mark.parametrize("informative", [False, True])
def test_mask_term_helps_compares_the_linear_starts_with_and_without_the_mask(informative):
    make = _self_masked if informative else _data
    train, val = make(600, 0), make(300, 1)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))
    losses = {}
    for mask_skip in (False, True):  # what the method compares, computed here by hand
        search.mask_skip = mask_skip
        network = search.members(0, "shared", 0, None)
        with torch.no_grad():
            losses[mask_skip] = _mse(network(val.x, val.mask), val.target)
    expected = clearly_better(losses[True], losses[False])
    assert search.mask_term_helps() is expected is informative
    assert search.mask_skip is informative
    # the networks it then builds have the term (zero-initialised, then fitted) or not
    network = search.members(2, "shared", 0, None).networks()[0]
    assert (network.mask_skip is not None) is informative


def test_the_decisions_and_the_screen_compute_each_start_once(monkeypatch):
    # The mask's decision compares depth 0's starts without and with the term; the screen
    # then needs depth 0's start with the term as decided (the same losses, not built
    # again) and depth 3's.
    train, val = _self_masked(600, 0), _self_masked(300, 1)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))
    built = []
    members = search.members
    monkeypatch.setattr(search, "members", lambda depth, *rest: built.append(depth)
                        or members(depth, *rest))
    assert search.mask_term_helps()
    decided = search.start_losses(0, "shared")[0]
    kept, starts = search.screen([0, 3], "shared")
    assert built == [0, 0, 3]
    assert starts[0]["val_loss"] == pytest.approx(float(decided.mean()))
    search.screen([0, 3], "shared")  # asked again: nothing is built
    assert built == [0, 0, 3]


def _bent(n, seed):
    """y = |2 x0| + x1 + noise: a target that bends with a feature."""
    data = _data(n, seed)
    x = torch.where(data.mask > 0, torch.zeros_like(data.x), data.x)
    return dataclasses.replace(data, target=(2 * x[:, 0]).abs() + x[:, 1])


@pytest.mark.parametrize("depth", [0, 4])
@pytest.mark.parametrize("bent", [False, True])
def test_spline_term_helps_compares_the_linear_starts_at_the_depth_asked(bent, depth):
    make = _bent if bent else _data
    train, val = make(600, 0), make(300, 1)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train), ramps=data_ramps(train))
    losses = {}
    for spline in (False, True):  # what the method compares, computed here by hand
        search.spline = spline
        network = search.members(depth, "shared", 0, None)
        assert network.depth == depth
        with torch.no_grad():
            losses[spline] = _mse(network(val.x, val.mask), val.target)
    expected = clearly_better(losses[True], losses[False])
    assert search.spline_term_helps(depth, "shared") is expected is bent
    network = search.members(depth, "shared", 2, None).networks()[0]
    assert (network.spline is not None) is bent
    if bent:  # the MLP reads the ramps beside the block's output
        assert network.head[0].in_features == 3 + network.encoding.n_ramps


@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("validated", [True, False])
@pytest.mark.parametrize("depths", [[0], [0, 4]])
def test_auto_spline_asks_the_start_only_when_a_deeper_block_is_to_train(
        monkeypatch, depths, validated, multiclass):
    # depth 0 alone: the term is added unasked (a multiclass loss asks its start still);
    # with a deeper block the linear start at the deepest depth decides (here: says no);
    # without validation rows "auto" adds nothing
    train, val = _data(600, 0), _data(300, 1)
    objective = Objective(MultinomialLogLoss(3), lambda loss: -loss) if multiclass else OBJECTIVE
    search = DepthSearch(_build, train, val if validated else None, objective, seed=0,
                         n_members=2, moments=observed_moments(train), ramps=data_ramps(train))
    asked = []
    monkeypatch.setattr(search, "spline_term_helps",
                        lambda depth, weight_sharing: asked.append(depth) or False)
    kept, starts = search.decide(depths, "shared", False, "auto", screen=False)
    assert kept == depths and starts is None
    unasked = depths == [0] and not multiclass
    assert search.spline is (validated and unasked)
    assert asked == ([depths[-1]] if validated and not unasked else [])
    forced = DepthSearch(_build, train, None, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train), ramps=data_ramps(train))
    forced.decide(depths, "shared", False, True, screen=False)
    assert forced.spline is True


def test_a_start_fitted_again_with_other_terms_computes_its_block_once(monkeypatch):
    # The spline's decision fits the screen's start again with the ramps: the block, started
    # alike, is run once on the linear fit's rows; the linear parts are those a search
    # computing everything anew fits (the squared loss's ridge: no start to depend on).
    train, val = _bent(600, 0), _bent(300, 1)
    objective = Objective(SquaredError(), lambda loss: -loss)

    def search():
        return DepthSearch(_build, train, val, objective, seed=0, n_members=2,
                           moments=observed_moments(train), ramps=data_ramps(train))

    def heads(network):
        return {name: value.clone() for name, value in network.heads.items()}

    runs = []
    forward = NeuMissBlock.forward
    monkeypatch.setattr(NeuMissBlock, "forward", lambda block, x, *rest: (
        runs.append(block.depth) if len(x) == len(train) else None) or forward(block, x, *rest))
    cached = search()
    fitted = {}
    for depth, spline in [(4, False), (4, True), (0, True), (4, True), (4, False)]:
        cached.spline = spline
        fitted[depth, spline] = heads(cached.members(depth, "shared", 0, None))
    assert runs == [4, 0]  # depth 4's block once for both terms; depth 0's once
    for (depth, spline), weights in fitted.items():  # against searches that share nothing
        fresh = search()
        fresh.spline = spline
        expected = heads(fresh.members(depth, "shared", 0, None))
        assert weights.keys() == expected.keys()
        assert all(torch.equal(weights[name], expected[name]) for name in weights)


@pytest.mark.parametrize("mask_skip", [False, True, "auto"])
def test_search_depths_reports_whether_the_networks_see_the_mask(mask_skip):
    train, val = _self_masked(400, 0), _self_masked(200, 1)
    result = search_depths(_build, [0], "shared", [0], train, val, OBJECTIVE,
                           TrainingConfig(max_epochs=2), seed=0, mask_skip=mask_skip)
    assert result.mask_skip is (mask_skip is not False)
    assert (result.best.network.networks()[0].mask_skip is not None) is result.mask_skip
    # without validation rows there is nothing to decide on: "auto" leaves the mask out
    alone = search_depths(_build, [0], "shared", [0], train, None, OBJECTIVE,
                          TrainingConfig(max_epochs=2), seed=0, mask_skip=mask_skip)
    assert alone.mask_skip is (mask_skip is True)


@pytest.mark.parametrize("extra_rows, scale", [(-1, "radius"), (0, "midpoint")])
def test_a_new_depth_starts_at_the_scale_the_rows_per_feature_call_for(extra_rows, scale):
    # 3 features: the midpoint from MIDPOINT_ROWS_PER_FEATURE * 3 training rows.
    n_rows = MIDPOINT_ROWS_PER_FEATURE * 3 + extra_rows
    train = _data(n_rows, 0)
    mean, cov = observed_moments(train)
    search = DepthSearch(_build, train, None, OBJECTIVE, seed=0, n_members=2,
                         moments=(mean, cov))
    started = search.members(3, "shared", 0, None).networks()[0]
    expected = _build(3, "shared", 0)
    set_analytic_weights(expected.block, mean, cov, normalize=scale)
    assert moment_scale(n_rows, 3) == scale
    for (name, value), other in zip(started.block.state_dict().items(),
                                    expected.block.state_dict().values()):
        torch.testing.assert_close(value, other, msg=name)


# ------------------------------------------------------------------ a start that training kept


def test_an_mlp_whose_last_layer_is_zero_adds_nothing_and_becomes_the_linear_head():
    train, val = _data(200, 0), _data(80, 1)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))
    started = search.members(2, "shared", 2, None)  # data start: the MLP's last layer at 0
    assert started.mlp_is_zero()
    assert not search.members(2, "shared", 0, None).mlp_is_zero()  # no MLP at all
    candidate = Candidate(2, "shared", 2, started, TrainingResult(best_val_loss=0.5), 1.0)
    linear, summary = search.as_linear_head(candidate)
    assert linear.mlp_depth == 0 and all(m.skip is None for m in linear.network.networks())
    assert summary["epochs"] == 0 and summary["seconds"] == 0.0
    with torch.no_grad():  # the same function
        torch.testing.assert_close(linear.network(val.x, val.mask), started(val.x, val.mask))
    members = started.networks()
    with torch.no_grad():
        members[1].head[-1].weight[0, 0] = 1e-6
    assert not StackedNetwork(members, "mean").mlp_is_zero()


def test_search_depths_adopts_the_linear_head_untrained_when_the_mlp_kept_its_start(
    monkeypatch
):
    trained = []

    def keeps_the_start(network, *args, **kwargs):  # training that never beats the start
        trained.append(network)
        return TrainingResult(best_val_loss=0.5, best_epoch=0, n_epochs=3)

    monkeypatch.setattr("neumiss.network._search.train", keeps_the_start)
    train, val = _data(200, 0), _data(80, 1)
    result = search_depths(_build, [2], "shared", [2, 0], train, val, OBJECTIVE,
                           TrainingConfig(max_epochs=3), seed=0, n_members=2)
    assert len(trained) == 1  # the MLP candidate only: no fine-tune of the linear head
    assert result.best.mlp_depth == 0 and result.heads[0]["epochs"] == 0


# ------------------------------------------------------------------ the Chebyshev start


@pytest.mark.parametrize("extra_rows, scale", [(-1, "radius"), (0, "chebyshev")])
def test_a_block_with_a_matrix_per_iteration_starts_at_chebyshev_steps(extra_rows, scale):
    n_rows = MIDPOINT_ROWS_PER_FEATURE * 3 + extra_rows
    train = _data(n_rows, 0)
    mean, cov = observed_moments(train)
    search = DepthSearch(_build, train, None, OBJECTIVE, seed=0, moments=(mean, cov))
    started = search.members(4, "independent", 0, None).networks()[0]
    expected = _build(4, "independent", 0)
    if scale == "chebyshev":
        set_chebyshev_weights(expected.block, mean, cov)
    else:
        set_analytic_weights(expected.block, mean, cov, normalize=scale)
    assert moment_scale(n_rows, 3, "independent") == scale
    for (name, value), other in zip(started.block.state_dict().items(),
                                    expected.block.state_dict().values()):
        torch.testing.assert_close(value, other, msg=name)


@pytest.mark.parametrize("trained_loss, kept", [(10.0, "chebyshev"), (0.0, "trained")])
def test_search_depths_keeps_the_chebyshev_start_when_it_validates_better(
    monkeypatch, trained_loss, kept
):
    def trains_to(network, *args, **kwargs):  # training that ends at a given loss
        return TrainingResult(best_val_loss=trained_loss, best_epoch=1, n_epochs=2)

    monkeypatch.setattr("neumiss.network._search.train", trains_to)
    train, val = _data(MIDPOINT_ROWS_PER_FEATURE * 3, 0), _data(100, 1)
    result = search_depths(_build, [0, 4], "auto", [0], train, val, OBJECTIVE,
                           TrainingConfig(max_epochs=2), seed=0, n_members=2)
    tried = result.chebyshev
    assert tried["epochs"] == 0 and 0 < tried["val_loss"] < 10.0
    assert tried["val_score"] == -tried["val_loss"]
    if kept == "trained":
        assert result.best.weight_sharing == "shared" and result.best.val_loss == 0.0
        return
    best = result.best
    assert (best.depth, best.weight_sharing, best.mlp_depth) == (4, "independent", 0)
    assert best.result.n_epochs == 0 and best.val_loss == tried["val_loss"]
    expected = _build(4, "independent", 0)
    set_chebyshev_weights(expected.block, *observed_moments(train))
    for (name, value), other in zip(best.network.networks()[0].block.state_dict().items(),
                                    expected.block.state_dict().values()):
        torch.testing.assert_close(value, other, msg=name)
    # its heads are the ridge fits on that block's output, the validation loss theirs
    with torch.no_grad():
        outputs = best.network(val.x, val.mask)[:, 0]
    assert float(((outputs - val.target) ** 2).mean()) == pytest.approx(tried["val_loss"],
                                                                         rel=1e-5)


def test_the_chebyshev_start_is_tried_only_where_the_covariance_is_well_estimated():
    rows = MIDPOINT_ROWS_PER_FEATURE * 3
    train, val = _data(rows, 0), _data(100, 1)
    config = TrainingConfig(max_epochs=1)

    def tried(depths=(0, 4), weight_sharing="auto", train=train, val=val, data_start=True):
        return search_depths(_build, list(depths), weight_sharing, [0], train, val,
                             OBJECTIVE, config, seed=0, data_start=data_start).chebyshev

    assert tried() is not None
    assert tried(train=_data(rows - 1, 0)) is None  # too few rows per feature
    assert tried(weight_sharing="shared") is None  # the user's weight mode
    assert tried(depths=(0, 1)) is None  # no iteration
    assert tried(val=None) is None  # nothing to decide on
    assert tried(data_start=False) is None  # no moments


# ------------------------------------------------------------------ the chain from the identity


def test_the_identity_chain_is_tried_when_the_mask_tells_the_target_and_a_block_iterates():
    # the deepest block the search trained, whichever depth it chose
    val, moments = _data(20, 1), object()
    assert try_identity_chain(16, True, val, moments)
    assert try_identity_chain(2, True, val, moments)
    assert not try_identity_chain(16, False, val, moments)  # mask term not kept
    assert not try_identity_chain(0, True, val, moments)  # no iteration trained
    assert not try_identity_chain(16, True, None, moments)  # nothing to decide
    assert not try_identity_chain(16, True, val, None)  # already from identity



def test_the_identity_chain_goes_to_the_deepest_block_not_far_behind_the_chosen_one():
    # far behind: a validation loss above (1 + ABANDON_MARGIN) times the chosen one's
    def results(**losses):
        return {int(depth[1:]): {"val_loss": loss} for depth, loss in losses.items()}

    chosen = _candidate(0, val_loss=0.5)
    assert identity_depth(chosen, results(d0=0.5, d4=0.55, d16=0.9)) == 4
    assert identity_depth(chosen, results(d0=0.5, d16=0.5 * (1 + ABANDON_MARGIN))) == 16
    assert identity_depth(chosen, results(d0=0.5, d16=0.7)) == 0  # no chain then
    deep = _candidate(16, val_loss=0.4)
    assert identity_depth(deep, results(d0=0.6, d16=0.4)) == 16

@pytest.mark.parametrize("batch_size", [None, 24])
def test_the_identity_chain_trains_powers_of_two_from_the_identity_on_small_batches(
        monkeypatch, batch_size):
    train, val = _self_masked(2560, 0), _self_masked(200, 1)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train), mask_skip=True)
    config = TrainingConfig(max_epochs=2, batch_size=batch_size)
    fits = []
    original = DepthSearch.fit

    def fit(self, depth, weight_sharing, mlp_depth, start_from, config, from_data=True):
        fitted = original(self, depth, weight_sharing, mlp_depth, start_from, config, from_data)
        fits.append((depth, from_data, config.batch_size, fitted.result.n_epochs))
        assert "mask_skip__weight" not in fitted.network.heads  # the paper's network
        return fitted

    monkeypatch.setattr(DepthSearch, "fit", fit)
    monkeypatch.setattr(DepthSearch, "start", lambda *a: pytest.fail("moments start used"))
    search.best_loss = 1e-9  # far below anything: a data-started candidate is abandoned
    unbeatable = _candidate(0, val_loss=-1.0)  # the chain goes to the depth given
    kept, summaries = search.identity_chain(unbeatable, 6, "shared", 0, config)
    expected_batch = batch_size or 2560 // IDENTITY_STEPS_PER_EPOCH  # 40 rows
    assert [f[:3] for f in fits] == [(d, False, expected_batch) for d in (0, 2, 4, 6)]
    assert all(epochs == 2 for *_, epochs in fits)  # never abandoned for best_loss
    assert list(summaries) == [0, 2, 4, 6]
    assert kept is unbeatable  # kept only when it validates better
    assert search.mask_skip  # as before


def test_out_of_fold_the_block_trains_with_rows_enough_for_its_parameters():
    """Held out (or without validation rows) the block always trains; out of fold only on
    :data:`OUT_OF_FOLD_ROWS_PER_PARAMETER` rows per parameter it holds: at depth 0 its
    means and mixing matrix, d (d + 1); deeper with one shared matrix, S0 too: 3 d^2 + d."""
    rows = _self_masked(40, 0)
    held_out = dataclasses.replace(rows, held_out_by=torch.arange(40) % 2)
    for depth, n_parameters in ((0, 4 * 5), (4, 3 * 16 + 4)):
        block = NeuMissNetwork(4, depth=depth, weight_sharing="shared").block
        least = OUT_OF_FOLD_ROWS_PER_PARAMETER * n_parameters
        assert trains_block(None, block, 1) and trains_block(rows, block, 1)
        assert not trains_block(held_out, block, least - 1)
        assert trains_block(held_out, block, least)


def test_a_block_of_depth_0_started_from_the_moments_never_trains():
    """The data start's block of depth 0 (the order-0 estimate from the moments) stays as
    started, held out or not, while deeper data starts and the chain from the identity
    (``from_data=False``) train theirs; a training leaves the frozen block as it was."""
    train, val = _self_masked(400, 0), _self_masked(200, 1)
    assert not trains_block(None, NeuMissNetwork(4, depth=0).block, 10**6, from_moments=True)
    assert trains_block(None, NeuMissNetwork(4, depth=2).block, 1, from_moments=True)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train))

    def trains(depth, from_data=True):
        block = search.members(depth, "shared", 0, None, from_data=from_data).block
        return {p.requires_grad for p in block.parameters()}

    assert trains(0) == {False} and trains(2) == {True}
    assert trains(0, from_data=False) == {True}
    started = search.members(0, "shared", 0, None).block.state_dict()
    trained = search.fit(0, "shared", 0, None, TrainingConfig(max_epochs=3))
    for name, value in trained.network.block.state_dict().items():
        torch.testing.assert_close(value, started[name], rtol=0, atol=0, msg=name)


def test_out_of_fold_member_weights_stay_in_the_identity_chain(monkeypatch):
    """Members held out of their validation fold keep out of it in the chain too."""
    train, val = _self_masked(400, 0), _self_masked(400, 0)
    held_out_by = torch.arange(400) % 2
    train = dataclasses.replace(train, member_weight=torch.stack(
        [held_out_by != 0, held_out_by != 1], dim=1).float())
    val = dataclasses.replace(val, held_out_by=held_out_by)
    search = DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                         moments=observed_moments(train), mask_skip=True)
    seen = []
    original = DepthSearch.fit

    def fit(self, *args, **kwargs):
        seen.append(self.train_data.member_weight)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DepthSearch, "fit", fit)
    search.identity_chain(_candidate(2, val_loss=-1.0), 2, "shared", 0,
                          TrainingConfig(max_epochs=1))
    assert len(seen) == 2 and all(w is train.member_weight for w in seen)


def test_the_identity_chain_replaces_a_candidate_it_is_clearly_better_than():
    """The one-standard-error rule: a network that predicts a constant far from the
    target is clearly worse than the chain's; the chain's own network, a hair worse on
    the record, is not (the same losses on every row)."""
    train, val = _self_masked(400, 0), _self_masked(200, 1)
    config = TrainingConfig(max_epochs=2)

    def search():
        return DepthSearch(_build, train, val, OBJECTIVE, seed=0, n_members=2,
                           moments=observed_moments(train), mask_skip=True)

    first = search()
    constant = first.members(4, "shared", 0, None, from_data=False)
    constant.set_constant_output(train.target.mean().reshape(1) + 100.0)
    far = Candidate(4, "shared", 0, constant, TrainingResult(best_val_loss=1e9), 0.0)
    kept, summaries = first.identity_chain(far, 4, "shared", 0, config)
    assert list(summaries) == [0, 2, 4]
    assert kept is not far and kept.val_loss == summaries[kept.depth]["val_loss"]
    # the search goes on with the kept network's terms: no mask term
    assert not first.mask_skip and "mask_skip__weight" not in kept.network.heads
    again = search()
    level = kept._replace(result=TrainingResult(best_val_loss=kept.val_loss + 1e-9))
    assert again.identity_chain(level, level.depth, "shared", 0, config)[0] is level
    assert again.mask_skip  # the terms as they were


def test_search_depths_reports_the_identity_chain_only_when_it_ran():
    train, val = _self_masked(600, 0), _self_masked(300, 1)
    config = TrainingConfig(max_epochs=3)
    masked = search_depths(_build, [0, 4], "shared", [0], train, val, OBJECTIVE, config,
                           seed=0, mask_skip=True)
    plain = search_depths(_build, [0, 4], "shared", [0], train, val, OBJECTIVE, config,
                          seed=0, mask_skip=False)
    assert plain.identity is None
    assert masked.identity is None or 4 in masked.depth_results  # a block that iterates
    if masked.identity is not None:
        assert list(masked.identity) == [0, 2, 4]
        # the best is the chain's (no mask term then) or the search's with the term
        chained = {r["val_loss"] for r in masked.identity.values()}
        assert (masked.best.val_loss in chained) == (not masked.mask_skip)
        searched = {r["val_loss"] for r in masked.depth_results.values()}
        assert masked.mask_skip == (masked.best.val_loss in searched)
