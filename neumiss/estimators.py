"""scikit-learn estimators built on :class:`~neumiss.block.NeuMissNetwork`."""

from __future__ import annotations

import dataclasses
import numbers
import time
import warnings
from typing import NamedTuple

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import persistence
from ._validation import check_features, check_training_data, observed_mean_scale
from .block import WEIGHT_MODES, NeuMissNetwork
from .onnx_export import export_onnx
from .training import (
    OPTIMIZERS,
    TrainingConfig,
    TrainingData,
    TrainingResult,
    torch_threads,
    train,
)

#: Depths tried by ``depth="auto"``, each trained on the same split; the one
#: with the lowest validation loss is kept (the paper picks depth on validation).
#: Each doubles the previous one, so that a warm start stays close (from depth 4
#: straight to 16 took 95 epochs and ended worse than depth 8 in our trials);
#: depth 1 is left out: depth 2 did as well and it saved a fifth of the time.
AUTO_DEPTHS = (0, 2, 4, 8, 16)

#: Largest mini-batch of ``batch_size="auto"``, which takes ``n_train // 64``
#: (at least 8) below it: small data sets get enough (and noisier) steps, large
#: ones get batches big enough to average out the gradient noise that, with
#: Adam at lr 1e-2, made batches of 256 stop early at n_train = 1e5 (the gap to
#: the Bayes rate shrank from -0.057 to -0.048 at d = 50, and epochs ran 2x faster).
AUTO_BATCH_SIZE = 2048

#: Values of the estimators' ``weights``: the block's modes, or "auto" (shared, then untied).
ESTIMATOR_WEIGHT_MODES = (*WEIGHT_MODES, "auto")

#: ``weights="auto"`` unties the shared matrix only when the training set has at
#: least this many rows per parameter of the untied block (``(depth + 1) d^2``).
#: In the paper's grid (3 repeats, 108 runs) untying never won below that ratio
#: (d = 10 at n_train = 1e4, d = 20 below 1e5, d = 50 everywhere) and often won
#: above it (d = 10 from n_train = 2e4), so below it the fine-tune is skipped.
UNTIE_ROWS_PER_PARAMETER = 10


class _Candidate(NamedTuple):
    """One trained network of the depth / weight-mode search."""

    depth: int
    weights: str
    result: TrainingResult
    network: NeuMissNetwork

    @property
    def val_loss(self) -> float:
        return self.result.best_val_loss


#: Rows per forward pass at prediction time (bounds memory, not results).
PREDICT_CHUNK = 65536


def _resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is available; use 'cpu' or 'auto'")
    return torch.device(device)


