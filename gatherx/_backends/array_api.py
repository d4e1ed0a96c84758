"""Gather for any other array-API namespace, following what :mod:`.capabilities` says it can do.

Eager dense namespaces (array-api-strict, CuPy) use the standard's functions only; chunked lazy
ones (cubed) gather in blockwise tasks with the bounds check in the graph; graph-building ones
(ndonnx) emit ONNX Gather, the runtime checking values unknown at build time; sparse ones
(pydata sparse) gather stored elements by coordinates, indices kept on the host.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import device as device_of

from .. import _errors, _rules
from .._indices import host_indices, is_host
from . import capabilities as caps
from .base import Backend

# Elements per block of the masked sum in gather_grad: bounds its temporary memory.
_BLOCK_ELEMENTS = 1 << 22
# Before opset 11 a negative index is bad; where only a runtime sees the values, it gets one
# that no axis holds, so that the runtime refuses it instead of counting from the end.
_NEVER_VALID = np.iinfo(np.int64).max


class ArrayApiBackend(Backend):
    """One array-API namespace ``xp`` (array-api-strict, CuPy, cubed, ndonnx, sparse, ...)."""

    no_out_because = "gatherx writes out= into NumPy arrays and PyTorch tensors only"

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.can = caps.capabilities(xp)
        self.name = self.can.name  # in messages, the library: array_api_strict, cubed, ...
        self.max_rank = self.can.max_rank

    def dtype_name(self, x: Any) -> str:
        return caps.dtype_name(x.dtype)

    # -- indices ----------------------------------------------------------------------

    def index(self, indices: Any, like: Any, fn: str) -> Any:
        if is_host(indices):
            return host_indices(indices, fn)
        indices = super().index(indices, like, fn)
        if self.can.native_indices and self.can.evaluation != caps.GRAPH:
            return indices
        # Sparse indices are kept dense on the host, and a graph's known values are read
        # there; values a runtime computes stay in the graph.
        values = caps.read(indices, self.can)
        return indices if values is None else values

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        if self.can.evaluation == caps.EAGER and device_of(index) != device_of(like):
            raise _errors.device_mismatch(fn, device_of(index), device_of(like))

    def bounded(
        self,
        index: Any,
        like: Any,
        size: Any,
        axis: int,
        opset: int,
        fn: str,
        writer: Any = None,
    ) -> Any:
        if writer is not None:  # out= reads values now, whatever the library
            return super().bounded(index, like, size, axis, opset, fn, writer)
        if isinstance(index, np.ndarray):
            if size is None:  # a symbolic dimension: the runtime running the graph checks
                _check_sign(index, axis, opset, fn)
                return self.from_host(index, like)
            low = _rules.check_host_bounds(index, size, axis, opset, fn)
            # wrapped on the host, where it costs least (and adds no node to a graph)
            return self.from_host(super().wrap(index, size, low, opset), like)
        if size is None:
            return self.unchecked(index, size, axis, opset, fn)
        return super().bounded(index, like, size, axis, opset, fn)

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        if self.can.sparse or self.can.evaluation == caps.CHUNKED:
            return host  # their gathers take host indices
        # ascontiguousarray would turn a 0-d array into a 1-d one
        host = host if host.flags.c_contiguous else np.ascontiguousarray(host)
        if self.can.evaluation == caps.GRAPH:
            return self.xp.asarray(host)
        device = device_of(like)
        if host.dtype == np.int64 and not caps.holds_int64(self.xp, device):
            # checked values, each below an axis's length, which such a device counts in int32
            host = host.astype(np.int32)
        return self.xp.asarray(host, device=device)

    def size(self, index: Any) -> int:
        if caps.symbolic(tuple(index.shape)):
            return 1  # not known to be empty: checked like any other
        return super().size(index)

    def bounds(self, index: Any) -> tuple[int, int] | None:
        if self.can.evaluation != caps.EAGER:
            return None  # values known only when the graph is computed or run
        return int(self.xp.min(index)), int(self.xp.max(index))

    def to_host(self, index: Any) -> np.ndarray:
        values = caps.read(index, self.can)
        assert values is not None  # only readable indices are located
        return values

    def unchecked(self, index: Any, size: Any, axis: int, opset: int, fn: str) -> Any:
        if self.can.evaluation == caps.CHUNKED:
            from . import cubed_blocks

            return cubed_blocks.check(index, size, axis, opset, fn)
        return self._graph_index(index, size, opset, fn)

    def _graph_index(self, index: Any, size: Any, opset: int, fn: str) -> Any:
        """Graph indices the model's Gather checks when a runtime runs it."""
        xp = self.xp
        index = xp.astype(index, xp.int64)
        if opset < _rules.NEGATIVE_INDICES_SINCE:
            index = xp.where(index < 0, xp.asarray(_NEVER_VALID, dtype=xp.int64), index)
        if fn == "gather_grad" and size is not None:
            # The masked sum drops a bad index silently: a Gather of the positions checks
            # each (the runtime's error) and makes negatives count from the end.
            positions = xp.arange(size, dtype=xp.int64)
            return _take(xp, positions, index, 0, self.can)
        return index

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        if isinstance(index, np.ndarray):
            return super().wrap(index, size, low, opset)
        return self.xp.where(index < 0, index + size, index) if low < 0 else index

    # -- data -------------------------------------------------------------------------

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        if role == "grad" and caps.symbolic(tuple(x.shape)):  # _masked_sum needs its sizes
            raise _errors.grad_symbolic(tuple(x.shape))
        why = self.can.lacks.get(self.dtype_name(x))
        if why is not None:
            raise _errors.library_lacks_dtype(fn, role, self.name, self.dtype_name(x), why)
        if self.can.sparse and getattr(x, "format", None) not in ("coo", "gcxs"):
            raise _errors.unsupported_array(
                fn, role, x, f"format {getattr(x, 'format', None)!r}",
                "convert it with .asformat('coo') first",
            )  # fmt: skip
        return x

    def take(self, data: Any, index: Any, axis: int) -> Any:
        if self.can.sparse:
            from . import sparse_coords

            return sparse_coords.take(data, index, axis)
        if self.can.evaluation == caps.CHUNKED:
            from . import cubed_blocks

            return cubed_blocks.take(data, index, axis)
        if self.can.evaluation == caps.GRAPH:
            index = self.xp.astype(index, self.xp.int64)  # ndonnx's take wants int64
        last = data.ndim - 1
        if self.can.strings_last_axis and axis != last and self.dtype_name(data) == "string":
            xp = self.xp
            moved = xp.permute_dims(data, (*range(axis), *range(axis + 1, data.ndim), axis))
            out = _take(xp, moved, index, last, self.can)  # pre, post, indices
            back = (*range(axis), *range(last, out.ndim), *range(axis, last))
            return xp.permute_dims(out, back)
        return _take(self.xp, data, index, axis, self.can)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if self.can.sparse:
            from . import sparse_coords

            return sparse_coords.scatter_add(shape, index, grad, axis)
        if self.can.evaluation == caps.CHUNKED:
            from . import cubed_blocks

            return cubed_blocks.scatter_add(shape, index, grad, axis)
        if isinstance(index, np.ndarray):  # the graph path's host indices, already checked
            index = self.from_host(index, grad)
        return self._masked_sum(shape, index, grad, axis)

    def _masked_sum(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        """Scatter-add by masked sums: the standard has no scatter, and a one-hot matmul would
        let an inf in one row turn other rows into nan (0 * inf)."""
        xp = self.xp
        size = shape[axis]
        dev = device_of(grad)
        flat = xp.reshape(index, (-1,))
        n = flat.shape[0]
        if n == 0 or size == 0 or math.prod(shape) == 0:
            return xp.zeros(shape, dtype=grad.dtype, device=dev)
        dtype, name = grad.dtype, self.dtype_name(grad)
        if name in _rules.HALF_DTYPES:  # sum in float32, round once
            grad = xp.astype(grad, xp.float32)
        in_order = not self.can.ordered_sums
        if in_order and name == "uint64":  # the same bits, and adds that wrap the same way
            grad = xp.astype(grad, xp.int64)
        pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
        g = xp.reshape(grad, (pre, 1, n, post))
        zero = xp.zeros((), dtype=grad.dtype, device=dev)
        targets = xp.arange(size, dtype=flat.dtype, device=dev)
        block = max(1, _BLOCK_ELEMENTS // (pre * n * post))
        parts = []
        for start in range(0, size, block):
            rows = targets[start : min(start + block, size)]
            mask = xp.reshape(flat, (1, 1, n, 1)) == xp.reshape(rows, (1, -1, 1, 1))
            masked = xp.where(mask, g, zero)
            parts.append(
                _running_sum(xp, masked, zero)
                if in_order
                else xp.sum(masked, axis=2, dtype=grad.dtype)
            )
        out = parts[0] if len(parts) == 1 else xp.concat(parts, axis=1)
        return xp.astype(xp.reshape(out, shape), dtype)


def _running_sum(xp: Any, x: Any, zero: Any) -> Any:
    """The sum over axis 2 of a rank-4 array added term after term in index order, as
    ``np.add.at`` adds (the last of its running sums: one ``CumSum`` node), into ``zero``
    (so that terms of ``-0.0`` alone sum to ``+0.0``, as in a sum into zeros)."""
    return xp.cumulative_sum(x, axis=2, dtype=x.dtype)[:, :, -1, :] + zero


def _take(xp: Any, data: Any, index: Any, axis: int, can: caps.Capabilities) -> Any:
    """The standard's take, which wants 1-D indices: any rank is a reshape away.

    1-D indices are one take (one ONNX Gather in a graph); where a dimension is symbolic the
    reshape back goes by the runtime shape.
    """
    if index.ndim == 1:
        return xp.take(data, index, axis=axis)
    out = xp.take(data, xp.reshape(index, (-1,)), axis=axis)
    if index.ndim == 0:
        return xp.squeeze(out, axis=axis)
    shape = _rules.output_shape(data.shape, index.shape, axis)
    if not can.symbolic_shapes or not caps.symbolic(shape):
        return xp.reshape(out, shape)
    dims = data.dynamic_shape
    runtime = xp.concat([dims[:axis], index.dynamic_shape, dims[axis + 1 :]])
    return xp.reshape(out, runtime)


def _check_sign(index: np.ndarray, axis: int, opset: int, fn: str) -> None:
    """Host indices for an axis of unknown size: refuse what is bad for any size (beyond
    int64, or negative before opset 11)."""
    negatives_bad = opset < _rules.NEGATIVE_INDICES_SINCE
    if index.size == 0 or (index.dtype != object and not (negatives_bad and index.min() < 0)):
        return
    low, high = _rules.INT64_BOUNDS
    found = _rules.first_outside(index, 0 if negatives_bad else low, high)
    if found is not None:
        raise _errors.out_of_bounds_symbolic(fn, *found, axis, opset)
