"""``neumiss score`` (neumiss.scoring._files): files in row batches, pandas, Dask, bad input;
the table rules it shares with export/score.py."""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import neumiss
from neumiss import cli as neumiss_cli
from neumiss.export import export_onnx
from neumiss.scoring import ScoringError
from neumiss.scoring import _files as scoring

from .conftest import one_line_error
from .test_encoding import mixed_table
from .test_score_cli import FIXTURES, SCORER, _check_outputs, _import, _table


@pytest.fixture(scope="module")
def fixtures():
    """task -> (estimator, model.onnx path, estimator.pt path)."""
    return {task: (neumiss.load(FIXTURES / task / "estimator.pt"), FIXTURES / task / "model.onnx",
                   FIXTURES / task / "estimator.pt") for task in ("regressor", "classifier")}


def _input_frame(estimator, n_rows, seed):
    """The model's columns reversed, with an ``id`` column the model does not use."""
    names = list(estimator.feature_names_in_)
    frame = pd.DataFrame(_table(estimator, n_rows, seed), columns=names)
    return frame[names[::-1]].assign(id=[f"r{i:03d}" for i in range(n_rows)])


def _read(path):
    return (pq.read_table(path).to_pandas() if str(path).endswith(".parquet")
            else pd.read_csv(path, keep_default_na=False))


@pytest.mark.parametrize("task", ["regressor", "classifier"])
@pytest.mark.parametrize("formats", [("csv", "parquet"), ("parquet", "csv")])
def test_score_command_matches_the_estimator(tmp_path, fixtures, task, formats, capsys):
    estimator, onnx_path, _ = fixtures[task]
    frame = _input_frame(estimator, 300, seed=len(task))
    source, target = tmp_path / f"in.{formats[0]}", tmp_path / f"out.{formats[1]}"
    if formats[0] == "csv":
        frame.to_csv(source, index=False, na_rep="NA")
    else:
        frame.to_parquet(source, index=False)
    status = neumiss_cli.main(["score", str(onnx_path), str(source), str(target),
                               "--keep", "id", "--batch-rows", "64"])
    assert status == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "300 rows scored" in err and "rows/s" in err and "ignored" not in err
    out = _read(target)
    assert list(out["id"]) == list(frame["id"])
    _check_outputs(out.drop(columns="id"), estimator, frame[list(estimator.feature_names_in_)])
    assert not list(tmp_path.glob("*.partial"))


def test_csv_output_as_export_score_writes_it_and_no_rate_for_a_few_rows(fixtures, tmp_path,
                                                                          capsys):
    _, onnx_path, _ = fixtures["classifier"]
    source = FIXTURES / "classifier" / "inputs.csv"
    assert neumiss_cli.main(["score", str(onnx_path), str(source), str(tmp_path / "a.csv")]) == 0
    assert "rows/s" not in capsys.readouterr().err  # a rate of ten rows measures the start
    scorer = _import(SCORER, "score_script_csv")
    assert scorer.main([str(onnx_path), str(source), "-o", str(tmp_path / "b.csv")]) == 0
    ours, theirs = ((tmp_path / name).read_text().splitlines() for name in ("a.csv", "b.csv"))
    assert ours[0] == theirs[0] == "label,proba_high,proba_low,proba_mid"  # names bare
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a.csv"),
                                  pd.read_csv(tmp_path / "b.csv"), rtol=1e-6)


def test_saved_model_file_scores_like_its_onnx_export(tmp_path, fixtures):
    estimator, onnx_path, pt_path = fixtures["regressor"]
    _input_frame(estimator, 50, seed=0).to_parquet(tmp_path / "in.parquet")
    for model, name in ((onnx_path, "a.csv"), (pt_path, "b.csv")):
        scoring.score_file(model, str(tmp_path / "in.parquet"), str(tmp_path / name))
    pd.testing.assert_frame_equal(_read(tmp_path / "a.csv"), _read(tmp_path / "b.csv"))


@pytest.mark.parametrize("batch_rows", [1, 7, 10_000])
def test_batches_do_not_change_the_predictions(tmp_path, fixtures, batch_rows):
    estimator, onnx_path, _ = fixtures["classifier"]
    frame = _input_frame(estimator, 40, seed=1)
    frame.to_parquet(tmp_path / "in.parquet")
    notes = []
    done = scoring.score_file(onnx_path, str(tmp_path / "in.parquet"),
                              str(tmp_path / "out.parquet"), batch_rows=batch_rows,
                              note=notes.append)
    assert done.rows == 40
    assert notes == ["columns the model does not use, ignored: ['id']"]
    pd.testing.assert_frame_equal(_read(tmp_path / "out.parquet"),
                                  scoring.score_frame(frame, onnx_path))


