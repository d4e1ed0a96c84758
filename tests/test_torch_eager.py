"""PyTorch in plain eager code: results, errors and gradients against NumPy and torch itself."""

from __future__ import annotations

import numpy as np
import pytest
from support import need

torch = need("torch")

import gatherx  # noqa: E402

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


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((6, 3), [[5, 0], [2, 2]], 0),
        ((6, 3), [[-1, 0], [-6, 2]], 0),  # negatives: ATen refuses, gatherx wraps
        ((6,), 4, 0),
        ((6,), -2, 0),  # a scalar, read as a Python int as given
        ((6, 3, 2), -3, 1),
        ((6, 3, 2), [2, -1], -2),
        ((6, 3), np.zeros((2, 0)), 1),  # empty: nothing to check
        ((6, 3, 2), [[[-6]], [[5]]], 0),
        ((2, 6, 3), [[0], [5]], 1),
        # the layouts of many indices: torch.gather for columns, index_select on a view
        ((70, 30), (np.arange(64) * 7 % 60 - 30).reshape(2, 32), 1),
        ((5, 2, 60, 1), np.arange(500) * 7 % 120 - 60, -2),
        ((2, 3, 40, 5), np.arange(40) * 3 % 80 - 40, 2),
    ],
)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_eager_matches_numpy(dtype, shape, indices, axis, index_dtype):
    data = (torch.arange(int(np.prod(shape))) % 100).reshape(shape).to(dtype)
    idx = np.asarray(indices, dtype=index_dtype)
    got = gatherx.gather(data, torch.from_numpy(idx), axis=axis)
    assert got.dtype == data.dtype
    assert got.device == data.device
    assert got.is_contiguous()  # as index_select's, whichever kernel read it
    assert tuple(got.shape) == _oracle(data, idx, axis).shape
    np.testing.assert_array_equal(_host(got), _oracle(data, idx, axis))


@pytest.mark.parametrize(
    ("indices", "axis", "message"),
    [
        ([[0, 6], [1, 2]], 0, r"idx=6 at position \(0, 1\) of indices must be within the "
         r"inclusive range \[-6,5\] for axis 0 of size 6"),
        ([[0, 1], [1, -7]], 0, r"idx=-7 at position \(1, 1\)"),
        ([2, 0, -4], 1, r"idx=-4 at position \(2,\) of indices must be within the inclusive "
         r"range \[-3,2\] for axis 1 of size 3"),
        (-4, 1, r"idx=-4 at position \(\) of indices must be within the inclusive range "
         r"\[-3,2\] for axis 1 of size 3"),
        (6, 0, r"idx=6 at position \(\) of indices must be within the inclusive range \[-6,5\]"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("requires_grad", [True, False])
def test_eager_errors_name_value_and_position(indices, axis, message, requires_grad):
    data = torch.zeros(6, 3, requires_grad=requires_grad)
    before = data.detach().clone()
    index = torch.tensor(indices)
    with pytest.raises(IndexError, match=message) as info:
        gatherx.gather(data, index, axis=axis)
    # raised by gatherx's own check, before any kernel ran: no chained error for users to read
    assert info.value.__context__ is None
    assert torch.equal(data.detach(), before)
    assert data.grad is None
    assert torch.equal(index, torch.tensor(indices))
    numpy_error = pytest.raises(IndexError, match=message)
    with numpy_error:
        gatherx.gather(np.zeros((6, 3)), np.asarray(indices), axis=axis)


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
    columns = torch.tensor([[3, 0, -4], [-1, 2, 1]]).t()  # not contiguous
    for data in (table.detach(), strided):  # advanced indexing at the index as given
        got = gatherx.gather(data, columns, axis=1)
        want = np.take(data.numpy(), columns.numpy(), axis=1)
        np.testing.assert_array_equal(got.numpy(), want)


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


# --------------------------------------------------------------------------- gather_grad


def _add_at(shape, index, grad, axis):
    want = np.zeros(shape, dtype=grad.dtype)
    np.add.at(want, (slice(None),) * axis + (index,), grad)
    return want


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int64])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [((6, 3), [[5, 0], [-1, 5]], 0), ((2, 6, 3), [0, -6, 0, 2], 1), ((4, 5), 3, -1),
     ((4, 5), -5, 1), ((2, 6, 3), -1, 1)],  # scalars: the position as given
)  # fmt: skip
def test_eager_gather_grad_matches_add_at(dtype, shape, indices, axis):
    index = np.asarray(indices)
    ax = axis % len(shape)
    out_shape = shape[:ax] + index.shape + shape[ax + 1 :]
    grad = (torch.arange(int(np.prod(out_shape))) % 7 - 3).reshape(out_shape).to(dtype)
    got = gatherx.gather_grad(torch.Size(shape), torch.from_numpy(index), grad, axis=axis)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), _add_at(shape, index, grad.numpy(), ax))


