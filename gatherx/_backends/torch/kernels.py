"""PyTorch kernels: ``index_select`` as :mod:`gatherx._strategy` plans it, and ``index_add_``."""

from __future__ import annotations

import math

import torch

from ... import _rules
from ..._strategy import (
    torch_axis0_plan,
    torch_backward_plan,
    torch_forward_plan,
    torch_rows_plan,
    torch_scalar_plan,
)
from .modes import compiling, functorch_active, plain_eager, tracing

# uint16/32/64 are "shell" dtypes with few kernels; gather is pure data movement, so it runs
# on the same bits viewed as the signed type of the same width.
BIT_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}
_HALF = frozenset(getattr(torch, name) for name in _rules.HALF_DTYPES)


def take(data: torch.Tensor, index: torch.Tensor, axis: int, eager: bool = False) -> torch.Tensor:
    """``index_select`` as _strategy plans it; ``eager``: no compile, tracer or torch.func."""
    shape = _rules.output_shape(data.shape, index.shape, axis)
    twin = BIT_TWIN.get(data.dtype)
    source = data.view(twin) if twin is not None else data
    flat = index.reshape(-1)
    plan = torch_forward_plan(
        tuple(source.shape),
        axis,
        flat.shape[0],
        contiguous=source.is_contiguous(),
        itemsize=source.element_size(),
        threads=1 if compiling() else torch.get_num_threads(),
        device_type=source.device.type,
        eager=eager,
    )
    # The TorchScript ONNX exporter replaces this body by one Gather node, but it still
    # traces it, and its passes cannot digest the views.
    if plan != "index_select" and not tracing():  # see _strategy
        size = source.shape[axis]
        pre, post = math.prod(source.shape[:axis]), math.prod(source.shape[axis + 1 :])
        if plan == "rows":
            source, axis = source.view(size, post), 0
        elif plan == "rows_flat":
            starts = torch.arange(0, pre * size, size, dtype=torch.int64, device=flat.device)
            flat = (starts[:, None] + flat).reshape(-1)
            source, axis = source.view(pre * size, post), 0
        elif plan == "moved_out":
            out = source.new_empty((pre, flat.shape[0], post))
            moved = source.view(pre, size, post).transpose(0, 1)
            torch.index_select(moved, 0, flat, out=out.transpose(0, 1))
            return out.view(shape) if twin is None else out.view(shape).view(data.dtype)
        else:
            source, axis = source.view(pre, size, post), 1
    out = torch.index_select(source, axis, flat).view(shape)
    return out.view(data.dtype) if twin is not None else out


