"""``import gatherx`` stays light; the ``gatherx`` command checks, explains and fails cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import need

from gatherx.cli import explain, installed_backends


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)


def test_import_loads_no_framework():
    code = ("import sys, gatherx, gatherx.cli; "
            "print(sorted(m for m in ('torch', 'jax', 'jaxlib', 'dask', 'onnx', 'array_api_strict')"
            " if m in sys.modules))")  # fmt: skip
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_numpy_gather_loads_no_framework():
    code = ("import sys, numpy as np, gatherx; gatherx.gather(np.ones((3, 2)), [0, -1]); "
            "gatherx.gather_grad((3, 2), [0], np.ones((1, 2))); "
            "print([m for m in ('torch', 'jax') if m in sys.modules])")  # fmt: skip
    result = run("-c", code)
    assert result.stdout.strip() == "[]", result.stderr


def test_check_passes_on_installed_backends():
    need("onnx")
    result = run("-m", "gatherx", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "4 official ONNX Gather cases" in lines[0]
    for backend in installed_backends():
        row = next(line for line in lines if line.startswith(backend + " "))
        assert "8/8" in row, row


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--backends", "nope"], "unknown backend(s) nope"),
        (["explain", "--data-shape", "5,x", "--indices-shape", "2"], "invalid shape '5,x'"),
        (["explain", "--data-shape", "5,4", "--indices-shape", "2", "--axis", "2"], "axis 2"),
        (["explain", "--data-shape", "", "--indices-shape", "2"], "rank >= 1"),
        (["explain", "--indices-shape", "2"], "required: --data-shape"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_wrong_arguments_give_one_line(args, message):
    result = run("-m", "gatherx", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_explain_matches_spec_table():
    """The rows of Gather-13's table, with P, Q = 5, 4 and R, S = 2, 3."""
    rows = [
        ((5, 4), (), 0, "output shape: (4,)", "output[j0] = data[indices, j0]"),
        ((5, 4, 6), (), 1, "output shape: (5, 6)", "output[j0, j1] = data[j0, indices, j1]"),
        ((5, 4), (2, 3), 0, "output shape: (2, 3, 4)",
         "output[i0, i1, j0] = data[indices[i0, i1], j0]"),
        ((5, 4), (2, 3), 1, "output shape: (5, 2, 3)",
         "output[j0, i0, i1] = data[j0, indices[i0, i1]]"),
    ]  # fmt: skip
    for data_shape, indices_shape, axis, shape_line, equation in rows:
        lines = explain(data_shape, indices_shape, axis).splitlines()
        assert shape_line in lines
        assert equation in lines


def test_explain_command():
    result = run("-m", "gatherx", "explain", "--data-shape", "5,4", "--indices-shape", "2,2")
    assert result.returncode == 0
    assert "output shape: (2, 2, 4)" in result.stdout
    assert "valid indices: [-5, 4] (opset >= 11), [0, 4] (opset 1-10)" in result.stdout
