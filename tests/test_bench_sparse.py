"""``gatherx bench --sparse``: PyTorch's sparse gradients against ``F.embedding(sparse=True)``
and the dense gradient, verified, timed and saved; the goals of ``benchmarks/goals.py`` on its
JSON; the backward memory of ``benchmarks/memory.py --sparse``. Small tables only."""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest
from support import need, run_python

from gatherx.bench import Case, Load
from gatherx.bench.sparse import (
    FORWARD_BACKWARD,
    LABELS,
    ROLES,
    STEP,
    Timing,
    backward_formulations,
    make_lookup,
    step_formulations,
    verify_gradients,
    verify_steps,
)
from gatherx.cli import main

torch = need("torch")

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    """``benchmarks/<name>.py`` as a module (``benchmarks/`` is no package)."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _oracle(rows: int, wrapped: np.ndarray, columns: int) -> np.ndarray:
    """The gradient of ``out.sum()`` on the table: one per gathered element, summed."""
    want = np.zeros((rows, columns), np.float32)
    np.add.at(want, wrapped.reshape(-1), 1.0)
    return want


# ---------------------------------------------------------------------- the formulations


def test_the_three_gradients_agree_with_an_oracle():
    x = make_lookup((50, 6), (3, 7), "float32", "cpu", seed=3)
    ids = x.ids.numpy()
    assert (ids < 0).any()  # gatherx gets negative ids, the native their wrapped values
    assert ((x.wrapped.numpy() >= 0) & (x.wrapped.numpy() < 50)).all()
    np.testing.assert_array_equal(x.wrapped.numpy(), ids % 50)
    want = _oracle(50, ids % 50, 6)
    grads = {role: fn() for role, fn in backward_formulations(x).items()}
    assert grads["gatherx"].layout == grads["native"].layout == torch.sparse_coo
    assert grads["dense"].layout == torch.strided
    for grad in grads.values():
        np.testing.assert_array_equal(grad.to_dense().numpy(), want)
    gx, native = grads["gatherx"].coalesce(), grads["native"].coalesce()
    assert torch.equal(gx.indices(), native.indices())
    assert torch.equal(gx.values(), native.values())
    verify_gradients(backward_formulations(x), x, "small")


def test_one_optimizer_step_moves_the_gathered_rows_alike():
    x = make_lookup((40, 5), (30,), "float32", "cpu", seed=1)
    start = x.table.detach().clone().numpy()
    after = {role: fn().detach().numpy() for role, fn in step_formulations(x).items()}
    np.testing.assert_array_equal(after["gatherx"], after["native"])
    touched = np.zeros(40, bool)
    touched[x.wrapped.numpy()] = True
    # Adam's first step moves every element of a positive gradient by lr (1e-3), down
    for role in ROLES:
        np.testing.assert_allclose(after[role][touched], start[touched] - 1e-3, atol=1e-6)
        np.testing.assert_array_equal(after[role][~touched], start[~touched])
    verify_steps(step_formulations(x), x, "small")


def test_verify_rejects_a_wrong_gradient_and_a_wrong_step():
    x = make_lookup((30, 4), (12,), "float32", "cpu")
    fns = backward_formulations(x)
    right = fns["native"]
    fns["native"] = lambda: right() * 2
    with pytest.raises(AssertionError, match=r"F.embedding\(sparse=True\) on t computes a wrong"):
        verify_gradients(fns, x, "t")
    fns = backward_formulations(x)
    dense = fns["dense"]
    fns["gatherx"] = dense  # right values, wrong layout
    with pytest.raises(AssertionError, match="sparse_grad=True on t gives a gradient of layout"):
        verify_gradients(fns, x, "t")
    steps = step_formulations(x)
    twice = steps["gatherx"]
    steps["gatherx"] = lambda: (twice(), twice())[1]
    with pytest.raises(AssertionError, match="updates the table unlike the native"):
        verify_steps(steps, x, "t")


# ------------------------------------------------------------------------------- the run


def test_sparse_run_writes_tables_json_and_plot(tmp_path, capsys):
    need("matplotlib")
    path, png = tmp_path / "sparse.json", tmp_path / "sweep.png"
    specs = ["data=1000x16,index=64", "data=300x8,index=4x8,axis=-2,dtype=float64"]
    argv = ["bench", "--sparse", "--quick", "--sparse-rows", "1000,2000"]
    argv += [a for spec in specs for a in ("--case-spec", spec)]
    assert main([*argv, "--json", str(path), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    payload = json.loads(path.read_text())
    assert payload["kind"] == "sparse"
    assert {"environment", "load", "repeats", "clock", "cases", "specs", "rows", "sweep"} <= set(
        payload
    )
    assert list(payload["cases"]) == specs
    rows = payload["rows"]
    assert [(r["case"], r["task"]) for r in rows] == [
        (s, t) for s in specs for t in (FORWARD_BACKWARD, STEP)
    ]
    sweep = payload["sweep"]
    assert (sweep["columns"], sweep["ids"]) == (64, 4096)
    points = sweep["points"]
    assert [p["data_shape"] for p in points] == [[1000, 64], [2000, 64]]
    assert [p["table_bytes"] for p in points] == [1000 * 64 * 4, 2000 * 64 * 4]
    for r in [*rows, *points]:
        assert r["labels"] == LABELS[r["task"]]
        assert set(r["seconds"]) == set(r["rounds"]) == set(ROLES)
        for role in ROLES:
            assert len(r["rounds"][role]) == r["repeats"] == payload["repeats"] == 2
            assert r["seconds"][role] == statistics.median(r["rounds"][role]) > 0
        pairs = zip(r["rounds"]["gatherx"], r["rounds"]["native"], strict=True)
        assert r["ratio"] == pytest.approx(statistics.median(a / b for a, b in pairs))
        pairs = zip(r["rounds"]["dense"], r["rounds"]["gatherx"], strict=True)
        assert r["dense_ratio"] == pytest.approx(statistics.median(a / b for a, b in pairs))
    assert "| case | task | gatherx sparse | native sparse | dense |" in text
    assert "| rows | table | rounds |" in text
    assert "| 2000 | 0.5 MiB | 2 |" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot saved to {png}" in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--sparse-rows", "1000"], "--sparse-rows sets the table sizes of --sparse"),
        (["--sparse", "--case-spec", "data=50x4,index=3,axis=1"], "gathered on axis 0"),
        (["--sparse", "--case-spec", "data=5x4x3,index=3"], "2-D float32 or float64"),
        (["--sparse", "--case-spec", "data=50x4,index=3,dtype=int32"], "not \\(50, 4\\)"),
        (["--sparse", "--sweep", "3"], "drop --sweep and --seed"),
        (["--sparse", "--backends", "numpy"], "PyTorch alone"),
        (["--sparse", "--cases", "cols"], "unknown case\\(s\\) cols; known: table, embed"),
        (["--sparse", "--sparse-rows", "10,0"], "table rows >= 1"),
        (["--sparse", "--sparse-rows", "ten"], "table rows >= 1"),
        (["--sparse", "--sparse-rows", "none", "--plot", "x.png"], "--sparse-rows none"),
    ],
)
def test_sparse_options_refused_before_any_work(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gatherx bench: error: ")
    assert re.search(says, err), err


def test_sparse_bench_imports_torch_only_when_run():
    run_python(
        "import sys, gatherx.bench.sparse, gatherx.bench.plot, gatherx.bench.harness\n"
        "assert not {'torch', 'jax', 'matplotlib'} & set(sys.modules), sorted(sys.modules)"
    )


def test_sparse_plot_is_log_log_with_labels_and_a_legend():
    need("matplotlib")
    from gatherx.bench.plot import sparse_figure

    points = [
        Timing(f"{n} rows", FORWARD_BACKWARD, (n, 64), (4096,), "float32",
               {"gatherx": [1e-3], "native": [1.1e-3], "dense": [n * 1e-7]})
        for n in (10**4, 10**5, 10**6)
    ]  # fmt: skip
    fig = sparse_figure(points, Load(cpus=2, samples=[0.5, 3.1]))
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_xlabel() == "table rows (64 float32 columns)"
    assert "time" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [LABELS[FORWARD_BACKWARD][role] for role in ROLES]
    assert [t.get_text() for t in ax.texts] == ["1x", "10x", "100x"]  # dense / sparse
    assert "high load" in fig.get_suptitle()
    calm = sparse_figure(points, Load(cpus=2, samples=[0.3, 0.9])).get_suptitle()
    assert "high load" not in calm
    assert "load 0.3 at the start" in calm


# ------------------------------------------------------------------------------ the goals


def _row(case: str, task: str, ratio: float, dense_ratio: float) -> dict:
    return {"case": case, "task": task, "ratio": ratio, "dense_ratio": dense_ratio}


def test_goals_judge_a_sparse_payload(tmp_path, capsys):
    goals = _script("goals")
    payload = {
        "kind": "sparse",
        "rows": [
            _row("table", FORWARD_BACKWARD, 1.04, 150.0),
            _row("table", STEP, 1.20, 60.0),
            _row("embed", FORWARD_BACKWARD, 1.10, 3.0),  # no dense goal on embed
            _row("embed", STEP, 0.95, 2.0),
            _row("data=1000x16,index=64", FORWARD_BACKWARD, 9.0, 0.1),  # no goal on a spec
        ],
    }
    table, verdicts = goals.judge_sparse(payload)
    assert verdicts == [True, True, False, True, True]
    lines = table.splitlines()[2:]
    assert lines[0] == "| table | forward+backward | gatherx / native <= 1.10 | 1.04 | yes |"
    assert lines[1] == "| table | forward+backward | dense / gatherx >= 100 | 150 | yes |"
    assert lines[2] == "| table | optimizer step | gatherx / native <= 1.10 | 1.2 | **no** |"
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps(payload))
    assert goals.main([str(path)]) == 1
    assert "(sparse gradients): 4 of 5 goals met" in capsys.readouterr().out
    payload["rows"][1] = _row("table", STEP, 1.09, 60.0)
    payload["rows"][0] = _row("table", FORWARD_BACKWARD, 1.04, 99.0)
    assert goals.judge_sparse(payload)[1] == [True, False, True, True, True]


# ----------------------------------------------------------------------------- the memory


def test_memory_of_a_sparse_backward_is_set_against_the_output():
    memory = _script("memory")
    rows = memory.sparse_rows(Case("m", (3000, 32), (256,), 0))
    assert len(rows) == 3
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[1] for c in cells] == [LABELS[FORWARD_BACKWARD][role] for role in ROLES]
    assert [c[2] for c in cells] == ["torch.sparse_coo", "torch.sparse_coo", "torch.strided"]
    out = 256 * 32 * 4
    dense = 3000 * 32 * 4
    for c in cells:
        peak = int(c[4])
        assert float(c[6]) == pytest.approx(peak / out, abs=1e-3)
    # the dense gradient allocates at least the table; the sparse ones no more than 2x out
    assert int(cells[2][4]) >= dense
    assert [c[7] for c in cells] == ["yes", "yes", "-"]
