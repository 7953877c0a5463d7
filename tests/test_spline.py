"""The heads' spline term (neumiss.network._spline): quantile knots, ramps computed as
written, the additive spline they span, the estimators' choice (``spline="auto"``), and
what it keeps of the package's promises (ONNX, save/load, pattern models, streaming)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.estimators import fit_stream
from neumiss.network._spline import (
    SPLINE_BINS,
    SPLINE_MAX_RAMPS,
    PiecewiseLinearEncoding,
    quantile_ramps,
    spline_bins,
)
from neumiss.scoring import load_model


def test_the_knots_are_each_columns_distinct_quantiles_of_its_observed_values():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(size=500), rng.integers(0, 2, 500),  # binary: no ramp
                         rng.integers(0, 3, 500), np.zeros(500)])  # 3 values: 2 ramps
    mask = rng.random(x.shape) < 0.3
    x[mask] = 1e6  # never read: missing
    feature, left, width = quantile_ramps(x, mask, 4)
    observed = x[~mask[:, 0], 0]
    knots = np.quantile(observed, [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(feature, [0, 0, 0, 0, 2, 2])
    np.testing.assert_allclose(left[:4], knots[:-1])
    np.testing.assert_allclose(width[:4], np.diff(knots))
    np.testing.assert_allclose(left[4:], [0.0, 1.0])
    np.testing.assert_allclose(width[4:], [1.0, 1.0])
    assert (width > 0).all()


def test_a_table_without_ramps_gets_none_and_wide_tables_fewer_bins():
    feature, left, width = quantile_ramps(np.ones((10, 3)), np.zeros((10, 3)), 8)
    assert feature.shape == left.shape == width.shape == (0,)
    assert spline_bins(4) == SPLINE_BINS
    assert spline_bins(100) * 100 <= SPLINE_MAX_RAMPS < (spline_bins(100) + 1) * 100
    assert spline_bins(SPLINE_MAX_RAMPS) == 1  # no spline beyond


def test_the_ramps_are_clipped_bin_positions_and_with_the_column_span_its_linear_splines():
    rng = np.random.default_rng(1)
    h = rng.uniform(-3, 3, size=(400, 2))
    feature, left, width = quantile_ramps(h, np.zeros_like(h), 6)
    encoding = PiecewiseLinearEncoding(len(feature))
    encoding.set_ramps(feature, left, width)
    ramps = encoding(torch.as_tensor(h, dtype=torch.float64).float()).double().numpy()
    expected = np.clip((h[:, feature] - left) / width, 0.0, 1.0)  # as written, by numpy
    np.testing.assert_allclose(ramps, expected, atol=1e-5)
    # a continuous function linear between column 0's knots is exactly representable
    knots = np.r_[left[feature == 0], left[feature == 0][-1] + width[feature == 0][-1]]
    values = rng.normal(size=knots.size)
    target = np.interp(h[:, 0], knots, values)
    design = np.hstack([h, ramps, np.ones((400, 1))])
    solution = np.linalg.lstsq(design, target, rcond=None)[0]
    np.testing.assert_allclose(design @ solution, target, atol=1e-4)


def test_the_centres_are_the_ramps_means_over_the_rows_their_quantile_bins_cut():
    rng = np.random.default_rng(3)
    h = np.column_stack([rng.uniform(size=5000), rng.normal(size=5000),
                         rng.exponential(size=5000)])
    feature, left, width = quantile_ramps(h, np.zeros_like(h), 8)
    encoding = PiecewiseLinearEncoding(len(feature))
    encoding.set_ramps(feature, left, width)
    means = encoding(torch.as_tensor(h, dtype=torch.float32)).mean(dim=0)
    # values spread evenly within their bins (uniform): the means themselves
    torch.testing.assert_close(encoding.centres()[feature == 0], means[feature == 0],
                               rtol=0, atol=6e-3)
    # otherwise between the shares of rows above the bin and above its left knot: within
    # half a bin's share (1 / 16) of the centre
    assert (encoding.centres() - means).abs().max() <= 0.5 / 8 + 2e-3
    # written out: the j-th of a column's B ramps is centred on 1 - (j + 0.5) / B
    encoding = PiecewiseLinearEncoding(5)
    encoding.set_ramps([0, 0, 1, 1, 1], [0.0] * 5, [1.0] * 5)
    torch.testing.assert_close(encoding.centres(),
                               torch.tensor([0.75, 0.25, 5 / 6, 0.5, 1 / 6]))


def test_set_ramps_refuses_another_number_of_ramps():
    with pytest.raises(ValueError, match="feature has shape"):
        PiecewiseLinearEncoding(3).set_ramps([0, 1], [0.0, 1.0], [1.0, 1.0])


def _bending(n, seed, bend=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X[:, 1] + (np.abs(2 * X[:, 0]) if bend else X[:, 0]) + 0.2 * rng.normal(size=n)
    X[rng.random(X.shape) < 0.15] = np.nan
    return X, y


def test_auto_adds_the_spline_at_depth_0_where_it_fits_a_bend_and_costs_a_line_little():
    # depth 0 alone (no deeper block screened in): "auto" adds the term unasked
    X, y = _bending(1500, 0)
    bent = NeuMissRegressor(random_state=0, ensemble_size=2, mlp_depth=0).fit(X, y)
    assert bent.best_depth_ == 0
    assert bent.spline_ and bent.spline_ramps_ == 3 * SPLINE_BINS
    plain = NeuMissRegressor(random_state=0, ensemble_size=2, mlp_depth=0, spline=False)
    X_test, y_test = _bending(1000, 1)
    assert bent.score(X_test, y_test) > plain.fit(X, y).score(X_test, y_test) + 0.05
    X, y = _bending(1500, 0, bend=False)
    X_test, y_test = _bending(1000, 1, bend=False)
    linear = NeuMissRegressor(random_state=0, ensemble_size=2, mlp_depth=0, depth=0).fit(X, y)
    assert linear.spline_ and linear.network_.members[0].spline is not None
    # on a target linear in the features the ramps cost little (measured: R² -0.001)
    assert linear.score(X_test, y_test) > plain.fit(X, y).score(X_test, y_test) - 0.005


@pytest.mark.parametrize("estimator", [NeuMissRegressor, NeuMissClassifier])
def test_a_spline_model_keeps_onnx_and_save_load_parity(estimator, tmp_path):
    X, y = _bending(600, 2)
    if estimator is NeuMissClassifier:
        y = (y > np.median(y)).astype(int)
    model = estimator(spline=True, random_state=0, ensemble_size=3, max_epochs=3).fit(X, y)
    assert model.spline_
    X_test, _ = _bending(300, 3)
    expected = (model.predict(X_test) if estimator is NeuMissRegressor
                else model.predict_proba(X_test))
    graph = model.to_onnx()
    assert {"Gather", "Clip"} <= {node.op_type for node in graph.graph.node}
    outputs = load_model(graph.SerializeToString()).predict(X_test.astype(np.float32))
    scored = outputs["y"] if estimator is NeuMissRegressor else outputs["probabilities"]
    np.testing.assert_allclose(scored, expected, atol=1e-5, rtol=1e-5)
    model.save(tmp_path / "model.pt")
    loaded = neumiss.load(tmp_path / "model.pt")
    assert loaded.spline_ and loaded.spline_ramps_ == model.spline_ramps_
    again = (loaded.predict(X_test) if estimator is NeuMissRegressor
             else loaded.predict_proba(X_test))
    np.testing.assert_array_equal(again, expected)


def test_pattern_models_and_streams_say_what_the_spline_prevents():
    X, y = _bending(400, 4)
    model = NeuMissRegressor(spline=True, mlp_depth=0, ensemble_size=1, max_epochs=2,
                             random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="spline term .* fit with spline=False"):
        model.pattern_model()
    with pytest.raises(ValueError, match="spline=True needs the training rows in memory"):
        fit_stream(NeuMissRegressor(spline=True, depth=0, mlp_depth=0, weight_sharing="shared",
                                    max_epochs=1), [(X[:200], y[:200]), (X[200:], y[200:])])
