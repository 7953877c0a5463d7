"""Regression tests of the deploy path (issue 24): crashes fixed, wrong scores refused,
the readers of ``neumiss score`` and ``export/score.py`` in step with ``predict``."""

from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest

from neumiss import NeuMissRegressor, cli
from neumiss.intervals import ConformalRegressor
from neumiss.scoring import NeuMissOnnxModel, ScoringError, load_model, score_frame, spark_schema
from neumiss.scoring import _readers as readers
from neumiss.tables import TableEncoder

from .test_score_cli import SCORER as SCORER_PATH
from .test_score_cli import _import

#: export/score.py, loaded as the module a user would copy.
SCORER = _import(SCORER_PATH, "score_script")


def _plan_table(n=240, seed=0):
    """A numeric, a categorical (levels "NA" and " z" included) and a boolean column."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "a": rng.normal(size=n),
        "plan": rng.choice(["x", "y", "NA", " z"], size=n).astype(object),
        "flag": rng.random(n) < 0.5,
    })
    frame.loc[::3, "a"] = np.nan
    frame.loc[::5, "plan"] = None
    y = frame["a"].fillna(0) + (frame["plan"] == "x") + 2 * (frame["plan"] == "NA")
    return frame, y.to_numpy()


@pytest.fixture(scope="module")
def plan_model():
    frame, y = _plan_table()
    return NeuMissRegressor(max_epochs=3, depth=2, random_state=0).fit(frame, y), frame


@pytest.fixture(scope="module")
def mondrian():
    frame, y = _plan_table(400, seed=1)
    model = ConformalRegressor(cv=None, random_state=0)
    model.estimator = None
    model.fit(frame, y)
    return model, frame


def test_mondrian_intervals_with_categorical_columns_export_and_match_python(mondrian):
    model, frame = mondrian
    assert model.cell_patterns_.shape[1] == 3  # one per input column, not per encoded one
    scored = score_frame(frame, model.to_onnx().SerializeToString())
    np.testing.assert_allclose(scored[["lower", "upper"]].to_numpy(),
                               model.predict_interval(frame), rtol=1e-5, atol=1e-6)


def test_an_unseen_category_takes_the_cell_of_a_missing_one(mondrian):
    # The graph sees only the encoded mask, where an unseen category is missing: so does
    # Python's cell assignment.
    model, frame = mondrian
    unseen = frame.iloc[:20].assign(plan="never seen")
    with pytest.warns(UserWarning, match="not seen at fit"):
        expected = model.predict_interval(unseen)
    scored = score_frame(unseen, model.to_onnx().SerializeToString())
    np.testing.assert_allclose(scored[["lower", "upper"]].to_numpy(), expected,
                               rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        missing = model.predict_interval(frame.iloc[:20].assign(plan=None))
    np.testing.assert_allclose(expected, missing)


def test_arrow_backed_columns_fit_predict_and_score_as_numpy_ones(plan_model):
    model, frame = plan_model
    arrow = frame.convert_dtypes(dtype_backend="pyarrow")
    assert isinstance(arrow["plan"].dtype, pd.ArrowDtype)
    refit = NeuMissRegressor(max_epochs=3, depth=2, random_state=0).fit(
        arrow.assign(n=np.arange(len(frame))), np.zeros(len(frame)))
    assert [c.kind for c in refit.encoder_.columns_] == [
        "numeric", "categorical", "boolean", "numeric"]
    np.testing.assert_array_equal(model.predict(arrow), model.predict(frame))
    scored = score_frame(arrow, model.to_onnx().SerializeToString())
    np.testing.assert_allclose(scored["prediction"], model.predict(frame), rtol=1e-5, atol=1e-6)


def test_arrow_integer_and_boolean_columns_with_nulls_are_encoded():
    frame = pd.DataFrame({"i": pd.array([1, None, 3], dtype="int64[pyarrow]"),
                          "b": pd.array([True, None, False], dtype="bool[pyarrow]"),
                          "s": pd.array(["u", None, "v"], dtype="string[pyarrow]")})
    encoder = TableEncoder().fit(frame)
    assert [c.kind for c in encoder.columns_] == ["numeric", "boolean", "categorical"]
    np.testing.assert_array_equal(encoder.transform(frame), [
        [1, 1, 1, 0], [np.nan, np.nan, np.nan, np.nan], [3, 0, 0, 1]])


def test_an_array_on_a_categorical_model_names_the_expected_columns(plan_model):
    model, frame = plan_model
    with pytest.raises(ValueError, match=r"pass a DataFrame with the columns 'a' \(numeric\), "
                                         r"'plan' \(categorical: \[' z', 'NA', 'x', 'y'\]\), "
                                         r"'flag' \(boolean\)"):
        model.predict(frame.to_numpy())


def test_a_category_spelled_like_a_missing_token_or_with_spaces_is_that_category(plan_model):
    model, frame = plan_model
    onnx = NeuMissOnnxModel(model.to_onnx().SerializeToString())
    table = pd.DataFrame({"a": [0.5] * 4, "plan": ["NA", " z", "na", "z"], "flag": [True] * 4})
    scored = score_frame(table, onnx)["prediction"].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "z" is " z" once stripped: not an unseen category
        expected = model.predict(table.assign(plan=["NA", " z", None, "z"]))
    # "na" is a missing token; "z" matches " z" once stripped, in predict as in the scorers,
    # which read text files, whose cells may carry spaces after the commas.
    np.testing.assert_allclose(scored, expected, rtol=1e-5)
    np.testing.assert_allclose(scored[3], scored[1], rtol=1e-6)


@pytest.fixture(scope="module")
def plan_files(plan_model, tmp_path_factory):
    """The plan model's ONNX file and a CSV of its table."""
    model, frame = plan_model
    folder = tmp_path_factory.mktemp("plan")
    model.to_onnx(folder / "model.onnx")
    frame.iloc[:40].to_csv(folder / "in.csv", index=False)
    return folder


