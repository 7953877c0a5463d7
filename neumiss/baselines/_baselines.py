"""Baseline regressors of the paper (Section 5.4), for data with missing values (NaN).

* :class:`EMRegressor`: maximum likelihood (EM) fit of a joint Gaussian on ``(y, X)``, then
  ``E[y | x_obs]`` (the Bayes predictor when the data are Gaussian and MAR).
* :class:`MICERegressor`: scikit-learn's ``IterativeImputer`` then a linear regression.
* :class:`ImputeMaskLinearRegressor`: linear regression on ``[X imputed by 0, mask]``.
* :class:`ImputeMaskMLPRegressor`: one-hidden-layer ReLU MLP on ``[X imputed, mask]``.

All accept NaN in ``X`` (the ``allow_nan`` tag), pandas data frames and follow the
scikit-learn estimator API.
"""

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPRegressor
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ..checks import (
    AnyOf,
    Boolean,
    Integer,
    NoneValue,
    Options,
    Real,
    SequenceOf,
    check_features,
    check_params,
    check_training_data,
    warn_user,
)
from ..simulation import PatternLayout, conditional_mean, conditional_moments
from ..tables import observed_mean_scale

__all__ = [
    "EMRegressor",
    "ImputeMaskLinearRegressor",
    "ImputeMaskMLPRegressor",
    "MICERegressor",
]


