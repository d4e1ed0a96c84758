"""The ONNX Gather rules, written once: dtypes per opset, index range, axis, rank and shapes.

Every check raises the error :mod:`._errors` spells; backends and fast paths read these tables.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _errors
from ._compile_constant import constant_under_compile

#: Negative indices (counting from the end) are valid from this opset on (Gather-11).
NEGATIVE_INDICES_SINCE = 11
#: bfloat16 data is valid from this opset on (Gather-13).
BFLOAT16_SINCE = 13

#: gather_grad takes the indices of the latest Gather (negatives included).
GRAD_OPSET = BFLOAT16_SINCE

#: ONNX ``T`` for Gather-1 and Gather-11, by the dtype names NumPy, PyTorch and JAX share
#: (strings are NumPy's only).
_DATA_DTYPES_1 = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128", "string"}
)  # fmt: skip
_DATA_DTYPES_13 = _DATA_DTYPES_1 | {"bfloat16"}
#: Every dtype some opset accepts.
ONNX_DATA_DTYPES = _DATA_DTYPES_13
#: ONNX ``Tind``.
INDEX_DTYPES = frozenset({"int32", "int64"})
#: gather_grad adds gradients, so it takes the numeric data types only.
GRAD_DTYPES = _DATA_DTYPES_13 - {"bool", "string"}
#: Gradients of these dtypes are summed in float32 and rounded once.
HALF_DTYPES = frozenset({"float16", "bfloat16"})


_NAMES: dict[tuple[type, Any], str] = {}


@constant_under_compile
def dtype_name(dtype: object) -> str:
    """The backend-neutral name of a dtype: ``float32``, ``bfloat16``, ``string``, ..."""
    # Computing a name costs 1-2 us (np.dtype.name is a Python property): remember it, keyed
    # by type too, so that no lookup compares the dtypes of two libraries.
    key = (type(dtype), dtype)
    try:
        return _NAMES[key]
    except (KeyError, TypeError):  # TypeError: an unhashable dtype
        pass
    if isinstance(dtype, np.dtype):
        name = "string" if dtype.kind in "USOT" else dtype.name  # T: NumPy's StringDType
    else:
        # torch.float32 -> float32, array_api_strict.int64 -> int64
        name = str(dtype).rpartition(".")[2].removeprefix("dtype('").removesuffix("')")
    if isinstance(dtype, np.dtype) and dtype.kind == "V":
        return name  # a record dtype equals its plain structured one, but names differ
    try:
        if len(_NAMES) < 1024:
            _NAMES[key] = name
    except TypeError:
        pass
    return name


def data_dtypes(opset: int) -> frozenset[str]:
    """The data dtype names ``opset``'s Gather accepts."""
    return _DATA_DTYPES_13 if opset >= BFLOAT16_SINCE else _DATA_DTYPES_1


def plain_call(axis: object, opset: object, rank: int) -> bool:
    """Whether ``axis`` and ``opset`` are plain ints that need no further look: an axis in
    range and an opset with negative indices (the question every fast path asks first)."""
    return (
        type(axis) is int
        and type(opset) is int
        and opset >= NEGATIVE_INDICES_SINCE
        and -rank <= axis < rank
    )


def index_range(size: int, opset: int) -> tuple[int, int]:
    """Inclusive bounds of valid indices on an axis of ``size``."""
    return (-size if opset >= NEGATIVE_INDICES_SINCE else 0), size - 1


def check_opset(opset: object, fn: str = "gather") -> int:
    """``opset`` as an int, or the error for a non-integer or a version below 1."""
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        raise _errors.not_an_int(fn, "opset", opset)
    if opset < 1:
        raise _errors.opset_too_low(fn, int(opset))
    return int(opset)


def check_flag(value: object, what: str, fn: str = "gather") -> bool:
    """``value`` as a bool, or the TypeError for anything but True and False."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise _errors.not_a_flag(fn, what, value)


def normalize_axis(axis: object, rank: int, fn: str = "gather") -> int:
    """``axis`` in [-rank, rank-1] mapped to [0, rank-1]; rank-0 data is an error too."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise _errors.not_an_int(fn, "axis", axis)
    if rank == 0:
        raise _errors.rank_zero(fn)
    if not -rank <= axis < rank:
        raise _errors.axis_out_of_range(fn, int(axis), rank)
    return operator.index(axis) % rank


