"""cubed, ndonnx and pydata sparse through the generic array-API backend, against ``np.take``.

Every library runs the ONNX cases, the spec's examples and a grid (ranks 1-4, every axis,
index ranks 0-2, permutations, duplicates, negatives, empty and zero-size), for ``gather`` and
``gather_grad``, with host indices and the library's own, and every ONNX dtype it holds.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import grads_at_the_rank_limit, need, numpy_max_rank, run_python

import gatherx
from gatherx._cases import all_cases

RNG = np.random.default_rng(20261201)


@dataclasses.dataclass(frozen=True)
class Library:
    """How a library holds a host array and how its result is read back (checking its kind)."""

    label: str
    module: str
    #: The ONNX dtypes the library computes with (see docs/support.md).
    dtypes: tuple[str, ...]
    hold: Callable[[np.ndarray], Any]
    read: Callable[[Any], np.ndarray]
    index: Callable[[np.ndarray], Any]


NUMERIC = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
           "uint16", "uint32", "uint64")  # fmt: skip
COMPLEX = ("complex64", "complex128")
FULL_WIDTH = tuple(n for n in NUMERIC if n != "float16")


def _cubed_hold(host: np.ndarray) -> Any:
    cx = need("cubed.array_api")
    # Two blocks along every axis, so that each gather crosses block boundaries.
    chunks = tuple(max(1, (n + 1) // 2) for n in host.shape)
    return cx.asarray(host, chunks=chunks)


def _cubed_read(x: Any) -> np.ndarray:
    assert type(x).__module__.startswith("cubed"), type(x)
    return np.asarray(x.compute())


def _sparse_hold(fmt: str) -> Callable[[np.ndarray], Any]:
    def hold(host: np.ndarray) -> Any:
        sparse = need("sparse")
        return sparse.COO.from_numpy(host).asformat(fmt)

    return hold


def _sparse_read(fmt: str) -> Callable[[Any], np.ndarray]:
    def read(x: Any) -> np.ndarray:
        assert x.format == fmt, f"format {x.format}, expected {fmt}"
        return np.asarray(x.todense())

    return read


def _ndonnx_hold(host: np.ndarray) -> Any:
    return need("ndonnx").asarray(host)


def _ndonnx_read(x: Any) -> np.ndarray:
    assert type(x).__module__.startswith("ndonnx"), type(x)
    return np.asarray(x.unwrap_numpy())


LIBRARIES = [
    Library("cubed", "cubed", (*NUMERIC, "bool", *COMPLEX, "string"), _cubed_hold,
            _cubed_read, _cubed_hold),
    Library("ndonnx", "ndonnx", (*NUMERIC, "bool", "string"), _ndonnx_hold, _ndonnx_read,
            _ndonnx_hold),
    Library("sparse-coo", "sparse", (*NUMERIC, "bfloat16", "bool", *COMPLEX, "string"),
            _sparse_hold("coo"), _sparse_read("coo"), _sparse_hold("coo")),
    # GCXS compiles with numba, which has no float16 or bfloat16.
    Library("sparse-gcxs", "sparse", (*FULL_WIDTH, "bool", *COMPLEX, "string"),
            _sparse_hold("gcxs"), _sparse_read("gcxs"), _sparse_hold("coo")),
]  # fmt: skip
BY_LABEL = {lib.label: lib for lib in LIBRARIES}


@pytest.fixture(params=[lib.label for lib in LIBRARIES])
def lib(request: pytest.FixtureRequest) -> Library:
    library = BY_LABEL[request.param]
    need(library.module)
    return library


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype.kind == "U":  # ndonnx's strings come back at their own width
        assert got.dtype.kind == "U", f"dtype {got.dtype} != {want.dtype}"
    else:
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got, want)


def wrapped(indices: np.ndarray, size: int) -> np.ndarray:
    return np.where(indices < 0, indices + size, indices)


def scatter_oracle(shape: tuple[int, ...], indices: np.ndarray, grad: np.ndarray, axis: int):
    acc = np.zeros(shape, dtype=np.float32 if grad.dtype.name == "float16" else grad.dtype)
    rows = grad.reshape((*shape[:axis], indices.size, *shape[axis + 1 :]))
    where: Any = (*(slice(None),) * axis, wrapped(indices, shape[axis]).reshape(-1))
    np.add.at(acc, where, rows)
    return acc.astype(grad.dtype)


def small_ints(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values whose sums are exact in any order and any of the numeric dtypes."""
    return RNG.integers(0, 5, size=shape).astype(dtype)


