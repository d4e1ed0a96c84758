"""NumPy Gather: ``ndarray.take`` or fancy indexing forward and a scatter-add VJP, both
planned by :mod:`gatherx._strategy`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _errors, _rules
from .._indices import PYTHON_TYPES, host_indices, plain_ndarray
from .._strategy import (
    NUMPY_OUT_AS_GIVEN_INDICES,
    half_grad_plan,
    numpy_forward_plan,
    numpy_grad_plan,
    numpy_grad_small,
    numpy_out_plan,
    numpy_scalar_plan,
)
from .base import Backend, OutWriter
from .host_sums import add_at

#: The formulations of the forward, named as :func:`gatherx._strategy.numpy_forward_plan`
#: returns them.
FORWARD_PLANS = ("raise", "wrap", "rows1d", "doubled", "fancy")
#: The formulations of gather_grad, named as :func:`gatherx._strategy.numpy_grad_plan` returns them.
GRAD_PLANS = ("add.at", "rows", "elements", "columns")
#: Gradient dtypes the ``columns`` plan sums (in float64, by ``np.bincount``).
_REAL_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
#: Occurrence rounds of the row fix-up before np.add.at takes the rest of a repeated index.
_ROUNDS = 8
#: Positions per block of the element plan and of ``out=``'s ``blocks``: 256 KiB of intp,
#: cache-sized.
_BLOCK_POSITIONS = 1 << 15
#: Bytes of the gradient's slices the row plan's fix-up copies at a time.
_ROW_BLOCK_BYTES = 1 << 20

# The fast paths decide, by identity and set tests, the data dtypes every opset from
# Gather-11 on accepts and that need no further look (strings take the flow); bfloat16 is
# ml_dtypes', not NumPy's (a name test, made only where the set test fails).
_FAST_DATA_DTYPES = frozenset(
    np.dtype(name) for name in _rules.data_dtypes(_rules.NEGATIVE_INDICES_SINCE) - {"string"}
)
_FAST_INDEX_DTYPES = frozenset(np.dtype(name) for name in _rules.INDEX_DTYPES)
_FAST_GRAD_DTYPES = frozenset(np.dtype(name) for name in _rules.GRAD_DTYPES - {"bfloat16"})
_HALF = frozenset(np.dtype(name) for name in _rules.HALF_DTYPES - {"bfloat16"})


def _bfloat16(dtype: np.dtype[Any]) -> bool:
    return _rules.dtype_name(dtype) == "bfloat16"


def _fast_data(dtype: np.dtype[Any], opset: int) -> bool:
    """Whether the fast paths take data of ``dtype`` in a plain call at ``opset``: bfloat16
    from Gather-13 on."""
    return dtype in _FAST_DATA_DTYPES or (opset >= _rules.BFLOAT16_SINCE and _bfloat16(dtype))


def _plain_host(indices: Any, fn: str) -> np.ndarray | None:
    """The fast paths' index: an int32/int64 ndarray in native byte order, given or parsed
    from Python ints by the flow's own rules (and errors), or None for the flow to read."""
    host = host_indices(indices, fn) if type(indices) in PYTHON_TYPES else indices
    if type(host) is np.ndarray and host.dtype in _FAST_INDEX_DTYPES and host.dtype.isnative:
        return host
    return None


_MAX_RANK = _rules.NUMPY_MAX_RANK


def _overlaps_itself(out: np.ndarray) -> bool:
    # (the contiguous test first: the common out= needs no shape or strides read)
    contiguous = out.flags.c_contiguous
    return not contiguous and _rules.overlaps_itself(out.shape, out.strides, out.itemsize)


