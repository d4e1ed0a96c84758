"""Every formulation gatherx/_strategy.py can pick computes Gather (or its VJP) exactly."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from support import need

import gatherx
from gatherx import _policy
from gatherx import _strategy as st
from gatherx._backends import numpy as nb
from gatherx._rules import SMALL_HOST_INDEX

# (data shape, indices, axis): no repeats, repeats, only repeats, more than _ROUNDS repeats
# of one index, negative indices, multi-dimensional indices, unit and empty dimensions.
GRAD_CASES = [
    ((6, 3), [4, 0, 5], 0),
    ((5, 2), [1, -4, 2, -3, 1], 0),
    ((2, 5, 1), [[4, -1], [0, 0]], 1),
    ((6, 3), [1, 1, 5, 1, -1, 0], 0),
    ((3, 7, 2), [[6, 0], [6, -1]], 1),
    ((2, 4, 33), [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 3], 1),
    ((5, 4, 1), [0, 3, -4, 2, 3], 1),
    ((2, 3, 4), [-1, 0, 3, 3], 2),
    ((4,), [3, 3, 0, -1, 2], 0),
    ((3, 0), [2, 2], 0),
    ((0, 3), np.zeros((0, 2), dtype=np.int64), 0),
    ((2, 5, 3), np.zeros((0,), dtype=np.int64), 1),
]


def add_at(shape: tuple[int, ...], indices: np.ndarray, grad: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros(shape, dtype=grad.dtype)
    np.add.at(out, (slice(None),) * axis + (indices,), grad)
    return out


def grad_for(shape: tuple[int, ...], indices: np.ndarray, axis: int, dtype: str) -> np.ndarray:
    out_shape = (*shape[:axis], *indices.shape, *shape[axis + 1 :])
    rng = np.random.default_rng(len(out_shape) + indices.size)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(out_shape).astype(dtype)
    return rng.integers(-50, 50, out_shape).astype(dtype)


@pytest.mark.parametrize("plan", nb.GRAD_PLANS)
@pytest.mark.parametrize(("shape", "indices", "axis"), GRAD_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_numpy_grad_plan_matches_add_at(plan, shape, indices, axis, dtype):
    idx = np.asarray(indices, dtype=np.int64)
    grad = grad_for(shape, idx, axis, dtype)
    # The plans take the indices the flow has checked and made non-negative.
    wrapped = idx % max(shape[axis], 1)
    if plan == "columns":
        if np.dtype(dtype).kind != "f":
            with pytest.raises(ValueError, match="real floating"):
                nb.grad_by_plan(plan, shape, wrapped, grad, axis)
            return
        # np.bincount adds in float64, in order of occurrence, and rounds once.
        want = add_at(shape, idx, grad.astype(np.float64), axis).astype(dtype)
    else:
        want = add_at(shape, idx, grad, axis)
    got = nb.grad_by_plan(plan, shape, wrapped, grad, axis)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    # Every plan adds in order of occurrence, as np.add.at does: equal bits, not just close.
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("plan", nb.GRAD_PLANS)
@pytest.mark.parametrize(("shape", "indices", "axis"), GRAD_CASES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_numpy_grad_plan_half_precision(plan, shape, indices, axis, dtype):
    if dtype == "bfloat16":
        dtype = need("ml_dtypes").bfloat16
    idx = np.asarray(indices, dtype=np.int64)
    grad = grad_for(shape, idx, axis, "float32").astype(dtype)
    # Summed in float32 (float64 by np.bincount), rounded once into half precision.
    wide = np.float64 if plan == "columns" else np.float32
    want = add_at(shape, idx, grad.astype(wide), axis).astype(dtype)
    got = nb.grad_by_plan(plan, shape, idx % max(shape[axis], 1), grad, axis)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_numpy_grad_plan_int32_indices_and_complex():
    idx = np.array([[2, 0], [2, -3]], dtype=np.int32)
    grad = (np.arange(2 * 2 * 2 * 5) * (1 + 1j)).reshape(2, 2, 2, 5).astype(np.complex64)
    want = add_at((2, 3, 5), idx.astype(np.int64), grad, 1)
    for plan in set(nb.GRAD_PLANS) - {"columns"}:  # columns: real floating gradients only
        np.testing.assert_array_equal(nb.grad_by_plan(plan, (2, 3, 5), idx % 3, grad, 1), want)


def test_numpy_grad_unknown_plan():
    with pytest.raises(ValueError, match="unknown gather_grad plan"):
        nb.grad_by_plan("scatter", (3,), np.array([0]), np.ones(1), 0)


# Shapes on which the automatic choice takes each branch of numpy_grad_plan.
BRANCHES = [
    ("add.at", (5, 4), np.array([[0, 1], [1, 2]]), 0),
    ("elements", (64, 32, 4), np.arange(40) % 32, 1),
    ("rows", (3000, 16), np.arange(300) * 7 % 3000, 0),
    ("rows", (8, 64, 16), np.arange(40) % 64, 1),  # pre > 1, few repeats
    ("elements", (8, 64, 16), np.arange(200) % 64, 1),  # pre > 1, most indices repeat
    ("columns", (1000, 8), np.arange(20000) * 7 % 1000, 0),  # short rows, long index runs
    ("columns", (2, 500, 4), np.arange(3000) % 500, 1),  # 8 (outer row, column) pairs
    ("elements", (100000, 8), np.arange(3000) * 7 % 100000, 0),  # too few indices per slot
    ("elements", (64, 500, 4), np.arange(3000) % 500, 1),  # too many pairs
]


@pytest.mark.parametrize(("plan", "shape", "indices", "axis"), BRANCHES)
def test_numpy_auto_plan_branches(plan, shape, indices, axis):
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    flat = indices.reshape(-1)
    counts = np.bincount(flat, minlength=shape[axis])
    repeated = float(np.mean(counts[flat] > 1))
    floating = st.numpy_grad_plan(pre, shape[axis], indices.size, post, repeated, True)
    assert floating == plan
    exact = st.numpy_grad_plan(pre, shape[axis], indices.size, post, repeated, False)
    assert exact == ("elements" if plan == "columns" else plan)  # integers: never columns
    grad = grad_for(shape, indices, axis, "float32")
    got = gatherx.gather_grad(shape, indices, grad, axis=axis)
    if plan == "columns":
        want = add_at(shape, indices, grad.astype(np.float64), axis).astype(np.float32)
    else:
        want = add_at(shape, indices, grad, axis)
    np.testing.assert_array_equal(got, want)
    # Negative indices, made non-negative by the flow, give the same.
    negative = indices - shape[axis]
    np.testing.assert_array_equal(gatherx.gather_grad(shape, negative, grad, axis=axis), want)
    ints = grad_for(shape, indices, axis, "int32")
    np.testing.assert_array_equal(
        gatherx.gather_grad(shape, indices, ints, axis=axis), add_at(shape, indices, ints, axis)
    )


@pytest.mark.parametrize("n", [512, 513])  # a (n, 4) gradient: 2048 elements, then 2052
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_numpy_small_grad_reads_negative_indices_as_given(monkeypatch, n, dtype):
    """Up to ``NUMPY_SMALL_GRAD`` gradient elements ``np.add.at`` reads the checked indices
    as given, with no wrapped copy; above, they are wrapped first. The same sums either way
    (-7 and 6 on one slot), and the same IndexError for a value out of range at either end."""
    shape, size = (7, 4), 7
    idx = np.random.default_rng(n).integers(-size, size, n)
    idx[:2] = (-size, size - 1)
    grad = grad_for(shape, idx, 0, dtype)
    wrapped = []
    host_wrapped = nb._rules.host_wrapped
    monkeypatch.setattr(
        nb._rules, "host_wrapped", lambda *args: wrapped.append(1) or host_wrapped(*args)
    )
    got = gatherx.gather_grad(shape, idx, grad)
    assert bool(wrapped) == (grad.size > st.NUMPY_SMALL_GRAD)
    np.testing.assert_array_equal(got, add_at(shape, np.where(idx < 0, idx + size, idx), grad, 0))
    for bad in (size, -size - 1):
        wrong = idx.copy()
        wrong[n // 2] = bad
        with pytest.raises(IndexError, match=rf"idx={bad} at position \({n // 2},\)"):
            gatherx.gather_grad(shape, wrong, grad)


def test_numpy_plan_asks_for_repeats_only_when_needed():
    assert st.numpy_grad_plan(8, 64, 40, 16, None) == ""
    assert st.numpy_grad_plan(1, 64, 400, 16, None) == "rows"
    assert st.numpy_grad_plan(8, 64, 400, 4, None) == "elements"


@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [((5, 4), [[0, -1], [4, 2]], 0), ((3, 4, 5), [4, -5, 0], 2), ((2, 6, 3), [5, 5], -2)],
)
def test_numpy_forward_matches_take(shape, indices, axis):
    data = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    idx = np.asarray(indices, dtype=np.int32)
    got = gatherx.gather(data, idx, axis=axis)
    np.testing.assert_array_equal(got, np.take(data, idx, axis=axis))
    assert got.dtype == data.dtype


@pytest.mark.parametrize(
    ("args", "plan"),
    [
        # (pre, size, n, post, itemsize, contiguous, scalar index, plain bytes)
        ((1, 1000, 500, 1, 4, False, False, True), "fancy"),  # strided, output <= data
        ((1, 1000, 1001, 1, 4, False, False, True), "wrap"),  # output > data: no temporary
        ((4, 1000, 20, 1, 4, False, False, True), "fancy"),  # strided columns, few indices
        ((4, 1000, 500, 1, 4, False, False, True), "raise"),  # a loop per index: copied
        ((8192, 32, 2, 1, 4, True, False, True), "wrap"),  # columns: no temporary
        ((512, 8, 32, 1, 4, True, False, True), "wrap"),  # short columns: no temporary
        ((1, 1000, 20000, 8, 4, True, False, True), "doubled"),
        ((1, 1000, 20000, 8, 4, False, False, True), "doubled"),  # output >= 4x the data
        ((1, 1000, 20000, 8, 4, True, True, True), "raise"),  # a scalar index
        ((1, 1000, 20000, 8, 4, True, False, False), "raise"),  # objects
        ((64, 300, 512, 1, 4, True, False, True), "wrap"),
        # (..., out C-contiguous): from 2^22 indices on one outer row, in blocks
        ((1, 1000, 1 << 22, 1, 4, True, False, True), "blocks"),
        ((1, 1000, (1 << 22) - 1, 1, 4, True, False, True), "rows1d"),
        ((1, 1000, 1 << 22, 1, 4, True, False, True, False), "rows1d"),  # a strided out
        ((1, 1000, 1 << 22, 1, 4, False, False, True), "blocks"),  # strided data, copied
        ((1, 1000, 1 << 22, 1, 4, True, False, False), "rows1d"),  # objects: as before
        ((2, 1000, 1 << 22, 1, 4, True, False, True), "wrap"),  # two outer rows
    ],
)
def test_numpy_out_plan_branches(args, plan):
    """``out=`` takes the forward's plan, but fancy indexing only from non-contiguous data
    into a temporary no larger than it, the doubled rows only where their view applies, and
    blocks of positions on one outer row at very many indices; every branch writes
    ``np.take``'s values."""
    assert st.numpy_out_plan(*args) == plan
    pre, size, n, post, _, contiguous, scalar, plain = args[:8]
    if scalar or not plain:
        return
    shape = (pre, size, post) if post > 1 else (pre, size)
    data = np.arange(math.prod(shape) * (1 if contiguous else 2), dtype=np.float32)
    data = data.reshape(*shape[:-1], -1)[..., :: 1 if contiguous else 2]
    assert data.flags.c_contiguous == contiguous
    idx = (np.arange(n) * 7919 % (2 * size) - size).astype(np.int64)
    out = np.full(np.take(data, idx, axis=1).shape, np.nan, dtype=np.float32)
    assert gatherx.gather(data, idx, axis=1, out=out) is out
    np.testing.assert_array_equal(out, np.take(data, idx, axis=1))


