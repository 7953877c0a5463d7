"""Tests of neumiss.baselines._rbridge: R's norm EM through rpy2.

Tests running R skip (with the reason) when rpy2, R or the R package norm is absent, as in
CI where norm (CRAN only) cannot be installed; the error-message tests run everywhere.
"""

import importlib.abc
import subprocess
import sys
import types

import numpy as np
import pytest
from sklearn.base import clone

from neumiss.baselines import _rbridge as rbridge


def _norm_unavailable_reason():
    try:
        rbridge.load_norm()
    except ImportError as exc:
        return str(exc)
    return None


_REASON = _norm_unavailable_reason()
needs_norm = pytest.mark.skipif(_REASON is not None, reason=f"R's norm unavailable: {_REASON}")


def _gaussian_data(n=300, d=4, missing=0.3, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    cov = a @ a.T + d * np.eye(d)
    X = rng.multivariate_normal(rng.normal(size=d), cov, size=n)
    X[rng.random(X.shape) < missing] = np.nan
    return X


def _em_step(X, mean, cov):
    """One EM update of (mean, cov), written row by row (independent of the package)."""
    n, d = X.shape
    filled = np.empty_like(X)
    extra = np.zeros((d, d))  # sum of conditional covariances of the missing blocks
    for i, row in enumerate(X):
        mis = np.isnan(row)
        obs = ~mis
        filled[i] = row
        if mis.any():
            if obs.any():
                gain = cov[np.ix_(mis, obs)] @ np.linalg.inv(cov[np.ix_(obs, obs)])
                filled[i, mis] = mean[mis] + gain @ (row[obs] - mean[obs])
                extra[np.ix_(mis, mis)] += cov[np.ix_(mis, mis)] - gain @ cov[np.ix_(obs, mis)]
            else:
                filled[i] = mean
                extra += cov
    new_mean = filled.mean(axis=0)
    centred = filled - new_mean
    return new_mean, (centred.T @ centred + extra) / n


# ---------------------------------------------------------------- without R
@pytest.mark.slow  # a fresh interpreter, like the architecture's import tests
def test_import_neumiss_does_not_import_rpy2():
    code = "import sys, neumiss, neumiss.baselines._rbridge; assert 'rpy2' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_rpy2_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rpy2", None)  # makes `import rpy2` fail
    with pytest.raises(ImportError, match=r"pip install 'neumiss\[r\]'.*rpy2==3\.5\.17"):
        rbridge.em_norm(np.eye(3))


class _FailingR(importlib.abc.MetaPathFinder):
    """Import hook failing like rpy2 3.6 loading an R older than 4.3."""

    def find_spec(self, name, path, target=None):
        if name.startswith("rpy2.robjects"):
            raise OSError("/usr/lib/libR.so: undefined symbol: R_getVar")
        return None


def test_old_r_error_asks_for_rpy2_3_5_17(monkeypatch):
    fake = types.ModuleType("rpy2")
    fake.__path__ = []
    monkeypatch.setitem(sys.modules, "rpy2", fake)
    for name in [m for m in sys.modules if m.startswith("rpy2.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_FailingR(), *sys.meta_path])
    with pytest.raises(ImportError, match=r"R_getVar.*R >= 4\.3.*rpy2==3\.5\.17"):
        rbridge.em_norm(np.eye(3))


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.ones(5), "2-D"),
        (np.array([[1.0, np.nan], [2.0, np.nan]]), r"no observed value in column\(s\) \[1\]"),
        (np.array([[1.0, np.inf], [2.0, 1.0]]), "infinite"),
    ],
)
def test_em_norm_bad_input(X, match):
    with pytest.raises(ValueError, match=match):
        rbridge.em_norm(X)


def test_em_norm_bad_settings():
    with pytest.raises(ValueError, match="em_norm: max_iter must be an integer >= 1, got 0"):
        rbridge.em_norm(np.eye(3), max_iter=0)
    with pytest.raises(ValueError, match="em_norm: max_iter must be an integer >= 1, got 2.5"):
        rbridge.em_norm(np.eye(3), max_iter=2.5)
    with pytest.raises(ValueError, match="criterion must be a finite number > 0, got -1.0"):
        rbridge.em_norm(np.eye(3), criterion=-1.0)