class _MissingValuesRegressor(RegressorMixin, BaseEstimator):
    """Shared validation: ``fit`` / ``predict`` take NaN in X, subclasses do the rest.

    Subclasses declare their parameters' constraints in ``_parameter_constraints``
    (:mod:`neumiss.checks`) and implement ``_fit(X, y)`` and ``_predict(X)`` on
    validated float64 arrays.
    """

    #: constructor parameter -> constraint, checked first thing in ``fit``
    _parameter_constraints: dict = {}

    def fit(self, X, y):
        """Fit on ``X`` of shape (n_samples, n_features), NaN = missing, and ``y``.

        Returns
        -------
        self
        """
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        X, y = check_training_data(self, X, y, y_numeric=True)
        self._fit(X, y.astype(float))
        return self

    def predict(self, X):
        """Predict ``y`` for ``X`` of shape (n_samples, n_features), NaN = missing.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._predict(check_features(self, X, reset=False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _impute_and_mask(X, fill):
    """``[X with NaN replaced by fill, mask]``, of shape (n_samples, 2 * n_features)."""
    mask = np.isnan(X)
    return np.hstack([np.where(mask, fill, X), mask.astype(X.dtype)])


# Warm-start EM on a subsample only when it has at least this many rows per parameter.
_WARM_START_ROWS_PER_PARAM = 25


class _JointGaussianRegressor(_MissingValuesRegressor):
    """Predicts E[y | x_obs] under a Gaussian of ``(y, x)``: subclasses fit ``mean_``, ``cov_``.

    ``mean_`` has shape (n_features + 1,) and ``cov_`` (n_features + 1, n_features + 1),
    y first.
    """

    def _predict(self, X):
        Z = np.column_stack([np.full(X.shape[0], np.nan), X])
        return conditional_mean(Z, self.mean_, self.cov_)[:, 0]


class EMRegressor(_JointGaussianRegressor):
    """Joint Gaussian of ``(y, X)`` fitted by EM with missing values, predicting E[y | x_obs].

    The EM algorithm (Dempster et al., 1977) maximizes the observed-data likelihood of a
    Gaussian on ``z = (y, x)`` (``y`` observed in training, NaN = missing in ``x``). Its
    E-step conditions on the observed entries of every row, batched over the missingness
    patterns (:func:`neumiss.simulation.conditional_moments`). Prediction is the conditional
    expectation of ``y`` given the observed features under the fitted Gaussian, which is the
    Bayes predictor of the paper (eq. 3) when the data are Gaussian and missing at random.

    The data are standardized (observed mean and standard deviation of each column) while
    fitting. A ridge ``ridge * I`` is added to the standardized covariance at every M-step,
    which keeps it positive definite when columns are (nearly) collinear; this is the EM for
    the penalized likelihood ``loglik - n * ridge / 2 * trace(cov^{-1})``, so the penalized
    objective still increases at every iteration.

    Parameters
    ----------
    max_iter : int, default=200
        Maximum number of E-steps. A :class:`~sklearn.exceptions.ConvergenceWarning` is
        raised if the tolerance is not reached within it.
    tol : float, default=1e-4
        Convergence tolerance: EM stops when an iteration (one EM step, or with
        ``accelerate`` one SQUAREM cycle of two EM steps and an extrapolation) increases the
        penalized log-likelihood of the standardized data by less than ``tol`` per sample.
        For comparison, the statistical error of the maximum likelihood estimate costs
        about ``n_parameters / (2 n_samples)`` per sample.
    ridge : float, default=1e-6
        Ridge added to the diagonal of the covariance of the standardized data. With
        ``ridge=0`` (plain maximum likelihood) and a singular covariance, e.g. a constant
        column, singular blocks are pseudo-inverted and the objective need not increase
        monotonically.
    accelerate : bool, default=True
        Use the SQUAREM extrapolation (Varadhan & Roland, 2008): two EM steps define a
        direction along which the parameters are extrapolated; the extrapolation is kept only
        if the covariance stays positive definite and the objective does not decrease. EM
        with many missing values converges slowly, and this cuts the number of E-steps
        several times.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features + 1,)
        Mean of the joint Gaussian; entry 0 is ``y``, entries ``1:`` the features.
    cov_ : ndarray of shape (n_features + 1, n_features + 1)
        Covariance of the joint Gaussian, ``y`` first (row and column 0), then the features.
    n_iter_ : int
        Number of E-steps run on the full data (after the warm start, see Notes).
    converged_ : bool
        Whether the tolerance was reached before ``max_iter``.
    loglik_history_ : ndarray of shape (n_points,)
        Penalized log-likelihood of the standardized training data at the successive
        accepted parameter values (non-decreasing).
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when ``X`` has string column names.

    Notes
    -----
    Starting point: zero mean and the covariance of the pairs of observed entries (made
    positive definite). With many rows, EM first runs on subsamples, every ``8^j``-th row
    for ``j = J, ..., 1`` (the largest ``J`` leaving at least 25 rows per parameter of the
    Gaussian), each stage starting the next: the early iterations, which move the parameters
    most, are then cheap. The result is still the maximum of the full-data likelihood.
    """

    _parameter_constraints = {
        "max_iter": Integer(1),
        "tol": Real(0),
        "ridge": Real(0),
        "accelerate": Boolean(),
    }

    def __init__(self, max_iter=200, tol=1e-4, ridge=1e-6, accelerate=True):
        self.max_iter = max_iter
        self.tol = tol
        self.ridge = ridge
        self.accelerate = accelerate

    def _fit(self, X, y):
        Z = np.column_stack([y, X])
        n, dim = Z.shape
        empty = np.flatnonzero(np.isnan(Z).all(axis=0))
        if empty.size:
            raise ValueError(
                f"X has columns with no observed value: {(empty - 1).tolist()}; "
                "EMRegressor cannot estimate their distribution (drop them)."
            )
        center, scale = observed_mean_scale(Z)
        Z = (Z - center) / scale
        ridge = float(self.ridge)
        params = (np.zeros(dim), _pairwise_covariance(Z) + ridge * np.eye(dim))
        # Coarse to fine: EM on every 8^j-th row first, while that leaves enough rows per
        # parameter for the subsample's maximum to be close to the full data's.
        n_params = dim * (dim + 3) // 2
        strides = []
        while n // (8 ** (len(strides) + 1)) >= _WARM_START_ROWS_PER_PARAM * n_params:
            strides.append(8 ** (len(strides) + 1))
        for stride in reversed(strides):
            subsample = Z[::stride]
            # No need to converge beyond the subsample's own statistical error.
            tol = max(self.tol, 0.1 * n_params / len(subsample))
            params, *_ = _run_em(subsample, params, ridge, tol, self.max_iter, self.accelerate)
        (mean, cov), history, n_iter, converged = _run_em(
            Z, params, ridge, self.tol, self.max_iter, self.accelerate
        )
        if not converged:
            warn_user(f"EMRegressor did not converge in max_iter={self.max_iter} E-steps "
                 f"(tol={self.tol}); increase max_iter or tol.", ConvergenceWarning)
        self.mean_ = center + scale * mean
        self.cov_ = cov * np.outer(scale, scale)
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.loglik_history_ = history


def _run_em(Z, start, ridge, tol, max_iter, accelerate):
    """EM (optionally SQUAREM-accelerated) for a Gaussian on ``Z`` with missing values.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, dim)
        Data, NaN = missing.
    start : (mean, cov)
        Starting parameters, shapes (dim,) and (dim, dim).
    ridge : float
        Added to the diagonal of the covariance at every M-step.
    tol, max_iter, accelerate
        As in :class:`EMRegressor`.

    Returns
    -------
    params : (mean, cov)
    history : ndarray
        Penalized log-likelihood per sample at the successive accepted parameters.
    n_iter : int
        Number of E-steps.
    converged : bool
    """
    n, dim = Z.shape
    layout = PatternLayout(np.isnan(Z))

    def em_step(params):
        """Penalized log-likelihood per sample at ``params``, and the EM update."""
        mean, cov = params
        moments = conditional_moments(Z, mean, cov, layout)
        objective = moments.loglik / n
        if ridge:
            objective -= 0.5 * ridge * np.trace(np.linalg.inv(cov))
        new_mean = moments.filled.mean(axis=0)
        centered = moments.filled - new_mean
        new_cov = (centered.T @ centered + moments.cond_cov_sum) / n + ridge * np.eye(dim)
        return objective, (new_mean, new_cov)

    with threadpool_limits(limits=1, user_api="blas"):  # as in neumiss.simulation
        return _em_iterations(em_step, start, tol, max_iter, accelerate)


def _em_iterations(em_step, start, tol, max_iter, accelerate):
    """The iterations of :func:`_run_em`, given its ``em_step``."""
    # Invariant: ``current`` has objective history[-1] and ``update`` is its EM update.
    current = start
    objective, update = em_step(current)
    history = [objective]
    n_iter = 1
    converged = False
    while n_iter < max_iter and not converged:
        cycle_start = history[-1]
        previous, current = current, update
        objective, update = em_step(current)
        n_iter += 1
        history.append(objective)
        if accelerate and n_iter < max_iter:
            extrapolated = _squarem_extrapolation(previous, current, update)
            if extrapolated is not None:
                objective, extrapolated_update = em_step(extrapolated)
                n_iter += 1
                # Keep the extrapolation only if it does not decrease the objective.
                if objective >= history[-1]:
                    history.append(objective)
                    current, update = extrapolated, extrapolated_update
        converged = bool(history[-1] - cycle_start < tol)
    return update, np.array(history), n_iter, converged


def _pairwise_covariance(Z):
    """EM starting point: covariance from the pairs of observed entries, made PD.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, dim)
        Centered, standardized data with NaN.

    Returns
    -------
    cov : ndarray of shape (dim, dim)
        ``sum(z_j z_k) / count`` over rows where both are observed, with the eigenvalues
        raised to at least 1e-3 (the pairwise estimate need not be positive definite).
    """
    observed = (~np.isnan(Z)).astype(float)
    zero_filled = np.nan_to_num(Z)
    cov = (zero_filled.T @ zero_filled) / np.maximum(observed.T @ observed, 1)
    eigval, eigvec = np.linalg.eigh(cov)
    return (eigvec * np.maximum(eigval, 1e-3)) @ eigvec.T


def _squarem_extrapolation(params_0, params_1, params_2):
    """SQUAREM step from three successive EM iterates, or None if it is not usable.

    With ``r = theta_1 - theta_0`` and ``v = theta_2 - 2 theta_1 + theta_0``, the step is
    ``theta_0 - 2 a r + a^2 v`` with ``a = -|r| / |v|`` (scheme S3 of Varadhan & Roland,
    2008). ``a = -1`` gives back ``theta_2``; the step is halved towards it while the
    extrapolated covariance is not positive definite.
    """
    theta = [np.concatenate([mean, cov.ravel()]) for mean, cov in (params_0, params_1, params_2)]
    r = theta[1] - theta[0]
    v = theta[2] - 2 * theta[1] + theta[0]
    norm_v = np.linalg.norm(v)
    if norm_v == 0:
        return None
    alpha = -np.linalg.norm(r) / norm_v
    dim = params_0[0].size
    while alpha < -1.01:
        candidate = theta[0] - 2 * alpha * r + alpha**2 * v
        mean, cov = candidate[:dim], candidate[dim:].reshape(dim, dim)
        try:
            np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            alpha = (alpha - 1) / 2
            continue
        return mean, cov
    return None


class MICERegressor(_MissingValuesRegressor):
    """Conditional imputation by scikit-learn's ``IterativeImputer``, then linear regression.

    The paper's "MICE + LR": each feature is imputed by iterated (Bayesian ridge)
    regressions on the others; the imputer fitted on the training set imputes new data.

    Parameters
    ----------
    max_iter : int, default=10
        Imputation rounds of ``IterativeImputer``.
    random_state : int, RandomState instance or None, default=None
        Passed to ``IterativeImputer``.

    Attributes
    ----------
    imputer_ : IterativeImputer
    regressor_ : LinearRegression
    n_iter_ : int
        Imputation rounds run.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when ``X`` has string column names.
    """

    _parameter_constraints = {"max_iter": Integer(0)}

    def __init__(self, max_iter=10, random_state=None):
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit(self, X, y):
        self.imputer_ = IterativeImputer(max_iter=self.max_iter, random_state=self.random_state)
        self.regressor_ = LinearRegression().fit(self.imputer_.fit_transform(X), y)
        self.n_iter_ = self.imputer_.n_iter_

    def _predict(self, X):
        return self.regressor_.predict(self.imputer_.transform(X))


class ImputeMaskLinearRegressor(_MissingValuesRegressor):
    """Linear regression on the features imputed by 0, concatenated with the mask.

    Attributes
    ----------
    regressor_ : LinearRegression
        Fitted on ``[X with 0 for NaN, mask]``, of shape (n_samples, 2 * n_features).
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when ``X`` has string column names.
    """

    def _fit(self, X, y):
        self.regressor_ = LinearRegression().fit(_impute_and_mask(X, 0.0), y)

    def _predict(self, X):
        return self.regressor_.predict(_impute_and_mask(X, 0.0))


class ImputeMaskMLPRegressor(_MissingValuesRegressor):
    """One-hidden-layer ReLU MLP on the imputed features concatenated with the mask.

    The paper's MLP baseline. Features are standardized with their observed mean and
    standard deviation and missing entries set to 0 (so imputed by the mean; with the mask
    as input this is the same model class as imputing by 0); ``y`` is standardized too.
    Training is scikit-learn's ``MLPRegressor`` (Adam, early stopping on an internal
    validation split).

    Parameters
    ----------
    width : int or None, default=None
        Hidden units. None picks it among ``width_factors * n_features`` on a validation
        split (paper: between ``d`` and ``100 d``). With too few samples for validation
        (fewer than 2 on either side), the smallest candidate is used without early stopping.
    width_factors : tuple of int, default=(1, 5, 20)
        Candidate widths as multiples of ``n_features`` when ``width`` is None.
    validation_fraction : float, default=0.1
        Fraction of the training set held out to pick the width (when ``width`` is None)
        and, inside ``MLPRegressor``, for early stopping.
    learning_rate_init : float or "auto", default="auto"
        Adam learning rate; "auto" is ``1e-2 / n_features`` as in the paper.
    batch_size : int, default=200
    max_iter : int, default=200
        Maximum epochs.
    alpha : float, default=1e-4
        L2 penalty.
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    best_width_ : int
        Hidden units of the kept network.
    n_iter_ : int
        Epochs run by the kept network.
    validation_scores_ : dict
        Validation R^2 of every candidate width (only when ``width`` is None).
    mlp_ : MLPRegressor
    x_mean_, x_scale_ : ndarray of shape (n_features,)
    y_mean_, y_scale_ : float
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when ``X`` has string column names.
    """

    _parameter_constraints = {
        "width": AnyOf(NoneValue(), Integer(1)),
        "width_factors": SequenceOf(Integer(1)),
        "validation_fraction": Real(0, 1, closed="neither"),
        "learning_rate_init": AnyOf(Options("auto"), Real(0, None, closed="neither")),
        "batch_size": Integer(1),
        "max_iter": Integer(1),
        "alpha": Real(0),
    }

    def __init__(
        self,
        width=None,
        width_factors=(1, 5, 20),
        validation_fraction=0.1,
        learning_rate_init="auto",
        batch_size=200,
        max_iter=200,
        alpha=1e-4,
        random_state=None,
    ):
        self.width = width
        self.width_factors = width_factors
        self.validation_fraction = validation_fraction
        self.learning_rate_init = learning_rate_init
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.alpha = alpha
        self.random_state = random_state

    def _fit(self, X, y):
        if self.width is None:
            widths = sorted({int(f) * X.shape[1] for f in self.width_factors})
        else:
            widths = [int(self.width)]
        self.x_mean_, self.x_scale_ = observed_mean_scale(X)
        self.y_mean_ = float(np.mean(y))
        self.y_scale_ = float(np.std(y)) or 1.0
        inputs = self._inputs(X)
        target = (y - self.y_mean_) / self.y_scale_
        if len(widths) == 1 or not self._can_validate(X.shape[0]):
            self.best_width_ = widths[0]
            self.mlp_ = self._make_mlp(widths[0], X.shape[0]).fit(inputs, target)
            self.n_iter_ = self.mlp_.n_iter_
            return
        in_train, in_val, t_train, t_val = train_test_split(
            inputs,
            target,
            test_size=self.validation_fraction,
            random_state=self.random_state,
        )
        self.validation_scores_ = {}
        for width in widths:
            mlp = self._make_mlp(width, in_train.shape[0]).fit(in_train, t_train)
            self.validation_scores_[width] = mlp.score(in_val, t_val)
            if width == max(self.validation_scores_, key=self.validation_scores_.get):
                self.best_width_, self.mlp_ = width, mlp
        self.n_iter_ = self.mlp_.n_iter_

    def _predict(self, X):
        return self.mlp_.predict(self._inputs(X)) * self.y_scale_ + self.y_mean_

    def _inputs(self, X):
        return _impute_and_mask((X - self.x_mean_) / self.x_scale_, 0.0)

    def _can_validate(self, n_samples):
        """Whether ``n_samples`` leave at least 2 samples on each side of a validation split."""
        n_val = int(np.ceil(self.validation_fraction * n_samples))
        return n_val >= 2 and n_samples - n_val >= 2

    def _make_mlp(self, width, n_samples):
        early_stopping = self._can_validate(n_samples)
        if early_stopping:
            n_samples -= int(np.ceil(self.validation_fraction * n_samples))
        learning_rate = self.learning_rate_init
        if learning_rate == "auto":
            learning_rate = 1e-2 / self.n_features_in_
        return MLPRegressor(
            hidden_layer_sizes=(width,),
            activation="relu",
            solver="adam",
            alpha=self.alpha,
            batch_size=min(self.batch_size, n_samples),
            learning_rate_init=learning_rate,
            max_iter=self.max_iter,
            early_stopping=early_stopping,
            validation_fraction=self.validation_fraction,
            random_state=self.random_state,
        )
