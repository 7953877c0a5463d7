"""Mixed-type tables: encoding categorical and boolean columns, and the estimators on them."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.tables import (
    MAX_CATEGORIES,
    MAX_ONE_HOT,
    OTHER,
    ROWS_PER_CATEGORY,
    TableEncoder,
    one_hot_limit,
)

from .conftest import FAST, linear_data, paper


def mixed_table(n=400, seed=0):
    """Numeric, categorical (with NaN), string, boolean columns; y depends on the category."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n)
    effect = {"red": 2.0, "green": 0.0, "blue": -2.0}
    x = rng.normal(size=n)
    flag = rng.random(n) < 0.5
    y = x + np.vectorize(effect.get)(colour) + 0.5 * flag + 0.1 * rng.normal(size=n)
    frame = pd.DataFrame({
        "x": x,
        "colour": pd.Categorical(colour, categories=["red", "green", "blue"]),
        "size": pd.array(rng.choice(["S", "M", "L"], size=n), dtype="string"),
        "flag": pd.array(flag, dtype="boolean"),
    })
    frame.loc[rng.random(n) < 0.2, "x"] = np.nan
    frame.loc[rng.random(n) < 0.2, "colour"] = np.nan
    frame.loc[rng.random(n) < 0.1, "size"] = pd.NA
    frame.loc[rng.random(n) < 0.1, "flag"] = pd.NA
    return frame, y


def test_encoder_one_hot_with_missing_groups():
    frame = pd.DataFrame({
        "c": pd.Categorical(["a", None, "b", "a"], categories=["b", "a", "unused"]),
        "t": ["u", "v", None, "u"],
        "b": [True, None, False, True],
        "n": ["1.5", "2", None, "4"],
    })
    before = frame.copy()
    encoder = TableEncoder().fit(frame)
    kinds = [c.kind for c in encoder.columns_]
    assert kinds == ["categorical", "categorical", "boolean", "numeric"]
    # A categorical dtype keeps its order; unused categories get no column.
    assert encoder.output_names() == ["c=b", "c=a", "t=u", "t=v", "b", "n"]
    nan = np.nan
    expected = np.array([
        [0, 1, 1, 0, 1, 1.5],
        [nan, nan, 0, 1, nan, 2],
        [1, 0, nan, nan, 0, nan],
        [0, 1, 1, 0, 1, 4],
    ])
    np.testing.assert_array_equal(encoder.transform(frame), expected)
    pd.testing.assert_frame_equal(frame, before)  # never modified
    np.testing.assert_array_equal(encoder.input_index(), [0, 0, 1, 1, 2, 3])


def test_unseen_category_is_missing_with_a_warning():
    encoder = TableEncoder().fit(pd.DataFrame({"t": ["u", "v", "u"]}))
    with pytest.warns(UserWarning, match=r"column 't' has categories not seen at fit.*\['w'\]"):
        out = encoder.transform(pd.DataFrame({"t": ["w", "v"]}))
    np.testing.assert_array_equal(out, [[np.nan, np.nan], [0.0, 1.0]])


