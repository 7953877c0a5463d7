"""Shared fixtures: Gaussian data with MCAR missing values and its exact Bayes predictor,
small linear data sets, fitted models and their model file, and helpers for messages.

The Bayes predictor here is written independently of the package (one explicit
matrix inversion per missingness pattern, paper eq. 3) so that tests can
compare the package against it.
"""

import os

# One thread per test process, set before numpy and torch load their pools: the test
# command runs two processes (pytest -n 2) on a machine of two cores, where pools of as
# many threads as cores each would oversubscribe them (tests/test_fitting.py: 11.1 CPU s
# with them, 7.2 with one thread). Child processes that tests start inherit it.
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402


def gaussian_regression(d, n, rng, missing_rate=0.5, snr=10.0):
    """Paper's setting: Sigma = B B^T + diag(eps), y = 1 + sum(X) + noise at SNR ``snr``."""
    B = rng.normal(size=(d, max(1, d // 2)))
    cov = B @ B.T + np.diag(rng.uniform(0.01, 0.1, size=d))
    mean = rng.normal(size=d)
    coef = np.ones(d)
    noise_sd = np.sqrt(coef @ cov @ coef / snr)

    def draw(n_rows):
        X = rng.multivariate_normal(mean, cov, size=n_rows)
        y = 1.0 + X @ coef + rng.normal(scale=noise_sd, size=n_rows)
        X[rng.random(X.shape) < missing_rate] = np.nan
        return X, y

    return draw, mean, cov, coef


def bayes_by_inversion(X, mean, cov, coef, intercept=1.0):
    """f*(x_obs, m) of paper eq. 3 with an explicit inverse of Sigma_obs per distinct pattern."""
    out = np.empty(X.shape[0])
    mask = np.isnan(X)
    patterns, inverse = np.unique(mask, axis=0, return_inverse=True)
    for k, mis in enumerate(patterns):
        rows = np.flatnonzero(inverse.ravel() == k)
        obs = ~mis
        filled = np.tile(mean, (rows.size, 1))
        filled[:, obs] = X[np.ix_(rows, obs)]
        if mis.any() and obs.any():
            inv_obs = np.linalg.inv(cov[np.ix_(obs, obs)])
            centred = X[np.ix_(rows, obs)] - mean[obs]
            filled[:, mis] = mean[mis] + centred @ inv_obs @ cov[np.ix_(obs, mis)]
        out[rows] = intercept + filled @ coef
    return out


@pytest.fixture
def small_regression():
    """(X, y) with 300 rows, 5 features, 30% MCAR NaN."""
    rng = np.random.default_rng(0)
    draw, *_ = gaussian_regression(5, 300, rng, missing_rate=0.3)
    return draw(300)


#: The paper's single network with the training settings of the mechanics tests
#: (history lengths, epochs, depth search): fast, and one network to inspect.
PAPER = {
    "depth": 3, "mlp_depth": 0, "weight_sharing": "independent", "residual": False,
    "ensemble_size": 1, "patience": 8, "lr_patience": 2, "tol": 0.0, "spline": False,
}


def paper(estimator_class, **params):
    """``estimator_class`` configured as :data:`PAPER`, with ``params`` on top."""
    return estimator_class(**{**PAPER, **params})


#: Quick fits (one Neumann iteration, a few epochs) for tests of behaviour, not accuracy.
FAST = {"depth": 1, "max_epochs": 4, "random_state": 0}

#: Hypothesis settings of the property tests that refit or reuse module fixtures.
PROPERTY = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def linear_data(n=200, d=3, seed=0, missing=0.2):
    """(X, y): columns of different means and scales, y linear in X plus noise, MCAR NaN."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1) + np.arange(d)
    y = X @ np.linspace(1.0, -1.0, d) + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < missing] = np.nan
    return X, y


def one_line_error(text: str) -> str:
    """The text of a one-line error message; fails on tracebacks and several lines."""
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture(scope="session")
def fitted():
    """A :data:`FAST` regressor and binary classifier fitted on ``linear_data(300, 3)``."""
    from neumiss import NeuMissClassifier, NeuMissRegressor

    X, y = linear_data(300, 3)
    regressor = paper(NeuMissRegressor, **FAST).fit(X, y)
    classifier = paper(NeuMissClassifier, **FAST).fit(X, y > np.median(y))
    return regressor, classifier


@pytest.fixture(scope="session")
def saved(tmp_path_factory, fitted):
    """``(path, payload)``: the :func:`fitted` regressor's model file and its content."""
    import torch

    path = tmp_path_factory.mktemp("files") / "model.pt"
    fitted[0].save(path)
    return path, torch.load(path, weights_only=True)


def interrupt_after_first_row(process, runs, what: str, timeout: float = 120.0) -> None:
    """Wait until ``runs`` (a runs.csv the benchmark ``process`` writes) holds a row,
    so that an interruption finds finished work to keep; skip the test if the
    benchmark ended before that."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if runs.exists() and len(runs.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    if process.poll() is not None:
        pytest.skip(f"the {what} finished before it could be interrupted")


def mixed_table(seed=0, n=240, complete_column=False):
    """Numbers with NaN, a category with missing cells, a nullable boolean (and, with
    ``complete_column``, a column without missing values); a target that depends on each
    (2 units on the category). Returns ``(X, y)``: a DataFrame and (n,) floats."""
    rng = np.random.default_rng(seed)
    columns = {
        "x": rng.standard_normal(n),
        "level": pd.Categorical(rng.choice(["low", "high", None], n)),
        "flag": pd.array(rng.choice([True, False, None], n), dtype="boolean"),
    }
    if complete_column:
        columns["complete"] = rng.standard_normal(n)
    X = pd.DataFrame(columns)
    X.loc[rng.random(n) < 0.2, "x"] = np.nan
    y = X["x"].fillna(0).to_numpy() + 2.0 * (X["level"] == "high") + X["flag"].fillna(False)
    return X, np.asarray(y, dtype=float)


def check_anchor_on_mixed_table(build, X, y, task, min_gain, exact=True):
    """Fit ``build()`` (a fresh anchor for ``task``) on 200 rows of :func:`mixed_table`'s
    ``X, y`` and check it: finite predictions for the other 40; for regression, the
    category's 2 units learnt (a gap above ``min_gain``); for classification, probabilities
    summing to 1; and the same predictions from a second seeded fit (``exact``, or to
    float precision). Returns the fitted model."""
    target = y if task == "regression" else (y > 1).astype(int)
    model = build().fit(X[:200], target[:200])
    predictions = model.predict(X[200:])
    assert predictions.shape == (len(X) - 200,) and np.isfinite(predictions).all()
    if task == "regression":
        high = (X["level"][200:] == "high").to_numpy()
        assert predictions[high].mean() - predictions[~high].mean() > min_gain
    else:
        assert list(model.classes_) == [0, 1]
        assert np.allclose(model.predict_proba(X[200:]).sum(axis=1), 1.0)
    again = build().fit(X[:200], target[:200]).predict(X[200:])
    np.testing.assert_allclose(again, predictions, rtol=0 if exact else 1e-7)
    return model


def pytest_terminal_summary(terminalreporter):
    """In the summary, one line on the real-data tests skipped for their data sets (the
    test command does not export them): how many, and how to run them."""
    skipped = [report for report in terminalreporter.stats.get("skipped", [])
               if "scripts/setup_realdata.sh" in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} real-data tests skipped: their data sets are not exported here. "
            "To run them: bash scripts/setup_realdata.sh (Debian's R data packages, "
            "exported once), then the tests again.")
