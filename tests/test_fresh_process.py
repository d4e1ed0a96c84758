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
# (3, 1, 4): 3 outer rows before dim 2; (66, 4) float64: 66 rows of dim-1 columns
VIEWED = {True: np.ascontiguousarray(DATA.T).reshape(3, 1, 4), False: np.tile(DATA.T, (22, 1))}
# 1-D data: 1000 values, 40000 (past ATen's grain size), 40000 into strided data (its copy)
FLAT_TILES = {"flat_many": 250, "flat_long": 10000, "flat_strided": 10000}
# every other column of (3, 1000, 16): columns on dim 2 that index_select reads where they lie
STRIDED = np.arange(48000.0).reshape(3, 1000, 16)
# an axis of length 1, its slice repeated; IDS made 0 or -1 (BAD keeps its 9)
ONE = np.arange(24000.0).reshape(3, 1, 8000)
ONE_IDS = lambda ids: np.where(ids == 9, 9, np.where(ids < 0, -1, 0))
# bfloat16 tables summed by ATen's rows: (4, 48000), large beside 4 indices (in place of the
# distinct sums), and (4, 9000), long rows of a small one (in place of the float32 table)
HALF_ROWS = {"grad_half_table": 16000, "grad_half_long": 3000}
# dim 1 behind 1024 outer rows of 512 bytes (float64) into 2 MiB: read as dim 2 of a view
SLICED = np.arange(1024 * 4 * 64.0).reshape(1024, 4, 64)

