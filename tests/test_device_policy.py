"""The bounds policy (gatherx._policy), every row of its table in docs/errors.md on the CPU.

Accelerators take the ``device`` policy by default; here it is forced on the CPU, so that CI,
which has no GPU, runs their code: valid input gives what the exact policy and NumPy give,
bad input raises the documented error with gatherx's message, and no index value is read on
the host. ``benchmarks/device_check.py`` runs the same checks on a GPU.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
import pytest
from support import Backend, assert_same, from_numpy, need, numpy_dtype, run_python, to_numpy

import gatherx
from gatherx import _errors, _policy, _rules

ACCELERATORS = ["cuda", "xpu", "mps", "privateuseone", "gpu", "tpu", "rocm"]

# (data shape, indices, axis): negatives, duplicates, n-D and scalar indices, every axis.
VALID = [
    ((6, 3), [[0, -1], [5, 2]], 0),
    ((4, 5), [4, -5, 0, 4], 1),
    ((2, 3, 4), [[-1, 0, 3]], -1),
    ((3, 4, 2), 1, 1),
    ((5,), [-5, 4, -1, 0, 0], 0),
    ((5,), [[-5, 4], [-1, 0]], 0),
]
VALID_IDS = ["2d-neg", "cols-dup", "last-axis", "scalar", "1d", "1d-data-2d-index"]
# Every bad kind: above, below -s, a negative before opset 11, int64 beyond int32 (which
# an int32 narrowing would turn into 0 or 1), a zero-size axis.
BAD = [
    ((5, 2), [0, 5], 0, 13),
    ((5, 2), [-6, 0], 0, 13),
    ((5, 2), [1, -1], 0, 10),
    ((5, 2), [2**32], 0, 13),
    ((5, 2), [2**32 + 1, 0], 0, 11),
    ((5, 2), [-(2**32)], 0, 13),
    ((3, 4), [[0], [4]], 1, 13),
    ((0, 2), [0], 0, 13),
]
BAD_IDS = ["above", "below", "neg-opset10", "2**32", "2**32+1", "-2**32", "axis1", "empty-axis"]


def _wrapped(indices: object, size: int) -> np.ndarray:
    idx = np.asarray(indices, np.int64)
    return np.where(idx < 0, idx + size, idx)


def _take_oracle(data: np.ndarray, indices: object, axis: int) -> np.ndarray:
    axis %= data.ndim
    return np.take(data, _wrapped(indices, data.shape[axis]), axis=axis)


def _grad_oracle(
    shape: tuple[int, ...], indices: object, grad: np.ndarray, axis: int
) -> np.ndarray:
    """np.add.at in a wide type (float32 for half precision, as gatherx sums), then cast."""
    axis %= len(shape)
    wide = np.complex128 if grad.dtype.kind == "c" else np.float64
    if grad.dtype.kind in "iub":
        wide = np.int64
    out = np.zeros(shape, wide)
    flat = _wrapped(indices, shape[axis]).reshape(-1)
    g = grad.astype(wide).reshape((*shape[:axis], flat.size, *shape[axis + 1 :]))
    np.add.at(np.moveaxis(out, axis, 0), flat, np.moveaxis(g, axis, 0))
    return out.astype(grad.dtype)


def _random(shape: tuple[int, ...], name: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    values = rng.integers(-100, 100, shape)
    if name.startswith("uint"):
        values = rng.integers(0, 200, shape)
    if name.startswith("complex"):
        return (values + 1j * values[::-1]).astype(name)
    return values.astype(numpy_dtype(name))


# -- the policy itself -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ACCELERATORS)
def test_default_policy_by_device_kind(kind):
    assert _policy.policy("cpu") == _policy.EXACT
    assert _policy.exact("cpu")
    assert _policy.policy(kind) == _policy.DEVICE
    assert not _policy.exact(kind)


def test_force_exact_bounds_and_nesting():
    assert _policy.FORCING == 0
    with _policy.force("device"):
        assert _policy.FORCING == 1
        assert _policy.policy("cpu") == _policy.DEVICE
        with gatherx.exact_bounds():
            assert _policy.policy("cuda") == _policy.EXACT
            assert _policy.exact("gpu")
            with _policy.force("auto"):
                assert (_policy.policy("cpu"), _policy.policy("cuda")) == ("exact", "device")
            with _policy.force(None):
                assert not _policy.exact("mps")
        assert not _policy.exact("cpu")
    assert _policy.FORCING == 0
    assert (_policy.policy("cpu"), _policy.policy("cuda")) == ("exact", "device")


def test_exact_bounds_is_a_decorator_and_restores_on_error():
    @gatherx.exact_bounds()
    def inner() -> str:
        return _policy.policy("cuda")

    assert inner() == "exact"
    with pytest.raises(KeyError), gatherx.exact_bounds():
        raise KeyError
    assert _policy.policy("cuda") == "device"
    assert _policy.FORCING == 0


def test_unknown_policy_name():
    with (
        pytest.raises(ValueError, match=r"must be 'exact', 'device' or 'auto'.*got 'fast'"),
        _policy.force("fast"),
    ):
        pass
    assert _policy.FORCING == 0


def test_forced_policy_holds_for_its_thread_only():
    seen = []
    with _policy.force("device"):
        thread = threading.Thread(target=lambda: seen.append(_policy.policy("cpu")))
        thread.start()
        thread.join()
        assert _policy.policy("cpu") == "device"
    assert seen == ["exact"]


def test_environment_variable_sets_the_process_default():
    code = (
        "from gatherx import _policy\n"
        "print(_policy.policy('cpu'), _policy.policy('cuda'), _policy.FORCING)\n"
    )
    assert run_python(code, GATHERX_BOUNDS_POLICY="device").stdout.split() == [
        "device", "device", "1",
    ]  # fmt: skip
    assert run_python(code, GATHERX_BOUNDS_POLICY="exact").stdout.split() == [
        "exact", "exact", "1",
    ]  # fmt: skip
    assert run_python(code, GATHERX_BOUNDS_POLICY="auto").stdout.split() == [
        "exact", "device", "0",
    ]  # fmt: skip
    bad = "try:\n    import gatherx\nexcept ValueError as e:\n    print(e)\n"
    out = run_python(bad, GATHERX_BOUNDS_POLICY="sync").stdout
    assert "GATHERX_BOUNDS_POLICY must be 'exact', 'device' or 'auto'" in out


# -- PyTorch -------------------------------------------------------------------------------


@contextmanager
def _no_host_read(monkeypatch: pytest.MonkeyPatch, torch: object):
    """Fail on every way an index value reaches the host; yield the ATen ops that ran.

    ``aten._local_scalar_dense`` is what ``.item()``, ``bool()`` and ``int()`` run (a sync on
    CUDA); ``tolist`` and ``numpy`` read CPU memory without ATen, so they are patched.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    from gatherx._backends.torch import bounds

    def refuse(*args, **kwargs):
        raise AssertionError("an index value was read on the host")

    for name in ("read", "to_host"):
        monkeypatch.setattr(bounds, name, refuse)
    for name in ("item", "tolist", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    ops: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func.overloadpacket)
            assert "_local_scalar_dense" not in name, "a host read (a sync on CUDA)"
            if "_to_copy" in name or "copy_" in name:  # a move to the host would be one too
                device = (kwargs or {}).get("device")
                assert device is None or str(device) == "cpu"
            ops.append(name)
            return func(*args, **(kwargs or {}))

    with Record():
        yield ops
    monkeypatch.undo()


