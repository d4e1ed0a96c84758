"""gatherx.gather under torch.compile (eager, aot_eager, inductor; static and dynamic) and export.

Out-of-bounds indices under compile and export surface as ``RuntimeError`` (from the in-graph
``torch._assert_async``; on CUDA a device-side assert), not the eager ``IndexError``.
"""

from __future__ import annotations

import pytest
from support import need

torch = need("torch")

# torch's own deprecations, not gatherx's: Dynamo instantiates autograd.Function classes while
# tracing them, and inductor and the jvp decompositions import through torch.jit.script.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning:torch"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script:DeprecationWarning"),
]

from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

import gatherx  # noqa: E402
from gatherx.torch import Gather  # noqa: E402

OOB = r"out of data bounds: indices must be within the inclusive range \[-s,s-1\] for axis 1"


def _loss(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return (gatherx.gather(x, i, axis=1).sin() ** 2).sum()


def _native_loss(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return (x[:, i].sin() ** 2).sum()


def _check_value_and_grad(compiled, rows: int, cols: int, i: torch.Tensor) -> None:
    gen = torch.Generator().manual_seed(rows * 100 + cols)
    x = torch.randn(rows, cols, generator=gen, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    loss, loss_ref = compiled(x, i), _native_loss(x_ref, i)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(x.grad, x_ref.grad)


# Every size varies (none is 0 or 1, which Dynamo specialises); duplicates and negatives.
SHAPES = [
    (3, 5, torch.tensor([[0, -1], [4, 4]])),
    (4, 7, torch.tensor([[6, 6, -1], [-7, 0, 3], [2, 5, -2]])),
]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Dynamo caches compiled frames per code object; each test starts from none."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile(compiler: str, dynamic: bool):
    counter = CompileCounterWithBackend(compiler)
    return torch.compile(_loss, backend=counter, fullgraph=True, dynamic=dynamic), counter


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_compile_forward_backward(compiler, dynamic):
    fn, counter = _compile(compiler, dynamic)
    for rows, cols, i in SHAPES:
        _check_value_and_grad(fn, rows, cols, i)
    if dynamic:
        # One graph for all shapes: the bounds message must not specialise the axis size.
        assert counter.frame_count == 1


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize(
    ("shape", "n"), [((4, 5, 2), 130), ((6, 5, 1), 40)], ids=["rows-of-2", "rows-of-1"]
)
def test_compile_backward_on_short_rows(shape, n, dynamic):
    """The backward on short rows behind an outer axis (added on the (pre, n x row) view of
    gradient and table), traced by AOTAutograd: torch's own gradient of advanced indexing."""
    compiled = torch.compile(_loss, backend="aot_eager", fullgraph=True, dynamic=dynamic)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(shape, generator=gen, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    i = torch.randint(-5, 5, (n,), generator=gen)
    loss, loss_ref = compiled(x, i), _native_loss(x_ref, i)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_compile_out_of_bounds_raises(compiler):
    fn, _ = _compile(compiler, True)
    x = torch.randn(3, 5, requires_grad=True)
    for bad in (torch.tensor([[0, 5]]), torch.tensor([-6])):
        with pytest.raises(RuntimeError, match=OOB):
            fn(x, bad)


@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_compile_gather_itself_with_dynamic_shapes(compiler):
    """gatherx.gather and gather_grad compiled themselves, not inside a function: with
    ``dynamic=True`` their int arguments (axis, opset) are symbolic too."""
    import numpy as np

    gather = torch.compile(gatherx.gather, backend=compiler, fullgraph=True, dynamic=True)
    grad = torch.compile(gatherx.gather_grad, backend=compiler, fullgraph=True, dynamic=True)
    for rows, cols, i in SHAPES:
        x = torch.randn(rows, cols, requires_grad=True)
        for axis, opset in ((1, 13), (-1, 11), (1, 13)):
            got = gather(x, i, axis=axis, opset=opset)
            want = np.take(x.detach().numpy(), i.numpy() % cols, axis=1)
            np.testing.assert_array_equal(got.detach().numpy(), want)
            (dx,) = torch.autograd.grad(got.sum(), x)
            np.testing.assert_array_equal(
                dx.numpy(), grad((rows, cols), i, torch.ones_like(got), axis=1).numpy()
            )
        ones = np.zeros((rows, cols), np.float32)
        np.add.at(ones, (slice(None), i.numpy() % cols), 1.0)
        np.testing.assert_array_equal(dx.numpy(), ones)
        with pytest.raises(RuntimeError, match=OOB):
            gather(x, torch.tensor([0, cols]), axis=1)


def test_compile_inductor_dynamic_forward_backward_and_bounds():
    # The one inductor case (C++ codegen is slow on small CI machines): two shapes, one graph,
    # and the bounds check survives inductor's lowering.
    fn, counter = _compile("inductor", True)
    for rows, cols, i in SHAPES:
        _check_value_and_grad(fn, rows, cols, i)
    assert counter.frame_count == 1
    with pytest.raises(RuntimeError, match=OOB):
        fn(torch.randn(4, 7, requires_grad=True), torch.tensor([[1, 7], [0, 0]]))


def test_compile_inductor_on_an_empty_axis():
    """An axis of length 0 under inductor, which cannot lower an index into it: any index
    raises the bounds error when run (not inductor's own at compile time), an empty one gives
    an empty result."""
    fn = torch.compile(
        lambda d, i: gatherx.gather(d, i, axis=1), backend="inductor", fullgraph=True
    )
    data = torch.zeros(3, 0, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=OOB) as info:
        fn(data, torch.tensor([[0, -1]]))
    assert not isinstance(info.value, torch._inductor.exc.InductorError)
    got = fn(data, torch.zeros(2, 0, dtype=torch.int64))
    assert got.shape == (3, 2, 0, 2)


def test_compile_inductor_vmap_on_an_empty_axis():
    """vmap over indices into an empty axis under inductor: the batched check's op stays in
    the graph (the pad's index is read from its output) and raises."""
    table = torch.zeros(0, 3)
    fn = torch.compile(torch.func.vmap(lambda i: gatherx.gather(table, i)), backend="inductor")
    with pytest.raises(RuntimeError, match="out of data bounds") as info:
        fn(torch.tensor([[0], [1]]))
    assert not isinstance(info.value, torch._inductor.exc.InductorError)
    assert fn(torch.zeros(2, 0, dtype=torch.int64)).shape == (2, 0, 3)


def test_one_slot_of_an_empty_axis():
    """What a compiled gather from an empty axis reads (traced there, where coverage cannot
    see it): the data padded with one slot of zeros on the axis, the gradient flowing back to
    the empty data, and the index clamped to that slot, in its shape and dtype."""
    from gatherx._backends.torch import kernels

    data = torch.zeros(3, 0, 2, requires_grad=True)
    index = torch.tensor([[4, -1]], dtype=torch.int32)
    padded, slot = kernels.one_slot(data, index, 1)
    assert torch.equal(padded, torch.zeros(3, 1, 2))
    assert torch.equal(slot, torch.zeros(1, 2, dtype=torch.int32))
    (grad,) = torch.autograd.grad(padded.sum(), data)
    assert grad.shape == (3, 0, 2)


def test_compile_vmap_over_indices_checks_bounds():
    x = torch.randn(5, 3)
    fn = torch.compile(torch.func.vmap(lambda i: gatherx.gather(x, i)), backend="aot_eager",
                       fullgraph=True)  # fmt: skip
    i = torch.tensor([[0, -1], [4, 2], [-5, 3]])
    torch.testing.assert_close(fn(i), x[i], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="out of data bounds"):
        fn(torch.tensor([[0, 1], [5, 2], [0, 0]]))


def test_compile_module_with_int32_indices_opset_10():
    layer = Gather(axis=0, opset=10)
    fn = torch.compile(layer, backend="eager", fullgraph=True)
    x = torch.randn(4, 2)
    i = torch.tensor([3, 0, 3], dtype=torch.int32)
    torch.testing.assert_close(fn(x, i), x[i.long()], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=r"range \[0,s-1\] for axis 0"):
        fn(x, torch.tensor([-1, 0, 0], dtype=torch.int32))


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gather = Gather(axis=1)

    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return self.gather(x, i) * 2 + gatherx.gather(x, [0, -1], axis=0).sum()


def test_export_static_and_dynamic():
    x, i = torch.randn(3, 5), torch.tensor([[0, -1], [4, 4]])
    auto = torch.export.Dim.AUTO
    for shapes in (None, ({0: auto, 1: auto}, {0: auto, 1: auto})):
        program = torch.export.export(_Model(), (x, i), dynamic_shapes=shapes)
        module = program.module()
        expected = x[:, i] * 2 + x[[0, -1]].sum()
        torch.testing.assert_close(module(x, i), expected, rtol=0, atol=0)
        with pytest.raises(RuntimeError, match=OOB):
            module(x, torch.tensor([[0, 5], [1, 1]]))
    # The dynamic program takes other sizes.
    y, j = torch.randn(4, 7), torch.tensor([[6, -7, 1]])
    torch.testing.assert_close(module(y, j), y[:, j] * 2 + y[[0, -1]].sum(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_dynamic_index_counts_share_one_graph(compiler, dtype):
    """The plans that read sizes (how many indices, how long the rows) are eager-only: a
    compiled graph compares no size of its own, so every index count runs in one graph,
    forward and backward, where a comparison would have guarded it."""
    fn = torch.compile(
        lambda t, i: gatherx.gather(t, i, axis=1), backend=compiler, fullgraph=True, dynamic=True
    )
    gen = torch.Generator().manual_seed(7)
    table = torch.randn(3, 5000, 2, generator=gen).to(dtype).requires_grad_()
    fn(table, torch.randint(0, 5000, (10,), generator=gen)).float().sum().backward()
    torch.compiler.set_stance("fail_on_recompile")
    try:
        for n in (200, 3000):
            i = torch.randint(-5000, 5000, (n,), generator=gen)
            table.grad = None
            got = fn(table, i)
            got.float().sum().backward()
            torch.testing.assert_close(got, table[:, i], rtol=0, atol=0)
            expected = torch.zeros(3, 5000, 2, dtype=torch.float64)
            expected.index_add_(1, i % 5000, torch.ones(3, n, 2, dtype=torch.float64))
            torch.testing.assert_close(table.grad.double(), expected, rtol=0, atol=0)
    finally:
        torch.compiler.set_stance("default")


def test_export_with_a_dynamic_index_count():
    class Lookup(torch.nn.Module):
        def forward(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            return gatherx.gather(table, ids)

    table = torch.randn(5000, 3)
    shapes = (None, {0: torch.export.Dim("n")})
    program = torch.export.export(Lookup(), (table, torch.tensor([0, 1, 2])), dynamic_shapes=shapes)
    for n in (2, 3000):
        ids = torch.randint(-5000, 5000, (n,))
        torch.testing.assert_close(program.module()(table, ids), table[ids], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="out of data bounds"):
        program.module()(table, torch.tensor([0, 5000]))


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks", "fullgraph"])
@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_compile_per_sample_gradients_over_batched_indices(compiler, fullgraph):
    """vmap(grad(...)) over the indices, compiled: the index reaches the bounds check batched
    under grad's wrapper, which only the check with a batching rule can take."""
    gen = torch.Generator().manual_seed(3)
    table = torch.randn(5, 4, dtype=torch.float64, generator=gen)
    ids = torch.randint(-5, 5, (3, 2), generator=gen)

    def per_sample(gather):
        loss = lambda t, i: gather(t, i).pow(2).sum()  # noqa: E731
        return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))

    native = per_sample(lambda t, i: torch.index_select(t, 0, torch.where(i < 0, i + 5, i)))
    fn = torch.compile(per_sample(gatherx.gather), backend=compiler, fullgraph=fullgraph)
    torch.testing.assert_close(fn(table, ids), native(table, ids), rtol=0, atol=0)
    bad = ids.clone()
    bad[1, 1] = 5
    with pytest.raises(RuntimeError, match="out of data bounds"):
        fn(table, bad)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_python_int_indices_compile_in_one_graph(compiler, dynamic):
    import numpy as np

    x = torch.arange(15.0).reshape(5, 3)
    cases = [(0, 1), (-1, 0), ([0, -1, 2], 1), ([[4, 0], [-5, 1]], 0), ((1, 2), 0), ([[], []], 1)]
    for indices, axis in cases:
        fn = torch.compile(
            lambda a, i=indices, k=axis: gatherx.gather(a, i, axis=k),
            backend=compiler, fullgraph=True, dynamic=dynamic,
        )  # fmt: skip
        want = np.take(x.numpy(), np.asarray(indices, dtype=np.int64), axis=axis)
        np.testing.assert_array_equal(fn(x).numpy(), want)
    # one value too (a constant to the tracer's fake tensors): the graph's error, every call
    for indices in ([0, 5], 5, -6, [5], [[-6]], (5,)):
        bad = torch.compile(
            lambda a, i=indices: gatherx.gather(a, i),
            backend=compiler, fullgraph=True, dynamic=dynamic,
        )  # fmt: skip
        for _ in range(2):
            with pytest.raises(RuntimeError, match=r"^gather: indices element out of data bounds"):
                bad(x)
    grad = torch.compile(
        lambda g: gatherx.gather_grad((5, 3), [1, -1, 1], g), backend=compiler, fullgraph=True
    )
    expected = np.zeros((5, 3))
    np.add.at(expected, [1, -1, 1], 1.0)
    np.testing.assert_array_equal(grad(torch.ones(3, 3, dtype=torch.float64)).numpy(), expected)
    data = x.clone().requires_grad_()
    loss = torch.compile(
        lambda a: gatherx.gather(a, [[1, -1]], axis=1).sum(), backend=compiler, fullgraph=True
    )
    loss(data).backward()
    np.testing.assert_array_equal(data.grad.numpy(), np.tile([0.0, 1.0, 1.0], (5, 1)))


@pytest.mark.parametrize(
    "indices", [2**63, [0, 2**64], -(2**63) - 1, [[1], [-(2**70)]], (2**63,)], ids=str
)
@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
def test_python_ints_beyond_int64_fail_the_graphs_check(compiler, indices):
    """No tensor holds them: the graph holds the int64 extreme on their side, which the
    graph's check refuses as any other bad index, at either opset's range."""
    import numpy as np

    x = torch.arange(5.0)
    for opset in (13, 1):
        bad = torch.compile(
            lambda a, o=opset: gatherx.gather(a, indices, opset=o),
            backend=compiler, fullgraph=True,
        )  # fmt: skip
        for _ in range(2):
            with pytest.raises(RuntimeError, match=r"^gather: indices element out of data bounds"):
                bad(x)
    bad_grad = torch.compile(
        lambda g: gatherx.gather_grad((5,), indices, g), backend=compiler, fullgraph=True
    )
    with pytest.raises(RuntimeError, match=r"^gather_grad: indices element out of data bounds"):
        bad_grad(torch.ones(np.shape(indices)))
    with pytest.raises(IndexError, match="idx="):  # eagerly: the value and its position
        gatherx.gather(x, indices)


@pytest.mark.parametrize(
    "values", [7, -(2**63), [9], [[-9]], (5,), [1, 2], [[1], [2]], []], ids=str
)
def test_constant_index_holds_python_ints_as_torch_tensor_does(values):
    """The tensor a compiled call makes of Python ints, run eagerly (coverage cannot see
    Dynamo's trace): torch.tensor's values, shape and dtype, one value by torch.full."""
    from gatherx._backends.torch.kernels import constant_index
    from gatherx._indices import plain_ints_shape

    got = constant_index(values, plain_ints_shape(values), torch.device("cpu"))
    want = torch.tensor(values, dtype=torch.int64)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    assert torch.equal(got, want)


def test_constant_index_holds_ints_beyond_int64_at_its_extremes():
    """What a compiled call makes of Python ints beyond int64, run eagerly (coverage cannot
    see Dynamo's trace): the int64 extreme on each one's side, the rest as given."""
    from gatherx._backends.torch.kernels import constant_index
    from gatherx._indices import int64_clamped, plain_ints_shape

    values = [[2**64, -1], [-(2**70), 2**63 - 1]]
    assert plain_ints_shape(values) is None
    assert plain_ints_shape(values, False) == (2, 2)
    got = constant_index(int64_clamped(values), (2, 2), torch.device("cpu"))
    assert torch.equal(got, torch.tensor([[2**63 - 1, -1], [-(2**63), 2**63 - 1]]))
    assert constant_index(int64_clamped(-(2**63) - 1), (), torch.device("cpu")) == -(2**63)
    assert plain_ints_shape([1, [2]], False) is None  # ragged either way
