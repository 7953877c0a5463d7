"""ONNX graphs of fitted networks, with the missingness mask as a second input.

Owns the node-by-node graph builder (:class:`Graph`), the export of NeuMiss estimators
(every ⊙M an ordinary Mul node) and the model metadata. May import the layers below it
(:mod:`neumiss.checks` to :mod:`neumiss.network`).
"""

from ._networks import (
    DEFAULT_OPSET,
    DIGEST_KEY,
    MIN_OPSET,
    PRODUCER,
    Graph,
    check_exportable,
    classifier_outputs,
    export_onnx,
    finish_model,
    metadata,
    network_output,
    smallest,
    target_units,
)

__all__ = [
    "DEFAULT_OPSET",
    "DIGEST_KEY",
    "Graph",
    "MIN_OPSET",
    "PRODUCER",
    "check_exportable",
    "classifier_outputs",
    "export_onnx",
    "finish_model",
    "metadata",
    "network_output",
    "smallest",
    "target_units",
]
