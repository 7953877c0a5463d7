"""Tests of the real-data suite: task records, the cache loader, folds, report, end to end.

Only the tests of the task records read the exported R data sets (skipped, per data set,
without them); the others write a tiny cache of their own, so they run without R.
"""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neumiss.baselines import make_baseline
from neumiss.benchmark.realdata import (
    COLUMNS,
    HALVES,
    METHODS,
    N_FOLDS,
    TASKS,
    CacheMissingError,
    RealRun,
    Task,
    execute_run,
    fold_indices,
    load_task,
    neumiss_method,
    rank_methods,
    read_dataset,
    read_runs,
    run_suite,
    select_tasks,
    split_halves,
    summarize,
)
from neumiss.benchmark.realdata._cache import DEFAULT_CACHE, check_task, read_schema
from neumiss.benchmark.realdata._report import (
    add_utility,
    format_choices,
    format_summary,
    paired_differences,
)
from neumiss.benchmark.realdata._tasks import LARGE_ROWS
from neumiss.cli import main as cli_main

from .conftest import interrupt_after_first_row

REPO_CACHE = Path(__file__).resolve().parent.parent / DEFAULT_CACHE


def _write_dataset(cache: Path, package: str, dataset: str, csv_text: str, columns: list):
    """A data set as export_datasets.R writes it: PACKAGE.DATASET.csv and .json."""
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"{package}.{dataset}.csv").write_text(csv_text, encoding="utf-8")
    schema = {"source": {"package": package, "dataset": dataset}, "columns": columns}
    (cache / f"{package}.{dataset}.json").write_text(json.dumps(schema), encoding="utf-8")


TINY_COLUMNS = [
    {"name": "x", "type": "numeric"},
    {"name": "n", "type": "integer"},
    {"name": "flag", "type": "logical"},
    {"name": "size", "type": "factor", "levels": ["small", "medium", "large"], "ordered": True},
    {"name": "colour", "type": "factor", "levels": ["red", "NA", "blue"], "ordered": False},
    {"name": "grade", "type": "factor", "levels": ["1", "2", "10"], "ordered": False},
    {"name": "id", "type": "character"},
    {"name": "outcome", "type": "factor", "levels": ["no", "yes", "maybe"], "ordered": False},
]
TINY_CSV = (
    '"x","n","flag","size","colour","grade","id","outcome"\n'
    '0.30000000000000004,1,TRUE,"large","NA","10","a1","yes"\n'
    ',2,FALSE,"small","red","1","a2","no"\n'
    "-1.5e-07,,,,,,,\n"
    '2,4,TRUE,"medium","blue","2","a4","maybe"\n'
    '3,5,FALSE,"small","red",,"a5","no"\n'
)


def test_task_records_are_valid():
    assert len(TASKS) >= 10
    assert {t.kind for t in TASKS.values()} == {"regression", "binary"}
    with pytest.raises(ValueError, match="kind must be one of"):
        Task("t", "p", "d", "y", "multiclass")
    with pytest.raises(ValueError, match="give `positive` for binary tasks only"):
        Task("t", "p", "d", "y", "binary")
    with pytest.raises(ValueError, match="target 'y' is also dropped"):
        Task("t", "p", "d", "y", "regression", drop=("y",))
    with pytest.raises(ValueError, match="half must be one of"):
        Task("t", "p", "d", "y", "regression", half="test")
    with pytest.raises(ValueError, match="rows must be a positive integer"):
        Task("t", "p", "d", "y", "regression", rows=0)


def test_the_suite_is_split_by_its_rule_into_balanced_halves():
    written = {name: task.half for name, task in TASKS.items()}
    assert written == split_halves(TASKS.values())
    assert len(TASKS) >= 32
    assert sum(task.rows >= LARGE_ROWS for task in TASKS.values()) >= 10
    assert sum(task.kind == "binary" for task in TASKS.values()) >= 12
    for half in HALVES:
        part = [task for task in TASKS.values() if task.half == half]
        assert len(part) >= len(TASKS) // 2
        assert sum(task.kind == "binary" for task in part) >= 6
        assert sum(task.rows >= LARGE_ROWS for task in part) >= 5