TORCH_DTYPES = sorted(_rules.ONNX_DATA_DTYPES - {"string"})


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_torch_device_policy_matches_exact_and_numpy(dtype, index_dtype):
    torch = need("torch")
    for shape, indices, axis in VALID:
        host = _random(shape, dtype)
        data = from_numpy(Backend.TORCH, host)
        index = torch.tensor(np.asarray(indices), dtype=getattr(torch, index_dtype))
        exact = gatherx.gather(data, index, axis=axis)
        with _policy.force("device"):
            device = gatherx.gather(data, index, axis=axis)
            from_list = gatherx.gather(data, indices, axis=axis)
        expected = _take_oracle(host, indices, axis)
        for out in (exact, device, from_list):
            assert_same(out, expected, like=data)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "uint8"])
@pytest.mark.parametrize(("shape", "indices", "axis"), VALID, ids=VALID_IDS)
def test_torch_device_policy_gather_grad(dtype, shape, indices, axis):
    torch = need("torch")
    out_shape = _rules.output_shape(shape, np.shape(indices), axis % len(shape))
    host = _random(out_shape, dtype)
    grad = from_numpy(Backend.TORCH, host)
    index = torch.tensor(indices)
    exact = gatherx.gather_grad(shape, index, grad, axis=axis)
    with _policy.force("device"):
        device = gatherx.gather_grad(shape, index, grad, axis=axis)
    assert_same(device, to_numpy(exact), like=grad)
    assert_same(device, _grad_oracle(shape, indices, host, axis), like=grad)


