"""An ensemble of NeuMiss networks trained as one: a shared block and ``K`` heads.

The block costs ``depth * d^2`` per row and its start is the same for every
member (the data's moments, :mod:`~neumiss.network._start`); the heads are
small and hold the members' differences. :class:`StackedNetwork` therefore
shares one block among the members, in the manner of parameter-efficient
ensembles (TabM, BatchEnsemble), and holds each weight of the heads as one
tensor with a leading member axis ``K``. What reads the block's output (every
member's first layer and linear terms) is one product for all members
(``(batch, d) @ (d, K * width)``), the deeper layers batched products
(``(K, batch, width) @ (K, width, width)``): one optimizer step trains all members
for little more than the price of one network. Training sees the members'
outputs (:meth:`StackedNetwork.member_outputs`, each member with its own loss);
everything else (early stopping, the divergence guard, the depth search) sees
the combined output of :meth:`StackedNetwork.forward`, as
:class:`~neumiss.network.EnsembleNetwork` computes it. :meth:`StackedNetwork.networks`
gives the members back as :class:`~neumiss.network.NeuMissNetwork` objects.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import torch
from torch import nn

from ._block import NeuMissNetwork
from ._clone import clone_module
from ._data import TrainingData
from ._ensemble import COMBINE, EnsembleNetwork, combine_outputs


def _ramps(network: NeuMissNetwork) -> int:
    """The number of the spline's ramps ``network``'s head reads beside the block's output."""
    return 0 if network.encoding is None else network.encoding.n_ramps


def _key(name: str) -> str:
    """A parameter name of a member's head as a key of :class:`torch.nn.ParameterDict`."""
    return name.replace(".", "__")


class GivenBlockOutput(nn.Module):
    """Stands in for a frozen ``block`` while the network reads the block's outputs computed
    beforehand (:meth:`StackedNetwork.on_block_outputs`): its ``x`` is that output, returned
    as it is. ``block`` stays a submodule, its weights in the network's state."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    @property
    def depth(self) -> int:
        return self.block.depth

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                missing: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (batch, d), the block's output already."""
        return x


