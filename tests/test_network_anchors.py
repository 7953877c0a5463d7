"""Tests of the tabular-network anchors of the registry (``realmlp``, ``tabm``: pytabkit's
RealMLP-TD and TabM-D behind median imputation and missing indicators)."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from neumiss.baselines import BASELINES, TASKS, make_baseline

NETWORKS = ("realmlp", "tabm")


def _mixed_table(seed=0, n=240):
    """Numbers with NaN, a category with missing cells, a nullable boolean; a target that
    depends on each (2 units on the category)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "x": rng.standard_normal(n),
        "level": pd.Categorical(rng.choice(["low", "high", None], n)),
        "flag": pd.array(rng.choice([True, False, None], n), dtype="boolean"),
        "complete": rng.standard_normal(n),
    })
    X.loc[rng.random(n) < 0.2, "x"] = np.nan
    y = X["x"].fillna(0).to_numpy() + 2.0 * (X["level"] == "high") + X["flag"].fillna(False)
    return X, np.asarray(y, dtype=float)


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
    X, y = _mixed_table()
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
    X, y = _mixed_table()
    target = y if task == "regression" else (y > 1).astype(int)
    model = _small(name, task).fit(X[:200], target[:200])
    assert model[-1].n_threads_ == 1 and model[-1].device == "cpu"
    predictions = model.predict(X[200:])
    assert predictions.shape == (40,) and np.isfinite(predictions).all()
    if task == "regression":  # the category carries 2 units of the target: both learn it
        high = (X["level"][200:] == "high").to_numpy()
        assert predictions[high].mean() - predictions[~high].mean() > 0.5
    else:
        assert list(model.classes_) == [0, 1]
        assert np.allclose(model.predict_proba(X[200:]).sum(axis=1), 1.0)
    again = _small(name, task).fit(X[:200], target[:200])
    np.testing.assert_allclose(again.predict(X[200:]), predictions)  # seeded


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
