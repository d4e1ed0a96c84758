"""Sparse gradients in PyTorch: ``gather(sparse_grad=True)`` and ``gather_grad(sparse=True)``.

Oracles: ``np.add.at`` for the densified gradient, ``nn.Embedding(sparse=True)`` /
``F.embedding(..., sparse=True)`` for the layout, every mode and training.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import run_python

from support import need  # isort: skip

torch = need("torch")

import torch.nn.functional as F  # noqa: E402

import gatherx  # noqa: E402
from gatherx._backends.torch import kernels  # noqa: E402
from gatherx.torch import Gather  # noqa: E402

# (data shape, indices, axis): scalar, 1-D, 2-D indices, duplicates and negatives, inner and
# last axes, zero-size data, indices and leading dimensions.
CASES = [
    ((6, 3), [1, 4, -5, 5, 1], 0),
    ((6, 3), 2, 0),
    ((6, 3), -1, 1),
    ((3, 4, 5), [[0, -1], [3, 3]], 1),
    ((2, 3, 4), [1, -1, 1, 0], 2),
    ((2, 3, 4, 2), [[2], [-3]], -2),
    ((0, 3, 2), [0, -3, 2], 1),
    ((4, 3), np.zeros((0, 2), dtype=np.int64), 0),
]
IDS = ["axis0", "scalar", "scalar-last", "2d-axis1", "dup-last", "neg-axis", "zero-lead", "empty"]
#: The dtypes a gradient of gather's data can have, all of which sparse tensors hold.
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]  # fmt: skip
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


def _grad_values(
    shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0, low: int = -4
) -> torch.Tensor:
    """Small integers: every sum is exact whatever its order, so any oracle compares exactly."""
    gen = np.random.default_rng(seed)
    values = gen.integers(low, 5, size=shape)
    if dtype.is_complex:
        values = values + 1j * gen.integers(-4, 5, size=shape)
    return torch.from_numpy(np.asarray(values)).to(dtype)


def _oracle(shape, indices, grad: torch.Tensor, axis: int) -> np.ndarray:
    """``np.add.at`` into zeros, in float64/complex128 (exact on small integers)."""
    axis %= len(shape)
    index = np.asarray(indices, dtype=np.int64) % shape[axis] if shape[axis] else indices
    index = np.asarray(index, dtype=np.int64)
    wide = torch.complex128 if grad.dtype.is_complex else torch.float64
    g = grad.to(wide).numpy()
    out = np.zeros(shape, dtype=g.dtype)
    moved = np.moveaxis(out, axis, 0)
    lead = g.reshape((*shape[:axis], index.size, *shape[axis + 1 :]))
    np.add.at(moved, index.reshape(-1), np.moveaxis(lead, axis, 0))
    return out


def _dense(g: torch.Tensor) -> np.ndarray:
    wide = torch.complex128 if g.dtype.is_complex else torch.float64
    return g.to_dense().to(wide).numpy()


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_sparse_grad_densified_equals_scatter_add(shape, indices, axis, dtype, index_dtype):
    data = torch.zeros(shape, dtype=dtype, requires_grad=True)
    index = torch.as_tensor(np.asarray(indices), dtype=index_dtype)
    out = gatherx.gather(data, index, axis=axis, sparse_grad=True)
    grad = _grad_values(tuple(out.shape), dtype)
    out.backward(grad)
    g = data.grad
    assert g.layout is torch.sparse_coo
    assert g.dtype is dtype
    ax = axis % len(shape)
    assert (g.sparse_dim(), g.dense_dim()) == (ax + 1, len(shape) - ax - 1)
    np.testing.assert_array_equal(_dense(g), _oracle(shape, indices, grad, axis))
    # gather_grad(sparse=True) is the same tensor
    again = gatherx.gather_grad(shape, index, grad, axis=axis, sparse=True)
    assert again.layout is torch.sparse_coo
    np.testing.assert_array_equal(_dense(again), _dense(g))


def test_axis0_layout_is_embeddings():
    """Axis 0: uncoalesced, the indices made non-negative and the values the incoming gradient,
    exactly as nn.Embedding(sparse=True) gives them."""
    ids = torch.tensor([[1, -2], [5, 1]])
    w = torch.randn(6, 3, requires_grad=True)
    native = w.detach().clone().requires_grad_()
    g_out = torch.randn(2, 2, 3)
    gatherx.gather(w, ids, sparse_grad=True).backward(g_out)
    F.embedding(ids % 6, native, sparse=True).backward(g_out)
    ours, theirs = w.grad, native.grad
    assert not ours.is_coalesced()
    assert not theirs.is_coalesced()
    assert torch.equal(ours._indices(), theirs._indices())
    assert torch.equal(ours._values(), theirs._values())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_sums_once_in_float32(dtype):
    """Duplicates of one index add up in float32 and are rounded once, as gather_grad's dense
    sum; a sparse tensor would add them in half precision (2048 + 1 + 1 = 2048 in float16)."""
    big = 2048.0 if dtype is torch.float16 else 256.0
    grad = torch.tensor([[big], [1.0], [1.0]], dtype=dtype)
    g = gatherx.gather_grad((3, 1), [1, 1, -2], grad, sparse=True)
    assert g.is_coalesced()
    assert g.to_dense()[1, 0].item() == big + 2  # representable, and the float32 sum
    dense = gatherx.gather_grad((3, 1), [1, 1, -2], grad)
    assert torch.equal(g.to_dense(), dense)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_gather_grad_sparse_integers(dtype):
    shape, indices = (4, 3), [0, -1, 3, 0]
    grad = _grad_values((4, 3), dtype, low=0)
    g = gatherx.gather_grad(shape, indices, grad, sparse=True)
    assert g.layout is torch.sparse_coo
    assert g.dtype is dtype
    np.testing.assert_array_equal(_dense(g), _oracle(shape, indices, grad, 0))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_dtypes_sparse_tensors_cannot_hold(dtype, monkeypatch):
    monkeypatch.setattr(kernels, "sparse_scatter_add", _no_sparse_work)
    with pytest.raises(TypeError, match=rf"cannot hold dtype {str(dtype)[6:]}.*sparse=False"):
        gatherx.gather_grad((4,), [0], torch.zeros(1, dtype=dtype), sparse=True)
    with pytest.raises(TypeError, match=r"cannot hold dtype .*sparse_grad=False"):
        gatherx.gather(torch.zeros(4, dtype=dtype), [0], sparse_grad=True)


def _no_sparse_work(*args, **kwargs):
    raise AssertionError("a sparse gradient was built")


@pytest.mark.parametrize("flag", [1, 0, "yes", None, 1.0])
def test_flag_must_be_a_bool(flag):
    x = torch.zeros(3, requires_grad=True)
    with pytest.raises(TypeError, match="sparse_grad must be True or False"):
        gatherx.gather(x, [0], sparse_grad=flag)
    with pytest.raises(TypeError, match="sparse must be True or False"):
        gatherx.gather_grad((3,), [0], torch.ones(1), sparse=flag)
    with pytest.raises(TypeError, match="sparse_grad must be True or False"):
        Gather(sparse_grad=flag)


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "no_requires_grad"], ids=str)
def test_no_gradient_no_sparse_work(context, monkeypatch):
    monkeypatch.setattr(kernels, "sparse_scatter_add", _no_sparse_work)
    data = torch.randn(5, 2, requires_grad=context != "no_requires_grad")
    ids = torch.tensor([4, -1, 0])
    guard = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(context)
    if guard is None:
        out = gatherx.gather(data, ids, sparse_grad=True)
    else:
        with guard():
            out = gatherx.gather(data, ids, sparse_grad=True)
    assert out.grad_fn is None
    assert not out.requires_grad
    assert torch.equal(out, data.detach()[ids % 5])


def test_out_buffer_takes_the_flag():
    """out= takes no gradient: the flag is checked and the result written."""
    data, buf = torch.arange(6.0).reshape(3, 2), torch.empty(2, 2)
    assert gatherx.gather(data, [2, -3], out=buf, sparse_grad=True) is buf
    assert torch.equal(buf, data[[2, 0]])


def test_module_flag_and_repr():
    layer = Gather(axis=1, sparse_grad=True)
    assert "sparse_grad=True" in repr(layer)
    assert "sparse_grad" not in repr(Gather())
    w = torch.nn.Parameter(torch.randn(2, 7))
    layer(w, torch.tensor([6, -1])).sum().backward()
    assert w.grad.layout is torch.sparse_coo
    np.testing.assert_array_equal(w.grad.to_dense().numpy()[:, 6], [2.0, 2.0])


# ------------------------------------------------------------------------ every mode, as torch


def _pair(ids: torch.Tensor, shape=(6, 3), seed=0):
    """The same weights twice: one for gatherx, one for F.embedding(sparse=True)."""
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return w.clone().requires_grad_(), w.clone().requires_grad_(), ids % shape[0]


def _ours(w, ids):
    return gatherx.gather(w, ids, sparse_grad=True)


def _theirs(w, ids):
    return F.embedding(ids, w, sparse=True)


IDS_NEG = torch.tensor([[1, -2], [5, 1]])


# Resuming after the graph break, Dynamo reads the non-leaf output's .grad and hides torch's
# warning about it itself, except where warnings are errors (as here).
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
def test_compile_runs_the_sparse_gather_eagerly(compiler):
    torch._dynamo.reset()
    w, v, wrapped = _pair(IDS_NEG)

    def loss(fn, table, ids):
        return (fn(table, ids) * torch.arange(3.0, dtype=table.dtype)).sum()

    torch.compile(loss, backend=compiler)(_ours, w, IDS_NEG).backward()
    torch.compile(loss, backend=compiler)(_theirs, v, wrapped).backward()
    assert w.grad.layout is torch.sparse_coo
    assert torch.equal(w.grad.to_dense(), v.grad.to_dense())


@pytest.mark.parametrize("compiler", ["eager", "inductor"])
def test_compile_runs_the_sparse_gather_grad_eagerly(compiler):
    torch._dynamo.reset()
    grad = torch.arange(6.0).reshape(3, 2)

    def scaled(g, ids):
        return gatherx.gather_grad((4, 2), ids, g * 2, sparse=True)

    got = torch.compile(scaled, backend=compiler)(grad, torch.tensor([1, -1, 1]))
    want = torch.zeros(4, 2).index_add_(0, torch.tensor([1, 3, 1]), grad * 2)
    assert got.layout is torch.sparse_coo
    assert torch.equal(got.to_dense(), want)


def test_compile_fullgraph_says_why():
    torch._dynamo.reset()
    w = torch.randn(4, 2, requires_grad=True)
    fn = torch.compile(_ours, backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="sparse gradients outside compiled"):
        fn(w, torch.tensor([0, -1]))


def test_compile_without_grad_stays_in_the_graph():
    torch._dynamo.reset()
    w = torch.randn(4, 2)
    fn = torch.compile(_ours, backend="eager", fullgraph=True)
    assert torch.equal(fn(w, torch.tensor([0, -1])), w[[0, 3]])
    w.requires_grad_()
    with torch.no_grad():
        assert torch.equal(fn(w, torch.tensor([0, -1])), w[[0, 3]])


def test_export_refuses_before_tracing_work():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 2))

        def forward(self, ids):
            return gatherx.gather(self.w, ids, sparse_grad=True)

    with pytest.raises(TypeError, match=r"torch\.export records ATen operators"):
        torch.export.export(M(), (torch.tensor([0, -1]),))


def test_jit_trace_keeps_the_sparse_backward():
    w, v, wrapped = _pair(IDS_NEG)
    with warnings.catch_warnings():
        # torch 2.13 deprecates torch.jit.trace and warns that the trace reads values
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(_ours, (w, IDS_NEG))
    traced(w, torch.tensor([[0, -1], [3, 3]])).pow(2).sum().backward()
    _theirs(v, torch.tensor([[0, 5], [3, 3]])).pow(2).sum().backward()
    assert w.grad.layout is torch.sparse_coo
    assert torch.equal(w.grad.to_dense(), v.grad.to_dense())
    w.grad = v.grad = None
    traced(w, IDS_NEG).pow(2).sum().backward()
    _theirs(v, wrapped).pow(2).sum().backward()
    assert w.grad.layout is torch.sparse_coo
    assert torch.equal(w.grad.to_dense(), v.grad.to_dense())


def test_func_grad_and_forward_modes():
    w, _, wrapped = _pair(IDS_NEG)
    base = w.detach()
    ours = torch.func.grad(lambda t: _ours(t, IDS_NEG).pow(2).sum())(base)
    theirs = torch.func.grad(lambda t: _theirs(t, wrapped).pow(2).sum())(base)
    assert ours.layout is torch.sparse_coo
    assert torch.equal(ours.to_dense(), theirs.to_dense())
    tangent = torch.randn_like(base)
    _, t_ours = torch.func.jvp(lambda t: _ours(t, IDS_NEG), (base,), (tangent,))
    assert torch.equal(t_ours, tangent[wrapped])
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        dual = fwad.make_dual(base, tangent)
        assert torch.equal(fwad.unpack_dual(_ours(dual, IDS_NEG)).tangent, tangent[wrapped])


def test_vmap_refuses_clearly(monkeypatch):
    monkeypatch.setattr(kernels, "sparse_scatter_add", _no_sparse_work)
    w = torch.randn(6, 3)
    with pytest.raises(TypeError, match="vmap cannot batch a sparse gradient"):
        torch.func.vmap(lambda i: _ours(w, i))(IDS_NEG)
    with pytest.raises(TypeError, match="vmap cannot batch a sparse gradient"):
        torch.func.vmap(torch.func.grad(lambda t, i: _ours(t, i).sum()), in_dims=(None, 0))(
            w, IDS_NEG
        )
    with pytest.raises(TypeError, match="vmap cannot batch a sparse gradient"):
        torch.func.vmap(lambda g: gatherx.gather_grad((6, 3), [1], g, sparse=True))(
            torch.ones(2, 1, 3)
        )


@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
def test_gradchecks_behave_as_for_embedding(check):
    """torch's gradcheck takes no sparse gradient of a dense input; it says so for both alike."""
    w, v, wrapped = _pair(IDS_NEG)
    run = getattr(torch.autograd, check)
    errors = []
    for fn, table, ids in ((_ours, w, IDS_NEG), (_theirs, v, wrapped)):
        with pytest.raises(Exception) as info:  # noqa: PT011 (compared below)
            run(lambda t, fn=fn, ids=ids: fn(t, ids), (table,))
        errors.append((type(info.value), str(info.value).splitlines()[0]))
    assert errors[0] == errors[1]


