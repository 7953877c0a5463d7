"""Python side of the R package ``neumiss``: conversions at the R/Python boundary.

reticulate 1.28 (Debian 12) refuses to convert arrays of NumPy >= 2 and converts a
data.frame badly (NA in an integer, character or logical column arrives as a value), so
nothing crossing the boundary is a NumPy or pandas object. Tables arrive as plain lists
(see :func:`frame`), matrices of the baselines as flat column-major lists of floats
(R's NA arrives as NaN) with their dimensions, and results leave as lists, floats, ints
and strings. Only the fitted estimator itself stays a Python object on the R side.

The R side's own description of a fit (its formula, the response's levels, the row
counts) is kept on the estimator as ``r_metadata_``, a dict of strings, numbers and lists:
the estimator's ``save`` writes every public fitted attribute, so the model file keeps it
and ``neumiss.load`` restores it. Python users may ignore it.

A fit with prediction intervals is a :class:`neumiss.intervals.ConformalRegressor`
around the NeuMiss regressor (its ``estimator_``), one with prediction sets a
:class:`neumiss.intervals.ConformalClassifier` around the classifier; :func:`describe`
describes that base model, :func:`predict_interval` gives the intervals and
:func:`predict_set` the sets.
"""

import re
import warnings

import numpy as np
import pandas as pd

import neumiss
from neumiss.network import DivergenceWarning
from neumiss.tables import UNSEEN_WARNING_SHARE  # noqa: F401 (read by R's ordered factors)

_TASKS = {"regression": "NeuMissRegressor", "classification": "NeuMissClassifier"}

#: Longest message passed back to R (a longer one is cut).
MAX_MESSAGE = 400


def _list(value):
    """A list from what reticulate made of an R vector (a length-1 vector arrives as a scalar)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _matrix(values, n_rows, n_cols):
    """(n_rows, n_cols) float array from R's column-major values (a float if length 1)."""
    flat = np.atleast_1d(np.asarray(values, dtype=np.float64))
    return flat.reshape(int(n_cols), int(n_rows)).T


def _vector(values):
    return np.atleast_1d(np.asarray(values))


def _float_list(array):
    return [float(v) for v in np.ravel(array)]


def _short(message):
    message = str(message)
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 5] + " ..."


#: Warnings of scikit-learn's imputer that say its default 10 rounds ended before its
#: tolerance, which the baselines accept: not worth a warning.
_IGNORED = (r"\[IterativeImputer\] Early stopping",)

#: "NeuMissRegressor[2](depth=2): " or "NeuMiss (stream): ", the network a
#: DivergenceWarning is about.
_NETWORK_LABEL = re.compile(r"^\S+?(?:\[\d+\])?(?:\(depth=\d+\))?(?: \(stream\))?: ")


