"""``gather(..., out=)`` for PyTorch: plain eager calls only, written by ``index_select(out=)``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ... import _errors, _rules
from ..._rules import Span
from ..._strategy import torch_out_plan
from ..base import Backend, OutWriter, host_span
from ..numpy import OUT_WRITER as numpy_out
from . import bounds, kernels
from .domain import FAST_DATA_DTYPES, INDEX_DTYPES, NUMPY_DTYPES, PLAIN_TYPES, plain, plain_cpu
from .modes import compiling, functorch_active, tracing

Tensor = torch.Tensor
_forward_ad = torch.autograd.forward_ad
_grad_enabled = torch.is_grad_enabled


def gather_out(
    backend: Backend, data: Any, indices: Any, axis: Any, opset: Any, out: Any
) -> torch.Tensor:
    """``gather(..., out=)``: the common eager CPU call decided in few steps (after a large
    gather has evicted the interpreter from the caches, each step costs several times its
    warm time), by the same rules as the flow, which takes every other call and every error."""
    if (
        type(indices) is torch.Tensor
        and type(data) in PLAIN_TYPES
        and type(out) is torch.Tensor
        and _rules.plain_call(axis, opset, data.ndim)
        and indices.dtype in INDEX_DTYPES
        and data.dtype in FAST_DATA_DTYPES[opset >= _rules.BFLOAT16_SINCE]
        and out.dtype is data.dtype
        and out.is_cpu
        and plain(out)
        and plain_cpu(data, indices)
        and not (_grad_enabled() and (data.requires_grad or out.requires_grad))
        and indices.numel()
    ):
        ax = axis % data.ndim
        shape = data.shape
        if out.shape == (*shape[:ax], *indices.shape, *shape[ax + 1 :]):
            span = WRITER.span(out)
            if not (
                _rules.overlapping(span, WRITER.span(data))
                or _rules.overlapping(span, WRITER.span(indices))
            ):
                size = shape[ax]
                if indices.ndim:
                    # checked (and wrapped) by NumPy, in fewer passes and dispatches than
                    # ATen's, and without waking torch's thread pool
                    views = WRITER.numpy_views(data, indices, ax, out)
                    if views is not None:  # NumPy writes too
                        if numpy_out.take_checked(views[0], views[1], ax, views[2], opset):
                            return out
                    else:
                        host = indices.numpy()
                        wrapped = _rules.host_wrapped(host, size, opset)
                        if wrapped is not None:
                            index = indices if wrapped is host else torch.from_numpy(wrapped)
                            select_into(data, index, ax, out, 0)
                            return out
                else:  # read at no cost on the CPU
                    value = int(indices)
                    if not _rules.out_of_range(value, value, size, opset):
                        select_into(data, indices, ax, out, value)
                        return out
    return Backend.gather_out(backend, data, indices, axis, opset, out, WRITER)


def _refusal(data: torch.Tensor, out: torch.Tensor) -> str | None:
    """Why this call cannot write into ``out``, as PyTorch's own ``out=`` functions refuse."""
    if compiling():
        return (
            "torch.compile and torch.export trace functional graphs, which have no out= "
            "(return the result and let the compiler reuse its buffer)"
        )
    if tracing():
        return "the TorchScript tracer records no writes into a caller's tensor"
    if functorch_active():
        return "torch.func transforms (vmap, grad, jacrev, ...) take no out= arrays"
    if _forward_ad._current_level >= 0:
        return "forward-mode AD cannot see a result written into out="
    if torch.is_grad_enabled() and (data.requires_grad or out.requires_grad):
        return (
            "autograd cannot differentiate a result written into out=, and data or out "
            "requires grad (call it under torch.no_grad() or detach them)"
        )
    return None


