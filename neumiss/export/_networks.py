"""Export fitted NeuMiss estimators to ONNX, with the missingness mask as a second input.

The graph is written node by node with :mod:`onnx.helper` from the fitted
weights, so it mirrors :class:`~neumiss.network.NeuMissBlock` line for line: the
estimator's standardization, the block (``MatMul`` by each weight matrix, then
an ordinary ``Mul`` by ``1 - M`` or by ``M`` for every mask product), the head
(``Gemm`` and ``Relu``) and the map back to targets, classes and probabilities.
Scoring the exported file needs ONNX Runtime only (see ``export/README.md``).

Inputs (N is dynamic):

* ``X`` float32 (N, d): encoded feature values (the table's columns when all
  are numeric; one 0/1 column per category of a categorical column, see the
  metadata ``encoding``), **0 where missing**;
* ``M`` float32 (N, d): 1 = missing, 0 = observed.

The categorical encoding stays outside the graph (its inputs stay numeric);
``export/score.py`` applies it from the metadata with numpy alone.

Outputs: ``y`` float64 (N,) for a regressor (with ``quantiles`` float64
(N, n_quantiles) for a quantile regressor); ``label`` (N,) and
``probabilities`` float32 (N, n_classes) for a classifier.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import onnx
import scipy.linalg
from onnx import TensorProto, helper, numpy_helper
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

from .._version import __version__
from ..checks import Integer, check_params
from ..network import EPSILON, EnsembleNetwork, first_equal_blocks

#: Opset written by default: ONNX 1.12 / ONNX Runtime >= 1.12 support it.
DEFAULT_OPSET = 17
#: Oldest opset with the operator signatures used here (``Squeeze`` axes as input).
MIN_OPSET = 13
#: Arguments of :func:`export_onnx`: the opsets this module writes and ``onnx`` knows.
_EXPORT_CONSTRAINTS = {"opset": Integer(MIN_OPSET, onnx.defs.onnx_opset_version())}
#: ``producer_name`` of every exported model; the scorer refuses other producers.
PRODUCER = "neumiss"
#: Metadata key of the file's SHA-256 digest, the last property: the digest of the
#: serialized model with its own 64 hex digits written as zeros (the scorers check it
#: on the file's bytes, ONNX Runtime ignores it).
DIGEST_KEY = "integrity_sha256"
#: Version of the input/output contract below, stored as metadata ``format_version``
#: (2: ``X`` holds the encoded columns, metadata ``encoding`` says how).
FORMAT_VERSION = 2

INPUT_CONTRACT = (
    "X: float32 [N, d], the encoded feature values in the training units and order "
    "(metadata encoded_feature_names; metadata encoding says how each input column "
    "of feature_names maps to them: numeric as is, boolean as 0/1, categorical as one "
    "0/1 column per category), with every missing entry set to 0 (never NaN: the "
    "graph multiplies missing entries by 0 and NaN * 0 is NaN). "
    "M: float32 [N, d], 1 where the entry is missing (every column of a categorical "
    "column's group when its category is missing or unseen), 0 where it is observed. "
    "Outputs: regressor y float64 [N]; classifier label [N] (the class, metadata classes) "
    "and probabilities float32 [N, n_classes] (columns in the order of metadata classes)."
)


class Graph:
    """Nodes and initializers of a graph under construction, with readable names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}

    def constant(self, name: str, value, dtype=np.float32) -> str:
        """Name of an initializer holding ``value``; added on first use of ``name``."""
        if name not in self.initializers:
            array = np.asarray(value, dtype=dtype)
            self.initializers[name] = numpy_helper.from_array(array, name)
        return name

    def strings(self, name: str, values) -> str:
        """Add a 1-D string initializer and return its name."""
        data = [str(v).encode("utf-8") for v in values]
        self.initializers[name] = helper.make_tensor(name, TensorProto.STRING, [len(data)], data)
        return name

    def op(self, op_type: str, inputs: list[str], output: str, **attributes) -> str:
        """Add one node computing ``output`` and return ``output``."""
        self.nodes.append(
            helper.make_node(op_type, inputs, [output], name=output, **attributes)
        )
        return output


def _array(parameter) -> np.ndarray:
    return parameter.detach().cpu().numpy().astype(np.float32)


