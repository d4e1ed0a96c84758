"""gather_grad on every backend against np.add.at on host copies; its derivatives in torch, JAX."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest
from support import Backend, assert_same, need, to_numpy

import gatherx

# (shape, indices, axis): duplicates, negatives (-1 and s-1 on one slice), scalar and 3-D
# indices, negative axes and zero-size dims.
CASES = [
    ((5, 3), [0, 4, -1, 4, -5, 2], 0),
    ((4, 6), [[1, -1], [5, 1]], -1),
    ((3, 5, 2), [[[0, 0], [4, -1]], [[-5, 2], [1, 0]]], 1),
    ((4, 3, 2), 2, -3),
    ((4, 3), -1, 1),
    ((3, 0), [2, 0, -1], 0),
    ((0, 3), np.zeros((0,), np.int64), 0),
    ((4, 2), np.zeros((2, 0), np.int64), 0),
]
IDS = [
    "dup-neg",
    "2d-neg-axis",
    "3d-idx",
    "scalar",
    "scalar-neg",
    "zero-cols",
    "empty-axis",
    "no-idx",
]
# Narrow ints too: the array-API standard's sum widens them unless told the dtype.
GRAD_DTYPES = ["float32", "float64", "int8", "uint8", "int32", "int64", "complex64"]


def _oracle(shape: tuple[int, ...], idx: np.ndarray, grad: np.ndarray, axis: int) -> np.ndarray:
    """Zeros of ``shape`` with ``grad`` added at ``idx`` by np.add.at (wide type, then cast)."""
    axis %= len(shape)
    wide = (
        np.complex128
        if grad.dtype.kind == "c"
        else np.float64
        if grad.dtype.kind == "f"
        else np.int64
    )
    out = np.zeros(shape, wide)
    flat = np.asarray(idx).reshape(-1)
    flat = np.where(flat < 0, flat + shape[axis], flat)
    g = grad.astype(wide).reshape((*shape[:axis], flat.size, *shape[axis + 1 :]))
    np.add.at(np.moveaxis(out, axis, 0), flat, np.moveaxis(g, axis, 0))
    return out.astype(grad.dtype)


def _grad_shape(shape: tuple[int, ...], idx: np.ndarray, axis: int) -> tuple[int, ...]:
    axis %= len(shape)
    return (*shape[:axis], *np.shape(idx), *shape[axis + 1 :])


def _integers(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Small integers: exact in every dtype and under any summation order."""
    return np.random.default_rng(seed).integers(-8, 9, shape)


def _native(xp, backend: Backend, a: np.ndarray):
    return a if backend is Backend.NUMPY else xp.asarray(a)


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
@pytest.mark.parametrize("index_kind", ["int32", "int64", "host"])
def test_matches_add_at(xp, backend, shape, indices, axis, index_kind) -> None:
    idx = np.asarray(indices)
    grad_np = _integers(_grad_shape(shape, idx, axis)).astype(np.float32)
    grad = _native(xp, backend, grad_np)
    index = idx.tolist() if index_kind == "host" else _native(xp, backend, idx.astype(index_kind))
    got = gatherx.gather_grad(shape, index, grad, axis=axis)
    assert_same(got, _oracle(shape, idx, grad_np, axis), like=grad)


