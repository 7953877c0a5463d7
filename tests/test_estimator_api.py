"""scikit-learn API compliance of NeuMissRegressor and NeuMissClassifier."""

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.network import (
    AUTO_DEPTHS,
    AUTO_MLP_DEPTHS,
    DEPTH_PATIENCE,
    UNTIE_ROWS_PER_PARAMETER,
    History,
    train,
)

from .conftest import gaussian_regression, paper


# Every check of scikit-learn's suite applies and passes, except
# check_array_api_input, which scikit-learn itself skips unless SCIPY_ARRAY_API
# is set (torch estimators take numpy input only), and the exact equivalence of
# weights and repeated rows (below). The first test lowers max_epochs to keep the
# suite fast; the second runs the checks with the defaults.
def _expected_failures(estimator):
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "stochastic mini-batch training: integer weights and repeated rows give "
            "different batches, so equal but not identical fits"
        ),
    }


@pytest.mark.slow
@parametrize_with_checks(
    [NeuMissRegressor(max_epochs=20, depth=[1, 2], ensemble_size=2),
     NeuMissClassifier(max_epochs=20, depth=[1, 2], ensemble_size=2)],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.slow
@parametrize_with_checks([NeuMissRegressor(), NeuMissClassifier()],
                         expected_failed_checks=_expected_failures)
def test_sklearn_checks_pass_with_the_defaults(estimator, check):
    check(estimator)


# With a callback: fitting never changes the parameter's (each fit calls copies), so the
# checks that parameters are left as given, clones and pickles hold with one.
@pytest.mark.slow
@parametrize_with_checks(
    [NeuMissRegressor(max_epochs=5, depth=1, ensemble_size=2, callbacks=[History()])],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_checks_pass_with_a_callback(estimator, check):
    check(estimator)


def test_allow_nan_tag():
    assert paper(NeuMissRegressor).__sklearn_tags__().input_tags.allow_nan
    assert paper(NeuMissClassifier).__sklearn_tags__().input_tags.allow_nan


@pytest.mark.slow
def test_pipeline_cross_val_score_and_grid_search(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, max_epochs=20, random_state=0)
    pipe = make_pipeline(FunctionTransformer(), model)
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    assert scores.mean() > 0.5
    grid = GridSearchCV(
        paper(NeuMissRegressor, max_epochs=10, random_state=0), {"depth": [1, 2]}, cv=2
    ).fit(X, y)
    assert grid.best_params_["depth"] in (1, 2)


def test_dataframe_feature_names_and_missing_markers():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(200, 3))
    y = values.sum(axis=1)
    frame = pd.DataFrame(values, columns=["age", "bmi", "bp"])
    frame["age"] = frame["age"].astype(object)
    frame.loc[::3, "age"] = None
    frame["bp"] = frame["bp"].astype("Float64")
    frame.loc[::4, "bp"] = pd.NA
    original = frame.copy()
    model = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(frame, y)
    assert list(model.feature_names_in_) == ["age", "bmi", "bp"]
    assert model.n_features_in_ == 3
    pred = model.predict(frame)
    assert pred.shape == (200,) and np.all(np.isfinite(pred))
    pd.testing.assert_frame_equal(frame, original)  # never mutated
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame[["bp", "bmi", "age"]])


def test_random_state_makes_fit_repeatable(small_regression):
    X, y = small_regression
    a = paper(NeuMissRegressor, max_epochs=5, random_state=3).fit(X, y).predict(X)
    b = paper(NeuMissRegressor, max_epochs=5, random_state=3).fit(X, y).predict(X)
    c = paper(NeuMissRegressor, max_epochs=5, random_state=4).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_fitted_attributes_and_history(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, max_epochs=7, patience=100, random_state=0).fit(X, y)
    assert model.n_epochs_ == 7
    for key in ("train_loss", "val_loss", "val_score", "lr"):
        assert len(model.history_[key]) == 7
    assert model.best_depth_ == 3
    if model.best_epoch_ == 0:  # no epoch beat the start (the head's linear fit)
        assert model.validation_score_ > max(model.history_["val_score"])
    else:
        assert model.best_epoch_ == 1 + int(np.argmin(model.history_["val_loss"]))
        best_score = model.history_["val_score"][model.best_epoch_ - 1]
        assert model.validation_score_ == pytest.approx(best_score)


