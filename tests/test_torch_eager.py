"""The eager PyTorch fast path: the ATen behaviour it relies on, and the same results and errors."""

from __future__ import annotations

import numpy as np
import pytest
from support import need

torch = need("torch")

import gatherx  # noqa: E402
from gatherx import _strategy  # noqa: E402
from gatherx._backends.torch import TorchBackend, kernels  # noqa: E402


def _general_path_only(*args, **kwargs):
    pytest.fail("the eager fast path took the general path's index check")


@pytest.fixture
def eager_only(monkeypatch):
    """Fail if a call leaves the eager fast path for the general one."""
    monkeypatch.setattr(TorchBackend, "bounded", _general_path_only)


# --------------------------------------------------------------------------- ATen's own check
# eager_gather lets index_select validate indices on axis 0 and only then runs its own check.
# These hold the installed torch to that: every CPU branch of index_select refuses an index
# outside [0, s-1] (if one ever did not, gatherx would return rows it must refuse).

ATEN_SHAPES = [
    (7,),  # the 1-D loop
    (7, 3),  # the row-memcpy loop
    (7, 2, 3),
    (7, 200, 200),  # slices above ATen's grain size: per-slice TensorIterator copies
    (0, 3),  # zero-size data
    (7, 0),  # zero-size rows
]


