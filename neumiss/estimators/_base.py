"""The base class of the NeuMiss estimators: their parameters, the subclass API, prediction,
saving and ONNX export.

``fit`` runs :class:`~neumiss.estimators._fitting.FitPlan` on the rows in memory
(:class:`~neumiss.estimators._fitting.InMemoryRows`). Saving goes through
:mod:`~neumiss.estimators._persistence`, ONNX export through :func:`neumiss.export.export_onnx`.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

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
)
from ..network import (
    OPTIMIZERS,
    EnsembleNetwork,
    NeuMissNetwork,
    TargetLoss,
    TrainingConfig,
    auto_mlp_width,
    float64_copy,
    torch_threads,
)
from ..tables import check_outputs_finite
from . import _persistence as persistence
from ._fitting import FitPlan, InMemoryRows
from ._patterns import pattern_model
from ._summary import describe

#: Rows per forward pass at prediction time (bounds memory, not results).
PREDICT_CHUNK = 65536

#: How far beyond each column's training range the block's estimates may go, in widths of
#: that range on each side (:meth:`~neumiss.network.NeuMissBlock.set_range`). Under
#: self-masking the missing values are the large ones, so the observed range understates
#: where they lie: the observed range itself cost the simulated grid's probit
#: self-masking cells up to 0.005 of R² (d = 20, n = 1e4), half a width on each side
#: 0.0001 (n = 2e4), one width nothing; a diverging estimate is still stopped (a real
#: table's platelet count imputed at -73,000, training values 62 to 721).
ESTIMATE_MARGIN = 1.0

#: The estimators' training defaults are the training loop's.
_TRAINING = TrainingConfig()


class BaseNeuMiss(BaseEstimator):
    """The parameters, fit, prediction and saving shared by the NeuMiss estimators.

    Subclasses define how targets are encoded, the loss, the number of network
    outputs and how raw network outputs become predictions.
    """

    _parameter_constraints = {
        "depth": AnyOf(Integer(0), Options("auto"), SequenceOf(Integer(0))),
        "mlp_depth": AnyOf(Integer(0), Options("auto")),
        "mlp_width": AnyOf(NoneValue(), Integer(1)),
        "weight_sharing": Options("independent", "shared", "auto"),
        "residual": Boolean(),
        "mask_skip": AnyOf(Boolean(), Options("auto")),
        "spline": AnyOf(Boolean(), Options("auto")),
        "compress_tails": Boolean(),
        "integer_levels": AnyOf(Boolean(), Options("auto")),
        "ensemble_size": Integer(1),
        "optimizer": Options(*OPTIMIZERS),
        "learning_rate": AnyOf(Options("auto"), Real(0, None, closed="neither")),
        "batch_size": AnyOf(Options("auto"), Integer(1)),
        "max_epochs": Integer(1),
        "validation_fraction": AnyOf(Options("auto"), Real(0, 1, closed="left")),
        "patience": Integer(1),
        "lr_patience": Integer(0),
        "tol": AnyOf(Options("auto"), Real(0, 1, closed="left")),
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
        mask_skip="auto",
        spline="auto",
        compress_tails=True,
        integer_levels="auto",
        ensemble_size=5,
        optimizer=_TRAINING.optimizer,
        learning_rate="auto",
        batch_size="auto",
        max_epochs=_TRAINING.max_epochs,
        validation_fraction="auto",
        patience=_TRAINING.patience,
        lr_patience=_TRAINING.lr_patience,
        tol="auto",
        weight_decay=_TRAINING.weight_decay,
        random_state=None,
        device="cpu",
        n_jobs=None,
        verbose=0,
        callbacks=None,
    ):
        self.depth = depth
        self.mlp_depth = mlp_depth
        self.mlp_width = mlp_width
        self.weight_sharing = weight_sharing
        self.residual = residual
        self.mask_skip = mask_skip
        self.spline = spline
        self.compress_tails = compress_tails
        self.integer_levels = integer_levels
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
        self.callbacks = callbacks

    # ------------------------------------------------------------ subclass API
    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _encode_validation_target(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _case_weights(self, encoded: np.ndarray, sample_weight: np.ndarray | None
                      ) -> np.ndarray | None:
        """The case weights of rows of encoded targets ``encoded`` (n,) given their
        ``sample_weight`` (n,) or None: those, times each row's class weight for a
        classifier (``class_weight``)."""
        return sample_weight

    def _get_loss(self) -> TargetLoss:
        """The loss object of the fitted target (:mod:`neumiss.network._losses`): the
        loss, the outputs, how members combine, the validation score and the link."""
        raise NotImplementedError

    def _linear_outputs(self, out: np.ndarray) -> np.ndarray:
        """Raw network outputs (n_samples, n_outputs) in the units of the estimator's
        outputs (an affine map of them): logits here."""
        return out

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

        With a Dask DataFrame ``X`` and a Dask Series ``y`` of the same partitions, the
        network is trained data-parallel on the workers of the current Dask client,
        without bringing the rows to this process (:func:`~neumiss.estimators.fit_spark`
        does the same on Spark; the user guide's "Training where the data lives").
        """
        if type(X).__module__.partition(".")[0] == "dask":
            if sample_weight is not None or validation_data is not None:
                raise ValueError("fitting a Dask DataFrame takes neither sample_weight nor "
                                 "validation_data (each worker holds out its own rows)")
            from ._parallel_fit import fit_dask

            return fit_dask(self, X, y)
        return FitPlan(self, InMemoryRows(X, y, sample_weight, validation_data)).fit()

    def _build_network(self, depth: int, weight_sharing: str, mlp_depth: int,
                       mask_skip: bool, n_ramps: int, mlp_width: int | None = None,
                       columns: np.ndarray | None = None) -> NeuMissNetwork:
        """A new network of the encoded columns (or those of them where the boolean
        ``columns`` is True), its block's output bounded to their training range widened
        by :data:`ESTIMATE_MARGIN` (:meth:`NeuMissBlock.set_range`); the MLP
        ``mlp_width`` wide, by default :meth:`_mlp_width` for ``n_ramps``."""
        lower, upper = self.preprocessor_.lower_, self.preprocessor_.upper_
        if columns is not None:
            lower, upper = lower[columns], upper[columns]
        margin = ESTIMATE_MARGIN * (upper - lower)
        lower, upper = lower - margin, upper + margin
        network = NeuMissNetwork(
            lower.shape[0],
            n_outputs=self._get_loss().n_outputs,
            depth=depth,
            weight_sharing=weight_sharing,
            residual=self.residual,
            mlp_depth=mlp_depth,
            mlp_width=self._mlp_width(n_ramps) if mlp_width is None else mlp_width,
            mask_skip=mask_skip,
            n_ramps=n_ramps,
        )
        network.block.set_range(lower, upper)
        return network

    def _mlp_width(self, n_ramps: int) -> int:
        """``mlp_width``, or its automatic value for the columns the MLP reads: the encoded
        ones and the spline's ``n_ramps`` ramps (:func:`~neumiss.network.auto_mlp_width`)."""
        if self.mlp_width is not None:
            return int(self.mlp_width)
        return auto_mlp_width(self.encoder_.n_features_out_ + n_ramps)

    def _build_fitted_network(self) -> NeuMissNetwork | EnsembleNetwork:
        """An untrained network shaped like ``network_``, to load saved weights into."""
        networks = [
            self._build_network(self.best_depth_, self.weight_sharing_, self.mlp_depth_,
                                self.mask_skip_, self.spline_ramps_, self.mlp_width_)
            for _ in range(self.ensemble_size)
        ]
        combine = self._get_loss().combine
        return networks[0] if len(networks) == 1 else EnsembleNetwork(networks, combine)

    # ----------------------------------------------------------------- predict
    def _apply(self, X, *, block_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The network (or its block only) over the encoded rows of ``X``.

        Returns the encoded ``X`` (float64 of shape (n_samples, n_encoded), NaN =
        missing) and the outputs of :meth:`_apply_encoded` on it.
        """
        check_is_fitted(self, "network_")
        self.encoder_.check_input(X)
        # Read, never written: the user's float64 array is not copied (1e6 x 50: 0.1-0.5 s).
        X = self.encoder_.transform(check_features(self, X, reset=False, tables=True,
                                                   copy=False))
        return X, self._apply_encoded(X, block_only=block_only)

    def _apply_encoded(self, X: np.ndarray, *, block_only: bool = False) -> np.ndarray:
        """The network (or its block only) over encoded rows ``X``: float64 of shape
        (n_samples, n_encoded), NaN = missing, in the encoded columns' units.

        Rows are standardized, then go through in chunks of :data:`PREDICT_CHUNK`.
        Returns float64 outputs of shape (n_samples, n_outputs), or (n_samples,
        n_encoded) for the block.
        """
        module = self.network_.block if block_only else self.network_
        device = next(module.parameters()).device
        chunks = []
        self.network_.eval()
        with torch.no_grad(), torch_threads(self.n_jobs):
            if device.type != "cpu":  # standardized on the device: see apply_on_device
                from ..network import apply_on_device

                out = apply_on_device(module, self.preprocessor_, X, device,
                                      columns=self.encoder_.output_names())
                return check_outputs_finite(out, "network outputs")
            # Sums in float64: a row's outputs then depend on the rows scored with it by
            # float64 rounding only, about 1e-15 relative (the products sum in an order that
            # follows the batch's shape: in float32 the difference was about 1e-7).
            double = float64_copy(module)
            for start in range(0, X.shape[0], PREDICT_CHUNK):
                x, mask = self.preprocessor_.transform(
                    X[start : start + PREDICT_CHUNK], row_offset=start,
                    columns=self.encoder_.output_names(),
                )
                out = double(torch.from_numpy(x).to(device, torch.float64),
                             torch.from_numpy(mask).to(device, torch.float64))
                chunks.append(out.cpu().numpy())
        out = np.concatenate(chunks)
        # Beyond float32's range the ONNX graph's outputs are infinite: refused alike.
        out[~(np.abs(out) <= np.finfo(np.float32).max)] = np.inf
        return check_outputs_finite(out, "network outputs")

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
        missing ones replaced by the learned block's output, which stays within each
        column's range in the training data widened by that range's width on each side
        (``ESTIMATE_MARGIN``). The columns are
        the encoded ones (``encoder_.output_names()``): the input columns when
        all are numeric, one column per category for categorical ones. With an
        MLP head (or for MNAR data) this is the representation the head uses,
        not an estimate of the missing values themselves.
        """
        X, out = self._apply(X, block_only=True)
        return np.where(np.isnan(X), self.preprocessor_.inverse_transform(out), X)

    def pattern_model(self, missing=None) -> Bunch:
        """The exact linear model the network applies to rows with one missingness pattern.

        With the linear head (``mlp_depth_ == 0``), the network is, once the
        pattern of missing values is fixed, an affine function of the observed
        values: rows with that pattern are predicted by one linear model. This
        returns it, on the original scale of the (encoded) columns, read off
        the fitted network (for an ensemble of regressors, the mean of its
        members' models). A row ``x`` with that pattern then has outputs
        ``intercept + coef @ x[observed]``.

        Parameters
        ----------
        missing : None, array-like of bool of shape (n_features_in_,), or sequence
            The missing features: None for rows with every feature observed; one
            boolean per feature (True = missing), e.g. ``np.isnan(x)`` of a row;
            or the names (``feature_names_in_``) or indices of the missing ones.

        Returns
        -------
        Bunch with
            intercept : float, or ndarray of shape (n_outputs,)
                The outputs with every observed column at 0.
            coef : ndarray of shape (n_observed,), or (n_outputs, n_observed)
                One coefficient per observed encoded column: a numeric feature
                is itself, a categorical one a 0/1 column per category.
            feature_names : ndarray of str of shape (n_observed,)
                The observed encoded columns (``encoder_.output_names()``).
            missing : ndarray of bool of shape (n_features_in_,)
        The outputs are those of ``predict`` (regressor), of each quantile before
        ``predict_quantiles`` sorts them (quantile regressor; where they do not
        cross, its predictions), or the logits of ``decision_function``
        (classifier).

        Raises
        ------
        ValueError
            With an MLP head, for an ensemble of classifiers (it averages
            probabilities), with ``compress_tails`` on an observed column: the
            network is then not linear in the observed values.
        """
        return pattern_model(self, missing)

    # ------------------------------------------------------------- persistence
    def summary(self) -> str:
        """What the fit chose and on which rows it validated, as text (R's ``summary()``
        says the same): the network's depth, weights, head, members and epochs; the input
        columns and their encoding (one-hot categories, target statistics, integer
        codes given indicators); the target's scale; the validation rows, their scheme
        (``validation_scheme_``) and ``validation_score_``. ``print(model.summary())``."""
        return describe(self)

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
        """Export to ONNX (inputs ``X`` and ``M``); see :func:`neumiss.export.export_onnx`."""
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


#: The defaults of :class:`BaseNeuMiss`, which every estimator's ``__init__`` repeats.
DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(BaseNeuMiss.__init__).parameters.items()
}


def parameters_of(cls: type, values: dict) -> dict:
    """The entries of ``values`` (an ``__init__``'s ``locals()``) that are parameters of
    ``cls``: what a subclass's ``__init__``, which lists every parameter (scikit-learn
    reads them from its signature), hands on to ``cls.__init__``."""
    return {name: values[name] for name in cls._get_param_names()}
