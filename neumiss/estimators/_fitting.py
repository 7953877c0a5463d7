"""One fit of a NeuMiss estimator, whatever holds its rows.

:class:`FitPlan` is the only orchestration of a fit: it checks the parameters,
lets a source of rows validate the data and fit the preprocessing, draws the
seed, splits the rows once, then searches the candidates, each an ensemble of
``ensemble_size`` members trained together (member ``k`` initialised from
``seed + k``) with one early stopping on the ensemble's validation loss. A
source supplies only the rows and their statistics:

- :class:`InMemoryRows` (``fit``): arrays in memory, a validation split drawn with the seed;
- ``StreamRows`` (:func:`~neumiss.estimators.fit_stream`): chunks read again each
  epoch, standardized with statistics merged over a first pass.

A source has ``prepare(estimator, device)`` (validate the data; set ``encoder_``,
``preprocessor_`` and the target's encoding) and ``split(seed)`` (the fit's
:class:`FitRows`). With ``integer_levels="auto"``, a table whose encoding has indicator
columns keeps them when its linear start validates clearly better with them than
without, and is prepared again without them otherwise (:meth:`FitPlan.choose_levels`).
Training rows held in a :class:`~neumiss.network.TrainingData` go through the search
(:func:`~neumiss.network.search_depths`); other rows train the one candidate
without the divergence guard, which needs the training rows in memory.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from sklearn.base import is_classifier
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight

from ..checks import check_features, check_params, check_training_data, warn_user
from ..network import (
    AUTO_DEPTHS,
    AUTO_MLP_DEPTHS,
    Callback,
    Candidate,
    DepthSearch,
    ModelAveraging,
    Objective,
    SearchResult,
    TrainingConfig,
    TrainingData,
    all_reduced_loss,
    auto_learning_rate,
    clearly_lower,
    data_parallel,
    describe_training,
    evaluate_loss,
    fit_temperature,
    observed_moments,
    search_depths,
    torch_threads,
    train,
)
from ..tables import Standardizer, TableEncoder


class FitRows(NamedTuple):
    """The rows a fit trains and validates on.

    ``train``: a :class:`~neumiss.network.TrainingData`, or any source of rows
    :func:`~neumiss.network.train` reads without its divergence guard; ``val``:
    a :class:`~neumiss.network.TrainingData` or None (the training loss decides);
    ``y_val`` (n_val,) encoded targets and ``w_val`` (n_val,) case weights or
    None, for the validation score; ``scheme``: how the validation rows were chosen
    (:data:`VALIDATION_SCHEMES`).
    """

    train: Any
    val: TrainingData | None
    y_val: np.ndarray
    w_val: np.ndarray | None
    scheme: str = "holdout"


#: How a fit validates (``validation_scheme_``): a held-out share of the rows, every row
#: out of fold (each member of the ensemble holds out one fold), the user's
#: ``validation_data``, or none (the training loss decides).
VALIDATION_SCHEMES = ("holdout", "out_of_fold", "validation_data", "none")

#: ``validation_fraction="auto"`` validates an ensemble out of fold on tables of up to
#: this many rows, where a held-out tenth is too few rows to choose epochs and depths
#: reliably; beyond it, and with one network, it holds out :data:`HOLDOUT_FRACTION`.
#: Rows count as the loss weighs them (``informative_rows``: a class target's, twice the
#: rows outside its most frequent class). Real tables of 2,000-5,000 rows: better on all
#: nine of the suite's (spi_age R² +0.020, star_read3 +0.031); beyond, gapminder_lifeexp
#: and fdgs_hgt lose, and the binary flchain_death and nafld_death (4,338 and 2,728
#: informative rows) gain (results/realdata/README.md).
OUT_OF_FOLD_ROWS = 5_000

#: ``tol="auto"`` out of fold: every decrease of the validation loss counts, where every row
#: validates (tbc_hgt R² +0.004, star_read3 +0.001, flchain_death log loss -0.001); on held-out
#: rows the network's default (2e-3) stays: 0 there was no better on the real suite's
#: large tables nor on the simulated grid (results/realdata/README.md).
OUT_OF_FOLD_TOL = 0.0

#: The share of rows ``validation_fraction="auto"`` holds out when it does not validate
#: out of fold.
HOLDOUT_FRACTION = 0.1

#: ``integer_levels="auto"`` keeps the indicator columns when the linear start with them
#: is clearly better (:func:`~neumiss.network.clearly_lower`) and its validation loss
#: lower by this fraction at least (the spline term's bar is the loss object's
#: ``spline_min_gain``; a classifier's without this bar moved one task by 0.0001).
LEVELS_MIN_GAIN = 0.02


def resolve_device(device: str) -> torch.device:
    """``torch.device`` for a validated ``device`` parameter; "auto" takes CUDA when present."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is available; use 'cpu' or 'auto'")
    return torch.device(device)


