"""One contract for every scorer, as hypothesis properties over generated tables.

For a fitted model (regressor, classifier, conformal intervals by a split and by CV+,
conformal prediction sets by a split and by CV+) and a generated table,
``predict`` in Python, ONNX Runtime on a DataFrame (``score_frame``), ``neumiss score``
on CSV and on Parquet, ``export/score.py`` on CSV and the Dask path give the same numbers
(1e-5 relative) or all refuse the table, naming the same row and column. A category cell
with spaces around it is the category it spells once stripped, on every path.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neumiss import NeuMissClassifier, NeuMissQuantileRegressor, NeuMissRegressor
from neumiss.intervals import ConformalClassifier, ConformalRegressor
from neumiss.scoring import ScoringError, score_dask, score_file, score_frame

from .test_deploy_fixes import SCORER

#: Levels of the categorical column at fit: a missing token, spaces, a number, text.
LEVELS = ["NA", " z", "1.5", "x", "nan x"]
#: Levels never seen at fit (none of them a level once stripped).
UNSEEN = ["w", "never seen"]
#: How a CSV file spells a missing number, and a missing category or boolean.
MISSING_NUMBER = ["", "NA", "nan", " NA", "NaN ", "na"]
MISSING_TEXT = ["", "nan", " nan"]
#: Numbers beyond what predict accepts (more than 1e30 deviations from the mean).
EXTREMES = [1e31, -1e38]


def _training_table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "a": rng.normal(size=n),
        "b": rng.normal(3.0, 2.0, size=n),
        "plan": rng.choice(LEVELS, size=n).astype(object),
        "flag": rng.random(n) < 0.5,
    })
    frame.loc[rng.random(n) < 0.2, "a"] = np.nan
    frame.loc[rng.random(n) < 0.1, "plan"] = None
    y = (frame["a"].fillna(0) + frame["b"] + frame["plan"].map({"NA": 2.0, " z": -1.0}).fillna(0)
         + frame["flag"])
    return frame, y.to_numpy()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """name -> (fitted model, path of its ONNX file), fitted once."""
    frame, y = _training_table()
    small = {"max_epochs": 3, "depth": 2, "random_state": 0}
    models = {
        "regressor": NeuMissRegressor(**small).fit(frame, y),
        "classifier": NeuMissClassifier(**small).fit(frame, y > np.median(y)),
        "mondrian": ConformalRegressor(
            estimator=NeuMissQuantileRegressor(quantiles=(0.05, 0.5, 0.95), **small),
            cv=None, random_state=0).fit(frame, y),
        "cross": ConformalRegressor(  # 300 rows: CV+
            estimator=NeuMissQuantileRegressor(quantiles=(0.05, 0.5, 0.95), **small),
            cv=4, random_state=0).fit(frame, y),
        "sets": ConformalClassifier(NeuMissClassifier(**small), method="aps-mondrian",
                                    cv=None, random_state=0).fit(frame, np.digitize(y, [0, 3])),
        "cross_sets": ConformalClassifier(  # 300 rows: CV+
            NeuMissClassifier(**small), cv=4, random_state=0).fit(frame, np.digitize(y, [0, 3])),
    }
    folder = tmp_path_factory.mktemp("contract")
    for name, model in models.items():
        model.to_onnx(folder / f"{name}.onnx")
    return {name: (model, folder / f"{name}.onnx") for name, model in models.items()}


@st.composite
def tables(draw):
    """A table the estimator accepts: each cell, and how a CSV file spells it."""
    n = draw(st.integers(1, 6))
    number = st.one_of(st.floats(-1e4, 1e4, allow_nan=False), st.just(np.nan),
                       st.sampled_from(EXTREMES) if draw(st.booleans()) else st.just(0.25))
    # a level as it is, or with spaces around it ("x " is "x", " z " is " z"; "w " unseen)
    category = st.one_of(
        st.sampled_from(LEVELS + UNSEEN + [None]),
        st.builds(lambda level, left, right: left + level + right,
                  st.sampled_from(LEVELS + UNSEEN), st.sampled_from(["", " ", "  "]),
                  st.sampled_from(["", " "])))
    rows = [(draw(number), draw(number), draw(category), draw(st.sampled_from([True, False, None])))
            for _ in range(n)]
    frame = pd.DataFrame(rows, columns=["a", "b", "plan", "flag"]).astype(
        {"a": float, "b": float, "plan": object, "flag": object})
    order = draw(st.permutations(["a", "b", "plan", "flag"]))
    frame = frame[list(order)].assign(extra=["e"] * n)
    spell = {"number": draw(st.sampled_from(MISSING_NUMBER)),
             "text": draw(st.sampled_from(MISSING_TEXT))}
    return frame, spell


def _csv_text(frame, spell):
    """The table as CSV text, missing cells spelled as ``spell`` says."""
    def cell(value, name):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return spell["number"] if name in ("a", "b") else spell["text"]
        if isinstance(value, str):
            return '"' + value + '"'
        return repr(float(value)) if name in ("a", "b") else str(value).lower()
    lines = [",".join(frame.columns)]
    lines += [",".join(cell(v, c) for v, c in zip(row, frame.columns, strict=True))
              for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def _expected(model, frame):
    """What predict gives, as the scorers' columns; or the 0-based rows it refuses."""
    table = frame[["a", "b", "plan", "flag"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            if isinstance(model, ConformalRegressor):
                bounds = model.predict_interval(table)
                return {"prediction": model.predict(table), "lower": bounds[:, 0],
                        "upper": bounds[:, 1]}
            if isinstance(model, ConformalClassifier):
                proba = model.predict_proba(table)
                sets, sizes = model.predict_set(table)
                return {**{f"proba_{c}": proba[:, k] for k, c in enumerate(model.classes_)},
                        **{f"set_{c}": sets[:, k] for k, c in enumerate(model.classes_)},
                        "set_size": sizes}
            if isinstance(model, NeuMissClassifier):
                proba = model.predict_proba(table)
                return {f"proba_{c}": proba[:, k] for k, c in enumerate(model.classes_)}
            return {"prediction": model.predict(table)}
        except ValueError as error:  # the rows it names, the first first
            return [int(r) for r in re.search(r"rows \[([\d, ]+)\]", str(error))[1].split(",")]


def _scored(deployed_model, frame, spell, folder):
    """Each scorer's outputs (a DataFrame) or its error message."""
    _, path = deployed_model
    (folder / "in.csv").write_text(_csv_text(frame, spell))
    frame.to_parquet(folder / "in.parquet", index=False)
    results = {}
    runs = {
        "frame": lambda: score_frame(frame, path),
        "csv": lambda: score_file(path, str(folder / "in.csv"), str(folder / "out_c.csv"))
        and pd.read_csv(folder / "out_c.csv"),
        "parquet": lambda: score_file(path, str(folder / "in.parquet"),
                                      str(folder / "out_p.parquet"))
        and pd.read_parquet(folder / "out_p.parquet"),
        "dask": lambda: _dask(frame, path),
    }
    for name, run in runs.items():
        try:
            results[name] = run()
        except ScoringError as error:
            results[name] = str(error)
    status = SCORER.main([str(path), str(folder / "in.csv"), "-o", str(folder / "out_s.csv")])
    results["export/score.py"] = (pd.read_csv(folder / "out_s.csv") if status == 0
                                  else "refused")
    return results


def _dask(frame, path):
    dd = pytest.importorskip("dask.dataframe")
    return score_dask(dd.from_pandas(frame, npartitions=2), path).compute(scheduler="sync")


@settings(max_examples=18, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables(),
       name=st.sampled_from(["regressor", "classifier", "mondrian", "cross", "sets",
                             "cross_sets"]))
def test_every_scorer_gives_predicts_numbers_or_its_refusal(deployed, tmp_path, case, name):
    frame, spell = case
    model = deployed[name][0]
    expected = _expected(model, frame)
    results = _scored(deployed[name], frame, spell, tmp_path)
    scale = getattr(getattr(model, "estimator_", model), "y_scale_", 1.0)
    for scorer, result in results.items():
        if isinstance(expected, list):  # refused: every scorer names the row and column
            assert isinstance(result, str), (scorer, result)
            assert "too far from the training data" in result or scorer == "export/score.py"
            first = expected[0]
            place = {"csv": f"line {first + 2}", "parquet": f"row {first + 1}",
                     "frame": f"row {first + 1} (index {first})"}.get(scorer, "")
            assert place in result, (scorer, result)
            if scorer == "dask":  # the partition that fails first names its own row
                assert any(f"(index {row})" in result for row in expected), result
            continue
        assert not isinstance(result, str), (scorer, result, frame, spell)
        for column, values in expected.items():
            np.testing.assert_allclose(result[column].to_numpy(), values, rtol=1e-5,
                                       atol=1e-5 * scale, err_msg=f"{scorer}: {column}")
