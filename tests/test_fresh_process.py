"""The first gatherx call in a fresh process behaves and reads exactly like every later one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import need, run_python

# Each run prints, as JSON, the outcome of calls made in ``order`` ("good" or "bad"); the
# first of them is the process's first gatherx call.
SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
framework, mode, order = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
import numpy as np
DATA = np.arange(12.0).reshape(4, 3)
IDS = np.array([[3, -1], [0, 2]])
BAD = np.array([[0, 9], [1, 1]])

if framework == "numpy":
    import gatherx
    lists = mode == "lists"
    def run(ids):
        return gatherx.gather(DATA, ids.tolist() if lists else ids, axis=0)
    host = np.asarray
else:
    import torch
    import gatherx
    from gatherx.torch import Gather
    data = torch.from_numpy(DATA)
    class Mod(torch.nn.Module):
        def forward(self, d, i):
            return gatherx.gather(d, i, axis=0)
    def call(d, i):
        return gatherx.gather(d, i, axis=0)
    compiled = {}
    def run(ids):
        if mode.endswith(("rows", "wide")):  # large enough for index_select's attempts
            d = torch.from_numpy(np.repeat(DATA, 200, axis=1) if "wide" in mode else DATA)
            ids = torch.from_numpy(np.tile(ids.ravel(), 250))
            if not mode.startswith("grad"):
                return call(d, ids)
            leaf = d.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        ids = torch.from_numpy(ids)
        if mode == "eager":
            return call(data, ids)
        if mode == "grad_eager":
            leaf = data.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        if mode == "compile":
            f = compiled.setdefault(mode, torch.compile(call, fullgraph=True))
            return f(data, ids)
        if mode == "layer":
            f = compiled.setdefault(mode, torch.compile(Gather(axis=0)))
            return f(data, ids)
        if mode == "export":
            f = compiled.setdefault(mode, torch.export.export(Mod(), (data, ids)).module())
            return f(data, ids)
        if mode == "vmap":
            return torch.func.vmap(call, in_dims=(None, 0))(data, ids)
        if mode == "grad":
            return torch.func.grad(lambda d: call(d, ids).sum())(data)
        if mode == "trace":
            f = compiled.setdefault(mode, torch.jit.trace(Mod(), (data, ids)))
            return f(data, ids)
        raise AssertionError(mode)
    host = lambda t: t.detach().numpy()

out = []
for step in order:
    try:
        out.append(host(run(IDS if step == "good" else BAD)).tolist())
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
print(json.dumps(out))
"""

DATA = np.arange(12.0).reshape(4, 3)
IDS = np.array([[3, -1], [0, 2]])


def _run(framework: str, mode: str, order: list[str]) -> list:
    done = run_python(SCRIPT, framework, mode, ",".join(order), PYTHONWARNINGS="ignore")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _expected(mode: str) -> np.ndarray:
    data, ids = DATA, IDS
    if mode.endswith(("rows", "wide")):
        data = np.repeat(DATA, 200, axis=1) if "wide" in mode else DATA
        ids = np.tile(IDS.ravel(), 250)
    if mode.startswith("grad"):
        want = np.zeros_like(data)
        np.add.at(want, ids, 1.0)
        return want
    return np.take(data, ids, axis=0)


def _check(framework: str, mode: str, order: list[str], bad_text: str) -> None:
    out = _run(framework, mode, order)
    goods = [o for o, s in zip(out, order, strict=True) if s == "good"]
    bads = [o for o, s in zip(out, order, strict=True) if s == "bad"]
    for got in goods:
        np.testing.assert_array_equal(np.asarray(got), _expected(mode))
    assert all(isinstance(b, str) for b in bads), bads
    assert len(set(bads)) == 1, bads  # the first error reads as every later one
    assert bad_text in bads[0], bads[0]


EAGER_OOB = (
    "IndexError: gather: indices element out of data bounds, idx=9 at position (0, 1) of "
    "indices must be within the inclusive range [-4,3] for axis 0 of size 4"
)
ROWS_OOB = (
    "IndexError: gather: indices element out of data bounds, idx=9 at position (1,) of "
    "indices must be within the inclusive range [-4,3] for axis 0 of size 4"
)
GRAPH_OOB = "gather: indices element out of data bounds: indices must be within the inclusive"


@pytest.mark.parametrize("mode", ["arrays", "lists"])
@pytest.mark.parametrize("first", ["good", "bad"])
def test_numpy_first_call(mode, first):
    order = [first, "bad" if first == "good" else "good"] * 2
    _check("numpy", mode, order, EAGER_OOB)


TORCH_MODES = {
    "eager": EAGER_OOB,
    "grad_eager": EAGER_OOB,
    "compile": GRAPH_OOB,
    "layer": GRAPH_OOB,
    "export": GRAPH_OOB,
    "vmap": "IndexError: gather: indices element out of data bounds, idx=9 must be within",
    "grad": EAGER_OOB,
    # index_select's attempts on axis 0 (the doubled rows, the branch-free wrap), then the read
    "rows": ROWS_OOB,
    "wide": ROWS_OOB,
    "grad_rows": ROWS_OOB,
    "grad_wide": ROWS_OOB,
}


@pytest.mark.parametrize("mode", list(TORCH_MODES))
def test_torch_first_call(mode):
    need("torch")
    _check("torch", mode, ["good", "bad", "good", "bad"], TORCH_MODES[mode])


@pytest.mark.parametrize("mode", ["eager", "compile", "rows", "grad_wide"])
def test_torch_first_call_is_a_bad_one(mode):
    need("torch")
    _check("torch", mode, ["bad", "good", "bad", "good"], TORCH_MODES[mode])


def test_torch_first_call_traced():
    """A trace records the wrap: a graph traced in a fresh process serves negative indices."""
    need("torch")
    out = _run("torch", "trace", ["good", "good"])
    for got in out:
        np.testing.assert_array_equal(np.asarray(got), _expected("trace"))