def run_gather(lib: Library, data: np.ndarray, indices: np.ndarray, axis: int, opset: int, kind):
    idx = indices if kind == "host" else lib.index(indices)
    with warnings.catch_warnings():
        # Zarr (cubed's storage) calls its string dtype unstable; the values are exact.
        warnings.filterwarnings("ignore", "The data type .* does not have a Zarr V3")
        return lib.read(gatherx.gather(lib.hold(data), idx, axis=axis, opset=opset))


def run_grad(lib: Library, shape: tuple[int, ...], indices: np.ndarray, grad: np.ndarray, axis):
    return lib.read(gatherx.gather_grad(shape, lib.index(indices), lib.hold(grad), axis=axis))


# -- the reference cases ------------------------------------------------------------------

REFERENCE = all_cases()


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize("case", REFERENCE, ids=[c.name for c in REFERENCE])
def test_gather_reference_cases(lib, case, kind):
    got = run_gather(lib, case.data, case.indices, case.axis, case.opset, kind)
    assert_same(got, case.expected)


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize("case", REFERENCE, ids=[c.name for c in REFERENCE])
def test_gather_grad_reference_cases(lib, case, kind):
    grad = small_ints(case.expected.shape, np.float32)
    shape = case.data.shape
    idx = case.indices if kind == "host" else lib.index(case.indices)
    got = lib.read(gatherx.gather_grad(shape, idx, lib.hold(grad), axis=case.axis))
    assert_same(got, scatter_oracle(shape, case.indices, grad, case.axis))


# -- the grid -----------------------------------------------------------------------------

SHAPES = {1: (5,), 2: (4, 3), 3: (3, 4, 2), 4: (2, 3, 4, 2)}


def _index_sets(size: int) -> dict[str, np.ndarray]:
    reverse = np.arange(size)[::-1].copy()
    return {
        "scalar": np.array(size - 1),
        "negative-scalar": np.array(-size),
        # As long as the axis: the output shape equals the data's (cubed's shortcut).
        "permutation": reverse,
        "permutation-negative": np.where(reverse % 2 == 1, reverse - size, reverse),
        "duplicates": np.array([0, size - 1, 0, -1, -size, 0]),
        "matrix": np.array([[size - 1, 0, -1], [0, -size, size - 1]]),
        "empty": np.zeros(0, dtype=np.int64),
        "empty-matrix": np.zeros((2, 0), dtype=np.int64),
    }


GRID = [
    (rank, axis, name, idx.astype(np.int64 if k % 2 else np.int32))
    for rank, shape in SHAPES.items()
    for axis in range(rank)
    for k, (name, idx) in enumerate(_index_sets(shape[axis]).items())
]
GRID_IDS = [f"r{rank}-axis{axis}-{name}" for rank, axis, name, _ in GRID]


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize(("rank", "axis", "name", "indices"), GRID, ids=GRID_IDS)
def test_gather_grid(lib, rank, axis, name, indices, kind):
    data = np.arange(np.prod(SHAPES[rank]), dtype=np.float32).reshape(SHAPES[rank]) - 7
    got = run_gather(lib, data, indices, axis, 13, kind)
    assert_same(got, np.take(data, indices, axis=axis))


@pytest.mark.parametrize(("rank", "axis", "name", "indices"), GRID, ids=GRID_IDS)
def test_gather_grad_grid(lib, rank, axis, name, indices):
    shape = SHAPES[rank]
    grad = small_ints((*shape[:axis], *indices.shape, *shape[axis + 1 :]), np.float64)
    host = lib.read(gatherx.gather_grad(shape, indices, lib.hold(grad), axis=axis))
    native = run_grad(lib, shape, indices, grad, axis)
    want = scatter_oracle(shape, indices, grad, axis)
    assert_same(host, want)
    assert_same(native, want)


