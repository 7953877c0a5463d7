"""The benchmark's grid: the paper's cells, the runs of a grid, the paper's medians.

The grid crosses missingness mechanisms, numbers of features ``d`` and
training-set sizes, each cell repeated ``repeats`` times; a *run*
(:class:`~neumiss.benchmark._data.RunSpec`) is one method on one (cell, repeat).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..checks import Integer
from ._data import MECHANISMS, RunSpec
from ._methods import DEFAULT_METHODS, METHODS

#: The paper's grid.
PAPER_N_FEATURES = (10, 20, 50)
PAPER_N_TRAIN = (10_000, 20_000, 100_000)
PAPER_N_VAL = 10_000
PAPER_N_TEST = 10_000
PAPER_REPEATS = 20


class PaperMedian(NamedTuple):
    """The paper's published medians of one cell (test R² minus the Bayes rate; for
    probit self-masking minus the best method of the repeat), over 20 repeats."""

    mechanism: str
    n_features: int
    n_train: int
    em: float  #: R's norm EM
    neumiss: float  #: NeuMiss at the depth shown in the paper
    neumiss_depth: int


#: From the results tables released with the authors' code.
PAPER_MEDIANS = tuple(PaperMedian(*values) for values in (
    ("MCAR", 10, 10_000, -0.0002, -0.0236, 3),
    ("MCAR", 10, 20_000, -0.0001, -0.0153, 6),
    ("MCAR", 10, 100_000, -0.0000, -0.0053, 8),
    ("MCAR", 20, 10_000, -0.0004, -0.0671, 2),
    ("MCAR", 20, 20_000, -0.0002, -0.0456, 3),
    ("MCAR", 20, 100_000, -0.0001, -0.0210, 7),
    ("MCAR", 50, 10_000, -0.8686, -0.1708, 0),
    ("MCAR", 50, 20_000, -0.8677, -0.1466, 1),
    ("MCAR", 50, 100_000, -0.8680, -0.0589, 4),
    ("MAR", 10, 10_000, -0.0002, -0.0119, 4),
    ("MAR", 10, 20_000, -0.0001, -0.0086, 4),
    ("MAR", 10, 100_000, -0.0000, -0.0060, 7),
    ("MAR", 20, 10_000, -0.0003, -0.0361, 1),
    ("MAR", 20, 20_000, -0.0002, -0.0265, 2),
    ("MAR", 20, 100_000, -0.0000, -0.0187, 5),
    ("MAR", 50, 10_000, -0.6673, -0.1123, 0),
    ("MAR", 50, 20_000, -0.8318, -0.0967, 1),
    ("MAR", 50, 100_000, -0.8921, -0.0618, 4),
    ("gaussian_sm", 10, 10_000, -0.1206, -0.0179, 2),
    ("gaussian_sm", 10, 20_000, -0.1188, -0.0106, 6),
    ("gaussian_sm", 10, 100_000, -0.1198, -0.0041, 6),
    ("gaussian_sm", 20, 10_000, -0.0952, -0.0499, 1),
    ("gaussian_sm", 20, 20_000, -0.0956, -0.0337, 2),
    ("gaussian_sm", 20, 100_000, -0.0948, -0.0153, 5),
    ("gaussian_sm", 50, 10_000, -1.1952, -0.1583, 0),
    ("gaussian_sm", 50, 20_000, -1.2165, -0.1177, 0),
    ("gaussian_sm", 50, 100_000, -1.1920, -0.0497, 3),
    ("probit_sm", 10, 10_000, -0.1211, -0.0024, 2),
    ("probit_sm", 10, 20_000, -0.1300, -0.0008, 4),
    ("probit_sm", 10, 100_000, -0.1401, -0.0007, 8),
    ("probit_sm", 20, 10_000, -0.0887, -0.0031, 1),
    ("probit_sm", 20, 20_000, -0.1038, -0.0008, 2),
    ("probit_sm", 20, 100_000, -0.1206, -0.0010, 5),
    ("probit_sm", 50, 10_000, -1.1935, -0.0261, 0),
    ("probit_sm", 50, 20_000, -1.1878, -0.0157, 0),
    ("probit_sm", 50, 100_000, -1.1983, -0.0009, 3),
))


def _check_names(values, valid: Sequence[str], what: str) -> tuple[str, ...]:
    """``values`` as a tuple; ValueError listing the valid names if one is unknown or none given."""
    values = tuple(values)
    unknown = [v for v in values if v not in valid]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; valid: {', '.join(valid)}")
    if not values:
        raise ValueError(f"give at least one {what}; valid: {', '.join(valid)}")
    return values


def _check_ints(values, what: str, minimum: int, why: str = "") -> tuple[int, ...]:
    """``values`` (one integer or several) as a tuple of ints; ValueError naming ``what``
    (and ``why``, the reason for the minimum) unless there is at least one and each is
    an integer >= ``minimum``."""
    values = tuple(values) if isinstance(values, Iterable) else (values,)
    integer = Integer(minimum)
    if not values or not all(integer.accepts(v) for v in values):
        reason = f" ({why})" if why else ""
        raise ValueError(f"{what} must be integers >= {minimum}{reason}, got {list(values)}")
    return tuple(int(v) for v in values)


def grid(
    *,
    mechanisms: Sequence[str] = MECHANISMS,
    n_features: Sequence[int] = PAPER_N_FEATURES,
    n_train: Sequence[int] = PAPER_N_TRAIN,
    n_val: int = PAPER_N_VAL,
    n_test: int = PAPER_N_TEST,
    repeats: int = PAPER_REPEATS,
    methods: Sequence[str] = DEFAULT_METHODS,
    seed: int = 0,
) -> list[RunSpec]:
    """All runs of a grid, repeat by repeat (a partial benchmark covers every cell early).

    Raises ``ValueError`` naming the argument for unknown names or bad sizes.
    """
    mechanisms = _check_names(mechanisms, MECHANISMS, "mechanism(s)")
    methods = _check_names(methods, tuple(METHODS), "method(s)")
    n_features = _check_ints(n_features, "n_features", 2)
    n_train = _check_ints(n_train, "n_train", 2)
    (n_val,) = _check_ints(n_val, "n_val", 1)
    (n_test,) = _check_ints(n_test, "n_test", 2, "a test R² needs at least 2 rows")
    (repeats,) = _check_ints(repeats, "repeats", 1)
    (seed,) = _check_ints(seed, "seed", 0)
    return [
        RunSpec(method, mechanism, d, n, n_val, n_test, repeat, seed)
        for repeat in range(repeats)
        for mechanism in mechanisms
        for d in n_features
        for n in n_train
        for method in methods
    ]
