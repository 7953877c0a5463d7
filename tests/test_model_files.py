"""Model files: a damaged, crafted, truncated or foreign file is refused with a
``ValueError`` naming the file and the problem; numpy-scalar parameters round-trip."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sklearn.model_selection import GridSearchCV

import neumiss
from neumiss import NeuMissRegressor
from neumiss.estimators import FORMAT_VERSION, payload_digest

from .conftest import FAST, PROPERTY, linear_data, paper


def _write(payload, path, rehash=True):
    if rehash:
        payload["sha256"] = payload_digest(payload)
    torch.save(payload, path)
    return path


def _copy(payload):
    return {k: dict(v) if isinstance(v, dict) else v for k, v in payload.items()}


DAMAGES = {
    "unknown parameter": (lambda p: p["params"].update(colour="red"),
                          r"unknown parameters \['colour'\]"),
    "missing parameter": (lambda p: p["params"].pop("ensemble_size"),
                          r"lacks the parameters \['ensemble_size'\]"),
    "invalid parameter": (lambda p: p["params"].update(residual="no"), "residual must be"),
    "missing attributes": (lambda p: [p["attributes"].pop(k) for k in ("y_mean_", "encoder_")],
                           r"lacks the fitted attributes \['encoder_', 'y_mean_'\]"),
    "foreign attribute": (lambda p: p["attributes"].update(predict="x"),
                          "attributes that save.. never writes"),
    "wrong tensor shape": (lambda p: p["state_dict"].update({"block.W_mix": torch.zeros(2, 2)}),
                           r"wrong shape: block.W_mix \(2, 2\) instead of \(3, 3\)"),
    "missing tensor": (lambda p: p["state_dict"].pop("block.mu"), r"missing \['block.mu'\]"),
    "non-finite weights": (lambda p: p["state_dict"].update(
        {"block.mu": torch.full((3,), float("nan"))}), "non-finite weights"),
    "format_version as a string": (lambda p: p.update(format_version="2"),
                                   "format_version '2', not an integer"),
    "no class key": (lambda p: p.pop("class"), "no estimator class"),
    "unknown class": (lambda p: p.update({"class": "Pipeline"}), "unknown estimator class"),
    "scaling of the wrong length": (
        lambda p: p["attributes"]["preprocessor_"]["__standardizer__"].update(
            scale={"__ndarray__": [1.0], "dtype": "<f8"}), "preprocessor_.scale_"),
    "attributes not a table": (lambda p: p.update(attributes=[1, 2]), "no 'attributes' table"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_every_malformed_model_file_is_a_value_error_naming_file_and_problem(
    saved, tmp_path, damage
):
    path, good = saved
    change, message = DAMAGES[damage]
    payload = _copy(good)
    payload["attributes"] = {k: (dict(v) if isinstance(v, dict) else v)
                             for k, v in payload["attributes"].items()}
    if "preprocessor_" in payload["attributes"]:
        inner = dict(payload["attributes"]["preprocessor_"]["__standardizer__"])
        payload["attributes"]["preprocessor_"] = {"__standardizer__": inner}
    change(payload)
    for rehash in (True, False):  # a crafted file (digest recomputed), and a modified one
        bad = _write(dict(payload), tmp_path / f"bad-{rehash}.pt", rehash=rehash)
        with pytest.raises(ValueError) as error:
            neumiss.load(bad)
        text = str(error.value)
        assert str(bad) in text
        if rehash or "format_version" in damage:
            assert re.search(message, text), text
        else:
            assert re.search("integrity check|no estimator class", text), text


def test_older_and_newer_formats_are_refused_with_what_to_do(saved, tmp_path):
    _, good = saved
    for version, advice in ((FORMAT_VERSION - 1, "refit and save"), (FORMAT_VERSION + 1,
                                                                        "upgrade neumiss")):
        bad = _write({**_copy(good), "format_version": version}, tmp_path / "v.pt")
        with pytest.raises(ValueError, match=advice):
            neumiss.load(bad)


def test_flipped_bytes_inside_a_tensor_fail_the_integrity_check(saved, tmp_path):
    path, good = saved
    raw = bytearray(path.read_bytes())
    start = bytes(raw).find(good["state_dict"]["block.W_mix"].numpy().tobytes())
    assert start > 0
    raw[start + 6] ^= 0x40
    (tmp_path / "flipped.pt").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="flipped.pt: damaged model file: it failed its "
                                         "integrity check"):
        neumiss.load(tmp_path / "flipped.pt")


@PROPERTY
@given(position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused_or_changes_nothing(fitted, saved, tmp_path_factory,
                                                       position, bit):
    path, _ = saved
    raw = bytearray(path.read_bytes())
    raw[int(position * len(raw))] ^= 1 << bit
    damaged = tmp_path_factory.mktemp("flip") / "m.pt"
    damaged.write_bytes(bytes(raw))
    X, _ = linear_data(20, 3, seed=7)
    try:
        loaded = neumiss.load(damaged)
    except ValueError as error:
        assert str(damaged) in str(error)
    else:  # a byte torch never reads (zip padding, a record's comment): same model
        np.testing.assert_array_equal(loaded.predict(X), fitted[0].predict(X))


def test_truncated_and_foreign_files_are_refused(saved, tmp_path):
    path, _ = saved
    (tmp_path / "cut.pt").write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="not a neumiss model file"):
        neumiss.load(tmp_path / "cut.pt")
    with pytest.raises(FileNotFoundError):
        neumiss.load(tmp_path / "absent.pt")


def test_grid_search_best_estimator_with_numpy_scalars_round_trips(tmp_path):
    X, y = linear_data(150, 3)
    search = GridSearchCV(
        paper(NeuMissRegressor, **FAST),
        {"learning_rate": np.logspace(-3, -2, 2), "depth": np.array([0, 1])}, cv=2,
    ).fit(X, y)
    best = search.best_estimator_
    assert isinstance(best.learning_rate, np.floating)
    best.save(tmp_path / "best.pt")
    loaded = neumiss.load(tmp_path / "best.pt")
    assert type(loaded.learning_rate) is float and type(loaded.depth) is int
    assert loaded.get_params() == best.get_params()
    np.testing.assert_array_equal(loaded.predict(X), best.predict(X))


@pytest.mark.parametrize("mask_skip", [False, True])
def test_a_file_written_before_mask_skip_auto_takes_the_choice_from_its_parameter(
    tmp_path, mask_skip
):
    # Files of format 6 written before mask_skip="auto" have a boolean parameter and
    # no mask_skip_ attribute: the parameter says whether the heads have the term.
    X, y = linear_data(n=200, d=3, seed=0)
    model = NeuMissRegressor(depth=1, mask_skip=mask_skip, max_epochs=2, ensemble_size=2,
                             random_state=0).fit(X, y)
    saved, loaded = _loaded_without(model, "mask_skip_", tmp_path)
    assert saved is mask_skip and loaded.mask_skip_ is mask_skip
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_a_file_written_before_the_chebyshev_start_says_it_was_not_tried(tmp_path):
    X, y = linear_data(n=200, d=3, seed=0)
    model = NeuMissRegressor(depth=1, max_epochs=2, ensemble_size=2, random_state=0).fit(X, y)
    saved, loaded = _loaded_without(model, "chebyshev_result_", tmp_path)
    assert saved is None and loaded.chebyshev_result_ is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_a_file_written_before_depth_screening_says_no_depth_was_screened(tmp_path):
    X, y = linear_data(n=200, d=3, seed=0)
    model = NeuMissRegressor(max_epochs=2, ensemble_size=2, random_state=0).fit(X, y)
    assert list(model.depth_starts_) == [0, 16]
    saved, loaded = _loaded_without(model, "depth_starts_", tmp_path)
    assert saved == model.depth_starts_ and loaded.depth_starts_ is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("mlp_depth", [0, 2])
def test_a_file_written_before_the_blended_heads_has_the_head_it_names(tmp_path, mlp_depth):
    X, y = linear_data(n=200, d=3, seed=0)
    model = NeuMissRegressor(depth=1, mlp_depth=mlp_depth, max_epochs=2, ensemble_size=2,
                             random_state=0).fit(X, y)
    saved, loaded = _loaded_without(model, "mlp_weight_", tmp_path)
    assert saved == loaded.mlp_weight_ == (1.0 if mlp_depth else 0.0)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def _loaded_without(model, attribute, tmp_path):
    """``model`` saved, then its file written again without ``attribute`` (as a file of
    an older release): the attribute's saved value and the estimator loaded back."""
    model.save(tmp_path / "model.pt")
    payload = torch.load(tmp_path / "model.pt", weights_only=True)
    saved = payload["attributes"].pop(attribute)
    return saved, neumiss.load(_write(payload, tmp_path / "older.pt"))