def test_eager_gather_grad_errors():
    grad = torch.ones(2, 3)
    with pytest.raises(IndexError, match=r"idx=-7 at position \(1,\) of indices must be within"):
        gatherx.gather_grad((6, 3), torch.tensor([0, -7]), grad)
    for bad in (6, -7):
        with pytest.raises(IndexError, match=rf"idx={bad} at position \(\) of indices"):
            gatherx.gather_grad((6, 3), torch.tensor(bad), torch.ones(3))


def test_eager_gather_grad_refuses_bad_shapes_and_axes():
    with pytest.raises(ValueError, match="grad has shape"):
        gatherx.gather_grad((6, 3), torch.tensor([0, 1]), torch.ones(3, 3))
    with pytest.raises(ValueError, match="non-negative"):
        gatherx.gather_grad((-6, 3), torch.tensor([0, 1]), torch.ones(2, 3))
    with pytest.raises(ValueError, match="axis"):
        gatherx.gather_grad((6, 3), torch.tensor([0, 1]), torch.ones(2, 3), axis=2)


# --------------------------------------------------------------------------- gatherx's Function
# Wherever data requires grad, the gradient is gatherx's scatter-add: every dtype, a scalar
# index and an array one, Python and tensor indices alike.

GRAD_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
               torch.complex128]  # fmt: skip
INDEX_KINDS = ["python-scalar", "tensor-scalar", "tensor-1d", "tensor-2d", "list"]


def _index_of(kind: str, size: int) -> object:
    values = {"python-scalar": -1, "tensor-scalar": size - 1, "tensor-1d": [0, -1, 0],
              "tensor-2d": [[1, -size], [0, 1]], "list": [-1, 1, 1]}[kind]  # fmt: skip
    return torch.tensor(values) if kind.startswith("tensor") else values


# torch lets only floating and complex tensors require grad
@pytest.mark.parametrize(
    ("dtype", "requires_grad"),
    [(d, False) for d in [*DTYPES, torch.complex128]]
    + [(d, True) for d in [*DTYPES, torch.complex128] if d.is_floating_point or d.is_complex],
    ids=str,
)
@pytest.mark.parametrize("kind", INDEX_KINDS)
@pytest.mark.parametrize("axis", [0, 1])
def test_every_dtype_and_index_kind_with_and_without_grad(dtype, kind, requires_grad, axis):
    data = (torch.arange(12) % 7 + 1).reshape(3, 4).to(dtype)
    if dtype.is_complex:
        data = data + 1j * data.flip(0)
    data.requires_grad_(requires_grad)
    index = _index_of(kind, data.shape[axis])
    host_index = np.asarray(index.numpy() if isinstance(index, torch.Tensor) else index)
    out = gatherx.gather(data, index, axis=axis)
    np.testing.assert_array_equal(_host(out), np.take(_host(data), host_index, axis=axis))
    assert out.dtype == dtype
    if not requires_grad:
        assert out.grad_fn is None
        return
    assert "GatherEager" in type(out.grad_fn).__name__  # gatherx's Function, not torch's
    seed = (torch.arange(out.numel()) % 5 + 1).reshape(out.shape).to(dtype)
    (got,) = torch.autograd.grad(out, data, seed)
    half = dtype in (torch.float16, torch.bfloat16)  # summed in float32: exact on these ints
    values = seed.float().numpy() if half else seed.numpy()
    want = np.zeros(data.shape, dtype=values.dtype)
    np.add.at(want, (slice(None),) * axis + (host_index,), values)
    np.testing.assert_array_equal(got.float().numpy() if half else got.numpy(), want)


RANDOM_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.uint8, torch.bool]


