"""``import gatherx`` stays light; the ``gatherx`` command checks, explains and fails cleanly."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support import need

import gatherx
from gatherx import _options
from gatherx.bench import CASES, Load, Row
from gatherx.cli import explain, installed_backends, main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)


#: A bench of a second: what a refused option must stop before.
TINY_BENCH = ["bench", "--quick", "--cases", "tiny", "--backends", "numpy"]

HEAVY = ("torch", "jax", "jaxlib", "dask", "onnx", "array_api_strict", "matplotlib")


def test_import_loads_no_framework():
    code = (f"import sys, gatherx, gatherx.cli; names = dir(gatherx); "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")  # fmt: skip
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_submodules_listed_but_not_imported():
    code = ("import sys, gatherx; print(sorted(set(dir(gatherx)) & {'bench', 'cli', 'onnx', "
            "'torch'})); print(sorted(m for m in sys.modules if m.startswith('gatherx.') "
            "and not m.split('.')[1].startswith('_')))")  # fmt: skip
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    listed, loaded = result.stdout.splitlines()
    assert listed == "['bench', 'cli', 'onnx', 'torch']"
    assert loaded == "[]"


def test_bench_submodule_loads_on_attribute_access():
    code = ("import sys, gatherx; main = gatherx.bench.main; "
            "print('gatherx.bench' in sys.modules, 'torch' in sys.modules, "
            "'matplotlib' in sys.modules)")  # fmt: skip
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "False"]


@pytest.mark.parametrize(("name", "attribute"), [("onnx", "export"), ("torch", "Gather")])
def test_framework_submodule_loads_on_attribute_access(name, attribute):
    need("torch")
    need("onnx")
    code = f"import gatherx; print(gatherx.{name}.{attribute}.__module__)"
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"gatherx.{name}"


def test_unknown_attribute_is_attribute_error():
    with pytest.raises(AttributeError, match="module 'gatherx' has no attribute 'nope'"):
        _ = gatherx.nope
    assert not hasattr(gatherx, "_bench")


def test_numpy_gather_loads_no_framework():
    code = ("import sys, numpy as np, gatherx; gatherx.gather(np.ones((3, 2)), [0, -1]); "
            "gatherx.gather_grad((3, 2), [0], np.ones((1, 2))); "
            "print([m for m in ('torch', 'jax') if m in sys.modules])")  # fmt: skip
    result = run("-c", code)
    assert result.stdout.strip() == "[]", result.stderr


def test_eager_torch_calls_load_no_compiler():
    """Dynamo takes a second to import: plain eager programs never pay for it."""
    need("torch")
    code = (
        "import sys, torch, gatherx\n"
        "from gatherx.torch import Gather\n"
        "leaf = torch.ones(4, 3, requires_grad=True)\n"
        "i = torch.tensor([2, -1])\n"
        "gatherx.gather(leaf, i).sum().backward()\n"
        "gatherx.gather(leaf, i, sparse_grad=True).sum().backward()\n"
        "Gather(axis=1)(leaf, i).sum().backward()\n"
        "gatherx.gather(leaf.detach(), i, out=torch.empty(2, 3))\n"
        "gatherx.gather_grad((4, 3), i, torch.ones(2, 3))\n"
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))"
    )
    result = run("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["numpy", "torch", "jax", "array_api_strict"])
def test_check_passes_on_each_backend(module):
    need("onnx")
    need(module)
    backend = module.replace("_", "-")
    assert backend in installed_backends()
    result = run("-m", "gatherx", "check", "--backends", backend)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "4 official ONNX Gather cases" in lines[0]
    row = next(line for line in lines if line.startswith(backend + " "))
    assert "8/8" in row, row


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--backends", "nope"], "unknown backend(s) nope"),
        (["explain", "--data-shape", "5,x", "--indices-shape", "2"], "invalid shape '5,x'"),
        (["explain", "--data-shape", "5,,4", "--indices-shape", "2"], "invalid shape '5,,4'"),
        (["explain", "--data-shape", "5,4", "--indices-shape", ",2"], "invalid shape ',2'"),
        (["explain", "--data-shape", "5,4", "--indices-shape", "2", "--axis", "2"], "axis 2"),
        (["explain", "--data-shape", "", "--indices-shape", "2"], "'' is a scalar's shape"),
        (["explain", "--indices-shape", "2"], "required: --data-shape"),
        (["frobnicate"], "invalid choice"),
        (["check", "--backends", ""], "no backend(s) given (an empty list); choose from: numpy"),
        (["check", "--backends", " , "], "no backend(s) given (an empty list)"),
        (["bench", "--backends", ""], "no backend(s) given (an empty list); choose from: numpy"),
        (["bench", "--cases", ""], "no case(s) given (an empty list); choose from: tiny"),
        (["bench", "--cases", "huge"], "unknown case(s) huge; known: tiny"),
        ([*TINY_BENCH, "--repeats", "0"], "argument --repeats: expected a whole number >= 1, "
         "not '0'"),
        ([*TINY_BENCH, "--repeats", "-1"], "argument --repeats: expected a whole number >= 1"),
        # Output files the run could not write are refused before it times anything.
        ([*TINY_BENCH, "--json", "/no/such/dir/x.json"],
         "--json /no/such/dir/x.json: cannot write it (No such file or directory)"),
        ([*TINY_BENCH, "--markdown", "/no/such/dir/x.md"],
         "--markdown /no/such/dir/x.md: cannot write it (No such file or directory)"),
        ([*TINY_BENCH, "--plot", "/no/such/dir/x.png"],
         "--plot /no/such/dir/x.png: cannot write it (No such file or directory)"),
    ],
)  # fmt: skip
def test_wrong_arguments_give_one_line(args, message):
    # One line on stderr: no bench progress line either, so nothing was timed.
    result = run("-m", "gatherx", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    # One prefix: the command's, never followed by the library's own ("gather: ...").
    assert result.stderr.count("error:") == 1, result.stderr
    # the command's name, as argparse gives it in its own errors of that command
    prefix = f"gatherx {args[0]}" if args[0] in ("check", "explain", "bench") else "gatherx"
    assert re.match(rf"{prefix}: error: (?!gather(_grad)?:|gatherx:|bench:)", result.stderr)


def test_version():
    result = run("-m", "gatherx", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"gatherx {gatherx.__version__}\n"


def test_check_runs_each_backend_once_and_pads_no_line(capsys):
    need("onnx")
    assert main(["check", "--backends", "numpy,numpy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[3:]] == ["numpy"]
    assert all(line == line.rstrip() for line in lines), lines


def test_a_closed_output_pipe_ends_the_command_quietly():
    """``gatherx ... | head -1``: the reader is gone before the output is written."""
    command = [sys.executable, "-m", "gatherx", "explain", "--data-shape", "5,4",
               "--indices-shape", "2"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.close()
        _, err = proc.communicate(timeout=300)
    assert err == ""
    assert proc.returncode == 141  # as a shell reports a program SIGPIPE ended


def test_backends_named_must_be_installed_for_check_and_bench(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if PyTorch were not installed
    for command in (["check"], ["bench", "--quick", "--cases", "tiny"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--backends", "numpy,torch"])
        assert exit_.value.code == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == f"gatherx {command[0]}: error: backend(s) not installed: torch\n"
    # Without --backends, those not installed are left out.
    known = {"numpy": "numpy", "torch": "torch"}
    assert _options.backends(None, known) == (["numpy"], ["torch"])
    assert _options.backends("torch,numpy,torch", {**known, "torch": "numpy"}) == (
        ["torch", "numpy"],
        [],
    )


@pytest.mark.parametrize(
    ("missing", "argv", "message"),
    [
        ("onnx", ["check", "--backends", "numpy"],
         "running the official ONNX cases needs the onnx package: pip install 'gatherx[check]'"),
        ("onnx", ["check", "--impl", "onnx.reference"],
         "--impl onnx.reference needs the onnx package: pip install onnx"),
        ("matplotlib", [*TINY_BENCH, "--plot", "PLOT"],
         "--plot needs the matplotlib package: pip install matplotlib"),
    ],
)  # fmt: skip
def test_a_missing_optional_package_is_a_usage_error_before_any_work(
    capsys, monkeypatch, tmp_path, missing, argv, message
):
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    png = tmp_path / "bench.png"
    with pytest.raises(SystemExit) as exit_:
        main([str(png) if arg == "PLOT" else arg for arg in argv])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"gatherx {argv[0]}: error: {message}\n"  # no bench progress: nothing timed
    assert not png.exists()


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("nosuch", "--torch-device nosuch: not a PyTorch device (Expected one of cpu"),
        ("meta", "--torch-device meta: cannot hold a tensor there (NotImplementedError: "),
        ("cuda", "--torch-device cuda: PyTorch finds no cuda device here"),
    ],
)
def test_bench_refuses_a_torch_device_before_timing(device, message):
    torch = need("torch")
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    for task in (["--cases", "tiny", "--backends", "torch"],
                 ["--sparse", "--cases", "table", "--sparse-rows", "none"]):  # fmt: skip
        result = run("-m", "gatherx", "bench", "--quick", *task, "--torch-device", device)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"gatherx bench: error: {message}"), result.stderr


def test_library_error_keeps_only_the_command_prefix():
    result = run("-m", "gatherx", "explain", "--data-shape", "5,4", "--indices-shape", "2",
                 "--axis", "2")  # fmt: skip
    assert result.stderr == (
        "gatherx explain: error: axis 2 is out of the accepted range [-2, 1] for data of rank 2\n"
    )


@pytest.mark.parametrize("command", [[], ["check"], ["explain"], ["bench"]])
def test_help_is_plain_text(command):
    result = run("-m", "gatherx", *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: gatherx" in result.stdout
    assert "``" not in result.stdout
    assert ":func:" not in result.stdout
    if command == ["bench"]:
        text = " ".join(result.stdout.split())
        assert "--sweep N" in text
        assert "--case-spec SPEC" in text
        assert "goal" not in text  # the project's goals live in benchmarks/goals.py


def test_explain_matches_spec_table():
    """The rows of Gather-13's table, with P, Q = 5, 4 and R, S = 2, 3."""
    rows = [
        ((5, 4), (), 0, "output shape: (4,)", "output[j0] = data[indices, j0]"),
        ((5, 4, 6), (), 1, "output shape: (5, 6)", "output[j0, j1] = data[j0, indices, j1]"),
        ((5, 4), (2, 3), 0, "output shape: (2, 3, 4)",
         "output[i0, i1, j0] = data[indices[i0, i1], j0]"),
        ((5, 4), (2, 3), 1, "output shape: (5, 2, 3)",
         "output[j0, i0, i1] = data[j0, indices[i0, i1]]"),
        # A scalar index into 1-D data: a 0-d output, which takes no subscript.
        ((5,), (), 0, "output shape: ()", "output = data[indices]"),
    ]  # fmt: skip
    for data_shape, indices_shape, axis, shape_line, equation in rows:
        lines = explain(data_shape, indices_shape, axis).splitlines()
        assert shape_line in lines
        assert equation in lines


