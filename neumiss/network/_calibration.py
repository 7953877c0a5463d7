"""Temperature scaling of a classifier's logits on held-out rows (Guo et al., ICML 2017).

A network trained by log loss and stopped on validation is still overconfident where its
training rows are few for its capacity: its logits are too large. One scalar ``T`` divides
every logit of every member; it is fitted by minimising the validation log loss. A
network's ranking of the rows (hence ROC AUC) and each row's most probable class stay as
they were; an ensemble averages its members' probabilities, so they can move where the
members disagree (AUC within 0.0004 on the real-data suite's first seven binary tasks).
:func:`fit_temperature` fits it on the rows that validated the network (the out-of-fold
rows, each scored by the member that held it out, or the held-out rows, scored by the
combined members); :meth:`StackedNetwork.scale_outputs
<neumiss.network.StackedNetwork.scale_outputs>` folds ``1 / T`` into the heads' output
layers, so that every scorer of the network (``predict_proba``, ONNX, R) computes the
calibrated probabilities with no operator of its own.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from scipy.optimize import minimize_scalar

from ._data import LossFunction, TrainingData
from ._ensemble import combine_outputs

#: The temperatures :func:`fit_temperature` searches: from sharpening the logits 5 times
#: to flattening them 20 times (a network whose logits carry next to nothing).
TEMPERATURE_BOUNDS = (0.2, 20.0)
#: At most this many validation rows fit the temperature (a random subset beyond it).
TEMPERATURE_MAX_ROWS = 200_000


class Temperature(NamedTuple):
    """A fitted temperature and the validation loss (mean log loss) before and after it."""

    temperature: float
    val_loss_before: float
    val_loss: float

    def summary(self) -> dict[str, float]:
        return self._asdict()


@torch.no_grad()
def fit_temperature(network, data: TrainingData, loss_fn: LossFunction,
                    seed: int = 0) -> Temperature:
    """The temperature in :data:`TEMPERATURE_BOUNDS` minimising the mean (case-weighted)
    ``loss_fn`` of ``network``'s logits divided by it on the validation rows ``data``.

    ``network``: a :class:`~neumiss.network.StackedNetwork` (members' logits (K, n, C),
    divided before they are combined, as the folded network computes them; with
    ``data.held_out_by``, each row's held-out member alone) or any module mapping ``x``,
    ``mask`` (n, d) to logits (n, C). The temperature is 1 when it does not lower the
    loss. Bounded Brent search on ``log T``.
    """
    if len(data) > TEMPERATURE_MAX_ROWS:
        generator = torch.Generator().manual_seed(seed)
        keep = torch.randperm(len(data), generator=generator)[:TEMPERATURE_MAX_ROWS]
        data = data.subset(keep.to(data.device))
    network.eval()
    combine = getattr(network, "combine", None)
    if not hasattr(network, "member_outputs"):
        logits = network(data.x, data.mask).unsqueeze(0)  # (1, n, C)
    elif data.held_out_by is not None and network.n_members > 1:
        logits = network.held_out_outputs(data.x, data.mask, data.held_out_by).unsqueeze(0)
    else:
        logits = network.member_outputs(data.x, data.mask)  # (K, n, C)
    target = data.target

    def loss(log_temperature: float) -> float:
        scaled = logits / math.exp(log_temperature)
        output = scaled[0] if scaled.shape[0] == 1 else combine_outputs(scaled, combine)
        losses = loss_fn(output, target)
        if data.weight is None:
            return float(losses.mean())
        return float((losses * data.weight).sum() / data.weight.sum())

    before = loss(0.0)
    bounds = tuple(math.log(t) for t in TEMPERATURE_BOUNDS)
    found = minimize_scalar(loss, bounds=bounds, method="bounded",
                            options={"xatol": 1e-3})
    if not found.fun < before:
        return Temperature(1.0, before, before)
    return Temperature(float(math.exp(found.x)), before, float(found.fun))
