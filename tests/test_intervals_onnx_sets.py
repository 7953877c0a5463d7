"""ONNX export of the prediction sets of ConformalClassifier and of the cross-conformal
(CV+) intervals of ConformalRegressor, against ``predict_set`` and ``predict_interval``."""

import numpy as np
import pandas as pd
import pytest

from neumiss.estimators import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import SET_METHODS, ConformalClassifier, ConformalRegressor
from neumiss.intervals._cells import own_cells
from neumiss.tables import LEVEL_MIN_ROWS

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

    from neumiss.scoring import spark_schema

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
        _assert_scorers_match(tmp_path, name, model, test, script)
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


def _mixed_table(n: int, seed: int = 0):
    """A table whose rare values reach some rows only: ``count``'s level 3 has exactly
    LEVEL_MIN_ROWS rows (its own indicator for all rows, none for a model without some of
    them), ``year`` 33 distinct integers, 31 of one row (no indicators for all rows, those
    of 10 and 20 for a model without one of them), ``c`` a category of one row, ``rare``;
    with missing entries in every column. Returns the table and a numeric target."""
    rng = np.random.default_rng(seed)
    count = rng.choice([0.0, 1.0, 2.0], n)
    count[:LEVEL_MIN_ROWS] = 3.0
    year = rng.choice([10.0, 20.0], n)
    year[LEVEL_MIN_ROWS:LEVEL_MIN_ROWS + 31] = np.setdiff1d(np.arange(33.0), [10.0, 20.0])
    text = rng.choice(["x", "y", "z"], n).astype(object)
    text[LEVEL_MIN_ROWS + 31] = "rare"
    frame = pd.DataFrame({"a": rng.normal(size=n), "count": count, "year": year, "c": text,
                          "b": rng.random(n) < 0.5})
    frame = frame.iloc[rng.permutation(n)].reset_index(drop=True)
    y = (frame["a"] + frame["count"] - frame["year"] / 10
         + frame["c"].map({"x": 0.0, "y": 1.0, "z": -1.0, "rare": 3.0}) + frame["b"])
    for column in frame.columns:  # missing entries, the rare values kept
        hide = ((rng.random(n) < 0.1) & ~frame["c"].eq("rare") & ~frame["count"].eq(3.0)
                & frame["year"].isin([10.0, 20.0]))
        frame[column] = frame[column].astype(object).where(~hide, None) \
            if column in ("c", "b") else frame[column].where(~hide)
    frame["b"] = frame["b"].astype("boolean")
    return frame, y.fillna(0).to_numpy()