_TASK_SIZES = st.lists(
    st.tuples(st.sampled_from(("regression", "binary")), st.integers(1, 2 * LARGE_ROWS)),
    min_size=1, max_size=30,
)


@given(sizes=_TASK_SIZES, seed=st.integers(0, 10**6))
def test_split_halves_balances_every_stratum_whatever_the_tasks(sizes, seed):
    tasks = [Task(f"t{i}", "p", "d", "y", kind, positive="1" if kind == "binary" else None,
                  rows=rows) for i, (kind, rows) in enumerate(sizes)]
    halves = split_halves(tasks, seed)
    assert set(halves) == {task.name for task in tasks} and set(halves.values()) <= set(HALVES)
    assert split_halves(tasks[::-1], seed) == halves  # the input order does not matter

    def gap(part):
        counts = [sum(halves[task.name] == half for task in part) for half in HALVES]
        return abs(counts[0] - counts[1])

    assert gap(tasks) <= 1
    for kind in ("regression", "binary"):
        for large in (False, True):
            stratum = [t for t in tasks if t.kind == kind and (t.rows >= LARGE_ROWS) == large]
            assert gap(stratum) <= 1


def test_split_halves_needs_the_row_counts():
    with pytest.raises(ValueError, match=r"tasks \['t'\] have no `rows`"):
        split_halves([Task("t", "p", "d", "y", "regression")])


def test_select_tasks_by_name_and_half():
    assert select_tasks() == list(TASKS.values())
    tuning = select_tasks(half="tuning")
    assert tuning == [task for task in TASKS.values() if task.half == "tuning"]
    assert {task.name for task in tuning} | {task.name for task in select_tasks(
        half="confirmation")} == set(TASKS)
    named = ["gss_vocab", "titanic", "gss_vocab"]  # confirmation, tuning
    assert [task.name for task in select_tasks(named)] == ["gss_vocab", "titanic"]
    assert [task.name for task in select_tasks(named, "tuning")] == ["titanic"]
    with pytest.raises(ValueError, match=r"none of the tasks \['titanic'\] is in the "
                                         "confirmation half"):
        select_tasks(["titanic"], "confirmation")
    with pytest.raises(ValueError, match="unknown tasks"):
        select_tasks(["nope"])
    with pytest.raises(ValueError, match="half must be one of"):
        select_tasks(half="both")


def _exported(task: Task) -> None:
    """Skip the calling test, with the reason, when ``task``'s data set is not exported."""
    if not (REPO_CACHE / f"{task.package}.{task.dataset}.json").exists():
        pytest.skip(f"{task.source} is not in {REPO_CACHE}: run bash scripts/setup_realdata.sh")


@pytest.mark.parametrize("task", TASKS.values(), ids=TASKS)
def test_task_records_match_the_exported_data_sets(task):
    _exported(task)
    schema = read_schema(REPO_CACHE, task.package, task.dataset)
    types = {c["name"]: c for c in schema["columns"]}
    check_task(task, {name: c["type"] for name, c in types.items()})
    target = types[task.target]
    if task.kind == "regression":
        assert target["type"] in ("numeric", "integer")
    elif target["type"] == "factor":
        assert task.positive in target["levels"]
    for column, values in task.keep.items():
        assert set(values) <= set(types[column].get("levels", values))
    X, y = load_task(task, REPO_CACHE)
    assert X.isna().to_numpy().any(), f"{task.name}: no missing feature value"
    assert len(X) == len(y) == task.rows >= 100
    assert not set(X.columns) & {task.target, *task.drop}


#: The tasks added for nonlinear targets: rows, features, (categorical features), the
#: feature columns with missing values, and the target's mean.
NONLINEAR_TASKS = {
    "credit_default": (4454, 13, 4, {"Home", "Marital", "Job", "Income", "Assets", "Debt"},
                       0.2815),
    "txhousing_sales": (8034, 5, 1, {"median", "listings"}, 549.56),
    "growth_dj": (117, 8, 3, {"gdp60", "popgrowth", "school", "literacy60"}, 4.094),
    "seatbelt_fatalities": (765, 11, 7, {"seatbelt"}, 0.02149),
}


