"""ONNX export of the prediction sets of ConformalClassifier and of the cross-conformal
(CV+) intervals of ConformalRegressor, against ``predict_set`` and ``predict_interval``."""

import numpy as np
import pytest

from neumiss.estimators import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import SET_METHODS, ConformalClassifier, ConformalRegressor
from neumiss.intervals._cells import own_cells

from ._interval_helpers import TINY, simulated, simulated_classes

ort = pytest.importorskip("onnxruntime")


def _outputs(onnx_model, X):
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    missing = np.isnan(X)
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, {"X": np.where(missing, 0, X).astype(np.float32),
                                 "M": missing.astype(np.float32)})
    return dict(zip(names, values)), {p.key: p.value for p in onnx_model.metadata_props}


@pytest.fixture(scope="module")
def classes():
    X, labels, sample = simulated_classes(1500, n_classes=3)
    return X, np.array(["a", "b", "c"])[labels], sample(300, 1)[0]


@pytest.mark.parametrize("method", list(SET_METHODS))
def test_the_graph_gives_the_same_sets(classes, method):
    X, labels, X_test = classes
    model = ConformalClassifier(NeuMissClassifier(**TINY), method=method,
                                random_state=0).fit(X, labels)
    out, meta = _outputs(model.to_onnx(), X_test)
    sets, sizes = model.predict_set(X_test)
    assert out["set"].dtype == bool and out["set"].shape == (300, 3)
    np.testing.assert_array_equal(out["set"], sets)
    np.testing.assert_array_equal(out["set_size"], sizes)
    np.testing.assert_array_equal(out["label"], model.predict(X_test))
    assert meta["estimator"] == "ConformalClassifier" and meta["set_method"] == method
    assert meta["task"] == "classification" and meta["classes"] == '["a", "b", "c"]'
    assert 1 <= sizes.mean() < 3 or method.startswith("aps")


def test_binary_sets_of_the_graph(classes):
    X, labels, X_test = classes
    model = ConformalClassifier(NeuMissClassifier(**TINY), random_state=0).fit(X, labels == "a")
    out, _ = _outputs(model.to_onnx(), X_test)
    np.testing.assert_array_equal(out["set"], model.predict_set(X_test)[0])


@pytest.mark.parametrize("method", ["split", "cqr", "cqr-mondrian"])
def test_the_graph_gives_the_same_cross_conformal_intervals(method):
    X, y, truth = simulated(300, d=3, missing_rate=0.4)
    X_test = truth.sample(200, random_state=1)[0]
    base = (NeuMissRegressor if method == "split" else NeuMissQuantileRegressor)(**TINY)
    model = ConformalRegressor(base, method=method, cv=4, random_state=0).fit(X, y)
    assert model.cross_conformal_
    out, meta = _outputs(model.to_onnx(), X_test)
    interval = model.predict_interval(X_test)
    np.testing.assert_allclose(out["y"], model.predict(X_test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["lower"], interval[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["upper"], interval[:, 1], rtol=1e-5, atol=1e-5)
    assert meta["calibration"] == "cv+" and meta["n_folds"] == "4"
    assert meta["n_calibration"] == "300" and meta["embedded_calibration_rows"] == "0"


def test_cross_conformal_mondrian_graph_falls_back_to_all_rows_in_small_cells():
    # At fit-time alpha = 0.01, a cell needs 99 rows: some cells use their own rows, the
    # others all rows; the graph picks each row's group as predict_interval does.
    X, y, truth = simulated(400, d=3, missing_rate=0.4)
    X_test = truth.sample(200, random_state=1)[0]
    model = ConformalRegressor(NeuMissQuantileRegressor(**TINY), alpha=0.01, cv=4,
                               random_state=0).fit(X, y)
    sizes = np.bincount(model.calibration_cells_)
    assert (sizes >= 99).any() and (sizes < 99).any()
    out, _ = _outputs(model.to_onnx(), X_test)
    np.testing.assert_allclose(np.column_stack([out["lower"], out["upper"]]),
                               model.predict_interval(X_test), rtol=1e-5, atol=1e-5)


def test_the_scorers_write_the_sets_and_the_cross_conformal_bounds(tmp_path, classes):
    # neumiss score (from a saved model file), export/score.py (from the ONNX file) and
    # score_frame give the sets of predict_set (a split's and CV+'s) and the bounds of
    # predict_interval.
    import pandas as pd

    from neumiss import cli
    from neumiss.scoring import score_frame, spark_schema

    from .test_score_cli import SCORER, _import

    X, labels, X_test = classes
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    test = pd.DataFrame(X_test, columns=["a", "b", "c"])
    test.to_csv(tmp_path / "in.csv", index=False)
    models = {"sets": ConformalClassifier(NeuMissClassifier(**TINY), method="aps-mondrian",
                                          random_state=0).fit(frame, labels),
              "cross_sets": ConformalClassifier(NeuMissClassifier(**TINY), cv=3,
                                                random_state=0).fit(frame.iloc[:300],
                                                                    labels[:300])}
    y = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1])
    models["cross"] = ConformalRegressor(NeuMissQuantileRegressor(**TINY), random_state=0).fit(
        frame.iloc[:300], y[:300])
    assert models["cross"].cross_conformal_  # cv="auto" on 300 rows
    script = _import(SCORER, "score_sets")
    for name, model in models.items():
        model.save(tmp_path / f"{name}.pt")
        model.to_onnx(tmp_path / f"{name}.onnx")
        assert cli.main(["score", str(tmp_path / f"{name}.pt"), str(tmp_path / "in.csv"),
                         str(tmp_path / f"{name}_cli.csv"), "--quiet"]) == 0
        assert script.main([str(tmp_path / f"{name}.onnx"), str(tmp_path / "in.csv"), "-o",
                            str(tmp_path / f"{name}_script.csv")]) == 0
        written = [pd.read_csv(tmp_path / f"{name}_{kind}.csv") for kind in ("cli", "script")]
        written.append(score_frame(test, str(tmp_path / f"{name}.onnx")))
        for scored in written:
            if name == "cross":
                np.testing.assert_allclose(scored[["lower", "upper"]],
                                           model.predict_interval(test), rtol=1e-5, atol=1e-5)
            else:
                sets, sizes = model.predict_set(test)
                np.testing.assert_array_equal(
                    scored[["set_a", "set_b", "set_c"]].to_numpy(dtype=bool), sets)
                np.testing.assert_array_equal(scored["set_size"], sizes)
    schema = spark_schema(str(tmp_path / "sets.onnx"))
    assert "`set_a` boolean" in schema and "`set_size` bigint" in schema


