"""The analytic NeuMiss network: weights set to the Neumann iterates of the true covariance.

Paper: Le Morvan et al., "NeuMiss networks", NeurIPS 2020, Sections 3.2 and 4.2
("NeuMiss analytic", Figure 3 left). With ``S^(0)`` a start matrix, the Neumann
iterates ``S^(l) = (Id - cov_obs) S^(l-1) + Id`` (eq. 6) converge to
``cov_obs^-1`` for every pattern when the spectral radius of ``cov`` is below 1,
and the order-``l`` predictor (eq. 4) is

    f_l(X_obs, M) = intercept + coef_obs @ X_obs
                    + coef_mis @ (mean_mis + cov_mis,obs S^(l) (X_obs - mean_obs)).

A :class:`~neumiss.NeuMissBlock` computes exactly these iterates with
``mu = mean``, ``S0 = S^(0)``, every Neumann layer ``Id - cov``, the residual
connection on (it adds ``c = (x - mean) * obs``, the ``+ Id`` of eq. 6) and
``W_mix = cov`` (all transposed for the row-vector convention ``h @ W``; the
symmetric ones are unchanged). A block of depth ``D >= 1`` gives the order
``D - 1`` approximation (``S0`` then ``D - 1`` iterations); depth 0 gives order 0
with ``S^(0) = Id``.

Since ``cov_mis,obs cov_obs^-1`` does not change when ``cov`` is multiplied by a
scalar, ``normalize`` runs the iterates on ``cov / s`` (paper, remark after
Proposition A.1): the network then approximates the same predictor for any
positive definite covariance. Every ``cov_obs`` has its eigenvalues between
``cov``'s extreme ones (Cauchy's interlacing). At ``s = lambda_max`` (the spectral
radius, ``normalize="radius"``) those of ``Id - cov_obs / s`` lie in
``[0, 1 - 1 / kappa]``, ``kappa = lambda_max / lambda_min``; at the midpoint
``s = (lambda_max + lambda_min) / 2`` (``normalize="midpoint"`` or True) within
``+-(kappa - 1) / (kappa + 1)``: the fastest contraction one scale gives every
pattern, about twice as fast on ill-conditioned covariances. A truncated slow
series damps the directions of small eigenvalues, where an estimated covariance
is noise: on small tables it predicts better (the data start uses it below 100 rows
per feature, :data:`~neumiss.network.MIDPOINT_ROWS_PER_FEATURE`).
"""

from __future__ import annotations

import numpy as np
import torch

from ._block import NeuMissBlock, NeuMissNetwork


def set_analytic_weights(block, mean, cov, S0=None, normalize=False):
    """Set the weights of ``block`` to the Neumann iterates of ``cov`` (in place).

    Parameters
    ----------
    block : NeuMissBlock
        Any weight mode; must have ``residual=True`` when ``block.depth >= 2``.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive definite. The iterates converge when its spectral
        radius is below 2 (Proposition 3 needs below 1), or always with ``normalize``.
    S0 : array-like of shape (n_features, n_features), optional
        Start ``S^(0)`` of the iterates, an approximation of ``cov_obs^-1``
        (default: identity). Needs ``block.depth >= 1``.
    normalize : bool or {"midpoint", "radius"}, default=False
        Run the iterates on ``cov / s`` (and start from ``s * S0``), with ``s`` the
        midpoint of ``cov``'s smallest and largest eigenvalues (``"midpoint"`` or True)
        or its largest (``"radius"``); see the module docstring.

    Returns
    -------
    block : the same NeuMissBlock, its parameters overwritten (dtype kept).
    """
    if not isinstance(block, NeuMissBlock):
        raise TypeError(f"block must be a NeuMissBlock, got {type(block).__name__}")
    d = block.n_features
    mean = _check_array(mean, "mean", (d,))
    cov = _check_array(cov, "cov", (d, d))
    if not np.allclose(cov, cov.T, rtol=0, atol=1e-10 * np.abs(cov).max()):
        raise ValueError("cov must be symmetric")
    if block.depth >= 2 and not block.residual:
        raise ValueError(
            "the Neumann iterates need the residual connection: build the block with "
            f"residual=True (got residual=False at depth {block.depth})"
        )
    if S0 is not None:
        if block.depth == 0:
            raise ValueError("a depth-0 block has no S0 matrix (it uses S^(0) = Id)")
        S0 = _check_array(S0, "S0", (d, d))
    else:
        S0 = np.eye(d)
    if normalize not in (False, True, "midpoint", "radius"):
        raise ValueError(f"normalize must be a bool, 'midpoint' or 'radius', got {normalize!r}")
    if normalize:
        eigenvalues = np.linalg.eigvalsh(cov)
        scale = float(eigenvalues[-1] if normalize == "radius"
                      else (eigenvalues[0] + eigenvalues[-1]) / 2.0)
        cov, S0 = cov / scale, S0 * scale
    dtype = block.mu.dtype
    with torch.no_grad():
        block.mu.copy_(torch.tensor(mean, dtype=dtype))  # a copy: mean may be read-only
        if block.S0 is not None:
            block.S0.copy_(torch.as_tensor(S0.T, dtype=dtype))
        for weight in block.neumann_layers:
            weight.copy_(torch.as_tensor((np.eye(d) - cov).T, dtype=dtype))
        block.W_mix.copy_(torch.as_tensor(cov.T, dtype=dtype))
    return block


def analytic_network(mean, cov, coef, intercept=0.0, depth=3, S0=None, normalize=False):
    """NeuMiss network computing the order-``max(depth - 1, 0)`` Neumann predictor (eq. 4).

    Parameters
    ----------
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
    coef : array-like of shape (n_features,)
    intercept : float, default=0.0
    depth : int >= 0, default=3
        Block depth (:class:`~neumiss.NeuMissBlock` convention).
    S0, normalize
        As in :func:`set_analytic_weights`.

    Returns
    -------
    network : NeuMissNetwork in float64 and eval mode
        ``network(x, mask)`` maps ``x`` (batch, d) with missing entries set to
        0 and ``mask`` (batch, d) with 1.0 = missing to predictions (batch, 1).
    """
    d = np.shape(mean)[0] if np.ndim(mean) == 1 else -1
    if d < 1:
        raise ValueError(f"mean must be a non-empty 1-D array, got shape {np.shape(mean)}")
    coef = _check_array(coef, "coef", (d,))
    if not np.isscalar(intercept) or not np.isfinite(intercept):
        raise ValueError(f"intercept must be a finite number, got {intercept!r}")
    network = NeuMissNetwork(d, n_outputs=1, depth=depth, residual=True).double()
    set_analytic_weights(network.block, mean, cov, S0=S0, normalize=normalize)
    linear = network.head[-1]
    with torch.no_grad():
        linear.weight.copy_(torch.as_tensor(coef[None, :], dtype=torch.float64))
        linear.bias.fill_(float(intercept))
    return network.eval()


def _check_array(value, name, shape):
    value = np.asarray(value, dtype=np.float64)
    if value.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must contain only finite values")
    return value