@pytest.mark.parametrize(("shape", "indices", "axis"), VALID, ids=VALID_IDS)
def test_torch_device_policy_autograd(shape, indices, axis):
    torch = need("torch")
    host = _random(shape, "float64")
    index = torch.tensor(indices)

    def grads() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        data = torch.tensor(host, requires_grad=True)
        out = gatherx.gather(data, index, axis=axis)
        weight = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape)
        (grad,) = torch.autograd.grad((out * out * weight).sum(), data, create_graph=True)
        (second,) = torch.autograd.grad((grad * grad).sum(), data)
        return to_numpy(out), to_numpy(grad), to_numpy(second)

    exact = grads()
    with _policy.force("device"):
        device = grads()
    for d, e in zip(device, exact, strict=True):
        np.testing.assert_array_equal(d, e)
    np.testing.assert_array_equal(exact[0], _take_oracle(host, indices, axis))


def test_torch_device_policy_under_vmap_and_grad():
    torch = need("torch")
    data = torch.arange(12.0).reshape(6, 2)
    index = torch.tensor([[0, -1], [5, 2], [-6, 3]])
    with _policy.force("device"):
        batched = torch.func.vmap(lambda i: gatherx.gather(data, i))(index)
        grad = torch.func.grad(lambda d: gatherx.gather(d, index).sum())(data)
        with pytest.raises(RuntimeError, match="indices element out of data bounds"):
            torch.func.vmap(lambda i: gatherx.gather(data, i))(torch.tensor([[0], [6]]))
    assert_same(batched, np.stack([_take_oracle(data.numpy(), i, 0) for i in index.tolist()]))
    assert_same(grad, _grad_oracle((6, 2), index.numpy(), np.ones((3, 2, 2), np.float32), 0))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "autograd"])
@pytest.mark.parametrize(("shape", "indices", "axis", "opset"), BAD, ids=BAD_IDS)
def test_torch_device_policy_bad_index_raises_with_gatherx_message(
    shape, indices, axis, opset, requires_grad
):
    torch = need("torch")
    data = torch.zeros(shape, requires_grad=requires_grad)
    index = torch.tensor(indices)
    message = _errors.traced_out_of_bounds("gather", axis, opset)
    with _policy.force("device"), pytest.raises(RuntimeError) as info:
        gatherx.gather(data, index, axis=axis, opset=opset)
    assert str(info.value) == message
    # gather_grad takes the latest opset: a negative index in range is no error there
    if opset < _rules.NEGATIVE_INDICES_SINCE:
        return
    grad = torch.ones(_rules.output_shape(shape, index.shape, axis))
    message = _errors.traced_out_of_bounds("gather_grad", axis, _rules.GRAD_OPSET)
    with _policy.force("device"), pytest.raises(RuntimeError) as info:
        gatherx.gather_grad(shape, index, grad, axis=axis)
    assert str(info.value) == message


@pytest.mark.parametrize(("shape", "indices", "axis", "opset"), BAD, ids=BAD_IDS)
def test_host_indices_stay_exact_under_the_device_policy(shape, indices, axis, opset):
    """Python and NumPy indices are on the host: checked there, with value and position."""
    torch = need("torch")
    jnp = need("jax.numpy")
    expected = _take_error(shape, indices, axis, opset)
    with _policy.force("device"):
        for data in (torch.zeros(shape), jnp.zeros(shape)):
            for given in (indices, np.asarray(indices)):
                with pytest.raises(IndexError) as info:
                    gatherx.gather(data, given, axis=axis, opset=opset)
                assert str(info.value) == expected


def _take_error(shape: tuple[int, ...], indices: object, axis: int, opset: int) -> str:
    with pytest.raises(IndexError) as info:
        gatherx.gather(np.zeros(shape), indices, axis=axis, opset=opset)
    return str(info.value)


