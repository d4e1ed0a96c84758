"""The public ``gather`` and ``gather_grad``: the one delegation point to a backend."""

from __future__ import annotations

from typing import Any

from ._dispatch import backend_of
from ._rules import check_flag


def gather(
    data: Any,
    indices: Any,
    /,
    *,
    axis: int = 0,
    opset: int = 13,
    out: Any = None,
    sparse_grad: bool = False,
) -> Any:
    """ONNX ``Gather``: take slices of ``data`` along ``axis`` at ``indices``.

    Parameters
    ----------
    data : array
        A NumPy, PyTorch, JAX or other array-API array of rank >= 1 and an ONNX dtype.
    indices : array, int or nested list of ints
        int32/int64 indices of any rank, in [-s, s-1] where s = ``data.shape[axis]``
        ([0, s-1] before opset 11). An array of the data's framework, a NumPy array or Python
        ints; the latter two are moved to the data's framework and device. JAX indices with
        NumPy data compute in JAX, as ``jnp.take`` does.
    axis : int, optional
        The axis to gather on, in [-r, r-1]. Default 0.
    opset : int, optional
        The ONNX opset of the model: 1-10 select Gather-1, 11-12 Gather-11, 13+ Gather-13.
    out : array, optional
        A NumPy array or PyTorch tensor to write the result into, of exactly the result's
        shape, dtype and device, sharing no memory with ``data`` or ``indices``; it is
        returned. Reusing one buffer across calls saves allocating (and, on the CPU,
        page-faulting) a fresh result each time: see the performance page. Nothing is
        written when any check fails. Refused for JAX and Dask arrays (immutable or lazy)
        and other array-API arrays (gatherx writes only NumPy arrays and tensors), for
        tensors that require grad (outside ``torch.no_grad``) and under ``torch.compile``,
        ``torch.export``, ``torch.jit.trace`` and ``torch.func`` transforms, as PyTorch
        refuses its own ``out=`` there.
    sparse_grad : bool, optional
        PyTorch only: the gradient that reaches ``data`` is a ``torch.sparse_coo`` tensor of
        only the gathered slices (as ``nn.Embedding(sparse=True)`` gives it), whose cost
        grows with the rows looked up instead of the table; for ``SGD``, ``SparseAdam`` and
        ``Adagrad``. Densified it equals :func:`gather_grad`. Default False: dense.

    Returns
    -------
    array
        ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``, with the data's dtype,
        framework and device (``out`` itself if given; NumPy data at JAX indices gives a JAX
        array, as ``jnp.take`` does). Differentiable in PyTorch and JAX.

    Raises
    ------
    IndexError
        An index is out of range; the message names the value, its position and the range.
        Under ``torch.compile`` / ``torch.export``, and for torch tensors on an accelerator
        (no host sync; :func:`gatherx.exact_bounds` opts back into this error), the check
        runs on the device and raises ``RuntimeError`` with the same text; under ``jax.jit``
        traced indices are checked by ``jax.experimental.checkify`` (unchecked, out-of-range
        reads are filled, never wrapped).
    TypeError
        Indices are not int32/int64, the data dtype is not an ONNX type (bfloat16 needs
        opset 13), or data and indices come from different frameworks (NumPy strings at JAX
        indices: JAX holds none; NumPy int64/uint64 data there, with ``jax_enable_x64`` off,
        holding a value beyond the 32-bit type JAX would hold it in and wrap); ``out`` has
        another dtype or framework than the result, or ``out=`` is refused (see ``out``);
        ``sparse_grad=True`` outside PyTorch, for a dtype torch's sparse tensors cannot hold
        (uint16/32/64), under ``torch.export`` or ``torch.func.vmap``.
    ValueError
        ``axis`` is out of range, ``data`` has rank 0, ``opset`` < 1, the result would have
        more dimensions than a NumPy array (64) on a NumPy-based library, or torch, JAX or
        array-API indices are on another device than the data; ``out`` has another shape or
        device than the result, is read-only, shares memory with ``data`` or ``indices``, or
        its elements share memory (a broadcast view).

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

    A sparse gradient for a large PyTorch table:

    >>> import torch
    >>> table = torch.zeros(100_000, 8, requires_grad=True)
    >>> gatherx.gather(table, torch.tensor([5, -1, 5]), sparse_grad=True).sum().backward()
    >>> table.grad.layout, table.grad.coalesce().indices()
    (torch.sparse_coo, tensor([[    5, 99999]]))

    One buffer reused for every batch of a loop:

    >>> table = np.arange(12.0).reshape(6, 2)
    >>> batch = np.empty((2, 2))
    >>> for ids in ([0, 5], [-1, 2]):
    ...     rows = gatherx.gather(table, ids, out=batch)
    ...     print(rows is batch, batch.sum())
    True 22.0
    True 30.0
    """
    backend = backend_of(data, indices, "gather", "data")
    if sparse_grad is not False and check_flag(sparse_grad, "sparse_grad"):
        backend.check_sparse(data, "gather", "sparse_grad")  # before any work
        if out is None:
            return backend.gather_sparse(data, indices, axis, opset)
    if out is None:
        return backend.gather(data, indices, axis, opset)
    return backend.gather_out(data, indices, axis, opset, out)


def gather_grad(
    shape: Any, indices: Any, grad: Any, /, *, axis: int = 0, sparse: bool = False
) -> Any:
    """Gradient of :func:`gather` with respect to ``data``: a scatter-add of ``grad``.

    Zeros of ``shape`` with the slices of ``grad`` added at ``indices`` along ``axis``;
    duplicate indices accumulate, and ``-1`` and ``s-1`` land on the same slice. The
    argument order is that of onnxruntime's ``GatherGrad``. float16 and bfloat16 gradients
    are summed in float32 and rounded once.

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
    sparse : bool, optional
        PyTorch only: return a ``torch.sparse_coo`` tensor of only the slices of ``grad``, at
        the indices made non-negative (a hybrid tensor whose sparse dimensions are the axes up
        to ``axis``), as ``gather(..., sparse_grad=True)`` gives it; densified, it equals the
        dense result. Default False.

    Returns
    -------
    array
        The gradient, of ``shape``. Differentiable in PyTorch and JAX.

    Raises
    ------
    IndexError, TypeError, ValueError
        As :func:`gather`, for ``grad`` in place of ``data``; ``ValueError`` also when ``grad``
        has the wrong shape, or ``shape`` a negative dimension or more than 2**63 - 1
        elements; ``TypeError`` when ``shape`` is no sequence of ints, and for
        ``sparse=True`` where ``sparse_grad=True`` is refused.

    Examples
    --------
    >>> import numpy as np
    >>> import gatherx
    >>> gatherx.gather_grad((3, 2), [0, 2, -1], np.ones((3, 2)))
    array([[1., 1.],
           [0., 0.],
           [2., 2.]])
    """
    sparse = check_flag(sparse, "sparse", "gather_grad")
    backend = backend_of(grad, indices, "gather_grad", "grad")
    return backend.gather_grad(shape, indices, grad, axis, sparse)
