"""A data-driven start for the NeuMiss block: the Neumann iterates of the data's covariance.

Started at random near the identity, a deep block first has to learn what the
data's covariance already says. Started from the observed means and the
pairwise-complete covariance of the training rows (:func:`observed_moments`),
the block computes at initialisation the Neumann approximation of
``E[X_mis | X_obs]`` that :func:`~neumiss.network.set_analytic_weights` writes
down for a Gaussian with those moments (paper, Section 3.2), and training only
corrects it (non-Gaussian data, MNAR mechanisms).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._analytic import set_analytic_weights
from ._block import NeuMissNetwork
from ._data import TrainingData

#: Rows drawn (at most) to estimate the moments: their error is then far below what
#: training corrects, at a cost independent of the table's length.
MOMENT_ROWS = 20_000

#: Eigenvalues of the pairwise-complete covariance are raised to at least this fraction of
#: the largest one: pairwise estimates need not be positive definite, and the Neumann
#: iterates converge only for a positive definite matrix.
EIGENVALUE_FLOOR = 1e-3


def observed_moments(data: TrainingData, seed: int = 0,
                     max_rows: int = MOMENT_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """The observed means (d,) and the pairwise-complete covariance (d, d) of ``data``'s
    features, made positive definite (:data:`EIGENVALUE_FLOOR`).

    Each entry uses the rows where its feature (or pair of features) is observed,
    among at most ``max_rows`` rows drawn with ``seed``. A feature never observed
    gets mean 0 and variance 1, and a pair never observed together covariance 0.
    """
    n = len(data)
    rows = np.random.default_rng(seed).choice(n, max_rows, replace=False) if n > max_rows \
        else np.arange(n)
    missing = data.mask[rows].cpu().numpy() > 0.5
    frame = pd.DataFrame(np.where(missing, np.nan, data.x[rows].double().cpu().numpy()))
    mean = frame.mean().fillna(0.0).to_numpy(copy=True)
    cov = frame.cov().fillna(0.0).to_numpy(copy=True)
    never = missing.all(axis=0)
    cov[never, :], cov[:, never] = 0.0, 0.0
    cov[never, never] = 1.0
    eigenvalues, eigenvectors = np.linalg.eigh((cov + cov.T) / 2)
    floor = EIGENVALUE_FLOOR * max(float(eigenvalues[-1]), 1e-12)
    cov = (eigenvectors * np.maximum(eigenvalues, floor)) @ eigenvectors.T
    return np.asarray(mean, dtype=np.float64), (cov + cov.T) / 2


def start_from_moments(network: NeuMissNetwork, mean: np.ndarray, cov: np.ndarray) -> bool:
    """Set ``network``'s block to the Neumann iterates of ``cov`` around ``mean`` (run on
    ``cov`` scaled to spectral radius 1, so that they converge); the head keeps its
    weights. Returns False, leaving the network unchanged, for a block whose iterations
    cannot compute the iterates (depth 2 or more without the residual connection)."""
    block = network.block
    if block.depth >= 2 and not block.residual:
        return False
    set_analytic_weights(block, mean, cov, normalize=True)
    return True