@pytest.mark.parametrize("shape", ATEN_SHAPES, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("bad", ["-1", "-s", "s", "s+9", "max"])
@pytest.mark.parametrize("where", ["first", "last"])
def test_aten_index_select_refuses_every_bad_index(shape, index_dtype, layout, bad, where):
    size = shape[0]
    # with s == 0, "-s" and "s" are both 0, which no index of an empty axis may be
    value = {"-1": -1, "-s": -size, "s": size, "s+9": size + 9, "max": 2**31 - 1}[bad]
    data = torch.zeros(shape)
    if layout == "transposed" and len(shape) > 1:
        data = data.transpose(0, -1).contiguous().transpose(0, -1)
    row = int(np.prod(shape[1:]))
    good = [i % size for i in range(3000 if row <= 16 else 20)] if size else []
    index = [*good, value] if where == "last" else [value, *good]
    with pytest.raises((IndexError, RuntimeError)):
        torch.index_select(data, 0, torch.tensor(index, dtype=index_dtype))


# Small eager gathers on axis 0 index with data[index] (see _strategy.torch_rows_plan), which
# takes [-s, s-1] as Gather-11 does and must refuse everything else whenever its output holds
# an element (an empty output is never indexed that way).
SMALL_SHAPES = [(7,), (7, 3), (7, 2, 3), (1, 4), (7, 1)]


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("bad", ["-s-1", "s", "s+9", "max", "min"])
@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("index_rank", [1, 2])
def test_aten_advanced_indexing_refuses_every_bad_index(
    shape, index_dtype, layout, bad, where, index_rank
):
    size = shape[0]
    value = {"-s-1": -size - 1, "s": size, "s+9": size + 9, "max": 2**31 - 1,
             "min": -(2**31)}[bad]  # fmt: skip
    data = torch.zeros(shape)
    if layout == "transposed" and len(shape) > 1:
        data = data.transpose(0, -1).contiguous().transpose(0, -1)
    good = [i % size - (i % 2) * size for i in range(7)]  # negatives in [-s, -1] too
    index = [*good, value] if where == "last" else [value, *good]
    index = torch.tensor(index, dtype=index_dtype).reshape((-1,) if index_rank == 1 else (2, 4))
    with pytest.raises((IndexError, RuntimeError)):
        data[index]


@pytest.mark.parametrize("shape", [(5, 3), (5,), (300, 2)], ids=str)
@pytest.mark.parametrize("index_shape", [(4,), (2, 2), (900,), (30, 30)], ids=str)
def test_small_and_large_rows_plans_match_numpy(shape, index_shape):
    """Small outputs (data[index]) and large ones (index_select), negatives included."""
    rng = np.random.default_rng(0)
    host = rng.standard_normal(shape).astype(np.float32)
    index = rng.integers(-shape[0], shape[0], index_shape)
    for data in (torch.from_numpy(host), torch.from_numpy(host).requires_grad_()):
        got = gatherx.gather(data, torch.from_numpy(index))
        np.testing.assert_array_equal(got.detach().numpy(), np.take(host, index, axis=0))


def test_aten_index_select_refuses_bad_indices_on_several_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        data = torch.zeros(50_000, 64)
        index = torch.randint(0, 50_000, (200_000,))
        index[123_456] = 50_000
        with pytest.raises(IndexError):
            torch.index_select(data, 0, index)
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- axis-0 attempts
# An eager gather on axis 0 tries the attempts _strategy.torch_axis0_plan lists, each letting
# ATen refuse what it cannot take, and reads the index only after a refusal. Every attempt
# must give np.take's result for valid indices and gatherx's IndexError for any bad one.

ATTEMPT_SHAPES = [(10, 4), (300, 64), (20, 2, 3), (9,)]
BAD_VALUES = {
    "-s-1": lambda s: -s - 1,
    "s": lambda s: s,
    "-2s": lambda s: -2 * s,
    "2s": lambda s: 2 * s,
    "int32 max": lambda s: 2**31 - 1,
    "int32 min": lambda s: -(2**31),
    "int64 max": lambda s: 2**63 - 1,
    "int64 min": lambda s: -(2**63),
}


def _attempt_index(size: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    rng = np.random.default_rng(size)
    index = rng.integers(-size, size, shape).astype(dtype)
    index.reshape(-1)[:2] = (-size, size - 1)
    return index


# with autograd the plan never gives "indexing": the backward needs a non-negative index
ATTEMPTS = [("indexing", False), ("as_given", False), ("doubled", False), ("wrapped", False),
            ("as_given", True), ("doubled", True), ("wrapped", True)]  # fmt: skip


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize(("attempt", "grad"), ATTEMPTS, ids=str)
@pytest.mark.parametrize("shape", ATTEMPT_SHAPES, ids=str)
@pytest.mark.parametrize("index_shape", [(700,), (30, 25)], ids=str)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_every_axis0_attempt_matches_numpy(
    monkeypatch, attempt, grad, shape, index_shape, index_dtype
):
    monkeypatch.setattr(kernels, "torch_axis0_plan", lambda *a, **k: (attempt,))
    monkeypatch.setattr(TorchBackend, "_eager_bounded", _general_path_only)  # no read
    host = np.random.default_rng(1).standard_normal(shape)
    data = torch.from_numpy(host).requires_grad_(grad)
    index = _attempt_index(shape[0], index_shape, index_dtype)
    if attempt == "as_given":  # it refuses negatives (the read path then takes them)
        index %= shape[0]
    out = gatherx.gather(data, torch.from_numpy(index))
    np.testing.assert_array_equal(out.detach().numpy(), np.take(host, index, axis=0))
    if grad:
        weights = torch.from_numpy(np.random.default_rng(2).standard_normal(out.shape))
        (got,) = torch.autograd.grad(out, data, weights)
        want = np.zeros(shape)
        np.add.at(want, index % shape[0], weights.numpy())
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize("attempt", ["as_given", "doubled", "wrapped"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64, torch.bool,
                                   torch.int8, torch.int64], ids=str)  # fmt: skip
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_axis0_attempts_keep_dtype_and_read_any_layout(monkeypatch, attempt, dtype, layout):
    monkeypatch.setattr(kernels, "torch_axis0_plan", lambda *a, **k: (attempt,))
    monkeypatch.setattr(TorchBackend, "_eager_bounded", _general_path_only)  # no read
    data = (torch.arange(40 * 3) % 7).reshape(40, 3).to(dtype)
    if layout == "transposed":
        data = data.t().contiguous().t()
    index = _attempt_index(40, (700,), "int64")
    if attempt == "as_given":
        index %= 40
    got = gatherx.gather(data, torch.from_numpy(index))
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(_host(got), _oracle(data, index, 0))


@pytest.mark.parametrize("attempt", ["as_given", "doubled", "wrapped"])
def test_axis0_attempts_with_autograd_pass_gradcheck(monkeypatch, attempt):
    monkeypatch.setattr(kernels, "torch_axis0_plan", lambda *a, **k: (attempt,))
    monkeypatch.setattr(TorchBackend, "_eager_bounded", _general_path_only)  # no read
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([[3, -1, 0], [-4, 3, 3]])
    if attempt == "as_given":
        index = index % 4  # it refuses negatives: the read path would take them

    def f(t: torch.Tensor) -> torch.Tensor:
        return gatherx.gather(t, index)

    assert "GatherEager" in type(f(x).grad_fn).__name__
    assert torch.autograd.gradcheck(f, (x,), check_batched_grad=True)
    assert torch.autograd.gradgradcheck(f, (x,), check_batched_grad=True)


PLANS = [("indexing",), ("as_given",), ("doubled",), ("wrapped",), ("as_given", "doubled"),
         ("as_given", "wrapped")]  # fmt: skip
# the int64 extremes are no int32 values
BAD = [(bad, "int64") for bad in BAD_VALUES] + [
    (bad, "int32") for bad in BAD_VALUES if not bad.startswith("int64")
]


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize("attempts", PLANS, ids=str)
@pytest.mark.parametrize("shape", ATTEMPT_SHAPES, ids=str)
@pytest.mark.parametrize(("bad", "index_dtype"), BAD, ids=str)
@pytest.mark.parametrize("where", [0, 1, -1])
def test_every_axis0_attempt_refuses_every_bad_index(
    monkeypatch, attempts, shape, bad, index_dtype, where
):
    size = shape[0]
    value = BAD_VALUES[bad](size)
    monkeypatch.setattr(kernels, "torch_axis0_plan", lambda *a, **k: attempts)
    index = _attempt_index(size, (700,), index_dtype)
    index[where] = value
    position = where % index.size
    data = torch.zeros(shape)
    message = rf"idx={value} at position \({position},\) of indices must be within"
    with pytest.raises(IndexError, match=message):
        gatherx.gather(data, torch.from_numpy(index))


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        (dict(size=10, row_elems=4, n_index=100, index_ndim=1), ("indexing",)),
        (dict(size=10, row_elems=4, n_index=100, index_ndim=1, grad=True), ()),
        (dict(size=10, row_elems=4, n_index=5, index_ndim=0), ()),
        (dict(size=1000, row_elems=8, n_index=200_000, index_ndim=1), ("doubled",)),
        (dict(size=1000, row_elems=8, n_index=200_000, index_ndim=1, grad=True), ("doubled",)),
        (dict(size=100_000, row_elems=8, n_index=40_000, index_ndim=1, grad=True), ("wrapped",)),
        (dict(size=50_000, row_elems=256, n_index=8192, index_ndim=2), ("wrapped",)),
        (dict(size=2**31, row_elems=1, n_index=2**34, index_ndim=1, index_itemsize=4),
         ("wrapped",)),
    ],
)  # fmt: skip
def test_axis0_plan_branches(kwargs, want):
    kwargs = {"itemsize": 4, "index_itemsize": 8, "grad": False, **kwargs}
    assert _strategy.torch_axis0_plan(**kwargs) == want