@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_keeps_grad_dtype(xp, backend, dtype) -> None:
    shape, idx, axis = (3, 4), np.array([[3, -1], [0, 0], [1, 2]]), -1
    values = _integers(_grad_shape(shape, idx, axis), 1)
    values = np.abs(values) if np.dtype(dtype).kind == "u" else values
    grad = _native(xp, backend, values.astype(dtype))
    # JAX without x64 makes 32-bit arrays of 64-bit requests: the grad's own dtype is the
    # expectation either way.
    grad_np = to_numpy(grad)
    got = gatherx.gather_grad(shape, _native(xp, backend, idx), grad, axis=axis)
    assert_same(got, _oracle(shape, idx, grad_np, axis), like=grad)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_keeps_dtype(backend, dtype) -> None:
    if backend is Backend.ARRAY_API_STRICT:
        pytest.skip(f"array-api-strict has no {dtype} (the standard defines none)")
    ml_dtypes = need("ml_dtypes")
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    shape, idx = (3, 2), np.array([2, -1, 0, 2])
    grad_np = _integers((4, 2), 2).astype(np_dtype)
    if backend is Backend.NUMPY:
        grad = grad_np
    elif backend is Backend.TORCH:
        torch = need("torch")
        grad = torch.tensor(grad_np.astype(np.float32), dtype=getattr(torch, dtype))
    else:
        grad = need("jax.numpy").asarray(grad_np)
    got = gatherx.gather_grad(shape, idx, grad)
    assert_same(got, _oracle(shape, idx, grad_np, 0), like=grad)


def test_many_duplicates_and_all_slices(xp, backend) -> None:
    rng = np.random.default_rng(3)
    shape, axis = (7, 5, 3), 1
    idx = rng.integers(-5, 5, (40,))
    grad_np = _integers(_grad_shape(shape, idx, axis), 4).astype(np.float32)
    got = gatherx.gather_grad(
        shape, _native(xp, backend, idx), _native(xp, backend, grad_np), axis=axis
    )
    assert_same(got, _oracle(shape, idx, grad_np, axis))


def test_wrong_grad_shape_is_value_error(xp, backend) -> None:
    grad = _native(xp, backend, np.ones((3, 3), np.float32))
    with pytest.raises(ValueError, match=r"grad has shape \(3, 3\)"):
        gatherx.gather_grad((4, 2), [0, 1, 2], grad)


@pytest.mark.parametrize("bad", [4, -5])
@pytest.mark.parametrize("index_kind", ["native", "host"])
def test_out_of_bounds_is_index_error(xp, backend, bad, index_kind) -> None:
    idx = np.array([0, bad, 1])
    index = _native(xp, backend, idx) if index_kind == "native" else idx
    grad = _native(xp, backend, np.ones((3, 2), np.float32))
    with pytest.raises(IndexError, match=rf"idx={bad} at position \(1,\)"):
        gatherx.gather_grad((4, 2), index, grad)


def test_float_indices_are_type_error(xp, backend) -> None:
    grad = _native(xp, backend, np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="int32 or int64"):
        gatherx.gather_grad((4, 2), _native(xp, backend, np.array([0.0, 1.0], np.float32)), grad)


def test_bool_grad_is_type_error(xp, backend) -> None:
    grad = _native(xp, backend, np.ones((2, 2), bool))
    with pytest.raises(TypeError, match="grad of dtype bool is not a numeric ONNX type; allowed: "):
        gatherx.gather_grad((4, 2), [0, 1], grad)


def test_string_grad_and_non_arrays_are_type_errors() -> None:
    with pytest.raises(TypeError, match="numpy grad of dtype string is not a numeric ONNX type"):
        gatherx.gather_grad((2,), [0, 1], np.array(["a", "b"]))
    # an object array is named as the caller made it, not as the ONNX strings it would hold
    floats = np.array([1.0, 2.0], dtype=object)
    with pytest.raises(TypeError, match=r"^gather_grad: numpy grad of dtype object is not a "):
        gatherx.gather_grad((2,), [0, 1], floats)
    for fn in (lambda i: gatherx.gather(np.arange(3.0), i), lambda i: gatherx.gather_grad(
            (2,), i, np.ones(2))):  # fmt: skip
        with pytest.raises(TypeError, match=r"indices must be int32 or int64 \(numpy\), got "
                           "dtype object$"):  # fmt: skip
            fn(np.array([0, 1], dtype=object))
    with pytest.raises(TypeError, match="grad must be an array"):
        gatherx.gather_grad((2,), [0, 1], [1.0, 2.0])


