"""The backend interface and the one flow of a call: validate by the rules, bound, take
(or, with ``out=``, check the caller's array too and write into it)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .. import _errors, _rules
from .._indices import host_indices, is_host
from .._rules import Span, dtype_name


class OutWriter:
    """How a backend writes a result into a caller's array (``gather(..., out=)``).

    A backend that can has one (:meth:`Backend.out_writer`); :meth:`Backend.gather_out`
    calls it after the rules' checks, and :meth:`take_into` only once every check passed.
    """

    def accept(self, data: Any, out: Any, fn: str) -> Any:
        """The array to write ``out``'s result into (``out`` or a view of it); refuse an
        ``out`` of the wrong kind, or a call whose result cannot be written."""
        raise NotImplementedError

    def span(self, x: Any) -> Span | None:
        """Where ``x``'s bytes lie (data, out or an index; None: no bytes or not known)."""
        return host_span(x) if isinstance(x, np.ndarray) else None

    def read_bounds(self, index: Any) -> tuple[int, int] | None:
        """(min, max) of a non-empty native index, read now; None where it cannot be read."""
        raise NotImplementedError

    def take_into(self, data: Any, index: Any, axis: int, out: Any) -> None:
        """Write ``data`` gathered along ``axis`` into ``out`` at a checked ``index``: every
        value within Gather's range, negative ones (opset >= 11) not yet wrapped."""
        raise NotImplementedError


def host_span(x: np.ndarray) -> Span | None:
    """Where a NumPy array's bytes lie; None when it has none."""
    if x.size == 0:
        return None
    low, high = _byte_bounds(x)
    return "cpu", low, high


try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # NumPy < 2.0
    _byte_bounds = np.byte_bounds  # type: ignore[attr-defined]  # noqa: NPY201