ZERO_SIZE = [
    ((0, 3), 1, np.array([2, -1])),
    ((4, 0), 0, np.array([[1, 1], [-4, 3]])),
    ((0, 3), 0, np.zeros(0, dtype=np.int64)),
    ((2, 0, 3), 2, np.array(1)),
]


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize(("shape", "axis", "indices"), ZERO_SIZE, ids=str)
def test_zero_size(lib, shape, axis, indices, kind):
    data = np.zeros(shape, dtype=np.float32)
    assert_same(run_gather(lib, data, indices, axis, 13, kind), np.take(data, indices, axis))
    grad = np.zeros((*shape[:axis], *indices.shape, *shape[axis + 1 :]), dtype=np.float32)
    got = run_grad(lib, shape, indices, grad, axis)
    assert_same(got, scatter_oracle(shape, indices, grad, axis))


# -- dtypes -------------------------------------------------------------------------------


def _dtyped(name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name == "string":
        return np.array([f"s{k}" for k in range(int(np.prod(shape)))]).reshape(shape)
    if name == "bfloat16":
        return np.arange(np.prod(shape)).reshape(shape).astype(need("ml_dtypes").bfloat16)
    if name == "bool":
        return (np.arange(np.prod(shape)) % 3 == 0).reshape(shape)
    values = np.arange(np.prod(shape)).reshape(shape) + 1
    return (values * (1 + 1j) if name.startswith("complex") else values).astype(name)


DTYPE_CASES = [(lib.label, name) for lib in LIBRARIES for name in lib.dtypes]


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize(("label", "name"), DTYPE_CASES, ids=[f"{a}-{b}" for a, b in DTYPE_CASES])
def test_every_dtype(label, name, kind):
    lib = BY_LABEL[label]
    need(lib.module)
    data = _dtyped(name, (4, 3))
    indices = np.array([[2, 0], [-1, 1]])
    for axis in (0, 1):  # slices of several elements, and of one
        got = run_gather(lib, data, indices, axis, 13, kind)
        assert_same(got, np.take(data, indices, axis=axis))
    if name not in ("bool", "string"):
        grad = _dtyped(name, (4, 2, 2))
        got = run_grad(lib, (4, 3), indices, grad, 1)
        assert_same(got, scatter_oracle((4, 3), indices, grad, 1))


@pytest.mark.parametrize("name", ["int64", "uint64"])
def test_wide_integers_are_exact(lib, name):
    """Values beyond 2**53, which a sum through float64 would round."""
    big = np.array([[2**62 + 1, 3], [2**61 + 7, 2**60 + 1], [5, 2**62 + 3]], dtype=np.int64)
    data = big.astype(name) if name == "int64" else big.astype(np.uint64) * np.uint64(2) + 1
    indices = np.array([2, 0, 2, -1, 1])
    assert_same(run_gather(lib, data, indices, 0, 13, "native"), np.take(data, indices, axis=0))
    grad = np.take(data, indices, axis=0)
    got = run_grad(lib, data.shape, indices, grad, 0)
    assert_same(got, scatter_oracle(data.shape, indices, grad, 0))


# -- bad input: gatherx's errors, never the library's ---------------------------------------


def _numpy_error(data: np.ndarray, indices: Any, **kwargs: Any) -> str:
    with pytest.raises(IndexError) as info:
        gatherx.gather(data, indices, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("kind", ["host", "native"])
@pytest.mark.parametrize("bad", [[0, 4], [[1, -5], [9, 0]], -6])
def test_out_of_range_is_gatherx_index_error(lib, bad, kind):
    data = np.arange(8.0).reshape(4, 2)
    host = np.asarray(bad)
    want = _numpy_error(data, host)
    idx = host if kind == "host" else lib.index(host)
    with pytest.raises(IndexError) as info:
        # A lazy library raises when its graph computes, an eager one at the call.
        lib.read(gatherx.gather(lib.hold(data), idx))
    assert str(info.value) == want


@pytest.mark.parametrize("kind", ["host", "native"])
def test_gather_grad_out_of_range(lib, kind):
    host = np.array([1, 4])
    want = "gather_grad: indices element out of data bounds, idx=4 at position (1,)"
    idx = host if kind == "host" else lib.index(host)
    with pytest.raises(IndexError, match=want.replace("(", r"\(").replace(")", r"\)")):
        lib.read(gatherx.gather_grad((4, 2), idx, lib.hold(np.ones((2, 2)))))


def test_negative_before_opset_11_refused(lib):
    data = np.arange(8.0).reshape(4, 2)
    want = _numpy_error(data, [-1], opset=10)
    with pytest.raises(IndexError) as info:
        lib.read(gatherx.gather(lib.hold(data), lib.index(np.array([-1])), opset=10))
    assert str(info.value) == want


def test_non_integer_indices_are_type_errors(lib):
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        gatherx.gather(lib.hold(np.arange(3.0)), lib.index(np.array([0.0, 1.0])))
    if lib.module in ("cubed", "sparse"):  # they hold object arrays: named as NumPy names them
        with pytest.raises(
            TypeError, match=r"int32 or int64 \((cubed|sparse)\), got dtype object$"
        ):
            gatherx.gather(lib.hold(np.arange(3.0)), lib.index(np.array([1, 0], object)))


def test_indices_of_another_namespace_are_type_errors():
    """Data and indices from two array-API libraries: refused, neither converted."""
    data, ids = _ndonnx_hold(np.arange(3.0)), _cubed_hold(np.array([0, 1]))
    with pytest.raises(TypeError) as info:
        gatherx.gather(data, ids)
    # the words of every other mix of frameworks
    assert re.fullmatch(
        r"gather: indices are a cubed\S* \(cubed\) but data is an? ndonnx\S* \(ndonnx\); "
        r"pass indices from the data's framework, a NumPy array or Python ints",
        str(info.value),
    ), str(info.value)


# -- cubed: lazy, whatever the chunks, on several executors ----------------------------------


def _cubed():
    cubed = need("cubed")
    return cubed, need("cubed.array_api")


@pytest.mark.parametrize("chunks", [(1, 1), (2, 2), (3, 5), (4, 6)], ids=str)
@pytest.mark.parametrize("axis", [0, 1])
def test_cubed_permutations_whatever_the_chunks(chunks, axis):
    _, cx = _cubed()
    data = np.arange(24.0).reshape(4, 6)
    x = cx.asarray(data, chunks=chunks)
    for seed in range(4):
        perm = np.random.default_rng(seed).permutation(data.shape[axis])
        for idx in (perm, perm - data.shape[axis], perm.reshape(2, -1)):
            want = np.take(data, idx, axis=axis)
            assert_same(np.asarray(gatherx.gather(x, idx, axis=axis).compute()), want)
            native = cx.asarray(idx, chunks=(1,) * idx.ndim)
            assert_same(np.asarray(gatherx.gather(x, native, axis=axis).compute()), want)


def test_cubed_own_take_shortcut_upstream():
    """The reproducer in docs/support.md: cubed's own take returns the data itself for a
    permutation of the whole axis. Once cubed fixes it, this fails here. (Asserted as it is,
    not as an expected failure: pytest's formatting of a failure beside cubed's threads can
    trip CPython 3.11's AST recursion-depth check, python/cpython#106905.)"""
    _, cx = _cubed()
    data = np.arange(24.0).reshape(4, 6)
    x = cx.asarray(data, chunks=(2, 2))
    rows = np.array([1, 0, 2, 3])
    got = np.asarray(cx.take(x, cx.asarray(rows), axis=0).compute())
    assert not np.array_equal(data[rows], data)  # the permutation moves rows
    assert np.array_equal(got, data), "cubed's take gathers now: update docs/support.md"


def test_cubed_builds_without_computing():
    cubed, cx = _cubed()
    x = cx.asarray(np.arange(24.0).reshape(4, 6), chunks=(2, 2))
    bad = cx.asarray(np.array([0, 9]), chunks=(1,))
    with cubed.raise_if_computes():
        out = gatherx.gather(x, bad)
        grad = gatherx.gather_grad((4, 6), bad, cx.asarray(np.ones((2, 6)), chunks=(1, 3)))
    for lazy in (out, grad):
        with pytest.raises(IndexError, match="idx=9 at position"):
            lazy.compute()


def test_cubed_first_bad_index_over_blocks():
    _, cx = _cubed()
    x = cx.asarray(np.arange(24.0).reshape(4, 6), chunks=(2, 2))
    host = np.array([[0, 1, 2], [7, 3, -8]])
    want = _numpy_error(np.arange(24.0).reshape(4, 6), host)
    with pytest.raises(IndexError) as info:
        gatherx.gather(x, cx.asarray(host, chunks=(1, 1))).compute()
    assert str(info.value) == want


def test_cubed_multiprocess_executor():
    cubed, cx = _cubed()
    spec = cubed.Spec(allowed_mem="500MB", executor_name="processes",
                      executor_options={"max_workers": 2})  # fmt: skip
    data = np.arange(60.0).reshape(6, 10)
    x = cx.asarray(data, chunks=(2, 3), spec=spec)
    perm = cx.asarray(np.array([5, -1, 0, 3, 2, 1]), chunks=(2,), spec=spec)
    assert_same(np.asarray(gatherx.gather(x, perm).compute()), data[[5, 5, 0, 3, 2, 1]])
    grad = cx.asarray(np.ones((6, 10)), chunks=(3, 5), spec=spec)
    want = scatter_oracle((6, 10), np.array([5, -1, 0, 3, 2, 1]), np.ones((6, 10)), 0)
    assert_same(np.asarray(gatherx.gather_grad((6, 10), perm, grad).compute()), want)
    bad = cx.asarray(np.array([0, 1, 6]), chunks=(1,), spec=spec)
    with pytest.raises(IndexError, match="idx=6 at position"):
        gatherx.gather(x, bad).compute()


def test_cubed_bfloat16_is_a_clear_type_error():
    _, cx = _cubed()
    data = cx.asarray(np.ones(3, dtype=need("ml_dtypes").bfloat16))
    with pytest.raises(TypeError, match="cubed cannot compute with data of dtype bfloat16"):
        gatherx.gather(data, [0])


# -- ndonnx: the gather built into the ONNX graph ----------------------------------------------


def _ndonnx_run(inputs: dict[str, Any], out: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ndx, onnx, ort = need("ndonnx"), need("onnx"), need("onnxruntime")
    model = ndx.build(inputs, {"out": out})
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_ndonnx_graph_is_one_gather():
    ndx = need("ndonnx")
    data = ndx.argument(shape=("N", 6), dtype=ndx.float32)
    index = ndx.argument(shape=("K",), dtype=ndx.int64)
    model = ndx.build({"data": data, "index": index}, {"out": gatherx.gather(data, index)})
    compute = [n.op_type for n in model.graph.node if n.op_type != "Identity"]
    assert compute == ["Gather"]
    host = RNG.standard_normal((5, 6)).astype(np.float32)
    for idx in ([4, -1, 0, 0, 2], [], [-5]):
        idx = np.asarray(idx, dtype=np.int64)
        got = _ndonnx_run({"data": data, "index": index}, gatherx.gather(data, index),
                          {"data": host, "index": idx})  # fmt: skip
        assert_same(got, np.take(host, idx, axis=0))


GRAPH_INDEX = [((), np.int64), (("K",), np.int32), (("K", "J"), np.int64), ((2, 3), np.int32)]


@pytest.mark.parametrize(("index_shape", "index_dtype"), GRAPH_INDEX, ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_ndonnx_graph_symbolic_dims(axis, index_shape, index_dtype):
    ndx = need("ndonnx")
    data = ndx.argument(shape=("A", 4, "C"), dtype=ndx.float64)
    index = ndx.argument(shape=index_shape, dtype=ndx.from_numpy_dtype(np.dtype(index_dtype)))
    host = RNG.standard_normal((3, 4, 5))
    size = host.shape[axis]
    concrete = tuple(2 if d == "K" else 3 if d == "J" else d for d in index_shape)
    idx = RNG.integers(-size, size, size=concrete).astype(index_dtype)
    out = gatherx.gather(data, index, axis=axis)
    got = _ndonnx_run({"data": data, "index": index}, out, {"data": host, "index": idx})
    assert_same(got, np.take(host, idx, axis=axis))


def test_ndonnx_graph_host_indices_and_gather_grad():
    ndx = need("ndonnx")
    data = ndx.argument(shape=("N", 3), dtype=ndx.float32)
    host = RNG.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[0, -1], [2, 2]])
    got = _ndonnx_run({"data": data}, gatherx.gather(data, idx, axis=0), {"data": host})
    assert_same(got, np.take(host, idx, axis=0))
    grad = ndx.argument(shape=(2, 2, 3), dtype=ndx.float32)
    index = ndx.argument(shape=(2, 2), dtype=ndx.int64)
    g = small_ints((2, 2, 3), np.float32)
    out = gatherx.gather_grad((4, 3), index, grad)
    got = _ndonnx_run({"grad": grad, "index": index}, out, {"grad": g, "index": idx})
    assert_same(got, scatter_oracle((4, 3), idx, g, 0))
    ops = {n.op_type for n in ndx.build({"grad": grad, "index": index}, {"out": out}).graph.node}
    assert {"Equal", "Where", "CumSum"} <= ops, ops  # the masked sum the docs describe


def test_ndonnx_gather_grad_refuses_a_grad_of_symbolic_shape():
    """The masked sum is built at the grad's shape: a dimension known only when the graph
    runs is a ValueError naming the shape, before any node is built (not spox's own error)."""
    ndx = need("ndonnx")
    for grad_shape, index_shape in [(("K", 6), ("K",)), ((2, "M"), (2,)), (("K", 6), (2,))]:
        grad = ndx.argument(shape=grad_shape, dtype=ndx.float32)
        index = ndx.argument(shape=index_shape, dtype=ndx.int64)
        with pytest.raises(ValueError, match=r"^gather_grad: grad has shape \((None|2), "):
            gatherx.gather_grad((5, 6), index, grad)
        with pytest.raises(ValueError, match=r"^gather_grad: grad has shape .*None"):
            gatherx.gather_grad((5, 6), [0, 1], grad)


def test_ndonnx_graph_values_checked_by_the_runtime():
    ndx, ort = need("ndonnx"), need("onnxruntime")
    data = ndx.argument(shape=("N", 2), dtype=ndx.float32)
    index = ndx.argument(shape=("K",), dtype=ndx.int64)
    host = np.ones((3, 2), dtype=np.float32)
    grad = ndx.argument(shape=(2, 2), dtype=ndx.float32)
    pair = ndx.argument(shape=(2,), dtype=ndx.int64)
    for out, feeds in [
        (gatherx.gather(data, index), {"data": host, "index": np.array([0, 3])}),
        # Before opset 11 a negative index is bad: the model's runtime refuses it too.
        (gatherx.gather(data, index, opset=10), {"data": host, "index": np.array([0, -1])}),
        (gatherx.gather_grad((3, 2), pair, grad), {"grad": host[:2], "pair": np.array([3, 0])}),
    ]:
        named = {"data": data, "index": index, "grad": grad, "pair": pair}
        inputs = {k: v for k, v in named.items() if k in feeds}
        with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                           match="out of data bounds"):  # fmt: skip
            _ndonnx_run(inputs, out, feeds)


def test_ndonnx_graph_host_indices_bad_for_any_size():
    """An axis of symbolic size: what no size makes valid is refused when the graph is built."""
    ndx = need("ndonnx")
    data = ndx.argument(shape=("N", 2), dtype=ndx.float32)
    with pytest.raises(IndexError, match=r"idx=-1 at position \(1,\) .* \[0,s-1\] for axis 0"):
        gatherx.gather(data, [0, -1], opset=10)
    with pytest.raises(IndexError, match=r"idx=18446744073709551616 at position \(1,\)"):
        gatherx.gather(data, [0, 2**64])
    with pytest.raises(IndexError, match=r"idx=-\d+ at position \(0, 1\) .* \[-s,s-1\]") as info:
        gatherx.gather(data, [[0, -(2**64)]])
    assert "need opset" not in str(info.value)  # negatives are valid at opset 13


def test_ndonnx_graph_strings():
    """onnxruntime's string Gather copies one element per index unless the axis is last."""
    ndx = need("ndonnx")
    data = ndx.argument(shape=("N", 3), dtype=ndx.utf8)
    index = ndx.argument(shape=("K",), dtype=ndx.int64)
    host = np.array([f"s{k}" for k in range(12)]).reshape(4, 3)
    idx = np.array([3, -4, 1])
    got = _ndonnx_run({"data": data, "index": index}, gatherx.gather(data, index),
                      {"data": host, "index": idx})  # fmt: skip
    assert got.tolist() == np.take(host, idx, axis=0).tolist()


def test_ndonnx_eager_out_of_range_is_gatherx_error():
    ndx = need("ndonnx")
    data = np.arange(6.0).reshape(3, 2)
    want = _numpy_error(data, np.array([0, 7]))
    with pytest.raises(IndexError) as info:
        gatherx.gather(ndx.asarray(data), ndx.asarray(np.array([0, 7])))
    assert str(info.value) == want


def test_ndonnx_nullable_dtype_refused():
    ndx = need("ndonnx")
    masked = ndx.asarray(np.arange(3.0), dtype=ndx.nfloat64)
    with pytest.raises(TypeError, match="is not an ONNX Gather type"):
        gatherx.gather(masked, [0])


# -- pydata sparse: the result keeps the format ------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "indices"),
    [("coo", [[4, 0], [-1, 2]]), ("gcxs", [[4, 0], [-1, 2]]), ("csr", [4, 0, -1]), ("csc", [3, 3])],
)
def test_sparse_result_keeps_format(fmt, indices):
    sparse = need("sparse")
    host = RNG.integers(0, 3, (5, 4)).astype(np.float64)
    x = sparse.COO.from_numpy(host).asformat(fmt)
    out = gatherx.gather(x, indices, axis=0)
    assert type(out) is type(x)
    assert_same(np.asarray(out.todense()), np.take(host, indices, axis=0))


