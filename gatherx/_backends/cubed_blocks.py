"""cubed Gather as blockwise tasks over data whole along the axis, never cubed's own indexing.

cubed's ``take`` goes through its ``__getitem__``, which returns the data unchanged whenever
the output shape equals the input's (any permutation of an axis) and computes cubed indices
when the graph is built. Here each output block is one ``np.take`` of a data block that spans
the axis; cubed indices are checked in the graph (see :mod:`.chunked`) and raise when it runs.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import cubed
import numpy as np
from cubed.core.ops import blockwise

from .. import _rules
from .chunked import block_start, first_bad, host_chunks, normalized, raise_first_bad
from .host_sums import add_at


class Lazy(NamedTuple):
    """cubed indices made non-negative in the graph, after a verdict over all their blocks."""

    index: Any
    verdict: Any


# Tasks: what cubed's executors run, module-level so that other processes can unpickle them.


def _found(block: np.ndarray, *, chunks: Any, size: int, opset: int, shape: Any, block_id: Any):
    """The block's first bad index as ``[flat position, value]``, or ``[-1, 0]``."""
    hit = first_bad(block, size, opset, block_start(chunks, block_id), shape)
    pair = [-1, 0] if hit is None else list(hit)
    return np.asarray(pair, dtype=np.int64).reshape((1,) * block.ndim + (2,))


def _verdict(found: np.ndarray, *, shape: Any, size: int, axis: int, opset: int, fn: str):
    pairs = found.reshape(-1, 2)
    hits = [None if f < 0 else (int(f), int(v)) for f, v in pairs]
    raise_first_bad(hits, shape, size, axis, opset, fn)
    return np.zeros((), dtype=np.int8)


def _normalized(block: np.ndarray, checked: np.ndarray, *, size: int) -> np.ndarray:
    return normalized(block, checked, size)


def _after(block: np.ndarray, checked: np.ndarray) -> np.ndarray:
    return block


def _take(data: np.ndarray, index: np.ndarray, *, axis: int) -> np.ndarray:
    return np.take(data, index, axis=axis)


def _add(grad: np.ndarray, index: np.ndarray, *, size: int, axis: int, dtype: Any) -> np.ndarray:
    """Zeros along the whole axis with the rows of ``grad`` added at ``index`` (in order)."""
    rows = grad.reshape((*grad.shape[:axis], index.size, *grad.shape[axis + index.ndim :]))
    acc = np.zeros((*rows.shape[:axis], size, *rows.shape[axis + 1 :]), dtype=dtype)
    add_at(acc, index.reshape(-1), rows, axis)
    return acc.astype(grad.dtype, copy=False)


# Graph building.


def check(index: Any, size: int, axis: int, opset: int, fn: str) -> Lazy:
    """cubed ``index`` checked block by block when computed, one verdict over all blocks."""
    chunks, shape = index.chunks, tuple(index.shape)
    found_chunks = (*((1,) * len(c) for c in chunks), (2,))
    found = cubed.map_blocks(
        functools.partial(_found, chunks=chunks, size=size, opset=opset, shape=shape),
        index, dtype=np.int64, chunks=found_chunks, new_axis=index.ndim,
    )  # fmt: skip
    found = found.rechunk(found.shape)  # one small block: one entry per index block
    verdict = cubed.map_blocks(
        functools.partial(_verdict, shape=shape, size=size, axis=axis, opset=opset, fn=fn),
        found, dtype=np.int8, chunks=(), drop_axis=tuple(range(found.ndim)),
    )  # fmt: skip
    wrapped = cubed.map_blocks(
        functools.partial(_normalized, size=size), index, verdict, dtype=index.dtype
    )
    return Lazy(wrapped, verdict)


def _labels(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{k}" for k in range(n))


def _whole(x: Any, dims: range) -> Any:
    """``x`` with one block along each of ``dims``."""
    if all(x.numblocks[d] == 1 for d in dims):
        return x
    return x.rechunk(tuple(x.shape[d] if d in dims else c for d, c in enumerate(x.chunksize)))


def _native(index: np.ndarray | Lazy | Any, like: Any, rows: int) -> tuple[Any, Any]:
    """(cubed index, verdict or None) for checked host indices or a :class:`Lazy` one."""
    if isinstance(index, Lazy):
        return index
    if isinstance(index, np.ndarray):
        chunks = host_chunks(index.shape, rows)
        return cubed.array_api.asarray(index, chunks=chunks, spec=like.spec), None
    return index, None  # an empty cubed index: nothing to check


def _empty(shape: tuple[int, ...], dtype: Any, like: Any, verdict: Any) -> Any:
    out = cubed.array_api.zeros(shape, dtype=dtype, spec=like.spec)
    return out if verdict is None else _depend(out, verdict)


def _depend(out: Any, verdict: Any) -> Any:
    """``out`` computed only after ``verdict`` passed."""
    return cubed.map_blocks(_after, out, verdict, dtype=out.dtype)


def take(data: Any, index: np.ndarray | Lazy | Any, axis: int) -> Any:
    """``data`` gathered along ``axis`` at checked host indices or checked cubed ones."""
    idx, verdict = _native(index, data, max(data.chunksize[axis], 1))
    shape = _rules.output_shape(data.shape, idx.shape, axis)
    if math.prod(shape) == 0 or data.shape[axis] == 0:
        return _empty(shape, data.dtype, data, verdict)
    whole = _whole(data, range(axis, axis + 1))
    pre, post = _labels("p", axis), _labels("q", data.ndim - axis - 1)
    inner = _labels("i", idx.ndim)
    return blockwise(
        functools.partial(_take, axis=axis), (*pre, *inner, *post),
        whole, (*pre, "axis", *post), idx, inner, dtype=data.dtype, align_arrays=False,
    )  # fmt: skip


def scatter_add(shape: tuple[int, ...], index: np.ndarray | Lazy | Any, grad: Any, axis: int):
    """Zeros of ``shape`` with ``grad`` added at checked indices along ``axis``."""
    idx, verdict = _native(index, grad, 1 << 62)
    if math.prod(shape) == 0 or math.prod(idx.shape) == 0:
        return _empty(shape, grad.dtype, grad, verdict)
    q = idx.ndim
    idx = _whole(idx, range(q))
    whole = _whole(grad, range(axis, axis + q))
    pre, post = _labels("p", axis), _labels("q", len(shape) - axis - 1)
    inner = _labels("i", q)
    half = _rules.dtype_name(grad.dtype) in _rules.HALF_DTYPES  # sum in float32, round once
    kernel = functools.partial(
        _add, size=shape[axis], axis=axis, dtype=np.float32 if half else grad.dtype
    )
    return blockwise(
        kernel, (*pre, "axis", *post), whole, (*pre, *inner, *post), idx, inner,
        dtype=grad.dtype, new_axes={"axis": shape[axis]}, align_arrays=False,
    )  # fmt: skip
