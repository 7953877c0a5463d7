"""A run's key (:class:`RunSpec`) and the data it is fitted on (:func:`simulate_run`).

Each (cell, repeat) of the grid gets fresh simulated data
(:func:`neumiss.simulation.make_regression`: Gaussian covariates, linear
response with SNR 10, 50% missing values), plus validation and test sets of
``n_val`` and ``n_test`` rows from the same distribution; every method of
that (cell, repeat) is fitted on the same data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import simulation as simulate

#: Mechanisms of :mod:`neumiss.simulation`, in the paper's order.
MECHANISMS = tuple(simulate.MECHANISMS)
#: Mechanisms without a Bayes predictor: gaps are taken to the best method of the repeat.
NO_BAYES_PREDICTOR = ("probit_sm",)


class RunSpec(NamedTuple):
    """One run: a method on one simulated data set. Also the resume key of ``runs.csv``."""

    method: str
    mechanism: str
    n_features: int
    n_train: int
    n_val: int
    n_test: int
    repeat: int
    seed: int

    @classmethod
    def from_row(cls, row: dict) -> RunSpec:
        """The spec of a ``runs.csv`` row (values as read from the file, i.e. strings)."""
        text = ("method", "mechanism")
        return cls(*(str(row[c]) if c in text else int(row[c]) for c in cls._fields))

    def data_key(self) -> RunSpec:
        """This spec with the method left empty: the key of its data set, shared by
        every method run on it."""
        return self._replace(method="")

    def describe(self) -> str:
        """A one-line label of the run, for progress and error messages."""
        return (
            f"{self.method} {self.mechanism} d={self.n_features} n_train={self.n_train} "
            f"repeat={self.repeat}"
        )


@dataclass(frozen=True)
class SimulatedData:
    """Simulated train / validation / test sets of one (cell, repeat).

    Arrays: ``X_*`` of shape (n_*, d) with NaN for missing entries, ``y_*`` of shape (n_*,).
    ``truth`` is the :class:`neumiss.simulation.SimulationTruth` they were drawn
    from; ``random_state`` seeds the methods fitted on them.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    truth: simulate.SimulationTruth
    random_state: int


def simulate_run(spec: RunSpec) -> SimulatedData:
    """The data of ``spec``, identical for every method (the method name is ignored).

    The random streams derive from ``spec.seed`` and the cell and repeat, so a
    run can be recomputed alone, in any order, in any process.
    """
    sequence = np.random.SeedSequence(
        spec.seed,
        spawn_key=(MECHANISMS.index(spec.mechanism), spec.n_features, spec.n_train, spec.repeat),
    )
    train, val, test, model = (np.random.default_rng(s) for s in sequence.spawn(4))
    X_train, y_train, truth = simulate.make_regression(
        spec.n_train, spec.n_features, mechanism=spec.mechanism, random_state=train
    )
    X_val, y_val = truth.sample(spec.n_val, random_state=val)
    X_test, y_test = truth.sample(spec.n_test, random_state=test)
    return SimulatedData(
        X_train, y_train, X_val, y_val, X_test, y_test, truth,
        random_state=int(model.integers(2**31 - 1)),
    )


def bayes_rate(spec: RunSpec, data: SimulatedData) -> float:
    """R² of the Bayes predictor on the test set of ``data``; NaN for mechanisms without one."""
    if spec.mechanism in NO_BAYES_PREDICTOR:
        return math.nan
    return float(data.truth.bayes_rate(data.X_test, data.y_test))
