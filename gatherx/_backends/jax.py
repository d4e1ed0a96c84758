"""JAX Gather: jitted ``lax.gather``/``lax.scatter_add`` in FILL_OR_DROP mode, so traced bad
indices are never wrapped or clamped, and JAX's own rules differentiate both."""

from __future__ import annotations

# Why no jax.custom_jvp: lax.gather's native rules already give every transform, each
# checked by tests/test_jax_transforms.py -- jvp (gather of the tangent, fill 0), transpose
# (scatter-add in the same FILL_OR_DROP mode, so reverse mode, linear_transpose, jacrev and
# hessian come from it and dropped reads get no gradient) and batching (vmap over data,
# indices or both). A custom rule would only add a layer to get wrong. The one primitive of
# our own, _given_p, is an identity on the index that exists for checkify alone (below).
import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import checkify as _checkify  # checkify has no public API for primitive rules
from jax._src.array import ArrayImpl as _CONCRETE  # concrete arrays: one type test, no ABC
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from .. import _errors, _policy, _rules
from .._indices import native_order, plain_ndarray
from .._strategy import (
    JAX_HALF_SUMS_AS_BITS,
    jax_gather_mode,
    jax_half_grad_plan,
    jax_index_plan,
    jax_layout_plan,
)
from . import jax_sharding as _jax_sharding
from .base import Backend

_MODES = {
    "fill_or_drop": lax.GatherScatterMode.FILL_OR_DROP,
    "promise_in_bounds": lax.GatherScatterMode.PROMISE_IN_BOUNDS,
}


def _dnums(axis: int, index_ndim: int, rank: int) -> tuple[Any, Any]:
    """Gather and scatter dimension numbers for ONNX Gather of rank-``rank`` data on ``axis``."""
    window = (*range(axis), *range(axis + index_ndim, rank + index_ndim - 1))
    gather = lax.GatherDimensionNumbers(
        offset_dims=window, collapsed_slice_dims=(axis,), start_index_map=(axis,)
    )
    scatter = lax.ScatterDimensionNumbers(
        update_window_dims=window,
        inserted_window_dims=(axis,),
        scatter_dims_to_operand_dims=(axis,),
    )
    return gather, scatter


def _empty_axis(data: jax.Array, index: jax.Array, axis: int) -> tuple[jax.Array, jax.Array]:
    """Data padded to one slot on its empty ``axis`` and ``index`` moved off it.

    No index is valid on an empty axis, but ``lax.gather`` cannot slice it at all. Reading
    from a one-slot pad at indices kept outside [0, 0] still reads nothing (everything is
    filled), yet stays a real gather that checkify reports and JAX differentiates.
    """
    pad = [(0, 0)] * data.ndim
    pad[axis] = (0, 1)
    return jnp.pad(data, pad), jnp.where(index >= 0, index + 1, index)


def _take(data: jax.Array, index: jax.Array, axis: int, mode: str) -> jax.Array:
    """``data`` gathered along ``axis`` by the formulation _strategy.jax_index_plan picks."""
    checked = mode == "promise_in_bounds"
    held = data.dtype == _held_dtype(data.dtype)
    if jax_index_plan(index.ndim, checked, held) == "slice":

        def one() -> jax.Array:
            return lax.dynamic_index_in_dim(data, index, axis, keepdims=False)

        if checked:
            return one()
        # dynamic_index_in_dim clamps: a bad index reads the fill of a gather instead (a
        # constant: a gather in that branch would cost XLA the output's aliasing, 1.07-1.6x),
        # laid out as the slice (its sharding: Explicit meshes need the branches' equal)
        ok = (index >= 0) & (index < data.shape[axis])
        return lax.cond(ok, one, lambda: jnp.full_like(one(), _fill_value(data.dtype)))
    return _gather_op(data, index, axis, mode)


def _held_dtype(dtype: Any) -> Any:
    """The dtype JAX holds ``dtype`` in now: 32-bit for a 64-bit array made before
    ``jax_enable_x64`` was turned off (sums into zeros of it come out in that dtype)."""
    return jax.dtypes.canonicalize_dtype(dtype)