@pytest.mark.parametrize("axis", [0, 1])
def test_torch_device_policy_reads_nothing_on_the_host(monkeypatch, axis):
    torch = need("torch")
    data = torch.arange(24.0).reshape(6, 4).requires_grad_()
    index = torch.tensor([[0, -1], [3, 3]])
    grad = torch.ones(_rules.output_shape((6, 4), (2, 2), axis))
    with _policy.force("device"), _no_host_read(monkeypatch, torch) as ops:
        out = gatherx.gather(data, index, axis=axis)
        out.backward(torch.ones_like(out))
        summed = gatherx.gather_grad((6, 4), index, grad, axis=axis)
        plain = gatherx.gather(data.detach(), index, axis=axis)
        listed = gatherx.gather(data.detach(), [[0, -1], [3, 3]], axis=axis)
    assert ops.count("aten._assert_async") == 3  # the device checks ran, one per call
    expected = _take_oracle(data.detach().numpy(), index.numpy(), axis)
    for result in (out, plain, listed):
        assert_same(result.detach(), expected)
    assert_same(data.grad, _grad_oracle((6, 4), index.numpy(), grad.numpy(), axis))
    assert_same(summed, _grad_oracle((6, 4), index.numpy(), grad.numpy(), axis))


def test_the_host_read_detector_sees_the_exact_policy(monkeypatch):
    torch = need("torch")
    with (
        pytest.raises(AssertionError, match=r"read on the host|a host read"),
        _no_host_read(monkeypatch, torch),
    ):
        gatherx.gather(torch.zeros(3, 4), torch.tensor([1]), axis=1)


def test_exact_bounds_opts_back_into_the_index_error():
    torch = need("torch")
    data = torch.zeros(5, 2, requires_grad=True)
    with _policy.force("device"), gatherx.exact_bounds():
        with pytest.raises(IndexError, match=r"idx=7 at position \(1,\) of indices"):
            gatherx.gather(data, torch.tensor([0, 7]))
        with pytest.raises(IndexError, match=r"idx=-6 at position \(0,\)"):
            gatherx.gather_grad((5, 2), torch.tensor([-6]), torch.ones(1, 2))
        out = gatherx.gather(data, torch.tensor([-1, 0]))
    assert_same(out.detach(), np.zeros((2, 2), np.float32))


def test_torch_devices_without_an_async_assert_stay_exact(monkeypatch):
    """The device policy never skips a check: where ATen has no _assert_async, it reads."""
    torch = need("torch")
    from gatherx._backends.torch import bounds

    assert bounds.asserts_on("cpu")
    assert not bounds.asserts_on("no-such-device")
    monkeypatch.setitem(bounds._ASSERTS, "cpu", False)
    with _policy.force("device"), pytest.raises(IndexError, match=r"idx=5 at position \(1,\)"):
        gatherx.gather(torch.zeros(5, 2), torch.tensor([0, 5]))


def test_device_messages_fit_cuda_assert_buffer():
    """CUDA's _assert_async copies its message into a 256-byte buffer and refuses longer."""
    for fn in ("gather", "gather_grad"):
        for axis in range(64):
            for opset in (1, 11, 13):
                assert len(_errors.traced_out_of_bounds(fn, axis, opset).encode()) < 255


def test_compiled_code_ignores_the_forced_policy():
    torch = need("torch")
    compiled = torch.compile(gatherx.gather, backend="eager", fullgraph=True)
    with _policy.force("device"):
        out = compiled(torch.arange(5.0), torch.tensor([0, -1]))
        with pytest.raises(RuntimeError, match="indices element out of data bounds"):
            compiled(torch.arange(5.0), torch.tensor([5]))
    assert_same(out, np.array([0.0, 4.0], np.float32))


# -- JAX -----------------------------------------------------------------------------------


def _jax_dtypes() -> list[str]:
    jax = need("jax")
    wide = {"int64", "uint64", "float64", "complex128"}
    names = sorted(_rules.ONNX_DATA_DTYPES - {"string"})
    return [n for n in names if jax.config.jax_enable_x64 or n not in wide]


@contextmanager
def _counted_reads(monkeypatch: pytest.MonkeyPatch):
    """Fail on a whole-index host read; yield the list of device reads (two scalars each)."""
    from gatherx._backends import jax as jax_backend

    def refuse(index):
        raise AssertionError("the whole index was read on the host")

    reads: list[tuple[int, int]] = []
    device_extremes = jax_backend.device_extremes

    def counted(index):
        reads.append(device_extremes(index))
        return reads[-1]

    monkeypatch.setattr(jax_backend, "host_extremes", refuse)
    monkeypatch.setattr(jax_backend, "device_extremes", counted)
    yield reads
    monkeypatch.undo()