if framework == "numpy":
    import gatherx
    lists = mode == "lists"
    data = DATA
    if mode == "bfloat16":  # ml_dtypes', which the fast paths tell by its name
        import ml_dtypes
        data = DATA.astype(ml_dtypes.bfloat16)
    def run(ids):
        return gatherx.gather(data, ids.tolist() if lists else ids, axis=0)
    host = lambda x: np.asarray(x).astype(np.float64)
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
        if mode.endswith(("rows", "wide")):  # many indices and long rows
            d = torch.from_numpy(np.repeat(DATA, 200, axis=1) if "wide" in mode else DATA)
            ids = torch.from_numpy(np.tile(ids.ravel(), 250))
            if not mode.startswith("grad"):
                return call(d, ids)
            leaf = d.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        if mode.endswith("broadcast"):
            d, ids = torch.from_numpy(ONE.copy()), torch.from_numpy(ONE_IDS(ids))
            if not mode.startswith("grad"):
                return gatherx.gather(d, ids, axis=1)
            d.requires_grad_()
            gatherx.gather(d, ids, axis=1).sum().backward()
            return d.grad
        if mode.endswith("strided_columns"):
            d = torch.from_numpy(STRIDED.copy())[..., ::2]  # not contiguous, a leaf
            if not mode.startswith("grad"):
                return gatherx.gather(d, torch.from_numpy(ids), axis=2)
            d.requires_grad_()
            gatherx.gather(d, torch.from_numpy(ids), axis=2).sum().backward()
            return d.grad
        if mode.endswith("slices"):
            d = torch.from_numpy(SLICED.copy())
            if not mode.startswith("grad"):
                return gatherx.gather(d, torch.from_numpy(ids), axis=1)
            d.requires_grad_()
            gatherx.gather(d, torch.from_numpy(ids), axis=1).sum().backward()
            return d.grad
        if mode.endswith(("blocks", "columns")):  # a later dim's view; dim 1: torch.gather,
            blocks = mode.endswith("blocks")  # or at few indices the columns' view
            d = torch.from_numpy(VIEWED[blocks])
            axis = 2 if blocks else 1
            ids = torch.from_numpy(ids if "few" in mode else np.tile(ids.ravel(), 250))
            if not mode.startswith("grad"):
                return gatherx.gather(d, ids, axis=axis)
            leaf = d.clone().requires_grad_()
            gatherx.gather(leaf, ids, axis=axis).sum().backward()
            return leaf.grad
        if mode.endswith("sampled"):  # 2000 values, none negative: checked by aminmax
            ids = torch.from_numpy(np.tile(np.where(ids == 9, 9, ids % 4).ravel(), 500))
            if not mode.startswith("grad"):
                return call(data, ids)
            leaf = data.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        if mode == "neg_elements":  # a negative view where plain data reads rows as elements
            ids = torch.from_numpy(np.tile(np.where(ids == 9, 9, ids % 4).ravel(), 512))
            view = torch.ops.aten._neg_view(torch.from_numpy(DATA[:, :1].copy()))
            return call(view, ids).resolve_neg()
        if mode == "flat_memory":  # 2**20 values into 1 MiB of 1-D data: torch.take
            ids = torch.from_numpy(np.tile(ids.ravel() * 2**15, 2**18))
            return call(torch.arange(2.0**17), ids)
        if mode == "flat_short":  # a strided vector into a smaller output: read where it lies
            return call((torch.arange(8.0) / 2)[::2], torch.from_numpy(ids[0]))
        if mode == "grad_flat_long":  # 1-D data's gradient at 40000 values: scatter_add_
            leaf = torch.arange(4.0).requires_grad_()
            call(leaf, torch.from_numpy(np.tile(ids.ravel(), 10000))).sum().backward()
            return leaf.grad
        if mode.startswith("flat"):  # 1-D data: torch.take at the index as given
            ids = np.tile(ids.ravel(), FLAT_TILES.get(mode, 1))
            ids = ids if mode in FLAT_TILES else ids.reshape(2, 2)
            flat = (torch.arange(8.0) / 2)[::2] if mode == "flat_strided" else torch.arange(4.0)
            return call(flat, torch.from_numpy(ids))
        ids = torch.from_numpy(np.tile(ids, (10, 1)) if mode.endswith("tiled") else ids)
        if mode in ("eager", "tiled"):
            return call(data, ids)
        if mode == "grad_tiled":  # 40 values in 2 dims: their extremes read by aminmax
            leaf = data.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        if mode == "scalar":  # one value, negative when good: read as a Python int
            return call(data, ids[0, 1])
        if mode == "grad_eager":
            leaf = data.clone().requires_grad_()
            call(leaf, ids).sum().backward()
            return leaf.grad
        if mode in HALF_ROWS:  # bfloat16 rows of a table: ATen's row sums
            leaf = torch.from_numpy(np.repeat(DATA, HALF_ROWS[mode], axis=1)).bfloat16()
            call(leaf.requires_grad_(), ids).sum().backward()
            return leaf.grad.float()
        if mode == "compile":
            f = compiled.setdefault(mode, torch.compile(call, fullgraph=True))
            return f(data, ids)
        if mode == "compile_weight":  # a layer's weight: a Parameter at a plain-tensor index
            f = compiled.setdefault(mode, torch.compile(call, fullgraph=True))
            return f(torch.nn.Parameter(data), ids)
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
for n, step in enumerate(order):
    try:
        out.append(host(run(IDS if step == "good" else BAD)).tolist())
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    if not n and mode in ("compile", "compile_weight", "layer"):  # later calls: the first graph
        torch.compiler.set_stance("fail_on_recompile")