_FILLS: dict[Any, np.ndarray] = {}


def _fill_value(dtype: Any) -> np.ndarray:
    """What ``lax.gather`` in FILL_OR_DROP mode reads at a bad index (NaN, a dtype's extreme,
    True): taken from such a gather, not restated, run once per dtype outside any trace (in
    a traced program checkify would report that gather's index, and under ``vmap`` both
    branches of the cond run)."""
    value = _FILLS.get(dtype)
    if value is None:
        dnums = lax.GatherDimensionNumbers(
            offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)
        )
        # (a constant of gatherx's own: allowed under a caller's transfer guard, and a NaN
        # that is no caller's value under jax_debug_nans)
        with (
            jax.ensure_compile_time_eval(),
            jax.debug_nans(False),
            jax.debug_infs(False),
            jax.transfer_guard("allow"),
        ):
            one = jnp.zeros((1,), dtype)
            at = jnp.ones((1,), jnp.int32)
            read = lax.gather(one, at, dnums, (1,), mode=_MODES["fill_or_drop"])
            value = _FILLS[dtype] = np.asarray(read).reshape(())  # a 0-d host array
    return value


def _known(*counts: Any) -> bool:
    """Whether every one of ``counts`` is a number: under ``jax.export`` a shape may hold
    symbolic dimensions, whose value no plan can compare."""
    return all(isinstance(c, int) for c in counts)


def _layout(shape: tuple[Any, ...], axis: int, index: jax.Array) -> str:
    """_strategy.jax_layout_plan for data or a table of ``shape`` at ``index``: one plan for
    any size of a symbolic dimension (``jax.export``), planned as one of 2, a batch of
    several (its value cannot be compared), and a symbolic count as the axis's length."""
    sizes = tuple(d if _known(d) else 2 for d in shape)
    n = index.size
    return jax_layout_plan(sizes, axis, n if _known(n) else sizes[axis])


def _gather_op(data: jax.Array, index: jax.Array, axis: int, mode: str) -> jax.Array:
    """One ``lax.gather`` along ``axis``, in the layout _strategy.jax_layout_plan picks."""
    if _layout(data.shape, axis, index) == "axis_first":
        # Same forward (XLA fuses the transposes); its transpose scatters whole rows.
        k = index.ndim
        out = _gather_op(jnp.moveaxis(data, axis, 0), index, 0, mode)
        return jnp.moveaxis(out, tuple(range(k)), tuple(range(axis, axis + k)))
    dnums, _ = _dnums(axis, index.ndim, data.ndim)
    slice_sizes = (*data.shape[:axis], 1, *data.shape[axis + 1 :])
    return lax.gather(data, index[..., None], dnums, slice_sizes, mode=_MODES[mode])


def _lax_take(
    data: jax.Array,
    index: jax.Array,
    axis: int,
    mode: str,
    bounds: tuple[int, int] | None,
    shape: tuple[int, ...],
) -> jax.Array:
    """``data`` gathered along ``axis`` at ``index``; bad indices are filled
    (``mode="promise_in_bounds"`` and ``bounds=None`` only for indices checked on the host).

    This is ``jnp.take`` without its negative-index wrap, which would turn an index below
    ``-size`` into a valid one after our own normalisation. Everything from the checkify
    marker on runs here, inside the one sharding context of the gather (see
    :func:`_jax_sharding.gather`): checkify's error values must not cross into it.
    """
    index = _given(index, bounds, axis, shape, "gather")
    negative = bounds is None or bounds[0] < 0
    index = _in_range(index, data.shape[axis], negative, mode != "promise_in_bounds")
    if data.shape[axis] == 0:
        data, index, mode = (*_empty_axis(data, index, axis), "fill_or_drop")
    return _take(data, index, axis, mode)


def _in_range(index: jax.Array, size: int, negative: bool, unchecked: bool) -> jax.Array:
    """``index`` wrapped where negatives are valid; ``unchecked`` wide bad values made ``size``.

    ``lax.gather`` and ``lax.scatter_add`` narrow int64 indices to int32 before their own
    range mask when the operand fits, so 2**32 would read row 0: the mask comes first here,
    in the index's own dtype.
    """
    if negative:
        index = jnp.where(index < 0, index + size, index)
    if unchecked and index.dtype.itemsize > 4:
        index = jnp.where((index >= 0) & (index < size), index, size)
    return index