def test_double_backward_as_embedding():
    w, v, wrapped = _pair(IDS_NEG)
    results = []
    for fn, table, ids in ((_ours, w, IDS_NEG), (_theirs, v, wrapped)):
        (g,) = torch.autograd.grad(fn(table, ids).pow(3).sum(), table, create_graph=True)
        (h,) = torch.autograd.grad(g.to_dense().pow(2).sum(), table)
        results.append((g.layout, h.layout, g.to_dense(), h.to_dense()))
    assert results[0][:2] == results[1][:2] == (torch.sparse_coo, torch.sparse_coo)
    torch.testing.assert_close(results[0][2:], results[1][2:], rtol=0, atol=0)


def test_gather_grad_sparse_is_differentiable():
    grad = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    g = gatherx.gather_grad((4, 2), [3, -1, 0], grad, sparse=True)
    (back,) = torch.autograd.grad((g.to_dense() * torch.arange(4.0)[:, None]).sum(), grad)
    assert torch.equal(back, torch.tensor([3.0, 3.0, 0.0], dtype=torch.float64)[:, None] + 0 * back)


def test_non_leaf_data_as_embedding():
    """The sparse gradient passes through w * 2, and a dtype cast refuses it, in torch itself."""
    w, v, wrapped = _pair(IDS_NEG)
    _ours(w * 2, IDS_NEG).sum().backward()
    _theirs(v * 2, wrapped).sum().backward()
    assert w.grad.layout is torch.sparse_coo
    assert torch.equal(w.grad.to_dense(), v.grad.to_dense())
    errors = []
    for fn, table, ids in ((_ours, w, IDS_NEG), (_theirs, v, wrapped)):
        with pytest.raises(RuntimeError) as info:
            fn(table.float(), ids).sum().backward()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


