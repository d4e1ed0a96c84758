"""PyTorch inputs that once took a path of their own: devices, layouts, dtypes, tracing."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from support import need

torch = need("torch")

import gatherx  # noqa: E402
from gatherx.torch import Gather  # noqa: E402


def test_indices_on_another_device_are_refused_naming_both():
    data = torch.zeros(3)
    with pytest.raises(ValueError, match="indices are on device meta but data is on device cpu"):
        gatherx.gather(data, torch.tensor([5], device="meta"))
    with pytest.raises(ValueError, match=r"^gather_grad: indices are on device meta"):
        gatherx.gather_grad((3,), torch.tensor([0], device="meta"), torch.ones(1))
    # meta data with meta indices is one device: shapes only, as torch's own ops
    out = gatherx.gather(torch.zeros(3, 2, device="meta"), torch.tensor([0], device="meta"))
    assert out.shape == (1, 2)
    assert out.device.type == "meta"


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(3).to_sparse(),
        lambda: torch.eye(3).to_sparse_csr(),
        lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]),
    ],
    ids=["coo", "csr", "nested"],
)
def test_sparse_and_nested_tensors_are_refused_up_front(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that nested/sparse CSR are prototypes
        x = make()
    with pytest.raises(TypeError, match=r"^gather: data of type torch\.Tensor are not supported"):
        gatherx.gather(x, torch.tensor([0]))
    with pytest.raises(TypeError, match=r"^gather_grad: grad of type torch\.Tensor"):
        gatherx.gather_grad((3, 3), torch.tensor([0]), x)


def test_sparse_indices_are_refused():
    index = torch.tensor([0, 1]).to_sparse()
    with pytest.raises(TypeError, match=r"indices of type torch\.Tensor are not supported"):
        gatherx.gather(torch.zeros(3), index)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_gather_grad_on_unsigned_shell_dtypes(dtype):
    grad = torch.tensor([[1, 2], [3, 4], [5, 6]]).to(dtype)
    got = gatherx.gather_grad((4, 2), torch.tensor([3, 0, -1]), grad)
    assert got.dtype == dtype
    want = np.zeros((4, 2), np.int64)
    np.add.at(want, [3, 0, 3], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(got.to(torch.int64).numpy(), want)


def test_vmap_over_gather_grad_with_batched_indices():
    indices = torch.tensor([[0, 1], [2, 2], [-1, 0]])
    grads = torch.randn(3, 2, 5, dtype=torch.float64)
    got = torch.func.vmap(lambda i, g: gatherx.gather_grad((4, 5), i, g))(indices, grads)
    for b in range(3):
        want = np.zeros((4, 5))
        np.add.at(want, indices[b].numpy() % 4, grads[b].numpy())
        np.testing.assert_allclose(got[b].numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_vmap_over_half_gather_grad_sums_in_float32(dtype):
    """Under vmap (no plain eager code) half-precision gradients are summed in float32 too."""
    indices = torch.tensor([[0, 0, 2, 0], [-1, 1, 2, 2]])
    rng = np.random.default_rng(7)
    grads = torch.from_numpy(rng.integers(-8, 8, (2, 4, 5)) / 10).to(dtype)
    got = torch.func.vmap(lambda i, g: gatherx.gather_grad((3, 5), i, g))(indices, grads)
    assert got.dtype == dtype
    for b in range(2):
        want = np.zeros((3, 5))
        np.add.at(want, indices[b].numpy() % 3, grads[b].double().numpy())
        torch.testing.assert_close(got[b], torch.from_numpy(want).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_backward_sums_in_float32(dtype):
    """torch's embedding backward on a bf16 table rounds each partial sum; gatherx rounds once."""
    table = torch.zeros(4, 3, dtype=dtype, requires_grad=True)
    ids = torch.zeros(2000, dtype=torch.int64)
    upstream = torch.full((2000, 3), 0.1, dtype=dtype)
    gatherx.gather(table, ids).backward(upstream)
    want = upstream.double().sum(0).to(dtype)
    assert table.grad is not None
    torch.testing.assert_close(table.grad[0], want, rtol=0, atol=0)
    assert not table.grad[1:].any()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    ("shape", "ids", "axis"),
    [((5, 3), [3, -1, 0], 0), ((5, 3), [-5, 4, 1], 0), ((2, 7, 3), [6, 0, -2, 3], 1),
     ((200_000, 2), list(range(-40, 40, 3)), 0), ((3, 1, 90_000), [[5, -1], [7, 80_000]], -1)],
)  # fmt: skip
def test_half_gather_grad_at_distinct_indices_copies_each_slice(
    monkeypatch, dtype, shape, ids, axis
):
    """Where no index repeats a slot (a few values read as ints, or more whose distinct
    values were counted), each sum is one slice: written as given, with no float32 copy, -0.0
    made the +0.0 that a sum gives; a repeated index still sums in float32 and rounds once."""
    ax = axis % len(shape)
    idx = np.array(ids)
    distinct = len(set((idx % shape[ax]).ravel().tolist())) == idx.size
    grad_shape = (*shape[:ax], *idx.shape, *shape[ax + 1 :])
    rng = np.random.default_rng(idx.size)
    values = rng.integers(-8, 8, grad_shape) / 4
    values.reshape(-1)[0] = -0.0
    grad = torch.from_numpy(values).to(dtype)
    widened = []
    real = torch.Tensor.float

    def spy(self, *args, **kwargs):
        widened.append(self.shape)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "float", spy)
    got = gatherx.gather_grad(shape, torch.from_numpy(idx), grad, axis=axis)
    want = np.zeros(shape)
    moved = np.moveaxis(values, list(range(ax, ax + idx.ndim)), list(range(idx.ndim)))
    np.add.at(np.moveaxis(want, ax, 0), idx % shape[ax], moved)
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.from_numpy(want).to(dtype), rtol=0, atol=0)
    assert not torch.signbit(got[got == 0]).any()  # +0.0, as zeros plus -0.0 gives
    assert distinct
    assert not widened