@pytest.mark.parametrize("method, alpha", [("lac", 0.1), ("aps", 0.1), ("lac-mondrian", 0.015),
                                           ("aps-mondrian", 0.1)])
def test_the_graph_gives_the_same_cross_conformal_sets(method, alpha):
    # At alpha = 0.015 a cell needs 66 rows: two of the three cells use their own rows,
    # the third all rows; the graph picks each row's group and rank as predict_set does.
    X, labels, sample = simulated_classes(300, d=4, n_classes=3, missing_rate=0.4)
    X_test = sample(300, 1)[0]
    model = ConformalClassifier(NeuMissClassifier(**TINY), method=method, alpha=alpha, cv=3,
                                random_state=0).fit(X, np.array(["a", "b", "c"])[labels])
    assert model.cross_conformal_
    if method == "lac-mondrian":
        own = own_cells(model._cross_calibrated()[1], alpha)
        assert own.any() and not own.all()
    out, meta = _outputs(model.to_onnx(), X_test)
    sets, sizes = model.predict_set(X_test)
    np.testing.assert_array_equal(out["set"], sets)
    np.testing.assert_array_equal(out["set_size"], sizes)
    np.testing.assert_array_equal(out["label"], model.predict(X_test))
    np.testing.assert_allclose(out["probabilities"], model.predict_proba(X_test), atol=1e-6)
    assert meta["calibration"] == "cv+" and meta["n_folds"] == "3"
    assert meta["n_calibration"] == "300" and meta["set_method"] == method
    assert 0 < sizes.mean() < 3


def test_a_fold_model_encoding_the_columns_otherwise_is_refused_by_name():
    # A category of a single row is absent from the training rows of the fold holding
    # it: that fold's network takes one column fewer than the graph's X.
    import pandas as pd

    rng = np.random.default_rng(0)
    text = rng.choice(["x", "y"], 120).astype(object)
    text[0] = "rare"
    frame = pd.DataFrame({"a": rng.normal(size=120), "c": text})
    labels = (frame["a"] + rng.normal(size=120) > 0).astype(int)
    model = ConformalClassifier(NeuMissClassifier(**TINY), cv=3, random_state=0).fit(
        frame, labels)
    with pytest.raises(ValueError, match=r"fold model \d of the cross-conformal fit encodes "
                       r"the columns otherwise.*\['c=rare'\].*cv=None"):
        model.to_onnx()
    sets, _ = model.predict_set(frame.iloc[:5])  # Python scores it: each model its own way
    assert sets.shape == (5, 2)