@pytest.mark.parametrize("seed", range(40))
def test_random_shapes_match_numpy_and_torch_autograd(seed):
    """Ranks 1-5, any axis, index ranks 0-3 of both signs, strided data: np.take's result and
    index_select's gradient on the indices made non-negative."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 6))
    shape = tuple(int(n) for n in rng.integers(1, 5, rank))
    axis = int(rng.integers(-rank, rank))
    size = shape[axis]
    index_shape = tuple(int(n) for n in rng.integers(0, 4, int(rng.integers(0, 4))))
    index = np.asarray(rng.integers(-size, size, index_shape))
    dtype = RANDOM_DTYPES[seed % len(RANDOM_DTYPES)]
    base = torch.from_numpy(rng.integers(0, 50, (*shape[:-1], 2 * shape[-1]))).to(dtype)
    data = base[..., ::2] if seed % 2 else base[..., : shape[-1]].contiguous()
    out = gatherx.gather(data, torch.from_numpy(index), axis=axis)
    np.testing.assert_array_equal(_host(out), np.take(_host(data), index, axis=axis))
    if dtype.is_floating_point:
        leaf = data.double().requires_grad_()
        ref = leaf.detach().clone().requires_grad_()
        seed_grad = torch.from_numpy(np.asarray(rng.standard_normal(out.shape)))
        (got,) = torch.autograd.grad(gatherx.gather(leaf, torch.from_numpy(index), axis=axis),
                                     leaf, seed_grad)  # fmt: skip
        flat = torch.from_numpy(np.asarray(index % size)).reshape(-1)
        want = torch.index_select(ref, axis % rank, flat).reshape(out.shape)
        (expected,) = torch.autograd.grad(want, ref, seed_grad)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("indices", [-3, [], [4, -7, 0], [[6, -1], [-7, 2]], [[[1]], [[-2]]]])
def test_strided_1d_data_matches_numpy_forward_backward_and_out(indices, index_dtype, dtype):
    """Every other element of a 1-D tensor (read where it lies): np.take's values, into out=
    too, and index_select's gradient at the indices made non-negative."""
    base = torch.arange(14, dtype=torch.float64).to(dtype)
    data, host = base[::2], np.asarray(indices, dtype=np.int64)
    index = torch.from_numpy(host).to(index_dtype)
    want = np.asarray(np.take(_host(data), host))
    np.testing.assert_array_equal(_host(gatherx.gather(data, index)), want)
    out = torch.empty(want.shape, dtype=dtype)
    gatherx.gather(data, index, out=out)
    np.testing.assert_array_equal(_host(out), want)
    if dtype.is_floating_point:
        leaf = torch.empty_strided((7,), (2,), dtype=dtype).copy_(data).requires_grad_()
        ref = data.detach().clone().requires_grad_()
        got = gatherx.gather(leaf, index)
        seed = torch.ones_like(got)
        (grad,) = torch.autograd.grad(got, leaf, seed)
        flat = torch.from_numpy(np.asarray(host % 7)).reshape(-1)
        (expected,) = torch.autograd.grad(torch.index_select(ref, 0, flat).reshape(got.shape),
                                          ref, seed)  # fmt: skip
        torch.testing.assert_close(grad, expected, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [1, 13])
def test_strided_1d_data_into_strided_out_at_int32_indices(opset):
    """The general path's int32 index (a read-only NumPy array, or opset 1) into a strided
    out= from a strided vector: np.take's values."""
    data = torch.arange(20.0)[::2]
    host = np.array([1, 9, 0], dtype=np.int32)
    host.flags.writeable = False
    for index in (host, torch.from_numpy(host.copy())):
        out = torch.zeros(3, 2)[:, 0]
        gatherx.gather(data, index, opset=opset, out=out)
        np.testing.assert_array_equal(out.numpy(), np.take(data.numpy(), host))


def test_vmap_over_a_strided_vector_matches_index_select():
    """torch.func.vmap over indices into a strided vector, and over strided rows: as
    index_select under vmap, with no per-sample fallback (its warning is an error here)."""
    from torch.func import vmap

    data = torch.arange(20.0)[::2]
    idx = torch.tensor([[1, -2], [0, 9], [-10, 3]])
    got = vmap(lambda i: gatherx.gather(data, i))(idx)
    want = vmap(lambda i: torch.index_select(data, 0, i % 10))(idx)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    rows = torch.arange(60.0).reshape(3, 20)[:, ::2]
    got = vmap(lambda r: gatherx.gather(r, torch.tensor([4, -1])))(rows)
    torch.testing.assert_close(got, rows[:, [4, 9]], rtol=0, atol=0)


