"""The error matrix: each bad input, on each backend, raises the documented built-in exception."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import Backend, assert_same, from_numpy, to_numpy

import gatherx

DATA = np.arange(20, dtype=np.float32).reshape(5, 4)


def data_for(backend):
    return from_numpy(backend, DATA)


@pytest.mark.parametrize(
    ("indices", "axis", "opset", "pattern"),
    [
        ([5], 0, 13, r"idx=5 at position \(0,\) .*inclusive range \[-5,4\] for axis 0 of size 5"),
        ([[0, 1], [2, -6]], 0, 13, r"idx=-6 at position \(1, 1\) .*\[-5,4\]"),
        ([0, 4], 1, 13, r"idx=4 at position \(1,\) .*\[-4,3\] for axis 1 of size 4"),
        ([0, -1], 0, 10, r"idx=-1 at position \(1,\) .*\[0,4\].*negative indices need opset >= 11"),
        ([-1], 0, 1, r"idx=-1 .*\[0,4\]"),
        (7, -1, 13, r"idx=7 at position \(\) .*\[-4,3\]"),
    ],
)
@pytest.mark.parametrize("kind", ["native", "numpy", "list"])
def test_out_of_bounds(backend, xp, indices, axis, opset, pattern, kind):
    data = data_for(backend)
    host = np.asarray(indices, dtype=np.int64)
    idx = {"native": lambda: from_numpy(backend, host), "numpy": lambda: host,
           "list": lambda: indices}[kind]()  # fmt: skip
    with pytest.raises(IndexError, match=pattern):
        gatherx.gather(data, idx, axis=axis, opset=opset)
    np.testing.assert_array_equal(to_numpy(data), DATA)


def _warn_here() -> None:
    warnings.warn("shown once", UserWarning, stacklevel=1)  # one source line: one registry key


def test_a_caught_index_error_leaves_the_warning_filters_alone(backend, xp):
    # A training loop that skips bad batches must not repeat the warnings shown once, nor
    # drop the filters other threads set while gatherx formats its error.
    data, bad = data_for(backend), from_numpy(backend, np.array([0, 9]))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        filters = list(warnings.filters)
        for _ in range(3):
            _warn_here()
            with pytest.raises(IndexError, match="idx=9"):
                gatherx.gather(data, bad)
            with pytest.raises(IndexError, match="idx=9"):
                gatherx.gather_grad((5, 4), bad, from_numpy(backend, np.ones((2, 4), np.float32)))
        assert warnings.filters == filters
    assert [str(w.message) for w in seen] == ["shown once"]


def test_out_of_bounds_on_empty_axis(backend, xp):
    data = from_numpy(backend, np.zeros((0, 3), np.float32))
    with pytest.raises(IndexError, match="size 0"):
        gatherx.gather(data, [0])
    assert tuple(gatherx.gather(data, np.zeros((2, 0), np.int64)).shape) == (2, 0, 3)


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "bool", "uint8", "int8", "int16", "uint32"]
)
def test_index_dtype(backend, xp, dtype):
    data = data_for(backend)
    host = np.array([0, 1]).astype(dtype)
    for idx in (host, from_numpy(backend, host)):
        with pytest.raises(TypeError, match="indices must be int32 or int64"):
            gatherx.gather(data, idx)


@pytest.mark.parametrize(
    "indices", [[0.0, 1.0], [True, False], True, 1.5, "0", None, [[0], [1, 2]]]
)
def test_python_indices(backend, xp, indices):
    data = data_for(backend)
    expected = ValueError if indices == [[0], [1, 2]] else TypeError
    with pytest.raises(expected, match="indices"):
        gatherx.gather(data, indices)


def test_python_int_beyond_int64(backend, xp):
    with pytest.raises(IndexError, match=r"idx=36893488147419103232 at position \(1,\)"):
        gatherx.gather(data_for(backend), [0, 2**65])


@pytest.mark.parametrize("axis", [2, -3, 100])
def test_axis_out_of_range(backend, xp, axis):
    with pytest.raises(ValueError, match=r"axis .* out of the accepted range \[-2, 1\]"):
        gatherx.gather(data_for(backend), [0], axis=axis)


@pytest.mark.parametrize("axis", [1.0, "0", None, True])
def test_axis_type(backend, xp, axis):
    with pytest.raises(TypeError, match="axis must be an int"):
        gatherx.gather(data_for(backend), [0], axis=axis)


@pytest.mark.parametrize("opset", [0, -1])
def test_opset_value(backend, xp, opset):
    with pytest.raises(ValueError, match="opset must be >= 1"):
        gatherx.gather(data_for(backend), [0], opset=opset)


@pytest.mark.parametrize("opset", [13.0, "13", None])
def test_opset_type(backend, xp, opset):
    with pytest.raises(TypeError, match="opset must be an int"):
        gatherx.gather(data_for(backend), [0], opset=opset)


def test_rank_zero_data(backend, xp):
    scalar = from_numpy(backend, np.array(1.0, np.float32))
    with pytest.raises(ValueError, match="rank >= 1"):
        gatherx.gather(scalar, 0)


def test_data_not_an_array():
    with pytest.raises(TypeError, match="data must be an array"):
        gatherx.gather([[1, 2], [3, 4]], [0])


def installed_others(backend):
    """The installed backends other than ``backend`` and NumPy (whose indices are welcome)."""
    others = []
    for other in Backend:
        if other not in (backend, Backend.NUMPY):
            try:
                others.append((other, from_numpy(other, np.array([0, 1]))))
            except pytest.skip.Exception:
                continue
    return others


def test_mixed_frameworks(backend, xp):
    """Indices from another framework than the data's are a TypeError naming both, except
    JAX indices with NumPy data, which compute in JAX as ``jnp.take`` does."""
    for other, idx in installed_others(backend):
        if backend is Backend.NUMPY and other is Backend.JAX:
            out = gatherx.gather(DATA, idx)
            assert_same(out, np.take(DATA, [0, 1], axis=0), like=idx)
            continue
        with pytest.raises(TypeError, match=r"indices are an? .* but data is an? "):
            gatherx.gather(data_for(backend), idx)
    if backend not in (Backend.NUMPY, Backend.JAX):
        # framework indices with NumPy data
        with pytest.raises(TypeError, match=r"indices are an? .* but data is a numpy.ndarray"):
            gatherx.gather(DATA, from_numpy(backend, np.array([0])))


def test_inputs_are_not_modified(backend, xp):
    host_idx = np.array([[0, -1], [-1, 2]])
    data, idx = data_for(backend), from_numpy(backend, host_idx)
    gatherx.gather(data, idx)
    gatherx.gather(data, host_idx, axis=1)
    gatherx.gather_grad((5, 4), idx, from_numpy(backend, np.ones((2, 2, 4), np.float32)))
    np.testing.assert_array_equal(to_numpy(data), DATA)
    np.testing.assert_array_equal(to_numpy(idx), host_idx)
    np.testing.assert_array_equal(host_idx, [[0, -1], [-1, 2]])


def test_gather_grad_errors(backend, xp):
    grad = from_numpy(backend, np.ones((2, 4), np.float32))
    with pytest.raises(IndexError, match="idx=5"):
        gatherx.gather_grad((5, 4), [0, 5], grad)
    with pytest.raises(ValueError, match="grad has shape"):
        gatherx.gather_grad((5, 4), [0, 1, 2], grad)
    with pytest.raises(TypeError, match="int32 or int64"):
        gatherx.gather_grad((5, 4), np.array([0.0, 1.0]), grad)
    with pytest.raises(ValueError, match="axis"):
        gatherx.gather_grad((5, 4), [0, 1], grad, axis=2)
    with pytest.raises(TypeError, match="grad of dtype bool is not a numeric ONNX type"):
        gatherx.gather_grad((5, 4), [0, 1], from_numpy(backend, np.ones((2, 4), bool)))
    with pytest.raises(TypeError, match="shape must be a sequence"):
        gatherx.gather_grad(5.0, [0, 1], grad)


def test_sparse_gradients_are_pytorchs(backend, xp):
    """sparse_grad=True / sparse=True: a PyTorch gradient layout; elsewhere a TypeError that
    says so (and, for JAX, what to write instead), raised before any work."""
    data = data_for(backend)
    grad = from_numpy(backend, np.ones((2, 4), dtype=np.float32))
    if backend is Backend.TORCH:
        assert to_numpy(gatherx.gather(data, [1, -1], sparse_grad=True)).shape == (2, 4)
        sparse = gatherx.gather_grad((5, 4), [1, -1], grad, sparse=True)
        np.testing.assert_array_equal(to_numpy(sparse.to_dense())[[1, 4]], np.ones((2, 4)))
        return
    pattern = r"sparse_grad=True asks for a torch.sparse_coo gradient, a PyTorch gradient layout"
    if backend is Backend.JAX:
        pattern += r".*table\.at\[indices\]\.add\(update\)"
    with pytest.raises(TypeError, match=pattern):
        gatherx.gather(data, [1, 9], sparse_grad=True)  # (the bad index is never read)
    with pytest.raises(TypeError, match=pattern.replace("sparse_grad", "sparse")):
        gatherx.gather_grad((5, 4), [1, -1], grad, sparse=True)
    with pytest.raises(TypeError, match="sparse_grad must be True or False"):
        gatherx.gather(data, [1], sparse_grad=1)
    assert_same(gatherx.gather(data, [1, -1], sparse_grad=False), DATA[[1, 4]], like=data)
    # NumPy's booleans are flags too (a mask's .any() is one)
    assert_same(gatherx.gather(data, [1, -1], sparse_grad=np.False_), DATA[[1, 4]], like=data)


def test_sparse_gradients_refused_with_out():
    buffer = np.empty((1, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="PyTorch gradient layout"):
        gatherx.gather(DATA, [1], out=buffer, sparse_grad=True)