def _fold_encoded(encoder, fold_encoder, frame):
    """The fold's X and M (float32) that the graph computes from ``encoder``'s encoding
    of ``frame`` (:func:`~neumiss.intervals._fold_encoding.fold_inputs`)."""
    from onnx import TensorProto, helper

    from neumiss.export import Graph
    from neumiss.intervals._fold_encoding import fold_inputs, fold_sources

    g = Graph()
    x, m = fold_inputs(g, fold_sources(encoder, fold_encoder))
    g.op("Identity", [x], "fold_x")
    g.op("Identity", [m], "fold_m")
    d, d_k = encoder.n_features_out_, fold_encoder.n_features_out_
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", d]) for name in "XM"]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", d_k])
               for name in ("fold_x", "fold_m")]
    graph = helper.make_graph(g.nodes, "fold", inputs, outputs,
                              initializer=list(g.initializers.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    encoded = encoder.transform(frame)
    missing = np.isnan(encoded)
    return session.run(None, {"X": np.where(missing, 0, encoded).astype(np.float32),
                              "M": missing.astype(np.float32)})


def test_the_graph_encodes_each_fold_as_its_own_encoder():
    # Each claim of _fold_encoding against TableEncoder.transform: a fold without the
    # rare category reads it as missing (its whole group), without count's level 3 gives
    # all its indicators 0, with indicators of year that the model of all rows has not
    # compares the value; a category spelled as another but for a space is that one.
    from neumiss.tables import TableEncoder

    frame, _ = _mixed_table(200)
    frame.loc[:5, "c"] = ["Nice", "Nice ", " Nice", "Nice", "Nice ", "  Nice  "]
    encoder = TableEncoder(integer_levels=True).fit(frame)
    fold_rows = ~frame["c"].isin(["rare", "Nice"]) & ~(
        frame["count"].eq(3.0) & (np.arange(200) % 2 == 0)) & frame["year"].ne(32.0)
    fold = TableEncoder(integer_levels=True).fit(frame[fold_rows])
    names, fold_names = encoder.output_names(), fold.output_names()
    assert {"c=rare", "c=Nice", "count=3"} <= set(names) - set(fold_names)
    assert {"year=10", "year=20"} <= set(fold_names) - set(names) and "c=Nice " in fold_names
    test = pd.concat([frame, frame.iloc[:3].assign(c=["new", "Nice", "rare"],
                                                   count=[3.0, 7.0, np.nan],
                                                   year=[20.0, 32.0, 40.0])])
    x, m = _fold_encoded(encoder, fold, test)
    expected = fold.transform(test)
    missing = np.isnan(expected)
    np.testing.assert_array_equal(m, missing.astype(np.float32))
    np.testing.assert_array_equal(x, np.where(missing, 0, expected).astype(np.float32))
    rare = test["c"].eq("rare").to_numpy()
    group = [k for k, name in enumerate(fold_names) if name.startswith("c=")]
    assert rare.any() and (m[np.ix_(rare, group)] == 1).all()  # unseen: the group missing
    assert (m[~test["c"].isna().to_numpy() & ~rare & test["c"].ne("new").to_numpy()][:, group]
            == 0).all()


@pytest.mark.filterwarnings("ignore:column 'postcode' has categories not seen")
def test_a_fold_encoding_of_target_statistics_is_refused_by_name():
    # ~150 categories in 300 rows: target statistics (one_hot_limit), which every fold
    # model learns from its own rows; before the refusal the graph fed the fold networks
    # the statistics of all rows (sets and bounds that predict_set / predict_interval did
    # not give).
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 150, 300)
    frame = pd.DataFrame({"a": rng.normal(size=300),
                          "postcode": np.array([f"p{k}" for k in codes], dtype=object)})
    y = frame["a"].to_numpy() + rng.normal(size=150)[codes]
    for model in (ConformalRegressor(NeuMissQuantileRegressor(**TINY), cv=5, random_state=0),
                  ConformalClassifier(NeuMissClassifier(**TINY), cv=5, random_state=0)):
        model.fit(frame, y if isinstance(model, ConformalRegressor) else (y > 0).astype(int))
        calibration = model._cross_calibrated()[1]
        assert "postcode:target" in calibration.estimator.encoder_.output_names()
        with pytest.raises(ValueError, match=r"cannot export fold model 0 of the cross-conformal"
                           r" fit: column 'postcode' is encoded by target statistics.*cv=None"):
            model.to_onnx()


@pytest.fixture(scope="module")
def fold_encodings():
    """A CV+ classifier and regressor (3 folds) on :func:`_mixed_table`, some of whose
    fold models lack its rare category and level, and test rows holding them (and a
    category and level unseen by all)."""
    frame, y = _mixed_table(150)
    labels = np.array(["a", "b", "c"])[np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))]
    base = dict(TINY, integer_levels=True)
    models = [ConformalClassifier(NeuMissClassifier(**base), method="aps", cv=3,
                                  random_state=0).fit(frame, labels),
              ConformalRegressor(NeuMissQuantileRegressor(**base), cv=3,
                                 random_state=0).fit(frame, y)]
    extra = frame.iloc[:4].assign(c=["rare", "rare", "new", "y"], count=[3.0, 3.0, 5.0, 3.0],
                                  year=[30.0, 10.0, 2.0, 40.0])
    return models, pd.concat([frame, extra], ignore_index=True)


def _encoded_outputs(model, frame):
    """The graph's outputs for ``frame``, encoded by the model of all rows."""
    encoded = model._cross_calibrated()[1].estimator.encoder_.transform(frame)
    return _outputs(model.to_onnx(), encoded)[0]


