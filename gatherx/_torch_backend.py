"""PyTorch Gather: an autograd.Function pair (gather, scatter-add) that differentiate each other."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ._checks import index_range, make_out_of_bounds_error, out_of_bounds_error, output_shape
from ._frameworks import EAGER_GATHER, EAGER_GATHER_GRAD
from ._strategy import torch_backward_plan, torch_forward_plan

# uint16/32/64 are "shell" dtypes with few kernels; gather is pure data movement, so it runs
# on the same bits viewed as the signed type of the same width.
_BIT_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _take(data: torch.Tensor, index: torch.Tensor, axis: int, eager: bool = False) -> torch.Tensor:
    """``index_select`` as _strategy plans it; ``eager``: no compile, tracer or torch.func."""
    shape = output_shape(data.shape, index.shape, axis)
    twin = _BIT_TWIN.get(data.dtype)
    source = data.view(twin) if twin is not None else data
    flat = index.reshape(-1)
    plan = torch_forward_plan(
        tuple(source.shape),
        axis,
        flat.shape[0],
        contiguous=source.is_contiguous(),
        itemsize=source.element_size(),
        threads=1 if _compiling() else torch.get_num_threads(),
        device_type=source.device.type,
        eager=eager,
    )
    # The TorchScript ONNX exporter replaces this body by one Gather node, but it still
    # traces it, and its passes cannot digest the views.
    if plan != "index_select" and not torch.jit.is_tracing():  # see _strategy
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


def _scatter_add(grad: torch.Tensor, index: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    # index_add is deterministic under torch.use_deterministic_algorithms(True), CUDA included.
    flat = index.reshape(-1)
    if torch_backward_plan(str(flat.dtype)[6:], flat.device.type) == "index_add_int64":
        flat = flat.long()  # see _strategy: the CPU kernel's fast path needs int64
    before, after = grad.shape[:axis], grad.shape[axis + index.ndim :]
    source = grad.reshape((*before, flat.shape[0], *after))
    return grad.new_zeros((*before, size, *after)).index_add_(axis, flat, source)


class _GatherNoJvp(torch.autograd.Function):
    """Gather on in-bounds, non-negative ``index``; backward is a differentiable scatter-add."""

    generate_vmap_rule = True

    @staticmethod
    def forward(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
        return _take(data, index, axis)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        data, index, axis = inputs
        ctx.save_for_backward(index)
        ctx.size = data.shape[axis]
        ctx.axis = axis
        ctx.set_materialize_grads(True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        return _apply_scatter_add(grad, index, ctx.axis, ctx.size), None, None

    @staticmethod
    def symbolic(g: Any, data: Any, index: Any, axis: int) -> Any:
        """One ONNX ``Gather`` node for torch's TorchScript ONNX exporter (opsets below 18)."""
        return g.op("Gather", data, index, axis_i=axis)


class _GatherFn(_GatherNoJvp):
    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _GatherNoJvp.setup_context(ctx, inputs, output)
        ctx.save_for_forward(inputs[1])  # torch.func's vmap rule needs it saved, not an attribute

    @staticmethod
    def jvp(ctx: Any, data_t: torch.Tensor, index_t: Any, axis_t: Any) -> torch.Tensor:
        (index,) = ctx.saved_tensors
        return _take(data_t, index, ctx.axis)