def test_sparse_fill_value_is_kept():
    sparse = need("sparse")
    host = np.full((4, 3), 7.0)
    host[1, 2] = 0.0
    x = sparse.COO.from_numpy(host, fill_value=7.0)
    out = gatherx.gather(x, [1, 1, -3], axis=0)
    assert out.fill_value == 7.0
    assert_same(np.asarray(out.todense()), host[[1, 1, 1]])
    grad = sparse.COO.from_numpy(np.full((3, 3), 2.0), fill_value=2.0)
    got = gatherx.gather_grad((4, 3), [1, 1, -3], grad)
    assert_same(np.asarray(got.todense()), scatter_oracle((4, 3), np.array([1, 1, -3]),
                                                          np.full((3, 3), 2.0), 0))  # fmt: skip


def test_sparse_dok_refused_with_the_fix():
    sparse = need("sparse")
    with pytest.raises(TypeError, match=r"asformat\('coo'\)"):
        gatherx.gather(sparse.DOK.from_numpy(np.eye(3)), [0])


# -- the first call in a process ---------------------------------------------------------------

FIRST_CALLS = {
    "cubed": """
import numpy as np, cubed.array_api as cx, gatherx
host = np.arange(24.0).reshape(4, 6)
x = cx.asarray(host, chunks=(2, 2))
assert (gatherx.gather(x, [1, 0, 2, 3]).compute() == host[[1, 0, 2, 3]]).all()
try:
    gatherx.gather(x, cx.asarray(np.array([0, 4]), chunks=(1,))).compute()
except IndexError as e:
    assert "idx=4 at position (1,)" in str(e), e
else:
    raise AssertionError("no IndexError")
""",
    "ndonnx": """
import numpy as np, ndonnx as ndx, gatherx
data = ndx.argument(shape=("N", 6), dtype=ndx.float32)
index = ndx.argument(shape=("K",), dtype=ndx.int64)
model = ndx.build({"data": data, "index": index}, {"out": gatherx.gather(data, index)})
assert [n.op_type for n in model.graph.node if n.op_type != "Identity"] == ["Gather"]
""",
    "sparse": """
import numpy as np, sparse, gatherx
x = sparse.COO.from_numpy(np.eye(4))
out = gatherx.gather(x, [[3, -1], [0, 2]])
assert isinstance(out, sparse.COO) and (out.todense() == np.eye(4)[[[3, 3], [0, 2]]]).all()
""",
}


