"""``neumiss export MODEL OUTPUT``: a model file written by ``save()`` to ONNX."""

from __future__ import annotations

import os
import sys

from ..estimators import load
from ..export import DEFAULT_OPSET, MIN_OPSET


def configure_parser(parser) -> None:
    """Arguments of ``neumiss export``."""
    parser.add_argument(
        "model", help="model file written by save() (a NeuMiss estimator, ConformalRegressor "
        "or ConformalClassifier)"
    )
    parser.add_argument("output", help="ONNX file to write (e.g. model.onnx)")
    parser.add_argument(
        "--opset", type=int, default=DEFAULT_OPSET,
        help=f"ONNX opset (default {DEFAULT_OPSET}, at least {MIN_OPSET})",
    )


def run(args) -> int:
    """Exit status 0 on success, 1 with a message on standard error otherwise."""
    try:
        estimator = load(args.model)
        model = estimator.to_onnx(args.output, opset=args.opset)
    except (OSError, ValueError, TypeError) as exc:
        print(f"neumiss export: error: {exc}", file=sys.stderr)
        return 1
    meta = {p.key: p.value for p in model.metadata_props}
    print(
        f"wrote {args.output}: {meta['estimator']}, {meta['n_features']} features, "
        f"depth {meta['depth']}, opset {args.opset}, {os.path.getsize(args.output)} bytes"
    )
    return 0