def _check_float32_scaling(estimator) -> None:
    """Refuse a standardization that float32 inputs cannot carry: a column whose mean or
    scale lies outside float32's normal range (features in units near 1e±38 or beyond)."""
    tiny, huge = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    pre = estimator.preprocessor_
    bad = (np.abs(pre.mean_) > huge) | (pre.scale_ > huge) | (pre.scale_ < tiny)
    if bad.any():
        names = np.asarray(estimator.encoder_.output_names(), dtype=object)[bad]
        raise ValueError(
            f"the ONNX graph takes float32 inputs, but columns {names[:10].tolist()} have a "
            f"mean or scale outside float32's range ({tiny:.3g} to {huge:.3g}): "
            "rescale these features (e.g. change their units) and refit before exporting"
        )


def _standardize(g: Graph, preprocessor, x_in: str, obs: str) -> str:
    """:meth:`Standardizer.transform` as nodes: ``z = (X - mean_) / scale_``, compressed
    as ``z / sqrt(1 + (z * inverse_bound_)^2)`` when some column is, clipped to
    ``[lower_, upper_]`` (Max, Min), times ``1 - M``."""
    centred = g.op("Sub", [x_in, g.constant("x_mean", preprocessor.mean_)], "x_centred")
    scaled = g.op("Div", [centred, g.constant("x_scale", preprocessor.scale_)], "x_scaled")
    if preprocessor.inverse_bound_.any():
        ratio = g.op("Mul", [scaled, g.constant("x_inverse_bound", preprocessor.inverse_bound_)],
                     "x_ratio")
        one_plus = g.op("Add", [g.constant("one", 1.0), g.op("Mul", [ratio, ratio], "x_ratio2")],
                        "x_one_plus_ratio2")
        scaled = g.op("Div", [scaled, g.op("Sqrt", [one_plus], "x_denominator")], "x_compressed")
    raised = g.op("Max", [scaled, g.constant("x_lower", preprocessor.lower_)], "x_raised")
    clipped = g.op("Min", [raised, g.constant("x_upper", preprocessor.upper_)], "x_clipped")
    return g.op("Mul", [clipped, obs], "x")


def _block(g: Graph, block, x: str, obs: str, m: str, prefix: str) -> str:
    """The NeuMiss block (see :meth:`NeuMissBlock.forward`), output (N, d)."""
    mu = g.constant(f"{prefix}.mu", _array(block.mu))
    centred = g.op("Mul", [g.op("Sub", [x, mu], f"{prefix}.x_minus_mu"), obs], f"{prefix}.c")
    h = centred
    if block.S0 is not None:
        s0 = g.constant(f"{prefix}.S0", _array(block.S0))
        h = g.op("Mul", [g.op("MatMul", [h, s0], f"{prefix}.h0_S0"), obs], f"{prefix}.h0")
    names = {}
    for i, weight in enumerate(block.iteration_weights(), start=1):
        # Shared weights appear once in the file, used by every iteration.
        if id(weight) not in names:
            label = "W_shared" if block.weight_sharing == "shared" else f"W{i}"
            names[id(weight)] = g.constant(f"{prefix}.{label}", _array(weight))
        product = g.op("MatMul", [h, names[id(weight)]], f"{prefix}.h{i}_W")
        h = g.op("Mul", [product, obs], f"{prefix}.h{i}" + ("_masked" if block.residual else ""))
        if block.residual:
            h = g.op("Add", [h, centred], f"{prefix}.h{i}")
    # (h @ W_mix) * M + x * (1 - M) + mu * M, with x already 0 where missing.
    w_mix = g.constant(f"{prefix}.W_mix", _array(block.W_mix))
    estimate = g.op("Add", [g.op("MatMul", [h, w_mix], f"{prefix}.h_Wmix"), mu],
                    f"{prefix}.estimate")
    missing_part = g.op("Mul", [estimate, m], f"{prefix}.estimate_missing")
    bounded = block.lower is not None
    out = g.op("Add", [missing_part, x], f"{prefix}.unbounded" if bounded else f"{prefix}.out")
    if not bounded:
        return out
    # the block's range (NeuMissBlock.set_range): Max, Min, as the inputs' clipping
    raised = g.op("Max", [out, g.constant(f"{prefix}.lower", _array(block.lower))],
                  f"{prefix}.raised")
    return g.op("Min", [raised, g.constant(f"{prefix}.upper", _array(block.upper))],
                f"{prefix}.out")


