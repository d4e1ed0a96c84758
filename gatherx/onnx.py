"""ONNX interop: run a Gather node or single-node model with gatherx; export torch modules to ONNX.

Needs the ``onnx`` package; :func:`export` also needs ``torch`` (and ``onnxscript`` from opset 18).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from . import _rules
from ._api import gather
from ._dispatch import backend_of

__all__ = ["export", "opset_of", "run"]

#: The first opset the torch.export-based (dynamo) exporter targets; below it, the
#: TorchScript exporter is the one that writes models of the requested version.
DYNAMO_MIN_OPSET = 18
_DEFAULT_DOMAINS = ("", "ai.onnx")
#: The node attributes that name the dtype of what the node makes (Cast's, the random ops').
_DTYPE_ATTRIBUTES = frozenset({"to", "dtype"})


def _holds_bfloat16(graph: onnx.GraphProto) -> bool:
    """Whether an input, output, typed value or initializer of ``graph`` is bfloat16, or a
    node (of it or of its subgraphs) makes one: a cast to it, a constant of it (the
    TorchScript exporter types no value between nodes)."""
    typed = (*graph.input, *graph.output, *graph.value_info)
    bfloat16 = onnx.TensorProto.BFLOAT16
    if any(v.type.tensor_type.elem_type == bfloat16 for v in typed) or any(
        t.data_type == bfloat16 for t in graph.initializer
    ):
        return True
    kinds = onnx.AttributeProto
    for node in graph.node:
        for a in node.attribute:
            if (
                (a.type == kinds.INT and a.name in _DTYPE_ATTRIBUTES and a.i == bfloat16)
                or (a.type == kinds.TENSOR and a.t.data_type == bfloat16)
                or (a.type == kinds.GRAPH and _holds_bfloat16(a.g))
                or (a.type == kinds.GRAPHS and any(_holds_bfloat16(g) for g in a.graphs))
            ):
                return True
    return False


def opset_of(model: onnx.ModelProto) -> int:
    """The version of the default ONNX domain (``""`` or ``ai.onnx``) a model imports.

    Raises
    ------
    ValueError
        The model does not import the default domain, so it cannot hold a Gather node.
    """
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        msg = "gatherx.onnx: the model does not import the default ONNX domain (ai.onnx)"
        raise ValueError(msg)
    return int(versions[0])


def _check_node(node: onnx.NodeProto) -> int:
    """The node's ``axis`` (default 0), after checking it is a plain ONNX Gather."""
    if node.op_type != "Gather" or node.domain not in _DEFAULT_DOMAINS:
        where = f"{node.domain}::" if node.domain else ""
        msg = f"gatherx.onnx: can only run a Gather node, got {where}{node.op_type}"
        raise ValueError(msg)
    if len(node.input) != 2 or len(node.output) != 1:
        msg = (
            f"gatherx.onnx: Gather takes 2 inputs and gives 1 output, got {len(node.input)} "
            f"inputs and {len(node.output)} outputs"
        )
        raise ValueError(msg)
    axis = 0
    for attribute in node.attribute:
        if attribute.name != "axis" or attribute.type != onnx.AttributeProto.INT:
            msg = f"gatherx.onnx: Gather has one int attribute, axis; got {attribute.name!r}"
            raise ValueError(msg)
        axis = int(attribute.i)
    return axis


def _feeds(names: Sequence[str], inputs: Any, constants: Mapping[str, Any]) -> list[Any]:
    """The arrays for ``names``: from ``inputs`` (a sequence or a name mapping), else constants."""
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs and n not in constants]
        if missing:
            msg = f"gatherx.onnx: no value for input(s) {missing}"
            raise ValueError(msg)
        return [inputs[n] if n in inputs else constants[n] for n in names]
    free = [n for n in names if n not in constants]
    inputs = list(inputs)
    if len(inputs) != len(free):
        msg = f"gatherx.onnx: expected {len(free)} input(s) for {free}, got {len(inputs)}"
        raise ValueError(msg)
    given = dict(zip(free, inputs, strict=True))
    return [given[n] if n in given else constants[n] for n in names]


def _like(x: Any, other: Any) -> Any:
    """NumPy constant ``x`` moved to the framework and device of the array ``other``; for
    JAX left as it is: :func:`gatherx.gather` takes NumPy data at JAX indices itself, and
    refuses what JAX cannot hold (strings, 64-bit values beyond 32 bits without x64)."""
    from array_api_compat import (
        array_namespace,
        device,
        is_array_api_obj,
        is_jax_array,
        is_torch_array,
    )

    if not isinstance(x, np.ndarray) or isinstance(other, np.ndarray):
        return x
    if not is_array_api_obj(other) or is_jax_array(other):
        return x
    name = _rules.dtype_name(x.dtype)
    if is_torch_array(other) and name == "bfloat16":
        import torch  # (loaded: other is a tensor)

        # torch reads no ml_dtypes array: the same bits, as int16
        bits = torch.from_numpy(np.ascontiguousarray(x).view(np.int16))
        return bits.view(torch.bfloat16).to(other.device)
    xp = array_namespace(other)
    try:
        return xp.asarray(x, device=device(other))
    except (TypeError, ValueError) as why:  # a dtype the library has no arrays of
        framework = backend_of(other, 0, "gatherx.onnx", "indices").name
        msg = (
            f"gatherx.onnx: the model's data initializer of dtype {name} cannot be moved to "
            f"{framework}, the framework of the indices given, which has no such arrays; "
            f"pass NumPy indices to gather it with NumPy"
        )
        raise TypeError(msg) from why