def _host_kinds() -> list[tuple[str, object]]:
    """Host indices of every form the eager path or the flow reads, values in [-4, 3]."""
    base = np.array([3, -4, 0, -1, 2])
    readonly = base.copy()
    readonly.flags.writeable = False
    return [("int", -3), ("int-max", 3), ("list", [3, -4, 0]), ("tuple", (1, -1)),
            ("empty-list", []), ("list-2d", [[0, -1], [2, 3]]), ("list-17", [1, -2] * 8 + [3]),
            ("int64", base.copy()), ("int32", base.astype(np.int32)), ("read-only", readonly),
            ("strided", np.repeat(base, 2)[::2]), ("big-endian", base.astype(">i8")),
            ("0-d", np.array(-2)), ("np-int", np.int64(-2))]  # fmt: skip


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize(("kind", "indices"), _host_kinds(), ids=[k for k, _ in _host_kinds()])
def test_host_indices_of_every_form_match_numpy(kind, indices, axis, requires_grad):
    """Python ints, lists and NumPy arrays of CPU data: np.take's values, np.add.at's
    gradient, the index left as it was and never shared with the result."""
    data = torch.arange(16.0, dtype=torch.float64).reshape(4, 4).requires_grad_(requires_grad)
    before = np.array(indices, copy=True)
    out = gatherx.gather(data, indices, axis=axis)
    host = np.asarray(indices, dtype=np.int64)
    want = np.take(data.detach().numpy(), host, axis=axis)
    np.testing.assert_array_equal(out.detach().numpy(), want)
    np.testing.assert_array_equal(np.asarray(indices), before)
    if isinstance(indices, np.ndarray) and out.numel():
        assert not np.shares_memory(out.detach().numpy(), indices)
    if requires_grad:
        (got,) = torch.autograd.grad(out.sum(), data)
        expected = np.zeros((4, 4))
        np.add.at(expected, (slice(None),) * (axis % 2) + (host,), 1.0)
        np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize(
    ("indices", "error", "text"),
    [(4, IndexError, r"idx=4 at position \(\) of indices"),
     ([0, -5], IndexError, r"idx=-5 at position \(1,\) of indices"),
     ((0, 1, 2**63), IndexError, r"idx=9223372036854775808 at position \(2,\)"),
     (np.array([0, 9], np.int32), IndexError, r"idx=9 at position \(1,\)"),
     (np.array([0, 9], ">i8"), IndexError, r"idx=9 at position \(1,\)"),
     ([0, True], TypeError, "bool"), (np.array([0, 1], np.int16), TypeError, "int16"),
     ([0, np.int64(1)], IndexError, None)],
)  # fmt: skip
def test_bad_host_indices_read_as_the_flow_reads_them(indices, error, text):
    """Every host index the eager path refuses or finds out of range: the flow's error."""
    data = torch.arange(16.0).reshape(4, 4)
    if text is None:  # a NumPy int among Python ints: no error, the flow's read
        np.testing.assert_array_equal(gatherx.gather(data, indices).numpy(), data.numpy()[[0, 1]])
        return
    with pytest.raises(error, match=text):
        gatherx.gather(data, indices)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize(("kind", "indices"), _host_kinds(), ids=[k for k, _ in _host_kinds()])
def test_gather_grad_of_host_indices_of_every_form_matches_add_at(
    kind, indices, axis, requires_grad
):
    """gather_grad at Python ints, lists and NumPy arrays: np.add.at's sums, the index left
    as it was, and (grad requiring grad) the gather back as the gradient of the grad."""
    host = np.asarray(indices, dtype=np.int64)
    before = np.array(indices, copy=True)
    out_shape = (*host.shape, 4) if axis == 0 else (4, *host.shape)
    values = np.arange(1.0, 1.0 + np.prod(out_shape)).reshape(out_shape)
    grad = torch.from_numpy(values).requires_grad_(requires_grad)
    got = gatherx.gather_grad((4, 4), indices, grad, axis=axis)
    want = np.zeros((4, 4))
    np.add.at(want, (slice(None),) * (axis % 2) + (host,), values)
    np.testing.assert_array_equal(got.detach().numpy(), want)
    np.testing.assert_array_equal(np.asarray(indices), before)
    if requires_grad:
        seed = torch.arange(16.0, dtype=torch.float64).reshape(4, 4)
        (back,) = torch.autograd.grad(got, grad, seed)
        np.testing.assert_array_equal(back.numpy(), np.take(seed.numpy(), host, axis=axis))


@pytest.mark.parametrize("seed", range(6))
def test_results_are_contiguous_whatever_the_layout_and_index_count(seed):
    """As index_select's: transposed, channels-last, strided and expanded data, every index
    count, with and without grad: a contiguous result (its .view works), np.take's values."""
    rng = np.random.default_rng(seed)
    base = torch.from_numpy(rng.standard_normal((4, 6, 5, 3)))
    layouts = [base.permute(2, 0, 3, 1), base.contiguous(memory_format=torch.channels_last),
               base[:, ::2], base[:, :1].expand(4, 7, 5, 3), base.transpose(0, 3)]  # fmt: skip
    for data in layouts:
        for axis in range(data.ndim):
            for shape in [(), (1,), (3,), (8,), (40,), (2, 3), (3, 9)]:
                index = torch.from_numpy(rng.integers(-data.shape[axis], data.shape[axis], shape))
                for grad in (False, True):
                    out = gatherx.gather(data.detach().requires_grad_(grad), index, axis=axis)
                    assert out.is_contiguous(), (tuple(data.stride()), axis, shape, grad)
                    want = np.take(data.numpy(), index.numpy(), axis=axis)
                    np.testing.assert_array_equal(out.detach().view(-1).numpy(), want.ravel())
