"""A scalar index on PyTorch: one slice, copied, checked from its one value; every mode."""

from __future__ import annotations

import numpy as np
import pytest
from support import need

torch = need("torch")

import gatherx  # noqa: E402

pytestmark = [
    # torch's own deprecations under compile (see tests/test_torch_compile.py)
    pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning:torch"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script:DeprecationWarning"),
]

# (data shape, axis): rows, inner axes, a column of a wide matrix, 1-D data.
SHAPES = [((6, 5), 0), ((6, 5), 1), ((3, 4, 5), 1), ((3, 4, 5), -1), ((7,), 0), ((1100, 1030), 1)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.bool, torch.int8, torch.uint8, torch.int64, torch.uint16, torch.uint32]  # fmt: skip
_BITS = {torch.bfloat16: torch.int16, torch.uint16: torch.int16, torch.uint32: torch.int32}


def _host(t: torch.Tensor) -> np.ndarray:
    """NumPy's view of the same bits (bfloat16 and unsigned shells as signed ints)."""
    t = t.detach()
    return t.view(_BITS.get(t.dtype, t.dtype)).numpy()


def _data(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return (torch.arange(int(np.prod(shape))) % 97).reshape(shape).to(dtype)


def _values(size: int) -> list[int]:
    return sorted({0, 1, size - 1, -1, -size, -(size // 2)})


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "axis"), SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["int64", "int32", "python"])
def test_scalar_index_matches_numpy_and_copies(dtype, shape, axis, kind):
    data = _data(shape, dtype)
    before = data.clone()
    for value in _values(shape[axis]):
        index = value if kind == "python" else torch.tensor(value, dtype=getattr(torch, kind))
        out = gatherx.gather(data, index, axis=axis)
        want = np.take(_host(data), value, axis=axis)
        assert out.dtype == data.dtype
        assert out.shape == want.shape
        assert out.is_contiguous()
        np.testing.assert_array_equal(_host(out), want)
        # the result is a copy: writing it leaves the data as it was
        assert out.untyped_storage().data_ptr() != data.untyped_storage().data_ptr()
        out.zero_()
        assert torch.equal(data, before)


@pytest.mark.parametrize(("shape", "axis"), SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_scalar_index_on_strided_data_matches_numpy(shape, axis, layout):
    host = np.random.default_rng(0).standard_normal(shape)
    data = torch.from_numpy(host)
    if layout == "transposed":
        data = data.mT.contiguous().mT if data.ndim > 1 else data[::1]
    for value in _values(shape[axis]):
        out = gatherx.gather(data, torch.tensor(value), axis=axis)
        np.testing.assert_array_equal(out.numpy(), np.take(host, value, axis=axis))
        assert out.untyped_storage().data_ptr() != data.untyped_storage().data_ptr()


@pytest.mark.parametrize("value", [5, -6, 2**31, -(2**63)])
@pytest.mark.parametrize("kind", ["int64", "python"])
def test_bad_scalar_index_names_value_and_position(value, kind):
    data = torch.zeros(4, 5)
    index = value if kind == "python" else torch.tensor(value)
    message = (
        rf"idx={value} at position \(\) of indices must be within the inclusive range "
        r"\[-5,4\] for axis 1 of size 5"
    )
    with pytest.raises(IndexError, match=message):
        gatherx.gather(data, index, axis=1)


def test_scalar_index_before_opset_11_refuses_negatives():
    data = torch.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(gatherx.gather(data, 2, axis=1, opset=10).numpy(), [2, 5])
    for index in (-1, torch.tensor(-1)):
        with pytest.raises(IndexError, match="negative indices need opset >= 11"):
            gatherx.gather(data, index, axis=1, opset=10)


def test_scalar_index_on_an_empty_axis_is_refused():
    with pytest.raises(IndexError, match="so no index is valid"):
        gatherx.gather(torch.zeros(3, 0), torch.tensor(0), axis=1)
    out = gatherx.gather(torch.zeros(0, 4), 1, axis=1)  # other axes may be empty
    assert out.shape == (0,)


def test_scalar_index_on_another_device_is_refused():
    with pytest.raises(ValueError, match="indices are on device cpu but data is on device meta"):
        gatherx.gather(torch.zeros(3, 4, device="meta"), torch.tensor(1))


def test_python_int_on_meta_data_keeps_the_device():
    out = gatherx.gather(torch.zeros(3, 4, device="meta"), -1, axis=1)
    assert out.device.type == "meta"
    assert out.shape == (3,)


# --------------------------------------------------------------------------- autograd


@pytest.mark.parametrize(("shape", "axis"), SHAPES[:5], ids=str)
@pytest.mark.parametrize("kind", ["tensor", "python"])
def test_scalar_backward_is_one_slice_scatter_add(shape, axis, kind):
    host = np.random.default_rng(1).standard_normal(shape)
    size = shape[axis]
    for value in _values(size):
        x = torch.from_numpy(host).requires_grad_(True)
        index = torch.tensor(value) if kind == "tensor" else value
        out = gatherx.gather(x, index, axis=axis)
        weights = torch.from_numpy(np.random.default_rng(2).standard_normal(tuple(out.shape)))
        (got,) = torch.autograd.grad(out, x, weights)
        want = np.zeros(shape)
        key = (slice(None),) * (axis % len(shape)) + (value % size,)
        np.add.at(want, key, weights.numpy())
        np.testing.assert_array_equal(got.numpy(), want)
        oracle = gatherx.gather_grad(shape, np.asarray(value), weights.numpy(), axis=axis)
        np.testing.assert_array_equal(got.numpy(), oracle)


def test_scalar_gradcheck_and_forward_mode():
    x = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True)

    def f(t: torch.Tensor) -> torch.Tensor:
        return gatherx.gather(t, torch.tensor(-2), axis=1)

    assert torch.autograd.gradcheck(f, (x,), check_batched_grad=True, check_forward_ad=True)
    assert torch.autograd.gradgradcheck(f, (x,), check_batched_grad=True)
    tangent = torch.randn_like(x)
    _, jvp = torch.func.jvp(f, (x.detach(),), (tangent,))
    torch.testing.assert_close(jvp, tangent[:, 1], rtol=0, atol=0)


def test_scalar_under_vmap_over_data_and_over_indices():
    data = torch.randn(5, 4, 3)
    # unbatched scalar index, batched data
    got = torch.func.vmap(lambda d: gatherx.gather(d, torch.tensor(-1), axis=0))(data)
    torch.testing.assert_close(got, data[:, -1], rtol=0, atol=0)
    # a batch of scalar indices, unbatched data
    idx = torch.tensor([0, -1, 2, -4])
    got = torch.func.vmap(lambda i: gatherx.gather(data, i, axis=1))(idx)
    want = torch.stack([data[:, int(i)] for i in idx])
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # and the gradient of each
    x = data.clone().requires_grad_(True)
    out = torch.func.vmap(lambda i: gatherx.gather(x, i, axis=1))(idx)
    (grad,) = torch.autograd.grad(out.sum(), x)
    want_grad = torch.zeros_like(data)
    for i in idx:
        want_grad[:, int(i)] += 1
    torch.testing.assert_close(grad, want_grad, rtol=0, atol=0)
    with pytest.raises(IndexError, match="idx=4"):
        torch.func.vmap(lambda i: gatherx.gather(data, i, axis=1))(torch.tensor([0, 4]))


@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_scalar_under_torch_compile(compiler, dynamic):
    torch._dynamo.reset()

    def f(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return (gatherx.gather(x, i, axis=1) * 2).sum(0)

    compiled = torch.compile(f, backend=compiler, dynamic=dynamic, fullgraph=True)
    for rows, cols, value in [(3, 5, -1), (4, 7, 6), (4, 7, -7)]:
        x = torch.randn(rows, cols, 2, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        i = torch.tensor(value)
        out, ref = compiled(x, i), (x_ref[:, value] * 2).sum(0)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad)
    with pytest.raises(RuntimeError, match="out of data bounds"):
        compiled(torch.randn(4, 7, 2), torch.tensor(7))
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d is not torch.bool], ids=str)
@pytest.mark.parametrize(("shape", "axis"), SHAPES[:5], ids=str)
def test_gather_grad_at_a_scalar_index_writes_one_slice(dtype, shape, axis):
    size = shape[axis % len(shape)]
    out_shape = tuple(d for k, d in enumerate(shape) if k != axis % len(shape))
    grad = _data(out_shape, dtype) if out_shape else _data((1,), dtype).reshape(())
    for value in _values(size):
        got = gatherx.gather_grad(shape, torch.tensor(value), grad, axis=axis)
        assert got.dtype == grad.dtype
        want = np.zeros(shape, _host(grad).dtype)
        key = (slice(None),) * (axis % len(shape)) + (value % size,)
        want[key] = _host(grad)
        np.testing.assert_array_equal(_host(got), want)
    with pytest.raises(IndexError, match=rf"^gather_grad: .*idx={size} at position \(\)"):
        gatherx.gather_grad(shape, torch.tensor(size), grad, axis=axis)
