"""The optimizers: torch's Adam or SGD step without ``torch.optim.Optimizer`` for training,
and SciPy's L-BFGS-B for the small convex fits around it (:func:`minimize_lbfgs`).

``torch.optim.Optimizer`` imports ``torch._dynamo`` (the compiler, with sympy) on its first
use in a process: seconds of CPU before the first step, longer than a whole fit of a
small table. The update itself is torch's: :class:`Steps` keeps the state (moments,
step counts) and calls torch's fused Adam kernel (``torch._fused_adam_``, on CPU and
CUDA) or the functional ``torch.optim.sgd.sgd``, which do not import the compiler.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import scipy.optimize
import torch
from threadpoolctl import ThreadpoolController
from torch.optim.sgd import sgd

OPTIMIZERS = ("adam", "sgd")

#: Adam's moment decay rates and epsilon (torch's defaults).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


class Steps:
    """Adam (fused) or plain SGD over ``parameters``, at learning rate :attr:`lr`.

    Parameters
    ----------
    parameters : iterable of Tensor
        The parameters updated in place by :meth:`step`, all on one device, of one dtype.
    optimizer : {"adam", "sgd"}
    lr : float
    weight_decay : float
        L2 penalty added to the gradients (torch's ``weight_decay``).
    """

    def __init__(self, parameters, optimizer: str, lr: float, weight_decay: float = 0.0) -> None:
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.parameters = [p for p in parameters if p.requires_grad]
        self.optimizer = optimizer
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)
        kinds = {(p.device, p.dtype) for p in self.parameters}
        if len(kinds) > 1:
            raise ValueError(f"the parameters must share one device and dtype, got {kinds}")
        if optimizer == "adam":
            self._moments = [torch.zeros_like(p) for p in self.parameters]
            self._squares = [torch.zeros_like(p) for p in self.parameters]
            # Each parameter's step count is a 0-dim view of one tensor, so that a step
            # counts in one operation where torch's ``adam`` adds to each count apart
            # (half of the update's time on a small network's eight parameters).
            device = self.parameters[0].device if self.parameters else None
            self._count_store = torch.zeros(len(self.parameters), device=device)
            self._counts = self._count_store.unbind()

    def zero_grad(self) -> None:
        """Forget the gradients (set them to None)."""
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """Update every parameter that has a gradient (Adam: and count its step)."""
        index = [i for i, p in enumerate(self.parameters) if p.grad is not None]
        params = [self.parameters[i] for i in index]
        grads = [p.grad for p in params]
        if self.optimizer == "sgd":
            sgd(params, grads, [None] * len(params), weight_decay=self.weight_decay,
                momentum=0.0, lr=self.lr, dampening=0.0, nesterov=False, maximize=False)
            return
        if not params:
            return
        if len(params) == len(self.parameters):
            self._count_store.add_(1)
        else:
            self._count_store[index] += 1
        torch._fused_adam_(params, grads, [self._moments[i] for i in index],
                           [self._squares[i] for i in index], [],
                           [self._counts[i] for i in index], amsgrad=False, lr=self.lr,
                           beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1],
                           weight_decay=self.weight_decay, eps=ADAM_EPS, maximize=False)


@functools.cache
def _blas() -> ThreadpoolController:
    """The process's thread pools (BLAS, OpenMP), found once: a search of the loaded
    libraries costs about 15 ms."""
    return ThreadpoolController()


def minimize_lbfgs(objective: Callable[[], torch.Tensor], parameters: Sequence[torch.Tensor],
                   max_iterations: int = 100, gtol: float = 1e-9) -> None:
    """Minimise ``objective()``, a scalar computed from ``parameters``, over them in place.

    SciPy's L-BFGS-B on the parameters flattened to one float64 vector, the gradient
    from autograd: for small smooth problems (a constant output, a linear head on
    fixed features) where a full-batch quasi-Newton method converges in tens of
    iterations. ``parameters`` are leaf tensors with ``requires_grad=True``, any dtype
    and device; their values on entry are the starting point.
    """
    sizes = [p.numel() for p in parameters]

    def assign(vector: np.ndarray) -> None:
        with torch.no_grad():
            for parameter, piece in zip(parameters, np.split(vector, np.cumsum(sizes)[:-1])):
                parameter.copy_(torch.as_tensor(piece.reshape(parameter.shape)))

    def loss_and_gradient(vector: np.ndarray) -> tuple[float, np.ndarray]:
        assign(vector)
        for parameter in parameters:
            parameter.grad = None
        loss = objective()
        loss.backward()
        gradient = [p.grad.detach().double().cpu().reshape(-1).numpy() for p in parameters]
        return float(loss.detach()), np.concatenate(gradient)

    start = np.concatenate([p.detach().double().cpu().reshape(-1).numpy() for p in parameters])
    assign(lbfgs(loss_and_gradient, start, max_iterations, gtol))
    for parameter in parameters:
        parameter.grad = None


def lbfgs(loss_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
          start: np.ndarray, max_iterations: int = 100, gtol: float = 1e-9) -> np.ndarray:
    """The minimiser found by SciPy's L-BFGS-B from ``start`` (p,), float64, of a function
    that returns its value and gradient (p,) at a point; with one BLAS thread."""
    # L-BFGS-B's own work is on short vectors: BLAS threads only add their start-up and
    # waits (7 ms per iteration against 0.3 ms, 60 parameters, a second busy core).
    with _blas().limit(limits=1, user_api="blas"):
        found = scipy.optimize.minimize(loss_and_gradient, start, jac=True, method="L-BFGS-B",
                                        options={"maxiter": max_iterations, "gtol": gtol})
    return found.x
