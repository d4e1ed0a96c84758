"""NumPy Gather: ``np.take`` (which bounds-checks as it copies) and a sort-based scatter-add VJP."""

from __future__ import annotations

import numpy as np

from ._checks import out_of_bounds_error


def gather(data: np.ndarray, idx: np.ndarray, axis: int, opset: int) -> np.ndarray:
    """Gather with host indices already dtype-checked; bounds are checked here."""
    if opset < 11 and idx.size and idx.min() < 0:
        raise out_of_bounds_error(idx, data.shape[axis], axis, opset)
    try:
        # mode="raise" accepts exactly [-s, s-1], the Gather-11 range, and writes only into a
        # fresh output array, so an error leaves nothing half-done behind.
        return np.take(data, idx, axis=axis, mode="raise")
    except IndexError:
        raise out_of_bounds_error(idx, data.shape[axis], axis, opset) from None


def gather_grad(
    shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int
) -> np.ndarray:
    """Scatter-add ``grad`` into zeros of ``shape`` along ``axis``; ``idx`` is in bounds.

    ``np.add.at`` is unbuffered and slow; sorting the indices once turns the duplicates into
    contiguous runs that ``np.add.reduceat`` sums as whole slices.
    """
    size = shape[axis]
    flat = idx.reshape(-1)
    flat = np.where(flat < 0, flat + size, flat) if flat.size and flat.min() < 0 else flat
    g = grad.reshape((*shape[:axis], flat.size, *shape[axis + 1 :]))
    out = np.zeros(shape, dtype=grad.dtype)
    if flat.size == 0:
        return out
    lead = (slice(None),) * axis
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    if starts.size == flat.size:  # no duplicates: a plain scatter
        out[(*lead, flat)] = g
        return out
    summed = np.add.reduceat(np.take(g, order, axis=axis), starts, axis=axis)
    out[(*lead, ordered[starts])] = summed
    return out
