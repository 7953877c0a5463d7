"""neumiss.estimators._fitting: the one orchestration of a fit (FitPlan) and its sources of rows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import neumiss.estimators._fitting as fitting
import neumiss.network
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.estimators._fitting import (
    FitPlan,
    FitRows,
    InMemoryRows,
    candidate_depths,
    candidate_mlp_depths,
    draw_seed,
    train_one_candidate,
)
from neumiss.estimators._streaming import StreamRows
from neumiss.network import (
    AUTO_DEPTHS,
    AUTO_MLP_DEPTHS,
    NeuMissNetwork,
    Objective,
    StackedNetwork,
    TrainingConfig,
    TrainingData,
    search_depths,
)
from neumiss.network._data import row_losses

ONE = {"depth": 1, "mlp_depth": 0, "weight_sharing": "shared", "max_epochs": 2}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=80)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X, y


class RecordingRows(InMemoryRows):
    """The rows of ``fit``, recording what the plan asks of them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.devices, self.seeds = [], []

    def prepare(self, estimator, device):
        self.devices.append(device)
        super().prepare(estimator, device)

    def split(self, seed):
        self.seeds.append(seed)
        return super().split(seed)


class OutOfMemory:
    """Training rows as a stream gives them: a length, a device and one epoch's batches."""

    def __init__(self, rows: TrainingData):
        self.rows, self.device = rows, rows.device

    def __len__(self):
        return len(self.rows)

    def batches(self, batch_size, generator):
        return self.rows.batches(batch_size, generator)


class StreamedRows(RecordingRows):
    parallel, start = False, None  # as StreamRows: one process, no network to start from

    def split(self, seed):
        rows = super().split(seed)
        return rows._replace(train=OutOfMemory(rows.train))


def test_the_plan_prepares_and_splits_once_with_the_drawn_seed(data):
    X, y = data
    model = NeuMissRegressor(**ONE, ensemble_size=3, validation_fraction=0.1, random_state=7)
    rows = RecordingRows(X, y)
    assert FitPlan(model, rows).fit() is model
    seed = int(np.random.RandomState(7).randint(np.iinfo(np.int32).max))
    assert rows.devices == [torch.device("cpu")] and rows.seeds == [seed]
    assert len(model.members_) == 3 and model.learning_rate_ == 1e-2
    # Each member's own validation loss; the estimator's score is the ensemble's.
    split = rows.split(seed)
    for member, summary in zip(model.network_.members, model.members_):
        assert summary["val_loss"] == pytest.approx(
            neumiss.network.evaluate_loss(member, split.val, model._get_loss()), rel=1e-5)
    assert model.validation_score_ == model.history_["val_score"][model.best_epoch_ - 1]


def test_the_seed_is_drawn_once_per_fit_from_the_random_state():
    assert draw_seed(3) == draw_seed(3) == np.random.RandomState(3).randint(2**31 - 1)
    state = np.random.RandomState(3)
    first, second = draw_seed(state), draw_seed(state)
    assert first == draw_seed(3) and second != first


def test_the_plan_checks_the_parameters_before_reading_any_row(data):
    X, y = data
    rows = RecordingRows(X, y)
    with pytest.raises(ValueError, match="ensemble_size"):
        FitPlan(NeuMissRegressor(ensemble_size=0), rows).fit()
    assert rows.devices == []


@pytest.mark.parametrize(("depth", "expected"), [
    ("auto", AUTO_DEPTHS), (3, (3,)), ([4, 1, 4, 0], (0, 1, 4)),
])
def test_candidate_depths_are_increasing_and_distinct(depth, expected):
    assert candidate_depths(depth) == expected


def test_candidate_heads_are_the_chains_then_the_fine_tuned():
    assert candidate_mlp_depths("auto") == AUTO_MLP_DEPTHS
    assert candidate_mlp_depths(1) == (1,)


