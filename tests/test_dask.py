"""Dask arrays: lazy gather and gather_grad, checked against NumPy, with compute counting."""

from __future__ import annotations

import math
import re
import threading
import tracemalloc

import numpy as np
import pytest
from support import need

import gatherx

dask = need("dask")
da = need("dask.array")

RNG = np.random.default_rng(20240611)
DATA = RNG.standard_normal((7, 10, 3))

# Chunkings of DATA: one block, blocks along every axis, irregular blocks.
CHUNKS = [(7, 10, 3), (3, 4, 2), ((1, 4, 2), (5, 1, 4), (1, 2))]
INDEX_SHAPES = [(), (5,), (2, 3), (0,), (4, 0)]


def _forbidden(*args, **kwargs):
    raise AssertionError("gatherx computed a Dask graph while only building one")


def _indices(shape, size, dtype=np.int64):
    return RNG.integers(-size, size, size=shape).astype(dtype)


def _dask_indices(host):
    return da.from_array(host, chunks=2) if host.ndim else da.from_array(host)


@pytest.mark.parametrize("chunks", CHUNKS, ids=["one-block", "blocks", "irregular"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("shape", INDEX_SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_gather_matches_numpy(chunks, axis, shape, kind):
    data = da.from_array(DATA, chunks=chunks)
    host = _indices(shape, DATA.shape[axis])
    indices = host if kind == "numpy" else _dask_indices(host)
    want = np.take(DATA, host, axis=axis)
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(data, indices, axis=axis)
    assert isinstance(out, da.Array)
    assert out.shape == want.shape
    assert out.dtype == want.dtype
    got = out.compute()
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("grad_chunks", [-1, 2, 1], ids=["one-block", "blocks-of-2", "blocks-of-1"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("shape", INDEX_SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_gather_grad_matches_a_loop(grad_chunks, axis, shape, kind):
    host = _indices(shape, DATA.shape[axis])
    out_shape = np.take(DATA, host, axis=axis).shape
    # Integer-valued float grads: every summation order gives the same exact sums.
    grad_np = RNG.integers(-8, 8, size=out_shape).astype(np.float64)
    grad = da.from_array(grad_np, chunks=grad_chunks)
    indices = host if kind == "numpy" else _dask_indices(host)
    norm = axis % DATA.ndim
    want = np.zeros(DATA.shape)
    moved = np.moveaxis(want, norm, 0)
    g = grad_np.reshape((*DATA.shape[:norm], -1, *DATA.shape[norm + 1 :]))
    for j, i in enumerate(np.where(host < 0, host + DATA.shape[norm], host).reshape(-1)):
        moved[i] += np.take(g, j, axis=norm)
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather_grad(DATA.shape, indices, grad, axis=axis)
    assert isinstance(out, da.Array)
    assert out.shape == DATA.shape
    np.testing.assert_array_equal(out.compute(), want)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_gather_grad_float_duplicates(kind):
    host = np.array([[3, 3, -4], [0, 6, 3]])
    grad_np = RNG.standard_normal((7, 2, 3, 3))
    indices = host if kind == "numpy" else da.from_array(host, chunks=(1, 2))
    out = gatherx.gather_grad(
        DATA.shape, indices, da.from_array(grad_np, chunks=(3, 1, 2, 2)), axis=1
    )
    want = np.zeros(DATA.shape)
    np.add.at(want, (slice(None), np.where(host < 0, host + 10, host)), grad_np)
    np.testing.assert_allclose(out.compute(), want, rtol=1e-12, atol=1e-12)


def test_dtypes_and_index_types():
    words = np.array(["ab", "c", "def", "g", "hi"])
    got = gatherx.gather(da.from_array(words, chunks=2), np.array([4, 0, -2], np.int32))
    assert got.dtype == words.dtype
    np.testing.assert_array_equal(got.compute(), words[[4, 0, 3]])
    flags = np.array([[True, False], [False, False], [True, True]])
    got = gatherx.gather(da.from_array(flags, chunks=1), [[2], [0]], axis=0)
    np.testing.assert_array_equal(got.compute(), flags[[[2], [0]]])
    ints = np.arange(12, dtype=np.int16).reshape(3, 4)
    idx = da.from_array(np.array([3, -1, 0], np.int32), chunks=1)
    got = gatherx.gather(da.from_array(ints, chunks=2), idx, axis=1)
    np.testing.assert_array_equal(got.compute(), ints[:, [3, 3, 0]])


class _CountingSource:
    """A lazy array whose blocks are made from their block id, counted as they are made."""

    def __init__(self, rows: int, cols: int, block_rows: int, dtype=np.float64) -> None:
        self.rows, self.cols, self.block_rows, self.dtype = rows, cols, block_rows, dtype
        self.made: list[int] = []
        self._lock = threading.Lock()

    def value(self, rows, cols):
        return rows[..., None] * 1000.0 + cols

    def _make(self, block_id=None):
        start = block_id[0] * self.block_rows
        with self._lock:
            self.made.append(block_id[0])
        rows = np.arange(start, min(start + self.block_rows, self.rows), dtype=np.float64)
        return self.value(rows, np.arange(self.cols, dtype=np.float64)).astype(self.dtype)

    def array(self):
        n = -(-self.rows // self.block_rows)
        sizes = (self.block_rows,) * (n - 1) + (self.rows - self.block_rows * (n - 1),)
        return da.map_blocks(
            self._make,
            chunks=(sizes, (self.cols,)),
            dtype=self.dtype,
            meta=np.empty((0, 0), self.dtype),
        )


def test_reads_only_the_blocks_its_numpy_indices_touch():
    source = _CountingSource(1000, 4, 100)
    idx = np.array([[5, 999, -1], [250, 251, 5]])
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(source.array(), idx)
    assert source.made == []
    got = out.compute()
    np.testing.assert_array_equal(
        got, source.value(np.where(idx < 0, idx + 1000, idx), np.arange(4.0))
    )
    # Rows 5, 250/251 and 999 live in blocks 0, 2 and 9; each is read once.
    assert sorted(source.made) == [0, 2, 9]


def test_dask_indices_stay_lazy_too():
    source = _CountingSource(60, 3, 10)
    computed = []
    idx_np = np.array([59, 0, 13, 13])
    indices = da.from_array(idx_np, chunks=2).map_blocks(
        lambda b: computed.append(b.size) or b, dtype=idx_np.dtype, meta=idx_np[:0]
    )
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(source.array(), indices)
        grad = gatherx.gather_grad((60, 3), indices, da.ones((4, 3), chunks=2))
    assert source.made == []
    assert computed == []
    np.testing.assert_array_equal(out.compute(), source.value(idx_np, np.arange(3.0)))
    want = np.zeros((60, 3))
    np.add.at(want, idx_np, 1.0)
    np.testing.assert_array_equal(grad.compute(), want)
    assert sum(computed) == 2 * idx_np.size  # each index block read once per compute


def test_gather_larger_than_memory():
    """An 8 TiB lazy array (far beyond this machine's 24 GiB): only the touched blocks are made."""
    rows, cols, block = 2**32, 256, 2**12
    source = _CountingSource(rows, cols, block)
    data = source.array()
    assert data.nbytes == 8 * 2**40
    idx = RNG.integers(-rows, rows, size=(4, 16))
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(data, idx)
    tracemalloc.start()
    try:
        got = out.compute()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rows_read = np.where(idx < 0, idx + rows, idx)
    np.testing.assert_array_equal(got, source.value(rows_read, np.arange(cols, dtype=np.float64)))
    assert sorted(source.made) == sorted(set((rows_read // block).reshape(-1).tolist()))
    # 64 blocks of 8 MiB are made, a few at a time; nothing near the 8 TiB.
    assert peak < 256 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"


RANGE = "of indices must be within the inclusive range"
OOB_CASES = [
    # indices, axis, opset, message (the eager one, position in the whole index array)
    ([1, 2, 9, 7, -9], 0, 13, f"idx=9 at position (2,) {RANGE} [-7,6] for axis 0 of size 7"),
    (
        [[0, 1, 2], [3, 4, 10]],
        1,
        13,
        f"idx=10 at position (1, 2) {RANGE} [-10,9] for axis 1 of size 10",
    ),
    (
        [0, 2, -1, -2],
        -1,
        10,
        f"idx=-1 at position (2,) {RANGE} [0,2] for axis 2 of size 3 "
        "(negative indices need opset >= 11)",
    ),
]


@pytest.mark.parametrize(("indices", "axis", "opset", "message"), OOB_CASES)
def test_out_of_bounds_numpy_indices_raise_at_once(indices, axis, opset, message):
    data = da.from_array(DATA, chunks=2)
    expected = "gather: indices element out of data bounds, " + message
    with pytest.raises(IndexError) as eager:
        gatherx.gather(DATA, np.array(indices), axis=axis, opset=opset)
    assert str(eager.value) == expected
    with pytest.raises(IndexError, match=re.escape(expected) + "$"):
        gatherx.gather(data, np.array(indices), axis=axis, opset=opset)


@pytest.mark.parametrize(("indices", "axis", "opset", "message"), OOB_CASES)
def test_out_of_bounds_dask_indices_raise_at_compute(indices, axis, opset, message):
    data = da.from_array(DATA, chunks=2)
    expected = "gather: indices element out of data bounds, " + message
    indices = da.from_array(np.array(indices), chunks=1)  # the bad ones sit in later blocks
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(data, indices, axis=axis, opset=opset)
    with pytest.raises(IndexError, match=re.escape(expected) + "$"):
        out.compute()
    # Any single output block reports the same first bad index.
    with pytest.raises(IndexError, match=re.escape(expected) + "$"):
        out.blocks[(0,) * out.ndim].compute()


def test_gather_grad_out_of_bounds():
    grad = da.ones((3, 2), chunks=1)
    expected = (
        "gather_grad: indices element out of data bounds, idx=-5 at position (2,) of indices must "
        "be within the inclusive range [-4,3] for axis 0 of size 4"
    )
    with pytest.raises(IndexError, match=re.escape(expected) + "$"):
        gatherx.gather_grad((4, 2), np.array([0, 3, -5]), grad)
    out = gatherx.gather_grad((4, 2), da.from_array(np.array([0, 3, -5]), chunks=1), grad)
    with pytest.raises(IndexError, match=re.escape(expected) + "$"):
        out.compute()


def test_mixed_frameworks_are_refused():
    with pytest.raises(TypeError, match="indices are a dask"):
        gatherx.gather(DATA, da.from_array(np.array([0, 1])))


def test_sparse_gradients_are_refused_before_building_a_graph(monkeypatch):
    monkeypatch.setattr(da.Array, "__getitem__", _forbidden)
    data = da.from_array(DATA, chunks=3)
    with pytest.raises(TypeError, match="a PyTorch gradient layout; dask arrays have none"):
        gatherx.gather(data, [0, 1], sparse_grad=True)
    with pytest.raises(TypeError, match=r"sparse=True asks for a torch\.sparse_coo gradient"):
        gatherx.gather_grad(DATA.shape, [0], da.from_array(DATA[:1]), sparse=True)


# Zero-size dimensions: before, on and after the gathered axis, ranks 1 to 3.
ZERO_SIZE_CASES = [
    # data shape, axis
    ((0,), 0),
    ((0, 5), 1),
    ((3, 0), 0),
    ((3, 0), 1),
    ((0, 4, 3), 1),
    ((2, 0, 3), 1),
    ((2, 3, 0), 1),
    ((2, 0, 3), 0),
    ((0, 2, 0), 1),
]
# Valid on every axis of size >= 2 (and spanning several blocks of size 1 or 2); on an empty
# axis, every index but those of the empty index arrays is out of range.
ZERO_SIZE_INDICES = [
    np.array([], np.int64),
    np.zeros((2, 0), np.int32),
    np.array([1, -1, 1]),
    np.array([[-2], [1]]),
    np.array(0),
]
ZERO_SIZE_CHUNKS = [1, 2, "auto"]


def _zero_size_id(case):
    shape, axis = case
    return f"{shape}-axis{axis}"


def _chunked(host, chunks):
    return da.from_array(host, chunks=chunks if host.ndim else ())


def _eager_error(call):
    """The IndexError a call on NumPy arrays raises, or None."""
    try:
        call()
    except IndexError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("chunks", ZERO_SIZE_CHUNKS, ids=str)
@pytest.mark.parametrize("host", ZERO_SIZE_INDICES, ids=lambda h: f"indices{h.shape}")
@pytest.mark.parametrize("case", ZERO_SIZE_CASES, ids=_zero_size_id)
def test_zero_size_gather_matches_numpy(case, host, chunks, kind):
    shape, axis = case
    data_np = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    data = da.from_array(data_np, chunks=chunks)
    indices = host if kind == "numpy" else _chunked(host, chunks)
    if shape[axis] == 0 and host.size:
        with pytest.raises(IndexError):
            np.take(data_np, host, axis=axis)
        expected = _eager_error(lambda: gatherx.gather(data_np, host, axis=axis))
        assert expected is not None
        assert "axis" in expected
        assert "of data has size 0" in expected
        if kind == "numpy":  # checked as the graph is built
            with pytest.raises(IndexError) as built:
                gatherx.gather(data, indices, axis=axis)
            assert str(built.value) == expected
            return
        with dask.config.set(scheduler=_forbidden):
            out = gatherx.gather(data, indices, axis=axis)
        with pytest.raises(IndexError) as computed:
            out.compute()
        assert str(computed.value) == expected
        return
    want = np.take(data_np, host, axis=axis)
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(data, indices, axis=axis)
    assert out.shape == want.shape
    got = out.compute()
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=["float64", "float16"])
@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("chunks", ZERO_SIZE_CHUNKS, ids=str)
@pytest.mark.parametrize("host", ZERO_SIZE_INDICES, ids=lambda h: f"indices{h.shape}")
@pytest.mark.parametrize("case", ZERO_SIZE_CASES, ids=_zero_size_id)
def test_zero_size_gather_grad_matches_numpy(case, host, chunks, kind, dtype):
    shape, axis = case
    grad_shape = (*shape[:axis], *host.shape, *shape[axis + 1 :])
    # Small integers: exact in float16, and in any summation order.
    grad_np = (np.arange(math.prod(grad_shape)) % 5).astype(dtype).reshape(grad_shape)
    grad = da.from_array(grad_np, chunks=chunks)
    indices = host if kind == "numpy" else _chunked(host, chunks)
    where = (slice(None),) * axis + (host,)
    if shape[axis] == 0 and host.size:
        with pytest.raises(IndexError):
            np.add.at(np.zeros(shape), where, grad_np)
        expected = _eager_error(lambda: gatherx.gather_grad(shape, host, grad_np, axis=axis))
        assert expected is not None
        assert expected.startswith("gather_grad: ")
        assert "of data has size 0" in expected
        if kind == "numpy":
            with pytest.raises(IndexError) as built:
                gatherx.gather_grad(shape, indices, grad, axis=axis)
            assert str(built.value) == expected
            return
        with dask.config.set(scheduler=_forbidden):
            out = gatherx.gather_grad(shape, indices, grad, axis=axis)
        with pytest.raises(IndexError) as computed:
            out.compute()
        assert str(computed.value) == expected
        return
    want = np.zeros(shape)
    np.add.at(want, where, grad_np.astype(np.float64))
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather_grad(shape, indices, grad, axis=axis)
    assert out.shape == shape
    got = out.compute()
    assert got.shape == shape
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_zero_size_reported_calls():
    data_np = np.zeros((0, 5))
    got = gatherx.gather(da.zeros((0, 5), chunks=(1, 3)), da.from_array(np.array([-4])), axis=1)
    want = np.take(data_np, np.array([-4]), axis=1)
    np.testing.assert_array_equal(got.compute(), want)
    assert got.compute().shape == want.shape == (0, 1)
    got = gatherx.gather_grad((3, 0), [1], da.ones((1, 0))).compute()
    want = np.zeros((3, 0))
    np.add.at(want, [1], np.ones((1, 0)))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("grad_chunks", "index_chunks"), [(-1, -1), (100, 7), (1, 1000), ("auto", "auto")], ids=str
)
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_float16_gather_grad_rounds_once(grad_chunks, index_chunks, kind):
    host = np.zeros(2000, np.int64)
    host[1::4] = -1  # a second slot, with its duplicates spread over the blocks too
    grad_np = np.full((2000, 2), 0.1, np.float16)
    indices = host if kind == "numpy" else da.from_array(host, chunks=index_chunks)
    grad = da.from_array(grad_np, chunks=(grad_chunks, 1))
    got = gatherx.gather_grad((3, 2), indices, grad).compute()
    want = np.zeros((3, 2))
    np.add.at(want, host, grad_np.astype(np.float64))
    want = want.astype(np.float16)  # summed exactly, rounded once
    assert got.dtype == np.float16
    assert float(want[0, 0]) == pytest.approx(1500 * 0.1, rel=1e-3)
    # Within one float16 step of the once-rounded sum; float16 partial sums drift far off.
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2**-10)


# Out-of-range indices, each raised with the text the same call on NumPy data raises.
OOB_PARITY_CASES = [
    # data shape, indices, axis, opset
    ((7, 10, 3), [1, 2, 9, 7, -9], 0, 13),
    ((7, 10, 3), [[0, 1, 2], [3, 4, 10]], 1, 13),
    ((7, 10, 3), [[0, -11], [12, 1]], -2, 11),
    ((7, 10, 3), [0, 2, -1, -2], -1, 10),
    ((7, 10, 3), [[[5, 3]], [[0, 0]]], 2, 1),
    ((7, 10, 3), 8, 2, 13),
    ((4,), [3, -4, 4, -5], 0, 13),
    ((0,), [0], 0, 13),
    ((3, 0), [[1, 0]], 1, 13),
    ((0, 5), [2, 5, -6], 1, 13),
    ((2, 0, 3), [0, 1, 3, -4], 2, 13),
    ((2, 3, 0), [-1, -4], 1, 13),
]


# gather_grad takes negative indices: the opset-10 case is valid there.
GRAD_OOB_PARITY_CASES = [case for case in OOB_PARITY_CASES if case[3] != 10]


def _oob_id(case):
    shape, indices, axis, opset = case
    return f"{shape}-{np.asarray(indices).shape}-axis{axis}-opset{opset}"


@pytest.mark.parametrize("chunks", [1, 2, "auto"], ids=str)
@pytest.mark.parametrize("case", OOB_PARITY_CASES, ids=_oob_id)
def test_out_of_bounds_text_matches_numpy_data(case, chunks):
    shape, indices, axis, opset = case
    host = np.array(indices)
    data_np = np.zeros(shape)
    if opset >= 11 and data_np.size:  # np.take checks nothing when there is nothing to take
        with pytest.raises(IndexError):
            np.take(data_np, host, axis=axis)
    expected = _eager_error(lambda: gatherx.gather(data_np, host, axis=axis, opset=opset))
    assert expected is not None
    assert expected.startswith("gather: indices element out of data bounds, idx=")
    data = da.from_array(data_np, chunks=chunks)
    with pytest.raises(IndexError) as built:
        gatherx.gather(data, host, axis=axis, opset=opset)
    assert str(built.value) == expected
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather(data, _chunked(host, chunks), axis=axis, opset=opset)
    with pytest.raises(IndexError) as computed:
        out.compute()
    assert str(computed.value) == expected


@pytest.mark.parametrize("chunks", [1, 2, "auto"], ids=str)
@pytest.mark.parametrize("case", GRAD_OOB_PARITY_CASES, ids=_oob_id)
def test_gather_grad_out_of_bounds_text_matches_numpy_data(case, chunks):
    shape, indices, axis, _ = case
    host = np.array(indices)
    norm = axis % len(shape)
    grad_np = np.ones((*shape[:norm], *host.shape, *shape[norm + 1 :]))
    with pytest.raises(IndexError):
        np.add.at(np.zeros(shape), (slice(None),) * norm + (host,), grad_np)
    expected = _eager_error(lambda: gatherx.gather_grad(shape, host, grad_np, axis=axis))
    assert expected is not None
    assert expected.startswith("gather_grad: indices element out of data bounds, idx=")
    grad = da.from_array(grad_np, chunks=chunks)
    with pytest.raises(IndexError) as built:
        gatherx.gather_grad(shape, host, grad, axis=axis)
    assert str(built.value) == expected
    with dask.config.set(scheduler=_forbidden):
        out = gatherx.gather_grad(shape, _chunked(host, chunks), grad, axis=axis)
    with pytest.raises(IndexError) as computed:
        out.compute()
    assert str(computed.value) == expected


def test_unknown_chunk_sizes():
    masked = da.from_array(DATA, chunks=3)[da.from_array(np.arange(7) > 1, chunks=3)]  # nan rows
    expected = np.take(DATA[2:], [0, -1], axis=1)
    np.testing.assert_array_equal(gatherx.gather(masked, [0, -1], axis=1).compute(), expected)
    with pytest.raises(ValueError, match=r"^gather: data has unknown chunk sizes; call \.compute"):
        gatherx.gather(masked, [0, -1])
    ids = da.from_array(np.array([0, 3, 5]), chunks=2)
    with pytest.raises(ValueError, match=r"^gather: indices has unknown chunk sizes"):
        gatherx.gather(da.from_array(DATA), ids[ids > 0])
    # gather_grad's result has the shape given, so the grad's chunks are compared with it
    # everywhere: unknown sizes are refused off the axis as well as along it
    with pytest.raises(ValueError, match=r"^gather_grad: grad has unknown chunk sizes; call"):
        gatherx.gather_grad((5, 10, 6), [0, 5, -1], masked, axis=2)
    with pytest.raises(ValueError, match=r"^gather_grad: grad has unknown chunk sizes; call"):
        gatherx.gather_grad((7, 10, 3), np.arange(5), masked)


def test_chunks_other_than_numpy_arrays_are_refused_at_the_call(monkeypatch):
    monkeypatch.setattr(da.Array, "__getitem__", _forbidden)
    masked = np.ma.masked_array(DATA, mask=DATA > 1)
    data = da.from_array(masked, chunks=3)
    fix = r"gatherx computes Dask arrays of NumPy chunks\); convert the chunks first"
    with pytest.raises(TypeError, match=r"^gather: data of type .*chunks are numpy\.MaskedArray"):
        gatherx.gather(data, [6, 0])
    with pytest.raises(TypeError, match=f"^gather_grad: grad of type .*{fix}"):
        gatherx.gather_grad((9, 10, 3), [8, 0], da.from_array(masked[:2], chunks=3))
    ids = da.from_array(np.ma.masked_array([1, 0], mask=[0, 1]), chunks=1)
    with pytest.raises(TypeError, match=f"^gather: indices of type .*{fix}"):
        gatherx.gather(da.from_array(DATA), ids)


def test_gather_and_gather_grad_in_one_graph_name_their_own_call():
    data = da.from_array(np.arange(12.0).reshape(6, 2), chunks=3)
    ids = da.from_array(np.array([0, 6]), chunks=1)
    outs = {"gather_grad": gatherx.gather_grad((6, 2), ids, da.ones((2, 2), chunks=1)),
            "gather": gatherx.gather(data, ids)}  # fmt: skip
    # one graph holding both (as dask.compute(a, b) makes), either merged first
    graphs = [dict(out.__dask_graph__()) for out in outs.values()]
    for merged in ({**graphs[0], **graphs[1]}, {**graphs[1], **graphs[0]}):
        for fn, out in outs.items():
            with pytest.raises(IndexError, match=f"^{fn}: indices element out of data bounds"):
                dask.get(merged, out.__dask_keys__())
