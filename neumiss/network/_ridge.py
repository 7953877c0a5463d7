"""Ridge regression in closed form for the heads' linear start: the penalty chosen by
leave-one-out error, then one solution per member of an ensemble.

Solved by numpy in float64 on the host: torch's CPU matrix products over many rows can
differ in their last bits from one process to the next (the sums' order follows the
buffers' alignment), and Adam's first steps turn such bits into different trainings,
where fits must repeat bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg
import torch

#: The ridge penalties (``alpha`` on the sum of squared errors) among which
#: :func:`ridge_penalty` chooses the squared loss's by leave-one-out error.
RIDGE_PENALTIES = tuple(np.logspace(-3, 4, 15))


def distinct_members(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members of distinct problems: members whose rows of every one of ``arrays``
    (each (K, ...): the member's row weights, its starting point) are equal pose the same
    problem. Returns the first member of each distinct problem (K',), in member order, and
    for every member the index of its problem among those (K,)."""
    keys = [b"".join(np.ascontiguousarray(a[k]).tobytes() for a in arrays)
            for k in range(len(arrays[0]))]
    first: dict[bytes, int] = {}
    for k, key in enumerate(keys):
        first.setdefault(key, k)
    index = {key: i for i, key in enumerate(first)}
    return np.asarray(list(first.values())), np.asarray([index[key] for key in keys])


def per_distinct_member(solve: Callable[[int], np.ndarray], *arrays: np.ndarray) -> np.ndarray:
    """``solve(k)`` for every member ``k``, stacked (K, ...), each distinct problem
    (:func:`distinct_members` of ``arrays``) solved once, by its first member. The members
    of an ensemble validated on held-out rows all train on the same rows
    (gapminder_lifeexp: five ridge solves of 500 columns on 8,400 rows, 1.4 s of a 5.5 s
    fit, where one gives the same solutions bit for bit)."""
    firsts, index = distinct_members(*arrays)
    return np.stack([solve(k) for k in firsts])[index]


def ridge_penalty(features: torch.Tensor, target: torch.Tensor, case_weight: torch.Tensor,
                  penalties: tuple[float, ...] = RIDGE_PENALTIES) -> float:
    """The penalty among ``penalties`` whose ridge regression of ``target`` (n,) on
    ``features`` (n, p), intercept unpenalized, has the least leave-one-out squared error,
    each row weighted by ``case_weight`` (n,); all float64.

    The leave-one-out residuals of a linear smoother are its residuals over one minus
    the leverages, so one eigendecomposition of the (weighted, centred) Gram matrix
    scores every penalty (scikit-learn's ``RidgeCV`` does the same). With as many columns
    as rows or more, of the rows' Gram matrix (n, n) instead, which has the same nonzero
    eigenvalues: d = 2,000 on 400 rows costs an n^3 decomposition, not a p^3 one."""
    A, y, w = (t.cpu().numpy() for t in (features, target, case_weight))
    share = w / w.sum()
    root = np.sqrt(w)
    centred = A - share @ A  # (n, p)
    centred *= root[:, None]
    response = (y - share @ y) * root  # (n,)
    if centred.shape[1] < centred.shape[0]:
        eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred)
        rotated = centred @ eigenvectors  # (n, p)
    else:  # centred = U diag(sqrt(s)) V^T: its columns along V are U sqrt(s); others 0
        eigenvalues, left = np.linalg.eigh(centred @ centred.T)
        rotated = left * np.sqrt(np.maximum(eigenvalues, 0.0))  # (n, n)
    # Every penalty at once: two products of (n, p) by (p, penalties) read ``rotated`` and
    # its squares once, where one product per penalty read them 15 times (memory-bound:
    # gapminder_lifeexp's 7,600 x 231, 40 of the 120 ms of a call).
    shrink = 1.0 / (np.maximum(eigenvalues, 0.0)[:, None] + np.asarray(penalties))  # (p, q)
    residual = response[:, None] - rotated @ (shrink * (rotated.T @ response)[:, None])
    squares = np.square(rotated, out=rotated)  # rotated's memory: not read again
    leverage = squares @ shrink + share[:, None]  # the intercept's leverage is w_i / sum w
    errors = np.sum((residual / np.maximum(1.0 - leverage, 1e-12)) ** 2, axis=0)  # (q,)
    return float(penalties[int(np.argmin(errors))])