@pytest.mark.parametrize("module", sorted(FIRST_CALLS))
def test_first_call_in_a_fresh_process(module):
    need(module)
    run_python(FIRST_CALLS[module])


# -- the conformance suite, as users run it ---------------------------------------------------

#: Each library's array-API namespace, as `gatherx check --namespace` takes it.
NAMESPACES = {"cubed": "cubed.array_api", "ndonnx": "ndonnx", "sparse": "sparse"}


@pytest.mark.parametrize("module", sorted(NAMESPACES))
def test_gatherx_check_passes_on_the_namespace(module):
    """`gatherx check --namespace` in a process of its own: every case it runs passes (the
    slowest test here, so it shares the run's workers with the others)."""
    need(module)
    args = [sys.executable, "-m", "gatherx", "check", "--namespace", NAMESPACES[module]]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]  # "passed: N passed, 0 failed, M skipped"
    passed, failed = (int(summary.split()[k]) for k in (1, 3))
    assert (passed > 0, failed) == (True, 0), done.stdout[-3000:]


@pytest.mark.parametrize(("label", "fewer"), [("cubed", 0), ("sparse-coo", 1)])
def test_results_past_the_librarys_rank_are_refused(label, fewer):
    """cubed and pydata sparse compute with NumPy arrays: a result of more dimensions than
    they can hold (NumPy's limit; one fewer in sparse, which ravels coordinates with NumPy)
    is refused when the call is made (cubed's own error would come at compute time), one at
    the limit is gathered."""
    library = BY_LABEL[label]
    need(library.module)
    limit = numpy_max_rank() - fewer
    data = library.hold(np.arange(2.0).reshape((2,) + (1,) * 19))
    name = library.module
    at_limit = np.ones((1,) * (limit - 19), np.int64)
    with pytest.raises(ValueError, match=f"rank {limit + 1}, more than the {limit} dimensions"
                       f" an? {name} array can have"):  # fmt: skip
        gatherx.gather(data, np.ones((1,) * (limit - 18), np.int64))
    got = library.read(gatherx.gather(data, at_limit))
    assert got.shape == (1,) * limit
    assert got.item() == 1.0

    if label == "cubed":  # gradients past NumPy's add.at (32 dimensions; cubed's blocks and
        # pydata sparse's coordinates have limits of their own further on)

        def hold(x: Any) -> Any:
            return library.hold(x) if isinstance(x, np.ndarray) else library.read(x)

        for grad in grads_at_the_rank_limit(hold, 48):
            np.testing.assert_array_equal(*grad)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_ndonnx_gather_grad_adds_in_index_order_whatever_the_table(monkeypatch, dtype):
    """Every slot's sum is np.add.at's bits (term after term in index order; half precision
    summed in float32, rounded once), whatever the table's size and however its rows fall
    into the masked sums' blocks (onnxruntime's ReduceSum adds a row in another order as the
    block holds more rows: 200 x 0.1 read 20.00004 in a table of one row and 19.99999 in one
    of more)."""
    ndx = need("ndonnx")
    from gatherx._backends import array_api

    n = 512
    rng = np.random.default_rng(7)
    grad = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    grad[::7] = 0.1
    wide = np.float32 if dtype == "float16" else dtype
    for size, block in ((1, None), (2, None), (5, None), (5, 4 * n), (64, 3 * n)):
        if block:
            monkeypatch.setattr(array_api, "_BLOCK_ELEMENTS", block)
        idx = rng.integers(-size, size, n)
        got = gatherx.gather_grad((size,), ndx.asarray(idx), ndx.asarray(grad)).unwrap_numpy()
        want = np.zeros(size, wide)
        np.add.at(want, idx, grad.astype(wide))
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                      want.astype(dtype).view(f"u{got.itemsize}"))  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "values"),
    [("float32", [-0.0]), ("float32", [-0.0, -0.0, -0.0]), ("int64", [2**62, 2**62, -(2**62) + 3]),
     ("uint64", [2**64 - 1, 2**63, 5]), ("int8", [100, 100, -7]), ("uint32", [2**32 - 1, 2])],
)  # fmt: skip
def test_ndonnx_gather_grad_exact_sums_and_signed_zeros(dtype, values):
    """-0.0 terms alone sum to +0.0, as a sum into zeros; integers wrap as NumPy's do, exact
    past 2^53 (onnxruntime's ReduceSum rounds 64-bit integers through float64)."""
    ndx = need("ndonnx")
    grad = np.array(values, dtype)
    for idx in (np.zeros(len(values), np.int64), np.arange(len(values)) - len(values)):
        got = gatherx.gather_grad((len(values),), ndx.asarray(idx), ndx.asarray(grad))
        want = np.zeros(len(values), dtype)
        np.add.at(want, idx, grad)
        got = got.unwrap_numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{got.itemsize}"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("index", [[0, 0], [0], [[0, 1], [0, 0]]])
def test_sparse_gather_grad_negative_zeros_sum_to_positive_zero(dtype, index):
    """Stored -0.0 slices, one or several into a slot, give the +0.0 a sum into zeros gives
    (np.add.at's), where sparse's own sum of duplicates started from the first stored -0.0."""
    sparse = need("sparse")
    idx = np.asarray(index)
    grad = np.full(idx.shape, -0.0, dtype)
    want = np.zeros(2, dtype)
    np.add.at(want, idx, grad)
    got = gatherx.gather_grad((2,), idx, sparse.COO.from_numpy(grad)).todense()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
