"""NeuMissClassifier(class_weight=...): class weights are case weights of every loss of
the fit, checked against scikit-learn's own weights and against explicit sample weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss
from sklearn.utils.class_weight import compute_sample_weight

import neumiss
from neumiss import NeuMissClassifier
from neumiss.estimators import fit_stream

from .conftest import FAST


def _imbalanced(n=400, seed=0):
    """(X, y) with labels "rare" (about 15%) and "common", NaN in X."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    logit = 1.5 * X[:, 0] - 2.5
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "rare", "common")
    X[rng.random(X.shape) < 0.2] = np.nan
    return X, y


def test_balanced_weights_are_scikit_learns_balanced_sample_weights():
    X, y = _imbalanced()
    by_class = NeuMissClassifier(**FAST, class_weight="balanced").fit(X, y)
    by_row = NeuMissClassifier(**FAST).fit(X, y, sample_weight=compute_sample_weight(
        "balanced", y))
    counts = np.array([np.sum(y == c) for c in by_class.classes_])
    np.testing.assert_allclose(by_class.class_weight_, len(y) / (2 * counts))
    weights = by_class.class_weight_
    assert (f"Class weights: common {weights[0]:.3g}, rare {weights[1]:.3g} "
            "(class_weight='balanced'") in by_class.summary()
    assert "Class weights" not in by_row.summary()
    np.testing.assert_array_equal(by_class.predict_proba(X), by_row.predict_proba(X))


def test_a_dict_of_weights_multiplies_the_sample_weights():
    X, y = _imbalanced(seed=1)
    sample_weight = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    by_class = NeuMissClassifier(**FAST, class_weight={"rare": 4.0}).fit(
        X, y, sample_weight=sample_weight)
    by_row = NeuMissClassifier(**FAST).fit(
        X, y, sample_weight=sample_weight * np.where(y == "rare", 4.0, 1.0))
    np.testing.assert_array_equal(by_class.class_weight_, [1.0, 4.0])  # common, rare
    np.testing.assert_array_equal(by_class.predict_proba(X), by_row.predict_proba(X))


def test_without_class_weight_every_class_weighs_one_and_nothing_changes():
    X, y = _imbalanced(seed=2)
    default = NeuMissClassifier(**FAST).fit(X, y)
    explicit = NeuMissClassifier(**FAST, class_weight={"rare": 1.0}).fit(X, y)
    np.testing.assert_array_equal(default.class_weight_, [1.0, 1.0])
    np.testing.assert_allclose(default.predict_proba(X), explicit.predict_proba(X),
                               rtol=1e-5, atol=1e-6)


def test_weighting_the_rare_class_up_predicts_it_more_often():
    X, y = _imbalanced(n=800, seed=3)
    plain = NeuMissClassifier(random_state=0).fit(X, y)
    balanced = NeuMissClassifier(random_state=0, class_weight="balanced").fit(X, y)
    rare = list(plain.classes_).index("rare")
    assert balanced.predict_proba(X)[:, rare].mean() > plain.predict_proba(X)[:, rare].mean() + 0.1
    assert np.mean(balanced.predict(X) == "rare") > np.mean(plain.predict(X) == "rare")


def test_the_temperature_is_fitted_on_the_weighted_validation_rows():
    X, y = _imbalanced(n=600, seed=4)
    X_val, y_val = _imbalanced(n=300, seed=5)
    model = NeuMissClassifier(**FAST, class_weight={"rare": 3.0}).fit(
        X, y, validation_data=(X_val, y_val))
    weighted = log_loss(y_val, model.predict_proba(X_val), labels=model.classes_,
                        sample_weight=np.where(y_val == "rare", 3.0, 1.0))
    assert model.calibration_result_["val_loss"] == pytest.approx(weighted, rel=1e-4)


@pytest.mark.parametrize("class_weight, message", [
    ({"unknown": 2.0}, r"class_weight has labels that are not classes of y: \['unknown'\] "
                       r"\(the classes: \['common', 'rare'\]\)"),
    ({"rare": -1.0}, r"class_weight\['rare'\] must be a finite number >= 0, got -1.0"),
    ({"rare": "high"}, r"class_weight\['rare'\] must be a finite number >= 0, got 'high'"),
    ({"rare": float("nan")}, r"class_weight\['rare'\] must be a finite number >= 0"),
    ("auto", r"class_weight must be None, 'balanced' or a dict of class labels to weights"),
])
def test_bad_class_weights_are_refused_by_name(class_weight, message):
    X, y = _imbalanced(n=100)
    X_before = X.copy()
    with pytest.raises(ValueError, match=message):
        NeuMissClassifier(**FAST, class_weight=class_weight).fit(X, y)
    np.testing.assert_array_equal(X, X_before)


def test_a_stream_fit_refuses_class_weight():
    X, y = _imbalanced(n=100)
    with pytest.raises(ValueError, match="class_weight applies to fit.X, y. only, not to a "
                                         "fit of a stream"):
        fit_stream(NeuMissClassifier(**FAST, class_weight="balanced"), [(X, y)])


def test_a_data_parallel_fit_refuses_class_weight():
    from neumiss.estimators._parallel_fit import check_parallel_params

    with pytest.raises(ValueError, match="class_weight applies to fit.X, y. only, not to a "
                                         "data-parallel fit"):
        check_parallel_params(NeuMissClassifier(class_weight={"rare": 2.0}))
    check_parallel_params(NeuMissClassifier())  # without class weights: accepted


def test_a_model_file_written_before_class_weight_loads_unweighted():
    path = Path(__file__).parents[1] / "export" / "fixtures" / "classifier" / "estimator.pt"
    assert "class_weight" not in torch.load(path, weights_only=True)["params"]
    assert neumiss.load(path).get_params()["class_weight"] is None