def _head(g: Graph, head, h: str, prefix: str) -> str:
    """The head: ``Gemm`` per ``nn.Linear`` (weight used as stored, ``transB=1``), ``Relu``."""
    for i, layer in enumerate(head):
        if isinstance(layer, nn.Linear):
            weight = g.constant(f"{prefix}.{i}.weight", _array(layer.weight))
            bias = g.constant(f"{prefix}.{i}.bias", _array(layer.bias))
            h = g.op("Gemm", [h, weight, bias], f"{prefix}.{i}.out", transB=1)
        elif isinstance(layer, nn.ReLU):
            h = g.op("Relu", [h], f"{prefix}.{i}.out")
        else:
            raise ValueError(f"cannot export head layer {i} of type {type(layer).__name__}")
    return h


def _member(g: Graph, network, x: str, obs: str, m: str, prefix: str) -> str:
    """One :class:`~neumiss.network.NeuMissNetwork`'s raw output: block, head, plus the linear
    ``skip`` (``MatMul`` by its transposed weight) when the head has an MLP, plus the
    mask's linear term (``M`` times its transposed weight) with ``mask_skip``."""
    h = _block(g, network.block, x, obs, m, f"{prefix}block")
    ramps = None if network.spline is None else _ramps(g, network.encoding, h,
                                                        f"{prefix}encoding")
    inputs = h if ramps is None or network.skip is None else g.op(
        "Concat", [h, ramps], f"{prefix}head.inputs", axis=1)  # an MLP reads the ramps
    out = _head(g, network.head, inputs, f"{prefix}head")
    if network.skip is not None:
        weight = g.constant(f"{prefix}skip.weight_t", _array(network.skip.weight).T)
        skip = g.op("MatMul", [h, weight], f"{prefix}skip.out")
        out = g.op("Add", [out, skip], f"{prefix}head_plus_skip")
    if ramps is not None:
        weight = g.constant(f"{prefix}spline.weight_t", _array(network.spline.weight).T)
        spline = g.op("MatMul", [ramps, weight], f"{prefix}spline.out")
        out = g.op("Add", [out, spline], f"{prefix}plus_spline")
    if network.mask_skip is not None:
        weight = g.constant(f"{prefix}mask_skip.weight_t", _array(network.mask_skip.weight).T)
        mask_term = g.op("MatMul", [m, weight], f"{prefix}mask_skip.out")
        out = g.op("Add", [out, mask_term], f"{prefix}plus_mask_skip")
    return out


def _ramps(g: Graph, encoding, h: str, prefix: str) -> str:
    """The spline term's ramps of ``h`` (N, d), (N, R): ``Gather`` of each ramp's column,
    then ``Clip((h - left) / width, 0, 1)``
    (:class:`~neumiss.network.PiecewiseLinearEncoding`)."""
    feature = g.constant(f"{prefix}.feature", encoding.feature.cpu().numpy(), np.int64)
    columns = g.op("Gather", [h, feature], f"{prefix}.columns", axis=1)
    shifted = g.op("Sub", [columns, g.constant(f"{prefix}.left", _array(encoding.left))],
                   f"{prefix}.shifted")
    scaled = g.op("Div", [shifted, g.constant(f"{prefix}.width", _array(encoding.width))],
                  f"{prefix}.scaled")
    return g.op("Clip", [scaled, g.constant(f"{prefix}.zero", 0.0),
                         g.constant(f"{prefix}.one", 1.0)], f"{prefix}.ramps")


def _member_blocks(g: Graph, members, x: str, obs: str, m: str) -> tuple[str, bool]:
    """The members' block outputs and whether they share one block: members trained
    together do, and their block is computed once, (N, d); otherwise each member's
    block, side by side, (N, K d)."""
    if not any(first_equal_blocks([member.block for member in members])):
        return _block(g, members[0].block, x, obs, m, "block"), True
    outputs = [_block(g, member.block, x, obs, m, f"member{k}.block")
               for k, member in enumerate(members)]
    return g.op("Concat", outputs, "members.blocks", axis=1), False


def _side_by_side(matrices: list[np.ndarray], same_input: bool) -> np.ndarray:
    """The members' matrices (in, out) as one: ``(in, K out)`` when every member reads the
    same input, else block-diagonal ``(K in, K out)`` over the members' inputs side by side."""
    return np.hstack(matrices) if same_input else scipy.linalg.block_diag(*matrices)


