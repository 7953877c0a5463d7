"""The rows of a training split on their device, and the losses of a network on them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from ._block import row_chunks

#: ``loss_fn(output, target)``: the loss of each row, shape (n,).
LossFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: ``score_fn(loss)``: the score shown for a mean loss (e.g. R²), larger is better.
ScoreFunction = Callable[[float], float]


@dataclass
class TrainingData:
    """Tensors of one split, all on the training device.

    x : (n, d) float32, missing entries 0; mask : (n, d) float32, 1 = missing;
    target : (n,) float32 (regression, binary) or int64 (multiclass);
    weight : (n,) float32 case weights, or None (every row counts once); training
    weights have a mean of 1.
    member_weight : (n, K) float32 weights of each row in the training loss of each of
    ``K`` members trained together (out of fold: 0 on a member's own fold), or None
    (every member on every row).
    held_out_by : (n,) int64, validation rows only: the member that did not train on each
    row (out-of-fold validation), which alone scores it when a
    :class:`~neumiss.network.StackedNetwork` is evaluated; None: the combined output does.
    """

    x: torch.Tensor
    mask: torch.Tensor
    target: torch.Tensor
    weight: torch.Tensor | None = None
    member_weight: torch.Tensor | None = None
    held_out_by: torch.Tensor | None = None
    # The shuffled copy of the rows that :meth:`batches` refills each epoch: not data (no
    # argument, no comparison; a ``dataclasses.replace`` starts without it).
    _shuffled: TrainingData | None = dataclasses.field(default=None, init=False, repr=False,
                                                       compare=False)

    def __len__(self) -> int:
        return self.x.shape[0]

    def subset(self, index: torch.Tensor | slice) -> TrainingData:
        """The rows ``index``: a 1-D integer tensor on the data's device (copied), or a
        slice (views, no copy)."""
        weight = None if self.weight is None else self.weight[index]
        members = None if self.member_weight is None else self.member_weight[index]
        held = None if self.held_out_by is None else self.held_out_by[index]
        return TrainingData(self.x[index], self.mask[index], self.target[index], weight,
                            members, held)

    def columns(self, keep: torch.Tensor) -> TrainingData:
        """The features ``keep`` (a boolean (d,) tensor on the data's device) of every row."""
        return dataclasses.replace(self, x=self.x[:, keep], mask=self.mask[:, keep])

    def rows(self, start: int, stop: int) -> TrainingData:
        """Rows ``start:stop``, as views (no copy)."""
        return self.subset(slice(start, stop))

    @property
    def device(self) -> torch.device:
        return self.x.device

    def batches(self, batch_size: int, generator: torch.Generator) -> Iterator[TrainingData]:
        """One epoch's mini-batches: the rows shuffled with ``generator`` (one gather),
        then cut into views of ``batch_size`` rows. On an accelerator the permutation is
        drawn there, by a generator seeded from ``generator`` (a CPU one): a million rows
        take 16 ms to permute on the host, an epoch of replayed steps about as long.

        The shuffled rows are gathered into the same buffer every epoch (a fresh one the
        size of the table, whose pages the system maps anew each time, took twice as long:
        7,592 rows x 217, 7.0 against 3.4 ms an epoch): the next call overwrites the
        batches of this one, which are therefore used before it."""
        if self.device.type == "cpu":
            order = torch.randperm(len(self), generator=generator)
        else:
            seed = int(torch.randint(2**62, (), generator=generator))
            on_device = torch.Generator(self.device).manual_seed(seed)
            order = torch.randperm(len(self), generator=on_device, device=self.device)
        shuffled = self._shuffled_rows(order)
        for start in range(0, len(self), batch_size):
            yield shuffled.rows(start, start + batch_size)

    def _shuffled_rows(self, order: torch.Tensor) -> TrainingData:
        """``subset(order)`` for a permutation ``order``, gathered into :attr:`_shuffled`
        (allocated at the first call, refilled at the next ones)."""
        if self._shuffled is None:
            self._shuffled = self.subset(order)
            return self._shuffled
        for field in dataclasses.fields(self):
            source = getattr(self, field.name)
            if field.init and source is not None:
                torch.index_select(source, 0, order, out=getattr(self._shuffled, field.name))
        return self._shuffled


#: :func:`missing_columns` gives the block's shortcut only when the complete columns
#: spare ``W_mix`` at least this many multiply-adds per row, ``d (d - k)``: below, the
#: gather and scatter it adds to every step cost more than they spare (tables of ten
#: encoded columns, growth_dj: 10% more fit time; txhousing_sales, 78 x 76: 15% less).
MIN_SPARED_PER_ROW = 1024


def missing_columns(*datasets: TrainingData | None) -> torch.Tensor | None:
    """The indices (k,) of the columns missing in some row of ``datasets`` (None entries
    skipped), for :meth:`~neumiss.network.NeuMissBlock.forward`'s ``missing``; None when
    the others would spare less than :data:`MIN_SPARED_PER_ROW` (all columns missing
    somewhere, a narrow table), or when a dataset is not in memory (streamed chunks)."""
    present = [data for data in datasets if data is not None]
    if not present or not all(isinstance(data, TrainingData) for data in present):
        return None
    seen = torch.stack([data.mask.any(dim=0) for data in present]).any(dim=0)  # (d,)
    spared = len(seen) * int((~seen).sum())
    return None if spared < MIN_SPARED_PER_ROW else seen.nonzero().squeeze(1)


#: :func:`two_valued_columns` names such columns only when there are this many at least.
MIN_TWO_VALUED_COLUMNS = 32


def two_valued_columns(*datasets: TrainingData | None) -> tuple | None:
    """The columns observed in every row of ``datasets`` (None entries skipped) that take
    two values at most there (one-hot categories, standardized), for
    :class:`~neumiss.network.StackedNetwork`'s sparse product: ``(columns, base,
    step)``, the indices (b,), each column's most frequent value and the other's
    difference from it (0 for a constant column), float32 (b,). None when fewer than
    :data:`MIN_TWO_VALUED_COLUMNS`, when a dataset is not in memory (streamed chunks),
    or off the CPU: the sparse product's row counts (``nonzero``) cannot be recorded in
    the CUDA graphs that replay a GPU's steps (:mod:`._graphs`), and a GPU has the
    arithmetic to spare."""
    present = [data for data in datasets if data is not None]
    if not present or not all(isinstance(data, TrainingData) and data.x.device.type == "cpu"
                              for data in present):
        return None
    complete = ~torch.stack([data.mask.any(dim=0) for data in present]).any(dim=0)
    low = torch.stack([data.x.min(dim=0).values for data in present]).min(dim=0).values
    high = torch.stack([data.x.max(dim=0).values for data in present]).max(dim=0).values
    two = complete & torch.stack([((data.x == low) | (data.x == high)).all(dim=0)
                                  for data in present]).all(dim=0)  # (d,)
    if int(two.sum()) < MIN_TWO_VALUED_COLUMNS:
        return None
    columns = two.nonzero().squeeze(1)
    low, high = low[columns], high[columns]
    n_high = sum((data.x[:, columns] == high).sum(dim=0) for data in present)
    more_high = 2 * n_high > sum(len(data) for data in present)
    base = torch.where(more_high, high, low)
    return columns, base, torch.where(more_high, low, high) - base


def stacked_shortcuts(*datasets: TrainingData | None) -> tuple:
    """``(missing, two_valued)`` of the rows of ``datasets``: :func:`missing_columns` and
    :func:`two_valued_columns`, the shortcuts :class:`~neumiss.network.StackedNetwork`
    takes."""
    return missing_columns(*datasets), two_valued_columns(*datasets)


def mean_loss(losses: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Mean of per-row ``losses`` (n,) times ``weight`` (n,) when given.

    Training weights are scaled to a mean of 1 over the training rows, so that
    a batch of zero-weight rows simply contributes no gradient.
    """
    return losses.mean() if weight is None else (losses * weight).mean()


def batch_loss(network: nn.Module, batch: TrainingData, loss_fn: LossFunction) -> torch.Tensor:
    """The training loss of a batch: the mean (case-weighted) loss of the network's output,
    or with a :class:`~neumiss.network.StackedNetwork` the mean over its members of each
    member's own loss (each member learns as if trained alone, not the combined output),
    each row weighted for each member by ``member_weight`` when given."""
    member_outputs = getattr(network, "member_outputs", None)
    if member_outputs is None:
        return mean_loss(loss_fn(network(batch.x, batch.mask), batch.target), batch.weight)
    outputs = member_outputs(batch.x, batch.mask)  # (K, batch, n_outputs)
    n_members = outputs.shape[0]
    losses = loss_fn(outputs.flatten(0, 1), batch.target.repeat(n_members))
    weight = None if batch.weight is None else batch.weight.repeat(n_members)
    if batch.member_weight is not None:  # (batch, K), laid out member by member
        members = batch.member_weight.T.reshape(-1)
        weight = members if weight is None else weight * members
    return mean_loss(losses, weight)


def _chunk_losses(
    network: nn.Module,
    data: TrainingData,
    loss_fn: LossFunction,
) -> Iterator[torch.Tensor]:
    """The losses of ``network`` (in eval mode) on the rows of ``data``, shape (rows,), per
    chunk of :func:`~neumiss.network._block.row_chunks`, in order. Callers disable grad.

    With ``data.held_out_by`` and a network of several members (``held_out_outputs``),
    each row is scored by the member that held it out (out-of-fold)."""
    network.eval()
    out_of_fold = data.held_out_by is not None and hasattr(network, "held_out_outputs")
    for rows in row_chunks(*data.x.shape, data.device):
        if out_of_fold:
            output = network.held_out_outputs(data.x[rows], data.mask[rows],
                                              data.held_out_by[rows])
        else:
            output = network(data.x[rows], data.mask[rows])
        yield loss_fn(output, data.target[rows])


@torch.no_grad()
def evaluate_loss(network: nn.Module, data: TrainingData, loss_fn: LossFunction) -> float:
    """Mean (case-weighted) loss of ``network`` over ``data`` (0 without rows), the rows'
    losses computed in chunks (:func:`row_losses`)."""
    if len(data) == 0:
        return 0.0
    losses = row_losses(network, data, loss_fn)
    if data.weight is None:
        return float(losses.mean())
    return float((losses * data.weight).sum()) / max(float(data.weight.sum()), 1e-300)


def validation_loss(losses: torch.Tensor, weight: torch.Tensor | None) -> float:
    """The loss :func:`evaluate_loss` reports, from the per-row ``losses`` (n,) of
    :func:`row_losses`: their mean, case-weighted by ``weight`` (n,) when given."""
    return float(losses.mean() if weight is None else (losses * weight).sum() / weight.sum())


@torch.no_grad()
def row_losses(network: nn.Module, data: TrainingData, loss_fn: LossFunction) -> torch.Tensor:
    """The loss of ``network`` on each row of ``data``, shape (n,), evaluated in chunks of
    rows (:func:`~neumiss.network._block.row_chunks`)."""
    return torch.cat(list(_chunk_losses(network, data, loss_fn)))
