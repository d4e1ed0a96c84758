"""DTensor data sharded on the gathered axis, with replicated indices: each rank gathers the
slices it holds, the others' masked out, and the partial results are summed when read (the
output is communicated, never the table); the gradient stays sharded like the table."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from ... import _rules
from . import kernels


def applies(data: Any, index: Any, axis: int) -> bool:
    """Whether ``data`` is sharded on ``axis`` (and otherwise sharded or replicated) and
    ``index`` replicated, both DTensors."""
    if not isinstance(data, DTensor) or not isinstance(index, DTensor):
        return False
    kinds = data.placements
    return (
        any(type(p) is Shard and p.dim == axis for p in kinds)
        and all(type(p) in (Shard, Replicate) for p in kinds)
        and all(type(p) is Replicate for p in index.placements)
    )


def _out_placements(data: DTensor, axis: int, k: int) -> list[Any]:
    """Partial sums where the data is sharded on ``axis``; its other shards moved past the
    index's ``k`` dimensions."""
    out: list[Any] = []
    for p in data.placements:
        if type(p) is Shard and p.dim == axis:
            out.append(Partial("sum"))
        elif type(p) is Shard:
            out.append(Shard(p.dim if p.dim < axis else p.dim + k - 1))
        else:
            out.append(p)
    return out


def _local_index(data: DTensor, index: DTensor, axis: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's index into its own shard, 0 where masked; the mask of the slices it holds)."""
    _, offset = compute_local_shape_and_global_offset(data.shape, data.device_mesh, data.placements)
    held = data.to_local().shape[axis]
    shifted = index.to_local() - offset[axis]
    mask = (shifted >= 0) & (shifted < held)
    return torch.where(mask, shifted, torch.zeros_like(shifted)), mask


def _spread(mask: torch.Tensor, axis: int, rank: int) -> torch.Tensor:
    """``mask`` shaped to broadcast over an output of rank ``rank`` with it at ``axis``."""
    return mask.reshape((1,) * axis + tuple(mask.shape) + (1,) * (rank - axis - mask.ndim))


def take(data: DTensor, index: DTensor, axis: int) -> DTensor:
    """The gather as partial sums over the ranks that hold the table's slices."""
    local = data.to_local()
    safe, mask = _local_index(data, index, axis)
    shape = _rules.output_shape(local.shape, safe.shape, axis)
    if local.shape[axis]:
        part = kernels.take(local, safe, axis)
        part = torch.where(_spread(mask, axis, len(shape)), part, torch.zeros_like(part))
    else:  # this rank holds none of the axis
        part = local.new_zeros(shape)
    full = _rules.output_shape(data.shape, index.shape, axis)
    placements = _out_placements(data, axis, index.ndim)
    return DTensor.from_local(part, data.device_mesh, placements, run_check=False,
                              shape=torch.Size(full), stride=_contiguous(full))  # fmt: skip


def scatter_add(grad: DTensor, index: DTensor, axis: int, like: DTensor) -> DTensor:
    """The gradient of :func:`take` for data laid out as ``like``: each rank adds the slices of
    the (summed) gradient that fall in its own shard."""
    wanted = [
        Replicate() if type(p) is Partial else p for p in _out_placements(like, axis, index.ndim)
    ]
    local = grad.redistribute(grad.device_mesh, wanted).to_local()
    safe, mask = _local_index(like, index, axis)
    held = like.to_local().shape[axis]
    local = torch.where(_spread(mask, axis, local.ndim), local, torch.zeros_like(local))
    if held:
        part = kernels.scatter_add(local, safe, axis, held)
    else:
        part = local.new_zeros(like.to_local().shape)
    return DTensor.from_local(part, like.device_mesh, like.placements, run_check=False,
                              shape=like.shape, stride=like.stride())  # fmt: skip


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


class RowShardedGather(torch.autograd.Function):
    """gatherx's Function for a table sharded on the gathered axis (see :func:`take`)."""

    @staticmethod
    def forward(ctx: Any, data: DTensor, index: DTensor, axis: int) -> DTensor:
        ctx.save_for_backward(index)
        ctx.axis = axis
        ctx.like = data.detach()
        return take(data, index, axis)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: DTensor) -> tuple[DTensor | None, None, None]:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        return scatter_add(grad, index, ctx.axis, ctx.like), None, None
