"""Output shardings for Gather and its scatter-add on JAX meshes with Explicit axes.

JAX's Explicit mode refuses a gather or scatter whose output sharding it cannot infer (data
sharded along the gathered axis, sharded indices); these wrappers give it the documented one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def _names(entry: Any) -> tuple[str, ...]:
    """The mesh axis names in one PartitionSpec entry: None, a name or a tuple of names."""
    if entry is None or entry is P.UNCONSTRAINED:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _entry(names: tuple[str, ...]) -> Any:
    return None if not names else names[0] if len(names) == 1 else names


def _spec(x: Any) -> tuple[Any, ...]:
    spec = tuple(jax.typeof(x).sharding.spec)
    return spec + (None,) * (x.ndim - len(spec))


def _explicit_mesh(*xs: Any) -> Any:
    """The (abstract) mesh of ``xs`` or of the context, if it has Explicit axes; else None."""
    meshes = [jax.typeof(x).sharding.mesh for x in xs]
    mesh = next((m for m in meshes if not m.empty), jax.sharding.get_abstract_mesh())
    if mesh.empty or AxisType.Explicit not in mesh.axis_types:
        return None
    return mesh


def gather_spec(data_spec: tuple[Any, ...], index_spec: tuple[Any, ...], axis: int) -> P:
    """The output sharding of a gather along ``axis`` on an Explicit mesh.

    The dimensions before and after ``axis`` keep the data's sharding; the index dimensions
    take the indices' sharding, less any mesh axis those data dimensions already use. The mesh
    axes that sharded the gathered axis itself shard nothing: the output has no such axis,
    so it is replicated over them.
    """
    kept = (*data_spec[:axis], *data_spec[axis + 1 :])
    used = {name for entry in kept for name in _names(entry)}
    index_part = [_entry(tuple(n for n in _names(e) if n not in used)) for e in index_spec]
    return P(*data_spec[:axis], *index_part, *data_spec[axis + 1 :])


def scatter_spec(grad_spec: tuple[Any, ...], index_ndim: int, axis: int) -> P:
    """The output sharding of gather_grad: the grad's, with ``axis`` replicated.

    The dimensions before and after ``axis`` keep the grad's sharding; the scattered-into
    axis is replicated, since where the index dimensions were sharded every shard may add
    into any row.
    """
    return P(*grad_spec[:axis], None, *grad_spec[axis + index_ndim :])


def _auto(fn: Callable[..., Any], mesh: Any, spec: P, *args: Any) -> Any:
    """``fn(*args)`` computed with the mesh's Explicit axes made Auto, resharded to ``spec``."""
    sharding = NamedSharding(mesh, spec)
    return jax.sharding.auto_axes(fn, out_sharding=sharding, axes=mesh.explicit_axes)(*args)


def gather(take: Callable[[Any, Any], Any], data: Any, index: Any, axis: int) -> Any:
    """``take(data, index)``, with the :func:`gather_spec` output sharding where JAX needs one.

    Without a mesh, on Auto meshes, and where the gathered axis and the indices are
    replicated (JAX infers the same sharding as :func:`gather_spec` there), ``take`` runs as
    it is.
    """
    mesh = _explicit_mesh(data, index)
    if mesh is None:
        return take(data, index)
    data_spec, index_spec = _spec(data), _spec(index)
    if data_spec[axis] is None and all(e is None for e in index_spec):
        return take(data, index)
    return _auto(take, mesh, gather_spec(data_spec, index_spec, axis), data, index)


def scatter_add(scatter: Callable[[Any, Any], Any], index: Any, grad: Any, axis: int) -> Any:
    """``scatter(index, grad)``, with the :func:`scatter_spec` output sharding where needed."""
    mesh = _explicit_mesh(grad, index)
    if mesh is None:
        return scatter(index, grad)
    grad_spec, index_spec = _spec(grad), _spec(index)
    # The zeros scattered into are replicated, so any sharded input leaves JAX without an answer.
    if all(e is None for e in grad_spec + index_spec):
        return scatter(index, grad)
    return _auto(scatter, mesh, scatter_spec(grad_spec, index.ndim, axis), index, grad)