@pytest.mark.slow
def test_early_stopping_restores_best_weights(small_regression):
    from sklearn.metrics import r2_score

    X, y = small_regression
    X_val, y_val = X[:60], y[:60]
    # A large learning rate makes the validation loss bounce: the best epoch is not the last.
    model = paper(NeuMissRegressor, max_epochs=30, patience=5, learning_rate=0.05, random_state=1)
    model.fit(X[60:], y[60:], validation_data=(X_val, y_val))
    losses = model.history_["val_loss"]
    assert min(losses) == losses[model.best_epoch_ - 1]
    # Stopped by patience (tol=0: the last improvement is the best epoch), before max_epochs.
    assert model.n_epochs_ == model.best_epoch_ + 5 < 30
    # The restored network is the best epoch's, not the last one's.
    assert r2_score(y_val, model.predict(X_val)) == pytest.approx(
        max(model.history_["val_score"]), abs=1e-4
    )
    assert max(model.history_["val_score"]) > model.history_["val_score"][-1]


@pytest.mark.slow
def test_depth_auto_picks_best_validation_depth(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, depth="auto", max_epochs=10, random_state=0).fit(X, y)
    results, starts = model.depth_results_, model.depth_starts_
    tried = list(results)
    # without the residual connection the moments cannot start depth 16: it is offered
    # without comparing starts (only depth 0's is computed)
    assert list(starts) == [0]
    assert tried == list(AUTO_DEPTHS[: len(tried)]) and len(tried) >= 2
    losses = [results[depth]["val_loss"] for depth in tried]
    # A depth replaces the best only when clearly better (one standard error), so the
    # best is the first depth or has a lower loss; the search went on until
    # DEPTH_PATIENCE depths in a row did not replace it.
    best = tried.index(model.best_depth_)
    assert best == 0 or losses[best] < losses[0]
    assert len(tried) == len(AUTO_DEPTHS) or len(tried) - 1 - best == DEPTH_PATIENCE
    assert model.network_.block.depth == model.best_depth_
    assert model.get_params()["depth"] == "auto"
    assert all(r["epochs"] >= 1 and r["seconds"] > 0 for r in results.values())
    # val_score is the validation R² of the depth's best epoch.
    assert results[model.best_depth_]["val_score"] == pytest.approx(model.validation_score_)


@pytest.mark.slow
def test_weight_sharing_auto_unties_the_shared_matrix_and_keeps_the_better_network():
    # 1,000 rows, d = 4: at depth 3 the untied block has (3 + 1) * 16 parameters,
    # and the 900 training rows exceed UNTIE_ROWS_PER_PARAMETER times that.
    draw, *_ = gaussian_regression(4, 1000, np.random.default_rng(1), missing_rate=0.3)
    X, y = draw(1000)
    assert 900 >= UNTIE_ROWS_PER_PARAMETER * (3 + 1) * 4**2
    model = paper(NeuMissRegressor,
        depth=[3], weight_sharing="auto", residual=True, max_epochs=8, random_state=0
    ).fit(X, y)
    assert model.get_params()["weight_sharing"] == "auto"
    untied = model.untied_result_
    assert untied is not None and untied["epochs"] >= 1  # the fine-tune ran
    # the network kept: the shared chain's, its untied fine-tune or, after them, the
    # untrained Chebyshev candidate (one matrix per iteration), whichever validates lowest
    candidates = [("shared", model.depth_results_[3]), ("independent", untied)]
    if model.chebyshev_result_ is not None:
        candidates.append(("independent", model.chebyshev_result_))
    kept, summary = min(candidates, key=lambda candidate: candidate[1]["val_loss"])
    assert model.weight_sharing_ == kept == model.network_.block.weight_sharing
    assert model.validation_score_ == pytest.approx(summary["val_score"])
    # Depths below 2 have no iteration matrix to untie.
    shallow = paper(NeuMissRegressor, depth=1, weight_sharing="auto", max_epochs=2, random_state=0)
    shallow.fit(X, y)
    assert shallow.untied_result_ is None and shallow.weight_sharing_ == "shared"
    fixed = paper(NeuMissRegressor, depth=3, weight_sharing="shared", max_epochs=2, random_state=0)
    fixed.fit(X, y)
    assert fixed.weight_sharing_ == "shared" and fixed.untied_result_ is None