# -- checkify: the index as given ---------------------------------------------------------
# checkify's own gather and scatter checks see the index only after _in_range (negatives
# wrapped, wide bad values made ``size``) and report it in int32, so 2**32 + 1 on an axis of
# 5 would read "index 5" or "index 1". _given_p marks the traced index as given, before
# either; its checkify rule reports it in its own dtype. Everywhere else it is the identity:
# no HLO of its own, the aval (sharding included) kept, a zero tangent, batched as it is.
_given_p = Primitive("gatherx_given_index")
_given_p.def_impl(lambda index, **_: index)
_given_p.def_abstract_eval(lambda aval, **_: aval)
mlir.register_lowering(_given_p, lambda ctx, index, **_: [index])


def _given_batch(args: Any, dims: Any, **params: Any) -> tuple[Any, Any]:
    return _given_p.bind(*args, **params), dims[0]


def _given_jvp(primals: Any, tangents: Any, **params: Any) -> tuple[Any, Any]:
    out = _given_p.bind(*primals, **params)
    return out, ad.Zero(jax.typeof(out).to_tangent_aval())  # integer: a float0 zero


batching.primitive_batchers[_given_p] = _given_batch
ad.primitive_jvps[_given_p] = _given_jvp


class GivenIndexError(_checkify.OOBError):
    """checkify's out-of-bounds error (same text, same ``errors=`` set), with the index as
    the user gave it and in its own dtype, where checkify's own payload is int32."""

    def get_effect_type(self) -> Any:
        payload = jax.ShapeDtypeStruct((3,), self._payload.dtype)
        return _checkify.ErrorEffect(GivenIndexError, (payload,))


def _given_check(
    error: Any,
    enabled_errors: Any,
    index: Any,
    *,
    bounds: tuple[int, int],
    axis: int,
    shape: tuple[int, ...],
    op: str,
    context: Any = None,
) -> tuple[Any, Any]:
    if _checkify.OOBError not in enabled_errors or index.size == 0:
        return error, index
    flat = jnp.ravel(index)
    info = jnp.iinfo(index.dtype)  # bounds past the dtype's range exclude nothing
    low, high = max(bounds[0], info.min), min(bounds[1], info.max)
    bad = (flat < low) | (flat > high)
    payload = jnp.array([0, axis, shape[axis]], index.dtype).at[0].set(flat[jnp.argmax(bad)])
    oob = GivenIndexError(_checkify.get_traceback(), op, shape, payload)
    assert_func: Any = _checkify.assert_func
    if context is not None:
        assert_func = partial(assert_func, context)
    return assert_func(error, jnp.any(bad), oob), index


def _given_check_in(
    context: Any, error: Any, enabled_errors: Any, index: Any, **params: Any
) -> tuple[Any, Any]:
    """:func:`_given_check` as JAX 0.11.2 and later call a rule: after checkify's context,
    which numbers the errors of a trace."""
    return _given_check(error, enabled_errors, index, context=context, **params)


_checkify.error_checks[_given_p] = (
    _given_check_in if hasattr(_checkify, "CheckifyContext") else _given_check
)


def _given(
    index: jax.Array, bounds: tuple[int, int] | None, axis: int, shape: tuple[int, ...], op: str
) -> jax.Array:
    """``index`` marked for checkify against the inclusive ``bounds`` (None: host-checked).

    Bound in the same jitted kernel as the gather it guards, so that in checkify's cached
    traces this check always precedes (and so wins over) the gather's own.
    """
    if bounds is None:
        return index
    # (no parameter named "prim": remat policies take the primitive under that name)
    return _given_p.bind(index, bounds=bounds, axis=axis, shape=shape, op=op)


