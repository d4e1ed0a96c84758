"""The dtype matrix: every ONNX data type a backend can hold, gathered exactly, dtype kept."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import Backend, assert_same, from_numpy, need, random_data, supports_dtype

import gatherx

# Gather-13's T, as ../shared/spec/Gather-13.rst lists it.
DTYPES = sorted(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "string"]
)  # fmt: skip


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_dtype_matrix(backend, xp, name, index_dtype):
    reason = supports_dtype(backend, name)
    if reason:
        pytest.skip(reason)
    rng = np.random.default_rng(1)
    host = random_data(rng, (4, 3, 2), name)
    idx = np.array([[3, -1], [0, 2]], dtype=index_dtype)
    for axis in (0, 1, -1):
        size = host.shape[axis]
        ids = np.where(idx >= size, size - 1, np.where(idx < -size, -size, idx)).astype(index_dtype)
        data = from_numpy(backend, host)
        out = gatherx.gather(data, from_numpy(backend, ids), axis=axis)
        assert_same(out, np.take(host, ids, axis=axis), like=data)


@pytest.mark.parametrize("opset", [1, 10, 11, 12])
def test_bfloat16_needs_opset_13(backend, xp, opset):
    reason = supports_dtype(backend, "bfloat16")
    if reason:
        pytest.skip(reason)
    data = from_numpy(backend, random_data(np.random.default_rng(0), (3, 2), "bfloat16"))
    with pytest.raises(TypeError, match="bfloat16 data needs opset >= 13"):
        gatherx.gather(data, [0], opset=opset)


def test_numpy_string_kinds():
    """Strings as fixed-width unicode, bytes and the object arrays of the ONNX reference."""
    for host in (
        np.array([["a", "bb"], ["ccc", "d"]]),
        np.array([[b"a", b"bb"], [b"ccc", b"d"]]),
        np.array([["a", "bb"], ["ccc", "d"]], dtype=object),
    ):
        for axis in (0, 1):
            out = gatherx.gather(host, [1, 0, -1], axis=axis)
            expected = np.take(host, [1, 0, -1], axis=axis)
            assert out.dtype == host.dtype
            np.testing.assert_array_equal(out, expected)


def non_onnx_dtypes(backend: Backend):
    if backend is Backend.NUMPY:
        return [np.zeros(3, np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else None,
                np.zeros(3, "datetime64[s]"), np.zeros(3, "timedelta64[s]"),
                np.zeros(3, need("ml_dtypes").float8_e4m3fn)]  # fmt: skip
    if backend is Backend.TORCH:
        torch = need("torch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            chalf = torch.zeros(3, dtype=torch.complex32)
        return [torch.zeros(3, dtype=torch.float8_e4m3fn), chalf]
    if backend is Backend.JAX:
        jnp = need("jax.numpy")
        return [jnp.zeros(3, jnp.float8_e4m3fn)]
    raise AssertionError(backend)


# array-api-strict holds only dtypes that are ONNX types, so it has nothing to reject.
@pytest.mark.parametrize("lib", [Backend.NUMPY, Backend.TORCH, Backend.JAX], ids=lambda b: b.label)
def test_non_onnx_dtypes_are_rejected(lib):
    cases = [d for d in non_onnx_dtypes(lib) if d is not None]
    assert cases
    gather_1 = "bool, complex128, complex64, float16, float32, float64, int16, int32, int64, " \
        "int8, string, uint16, uint32, uint64, uint8"  # fmt: skip
    for data in cases:
        with pytest.raises(TypeError, match="not an ONNX Gather type; allowed: bfloat16, bool"):
            gatherx.gather(data, [0])
        for opset in (1, 11, 12):  # the types of the opset asked for: no bfloat16 before 13
            with pytest.raises(TypeError, match=f"allowed: {gather_1}$"):
                gatherx.gather(data, [0], opset=opset)


def test_dtype_names_of_any_object_and_a_bounded_store(monkeypatch):
    """A dtype's name is read from its text where it is no NumPy dtype (the last dotted part,
    NumPy's ``dtype('...')`` wrapper removed); an unhashable dtype is named but not stored,
    and once the store holds 1024 names a new one is named but not added."""
    from gatherx import _rules

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __str__(self) -> str:
            return "somelib.float32"

    assert _rules.dtype_name(Unhashable()) == "float32"
    names = {(str, k): "x" for k in range(1024)}
    monkeypatch.setattr(_rules, "_NAMES", names)
    assert _rules.dtype_name("mylib.int64") == "int64"
    assert _rules.dtype_name("dtype('uint8')") == "uint8"
    assert len(names) == 1024
    assert (str, "mylib.int64") not in names
    store: dict = {}
    monkeypatch.setattr(_rules, "_NAMES", store)
    assert _rules.dtype_name("mylib.int64") == "int64"
    assert store == {(str, "mylib.int64"): "int64"}
