"""Which PyTorch calls need no check beyond their index's values: one predicate, from the rules."""

from __future__ import annotations

from typing import Any

import torch

from ... import _errors, _policy, _rules
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


def eager_cpu_call(data: Any, indices: Any, axis: Any, opset: Any) -> bool:
    """Whether every check of :meth:`gatherx._backends.base.Backend.gather` but the index's
    values passes, read in few steps: plain strided CPU tensors in plain eager code under the
    exact bounds policy, an int axis in range, an int opset of at least 11 and dtypes its rules
    accept. (After a large gather has evicted the interpreter from the CPU caches, each Python
    step costs several times its warm time.)"""
    return (
        type(indices) is torch.Tensor
        and type(data) in PLAIN_TYPES
        and _rules.plain_call(axis, opset, data.ndim)
        and data.dtype in DATA_DTYPES[opset >= _rules.BFLOAT16_SINCE]
        and indices.dtype in INDEX_DTYPES
        and data.is_cpu
        and indices.is_cpu
        and data.layout is STRIDED
        and indices.layout is STRIDED
        and not data.is_nested
        and not indices.is_nested
        and plain_eager()
        and _policy.exact("cpu")
    )


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
