"""The PyTorch backend: validation by the shared flow, with an eager CPU path in front of it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import _errors, _policy, _rules
from ..base import Backend
from . import autograd, bounds, kernels
from .domain import FAST_DATA_DTYPES, GRAD_DTYPES, INDEX_DTYPES, PLAIN_TYPES, plain, plain_cpu
from .modes import compiling, needs_autograd, plain_eager, tracing


class TorchBackend(Backend):
    name = "torch"

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        if _policy.FORCING and bounds.device_policy_on_cpu():  # the accelerators' flow (tests)
            return super().gather(data, indices, axis, opset)
        # After a large gather has evicted the interpreter's code and data from the CPU
        # caches, each Python step costs several times its warm time: the common eager CPU
        # call is decided in few steps, by the same tables the flow reads.
        kind = type(indices)
        if (
            (kind is torch.Tensor or kind is int)
            and type(data) in PLAIN_TYPES
            and _rules.plain_call(axis, opset, rank := data.ndim)
            and data.dtype in FAST_DATA_DTYPES[opset >= _rules.BFLOAT16_SINCE]
        ):
            out = None
            if kind is int:  # a value on the host: read at no cost, for data on any device
                if plain(data) and plain_eager():
                    out = self._eager_pick(data, indices, axis % rank)
            elif indices.dtype in INDEX_DTYPES and plain_cpu(data, indices):
                if indices.ndim:
                    out = self._eager_gather(data, indices, axis % rank, opset)
                else:  # read at no cost on the CPU
                    out = self._eager_pick(data, int(indices), axis % rank)
            if out is not None:
                return out
        return super().gather(data, indices, axis, opset)

    def _eager_pick(self, data: torch.Tensor, value: int, axis: int) -> torch.Tensor | None:
        """One slice for a scalar index, checked from its one value (opset >= 11); None for a
        bad one, which the flow reports."""
        shape = data.shape
        size = shape[axis]
        if _rules.out_of_range(value, value, size, _rules.NEGATIVE_INDICES_SINCE):
            return None
        return kernels.pick(data, value + size if value < 0 else value, axis, shape)

    def _eager_gather(
        self, data: torch.Tensor, indices: torch.Tensor, axis: int, opset: int
    ) -> torch.Tensor | None:
        grad = data.requires_grad
        size = data.shape[axis]
        # index_select refuses every index outside [0, s-1] before it copies rows, and
        # data[index] every one outside [-s, s-1] (all of ATen's CPU branches do;
        # tests/test_torch_eager.py holds them to that): on axis 0 the index is read only
        # to report a bad one, after a refusal.
        if axis == 0 and data.dtype not in kernels.BIT_TWIN and indices.numel():
            for attempt in kernels.axis0_plan(data, indices):
                try:
                    if not grad:
                        return kernels.rows(data, indices, attempt)
                    # the backward needs a non-negative index: the wrapped one, or the
                    # doubled rows' index, which the Function saves
                    index = indices
                    if attempt == "wrapped":
                        index, attempt = kernels.wrap_eager(indices, size), "as_given"
                    return autograd.eager_apply(data, index, 0, attempt)
                except (IndexError, RuntimeError):  # RuntimeError: from zero-size data
                    pass
        if not indices.numel():
            return None
        index = self._eager_bounded(indices, size, axis, opset, "gather")
        if grad:
            return autograd.eager_apply(data, index, axis)
        return kernels.take_eager(data, index, axis)

    def _eager_bounded(
        self, indices: torch.Tensor, size: int, axis: int, opset: int, fn: str
    ) -> torch.Tensor:
        """:meth:`bounded` for a non-empty plain CPU index, reading it in one ATen pass."""
        return self.checked(indices, *bounds.read_cpu(indices), size, axis, opset, fn)

    def gather_grad(self, shape: Any, indices: Any, grad: Any, axis: Any) -> Any:
        if bounds.device_policy_on_cpu():  # the accelerators' flow, on the CPU (tests)
            return super().gather_grad(shape, indices, grad, axis)
        if (
            type(indices) is torch.Tensor
            and type(axis) is int
            and type(grad) is torch.Tensor
            and indices.dtype in INDEX_DTYPES
            and grad.dtype in GRAD_DTYPES
            and not grad.requires_grad
            and indices.numel()
            and plain_cpu(grad, indices)
        ):
            fn = "gather_grad"
            shape = _rules.check_shape(shape)
            axis = _rules.normalize_axis(axis, len(shape), fn)
            _rules.check_grad_shape(tuple(grad.shape), shape, tuple(indices.shape), axis)
            size = shape[axis]
            if not indices.ndim:  # one slice, its value read at no cost on the CPU
                value = int(indices)
                if not _rules.out_of_range(value, value, size, _rules.GRAD_OPSET):
                    return kernels.place(grad, value + size if value < 0 else value, axis, shape)
            index = self._eager_bounded(indices, size, axis, _rules.GRAD_OPSET, fn)
            return kernels.scatter_add(grad, index, axis, size)
        return super().gather_grad(shape, indices, grad, axis)

    # -- primitives -----------------------------------------------------------------------

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        _refuse_layouts(x, fn, role)
        return x

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        _refuse_layouts(index, fn, "indices")
        if index.device != like.device:
            raise _errors.device_mismatch(fn, index.device, like.device)

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        if not host.flags.writeable or any(s < 0 for s in host.strides):
            host = np.array(host)  # torch refuses negative strides and warns on read-only memory
        device = like.device
        if device.type != "cuda" or compiling() or tracing():
            return torch.as_tensor(host, device=device)
        # From pageable memory the copy waits for the host; from a pinned copy of our own it
        # runs on the stream while Python goes on, and torch's host allocator keeps that copy
        # until the transfer is done, so the caller may reuse ``host`` at once.
        return torch.from_numpy(host).pin_memory().to(device, non_blocking=True)

    def bounds(self, index: Any) -> tuple[int, int] | None:
        # The device policy reads nothing: unchecked() checks on the device.
        return bounds.read(index) if bounds.exact(index) else None

    def to_host(self, index: Any) -> np.ndarray:
        return bounds.to_host(index)

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        return bounds.device_check(index, size, axis, opset, fn)

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        # A TorchScript trace must not depend on the values seen while tracing: it records
        # the wrap always (the exported ONNX Gather wraps negatives itself).
        if low < 0 or (
            opset >= _rules.NEGATIVE_INDICES_SINCE
            and tracing()
            and not torch.onnx.is_in_onnx_export()
        ):
            return kernels.wrap(index, size)
        return index

    def size(self, index: Any) -> int:
        return index.numel()

    def take(self, data: Any, index: Any, axis: int) -> Any:
        if not plain_eager():
            return autograd.apply_gather(data, index, axis)
        if index.ndim == 0 and index.is_cpu and not bounds.device_policy_on_cpu():
            return kernels.pick(data, int(index), axis)  # the value is read at no cost
        if data.requires_grad:  # the cheap Function plain autograd needs, on any device
            return autograd.eager_apply(data, index, axis)
        return kernels.take(data, index, axis, eager=True)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if not needs_autograd(grad):
            return kernels.scatter_add(grad, index, axis, shape[axis])
        return autograd.apply_scatter_add(grad, index, axis, shape[axis])

    def gather_out(
        self, data: Any, indices: Any, axis: Any, opset: Any, out: Any, writer: Any = None
    ) -> Any:
        from . import out as into  # out= only: most programs never import it

        return into.gather_out(self, data, indices, axis, opset, out)


def _refuse_layouts(x: torch.Tensor, fn: str, role: str) -> None:
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