class NumpyBackend(Backend):
    name = "numpy"
    max_rank = _MAX_RANK

    # The fast paths read Python indices only once the data, axis, opset (and out) passed
    # their tests: an error then is the one the flow, which checks those first, would raise.

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        # Small gathers are dominated by Python overhead: the common case is decided in a few
        # identity and set tests. On non-empty data every plan checks every index against
        # exactly [-s, s-1], Gather-11's range, and raises IndexError for any outside it;
        # the flow then reports what it refuses.
        if (
            type(data) is np.ndarray
            and _rules.plain_call(axis, opset, data.ndim)
            and _fast_data(data.dtype, opset)
            and data.size
        ):
            host = _plain_host(indices, "gather")
            if host is not None and _rules.rank_fits(data.ndim - 1 + host.ndim, _MAX_RANK):
                try:
                    return take_by_plan(None, data, host, axis % data.ndim)
                except IndexError:
                    pass
        return super().gather(data, indices, axis, opset)

    def gather_grad(
        self, shape: Any, indices: Any, grad: Any, axis: Any, sparse: bool = False
    ) -> Any:
        # As in gather: the common call decided in a few identity tests, by the same rules
        # (the index checked and made non-negative by the flow's host rule); the flow takes
        # every other call, and reports every refusal.
        shape = _rules.check_shape(shape)  # the flow's first check
        if (
            type(grad) is np.ndarray
            and _rules.plain_call(axis, _rules.GRAD_OPSET, len(shape))
            and (grad.dtype in _FAST_GRAD_DTYPES or _bfloat16(grad.dtype))
            and not sparse
            and _rules.rank_fits(len(shape), _MAX_RANK)
        ):
            host = _plain_host(indices, "gather_grad")
            ax = axis % len(shape)
            if host is not None and grad.shape == _rules.output_shape(shape, host.shape, ax):
                size = shape[ax]
                # summed in float32: float16, and bfloat16 (the one dtype not in the set)
                half = grad.dtype in _HALF or grad.dtype not in _FAST_GRAD_DTYPES
                if numpy_grad_small(grad.size) and not half:
                    # np.add.at reads in-range negative positions itself: checked, as given
                    if not host.size or not _rules.out_of_range(
                        *_rules.host_extremes(host), size, _rules.GRAD_OPSET
                    ):
                        return _add_at(shape, host, grad, ax)
                else:
                    index = _rules.host_wrapped(host, size, _rules.GRAD_OPSET)
                    if index is not None:  # else the flow reports the first bad index
                        return grad_by_plan(None, shape, index, grad, ax)
        return super().gather_grad(shape, indices, grad, axis, sparse)

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        return plain_ndarray(x, fn, role) if isinstance(x, np.ndarray) else np.asarray(x)

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        return host

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        # Without a branch: np.where's would be mispredicted on random signs (4x slower).
        return _non_negative(index, size) if low < 0 else index

    def take(self, data: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
        return take_by_plan(None, data, index, axis)

    def scatter_add(
        self, shape: tuple[int, ...], index: np.ndarray, grad: np.ndarray, axis: int
    ) -> np.ndarray:
        return grad_by_plan(None, shape, index, grad, axis)

    def out_writer(self) -> OutWriter:
        return _OUT

    def gather_out(
        self, data: Any, indices: Any, axis: Any, opset: Any, out: Any, writer: Any = None
    ) -> Any:
        # As in gather: the common call decided in a few identity tests, by the same rules
        # (np.may_share_memory is the flow's overlap test: byte bounds); the flow takes
        # every other call, and reports every refusal.
        if (
            type(data) is np.ndarray
            and type(out) is np.ndarray
            and _rules.plain_call(axis, opset, data.ndim)
            and _fast_data(data.dtype, opset)
            and out.dtype == data.dtype
            and out.flags.writeable
            and not _overlaps_itself(out)
        ):
            host = _plain_host(indices, "gather")
            ax = axis % data.ndim
            shape = data.shape
            if (
                host is not None
                and out.shape == (*shape[:ax], *host.shape, *shape[ax + 1 :])
                and not np.may_share_memory(out, data)
                and not np.may_share_memory(out, host)
                # (an empty index: nothing to check or write)
                and (not host.size or _OUT.take_checked(data, host, ax, out, opset))
            ):
                return out
        return super().gather_out(data, indices, axis, opset, out, writer)


class _NumpyOut(OutWriter):
    """``out=`` for NumPy: ``ndarray.take(out=)`` in mode "wrap", after gatherx's own check
    (mode "raise" copies ``out`` first, so that an error leaves it as it was: 2x slower);
    where the forward's plan is fancy indexing, a result no larger than the data, copied."""

    def accept(self, data: np.ndarray, out: Any, fn: str) -> np.ndarray:
        if not isinstance(out, np.ndarray):
            raise _errors.out_type(fn, out, "numpy.ndarray")
        target = plain_ndarray(out, fn, "out")
        if not target.flags.writeable:
            raise _errors.out_read_only(fn)
        if _overlaps_itself(target):
            raise _errors.out_self_overlap(fn)
        return target

    def take_into(
        self, data: np.ndarray, index: np.ndarray, axis: int, out: np.ndarray, low: int = -1
    ) -> None:
        """:meth:`OutWriter.take_into`; ``low``: the index's minimum, where it was read."""
        if out.size:
            self._write(data, index, axis, out, low, _out_plan(data, index, axis, out))

    def take_checked(
        self, data: np.ndarray, index: np.ndarray, axis: int, out: np.ndarray, opset: int
    ) -> bool:
        """:meth:`take_into` after the index's check (opset >= 11), for a non-empty index,
        in the fewest passes over it; False, with nothing written, if an index lies outside
        the range."""
        size = data.shape[axis]
        plan = _out_plan(data, index, axis, out)
        if plan == "doubled":
            shifted = _rules.host_shifted(index, size, opset)
            if shifted is None:
                return False
            doubled_take(data, shifted, axis, out)
        elif plan == "blocks" or index.size <= NUMPY_OUT_AS_GIVEN_INDICES:
            # the extremes (nothing allocated), then as take_into decides
            low, high = _rules.host_extremes(index)
            if _rules.out_of_range(low, high, size, opset):
                return False
            self._write(data, index, axis, out, low, plan)
        else:
            wrapped = _rules.host_wrapped(index, size, opset)  # three passes, not five
            if wrapped is None:
                return False
            data.take(wrapped, axis, out=out, mode="wrap")
        return True

    def _write(
        self, data: np.ndarray, index: np.ndarray, axis: int, out: np.ndarray, low: int, plan: str
    ) -> None:
        """A checked ``index`` (minimum ``low``, -1 if unread) written by ``plan``."""
        if plan == "fancy":  # non-contiguous data read where it lies, then copied
            np.copyto(out, data[(slice(None),) * axis + (index,)])
            return
        # mode "wrap" reads a negative index as counted from the end; its per-index branch
        # costs only on many indices of both signs. On one slice it copies a strided column
        # 2x faster than np.copyto (docs/performance_details.md).
        if low >= 0 or index.ndim == 0:
            data.take(index, axis, out=out, mode="wrap")
        elif plan == "blocks":
            _take_blocks(data, index, axis, out)
        elif plan == "doubled":
            doubled_take(data, np.add(index, data.shape[axis], dtype=np.intp), axis, out)
        elif plan == "raise" and index.size <= NUMPY_OUT_AS_GIVEN_INDICES:
            # few indices: mode "wrap" takes "raise"'s branch on the sign, without its copy
            data.take(index, axis, out=out, mode="wrap")
        else:
            data.take(_non_negative(index, data.shape[axis]), axis, out=out, mode="wrap")


_OUT = OUT_WRITER = _NumpyOut()


def _canonical(data: np.ndarray, axis: int) -> tuple[int, int, int]:
    """``data``'s shape as (pre, size, post) around ``axis``, the view the plans name."""
    shape = data.shape
    size, post = shape[axis], math.prod(shape[axis + 1 :])
    pre = data.size // (size * post) if size * post else math.prod(shape[:axis])
    return pre, size, post


def _out_plan(data: np.ndarray, index: np.ndarray, axis: int, out: np.ndarray) -> str:
    """:func:`gatherx._strategy.numpy_out_plan` for these arrays."""
    pre, size, post = _canonical(data, axis)
    return numpy_out_plan(
        pre, size, index.size, post, data.itemsize, data.flags.c_contiguous,
        index.ndim == 0, not data.dtype.hasobject, out.flags.c_contiguous,
    )  # fmt: skip


def _take_blocks(data: np.ndarray, index: np.ndarray, axis: int, out: np.ndarray) -> None:
    """``data`` (one outer row) gathered along ``axis`` at a checked ``index`` into a
    C-contiguous ``out``, ``_BLOCK_POSITIONS`` positions at a time: each block made
    non-negative on its own, where a wrapped copy of the whole index would be a fresh
    mapping the kernel zero-fills on every call."""
    size, post = data.shape[axis], math.prod(data.shape[axis + 1 :])
    rows = np.ascontiguousarray(data).reshape(size, post)  # (as ndarray.take copies it: once)
    flat = index.reshape(-1)
    into = out.reshape(flat.size, post)
    for start in range(0, flat.size, _BLOCK_POSITIONS):
        stop = start + _BLOCK_POSITIONS
        rows.take(_non_negative(flat[start:stop], size), 0, out=into[start:stop], mode="wrap")


def doubled_take(
    data: np.ndarray, shifted: np.ndarray, axis: int, out: np.ndarray | None = None
) -> np.ndarray:
    """``data`` (one outer row: ``pre == 1``) gathered along ``axis``, into ``out`` if
    given, from its rows twice over at ``shifted``: indices in [-s, s-1] plus s, all in
    [0, 2s-1] (:func:`gatherx._rules.host_shifted` checks and shifts them in one pass over
    the index and its maximum, where a check of its extremes and a wrap take four)."""
    twice = np.concatenate((data, data), axis=axis, dtype=data.dtype)  # byte order kept
    return twice.take(shifted, axis, out=out, mode="wrap")


def take_by_plan(plan: str | None, data: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """``data`` gathered along ``axis`` at unchecked ``index`` by the formulation ``plan``
    (one of :data:`FORWARD_PLANS`), or by the one :func:`gatherx._strategy.numpy_forward_plan`
    picks if None.

    On non-empty data every plan raises IndexError if an index lies outside [-s, s-1] and
    otherwise gives ``np.take``'s result, an array of the data's dtype (rank 0 included).
    The output is the one array of its size allocated: no plan builds an index of the
    output's size, and none copies the data but ``ndarray.take`` on non-contiguous data,
    which the automatic choice gives only where the copy costs less than fancy indexing's
    steps (:func:`gatherx._strategy.numpy_forward_plan`).
    """
    if index.ndim == 0 and data.ndim == 1:
        # A scalar comes back here, and a 0-d array of it may change its dtype (objects,
        # byte order); Gather's output is an array of the data's dtype. One element: a copy
        # of the 0-d basic slice (ndarray.take would copy non-contiguous data whole first),
        # with no plan to look up; basic indexing refuses a value outside [-s, s-1] with
        # IndexError, as plans do.
        if plan is None:
            return data[int(index), ...].copy()
        return take_by_plan(plan, data, index.reshape(1), 0).reshape(())
    shape = data.shape
    if index.size == 0:  # nothing to read (ndarray.take would still visit every outer row)
        return np.empty(_rules.output_shape(shape, index.shape, axis), data.dtype)
    if plan is None:
        pre, size, post = _canonical(data, axis)
        if index.ndim == 0 and numpy_scalar_plan(pre, post * data.itemsize) == "slice_copy":
            # basic indexing refuses a value outside [-s, s-1] with IndexError, as plans do
            return data[(slice(None),) * axis + (int(index),)].copy()
        plan = numpy_forward_plan(
            pre, size, index.size, post, data.itemsize, data.flags.c_contiguous
        )
    if plan == "raise":
        # The method skips np.take's Python wrapper (~0.8 us).
        return data.take(index, axis)
    if plan not in FORWARD_PLANS:
        msg = f"unknown gather plan {plan!r}; known: {', '.join(FORWARD_PLANS)}"
        raise ValueError(msg)
    if plan == "fancy":
        key: tuple[Any, ...] = (*(slice(None),) * axis, index)
        return data[key]
    size, post = shape[axis], math.prod(shape[axis + 1 :])
    if plan in ("rows1d", "doubled"):
        if math.prod(shape[:axis]) != 1 or data.dtype.hasobject:
            return data.take(index, axis)  # views that need one outer row of plain bytes
        data = np.ascontiguousarray(data)  # as ndarray.take copies non-contiguous data
    if plan == "rows1d":
        rows = data.reshape(size, post).view(np.dtype((np.void, post * data.itemsize)))
        out = rows.reshape(size)[index].view(data.dtype)
        return out.reshape((*shape[:axis], *index.shape, *shape[axis + 1 :]))
    # The index checked and made non-negative (or shifted, for the rows twice over) in the
    # fewest passes over it, by the same rules as out=.
    rule = _rules.host_shifted if plan == "doubled" else _rules.host_wrapped
    checked = rule(index, size, _rules.NEGATIVE_INDICES_SINCE)
    if checked is None:
        raise IndexError(_OUT_OF_RANGE)
    if plan == "doubled":
        return doubled_take(data, checked, axis)
    return data.take(checked, axis, mode="wrap")


#: The message of a plan's IndexError; the caller's flow reports the index and its position.
_OUT_OF_RANGE = "index out of range"


def _non_negative(index: np.ndarray, size: int) -> np.ndarray:
    """In-range ``index`` plus ``size`` where negative, computed without a branch."""
    flat = index.astype(np.intp, copy=False).reshape(-1)  # 1-D: ufuncs return arrays
    out = np.right_shift(flat, flat.itemsize * 8 - 1)  # -1 where negative, else 0
    np.bitwise_and(out, size, out=out)
    np.add(out, flat, out=out)
    return out.reshape(index.shape)


def grad_by_plan(
    plan: str | None, shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int
) -> np.ndarray:
    """gather_grad at non-negative, in-range ``idx`` by the formulation ``plan`` (one of
    :data:`GRAD_PLANS`), or by the one :func:`gatherx._strategy.numpy_grad_plan` picks if None.

    ``add.at``, ``rows`` and ``elements`` add in the order of occurrence in the gradient's
    dtype, as ``np.add.at`` does, but half precision in float32 (rounded once at the end)
    unless no slot takes two slices (few indices, :func:`gatherx._strategy.half_grad_plan`);
    ``columns`` (real floating dtypes only) adds in that order in float64.
    """
    if plan is not None and plan not in GRAD_PLANS:
        msg = f"unknown gather_grad plan {plan!r}; known: {', '.join(GRAD_PLANS)}"
        raise ValueError(msg)
    size = shape[axis]
    flat = idx.reshape(-1)
    pre, n, post = math.prod(shape[:axis]), flat.size, math.prod(shape[axis + 1 :])
    kind = _rules.dtype_name(grad.dtype)
    floating = kind in _REAL_FLOATS
    if plan == "columns" and not floating:
        msg = f"the columns plan sums real floating gradients, not {kind}"
        raise ValueError(msg)
    repeats, counted = None, False
    if plan is None:
        plan = numpy_grad_plan(pre, size, n, post, None, floating)
        if plan == "":  # the choice depends on how many indices repeat
            repeats, counted = _repeats(flat, size), True
            share = 0.0 if repeats is None else repeats[0].size / n
            plan = numpy_grad_plan(pre, size, n, post, share, floating)
    if plan == "columns" and n and pre * post:
        return _add_columns(shape, pre, size, post, flat, grad)
    if kind in _rules.HALF_DTYPES:
        # Half precision would round every partial sum: add in float32, round once.
        if plan in ("rows", "elements") and n and pre * post:
            return _half_sums(plan, shape, pre, size, post, flat, grad)
        repeated = _rules.may_repeat(n, flat.tolist)
        half = half_grad_plan("numpy", pre * size * post, n, repeated) if pre * post else ""
        if half == "distinct":
            return _half_distinct(shape, pre, size, post, flat, grad)
        if half != "as_given":
            wide = grad.astype(np.float32)
            return grad_by_plan(plan, shape, idx, wide, axis).astype(grad.dtype)
    if plan in ("add.at", "columns") or n == 0 or pre * post == 0:
        return _add_at(shape, idx, grad, axis)
    out3 = np.zeros((pre, size, post), dtype=grad.dtype)
    g3 = grad.reshape(pre, n, post)
    if plan == "rows":
        _scatter_rows(out3, flat, g3, repeats if counted else _repeats(flat, size))
    else:
        _add_elements(out3, flat, g3)
    return out3.reshape(shape)


def _add_at(shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int) -> np.ndarray:
    """Zeros of ``shape`` with ``grad`` added at in-range ``idx`` along ``axis`` by
    ``np.add.at``, in the gradient's dtype (negative indices count from the end)."""
    out = np.zeros(shape, dtype=grad.dtype)
    if grad.size:
        add_at(out, idx, grad, axis)
    return out


def _half_sums(
    plan: str,
    shape: tuple[int, ...],
    pre: int,
    size: int,
    post: int,
    flat: np.ndarray,
    grad: np.ndarray,
) -> np.ndarray:
    """The ``rows`` or ``elements`` plan for half precision, which NumPy converts from and to
    float32 at 2-5 ns an element: slices at indices that occur once are written as they are
    (exact); only those of repeated indices are converted and summed in float32 (in order of
    occurrence, by the float32 plan for their shape), each sum rounded once: a copy of the
    slices that occur once, a float32 copy of the others and their float32 sums are its extra
    memory, 4-5 times the gradient's size where most indices repeat."""
    out3 = np.zeros((pre, size, post), dtype=grad.dtype)
    g3 = grad.reshape(pre, flat.size, post)
    repeats = _repeats(flat, size)
    if repeats is None:
        _write(plan, out3, flat, g3)
        return out3.reshape(shape)
    members = repeats[0]  # grouped by index value, each group in order of occurrence
    once = np.ones(flat.size, dtype=bool)
    once[members] = False
    singles = np.flatnonzero(once)
    if singles.size:
        _write(plan, out3, flat[singles], g3.take(singles, axis=1))
    values = flat[members]
    first = np.concatenate(([True], values[1:] != values[:-1]))
    compact = np.cumsum(first) - 1  # each member's slot among the repeated values
    slots = values[first]
    _write(plan, out3, slots, _sums_rounded_once(g3, members, compact, slots.size))
    return out3.reshape(shape)


def _half_distinct(
    shape: tuple[int, ...], pre: int, size: int, post: int, flat: np.ndarray, grad: np.ndarray
) -> np.ndarray:
    """Half precision where the table has more slices than the gradient: each distinct
    index's slices summed in float32 (in order of occurrence), rounded once and written into
    zeros, so the float32 work is the gradient's size, not the table's."""
    slots, slot = np.unique(flat, return_inverse=True)
    g3 = grad.reshape(pre, flat.size, post)
    out3 = np.zeros((pre, size, post), dtype=grad.dtype)
    out3[:, slots, :] = _sums_rounded_once(g3, None, slot.reshape(-1), slots.size)
    return out3.reshape(shape)


def _sums_rounded_once(
    g3: np.ndarray, members: np.ndarray | None, at: np.ndarray, slots: int
) -> np.ndarray:
    """The sums of the half-precision slices of ``g3`` (pre, n, post) at ``members`` (all
    if None) into ``slots`` slots at ``at``, each rounded once into their dtype: in float64
    by the ``columns`` plan where it takes them (not rounded to float32 first), else in
    float32 by the plan for their shape (the half copy of the members freed first)."""
    part = g3 if members is None else g3.take(members, axis=1)
    pre, n, post = part.shape
    shape = (pre, slots, post)
    plan = numpy_grad_plan(pre, slots, n, post, None, True)  # ("": count the repeats first)
    if plan == "columns":
        return _add_columns(shape, pre, slots, post, at, part)
    wide = part.astype(np.float32)
    del part
    return grad_by_plan(plan or None, shape, at, wide, 1).astype(g3.dtype)


def _write(plan: str, out3: np.ndarray, flat: np.ndarray, g3: np.ndarray) -> None:
    """``out3[:, flat, :] = g3`` for distinct ``flat``, by the fastest write for ``plan``'s rows."""
    if plan == "elements":  # short rows: 1-D fancy assignment, many times a strided one's speed
        _put_elements(out3, flat, g3)
    else:
        out3[:, flat, :] = g3


def _add_columns(
    shape: tuple[int, ...], pre: int, size: int, post: int, flat: np.ndarray, grad: np.ndarray
) -> np.ndarray:
    """Few columns of long index runs: one float64 ``np.bincount`` per (outer row, column),
    each summing in the order of occurrence, rounded once into the gradient's dtype."""
    out3 = np.empty((pre, size, post), dtype=grad.dtype)
    g3 = grad.reshape(pre, flat.size, post)
    for p in range(pre):
        for j in range(post):
            out3[p, :, j] = np.bincount(flat, weights=g3[p, :, j], minlength=size)
    bad = np.asarray(~np.isfinite(out3).all(axis=(0, 2)))  # the slots summed to inf or NaN
    if bad.any():
        _report_sums(bad, flat, g3)
    return out3.reshape(shape)


def _report_sums(bad: np.ndarray, flat: np.ndarray, g3: np.ndarray) -> None:
    """``np.bincount`` reports no overflow or invalid float64 sum to NumPy's error state
    (the cast into a narrower dtype reports its own overflow): the sums into the ``bad``
    slots, added again in float64 by ``np.add.at`` into scratch zeros, report them as
    ``np.errstate`` says, as every other plan's sums do. Nothing of them is kept."""
    at = np.flatnonzero(bad[flat])
    slots = np.cumsum(bad) - 1  # each bad slot's place among them
    scratch = np.zeros((g3.shape[0], int(slots[-1]) + 1, g3.shape[2]))
    key: tuple[Any, ...] = (slice(None), slots[flat[at]])
    np.add.at(scratch, key, g3[:, at, :].astype(np.float64))


def _repeats(flat: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Positions in ``flat`` of indices that occur more than once, in order of occurrence,
    with each one's occurrence number (0 for the first); None if all indices differ.
    """
    if size <= 16 * flat.size:  # a count per slot is cheaper than sorting the indices
        counts = np.bincount(flat, minlength=size)
        if counts.max() < 2:
            return None
        members = np.flatnonzero(counts[flat] > 1)
        order = members[np.argsort(flat[members], kind="stable")]
    else:
        order = np.argsort(flat, kind="stable")
        keys = flat[order]
        same = keys[1:] == keys[:-1]
        if not same.any():
            return None
        keep = np.zeros(flat.size, dtype=bool)
        keep[1:] |= same
        keep[:-1] |= same
        order = order[keep]
    keys = flat[order]
    first = np.concatenate(([True], keys[1:] != keys[:-1]))
    starts = np.flatnonzero(first)
    rank = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    return order, rank


def _scatter_rows(
    out3: np.ndarray,
    flat: np.ndarray,
    g3: np.ndarray,
    repeats: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """Whole ``post``-long rows: one scatter of every slice, then repeated indices re-summed.

    Where an index repeats, the bulk scatter leaves one of its slices; the fix-up writes
    the first again and adds the others one occurrence number at a time (a vectorised
    round each, no index twice in a round), the rare long tail by ``np.add.at``. The sums
    run in order of occurrence, as ``np.add.at`` would add them.
    """
    out3[:, flat, :] = g3
    if repeats is None:
        return
    members, rank = repeats
    # the slices a round reads are copied: a block of them at a time bounds that copy
    step = max(1, _ROW_BLOCK_BYTES // (g3.shape[0] * g3.shape[2] * g3.itemsize))
    for k in range(min(int(rank.max()) + 1, _ROUNDS)):
        round_k = members[rank == k]
        for start in range(0, round_k.size, step):
            chosen = round_k[start : start + step]
            if k == 0:
                first = g3[:, chosen, :]
                first += 0  # (a -0.0 becomes the +0.0 a sum into zeros gives)
                out3[:, flat[chosen], :] = first
            else:
                out3[:, flat[chosen], :] += g3[:, chosen, :]
    tail = np.sort(members[rank >= _ROUNDS])
    for start in range(0, tail.size, step):  # (in order of occurrence, block after block)
        part = tail[start : start + step]
        key: tuple[Any, ...] = (slice(None), flat[part])
        np.add.at(out3, key, g3[:, part, :])


def _add_elements(out3: np.ndarray, flat: np.ndarray, g3: np.ndarray) -> None:
    """Short rows: the 1-D ``np.add.at`` loop at flat element positions."""
    out1 = out3.reshape(-1)
    for positions, values in _element_blocks(out3.shape, flat, g3):
        np.add.at(out1, positions, values)


def _put_elements(out3: np.ndarray, flat: np.ndarray, g3: np.ndarray) -> None:
    """Short rows: each element of ``g3`` written at its flat position (distinct ``flat``)."""
    out1 = out3.reshape(-1)
    for positions, values in _element_blocks(out3.shape, flat, g3):
        out1[positions] = values


def _element_blocks(
    shape3: tuple[int, int, int], flat: np.ndarray, g3: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Flat element positions in the (pre, size, post) result and their gradient values,
    in order of occurrence, ``_BLOCK_POSITIONS`` at most a block so the positions stay in
    cache: whole outer rows at a time, or part of one where a row holds more."""
    pre, size, post = shape3
    n = flat.size
    g2 = g3.reshape(pre, n * post)
    columns = np.arange(post, dtype=np.intp)
    if n * post > _BLOCK_POSITIONS:  # a part of one outer row a block
        step = max(1, _BLOCK_POSITIONS // post)
        for i0 in range(0, n, step):  # (each slot's sums still in order of occurrence)
            part = flat[i0 : i0 + step].astype(np.intp) * post
            within = (part[:, None] + columns).reshape(-1)  # (a short inner loop: made once)
            buf = np.empty_like(within)
            for r in range(pre):
                np.add(within, r * size * post, out=buf)
                yield buf, g2[r, i0 * post : (i0 + step) * post]
        return
    within = ((flat.astype(np.intp) * post)[:, None] + columns).reshape(-1)
    rows = _BLOCK_POSITIONS // (n * post)
    offsets = np.arange(min(rows, pre), dtype=np.intp)[:, None] * (size * post) + within
    buf = np.empty_like(offsets)
    for r0 in range(0, pre, rows):
        k = min(rows, pre - r0)
        np.add(offsets[:k], r0 * size * post, out=buf[:k])
        yield buf[:k].reshape(-1), g2[r0 : r0 + k].reshape(-1)


#: The one instance the dispatch uses.
BACKEND = NumpyBackend()
