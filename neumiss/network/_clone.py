"""Copies of modules: what ``copy.deepcopy`` makes of an ``nn.Module``, in less time.

``copy.deepcopy`` copies a module as it copies any object: its ``__getstate__`` (the
``__dict__``) deep-copied value by value, then ``__setstate__`` on a new instance. Most of
its time goes to the many small containers every module holds, its hooks' empty
``OrderedDict``\\ s above all, each rebuilt through ``__reduce_ex__``: about 2 ms a network
of a few layers, which the depth search, the stacked members and every ``predict`` pay
many times over. :func:`clone_module` follows the same steps but rebuilds those
containers directly when everything in them is immutable, and reaches submodules by
recursion; every other value (parameters, buffers, generators, ...) still goes through
``copy.deepcopy`` with the same memo. The copy is the one ``copy.deepcopy`` makes: the
same classes, attributes, tensor values and ``requires_grad`` flags, nothing mutable
shared with the original, an object reached twice copied once.
"""

from __future__ import annotations

import copy
import itertools
import threading
import types
import weakref
from collections import OrderedDict
from typing import Any, TypeVar

import torch
from torch import nn

ModuleT = TypeVar("ModuleT", bound=nn.Module)

#: Values ``copy.deepcopy`` returns as they are (its atomic types, and torch's dtypes,
#: which it returns as they are through their ``__reduce__``).
_ATOMIC = frozenset({
    type(None), int, float, bool, complex, str, bytes, type, range, property,
    types.BuiltinFunctionType, types.FunctionType, types.CodeType, weakref.ref,
    torch.dtype,
})
#: Containers rebuilt by their type's constructor when every item is atomic.
_CONTAINERS = frozenset({dict, OrderedDict, set, frozenset, list, tuple})


def clone_module(module: ModuleT, memo: dict[int, Any] | None = None) -> ModuleT:
    """``copy.deepcopy(module, memo)``, faster (see the module docstring).

    Parameters
    ----------
    module : nn.Module
    memo : dict, optional
        ``copy.deepcopy``'s memo: objects already copied, by ``id``.

    Returns
    -------
    nn.Module of the same class: a copy sharing nothing mutable with ``module``.
    """
    memo = {} if memo is None else memo
    if id(module) in memo:
        return memo[id(module)]
    cls = type(module)
    if not _copies_by_state(cls):  # a class with its own copy protocol: as deepcopy does
        return copy.deepcopy(module, memo)
    clone = _remember(module, cls.__new__(cls), memo)
    state = {name: _copy_value(value, memo) for name, value in module.__getstate__().items()}
    clone.__setstate__(state)
    return clone


def _copy_value(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)``: modules by :func:`clone_module`, containers of
    atomic values by their constructor (dicts also when they map to modules: the
    ``_modules`` of a module), anything else by ``copy.deepcopy``."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if isinstance(value, nn.Module):
        return clone_module(value, memo)
    if kind not in _CONTAINERS or id(value) in memo:
        return copy.deepcopy(value, memo)
    if not value:  # a module's hooks, mostly: a new empty one (not recorded in the memo)
        return value if kind in (tuple, frozenset) else kind()
    if kind in (dict, OrderedDict) and all(type(key) in _ATOMIC for key in value):
        copied = _remember(value, kind(), memo)  # before its items: as deepcopy, for cycles
        for key, item in value.items():
            copied[key] = _copy_value(item, memo)
        return copied
    if kind not in (dict, OrderedDict) and all(type(item) in _ATOMIC for item in value):
        return value if kind in (tuple, frozenset) else _remember(value, kind(value), memo)
    return copy.deepcopy(value, memo)


def _remember(value: Any, copied: Any, memo: dict[int, Any]) -> Any:
    """``copied``, recorded in ``memo`` as ``value``'s copy (``value`` kept alive there)."""
    memo[id(value)] = copied
    memo.setdefault(id(memo), []).append(value)
    return copied


def _copies_by_state(cls: type) -> bool:
    """Whether ``copy.deepcopy`` copies instances of ``cls`` through ``__getstate__`` and
    ``__setstate__`` alone (no ``__deepcopy__``, ``__reduce__`` or ``__reduce_ex__`` of its
    own), the protocol :func:`clone_module` reproduces."""
    return (getattr(cls, "__deepcopy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__)


#: :func:`float64_copy`'s copies, by original module (an entry goes with its module): the
#: module's tensors (held, so that their ids stay theirs), their memory and versions, the copy.
_FLOAT64_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FLOAT64_LOCK = threading.Lock()
#: Modules of more elements (parameters and buffers) than this are copied at every call
#: rather than kept: 8 MiB in float64, where the copy's time is small beside the products'.
FLOAT64_KEPT_ELEMENTS = 2**20


def float64_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` in float64 (``clone_module(module).double()``), in eval mode.

    Made once and given again while every parameter and buffer of ``module`` is the one it
    was made from, unchanged: the same tensor object, memory and version (a change in
    place, ``load_state_dict`` say, raises the version; ``.data =`` moves the memory).
    Repeated predictions then skip the copy, 2-3 ms a call on a network of five members.
    Modules of more than :data:`FLOAT64_KEPT_ELEMENTS` elements are copied at every call.
    A kept copy is shared: read it, never change it."""
    tensors = tuple(itertools.chain(module.parameters(), module.buffers()))
    if sum(tensor.numel() for tensor in tensors) > FLOAT64_KEPT_ELEMENTS:
        return clone_module(module).double().eval()
    state = tuple((tensor.data_ptr(), tensor._version) for tensor in tensors)
    with _FLOAT64_LOCK:
        made = _FLOAT64_COPIES.get(module)
    if (made is not None and made[1] == state and len(made[0]) == len(tensors)
            and all(old is new for old, new in zip(made[0], tensors))):
        return made[2]
    copied = clone_module(module).double().eval()
    with _FLOAT64_LOCK:
        _FLOAT64_COPIES[module] = (tensors, state, copied)
    return copied
