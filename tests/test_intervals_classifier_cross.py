"""Cross-conformal prediction sets (CV+) of ConformalClassifier on small tables: the rule
against explicit loops, its reduction to the split rule, when ``cv="auto"`` uses it,
Mondrian cells large enough or not, coverage, nesting, ``summary``, bad input, save and
load."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import neumiss
from neumiss.estimators import NeuMissClassifier
from neumiss.intervals import SET_METHODS, ConformalClassifier, assign_cells
from neumiss.intervals._cells import own_cells
from neumiss.intervals._cross import _plus_sets
from neumiss.intervals._ranks import upper_rank
from neumiss.intervals._sets import SCORE_TOLERANCE

from ._interval_helpers import ALPHA, TINY, imputed_logistic, kth, simulated_classes


def _cross(method="lac", n=200, seed=0, cv=10, n_classes=3):
    X, labels, sample = simulated_classes(n, n_classes=n_classes, seed=seed)
    model = ConformalClassifier(imputed_logistic(), method=method, cv=cv,
                                random_state=seed).fit(X, labels)
    return model, X, labels, sample(40, seed + 100)[0]


def _class_scores(method, model, X):
    """``s_k(x)`` of every class (n, n_classes) by the score's formula, row by row."""
    proba = model.predict_proba(X)
    if method.startswith("lac"):
        return 1 - proba
    return np.array([[p[p > value].sum() for value in p] for p in proba])


def _sets_by_hand(model, method, X_test, rows_of, alpha=ALPHA):
    """Class k of x is kept iff #{i in rows_of(x) : E_i < s_k(x; model_fold(i)) - t} <
    ceil((1 - alpha)(n + 1)) (``upper_rank``: whole numbers up to float error are whole),
    t the score tolerance, with explicit loops."""
    scores, folds = model.calibration_scores_, model.calibration_folds_
    fold_scores = [_class_scores(method, m, X_test) for m in model.fold_estimators_]
    expected = np.zeros((len(X_test), len(model.classes_)), dtype=bool)
    for row in range(len(X_test)):
        rows = rows_of(row)
        rank = upper_rank(rows.size, alpha)
        for k in range(len(model.classes_)):
            below = sum(scores[i] < fold_scores[folds[i]][row, k] - SCORE_TOLERANCE
                        for i in rows)
            expected[row, k] = below < rank
    return expected


def test_cv_sets_the_folds_and_a_refit_as_a_split_forgets_them():
    three, _, _, _ = _cross(cv=3, n=150)
    assert len(three.fold_estimators_) == 3 and set(three.calibration_folds_) == {0, 1, 2}
    assert not hasattr(three.set_params(cv=None).fit(*simulated_classes(150)[:2]),
                       "fold_estimators_")


@pytest.mark.parametrize("method", ["lac", "aps"])
def test_every_row_is_scored_by_the_model_that_did_not_see_it(method):
    model, X, labels, _ = _cross(method)
    assert model.cross_conformal_ and len(model.fold_estimators_) == 10
    assert model.calibration_scores_.shape == model.calibration_folds_.shape == (200,)
    for k, fold_model in enumerate(model.fold_estimators_):
        held = model.calibration_folds_ == k
        expected = _class_scores(method, fold_model, X[held])[np.arange(held.sum()),
                                                              labels[held]]
        np.testing.assert_allclose(model.calibration_scores_[held], expected, atol=1e-12)
        refit = imputed_logistic().fit(X[~held], labels[~held])  # the other folds' rows
        np.testing.assert_allclose(fold_model.predict_proba(X[:5]), refit.predict_proba(X[:5]))
    np.testing.assert_allclose(model.predict_proba(X[:5]),  # estimator_: all rows
                               imputed_logistic().fit(X, labels).predict_proba(X[:5]))


@pytest.mark.parametrize("method", ["lac", "aps"])
def test_cv_plus_sets_by_hand(method):
    model, _, _, X_test = _cross(method)
    expected = _sets_by_hand(model, method, X_test, lambda row: np.arange(200))
    sets, sizes = model.predict_set(X_test)
    np.testing.assert_array_equal(sets, expected)
    np.testing.assert_array_equal(sizes, expected.sum(axis=1))
    assert sets.dtype == bool and sets.shape == (40, 3)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(9, 60), n_classes=st.integers(2, 4), alpha=st.floats(0.1, 0.5),
       seed=st.integers(0, 2**16))
@example(n=53, n_classes=2, alpha=1 / 3, seed=466)  # a rank that is whole up to float error
def test_with_one_model_the_rule_is_the_split_rule(n, n_classes, alpha, seed):
    # K = 1: every row is scored by the same model, so s_k(x) is compared with all
    # scores at once; scores on a coarse grid make ties (E_i = s_k(x)) common, and class
    # scores moved off the grid by fractions of the tolerance make near-ties: the split
    # rule keeps a class within the tolerance above its margin.
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 8, n) / 8
    nudge = rng.choice([-2, -0.5, 0, 0.5, 2], (1, 30, n_classes)) * SCORE_TOLERANCE
    class_scores = rng.integers(0, 9, (1, 30, n_classes)) / 8 + nudge
    # the rank as the package rounds it: (1 - 1/3)(53 + 1) is 36 up to float error, which
    # np.ceil made 37 (upper_rank is tested on its own in test_intervals_ranks.py)
    q = kth(scores, upper_rank(n, alpha))
    np.testing.assert_array_equal(_plus_sets(class_scores, np.zeros(n, dtype=int), scores,
                                             alpha), class_scores[0] <= q + SCORE_TOLERANCE)