_EMPTY_GRAD_DTYPES = [torch.float16, torch.bfloat16, torch.float64, torch.complex64]


@pytest.mark.parametrize(
    ("dtype", "requires_grad"),
    [*((d, r) for d in _EMPTY_GRAD_DTYPES for r in (False, True)),
     (torch.int8, False), (torch.uint16, False)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize(
    ("shape", "ids", "axis"),
    [((5, 3), np.zeros((0,), np.int64), 0), ((4, 2), np.zeros((2, 0), np.int64), 0),
     ((3, 0), np.array([2, -1]), 0), ((2, 0, 4), np.array([[0], [-1]]), 0)],
)  # fmt: skip
def test_gather_grad_of_an_empty_gradient_is_zeros(dtype, shape, ids, axis, requires_grad):
    """Nothing to add (an empty index, or empty slices): zeros of the data's shape and the
    gradient's dtype, differentiable where the gradient requires grad."""
    grad_shape = (*shape[:axis], *ids.shape, *shape[axis + 1 :])
    grad = torch.zeros(grad_shape, dtype=dtype, requires_grad=requires_grad)
    got = gatherx.gather_grad(shape, torch.from_numpy(ids), grad, axis=axis)
    assert got.dtype == dtype
    assert torch.equal(got.detach(), torch.zeros(shape, dtype=dtype))  # (as bits: uint16 too)
    assert got.requires_grad == requires_grad
    if requires_grad:
        (upstream,) = torch.autograd.grad(got, grad, torch.ones(shape, dtype=dtype))
        assert upstream.shape == grad.shape


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_gather_grad_at_few_repeated_indices_sums_in_float32(dtype):
    """Three slices on one slot: 1024 + 0.5 + 0.5 rounds to 1024 at each step in half
    precision, and to 1025 (bfloat16: 1024) once in float32: the float32 sum rounded once."""
    grad = torch.tensor([[1024.0], [0.5], [0.5], [3.0]], dtype=dtype)
    got = gatherx.gather_grad((4, 1), torch.tensor([2, -2, 2, 0]), grad)
    want = torch.tensor([[3.0], [0.0], [1025.0], [0.0]], dtype=torch.float64).to(dtype)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    ("rows", "cols", "n", "plan"),
    [(4, 3, 2000, "float32"), (3000, 2, 40, "float32"), (200_000, 2, 30, "distinct"),
     (400_000, 1, 500, "distinct"), (2**22, 2, 100_000, "distinct")],
)  # fmt: skip
def test_half_gather_grad_rounds_once_by_either_plan(dtype, rows, cols, n, plan):
    """Half-precision gradients summed in float32 over a float32 table or over the distinct
    indices (large tables): both equal the float64 sums rounded once, repeated ids included."""
    from gatherx._strategy import half_grad_plan

    assert half_grad_plan("torch", rows * cols, n) == plan  # the case runs the plan it names
    rng = np.random.default_rng(n)
    ids = rng.integers(-rows, rows, n)
    ids[: n // 2] = ids[0]  # half of them repeat one row
    grad = torch.from_numpy(rng.integers(-8, 8, (n, cols)) / 10).to(dtype)
    got = gatherx.gather_grad((rows, cols), torch.from_numpy(ids), grad)
    want = np.zeros((rows, cols))
    np.add.at(want, ids % rows, grad.double().numpy())
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.from_numpy(want).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    ("shape", "index_shape", "axis", "plan", "blocks"),
    [((5, 3), (1400,), 0, "float32", False), ((1, 7, 3), (4, 9), 1, "float32", False),
     ((1, 4), (2, 25), -1, "float32", False), ((1, 300_000), (7, 5), 1, "distinct", False),
     ((3, 5, 64), (2, 6), 1, "float32", False), ((2, 2100, 64), (3, 2), -2, "distinct", False),
     ((50, 4, 3), (5, 7), 1, "float32", True), ((2, 20, 4, 1, 1), (2, 3), 2, "float32", True),
     ((40, 6, 1), (36,), 1, "float32", True), ((30, 9), (2, 20), -1, "float32", True)],
)  # fmt: skip
@pytest.mark.parametrize("elements", [1, 13, 30])
def test_half_gather_grad_converted_a_slice_at_a_time(
    monkeypatch, dtype, shape, index_shape, axis, plan, blocks, elements
):
    """A large half-precision gradient is converted to float32 a slice of index positions or
    of outer blocks at a time (here forced on small ones: slices of one, of a few, and the
    last one short; outer blocks of 22 at least on rows of 3): the float64 sums rounded once,
    as when it is converted whole."""
    from gatherx import _strategy
    from gatherx._backends.torch import kernels

    monkeypatch.setattr(_strategy, "TORCH_HALF_SLICED_FROM", 1)
    monkeypatch.setattr(_strategy, "TORCH_HALF_SLICE", elements)
    steps: list[tuple[bool, int, int]] = []

    def spy(grad_elements: int, n_index: int, shape: list[int], axis: int) -> tuple[bool, int]:
        sliced = _strategy.half_grad_slice(grad_elements, n_index, shape, axis)
        units = math.prod(shape[:axis]) if sliced[0] else n_index
        steps.append((*sliced, units))
        return sliced

    monkeypatch.setattr(kernels, "half_grad_slice", spy)
    ax = axis % len(shape)
    assert _strategy.half_grad_plan("torch", math.prod(shape), math.prod(index_shape)) == plan
    rng = np.random.default_rng(elements)
    ids = rng.integers(-shape[ax], shape[ax], index_shape)
    ids.reshape(-1)[::3] = ids.reshape(-1)[0]  # a third of them repeat one slice
    grad_shape = (*shape[:ax], *index_shape, *shape[ax + 1 :])
    grad = torch.from_numpy(rng.integers(-8, 8, grad_shape) / 10).to(dtype)
    got = gatherx.gather_grad(shape, torch.from_numpy(ids), grad, axis=axis)
    want = np.zeros(shape)
    moved = np.moveaxis(grad.double().numpy(), list(range(ax, ax + len(index_shape))),
                        list(range(len(index_shape))))  # fmt: skip
    np.add.at(np.moveaxis(want, ax, 0), ids % shape[ax], moved)
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.from_numpy(want).to(dtype), rtol=0, atol=0)
    assert [s[0] for s in steps] == [blocks]
    assert steps[0][1] < steps[0][2]  # sliced, not whole