class Backend:
    """An array framework as gatherx uses it.

    :meth:`gather` and :meth:`gather_grad` validate every input by :mod:`gatherx._rules`
    before any work; a backend supplies the primitives below them, and may put a fast path in
    front of them that falls back on these methods for anything it does not decide itself.
    """

    #: The framework's name in messages: ``numpy``, ``torch``, ``jax``, ``dask``, or an
    #: array-API library's (``array_api_strict``, ``cubed``, ...).
    name = ""
    #: Whether NumPy data with this backend's indices computes here (JAX's convention).
    takes_numpy_data = False
    #: The most dimensions an array of this framework has (None: no limit gatherx knows).
    max_rank: int | None = None
    #: Why ``out=`` is refused, where :meth:`out_writer` is None (``{name}``: :attr:`name`).
    no_out_because = "{name} arrays are immutable or computed lazily, so none is written into"

    # -- primitives ---------------------------------------------------------------------

    def dtype_name(self, x: Any) -> str:
        """The backend-neutral name of ``x``'s dtype: ``float32``, ``bfloat16``, ``string``."""
        return dtype_name(x.dtype)

    def check_array(self, x: Any, fn: str, role: str) -> Any:
        """``x`` (data or grad) as an array of this backend or a NumPy array it takes; refuse
        what it cannot take."""
        return x

    def adopt(self, x: Any, fn: str, role: str) -> Any:
        """``x`` (data or grad, its rank and dtype checked) as this backend computes with it."""
        return x

    def check_index(self, index: Any, like: Any, fn: str) -> None:
        """Refuse native indices this backend cannot use with ``like`` (device, layout)."""

    def from_host(self, host: np.ndarray, like: Any) -> Any:
        """Checked, non-negative host indices as an index of ``like``'s framework and device."""
        raise NotImplementedError

    def bounds(self, index: Any) -> tuple[int, int] | None:
        """(min, max) of a non-empty native index, or None where values cannot be read."""
        raise NotImplementedError

    def host_values(self, index: Any) -> np.ndarray | None:
        """A native index's values as a NumPy array over its own memory, where they are read
        on the host at no cost (CPU memory, the exact bounds policy, nothing tracing the call);
        None elsewhere, and then :meth:`bounds` reads them."""
        return None

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

    def sparse_scatter_add(self, shape: tuple[int, ...], index: Any, grad: Any, axis: int) -> Any:
        """:meth:`scatter_add` as a sparse tensor (where :meth:`check_sparse` lets it)."""
        raise NotImplementedError

    # -- the flow -------------------------------------------------------------------------

    def index(self, indices: Any, like: Any, fn: str) -> Any:
        """``indices`` validated: a host array (see :mod:`gatherx._indices`) or a native one."""
        if is_host(indices):
            return host_indices(indices, fn)
        _rules.check_index_dtype(self.dtype_name(indices), self.name, fn, indices.dtype)
        self.check_index(indices, like, fn)
        return indices

    def bounded(
        self,
        index: Any,
        like: Any,
        size: int,
        axis: int,
        opset: int,
        fn: str,
        writer: OutWriter | None = None,
    ) -> Any:
        """A validated index checked against the axis and made non-negative, as a native index.

        Host values and readable native ones raise the IndexError for the first bad element;
        unreadable (traced) ones follow :meth:`unchecked`. With a ``writer`` (``out=``) the
        values are read now whatever the bounds policy, since nothing may be written before
        the check, and the index is left unwrapped for :meth:`OutWriter.take_into`.
        """
        wrap = writer is None
        if isinstance(index, np.ndarray):
            low = _rules.check_host_bounds(index, size, axis, opset, fn)
            # wrapped after the move: the size may be symbolic (torch.export)
            native = self.from_host(index, like)
            return self.wrap(native, size, low, opset) if wrap else native
        if self.size(index) == 0:
            return index
        host = self.host_values(index) if wrap else None
        if host is not None:  # checked and wrapped in one rule, the host's
            wrapped = _rules.host_wrapped(host, size, opset)
            if wrapped is None:
                return self.checked(index, *_rules.host_extremes(host), size, axis, opset, fn)
            return index if wrapped is host else self.from_host(wrapped, like)
        extremes = self.bounds(index) if writer is None else writer.read_bounds(index)
        if extremes is None:
            if writer is not None:
                raise _errors.out_refused(fn, "the indices' values cannot be read")
            return self.unchecked(index, size, axis, opset, fn)
        return self.checked(index, *extremes, size, axis, opset, fn, wrap)

    def checked(
        self,
        index: Any,
        low: int,
        high: int,
        size: int,
        axis: int,
        opset: int,
        fn: str,
        wrap: bool = True,
    ) -> Any:
        """A native index whose extremes were read: the IndexError, or the index wrapped
        (as it is, with ``wrap`` false)."""
        if _rules.out_of_range(low, high, size, opset):
            # A tracer warns of these reads, as of its earlier ones; no catch_warnings() here:
            # it swaps the filters every thread shares and resets the warnings shown once.
            size = size if isinstance(size, int) else operator.index(size)  # a tracer's 0-d
            values = self.to_host(index)
            found = _rules.first_bad(values, size, opset)
            assert found is not None
            value, position = found
            # Values holding more than this index (a vmap batch) have no position in it.
            where = position if tuple(values.shape) == tuple(index.shape) else None
            raise _errors.out_of_bounds(fn, value, where, size, axis, opset)
        return self.wrap(index, size, low, opset) if wrap else index

    def checked_data(self, data: Any, axis: Any, opset: Any) -> tuple[Any, int, int]:
        """(data, axis, opset) of a gather, validated by the rules: the first steps of
        :meth:`gather` and :meth:`gather_out` alike."""
        opset = _rules.check_opset(opset)
        data = self.check_array(data, "gather", "data")
        axis = _rules.normalize_axis(axis, data.ndim)
        _rules.check_data_dtype(self.dtype_name(data), opset, self.framework_of(data))
        return self.adopt(data, "gather", "data"), axis, opset

    def framework_of(self, x: Any) -> str:
        """The library that made data or grad ``x``, as messages name it: NumPy for the
        NumPy arrays a backend takes beside its own indices (JAX's), else the backend's."""
        return "numpy" if isinstance(x, np.ndarray) else self.name

    def prepared(self, data: Any, indices: Any, axis: Any, opset: Any) -> tuple[Any, Any, int]:
        """(data, index, axis) of a gather, every input checked and the index bounded: all of
        :meth:`gather` but the take."""
        data, axis, opset = self.checked_data(data, axis, opset)
        index = self.index(indices, data, "gather")
        _rules.check_result_rank(data.ndim - 1 + index.ndim, self.max_rank, self.name, "gather")
        index = self.bounded(index, data, data.shape[axis], axis, opset, "gather")
        return data, index, axis

    def gather(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        return self.take(*self.prepared(data, indices, axis, opset))

    #: What this framework's users do where PyTorch takes a sparse gradient (in the refusal).
    sparse_instead = "pass sparse_grad=False / sparse=False"

    def check_sparse(self, x: Any, fn: str, flag: str) -> None:
        """Refuse a sparse gradient for ``x`` (data or grad) before any work: everywhere but
        in a backend that makes them."""
        raise _errors.sparse_refused(fn, flag, self.name, self.sparse_instead)

    def gather_sparse(self, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
        """:meth:`gather` whose gradient reaches ``data`` as a sparse tensor, where
        :meth:`check_sparse` lets it (``sparse_grad=True``)."""
        raise NotImplementedError

    def out_writer(self) -> OutWriter | None:
        """How results are written into a caller's array; None: this backend's arrays are
        immutable or lazy, and ``out=`` is refused."""
        return None

    def gather_out(
        self, data: Any, indices: Any, axis: Any, opset: Any, out: Any, writer: Any = None
    ) -> Any:
        """:meth:`gather` written into ``out``: ``out`` is touched only once every check of
        the inputs, of ``out`` and of the index values has passed. ``writer``: the
        :meth:`out_writer` of a backend whose fast path calls this flow."""
        fn = "gather"
        data, axis, opset = self.checked_data(data, axis, opset)
        writer = writer or self.out_writer()
        if writer is None:
            raise _errors.out_refused(fn, self.no_out_because.format(name=self.name))
        target = writer.accept(data, out, fn)
        index = self.index(indices, data, fn)
        shape = _rules.output_shape(data.shape, index.shape, axis)
        _rules.check_result_rank(len(shape), self.max_rank, self.name, fn)
        devices = getattr(target, "device", None), getattr(data, "device", None)
        _rules.check_out(target.shape, shape, target.dtype, data.dtype, *devices, fn)
        where = writer.span(target)
        for role, x in (("data", data), ("indices", index)):
            if _rules.overlapping(where, writer.span(x)):
                raise _errors.out_overlap(fn, role)
        index = self.bounded(index, data, data.shape[axis], axis, opset, fn, writer)
        writer.take_into(data, index, axis, target)
        return out

    def gather_grad(
        self, shape: Any, indices: Any, grad: Any, axis: Any, sparse: bool = False
    ) -> Any:
        fn = "gather_grad"
        shape = _rules.check_shape(shape)
        _rules.check_result_rank(len(shape), self.max_rank, self.name, fn)
        grad = self.check_array(grad, fn, "grad")
        if sparse:
            self.check_sparse(grad, fn, "sparse")
        axis = _rules.normalize_axis(axis, len(shape), fn)
        _rules.check_grad_dtype(self.dtype_name(grad), self.framework_of(grad), grad.dtype)
        grad = self.adopt(grad, fn, "grad")
        index = self.index(indices, grad, fn)
        _rules.check_grad_shape(tuple(grad.shape), shape, tuple(index.shape), axis)
        index = self.bounded(index, grad, shape[axis], axis, _rules.GRAD_OPSET, fn)
        if sparse:
            return self.sparse_scatter_add(shape, index, grad, axis)
        return self.scatter_add(shape, index, grad, axis)
