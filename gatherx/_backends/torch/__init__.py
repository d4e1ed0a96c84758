"""The PyTorch backend: the shared flow, with gatherx's autograd Functions wherever grad flows."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import _errors, _policy, _rules
from ..._indices import int64_clamped, plain_ints_shape
from ..._strategy import torch_grad_given
from ..base import Backend
from . import autograd, bounds, kernels, subclasses
from .domain import (
    PLAIN_TYPES,
    check_sparse,
    eager_bounded,
    eager_cpu_call,
    eager_ints,
    eager_low,
    eager_position,
    few_values,
    host_tensor,
    ints_index,
    shareable,
)
from .modes import compiling, needs_autograd, onnx_exporting, plain_eager, tracing

_grad_enabled = torch.is_grad_enabled
_INT64 = torch.int64
_GRAD = _rules.GRAD_OPSET
_HALF = kernels.HALF
_into: Any = None  # the out= module, imported on first use


class TorchBackend(Backend):
    """The shared flow on PyTorch tensors; with data that requires grad (or under torch.func,
    forward AD, a compiler or a tracer) every gather runs gatherx's ``autograd.Function``."""

    name = "torch"

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any, sparse: bool = False) -> Any:
        # host indices as a CPU tensor where the eager path reads them (the flow reads the
        # rest, and every bad index, by the same rules)
        index = indices if type(indices) is torch.Tensor else host_tensor(indices, data)
        if eager_cpu_call(data, index, axis, opset):
            result = self._eager_gather(data, index, axis, opset, sparse)
            if result is not None:
                return result
        given = indices if isinstance(indices, torch.Tensor) else None  # (see GatherEager)
        return self.take(*self.prepared(data, indices, axis, opset), sparse, given)

    def _eager_gather(
        self, data: Any, indices: Any, axis: Any, opset: Any, sparse: bool
    ) -> Any | None:
        """:meth:`gather` of an :func:`eager_cpu_call`, or None where an index is bad (the
        flow reports it)."""
        axis %= data.ndim
        size = data.shape[axis]
        if data.requires_grad and _grad_enabled():
            index = eager_bounded(indices, size, opset)
            if index is not None:  # else the flow reports the first bad index
                k, int64 = index.ndim, index.dtype is _INT64
                plan = kernels.eager_plan(data, axis, index.numel(), k, False, int64)
                given = None if index is indices else indices  # (see GatherEager)
                return autograd.GatherEager.apply(data, index, axis, sparse, plan, given)
        elif not indices.ndim:  # select reads a negative position itself: no wrap
            at = eager_position(indices, size, opset)
            if at is not None:  # else the flow reports the bad index
                return kernels.take_at(data, at, axis)
        elif few_values(indices):  # 1-D: read as Python ints, then planned
            read = eager_ints(indices, size, opset)
            if read is not None:  # else the flow reports the first bad index
                negative = read[1] is not read[0]
                n, int64 = len(read[0]), indices.dtype is _INT64
                plan = kernels.eager_plan(data, axis, n, 1, negative, int64)
                if plan[0] in kernels.AS_GIVEN:  # reads negative positions: no wrap
                    return kernels.take_given(data, indices, axis, plan)
                return kernels.take(data, ints_index(read, indices), axis, plan)
        else:  # planned before the index is read: its sign is not known yet
            n, k, int64 = indices.numel(), indices.ndim, indices.dtype is _INT64
            plan = kernels.eager_plan(data, axis, n, k, None, int64)
            if plan[0] not in kernels.AS_GIVEN:
                index = eager_bounded(indices, size, opset)
                if index is not None:  # else the flow reports the first bad index
                    return kernels.take(data, index, axis, plan)
            else:  # these read negative positions too: no wrap
                low = eager_low(indices, size, opset)
                if low is not None:  # else the flow reports the first bad index
                    return kernels.take_given(data, indices, axis, plan, low < 0)
        return None

    def check_sparse(self, x: Any, fn: str, flag: str) -> None:
        check_sparse(x, fn, flag)

    def gather_sparse(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        if not compiling():
            return self.gather(data, indices, axis, opset, True)
        if data.requires_grad and _grad_enabled():
            from . import eager_sparse  # loads Dynamo, which is tracing this call already

            return eager_sparse.gather(self, data, indices, axis, opset)
        return self.gather(data, indices, axis, opset)  # in the graph: no gradient to make

    def gather_grad(
        self, shape: Any, indices: Any, grad: Any, axis: Any, sparse: bool = False
    ) -> Any:
        if sparse:
            if compiling():
                from . import eager_sparse

                return eager_sparse.gather_grad(self, shape, indices, grad, axis)
        else:
            shape = _rules.check_shape(shape)  # the flow's first check
            # host indices as in gather: the eager path reads them as a tensor
            ids: Any = indices if type(indices) is torch.Tensor else host_tensor(indices, grad)
            if eager_cpu_call(grad, ids, axis, _GRAD, shape):
                axis %= len(shape)
                want = _rules.output_shape(shape, ids.shape, axis)
                if grad.shape == want:
                    plain = not (grad.requires_grad and _grad_enabled())  # no Function
                    if not ids.ndim and plain:
                        at = eager_position(ids, shape[axis], _GRAD)  # as given
                        if at is not None:  # else the flow reports the bad index
                            return kernels.scatter_at(grad, at, axis, shape[axis])
                    elif plain and torch_grad_given(
                        axis, ids.numel(), grad.numel(), shape, grad.dtype in _HALF
                    ):
                        if eager_low(ids, shape[axis], _GRAD) is not None:  # (else: bad)
                            return kernels.scatter_given(grad, ids, shape)
                    else:
                        index = eager_bounded(ids, shape[axis], _GRAD)
                        if index is not None:  # else the flow reports the first bad index
                            return self.scatter_add(shape, index, grad, axis)
        return super().gather_grad(shape, indices, grad, axis, sparse)

    # -- primitives -----------------------------------------------------------------------

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        _refuse_layouts(x, fn, role)
        return x

    def index(self, indices: Any, like: Any, fn: str) -> Any:
        shape = plain_ints_shape(indices, False) if compiling() else None
        if shape is not None and not subclasses.is_dtensor(like):
            # Python ints are constants of the graph (NumPy, which reads other host indices,
            # cannot be traced): a tensor the graph's bounds check reads like any other, those
            # beyond int64 at its extremes, which the check refuses as it would them
            indices = kernels.constant_index(int64_clamped(indices), shape, like.device)
        return super().index(indices, like, fn)

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        _refuse_layouts(index, fn, "indices")
        subclasses.check_pair(index, like, fn)
        if index.device != like.device:
            raise _errors.device_mismatch(fn, index.device, like.device)

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        owned = not shareable(host)
        if owned:
            host = np.array(host)
        device = like.device
        if subclasses.is_dtensor(like):
            return subclasses.replicated(torch.as_tensor(host, device=device), like)
        if device.type == "cpu" and plain_eager():
            # as_tensor's own steps cost twice as much; a copy where autograd may save the
            # index (a write into the caller's NumPy array bumps no version to catch)
            return torch.from_numpy(host.copy() if like.requires_grad and not owned else host)
        if device.type != "cuda" or compiling() or tracing():
            return torch.as_tensor(host, device=device)
        # From pageable memory the copy waits for the host; from a pinned copy of our own it
        # runs on the stream while Python goes on, and torch's host allocator keeps that copy
        # until the transfer is done, so the caller may reuse ``host`` at once.
        return torch.from_numpy(host).pin_memory().to(device, non_blocking=True)

    def bounds(self, index: Any) -> tuple[int, int] | None:
        # The device policy reads nothing: unchecked() checks on the device.
        return bounds.read(index) if bounds.exact(index) else None

    def host_values(self, index: Any) -> np.ndarray | None:
        if index.is_cpu and type(index) in PLAIN_TYPES and plain_eager() and _policy.exact("cpu"):
            return index.numpy()
        return None

    def to_host(self, index: Any) -> np.ndarray:
        return bounds.to_host(index)

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        return bounds.device_check(index, size, axis, opset, fn)

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        # A TorchScript trace must not depend on the values seen while tracing: it records
        # the wrap always, but for the ONNX exporter none (gatherx's Function wraps its
        # example inside, where the exporter records nothing).
        if tracing():
            if onnx_exporting():
                return index
            if opset >= _rules.NEGATIVE_INDICES_SINCE:
                return kernels.wrap(index, size)
        if low < 0:
            return kernels.wrap(index, size)
        return index

    def size(self, index: Any) -> int:
        return index.numel()

    def take(
        self, data: Any, index: Any, axis: int, sparse: bool = False, given: Any = None
    ) -> Any:
        if compiling() and data.shape[axis] == 0:
            data, index = kernels.one_slot(data, index, axis)
        if subclasses.is_dtensor(data):
            from . import rowsharded  # imports torch.distributed.tensor, loaded already here

            if rowsharded.applies(data, index, axis):
                if needs_autograd(data):
                    return rowsharded.RowShardedGather.apply(data, index, axis)
                return rowsharded.take(data, index, axis)
        if needs_autograd(data):
            return autograd.apply_gather(data, index, axis, sparse, given)
        return kernels.take(data, index, axis)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if not needs_autograd(grad):
            return kernels.scatter_add(grad, index, axis, shape[axis])
        return autograd.apply_scatter_add(grad, index, axis, shape[axis])

    def sparse_scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        # torch's own autograd differentiates it (sparse_coo_tensor has a derivative)
        return kernels.sparse_scatter_add(grad, index, axis, shape[axis])

    def gather_out(
        self, data: Any, indices: Any, axis: Any, opset: Any, out: Any, writer: Any = None
    ) -> Any:
        global _into
        if _into is None:
            from . import out as _into  # out= only: most programs never import it
        return _into.gather_out(self, data, indices, axis, opset, out)


def _refuse_layouts(x: torch.Tensor, fn: str, role: str) -> None:
    subclasses.refuse_unknown(x, fn, role)
    if x.layout is not torch.strided:
        raise _errors.unsupported_array(
            fn, role, x, f"layout {x.layout}", "convert with .to_dense() first"
        )
    if x.is_nested:
        raise _errors.unsupported_array(
            fn, role, x, "a nested tensor", "gather each of its tensors, or pad it to one"
        )


#: The one instance the dispatch uses.
BACKEND = TorchBackend()