print(json.dumps(out))
"""

DATA = np.arange(12.0).reshape(4, 3)
IDS = np.array([[3, -1], [0, 2]])
HALF_ROWS = {"grad_half_table": 16000, "grad_half_long": 3000}  # as in SCRIPT


def _run(framework: str, mode: str, order: list[str]) -> list:
    # Forked from a parent that imported torch (see support.run_python); "eager" starts from
    # nothing, the control for the forked ones.
    warm = ("torch",) if framework == "torch" and mode != "eager" else ()
    done = run_python(SCRIPT, framework, mode, ",".join(order), warm=warm, PYTHONWARNINGS="ignore")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _expected(mode: str) -> np.ndarray:
    if mode.endswith("broadcast"):
        data = np.arange(24000.0).reshape(3, 1, 8000)
        ids = np.where(IDS < 0, -1, 0)
        if not mode.startswith("grad"):
            return np.take(data, ids, axis=1)
        want = np.zeros_like(data)
        np.add.at(want, (slice(None), ids), 1.0)
        return want
    if mode.endswith("strided_columns"):
        data = np.arange(48000.0).reshape(3, 1000, 16)[..., ::2]
        if not mode.startswith("grad"):
            return np.take(data, IDS, axis=2)
        want = np.zeros_like(data)
        np.add.at(want, (slice(None), slice(None), IDS), 1.0)
        return want
    if mode.endswith("slices"):
        data = np.arange(1024 * 4 * 64.0).reshape(1024, 4, 64)
        if not mode.startswith("grad"):
            return np.take(data, IDS, axis=1)
        want = np.zeros_like(data)
        np.add.at(want, (slice(None), IDS), 1.0)
        return want
    if mode.endswith(("blocks", "columns")):
        blocks = mode.endswith("blocks")
        data = np.ascontiguousarray(DATA.T).reshape(3, 1, 4) if blocks else np.tile(DATA.T, (22, 1))
        ids, axis = IDS if "few" in mode else np.tile(IDS.ravel(), 250), 2 if blocks else 1
        if not mode.startswith("grad"):
            return np.take(data, ids, axis=axis)
        want = np.zeros_like(data)
        np.add.at(want, (slice(None),) * axis + (ids,), 1.0)
        return want
    if mode == "neg_elements":
        return -np.take(DATA[:, :1], np.tile(IDS.ravel() % 4, 512), axis=0)
    if mode.endswith("sampled"):
        ids = np.tile(IDS.ravel() % 4, 500)
        if not mode.startswith("grad"):
            return np.take(DATA, ids, axis=0)
        want = np.zeros_like(DATA)
        np.add.at(want, ids, 1.0)
        return want
    if mode == "flat_memory":
        return np.take(np.arange(2.0**17), np.tile(IDS.ravel() * 2**15, 2**18))
    if mode == "flat_short":
        return np.take(np.arange(4.0), IDS[0])
    if mode == "grad_flat_long":
        want = np.zeros(4)
        np.add.at(want, np.tile(IDS.ravel(), 10000), 1.0)
        return want
    if mode.startswith("flat"):
        tiles = {"flat_many": 250, "flat_long": 10000, "flat_strided": 10000}
        return np.take(np.arange(4.0), np.tile(IDS.ravel(), tiles[mode]) if mode in tiles else IDS)
    data, ids = DATA, IDS
    if mode.endswith("tiled"):
        ids = np.tile(IDS, (10, 1))
    if mode.endswith(("rows", "wide")):
        data = np.repeat(DATA, 200, axis=1) if "wide" in mode else DATA
        ids = np.tile(IDS.ravel(), 250)
    if mode == "scalar":
        ids = ids[0, 1]
    if mode in HALF_ROWS:
        data = np.repeat(DATA, HALF_ROWS[mode], axis=1)
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
BLOCKS_OOB = ROWS_OOB.replace("axis 0", "axis 2")
COLUMNS_OOB = ROWS_OOB.replace("axis 0", "axis 1")
STRIDED_OOB = EAGER_OOB.replace("[-4,3] for axis 0 of size 4", "[-8,7] for axis 2 of size 8")
GRAPH_OOB = "gather: indices element out of data bounds: indices must be within the inclusive"


@pytest.mark.parametrize("mode", ["arrays", "lists", "bfloat16"])
@pytest.mark.parametrize("first", ["good", "bad"])
def test_numpy_first_call(mode, first):
    order = [first, "bad" if first == "good" else "good"] * 2
    _check("numpy", mode, order, EAGER_OOB)


TORCH_MODES = {
    "eager": EAGER_OOB,
    "scalar": EAGER_OOB.replace("(0, 1)", "()"),
    "grad_eager": EAGER_OOB,
    "grad_half_table": EAGER_OOB,
    "grad_half_long": EAGER_OOB,
    "compile": GRAPH_OOB,
    "compile_weight": GRAPH_OOB,
    "layer": GRAPH_OOB,
    "export": GRAPH_OOB,
    "vmap": "IndexError: gather: indices element out of data bounds, idx=9 must be within",
    "grad": EAGER_OOB,
    # many indices, short and long rows
    "rows": ROWS_OOB,
    "wide": ROWS_OOB,
    "grad_rows": ROWS_OOB,
    "grad_wide": ROWS_OOB,
    # an index of two dimensions and more than 16 values
    "tiled": EAGER_OOB,
    "grad_tiled": EAGER_OOB,
    # 1-D data, an index of two dimensions or of 1000 or 40000 values of both signs, into
    # contiguous data or a contiguous copy of strided data: torch.take
    "flat": EAGER_OOB,
    "flat_many": ROWS_OOB,
    "flat_long": ROWS_OOB,
    "flat_strided": ROWS_OOB,
    # a strided vector into a smaller output at 2 values: torch.take where it lies
    "flat_short": ROWS_OOB,
    # 1-D data's gradient at 40000 values: scatter_add_ on it
    "grad_flat_long": ROWS_OOB,
    # a negative view of (4, 1) at 2048 values: index_select, where plain data reads rows as
    # integer elements
    "neg_elements": ROWS_OOB,
    # 2000 values none of which is negative: their extremes read by aminmax, used as given
    "sampled": ROWS_OOB,
    "grad_sampled": ROWS_OOB,
    # 2**20 values into 1 MiB of 1-D data: torch.take at the index as given
    "flat_memory": ROWS_OOB.replace("idx=9", "idx=294912").replace(
        "[-4,3] for axis 0 of size 4", "[-131072,131071] for axis 0 of size 131072"
    ),
    # the layouts that pick ATen's faster loops: a view, torch.gather
    "blocks": BLOCKS_OOB,
    "columns": COLUMNS_OOB,
    "grad_blocks": BLOCKS_OOB,
    "grad_columns": COLUMNS_OOB,
    "few_columns": EAGER_OOB.replace("axis 0", "axis 1"),
    "slices": EAGER_OOB.replace("axis 0", "axis 1"),
    "grad_slices": EAGER_OOB.replace("axis 0", "axis 1"),
    "grad_few_columns": EAGER_OOB.replace("axis 0", "axis 1"),
    # non-contiguous columns on dim 2 at 4 indices (up to 8): index_select where they lie
    "strided_columns": STRIDED_OOB,
    "grad_strided_columns": STRIDED_OOB,
    # an axis of length 1: its one slice repeated, the index checked and never wrapped
    "broadcast": EAGER_OOB.replace("[-4,3] for axis 0 of size 4", "[-1,0] for axis 1 of size 1"),
    "grad_broadcast": EAGER_OOB.replace(
        "[-4,3] for axis 0 of size 4", "[-1,0] for axis 1 of size 1"
    ),
}


@pytest.mark.parametrize("mode", list(TORCH_MODES))
def test_torch_first_call(mode):
    need("torch")
    _check("torch", mode, ["good", "bad", "good", "bad"], TORCH_MODES[mode])


@pytest.mark.parametrize(
    "mode",
    [
        "eager",
        "scalar",
        "compile",
        "rows",
        "grad_wide",
        "blocks",
        "columns",
        "few_columns",
        "slices",
        "strided_columns",
        "broadcast",
        "tiled",
        "flat",
        "sampled",
        "flat_memory",
    ],
)
def test_torch_first_call_is_a_bad_one(mode):
    need("torch")
    _check("torch", mode, ["bad", "good", "bad", "good"], TORCH_MODES[mode])


def test_torch_first_call_traced():
    """A trace records the wrap: a graph traced in a fresh process serves negative indices."""
    need("torch")
    out = _run("torch", "trace", ["good", "good"])
    for got in out:
        np.testing.assert_array_equal(np.asarray(got), _expected("trace"))


# The first call of a process passes out=: it writes the result, and a bad first call reads
# (and leaves out) as a later one does.
OUT_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
framework, order, layout = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
import numpy as np
# small: few indices; scalar: one; short: many 32-byte rows (the rows twice over); rows: 400
# indices into 256-byte rows (checked and wrapped in NumPy's passes); flat: 400 into 1-D data
# (PyTorch's torch.take); hollow: few indices into rows of no element (an empty result, the
# index checked all the same)
rows, cols, n = {"small": (4, 3, 4), "short": (300, 8, 5000), "rows": (300, 64, 400),
                 "scalar": (4, 3, 2), "flat": (300, 1, 400), "hollow": (4, 0, 4)}[layout]
DATA = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
if layout == "flat":
    DATA = DATA.reshape(-1)
good = np.random.default_rng(0).integers(-rows, rows, n)
bad = good.copy()
bad[-2] = rows + 5
IDS = {"good": good, "bad": bad}
if layout in ("small", "hollow"):
    IDS = {"good": np.array([[3, -1], [0, 2]]), "bad": np.array([[0, 9], [1, 1]])}
if layout == "scalar":
    IDS = {"good": np.array(-1), "bad": np.array(9)}
import gatherx
shape = (*IDS["good"].shape, *DATA.shape[1:])
if framework == "torch":
    import torch
    data, out = torch.from_numpy(DATA), torch.full(shape, -7.0, dtype=torch.float64)
    ids = {k: torch.from_numpy(v) for k, v in IDS.items()}
    host = lambda t: t.numpy()
else:
    data, out, ids, host = DATA, np.full(shape, -7.0), IDS, np.asarray
result = []
for step in order:
    out[...] = -7.0
    try:
        got = gatherx.gather(data, ids[step], out=out)
        same = got is out and np.array_equal(host(out), np.take(DATA, IDS[step], axis=0))
        result.append(["ok", same, bool((host(out) == -7.0).all())])
    except Exception as exc:
        result.append([f"{type(exc).__name__}: {exc}", None, bool((host(out) == -7.0).all())])
print(json.dumps(result))
"""


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("first", ["good", "bad"])
@pytest.mark.parametrize("layout", ["small", "scalar", "short", "rows", "flat", "hollow"])
def test_first_call_with_out(framework, first, layout):
    if framework == "torch":
        need("torch")
    order = [first, "bad" if first == "good" else "good", first]
    warm = ("torch",) if framework == "torch" else ()
    done = run_python(
        OUT_SCRIPT, framework, ",".join(order), layout, warm=warm, PYTHONWARNINGS="ignore"
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    bad_value = 9 if layout in ("small", "scalar", "hollow") else 305
    errors = set()
    for step, (status, right, untouched) in zip(order, result, strict=True):
        if step == "good":  # np.take's values (an empty out holds none to change)
            assert (status, right, untouched) == ("ok", True, layout == "hollow")
        else:
            assert status.startswith(
                f"IndexError: gather: indices element out of data bounds, idx={bad_value}"
            )
            assert untouched  # nothing written
            errors.add(status)
    assert len(errors) == 1, errors


# A scalar index, gather_grad eagerly (on short rows too) and under torch.func with batched
# indices and one gradient, short rows gathered, and strided data at a 2-D index:
# each mode's first call in a fresh process, then good and bad calls in alternation.
SCALAR_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
mode, order = sys.argv[1], sys.argv[2].split(",")
import torch
import gatherx
data = torch.arange(12.0).reshape(4, 3)
compiled = {}
def run(good):
    if mode in ("vmap_grad", "jacrev_grad"):
        idx = torch.tensor([[0], [-1]] if good else [[0], [5]])
        if mode == "vmap_grad":
            f = lambda i: gatherx.gather_grad((5,), i, torch.ones(1))
        else:
            f = lambda i: torch.func.jacrev(
                lambda g: gatherx.gather_grad((5,), i, g))(torch.ones(1))[..., 0]
        return torch.func.vmap(f)(idx)
    if mode == "eager_grad":
        idx = torch.tensor([0, -1] if good else [0, 5])
        return gatherx.gather_grad((5,), idx, torch.ones(2))
    if mode == "rows_forward":  # rows of 2 behind 40 outer rows: torch.gather on a view
        idx = torch.tensor([-1, 0, 1, 2, 29] * 100)
        if not good:
            idx[-1] = 30
        return gatherx.gather(torch.arange(2400.0).reshape(40, 30, 2), idx, axis=1)
    if mode == "elements":  # rows of 8 bytes, each read as one int64 element
        idx = torch.tensor([-1, 0, 1, 2, 29] * 500)
        if not good:
            idx[-1] = 30
        return gatherx.gather(torch.arange(60.0).reshape(30, 2), idx)
    if mode == "rows_grad":  # short rows behind an outer axis: added on the (pre, n x row) view
        idx = torch.tensor([-1, 0, 1, 2, 3] * 26)
        if not good:
            idx[-1] = 5
        return gatherx.gather_grad((2, 5, 2), idx, torch.ones(2, 130, 2), axis=1)
    if mode == "strided_2d":  # non-contiguous data read where it lies, a 2-D index as given
        idx = torch.tensor([[-1], [0]] if good else [[-1], [4]])
        return gatherx.gather(data.t(), idx, axis=1)
    value = -1 if good else 3
    if mode == "python":
        return gatherx.gather(data, value, axis=1)
    index = torch.tensor(value)
    if mode == "eager":
        return gatherx.gather(data, index, axis=1)
    if mode == "grad":
        leaf = data.clone().requires_grad_()
        gatherx.gather(leaf, index, axis=1).sum().backward()
        return leaf.grad
    if mode == "compile":
        f = compiled.setdefault(mode, torch.compile(
            lambda d, i: gatherx.gather(d, i, axis=1), fullgraph=True))
        return f(data, index)
    if mode == "vmap":
        return torch.func.vmap(lambda i: gatherx.gather(data, i, axis=1))(index[None])[0]
    raise AssertionError(mode)
out = []
for step in order:
    try:
        out.append(run(step == "good").detach().numpy().tolist())
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
print(json.dumps(out))
"""

SCALAR_OOB = (
    "IndexError: gather: indices element out of data bounds, idx=3 at position () of indices "
    "must be within the inclusive range [-3,2] for axis 1 of size 3"
)
GRAD_WANT = np.zeros((4, 3))
GRAD_WANT[:, -1] = 1.0
SCALAR_MODES = {
    "eager": (DATA[:, -1], SCALAR_OOB),
    "python": (DATA[:, -1], SCALAR_OOB),
    "grad": (GRAD_WANT, SCALAR_OOB),
    "compile": (DATA[:, -1], GRAPH_OOB),
    "vmap": (DATA[:, -1], "IndexError: gather: indices element out of data bounds, idx=3 must"),
    "eager_grad": (
        np.array([1.0, 0, 0, 0, 1]),
        "IndexError: gather_grad: indices element out of data bounds, idx=5 at position (1,)",
    ),
    "rows_forward": (
        np.take(np.arange(2400.0).reshape(40, 30, 2), [-1, 0, 1, 2, 29] * 100, axis=1),
        "IndexError: gather: indices element out of data bounds, idx=30 at position (499,)",
    ),
    "elements": (
        np.take(np.arange(60.0).reshape(30, 2), [-1, 0, 1, 2, 29] * 500, axis=0),
        "IndexError: gather: indices element out of data bounds, idx=30 at position (2499,)",
    ),
    "rows_grad": (
        np.full((2, 5, 2), 26.0),
        "IndexError: gather_grad: indices element out of data bounds, idx=5 at position (129,)",
    ),
    "strided_2d": (
        np.take(DATA.T, [[-1], [0]], axis=1),
        "IndexError: gather: indices element out of data bounds, idx=4 at position (1, 0)",
    ),
    "vmap_grad": (np.eye(5)[[0, 4]], "IndexError: gather_grad: indices element out of data"),
    "jacrev_grad": (np.eye(5)[[0, 4]], "IndexError: gather_grad: indices element out of data"),
}


@pytest.mark.parametrize("first", ["good", "bad"])
@pytest.mark.parametrize("mode", list(SCALAR_MODES))
def test_torch_scalar_and_vmapped_gather_grad_first_call(mode, first):
    need("torch")
    order = [first, "bad" if first == "good" else "good"] * 2
    done = run_python(
        SCALAR_SCRIPT, mode, ",".join(order), warm=("torch",), PYTHONWARNINGS="ignore"
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    want, bad_text = SCALAR_MODES[mode]
    goods = [o for o, s in zip(out, order, strict=True) if s == "good"]
    bads = [o for o, s in zip(out, order, strict=True) if s == "bad"]
    for got in goods:
        np.testing.assert_array_equal(np.asarray(got), want)
    assert all(isinstance(b, str) for b in bads), bads
    assert len(set(bads)) == 1, bads  # the first error reads as every later one
    assert bad_text in bads[0], bads[0]


# NumPy's first call at a scalar index on long rows (a copy of the slice), then a bad one.
NUMPY_SCALAR_SCRIPT = r"""
import json
import numpy as np
import gatherx
data = np.arange(4 * 3 * 1024, dtype=np.float32).reshape(4, 3, 1024)
result = []
for value in (-1, 3, 2):
    try:
        got = gatherx.gather(data, np.array(value), axis=1)
        right = np.array_equal(got, np.take(data, value % 3, axis=1))
        result.append(["ok", right and not np.shares_memory(got, data)])
    except IndexError as exc:
        result.append([str(exc), None])
print(json.dumps(result))
"""


def test_numpy_first_call_at_a_scalar_index_on_long_rows():
    done = run_python(NUMPY_SCALAR_SCRIPT)
    first, bad, again = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == again == ["ok", True]
    assert bad[0].startswith("gather: indices element out of data bounds, idx=3 at position ()")


COMPLEX_SCALAR_SCRIPT = r"""
import json
import torch
import gatherx
out = []
for index in (torch.tensor(-1), 1, torch.tensor(0)) * 2:
    data = torch.arange(6.0).reshape(3, 2).to(torch.complex64).requires_grad_()
    got = gatherx.gather(data * (1 + 1j), index, axis=1)
    (grad,) = torch.autograd.grad(got, data, torch.ones(3, dtype=torch.complex64))
    out.append([type(got.grad_fn).__name__, got.detach().real.tolist(), grad.real.tolist(),
                grad.imag.tolist()])
print(json.dumps(out))
"""


def test_torch_first_call_complex_scalar_with_grad():
    """Complex data that requires grad at a scalar index: gatherx's Function from the first
    call on (torch's select_copy has no complex backward)."""
    need("torch")
    done = run_python(COMPLEX_SCALAR_SCRIPT, warm=("torch",), PYTHONWARNINGS="ignore")
    calls = json.loads(done.stdout.strip().splitlines()[-1])
    data = np.arange(6.0).reshape(3, 2)
    for (name, values, real, imag), index in zip(calls, [-1, 1, 0] * 2, strict=True):
        column = index % 2
        assert name == "GatherEagerBackward"  # the same Function on the first call as later
        np.testing.assert_array_equal(values, data[:, column])
        want = np.zeros((3, 2))
        want[:, column] = 1.0  # d(x (1+i))/dx conjugated by torch: 1 - i, real part 1
        np.testing.assert_array_equal(real, want)
        np.testing.assert_array_equal(imag, -want)
