"""The estimators' ``callbacks`` parameter: called on every training of a fit (each
candidate of the search, the stream's one training), told which training it is, able to
stop one; stored untouched and copied per fit; never in a model file; and the
:class:`~neumiss.network.History` callback."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import neumiss
from neumiss import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.estimators import fit_stream
from neumiss.network import Callback, History, describe_training
from neumiss.network._callbacks import HISTORY_COLUMNS

SMALL = dict(depth=1, mlp_depth=0, ensemble_size=1, max_epochs=6, random_state=0)


def _data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.linspace(1.0, -0.5, d) + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X, y


class Counter(Callback):
    """Counts the calls of each hook and records the description of every training."""

    def __init__(self):
        self.begins, self.epochs, self.ends, self.trainings = 0, 0, 0, []

    def on_train_begin(self, network, config):
        self.begins += 1
        self.trainings.append(self.training)

    def on_epoch_end(self, epoch, losses):
        self.epochs += 1
        return False

    def on_train_end(self, result):
        self.ends += 1


class StopAfter(Callback):
    def __init__(self, epochs):
        self.epochs = epochs

    def on_epoch_end(self, epoch, losses):
        return epoch >= self.epochs


def _trainings(model) -> list[tuple[str, dict]]:
    """Every training the fit of ``model`` ran, as (stage, summary): the chain's depths,
    the paper's chain from the identity, the untied and the heads' fine-tunes (a
    candidate fitted or taken untrained has 0 epochs and is not a training)."""
    runs = [("depth search", s) for s in model.depth_results_.values()]
    runs += [("identity chain", s) for s in (model.identity_results_ or {}).values()]
    if model.untied_result_ is not None:
        runs.append(("untied fine-tune", model.untied_result_))
    runs += [("head fine-tune", s) for s in model.head_results_.values()]
    return [(stage, summary) for stage, summary in runs if summary["epochs"] > 0]


def test_the_fit_calls_the_callbacks_on_every_training_of_its_search():
    X, y = _data(3000)
    # a seed whose search goes through every stage that trains (depth 2 chosen, so the
    # untied copy is tried, and it improves)
    model = NeuMissRegressor(depth=[1, 2], ensemble_size=2, max_epochs=3, random_state=13,
                             validation_fraction=0.1, callbacks=[Counter(), History()])
    model.fit(X, y)
    counter, history = model.callbacks_
    trainings = _trainings(model)
    # held out: two depths, the untied block (enough rows per parameter), the linear head
    assert {stage for stage, _ in trainings} >= {"depth search", "untied fine-tune",
                                                 "head fine-tune"}
    assert counter.begins == counter.ends == len(trainings) == len(history.trainings)
    assert counter.epochs == sum(summary["epochs"] for _, summary in trainings)
    # each training says which candidate it is: the estimator, the stage, the network
    assert counter.trainings[:2] == [
        describe_training("NeuMissRegressor", "depth search", depth, "shared", 2)
        for depth in (1, 2)]
    assert [t.split(" (")[0] for t in counter.trainings] == [
        f"NeuMissRegressor {stage}" for stage, _ in trainings]
    assert len(set(counter.trainings)) == len(counter.trainings)
    frame = history.to_frame()
    assert len(frame) == counter.epochs
    assert list(frame["description"].unique()) == counter.trainings


def test_a_callback_that_returns_true_stops_the_training_and_the_fit_completes():
    X, y = _data()
    params = dict(SMALL, max_epochs=20, patience=100, lr_patience=100)
    full = NeuMissRegressor(**params).fit(X, y)
    stopped = NeuMissRegressor(**params, callbacks=[StopAfter(3)]).fit(X, y)
    assert full.n_epochs_ == 20 and stopped.n_epochs_ == 3
    assert len(stopped.history_["val_loss"]) == 3
    np.testing.assert_array_equal(stopped.history_["val_loss"], full.history_["val_loss"][:3])
    # the weights kept are the best of the three epochs (or the start, epoch 0)
    assert 0 <= stopped.best_epoch_ <= 3
    if stopped.best_epoch_:
        assert stopped.validation_score_ == pytest.approx(
            stopped.history_["val_score"][stopped.best_epoch_ - 1])
    assert np.isfinite(stopped.predict(X)).all()


def test_history_has_one_row_per_epoch_of_every_training():
    X, y = _data()
    model = NeuMissRegressor(**SMALL, callbacks=[History()]).fit(X, y)
    frame = model.callbacks_[0].to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(HISTORY_COLUMNS)
    assert list(frame.columns) == ["training", "description", "epoch", "train_loss",
                                   "val_loss", "val_score", "learning_rate", "kept"]
    assert len(frame) == model.n_epochs_  # one training: depth 1, the linear head
    assert frame["training"].eq(0).all() and list(frame["epoch"]) == list(
        range(1, model.n_epochs_ + 1))
    np.testing.assert_allclose(frame["val_loss"], model.history_["val_loss"])
    np.testing.assert_allclose(frame["learning_rate"], model.history_["lr"])
    assert frame["kept"].sum() == (model.best_epoch_ > 0)
    assert History().to_frame().shape == (0, len(HISTORY_COLUMNS))


def test_callbacks_are_stored_untouched_and_copied_for_each_fit():
    X, y = _data()
    history = History()
    model = NeuMissRegressor(**SMALL, callbacks=[history])
    assert model.get_params()["callbacks"][0] is history
    twin = clone(model)
    assert type(twin.callbacks[0]) is History and twin.callbacks[0] is not history
    assert NeuMissRegressor(**twin.get_params()).get_params()["callbacks"] is twin.callbacks
    model.fit(X, y)
    assert model.callbacks[0] is history and history.trainings == []  # never called
    first = model.callbacks_[0]
    assert first is not history and len(first.trainings) == 1
    model.fit(X, y)  # a refit starts from fresh copies
    assert model.callbacks_[0] is not first and len(model.callbacks_[0].trainings) == 1
    assert len(first.trainings) == 1
    assert NeuMissRegressor(**SMALL).fit(X, y).callbacks_ == []
    for cls in (NeuMissClassifier, NeuMissQuantileRegressor):
        assert cls().get_params()["callbacks"] is None


@pytest.mark.parametrize("callbacks, message", [
    ([History(), "progress"], r"callbacks\[1\] is a str, not a neumiss.network.Callback"),
    ([lambda epoch, losses: False],
     r"callbacks\[0\] is a function, not a neumiss.network.Callback"),
    (History(), r"callbacks must be None or a list of neumiss.network.Callback, got a "
                r"History"),
])
def test_a_callback_that_is_not_one_is_refused_naming_its_type(callbacks, message):
    X, y = _data(60)
    with pytest.raises(ValueError, match=f"NeuMissRegressor: {message}"):
        NeuMissRegressor(**SMALL, callbacks=callbacks).fit(X, y)


def test_a_model_fitted_with_callbacks_saves_and_loads_without_them(tmp_path):
    class Local(Callback):  # defined here: a file that needed it could not be loaded
        def on_epoch_end(self, epoch, losses):
            return False

    X, y = _data()
    model = NeuMissRegressor(**SMALL, callbacks=[Local(), History()]).fit(X, y)
    model.save(tmp_path / "model.pt")
    loaded = neumiss.load(tmp_path / "model.pt")
    assert loaded.callbacks is None and not hasattr(loaded, "callbacks_")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_a_streamed_fit_calls_the_callbacks_on_its_one_training():
    X, y = _data(400)
    chunks = [(X[i : i + 100], y[i : i + 100]) for i in range(0, 400, 100)]
    model = fit_stream(NeuMissRegressor(**SMALL, weight_sharing="shared",
                                        callbacks=[History()]), chunks)
    (training,) = model.callbacks_[0].trainings
    assert training["description"] == describe_training("NeuMissRegressor", "stream", 1,
                                                        "shared", 0)
    assert len(training["epochs"]) == model.n_epochs_