def _row_sums_case(
    dtype: torch.dtype, table: tuple[int, int, int]
) -> tuple[np.ndarray, torch.Tensor, np.ndarray]:
    """Indices into axis 1 of ``table``, 2000 of 3000 on its position 7 with gradient slices of
    ones (whose sum is 2048 when each step rounds to float16, 256 to bfloat16; 2000 summed
    once), the rest random; and the float64 sums."""
    pre, rows, row = table
    rng = np.random.default_rng(3000)
    ids = rng.integers(-rows, rows, 3000)
    ids[ids % rows == 7] = 8  # position 7: the 2000 ones alone
    ids[:2000] = 7
    grad = torch.from_numpy(rng.integers(-8, 8, (pre, 3000, row)) / 10).to(dtype)
    grad[:, :2000] = 1
    want = np.zeros(table)
    np.add.at(np.moveaxis(want, 1, 0), ids % rows, np.moveaxis(grad.double().numpy(), 1, 0))
    return ids, grad, want


def _spy(fn, name, ran):
    def spy(*args):
        ran.append(name)
        return fn(*args)

    return spy


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("rows_in_float32", [True, False])
@pytest.mark.parametrize(
    ("table", "without"),
    [((1, 110_000, 16), "distinct"), ((1, 600, 128), "float32"),
     ((2, 7000, 128), "distinct"), ((3, 200, 128), "float32")],
    ids=["many-short-rows", "few-long-rows", "blocks-of-many-rows", "blocks-of-few-rows"],
)  # fmt: skip
def test_half_gather_grad_by_row_sums_rounds_once(
    monkeypatch, dtype, rows_in_float32, table, without
):
    """Where ATen's row-sum kernel sums half-precision rows in float32 (this PyTorch's, as
    tried), a table takes it in place of the distinct sums (large tables) and of the float32
    table (small ones), with or without outer blocks before the axis (seen as one table of
    their rows); where it would not, those: all of them the float64 sums rounded once, 2000
    ones on one position of each block included."""
    from gatherx import _strategy
    from gatherx._backends.torch import kernels

    ids, grad, want = _row_sums_case(dtype, table)
    real = kernels.rows_summed_in_float32()
    monkeypatch.setattr(kernels, "rows_summed_in_float32", lambda: rows_in_float32 and real)
    ran: list[str] = []
    for name in ("_row_sums", "_half_scatter_add", "_float32_sums"):
        monkeypatch.setattr(kernels, name, _spy(getattr(kernels, name), name, ran))
    assert _strategy.half_grad_plan("torch", math.prod(table), 3000) == without
    got = gatherx.gather_grad(table, torch.from_numpy(ids), grad, axis=1)
    torch.testing.assert_close(got, torch.from_numpy(want).to(dtype), rtol=0, atol=0)
    assert got[:, 7, 0].tolist() == [2000.0] * table[0]  # 2048 or 256 if each step rounded
    # the distinct sums add each distinct index's slices in float32 themselves
    plans = {"distinct": ["_half_scatter_add", "_float32_sums"], "float32": ["_float32_sums"]}
    assert ran == (["_row_sums"] if rows_in_float32 and real else plans[without])