def _collecting_warnings(func, *args, n_networks=1, **kwargs):
    """``func(...)`` and the (shortened) messages of the Python warnings it raised, one
    per problem: the divergence warnings of the ``n_networks`` networks of an ensemble
    become one message (see :func:`_divergence_message`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for pattern in _IGNORED:
            warnings.filterwarnings("ignore", message=pattern)
        result = func(*args, **kwargs)
    diverged = [str(w.message) for w in caught if issubclass(w.category, DivergenceWarning)]
    texts = [str(w.message) for w in caught if not issubclass(w.category, DivergenceWarning)]
    if diverged:
        texts.append(_divergence_message(diverged, n_networks))
    messages = []
    for text in map(_short, texts):
        if text not in messages:
            messages.append(text)
    return result, messages


def _divergence_message(reports, n_networks):
    """One message for the divergence reports of some networks of an ensemble, without
    the Python labels of the networks: how many diverged or overfitted, how many fell
    back to the constant predictor, and what may help."""
    reports = [_NETWORK_LABEL.sub("", r) for r in dict.fromkeys(reports)]
    n_diverged = sum("training diverged" in r for r in reports)
    n_overfitted = sum("training overfitted" in r for r in reports)
    n_constant = sum("no epoch beat the constant predictor" in r for r in reports)
    where = ("the network" if n_networks <= 1 else
             "{} of the " + f"{n_networks} networks of the ensemble")
    parts = []
    if n_diverged:
        parts.append(f"training diverged in {where.format(n_diverged)} (its learning rate "
                     "was lowered and its best weights kept)")
    if n_overfitted:
        parts.append(f"training overfitted in {where.format(n_overfitted)} (it fitted the "
                     "training rows, not the validation rows)")
    if n_constant:
        parts.append(f"in {where.format(n_constant)}, no epoch beat the constant predictor "
                     "on validation (it predicts the training mean, or the class frequencies)")
    if not parts:
        return reports[0]
    if n_diverged:
        hint = "a lower learning_rate, some weight_decay or a smaller network may help"
    elif n_overfitted:
        hint = "more rows, some weight_decay or informative predictors may help"
    else:
        hint = "more epochs (max_epochs) or informative predictors may help"
    return f"{'; '.join(parts)}: {hint}"


def frame(table):
    """A pandas DataFrame from the R side's table.

    ``table`` is ``{"names": [...], "columns": [...]}``; each column is
    ``{"kind": "numeric", "values": [floats, NaN = missing]}`` or
    ``{"kind": "categorical", "codes": [0-based ints, -1 = missing], "levels": [str]}``
    (an R factor or character vector, which becomes a pandas categorical).
    """
    names = [str(n) for n in _list(table["names"])]
    columns = _list(table["columns"])
    data = {}
    for name, column in zip(names, columns, strict=True):
        if column["kind"] == "numeric":
            data[name] = pd.Series(np.asarray(_list(column["values"]), dtype=np.float64))
        elif column["kind"] == "categorical":
            codes = np.asarray(_list(column["codes"]), dtype=np.int64)
            levels = [str(v) for v in _list(column["levels"])]
            data[name] = pd.Series(pd.Categorical.from_codes(codes, categories=levels))
        else:
            raise ValueError(f"column {name!r}: unknown kind {column['kind']!r}")
    return pd.DataFrame(data, columns=names)


def estimator_class(task):
    """The Python estimator class of an R ``task``."""
    if task not in _TASKS:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    return getattr(neumiss, _TASKS[task])


def parameter_names(task):
    """Names of the estimator parameters, sorted."""
    return sorted(estimator_class(task)().get_params(deep=False))


def _target(y, classification):
    """The response from R: class labels as strings (classification), else floats."""
    if classification:
        return np.asarray([str(v) for v in _list(y)], dtype=object)
    return _vector(y).astype(np.float64)

def fit(task, params, table, y, sample_weight, metadata, interval=None):
    """Fit a NeuMiss estimator on a table; returns ``{"estimator", "warnings"}``.

    ``y`` holds numbers (regression) or class labels as strings (classification);
    ``sample_weight`` is None or one non-negative number per row. ``metadata`` (a dict)
    becomes ``estimator.r_metadata_``. Python warnings raised while fitting are
    returned as strings for R to re-emit, one per problem. ``interval``: None, or a dict
    with ``method`` and ``alpha`` (and optionally ``calibration_fraction`` and
    ``calibration_confidence``): the regressor (a quantile head at ``alpha/2``, 0.5,
    ``1 - alpha/2`` unless ``method`` is ``"split"``) is then fitted inside a
    ``ConformalRegressor``, seeded by ``random_state``.
    """
    cls = estimator_class(task)
    params = dict(params or {})
    unknown = sorted(set(params) - set(parameter_names(task)))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(unknown)}; valid ones: "
            f"{', '.join(parameter_names(task))}"
        )
    defaults = cls().get_params(deep=False)
    for name, value in params.items():
        # R's numbers are floats: a whole one where the default is an int becomes an int
        default = defaults.get(name)
        if (
            isinstance(value, float)
            and value.is_integer()
            and isinstance(default, int)
            and not isinstance(default, bool)
        ):
            params[name] = int(value)
    estimator = cls(**params) if interval is None else _conformal(task, params, interval)
    X = frame(table)
    target = _target(y, task == "classification")
    weight = None if sample_weight is None else _vector(sample_weight).astype(np.float64)
    n_networks = int(params.get("ensemble_size", defaults.get("ensemble_size", 1)))
    if interval is not None:
        if weight is not None:
            raise ValueError("case weights are not supported with prediction intervals")
        estimator, messages = _collecting_warnings(estimator.fit, X, target,
                                                   n_networks=n_networks)
    else:
        estimator, messages = _collecting_warnings(estimator.fit, X, target,
                                                   sample_weight=weight, n_networks=n_networks)
    estimator.r_metadata_ = dict(metadata or {})
    return {"estimator": estimator, "warnings": messages}


#: The default method of ``interval = TRUE`` for each task.
_DEFAULT_METHODS = {"regression": "cqr-mondrian", "classification": "lac-mondrian"}


def _conformal(task, params, interval):
    """The ConformalRegressor (regression) or ConformalClassifier (classification) of an
    R fit with ``interval = TRUE``; ``interval["method"]`` None takes the task's default."""
    from neumiss.intervals import METHODS, SET_METHODS

    method = interval.get("method") or _DEFAULT_METHODS[task]
    method, alpha = str(method), float(interval["alpha"])
    methods = METHODS if task == "regression" else SET_METHODS
    if method not in methods:
        raise ValueError(f"interval_method = \"{method}\" is not a {task} method; "
                         f"use one of {', '.join(methods)}")
    confidence = interval.get("calibration_confidence", 0.75)
    settings = dict(
        method=method, alpha=alpha,
        calibration_fraction=float(interval.get("calibration_fraction", 0.25)),
        calibration_confidence=confidence if confidence is None else float(confidence),
        cv=interval.get("cv", "auto"), random_state=params.get("random_state"))
    if task == "classification":
        return neumiss.ConformalClassifier(neumiss.NeuMissClassifier(**params), **settings)
    if method == "split":
        base = neumiss.NeuMissRegressor(**params)
    else:
        base = neumiss.NeuMissQuantileRegressor((alpha / 2, 0.5, 1 - alpha / 2), **params)
    return neumiss.ConformalRegressor(base, **settings)


