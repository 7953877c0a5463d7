"""Several NeuMiss networks of one shape, trained together in batched matrix products.

An ensemble's members differ only in their weights. :class:`StackedNetwork`
holds each weight of the members as one tensor with a leading member axis
``K`` and computes every member in the same batched products
(``(K, batch, d) @ (K, d, d)``), so one optimizer step trains all members for
little more than the price of one: a small network's step is bound by the
number of operations launched, not by arithmetic. Training sees the members'
outputs (:meth:`StackedNetwork.member_outputs`, each member with its own loss);
everything else (early stopping, the divergence guard, the depth search) sees
the combined output of :meth:`StackedNetwork.forward`, as
:class:`~neumiss.network.EnsembleNetwork` computes it. :meth:`StackedNetwork.networks`
gives the members back as :class:`~neumiss.network.NeuMissNetwork` objects.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ._block import NeuMissNetwork
from ._ensemble import COMBINE, EnsembleNetwork, combine_outputs


def _key(name: str) -> str:
    """A parameter name of a member as a key of :class:`torch.nn.ParameterDict` (no dots)."""
    return name.replace(".", "__")


class StackedNetwork(nn.Module):
    """``K`` NeuMiss networks of the same shape with stacked weights.

    Parameters
    ----------
    networks : list of NeuMissNetwork
        The members (at least one), all built with the same arguments; their
        weights are copied.
    combine : {"mean", "binary_probability", "probability"}
        How :meth:`forward` combines the members' outputs (see
        :data:`~neumiss.network.COMBINE`).

    Shapes
    ------
    :meth:`member_outputs`: ``x`` and ``mask`` (batch, d) -> (K, batch, n_outputs).
    :meth:`forward`: ``x`` and ``mask`` (batch, d) -> (batch, n_outputs).
    """

    def __init__(self, networks: list[NeuMissNetwork], combine: str) -> None:
        super().__init__()
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if not networks:
            raise ValueError("a stacked network needs at least one member")
        template = networks[0]
        self.combine = combine
        self.n_members = len(networks)
        # The template is kept outside the module tree: it only gives the members' shape.
        self.__dict__["_template"] = copy.deepcopy(template).cpu()
        names = [name for name, _ in template.named_parameters()]
        states = [dict(network.named_parameters()) for network in networks]
        self.weights = nn.ParameterDict({
            _key(name): nn.Parameter(torch.stack([state[name].detach() for state in states]))
            for name in names
        })
        block = template.block
        shared = block.weight_sharing == "shared"
        self._iterations = [_key(f"block.neumann_layers.{0 if shared else i}")
                            for i in range(max(block.depth - 1, 0))]
        self._head = [_key(f"head.{i}") for i, layer in enumerate(template.head)
                      if isinstance(layer, nn.Linear)]

    @property
    def depth(self) -> int:
        return self._template.block.depth

    def _weight(self, name: str) -> torch.Tensor:
        return self.weights[_key(name)]

    def member_outputs(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Every member's output: (batch, d), (batch, d) -> (K, batch, n_outputs).

        Each member computes what :meth:`NeuMissNetwork.forward` computes with its weights.
        """
        block = self._template.block
        mu = self._weight("block.mu").unsqueeze(1)  # (K, 1, d)
        obs = 1.0 - mask
        centred = (x - mu) * obs  # (K, batch, d)
        h = centred
        if block.depth >= 1:
            h = torch.bmm(h, self._weight("block.S0")) * obs
        for key in self._iterations:
            product = torch.bmm(h, self.weights[key])
            h = torch.addcmul(centred, product, obs) if block.residual else product * obs
        imputed = torch.bmm(h, self._weight("block.W_mix")) * mask + x * obs + mu * mask
        out = imputed
        for index, key in enumerate(self._head):
            out = torch.baddbmm(self.weights[f"{key}__bias"].unsqueeze(1), out,
                                self.weights[f"{key}__weight"].transpose(1, 2))
            if index < len(self._head) - 1:
                out = torch.relu(out)
        if "skip__weight" in self.weights:
            out = torch.baddbmm(out, imputed, self.weights["skip__weight"].transpose(1, 2))
        return out

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The members' outputs combined by ``combine`` (one member: its output),
        (batch, d) x 2 -> (batch, n_outputs)."""
        outputs = self.member_outputs(x, mask)
        return outputs[0] if self.n_members == 1 else combine_outputs(outputs, self.combine)

    @torch.no_grad()
    def set_constant_output(self, value: torch.Tensor) -> None:
        """Every member predicts ``value`` (n_outputs,) for every row (see
        :meth:`NeuMissNetwork.set_constant_output`)."""
        last = self._head[-1]
        self.weights[f"{last}__weight"].zero_()
        if "skip__weight" in self.weights:
            self.weights["skip__weight"].zero_()
        bias = self.weights[f"{last}__bias"]
        bias.copy_(torch.as_tensor(value, dtype=bias.dtype).to(bias.device).expand_as(bias))

    def networks(self) -> list[NeuMissNetwork]:
        """The members as separate networks (copies, on this network's device)."""
        members = []
        for k in range(self.n_members):
            member = copy.deepcopy(self._template).to(self._weight("block.mu").device)
            member.load_state_dict({name: self.weights[_key(name)][k].detach().clone()
                                    for name, _ in member.named_parameters()})
            members.append(member.eval())
        return members

    def to_network(self) -> NeuMissNetwork | EnsembleNetwork:
        """The members as the estimators' fitted network: the member itself when there is
        one, else their :class:`~neumiss.network.EnsembleNetwork`."""
        members = self.networks()
        return members[0] if len(members) == 1 else EnsembleNetwork(members, self.combine)