@pytest.mark.parametrize(
    ("shape", "axis", "plan"),
    [
        ((4, 3, 1024), 1, "slice_copy"),  # 4 KiB rows
        ((4, 3, 2, 512), 1, "slice_copy"),
        ((4, 3, 1023), 1, "take"),
        ((1, 3, 1024), 1, "take"),  # one contiguous row
        ((6, 2048), 1, "take"),  # a column
        ((3, 2048), 0, "take"),
    ],
)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_numpy_scalar_plans_match_take(shape, axis, plan, layout):
    """A scalar index by either plan, every valid value of both signs, strided data too;
    a bad one refused with gatherx's IndexError."""
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    assert st.numpy_scalar_plan(pre, post * 4) == plan
    data = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    if layout == "transposed":
        data = np.asfortranarray(data)
    size = shape[axis]
    for value in range(-size, size):
        got = gatherx.gather(data, np.array(value), axis=axis)
        want = np.take(data, value % size, axis=axis)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == data.dtype
        assert not np.shares_memory(got, data)
    for value in (size, -size - 1):
        with pytest.raises(IndexError, match=f"idx={value} at position"):
            gatherx.gather(data, np.array(value), axis=axis)


# --------------------------------------------------------------------------- torch

TORCH_FORWARD = [
    # (data shape, indices, axis, torch threads)
    ((7, 3), [[6, -7], [2, 2]], 0, 1),
    ((1, 1, 9, 4), [8, -1, 1], 2, 1),
    ((2, 3, 4, 5), [3, 0, -4], 2, 1),
    ((6, 9), [8, 0, 4, -9], 1, 2),
    ((80, 9, 1), [[8, 0], [4, -9]], 1, 2),
    ((80, 9, 1), [8, 0, 4, 3], 1, 1),  # float64: the (pre, 1, size, 1) columns view
    # dim 1 of long rows behind many outer rows into 2 MiB or more: dim 2 of (1, *shape)
    ((1024, 5, 128), np.arange(40) * 3 % 10 - 5, 1, 2),
    ((16, 300, 64), np.arange(1100) * 7 % 600 - 300, 1, 2),
    ((2, 2, 300, 16, 16), np.arange(2200) * 11 % 600 - 300, -3, 2),
    ((17, 1, 300, 2), -5, 2, 2),
    ((3, 2, 40, 1), (np.arange(64) * 3 % 80 - 40).reshape(8, 8), -2, 1),
    ((70, 300), (np.arange(64) * 7 % 600 - 300).reshape(2, 32), 1, 2),
    ((5, 2, 600, 1), np.arange(1100) * 7 % 1200 - 600, 2, 1),
    # a 1-D index of up to 16 values read as ints: advanced indexing where one is negative
    # and the output small; index_select past that output, without a negative value, or on
    # more values
    ((8, 513), [5, -1, 2], 0, 1),
    ((6, 9), [8, 0, 4], 1, 2),
    ((40, 2), np.arange(17) * 7 % 80 - 40, 0, 1),
    # an index of two dimensions past advanced indexing's limit: flattened for the layouts
    ((300, 300), (np.arange(64) * 7 % 600 - 300).reshape(2, 32), 1, 2),
    ((4, 4, 600, 16), (np.arange(64) * 11 % 1200 - 600).reshape(8, 8), 2, 2),
    # 1-D data: torch.take at an int64 index as given of two dimensions, or holding a negative
    # value (a few read as ints, or more, whose extremes are read first); index_select at a
    # 1-D index with none
    ((50,), [[3, -1], [0, -50]], 0, 1),
    ((50,), [[3, 1], [0, 49]], -1, 1),
    ((50,), [7, -1, 3], 0, 1),
    ((50,), np.arange(-20, 20), 0, 2),
    ((50,), np.arange(40), 0, 1),
    # many values into a small table: torch.take too, not a wrapped copy of the index; at
    # none negative, index_select at the index flattened
    ((50,), np.arange(-35000, 35000, 2) % 100 - 50, 0, 2),
    ((50,), (np.arange(9000) % 50).reshape(90, 100), 0, 1),
    # an index of 8 MiB or more into at most as many: torch.take as well
    ((2**19,), (np.arange(2**20) * 7919 % 2**20 - 2**19).reshape(2**10, 2**10), 0, 2),
    # rows of 2-4 elements behind more than 16 outer rows: torch.gather on (pre, size x row),
    # or rows of 8 bytes (float32 pairs) as one int64 element on (pre, size)
    ((40, 30, 2), np.arange(500) * 7 % 60 - 30, 1, 1),
    ((40, 30, 3), np.arange(500) * 7 % 60 - 30, 1, 1),
    # rows of 4 or 8 bytes with only ones before the axis, from 2048 indices: 1-D data
    ((1, 300, 1), np.arange(2100) * 7 % 600 - 300, 1, 2),
    ((3, 8, 25, 4), (np.arange(800) * 3 % 50 - 25).reshape(40, 20), 2, 2),
]