def test_chunks_do_not_change_the_predictions_and_errors_name_their_rows(tmp_path, fixtures,
                                                                          monkeypatch):
    estimator, onnx_path, _ = fixtures["regressor"]
    frame = _input_frame(estimator, 40, seed=2)
    expected = scoring.score_frame(frame, onnx_path)
    monkeypatch.setattr(scoring, "CHUNK_ROWS", 7)  # batches of 16 rows: chunks of 7, 7, 2
    frame.to_parquet(tmp_path / "in.parquet")
    scoring.score_file(onnx_path, str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"),
                       batch_rows=16)
    pd.testing.assert_frame_equal(_read(tmp_path / "out.parquet"), expected)
    frame.loc[23, estimator.feature_names_in_[1]] = np.inf  # row 24 of the file
    frame.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ScoringError, match=r"rows 24-30: X has an infinite .* at row 0, column 1 "):
        scoring.score_file(onnx_path, str(tmp_path / "bad.parquet"),
                           str(tmp_path / "out.parquet"), batch_rows=16)


@pytest.fixture(scope="module")
def categorical(tmp_path_factory):
    frame, y = mixed_table(300)
    estimator = neumiss.NeuMissRegressor(max_epochs=3, ensemble_size=1, depth=2,
                                         random_state=0).fit(frame, y)
    path = tmp_path_factory.mktemp("categorical") / "model.onnx"
    export_onnx(estimator, path)
    return estimator, frame, path


@pytest.mark.slow
def test_parquet_categories_are_encoded_as_the_estimator(tmp_path, categorical):
    estimator, frame, path = categorical
    table = frame.iloc[:60].copy()
    table["size"] = table["size"].astype(object)
    # not seen at fit in 6 rows of 60, more than UNSEEN_WARNING_SHARE: missing, with a note
    table.loc[table.index[:6], "size"] = "XXL"
    table.to_parquet(tmp_path / "in.parquet")
    notes = []
    scoring.score_file(path, str(tmp_path / "in.parquet"), str(tmp_path / "out.csv"),
                       note=notes.append)
    assert any("'size' has categories not seen at fit" in n and "XXL" in n for n in notes)
    with pytest.warns(UserWarning, match="not seen at fit"):
        expected = estimator.predict(table)
    np.testing.assert_allclose(_read(tmp_path / "out.csv")["prediction"], expected,
                               rtol=0, atol=1e-5 * estimator.y_scale_)


def _run_failing(capsys, *argv) -> str:
    assert neumiss_cli.main(["score", *map(str, argv)]) == 1
    return one_line_error(capsys.readouterr().err)


def test_text_columns_the_model_takes_as_numbers_are_named(tmp_path, fixtures, capsys):
    estimator, onnx_path, _ = fixtures["regressor"]
    frame = _input_frame(estimator, 10, seed=2)
    frame["income"] = frame["income"].astype(str)
    frame["age"] = "young"
    frame.to_parquet(tmp_path / "in.parquet")
    line = _run_failing(capsys, onnx_path, tmp_path / "in.parquet", tmp_path / "out.parquet")
    assert re.search(r"columns \['age \(\w*string\)', 'income \(\w*string\)'\] are not "
                     r"numeric, and the model takes them as numbers", line)
    assert not (tmp_path / "out.parquet").exists()
    assert not list(tmp_path.glob("*.partial"))


