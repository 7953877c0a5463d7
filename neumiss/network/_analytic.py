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

A block with one matrix per iteration (``weight_sharing="independent"``) can do better
than one scale (:func:`set_chebyshev_weights`): the Richardson iteration
``x_{k+1} = x_k + w_k (c - x_k cov_obs)`` with its steps ``w_k`` at the inverses of
the Chebyshev nodes of ``[a, b]`` has the error ``prod_k (Id - w_k cov_obs) e_0``,
whose polynomial is the smallest on ``[a, b]`` of its degree: ``1 / T_D((b + a) /
(b - a))`` after ``D`` steps, a rate of ``(sqrt(kappa) - 1) / (sqrt(kappa) + 1)`` per
step where one scale gives ``(kappa - 1) / (kappa + 1)`` (Golub and Van Loan,
Section 11.2; d = 200 with kappa = 1000: depth 16 then reaches what one scale reaches
at depth 32 and beyond).
"""

from __future__ import annotations

import numpy as np
import torch

from ._block import NeuMissBlock, NeuMissNetwork


def set_analytic_weights(block, mean, cov, S0=None, normalize=False, eigenvalues=None):
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
    eigenvalues : array-like of shape (n_features,), optional
        ``cov``'s eigenvalues in ascending order, when already known (``normalize`` reads
        its extremes; computed otherwise: the decomposition of a wide table's covariance,
        d = 2,000, takes seconds).

    Returns
    -------
    block : the same NeuMissBlock, its parameters overwritten (dtype kept).
    """
    mean, cov = _checked_moments(block, mean, cov)
    d = block.n_features
    if S0 is not None:
        if block.depth == 0:
            raise ValueError("a depth-0 block has no S0 matrix (it uses S^(0) = Id)")
        S0 = _check_array(S0, "S0", (d, d))
    else:
        S0 = np.eye(d)
    if normalize not in (False, True, "midpoint", "radius"):
        raise ValueError(f"normalize must be a bool, 'midpoint' or 'radius', got {normalize!r}")
    if normalize:
        if eigenvalues is None:
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


#: :func:`set_chebyshev_weights` fits its steps to ``[lambda_max / kappa_D, lambda_max]``,
#: the widest interval on which ``D`` steps reduce the error by this factor
#: (:func:`chebyshev_condition`; ``kappa_D`` = 115 at ``D`` = 16).
CHEBYSHEV_RESIDUAL = 0.1


def chebyshev_condition(n_steps: int, residual: float = CHEBYSHEV_RESIDUAL) -> float:
    """The largest condition number ``kappa`` of an interval ``[b / kappa, b]`` on which
    ``n_steps`` Chebyshev steps reduce every error component by ``residual`` or more:
    ``1 / T_D((kappa + 1) / (kappa - 1)) = residual``, ``T_D`` the Chebyshev polynomial."""
    x = np.cosh(np.arccosh(1.0 / residual) / n_steps)
    return float((x + 1.0) / (x - 1.0))


def chebyshev_steps(lower: float, upper: float, n_steps: int, grid: int = 512) -> np.ndarray:
    """Richardson steps ``w_k`` (n_steps,) at the inverses of the Chebyshev nodes of
    ``[lower, upper]`` (0 < lower <= upper), in an order that float32 can run.

    Whatever the order, ``D`` steps multiply the error by the same polynomial
    ``prod_k (1 - w_k lambda)``. But in the nodes' natural order its partial products grow
    to about ``kappa^(D/2)`` on the interval before later steps shrink them, and the
    products of the steps after a given one (which multiply the rounding errors made
    there) as much: float32 then loses the iterates from depth 16 or so. The order taken
    keeps the larger of the two, over all steps and ``grid`` points of the interval (below
    ``lower`` every factor is in ``(0, 1]``), small: each step is first the one that keeps
    it the smallest (greedy), then pairs of steps are swapped while a swap lowers it (at
    ``D`` = 16 on the interval :func:`set_chebyshev_weights` uses: 42 after the greedy
    pass, 7 after the swaps; 1e7 in the natural order)."""
    k = np.arange(n_steps)
    nodes = (upper + lower) / 2 + (upper - lower) / 2 * np.cos(np.pi * (2 * k + 1)
                                                                / (2 * n_steps))
    lam = np.linspace(lower, upper, grid)
    factors = 1.0 - lam[None, :] / nodes[:, None]  # (n_steps, grid)
    left, order, partial = list(range(n_steps)), [], np.ones(grid)

    def growth(j: int) -> float:  # the larger product if step j comes next
        rest = np.prod(factors[[i for i in left if i != j]], axis=0)
        return max(np.abs(partial * factors[j]).max(), np.abs(rest).max())

    while left:
        best = min(left, key=growth)
        left.remove(best)
        order.append(best)
        partial = partial * factors[best]

    def peak(order: list[int]) -> float:  # the largest partial or remaining product
        ordered = factors[order]
        return max(np.abs(np.cumprod(ordered, axis=0)).max(),
                   np.abs(np.cumprod(ordered[::-1], axis=0)).max())

    lowest, swapped = peak(order), True
    while swapped:
        swapped = False
        for i in range(n_steps):
            for j in range(i + 1, n_steps):
                order[i], order[j] = order[j], order[i]
                value = peak(order)
                if value < lowest * (1.0 - 1e-9):
                    lowest, swapped = value, True
                else:
                    order[i], order[j] = order[j], order[i]
    return 1.0 / nodes[order]