def test_row_sums_are_tried_before_they_are_taken(monkeypatch):
    """The kernel is taken only where PyTorch has it (x86 builds with FBGEMM and OpenMP) and
    it sums half precision in float32: an ``index_add_`` that rounds every step is refused."""
    from gatherx._backends.torch import kernels

    probe = kernels.rows_summed_in_float32.__wrapped__
    assert probe() is kernels.rows_summed_in_float32()  # the cached answer is the probe's
    with torch.device("meta"):  # a default device of the caller's changes nothing
        assert probe() is kernels.rows_summed_in_float32()
    original = torch.Tensor.index_add_

    def rounding_each_step(self, dim, index, source):
        for i, slot in enumerate(index.tolist()):  # one half-precision addition at a time
            self.select(dim, slot).add_(source.select(dim, i))
        return self

    with monkeypatch.context() as m:
        m.setattr(torch.Tensor, "index_add_", rounding_each_step)
        assert probe() is False
    assert torch.Tensor.index_add_ is original
    with monkeypatch.context() as m:
        m.setattr(torch.backends.openmp, "is_available", lambda: False)
        assert probe() is False
    with monkeypatch.context() as m:
        m.setattr(type(torch.backends.quantized), "supported_engines", property(lambda _: []))
        assert probe() is False