@pytest.mark.parametrize("first", ["non-negative", "negative"])
@pytest.mark.parametrize("grad", [False, True])
def test_short_rows_take_no_attempt_that_valid_indices_fail(monkeypatch, first, grad):
    # Many short rows, both signs: whatever the first index's sign, one attempt takes them
    # all (no index_select on the index as given, which would refuse a later negative after
    # a pass over the index), and the index is never read for a check.
    monkeypatch.setattr(TorchBackend, "_eager_bounded", _general_path_only)
    calls = []
    select = torch.index_select

    def counted(*args, **kwargs):
        calls.append(args[2])
        return select(*args, **kwargs)

    monkeypatch.setattr(torch, "index_select", counted)
    rng = np.random.default_rng(3)
    host = rng.standard_normal((1000, 8)).astype(np.float32)
    index = rng.integers(-1000, 1000, 200_000)
    index[0] = 5 if first == "non-negative" else -5
    index[-1] = -1
    data = torch.from_numpy(host).requires_grad_(grad)
    out = gatherx.gather(data, torch.from_numpy(index))
    assert len(calls) == 1
    assert int(calls[0].min()) >= 0  # what ATen got takes every valid index
    np.testing.assert_array_equal(out.detach().numpy(), np.take(host, index, axis=0))


# --------------------------------------------------------------------------- gatherx's results

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.bool, torch.int8, torch.uint8, torch.int64, torch.uint16, torch.uint32]  # fmt: skip


