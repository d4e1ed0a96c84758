"""Host indices: Python ints, nested lists and NumPy arrays read into one checked NumPy array."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import _errors, _rules

#: NumPy arrays whose indexing means something else than their data: refused, not guessed at.
_REFUSED_SUBCLASSES = (np.ma.MaskedArray, np.matrix)


#: Python index types, parsed by :func:`host_indices`.
PYTHON_TYPES = frozenset({int, list, tuple})
#: The exact types of host indices, for identity tests on hot paths (see :func:`is_host`).
HOST_TYPES = PYTHON_TYPES | {np.ndarray}


def is_host(indices: object) -> bool:
    """Whether ``indices`` are host values (NumPy or Python) that any backend accepts."""
    return type(indices) in HOST_TYPES or isinstance(
        indices, (np.ndarray, np.generic, int, list, tuple)
    )


def plain_ints_shape(indices: Any, within_int64: bool = True) -> tuple[int, ...] | None:
    """The shape of ``indices`` if they are a Python int or a rectangular nest of lists and
    tuples of them, each within int64 unless ``within_int64`` is False (no bool, no NumPy
    value), else None: what a tracer can hold as a constant tensor without NumPy, which it
    cannot trace (values beyond int64 after :func:`int64_clamped`)."""
    if type(indices) is int:
        if within_int64 and not _rules.INT64_BOUNDS[0] <= indices <= _rules.INT64_BOUNDS[1]:
            return None
        return ()
    if type(indices) not in (list, tuple):
        return None
    return _rectangular_ints(indices, within_int64)


def _rectangular_ints(
    nest: list[Any] | tuple[Any, ...], within_int64: bool
) -> tuple[int, ...] | None:
    """The shape of a nest of lists and tuples of plain ints (within int64), or None."""
    if all(type(v) is int for v in nest):
        low, high = _rules.INT64_BOUNDS
        if within_int64 and not all(low <= v <= high for v in nest):
            return None
        return (len(nest),)
    shapes = {
        _rectangular_ints(v, within_int64) if type(v) in (list, tuple) else None for v in nest
    }
    inner = shapes.pop()
    if shapes or inner is None:  # ragged, or a value that is not a plain int
        return None
    return (len(nest), *inner)


def int64_clamped(values: Any) -> Any:
    """Python ints, or a nest of lists and tuples of them, with each value beyond int64 moved
    to the int64 extreme on its side: outside every axis's range as the value itself is
    (an axis holds at most 2**63 - 1 slots), so that a bounds check refuses it alike."""
    if type(values) is int:
        return min(max(values, _rules.INT64_BOUNDS[0]), _rules.INT64_BOUNDS[1])
    return [int64_clamped(v) for v in values]


def host_indices(indices: Any, fn: str) -> np.ndarray:
    """``indices`` (see :func:`is_host`) as a native-byte-order int32/int64 NumPy array.

    Python ints beyond int64 come back as an object array of ints: no axis holds them, so
    the bounds check that every caller makes next reports the first with its position.
    """
    if isinstance(indices, np.ndarray):
        arr = plain_ndarray(indices, fn, "indices")
        _rules.check_index_dtype(_rules.dtype_name(arr.dtype), "numpy", fn, arr.dtype)
    elif isinstance(indices, np.generic):  # NumPy scalars such as np.int64(1)
        arr = np.asarray(indices)
        _rules.check_index_dtype(_rules.dtype_name(arr.dtype), "numpy", fn, arr.dtype)
    else:
        arr = _python_ints(indices, fn)
        if arr.dtype != object:
            _rules.check_index_dtype(_rules.dtype_name(arr.dtype), "Python", fn)
    return native_order(arr)


def native_order(x: np.ndarray) -> np.ndarray:
    """``x``, or a copy of it in native byte order where it is in the other one (which
    frameworks that take NumPy arrays, JAX's included, refuse)."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def plain_ndarray(x: np.ndarray, fn: str, role: str) -> np.ndarray:
    """``x`` as a plain ndarray: masked arrays and matrices are refused, other subclasses viewed."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, _REFUSED_SUBCLASSES):
        raise _errors.unsupported_array(
            fn, role, x, "their indexing differs from an ndarray's",
            "pass np.asarray(...) of the values you mean",
        )  # fmt: skip
    return x.view(np.ndarray)


#: The index dtypes a list of ints may have as NumPy reads it, kept as they are.
_LIST_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _python_ints(indices: Any, fn: str) -> np.ndarray:
    if isinstance(indices, bool):
        raise _errors.not_int_indices(fn, indices, ())
    if not isinstance(indices, (int, list, tuple)):
        raise _errors.bad_indices_type(fn, indices)
    try:
        arr = np.asarray(indices)
    except (ValueError, OverflowError) as exc:
        raise _errors.ragged_indices(fn, str(exc)) from None
    except TypeError:  # an element NumPy cannot read, such as a traced JAX value
        value, position = _first_unread(indices, ())
        raise _errors.not_int_indices(fn, value, position) from None
    # A list holds values: integers of any type count as ints (NumPy types [np.uint8(1)]
    # uint8, [np.uint8(1), 2] int64); it becomes int64 (int32 if all it holds is int32).
    if arr.dtype.kind in "iu" and not _holds_bool(indices):
        if arr.dtype in _LIST_DTYPES:
            return arr
        if arr.dtype.kind == "i" or not arr.size or arr.max() <= np.iinfo(np.int64).max:
            return arr.astype(np.int64)
    if arr.size == 0 and arr.dtype.kind == "f":
        return arr.astype(np.int64)  # [] is float64 to NumPy, but an empty index list to users
    objects = arr if arr.dtype == object else np.asarray(indices, dtype=object)
    flat = objects.reshape(-1)
    for k, value in enumerate(flat):
        if type(value) is not int:
            flat[k] = _int_value(value, fn, np.unravel_index(k, objects.shape))
    try:
        return objects.astype(np.int64)
    except OverflowError:
        return objects  # ints only, some beyond int64


def _int_value(value: Any, fn: str, position: tuple[Any, ...]) -> int:
    """An element of a list read as an int (an int subclass, a NumPy integer, a 0-d integer
    array), or the TypeError that names it."""
    if not _holds_bool(value):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise _errors.not_int_indices(fn, value, tuple(int(p) for p in position))


def _first_unread(indices: Any, position: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
    """(value, position) of the first element of a nested list that NumPy cannot read."""
    if isinstance(indices, (list, tuple)):
        for k, item in enumerate(indices):
            try:
                np.asarray(item)
            except TypeError:
                return _first_unread(item, (*position, k))
    return indices, position


def _holds_bool(indices: Any) -> bool:
    """Whether a nested list holds a bool, which NumPy would silently read as 0 or 1."""
    if isinstance(indices, (list, tuple)):
        return any(_holds_bool(v) for v in indices)
    if isinstance(indices, (int, np.integer)):  # (np.bool_ is no np.integer)
        return isinstance(indices, bool)
    if isinstance(indices, np.bool_):
        return True
    # an array of bools (a 0-d np.array(True), torch.tensor(True)), read as NumPy reads it
    return hasattr(indices, "__array__") and np.asarray(indices).dtype == np.bool_