@pytest.mark.filterwarnings("ignore:column 'c' has categories not seen")
def test_fold_models_of_their_own_encoding_give_the_same_sets_and_bounds(fold_encodings):
    # Some fold model never saw 'rare' nor count's level 3, and gives year indicators that
    # the model of all rows has not (its encoding computed from the graph's X inside it):
    # the graph gives predict_set's sets exactly and predict_interval's bounds, on rows
    # holding them too.
    (classifier, regressor), test = fold_encodings
    for model in (classifier, regressor):
        calibration = model._cross_calibrated()[1]
        names = set(calibration.estimator.encoder_.output_names())
        assert {"c=rare", "count=3"} <= names and "year=10" not in names
        folds = [set(fold.encoder_.output_names()) for fold in calibration.estimators]
        assert any("c=rare" not in fold for fold in folds)
        assert any("count=3" not in fold for fold in folds)
        assert any("year=10" in fold for fold in folds)
    assert test["c"].eq("rare").sum() >= 3 and test["count"].eq(3.0).sum() >= 10
    out = _encoded_outputs(classifier, test)
    sets, sizes = classifier.predict_set(test)
    np.testing.assert_array_equal(out["set"], sets)
    np.testing.assert_array_equal(out["set_size"], sizes)
    np.testing.assert_array_equal(out["label"], classifier.predict(test))
    assert 1 < sizes.mean() < 3
    out = _encoded_outputs(regressor, test)
    interval = regressor.predict_interval(test)
    np.testing.assert_allclose(out["y"], regressor.predict(test), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["lower"], interval[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["upper"], interval[:, 1], rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:column 'c' has categories not seen")
def test_the_scorers_give_the_sets_and_bounds_of_fold_encodings(tmp_path, fold_encodings):
    # neumiss score (a saved model file), export/score.py (the ONNX file) and score_frame
    # encode the CSV's rows for the model of all rows, the graph each fold model's own.

    from .test_score_cli import SCORER, _import

    (classifier, regressor), test = fold_encodings
    test.to_csv(tmp_path / "in.csv", index=False)
    script = _import(SCORER, "score_fold_encodings")
    for name, model in (("sets", classifier), ("bounds", regressor)):
        _assert_scorers_match(tmp_path, name, model, test, script)


def _assert_scorers_match(tmp_path, name, model, test, script):
    """``neumiss score`` on ``model`` saved, ``export/score.py`` (``script``) and
    ``score_frame`` on its ONNX file write, for the rows of ``test`` (``in.csv`` in
    ``tmp_path``), the model's own bounds (a regressor, 1e-5) or sets and sizes (exact)."""
    from neumiss import cli
    from neumiss.scoring import score_frame

    model.save(tmp_path / f"{name}.pt")
    model.to_onnx(tmp_path / f"{name}.onnx")
    assert cli.main(["score", str(tmp_path / f"{name}.pt"), str(tmp_path / "in.csv"),
                     str(tmp_path / f"{name}_cli.csv"), "--quiet"]) == 0
    assert script.main([str(tmp_path / f"{name}.onnx"), str(tmp_path / "in.csv"), "-o",
                        str(tmp_path / f"{name}_script.csv")]) == 0
    written = [pd.read_csv(tmp_path / f"{name}_{kind}.csv") for kind in ("cli", "script")]
    written.append(score_frame(test, str(tmp_path / f"{name}.onnx")))
    for scored in written:
        if hasattr(model, "predict_interval"):
            np.testing.assert_allclose(scored[["lower", "upper"]], model.predict_interval(test),
                                       rtol=1e-5, atol=1e-5)
        else:
            sets, sizes = model.predict_set(test)
            np.testing.assert_array_equal(
                scored[["set_a", "set_b", "set_c"]].to_numpy(dtype=bool), sets)
            np.testing.assert_array_equal(scored["set_size"], sizes)


@pytest.mark.parametrize("method", ["lac", "aps-mondrian"])
def test_cross_conformal_sets_agree_where_scores_tie(method):
    # A quarter of the rows miss every feature: each fold network scores them all alike,
    # the test rows missing every feature exactly as its own calibration rows in Python,
    # and one float32 unit away in ONNX Runtime (here one fold network is nearly constant:
    # every row ties). A tie counts alike in both (the score tolerance).
    X, labels, sample = simulated_classes(300, d=3, n_classes=2, missing_rate=0.6, seed=3)
    X_test = sample(400, 4)[0]
    X[::4], X_test[::3] = np.nan, np.nan
    model = ConformalClassifier(NeuMissClassifier(**TINY), method=method, cv=3,
                                random_state=3).fit(X, labels)
    out, _ = _outputs(model.to_onnx(), X_test)
    np.testing.assert_array_equal(out["set"], model.predict_set(X_test)[0])