def _oracle(data: torch.Tensor, index: np.ndarray, axis: int) -> np.ndarray:
    """NumPy's take on the same bits (bfloat16 and unsigned shells viewed as signed ints)."""
    bits = {torch.bfloat16: torch.int16, torch.uint16: torch.int16, torch.uint32: torch.int32}
    host = data.detach().view(bits.get(data.dtype, data.dtype)).numpy()
    return np.take(host, index, axis=axis)


def _host(out: torch.Tensor) -> np.ndarray:
    bits = {torch.bfloat16: torch.int16, torch.uint16: torch.int16, torch.uint32: torch.int32}
    return out.detach().view(bits.get(out.dtype, out.dtype)).numpy()


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize(
    ("dtype", "layout"),
    [(d, lay) for d in [*DTYPES, torch.complex128] for lay in ("contiguous", "transposed")]
    + [(d, lay) for d in (torch.complex64, torch.complex128) for lay in ("conj", "neg")],
    ids=str,
)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_doubled_rows_match_numpy(dtype, index_dtype, layout):
    """Many indices into a few short rows (the doubled rows), both signs, on every dtype,
    strided, conjugate and negative views included."""
    rng = np.random.default_rng(11)
    base = torch.from_numpy(rng.integers(0, 100, (300, 3))).to(dtype)
    if dtype.is_complex:
        base = base + 1j * torch.from_numpy(rng.integers(0, 100, (300, 3))).to(dtype)
    data = {
        "contiguous": base,
        "transposed": base.T.contiguous().T,
        "conj": base.conj(),
        "neg": torch.ops.aten._neg_view(base),
    }[layout]
    idx = rng.integers(-300, 300, 20_000).astype(index_dtype)
    assert _strategy.torch_axis0_plan(300, 3, data.element_size(), idx.size, 1,
                                      idx.itemsize, grad=False) == ("doubled",)  # fmt: skip
    got = gatherx.gather(data, torch.from_numpy(idx))
    plain = data.resolve_conj().resolve_neg()
    np.testing.assert_array_equal(_host(got), _oracle(plain, idx, 0))


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((6, 3), [[5, 0], [2, 2]], 0),
        ((6, 3), [[-1, 0], [-6, 2]], 0),  # negatives: ATen refuses, gatherx wraps
        ((6,), 4, 0),
        ((6, 3, 2), [2, -1], -2),
        ((2, 6, 3), [[0], [5]], 1),
    ],
)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_eager_matches_numpy(dtype, shape, indices, axis, index_dtype):
    data = (torch.arange(int(np.prod(shape))) % 100).reshape(shape).to(dtype)
    idx = np.asarray(indices, dtype=index_dtype)
    got = gatherx.gather(data, torch.from_numpy(idx), axis=axis)
    assert got.dtype == data.dtype
    assert got.device == data.device
    assert tuple(got.shape) == _oracle(data, idx, axis).shape
    np.testing.assert_array_equal(_host(got), _oracle(data, idx, axis))


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize(
    ("indices", "axis", "message"),
    [
        ([[0, 6], [1, 2]], 0, r"idx=6 at position \(0, 1\) of indices must be within the "
         r"inclusive range \[-6,5\] for axis 0 of size 6"),
        ([[0, 1], [1, -7]], 0, r"idx=-7 at position \(1, 1\)"),
        ([2, 0, -4], 1, r"idx=-4 at position \(2,\) of indices must be within the inclusive "
         r"range \[-3,2\] for axis 1 of size 3"),
    ],
)  # fmt: skip
def test_eager_errors_name_value_and_position(indices, axis, message):
    data = torch.zeros(6, 3, requires_grad=True)
    before = data.detach().clone()
    index = torch.tensor(indices)
    with pytest.raises(IndexError, match=message) as info:
        gatherx.gather(data, index, axis=axis)
    # raised after ATen's refusal was handled: no "during handling of" chain for users to read
    assert info.value.__context__ is None
    assert torch.equal(data.detach(), before)
    assert data.grad is None
    assert torch.equal(index, torch.tensor(indices))
    numpy_error = pytest.raises(IndexError, match=message)
    with numpy_error:
        gatherx.gather(np.zeros((6, 3)), np.asarray(indices), axis=axis)