@partial(jax.jit, static_argnames=("axis", "bounds", "mode"))
def _gather(
    data: jax.Array, index: jax.Array, axis: int, bounds: tuple[int, int] | None, mode: str
) -> jax.Array:
    take = partial(_lax_take, axis=axis, mode=mode, bounds=bounds, shape=data.shape)
    return _jax_sharding.gather(take, data, index, axis)


def _lax_scatter_add(
    index: jax.Array,
    grad: jax.Array,
    shape: tuple[int, ...],
    axis: int,
    bounds: tuple[int, int] | None,
) -> jax.Array:
    """Zeros of ``shape`` plus ``grad`` at ``index``; bad indices' updates are dropped.

    An explicit scatter-add rather than jax.vjp of the gather: vjp has no cotangent for
    integer data (float0), while gather_grad accepts integer grads. JAX's own rules make it
    differentiable (jvp: itself on the tangent; transpose: a gather). As in
    :func:`_lax_take`, it runs whole inside the scatter's sharding context.
    """
    index = _given(index, bounds, axis, shape, "scatter_add")
    index = _in_range(index, shape[axis], bounds is None or bounds[0] < 0, True)
    if shape[axis] == 0:  # as in _empty_axis: every update is dropped, but lax needs a slot
        padded = (*shape[:axis], 1, *shape[axis + 1 :])
        out = _sum_into(jnp.where(index >= 0, index + 1, index), grad, padded, axis)
        return out[(slice(None),) * axis + (slice(0, 0),)]
    return _sum_into(index, grad, shape, axis)


def _sum_into(index: jax.Array, grad: jax.Array, shape: tuple[int, ...], axis: int) -> jax.Array:
    """Zeros of ``shape`` plus ``grad`` at ``index`` (bad positions dropped), half precision
    summed in float32 and rounded once, by the plan _strategy.jax_half_grad_plan picks."""
    if grad.dtype not in _HALF:
        return _add(index, grad, shape, axis)
    n, elements = index.size, math.prod(shape)
    plan = "float32"  # for a symbolic count, whose value no plan can compare
    if _known(n, elements):
        post = math.prod(shape[axis + 1 :])
        plan = jax_half_grad_plan(elements, n, not index.ndim, post, grad.size)
    if plan == "as_given":  # exact: each slot's sum is its one slice
        return _add(index, grad, shape, axis)
    if plan in ("distinct", "pairs"):
        # each distinct index's slices summed at the gradient's size, then added to zeros
        # once each; the sums at the other positions (pairs: a value seen before; unique:
        # its padding, slot 0, as one out of range would be an error to checkify) are
        # zeros, and adding +0.0 changes no sum
        slots = index.reshape(-1)
        if plan == "pairs":  # each index's slot: the first position holding its value
            first = jnp.where(
                slots[:, None] == slots[None, :], lax.iota(slots.dtype, n)[:, None], n
            )
            slot = jnp.min(first, axis=0)
        else:
            slots, slot = jnp.unique(slots, size=n, fill_value=0, return_inverse=True)
        rows = (*shape[:axis], n, *shape[axis + 1 :])
        sums = _add(slot.reshape(-1), grad.reshape(rows).astype(jnp.float32), rows, axis)
        if grad.dtype.name not in JAX_HALF_SUMS_AS_BITS:
            return _add(slots, sums.astype(grad.dtype), shape, axis)
        # one nonzero sum a slot: its bits added to zero bits are the sum (a sum of -0.0
        # made +0.0 first, as an addition into zeros gives)
        half = jnp.where(sums == 0, jnp.float32(0), sums).astype(grad.dtype)
        bits = _add(slots, lax.bitcast_convert_type(half, jnp.uint16), shape, axis)
        return lax.bitcast_convert_type(bits, grad.dtype)
    return _add(index, grad.astype(jnp.float32), shape, axis).astype(grad.dtype)


