"""PyTorch Gather: an autograd.Function pair (gather, scatter-add) that differentiate each other."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._checks import index_range, out_of_bounds_error, output_shape

# uint16/32/64 are "shell" dtypes with few kernels; gather is pure data movement, so it runs
# on the same bits viewed as the signed type of the same width.
_BIT_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _take(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    shape = output_shape(data.shape, index.shape, axis)
    twin = _BIT_TWIN.get(data.dtype)
    source = data.view(twin) if twin is not None else data
    out = torch.index_select(source, axis, index.reshape(-1)).view(shape)
    return out.view(data.dtype) if twin is not None else out


def _scatter_add(
    shape: tuple[int, ...], index: torch.Tensor, grad: torch.Tensor, axis: int
) -> torch.Tensor:
    flat = index.reshape(-1)
    source = grad.reshape((*shape[:axis], flat.shape[0], *shape[axis + 1 :]))
    out = grad.new_zeros(shape)
    return out.index_add_(axis, flat, source)


class _GatherNoJvp(torch.autograd.Function):
    """Gather on in-bounds, non-negative ``index``; backward is a differentiable scatter-add."""

    generate_vmap_rule = True

    @staticmethod
    def forward(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:  # type: ignore[override]
        return _take(data, index, axis)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        data, index, axis = inputs
        ctx.save_for_backward(index)
        ctx.index = index  # jvp cannot read saved_tensors
        ctx.shape = tuple(data.shape)
        ctx.axis = axis
        ctx.set_materialize_grads(True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:  # type: ignore[override]
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        return _apply_scatter_add(ctx.shape, index, grad, ctx.axis), None, None


class _GatherFn(_GatherNoJvp):
    @staticmethod
    def jvp(ctx: Any, data_t: torch.Tensor, index_t: Any, axis_t: Any) -> torch.Tensor:
        return _take(data_t, ctx.index, ctx.axis)


class _ScatterAddNoJvp(torch.autograd.Function):
    """Scatter-add of ``grad`` into zeros of ``shape``; its backward is a gather."""

    generate_vmap_rule = True

    @staticmethod
    def forward(  # type: ignore[override]
        grad: torch.Tensor, index: torch.Tensor, shape: tuple[int, ...], axis: int
    ) -> torch.Tensor:
        return _scatter_add(shape, index, grad, axis)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _, index, shape, axis = inputs
        ctx.save_for_backward(index)
        ctx.index = index
        ctx.shape = shape
        ctx.axis = axis

    @staticmethod
    def backward(ctx: Any, gg: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:  # type: ignore[override]
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        return _apply_gather(gg, index, ctx.axis), None, None, None


class _ScatterAddFn(_ScatterAddNoJvp):
    @staticmethod
    def jvp(ctx: Any, grad_t: torch.Tensor, *_: Any) -> torch.Tensor:
        return _scatter_add(ctx.shape, ctx.index, grad_t, ctx.axis)


def _compiling() -> bool:
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


# Dynamo refuses to trace an autograd.Function that defines jvp, so compiled code uses twins
# without it; forward-mode AD is an eager (and torch.func) feature.
def _apply_gather(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    fn = _GatherNoJvp if _compiling() else _GatherFn
    return fn.apply(data, index, axis)


def _apply_scatter_add(
    shape: tuple[int, ...], index: torch.Tensor, grad: torch.Tensor, axis: int
) -> torch.Tensor:
    fn = _ScatterAddNoJvp if _compiling() else _ScatterAddFn
    return fn.apply(grad, index, shape, axis)


def _is_symbolic(t: torch.Tensor) -> bool:
    """True where index values cannot be read eagerly: compile, export, fake tensors, vmap."""
    if _compiling() or isinstance(t, torch._subclasses.FakeTensor):
        return True
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        if functorch.is_batchedtensor(t):
            return True
        t = functorch.get_unwrapped(t)
    return isinstance(t, torch._subclasses.FakeTensor)


def to_index(indices: Any, host: np.ndarray | None, data: torch.Tensor) -> torch.Tensor:
    if host is None:
        return indices
    if any(s < 0 for s in host.strides):
        host = np.ascontiguousarray(host)
    return torch.as_tensor(host, device=data.device)


def checked_index(
    index: torch.Tensor, size: int, axis: int, opset: int, host: np.ndarray | None
) -> torch.Tensor:
    """Bounds-check ``index`` (eagerly where its values are readable) and make it non-negative."""
    if index.numel() == 0:
        return index
    lo, hi = index_range(size, opset)
    if host is not None:
        low, high = int(host.min()), int(host.max())
    elif _is_symbolic(index):
        ok = torch.all((index >= lo) & (index <= hi))
        msg = (
            f"gather: indices element out of data bounds: indices must be within the inclusive "
            f"range [{lo},{hi}] for axis {axis}"
        )
        torch._assert_async(ok, msg)
        return torch.where(index < 0, index + size, index) if opset >= 11 else index
    else:
        low, high = torch.stack(torch.aminmax(index)).tolist()
    if low < lo or high > hi:
        values = host if host is not None else index.detach().cpu().numpy()
        raise out_of_bounds_error(values, size, axis, opset)
    return torch.where(index < 0, index + size, index) if low < 0 else index


def gather(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    return _apply_gather(data, index, axis)


def gather_grad(
    shape: tuple[int, ...], index: torch.Tensor, grad: torch.Tensor, axis: int
) -> torch.Tensor:
    return _apply_scatter_add(shape, index, grad, axis)
