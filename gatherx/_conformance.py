"""The conformance suite of ``gatherx check``: ONNX cases, spec examples and a generated grid,
each with its NumPy expectation, and :func:`to_numpy` to read any library's result."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

from ._backends.capabilities import host_copy
from ._cases import Case, onnx_cases, spec_examples

#: Every ONNX Gather data dtype, in the order the suite's dtype groups run.
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string",
)  # fmt: skip
#: NumPy dtypes that are no ONNX Gather type: gatherx must refuse them with a TypeError.
REFUSED_DTYPES = ("datetime64[s]", "timedelta64[s]", "float128")
#: Groups whose expectation needs gatherx's ``opset`` argument or its dtype refusals, which a
#: plain ``(data, indices, axis)`` Gather has no way to take part in.
GATHERX_ONLY_GROUPS = frozenset({"opsets", "refused-dtype"})
#: Data dtype of the groups that are about indices, not dtypes: every library has it.
_GRID_DTYPE = "float32"
#: One data shape per rank; every axis of each is gathered.
_SHAPES = {1: (5,), 2: (4, 3), 3: (3, 4, 2), 4: (2, 3, 4, 2)}
#: 64-bit integer data beyond 2**53, by dtype.
_WIDE = {
    "int64": "(np.arange(12).reshape((3, 4)) * 3 + 2**62 + 1).astype('int64')",
    "uint64": "(np.arange(12).reshape((3, 4)).astype('uint64') * 3 + np.uint64(2**63 + 1))",
}
#: Data of more elements than this is named by its case in a reproducer, not spelled out.
_LITERAL_LIMIT = 32


@dataclasses.dataclass(frozen=True)
class ConformanceCase:
    """One Gather call and what ONNX says it gives: ``expected``, or the exception ``raises``.

    ``data_expr`` and :attr:`indices_expr` are Python expressions (over ``np`` and
    ``ml_dtypes``) that rebuild ``data`` and ``indices``: a failure's reproducer uses them.
    """

    name: str
    group: str
    data: np.ndarray
    indices: np.ndarray
    axis: int
    opset: int
    expected: np.ndarray | None
    raises: type[Exception] | None
    data_expr: str

    @property
    def indices_expr(self) -> str:
        return _literal(self.indices)

    @property
    def dtype(self) -> str:
        return _dtype_name(self.data.dtype)

    @property
    def needs(self) -> str:
        """The imports a reproducer needs besides numpy (space-separated module names)."""
        needs = ["ml_dtypes"] if "ml_dtypes." in self.data_expr else []
        if "gatherx._conformance" in self.data_expr:
            needs.append("gatherx._conformance")
        return " ".join(needs)


def cases(dtypes: Collection[str] | None = None) -> list[ConformanceCase]:
    """The whole suite, in run order; only cases whose data dtype is in ``dtypes`` if given.

    Dtype names are gatherx's (``float32``, ``bfloat16``, ``string``, ``datetime64[s]``).
    bfloat16 cases need ``ml_dtypes``, the official ONNX cases ``onnx``; without them those
    cases are left out.
    """
    found = _all_cases()
    if dtypes is None:
        return list(found)
    wanted = set(dtypes)
    return [c for c in found if c.dtype in wanted]


def case(name: str) -> ConformanceCase:
    """The case called ``name`` (as a failure's reproducer names it)."""
    for c in _all_cases():
        if c.name == name:
            return c
    msg = f"no conformance case named {name!r}"
    raise KeyError(msg)


def groups(selected: list[ConformanceCase]) -> list[str]:
    """The groups of ``selected``, in run order."""
    return list(dict.fromkeys(c.group for c in selected))


def to_numpy(x: Any) -> np.ndarray:
    """An array of any library as NumPy: NumPy, torch, JAX, Dask and cubed (computed),
    pydata sparse (densified), ndonnx (unwrapped), else DLPack or ``np.asarray``."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    top = type(x).__module__.partition(".")[0]
    if top == "torch":
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: go through float32
            import ml_dtypes

            return x.float().numpy().astype(ml_dtypes.bfloat16)
        return np.asarray(x.numpy())
    if top == "sparse":
        return np.asarray(x.todense())
    if top == "ndonnx":
        return np.asarray(x.unwrap_numpy())
    if top == "array_api_strict":
        # array-api-strict hides __array__; its wrapped NumPy array is the value.
        import array_api_strict as xps

        return np.asarray(xps.asarray(x, copy=True)._array)
    if hasattr(x, "compute") and callable(x.compute):  # Dask, cubed: lazy until computed
        return to_numpy(x.compute())
    if hasattr(x, "__dlpack__"):
        try:
            return host_copy(x)
        except (BufferError, TypeError, ValueError, RuntimeError):
            pass
    return np.asarray(x)


def expected_grad(c: ConformanceCase, grad: np.ndarray) -> np.ndarray | type[Exception]:
    """The gradient of ``c``'s gather for the output gradient ``grad``, by NumPy's add.at,
    or the exception gather_grad must raise (its indices are those of the latest opset)."""
    size = c.data.shape[c.axis]
    if c.dtype not in _GRAD_DTYPES:
        return TypeError
    if c.indices.size and not _in_range(c.indices, size, 13):
        return IndexError
    # Integer-valued gradients sum exactly in any order: a wide float accumulator rounded once
    # is the exact result whatever the library sums in; integers sum in their own dtype, whose
    # wrap-around does not depend on the order either.
    kind = "f" if c.dtype == "bfloat16" else grad.dtype.kind
    wide = {"c": np.complex128, "f": np.float64}.get(kind, grad.dtype)
    out = np.zeros(c.data.shape, dtype=wide)
    where: Any = (slice(None),) * (c.axis % c.data.ndim) + (c.indices,)
    np.add.at(out, where, grad.astype(wide))
    return out.astype(grad.dtype)


def grad_for(c: ConformanceCase) -> tuple[np.ndarray, str]:
    """An output gradient for ``c`` of small integers in its data dtype (gather_grad must
    refuse it for non-numeric dtypes), and the expression that builds it."""
    ax = c.axis % c.data.ndim
    shape = (*c.data.shape[:ax], *c.indices.shape, *c.data.shape[ax + 1 :])
    n = int(np.prod(shape))
    # Beyond 2**53 where the data is: a sum through float64 loses these.
    big = " + 2**60" if c.data.dtype.kind in "iu" and c.data.size and c.data.max() > 2**53 else ""
    expr = f"(np.arange({n}) % 7 + 1{big}).reshape({shape!r}).astype({_dtype_expr(c.data.dtype)})"
    return _evaluate(expr), expr


# ---------------------------------------------------------------------------------------------

_GRAD_DTYPES = frozenset(DTYPES) - {"bool", "string"}


def _dtype_name(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "USO" else dtype.name


def _in_range(indices: np.ndarray, size: int, opset: int) -> bool:
    # Read from the specification, independently of gatherx's own rules: this suite checks them.
    low = -size if opset >= 11 else 0
    return bool(((indices >= low) & (indices <= size - 1)).all())


def _evaluate(expr: str) -> np.ndarray:
    # The data is built from the very expression a failure's reproducer shows, so the two agree.
    names: dict[str, Any] = {"np": np}
    if "ml_dtypes." in expr:
        import ml_dtypes

        names["ml_dtypes"] = ml_dtypes
    return np.asarray(eval(expr, names))


def _dtype_expr(dtype: np.dtype) -> str:
    if dtype.name == "bfloat16":
        return "ml_dtypes.bfloat16"
    if dtype.kind in "US":
        return "str"
    return repr(dtype.name)


def _literal(a: np.ndarray) -> str:
    if a.size == 0:
        return f"np.zeros({a.shape!r}, dtype={_dtype_expr(a.dtype)})"
    return f"np.array({a.tolist()!r}, dtype={_dtype_expr(a.dtype)})"


def _arange_expr(shape: tuple[int, ...], dtype: str) -> str:
    """Distinct values (where the dtype allows) of ``shape`` and ``dtype``, as an expression."""
    n = int(np.prod(shape))
    base = f"np.arange({n}).reshape({shape!r})"
    if dtype == "bool":
        return f"({base} % 2 == 1)"
    if dtype == "string":
        return f"{base}.astype(str)"
    if dtype == "bfloat16":
        return f"{base}.astype(ml_dtypes.bfloat16)"
    if dtype.startswith("complex"):
        return f"(np.arange({n}) * (1 - 2j)).reshape({shape!r}).astype({dtype!r})"
    if dtype == "float128":
        return f"{base}.astype(np.longdouble)"
    return f"{base}.astype({dtype!r})"


class _Builder:
    """Collects cases with unique names; each expectation comes from np.take."""

    def __init__(self) -> None:
        self.cases: list[ConformanceCase] = []
        self._names: set[str] = set()

    def add(self, group: str, shape: tuple[int, ...], indices: Any, axis: int, *,
            dtype: str = _GRID_DTYPE, index_dtype: str = "int64", opset: int = 13,
            raises: type[Exception] | None = None) -> None:  # fmt: skip
        self.add_expr(group, _arange_expr(shape, dtype), indices, axis,
                      index_dtype=index_dtype, opset=opset, raises=raises)  # fmt: skip

    def add_expr(self, group: str, expr: str, indices: Any, axis: int, *,
                 index_dtype: str = "int64", opset: int = 13,
                 raises: type[Exception] | None = None) -> None:  # fmt: skip
        idx = np.asarray(indices, dtype=index_dtype)
        self.add_case(group, _evaluate(expr), expr, idx, axis, opset, raises)

    def add_case(self, group: str, data: np.ndarray, data_expr: str, idx: np.ndarray,
                 axis: int, opset: int, raises: type[Exception] | None = None,
                 expected: np.ndarray | None = None, name: str | None = None) -> None:  # fmt: skip
        if raises is None and expected is None:
            size = data.shape[axis]
            if idx.size and not _in_range(idx, size, opset):
                raises = IndexError
            else:
                expected = np.take(data, idx, axis=axis)
        if name is None:
            index = "scalar" if idx.ndim == 0 else "x".join(map(str, idx.shape))
            shape = "x".join(map(str, data.shape)) or "scalar"
            name = f"{group}/{_dtype_name(data.dtype)}-{shape}-axis{axis}-indices{index}"
        unique, k = name, 1
        while unique in self._names:
            k += 1
            unique = f"{name}-{k}"
        self._names.add(unique)
        self.cases.append(
            ConformanceCase(unique, group, data, idx, axis, opset, expected, raises, data_expr)
        )


def _axes(rank: int) -> Iterator[tuple[int, int]]:
    """(axis, size) for every axis of the rank's data shape."""
    shape = _SHAPES[rank]
    for axis in range(rank):
        yield axis, shape[axis]


def _reference(b: _Builder, group: str, found: list[Case]) -> None:
    for c in found:
        expr = (
            _literal(c.data)
            if c.data.size <= _LITERAL_LIMIT
            else f"gatherx._conformance.case('{group}/{c.name}').data"
        )
        b.add_case(group, c.data, expr, c.indices, c.axis, c.opset, expected=c.expected,
                   name=f"{group}/{c.name}")  # fmt: skip


def _grid(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        for axis, s in _axes(rank):
            g = f"grid-rank{rank}"
            b.add(g, shape, s - 1, axis)
            b.add(g, shape, [s - 1, 0, 1 % s], axis)
            b.add(g, shape, [[0, s - 1, 1 % s], [1 % s, 0, s - 1]], axis)
            b.add(g, shape, [1 % s, s - 1], axis - rank)  # the axis spelled negatively


def _permutations(b: _Builder) -> None:
    # The output has the data's shape: an implementation that returns its input unchanged
    # when the shapes agree (cubed 0.27's take with chunked data) fails here.
    for rank, shape in _SHAPES.items():
        for axis, s in _axes(rank):
            b.add("permutation", shape, list(range(s))[::-1], axis)
            b.add("permutation", shape, [*range(1, s), 0], axis)
        s = shape[0]
        b.add("permutation", shape, [-k for k in range(1, s + 1)], 0)
    b.add("permutation", (4, 6), [[1, 0], [-2, 3]], 0)
    b.add("permutation", (4, 6), [1, 0, 2, 3], 0)


def _duplicates(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        for axis in sorted({0, rank - 1}):
            s = shape[axis]
            b.add("duplicates", shape, [0] * s, axis)  # same shape as the data
            b.add("duplicates", shape, [s - 1, s - 1, 0, 0, s - 1], axis)
            b.add("duplicates", shape, [[1, 1], [1, -s + 1]], axis)


def _negative(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        for axis, s in _axes(rank):
            b.add("negative", shape, [-1, -s, 0, s - 1], axis)
            b.add("negative", shape, [-k for k in range(s, 0, -1)], axis)
            b.add("negative", shape, [[-1, 0], [-s, 1 % s]], axis)


def _scalar(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        for axis in range(rank):
            b.add("scalar", shape, 0, axis)
            b.add("scalar", shape, -1, axis)


def _empty(b: _Builder) -> None:
    empty = np.zeros((0,), dtype=np.int64)
    b.add("empty", (5,), empty, 0)
    for axis in (0, 1):
        b.add("empty", (4, 3), empty, axis)
        b.add("empty", (4, 3), np.zeros((2, 0), dtype=np.int64), axis)
        b.add("empty", (4, 3), np.zeros((0, 2), dtype=np.int64), axis)
    b.add("empty", (3, 4, 2), empty, 1)
    b.add("empty", (2, 3, 4, 2), np.zeros((0, 3), dtype=np.int64), 3)


def _zero_size(b: _Builder) -> None:
    empty = np.zeros((0,), dtype=np.int64)
    b.add("zero-size", (0,), empty, 0)
    b.add("zero-size", (3, 0), [2, -1, 0], 0)
    b.add("zero-size", (3, 0), empty, 1)
    b.add("zero-size", (0, 3), [2, 0], 1)
    b.add("zero-size", (0, 3), np.zeros((2, 0), dtype=np.int64), 0)
    b.add("zero-size", (2, 0, 3), [[1]], 2)
    # No index is valid on an axis of size 0.
    b.add("zero-size", (0, 3), [0], 0)
    b.add("zero-size", (0,), 0, 0)
    b.add("zero-size", (2, 0), [-1], 1)


def _out_of_bounds(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        for axis, s in _axes(rank):
            b.add("out-of-bounds", shape, [0, s], axis)
            b.add("out-of-bounds", shape, [-s - 1], axis)
        s = shape[0]
        b.add("out-of-bounds", shape, s, 0)
        b.add("out-of-bounds", shape, [[0, 1], [1 % s, s + 5]], 0)
    b.add("out-of-bounds", (4, 3), [1, 2**40], 0)
    b.add("out-of-bounds", (4, 3), [1, -(2**40)], 1)
    b.add("out-of-bounds", (4, 3), [0, 2**31 - 1], 1, index_dtype="int32")
    b.add("out-of-bounds", (4, 3), [-(2**31)], 0, index_dtype="int32")


def _index_int32(b: _Builder) -> None:
    for rank, shape in _SHAPES.items():
        axis, s = rank - 1, shape[-1]
        b.add("indices-int32", shape, [s - 1, -1, 0], axis, index_dtype="int32")
        b.add("indices-int32", shape, -s, 0, index_dtype="int32")
        b.add("indices-int32", shape, [[0], [-s]], axis, index_dtype="int32")


def _opsets(b: _Builder) -> None:
    # Negative indices are valid from Gather-11 on, bfloat16 data from Gather-13 on.
    for opset in (1, 10, 11, 12):
        b.add("opsets", (4, 3), [2, 0], 0, opset=opset)
        b.add("opsets", (4, 3), [-1, 0], 1, opset=opset)
        b.add("opsets", (4, 3), -4, 0, opset=opset)
    if _has_bfloat16():
        b.add("opsets", (4, 3), [1], 0, dtype="bfloat16", opset=12, raises=TypeError)


def _dtypes(b: _Builder) -> None:
    for dtype in DTYPES:
        if dtype == "bfloat16" and not _has_bfloat16():
            continue
        g = f"dtype-{dtype}"
        b.add(g, (3, 4), [2, -1, 0], 0, dtype=dtype)
        b.add(g, (3, 4), [[3, 0], [-2, 1]], 1, dtype=dtype)
        b.add(g, (3, 4), -1, 1, dtype=dtype)
        b.add(g, (3, 4), [2, 0, 1], 0, dtype=dtype)
        b.add(g, (3, 4), [3], 0, dtype=dtype)
        if dtype in _WIDE:
            # Values a float64 cannot hold: a lossy detour through floats shows here.
            b.add_expr(g, _WIDE[dtype], [[2, -1], [0, 1]], 1)


def _refused(b: _Builder) -> None:
    for dtype in REFUSED_DTYPES:
        if dtype == "float128" and np.dtype(np.longdouble).itemsize <= 8:
            continue
        b.add("refused-dtype", (3, 4), [1, 0], 0, dtype=dtype, raises=TypeError)


@functools.cache
def _has_bfloat16() -> bool:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _all_cases() -> tuple[ConformanceCase, ...]:
    b = _Builder()
    with contextlib.suppress(ImportError):  # no onnx: no official cases
        _reference(b, "onnx", list(onnx_cases()))
    _reference(b, "spec", spec_examples())
    _grid(b)
    for add in (_permutations, _duplicates, _negative, _scalar, _empty, _zero_size,
                _out_of_bounds, _index_int32, _opsets, _dtypes, _refused):  # fmt: skip
        add(b)
    return tuple(b.cases)


__all__ = ["DTYPES", "ConformanceCase", "case", "cases", "expected_grad", "grad_for", "to_numpy"]
