"""Data-parallel training: one process per share of the rows, each taking local steps on
its own rows, their networks' weights averaged every few steps by ``torch.distributed``
(local SGD: torch's post-local-SGD hook on
:class:`~torch.nn.parallel.DistributedDataParallel` and its ``PeriodicModelAverager``).

Every process of an initialised process group (gloo on CPU) runs
:func:`~neumiss.network.train` on its own rows with the same network, seed and
settings. Four pieces make the processes take the same decisions:

- :func:`data_parallel` wraps the network in DDP, which starts every process from rank
  0's weights; its communication hook (``post_localSGD_hook``) leaves each step's
  gradients local, so that a step costs what it costs alone (nothing is exchanged by
  hand);
- :class:`ModelAveraging`, a callback of the training loop, averages the processes'
  weights every :data:`MODEL_AVERAGING_PERIOD` steps. Averaging the gradients of every
  step instead made a step of two processes twice as long as one alone, on this small a
  network (gloo's all-reduce costs about a step's arithmetic on a 2-core machine; 1e6
  rows, two processes: 0.80-0.85 of one process's time, against 0.68-0.72 averaging
  every fourth step, the gap to the Bayes rate within 0.001; results/README.md);
- :class:`EvenBatches` gives every process the same number of equal batches an epoch
  (the averaging's collective operations need each process to take every step);
- :func:`all_reduced_loss` averages the weights, then takes the validation loss over the
  validation rows of every process: early stopping, the learning-rate schedule and the
  weights kept then follow the same numbers and the same network everywhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (
    PostLocalSGDState,
    post_localSGD_hook,
)
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.nn.parallel import DistributedDataParallel

from ._callbacks import Callback
from ._data import LossFunction, TrainingData, evaluate_loss

#: The data-parallel processes average their weights every this many steps
#: (:class:`ModelAveraging`; measured with 4 and 8, see the module docstring).
MODEL_AVERAGING_PERIOD = 4


class _Outputs(nn.Module):
    """A network's combined output, or its members' (``members=True``), behind one
    ``forward``: the one call DDP watches."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, x: torch.Tensor, mask: torch.Tensor, members: bool = False) -> torch.Tensor:
        return self.network.member_outputs(x, mask) if members else self.network(x, mask)


class _DataParallel(DistributedDataParallel):
    """DDP over :class:`_Outputs`, with the network's ``member_outputs`` (the training
    loss of a :class:`~neumiss.network.StackedNetwork` reads them)."""

    def member_outputs(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self(x, mask, members=True)


def data_parallel(network: nn.Module) -> nn.Module:
    """``network`` (a :class:`~neumiss.network.StackedNetwork`, on CPU) wrapped for
    data-parallel training in the default process group: the same parameters, rank 0's
    values broadcast to every process now; each step's gradients stay local (torch's
    post-local-SGD hook from the first step, without its optional gradient exchange),
    the weights being averaged by :class:`ModelAveraging` and :func:`all_reduced_loss`.
    Buffers are not synchronised at each step (they are constants of the data: every
    process holds the same)."""
    wrapped = _DataParallel(_Outputs(network), **{_NO_BUFFER_SYNC: False})
    wrapped.register_comm_hook(PostLocalSGDState(None, None, start_localSGD_iter=0,
                                                 post_local_gradient_allreduce=False),
                               post_localSGD_hook)
    return wrapped


def _unwrapped(network: nn.Module) -> nn.Module:
    """``network``, unwrapped from :func:`data_parallel` if it is."""
    return network.module if isinstance(network, DistributedDataParallel) else network


def _trained(network: nn.Module) -> list[torch.Tensor]:
    """The parameters of ``network`` (unwrapped from :func:`data_parallel`) that train."""
    return [parameter for parameter in _unwrapped(network).parameters()
            if parameter.requires_grad]


class ModelAveraging(Callback):
    """The processes' weights averaged every ``period`` training steps (torch's
    ``PeriodicModelAverager`` in the default process group; each process calls it after
    each of its steps, as many as the others': :class:`EvenBatches`)."""

    def __init__(self, period: int = MODEL_AVERAGING_PERIOD) -> None:
        self.period = period
        self._averager, self._parameters = None, []

    def on_train_begin(self, network, config):
        self._averager = PeriodicModelAverager(period=self.period, warmup_steps=0)
        self._parameters = _trained(network)  # the same tensors all training long

    def on_batch_end(self, network):
        self._averager.average_parameters(self._parameters)

    def on_train_end(self, result):
        # the averager holds the process group: neither is kept past the training
        self._averager, self._parameters = None, []


#: DDP's switch of the buffers' synchronisation at each forward pass (renamed in torch 2.13).
_NO_BUFFER_SYNC = ("forward_sync_buffers" if "forward_sync_buffers" in
                   inspect.signature(DistributedDataParallel.__init__).parameters
                   else "broadcast_buffers")


@torch.no_grad()
def all_reduced_loss(network: nn.Module, data: TrainingData, loss_fn: LossFunction) -> float:
    """The mean (case-weighted) loss of ``network`` over the rows ``data`` of every process
    of the default group: :func:`~neumiss.network.evaluate_loss` of their union, once the
    processes' weights are averaged (local steps since the last average leave them
    apart; the weights kept are then the same everywhere). A network wrapped by
    :func:`data_parallel` is evaluated unwrapped: every process may evaluate a different
    number of chunks."""
    average_parameters(iter(_trained(network)), dist.group.WORLD)
    network = _unwrapped(network)
    size = float(len(data)) if data.weight is None else float(data.weight.sum())
    local = evaluate_loss(network, data, loss_fn) * size if size > 0 else 0.0
    totals = torch.tensor([local, size], dtype=torch.float64)
    dist.all_reduce(totals)
    return float(totals[0] / max(float(totals[1]), 1e-300))


class EvenBatches:
    """The training rows of one process, cut each epoch into as many batches as every
    other process's: the same ``n_rows`` rows of a new shuffle of ``data`` (the fewest
    any process holds, agreed on with the others when made), so that every process
    takes each step of the epoch. Rows beyond them sit out that epoch only.

    Parameters
    ----------
    data : TrainingData
        This process's training rows.
    """

    def __init__(self, data: TrainingData) -> None:
        fewest = torch.tensor([len(data)], dtype=torch.int64)
        dist.all_reduce(fewest, op=dist.ReduceOp.MIN)
        if int(fewest) == 0:
            raise ValueError("a process of the data-parallel fit has no training rows: give "
                             "every worker rows (fewer processes, or more partitions)")
        self.data, self.n_rows = data, int(fewest)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def device(self) -> torch.device:
        return self.data.device

    def batches(self, batch_size: int, generator: torch.Generator) -> Iterator[TrainingData]:
        order = torch.randperm(len(self.data), generator=generator)[: self.n_rows]
        shuffled = self.data.subset(order)
        for start in range(0, self.n_rows, batch_size):
            yield shuffled.rows(start, start + batch_size)
