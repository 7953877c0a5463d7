"""The depth search's entry point, :func:`search_depths`: the order in which a
:class:`~neumiss.network._search.DepthSearch` decides the heads' terms, trains the
depths, and offers the chain from the identity, the untied copy, the other heads and the
Chebyshev start (the rules: :mod:`neumiss.network._search`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..checks import warn_user
from ._block import NeuMissNetwork
from ._callbacks import Callback
from ._choice import (
    SearchResult,
    identity_depth,
    try_chebyshev,
    try_identity_chain,
    worth_untying,
)
from ._data import TrainingData
from ._divergence import DivergenceWarning
from ._losses import Objective
from ._search import DepthSearch
from ._start import data_ramps, observed_moments
from ._training import TrainingConfig


def search_depths(
    build_network: Callable[[int, str, int, bool, int], NeuMissNetwork],
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
    n_members: int = 1,
    combine: str = "mean",
    data_start: bool = True,
    mask_skip: bool | str = False,
    screen_depths: bool = False,
    spline: bool | str = False,
    callbacks: Sequence[Callback] = (),
) -> SearchResult:
    """Train ``depths`` in increasing order and return the best network.

    Parameters
    ----------
    build_network : callable
        ``(depth, weight_sharing, mlp_depth, mask_skip, n_ramps) -> NeuMissNetwork``:
        a new, untrained network on the CPU (it is initialised from a CPU
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
    n_members : int
        Members of every candidate, trained together (:class:`StackedNetwork`), each on
        every training row, unless ``train_data.member_weight`` says which rows each
        member trains on (out-of-fold validation: ``val_data.held_out_by``).
    combine : str
        How the members' outputs combine (:data:`~neumiss.network.COMBINE`).
    data_start : bool
        Start the first depth's blocks from the moments of the training rows
        (:func:`~neumiss.network.start_from_moments`) instead of near the identity.
    mask_skip : bool or "auto"
        Whether the heads have the mask's own linear term; ``"auto"`` decides by
        :meth:`DepthSearch.mask_term_helps` (False without validation rows or
        ``data_start``, where there is nothing to decide on).
    spline : bool or "auto"
        Whether the heads have the spline term on quantile ramps of the training rows
        (:func:`~neumiss.network._start.data_ramps`; never for a table without ramps);
        ``"auto"`` decides by :meth:`DepthSearch.spline_term_helps` after the mask's term and
        the screen, at the deepest depth to train (False without validation rows or
        ``data_start``).
    screen_depths : bool
        Train a depth beyond the first only when its data start validates clearly better
        than the first's (:meth:`DepthSearch.screen`; needs validation rows and
        ``data_start``); the depths kept are screened again with the spline term when it
        is added.
    callbacks : sequence of Callback
        Called on every training of the search (:func:`~neumiss.network.train`).

    Returns
    -------
    SearchResult

    Warns
    -----
    DivergenceWarning
        When the kept network's training diverged (its learning rate was
        lowered) or it predicts a constant (:func:`~neumiss.network.train`);
        candidates not kept do not warn.
    """
    moments = observed_moments(train_data, seed) if data_start else None
    ramps = None if spline is False else data_ramps(train_data, seed)
    search = DepthSearch(build_network, train_data, val_data, objective, seed, verbose, label,
                         n_members, combine, moments, mask_skip, ramps, callbacks)
    chain_weights = "shared" if weight_sharing == "auto" else weight_sharing
    depths, starts = search.decide(depths, chain_weights, mask_skip, spline, screen_depths)
    choice, depth_results = search.chain(depths, chain_weights, mlp_depths[0], config)
    best, identity = choice.best, None
    depth = identity_depth(best, depth_results)
    # out of fold, no block earns a chain from the identity nor an untied copy
    if not search.out_of_fold and try_identity_chain(depth, search.mask_skip, val_data, moments):
        best, identity = search.identity_chain(best, depth, chain_weights, min(mlp_depths),
                                               config)
    # A fine-tune's gains come in small steps, so every improvement counts.
    fine_tune_config = dataclasses.replace(config, tol=0.0)
    untied = None
    if not search.out_of_fold and weight_sharing == "auto" and worth_untying(
            best.depth, train_data.x.shape[1], len(train_data)):
        best, untied = search.fine_tune(best, "independent", best.mlp_depth, fine_tune_config)
    heads = {}
    for mlp_depth in mlp_depths[1:]:
        if mlp_depth == 0 and best.mlp_depth > 0 and best.network.mlp_is_zero():
            best, heads[mlp_depth] = search.as_linear_head(best)
        elif mlp_depth == 0 and best.depth == 0 and val_data is not None:
            best, heads[mlp_depth] = search.fitted_linear_head(best)
        else:
            best, heads[mlp_depth] = search.fine_tune(best, best.weight_sharing, mlp_depth,
                                                      fine_tune_config)
    chebyshev = None
    if weight_sharing == "auto" and try_chebyshev(depth_results, train_data, val_data, moments):
        best, chebyshev = search.chebyshev(best, max(depth_results))
    if best.result.warning is not None:  # the kept network diverged, or is a constant
        warn_user(best.result.warning, DivergenceWarning)
    return SearchResult(best, depth_results, untied, heads, search.mask_skip, chebyshev, starts,
                        search.spline, identity, search.start_C)