def test_a_kept_chebyshev_start_survives_save_and_load(tmp_path):
    from neumiss.simulation import make_regression

    X, y, _ = make_regression(4000, 8, mechanism="MCAR", random_state=0)
    model = NeuMissRegressor(random_state=0, validation_fraction=0.1).fit(X, y)
    assert model.weight_sharing_ == "independent" and model.n_epochs_ == 0
    model.save(tmp_path / "model.pt")
    loaded = neumiss.load(tmp_path / "model.pt")
    assert loaded.chebyshev_result_ == model.chebyshev_result_
    assert loaded.weight_sharing_ == "independent" and loaded.history_ == model.history_
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_the_mlp_width_is_the_encoded_columns_at_most_64_and_older_files_keep_theirs(tmp_path):
    from pathlib import Path

    from neumiss.network import AUTO_MLP_WIDTH

    params = dict(depth=1, mlp_depth=2, max_epochs=1, ensemble_size=2, random_state=0)
    for d, width in [(3, 3), (70, AUTO_MLP_WIDTH)]:
        X, y = linear_data(n=200, d=d, seed=0)
        model = NeuMissRegressor(**params).fit(X, y)
        assert model.mlp_width_ == width == model.network_.members[0].head[0].out_features
        assert model.mlp_width_ == min(d, 64)
    assert NeuMissRegressor(**params, mlp_width=5).fit(X, y).mlp_width_ == 5
    model.save(tmp_path / "model.pt")  # the width survives save and load
    assert neumiss.load(tmp_path / "model.pt").mlp_width_ == AUTO_MLP_WIDTH
    # a model file written when None meant the encoded columns (the golden fixture)
    older = neumiss.load(Path(__file__).parents[1] / "export" / "fixtures" / "regressor"
                         / "estimator.pt")
    assert older.mlp_width is None and older.mlp_width_ == older.encoder_.n_features_out_
