"""Bridge to R's ``norm`` package (Schafer's EM for multivariate normal data) through rpy2.

The paper's EM baseline fits a joint Gaussian to (y, X) with missing values and predicts
E[y | x_obs]. This module runs that EM in R (``prelim.norm``, ``em.norm``, ``getparam.norm``)
so that the package's own :class:`neumiss.baselines.EMRegressor` can be checked against a
reference implementation.

Nothing here is imported by ``import neumiss``: rpy2 and R are loaded only when a function of
this module is called. Requirements: R, the R package ``norm`` (CRAN) and ``rpy2``
(``pip install 'neumiss[r]'``, which pins rpy2 3.5.17: rpy2 3.6 needs R >= 4.3).
"""

import contextlib
import os

import numpy as np

from ..checks import Integer, Real, check_params
from ._baselines import _JointGaussianRegressor

_INSTALL_RPY2 = (
    "pip install 'neumiss[r]' (installs rpy2==3.5.17; rpy2 3.6 needs R >= 4.3), "
    "and R itself (Debian/Ubuntu: apt-get install r-base-core r-base-dev)"
)

#: Settings of :func:`em_norm`, also the parameters of :class:`NormEMRegressor`.
_EM_NORM_CONSTRAINTS = {"max_iter": Integer(1), "criterion": Real(0, None, closed="neither")}


@contextlib.contextmanager
def _environment_kept(*names):
    """Restore the environment variables ``names`` on exit.

    Starting R through rpy2 prepends R's and the system's library folders to
    ``LD_LIBRARY_PATH``. The running process no longer needs it (its libraries
    are loaded), but its child processes would inherit it, and a Python built
    elsewhere (pyenv, conda) would then load the system's libpython instead of
    its own.
    """
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _discard(text: str) -> None:
    """An R console callback that prints nothing."""


@contextlib.contextmanager
def _quiet_r(robjects):
    """Within the block R prints nothing to the console and ignores its warnings.

    rpy2 echoes R's console output as "R[write to console]: ..." lines; R's
    deferred warnings (e.g. "library ... contains no packages" while looking
    for ``norm``) would be printed later, at the next top-level call or at
    exit. ``options(warn = -1)`` drops them at the source; errors still raise.
    """
    from rpy2.rinterface_lib import callbacks

    options = robjects.r["options"]
    previous = robjects.r("getOption('warn')")
    options(warn=-1)
    try:
        with callbacks.obj_in_module(callbacks, "consolewrite_print", _discard), \
                callbacks.obj_in_module(callbacks, "consolewrite_warnerror", _discard):
            yield
    finally:
        options(warn=previous)


def load_norm():
    """Load rpy2 and the R package ``norm``.

    Returns
    -------
    robjects : module
        ``rpy2.robjects``.
    norm : rpy2 package
        The R package ``norm``.

    Raises
    ------
    ImportError
        If rpy2 is not installed, cannot start R, or ``norm`` is not installed in R; the
        message says what to install.
    """
    try:
        import rpy2  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"neumiss.baselines.em_norm needs rpy2 and R: {_INSTALL_RPY2}.") from exc
    try:
        with _environment_kept("LD_LIBRARY_PATH", "R_HOME"):
            import rpy2.robjects as robjects
            from rpy2.robjects.packages import PackageNotInstalledError, importr
    except Exception as exc:  # rpy2 raises various errors when R is absent or too old
        if "R_getVar" in str(exc):
            raise ImportError(
                "rpy2 could not load R (undefined symbol R_getVar): this rpy2 needs R >= 4.3. "
                "With an older R install rpy2 3.5.17: pip install 'rpy2==3.5.17'."
            ) from exc
        raise ImportError(
            f"rpy2 is installed but could not start R ({type(exc).__name__}: {exc}). "
            f"Install R and a matching rpy2: {_INSTALL_RPY2}."
        ) from exc
    try:
        with _quiet_r(robjects):
            norm = importr("norm")
    except PackageNotInstalledError as exc:
        raise ImportError(
            "the R package 'norm' is not installed: in R run install.packages('norm') "
            "(it is on CRAN only)."
        ) from exc
    return robjects, norm


