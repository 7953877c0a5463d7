"""Python side of the R package ``neumiss``: conversions at the R/Python boundary.

reticulate 1.28 (Debian 12) refuses to convert arrays of NumPy >= 2, so nothing crossing the
boundary is a NumPy object: matrices arrive as flat column-major lists of floats (R's NA
arrives as NaN) with their dimensions, and results leave as lists, floats, ints and strings.
Only the fitted estimator itself stays a Python object on the R side.
"""

import warnings

import numpy as np

import neumiss

_TASKS = {"regression": "NeuMissRegressor", "classification": "NeuMissClassifier"}


def _matrix(values, n_rows, n_cols):
    """(n_rows, n_cols) float array from R's column-major values (a float if length 1)."""
    flat = np.atleast_1d(np.asarray(values, dtype=np.float64))
    return flat.reshape(int(n_cols), int(n_rows)).T


def _vector(values):
    return np.atleast_1d(np.asarray(values))


def _float_list(array):
    return [float(v) for v in np.ravel(array)]


def _collecting_warnings(func, *args):
    """``func(*args)`` and the messages of the Python warnings it raised (for R to re-emit)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args)
    return result, [str(w.message) for w in caught]


def estimator_class(task):
    """The Python estimator class of an R ``task``."""
    if task not in _TASKS:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    return getattr(neumiss, _TASKS[task])


def parameter_names(task):
    """Names of the estimator parameters, sorted."""
    return sorted(estimator_class(task)().get_params(deep=False))


def fit(task, params, x, n_rows, n_cols, y):
    """Fit a NeuMiss estimator; returns ``{"estimator", "warnings"}``.

    ``y`` holds numbers (regression) or integer class codes 0..K-1 (classification).
    Python warnings raised while fitting are returned as strings for R to re-emit.
    """
    cls = estimator_class(task)
    unknown = sorted(set(params) - set(parameter_names(task)))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(unknown)} for {cls.__name__}; valid ones: "
            f"{', '.join(parameter_names(task))}"
        )
    estimator = cls(**params)
    X = _matrix(x, n_rows, n_cols)
    target = _vector(y).astype(np.int64 if task == "classification" else np.float64)
    estimator, messages = _collecting_warnings(estimator.fit, X, target)
    return {"estimator": estimator, "warnings": messages}


def predict(estimator, x, n_rows, n_cols):
    """Predictions: floats (regressor) or 0-based positions in ``classes_`` (classifier)."""
    predictions = estimator.predict(_matrix(x, n_rows, n_cols))
    if hasattr(estimator, "classes_"):
        return [int(v) for v in np.searchsorted(estimator.classes_, predictions)]
    return _float_list(predictions)


def predict_proba(estimator, x, n_rows, n_cols):
    """Class probabilities, flattened row by row (n_rows * n_classes floats)."""
    return _float_list(estimator.predict_proba(_matrix(x, n_rows, n_cols)))


def describe(estimator):
    """What the R object keeps about a fitted estimator, in plain Python types."""
    mu = estimator.network_.block.mu.detach().cpu().numpy().astype(np.float64)
    info = {
        "estimator_class": type(estimator).__name__,
        "params": {
            k: (v if isinstance(v, (bool, int, float, str, type(None))) else repr(v))
            for k, v in estimator.get_params(deep=False).items()
        },
        "n_features": int(estimator.n_features_in_),
        "history": {k: _float_list(v) for k, v in estimator.history_.items()},
        "n_epochs": int(estimator.n_epochs_),
        "best_epoch": int(estimator.best_epoch_),
        "best_depth": int(estimator.best_depth_),
        "validation_score": float(estimator.validation_score_),
        # the block's mean, back in the units of the features
        "mu": _float_list(mu * estimator.preprocessor_.scale_ + estimator.preprocessor_.mean_),
        "python_version": neumiss.__version__,
    }
    if hasattr(estimator, "classes_"):
        info["classes"] = [str(c) for c in estimator.classes_]
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        info["feature_names"] = [str(v) for v in names]
    return info


def save(estimator, path):
    """Write the estimator with its own ``save`` (a file ``neumiss.load`` reads)."""
    estimator.save(path)


def load(path):
    """Read a file written by ``save``; ValueError when it is not a neumiss model file."""
    return neumiss.load(path)


def export_onnx(estimator, path):
    """Export through ``neumiss.export_onnx``; ImportError if this neumiss lacks it."""
    export = getattr(neumiss, "export_onnx", None)
    if export is None:
        raise ImportError(
            f"the installed Python package neumiss {neumiss.__version__} has no export_onnx()"
        )
    export(estimator, path)


def baseline_r2(name, x_train, n_train, y_train, x_test, n_test, n_cols, y_test):
    """Test R² of a baseline of ``neumiss.baselines`` (``EMRegressor``, ``MICERegressor``).

    Returns ``{"r2", "warnings"}``.
    """
    from sklearn.metrics import r2_score

    from neumiss import baselines

    model = getattr(baselines, name)()
    X_train = _matrix(x_train, n_train, n_cols)
    _, messages = _collecting_warnings(model.fit, X_train, _vector(y_train).astype(np.float64))
    predictions = model.predict(_matrix(x_test, n_test, n_cols))
    r2 = r2_score(_vector(y_test).astype(np.float64), predictions)
    return {"r2": float(r2), "warnings": messages}