# gradcheck's batched-grad check goes through a torch.jit.script helper that warns.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torch_gather_grad_is_differentiable() -> None:
    torch = need("torch")
    shape, idx, axis = (4, 3), np.array([[1, -1], [3, 1]]), 0
    grad = torch.tensor(np.random.default_rng(5).standard_normal((2, 2, 3)), requires_grad=True)
    index = torch.as_tensor(idx)
    fn = lambda g: gatherx.gather_grad(shape, index, g, axis=axis)  # noqa: E731
    cot = np.random.default_rng(6).standard_normal(shape)
    (got,) = torch.autograd.grad(fn(grad), grad, torch.as_tensor(cot))
    # The transpose of a scatter-add is a gather of the cotangent.
    assert_same(got, np.take(cot, idx, axis=axis), like=grad)
    assert torch.autograd.gradcheck(fn, (grad,), check_forward_ad=True, check_batched_grad=True)
    assert torch.autograd.gradgradcheck(fn, (grad,))


def test_jax_gather_grad_is_differentiable() -> None:
    jax = need("jax")
    jnp = need("jax.numpy")
    test_util = need("jax.test_util")
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    shape, idx, axis = (3, 4), np.array([[1, -1], [3, 1]]), 1
    rng = np.random.default_rng(7)
    grad = rng.standard_normal((3, 2, 2)).astype(dtype)
    fn = lambda g: gatherx.gather_grad(shape, jnp.asarray(idx), g, axis=axis)  # noqa: E731
    cot = rng.standard_normal(shape).astype(dtype)
    _, vjp = jax.vjp(fn, jnp.asarray(grad))
    tol = {"rtol": 1e-6, "atol": 1e-6}
    assert_same(vjp(jnp.asarray(cot))[0], np.take(cot, idx, axis=axis), exact=False, **tol)
    _, t_out = jax.jvp(fn, (jnp.asarray(grad),), (jnp.asarray(grad),))
    assert_same(t_out, _oracle(shape, idx, grad, axis), exact=False, **tol)
    native = lambda g: jnp.zeros(shape, g.dtype).at[:, idx].add(g)  # noqa: E731
    for jac in (jax.jacrev, jax.jacfwd):
        got = jax.jit(jac(fn))(jnp.asarray(grad))
        assert_same(got, to_numpy(jac(native)(jnp.asarray(grad))))
    # check_grads hands NumPy arrays to the finite differences: move them to JAX first.
    test_util.check_grads(lambda g: fn(jnp.asarray(g)), (grad,), order=2, modes=("fwd", "rev"))
    # Under jit the indices are traced: vmap over them, one gradient per index row.
    rows = np.array([[0, 2], [-1, -1], [1, -3]])
    grads = rng.standard_normal((3, 3, 2)).astype(dtype)
    batched = jax.jit(jax.vmap(lambda i, g: gatherx.gather_grad(shape, i, g, axis=axis)))
    got = batched(jnp.asarray(rows), jnp.asarray(grads))
    expected = np.stack([_oracle(shape, r, g, axis) for r, g in zip(rows, grads, strict=True)])
    assert_same(got, expected, exact=False, **tol)


def test_gather_grad_of_a_rank_zero_shape_names_shape() -> None:
    with pytest.raises(ValueError, match=r"^gather_grad: shape must have rank >= 1") as info:
        gatherx.gather_grad((), [0], np.ones(1))
    assert "data" not in str(info.value)


# vmap batches the indices and not the gradient: one gradient, scattered at each index row.
VMAP_INDICES = [[0], [-1]]
VMAP_WANT = [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]


