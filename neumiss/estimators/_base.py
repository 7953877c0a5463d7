"""The fitting machinery shared by :class:`~neumiss.estimators.NeuMissRegressor` and
:class:`~neumiss.estimators.NeuMissClassifier`.

``fit`` validates the parameters (:mod:`neumiss.constraints`) and the data
(:mod:`neumiss.validation`), encodes and scales the table
(:mod:`neumiss.encoding`, :mod:`neumiss.preprocessing`), then trains the
ensemble's members (:func:`neumiss.search.search_depths`). Saving goes through
:mod:`neumiss.persistence`, ONNX export through :mod:`neumiss.onnx_export`.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from ..checks import (
    AnyOf,
    Boolean,
    InstanceOf,
    Integer,
    NoneValue,
    Options,
    Pattern,
    Real,
    SequenceOf,
    check_features,
    check_params,
    check_training_data,
)
from ..network import (
    AUTO_DEPTHS,
    AUTO_MLP_DEPTHS,
    OPTIMIZERS,
    EnsembleNetwork,
    NeuMissNetwork,
    Objective,
    SearchResult,
    TrainingConfig,
    TrainingData,
    auto_learning_rate,
    search_depths,
    torch_threads,
)
from ..tables import (
    Standardizer,
    TableEncoder,
    check_outputs_finite,
)
from . import _persistence as persistence

#: Rows per forward pass at prediction time (bounds memory, not results).
PREDICT_CHUNK = 65536

#: The estimators' training defaults are the training loop's.
_TRAINING = TrainingConfig()


def _resolve_device(device: str) -> torch.device:
    """``torch.device`` for a validated ``device`` parameter; "auto" takes CUDA when present."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is available; use 'cpu' or 'auto'")
    return torch.device(device)


def _check_case_weights(sample_weight, X) -> np.ndarray | None:
    """``sample_weight`` as float64 (n_samples,), or None; non-negative, not all zero
    (scikit-learn's checks, with their messages)."""
    if sample_weight is None:
        return None
    return _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)