@pytest.mark.parametrize(("name", "value"), [("max_iter", True), ("criterion", True)])
def test_booleans_are_not_em_norm_settings(name, value):
    # Checked before R is loaded: these run without rpy2 or R.
    with pytest.raises(ValueError, match=f"^em_norm: {name} must be "):
        rbridge.em_norm(np.eye(3), **{name: value})
    X = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match=f"^NormEMRegressor: {name} must be "):
        rbridge.NormEMRegressor(**{name: value}).fit(X, X[:, 0])


# ------------------------------------------------------------------- with R
@needs_norm
def test_missing_norm_package_error(monkeypatch):
    from rpy2.robjects import packages

    def importr(name, *args, **kwargs):
        raise packages.PackageNotInstalledError(f'The R package "{name}" is not installed.')

    monkeypatch.setattr(packages, "importr", importr)
    with pytest.raises(ImportError, match=r"install\.packages\('norm'\)"):
        rbridge.em_norm(np.eye(3))


@needs_norm
def test_em_norm_complete_data_is_sample_moments():
    X = _gaussian_data(missing=0.0)
    mean, cov = rbridge.em_norm(X)
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=0, atol=1e-10)
    np.testing.assert_allclose(cov, np.cov(X, rowvar=False, bias=True), rtol=1e-10)


@needs_norm
def test_em_norm_is_a_fixed_point_of_em():
    X = _gaussian_data()
    X[0] = np.nan  # a row with nothing observed is allowed
    before = X.copy()
    mean, cov = rbridge.em_norm(X, max_iter=10_000, criterion=1e-12)
    np.testing.assert_array_equal(X, before)
    new_mean, new_cov = _em_step(X, mean, cov)
    np.testing.assert_allclose(new_mean, mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(new_cov, cov, rtol=0, atol=1e-8)
    # a looser criterion stops earlier, further from the fixed point
    loose_mean, _ = rbridge.em_norm(X, max_iter=2)
    assert np.abs(loose_mean - mean).max() > 1e-6


@needs_norm
def test_norm_em_regressor_predicts_conditional_mean_of_y():
    X = _gaussian_data(n=400, d=4, seed=1)
    rng = np.random.default_rng(1)
    y = np.nan_to_num(X) @ np.array([1.0, -2.0, 0.5, 0.0]) + rng.normal(size=400)
    model = rbridge.NormEMRegressor(max_iter=10_000, criterion=1e-10).fit(X, y)
    mean, cov = rbridge.em_norm(np.column_stack([y, X]), max_iter=10_000, criterion=1e-10)
    np.testing.assert_allclose(model.mean_, mean)
    np.testing.assert_allclose(model.cov_, cov)
    assert model.n_features_in_ == 4
    predictions = model.predict(X)
    for row, prediction in zip(X[:50], predictions[:50], strict=True):
        obs = np.flatnonzero(~np.isnan(row)) + 1
        expected = mean[0] + cov[0, obs] @ np.linalg.solve(
            cov[np.ix_(obs, obs)], row[obs - 1] - mean[obs]
        )
        assert prediction == pytest.approx(expected, abs=1e-10)
    assert model.score(X, y) > 0.5
    assert clone(model).get_params() == {"max_iter": 10_000, "criterion": 1e-10}
    with pytest.raises(ValueError, match="4 features"):
        model.predict(X[:, :3])


@needs_norm
def test_norm_em_agrees_with_the_package_em():
    from neumiss.baselines import EMRegressor

    X = _gaussian_data(n=500, d=5, seed=2)
    rng = np.random.default_rng(2)
    y = np.nan_to_num(X) @ rng.normal(size=5) + rng.normal(size=500)
    X_test = _gaussian_data(n=200, d=5, seed=3)
    # tight tolerances on both sides, no ridge: both reach the maximum-likelihood estimate
    em = EMRegressor(max_iter=10_000, tol=1e-13, ridge=0.0).fit(X, y)
    norm_em = rbridge.NormEMRegressor(max_iter=10_000, criterion=1e-10).fit(X, y)
    np.testing.assert_allclose(norm_em.mean_, em.mean_, rtol=0, atol=1e-4)
    np.testing.assert_allclose(norm_em.cov_, em.cov_, rtol=0, atol=1e-4)
    np.testing.assert_allclose(norm_em.predict(X_test), em.predict(X_test), rtol=0, atol=1e-4)
