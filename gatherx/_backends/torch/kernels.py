"""PyTorch kernels: ``index_select`` on the data as given, and ``index_add_`` for its gradient."""

from __future__ import annotations

import functools
import math
from typing import Any, cast

import torch

from ... import _policy, _rules
from ..._strategy import (
    TORCH_ELEMENTS_MIN_INDICES,
    TORCH_ROW_SUMS_MIN_ROW,
    half_grad_plan,
    half_grad_slice,
    row_elements,
    torch_backward_plan,
    torch_forward_plan,
    torch_grad_rows,
    torch_half_grad_plan,
    torch_layout_plan,
    torch_one_each_plan,
)
from .domain import INDEX_MAX, PLAIN_TYPES
from .modes import compiling, functorch_active, plain_eager, tracing, values_readable
from .subclasses import is_dtensor, on_every_rank, replicated_everywhere

# uint16/32/64 are "shell" dtypes with few kernels; gather is pure data movement, so it runs
# on the same bits viewed as the signed type of the same width.
BIT_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}
# torch.gather's CPU loop moves float16/bfloat16 elements 1.2-5.5x slower than int16 ones
# (docs/performance_details.md): the ``gather`` plan moves their bits as int16.
GATHER_TWIN = {torch.float16: torch.int16, torch.bfloat16: torch.int16}

_FLOAT32 = torch.float32
_INT64 = torch.int64
#: The plans that read the index as given, negative positions included: no wrap.
AS_GIVEN = frozenset({"indexing", "take", "take_negative", "broadcast"})
# those that read the data through a view
_VIEWS = frozenset({"blocks", "columns", "gather", "elements", "gather_elements"})
#: Those that read each row after the axis as one integer element.
ELEMENT_PLANS = frozenset({"elements", "gather_elements"})
#: Those that may view the data's (and ``out``'s) memory as another dtype, which PyTorch
#: refuses on conjugate and negative views (:func:`lazy_bits`): rows as one integer element,
#: float16/bfloat16 moved as int16.
INTEGER_VIEWS = ELEMENT_PLANS | {"broadcast", "gather"}
#: The integer dtype of each width: the element a row of that many bytes is read as.
_ROW_ELEMENT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
HALF = frozenset(getattr(torch, name) for name in _rules.HALF_DTYPES)
_INDEX_NAMES = {torch.int32: "int32", torch.int64: "int64"}


def signed_view(x: torch.Tensor, twins: dict[torch.dtype, torch.dtype] = BIT_TWIN) -> torch.Tensor:
    """``x``, or for a tensor of a dtype in ``twins`` (by default uint16/32/64,
    :data:`BIT_TWIN`) its bits viewed as the signed integers of its width; :func:`bits_as`
    views a result back."""
    twin = twins.get(x.dtype)
    return x if twin is None else x.view(twin)


