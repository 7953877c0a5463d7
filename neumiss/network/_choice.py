"""The decision rules of the depth search: its candidates, the one-standard-error rule,
when to stop deepening, when to untie and when to offer the Chebyshev start
(:mod:`._search` applies them), and what it returns (:class:`SearchResult`)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._data import TrainingData, validation_loss
from ._stacked import StackedNetwork
from ._start import moment_scale
from ._stopping import ABANDON_MARGIN
from ._training import TrainingResult

#: Depths in a row without improvement that end the depth search.
DEPTH_PATIENCE = 2

#: A deeper candidate replaces the best depth only when it lowers the validation loss
#: by more than this many standard errors of the paired per-row difference (the
#: one-standard-error rule; :func:`clearly_better`).
DEPTH_STANDARD_ERRORS = 1.0

#: Relative differences of mean loss below this are float32 rounding, never a gain: two
#: networks computing the same function (a candidate that kept its start) differ by it.
ROUNDING = 1e-6

#: ``weight_sharing="auto"`` unties only with at least this many training rows per
#: parameter of the untied block, ``(depth + 1) d^2`` (results/README.md, "Untying").
UNTIE_ROWS_PER_PARAMETER = 10

#: Out of fold, the members' shared block trains only with at least this many training rows
#: per parameter it holds (:func:`trains_block`): ``2 d^2 + d`` at depth 1, ``3 d^2 + d``
#: deeper with one shared Neumann matrix (a block of depth 0 started from the moments never
#: trains). Counting the means alone at depth 0 trained them on real tables of hundreds of
#: columns, which lost (spi_age R² 0.540 -> 0.505; results/realdata/README.md).
OUT_OF_FOLD_ROWS_PER_PARAMETER = 10


class Candidate(NamedTuple):
    """One trained network of the search and its training summary. ``mlp_weight``: the
    MLP heads' weight in a blend with linear heads
    (:meth:`~neumiss.network.DepthSearch.fitted_linear_head`), None for a head alone."""

    depth: int
    weight_sharing: str
    mlp_depth: int
    network: StackedNetwork
    result: TrainingResult
    seconds: float
    mlp_weight: float | None = None

    @property
    def val_loss(self) -> float:
        return self.result.best_val_loss

    def summary(self) -> dict[str, float]:
        """``val_loss``, ``val_score`` (of the best epoch), ``epochs`` and ``seconds``."""
        return {
            "val_loss": self.result.best_val_loss,
            "val_score": self.result.best_val_score,
            "epochs": self.result.n_epochs,
            "seconds": self.seconds,
        }


class SearchResult(NamedTuple):
    """The chosen candidate, the summary of every depth trained, and of the fine-tunes.

    ``untied`` is None when ``weight_sharing="auto"`` did not fine-tune an untied copy
    (other weight modes, depth below 2, or too few rows per parameter).
    ``heads``: the summary of each head depth fine-tuned after the chain (empty
    with one head depth). ``mask_skip``: whether the networks have the mask's own
    linear term. ``chebyshev``: the summary of the Chebyshev-started candidate
    (:func:`try_chebyshev`), None when it was not tried. ``starts``: per depth
    screened, ``val_loss`` and ``val_score`` of its data start
    (:meth:`~neumiss.network.DepthSearch.screen`), None when the depths were not
    screened. ``spline``: whether the networks have the spline term. ``identity``: per
    depth, the summary of the chain from the identity start
    (:meth:`~neumiss.network.DepthSearch.identity_chain`), None when it was not tried.
    ``start_C``: the inverse penalty (scikit-learn's ``C``) of the kept head terms'
    logistic start (:meth:`~neumiss.network._start.HeldOutPenalties.C`).
    """

    best: Candidate
    depth_results: dict[int, dict[str, float]]
    untied: dict[str, float] | None
    heads: dict[int, dict[str, float]]
    mask_skip: bool
    chebyshev: dict[str, float] | None = None
    starts: dict[int, dict[str, float]] | None = None
    spline: bool = False
    identity: dict[int, dict[str, float]] | None = None
    start_C: float = 1.0


def clearly_better(
    losses: torch.Tensor, reference: torch.Tensor, weight: torch.Tensor | None = None,
    standard_errors: float = DEPTH_STANDARD_ERRORS,
) -> bool:
    """Whether per-row ``losses`` (n,) beat ``reference`` (n,), the losses of another
    network on the same rows, by more than ``standard_errors`` standard errors of
    their mean paired difference (case-weighted by ``weight`` (n,), with the
    effective number of rows ``(sum w)^2 / sum w^2``).

    On a few hundred validation rows, one depth often beats another by chance;
    the rule keeps the shallower network unless the deeper one is clearly better.
    On large validation sets the standard error is small and any real gain counts; a
    difference of float32 rounding (:data:`ROUNDING`) never does.
    """
    difference = (losses - reference).double()
    if weight is None:
        weight = torch.ones_like(difference)
    weight = weight.double() / weight.sum()
    mean = float((weight * difference).sum())
    variance = float((weight * (difference - mean) ** 2).sum())
    n_effective = 1.0 / float((weight**2).sum())
    scale = float((weight * reference.double().abs()).sum())
    return (mean < -ROUNDING * scale
            and mean + standard_errors * (variance / max(n_effective - 1.0, 1.0)) ** 0.5 < 0.0)


def clearly_lower(losses: torch.Tensor, reference: torch.Tensor,
                  weight: torch.Tensor | None, min_gain: float = 0.0) -> bool:
    """Whether per-row ``losses`` (n,) are :func:`clearly_better` than ``reference`` (n,)
    and their (case-weighted) mean lower by the fraction ``min_gain`` at least."""
    mean, reference_mean = (validation_loss(v, weight) for v in (losses, reference))
    return (clearly_better(losses, reference, weight)
            and reference_mean - mean >= min_gain * reference_mean)


def trains_block(val_data: TrainingData | None, block: torch.nn.Module, n_train: int,
                 from_moments: bool = False) -> bool:
    """Whether the search trains the members' shared ``block`` on ``n_train`` rows.

    Never a block of depth 0 started ``from_moments`` (the order-0 Neumann estimate from
    the training rows' moments, :func:`~neumiss.network.start_from_moments`): trained, its
    ``d (d + 1)`` parameters refit that imputation to the target, which on the real-data
    suite gained nothing (mean rank 2.17 either way over both halves;
    results/realdata/README.md), while the gradient of its output, through the spline's
    ramps and the MLP heads' first layer, took about a third of each step (tbc_hgt and
    brandsma_lpo fit 30% faster with it frozen). The paper's chain from the identity start
    (``from_moments`` False) trains its own.

    Otherwise always, unless the members validate out of fold (``val_data.held_out_by``);
    then only with at least :data:`OUT_OF_FOLD_ROWS_PER_PARAMETER` rows per parameter of
    the block. Each member's head trains on its own rows only, but one block serves them
    all, so that trained, it is fitted to every row through the members that train on it,
    and a row's held-out member scores it through a block that has seen it: the
    out-of-fold losses then choose epochs and candidates that overfit (simulated, 300
    rows: validation log loss 0.53 for a test one of 0.76; with the block at its start
    from the training rows' moments, which never see the target, 0.64 and 0.62). A block
    of few parameters for its rows learns little of any one row, and a self-masked table
    needs it trained (the README's example, 5,000 rows, d = 5: test R² 0.570 with the
    block at its start, 0.632 trained). An untrained block keeps its start: from the
    moments, the Neumann approximation of the conditional expectation of its order."""
    if from_moments and block.depth == 0:
        return False
    if val_data is None or val_data.held_out_by is None:
        return True
    return n_train >= OUT_OF_FOLD_ROWS_PER_PARAMETER * sum(p.numel() for p in block.parameters())


def worth_untying(depth: int, n_features: int, n_train: int) -> bool:
    """Whether ``weight_sharing="auto"`` fine-tunes an untied copy at ``depth``: it needs a
    Neumann iteration (depth >= 2) and :data:`UNTIE_ROWS_PER_PARAMETER` training
    rows per parameter of the untied block, ``(depth + 1) * n_features**2``."""
    return depth >= 2 and n_train >= UNTIE_ROWS_PER_PARAMETER * (depth + 1) * n_features**2


def try_chebyshev(depth_results: dict[int, dict], train_data: TrainingData,
                  val_data: TrainingData | None, moments) -> bool:
    """Whether ``weight_sharing="auto"`` offers, after the chain, the linear heads on a
    block with one matrix per iteration at the chain's deepest depth, started at
    Chebyshev steps and untrained (:meth:`DepthSearch.chebyshev`): it needs the moments,
    validation rows to decide, a depth of 2 or more, and the rows per feature from which
    :func:`moment_scale` trusts the covariance. Where training kept the shared block's
    start, that start converges in ``D`` steps as the shared one does in about ``D^2``
    (d = 50, n = 1e4, MCAR: R² - Bayes -0.046 -> -0.024, results/README.md); where
    training moved it (self-masking), the trained shared block stays."""
    n_rows, n_features = train_data.x.shape
    return (moments is not None and val_data is not None and max(depth_results) >= 2
            and moment_scale(n_rows, n_features, "independent") == "chebyshev")


def identity_depth(best: Candidate, depth_results: dict[int, dict]) -> int:
    """The depth the chain from the identity goes to (:meth:`DepthSearch.identity_chain`):
    the deepest block the search trained (``depth_results``, per depth its summary) whose
    validation loss is not far behind ``best``'s, at most ``1 + ABANDON_MARGIN`` times it
    (:func:`~neumiss.network._stopping.abandon_level`'s relative margin). A deep block
    started from biased moments may validate a little below depth 0 where the chain from
    the identity does better (probit self-masking d = 20, n = 1e4, its members on every
    row: depth 16 0.759 against depth 0's 0.766, the chain 0.804); one far behind (a
    real table's depth 16 at 0.93 against 0.99) leaves no chain worth its training."""
    near = [depth for depth, summary in depth_results.items()
            if summary["val_loss"] <= (1 + ABANDON_MARGIN) * best.val_loss]
    return max(near, default=0)


def try_identity_chain(depth: int, mask_skip: bool, val_data: TrainingData | None,
                       moments) -> bool:
    """Whether the search also trains the paper's chain from the identity start
    (:meth:`DepthSearch.identity_chain`) beside the candidates started from the moments:
    when the mask's own term was kept (the missingness tells the target: values missing
    at random or not at random, where the observed values' moments that start the blocks
    are biased), the search trained a block that iterates (``depth``, its deepest, 2 or
    more, whichever depth it chose), validation rows decide, and
    the moments started the candidates (else they came from the identity already). On
    the simulated grid's self-masking cells, the data-started blocks stayed close to
    their start, where the chain from the identity trained further (probit self-masking
    d = 20, n = 1e4: test R² 0.759 -> 0.800; results/README.md)."""
    return mask_skip and depth >= 2 and val_data is not None and moments is not None


class DepthChoice:
    """The chain's best depth so far, and whether to go deeper.

    A candidate replaces the best one when it is clearly better on the
    validation rows (:func:`clearly_better` on the per-row losses, weighted by
    ``weight``) or, without validation rows, when its loss is lower. After
    :data:`DEPTH_PATIENCE` candidates in a row that did not replace it, deeper
    ones would start from depths that overfit: the chain stops.

    Attributes
    ----------
    best : Candidate or None
        The best candidate offered, None before the first.
    losses : Tensor of shape (n_val,) or None
        Its per-row validation losses, as offered (None without validation rows).
    """

    def __init__(self, weight: torch.Tensor | None = None) -> None:
        self.best: Candidate | None = None
        self._weight = weight
        self.losses: torch.Tensor | None = None
        self._worse = 0

    def offer(self, candidate: Candidate, losses: torch.Tensor | None) -> bool:
        """Consider ``candidate`` with its per-row validation losses ``losses`` (n,) (None
        without validation rows); whether to go deeper."""
        if self.best is None or self._beats(candidate, losses):
            self.best, self.losses, self._worse = candidate, losses, 0
            return True
        self._worse += 1
        return self._worse < DEPTH_PATIENCE

    def _beats(self, candidate: Candidate, losses: torch.Tensor | None) -> bool:
        if losses is None:
            return candidate.val_loss < self.best.val_loss
        return clearly_better(losses, self.losses, self._weight)
