"""Dask Gather: a lazy graph per output block that reads only the data blocks it needs.

Each output block is a short chain of tasks, one per data block along the gathered axis that
its indices fall in: NumPy indices name those blocks when the graph is built, Dask indices
(whose values are unknown until computed) chain over every block along the axis. Dask index
blocks pass through a bounds check first, which raises the eager error at compute time.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.task_spec import List, Task, TaskRef

from .. import _errors, _rules
from .base import Backend
from .chunked import Chunks, first_bad, host_chunks, normalized, offsets, raise_first_bad
from .chunked import blocks as _blocks
from .host_sums import add_at


def _require_known(chunks: Chunks, what: str, fn: str) -> None:
    if any(math.isnan(c) for dim in chunks for c in dim):
        raise _errors.unknown_chunks(fn, what)


def _require_numpy_chunks(x: da.Array, fn: str, role: str) -> None:
    """Refuse a Dask array whose blocks are not NumPy arrays (sparse, CuPy): the tasks fill
    and add into NumPy blocks."""
    kind = type(x._meta)
    if kind is not np.ndarray:
        chunk = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
        raise _errors.unsupported_array(
            fn, role, x, f"its chunks are {chunk}; gatherx computes Dask arrays of NumPy chunks",
            "convert the chunks first, e.g. x.map_blocks(lambda b: b.todense())",
        )  # fmt: skip


# Tasks: what the scheduler runs on blocks.


def _take_at(
    acc: np.ndarray | None,
    block: np.ndarray,
    index_shape: tuple[int, ...],
    positions: np.ndarray | None,
    local: np.ndarray,
    axis: int,
) -> np.ndarray:
    """Write ``block`` gathered at ``local`` into the flat index ``positions`` of ``acc``."""
    taken = np.take(block, local, axis=axis)
    if positions is None:  # every index of the output block falls into this data block
        return taken.reshape((*block.shape[:axis], *index_shape, *block.shape[axis + 1 :]))
    if acc is None:
        acc = np.empty_like(
            block, shape=(*block.shape[:axis], *index_shape, *block.shape[axis + 1 :])
        )
    # The index count is spelled out: -1 cannot be resolved for an empty block.
    flat = acc.reshape((*block.shape[:axis], math.prod(index_shape), *block.shape[axis + 1 :]))
    flat[(slice(None),) * axis + (positions,)] = taken
    return acc


def _take_masked(
    acc: np.ndarray | None, block: np.ndarray, index: np.ndarray, start: int, axis: int
) -> np.ndarray:
    """Like :func:`_take_at` for index values known only now: pick those in this block."""
    flat = index.reshape(-1)
    positions = np.flatnonzero((flat >= start) & (flat < start + block.shape[axis]))
    return _take_at(acc, block, index.shape, positions, flat[positions] - start, axis)


def _empty_output(meta: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.empty_like(meta, shape=shape)


def _add_at(
    acc: np.ndarray | None,
    grad: np.ndarray,
    positions: np.ndarray,
    local: np.ndarray,
    shape: tuple[int, ...],
    axis: int,
) -> np.ndarray:
    """``acc`` (zeros at first) plus the rows of ``grad`` at flat index ``positions``, added
    at ``local`` along ``axis``; duplicates accumulate (``np.add.at`` is unbuffered)."""
    if acc is None:
        acc = np.zeros_like(grad, shape=shape, order="C")
    # The index count is spelled out: -1 cannot be resolved for an empty block.
    count = math.prod(grad.shape[axis : grad.ndim - len(shape) + axis + 1])
    rows = np.take(grad.reshape((*shape[:axis], count, *shape[axis + 1 :])), positions, axis=axis)
    add_at(acc, local, rows, axis)
    return acc


def _add_masked(
    acc: np.ndarray | None,
    grad: np.ndarray,
    index: np.ndarray,
    start: int,
    shape: tuple[int, ...],
    axis: int,
) -> np.ndarray:
    flat = index.reshape(-1)
    positions = np.flatnonzero((flat >= start) & (flat < start + shape[axis]))
    return _add_at(acc, grad, positions, flat[positions] - start, shape, axis)


def _zeros(meta: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.zeros_like(meta, shape=shape)


# Graph building.


class _Index:
    """The index blocks of a graph: NumPy slices checked now, or Dask blocks checked in it."""

    def __init__(self, chunks: Chunks) -> None:
        self.chunks = chunks
        self.host: dict[tuple[int, ...], np.ndarray] = {}
        self.layer: dict[Any, Any] = {}
        self.dependencies: list[da.Array] = []
        self.name = ""

    @classmethod
    def from_host(cls, host: np.ndarray, chunks: Chunks) -> _Index:
        """Blocks of host indices that the flow has already checked and made non-negative."""
        index = cls(chunks)
        starts = [offsets(c) for c in chunks]
        for b in _blocks(chunks):
            where = tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, b, strict=True))
            index.host[b] = np.asarray(host[where])
        return index

    @classmethod
    def from_dask(
        cls, indices: da.Array, chunks: Chunks, size: int, axis: int, opset: int, fn: str
    ) -> _Index:
        """Each block is checked, the first bad index of all is raised, then blocks normalised."""
        if indices.chunks != chunks:
            indices = indices.rechunk(chunks)
        index = cls(chunks)
        index.dependencies.append(indices)
        token = tokenize(indices, size, axis, opset, fn)  # fn: the error's text
        check, verdict, index.name = (f"gather-{s}-{token}" for s in ("check", "verdict", "index"))
        starts = [offsets(c) for c in chunks]
        found = []
        for b in _blocks(chunks):
            start = tuple(s[i] for s, i in zip(starts, b, strict=True))
            source = TaskRef((indices.name, *b))
            key: Any = (check, *b)
            index.layer[key] = Task(key, first_bad, source, size, opset, start, indices.shape)
            found.append(TaskRef(key))
        shape = tuple(indices.shape)
        index.layer[verdict] = Task(
            verdict, raise_first_bad, List(*found), shape, size, axis, opset, fn
        )
        for b in _blocks(chunks):
            key = (index.name, *b)
            source = TaskRef((indices.name, *b))
            index.layer[key] = Task(key, normalized, source, TaskRef(verdict), size)
        return index

    def block(self, b: tuple[int, ...]) -> Any:
        key: Any = (self.name, *b)
        return self.host[b] if self.host else TaskRef(key)

    def touched(self, b: tuple[int, ...], bounds: list[int]) -> list[tuple[int, Any, Any]]:
        """(block along the axis, flat positions, local indices) for each block the indices
        of block ``b`` fall in.

        Positions are None when one block holds them all. Dask index values are unknown
        here: then every block, with positions and local indices both None.
        """
        if not self.host:
            return [(k, None, None) for k in range(len(bounds) - 1)]
        flat = self.host[b].reshape(-1)
        if flat.size == 0:
            return []
        which = np.searchsorted(bounds, flat, side="right") - 1
        ks = np.unique(which)
        if len(ks) == 1:
            return [(int(ks[0]), None, flat - bounds[ks[0]])]
        out = []
        for k in ks:
            positions = np.flatnonzero(which == k)
            out.append((int(k), positions, flat[positions] - bounds[k]))
        return out


class _Lazy(NamedTuple):
    """Dask indices, checked in the graph when it is computed."""

    indices: da.Array
    size: int
    axis: int
    opset: int
    fn: str


def _index(index: np.ndarray | _Lazy, chunks: Chunks | None) -> _Index:
    if isinstance(index, np.ndarray):
        assert chunks is not None
        return _Index.from_host(index, chunks)
    _require_known(index.indices.chunks, "indices", index.fn)
    chunks = chunks or index.indices.chunks
    return _Index.from_dask(index.indices, chunks, index.size, index.axis, index.opset, index.fn)


def _chain(key: tuple[Any, ...], steps: list[tuple[Any, ...]], empty: tuple[Any, ...]) -> dict:
    """The tasks of output block ``key``: ``steps`` folded into an accumulator.

    Step n, ``(function, block key, *args)``, runs ``function(acc, block, *args)``, so each
    task holds one input block; the last task is named ``key``. No steps: ``Task(*empty)``.
    """
    if not steps:
        return {key: Task(key, *empty)}
    tasks = {}
    acc: Any = None
    for n, (function, block, *args) in enumerate(steps):
        step_key = key if n == len(steps) - 1 else (f"{key[0]}-step{n}", *key[1:])
        tasks[step_key] = Task(step_key, function, acc, TaskRef(block), *args)
        acc = TaskRef(step_key)
    return tasks


def _array(
    name: str, layer: dict[Any, Any], source: da.Array, index: _Index, chunks: Chunks
) -> da.Array:
    # One layer holds the index checks too, as culling follows layer dependencies only.
    deps: list[Any] = [source, *index.dependencies]
    graph = HighLevelGraph.from_collections(name, {**index.layer, **layer}, dependencies=deps)
    return da.Array(graph, name, chunks, meta=meta_from_array(source._meta, ndim=len(chunks)))


def _block_shape(chunks: Chunks, b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(c[i] for c, i in zip(chunks, b, strict=True))


def _gather(data: da.Array, index: np.ndarray | _Lazy, axis: int) -> da.Array:
    """Lazy ``data`` gathered along ``axis``."""
    _require_known((data.chunks[axis],), "data", "gather")
    rows = max(data.chunks[axis], default=1)
    chunks = host_chunks(index.shape, rows) if isinstance(index, np.ndarray) else None
    blocks = _index(index, chunks)
    bounds = offsets(data.chunks[axis])
    pre, post = data.chunks[:axis], data.chunks[axis + 1 :]
    out_chunks = (*pre, *blocks.chunks, *post)
    name = "gather-" + tokenize(data, index, axis)
    meta = meta_from_array(data._meta, ndim=len(out_chunks))
    layer: dict[Any, Any] = {}
    for ib in _blocks(blocks.chunks):
        index_shape = _block_shape(blocks.chunks, ib)
        touched = blocks.touched(ib, bounds)
        for pb, qb in itertools.product(_blocks(pre), _blocks(post)):
            steps = [
                (_take_masked, (data.name, *pb, k, *qb), blocks.block(ib), bounds[k], axis)
                if local is None
                else (_take_at, (data.name, *pb, k, *qb), index_shape, positions, local, axis)
                for k, positions, local in touched
            ]
            key = (name, *pb, *ib, *qb)
            empty = (_empty_output, meta, _block_shape(out_chunks, (*pb, *ib, *qb)))
            layer.update(_chain(key, steps, empty))
    return _array(name, layer, data, blocks, out_chunks)


def _grad_chunks(
    pre: Chunks, post: Chunks, shape: tuple[int, ...], axis: int, dtype: np.dtype
) -> Chunks:
    """Chunks of the gradient: the grad's off the axis, automatic along it."""
    if 0 in shape:
        # Nothing to hold, and automatic chunks would divide by the empty dimension.
        return (*pre, (shape[axis],), *post)
    return normalize_chunks((*pre, "auto", *post), shape, dtype=dtype)


