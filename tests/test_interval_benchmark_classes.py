"""``neumiss benchmark --suite intervals --classification``: the oracle set, one run of
the prediction sets, the summary and the command line."""

import numpy as np
import pytest
from scipy.stats import norm

from neumiss.benchmark.intervals import IntervalRun
from neumiss.benchmark.intervals._classes import (
    COLUMNS,
    METHODS,
    class_probabilities,
    execute_classes_run,
    oracle_sets,
    summarize_classes,
)
from neumiss.cli import main as cli_main
from neumiss.simulation import make_regression

TINY = {"depth": 1, "mlp_depth": 0, "ensemble_size": 1, "max_epochs": 3}


def test_the_oracle_set_keeps_the_most_probable_classes_until_they_hold_the_level():
    proba = np.array([[0.5, 0.3, 0.2], [0.05, 0.9, 0.05], [0.2, 0.35, 0.45], [0.1, 0.1, 0.8]])
    sets = oracle_sets(proba, 0.1)
    # 0.5 + 0.3 < 0.9: all three; 0.9 alone; 0.45 + 0.35 < 0.9: all three
    assert sets[:3].tolist() == [[True, True, True], [False, True, False], [True, True, True]]
    assert sets[3].sum() == 2 and sets[3, 2]  # 0.8, then one of the tied 0.1: 0.9
    held = (proba * sets).sum(axis=1)
    assert (held >= 0.9 - 1e-12).all()
    # dropping the least probable kept class would fall below the level
    for p, kept, mass in zip(proba, sets, held):
        assert mass - p[kept].min() < 0.9


def test_class_probabilities_are_the_gaussian_law_of_y_between_the_cuts():
    X, y, truth = make_regression(2000, 4, missing_rate=0.3, random_state=0)
    cuts = np.quantile(y, [1 / 3, 2 / 3])
    proba = class_probabilities(truth, X[:5], cuts)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    center, scale = truth.bayes_predict(X[:5]), np.sqrt(truth.predictive_variance(X[:5]))
    np.testing.assert_allclose(proba[:, 0], norm.cdf((cuts[0] - center) / scale))
    # over many rows, the labels fall in each class as often as the probabilities say
    X_test, y_test = truth.sample(20000, random_state=1)
    expected = class_probabilities(truth, X_test, cuts).mean(axis=0)
    observed = np.bincount(np.digitize(y_test, cuts), minlength=3) / 20000
    np.testing.assert_allclose(observed, expected, atol=0.01)


def test_a_run_scores_every_method_on_every_test_row():
    rows = execute_classes_run(IntervalRun("MAR", 0.3, 600, 0), n_test=500, n_features=3,
                               base_params=TINY)
    assert {row["method"] for row in rows} == set(METHODS)
    assert set(rows[0]) == set(COLUMNS)
    for method in METHODS:
        mine = [row for row in rows if row["method"] == method]
        assert sum(row["n_rows"] for row in mine) == 500
        assert all(0 <= row["n_covered"] <= row["n_rows"] for row in mine)
        assert all(0 <= row["size_sum"] <= 3 * row["n_rows"] for row in mine)
    oracle = [row for row in rows if row["method"] == "oracle"]
    assert sum(r["n_covered"] for r in oracle) / 500 >= 0.85
    stats = summarize_classes([{k: str(v) for k, v in row.items()} for row in rows])
    oracle_stats = stats[("MAR", "0.3", "600")]["oracle"]
    assert oracle_stats["size_ratio"] == [pytest.approx(1.0)]
    big = [r for r in oracle if r["n_rows"] >= 100]  # one run: pooled = its own groups
    assert sorted(oracle_stats["pooled_groups"]) == pytest.approx(
        sorted(r["n_covered"] / r["n_rows"] for r in big))
    assert oracle_stats["worst_group"] == [pytest.approx(min(oracle_stats["pooled_groups"]))]


def test_the_command_line_runs_the_classification_suite(tmp_path, capsys):
    argv = ["benchmark", "--suite", "intervals", "--classification", "--n-train", "400",
            "--n-test", "300", "--mechanisms", "MCAR", "--out", str(tmp_path), "--no-progress"]
    # tiny networks: the suite's base parameters are those of the regression runs
    from neumiss.benchmark.intervals import _runner

    original = dict(_runner.BASE_PARAMS)
    _runner.BASE_PARAMS.update(TINY)
    try:
        assert cli_main(argv) == 0
    finally:
        _runner.BASE_PARAMS.clear()
        _runner.BASE_PARAMS.update(original)
    out = capsys.readouterr().out
    assert "## MCAR, 30% missing, n_train = 400 (1 repeats)" in out
    assert (tmp_path / "classes_runs.csv").exists() and (tmp_path / "classes_summary.md").exists()
    assert "1 runs computed" in out
    assert cli_main(argv) == 0  # a second call finds the run done
    assert "0 runs computed, 1 already in" in capsys.readouterr().out