def draw_seed(random_state) -> int:
    """The fit's seed, drawn once from ``random_state``; member ``k`` uses ``seed + k``."""
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def fit_callbacks(estimator) -> list[Callback]:
    """Deep copies of ``estimator.callbacks`` (None: none) for one fit, its
    ``callbacks_``: a fit never changes the parameter's callbacks, and no fit or clone
    shares a callback's state with another. ValueError, naming the parameter and the type
    of the first element that is not a :class:`~neumiss.network.Callback`."""
    callbacks, owner = estimator.callbacks, type(estimator).__name__
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        raise ValueError(f"{owner}: callbacks must be None or a list of "
                         f"neumiss.network.Callback, got a {type(callbacks).__name__}")
    for index, callback in enumerate(callbacks):
        if not isinstance(callback, Callback):
            kind = type(callback)
            name = (kind.__qualname__ if kind.__module__ == "builtins"
                    else f"{kind.__module__}.{kind.__qualname__}")
            raise ValueError(
                f"{owner}: callbacks[{index}] is a {name}, not a neumiss.network.Callback "
                "(subclass it: its on_train_begin, on_epoch_end and on_train_end are called)")
    return copy.deepcopy(list(callbacks))


def candidate_depths(depth) -> tuple[int, ...]:
    """The depths a ``depth`` parameter searches, increasing and distinct."""
    if isinstance(depth, str):
        return AUTO_DEPTHS
    candidates = depth if isinstance(depth, (list, tuple)) else [depth]
    return tuple(sorted({int(v) for v in candidates}))


def candidate_mlp_depths(mlp_depth) -> tuple[int, ...]:
    """The head depths an ``mlp_depth`` parameter trains: the chain's, then the fine-tuned."""
    return AUTO_MLP_DEPTHS if mlp_depth == "auto" else (int(mlp_depth),)


def refuse_class_weight(estimator, fit: str) -> None:
    """Refuse a classifier's ``class_weight`` in ``fit``, a fit whose rows are never in
    memory at once ("balanced" would need every class's count before the first step)."""
    if getattr(estimator, "class_weight", None) is not None:
        raise ValueError(f"class_weight applies to fit(X, y) only, not to {fit} (which "
                         "takes no case weights): set class_weight=None")


def training_data(estimator, x, mask, y, weight, device) -> TrainingData:
    """Standardized inputs ``x``, ``mask`` (n, n_encoded), encoded targets ``y`` (n,) and
    case weights (n,) or None as the network's tensors on ``device``."""
    return TrainingData(
        torch.from_numpy(x).to(device),
        torch.from_numpy(mask).to(device),
        estimator._get_loss().target_tensor(y, device),
        None if weight is None else torch.as_tensor(weight, dtype=torch.float32, device=device),
    )