def test_rows_in_memory_are_searched_and_other_rows_train_one_candidate_unguarded(
    data, monkeypatch
):
    X, y = data
    calls = []
    search, train = fitting.search_depths, fitting.train

    def search_spy(*args, **kwargs):
        calls.append(("search", type(args[4]).__name__))
        return search(*args, **kwargs)

    def train_spy(network, rows, *args, guard=True, **kwargs):
        calls.append(("train", type(rows).__name__, guard))
        return train(network, rows, *args, guard=guard, **kwargs)

    monkeypatch.setattr(fitting, "search_depths", search_spy)
    monkeypatch.setattr(fitting, "train", train_spy)
    FitPlan(NeuMissRegressor(**ONE, ensemble_size=2, random_state=0), RecordingRows(X, y)).fit()
    assert calls == [("search", "TrainingData")]  # one search trains both members
    calls.clear()
    model = NeuMissRegressor(**ONE, ensemble_size=2, random_state=0)
    FitPlan(model, StreamedRows(X, y)).fit()
    assert calls == [("train", "OutOfMemory", False)]
    assert len(model.network_.members) == 2
    assert list(model.depth_results_) == [1] and model.untied_result_ is None
    assert model.head_results_ == {} and model.weight_sharing_ == "shared"


def test_one_candidate_is_repeatable_and_refuses_a_search(data):
    X, y = data
    model = NeuMissRegressor(**ONE, ensemble_size=1)
    rows = RecordingRows(X, y)
    rows.prepare(model, torch.device("cpu"))
    split = rows.split(0)
    objective = Objective(model._get_loss(), lambda loss: -loss)
    config = TrainingConfig(max_epochs=2)

    def weights(seed, depths=(1,)):
        result = train_one_candidate(model._build_network, depths, "shared", [0],
                                     OutOfMemory(split.train), split.val, objective, config, seed)
        assert result.depth_results == {1: result.best.summary()}
        return torch.cat([p.detach().ravel() for p in result.best.network.parameters()])

    torch.testing.assert_close(weights(5), weights(5), rtol=0, atol=0)
    assert not torch.equal(weights(5), weights(6))
    with pytest.raises(ValueError, match="train one candidate: got depths \\[1, 2\\]"):
        weights(5, depths=(1, 2))


def test_in_memory_rows_hold_out_a_seeded_split(data):
    X, y = data
    model = NeuMissRegressor(validation_fraction=0.25)
    rows = InMemoryRows(X, y)
    rows.prepare(model, torch.device("cpu"))
    first, again, other = rows.split(1), rows.split(1), rows.split(2)
    assert (len(first.train), len(first.val)) == (60, 20)
    torch.testing.assert_close(first.val.x, again.val.x)
    assert not torch.equal(first.val.x, other.val.x)
    np.testing.assert_array_equal(first.val.target.numpy(), first.y_val.astype(np.float32))
    assert first.w_val is None and first.train.weight is None


def test_in_memory_rows_scale_weights_and_validate_zero_weight_rows_unweighted(data):
    X, y = data
    model = NeuMissRegressor(validation_fraction=0.25)
    rows = InMemoryRows(X, y, np.linspace(0.5, 2.0, 80))
    rows.prepare(model, torch.device("cpu"))
    split = rows.split(0)
    assert split.train.weight.mean().item() == pytest.approx(1.0)
    assert len(split.w_val) == 20 and split.w_val.sum() > 0
    only_row_0 = InMemoryRows(X, y, (np.arange(80) == 0).astype(float))
    only_row_0.prepare(model, torch.device("cpu"))
    outcomes = set()
    for seed in range(12):  # row 0 trains (zero-weight rows validate) or is held out
        try:
            split = only_row_0.split(seed)
        except ValueError as exc:
            assert "sample_weight is 0 on every training row" in str(exc)
            outcomes.add("refused")
        else:
            assert split.w_val is None and split.val.weight is None
            outcomes.add("unweighted validation")
    assert outcomes == {"refused", "unweighted validation"}


