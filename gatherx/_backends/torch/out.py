"""``gather(..., out=)`` for PyTorch: plain eager calls only, written by the forward's kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import _errors, _rules
from ..._rules import Span
from ..._strategy import torch_out_given, torch_out_plan
from ..base import Backend, OutWriter, host_span
from . import bounds, kernels
from .domain import (
    STRIDED,
    eager_bounded,
    eager_cpu_call,
    eager_low,
    eager_position,
    host_tensor,
)
from .modes import compiling, functorch_active, tracing, values_readable

Tensor = torch.Tensor
_INT64 = torch.int64
_forward_ad = torch.autograd.forward_ad
#: The plans of ``out=`` that need the index checked, not made non-negative: those that read
#: it as given, but advanced indexing, which has no ``out=``.
_CHECKED_ONLY = kernels.AS_GIVEN - {"indexing"}


def gather_out(
    backend: Backend, data: Any, indices: Any, axis: Any, opset: Any, out: Any
) -> torch.Tensor:
    """``gather(..., out=)``: the shared flow with :data:`WRITER`.

    As in the eager gather, the common call is decided in a few identity tests by the same
    rules (the flow's overlap test on the same spans, its host read and wrap); the flow takes
    every other call, and reports every refusal.
    """
    # host indices as in gather: the eager path reads them as a tensor
    ids: Any = indices if type(indices) is Tensor else host_tensor(indices, data)
    if (
        type(out) is Tensor
        and eager_cpu_call(data, ids, axis, opset)
        and out.dtype == data.dtype
        and out.is_cpu
        and out.layout is STRIDED
        and not out.is_nested
        and not (data.requires_grad or out.requires_grad)
        and not _overlaps_itself(out)
        and _writable(out)
    ):
        ax = axis % data.ndim
        shape = data.shape
        where = WRITER.span(out)
        if (
            out.shape == _rules.output_shape(shape, ids.shape, ax)
            and not _rules.overlapping(where, WRITER.span(data))
            and not _rules.overlapping(where, WRITER.span(ids))
        ):
            if not out.numel():  # nothing to write (an empty index, or empty slices)
                if eager_low(ids, shape[ax], opset) is not None:  # (0 if empty)
                    return out
            elif not ids.ndim:  # one slice: select_copy reads a negative position itself
                at = eager_position(ids, shape[ax], opset)
                if at is not None:  # else the flow reports the bad index
                    kernels.take_at(data, at, ax, out)
                    return out
            else:  # planned before the index is read: its sign is not known yet
                n, k, int64 = ids.numel(), ids.ndim, ids.dtype is _INT64
                plan = kernels.eager_plan(data, ax, n, k, None, int64)  # the forward's
                given = torch_out_given(plan[0], k, out.numel())
                if not given and k != 1:  # the plan with the index as one dimension
                    plan = kernels.eager_plan(data, ax, n, 1, None, int64)
                if given or plan[0] in _CHECKED_ONLY:  # read as given: checked, not wrapped
                    low = eager_low(ids, shape[ax], opset)
                    if low is not None:  # else the flow reports the first bad index
                        if given:  # advanced indexing, which has no out=
                            out.copy_(kernels.take_given(data, ids, ax, plan, low < 0))
                        elif plan[0] == "broadcast":  # reads no index value
                            WRITER.write(data, ids.reshape(-1), ax, out, plan)
                        elif low < 0:  # 1-D data: torch.take reads negative positions itself
                            kernels.take_given(data, ids, ax, plan, True, out)
                        else:  # none negative: the plan for that sign
                            WRITER.write(data, ids.reshape(-1), ax, out)
                        return out
                else:
                    flat = eager_bounded(ids, shape[ax], opset, flat=True)
                    if flat is not None:  # else the flow reports the first bad index
                        WRITER.write(data, flat, ax, out, plan)
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


_INFERENCE = " here: PyTorch writes an inference tensor only under torch.inference_mode()"


def _writable(out: torch.Tensor) -> bool:
    """Whether PyTorch lets ``out`` be written here (an inference tensor only in that mode)."""
    return not out.is_inference() or torch.is_inference_mode_enabled()


def _overlaps_itself(out: torch.Tensor) -> bool:
    # (the contiguous test first: the common out= needs no shape or strides read)
    return not out.is_contiguous() and _rules.overlaps_itself(out.shape, out.stride(), 1)


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
        if _overlaps_itself(out):
            raise _errors.out_self_overlap(fn)
        if not _writable(out):
            raise _errors.out_read_only(fn, _INFERENCE)
        return out

    def span(self, x: Any) -> Span | None:
        if isinstance(x, np.ndarray):
            return host_span(x)
        if not x.numel() or not values_readable(x):  # (fake and meta tensors have no memory)
            return None
        start = x.data_ptr()
        device = "cpu" if x.is_cpu else str(x.device)  # str() costs more than the rest
        if x.is_contiguous():
            return device, start, start + x.nbytes
        last = sum((n - 1) * s for n, s in zip(x.shape, x.stride(), strict=True))
        return device, start, start + (last + 1) * x.element_size()

    def read_bounds(self, index: torch.Tensor) -> tuple[int, int] | None:
        return bounds.read(index)

    def take_into(self, data: torch.Tensor, index: torch.Tensor, axis: int, out: Tensor) -> None:
        if out.numel():
            self.write(data, kernels.wrap(index.reshape(-1), data.shape[axis]), axis, out)

    def write(
        self,
        data: torch.Tensor,
        flat: torch.Tensor,
        axis: int,
        out: Tensor,
        plan: tuple[str, bool] | None = None,
    ) -> None:
        """Write ``data`` gathered along ``axis`` at a checked, non-negative 1-D index into
        a non-empty ``out``, by the forward's ``plan`` (:func:`kernels.plan_of` of ``data``
        at that index) if given."""
        data, out = kernels.signed_view(data), kernels.signed_view(out)
        n = flat.shape[0]
        if plan is None:
            plan = kernels.plan_of(data, axis, n, 1, False, flat.dtype is _INT64)  # the forward's
        kernel, copy = plan
        post = data.numel() // (data.shape[0] or 1) if axis == 0 else 0  # dim 0's rows only
        whole = kernel not in kernels.ELEMENT_PLANS or kernels.element_starts(out, data, axis)
        lazy = kernel in kernels.INTEGER_VIEWS and kernels.lazy_bits(out)
        how = torch_out_plan(out.is_contiguous(), kernel, axis, n, post, whole, lazy)
        if how == "copy":  # the forward's formulation, copied
            out.copy_(kernels.take(data, flat, axis, plan).reshape(out.shape))
            return
        # written in place, with the index as one dimension (the views: contiguous data)
        if how == "index_select":
            kernel = "as_is"  # the data as given (its copy flag is off)
        if copy:
            data = data.contiguous()
        if out.ndim != data.ndim:  # else out has the shape already: a 1-D index
            shape = list(data.shape)
            shape[axis] = n
            out = out.view(*shape)
        kernels.select(data, axis, flat, kernel, out=out)


#: The one instance the backend uses.
WRITER = TorchOut()