def test_torch_vmap_over_indices_with_an_unbatched_gradient() -> None:
    torch = need("torch")
    idx = torch.tensor(VMAP_INDICES)
    got = torch.func.vmap(lambda i: gatherx.gather_grad((5,), i, torch.ones(1)))(idx)
    np.testing.assert_array_equal(got.numpy(), VMAP_WANT)
    # rows of a 2-D gradient, the index batched on its second dimension, int32
    grad = torch.arange(6.0).reshape(3, 2)
    idx2 = torch.tensor([[0, -1], [2, 2]], dtype=torch.int32)
    got = torch.func.vmap(lambda i: gatherx.gather_grad((3, 4), i, grad, axis=1), in_dims=1)(idx2)
    want = np.stack([_oracle((3, 4), idx2[:, k].numpy(), grad.numpy(), 1) for k in range(2)])
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(IndexError, match="idx=5"):
        torch.func.vmap(lambda i: gatherx.gather_grad((5,), i, torch.ones(1)))(
            torch.tensor([[0], [5]])
        )


def test_torch_jacrev_of_gather_grad_under_vmap_over_indices() -> None:
    torch = need("torch")
    idx = torch.tensor(VMAP_INDICES)

    def jacobian(i):  # d gather_grad / d grad: one-hot columns, whatever the gradient
        return torch.func.jacrev(lambda g: gatherx.gather_grad((5,), i, g))(torch.ones(1))

    got = torch.func.vmap(jacobian)(idx)
    np.testing.assert_array_equal(got.numpy(), np.asarray(VMAP_WANT)[:, :, None])
    # jacrev alone vmaps the backward (a gather) over an unbatched index
    single = torch.func.jacrev(lambda g: gatherx.gather_grad((5,), torch.tensor([-1, 0]), g))
    want = np.zeros((5, 2))
    want[4, 0] = want[0, 1] = 1.0
    np.testing.assert_array_equal(single(torch.ones(2)).numpy(), want)


@pytest.mark.parametrize(
    ("shape", "index_shape", "given"),
    [((7,), (12, 3), True), ((50, 4), (6,), "not half"), ((40, 8, 2), (16, 16), True),
     ((40, 8, 2), (257,), False), ((5, 3), (4, 0), "not half"),
     ((80000, 2), (30,), "not half")],
)  # fmt: skip
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "int64", "uint16", "complex64", "float16", "bfloat16"]
)
def test_torch_small_gradient_on_dim_0_added_at_the_index_as_given(
    monkeypatch, shape, index_shape, given, index_dtype, dtype
):
    """A PyTorch ``gather_grad`` on dim 0 of at most 4096 elements that needs no
    ``autograd.Function``: one ``index_put_(accumulate=True)`` at the index as given, checked
    and never wrapped (``torch_grad_given``; float16 and bfloat16 into a float32 table,
    rounded once, at more than 16 indices where their plan makes that table: not into 160000
    elements at 30); from 4097 elements (8 x 257 x 2) the index is wrapped first.
    np.add.at's sums; a bad value raises the flow's ``IndexError``; the index is never
    written."""
    torch = need("torch")
    torch_backend = importlib.import_module("gatherx._backends.torch")

    rng = np.random.default_rng(3)
    size = shape[0]
    values = rng.integers(-size, size, index_shape).astype(index_dtype)
    low = 0 if dtype == "uint16" else -3  # (unsigned sums would wrap around)
    grad_host = rng.integers(low, 4, index_shape + shape[1:]).astype(np.int64)
    idx = torch.from_numpy(values.copy())
    grad = torch.from_numpy(grad_host).to(getattr(torch, dtype))
    want = np.zeros(shape, np.int64)
    np.add.at(want, values % size, grad_host)
    wraps, puts = [], []
    if given == "not half":
        given = dtype not in ("float16", "bfloat16")
    real_bounded, real_put = torch_backend.eager_bounded, torch.Tensor.index_put_
    monkeypatch.setattr(
        torch_backend, "eager_bounded", lambda *a, **k: wraps.append(1) or real_bounded(*a, **k)
    )
    monkeypatch.setattr(
        torch.Tensor,
        "index_put_",
        lambda t, key, *a, **k: puts.append(key) or real_put(t, key, *a, **k),
    )
    got = gatherx.gather_grad(shape, idx, grad)
    assert got.dtype == grad.dtype
    np.testing.assert_array_equal(
        got.to(torch.complex128 if dtype == "complex64" else torch.int64).numpy(), want
    )
    np.testing.assert_array_equal(idx.numpy(), values)
    assert (wraps, len(puts)) == (([], 1) if given else ([1], 0))
    if given:
        assert puts[0][0] is idx  # as given: not wrapped, not flattened
    if values.size:
        bad = values.copy()
        bad.reshape(-1)[-1] = size
        with pytest.raises(IndexError, match=f"idx={size} at position"):
            gatherx.gather_grad(shape, torch.from_numpy(bad), grad)


