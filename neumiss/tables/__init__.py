"""From a user's table to the network's inputs: category encoding and standardization.

Owns :class:`TableEncoder` (mixed-type tables to float features with NaN; one-hot
categories, target statistics for columns of many categories) and
:class:`Standardizer` (robust scaling, clipping, the mask), shared by the estimators,
the baselines and the streaming fit. May import :mod:`neumiss.checks`.
"""

from ._encoding import (
    MAX_CATEGORIES,
    MAX_ONE_HOT,
    OTHER,
    ROWS_PER_CATEGORY,
    TARGET,
    TARGET_FOLDS,
    UNSEEN_WARNING_SHARE,
    TableEncoder,
    category_codes,
    one_hot_limit,
)
from ._levels import LEVEL_MIN_ROWS, LEVELS_MAX, LEVELS_MIN
from ._preprocessing import (
    CLIP_BOUND,
    MAX_STANDARDIZED,
    RELATIVE_SCALE_THRESHOLD,
    Standardizer,
    check_outputs_finite,
    describe_cells,
    mean_scale,
    observed_mean_scale,
    scaled_r2_score,
)

__all__ = [
    "CLIP_BOUND",
    "LEVELS_MAX",
    "LEVELS_MIN",
    "LEVEL_MIN_ROWS",
    "MAX_CATEGORIES",
    "MAX_ONE_HOT",
    "MAX_STANDARDIZED",
    "OTHER",
    "RELATIVE_SCALE_THRESHOLD",
    "ROWS_PER_CATEGORY",
    "Standardizer",
    "TARGET",
    "TARGET_FOLDS",
    "TableEncoder",
    "UNSEEN_WARNING_SHARE",
    "category_codes",
    "check_outputs_finite",
    "describe_cells",
    "mean_scale",
    "observed_mean_scale",
    "one_hot_limit",
    "scaled_r2_score",
]