def _shared_ramps(g: Graph, members, h: str, block_is_shared: bool) -> str | None:
    """The members' spline ramps of their shared block's output ``h`` (:func:`_ramps`), or
    None without the spline term; members with it always share one block and knots."""
    if members[0].spline is None:
        return None
    if not block_is_shared:
        raise ValueError("cannot export an ensemble of spline networks with their own "
                         "blocks: members with a spline term share one block")
    return _ramps(g, members[0].encoding, h, "encoding")


def _members_side_by_side(g: Graph, members, x: str, obs: str, m: str,
                          average: bool = False) -> str:
    """Every member's raw output, (N, K, n_outputs), with ordinary 2-D ``Gemm`` nodes: the
    members' head layers side by side in one matrix per layer (:func:`_side_by_side`), so
    the graph has as many nodes as one member and each row's output does not depend on
    the other rows of the call.

    With ``average``, their mean instead, (N, n_outputs): the last layer of a head, its
    skip and its mask term are linear, so the mean over the members is folded into their
    weights (each member's stacked and divided by K, or averaged where the members read
    the same input) and the graph never forms the K outputs."""
    h, same_input = _member_blocks(g, members, x, obs, m)
    out, block_is_shared = h, same_input
    ramps = _shared_ramps(g, members, h, block_is_shared)
    if ramps is not None and members[0].skip is not None:  # an MLP reads them beside h
        out = g.op("Concat", [h, ramps], "members.head.inputs", axis=1)
    k = len(members)
    last = max(i for i, layer in enumerate(members[0].head) if isinstance(layer, nn.Linear))

    def linear(matrices: list[np.ndarray], shared: bool, fold: bool) -> np.ndarray:
        if not fold:
            return _side_by_side(matrices, shared)
        return sum(matrices) / k if shared else np.vstack(matrices) / k

    for i, layer in enumerate(members[0].head):
        if isinstance(layer, nn.Linear):
            fold = average and i == last
            weight = g.constant(f"members.head.{i}.weight", linear(
                [_array(n.head[i].weight).T for n in members], same_input, fold))
            biases = [_array(n.head[i].bias) for n in members]
            bias = g.constant(f"members.head.{i}.bias",
                              sum(biases) / k if fold else np.concatenate(biases))
            out = g.op("Gemm", [out, weight, bias], f"members.head.{i}.out")
            same_input = False
        elif isinstance(layer, nn.ReLU):
            out = g.op("Relu", [out], f"members.head.{i}.out")
        else:
            raise ValueError(f"cannot export head layer {i} of type {type(layer).__name__}")
    if members[0].skip is not None:
        weight = g.constant("members.skip.weight", linear(
            [_array(n.skip.weight).T for n in members], block_is_shared, average))
        out = g.op("Add", [out, g.op("MatMul", [h, weight], "members.skip.out")],
                   "members.head_plus_skip")
    if ramps is not None:
        weight = g.constant("members.spline.weight", linear(
            [_array(n.spline.weight).T for n in members], True, average))
        out = g.op("Add", [out, g.op("MatMul", [ramps, weight], "members.spline.out")],
                   "members.plus_spline")
    if members[0].mask_skip is not None:  # every member reads the same mask
        weight = g.constant("members.mask_skip.weight", linear(
            [_array(n.mask_skip.weight).T for n in members], True, average))
        out = g.op("Add", [out, g.op("MatMul", [m, weight], "members.mask_skip.out")],
                   "members.plus_mask_skip")
    if average:
        return out
    shape = g.constant("members.shape", [0, k, -1], np.int64)
    return g.op("Reshape", [out, shape], "members.raw")


def _member_mean(g: Graph, values: str, n_members: int, name: str) -> str:
    """The mean over the member axis of ``values`` (N, K, n) -> (N, n)."""
    total = g.op("ReduceSum", [values, g.constant(f"{name}_axes", [1], np.int64)],
                 f"{name}_sum", keepdims=0)
    return g.op("Mul", [total, g.constant(f"{name}_weight", 1.0 / n_members)], name)