def test_explain_command():
    result = run("-m", "gatherx", "explain", "--data-shape", "5,4", "--indices-shape", "2,2")
    assert result.returncode == 0
    assert "output shape: (2, 2, 4)" in result.stdout
    # A trailing comma is a tuple's, as in (5,): the shape (5,), not an error.
    result = run("-m", "gatherx", "explain", "--data-shape", "(5,)", "--indices-shape", "2,")
    assert result.returncode == 0
    assert "output shape: (2,)" in result.stdout
    assert "valid indices: [-5, 4] (opset >= 11), [0, 4] (opset 1-10)" in result.stdout


def test_explain_empty_axis_says_no_index_is_valid():
    text = explain((0, 4), (2,), 0)
    assert "valid indices: none: axis 0 has size 0, so no index is valid" in text
    assert "[0, -1]" not in text
    assert "gather raises IndexError" in text
    empty = explain((4, 0), (0,), -1)
    assert "no index is valid" in empty
    assert "output shape: (4, 0)" in empty
    assert "raises" not in empty


def test_bench_quick_names_its_shapes_and_load(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--cases", "tiny", "--backends", "numpy",
                 "--json", str(out)]) == 0  # fmt: skip
    header = capsys.readouterr().out.split("\n\n")[0]
    assert re.search(r"\d+ CPUs, load \d+\.\d at the start, \d+\.\d at most", header)
    # PyTorch's huge-page setting is news only to a run that times PyTorch.
    assert "PyTorch" not in header
    payload = json.loads(out.read_text())
    assert "PyTorch" not in payload["huge_pages"]
    assert payload["cases"] == {"tiny": "(5, 4) / (2, 2) / axis 0"}
    assert payload["load"]["samples"]
    assert payload["load"]["high"] is (payload["load"]["warning"] is not None)


