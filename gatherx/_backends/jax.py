"""JAX Gather: jitted ``lax.gather``/``lax.scatter_add`` in FILL_OR_DROP mode, so traced bad
indices are never wrapped or clamped, and JAX's own rules differentiate both."""

from __future__ import annotations

# Why no jax.custom_jvp: lax.gather's native rules already give every transform, each
# checked by tests/test_jax_transforms.py -- jvp (gather of the tangent, fill 0), transpose
# (scatter-add in the same FILL_OR_DROP mode, so reverse mode, linear_transpose, jacrev and
# hessian come from it and dropped reads get no gradient), batching (vmap over data, indices
# or both) and checkify's index check. A custom rule would only add a layer to get wrong.
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _rules
from .._indices import plain_ndarray
from .._strategy import jax_gather_mode, jax_layout_plan
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
    """One ``lax.gather`` along ``axis``, in the layout _strategy.jax_layout_plan picks."""
    if jax_layout_plan(data.shape, axis) == "axis_first":
        # Same forward (XLA fuses the transposes); its transpose scatters whole rows, 1.8x.
        k = index.ndim
        out = _take(jnp.moveaxis(data, axis, 0), index, 0, mode)
        return jnp.moveaxis(out, tuple(range(k)), tuple(range(axis, axis + k)))
    dnums, _ = _dnums(axis, index.ndim, data.ndim)
    slice_sizes = (*data.shape[:axis], 1, *data.shape[axis + 1 :])
    return lax.gather(data, index[..., None], dnums, slice_sizes, mode=_MODES[mode])


def _lax_take(
    data: jax.Array, index: jax.Array, axis: int, mode: str = "fill_or_drop"
) -> jax.Array:
    """``data`` gathered along ``axis`` at in-range, non-negative ``index``; others are filled
    (``mode="promise_in_bounds"`` only for indices already checked on the host).

    This is ``jnp.take`` without its negative-index wrap, which would turn an index below
    ``-size`` into a valid one after our own normalisation.
    """
    if data.shape[axis] == 0:
        data, index, mode = (*_empty_axis(data, index, axis), "fill_or_drop")
    return _jax_sharding.gather(partial(_take, axis=axis, mode=mode), data, index, axis)


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


@partial(jax.jit, static_argnames=("axis", "negative", "mode"))
def _gather(data: jax.Array, index: jax.Array, axis: int, negative: bool, mode: str) -> jax.Array:
    index = _in_range(index, data.shape[axis], negative, mode != "promise_in_bounds")
    return _lax_take(data, index, axis, mode)


def _lax_scatter_add(
    shape: tuple[int, ...], index: jax.Array, grad: jax.Array, axis: int
) -> jax.Array:
    """Zeros of ``shape`` plus ``grad`` at in-range, non-negative ``index``; others dropped.

    An explicit scatter-add rather than jax.vjp of the gather: vjp has no cotangent for
    integer data (float0), while gather_grad accepts integer grads. JAX's own rules make it
    differentiable (jvp: itself on the tangent; transpose: a gather).
    """
    size = shape[axis]
    if size == 0:  # as in _empty_axis: every update is dropped, but lax needs a slot
        padded = (*shape[:axis], 1, *shape[axis + 1 :])
        out = _lax_scatter_add(padded, jnp.where(index >= 0, index + 1, index), grad, axis)
        return out[(slice(None),) * axis + (slice(0, 0),)]
    return _jax_sharding.scatter_add(partial(_add, shape=shape, axis=axis), index, grad, axis)


def _add(index: jax.Array, grad: jax.Array, shape: tuple[int, ...], axis: int) -> jax.Array:
    """One ``lax.scatter_add`` into zeros, in the layout _strategy.jax_layout_plan picks."""
    if jax_layout_plan(shape, axis) == "axis_first":
        k = index.ndim
        moved = jnp.moveaxis(grad, tuple(range(axis, axis + k)), tuple(range(k)))
        front = (shape[axis], *shape[:axis], *shape[axis + 1 :])
        return jnp.moveaxis(_add(index, moved, front, 0), 0, axis)
    _, dnums = _dnums(axis, index.ndim, len(shape))
    zeros = jnp.zeros(shape, grad.dtype)
    return lax.scatter_add(zeros, index[..., None], grad, dnums, mode=_MODES["fill_or_drop"])


@partial(jax.jit, static_argnames=("shape", "axis", "negative"))
def _gather_grad(
    shape: tuple[int, ...], index: jax.Array, grad: jax.Array, axis: int, negative: bool
) -> jax.Array:
    dtype = grad.dtype
    if dtype in _HALF:  # sum in float32, round once
        grad = grad.astype(jnp.float32)
    index = _in_range(index, shape[axis], negative, True)
    return _lax_scatter_add(shape, index, grad, axis).astype(dtype)


_HALF = frozenset(np.dtype(jnp.dtype(name)) for name in _rules.HALF_DTYPES)


def is_traced(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


class _Traced(NamedTuple):
    """A traced index and whether its negatives are valid: bad ones read the fill value."""

    values: jax.Array
    negative: bool


class JaxBackend(Backend):
    name = "jax"
    takes_numpy_data = True

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        if isinstance(x, (np.ndarray, np.generic)):  # JAX's convention: NumPy arrays are inputs
            return jnp.asarray(plain_ndarray(x, fn, role) if isinstance(x, np.ndarray) else x)
        return x

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        return jnp.asarray(host)

    def bounds(self, index: Any) -> tuple[int, int] | None:
        if is_traced(index):
            return None
        values = np.asarray(index)
        return int(values.min()), int(values.max())

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        return _Traced(index, opset >= _rules.NEGATIVE_INDICES_SINCE)

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        return index  # the jitted kernels wrap (cheaper there than an eager op)

    def take(self, data: Any, index: Any, axis: int) -> Any:
        if isinstance(index, _Traced):
            mode = jax_gather_mode(indices_checked=False)
            return _gather(data, index.values, axis=axis, negative=index.negative, mode=mode)
        if index.size == 0:  # nothing to read (and checkify cannot check an empty gather)
            return jnp.zeros(_rules.output_shape(data.shape, index.shape, axis), data.dtype)
        mode = jax_gather_mode(indices_checked=True)
        return _gather(data, index, axis=axis, negative=True, mode=mode)

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        if isinstance(index, _Traced):
            return _gather_grad(shape, index.values, grad, axis=axis, negative=index.negative)
        if index.size == 0:
            return jnp.zeros(shape, grad.dtype)
        return _gather_grad(shape, index, grad, axis=axis, negative=True)


#: The one instance the dispatch uses.
BACKEND = JaxBackend()
