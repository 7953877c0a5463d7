"""Bad input gets a clear error naming the problem; user data is never modified."""

import warnings

import numpy as np
import pandas as pd
import pytest

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.network import DivergenceWarning

from .conftest import paper


def data(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X.sum(axis=1)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X, y


def fast(cls=NeuMissRegressor, **kw):
    return paper(cls, **{"max_epochs": 2, "random_state": 0, **kw})


def test_inf_in_X_is_rejected():
    X, y = data()
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        fast().fit(X, y)
    model = fast().fit(*data())
    with pytest.raises(ValueError, match="infinity"):
        model.predict(X)


def test_a_column_mixing_numbers_and_text_is_named():
    X, y = data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["b"] = frame["b"].astype(object)
    frame.loc[5, "b"] = "high"
    with pytest.raises(ValueError, match=r"column 'b' mixes numbers and text"):
        fast().fit(frame, y)


def test_date_columns_are_refused_with_their_name():
    X, y = data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["when"] = pd.Timestamp("2020-01-01") + pd.to_timedelta(np.arange(len(frame)), "D")
    with pytest.raises(ValueError, match=r"column 'when' holds dates"):
        fast().fit(frame, y)


def test_duplicate_column_names_are_refused():
    X, y = data()
    frame = pd.DataFrame(X, columns=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        fast().fit(frame, y)


def test_nan_in_y_is_rejected():
    X, y = data()
    y[4] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        fast().fit(X, y)


def test_feature_count_mismatch_at_predict():
    X, y = data()
    model = fast().fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but NeuMissRegressor is expecting 3"):
        model.predict(X[:, :2])


@pytest.mark.parametrize("X", [np.empty((0, 3)), np.ones(5), np.empty((4, 0))])
def test_empty_or_one_dimensional_X(X):
    with pytest.raises(ValueError, match="(0 sample|1D|Expected 2D|0 feature)"):
        fast().fit(X, np.ones(max(len(X), 1))[: len(X)])


def test_too_few_rows_for_validation_split():
    with pytest.raises(ValueError, match="too few rows for validation_fraction"):
        fast().fit(np.array([[1.0, 2.0]]), np.array([1.0]))
    # Without a validation split, one row is enough.
    fast(validation_fraction=0.0).fit(np.array([[1.0, 2.0]]), np.array([1.0]))


def test_single_class_classifier():
    X, _ = data()
    with pytest.raises(ValueError, match="at least 2 classes"):
        fast(NeuMissClassifier).fit(X, np.zeros(len(X)))


@pytest.mark.parametrize(
    "param, value",
    [("depth", -1), ("depth", "deep"), ("weight_sharing", "tied"), ("optimizer", "lbfgs"),
     ("learning_rate", 0.0), ("batch_size", 0), ("validation_fraction", 1.0),
     ("max_epochs", 0), ("device", "tpu"), ("tol", -0.1), ("tol", 1.0), ("tol", "small")],
)
def test_bad_parameters_are_named(param, value):
    X, y = data()
    with pytest.raises(ValueError, match=param):
        fast(**{param: value}).fit(X, y)


def test_rows_all_missing_are_valid_at_fit_and_predict():
    X, y = data()
    X[:5] = np.nan
    model = fast().fit(X, y)
    assert np.all(np.isfinite(model.predict(X[:5])))


def test_feature_missing_in_every_row_warns_but_fits():
    X, y = data()
    X[:, 1] = np.nan
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    with pytest.warns(UserWarning, match=r"features \['b'\] are missing in every training row"):
        model = fast().fit(frame, y)
    assert np.all(np.isfinite(model.predict(frame)))


def test_user_data_is_never_modified():
    X, y = data()
    X_before, y_before = X.copy(), y.copy()
    frame = pd.DataFrame(X)
    frame_before = frame.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Two epochs may not beat the training mean yet: that warning is about the fit.
        warnings.filterwarnings("ignore", category=DivergenceWarning)
        model = fast().fit(X, y)
    model.predict(X)
    model.impute(X)
    fast().fit(frame, y).predict(frame)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(y, y_before)
    pd.testing.assert_frame_equal(frame, frame_before)


def test_unavailable_cuda_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the error path cannot be exercised")
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        fast(device="cuda").fit(*data())
