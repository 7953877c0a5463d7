"""The logistic start's penalty chosen on the rows its members hold out (out of fold)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

import neumiss
import neumiss.network._search as search_module
from neumiss import NeuMissClassifier
from neumiss.network._start import (
    LINEAR_PENALTY,
    PENALTY_RANGE,
    PENALTY_STEP,
    HeldOutPenalties,
    HeldOutPenalty,
    _logistic,
    _logistic_held_out,
)


def _noisy_table(n=240, informative=3, noise=12, n_members=5, seed=0):
    """A binary target on a few of many standardized columns, and out-of-fold member
    weights: member k does not train on fold k."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, informative + noise))
    logits = features[:, :informative] @ np.array([1.2, -0.8, 0.6])
    target = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
    fold = rng.permutation(np.arange(n) % n_members)
    member_weight = (fold[:, None] != np.arange(n_members)).astype(float)  # (n, K)
    return features, target, member_weight, fold


def _held_out_loss(features, target, member_weight, fold, scale):
    """The pooled out-of-fold log loss of scikit-learn's logistic regressions at the
    penalty ``scale`` times :data:`LINEAR_PENALTY` (``C = 1 / (scale LINEAR_PENALTY)``),
    each fitted on its member's rows: an independent computation."""
    total = 0.0
    for k in range(member_weight.shape[1]):
        model = LogisticRegression(C=1.0 / (scale * LINEAR_PENALTY), tol=1e-10).fit(
            features, target, sample_weight=member_weight[:, k])
        p = model.predict_proba(features[fold == k])[:, 1]
        y = target[fold == k]
        total -= np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
    return total


def test_the_chosen_penalty_has_the_least_held_out_log_loss_of_its_grid():
    features, target, member_weight, fold = _noisy_table()
    n = len(target)
    args = [torch.from_numpy(a) for a in (features, target, np.ones(n), member_weight)]
    weight, bias, scale = _logistic_held_out(*args, LINEAR_PENALTY / (2 * n))
    grid = [PENALTY_STEP**j for j in range(-4, 7)
            if PENALTY_RANGE[0] <= PENALTY_STEP**j <= PENALTY_RANGE[1]]
    losses = {s: _held_out_loss(features, target, member_weight, fold, s) for s in grid}
    chosen = min(losses, key=lambda s: abs(np.log(s / scale)))
    assert chosen == pytest.approx(scale)
    assert losses[chosen] <= min(losses.values()) * (1 + 2e-4)
    assert scale > 1.0  # twelve noise columns on 240 rows: more penalty than C = 1
    # and the solution is each member's logistic regression at that penalty
    for k in range(member_weight.shape[1]):
        expected = LogisticRegression(C=1.0 / (scale * LINEAR_PENALTY), tol=1e-10).fit(
            features, target, sample_weight=member_weight[:, k])
        np.testing.assert_allclose(weight[k, 0].numpy(), expected.coef_[0], atol=1e-5)
        np.testing.assert_allclose(bias[k, 0].item(), expected.intercept_[0], atol=1e-5)


def test_without_held_out_rows_the_penalty_is_the_one_given():
    features, target, _, _ = _noisy_table(n=120)
    member_weight = np.random.default_rng(1).poisson(1.0, (120, 3)).astype(float) + 1.0
    args = [torch.from_numpy(a) for a in (features, target, np.ones(120), member_weight)]
    penalty = LINEAR_PENALTY / 240
    weight, bias, scale = _logistic_held_out(*args, penalty)
    expected = _logistic(args[0], args[1], args[3], penalty)
    assert scale == 1.0
    torch.testing.assert_close(weight, expected[0])
    torch.testing.assert_close(bias, expected[1])


def test_rows_of_zero_case_weight_are_not_held_out():
    # Rows a member does not train on because their case weight is 0 score nothing:
    # with every fold's rows weighing 0, nothing is held out.
    features, target, member_weight, fold = _noisy_table(n=100)
    case_weight = (member_weight.min(axis=1) > 0).astype(float)  # all rows: 0
    args = [torch.from_numpy(a) for a in (features, target, case_weight, member_weight)]
    assert _logistic_held_out(*args, LINEAR_PENALTY / 200)[2] == 1.0