def _gather_grad(
    shape: tuple[int, ...], index: np.ndarray | _Lazy, grad: da.Array, axis: int
) -> da.Array:
    """Lazy scatter-add of ``grad`` into zeros of ``shape``."""
    q = index.ndim if isinstance(index, np.ndarray) else index.indices.ndim
    pre, post = grad.chunks[:axis], grad.chunks[axis + q :]
    blocks = _index(index, grad.chunks[axis : axis + q])
    out_chunks = _grad_chunks(pre, post, shape, axis, grad.dtype)
    bounds = offsets(out_chunks[axis])
    name = "gather-grad-" + tokenize(shape, index, grad, axis)
    meta = meta_from_array(grad._meta, ndim=len(shape))
    # The index blocks that add into each block along the axis.
    adds: dict[int, list[tuple[tuple[int, ...], Any, Any]]] = {}
    for ib in _blocks(blocks.chunks):
        for k, positions, local in blocks.touched(ib, bounds):
            if local is not None and positions is None:
                positions = np.arange(local.size)
            adds.setdefault(k, []).append((ib, positions, local))
    layer: dict[Any, Any] = {}
    for k in range(len(bounds) - 1):
        for pb, qb in itertools.product(_blocks(pre), _blocks(post)):
            key = (name, *pb, k, *qb)
            block_shape = _block_shape(out_chunks, (*pb, k, *qb))
            steps = [
                (
                    _add_masked,
                    (grad.name, *pb, *ib, *qb),
                    blocks.block(ib),
                    bounds[k],
                    block_shape,
                    axis,
                )
                if local is None
                else (_add_at, (grad.name, *pb, *ib, *qb), positions, local, block_shape, axis)
                for ib, positions, local in adds.get(k, [])
            ]
            layer.update(_chain(key, steps, (_zeros, meta, block_shape)))
    return _array(name, layer, grad, blocks, out_chunks)


class DaskBackend(Backend):
    """Lazy graphs; NumPy indices are checked when the graph is built, Dask ones in it."""

    name = "dask"
    max_rank = _rules.NUMPY_MAX_RANK  # its chunks are NumPy arrays

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        _require_numpy_chunks(x, fn, role)
        if role == "grad":  # the result has the shape given: every chunk is compared with it
            _require_known(x.chunks, role, fn)
        return x

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        _require_numpy_chunks(index, fn, "indices")

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        return host

    def bounds(self, index: Any) -> tuple[int, int] | None:
        return None  # values are known only when the graph is computed

    def size(self, index: Any) -> int:
        return 1  # even an empty Dask index is checked in the graph, as any other

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        return _Lazy(index, size, axis, opset, fn)

    def take(self, data: Any, index: Any, axis: int) -> Any:
        return _gather(data, index, axis)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if self.dtype_name(grad) in _rules.HALF_DTYPES:  # sum in float32, round once
            return _gather_grad(shape, index, grad.astype(np.float32), axis).astype(grad.dtype)
        return _gather_grad(shape, index, grad, axis)


#: The one instance the dispatch uses.
BACKEND = DaskBackend()