def _base(estimator):
    """The NeuMiss estimator of a fit: itself, or the base model of a conformal one."""
    return getattr(estimator, "estimator_", estimator)


def predict_interval(estimator, table, alpha):
    """``{"values", "warnings"}``: point predictions, lower and upper bounds, flattened
    row by row (3 numbers per row)."""
    X = frame(table)

    def both():
        return np.column_stack([estimator.predict(X),
                                estimator.predict_interval(X, alpha=float(alpha))])

    values, messages = _collecting_warnings(both)
    return {"values": _float_list(values), "warnings": messages}


def predict_set(estimator, table, alpha):
    """``{"values", "warnings"}``: the prediction sets as 0/1, flattened row by row
    (one per class of ``classes_``)."""
    X = frame(table)
    (sets, _), messages = _collecting_warnings(estimator.predict_set, X, alpha=float(alpha))
    return {"values": [int(v) for v in sets.ravel()], "warnings": messages}


def predict(estimator, table):
    """``{"values", "warnings"}``: floats (regressor) or 0-based positions in ``classes_``."""
    predictions, messages = _collecting_warnings(estimator.predict, frame(table))
    if hasattr(estimator, "classes_"):
        values = [int(v) for v in np.searchsorted(estimator.classes_, predictions)]
    else:
        values = _float_list(predictions)
    return {"values": values, "warnings": messages}