@pytest.mark.parametrize(("shape", "indices", "axis", "threads"), TORCH_FORWARD)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_forward_is_one_kernel_call_on_the_data_or_its_view(
    monkeypatch, shape, indices, axis, threads, index_dtype, dtype
):
    """One ``index_select`` call on contiguous data itself or on the view of it that
    ``torch_layout_plan`` names (sharing its memory), or one ``torch.gather`` on the data's
    (outer rows, columns) view at the index expanded without a copy, at the indices made
    non-negative, or (``indexing``,
    at an index of two or more dimensions, or a few values one of which is negative)
    advanced indexing on the data at the index as given, whatever the shape or thread count;
    for ``out=`` (the index as one dimension, or the forward's advanced indexing where
    ``torch_out_given`` says) too."""
    torch = need("torch")
    idx = np.asarray(indices, dtype=index_dtype)
    host = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    data = torch.from_numpy(host)
    ax = axis % len(shape)
    pre, size, post = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1 :])
    float32 = dtype == "float32"
    # the forward reads a 1-D index of few values as Python ints, so it knows their signs;
    # more are planned before they are read, and where the plan asks, planned by their sign
    int64 = index_dtype == "int64"
    sign = bool((idx < 0).any())
    read = idx.ndim == 1 and idx.size <= SMALL_HOST_INDEX
    args = ("cpu", shape, ax, idx.size, float32)
    plans = []
    for k, negative in ((idx.ndim, sign if read else None), (1, None)):  # out=: as one dim
        plan = st.torch_layout_plan(*args, k, negative, int64, True, host.itemsize)
        if plan == "take_negative":
            plan = "take" if sign else st.torch_layout_plan(*args, k, False, int64)
        plans.append(plan)
    if st.torch_out_given(plans[0], idx.ndim, pre * idx.size * post):
        plans[1] = plans[0]  # out=: the forward's advanced indexing, copied in
    calls = []
    depth = [0]  # the outermost calls only (a torch function mode calls back into its op)

    def spy(name, owner=torch):
        real = getattr(owner, name)

        def call(source, *args, **kwargs):
            if not depth[0] and (source is data or name != "__getitem__"):
                calls.append((name, source, *args))
            depth[0] += 1
            try:
                return real(source, *args, **kwargs)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(owner, name, call)

    spy("index_select")
    spy("gather")
    spy("take")
    spy("__getitem__", torch.Tensor)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    want = np.take(host, idx, axis=axis)
    index = torch.from_numpy(idx)
    try:
        got = gatherx.gather(data, index, axis=axis)
        forward = list(calls)
        into = torch.full(want.shape, np.nan, dtype=data.dtype)
        assert gatherx.gather(data, index, axis=axis, out=into) is into
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(into.numpy(), want)
    np.testing.assert_array_equal(index.numpy(), idx)  # never written
    # the scalar index's slice is copied by select_copy (out= too), not index_select
    assert [len(forward), len(calls)] == ([0, 0] if idx.ndim == 0 else [1, 2])
    wrapped = idx.reshape(-1) % shape[axis]
    for plan, (kernel, source, *args) in zip(plans[: len(calls)], calls, strict=True):
        if plan == "indexing":  # the data as given, at the index as given: no wrap
            assert (kernel, source) == ("__getitem__", data)
            (key,) = args
            assert key[:ax] == (slice(None),) * ax
            assert key[ax:] == (index,)
            continue
        if plan == "take":  # the 1-D data as given, at the index as given: no wrap
            assert (kernel, source) == ("take", data)
            assert args[0] is index
            continue
        dim, index_used = args[:2]
        want_kernel, want_shape, want_dim = {
            "as_is": ("index_select", shape, ax),
            "blocks": ("index_select", (pre, size, post), 1),
            "gather": ("gather", (pre, size * post), 1),  # the rows, behind their outer rows
            "columns": ("index_select", (pre, 1, size, 1), 2),
            "slices": ("index_select", (1, *shape), ax + 1),
            # each row one integer element: 1-D data, or (outer rows, size)
            "elements": ("index_select", (size,), 0),
            "gather_elements": ("gather", (pre, size), 1),
        }[plan]
        row = post
        if plan in ("elements", "gather_elements"):  # the row's bytes as one integer
            assert source.element_size() == post * host.itemsize
            row = 1
        assert kernel == want_kernel
        assert source is data if plan == "as_is" else source.data_ptr() == data.data_ptr()
        assert (tuple(source.shape), dim) == (want_shape, want_dim)
        used = index_used
        if kernel == "gather":  # the index's one dimension on the axis, broadcast elsewhere
            sizes = want_shape
            broadcast = [st for d, st in enumerate(used.stride()) if d != dim and sizes[d] > 1]
            assert broadcast == [0] * len(broadcast)
            used = used[tuple(slice(None) if d == dim else 0 for d in range(used.ndim))]
            # each position over its row's elements
            np.testing.assert_array_equal(
                used.numpy(), (wrapped[:, None] * row + np.arange(row)).reshape(-1)
            )
            continue
        np.testing.assert_array_equal(used.numpy(), wrapped)


def test_torch_rows_gathered_on_contiguous_data_or_its_copy():
    """Rows of 2-4 elements are read by ``torch.gather`` on the (pre, size x row) view of
    contiguous data, or of the copy made of non-contiguous data for an output past its size;
    non-contiguous data that ``index_select`` reads where it lies keeps ``index_select``.
    np.take's values, forward and ``out=``."""
    torch = need("torch")
    kernels = importlib.import_module("gatherx._backends.torch.kernels")
    for contiguous, want_plan in ((True, "gather"), (False, "as_is")):
        plan = st.torch_layout_plan("cpu", (2, 20, 3000, 2), 2, 1000, False, 1, False, True,
                                    contiguous, 8)  # fmt: skip
        assert plan == want_plan
    base = torch.arange(2 * 20 * 3000 * 4, dtype=torch.float64).reshape(2, 20, 3000, 4)
    idx = np.arange(1000) * 7 % 6000 - 3000
    for data, want in (
        (base[..., ::2], ("as_is", False)),
        (base[..., ::2].contiguous(), ("gather", False)),
        (base[:, :, :25, ::2], ("gather", True)),  # 40 x 25 x 2 values: output past them
    ):
        assert kernels.plan_of(data, 2, idx.size, 1) == want
        index = torch.from_numpy(idx % data.shape[2] - (idx < 0) * data.shape[2])
        expect = np.take(data.numpy(), index.numpy(), axis=2)
        np.testing.assert_array_equal(gatherx.gather(data, index, axis=2).numpy(), expect)
        into = torch.empty(expect.shape, dtype=data.dtype)
        gatherx.gather(data, index, axis=2, out=into)
        np.testing.assert_array_equal(into.numpy(), expect)


@pytest.mark.parametrize(
    "dtype", ["float32", "float16", "bfloat16", "uint8", "bool", "complex64", "uint16", "float64"]
)
@pytest.mark.parametrize(
    ("shape", "axis", "plans"),
    [((3000, 2), 0, ("elements", "as_is")), ((1, 3000, 1), 1, ("elements", "as_is")),
     ((3000, 2, 2), 0, ("elements", "as_is")), ((20, 300, 2), 1, ("gather_elements", "gather")),
     ((8, 3000, 2), 1, ("gather_elements", "as_is"))],
)  # fmt: skip
def test_torch_rows_read_as_elements(dtype, shape, axis, plans):
    """Rows of 1-8 bytes read as one integer element each, with only ones before the axis
    (``elements``) or behind outer rows (``gather_elements``): np.take's values at a 1-D and a
    2-D index, of data at every storage offset, contiguous or not, into ``out=`` at every
    offset, and index_select's gradient; rows that start between two such elements (or hold
    16 bytes) take the plan for their elements as given."""
    torch = need("torch")
    kernels = importlib.import_module("gatherx._backends.torch.kernels")
    dt = getattr(torch, dtype)
    wide = torch.complex128 if dt.is_complex else torch.float64
    size, n = shape[axis], math.prod(shape)
    rng = np.random.default_rng(3)
    base = torch.from_numpy(rng.integers(0, 2, 2 * n + 8)).to(dt)
    idx = rng.integers(-size, size, 2500)
    row_elements = math.prod(shape[axis + 1 :])
    fits = row_elements * base.element_size() in (1, 2, 4, 8)  # (complex64 pairs: 16 bytes)
    if plans[0] == "gather_elements":
        fits = fits and row_elements > 1  # (a row of one element: the columns' rules)
    for start in range(8):  # rows of one, two or four elements: some offsets start between
        data = base[start : start + n].view(shape)
        elements = fits and start % row_elements == 0
        plan = kernels.plan_of(data, axis, idx.size, 1)
        assert plan == (plans[0] if elements else plans[1], False)
        strided = base[start : start + 2 * n : 2].view(shape)
        for src in (data, strided):
            for index in (idx, idx.reshape(50, 50)):
                want = np.take(src.to(wide).numpy(), index, axis=axis)
                got = gatherx.gather(src, torch.from_numpy(index), axis=axis)
                np.testing.assert_array_equal(got.to(wide).numpy(), want)
                for at in (0, 1):
                    into = torch.zeros(want.size + 1, dtype=dt)[at : at + want.size]
                    gatherx.gather(
                        src, torch.from_numpy(index), axis=axis, out=into.view(want.shape)
                    )
                    np.testing.assert_array_equal(into.view(want.shape).to(wide).numpy(), want)
    if dt.is_floating_point:
        leaf = base[:n].view(shape).clone().requires_grad_(True)
        seed = torch.ones(*shape[:axis], idx.size, *shape[axis + 1 :], dtype=dt)
        (g,) = torch.autograd.grad(gatherx.gather(leaf, torch.from_numpy(idx), axis=axis), leaf,
                                   seed)  # fmt: skip
        ref = leaf.detach().clone().requires_grad_(True)
        (r,) = torch.autograd.grad(torch.index_select(ref, axis, torch.from_numpy(idx % size)),
                                   ref, seed)  # fmt: skip
        torch.testing.assert_close(g, r, rtol=0, atol=0)


@pytest.mark.parametrize("values", [[[3, -1], [0, -50]], [[3, 1], [0, 49]]])
def test_torch_take_with_grad_at_the_checked_index(monkeypatch, values):
    """With grad required, gatherx's Function reads 1-D data at an index of two dimensions
    by one ``torch.take`` at the checked index made non-negative; values and gradient as
    NumPy's."""
    torch = need("torch")
    idx = np.array(values)
    host = np.random.default_rng(1).standard_normal(50)
    data = torch.from_numpy(host).requires_grad_()
    calls = []
    real = torch.take

    def spy(source, index):
        calls.append((source, index.clone()))
        return real(source, index)

    monkeypatch.setattr(torch, "take", spy)
    out = gatherx.gather(data, torch.from_numpy(idx))
    out.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), np.take(host, idx))
    want = np.zeros(50)
    np.add.at(want, idx, 1.0)
    np.testing.assert_array_equal(data.grad.numpy(), want)
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0][1].numpy(), idx % 50)


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape"),
    [((70, 300), 1, (64,)), ((2, 3, 40, 5), 2, (40,)), ((9, 5), 0, (2, 3))],
)
def test_torch_layouts_in_plain_eager_code_only(monkeypatch, shape, axis, index_shape):
    """Under a torch.func transform the data is read as given by ``index_select``, whatever
    ``torch_layout_plan`` picks for plain eager code; values and tangents as np.take's."""
    torch = need("torch")
    n = math.prod(index_shape)
    plan = st.torch_layout_plan("cpu", shape, axis, n, False, len(index_shape))
    assert plan != "as_is"
    rng = np.random.default_rng(3)
    data, tangent = (torch.from_numpy(rng.standard_normal(shape)) for _ in range(2))
    values = np.arange(n) * 7 % (2 * shape[axis]) - shape[axis]
    idx = torch.from_numpy(values.reshape(index_shape))
    calls = []

    def spying(name):
        real = getattr(torch, name)

        def spy(source, dim, index, **kwargs):
            calls.append((name, source.shape, dim))
            return real(source, dim, index, **kwargs)

        monkeypatch.setattr(torch, name, spy)

    spying("index_select")
    spying("gather")
    out, t_out = torch.func.jvp(lambda d: gatherx.gather(d, idx, axis=axis), (data,), (tangent,))
    np.testing.assert_array_equal(out.numpy(), np.take(data.numpy(), idx.numpy(), axis=axis))
    np.testing.assert_array_equal(t_out.numpy(), np.take(tangent.numpy(), idx.numpy(), axis=axis))
    assert calls
    assert all(c == ("index_select", torch.Size(shape), axis) for c in calls)


