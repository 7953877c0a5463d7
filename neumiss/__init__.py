"""NeuMiss networks: supervised learning with missing values.

Le Morvan, Josse, Moreau, Scornet, Varoquaux. "NeuMiss networks: differentiable
programming for supervised learning with missing values." NeurIPS 2020.
"""

__version__ = "0.1.0"

from . import analytic, bayes, simulate  # noqa: E402
from .block import NeuMissBlock, NeuMissNetwork  # noqa: E402
from .estimators import NeuMissClassifier, NeuMissRegressor  # noqa: E402
from .onnx_export import export_onnx  # noqa: E402
from .persistence import load  # noqa: E402

__all__ = [
    "NeuMissBlock",
    "NeuMissNetwork",
    "NeuMissRegressor",
    "NeuMissClassifier",
    "load",
    "export_onnx",
    "analytic",
    "bayes",
    "simulate",
    "__version__",
]
