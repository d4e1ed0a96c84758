"""Deliberately wrong Gather implementations that ``gatherx check --impl`` must catch."""

from __future__ import annotations

import numpy as np


def clamped(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Clamps out-of-range indices into [-s, s-1] instead of raising."""
    size = data.shape[axis]
    return np.take(data, np.clip(indices, -size, size - 1), axis=axis)


def negatives_as_zero(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Reads every negative index as 0 (a kernel that never learned Gather-11)."""
    size = data.shape[axis]
    if indices.size and (indices.max() >= size or indices.min() < -size):
        raise IndexError("out of range")
    return np.take(data, np.maximum(indices, 0), axis=axis)


def unchanged_when_same_shape(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Returns the data itself when the output shape equals the data's (cubed 0.27's shortcut)."""
    axis %= data.ndim
    if data.shape[:axis] + indices.shape + data.shape[axis + 1 :] == data.shape:
        return data.copy()
    return np.take(data, indices, axis=axis)


def correct(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """np.take, which is right for every case (the control)."""
    return np.take(data, indices, axis=axis)


def mutating(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Right values, but wraps negative indices in place in the caller's array."""
    indices[indices < 0] += data.shape[axis]
    return np.take(data, indices, axis=axis)


NOT_CALLABLE = 3


def noisy(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Right, but warns and logs on every call, as some libraries do."""
    import logging
    import warnings

    warnings.warn("noisy: a library warning", UserWarning, stacklevel=2)
    logging.getLogger("noisy").warning("noisy: a log record\nwith a second line")
    return np.take(data, indices, axis=axis)