def check_data_dtype(name: str, opset: int, framework: str) -> None:
    """Refuse dtypes outside ONNX's ``T``, and bfloat16 before Gather-13."""
    if name not in data_dtypes(opset):
        raise _errors.data_dtype(name, opset, framework)


def check_index_dtype(name: str, framework: str, fn: str = "gather", dtype: Any = None) -> None:
    """Refuse indices whose dtype, named ``name``, is not an ONNX index dtype (``dtype``: the
    array's own, which the message names where the neutral name would mislead)."""
    if name not in INDEX_DTYPES:
        raise _errors.index_dtype(fn, shown_dtype(name, dtype), framework)


def check_grad_dtype(name: str, framework: str, dtype: Any = None) -> None:
    if name not in GRAD_DTYPES:
        raise _errors.grad_dtype(shown_dtype(name, dtype), framework)


def shown_dtype(name: str, dtype: Any) -> str:
    """A dtype as an error names it: its neutral ``name``, but a NumPy object array (read as
    ONNX strings where it is data) as ``object``, the dtype the caller passed."""
    return "object" if isinstance(dtype, np.dtype) and dtype.kind == "O" else name


def output_shape(
    data_shape: Sequence[int], indices_shape: Sequence[int], axis: int
) -> tuple[int, ...]:
    """``data.shape[:axis] + indices.shape + data.shape[axis+1:]``."""
    return (*data_shape[:axis], *indices_shape, *data_shape[axis + 1 :])


def check_shape(shape: object) -> tuple[int, ...]:
    """The ``shape`` argument of gather_grad as a tuple of non-negative ints."""
    if type(shape) is tuple:  # the usual argument, read without a call per dimension
        for d in shape:
            if type(d) is not int or d < 0 or d > _INT64_MAX:
                break
        else:
            if math.prod(shape) <= _INT64_MAX:
                return shape
    if isinstance(shape, (str, bytes)):
        raise _errors.shape_type(shape)
    try:
        dims = tuple(map(_dim, shape))  # type: ignore[call-overload]
    except TypeError:
        raise _errors.shape_type(shape) from None
    if dims and min(dims) < 0:
        raise _errors.shape_negative(dims)
    if dims and (max(dims) > _INT64_MAX or math.prod(dims) > _INT64_MAX):
        raise _errors.shape_too_large(dims)  # no framework makes it; each fails its own way
    return dims


#: The least and greatest int64.
INT64_BOUNDS = (-(2**63), 2**63 - 1)
_INT64_MAX = INT64_BOUNDS[1]

#: The most dimensions a NumPy array has (NPY_MAXDIMS: 64 from NumPy 2, 32 before); a take
#: past it can crash NumPy.
NUMPY_MAX_RANK = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32


def rank_fits(rank: int, limit: int | None) -> bool:
    """Whether a result of ``rank`` dimensions fits a framework's ``limit`` (None: none)."""
    return limit is None or rank <= limit


def check_result_rank(rank: int, limit: int | None, framework: str, fn: str) -> None:
    """Refuse a result of more dimensions than the framework's arrays have."""
    if not rank_fits(rank, limit):
        assert limit is not None
        raise _errors.result_rank(fn, rank, limit, framework)


def _dim(d: Any) -> int:
    if isinstance(d, (bool, np.bool_)):
        raise TypeError
    return operator.index(d)


def check_grad_shape(
    grad_shape: Sequence[int], shape: Sequence[int], indices_shape: Sequence[int], axis: int
) -> None:
    want = output_shape(shape, indices_shape, axis)
    if tuple(grad_shape) != want:
        raise _errors.grad_shape(tuple(grad_shape), tuple(shape), tuple(indices_shape), axis, want)


