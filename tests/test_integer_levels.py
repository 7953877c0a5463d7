"""``integer_levels``: numeric columns of few distinct integers get indicator columns of
their frequent values; "auto" keeps them only when the linear start validates clearly
better with them; every scorer and saved model encodes them as ``predict`` does."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.benchmark.realdata._methods import fitted_info
from neumiss.estimators import fit_stream
from neumiss.scoring import score_frame
from neumiss.tables import LEVEL_MIN_ROWS, LEVELS_MAX, TableEncoder
from neumiss.tables._levels import levels_within_budget, nonlinear_share

from .conftest import FAST, PROPERTY
from .test_deploy_fixes import SCORER


def month_year_table(n=2000, seed=0, missing=0.1):
    """A quarter (1-4) and a year (1-4: a survey's wave) whose every pair has its own effect
    on y (a date's shock, as in monthly sales), and six continuous columns, x0 in y; NaN in
    the quarter and x0."""
    rng = np.random.default_rng(seed)
    quarter, year = rng.integers(1, 5, n), rng.integers(1, 5, n)
    x = rng.normal(size=(n, 6))
    shock = np.random.default_rng(1).normal(size=(5, 5))
    y = 2.0 * shock[quarter, year] + 0.5 * x[:, 0] + 0.2 * rng.normal(size=n)
    frame = pd.DataFrame({"quarter": quarter.astype(float), "year": year,
                          **{f"x{j}": x[:, j] for j in range(6)}})
    for column in ("quarter", "x0"):
        frame.loc[rng.random(n) < missing, column] = np.nan
    return frame, y


def test_indicators_are_the_frequent_values_of_integer_columns():
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({
        "grade": rng.integers(1, 6, n).astype(float),  # 5 values
        "wide": rng.integers(0, LEVELS_MAX + 1, n),  # 33 values: a measurement
        "two": rng.integers(0, 2, n),  # 2 values: the value says everything
        "real": rng.normal(size=n),
        "half": rng.integers(0, 5, n) / 2,  # not integers
        "big": 2**24 + rng.integers(0, 4, n),  # integers a float32 scorer cannot tell apart
    })
    frame.loc[:4, "grade"] = 9.0  # 5 rows: too rare for its own indicator
    frame.loc[5:9, "grade"] = np.nan
    encoder = TableEncoder(integer_levels=True)
    encoded = encoder.fit_transform(frame)
    grade = frame["grade"]
    frequent = sorted(v for v, c in grade.value_counts().items() if c >= LEVEL_MIN_ROWS)
    assert frequent == [1, 2, 3, 4, 5]
    assert encoder.output_names() == (["grade"] + [f"grade={v:g}" for v in frequent]
                                      + ["wide", "two", "real", "half", "big"])
    dummies = pd.get_dummies(grade).reindex(columns=frequent, fill_value=0).to_numpy(float).copy()
    dummies[grade.isna().to_numpy()] = np.nan
    np.testing.assert_array_equal(encoded[:, 1:6], dummies)
    assert (encoded[:5, 1:6] == 0).all()  # the rare value: none of the indicators
    np.testing.assert_array_equal(encoded[:, 0], grade)
    # A value not seen at fit is none of the levels; its own value stays.
    unseen = encoder.transform(frame.assign(grade=7.0).iloc[:3])
    np.testing.assert_array_equal(unseen[:, :6], [[7.0, 0, 0, 0, 0, 0]] * 3)
    # Only the values are numeric columns (compressed when heavy-tailed), not indicators.
    assert encoder.numeric_columns().tolist() == [True] + [False] * 5 + [True] * 5
    assert encoder.indicator_columns().tolist() == [False] + [True] * 5 + [False] * 5
    assert TableEncoder().fit(frame).output_names() == list(frame.columns)
    assert not TableEncoder().fit(frame).has_levels and encoder.has_levels
    restored = TableEncoder.from_state(encoder.get_state())
    np.testing.assert_array_equal(restored.transform(frame), encoded)


@PROPERTY
@given(values=st.lists(st.integers(-3, 3) | st.none(), min_size=40, max_size=120))
def test_indicators_match_an_independent_one_hot(values):
    column = pd.Series([np.nan if v is None else float(v) for v in values])
    filler = np.random.default_rng(0).normal(size=(len(values), 7))  # within the budget
    frame = pd.DataFrame(filler).rename(columns=str).assign(c=column)
    encoder = TableEncoder(integer_levels=True).fit(frame)
    counts = column.value_counts()
    levels = sorted(counts.index[counts >= LEVEL_MIN_ROWS])
    if column.nunique() < 3 or len(levels) < 2:
        assert not encoder.has_levels
        return
    encoded = encoder.transform(frame)
    expected = np.stack([(column == v).to_numpy(float) for v in levels], axis=1)
    expected[column.isna().to_numpy()] = np.nan
    np.testing.assert_array_equal(encoded[:, 7], column)
    np.testing.assert_array_equal(encoded[:, 8:], expected)


def test_indicators_never_outnumber_the_other_columns():
    """Coded items (a questionnaire): 4 columns of 4 values would take 16 indicators."""
    items = pd.DataFrame(np.random.default_rng(0).integers(0, 4, (200, 4)), columns=list("abcd"))
    assert not TableEncoder(integer_levels=True).fit(items).has_levels
    with_more = items.assign(**{f"x{j}": np.arange(200.0) * j for j in range(12)})
    assert TableEncoder(integer_levels=True).fit(with_more).n_features_out_ == 32


def questionnaire(n=600, n_items=12, seed=0):
    """``n_items`` answers of 1-6 with a linear effect on y each, and an education code of
    1-8 whose effect is no line (codes 3 and 6 far from their neighbours); NaN in both."""
    rng = np.random.default_rng(seed)
    items = rng.integers(1, 7, (n, n_items)).astype(float)
    education = rng.integers(1, 9, n).astype(float)
    jump = np.array([0, 0, 0, 3, 0, 0, -3, 0, 0], dtype=float)
    y = items @ np.linspace(0.1, 0.3, n_items) + jump[education.astype(int)] + rng.normal(size=n)
    items[rng.random(items.shape) < 0.05] = np.nan
    education[rng.random(n) < 0.1] = np.nan
    frame = pd.DataFrame(items, columns=[f"q{j}" for j in range(n_items)])
    return frame.assign(education=education), y


def test_over_the_budget_the_columns_beyond_a_line_keep_their_indicators():
    frame, y = questionnaire()
    encoder = TableEncoder(integer_levels=True).fit(frame, y)
    kept = {c.name: len(c.levels) for c in encoder.columns_ if c.levels}
    assert set(kept) == {"education"}  # the items' effects are lines: theirs are dropped
    assert sum(kept.values()) <= frame.shape[1]  # within the budget of the other columns
    classes = (y > np.median(y)).astype(int)  # the same with a class target
    encoder = TableEncoder(integer_levels=True).fit(frame, classes, classes=["lo", "hi"])
    assert {c.name for c in encoder.columns_ if c.levels} == {"education"}
    assert not TableEncoder(integer_levels=True).fit(frame).has_levels  # no target, none


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_values=st.integers(3, 8))
def test_nonlinear_share_is_the_variance_per_value_means_add_to_a_line(seed, n_values):
    # Independent computation: sklearn's line and pandas' group means, on observed rows.
    rng = np.random.default_rng(seed)
    values = rng.integers(0, n_values, 300).astype(float)
    y = np.sin(values) + 0.3 * values + rng.normal(size=300)
    values[rng.random(300) < 0.1] = np.nan
    levels = tuple(float(v) for v in range(n_values - 1))  # the last value shares "none"
    observed = ~np.isnan(values)
    v, t = values[observed], y[observed]
    line = LinearRegression().fit(v[:, None], t).predict(v[:, None])
    group = pd.Series(np.where(np.isin(v, levels), v, -1.0))
    means = pd.Series(t).groupby(group).transform("mean").to_numpy()
    total = ((t - t.mean()) ** 2).sum()
    expected = ((t - line) ** 2).sum() / total - ((t - means) ** 2).sum() / total
    expected -= (group.nunique() - 2) / v.size
    assert nonlinear_share(values, levels, y[:, None]) == pytest.approx(expected, abs=1e-10)


def test_the_budget_is_filled_greedily_by_share():
    rng = np.random.default_rng(0)
    n = 800
    strong, weak, line = (rng.integers(0, k, n).astype(float) for k in (8, 4, 5))
    y = (np.where(strong == 3, 4.0, 0.0) + np.where(weak == 1, 1.0, 0.0) + line
         + 0.5 * rng.normal(size=n))
    levels = {0: tuple(map(float, range(8))), 1: tuple(map(float, range(4))),
              2: tuple(map(float, range(5)))}
    values = {0: strong, 1: weak, 2: line}
    target = y[:, None]
    assert levels_within_budget(levels, values, 17, target) == levels  # all fit
    assert levels_within_budget(levels, values, 12, target) == {0: levels[0], 1: levels[1]}
    # The strongest does not fit in 6: the next one that does is kept; the line never.
    assert levels_within_budget(levels, values, 6, target) == {1: levels[1]}
    assert levels_within_budget(levels, values, 6, None) == {}


def test_an_array_gets_indicators_and_is_accepted_at_predict():
    frame, y = month_year_table(n=600)
    X = frame.to_numpy()
    model = NeuMissRegressor(**FAST, integer_levels=True).fit(X, y)
    assert model.encoder_.has_levels and model.n_features_in_ == 8
    assert model.encoder_.output_names()[:3] == ["0", "0=1", "0=2"]
    np.testing.assert_array_equal(model.predict(X), model.predict(frame.to_numpy()))


def test_auto_keeps_indicators_that_help_and_drops_the_others():
    frame, y = month_year_table()
    train, test = slice(0, 1500), slice(1500, None)
    fits = {levels: NeuMissRegressor(random_state=0, integer_levels=levels)
            .fit(frame[train], y[train]) for levels in (True, False, "auto")}
    assert fits["auto"].encoder_.has_levels
    assert fitted_info(fits["auto"])["integer_levels"] == 8  # what the benchmark records
    assert "integer_levels" not in fitted_info(fits[False])
    scores = {k: r2_score(y[test], m.predict(frame[test])) for k, m in fits.items()}
    assert scores[True] > scores[False] + 0.05
    # "auto" then fits exactly as integer_levels=True does (same split, same encoding).
    np.testing.assert_array_equal(fits["auto"].predict(frame), fits[True].predict(frame))
    # A grade whose effect is linear: its indicators are dropped, as if never made.
    rng = np.random.default_rng(1)
    grade = rng.integers(1, 11, 1500).astype(float)
    linear = pd.DataFrame({"grade": grade, "x": rng.normal(size=1500)})
    target = grade + linear["x"].to_numpy() + rng.normal(size=1500)
    auto = NeuMissRegressor(**FAST).fit(linear, target)
    assert not auto.encoder_.has_levels
    without = NeuMissRegressor(**FAST, integer_levels=False).fit(linear, target)
    np.testing.assert_array_equal(auto.predict(linear), without.predict(linear))


def test_a_stream_and_a_fit_without_validation_get_no_indicators():
    frame, y = month_year_table(n=600)
    chunks = [(frame[:300], y[:300]), (frame[300:], y[300:])]
    streamed = fit_stream(NeuMissRegressor(depth=1, mlp_depth=0, weight_sharing="shared",
                                           max_epochs=2, random_state=0), chunks)
    assert not streamed.encoder_.has_levels
    # Without validation rows "auto" cannot decide: no indicators, as with False.
    model = NeuMissRegressor(**FAST, validation_fraction=0).fit(frame, y)
    assert not model.encoder_.has_levels
    forced = NeuMissRegressor(**FAST, validation_fraction=0, integer_levels=True).fit(frame, y)
    assert forced.encoder_.has_levels


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_scorers_and_saved_models_agree_with_predict(tmp_path, task):
    frame, y = month_year_table(n=800)
    if task == "regression":
        model = NeuMissRegressor(**FAST, integer_levels=True).fit(frame, y)
        expected = model.predict(frame)
    else:
        model = NeuMissClassifier(**FAST, integer_levels=True).fit(frame, y > 0)
        expected = model.predict_proba(frame)[:, 1]
    column = "prediction" if task == "regression" else "proba_True"
    tolerance = {"rtol": 0, "atol": 1e-5 * getattr(model, "y_scale_", 1.0)}  # float32 graph
    path = tmp_path / "model.onnx"
    onnx_model = model.to_onnx(str(path))
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert '"levels": [1.0, 2.0' in meta["encoding"]
    unseen = frame.assign(year=9).iloc[:5]  # a year not seen at fit: no indicator
    for table in (frame, unseen):
        reference = (model.predict(table) if task == "regression"
                     else model.predict_proba(table)[:, 1])
        np.testing.assert_allclose(score_frame(table, str(path))[column], reference,
                                   **tolerance)
    csv = tmp_path / "in.csv"
    frame.to_csv(csv, index=False)
    assert SCORER.main([str(path), str(csv), "-o", str(tmp_path / "out.csv")]) == 0
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out.csv")[column], expected,
                               **tolerance)
    model.save(tmp_path / "model.neumiss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = neumiss.load(tmp_path / "model.neumiss")
    assert loaded.integer_levels is True
    assert loaded.encoder_.output_names() == model.encoder_.output_names()
    np.testing.assert_array_equal(
        loaded.predict(frame) if task == "regression" else loaded.predict_proba(frame)[:, 1],
        expected)