class _BaseNeuMiss(BaseEstimator):
    """Shared fitting machinery of :class:`NeuMissRegressor` and :class:`NeuMissClassifier`.

    Subclasses define how targets are encoded, the loss, the number of network
    outputs and how raw network outputs become predictions.
    """

    def __init__(
        self,
        depth=3,
        *,
        mlp_depth=0,
        mlp_width=None,
        weights="independent",
        residual=False,
        optimizer="adam",
        learning_rate=1e-2,
        batch_size="auto",
        max_epochs=100,
        validation_fraction=0.1,
        patience=8,
        lr_patience=2,
        tol=0.0,
        weight_decay=0.0,
        random_state=None,
        device="cpu",
        n_jobs=None,
        verbose=0,
    ):
        self.depth = depth
        self.mlp_depth = mlp_depth
        self.mlp_width = mlp_width
        self.weights = weights
        self.residual = residual
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

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        def integer(name, low):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

        def positive(name, allow_zero=False):
            value = getattr(self, name)
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
            ok = ok and (value >= 0 if allow_zero else value > 0) and np.isfinite(value)
            if not ok:
                bound = ">= 0" if allow_zero else "> 0"
                raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")

        self._candidate_depths()  # validates depth
        integer("mlp_depth", 0)
        if self.mlp_width is not None:
            integer("mlp_width", 1)
        if self.n_jobs is not None and (
            not isinstance(self.n_jobs, numbers.Integral) or self.n_jobs == 0
        ):
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {self.n_jobs!r}")
        if self.batch_size != "auto":
            integer("batch_size", 1)
        integer("max_epochs", 1)
        integer("patience", 1)
        integer("lr_patience", 0)
        positive("learning_rate")
        positive("weight_decay", allow_zero=True)
        if not (isinstance(self.tol, numbers.Real) and not isinstance(self.tol, bool)
                and 0.0 <= self.tol < 1.0):
            raise ValueError(f"tol must be a number in [0, 1), got {self.tol!r}")
        if self.weights not in ESTIMATOR_WEIGHT_MODES:
            raise ValueError(
                f"weights must be one of {ESTIMATOR_WEIGHT_MODES}, got {self.weights!r}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        fraction = self.validation_fraction
        if not isinstance(fraction, numbers.Real) or not 0.0 <= fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1), got {fraction!r}")

    # ------------------------------------------------------------ subclass API
    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _encode_validation_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _n_outputs(self) -> int:
        raise NotImplementedError

    def _loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.as_tensor(y, dtype=torch.float32, device=device)

    def _score_from_loss(self, val_loss: float, y_val: np.ndarray) -> float:
        return -val_loss

    def _stratify(self, y: np.ndarray):
        return None

    # ----------------------------------------------------------- preprocessing
    def _standardize(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Float32 ``(x, mask)``: ``(X - x_mean_) / x_scale_`` with 0 for missing entries."""
        mask = np.isnan(X)
        x = (X - self.x_mean_) / self.x_scale_
        x[mask] = 0.0
        return x.astype(np.float32), mask.astype(np.float32)

    def _fit_standardization(self, X: np.ndarray) -> None:
        all_missing = np.flatnonzero(np.isnan(X).all(axis=0))
        if all_missing.size:
            names = self._feature_labels(all_missing)
            warnings.warn(
                f"features {names} are missing in every training row: they carry no "
                "information and are ignored in practice",
                UserWarning,
                stacklevel=4,
            )
        self.x_mean_, self.x_scale_ = observed_mean_scale(X)

    def _feature_labels(self, indices) -> list:
        names = getattr(self, "feature_names_in_", None)
        return [names[i] if names is not None else int(i) for i in indices]

    # --------------------------------------------------------------------- fit
    def fit(self, X, y, validation_data=None):
        """Fit the network on ``X`` (NaN = missing) and ``y``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric features; NaN (or None / pd.NA in a DataFrame) marks a missing value.
        y : array-like of shape (n_samples,)
            Targets, without missing values.
        validation_data : pair (X_val, y_val), optional
            Held-out rows for early stopping, the learning-rate schedule and
            ``depth="auto"``. When given, every row of ``X`` is used for
            training and ``validation_fraction`` is ignored.

        Returns
        -------
        self
        """
        self._check_params()
        with torch_threads(self.n_jobs):
            return self._fit(X, y, validation_data)

    def _check_validation_data(self, validation_data) -> tuple[np.ndarray, np.ndarray]:
        """Validated ``(X_val, encoded y_val)``; call after the training data set the schema."""
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a pair (X_val, y_val)")
        X_val = check_features(self, validation_data[0], reset=False)
        y_val = np.asarray(validation_data[1])
        if y_val.ndim != 1 or y_val.shape[0] != X_val.shape[0]:
            raise ValueError(
                f"validation_data: y_val must be 1-D with one value per row of X_val "
                f"({X_val.shape[0]} rows), got shape {y_val.shape}"
            )
        return X_val, self._encode_validation_target(y_val)

    def _fit(self, X, y, validation_data):
        X, y = check_training_data(self, X, y, y_numeric=self._y_numeric)
        y_encoded = self._encode_target(y)
        device = _resolve_device(self.device)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))

        self._fit_standardization(X)
        x, mask = self._standardize(X)

        def tensors(x, mask, y):
            return TrainingData(
                torch.from_numpy(x).to(device),
                torch.from_numpy(mask).to(device),
                self._target_tensor(y, device),
            )

        if validation_data is not None:
            X_val, y_val = self._check_validation_data(validation_data)
            train_data = tensors(x, mask, y_encoded)
            val_data = tensors(*self._standardize(X_val), y_val)
        else:
            train_data, val_data, y_val = self._split(x, mask, y_encoded, seed, tensors)
        config = TrainingConfig(
            optimizer=self.optimizer,
            learning_rate=float(self.learning_rate),
            batch_size=self._batch_size(len(train_data)),
            max_epochs=int(self.max_epochs),
            patience=int(self.patience),
            lr_patience=int(self.lr_patience),
            tol=float(self.tol),
            weight_decay=float(self.weight_decay),
        )

        def fit_one(depth, weights, start_from, config) -> tuple[_Candidate, dict]:
            start = time.perf_counter()
            generator = torch.Generator().manual_seed(seed)
            network = self._build_network(depth, weights)
            network.reset_parameters(generator)
            if start_from is not None:
                network.warm_start_from(start_from)
            network = network.to(device)
            result = train(
                network, train_data, val_data, self._loss, config, generator,
                score_fn=lambda loss: self._score_from_loss(loss, y_val),
                verbose=self.verbose, description=f"{type(self).__name__}(depth={depth})",
            )
            summary = {
                "val_loss": result.best_val_loss,
                "val_score": result.best_val_score,
                "epochs": result.n_epochs,
                "seconds": time.perf_counter() - start,
            }
            return _Candidate(depth, weights, result, network), summary

        chain_weights = "shared" if self.weights == "auto" else self.weights
        best = None
        self.depth_results_ = {}
        for depth in self._candidate_depths():
            fitted, self.depth_results_[depth] = fit_one(
                depth, chain_weights, best.network if best is not None else None, config
            )
            if best is not None and fitted.val_loss >= best.val_loss:
                break  # deeper candidates would start from a depth that already overfits
            best = fitted
        self.untied_result_ = None
        if self.weights == "auto" and self._worth_untying(best.depth, len(train_data)):
            # Untie the shared matrix at the chosen depth; keep it if validation
            # improves. Its gains come in small steps (MCAR, d = 10, n_train = 1e5:
            # +0.005 validation R² over ~20 epochs), so every improvement counts.
            fine_tune = dataclasses.replace(config, tol=0.0)
            untied, self.untied_result_ = fit_one(
                best.depth, "independent", best.network, fine_tune
            )
            if untied.val_loss < best.val_loss:
                best = untied
        self.network_ = best.network
        self.best_depth_ = best.depth
        self.weights_ = best.weights
        self.history_ = best.result.history
        self.n_epochs_ = best.result.n_epochs
        self.best_epoch_ = best.result.best_epoch
        self.validation_score_ = best.result.best_val_score
        return self

    def _split(self, x, mask, y_encoded, seed, tensors):
        """Internal train/validation split of ``validation_fraction`` of the rows."""
        n_samples = x.shape[0]
        if self.validation_fraction == 0:
            return tensors(x, mask, y_encoded), None, y_encoded
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
        train = tensors(x[train_idx], mask[train_idx], y_encoded[train_idx])
        val = tensors(x[val_idx], mask[val_idx], y_encoded[val_idx])
        return train, val, y_encoded[val_idx]

    def _candidate_depths(self) -> tuple[int, ...]:
        """The depths to train, in increasing order (validates ``depth``)."""
        if isinstance(self.depth, str) and self.depth == "auto":
            return AUTO_DEPTHS
        candidates = self.depth if isinstance(self.depth, (list, tuple)) else [self.depth]
        if len(candidates) == 0 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0
            for v in candidates
        ):
            raise ValueError(
                "depth must be an integer >= 0, 'auto' or a non-empty list of integers >= 0, "
                f"got {self.depth!r}"
            )
        return tuple(sorted({int(v) for v in candidates}))

    def _worth_untying(self, depth: int, n_train: int) -> bool:
        """Whether ``weights="auto"`` fine-tunes an untied copy at ``depth``: it needs
        a Neumann iteration (depth >= 2) and :data:`UNTIE_ROWS_PER_PARAMETER`
        training rows per parameter of the untied block, ``(depth + 1) d^2``."""
        untied_parameters = (depth + 1) * self.n_features_in_**2
        return depth >= 2 and n_train >= UNTIE_ROWS_PER_PARAMETER * untied_parameters

    def _batch_size(self, n_train: int) -> int:
        if self.batch_size == "auto":
            return int(min(AUTO_BATCH_SIZE, max(8, n_train // 64)))
        return int(self.batch_size)

    def _build_network(self, depth: int, weights: str) -> NeuMissNetwork:
        return NeuMissNetwork(
            self.n_features_in_,
            n_outputs=self._n_outputs(),
            depth=depth,
            weights=weights,
            residual=self.residual,
            mlp_depth=self.mlp_depth,
            mlp_width=self.mlp_width,
        )

    def _fitted_network_shell(self) -> NeuMissNetwork:
        """An untrained network shaped like ``network_``, to load saved weights into.

        Models saved before ``weights_`` existed used ``weights`` as given.
        """
        return self._build_network(self.best_depth_, getattr(self, "weights_", self.weights))

    # ----------------------------------------------------------------- predict
    def _forward(self, X) -> np.ndarray:
        """Raw network outputs, float64 array of shape (n_samples, n_outputs)."""
        check_is_fitted(self, "network_")
        X = check_features(self, X, reset=False)
        x, mask = self._standardize(X)
        network = self.network_
        network.eval()
        device = next(network.parameters()).device
        out = np.empty((X.shape[0], self._n_outputs()), dtype=np.float64)
        with torch.no_grad(), torch_threads(self.n_jobs):
            for start in range(0, X.shape[0], PREDICT_CHUNK):
                stop = start + PREDICT_CHUNK
                xb = torch.from_numpy(x[start:stop]).to(device)
                mb = torch.from_numpy(mask[start:stop]).to(device)
                out[start:stop] = network(xb, mb).cpu().numpy()
        return out

    def impute(self, X) -> np.ndarray:
        """The block's estimate of ``E[X_mis | X_obs]`` in the original feature units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), NaN = missing.

        Returns
        -------
        ndarray of shape (n_samples, n_features): observed values unchanged,
        missing ones replaced by the learned block's output. With an MLP head
        (or for MNAR data) this is the representation the head uses, not an
        estimate of the missing values themselves.
        """
        check_is_fitted(self, "network_")
        X = check_features(self, X, reset=False)
        x, mask = self._standardize(X)
        block = self.network_.block
        device = next(block.parameters()).device
        with torch.no_grad(), torch_threads(self.n_jobs):
            out = block(torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device))
        imputed = out.cpu().numpy().astype(np.float64) * self.x_scale_ + self.x_mean_
        return np.where(np.isnan(X), imputed, X)

    # ------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the fitted estimator to ``path`` (no training data, loadable without GPU).

        The file holds only tensors, numbers and strings (``torch.load(...,
        weights_only=True)`` reads it), so loading never executes code.
        """
        check_is_fitted(self, "network_")
        persistence.save_estimator(self, path)

    def to_onnx(self, path=None, **kwargs):
        """Export to ONNX (inputs ``X`` and ``M``); see :func:`neumiss.onnx_export.export_onnx`."""
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
            network = self._fitted_network_shell()
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

    Parameters
    ----------
    depth : int >= 0, "auto" or sequence of int, default=3
        Number of matrices in the NeuMiss block before ``W_mix``: ``S^(0)`` and
        ``depth - 1`` Neumann iterations (the authors' convention). A sequence
        of candidate depths (``"auto"``: :data:`AUTO_DEPTHS`) trains them on the
        same split in increasing order, each starting from the weights learned
        by the previous one (the matrices they share; a new iteration starts
        near the identity), and keeps the one with the best validation loss
        (``best_depth_``). The search stops at the first depth that does not
        improve the validation loss.
    mlp_depth : int, default=0
        Hidden ReLU layers after the block (NeuMiss+MLP for nonlinear targets).
    mlp_width : int or None, default=None
        Width of those hidden layers; ``None`` means ``n_features``.
    weights : {"independent", "shared", "auto"}, default="independent"
        One matrix per Neumann iteration (paper 2020) or one shared matrix.
        ``"auto"`` trains with a shared matrix, then, at the chosen depth (2 or
        more), fine-tunes an independent copy initialised to it ("untied"; with
        ``tol=0``) and keeps whichever has the lower validation loss
        (``weights_``). The fine-tune runs only when there are at least
        :data:`UNTIE_ROWS_PER_PARAMETER` training rows per parameter of the
        untied block, ``(depth + 1) * n_features**2``; below that it never won
        in the paper's grid.
    residual : bool, default=False
        Residual connections in the block (the ``+ Id`` of the Neumann recursion).
    optimizer : {"adam", "sgd"}, default="adam"
    learning_rate : float, default=1e-2
        Initial learning rate (on standardized X and y).
    batch_size : int or "auto", default="auto"
        Mini-batch size; ``"auto"`` is ``min(2048, max(8, n_train // 64))``.
    max_epochs : int, default=100
    validation_fraction : float in [0, 1), default=0.1
        Share of rows held out for early stopping, the learning-rate schedule
        and ``depth="auto"``; 0 uses the training loss instead.
    patience : int, default=8
        Epochs without validation improvement before stopping; the weights of
        the best epoch are restored.
    lr_patience : int, default=2
        Epochs without improvement before the learning rate is multiplied by
        0.2 (ReduceLROnPlateau, as in the paper).
    tol : float in [0, 1), default=0.0
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
    network_ : NeuMissNetwork
    best_depth_ : int
        The depth used (the chosen one when several were tried).
    weights_ : {"independent", "shared"}
        The weight mode of ``network_``.
    untied_result_ : dict or None
        With ``weights="auto"``: ``val_loss``, ``val_score``, ``epochs`` and
        ``seconds`` of the untied fine-tuning (None when it did not run: other
        ``weights``, a depth below 2 or too few rows per parameter).
    depth_results_ : dict
        For each depth trained: ``val_loss`` and ``val_score`` (validation R²)
        of its best epoch, ``epochs`` trained and training ``seconds``.
    history_ : dict of lists
        Per epoch: ``train_loss``, ``val_loss`` (MSE on standardized y),
        ``val_score`` (validation R²) and ``lr``.
    n_epochs_, best_epoch_ : int
    validation_score_ : float
        Validation R² of the restored weights.
    x_mean_, x_scale_ : ndarray of shape (n_features,)
        Standardization of X, from observed entries only.
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
        self.y_mean_ = float(y.mean())
        scale = float(y.std())
        self.y_scale_ = scale if scale > 0 else 1.0
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
        return torch.mean((output[:, 0] - target) ** 2)

    def _score_from_loss(self, val_loss, y_val):
        variance = float(np.var(y_val))
        return 1.0 - val_loss / variance if variance > 0 else -val_loss

    def predict(self, X):
        """Predict ``y`` for ``X`` (NaN = missing): ndarray of shape (n_samples,)."""
        return self._forward(X)[:, 0] * self.y_scale_ + self.y_mean_


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

    def _target_tensor(self, y, device):
        dtype = torch.float32 if len(self.classes_) == 2 else torch.int64
        return torch.as_tensor(y, dtype=dtype, device=device)

    def _loss(self, output, target):
        if output.shape[1] == 1:
            return torch.nn.functional.binary_cross_entropy_with_logits(output[:, 0], target)
        return torch.nn.functional.cross_entropy(output, target)

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
            p1 = 1.0 / (1.0 + np.exp(-out[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        out = out - out.max(axis=1, keepdims=True)
        proba = np.exp(out)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Most probable class of each row, ndarray of shape (n_samples,)."""
        out = self._forward(X)
        index = (out[:, 0] > 0).astype(int) if out.shape[1] == 1 else out.argmax(axis=1)
        return self.classes_[index]
