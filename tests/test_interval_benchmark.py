"""``neumiss benchmark --suite intervals`` and the scorer's interval columns."""

import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest

from neumiss.benchmark._store import RUNS_FILE, RunsWriter
from neumiss.benchmark.intervals import (
    METHODS,
    IntervalRun,
    execute_run,
    pool_groups,
    summarize,
    write_report,
)
from neumiss.benchmark.intervals._runner import COLUMNS, read_interval_runs, run_intervals
from neumiss.cli import main as cli_main

SCORER = Path(__file__).resolve().parents[1] / "export" / "score.py"


def test_pool_groups_pools_sparse_ends_into_their_neighbours():
    counts = {0: 10, 1: 98, 2: 439, 3: 1172, 4: 2051, 5: 900, 6: 80, 7: 20}
    assert pool_groups(counts, 500) == [[0, 1, 2], [3], [4], [5, 6, 7]]
    assert pool_groups({0: 5, 1: 6}, 500) == [[0, 1]]
    assert pool_groups({3: 800}, 500) == [[3]]


def _row(method, q, n, covered, width, oracle, repeat=0):
    return dict(zip(COLUMNS, ("MCAR", "0.5", "10000", str(repeat), method, str(q), str(n),
                              str(covered), repr(width), repr(oracle), "1.0", "0.1")))


def test_summary_gives_marginal_and_worst_group_coverage():
    rows = []
    for method, covered in (("oracle", (450, 540, 90)), ("split", (480, 500, 60))):
        for q, (n, c) in enumerate(zip((500, 600, 100), covered)):
            rows.append(_row(method, q, n, c, 2.0 * n, 1.0 * n if method == "split" else 2.0 * n))
    stats = summarize(rows)[("MCAR", "0.5", "10000")]
    split = stats["split"]
    assert split["coverage"] == [pytest.approx(1040 / 1200)]
    # groups: {0} (500 rows) and {1, 2} (700 rows: the sparse end pooled)
    assert split["min_group_coverage"] == [pytest.approx(560 / 700)]
    assert split["width_ratio"] == [pytest.approx(2.0)]
    assert [g[0] for g in split["groups"]] == ["0", "1-2"]


def test_a_run_scores_every_method_on_every_test_row(tmp_path):
    run = IntervalRun("gaussian_sm", 0.3, 600, 0)
    rows = execute_run(run, n_test=400, n_features=3,
                       base_params={"depth": 1, "mlp_depth": 0, "ensemble_size": 1,
                                    "max_epochs": 3})
    assert {row["method"] for row in rows} == set(METHODS)
    for method in METHODS:
        mine = [row for row in rows if row["method"] == method]
        assert sum(int(row["n_rows"]) for row in mine) == 400
        assert all(0 <= int(row["n_covered"]) <= int(row["n_rows"]) for row in mine)
    oracle = [row for row in rows if row["method"] == "oracle"]
    assert all(float(r["width_sum"]) == float(r["oracle_width_sum"]) for r in oracle)
    writer = RunsWriter(tmp_path / RUNS_FILE, COLUMNS)
    for row in rows:
        writer.write(row)
    writer.close()
    paths = write_report(tmp_path)
    assert all(path.exists() for path in paths)
    table = (tmp_path / "summary.md").read_text()
    assert "cqr-mda-exact" in table and "Gaussian self-masking, 30% missing" in table


@pytest.mark.slow
def test_runs_in_worker_processes_give_the_rows_of_one_process_and_resume(tmp_path):
    runs = [IntervalRun("MCAR", 0.3, 300, 0), IntervalRun("gaussian_sm", 0.3, 300, 0)]
    timing = ("fit_seconds", "predict_seconds")

    def rows(out):
        return sorted(tuple(v for k, v in row.items() if k not in timing)
                      for row in read_interval_runs(out / RUNS_FILE))

    assert run_intervals(runs, tmp_path / "one", n_test=300, progress=False,
                         threads=1) == (2, 0)
    assert run_intervals(runs, tmp_path / "two", n_test=300, progress=False, jobs=2,
                         threads=1) == (2, 0)
    assert rows(tmp_path / "two") == rows(tmp_path / "one")
    assert {row["method"] for row in read_interval_runs(tmp_path / "two" / RUNS_FILE)} \
        == set(METHODS)
    again = run_intervals(runs, tmp_path / "two", n_test=300, progress=False, jobs=2)
    assert again == (0, 2)  # both already in runs.csv


@pytest.mark.parametrize(("argv", "message"), [
    (["--methods", "em"], "--methods: not an option of --suite intervals"),
    (["--mechanisms", "probit_sm"], "no closed-form oracle"),
    (["--missing-rates", "1.5"], "--missing-rates must lie in (0, 1)"),
    (["--n-features", "5"], "--n-features: not an option of --suite intervals"),
    (["--tasks", "titanic"], "select real tasks: add --classification --real"),
])
def test_bad_interval_options_give_one_line_errors(argv, message, capsys, tmp_path):
    code = cli_main(["benchmark", "--suite", "intervals", *argv, "--out", str(tmp_path)])
    assert code == 2
    assert message in capsys.readouterr().err


def test_report_only_needs_runs(capsys, tmp_path):
    assert cli_main(["benchmark", "--suite", "intervals", "--report-only",
                     "--out", str(tmp_path)]) == 1
    assert "no runs" in capsys.readouterr().err


def test_scorer_writes_prediction_lower_and_upper(tmp_path):
    import neumiss
    from neumiss.intervals import ConformalRegressor

    X, y, truth = neumiss.simulation.make_regression(600, 3, random_state=0)
    base = neumiss.NeuMissQuantileRegressor(depth=1, mlp_depth=0, ensemble_size=1, max_epochs=2)
    model = ConformalRegressor(base, random_state=0).fit(X, y)
    model.to_onnx(tmp_path / "m.onnx")
    spec = importlib.util.spec_from_file_location("interval_scorer", SCORER)
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    onnx_model = score.NeuMissOnnxModel(str(tmp_path / "m.onnx"))
    X_test = truth.sample(5, random_state=1)[0]
    stream = io.StringIO()
    score.write_predictions(stream, onnx_model, onnx_model.predict(X_test))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "prediction,lower,upper"
    values = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    interval = model.predict_interval(X_test)
    np.testing.assert_allclose(values[:, 1:], interval, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values[:, 0], model.predict(X_test), rtol=1e-5, atol=1e-5)


def test_small_tables_fit_cqr_mondrian_by_cv_plus(monkeypatch):
    # Below CROSS_ROWS training rows, "cqr-mondrian" is what cv="auto" gives users: CV+.
    from neumiss.intervals import ConformalRegressor

    fitted = []
    fit = ConformalRegressor.fit

    def recording_fit(self, X, y):
        model = fit(self, X, y)
        fitted.append((model.method, model.cross_conformal_))
        return model

    monkeypatch.setattr(ConformalRegressor, "fit", recording_fit)
    rows = execute_run(IntervalRun("MCAR", 0.3, 200, 0), n_test=300, n_features=3,
                       base_params={"depth": 1, "mlp_depth": 0, "ensemble_size": 1,
                                    "max_epochs": 2})
    assert ("cqr-mondrian", True) in fitted and ("split", False) in fitted
    assert {row["method"] for row in rows} == set(METHODS)
