"""Tests of the baseline regressors (neumiss.baselines._baselines) and of the registry of
baselines (neumiss.baselines._registry) that the benchmark suites and the R adapter use."""

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from neumiss.baselines import (
    BASELINES,
    MISSING_CATEGORY,
    TASKS,
    EMRegressor,
    ImputeMaskLinearRegressor,
    ImputeMaskMLPRegressor,
    MICERegressor,
    NormEMRegressor,
    make_baseline,
)
from neumiss.simulation import conditional_mean

from .conftest import check_anchor_on_mixed_table, mixed_table

ESTIMATORS = [
    EMRegressor(),
    MICERegressor(random_state=0),
    ImputeMaskLinearRegressor(),
    # Small candidate widths and few epochs: the API checks need the width search to run,
    # not to fit well (test_imputation_baselines_beat_the_mean checks the defaults learn).
    ImputeMaskMLPRegressor(width_factors=(1, 2), max_iter=80, random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    # Every check applies: no expected failures. IterativeImputer may warn that its
    # tolerance was not reached on the checks' tiny data sets; that is not under test here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_allow_nan_tag(estimator):
    assert estimator.__sklearn_tags__().input_tags.allow_nan


def _joint_gaussian(d, rng, rank=None):
    """Mean and covariance of (y, x): x ~ N(mu, B B^T + diag), y = 1 + sum(x) + noise."""
    B = rng.standard_normal((d, rank or max(1, d // 2)))
    cov_x = B @ B.T + np.diag(rng.uniform(0.01, 0.1, d))
    mu = rng.standard_normal(d)
    beta = np.ones(d)
    var_signal = beta @ cov_x @ beta
    mean = np.concatenate([[1 + beta @ mu], mu])
    cov = np.empty((d + 1, d + 1))
    cov[0, 0] = var_signal * 1.1  # signal-to-noise ratio 10
    cov[0, 1:] = cov[1:, 0] = cov_x @ beta
    cov[1:, 1:] = cov_x
    return mean, cov


def _sample(mean, cov, n, rng, missing_rate):
    Z = rng.multivariate_normal(mean, cov, n)
    y, X = Z[:, 0], Z[:, 1:].copy()
    X[rng.random(X.shape) < missing_rate] = np.nan
    return X, y, Z


def _oracle(X, mean, cov):
    """Bayes predictor E[y | x_obs] from the true joint Gaussian."""
    return conditional_mean(np.column_stack([np.full(len(X), np.nan), X]), mean, cov)[:, 0]


def _naive_em(Z, n_iter):
    """Textbook EM for a Gaussian with missing values: a Python loop over patterns."""
    n, dim = Z.shape
    mean = np.nanmean(Z, axis=0)
    cov = np.diag(np.nanvar(Z, axis=0))
    masks = np.isnan(Z)
    patterns = {tuple(m) for m in masks}
    for _ in range(n_iter):
        filled = np.where(masks, 0.0, Z)
        cond_cov = np.zeros((dim, dim))
        for pattern in patterns:
            mis = np.array(pattern)
            obs = ~mis
            rows = np.flatnonzero((masks == mis).all(axis=1))
            regression = cov[np.ix_(mis, obs)] @ np.linalg.inv(cov[np.ix_(obs, obs)])
            centered = Z[np.ix_(rows, obs)] - mean[obs]
            filled[np.ix_(rows, mis)] = mean[mis] + centered @ regression.T
            block = cov[np.ix_(mis, mis)] - regression @ cov[np.ix_(obs, mis)]
            cond_cov[np.ix_(mis, mis)] += len(rows) * block
        mean = filled.mean(axis=0)
        centered = filled - mean
        cov = (centered.T @ centered + cond_cov) / n
    return mean, cov


def test_em_reaches_the_same_maximum_as_a_textbook_em():
    rng = np.random.default_rng(0)
    mean, cov = _joint_gaussian(3, rng, rank=3)
    X, y, _ = _sample(mean, cov, 400, rng, missing_rate=0.3)
    expected_mean, expected_cov = _naive_em(np.column_stack([y, X]), n_iter=2000)
    for accelerate in (True, False):
        em = EMRegressor(tol=1e-13, ridge=0.0, max_iter=5000, accelerate=accelerate).fit(X, y)
        assert em.converged_
        np.testing.assert_allclose(em.mean_, expected_mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(em.cov_, expected_cov, rtol=1e-5, atol=1e-5)


def test_em_recovers_gaussian_and_predicts_like_the_oracle():
    rng = np.random.default_rng(1)
    d = 5
    mean, cov = _joint_gaussian(d, rng)
    X, y, Z = _sample(mean, cov, 5000, rng, missing_rate=0.3)
    em = EMRegressor().fit(X, y)
    assert em.converged_
    assert em.mean_.shape == (d + 1,) and em.cov_.shape == (d + 1, d + 1)

    def rel_err(a, b):
        return np.linalg.norm(a - b) / np.linalg.norm(b)

    complete_mean = Z.mean(axis=0)
    complete_cov = np.cov(Z, rowvar=False, bias=True)
    # Close to the truth (sampling error) and closer still to the complete-data MLE.
    assert rel_err(em.cov_, cov) < 0.05
    assert rel_err(em.cov_, complete_cov) < 0.03
    assert np.abs(em.mean_ - mean).max() < 0.1 * np.sqrt(np.diag(cov)).max()
    assert np.abs(em.mean_ - complete_mean).max() < 0.05 * np.sqrt(np.diag(cov)).max()
    # A covariance from mean-imputed data is far off: the bounds above discriminate.
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    assert rel_err(np.cov(imputed, rowvar=False), cov[1:, 1:]) > 0.1

    X_test, y_test, _ = _sample(mean, cov, 5000, rng, missing_rate=0.3)
    oracle_r2 = r2_score(y_test, _oracle(X_test, mean, cov))
    em_r2 = em.score(X_test, y_test)
    assert em_r2 > oracle_r2 - 0.005
    assert em_r2 > ImputeMaskLinearRegressor().fit(X, y).score(X_test, y_test) + 0.01


@pytest.mark.parametrize("accelerate", [True, False])
def test_em_objective_never_decreases(accelerate):
    rng = np.random.default_rng(2)
    mean, cov = _joint_gaussian(6, rng)
    X, y, _ = _sample(mean, cov, 1000, rng, missing_rate=0.5)
    em = EMRegressor(tol=1e-9, accelerate=accelerate).fit(X, y)
    history = em.loglik_history_
    assert len(history) >= 5
    assert np.all(np.diff(history) >= -1e-12 * np.abs(history[:-1]))
    assert history[-1] > history[0]


def test_acceleration_needs_fewer_e_steps():
    rng = np.random.default_rng(3)
    mean, cov = _joint_gaussian(6, rng)
    X, y, _ = _sample(mean, cov, 1000, rng, missing_rate=0.5)
    plain = EMRegressor(tol=1e-8, max_iter=2000, accelerate=False).fit(X, y)
    fast = EMRegressor(tol=1e-8, max_iter=2000, accelerate=True).fit(X, y)
    assert fast.n_iter_ < plain.n_iter_ / 2
    np.testing.assert_allclose(fast.cov_, plain.cov_, rtol=1e-3, atol=1e-3 * cov.max())


def test_em_handles_collinear_and_constant_features():
    """Duplicated and constant columns make the covariance singular: the ridge copes."""
    rng = np.random.default_rng(4)
    mean, cov = _joint_gaussian(4, rng)
    X, y, Z = _sample(mean, cov, 2000, rng, missing_rate=0.3)
    duplicate = np.where(rng.random(len(X)) < 0.3, np.nan, Z[:, 1])
    X_more = np.column_stack([X, duplicate, np.full(len(X), 2.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning, no ConvergenceWarning
        em = EMRegressor().fit(X_more, y)
    assert np.isfinite(em.cov_).all()
    assert np.linalg.eigvalsh(em.cov_).min() > 0
    # The copy of x_0 helps when x_0 is missing; the constant changes nothing.
    assert em.score(X_more, y) > EMRegressor().fit(X, y).score(X, y)


def test_em_without_ridge_on_a_constant_feature():
    """Singular covariance and no ridge: pseudo-inverses, same predictions as with a ridge."""
    rng = np.random.default_rng(11)
    mean, cov = _joint_gaussian(3, rng)
    X, y, _ = _sample(mean, cov, 500, rng, missing_rate=0.3)
    X = np.column_stack([X, np.full(len(X), 5.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = EMRegressor(ridge=0.0).fit(X, y)
    np.testing.assert_allclose(plain.predict(X), EMRegressor().fit(X, y).predict(X), atol=1e-3)


def test_em_warns_when_max_iter_is_reached():
    rng = np.random.default_rng(5)
    mean, cov = _joint_gaussian(4, rng)
    X, y, _ = _sample(mean, cov, 300, rng, missing_rate=0.5)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        em = EMRegressor(max_iter=2, tol=0.0).fit(X, y)
    assert em.n_iter_ == 2 and not em.converged_


def test_em_prediction_for_rows_without_observed_features():
    rng = np.random.default_rng(6)
    mean, cov = _joint_gaussian(3, rng)
    X, y, _ = _sample(mean, cov, 500, rng, missing_rate=0.3)
    em = EMRegressor().fit(X, y)
    pred = em.predict(np.full((2, 3), np.nan))
    np.testing.assert_allclose(pred, em.mean_[0])


@pytest.mark.parametrize(
    "estimator",
    [
        MICERegressor(random_state=0),
        ImputeMaskLinearRegressor(),
        ImputeMaskMLPRegressor(random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_imputation_baselines_beat_the_mean(estimator):
    rng = np.random.default_rng(7)
    mean, cov = _joint_gaussian(5, rng)
    X, y, _ = _sample(mean, cov, 2000, rng, missing_rate=0.3)
    X_test, y_test, _ = _sample(mean, cov, 2000, rng, missing_rate=0.3)
    X_before = X.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # IterativeImputer's tolerance
        estimator.fit(X, y)
    np.testing.assert_array_equal(X, X_before)
    assert estimator.score(X_test, y_test) > 0.5


def test_impute_mask_linear_regression_uses_zero_and_mask():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((200, 3))
    X[rng.random(X.shape) < 0.3] = np.nan
    mask = np.isnan(X)
    # y depends on whether a value is missing: only the mask columns can explain that.
    y = np.nan_to_num(X) @ [1.0, -2.0, 0.5] + 3.0 * mask[:, 0]
    model = ImputeMaskLinearRegressor().fit(X, y)
    np.testing.assert_allclose(model.regressor_.coef_, [1.0, -2.0, 0.5, 3.0, 0, 0], atol=1e-8)
    np.testing.assert_allclose(model.predict(X), y, atol=1e-8)


def test_mlp_width_selection():
    rng = np.random.default_rng(9)
    mean, cov = _joint_gaussian(4, rng)
    X, y, _ = _sample(mean, cov, 1000, rng, missing_rate=0.3)
    model = ImputeMaskMLPRegressor(width_factors=(1, 3), max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert set(model.validation_scores_) == {4, 12}
    assert model.best_width_ == max(model.validation_scores_, key=model.validation_scores_.get)
    assert model.mlp_.hidden_layer_sizes == (model.best_width_,)
    fixed = ImputeMaskMLPRegressor(width=7, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed.fit(X, y)
    assert fixed.best_width_ == 7 and not hasattr(fixed, "validation_scores_")


def test_dataframe_input():
    rng = np.random.default_rng(10)
    mean, cov = _joint_gaussian(3, rng)
    X, y, _ = _sample(mean, cov, 300, rng, missing_rate=0.2)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    em = EMRegressor().fit(frame, y)
    np.testing.assert_array_equal(em.feature_names_in_, ["a", "b", "c"])
    np.testing.assert_allclose(em.predict(frame), EMRegressor().fit(X, y).predict(X))


@pytest.mark.parametrize(
    "estimator",
    [EMRegressor(), MICERegressor(), ImputeMaskLinearRegressor(), ImputeMaskMLPRegressor()],
    ids=lambda e: type(e).__name__,
)
def test_bad_data_raise_clear_errors(estimator):
    X = np.array([[1.0, np.nan], [2.0, 3.0], [0.5, 1.0], [1.5, 2.0]])
    y = np.array([1.0, 2.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="[Ii]nfinity"):
        estimator.fit(np.where(X == 3.0, np.inf, X), y)
    with pytest.raises(ValueError, match="NaN"):
        estimator.fit(X, np.array([1.0, np.nan, 0.0, 1.0]))


@pytest.mark.parametrize(
    ("estimator", "message"),
    [
        (EMRegressor(max_iter=0), "EMRegressor: max_iter must be an integer >= 1, got 0"),
        (EMRegressor(tol=-1.0), "tol must be a finite number >= 0"),
        (EMRegressor(ridge="big"), "ridge must be a finite number >= 0, got 'big'"),
        (ImputeMaskMLPRegressor(width=0), "width must be None or an integer >= 1"),
        (
            ImputeMaskMLPRegressor(width_factors=(0,)),
            "width_factors must be a non-empty list of integers >= 1",
        ),
        (
            ImputeMaskMLPRegressor(validation_fraction=1.5),
            r"validation_fraction must be a number in \(0, 1\)",
        ),
        (ImputeMaskMLPRegressor(learning_rate_init="fast"), "learning_rate_init must be 'auto'"),
        (MICERegressor(max_iter=-1), "MICERegressor: max_iter must be an integer >= 0"),
    ],
)
def test_bad_parameters_raise_clear_errors(estimator, message):
    X = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=message):
        estimator.fit(X, X[:, 0])


@pytest.mark.parametrize(
    ("estimator", "name"),
    [
        (EMRegressor(max_iter=True), "max_iter"),
        (EMRegressor(tol=False), "tol"),
        (EMRegressor(ridge=np.True_), "ridge"),
        (EMRegressor(accelerate=1), "accelerate"),
        (EMRegressor(accelerate="yes"), "accelerate"),
        (MICERegressor(max_iter=True), "max_iter"),
        (ImputeMaskMLPRegressor(width=True), "width"),
        (ImputeMaskMLPRegressor(width_factors=(1, True)), "width_factors"),
        (ImputeMaskMLPRegressor(validation_fraction=True), "validation_fraction"),
        (ImputeMaskMLPRegressor(batch_size=True), "batch_size"),
        (ImputeMaskMLPRegressor(max_iter=True), "max_iter"),
        (ImputeMaskMLPRegressor(alpha=False), "alpha"),
    ],
    ids=repr,
)
def test_booleans_are_not_numbers_and_numbers_not_booleans(estimator, name):
    X = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=f"^{type(estimator).__name__}: {name} must be "):
        estimator.fit(X, X[:, 0])


def test_numpy_scalars_are_valid_parameters():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    X[rng.random(X.shape) < 0.2] = np.nan
    y = np.nan_to_num(X).sum(axis=1)
    numpy_em = EMRegressor(max_iter=np.int64(50), tol=np.float64(1e-4), accelerate=np.True_)
    np.testing.assert_array_equal(
        numpy_em.fit(X, y).predict(X), EMRegressor(max_iter=50).fit(X, y).predict(X)
    )
    mlp = ImputeMaskMLPRegressor(width=np.int64(3), max_iter=np.int64(5), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert mlp.fit(X, y).best_width_ == 3


def test_em_rejects_a_feature_never_observed():
    X = np.random.default_rng(0).standard_normal((20, 3))
    X[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"no observed value: \[1\]"):
        EMRegressor().fit(X, X[:, 0])


# ------------------------------------------------------------------ the registry
def _small_task(task, seed=0, n=120, d=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X.sum(axis=1) + 0.1 * rng.standard_normal(n)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X, (y if task == "regression" else (y > 0).astype(int))


@pytest.mark.parametrize("name, task", [(name, task) for name, baseline in BASELINES.items()
                                        for task in baseline.tasks if name != "norm_em"])
def test_every_baseline_builds_unfitted_and_fits_data_with_nan(name, task):
    if BASELINES[name].unavailable():
        pytest.skip(BASELINES[name].unavailable())
    model = _quick(make_baseline(name, task, random_state=0))
    assert not hasattr(model, "n_features_in_")
    X, y = _small_task(task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        predictions = model.fit(X[:90], y[:90]).predict(X[90:])
    assert predictions.shape == (30,) and np.isfinite(predictions).all()
    if task == "classification":
        assert set(predictions) <= {0, 1}


def test_registry_names_tasks_and_classes():
    assert set(TASKS) == {"regression", "classification"}
    assert all(baseline.name == name and set(baseline.tasks) <= set(TASKS)
               for name, baseline in BASELINES.items())
    assert isinstance(make_baseline("norm_em"), NormEMRegressor)  # R loads only when fitted
    assert isinstance(make_baseline("em"), EMRegressor)
    assert type(make_baseline("hgb", "classification")).__name__ == \
        "HistGradientBoostingClassifier"


def test_random_state_reaches_the_seeded_baselines():
    assert make_baseline("mice_lr", random_state=3).random_state == 3
    assert make_baseline("mlp", random_state=4).random_state == 4
    assert make_baseline("hgb", random_state=5).random_state == 5
    imputer = make_baseline("mice_linear", "classification", random_state=6).steps[0][1]
    assert imputer.random_state == 6
    assert make_baseline("em", random_state=7).get_params() == EMRegressor().get_params()


def test_make_baseline_refuses_unknown_names_and_tasks():
    with pytest.raises(ValueError, match=r"unknown baseline 'svm'; known: em, norm_em"):
        make_baseline("svm")
    with pytest.raises(ValueError, match=r"baseline 'em' takes regression, not 'classification'"):
        make_baseline("em", "classification")


def test_mean_mask_linear_takes_arrays_and_frames_alike():
    X, y = _small_task("classification", seed=1)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    from_array = make_baseline("mean_mask_linear", "classification").fit(X, y)
    from_frame = make_baseline("mean_mask_linear", "classification").fit(frame, y)
    np.testing.assert_array_equal(from_array.predict_proba(X), from_frame.predict_proba(frame))
    # a category column is one-hot encoded, its missing values as their own category
    frame["g"] = pd.Categorical(np.where(np.arange(len(y)) % 3 == 0, None, "u"))
    model = make_baseline("mean_mask_linear", "regression").fit(frame, y.astype(float))
    assert model[-1].coef_.shape == (3 + 3 + 2,)  # numbers, their indicators, 'u' and missing


def _r_adapter():
    path = Path(__file__).resolve().parent.parent / "r_wrapper" / "inst" / "python" / "neumiss_r.py"
    spec = importlib.util.spec_from_file_location("neumiss_r", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def columns(A):
    """A matrix as the R side sends it: its values column by column."""
    return list(A.T.ravel())


def test_r_adapter_builds_its_baselines_from_the_registry():
    adapter = _r_adapter()
    X, y = _small_task("regression", seed=2)
    result = adapter.baseline_r2("EMRegressor", columns(X[:90]), 90, list(y[:90]),
                                 columns(X[90:]), 30, 3, list(y[90:]))
    expected = r2_score(y[90:], make_baseline("em").fit(X[:90], y[:90]).predict(X[90:]))
    assert result == {"r2": expected, "warnings": []}
    labels = np.where(y > 0, "yes", "no")
    result = adapter.baseline_classification("MeanMaskLogistic", columns(X[:90]), 90,
                                             list(labels[:90]), columns(X[90:]), 30, 3)
    model = make_baseline("mean_mask_linear", "classification", 0).fit(X[:90], labels[:90])
    assert result["classes"] == ["no", "yes"]
    np.testing.assert_array_equal(result["proba"], model.predict_proba(X[90:]).ravel())
    result = adapter.baseline_r2("MeanMaskLinear", columns(X[:90]), 90, list(y[:90]),
                                 columns(X[90:]), 30, 3, list(y[90:]))
    model = make_baseline("mean_mask_linear", "regression").fit(X[:90], y[:90])
    assert result["r2"] == r2_score(y[90:], model.predict(X[90:]))
    with pytest.raises(ValueError, match=r"unknown regression baseline 'MICELogistic'"):
        adapter.baseline_r2("MICELogistic", [], 0, [], [], 0, 3, [])


# ------------------------------------------------------------- the boosting anchors
def _quick(model):
    """CatBoost with 100 rounds instead of its 1000, pytabkit's networks with 8 epochs: the
    same code paths in a fraction of the time."""
    if "iterations" in model.get_params():
        return model.set_params(iterations=100)
    final = model[-1] if hasattr(model, "steps") else model
    if "n_epochs" in final.get_params():
        final.set_params(n_epochs=8)
    return model


@pytest.mark.parametrize("name", ["catboost", "lightgbm"])
@pytest.mark.parametrize("task", TASKS)
def test_boosting_anchors_take_missing_values_and_categories_as_they_are(name, task):
    pytest.importorskip(name, reason=f"{name} is installed by pip install 'neumiss[anchors]'")
    X, y = mixed_table()
    check_anchor_on_mixed_table(lambda: _quick(make_baseline(name, task, random_state=0)),
                                X, y, task, min_gain=1.0)


def test_catboost_reads_a_missing_category_as_a_category_of_its_own():
    pytest.importorskip("catboost", reason="installed by pip install 'neumiss[anchors]'")
    X, y = mixed_table()
    model = _quick(make_baseline("catboost", random_state=0)).fit(X, y)
    assert model.categorical_ == ["level"]
    table = model._table(X)
    assert set(table["level"]) == {"low", "high", MISSING_CATEGORY}
    assert X["level"].isna().any()  # the caller's table is not modified


def test_a_missing_anchor_package_is_named_with_how_to_install_it(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "lightgbm" else find_spec(name, *a))
    reason = BASELINES["lightgbm"].unavailable()
    assert "lightgbm not installed" in reason and "neumiss[anchors]" in reason
    assert BASELINES["hgb"].unavailable() is None
