"""The loss objects: each loss against an independent computation, their scores, links and
stratification, and the estimators' choice of them."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, mean_pinball_loss, r2_score

from neumiss import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.network import (
    COMBINE,
    BinaryLogLoss,
    DepthSearch,
    MultinomialLogLoss,
    PinballLoss,
    SquaredError,
    TargetLoss,
)
from neumiss.network._losses import SPLINE_MIN_GAIN

RNG = np.random.default_rng(0)


def test_the_squared_errors_mean_and_score_are_the_mse_and_r2():
    y, prediction = RNG.normal(size=50), RNG.normal(size=50)
    loss = SquaredError()
    mean = float(loss(torch.tensor(prediction[:, None]), torch.tensor(y)).mean())
    assert mean == pytest.approx(float(np.mean((y - prediction) ** 2)))
    assert loss.score(mean, y, None) == pytest.approx(r2_score(y, prediction))
    assert loss.score(0.5, np.ones(4), None) == -0.5  # a constant y: minus the loss
    assert loss.squared and not loss.logistic and loss.n_outputs == 1


def test_the_log_losses_are_sklearns_and_their_links_its_probabilities():
    logits = RNG.normal(size=(40, 3)) * 3
    classes = RNG.integers(0, 3, 40)
    multinomial = MultinomialLogLoss(3)
    target = multinomial.target_tensor(classes, torch.device("cpu"))
    losses = multinomial(torch.tensor(logits), target).numpy()
    proba = multinomial.inverse_link(logits)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert losses.mean() == pytest.approx(log_loss(classes, proba, labels=[0, 1, 2]))
    binary = BinaryLogLoss()
    z, labels = logits[:, :1], (classes == 1).astype(float)
    losses = binary(torch.tensor(z), binary.target_tensor(labels, torch.device("cpu")))
    two = binary.inverse_link(z)
    assert float(losses.mean()) == pytest.approx(log_loss(labels, two[:, 1]))
    # one logit z is the softmax of (0, z)
    np.testing.assert_allclose(two, multinomial.inverse_link(np.column_stack([0 * z, z])),
                               atol=1e-12)
    assert binary.logistic and binary.combine in COMBINE and multinomial.combine in COMBINE


def test_the_pinball_loss_is_sklearns_averaged_over_the_levels():
    y, out = RNG.normal(size=30), RNG.normal(size=(30, 2))
    loss = PinballLoss([0.1, 0.9])
    mean = float(loss(torch.tensor(out), torch.tensor(y)).mean())
    expected = np.mean([mean_pinball_loss(y, out[:, k], alpha=a) for k, a in enumerate((0.1, 0.9))])
    assert mean == pytest.approx(expected) and loss.n_outputs == 2


def _loss_and_target(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "squared":
        return SquaredError(), torch.tensor(rng.normal(size=30))
    if kind == "binary":
        return BinaryLogLoss(), torch.tensor(rng.integers(0, 2, 30).astype(float))
    if kind == "multinomial":
        return MultinomialLogLoss(4), torch.tensor(rng.integers(0, 4, 30))
    return PinballLoss([0.05, 0.5, 0.9]), torch.tensor(rng.normal(size=30))


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["squared", "binary", "multinomial", "pinball"]),
       seed=st.integers(0, 2**16), scale=st.floats(0.1, 20.0))
def test_each_losss_raw_gradient_is_its_derivative(kind, seed, scale):
    # The closed form against autograd, and against central differences of the loss
    # (the pinball loss is linear between its kinks: an exact difference away from them).
    loss, target = _loss_and_target(kind, seed)
    output = (torch.tensor(np.random.default_rng(seed + 1).normal(size=(30, loss.n_outputs)))
              * scale).requires_grad_()
    loss(output, target).sum().backward()
    gradient = loss.raw_gradient(output.detach(), target)
    assert gradient.shape == output.shape
    torch.testing.assert_close(gradient, output.grad, rtol=1e-10, atol=1e-12)
    step = 1e-6
    for j in range(loss.n_outputs):
        shift = torch.zeros_like(output.detach())
        shift[:, j] = step
        change = (loss(output.detach() + shift, target) - loss(output.detach() - shift, target))
        np.testing.assert_allclose(change.numpy() / (2 * step), gradient[:, j].numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_a_loss_defining_only_its_rows_losses_gets_its_gradient_by_autograd():
    class Cubic(TargetLoss):  # a loss object of the user's, with no closed form given
        def __call__(self, output, target):
            return (output[:, 0] - target) ** 4

    output, target = torch.tensor([[0.5], [-1.0], [2.0]]), torch.tensor([0.0, 1.0, 1.5])
    np.testing.assert_allclose(Cubic().raw_gradient(output, target).numpy(),
                               4 * (output[:, :1] - target[:, None]).numpy() ** 3)
    assert not output.requires_grad  # the caller's tensor is left as it was


def test_class_losses_stratify_when_every_class_can_be_split():
    y = np.array([0, 0, 1, 1, 2, 2])
    assert MultinomialLogLoss(3).stratify(y, 3) is y
    assert MultinomialLogLoss(3).stratify(y, 2) is None  # too few rows for every class
    assert BinaryLogLoss().stratify(np.array([0, 0, 0, 1]), 2) is None  # a class of one row
    assert SquaredError().stratify(y, 3) is None


@pytest.mark.parametrize("counts", [[50, 50], [90, 10], [100, 0], [60, 30, 10], [7]])
def test_class_losses_count_twice_the_rows_outside_the_largest_class(counts):
    y = np.repeat(np.arange(len(counts)), counts)
    rng = np.random.default_rng(len(counts))
    rng.shuffle(y)
    outside = len(y) - max(counts)
    assert BinaryLogLoss().informative_rows(y) == min(len(y), 2 * outside)
    assert MultinomialLogLoss(3).informative_rows(y) == min(len(y), 2 * outside)
    assert SquaredError().informative_rows(y.astype(float)) == len(y)
    assert PinballLoss([0.5]).informative_rows(y.astype(float)) == len(y)


def test_the_spline_terms_bar_is_the_loss_objects(monkeypatch):
    seen = []
    decide = DepthSearch.term_helps

    def spy(self, term, depth, weight_sharing, min_gain=0.0):
        if term == "spline":
            seen.append((type(self.objective.loss), min_gain))
        return decide(self, term, depth, weight_sharing, min_gain)

    monkeypatch.setattr(DepthSearch, "term_helps", spy)
    X = RNG.normal(size=(300, 2))
    y = X[:, 0] ** 2 + 0.1 * RNG.normal(size=300)
    # with a deeper block to train the start decides; at depth 0 alone only a multiclass
    # loss asks it (``spline_at_depth_0``)
    params = dict(depth=[0, 2], max_epochs=2, random_state=0)
    NeuMissRegressor(**params).fit(X, y)
    NeuMissClassifier(**params).fit(X, y > 1)
    NeuMissClassifier(**{**params, "depth": 0}).fit(X, y > 1)
    NeuMissClassifier(**{**params, "depth": 0}).fit(X, np.digitize(y, [0.5, 1.5]))
    assert seen == [(SquaredError, SPLINE_MIN_GAIN), (BinaryLogLoss, 0.0),
                    (MultinomialLogLoss, 0.0)]
    assert SPLINE_MIN_GAIN > 0.0


def test_each_estimator_fits_with_its_loss_object():
    X = RNG.normal(size=(60, 2))
    y = X[:, 0] + 0.1 * RNG.normal(size=60)
    params = dict(depth=0, max_epochs=2, ensemble_size=1, random_state=0)
    assert isinstance(NeuMissRegressor(**params).fit(X, y)._get_loss(), SquaredError)
    binary = NeuMissClassifier(**params).fit(X, y > 0)
    assert isinstance(binary._get_loss(), BinaryLogLoss)
    multi = NeuMissClassifier(**params).fit(X, np.digitize(y, [-0.5, 0.5]))
    assert multi._get_loss().n_outputs == 3
    np.testing.assert_allclose(multi.predict_proba(X),
                               multi._get_loss().inverse_link(multi.decision_function(X)))
    quantile = NeuMissQuantileRegressor((0.1, 0.5, 0.9), **params).fit(X, y)
    assert quantile._get_loss().quantiles == (0.1, 0.5, 0.9)
