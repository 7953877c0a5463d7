"""A data-driven start: the block at the Neumann iterates of the data's covariance, the
heads' linear part at the penalized linear fit of the target on the block's output.

Started at random near the identity, a deep block first has to learn what the
data's covariance already says. Started from the observed means and the
pairwise-complete covariance of the training rows (:func:`observed_moments`),
the block computes at initialisation the Neumann approximation of
``E[X_mis | X_obs]`` that :func:`~neumiss.network.set_analytic_weights` writes
down for a Gaussian with those moments (paper, Section 3.2), and training only
corrects it (non-Gaussian data, MNAR mechanisms).

Then :func:`start_linear_parts` fits each member's linear part (the linear head, or
the skip beside an MLP head, and the output bias) to the training rows through that
block, minimising the L2-penalized training loss itself (ridge, from its normal
equations, for the squared loss; penalized logistic regression by Newton's method for
the log loss): training starts from
the linear method fitted through the imputation, and the MLP (its last layer at zero)
learns what is not linear. Early stopping on a few validation rows then rarely ends
below that linear fit.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.special
import torch

from ._analytic import computes_iterates, set_analytic_weights, set_chebyshev_weights
from ._block import NeuMissNetwork
from ._data import TrainingData
from ._losses import TargetLoss
from ._optimizer import lbfgs
from ._ridge import distinct_members, per_distinct_member, ridge_penalty, ridge_solutions
from ._spline import quantile_ramps, spline_bins

#: Rows drawn (at most) to estimate the moments: their error is then far below what
#: training corrects, at a cost independent of the table's length.
MOMENT_ROWS = 20_000

#: Eigenvalues of the pairwise-complete covariance are raised to at least this fraction of
#: the largest one: pairwise estimates need not be positive definite, and the Neumann
#: iterates converge only for a positive definite matrix.
EIGENVALUE_FLOOR = 1e-3


#: Training rows per feature from which :func:`moment_scale` runs the Neumann iterates at
#: the midpoint of the covariance's spectrum; below, at its spectral radius.
MIDPOINT_ROWS_PER_FEATURE = 100


def moment_scale(n_rows: int, n_features: int, weight_sharing: str = "shared") -> str:
    """How the data start runs its Neumann iterates (:func:`start_from_moments`) for a
    table of ``n_rows`` x ``n_features``: from :data:`MIDPOINT_ROWS_PER_FEATURE` rows per
    feature, where the covariance is well estimated, as fast as the block allows:
    ``"chebyshev"`` steps for a block with one matrix per iteration (``weight_sharing=
    "independent"``; :func:`~neumiss.network.set_chebyshev_weights`), else one scale at
    the ``"midpoint"`` of the spectrum, where the iterates converge twice as fast as at
    the spectral radius; below, at the ``"radius"``, whose slower truncated series damps
    the small eigenvalues of a covariance estimated from few rows (regularization sized
    to n: on the real-data suite's small tables the midpoint lost, e.g. house_votes log
    loss 0.118 -> 0.142, un_lifeexp R² 0.879 -> 0.870; results/realdata/README.md)."""
    if n_rows < MIDPOINT_ROWS_PER_FEATURE * n_features:
        return "radius"
    return "chebyshev" if weight_sharing == "independent" else "midpoint"


#: The L2 penalty of :func:`start_linear_parts` on the mean log loss is this over the
#: number of rows (logistic regression's default ``C = 1``).
LINEAR_PENALTY = 1.0

#: Where the members of a one-logit start hold rows out (out of fold), its penalty moves
#: from :data:`LINEAR_PENALTY` by this factor at a time, within these multiples of it,
#: while the held-out log loss falls by more than :data:`PENALTY_MIN_GAIN` of itself
#: (:class:`HeldOutPenalty`). The suite's binary tables chose 0.1 to 100 times it, mostly
#: more: C = 1 overfits their noisy columns and the spline term's ramps.
PENALTY_STEP = 10.0**0.5
PENALTY_RANGE = (1e-2, 1e3)
PENALTY_MIN_GAIN = 1e-4

#: L-BFGS iterations of :func:`start_linear_parts` (it converges in far fewer on
#: standardized features).
LINEAR_ITERATIONS = 200


def _rows(n: int, max_rows: int, seed: int) -> np.ndarray:
    """At most ``max_rows`` of ``n`` row indices, drawn with ``seed``, in order."""
    if n <= max_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_rows, replace=False))


def observed_moments(data: TrainingData, seed: int = 0,
                     max_rows: int = MOMENT_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """The observed means (d,) and the pairwise-complete covariance (d, d) of ``data``'s
    features, made positive definite (:data:`EIGENVALUE_FLOOR`).

    Each entry uses the rows where its feature (or pair of features) is observed,
    among at most ``max_rows`` rows drawn with ``seed``. A feature never observed
    gets mean 0 and variance 1, and a pair never observed together covariance 0.
    """
    rows = _rows(len(data), max_rows, seed)
    missing = data.mask[rows].cpu().numpy() > 0.5
    mean, cov = pairwise_moments(data.x[rows].double().cpu().numpy(), ~missing)
    never = missing.all(axis=0)
    cov[never, :], cov[:, never] = 0.0, 0.0
    cov[never, never] = 1.0
    eigenvalues, eigenvectors = np.linalg.eigh((cov + cov.T) / 2)
    floor = EIGENVALUE_FLOOR * max(float(eigenvalues[-1]), 1e-12)
    cov = (eigenvectors * np.maximum(eigenvalues, floor)) @ eigenvectors.T
    return np.asarray(mean, dtype=np.float64), (cov + cov.T) / 2


def pairwise_moments(values: np.ndarray, observed: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The mean of each column of ``values`` (n, d) over its ``observed`` (n, d, bool) rows,
    and the covariance of each pair of columns over the rows observing both (divided by
    their number less one: pandas' ``DataFrame.cov`` of the table with NaN where not
    observed), 0 where a column or a pair has too few rows (none; one for the covariance).
    Computed as matrix products of the zero-filled, centred columns and the indicators
    (20,000 x 200: 0.3 s, where pandas' pairwise loop takes 2.6 s)."""
    weight = observed.astype(np.float64)
    counts = weight.sum(axis=0)
    mean = np.divide((values * weight).sum(axis=0), counts, out=np.zeros(values.shape[1]),
                     where=counts > 0)
    centred = np.where(observed, values - mean, 0.0)
    pairs = weight.T @ weight  # (d, d): rows observing both columns
    sums = centred.T @ weight  # [j, k]: the sum of column j over the rows observing k too
    products = centred.T @ centred
    cov = np.divide(products - sums * sums.T / np.maximum(pairs, 1.0), pairs - 1.0,
                    out=np.zeros_like(pairs), where=pairs > 1.0)
    return mean, cov