@pytest.mark.parametrize("name", NONLINEAR_TASKS)
def test_the_nonlinear_tasks_have_their_rows_target_and_missing_features(name):
    task = TASKS[name]
    _exported(task)
    rows, features, categorical, incomplete, target_mean = NONLINEAR_TASKS[name]
    X, y = load_task(task, REPO_CACHE)
    assert X.shape == (rows, features) and y.shape == (rows,) and np.isfinite(y).all()
    assert sum(isinstance(X[c].dtype, pd.CategoricalDtype) for c in X) == categorical
    assert set(X.columns[X.isna().any()]) == incomplete
    assert y.mean() == pytest.approx(target_mean, rel=1e-3)
    if task.kind == "binary":
        assert set(np.unique(y)) == {0, 1}


def test_loader_rebuilds_the_r_types(tmp_path):
    _write_dataset(tmp_path, "pkg", "tiny", TINY_CSV, TINY_COLUMNS)
    data = read_dataset(tmp_path, "pkg", "tiny")
    assert list(data.columns) == [c["name"] for c in TINY_COLUMNS]
    assert data["x"].dtype == np.float64 and data["x"][0] == 0.1 + 0.2
    assert data["x"][2] == -1.5e-07 and math.isnan(data["x"][1])
    assert str(data["n"].dtype) == "Int64" and data["n"][2] is pd.NA
    assert str(data["flag"].dtype) == "boolean" and data["flag"].tolist()[:2] == [True, False]
    assert data["flag"][2] is pd.NA
    size = data["size"].dtype
    assert isinstance(size, pd.CategoricalDtype) and size.ordered
    assert list(size.categories) == ["small", "medium", "large"]
    colour = data["colour"]
    assert list(colour.cat.categories) == ["red", "NA", "blue"] and not colour.dtype.ordered
    # "NA" in quotes is a level; an empty field is missing.
    assert colour[0] == "NA" and pd.isna(colour[2])
    assert list(data["grade"].cat.categories) == ["1", "2", "10"]
    assert data["id"].dtype == object and data["id"][0] == "a1" and pd.isna(data["id"][2])
    assert data.iloc[2, 1:].isna().all()


def test_loader_errors_name_the_file_and_column(tmp_path):
    columns = [{"name": "size", "type": "factor", "levels": ["small"], "ordered": False}]
    _write_dataset(tmp_path, "pkg", "bad", '"size"\n"huge"\n', columns)
    with pytest.raises(ValueError, match=r"pkg.bad.csv: column 'size' holds 'huge'"):
        read_dataset(tmp_path, "pkg", "bad")
    _write_dataset(tmp_path, "pkg", "bad", '"n"\n1.5\n', [{"name": "n", "type": "integer"}])
    with pytest.raises(ValueError, match=r"column 'n' \(integer\) holds '1.5'"):
        read_dataset(tmp_path, "pkg", "bad")
    with pytest.raises(CacheMissingError, match="run `bash scripts/setup_realdata.sh"):
        load_task(TASKS["titanic"], tmp_path / "nowhere")


def test_load_task_filters_rows_drops_columns_and_encodes_the_target(tmp_path):
    _write_dataset(tmp_path, "pkg", "tiny", TINY_CSV, TINY_COLUMNS)
    task = Task("tiny", "pkg", "tiny", "outcome", "binary", positive="yes",
                keep={"outcome": ("yes", "no")}, numeric=("grade",))
    X, y = load_task(task, tmp_path)
    # Rows: "maybe" filtered out, the missing outcome dropped.
    assert y.tolist() == [1, 0, 0] and y.dtype == np.int64
    assert list(X.columns) == ["x", "n", "flag", "size", "colour", "grade", "id"]
    # A text column becomes a category of its sorted values (what every method reads).
    assert list(X["id"].cat.categories) == ["a1", "a2", "a5"] and X["id"].tolist()[0] == "a1"
    assert X["grade"].dtype == np.float64 and X["grade"].tolist()[:2] == [10.0, 1.0]
    assert math.isnan(X["grade"][2])
    regression = Task("r", "pkg", "tiny", "x", "regression", drop=("id", "outcome"))
    X, y = load_task(regression, tmp_path)
    assert y.tolist() == [0.1 + 0.2, -1.5e-07, 2.0, 3.0] and "x" not in X
    with pytest.raises(ValueError, match=r"task 'r2': pkg::tiny has no column\(s\) \['nope'\]"):
        load_task(Task("r2", "pkg", "tiny", "x", "regression", drop=("nope",)), tmp_path)
    with pytest.raises(ValueError, match="task 'b': positive class 'Y' leaves one class"):
        load_task(Task("b", "pkg", "tiny", "outcome", "binary", positive="Y"), tmp_path)
    # A row filter on a numeric column compares numbers ("4" keeps 4; missing is dropped).
    numeric_keep = Task("k", "pkg", "tiny", "x", "regression", keep={"n": ("1", "4.0")},
                        drop=("id", "outcome"))
    assert load_task(numeric_keep, tmp_path)[1].tolist() == [0.1 + 0.2, 2.0]
    with pytest.raises(ValueError, match="`keep` of the numeric column 'n' must be numbers"):
        load_task(Task("k2", "pkg", "tiny", "x", "regression", keep={"n": ("one",)}), tmp_path)


