"""The depth and weight-mode search of the NeuMiss estimators.

Candidate depths are trained in increasing order on the same split, each
warm-started from the previous one (an MLP head restarts its MLP part:
:meth:`neumiss.block.NeuMissNetwork.warm_start_from`). A deeper depth
replaces the best one only when it is clearly better on the validation rows
(:func:`clearly_better`, the one-standard-error rule); the search stops when
:data:`DEPTH_PATIENCE` depths in a row have not replaced it (one noisy training
does not end it). With ``weight_sharing="auto"`` the chain uses
one shared Neumann matrix, then an independent ("untied") copy is fine-tuned
at the chosen depth and kept if it lowers the validation loss. With several
head depths (``mlp_depth="auto"``), the chain uses the first (an MLP head
beside a linear skip), then each other head is fine-tuned from the chosen
network and kept if it lowers the validation loss. A linear head starts from
the skip (the function less the MLP's part), an MLP head from a linear one as
the same function (the skip receives the linear head, the MLP's last layer
starts at zero).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from ._block import NeuMissNetwork
from ._data import TrainingData, row_losses
from ._divergence import DivergenceWarning
from ._training import TrainingConfig, TrainingResult, train

#: Depths tried by ``depth="auto"``. Each doubles the previous one so that a
#: warm start stays close (results/README.md, "Depth search").
AUTO_DEPTHS = (0, 2, 4, 8, 16)

#: Depths in a row without improvement that end the depth search.
DEPTH_PATIENCE = 2

#: A deeper candidate replaces the best depth only when it lowers the validation loss
#: by more than this many standard errors of the paired per-row difference (the
#: one-standard-error rule; :func:`clearly_better`).
DEPTH_STANDARD_ERRORS = 1.0

#: Head depths tried by ``mlp_depth="auto"``: the chain's two-layer MLP head (real
#: data), then the paper's linear head (linear targets at large n; results/README.md).
AUTO_MLP_DEPTHS = (2, 0)

#: ``weight_sharing="auto"`` unties only with at least this many training rows per
#: parameter of the untied block, ``(depth + 1) d^2`` (results/README.md, "Untying").
UNTIE_ROWS_PER_PARAMETER = 10


class Objective(NamedTuple):
    """What training minimises and reports.

    ``loss(output, target)`` is a mean loss; ``score(val_loss)`` maps a
    validation loss to the score shown in histories (e.g. R²).
    """

    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    score: Callable[[float], float]


class Candidate(NamedTuple):
    """One trained network of the search and its training summary."""

    depth: int
    weight_sharing: str
    mlp_depth: int
    network: NeuMissNetwork
    result: TrainingResult
    seconds: float

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
    with one head depth).
    ``predecessor`` is the trained network the chain warm-started the chosen depth
    from (the previous depth's, or ``start_from``), None when it started from scratch.
    """

    best: Candidate
    depth_results: dict[int, dict[str, float]]
    untied: dict[str, float] | None
    heads: dict[int, dict[str, float]]
    predecessor: NeuMissNetwork | None = None


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
    On large validation sets the standard error is small and any real gain counts.
    """
    difference = (losses - reference).double()
    if weight is None:
        weight = torch.ones_like(difference)
    weight = weight.double() / weight.sum()
    mean = float((weight * difference).sum())
    variance = float((weight * (difference - mean) ** 2).sum())
    n_effective = 1.0 / float((weight**2).sum())
    return mean + standard_errors * (variance / max(n_effective - 1.0, 1.0)) ** 0.5 < 0.0


def worth_untying(depth: int, n_features: int, n_train: int) -> bool:
    """Whether ``weight_sharing="auto"`` fine-tunes an untied copy at ``depth``: it needs a
    Neumann iteration (depth >= 2) and :data:`UNTIE_ROWS_PER_PARAMETER` training
    rows per parameter of the untied block, ``(depth + 1) * n_features**2``."""
    return depth >= 2 and n_train >= UNTIE_ROWS_PER_PARAMETER * (depth + 1) * n_features**2


def search_depths(
    build_network: Callable[[int, str, int], NeuMissNetwork],
    depths: Sequence[int],
    weight_sharing: str,
    mlp_depths: Sequence[int],
    train_data: TrainingData,
    val_data: TrainingData | None,
    objective: Objective,
    config: TrainingConfig,
    seed: int,
    *,
    verbose: int = 0,
    label: str = "NeuMiss",
    start_from: NeuMissNetwork | None = None,
    follow: bool = False,
) -> SearchResult:
    """Train ``depths`` in increasing order and return the best network.

    Parameters
    ----------
    build_network : callable ``(depth, weight_sharing, mlp_depth) -> NeuMissNetwork``
        A new, untrained network on the CPU (it is initialised from a CPU
        generator, then moved to the device of ``train_data``).
    depths : sequence of int
        Candidate depths, increasing and distinct.
    weight_sharing : {"independent", "shared", "auto"}
        Weight mode of the chain; ``"auto"`` chains shared networks, then
        fine-tunes an untied copy (see the module docstring).
    mlp_depths : sequence of int
        Head depths: the chain uses the first, the others are fine-tuned from
        the chosen network (see the module docstring).
    train_data, val_data : TrainingData
        The split; without ``val_data`` the training loss decides.
    objective : Objective
    config : TrainingConfig
    seed : int
        Seeds every candidate's initialisation and shuffling.
    verbose : int
        ``>= 1`` shows a progress bar per candidate.
    label : str
        Prefix of the progress bars.
    start_from : NeuMissNetwork or None
        A trained network the first depth is warm-started from (an ensemble
        member starts where the search of member 0 started its chosen depth).
    follow : bool
        Keep every fine-tune, better or not: an ensemble member repeating the
        path of member 0 to its choice (its weight mode and head).

    Returns
    -------
    SearchResult

    Warns
    -----
    DivergenceWarning
        When the kept network's training diverged (its learning rate was
        lowered) or it predicts a constant (:func:`neumiss.training.train`);
        candidates not kept do not warn.
    """

    def fit_one(depth: int, mode: str, mlp_depth: int, start_from, fit_config) -> Candidate:
        start = time.perf_counter()
        generator = torch.Generator().manual_seed(seed)
        network = build_network(depth, mode, mlp_depth)
        network.reset_parameters(generator)
        if start_from is not None:
            network.warm_start_from(start_from, keep_mlp=start_from.block.depth == depth)
        network = network.to(train_data.x.device)
        result = train(
            network, train_data, val_data, objective.loss, fit_config, generator,
            score_fn=objective.score, verbose=verbose, description=f"{label}(depth={depth})",
            warn=False,
        )
        return Candidate(depth, mode, mlp_depth, network, result, time.perf_counter() - start)

    chain_weights = "shared" if weight_sharing == "auto" else weight_sharing
    best, best_losses, depth_results = None, None, {}
    predecessor, start, worse = None, start_from, 0
    for depth in depths:
        fitted = fit_one(depth, chain_weights, mlp_depths[0], start, config)
        depth_results[depth] = fitted.summary()
        # The one-standard-error rule on the validation rows (without them, the
        # training loss decides).
        losses = None if val_data is None else row_losses(fitted.network, val_data,
                                                          objective.loss)
        replaces = best is None or (
            fitted.val_loss < best.val_loss if val_data is None
            else clearly_better(losses, best_losses, val_data.weight)
        )
        if replaces:
            best, best_losses, predecessor, worse = fitted, losses, start, 0
        else:
            worse += 1
            if worse == DEPTH_PATIENCE:
                break  # deeper candidates would start from depths that overfit
        start = fitted.network
    # A fine-tune's gains come in small steps, so every improvement counts.
    fine_tune_config = dataclasses.replace(config, tol=0.0)

    def fine_tune(mode: str, mlp_depth: int) -> dict[str, float]:
        """Train a copy of ``best`` with ``mode`` and ``mlp_depth``, keep it if it is better,
        and return its summary."""
        nonlocal best
        tuned = fit_one(best.depth, mode, mlp_depth, best.network, fine_tune_config)
        if follow or tuned.val_loss < best.val_loss:
            best = tuned
        return tuned.summary()

    untied_summary = None
    if weight_sharing == "auto" and worth_untying(best.depth, train_data.x.shape[1],
                                                  len(train_data)):
        untied_summary = fine_tune("independent", best.mlp_depth)
    heads = {mlp_depth: fine_tune(best.weight_sharing, mlp_depth) for mlp_depth in mlp_depths[1:]}
    if best.result.warning is not None:  # the kept network diverged, or is a constant
        warnings.warn(best.result.warning, DivergenceWarning, stacklevel=2)
    return SearchResult(best, depth_results, untied_summary, heads, predecessor)