def set_chebyshev_weights(block, mean, cov, residual=CHEBYSHEV_RESIDUAL):
    """Set ``block``'s weights to ``depth`` Richardson steps at Chebyshev nodes (in place).

    With steps ``w_0 .. w_{D-1}`` (:func:`chebyshev_steps` on ``[a, b]``, ``b`` the
    largest eigenvalue of ``cov``, ``a`` its smallest, raised to ``b /
    chebyshev_condition(D, residual)``: directions of smaller eigenvalues, where an
    estimated covariance is noise, are damped as a truncated series damps them), the
    iterates ``x_1 = w_0 c`` and ``x_{k+1} = x_k + (w_k (c - x_k cov)) * obs`` approach
    ``c cov_obs^-1`` for every pattern. The block carries ``h_k = x_{k+1} / w_k``:
    ``S0 = Id``, ``W_k = (w_{k-1} / w_k) (Id - w_k cov)``, the residual adds ``c``, and
    ``W_mix = w_{D-1} cov``, so that its output on the missing entries is
    ``mean_mis + cov_mis,obs x_D``.

    Parameters
    ----------
    block : NeuMissBlock
        ``depth >= 1``, with the residual connection from depth 2, and one matrix per
        iteration (``weight_sharing="independent"``) from depth 3.
    mean : array-like of shape (n_features,)
    cov : array-like of shape (n_features, n_features)
        Symmetric positive definite (else ValueError).
    residual : float in (0, 1)
        Error reduction that sets the interval's lower end (:data:`CHEBYSHEV_RESIDUAL`).

    Returns
    -------
    block : the same NeuMissBlock, its parameters overwritten (dtype kept).
    """
    mean, cov = _checked_moments(block, mean, cov)
    if block.depth < 1:
        raise ValueError("Chebyshev steps need a block of depth 1 or more (got depth 0)")
    if block.depth >= 3 and block.weight_sharing != "independent":
        raise ValueError(
            "Chebyshev steps need one matrix per iteration: build the block with "
            f"weight_sharing='independent' (got {block.weight_sharing!r} at depth {block.depth})"
        )
    if not 0.0 < residual < 1.0:
        raise ValueError(f"residual must be in (0, 1), got {residual!r}")
    d, depth = block.n_features, block.depth
    eigenvalues = np.linalg.eigvalsh((cov + cov.T) / 2)
    if not eigenvalues[0] > 0:
        raise ValueError("cov must be positive definite: its smallest eigenvalue is "
                         f"{eigenvalues[0]:.3g}")
    upper = float(eigenvalues[-1])
    lower = max(float(eigenvalues[0]), upper / chebyshev_condition(depth, residual))
    steps = chebyshev_steps(lower, upper, depth)
    eye, dtype = np.eye(d), block.mu.dtype
    with torch.no_grad():
        block.mu.copy_(torch.tensor(mean, dtype=dtype))  # a copy: mean may be read-only
        block.S0.copy_(torch.eye(d, dtype=dtype))
        for k, weight in enumerate(block.neumann_layers, start=1):
            matrix = steps[k - 1] / steps[k] * (eye - steps[k] * cov)
            weight.copy_(torch.as_tensor(matrix.T, dtype=dtype))
        block.W_mix.copy_(torch.as_tensor(steps[-1] * cov.T, dtype=dtype))
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


def computes_iterates(block) -> bool:
    """Whether ``block``'s iterations can compute the Neumann iterates: they need the
    residual connection from depth 2."""
    return block.depth < 2 or block.residual


def _checked_moments(block, mean, cov) -> tuple[np.ndarray, np.ndarray]:
    """``mean`` (d,) and ``cov`` (d, d) as float64 arrays for ``block``'s ``d`` features, or
    the error naming what is wrong: not a block, a shape, a non-finite value, an asymmetric
    ``cov``, or a block whose iterations cannot compute iterates (depth 2 or more without
    the residual connection)."""
    if not isinstance(block, NeuMissBlock):
        raise TypeError(f"block must be a NeuMissBlock, got {type(block).__name__}")
    d = block.n_features
    mean = _check_array(mean, "mean", (d,))
    cov = _check_array(cov, "cov", (d, d))
    if not np.allclose(cov, cov.T, rtol=0, atol=1e-10 * np.abs(cov).max()):
        raise ValueError("cov must be symmetric")
    if not computes_iterates(block):
        raise ValueError(
            "the Neumann iterates need the residual connection: build the block with "
            f"residual=True (got residual=False at depth {block.depth})"
        )
    return mean, cov


def _check_array(value, name, shape):
    value = np.asarray(value, dtype=np.float64)
    if value.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must contain only finite values")
    return value