def ridge_solutions(features: torch.Tensor, target: torch.Tensor, row_weight: torch.Tensor,
                    penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per member ``k``, the minimiser of ``sum_i w_ik (y_i - f_i . beta - b)^2 + penalty
    |beta|^2``: ``features`` (n, p), ``target`` (n,), ``row_weight`` (n, K), all float64.
    Returns the weights (K, 1, p) and biases (K, 1) (the bias is not penalized), on the
    device of ``features``. Members with the same row weights are solved once
    (:func:`per_distinct_member`).

    With as many columns as rows or more, in the rows' space (:func:`_ridge_by_rows`):
    the same solution, from a Cholesky solve of order n rather than a least-squares solve
    of order p + 1."""
    W, y = row_weight.cpu().numpy(), target.cpu().numpy()
    if features.shape[1] >= features.shape[0]:
        solution = _ridge_by_rows(features.cpu().numpy(), y, W, penalty)
        solution = torch.as_tensor(solution, device=features.device)  # (K, p + 1)
        return solution[:, None, :-1], solution[:, -1:]
    A = np.hstack([features.cpu().numpy(), np.ones((features.shape[0], 1))])  # (n, p + 1)
    p = features.shape[1]
    ridge = np.full(p + 1, penalty)
    ridge[p] = 0.0

    def solve(k: int) -> np.ndarray:  # one member at a time: an (n, p + 1) temporary
        weighted = W[:, k, None] * A
        gram = weighted.T @ A + np.diag(ridge)  # (p + 1, p + 1)
        return _solve_gram(gram, weighted.T @ y)

    solution = torch.as_tensor(per_distinct_member(solve, W.T), device=features.device)
    return solution[:, None, :p], solution[:, p:]


def _solve_gram(gram: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The solution of ``gram @ x = right`` for a symmetric positive semi-definite ``gram``
    (q, q): by Cholesky (q = 1,100: eight times faster than a least-squares solve's SVD),
    or, when ``gram`` is singular (a member whose rows all weigh 0 on the bias: the
    penalty keeps the features' part definite), the minimum-norm least-squares solution."""
    try:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram), right)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(gram, right, rcond=None)[0]


def _ridge_by_rows(F: np.ndarray, y: np.ndarray, W: np.ndarray, penalty: float) -> np.ndarray:
    """:func:`ridge_solutions`'s solutions ``(beta, b)`` (K, p + 1) for ``F`` (n, p) with p >= n, in
    the rows' space: the bias takes the (weighted) means, and ``beta = B^T (B B^T +
    penalty I)^-1 r`` with ``B`` the centred rows times the square roots of the member's
    weights and ``r`` the centred target alike (``(B^T B + penalty I)^-1 B^T`` rewritten),
    an (n, n) system. Rows weighing 0 take no part; the penalty (> 0) keeps it definite."""

    def solve(k: int) -> np.ndarray:  # one member at a time
        w = W[:, k]
        share = w / w.sum()
        mean = share @ F  # (p,)
        root = np.sqrt(w)
        B = (F - mean) * root[:, None]  # (n, p)
        kernel = B @ B.T
        kernel[np.diag_indices_from(kernel)] += penalty
        dual = scipy.linalg.solve(kernel, (y - share @ y) * root, assume_a="pos")
        beta = B.T @ dual
        return np.append(beta, share @ y - mean @ beta)

    return per_distinct_member(solve, W.T)

