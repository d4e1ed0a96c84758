"""Which PyTorch calls need no check beyond their index's values: one predicate, from the rules."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from ... import _errors, _policy, _rules
from ..._indices import plain_ints_shape
from ..._strategy import torch_extremes_plan, torch_wrap_plan
from .modes import plain_eager, vmapping
from .subclasses import is_dtensor

#: Plain tensors and parameters: subclasses with their own __torch_function__ (FakeTensor
#: included) take the flow's general reads.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})
STRIDED = torch.strided


def torch_dtypes(names: frozenset[str]) -> frozenset[torch.dtype]:
    """The torch dtypes of these backend-neutral names (those torch has)."""
    return frozenset(
        getattr(torch, n) for n in names if isinstance(getattr(torch, n, None), torch.dtype)
    )


#: The data dtypes of Gather-11 (index 0) and Gather-13 (1), as torch dtypes.
DATA_DTYPES = (
    torch_dtypes(_rules.data_dtypes(_rules.NEGATIVE_INDICES_SINCE)),
    torch_dtypes(_rules.data_dtypes(_rules.BFLOAT16_SINCE)),
)
INDEX_DTYPES = torch_dtypes(_rules.INDEX_DTYPES)
#: The largest value of each index dtype (an axis longer than that needs int64 arithmetic).
INDEX_MAX = {torch.int32: 2**31 - 1, torch.int64: 2**63 - 1}
GRAD_DTYPES = torch_dtypes(_rules.GRAD_DTYPES)


def eager_cpu_call(
    x: Any, indices: Any, axis: Any, opset: Any, grad_shape: tuple[int, ...] | None = None
) -> bool:
    """Whether every check of :meth:`gatherx._backends.base.Backend.gather` (``x`` the data)
    or, given the checked ``grad_shape``, of ``gather_grad`` (``x`` the grad) but the index's
    values and the grad's shape passes, read in few steps: plain strided CPU tensors in plain
    eager code under the exact bounds policy, an int axis in range, an int opset of at least
    11 and dtypes its rules accept. (After a large gather has evicted the interpreter from the
    CPU caches, each Python step costs several times its warm time.)"""
    # plain_eager first: under torch.compile(gatherx.gather, dynamic=True) axis and opset are
    # symbolic ints, whose comparisons below Dynamo cannot use as a tuple's index
    if not (type(indices) is torch.Tensor and type(x) in PLAIN_TYPES and plain_eager()):
        return False
    if grad_shape is None:
        if not _rules.plain_call(axis, opset, x.ndim):
            return False
        dtypes = DATA_DTYPES[opset >= _rules.BFLOAT16_SINCE]
    elif _rules.plain_call(axis, opset, len(grad_shape)):
        dtypes = GRAD_DTYPES
    else:
        return False
    return (
        x.dtype in dtypes
        and indices.dtype in INDEX_DTYPES
        and x.is_cpu
        and indices.is_cpu
        and x.layout is STRIDED
        and indices.layout is STRIDED
        and not x.is_nested
        and not indices.is_nested
        and _policy.exact("cpu")
    )


#: NumPy index arrays a tensor can share as they are (native byte order).
_SHARED_INDEX_DTYPES = frozenset({np.dtype(np.int64), np.dtype(np.int32)})


def shareable(host: np.ndarray) -> bool:
    """Whether ``torch.from_numpy`` can share ``host``'s memory as it lies: writeable (it
    warns on read-only memory), C-contiguous and with no negative stride (NumPy counts an
    axis of length 1 as contiguous whatever its stride, ``np.array([2, 0])[::-2]``; torch
    refuses any negative one)."""
    flags = host.flags
    return flags.writeable and flags.c_contiguous and min(host.strides, default=0) >= 0


def host_tensor(indices: Any, data: Any) -> torch.Tensor | None:
    """Host indices of plain CPU ``data`` in plain eager code as the CPU tensor the eager
    path reads (the flow reads both alike, by the same rules): a Python int within int64, a
    flat list or tuple of at most ``SMALL_HOST_INDEX`` of them, or a NumPy int32/int64 array
    that torch can share (:func:`shareable`; shared, but for ``data`` that requires grad);
    None for anything else, which the flow reads."""
    kind = type(indices)
    if kind is np.ndarray:
        if indices.dtype not in _SHARED_INDEX_DTYPES or not shareable(indices):
            return None
    elif kind is int:
        if plain_ints_shape(indices) is None:  # beyond int64
            return None
    elif kind is list or kind is tuple:
        # (the count and the first value before any scan: long or nested lists go as they came)
        if len(indices) > _rules.SMALL_HOST_INDEX or (indices and type(indices[0]) is not int):
            return None
        if plain_ints_shape(indices) is None:
            return None
    else:
        return None
    if type(data) not in PLAIN_TYPES or not data.is_cpu or not plain_eager():
        return None
    if kind is np.ndarray:
        # shared, but copied where autograd may save it: a NumPy write bumps no version
        return torch.from_numpy(indices.copy() if data.requires_grad else indices)
    return torch.from_numpy(np.array(indices, np.int64))  # a third of torch.tensor's time


def eager_ints(indices: torch.Tensor, size: int, opset: int) -> tuple[list[int], list[int]] | None:
    """The index of an :func:`eager_cpu_call` of rank <= 1 and at most
    ``SMALL_HOST_INDEX`` values read as Python ints (``tolist()`` costs a third of
    ``numpy()``): (its values, flat; those made non-negative by the flow's rule, the same
    list where none is negative), or None if a value lies out of range. Call it on such
    indices only (:func:`few_values`)."""
    values: Any = indices.tolist()  # ints, rank 0 or 1
    listed: list[int] = values if indices.ndim else [values]
    wrapped = _rules.wrapped_ints(listed, size, opset)
    return None if wrapped is None else (listed, wrapped)


def few_values(indices: torch.Tensor) -> bool:
    """Whether :func:`eager_ints` reads ``indices``."""
    return indices.ndim <= 1 and indices.numel() <= _rules.SMALL_HOST_INDEX


def ints_index(
    read: tuple[list[int], list[int]], indices: torch.Tensor, flat: bool = False
) -> torch.Tensor:
    """The checked index of :func:`eager_ints`' ``read`` of ``indices`` as a tensor (of its
    shape, or as one dimension for ``flat``): ``indices`` itself where nothing was made
    non-negative."""
    listed, wrapped = read
    if wrapped is listed and (indices.ndim or not flat):
        return indices
    wrapped_array = np.array(wrapped, np.int64)
    return torch.from_numpy(wrapped_array if flat or indices.ndim else wrapped_array.reshape(()))


def eager_bounded(
    indices: torch.Tensor, size: int, opset: int, flat: bool = False
) -> torch.Tensor | None:
    """The index of an :func:`eager_cpu_call` checked and made non-negative on the
    host by the flow's rule (as :meth:`gatherx._backends.base.Backend.bounded` does), or None
    if a value lies out of range; ``flat``: as one dimension."""
    if few_values(indices):
        read = eager_ints(indices, size, opset)
        return None if read is None else ints_index(read, indices, flat)
    plan = torch_wrap_plan(indices.numel())
    remainder = plan == "remainder" and size <= INDEX_MAX[indices.dtype]
    host = None if remainder else indices.numpy()
    if host is None or (plan == "sampled" and _rules.none_negative_in_sample(host)):
        low = eager_low(indices, size, opset)  # the extremes first
        if low is None:
            return None
        if low >= 0 or host is None:  # (else a negative value hid from the sample)
            index = indices if low >= 0 else torch.remainder(indices, size)  # exact on these
            return index.reshape(-1) if flat else index
    wrapped = _rules.host_wrapped(host, size, opset)
    if wrapped is None:
        return None
    if flat:
        return torch.from_numpy(wrapped.reshape(-1))
    return indices if wrapped is host else torch.from_numpy(wrapped)


def eager_position(indices: torch.Tensor, size: int, opset: int) -> int | None:
    """The value of the 0-d index of an :func:`eager_cpu_call` as a Python int, as given
    (negatives included), or None if it lies out of range."""
    value = cast(int, indices.tolist())
    return None if _rules.out_of_range(value, value, size, opset) else value


def eager_low(indices: torch.Tensor, size: int, opset: int) -> int | None:
    """The least value of the index of an :func:`eager_cpu_call` (0 if empty), or None if a
    value lies out of range."""
    if not indices.numel():
        return 0
    low, high = cpu_extremes(indices)
    return None if _rules.out_of_range(low, high, size, opset) else low


def cpu_extremes(values: torch.Tensor) -> tuple[int, int]:
    """(min, max) of a non-empty plain CPU integer tensor, read as
    :func:`gatherx._strategy.torch_extremes_plan` says."""
    if torch_extremes_plan(values.numel()) == "aminmax":
        low, high = torch.aminmax(values)
        return cast(int, low.item()), cast(int, high.item())  # (int() costs twice item())
    return _rules.host_extremes(values.numpy())


#: The dtypes PyTorch's sparse tensors cannot hold: the unsigned "shell" dtypes, whose sums
#: have no kernels (a densified gradient would fail where the user reads it).
NO_SPARSE = torch_dtypes(frozenset({"uint16", "uint32", "uint64"}))


def check_sparse(x: torch.Tensor, fn: str, flag: str) -> None:
    """Refuse, before any work, a sparse gradient for ``x`` (data or grad) that PyTorch cannot
    hold, or that the active machinery cannot carry."""
    if x.dtype in NO_SPARSE:
        raise _errors.sparse_dtype(fn, flag, _rules.dtype_name(x.dtype))
    if is_dtensor(x):
        raise _errors.sparse_mode(fn, flag, "a DTensor holds no sparse tensor")
    if torch.compiler.is_exporting():
        why = "torch.export records ATen operators, and this gradient is gatherx's own"
        raise _errors.sparse_mode(fn, flag, why)
    if vmapping():
        raise _errors.sparse_mode(fn, flag, "torch.func.vmap cannot batch a sparse gradient")
