"""Properties for any input, with hypothesis: ONNX and save/load parity, unit invariance,
predictions that follow the rows in any order, columns matched by name."""

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.estimators._base import ESTIMATE_MARGIN

from .conftest import FAST, PAPER, PROPERTY, gaussian_regression, linear_data, paper

D = 4


@pytest.fixture(scope="module")
def models():
    draw, *_ = gaussian_regression(D, 600, np.random.default_rng(3), missing_rate=0.3)
    X, y = draw(600)
    # the regressor with the spline term: its ramps clip the wide values of _rows
    regressor = NeuMissRegressor(depth=2, ensemble_size=2, max_epochs=4, spline=True,
                                 random_state=0).fit(X, y)
    classifier = NeuMissClassifier(depth=2, ensemble_size=2, max_epochs=4, random_state=0)
    classifier.fit(X, y > np.median(y))
    return regressor, classifier


def _rows(max_rows=30):
    """Rows of finite values in a wide range, each entry possibly missing (NaN)."""
    values = st.floats(-1e4, 1e4, allow_nan=False, width=32)
    return st.integers(1, max_rows).flatmap(
        lambda n: st.tuples(
            arrays(np.float64, (n, D), elements=values),
            arrays(np.bool_, (n, D)),
        )
    ).map(lambda pair: np.where(pair[1], np.nan, pair[0]))


def _session(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "model.onnx"
    model.to_onnx(path)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def sessions(models, tmp_path_factory):
    return [_session(model, tmp_path_factory) for model in models]


def _feeds(X):
    missing = np.isnan(X)
    return {"X": np.where(missing, 0.0, X).astype(np.float32), "M": missing.astype(np.float32)}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(X=_rows())
def test_onnx_matches_predict_for_any_rows(models, sessions, X):
    regressor, classifier = models
    y = sessions[0].run(["y"], _feeds(X))[0]
    expected = regressor.predict(X)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * regressor.y_scale_)
    label, proba = sessions[1].run(["label", "probabilities"], _feeds(X))
    np.testing.assert_allclose(proba, classifier.predict_proba(X), rtol=0, atol=1e-4)
    confident = np.abs(classifier.predict_proba(X)[:, 1] - 0.5) > 1e-4
    np.testing.assert_array_equal(label[confident], classifier.predict(X)[confident])


@pytest.fixture(scope="module")
def diverging(tmp_path_factory):
    """A regressor and a classifier whose blocks' estimates diverge (each member's
    ``W_mix`` scaled by its own factor, 1e3 or more, as unrolled iterations can for a
    pattern rare in training: the members' blocks then differ), the training rows, the
    models' ONNX sessions and their copies saved and loaded."""
    draw, *_ = gaussian_regression(D, 600, np.random.default_rng(4), missing_rate=0.3)
    X, y = draw(600)
    # no spline term: an ensemble of spline networks exports only with one shared block
    params = dict(depth=3, ensemble_size=2, max_epochs=3, spline=False, random_state=0)
    models = (NeuMissRegressor(**params).fit(X, y),
              NeuMissClassifier(**params).fit(X, y > np.median(y)))
    folder = tmp_path_factory.mktemp("diverging")
    reloaded = []
    for i, model in enumerate(models):
        blocks = [m for m in model.network_.modules() if isinstance(m, neumiss.NeuMissBlock)]
        for k, block in enumerate(blocks):
            block.W_mix.data.mul_(1e3 * (k + 1))
        model.save(folder / f"{i}.pt")
        reloaded.append(neumiss.load(folder / f"{i}.pt"))
    return models, X, [_session(m, tmp_path_factory) for m in models], reloaded


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(X=_rows())
def test_the_blocks_estimates_stay_in_the_training_range_for_any_rows(diverging, X):
    (regressor, classifier), X_train, sessions, reloaded = diverging
    low, high = np.nanmin(X_train, axis=0), np.nanmax(X_train, axis=0)
    # the training range widened by its width on each side, and float32 rounding
    margin = (ESTIMATE_MARGIN + 1e-5) * (high - low)
    missing = np.isnan(X)
    for model in (regressor, classifier):
        imputed = model.impute(X)
        assert np.all((imputed >= low - margin) & (imputed <= high + margin) | ~missing)
        np.testing.assert_array_equal(imputed[~missing], X[~missing])
    expected = regressor.predict(X)
    np.testing.assert_allclose(sessions[0].run(["y"], _feeds(X))[0], expected, rtol=1e-4,
                               atol=1e-4 * regressor.y_scale_)
    np.testing.assert_array_equal(reloaded[0].predict(X), expected)
    proba = classifier.predict_proba(X)
    np.testing.assert_allclose(sessions[1].run(["probabilities"], _feeds(X))[0], proba,
                               rtol=0, atol=1e-4)
    np.testing.assert_array_equal(reloaded[1].predict_proba(X), proba)


