"""Categorical columns of more categories than one-hot encoding takes: target statistics.

The statistics are checked against the empirical-Bayes formula written out here with
pandas, the cross-fitting by moving a row's own target, and the deployed scorers against
``predict``.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import TargetEncoder

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.scoring import score_file, score_frame
from neumiss.tables import MAX_CATEGORIES, TableEncoder

from .conftest import FAST
from .test_deploy_fixes import SCORER

N_CATEGORIES = MAX_CATEGORIES + 50


def zip_table(n=1500, seed=0, missing=0.1):
    """A table with a postcode of ``N_CATEGORIES`` categories (random effects on y), a
    numeric column, NaN / None in both; and y."""
    rng = np.random.default_rng(seed)
    code = rng.integers(0, N_CATEGORIES, n)
    effect = 2.0 * rng.normal(size=N_CATEGORIES)
    x = rng.normal(size=n)
    y = effect[code] + x + 0.3 * rng.normal(size=n)
    postcode = pd.Series([f"p{c:03d}" for c in code], dtype=object)
    postcode[rng.random(n) < missing] = None
    frame = pd.DataFrame({"postcode": postcode, "x": x})
    frame.loc[rng.random(n) < missing, "x"] = np.nan
    return frame, y


def shrunk_means(categories: pd.Series, y: np.ndarray) -> pd.Series:
    """Each category's mean of ``y`` shrunk towards the overall mean by empirical Bayes:
    weight ``n_c var(y) / (n_c var(y) + var_c(y))`` on the category's mean (``var_c``: the
    variance within the category), as scikit-learn's ``smooth="auto"`` documents it."""
    frame = pd.DataFrame({"c": categories.to_numpy(), "y": y})
    groups = frame.groupby("c")["y"]
    count, mean, within = groups.count(), groups.mean(), groups.var(ddof=0)
    weight = count * np.var(y) / (count * np.var(y) + within)
    return weight * mean + (1 - weight) * np.mean(y)


def test_categories_beyond_the_one_hot_cap_get_their_shrunk_target_mean():
    frame, y = zip_table()
    encoder = TableEncoder().fit(frame, y, random_state=0)
    assert encoder.output_names() == ["postcode:target", "x"]
    assert encoder.n_features_out_ == 2
    present = frame["postcode"].notna().to_numpy()
    expected = shrunk_means(frame["postcode"][present], y[present])
    out = encoder.transform(frame)
    np.testing.assert_allclose(out[present, 0], expected[frame["postcode"][present]].to_numpy(),
                               rtol=1e-10)
    assert np.isnan(out[~present, 0]).all()  # a missing category stays missing
    np.testing.assert_array_equal(out[:, 1], frame["x"].to_numpy())


def test_training_rows_get_values_computed_without_their_own_target():
    frame, y = zip_table()
    crossfitted = TableEncoder().fit_transform(frame, y, random_state=3)
    full = TableEncoder().fit(frame, y, random_state=3).transform(frame)
    present = frame["postcode"].notna().to_numpy()
    assert not np.allclose(crossfitted[present, 0], full[present, 0])
    row = int(np.flatnonzero(present)[0])
    moved = y.copy()
    moved[row] += 100.0
    again = TableEncoder().fit_transform(frame, moved, random_state=3)
    assert again[row, 0] == crossfitted[row, 0]  # its own target does not enter its value
    others = np.flatnonzero(present & (frame["postcode"] == frame["postcode"][row]).to_numpy())
    assert any(again[i, 0] != crossfitted[i, 0] for i in others if i != row)


