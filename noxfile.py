"""nox sessions: tests per backend, cross-backend parity, lint, docs, notebooks, distributed."""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = str(ROOT / "constraints.txt")
PYTHON = "3.11"  # torch's CPU wheel on disk is for CPython 3.11

nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = False

# What each backend's test session installs beyond `.[test]`.
BACKEND_DEPS = {
    "numpy": [],
    "torch": ["torch"],
    "jax": ["jax"],
    "array_api_strict": ["array-api-strict"],
}


def install(session: nox.Session, *args: str) -> None:
    """pip install under constraints.txt, which pins torch to the CPU wheel on disk."""
    session.install("-c", CONSTRAINTS, *args, env={"PIP_CONSTRAINT": CONSTRAINTS})


def pytest(session: nox.Session, *args: str, require: str, **env: str) -> None:
    session.run(
        "python", "-m", "pytest", *args, *session.posargs,
        env={"GATHERX_REQUIRE": require, **env},
    )  # fmt: skip


@nox.session(python=PYTHON)
@nox.parametrize("backend", list(BACKEND_DEPS))
def tests(session: nox.Session, backend: str) -> None:
    """The suite on one backend, with only what that backend needs installed."""
    install(session, "-e", ".[test]", *BACKEND_DEPS[backend])
    args = ["-m", "not parity", f"--backends={backend}", "-p", "no:cacheprovider"]
    if backend == "jax":
        # 64-bit types exist in JAX only with jax_enable_x64: run both modes.
        pytest(session, *args, require="jax", JAX_ENABLE_X64="0")
        pytest(session, *args, require="jax", JAX_ENABLE_X64="1")
    else:
        pytest(session, *args, require=backend)


@nox.session(python=PYTHON)
def parity(session: nox.Session) -> None:
    """Every backend against every other, the ONNX cases and onnxruntime, in one environment."""
    install(session, "-e", ".[test]", "torch", "jax", "onnxruntime", "array-api-strict", "dask")
    pytest(session, "-m", "parity", "-p", "no:cacheprovider",
           require="torch,jax,onnx,onnxruntime,array_api_strict")  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy on the package."""
    install(session, "ruff", "mypy", "numpy", "array-api-compat", "torch", "jax")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "gatherx")


nox.options.sessions = ["tests", "parity", "lint"]
