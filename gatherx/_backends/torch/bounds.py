"""PyTorch index bounds: read on the host where the bounds policy says so and values can be
read, else an asynchronous assert on the device (in the graph, where they cannot be read)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import _errors, _policy, _rules
from . import subclasses
from .domain import cpu_extremes
from .kernels import wrap_unchecked
from .modes import compiling, functorch_active, onnx_exporting, tracing, values_readable


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


def plain(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` with torch.func wrappers (vmap batches included) peeled off, or None if traced."""
    if compiling():
        return None
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        t = functorch.get_unwrapped(t)
    if not values_readable(t):
        return None
    return t


def device_policy_on_cpu() -> bool:
    """Whether the device policy is forced on the CPU (:func:`gatherx._policy.force`).

    The eager CPU path reads CPU indices on the host; it steps aside then, so that CPU tests
    run the code accelerators run. Compiled code never gets here (Dynamo is kept away from the
    policy's ContextVar), and its bounds are in the graph anyway.
    """
    return bool(_policy.FORCING) and not compiling() and not _policy.exact("cpu")


def exact(index: torch.Tensor) -> bool:
    """Whether ``index``'s bounds are read on the host (:mod:`gatherx._policy`).

    Compiled and exported code cannot read them; the TorchScript tracer records one call
    whose trace must hold no assert (the ONNX exporter has no such node), so it reads them.
    Devices without an asynchronous assert kernel (MPS, for one) are read too: the device
    policy never skips a check.
    """
    if compiling():
        return False
    kind = index.device.type
    return tracing() or _policy.exact(kind) or not asserts_on(kind)


_ASSERTS: dict[str, bool] = {}


def asserts_on(kind: str) -> bool:
    """Whether ATen has ``_assert_async`` for devices of ``kind`` (CPU and CUDA builds do)."""
    found = _ASSERTS.get(kind)
    if found is None:
        key = "PrivateUse1" if kind == "privateuseone" else kind.upper()
        try:
            found = torch._C._dispatch_has_kernel_for_dispatch_key("aten::_assert_async.msg", key)
        except RuntimeError:  # a device kind with no dispatch key of that name
            found = False
        _ASSERTS[kind] = found
    return found


def read(index: torch.Tensor) -> tuple[int, int] | None:
    """(min, max) of a non-empty index, or None where its values cannot be read."""
    values = plain(index)
    if values is None:
        return None
    if subclasses.is_dtensor(values):
        low, high = subclasses.extremes(values)
        return int(low), int(high)
    if values.device.type == "cpu":
        # as the eager path reads them (one ATen pass, or Python ints for a few values)
        try:
            return cpu_extremes(values)
        except RuntimeError:  # inside torch.func transforms the tensor has no storage
            pass
    extremes = torch.stack(torch.aminmax(values)).tolist()  # one device sync, not two
    return int(extremes[0]), int(extremes[1])


def to_host(index: torch.Tensor) -> np.ndarray:
    """The values of a readable index (every sample of a vmap batch), to locate a bad one."""
    values = plain(index)
    assert values is not None
    if subclasses.is_dtensor(values):
        return subclasses.values(values)
    # tolist, not numpy(): inside torch.func transforms numpy() sees no storage
    return np.asarray(values.tolist(), dtype=np.int64).reshape(tuple(values.shape))


def device_check(index: torch.Tensor, size: int, axis: int, opset: int, fn: str) -> torch.Tensor:
    """The device policy's check of a non-empty index: no host read, no sync.

    ``torch._assert_async`` on the index's extremes, computed on its device: on CUDA a
    device-side assert whose kernel prints gatherx's message (a ``RuntimeError`` at the next
    synchronising call), on the CPU a ``RuntimeError`` at once. The extremes are compared in
    the index's own dtype, so int64 values beyond int32 and, before opset 11, negative ones
    fail too; from opset 11 negatives are wrapped on the device. Indices that cannot be read
    (compile, fake tensors) or that torch.func wraps take :func:`traced_check`.
    """
    values = plain(index)
    if values is not index:
        return traced_check(index, size, axis, opset, fn)
    lo, hi = _rules.index_range(size, opset)
    info = torch.iinfo(index.dtype)  # bounds past the dtype's range exclude nothing
    low, high = subclasses.extremes(index) if subclasses.is_dtensor(index) else torch.aminmax(index)
    ok = (low >= max(lo, info.min)) & (high <= min(hi, info.max))
    torch._assert_async(ok, _errors.traced_out_of_bounds(fn, axis, opset))
    if opset >= _rules.NEGATIVE_INDICES_SINCE:
        return wrap_unchecked(index, size)  # a bad value stays bad for index_select too
    return index


def traced_check(index: torch.Tensor, size: int, axis: int, opset: int, fn: str) -> torch.Tensor:
    """The check where values cannot be read (compile, export, fake or meta tensors).

    An in-graph assert that raises ``RuntimeError`` when run (a device-side assert on CUDA),
    never a host sync and never a silent wrap or clamp; negatives are wrapped in the graph.
    """
    lo, hi = _rules.index_range(size, opset)
    # The size may be symbolic here, and formatting it would specialise the graph to it.
    msg = _errors.traced_out_of_bounds(fn, axis, opset)
    if functorch_active():  # vmap may batch the index, under other transforms' wrappers too
        index = _assert_in_bounds(index, lo, hi, msg)
    else:
        torch._assert_async(torch.all((index >= lo) & (index <= hi)), msg)
    if opset >= _rules.NEGATIVE_INDICES_SINCE and not onnx_exporting():
        return wrap_unchecked(index, size)
    return index