def test_unseen_category_is_missing_with_a_warning_and_input_untouched():
    frame, y = zip_table()
    encoder = TableEncoder().fit(frame, y, random_state=0)
    new = pd.DataFrame({"postcode": ["p000", "nowhere"], "x": [0.0, 1.0]})
    before = new.copy()
    with pytest.warns(UserWarning, match=r"column 'postcode' has categories not seen.*nowhere"):
        out = encoder.transform(new)
    assert np.isfinite(out[0, 0]) and np.isnan(out[1, 0])
    pd.testing.assert_frame_equal(new, before)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_class_probabilities_match_scikit_learn(n_classes):
    frame, y = zip_table(seed=1)
    codes = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    labels = ["low", "mid", "high"][:n_classes]
    encoder = TableEncoder().fit(frame, codes, classes=labels, random_state=0)
    names = (["postcode:target"] if n_classes == 2
             else [f"postcode:target={c}" for c in labels])
    assert encoder.output_names() == names + ["x"]
    present = frame["postcode"].notna().to_numpy()
    text = frame["postcode"][present].to_numpy(dtype=object).reshape(-1, 1)
    reference = TargetEncoder(target_type="binary" if n_classes == 2 else "multiclass")
    expected = reference.fit(text, codes[present]).transform(text)
    np.testing.assert_allclose(encoder.transform(frame)[present, : len(names)], expected,
                               rtol=1e-10)


def test_a_class_rarer_than_the_folds_still_gives_every_column():
    frame, y = zip_table(n=400)
    codes = (y > np.median(y)).astype(int)
    codes[:2] = 2  # a third class of two rows: some folds train without it
    out = TableEncoder().fit_transform(frame, codes, classes=["a", "b", "c"], random_state=0)
    present = frame["postcode"].notna().to_numpy()
    assert out.shape == (400, 4)
    assert ((out[present, :3] >= 0) & (out[present, :3] <= 1)).all()  # probabilities
    assert np.isnan(out[~present, :3]).all()


def test_without_a_target_the_one_hot_cap_applies():
    frame, _ = zip_table()
    with pytest.warns(UserWarning, match="Fit with the target to encode it by target statistics"):
        encoder = TableEncoder().fit(frame)
    assert encoder.n_features_out_ == MAX_CATEGORIES + 1


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_classes=st.sampled_from([None, 2, 3]))
def test_state_round_trip_keeps_the_statistics(seed, n_classes):
    frame, y = zip_table(n=300, seed=seed)
    if n_classes is None:
        target, classes = y, None
    else:
        target, classes = np.arange(300) % n_classes, list("abc"[:n_classes])
    encoder = TableEncoder().fit(frame, target, classes=classes, random_state=seed)
    again = TableEncoder.from_state(encoder.get_state())
    assert again.output_names() == encoder.output_names()
    np.testing.assert_array_equal(again.transform(frame), encoder.transform(frame))


def test_the_regressor_uses_a_postcode_it_could_not_one_hot_encode():
    frame, y = zip_table(n=3000)
    train, test = slice(0, 2000), slice(2000, None)
    before = frame.copy()
    with_code = NeuMissRegressor(depth=0, random_state=0).fit(frame.iloc[train], y[train])
    without = NeuMissRegressor(depth=0, random_state=0).fit(frame[["x"]].iloc[train], y[train])
    pd.testing.assert_frame_equal(frame, before)
    assert with_code.encoder_.output_names() == ["postcode:target", "x"]
    gained = with_code.score(frame.iloc[test], y[test]) - without.score(frame[["x"]].iloc[test],
                                                                          y[test])
    assert gained > 0.3  # the postcode carries about 80% of y's variance


def test_scorers_and_saved_models_agree_with_predict(tmp_path):
    frame, y = zip_table(n=600)
    labels = np.where(y > np.median(y), "high", "low")
    model = NeuMissClassifier(**FAST).fit(frame, labels)
    assert model.encoder_.output_names() == ["postcode:target", "x"]
    expected = model.predict_proba(frame)
    path = tmp_path / "model.onnx"
    model.to_onnx(str(path))
    scored = score_frame(frame, str(path))
    np.testing.assert_allclose(scored[["proba_high", "proba_low"]].to_numpy(), expected,
                               atol=1e-5)
    csv = tmp_path / "in.csv"
    frame.to_csv(csv, index=False)
    assert SCORER.main([str(path), str(csv), "-o", str(tmp_path / "out.csv")]) == 0
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out.csv")[["proba_high", "proba_low"]],
                               expected, atol=1e-5)
    score_file(str(path), str(csv), str(tmp_path / "out2.csv"))
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out2.csv")[["proba_high", "proba_low"]],
                               expected, atol=1e-5)
    model.save(tmp_path / "model.neumiss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = neumiss.load(tmp_path / "model.neumiss")
    np.testing.assert_array_equal(loaded.predict_proba(frame), expected)
