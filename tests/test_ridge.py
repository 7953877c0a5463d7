"""Tests of neumiss.network._ridge (the linear start's ridge: its penalty by leave-one-out
error, each member's solution) and of the per-member solves of the linear start: each
distinct member's problem is solved once, and every member gets its own solution; the
iterative (multinomial, quantile) start against independent solvers."""

import numpy as np
import pytest
import torch

from neumiss.network import _start
from neumiss.network._losses import MultinomialLogLoss, PinballLoss
from neumiss.network._ridge import (
    RIDGE_PENALTIES,
    _solve_gram,
    distinct_members,
    per_distinct_member,
    ridge_penalty,
    ridge_solutions,
)


def test_per_distinct_member_solves_each_distinct_problem_once_in_member_order():
    weights = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    starts = np.array([[0.0], [0.0], [0.0], [2.0]])  # member 3: same rows, another start
    calls = []

    def solve(k):
        calls.append(k)
        return np.array([10.0 * k, weights[k].sum(), starts[k, 0]])

    out = per_distinct_member(solve, weights, starts)
    assert calls == [0, 1, 3]  # member 2 is member 0's problem
    np.testing.assert_array_equal(out, [[0, 2, 0], [10, 2, 0], [0, 2, 0], [30, 2, 2]])


def test_distinct_members_names_each_problems_first_member_and_every_members_problem():
    weights = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    starts = np.array([[0.0], [0.0], [0.0], [0.0], [2.0]])
    firsts, index = distinct_members(weights, starts)
    np.testing.assert_array_equal(firsts, [0, 1, 4])
    np.testing.assert_array_equal(index, [0, 1, 0, 1, 2])


def test_the_penalized_start_solves_members_sharing_rows_and_start_once():
    cross_entropy = MultinomialLogLoss(3)  # the multiclass loss the start is given
    rng = np.random.default_rng(2)
    features = torch.as_tensor(rng.normal(size=(150, 5)))
    target = torch.as_tensor(rng.integers(0, 3, 150))
    held = torch.as_tensor(rng.random(150) < 0.3).double()
    row_weight = torch.stack([torch.ones(150, dtype=torch.float64), 1.0 - held,
                              torch.ones(150, dtype=torch.float64)], dim=1)
    weight, bias = _start._penalized(features, target, row_weight, 3, cross_entropy, 0.01)
    assert weight.shape == (3, 3, 5) and bias.shape == (3, 3)
    assert torch.equal(weight[0], weight[2]) and torch.equal(bias[0], bias[2])
    distinct, distinct_bias = _start._penalized(features, target, row_weight[:, :2], 3,
                                                cross_entropy, 0.01)
    assert torch.equal(weight[:2], distinct) and torch.equal(bias[:2], distinct_bias)
    assert not torch.allclose(weight[0], weight[1])  # member 1 holds rows out: its own fit


def _members_problem(seed=0, n=300, p=4):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, p))
    member_weight = rng.poisson(1.0, (n, 2)).astype(float)  # two members, their own rows
    return rng, features, member_weight


def test_the_multinomial_start_is_scikit_learns_multinomial_logistic_regression():
    # Per member: sum_i w_ik l_i + n P |B_k|^2, i.e. scikit-learn's C = 1 / (2 n P); the
    # intercepts are unpenalized in both (and defined up to a constant: the probabilities
    # are compared).
    from sklearn.linear_model import LogisticRegression

    rng, features, member_weight = _members_problem()
    logits = features @ rng.normal(size=(3, 4)).T
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    target = np.array([rng.choice(3, p=row) for row in proba])
    penalty = 0.01
    weight, bias = _start._penalized(torch.tensor(features), torch.tensor(target),
                                     torch.tensor(member_weight), 3, MultinomialLogLoss(3),
                                     penalty)
    for k in range(2):
        expected = LogisticRegression(C=1 / (2 * 300 * penalty), tol=1e-12, max_iter=10_000).fit(
            features, target, sample_weight=member_weight[:, k])
        z = features @ weight[k].numpy().T + bias[k].numpy()
        got = np.exp(z - z.max(axis=1, keepdims=True))
        np.testing.assert_allclose(got / got.sum(axis=1, keepdims=True),
                                   expected.predict_proba(features), atol=1e-4)
        np.testing.assert_allclose(weight[k].numpy(), expected.coef_, atol=1e-4)


def test_the_quantile_start_reaches_the_linear_programs_minimum():
    # Unpenalized, each level's start is a weighted linear quantile regression: a linear
    # program (scipy's HiGHS) gives its minimum; L-BFGS on the kinked loss comes within
    # 0.5% of it.
    from scipy.optimize import linprog

    rng, features, member_weight = _members_problem(1)
    target = features @ np.array([1.0, -1.0, 0.5, 0.0]) + rng.standard_t(3, size=300)
    levels = (0.1, 0.5, 0.9)
    weight, bias = _start._penalized(torch.tensor(features), torch.tensor(target),
                                     torch.tensor(member_weight), 3, PinballLoss(levels), 0.0)
    design = np.hstack([features, np.ones((300, 1)), np.eye(300), -np.eye(300)])
    for k in range(2):
        w = member_weight[:, k]
        for j, q in enumerate(levels):  # y - f = u - v, u, v >= 0: minimise w (q u + (1-q) v)
            cost = np.concatenate([np.zeros(5), q * w, (1 - q) * w])
            best = linprog(cost, A_eq=design, b_eq=target, method="highs",
                           bounds=[(None, None)] * 5 + [(0, None)] * 600).fun
            error = target - features @ weight[k, j].numpy() - bias[k, j].item()
            got = np.sum(w * np.maximum(q * error, (q - 1) * error))
            assert best * (1 - 1e-9) <= got <= best * 1.005