def _add(index: jax.Array, grad: jax.Array, shape: tuple[int, ...], axis: int) -> jax.Array:
    """One ``lax.scatter_add`` into zeros, in the layout _strategy.jax_layout_plan picks."""
    if _layout(shape, axis, index) == "axis_first":
        k = index.ndim
        moved = jnp.moveaxis(grad, tuple(range(axis, axis + k)), tuple(range(k)))
        front = (shape[axis], *shape[:axis], *shape[axis + 1 :])
        return jnp.moveaxis(_add(index, moved, front, 0), 0, axis)
    _, dnums = _dnums(axis, index.ndim, len(shape))
    zeros = jnp.zeros(shape, _held_dtype(grad.dtype))
    grad = grad.astype(zeros.dtype)
    return lax.scatter_add(zeros, index[..., None], grad, dnums, mode=_MODES["fill_or_drop"])


@partial(jax.jit, static_argnames=("shape", "axis", "bounds"))
def _gather_grad(
    shape: tuple[int, ...],
    index: jax.Array,
    grad: jax.Array,
    axis: int,
    bounds: tuple[int, int] | None,
) -> jax.Array:
    scatter = partial(_lax_scatter_add, shape=shape, axis=axis, bounds=bounds)
    return _jax_sharding.scatter_add(scatter, index, grad, axis)


_HALF = frozenset(np.dtype(jnp.dtype(name)) for name in _rules.HALF_DTYPES)
#: Zeros of a static shape and dtype: one cached kernel, where eager ``jnp.zeros`` dispatches
#: two primitives (33 us against 4 us for an empty result).
_zeros = jax.jit(jnp.zeros, static_argnames=("shape", "dtype"))
#: An empty gather's result: ``data``'s dtype, weakly typed where it is (as any gather's).
_empty_take = jax.jit(jnp.zeros_like, static_argnames=("shape",))


def _placed(out: jax.Array, like: Any, spec: Callable[[tuple[Any, ...]], Any]) -> jax.Array:
    """An empty result ``out``, which ``jax.jit`` makes on the default device (it reads no
    input), placed as the result of committed ``like`` (data or grad) would be: on its device,
    or on its mesh with ``spec`` of ``like``'s partition spec (the sharding rules)."""
    if type(like) is not _CONCRETE or not like.committed:
        return out
    sharding = like.sharding
    if isinstance(sharding, jax.sharding.NamedSharding):
        given = tuple(sharding.spec)  # (the array's own: Auto meshes keep none in its type)
        given += (None,) * (like.ndim - len(given))
        return jax.device_put(out, jax.sharding.NamedSharding(sharding.mesh, spec(given)))
    if len(sharding.device_set) == 1:
        return jax.device_put(out, next(iter(sharding.device_set)))
    return out  # (older JAX's pmap shardings: left where JAX makes it, as jnp.take does)


def _empty_gather(data: Any, index_shape: tuple[int, ...], axis: int) -> jax.Array:
    """The gather of ``data`` at an empty index: zeros laid out as any of its gathers."""
    out = _empty_take(data, shape=_rules.output_shape(data.shape, index_shape, axis))
    index_spec = (None,) * len(index_shape)  # an empty index: nothing to shard
    return _placed(out, data, lambda s: _jax_sharding.gather_spec(s, index_spec, axis))


def _empty_scatter(shape: tuple[int, ...], index_ndim: int, grad: Any, axis: int) -> jax.Array:
    """The scatter-add of ``grad`` at an empty index: zeros laid out as any of its sums."""
    spec = lambda s: _jax_sharding.scatter_spec(s, index_ndim, axis)  # noqa: E731
    return _placed(_zeros(shape, _held_dtype(grad.dtype)), grad, spec)


def _fast_dtypes(names: frozenset[str]) -> frozenset[np.dtype]:
    return frozenset(np.dtype(jnp.dtype(name)) for name in names - {"string"})


#: The eager path's data dtypes, of Gather-11 (index 0) and of Gather-13 (1, bfloat16 too).
_FAST_DATA_DTYPES = (
    _fast_dtypes(_rules.data_dtypes(_rules.NEGATIVE_INDICES_SINCE)),
    _fast_dtypes(_rules.data_dtypes(_rules.BFLOAT16_SINCE)),
)
_FAST_INDEX_DTYPES = frozenset(np.dtype(name) for name in _rules.INDEX_DTYPES)
_FAST_GRAD_DTYPES = (_fast_dtypes(_rules.GRAD_DTYPES),) * 2  # (one opset: the latest's)
_GRAD = _rules.GRAD_OPSET
#: The gather mode of host-checked indices.
_CHECKED_MODE = jax_gather_mode(indices_checked=True)
#: Reading an index on the host is a copy on an accelerator, a view on the CPU.
_CPU_ONLY = all(device.platform == "cpu" for device in jax.devices())
#: With one device, every array is on it: no placement to compare.
_ONE_DEVICE = len(jax.devices()) == 1