def out_of_range(low: int, high: int, size: int, opset: int) -> bool:
    """Whether indices with these extremes hold one outside :func:`index_range`."""
    lo, hi = index_range(size, opset)
    return low < lo or high > hi


def first_bad(indices: np.ndarray, size: int, opset: int) -> tuple[int, tuple[int, ...]] | None:
    """(value, position) of the first out-of-range element of host ``indices``, in C order."""
    return first_outside(indices, *index_range(size, opset))


def first_outside(values: np.ndarray, low: int, high: int) -> tuple[int, tuple[int, ...]] | None:
    """(value, position) of the first element of host ``values`` outside [low, high]."""
    bad = (values < low) | (values > high)
    if not bad.any():
        return None
    flat = int(np.argmax(bad.reshape(-1)))
    position = tuple(int(p) for p in np.unravel_index(flat, values.shape))
    return int(values.reshape(-1)[flat]), position


#: Host indices of at most this many elements are read as Python ints: NumPy's reductions
#: cost ~1.3 us each, more than the whole read of a few values.
SMALL_HOST_INDEX = 16


def may_repeat(n_index: int, read: Callable[[], list[Any]]) -> bool:
    """Whether an index of ``n_index`` values may name one slot twice: True from more than
    ``SMALL_HOST_INDEX`` values, else whether its values, ``read()`` as Python ints (one
    flat list), repeat one (cheaper than the sums a repeat would need)."""
    return n_index > SMALL_HOST_INDEX or len(set(read())) < n_index


def host_extremes(values: np.ndarray) -> tuple[int, int]:
    """(min, max) of a non-empty host integer array."""
    if values.size <= SMALL_HOST_INDEX:
        flat = values.ravel().tolist()
        return min(flat), max(flat)
    return int(values.min()), int(values.max())


#: Host indices of at least this many values whose sample holds no negative one are checked
#: by their extremes first, and used as given where none is negative: the wrap's new array
#: and pass are saved (2.3 -> 0.45 ms on 1.8 M int64), for one more pass where a negative
#: value hid from the sample. On fewer values the sample and the minimum cost what they save.
HOST_EXTREMES_FIRST = 1 << 16
#: Values read to guess whether an index holds a negative one.
_SAMPLE = 32


