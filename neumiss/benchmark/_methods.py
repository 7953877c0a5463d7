"""The compared methods: how each is fitted on a run's data, and its settings.

* **NeuMiss**: one :class:`~neumiss.NeuMissRegressor` (residual connections,
  ``weight_sharing="auto"``: a shared Neumann matrix, untied at the chosen depth when
  that improves validation) with ``depth="auto"`` (or the depths given on the
  command line): it trains on all of n_train, early-stops on the benchmark's
  validation set and keeps the depth with the best validation loss, as the
  paper chose depth on a validation set. Each depth starts from the weights
  learned at the previous one. The recorded fit seconds are the total over all
  candidate depths.
* **MLP** (0-imputation + mask, one hidden layer): one fit per width among
  ``mlp_widths`` multiples of ``d`` (the paper: ``d`` to ``100 d``), the best
  R² on the validation set kept.
* The other methods are fitted on the training set and do not see the
  validation set.

The baselines (every method but NeuMiss) are the models of the same names in the
registry of :mod:`neumiss.baselines` (:func:`~neumiss.baselines.make_baseline`).

Estimators are imported inside the functions that fit them, so that the
command line (``--help``, option checks) imports neither torch nor R.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sklearn.metrics import r2_score

from ..checks import AnyOf, Integer, NoneValue, SequenceOf, check_params

if TYPE_CHECKING:
    from ._data import SimulatedData

#: The paper's NeuMiss (linear head, one network) with the benchmark's training
#: settings; why these: "Why the benchmark's NeuMiss settings" in results/README.md.
NEUMISS_PARAMS = {
    "residual": True, "weight_sharing": "auto", "patience": 3, "lr_patience": 1, "tol": 2e-3,
    "mlp_depth": 0, "ensemble_size": 1, "mask_skip": False, "spline": False,
}
#: Candidate MLP widths, as multiples of d (chosen per run on the validation set).
MLP_WIDTHS = (1, 5, 20)


@dataclass(frozen=True)
class RunSettings:
    """How runs execute (not part of the resume key).

    ``neumiss_depths``: the NeuMiss depths tried, None for the estimator's
    ``depth="auto"``; ``mlp_widths``: the MLP widths tried, as multiples of d;
    ``threads``: threads of each fit (torch and the BLAS/OpenMP pools).
    """

    neumiss_depths: tuple[int, ...] | None = None
    mlp_widths: tuple[int, ...] = MLP_WIDTHS
    threads: int = 1

    def __post_init__(self) -> None:
        check_params("RunSettings", vars(self), {
            "neumiss_depths": AnyOf(NoneValue(), SequenceOf(Integer(0))),
            "mlp_widths": SequenceOf(Integer(1)),
            "threads": Integer(1),
        })


def r2_of(model, X, y) -> float:
    """R² of ``model``'s predictions of ``X`` against ``y``."""
    return float(r2_score(y, model.predict(X)))


def _select_on_validation(candidates: dict, data: SimulatedData) -> tuple[object, dict]:
    """Fit each candidate on the training set and keep the best on the validation set.

    Parameters
    ----------
    candidates : dict
        Hyperparameter value -> unfitted estimator.
    data : SimulatedData

    Returns
    -------
    model : the best fitted estimator
    params : dict
        ``choice`` (its hyperparameter value), ``val_r2`` and ``seconds``
        (validation R² and fit-plus-validation seconds of each candidate).
    """
    best_value, best_model, scores, seconds = None, None, {}, {}
    for value, estimator in candidates.items():
        start = time.perf_counter()
        model = estimator.fit(data.X_train, data.y_train)
        scores[value] = r2_of(model, data.X_val, data.y_val)
        seconds[str(value)] = round(time.perf_counter() - start, 2)
        if best_model is None or scores[value] > scores[best_value]:
            best_value, best_model = value, model
    val_r2 = {str(k): round(v, 5) for k, v in scores.items()}
    return best_model, {"choice": best_value, "val_r2": val_r2, "seconds": seconds}


def _fit_neumiss(data: SimulatedData, settings: RunSettings) -> tuple[object, dict]:
    """The paper's NeuMiss (:data:`NEUMISS_PARAMS`) and its depth search."""
    depth = "auto" if settings.neumiss_depths is None else list(settings.neumiss_depths)
    return _fit_neumiss_with({"depth": depth, **NEUMISS_PARAMS}, data)


def _fit_neumiss_default(data: SimulatedData, settings: RunSettings) -> tuple[object, dict]:
    """``NeuMissRegressor()`` with its defaults (only ``random_state`` set)."""
    return _fit_neumiss_with({}, data)