@pytest.mark.usefixtures("eager_only")
def test_eager_parameter_and_non_contiguous_inputs():
    table = torch.nn.Parameter(torch.randn(10, 4, dtype=torch.float64))
    index = torch.tensor([[9, 0, 9], [-1, 3, 2]]).t()  # not contiguous
    out = gatherx.gather(table, index)
    np.testing.assert_array_equal(out.detach().numpy(), table.detach().numpy()[index.numpy()])
    out.sum().backward()
    want = np.zeros((10, 4))
    np.add.at(want, index.numpy() % 10, 1.0)
    np.testing.assert_array_equal(table.grad.numpy(), want)
    strided = torch.randn(4, 10, dtype=torch.float64).t()  # (10, 4), not contiguous
    got = gatherx.gather(strided, torch.tensor([1, -2]), axis=0)
    np.testing.assert_array_equal(got.numpy(), strided.numpy()[[1, -2]])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [[[3, -1], [0, 3]], [2, 2, -4]], ids=["2d-neg", "dup-neg"])
def test_eager_autograd_matches_index_select(axis, indices):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 4, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.tensor(indices)
    ref = x.detach().clone().requires_grad_(True)
    flat = index.reshape(-1) % x.shape[axis]
    want = torch.index_select(ref, axis % 3, flat)
    want = want.reshape(x.shape[: axis % 3] + index.shape + x.shape[axis % 3 + 1 :])
    out = gatherx.gather(x, index, axis=axis)
    assert out.grad_fn is not None
    assert "GatherEager" in type(out.grad_fn).__name__
    w = torch.randn(out.shape, dtype=torch.float64, generator=gen, requires_grad=True)
    (g,) = torch.autograd.grad(out, x, w, create_graph=True)
    (g_ref,) = torch.autograd.grad(want, ref, w, create_graph=True)
    torch.testing.assert_close(g, g_ref, rtol=0, atol=0)
    # the gradient is itself differentiable (create_graph): the second derivative in w
    (gg,) = torch.autograd.grad((g * g).sum(), w)
    (gg_ref,) = torch.autograd.grad((g_ref * g_ref).sum(), w)
    torch.testing.assert_close(gg, gg_ref, rtol=0, atol=0)


def test_eager_gradcheck_and_batched_grad():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([[4, -1], [0, 2]])

    def f(t: torch.Tensor) -> torch.Tensor:
        return gatherx.gather(t, index, axis=0)

    assert "GatherEager" in type(f(x).grad_fn).__name__
    assert torch.autograd.gradcheck(f, (x,), check_batched_grad=True)
    assert torch.autograd.gradgradcheck(f, (x,), check_batched_grad=True)