def test_a_penalty_is_chosen_once_per_terms_from_where_the_last_choice_ended():
    features, target, member_weight, _ = _noisy_table()
    args = [torch.from_numpy(a) for a in (features, target, np.ones(240), member_weight)]
    chosen = HeldOutPenalties()
    plain = chosen.for_terms((False, False))
    assert plain.start == 1.0 and plain.scale is None
    plain.solve(*args, LINEAR_PENALTY / 480)
    assert plain.scale is not None
    assert chosen.for_terms((False, False)) is plain
    spline = chosen.for_terms((False, True))
    assert spline.start == plain.scale and spline.scale is None
    # once chosen, a solve is the fit at that penalty: no search
    weight, bias = plain.solve(*args, LINEAR_PENALTY / 480)
    expected = _logistic(args[0], args[1], args[3], LINEAR_PENALTY / 480 * plain.scale)
    torch.testing.assert_close(weight, expected[0])
    torch.testing.assert_close(bias, expected[1])


@pytest.mark.parametrize("validation_fraction, scheme", [("auto", "out_of_fold"),
                                                         (0.25, "holdout")])
def test_the_classifier_chooses_its_penalty_out_of_fold_only(monkeypatch, validation_fraction,
                                                              scheme):
    features, target, _, _ = _noisy_table(n=200)
    passed = []
    original = search_module.start_linear_parts

    def spy(*args, **kwargs):
        passed.append(kwargs.get("held_out_penalty"))
        return original(*args, **kwargs)

    monkeypatch.setattr(search_module, "start_linear_parts", spy)
    model = NeuMissClassifier(depth=0, max_epochs=2, validation_fraction=validation_fraction,
                              random_state=0).fit(features, target.astype(int))
    assert model.validation_scheme_ == scheme
    assert passed
    if scheme == "out_of_fold":
        assert all(isinstance(p, HeldOutPenalty) for p in passed)
        assert all(p.scale is not None for p in passed)
        # the fitted C is that of one of the penalties chosen (the kept head terms')
        assert model.start_C_ in {1.0 / (LINEAR_PENALTY * p.scale) for p in passed}
    else:
        assert all(p is None for p in passed)
        assert model.start_C_ == 1.0 / LINEAR_PENALTY
    assert f"C = {model.start_C_:.3g}" in model.summary()


def test_the_start_C_is_saved_and_a_model_saved_without_it_reads_C_1(tmp_path):
    features, target, _, _ = _noisy_table(n=200)
    model = NeuMissClassifier(depth=0, max_epochs=2, random_state=0).fit(
        features, target.astype(int))
    assert model.start_C_ < 1.0  # twelve noise columns: more penalty than C = 1
    model.save(tmp_path / "m.pt")
    assert neumiss.load(tmp_path / "m.pt").start_C_ == model.start_C_
    del model.start_C_  # as a model written before the attribute existed
    model.save(tmp_path / "old.pt")
    assert neumiss.load(tmp_path / "old.pt").start_C_ == 1.0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(40, 160), noise=st.integers(0, 10), n_members=st.integers(2, 5),
       seed=st.integers(0, 10_000))
def test_the_chosen_penalty_never_scores_worse_held_out_than_the_start(n, noise, n_members,
                                                                         seed):
    # Whatever the table, the walk only moves to a penalty whose held-out log loss is
    # lower, and stays within its range on the grid of steps from the start.
    features, target, member_weight, fold = _noisy_table(n, noise=noise,
                                                         n_members=n_members, seed=seed)
    args = [torch.from_numpy(a) for a in (features, target, np.ones(n), member_weight)]
    penalty = LINEAR_PENALTY / (2 * n)
    *chosen, scale = _logistic_held_out(*args, penalty)
    start = _logistic(args[0], args[1], args[3], penalty)

    def held_out(weight, bias):
        logits = features @ weight[:, 0, :].numpy().T + bias[:, 0].numpy()  # (n, K)
        losses = np.logaddexp(0.0, logits) - target[:, None] * logits
        return float(np.sum(losses * (member_weight == 0)))

    assert held_out(*chosen) <= held_out(*start) * (1 + 1e-9)
    assert PENALTY_RANGE[0] <= scale <= PENALTY_RANGE[1]
    steps = np.log(scale) / np.log(PENALTY_STEP)
    assert steps == pytest.approx(round(steps), abs=1e-9)
