"""Predictions of fixed configurations on fixed data, to show a refactor changes nothing.

``save FILE`` fits every configuration below (same seeds) and writes their
predictions to an ``.npz`` file; ``compare FILE`` fits them again and prints the
largest absolute difference per configuration (exit status 1 if any exceeds
``--atol``). Run ``save`` before a change and ``compare`` after it.

Usage: python benchmarks/prediction_snapshot.py {save,compare} FILE [--atol 0]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import neumiss
from neumiss import NeuMissClassifier, NeuMissRegressor

#: name -> (estimator class, parameters, task); every fit uses random_state=0.
CONFIGURATIONS = {
    "regressor_depth3": (NeuMissRegressor, {"depth": 3}, "regression"),
    "regressor_shared_residual": (
        NeuMissRegressor, {"depth": 4, "weight_sharing": "shared", "residual": True}, "regression",
    ),
    "regressor_depth_search": (NeuMissRegressor, {"depth": [0, 1, 2, 4]}, "regression"),
    "regressor_weights_auto": (
        NeuMissRegressor, {"depth": "auto", "weight_sharing": "auto", "residual": True},
        "regression",
    ),
    "regressor_mlp_head": (
        NeuMissRegressor, {"depth": 2, "mlp_depth": 2, "mlp_width": 16}, "regression",
    ),
    "classifier_binary": (NeuMissClassifier, {"depth": 2}, "binary"),
    "classifier_multiclass": (NeuMissClassifier, {"depth": 2, "mlp_depth": 1}, "multiclass"),
}


def _data(task: str):
    # Enough rows per parameter that weight_sharing="auto" unties (d = 5, depth <= 4 needs 1,250).
    X, y, truth = neumiss.simulation.make_regression(
        6000, 5, mechanism="MCAR", missing_rate=0.3, random_state=0
    )
    X_test, y_test = truth.sample(1000, random_state=1)
    if task == "binary":
        y = (y > np.median(y)).astype(int)
    elif task == "multiclass":
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    return X, y, X_test


def predictions() -> dict[str, np.ndarray]:
    """Predictions (regression) or class probabilities (classification) per configuration."""
    out = {}
    for name, (cls, params, task) in CONFIGURATIONS.items():
        X, y, X_test = _data(task)
        model = cls(random_state=0, **params).fit(X, y)
        out[name] = model.predict(X_test) if task == "regression" else model.predict_proba(X_test)
        print(f"{name}: fitted (best depth {model.best_depth_}, weights {model.weight_sharing_})")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("file")
    parser.add_argument("--atol", type=float, default=0.0)
    args = parser.parse_args(argv)
    current = predictions()
    if args.action == "save":
        np.savez(args.file, **current)
        print(f"wrote {args.file}")
        return 0
    saved = np.load(args.file)
    worst = 0.0
    for name, values in current.items():
        difference = float(np.max(np.abs(values - saved[name])))
        worst = max(worst, difference)
        print(f"{name}: max |difference| = {difference:.3g}")
    return int(worst > args.atol)


if __name__ == "__main__":
    sys.exit(main())