def test_folds_partition_the_rows_and_repeat_exactly():
    y = np.r_[np.zeros(70, dtype=int), np.ones(30, dtype=int)]
    folds = fold_indices(y, "binary", repeat=0, seed=3)
    assert len(folds) == N_FOLDS
    tests = np.sort(np.concatenate([test for _, test in folds]))
    assert tests.tolist() == list(range(100))
    assert all(y[test].sum() == 6 for _, test in folds)  # stratified
    again = fold_indices(y, "binary", repeat=0, seed=3)
    assert all((a[1] == b[1]).all() for a, b in zip(folds, again))
    other = fold_indices(y, "binary", repeat=1, seed=3)
    assert any((a[1] != b[1]).any() for a, b in zip(folds, other))


def _synthetic_cache(cache: Path, n: int = 240) -> list[Task]:
    """A regression and a binary task on one synthetic data set with categories and NaN."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=n), rng.normal(size=n)
    colour = rng.choice(["red", "blue", "green"], size=n)
    y = 2 * a - b + (colour == "red") + rng.normal(scale=0.3, size=n)
    a_text = np.where(rng.random(n) < 0.2, "", np.char.mod("%.17g", a))
    colour_text = np.where(rng.random(n) < 0.1, "", np.char.add(np.char.add('"', colour), '"'))
    lines = ['"a","b","colour","y","label"']
    lines += [f'{a_text[i]},{b[i]:.17g},{colour_text[i]},{y[i]:.17g},"{"hi" if y[i] > 0 else "lo"}"'
              for i in range(n)]
    columns = [
        {"name": "a", "type": "numeric"}, {"name": "b", "type": "numeric"},
        {"name": "colour", "type": "factor", "levels": ["red", "blue", "green"],
         "ordered": False},
        {"name": "y", "type": "numeric"},
        {"name": "label", "type": "factor", "levels": ["lo", "hi"], "ordered": False},
    ]
    _write_dataset(cache, "synthetic", "mixed", "\n".join(lines) + "\n", columns)
    return [
        Task("synth_reg", "synthetic", "mixed", "y", "regression", drop=("label",)),
        Task("synth_bin", "synthetic", "mixed", "label", "binary", positive="hi", drop=("y",)),
    ]


def _without_addresses(estimator) -> str:
    """The estimator's repr, the addresses of objects in it (column selectors) left out."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(estimator))


def test_baseline_methods_are_the_registry_models():
    """hgb and mean_mask_linear take the table; mice_linear and em take it dummy-coded."""
    task = {"regression": "regression", "binary": "classification"}
    for name in ("hgb", "mean_mask_linear", "mice_linear", "em"):
        for kind in METHODS[name].kinds:
            built, expected = METHODS[name].build(kind, 3), make_baseline(name, task[kind], 3)
            if name in ("mice_linear", "em"):
                assert type(built.steps[0][1]).__name__ == "DummyEncoder"
                built = built[1:] if len(built.steps) > 2 else built.steps[1][1]
            assert _without_addresses(built) == _without_addresses(expected)
    assert METHODS["em"].kinds == ("regression",)
    assert METHODS["hgb"].kinds == ("regression", "binary")


