"""Tabular-network anchors from pytabkit: RealMLP and TabM with the library's tuned defaults.

They are the strongest tabular networks a user would try next (RealMLP-TD and TabM-D:
the configurations pytabkit ships, tuned on benchmark collections), so the real-data
suite compares NeuMiss with them. Neither takes missing numbers, so each runs behind
what a user would put in front: numeric columns imputed by their median with a missing
indicator per column with missing values, category (and text) columns left as they are
for pytabkit, which encodes them itself (a missing or unseen category is its own code).
They run on the CPU with one thread, as every method of the suite is timed (pytabkit
sets torch's thread count itself, to the number of cores unless told).

For classification both stop early on the validation log loss, and RealMLP trains
without label smoothing: pytabkit's documented settings for a user who cares about
cross-entropy (its defaults select on accuracy and smooth the labels), and log loss
is what the suite ranks binary tasks by.

pytabkit is optional (``pip install 'neumiss[anchors]'``); it and scikit-learn's
transformers are imported when a model is built.
"""

from __future__ import annotations

from ._boosting import as_float_frame, categorical_columns, seed_integer

#: pytabkit's estimators by (network, task).
_MODELS = {
    ("realmlp", "regression"): "RealMLP_TD_Regressor",
    ("realmlp", "classification"): "RealMLP_TD_Classifier",
    ("tabm", "regression"): "TabM_D_Regressor",
    ("tabm", "classification"): "TabM_D_Classifier",
}
#: Settings added to the defaults for classification (see the module docstring).
_LOG_LOSS_SETTINGS = {
    "realmlp": {"val_metric_name": "cross_entropy", "use_ls": False},
    "tabm": {"val_metric_name": "cross_entropy"},
}


def median_mask_frame():
    """A ``ColumnTransformer``: numeric columns imputed by their median plus a missing
    indicator per column with missing values (float 0/1), category columns passed
    through; a DataFrame out, so that the categories keep their dtype."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.impute import SimpleImputer

    return ColumnTransformer(
        [("numeric", SimpleImputer(strategy="median", add_indicator=True,
                                   keep_empty_features=True),
          make_column_selector(dtype_include="number")),
         ("categories", "passthrough", categorical_columns)],
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")


def pytabkit_model(network: str, task: str, random_state):
    """RealMLP-TD or TabM-D behind median imputation and missing indicators, on the CPU
    with one thread.

    Parameters
    ----------
    network : {"realmlp", "tabm"}
    task : {"regression", "classification"}
    random_state : int, RandomState instance or None
        Seeds the network's initialization, validation split and batches.

    Returns
    -------
    Pipeline
        ``as_float_frame`` -> :func:`median_mask_frame` -> the pytabkit estimator.
    """
    import pytabkit
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    settings = _LOG_LOSS_SETTINGS[network] if task == "classification" else {}
    model = getattr(pytabkit, _MODELS[network, task])(
        device="cpu", n_threads=1, random_state=seed_integer(random_state), verbosity=0,
        **settings,
    )
    return make_pipeline(FunctionTransformer(as_float_frame), median_mask_frame(), model)
