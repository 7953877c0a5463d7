"""The optimizer of a training: torch's Adam or SGD step, without ``torch.optim.Optimizer``.

``torch.optim.Optimizer`` imports ``torch._dynamo`` (the compiler, with sympy) on its first
use in a process: seconds of CPU before the first step, longer than a whole fit of a
small table. The update itself is torch's: :class:`Steps` keeps the state (moments,
step counts) and calls the functional ``torch.optim.adam.adam`` (the fused kernel on
CPU and CUDA) or ``torch.optim.sgd.sgd``, which do not import the compiler.
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam
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
        The parameters updated in place by :meth:`step`.
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
        if optimizer == "adam":
            self._moments = [torch.zeros_like(p) for p in self.parameters]
            self._squares = [torch.zeros_like(p) for p in self.parameters]
            self._counts = [torch.zeros((), dtype=torch.float32, device=p.device)
                            for p in self.parameters]

    def zero_grad(self) -> None:
        """Forget the gradients (set them to None)."""
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """Update every parameter that has a gradient."""
        index = [i for i, p in enumerate(self.parameters) if p.grad is not None]
        params = [self.parameters[i] for i in index]
        grads = [p.grad for p in params]
        if self.optimizer == "sgd":
            sgd(params, grads, [None] * len(params), weight_decay=self.weight_decay,
                momentum=0.0, lr=self.lr, dampening=0.0, nesterov=False, maximize=False)
            return
        adam(params, grads, [self._moments[i] for i in index],
             [self._squares[i] for i in index], [], [self._counts[i] for i in index],
             fused=True, amsgrad=False, beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1], lr=self.lr,
             weight_decay=self.weight_decay, eps=ADAM_EPS, maximize=False)