class _GatherEager(torch.autograd.Function):
    """``_GatherFn`` for plain eager autograd, in the old style (``forward`` takes ``ctx``).

    ``Function.apply`` runs ``inspect.signature`` on every call of a Function that defines
    ``setup_context`` (~20 us), which torch.func's transforms need and plain autograd does not;
    ``eager_gather`` uses this one where no transform, compiler, tracer or forward AD is active.
    """

    @staticmethod
    def forward(ctx: Any, data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.size = data.shape[axis]
        ctx.axis = axis
        return _take_eager(data, index, axis)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        if torch.is_grad_enabled() or _functorch_active():
            # create_graph=True, or vmap over the backward (gradcheck's batched grad)
            return _apply_scatter_add(grad, index, ctx.axis, ctx.size), None, None
        return _scatter_add(grad, index, ctx.axis, ctx.size), None, None


class _ScatterAddNoJvp(torch.autograd.Function):
    """Scatter-add of ``grad`` into zeros of size ``size`` on ``axis``; its backward is a gather.

    Only ``size`` is passed, not the whole data shape: the other dimensions are ``grad``'s,
    which keeps every argument a tensor or an int for vmap's generated rule and for Dynamo.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(grad: torch.Tensor, index: torch.Tensor, axis: int, size: int) -> torch.Tensor:
        return _scatter_add(grad, index, axis, size)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _, index, axis, _ = inputs
        ctx.save_for_backward(index)
        ctx.axis = axis
        ctx.set_materialize_grads(True)

    @staticmethod
    def backward(ctx: Any, gg: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        return _apply_gather(gg, index, ctx.axis), None, None, None


class _ScatterAddFn(_ScatterAddNoJvp):
    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _ScatterAddNoJvp.setup_context(ctx, inputs, output)
        ctx.save_for_forward(inputs[1])
        ctx.size = inputs[3]

    @staticmethod
    def jvp(ctx: Any, grad_t: torch.Tensor, *_: Any) -> torch.Tensor:
        (index,) = ctx.saved_tensors
        return _scatter_add(grad_t, index, ctx.axis, ctx.size)


def _compiling() -> bool:
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


# Dynamo refuses to trace an autograd.Function that defines jvp, so compiled code uses twins
# without it; forward-mode AD is an eager (and torch.func) feature.
def _apply_gather(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    fn = _GatherNoJvp if _compiling() else _GatherFn
    return fn.apply(data, index, axis)


def _apply_scatter_add(
    grad: torch.Tensor, index: torch.Tensor, axis: int, size: int
) -> torch.Tensor:
    fn = _ScatterAddNoJvp if _compiling() else _ScatterAddFn
    return fn.apply(grad, index, axis, size)


@torch.library.custom_op("gatherx::assert_in_bounds", mutates_args=())
def _assert_in_bounds(index: torch.Tensor, low: int, high: int, message: str) -> torch.Tensor:
    """``index`` (a copy) after an asynchronous check that it lies in [low, high].

    ``torch._assert_async`` has no vmap batching rule; this op has one, so compiled code
    can check indices that are batched by ``torch.func.vmap``.
    """
    torch._assert_async(torch.all((index >= low) & (index <= high)), message)
    return index.clone()


@_assert_in_bounds.register_fake
def _(index: torch.Tensor, low: int, high: int, message: str) -> torch.Tensor:
    return torch.empty_like(index)


@_assert_in_bounds.register_vmap
def _(
    info: Any, in_dims: tuple[Any, ...], index: torch.Tensor, low: int, high: int, message: str
) -> tuple[torch.Tensor, Any]:
    # Every sample must be in bounds, so the whole batch is checked at once.
    return _assert_in_bounds(index, low, high, message), in_dims[0]


def _plain(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` with torch.func wrappers (vmap batches included) peeled off, or None if traced."""
    if _compiling():
        return None
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        t = functorch.get_unwrapped(t)
    if isinstance(t, torch._subclasses.FakeTensor) or t.device.type == "meta":
        return None
    return t


def _traced_check(index: torch.Tensor, size: int, axis: int, opset: int) -> torch.Tensor:
    """The check where values cannot be read (compile, export, fake or meta tensors).

    An in-graph assert that raises ``RuntimeError`` when run (a device-side assert on CUDA),
    never a host sync and never a silent wrap or clamp.
    """
    lo, hi = index_range(size, opset)
    # The size may be symbolic here, and formatting it would specialise the graph to it.
    low = "-s" if opset >= 11 else "0"
    msg = (
        f"gather: indices element out of data bounds: indices must be within the inclusive "
        f"range [{low},s-1] for axis {axis}, where s = data.shape[{axis}]"
    )
    if torch._C._functorch.is_batchedtensor(index):
        index = _assert_in_bounds(index, lo, hi, msg)
    else:
        torch._assert_async(torch.all((index >= lo) & (index <= hi)), msg)
    return torch.where(index < 0, index + size, index) if opset >= 11 else index


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
    plain = None
    if host is not None:
        low, high = int(host.min()), int(host.max())
    else:
        plain = _plain(index)
        if plain is None:
            return _traced_check(index, size, axis, opset)
        if plain.device.type == "cpu":
            # NumPy reads the same memory without waking torch's thread pool, whose start-up
            # for aminmax cost 30-100 us per call next to the index_select that follows.
            try:
                values = plain.numpy()
                low, high = int(values.min()), int(values.max())
            except RuntimeError:  # inside torch.func transforms the tensor has no storage
                low_t, high_t = torch.aminmax(plain)
                low, high = int(low_t), int(high_t)
        else:  # one device sync, not two
            low, high = torch.stack(torch.aminmax(plain)).tolist()
    if low < lo or high > hi:
        if plain is None:
            raise out_of_bounds_error(host, size, axis, opset)  # type: ignore[arg-type]
        # tolist, not numpy(): inside torch.func transforms numpy() sees no storage
        values = np.asarray(plain.tolist(), dtype=np.int64).reshape(tuple(plain.shape))
        if plain is index:
            raise out_of_bounds_error(values, size, axis, opset)
        # Under vmap the values hold every sample; a position among them would mislead.
        bad = values[(values < lo) | (values > hi)]
        raise make_out_of_bounds_error(int(bad[0]), None, size, axis, opset)
    return torch.where(index < 0, index + size, index) if low < 0 else index


def _needs_autograd(data: torch.Tensor) -> bool:
    """Whether any autodiff could see this call; if not, the Function's overhead buys nothing.

    (The TorchScript tracer counts: ONNX export below opset 18 needs the Function's symbolic.)
    """
    return data.requires_grad or not _plain_eager()


_EAGER_INDEX_DTYPES = frozenset({torch.int32, torch.int64})
# The ONNX dtypes of every opset from 11 on: bfloat16 needs 13 and is tested apart.
_EAGER_DATA_DTYPES = frozenset(
    {torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16,
     torch.uint32, torch.uint64, torch.float16, torch.float32, torch.float64, torch.complex64,
     torch.complex128}
)  # fmt: skip
_EAGER_GRAD_DTYPES = frozenset(
    {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
     torch.complex128, torch.int32, torch.int64}
)  # fmt: skip
_SHAPE_TYPES = frozenset({tuple, torch.Size})

# Module-level names: each attribute hop costs a cache miss on this path (see eager_gather).
_is_compiling = torch.compiler.is_compiling
_is_exporting = torch.compiler.is_exporting
_tracing_state = torch._C._get_tracing_state
_functorch_active = torch._C._are_functorch_transforms_active
_forward_ad = torch.autograd.forward_ad


def _plain_eager() -> bool:
    """No compiler, exporter, TorchScript tracer, torch.func transform or forward AD active."""
    return not (
        _is_compiling()
        or _is_exporting()
        or _tracing_state() is not None
        or _functorch_active()
        or _forward_ad._current_level >= 0
    )


def eager_gather(data: Any, indices: Any, axis: Any, opset: Any) -> torch.Tensor | None:
    """``gather`` for the common eager CPU call in few steps, or None: take the general path.

    After a large gather has evicted the interpreter's code and data from the CPU caches, each
    Python step costs several times its warm time, so this path makes the general path's
    checks in as few steps as it can (docs/performance.md). Any unusual input gets None, and
    the general path validates it and raises the errors.
    """
    if not (
        type(indices) is torch.Tensor
        and type(axis) is int
        and type(opset) is int
        and opset >= 11
        and -(ndim := data.ndim) <= axis < ndim
        and indices.dtype in _EAGER_INDEX_DTYPES
        and (
            (dtype := data.dtype) in _EAGER_DATA_DTYPES or (dtype is torch.bfloat16 and opset >= 13)
        )
        and indices.is_cpu
        and data.is_cpu
        and _plain_eager()
    ):
        return None
    axis %= ndim
    grad = data.requires_grad
    if axis == 0 and dtype not in _BIT_TWIN:
        # index_select checks every index against [0, s-1] as it copies rows (all of ATen's
        # CPU branches do; tests/test_torch_eager.py holds it to that), so gatherx's own check,
        # a pass that costs ~5% of a large gather, runs only where it objects: a negative
        # index to wrap or a bad one to report. Only the discarded output saw any work.
        try:
            return _GatherEager.apply(data, indices, 0) if grad else _rows(data, indices)
        except (IndexError, RuntimeError):  # RuntimeError: from zero-size data
            pass
    if not indices.numel():
        return None
    indices = _eager_index(indices, data.shape[axis], axis, opset)
    if grad:
        return _GatherEager.apply(data, indices, axis)
    return _take_eager(data, indices, axis)


def _rows(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Gather on axis 0: ATen copies whole rows on dim 0 whatever the rank, so no plan or view."""
    if index.ndim == 1:
        return torch.index_select(data, 0, index)
    out = torch.index_select(data, 0, index.reshape(-1))
    return out.view((*index.shape, *data.shape[1:]))


def _take_eager(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    if axis == 0 and data.dtype not in _BIT_TWIN:
        return _rows(data, index)
    return _take(data, index, axis, eager=True)


def eager_gather_grad(shape: Any, indices: Any, grad: Any, axis: Any) -> torch.Tensor | None:
    """``gather_grad`` for the common eager CPU call in few steps, or None (as eager_gather)."""
    if not (
        type(indices) is torch.Tensor
        and type(axis) is int
        and type(shape) in _SHAPE_TYPES
        and -(rank := len(shape)) <= axis < rank
        and indices.dtype in _EAGER_INDEX_DTYPES
        and grad.dtype in _EAGER_GRAD_DTYPES
        and indices.is_cpu
        and grad.is_cpu
        and not grad.requires_grad
        and _plain_eager()
        and indices.numel()
    ):
        return None
    axis %= rank
    size = shape[axis]
    if type(size) is not int or size < 0 or grad.shape != output_shape(shape, indices.shape, axis):
        return None
    return _scatter_add(grad, _eager_index(indices, size, axis, 13), axis, size)


def _eager_index(indices: torch.Tensor, size: int, axis: int, opset: int) -> torch.Tensor:
    """Non-empty CPU ``indices`` bounds-checked against [-size, size-1] and made non-negative."""
    # One pass in ATen: cheaper here than NumPy's min and max, whose reduction machinery is
    # more Python and C to bring back into the caches.
    low_t, high_t = torch.aminmax(indices)
    low, high = low_t.item(), high_t.item()
    if low < -size or high >= size:
        raise out_of_bounds_error(indices.numpy(), size, axis, opset)
    return torch.where(indices < 0, indices + size, indices) if low < 0 else indices


# Plain tensors and parameters only: subclasses with their own __torch_function__, FakeTensor
# included, take the general path.
EAGER_GATHER.update(dict.fromkeys((torch.Tensor, torch.nn.Parameter), eager_gather))
EAGER_GATHER_GRAD[torch.Tensor] = eager_gather_grad


def gather(data: torch.Tensor, index: torch.Tensor, axis: int) -> torch.Tensor:
    if not _needs_autograd(data):
        return _take(data, index, axis, eager=True)
    return _apply_gather(data, index, axis)


def gather_grad(
    shape: tuple[int, ...], index: torch.Tensor, grad: torch.Tensor, axis: int
) -> torch.Tensor:
    if not _needs_autograd(grad):
        return _scatter_add(grad, index, axis, shape[axis])
    return _apply_scatter_add(grad, index, axis, shape[axis])