@pytest.mark.parametrize("link", [False, True])
def test_both_scorers_refuse_to_write_over_their_input(plan_files, tmp_path, capsys, link):
    source = plan_files / "in.csv"
    target = source
    if link:
        target = tmp_path / "link.csv"
        target.symlink_to(source)
    before = source.read_bytes()
    assert cli.main(["score", str(plan_files / "model.onnx"), str(source), str(target)]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert SCORER.main([str(plan_files / "model.onnx"), str(source), "-o", str(target)]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert source.read_bytes() == before


def _flip_a_weight(content: bytes) -> bytes:
    """The model with the exponent bits of a float set in its largest weight matrix."""
    proto = onnx.load_from_string(content)
    weight = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    at = content.index(weight.raw_data) + 3  # the high byte of the first float32
    return content[:at] + bytes([content[at] | 0x7F]) + content[at + 1:]


def test_a_damaged_file_fails_its_integrity_check_and_plain_onnx_runtime_still_loads_it(
        plan_files, tmp_path):
    content = (plan_files / "model.onnx").read_bytes()
    onnx_model = NeuMissOnnxModel(content)
    props = onnx.load_from_string(content).metadata_props
    assert props[-1].key == "integrity_sha256" and len(props[-1].value) == 64
    ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    assert onnx_model.task == "regression"
    damaged = tmp_path / "damaged.onnx"
    damaged.write_bytes(_flip_a_weight(content))
    for load in (NeuMissOnnxModel, SCORER.NeuMissOnnxModel):
        with pytest.raises(ValueError, match=r"damaged\.onnx fails its integrity check"):
            load(str(damaged))


def test_non_finite_outputs_of_an_edited_graph_are_refused_naming_the_file_and_rows(
        plan_model, tmp_path, capsys):
    model, frame = plan_model
    proto = model.to_onnx()
    del proto.metadata_props[-1]  # no digest: as a file edited by hand
    weight = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    values = onnx.numpy_helper.to_array(weight).copy()
    values[...] = np.inf
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    onnx.save(proto, tmp_path / "edited.onnx")
    frame.iloc[:5].to_parquet(tmp_path / "in.parquet")
    assert cli.main(["score", str(tmp_path / "edited.onnx"), str(tmp_path / "in.parquet"),
                     str(tmp_path / "out.csv")]) == 1
    err = capsys.readouterr().err
    assert "edited.onnx: the outputs of " in err and "in.parquet, row 2, " in err
    assert "not finite" in err
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("value", [1e30, -1e38])
def test_values_predict_refuses_are_refused_by_every_scorer(plan_model, plan_files, tmp_path,
                                                            capsys, value):
    model, frame = plan_model
    table = frame.iloc[:6].copy()
    table.loc[table.index[3], "a"] = value
    with pytest.raises(ValueError, match="standard deviations from the column's training mean"):
        model.predict(table)
    content = (plan_files / "model.onnx").read_bytes()
    message = f"row 4 (index 3), column 1 (a): {value:.7g} is too far from the training data"
    with pytest.raises(ScoringError, match=f"^{re.escape(message)}"):
        score_frame(table, content)
    table.to_csv(tmp_path / "in.csv", index=False)
    assert SCORER.main([str(plan_files / "model.onnx"), str(tmp_path / "in.csv")]) == 1
    assert f"{tmp_path / 'in.csv'}, line 5, column 1 (a)" in capsys.readouterr().err


def test_both_scorers_read_spaced_cells_and_levels_spelled_like_missing_tokens(
        plan_model, plan_files, tmp_path):
    model, _ = plan_model
    text = ("a, plan, flag\n"
            " NA, NA, true\n"       # a missing number; the level "NA"
            "0.5 ,  z, false\n"     # spaces after commas; " z" read as the level " z"
            "nan ,x, NA\n")
    (tmp_path / "in.csv").write_text(text)
    expected = model.predict(pd.DataFrame({"a": [np.nan, 0.5, np.nan], "plan": ["NA", " z", "x"],
                                           "flag": pd.array([True, False, None], "boolean")}))
    assert cli.main(["score", str(plan_files / "model.onnx"), str(tmp_path / "in.csv"),
                     str(tmp_path / "out.csv")]) == 0
    command = pd.read_csv(tmp_path / "out.csv")["prediction"]
    script = SCORER.main([str(plan_files / "model.onnx"), str(tmp_path / "in.csv"),
                          "-o", str(tmp_path / "script.csv")])
    assert script == 0
    np.testing.assert_allclose(command, expected, rtol=1e-5)
    np.testing.assert_allclose(pd.read_csv(tmp_path / "script.csv")["prediction"], expected,
                               rtol=1e-5)


def test_a_bad_cell_after_many_good_rows_is_named_by_its_line(plan_files, tmp_path, capsys):
    rows = ["a,plan,flag"] + [f"{i / 7:.3f},x,true" for i in range(3000)] + ["oops,x,true"]
    (tmp_path / "in.csv").write_text("\n".join(rows) + "\n")
    assert cli.main(["score", str(plan_files / "model.onnx"), str(tmp_path / "in.csv"),
                     str(tmp_path / "out.csv")]) == 1
    assert "in.csv, line 3002, column 1 (a): 'oops' is not a number" in capsys.readouterr().err


def test_kept_columns_are_not_called_unexpected(plan_files, tmp_path, capsys):
    (tmp_path / "in.csv").write_text("id,a,flag\n1,0.5,true\n")
    assert cli.main(["score", str(plan_files / "model.onnx"), str(tmp_path / "in.csv"),
                     str(tmp_path / "out.csv"), "--keep", "id"]) == 1
    assert "missing ['plan'], unexpected []" in capsys.readouterr().err


def test_reading_on_as_text_resumes_at_the_row_after_the_batches_already_scored(
        plan_model, plan_files, tmp_path, monkeypatch):
    # Blocks of 1 kB: pyarrow's number reader has yielded several batches when it meets
    # " NA"; the text reader must go on from the next row, none lost or repeated.
    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 1024)
    model, _ = plan_model
    n = 400
    rows = [f"{i / 100:.2f},{'x' if i % 3 else 'NA'},{'true' if i % 2 else 'false'}"
            for i in range(n)]
    rows[350] = " NA,x,true"
    (tmp_path / "in.csv").write_text("a,plan,flag\n" + "\n".join(rows) + "\n")
    assert cli.main(["score", str(plan_files / "model.onnx"), str(tmp_path / "in.csv"),
                     str(tmp_path / "out.csv")]) == 0
    table = pd.read_csv(tmp_path / "in.csv", keep_default_na=False, skipinitialspace=True)
    table["a"] = pd.to_numeric(table["a"].replace("NA", np.nan))
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out.csv")["prediction"],
                               model.predict(table), rtol=1e-5)


@pytest.mark.slow
def test_spark_scores_mondrian_intervals_of_a_categorical_model_as_python(mondrian, monkeypatch):
    from .test_scoring import _spark_session

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    model, frame = mondrian
    content = model.to_onnx().SerializeToString()
    table = frame.assign(id=np.arange(len(frame)))

    def score_partitions(frames):
        onnx_model = load_model(content, threads=1)
        for part in frames:
            yield score_frame(part, onnx_model, keep=["id"])

    spark = _spark_session()
    try:
        scored = (spark.createDataFrame(table).repartition(3)
                  .mapInPandas(score_partitions, schema=spark_schema(content, keep="id bigint"))
                  .toPandas().sort_values("id"))
    finally:
        spark.stop()
    assert list(scored.columns) == ["id", "prediction", "lower", "upper"]
    np.testing.assert_allclose(scored[["lower", "upper"]].to_numpy(),
                               model.predict_interval(frame), rtol=1e-5, atol=1e-6)