def test_validation_data_trains_every_row_and_is_shared(data):
    X, y = data
    model = NeuMissClassifier()
    labels = np.where(y > 0, "up", "down")
    rows = InMemoryRows(X[:60], labels[:60], validation_data=(X[60:], labels[60:]))
    rows.prepare(model, torch.device("cpu"))
    split = rows.split(3)
    assert (len(split.train), len(split.val)) == (60, 20)
    np.testing.assert_array_equal(split.y_val, np.searchsorted(["down", "up"], labels[60:]))


def test_stream_rows_train_every_chunk_but_the_held_out_one(data):
    X, y = data
    chunks = [(X[i : i + 20], y[i : i + 20]) for i in range(0, 80, 20)]
    model = NeuMissRegressor(**ONE)
    rows = StreamRows(chunks)
    rows.prepare(model, torch.device("cpu"))
    first, other = rows.split(0), rows.split(1)
    assert isinstance(first, FitRows)
    assert first.train is other.train and first.val is other.val and len(first.train) == 60
    epoch = list(first.train.batches(7, torch.Generator().manual_seed(0)))
    trained = torch.cat([batch.target for batch in epoch])
    expected = (y[20:] - model.y_mean_) / model.y_scale_
    np.testing.assert_allclose(np.sort(trained.numpy()), np.sort(expected), rtol=1e-6)
    assert max(len(batch) for batch in epoch) == 7 and len(first.val) == 20


def test_a_feature_never_observed_warns_at_the_callers_line(data):
    X, y = data
    X = X.copy()
    X[:, 1] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NeuMissRegressor(**ONE, ensemble_size=1).fit(X, y)
    (warning,) = [w for w in caught if "missing in every training row" in str(w.message)]
    assert warning.filename == __file__


def test_auto_validation_is_out_of_fold_for_a_small_ensemble(data):
    X, y = data
    rows = InMemoryRows(X, y)
    rows.prepare(NeuMissRegressor(ensemble_size=4), torch.device("cpu"))
    split = rows.split(3)
    assert split.scheme == "out_of_fold" and len(split.train) == len(split.val) == 80
    held = split.val.held_out_by
    assert sorted(torch.bincount(held).tolist()) == [20, 20, 20, 20]
    # Member k trains on every row but those of fold k.
    expected = (held[:, None] != torch.arange(4)).float()
    torch.testing.assert_close(split.train.member_weight, expected)
    np.testing.assert_array_equal(split.y_val, rows.y)
    assert not torch.equal(held, rows.split(4).val.held_out_by)  # the folds follow the seed


def test_out_of_fold_losses_score_each_row_by_the_member_that_held_it_out(data):
    X, y = data
    rows = InMemoryRows(X, y)
    rows.prepare(NeuMissRegressor(ensemble_size=3), torch.device("cpu"))
    val = rows.split(0).val
    members = []
    for k in range(3):
        member = NeuMissNetwork(3, depth=1, mlp_depth=1)
        member.reset_parameters(torch.Generator().manual_seed(k))
        member.block.load_state_dict(members[0].block.state_dict() if members else
                                     member.block.state_dict())
        members.append(member)
    stacked = StackedNetwork(members, "mean")
    losses = row_losses(stacked, val, lambda out, t: (out[:, 0] - t) ** 2)
    with torch.no_grad():
        own = torch.stack([(m.eval()(val.x, val.mask)[:, 0] - val.target) ** 2
                           for m in members])  # (K, n)
    torch.testing.assert_close(losses, own[val.held_out_by, torch.arange(80)])


def test_auto_validation_holds_out_a_tenth_for_one_network_or_a_large_table(data,
                                                                           monkeypatch):
    X, y = data
    for model in (NeuMissRegressor(ensemble_size=1), NeuMissRegressor(ensemble_size=50)):
        rows = InMemoryRows(X, y)
        rows.prepare(model, torch.device("cpu"))  # 50 members: fewer than 2 rows per fold
        split = rows.split(0)
        assert split.scheme == "holdout" and len(split.val) == 8
    monkeypatch.setattr(fitting, "OUT_OF_FOLD_ROWS", 79)
    rows = InMemoryRows(X, y)
    rows.prepare(NeuMissRegressor(ensemble_size=4), torch.device("cpu"))
    assert rows.split(0).scheme == "holdout"


