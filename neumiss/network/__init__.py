"""The NeuMiss network and how it is trained (PyTorch).

Owns the NeuMiss block (unrolled Neumann iterations with ⊙M), the network and its
ensembles, the heads' spline term (piecewise-linear ramps on quantile bins), the
analytic weights of the paper, mini-batch training with early stopping, the depth and
head search, and device helpers. Knows nothing of scikit-learn
estimators. May import :mod:`neumiss.checks`, :mod:`neumiss.simulation` and
:mod:`neumiss.tables`.
"""

from ._analytic import analytic_network, set_analytic_weights, set_chebyshev_weights
from ._block import NeuMissBlock, NeuMissNetwork
from ._calibration import TEMPERATURE_BOUNDS, Temperature, fit_temperature
from ._callbacks import Callback, EpochLosses, History, ProgressBar, describe_training
from ._choice import (
    DEPTH_PATIENCE,
    UNTIE_ROWS_PER_PARAMETER,
    Candidate,
    SearchResult,
    clearly_better,
    clearly_lower,
)
from ._clone import clone_module, float64_copy
from ._data import TrainingData, evaluate_loss
from ._device import apply_on_device, standardize
from ._divergence import DivergenceWarning, constant_output
from ._ensemble import COMBINE, EPSILON, EnsembleNetwork, combine_outputs, first_equal_blocks
from ._losses import (
    BinaryLogLoss,
    MultinomialLogLoss,
    Objective,
    PinballLoss,
    SquaredError,
    TargetLoss,
)
from ._optimizer import OPTIMIZERS
from ._parallel import EvenBatches, ModelAveraging, all_reduced_loss, data_parallel
from ._search import AUTO_DEPTHS, AUTO_MLP_DEPTHS, DepthSearch
from ._search_depths import search_depths
from ._spline import SPLINE_BINS, SPLINE_MAX_RAMPS, PiecewiseLinearEncoding, quantile_ramps
from ._stacked import StackedNetwork
from ._start import MIDPOINT_ROWS_PER_FEATURE, moment_scale, observed_moments, start_from_moments
from ._training import (
    AUTO_BATCH_SIZE,
    AUTO_MLP_WIDTH,
    GPU_AUTO_BATCH_SIZE,
    TrainingConfig,
    auto_batch_size,
    auto_learning_rate,
    auto_mlp_width,
    torch_threads,
    train,
)

__all__ = [
    "AUTO_BATCH_SIZE",
    "AUTO_DEPTHS",
    "AUTO_MLP_DEPTHS",
    "AUTO_MLP_WIDTH",
    "BinaryLogLoss",
    "COMBINE",
    "Callback",
    "Candidate",
    "DepthSearch",
    "DEPTH_PATIENCE",
    "DivergenceWarning",
    "EPSILON",
    "EpochLosses",
    "EnsembleNetwork",
    "EvenBatches",
    "GPU_AUTO_BATCH_SIZE",
    "History",
    "MIDPOINT_ROWS_PER_FEATURE",
    "ModelAveraging",
    "MultinomialLogLoss",
    "NeuMissBlock",
    "NeuMissNetwork",
    "OPTIMIZERS",
    "Objective",
    "PiecewiseLinearEncoding",
    "PinballLoss",
    "ProgressBar",
    "SPLINE_BINS",
    "SPLINE_MAX_RAMPS",
    "SearchResult",
    "SquaredError",
    "TEMPERATURE_BOUNDS",
    "TargetLoss",
    "Temperature",
    "StackedNetwork",
    "TrainingConfig",
    "TrainingData",
    "UNTIE_ROWS_PER_PARAMETER",
    "all_reduced_loss",
    "analytic_network",
    "apply_on_device",
    "auto_batch_size",
    "auto_learning_rate",
    "auto_mlp_width",
    "clone_module",
    "float64_copy",
    "clearly_better",
    "clearly_lower",
    "combine_outputs",
    "constant_output",
    "data_parallel",
    "describe_training",
    "evaluate_loss",
    "first_equal_blocks",
    "fit_temperature",
    "moment_scale",
    "search_depths",
    "observed_moments",
    "quantile_ramps",
    "set_analytic_weights",
    "set_chebyshev_weights",
    "start_from_moments",
    "standardize",
    "torch_threads",
    "train",
]
