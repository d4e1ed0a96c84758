"""Shared test helpers: the Backend enum, framework requirements and SciPy-style parity asserts."""

from __future__ import annotations

import enum
import importlib
import math
import os
import subprocess
import sys
from typing import Any

import forked
import numpy as np
import pytest


class Backend(enum.Enum):
    """Array libraries the ``xp`` fixture runs on; value = module to import."""

    NUMPY = "numpy"
    TORCH = "torch"
    JAX = "jax"
    ARRAY_API_STRICT = "array_api_strict"

    @property
    def label(self) -> str:
        return self.value.replace("_", "-")


def required() -> set[str]:
    """Frameworks this run must have (``GATHERX_REQUIRE=torch,jax``): missing ones fail."""
    return {x.strip() for x in os.environ.get("GATHERX_REQUIRE", "").split(",") if x.strip()}


def need(module: str) -> Any:
    """Import ``module``; skip when it is not installed, unless this run requires it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if module in required() or module.partition(".")[0] in required():
            pytest.fail(f"{module} is required in this run (GATHERX_REQUIRE) but missing: {exc}")
        pytest.skip(f"{module} is not installed", allow_module_level=True)


def run_python(
    code: str, *args: str, warm: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` in a fresh process that imports this checkout's gatherx, with
    ``env`` added to this process's environment; fails the test if it exits non-zero.

    ``warm``: frameworks the script imports before gatherx; where ``os.fork`` exists the run is
    a child forked from a parent that imported them and nothing else (see ``forked``)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [root, os.environ.get("PYTHONPATH", "")]
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **env}
    if warm and hasattr(os, "fork"):
        done = forked.run(code, args, warm, full, timeout=300)
    else:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True, text=True, timeout=300, env=full, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def namespace(backend: Backend) -> Any:
    """The user-facing module for ``backend``: numpy, torch, jax.numpy, array_api_strict."""
    if backend is Backend.JAX:
        need("jax")
        return need("jax.numpy")
    return need(backend.value)


def to_numpy(x: Any) -> np.ndarray:
    """A host NumPy copy of an array from any backend (bfloat16 kept via ml_dtypes)."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch

        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            import ml_dtypes

            return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if x.dtype in (torch.uint16, torch.uint32, torch.uint64):
            signed = {
                torch.uint16: torch.int16,
                torch.uint32: torch.int32,
                torch.uint64: torch.int64,
            }
            return x.view(signed[x.dtype]).numpy().view(str(x.dtype).replace("torch.", ""))
        return x.numpy()
    if mod.startswith("array_api_strict"):
        return np.asarray(x._array)
    return np.asarray(x)


def framework_name(x: Any) -> str:
    return type(x).__module__.partition(".")[0].replace("jaxlib", "jax")


def assert_same(
    actual: Any,
    expected: Any,
    *,
    like: Any = None,
    exact: bool = True,
    rtol: float = 1e-6,
    atol: float = 0.0,
) -> None:
    """Check framework (namespace), shape, dtype and device of ``actual`` before its values.

    ``expected`` is a NumPy oracle; ``like`` is an array whose framework and device the result
    must share (default: no framework/device check).
    """
    if like is not None:
        assert framework_name(actual) == framework_name(like), (
            f"namespace: got {type(actual)}, expected that of {type(like)}"
        )
        dev_a, dev_l = getattr(actual, "device", None), getattr(like, "device", None)
        if not callable(dev_a):
            assert str(dev_a) == str(dev_l), f"device: {dev_a} != {dev_l}"
    got = to_numpy(actual)
    assert tuple(got.shape) == tuple(expected.shape), f"shape: {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype: {got.dtype} != {expected.dtype}"
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def from_numpy(backend: Backend, arr: np.ndarray) -> Any:
    """``arr`` as an array of ``backend`` (bfloat16 and unsigned types included)."""
    if backend is Backend.NUMPY:
        return arr
    if backend is Backend.TORCH:
        torch = need("torch")
        if arr.dtype.name == "bfloat16":
            return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(np.array(arr))
    if backend is Backend.JAX:
        jnp = namespace(backend)
        return jnp.asarray(arr)
    xps = need("array_api_strict")
    return xps.asarray(arr)


def numpy_max_rank() -> int:
    """The most dimensions this NumPy's arrays have, asked of NumPy itself."""
    rank = 1
    while rank < 256:
        try:
            np.empty((1,) * (rank + 1))
        except ValueError:
            return rank
        rank += 1
    raise AssertionError("no dimension limit found")


def jax_x64() -> bool:
    import jax

    return bool(jax.config.jax_enable_x64)


def supports_dtype(backend: Backend, name: str) -> str | None:
    """None if ``backend`` can hold dtype ``name``, else why not (the reason to skip)."""
    if name == "string" and backend is not Backend.NUMPY:
        return f"{backend.label} has no string arrays"
    if backend is Backend.ARRAY_API_STRICT and name in ("float16", "bfloat16", "string"):
        return f"array-api-strict has no {name}"
    if backend is Backend.JAX and name in ("int64", "uint64", "float64", "complex128"):
        need("jax")
        if not jax_x64():
            return f"JAX holds {name} only with jax_enable_x64 (covered by the x64 run)"
    return None


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        return np.dtype(need("ml_dtypes").bfloat16)
    if name == "string":
        return np.dtype("U7")
    return np.dtype(name)


def random_data(rng: np.random.Generator, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Distinct-ish random values of dtype ``name`` (so a wrong slice cannot pass by luck)."""
    dtype = numpy_dtype(name)
    size = int(np.prod(shape))
    if name == "string":
        return np.array([f"s{v}" for v in rng.integers(0, 10**5, size)], dtype=dtype).reshape(shape)
    if name == "bool":
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    if name.startswith("complex"):
        return (
            (rng.standard_normal(size) + 1j * rng.standard_normal(size))
            .astype(dtype)
            .reshape(shape)
        )
    if name.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return (
            rng.integers(max(info.min, -1000), min(info.max, 1000), size)
            .astype(dtype)
            .reshape(shape)
        )
    return rng.standard_normal(size).astype(np.float32).astype(dtype).reshape(shape)


def grads_at_the_rank_limit(hold: Any, limit: int) -> Any:
    """(gather_grad of ``hold``'s arrays, its oracle) of results of ``limit`` dimensions, the
    axis first, inside and last, and of a gradient of ``limit`` dimensions at an index of two:
    NumPy's ``add.at`` crashes the interpreter past 32, so the oracle adds slot by slot."""
    import gatherx

    for axis, k in ((0, 1), (limit // 2, 1), (limit - 1, 1), (limit // 2, 2)):
        shape = [1] * (limit + 1 - k)
        shape[axis] = 3
        index = np.array([2, -1, 0, 1, 2]) if k == 1 else np.array([[2, -1], [0, 2]])
        grad_shape = (*shape[:axis], *index.shape, *shape[axis + 1 :])
        grad = np.arange(1.0, 1.0 + math.prod(grad_shape)).reshape(grad_shape)
        want = np.zeros(shape)
        rows = grad.reshape(index.size)
        for at, value in zip(index.reshape(-1) % 3, rows, strict=True):
            want[(0,) * axis + (at,)] += value
        got = hold(gatherx.gather_grad(tuple(shape), index, hold(grad), axis=axis))
        yield np.asarray(got), want
