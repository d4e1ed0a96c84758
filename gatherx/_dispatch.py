"""Which backend serves a call: a type -> framework cache, filled the first time a type is
seen (and a type -> backend cache for other array-API libraries and JAX's traced values).

A framework is recognised through ``sys.modules`` (never imported here) and its backend
imported on first use, so the first call takes the same path as every later one.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _errors
from ._backends.base import Backend
from ._compile_constant import constant_under_compile
from ._indices import HOST_TYPES, is_host

_BY_TYPE: dict[type, Backend | None] = {}


def backend_of(array: Any, indices: Any, fn: str, role: str) -> Backend:
    """The backend for ``array`` (data or grad) and ``indices``; TypeError for mixed inputs."""
    kind = type(array)
    name = _framework(kind)  # first: a compiled trace reads _NAMED after it filled it
    backend = _NAMED.get(name)
    if backend is None:  # another array-API library, a traced JAX value or no array
        backend = _learn(array, fn, role)
    index_kind = type(indices)
    if index_kind is kind or index_kind in HOST_TYPES:
        return backend
    if name and _framework(index_kind) == name:  # a subclass: a Parameter's plain index
        return backend
    return _with_indices(backend, array, indices, fn)


def _learn(array: Any, fn: str, role: str) -> Backend:
    kind = type(array)
    if kind not in _BY_TYPE:
        _BY_TYPE[kind] = _resolve(array)
    backend = _BY_TYPE[kind]
    if backend is None:
        raise _errors.not_an_array(fn, role, array)
    return backend


def _with_indices(backend: Backend, array: Any, indices: Any, fn: str) -> Backend:
    if is_host(indices):  # every backend takes them (subclasses, NumPy scalars)
        return backend
    kind = type(indices)
    if kind not in _BY_TYPE:
        _BY_TYPE[kind] = _resolve(indices)
    other = _BY_TYPE[kind]
    if other is None:
        raise _errors.bad_indices_type(fn, indices)
    if other is backend:
        return backend
    if backend is _NAMED.get("numpy") and other.takes_numpy_data:
        return other
    raise _errors.mixed_frameworks(fn, indices, other.name, array, backend.name)


_FRAMEWORKS: dict[type, str] = {}


@constant_under_compile
def _framework(kind: type) -> str:
    """The framework of arrays of type ``kind`` (``numpy``, ``torch``, ``jax`` or ``dask``,
    its backend imported), or "" for any other type: told by the type alone, read in one
    lookup, and run rather than traced by torch.compile (its first trace then finds the
    backend where every later call does)."""
    name = _FRAMEWORKS.get(kind)
    if name is None:
        name = _FRAMEWORKS[kind] = _framework_of(kind)
        if name:
            _backend(name)
    return name


def _framework_of(kind: type) -> str:
    if issubclass(kind, (np.ndarray, np.generic)):
        return "numpy"
    for module, name, attr in _FRAMEWORK_TYPES:
        found = sys.modules.get(module)
        if found is not None and issubclass(kind, getattr(found, attr)):
            return name
    return ""


#: (module, framework, array type) of the frameworks recognised by type, never imported.
_FRAMEWORK_TYPES = (("torch", "torch", "Tensor"), ("jax", "jax", "Array"),
                    ("dask.array", "dask", "Array"))  # fmt: skip


def _resolve(x: Any) -> Backend | None:
    """The backend for ``x``'s type, importing it; None for a type no backend takes."""
    name = _framework(type(x))
    if name:
        return _backend(name)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):  # a tracer: no subclass of jax.Array
        return _backend("jax")
    from array_api_compat import array_namespace, is_array_api_obj

    if is_array_api_obj(x):
        return _namespace_backend(array_namespace(x))
    return None


_BY_NAMESPACE: dict[int, Backend] = {}


def _namespace_backend(xp: Any) -> Backend:
    """One backend per namespace, shared by all its array types (sparse's COO and GCXS)."""
    backend = _BY_NAMESPACE.get(id(xp))
    if backend is None:
        from ._backends.array_api import ArrayApiBackend

        backend = _BY_NAMESPACE[id(xp)] = ArrayApiBackend(xp)
    return backend


_NAMED: dict[str, Backend] = {}


def _backend(name: str) -> Backend:
    """The one instance of a framework's backend (shared by all its array types)."""
    backend = _NAMED.get(name)
    if backend is None:
        # import statements, not importlib: Dynamo runs these when it traces a first call
        if name == "numpy":
            from ._backends import numpy as module
        elif name == "torch":
            from ._backends import torch as module  # type: ignore[no-redef]
        elif name == "jax":
            from ._backends import jax as module  # type: ignore[no-redef]
        else:
            from ._backends import dask as module  # type: ignore[no-redef]
        backend = _NAMED[name] = module.BACKEND
    return backend
