"""Gather for any array-API namespace, written with standard functions only (no backend checks)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import device as device_of

from ._checks import check_host_bounds, index_range, make_out_of_bounds_error, output_shape

# Elements per block of the masked sum in gather_grad: bounds its temporary memory.
_BLOCK_ELEMENTS = 1 << 22


def to_index(xp: Any, indices: Any, host: np.ndarray | None, data: Any) -> Any:
    if host is None:
        return indices
    # ascontiguousarray would turn a 0-d array into a 1-d one
    host = host if host.flags.c_contiguous else np.ascontiguousarray(host)
    return xp.asarray(host, device=device_of(data))


def checked_index(
    xp: Any, index: Any, size: int, axis: int, opset: int, host: np.ndarray | None
) -> Any:
    """Raise for out-of-range indices (reading them), then make them non-negative."""
    if math.prod(index.shape) == 0:
        return index
    lo, hi = index_range(size, opset)
    if host is not None:
        check_host_bounds(host, size, axis, opset)
        low = int(host.min())
    else:
        low, high = int(xp.min(index)), int(xp.max(index))
    if host is None and (low < lo or high > hi):
        flat = xp.reshape(index, (-1,))
        bad = xp.astype((flat < lo) | (flat > hi), xp.int8)
        first = int(xp.argmax(bad))
        position = np.unravel_index(first, index.shape) if index.ndim else ()
        value = int(flat[first])
        raise make_out_of_bounds_error(value, [int(p) for p in position], size, axis, opset)
    return xp.where(index < 0, index + size, index) if low < 0 else index


def gather(xp: Any, data: Any, index: Any, axis: int) -> Any:
    shape = output_shape(data.shape, index.shape, axis)
    # The standard's take wants 1-D indices; any rank is a reshape away.
    out = xp.take(data, xp.reshape(index, (-1,)), axis=axis)
    return xp.reshape(out, shape)


def gather_grad(xp: Any, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
    """Scatter-add by masked sums: the standard has no scatter, and a one-hot matmul would
    let an inf in one row turn other rows into nan (0 * inf)."""
    size = shape[axis]
    dev = device_of(grad)
    flat = xp.reshape(index, (-1,))
    n = flat.shape[0]
    if n == 0 or size == 0 or math.prod(shape) == 0:
        return xp.zeros(shape, dtype=grad.dtype, device=dev)
    flat = xp.where(flat < 0, flat + size, flat)
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    g = xp.reshape(grad, (pre, 1, n, post))
    zero = xp.zeros((), dtype=grad.dtype, device=dev)
    targets = xp.arange(size, dtype=flat.dtype, device=dev)
    block = max(1, _BLOCK_ELEMENTS // (pre * n * post))
    parts = []
    for start in range(0, size, block):
        rows = targets[start : min(start + block, size)]
        mask = xp.reshape(flat, (1, 1, n, 1)) == xp.reshape(rows, (1, -1, 1, 1))
        parts.append(xp.sum(xp.where(mask, g, zero), axis=2, dtype=grad.dtype))
    out = parts[0] if len(parts) == 1 else xp.concat(parts, axis=1)
    return xp.reshape(out, shape)