def _scatter_views(monkeypatch) -> list[tuple[int, int]]:
    """The (rank, axis) of the gradient each PyTorch scatter-add adds, as it runs."""
    kernels = importlib.import_module("gatherx._backends.torch.kernels")
    seen: list[tuple[int, int]] = []
    real = kernels._scatter_flat
    monkeypatch.setattr(
        kernels,
        "_scatter_flat",
        lambda s, f, a, n, *p: seen.append((s.ndim, a)) or real(s, f, a, n, *p),
    )
    return seen


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape", "rows"),
    [((5, 7, 1), 1, (32,), True), ((5, 7, 1), 1, (31,), False),
     ((3, 2, 9, 1, 1), 2, (4, 8), True), ((2, 1, 3, 6, 1), -2, (40,), True),
     ((3, 7, 2), 1, (128,), True), ((3, 7, 2), 1, (127,), False),
     ((2, 3, 5, 2, 4), 2, (8, 16), True), ((2, 5, 9), 1, (130,), False),
     ((1, 9, 1), 1, (40,), False), ((2, 3, 9), -1, (40,), False),
     ((4, 9, 2), 1, (40,), False)],
)  # fmt: skip
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "int32", "uint8", "complex64", "float16", "bfloat16"]
)
def test_torch_gradient_on_short_rows_added_on_its_rows(
    monkeypatch, shape, axis, index_shape, rows, index_dtype, dtype
):
    """PyTorch adds a gradient whose index is followed by rows of at most 8 elements, with
    more than one element before it, on the (pre, n x row) view of gradient and table, the
    index expanded over each row's elements (``torch_grad_rows``: ATen's last-dim
    ``index_add_``), in the table's shape: from 32 index positions on rows of one, from 128
    on longer rows; not below, with nothing before the axis, on the last axis or on rows of
    9. np.add.at's sums (half precision: summed once, then rounded), through ``gather_grad``
    and the backward of ``gather``; the index is never written."""
    torch = need("torch")
    rng = np.random.default_rng(5)
    ax = axis % len(shape)
    size = shape[ax]
    values = rng.integers(-size, size, index_shape).astype(index_dtype)
    if size > 1:
        values.reshape(-1)[::4] = -1  # repeated slots
    grad_shape = shape[:ax] + index_shape + shape[ax + 1 :]
    low = 0 if dtype == "uint8" else -3  # (unsigned sums would wrap around)
    grad_host = rng.integers(low, 4, grad_shape).astype(np.int64)
    idx = torch.from_numpy(values.copy())
    grad = torch.from_numpy(grad_host).to(getattr(torch, dtype))
    want = np.zeros(shape, np.int64)
    moved = np.moveaxis(grad_host, list(range(ax, ax + len(index_shape))),
                        list(range(len(index_shape))))  # fmt: skip
    np.add.at(np.moveaxis(want, ax, 0), values % size, moved)
    seen = _scatter_views(monkeypatch)
    wide = torch.complex128 if dtype == "complex64" else torch.int64
    got = gatherx.gather_grad(shape, idx, grad, axis=axis)
    assert got.dtype == grad.dtype
    assert got.shape == shape
    np.testing.assert_array_equal(got.to(wide).numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), values)
    assert (seen == [(2, 1)]) is rows
    if dtype in ("float64", "float16"):  # the backward of gather: the same sums, the same path
        seen.clear()
        data = torch.zeros(shape, dtype=grad.dtype, requires_grad=True)
        gatherx.gather(data, idx, axis=axis).backward(grad)
        assert data.grad is not None
        np.testing.assert_array_equal(data.grad.to(wide).numpy(), want)
        assert (seen == [(2, 1)]) is rows


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape", "scatter"),
    [((300,), 0, (5000,), True), ((1, 300), -1, (4096,), True), ((1, 300), 1, (4095,), False),
     ((1, 300, 1), 1, (64, 64), True), ((300, 1), -2, (8, 640), True),
     ((3, 300), 1, (5000,), False), ((1,), 0, (4, 1100), True)],
)  # fmt: skip
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint64", "complex64", "float16"])
def test_torch_gradient_of_one_element_a_position_added_as_one_dimension(
    monkeypatch, shape, axis, index_shape, scatter, index_dtype, dtype
):
    """PyTorch adds a gradient that holds one element per index position (1-D data, or other
    dims of one) from 4096 positions by ``scatter_add_`` on the 1-D view of both, but half
    precision (its own plans): np.add.at's bits in index order (float sums of random values,
    where the order shows; integers wrapping; float16 summed in float32, rounded once),
    through ``gather_grad`` (of an expanded gradient too) and the backward of ``gather`` under
    deterministic algorithms; the index is never written."""
    torch = need("torch")
    rng = np.random.default_rng(8)
    ax = axis % len(shape)
    size = shape[ax]
    values = rng.integers(-size, size, index_shape).astype(index_dtype)
    grad_shape = shape[:ax] + index_shape + shape[ax + 1 :]
    if dtype in ("float32", "float64", "complex64"):
        host = rng.standard_normal(grad_shape) * 10.0 ** rng.integers(-3, 4, grad_shape)
    elif dtype == "float16":  # small integers: exact in float16 and in any order
        host = rng.integers(-3, 4, grad_shape)
    else:  # integers past their range: sums that wrap
        host = rng.integers(-(2**62), 2**62, grad_shape)
    wide = np.dtype(np.float32 if dtype == "float16" else dtype)
    host = host.astype(wide)
    tdtype = getattr(torch, dtype)
    idx = torch.from_numpy(values.copy())
    called: list[int] = []
    real = torch.Tensor.scatter_add_
    monkeypatch.setattr(torch.Tensor, "scatter_add_",
                        lambda *a, **k: called.append(1) or real(*a, **k))  # fmt: skip

    def tensor(a: np.ndarray) -> Any:
        if dtype == "uint64":
            return torch.from_numpy(np.ascontiguousarray(a).view(np.int64)).view(tdtype)
        return torch.from_numpy(np.ascontiguousarray(a)).to(tdtype)

    def bits(t: Any) -> np.ndarray:
        t = t.detach()
        if dtype == "uint64":
            return t.view(torch.int64).numpy()
        return t.numpy().view(f"u{t.element_size()}") if dtype != "float16" else (
            t.view(torch.int16).numpy())  # fmt: skip

    def check(got: Any, grad_host: np.ndarray) -> None:
        want = np.zeros(shape, wide)
        moved = np.moveaxis(grad_host, list(range(ax, ax + len(index_shape))),
                            list(range(len(index_shape))))  # fmt: skip
        np.add.at(np.moveaxis(want, ax, 0), values % size, moved)
        assert got.dtype == tdtype
        assert tuple(got.shape) == shape
        np.testing.assert_array_equal(bits(got), bits(tensor(want)))

    expect = scatter and dtype != "float16"
    check(gatherx.gather_grad(shape, idx, tensor(host), axis=axis), host)
    assert bool(called) is expect
    np.testing.assert_array_equal(idx.numpy(), values)
    first = host.reshape(-1)[:1]
    spread = tensor(first).expand(math.prod(grad_shape)).reshape(grad_shape)  # stride 0
    check(gatherx.gather_grad(shape, idx, spread, axis=axis), np.broadcast_to(first, grad_shape))
    if dtype in ("float32", "float64", "complex64"):  # the backward of gather: the same path
        called.clear()
        data = torch.zeros(shape, dtype=tdtype, requires_grad=True)
        before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            gatherx.gather(data, idx, axis=axis).backward(tensor(host))
        finally:
            torch.use_deterministic_algorithms(before)
        check(data.grad, host)
        assert bool(called) is expect


