"""The scikit-learn regressor built on :class:`~neumiss.network.NeuMissNetwork`:
:class:`NeuMissRegressor` (:func:`neumiss.load` reads it back; the quantile regressor,
built on it, is in ``_quantile``, the classifier in ``_classifier``).

Their shared fitting machinery is :class:`neumiss.estimators._base.BaseNeuMiss`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import skew
from sklearn.base import RegressorMixin

from ..checks import AnyOf, Boolean, Options
from ..network import SquaredError
from ..tables import check_outputs_finite, mean_scale, scaled_r2_score
from ._base import DEFAULTS, BaseNeuMiss, parameters_of

#: ``log_target="auto"`` models ``log y`` when ``y`` is positive with a skewness above
#: this (a long right tail: sales, incomes, counts of a city's size) ...
LOG_TARGET_SKEWNESS = 2.0
#: ... and ``log y``'s skewness is below this in absolute value (near-symmetric).
LOG_SCALE_SKEWNESS = 1.0


def uses_log_target(log_target, y: np.ndarray) -> bool:
    """Whether a regressor with ``log_target`` (True, False or "auto") models ``log y``
    for training targets ``y`` (finite float64, shape (n,)): "auto" when every value is
    positive, the sample skewness of ``y`` above :data:`LOG_TARGET_SKEWNESS` and that of
    ``log y`` within :data:`LOG_SCALE_SKEWNESS` of 0 (log-normal-like). True refuses a
    ``y`` that is not positive."""
    positive = bool(y.size) and float(y.min()) > 0
    if log_target is True and not positive:
        raise ValueError(
            f"log_target=True needs a positive y (the model is fitted to log y); its "
            f"smallest value is {float(y.min()) if y.size else float('nan')!r}")
    if log_target != "auto":
        return bool(log_target)
    if not positive:
        return False
    with warnings.catch_warnings():  # a constant y has no skewness (NaN): not taken
        warnings.simplefilter("ignore", RuntimeWarning)
        return bool(skew(y) > LOG_TARGET_SKEWNESS
                    and abs(skew(np.log(y))) < LOG_SCALE_SKEWNESS)


class NeuMissRegressor(RegressorMixin, BaseNeuMiss):
    """NeuMiss network regressor: learns E[y | X_obs, M] with missing values in X.

    A :class:`~neumiss.network.NeuMissBlock` approximates the conditional
    expectation of the missing features for every missingness pattern at once;
    a linear layer (or an MLP, ``mlp_depth >= 1``) maps it to ``y``. NaN in
    ``X`` marks a missing value; no imputation is needed beforehand.

    The defaults were chosen on real data with missing values
    (``results/realdata/README.md``): the depth and weight sharing chosen on
    validation, residual connections, a two-layer MLP head and an ensemble of
    5 networks. ``depth=3, mlp_depth=0, weight_sharing="independent",
    residual=False, mask_skip=False, ensemble_size=1`` is the paper's network.

    Parameters
    ----------
    depth : int >= 0, "auto" or sequence of int, default="auto"
        Number of matrices in the NeuMiss block before ``W_mix``: ``S^(0)`` and
        ``depth - 1`` Neumann iterations (the authors' convention). A sequence
        of candidate depths (``"auto"``: :data:`neumiss.network.AUTO_DEPTHS`) trains them on the
        same split in increasing order. Each new depth's block starts from the
        training data's moments: ``mu`` the observed means, the matrices the
        Neumann iterates of the pairwise-complete covariance, so that it computes
        the Neumann approximation of ``E[X_mis | X_obs]`` before any training
        (:func:`neumiss.network.start_from_moments`); its head starts from the
        previous depth's skip and bias (an MLP head restarts its hidden layers).
        A deeper depth replaces the best one only when it lowers the
        validation loss by more than one standard error of the paired per-row
        difference (:func:`neumiss.network.clearly_better`: on a few hundred
        validation rows, depths often win by chance); the kept depth is
        ``best_depth_``. The search stops once two depths in a row have not
        replaced the best (:data:`neumiss.network.DEPTH_PATIENCE`). With
        ``"auto"`` and validation rows, the depths are first compared untrained
        (``depth_starts_``): depth 16 is trained only when its data start, with
        linear heads fitted on it, validates clearly better than depth 0's (mean
        imputation; the one-standard-error rule); where the conditional expectation
        predicts no better than the mean, training it rarely gives the better network.
    mlp_depth : int >= 0 or "auto", default="auto"
        Hidden ReLU layers of an MLP head after the block (NeuMiss+MLP for
        nonlinear targets), beside a linear skip; 0 is the paper's linear head.
        ``"auto"`` searches the depth with a two-layer MLP head, then
        fine-tunes the paper's linear head from the chosen network (it starts
        from the skip: the function less the MLP's part) and keeps whichever
        has the lower validation loss (``mlp_depth_``;
        :data:`neumiss.network.AUTO_MLP_DEPTHS`). At depth 0 (mean
        imputation) the linear head is instead fitted on the block's output
        directly (a ridge or penalized logistic fit, each member on its own
        rows), untrained (``head_results_[0]["epochs"]`` is 0), and blended with
        the MLP head: each member outputs ``w`` times its MLP head's output plus
        ``1 - w`` times its linear head's, ``w`` in steps of 0.05 the weight with
        the lowest validation loss (``mlp_weight_``; 0 keeps the linear head,
        ``mlp_depth_`` 0). The blend is a network of the MLP head's shape.
    mlp_width : int or None, default=None
        Width of those hidden layers; ``None`` means the number of columns the MLP
        reads (the encoded ones, and the spline's ramps with ``spline_``), at most 64
        (:func:`neumiss.network.auto_mlp_width`; ``mlp_width_``).
    weight_sharing : {"independent", "shared", "auto"}, default="auto"
        One matrix per Neumann iteration (paper 2020) or one shared matrix.
        ``"auto"`` trains with a shared matrix, then, at the chosen depth (2 or
        more), fine-tunes an independent copy initialised to it ("untied"; with
        ``tol=0``) and keeps whichever has the lower validation loss
        (``weight_sharing_``). The fine-tune runs only when there are at least
        :data:`neumiss.network.UNTIE_ROWS_PER_PARAMETER` training rows per parameter of the
        untied block, ``(depth + 1) * n_features**2``: fewer rows are too
        few to fit the extra matrices (``results/README.md``, "Untying").
        Last, from :data:`neumiss.network.MIDPOINT_ROWS_PER_FEATURE` training rows per
        encoded feature, it offers the linear heads on an independent block at the
        deepest depth trained, set to Richardson steps at the Chebyshev nodes of the
        training rows' covariance (:func:`neumiss.network.set_chebyshev_weights`) and not
        trained, kept when it lowers the validation loss (``chebyshev_result_``): the
        better start where training cannot improve on it. With ``"independent"``, a new
        depth's block starts at those steps there.
    residual : bool, default=True
        Residual connections in the block (the ``+ Id`` of the Neumann recursion).
    mask_skip : bool or "auto", default="auto"
        A linear term of the mask added to the output (see
        :class:`~neumiss.network.NeuMissNetwork`): the head sees which features are
        missing, as missing indicators do, so informative missingness is used.
        ``"auto"`` adds it when a linear model of the target on the mean-imputed
        features is clearly better on the validation rows with the mask than
        without (one standard error of the per-row difference;
        :meth:`neumiss.network.DepthSearch.mask_term_helps`): self-masking and
        other missing-not-at-random data get it, a mask that says nothing of the
        target adds no parameters. Without validation rows (``validation_fraction=0``)
        and in :meth:`fit_stream`, ``"auto"`` is False. The choice is ``mask_skip_``.
        With the term kept and a chosen depth of 2 or more, the search also trains the
        paper's chain of depths from the identity start on batches of n / 64 rows, kept
        when it is clearly better on the validation rows (``identity_results_``): the
        moments that start the blocks are biased when the missingness tells the target.
        The chain is the paper's network, without the mask term (``mask_skip_`` is then
        False).
    spline : bool or "auto", default="auto"
        A spline term added to the output (see :class:`~neumiss.network.NeuMissNetwork`):
        a linear map of piecewise-linear ramps of each column of the block's output on
        up to 16 quantile bins of its observed training values (at most 512 ramps in
        all: fewer bins on wide tables), so that even the linear head fits an additive
        spline of each feature, a target that bends with a feature; an MLP head reads
        the ramps too (centred in training: :class:`~neumiss.network.StackedNetwork`).
        ``"auto"`` adds it whenever depth 0 alone is to be trained (``depth=0``,
        or the screen of ``depth="auto"`` finds no deeper start clearly better; not for
        a classifier of three classes or more), else when the linear start at the
        deepest depth to be trained (with the mask's term as ``mask_skip`` decided) is
        clearly better on the validation rows with the ramps than without, and (for a
        regression) its validation loss at least 1% lower
        (:meth:`neumiss.network.DepthSearch.decide`). Without
        validation rows and in :meth:`fit_stream`, ``"auto"`` is False; ``True`` needs
        the rows in memory (the knots are quantiles), so :meth:`fit_stream` refuses it.
        The choice is ``spline_``; the pattern models (:meth:`pattern_model`) are linear
        only without it.
    compress_tails : bool, default=True
        Numeric columns with heavy tails (an observed value beyond 8 robust
        deviations from the median) are scaled by their median and robust
        deviation and compressed smoothly beyond 3 of them (see
        :class:`~neumiss.tables.Standardizer`); other columns are only
        standardized. A compressed column is not linear in its values:
        :meth:`pattern_model` needs ``compress_tails=False`` on such a table.
        :meth:`fit_stream` never compresses (the medians need the whole column).
    integer_levels : bool or "auto", default="auto"
        A numeric column of few distinct integers (a count, a month, a year, a grade:
        3 to 32 distinct observed values) also gets one indicator column per value seen
        at least 10 times in training, beside the value itself (see
        :class:`~neumiss.tables.TableEncoder`), so that the network fits an effect per
        value and the interactions of two such columns (a month x year effect) as a
        tree would. ``"auto"`` keeps them when the linear start at depth 0 (mean
        imputation and a linear head) is clearly better on the validation rows with
        them than without, and its validation loss at least 2% lower; without
        validation rows and in :meth:`fit_stream`, ``"auto"`` is False. The encoded
        columns are ``encoder_.output_names()`` (``name=value`` for an indicator).
    ensemble_size : int >= 1, default=5
        Number of networks averaged. The members share one block and each has
        its own head (initialised from its own seed); they train together in
        batched products (:class:`neumiss.network.StackedNetwork`), each head on
        its own loss, through one search over ``depth``, ``weight_sharing`` and
        ``mlp_depth`` decided on the ensemble's validation loss, with one early
        stopping. Predictions average the members' outputs (regression) or class
        probabilities (classification).
    optimizer : {"adam", "sgd"}, default="adam"
    learning_rate : float or "auto", default="auto"
        Initial learning rate (on standardized X and y). ``"auto"``: 1e-2 up to
        64 encoded columns, then ``1e-2 * sqrt(64 / n_columns)``
        (:func:`neumiss.network.auto_learning_rate`), so that wide tables
        train as stably as narrow ones. The rate used is ``learning_rate_``.
    batch_size : int or "auto", default="auto"
        Mini-batch size; ``"auto"`` is ``min(n_train, 2048, max(32, min(n_train // 8,
        n_train**2 // 64000)))`` (:func:`neumiss.network.auto_batch_size`): 8 steps per
        epoch from about 8,000 rows, more on smaller tables.
    max_epochs : int, default=100
    validation_fraction : float in [0, 1) or "auto", default="auto"
        Share of rows held out for early stopping, the learning-rate schedule
        and ``depth="auto"``; 0 uses the training loss instead. ``"auto"``:
        on tables of up to 5,000 rows (``OUT_OF_FOLD_ROWS``; a classifier's
        rows count twice those outside the most frequent class), an ensemble
        validates *out of fold*: the rows are cut into ``ensemble_size`` folds,
        member ``k`` does not train on fold ``k``, and each row is scored by the
        member that held it out, so that every row validates and trains; on
        larger tables, or with one network, 10% of the rows are held out.
    patience : int, default=3
        Epochs without validation improvement before stopping; the weights of
        the best epoch are restored.
    lr_patience : int, default=1
        Epochs without improvement before the learning rate is multiplied by
        0.2 (ReduceLROnPlateau, as in the paper).
    tol : float in [0, 1) or "auto", default="auto"
        Relative decrease of the validation loss an epoch needs to count as an
        improvement for ``patience`` and ``lr_patience`` (0: any decrease).
        The weights kept are still those of the lowest validation loss.
        ``"auto"``: 0 when validating out of fold (every row validates), else 2e-3.
    weight_decay : float, default=0.0
        L2 penalty of the optimizer.
    random_state : int, RandomState or None, default=None
        Seeds the split, the initialisation and the shuffling: repeatable on CPU.
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where the network trains and predicts; "auto" takes CUDA when present.
        On a GPU the automatic batch size is larger
        (:data:`neumiss.network.GPU_AUTO_BATCH_SIZE`) and ``predict``
        standardizes on the device (:func:`neumiss.network.apply_on_device`). CPU
        fits are repeatable bit for bit with ``random_state`` on one machine (on
        another CPU the matrix products may round differently, and a fit may then stop
        at another epoch); GPU fits are not.
    n_jobs : int or None, default=None
        Torch CPU threads during fit and predict (restored afterwards); None
        means 1, -1 all cores. One thread by default, because NeuMiss matrices
        are small (d x d) and more threads only contend on a busy machine.
    verbose : int, default=0
        ``>= 1`` shows a tqdm progress bar (epoch, losses, validation R²).
    callbacks : list of :class:`neumiss.network.Callback` or None, default=None
        Hooks on every training the fit runs, as skorch's: each candidate of the search
        (the depths, the paper's chain from the identity, the untied and the heads'
        fine-tunes) and the one training of :func:`~neumiss.estimators.fit_stream`. As
        each training begins, a callback's ``training`` says which one it is
        (:func:`neumiss.network.describe_training`: ``"NeuMissRegressor depth search
        (depth=16, shared, mlp_depth=2)"``); ``on_epoch_end`` returning True stops that
        training after the epoch, its best weights kept as by early stopping.
        :class:`neumiss.network.History` records every training's losses. The list is
        stored as given and never called: each ``fit`` calls deep copies of it,
        ``callbacks_``, so that a refit starts afresh and clones share nothing. A
        data-parallel fit (Dask, Spark, Parquet files) calls them on its sample's fit
        only, in this process. :meth:`save` does not store them: the loaded model has
        ``callbacks=None``.
    log_target : bool or "auto", default="auto"
        Fit the network to ``log y`` and predict ``exp`` of its output (the
        conditional geometric mean, the median under log-normal noise; no
        retransformation correction: Duan's smearing factor scored no better on the
        real-data suite). ``"auto"`` takes it when every training ``y`` is positive,
        heavily right-skewed (sample skewness above 2,
        :data:`~neumiss.estimators.LOG_TARGET_SKEWNESS`) and near-symmetric on the log
        scale (below 1 in absolute value, :data:`~neumiss.estimators.LOG_SCALE_SKEWNESS`):
        sales, prices, incomes, where effects multiply. The choice is
        ``log_target_``; with it, the per-pattern linear models
        (:meth:`pattern_model`), ``history_`` and ``validation_score_`` are those of
        ``log y``. ``True`` refuses a ``y`` that is not positive. In :meth:`fit_stream`,
        ``"auto"`` is False (the skewness needs the whole target first).

    Attributes
    ----------
    network_ : NeuMissNetwork or EnsembleNetwork
        The trained network, or the ensemble of ``ensemble_size`` members.
    members_ : list of dict
        Per member: its own ``val_loss`` and ``val_score``, and the ``epochs``
        and ``seconds`` of the kept candidate (trained together).
    best_depth_ : int
        The depth used (the chosen one when several were tried).
    weight_sharing_ : {"independent", "shared"}
        The weight mode of ``network_``.
    mlp_depth_ : int
        The head's hidden layers (the kept one with ``mlp_depth="auto"``).
    mlp_weight_ : float
        The MLP head's weight in the head kept: 1 for an MLP head alone, 0 for the
        linear head, between for their blend (at depth 0 with ``mlp_depth="auto"``: each
        member outputs ``mlp_weight_`` times its MLP head's output plus ``1 -
        mlp_weight_`` times its linear head's).
    mask_skip_ : bool
        Whether the heads have the mask's own linear term (``mask_skip``).
    spline_ : bool
        Whether the heads have the spline term (``spline``).
    spline_ramps_ : int
        The spline term's ramps (0 without it).
    head_results_ : dict
        With ``mlp_depth="auto"``: for the head fine-tuned (the linear head, by its
        depth 0), ``val_loss``, ``val_score``, ``epochs`` and ``seconds``; at depth 0
        also ``mlp_weight``, the MLP head's weight in the blend kept (empty otherwise).
    untied_result_ : dict or None
        With ``weight_sharing="auto"``: ``val_loss``, ``val_score``, ``epochs`` and
        ``seconds`` of the untied fine-tuning (None when it did not run: other
        ``weight_sharing``, a depth below 2 or too few rows per parameter).
    chebyshev_result_ : dict or None
        With ``weight_sharing="auto"``: ``val_loss`` and ``val_score`` of the linear
        heads on a block with one matrix per iteration started at Chebyshev steps,
        untrained (``epochs`` 0), kept when it lowers the validation loss (then
        ``weight_sharing_`` is ``"independent"`` and ``n_epochs_`` 0); None when it was
        not tried (other ``weight_sharing``, no validation rows, a chain below depth 2
        or fewer than :data:`neumiss.network.MIDPOINT_ROWS_PER_FEATURE` rows per
        encoded feature).
    identity_results_ : dict or None
        Per depth, ``val_loss``, ``val_score``, ``epochs`` and ``seconds`` of the paper's
        chain from the identity start (depths 0, 2, 4, ... up to ``best_depth_``, on
        smaller batches), trained when the mask's own term was kept and the chosen
        block iterates; kept when it lowers the validation loss. None when not tried.
    depth_results_ : dict
        For each depth trained: ``val_loss`` and ``val_score`` (validation R²)
        of its best epoch, ``epochs`` trained and training ``seconds``.
    depth_starts_ : dict or None
        With ``depth="auto"`` and validation rows: for each depth compared before
        training, ``val_loss`` and ``val_score`` of its data start (linear heads
        on the block started from the training rows' moments, untrained); the
        depths in it but not in ``depth_results_`` were not trained (their
        start validated worse than depth 0's). None otherwise.
    history_ : dict of lists
        Per epoch: ``train_loss``, ``val_loss`` (MSE on standardized y),
        ``val_score`` (validation R²) and ``lr``.
    n_epochs_, best_epoch_ : int
        Epochs trained, and the epoch whose weights were kept: 0 when no epoch
        beat the start (the block and the heads' linear part fitted to the data,
        or, when that start is worse, the constant predictor).
    learning_rate_ : float
        The initial learning rate used (``learning_rate``, or its automatic value).
    mlp_width_ : int
        The width of the MLP head's hidden layers (``mlp_width``, or its
        automatic value).
    validation_score_ : float
        Validation R² of the restored weights (of the ensemble's prediction, or
        out of fold: each row's by the member that held it out).
    validation_scheme_ : str
        How the fit validated: ``"holdout"``, ``"out_of_fold"``,
        ``"validation_data"`` or ``"none"`` (``validation_fraction=0``).
    n_validation_rows_ : int
        The rows the validation losses were computed on (0 for ``"none"``).
    encoder_ : TableEncoder
        How each input column is encoded (numeric; boolean as 0/1; categorical
        as one column per category, a missing or unseen category marking its
        whole group missing).
    preprocessor_ : Standardizer
        Standardization of the encoded columns from their observed entries
        (``mean_``, ``scale_``).
    log_target_ : bool
        Whether the network fits ``log y`` (``log_target``).
    y_mean_, y_scale_ : float
        Mean and deviation of the training ``y`` (of ``log y`` with ``log_target_``),
        which standardize the network's target.
    callbacks_ : list of Callback
        The copies of ``callbacks`` this fit called (empty without callbacks), e.g.
        ``model.callbacks_[0].to_frame()`` for a :class:`~neumiss.network.History`.
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
    #: ``validation_score_`` as :meth:`summary` tells it: its name and sign.
    _score_metric = ("R²", 1.0)

    _parameter_constraints = {
        **BaseNeuMiss._parameter_constraints,
        "log_target": AnyOf(Boolean(), Options("auto")),
    }

    def __init__(
        self,
        depth=DEFAULTS["depth"],
        *,
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
        super().__init__(**parameters_of(BaseNeuMiss, locals()))
        self.log_target = log_target

    def _encode_target(self, y):
        y = y.astype(np.float64)
        self.log_target_ = uses_log_target(self.log_target, y)
        y = self._fitted_scale(y, "y")
        self.y_mean_, self.y_scale_ = mean_scale(y)  # float64, at any magnitude of y
        return (y - self.y_mean_) / self.y_scale_

    def _encode_validation_target(self, y):
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError("validation_data: y_val must be numeric") from exc
        if not np.isfinite(y).all():
            raise ValueError("validation_data: y_val contains NaN or infinity")
        return (self._fitted_scale(y, "validation_data: y_val") - self.y_mean_) / self.y_scale_

    def _fitted_scale(self, y: np.ndarray, name: str) -> np.ndarray:
        """Targets ``y`` (float64) on the scale the network fits: ``log y`` when
        ``log_target_``, which needs every value positive (ValueError naming ``name``)."""
        if not self.log_target_:
            return y
        if y.size and float(y.min()) <= 0:
            raise ValueError(
                f"{name} must be positive: the model is fitted to log y (log_target_ is "
                f"True), and its smallest value is {float(y.min())!r}; fit with "
                "log_target=False to model y itself")
        return np.log(y)

    def _target_units(self, values: np.ndarray) -> np.ndarray:
        """Outputs on the fitted scale (``_linear_outputs``) in the units of ``y``:
        ``exp`` of them when ``log_target_``, unchanged otherwise."""
        return np.exp(values) if self.log_target_ else values

    def _get_loss(self):
        return SquaredError()

    def _linear_outputs(self, out):
        return out * self.y_scale_ + self.y_mean_

    def predict(self, X):
        """Predict ``y`` for ``X`` (NaN = missing): ndarray of shape (n_samples,)."""
        return check_outputs_finite(
            self._target_units(self._linear_outputs(self._forward(X))[:, 0]))

    def score(self, X, y, sample_weight=None):
        """R² of ``predict(X)`` against ``y``, computed in units of ``y_scale_`` (R² does
        not depend on them; ``exp(y_mean_)``, the geometric mean of the training ``y``,
        with ``log_target_``), so that it holds for targets near 1e±300 too."""
        unit = np.exp(self.y_mean_) if self.log_target_ else self.y_scale_
        return scaled_r2_score(y, self.predict(X), unit, sample_weight)