def test_a_handful_of_unseen_categories_is_missing_without_a_warning():
    """Unseen cells up to UNSEEN_WARNING_SHARE of a column's observed cells (a rare level
    in a test fold) are missing silently; one more cell warns."""
    from neumiss.tables import UNSEEN_WARNING_SHARE

    encoder = TableEncoder().fit(pd.DataFrame({"t": ["u", "v"] * 10}))
    n_rows = 200
    allowed = int(UNSEEN_WARNING_SHARE * n_rows)
    cells = pd.DataFrame({"t": [f"new{i}" for i in range(allowed)] + ["u"] * (n_rows - allowed)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = encoder.transform(cells)
    assert np.isnan(out[:allowed]).all() and not np.isnan(out[allowed:]).any()
    cells.loc[allowed, "t"] = "one more"
    with pytest.warns(UserWarning, match=r"column 't' has categories not seen at fit"):
        encoder.transform(cells)


def test_a_category_with_spaces_around_it_is_the_category_stripped():
    encoder = TableEncoder().fit(pd.DataFrame({"t": ["Nice", " z", "Nice", "a", "a "]}))
    # spelled as a level: that level; else equal to one once both are stripped
    cells = pd.DataFrame({"t": ["Nice ", "  Nice", " z", "z ", "a ", "a", " a "]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = encoder.transform(cells)
    categories = ["Nice", " z", "a", "a "]
    assert [c.categories for c in encoder.columns_] == [tuple(sorted(categories))]
    chosen = [encoder.columns_[0].categories[i] for i in out.argmax(axis=1)]
    assert chosen == ["Nice", "Nice", " z", " z", "a ", "a", "a"]


def test_warnings_at_fit_and_predict_point_at_the_users_call():
    frame = pd.DataFrame({"t": ["u", "v"] * 30, "x": np.arange(60.0), "gone": np.nan})
    y = np.arange(60.0)
    with pytest.warns(UserWarning, match="missing in every training row") as fitted:
        model = NeuMissRegressor(**FAST).fit(frame, y)
    with pytest.warns(UserWarning, match="not seen at fit") as predicted:
        model.predict(frame.assign(t="w"))
    for record in (*fitted, *predicted):
        assert record.filename == __file__, (record.message, record.filename)


def test_many_categories_are_capped_with_a_warning_naming_the_column():
    codes = [f"z{i % 1000:03d}" for i in range(3000)] + ["z000"] * 50
    frame = pd.DataFrame({"zip": codes})
    with pytest.warns(UserWarning, match=r"column 'zip' has 1,000 categories.*encode it yourself"):
        encoder = TableEncoder().fit(frame)
    assert encoder.n_features_out_ == 3050 // ROWS_PER_CATEGORY  # one column per 20 rows
    assert encoder.output_names()[0] == "zip=z000"  # the most frequent is kept
    assert encoder.output_names()[-1] == f"zip={OTHER}"
    out = encoder.transform(frame)
    assert np.all(out.sum(axis=1) == 1)  # every row in exactly one column, rare ones in <other>


@pytest.mark.parametrize(("n_categories", "rows_each", "one_hot"), [
    (150, ROWS_PER_CATEGORY, True),  # enough rows: each category its own column
    (150, ROWS_PER_CATEGORY - 1, False),  # too few: target statistics
    (MAX_CATEGORIES, 1, True),  # up to MAX_CATEGORIES whatever the rows
])
def test_one_hot_beyond_the_cap_where_rows_allow(n_categories, rows_each, one_hot):
    codes = np.repeat([f"c{i:03d}" for i in range(n_categories)], rows_each).astype(object)
    codes = np.concatenate([codes, [None] * 500])  # missing cells count for no category
    frame = pd.DataFrame({"country": codes, "year": np.arange(codes.size, dtype=float)})
    observed = int(frame["country"].notna().sum())
    y = np.arange(codes.size, dtype=float)
    encoder = TableEncoder().fit(frame, y, random_state=0)
    names = encoder.output_names()
    assert (len(names) == n_categories + 1) == one_hot, names[:3]
    assert ("country:target" in names) == (not one_hot)
    assert one_hot == (n_categories <= one_hot_limit(observed))


def test_one_hot_limit_is_capped():
    assert one_hot_limit(0) == MAX_CATEGORIES
    assert one_hot_limit(10**9) == MAX_ONE_HOT


def test_encoder_state_round_trip():
    frame, _ = mixed_table(50)
    encoder = TableEncoder().fit(frame)
    again = TableEncoder.from_state(encoder.get_state())
    np.testing.assert_array_equal(again.transform(frame), encoder.transform(frame))


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(range(4)), seed=st.integers(0, 10_000))
def test_encoding_follows_the_column_order(order, seed):
    frame, _ = mixed_table(60, seed)
    encoder = TableEncoder().fit(frame)
    permuted = TableEncoder().fit(frame.iloc[:, list(order)])
    blocks = np.split(encoder.transform(frame), np.cumsum([c.width for c in encoder.columns_])[:-1],
                      axis=1)
    np.testing.assert_array_equal(
        permuted.transform(frame.iloc[:, list(order)]), np.hstack([blocks[i] for i in order])
    )


@pytest.mark.slow  # two fits with the defaults (five networks, the searches)
def test_regressor_learns_from_categorical_columns():
    frame, y = mixed_table(1500)
    train, test = slice(0, 1200), slice(1200, None)
    model = NeuMissRegressor(random_state=0).fit(frame[train], y[train])
    numeric_only = NeuMissRegressor(random_state=0).fit(frame[["x"]][train], y[train])
    with_categories = model.score(frame[test], y[test])
    assert with_categories > 0.75  # colour is missing in 20% of rows: about 0.8 at best
    assert with_categories > numeric_only.score(frame[["x"]][test], y[test]) + 0.3
    assert model.encoder_.n_features_out_ == 1 + 3 + 3 + 1
    assert model.network_.block.n_features == 8


def test_missing_and_unseen_categories_predict_as_missing():
    frame, y = mixed_table(300)
    model = paper(NeuMissRegressor, max_epochs=5, random_state=0).fit(frame, y)
    rows = frame.iloc[:5].copy()
    rows["size"] = rows["size"].astype(object)
    unseen = rows.copy()
    unseen["size"] = "XXL"
    missing = rows.copy()
    missing["size"] = None
    with pytest.warns(UserWarning, match="column 'size' has categories not seen at fit"):
        predicted_unseen = model.predict(unseen)
    np.testing.assert_array_equal(predicted_unseen, model.predict(missing))


@pytest.mark.slow
def test_classifier_save_load_and_pickle_with_categories(tmp_path):
    import pickle

    frame, y = mixed_table(300)
    labels = np.where(y > 0, "up", "down")
    model = paper(NeuMissClassifier, max_epochs=5, random_state=0).fit(frame, labels)
    model.save(tmp_path / "model.pt")
    loaded = neumiss.load(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.predict_proba(frame), model.predict_proba(frame))
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict_proba(frame), model.predict_proba(frame))


def test_impute_returns_the_encoded_columns():
    frame, y = mixed_table(200)
    model = paper(NeuMissRegressor, max_epochs=3, random_state=0).fit(frame, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imputed = model.impute(frame)
    encoded = model.encoder_.transform(frame)
    assert imputed.shape == encoded.shape == (200, 8)
    observed = ~np.isnan(encoded)
    np.testing.assert_array_equal(imputed[observed], encoded[observed])
    assert np.isfinite(imputed).all()


@pytest.mark.parametrize(
    "column, kind",
    [(pd.date_range("2020-01-01", periods=60), "dates"),
     (pd.to_timedelta(np.arange(60), "D"), "durations|time"),
     (np.arange(60) * (1 + 1j), "complex")],
)
def test_date_duration_and_complex_columns_are_refused_by_name(column, kind):
    X, y = linear_data(60, 2)
    frame = pd.DataFrame(X, columns=["a", "b"])
    frame["odd"] = column
    with pytest.raises(ValueError, match=rf"'odd'.*({kind})"):
        paper(NeuMissRegressor, **FAST).fit(frame, y)


@pytest.mark.parametrize("column, values, shown", [
    ("n", ["1.5", "x", None], r"holds 'x': expected a number"),
    ("b", [True, "maybe", None], r"holds 'maybe': expected True, False, 0, 1"),
])
def test_a_cell_of_the_wrong_kind_at_predict_is_named_as_given(column, values, shown):
    table = pd.DataFrame({"n": [0.5, 1.0, np.nan, 2.0] * 10,
                          "b": [True, False, None, True] * 10})
    encoder = TableEncoder().fit(table)
    bad = pd.DataFrame({"n": [0.5, 1.0, 2.0], "b": [True, False, True]}).astype(object)
    bad[column] = values
    with pytest.raises(ValueError, match=rf"column '{column}' .*{shown}"):
        encoder.transform(bad)
    bad[column] = [0, 1, None] if column == "b" else ["1.5", "2", None]  # these read
    assert encoder.transform(bad).shape == (3, 2)
