"""NeuMiss learns the Bayes predictor of Gaussian data with MCAR values (paper eq. 3)."""

import numpy as np
import pytest
from sklearn.metrics import r2_score

from neumiss import NeuMissRegressor

from .conftest import bayes_by_inversion, gaussian_regression

#: Fits taking seconds each: ``pytest -m 'not slow'`` leaves them out.
pytestmark = pytest.mark.slow


def test_r2_within_002_of_bayes_predictor():
    rng = np.random.default_rng(42)
    draw, mean, cov, coef = gaussian_regression(10, 20_000, rng, missing_rate=0.5, snr=10)
    X_train, y_train = draw(20_000)
    X_test, y_test = draw(10_000)
    bayes_r2 = r2_score(y_test, bayes_by_inversion(X_test, mean, cov, coef))
    model = NeuMissRegressor(depth=5, random_state=0).fit(X_train, y_train)
    gap = r2_score(y_test, model.predict(X_test)) - bayes_r2
    assert -0.02 <= gap <= 0.01, f"R2 - Bayes rate = {gap:.4f}"