def test_jax_device_policy_matches_exact_and_numpy(monkeypatch):
    jax = need("jax")
    jnp = need("jax.numpy")
    index_dtype = jnp.int64 if jax.config.jax_enable_x64 else jnp.int32
    for dtype in _jax_dtypes():
        for shape, indices, axis in VALID:
            host = _random(shape, dtype)
            data = jnp.asarray(host)
            index = jnp.asarray(np.asarray(indices), index_dtype)
            exact = gatherx.gather(data, index, axis=axis)
            with _policy.force("device"), _counted_reads(monkeypatch) as reads:
                device = gatherx.gather(data, index, axis=axis)
            # the flow reads two scalars; the eager CPU path, one flag computed with the gather
            assert len(reads) <= 1
            expected = _take_oracle(host, indices, axis)
            assert_same(exact, expected, like=data)
            assert_same(device, expected, like=data)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize(("shape", "indices", "axis"), VALID, ids=VALID_IDS)
def test_jax_device_policy_gather_grad_and_grad(monkeypatch, dtype, shape, indices, axis):
    jax = need("jax")
    jnp = need("jax.numpy")
    out_shape = _rules.output_shape(shape, np.shape(indices), axis % len(shape))
    host = _random(out_shape, dtype)
    index = jnp.asarray(indices)
    exact = gatherx.gather_grad(shape, index, jnp.asarray(host), axis=axis)
    with _policy.force("device"), _counted_reads(monkeypatch) as reads:
        device = gatherx.gather_grad(shape, index, jnp.asarray(host), axis=axis)
        if dtype.startswith("float"):
            vjp = jax.grad(lambda d: gatherx.gather(d, index, axis=axis).astype(float).sum())(
                jnp.zeros(shape, dtype)
            )
            ones = np.ones(out_shape, numpy_dtype(dtype))
            assert_same(vjp, _grad_oracle(shape, indices, ones, axis))
    assert len(reads) == (2 if dtype.startswith("float") else 1)
    assert_same(device, to_numpy(exact))
    assert_same(device, _grad_oracle(shape, indices, host, axis))


@pytest.mark.parametrize(("shape", "indices", "axis", "opset"), BAD, ids=BAD_IDS)
def test_jax_device_policy_bad_index_is_the_exact_index_error(
    monkeypatch, shape, indices, axis, opset
):
    jax = need("jax")
    jnp = need("jax.numpy")
    if max(abs(i) for i in np.ravel(indices)) >= 2**31 and not jax.config.jax_enable_x64:
        pytest.skip("JAX holds int64 indices only with jax_enable_x64 (covered by the x64 run)")
    expected = _take_error(shape, indices, axis, opset)
    index = jnp.asarray(np.asarray(indices))
    with (
        _policy.force("device"),
        _counted_reads(monkeypatch) as reads,
        pytest.raises(IndexError) as info,
    ):
        gatherx.gather(jnp.zeros(shape), index, axis=axis, opset=opset)
    assert str(info.value) == expected
    assert len(reads) == 1


def test_jax_exact_bounds_reads_on_the_host(monkeypatch):
    need("jax")
    jnp = need("jax.numpy")
    from gatherx._backends import jax as jax_backend

    seen = []
    host_extremes = jax_backend.host_extremes
    monkeypatch.setattr(jax_backend, "host_extremes", lambda i: seen.append(1) or host_extremes(i))
    with _policy.force("device"), gatherx.exact_bounds():
        with pytest.raises(IndexError, match=r"idx=4 at position \(1,\)"):
            gatherx.gather(jnp.arange(4, dtype=jnp.float32), jnp.array([-1, 4]))
        summed = gatherx.gather_grad((4,), jnp.array([-1, 0]), jnp.ones(2, jnp.float32))
    assert seen == [1, 1]
    assert_same(summed, np.array([1.0, 0.0, 0.0, 1.0], np.float32))


def test_jax_jit_is_untouched_by_the_policy(monkeypatch):
    jax = need("jax")
    jnp = need("jax.numpy")
    from jax.experimental import checkify

    jitted = jax.jit(gatherx.gather, static_argnames=("axis", "opset"))
    checked = jax.jit(checkify.checkify(gatherx.gather, errors=checkify.index_checks))
    with _policy.force("device"), _counted_reads(monkeypatch) as reads:
        out = jitted(jnp.arange(5, dtype=jnp.float32), jnp.array([0, 5, -6, -1]))
        err, _ = checked(jnp.arange(5, dtype=jnp.float32), jnp.array([0, 7]))
    assert reads == []
    assert_same(out, np.array([0.0, np.nan, np.nan, 4.0], np.float32), exact=False)
    assert "index 7 is out of bounds for axis 0 with size 5" in str(err.get())