def _placed_alike(x: Any, index: Any) -> bool:
    """Whether JAX computes with ``x`` and ``index`` where they are: not both committed to
    different sets of devices (tracers and NumPy arrays have no placement of their own)."""
    if type(x) is not _CONCRETE or type(index) is not _CONCRETE:
        return True
    if not (x.committed and index.committed):  # an uncommitted array follows the other
        return True
    return bool(x.sharding.device_set == index.sharding.device_set)


def _placement(x: Any) -> str:
    """Where a concrete array lies, for an error: its device, or its sorted devices."""
    names = sorted(map(str, x.sharding.device_set))
    return names[0] if len(names) == 1 else f"[{', '.join(names)}]"


def _eager_host(
    x: Any,
    indices: Any,
    axis: Any,
    opset: Any,
    rank: int,
    dtypes: tuple[frozenset[np.dtype], frozenset[np.dtype]],
) -> np.ndarray | None:
    """The index of an eager call where every device is the CPU, read where it lies, if
    every check of the flow but the index's values (and ``gather_grad``'s grad shape) passes
    in few steps (a small call is mostly Python): concrete arrays, ``x`` (data or grad) of
    ``dtypes`` (those before Gather-13, and from it on) and rank ``rank``, a plain axis and
    opset; else None, and the flow decides and reports."""
    if (
        type(x) is _CONCRETE
        and type(indices) is _CONCRETE
        and _CPU_ONLY
        and not _policy.FORCING
        and _rules.plain_call(axis, opset, rank)
        and x.dtype in dtypes[opset >= _rules.BFLOAT16_SINCE]
        and indices.dtype in _FAST_INDEX_DTYPES
        and (_ONE_DEVICE or _placed_alike(x, indices))
    ):
        return np.asarray(indices)
    return None


def _held(host: np.ndarray, fn: str, role: str) -> np.ndarray:
    """NumPy ``host`` data or grad of an ONNX dtype, refused where JAX would not hold it as
    it is: strings, or integers beyond the 32-bit type JAX narrows them to without
    jax_enable_x64 (which it would wrap); in native byte order. Floats round as JAX rounds
    them."""
    if host.dtype.kind in "USOT":
        why, advice = "JAX arrays hold no strings", "pass NumPy indices to gather it with NumPy"
        name = _rules.shown_dtype("string", host.dtype)
        raise _errors.library_lacks_dtype(fn, role, "jax", name, why, advice)
    host = native_order(host)
    held = _held_dtype(host.dtype)
    if held != host.dtype and host.dtype.kind in "iu" and host.size:
        low, high = np.iinfo(held).min, np.iinfo(held).max
        if host.min() < low or host.max() > high:  # (the extremes first: no masks to make)
            found = _rules.first_outside(host, low, high)
            assert found is not None  # an extreme is outside
            name = _rules.dtype_name(host.dtype)
            raise _errors.beyond_held_dtype(fn, role, name, held.name, *found)
    return host


