"""Differentiating gatherx.gather in PyTorch: finite differences, native autograd, torch.func."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import need

torch = need("torch")

# torch 2.13 imports its jvp decompositions lazily, through the deprecated torch.jit.script.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap  # noqa: E402

import gatherx  # noqa: E402

# (data shape, indices, axis): scalar, 1-D, 2-D and 3-D indices, negative axes, duplicate and
# negative indices, and zero-size dimensions (in data, in indices, and both).
CASES = [
    ((4, 3), 2, 0),
    ((4, 3), -1, 1),
    ((5,), [0, 4, -1, 4, -5], 0),
    ((3, 4, 2), [[0, 3], [-1, 3], [2, 2]], 1),
    ((3, 4, 2), [[[1], [0]], [[-2], [1]]], -1),
    ((2, 3, 4), [[2, -3, 2]], -2),
    ((0, 3), [1, -1], 1),
    ((4, 3), np.zeros((0, 2), dtype=np.int64), 0),
    ((0, 3), np.zeros((0,), dtype=np.int64), 0),
]
IDS = ["scalar", "scalar-neg-axis1", "1d-dup-neg", "2d", "3d-neg-axis", "2d-axis-2", "zero-data",
       "zero-idx", "zero-both"]  # fmt: skip
INDEX_DTYPES = ["int32", "int64"]


def _index(indices: Any, dtype: str) -> torch.Tensor:
    return torch.as_tensor(np.asarray(indices, dtype=dtype))


def _native(x: torch.Tensor, i: torch.Tensor, axis: int) -> torch.Tensor:
    """The oracle: PyTorch's own advanced indexing, which has Gather's shape rule."""
    return x[(slice(None),) * (axis % x.ndim) + (i.long(),)]


def _data(
    shape: tuple[int, ...], dtype: torch.dtype = torch.float64, seed: int = 0
) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=dtype)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_gradcheck_forward_and_batched(shape, indices, axis, index_dtype):
    x = _data(shape).requires_grad_()
    i = _index(indices, index_dtype)
    assert torch.autograd.gradcheck(
        lambda x: gatherx.gather(x, i, axis=axis), (x,), check_forward_ad=True,
        check_batched_grad=True, check_batched_forward_grad=True,
    )  # fmt: skip


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_gradgradcheck(shape, indices, axis, index_dtype):
    x = _data(shape).requires_grad_()
    i = _index(indices, index_dtype)
    assert torch.autograd.gradgradcheck(
        lambda x: gatherx.gather(x, i, axis=axis), (x,), check_batched_grad=True,
        check_fwd_over_rev=True, check_rev_over_rev=True,
    )  # fmt: skip


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_backward_matches_native_autograd(shape, indices, axis):
    i = _index(indices, "int64")
    x, x_ref = _data(shape).requires_grad_(), _data(shape).requires_grad_()
    out, ref = gatherx.gather(x, i, axis=axis), _native(x_ref, i, axis)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    cotangent = _data(tuple(ref.shape), seed=1)
    out.backward(cotangent)
    ref.backward(cotangent)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-15, atol=1e-15)


def test_duplicates_accumulate_and_negative_aliases_last():
    x = torch.zeros(4, 2, dtype=torch.float64, requires_grad=True)
    gatherx.gather(x, torch.tensor([3, -1, 0, 0, 0])).sum().backward()
    expected = torch.tensor([[3.0, 3.0], [0.0, 0.0], [0.0, 0.0], [2.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(x.grad, expected, rtol=0, atol=0)


def test_index_gets_no_gradient_and_data_without_grad_is_fine():
    x = _data((4, 3)).requires_grad_()
    i = torch.tensor([1, 2])
    out = gatherx.gather(x.detach(), i)
    assert not out.requires_grad
    (g,) = torch.autograd.grad(gatherx.gather(x, i).sum(), x)
    assert g.shape == x.shape


def test_forward_ad_dual_tensor_without_requires_grad():
    import torch.autograd.forward_ad as fwAD

    x, t = _data((4, 3)), _data((4, 3), seed=1)
    i = torch.tensor([[3, -4], [0, 0]])
    with fwAD.dual_level():
        out = gatherx.gather(fwAD.make_dual(x, t), i, axis=0)
        primal, tangent = fwAD.unpack_dual(out)
    torch.testing.assert_close(primal, x[i], rtol=0, atol=0)
    torch.testing.assert_close(tangent, t[i], rtol=0, atol=0)


def test_double_backward_hessian_vector_product_matches_native():
    i = torch.tensor([[0, 2], [2, -1]])

    def loss(f, x):
        return (f(x, i, 1).sin() * f(x, i, 1) ** 2).sum()

    x, x_ref = _data((3, 4)).requires_grad_(), _data((3, 4)).requires_grad_()
    v = _data((3, 4), seed=2)
    (g,) = torch.autograd.grad(loss(lambda x, i, a: gatherx.gather(x, i, axis=a), x), x,
                               create_graph=True)  # fmt: skip
    (g_ref,) = torch.autograd.grad(loss(_native, x_ref), x_ref, create_graph=True)
    (hv,) = torch.autograd.grad(g, x, v)
    (hv_ref,) = torch.autograd.grad(g_ref, x_ref, v)
    torch.testing.assert_close(hv, hv_ref, rtol=1e-12, atol=1e-12)


# gather_grad on the torch backend: the scatter-add, differentiable in its grad argument.
def test_gather_grad_matches_native_vjp_and_is_differentiable():
    i = torch.tensor([[1, -1], [0, 1]], dtype=torch.int32)
    x = _data((2, 3, 4)).requires_grad_()
    cotangent = _data((2, 2, 2, 4), seed=3).requires_grad_()
    (expected,) = torch.autograd.grad(_native(x, i, 1), x, cotangent)
    got = gatherx.gather_grad((2, 3, 4), i, cotangent.detach(), axis=1)
    torch.testing.assert_close(got, expected, rtol=1e-15, atol=1e-15)
    f = lambda g: gatherx.gather_grad((2, 3, 4), i, g, axis=1)  # noqa: E731
    assert torch.autograd.gradcheck(f, (cotangent,), check_forward_ad=True,
                                    check_batched_grad=True)  # fmt: skip
    assert torch.autograd.gradgradcheck(f, (cotangent,))


# torch.func: each transform of gather equals the same transform of the native op.
I2 = torch.tensor([[0, 3], [-1, 3], [2, 2]])


def _g(x: torch.Tensor, i: torch.Tensor = I2) -> torch.Tensor:
    return gatherx.gather(x, i, axis=1)


def _n(x: torch.Tensor, i: torch.Tensor = I2) -> torch.Tensor:
    return _native(x, i, 1)


def _scalar(f):
    return lambda x, *rest: (f(x, *rest).cos() * f(x, *rest) ** 2).sum()


def test_func_grad():
    x = _data((2, 4, 3))
    torch.testing.assert_close(grad(_scalar(_g))(x), grad(_scalar(_n))(x), rtol=1e-13, atol=1e-13)


def test_func_vjp():
    x, ct = _data((2, 4, 3)), _data((2, 3, 2, 3), seed=1)
    out, pull = vjp(_g, x)
    out_ref, pull_ref = vjp(_n, x)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    torch.testing.assert_close(pull(ct), pull_ref(ct), rtol=1e-15, atol=1e-15)


def test_func_jvp():
    x, t = _data((2, 4, 3)), _data((2, 4, 3), seed=1)
    out, tangent = jvp(_g, (x,), (t,))
    out_ref, tangent_ref = jvp(_n, (x,), (t,))
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    torch.testing.assert_close(tangent, tangent_ref, rtol=0, atol=0)


@pytest.mark.parametrize("transform", [jacrev, jacfwd], ids=["jacrev", "jacfwd"])
def test_func_jacobian(transform):
    x = _data((2, 4, 3))
    torch.testing.assert_close(transform(_g)(x), transform(_n)(x), rtol=0, atol=0)


def test_func_hessian():
    x = _data((2, 4, 3))
    got, expected = hessian(_scalar(_g))(x), hessian(_scalar(_n))(x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("in_dims", "data_shape", "index_shape"),
    [((0, None), (5, 2, 4, 3), (3, 2)), ((None, 0), (2, 4, 3), (5, 3, 2)),
     ((0, 0), (5, 2, 4, 3), (5, 3, 2)), ((2, 1), (2, 4, 5, 3), (3, 5, 2))],
    ids=["data", "indices", "both", "both-inner-dims"],
)  # fmt: skip
def test_func_vmap(in_dims, data_shape, index_shape):
    x = _data(data_shape)
    i = torch.randint(-4, 4, index_shape, generator=torch.Generator().manual_seed(5))
    got = vmap(_g, in_dims=in_dims)(x, i)
    torch.testing.assert_close(got, vmap(_n, in_dims=in_dims)(x, i), rtol=0, atol=0)


def test_func_compositions_over_batched_indices():
    xs = _data((3, 2, 4, 3))
    i = torch.randint(-4, 4, (3, 3, 2), generator=torch.Generator().manual_seed(6))
    t = _data((3, 2, 4, 3), seed=7)
    cases = {
        "vmap(grad)": lambda f: vmap(grad(_scalar(f)))(xs, i),
        "vmap(jacrev)": lambda f: vmap(jacrev(f))(xs, i),
        "vmap(jacfwd)": lambda f: vmap(jacfwd(f))(xs, i),
        "vmap(hessian)": lambda f: vmap(hessian(_scalar(f)))(xs, i),
        "vmap(jvp)": lambda f: vmap(lambda x, i, t: jvp(lambda x: f(x, i), (x,), (t,))[1])(
            xs, i, t
        ),
        "jvp(vmap)": lambda f: jvp(lambda x: vmap(f)(x, i), (xs,), (t,))[1],
    }
    for name, run in cases.items():
        torch.testing.assert_close(run(_g), run(_n), rtol=1e-12, atol=1e-12, msg=name)


def test_vmap_over_indices_checks_bounds_eagerly():
    x = _data((4, 3))
    with pytest.raises(IndexError, match=r"idx=4 must be within the inclusive range \[-4,3\]"):
        vmap(lambda i: gatherx.gather(x, i))(torch.tensor([[0, 1], [4, 0]]))
    with pytest.raises(IndexError, match=r"idx=-1 .*\[0,3\].*need opset >= 11"):
        vmap(lambda i: gatherx.gather(x, i, opset=10))(torch.tensor([[0], [-1]]))


def test_grad_transform_keeps_eager_index_error():
    i = torch.tensor([[0, 5]])
    with pytest.raises(IndexError, match=r"idx=5 at position \(0, 1\) of indices"):
        grad(lambda x: gatherx.gather(x, i).sum())(_data((5, 2))[:4])


# dtypes, devices and determinism.
@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32, torch.complex64, torch.complex128]
)
def test_gradients_and_tangents_keep_dtype(dtype):
    i = torch.tensor([[0, 2], [2, -1]])
    x, x_ref = _data((3, 4), dtype).requires_grad_(), _data((3, 4), dtype).requires_grad_()
    cotangent = _data((3, 2, 2), dtype, seed=1)
    gatherx.gather(x, i, axis=1).backward(cotangent)
    _native(x_ref, i, 1).backward(cotangent)
    assert x.grad.dtype == dtype
    # Same summands; only the order of the two additions may differ from the native kernel.
    torch.testing.assert_close(x.grad, x_ref.grad)
    t = _data((3, 4), dtype, seed=2)
    _, tangent = jvp(lambda x: gatherx.gather(x, i, axis=1), (x.detach(),), (t,))
    _, tangent_ref = jvp(lambda x: _native(x, i, 1), (x.detach(),), (t,))
    assert tangent.dtype == dtype
    torch.testing.assert_close(tangent, tangent_ref, rtol=0, atol=0)
    grad_of = gatherx.gather_grad((3, 4), i, cotangent, axis=1)
    assert grad_of.dtype == dtype
    torch.testing.assert_close(grad_of, x_ref.grad)


def test_results_follow_data_device_meta():
    # The meta device has no data, so any hard-coded CPU tensor would clash with it.
    x = torch.empty(5, 3, device="meta", requires_grad=True)
    for indices in ([1, -1], torch.tensor([[1, -1]], device="meta")):
        out = gatherx.gather(x, indices)
        assert out.device.type == "meta"
        (g,) = torch.autograd.grad(out.sum(), x)
        assert g.device.type == "meta"
        assert g.shape == x.shape


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


@pytest.mark.usefixtures("deterministic")
def test_deterministic_mode_backward_runs_and_repeats_bitwise():
    gen = torch.Generator().manual_seed(8)
    i = torch.randint(-50, 50, (2000,), generator=gen)  # many duplicates
    x = torch.randn(50, 16, generator=gen, dtype=torch.float32, requires_grad=True)
    cotangent = torch.randn(2000, 16, generator=gen)
    grads = [torch.autograd.grad(gatherx.gather(x, i), x, cotangent)[0] for _ in range(3)]
    (ref,) = torch.autograd.grad(_native(x, i, 0), x, cotangent)
    for g in grads:
        assert torch.equal(g, grads[0])
    torch.testing.assert_close(grads[0], ref)


@pytest.mark.parametrize("policy", [None, "device"], ids=["exact", "device-policy"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [((5, 3), [0, 2], 0), ((5, 3), [-1, 2], 0), ((5, 3), 1, 1), ((5, 3), -1, 1),
     ((4, 5, 6), [[-2, 0], [4, -5]], 1), ((40,), [-1] * 300, 0)],
)  # fmt: skip
def test_index_changed_in_place_before_backward_raises_as_native(
    shape, indices, axis, dtype, policy
):
    """The index is saved for the backward whatever its sign: changing it in place in between
    raises autograd's error, as torch's indexing does, even where a copy holds the values."""
    from gatherx import _policy

    def changed(gather: Any) -> None:
        data = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        index = torch.tensor(indices, dtype=getattr(torch, dtype))
        out = gather(data, index)
        index.add_(1)
        out.sum().backward()

    # torch's indexing reads negatives and saves the index (a view of it: one version)
    native = lambda d, i: d[(slice(None),) * axis + (i.view(-1),)]  # noqa: E731
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        changed(native)
    with _policy.force(policy), pytest.raises(RuntimeError, match="modified by an inplace"):
        changed(lambda d, i: gatherx.gather(d, i, axis=axis))


@pytest.mark.parametrize("policy", [None, "device"], ids=["exact", "device-policy"])
@pytest.mark.parametrize("indices", [[3, 1, 4], [3, -1, 4], [[0, 2]], 2], ids=str)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_numpy_index_written_after_the_forward_leaves_the_gradient(indices, dtype, policy):
    """A NumPy index is the caller's memory, and a NumPy write bumps no tensor version: the
    backward keeps its own copy, so the gradient is that of the values the forward read."""
    from gatherx import _policy

    index = np.array(indices, dtype=dtype)
    seed = np.arange(10.0).reshape(5, 2)  # the gradient of gather_grad's grad: gathered
    expected = np.zeros((5, 2))
    np.add.at(expected, index, 1.0)
    shape = (*index.shape, 2)
    with _policy.force(policy):
        written = index.copy()
        leaf = torch.ones(5, 2, dtype=torch.float64, requires_grad=True)
        out = gatherx.gather(leaf, written)
        written[...] = 0
        (got,) = torch.autograd.grad(out.sum(), leaf)
        np.testing.assert_array_equal(got.numpy(), expected)
        written = index.copy()
        grad = torch.ones(shape, dtype=torch.float64, requires_grad=True)
        summed = gatherx.gather_grad((5, 2), written, grad)
        written[...] = 0
        (back,) = torch.autograd.grad(summed, grad, torch.from_numpy(seed))
        np.testing.assert_array_equal(back.numpy(), np.take(seed, index, axis=0))
