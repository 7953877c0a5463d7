"""The NeuMiss block: unrolled Neumann iterations with the mask as nonlinearity.

Paper: Le Morvan, Josse, Moreau, Scornet, Varoquaux, "NeuMiss networks:
differentiable programming for supervised learning with missing values",
NeurIPS 2020, Section 3 and Figure 1.

For a sample with missingness pattern ``m`` (1 = missing) the Bayes predictor
of a linear model under M(C)AR Gaussian data needs

    E[X_mis | X_obs] = mu_mis + Sigma_mis,obs (Sigma_obs)^-1 (X_obs - mu_obs).

The block approximates ``(Sigma_obs)^-1 (X_obs - mu_obs)`` for every pattern at
once by the Neumann recursion ``S_l = (Id - Sigma_obs) S_{l-1} + Id`` (paper
eq. 6), where restricting a matrix to the observed rows and columns is done by
multiplying its input and output by ``1 - m`` (paper Section 3.3:
``(W * mbar mbar^T) v = (W (v * mbar)) * mbar``). The only nonlinearities of the
network are therefore elementwise products by the mask or its complement.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..checks import AnyOf, Boolean, Integer, NoneValue, Options, check_params
from ._spline import PiecewiseLinearEncoding

WEIGHT_MODES = ("independent", "shared")

#: How many float32 numbers of hidden state (rows x d) a chunk of a table's rows holds on
#: its way through a network without gradients on the CPU (:func:`row_chunks`): 1 MiB,
#: which a core's cache keeps through the block's iterations instead of reading it from
#: memory at each (7,592 rows x 217, depth 16: 377 -> 150 ms; 4,800 x 567: 856 -> 603 ms).
CACHED_FLOATS = 2**18
#: The CPU's chunks of rows (:func:`row_chunks`) start at multiples of this many rows.
#: A chunk's output equals the whole table's to float32 rounding on any CPU. The float32
#: matrix products (MKL) may sum a row's terms in an order that depends on its place in
#: the blocks of rows they cut: on the AMD EPYC VMs where the suite was timed, chunks
#: aligned so gave each row its whole-table output bit for bit (d = 3 to 567, 333 to
#: 7,592 rows; chunks of 9 rows changed last bits). Other CPUs pick other kernels (a
#: one-row product, say), so that exactness is not part of the contract.
ALIGNED_ROWS = 64
#: Rows per chunk of :func:`row_chunks` on an accelerator (memory, not cache, bounds
#: them there).
DEVICE_CHUNK_ROWS = 65536

#: Arguments of the :class:`NeuMissBlock` and :class:`NeuMissNetwork` constructors.
_CONSTRAINTS = {
    "n_features": Integer(1),
    "depth": Integer(0),
    "weight_sharing": Options(*WEIGHT_MODES),
    "residual": Boolean(),
    "n_outputs": Integer(1),
    "mlp_depth": Integer(0),
    "mlp_width": AnyOf(NoneValue(), Integer(1)),
    "mask_skip": Boolean(),
    "n_ramps": Integer(0),
}


def row_chunks(n_rows: int, n_features: int, device: torch.device) -> list[slice]:
    """Slices cutting ``n_rows`` rows of ``n_features`` columns on ``device`` into chunks
    (one, when they fit): on the CPU of at most :data:`CACHED_FLOATS` numbers, in whole
    multiples of :data:`ALIGNED_ROWS` rows (the last chunk the rest), elsewhere of
    :data:`DEVICE_CHUNK_ROWS` rows."""
    if torch.device(device).type == "cpu":
        most = CACHED_FLOATS // max(n_features, 1) // ALIGNED_ROWS * ALIGNED_ROWS
        size = max(ALIGNED_ROWS, most)
    else:
        size = DEVICE_CHUNK_ROWS
    return [slice(start, start + size) for start in range(0, max(n_rows, 1), size)]


class NeuMissBlock(nn.Module):
    r"""NeuMiss block (paper Figure 1), mapping ``(x, mask)`` to an imputed ``x``.

    Depth convention (the authors' reference code, used for the paper's
    "best depth" figures): ``depth`` is the number of ``d x d`` matrices applied
    before ``W_mix``, that is ``S^(0)`` followed by ``depth - 1`` Neumann
    iterations. ``depth=0`` applies no matrix: ``W_mix`` then sees the centred
    observed values directly (order-0 approximation with ``S^(0) = Id``).

    With ``obs = 1 - mask`` and row vectors (``h @ W``)::

        c   = (x - mu) * obs                      # X_obs - mu_obs, 0 elsewhere
        h   = (c @ S0) * obs                      # if depth >= 1
        h   = (h @ W_k) * obs [+ c if residual]   # k = 1 .. depth-1
        out = (h @ W_mix) * mask + x * obs + mu * mask
        out = min(max(out, lower), upper)             # if the range is set

    With ``S0 = Id``, ``W_k = Id - Sigma``, ``residual=True`` and ``W_mix = Sigma``
    the output on missing entries is exactly the order-``depth - 1`` Neumann
    approximation of ``E[X_mis | X_obs]`` (see :func:`~neumiss.network.analytic_network`).

    Parameters
    ----------
    n_features : int
        Number of features ``d``.
    depth : int, default=3
        Number of matrices before ``W_mix`` (``S^(0)`` plus ``depth - 1`` iterations).
    weight_sharing : {"independent", "shared"}, default="independent"
        ``"independent"``: each Neumann iteration has its own matrix (paper 2020).
        ``"shared"``: every iteration reuses one matrix, as a literal Neumann
        series does (the authors' 2021 follow-up); ``S^(0)`` stays separate.
    residual : bool, default=False
        Add ``c`` after each Neumann iteration (the ``+ Id`` term of eq. 6).

    Notes
    -----
    Shapes: ``x`` (batch, d) float, missing entries set to 0; ``mask`` (batch, d) float,
    1.0 = missing, 0.0 = observed; output (batch, d): ``x`` on observed entries, the
    estimate of ``E[X_mis | X_obs]`` on missing ones.

    The range (:meth:`set_range`; none by default) bounds the estimates. A conditional
    expectation lies within its column's support, so a range around the training values
    leaves a good estimate as it is; it stops an estimate that the unrolled iterations
    make diverge, for a pattern rare or absent in training, from reaching the head (real
    data, 334 training rows: a platelet count of -73,000 imputed where the training
    values ran from 62 to 721, and a probability of 1e-7 predicted for an event that
    happened). The estimators set each column's training range widened by its width on
    each side (``neumiss.estimators._base.ESTIMATE_MARGIN``: under self-masking the
    missing values lie beyond the observed ones).
    """

    def __init__(
        self,
        n_features: int,
        depth: int = 3,
        weight_sharing: str = "independent",
        residual: bool = False,
    ) -> None:
        super().__init__()
        check_params(
            type(self).__name__,
            {"n_features": n_features, "depth": depth, "weight_sharing": weight_sharing,
             "residual": residual},
            _CONSTRAINTS,
        )
        self.n_features = int(n_features)
        self.depth = int(depth)
        self.weight_sharing = weight_sharing
        self.residual = bool(residual)
        d = self.n_features
        self.mu = nn.Parameter(torch.empty(d))
        self.S0 = nn.Parameter(torch.empty(d, d)) if self.depth >= 1 else None
        n_matrices = self.depth - 1 if weight_sharing == "independent" else min(self.depth - 1, 1)
        self.neumann_layers = nn.ParameterList(
            [nn.Parameter(torch.empty(d, d)) for _ in range(max(n_matrices, 0))]
        )
        self.W_mix = nn.Parameter(torch.empty(d, d))
        # The range of the output (set_range); derived from the training data by whoever
        # builds the block, so not part of its weights (state_dict).
        self.register_buffer("lower", None, persistent=False)
        self.register_buffer("upper", None, persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def set_range(self, lower, upper) -> NeuMissBlock:
        """Bound the output to ``[lower, upper]`` (array-likes of shape (d,), in the units
        of ``x``: a range around each column's training values) from now on; returns the
        block. The observed entries are left as they are when ``x`` lies in that range."""
        bounds = [torch.as_tensor(b, dtype=torch.float64).to(self.mu) for b in (lower, upper)]
        if any(b.shape != (self.n_features,) for b in bounds) or bool(
                (bounds[0] > bounds[1]).any()):
            raise ValueError(f"the range needs lower <= upper, each of shape "
                             f"({self.n_features},), got shapes {tuple(bounds[0].shape)} and "
                             f"{tuple(bounds[1].shape)}")
        self.lower, self.upper = bounds
        return self

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Initialise ``mu`` at 0 and every matrix as ``Id + N(0, 0.1/d)``.

        Starting near the identity keeps the products of the unrolled iterations
        well scaled at any depth, so deep blocks train as fast as shallow ones.
        """
        std = 0.1 / math.sqrt(self.n_features)
        eye = torch.eye(self.n_features)
        with torch.no_grad():
            self.mu.zero_()
            for matrix in self._matrices():
                matrix.copy_(eye + std * torch.randn(matrix.shape, generator=generator))

    def _matrices(self) -> list[nn.Parameter]:
        first = [self.S0] if self.S0 is not None else []
        return [*first, *self.neumann_layers, self.W_mix]

    def iteration_weights(self) -> list[torch.Tensor]:
        """The ``depth - 1`` matrices of the Neumann iterations, in order of use."""
        if self.depth <= 1:
            return []
        if self.weight_sharing == "shared":
            return [self.neumann_layers[0]] * (self.depth - 1)
        return list(self.neumann_layers)

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                missing: torch.Tensor | None = None) -> torch.Tensor:
        """Impute the missing entries of ``x``.

        Parameters
        ----------
        x : Tensor of shape (batch, d)
            Features with missing entries set to 0.
        mask : Tensor of shape (batch, d)
            1.0 where the entry is missing, 0.0 where observed.
        missing : Tensor of shape (k,), optional
            Indices of the only columns of ``mask`` that may be 1 (the others are
            observed in every row): ``W_mix``, whose output reaches the missing entries
            only, is applied to those columns alone, a table's complete columns (one-hot
            categories, say) costing nothing there. Same output; None: every column.

        Returns
        -------
        Tensor of shape (batch, d)

        Notes
        -----
        A row observed in every column is its own output, bounded by the range: its
        iterations reach its output through ``* mask`` only. On the CPU, where the
        iterations' products are the cost, a block of depth 1 or more runs them on the
        other rows alone (the same outputs and gradients, up to float32
        rounding of those rows' sums): a table with few incomplete rows trains a deep
        block for little more than a shallow one. At depth 0 (no iteration), and on an
        accelerator (a CUDA graph replays products of fixed shapes,
        :mod:`~neumiss.network._graphs`), every row goes through.
        """
        if self.depth == 0 or x.device.type != "cpu":  # depth 0: W_mix's product alone
            return self._estimate(x, mask, missing)
        # the rows with a missing entry (in ``missing`` only, when given: its contract)
        rows = mask.any(dim=1).nonzero().squeeze(1)
        if rows.shape[0] == x.shape[0]:
            return self._estimate(x, mask, missing)
        out = x if self.lower is None else torch.clamp(x, self.lower, self.upper)
        # even without an incomplete row: every weight then gets its zero gradient, as
        # through every row (Adam steps on it; data-parallel training needs each weight used)
        return out.index_copy(0, rows, self._estimate(
            x.index_select(0, rows), mask.index_select(0, rows), missing))

    def _estimate(self, x: torch.Tensor, mask: torch.Tensor,
                  missing: torch.Tensor | None) -> torch.Tensor:
        """:meth:`forward`'s output, every row through the iterations."""
        obs = 1.0 - mask
        centred = (x - self.mu) * obs
        h = centred
        if self.S0 is not None:
            h = (h @ self.S0) * obs
        for weight in self.iteration_weights():
            h = torch.addcmul(centred, h @ weight, obs) if self.residual else (h @ weight) * obs
        if missing is None:
            out = (h @ self.W_mix) * mask + x * obs + self.mu * mask
            return out if self.lower is None else torch.clamp(out, self.lower, self.upper)
        # the other columns are observed in every row: their output is x, bounded
        # index_select rather than advanced indexing: the same columns, a cheaper backward
        held, observed = mask.index_select(1, missing), obs.index_select(1, missing)  # (batch, k)
        out = x.index_select(1, missing) * observed + self.mu[missing] * held + (
            h @ self.W_mix.index_select(1, missing)) * held
        if self.lower is None:
            return x.index_copy(1, missing, out)
        return torch.clamp(x, self.lower, self.upper).index_copy(
            1, missing, torch.clamp(out, self.lower[missing], self.upper[missing]))

    @torch.no_grad()
    def table_output(self, x: torch.Tensor, mask: torch.Tensor,
                     missing: torch.Tensor | None = None) -> torch.Tensor:
        """``forward`` over a whole table's rows, without gradients, in the chunks of
        :func:`row_chunks`: each row's output is the one ``forward`` on all the rows at
        once gives it, to float32 rounding (see :data:`ALIGNED_ROWS`).

        Shapes: ``x``, ``mask`` (n, d) and ``missing`` (k,) as :meth:`forward` takes
        them -> (n, d)."""
        chunks = row_chunks(*x.shape, x.device)
        if len(chunks) == 1:
            return self(x, mask, missing)
        return torch.cat([self(x[rows], mask[rows], missing) for rows in chunks])

    def forward_nan(self, x: torch.Tensor) -> torch.Tensor:
        """Convenience: ``forward`` on a tensor whose missing entries are NaN.

        Parameters
        ----------
        x : Tensor of shape (batch, d) with NaN for missing entries.

        Returns
        -------
        Tensor of shape (batch, d), with no NaN.
        """
        mask = torch.isnan(x)
        return self.forward(torch.where(mask, torch.zeros_like(x), x), mask.to(x.dtype))

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, depth={self.depth}, "
            f"weight_sharing={self.weight_sharing!r}, residual={self.residual}"
        )


