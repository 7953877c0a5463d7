"""ConformalClassifier calibrated by a split (``cv=None``; CV+ is
``test_intervals_classifier_cross``): the sets each score keeps, coverage on simulated
data (marginal and per group of rows with the same number of missing entries), nesting in
``alpha``, bad input, save and load.

Most tests use a fast base model (imputation + logistic regression) so that the
conformal logic is checked independently of network training.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.linear_model import LinearRegression

import neumiss
from neumiss.estimators import NeuMissClassifier
from neumiss.intervals import SET_METHODS, ConformalClassifier, assign_cells
from neumiss.intervals._sets import SCORE_TOLERANCE, mass_above

from ._interval_helpers import (
    ALPHA,
    TINY,
    conformal_rank,
    imputed_logistic,
    kth,
    simulated_classes,
)


def _fitted(method, n=400, seed=0, n_classes=3):
    X, labels, sample = simulated_classes(n, n_classes=n_classes, seed=seed)
    model = ConformalClassifier(imputed_logistic(), method=method, cv=None, random_state=seed)
    return model.fit(X, labels), sample(50, seed + 100)[0]


def test_the_methods_are_the_ones_the_parameter_accepts():
    assert tuple(SET_METHODS) == ConformalClassifier._parameter_constraints["method"].values


def test_lac_keeps_the_classes_within_the_conformal_quantile():
    model, X_test = _fitted("lac")
    scores = model.calibration_scores_
    proba = model.estimator_.predict_proba(X_test)
    q = kth(scores, conformal_rank(scores.size, ALPHA, 0.75))
    sets, sizes = model.predict_set(X_test)
    np.testing.assert_array_equal(sets, 1 - proba <= q)
    np.testing.assert_array_equal(sizes, sets.sum(axis=1))
    assert sets.dtype == bool and sets.shape == (50, 3)


def test_aps_keeps_the_classes_whose_mass_above_them_is_within_the_quantile():
    model, X_test = _fitted("aps")
    scores = model.calibration_scores_
    q = kth(scores, conformal_rank(scores.size, ALPHA, 0.75))
    sets, _ = model.predict_set(X_test)
    for p, kept in zip(model.predict_proba(X_test), sets):
        more_probable = np.array([p[p > value].sum() for value in p])
        np.testing.assert_array_equal(kept, more_probable <= q)
        assert kept[np.argmax(p)]  # the most probable class scores 0: never empty


def test_the_calibration_scores_are_those_of_the_own_class():
    X, labels, _ = simulated_classes(400)
    model = ConformalClassifier(imputed_logistic(), method="aps", cv=None,
                                random_state=0).fit(X, labels)
    cal = np.sort(np.random.RandomState(0).permutation(400)[:100])  # ceil(0.25 n), the split
    proba = model.predict_proba(X[cal])
    expected = [p[p > p[y]].sum() for p, y in zip(proba, labels[cal])]
    np.testing.assert_allclose(model.calibration_scores_, expected)


def test_mondrian_calibrates_each_cell_on_its_own_rows():
    model, X_test = _fitted("lac-mondrian", n=2000)
    cells = assign_cells(np.isnan(X_test), model.cell_patterns_, model.cell_of_count_)
    scores, cal_cells = model.calibration_scores_, model.calibration_cells_
    proba = model.predict_proba(X_test)
    sets, _ = model.predict_set(X_test)
    for p, kept, cell in zip(proba, sets, cells):
        own = scores[cal_cells == cell]
        if own.size >= 14:
            q = kth(own, conformal_rank(own.size, ALPHA, 0.75))
        else:
            q = max([kth(scores, conformal_rank(scores.size, ALPHA, 0.75)), *own])
        np.testing.assert_array_equal(kept, 1 - p <= q)


@settings(max_examples=30, deadline=None)
@given(proba=arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(2, 5)),
                    elements=st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0])))
def test_mass_above_sums_the_strictly_more_probable_classes(proba):
    expected = np.array([[row[row > value].sum() for value in row] for row in proba])
    np.testing.assert_allclose(mass_above(proba), expected)


# -------------------------------------------------------------------- coverage


@pytest.mark.parametrize("n_classes", [2, 4])
def test_coverage_on_simulated_data_marginally_and_per_group(n_classes):
    # Every group of rows with the same number of missing entries is covered by the
    # Mondrian methods (within the noise of its calibration rows); LAC sets are smaller
    # than all classes on average, and APS sets are never empty (the most probable class
    # scores 0). Neither over-covers by more than the calibration's confident rank.
    X, labels, sample = simulated_classes(6000, d=4, n_classes=n_classes, seed=5)
    X_test, labels_test = sample(8000, 6)
    n_missing = np.isnan(X_test).sum(axis=1)
    for method in SET_METHODS:
        model = ConformalClassifier(imputed_logistic(), method=method, random_state=0)
        sets, sizes = model.fit(X, labels).predict_set(X_test)
        covered = sets[np.arange(labels_test.size), labels_test]
        assert 0.88 <= covered.mean() <= 0.95, (method, covered.mean())
        if method.startswith("lac"):
            assert sizes.mean() < n_classes - 0.3, (method, sizes.mean())
        if method.endswith("mondrian"):
            groups = [covered[n_missing == q].mean() for q in range(5)
                      if (n_missing == q).sum() > 800]
            assert min(groups) >= 0.86, (method, groups)
        if method.startswith("aps"):
            assert sizes.min() >= 1


@settings(max_examples=20, deadline=None)
@given(alpha_low=st.floats(0.05, 0.5), alpha_high=st.floats(0.05, 0.5),
       method=st.sampled_from(list(SET_METHODS)))
def test_sets_are_nested_in_alpha(fitted_models, alpha_low, alpha_high, method):
    alpha_low, alpha_high = sorted((alpha_low, alpha_high))
    model, X_test = fitted_models[method]
    wide, wide_sizes = model.predict_set(X_test, alpha=alpha_low)
    narrow, narrow_sizes = model.predict_set(X_test, alpha=alpha_high)
    assert (wide | ~narrow).all()
    assert (wide_sizes >= narrow_sizes).all()


@pytest.fixture(scope="module")
def fitted_models():
    return {method: _fitted(method, n=300) for method in SET_METHODS}


# ------------------------------------------------------------------- bad input


def test_bad_input_is_refused_with_the_argument_named():
    X, labels, _ = simulated_classes(200)
    with pytest.raises(ValueError, match="alpha"):
        ConformalClassifier(imputed_logistic(), alpha=1.5).fit(X, labels)
    with pytest.raises(ValueError, match="method must be one of"):
        ConformalClassifier(method="raps").fit(X, labels)
    with pytest.raises(ValueError, match="predict_proba.*LinearRegression"):
        ConformalClassifier(LinearRegression()).fit(X, labels)
    with pytest.raises(ValueError, match="at least 2 classes"):
        ConformalClassifier(imputed_logistic()).fit(X, np.zeros(200, dtype=int))
    rare = labels.copy()
    rare[:] = 0
    rare[::2] = 1
    rare[3] = 7  # one row of class 7: the split leaves it to calibration or training
    with pytest.raises(ValueError, match="class 7 has no row among the rows that train"):
        for seed in range(20):  # a seed that puts it among the calibration rows
            ConformalClassifier(imputed_logistic(), cv=None, random_state=seed).fit(X, rare)
    with pytest.raises(ValueError, match="y mixes class labels"):
        ConformalClassifier(imputed_logistic()).fit(X, np.array([1, "a"] * 100, dtype=object))
    model, X_test = _fitted("lac")
    with pytest.raises(ValueError, match="alpha=0.01 needs at least 138 calibration rows"):
        model.predict_set(X_test, alpha=0.01)
    before = X_test.copy()
    model.predict_set(X_test)
    np.testing.assert_array_equal(before, X_test)


# ------------------------------------------------------------------ save, load


def test_a_neumiss_base_model_gives_sets_that_survive_save_and_load(tmp_path):
    X, labels, sample = simulated_classes(600, n_classes=2)
    X_test, _ = sample(40, 1)
    text = np.array(["no", "yes"])[labels]
    model = ConformalClassifier(NeuMissClassifier(**TINY), method="aps-mondrian",
                                random_state=0).fit(X, text)
    sets, sizes = model.predict_set(X_test)
    assert list(model.classes_) == ["no", "yes"] and sets.shape == (40, 2)
    assert set(model.predict(X_test)) <= {"no", "yes"}
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert isinstance(loaded, ConformalClassifier) and loaded.method == "aps-mondrian"
    loaded_sets, loaded_sizes = loaded.predict_set(X_test)
    np.testing.assert_array_equal(loaded_sets, sets)
    np.testing.assert_array_equal(loaded_sizes, sizes)
    np.testing.assert_array_equal(loaded.classes_, model.classes_)


@pytest.mark.parametrize("method", list(SET_METHODS))
def test_a_class_scoring_the_margin_up_to_float32_rounding_is_kept(method):
    # Two runtimes may round a float32 probability a few units apart: a class whose
    # score is the margin up to that is kept, one clearly beyond it is not.
    score = SET_METHODS[method].score
    proba = np.array([[0.7, 0.3]])
    margin = score.class_scores(proba)[0, 1]
    ulps = np.array([[0.7 + 4e-8, 0.3 - 4e-8]])  # about one float32 unit each way
    beyond = np.array([[0.7 + 2 * SCORE_TOLERANCE, 0.3 - 2 * SCORE_TOLERANCE]])
    assert score.kept(ulps, margin)[0, 1]
    assert not score.kept(beyond, margin)[0, 1]