def test_auto_validation_counts_a_class_target_by_its_rarer_classes(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    monkeypatch.setattr(fitting, "OUT_OF_FOLD_ROWS", 100)
    for y, scheme in ((np.repeat([0, 1], [160, 40]), "out_of_fold"),  # weighs as 80 rows
                      (np.repeat([0, 1], [120, 80]), "holdout"),  # as 160
                      (rng.normal(size=200), "holdout")):  # a response: its 200 rows
        model = NeuMissClassifier(ensemble_size=4) if y.dtype.kind == "i" else (
            NeuMissRegressor(ensemble_size=4))
        rows = InMemoryRows(X, y)
        rows.prepare(model, torch.device("cpu"))
        assert rows.split(0).scheme == scheme


@pytest.mark.parametrize("params, scheme, tol", [
    ({"ensemble_size": 2}, "out_of_fold", fitting.OUT_OF_FOLD_TOL),
    ({"ensemble_size": 1}, "holdout", TrainingConfig.tol),
    ({"ensemble_size": 2, "tol": 0.01}, "out_of_fold", 0.01),
    ({"ensemble_size": 1, "tol": 0.0}, "holdout", 0.0),
])
def test_auto_tol_counts_every_decrease_out_of_fold_only(data, monkeypatch, params, scheme,
                                                        tol):
    X, y = data
    seen = []

    def spy(*arguments, **options):
        seen.append(arguments[7].tol)
        return search_depths(*arguments, **options)

    monkeypatch.setattr(fitting, "search_depths", spy)
    model = NeuMissRegressor(depth=0, max_epochs=2, random_state=0, **params).fit(X, y)
    assert model.validation_scheme_ == scheme and seen == [tol]
    assert TrainingConfig.tol > fitting.OUT_OF_FOLD_TOL == 0.0


def test_out_of_fold_folds_are_stratified_when_every_class_fills_them():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    y = np.array([0] * 80 + [1] * 20)
    rows = InMemoryRows(X, y)
    rows.prepare(NeuMissClassifier(ensemble_size=5), torch.device("cpu"))
    split = rows.split(0)
    for k in range(5):
        assert np.bincount(split.y_val[split.val.held_out_by.numpy() == k]).tolist() == [16, 4]


@pytest.mark.parametrize("params, scheme, n_rows", [
    ({"ensemble_size": 2}, "out_of_fold", 80),
    ({"ensemble_size": 1}, "holdout", 8),
    ({"ensemble_size": 2, "validation_fraction": 0.25}, "holdout", 20),
    ({"ensemble_size": 2, "validation_fraction": 0.0}, "none", 0),
])
def test_the_fit_says_how_it_validated(data, params, scheme, n_rows):
    X, y = data
    model = NeuMissRegressor(depth=1, max_epochs=3, random_state=0, **params).fit(X, y)
    assert (model.validation_scheme_, model.n_validation_rows_) == (scheme, n_rows)
    assert model.validation_scheme_ in fitting.VALIDATION_SCHEMES
    assert np.isfinite(model.validation_score_)
    if scheme == "out_of_fold":
        assert len(model.members_) == 2
        assert model.members_[0]["val_loss"] != model.members_[1]["val_loss"]


def test_mask_skip_auto_gives_the_heads_the_mask_when_missingness_tells_the_target():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 3))
    y = X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=800)
    X_mcar = np.where(rng.random(X.shape) < 0.3, np.nan, X)
    X_self = X.copy()
    X_self[X[:, 0] > 0.5, 0] = np.nan  # self-masking
    params = {**ONE, "depth": 0, "random_state": 0}
    informed = NeuMissRegressor(**params).fit(X_self, y)
    assert informed.mask_skip == "auto" and informed.mask_skip_ is True
    assert all(member.mask_skip is not None for member in informed.network_.members)
    assert NeuMissRegressor(**params).fit(X_mcar, y).mask_skip_ is False
    # asked for, or refused, whatever the data say
    assert NeuMissRegressor(**params, mask_skip=False).fit(X_self, y).mask_skip_ is False
    assert NeuMissRegressor(**params, mask_skip=True).fit(X_mcar, y).mask_skip_ is True
    # the mask's term is what the validation rows preferred: it fits them better
    plain = NeuMissRegressor(**params, mask_skip=False).fit(X_self, y)
    assert informed.validation_score_ > plain.validation_score_