def _network(g: Graph, network, x: str, obs: str, m: str) -> str:
    """The network's raw output (N, n_outputs): one network, or an ensemble as one graph
    (:func:`_members_side_by_side`) combined as :class:`~neumiss.network.EnsembleNetwork`
    does (average of outputs or of probabilities, then back to logits)."""
    if not isinstance(network, EnsembleNetwork):
        return _member(g, network, x, obs, m, "")
    members = list(network.members)
    if network.combine == "mean":  # linear in the last layers: folded into their weights
        return _members_side_by_side(g, members, x, obs, m, average=True)
    raws = _members_side_by_side(g, members, x, obs, m)
    low = g.constant("epsilon", EPSILON)
    if network.combine == "binary_probability":
        high = g.constant("one_minus_epsilon", 1 - EPSILON)
        probabilities = g.op("Sigmoid", [raws], "members.p")
        p = g.op("Clip", [_member_mean(g, probabilities, len(members), "p_mean"), low, high],
                 "p_clipped")
        log_odds = [g.op("Log", [p], "log_p"),
                    g.op("Log", [g.op("Sub", [g.constant("one", 1.0), p], "q")], "log_q")]
        return g.op("Sub", log_odds, "raw")
    probabilities = g.op("Softmax", [raws], "members.p", axis=-1)
    p = g.op("Clip", [_member_mean(g, probabilities, len(members), "p_mean"), low], "p_clipped")
    return g.op("Log", [p], "raw")


def network_output(g: Graph, estimator, x_in: str = "X", m_in: str = "M") -> str:
    """The estimator's raw network output (N, n_outputs) for the rows of tensors
    ``x_in`` (encoded values, 0 where missing) and ``m_in`` (1 = missing): its
    standardization, block and head. Call it once per graph (node names are fixed)."""
    obs = g.op("Sub", [g.constant("one", 1.0), m_in], "one_minus_M")
    return _network(g, estimator.network_, _standardize(g, estimator.preprocessor_, x_in, obs),
                    obs, m_in)


def input_values(d: int) -> list[onnx.ValueInfoProto]:
    """The graph inputs ``X`` and ``M`` of the contract, float32 (N, d)."""
    return [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", d], "raw values, 0 if missing"),
        helper.make_tensor_value_info("M", TensorProto.FLOAT, ["N", d], "1 if missing, else 0"),
    ]


def finish_model(g: Graph, estimator, outputs, metadata: dict[str, str], opset: int,
                 path=None) -> onnx.ModelProto:
    """The checked model of graph ``g`` with the contract's inputs (of ``estimator``'s
    encoded width), ``outputs`` and ``metadata``; written to ``path`` when given."""
    d = int(estimator.encoder_.n_features_out_)
    graph = helper.make_graph(g.nodes, metadata["estimator"], input_values(d), outputs,
                              initializer=list(g.initializers.values()))
    opset_ids = [helper.make_opsetid("", int(opset))]
    model = helper.make_model(
        graph,
        opset_imports=opset_ids,
        ir_version=helper.find_min_ir_version_for(opset_ids),
        producer_name=PRODUCER,
        producer_version=__version__,
        doc_string=f"NeuMiss {metadata['task']} model exported by neumiss {__version__}. "
        f"{metadata['input_contract']}",
    )
    helper.set_model_props(model, {**metadata, DIGEST_KEY: "0" * 64})
    onnx.checker.check_model(model, full_check=True)
    # protobuf writes the properties in order, so the same bytes with the digest in place.
    model.metadata_props[-1].value = hashlib.sha256(model.SerializeToString()).hexdigest()
    if path is not None:
        onnx.save_model(model, os.fspath(path))
    return model


def smallest(g: Graph, values: str, k: int, name: str) -> str:
    """The ``k`` smallest of each row of ``values``, in increasing order (``TopK``)."""
    k_name = g.constant(f"{name}_k", [k], np.int64)
    g.nodes.append(helper.make_node("TopK", [values, k_name], [name, f"{name}_indices"],
                                    name=name, axis=-1, largest=0, sorted=1))
    return name


def target_units(g: Graph, estimator, values: str, name: str) -> str:
    """A regressor's network outputs ``values`` (float64) in the units of ``y``, as
    ``predict`` computes them: ``values * y_scale_ + y_mean_``, then ``Exp`` of that when
    the network fits ``log y`` (``log_target_``). Returns the node named ``name``."""
    log = estimator.log_target_
    scaled = g.op("Mul", [values, g.constant("y_scale", estimator.y_scale_, np.float64)],
                  f"{name}_scaled")
    shifted = g.op("Add", [scaled, g.constant("y_mean", estimator.y_mean_, np.float64)],
                   f"{name}_log" if log else name)
    return g.op("Exp", [shifted], name) if log else shifted


