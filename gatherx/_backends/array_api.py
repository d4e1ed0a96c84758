"""Gather for any array-API namespace, written with standard functions only (no backend checks)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import device as device_of

from .. import _rules
from .base import Backend

# Elements per block of the masked sum in gather_grad: bounds its temporary memory.
_BLOCK_ELEMENTS = 1 << 22


class ArrayApiBackend(Backend):
    """One array-API namespace ``xp`` (array-api-strict, CuPy, ...)."""

    name = "array-api"

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        # ascontiguousarray would turn a 0-d array into a 1-d one
        host = host if host.flags.c_contiguous else np.ascontiguousarray(host)
        return self.xp.asarray(host, device=device_of(like))

    def bounds(self, index: Any) -> tuple[int, int] | None:
        return int(self.xp.min(index)), int(self.xp.max(index))

    def to_host(self, index: Any) -> np.ndarray:
        return np.from_dlpack(index, device="cpu", copy=True)

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        return self.xp.where(index < 0, index + size, index) if low < 0 else index

    def take(self, data: Any, index: Any, axis: int) -> Any:
        shape = _rules.output_shape(data.shape, index.shape, axis)
        # The standard's take wants 1-D indices; any rank is a reshape away.
        out = self.xp.take(data, self.xp.reshape(index, (-1,)), axis=axis)
        return self.xp.reshape(out, shape)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        """Scatter-add by masked sums: the standard has no scatter, and a one-hot matmul would
        let an inf in one row turn other rows into nan (0 * inf)."""
        xp = self.xp
        size = shape[axis]
        dev = device_of(grad)
        flat = xp.reshape(index, (-1,))
        n = flat.shape[0]
        if n == 0 or size == 0 or math.prod(shape) == 0:
            return xp.zeros(shape, dtype=grad.dtype, device=dev)
        dtype = grad.dtype
        if self.dtype_name(grad) in _rules.HALF_DTYPES:  # sum in float32, round once
            grad = xp.astype(grad, xp.float32)
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
        return xp.astype(xp.reshape(out, shape), dtype)
