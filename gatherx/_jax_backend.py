"""JAX Gather: one jitted ``lax.gather`` in FILL_OR_DROP mode, so traced bad indices never wrap."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import check_host_bounds, output_shape


def _lax_take(data: jax.Array, index: jax.Array, axis: int) -> jax.Array:
    """``data`` gathered along ``axis`` at in-range, non-negative ``index``; others are filled.

    This is ``jnp.take`` without its negative-index wrap, which would turn an index below
    ``-size`` into a valid one after our own normalisation.
    """
    shape = output_shape(data.shape, index.shape, axis)
    if data.shape[axis] == 0 or index.size == 0:
        # Nothing to read: every index is out of range (filled) or there is no index at all.
        return jnp.full(shape, _fill_value(data.dtype), data.dtype)
    slice_sizes = (*data.shape[:axis], 1, *data.shape[axis + 1 :])
    dnums = lax.GatherDimensionNumbers(
        offset_dims=(*range(axis), *range(axis + index.ndim, data.ndim + index.ndim - 1)),
        collapsed_slice_dims=(axis,),
        start_index_map=(axis,),
    )
    return lax.gather(
        data,
        index[..., None],
        dimension_numbers=dnums,
        slice_sizes=slice_sizes,
        mode=lax.GatherScatterMode.FILL_OR_DROP,
    )


def _fill_value(dtype: Any) -> Any:
    """The value ``lax.gather`` fills out-of-range reads with, for the empty-axis case."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.nan
    if dtype == jnp.bool_:
        return True
    info = jnp.iinfo(dtype)
    return info.max if jnp.issubdtype(dtype, jnp.unsignedinteger) else info.min


@partial(jax.jit, static_argnames=("axis", "negative"))
def _gather(data: jax.Array, index: jax.Array, axis: int, negative: bool) -> jax.Array:
    if negative:
        index = jnp.where(index < 0, index + data.shape[axis], index)
    return _lax_take(data, index, axis)


@partial(jax.jit, static_argnames=("shape", "axis"))
def _gather_grad(
    shape: tuple[int, ...], index: jax.Array, grad: jax.Array, axis: int
) -> jax.Array:
    index = jnp.where(index < 0, index + shape[axis], index)
    zeros = jnp.zeros(shape, grad.dtype)
    # The VJP of the linear gather is exactly its transpose: a scatter-add, duplicates summed.
    _, vjp = jax.vjp(lambda d: _lax_take(d, index, axis), zeros)
    return vjp(grad)[0]


def is_traced(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def to_index(indices: Any, host: np.ndarray | None, data: jax.Array) -> jax.Array:
    return indices if host is None else jnp.asarray(host)


def checked_index(
    index: jax.Array, size: int, axis: int, opset: int, host: np.ndarray | None
) -> jax.Array:
    """Raise for out-of-range concrete indices; traced ones are left to FILL_OR_DROP/checkify."""
    if host is None and not is_traced(index):
        host = np.asarray(index)
    if host is not None:
        check_host_bounds(host, size, axis, opset)
    return index


def gather(data: jax.Array, index: jax.Array, axis: int, opset: int) -> jax.Array:
    return _gather(data, index, axis=axis, negative=opset >= 11)


def gather_grad(
    shape: tuple[int, ...], index: jax.Array, grad: jax.Array, axis: int
) -> jax.Array:
    return _gather_grad(shape, index, grad, axis=axis)