def predict_proba(estimator, table):
    """``{"values", "warnings"}``: class probabilities flattened row by row."""
    proba, messages = _collecting_warnings(estimator.predict_proba, frame(table))
    return {"values": _float_list(proba), "warnings": messages}


def _plain(value):
    """``value`` in types that reticulate converts without NumPy."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _block_mean(network):
    """The learned mean ``mu`` of the NeuMiss block (the members' average for an ensemble)."""
    block = network.block
    if hasattr(block, "mu"):
        return block.mu.detach().cpu().numpy().astype(np.float64)
    return np.mean([b.mu.detach().cpu().numpy() for b in block.blocks], axis=0).astype(np.float64)


def describe(estimator):
    """What the R object keeps about a fitted estimator, in plain Python types
    (a conformal model: its base model, and ``interval``)."""
    outer, estimator = estimator, _base(estimator)
    mu = _block_mean(estimator.network_)
    preprocessor = estimator.preprocessor_
    info = {
        "estimator_class": type(estimator).__name__,
        "params": {
            k: (v if isinstance(v, (bool, int, float, str, type(None))) else _plain(v))
            for k, v in estimator.get_params(deep=False).items()
        },
        "n_features": int(estimator.n_features_in_),
        "history": {k: _float_list(v) for k, v in estimator.history_.items()},
        "n_epochs": int(estimator.n_epochs_),
        "best_epoch": int(estimator.best_epoch_),
        "best_depth": int(estimator.best_depth_),
        "mlp_depth": int(estimator.mlp_depth_),
        # the MLP head's weight in the head kept (0: linear, 1: MLP, between: a blend)
        "mlp_weight": float(estimator.mlp_weight_),
        "weight_sharing": str(getattr(estimator, "weight_sharing_", "")),
        "mask_skip": bool(estimator.mask_skip_),
        "spline": bool(getattr(estimator, "spline_", False)),
        "log_target": bool(getattr(estimator, "log_target_", False)),
        # classifiers: the temperature the log-odds were divided by (None: not calibrated)
        "temperature": getattr(estimator, "temperature_", None),
        # classifiers: the C of the heads' logistic start (None: a regressor)
        "start_C": getattr(estimator, "start_C_", None),
        # classifiers fitted with class_weight: the weight of each class (None: unweighted)
        "class_weights": None if getattr(estimator, "class_weight", None) is None else {
            str(label): float(weight)
            for label, weight in zip(estimator.classes_.tolist(), estimator.class_weight_)},
        "validation_score": float(estimator.validation_score_),
        # absent from models saved before they were recorded
        "validation_scheme": getattr(estimator, "validation_scheme_", None),
        "n_validation_rows": getattr(estimator, "n_validation_rows_", None),
        # the block's mean, back in the units of the encoded features
        "mu": _float_list(preprocessor.inverse_transform(mu[None, :])[0]),
        "mean": _float_list(preprocessor.mean_),
        "scale": _float_list(preprocessor.scale_),
        "encoded_names": [str(v) for v in estimator.encoder_.output_names()],
        "encoded_input": [int(v) for v in estimator.encoder_.input_index()],
        "columns": _plain(estimator.encoder_.get_state()),
        "python_version": neumiss.__version__,
        "r_metadata": _plain(getattr(outer, "r_metadata_", None)),
        "interval": None if outer is estimator else {
            "method": outer.method, "alpha": float(outer.alpha),
            # rows held out from the network's training (none with CV+: every row
            # calibrates out of fold, and estimator_ is fitted on all rows)
            "n_calibration": 0 if getattr(outer, "cross_conformal_", False)
            else int(outer.calibration_scores_.shape[0]),
            "kind": "sets" if hasattr(outer, "predict_set") else "intervals",
            "summary": outer.summary().splitlines()[1:],
        },
    }
    for column in info["columns"]:
        column["name"] = str(column["name"])
    if hasattr(estimator, "classes_"):
        info["classes"] = [str(c) for c in estimator.classes_]
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        info["feature_names"] = [str(v) for v in names]
    return info


def pattern_model(estimator, missing):
    """The linear model that the NeuMiss model of a fit (of a conformal fit: its base
    model's median output) applies to one missingness pattern, from its
    ``pattern_model``. ``missing``: one boolean per feature (True = missing). Returns
    ``{"intercept", "coef", "names"}``: the prediction (regression) or the logit of
    ``classes_[1]`` (two classes) with every observed encoded column at 0, and one
    coefficient per observed encoded column, named as ``encoded_names``."""
    base = _base(estimator)
    linear = base.pattern_model(np.asarray(_list(missing), dtype=bool))
    intercept, coef = np.asarray(linear.intercept), np.asarray(linear.coef)
    if hasattr(base, "quantiles"):  # a quantile head: the median, which predict gives
        median = list(base.quantiles).index(0.5)
        intercept, coef = intercept[median], coef[median]
    return {"intercept": float(intercept), "coef": _float_list(coef),
            "names": [str(n) for n in linear.feature_names]}




def permutation_importance(estimator, table, y, n_repeats, metric, random_state):
    """Permutation importance of each column of ``table`` by scikit-learn's
    ``permutation_importance``: the drop of the ``metric`` (a scikit-learn scorer name)
    when the column is shuffled, ``n_repeats`` shuffles. Returns ``{"importance", "sd",
    "warnings"}``, one value per column."""
    from sklearn.inspection import permutation_importance as permute

    result, messages = _collecting_warnings(
        permute, estimator, frame(table), _target(y, hasattr(estimator, "classes_")),
        scoring=str(metric),
        n_repeats=int(n_repeats), random_state=random_state)
    return {"importance": _float_list(result.importances_mean),
            "sd": _float_list(result.importances_std), "warnings": messages}


def partial_dependence(estimator, table, variable, grid, categorical):
    """Partial dependence on the column ``variable`` of ``table`` at the values ``grid``
    (categories if ``categorical``), by scikit-learn's ``partial_dependence`` (brute
    force: the mean prediction over the rows with the column set to each value; the
    grid is given, as scikit-learn's own grid would be NaN for a column with missing
    values). Returns ``{"average", "n_outputs", "warnings"}``: the averages, output by
    output (the prediction; the probability of ``classes_[1]`` for two classes, of each
    class for more), flattened."""
    from sklearn.inspection import partial_dependence as dependence

    variable = str(variable)
    values = ([str(v) for v in _list(grid)] if categorical
              else np.asarray(_list(grid), dtype=np.float64))
    result, messages = _collecting_warnings(
        dependence, estimator, frame(table), [variable], custom_values={variable: values},
        categorical_features=[variable] if categorical else None, kind="average")
    average = np.asarray(result["average"])
    return {"average": _float_list(average), "n_outputs": int(average.shape[0]),
            "warnings": messages}


def save(estimator, path):
    """Write the estimator with its own ``save`` (a file ``neumiss.load`` reads)."""
    estimator.save(path)


def load(path):
    """Read a file written by ``save``; ValueError when it is not a neumiss model file."""
    return neumiss.load(path)


def export_onnx(estimator, path):
    """Export through ``neumiss.export_onnx`` (a conformal model: its ``to_onnx``, with
    outputs ``y``, ``lower``, ``upper``, or the sets ``set`` and ``set_size``);
    ImportError if this neumiss lacks it."""
    if hasattr(estimator, "calibration_scores_"):
        estimator.to_onnx(path)
        return
    export = getattr(neumiss, "export_onnx", None)
    if export is None:
        raise ImportError(
            f"the installed Python package neumiss {neumiss.__version__} has no export_onnx()"
        )
    export(estimator, path)


#: The R side's names of the baselines of ``compare_methods()``, and their names in the
#: registry of ``neumiss.baselines``.
_BASELINES = {
    "regression": {"EMRegressor": "em", "MICERegressor": "mice_lr",
                   "MeanMaskLinear": "mean_mask_linear", "HistGradientBoosting": "hgb"},
    "classification": {"MICELogistic": "mice_linear", "MeanMaskLogistic": "mean_mask_linear",
                       "HistGradientBoosting": "hgb"},
}


def _baseline(name, task, random_state):
    """The unfitted baseline of ``neumiss.baselines`` that the R side calls ``name``."""
    from neumiss.baselines import make_baseline

    if name not in _BASELINES[task]:
        raise ValueError(f"unknown {task} baseline {name!r}; known: "
                         f"{', '.join(_BASELINES[task])}")
    return make_baseline(_BASELINES[task][name], task, random_state=random_state)


def baseline_r2(name, x_train, n_train, y_train, x_test, n_test, n_cols, y_test):
    """Test R² of a regression baseline: ``EMRegressor`` (EM of a joint Gaussian),
    ``MICERegressor`` (iterative imputation, linear regression; unseeded),
    ``MeanMaskLinear`` (mean imputation and missingness indicators, ridge regression) or
    ``HistGradientBoosting`` (native missing values).

    Returns ``{"r2", "warnings"}``.
    """
    from sklearn.metrics import r2_score

    model = _baseline(name, "regression", 0 if name == "HistGradientBoosting" else None)
    X_train = _matrix(x_train, n_train, n_cols)
    _, messages = _collecting_warnings(model.fit, X_train, _vector(y_train).astype(np.float64))
    predictions = model.predict(_matrix(x_test, n_test, n_cols))
    r2 = r2_score(_vector(y_test).astype(np.float64), predictions)
    return {"r2": float(r2), "warnings": messages}


def baseline_classification(name, x_train, n_train, y_train, x_test, n_test, n_cols):
    """Class probabilities on the test rows of a classification baseline.

    ``name``: ``MICELogistic`` (iterative imputation, logistic regression),
    ``MeanMaskLogistic`` (mean imputation and missingness indicators, logistic
    regression) or ``HistGradientBoosting`` (native missing values). ``y_train`` holds
    class labels as strings. Returns ``{"classes", "proba" (row by row), "warnings"}``.
    """
    model = _baseline(name, "classification", 0)
    target = _target(y_train, classification=True)
    X_train = _matrix(x_train, n_train, n_cols)
    _, messages = _collecting_warnings(model.fit, X_train, target)
    proba, more = _collecting_warnings(model.predict_proba, _matrix(x_test, n_test, n_cols))
    return {
        "classes": [str(c) for c in model.classes_],
        "proba": _float_list(proba),
        "warnings": messages + [m for m in more if m not in messages],
    }


def simulate(n, d, mechanism, missing_rate, snr, link, random_state, n_test):
    """Data of ``neumiss.simulation.make_regression`` (Gaussian predictors, a response
    through ``link``, values removed by ``mechanism``) and a test set from the same
    truth. Returns ``{"x", "y", "x_test", "y_test", "bayes_test"}``: matrices flattened
    row by row (NaN = missing), and the Bayes predictor's predictions on the test set
    (an empty list where the simulation has none, e.g. under probit self-masking)."""
    from neumiss.simulation import make_regression

    X, y, truth = make_regression(int(n), int(d), mechanism=str(mechanism),
                                  missing_rate=float(missing_rate), snr=float(snr),
                                  link=str(link), random_state=random_state)
    out = {"x": _float_list(X), "y": _float_list(y), "x_test": [], "y_test": [],
           "bayes_test": []}
    if int(n_test) > 0:
        test_seed = None if random_state is None else int(random_state) + 1
        X_test, y_test = truth.sample(int(n_test), random_state=test_seed)[:2]
        out.update(x_test=_float_list(X_test), y_test=_float_list(y_test))
        try:
            out["bayes_test"] = _float_list(truth.bayes_predict(X_test))
        except (NotImplementedError, ValueError):
            pass
    return out