def test_modes_that_need_the_general_path_leave_eager(monkeypatch):
    """Forward AD, torch.func and opsets below 11 take the general, Function-based path."""
    seen = []
    real = TorchBackend.bounded

    def spy(*args, **kwargs):
        seen.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(TorchBackend, "bounded", spy)
    x = torch.randn(5, 3, dtype=torch.float64)
    index = torch.tensor([4, 0])
    gatherx.gather(x, index, opset=10)
    assert len(seen) == 1
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x, torch.ones_like(x))
        gatherx.gather(dual, index)
    assert len(seen) == 2
    torch.func.vmap(lambda t: gatherx.gather(t, index))(x[None])
    assert len(seen) == 3


def test_eager_inference_and_no_grad():
    x = torch.randn(6, 2, requires_grad=True)
    with torch.no_grad():
        out = gatherx.gather(x, torch.tensor([5, -6]))
    assert out.grad_fn is None
    assert not out.requires_grad
    with torch.inference_mode():
        y = torch.randn(6, 2)
        out = gatherx.gather(y, torch.tensor([[5, -6]]), axis=0)
        assert out.is_inference()
    np.testing.assert_array_equal(out.numpy(), y.numpy()[[[5, -6]]])


@pytest.mark.parametrize("dtype", [torch.uint32, torch.int32, torch.float16], ids=str)
def test_eager_moved_out_plan(dtype):
    """Rows of 1 KiB or more, a large output and two threads: the out= formulation."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        shape, index = (3, 400, 512), (np.arange(1500) * 7 % 800) - 400
        itemsize = torch.empty((), dtype=dtype).element_size()
        plan = _strategy.torch_forward_plan(
            shape, 1, index.size, itemsize=itemsize, threads=2, eager=True
        )
        assert plan == "moved_out"
        data = (torch.arange(int(np.prod(shape))) % 1000).reshape(shape).to(dtype)
        got = gatherx.gather(data, torch.from_numpy(index), axis=1)
    finally:
        torch.set_num_threads(before)
    assert got.dtype == dtype
    assert got.is_contiguous()
    np.testing.assert_array_equal(_host(got), _oracle(data, index, 1))


# --------------------------------------------------------------------------- gather_grad


def _add_at(shape, index, grad, axis):
    want = np.zeros(shape, dtype=grad.dtype)
    np.add.at(want, (slice(None),) * axis + (index,), grad)
    return want


@pytest.mark.usefixtures("eager_only")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int64])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [((6, 3), [[5, 0], [-1, 5]], 0), ((2, 6, 3), [0, -6, 0, 2], 1), ((4, 5), 3, -1)],
)
def test_eager_gather_grad_matches_add_at(dtype, shape, indices, axis):
    index = np.asarray(indices)
    ax = axis % len(shape)
    out_shape = shape[:ax] + index.shape + shape[ax + 1 :]
    grad = (torch.arange(int(np.prod(out_shape))) % 7 - 3).reshape(out_shape).to(dtype)
    got = gatherx.gather_grad(torch.Size(shape), torch.from_numpy(index), grad, axis=axis)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), _add_at(shape, index, grad.numpy(), ax))


@pytest.mark.usefixtures("eager_only")
def test_eager_gather_grad_errors():
    grad = torch.ones(2, 3)
    with pytest.raises(IndexError, match=r"idx=-7 at position \(1,\) of indices must be within"):
        gatherx.gather_grad((6, 3), torch.tensor([0, -7]), grad)


def test_eager_gather_grad_leaves_bad_shapes_to_the_general_path():
    with pytest.raises(ValueError, match="grad has shape"):
        gatherx.gather_grad((6, 3), torch.tensor([0, 1]), torch.ones(3, 3))
    with pytest.raises(ValueError, match="non-negative"):
        gatherx.gather_grad((-6, 3), torch.tensor([0, 1]), torch.ones(2, 3))
    with pytest.raises(ValueError, match="axis"):
        gatherx.gather_grad((6, 3), torch.tensor([0, 1]), torch.ones(2, 3), axis=2)
