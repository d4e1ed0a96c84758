"""Random Gather problems on every backend, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from ort_oracle import ORT_DTYPES, ort_gather
from support import assert_same, from_numpy, random_data, supports_dtype

import gatherx


@pytest.mark.parametrize("dtype", ORT_DTYPES)
def test_random_cases_match_onnxruntime(backend, xp, dtype):
    if supports_dtype(backend, dtype):
        pytest.skip(supports_dtype(backend, dtype))
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    for _ in range(6):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(1, 5, rank))
        axis = int(rng.integers(-rank, rank))
        size = shape[axis]
        index_shape = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
        index_dtype = rng.choice(["int32", "int64"])
        indices = rng.integers(-size, size, index_shape).astype(index_dtype)
        host = random_data(rng, shape, dtype)
        expected = ort_gather(host, indices, axis)
        data = from_numpy(backend, host)
        assert_same(
            gatherx.gather(data, from_numpy(backend, indices), axis=axis), expected, like=data
        )


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_opsets_match_onnxruntime(backend, xp, opset):
    host = np.arange(30, dtype=np.float32).reshape(5, 6)
    lo = 0 if opset < 11 else -5
    indices = np.array([[lo, 4], [2, lo + 1]], dtype=np.int64)
    data = from_numpy(backend, host)
    out = gatherx.gather(data, from_numpy(backend, indices), axis=0, opset=opset)
    assert_same(out, ort_gather(host, indices, 0, opset), like=data)
