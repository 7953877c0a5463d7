"""Pickle, joblib and save/load round trips give identical predictions."""

import pickle

import joblib
import numpy as np
import pytest
import torch

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor

from .conftest import paper


@pytest.fixture(scope="module")
def fitted_models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4))  # enough rows per parameter for weight_sharing='auto' to untie
    y = X @ np.array([1.0, -2.0, 0.5, 0.0])
    labels = np.where(y > 0, "yes", "no")
    X[rng.random(X.shape) < 0.3] = np.nan
    reg = paper(NeuMissRegressor, depth=2, mlp_depth=1, max_epochs=5, random_state=0).fit(X, y)
    clf = paper(NeuMissClassifier, depth="auto", max_epochs=3, random_state=0).fit(X, labels)
    untied = paper(NeuMissRegressor, depth=[2], weight_sharing="auto", max_epochs=5,
                   random_state=8)
    untied.fit(X, y)
    assert untied.weight_sharing_ == "independent"  # the untied network is the one to rebuild
    return X, reg, clf, untied


def predictions(model, X):
    if isinstance(model, NeuMissClassifier):
        return np.column_stack([model.predict_proba(X), model.predict(X) == "yes"])
    return model.predict(X)


@pytest.mark.slow
@pytest.mark.parametrize("which", [1, 2, 3])
def test_pickle_round_trip(fitted_models, which):
    X, *models = fitted_models
    model = models[which - 1]
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(predictions(clone, X), predictions(model, X))


def test_a_pickle_from_an_older_version_is_refused_with_a_clear_error(fitted_models):
    # A pickle of a version before mlp_depth_ existed: its state lacks the attribute.
    model = fitted_models[1]
    state = model.__getstate__()
    del state["mlp_depth_"]
    old = object.__new__(type(model))
    with pytest.raises(ValueError, match="lacks mlp_depth_.*older neumiss.*refit it"):
        old.__setstate__(state)
    assert "mlp_depth_" in model.__dict__  # the fitted model itself is untouched


@pytest.mark.slow
@pytest.mark.parametrize("which", [1, 2, 3])
def test_joblib_and_save_load_round_trip(fitted_models, which, tmp_path):
    X, *models = fitted_models
    model = models[which - 1]
    joblib.dump(model, tmp_path / "m.joblib")
    np.testing.assert_array_equal(
        predictions(joblib.load(tmp_path / "m.joblib"), X), predictions(model, X)
    )
    model.save(tmp_path / "m.pt")
    loaded = neumiss.load(tmp_path / "m.pt")
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    assert loaded.history_ == model.history_
    assert loaded.best_depth_ == model.best_depth_
    np.testing.assert_array_equal(predictions(loaded, X), predictions(model, X))


def _numbers(value) -> list[float]:
    """Every number inside nested dicts, lists, tuples and tensors of a saved payload."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, torch.Tensor):
        return value.double().flatten().tolist()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("which", [1, 2, 3])
def test_saved_file_holds_no_training_data_and_loads_weights_only(fitted_models, which, tmp_path):
    X, *models = fitted_models
    model = models[which - 1]
    model.save(tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)  # refuses arbitrary objects
    sizes = [v.numel() for v in payload["state_dict"].values()]
    assert sum(sizes) == sum(p.numel() for p in model.network_.parameters())
    # No training value, nor its float32 rounding, appears anywhere in the file.
    saved = set(_numbers(payload))
    training = X[~np.isnan(X)]
    assert saved.isdisjoint(training.tolist())
    assert saved.isdisjoint(training.astype(np.float32).astype(float).tolist())
    # And the file does not grow with the data: far below the bytes of X.
    assert (tmp_path / "m.pt").stat().st_size < X.nbytes / 2


def test_load_rejects_foreign_files(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ValueError, match="not a neumiss model file"):
        neumiss.load(tmp_path / "notes.txt")
    torch.save({"weight_sharing": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a neumiss model file"):
        neumiss.load(tmp_path / "other.pt")


def test_save_requires_fitted_model(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        NeuMissRegressor().save(tmp_path / "m.pt")
