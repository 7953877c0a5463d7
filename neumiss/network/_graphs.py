"""Training steps replayed from a CUDA graph: one launch per step instead of hundreds.

A training step of a small network on a GPU is bound by kernel launches, not by
arithmetic: an eager step of a depth-4 NeuMiss network launches a few hundred kernels
of microseconds each (on an H200, n = 1e6, d = 50: the defaults' fit 19.6 s with eager
steps, 10.4 s replayed; results/README.md, "On a GPU"). :class:`GraphedSteps` records
one step (forward, backward and the optimizer's update) once in a
:class:`torch.cuda.CUDAGraph` and replays it for every full batch, copying each batch
into the graph's static input tensors.

The replayed step is the eager step: the same kernels on the same tensors, so the
weights follow the same path (up to the nondeterminism of the GPU's reductions). The
learning rate is a number recorded in the graph, so a graph serves one optimizer at one
learning rate; the plateau schedule and the divergence guard change them between
epochs, and the next step then records a new graph. A batch of another size (an
epoch's last, partial batch) takes an eager step.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ._data import LossFunction, TrainingData, batch_loss
from ._optimizer import Steps

#: Whether training on a CUDA device replays its steps from a graph (a switch for
#: measurements: ``benchmarks/gpu_check.py`` times both).
USE_CUDA_GRAPHS = True
#: Full batches an epoch needs for graphs to be used: recording a step costs about as
#: much as a few eager steps (and its warm-up steps are eager), so shorter epochs gain
#: little (chosen, not measured: the fits measured on a GPU had 55 steps an epoch).
MIN_GRAPH_STEPS = 8
#: Eager steps on a side stream before each recording (lazy initializations of
#: cuBLAS and autograd must not happen while a graph records, torch's CUDA-graph notes).
WARMUP_STEPS = 2


def eager_step(network: nn.Module, optimizer: Steps, loss_fn: LossFunction,
               batch: TrainingData) -> torch.Tensor:
    """One optimizer step on ``batch``; returns the batch's loss (a 0-dim tensor)."""
    optimizer.zero_grad()
    loss = batch_loss(network, batch, loss_fn)
    loss.backward()
    optimizer.step()
    return loss.detach()


def graphs_pay(data, batch_size: int) -> bool:
    """Whether :class:`GraphedSteps` should train on ``data`` in batches of
    ``batch_size`` rows: rows in memory on a CUDA device, at least
    :data:`MIN_GRAPH_STEPS` full batches an epoch, and :data:`USE_CUDA_GRAPHS`."""
    return (USE_CUDA_GRAPHS and isinstance(data, TrainingData) and data.device.type == "cuda"
            and len(data) // batch_size >= MIN_GRAPH_STEPS)


class _Recording:
    """One step recorded for batches shaped as ``batch`` (the full batches of
    :class:`GraphedSteps`), under ``optimizer`` at its current learning rate. Its static
    inputs are copies of ``batch``'s tensors."""

    def __init__(self, network: nn.Module, optimizer: Steps, loss_fn: LossFunction,
                 batch: TrainingData) -> None:
        self.optimizer, self.lr = optimizer, optimizer.lr
        self.inputs = dataclasses.replace(batch, **{
            name: value.clone() for name, value in _tensors(batch)})
        self.graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad()  # the recorded backward writes the gradients, not adds to them
        with torch.cuda.graph(self.graph):
            loss = batch_loss(network, self.inputs, loss_fn)
            loss.backward()
            optimizer.step()
        self.loss = loss.detach()  # the graph's output: each replay writes the batch's loss

    def serves(self, optimizer: Steps) -> bool:
        """Whether this recording is the step of ``optimizer`` at its learning rate now."""
        return self.optimizer is optimizer and self.lr == optimizer.lr

    def replay(self, batch: TrainingData) -> torch.Tensor:
        """The recorded step on ``batch``; returns its loss (a 0-dim tensor that the next
        replay overwrites)."""
        for name, value in _tensors(batch):
            getattr(self.inputs, name).copy_(value)
        self.graph.replay()
        return self.loss


def _tensors(batch: TrainingData):
    """``(name, tensor)`` of the fields of ``batch`` that are set."""
    return [(field.name, getattr(batch, field.name)) for field in dataclasses.fields(batch)
            if getattr(batch, field.name) is not None]


class GraphedSteps:
    """The optimizer steps of one training on a CUDA device, replayed from graphs.

    :meth:`step` takes the place of :func:`eager_step` for the batches of
    ``batch_size`` rows: the first steps under an optimizer and learning rate are
    eager (:data:`WARMUP_STEPS`, on a side stream), the next records the step and every
    later one replays it. Any other batch takes an eager step.
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._recording: _Recording | None = None
        self._warm = 0

    def step(self, network: nn.Module, optimizer: Steps, loss_fn: LossFunction,
             batch: TrainingData) -> torch.Tensor:
        """One optimizer step on ``batch``; returns its loss (a 0-dim tensor)."""
        if len(batch) != self.batch_size:
            return eager_step(network, optimizer, loss_fn, batch)
        if self._recording is not None and self._recording.serves(optimizer):
            return self._recording.replay(batch)
        self._recording = None  # its memory goes back before the next recording
        with torch.cuda.device(batch.x.device):  # streams and graphs of the rows' card
            if self._warm < WARMUP_STEPS:
                self._warm += 1
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    loss = eager_step(network, optimizer, loss_fn, batch)
                torch.cuda.current_stream().wait_stream(side)
                return loss
            self._warm = 0
            self._recording = _Recording(network, optimizer, loss_fn, batch)
        return self._recording.replay(batch)
