"""Saving and loading fitted NeuMiss estimators without pickle.

A saved file is a ``torch.save`` archive of plain containers: the estimator's
parameters, its fitted attributes (arrays stored as lists with their dtype,
the preprocessing as its state), the network's weights, and a SHA-256 digest
of all of them. :func:`load_estimator` reads it with
``torch.load(weights_only=True)``, which refuses anything else, so a model
file can be loaded safely, on a machine without GPU and without the data; it
then checks the digest (a damaged file, e.g. flipped bytes inside a tensor,
is refused) and the structure (parameters, attributes, tensor shapes): every
problem is a ``ValueError`` naming the file and what is wrong.

:func:`load` (``neumiss.load``) rebuilds only the classes of :data:`MODEL_CLASSES`.
The format knows an estimator only through ``get_params``, its fitted attributes
ending in ``_``, ``network_`` and ``_build_fitted_network()``. A model that
holds other estimators (:class:`~neumiss.intervals.ConformalRegressor` and
:class:`~neumiss.intervals.ConformalClassifier`: the base model as parameter and
fitted attribute, and a cross-conformal fit's fold models as a list) stores each as a nested table
of the same kind, under the file's one digest; such a class names the fitted
attributes it needs in ``_saved_attributes``. The training callbacks are not saved
(:data:`NOT_SAVED`).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from .._version import __version__
from ..checks import check_params
from ..tables import Standardizer, TableEncoder

FORMAT = "neumiss-estimator"
#: 6: the ``mask_skip`` parameter (a linear term of the mask in the head) and the
#: standardizer's clipping bounds (``lower``, ``upper``).
#: 4: NeuMiss+MLP networks have a linear ``skip`` around the MLP head.
#: 3: a SHA-256 digest of the payload (``sha256``), checked at load.
#: 2: ``encoder_`` (the table's encoding) and ``preprocessor_`` (its standardization)
#: are stored (1 had ``x_mean_`` and ``x_scale_``).
FORMAT_VERSION = 6

#: Parameters added within :data:`FORMAT_VERSION`, and the value for which a file written
#: before them (without them) holds the model it held.
LATER_PARAMETERS = {"spline": False, "log_target": False, "integer_levels": False,
                    "calibration": "none", "callbacks": None, "cv": None,
                    "class_weight": None}

#: What a model file never holds: the network (its weights are the file's ``state_dict``)
#: and the callbacks of the fit (objects of the user's classes, which loading could not
#: build without running their code): a loaded model has ``callbacks=None``.
NOT_SAVED = ("network_", "callbacks_")

#: Names a saved fitted attribute may have: public, ending with ``_``.
_ATTRIBUTE_NAME = re.compile(r"[a-z][A-Za-z0-9_]*_")  # start_C_ as scikit-learn's C_
#: Fitted attributes every saved estimator has.
REQUIRED_ATTRIBUTES = (
    "encoder_", "preprocessor_", "best_depth_", "weight_sharing_", "mlp_depth_",
    "n_features_in_",
)


class _Damaged(ValueError):
    """A model file whose contents are not what :func:`save_estimator` writes."""


class _Unreadable(ValueError):
    """Not a neumiss model file, or one of another format version."""


def _encode(value):
    if callable(getattr(value, "get_params", None)):
        return {"__estimator__": _body(value)}
    if isinstance(value, pd.DataFrame):
        return {"__dataframe__": {
            "columns": [str(c) for c in value.columns],
            "dtypes": [str(t) for t in value.dtypes],
            "values": [_encode([None if pd.isna(v) else v for v in value[c].to_numpy(dtype=object)])
                       for c in value.columns],
            "categories": [_encode(value[c].cat.categories.to_numpy(dtype=object))
                           if isinstance(value[c].dtype, pd.CategoricalDtype) else None
                           for c in value.columns],
        }}
    if isinstance(value, Standardizer):
        return {"__standardizer__": _encode(value.get_state())}
    if isinstance(value, TableEncoder):
        return {"__table_encoder__": _encode(value.get_state())}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": _encode(value.tolist()), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {_encode(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value, classes: Mapping[str, type]):
    if isinstance(value, dict):
        if "__estimator__" in value:
            return _rebuild(value["__estimator__"], classes)
        if "__dataframe__" in value:
            return _frame(_decode(value["__dataframe__"], classes))
        if "__ndarray__" in value:
            dtype = np.dtype(value["dtype"])
            if dtype.kind not in "biufUSO":
                raise _Damaged(f"an array of unsupported dtype {dtype.str!r}")
            return np.asarray(value["__ndarray__"], dtype=dtype)
        if "__standardizer__" in value:
            return Standardizer.from_state(_decode(value["__standardizer__"], classes))
        if "__table_encoder__" in value:
            return TableEncoder.from_state(_decode(value["__table_encoder__"], classes))
        return {k: _decode(v, classes) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, classes) for v in value]
    return value


def _frame(table: dict) -> pd.DataFrame:
    """The DataFrame of an encoded one: each column with its dtype (categories kept)."""
    columns = {}
    for name, dtype, values, categories in zip(
        table["columns"], table["dtypes"], table["values"], table["categories"], strict=True
    ):
        if categories is not None:
            columns[name] = pd.Categorical(values, categories=categories)
        else:
            columns[name] = pd.Series(values, dtype=object).astype(dtype)
    return pd.DataFrame(columns)


def _update(digest, tag: bytes, data: bytes) -> None:
    digest.update(tag + len(data).to_bytes(8, "little") + data)


def _feed(digest, value) -> None:
    """Feed one value of the payload into ``digest`` in a canonical, typed form."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        _update(digest, b"T", f"{tensor.dtype}{tuple(tensor.shape)}".encode())
        _update(digest, b"t", tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
                if tensor.numel() else b"")
    elif isinstance(value, Mapping):
        _update(digest, b"D", str(len(value)).encode())
        for key in sorted(value, key=lambda k: (type(k).__name__, repr(k))):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        _update(digest, b"L", str(len(value)).encode())
        for item in value:
            _feed(digest, item)
    elif value is None:
        _update(digest, b"N", b"")
    elif isinstance(value, bool):
        _update(digest, b"B", b"1" if value else b"0")
    elif isinstance(value, int):
        _update(digest, b"I", str(value).encode())
    elif isinstance(value, float):
        _update(digest, b"F", value.hex().encode())
    elif isinstance(value, str):
        _update(digest, b"S", value.encode("utf-8", "surrogatepass"))
    else:
        raise TypeError(f"cannot save a value of type {type(value).__name__}")


