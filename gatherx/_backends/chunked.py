"""What chunked lazy backends (Dask, cubed) share: block offsets and the deferred bounds check.

An index whose values are known only when the graph computes is checked block by block there;
one verdict over all blocks raises the eager IndexError for the first bad index in C order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from .. import _errors, _rules

Chunks = tuple[tuple[int, ...], ...]


def offsets(chunks: Sequence[int]) -> list[int]:
    """Where each block along one dimension starts, and the end."""
    return [0, *itertools.accumulate(chunks)]


def blocks(chunks: Chunks) -> Iterator[tuple[int, ...]]:
    """Every block's coordinates, in C order."""
    return itertools.product(*(range(len(c)) for c in chunks))


def block_start(chunks: Chunks, block: Sequence[int]) -> tuple[int, ...]:
    """The position of ``block``'s first element in the whole array."""
    return tuple(offsets(c)[i] for c, i in zip(chunks, block, strict=True))


def regular(n: int, size: int) -> tuple[int, ...]:
    """``n`` elements in blocks of ``size`` (the last one shorter); one empty block for none."""
    size = max(size, 1)
    return (*([size] * (n // size)), *([n % size] if n % size or n == 0 else []))


def host_chunks(shape: tuple[int, ...], rows: int) -> Chunks:
    """Chunks for host indices: at most ``rows`` indices per block, trailing dimensions whole
    while they fit, so that an output block is about as large as a data block."""
    chunks = []
    budget = max(rows, 1)
    for n in reversed(shape):
        size = max(min(n, budget), 1)
        budget = max(budget // size, 1)
        chunks.append(regular(n, size))
    return tuple(reversed(chunks))


# Tasks: what a scheduler runs on index blocks.


def first_bad(
    block: np.ndarray, size: int, opset: int, start: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, int] | None:
    """(flat position in the whole index array, value) of the block's first bad index."""
    found = _rules.first_bad(block, size, opset)
    if found is None:
        return None
    value, local = found
    position = tuple(int(s + p) for s, p in zip(start, local, strict=True))
    return (int(np.ravel_multi_index(position, shape)) if shape else 0), value


def raise_first_bad(
    found: Sequence[tuple[int, int] | None],
    shape: tuple[int, ...],
    size: int,
    axis: int,
    opset: int,
    fn: str,
) -> None:
    """The verdict: raise the eager error for the first bad index over all blocks, if any."""
    hits = [f for f in found if f is not None]
    if hits:
        flat, value = min(hits)
        position = tuple(int(p) for p in np.unravel_index(flat, shape)) if shape else ()
        raise _errors.out_of_bounds(fn, value, position, size, axis, opset)


def normalized(block: np.ndarray, checked: object, size: int) -> np.ndarray:
    """An index block the verdict (``checked``) passed, negatives moved into [0, size)."""
    return np.where(block < 0, block + size, block)
