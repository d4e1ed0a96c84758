"""The official ONNX Gather node cases and the spec's examples, on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same, from_numpy, need

import gatherx
from gatherx._cases import onnx_cases, spec_examples

onnx = need("onnx")
CASES = [*onnx_cases(), *spec_examples()]


def test_all_official_cases_are_found():
    names = {c.name for c in onnx_cases()}
    assert {"test_gather_0", "test_gather_1", "test_gather_2d_indices",
            "test_gather_negative_indices"} <= names  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(backend, xp, case):
    data = from_numpy(backend, case.data)
    out = gatherx.gather(data, from_numpy(backend, case.indices), axis=case.axis, opset=case.opset)
    assert_same(out, case.expected, like=data)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_with_host_indices(backend, xp, case):
    """NumPy and Python-list indices are accepted for every backend."""
    data = from_numpy(backend, case.data)
    for indices in (case.indices, case.indices.tolist()):
        out = gatherx.gather(data, indices, axis=case.axis, opset=case.opset)
        assert_same(out, case.expected, like=data)


def test_spec_shape_table(backend, xp):
    """The four rows of Gather-13's shape table, checked against the written equations."""
    rng = np.random.default_rng(0)
    p, q, r, s = 4, 3, 2, 5
    d2 = rng.standard_normal((p, q)).astype(np.float32)
    d3 = rng.standard_normal((p, q, r)).astype(np.float32)
    i2 = rng.integers(0, 2, (r, s))
    rows = [
        (d2, np.int64(1), 0, d2[1, :]),  # output[q] = data[indices, q]
        (d3, np.int64(2), 1, d3[:, 2, :]),  # output[p, r] = data[p, indices, r]
        (d2, i2, 0, np.stack([[d2[i2[a, b]] for b in range(s)] for a in range(r)])),
        (
            d2,
            i2,
            1,
            np.stack([[[d2[k, i2[a, b]] for b in range(s)] for a in range(r)] for k in range(p)]),
        ),
    ]
    for data, indices, axis, expected in rows:
        x = from_numpy(backend, data)
        out = gatherx.gather(x, from_numpy(backend, np.asarray(indices)), axis=axis)
        assert_same(out, expected, like=x)