@pytest.fixture(scope="module")
def reloaded(models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    out = []
    for i, model in enumerate(models):
        model.save(folder / f"{i}.pt")
        out.append(neumiss.load(folder / f"{i}.pt"))
    return out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(X=_rows())
def test_save_load_predicts_identically_for_any_rows(models, reloaded, X):
    np.testing.assert_array_equal(reloaded[0].predict(X), models[0].predict(X))
    np.testing.assert_array_equal(reloaded[1].predict_proba(X), models[1].predict_proba(X))


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(
    scales=arrays(np.float64, (D,), elements=st.sampled_from([1e-3, 0.1, 1.0, 7.0, 1e3])),
    shift=st.floats(-100, 100),
)
def test_fit_is_invariant_to_feature_units(scales, shift):
    # Standardization inside the estimator: changing units (and origins) of the
    # features changes nothing but float rounding.
    draw, *_ = gaussian_regression(D, 300, np.random.default_rng(5), missing_rate=0.3)
    X, y = draw(300)
    kwargs = {**PAPER, "depth": 2, "max_epochs": 3, "random_state": 0}
    base = NeuMissRegressor(**kwargs).fit(X, y)
    moved = NeuMissRegressor(**kwargs).fit(X * scales + shift, y)
    np.testing.assert_allclose(
        moved.predict(X * scales + shift), base.predict(X), rtol=1e-3, atol=1e-3 * np.std(y)
    )


@PROPERTY
@given(order=st.permutations(list(range(12))))
def test_predictions_follow_the_rows_in_any_order(fitted, order):
    X, _ = linear_data(12, 3, seed=4)
    regressor, classifier = fitted
    np.testing.assert_allclose(regressor.predict(X[order]), regressor.predict(X)[order],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(classifier.decision_function(X[order]),
                               classifier.decision_function(X)[order], rtol=1e-9, atol=1e-9)


@PROPERTY
@given(rows=st.lists(st.integers(0, 11), min_size=1, max_size=12))
def test_a_rows_prediction_does_not_depend_on_the_rows_scored_with_it(fitted, rows):
    # Sums in float64: float32 matrix products would differ by about 1e-7 with the batch.
    X, _ = linear_data(12, 3, seed=4)
    regressor, classifier = fitted
    for model, method in ((regressor, "predict"), (classifier, "decision_function")):
        alone = np.concatenate([getattr(model, method)(X[[i]]) for i in rows])
        np.testing.assert_allclose(getattr(model, method)(X[rows]), alone, rtol=1e-9,
                                   atol=1e-9)


@pytest.fixture(scope="module")
def frame_model():
    X, y = linear_data(300, 4)
    frame = pd.DataFrame(X, columns=["w", "x", "y", "z"])
    return frame, paper(NeuMissRegressor, **FAST).fit(frame, y)


@PROPERTY
@given(columns=st.permutations(["w", "x", "y", "z"]))
def test_a_dataframe_with_reordered_columns_is_refused_then_reordered_by_name(
    frame_model, columns
):
    # Decision: as scikit-learn does, columns in another order are refused (a silent
    # positional mix-up is the danger); selecting them by name gives the same predictions.
    frame, model = frame_model
    shuffled = frame[columns]
    if columns == ["w", "x", "y", "z"]:
        np.testing.assert_array_equal(model.predict(shuffled), model.predict(frame))
        return
    with pytest.raises(ValueError, match="same order"):
        model.predict(shuffled)
    np.testing.assert_array_equal(
        model.predict(shuffled[list(model.feature_names_in_)]), model.predict(frame)
    )