@pytest.mark.parametrize("method", ["lac-mondrian", "aps-mondrian"])
def test_mondrian_calibrates_a_large_cell_on_its_rows_and_a_small_one_on_all(method):
    # At alpha = 0.01 a cell needs 99 rows: on 400 rows some cells hold them, some not.
    model, _, _, X_test = _cross(method, n=400)
    alpha = 0.01
    own = own_cells(model._cross_calibrated()[1], alpha)
    sizes = np.bincount(model.calibration_cells_)
    np.testing.assert_array_equal(own, sizes >= 99)
    assert own.any() and not own.all()
    cells = assign_cells(np.isnan(X_test), model.cell_patterns_, model.cell_of_count_)
    expected = _sets_by_hand(
        model, method, X_test, lambda row: np.flatnonzero(
            model.calibration_cells_ == cells[row]) if own[cells[row]] else np.arange(400),
        alpha)
    np.testing.assert_array_equal(model.predict_set(X_test, alpha=alpha)[0], expected)
    text = model.summary()
    assert "cross-conformal (CV+, 10 folds), every one of the 400 rows" in text
    assert f"per missingness pattern cell for {sizes.size} of {sizes.size} cells" in text


def test_coverage_and_size_on_small_tables():
    # Tables of 200 and 300 rows, 3 classes: CV+ covers about 1 - alpha over the
    # repetitions, with smaller sets than a split's (75 or 50 calibration rows).
    coverage, ratio = {}, []
    for n in (200, 300):
        for seed in range(6):
            X, labels, sample = simulated_classes(n, seed=seed)
            X_test, labels_test = sample(3000, seed + 50)
            sizes = {}
            for cv in (None, "auto"):
                model = ConformalClassifier(imputed_logistic(), method="lac-mondrian", cv=cv,
                                            random_state=seed).fit(X, labels)
                sets, size = model.predict_set(X_test)
                sizes[cv] = size.mean()
                if cv:
                    coverage.setdefault(n, []).append(
                        sets[np.arange(labels_test.size), labels_test].mean())
            ratio.append(sizes["auto"] / sizes[None])
    for n, values in coverage.items():
        assert np.mean(values) >= 0.88, (n, values)
        assert np.mean(values) <= 0.95, (n, values)
    assert np.mean(ratio) < 1, ratio


@settings(max_examples=20, deadline=None)
@given(alpha_low=st.floats(0.05, 0.5), alpha_high=st.floats(0.05, 0.5),
       method=st.sampled_from(list(SET_METHODS)))
def test_cv_plus_sets_are_nested_in_alpha_within_a_regime(cross_models, alpha_low,
                                                          alpha_high, method):
    # n = 300: every cell holds the rows alpha >= 0.05 needs (19), so no cell switches
    # between its own rows and all rows over this range.
    alpha_low, alpha_high = sorted((alpha_low, alpha_high))
    model, X_test = cross_models[method]
    calibration = model._cross_calibrated()[1]
    assert (own_cells(calibration, alpha_low) == own_cells(calibration, alpha_high)).all()
    wide, wide_sizes = model.predict_set(X_test, alpha=alpha_low)
    narrow, narrow_sizes = model.predict_set(X_test, alpha=alpha_high)
    assert (wide | ~narrow).all() and (wide_sizes >= narrow_sizes).all()
    if method.startswith("aps"):
        assert narrow_sizes.min() >= 1  # the most probable class scores 0


@pytest.fixture(scope="module")
def cross_models():
    return {method: _cross(method, n=300)[::3] for method in SET_METHODS}


def test_bad_input_is_refused():
    X, labels, _ = simulated_classes(100)
    with pytest.raises(ValueError, match="alpha=0.01 needs at least 99 calibration rows"):
        ConformalClassifier(imputed_logistic(), alpha=0.01, cv=5).fit(X[:50], labels[:50])
    rare = labels.copy()
    rare[7] = 9  # one row of class 9: the fold that holds it trains without it
    with pytest.raises(ValueError, match=r"class 9 has no row among the training rows of fold "
                       r"\d of the cross-conformal fit \(cv='auto'.*cv=None \(a split\)"):
        ConformalClassifier(imputed_logistic(), random_state=0).fit(X, rare)
    model, _, _, X_test = _cross()
    with pytest.raises(ValueError, match="no single margin; predict_set gives"):
        model.cell_margins()
    with pytest.raises(ValueError, match="alpha=0.001 needs at least 999 calibration rows"):
        model.predict_set(X_test, alpha=0.001)


def test_a_cross_conformal_model_survives_save_and_load(tmp_path):
    X, labels, sample = simulated_classes(150, n_classes=2)
    X_test, _ = sample(40, 1)
    text = np.array(["no", "yes"])[labels]
    model = ConformalClassifier(NeuMissClassifier(**TINY), method="aps-mondrian", cv=3,
                                random_state=0).fit(X, text)
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert loaded.cross_conformal_ and len(loaded.fold_estimators_) == 3 and loaded.cv == 3
    for got, expected in zip(loaded.predict_set(X_test), model.predict_set(X_test)):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), model.predict_proba(X_test))
    assert loaded.summary() == model.summary() and "CV+, 3 folds" in loaded.summary()
