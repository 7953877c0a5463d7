"""The exact linear model that a NeuMiss network with a linear head applies to each
missingness pattern (:meth:`BaseNeuMiss.pattern_model`).

With the mask fixed, the NeuMiss block (Neumann iterations, ``⊙ (1 - M)``) and a linear
head are linear in the standardized observed values, and standardizing is affine: the
estimator's outputs are an affine function of the observed values. The model is read off
the fitted network through its forward pass only (the output at the columns' means and
one step along each observed column), so that it holds for any network the estimator
holds (an ensemble averaging its members: the mean of their models) without depending on
how the network is built. A few further points check that the map is affine indeed.
The model holds within the range of the training values, where the inputs are not clipped
(:class:`~neumiss.tables.Standardizer`): a value beyond it is scored as the value at its
edge; and where the block's estimates of the missing values stay within their bounds
(:meth:`~neumiss.network.NeuMissBlock.set_range`), as they do near the means.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

#: Points, besides those that give the model, at which the model is checked against the
#: network (random, seeded: the check is repeatable).
CHECK_POINTS = 4

#: Largest gap between the network and the model at the check points, in the network's
#: own (standardized) output units, relative to ``1 + max |output|``; float32 rounding of
#: the standardized inputs stays far below it.
TOLERANCE = 1e-4


def pattern_model(estimator, missing=None) -> Bunch:
    """The linear model ``estimator`` applies to rows whose missing features are ``missing``.

    See :meth:`neumiss.estimators._base.BaseNeuMiss.pattern_model` (the public entry).
    """
    check_is_fitted(estimator, "network_")
    _check_linear_head(estimator)
    missing = _missing_features(estimator, missing)
    encoded_missing = missing[estimator.encoder_.input_index()]
    observed = np.flatnonzero(~encoded_missing)
    names = np.asarray(estimator.encoder_.output_names(), dtype=object)
    preprocessor = estimator.preprocessor_
    compressed = observed[preprocessor.inverse_bound_[observed] != 0]
    if compressed.size:
        raise ValueError(
            "no linear model: the heavy tails of observed column(s) "
            f"{', '.join(map(str, names[compressed]))} are compressed (compress_tails=True), "
            "which is nonlinear in their values; fit with compress_tails=False"
        )
    base = np.where(encoded_missing, np.nan, preprocessor.mean_)
    # A step the network resolves well (up to a column's deviation) that keeps every point
    # inside the training range, where inputs are not clipped (the model holds there; a
    # value beyond it is scored as the value at its edge).
    room = np.minimum(preprocessor.upper_[observed], -preprocessor.lower_[observed])
    scale = np.where(preprocessor.scale_[observed] > 0, preprocessor.scale_[observed], 1.0)
    steps = np.where(room > 0, scale * np.minimum(1.0, room / 2), scale)
    k = observed.size
    rows = np.tile(base, (1 + k + CHECK_POINTS, 1))
    rows[1 + np.arange(k), observed] += steps
    shifts = np.random.default_rng(0).uniform(-1.0, 1.0, (CHECK_POINTS, k)) * steps
    rows[1 + k :, observed] += shifts
    raw = estimator._apply_encoded(rows)
    _check_affine(raw, k, shifts / steps)
    out = estimator._linear_outputs(raw)
    coef = ((out[1 : 1 + k] - out[0]) / steps[:, None]).T
    intercept = out[0] - coef @ base[observed]
    if coef.shape[0] == 1:
        coef, intercept = coef[0], float(intercept[0])
    return Bunch(intercept=intercept, coef=coef, feature_names=names[observed],
                 missing=missing)


def _check_linear_head(estimator) -> None:
    """Refuse the networks that are not affine in the observed values."""
    if estimator.mlp_depth_ != 0:
        raise ValueError(
            f"no linear model: the network has an MLP head ({estimator.mlp_depth_} hidden "
            "layer(s)), so its predictions are nonlinear in the observed values; fit with "
            "mlp_depth=0 (the linear head) for per-pattern linear models"
        )
    if getattr(estimator, "spline_", False):
        raise ValueError(
            f"no linear model: the network has a spline term ({estimator.spline_ramps_} "
            "ramps of the features), so its predictions are nonlinear in the observed "
            "values; fit with spline=False for per-pattern linear models"
        )
    if estimator._get_loss().combine != "mean" and estimator.ensemble_size > 1:
        raise ValueError(
            f"no linear model: the classifier is an ensemble of {estimator.ensemble_size} "
            "networks that averages their probabilities, so its logits are nonlinear in the "
            "observed values; fit with ensemble_size=1 for per-pattern linear models"
        )


def _missing_features(estimator, missing) -> np.ndarray:
    """``missing`` as a boolean array of shape (n_features_in_,), True = missing."""
    n_features = estimator.n_features_in_
    if missing is None:
        return np.zeros(n_features, dtype=bool)
    values = np.asarray(missing)
    if values.dtype == bool:
        if values.shape != (n_features,):
            raise ValueError(
                f"a boolean `missing` needs one value per feature ({n_features}), got shape "
                f"{values.shape}"
            )
        return values.copy()
    names = [str(n) for n in getattr(estimator, "feature_names_in_", [])]
    out = np.zeros(n_features, dtype=bool)
    # items as given: numpy would turn a mixed list's indices into strings
    items = list(missing) if isinstance(missing, (list, tuple)) else np.atleast_1d(values).tolist()
    for item in items:
        if isinstance(item, str) and item in names:
            out[names.index(item)] = True
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and (
            0 <= item < n_features
        ):
            out[item] = True
        else:
            known = f"the feature names {names}" if names else f"indices 0 to {n_features - 1}"
            raise ValueError(
                f"`missing` holds {item!r}, which is not a feature of the model ({known}); "
                "give feature names or indices, or one boolean per feature"
            )
    return out


def _check_affine(raw: np.ndarray, k: int, shifts: np.ndarray) -> None:
    """Check that the outputs ``raw`` at the check points (its last rows; ``shifts``: their
    standardized offsets from the base row) are those of the affine map through the base
    row (the first) and the step rows (the next ``k``)."""
    slopes = raw[1 : 1 + k] - raw[0]
    gap = raw[1 + k :] - raw[0] - shifts @ slopes
    if np.abs(gap).max(initial=0.0) > TOLERANCE * (1.0 + np.abs(raw).max()):
        raise ValueError(
            "no linear model: the network's outputs are not affine in the observed values "
            f"for this pattern (gap {np.abs(gap).max():.3g} at the check points)"
        )