# ------------------------------------------------------------------------------- training


# torch's sparse Adagrad builds its sparse sums without saying whether to check them
@pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")
@pytest.mark.parametrize(
    ("optimizer", "options"),
    [("SGD", {"lr": 0.1}), ("SparseAdam", {"lr": 0.05}), ("Adagrad", {"lr": 0.1})],
)
def test_training_equals_sparse_embedding(optimizer, options):
    """20 steps: losses and weights equal nn.Embedding(sparse=True)'s at every step, gatherx
    given raw negative ids and the native the same ids made non-negative."""
    gen = torch.Generator().manual_seed(3)
    rows, dim = 50, 4
    ours = Gather(sparse_grad=True)
    table = torch.nn.Parameter(torch.randn(rows, dim, generator=gen))
    native = torch.nn.Embedding(rows, dim, sparse=True)
    with torch.no_grad():
        native.weight.copy_(table)
    target = torch.randn(8, dim, generator=gen)
    opt_ours = getattr(torch.optim, optimizer)([table], **options)
    opt_native = getattr(torch.optim, optimizer)(native.parameters(), **options)
    for _ in range(20):
        ids = torch.randint(-rows, rows, (8,), generator=gen)
        losses = []
        for opt, run in (
            (opt_ours, lambda ids=ids: ours(table, ids)),
            (opt_native, lambda ids=ids: native(ids % rows)),
        ):
            opt.zero_grad()
            loss = (run() - target).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == losses[1]
        assert torch.equal(table, native.weight)


# -------------------------------------------------------------------------- a fresh process


def test_first_call_in_a_fresh_process():
    code = """
import torch, gatherx
w = torch.randn(5, 2, requires_grad=True)
out = gatherx.gather(w, torch.tensor([4, -1, 0]), sparse_grad=True)
name = type(out.grad_fn).__name__
out.sum().backward()
assert name == "GatherEagerBackward", name
assert w.grad.layout is torch.sparse_coo, w.grad.layout
assert w.grad.to_dense()[4].tolist() == [2.0, 2.0]
compiled = torch.compile(lambda t: gatherx.gather(t, [1, -1], sparse_grad=True).sum())
w.grad = None
compiled(w).backward()
assert w.grad.layout is torch.sparse_coo and w.grad.to_dense()[4].tolist() == [1.0, 1.0]
print("ok")
"""
    assert run_python(code, warm=("torch",)).stdout.strip() == "ok"
