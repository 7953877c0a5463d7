"""An ensemble of NeuMiss networks that predicts as one network.

The estimators train ``ensemble_size`` members on different validation
splits and initialisations (:mod:`neumiss.estimators`); :class:`EnsembleNetwork`
averages them. Regression outputs are averaged; class probabilities are
averaged, and returned as logits (binary) or log-probabilities (multiclass),
so that the estimators' sigmoid or softmax gives back the averaged
probabilities and ``decision_function`` stays a logit.
"""

from __future__ import annotations

import torch
from torch import nn

from ._block import NeuMissNetwork

#: How members' outputs combine: the average of the outputs, of the sigmoid
#: probabilities (one logit, binary) or of the softmax probabilities (multiclass).
COMBINE = ("mean", "binary_probability", "probability")

#: Probabilities are kept within [EPSILON, 1 - EPSILON] before taking logits.
EPSILON = 1e-7


class MeanBlock(nn.Module):
    """The average of several NeuMiss blocks: ``(x, mask) -> (batch, d)``."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.n_features = blocks[0].n_features

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Each distinct block computed once; equal blocks (members trained together):
        that block's output."""
        firsts = _equal_block_groups(self, list(self.blocks))
        outputs = _block_outputs(self.blocks, firsts, x, mask)
        return outputs[0] if not any(firsts) else torch.stack(outputs).mean(dim=0)


class EnsembleNetwork(nn.Module):
    """Members with the same inputs and outputs, combined by ``combine`` (see :data:`COMBINE`).

    Shapes: ``x`` and ``mask`` (batch, d) -> output (batch, n_outputs), like
    each member. ``block`` averages the members' blocks (used by ``impute``).
    """

    def __init__(self, members: list[NeuMissNetwork], combine: str) -> None:
        super().__init__()
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 members, got {len(members)}")
        self.members = nn.ModuleList(members)
        self.combine = combine

    @property
    def block(self) -> MeanBlock:
        return MeanBlock([member.block for member in self.members])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Each distinct block computed once (the members trained together share theirs:
        :class:`~neumiss.network.StackedNetwork`), each member's head on it, combined."""
        member_blocks = [member.block for member in self.members]
        blocks = _block_outputs(member_blocks, _equal_block_groups(self, member_blocks), x,
                                mask)
        outputs = [member.head_output(h, mask) for member, h in zip(self.members, blocks)]
        return combine_outputs(torch.stack(outputs), self.combine)


def _equal_block_groups(owner: nn.Module, blocks: list[nn.Module]) -> list[int]:
    """:func:`first_equal_blocks` of ``blocks``, kept on ``owner`` (the ensemble or mean
    block holding them) and compared again only after a weight changed (the tensors'
    version counters): not once per prediction chunk."""
    versions = tuple((id(t), t._version) for block in blocks
                     for t in block.state_dict(keep_vars=True).values())
    cached = owner.__dict__.get("_block_groups")
    if cached is None or cached[0] != versions:
        cached = owner.__dict__["_block_groups"] = (versions, first_equal_blocks(blocks))
    return cached[1]


def first_equal_blocks(blocks: list[nn.Module]) -> list[int]:
    """For each block, the index of the first block with the same weights (its own index
    when none before it has): all zeros when the members of an ensemble share one."""
    states = [block.state_dict() for block in blocks]

    def same(a, b) -> bool:
        return a.keys() == b.keys() and all(
            a[name].shape == b[name].shape and torch.equal(a[name], b[name]) for name in a)

    return [next(j for j in range(k + 1) if same(states[j], state))
            for k, state in enumerate(states)]


def _block_outputs(blocks, firsts: list[int], x: torch.Tensor, mask: torch.Tensor
                   ) -> list[torch.Tensor]:
    """Each block's output (batch, d), computed once per group of equal blocks (``firsts``:
    :func:`first_equal_blocks`); equal blocks get the same tensor."""
    computed = {j: blocks[j](x, mask) for j in sorted(set(firsts))}
    return [computed[j] for j in firsts]


def combine_outputs(outputs: torch.Tensor, combine: str) -> torch.Tensor:
    """Members' outputs (K, batch, n_outputs) combined by ``combine`` (see :data:`COMBINE`)
    into (batch, n_outputs): the mean output, or the logit (binary) or log-probabilities
    (multiclass) of the mean probabilities."""
    if combine == "mean":
        return outputs.mean(dim=0)
    if combine == "binary_probability":
        p = torch.sigmoid(outputs).mean(dim=0).clamp(EPSILON, 1 - EPSILON)
        return torch.log(p) - torch.log1p(-p)
    return torch.log(torch.softmax(outputs, dim=-1).mean(dim=0).clamp_min(EPSILON))