class TorchOut(OutWriter):
    """``out=`` for PyTorch tensors on any device: the index's bounds read on the host (one
    sync on an accelerator), then ``index_select`` writes into ``out`` viewed in its shape."""

    def accept(self, data: torch.Tensor, out: Any, fn: str) -> torch.Tensor:
        if not isinstance(out, torch.Tensor):
            raise _errors.out_type(fn, out, "torch.Tensor")
        if out.layout is not torch.strided or out.is_nested:
            raise _errors.unsupported_array(
                fn, "out", out, f"layout {out.layout}", "pass a dense strided tensor"
            )
        why = _refusal(data, out)
        if why is not None:
            raise _errors.out_refused(fn, why)
        return out

    def span(self, x: Any) -> Span | None:
        if isinstance(x, np.ndarray):
            return host_span(x)
        if x.is_meta or not x.numel():
            return None
        start = x.data_ptr()
        device = "cpu" if x.is_cpu else str(x.device)  # str() costs more than the rest
        if x.is_contiguous():
            return device, start, start + x.nbytes
        last = sum((n - 1) * s for n, s in zip(x.shape, x.stride(), strict=True))
        return device, start, start + (last + 1) * x.element_size()

    def numpy_views(
        self, data: torch.Tensor, index: torch.Tensor, axis: int, out: torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """NumPy views of data, index and out where NumPy's writer takes the call
        (:func:`gatherx._strategy.torch_out_plan`), else None."""
        shape = data.shape
        if (
            index.ndim
            and torch_out_plan(
                "cpu" if data.is_cpu else data.device.type,
                math.prod(shape[:axis]),
                math.prod(shape[axis + 1 :]) * data.element_size(),
                data.dtype in NUMPY_DTYPES,
            )
            == "numpy"
            and out.is_contiguous()
            and not (data.is_conj() or data.is_neg())
        ):
            # detached where, under no_grad, data or out still requires grad
            host = (data.detach() if data.requires_grad else data).numpy()
            return host, index.numpy(), (out.detach() if out.requires_grad else out).numpy()
        return None

    def read_bounds(self, index: torch.Tensor) -> tuple[int, int] | None:
        return bounds.read(index)

    def take_into(
        self,
        data: torch.Tensor,
        index: torch.Tensor,
        axis: int,
        out: torch.Tensor,
        low: int | None = None,
    ) -> None:
        """:meth:`OutWriter.take_into`; ``low``: the index's minimum, where it was read."""
        if not out.numel():
            return
        views = self.numpy_views(data, index, axis, out)
        if views is not None:
            numpy_out.take_into(*views[:2], axis, views[2], -1 if low is None else low)
            return
        select_into(data, index, axis, out, low)


def select_into(data: Tensor, index: Tensor, axis: int, out: Tensor, low: int | None) -> None:
    """:meth:`TorchOut.take_into` by ATen (``index_select``, or one slice's copy), where NumPy's
    writer does not take the call."""
    twin = kernels.BIT_TWIN.get(data.dtype)
    if twin is not None:  # uint16/32/64 have few kernels: the same bits as signed ints
        data, out = data.view(twin), out.view(twin)
    shape = data.shape
    size = shape[axis]
    if not index.ndim:  # one slice, copied by the rule of an eager scalar pick
        value = int(index) if low is None else low  # a scalar's minimum is its value
        kernels.pick(data, value + size if value < 0 else value, axis, shape, out)
        return
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    flat = index.reshape(-1)
    if low is not None and low >= 0:
        pass
    elif pre == 1 and data.nbytes <= flat.nbytes:
        # Many indices into little data: the rows twice over take the index plus size,
        # in [0, 2s-1], in one pass over it instead of three.
        data, flat = torch.cat((data, data), axis), torch.add(flat, size)
        size *= 2
    else:
        flat = kernels.wrap_eager(flat, size)
    if not out.is_contiguous():
        out.copy_(torch.index_select(data, axis, flat).view(out.shape))
    elif data.is_contiguous():  # ATen copies whole rows of a 2-D or 3-D view
        if pre == 1:
            torch.index_select(data.view(size, post), 0, flat, out=out.view(-1, post))
        else:
            source = data.view(pre, size, post)
            torch.index_select(source, 1, flat, out=out.view(pre, -1, post))
    else:
        dims = (*shape[:axis], flat.shape[0], *shape[axis + 1 :])
        torch.index_select(data, axis, flat, out=out.view(dims))


#: The one instance the backend uses.
WRITER = TorchOut()