@pytest.mark.parametrize("target", ["linear", pytest.param("nonlinear", marks=pytest.mark.slow)])
def test_mlp_depth_auto_keeps_the_head_with_the_lower_validation_loss(target):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=1500)
    if target == "nonlinear":  # nothing a linear head can fit
        y = 3 * np.abs(X[:, 0]) + 2 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=1500)
    X[rng.random(X.shape) < 0.2] = np.nan
    model = NeuMissRegressor(depth=[1, 2], weight_sharing="shared", ensemble_size=2,
                             max_epochs=60, random_state=0).fit(X, y)
    assert model.get_params()["mlp_depth"] == "auto"
    chain = model.depth_results_[model.best_depth_]
    head = model.head_results_[AUTO_MLP_DEPTHS[1]]
    assert head["epochs"] >= 1
    kept = AUTO_MLP_DEPTHS[1] if head["val_loss"] < chain["val_loss"] else AUTO_MLP_DEPTHS[0]
    assert model.mlp_depth_ == kept
    if target == "nonlinear":  # the linear head fine-tuned from the chain's cannot fit it
        assert model.mlp_depth_ == 2 and chain["val_score"] > head["val_score"] + 0.1
    for member in model.network_.members:  # every member trains the kept head
        assert (member.skip is not None) == (kept > 0)
        assert len(member.head) == 2 * kept + 1
    fixed = NeuMissRegressor(depth=1, mlp_depth=1, ensemble_size=1, max_epochs=2,
                             random_state=0).fit(X, y)
    assert fixed.mlp_depth_ == 1 and fixed.head_results_ == {}


def test_weight_sharing_auto_does_not_untie_with_few_rows_per_parameter(small_regression):
    X, y = small_regression  # 270 training rows, d = 5
    needed = UNTIE_ROWS_PER_PARAMETER * (3 + 1) * 5**2
    assert 270 < needed
    model = paper(NeuMissRegressor, depth=[3], weight_sharing="auto", max_epochs=3, random_state=0)
    model.fit(X, y)
    assert model.untied_result_ is None and model.weight_sharing_ == "shared"
    assert model.network_.block.weight_sharing == "shared"


def test_depth_candidates_are_searched_in_increasing_order(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, depth=[3, 1, 3], max_epochs=3, random_state=0).fit(X, y)
    assert list(model.depth_results_) == [1, 3]
    assert model.get_params()["depth"] == [3, 1, 3]  # stored untouched


@pytest.mark.parametrize("depth", [-1, [], [1, -2], "deep", 2.5, True, [2, None]])
def test_invalid_depth_is_refused(small_regression, depth):
    X, y = small_regression
    with pytest.raises(ValueError, match="depth must be an integer >= 0, 'auto' or"):
        paper(NeuMissRegressor, depth=depth).fit(X, y)


def test_lr_schedule_reduces_learning_rate(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor,
        max_epochs=40, patience=40, lr_patience=0, random_state=0, learning_rate=0.01
    ).fit(X, y)
    lrs = model.history_["lr"]
    assert lrs[0] == pytest.approx(0.01)
    assert min(lrs) < 0.01
    assert all(b <= a for a, b in zip(lrs, lrs[1:]))


def test_tol_counts_only_relative_improvements(small_regression):
    X, y = small_regression
    y = y + np.sin(3 * np.nan_to_num(X[:, 0]))  # a nonlinear part the MLP head learns
    # tol = 0.9: no epoch after the first lowers the loss by 90%, so training
    # stops after `patience` more epochs, keeping the weights of the lowest loss.
    strict = paper(NeuMissRegressor, max_epochs=40, patience=3, tol=0.9, batch_size=64,
                   mlp_depth=2, random_state=0).fit(X, y)
    assert strict.n_epochs_ == 1 + 3
    val_loss = strict.history_["val_loss"]
    assert strict.best_epoch_ == 1 + int(np.argmin(val_loss))
    assert min(val_loss) < val_loss[0]  # later epochs did lower it, by less than tol
    loose = paper(NeuMissRegressor, max_epochs=40, patience=3, tol=0.0, batch_size=64,
                  mlp_depth=2, random_state=0).fit(X, y)
    assert loose.n_epochs_ > strict.n_epochs_