def test_bench_warns_when_the_load_was_high(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("gatherx.bench.machine.load_average", lambda: 99.0)
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--cases", "tiny", "--backends", "numpy",
                 "--json", str(out)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    header = captured.out.split("\n\n")[0]
    assert "warning: the load average reached 99.0 on" in header
    assert "times and ratios are unreliable" in header
    assert "warning: the load average reached 99.0" in captured.err
    assert json.loads(out.read_text())["load"]["high"] is True


def test_load_is_high_only_above_the_cpu_count():
    assert Load(cpus=2, samples=[0.5, 2.0]).warning() is None
    busy = Load(cpus=2, samples=[0.5, 3.7])
    assert busy.high
    assert "reached 3.7 on 2 CPUs" in (busy.warning() or "")
    assert Load(cpus=2).describe() == "2 CPUs, load not available"


def test_bench_plot_names_shapes_and_load():
    need("matplotlib")
    from gatherx.bench.plot import figure

    cases = CASES[:2]
    rows = [Row(c, "numpy", "forward", 2e-6, "np.take", 1e-6, 5e-7, 185.9) for c in cases]
    fig = figure(cases, rows, Load(cpus=2, samples=[1.0, 3.7]))
    top, bottom = fig.axes[:2]
    for ax in (top, bottom):
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels[0] == "tiny\n(5, 4)\n/ (2, 2), axis 0"
        assert labels[1] == "small\n(1000, 16)\n/ (100,), axis 0"
    title = fig.get_suptitle()
    assert "2 CPUs, load 1.0 at the start, 3.7 at most" in title
    assert "high load during the run" in title
    calm = figure(cases, rows, Load(cpus=2, samples=[0.3, 0.9])).get_suptitle()
    assert "0.9 at most" in calm
    assert "high load" not in calm
