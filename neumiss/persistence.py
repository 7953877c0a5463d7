"""Saving and loading fitted NeuMiss estimators without pickle.

A saved file is a ``torch.save`` archive of plain containers: the estimator's
parameters, its fitted attributes (arrays stored as lists with their dtype)
and the network's weights. :func:`load` reads it with
``torch.load(weights_only=True)``, which refuses anything else, so a model
file can be loaded safely, on a machine without GPU and without the data.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from . import __version__

FORMAT = "neumiss-estimator"
FORMAT_VERSION = 1


def _encode(value):
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
        return {k: _decode(v) for k, v in value.items()}
    return value


def save_estimator(estimator, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path``. See :func:`load`."""
    params = estimator.get_params(deep=False)
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


def load(path: str | os.PathLike):
    """Load an estimator written by ``NeuMissRegressor.save`` / ``NeuMissClassifier.save``.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    NeuMissRegressor or NeuMissClassifier, fitted, on CPU.

    Raises
    ------
    ValueError
        If the file is not a model saved by this package.
    """
    from .estimators import NeuMissClassifier, NeuMissRegressor

    classes = {cls.__name__: cls for cls in (NeuMissRegressor, NeuMissClassifier)}
    try:
        payload = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # torch raises many kinds for foreign files
        raise ValueError(f"{path!s} is not a neumiss model file ({type(exc).__name__})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path!s} is not a neumiss model file (no '{FORMAT}' header)")
    if payload.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path!s} was written by a newer neumiss ({payload.get('neumiss_version')}); "
            f"this is {__version__}: upgrade neumiss to load it"
        )
    cls = classes.get(payload["class"])
    if cls is None:
        raise ValueError(f"{path!s} holds an unknown estimator class {payload['class']!r}")
    params = dict(payload["params"])
    params["device"] = "cpu"
    estimator = cls(**params)
    for name, value in payload["attributes"].items():
        setattr(estimator, name, _decode(value))
    network = estimator._fitted_network_shell()
    network.load_state_dict(payload["state_dict"])
    network.eval()
    estimator.network_ = network
    return estimator
