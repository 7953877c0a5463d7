"""Declared parameter constraints, checked by one helper.

Each class that takes parameters (estimators, baselines, missingness
mechanisms) declares a table ``name -> constraint`` and calls
:func:`check_params` in ``fit``; the error names the class, the parameter, what
was expected and what was given::

    _constraints = {"depth": Integer(0), "residual": Boolean(), "optimizer": Options("adam", "sgd")}
    check_params("NeuMissRegressor", self.get_params(deep=False), self._constraints)

A constraint is any object with ``accepts(value) -> bool`` and a
``description`` that completes "must be ...". :class:`AnyOf` joins several.
Booleans are not numbers here (``True`` is no valid ``depth``), and numpy
scalars are numbers (grid searches pass ``np.float64``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

import numpy as np


def _is_number(value, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, (bool, np.bool_))


class Integer:
    """An integer (Python or numpy, not bool) in ``[low, high]``; ``None`` bounds are open."""

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def accepts(self, value) -> bool:
        if not _is_number(value, numbers.Integral):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    @property
    def description(self) -> str:
        if self.high is None:
            return "an integer" + (f" >= {self.low}" if self.low is not None else "")
        if self.low is None:
            return f"an integer <= {self.high}"
        return f"an integer in [{self.low}, {self.high}]"


class Real:
    """A finite real number (not bool) between ``low`` and ``high``.

    ``closed`` says which bounds belong to the interval: "both", "left",
    "right" or "neither".
    """

    def __init__(
        self, low: float | None = None, high: float | None = None, closed: str = "both"
    ) -> None:
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be 'both', 'left', 'right' or 'neither', got {closed!r}")
        self.low, self.high, self.closed = low, high, closed

    def accepts(self, value) -> bool:
        if not _is_number(value, numbers.Real) or not math.isfinite(value):
            return False
        left_closed = self.closed in ("both", "left")
        right_closed = self.closed in ("both", "right")
        if self.low is not None and (value < self.low or (value == self.low and not left_closed)):
            return False
        return self.high is None or value < self.high or (value == self.high and right_closed)

    @property
    def description(self) -> str:
        if self.low is None and self.high is None:
            return "a finite number"
        if self.high is None:
            return f"a finite number {'>=' if self.closed in ('both', 'left') else '>'} {self.low}"
        if self.low is None:
            return f"a number {'<=' if self.closed in ('both', 'right') else '<'} {self.high}"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        return f"a number in {left}{self.low}, {self.high}{right}"


class Options:
    """One of the given values (strings, usually)."""

    def __init__(self, *values) -> None:
        self.values = values

    def accepts(self, value) -> bool:
        # Type-strict: 1 is not "1", and True is not 1.
        return any(type(value) is type(v) and value == v for v in self.values)

    @property
    def description(self) -> str:
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(v) for v in self.values)


class Pattern:
    """A string matching the regular expression ``regex`` in full."""

    def __init__(self, regex: str, description: str) -> None:
        self.regex, self.description = re.compile(regex), description

    def accepts(self, value) -> bool:
        return isinstance(value, str) and self.regex.fullmatch(value) is not None


class Boolean:
    """``True`` or ``False`` (Python or numpy booleans), nothing else."""

    description = "a boolean (True or False)"

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))


class NoneValue:
    """Exactly ``None``."""

    description = "None"

    def accepts(self, value) -> bool:
        return value is None


class InstanceOf:
    """An instance of one of ``types``; ``name`` says what it is in messages."""

    def __init__(self, types: type | tuple[type, ...], name: str) -> None:
        self.types, self.description = types, name

    def accepts(self, value) -> bool:
        return isinstance(value, self.types)


class SequenceOf:
    """A non-empty list or tuple whose every item satisfies ``item``."""

    def __init__(self, item) -> None:
        self.item = item

    def accepts(self, value) -> bool:
        return (
            isinstance(value, (list, tuple))
            and len(value) > 0
            and all(self.item.accepts(v) for v in value)
        )

    @property
    def description(self) -> str:
        return f"a non-empty list of {_plural(self.item.description)}"


class AnyOf:
    """Satisfied when any of ``constraints`` is."""

    def __init__(self, *constraints) -> None:
        self.constraints = constraints

    def accepts(self, value) -> bool:
        return any(c.accepts(value) for c in self.constraints)

    @property
    def description(self) -> str:
        parts = [c.description for c in self.constraints]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _plural(description: str) -> str:
    for article in ("an ", "a "):
        if description.startswith(article):
            noun, _, rest = description[len(article):].partition(" ")
            return f"{noun}s {rest}".strip()
    return description


def check_params(owner: str, params: Mapping, constraints: Mapping) -> None:
    """Raise ``ValueError`` for the first parameter of ``params`` its constraint rejects.

    Parameters
    ----------
    owner : str
        Name of the class or function, first word of the message.
    params : mapping
        Parameter name -> value (e.g. ``estimator.get_params(deep=False)``).
    constraints : mapping
        Parameter name -> constraint. Parameters without a constraint are not checked.

    Raises
    ------
    ValueError
        ``"<owner>: <name> must be <description>, got <value!r>"``.
    """
    for name, constraint in constraints.items():
        if name in params and not constraint.accepts(params[name]):
            raise ValueError(
                f"{owner}: {name} must be {constraint.description}, got {params[name]!r}"
            )
