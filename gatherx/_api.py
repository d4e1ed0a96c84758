"""The public ``gather`` and ``gather_grad``: validation, then the one delegation point."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _numpy_backend
from ._checks import (
    check_data_dtype,
    check_host_bounds,
    check_index_dtype,
    check_opset,
    check_shape,
    dtype_name,
    grad_shape_mismatch,
    normalize_axis,
    output_shape,
)
from ._frameworks import EAGER_GATHER, EAGER_GATHER_GRAD, describe, framework_of, host_indices

#: Gradients are sums, so gather_grad takes numeric dtypes only.
_GRAD_DTYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
     "bfloat16", "float32", "float64", "complex64", "complex128"}
)  # fmt: skip


# The NumPy fast path: exactly these dtypes need no further look (bfloat16 and strings take the
# general path, which checks them against the opset and ONNX's type list).
_FAST_DATA_DTYPES = frozenset(
    np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "complex64", "complex128")
)  # fmt: skip
_FAST_INDEX_DTYPES = frozenset((np.dtype(np.int32), np.dtype(np.int64)))


def _framework(x: object, role: str, function: str) -> str:
    framework = framework_of(x)
    if framework is None:
        msg = (
            f"{function}: {role} must be an array (NumPy, PyTorch, JAX or another array-API "
            f"library), got {describe(x)}; wrap it with np.asarray for NumPy"
        )
        raise TypeError(msg)
    return framework


def gather(data: Any, indices: Any, /, *, axis: int = 0, opset: int = 13) -> Any:
    """ONNX ``Gather``: take slices of ``data`` along ``axis`` at ``indices``.

    Parameters
    ----------
    data : array
        A NumPy, PyTorch, JAX or other array-API array of rank >= 1 and an ONNX dtype.
    indices : array, int or nested list of ints
        int32/int64 indices of any rank, in [-s, s-1] where s = ``data.shape[axis]``
        ([0, s-1] before opset 11). An array of the data's framework, a NumPy array or Python
        ints; the latter two are moved to the data's framework and device.
    axis : int, optional
        The axis to gather on, in [-r, r-1]. Default 0.
    opset : int, optional
        The ONNX opset of the model: 1-10 select Gather-1, 11-12 Gather-11, 13+ Gather-13.

    Returns
    -------
    array
        ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``, with the data's dtype,
        framework and device. Differentiable in PyTorch and JAX.

    Raises
    ------
    IndexError
        An index is out of range; the message names the value, its position and the range.
        Under ``torch.compile`` / ``torch.export`` the check runs in the graph and raises
        ``RuntimeError`` instead; under ``jax.jit`` traced indices are checked by
        ``jax.experimental.checkify`` (unchecked, out-of-range reads are filled, never wrapped).
    TypeError
        Indices are not int32/int64, the data dtype is not an ONNX type (bfloat16 needs
        opset 13), or data and indices come from different frameworks.
    ValueError
        ``axis`` is out of range, ``data`` has rank 0, or ``opset`` < 1.

    Examples
    --------
    >>> import numpy as np
    >>> import gatherx
    >>> data = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]])
    >>> gatherx.gather(data, [[0, 1], [1, 2]]).shape
    (2, 2, 2)
    >>> gatherx.gather(data, [0, -1], axis=1)
    array([[1. , 1.2],
           [2.3, 3.4],
           [4.5, 5.7]])
    >>> gatherx.gather(data, 2)
    array([4.5, 5.7])
    """
    # Small NumPy gathers are dominated by Python overhead: decide the common case in a few
    # identity and set tests, with the same checks the general path makes.
    if (
        type(data) is np.ndarray
        and type(indices) is np.ndarray
        and type(axis) is int
        and type(opset) is int
        and opset >= 11
        and -data.ndim <= axis < data.ndim
        and data.dtype in _FAST_DATA_DTYPES
        and indices.dtype in _FAST_INDEX_DTYPES
    ):
        return _numpy_backend.gather(data, indices, axis % data.ndim, opset)
    eager = EAGER_GATHER.get(type(data))
    if eager is not None:
        out = eager(data, indices, axis, opset)
        if out is not None:
            return out

    framework = _framework(data, "data", "gather")
    opset = check_opset(opset)
    axis = normalize_axis(axis, data.ndim)
    check_data_dtype(dtype_name(data.dtype), opset, framework)
    host = host_indices(indices, framework, data)
    if host is None:
        check_index_dtype(dtype_name(indices.dtype), framework)
    size = data.shape[axis]

    if framework == "numpy":
        return _numpy_backend.gather(np.asarray(data), host, axis, opset)  # type: ignore[arg-type]
    if framework == "dask":
        from . import _dask_backend

        return _dask_backend.gather(data, indices, host, axis, opset)
    backend, index = _checked_index(framework, indices, host, data, size, axis, opset)
    if framework == "jax":
        return backend.gather(data, index, axis, opset)
    if framework == "torch":
        return backend.gather(data, index, axis)
    return backend.gather(_namespace(data), data, index, axis)


def gather_grad(shape: Any, indices: Any, grad: Any, /, *, axis: int = 0) -> Any:
    """Gradient of :func:`gather` with respect to ``data``: a scatter-add of ``grad``.

    Zeros of ``shape`` with the slices of ``grad`` added at ``indices`` along ``axis``;
    duplicate indices accumulate, and ``-1`` and ``s-1`` land on the same slice. The
    argument order is that of onnxruntime's ``GatherGrad``.

    Parameters
    ----------
    shape : sequence of int
        The shape of the data that was gathered from.
    indices : array, int or nested list of ints
        The int32/int64 indices of the forward gather, in [-s, s-1].
    grad : array
        The output gradient, of shape ``shape[:axis] + indices.shape + shape[axis+1:]`` and a
        numeric dtype; the result has its dtype, framework and device.
    axis : int, optional
        The axis of the forward gather. Default 0.

    Returns
    -------
    array
        The gradient, of ``shape``. Differentiable in PyTorch and JAX.

    Raises
    ------
    IndexError, TypeError, ValueError
        As :func:`gather`; ``ValueError`` also when ``grad`` has the wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> import gatherx
    >>> gatherx.gather_grad((3, 2), [0, 2, -1], np.ones((3, 2)))
    array([[1., 1.],
           [0., 0.],
           [2., 2.]])
    """
    eager = EAGER_GATHER_GRAD.get(type(grad))
    if eager is not None:
        out = eager(shape, indices, grad, axis)
        if out is not None:
            return out
    framework = _framework(grad, "grad", "gather_grad")
    shape = check_shape(shape)
    axis = normalize_axis(axis, len(shape))
    name = dtype_name(grad.dtype)
    if name not in _GRAD_DTYPES:
        msg = f"gather_grad: grad must have a numeric dtype, got {name}"
        raise TypeError(msg)
    host = host_indices(indices, framework, grad)
    index_shape = host.shape if host is not None else tuple(indices.shape)
    if host is None:
        check_index_dtype(dtype_name(indices.dtype), framework)
    if tuple(grad.shape) != output_shape(shape, index_shape, axis):
        raise grad_shape_mismatch(grad.shape, shape, index_shape, axis)
    size = shape[axis]

    if framework == "numpy":
        assert host is not None
        check_host_bounds(host, size, axis, 13)
        return _numpy_backend.gather_grad(shape, host, np.asarray(grad), axis)
    if framework == "dask":
        from . import _dask_backend

        return _dask_backend.gather_grad(shape, indices, host, grad, axis)
    backend, index = _checked_index(framework, indices, host, grad, size, axis, 13)
    if framework in ("torch", "jax"):
        return backend.gather_grad(shape, index, grad, axis)
    return backend.gather_grad(_namespace(grad), shape, index, grad, axis)


def _namespace(x: Any) -> Any:
    from array_api_compat import array_namespace

    return array_namespace(x)


def _checked_index(
    framework: str,
    indices: Any,
    host: np.ndarray | None,
    like: Any,
    size: int,
    axis: int,
    opset: int,
) -> tuple[Any, Any]:
    """The backend module for ``framework`` and the indices in its terms, bounds-checked.

    ``like`` is the array (data or grad) whose framework and device the indices join.
    """
    if framework == "torch":
        from . import _torch_backend as tb

        return tb, tb.checked_index(tb.to_index(indices, host, like), size, axis, opset, host)
    if framework == "jax":
        from . import _jax_backend as jb

        return jb, jb.checked_index(jb.to_index(indices, host, like), size, axis, opset, host)
    from . import _array_api_backend as ab

    xp = _namespace(like)
    return ab, ab.checked_index(xp, ab.to_index(xp, indices, host, like), size, axis, opset, host)