def _quantile_outputs(g: Graph, estimator, raw: str) -> list[onnx.ValueInfoProto]:
    """A quantile regressor: ``quantiles`` (sorted per row, as ``predict_quantiles``) and
    ``y``, the median (``predict``), in float64."""
    n_q = len(estimator.quantiles)
    ordered = g.op("Cast", [smallest(g, raw, n_q, "raw_sorted")], "raw_sorted_double",
                   to=TensorProto.DOUBLE)
    target_units(g, estimator, ordered, "quantiles")
    median = int(np.flatnonzero(np.asarray(estimator.quantiles) == 0.5)[0])
    g.op("Gather", ["quantiles", g.constant("median_index", median, np.int64)], "y", axis=1)
    return [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N"]),
            helper.make_tensor_value_info("quantiles", TensorProto.DOUBLE, ["N", n_q])]


def _regressor_outputs(g: Graph, estimator, raw: str) -> list[onnx.ValueInfoProto]:
    """``y`` in float64, as ``predict`` computes it (:func:`target_units`)."""
    z = g.op("Squeeze", [raw, g.constant("axis_1", [1], np.int64)], "z")
    z64 = g.op("Cast", [z], "z_double", to=TensorProto.DOUBLE)
    target_units(g, estimator, z64, "y")
    return [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N"])]


def _classes_constant(g: Graph, classes: np.ndarray) -> int:
    """Store ``classes_`` as initializer ``classes``; return its ONNX element type."""
    if classes.dtype.kind == "b":
        g.constant("classes", classes, np.bool_)
        return TensorProto.BOOL
    if classes.dtype.kind in "iu":
        g.constant("classes", classes, np.int64)
        return TensorProto.INT64
    if classes.dtype.kind == "f":
        g.constant("classes", classes, np.float64)
        return TensorProto.DOUBLE
    if classes.dtype.kind == "U" or all(isinstance(c, str) for c in classes):
        g.strings("classes", classes)
        return TensorProto.STRING
    raise ValueError(
        f"cannot export class labels of dtype {classes.dtype}: labels must be integers, "
        "floats, booleans or strings"
    )


def classifier_outputs(g: Graph, estimator, raw: str) -> list[onnx.ValueInfoProto]:
    """``label`` and ``probabilities`` exactly as ``predict`` / ``predict_proba`` decide."""
    n_classes = len(estimator.classes_)
    label_type = _classes_constant(g, estimator.classes_)
    if n_classes == 2:
        # One logit: class 1 when logit > 0 (not argmax of the rounded probabilities).
        logit = g.op("Squeeze", [raw, g.constant("axis_1", [1], np.int64)], "logit")
        positive = g.op("Greater", [logit, g.constant("zero", 0.0)], "logit_positive")
        index = g.op("Cast", [positive], "class_index", to=TensorProto.INT64)
        p1 = g.op("Sigmoid", [raw], "p1")
        p0 = g.op("Sub", [g.constant("one", 1.0), p1], "p0")
        g.op("Concat", [p0, p1], "probabilities", axis=1)
    else:
        index = g.op("ArgMax", [raw], "class_index", axis=1, keepdims=0)
        g.op("Softmax", [raw], "probabilities", axis=1)
    g.op("Gather", ["classes", index], "label", axis=0)
    return [
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", n_classes]),
    ]


def _json_labels(values) -> list:
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _json_encoding(state: list[dict]) -> list[dict]:
    """The encoder's state with column names JSON can hold (numpy scalars as Python ones)."""
    return [{**column, "name": _json_labels([column["name"]])[0]} for column in state]


def metadata(estimator, task: str) -> dict[str, str]:
    """The model's ``metadata_props``: all a scorer needs besides the graph (feature names,
    encoding, classes) and the settings it was fitted with, as strings (JSON for lists)."""
    names = getattr(estimator, "feature_names_in_", None)
    classes = _json_labels(estimator.classes_) if task == "classification" else None
    return {
        "producer": PRODUCER,
        "neumiss_version": __version__,
        "format_version": str(FORMAT_VERSION),
        "estimator": type(estimator).__name__,
        "task": task,
        "n_features": str(estimator.n_features_in_),
        "feature_names": json.dumps(_json_labels(names) if names is not None else None),
        "encoding": json.dumps(_json_encoding(estimator.encoder_.get_state())),
        "encoded_feature_names": json.dumps(estimator.encoder_.output_names()),
        "classes": json.dumps(classes),
        "depth": str(estimator.best_depth_),
        "weight_sharing": estimator.weight_sharing_,
        "residual": json.dumps(bool(estimator.residual)),
        "mlp_depth": str(estimator.mlp_depth_),
        "spline_ramps": str(estimator.spline_ramps_),
        "log_target": json.dumps(bool(getattr(estimator, "log_target_", False))),
        "ensemble_size": str(estimator.ensemble_size),
        "input_contract": INPUT_CONTRACT,
        # What predict refuses (values too far from the training data), for the scorers.
        "standardization": json.dumps({key: value.tolist() for key, value in
                                       estimator.preprocessor_.get_state().items()}),
    }


def _check_estimator(estimator) -> str:
    """The task of a fitted NeuMiss estimator; clear errors for anything else.

    A NeuMiss estimator is recognised by its ``_build_fitted_network`` method
    (this module sits below :mod:`neumiss.estimators` and does not import it).
    """
    is_neumiss = hasattr(estimator, "_build_fitted_network")
    if is_neumiss and is_regressor(estimator):
        task = "regression"
    elif is_neumiss and is_classifier(estimator):
        task = "classification"
    else:
        raise TypeError(
            "export_onnx expects a fitted NeuMissRegressor or NeuMissClassifier, got "
            f"{type(estimator).__module__}.{type(estimator).__name__}"
        )
    check_is_fitted(estimator, "network_")
    return task


def export_onnx(estimator, path=None, *, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """Export a fitted NeuMiss estimator to an ONNX model with inputs ``X`` and ``M``.

    The graph computes the estimator's ``predict`` (regressor) or
    ``predict_proba`` and ``predict`` (classifier) from raw feature values:
    standardization, NeuMiss block, head and output mapping are all inside.

    Parameters
    ----------
    estimator : fitted NeuMissRegressor or NeuMissClassifier
    path : str or path-like, optional
        Where to write the model; nothing is written when omitted.
    opset : int, default=17
        ONNX opset of the default domain, from 13 to the installed ``onnx``'s newest.

    Returns
    -------
    onnx.ModelProto
        Inputs ``X`` and ``M``, float32 of shape (N, d), N dynamic, d the number
        of encoded columns (``estimator.encoder_.n_features_out_``); ``X`` holds
        0 where ``M`` is 1. Outputs: ``y`` float64 (N,) for a regressor (a
        quantile regressor: the median, and ``quantiles`` float64 (N, n_quantiles));
        ``label`` (N,) (dtype of ``classes_``: int64, float64, bool or string)
        and ``probabilities`` float32 (N, n_classes) for a classifier.
        ``metadata_props`` record the producer, version, feature names, the
        encoding of each input column and the encoded column names, classes,
        depth, weight sharing, residual option, MLP depth and the input contract.

    Raises
    ------
    TypeError
        If ``estimator`` is not a NeuMiss estimator.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    ValueError
        For an unsupported ``opset``, class labels that ONNX cannot hold, or
        features whose scale float32 inputs cannot carry.
    """
    task = check_exportable(estimator, opset)
    g = Graph()
    raw = network_output(g, estimator)
    if task == "regression" and hasattr(estimator, "predict_quantiles"):
        outputs = _quantile_outputs(g, estimator, raw)
    elif task == "regression":
        outputs = _regressor_outputs(g, estimator, raw)
    else:
        outputs = classifier_outputs(g, estimator, raw)
    return finish_model(g, estimator, outputs, metadata(estimator, task), opset, path)


def check_exportable(estimator, opset: int) -> str:
    """The task of a fitted NeuMiss estimator that can be exported at ``opset``; raises
    ``TypeError``, ``NotFittedError`` or ``ValueError`` as :func:`export_onnx` documents."""
    task = _check_estimator(estimator)
    check_params("export_onnx", {"opset": opset}, _EXPORT_CONSTRAINTS)
    _check_float32_scaling(estimator)
    return task
