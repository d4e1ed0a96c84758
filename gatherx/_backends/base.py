"""The backend interface and the one flow of a call: validate by the rules, bound, take."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _errors, _rules
from .._indices import host_indices, is_host
from .._rules import dtype_name


class Backend:
    """An array framework as gatherx uses it.

    :meth:`gather` and :meth:`gather_grad` validate every input by :mod:`gatherx._rules`
    before any work; a backend supplies the primitives below them, and may put a fast path in
    front of them that falls back on these methods for anything it does not decide itself.
    """

    #: The framework's name in messages: ``numpy``, ``torch``, ``jax``, ``dask``, ``array-api``.
    name = ""
    #: Whether NumPy data with this backend's indices computes here (JAX's convention).
    takes_numpy_data = False

    # -- primitives ---------------------------------------------------------------------

    def dtype_name(self, x: Any) -> str:
        """The backend-neutral name of ``x``'s dtype: ``float32``, ``bfloat16``, ``string``."""
        return dtype_name(x.dtype)

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        """``x`` (data or grad) as this backend computes with it; refuse what it cannot."""
        return x

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        """Refuse native indices this backend cannot use with ``like`` (device, layout)."""

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        """Checked, non-negative host indices as an index of ``like``'s framework and device."""
        raise NotImplementedError

    def bounds(self, index: Any) -> tuple[int, int] | None:
        """(min, max) of a non-empty native index, or None where values cannot be read."""
        raise NotImplementedError

    def to_host(self, index: Any) -> np.ndarray:
        """A native index's values on the host, to locate the first bad one."""
        return np.asarray(index)

    def unchecked(self, index: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        """This backend's policy for indices whose values cannot be read (traced)."""
        raise NotImplementedError

    def wrap(self, index: Any, size: int, low: int, opset: int) -> Any:
        """In-range ``index`` with negatives moved into [0, size); ``low`` is its minimum.

        This default serves backends whose index is a NumPy array.
        """
        return np.where(index < 0, index + size, index) if low < 0 else index

    def size(self, index: Any) -> int:
        n = 1
        for d in index.shape:
            n *= int(d)
        return n

    def take(self, data: Any, index: Any, axis: int) -> Any:
        """``data`` gathered along ``axis`` at a bounded index (see :meth:`bounded`)."""
        raise NotImplementedError

    def scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        """Zeros of ``shape`` with ``grad`` added at a bounded index along ``axis``."""
        raise NotImplementedError

    # -- the flow -------------------------------------------------------------------------

    def index(self, indices: Any, like: Any, fn: str) -> Any:
        """``indices`` validated: a host array (see :mod:`gatherx._indices`) or a native one."""
        if is_host(indices):
            return host_indices(indices, fn)
        _rules.check_index_dtype(self.dtype_name(indices), self.name, fn)
        self.check_index(indices, like, fn)
        return indices

    def bounded(self, index: Any, like: Any, size: int, axis: int, opset: int, fn: str) -> Any:
        """A validated index checked against the axis and made non-negative, as a native index.

        Host values and readable native ones raise the IndexError for the first bad element;
        unreadable (traced) ones follow :meth:`unchecked`.
        """
        if isinstance(index, np.ndarray):
            low = _rules.check_host_bounds(index, size, axis, opset, fn)
            # wrapped after the move: the size may be symbolic (torch.export)
            return self.wrap(self.from_host(index, like), size, low, opset)
        if self.size(index) == 0:
            return index
        extremes = self.bounds(index)
        if extremes is None:
            return self.unchecked(index, size, axis, opset, fn)
        return self.checked(index, *extremes, size, axis, opset, fn)

    def checked(
        self, index: Any, low: int, high: int, size: int, axis: int, opset: int, fn: str
    ) -> Any:
        """A native index whose extremes were read: the IndexError, or the index wrapped."""
        if _rules.out_of_range(low, high, size, opset):
            values = self.to_host(index)
            found = _rules.first_bad(values, size, opset)
            assert found is not None
            value, position = found
            # Values holding more than this index (a vmap batch) have no position in it.
            where = position if tuple(values.shape) == tuple(index.shape) else None
            raise _errors.out_of_bounds(fn, value, where, size, axis, opset)
        return self.wrap(index, size, low, opset)

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        opset = _rules.check_opset(opset)
        data = self.check_array(data, "gather", "data")
        axis = _rules.normalize_axis(axis, data.ndim)
        _rules.check_data_dtype(self.dtype_name(data), opset, self.name)
        index = self.index(indices, data, "gather")
        index = self.bounded(index, data, data.shape[axis], axis, opset, "gather")
        return self.take(data, index, axis)

    def gather_grad(self, shape: Any, indices: Any, grad: Any, axis: Any) -> Any:
        fn = "gather_grad"
        shape = _rules.check_shape(shape)
        grad = self.check_array(grad, fn, "grad")
        axis = _rules.normalize_axis(axis, len(shape), fn)
        _rules.check_grad_dtype(self.dtype_name(grad))
        index = self.index(indices, grad, fn)
        _rules.check_grad_shape(tuple(grad.shape), shape, tuple(index.shape), axis)
        index = self.bounded(index, grad, shape[axis], axis, _rules.GRAD_OPSET, fn)
        return self.scatter_add(shape, index, grad, axis)
