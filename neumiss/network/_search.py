"""The depth and weight-mode search of the NeuMiss estimators.

Candidate depths are trained in increasing order on the same split. Each new
depth's block starts from the training rows' moments (:mod:`~neumiss.network._start`)
and its head from the previous depth's (an MLP head restarts its MLP part:
:meth:`neumiss.network.NeuMissNetwork.warm_start_from`). With ``screen_depths`` (the
estimators' ``depth="auto"``), the depths are first compared untrained, by the
validation loss of their data start (:meth:`DepthSearch.screen`: linear heads fitted on
the block started from the moments), and a depth beyond the first is trained only
when its start is clearly better than the first's (:func:`clearly_better`): a block
whose Neumann approximation of the conditional expectation predicts no better than mean
imputation rarely becomes the better network by training (real tables: 40% less fit
time than training every depth, the same scores). A deeper depth
replaces the best one only when it is clearly better on the validation rows
(:func:`clearly_better`, the one-standard-error rule); the search stops when
:data:`DEPTH_PATIENCE` depths in a row have not replaced it (one noisy training
does not end it). With ``weight_sharing="auto"`` the chain uses
one shared Neumann matrix, then an independent ("untied") copy is fine-tuned
at the chosen depth and kept if it lowers the validation loss. With several
head depths (``mlp_depth="auto"``), the chain uses the first (an MLP head
beside a linear skip), then each other head is fine-tuned from the chosen
network and kept if it lowers the validation loss, except that an MLP head training
kept at its start (its MLP's last layer still zero: the network computes a linear
head's function) becomes the linear head as it is, untrained: the fine-tune would start
from a function training did not improve on; and that at depth 0 (the order-0
imputation, untrained) the linear heads are fitted on the block's output directly, untrained
(:meth:`DepthSearch.fitted_linear_head`: real tables, the same run: better scores, mean
rank 3.69 -> 3.44), then blended with the MLP heads in the proportion that validates
best (real tables, both halves of the development suite: the mean rank among the anchors
2.17 -> 2.11, where the linear heads were kept unless the MLP heads were clearly better).
A linear head starts from
the skip (the function less the MLP's part), an MLP head from a linear one as
the same function (the skip receives the linear head, the MLP's last layer
starts at zero). Last, ``weight_sharing="auto"`` offers an untrained candidate where the
covariance is well estimated (:func:`try_chebyshev`): linear heads on a block with one
matrix per iteration at the chain's deepest depth, started at Richardson steps at the
Chebyshev nodes of the covariance's spectrum (:func:`~neumiss.network.set_chebyshev_weights`).
Where the missingness tells the target (:func:`try_identity_chain`), the paper's chain
from the identity start is trained too (:meth:`DepthSearch.identity_chain`). Both are
kept if they lower the validation loss.

With ``mask_skip="auto"``, the heads see the mask itself (a linear term of it beside
the block's output) when the linear start at depth 0 is clearly better on the
validation rows with that term than without (:meth:`DepthSearch.mask_term_helps`, the
one-standard-error rule): informative missingness (self-masking, missing-not-at-random
tables) is then used, and a mask that says nothing of the target adds no parameters.
With ``spline="auto"``, the heads get the spline term (piecewise-linear ramps of the
block's output on quantile bins, :mod:`~neumiss.network._spline`), the mask's term and the
depths to train decided: always when depth 0 alone is to be trained (but for a multiclass
loss), else when it makes the linear start at the deepest of those depths clearly better
in the same way (:meth:`DepthSearch.spline_term_helps`): an additive spline of each
feature, fitted in closed form, for targets that bend with a feature, and numeric
embeddings for an MLP head.

A candidate started from the data whose training stays far behind the lowest validation
loss the search has seen (:func:`~neumiss.network._stopping.abandon_level`) is abandoned
after :data:`~neumiss.network._stopping.ABANDON_EPOCHS` epochs: that far behind it does not
catch up (d = 200, n = 1e5: a depth-16 block 56% worse after one epoch, and in eight).

Every candidate is an ensemble of ``n_members`` networks trained together as one
:class:`~neumiss.network.StackedNetwork` (one block; member ``k``'s head initialised
from seed ``seed + k``, trained on every training row, or out of fold on all but its
fold), so the search decides on the ensemble's validation losses and trains all members
for little more than one. The members differ by their heads' initialization, not by
resamples of the rows: a bootstrap resample leaves a member about 63% of the distinct
rows, and bagged members did worse than members on every row on each of the real
suite's tables validated on held-out rows (results/realdata/README.md, "Every member on
every row"), as Lakshminarayanan et al. (2017) found for deep ensembles.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ._analytic import computes_iterates
from ._block import NeuMissBlock, NeuMissNetwork
from ._callbacks import Callback, describe_training
from ._choice import (
    ROUNDING,
    Candidate,
    DepthChoice,
    clearly_better,
    clearly_lower,
    trains_block,
)
from ._data import (
    TrainingData,
    row_losses,
    stacked_shortcuts,
    validation_loss,
)
from ._losses import Objective
from ._stacked import StackedNetwork
from ._start import (
    HeldOutPenalties,
    linear_fit_rows,
    moment_scale,
    start_from_moments,
    start_linear_parts,
)
from ._training import HISTORY, MIN_AUTO_BATCH_SIZE, TrainingConfig, TrainingResult, train

#: Depths tried by ``depth="auto"``: the order-0 imputation feeding the head, then a deep block
#: started from the data's moments (:mod:`~neumiss.network._start`), the Neumann
#: approximation of the conditional expectation before any training: the depths between
#: need no training on the way (results/README.md, "Depth search").
AUTO_DEPTHS = (0, 16)

#: Head depths tried by ``mlp_depth="auto"``: the chain's two-layer MLP head (real
#: data), then the paper's linear head (linear targets at large n; results/README.md).
AUTO_MLP_DEPTHS = (2, 0)

#: The weights of the MLP heads in their blend with the linear heads fitted at depth 0
#: (:meth:`DepthSearch.fitted_linear_head`; 0: the linear heads alone), in steps of 0.05.
BLEND_WEIGHTS = tuple(i / 20 for i in range(21))

#: Optimizer steps per epoch of the chain from the identity start (the first engine's
#: batches of n / 64 rows; probit self-masking d = 20, n = 1e4: test R² 0.804, 0.777 on n / 8).
IDENTITY_STEPS_PER_EPOCH = 64


class DepthSearch:
    """Trains the candidates of one search on one split (parameters as
    :func:`search_depths`): each from the same seeds, on the device of ``train_data``."""

    def __init__(
        self,
        build_network: Callable[[int, str, int, bool, int], NeuMissNetwork],
        train_data: TrainingData,
        val_data: TrainingData | None,
        objective: Objective,
        seed: int,
        verbose: int = 0,
        label: str = "NeuMiss",
        n_members: int = 1,
        combine: str = "mean",
        moments: tuple[np.ndarray, np.ndarray] | None = None,
        mask_skip: bool | str = False,
        ramps: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        self.build_network = build_network
        self.callbacks = callbacks
        # "auto" builds networks without the mask's term until mask_term_helps decides
        self.mask_skip = mask_skip not in ("auto", False)
        # the spline term's knots (quantile_ramps), its networks with the term or not
        self.ramps = ramps
        self.spline = False
        self.n_members = n_members
        self.combine = combine
        self.moments = moments
        self.train_data = train_data
        self.val_data = val_data
        self.shortcuts = stacked_shortcuts(train_data, val_data)  # for StackedNetwork
        # out of fold, the one block the members share trains only where its parameters
        # are few for the rows (trains_block); no untied copy nor identity chain then
        self.out_of_fold = val_data is not None and val_data.held_out_by is not None
        self.objective = objective
        self.seed = seed
        self.verbose = verbose
        self.label = label
        # (depth, weight mode, mask_skip, spline) -> the linear parts of the moments' start
        self._linear_starts: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        # (mask_skip, spline) -> the last linear parts fitted with those terms
        self._last_fits: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        # (depth, weight mode) and the output of the last block started, on the linear
        # fit's rows: the spline's decision fits the screen's start again, with the ramps
        self._started_output: tuple[tuple, torch.Tensor] | None = None
        # the logistic start's penalty per (mask_skip, spline), chosen out of fold
        self._penalties = HeldOutPenalties()
        # (depth, weight mode, mask_skip, spline) -> the start's per-row validation losses
        # and whether the moments started its block (start_losses)
        self._start_losses: dict[tuple, tuple[torch.Tensor, bool]] = {}
        # the lowest validation loss of a network the search may return: a screened start
        # (its depth's chain candidate keeps it if training does not beat it), a candidate
        self.best_loss = math.inf

    @functools.cached_property
    def spectrum(self) -> np.ndarray:
        """The eigenvalues of :attr:`moments`' covariance, ascending: computed once for
        every start (d = 1,000: five decompositions of the same matrix before)."""
        return np.linalg.eigvalsh(self.moments[1])

    def members(self, depth: int, weight_sharing: str, mlp_depth: int,
                start_from: StackedNetwork | None, refit_linear: bool = False,
                from_data: bool = True) -> StackedNetwork:
        """New members (member ``k`` initialised from seed ``seed + k``), each warm-started
        from member ``k`` of ``start_from`` if given (an MLP head keeps its hidden layers
        only from a network of the same depth), stacked on the device of the rows. A new
        depth's block starts from :attr:`moments` when given and ``from_data``
        (:meth:`start`; else near the identity); with
        ``refit_linear``, the heads' linear parts of members warm-started at the same depth
        are fitted on the block they keep (:meth:`fit_linear_parts`)."""
        starts = [None] * self.n_members if start_from is None else start_from.networks()
        networks = []
        n_ramps = len(self.ramps[0]) if self.spline else 0
        for k, start in enumerate(starts):
            network = self.build_network(depth, weight_sharing, mlp_depth, self.mask_skip,
                                         n_ramps)
            network.reset_parameters(torch.Generator().manual_seed(self.seed + k))
            if n_ramps:
                network.encoding.set_ramps(*self.ramps)
            if start is not None:
                network.warm_start_from(start, keep_mlp=start.block.depth == depth)
            networks.append(network)
        new_depth = start_from is None or start_from.depth != depth
        from_moments = self.moments is not None and from_data
        if from_moments and new_depth:
            stacked = self.start(networks)
        else:
            if refit_linear:
                self.fit_linear_parts(networks)
            stacked = StackedNetwork(networks, self.combine, *self.shortcuts).to(
                self.train_data.device)
        stacked.block.requires_grad_(trains_block(self.val_data, stacked.block,
                                                  len(self.train_data), from_moments))
        return stacked

    def start(self, networks: list[NeuMissNetwork]) -> StackedNetwork:
        """``networks`` stacked, their block started from :attr:`moments` as
        :func:`moment_scale` says for the training rows and the block's weight mode, and
        each head's linear part fitted on its output (:func:`start_linear_parts`)."""
        # The stacked network keeps the first member's block: only it needs the start.
        block = networks[0].block
        scale = moment_scale(*self.train_data.x.shape, block.weight_sharing)
        start_from_moments(networks[0], *self.moments, scale=scale,
                           eigenvalues=self.spectrum)
        # The same start with another head depth (the screen's linear heads, then the
        # chain's MLP heads) has the same linear parts: solved once.
        key = (block.depth, block.weight_sharing, self.mask_skip, self.spline)
        solution = self._linear_starts.get(key)
        self._linear_starts[key] = self.fit_linear_parts(
            networks, solution, None if solution is not None else self.started_output(block))
        return StackedNetwork(networks, self.combine, *self.shortcuts).to(self.train_data.device)

    def started_output(self, block: NeuMissBlock) -> torch.Tensor:
        """The output of ``block``, just started from :attr:`moments`, on the rows of the
        linear fit (:func:`~neumiss.network._start.linear_fit_rows`): computed once for the
        last depth and weight mode started, whose blocks start alike (gapminder_lifeexp's
        depth-16 block on 7,600 rows of 217 columns: 0.15 s)."""
        key = (block.depth, block.weight_sharing)
        if self._started_output is None or self._started_output[0] != key:
            rows = linear_fit_rows(self.train_data, seed=self.seed)
            self._started_output = (key, block.to(rows.device).table_output(rows.x, rows.mask))
        return self._started_output[1]

    def fit_linear_parts(self, networks: list[NeuMissNetwork],
                         solution: tuple[torch.Tensor, torch.Tensor] | None = None,
                         block_output: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """Fit each head's linear part on the output of ``networks[0]``'s block (the block
        the stacked network keeps), each member on its own rows, in place, or set it to a
        ``solution`` of the same problem (:func:`start_linear_parts`); returns it. An
        iterative fit starts from the last one with the same terms (another depth's
        block, or the block before training: close to the answer; credit_default with
        the ramps: 164 L-BFGS evaluations instead of 214 from zero)."""
        terms = (self.mask_skip, self.spline)
        fitted = start_linear_parts(networks, self.train_data, self.objective.loss, self.seed,
                                    squared=self.objective.loss.squared, solution=solution,
                                    logistic=self.objective.loss.logistic,
                                    initial=self._last_fits.get(terms),
                                    held_out_penalty=self._penalties.for_terms(terms)
                                    if self.out_of_fold else None, block_output=block_output)
        self._last_fits[terms] = fitted
        return fitted

    def mask_term_helps(self) -> bool:
        """Whether the mask's own linear term (``mask_skip``) clearly lowers the validation
        losses of the linear start at depth 0 (order-0 imputation; :meth:`term_helps`); sets
        :attr:`mask_skip` to the answer."""
        return self.term_helps("mask_skip", 0, "shared")

    def spline_term_helps(self, depth: int, weight_sharing: str) -> bool:
        """Whether the spline term (on the ramps :attr:`ramps`) clearly lowers the
        validation losses of the linear start at ``depth`` (:meth:`term_helps`, with the
        mask's term as already decided); sets :attr:`spline` to the answer. Asked at the
        deepest depth the chain will train: a target linear in the conditional expectation
        of the missing values bends with mean-imputed features (self-masking above all), so
        that at depth 0 the ramps would fit what the block computes at depth 16 (simulated
        grid: Gaussian self-masking d = 20, n = 2e4, R² - Bayes -0.018 -> -0.055), and
        only when it lowers the validation loss by the loss object's ``spline_min_gain``
        at least (:data:`~neumiss.network._losses.SPLINE_MIN_GAIN` for a response)."""
        return self.term_helps("spline", depth, weight_sharing,
                               self.objective.loss.spline_min_gain)

    def term_helps(self, term: str, depth: int, weight_sharing: str,
                   min_gain: float = 0.0) -> bool:
        """Whether the heads' ``term`` (``"mask_skip"`` or ``"spline"``) clearly lowers the
        validation losses (:func:`clearly_better`) of the linear start at ``depth``, and
        their mean by the fraction ``min_gain`` at least: the members' linear heads fitted
        by :func:`start_linear_parts` on the output of a block of ``depth`` and
        ``weight_sharing`` started from the data, with and without it. Needs validation
        rows and :attr:`moments`; sets the attribute ``term`` to the answer."""
        losses = []
        for present in (False, True):
            setattr(self, term, present)
            losses.append(self.start_losses(depth, weight_sharing)[0])
        setattr(self, term, clearly_lower(losses[1], losses[0], self.val_data.weight, min_gain))
        return getattr(self, term)

    def decide(self, depths: Sequence[int], weight_sharing: str, mask_skip: bool | str,
               spline: bool | str, screen: bool) -> tuple[list[int], dict | None]:
        """The heads' terms and the depths to train, in this order: the mask's term
        (``mask_skip="auto"``: :meth:`mask_term_helps`), the depths (with ``screen``:
        :meth:`screen`), the spline term (True: always, for a table with :attr:`ramps`;
        ``"auto"``: always when the depths are depth 0 alone and the loss object's
        ``spline_at_depth_0`` says so, else :meth:`spline_term_helps` at the deepest of
        them), then, with the ramps, the depths again (they may fit at depth 0 what made
        a deeper start clearly better). Deciding needs validation rows and
        :attr:`moments`. Returns the depths and, per depth screened, its start's summary
        (None when not screened).

        Why depth 0 alone takes the term unasked: the linear start's gain is asked at the
        deepest depth so that the ramps do not fit at depth 0 what a deeper block computes
        (self-masking); with no deeper block to train that cannot happen, and there the
        start's gain understates what the trained heads make of the ramps (the real
        suite, both halves, results/realdata/README.md, "The spline term at depth 0
        alone": tbc_hgt R² +0.017, msq_neuroticism +0.007, credit_default log loss
        -0.004, where the start's gain stayed under the bar or the standard error)."""
        decidable = self.val_data is not None and self.moments is not None
        if mask_skip == "auto" and decidable:
            self.mask_term_helps()
        starts = None
        if screen and len(depths) > 1 and decidable:
            depths, starts = self.screen(depths, weight_sharing)
        if self.ramps is not None and (spline is True or (spline == "auto" and decidable)):
            alone = list(depths) == [0] and self.objective.loss.spline_at_depth_0
            self.spline = (spline is True or alone
                           or self.spline_term_helps(depths[-1], weight_sharing))
            if self.spline and starts is not None and len(depths) > 1:
                depths, starts = self.screen(depths, weight_sharing)
        return list(depths), starts

    def start_losses(self, depth: int, weight_sharing: str) -> tuple[torch.Tensor, bool]:
        """The per-row validation losses (n_val,) of the start at ``depth`` (linear heads on
        its block started from :attr:`moments`, untrained: :meth:`members`) with the heads'
        terms as they stand, and whether the moments could start that block
        (:func:`~neumiss.network._analytic.computes_iterates`); computed once per depth,
        weight mode and terms (the mask's decision, the screen and the spline's decision
        ask for the same starts)."""
        key = (depth, weight_sharing, self.mask_skip, self.spline)
        if key not in self._start_losses:
            network = self.members(depth, weight_sharing, 0, None)
            self._start_losses[key] = (row_losses(network, self.val_data, self.objective.loss),
                                       computes_iterates(network.block))
        return self._start_losses[key]

    def screen(self, depths: Sequence[int], weight_sharing: str
               ) -> tuple[list[int], dict[int, dict[str, float]]]:
        """The ``depths`` worth training: the first, and each deeper one whose data start
        (the linear heads on its block started from :attr:`moments`, untrained:
        :meth:`members`) is clearly better on the validation rows than the first's
        (:func:`clearly_better`, the one-standard-error rule on the per-row losses), or
        whose block the moments cannot start
        (:func:`~neumiss.network._analytic.computes_iterates`). Returns them and, per depth
        compared, its start's ``val_loss`` and ``val_score``. Needs validation rows and the
        moments."""
        weight = self.val_data.weight
        starts, losses = {}, {}
        for depth in depths:
            depth_losses, started = self.start_losses(depth, weight_sharing)
            if started:
                losses[depth] = depth_losses
                loss = self._seen(validation_loss(depth_losses, weight))
                starts[depth] = {"val_loss": loss, "val_score": self.objective.score(loss)}
        first = losses.get(depths[0])
        kept = [depths[0], *(d for d in depths[1:] if d not in losses or first is None
                             or clearly_better(losses[d], first, weight))]
        return kept, starts

    def fit(self, depth: int, weight_sharing: str, mlp_depth: int,
            start_from: StackedNetwork | None, config: TrainingConfig,
            from_data: bool = True, stage: str | None = None) -> Candidate:
        """Train new members, warm-started from ``start_from`` if given (:meth:`members`;
        ``from_data`` False: a new block near the identity, and never abandoned for the
        losses the data-started candidates reached), the training described by ``stage``
        (None: ``"depth search"``, or ``"identity chain"`` when not ``from_data``) and the
        candidate (:func:`~neumiss.network.describe_training`)."""
        if stage is None:
            stage = "depth search" if from_data else "identity chain"
        start = time.perf_counter()
        network = self.members(depth, weight_sharing, mlp_depth, start_from,
                               from_data=from_data)
        generator = torch.Generator().manual_seed(self.seed)
        with network.on_block_outputs(self.train_data, self.val_data) as (train_data, val_data):
            result = train(
                network, train_data, val_data, self.objective.loss, config, generator,
                score_fn=self.objective.score, verbose=self.verbose,
                description=describe_training(self.label, stage, depth, weight_sharing,
                                              mlp_depth),
                warn=False, best_seen=self.best_loss if from_data else math.inf,
                callbacks=self.callbacks,
            )
        self._seen(result.best_val_loss)
        return Candidate(depth, weight_sharing, mlp_depth, network, result,
                         time.perf_counter() - start)

    def chain(self, depths: Sequence[int], weight_sharing: str, mlp_depth: int,
              config: TrainingConfig, from_data: bool = True
              ) -> tuple[DepthChoice, dict[int, dict]]:
        """Train ``depths`` in order, each warm-started from the previous one, until
        :class:`DepthChoice` stops; returns the choice and the summary of each depth."""
        weight = None if self.val_data is None else self.val_data.weight
        choice, summaries, start = DepthChoice(weight), {}, None
        for depth in depths:
            fitted = self.fit(depth, weight_sharing, mlp_depth, start, config, from_data)
            summaries[depth] = fitted.summary()
            losses = (None if self.val_data is None
                      else row_losses(fitted.network, self.val_data, self.objective.loss))
            if not choice.offer(fitted, losses):
                break
            start = fitted.network
        return choice, summaries

    def identity_chain(self, best: Candidate, depth: int, weight_sharing: str, mlp_depth: int,
                       config: TrainingConfig) -> tuple[Candidate, dict[int, dict]]:
        """The paper's chain: depths 0, 2, 4, ... and ``depth`` (the deepest block the search
        trained, whichever it chose: a deep block started from biased moments may validate
        below depth 0 where the chain from the identity does not), each block warm-started
        from the previous one's, the first near the identity, :data:`IDENTITY_STEPS_PER_EPOCH`
        batches per epoch (unless ``config`` sets them), of the paper's network: no mask
        term. Returns the chain's candidate if it is clearly better than ``best`` on the
        validation rows (:func:`clearly_better`, the one-standard-error rule: a few hundred
        rows often prefer another network by chance), the search's networks then without
        mask term, else ``best``; and the summaries."""
        powers = (2**k for k in range(1, depth.bit_length()) if 2**k < depth)
        if config.batch_size is None:
            batch = max(MIN_AUTO_BATCH_SIZE, len(self.train_data) // IDENTITY_STEPS_PER_EPOCH)
            config = dataclasses.replace(config, batch_size=batch)
        terms, self.mask_skip = self.mask_skip, False
        choice, summaries = self.chain([0, *powers, depth], weight_sharing, mlp_depth,
                                       config, from_data=False)
        kept = choice.best.val_loss < best.val_loss and clearly_better(  # chain's losses kept
            choice.losses, row_losses(best.network, self.val_data, self.objective.loss),
            self.val_data.weight)
        self.mask_skip = False if kept else terms
        return (choice.best if kept else best), summaries

    def as_linear_head(self, best: Candidate) -> tuple[Candidate, dict[str, float]]:
        """``best``, an MLP-head candidate whose MLP adds nothing
        (:meth:`~neumiss.network.StackedNetwork.mlp_is_zero`), as
        the linear head computing the same function (the skip and the last bias), untrained:
        a fine-tune would start from that function, which training did not improve on.
        Returns it and its summary (``epochs`` and ``seconds`` 0)."""
        network = self.members(best.depth, best.weight_sharing, 0, best.network)
        linear = Candidate(best.depth, best.weight_sharing, 0, network, best.result, 0.0)
        return linear, {**best.summary(), "epochs": 0, "seconds": 0.0}

    def chebyshev(self, best: Candidate, depth: int) -> tuple[Candidate, dict[str, float]]:
        """The linear heads on a block of ``depth`` with one matrix per iteration, started
        at Chebyshev steps (:meth:`members`; the moments needed), untrained; returns the
        candidate kept (it, if it lowers the validation loss, else ``best``) and its
        summary (``epochs`` 0)."""
        started = time.perf_counter()
        candidate = self.untrained(self.members(depth, "independent", 0, None), started)
        return (candidate if candidate.val_loss < best.val_loss else best), candidate.summary()

    def fitted_linear_head(self, best: Candidate) -> tuple[Candidate, dict[str, float]]:
        """Linear heads on ``best``'s block, fitted on its output (:meth:`members` with
        ``refit_linear``), untrained, blended with ``best``: each member outputs ``w``
        times its head in ``best`` plus ``1 - w`` times its linear head
        (:meth:`~neumiss.network.StackedNetwork.blended_with`), for the weight ``w`` of
        :data:`BLEND_WEIGHTS` whose blend has the lowest validation loss
        (:meth:`blend_weight`). Returns the candidate kept (the linear heads for ``w`` 0,
        ``best`` for 1, else the blend, with ``best``'s training history) and the linear
        heads' summary (``epochs`` 0) with ``mlp_weight``, ``w``. On a block of depth 0
        (mean imputation, whose only parameters are the means) a linear head is a
        generalized linear model of the imputed features (and the mask): its best fit to
        the training rows is solved directly, which a fine-tune by Adam only approaches
        in tens of epochs; the blend keeps what an MLP head adds to it where the
        validation rows say it adds something, in the measure they say."""
        started = time.perf_counter()
        linear = self.untrained(self.members(best.depth, best.weight_sharing, 0, best.network,
                                             refit_linear=True), started)
        weight = self.blend_weight(best.network, linear.network)
        summary = {**linear.summary(), "mlp_weight": weight}
        if weight == 0.0 or weight == 1.0:
            return (linear if weight == 0.0 else best), summary
        blend = best.network.blended_with(linear.network, weight)
        loss = self._validation_loss(blend)
        result = dataclasses.replace(best.result, best_val_loss=loss,
                                     best_val_score=self.objective.score(loss))
        return best._replace(network=blend, result=result, mlp_weight=weight), summary

    @torch.no_grad()
    def blend_weight(self, network: StackedNetwork, linear: StackedNetwork,
                     chunk: int = 65536) -> float:
        """The weight ``w`` of :data:`BLEND_WEIGHTS` for which the members' outputs ``w``
        times ``network``'s plus ``1 - w`` times ``linear``'s have the lowest validation
        loss, each row scored as :func:`~neumiss.network._data.evaluate_loss` scores a
        network's: the first (the most linear) within :data:`ROUNDING` of the lowest, since
        blends of networks computing the same function differ by float32 rounding only.
        Computed in chunks of ``chunk`` rows, so that memory holds a chunk's outputs only."""
        data, totals = self.val_data, torch.zeros(len(BLEND_WEIGHTS), dtype=torch.float64)
        network.eval()
        linear.eval()
        for start in range(0, len(data), chunk):
            rows = slice(start, start + chunk)
            x, mask = data.x[rows], data.mask[rows]
            if data.held_out_by is None:  # (K, rows, out): combined once blended
                mlp, lin = network.member_outputs(x, mask), linear.member_outputs(x, mask)
            else:  # (rows, out): each row's held-out member's
                mlp, lin = (net.held_out_outputs(x, mask, data.held_out_by[rows])
                            for net in (network, linear))
            for i, weight in enumerate(BLEND_WEIGHTS):
                outputs = weight * mlp + (1.0 - weight) * lin
                output = network.combined(outputs) if data.held_out_by is None else outputs
                losses = self.objective.loss(output, data.target[rows]).double()
                if data.weight is not None:
                    losses = losses * data.weight[rows]
                totals[i] += losses.sum().cpu()
        lowest = float(totals.min())
        return next(weight for weight, total in zip(BLEND_WEIGHTS, totals.tolist())
                    if total <= lowest + ROUNDING * abs(lowest))

    def untrained(self, network: StackedNetwork, started: float) -> Candidate:
        """``network`` (linear heads, untrained since ``started``, a ``perf_counter``
        time) as a candidate, scored on the validation rows."""
        loss = self._validation_loss(network)
        result = TrainingResult(history={key: [] for key in HISTORY}, best_val_loss=loss,
                                best_val_score=self.objective.score(loss))
        return Candidate(network.depth, network.block.weight_sharing, 0, network, result,
                         time.perf_counter() - started)

    def _validation_loss(self, network: StackedNetwork) -> float:
        """``network``'s validation loss (:func:`row_losses`), recorded as seen."""
        return self._seen(validation_loss(row_losses(network, self.val_data,
                                                     self.objective.loss),
                                          self.val_data.weight))

    @property
    def start_C(self) -> float:
        """The inverse penalty (scikit-learn's ``C``) of the logistic start of the heads'
        terms as they stand (:meth:`~neumiss.network._start.HeldOutPenalties.C`)."""
        return self._penalties.C((self.mask_skip, self.spline))

    def _seen(self, loss: float) -> float:
        """Record a validation loss the search has seen (:attr:`best_loss`); returns it."""
        self.best_loss = min(self.best_loss, loss)
        return loss

    def fine_tune(self, best: Candidate, weight_sharing: str, mlp_depth: int,
                  config: TrainingConfig) -> tuple[Candidate, dict[str, float]]:
        """Train a copy of ``best`` with ``weight_sharing`` and ``mlp_depth``; returns the
        candidate kept (the copy if it lowers the validation loss, else ``best``) and the
        copy's summary."""
        stage = "untied fine-tune" if weight_sharing != best.weight_sharing else "head fine-tune"
        tuned = self.fit(best.depth, weight_sharing, mlp_depth, best.network, config,
                         stage=stage)
        kept = tuned if tuned.val_loss < best.val_loss else best
        return kept, tuned.summary()
