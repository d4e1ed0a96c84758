"""``np.add.at`` along one axis of host arrays, at any rank NumPy holds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: The most dimensions of an array that NumPy's ``add.at`` takes: past them it crashes the
#: interpreter (NumPy 2.4; arrays hold up to 64).
ADD_AT_MAX_RANK = 32


def add_at(out: np.ndarray, index: np.ndarray, rows: np.ndarray, axis: int) -> None:
    """Add ``rows`` into the C-contiguous ``out`` at ``index`` along ``axis``, in place, by
    ``np.add.at``.

    ``rows`` has ``out``'s shape with ``index``'s dimensions in place of ``axis``; ``index``
    holds in-range positions (negative ones count from the end). Past ``ADD_AT_MAX_RANK``
    dimensions ``np.add.at`` runs on the ``(pre, size, post)`` views at the flat index: the
    same sums, added in the same order as on the arrays' own shapes.
    """
    if out.ndim <= ADD_AT_MAX_RANK and rows.ndim <= ADD_AT_MAX_RANK:
        key: tuple[Any, ...] = (*(slice(None),) * axis, index)
        np.add.at(out, key, rows)
        return
    assert out.flags.c_contiguous  # (else the view below would be a copy)
    pre = math.prod(out.shape[:axis])
    post = math.prod(out.shape[axis + 1 :])
    view = out.reshape(pre, out.shape[axis], post)
    flat: tuple[Any, ...] = (slice(None), index.reshape(-1))
    np.add.at(view, flat, rows.reshape(pre, index.size, post))
