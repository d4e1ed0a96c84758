"""Tensor subclasses: DTensor (torch.distributed) read through its collectives, other wrapper
subclasses refused by name; ``__torch_function__`` subclasses pass as tensors."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ... import _errors
from .modes import compiling


def is_dtensor(x: Any) -> bool:
    """Whether ``x`` is a DTensor (whose module is loaded once the program made one)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(x, module.DTensor)


def refuse_unknown(x: Any, fn: str, role: str) -> None:
    """Refuse a wrapper subclass gatherx cannot read (its values live elsewhere than its
    storage). Compilers' own wrappers never reach here: their code is traced, not called."""
    if compiling() or not is_traceable_wrapper_subclass(x) or is_dtensor(x):
        return
    why = "a wrapper tensor subclass whose values gatherx cannot read"
    raise _errors.unsupported_array(fn, role, x, why, "pass a plain tensor or a DTensor")


def check_pair(index: Any, like: Any, fn: str) -> None:
    """DTensor indices go with DTensor data (or grad) and plain ones with plain, as DTensor's
    own operators require."""
    if is_dtensor(index) != is_dtensor(like):
        raise _errors.mixed_dtensor(fn, is_dtensor(like))


def replicated(local: torch.Tensor, like: Any) -> Any:
    """Host indices made a DTensor replicated over ``like``'s mesh: every rank holds them, as
    every rank of an SPMD program computes them."""
    from torch.distributed.tensor import DTensor, Replicate

    mesh = like.device_mesh
    return DTensor.from_local(local, mesh, [Replicate()] * mesh.ndim, run_check=False)


def replicated_everywhere(x: Any) -> Any:
    """A DTensor redistributed to be whole on every rank."""
    from torch.distributed.tensor import Replicate

    return x.redistribute(x.device_mesh, [Replicate()] * x.device_mesh.ndim)


def extremes(index: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(min, max) of a non-empty DTensor index as plain 0-d tensors on its device, the same
    on every rank: each rank reduces its shard (which may be empty), then one all-reduce
    each over the mesh; no rank gathers the index."""
    from torch.distributed.tensor import DTensor, Partial

    local, mesh = index.to_local(), index.device_mesh
    info = torch.iinfo(local.dtype)
    found = []
    for op, fn, neutral in (("min", torch.amin, info.max), ("max", torch.amax, info.min)):
        mine = fn(local) if local.numel() else torch.tensor(neutral, device=local.device)
        whole = DTensor.from_local(mine, mesh, [Partial(op)] * mesh.ndim, run_check=False)
        found.append(whole.full_tensor())
    return found[0], found[1]


def values(index: Any) -> np.ndarray:
    """A DTensor index's values, gathered on every rank (only to name a bad one: every rank
    raises the same error)."""
    return index.full_tensor().cpu().numpy()


def on_every_rank(fn: Any, *tensors: Any) -> Any:
    """``fn`` of DTensors, computed on their whole values on every rank: each is replicated
    first (the all-gathers a sharded gradient needs anyway), and the result is replicated.
    Where DTensor has no sharding rule that keeps a scatter-add exact for every placement,
    this one is."""
    from torch.distributed.tensor import DTensor, Replicate

    mesh = tensors[0].device_mesh
    local = [replicated_everywhere(t).to_local() for t in tensors]
    return DTensor.from_local(fn(*local), mesh, [Replicate()] * mesh.ndim, run_check=False)
