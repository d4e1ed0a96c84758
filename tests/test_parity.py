"""Cross-backend parity: every backend against every other, onnxruntime and the ONNX cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ort_oracle import ORT_DTYPES, ort_gather
from support import Backend, from_numpy, need, random_data, supports_dtype, to_numpy

import gatherx
from gatherx._cases import onnx_cases, spec_examples

pytestmark = pytest.mark.parity

PARITY_DTYPES = [*ORT_DTYPES, "bfloat16", "complex64", "complex128"]


def results_per_backend(host, indices, axis, opset=13):
    results = {}
    for backend in Backend:
        need(backend.value)
        if supports_dtype(backend, host.dtype.name if host.dtype.kind not in "USO" else "string"):
            continue
        out = gatherx.gather(from_numpy(backend, host), from_numpy(backend, indices),
                             axis=axis, opset=opset)  # fmt: skip
        results[backend] = to_numpy(out)
    return results


def assert_all_equal(results, reference):
    for backend, got in results.items():
        assert got.dtype == reference.dtype, (backend, got.dtype, reference.dtype)
        np.testing.assert_array_equal(got, reference, err_msg=str(backend))
    for (a, x), (b, y) in itertools.combinations(results.items(), 2):
        assert x.shape == y.shape, (a, b)
        assert x.dtype == y.dtype, (a, b)
        np.testing.assert_array_equal(x, y, err_msg=f"{a} vs {b}")


@pytest.mark.parametrize("dtype", PARITY_DTYPES)
def test_random_problems_agree_everywhere(dtype):
    rng = np.random.default_rng(len(dtype) * 7 + ord(dtype[-1]))
    for _ in range(8):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(0, 5, rank))
        axis = int(rng.integers(-rank, rank))
        size = shape[axis]
        index_shape = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
        if size == 0:
            index_shape = (*index_shape, 0)
        indices = rng.integers(-size, max(size, 1), index_shape).astype(
            rng.choice(["int32", "int64"])
        )
        host = random_data(rng, shape, dtype)
        results = results_per_backend(host, indices, axis)
        assert len(results) >= 3
        reference = np.take(host, indices, axis=axis)
        if dtype in ORT_DTYPES and size:
            reference = ort_gather(host, indices, axis)
        assert_all_equal(results, reference)


@pytest.mark.parametrize("case", [*onnx_cases(), *spec_examples()], ids=lambda c: c.name)
def test_reference_cases_agree_everywhere(case):
    results = results_per_backend(case.data, case.indices, case.axis, case.opset)
    assert len(results) == len(Backend)
    assert_all_equal(results, case.expected)
