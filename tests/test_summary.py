"""``summary()``: what a fit chose and on which rows it validated, as R's summary()."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from neumiss import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor

from .conftest import FAST
from .test_integer_levels import month_year_table


def test_a_regressor_names_its_network_columns_and_validation_rows():
    frame, y = month_year_table(n=6000)
    model = NeuMissRegressor(**FAST, integer_levels=True, log_target=True).fit(frame, np.exp(y))
    lines = model.summary().splitlines()
    assert lines[0].startswith(f"NeuMissRegressor: depth {model.best_depth_} (")
    assert f"{model.n_epochs_} epochs (best {model.best_epoch_})" in lines[0]
    assert lines[1] == ("Input: 8 columns -> 16 encoded: an indicator per integer value of "
                        "quarter (4), year (4)")
    assert model.log_target_ and lines[2].startswith("Target: fitted on the log scale")
    assert model.validation_scheme_ == "holdout" and model.n_validation_rows_ == 600
    assert lines[3] == f"Validation: 600 rows held out; R² {model.validation_score_:.4f}"


def test_a_classifier_tells_out_of_fold_validation_and_its_log_loss():
    frame, y = month_year_table(n=600)
    frame = frame.assign(group=np.where(y > 1, "high", "low")).astype({"group": "category"})
    model = NeuMissClassifier(**FAST).fit(frame, y > 0)
    text = model.summary()
    assert "1 categorical (2 one-hot)" in text
    assert model.validation_scheme_ == "out_of_fold"
    assert text.splitlines()[-2] == (
        "Validation: 600 rows out of fold (every row, each by the member that did not train "
        f"on it); log loss {-model.validation_score_:.4f}")
    assert model.validation_score_ < 0  # minus the log loss: the summary shows it positive
    calibration = model.calibration_result_
    assert text.splitlines()[-1] == (
        f"Calibration: logits divided by the temperature {model.temperature_:.3g} "
        f"(validation log loss {-model.validation_score_:.4f} -> "
        f"{calibration['val_loss']:.4f})")


def test_a_blended_head_says_its_mlp_weight():
    X = np.random.default_rng(0).normal(size=(200, 3))
    model = NeuMissRegressor(**{**FAST, "depth": 0}, mlp_depth=2).fit(X, X.sum(axis=1))
    assert "MLP head (2 hidden layers of" in model.summary()
    assert "blended" not in model.summary() and model.mlp_weight_ == 1.0
    model.mlp_weight_ = 0.35  # as fitted_linear_head keeps a blend
    assert "blended with the linear head (MLP weight 0.35)" in model.summary()


def test_without_validation_and_unfitted():
    X = np.random.default_rng(0).normal(size=(200, 3))
    model = NeuMissQuantileRegressor(**FAST, validation_fraction=0).fit(X, X.sum(axis=1))
    assert model.summary().endswith(
        "Validation: none (validation_fraction=0: the training loss decided)")
    assert "Input: 3 columns -> 3 encoded\n" in model.summary()
    with pytest.raises(NotFittedError):
        NeuMissRegressor().summary()