def test_every_method_sees_the_same_folds(tmp_path):
    tasks = _synthetic_cache(tmp_path)
    for task in tasks:
        rows = [
            execute_run(RealRun(task.name, name, 1, 2, 7), task, METHODS[name], tmp_path)
            for name in ("hgb", "mean_mask_linear", "mice_linear")
        ]
        assert len({row["test_digest"] for row in rows}) == 1
        assert {row["n_test"] for row in rows} == {48}
        repeated = execute_run(RealRun(task.name, "hgb", 1, 2, 7), task, METHODS["hgb"],
                               tmp_path)
        assert repeated["test_digest"] == rows[0]["test_digest"]
        metric = "r2" if task.kind == "regression" else "auc"
        assert all(row[metric] > 0.5 for row in rows)


def _hand_made_runs() -> pd.DataFrame:
    """Two tasks, three methods, two folds each, with known means and stds."""
    rows = []
    scores = {  # task -> method -> per-fold ranking metric
        ("reg", "regression"): {"A": (0.80, 0.90), "B": (0.84, 0.84), "C": (0.50, 0.60)},
        ("bin", "binary"): {"A": (0.30, 0.40), "B": (0.20, 0.30), "C": (0.20, 0.30)},
    }
    for (task, kind), by_method in scores.items():
        for method, values in by_method.items():
            for fold, value in enumerate(values):
                rows.append({
                    "task": task, "method": method, "repeat": 0, "fold": fold, "seed": 0,
                    "kind": kind, "n_rows": 100, "n_features": 3, "missing_share": 0.1,
                    "r2": value if kind == "regression" else np.nan,
                    "log_loss": value if kind == "binary" else np.nan,
                    "auc": 0.8 if kind == "binary" else np.nan,
                    "accuracy": 0.7 if kind == "binary" else np.nan,
                    "fit_seconds": {"A": 1.0, "B": 2.0, "C": 3.0}[method],
                })
    return add_utility(pd.DataFrame(rows))


def test_report_ranks_and_counts_methods_within_one_std_of_the_best():
    summary = summarize(_hand_made_runs()).set_index(["task", "method"])
    # reg: A 0.85 ± 0.0707 (best), B 0.84 (within), C 0.55 (not).
    assert summary.loc[("reg", "A"), "r2_mean"] == pytest.approx(0.85)
    assert summary.loc[("reg", "A"), "r2_std"] == pytest.approx(0.1 / math.sqrt(2))
    assert summary.loc["reg", "rank"].tolist() == [1.0, 2.0, 3.0]
    assert summary.loc["reg", "within_std"].tolist() == [True, True, False]
    # bin (lower log loss is better): B and C tie at 0.25, A at 0.35 is 0.1 > 0.0707 away.
    assert summary.loc["bin", "rank"].tolist() == [3.0, 1.5, 1.5]
    assert summary.loc["bin", "within_std"].tolist() == [False, True, True]
    ranks = rank_methods(summarize(_hand_made_runs())).set_index("method")
    assert ranks["mean_rank"].to_dict() == {"A": 2.0, "B": 1.75, "C": 2.25}
    assert ranks["mean_rank_regression"].to_dict() == {"A": 1.0, "B": 2.0, "C": 3.0}
    assert ranks["n_within_std"].to_dict() == {"A": 1, "B": 2, "C": 1}
    assert ranks["fit_seconds"].to_dict() == {"A": 1.0, "B": 2.0, "C": 3.0}