def none_negative_in_sample(values: np.ndarray) -> bool:
    """Whether ``_SAMPLE`` values spread over ``values`` (any layout) are all non-negative."""
    return int(values.flat[:: values.size // _SAMPLE].min()) >= 0


_UNSIGNED = {4: np.uint32, 8: np.uint64}
_SIGNED_MAX = {4: 2**31 - 1, 8: 2**63 - 1}


def wrapped_ints(flat: list[int], size: int, opset: int) -> list[int] | None:
    """Python int indices checked against :func:`index_range` and made non-negative:
    ``flat`` itself where none is negative, or None if one lies outside the range."""
    if not flat:
        return flat
    low, high = min(flat), max(flat)
    lo, hi = index_range(size, opset)
    if low < lo or high > hi:
        return None
    if low >= 0:
        return flat
    return [v + size if v < 0 else v for v in flat]


def host_wrapped(values: np.ndarray, size: int, opset: int) -> np.ndarray | None:
    """Host int32/int64 ``values`` (native byte order) checked against :func:`index_range`
    and made non-negative: an array of their shape in [0, size-1], or None if one lies
    outside the range. ``values`` itself where none is negative and they are few (at most
    ``SMALL_HOST_INDEX``, read as Python ints) or many (see below).

    From ``HOST_EXTREMES_FIRST`` values, where a sample of them holds no negative one, the
    minimum first: where none is negative, the minimum and the maximum check them and
    ``values`` is returned, with nothing allocated. Else two passes and a maximum, without a
    branch: read as unsigned integers, a value in [-size, -1] plus ``size`` wraps around into
    [0, size-1], and the smaller of a value and itself plus ``size`` is the wrapped one when
    it is valid and at least ``size`` when not.
    """
    if values.size <= SMALL_HOST_INDEX:  # as Python ints: cheaper than three NumPy calls
        flat = values.ravel().tolist()
        wrapped_list = wrapped_ints(flat, size, opset)
        if wrapped_list is None or wrapped_list is flat:
            return None if wrapped_list is None else values
        wide = size > _SIGNED_MAX[values.itemsize]  # int32 indices of a longer axis
        return np.array(wrapped_list, np.int64 if wide else values.dtype).reshape(values.shape)
    lo, hi = index_range(size, opset)
    many = values.size >= HOST_EXTREMES_FIRST
    if lo and many and none_negative_in_sample(values) and int(values.min()) >= 0:
        return values if int(values.max()) <= hi else None
    given = values
    if size > _SIGNED_MAX[values.itemsize]:  # the sum must wrap in the index's own width
        values = values.astype(np.int64)
    unsigned = values.reshape(-1).view(_UNSIGNED[values.itemsize])
    if not lo:  # no negatives: read as unsigned, each one lies above hi
        return given if int(unsigned.max()) <= hi else None
    top = np.add(unsigned, size, dtype=unsigned.dtype)
    np.minimum(unsigned, top, out=top)
    if int(top.max()) > hi:
        return None
    return top.view(values.dtype).reshape(values.shape)


def host_shifted(values: np.ndarray, size: int, opset: int) -> np.ndarray | None:
    """Host int32/int64 ``values`` (native byte order) checked against :func:`index_range`
    and moved up by its lower end: an intp array of their shape in [0, hi - lo], or None if
    one lies outside the range (at most 2**62 on the axis).

    One pass and a maximum: the sum wraps around modulo 2**64 as unsigned integers do, so
    read as unsigned it lies in [0, hi - lo] exactly for the values in range.
    """
    lo, hi = index_range(size, opset)
    flat = values.reshape(-1)  # 1-D: a 0-d sum would be a NumPy scalar, which warns on overflow
    shifted = np.add(flat, -lo, dtype=np.intp)
    if shifted.size and int(shifted.view(np.uintp).max()) > hi - lo:
        return None
    return shifted.reshape(values.shape)


def check_host_bounds(
    indices: np.ndarray, size: int, axis: int, opset: int, fn: str = "gather"
) -> int:
    """Raise the out-of-bounds error for NumPy ``indices``; return their minimum (0 if empty)."""
    if indices.size == 0:
        return 0
    low, high = host_extremes(indices)
    if out_of_range(low, high, size, opset):
        found = first_bad(indices, size, opset)
        assert found is not None
        raise _errors.out_of_bounds(fn, *found, size, axis, opset)
    return low


def check_out(
    out_shape: Sequence[int],
    shape: Sequence[int],
    out_dtype: object,
    dtype: object,
    out_device: object,
    device: object,
    fn: str = "gather",
) -> None:
    """Refuse an ``out=`` array whose shape, dtype or device differs from the result's."""
    if tuple(out_shape) != tuple(shape):
        raise _errors.out_shape(fn, tuple(out_shape), tuple(shape))
    if out_dtype != dtype:
        raise _errors.out_dtype(fn, out_dtype, dtype)
    if out_device != device:
        raise _errors.out_device(fn, out_device, device)


#: Where an array's bytes lie: (address space, first byte, one past the last byte).
Span = tuple[object, int, int]


def overlaps_itself(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """Whether an array's elements share memory (a broadcast view, overlapping strides);
    ``strides`` in the unit of ``itemsize``."""
    if 0 in shape:
        return False
    # No overlap where no stride is shorter than what the dimensions of shorter ones span;
    # other layouts (interleaved views) are decided from their elements' offsets.
    extent = itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(strides, shape, strict=True) if n > 1):
        if stride < extent:
            break
        extent += stride * (n - 1)
    else:
        return False
    offsets = np.zeros((), np.int64)
    for stride, n in zip(strides, shape, strict=True):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * stride)
    return bool((np.diff(np.sort(offsets, axis=None)) < itemsize).any())


def overlapping(a: Span | None, b: Span | None) -> bool:
    """Whether two arrays' byte ranges intersect (None: no bytes); interleaved views count."""
    if a is None or b is None:
        return False
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]