def is_traced(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


class _Traced(NamedTuple):
    """A traced index and its valid inclusive bounds: bad ones read the fill value."""

    values: jax.Array
    bounds: tuple[int, int]


def host_extremes(index: jax.Array) -> tuple[int, int]:
    """(min, max) of a concrete index read on the host (the exact policy: whole, on the CPU)."""
    return _rules.host_extremes(np.asarray(index))


@jax.jit
def _extremes(index: jax.Array) -> jax.Array:
    return jnp.stack([jnp.min(index), jnp.max(index)])


def device_extremes(index: jax.Array) -> tuple[int, int]:
    """(min, max) of a concrete index computed where it lives; only the two come to the host.

    The device policy's read (see :mod:`gatherx._policy`): one small transfer, not the index.
    """
    low, high = jax.device_get(_extremes(index)).tolist()
    return int(low), int(high)


class JaxBackend(Backend):
    name = "jax"
    takes_numpy_data = True
    sparse_instead = (
        "to touch only the rows looked up, differentiate with respect to the gathered rows "
        "and add the update with table.at[indices].add(update)"
    )

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        if type(data) is _CONCRETE:
            shape = data.shape  # once: each of jax.Array's properties is a Python call
            host = _eager_host(data, indices, axis, opset, len(shape), _FAST_DATA_DTYPES)
            if host is not None:
                axis %= len(shape)
                if not host.size:  # nothing to check or read
                    return _empty_gather(data, host.shape, axis)
                if not _rules.out_of_range(*_rules.host_extremes(host), shape[axis], opset):
                    return _gather(data, indices, axis=axis, bounds=None, mode=_CHECKED_MODE)
        return super().gather(data, indices, axis, opset)

    def gather_grad(
        self, shape: Any, indices: Any, grad: Any, axis: Any, sparse: bool = False
    ) -> Any:
        if not sparse:
            shape = _rules.check_shape(shape)  # the flow's first check
            host = _eager_host(grad, indices, axis, _GRAD, len(shape), _FAST_GRAD_DTYPES)
            if host is not None:
                axis %= len(shape)
                if grad.shape == _rules.output_shape(shape, host.shape, axis):
                    if not host.size:  # nothing to check or add
                        return _empty_scatter(shape, host.ndim, grad, axis)
                    if not _rules.out_of_range(*_rules.host_extremes(host), shape[axis], _GRAD):
                        return _gather_grad(shape, indices, grad, axis=axis, bounds=None)
        return super().gather_grad(shape, indices, grad, axis, sparse)

    def size(self, index: Any) -> int:
        # Symbolic dimensions (jax.export) are no ints: such an index counts as non-empty.
        if all(isinstance(d, int) for d in index.shape):
            return int(index.size)
        return 1

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        if isinstance(x, (np.ndarray, np.generic)):  # JAX's convention: NumPy arrays are inputs
            return plain_ndarray(x, fn, role) if isinstance(x, np.ndarray) else np.asarray(x)
        return x

    def adopt(self, x: Any, fn: str, role: str) -> Any:
        return jnp.asarray(_held(x, fn, role)) if isinstance(x, np.ndarray) else x

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        if not _placed_alike(like, index):
            raise _errors.device_mismatch(fn, _placement(index), _placement(like))

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        # Kept on the host: the jitted kernels take NumPy arguments and place them with the
        # data in their C++ dispatch (jnp.asarray first cost a Python transfer, ~30 us).
        return host

    def bounds(self, index: Any) -> tuple[int, int] | None:
        if is_traced(index):
            return None
        if _policy.exact(next(iter(index.devices())).platform):
            return host_extremes(index)
        # JAX has no asynchronous error outside checkify: two scalars made on the device.
        return device_extremes(index)

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        return _Traced(index, _rules.index_range(size, opset))

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        return index  # the jitted kernels wrap (cheaper there than an eager op)

    def take(self, data: Any, index: Any, axis: int) -> Any:
        if isinstance(index, _Traced):
            mode = jax_gather_mode(indices_checked=False)
            return _gather(data, index.values, axis=axis, bounds=index.bounds, mode=mode)
        if index.size == 0:  # nothing to read (and checkify cannot check an empty gather)
            return _empty_gather(data, tuple(index.shape), axis)
        return _gather(data, index, axis=axis, bounds=None, mode=_CHECKED_MODE)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if isinstance(index, _Traced):
            return _gather_grad(shape, index.values, grad, axis=axis, bounds=index.bounds)
        if index.size == 0:
            return _empty_scatter(shape, index.ndim, grad, axis)
        return _gather_grad(shape, index, grad, axis=axis, bounds=None)


#: The one instance the dispatch uses.
BACKEND = JaxBackend()