def test_a_method_on_fewer_folds_of_a_task_is_shown_but_not_ranked_there():
    # D ran on one of reg's two folds (a run under way) with the best mean there; it
    # must not take the lead from the methods that ran on both folds.
    runs = _hand_made_runs()
    partial = runs[(runs["task"] == "reg") & (runs["method"] == "A") & (runs["fold"] == 1)]
    runs = pd.concat([runs, partial.assign(method="D", r2=0.95, utility=0.95)],
                     ignore_index=True)
    summary = summarize(runs).set_index(["task", "method"])
    assert not summary.loc[("reg", "D"), "complete"]
    assert math.isnan(summary.loc[("reg", "D"), "rank"])
    assert not summary.loc[("reg", "D"), "within_std"]
    assert summary.loc["reg", "rank"].dropna().to_dict() == {"A": 1.0, "B": 2.0, "C": 3.0}
    assert summary.loc["reg", "within_std"].to_dict() == {
        "A": True, "B": True, "C": False, "D": False}
    ranks = rank_methods(summarize(runs)).set_index("method")
    assert ranks.loc["D", "n_tasks"] == 0 and math.isnan(ranks.loc["D", "mean_rank"])
    assert ranks.loc["A", "mean_rank"] == 2.0  # as without D
    assert math.isnan(ranks.loc["D", "fit_seconds"])  # over the tasks it is ranked on
    text = format_summary(summarize(runs), halves={"reg": "tuning", "bin": "confirmation"})
    assert "| reg | R² | 100 | **0.850 ± 0.071** | 0.840 ± 0.000 | 0.550 ± 0.071 | " \
        "0.950 ± " in text
    assert "(1/2 folds, not ranked)" in _section(text, "reg")
    assert "| D | " in _section(text, "Methods over tasks") and "not ranked there" in text
    assert "not ranked" not in format_summary(summarize(_hand_made_runs()))
    best = paired_differences(runs, summarize(runs)).set_index(["task", "method"])
    assert best.loc[("reg", "A"), "mean"] == 0.0  # A, not D, is the best on reg


def _section(text: str, title: str) -> str:
    """The part of a markdown ``text`` from the heading ``title`` to the next heading."""
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_report_gives_the_methods_and_tasks_of_each_half():
    summary = summarize(_hand_made_runs())
    text = format_summary(summary, halves={"reg": "tuning", "bin": "confirmation"})
    tuning = _section(text, "The tuning half (1 of 2 tasks)")
    # reg alone: A first, B second (within one std), C third; mean fit seconds per method.
    assert "| A | 1.00 | 1.00 |  | 1/1 | 1.00 |" in tuning
    assert "| B | 2.00 | 2.00 |  | 1/1 | 2.00 |" in tuning
    assert "| C | 3.00 | 3.00 |  | 0/1 | 3.00 |" in tuning
    assert "| reg | R² | 100 | **0.850 ± 0.071** | 0.840 ± 0.000 | 0.550 ± 0.071 |" in tuning
    assert "| bin |" not in tuning
    confirmation = _section(text, "The confirmation half (1 of 2 tasks)")
    assert "| A | 3.00 |  | 3.00 | 0/1 | 1.00 |" in confirmation
    assert "| B | 1.50 |  | 1.50 | 1/1 | 2.00 |" in confirmation
    assert "| bin | log loss |" in confirmation and "| reg |" not in confirmation
    overall = _section(text, "Methods over tasks")
    assert "| B | 1.75 | 2.00 | 1.50 | 2/2 | 2.00 |" in overall
    assert "## Ranking metric per task" not in text and "neither half" not in text
    # A task in no half gets a table of its own; without halves, one table of all tasks.
    partial = format_summary(summary, halves={"reg": "tuning"})
    assert "| bin | log loss |" in _section(partial, "Tasks in neither half (1 of 2 tasks)")
    assert "confirmation half" not in partial
    unsplit = format_summary(summary, halves={})
    assert "| reg | R² |" in _section(unsplit, "Ranking metric per task")
    assert "half" not in unsplit