class BaseNeuMiss(BaseEstimator):
    """Shared fitting machinery of :class:`NeuMissRegressor` and :class:`NeuMissClassifier`.

    Subclasses define how targets are encoded, the loss, the number of network
    outputs and how raw network outputs become predictions.
    """

    _parameter_constraints = {
        "depth": AnyOf(Integer(0), Options("auto"), SequenceOf(Integer(0))),
        "mlp_depth": AnyOf(Integer(0), Options("auto")),
        "mlp_width": AnyOf(NoneValue(), Integer(1)),
        "weight_sharing": Options("independent", "shared", "auto"),
        "residual": Boolean(),
        "compress_tails": Boolean(),
        "ensemble_size": Integer(1),
        "optimizer": Options(*OPTIMIZERS),
        "learning_rate": AnyOf(Options("auto"), Real(0, None, closed="neither")),
        "batch_size": AnyOf(Options("auto"), Integer(1)),
        "max_epochs": Integer(1),
        "validation_fraction": Real(0, 1, closed="left"),
        "patience": Integer(1),
        "lr_patience": Integer(0),
        "tol": Real(0, 1, closed="left"),
        "weight_decay": Real(0),
        "random_state": AnyOf(
            NoneValue(), Integer(0, 2**32 - 1), InstanceOf(np.random.RandomState, "a RandomState")
        ),
        "device": AnyOf(Options("cpu", "auto"), Pattern(r"cuda(:\d+)?", "'cuda' or 'cuda:N'")),
        "n_jobs": AnyOf(NoneValue(), Integer(1), Integer(None, -1)),
        "verbose": AnyOf(Boolean(), Integer(0)),
    }

    def __init__(
        self,
        depth="auto",
        *,
        mlp_depth="auto",
        mlp_width=None,
        weight_sharing="auto",
        residual=True,
        compress_tails=False,
        ensemble_size=5,
        optimizer=_TRAINING.optimizer,
        learning_rate="auto",
        batch_size="auto",
        max_epochs=_TRAINING.max_epochs,
        validation_fraction=0.1,
        patience=_TRAINING.patience,
        lr_patience=_TRAINING.lr_patience,
        tol=_TRAINING.tol,
        weight_decay=_TRAINING.weight_decay,
        random_state=None,
        device="cpu",
        n_jobs=None,
        verbose=0,
    ):
        self.depth = depth
        self.mlp_depth = mlp_depth
        self.mlp_width = mlp_width
        self.weight_sharing = weight_sharing
        self.residual = residual
        self.compress_tails = compress_tails
        self.ensemble_size = ensemble_size
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.lr_patience = lr_patience
        self.tol = tol
        self.weight_decay = weight_decay
        self.random_state = random_state
        self.device = device
        self.n_jobs = n_jobs
        self.verbose = verbose

    # ------------------------------------------------------------ subclass API
    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _encode_validation_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _n_outputs(self) -> int:
        raise NotImplementedError

    def _loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss of each row: (batch, n_outputs), (batch,) -> (batch,)."""
        raise NotImplementedError

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.as_tensor(y, dtype=torch.float32, device=device)

    def _score_from_loss(self, val_loss: float, y_val: np.ndarray, w_val) -> float:
        return -val_loss

    def _stratify(self, y: np.ndarray):
        return None

    def _combine(self) -> str:
        """How an ensemble averages its members (:data:`neumiss.ensemble.COMBINE`)."""
        return "mean"

    # --------------------------------------------------------------------- fit
    def fit(self, X, y, sample_weight=None, validation_data=None):
        """Fit the network on ``X`` (NaN = missing) and ``y``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features; NaN (or None / pd.NA in a DataFrame) marks a missing
            value. DataFrame columns may be numeric, boolean or categorical
            (``category``, ``object`` or ``string`` of text): see ``encoder_``.
        y : array-like of shape (n_samples,)
            Targets, without missing values.
        sample_weight : array-like of shape (n_samples,), optional
            Case weights (non-negative): each row's loss counts this many
            times, in training and in the internal validation split.
        validation_data : pair (X_val, y_val), optional
            Held-out rows for early stopping, the learning-rate schedule and
            ``depth="auto"``. When given, every row of ``X`` is used for
            training and ``validation_fraction`` is ignored.

        Returns
        -------
        self
        """
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        with torch_threads(self.n_jobs):
            X, y = check_training_data(self, X, y, y_numeric=self._y_numeric, tables=True)
            weight = _check_case_weights(sample_weight, X)
            y_encoded = self._encode_target(y)
            device = _resolve_device(self.device)
            seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
            self.encoder_ = TableEncoder().fit(X)
            X = self.encoder_.transform(X)
            self._warn_features_never_observed(X)
            self._set_learning_rate()
            self.preprocessor_ = Standardizer(
                self.compress_tails, numeric=self.encoder_.numeric_columns()
            ).fit(X)
            x, mask = self.preprocessor_.transform(X)
            validation = None
            if validation_data is not None:
                X_val, y_val = self._check_validation_data(validation_data)
                validation = (*self.preprocessor_.transform(X_val), y_val)
            members = []
            for k in range(self.ensemble_size):
                member_seed = seed + k
                train_data, val_data, y_val, w_val = self._split(
                    x, mask, y_encoded, weight, validation, member_seed, device
                )
                objective = Objective(
                    self._loss, functools.partial(self._score_from_loss, y_val=y_val, w_val=w_val)
                )
                depths, sharing, heads, start = self._member_search(k, members, validation)
                members.append(search_depths(
                    self._build_network, depths, sharing, heads, train_data, val_data, objective,
                    self._training_config(), member_seed, verbose=int(self.verbose),
                    label=f"{type(self).__name__}[{k}]" if k else type(self).__name__,
                    start_from=start, follow=k > 0,
                ))
        self._set_search_results(members)
        return self

    def _member_search(self, k: int, members: list[SearchResult], validation) -> tuple:
        """What member ``k`` of the ensemble trains: ``(depths, weight_sharing, mlp_depths,
        start_from)`` for :func:`~neumiss.search.search_depths` (members ``k >= 1`` keep
        every fine-tune, so that all members share member 0's weight mode and head).

        Member 0 searches every candidate. With ``validation_data`` every member
        shares its validation rows, so the others repeat member 0's path to its
        choice: its depth in the chain's weight mode and head, from the network
        member 0 started that depth from, then the fine-tunes that member 0 kept
        (untying, another head). With a validation split of their own they train
        member 0's choice from scratch: member 0's networks were trained on rows
        a member holds out.
        """
        if k == 0:
            return self._candidate_depths(), self.weight_sharing, self._candidate_mlp_depths(), None
        first = members[0]
        chosen = first.best
        if validation is None:
            return [chosen.depth], chosen.weight_sharing, [chosen.mlp_depth], None
        untied = first.untied is not None and chosen.weight_sharing == "independent"
        chain_head = self._candidate_mlp_depths()[0]
        heads = [chain_head] + [chosen.mlp_depth] * (chosen.mlp_depth != chain_head)
        sharing = self.weight_sharing if untied else chosen.weight_sharing
        return [chosen.depth], sharing, heads, first.predecessor

    def _set_search_results(self, members: list[SearchResult]) -> None:
        """Fitted attributes from the search of member 0 and the training of the others."""
        best = members[0].best
        networks = [member.best.network for member in members]
        self.network_ = (
            networks[0] if len(networks) == 1 else EnsembleNetwork(networks, self._combine())
        )
        self.best_depth_ = best.depth
        self.weight_sharing_ = best.weight_sharing
        self.mlp_depth_ = best.mlp_depth
        self.history_ = best.result.history
        self.n_epochs_ = best.result.n_epochs
        self.best_epoch_ = best.result.best_epoch
        self.depth_results_ = members[0].depth_results
        self.untied_result_ = members[0].untied
        self.head_results_ = members[0].heads
        self.members_ = [member.best.summary() for member in members]
        self.validation_score_ = float(np.mean([m["val_score"] for m in self.members_]))

    def _warn_features_never_observed(self, X: np.ndarray) -> None:
        """Warn about input columns whose encoded columns are missing in every row of ``X``."""
        columns = self.encoder_.input_index()
        never_observed = np.unique(columns[np.isnan(X).all(axis=0)])
        if never_observed.size:
            names = getattr(self, "feature_names_in_", None)
            labels = [names[i] if names is not None else int(i) for i in never_observed]
            warnings.warn(
                f"features {labels} are missing in every training row: they carry no "
                "information and are ignored in practice",
                UserWarning,
                stacklevel=3,
            )

    def _set_learning_rate(self) -> None:
        """``learning_rate_``: ``learning_rate``, or its automatic value for the encoded
        columns of ``encoder_`` (:func:`neumiss.training.auto_learning_rate`)."""
        self.learning_rate_ = (
            auto_learning_rate(self.encoder_.n_features_out_)
            if self.learning_rate == "auto" else float(self.learning_rate)
        )

    def _training_config(self) -> TrainingConfig:
        return TrainingConfig(
            optimizer=self.optimizer,
            learning_rate=self.learning_rate_,
            batch_size=None if self.batch_size == "auto" else int(self.batch_size),
            max_epochs=int(self.max_epochs),
            patience=int(self.patience),
            lr_patience=int(self.lr_patience),
            tol=float(self.tol),
            weight_decay=float(self.weight_decay),
        )

    def _split(self, x, mask, y_encoded, weight, validation, seed, device):
        """Training and validation :class:`TrainingData`, and the validation targets and weights.

        ``x``, ``mask``: the network's inputs for every row. Without
        ``validation`` (``(x_val, mask_val, encoded y_val)`` or None),
        ``validation_fraction`` of the rows, drawn with ``seed``, are held out
        (stratified for classes); with it, every row trains.
        Returns ``(train, val or None, encoded y_val, w_val or None)``.
        """

        def tensors(x, mask, y, w):
            return TrainingData(
                torch.from_numpy(x).to(device),
                torch.from_numpy(mask).to(device),
                self._target_tensor(y, device),
                None if w is None else torch.as_tensor(w, dtype=torch.float32, device=device),
            )

        def training_rows(index, y):
            if weight is None:
                return tensors(x[index], mask[index], y, None)
            if not weight[index].sum() > 0:
                raise ValueError("sample_weight is 0 on every training row of the split")
            return tensors(x[index], mask[index], y, weight[index] / np.mean(weight[index]))

        if validation is not None:
            val = tensors(*validation, None)
            return training_rows(slice(None), y_encoded), val, validation[2], None
        n_samples = x.shape[0]
        if self.validation_fraction == 0:
            return training_rows(slice(None), y_encoded), None, y_encoded, weight
        n_val = int(np.ceil(self.validation_fraction * n_samples))
        if n_samples - n_val < 1:
            raise ValueError(
                f"too few rows for validation_fraction={self.validation_fraction}: got "
                f"n_samples={n_samples}; need at least 2 rows (or set validation_fraction=0)"
            )
        train_idx, val_idx = train_test_split(
            np.arange(n_samples), test_size=n_val, random_state=seed,
            stratify=self._stratify(y_encoded),
        )
        y_val = y_encoded[val_idx]
        w_val = None if weight is None else weight[val_idx]
        if w_val is not None and not w_val.sum() > 0:
            w_val = None  # only zero-weight rows held out: validate them unweighted
        val = tensors(x[val_idx], mask[val_idx], y_val, w_val)
        return training_rows(train_idx, y_encoded[train_idx]), val, y_val, w_val

    def _check_validation_data(self, validation_data) -> tuple[np.ndarray, np.ndarray]:
        """Validated ``(X_val, encoded y_val)``; call after the training data set the schema."""
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a pair (X_val, y_val)")
        X_val = check_features(self, validation_data[0], reset=False, tables=True)
        X_val = self.encoder_.transform(X_val)
        y_val = np.asarray(validation_data[1])
        if y_val.ndim != 1 or y_val.shape[0] != X_val.shape[0]:
            raise ValueError(
                f"validation_data: y_val must be 1-D with one value per row of X_val "
                f"({X_val.shape[0]} rows), got shape {y_val.shape}"
            )
        return X_val, self._encode_validation_target(y_val)

    def _candidate_depths(self) -> tuple[int, ...]:
        """The depths to train, increasing and distinct."""
        if isinstance(self.depth, str):
            return AUTO_DEPTHS
        candidates = self.depth if isinstance(self.depth, (list, tuple)) else [self.depth]
        return tuple(sorted({int(v) for v in candidates}))

    def _candidate_mlp_depths(self) -> tuple[int, ...]:
        """The head depths to train: the chain's first, then the fine-tuned ones."""
        return AUTO_MLP_DEPTHS if self.mlp_depth == "auto" else (int(self.mlp_depth),)

    def _build_network(self, depth: int, weight_sharing: str, mlp_depth: int) -> NeuMissNetwork:
        return NeuMissNetwork(
            self.encoder_.n_features_out_,
            n_outputs=self._n_outputs(),
            depth=depth,
            weight_sharing=weight_sharing,
            residual=self.residual,
            mlp_depth=mlp_depth,
            mlp_width=self.mlp_width,
        )

    def _build_fitted_network(self) -> NeuMissNetwork | EnsembleNetwork:
        """An untrained network shaped like ``network_``, to load saved weights into."""
        networks = [
            self._build_network(self.best_depth_, self.weight_sharing_, self.mlp_depth_)
            for _ in range(self.ensemble_size)
        ]
        return networks[0] if len(networks) == 1 else EnsembleNetwork(networks, self._combine())

    # ----------------------------------------------------------------- predict
    def _apply(self, X, *, block_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The network (or its block only) over the encoded, standardized rows of ``X``.

        Rows go through in chunks of :data:`PREDICT_CHUNK`. Returns the encoded
        ``X`` (float64 of shape (n_samples, n_encoded), NaN = missing) and the
        outputs, float64 of shape (n_samples, n_outputs), or (n_samples,
        n_encoded) for the block.
        """
        check_is_fitted(self, "network_")
        X = self.encoder_.transform(check_features(self, X, reset=False, tables=True))
        module = self.network_.block if block_only else self.network_
        device = next(module.parameters()).device
        chunks = []
        self.network_.eval()
        with torch.no_grad(), torch_threads(self.n_jobs):
            if device.type != "cpu":  # standardized on the device: see neumiss.gpu
                from ..network import apply_on_device

                out = apply_on_device(module, self.preprocessor_, X, device,
                                      columns=self.encoder_.output_names())
                return X, check_outputs_finite(out, "network outputs")
            for start in range(0, X.shape[0], PREDICT_CHUNK):
                x, mask = self.preprocessor_.transform(
                    X[start : start + PREDICT_CHUNK], row_offset=start,
                    columns=self.encoder_.output_names(),
                )
                out = module(torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device))
                chunks.append(out.cpu().numpy().astype(np.float64))
        return X, check_outputs_finite(np.concatenate(chunks), "network outputs")

    def _forward(self, X) -> np.ndarray:
        """Raw network outputs, float64 array of shape (n_samples, n_outputs)."""
        return self._apply(X)[1]

    def impute(self, X) -> np.ndarray:
        """The block's estimate of ``E[X_mis | X_obs]`` in the original feature units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), NaN = missing.

        Returns
        -------
        ndarray of shape (n_samples, n_encoded): observed values unchanged,
        missing ones replaced by the learned block's output. The columns are
        the encoded ones (``encoder_.output_names()``): the input columns when
        all are numeric, one column per category for categorical ones. With an
        MLP head (or for MNAR data) this is the representation the head uses,
        not an estimate of the missing values themselves.
        """
        X, out = self._apply(X, block_only=True)
        return np.where(np.isnan(X), self.preprocessor_.inverse_transform(out), X)

    # ------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the fitted estimator to ``path`` (no training data, loadable without GPU).

        The file holds only tensors, numbers and strings (``torch.load(...,
        weights_only=True)`` reads it), so loading never executes code, and a
        SHA-256 digest of them, which loading checks. Read it back with
        :func:`neumiss.load`.
        """
        check_is_fitted(self, "network_")
        persistence.save_estimator(self, path)

    def to_onnx(self, path=None, **kwargs):
        """Export to ONNX (inputs ``X`` and ``M``); see :func:`neumiss.onnx_export.export_onnx`."""
        from ..export import export_onnx  # onnx is loaded only when exporting

        return export_onnx(self, path, **kwargs)

    def __getstate__(self):
        state = self.__dict__.copy()
        network = state.pop("network_", None)
        if network is not None:
            state["_network_state"] = {
                k: v.detach().cpu().clone() for k, v in network.state_dict().items()
            }
        return state

    def __setstate__(self, state):
        network_state = state.pop("_network_state", None)
        missing = [name for name in persistence.REQUIRED_ATTRIBUTES if name not in state]
        if network_state is not None and missing:
            raise ValueError(
                f"this pickled {type(self).__name__} lacks {', '.join(missing)}: it was "
                f"written by an older neumiss (model format < {persistence.FORMAT_VERSION}); "
                "refit it"
            )
        self.__dict__.update(state)
        if network_state is not None:
            network = self._build_fitted_network()
            network.load_state_dict(network_state)
            network.eval()
            self.network_ = network

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.non_deterministic = False
        return tags