def _fit_neumiss_with(params: dict, data: SimulatedData) -> tuple[object, dict]:
    """A fitted NeuMissRegressor with ``params`` and its search (chosen depth, weight
    sharing and head, epochs, validation R² and seconds of each depth, validation R²
    of each head fine-tuned)."""
    from ..estimators import NeuMissRegressor

    # One estimator tries every depth (each warm-started from the previous one)
    # and keeps the best on the validation set; as in the paper it trains on all
    # of n_train and early-stops on the validation set.
    model = NeuMissRegressor(random_state=data.random_state, **params).fit(
        data.X_train, data.y_train, validation_data=(data.X_val, data.y_val)
    )
    results, starts = model.depth_results_, model.depth_starts_
    untied = model.untied_result_
    return model, {
        "depth": model.best_depth_,
        "weight_sharing": model.weight_sharing_,
        "mlp_depth": model.mlp_depth_,
        "mask_skip": model.mask_skip_,
        "spline": model.spline_,
        "head_val_r2": {str(k): round(r["val_score"], 5) for k, r in model.head_results_.items()},
        "untied_val_r2": None if untied is None else round(untied["val_score"], 5),
        "untied_seconds": None if untied is None else round(untied["seconds"], 2),
        "chebyshev_val_r2": (None if model.chebyshev_result_ is None
                             else round(model.chebyshev_result_["val_score"], 5)),
        "identity_val_r2": (None if model.identity_results_ is None else
                            {str(k): round(r["val_score"], 5)
                             for k, r in model.identity_results_.items()}),
        "epochs": model.n_epochs_,
        "val_r2": {str(k): round(r["val_score"], 5) for k, r in results.items()},
        "start_val_r2": (None if starts is None else
                         {str(k): round(r["val_score"], 5) for k, r in starts.items()}),
        "seconds": {str(k): round(r["seconds"], 2) for k, r in results.items()},
    }


def _fit_mlp(data: SimulatedData, settings: RunSettings) -> tuple[object, dict]:
    """The MLP of the best width on validation, and its search (``width``,
    ``val_r2`` and ``seconds`` of each width)."""
    from ..baselines import make_baseline

    d = data.X_train.shape[1]
    candidates = {
        q * d: make_baseline("mlp", random_state=data.random_state).set_params(width=q * d)
        for q in settings.mlp_widths
    }
    model, params = _select_on_validation(candidates, data)
    return model, {"width": params.pop("choice"), **params}


def _fit_baseline(name: str) -> Callable:
    """A method fitting the registry's baseline ``name`` on the training set, without
    hyperparameter search; its params record EM's or boosting's iterations and convergence."""

    def fit(data: SimulatedData, settings: RunSettings) -> tuple[object, dict]:
        from ..baselines import make_baseline

        model = make_baseline(name, random_state=data.random_state)
        model.fit(data.X_train, data.y_train)
        params = {}
        if getattr(model, "n_iter_", None) is not None:  # EM: E-steps; boosting: trees
            params["n_iter"] = int(np.max(model.n_iter_))
        if getattr(model, "converged_", None) is not None:
            params["converged"] = bool(model.converged_)
        return model, params

    return fit


def _norm_unavailable() -> str | None:
    """Why R's ``norm`` cannot be used here, or None when it can."""
    from ..baselines import load_norm

    try:
        load_norm()
    except ImportError as exc:
        return str(exc)
    return None


def _warm_up_torch() -> None:
    """One tiny NeuMiss fit, so that torch's one-time set-up is not timed with the real fit."""
    from ..estimators import NeuMissRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3))
    X[rng.random(X.shape) < 0.3] = np.nan
    with warnings.catch_warnings():  # two epochs on noise: a constant, and a warning
        warnings.simplefilter("ignore")
        NeuMissRegressor(depth=2, max_epochs=2, random_state=0).fit(X, rng.standard_normal(64))


def _warm_up_r() -> None:
    """Start R and load ``norm`` before the timed fit."""
    from ..baselines import load_norm

    load_norm()


@dataclass(frozen=True)
class Method:
    """A compared method: ``fit(data, settings) -> (fitted model, params dict)``.

    ``unavailable()`` returns why the method cannot run on this machine (None
    when it can). ``warm_up()``, if given, runs in the run's process before the
    timed fit: one-time runtime set-up (starting R, torch's first call) is paid
    by every fresh process, not by a fit in a user's session.
    """

    label: str
    fit: Callable
    unavailable: Callable[[], str | None] = lambda: None
    warm_up: Callable[[], None] | None = None


#: Methods by command-line name, in the order of tables and figures.
METHODS = {
    "em": Method("EM", _fit_baseline("em")),
    "norm_em": Method("EM (R norm)", _fit_baseline("norm_em"), _norm_unavailable, _warm_up_r),
    "mice_lr": Method("MICE+LR", _fit_baseline("mice_lr")),
    "impute_mask_lr": Method("0-impute+mask LR", _fit_baseline("impute_mask_lr")),
    "mlp": Method("MLP", _fit_mlp),
    "hgb": Method("HistGradientBoosting", _fit_baseline("hgb")),
    "neumiss": Method("NeuMiss", _fit_neumiss, warm_up=_warm_up_torch),
    "neumiss_default": Method("NeuMiss (defaults)", _fit_neumiss_default, warm_up=_warm_up_torch),
}
#: Methods run when none are named (R's norm is opt-in: it needs R, and fails above d = 30).
DEFAULT_METHODS = ("em", "mice_lr", "impute_mask_lr", "mlp", "hgb", "neumiss")