def _leave_one_out_error(features, target, weight, alpha):
    """sum_i w_i (y_i - f_-i(x_i))^2, each f_-i the weighted ridge refitted without row i."""
    errors = []
    for i in range(len(target)):
        keep = np.arange(len(target)) != i
        design = np.hstack([features, np.ones((len(target), 1))])
        gram = design[keep].T @ (weight[keep, None] * design[keep])
        gram[:-1, :-1] += alpha * np.eye(features.shape[1])
        solution = np.linalg.solve(gram, design[keep].T @ (weight[keep] * target[keep]))
        errors.append(weight[i] * (target[i] - design[i] @ solution) ** 2)
    return float(np.sum(errors))


@pytest.mark.parametrize("n, p, noise", [(40, 6, 3.0), (60, 6, 0.3), (25, 6, 1.0),
                                          (20, 30, 1.0)])  # the last wider than long
def test_the_ridge_penalty_has_the_least_leave_one_out_error(n, p, noise):
    from sklearn.linear_model import RidgeCV

    rng = np.random.default_rng(n)
    features = rng.normal(size=(n, 6)) @ rng.normal(size=(6, p))  # correlated columns
    target = features[:, :2] @ np.array([1.0, -0.5]) + noise * rng.normal(size=n)
    weight = rng.uniform(0.2, 2.0, n)
    chosen = ridge_penalty(*map(torch.from_numpy, (features, target, weight)))
    errors = [_leave_one_out_error(features, target, weight, a) for a in RIDGE_PENALTIES]
    assert chosen == RIDGE_PENALTIES[int(np.argmin(errors))]
    unweighted = ridge_penalty(*map(torch.from_numpy, (features, target, np.ones(n))))
    assert unweighted == pytest.approx(RidgeCV(alphas=RIDGE_PENALTIES).fit(features, target).alpha_)


@pytest.mark.parametrize("n, p", [(30, 12), (30, 30), (30, 80)])
def test_each_members_ridge_solves_its_normal_equations_on_a_table_of_any_width(n, p):
    # from as many columns as rows, solved in the rows' space: the same solution
    rng = np.random.default_rng(p)
    features, target = rng.normal(size=(n, p)), rng.normal(size=n)
    member_weight = rng.poisson(1.0, (n, 4)).astype(float)  # 0: rows a member does not see
    member_weight[:, 3] = member_weight[:, 0]  # members on the same rows, solved once
    weight, bias = ridge_solutions(*map(torch.from_numpy, (features, target, member_weight)),
                                   0.5)
    assert torch.equal(weight[0], weight[3]) and torch.equal(bias[0], bias[3])
    design = np.hstack([features, np.ones((n, 1))])
    for k in range(4):
        gram = design.T @ (member_weight[:, k, None] * design)
        gram[:p, :p] += 0.5 * np.eye(p)  # the intercept is not penalized
        solution = np.linalg.solve(gram, design.T @ (member_weight[:, k] * target))
        np.testing.assert_allclose(weight[k, 0].numpy(), solution[:p], atol=1e-9)
        np.testing.assert_allclose(bias[k].numpy(), solution[p:], atol=1e-9)


def test_a_singular_gram_matrix_gets_the_minimum_norm_solution():
    # a member whose rows all weigh 0: its Gram matrix is the penalty's, 0 on the bias
    rng = np.random.default_rng(0)
    features, target = rng.normal(size=(20, 3)), rng.normal(size=20)
    member_weight = np.ones((20, 2))
    member_weight[:, 1] = 0.0
    weight, bias = ridge_solutions(
        *map(torch.from_numpy, (features, target, member_weight)), 0.5)
    assert not weight[1].any() and not bias[1].any()
    gram = np.diag([2.0, 1.0, 0.0])
    np.testing.assert_allclose(_solve_gram(gram, np.array([1.0, 1.0, 0.0])), [0.5, 1.0, 0.0])
    definite = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_allclose(definite @ _solve_gram(definite, np.array([1.0, -1.0])),
                               [1.0, -1.0])


def test_the_ridge_penalty_grows_with_the_noise():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(200, 10))
    signal = features @ rng.normal(size=10)
    chosen = [ridge_penalty(*map(torch.from_numpy, (features, signal + noise * rng.normal(
        size=200), np.ones(200)))) for noise in (0.1, 30.0)]
    assert chosen[0] < chosen[1]


def test_newtons_logistic_start_solves_members_sharing_rows_and_start_once(monkeypatch):
    rng = np.random.default_rng(1)
    features = torch.as_tensor(rng.normal(size=(200, 4)))
    target = torch.as_tensor((rng.random(200) < 0.4).astype(np.float64))
    fold = torch.as_tensor(rng.random(200) < 0.25)
    rows = torch.ones(200, dtype=torch.float64)
    row_weight = torch.stack([rows, (~fold).double(), rows], dim=1)
    calls = []
    newton = _start._newton_logistic

    def spy(F, y, w, penalty, start, *args):
        calls.append(w.copy())
        return newton(F, y, w, penalty, start, *args)

    monkeypatch.setattr(_start, "_newton_logistic", spy)
    weight, bias = _start._logistic(features, target, row_weight, penalty=0.01)
    assert len(calls) == 2  # members 0 and 2 train on the same rows from the same start
    assert torch.equal(weight[0], weight[2]) and torch.equal(bias[0], bias[2])
    for k in range(3):  # each member's solution is its own problem's, solved alone
        calls.clear()
        alone, alone_bias = _start._logistic(features, target, row_weight[:, k:k + 1], 0.01)
        assert torch.equal(weight[k], alone[0]) and torch.equal(bias[k], alone_bias[0])
