"""What the eager CPU fast paths (``gather`` and ``gather(..., out=)``) take, decided once."""

from __future__ import annotations

import torch

from ... import _rules
from .modes import plain_eager

#: Plain tensors and parameters: subclasses with their own __torch_function__ (FakeTensor
#: included) take the flow.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})
INDEX_DTYPES = frozenset(getattr(torch, name) for name in _rules.INDEX_DTYPES)
STRIDED = torch.strided


def torch_dtypes(names: frozenset[str]) -> frozenset[torch.dtype]:
    """The torch dtypes of these backend-neutral names (those torch has)."""
    return frozenset(
        getattr(torch, n) for n in names if isinstance(getattr(torch, n, None), torch.dtype)
    )


#: The data dtypes the eager path decides, for opsets from Gather-11 (index 0) and Gather-13 (1).
FAST_DATA_DTYPES = (
    torch_dtypes(_rules.data_dtypes(_rules.NEGATIVE_INDICES_SINCE)),
    torch_dtypes(_rules.data_dtypes(_rules.BFLOAT16_SINCE)),
)
GRAD_DTYPES = torch_dtypes(_rules.GRAD_DTYPES)
#: The dtypes NumPy can view a CPU tensor's memory as (all but bfloat16).
NUMPY_DTYPES = torch_dtypes(_rules.ONNX_DATA_DTYPES - {"string", "bfloat16"})


def plain(x: torch.Tensor) -> bool:
    """Strided and not nested: what the eager path takes."""
    return x.layout is STRIDED and not x.is_nested


def plain_cpu(x: torch.Tensor, index: torch.Tensor) -> bool:
    """Both strided, not nested, on the CPU, and plain eager mode: the eager path's domain."""
    return (
        x.is_cpu
        and index.is_cpu
        and x.layout is STRIDED
        and index.layout is STRIDED
        and not x.is_nested
        and not index.is_nested
        and plain_eager()
    )
