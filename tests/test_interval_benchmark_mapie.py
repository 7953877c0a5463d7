"""MAPIE's LAC in the classification interval benchmark: the same calibration rows as
``ConformalClassifier``, the same sets at the usual rank, and a clear skip without MAPIE."""

import numpy as np
import pytest
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from neumiss.benchmark.intervals import IntervalRun, _classes, _mapie
from neumiss.cli import main as cli_main
from neumiss.intervals import SET_METHODS, ConformalClassifier, calibration_split
from neumiss.simulation import make_regression

TINY = {"depth": 1, "mlp_depth": 0, "ensemble_size": 1, "max_epochs": 3}
NO_MAPIE = "mapie not installed (pip install 'neumiss[mapie]')"


def _classes_data(n=1200, n_test=500):
    """Training rows and test rows of one simulation, ``y`` cut at its terciles."""
    X, y, truth = make_regression(n, 4, missing_rate=0.3, random_state=0)
    X_test, y_test = truth.sample(n_test, random_state=1)
    cuts = np.quantile(y, [1 / 3, 2 / 3])
    return X, np.digitize(y, cuts), X_test, np.digitize(y_test, cuts)


def _fitted(X, labels, seed=7, **params):
    base = make_pipeline(SimpleImputer(), LogisticRegression())
    return ConformalClassifier(base, method="lac", random_state=seed, **params).fit(X, labels)


def test_calibration_split_gives_the_rows_a_fit_calibrates_on():
    X, labels, _, _ = _classes_data()
    model = _fitted(X, labels)
    train, cal = calibration_split(len(labels), model.calibration_fraction, 7)
    assert cal.size == 300 and np.union1d(train, cal).size == len(labels)
    np.testing.assert_array_equal(
        SET_METHODS["lac"].scores(model.estimator_, X[cal], labels[cal]),
        model.calibration_scores_)


def test_mapie_lac_on_the_same_rows_is_lac_at_the_usual_rank():
    pytest.importorskip("mapie", reason=NO_MAPIE)
    X, labels, X_test, labels_test = _classes_data()
    model = _fitted(X, labels, calibration_confidence=None)
    _, cal = calibration_split(len(labels), model.calibration_fraction, 7)
    mapie = _mapie.lac_sets(model.estimator_, X[cal], labels[cal], X_test, model.alpha)
    np.testing.assert_array_equal(mapie, model.predict_set(X_test)[0])
    sets = _mapie.mapie_sets(model, X, labels, X_test, 7)
    assert set(sets) == set(_mapie.MAPIE_METHODS)
    np.testing.assert_array_equal(sets["mapie-lac"], mapie)
    covered = sets["mapie-lac-mice"][np.arange(500), labels_test]
    assert sets["mapie-lac-mice"].shape == (500, 3) and covered.mean() > 0.8


def test_a_run_holds_the_mapie_methods_where_mapie_is_installed():
    pytest.importorskip("mapie", reason=NO_MAPIE)
    rows = _classes.execute_classes_run(IntervalRun("MCAR", 0.3, 600, 0), n_test=300,
                                        n_features=3, base_params=TINY)
    assert {row["method"] for row in rows} == set(_classes.METHODS)


def test_without_mapie_the_suite_says_so_and_runs_the_other_methods(
        tmp_path, capsys, monkeypatch):
    find_spec = _mapie.importlib.util.find_spec
    monkeypatch.setattr(_mapie.importlib.util, "find_spec",
                        lambda name, *args: None if name == "mapie" else find_spec(name, *args))
    assert _mapie.mapie_unavailable() == (
        "mapie not installed (pip install 'neumiss[mapie]' installs it)")
    monkeypatch.setattr(_classes, "BASE_PARAMS", TINY)
    argv = ["benchmark", "--suite", "intervals", "--classification", "--n-train", "400",
            "--n-test", "300", "--mechanisms", "MCAR", "--out", str(tmp_path), "--no-progress"]
    assert cli_main(argv) == 0
    err = capsys.readouterr().err
    assert "skipping methods 'mapie-lac', 'mapie-lac-mice': mapie not installed" in err
    methods = {row["method"] for row in _classes.read_classes_runs(
        tmp_path / _classes.RUNS_FILE)}
    assert methods == set(_classes.METHODS) - set(_mapie.MAPIE_METHODS)


def test_below_cross_rows_the_sets_are_cv_plus_and_mapie_calibrates_the_split_fit():
    # cv="auto" fits the run's sets by CV+ on 300 rows; MAPIE's split LAC takes the split
    # fit of the same seed (its network and calibration rows), as on larger tables.
    pytest.importorskip("mapie", reason=NO_MAPIE)
    from neumiss.estimators import NeuMissClassifier

    X, labels, X_test, _ = _classes_data(n=300, n_test=100)
    sets, _ = _classes.conformal_sets(X, labels, X_test, 7, 0.1, TINY)
    cross = ConformalClassifier(NeuMissClassifier(**TINY), method="lac", random_state=7)
    split = ConformalClassifier(NeuMissClassifier(**TINY), method="lac", cv=None,
                                random_state=7).fit(X, labels)
    assert cross.fit(X, labels).cross_conformal_
    np.testing.assert_array_equal(sets["lac"], cross.predict_set(X_test)[0])
    np.testing.assert_array_equal(sets["mapie-lac"],
                                  _mapie.mapie_sets(split, X, labels, X_test, 7)["mapie-lac"])