def payload_digest(payload: Mapping) -> str:
    """SHA-256 (hex) of a canonical serialization of ``payload`` without its ``sha256`` key.

    Canonical: mapping keys sorted, every value tagged with its type and length,
    floats by their exact hexadecimal form, tensors by dtype, shape and bytes;
    so the digest depends only on the contents, not on how torch laid out the file.
    """
    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in payload.items() if k != "sha256"})
    return digest.hexdigest()


def _body(estimator) -> dict:
    """An estimator as plain containers: its class, parameters, fitted attributes
    and network weights (empty when it has no network)."""
    params = {k: None if k == "callbacks" else _encode(v)  # callbacks: NOT_SAVED
              for k, v in estimator.get_params(deep=False).items()}
    if not isinstance(params.get("random_state"), (int, type(None))):
        params["random_state"] = None  # a RandomState object is not portable
    attributes = {
        k: _encode(v)
        for k, v in vars(estimator).items()
        if k.endswith("_") and not k.startswith("_") and k not in NOT_SAVED
    }
    network = getattr(estimator, "network_", None)
    return {
        "class": type(estimator).__name__,
        "params": params,
        "attributes": attributes,
        "state_dict": {} if network is None else {
            k: v.detach().cpu().clone() for k, v in network.state_dict().items()
        },
    }