def test_a_chebyshev_start_kept_untrained_is_the_fitted_network():
    # 4,000 rows of 8 Gaussian MCAR features (450 training rows per feature), a tenth held
    # out: the linear heads on the Chebyshev-started block validate better than the chain.
    from neumiss.network import set_chebyshev_weights
    from neumiss.network._start import observed_moments
    from neumiss.simulation import make_regression

    X, y, _ = make_regression(4000, 8, mechanism="MCAR", random_state=0)
    model = NeuMissRegressor(random_state=0, validation_fraction=0.1).fit(X, y)
    tried = model.chebyshev_result_
    assert tried["epochs"] == 0 and tried["val_loss"] < min(
        r["val_loss"] for r in model.depth_results_.values())
    assert (model.best_depth_, model.weight_sharing_, model.mlp_depth_) == (16, "independent", 0)
    assert model.n_epochs_ == 0 and all(len(curve) == 0 for curve in model.history_.values())
    assert model.validation_score_ == pytest.approx(tried["val_score"])
    # its block is the Chebyshev steps of the training rows' moments
    plan_rows = InMemoryRows(X, y)
    plan_rows.prepare(NeuMissRegressor(validation_fraction=0.1), torch.device("cpu"))
    train = plan_rows.split(draw_seed(0)).train
    expected = NeuMissNetwork(8, depth=16, weight_sharing="independent", residual=True)
    set_chebyshev_weights(expected.block, *observed_moments(train, draw_seed(0)))
    for (name, value), other in zip(model.network_.block.state_dict().items(),
                                    expected.block.state_dict().values()):
        torch.testing.assert_close(value, other, msg=name)
    # its ONNX graph (steps of up to hundreds in its matrices) scores as predict does
    import onnxruntime as ort

    from neumiss.export import export_onnx

    session = ort.InferenceSession(export_onnx(model).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    missing = np.isnan(X[:2000])
    onnx_y = session.run(["y"], {"X": np.where(missing, 0.0, X[:2000]).astype(np.float32),
                                 "M": missing.astype(np.float32)})[0].ravel()
    np.testing.assert_allclose(onnx_y, model.predict(X[:2000]), rtol=1e-5, atol=1e-5)


def test_depth_auto_screens_its_depths_by_their_starts():
    # Correlated features (the conditional expectation recovers missing entries): depth
    # 16's start beats mean imputation's and it trains. Whatever the data, the depths
    # trained are depth 0 and those whose start validated (clearly) better (the outcomes
    # of the rule: tests/test_search.py).
    from neumiss.network import AUTO_DEPTHS
    from neumiss.simulation import make_regression

    params = dict(max_epochs=2, ensemble_size=2, mlp_depth=0, random_state=0)
    X, y, _ = make_regression(1500, 5, mechanism="MCAR", random_state=0)
    correlated = NeuMissRegressor(**params).fit(X, y)
    starts = correlated.depth_starts_
    assert list(starts) == list(AUTO_DEPTHS)
    assert starts[16]["val_loss"] < starts[0]["val_loss"]
    assert list(correlated.depth_results_) == list(AUTO_DEPTHS)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    y = X @ rng.normal(size=5) + rng.normal(size=1500)
    X[rng.random(X.shape) < 0.3] = np.nan
    independent = NeuMissRegressor(**params).fit(X, y)
    starts = independent.depth_starts_
    trained = list(independent.depth_results_)
    assert trained[0] == 0
    assert all(starts[d]["val_loss"] < starts[0]["val_loss"] for d in trained[1:])
    # explicit depths are all offered to the chain: nothing screened
    assert NeuMissRegressor(depth=[0, 2], **params).fit(X, y).depth_starts_ is None