class NeuMissNetwork(nn.Module):
    """A :class:`NeuMissBlock` followed by a head: optional ReLU MLP, then Linear.

    ``mlp_depth = 0`` gives the paper's NeuMiss network (the head is the linear
    ``W_beta``); ``mlp_depth >= 1`` gives NeuMiss+MLP for nonlinear targets:
    ``head(h) + skip(h)``, where ``skip`` is a linear map (no bias) and the
    MLP's last layer starts at zero. Training therefore starts from the
    paper's linear head, the linear Bayes predictor stays exactly
    representable, and the MLP learns what is not linear.

    With ``mask_skip``, a linear map of the mask itself (no bias, zero at
    initialisation) is added to the output: the head sees which features are
    missing, so that informative missingness (a missing value that says
    something about ``y``) is used, as mean imputation with missing indicators
    uses it. For a fixed missingness pattern it only shifts the intercept, so
    the per-pattern linear models stay linear.

    With ``n_ramps`` > 0, a spline term is added too: a linear map (no bias, zero at
    initialisation) of ``n_ramps`` piecewise-linear encodings of the block's output
    (:class:`~neumiss.network._spline.PiecewiseLinearEncoding`, ``encoding``: its knots
    set by ``encoding.set_ramps``), so that a linear head fits an additive spline of
    each feature (a target that bends with a feature); an MLP head reads the ramps
    beside the block's output (the numeric embeddings of tabular networks: its units
    then cut each feature at its quantiles). It makes the per-pattern models nonlinear
    in the observed values.

    Shapes: ``x`` and ``mask`` (batch, d) -> output (batch, n_outputs).
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int = 1,
        depth: int = 3,
        weight_sharing: str = "independent",
        residual: bool = False,
        mlp_depth: int = 0,
        mlp_width: int | None = None,
        mask_skip: bool = False,
        n_ramps: int = 0,
    ) -> None:
        super().__init__()
        check_params(
            type(self).__name__,
            {
                "n_ramps": n_ramps,
                "n_features": n_features,
                "n_outputs": n_outputs,
                "depth": depth,
                "weight_sharing": weight_sharing,
                "residual": residual,
                "mlp_depth": mlp_depth,
                "mlp_width": mlp_width,
                "mask_skip": mask_skip,
            },
            _CONSTRAINTS,
        )
        self.block = NeuMissBlock(
            n_features, depth=depth, weight_sharing=weight_sharing, residual=residual
        )
        width = int(mlp_width) if mlp_width is not None else n_features
        layers: list[nn.Module] = []
        in_dim = n_features + (int(n_ramps) if mlp_depth else 0)  # an MLP reads the ramps
        for _ in range(int(mlp_depth)):
            layers += [nn.Linear(in_dim, width), nn.ReLU()]
            in_dim = width
        layers.append(nn.Linear(in_dim, int(n_outputs)))
        self.head = nn.Sequential(*layers)
        self.skip = nn.Linear(n_features, int(n_outputs), bias=False) if mlp_depth else None
        self.mask_skip = nn.Linear(n_features, int(n_outputs), bias=False) if mask_skip else None
        self.encoding = PiecewiseLinearEncoding(n_ramps) if n_ramps else None
        self.spline = nn.Linear(int(n_ramps), int(n_outputs), bias=False) if n_ramps else None

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator`` (repeatable initialisation)."""
        self.block.reset_parameters(generator)
        for layer in self.head:
            if isinstance(layer, nn.Linear):
                bound = 1.0 / math.sqrt(layer.in_features)
                with torch.no_grad():
                    layer.weight.uniform_(-bound, bound, generator=generator)
                    layer.bias.uniform_(-bound, bound, generator=generator)
        if self.skip is not None:
            bound = 1.0 / math.sqrt(self.skip.in_features)
            with torch.no_grad():
                self.skip.weight.uniform_(-bound, bound, generator=generator)
                self.head[-1].weight.zero_()
        for term in (self.mask_skip, self.spline):
            if term is not None:
                with torch.no_grad():
                    term.weight.zero_()

    @torch.no_grad()
    def warm_start_from(self, other: NeuMissNetwork, keep_mlp: bool = True) -> list[str]:
        """Copy every parameter of ``other`` whose name and shape match this network's.

        Used to train a deeper network from a shallower trained one: ``mu``, ``S0``, the
        common Neumann matrices, ``W_mix`` and the head carry over; the extra iterations
        keep their near-identity initialisation. From a ``weight_sharing="shared"``
        network into an ``"independent"`` one ("untying"), every iteration matrix
        receives the shared matrix: at equal depth both compute the same function.

        From a linear head (``mlp_depth=0``) into an MLP head with its skip, the skip
        receives the linear weights and the MLP's last layer (zero at initialisation) the
        bias: both compute the same function. From an MLP head into a linear one, the
        linear head receives the skip and the MLP's last bias (the function less the
        MLP's part). A spline term with as many ramps receives the weights and knots.

        With ``keep_mlp=False``, an MLP head keeps its fresh initialisation (its last
        layer at zero) and receives only the skip and the last bias: the network starts
        from ``other`` less the MLP's part. The depth search deepens this way, because a
        deeper block's output is far from the shallower one's (the extra iterations are
        not function-preserving) and the old ReLU units would start dead or saturated.

        Returns
        -------
        list of str
            Names of the parameters copied.
        """
        own = dict(self.named_parameters())
        same_head = len(self.head) == len(other.head)
        last_bias = f"head.{len(self.head) - 1}.bias"
        copied = []
        for name, value in other.named_parameters():
            if not same_head and name.startswith(("head.", "skip.")):
                continue
            if not keep_mlp and self.skip is not None and name.startswith("head.") \
                    and name != last_bias:
                continue
            if name in own and own[name].shape == value.shape:
                own[name].copy_(value.to(own[name].device))
                copied.append(name)
        if "spline.weight" in copied:  # the spline's weights came over: their knots too
            self.encoding.load_state_dict(other.encoding.state_dict())
        if other.skip is None and self.skip is not None:  # linear head -> MLP + skip
            linear, last = other.head[-1], self.head[-1]
            self.skip.weight.copy_(linear.weight.to(self.skip.weight.device))
            last.weight.zero_()
            last.bias.copy_(linear.bias.to(last.bias.device))
            copied += ["skip.weight", f"head.{len(self.head) - 1}.bias"]
        if other.skip is not None and self.skip is None:  # MLP + skip -> linear head
            linear, last = self.head[-1], other.head[-1]
            linear.weight.copy_(other.skip.weight.to(linear.weight.device))
            linear.bias.copy_(last.bias.to(linear.bias.device))
            copied += [f"head.{len(self.head) - 1}.weight", f"head.{len(self.head) - 1}.bias"]
        shared = other.block.neumann_layers
        modes = (other.block.weight_sharing, self.block.weight_sharing)
        if modes == ("shared", "independent") and shared:
            for index, layer in enumerate(self.block.neumann_layers):
                layer.copy_(shared[0].to(layer.device))
                copied.append(f"block.neumann_layers.{index}")
        return sorted(set(copied))

    @torch.no_grad()
    def set_constant_output(self, value: torch.Tensor) -> None:
        """Predict ``value`` (n_outputs,) for every row: the head's last layer gets zero
        weights and ``value`` as bias (the training loop's fallback when no epoch beat
        that constant, see :func:`~neumiss.network.train`)."""
        last = self.head[-1]
        last.weight.zero_()
        for linear in (self.skip, self.mask_skip, self.spline):
            if linear is not None:
                linear.weight.zero_()
        last.bias.copy_(torch.as_tensor(value, dtype=last.bias.dtype).to(last.bias.device))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Shapes: (batch, d), (batch, d) -> (batch, n_outputs)."""
        return self.head_output(self.block(x, mask), mask)

    def head_output(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The network's output from its block's output ``h`` (batch, d) and the ``mask``
        (batch, d): (batch, n_outputs)."""
        ramps = None if self.encoding is None else self.encoding(h)
        # an MLP head (beside its skip) reads the ramps too; then the linear terms
        out = self.head(h if ramps is None or self.skip is None else torch.cat([h, ramps], -1))
        for term, inputs in ((self.skip, h), (self.spline, ramps), (self.mask_skip, mask)):
            if term is not None:
                out = out + term(inputs)
        return out
