"""Prediction on an accelerator: the standardization on the device, one transfer each way.

On a GPU, the estimators' prediction (``BaseNeuMiss._apply``) sends the
encoded rows to the device once, as float64, and standardizes them there
(:func:`standardize`, the same float64 arithmetic as
:meth:`~neumiss.tables.Standardizer.transform`, so a feature in units
of 1e9 keeps its precision), runs the network in float32 over chunks of
:data:`DEVICE_PREDICT_CHUNK` rows and brings back only the outputs: no float32
inputs built on the host, no float64 round trip, one synchronization per chunk
(the range check) instead of a host copy.

The functions take any torch device, so the CPU tests check them against the
host path.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..tables import MAX_STANDARDIZED, Standardizer, describe_cells

#: Rows per forward pass on an accelerator: large enough to keep the card busy
#: (d = 50: 400 MB of float64 inputs per chunk), far below its memory.
DEVICE_PREDICT_CHUNK = 1 << 20


def standardize(preprocessor: Standardizer, X: torch.Tensor, *, row_offset: int = 0,
                columns=None) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`Standardizer.transform` on a float64 tensor, on its device.

    Parameters
    ----------
    preprocessor : Standardizer, fitted
    X : tensor of shape (n, d), float64, NaN = missing

    Returns
    -------
    x, mask : float32 tensors of shape (n, d), on ``X``'s device
        Equal to the host path's arrays.

    Raises
    ------
    ValueError
        As the host path: an observed value more than :data:`MAX_STANDARDIZED`
        deviations from its column's mean, naming rows and columns.
    """
    def constant(values):
        return torch.as_tensor(values, dtype=torch.float64, device=X.device)

    mask = torch.isnan(X)
    x = (X - constant(preprocessor.mean_)) / constant(preprocessor.scale_)
    if preprocessor.inverse_bound_.any():
        x = x / torch.hypot(torch.ones((), dtype=torch.float64, device=X.device),
                            x * constant(preprocessor.inverse_bound_))
    too_far = ~mask & ~(x.abs() <= MAX_STANDARDIZED)
    if bool(too_far.any()):
        raise ValueError(
            f"X has values too far from the training data for the network at "
            f"{describe_cells(too_far.cpu().numpy(), columns, row_offset)}: more than "
            f"{MAX_STANDARDIZED:g} standard deviations from the column's training mean"
        )
    x = torch.clamp(x, constant(preprocessor.lower_), constant(preprocessor.upper_))
    return x.masked_fill(mask, 0.0).float(), mask.float()


@torch.no_grad()
def apply_on_device(module: nn.Module, preprocessor: Standardizer, X: np.ndarray,
                    device: torch.device, *, columns=None,
                    chunk: int = DEVICE_PREDICT_CHUNK) -> np.ndarray:
    """``module``'s outputs for the encoded rows ``X``, computed on ``device``.

    Parameters
    ----------
    module : network (or block) taking ``(x, mask)``, on ``device``
    preprocessor : Standardizer, fitted
    X : ndarray of shape (n, d), float64, NaN = missing
    columns : list of str, optional
        Column names for error messages.

    Returns
    -------
    ndarray of shape (n, n_outputs), float64
    """
    outputs = []
    for start in range(0, X.shape[0], chunk):
        rows = torch.from_numpy(np.ascontiguousarray(X[start : start + chunk])).to(device)
        x, mask = standardize(preprocessor, rows, row_offset=start, columns=columns)
        outputs.append(module(x, mask))
    return torch.cat(outputs).cpu().numpy().astype(np.float64)
