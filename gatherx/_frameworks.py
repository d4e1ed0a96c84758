"""Which framework an array belongs to, found without importing any framework the user has not."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ._checks import check_index_dtype, dtype_name

#: type(data) -> a backend's fast path for the common eager call: its result, or None where the
#: general path must validate and decide. A backend registers it when first imported.
EAGER_GATHER: dict[type, Callable[[Any, Any, Any, Any], Any]] = {}
#: The same for gather_grad, keyed by type(grad).
EAGER_GATHER_GRAD: dict[type, Callable[[Any, Any, Any, Any], Any]] = {}


def framework_of(x: object) -> str | None:
    """``numpy``, ``torch``, ``jax``, ``dask``, ``array-api`` (any other namespace) or None."""
    if isinstance(x, (np.ndarray, np.generic)):
        return "numpy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return "jax"
    dask_array = sys.modules.get("dask.array")
    if dask_array is not None and isinstance(x, dask_array.Array):
        return "dask"
    from array_api_compat import is_array_api_obj

    if is_array_api_obj(x):
        return "array-api"
    return None


def describe(x: object) -> str:
    """A short name for an object's framework and type, for error messages."""
    module = type(x).__module__.partition(".")[0]
    return f"{module}.{type(x).__qualname__}"


def host_indices(indices: Any, data_framework: str, data: object) -> np.ndarray | None:
    """NumPy view of Python or NumPy ``indices``; None if they are arrays of the data's framework.

    Raises ``TypeError`` for indices of another framework or of a non-integer dtype.
    """
    if isinstance(indices, np.ndarray):
        check_index_dtype(dtype_name(indices.dtype), "numpy")
        return indices
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, (bool, np.bool_)):
        return _python_ints(indices)
    if isinstance(indices, (list, tuple)):
        return _python_ints(indices)
    framework = framework_of(indices)
    if framework == "numpy":  # NumPy scalars such as np.float32(1)
        check_index_dtype(dtype_name(np.asarray(indices).dtype), "numpy")
        return np.asarray(indices)
    if framework is not None and framework == data_framework:
        if framework == "array-api" and _namespace(indices) is not _namespace(data):
            msg = (
                f"gather: indices ({describe(indices)}) and data ({describe(data)}) come from "
                "different array namespaces; convert the indices to the data's namespace first"
            )
            raise TypeError(msg)
        return None
    if framework is not None:
        msg = (
            f"gather: indices are a {describe(indices)} ({framework}) but data is a "
            f"{describe(data)} ({data_framework}); pass indices from the data's framework, "
            "a NumPy array or Python ints"
        )
        raise TypeError(msg)
    msg = (
        "gather: indices must be an int32/int64 array, a Python int or a nested list of ints, "
        f"got {describe(indices)}"
    )
    raise TypeError(msg)


def _namespace(x: object) -> object:
    from array_api_compat import array_namespace

    return array_namespace(x)


def _python_ints(indices: Any) -> np.ndarray:
    try:
        arr = np.asarray(indices)
    except ValueError as exc:
        msg = f"gather: indices must be a rectangular nested list of ints: {exc}"
        raise ValueError(msg) from None
    if arr.dtype == object:
        _raise_for_python_objects(arr)
    if arr.size == 0 and arr.dtype.kind == "f" and isinstance(indices, (list, tuple)):
        return arr.astype(np.int64)  # [] is float64 to NumPy, but an empty index list to users
    check_index_dtype(dtype_name(arr.dtype), "Python")
    return arr


def _raise_for_python_objects(arr: np.ndarray) -> None:
    """Python objects NumPy could not pack into int64: a non-int, or an int beyond int64."""
    for flat, value in enumerate(arr.reshape(-1)):
        position = tuple(int(p) for p in np.unravel_index(flat, arr.shape))
        if isinstance(value, bool) or not isinstance(value, int):
            kind = type(value).__name__
            msg = f"gather: indices must be ints, got {kind} {value!r} at position {position}"
            raise TypeError(msg)
        if not -(2**63) <= value < 2**63:
            msg = (
                f"gather: indices element out of data bounds, idx={value} at position {position} "
                "of indices does not even fit in int64"
            )
            raise IndexError(msg)
    msg = "gather: indices must be ints"
    raise TypeError(msg)
