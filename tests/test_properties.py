"""Properties against NumPy's ``take``: ranks 1-5, zero-size dims, scalar/empty indices, strides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import Backend, assert_same, from_numpy, random_data, supports_dtype

import gatherx

DTYPES = ["bool", "int8", "int32", "uint8", "uint16", "float16", "bfloat16", "float32",
          "float64", "complex64", "int64", "string"]  # fmt: skip


@st.composite
def gather_problems(draw):
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    size = shape[axis]
    index_shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    if size == 0:  # only empty indices are valid on an empty axis
        index_shape = (*index_shape, 0) if index_shape else (0,)
    n = int(np.prod(index_shape))
    values = draw(st.lists(st.integers(-size, size - 1), min_size=n, max_size=n)) if n else []
    index_dtype = draw(st.sampled_from(["int32", "int64"]))
    indices = np.array(values, dtype=index_dtype).reshape(index_shape)
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    return shape, axis, indices, dtype, seed


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(problem=gather_problems())
# found by a random run: take gives NumPy a bfloat16 scalar, which gatherx must wrap
@example(problem=((1,), 0, np.array(0, dtype=np.int32), "bfloat16", 0))
def test_matches_numpy_take(backend, xp, problem):
    shape, axis, indices, dtype, seed = problem
    if supports_dtype(backend, dtype):
        dtype = "float32"
    host = random_data(np.random.default_rng(seed), shape, dtype)
    data = from_numpy(backend, host)
    # np.take gives a scalar for a rank-0 result, whose array may narrow a string dtype
    expected = np.asarray(np.take(host, indices, axis=axis), dtype=host.dtype)
    assert_same(gatherx.gather(data, from_numpy(backend, indices), axis=axis), expected, like=data)
    assert_same(gatherx.gather(data, indices, axis=axis), expected, like=data)


def strided_views(backend, host):
    """Non-contiguous views of ``host`` in ``backend``'s own terms, with their NumPy twins."""
    if backend is Backend.NUMPY:
        return [(host.T, host.T), (host[::2], host[::2]), (host[::-1, ::-3], host[::-1, ::-3])]
    if backend is Backend.TORCH:
        t = from_numpy(backend, host)
        return [(t.T, host.T), (t[::2], host[::2]), (t[:, ::3], host[:, ::3])]
    if backend is Backend.JAX:
        x = from_numpy(backend, host)
        return [(x.T, host.T), (x[::2], host[::2]), (x[::-1, ::-3], host[::-1, ::-3])]
    import array_api_strict as xps

    x = from_numpy(backend, host)
    return [(xps.permute_dims(x, (1, 0)), host.T), (x[::2, ...], host[::2])]


def test_non_contiguous_inputs(backend, xp):
    host = np.arange(8 * 7, dtype=np.float32).reshape(8, 7)
    idx_base = np.array([[0, -1, 2, 1], [-3, 1, -2, 0]], dtype=np.int64)
    idx_host = idx_base[:, ::-2]  # negative-stride NumPy indices
    for data, twin in strided_views(backend, host):
        for axis in (0, 1):
            expected = np.take(twin, idx_host, axis=axis)
            assert_same(gatherx.gather(data, idx_host, axis=axis), expected, like=data)
            idx_native = from_numpy(backend, idx_base)
            if backend is Backend.TORCH:
                idx_native = idx_native.T.T[:, ::2]  # a strided torch view
                expected = np.take(twin, idx_base[:, ::2], axis=axis)
            else:
                expected = np.take(twin, idx_base, axis=axis)
            assert_same(gatherx.gather(data, idx_native, axis=axis), expected, like=data)


@pytest.mark.parametrize(
    "indices", [np.int64(2), 2, np.array(-1, np.int32), [], np.zeros((0, 2), np.int32)]
)
def test_scalar_and_empty_indices(backend, xp, indices):
    host = np.arange(36, dtype=np.float32).reshape(4, 3, 3)
    for axis in (0, 1, -1):
        expected = np.take(host, np.asarray(indices, dtype=np.int64), axis=axis)
        data = from_numpy(backend, host)
        assert_same(gatherx.gather(data, indices, axis=axis), expected, like=data)


def test_rank_zero_results_are_arrays(backend, xp):
    """A scalar index into 1-D data: a 0-d array of the data's framework (np.take: a scalar)."""
    for dtype in ("float32", "int32", "bool"):
        data = from_numpy(backend, np.asarray([3, 1, 2], dtype=dtype))
        got = gatherx.gather(data, 1)
        assert_same(got, np.asarray(np.asarray([3, 1, 2], dtype=dtype)[1]), like=data)
        assert tuple(got.shape) == ()
        if backend is Backend.NUMPY:
            assert type(got) is np.ndarray