@pytest.mark.parametrize("row", [1, 3])
def test_torch_gradient_on_short_rows_under_vmap(monkeypatch, row) -> None:
    """vmap over the index (the gradient unbatched) and over both, on the (pre, n x row)
    view."""
    torch = need("torch")
    seen = _scatter_views(monkeypatch)
    rng = np.random.default_rng(6)
    shape = (3, 5, row)
    idx = rng.integers(-5, 5, (2, 130))
    grads = torch.from_numpy(rng.standard_normal((2, 3, 130, row)))
    both = torch.func.vmap(lambda i, g: gatherx.gather_grad(shape, i, g, axis=1))
    one = torch.func.vmap(lambda i: gatherx.gather_grad(shape, i, grads[0], axis=1))
    for got, grad in (
        (both(torch.from_numpy(idx), grads), grads),
        (one(torch.from_numpy(idx)), grads[:1].expand(2, -1, -1, -1)),
    ):
        want = np.stack([_oracle(shape, idx[b], grad[b].numpy(), 1) for b in range(2)])
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert seen == [(2, 1), (2, 1)]


@pytest.mark.parametrize(
    ("shape", "axis", "n"), [((6, 40, 1), 1, 200), ((6, 40, 3), 1, 300), ((3, 4, 50, 2), 2, 500)]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_torch_gradient_on_short_rows_sums_as_index_add_in_index_order(
    shape, axis, n, dtype, layout
):
    """On the (pre, n x row) view each slot's values are added in index order, as ATen's own
    ``index_add_`` on the table's shape adds them: the same float bits, from a contiguous or a
    transposed (copied by the view's reshape) random gradient."""
    torch = need("torch")
    gen = torch.Generator().manual_seed(n)
    idx = torch.randint(-shape[axis], shape[axis], (n,), generator=gen)
    grad_shape = (*shape[:axis], n, *shape[axis + 1 :])
    grad = torch.randn(grad_shape[::-1], generator=gen, dtype=getattr(torch, dtype))
    grad = grad.permute(*reversed(range(len(shape))))
    if layout == "contiguous":
        grad = grad.contiguous()
    assert grad.shape == grad_shape
    want = torch.zeros(shape, dtype=grad.dtype).index_add_(axis, idx % shape[axis], grad)
    assert torch.equal(gatherx.gather_grad(shape, idx, grad, axis=axis), want)


@pytest.mark.parametrize("index", [1, -2, [1], [[1]], [1, 2]])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_torch_negative_zero_sums_to_positive_zero(index, dtype) -> None:
    """A gradient's -0.0 becomes the +0.0 a sum into zeros gives (np.add.at's), whichever
    plan adds it: a scalar index's one slice as any other, in gather_grad and the backward."""
    torch = need("torch")
    idx = np.asarray(index)
    grad_np = np.full((*idx.shape, 2), -0.0).astype(dtype)
    grad_np[..., 1] = 1
    want = np.zeros((3, 2), dtype)
    np.add.at(want, idx, grad_np)
    grad = torch.from_numpy(grad_np)
    leaf = torch.zeros(3, 2, dtype=grad.dtype, requires_grad=True)
    gatherx.gather(leaf, torch.from_numpy(idx)).backward(grad)
    signs = lambda a: np.signbit(a.view(np.float32) if a.dtype == np.complex64 else a)  # noqa: E731
    for got in (gatherx.gather_grad((3, 2), torch.from_numpy(idx), grad), leaf.grad):
        np.testing.assert_array_equal(got.numpy(), want)
        np.testing.assert_array_equal(signs(got.numpy()), signs(want))  # (== holds -0.0 == 0.0)