def save_estimator(estimator, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path``. See :func:`load_estimator`."""
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "neumiss_version": __version__,
        **_body(estimator),
    }
    payload["sha256"] = payload_digest(payload)
    torch.save(payload, os.fspath(path))


def _check_header(payload) -> None:
    """The format, its version and the digest; raises :class:`_Unreadable` or :class:`_Damaged`."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise _Unreadable(f"is not a neumiss model file (no '{FORMAT}' header)")
    version = payload.get("format_version")
    if type(version) is not int:
        raise _Damaged(f"has format_version {version!r}, not an integer")
    written_by = payload.get("neumiss_version")
    if version > FORMAT_VERSION:
        raise _Unreadable(
            f"was written by a newer neumiss ({written_by}); this is {__version__}: "
            "upgrade neumiss to load it"
        )
    if version < FORMAT_VERSION:
        raise _Unreadable(
            f"has model format {version} (neumiss {written_by}); this neumiss reads format "
            f"{FORMAT_VERSION}: refit and save the model again"
        )
    stored = payload.get("sha256")
    if not isinstance(stored, str):
        raise _Damaged("has no integrity digest ('sha256')")
    try:
        actual = payload_digest(payload)
    except TypeError as exc:
        raise _Damaged(f"holds a value that save() never writes ({exc})") from None
    if actual != stored:
        raise _Damaged(
            "failed its integrity check: the contents do not match the stored SHA-256 "
            "(the file was damaged or modified after saving)"
        )


def _rebuild(payload, classes: Mapping[str, type]):
    """The estimator of a checked payload; raises :class:`_Damaged` naming the problem."""
    cls = _model_class(payload, classes)
    estimator = _unfitted(cls, payload["class"], payload["params"], classes)
    attributes = payload["attributes"]
    bad_names = [k for k in attributes if not isinstance(k, str) or not _ATTRIBUTE_NAME.fullmatch(k)
                 or k in NOT_SAVED]
    if bad_names:
        raise _Damaged(f"has attributes that save() never writes: {bad_names[:5]}")
    if not attributes:
        return estimator  # an unfitted estimator (a parameter of another)
    if not hasattr(cls, "_build_fitted_network"):
        return _rebuild_holder(estimator, attributes, payload["state_dict"], classes)
    # The estimators' own: a regressor's target scaling, a classifier's labels.
    own = ("y_mean_", "y_scale_") if getattr(cls, "_y_numeric", None) else ("classes_",)
    absent = [k for k in (*REQUIRED_ATTRIBUTES, *own) if k not in attributes]
    if absent:
        raise _Damaged(f"lacks the fitted attributes {absent}")
    for key, value in attributes.items():
        setattr(estimator, key, _decode(value, classes))
    if "mask_skip_" not in attributes:  # written before mask_skip="auto": the parameter says
        estimator.mask_skip_ = bool(estimator.mask_skip)
    if "chebyshev_result_" not in attributes:  # written before the Chebyshev start existed
        estimator.chebyshev_result_ = None
    if "identity_results_" not in attributes:  # written before the chain from the identity
        estimator.identity_results_ = None
    if getattr(cls, "_y_numeric", None) and "log_target_" not in attributes:
        estimator.log_target_ = False  # written before log_target existed
    if "mlp_width_" not in attributes:  # written when None meant the encoded columns
        estimator.mlp_width_ = (estimator.encoder_.n_features_out_ if estimator.mlp_width is None
                                else int(estimator.mlp_width))
    if "depth_starts_" not in attributes:  # written before depth="auto" screened its depths
        estimator.depth_starts_ = None
    if "mlp_weight_" not in attributes:  # written before the heads were blended
        estimator.mlp_weight_ = 1.0 if estimator.mlp_depth_ else 0.0
    if "spline_" not in attributes:  # written before the spline term existed
        estimator.spline_, estimator.spline_ramps_ = False, 0
    if "classes_" in attributes and "start_C_" not in attributes:  # written when it was 1
        estimator.start_C_ = 1.0
    _check_preprocessing(estimator)
    estimator.network_ = _network(estimator, payload["state_dict"])
    return estimator


def _model_class(payload, classes: Mapping[str, type]) -> type:
    """The class a payload names, once its tables are there."""
    name = payload.get("class")
    if not isinstance(name, str):
        raise _Damaged("has no estimator class ('class' key)")
    cls = classes.get(name)
    if cls is None:
        raise _Damaged(f"holds an unknown estimator class {name!r}")
    for key in ("params", "attributes", "state_dict"):
        if not isinstance(payload.get(key), dict):
            raise _Damaged(f"has no {key!r} table")
    return cls


def _unfitted(cls: type, name: str, params: dict, classes: Mapping[str, type]):
    """A ``cls`` (saved as ``name``) with the saved ``params`` (exactly its parameters,
    valid), on CPU."""
    expected = set(cls._get_param_names())
    # parameters added within this format: older files built the models they default to
    params = {**{k: v for k, v in LATER_PARAMETERS.items() if k in expected}, **params}
    unknown, missing = sorted(set(params) - expected, key=str), sorted(expected - set(params))
    if unknown:
        raise _Damaged(f"has unknown parameters {unknown} for {name}")
    if missing:
        raise _Damaged(f"lacks the parameters {missing} of {name}")
    params = {k: _decode(v, classes) for k, v in params.items()}
    if "device" in params:
        params["device"] = "cpu"
    estimator = cls(**params)
    constraints = getattr(cls, "_parameter_constraints", None)
    if constraints is not None:
        try:
            check_params(name, params, constraints)
        except ValueError as exc:
            raise _Damaged(f"has an invalid parameter: {exc}") from None
    return estimator


def _network(estimator, state):
    """The fitted network of ``estimator`` with the saved weights ``state``, checked."""
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise _Damaged("has a 'state_dict' that is not a table of named tensors")
    bad_tensors = [k for k, v in state.items()
                   if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad_tensors:
        raise _Damaged(f"has non-finite weights in {bad_tensors[:5]}")
    network = estimator._build_fitted_network()
    expected_shapes = {k: tuple(v.shape) for k, v in network.state_dict().items()}
    missing = sorted(set(expected_shapes) - set(state))
    unexpected = sorted(set(state) - set(expected_shapes))
    if missing or unexpected:
        raise _Damaged(
            f"has weights that do not fit the network: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    wrong = [f"{k} {tuple(state[k].shape)} instead of {shape}"
             for k, shape in expected_shapes.items() if tuple(state[k].shape) != shape]
    if wrong:
        raise _Damaged(f"has weights of the wrong shape: {'; '.join(wrong[:3])}")
    network.load_state_dict(state)
    network.eval()
    return network


def _rebuild_holder(estimator, attributes, state, classes):
    """A model without network of its own (it holds fitted estimators), from its attributes."""
    if state:
        raise _Damaged(f"has weights for {type(estimator).__name__}, which has no network")
    required = getattr(type(estimator), "_saved_attributes", ())
    absent = [k for k in required if k not in attributes]
    if absent:
        raise _Damaged(f"lacks the fitted attributes {absent}")
    for key, value in attributes.items():
        setattr(estimator, key, _decode(value, classes))
    return estimator


def _check_preprocessing(estimator) -> None:
    """The encoder and the standardizer agree with each other and are usable."""
    encoder, pre = estimator.encoder_, estimator.preprocessor_
    if not isinstance(encoder, TableEncoder) or not isinstance(pre, Standardizer):
        raise _Damaged("has an 'encoder_' or 'preprocessor_' of the wrong kind")
    width = encoder.n_features_out_
    for label in ("mean_", "scale_", "inverse_bound_", "lower_", "upper_"):
        values = getattr(pre, label)
        if values.shape != (width,) or not np.isfinite(values).all():
            raise _Damaged(
                f"has a preprocessor_.{label} of shape {values.shape} or with non-finite "
                f"values; the encoder gives {width} columns"
            )
    if not (pre.scale_ > 0).all():
        raise _Damaged("has a preprocessor_.scale_ that is not positive")
    n_features = estimator.n_features_in_
    if type(n_features) is not int or n_features != len(encoder.columns_):
        raise _Damaged(
            f"has n_features_in_ = {n_features!r} but an encoder of {len(encoder.columns_)} "
            "columns"
        )
    for label in ("y_mean_", "y_scale_"):
        value = getattr(estimator, label, 1.0)
        if not isinstance(value, float) or not math.isfinite(value):
            raise _Damaged(f"has {label} = {value!r}, not a finite number")
    if getattr(estimator, "y_scale_", 1.0) <= 0:
        raise _Damaged(f"has y_scale_ = {estimator.y_scale_!r}, not positive")
    if not isinstance(getattr(estimator, "log_target_", False), bool):
        raise _Damaged(f"has log_target_ = {estimator.log_target_!r}, not True or False")


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
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a model saved by this package and format, or is
        damaged: the message names the file and what is wrong (failed integrity
        check, unknown class or parameters, missing attributes, weights of the
        wrong shape, ...).
    """
    try:
        payload = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # torch raises many kinds for foreign files
        raise ValueError(f"{path!s} is not a neumiss model file ({type(exc).__name__})") from exc
    try:
        _check_header(payload)
        if not payload.get("attributes"):
            raise _Damaged("holds no fitted attributes")
        return _rebuild(payload, classes)
    except _Unreadable as exc:
        raise ValueError(f"{path!s} {exc}") from None
    except _Damaged as exc:
        raise ValueError(f"{path!s}: damaged model file: it {exc}") from None
    except Exception as exc:  # any other inconsistency of a crafted file
        raise ValueError(
            f"{path!s}: damaged model file: {type(exc).__name__}: {exc}"
        ) from None


#: The classes a model file may hold: class name -> the public module that defines it.
#: Resolved by name when a file is read, as pickle resolves a class by its module, but
#: only for these classes.
MODEL_CLASSES = {
    "NeuMissRegressor": "neumiss.estimators",
    "NeuMissQuantileRegressor": "neumiss.estimators",
    "NeuMissClassifier": "neumiss.estimators",
    "ConformalRegressor": "neumiss.intervals",
    "ConformalClassifier": "neumiss.intervals",
}


class _ModelClasses(Mapping):
    """:data:`MODEL_CLASSES` as a mapping name -> class, each imported when first read."""

    def __getitem__(self, name):
        return getattr(importlib.import_module(MODEL_CLASSES[name]), name)

    def __iter__(self):
        return iter(MODEL_CLASSES)

    def __len__(self):
        return len(MODEL_CLASSES)


def load(path):
    """Load a model written by the ``save`` method of a NeuMiss estimator, a
    :class:`~neumiss.intervals.ConformalRegressor` or a
    :class:`~neumiss.intervals.ConformalClassifier` (this is :func:`neumiss.load`).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    NeuMissRegressor, NeuMissQuantileRegressor, NeuMissClassifier,
    ConformalRegressor or ConformalClassifier, fitted, on CPU.

    Raises
    ------
    ValueError
        If the file is not a model saved by this version's format, or is
        damaged or modified (failed integrity check, unknown parameters,
        missing attributes, weights of the wrong shape, ...): the message names
        the file and the problem.
    """
    return load_estimator(path, _ModelClasses())