@pytest.mark.parametrize("kwargs", [{"optimizer": "sgd", "learning_rate": 0.01},
                                    {"mlp_depth": 2, "mlp_width": 16},
                                    {"weight_sharing": "shared", "residual": True}])
def test_options_fit_and_predict(small_regression, kwargs):
    X, y = small_regression
    model = paper(NeuMissRegressor, max_epochs=30, batch_size=8, random_state=0, **kwargs).fit(X, y)
    assert model.score(X, y) > 0.5


def test_rows_with_every_feature_missing_get_a_prediction(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(X, y)
    X_new = np.full((2, X.shape[1]), np.nan)
    pred = model.predict(X_new)
    assert np.all(np.isfinite(pred))
    assert pred[0] == pred[1]


@pytest.mark.slow
def test_classifier_binary_and_multiclass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    score = X[:, 0] + X[:, 1]
    y3 = np.digitize(score, [-0.7, 0.7])  # three classes
    labels = np.array(["low", "mid", "high"])[y3]
    X[rng.random(X.shape) < 0.2] = np.nan
    multi = paper(NeuMissClassifier, max_epochs=40, random_state=0).fit(X, labels)
    assert list(multi.classes_) == ["high", "low", "mid"]
    proba = multi.predict_proba(X)
    assert proba.shape == (600, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert multi.decision_function(X).shape == (600, 3)
    assert multi.score(X, labels) > 0.7
    binary = paper(NeuMissClassifier, max_epochs=40, random_state=0).fit(X, score > 0)
    assert binary.decision_function(X).shape == (600,)
    np.testing.assert_array_equal(binary.predict(X), binary.decision_function(X) > 0)
    assert binary.score(X, score > 0) > 0.8


def test_impute_returns_observed_values_and_fills_missing(small_regression):
    X, y = small_regression
    model = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(X, y)
    imputed = model.impute(X)
    observed = ~np.isnan(X)
    np.testing.assert_allclose(imputed[observed], X[observed])
    assert np.all(np.isfinite(imputed))


def test_validation_data_replaces_the_internal_split(small_regression, monkeypatch):
    import neumiss.network._search

    X, y = small_regression
    X_val, y_val = X[:60], y[:60]
    rows_seen = []

    def spy(network, train_data, val_data, *args, **kwargs):
        rows_seen.append((len(train_data), len(val_data)))
        return train(network, train_data, val_data, *args, **kwargs)

    monkeypatch.setattr(neumiss.network._search, "train", spy)
    model = paper(NeuMissRegressor, max_epochs=8, patience=100, random_state=0)
    model.fit(X[60:], y[60:], validation_data=(X_val, y_val))
    assert rows_seen == [(240, 60)]  # every given row trains, (X_val, y_val) validates
    # The recorded validation R2 is the R2 on (X_val, y_val) of the restored weights.
    from sklearn.metrics import r2_score

    assert model.validation_score_ == pytest.approx(r2_score(y_val, model.predict(X_val)), abs=1e-4)
    with pytest.raises(ValueError, match="validation_data must be a pair"):
        model.fit(X, y, validation_data=X_val)
    with pytest.raises(ValueError, match="^validation_data: X_val: X has 2 features"):
        model.fit(X, y, validation_data=(X_val[:, :2], y_val))
    with pytest.raises(ValueError, match="one value per row"):
        model.fit(X, y, validation_data=(X_val, y_val[:5]))


def test_classifier_validation_data_rejects_unseen_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    labels = np.where(X[:, 0] > 0, "a", "b")
    clf = paper(NeuMissClassifier, max_epochs=3, random_state=0)
    clf.fit(X, labels, validation_data=(X[:20], labels[:20]))
    assert clf.score(X, labels) > 0.6
    with pytest.raises(ValueError, match=r"labels not seen in y: \['c'\]"):
        clf.fit(X, labels, validation_data=(X[:2], np.array(["a", "c"])))


def test_unit_sample_weights_change_nothing(small_regression):
    X, y = small_regression
    plain = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(X, y)
    weighted = paper(NeuMissRegressor, max_epochs=5, random_state=0)
    weighted.fit(X, y, sample_weight=np.ones(300))
    np.testing.assert_allclose(weighted.predict(X), plain.predict(X), rtol=1e-5, atol=1e-6)


def test_zero_weights_silence_corrupted_rows():
    draw, *_ = gaussian_regression(4, 1200, np.random.default_rng(2), missing_rate=0.2)
    X, y = draw(1200)
    X_test, y_test = draw(500)
    corrupted = y.copy()
    corrupted[:400] = 50.0 * np.random.default_rng(3).normal(size=400)
    weight = np.r_[np.zeros(400), np.ones(800)]
    kwargs = {"depth": 2, "random_state": 0}
    ignoring = paper(NeuMissRegressor, **kwargs).fit(X, corrupted, sample_weight=weight)
    fooled = paper(NeuMissRegressor, **kwargs).fit(X, corrupted)
    assert ignoring.score(X_test, y_test) > 0.8 > fooled.score(X_test, y_test)


@pytest.mark.parametrize(
    "weight, message",
    [(-np.ones(300), "Negative values in data passed to `sample_weight`"),
     (np.zeros(300), "Sample weights must contain at least one non-zero number"),
     (np.ones(5), r"sample_weight.shape == \(5,\), expected \(300,\)")],
)
def test_bad_sample_weights_are_named(small_regression, weight, message):
    X, y = small_regression
    with pytest.raises(ValueError, match=message):
        paper(NeuMissRegressor, max_epochs=2).fit(X, y, sample_weight=weight)


def test_automatic_learning_rate_shrinks_with_the_number_of_encoded_columns():
    # auto_learning_rate itself: tests/test_training.py.
    rng = np.random.default_rng(0)
    y = rng.normal(size=40)
    for n_columns, expected in ((5, 1e-2), (160, 1e-2 * (64 / 160) ** 0.5)):
        X = rng.normal(size=(40, n_columns))
        model = paper(NeuMissRegressor, depth=0, max_epochs=1, random_state=0).fit(X, y)
        assert model.learning_rate == "auto"
        assert model.learning_rate_ == pytest.approx(expected)
        assert model.history_["lr"][0] == pytest.approx(expected)
    # Each category seen at fit is one encoded column: 3 text columns of up to 30 values.
    frame = pd.DataFrame({f"c{j}": np.char.add("v", rng.integers(0, 30, size=40).astype(str))
                          for j in range(3)})
    model = paper(NeuMissRegressor, depth=0, max_epochs=1, random_state=0).fit(frame, y)
    n_columns = sum(len(np.unique(frame[c])) for c in frame)
    assert model.encoder_.n_features_out_ == n_columns > 64
    assert model.learning_rate_ == pytest.approx(1e-2 * (64 / n_columns) ** 0.5)
    given = paper(NeuMissRegressor, depth=0, max_epochs=1, learning_rate=0.2).fit(frame, y)
    assert given.learning_rate_ == 0.2 and given.history_["lr"][0] == pytest.approx(0.2)


_FIT_IN_A_PROCESS = """
import hashlib, numpy as np, torch
from neumiss import NeuMissRegressor
from neumiss.simulation import make_regression
X, y, _ = make_regression(1600, 12, mechanism="gaussian_sm", random_state=0)
model = NeuMissRegressor(random_state=0, max_epochs=15).fit(X, y)
digest = hashlib.sha256(model.predict(X).tobytes())
digest.update(np.asarray(model.history_["val_loss"]).tobytes())
print(digest.hexdigest(), model.best_depth_, model.mask_skip_)
"""


@pytest.mark.slow
def test_a_fit_repeats_bit_for_bit_in_another_process():
    # In one process the buffers' addresses repeat; across processes they do not, and a
    # computation whose last bits follow them (torch's CPU products over many rows did,
    # in the ridge start) makes Adam's first steps, hence the whole fit, differ.
    import subprocess
    import sys

    runs = [subprocess.run([sys.executable, "-c", _FIT_IN_A_PROCESS], capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout == runs[1].stdout
