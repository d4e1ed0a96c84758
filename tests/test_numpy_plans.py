"""Every NumPy forward plan gatherx/_strategy.py can pick computes np.take's result exactly."""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gatherx
from gatherx import _strategy as st
from gatherx._backends import numpy as nb

# (data shape, axis, index shape): one outer row with rows of 4, 8, 16, 32 and 256 bytes,
# inner and last axes, rank 4 with a 2-D index, 1-D data, scalar indices.
SHAPES = [
    ((50,), 0, (30,)),
    ((40, 1), 0, (7, 3)),
    ((40, 2), 0, (64,)),
    ((40, 4), 0, (64,)),
    ((40, 8), 0, (200,)),
    ((40, 64), 0, (5,)),
    ((6, 30), 1, (20,)),
    ((3, 4, 30), -1, (2, 5)),
    ((4, 5, 6, 3), 2, (2, 4)),
    ((7, 9), 1, ()),
    ((9,), 0, ()),
]


def indices_for(size: int, shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """Every valid index value is likely, about half of them negative, the extremes included."""
    rng = np.random.default_rng(seed)
    idx = np.asarray(rng.integers(-size, size, size=shape), dtype=dtype)
    if idx.size >= 2:
        idx.reshape(-1)[:2] = (-size, size - 1)
    return idx


def data_for(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    values = np.arange(math.prod(shape)).reshape(shape)
    if dtype == "bool":
        return values % 3 == 0
    if np.dtype(dtype).kind == "c":
        return (values * (1 - 2j)).astype(dtype)
    return values.astype(dtype)


@pytest.mark.parametrize("plan", nb.FORWARD_PLANS)
@pytest.mark.parametrize(("shape", "axis", "index_shape"), SHAPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool", "complex64"])
def test_every_plan_matches_take(plan, shape, axis, index_shape, index_dtype, dtype):
    data = data_for(shape, dtype)
    idx = indices_for(shape[axis], index_shape, index_dtype)
    want = np.take(data, idx, axis=axis)  # np.take maps negative indices as Gather does
    got = nb.take_by_plan(plan, data, idx, axis % data.ndim)
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("plan", [None, *nb.FORWARD_PLANS])  # None: the automatic choice
@pytest.mark.parametrize("dtype", ["float32", ">f4", "<i8", ">i2", "bool", "complex128", "object"])
@pytest.mark.parametrize("step", [1, 3])
def test_rank_0_result_keeps_the_dtype(plan, dtype, step):
    data = np.array([3, 1, 4, 1, 5] * step, dtype=dtype)[::step]
    for value in (-5, -1, 0, 4):
        got = nb.take_by_plan(plan, data, np.array(value), 0)
        assert type(got) is np.ndarray
        assert got.shape == ()
        assert got.dtype == data.dtype
        assert got[()] == data[value]
        assert not np.shares_memory(got, data)
    for bad in (5, -6):
        with pytest.raises(IndexError):
            nb.take_by_plan(plan, data, np.array(bad), 0)


@pytest.mark.parametrize("dtype", [">f4", ">i8", "<f8"])
@pytest.mark.parametrize(("shape", "axis", "index_shape"), SHAPES)
def test_byte_order_is_kept(dtype, shape, axis, index_shape):
    data = data_for(shape, "float64").astype(dtype)
    idx = indices_for(shape[axis], index_shape, "int64", seed=1)
    want = np.take(data, idx, axis=axis)
    got = gatherx.gather(data, idx, axis=axis)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, want)
    for plan in nb.FORWARD_PLANS:
        got = nb.take_by_plan(plan, data, idx, axis % data.ndim)
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got, want)


def strided_views(shape: tuple[int, ...]) -> list[np.ndarray]:
    """Non-contiguous data of ``shape``: every other element, and a transpose (of rank >= 2)."""
    every_other = data_for((*shape[:-1], 2 * shape[-1]), "float32")[..., ::2]
    assert not every_other.flags.c_contiguous
    views = [every_other]
    if len(shape) > 1 and shape[0] > 1 and shape[-1] > 1:
        views.append(data_for(shape[::-1], "float32").T)
        assert not views[-1].flags.c_contiguous
    return views


@pytest.mark.parametrize(
    ("shape", "axis", "n", "fancy"),
    [((2, 500, 2), 1, 1000, False),  # short rows: a step per pair, the copy is cheaper
     ((999, 2, 3), 1, 3, False), ((4, 91, 2), 1, 9, False), ((2, 300, 8), 1, 2, True),
     ((386, 4096), 0, 129, True),  # long rows: read where they lie, up to 4x the data
     ((11, 4096), 0, 31, True), ((11, 4096), 0, 44, False),
     ((300, 200), 1, 299, True), ((300, 200), 1, 800, False),  # columns: a loop per index
     ((2, 50000), 1, 781, True), ((2, 50000), 1, 6250, False),
     ((8, 1000), 1, 125, True), ((8, 1000), 1, 500, False),
     ((50000,), 0, 6250, True), ((1, 50000), 1, 25000, True)],  # 1-D: one loop
)  # fmt: skip
def test_non_contiguous_data_fancy_or_copied(shape, axis, n, fancy):
    """Non-contiguous data is read where it lies by fancy indexing, or copied for the
    contiguous data's plan, by the output's size against the data's, each inner loop of
    fancy indexing (a row per (outer row, index) pair of rows longer than one element, a
    column per index) counted as a step of its own; values as np.take's either way."""
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    plan = st.numpy_forward_plan(pre, shape[axis], n, post, 4, contiguous=False)
    assert (plan == "fancy") is fancy
    (data, *_) = strided_views(shape)
    idx = indices_for(shape[axis], (n,), "int64", seed=5)
    np.testing.assert_array_equal(gatherx.gather(data, idx, axis=axis), np.take(data, idx, axis))


@pytest.mark.parametrize("plan", nb.FORWARD_PLANS)
@pytest.mark.parametrize(("shape", "axis", "index_shape"), SHAPES)
def test_non_contiguous_data(plan, shape, axis, index_shape):
    for data in strided_views(shape):
        idx = indices_for(shape[axis], index_shape, "int64", seed=2)
        want = np.take(data, idx, axis=axis)
        np.testing.assert_array_equal(nb.take_by_plan(plan, data, idx, axis % data.ndim), want)
        np.testing.assert_array_equal(gatherx.gather(data, idx, axis=axis), want)


# Shapes on which numpy_forward_plan takes each branch: (plan, data shape, axis, n indices).
BRANCHES = [
    ("raise", (5, 4), 0, 4),  # small output
    ("raise", (100, 16), 1, 100),  # small output, inner axis
    ("rows1d", (100000,), 0, 20000),  # one outer row, 4-byte rows
    ("rows1d", (1000, 4), 0, 20000),  # 16-byte rows
    ("doubled", (1000, 8), 0, 20000),  # 32-byte rows, data 1/20 of the output
    ("raise", (4000, 8), 0, 20000),  # 32-byte rows, data too large to repeat
    ("raise", (1000, 64), 0, 2000),  # long rows
    ("wrap", (64, 300, 1), 1, 512),  # last axis
    ("wrap", (64, 300, 4), 1, 512),  # 16-byte rows, pre > 1
    ("raise", (64, 300, 8), 1, 512),  # 32-byte rows, pre > 1
    ("fancy", (8192, 32), 1, 2),  # a few columns of many short rows (256 bytes)
    ("raise", (1000, 32), 1, 2),  # too few rows (and a small output)
    ("wrap", (8192, 32), 1, 3),  # too many columns for their rows' length
    ("wrap", (8192, 64), 1, 2),  # rows too long for as many columns
    ("wrap", (8192, 32, 2), 1, 2),  # not columns
    ("fancy", (512, 8), 1, 32),  # columns of 32-byte rows, 16 KiB of data
    ("wrap", (512, 9), 1, 32),  # rows too long for any number of columns
    ("wrap", (16, 8), 1, 1024),  # too few rows
    ("wrap", (40000, 8), 1, 16),  # data beyond the caches (1.28 MB)
    ("raise", (512, 8), 1, 31),  # a small output
]


@pytest.mark.parametrize(("plan", "shape", "axis", "n"), BRANCHES)
def test_auto_plan_branches(plan, shape, axis, n):
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    assert st.numpy_forward_plan(pre, shape[axis], n, post, 4) == plan
    # non-contiguous data: copied where the output is at least 4x as large, counted with a
    # step per (outer row, index) pair of rows of more than one element, per index of columns
    loops = n * pre if post > 1 else n if pre > 1 else 0
    out = pre * n * post + st.NUMPY_FANCY_PAIR_ELEMENTS * loops
    copied = "fancy" if out < 4 * pre * shape[axis] * post else plan
    assert st.numpy_forward_plan(pre, shape[axis], n, post, 4, contiguous=False) == copied
    data = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    idx = indices_for(shape[axis], (n,), "int64", seed=4)
    np.testing.assert_array_equal(gatherx.gather(data, idx, axis=axis), np.take(data, idx, axis))
    # Out of range at either end: the flow's IndexError, naming the value, on every plan.
    for bad in (shape[axis], -shape[axis] - 1):
        wrong = idx.copy()
        wrong[n // 2] = bad
        with pytest.raises(IndexError, match=rf"idx={bad} at position \({n // 2},\)"):
            gatherx.gather(data, wrong, axis=axis)


@pytest.mark.parametrize("plan", nb.FORWARD_PLANS)
@pytest.mark.parametrize(("shape", "axis", "index_shape"), SHAPES)
def test_every_plan_refuses_out_of_range(plan, shape, axis, index_shape):
    data = data_for(shape, "float32")
    size = shape[axis]
    for bad in (size, -size - 1, size + 1000, -2 * size - 1):
        idx = indices_for(size, index_shape, "int64")
        idx.reshape(-1)[-1] = bad
        with pytest.raises(IndexError):
            nb.take_by_plan(plan, data, idx, axis % data.ndim)


def test_unknown_plan():
    with pytest.raises(ValueError, match="unknown gather plan"):
        nb.take_by_plan("clip", np.ones(3), np.array([0]), 0)


def test_empty_indices_on_every_plan():
    data = data_for((4, 6), "float32")
    for plan in nb.FORWARD_PLANS:
        got = nb.take_by_plan(plan, data, np.zeros((0, 2), dtype=np.int64), 1)
        assert got.shape == (4, 0, 2)
        assert got.dtype == data.dtype


def traced_peak(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()`` once to warm it, then again under tracemalloc: (its result, the peak of the
    bytes it allocated)."""
    call()
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize(
    ("shape", "axis", "n"),
    [((1000, 8), 0, 20000), ((1000, 4), 0, 20000), ((64, 300, 1), 1, 512), ((300, 64), 0, 400)],
)
@pytest.mark.parametrize("contiguous", [True, False])
def test_forward_allocates_the_output_and_nothing_of_its_size(shape, axis, n, contiguous):
    """No plan builds an output-sized index or copies the data, but non-contiguous data its
    plan copies (an output at least 4x its size, or of short rows): at most the output plus
    an index-sized buffer (the doubled plan's shifted indices), the doubled data and that
    copy."""
    data = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    if not contiguous:
        data = np.repeat(data, 2, axis=-1)[..., ::2]
    idx = indices_for(shape[axis], (n,), "int64", seed=6)
    out, peak = traced_peak(lambda: gatherx.gather(data, idx, axis=axis))
    extra = peak - out.nbytes
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    plan = st.numpy_forward_plan(pre, shape[axis], n, post, 4, contiguous=False)
    copied = not contiguous and plan != "fancy"
    assert extra <= idx.nbytes + 2 * data.nbytes * (contiguous or copied) + 64 * 1024
    assert extra < out.nbytes / 2 or copied
    np.testing.assert_array_equal(out, np.take(data, idx, axis=axis))


@pytest.mark.parametrize(
    ("shape", "axis", "n", "dtype", "plan"),
    [((20_000, 4), 0, 200_000, "int8", "elements"), ((200_000,), 0, 300_000, "int32", "elements"),
     ((4, 5_000, 2), 1, 100_000, "int16", "elements"),
     ((20_000, 32), 0, 100_000, "float64", "rows"), ((500, 256), 0, 20_000, "int32", "rows"),
     ((4, 5_000, 8), 1, 100_000, "float32", "elements")],
)  # fmt: skip
def test_gather_grad_allocates_index_sized_and_cache_sized_arrays(shape, axis, n, dtype, plan):
    """``gather_grad``'s element plan builds its flat positions a cache-sized block at a time,
    also where one outer row holds more (it built three arrays of 8 bytes a gradient element
    there), and the row plan copies the slices of its repeated indices a block at a time: at
    most a few index-sized arrays (the repeat bookkeeping) and those blocks besides the
    result, never the gradient's size; np.add.at's sums, added in the same order."""
    rng = np.random.default_rng(14)
    idx = rng.integers(0, shape[axis], n)
    grad_shape = (*shape[:axis], n, *shape[axis + 1 :])
    grad = rng.standard_normal(grad_shape).astype(dtype)  # (floats: sums in one order only)
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    floating = dtype.startswith("float")
    assert st.numpy_grad_plan(pre, shape[axis], n, post, 0.9, floating) == plan
    got, peak = traced_peak(lambda: gatherx.gather_grad(shape, idx, grad, axis=axis))
    if plan == "elements":  # less than one position (intp) a gradient element
        bound, whole = 4 * nb._BLOCK_POSITIONS * 8, 8 * grad.size
    else:  # less than the gradient
        bound, whole = 6 * idx.nbytes + 2 * nb._ROW_BLOCK_BYTES, grad.nbytes
    assert peak - got.nbytes <= bound + 64 * 1024 < whole
    want = np.zeros(shape, dtype)
    np.add.at(want, (*(slice(None),) * axis, idx), grad)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    ("shape", "index", "axis"),
    [((200_000,), 5, 0), ((50_000, 4), [[7], [-1]], 0), ((3, 40_000, 2), [9, 9, -9], 1)],
)
def test_half_gather_grad_of_few_slices_works_at_their_size(dtype, shape, index, axis):
    """Half-precision gradients of a few slices of a large table: summed in float32 over
    those slices alone (rounded once), never through a float32 copy of the table."""
    ml_dtypes = pytest.importorskip("ml_dtypes") if dtype == "bfloat16" else None
    half = ml_dtypes.bfloat16 if ml_dtypes else np.float16
    idx = np.asarray(index)
    grad_shape = (*shape[:axis], *idx.shape, *shape[axis + 1 :])
    grad = (np.arange(math.prod(grad_shape)) % 7 + 0.1).reshape(grad_shape).astype(half)
    out, peak = traced_peak(lambda: gatherx.gather_grad(shape, idx, grad, axis=axis))
    assert peak - out.nbytes < out.nbytes  # a float32 table would take twice the result
    expected = np.zeros(shape, dtype=np.float32)
    key = (*(slice(None),) * axis, idx % shape[axis])
    np.add.at(expected, key, grad.astype(np.float32))
    assert out.dtype == grad.dtype
    np.testing.assert_array_equal(out, expected.astype(half))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    ("index", "repeats"),
    [([0, 1, 2, 3], False), ([0, 0, 0, 3], True), ([0, -4, 0, -1], True),
     (list(range(-17, 0)), False)],  # 17 values: more than are read as ints
)  # fmt: skip
def test_small_half_gather_grad_adds_a_slice_per_slot_as_given(dtype, index, repeats):
    """A small half-precision gradient whose index repeats no slot is added as given (each
    slot's sum is its one slice); one that repeats a slot is summed in float32 and rounded
    once, where adding in half precision would round 1 + 0.4 eps back to 1 twice."""
    ml_dtypes = pytest.importorskip("ml_dtypes") if dtype == "bfloat16" else None
    half = ml_dtypes.bfloat16 if ml_dtypes else np.float16
    small = float((ml_dtypes or np).finfo(half).eps) * 0.4
    n, size = len(index), max(4, len(index))
    column = np.array(([1.0, small, small, 2.0] * 5)[:n]).astype(half).reshape(n, 1)
    grad = column * np.ones(3, half)
    got = gatherx.gather_grad((size, 3), index, grad)
    exact = np.zeros((size, 3))
    np.add.at(exact, np.asarray(index) % size, grad.astype(np.float64))
    in_half = np.zeros((size, 3), half)
    np.add.at(in_half, np.asarray(index) % size, grad)
    # the two sums differ exactly where a slot repeats: the case can tell them apart
    assert repeats == (not np.array_equal(in_half, exact.astype(half)))
    assert got.dtype == grad.dtype
    np.testing.assert_array_equal(got, exact.astype(half))


@pytest.mark.parametrize(("index", "axis"), [([[3, -1], [0, -200]], 1), (-7, 1), ([5, -9], 0)])
def test_out_from_non_contiguous_data_reads_it_where_it_lies(index, axis):
    """``out=`` from a strided view far larger than the output: no copy of the data (which
    ``ndarray.take(out=)`` makes), the values of ``np.take``, and ``out`` returned."""
    data = np.arange(2 * 400_000, dtype=np.float64)[::2].reshape(2000, 200)
    assert not data.flags.c_contiguous
    idx = np.asarray(index)
    want = np.take(data, idx % data.shape[axis], axis=axis)
    out = np.full(want.shape, np.nan)
    gatherx.gather(data, idx, axis=axis, out=out)
    out[...] = np.nan
    tracemalloc.start()
    try:
        got = gatherx.gather(data, idx, axis=axis, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got is out
    assert peak <= out.nbytes + 64 * 1024 < data.nbytes / 4
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("fn", ["gather", "gather_out", "gather_grad"])
def test_bfloat16_in_the_fast_paths(fn):
    """bfloat16 (ml_dtypes') takes the fast paths from Gather-13 on, with the flow's rules:
    its gradient summed in float32 and rounded once (256 + 1 + 1 is 258, where additions in
    bfloat16 give 256), a bad index the flow's IndexError, Gather-12 the flow's TypeError."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    data = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2].astype(bf16)  # (4, 3)
    idx = np.array([[3, -1], [0, -4]])
    if fn == "gather_grad":
        grad = np.array([256, 1, 1], np.float32).astype(bf16)
        got = gatherx.gather_grad((5,), np.array([2, 2, -3]), grad)
        assert got.dtype == bf16
        np.testing.assert_array_equal(got.astype(np.float32), [0, 0, 258, 0, 0])
        big = np.ones((3, 40), bf16)  # above the small-gradient bound too
        sums = gatherx.gather_grad((2, 40), np.array([1, -1, 0]), big)
        np.testing.assert_array_equal(sums.astype(np.float32), [[1] * 40, [2] * 40])
        with pytest.raises(IndexError, match=r"idx=5 at position \(1,\)"):
            gatherx.gather_grad((5,), np.array([0, 5]), grad[:2])
        return
    want = np.take(data, idx % 4, axis=0)
    for axis in (0, -2):
        if fn == "gather":
            got = gatherx.gather(data, idx, axis=axis)
        else:
            got = gatherx.gather(data, idx, axis=axis, out=np.empty(want.shape, bf16))
        assert got.dtype == bf16
        np.testing.assert_array_equal(got, want)
    out = np.zeros(want.shape, bf16)
    kwargs = {"out": out} if fn == "gather_out" else {}
    with pytest.raises(IndexError, match=r"idx=4 at position \(0, 1\)"):
        gatherx.gather(
            data, np.array([[0, 4]]), **({"out": np.zeros((1, 2, 3), bf16)} if kwargs else {})
        )
    with pytest.raises(TypeError, match="bfloat16 data needs opset >= 13"):
        gatherx.gather(data, idx, opset=12, **kwargs)
    assert not out.astype(np.float32).any()  # nothing written by a refused call


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape", "contiguous"),
    [
        ((1000,), 0, (2, 2600), True),
        ((1, 1000, 3), 1, (7000,), False),
        ((60, 16), -2, (9001,), True),
    ],
)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_out_in_blocks_of_positions(monkeypatch, shape, axis, index_shape, contiguous, index_dtype):
    """``out=`` at very many indices on one outer row, a block of positions at a time
    (thresholds lowered here: several blocks and a partial last one): ``np.take``'s values;
    a bad index in the last block refused before anything is written; a strided ``out``
    written whole by the plan the blocks replace."""
    monkeypatch.setattr(st, "NUMPY_OUT_BLOCKS_MIN_INDICES", 1024)
    monkeypatch.setattr(nb, "_BLOCK_POSITIONS", 1000)
    data = data_for(shape, "float32")
    if not contiguous:
        data = np.repeat(data, 2, axis=-1)[..., ::2]
    size = shape[axis]
    idx = indices_for(size, index_shape, index_dtype, seed=11)
    want = np.take(data, idx % size, axis=axis)
    out = np.full(want.shape, np.nan, np.float32)
    assert nb._out_plan(data, idx, axis % data.ndim, out) == "blocks"
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    np.testing.assert_array_equal(out, want)
    bad = idx.copy()
    bad.reshape(-1)[-1] = size
    out[...] = np.nan
    with pytest.raises(IndexError, match=f"idx={size} at position"):
        gatherx.gather(data, bad, axis=axis, out=out)
    assert np.isnan(out).all()
    wide = np.full((*want.shape[:-1], 2 * want.shape[-1]), np.nan, np.float32)
    strided_out = wide[..., ::2]
    assert nb._out_plan(data, idx, axis % data.ndim, strided_out) != "blocks"
    gatherx.gather(data, idx, axis=axis, out=strided_out)
    np.testing.assert_array_equal(strided_out, want)


def test_out_in_blocks_allocates_no_index_sized_array():
    """At 2^22 indices and more, ``out=`` on one outer row allocates cache-sized blocks, not a
    wrapped copy of the whole index (32 MiB here)."""
    data = data_for((1000,), "float32")
    idx = indices_for(1000, (st.NUMPY_OUT_BLOCKS_MIN_INDICES + 7,), "int64", seed=12)
    out = np.empty(idx.shape, np.float32)
    assert nb._out_plan(data, idx, 0, out) == "blocks"
    tracemalloc.start()
    try:
        gatherx.gather(data, idx, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 4 * nb._BLOCK_POSITIONS * 8 < idx.nbytes / 32
    np.testing.assert_array_equal(out, np.take(data, idx % 1000))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("values", [(1e308, 1e308), (np.inf, -np.inf)], ids=["over", "invalid"])
@pytest.mark.parametrize("n", [4, 5000])
def test_grad_sums_report_to_numpy_error_state(n, values, dtype):
    """Sums that overflow, or meet +inf and -inf, raise under np.errstate(all="raise") as
    np.add.at's do, whichever plan sums them; ignored, they give np.add.at's values."""
    if values[0] == 1e308:  # near the dtype's largest value
        values = (float(np.finfo(dtype).max),) * 2
    idx = np.zeros(n, np.int64)
    grad = np.where(np.arange(n)[:, None] % 2 == 0, values[0], values[1]) * np.ones((1, 5))
    grad = grad.astype(dtype)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        np.add.at(np.zeros((7, 5), dtype), idx, grad)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        gatherx.gather_grad((7, 5), idx, grad)
    with np.errstate(all="ignore"):
        want = np.zeros((7, 5), dtype)
        np.add.at(want, idx, grad)
        np.testing.assert_array_equal(gatherx.gather_grad((7, 5), idx, grad), want)


def test_a_non_finite_slot_leaves_the_others_summed_in_float64():
    """One NaN in a float32 gradient summed by np.bincount: its slot NaN, every other slot
    the float64 sum rounded once, as without it (and nothing reported: NaN + x is quiet)."""
    assert st.numpy_grad_plan(1, 7, 5000, 5, None, True) == "columns"
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, 5000)
    grad = rng.standard_normal((5000, 5)).astype(np.float32)
    grad[17, 2] = np.nan
    want = np.zeros((7, 5))
    np.add.at(want, idx, grad.astype(np.float64))
    np.testing.assert_array_equal(gatherx.gather_grad((7, 5), idx, grad), want.astype(np.float32))


@pytest.mark.parametrize("size", [10_000, 5_000, 1_000_000])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_gather_grad_sums_are_rounded_once(size, dtype):
    """Half-precision sums are rounded once into the gradient's dtype, whichever plan sums
    them: the repeated indices' sums of the element plan (10^4, 10^6 slots) and of the
    distinct sums, taken by float64 ``np.bincount`` there, were rounded to float32 first and
    then again (2 + 2^-10 + 2^-24 in float16 became 2.0); the column plan itself (5000 slots)
    and a running float32 sum (np.add.at's) round it up as well."""
    ml_dtypes = pytest.importorskip("ml_dtypes") if dtype == "bfloat16" else None
    half = ml_dtypes.bfloat16 if ml_dtypes else np.float16
    eps = float((ml_dtypes or np).finfo(half).eps)
    # 2 + eps + 2^-24, eps half the dtype's spacing at 2: just above a tie, which float64
    # rounds up once; float32 rounds 2^-24 away first, and the tie then goes to 2.0
    head = np.array([2.0, eps, -(2.0**-23), 3 * 2.0**-24])
    idx = np.r_[[0] * 4, [1] * 3000]
    grad = np.r_[head, np.zeros(3000)].astype(half)
    exact = np.zeros(size)
    np.add.at(exact, idx, grad.astype(np.float64))
    got = gatherx.gather_grad((size,), idx, grad)
    np.testing.assert_array_equal(got.astype(np.float64), exact.astype(half).astype(np.float64))


def test_row_plan_sums_of_negative_zeros_are_positive_zero():
    """Slots that several -0.0 slices reach hold +0.0, a sum into zeros, as np.add.at's (the
    row plan wrote the first slice as it is and added the others to it)."""
    grad = np.full((1000, 16), -0.0, np.float32)
    idx = np.arange(1000) % 200
    assert st.numpy_grad_plan(1, 200, 1000, 16, 1.0, True) == "rows"
    want = np.zeros((200, 16), np.float32)
    np.add.at(want, idx, grad)
    got = gatherx.gather_grad((200, 16), idx, grad)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
