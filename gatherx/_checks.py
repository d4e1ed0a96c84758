"""Backend-free validation of Gather's attributes, shapes and index values, with the error texts."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

#: ONNX ``T`` for Gather, by the dtype names NumPy, PyTorch and JAX share (strings are NumPy only).
ONNX_DATA_DTYPES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "string",
    }
)
INDEX_DTYPES = frozenset({"int32", "int64"})


def check_opset(opset: object) -> int:
    """Return ``opset`` as an int, or raise for a non-integer or a version below 1."""
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        msg = f"gather: opset must be an int, got {type(opset).__name__} {opset!r}"
        raise TypeError(msg)
    if opset < 1:
        msg = f"gather: opset must be >= 1 (Gather exists since opset 1), got {opset}"
        raise ValueError(msg)
    return int(opset)


def normalize_axis(axis: object, rank: int) -> int:
    """Map ``axis`` in [-rank, rank-1] to [0, rank-1]; rank-0 data is an error too."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        msg = f"gather: axis must be an int, got {type(axis).__name__} {axis!r}"
        raise TypeError(msg)
    if rank == 0:
        msg = "gather: data must have rank >= 1, got a rank-0 (scalar) array"
        raise ValueError(msg)
    if not -rank <= axis < rank:
        msg = (
            f"gather: axis {axis} is out of the accepted range [{-rank}, {rank - 1}] "
            f"for data of rank {rank}"
        )
        raise ValueError(msg)
    return operator.index(axis) % rank


_NUMPY_NAMES: dict[np.dtype, str] = {}


def dtype_name(dtype: object) -> str:
    """The backend-neutral name of a dtype: ``float32``, ``bfloat16``, ``string``, ..."""
    if isinstance(dtype, np.dtype):
        # np.dtype.name is computed in Python on every access (~2 us): remember it.
        name = _NUMPY_NAMES.get(dtype)
        if name is None:
            name = "string" if dtype.kind in "USO" else dtype.name
            if len(_NUMPY_NAMES) < 1024:
                _NUMPY_NAMES[dtype] = name
        return name
    name = str(dtype)
    # torch.float32 -> float32, dtype('float32') -> float32, array_api_strict.int64 -> int64
    return name.rpartition(".")[2].removeprefix("dtype('").removesuffix("')")


def check_data_dtype(name: str, opset: int, backend: str) -> None:
    """Reject dtypes outside ONNX's ``T`` and bfloat16 before opset 13."""
    if name not in ONNX_DATA_DTYPES:
        allowed = ", ".join(sorted(ONNX_DATA_DTYPES))
        msg = (
            f"gather: {backend} data of dtype {name} is not an ONNX Gather type; allowed: {allowed}"
        )
        raise TypeError(msg)
    if name == "bfloat16" and opset < 13:
        msg = f"gather: bfloat16 data needs opset >= 13 (Gather-13), got opset {opset}"
        raise TypeError(msg)


def check_index_dtype(name: str, backend: str) -> None:
    if name not in INDEX_DTYPES:
        msg = f"gather: indices must be int32 or int64 ({backend}), got dtype {name}"
        raise TypeError(msg)


def index_range(size: int, opset: int) -> tuple[int, int]:
    """Inclusive bounds of valid indices on an axis of ``size``: negatives exist since opset 11."""
    return (-size if opset >= 11 else 0), size - 1


def out_of_bounds_error(indices: np.ndarray, size: int, axis: int, opset: int) -> IndexError:
    """The error for the first out-of-range element of host ``indices`` (assumed to hold one)."""
    lo, hi = index_range(size, opset)
    bad = (indices < lo) | (indices > hi)
    flat = int(np.argmax(bad.reshape(-1)))
    position = tuple(int(p) for p in np.unravel_index(flat, indices.shape))
    value = int(indices.reshape(-1)[flat])
    return make_out_of_bounds_error(value, position, size, axis, opset)


def make_out_of_bounds_error(
    value: int, position: Sequence[int] | None, size: int, axis: int, opset: int
) -> IndexError:
    lo, hi = index_range(size, opset)
    where = f" at position {tuple(position)} of indices" if position is not None else ""
    if size == 0:
        bounds = f"axis {axis} of data has size 0, so no index is valid"
    else:
        bounds = f"must be within the inclusive range [{lo},{hi}] for axis {axis} of size {size}"
    note = (
        " (negative indices need opset >= 11)"
        if value < 0 and opset < 11 and value >= -size
        else ""
    )
    msg = f"gather: indices element out of data bounds, idx={value}{where} {bounds}{note}"
    return IndexError(msg)


def check_host_bounds(indices: np.ndarray, size: int, axis: int, opset: int) -> None:
    """Raise the out-of-bounds error if any element of NumPy ``indices`` is out of range."""
    if indices.size == 0:
        return
    lo, hi = index_range(size, opset)
    if indices.min() < lo or indices.max() > hi:
        raise out_of_bounds_error(indices, size, axis, opset)


def output_shape(
    data_shape: Sequence[int], indices_shape: Sequence[int], axis: int
) -> tuple[int, ...]:
    return (*data_shape[:axis], *indices_shape, *data_shape[axis + 1 :])


def grad_shape_mismatch(
    grad_shape: Sequence[int], shape: Sequence[int], indices_shape: Sequence[int], axis: int
) -> ValueError:
    want = output_shape(shape, indices_shape, axis)
    msg = (
        f"gather_grad: grad has shape {tuple(grad_shape)}, but gather of data {tuple(shape)} with "
        f"indices {tuple(indices_shape)} on axis {axis} gives {want}"
    )
    return ValueError(msg)


def check_shape(shape: object) -> tuple[int, ...]:
    """Validate the ``shape`` argument of gather_grad: a sequence of non-negative ints."""
    try:
        dims = tuple(operator.index(d) for d in shape)  # type: ignore[attr-defined]
    except TypeError:
        msg = f"gather_grad: shape must be a sequence of ints, got {shape!r}"
        raise TypeError(msg) from None
    if any(d < 0 for d in dims):
        msg = f"gather_grad: shape must have non-negative dimensions, got {dims}"
        raise ValueError(msg)
    return dims