def data_ramps(data: TrainingData, seed: int = 0, max_rows: int = MOMENT_ROWS
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The spline term's ramps for ``data``'s features (:func:`quantile_ramps` with
    :func:`spline_bins` bins per column, among at most ``max_rows`` rows drawn with
    ``seed``), or None when there are none (a table too wide, or of binary columns)."""
    n_bins = spline_bins(data.x.shape[1])
    if n_bins < 2:
        return None
    rows = _rows(len(data), max_rows, seed)
    ramps = quantile_ramps(data.x[rows].double().cpu().numpy(),
                           data.mask[rows].cpu().numpy(), n_bins)
    return ramps if len(ramps[0]) else None


def start_from_moments(network: NeuMissNetwork, mean: np.ndarray, cov: np.ndarray,
                       scale: str = "midpoint", eigenvalues: np.ndarray | None = None) -> bool:
    """Set ``network``'s block to the Neumann iterates of ``cov`` around ``mean`` (run on
    ``cov`` divided by the midpoint of its spectrum, so that they converge as fast as one
    scale allows, or by its spectral radius (``scale="radius"``), so that they damp its
    small eigenvalues: :func:`~neumiss.network.set_analytic_weights`), or to Richardson
    steps at Chebyshev nodes (``scale="chebyshev"``, a block of depth 1 or more with one
    matrix per iteration: :func:`~neumiss.network.set_chebyshev_weights`); the head keeps
    its weights. ``eigenvalues``: ``cov``'s, ascending, when known (the scales read
    them). Returns False, leaving the network unchanged, for a block whose
    iterations cannot compute the iterates (depth 2 or more without the residual
    connection)."""
    block = network.block
    if not computes_iterates(block):
        return False
    if scale == "chebyshev" and block.depth >= 1:
        set_chebyshev_weights(block, mean, cov)
    else:
        set_analytic_weights(block, mean, cov, normalize="midpoint" if scale == "chebyshev"
                             else scale, eigenvalues=eigenvalues)
    return True


def start_linear_parts(networks: list[NeuMissNetwork], data: TrainingData,
                       loss_fn: TargetLoss, seed: int = 0,
                       max_rows: int = MOMENT_ROWS, squared: bool = False,
                       solution: tuple[torch.Tensor, torch.Tensor] | None = None,
                       logistic: bool = False,
                       initial: tuple[torch.Tensor, torch.Tensor] | None = None,
                       held_out_penalty: HeldOutPenalty | None = None,
                       block_output: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fit the linear part of each network's head on the output of ``networks[0]``'s
    block (the block a :class:`~neumiss.network.StackedNetwork` keeps), in place.

    Network ``k`` is fitted to its own rows: ``data.weight`` times column ``k`` of
    ``data.member_weight`` when given (all but its fold, out of fold). The fit minimises the
    mean (weighted) ``loss_fn`` plus ``LINEAR_PENALTY / (2 n)`` times the squared
    weights (not the bias) by L-BFGS, from zero weights, on at most ``max_rows``
    rows drawn with ``seed``. The linear part is the linear head (``mlp_depth=0``), or
    the skip and the MLP's last bias (its last weights, zero, are left so), the
    mask's own term when the network has one (``mask_skip``: the fit is then on the
    block's output and the mask), and the spline term's weights (on the ramps of the
    block's output) when it has one: each network then computes that function.
    With ``squared`` (``loss_fn`` is the squared error of one output), the fit is the
    ridge regression whose penalty
    :func:`~neumiss.network._ridge.ridge_penalty` chooses by leave-one-out error on the
    (case-weighted) rows, solved from its normal equations
    (:func:`~neumiss.network._ridge.ridge_solutions`): L-BFGS needs hundreds of passes
    over the rows on the many, correlated features of a wide table (d = 200: 15 s per fit
    against 0.1 s), and a fixed penalty is too weak for a table of many noisy columns
    (real suite, msq_neuroticism: 72 mood items).
    With ``logistic`` (``loss_fn`` is the log loss of one logit), the same objective is
    written out in numpy and solved by Newton's method, or L-BFGS on many columns
    (:func:`_logistic`), at the penalty ``held_out_penalty`` chooses when given (its
    members hold rows out, weight 0 in ``data.member_weight``).

    Returns the weights (K, n_outputs, p) and biases (K, n_outputs) set, float64. Given as
    ``solution`` (what an earlier call returned for a block computing the same function,
    on the same rows and loss: networks of another head depth), they are set without
    solving again. L-BFGS starts from ``initial`` when given (the solution of a problem
    with the same columns: another depth's block, or the block before training), not
    from zero. ``block_output``: the block's output on the rows the fit draws
    (:func:`linear_fit_rows`), when the caller holds it (the same start fitted again
    with other terms); else computed.
    """
    if solution is not None:
        _set_linear_parts(networks, *solution)
        return solution
    data = linear_fit_rows(data, max_rows, seed)
    with torch.no_grad():  # the block's output, the mask, the spline's ramps: (n, p)
        if block_output is None:
            block_output = networks[0].block.to(data.device).table_output(data.x, data.mask)
        features = _linear_features(networks[0], block_output, data.mask).double()
    n, n_members = len(data), len(networks)
    n_outputs = networks[0].head[-1].out_features
    case_weight = torch.ones(n, device=data.device) if data.weight is None else data.weight
    member_weight = (case_weight[:, None].expand(n, n_members) if data.member_weight is None
                     else case_weight[:, None] * data.member_weight).double()  # (n, K)
    target = data.target.double() if data.target.is_floating_point() else data.target
    penalty = LINEAR_PENALTY / (2.0 * n)
    keep = _columns_to_solve(features, squared, logistic and n_outputs == 1)
    kept = features if keep is None else features[:, keep]
    if keep is not None and initial is not None:
        initial = (initial[0][..., keep.to(initial[0].device)], initial[1])
    if squared:
        alpha = ridge_penalty(kept, target, case_weight.double())
        weight, bias = ridge_solutions(kept, target, member_weight, alpha)
    elif logistic and n_outputs == 1 and held_out_penalty is not None:
        weight, bias = held_out_penalty.solve(kept, target, case_weight.double(),
                                              member_weight, penalty, initial)
    elif logistic and n_outputs == 1:
        weight, bias = _logistic(kept, target, member_weight, penalty, initial)
    else:
        weight, bias = _penalized(kept, target, member_weight, n_outputs, loss_fn, penalty,
                                  initial)
    if keep is not None:  # the columns left out get weight 0
        full = weight.new_zeros(*weight.shape[:2], features.shape[1])
        full[..., keep.to(weight.device)] = weight
        weight = full
    solution = (weight, bias)
    _set_linear_parts(networks, *solution)
    return solution