def em_norm(X, max_iter=1000, criterion=1e-4):
    """Maximum-likelihood mean and covariance of Gaussian data with missing values, by R's norm.

    Runs ``prelim.norm``, ``em.norm`` (no prior, i.e. the MLE) and ``getparam.norm``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data; NaN marks a missing entry. Every column needs at least one observed value.
    max_iter : int, default=1000
        Maximum number of EM iterations (``maxits`` of ``em.norm``).
    criterion : float, default=1e-4
        Convergence threshold of ``em.norm``: the largest absolute change of a parameter,
        measured on norm's internal scale (columns centred and scaled by their observed
        mean and standard deviation).

    Returns
    -------
    mean : ndarray of shape (n_features,)
    cov : ndarray of shape (n_features, n_features)
        Maximum-likelihood covariance (divisor n).

    Raises
    ------
    ImportError
        If rpy2, R or the R package ``norm`` is missing.
    ValueError
        If X is not a 2-D numeric array, contains infinite values or a column without any
        observed value, or if ``max_iter`` is not an integer >= 1 or ``criterion`` not a
        finite number > 0.
    """
    check_params("em_norm", {"max_iter": max_iter, "criterion": criterion}, _EM_NORM_CONSTRAINTS)
    X = np.array(X, dtype=float)  # copy: the user's array is never touched
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X.shape}.")
    if np.isinf(X).any():
        raise ValueError("X contains infinite values; only NaN (missing) is allowed.")
    empty = np.flatnonzero(np.isnan(X).all(axis=0))
    if empty.size:
        raise ValueError(f"X has no observed value in column(s) {empty.tolist()}.")

    robjects, norm = load_norm()
    n, p = X.shape
    # R's NA is a NaN payload; norm tests is.na(), which is TRUE for both NA and NaN.
    x_r = robjects.r.matrix(robjects.FloatVector(X.ravel(order="F")), nrow=n, ncol=p)
    with _quiet_r(robjects):
        s = norm.prelim_norm(x_r)
        theta = norm.em_norm(s, showits=False, maxits=int(max_iter), criterion=float(criterion))
        params = norm.getparam_norm(s, theta)
    mean = np.array(params.rx2("mu"), dtype=float)
    cov = np.array(params.rx2("sigma"), dtype=float).reshape(p, p, order="F")
    return mean, cov


class NormEMRegressor(_JointGaussianRegressor):
    """The paper's EM baseline computed by R's ``norm``: a joint Gaussian of (y, X).

    ``fit(X, y)`` (NaN = missing in X) estimates the mean and covariance of the
    (n_features + 1)-dimensional vector (y, x) by EM in R (:func:`em_norm`); ``predict``
    returns E[y | x_obs] under that Gaussian, the Bayes predictor when the data are
    Gaussian and missing at random (rows with every entry missing get the mean of y).

    Parameters
    ----------
    max_iter : int, default=1000
        Maximum number of EM iterations.
    criterion : float, default=1e-4
        Convergence threshold of ``em.norm`` (see :func:`em_norm`).

    Attributes
    ----------
    mean_ : ndarray of shape (n_features + 1,)
        Estimated mean of (y, x), y first.
    cov_ : ndarray of shape (n_features + 1, n_features + 1)
        Estimated covariance of (y, x), y first.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X has string column names.
    """

    _parameter_constraints = _EM_NORM_CONSTRAINTS

    def __init__(self, max_iter=1000, criterion=1e-4):
        self.max_iter = max_iter
        self.criterion = criterion

    def _fit(self, X, y):
        self.mean_, self.cov_ = em_norm(
            np.column_stack([y, X]), max_iter=self.max_iter, criterion=self.criterion
        )
