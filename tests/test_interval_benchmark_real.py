"""``neumiss benchmark --suite intervals --classification --real``: the sets on the
real-data suite's binary tasks, per fold, resumed, summarized; the options it needs."""

import pytest

from neumiss.benchmark.intervals import _mapie, _real
from neumiss.benchmark.realdata._tasks import TASKS
from neumiss.cli import main as cli_main

from .test_realdata import _synthetic_cache

TINY = {"depth": 1, "mlp_depth": 0, "ensemble_size": 1, "max_epochs": 3}


def test_binary_tasks_are_the_suites_binary_tasks():
    tasks = _real.binary_tasks()
    assert tasks and {task.name for task in tasks} == {
        name for name, task in TASKS.items() if task.kind == "binary"}
    assert [task.name for task in _real.binary_tasks(["titanic", "growth_dj"])] == ["titanic"]


def test_a_binary_task_is_cross_validated_resumed_and_summarized(tmp_path, monkeypatch):
    monkeypatch.setattr(_real, "BASE_PARAMS", TINY)
    cache, out = tmp_path / "cache", tmp_path / "out"
    tasks = [task for task in _synthetic_cache(cache, n=300) if task.kind == "binary"]
    assert _real.run_real_classes(tasks, out, cache, repeats=1, progress=False) == (1, 0)
    rows = _real.read_real_classes_runs(out / _real.RUNS_FILE)
    methods = {"lac", "aps", "lac-mondrian", "aps-mondrian"}
    if _mapie.mapie_unavailable() is None:  # categories: MAPIE takes the fitted model
        methods |= set(_mapie.MAPIE_METHODS)
    assert {row["method"] for row in rows} == methods
    for method in methods:  # the folds' test rows partition the table
        mine = [row for row in rows if row["method"] == method]
        assert sum(int(row["n_rows"]) for row in mine) == 300
        assert {row["fold"] for row in mine} == {"0", "1", "2", "3", "4"}
    assert _real.run_real_classes(tasks, out, cache, repeats=1, progress=False) == (0, 1)
    stats = _real.summarize_real_classes(rows)["synth_bin"]["lac"]
    assert stats["rows"] == 300 and 0.8 <= stats["coverage"] <= 1 and 1 <= stats["size"] <= 2
    _real.write_real_classes_report(out)
    assert "| synth_bin | 300 | lac-mondrian |" in (out / _real.SUMMARY_FILE).read_text()


@pytest.mark.parametrize("extra", [["--real"], ["--classification", "--real", "--tasks",
                                                 "growth_dj"], ["--tasks", "titanic"]])
def test_the_real_tasks_need_classification_real_and_a_binary_task(extra, tmp_path, capsys):
    argv = ["benchmark", "--suite", "intervals", *extra, "--out", str(tmp_path)]
    assert cli_main(argv) == 2
    assert "--real" in capsys.readouterr().err
