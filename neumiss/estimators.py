"""scikit-learn estimators built on :class:`~neumiss.block.NeuMissNetwork`.

``fit`` validates the parameters (:mod:`neumiss.constraints`) and the data
(:mod:`neumiss.validation`), fits the preprocessing
(:mod:`neumiss.preprocessing`), then trains the candidate networks
(:func:`neumiss.search.search_depths`). Saving goes through
:mod:`neumiss.persistence`, ONNX export through :mod:`neumiss.onnx_export`.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from . import persistence
from .block import NeuMissNetwork
from .constraints import (
    AnyOf,
    Boolean,
    InstanceOf,
    Integer,
    NoneValue,
    Options,
    Pattern,
    Real,
    SequenceOf,
    check_params,
)
from .encoding import TableEncoder
from .ensemble import EnsembleNetwork
from .preprocessing import (
    Standardizer,
    check_outputs_finite,
    mean_scale,
    scaled_r2_score,
)
from .search import AUTO_DEPTHS, Objective, SearchResult, search_depths
from .training import OPTIMIZERS, TrainingConfig, TrainingData, torch_threads
from .validation import check_class_labels, check_features, check_training_data

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


class _BaseNeuMiss(BaseEstimator):
    """Shared fitting machinery of :class:`NeuMissRegressor` and :class:`NeuMissClassifier`.

    Subclasses define how targets are encoded, the loss, the number of network
    outputs and how raw network outputs become predictions.
    """

    _parameter_constraints = {
        "depth": AnyOf(Integer(0), Options("auto"), SequenceOf(Integer(0))),
        "mlp_depth": Integer(0),
        "mlp_width": AnyOf(NoneValue(), Integer(1)),
        "weight_sharing": Options("independent", "shared", "auto"),
        "residual": Boolean(),
        "compress_tails": Boolean(),
        "ensemble_size": Integer(1),
        "optimizer": Options(*OPTIMIZERS),
        "learning_rate": Real(0, None, closed="neither"),
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
        mlp_depth=2,
        mlp_width=None,
        weight_sharing="auto",
        residual=True,
        compress_tails=False,
        ensemble_size=5,
        optimizer=_TRAINING.optimizer,
        learning_rate=_TRAINING.learning_rate,
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
                # Member 0 searches depth and weight sharing; the others train its choice
                # on their own validation split and initialisation.
                member_seed = seed + k
                train_data, val_data, y_val, w_val = self._split(
                    x, mask, y_encoded, weight, validation, member_seed, device
                )
                objective = Objective(
                    self._loss, functools.partial(self._score_from_loss, y_val=y_val, w_val=w_val)
                )
                depths, sharing = (
                    (self._candidate_depths(), self.weight_sharing) if k == 0
                    else ([members[0].best.depth], members[0].best.weight_sharing)
                )
                members.append(search_depths(
                    self._build_network, depths, sharing, train_data, val_data, objective,
                    self._training_config(), member_seed, verbose=int(self.verbose),
                    label=f"{type(self).__name__}[{k}]" if k else type(self).__name__,
                ))
        self._set_search_results(members)
        return self

    def _set_search_results(self, members: list[SearchResult]) -> None:
        """Fitted attributes from the search of member 0 and the training of the others."""
        best = members[0].best
        networks = [member.best.network for member in members]
        self.network_ = (
            networks[0] if len(networks) == 1 else EnsembleNetwork(networks, self._combine())
        )
        self.best_depth_ = best.depth
        self.weight_sharing_ = best.weight_sharing
        self.history_ = best.result.history
        self.n_epochs_ = best.result.n_epochs
        self.best_epoch_ = best.result.best_epoch
        self.depth_results_ = members[0].depth_results
        self.untied_result_ = members[0].untied
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

    def _training_config(self) -> TrainingConfig:
        return TrainingConfig(
            optimizer=self.optimizer,
            learning_rate=float(self.learning_rate),
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

    def _build_network(self, depth: int, weight_sharing: str) -> NeuMissNetwork:
        return NeuMissNetwork(
            self.encoder_.n_features_out_,
            n_outputs=self._n_outputs(),
            depth=depth,
            weight_sharing=weight_sharing,
            residual=self.residual,
            mlp_depth=self.mlp_depth,
            mlp_width=self.mlp_width,
        )

    def _build_fitted_network(self) -> NeuMissNetwork | EnsembleNetwork:
        """An untrained network shaped like ``network_``, to load saved weights into."""
        networks = [
            self._build_network(self.best_depth_, self.weight_sharing_)
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
        from .onnx_export import export_onnx  # onnx is loaded only when exporting

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


class NeuMissRegressor(RegressorMixin, _BaseNeuMiss):
    """NeuMiss network regressor: learns E[y | X_obs, M] with missing values in X.

    A :class:`~neumiss.block.NeuMissBlock` approximates the conditional
    expectation of the missing features for every missingness pattern at once;
    a linear layer (or an MLP, ``mlp_depth >= 1``) maps it to ``y``. NaN in
    ``X`` marks a missing value; no imputation is needed beforehand.

    The defaults are those that did best on real data with missing values
    (``results/realdata/``): the depth and weight sharing chosen on
    validation, residual connections, a two-layer MLP head and an ensemble of
    5 networks. ``depth=3, mlp_depth=0, weight_sharing="independent",
    residual=False, ensemble_size=1`` is the paper's network.

    Parameters
    ----------
    depth : int >= 0, "auto" or sequence of int, default="auto"
        Number of matrices in the NeuMiss block before ``W_mix``: ``S^(0)`` and
        ``depth - 1`` Neumann iterations (the authors' convention). A sequence
        of candidate depths (``"auto"``: :data:`neumiss.search.AUTO_DEPTHS`) trains them on the
        same split in increasing order, each starting from the weights learned
        by the previous one (the matrices they share; a new iteration starts
        near the identity), and keeps the one with the best validation loss
        (``best_depth_``). The search stops at the first depth that does not
        improve the validation loss.
    mlp_depth : int, default=2
        Hidden ReLU layers after the block (NeuMiss+MLP for nonlinear targets).
    mlp_width : int or None, default=None
        Width of those hidden layers; ``None`` means ``n_features``.
    weight_sharing : {"independent", "shared", "auto"}, default="auto"
        One matrix per Neumann iteration (paper 2020) or one shared matrix.
        ``"auto"`` trains with a shared matrix, then, at the chosen depth (2 or
        more), fine-tunes an independent copy initialised to it ("untied"; with
        ``tol=0``) and keeps whichever has the lower validation loss
        (``weight_sharing_``). The fine-tune runs only when there are at least
        :data:`neumiss.search.UNTIE_ROWS_PER_PARAMETER` training rows per parameter of the
        untied block, ``(depth + 1) * n_features**2``; below that it never won
        in the paper's grid.
    residual : bool, default=True
        Residual connections in the block (the ``+ Id`` of the Neumann recursion).
    compress_tails : bool, default=False
        Numeric columns with heavy tails (an observed value beyond 8 robust
        deviations from the median) are scaled by their median and robust
        deviation and compressed smoothly beyond 3 of them (see
        :class:`~neumiss.preprocessing.Standardizer`); other columns are only
        standardized.
    ensemble_size : int >= 1, default=5
        Number of networks averaged. Member 0 makes the search over ``depth``
        and ``weight_sharing``; the others train its choice from their own
        initialisation, each on its own random validation split of
        ``validation_fraction`` of the rows. Predictions average the members'
        outputs (regression) or class probabilities (classification).
    optimizer : {"adam", "sgd"}, default="adam"
    learning_rate : float, default=1e-2
        Initial learning rate (on standardized X and y).
    batch_size : int or "auto", default="auto"
        Mini-batch size; ``"auto"`` is ``min(2048, max(8, n_train // 64))``.
    max_epochs : int, default=100
    validation_fraction : float in [0, 1), default=0.1
        Share of rows held out for early stopping, the learning-rate schedule
        and ``depth="auto"``; 0 uses the training loss instead.
    patience : int, default=3
        Epochs without validation improvement before stopping; the weights of
        the best epoch are restored.
    lr_patience : int, default=1
        Epochs without improvement before the learning rate is multiplied by
        0.2 (ReduceLROnPlateau, as in the paper).
    tol : float in [0, 1), default=2e-3
        Relative decrease of the validation loss an epoch needs to count as an
        improvement for ``patience`` and ``lr_patience`` (0: any decrease).
        The weights kept are still those of the lowest validation loss.
    weight_decay : float, default=0.0
        L2 penalty of the optimizer.
    random_state : int, RandomState or None, default=None
        Seeds the split, the initialisation and the shuffling: repeatable on CPU.
    device : {"cpu", "cuda", "auto"}, default="cpu"
    n_jobs : int or None, default=None
        Torch CPU threads during fit and predict (restored afterwards); None
        means 1, -1 all cores. NeuMiss matrices are small (d x d), so one
        thread is usually fastest and never stalls on a busy machine.
    verbose : int, default=0
        ``>= 1`` shows a tqdm progress bar (epoch, losses, validation R²).

    Attributes
    ----------
    network_ : NeuMissNetwork or EnsembleNetwork
        The trained network, or the ensemble of ``ensemble_size`` members.
    members_ : list of dict
        Per member: ``val_loss``, ``val_score``, ``epochs`` and ``seconds`` of
        its kept network (member 0 first).
    best_depth_ : int
        The depth used (the chosen one when several were tried).
    weight_sharing_ : {"independent", "shared"}
        The weight mode of ``network_``.
    untied_result_ : dict or None
        With ``weight_sharing="auto"``: ``val_loss``, ``val_score``, ``epochs`` and
        ``seconds`` of the untied fine-tuning (None when it did not run: other
        ``weight_sharing``, a depth below 2 or too few rows per parameter).
    depth_results_ : dict
        For each depth trained: ``val_loss`` and ``val_score`` (validation R²)
        of its best epoch, ``epochs`` trained and training ``seconds``.
    history_ : dict of lists
        Per epoch: ``train_loss``, ``val_loss`` (MSE on standardized y),
        ``val_score`` (validation R²) and ``lr``.
    n_epochs_, best_epoch_ : int
    validation_score_ : float
        Validation R² of the restored weights (the members' mean for an ensemble).
    encoder_ : TableEncoder
        How each input column is encoded (numeric; boolean as 0/1; categorical
        as one column per category, a missing or unseen category marking its
        whole group missing).
    preprocessor_ : Standardizer
        Standardization of the encoded columns from their observed entries
        (``mean_``, ``scale_``).
    y_mean_, y_scale_ : float
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when X was a DataFrame with string columns.

    Examples
    --------
    >>> from neumiss import NeuMissRegressor
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 4)); y = X.sum(axis=1)
    >>> X[rng.random(X.shape) < 0.3] = np.nan
    >>> model = NeuMissRegressor(max_epochs=5, random_state=0).fit(X, y)
    >>> model.predict(X[:3]).shape
    (3,)
    """

    _y_numeric = True

    def _encode_target(self, y):
        y = y.astype(np.float64)
        self.y_mean_, self.y_scale_ = mean_scale(y)  # float64, at any magnitude of y
        return (y - self.y_mean_) / self.y_scale_

    def _encode_validation_target(self, y):
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError("validation_data: y_val must be numeric") from exc
        if not np.isfinite(y).all():
            raise ValueError("validation_data: y_val contains NaN or infinity")
        return (y - self.y_mean_) / self.y_scale_

    def _n_outputs(self):
        return 1

    def _loss(self, output, target):
        return (output[:, 0] - target) ** 2

    def _score_from_loss(self, val_loss, y_val, w_val):
        mean = np.average(y_val, weights=w_val)
        variance = float(np.average((y_val - mean) ** 2, weights=w_val))
        return 1.0 - val_loss / variance if variance > 0 else -val_loss

    def predict(self, X):
        """Predict ``y`` for ``X`` (NaN = missing): ndarray of shape (n_samples,)."""
        return check_outputs_finite(self._forward(X)[:, 0] * self.y_scale_ + self.y_mean_)

    def score(self, X, y, sample_weight=None):
        """R² of ``predict(X)`` against ``y``, computed in units of ``y_scale_`` (R² does
        not depend on them), so that it holds for targets near 1e±300 too."""
        return scaled_r2_score(y, self.predict(X), self.y_scale_, sample_weight)


class NeuMissClassifier(ClassifierMixin, _BaseNeuMiss):
    """NeuMiss network classifier (binary or multiclass) with missing values in X.

    Same network and parameters as :class:`NeuMissRegressor`; the head outputs
    one logit (binary, logistic loss) or one per class (softmax cross-entropy).
    ``history_["val_score"]`` is minus the validation log-loss.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    plus those of :class:`NeuMissRegressor` except ``y_mean_`` and ``y_scale_``.
    """

    _y_numeric = False

    def _encode_target(self, y):
        check_class_labels(y)
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y; got only one "
                f"class: {self.classes_[0]!r}"
            )
        return encoded

    def _encode_validation_target(self, y):
        unknown = np.setdiff1d(y, self.classes_)
        if unknown.size:
            raise ValueError(
                f"validation_data: y_val has labels not seen in y: {unknown.tolist()!r}"
            )
        return np.searchsorted(self.classes_, y)

    def _n_outputs(self):
        n_classes = len(self.classes_)
        return 1 if n_classes == 2 else n_classes

    def _combine(self):
        return "binary_probability" if len(self.classes_) == 2 else "probability"

    def _target_tensor(self, y, device):
        dtype = torch.float32 if len(self.classes_) == 2 else torch.int64
        return torch.as_tensor(y, dtype=dtype, device=device)

    def _loss(self, output, target):
        if output.shape[1] == 1:
            return torch.nn.functional.binary_cross_entropy_with_logits(
                output[:, 0], target, reduction="none"
            )
        return torch.nn.functional.cross_entropy(output, target, reduction="none")

    def _stratify(self, y):
        counts = np.bincount(y)
        n_val = int(np.ceil(self.validation_fraction * y.shape[0]))
        return y if counts.min() >= 2 and n_val >= counts.shape[0] else None

    def decision_function(self, X):
        """Logits: shape (n_samples,) for two classes, (n_samples, n_classes) otherwise."""
        out = self._forward(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities, ndarray of shape (n_samples, n_classes), rows sum to 1."""
        out = self._forward(X)
        if out.shape[1] == 1:
            p1 = expit(out[:, 0])
            return np.column_stack([1.0 - p1, p1])
        out = out - out.max(axis=1, keepdims=True)
        proba = np.exp(out)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Most probable class of each row, ndarray of shape (n_samples,)."""
        out = self._forward(X)
        index = (out[:, 0] > 0).astype(int) if out.shape[1] == 1 else out.argmax(axis=1)
        return self.classes_[index]


def load(path):
    """Load a NeuMiss estimator written by its ``save`` method.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    NeuMissRegressor or NeuMissClassifier, fitted, on CPU.

    Raises
    ------
    ValueError
        If the file is not a model saved by this version's format, or is
        damaged or modified (failed integrity check, unknown parameters,
        missing attributes, weights of the wrong shape, ...): the message names
        the file and the problem.
    """
    classes = {cls.__name__: cls for cls in (NeuMissRegressor, NeuMissClassifier)}
    return persistence.load_estimator(path, classes)