class _Lookup(torch.nn.Module):
    def forward(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return gatherx.gather(table, ids) * 2


def test_a_traced_graph_does_not_depend_on_the_traced_values():
    table = torch.arange(10.0).reshape(5, 2)
    with warnings.catch_warnings():
        # torch 2.13 deprecates torch.jit.trace and warns that the trace reads values
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(_Lookup(), (table, torch.tensor([0, 1])))
    ids = torch.tensor([-1, 2, -5])
    torch.testing.assert_close(traced(table, ids), table[[4, 2, 0]] * 2, rtol=0, atol=0)


def test_torch_jit_script_is_refused_with_a_reason():
    with pytest.raises(TypeError, match=r"torch\.jit\.script cannot compile gatherx"):
        torch.jit.script(Gather(axis=1))


def test_fixed_indices_follow_a_torch_device_context():
    with torch.device("meta"):
        layer = Gather(axis=1, indices=[2, -1])
        linear = torch.nn.Linear(3, 3)
        emb = torch.nn.Embedding(4, 3)
    assert layer.indices.device == linear.weight.device == emb.weight.device
    assert layer.indices.device.type == "meta"
    out = layer(torch.empty(4, 3, device="meta"))  # no device mismatch on the first forward
    assert out.device.type == "meta"
    assert out.shape == (4, 2)
    # materialised the way meta-initialised models are: to_empty, then reset_parameters
    layer.to_empty(device="cpu")
    layer.reset_parameters()
    np.testing.assert_array_equal(layer.indices.numpy(), [2, -1])
    data = torch.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(layer(data).numpy(), data.numpy()[:, [2, -1]])


def test_fixed_indices_follow_the_default_device():
    before = torch.get_default_device()
    torch.set_default_device("meta")
    try:
        layer = Gather(indices=[[0, 1]])
        assert layer.indices.device == torch.empty(1).device
        assert layer.indices.device.type == "meta"
        assert layer(torch.empty(3, 2)).shape == (1, 2, 2)
    finally:  # None for the CPU: a default device leaves a torch function mode behind
        torch.set_default_device(None if before.type == "cpu" else before)
    # a tensor of indices stays where it is; ints made after the reset are on the CPU again
    assert Gather(indices=[1]).indices.device.type == "cpu"
    with torch.device("meta"):
        assert Gather(indices=torch.tensor([1], device="cpu")).indices.device.type == "cpu"


@pytest.mark.parametrize(
    ("indices", "opset", "text"),
    [
        ([2**63], 13, r"idx=9223372036854775808 at position \(0,\)"),
        ([[1], [-(2**63) - 1]], 13, r"idx=-9223372036854775809 at position \(1, 0\)"),
        (2**64, 1, r"idx=18446744073709551616 at position \(\)"),
    ],
)
def test_fixed_python_ints_beyond_int64_are_out_of_bounds(indices, opset, text):
    """No axis holds them: refused when the layer is made, as gather refuses them (before a
    data size is known: the range in terms of s), never as an object array torch cannot read."""
    with pytest.raises(
        IndexError, match=rf"^Gather: indices element out of data bounds, {text}"
    ) as info:
        Gather(axis=1, opset=opset, indices=indices)
    assert "need opset" not in str(info.value)  # none of these is a negative index in range
    assert str(info.value).endswith("for axis 1, where s = data.shape[1]")


def test_reset_parameters_restores_the_indices_given():
    layer = Gather(indices=np.array([[1, 0]]))
    layer.load_state_dict({"indices": torch.tensor([[0, 0]])})
    assert layer.indices.tolist() == [[0, 0]]
    layer.reset_parameters()  # the values of the constructor, not of the buffer's last write
    assert layer.indices.tolist() == [[1, 0]]


@pytest.mark.parametrize("mode", ["fake", "meta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("rows", "shape"), [(50, (3,)), (200, (4000,)), (50, (2, 3))])
def test_shapes_only_tensors_run_forward_backward_and_gather_grad(mode, dtype, rows, shape):
    """Under FakeTensorMode (tools that estimate memory or trace) and on the meta device,
    values are never read: forward, backward and gather_grad give index_select's shapes and
    dtypes (half precision too, whose eager sums read the index)."""
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() if mode == "fake" else nullcontext():
        device = "cpu" if mode == "fake" else "meta"
        index = torch.zeros(shape, dtype=torch.int64, device=device)
        results = []
        for take in (gatherx.gather, lambda d, i: torch.index_select(d, 0, i.view(-1))):
            table = torch.ones(rows, 128, dtype=dtype, device=device, requires_grad=True)
            out = take(table, index)
            out.float().sum().backward()
            results.append((out.numel(), out.dtype, table.grad.shape, table.grad.dtype))
        assert results[0] == results[1]
        grad = torch.ones(*shape, 128, dtype=dtype, device=device)
        summed = gatherx.gather_grad((rows, 128), index, grad)
        assert (summed.shape, summed.dtype) == ((rows, 128), dtype)
        with pytest.raises(TypeError, match="the indices' values cannot be read"):
            gatherx.gather(table.detach(), index, out=grad.new_empty(*shape, 128))


@pytest.mark.parametrize("indices", [[1, 0], 1, [[2, -1]], None], ids=str)
def test_a_saved_gather_layer_loads_with_weights_only(tmp_path, indices):
    """torch.load(weights_only=True) of a whole module: with Gather allowlisted, as for
    torch's own modules, it loads (the fixed ints are held in a tensor, not a NumPy array)."""
    import collections

    from gatherx.torch import Gather

    layer = Gather(axis=1, indices=indices)
    path = tmp_path / "layer.pt"
    torch.save(layer, path)
    with torch.serialization.safe_globals([Gather, collections.OrderedDict, set]):
        loaded = torch.load(path, weights_only=True)
    data = torch.arange(6.0).reshape(2, 3)
    ids = torch.tensor([2, 0]) if indices is None else None
    expected = layer(data) if ids is None else layer(data, ids)
    got = loaded(data) if ids is None else loaded(data, ids)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    if loaded.indices is not None:
        loaded.indices.zero_()  # written in place, then restored
    loaded.reset_parameters()
    torch.testing.assert_close(loaded(data) if ids is None else loaded(data, ids), expected)
