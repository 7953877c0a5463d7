"""export/score.py (torch-free scorer) and the golden fixtures of export/fixtures."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from onnx import TensorProto, helper

import neumiss
from neumiss.export import export_onnx
from neumiss.scoring import _readers as scoring_readers

EXPORT = Path(__file__).resolve().parents[1] / "export"
SCORER = EXPORT / "score.py"
FIXTURES = EXPORT / "fixtures"
TASKS = ("regressor", "classifier")


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def score():
    return _import(SCORER, "neumiss_export_score")


@pytest.fixture(scope="module")
def estimators():
    return {task: neumiss.load(FIXTURES / task / "estimator.pt") for task in TASKS}


def _score(*args, stdin=None):
    """Run the scorer as a command: (exit status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, str(SCORER), *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


def _table(estimator, n_rows, seed):
    """Random feature table in the training units with ~30% missing, all-missing and full rows."""
    rng = np.random.default_rng(seed)
    standardizer = estimator.preprocessor_
    noise = rng.normal(size=(n_rows, estimator.n_features_in_))
    X = standardizer.mean_ + standardizer.scale_ * noise
    X[rng.random(X.shape) < 0.3] = np.nan
    X[0] = np.nan
    X[1] = standardizer.mean_
    return X


def _csv_text(X, names=None):
    """CSV text of X, spelling missing cells in every accepted way."""
    spellings = ["", "NA", "nan", "NaN", " na "]
    lines = [",".join(names)] if names is not None else []
    for i, row in enumerate(X):
        cells = [spellings[(i + j) % len(spellings)] if np.isnan(v) else repr(v) for j, v in
                 enumerate(row.tolist())]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def _check_outputs(frame, estimator, X):
    """The scorer's output table equals the estimator's predictions for X."""
    X = pd.DataFrame(np.asarray(X, dtype=float), columns=estimator.feature_names_in_)
    if "prediction" in frame:
        assert list(frame.columns) == ["prediction"]
        np.testing.assert_allclose(
            frame["prediction"], estimator.predict(X), rtol=0, atol=1e-5 * estimator.y_scale_
        )
        return
    assert list(frame.columns) == ["label", *(f"proba_{c}" for c in estimator.classes_)]
    np.testing.assert_allclose(frame.iloc[:, 1:], estimator.predict_proba(X), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(frame["label"].astype(str), estimator.predict(X).astype(str))


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("mode", ["header-stdout", "no-header-stdin", "header-file-output"])
def test_scorer_matches_the_estimator(tmp_path, estimators, task, mode):
    estimator = estimators[task]
    X = _table(estimator, 300, seed=len(mode))
    names = list(estimator.feature_names_in_) if "no-header" not in mode else None
    text = _csv_text(X, names)
    model = FIXTURES / task / "model.onnx"
    if mode == "no-header-stdin":
        rc, out, err = _score(model, "-", stdin=text)
    else:
        (tmp_path / "in.csv").write_text(text)
        extra = ["-o", tmp_path / "out.csv"] if mode == "header-file-output" else []
        rc, out, err = _score(model, tmp_path / "in.csv", *extra)
        if extra:
            assert out == ""
            out = (tmp_path / "out.csv").read_text()
    assert rc == 0, err
    frame = pd.read_csv(io.StringIO(out), keep_default_na=False)
    assert len(frame) == len(X)
    _check_outputs(frame, estimator, X)


@pytest.mark.parametrize("task", TASKS)
def test_golden_fixture_conformance(estimators, task):
    """The scorer (ONNX Runtime) reproduces expected.csv, written from torch's predict."""
    folder = FIXTURES / task
    rc, out, err = _score(folder / "model.onnx", folder / "inputs.csv")
    assert rc == 0, err
    got = pd.read_csv(io.StringIO(out), keep_default_na=False)
    expected = pd.read_csv(folder / "expected.csv", keep_default_na=False)
    assert list(got.columns) == list(expected.columns)
    numeric = [c for c in expected.columns if c != "label"]
    tolerance = 1e-5 * (estimators[task].y_scale_ if task == "regressor" else 1.0)
    np.testing.assert_allclose(got[numeric], expected[numeric], rtol=0, atol=tolerance)
    if "label" in expected:
        np.testing.assert_array_equal(got["label"], expected["label"])


@pytest.mark.parametrize("task", TASKS)
def test_golden_fixture_is_consistent(estimators, task):
    """expected.csv is the saved estimator's output; model.onnx is its current export."""
    folder = FIXTURES / task
    estimator = estimators[task]
    inputs = pd.read_csv(folder / "inputs.csv")  # reads "", NA and nan as NaN
    assert inputs.isna().all(axis=1).any() and inputs.notna().all(axis=1).any()
    expected = pd.read_csv(folder / "expected.csv", keep_default_na=False)
    _check_outputs(expected, estimator, inputs)

    X = inputs.to_numpy()
    feeds = {"X": np.nan_to_num(X, nan=0.0).astype(np.float32),
             "M": np.isnan(X).astype(np.float32)}
    committed = ort.InferenceSession(str(folder / "model.onnx")).run(None, feeds)
    current = ort.InferenceSession(export_onnx(estimator).SerializeToString()).run(None, feeds)
    for a, b in zip(committed, current, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_regenerate_script_writes_consistent_fixtures(tmp_path):
    regenerate = _import(FIXTURES / "regenerate.py", "neumiss_fixture_regenerate")
    regenerate.write_fixtures(tmp_path)
    for task in TASKS:
        folder = tmp_path / task
        rc, out, err = _score(folder / "model.onnx", folder / "inputs.csv")
        assert rc == 0, err
        estimator = neumiss.load(folder / "estimator.pt")
        _check_outputs(pd.read_csv(io.StringIO(out), keep_default_na=False), estimator,
                       pd.read_csv(folder / "inputs.csv"))


def test_scorer_imports_neither_torch_nor_neumiss():
    folder = FIXTURES / "classifier"
    blocked = "torch neumiss pandas sklearn scipy onnx".split()
    code = (
        "import runpy, sys\n"
        f"sys.modules.update(dict.fromkeys({blocked!r}))\n"
        f"sys.argv = ['score.py', {str(folder / 'model.onnx')!r}, {str(folder / 'inputs.csv')!r}]\n"
        f"runpy.run_path({str(SCORER)!r}, run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("label,proba_high")


def _foreign_model(path):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["y"])], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    onnx.save(helper.make_model(graph, producer_name="someone-else"), path)


BAD_INPUTS = {
    "too-many-columns": ("age,income,score,tenure\n1,2,3,4\n1,2,3,4,5\n",
                         ["line 3", "expected 4 columns, got 5"]),
    "too-few-columns": ("1,2,3,4\n1,2\n", ["line 2", "expected 4 columns, got 2"]),
    "header-width": ("age,income,score\n1,2,3\n", ["line 1 (header)", "missing ['tenure']"]),
    "non-numeric": ("age,income,score,tenure\n1,2,3,4\n1,two,3,4\n",
                    ["line 3, column 2 (income)", "'two' is not a number"]),
    "infinite": ("1,2,inf,4\n", ["line 1, column 3 (score)", "'inf'"]),
    "renamed-column": ("age,salary,score,tenure\n1,2,3,4\n",
                       ["missing ['income']", "unexpected ['salary']"]),
    "duplicated-column": ("age,income,score,tenure,age\n1,2,3,4,5\n", ["['age'] appear more"]),
    "empty": ("age,income,score,tenure\n", ["no data rows"]),
}


def test_scorer_matches_columns_by_name(tmp_path, estimators):
    """Reordered columns and columns the model does not use: matched by header name."""
    estimator = estimators["regressor"]
    X = _table(estimator, 50, seed=3)
    names = list(estimator.feature_names_in_)
    frame = pd.DataFrame(X, columns=names).assign(id=np.arange(50))
    frame[["id", *names[::-1]]].to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = _score(FIXTURES / "regressor" / "model.onnx", tmp_path / "in.csv")
    assert rc == 0, err
    assert "columns the model does not use, ignored: ['id']" in err
    _check_outputs(pd.read_csv(io.StringIO(out)), estimator, X)


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_scorer_rejects_bad_tables(tmp_path, case):
    text, fragments = BAD_INPUTS[case]
    (tmp_path / "in.csv").write_text(text)
    rc, out, err = _score(FIXTURES / "regressor" / "model.onnx", tmp_path / "in.csv")
    assert rc == 1 and out == ""
    assert err.startswith("score.py: error:") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize("case", ["csv-as-model", "torch-file", "foreign-onnx", "no-file"])
def test_scorer_rejects_models_not_from_neumiss(tmp_path, case):
    model = {
        "csv-as-model": FIXTURES / "regressor" / "inputs.csv",
        "torch-file": FIXTURES / "regressor" / "estimator.pt",
        "foreign-onnx": tmp_path / "foreign.onnx",
        "no-file": tmp_path / "absent.onnx",
    }[case]
    if case == "foreign-onnx":
        _foreign_model(model)
    rc, out, err = _score(model, FIXTURES / "regressor" / "inputs.csv")
    assert rc == 1 and out == "" and "Traceback" not in err
    expected = {
        "csv-as-model": "not a readable ONNX model",
        "torch-file": "not a readable ONNX model",
        "foreign-onnx": "not one exported by neumiss (producer 'someone-else'",
        "no-file": "no such model file",
    }[case]
    assert expected in err


def test_explicit_mask_nan_where_observed_is_an_error(score, estimators):
    model = score.NeuMissOnnxModel(str(FIXTURES / "regressor" / "model.onnx"))
    X = _table(estimators["regressor"], 5, seed=1)
    M = np.isnan(X).astype(np.float32)
    X[3, 2], M[3, 2] = np.nan, 0.0
    X_before, M_before = X.copy(), M.copy()
    with pytest.raises(score.ScoringError, match=r"NaN at row 3, column 2 where M says observed"):
        model.predict(X, M)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(M, M_before)


def test_explicit_mask_wins_over_values_at_missing_entries(score, estimators):
    estimator = estimators["regressor"]
    model = score.NeuMissOnnxModel(str(FIXTURES / "regressor" / "model.onnx"))
    X = _table(estimator, 50, seed=2)
    M = np.isnan(X)
    filled = np.where(M, 123.0, X)  # arbitrary values where M says missing
    y = model.predict(filled, M)["y"]
    frame = pd.DataFrame(X, columns=estimator.feature_names_in_)
    np.testing.assert_allclose(y, estimator.predict(frame), rtol=0, atol=1e-5 * estimator.y_scale_)
    np.testing.assert_array_equal(model.predict(X)["y"], y)
    assert (filled[M] == 123.0).all()


@pytest.mark.parametrize(
    "M, message",
    [
        (np.full((2, 4), 0.5), "only 0 / 1"),
        (np.zeros((2, 3)), "M has shape"),
        (None, "must be 2-D"),
    ],
)
def test_build_inputs_rejects_bad_masks(score, M, message):
    X = np.ones((2, 4)) if M is not None else np.ones(4)
    with pytest.raises(score.ScoringError, match=message):
        score.build_inputs(X, M, n_features=4)


def test_build_inputs_counts_columns(score):
    with pytest.raises(score.ScoringError, match="X has 3 columns, the model expects 4"):
        score.build_inputs(np.ones((2, 3)), n_features=4)


@pytest.fixture(scope="module")
def categorical_model(tmp_path_factory):
    """A regressor on a table with categorical, string and boolean columns, and its ONNX file."""
    from .test_encoding import mixed_table

    frame, y = mixed_table(300)
    estimator = neumiss.NeuMissRegressor(max_epochs=5, random_state=0).fit(frame, y)
    path = tmp_path_factory.mktemp("categorical") / "model.onnx"
    export_onnx(estimator, path)
    return estimator, frame, path


def test_scorer_encodes_categories_as_the_estimator(score, categorical_model, tmp_path):
    estimator, frame, path = categorical_model
    table = frame.iloc[:40].astype(object).copy()
    # unseen in 4 rows of 40, more than UNSEEN_WARNING_SHARE: missing, with a warning
    table.loc[table.index[:4], "size"] = "XXL"
    csv_path = tmp_path / "input.csv"
    table.to_csv(csv_path, index=False, na_rep="NA")
    code, out, err = _score(path, csv_path)
    assert code == 0, err
    assert "column 'size' has categories not seen at fit" in err and "XXL" in err
    predicted = pd.read_csv(io.StringIO(out))["prediction"].to_numpy()
    with pytest.warns(UserWarning, match="not seen at fit"):
        expected = estimator.predict(table)
    np.testing.assert_allclose(predicted, expected, rtol=0, atol=1e-5 * estimator.y_scale_)
    model = score.NeuMissOnnxModel(str(path))
    assert model.n_features == 4 and model.n_encoded == 8
    assert [c["kind"] for c in model.encoding] == ["numeric", "categorical", "categorical",
                                                    "boolean"]


def test_scorer_names_the_cell_of_a_bad_boolean(categorical_model, tmp_path):
    _, frame, path = categorical_model
    table = frame.iloc[:3].astype(object).copy()
    table.loc[table.index[1], "flag"] = "maybe"
    table.to_csv(tmp_path / "input.csv", index=False, na_rep="NA")
    code, _, err = _score(path, tmp_path / "input.csv")
    assert code == 1
    assert "line 3, column 4 (flag): 'maybe' is not true or false" in err


def test_chunked_predict_matches_one_call_and_numbers_errors_over_all_rows(score, estimators,
                                                                            monkeypatch):
    model = score.NeuMissOnnxModel(str(FIXTURES / "regressor" / "model.onnx"))
    X = _table(estimators["regressor"], 40, seed=3).astype(np.float32)
    whole = model.predict(X)["y"]
    monkeypatch.setattr(score, "CHUNK_ROWS", 7)  # 6 chunks, the last of 5 rows
    overwritten = X.copy()
    np.testing.assert_array_equal(model.predict(overwritten, overwrite=True)["y"], whole)
    assert not np.isnan(overwritten).any()  # the zeros were written into X itself
    M = np.isnan(X)
    X[23, 1], X[30, 0] = np.inf, -np.inf
    M[23, 1] = M[30, 0] = False
    with pytest.raises(score.ScoringError, match=r"infinite .* at row 23, column 1 where M says "
                                                 r"observed \(2 such entries\)"):
        model.predict(X, M)


# ------------------------------------------------------------------ the table rules
@pytest.fixture(scope="module")
def regressor(score):
    """The regressor fixture's model: columns age, income, score, tenure."""
    return score.NeuMissOnnxModel(str(FIXTURES / "regressor" / "model.onnx"))


def test_missing_spellings_are_the_tokens_in_every_case(score):
    spellings = scoring_readers.missing_spellings()
    assert spellings == sorted(spellings) and len(spellings) == 1 + 4 + 8
    assert {"", "NA", "na", "nA", "NaN", "NAN", "nan"} <= set(spellings)
    assert all(np.isnan(score._parse_cell(text)) for text in spellings)
    assert score._parse_cell(" NA ") != score._parse_cell(" NA ")  # NaN: stripped first


def test_locate_columns_reads_a_header_or_a_data_line(score, regressor):
    names = ["tenure", " age", "score", "id", "income"]
    assert score.locate_columns(names, regressor) == (
        [1, 4, 2, 0], ["tenure", "age", "score", "id", "income"])
    assert score.locate_columns(["1", "NA", "", "4"], regressor) == ([0, 1, 2, 3], None)
    assert score.locate_columns(["a", "b", "c", "d"], regressor, header="no")[1] is None
    with pytest.raises(score.ScoringError, match=r"^f.csv, line 1 \(header\): missing \["):
        score.locate_columns(["1", "2", "3", "4"], regressor, header="yes", where="f.csv, line 1")
    with pytest.raises(score.ScoringError, match=r"^line 1: expected 4 columns, got 3 \(and no "
                                                 r"header naming them\)$"):
        score.locate_columns(["1", "2", "3"], regressor)


def test_messages_name_the_place_the_column_and_the_rule(score):
    flag = {"name": "flag", "kind": "boolean", "categories": [], "other": False}
    assert str(score.cell_error("line 3", 3, flag, "maybe")) == (
        "line 3, column 4 (flag): 'maybe' is not true or false (missing values are empty "
        "cells, NA or nan)")
    age = {"name": "age", "kind": "numeric", "categories": [], "other": False}
    assert "column 1 (age): 'x' is not a number" in str(score.cell_error("f.csv", 0, age, "x"))
    assert str(score.width_error("line 2", 4, 5)) == "line 2: expected 4 columns, got 5"
    assert score.unused_note(["id"]) == "columns the model does not use, ignored: ['id']"
    assert score.unseen_note("size", set("gfedcba")) == (
        "column 'size' has categories not seen at fit, scored as missing: "
        "['a', 'b', 'c', 'd', 'e']")


def test_open_text_skips_the_byte_order_mark_and_names_other_encodings(score, tmp_path):
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfage\n")
    with score.open_text(str(tmp_path / "bom.csv")) as handle:
        assert handle.read() == "age\n"
    (tmp_path / "latin.csv").write_bytes(b"\xe9t\xe9\n")
    with pytest.raises(UnicodeDecodeError) as caught, \
            score.open_text(str(tmp_path / "latin.csv")) as handle:
        handle.read()
    assert str(score.not_text_error("latin.csv", caught.value)) == (
        "latin.csv is not UTF-8 text (invalid continuation byte at byte 0)")