def _columns_to_solve(features: torch.Tensor, squared: bool, one_logit: bool
                      ) -> torch.Tensor | None:
    """The columns of ``features`` (n, p) an exact solver of the linear start solves on,
    a boolean (p,), or None for all of them. A column constant over the rows (the mask of
    a feature never missing, a ramp never reached) has weight 0 at the optimum (the
    unpenalized bias takes its part): the ridge (``squared``) and Newton's logistic fit
    (``one_logit``, up to :data:`NEWTON_MAX_COLUMNS` columns left) solve without it,
    which halves the problem of a table of many complete columns. An iterative solver
    keeps every column: fewer columns would change its iterates, not only its cost."""
    varying = (features != features[:1]).any(dim=0)
    if bool(varying.all()):
        return None
    if squared or (one_logit and int(varying.sum()) <= NEWTON_MAX_COLUMNS):
        return varying
    return None


def _penalized(features: torch.Tensor, target: torch.Tensor, row_weight: torch.Tensor,
               n_outputs: int, loss_fn: TargetLoss, penalty: float,
               initial: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per member ``k``, the minimiser of ``mean_ik(w_ik loss_fn(f_i . beta_k + b_k, y_i))
    + penalty sum_k |beta_k|^2 / K`` by L-BFGS from zero (or ``initial``)
    (:func:`_penalized_lbfgs`): ``features`` (n, p) float64, ``target`` (n,),
    ``row_weight`` (n, K) float64. Returns the weights (K, n_outputs, p) and biases
    (K, n_outputs), float64.

    The sum is over the distinct problems only (:func:`~._ridge.distinct_members`: the
    same rows and start), each solved once: the members of an ensemble validated on
    held-out rows pose one (a 5-class table of 15,000 training rows and 540 columns with
    the ramps: 160 s a fit, most of it in these starts, for five identical solutions)."""
    n_members = row_weight.shape[1]
    if initial is None:
        initial = (torch.zeros(n_members, n_outputs, features.shape[1], dtype=torch.float64),
                   torch.zeros(n_members, n_outputs, dtype=torch.float64))
    firsts, index = distinct_members(row_weight.T.cpu().numpy(),
                                     *(start.cpu().numpy() for start in initial))
    if len(firsts) == n_members:
        return _penalized_lbfgs(features, target, row_weight, n_outputs, loss_fn, penalty,
                                initial)
    firsts = torch.as_tensor(firsts)
    weight, bias = _penalized_lbfgs(features, target, row_weight[:, firsts.to(row_weight.device)],
                                    n_outputs, loss_fn, penalty,
                                    tuple(start[firsts] for start in initial))
    index = torch.as_tensor(index, device=weight.device)
    return weight[index], bias[index]


def _penalized_lbfgs(features: torch.Tensor, target: torch.Tensor, row_weight: torch.Tensor,
                     n_outputs: int, loss_fn: TargetLoss, penalty: float,
                     initial: tuple[torch.Tensor, torch.Tensor]
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_penalized`'s objective for every member of ``row_weight`` (n, K), by
    L-BFGS from ``initial``, the gradient in closed form from ``loss_fn.raw_gradient``
    (autograd's backward pass through the members' product took four times its forward
    pass: 21 of 31 s of a 5-class fit of 15,000 rows and 540 columns)."""
    (n, p), n_members = features.shape, row_weight.shape[1]
    targets = target.repeat(n_members)
    rows_weight = row_weight.T.reshape(-1) / (n_members * n)  # the mean's weights, (K n,)
    n_weights = n_members * n_outputs * p

    def loss_and_gradient(vector: np.ndarray) -> tuple[float, np.ndarray]:
        point = torch.as_tensor(vector, device=features.device)
        weight = point[:n_weights].view(n_members, n_outputs, p)
        bias = point[n_weights:].view(n_members, n_outputs)
        outputs = torch.baddbmm(bias[:, None, :], features.expand(n_members, -1, -1),
                                weight.transpose(1, 2)).flatten(0, 1)  # (K n, n_outputs)
        value = (loss_fn(outputs, targets) @ rows_weight
                 + penalty * (weight**2).sum() / n_members)
        residual = (loss_fn.raw_gradient(outputs, targets)
                    * rows_weight[:, None]).view(n_members, n, n_outputs)
        gradient = torch.cat([
            (residual.transpose(1, 2) @ features + 2.0 * penalty * weight / n_members).ravel(),
            residual.sum(dim=1).ravel()])
        return float(value), gradient.cpu().numpy()

    start = torch.cat([initial[0].reshape(-1), initial[1].reshape(-1)]).double().cpu().numpy()
    found = torch.as_tensor(lbfgs(loss_and_gradient, start, LINEAR_ITERATIONS, 1e-7),
                            device=features.device)
    return (found[:n_weights].view(n_members, n_outputs, p),
            found[n_weights:].view(n_members, n_outputs))


def linear_fit_rows(data: TrainingData, max_rows: int = MOMENT_ROWS, seed: int = 0
                    ) -> TrainingData:
    """The rows :func:`start_linear_parts` fits on: at most ``max_rows`` of ``data``'s,
    drawn with ``seed`` (``data`` itself, not a copy, when it has no more: the linear fit
    and :meth:`~neumiss.network.DepthSearch.started_output` both ask for them)."""
    if len(data) <= max_rows:
        return data
    return data.subset(torch.as_tensor(_rows(len(data), max_rows, seed), device=data.device))


def _linear_features(network: NeuMissNetwork, block_out: torch.Tensor, mask: torch.Tensor
                     ) -> torch.Tensor:
    """What the linear part of ``network``'s head reads, (n, d [+ d] [+ R]): its block's
    output ``block_out``, then the mask (with ``mask_skip``), then the ramps of the
    spline term."""
    parts = [block_out]
    if network.mask_skip is not None:
        parts.append(mask)
    if network.spline is not None:
        parts.append(network.encoding.to(block_out.device)(block_out))
    return torch.cat(parts, dim=1)


@torch.no_grad()
def _set_linear_parts(networks: list[NeuMissNetwork], weight: torch.Tensor,
                      bias: torch.Tensor) -> None:
    """Set network ``k``'s linear part (see :func:`start_linear_parts`) to ``weight[k]``
    (n_outputs, p: the block's outputs, then the mask's, then the ramps', as
    :func:`_linear_features` orders them) and ``bias[k]`` (n_outputs,)."""
    for k, network in enumerate(networks):
        linear = network.head[-1] if network.skip is None else network.skip
        start = 0
        for term in (t for t in (linear, network.mask_skip, network.spline) if t is not None):
            width = term.weight.shape[1]
            term.weight.copy_(weight[k, :, start : start + width].float())
            start += width
        network.head[-1].bias.copy_(bias[k].float())


def _logistic(features: torch.Tensor, target: torch.Tensor, row_weight: torch.Tensor,
              penalty: float,
              initial: tuple[torch.Tensor, torch.Tensor] | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per member ``k``, the minimiser of the objective :func:`_penalized` minimises,
    for the log loss of one logit: ``mean_ik(w_ik l(y_i, f_i .
    beta_k + b_k)) + penalty sum_k |beta_k|^2 / K``: ``features`` (n, p), ``target``
    (n,) in {0, 1}, ``row_weight`` (n, K), float64; from zero (or ``initial``). Up to
    :data:`NEWTON_MAX_COLUMNS` columns by Newton's method (:func:`_newton_logistic`),
    beyond by L-BFGS with the gradient in closed form (``(sigmoid(z) - y) w``). Returns
    the weights (K, 1, p) and biases (K, 1) on the device of ``features``."""
    F, y, W = (t.cpu().numpy() for t in (features, target, row_weight))
    (n, p), n_members = F.shape, W.shape[1]
    start = np.zeros((n_members, p + 1)) if initial is None else np.concatenate(
        [initial[0].cpu().numpy()[:, 0, :], initial[1].cpu().numpy()], axis=1)
    if p <= NEWTON_MAX_COLUMNS:
        found = per_distinct_member(
            lambda k: _newton_logistic(F, y, W[:, k], penalty, start[k]), W.T, start)
    else:
        scale = 1.0 / (n * n_members)

        def loss_and_gradient(vector: np.ndarray) -> tuple[float, np.ndarray]:
            beta, bias = vector[:-n_members].reshape(n_members, p), vector[-n_members:]
            logits = F @ beta.T + bias  # (n, K)
            losses = np.logaddexp(0.0, logits) - y[:, None] * logits
            residual = W * (scipy.special.expit(logits) - y[:, None]) * scale  # (n, K)
            value = scale * np.sum(W * losses) + penalty * np.sum(beta**2) / n_members
            gradient = residual.T @ F + 2.0 * penalty * beta / n_members  # (K, p)
            return float(value), np.concatenate([gradient.ravel(), residual.sum(axis=0)])

        vector = lbfgs(loss_and_gradient, np.concatenate([start[:, :p].ravel(), start[:, p]]),
                       LINEAR_ITERATIONS, 1e-7)
        found = np.concatenate([vector[:-n_members].reshape(n_members, p),
                                vector[-n_members:, None]], axis=1)
    solution = torch.as_tensor(found, device=features.device)
    return solution[:, None, :p], solution[:, p:]


@dataclasses.dataclass
class HeldOutPenalty:
    """The penalty of a one-logit linear start whose members hold rows out, in units of
    the one given (``LINEAR_PENALTY / (2 n)``): ``scale``, chosen by the held-out log
    loss at the first :meth:`solve` (:func:`_logistic_held_out`, from ``start``: where
    another set of head terms' choice ended, close to this one's, :class:`HeldOutPenalties`)
    and kept for the next ones (the same terms on another depth's block)."""

    start: float = 1.0
    scale: float | None = None

    def solve(self, features: torch.Tensor, target: torch.Tensor, case_weight: torch.Tensor,
              row_weight: torch.Tensor, penalty: float,
              initial: tuple[torch.Tensor, torch.Tensor] | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`_logistic`'s solution at ``penalty`` times :attr:`scale`, choosing the
        scale first if not chosen yet; ``case_weight`` (n,), the rest as there."""
        if self.scale is not None:
            return _logistic(features, target, row_weight, penalty * self.scale, initial)
        weight, bias, self.scale = _logistic_held_out(features, target, case_weight,
                                                      row_weight, penalty, self.start, initial)
        return weight, bias


class HeldOutPenalties:
    """A search's :class:`HeldOutPenalty` per set of head terms (``mask_skip``,
    ``spline``), each new one starting where the last choice ended."""

    def __init__(self) -> None:
        self._by_terms: dict[tuple, HeldOutPenalty] = {}

    def for_terms(self, terms: tuple) -> HeldOutPenalty:
        """The penalty of a head with ``terms``, added if missing."""
        if terms not in self._by_terms:
            scales = [p.scale for p in self._by_terms.values() if p.scale is not None]
            self._by_terms[terms] = HeldOutPenalty(start=scales[-1] if scales else 1.0)
        return self._by_terms[terms]

    def C(self, terms: tuple) -> float:
        """The inverse penalty (scikit-learn's ``C``) of the logistic start of a head with
        ``terms``: ``1 / LINEAR_PENALTY`` unless chosen on the held-out rows."""
        penalty = self._by_terms.get(terms)
        scale = 1.0 if penalty is None or penalty.scale is None else penalty.scale
        return 1.0 / (LINEAR_PENALTY * scale)


class _PenaltyTrial(NamedTuple):
    """A penalty tried by :func:`_logistic_held_out`: held-out log loss, scale, solution."""
    loss: float
    scale: float
    solution: tuple


def _logistic_held_out(features: torch.Tensor, target: torch.Tensor,
                       case_weight: torch.Tensor, row_weight: torch.Tensor, penalty: float,
                       start: float = 1.0,
                       initial: tuple[torch.Tensor, torch.Tensor] | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """:func:`_logistic`'s solution at ``penalty`` times a scale, ``start`` times a power of
    :data:`PENALTY_STEP` within :data:`PENALTY_RANGE`, whose members score best on the
    rows they hold out (weight 0 in ``row_weight`` (n, K), ``case_weight`` (n,) > 0):
    the pooled, case-weighted log loss of each row under the members that did not train
    on it. From ``start``, the steps go up while they lower that loss, else down, each
    solution starting the next (the loss is unimodal in the penalty on the suite's
    tables). Returns the weights (K, 1, p), the biases (K, 1) and the scale; without
    held-out rows, the solution at ``penalty`` and the scale 1."""
    held_out = (row_weight == 0) & (case_weight[:, None] > 0)  # (n, K)
    if not bool(held_out.any()):
        return *_logistic(features, target, row_weight, penalty, initial), 1.0
    scoring, y = (case_weight[:, None] * held_out).cpu(), target.double().cpu()[:, None]
    F = features.cpu()

    def fit(scale: float, begin) -> _PenaltyTrial:
        weight, bias = _logistic(features, target, row_weight, penalty * scale, begin)
        logits = F @ weight[:, 0, :].cpu().T + bias[:, 0].cpu()  # (n, K)
        losses = torch.nn.functional.softplus(logits) - y * logits
        return _PenaltyTrial(float((scoring * losses).sum()), scale, (weight, bias))

    best = fit(start, initial)
    for factor in (PENALTY_STEP, 1.0 / PENALTY_STEP):
        current = best
        while PENALTY_RANGE[0] <= current.scale * factor <= PENALTY_RANGE[1]:
            trial = fit(current.scale * factor, current.solution)
            if trial.loss >= current.loss * (1.0 - PENALTY_MIN_GAIN):
                break
            current = trial
        if current is not best:  # the loss fell this way: the other way cannot lower it
            best = current
            break
    return *best.solution, best.scale


#: :func:`_logistic` solves by Newton's method up to this many columns: each step costs
#: ``n p^2 / 2`` (the Hessian's upper triangle on the member's own rows) where an L-BFGS
#: step costs ``n p``, but it converges in a few steps where L-BFGS, on the spline term's
#: correlated ramps, ran to its cap of :data:`LINEAR_ITERATIONS` without converging
#: (mgus2_death, 78 columns: 27 Newton steps for five members in 34 ms against 159 ms;
#: bfi_female's ramps, 171 columns, searched for their held-out penalty: a fit 0.70 s
#: with L-BFGS beyond 160 columns, 0.52 s with Newton).
NEWTON_MAX_COLUMNS = 256


def _newton_logistic(F: np.ndarray, y: np.ndarray, w: np.ndarray, penalty: float,
                     start: np.ndarray, max_steps: int = 50) -> np.ndarray:
    """The minimiser ``(beta, b)`` (p + 1,) of ``mean_i(w_i l(y_i, F_i . beta + b)) +
    penalty |beta|^2`` by Newton's method from ``start``, each step halved until the
    objective falls enough (Armijo); until the Newton decrement is below 1e-12. ``F``
    (n, p), ``y`` and ``w`` (n,), float64."""
    n, p = F.shape
    trains = w > 0  # the rows weighing 0 (a member's held-out fold) take no part
    design = np.hstack([F[trains], np.ones((int(trains.sum()), 1))])
    weight, y = w[trains] / n, y[trains]
    ridge = np.full(p + 1, 2.0 * penalty)
    ridge[-1] = 0.0  # the bias is not penalized

    def objective(theta: np.ndarray) -> float:
        logits = design @ theta
        return float(weight @ (np.logaddexp(0.0, logits) - y * logits)
                     + 0.5 * ridge @ theta**2)

    theta, value = start.copy(), objective(start)
    for _ in range(max_steps):
        prob = scipy.special.expit(design @ theta)
        gradient = design.T @ (weight * (prob - y)) + ridge * theta
        # the upper triangle of the Hessian, all the solve reads: half a product's cost
        scaled = design * np.sqrt(weight * prob * (1.0 - prob))[:, None]
        hessian = scipy.linalg.blas.dsyrk(1.0, scaled, trans=1)
        diagonal = np.diag_indices_from(hessian)
        hessian[diagonal] += ridge + 1e-12 * (np.trace(hessian) + ridge.sum()) / (p + 1)
        step = scipy.linalg.solve(hessian, gradient, assume_a="pos")
        decrement = float(gradient @ step)
        if decrement < 1e-12:
            break
        size, trial_value = 1.0, objective(theta - step)
        while trial_value > value - 0.25 * size * decrement:
            size *= 0.5
            if size < 1e-10:  # no descent left at float64's precision
                return theta
            trial_value = objective(theta - size * step)
        theta, value = theta - size * step, trial_value
    return theta
