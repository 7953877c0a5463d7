"""Saving and loading fitted NeuMiss estimators without pickle.

A saved file is a ``torch.save`` archive of plain containers: the estimator's
parameters, its fitted attributes (arrays stored as lists with their dtype,
the preprocessing as its state) and the network's weights. :func:`load` reads
it with ``torch.load(weights_only=True)``, which refuses anything else, so a
model file can be loaded safely, on a machine without GPU and without the data.

This module sits below the estimators (``neumiss.load`` is
:func:`neumiss.estimators.load`, which passes it the classes it may rebuild):
it knows an estimator only through ``get_params``, its fitted attributes
ending in ``_``, ``network_`` and ``_build_fitted_network()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import torch

from ._version import __version__
from .encoding import TableEncoder
from .preprocessing import Standardizer

FORMAT = "neumiss-estimator"
#: 2: ``encoder_`` (the table's encoding) and ``preprocessor_`` (its standardization)
#: are stored (1 had ``x_mean_`` and ``x_scale_``).
FORMAT_VERSION = 2


def _encode(value):
    if isinstance(value, Standardizer):
        return {"__standardizer__": _encode(value.get_state())}
    if isinstance(value, TableEncoder):
        return {"__table_encoder__": _encode(value.get_state())}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value):
    if isinstance(value, dict):
        if "__ndarray__" in value:
            dtype = np.dtype(value["dtype"])
            return np.asarray(value["__ndarray__"], dtype=dtype)
        if "__standardizer__" in value:
            return Standardizer.from_state(_decode(value["__standardizer__"]))
        if "__table_encoder__" in value:
            return TableEncoder.from_state(_decode(value["__table_encoder__"]))
        return {k: _decode(v) for k, v in value.items()}
    return value


def save_estimator(estimator, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path``. See :func:`load_estimator`."""
    params = {k: _encode(v) for k, v in estimator.get_params(deep=False).items()}
    if not isinstance(params.get("random_state"), (int, type(None))):
        params["random_state"] = None  # a RandomState object is not portable
    attributes = {
        k: _encode(v)
        for k, v in vars(estimator).items()
        if k.endswith("_") and not k.startswith("_") and k != "network_"
    }
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "neumiss_version": __version__,
        "class": type(estimator).__name__,
        "params": params,
        "attributes": attributes,
        "state_dict": {
            k: v.detach().cpu().clone() for k, v in estimator.network_.state_dict().items()
        },
    }
    torch.save(payload, os.fspath(path))


def load_estimator(path: str | os.PathLike, classes: Mapping[str, type]):
    """Load an estimator written by :func:`save_estimator`.

    Parameters
    ----------
    path : str or path-like
    classes : mapping
        Class name -> class, the estimators the file may hold.

    Returns
    -------
    The fitted estimator, on CPU.

    Raises
    ------
    ValueError
        If the file is not a model saved by this package.
    """
    try:
        payload = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # torch raises many kinds for foreign files
        raise ValueError(f"{path!s} is not a neumiss model file ({type(exc).__name__})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path!s} is not a neumiss model file (no '{FORMAT}' header)")
    version = payload.get("format_version", 0)
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{path!s} was written by a newer neumiss ({payload.get('neumiss_version')}); "
            f"this is {__version__}: upgrade neumiss to load it"
        )
    if version < FORMAT_VERSION:
        raise ValueError(
            f"{path!s} has model format {version} (neumiss {payload.get('neumiss_version')}); "
            f"this neumiss reads format {FORMAT_VERSION}: refit and save the model again"
        )
    cls = classes.get(payload["class"])
    if cls is None:
        raise ValueError(f"{path!s} holds an unknown estimator class {payload['class']!r}")
    params = dict(payload["params"])
    params["device"] = "cpu"
    estimator = cls(**params)
    for name, value in payload["attributes"].items():
        setattr(estimator, name, _decode(value))
    network = estimator._build_fitted_network()
    network.load_state_dict(payload["state_dict"])
    network.eval()
    estimator.network_ = network
    return estimator