class StackedNetwork(nn.Module):
    """``K`` NeuMiss networks of the same shape with one shared block and stacked heads.

    Parameters
    ----------
    networks : list of NeuMissNetwork
        The members (at least one), all built with the same arguments. The block
        is the first member's (copied); every member's head is copied.
    combine : {"mean", "binary_probability", "probability"}
        How :meth:`forward` combines the members' outputs (see
        :data:`~neumiss.network.COMBINE`).
    missing : Tensor of shape (k,), optional
        The columns that may be missing in the rows this network will see (the others
        observed in every row), as :meth:`NeuMissBlock.forward` takes them; None: any.
        A training-time shortcut: :meth:`networks` and :meth:`to_network` do not keep it.
    two_valued : tuple ``(columns, base, step)`` of Tensors of shape (b,), optional
        Columns observed in every row this network will see and taking there the value
        ``base``, or ``base + step`` (one-hot categories, standardized: the block passes
        them through; :func:`~neumiss.network._data.two_valued_columns`). Their share of
        the product that reads the block's output is the constant of their ``base``
        plus, in each row, the weights' rows of the columns away from it times ``step``
        (``embedding_bag``): the same output and gradients, at a cost that does not grow
        with a category's levels. A training-time shortcut, as ``missing``; None: dense.

    Notes
    -----
    Shapes: :meth:`member_outputs` maps ``x`` and ``mask`` (batch, d) to
    (K, batch, n_outputs); :meth:`forward` maps them to (batch, n_outputs).

    The heads read the spline's ramps **centred**: less each ramp's mean were its bins of
    equal mass (:meth:`~neumiss.network._spline.PiecewiseLinearEncoding.centres`), the
    biases of the layers reading them shifted to compute the same function
    (:meth:`_centring_shifts`; :meth:`networks` gives the members back with the
    ramps as they are). A reparametrization for the training only: a ramp is 1 above its
    bin, so most of a column's ramps are 1 or 0 together and Adam's steps of their
    weights (each about the learning rate) add up in the first layer of an MLP head.
    Uncentred, an MLP head reading 480 ramps (30 columns) stopped within 6 epochs on a
    simulated binary task of 8,000 rows (log loss 0.38 against 0.15 without the spline);
    centred, 0.20 (results/realdata/README.md, "The ramps centred in training").
    """

    def __init__(self, networks: list[NeuMissNetwork], combine: str,
                 missing: torch.Tensor | None = None,
                 two_valued: tuple | None = None) -> None:
        super().__init__()
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if not networks:
            raise ValueError("a stacked network needs at least one member")
        template = networks[0]
        self.combine = combine
        self.n_members = len(networks)
        # The template is kept outside the module tree: it only gives the members' shape.
        self.__dict__["_template"] = clone_module(template).cpu()
        self.block = clone_module(template.block)
        # the spline's knots, or None
        self.encoding = None if template.encoding is None else clone_module(template.encoding)
        names = [name for name, _ in template.named_parameters()
                 if not name.startswith("block.")]
        states = [dict(network.named_parameters()) for network in networks]
        self.heads = nn.ParameterDict({
            _key(name): nn.Parameter(torch.stack([state[name].detach() for state in states]))
            for name in names
        })
        self._layers = [_key(f"head.{i}") for i, layer in enumerate(template.head)
                        if isinstance(layer, nn.Linear)]
        self.register_buffer("missing", missing, persistent=False)
        columns, base, step = two_valued if two_valued is not None else (None, None, None)
        for name, value in (("two_valued", columns), ("base", base), ("step", step)):
            self.register_buffer(name, value, persistent=False)
        # the other columns of the product's input: the block's output's, then the ramps'
        self.register_buffer("dense", None if columns is None else torch.cat([
            torch.ones(template.block.n_features, dtype=torch.bool).index_fill(0, columns, False),
            torch.ones(_ramps(template), dtype=torch.bool)]).nonzero().squeeze(1),
            persistent=False)
        self.register_buffer("centres", None if self.encoding is None
                             else self.encoding.centres(), persistent=False)
        with torch.no_grad():  # the heads compute on centred ramps what they did on ramps
            for name, shift in self._centring_shifts().items():
                self.heads[name].add_(shift)

    def _centring_shifts(self) -> dict[str, torch.Tensor]:
        """What centring the ramps takes from each layer reading them, to be added to that
        layer's bias, by the name of the bias in :attr:`heads`: the output's (the spline's
        weights times the centres, (K, n_outputs)) and, for an MLP head, its first layer's
        (its weights on the ramps times the centres, (K, width)). Empty without ramps."""
        if self.centres is None:
            return {}
        shifts = {f"{self._layers[-1]}__bias": self.heads["spline__weight"] @ self.centres}
        if "skip__weight" in self.heads:  # the MLP's first layer reads the ramps last
            first = self.heads[f"{self._layers[0]}__weight"]  # (K, width, d + R)
            on_ramps = first[..., first.shape[-1] - self.centres.shape[0]:]
            shifts[f"{self._layers[0]}__bias"] = on_ramps @ self.centres
        return {name: shift.detach() for name, shift in shifts.items()}

    @property
    def depth(self) -> int:
        return self.block.depth

    def member_outputs(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Every member's output: (batch, d), (batch, d) -> (K, batch, n_outputs).

        Each member computes what :meth:`NeuMissNetwork.forward` computes with the shared
        block and its head. Every weight that reads the block's output (and the spline's
        ramps) is applied in one matrix product for all members, ``(batch, F) @ (F,
        K * (width + n_outputs))``: the first layer of each MLP head and the linear terms
        (the skip, or a linear head, and the spline's weights) side by side. One large
        product (and its gradient) costs less than ``K`` small batched ones and sums the
        members' gradients of the shared input inside the product.
        """
        return self._head_outputs(self._head_inputs(x, mask), mask)

    def held_out_outputs(self, x: torch.Tensor, mask: torch.Tensor,
                         held_out_by: torch.Tensor) -> torch.Tensor:
        """Each row's output from the member ``held_out_by`` names: (batch, d), (batch, d),
        (batch,) -> (batch, n_outputs), what :meth:`member_outputs` gives for that member
        and row (out-of-fold validation). The block runs once on every row. Each member's
        MLP head runs on the rows it held out only, a ``K``-th of the heads' cost; linear
        heads are one product for all members on every row, cheaper than gathering rows
        (up to float32 rounding, both compute each member's output)."""
        inputs = self._head_inputs(x, mask)
        if "skip__weight" not in self.heads:  # linear heads
            rows = torch.arange(x.shape[0], device=x.device)
            return self._head_outputs(inputs, mask)[held_out_by, rows]
        n_outputs = self.heads[f"{self._layers[-1]}__bias"].shape[-1]
        output = inputs.new_empty((x.shape[0], n_outputs))
        for k in range(self.n_members):
            rows = (held_out_by == k).nonzero().squeeze(1)
            output[rows] = self._head_outputs(inputs[rows], mask[rows], k)[0]
        return output

    def _head_inputs(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What the heads read: the block's output (batch, d), and the spline's ramps of it
        (batch, R) beside it when there are: (batch, F)."""
        block_out = self.block(x, mask, self.missing)  # (batch, d)
        # the ramps centred (class notes): (batch, R)
        ramps = None if self.encoding is None else self.encoding(block_out) - self.centres
        # an MLP head's first layer reads the ramps beside the block's output, as the
        # spline's weights do; a linear head reads the block's output only
        return block_out if ramps is None else torch.cat([block_out, ramps], dim=-1)

    def _head_outputs(self, inputs: torch.Tensor, mask: torch.Tensor,
                      member: int | None = None) -> torch.Tensor:
        """The outputs of every member's head (K' = K), or of ``member``'s alone (K' = 1),
        on ``inputs`` (batch, F) of :meth:`_head_inputs` and ``mask`` (batch, d):
        (K', batch, n_outputs)."""
        heads = self.heads if member is None else {
            name: weight[member:member + 1] for name, weight in self.heads.items()}
        n_members, batch = heads[f"{self._layers[0]}__weight"].shape[0], inputs.shape[0]
        first = heads[f"{self._layers[0]}__weight"]  # (K', width or n_outputs, *)
        mlp = "skip__weight" in heads
        linear = [heads["skip__weight"] if mlp else first]  # (K', n_outputs, d)
        if "spline__weight" in heads:
            linear.append(heads["spline__weight"])  # (K', n_outputs, R)
        linear = torch.cat(linear, dim=-1) if len(linear) > 1 else linear[0]  # (K', n_outputs, F)
        n_outputs = linear.shape[1]
        weights = torch.cat([first.flatten(0, 1), linear.flatten(0, 1)]) if mlp else (
            linear.flatten(0, 1))  # (K' * width + K' * n_outputs, F), or (K' * n_outputs, F)
        product = self._product(inputs, weights)  # (batch, K' * width + K' * n_outputs)
        # one split (its backward one concatenation) rather than two slices (each a zero
        # tensor of the product's shape in the backward pass)
        width = first.shape[1] if mlp else 0
        hidden, out = product.split([n_members * width, n_members * n_outputs], dim=1)
        if "mask_skip__weight" in heads:
            out = torch.addmm(out, mask, heads["mask_skip__weight"].flatten(0, 1).T)
        out = out.reshape(batch, n_members, n_outputs).transpose(0, 1)  # (K', batch, n_outputs)
        if not mlp:
            return out + heads[f"{self._layers[0]}__bias"].unsqueeze(1)
        hidden = hidden.reshape(batch, n_members, width).transpose(0, 1)  # (K', batch, width)
        hidden = hidden + heads[f"{self._layers[0]}__bias"].unsqueeze(1)
        for key in self._layers[1:]:
            hidden = torch.baddbmm(heads[f"{key}__bias"].unsqueeze(1), torch.relu(hidden),
                                   heads[f"{key}__weight"].transpose(1, 2))
        return hidden + out

    def _product(self, inputs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``inputs @ weights.T``, (batch, F) x (P, F) -> (batch, P); with ``two_valued``,
        those columns' share from their ``base`` and the rows away from it."""
        if self.two_valued is None:
            return inputs @ weights.T
        # index_select rather than advanced indexing: the same columns, a cheaper backward
        other = weights.index_select(1, self.two_valued)  # (P, b)
        rows, columns = (inputs.index_select(1, self.two_valued) != self.base).nonzero(
            as_tuple=True)
        offsets = torch.searchsorted(rows, torch.arange(inputs.shape[0], device=rows.device))
        away = nn.functional.embedding_bag(columns, (other * self.step).T, offsets,
                                           mode="sum")  # (batch, P)
        return torch.addmm(away + other @ self.base, inputs.index_select(1, self.dense),
                           weights.index_select(1, self.dense).T)

    def block_output(self, data: TrainingData) -> torch.Tensor:
        """The block's output (n, d) on the rows of ``data``, computed in chunks of rows
        (:meth:`~neumiss.network.NeuMissBlock.table_output`)."""
        return self.block.table_output(data.x, data.mask, self.missing)

    @contextlib.contextmanager
    def on_block_outputs(self, *datasets: TrainingData | None
                         ) -> Iterator[tuple[TrainingData | None, ...]]:
        """Inside the ``with``, a frozen block (no parameter that trains) computed once:
        yields ``datasets`` with ``x`` replaced by the block's output on their rows, and
        the block stands aside (:class:`GivenBlockOutput`), so that training the heads on
        them costs the heads' steps only, for the same outputs and gradients (out of fold
        on 4,800 rows of 567 columns, depth 16: 0.2 s an epoch, 1.7 s through the block).
        A block that trains, or rows not all in memory (:class:`TrainingData`), are
        yielded unchanged. Datasets of the same rows (the same ``x`` and ``mask`` tensors:
        out of fold, the training and validation rows) share one output."""
        frozen = not any(p.requires_grad for p in self.block.parameters())
        if not frozen or not all(d is None or isinstance(d, TrainingData) for d in datasets):
            yield datasets
            return
        block, outputs = self.block, {}
        for data in datasets:
            if data is not None and (id(data.x), id(data.mask)) not in outputs:
                outputs[id(data.x), id(data.mask)] = self.block_output(data)
        given = tuple(None if d is None else dataclasses.replace(
            d, x=outputs[id(d.x), id(d.mask)]) for d in datasets)
        self.block = GivenBlockOutput(block)
        try:
            yield given
        finally:
            self.block = block

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The members' outputs combined by ``combine`` (one member: its output),
        (batch, d) x 2 -> (batch, n_outputs)."""
        return self.combined(self.member_outputs(x, mask))

    def combined(self, outputs: torch.Tensor) -> torch.Tensor:
        """The members' outputs (K, batch, n_outputs) combined by ``combine`` (one member:
        its output): (batch, n_outputs)."""
        return outputs[0] if len(outputs) == 1 else combine_outputs(outputs, self.combine)

    def _output_weights(self) -> list[nn.Parameter]:
        """The stacked weights (no bias) of every term summed into the output: the head's
        last layer, and the skip, mask and spline terms that are present."""
        names = (f"{self._layers[-1]}__weight", "skip__weight", "mask_skip__weight",
                 "spline__weight")
        return [self.heads[name] for name in names if name in self.heads]

    @torch.no_grad()
    def set_constant_output(self, value: torch.Tensor) -> None:
        """Every member predicts ``value`` (n_outputs,) for every row (see
        :meth:`NeuMissNetwork.set_constant_output`)."""
        for weight in self._output_weights():
            weight.zero_()
        bias = self.heads[f"{self._layers[-1]}__bias"]
        bias.copy_(torch.as_tensor(value, dtype=bias.dtype).to(bias.device).expand_as(bias))

    @torch.no_grad()
    def scale_outputs(self, factor: float) -> None:
        """Every member's output multiplied by ``factor``: the output terms' weights and
        the last bias scaled (a temperature ``T`` is ``factor = 1 / T``,
        :func:`~neumiss.network.fit_temperature`). The block is untouched."""
        for weight in (*self._output_weights(), self.heads[f"{self._layers[-1]}__bias"]):
            weight.mul_(factor)

    @torch.no_grad()
    def blended_with(self, linear: StackedNetwork, weight: float) -> StackedNetwork:
        """A copy of this network whose member ``k`` outputs ``weight`` times this member's
        output plus ``1 - weight`` times member ``k`` of ``linear``: ``linear`` has linear
        heads on the same block, with the same spline knots and terms, as
        :meth:`~neumiss.network.DepthSearch.fitted_linear_head` fits them. Exact in this
        network's architecture, since every output term is linear in its weights: an MLP
        head's last layer is scaled by ``weight``, and the skip (or a linear head), the
        spline's and the mask's weights and the last bias are the weighted sums of both
        networks' (in the loss's output units: a classifier blends logits)."""
        if "skip__weight" in linear.heads:
            raise ValueError("blended_with blends with linear heads; linear has MLP heads")
        blend = clone_module(self)
        heads, other, last = blend.heads, linear.heads, blend._layers[-1]
        pairs = [(f"{last}__bias", "head__0__bias"), ("spline__weight", "spline__weight"),
                 ("mask_skip__weight", "mask_skip__weight")]
        if "skip__weight" in heads:  # an MLP head beside its skip
            heads[f"{last}__weight"].mul_(weight)
            pairs.append(("skip__weight", "head__0__weight"))
        else:
            pairs.append(("head__0__weight", "head__0__weight"))
        for name, linear_name in pairs:
            if name in heads:
                heads[name].mul_(weight).add_(other[linear_name], alpha=1.0 - weight)
        return blend

    def mlp_is_zero(self) -> bool:
        """Whether every member's MLP head (beside its skip) has its last layer at zero, as
        it starts: the MLP then adds only its last bias and each member computes a linear
        head's function. A candidate kept at its start (best epoch 0) is such a network."""
        return ("skip__weight" in self.heads
                and not self.heads[f"{self._layers[-1]}__weight"].any())

    def networks(self) -> list[NeuMissNetwork]:
        """The members as separate networks (copies of the block, the spline's knots and of
        each head, on this network's device), reading the ramps as they are."""
        members = []
        shared = {f"block.{name}": value.detach()
                  for name, value in self.block.state_dict().items()}
        if self.encoding is not None:
            shared.update({f"encoding.{name}": value
                           for name, value in self.encoding.state_dict().items()})
        stacked = {name: value.detach() for name, value in self.heads.items()}
        for name, shift in self._centring_shifts().items():
            stacked[name] = stacked[name] - shift
        for k in range(self.n_members):
            member = clone_module(self._template).to(self.block.mu.device)
            heads = {name: stacked[_key(name)][k]
                     for name, _ in member.named_parameters() if not name.startswith("block.")}
            member.load_state_dict({**shared, **heads})
            members.append(member.eval())
        return members

    def to_network(self) -> NeuMissNetwork | EnsembleNetwork:
        """The members as the estimators' fitted network: the member itself when there is
        one, else their :class:`~neumiss.network.EnsembleNetwork`."""
        members = self.networks()
        return members[0] if len(members) == 1 else EnsembleNetwork(members, self.combine)
