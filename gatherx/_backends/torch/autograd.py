"""PyTorch autograd: Functions for gather and scatter-add that differentiate each other."""

from __future__ import annotations

from typing import Any

import torch

from .kernels import scatter_add, sparse_scatter_add, take, wrap_unchecked
from .modes import compiling, functorch_active, onnx_exporting, plain_eager, tracing

Grads = tuple[torch.Tensor | None, None, None, None]
EagerGrads = tuple[torch.Tensor | None, None, None, None, None, None]  # + the plan, the given


class _GatherNoJvp(torch.autograd.Function):
    """Gather on in-bounds, non-negative ``index``; backward is a differentiable scatter-add,
    dense or (``sparse``) a ``torch.sparse_coo`` tensor of the gathered slices."""

    generate_vmap_rule = True

    @staticmethod
    def forward(
        data: torch.Tensor, index: torch.Tensor, axis: int, sparse: bool = False
    ) -> torch.Tensor:
        if tracing() and onnx_exporting():
            # the index as the exported Gather reads it, negatives included (the exporter
            # records this Function as that one node, not what runs in it)
            index = wrap_unchecked(index, data.shape[axis])
        return take(data, index, axis)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        data, index, axis, sparse = inputs
        ctx.save_for_backward(index)
        ctx.size = data.shape[axis]
        ctx.axis = axis
        ctx.sparse = sparse
        ctx.set_materialize_grads(True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Grads:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        if ctx.sparse:
            return sparse_scatter_add(grad, index, ctx.axis, ctx.size), None, None, None
        return apply_scatter_add(grad, index, ctx.axis, ctx.size), None, None, None

    @staticmethod
    def symbolic(g: Any, data: Any, index: Any, axis: int, sparse: bool = False) -> Any:
        """One ONNX ``Gather`` node for torch's TorchScript ONNX exporter (opsets below 18)."""
        return g.op("Gather", data, index, axis_i=axis)


class _GatherFn(_GatherNoJvp):
    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _GatherNoJvp.setup_context(ctx, inputs, output)
        ctx.save_for_forward(inputs[1])  # torch.func's vmap rule needs it saved, not an attribute

    @staticmethod
    def jvp(ctx: Any, data_t: torch.Tensor, *_: Any) -> torch.Tensor:
        (index,) = ctx.saved_tensors
        return take(data_t, index, ctx.axis)


class GatherEager(torch.autograd.Function):
    """``_GatherFn`` for plain eager autograd, in the old style (``forward`` takes ``ctx``).

    ``Function.apply`` runs ``inspect.signature`` on every call of a Function that defines
    ``setup_context`` (~20 us), which torch.func's transforms need and plain autograd does not;
    plain eager calls use this one (no transform, compiler, tracer or forward AD active).

    ``given``: the caller's index where ``index`` is a copy of it (negatives wrapped), saved
    too so that changing it in place before the backward raises autograd's error, as it does
    where the index is saved as given.
    """

    @staticmethod
    def forward(
        ctx: Any,
        data: torch.Tensor,
        index: torch.Tensor,
        axis: int,
        sparse: bool = False,
        plan: tuple[str, bool] | None = None,
        given: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if given is None:
            ctx.save_for_backward(index)
        else:
            ctx.save_for_backward(index, given)
        ctx.size = data.shape[axis]
        ctx.axis = axis
        ctx.sparse = sparse
        return take(data, index, axis, plan)  # plan: the caller's, for this data and index

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> EagerGrads:
        index = ctx.saved_tensors[0]  # (reading them all checks the given's version)
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None
        if ctx.sparse:
            out = sparse_scatter_add(grad, index, ctx.axis, ctx.size)
        elif torch.is_grad_enabled() or functorch_active():
            # create_graph=True, or vmap over the backward (gradcheck's batched grad)
            out = apply_scatter_add(grad, index, ctx.axis, ctx.size)
        else:
            out = scatter_add(grad, index, ctx.axis, ctx.size)
        return out, None, None, None, None, None


class _ScatterAddNoJvp(torch.autograd.Function):
    """Scatter-add of ``grad`` into zeros of size ``size`` on ``axis``; its backward is a gather.

    Only ``size`` is passed, not the whole data shape: the other dimensions are ``grad``'s,
    which keeps every argument a tensor or an int for vmap's generated rule and for Dynamo.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(grad: torch.Tensor, index: torch.Tensor, axis: int, size: int) -> torch.Tensor:
        return scatter_add(grad, index, axis, size)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _, index, axis, _ = inputs
        ctx.save_for_backward(index)
        ctx.axis = axis
        ctx.set_materialize_grads(True)

    @staticmethod
    def backward(ctx: Any, gg: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        (index,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        return apply_gather(gg, index, ctx.axis), None, None, None


class _ScatterAddFn(_ScatterAddNoJvp):
    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _ScatterAddNoJvp.setup_context(ctx, inputs, output)
        ctx.save_for_forward(inputs[1])
        ctx.size = inputs[3]

    @staticmethod
    def jvp(ctx: Any, grad_t: torch.Tensor, *_: Any) -> torch.Tensor:
        (index,) = ctx.saved_tensors
        return scatter_add(grad_t, index, ctx.axis, ctx.size)


# Dynamo refuses to trace an autograd.Function that defines jvp, so compiled code uses twins
# without it; forward-mode AD is an eager (and torch.func) feature.
def apply_gather(
    data: torch.Tensor,
    index: torch.Tensor,
    axis: int,
    sparse: bool = False,
    given: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gather through gatherx's Function: the cheapest one the active machinery can run.
    ``given``: the caller's index, where ``index`` is a copy (see :class:`GatherEager`)."""
    if plain_eager():
        if given is None or given is index:
            return GatherEager.apply(data, index, axis, sparse)
        return GatherEager.apply(data, index, axis, sparse, None, given)
    fn = _GatherNoJvp if compiling() else _GatherFn
    return fn.apply(data, index, axis, sparse)


def apply_scatter_add(
    grad: torch.Tensor, index: torch.Tensor, axis: int, size: int
) -> torch.Tensor:
    fn = _ScatterAddNoJvp if compiling() else _ScatterAddFn
    return fn.apply(grad, index, axis, size)
