"""Tests of the tabular-network anchors of the registry (``realmlp``, ``tabm``: pytabkit's
RealMLP-TD and TabM-D behind median imputation and missing indicators)."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from neumiss.baselines import BASELINES, TASKS, make_baseline

from .conftest import check_anchor_on_mixed_table, mixed_table

NETWORKS = ("realmlp", "tabm")


#: Fewer epochs and narrower networks than the defaults: the same code paths in a fraction
#: of the time (TabM-D trains 32 networks of width 512 until early stopping).
SMALL = {"realmlp": {"n_epochs": 60, "hidden_sizes": [64, 64]},
         "tabm": {"n_epochs": 40, "d_block": 64, "tabm_k": 4}}


def _small(name, task):
    """The registry's ``name`` for ``task``, seeded, with the :data:`SMALL` settings."""
    model = make_baseline(name, task, random_state=0)
    model[-1].set_params(**SMALL[name])
    return model


def test_numbers_are_imputed_by_their_median_with_indicators_and_categories_kept():
    pytest.importorskip("pytabkit", reason="installed by pip install 'neumiss[anchors]'")
    X, y = mixed_table(complete_column=True)
    model = make_baseline("realmlp", "regression", random_state=0)
    front = model[:-1].fit(X, y)
    table = front.transform(X)
    # One indicator per numeric column with missing values; "complete" gets none.
    assert list(table.columns) == ["x", "flag", "complete", "missingindicator_x",
                                   "missingindicator_flag", "level"]
    missing = X["x"].isna().to_numpy()
    np.testing.assert_array_equal(table["missingindicator_x"], missing.astype(float))
    assert np.all(table["x"][missing] == np.nanmedian(X["x"]))
    assert not table.drop(columns="level").isna().any().any()
    # The category reaches pytabkit as a category, its missing cells still missing (pytabkit
    # codes them itself), so that the network embeds it instead of reading a number.
    assert isinstance(table["level"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(table["level"].isna(), X["level"].isna())


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("task", TASKS)
def test_network_anchors_fit_tables_with_missing_values_on_one_cpu_thread(name, task):
    pytest.importorskip("pytabkit", reason="installed by pip install 'neumiss[anchors]'")
    X, y = mixed_table(complete_column=True)
    model = check_anchor_on_mixed_table(lambda: _small(name, task), X, y, task, min_gain=0.5,
                                        exact=False)
    assert model[-1].n_threads_ == 1 and model[-1].device == "cpu"


@pytest.mark.parametrize("name", NETWORKS)
def test_classifiers_select_on_log_loss_without_label_smoothing(name):
    # The suite ranks binary tasks by log loss: pytabkit's settings for that metric.
    pytest.importorskip("pytabkit", reason="installed by pip install 'neumiss[anchors]'")
    params = make_baseline(name, "classification", random_state=0)[-1].get_params()
    assert params["val_metric_name"] == "cross_entropy"
    if name == "realmlp":
        assert params["use_ls"] is False
    regression = make_baseline(name, "regression", random_state=0)[-1].get_params()
    assert regression["val_metric_name"] is None  # regression keeps the library's default


def test_a_missing_pytabkit_is_named_with_how_to_install_it(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytabkit" else find_spec(name, *a))
    for name in NETWORKS:
        reason = BASELINES[name].unavailable()
        assert "pytabkit not installed" in reason and "neumiss[anchors]" in reason
