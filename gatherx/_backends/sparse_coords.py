"""pydata sparse Gather on coordinates: stored elements are moved, never densified.

Any index rank and a scalar index in one pass (sparse's own ``take`` wants 1-D indices, and
returns COO for GCXS data); the result has the data's format and fill value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sparse

from .. import _rules
from .host_sums import add_at


def _coo(x: Any) -> Any:
    return x if isinstance(x, sparse.COO) else sparse.COO(x)


def _as_format(out: Any, like: Any) -> Any:
    """``out`` in ``like``'s format: CSR and CSC stay so where the result is a matrix."""
    if isinstance(like, sparse.COO):
        return out
    kind = {"CSR": "csr", "CSC": "csc"}.get(type(like).__name__, "gcxs")  # GCXS subclasses
    return out.asformat(kind if out.ndim == 2 else "gcxs")


def take(data: Any, index: np.ndarray, axis: int) -> Any:
    """``data`` gathered along ``axis`` at checked, non-negative host ``index``."""
    coo = _coo(data)
    shape = _rules.output_shape(coo.shape, index.shape, axis)
    flat = index.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    at = coo.coords[axis]
    low = np.searchsorted(ranked, at, side="left")
    counts = np.searchsorted(ranked, at, side="right") - low
    # Stored element e appears once for each index position p with index[p] == its coordinate.
    element = np.repeat(np.arange(at.size), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    position = order[np.repeat(low, counts) + np.arange(element.size) - first]
    if index.ndim:
        inner = np.stack(np.unravel_index(position, index.shape)).astype(coo.coords.dtype)
    else:
        inner = np.empty((0, element.size), dtype=coo.coords.dtype)
    coords = np.concatenate([coo.coords[:axis, element], inner, coo.coords[axis + 1 :, element]])
    out = sparse.COO(
        coords, coo.data[element], shape=shape, fill_value=coo.fill_value,
        has_duplicates=False, sorted=False,
    )  # fmt: skip
    return _as_format(out, data)


def scatter_add(shape: tuple[int, ...], index: np.ndarray, grad: Any, axis: int) -> Any:
    """Zeros of ``shape`` with ``grad`` added at checked, non-negative host ``index``."""
    coo = _coo(grad)
    dtype = grad.dtype
    half = _rules.dtype_name(dtype) in _rules.HALF_DTYPES  # sum in float32, round once
    if coo.fill_value != 0:  # every element adds: nothing stays sparse
        rows = np.asarray(coo.todense())
        acc = np.zeros(shape, dtype=np.float32 if half else dtype)
        add_at(acc, index, rows, axis)
        return _as_format(sparse.COO.from_numpy(acc.astype(dtype)), grad)
    q = index.ndim
    inner = coo.coords[axis : axis + q]
    position = np.ravel_multi_index(tuple(inner), index.shape) if q else np.zeros(coo.nnz, int)
    target = index.reshape(-1)[position].astype(np.intp)
    coords = np.concatenate([coo.coords[:axis], target[None], coo.coords[axis + q :]])
    # (+ 0: a stored -0.0 becomes the +0.0 a sum into zeros gives; sparse sums duplicates
    # from their first stored value)
    data = (coo.data.astype(np.float32) if half else coo.data) + 0
    out = sparse.COO(coords, data, shape=shape, fill_value=0, has_duplicates=True)
    if half:
        out = out.astype(dtype)
    return _as_format(out, grad)