@pytest.mark.slow
def test_tiny_suite_end_to_end_with_resume(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "out"
    tasks = _synthetic_cache(cache)
    quick = neumiss_method("neumiss_quick", {"depth": 1, "max_epochs": 3})
    methods = [METHODS["hgb"], METHODS["em"], quick]
    result = run_suite(tasks, methods, out, cache=cache, repeats=1, jobs=2, progress=False)
    assert result.failures == []
    # em is regression only: 5 folds x (2 + 2 + 1) fits.
    assert (result.n_computed, result.n_skipped) == (25, 0)
    rows = read_runs(out / "runs.csv")
    assert len(rows) == 25 and list(rows[0]) == list(COLUMNS)
    assert {row["config"] for row in rows if row["method"] == "neumiss_quick"} == {
        json.dumps({"depth": 1, "max_epochs": 3}, sort_keys=True)}
    digests = {}
    for row in rows:
        digests.setdefault((row["task"], row["fold"]), set()).add(row["test_digest"])
    assert all(len(d) == 1 for d in digests.values())
    summary = (out / "summary.md").read_text()
    assert "## synth_reg" in summary and "| neumiss_quick |" in summary
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    again = run_suite(tasks, methods, out, cache=cache, repeats=1, in_process=True,
                      progress=False)
    assert (again.n_computed, again.n_skipped) == (0, 25)
    changed = neumiss_method("neumiss_quick", {"depth": 2, "max_epochs": 3})
    with pytest.raises(ValueError, match="'neumiss_quick' is in .* with config"):
        run_suite(tasks, [changed], out, cache=cache, repeats=1, in_process=True,
                  progress=False)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--suite", "real", "--mechanisms", "MCAR"],
         "--mechanisms: not an option of --suite real"),
        (["--tasks", "titanic"], "--tasks: not an option of --suite simulated"),
        (["--suite", "real", "--methods", "mlp"], "methods ['mlp'] are not in --suite real"),
    ],
)
def test_options_of_the_other_suite_are_refused(argv, expected, capsys, tmp_path):
    assert cli_main(["benchmark", *argv, "--out", str(tmp_path)]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "runs.csv").exists()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("nolabel", "expected LABEL=JSON"),
        ("hgb={}", "label 'hgb' is a built-in method's name"),
        ("x={depth: 2}", "x: invalid JSON"),
        ("x=[1]", "x: expected a JSON object"),
    ],
)
def test_bad_neumiss_params_give_clear_errors(value, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["benchmark", "--suite", "real", "--neumiss-params", value])
    assert exit_info.value.code == 2
    assert expected in capsys.readouterr().err


def test_missing_cache_says_how_to_build_it(capsys, tmp_path):
    status = cli_main(["benchmark", "--suite", "real", "--tasks", "titanic", "--methods", "hgb",
                       "--cache", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])
    assert status == 1
    error = capsys.readouterr().err
    assert "carData::TitanicSurvival is not in" in error and "scripts/setup_realdata.sh" in error
    assert not (tmp_path / "out").exists()


def test_half_selects_the_tasks_of_the_command(capsys, tmp_path):
    status = cli_main(["benchmark", "--suite", "real", "--tasks", "titanic", "--half",
                       "confirmation", "--methods", "hgb", "--out", str(tmp_path / "out")])
    assert status == 2
    assert "none of the tasks ['titanic'] is in the confirmation half" in capsys.readouterr().err
    # The tuning tasks are selected: the first one's data set is looked for in the cache.
    status = cli_main(["benchmark", "--suite", "real", "--half", "tuning", "--methods", "hgb",
                       "--cache", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])
    assert status == 1
    assert f"{select_tasks(half='tuning')[0].source} is not in" in capsys.readouterr().err
    assert cli_main(["benchmark", "--half", "tuning", "--out", str(tmp_path)]) == 2
    assert "--half: not an option of --suite simulated" in capsys.readouterr().err


