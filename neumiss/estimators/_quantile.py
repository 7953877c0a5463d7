"""The quantile regressor, :class:`NeuMissQuantileRegressor`: the regressor's network with
one output per quantile level, trained by the pinball loss."""

from __future__ import annotations

import numpy as np

from ..checks import Real, SequenceOf, check_params
from ..network import PinballLoss
from ..tables import check_outputs_finite
from ._base import DEFAULTS, parameters_of
from ._regressor import NeuMissRegressor


def _quantile_levels(quantiles) -> np.ndarray:
    """``quantiles`` as an increasing float64 array holding 0.5; ValueError otherwise."""
    levels = np.asarray(quantiles, dtype=np.float64)
    if np.any(np.diff(levels) <= 0) or 0.5 not in levels:
        raise ValueError(
            "NeuMissQuantileRegressor: quantiles must be increasing and contain 0.5 (the "
            f"median, which predict returns), got {list(quantiles)!r}"
        )
    return levels


class NeuMissQuantileRegressor(NeuMissRegressor):
    """NeuMiss network with one output per quantile of ``y`` given ``(X_obs, M)``.

    The same network, parameters and defaults as :class:`NeuMissRegressor`,
    with ``len(quantiles)`` outputs trained together by the pinball loss
    (averaged over the quantiles): one network learns every level, so the
    block's pattern-wise conditional expectations are shared. It is the
    quantile head of conformalized quantile regression
    (:class:`neumiss.intervals.ConformalRegressor`). An ensemble averages the
    members' quantiles.

    Parameters
    ----------
    quantiles : sequence of float in (0, 1), default=(0.05, 0.5, 0.95)
        Increasing levels; 0.5 must be one of them (``predict`` returns it).
    **others
        Those of :class:`NeuMissRegressor`.

    Attributes
    ----------
    Those of :class:`NeuMissRegressor`; ``history_["val_loss"]`` and
    ``validation_score_`` are the (minus) pinball loss on standardized ``y``.
    """

    _parameter_constraints = {
        **NeuMissRegressor._parameter_constraints,
        "quantiles": SequenceOf(Real(0, 1, closed="neither")),
    }

    def __init__(
        self,
        quantiles=(0.05, 0.5, 0.95),
        *,
        depth=DEFAULTS["depth"],
        mlp_depth=DEFAULTS["mlp_depth"],
        mlp_width=DEFAULTS["mlp_width"],
        weight_sharing=DEFAULTS["weight_sharing"],
        residual=DEFAULTS["residual"],
        mask_skip=DEFAULTS["mask_skip"],
        spline=DEFAULTS["spline"],
        compress_tails=DEFAULTS["compress_tails"],
        integer_levels=DEFAULTS["integer_levels"],
        ensemble_size=DEFAULTS["ensemble_size"],
        optimizer=DEFAULTS["optimizer"],
        learning_rate=DEFAULTS["learning_rate"],
        batch_size=DEFAULTS["batch_size"],
        max_epochs=DEFAULTS["max_epochs"],
        validation_fraction=DEFAULTS["validation_fraction"],
        patience=DEFAULTS["patience"],
        lr_patience=DEFAULTS["lr_patience"],
        tol=DEFAULTS["tol"],
        weight_decay=DEFAULTS["weight_decay"],
        random_state=DEFAULTS["random_state"],
        device=DEFAULTS["device"],
        n_jobs=DEFAULTS["n_jobs"],
        verbose=DEFAULTS["verbose"],
        callbacks=DEFAULTS["callbacks"],
        log_target="auto",
    ):
        super().__init__(**parameters_of(NeuMissRegressor, locals()))
        self.quantiles = quantiles

    def fit(self, X, y, sample_weight=None, validation_data=None):
        """Fit as :meth:`NeuMissRegressor.fit`, with the pinball loss."""
        name = type(self).__name__
        check_params(name, {"quantiles": self.quantiles},
                     {"quantiles": self._parameter_constraints["quantiles"]})
        _quantile_levels(self.quantiles)
        return super().fit(X, y, sample_weight=sample_weight, validation_data=validation_data)

    _score_metric = ("pinball loss (standardized y)", -1.0)

    def _get_loss(self):
        return PinballLoss(self.quantiles)

    def predict_quantiles(self, X):
        """The quantiles of ``y`` given ``X`` (NaN = missing).

        Returns
        -------
        ndarray of shape (n_samples, len(quantiles)), increasing along each row:
        the outputs are sorted (monotone rearrangement), so quantiles never cross.
        """
        # y_scale_ > 0 and exp increasing: sorting before or after the scaling is the same
        return check_outputs_finite(
            self._target_units(self._linear_outputs(np.sort(self._forward(X), axis=1))))

    def predict(self, X):
        """The conditional median of ``y``, ndarray of shape (n_samples,)."""
        median = int(np.flatnonzero(_quantile_levels(self.quantiles) == 0.5)[0])
        return self.predict_quantiles(X)[:, median]