BAD_FILES = {
    "missing column": ("id,age,score,tenure\n1,2,3,4\n", "missing ['income']"),
    "text, column ignored": ("id,age,income,score,tenure\n1,2,x,3,4\n",
                             "in.csv, line 2, column 2 (income): 'x' is not a number"),
    "text, columns reordered": ("score,tenure,income,age\n1,2,3,4\n1,2,3,x\n",
                                "in.csv, line 3, column 1 (age): 'x' is not a number"),
    "text in a number column": ("age,income,score,tenure\n1,2,3,4\n1,two,3,4\n",
                                "column 2 (income): 'two' is not a number"),
    "ragged row": ("age,income,score,tenure\n1,2,3,4\n1,2,3\n",
                   "in.csv, the row '1,2,3': expected 4 columns, got 3"),
    "no header, wrong width": ("1,2,3\n", "in.csv, line 1: expected 4 columns, got 3 (and no "
                                           "header naming them)"),
    "empty": ("age,income,score,tenure\n", "no data rows"),
    "infinite value": ("age,income,score,tenure\n1,2,inf,4\n", "infinite"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_csv_inputs_are_one_line_errors(tmp_path, fixtures, capsys, case):
    text, message = BAD_FILES[case]
    (tmp_path / "in.csv").write_text(text)
    line = _run_failing(capsys, fixtures["regressor"][1], tmp_path / "in.csv",
                        tmp_path / "out.csv")
    assert line.startswith("neumiss score: error:") and message in line
    assert not list(tmp_path.iterdir()) or sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


#: Tables both scorers refuse, and the words both use (``neumiss score`` names a short
#: row by its text: pyarrow gives no line).
BOTH_REFUSE = {
    "bad cell": ("age,income,score,tenure\n1,2,3,4\n1,two,3,4\n",
                 "in.csv, line 3, column 2 (income): 'two' is not a number (missing values are "
                 "empty cells, NA or nan)"),
    "header without a column": ("age,income,score\n1,2,3\n",
                                "line 1 (header): missing ['tenure'], unexpected []"),
    "short data line 1": ("1,2,3\n",
                          "line 1: expected 4 columns, got 3 (and no header naming them)"),
    "short row": ("age,income,score,tenure\n1,2,3,4\n1,2,3\n", ": expected 4 columns, got 3"),
    "empty": ("age,income,score,tenure\n", "in.csv: no data rows"),
    "not UTF-8": (b"\xff\xfe1,2,3,4\n", "in.csv is not UTF-8 text (invalid start byte at byte 0)"),
}


@pytest.mark.parametrize("case", BOTH_REFUSE)
def test_both_scorers_refuse_a_table_in_the_same_words(tmp_path, fixtures, capsys, case):
    content, words = BOTH_REFUSE[case]
    path = tmp_path / "in.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    model = fixtures["regressor"][1]
    assert _import(SCORER, "score_parity").main([str(model), str(path)]) == 1
    standalone = one_line_error(capsys.readouterr().err)
    command = _run_failing(capsys, model, path, tmp_path / "out.csv")
    assert words in standalone and words in command, (standalone, command)


def test_both_scorers_read_every_spelling_of_a_missing_value(tmp_path, fixtures, capsys):
    estimator, model, _ = fixtures["regressor"]
    spellings = ["", "NA", "na", "nA", "nan", "NaN", "NAN", "nAn"]
    X = _table(estimator, len(spellings), seed=5)
    cells = pd.DataFrame(X, columns=estimator.feature_names_in_).astype(object)
    cells.iloc[:, 1] = spellings  # the second column missing in every spelling
    cells.to_csv(tmp_path / "in.csv", index=False, na_rep="NA")
    assert _import(SCORER, "score_tokens").main(
        [str(model), str(tmp_path / "in.csv"), "-o", str(tmp_path / "standalone.csv")]) == 0
    assert neumiss_cli.main(["score", str(model), str(tmp_path / "in.csv"),
                             str(tmp_path / "command.csv")]) == 0, capsys.readouterr().err
    standalone = pd.read_csv(tmp_path / "standalone.csv")["prediction"]
    np.testing.assert_array_equal(pd.read_csv(tmp_path / "command.csv")["prediction"],
                                  standalone)
    X[:, 1] = np.nan
    _check_outputs(pd.read_csv(tmp_path / "command.csv"), estimator, X)


def test_bad_arguments_are_one_line_errors(tmp_path, fixtures, capsys):
    model = fixtures["regressor"][1]
    inputs = FIXTURES / "regressor" / "inputs.csv"
    assert "end it with .csv or .parquet" in _run_failing(capsys, model, inputs, tmp_path / "o.txt")
    assert "no such model file" in _run_failing(capsys, tmp_path / "none.onnx", inputs,
                                                tmp_path / "o.csv")
    assert "--keep columns ['key']" in _run_failing(capsys, model, inputs, tmp_path / "o.csv",
                                                   "--keep", "key")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert "not a readable Parquet file" in _run_failing(capsys, model, tmp_path / "bad.parquet",
                                                         tmp_path / "o.csv")
    assert "must be a file" in _run_failing(capsys, model, "-", tmp_path / "o.csv")
    assert "batch_rows" in _run_failing(capsys, model, inputs, tmp_path / "o.csv",
                                        "--batch-rows", "0")


def test_score_frame_refuses_text_for_a_numeric_column(fixtures):
    estimator, onnx_path, _ = fixtures["regressor"]
    frame = _input_frame(estimator, 5, seed=3).astype({"score": str})
    with pytest.raises(ScoringError, match="column 'score' is not numeric"):
        scoring.score_frame(frame, onnx_path)


@pytest.mark.slow
def test_dask_dataframe_scored_on_a_local_cluster_matches_local_predictions(fixtures):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("dask.distributed")
    estimator, onnx_path, _ = fixtures["classifier"]
    frame = _input_frame(estimator, 200, seed=4)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        ddf = dd.from_pandas(frame, npartitions=4)
        result = scoring.score_dask(ddf, onnx_path)
        assert list(result.columns) == ["label", *(f"proba_{c}" for c in estimator.classes_)]
        scored = result.compute()
    assert list(scored.index) == list(frame.index)
    _check_outputs(scored, estimator, frame[list(estimator.feature_names_in_)])
    pd.testing.assert_frame_equal(scored, scoring.score_frame(frame, onnx_path))


@pytest.mark.slow
def test_arrow_and_text_cells_of_a_categorical_column_encode_alike(categorical):
    _, frame, path = categorical
    model = scoring.load_model(path)
    table = pa.Table.from_pandas(frame.iloc[:30], preserve_index=False)
    from_arrow = scoring.score_batch(model, [table.column(n) for n in frame.columns])
    from_pandas = scoring.score_frame(frame.iloc[:30], model)
    np.testing.assert_array_equal(from_arrow["prediction"], from_pandas["prediction"])


def _spark_session():
    """A local Spark session of 2 executor threads; skipped without pyspark or Java, unless
    NEUMISS_REQUIRE_SPARK is set (scripts/test.sh, after scripts/setup_spark.sh)."""
    import os
    import shutil

    missing = ("pyspark" if importlib.util.find_spec("pyspark") is None
               else "a Java runtime" if shutil.which("java") is None else None)
    if missing and os.environ.get("NEUMISS_REQUIRE_SPARK"):
        pytest.fail(f"NEUMISS_REQUIRE_SPARK is set but there is no {missing} "
                    "(bash scripts/setup_spark.sh installs both)")
    if missing:
        pytest.skip(f"no {missing} for Spark (bash scripts/setup_spark.sh)")
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("neumiss-test")
            .config("spark.sql.shuffle.partitions", "4").getOrCreate())


@pytest.mark.slow
def test_spark_map_in_pandas_recipe_matches_local_predictions(fixtures, monkeypatch, tmp_path):
    """The README's recipe on a local session: 4 partitions scored by 2 executor threads,
    each building its ONNX Runtime session once; the rows per second of the session and
    of ``neumiss score`` on the same rows are printed (pytest -s)."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # workers: this Python
    spark = _spark_session()
    estimator, onnx_path, _ = fixtures["classifier"]
    frame = _input_frame(estimator, 20000, seed=5)
    content = scoring.onnx_bytes(onnx_path)

    def score_partitions(frames):
        model = scoring.load_model(content, threads=1)
        for part in frames:
            yield scoring.score_frame(part, model, keep=["id"])

    try:
        source = spark.createDataFrame(frame).repartition(4).cache()
        assert source.rdd.getNumPartitions() == 4 and source.count() == len(frame)
        started = time.perf_counter()
        scored = (source.mapInPandas(score_partitions,
                                     schema=scoring.spark_schema(content, keep="id string"))
                  .toPandas())
        spark_seconds = time.perf_counter() - started
    finally:
        spark.stop()
    frame.to_parquet(tmp_path / "in.parquet")
    started = time.perf_counter()
    scoring.score_file(onnx_path, str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"))
    file_seconds = time.perf_counter() - started
    print(f"\nSpark local[2], 4 partitions: {len(frame) / spark_seconds:,.0f} rows/s; "
          f"neumiss score (Parquet): {len(frame) / file_seconds:,.0f} rows/s")
    scored = scored.set_index("id").loc[frame["id"]].reset_index(drop=True)
    expected = scoring.score_frame(frame, onnx_path).reset_index(drop=True)
    pd.testing.assert_frame_equal(scored, expected)
    _check_outputs(expected, estimator, frame[list(estimator.feature_names_in_)])


def test_numbers_read_from_arrow_buffers_keep_nulls_nan_and_offsets():
    array = pa.array([1.5, None, np.nan, -2.0, None, 7.0], type=pa.float32())
    for sliced in (array, array.slice(1), array.slice(3, 2)):
        expected = np.array([np.nan if v is None else v for v in sliced.to_pylist()])
        np.testing.assert_array_equal(scoring._numbers(sliced), expected)
    integers = pa.chunked_array([[1, None], [3]], type=pa.int64())
    np.testing.assert_array_equal(scoring._numbers(integers), [1.0, np.nan, 3.0])


def test_help_states_the_default_batch(capsys):
    with pytest.raises(SystemExit):
        neumiss_cli.main(["score", "--help"])
    assert f"(default {scoring.BATCH_ROWS})" in " ".join(capsys.readouterr().out.split())


def test_numbers_of_half_floats_and_of_an_all_null_column():
    halves = pa.array([1.5, None, np.nan, 2.0], type=pa.float16())
    np.testing.assert_array_equal(scoring._numbers(halves.slice(1)), [np.nan, np.nan, 2.0])
    np.testing.assert_array_equal(scoring._numbers(pa.nulls(3)), [np.nan] * 3)
    np.testing.assert_array_equal(scoring._numbers(pa.array([None, None], pa.float64())),
                                  [np.nan] * 2)


@pytest.mark.parametrize("workers", [1, 3])
def test_batches_are_scored_in_parallel_and_returned_in_order(workers):
    taken = []
    together = threading.Barrier(workers, timeout=30)  # the first batches run at once

    def items():
        for i in range(20):
            taken.append(i)
            yield i

    def work(i):
        if i < workers:
            together.wait()
        time.sleep(0.005 * (i % 3))  # later batches often finish first
        return i * i

    results = []
    for value in scoring._in_order(work, items(), workers):
        results.append(value)
        assert len(taken) <= len(results) + workers + 2  # bounded read-ahead
    assert results == [i * i for i in range(20)]


def test_an_error_of_one_batch_stops_the_reading():
    taken = []

    def items():
        for i in range(100):
            taken.append(i)
            yield i

    def work(i):
        if i == 3:
            raise ValueError("batch 3")
        return i

    with pytest.raises(ValueError, match="batch 3"):
        list(scoring._in_order(work, items(), 2))
    assert len(taken) <= 3 + 1 + 2 + 2


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_range_check_refuses_exactly_the_cells_too_far(data):
    # check_range settles most chunks on X's smallest and largest values: whatever the
    # values and the standardization (tiny scales bring the bound within float32's
    # reach), it refuses a chunk exactly when one observed cell is too far.
    from neumiss.scoring._table_scorer import MAX_STANDARDIZED, NeuMissOnnxModel, RowError

    model = NeuMissOnnxModel(str(FIXTURES / "regressor" / "model.onnx"))
    d = model.n_encoded
    finite = st.floats(-1e6, 1e6)
    mean = data.draw(arrays(np.float64, d, elements=finite))
    scale = data.draw(arrays(np.float64, d, elements=st.sampled_from([1.0, 1e-20, 1e-28, 1e-35])))
    bound = data.draw(arrays(np.float64, d, elements=st.sampled_from([0.0, 0.0, 1e-31, 0.5])))
    model._range = (mean, scale, bound)
    cells = st.one_of(finite, st.floats(width=32), st.sampled_from([1e9, -3e38, np.inf]))
    X = data.draw(arrays(np.float32, (data.draw(st.integers(1, 6)), d), elements=cells))
    M = data.draw(st.none() | arrays(np.bool_, X.shape))
    with np.errstate(over="ignore", invalid="ignore"):  # the rule, computed here cell by cell
        z = (X.astype(np.float64) - mean) / scale
        z = np.where(bound > 0, z / np.hypot(1.0, z * bound), z)
    too_far = np.isfinite(z) & (np.abs(z) > MAX_STANDARDIZED)
    if M is not None:
        too_far &= ~M
    X_before = X.copy()
    if too_far.any():
        with pytest.raises(RowError, match="too far from the training data"):
            model.check_range(X, M=M)
    else:
        model.check_range(X, M=M)
    np.testing.assert_array_equal(X, X_before)  # never modified
