"""Tests of ``neumiss benchmark``: end to end, resume, bad options, the probit gap, memory."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from neumiss.baselines import BASELINES, make_baseline
from neumiss.benchmark import (
    COLUMNS,
    MECHANISMS,
    METHODS,
    NEUMISS_PARAMS,
    PAPER_MEDIANS,
    Method,
    RunSettings,
    RunSpec,
    add_gaps,
    format_summary,
    grid,
    read_runs,
    run_benchmark,
    simulate_run,
    summarize,
)
from neumiss.benchmark import _cli as benchmark_cli
from neumiss.benchmark import _runner as runner
from neumiss.benchmark._grid import PAPER_N_FEATURES, PAPER_N_TRAIN
from neumiss.cli import main as cli_main


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _zero_impute_mask_r2(data) -> float:
    """Test R² of a linear regression on [X with 0 for NaN, mask], written here from scratch."""

    def features(X):
        mask = np.isnan(X)
        return np.hstack([np.where(mask, 0.0, X), mask])

    model = LinearRegression().fit(features(data.X_train), data.y_train)
    return r2_score(data.y_test, model.predict(features(data.X_test)))


@pytest.mark.slow
def test_tiny_grid_end_to_end_in_child_processes(tmp_path):
    result = subprocess.run(
        [
            sys.executable, "-m", "neumiss.benchmark", "--mechanisms", "MCAR", "probit_sm",
            "--n-features", "4", "--n-train", "400", "--n-val", "200", "--n-test", "300",
            "--repeats", "1", "--methods", "impute_mask_lr", "neumiss",
            "--neumiss-depths", "0", "1", "--out", str(tmp_path), "--no-progress",
        ],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "4 runs computed, 0 already in" in result.stdout
    assert "Warning" not in result.stderr
    rows = _rows(tmp_path / "runs.csv")
    assert list(rows[0]) == list(COLUMNS)
    keys = {(r["method"], r["mechanism"]) for r in rows}
    assert keys == {(m, k) for m in ("impute_mask_lr", "neumiss") for k in ("MCAR", "probit_sm")}

    for row in rows:
        spec = RunSpec.from_row(row)
        assert (spec.n_features, spec.n_train, spec.n_val, spec.n_test) == (4, 400, 200, 300)
        data = simulate_run(spec)
        if row["mechanism"] == "MCAR":
            expected = data.truth.bayes_rate(data.X_test, data.y_test)
            assert float(row["bayes_r2"]) == pytest.approx(expected, abs=1e-12)
            assert float(row["r2_minus_bayes"]) == pytest.approx(
                float(row["r2"]) - expected, abs=1e-12
            )
        else:
            assert row["bayes_r2"] == "nan"
        if row["method"] == "impute_mask_lr":
            # The child process saw the same data as simulate_run() gives here.
            assert float(row["r2"]) == pytest.approx(_zero_impute_mask_r2(data), abs=1e-8)
        else:
            params = json.loads(row["params"])
            assert params["depth"] in (0, 1)
            assert set(params["val_r2"]) == {"0", "1"}
            # Depth 1 is kept only when clearly better than depth 0 (one standard error).
            val_r2 = params["val_r2"]
            assert params["depth"] == 0 or val_r2["1"] > val_r2["0"]
        assert float(row["fit_seconds"]) > 0
        if sys.platform.startswith("linux"):
            assert float(row["peak_memory_mb"]) >= 0

    summary = (tmp_path / "summary.md").read_text()
    assert "## MCAR" in summary and "## Probit self-masking" in summary
    assert "| 4 | 400 | 1 |" in summary
    png = (tmp_path / "figure.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.mark.slow
def test_resume_skips_finished_runs_and_keeps_their_rows(tmp_path, monkeypatch):
    calls = []
    real_execute = runner.execute_run

    def counting_execute(spec, settings, bayes_r2=None):
        calls.append((spec, bayes_r2))
        return real_execute(spec, settings, bayes_r2)

    monkeypatch.setattr(runner, "execute_run", counting_execute)
    small = dict(mechanisms=["MCAR"], n_features=[3], n_train=[200], n_val=100, n_test=100)
    first = grid(**small, repeats=1, methods=["impute_mask_lr"])
    run_benchmark(first, tmp_path, in_process=True, progress=False)
    runs_path = tmp_path / "runs.csv"
    lines_before = runs_path.read_text().splitlines()
    assert [spec for spec, _ in calls] == first and len(lines_before) == 2

    calls.clear()
    second = grid(**small, repeats=2, methods=["impute_mask_lr", "hgb"])
    result = run_benchmark(second, tmp_path, in_process=True, progress=False)
    computed = [spec for spec, _ in calls]
    assert sorted(computed) == sorted(set(second) - set(first))
    assert (result.n_computed, result.n_skipped, result.failures) == (3, 1, [])
    lines_after = runs_path.read_text().splitlines()
    assert lines_after[: len(lines_before)] == lines_before
    assert len(lines_after) == 1 + len(second)

    # The Bayes rate of a data set already seen is passed on, not recomputed, and is right.
    bayes_passed = dict(calls)
    hgb_repeat0 = RunSpec("hgb", "MCAR", 3, 200, 100, 100, 0, 0)
    first_row = _rows(runs_path)[0]
    assert bayes_passed[hgb_repeat0] == pytest.approx(float(first_row["bayes_r2"]), abs=1e-12)
    assert bayes_passed[RunSpec("impute_mask_lr", "MCAR", 3, 200, 100, 100, 1, 0)] is None

    # A last line cut by a kill is dropped and its run computed again; nothing else reruns.
    runs_path.write_text("\n".join(lines_after[:-1]) + "\n" + lines_after[-1][:15])
    calls.clear()
    run_benchmark(second, tmp_path, in_process=True, progress=False)
    assert [spec for spec, _ in calls] == [RunSpec.from_row(_rows(runs_path)[-1])]
    assert runs_path.read_text().splitlines()[:-1] == lines_after[:-1]


def test_failed_run_is_reported_and_not_written(tmp_path, monkeypatch):
    def failing_fit(data, settings):
        raise RuntimeError("boom")

    monkeypatch.setitem(METHODS, "impute_mask_lr", Method("broken", failing_fit))
    specs = grid(
        mechanisms=["MCAR"], n_features=[3], n_train=[100], n_val=50, n_test=50, repeats=1,
        methods=["impute_mask_lr", "hgb"],
    )
    result = run_benchmark(specs, tmp_path, in_process=True, progress=False)
    assert [spec.method for spec, _ in result.failures] == ["impute_mask_lr"]
    assert "RuntimeError: boom" in result.failures[0][1]
    assert [row["method"] for row in _rows(tmp_path / "runs.csv")] == ["hgb"]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--mechanisms", "MNAR", "invalid choice: 'MNAR'"),
        ("--methods", "xgboost", "invalid choice: 'xgboost'"),
        ("--n-train", "0", "expected a positive integer, got '0'"),
        ("--n-features", "ten", "expected a positive integer, got 'ten'"),
    ],
)
def test_bad_options_give_clear_errors(option, value, expected, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["benchmark", option, value, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert option in error and expected in error
    if option == "--mechanisms":
        assert all(name in error for name in MECHANISMS)
    if option == "--methods":
        assert all(name in error for name in METHODS)
    assert not (tmp_path / "runs.csv").exists()


def test_grid_validation_names_the_argument_and_valid_values():
    with pytest.raises(ValueError, match=r"unknown mechanism\(s\) \['MNAR'\]; valid: MCAR, MAR"):
        grid(mechanisms=["MNAR"])
    with pytest.raises(ValueError, match=r"unknown method\(s\) \['svm'\]; valid: em, norm_em"):
        grid(methods=["neumiss", "svm"])
    with pytest.raises(ValueError, match="n_train must be integers >= 2"):
        grid(n_train=[1])
    with pytest.raises(ValueError, match="repeats must be integers >= 1"):
        grid(repeats=0)


def test_grid_covers_every_run_repeat_by_repeat():
    specs = grid(
        mechanisms=["MAR", "MCAR"], n_features=[10, 20], n_train=[1000], repeats=3,
        methods=["em", "neumiss"],
    )
    assert len(specs) == len(set(specs)) == 2 * 2 * 1 * 3 * 2
    assert [s.repeat for s in specs] == sorted(s.repeat for s in specs)
    assert {s.n_val for s in specs} == {10_000}


def test_simulation_depends_on_the_data_key_only():
    spec = RunSpec("em", "gaussian_sm", 3, 50, 20, 30, 1, 7)
    a = simulate_run(spec)
    b = simulate_run(spec._replace(method="neumiss"))
    c = simulate_run(spec._replace(repeat=2))
    assert a.X_train.shape == (50, 3) and a.X_val.shape == (20, 3) and a.X_test.shape == (30, 3)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert a.random_state == b.random_state
    assert not np.allclose(a.y_train, c.y_train)
    assert np.isnan(a.X_train).any()


def _frame(records):
    rows = []
    for method, mechanism, repeat, r2, bayes in records:
        rows.append({
            "method": method, "mechanism": mechanism, "n_features": 10, "n_train": 10_000,
            "n_val": 100, "n_test": 100, "repeat": repeat, "seed": 0, "r2": r2,
            "bayes_r2": bayes, "r2_minus_bayes": r2 - bayes, "fit_seconds": 1.0 + repeat,
            "peak_memory_mb": 10.0, "threads": 1,
            "params": json.dumps({"depth": repeat + 2} if method == "neumiss" else {}),
            "finished_at": "",
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_probit_gap_is_taken_to_the_best_method_of_the_same_repeat():
    r2 = {  # (method, repeat) -> test R²
        ("em", 0): 0.61, ("hgb", 0): 0.70, ("neumiss", 0): 0.74,
        ("em", 1): 0.58, ("hgb", 1): 0.73, ("neumiss", 1): 0.72,
        ("em", 2): 0.60, ("hgb", 2): 0.71, ("neumiss", 2): 0.75,
    }
    records = [(m, "probit_sm", rep, value, np.nan) for (m, rep), value in r2.items()]
    records += [("em", "MCAR", 0, 0.80, 0.81), ("neumiss", "MCAR", 0, 0.79, 0.81)]
    runs = add_gaps(_frame(records))

    for (method, repeat), value in r2.items():
        best = max(v for (m, rep), v in r2.items() if rep == repeat)
        row = runs[(runs.mechanism == "probit_sm") & (runs.method == method)
                   & (runs.repeat == repeat)]
        assert row["gap"].item() == pytest.approx(value - best)
    mcar = runs[runs.mechanism == "MCAR"].set_index("method")["gap"]
    assert mcar["em"] == pytest.approx(-0.01) and mcar["neumiss"] == pytest.approx(-0.02)

    summary = summarize(runs)
    neumiss = summary[(summary.mechanism == "probit_sm") & (summary.method == "neumiss")]
    assert neumiss["gap"].item() == pytest.approx(np.median([0.0, 0.72 - 0.73, 0.0]))
    assert neumiss["fit_seconds"].item() == 2.0 and neumiss["n_runs"].item() == 3
    assert neumiss["choices"].item() == "2/3/4"

    text = format_summary(summary)
    # The paper's published medians stand beside ours (MCAR, d=10, n=1e4: EM, NeuMiss).
    mcar_line = next(line for line in text.splitlines() if line.startswith("| 10 | 1e4 | 1 |"))
    assert mcar_line.endswith("| -0.0002 | -0.0236 (3) |")
    assert "-0.0200" in mcar_line


def test_paper_medians_cover_the_paper_grid():
    keys = [(p.mechanism, p.n_features, p.n_train) for p in PAPER_MEDIANS]
    assert len(keys) == len(set(keys))
    assert set(keys) == {
        (m, d, n) for m in MECHANISMS for d in PAPER_N_FEATURES for n in PAPER_N_TRAIN
    }


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_peak_memory_sees_a_temporary_allocation():
    baseline = runner._reset_peak_memory()
    assert baseline is not None
    block = np.ones(200 * 2**20 // 8)  # 200 MB, touched
    del block
    peak = runner._peak_memory_mb(baseline)
    assert 190 <= peak <= 400
    baseline = runner._reset_peak_memory()
    assert runner._peak_memory_mb(baseline) < 50  # the reset forgot the earlier peak


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        benchmark_cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert all(f"--{o}" in text for o in ("mechanisms", "n-features", "n-train", "quick", "jobs"))


def test_report_only_needs_runs(tmp_path, capsys):
    assert cli_main(["benchmark", "--report-only", "--out", str(tmp_path)]) == 1
    assert "no runs in" in capsys.readouterr().err


@pytest.mark.slow
def test_norm_em_agrees_with_the_package_em(tmp_path):
    reason = METHODS["norm_em"].unavailable()
    if reason is not None:
        pytest.skip(f"R's norm is not usable here: {reason}")
    specs = grid(
        mechanisms=["MCAR"], n_features=[4], n_train=[2000], n_val=100, n_test=2000,
        repeats=1, methods=["em", "norm_em"],
    )
    result = run_benchmark(specs, tmp_path, in_process=True, progress=False)
    assert result.failures == []
    r2 = {row["method"]: float(row["r2"]) for row in _rows(tmp_path / "runs.csv")}
    assert r2["norm_em"] == pytest.approx(r2["em"], abs=2e-3)


def test_malformed_runs_file_names_the_line(tmp_path):
    path = tmp_path / "runs.csv"
    good = ["impute_mask_lr", "MCAR", "4", "400", "200", "300", "0", "0", "0.5", "nan", "nan",
            "0.1", "1.0", "1", "{}", "2026-01-01T00:00:00"]
    bad = list(good)
    bad[9] = ""  # bayes_r2 emptied, e.g. by a spreadsheet
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows([COLUMNS, good, bad])
    with pytest.raises(ValueError, match=r"runs\.csv, line 3: .*written 'nan'"):
        read_runs(path)
    assert len(read_runs(path.with_name("absent.csv"))) == 0


@pytest.mark.slow
def test_baseline_methods_fit_the_registry_models():
    data = simulate_run(RunSpec("em", "MCAR", 3, 200, 60, 60, 0, 0))
    baselines = [name for name in METHODS if not name.startswith("neumiss")]
    assert set(baselines) <= set(BASELINES)
    for name in set(baselines) - {"norm_em", "mlp"}:
        model, _ = METHODS[name].fit(data, RunSettings())
        expected = make_baseline(name, random_state=data.random_state)
        np.testing.assert_array_equal(
            model.predict(data.X_test),
            expected.fit(data.X_train, data.y_train).predict(data.X_test), err_msg=name)
    model, params = METHODS["mlp"].fit(data, RunSettings(mlp_widths=(2,)))
    expected = make_baseline("mlp", random_state=data.random_state).set_params(width=6)
    np.testing.assert_array_equal(
        model.predict(data.X_test), expected.fit(data.X_train, data.y_train).predict(data.X_test))
    assert params["width"] == 6


def test_neumiss_settings_are_accepted_by_the_estimator():
    """The benchmark's NeuMiss settings, with depth="auto", fit and stay as given."""
    from neumiss.estimators import NeuMissRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    X[rng.random(X.shape) < 0.3] = np.nan
    model = NeuMissRegressor(depth="auto", max_epochs=2, random_state=0, **NEUMISS_PARAMS)
    model.fit(X, rng.standard_normal(200))
    params = model.get_params()
    assert all(params[name] == value for name, value in NEUMISS_PARAMS.items())


@pytest.mark.slow
def test_help_works_without_torch():
    """``--help`` imports nothing that needs torch: it answers where torch is not installed.

    An import hook makes ``import torch`` fail as if torch were absent (setting
    ``sys.modules["torch"] = None`` instead breaks scipy, which looks torch up
    in ``sys.modules`` when it is imported).
    """
    code = """
import importlib.abc, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoTorch())
from neumiss.benchmark import _cli as cli
try:
    cli.main(["--help"])
except SystemExit as exit_info:
    assert exit_info.code == 0, exit_info.code
loaded = {"torch", "onnx", "matplotlib"} & set(sys.modules)
assert not loaded, loaded
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "--neumiss-depths" in result.stdout