def test_an_anchor_whose_package_is_missing_is_skipped_with_the_reason(
        capsys, tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "catboost" else find_spec(name, *a))
    status = cli_main(["benchmark", "--suite", "real", "--tasks", "titanic", "--methods",
                       "catboost", "--cache", str(tmp_path / "nowhere"),
                       "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert "skipping method 'catboost': catboost not installed" in error
    assert "neumiss[anchors]" in error
    assert status == 1  # the cache is missing too: the suite still reports that


def test_the_anchors_are_methods_of_the_real_suite_for_both_kinds():
    for name in ("catboost", "lightgbm", "realmlp", "tabm"):
        assert METHODS[name].kinds == ("regression", "binary")
        assert METHODS[name].baseline == name
    # The networks warm torch up before their first timed fit, as NeuMiss does.
    assert METHODS["realmlp"].torch and METHODS["tabm"].torch and not METHODS["catboost"].torch


_INTERRUPTED_SUITE = """  # argv: a scratch folder, the number of repeats
import sys
from pathlib import Path
from neumiss.benchmark.realdata import METHODS, neumiss_method, run_suite
from tests.test_realdata import _synthetic_cache
cache, out = Path(sys.argv[1]) / "cache", Path(sys.argv[1]) / "out"
# fits of fixed length (a worker may finish one queued fit after the interrupt): 400
# epochs, and no mask term, so no chain from the identity start on smaller batches
slow = neumiss_method("slow", {"depth": 2, "max_epochs": 400, "patience": 400, "tol": 0.0,
                               "mask_skip": False})
try:
    run_suite(_synthetic_cache(cache, n=2000), [METHODS["hgb"], slow], out, cache=cache,
              repeats=int(sys.argv[2]), jobs=2, progress=False)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.slow
def test_ctrl_c_stops_the_worker_processes_quietly_and_keeps_finished_folds(tmp_path):
    """Ctrl-C reaches the whole process group, the pool's workers included: no worker
    prints a traceback, none is left running, and the finished folds stay."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parent.parent
    runs = tmp_path / "out" / "runs.csv"
    process = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_SUITE, str(tmp_path), "1"], cwd=root,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    interrupt_after_first_row(process, runs, "suite")
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and err.strip() == "interrupted"
    time.sleep(1)
    # Processes of the group still running or sleeping (zombies await their reaper).
    leftover = subprocess.run(["ps", "-o", "stat=,pid=,args=", "-g", str(process.pid)],
                              capture_output=True, text=True).stdout.splitlines()
    alive = [line for line in leftover if not line.lstrip().startswith("Z")]
    assert alive == [], f"worker processes outlived the interrupted suite: {alive}"
    finished = read_runs(runs)
    assert 1 <= len(finished) < 20
    assert all(row["method"] in ("hgb", "slow") for row in finished)


def test_report_says_what_the_defaults_chose_per_task():
    runs = _hand_made_runs()
    chosen = [  # per (task, fold) of method "neumiss": depth, mlp_depth, spline, mask, epochs
        ("reg", 0, 0, 2, True, False, 12), ("reg", 1, 16, 0, False, False, 0),
        ("bin", 0, 0, 0, False, True, 3), ("bin", 1, 0, 0, False, True, 5)]
    rows = []
    for task, fold, depth, mlp_depth, spline, mask, epochs in chosen:
        row = runs[(runs["task"] == task) & (runs["method"] == "A")
                   & (runs["fold"] == fold)].iloc[0].to_dict()
        params = {"depth": depth, "mlp_depth": mlp_depth, "spline": spline,
                  "mask_skip": mask, "weight_sharing": "shared", "epochs": epochs}
        if task == "reg":
            params["log_target"] = fold == 1
        if depth == 0 and task == "reg":  # blended at depth 0 (one fold)
            params["mlp_weight"] = 0.35
        rows.append({**row, "method": "neumiss", "params": json.dumps(params)})
    runs = pd.concat([runs.assign(params="{}"), pd.DataFrame(rows)], ignore_index=True)
    lines = format_choices(runs)
    assert lines[1] == "## What `neumiss` chose"
    table = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")
             for line in lines if line.startswith("| reg") or line.startswith("| bin")}
    assert table["reg"] == ["reg", "2", "0 ×1, 16 ×1", "MLP (2 layers) ×1, linear ×1",
                            "1/2", "0/2", "1/2", "0/2", "0.35", "shared ×2", "6"]
    assert table["bin"] == ["bin", "2", "0 ×2", "linear ×2", "0/2", "2/2", "0/2", "0/2", "-",
                            "shared ×2", "4"]
    summary = summarize(runs)
    assert "## What `neumiss` chose" in format_summary(summary, runs)
    assert "chose" not in format_summary(summary)
    assert format_choices(_hand_made_runs().assign(params="{}")) == []  # no NeuMiss rows


def test_the_params_column_records_the_mlp_heads_weight_in_their_blend():
    from neumiss import NeuMissRegressor
    from neumiss.benchmark.realdata._methods import fitted_info

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] * X[:, 1] + X[:, 2]
    X[rng.random(X.shape) < 0.2] = np.nan
    blended = NeuMissRegressor(depth=0, ensemble_size=2, max_epochs=5, random_state=0).fit(X, y)
    assert fitted_info(blended)["mlp_weight"] == blended.head_results_[0]["mlp_weight"]
    alone = NeuMissRegressor(depth=0, mlp_depth=0, ensemble_size=2, max_epochs=5,
                             random_state=0).fit(X, y)
    assert fitted_info(alone)["mlp_weight"] == 0.0  # the linear head alone