@pytest.mark.parametrize(
    ("shape", "axis", "n"),
    [((2, 32, 500, 1, 1), 2, 64), ((106, 3, 183, 1), -2, 64), ((2, 32, 1, 90), 3, 64),
     ((600, 1, 40), 2, 8), ((3, 200, 90, 1), -2, 8)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint16", "bool"])
@pytest.mark.parametrize("strided", [False, True])
def test_torch_gather_plan_on_columns_with_unit_dims(monkeypatch, shape, axis, n, dtype, strided):
    """Where the plan is ``gather`` (columns behind many outer rows, from 8 indices of
    elements of two bytes or more, from 32 of one byte), contiguous data is read by one
    ``torch.gather`` on its (outer rows, columns) view, whatever dimensions of length one it
    has, and strided data as given; forward and ``out=`` values as np.take's, the index as
    given never written."""
    torch = need("torch")
    rng = np.random.default_rng(4)
    full = list(shape)
    full[-1] *= 2 if strided else 1
    host = (rng.standard_normal(full) * 100).astype(dtype)
    data = torch.from_numpy(host)
    if strided:
        data, host = data[..., ::2], host[..., ::2]
    size = shape[axis]
    idx = (np.arange(n) * 7 % (2 * size) - size).astype(np.int64)
    ax = axis % len(shape)
    pre = math.prod(shape[:ax])
    contiguous = not strided
    itemsize = np.dtype(dtype).itemsize
    float32 = dtype == "float32"
    plan = st.torch_layout_plan("cpu", shape, ax, n, float32, 1, None, True, contiguous, itemsize)
    assert plan == ("gather" if itemsize > 1 or n >= 32 else "as_is")
    calls = []
    real = torch.gather

    def spy(source, dim, index, **kwargs):
        calls.append((tuple(source.shape), dim))
        return real(source, dim, index, **kwargs)

    monkeypatch.setattr(torch, "gather", spy)
    index = torch.from_numpy(idx)
    want = np.take(host, idx, axis=axis)
    got = gatherx.gather(data, index, axis=axis)
    into = torch.zeros(want.shape, dtype=data.dtype)
    assert gatherx.gather(data, index, axis=axis, out=into) is into
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(into.numpy(), want)
    np.testing.assert_array_equal(index.numpy(), idx)
    if plan != "gather":
        assert not calls
    elif contiguous:  # the view of the columns behind their outer rows, forward and out=
        assert calls == [((pre, size), 1)] * 2
    else:  # the data as given (the forward, whose out= may copy its result)
        assert calls[0] == (tuple(shape), ax)


@pytest.mark.parametrize(
    ("shape", "n", "index_ndim", "negative", "int64", "contiguous", "want"),
    [((9,), 5, 1, True, True, True, "take"), ((9,), 5, 1, None, True, True, "take_negative"),
     ((9,), 5, 1, False, True, True, "as_is"), ((9,), 6, 2, False, True, True, "take"),
     ((9,), 8192, 2, None, True, True, "take"), ((9,), 8193, 2, False, True, True, "as_is"),
     ((9,), 8193, 2, None, True, True, "take_negative"),
     ((9,), 8193, 3, True, True, True, "take"), ((9,), 32768, 1, True, True, True, "take"),
     ((9,), 10**7, 2, None, True, True, "take_negative"),
     ((2**17,), 10**6, 1, None, True, True, "take_negative"),
     ((2**17 + 1,), 32767, 1, True, True, True, "take"),
     ((2**17 + 1,), 32768, 1, True, True, True, "as_is"),
     ((2**17 + 1,), 32768, 2, None, True, True, "as_is"),
     ((2**21,), 2**20, 1, None, True, True, "take_negative"),
     ((2**21,), 2**20 - 1, 1, None, True, True, "as_is"),
     ((2**21 + 1,), 2**20, 1, None, True, True, "as_is"),
     ((2**21,), 2**20, 2, True, True, True, "take"),
     ((2**21,), 2**20, 1, False, True, True, "as_is"),
     ((2**21,), 2**20, 1, None, False, True, "as_is"),
     ((9,), 0, 2, False, True, True, "indexing"), ((9,), 5, 1, True, False, True, "indexing"),
     ((9,), 5, 1, True, True, False, "indexing"), ((9,), 6, 2, False, False, True, "indexing"),
     ((1, 9), 5, 1, True, True, True, "indexing"), ((9, 1), 6, 2, False, True, True, "indexing")],
)  # fmt: skip
def test_torch_take_plan_branches(shape, n, index_ndim, negative, int64, contiguous, want):
    """``take``: contiguous 1-D data at an int64 index of two or more dimensions into at most
    8192 elements, or holding a negative value (``take_negative``: its sign not read yet) at
    fewer than 32768 values or into at most 512 KiB of data (float32 here: 2**17 elements),
    or of 8 MiB or more (2**20 int64 values) into at most as many (2**21 float32 elements);
    advanced indexing or index_select otherwise."""
    args = (n, False, index_ndim, negative, int64, contiguous, 4)
    assert st.torch_layout_plan("cpu", shape, 0, *args) == want
    assert st.torch_layout_plan("cuda", shape, 0, n, False, index_ndim, True) == "as_is"


@pytest.mark.parametrize(
    ("device", "shape", "axis", "n", "float32", "want"),
    [("cpu", (9, 5), 0, 99, False, "as_is"), ("cpu", (1, 1, 9, 5), 2, 99, False, "as_is"),
     ("cpu", (4, 4, 9), 2, 32, True, "blocks"), ("cpu", (2, 1, 9, 7), 2, 99, False, "blocks"),
     ("cpu", (4, 4, 9), 2, 31, True, "as_is"), ("cpu", (17, 1, 9), 2, 99, False, "as_is"),
     ("cpu", (2, 2, 9, 1), 2, 1024, False, "gather"),
     ("cpu", (2, 2, 9, 1), 2, 1023, False, "blocks"),
     ("cpu", (128, 9), 1, 32, False, "gather"), ("cpu", (128, 9), 1, 31, False, "columns"),
     ("cpu", (127, 9), 1, 32, False, "columns"), ("cpu", (63, 9), 1, 64, False, "as_is"),
     ("cpu", (128, 9, 2), 1, 99, False, "as_is"),
     ("cpu", (1, 9), 1, 9999, False, "elements"), ("cpu", (9999, 1), 0, 9999, False, "elements"),
     # rows of 1, 2, 4 or 8 bytes with only ones before the axis, from 2048 indices
     ("cpu", (9999, 1), 0, 2047, False, "as_is"), ("cpu", (1, 1, 99, 2), 2, 2048, True, "elements"),
     ("cpu", (99, 3), 0, 4096, False, "as_is"), ("cpu", (2, 99, 2), 1, 4096, False, "as_is"),
     ("cpu", (99, 1, 1), 0, 2048, False, "elements"), ("cuda", (9999, 1), 0, 9999, False, "as_is"),
     ("cpu", (128, 9), 1, 1024, True, "gather"), ("cpu", (128, 9), 1, 1023, True, "as_is"),
     ("cpu", (2, 2, 9, 1), 2, 2**15, True, "gather"),
     ("cpu", (2, 2, 9, 1), 2, 2**15 - 1, True, "blocks"),
     ("cpu", (17, 9, 1), 1, 7711, True, "gather"), ("cpu", (17, 9, 1), 1, 7710, True, "as_is"),
     ("cpu", (17, 1, 9), 2, 241, True, "gather"),  # no dim-1 loop: float32 as any dtype
     ("cpu", (4096, 1), 1, 4, False, "broadcast"), ("cpu", (4096, 1), 1, 3, False, "columns"),
     ("cpu", (4095, 1), 1, 4, False, "columns"), ("cuda", (4096, 1), 1, 4, False, "as_is"),
     ("cpu", (512, 9), 1, 8, False, "gather"), ("cpu", (512, 9), 1, 7, False, "columns"),
     ("cpu", (511, 9), 1, 8, False, "columns"), ("cpu", (2**14, 9), 1, 8, True, "gather"),
     ("cpu", (2**14, 9), 1, 7, True, "as_is"), ("cpu", (2**14 - 1, 9), 1, 8, True, "as_is"),
     ("cpu", (128, 4, 9), 2, 8, False, "gather"), ("cpu", (128, 4, 9), 2, 7, False, "as_is"),
     ("cpu", (128, 4, 9), 2, 8, True, "gather"),  # no dim-1 loop: float32 as any dtype
     ("cpu", (64, 9, 1, 1), 1, 1, False, "columns"), ("cpu", (64, 9), 1, 63, False, "columns"),
     ("cpu", (64, 9), 1, 64, False, "gather"), ("cpu", (64, 9), 1, 31, True, "as_is"),
     ("cpu", (63, 9), 1, 31, False, "as_is"), ("cpu", (64, 9, 2), 1, 31, False, "as_is"),
     ("cpu", (1000, 9), 1, 99, True, "as_is"), ("cuda", (64, 9), 1, 9, False, "as_is"),
     ("cuda", (2, 1, 9, 7), 2, 99, False, "as_is"), ("cuda", (128, 9), 1, 99, False, "as_is"),
     # rows of 2-4 behind more than 16 outer rows, 2^14 (outer row, index) pairs, rows of
     # the axis within 1 MiB: gather at the index over each row's elements
     ("cpu", (17, 99, 3), 1, 964, False, "gather"), ("cpu", (17, 99, 3), 1, 963, False, "as_is"),
     ("cpu", (17, 99, 3), 1, 964, True, "gather"), ("cpu", (16, 99, 3), 1, 2000, False, "as_is"),
     # rows of 2, 4 or 8 bytes (itemsize 4 here: rows of 2): one integer element a row
     ("cpu", (17, 99, 2), 1, 964, False, "gather_elements"),
     ("cpu", (17, 99, 2), 1, 963, False, "as_is"),
     # ... behind any number of outer rows: no index is expanded over each row's elements
     ("cpu", (2, 99, 2), 1, 8192, False, "gather_elements"),
     ("cpu", (2, 99, 2), 1, 8191, False, "as_is"), ("cpu", (2, 99, 3), 1, 8192, False, "as_is"),
     ("cpu", (4, 2, 99, 2), 2, 2048, False, "gather_elements"),
     ("cpu", (4, 2, 99, 3), 2, 2048, False, "blocks"),
     ("cpu", (2048, 99, 4), 1, 8, False, "gather"), ("cpu", (2048, 99, 4), 1, 7, False, "as_is"),
     ("cpu", (2048, 99, 5), 1, 99, False, "as_is"), ("cpu", (4, 5, 99, 3), 2, 999, False, "gather"),
     ("cpu", (64, 2**17, 2), 1, 256, False, "gather_elements"),
     ("cpu", (64, 2**17 + 1, 2), 1, 256, False, "as_is"),
     ("cuda", (17, 99, 2), 1, 964, False, "as_is"),
     # dim 1 behind 1024 outer rows or more, rows of 512 bytes or more (float32 here: 128
     # elements), into 2 MiB of output or more: dim 2 of the data with a leading one
     ("cpu", (1024, 9, 128), 1, 4, True, "slices"), ("cpu", (1024, 9, 128), 1, 3, True, "as_is"),
     ("cpu", (1023, 9, 128), 1, 9, True, "as_is"), ("cpu", (1024, 9, 127), 1, 9, True, "as_is"),
     ("cpu", (1024, 9, 2, 64), 1, 9, False, "slices"),
     ("cpu", (2, 1024, 9, 128), 2, 9, True, "as_is"),
     ("cuda", (1024, 9, 128), 1, 9, True, "as_is"),
     # (indices, index rank) of two or more dimensions: advanced indexing up to 8192 outputs
     ("cpu", (9, 5), 0, (4, 2), False, "indexing"), ("cpu", (9, 5), 0, (4, 1), False, "as_is"),
     ("cpu", (9, 5), 1, (8, 3), False, "indexing"),
     ("cpu", (9, 4096), 0, (2, 2), True, "indexing"), ("cpu", (9, 4096), 0, (3, 2), True, "as_is"),
     ("cpu", (128, 9), 1, (64, 2), False, "indexing"),
     ("cpu", (128, 9), 1, (65, 2), False, "gather"), ("cpu", (0, 9), 0, (5, 3), False, "indexing"),
     ("cpu", (4, 0, 9), 1, (5, 3), False, "indexing"),
     ("cpu", (2, 2, 9, 7), 2, (3, 3), False, "indexing"),
     ("cuda", (9, 5), 0, (4, 2), False, "as_is"),
     # (n, "negative"): a 1-D index holding a negative value, advanced indexing up to 1024
     ("cpu", (9, 4), 0, (256, "negative"), False, "indexing"),
     ("cpu", (9, 4), 0, (257, "negative"), False, "as_is"),
     ("cpu", (8, 9, 1), 1, (128, "negative"), True, "indexing"),
     ("cpu", (128, 9), 1, (9, "negative"), False, "columns"),
     ("cpu", (0, 9), 0, (5, "negative"), False, "indexing"),
     ("cuda", (9, 4), 0, (2, "negative"), False, "as_is")],
)  # fmt: skip
def test_torch_layout_plan_branches(device, shape, axis, n, float32, want):
    n, k = n if isinstance(n, tuple) else (n, 1)
    if k == "negative":
        assert st.torch_layout_plan(device, shape, axis, n, float32, 1, True) == want
        return
    assert st.torch_layout_plan(device, shape, axis, n, float32, k) == want
    assert st.torch_layout_plan(device, shape, axis, n, float32, k, False) == want


@pytest.mark.parametrize(
    ("itemsize", "n", "want"),
    [(1, 31, "columns"), (1, 32, "gather"), (2, 7, "columns"), (2, 8, "gather"),
     (8, 8, "gather")],
)  # fmt: skip
def test_torch_gather_plan_fewest_indices_by_itemsize(itemsize, n, want):
    """``gather`` for columns from 8 indices of elements of two bytes or more, from 32 of one
    byte (whose strided copy per index costs less)."""
    plan = st.torch_layout_plan("cpu", (600, 9), 1, n, False, 1, False, True, True, itemsize)
    assert plan == want


@pytest.mark.parametrize(
    ("contiguous_out", "forward", "axis", "n", "post", "want"),
    [(True, "as_is", 0, 9, 4, "into"), (True, "gather", 2, 9, 1, "into"),
     (False, "as_is", 0, 9, 4, "copy"), (True, "indexing", 0, 256, 4, "index_select"),
     (True, "indexing", 0, 257, 4, "copy"), (True, "indexing", 0, 10**6, 1, "index_select"),
     (True, "elements", 0, 4096, 2, "into"), (False, "elements", 0, 4096, 2, "copy"),
     (True, "indexing", 1, 9, 1, "copy"), (False, "indexing", 0, 9, 4, "copy"),
     (True, "indexing", 2, 9, 1, "index_select"), (True, "indexing", 3, 10**6, 4, "index_select"),
     (False, "indexing", 2, 9, 1, "copy")],
)  # fmt: skip
def test_torch_out_plan_branches(contiguous_out, forward, axis, n, post, want):
    assert st.torch_out_plan(contiguous_out, forward, axis, n, post) == want
    # an out that starts between two of the forward's elements: index_select writes it
    whole = st.torch_out_plan(contiguous_out, forward, axis, n, post, False)
    assert whole == ("copy" if not contiguous_out else "index_select")
    # a conjugate or negative out, whose memory no plan views: the result copied in
    assert st.torch_out_plan(contiguous_out, forward, axis, n, post, True, True) == "copy"


@pytest.mark.parametrize(
    ("forward", "index_ndim", "out_elements", "want"),
    [("indexing", 2, 1, True), ("indexing", 2, 1024, True), ("indexing", 2, 1025, False),
     ("indexing", 4, 1024, True), ("indexing", 1, 8, False), ("as_is", 2, 8, False),
     ("take", 2, 8, False), ("columns", 3, 8, False)],
)  # fmt: skip
def test_torch_out_given_branches(forward, index_ndim, out_elements, want):
    assert st.torch_out_given(forward, index_ndim, out_elements) is want


@pytest.mark.parametrize(
    ("axis", "n_index", "grad_elements", "shape", "half", "want"),
    [(0, 1, 1, (10**9,), False, True), (0, 4096, 4096, (7,), False, True),
     (0, 4097, 4097, (7,), False, False), (0, 16, 16, (8,), True, False),
     (0, 17, 17, (8,), True, True), (0, 17, 17, (2**17 + 512 * 17, 1), True, True),
     (0, 17, 17, (2**17 + 512 * 17 + 1,), True, False), (0, 256, 4096, (16, 16), True, True),
     (0, 256, 4097, (256,), True, False), (1, 8, 8, (8, 1), False, False),
     (2, 4096, 4096, (2, 2, 2), True, False)],
)  # fmt: skip
def test_torch_grad_given_branches(axis, n_index, grad_elements, shape, half, want):
    assert st.torch_grad_given(axis, n_index, grad_elements, shape, half) is want


@pytest.mark.parametrize(
    ("shape", "axis", "index_ndim", "device", "want"),
    [((5, 32, 1), 1, 1, "cpu", 1), ((5, 31, 1), 1, 1, "cpu", 0),
     ((5, 4, 8, 1, 1), 1, 2, "cpu", 1), ((2, 1, 3, 40, 1), 3, 1, "cpu", 1),
     ((5, 128, 2), 1, 1, "cpu", 2), ((5, 127, 2), 1, 1, "cpu", 0),
     ((2, 16, 8, 2, 4), 1, 2, "cpu", 8), ((2, 200, 9), 1, 1, "cpu", 0),
     ((1, 1, 40, 1), 2, 1, "cpu", 0), ((0, 40, 1), 1, 1, "cpu", 0),
     ((1, 200, 3), 1, 1, "cpu", 0), ((5, 40), 1, 1, "cpu", 0), ((5, 40, 2), 1, 1, "cpu", 0),
     ((5, 40, 1), 1, 1, "cuda", 0), ((40, 1), 0, 1, "cpu", 0)],
)  # fmt: skip
def test_torch_grad_rows_branches(shape, axis, index_ndim, device, want):
    """On the CPU, a gradient whose index is preceded by more than one element and followed
    by rows of at most 8 is added on its (pre, n x row) view: from 32 index positions on rows
    of one, from 128 on longer ones."""
    assert st.torch_grad_rows(shape, axis, index_ndim, device) == want


@pytest.mark.parametrize(
    ("n", "want"),
    [(0, "host"), (16, "host"), (17, "remainder"), (1024, "remainder"), (1025, "sampled")],
)
def test_torch_wrap_plan_branches(n, want):
    assert st.torch_wrap_plan(n) == want


@pytest.mark.parametrize(
    ("n", "want"),
    [(1, "host"), (16, "host"), (17, "aminmax"), (32768, "aminmax"), (10**8, "aminmax")],
)
def test_torch_extremes_plan_branches(n, want):
    assert st.torch_extremes_plan(n) == want


@pytest.mark.parametrize(
    ("table", "want"),
    [(1, "index_add"), (4096, "index_add"), (4097, "index_copy"), (10**7, "index_copy")],
)
def test_torch_one_each_plan_branches(table, want):
    """A half-precision gradient that repeats no slot: its own index_add_ into tables of up to
    4096 elements, index_copy_ of the slices plus 0 beyond."""
    assert st.torch_one_each_plan(table) == want


@pytest.mark.parametrize(
    ("grad_elements", "n_index", "pre", "post", "want"),
    [(2**24, 8, 1, 1, (False, 1)), (2**23, 8, 1, 1, (False, 2)),
     (2**23 - 1, 8, 1, 1, (False, 8)), (2**25, 2**15, 1, 1024, (False, 2048)),
     (2**24, 8, 2, 64, (False, 1)), (2**24, 8, 2, 63, (True, 2**21 // (8 * 63))),
     (2**24, 2**14, 1024, 1, (True, 128)), (2**23, 2**20, 8, 3, (True, 22)),
     (2**23, 2**22, 2, 1, (True, 1)), (2**26, 3, 1, 2**26 // 3, (False, 1))],
)  # fmt: skip
def test_half_grad_slice_branches(grad_elements, n_index, pre, post, want):
    """Slices of about 2^21 elements from 2^23: index positions where each is one block or
    rows of 64 and more, else outer blocks with 64 elements a position at least (rows of
    more than one)."""
    shape = [1, pre, n_index, post, 1]  # the dimensions of one around change nothing
    assert st.half_grad_slice(grad_elements, n_index, shape, 2) == want


@pytest.mark.parametrize(
    ("shape", "axis", "n_index", "repeated", "row_sums", "want", "asks"),
    [([62500, 16], 0, 40, True, True, "row_sums", True),
     ([62500, 15], 0, 40, True, True, "distinct", False),
     ([2, 31250, 16], 1, 40, True, True, "distinct", False),
     ([1, 62500, 16], 1, 40, True, True, "row_sums", True),
     ([62500, 16], 0, 40, True, False, "distinct", True),
     ([62500, 16], 0, 40, False, True, "as_given", False),
     ([6250, 16], 0, 40, True, True, "float32", False),
     ([1184, 128], 0, 40, True, True, "row_sums", True),
     ([1184, 128], 0, 40, True, False, "float32", True),
     ([1185, 127], 0, 40, True, True, "float32", False),
     ([2, 592, 127], 1, 40, True, True, "float32", False),
     ([2, 592, 128], 1, 40, True, True, "row_sums", True),
     ([2, 31250, 127], 1, 40, True, True, "distinct", False),
     ([2, 31250, 128], 1, 40, True, True, "row_sums", True),
     ([2, 31250, 128], 1, 40, True, False, "distinct", True),
     ([1, 1184, 2, 64], 1, 40, True, True, "row_sums", True),
     ([1184, 128], 0, 40, False, True, "as_given", False),
     ([38, 4096], 0, 40, True, True, "row_sums", True),
     ([37, 4096], 0, 40, True, True, "row_sums", True),
     ([10**6], 0, 40, True, True, "distinct", False)],
)  # fmt: skip
def test_torch_half_grad_plan_branches(shape, axis, n_index, repeated, row_sums, want, asks):
    """Where this PyTorch sums rows in float32 (asked last, only where it decides), ATen's row
    sums replace the distinct sums on rows of 16 elements or more with nothing before the axis,
    and either plan on rows of 128 or more; nowhere else."""
    asked: list[bool] = []

    def answer() -> bool:
        asked.append(row_sums)
        return row_sums

    replaced = ("distinct", "float32") if want == "row_sums" else (want,)
    assert st.half_grad_plan("torch", math.prod(shape), n_index, repeated) in replaced
    assert st.torch_half_grad_plan(shape, axis, n_index, repeated, answer) == want
    assert st.torch_half_grad_plan(shape, axis, n_index, repeated, None) != "row_sums"
    assert len(asked) == asks


@pytest.mark.parametrize(
    ("data", "n_index", "want"),
    [(2**23 - 1, 2**14, "float32"), (2**23 - 1, 2**14 - 257, "distinct"),
     (2**23, 2**18 - 1, "distinct"), (2**23, 2**18, "float32"), (2**23, 2**14, "distinct"),
     (2**25, 2**20 - 1, "distinct"), (2**25, 2**20, "float32"), (2**23, 17, "distinct")],
)  # fmt: skip
def test_torch_half_grad_plan_on_fresh_float32_tables(data, n_index, want):
    """PyTorch's float32 table of 2^23 elements (32 MiB) or more is fresh memory on every call:
    there the distinct sums from 32 elements an index, below it from 512 an index plus 2^17."""
    assert st.half_grad_plan("torch", data, n_index) == want
    assert st.half_grad_plan("torch", data, n_index, repeated=False) == "as_given"


@pytest.mark.parametrize(
    ("data", "n_index", "scalar", "post", "grad", "want"),
    [(10**6, 1, True, 4, 4, "float32"), (10**6, 1, True, 1, 1, "as_given"),
     (10**6, 1, False, 1, 1, "as_given"), (2049, 4, False, 1, 4, "pairs"),
     (2048, 4, False, 1, 4, "float32"), (40000, 6, False, 1, 6, "pairs"),
     (10**5, 8, False, 100, 6250, "pairs"), (10**5, 8, False, 100, 6251, "float32"),
     (66561, 256, False, 1, 256, "pairs"), (66560, 256, False, 1, 256, "float32"),
     (66561, 257, False, 1, 257, "float32"), (542721, 257, False, 1, 257, "distinct"),
     (542720, 257, False, 1, 257, "float32")],
)  # fmt: skip
def test_jax_half_grad_plan_branches(data, n_index, scalar, post, grad, want):
    """Up to 256 indices, their distinct slots are found by comparing every pair, beyond 256
    table elements an index plus 1024 (and 16x the gradient); for more indices by a sort,
    beyond 2048 an index plus 2^14."""
    assert st.jax_half_grad_plan(data, n_index, scalar, post, grad) == want


@pytest.mark.parametrize(
    ("contiguous", "data", "out", "want"),
    [(True, 100, 1, "index_select"), (True, 1, 100, "index_select"),
     (False, 100, 99, "indexing"), (False, 100, 100, "contiguous"), (False, 0, 0, "contiguous")],
)  # fmt: skip
def test_torch_forward_plan_branches(contiguous, data, out, want):
    assert st.torch_forward_plan(contiguous, data, out) == want


@pytest.mark.parametrize(
    ("shape", "axis", "n_index", "device", "want"),
    [((2, 5, 100), 2, 4, "cpu", "index_select"), ((2, 5, 1, 10, 1, 1), 3, 0, "cpu", "index_select"),
     ((2, 5, 100), 2, 8, "cpu", "index_select"), ((2, 5, 100), 2, 9, "cpu", "indexing"),
     ((5, 200), 1, 4, "cpu", "indexing"),
     ((2, 5, 50, 2), 2, 4, "cpu", "index_select"), ((2, 5, 50, 2), 2, 500, "cpu", "index_select"),
     ((2, 50, 10), 1, 4, "cpu", "indexing"), ((2, 5, 50, 2), 2, 4, "other", "indexing"),
     ((2, 5, 100), 2, 4, "other", "indexing")],
)  # fmt: skip
def test_torch_forward_plan_strided_columns(shape, axis, n_index, device, want):
    """Non-contiguous data gathered on dim 2 or later into an output smaller than the data,
    in slices of more than one element or as columns at up to 8 indices: index_select as
    given (on dim 1 ATen copies the whole data first)."""
    assert st.torch_forward_plan(False, 1000, 999, shape, axis, n_index, device) == want
    assert st.torch_forward_plan(False, 1000, 1000, shape, axis, n_index, device) == "contiguous"


@pytest.mark.parametrize(
    ("out", "device", "int64", "want"),
    [(99, "cpu", True, "take"), (99, "cpu", False, "indexing"), (99, "other", True, "indexing"),
     (100, "cpu", True, "contiguous")],
)  # fmt: skip
def test_torch_forward_plan_strided_1d(out, device, int64, want):
    """Non-contiguous 1-D data into a smaller output on the CPU: torch.take at an int64
    index (the only dtype it reads), advanced indexing at an int32 one."""
    assert st.torch_forward_plan(False, 100, out, (100,), 0, 5, device, int64) == want
    transformed = st.torch_forward_plan(False, 100, out, (100,), 0, 5, device, int64, False)
    assert transformed == ("indexing" if want == "take" else want)  # (vmap has no take)


@pytest.mark.parametrize(
    ("shape", "axis", "indices"),
    [((30, 50, 40), 2, [39, -40]), ((2, 3, 20, 70, 30), -1, [[-1, 2], [29, 0]]),
     ((40, 20, 9, 25), 3, [-3]), ((60, 40, 33), 2, [1, -2, 3, -4]),
     ((30, 50, 40, 6), 2, [39, -40, 5, 7, 1, -3]), ((8, 6, 300, 30), -2, [[1, -2, 9], [7, 0, 7]])],
)  # fmt: skip
def test_torch_strided_columns_match_numpy(shape, axis, indices):
    """The columns (at up to 8 indices) and slices of more than one element (at any count)
    of non-contiguous data (every other element of each row) on dim 2 or later, read by
    index_select where they lie (outputs past advanced indexing's few elements): np.take's
    values, np.add.at's gradient and the same values through ``out=``."""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    rng = np.random.default_rng(11)
    full = rng.standard_normal((*shape[:-1], 2 * shape[-1]))
    data = torch.from_numpy(full)[..., ::2]
    idx = np.asarray(indices)
    ax = axis % len(shape)
    assert kernels.plan_of(data, ax, idx.size, idx.ndim, bool((idx < 0).any())) == ("as_is", False)
    want = np.take(full[..., ::2], idx, axis=axis)
    got = gatherx.gather(data, torch.from_numpy(idx), axis=axis)
    np.testing.assert_array_equal(got.numpy(), want)
    out = torch.empty(want.shape, dtype=data.dtype)
    assert gatherx.gather(data, torch.from_numpy(idx), axis=axis, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    leaf = torch.from_numpy(full.copy())[..., ::2].requires_grad_(True)  # strided, a leaf
    seed = rng.standard_normal(want.shape)
    (g,) = torch.autograd.grad(gatherx.gather(leaf, torch.from_numpy(idx), axis=axis), leaf,
                               torch.from_numpy(seed))  # fmt: skip
    np.testing.assert_array_equal(g.numpy(), add_at(shape, idx, seed, ax))


@pytest.mark.parametrize(
    ("shape", "axis", "indices"),
    [((300, 1, 60), 1, [0, -1, 0, 0]), ((400, 30, 1), -1, [[0, -1, -1], [0, 0, -1]]),
     ((1, 5000), 0, [[-1, 0], [0, -1], [0, 0]]), ((1,), 0, np.zeros((20, 900), np.int64) - 1),
     ((3000, 1, 2), 1, [0, -1, 0, 0]), ((1, 4), 0, np.zeros((70, 60), np.int64) - 1)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_torch_broadcast_plan_matches_numpy(monkeypatch, shape, axis, indices, dtype):
    """An axis of length 1 at 4 indices or more into 16384 output elements or more: its one
    slice repeated by one copy, no index_select and no wrapped index; np.take's values
    (forward, ``out=`` contiguous or not), np.add.at's gradient, IndexError past the range;
    non-contiguous data is never broadcast as given (on the copy an output past its size
    makes, it is)."""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    idx = np.asarray(indices)
    ax = axis % len(shape)
    host = (np.arange(math.prod(shape)) % 97).astype(dtype).reshape(shape)
    data = torch.from_numpy(host)
    index = torch.from_numpy(idx)
    assert kernels.plan_of(data, ax, idx.size, idx.ndim, None) == ("broadcast", False)
    want = np.take(host, idx, axis=axis)
    selects = []
    real = torch.index_select
    monkeypatch.setattr(torch, "index_select", lambda *a, **k: selects.append(a) or real(*a, **k))
    np.testing.assert_array_equal(gatherx.gather(data, index, axis=axis).numpy(), want)
    assert not selects
    out = torch.zeros(want.shape, dtype=data.dtype)
    assert gatherx.gather(data, index, axis=axis, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    strided_out = torch.zeros((*want.shape[:-1], 2 * want.shape[-1]), dtype=data.dtype)[..., ::2]
    assert gatherx.gather(data, index, axis=axis, out=strided_out) is strided_out
    np.testing.assert_array_equal(strided_out.numpy(), want)
    np.testing.assert_array_equal(index.numpy(), idx)  # never written
    if dtype in ("float32", "float16"):
        leaf = data.clone().requires_grad_(True)
        seed = np.ones(want.shape, dtype)
        (g,) = torch.autograd.grad(gatherx.gather(leaf, index, axis=axis), leaf,
                                   torch.from_numpy(seed))  # fmt: skip
        sums = add_at(shape, idx, seed.astype(np.float64), ax)  # (summed in float32: exact)
        np.testing.assert_array_equal(g.numpy(), sums.astype(dtype))
    bad = idx.copy()
    bad.flat[-1] = 1
    with pytest.raises(IndexError, match=r"idx=1 .* \[-1,0\]"):
        gatherx.gather(data, torch.from_numpy(bad), axis=axis)
    strided = torch.from_numpy(np.repeat(host, 2, axis=-1))[..., ::2]
    if not strided.is_contiguous():  # ((1,) with a stride of 2 is: one element)
        assert kernels.plan_of(strided, ax, idx.size, idx.ndim, None) != ("broadcast", False)
    np.testing.assert_array_equal(gatherx.gather(strided, index, axis=axis).numpy(), want)


@pytest.mark.parametrize("dtype", ["uint8", "bool", "float16", "bfloat16", "float32", "int64"])
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_torch_broadcast_copies_short_rows_as_one_element(monkeypatch, dtype, offset):
    """Rows of 2, 4 or 8 bytes after the axis of length 1, at an offset where such an element
    starts, are copied as one integer element each (one fill a position, not a loop over each
    short row); other rows and offsets in their own dtype: np.take's values either way, into a
    new tensor and into ``out``."""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    torch_dtype = getattr(torch, dtype)
    shape, idx = (500, 1, 2), np.array([[0, -1] * 20] * 3)
    values = torch.from_numpy(np.arange(2 + math.prod(shape)) % 7).to(torch_dtype)
    data = values[offset : offset + math.prod(shape)].view(shape)
    host = data.float().numpy() if dtype == "bfloat16" else data.numpy()
    assert kernels.plan_of(data, 1, idx.size, idx.ndim, None) == ("broadcast", False)
    row = 2 * data.element_size()
    wide = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(row)
    if offset * data.element_size() % row:
        wide = None
    copied = []
    real = torch.Tensor.copy_
    monkeypatch.setattr(
        torch.Tensor, "copy_", lambda x, y, *a: copied.append(y.dtype) or real(x, y, *a)
    )
    want = np.take(host, idx, axis=1)
    got = gatherx.gather(data, torch.from_numpy(idx), axis=1)
    out = torch.zeros(want.shape, dtype=torch_dtype)
    assert gatherx.gather(data, torch.from_numpy(idx), axis=1, out=out) is out
    for result in (got, out):
        np.testing.assert_array_equal(
            result.float().numpy() if dtype == "bfloat16" else result.numpy(), want
        )
    assert copied == [wide or torch_dtype] * 2


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape", "dtype", "plan", "bit"),
    [((3000, 1), 0, (2048,), "complex64", "elements", "conj"),
     ((3000, 1), 0, (2048,), "complex64", "elements", "neg"),
     ((2, 300, 50), 2, (8,), "float16", "gather", "neg"),
     ((2000, 30, 2), 1, (9,), "float32", "gather_elements", "neg"),
     ((3000, 1), 1, (8,), "float16", "broadcast", "neg")],
)  # fmt: skip
@pytest.mark.parametrize("negative", [False, True])
def test_torch_conjugate_and_negative_views_take_no_integer_view(
    shape, axis, index_shape, dtype, plan, bit, negative
):
    """A conjugate or negative view (``x.conj()``, ``x.conj().imag``) holds in memory values
    PyTorch conjugates or negates as it reads them: the plans that view the data (or ``out``)
    as integers, which PyTorch refuses there, give way to ``index_select`` on them; the
    resolved values, forward, ``out=`` of either kind, and the gradient of advanced indexing.
    (The same calls on plain tensors take those plans.)"""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    rng = np.random.default_rng(15)
    torch_dtype = getattr(torch, dtype)
    parts = torch.from_numpy(rng.standard_normal((2, *shape)).astype(np.float32))
    base = torch.complex(parts[0], parts[1]) if dtype == "complex64" else parts[0].to(torch_dtype)
    flip = torch.conj if bit == "conj" else torch.ops.aten._neg_view
    size = shape[axis]
    idx = torch.from_numpy(rng.integers(-size if negative else 0, size, index_shape))
    assert kernels.plan_of(base, axis, idx.numel(), idx.ndim, negative)[0] == plan
    data = flip(base)
    assert kernels.plan_of(data, axis, idx.numel(), idx.ndim, negative)[0] == "as_is"
    want = data.resolve_conj().resolve_neg()[(slice(None),) * axis + (idx,)]
    kernels._EAGER_PLANS.clear()
    for first in (data, base, data):  # the view first, the plain tensor's plan, the view again
        got = gatherx.gather(first, idx, axis=axis)
        assert torch.equal(got.resolve_conj().resolve_neg(), first[(slice(None),) * axis + (idx,)])
        # the view's own plan is not remembered for the plain tensor
        assert kernels.eager_plan(base, axis, idx.numel(), idx.ndim, negative, True)[0] == plan
    for into in (torch.zeros_like(want), flip(torch.zeros_like(want))):
        assert gatherx.gather(data, idx, axis=axis, out=into) is into
        assert torch.equal(into.resolve_conj().resolve_neg(), want)
    if dtype != "float16":  # (the gradient of a sum of float16 rounds by order)
        leaves = [base.clone().requires_grad_() for _ in range(2)]
        got = gatherx.gather(flip(leaves[0]), idx, axis=axis)
        ref = flip(leaves[1])[(slice(None),) * axis + (idx,)]
        for result in (got, ref):  # (a real loss of every part)
            (torch.view_as_real(result) if result.is_complex() else result).sum().backward()
        assert torch.equal(leaves[0].grad, leaves[1].grad)


def test_torch_eager_plans_are_the_rules_plans(monkeypatch):
    """A plain eager call's plan, remembered, is the rules' own (first and later calls), and
    the memory holds a bounded number of them."""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    shapes = [(7,), (50, 40), (6, 5, 300), (2, 3, 4, 5000), (60, 2)]
    calls = []
    for shape in shapes:
        full = torch.zeros(*shape[:-1], 2 * shape[-1])
        for data in (full[..., : shape[-1]].contiguous(), full[..., ::2]):
            for axis in range(len(shape)):
                for n, k in ((1, 1), (4, 1), (40, 1), (40, 2), (40000, 1)):
                    for negative in (False, True, None):
                        calls.append((data, axis, n, k, negative, k == 1))
    for _ in range(2):
        for data, *rest in calls:
            assert kernels.eager_plan(data, *rest) == kernels.plan_of(data, *rest)
    monkeypatch.setattr(kernels, "EAGER_PLANS_KEPT", 8)
    for n in range(20):
        kernels.eager_plan(torch.zeros(3, 4), 1, n + 1, 1, False, True)
    assert 0 < len(kernels._EAGER_PLANS) <= 8


@pytest.mark.parametrize("plan", ["index_select", "indexing", "contiguous"])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((6, 5), [[5, -1], [0, 2]], 0),
        ((4, 6, 5), [2, -6, 0], 1),
        ((4, 6, 5), -2, -1),
        ((4, 6, 5), np.zeros((0, 2), int), 2),
        ((70, 30), (np.arange(64) * 7 % 60 - 30).reshape(2, 32), 1),  # torch.gather's columns
    ],
)
@pytest.mark.parametrize("layout", ["transposed", "stepped"])
@pytest.mark.parametrize("grad", [False, True])
def test_torch_strided_plans_match_numpy(monkeypatch, plan, shape, indices, axis, layout, grad):
    """Each formulation for non-contiguous data gives np.take's result and index_select's
    gradient, scalar and empty indices included."""
    torch = need("torch")
    from gatherx._backends.torch import kernels

    monkeypatch.setattr(kernels, "torch_forward_plan", lambda *a: plan)
    rng = np.random.default_rng(5)
    if layout == "transposed":
        data = torch.from_numpy(rng.standard_normal(shape[::-1])).permute(
            *range(len(shape) - 1, -1, -1)
        )
    else:
        data = torch.from_numpy(rng.standard_normal((*shape[:-1], 2 * shape[-1])))[..., ::2]
    assert not data.is_contiguous()
    idx = np.asarray(indices)
    leaf = data.clone().requires_grad_(grad) if grad else data
    got = gatherx.gather(leaf, torch.from_numpy(idx), axis=axis)
    want = np.take(data.numpy(), idx, axis=axis)
    np.testing.assert_array_equal(got.detach().numpy(), want)
    with _policy.force("device"):  # a 0-d index not read on the host takes the plan too
        on_device = gatherx.gather(leaf, torch.from_numpy(idx), axis=axis)
    np.testing.assert_array_equal(on_device.detach().numpy(), want)
    assert got.untyped_storage().data_ptr() != data.untyped_storage().data_ptr() or not got.numel()
    if grad:
        seed = torch.from_numpy(rng.standard_normal(want.shape))
        (g,) = torch.autograd.grad(got, leaf, seed)
        expected = np.zeros(shape)
        np.add.at(expected, (slice(None),) * (axis % len(shape)) + (idx % shape[axis],),
                  seed.numpy())  # fmt: skip
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize(("shape", "indices", "axis"), [((5, 3), [4, 4, 0], 0),
                                                        ((2, 3, 4), [3, -1, 0, 3], 2)])  # fmt: skip
def test_torch_backward_branches(index_dtype, shape, indices, axis):
    torch = need("torch")
    expected = "index_add_int64" if index_dtype == "int32" else "index_add"
    assert st.torch_backward_plan(index_dtype, "cpu") == expected
    idx = np.asarray(indices, dtype=index_dtype)
    data = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    out = gatherx.gather(data, torch.from_numpy(idx), axis=axis)
    g = torch.from_numpy(grad_for(shape, idx, axis % len(shape), "float64"))
    (got,) = torch.autograd.grad(out, data, g)
    want = add_at(shape, idx, g.numpy(), axis % len(shape))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    # The formulation itself: index_add_ on the data's own shape with a widened index.
    ax = axis % len(shape)
    flat = torch.from_numpy(idx % shape[ax]).reshape(-1).long()
    source = g.reshape((*shape[:ax], flat.shape[0], *shape[ax + 1 :]))
    direct = torch.zeros(shape, dtype=g.dtype).index_add_(ax, flat, source)
    np.testing.assert_allclose(direct.numpy(), want, rtol=1e-12, atol=1e-12)
    grad_only = gatherx.gather_grad(shape, torch.from_numpy(idx), g, axis=axis)
    np.testing.assert_allclose(grad_only.numpy(), want, rtol=1e-12, atol=1e-12)


def test_torch_backward_keeps_index_off_cpu():
    assert st.torch_backward_plan("int32", "cuda") == "index_add"
    assert st.torch_backward_plan("int64", "cpu") == "index_add"
    assert st.torch_backward_plan("int64", "cuda", 10**6, 10**6, True) == "index_add"


@pytest.mark.parametrize(
    ("index_dtype", "n", "elements", "eager", "half", "want"),
    [("int64", 4096, 4096, True, False, "scatter_add"),
     ("int32", 10**6, 10**6, True, False, "scatter_add"),
     ("int64", 4095, 4095, True, False, "index_add"),
     ("int32", 4095, 4095, True, False, "index_add_int64"),
     ("int64", 4096, 8192, True, False, "index_add"),
     ("int64", 4096, 4096, False, False, "index_add"),
     ("int32", 4096, 4096, True, True, "index_add_int64")],
)  # fmt: skip
def test_torch_backward_plan_one_element_a_position(index_dtype, n, elements, eager, half, want):
    """A gradient of one element per index position, from 4096 positions, in plain eager CPU
    code, but half precision: ``scatter_add_`` on its 1-D view."""
    assert st.torch_backward_plan(index_dtype, "cpu", n, elements, eager, half) == want


# --------------------------------------------------------------------------- JAX

JAX_LAYOUTS = [
    ("as_is", (7, 3), [[6, 0], [2, 2]], 0),
    ("as_is", (3, 4, 5), [3, 0, 3], 1),
    ("as_is", (9,), [8, 0, -1], 0),
    # the last axis at an index of a quarter of its length or more: the transpose scatters
    # whole rows
    ("axis_first", (6, 9), [8, 0, 4], 1),
    ("axis_first", (2, 3, 4), [[3, -1], [0, 0]], 2),
    ("axis_first", (2, 5, 1), [4, 0], 1),
    # fewer values: the moves of the whole table would cost more than they save
    ("as_is", (6, 9), [8, 0], 1),
    ("as_is", (2, 9, 1), [[4], [-1]], 1),
]


@pytest.mark.parametrize(("layout", "shape", "indices", "axis"), JAX_LAYOUTS)
def test_jax_layouts_and_modes(layout, shape, indices, axis):
    jax = need("jax")
    jnp = need("jax.numpy")
    assert st.jax_layout_plan(shape, axis % len(shape), math.prod(np.shape(indices))) == layout
    rng = np.random.default_rng(1)
    data = rng.standard_normal(shape).astype(np.float32)
    idx = np.asarray(indices, dtype=np.int32)
    want = np.take(data, idx, axis=axis)
    jd, ji = jnp.asarray(data), jnp.asarray(idx)
    # Eager (indices checked on the host: promise_in_bounds) and under jit (traced: fill).
    np.testing.assert_array_equal(np.asarray(gatherx.gather(jd, ji, axis=axis)), want)
    jitted = jax.jit(lambda d, i: gatherx.gather(d, i, axis=axis))
    np.testing.assert_array_equal(np.asarray(jitted(jd, ji)), want)
    # The transpose of each layout, under jit, against np.add.at.
    ax = axis % len(shape)
    g = grad_for(shape, idx, ax, "float32")
    vjp = jax.jit(lambda d, i, c: jax.vjp(lambda t: gatherx.gather(t, i, axis=axis), d)[1](c)[0])
    want_grad = add_at(shape, idx, g, ax)
    np.testing.assert_allclose(np.asarray(vjp(jd, ji, jnp.asarray(g))), want_grad, rtol=1e-6)
    got_grad = gatherx.gather_grad(shape, ji, jnp.asarray(g), axis=axis)
    np.testing.assert_allclose(np.asarray(got_grad), want_grad, rtol=1e-6)


def test_jax_modes():
    assert st.jax_gather_mode(indices_checked=True) == "promise_in_bounds"
    assert st.jax_gather_mode(indices_checked=False) == "fill_or_drop"
    assert st.jax_index_plan(0) == "slice"
    assert st.jax_index_plan(1) == st.jax_index_plan(3) == "gather"
    # an unchecked scalar index of data whose dtype JAX does not hold now: the filled gather
    assert st.jax_index_plan(0, True, False) == st.jax_index_plan(0, False, True) == "slice"
    assert st.jax_index_plan(0, False, False) == "gather"