def run(
    proto: onnx.NodeProto | onnx.GraphProto | onnx.ModelProto,
    inputs: Sequence[Any] | Mapping[str, Any],
    *,
    opset: int | None = None,
) -> list[Any]:
    """Evaluate a Gather node, or a graph or model made of one, with :func:`gatherx.gather`.

    Parameters
    ----------
    proto : onnx.NodeProto, onnx.GraphProto or onnx.ModelProto
        A ``Gather`` node of the default domain, or a graph/model whose only node it is. Its
        ``axis`` attribute is honoured; initializers of a graph or model feed its inputs.
    inputs : sequence or mapping of arrays
        The inputs not given by initializers, in order, or by name. Arrays of any backend
        gatherx supports; initializers are moved to the framework and device of the data or
        indices given with them.
    opset : int, optional
        The opset to follow (1-10 reject negative indices). A model's own default-domain
        version is used, and a different ``opset`` is an error; for a node or a graph it
        defaults to 13, as in :func:`gatherx.gather`.

    Returns
    -------
    list
        The one output, in a list as onnxruntime's ``InferenceSession.run`` returns it.

    Raises
    ------
    ValueError
        Not a single default-domain Gather node, missing inputs, or an ``opset`` that
        contradicts the model's. Otherwise what :func:`gatherx.gather` raises.
    """
    if isinstance(proto, onnx.ModelProto):
        model_opset = opset_of(proto)
        if opset is not None and opset != model_opset:
            msg = f"gatherx.onnx: the model is opset {model_opset}, not {opset}"
            raise ValueError(msg)
        opset = model_opset
        proto = proto.graph
    constants: dict[str, Any] = {}
    if isinstance(proto, onnx.GraphProto):
        if len(proto.node) != 1:
            ops = [n.op_type for n in proto.node]
            msg = f"gatherx.onnx: can only run a graph of one Gather node, got {ops}"
            raise ValueError(msg)
        # Copies: to_array may return read-only views of the proto's bytes.
        constants = {t.name: numpy_helper.to_array(t).copy() for t in proto.initializer}
        node = proto.node[0]
    elif isinstance(proto, onnx.NodeProto):
        node = proto
    else:
        msg = f"gatherx.onnx: expected a NodeProto, GraphProto or ModelProto, got {type(proto)}"
        raise TypeError(msg)
    axis = _check_node(node)
    data, indices = _feeds(list(node.input), inputs, constants)
    if node.input[0] in constants:
        data = _like(data, indices)
    return [gather(data, indices, axis=axis, opset=13 if opset is None else opset)]


def export(
    module: Any,
    args: tuple[Any, ...],
    f: str | os.PathLike[str] | None = None,
    *,
    opset: int = DYNAMO_MIN_OPSET,
    **kwargs: Any,
) -> onnx.ModelProto:
    """``torch.onnx.export`` of a module that calls gatherx, at exactly the opset asked for.

    From opset 18 this is the torch.export-based exporter (``dynamo=True``, which needs
    ``onnxscript``); below 18, where that exporter cannot convert its graph down and would
    silently keep opset 18, it is the TorchScript exporter (``dynamo=False``) with
    gatherx's autograd function's ``symbolic`` (one ``Gather`` node), whose deprecation and
    tracer warnings are silenced:
    the trace reads the example indices once for gatherx's eager bounds check, and the
    exported ``Gather`` checks bounds and takes negative indices (opset >= 11) by itself.

    Parameters
    ----------
    module : torch.nn.Module
        The module, exported in the mode it is in: call ``module.eval()`` first for inference.
    args : tuple
        Example inputs.
    f : path, optional
        Where to also save the model.
    opset : int, optional
        The ONNX opset of the model. Default 18.
    **kwargs
        Passed on to ``torch.onnx.export`` (input_names, dynamic_shapes or dynamic_axes, ...).

    Returns
    -------
    onnx.ModelProto
        The model; its default-domain opset is ``opset``.

    Raises
    ------
    RuntimeError
        torch wrote a model of another opset. Otherwise what ``torch.onnx.export`` raises.
    TypeError
        The model holds bfloat16 values below opset 13, where ONNX has no bfloat16.
    """
    import torch

    if opset >= DYNAMO_MIN_OPSET:
        program = torch.onnx.export(module, args, dynamo=True, opset_version=opset, **kwargs)
        if program is None:  # pragma: no cover - dynamo=True always returns the program
            msg = "gatherx.onnx: torch.onnx.export returned no program"
            raise RuntimeError(msg)
        model = program.model_proto
    else:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.onnx")
            with warnings.catch_warnings():
                for message in ("You are using the legacy TorchScript", "The feature will be"):
                    warnings.filterwarnings("ignore", message, DeprecationWarning)
                warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
                torch.onnx.export(module, args, path, dynamo=False, opset_version=opset, **kwargs)
            model = onnx.load(path)
    if opset_of(model) != opset:
        msg = f"gatherx.onnx: torch wrote an opset {opset_of(model)} model, not opset {opset}"
        raise RuntimeError(msg)
    if opset < _rules.BFLOAT16_SINCE and _holds_bfloat16(model.graph):
        msg = (
            f"gatherx.onnx: ONNX has bfloat16 (its Gather included) from opset "
            f"{_rules.BFLOAT16_SINCE}; this model holds bfloat16 values at opset {opset}: "
            f"export at opset {_rules.BFLOAT16_SINCE} or later, or convert the data first"
        )
        raise TypeError(msg)
    if f is not None:
        onnx.save(model, os.fspath(f))
    return model
