"""NumPy Gather: ``ndarray.take`` forward and a scatter-add VJP planned by :mod:`._strategy`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._checks import out_of_bounds_error
from ._strategy import numpy_grad_plan

#: The formulations of gather_grad, named as :func:`._strategy.numpy_grad_plan` returns them.
GRAD_PLANS = ("add.at", "rows", "elements")
#: Occurrence rounds of the row fix-up before np.add.at takes the rest of a repeated index.
_ROUNDS = 8
#: Flat positions per block of the element plan: 256 KiB of intp, cache-sized.
_BLOCK_POSITIONS = 1 << 15


def gather(data: np.ndarray, idx: np.ndarray, axis: int, opset: int) -> np.ndarray:
    """Gather with host indices already dtype-checked; bounds are checked here."""
    if opset < 11 and idx.size and idx.min() < 0:
        raise out_of_bounds_error(idx, data.shape[axis], axis, opset)
    try:
        # The method skips np.take's Python wrapper (~0.8 us). Its default mode "raise"
        # accepts exactly [-s, s-1], the Gather-11 range, and fills a fresh array only.
        out = data.take(idx, axis)
    except IndexError:
        raise out_of_bounds_error(idx, data.shape[axis], axis, opset) from None
    # A rank-0 result is a NumPy scalar from take; Gather's output is a tensor on every backend.
    return out if type(out) is np.ndarray else np.asarray(out)


def gather_grad(shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int) -> np.ndarray:
    """Scatter-add ``grad`` into zeros of ``shape`` along ``axis``; ``idx`` is in bounds."""
    return grad_by_plan(None, shape, idx, grad, axis)


def grad_by_plan(
    plan: str | None, shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int
) -> np.ndarray:
    """gather_grad by the formulation ``plan`` (one of :data:`GRAD_PLANS`), or by the one
    :func:`._strategy.numpy_grad_plan` picks for these shapes and indices if None.
    """
    if plan is not None and plan not in GRAD_PLANS:
        msg = f"unknown gather_grad plan {plan!r}; known: {', '.join(GRAD_PLANS)}"
        raise ValueError(msg)
    size = shape[axis]
    flat = idx.reshape(-1)
    if flat.size and flat.min() < 0:
        flat = np.where(flat < 0, flat + size, flat)
    pre, n, post = math.prod(shape[:axis]), flat.size, math.prod(shape[axis + 1 :])
    repeats, counted = None, False
    if plan is None:
        plan = numpy_grad_plan(pre, size, n, post, None)
        if plan == "":  # the choice depends on how many indices repeat
            repeats, counted = _repeats(flat, size), True
            share = 0.0 if repeats is None else repeats[0].size / n
            plan = numpy_grad_plan(pre, size, n, post, share)
    if plan == "add.at" or n == 0 or pre * post == 0:
        out = np.zeros(shape, dtype=grad.dtype)
        if grad.size:
            key: tuple[Any, ...] = (*(slice(None),) * axis, flat.reshape(idx.shape))
            np.add.at(out, key, grad)
        return out
    out3 = np.zeros((pre, size, post), dtype=grad.dtype)
    g3 = grad.reshape(pre, n, post)
    if plan == "rows":
        _scatter_rows(out3, flat, g3, repeats if counted else _repeats(flat, size))
    else:
        _add_elements(out3, flat, g3)
    return out3.reshape(shape)


def _repeats(flat: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Positions in ``flat`` of indices that occur more than once, in order of occurrence,
    with each one's occurrence number (0 for the first); None if all indices differ.
    """
    if size <= 16 * flat.size:  # a count per slot is cheaper than sorting the indices
        counts = np.bincount(flat, minlength=size)
        if counts.max() < 2:
            return None
        members = np.flatnonzero(counts[flat] > 1)
        order = members[np.argsort(flat[members], kind="stable")]
    else:
        order = np.argsort(flat, kind="stable")
        keys = flat[order]
        same = keys[1:] == keys[:-1]
        if not same.any():
            return None
        keep = np.zeros(flat.size, dtype=bool)
        keep[1:] |= same
        keep[:-1] |= same
        order = order[keep]
    keys = flat[order]
    first = np.concatenate(([True], keys[1:] != keys[:-1]))
    starts = np.flatnonzero(first)
    rank = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    return order, rank


def _scatter_rows(
    out3: np.ndarray,
    flat: np.ndarray,
    g3: np.ndarray,
    repeats: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """Whole ``post``-long rows: one scatter of every slice, then repeated indices re-summed.

    Where an index repeats, the bulk scatter leaves one of its slices; the fix-up writes
    the first again and adds the others one occurrence number at a time (a vectorised
    round each, no index twice in a round), the rare long tail by ``np.add.at``. The sums
    run in order of occurrence, as ``np.add.at`` would add them.
    """
    out3[:, flat, :] = g3
    if repeats is None:
        return
    members, rank = repeats
    for k in range(min(int(rank.max()) + 1, _ROUNDS)):
        chosen = members[rank == k]
        if k == 0:
            out3[:, flat[chosen], :] = g3[:, chosen, :]
        else:
            out3[:, flat[chosen], :] += g3[:, chosen, :]
    tail = np.sort(members[rank >= _ROUNDS])
    if tail.size:
        key: tuple[Any, ...] = (slice(None), flat[tail])
        np.add.at(out3, key, g3[:, tail, :])


def _add_elements(out3: np.ndarray, flat: np.ndarray, g3: np.ndarray) -> None:
    """Short rows: the 1-D ``np.add.at`` loop at flat element positions, built for a block of
    ``pre`` rows at a time so the positions stay in cache.
    """
    pre, size, post = out3.shape
    n = flat.size
    out1 = out3.reshape(-1)
    g2 = g3.reshape(pre, n * post)
    within = ((flat.astype(np.intp) * post)[:, None] + np.arange(post, dtype=np.intp)).reshape(-1)
    rows = max(1, _BLOCK_POSITIONS // (n * post))
    offsets = np.arange(min(rows, pre), dtype=np.intp)[:, None] * (size * post) + within
    buf = np.empty_like(offsets)
    for r0 in range(0, pre, rows):
        k = min(rows, pre - r0)
        np.add(offsets[:k], r0 * size * post, out=buf[:k])
        np.add.at(out1, buf[:k].reshape(-1), g2[r0 : r0 + k].reshape(-1))