def validation_rows(estimator, validation_data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``validation_data`` checked against the fitted encoding: standardized ``x``, ``mask``
    (n_val, n_encoded) and encoded ``y_val`` (n_val,)."""
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
        raise ValueError("validation_data must be a pair (X_val, y_val)")
    try:
        X_val = check_features(estimator, validation_data[0], reset=False, tables=True)
        X_val = estimator.encoder_.transform(X_val)
    except ValueError as error:  # say which X: the message names none
        raise ValueError(f"validation_data: X_val: {error}") from error
    y_val = np.asarray(validation_data[1])
    if y_val.ndim != 1 or y_val.shape[0] != X_val.shape[0]:
        raise ValueError(
            f"validation_data: y_val must be 1-D with one value per row of X_val "
            f"({X_val.shape[0]} rows), got shape {y_val.shape}"
        )
    return (*estimator.preprocessor_.transform(X_val), estimator._encode_validation_target(y_val))


def train_one_candidate(
    build_network, depths, weight_sharing, mlp_depths, train_rows, val_data, objective,
    config: TrainingConfig, seed: int, *, verbose: int = 0, label: str = "NeuMiss",
    n_members: int = 1, combine: str = "mean", mask_skip: bool | str = False,
    spline: bool | str = False, parallel: bool = False, start_from=None,
    callbacks: Sequence[Callback] = (),
) -> SearchResult:
    """The search of :func:`~neumiss.network.search_depths` reduced to its one candidate, for
    training rows that are not in memory: trained without the divergence guard, which
    needs them in memory. Same arguments (one depth, one head, no ``"auto"``, except
    ``mask_skip="auto"`` and ``spline="auto"``, which are False here: deciding needs the
    rows in memory; ``spline=True`` is refused: its knots are quantiles of the rows).
    ``parallel``: this process trains data-parallel with the others of the default
    process group (:func:`~neumiss.network.data_parallel`), their weights averaged every
    few steps (:class:`~neumiss.network.ModelAveraging`) and validated on all their rows
    (:func:`~neumiss.network.all_reduced_loss`). ``start_from``: a
    :class:`~neumiss.network.StackedNetwork` of the same members, whose weights the
    members start from (:meth:`~neumiss.network.DepthSearch.members`) and that an epoch
    must beat to be kept, or None. ``callbacks`` are called on the training, described as
    its stage, ``"stream"`` or ``"data-parallel"``
    (:func:`~neumiss.network.describe_training`)."""
    if spline is True:
        raise ValueError("spline=True needs the training rows in memory (its knots are their "
                         "quantiles): use spline=False or 'auto' (False here) with fit_stream")
    if len(depths) != 1 or len(mlp_depths) != 1 or weight_sharing == "auto":
        raise ValueError(
            "rows that are not in memory train one candidate: got depths "
            f"{list(depths)}, mlp_depths {list(mlp_depths)}, weight_sharing={weight_sharing!r}"
        )
    (depth,), (mlp_depth,) = depths, mlp_depths
    search = DepthSearch(build_network, train_rows, val_data, objective, seed, verbose,
                         label, n_members, combine, mask_skip=mask_skip)
    network = search.members(depth, weight_sharing, mlp_depth, start_from)
    started = time.perf_counter()
    result = train(
        data_parallel(network) if parallel else network, train_rows, val_data,
        objective.loss, config, torch.Generator().manual_seed(seed), objective.score,
        verbose=verbose, guard=False, evaluate=all_reduced_loss if parallel else evaluate_loss,
        description=describe_training(label, "data-parallel" if parallel else "stream", depth,
                                      weight_sharing, mlp_depth),
        keep_start=start_from is not None,
        callbacks=[*callbacks, ModelAveraging()] if parallel else callbacks,
    )
    best = Candidate(depth, weight_sharing, mlp_depth, network, result,
                     time.perf_counter() - started)
    return SearchResult(best, {depth: best.summary()}, None, {}, search.mask_skip)


class FitPlan:
    """The fit of ``estimator`` on the rows of ``source`` (see the module docstring).

    Parameters
    ----------
    estimator : NeuMiss estimator
        Its parameters drive the fit; :meth:`fit` sets its fitted attributes.
    source : InMemoryRows or StreamRows
        Supplies the rows, validated and standardized.
    """

    def __init__(self, estimator, source) -> None:
        self.estimator, self.source = estimator, source

    def fit(self):
        """Check the parameters, copy the callbacks for this fit (``callbacks_``:
        :func:`fit_callbacks`), prepare the rows, search and train the members together,
        each training calling the callbacks; returns the estimator."""
        estimator = self.estimator
        check_params(type(estimator).__name__, estimator.get_params(deep=False),
                     estimator._parameter_constraints)
        estimator.callbacks_ = fit_callbacks(estimator)
        device = resolve_device(estimator.device)
        with torch_threads(estimator.n_jobs):
            self.source.prepare(estimator, device)
            seed = draw_seed(estimator.random_state)
            rows, objective = self.rows(seed)
            if estimator.integer_levels == "auto" and estimator.encoder_.has_levels:
                rows, objective = self.choose_levels(rows, objective, seed, device)
            estimator.learning_rate_ = self.learning_rate()
            result = self.search(rows, objective, seed)
            self.set_results(result, rows, objective)
            self.calibrate(result, rows, objective, seed)
        return estimator

    def rows(self, seed: int) -> tuple[FitRows, Objective]:
        """The source's split and the objective scored on its validation rows."""
        estimator, rows = self.estimator, self.source.split(seed)
        loss = estimator._get_loss()
        objective = Objective(loss, functools.partial(loss.score, y_val=rows.y_val,
                                                      w_val=rows.w_val))
        return rows, objective

    def choose_levels(self, rows: FitRows, objective: Objective, seed: int,
                      device: torch.device) -> tuple[FitRows, Objective]:
        """``integer_levels="auto"``: ``rows``, prepared with the indicator columns of
        ``encoder_``, when their linear start validates clearly better, by
        :data:`LEVELS_MIN_GAIN` at least, than that of their other columns (the
        columns and split a preparation without indicators gives); else, and without
        validation rows to decide on, the rows prepared again without them
        (``encoder_`` and ``preprocessor_`` refitted)."""
        estimator = self.estimator
        if rows.val is not None:
            other = ~estimator.encoder_.indicator_columns()
            with_levels = self.linear_start_losses(rows.train, rows.val, objective, seed)
            without = self.linear_start_losses(rows.train, rows.val, objective, seed, other)
            if clearly_lower(with_levels, without, rows.val.weight, LEVELS_MIN_GAIN):
                return rows, objective
        self.source.prepare(estimator, device, integer_levels=False)
        return self.rows(seed)

    def linear_start_losses(self, train: TrainingData, val: TrainingData,
                            objective: Objective, seed: int,
                            columns: np.ndarray | None = None) -> torch.Tensor:
        """Per-row validation losses (n_val,) of the linear start at depth 0 on the
        encoded columns (those where the boolean ``columns`` is True): mean imputation
        and the members' linear heads fitted in closed form
        (:meth:`~neumiss.network.DepthSearch.start_losses`)."""
        estimator = self.estimator
        if columns is not None:
            keep = torch.as_tensor(columns, device=train.x.device)
            train, val = train.columns(keep), val.columns(keep)
        build = functools.partial(estimator._build_network, columns=columns)
        # Members trained on their own rows (out of fold) differ; else their start is one.
        members = 1 if train.member_weight is None else int(estimator.ensemble_size)
        search = DepthSearch(build, train, val, objective, seed, n_members=members,
                             combine=estimator._get_loss().combine,
                             moments=observed_moments(train, seed))
        return search.start_losses(0, "shared")[0]

    def learning_rate(self) -> float:
        """``learning_rate``, or its automatic value for the encoded columns of ``encoder_``."""
        estimator = self.estimator
        if estimator.learning_rate == "auto":
            return auto_learning_rate(estimator.encoder_.n_features_out_)
        return float(estimator.learning_rate)

    def training_config(self, scheme: str) -> TrainingConfig:
        """The estimator's optimisation parameters, with ``learning_rate_``, for a fit
        validating by ``scheme`` (``tol="auto"``: :data:`OUT_OF_FOLD_TOL` out of fold,
        else the network's default)."""
        estimator = self.estimator
        tol = estimator.tol
        if tol == "auto":
            tol = OUT_OF_FOLD_TOL if scheme == "out_of_fold" else TrainingConfig.tol
        return TrainingConfig(
            optimizer=estimator.optimizer,
            learning_rate=estimator.learning_rate_,
            batch_size=None if estimator.batch_size == "auto" else int(estimator.batch_size),
            max_epochs=int(estimator.max_epochs),
            patience=int(estimator.patience),
            lr_patience=int(estimator.lr_patience),
            tol=float(tol),
            weight_decay=float(estimator.weight_decay),
        )

    def search(self, rows: FitRows, objective: Objective, seed: int) -> SearchResult:
        """Search the candidates on ``rows``, every candidate an ensemble of
        ``ensemble_size`` members (member ``k`` initialised from ``seed + k``)."""
        estimator = self.estimator
        arguments = (estimator._build_network, candidate_depths(estimator.depth),
                     estimator.weight_sharing, candidate_mlp_depths(estimator.mlp_depth),
                     rows.train, rows.val, objective, self.training_config(rows.scheme), seed)
        options = {"verbose": int(estimator.verbose), "label": type(estimator).__name__,
                   "n_members": int(estimator.ensemble_size),
                   "combine": estimator._get_loss().combine,
                   "mask_skip": estimator.mask_skip, "spline": estimator.spline,
                   "callbacks": estimator.callbacks_}
        if isinstance(rows.train, TrainingData):
            return search_depths(*arguments, **options,
                                 screen_depths=isinstance(estimator.depth, str))
        return train_one_candidate(*arguments, **options, parallel=self.source.parallel,
                                   start_from=self.source.start)

    def calibrate(self, result: SearchResult, rows: FitRows, objective: Objective,
                  seed: int) -> None:
        """With ``calibration="temperature"`` (classifiers) and validation rows: the
        temperature fitted on them (:func:`~neumiss.network.fit_temperature`), folded into
        the heads of ``network_`` (``temperature_``; ``calibration_result_`` says the
        validation log loss before and after). Otherwise the temperature is 1 and
        ``calibration_result_`` None. Run after :meth:`set_results`: the search's
        validation losses and ``members_`` are those of the uncalibrated network."""
        estimator = self.estimator
        if getattr(estimator, "calibration", "none") == "none":
            return
        estimator.temperature_, estimator.calibration_result_ = 1.0, None
        if rows.val is None:
            return
        fitted = fit_temperature(result.best.network, rows.val, objective.loss, seed)
        estimator.temperature_ = fitted.temperature
        estimator.calibration_result_ = fitted.summary()
        if fitted.temperature != 1.0:
            result.best.network.scale_outputs(1.0 / fitted.temperature)
            estimator.network_ = result.best.network.to_network()

    def set_results(self, result: SearchResult, rows: FitRows, objective: Objective) -> None:
        """The estimator's fitted attributes from the search ``result`` on ``rows``."""
        estimator = self.estimator
        best = result.best
        estimator.network_ = best.network.to_network()
        estimator.best_depth_ = best.depth
        estimator.weight_sharing_ = best.weight_sharing
        estimator.mlp_depth_ = best.mlp_depth
        estimator.mlp_weight_ = (float(best.mlp_depth > 0) if best.mlp_weight is None
                                 else best.mlp_weight)
        estimator.mask_skip_ = result.mask_skip
        estimator.spline_ = result.spline
        if is_classifier(estimator):  # the heads' logistic start
            estimator.start_C_ = result.start_C
        encoding = best.network.encoding
        estimator.spline_ramps_ = 0 if encoding is None else encoding.n_ramps
        estimator.mlp_width_ = estimator._mlp_width(estimator.spline_ramps_)
        estimator.history_ = best.result.history
        estimator.n_epochs_ = best.result.n_epochs
        estimator.best_epoch_ = best.result.best_epoch
        estimator.depth_results_ = result.depth_results
        estimator.untied_result_ = result.untied
        estimator.head_results_ = result.heads
        estimator.chebyshev_result_ = result.chebyshev
        estimator.identity_results_ = result.identity
        estimator.depth_starts_ = result.starts
        estimator.members_ = member_summaries(best, rows, objective)
        estimator.validation_score_ = float(best.result.best_val_score)
        estimator.validation_scheme_ = rows.scheme
        estimator.n_validation_rows_ = 0 if rows.val is None else len(rows.val)


def member_summaries(best: Candidate, rows: FitRows,
                     objective: Objective) -> list[dict[str, float]]:
    """The summary of each member of ``best`` (:meth:`Candidate.summary`), its validation
    loss and score its own (the candidate's are the ensemble's), out of fold on the rows
    it held out; without validation rows every member reports the ensemble's."""
    summary = best.summary()
    if rows.val is None or best.network.n_members == 1:
        return [dict(summary) for _ in range(best.network.n_members)]
    members = []
    held_out_by = rows.val.held_out_by
    for k, network in enumerate(best.network.networks()):
        val = rows.val if held_out_by is None else rows.val.subset(
            torch.nonzero(held_out_by == k)[:, 0])
        val_loss = evaluate_loss(network, val, objective.loss)
        members.append({**summary, "val_loss": val_loss, "val_score": objective.score(val_loss)})
    return members


class InMemoryRows:
    """The rows of ``fit``: arrays in memory, validated as ``validation_fraction`` says
    (:meth:`split`).

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features), NaN = missing
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,) or None
    validation_data : pair (X_val, y_val) or None
    """

    def __init__(self, X, y, sample_weight=None, validation_data=None) -> None:
        self.data = (X, y, sample_weight)
        self.validation_data = validation_data

    def prepare(self, estimator, device: torch.device,
                integer_levels: bool | None = None) -> None:
        """Validate the data, fit ``encoder_``, ``preprocessor_`` and the target's encoding
        on it, and keep the standardized rows for :meth:`split`. ``integer_levels``
        (default: unless the parameter is False) gives the encoding indicator columns."""
        X, y, sample_weight = self.data
        X, y = check_training_data(estimator, X, y, y_numeric=estimator._y_numeric, tables=True)
        self.weight = (None if sample_weight is None else _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True))
        self.y = estimator._encode_target(y)
        self.weight = estimator._case_weights(self.y, self.weight)
        # Categories too many to one-hot encode get cross-fitted target statistics.
        if integer_levels is None:
            integer_levels = estimator.integer_levels is not False
        estimator.encoder_ = TableEncoder(integer_levels)
        X = estimator.encoder_.fit_transform(
            X, self.y, classes=None if estimator._y_numeric else estimator.classes_,
            random_state=estimator.random_state)
        _warn_features_never_observed(estimator, X)
        estimator.preprocessor_ = Standardizer(
            estimator.compress_tails, numeric=estimator.encoder_.numeric_columns()
        ).fit(X)
        self.x, self.mask = estimator.preprocessor_.transform(X)
        self.validation = (None if self.validation_data is None
                           else validation_rows(estimator, self.validation_data))
        self.estimator, self.device = estimator, device

    def tensors(self, index, y, weight) -> TrainingData:
        return training_data(self.estimator, self.x[index], self.mask[index], y, weight,
                             self.device)

    def training_rows(self, index, y) -> TrainingData:
        """Rows ``index`` to train on, their case weights scaled to a mean of 1."""
        if self.weight is None:
            return self.tensors(index, y, None)
        weight = self.weight[index]
        if not weight.sum() > 0:
            raise ValueError("sample_weight is 0 on every training row of the split")
        return self.tensors(index, y, weight / np.mean(weight))

    def split(self, seed: int) -> FitRows:
        """The rows to train and validate on: every row trains when ``validation_data``
        (validating) or ``validation_fraction=0`` (the training loss decides); with
        ``"auto"``, out of fold for an ensemble of at most :data:`OUT_OF_FOLD_ROWS`
        informative rows (:meth:`out_of_fold_split`), else :data:`HOLDOUT_FRACTION`; otherwise
        ``validation_fraction`` of the rows, drawn with ``seed`` (stratified for
        classes), are held out."""
        estimator, y = self.estimator, self.y
        if self.validation is not None:
            x_val, mask_val, y_val = self.validation
            val = training_data(estimator, x_val, mask_val, y_val,
                                estimator._case_weights(y_val, None), self.device)
            return FitRows(self.training_rows(slice(None), y), val, y_val, None,
                           "validation_data")
        fraction = estimator.validation_fraction
        n_samples, n_members = self.x.shape[0], int(estimator.ensemble_size)
        if fraction == "auto":
            if (n_members > 1 and 2 * n_members <= n_samples and
                    estimator._get_loss().informative_rows(y) <= OUT_OF_FOLD_ROWS):
                return self.out_of_fold_split(seed)
            fraction = HOLDOUT_FRACTION
        if fraction == 0:
            return FitRows(self.training_rows(slice(None), y), None, y, self.weight, "none")
        n_val = int(np.ceil(fraction * n_samples))
        if n_samples - n_val < 1:
            raise ValueError(
                f"too few rows for validation_fraction={fraction}: got "
                f"n_samples={n_samples}; need at least 2 rows (or set validation_fraction=0)"
            )
        train_idx, val_idx = train_test_split(
            np.arange(n_samples), test_size=n_val, random_state=seed,
            stratify=estimator._get_loss().stratify(y, n_val),
        )
        w_val = None if self.weight is None else self.weight[val_idx]
        if w_val is not None and not w_val.sum() > 0:
            w_val = None  # only zero-weight rows held out: validate them unweighted
        val = self.tensors(val_idx, y[val_idx], w_val)
        return FitRows(self.training_rows(train_idx, y[train_idx]), val, y[val_idx], w_val)

    def out_of_fold_split(self, seed: int) -> FitRows:
        """Every row trains all members but one and validates once: the rows are cut into
        ``ensemble_size`` folds (stratified for classes when every class fills them),
        member ``k`` does not train on fold ``k``, and the validation loss scores each
        row by the member that held it out (``TrainingData.held_out_by``)."""
        estimator, y = self.estimator, self.y
        n_members = int(estimator.ensemble_size)
        classes = estimator._get_loss().stratify(y, len(y))
        if classes is not None and np.bincount(classes).min() < n_members:
            classes = None  # a class too rare to appear in every fold
        folds = (KFold if classes is None else StratifiedKFold)(
            n_members, shuffle=True, random_state=seed)
        fold = np.empty(len(y), dtype=np.int64)
        for k, (_, held) in enumerate(folds.split(np.zeros(len(y)), classes)):
            fold[held] = k
        held_out_by = torch.as_tensor(fold, device=self.device)
        trains = held_out_by[:, None] != torch.arange(n_members, device=self.device)
        train = dataclasses.replace(self.training_rows(slice(None), y),
                                    member_weight=trains.float())
        # the same rows: the training tensors, with the unscaled case weights
        val = dataclasses.replace(self.tensors(slice(None), y, self.weight), x=train.x,
                                  mask=train.mask, target=train.target, held_out_by=held_out_by)
        return FitRows(train, val, y, self.weight, "out_of_fold")


def _warn_features_never_observed(estimator, X: np.ndarray) -> None:
    """Warn about input columns whose encoded columns are missing in every row of ``X``."""
    columns = estimator.encoder_.input_index()
    never_observed = np.unique(columns[np.isnan(X).all(axis=0)])
    if never_observed.size:
        names = getattr(estimator, "feature_names_in_", None)
        labels = [names[i] if names is not None else int(i) for i in never_observed]
        warn_user(f"features {labels} are missing in every training row: they carry no "
                  "information and are ignored in practice")