def bits_as(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A result of :func:`signed_view`'s tensors viewed back as ``dtype``."""
    return x if x.dtype is dtype else x.view(dtype)


def lazy_bits(x: torch.Tensor) -> bool:
    """Whether ``x`` is a conjugate or negative view (``x.conj()``, ``x.conj().imag``): its
    memory holds values PyTorch negates or conjugates as it reads them, so no view of it as
    another dtype (the integer plans, :func:`signed_view`) reads or writes its values."""
    return x.is_conj() or x.is_neg()


def host_scalar(index: torch.Tensor) -> bool:
    """Whether ``index`` is one value that can be read on the host at no cost and with no
    trace to record: a 0-d CPU index of a plain eager call."""
    return (
        index.ndim == 0
        and type(index) is torch.Tensor  # (a subclass's value may live on other ranks)
        and index.is_cpu
        and plain_eager()
        and _policy.exact("cpu")
    )


def take(
    data: torch.Tensor, index: torch.Tensor, axis: int, plan: tuple[str, bool] | None = None
) -> torch.Tensor:
    """``data`` gathered along ``axis`` at a checked, non-negative ``index``.

    As :func:`plan_of` says (``plan``, if given, is its answer for ``data`` and ``index``):
    :func:`select` (at the index flattened, its output then viewed in the output's shape),
    advanced indexing or ``torch.take`` at the index as given; a scalar index read on the
    host takes :func:`take_at`.
    """
    if host_scalar(index):
        return take_at(data, int(index), axis)
    source = signed_view(data)
    k = index.ndim
    if k != 1 and is_dtensor(index):
        index = replicated_everywhere(index)  # DTensor's reshape miscounts some shards
    if plan is None:
        plan = plan_of(source, axis, index.numel(), k, False, index.dtype is _INT64)
    kernel, copy = plan
    if kernel == "indexing":
        # the index's dimensions in place of the axis, as given (a 0-d index would index
        # as an int, a view: taken as one, its axis then dropped)
        out = _indexed(source, axis, index if k else index.reshape(1))
        if not k:
            out = out.squeeze(axis)
    elif kernel == "take":  # 1-D data: the output has the index's shape
        out = torch.take(source, index)
    else:
        if copy:
            source = source.contiguous()
        out = select(source, axis, index if k == 1 else index.reshape(-1), kernel)
        if k != 1 or kernel in _VIEWS:  # the output's shape (unflatten has no vmap rule)
            out = view_as(out, _rules.output_shape(data.shape, index.shape, axis))
    return bits_as(out, data.dtype)


#: The plan that reads nothing of the data: index_select on it as given.
_AS_IS = ("as_is", False)


def plan_of(
    source: torch.Tensor,
    axis: int,
    n_index: int,
    index_ndim: int,
    negative: bool | None = False,
    int64: bool = True,
) -> tuple[str, bool]:
    """How ``source`` is read at an index of ``n_index`` values and ``index_ndim``
    dimensions (``negative``: holding a negative value, None: not read yet; ``int64``: of
    that dtype): (a kernel, whether on a contiguous copy). :func:`take` runs the
    :func:`select` plans, :func:`take_given` those of :data:`AS_GIVEN`.

    The :func:`layout` plan; on non-contiguous data, as
    :func:`gatherx._strategy.torch_forward_plan` says: read where it lies by
    ``index_select`` or advanced indexing (``torch.gather`` keeps its columns), or by the
    plan on a contiguous copy.
    """
    if compiling():  # sizes may be symbolic: comparing one would guard the graph on it
        return _AS_IS
    contiguous = source.is_contiguous()
    # The TorchScript ONNX exporter replaces this body by one Gather node, but it still
    # traces it: the plain call keeps that trace simple.
    if contiguous or tracing():
        return layout(source, axis, n_index, index_ndim, negative, int64, contiguous), False
    shape = source.shape
    size = shape[axis]
    n_out = source.numel() // size * n_index if size else 0
    kind = "cpu" if source.is_cpu else "other"
    plain = type(source) in PLAIN_TYPES and plain_eager()
    forward = torch_forward_plan(
        False, source.numel(), n_out, shape, axis, n_index, kind, int64, plain
    )
    if forward == "take":  # 1-D data read where it lies, at the index as given
        return "take", False
    # a copy is planned as contiguous data (an axis of length 1 gives an output of at least
    # the data's size: a copy, broadcast); data that index_select reads where it lies keeps
    # index_select, or torch.gather for columns, which reads it as given
    copied = forward == "contiguous"
    plan = layout(source, axis, n_index, index_ndim, negative, int64, copied)
    if forward == "index_select":  # (the views need contiguous data; gather reads it as given)
        return (plan if plan in ("indexing", "gather") else "as_is"), False
    if plan == "indexing" or not (copied or plan == "gather"):
        return "indexing", False
    return plan, copied


#: The plans of :func:`eager_plan`, by everything :func:`plan_of` reads of such a call; emptied
#: when it holds ``EAGER_PLANS_KEPT``.
_EAGER_PLANS: dict[tuple[object, ...], tuple[str, bool]] = {}
EAGER_PLANS_KEPT = 4096


def eager_plan(
    data: torch.Tensor,
    axis: int,
    n_index: int,
    index_ndim: int,
    negative: bool | None,
    int64: bool,
) -> tuple[str, bool]:
    """:func:`plan_of` for the data of a :func:`~.domain.eager_cpu_call` (plain CPU tensors
    in plain eager code), remembered by shape, dtype, contiguity, storage offset (modulo 8
    elements), axis and the index's count, rank, sign and dtype: a call that recurs reads its
    plan in one lookup (0.4 us) where the rules' Python costs 1-2 us (the plan at once of
    :func:`at_once` is not stored). A conjugate or negative view (:func:`lazy_bits`, read only
    where no plan is remembered yet or the one remembered is of :data:`INTEGER_VIEWS`) takes
    its own plan, not remembered."""
    contiguous = data.is_contiguous()
    if contiguous and at_once(axis, n_index, index_ndim, negative, data.ndim, contiguous):
        return _AS_IS
    offset = data.storage_offset() % 8  # whether rows of up to 8 bytes start at an element
    key = (data.shape, data.dtype, contiguous, offset, axis, n_index, index_ndim, negative, int64)
    plan = _EAGER_PLANS.get(key)
    if (plan is None or plan[0] in INTEGER_VIEWS) and lazy_bits(data):
        return plan_of(data, axis, n_index, index_ndim, negative, int64)
    if plan is None:
        if len(_EAGER_PLANS) >= EAGER_PLANS_KEPT:
            _EAGER_PLANS.clear()
        plan = _EAGER_PLANS[key] = plan_of(data, axis, n_index, index_ndim, negative, int64)
    return plan


def at_once(
    axis: int, n_index: int, index_ndim: int, negative: bool | None, ndim: int, contiguous: bool
) -> bool:
    """Whether :func:`gatherx._strategy.torch_layout_plan` says ``as_is`` for these before any
    other test: dim 0 at a 1-D or 0-d index with no negative value (a sign not read yet,
    ``negative`` None, matters on contiguous 1-D data only), on 1-D or non-contiguous data or
    at fewer indices than ``elements`` takes."""
    return (
        axis == 0
        and index_ndim < 2
        and not negative
        and not (negative is None and ndim == 1 and contiguous)
        and (ndim == 1 or not contiguous or n_index < TORCH_ELEMENTS_MIN_INDICES)
    )


def take_at(
    data: torch.Tensor, at: int, axis: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``data``'s one slice at position ``at`` (in [-size, size)) of ``axis``, a copy;
    written into ``out`` of its shape if given."""
    if out is not None:
        # select_copy(out=) makes a fresh copy, then copies it into out: 20 ms against
        # 2 ms on 40 MB (docs/performance_details.md); the view's copy_ writes out directly.
        return out.copy_(data.select(axis, at))
    source = signed_view(data)
    if source is data:
        return torch.select_copy(data, axis, at)
    return bits_as(torch.select_copy(source, axis, at), data.dtype)


def take_given(
    data: torch.Tensor,
    index: torch.Tensor,
    axis: int,
    plan: tuple[str, bool],
    negative: bool = True,
    into: torch.Tensor | None = None,
) -> torch.Tensor:
    """``data`` gathered along ``axis`` at a checked ``index`` of rank >= 1 as given by a
    :data:`AS_GIVEN` ``plan`` of :func:`plan_of`: advanced indexing, or on 1-D data
    ``torch.take`` (``take_negative``: where the index holds a ``negative`` value, else
    ``index_select``, which needs no wrap then), on a contiguous copy where ``plan`` says, or
    the one slice of an axis of length 1 repeated (:func:`broadcast`, which reads no index
    value); ``torch.take`` writes into ``into`` of the output's shape if given."""
    source = signed_view(data)
    kernel, copy = plan
    if copy:
        source = source.contiguous()
    if kernel == "broadcast":
        out = broadcast(source, axis, index.numel())
        out = view_as(out, _rules.output_shape(data.shape, index.shape, axis))
    elif kernel == "indexing":
        out = _indexed(source, axis, index)
    elif negative or kernel == "take":  # of the index's shape: the output's on 1-D data
        out = torch.take(source, index, out=None if into is None else signed_view(into))
    else:
        out = torch.index_select(source, 0, index if index.ndim == 1 else index.reshape(-1))
        if index.ndim != 1:
            out = out.view(*index.shape)  # (of two or more dimensions)
    return bits_as(out, data.dtype)


def broadcast(
    source: torch.Tensor, axis: int, n: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """The one slice of ``source``'s ``axis`` of length 1 repeated ``n`` times along it: its
    expanded view copied into a new contiguous tensor, or into ``out`` of that shape.

    Rows of several elements after the axis that make one integer element (2, 4 or 8 bytes at
    an offset such an element starts at, in contiguous tensors) are copied as that element:
    ATen's copy fills one element a position from the expanded view, where it loops over each
    short row (rows of two bytes: 0.08 against 6 ms into 12 MB)."""
    shape = list(source.shape)
    shape[axis] = n
    into = source.new_empty(shape) if out is None else out
    post = math.prod(shape[axis + 1 :])
    itemsize = source.element_size()
    row = post * itemsize
    if (
        post > 1
        and row_elements(row, cast(int, source.storage_offset()) * itemsize)
        and row_elements(row, cast(int, into.storage_offset()) * itemsize)
        and source.is_contiguous()
        and into.is_contiguous()
    ):
        pre = math.prod(shape[:axis])
        wide = _ROW_ELEMENT[row]
        rows = source.view(pre, 1, post).view(wide)
        into.view(pre, n, post).view(wide).copy_(rows.expand(pre, n, 1))
        return into
    return into.copy_(source.expand(shape))


def one_slot(
    data: torch.Tensor, index: torch.Tensor, axis: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``data``'s empty ``axis`` padded with one slot of zeros, and ``index`` clamped to that
    slot: what a compiled gather from an empty axis reads, since Inductor cannot lower an
    index into a dim of length 0. No index is valid there: the in-graph check before it fails
    on any value, and a non-empty result is never returned. (The index is derived from the
    checked one, not made anew: under ``vmap`` the check is an op whose output it is, which
    the compiler would drop if nothing read it.)"""
    shape = list(data.shape)
    shape[axis] = 1
    return torch.cat((data, data.new_zeros(shape)), axis), index.clamp(0, 0)


def view_as(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``x.view(shape)``, the shape passed as separate ints where it has any (a sequence
    argument costs ATen's parser about 0.5 us more, a ``torch.Size`` about 1.4 us)."""
    return x.view(*shape) if shape else x.view(shape)


def element_starts(x: torch.Tensor, like: torch.Tensor, axis: int) -> bool:
    """Whether ``x`` starts in its storage where an element of :data:`ELEMENT_PLANS` for
    ``like`` (one a row after ``axis``) can: at a multiple of the row's bytes."""
    row = math.prod(like.shape[axis + 1 :]) * like.element_size()
    return row_elements(row, cast(int, x.storage_offset()) * x.element_size())


def _indexed(source: torch.Tensor, axis: int, index: torch.Tensor) -> torch.Tensor:
    """``source[..., index, ...]`` with ``index`` on ``axis``: its dimensions in the axis's
    place, contiguous as every other plan's result (advanced indexing lays out the result of
    non-contiguous data in its strides' order, so that ``.view`` would fail or not by the
    plan)."""
    return source[(slice(None),) * axis + (index,)].contiguous()


def layout(
    source: torch.Tensor,
    axis: int,
    n_index: int,
    index_ndim: int = 1,
    negative: bool | None = False,
    int64: bool = True,
    contiguous: bool = True,
) -> str:
    """:func:`gatherx._strategy.torch_layout_plan` for ``source`` (``contiguous``: whether
    it is): its plans for plain tensors in plain eager code, ``as_is`` for any other."""
    if at_once(axis, n_index, index_ndim, negative, source.ndim, contiguous):  # (most calls)
        return "as_is"
    if not (type(source) in PLAIN_TYPES and plain_eager()):
        return "as_is"  # (compiled, traced or transformed: nothing read of the tensor's memory)
    if lazy_bits(source):  # (the plans that view it as integers would read its memory)
        return "as_is"
    itemsize = source.element_size()
    # where the data starts in its storage (a copy: at its start)
    offset = cast(int, source.storage_offset()) * itemsize if source.is_contiguous() else 0
    return torch_layout_plan(
        "cpu" if source.is_cpu else "other",
        source.shape,
        axis,
        n_index,
        source.dtype is _FLOAT32,
        index_ndim,
        negative,
        int64,
        contiguous,
        itemsize,
        offset,
    )


def over_rows(flat: torch.Tensor, row: int) -> torch.Tensor:
    """The 1-D index ``flat`` into a dim followed by rows of ``row`` elements, expanded into
    the positions of each row's elements on that dim and the rows seen as one (``flat`` itself
    on rows of one)."""
    if row == 1:
        return flat
    return (flat.view(-1, 1) * row + torch.arange(row, device=flat.device)).view(-1)


def select(
    source: torch.Tensor, axis: int, flat: torch.Tensor, plan: str, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``source`` gathered along ``axis`` at a checked, non-negative 1-D ``flat`` by the
    kernel of the :func:`layout` ``plan`` (``blocks``, ``columns``: contiguous ``source``
    only), in ``source``'s shape with ``flat``'s length on ``axis`` (``blocks``, ``columns``
    and ``gather`` of contiguous ``source``: in the shape of their view, ``(pre, n x row)``
    for ``gather``); written into ``out`` of that shape if given."""
    if plan == "as_is":
        return torch.index_select(source, axis, flat, out=out)
    if plan == "slices":  # dim 1 as dim 2, a slice copy per index: ATen's loop for later dims
        into = None if out is None else out.unsqueeze(0)
        return torch.index_select(source.unsqueeze(0), axis + 1, flat, out=into).squeeze(0)
    if plan == "broadcast":  # (reads no index value: any of the index's length will do)
        return broadcast(source, axis, flat.shape[0], out)
    if plan in ELEMENT_PLANS:  # each row one integer element; the result flat, in its dtype
        dtype, sizes = source.dtype, source.shape
        wide = _ROW_ELEMENT[math.prod(sizes[axis + 1 :]) * source.element_size()]
        into = None if out is None else out.view(-1).view(wide)
        lines = source.view(-1)
        lines = lines if wide is dtype else lines.view(wide)
        if plan == "elements":  # 1-D data
            got = torch.index_select(lines, 0, flat, out=into)
        else:  # (pre, size) behind outer rows, at the index expanded over them
            pre, n = math.prod(sizes[:axis]), flat.shape[0]
            at = flat.view(1, -1).expand(pre, n)
            got = torch.gather(
                lines.view(pre, -1), 1, at, out=None if into is None else into.view(pre, n)
            )
        return got if wide is dtype else got.view(dtype)
    if plan == "gather" and source.dtype in GATHER_TWIN:
        into = None if out is None else signed_view(out, GATHER_TWIN)
        moved = select(signed_view(source, GATHER_TWIN), axis, flat, plan, into)
        return bits_as(moved, source.dtype)
    n = flat.shape[0]
    sizes = source.shape  # blocks: (pre, size, post) on dim 1; columns: (pre, 1, size, 1) on 2
    pre = math.prod(sizes[:axis])
    if plan == "gather":  # the index expanded over the outer rows: a view, no copy (rows of
        # more than one element: first over each row's elements, n x row values)
        if source.is_contiguous():
            # on the (pre, size x row) view: gather's loop runs 2-3x slower over the data's
            # own dims where one of them has length 1 (docs/performance_details.md); rows of
            # more than one element at the index expanded over each row's elements
            row = math.prod(sizes[axis + 1 :])
            into = None if out is None else out.view(pre, n * row)
            lines = source.view(pre, sizes[axis] * row)
            at = over_rows(flat, row).view(1, -1)
            return torch.gather(lines, 1, at.expand(pre, n * row), out=into)
        shape = list(sizes)
        shape[axis] = n
        dims = [1] * len(shape)
        dims[axis] = n
        return torch.gather(source, axis, flat.view(dims).expand(shape), out=out)
    if plan == "columns":
        into = None if out is None else out.view(pre, 1, n, 1)
        return torch.index_select(source.view(pre, 1, sizes[axis], 1), 2, flat, out=into)
    post = math.prod(sizes[axis + 1 :])
    into = None if out is None else out.view(pre, n, post)
    return torch.index_select(source.view(pre, sizes[axis], post), 1, flat, out=into)


def scatter_add(grad: torch.Tensor, index: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """Zeros with ``grad`` added at non-negative in-range ``index``; ``size`` is the axis's."""
    if is_dtensor(grad):
        return on_every_rank(lambda g, i: scatter_add(g, i, axis, size), grad, index)
    if host_scalar(index):
        return scatter_at(grad, int(index), axis, size)
    # index_add is deterministic under torch.use_deterministic_algorithms(True), CUDA included
    # (scatter_add, a CPU plan only, adds serially in index order).
    k = index.ndim
    if not grad.numel():  # nothing to add (an empty index, or empty slices): the zeros alone
        dims = list(grad.shape)
        return grad.new_zeros([*dims[:axis], size, *dims[axis + k :]])
    flat = index if k == 1 else index.reshape(-1)
    kind = "cpu" if flat.is_cpu else flat.device.type
    n, dims = flat.shape[0], list(grad.shape)
    plan = torch_backward_plan(
        _INDEX_NAMES[flat.dtype], kind, n, grad.numel(), plain_eager(), grad.dtype in HALF
    )
    if plan != "index_add":
        flat = flat.long()  # see _strategy: the CPU kernels need int64 (scatter_add_ only it)
    if plan == "scatter_add":  # one element a position: both as one dimension
        source = signed_view(grad).reshape(-1)
        lines = signed_view(grad.new_zeros(size)).scatter_add_(0, flat, source)
        return bits_as(lines, grad.dtype).view([*dims[:axis], size, *dims[axis + k :]])
    # (compiled: sizes may be symbolic, and comparing one would guard the graph on it)
    row = 0 if compiling() else torch_grad_rows(dims, axis, k, kind)
    if row:  # on (pre, n x row) views, the axis last, at the index over each row's elements
        table = [*dims[:axis], size, *dims[axis + k :]]
        lines = grad.reshape(math.prod(dims[:axis]), -1)
        return _scatter_flat(lines, over_rows(flat, row), 1, size * row, n).view(table)
    if k != 1:  # (flatten has no batching rule for vmap over the backward)
        dims[axis : axis + k] = [n]
        grad = grad.reshape(*dims)
    return _scatter_flat(grad, flat, axis, size)


def _scatter_flat(
    source: torch.Tensor, flat: torch.Tensor, axis: int, size: int, positions: int = 0
) -> torch.Tensor:
    """:func:`scatter_add` of ``source``, the gradient with its index's dimensions as one on
    ``axis``, at the 1-D ``flat``; ``positions``: the index's own count where ``flat`` is it
    expanded over each row's elements (half precision plans by that count)."""
    dtype = source.dtype
    shape = list(source.shape)
    shape[axis] = size
    plan = ""
    if dtype in HALF and compiling():  # (no size compared: the float32 table)
        plan = "float32"
    elif dtype in HALF:  # half precision would round every partial sum: add in float32
        # (eager code only for the distinct sums and the read of few values: the sums' size
        # and the plan depend on the values; no read on an accelerator, which would sync)
        eager = plain_eager() and values_readable(flat)
        n = flat.shape[0]
        host = eager and flat.is_cpu
        repeated = not host or _rules.may_repeat(n, flat.tolist)
        rows = rows_summed_in_float32 if host else None
        plan = torch_half_grad_plan(shape, axis, positions or n, repeated, rows)
        if plan == "as_given":
            return _one_each(source, flat, axis, size)
        if eager:
            if plan == "row_sums":
                return _row_sums(source, flat, axis, size)
            if plan == "distinct":
                return _half_scatter_add(source, flat, axis, size)
            return _float32_sums(source, flat, axis, size).to(dtype=dtype)  # rounded once
    # (traced, compiled or under torch.func, half precision is added in float32 here;
    # two's-complement addition gives the same bits for signed and unsigned integers)
    widened = plan == "float32" or plan == "distinct"
    source = source.float() if widened else signed_view(source)
    zeros = source.new_zeros(*shape)
    if functorch_active():
        # vmap batches the index and not the gradient: zeros made from the gradient are not
        # batched, and an in-place add of batched values into them has no batching rule.
        out = torch.index_add(zeros, axis, flat, source)
    else:
        out = zeros.index_add_(axis, flat, source)
    if widened:
        return out.to(dtype=dtype)  # rounded once
    return bits_as(out, dtype)


def scatter_given(grad: torch.Tensor, index: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Zeros of ``shape`` with ``grad`` added on dim 0 at the checked ``index`` of rank >= 1
    as given (negative positions included), as :func:`gatherx._strategy.torch_grad_given`
    says: one ``index_put_(accumulate=True)``, the index and gradient in their own shapes
    (two's-complement addition: the same bits for signed and unsigned integers; float16 and
    bfloat16 added in float32 and rounded once)."""
    if grad.dtype in HALF:
        sums = grad.new_zeros(shape, dtype=torch.float32)
        return sums.index_put_((index,), grad.float(), accumulate=True).to(dtype=grad.dtype)
    source = signed_view(grad)
    zeros = source.new_zeros(shape)
    return bits_as(zeros.index_put_((index,), source, accumulate=True), grad.dtype)


def scatter_at(grad: torch.Tensor, at: int, axis: int, size: int) -> torch.Tensor:
    """Zeros with ``grad`` written at position ``at`` (in [-size, size)) of a new ``axis`` of
    ``size``: one slice, added where it may hold -0.0 (floating and complex), so that it
    becomes the +0.0 a sum gives, else copied (uint16/32/64 have no addition)."""
    shape = list(grad.shape)
    shape.insert(axis, size)
    out = grad.new_zeros(*shape)
    slot = out.select(axis, at)
    if grad.is_floating_point() or grad.is_complex():
        slot.add_(grad)
    else:
        slot.copy_(grad)
    return out


@functools.cache
def rows_summed_in_float32() -> bool:
    """Whether this PyTorch's CPU ``index_add_`` runs ATen's sorted row-sum kernel (x86
    builds: FBGEMM's radix sort, OpenMP) and sums float16 and bfloat16 rows there in float32,
    rounded once: tried once, on 2050 ones added to one row (2048 when each step rounds to
    float16, 256 to bfloat16), as :func:`_row_sums` calls it."""
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return False
    if not torch.backends.openmp.is_available():
        return False
    n, row = 2050, TORCH_ROW_SUMS_MIN_ROW
    index = torch.zeros(n, dtype=_INT64, device="cpu")
    for dtype in HALF:
        ones = torch.ones(n, row, dtype=dtype, device="cpu")
        got = torch.zeros(1, row, dtype=dtype, device="cpu").index_add_(0, index, ones)
        if not torch.equal(got, torch.full((1, row), float(n), dtype=dtype, device="cpu")):
            return False
    return True


def _row_sums(source: torch.Tensor, flat: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """The float16/bfloat16 scatter-add of ``source`` by ATen's sorted row-sum kernel
    (:func:`rows_summed_in_float32`) at the int64 ``flat``: each row's slices summed in
    float32 and rounded once, into half-precision zeros. The table's outer blocks (the axes
    before ``axis``) are seen as one table of their rows, and the index repeated for each
    block, moved by the block's first row."""
    n = flat.shape[0]
    pre = math.prod(source.shape[:axis])
    rows = source.reshape(pre * n, -1).contiguous()  # the kernel reads contiguous rows only
    if pre > 1:
        first = torch.arange(0, pre * size, size, dtype=flat.dtype, device=flat.device)
        flat = (first[:, None] + flat).reshape(-1)
    shape = list(source.shape)
    shape[axis] = size
    return rows.new_zeros(pre * size, rows.shape[1]).index_add_(0, flat, rows).view(shape)


def _half_scatter_add(
    source: torch.Tensor, flat: torch.Tensor, axis: int, size: int
) -> torch.Tensor:
    """The float16/bfloat16 scatter-add summed in float32 over each distinct index's slice
    once, rounded once, then written into zeros: the float32 sums take the gradient's memory,
    not the data's (a float32 copy of a large table costs more than the whole native add).
    Where no index repeats, each sum is one slice (the ``as_given`` plan)."""
    rows, slot = torch.unique(flat, return_inverse=True)
    n = rows.shape[0]
    shape = list(source.shape)
    shape[axis] = size
    if half_grad_plan("torch", math.prod(shape), n, n < flat.shape[0]) == "as_given":
        return _one_each(source, flat, axis, size)
    sums = _float32_sums(source, slot, axis, n).to(dtype=source.dtype)
    return source.new_zeros(shape).index_copy_(axis, rows, sums)


def _one_each(source: torch.Tensor, flat: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """Zeros with each slice of ``source`` written at its slot of ``flat``, which names no
    slot twice: the scatter-add's sums, exact in any precision, as
    :func:`gatherx._strategy.torch_one_each_plan` says: ``index_add_`` on small tables (one
    addition a slot), else ``index_copy_`` (float16's ``index_add_`` moves the whole table,
    3x the zeros' time) of the slices plus 0, so that -0.0 becomes the +0.0 a sum gives."""
    shape = list(source.shape)
    shape[axis] = size
    zeros = source.new_zeros(*shape)
    if torch_one_each_plan(zeros.numel()) == "index_add":
        return zeros.index_add_(axis, flat, source)
    return zeros.index_copy_(axis, flat, source + 0)


def _distinct_sums(
    source: torch.Tensor, flat: torch.Tensor, axis: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the distinct indices, sorted; for each, its slices of ``source`` summed in float32 and
    rounded once to ``source``'s dtype)."""
    rows, slot = torch.unique(flat, return_inverse=True)
    return rows, _float32_sums(source, slot, axis, rows.shape[0]).to(dtype=source.dtype)


def _float32_sums(source: torch.Tensor, flat: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """float32 zeros of ``source``'s shape with ``size`` on ``axis``, with the half-precision
    ``source`` added at ``flat`` in index order: in plain eager code converted a slice of
    index positions or of outer blocks at a time as :func:`gatherx._strategy.half_grad_slice`
    says (the same sums, in the same order, without a float32 copy of the whole gradient)."""
    dims = list(source.shape)
    shape = dims.copy()
    shape[axis] = size
    sums = source.new_zeros(*shape, dtype=torch.float32)
    n = flat.shape[0]
    blocks, step = half_grad_slice(source.numel(), n, dims, axis)
    pre = math.prod(dims[:axis])
    if step >= (pre if blocks else n) or not plain_eager():
        return sums.index_add_(axis, flat, source.float())
    if blocks:  # on (pre, n, post) views; on rows of one, (pre, n): the gathered axis last
        post = math.prod(dims[axis + 1 :])
        rest = [post] if post > 1 else []
        rows = source.reshape(pre, n, *rest)
        into = sums.view(pre, size, *rest)
        for start in range(0, pre, step):
            into[start : start + step].index_add_(1, flat, rows[start : start + step].float())
        return sums
    for start in range(0, n, step):
        part = source.narrow(axis, start, min(step, n - start))
        sums.index_add_(axis, flat[start : start + step], part.float())
    return sums


def sparse_scatter_add(
    grad: torch.Tensor, index: torch.Tensor, axis: int, size: int
) -> torch.Tensor:
    """:func:`scatter_add` as a ``torch.sparse_coo`` tensor holding only the gathered slices.

    Axis 0: the sparse indices are ``index`` flattened, the values ``grad`` with the index's
    dimensions as one, uncoalesced (as ``nn.Embedding(sparse=True)`` gives them). Axis k > 0:
    a hybrid tensor whose sparse dimensions are the axes up to k and whose dense part is the
    rest. float16 and bfloat16 slices of one index are summed in float32 and rounded once,
    as :func:`scatter_add` does (a sparse tensor would add them in half precision), so those
    come coalesced. Built from differentiable operations: a second backward runs through it.
    """
    k = index.ndim
    flat = (index if k == 1 else index.reshape(-1)).long()  # sparse indices are int64
    lead, tail = grad.shape[:axis], grad.shape[axis + k :]
    values = grad.reshape(*lead, flat.shape[0], *tail)
    coalesced = False
    if grad.dtype in HALF:
        flat, values = _distinct_sums(values, flat, axis)
        coalesced = True
    pre, n = math.prod(lead), flat.shape[0]
    values = values.reshape(pre * n, *tail)
    if axis == 0:
        coords = flat[None]
    else:  # each leading position once per index, in row-major order (so still sorted)
        rows = torch.arange(pre, device=flat.device).repeat_interleave(n)
        coords = torch.stack([*torch.unravel_index(rows, tuple(lead)), flat.repeat(pre)])
    # No invariant check: coords are in range by construction. (Dynamo cannot trace this
    # constructor; a compiled call runs the sparse gather eagerly.)
    return torch.sparse_coo_tensor(
        coords, values, (*lead, size, *tail), check_invariants=False, is_coalesced=coalesced
    )


def constant_index(values: Any, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Python ints of ``shape`` as an int64 tensor of the graph being traced.

    The fake tensors that trace a graph hold one value made by ``torch.tensor`` as a constant,
    and evaluate an assert on it while tracing: a bad value would fail there, in PyTorch's
    words, not in the graph as any other index does. ``torch.full`` makes no such constant.
    """
    if math.prod(shape) == 1:
        while type(values) is not int:
            values = values[0]
        return torch.full(shape, values, dtype=torch.int64, device=device)
    return torch.tensor(values, dtype=torch.int64, device=device)


def wrap(index: torch.Tensor, size: int) -> torch.Tensor:
    """A checked ``index`` (every value in [-size, size)) with negatives moved into [0, size)."""
    if plain_eager() and size <= INDEX_MAX[index.dtype]:
        return torch.remainder(index, size)  # one kernel; exact on checked values only
    return wrap_unchecked(index, size)


def wrap_unchecked(index: torch.Tensor, size: int) -> torch.Tensor:
    """``index`` with [-size, -1] moved up by ``size``: any value outside [-size, size) stays
    outside [0, size), for a kernel or an assert to refuse."""
    return torch.where(index < 0, index + size, index)