def scatter_add(grad: torch.Tensor, index: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """Zeros with ``grad`` added at non-negative in-range ``index``; ``size`` is the axis's."""
    # index_add is deterministic under torch.use_deterministic_algorithms(True), CUDA included.
    k = index.ndim
    flat = index if k == 1 else index.reshape(-1)
    kind = "cpu" if flat.is_cpu else flat.device.type
    if torch_backward_plan(_INDEX_NAMES[flat.dtype], kind) == "index_add_int64":
        flat = flat.long()  # see _strategy: the CPU kernel's fast path needs int64
    source = grad  # with the index's dimensions as one
    if k != 1:  # (flatten has no batching rule for vmap over the backward)
        dims = list(grad.shape)
        dims[axis : axis + k] = [flat.shape[0]]
        source = grad.reshape(dims)
    dtype = grad.dtype
    if dtype in _HALF:  # half precision would round every partial sum: add in float32
        source = source.float()
    else:
        # two's-complement addition gives the same bits for signed and unsigned integers
        twin = BIT_TWIN.get(dtype)
        if twin is not None:
            source = source.view(twin)
    shape = list(source.shape)
    shape[axis] = size
    zeros = source.new_zeros(shape)
    if functorch_active():
        # vmap batches the index and not the gradient: zeros made from the gradient are not
        # batched, and an in-place add of batched values into them has no batching rule.
        out = torch.index_add(zeros, axis, flat, source)
    else:
        out = zeros.index_add_(axis, flat, source)
    if dtype in _HALF:
        return out.to(dtype)  # rounded once
    return out if out.dtype is dtype else out.view(dtype)


_INDEX_NAMES = {torch.int32: "int32", torch.int64: "int64"}


def place(grad: torch.Tensor, value: int, axis: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Zeros of ``shape`` with ``grad`` written at the one slice ``value`` (checked,
    non-negative) on ``axis``: the scatter-add of a single slice, which adds nothing up."""
    out = grad.new_zeros(shape)
    out.select(axis, value).copy_(grad)
    return out


def wrap(index: torch.Tensor, size: int) -> torch.Tensor:
    """A checked ``index`` (every value in [-size, size)) with negatives moved into [0, size)."""
    if plain_eager() and size <= _INT_MAX[index.dtype]:
        return torch.remainder(index, size)  # one kernel; exact on checked values only
    return wrap_unchecked(index, size)


def wrap_eager(index: torch.Tensor, size: int) -> torch.Tensor:
    """:func:`wrap_unchecked` outside compilers and tracers, in fewer and cheaper kernels."""
    if size > _INT_MAX[index.dtype]:
        return wrap_unchecked(index, size)
    # Branch-free: the sign bit spread over the word, masked to ``size``, added: three
    # kernels writing one new tensor, where torch.where's three write three.
    sign = torch.bitwise_right_shift(index, index.element_size() * 8 - 1)  # not >>: 2 frames
    return sign.bitwise_and_(size).add_(index)


def wrap_unchecked(index: torch.Tensor, size: int) -> torch.Tensor:
    """``index`` with [-size, -1] moved up by ``size``: any value outside [-size, size) stays
    outside [0, size), for a kernel or an assert to refuse."""
    return torch.where(index < 0, index + size, index)


_INT_MAX = {torch.int32: 2**31 - 1, torch.int64: 2**63 - 1}


def small_rows(data: torch.Tensor, index: torch.Tensor) -> bool:
    """Whether an eager gather on axis 0 is small enough for ``data[index]``."""
    size = data.shape[0]
    n_out = index.numel() * (data.numel() // size) if size else 0
    return torch_rows_plan(n_out, index.ndim) == "advanced_indexing"


def rows(data: torch.Tensor, index: torch.Tensor, attempt: str) -> torch.Tensor:
    """Gather on axis 0 by ``attempt`` (:func:`gatherx._strategy.torch_axis0_plan`): ATen
    copies whole rows on dim 0 whatever the rank, so no view plan.

    ``indexing`` (``data[index]``) refuses anything outside [-s, s-1], the others
    (``index_select``) anything outside [0, s-1] after their own wrap: the eager path relies
    on both refusals to skip a bounds pass.
    """
    if attempt == "indexing":
        return data[index]
    shape = (*index.shape, *data.shape[1:])
    if attempt == "doubled":
        data, index = doubled(data, index)
    flat = index.reshape(-1)
    if attempt == "wrapped":
        flat = wrap_eager(flat, data.shape[0])
    out = torch.index_select(data, 0, flat)
    return out if index.ndim == 1 else out.view(shape)


def doubled(data: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``data``'s rows twice over and ``index`` plus s: [-s, s-1] becomes [0, 2s-1], every
    other value stays outside it."""
    return torch.cat((data, data)), torch.add(index, data.shape[0])


def axis0_plan(data: torch.Tensor, index: torch.Tensor) -> tuple[str, ...]:
    """:func:`gatherx._strategy.torch_axis0_plan` for ``data`` and a non-empty ``index``."""
    size = data.shape[0]
    return torch_axis0_plan(
        size,
        data.numel() // size if size else 0,
        data.element_size(),
        index.numel(),
        index.dim(),
        index.element_size(),
        grad=data.requires_grad,
    )


def take_eager(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    """:func:`take` for plain eager calls on a checked, non-negative ``index``."""
    if index.ndim == 0 and index.is_cpu:
        return pick(data, int(index), axis)
    if axis == 0 and data.dtype not in BIT_TWIN:
        return rows(data, index, "indexing" if small_rows(data, index) else "as_given")
    return take(data, index, axis, eager=True)


def pick(
    data: torch.Tensor,
    value: int,
    axis: int,
    shape: torch.Size | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The slice of ``data`` (of ``shape``, if read already) at one checked, non-negative
    ``value`` on ``axis``, copied (into ``out``, if given), by
    :func:`gatherx._strategy.torch_scalar_plan`; differentiable by torch's own rules (its
    backward copies the gradient into zeros at the one slice: the scatter-add of a slice)."""
    if shape is None:
        shape = data.shape
    narrow = torch_scalar_plan(shape, axis, data.element_size(), data.is_contiguous) == "narrow"
    if out is not None:
        # narrow_copy's out= writes a strided out as if it were contiguous; select_copy's
        # out= is 2x slower than a copy of the selected view (docs/performance.md)
        if narrow and out.is_contiguous():
            return torch.narrow_copy(data, axis, value, 1, out=out.unsqueeze(axis))
        return out.copy_(data.select(axis, value))
    if narrow:
        return torch.narrow_copy(data, axis, value, 1).squeeze_(axis)  # a tensor of its own
    return torch.select_copy(data, axis, value)
