"""``gatherx check --namespace`` and ``--impl``: real Gathers pass, wrong ones are caught."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from support import need

from gatherx._conformance import DTYPES, cases, expected_grad, grad_for, groups, to_numpy
from gatherx.cli import main

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, dict[str, tuple]]:
    """Run ``gatherx check ARGS`` in-process: (exit code, output, {group: (passed, failed,
    skipped, first failure)})."""
    code = main(["check", *args])
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("group "))
    table = {}
    for line in lines[start + 2 :]:
        if line.startswith(("note:", "passed:", "FAILED:")):
            break
        group, passed, failed, skipped, *first = line.split(maxsplit=4)
        table[group] = (int(passed), int(failed), int(skipped), first[0] if first else "")
    return code, out, table


def failed_groups(table: dict[str, tuple]) -> set[str]:
    return {g for g, row in table.items() if row[1] and g != "total"}


# -- the suite itself -----------------------------------------------------------------------------


def test_suite_covers_what_it_promises():
    found = cases()
    names = groups(found)
    for group in ("spec", "grid-rank1", "grid-rank2", "grid-rank3", "grid-rank4", "permutation",
                  "duplicates", "negative", "scalar", "empty", "zero-size", "out-of-bounds",
                  "indices-int32", "opsets", "refused-dtype"):  # fmt: skip
        assert group in names, group
    assert {f"dtype-{d}" for d in DTYPES if d != "bfloat16"} <= set(names)
    assert 200 <= len(found) <= 500  # a few hundred: seconds on NumPy
    assert len({c.name for c in found}) == len(found)
    ranks = {(c.data.ndim, c.indices.ndim) for c in found if c.group.startswith("grid")}
    assert ranks == {(r, i) for r in range(1, 5) for i in range(3)}
    axes = {(c.data.ndim, c.axis % c.data.ndim) for c in found if c.group.startswith("grid")}
    assert axes == {(r, a) for r in range(1, 5) for a in range(r)}
    # The shape-preserving permutations (what cubed's shortcut gets wrong) are there, on every
    # rank, and are not the identity.
    same = [c for c in found if c.group == "permutation" and c.expected is not None
            and c.expected.shape == c.data.shape]  # fmt: skip
    assert {c.data.ndim for c in same} == {1, 2, 3, 4}
    assert all(not np.array_equal(c.expected, c.data) for c in same)


def test_filter_by_dtype():
    only = cases(dtypes={"float16", "string"})
    assert only
    assert {c.dtype for c in only} == {"float16", "string"}


def test_reproducer_expressions_rebuild_the_case():
    import ml_dtypes

    import gatherx._conformance

    names = {"np": np, "ml_dtypes": ml_dtypes, "gatherx": gatherx}
    for c in cases():
        data = eval(c.data_expr, names)
        indices = eval(c.indices_expr, names)
        assert data.dtype == c.data.dtype, c.name
        assert np.array_equal(data, c.data), c.name
        assert indices.dtype == c.indices.dtype, c.name
        assert indices.shape == c.indices.shape, c.name
        assert np.array_equal(indices, c.indices), c.name


def test_expectations_follow_the_spec_table():
    """The expectations, against the spec's own index equation written out by hand."""
    for c in cases():
        if c.expected is None:
            continue
        size = c.data.shape[c.axis]
        assert c.indices.size == 0 or c.indices.min() >= (-size if c.opset >= 11 else 0)
        moved = np.moveaxis(c.data, c.axis, 0)
        want = np.stack([moved[int(i)] for i in c.indices.reshape(-1)]) if c.indices.size else None
        if want is not None:
            want = want.reshape(c.indices.shape + moved.shape[1:])
            ax = c.axis % c.data.ndim
            moved_to = [ax + k for k in range(c.indices.ndim)]
            want = np.moveaxis(want, list(range(c.indices.ndim)), moved_to)
            assert np.array_equal(c.expected, want), c.name
        ax = c.axis % c.data.ndim
        shape = c.data.shape[:ax] + c.indices.shape + c.data.shape[ax + 1 :]
        assert c.expected.shape == shape, c.name


def test_expected_grad_accumulates_duplicates_and_negatives():
    c = next(x for x in cases() if x.group == "duplicates" and x.data.shape == (4, 3)
             and x.axis == 0 and x.indices.tolist() == [[1, 1], [1, -3]])  # fmt: skip
    grad, _ = grad_for(c)
    got = expected_grad(c, grad)
    want = np.zeros((4, 3), dtype=grad.dtype)
    want[1] = grad[0, 0] + grad[0, 1] + grad[1, 0] + grad[1, 1]
    assert np.array_equal(got, want)
    oob = next(x for x in cases() if x.group == "out-of-bounds")
    assert expected_grad(oob, grad_for(oob)[0]) is IndexError
    string = next(x for x in cases() if x.group == "dtype-string")
    assert expected_grad(string, grad_for(string)[0]) is TypeError


@pytest.mark.parametrize(
    ("module", "make"),
    [
        ("numpy", lambda m, a: a),
        ("array_api_strict", lambda m, a: m.asarray(a)),
        ("torch", lambda m, a: m.asarray(a)),
        ("jax.numpy", lambda m, a: m.asarray(a)),
        ("dask.array", lambda m, a: m.from_array(a, chunks=1)),
        ("cubed.array_api", lambda m, a: m.asarray(a, chunks=1)),
        ("sparse", lambda m, a: m.asarray(a)),
        ("ndonnx", lambda m, a: m.asarray(a)),
    ],
)
def test_to_numpy_reads_every_library(module, make):
    lib = need(module)
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = to_numpy(make(lib, host))
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.float32
    assert np.array_equal(got, host)


# -- namespaces through gatherx -------------------------------------------------------------------


@pytest.mark.parametrize("module", ["numpy", "array_api_strict"])
def test_namespace_passes(capsys, module):
    need(module)
    need("onnx")
    code, out, table = check(capsys, "--namespace", module)
    assert code == 0, out
    assert failed_groups(table) == set()
    assert table["onnx"][0] == 16  # 4 official cases x 4 checks
    assert table["permutation"][0] > 0
    assert f"gatherx check --namespace {module} (" in out
    assert "4 check(s) each (gather, gather/" in out


def test_chunked_namespace_is_cut_in_blocks(capsys):
    need("dask.array")
    need("onnx")
    code, out, table = check(capsys, "--namespace", "dask.array")
    assert code == 0, out
    assert "note: dask.array.asarray takes chunks: arrays are split into blocks of 2" in out
    assert table["permutation"][1] == 0


def test_namespace_skips_dtypes_it_lacks_and_says_so(capsys):
    need("array_api_strict")
    code, out, table = check(capsys, "--namespace", "array_api_strict")
    assert code == 0
    assert table["dtype-float16"][:3] == (0, 0, 20)
    assert "note: array_api_strict cannot hold float16 arrays" in out
    # NumPy holds datetimes, which gatherx must refuse with its TypeError: they pass as refused.
    _, _, numpy_table = check(capsys, "--namespace", "numpy")
    assert numpy_table["refused-dtype"][:3] == (12, 0, 0)


def test_namespace_catches_a_library_that_skips_shape_preserving_gathers(capsys, monkeypatch):
    """A take that returns its input when the shapes agree, as cubed 0.27's does."""
    xps = need("array_api_strict")
    real_take = xps.take

    def shortcut(x, indices, /, *, axis=None):
        out = real_take(x, indices, axis=axis)
        return x if out.shape == x.shape else out

    monkeypatch.setattr(xps, "take", shortcut)
    code, out, table = check(capsys, "--namespace", "array_api_strict")
    assert code == 1
    assert "permutation" in failed_groups(table)
    assert "values differ" in table["permutation"][3]
    assert out.splitlines()[-1].startswith("FAILED:")
    # The reproducer, run as it stands, gives the wrong values it reports.
    code = table["permutation"][3].partition("  # ")[0]
    head, _, call = code.rpartition("; ")
    assert call.startswith("gatherx.gather(xp.asarray(data), indices, axis=")
    names: dict = {}
    exec(f"{head}; result = {call}", names)
    want = np.take(names["data"], names["indices"], axis=int(call.rpartition("axis=")[2][:-1]))
    assert not np.array_equal(to_numpy(names["result"]), want)


# -- any Gather function --------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["onnxruntime", "onnx.reference"])
def test_impl_adapters_pass(capsys, impl):
    need("onnx")
    if impl == "onnxruntime":
        need("onnxruntime")
    code, out, table = check(capsys, "--impl", impl)
    assert code == 0, out
    assert failed_groups(table) == set()
    assert "opsets" not in table
    assert "refused-dtype" not in table
    assert table["out-of-bounds"][1] == 0
    assert table["out-of-bounds"][0] > 0
    if impl == "onnxruntime":
        assert table["dtype-string"][:3] == (0, 0, 5)
        assert "known to give wrong strings on axes other than the last" in out
    else:
        assert table["dtype-string"][:3] == (5, 0, 0)


@pytest.mark.parametrize(
    ("impl", "wrong", "right"),
    [
        ("clamped", {"out-of-bounds"}, {"negative", "permutation", "scalar", "onnx"}),
        ("negatives_as_zero", {"negative", "onnx"}, {"out-of-bounds", "grid-rank3", "empty"}),
        ("unchanged_when_same_shape", {"permutation", "duplicates"},
         {"scalar", "empty", "spec", "onnx"}),
    ],
)  # fmt: skip
def test_impl_catches_wrong_gathers(capsys, monkeypatch, impl, wrong, right):
    monkeypatch.syspath_prepend(TESTS)
    code, out, table = check(capsys, "--impl", f"broken_gathers:{impl}")
    assert code == 1
    failing = failed_groups(table)
    assert wrong <= failing, failing
    assert not right & failing, failing
    assert out.splitlines()[-1].startswith("FAILED:")


def test_impl_control_passes(capsys, monkeypatch):
    monkeypatch.syspath_prepend(TESTS)
    code, out, table = check(capsys, "--impl", "broken_gathers:correct")
    assert code == 0, out
    assert failed_groups(table) == set()


def test_impl_that_mutates_its_input_fails(capsys, monkeypatch):
    monkeypatch.syspath_prepend(TESTS)
    code, _, table = check(capsys, "--impl", "broken_gathers:mutating")
    assert code == 1
    assert "the call changed its inputs" in table["negative"][3]


def test_first_failure_is_a_reproducer_that_runs(capsys, monkeypatch):
    monkeypatch.syspath_prepend(TESTS)
    _, _, table = check(capsys, "--impl", "broken_gathers:clamped")
    line = table["out-of-bounds"][3]
    code, _, comment = line.partition("  # ")
    assert "expected an error for an out-of-range index" in comment
    # Pasted into Python it runs and shows the wrong answer: an array where ONNX raises.
    head, _, call = code.rpartition("; ")
    assert call.startswith("clamped(data, indices, ")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, TESTS])}
    program = f"{head}; print({call}.shape)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("(")


# -- --json ---------------------------------------------------------------------------------------


def test_json_has_every_check(capsys, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(TESTS)
    path = tmp_path / "check.json"
    code, _, table = check(capsys, "--impl", "broken_gathers:clamped", "--json", str(path))
    assert code == 1
    payload = json.loads(path.read_text())
    assert payload["target"] == "impl broken_gathers:clamped"
    assert payload["failed"] is True
    results = payload["results"]
    assert len(results) == sum(table["total"][:3])
    for group, (passed, failed, skipped, _) in table.items():
        if group != "total":
            assert payload["groups"][group] == {"passed": passed, "failed": failed,
                                                "skipped": skipped}  # fmt: skip
    bad = next(r for r in results if r["status"] == "failed")
    assert bad["group"] == "out-of-bounds"
    assert bad["expected"] == {"raises": "IndexError"}
    assert set(bad["got"]) == {"shape", "dtype"}
    assert bad["reproducer"].startswith("import numpy as np; from broken_gathers import clamped")
    assert bad["data"]["dtype"] == "float32"
    assert isinstance(bad["indices"]["values"], list)
    good = next(r for r in results if r["status"] == "passed" and r["group"] == "negative")
    assert good["expected"]["shape"] == good["got"]["shape"]


def test_json_for_a_namespace_names_the_four_checks(capsys, tmp_path):
    need("array_api_strict")
    path = tmp_path / "ns.json"
    assert main(["check", "--namespace", "array_api_strict", "--json", str(path)]) == 0
    capsys.readouterr()
    payload = json.loads(path.read_text())
    assert payload["checks"] == ["gather", "gather/array_api_strict indices", "gather_grad",
                                 "gather_grad/array_api_strict indices"]  # fmt: skip
    kinds = {(r["check"], r["status"]) for r in payload["results"]}
    assert ("gather_grad/array_api_strict indices", "passed") in kinds
    skipped = [r for r in payload["results"] if r["status"] == "skipped"]
    assert skipped
    assert all(r["reason"] for r in skipped)
    grad_oob = next(r for r in payload["results"]
                    if r["group"] == "out-of-bounds" and r["check"] == "gather_grad")  # fmt: skip
    assert grad_oob["expected"] == {"raises": "IndexError"}
    assert grad_oob["got"]["raised"].startswith("IndexError: gather_grad: indices element out of")


# -- the command ----------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, TESTS])}
    return subprocess.run([sys.executable, "-m", "gatherx", "check", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env, check=False)  # fmt: skip


def test_command_exit_codes():
    wrong = run_cli("--impl", "broken_gathers:unchanged_when_same_shape")
    assert wrong.returncode == 1, wrong.stderr
    assert "FAILED:" in wrong.stdout
    assert wrong.stderr == ""
    need("onnxruntime")
    right = run_cli("--impl", "onnxruntime")
    assert right.returncode == 0, right.stdout + right.stderr
    assert right.stderr == ""  # onnxruntime's own logging of the provoked errors is silenced


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "no_such_module"], "--namespace no_such_module: cannot import no_such"),
        (["--namespace", "json"], "json is not an array namespace (it has no asarray)"),
        (["--namespace", ""], "--namespace is empty"),
        (["--impl", "nocolon"], "expected package.module:function"),
        (["--impl", "no_such_module:f"], "cannot import no_such_module"),
        (["--impl", "broken_gathers:nope"], "broken_gathers has no attribute 'nope'"),
        (["--impl", "broken_gathers:NOT_CALLABLE"], "broken_gathers.NOT_CALLABLE is not callable"),
        (["--impl", "onnxruntime", "--namespace", "numpy"], "not allowed with argument"),
        (["--json", "out.json"], "--json needs --namespace or --impl"),
        (["--impl", "onnx.reference", "--json", "/no/such/dir/x.json"], "cannot write it"),
    ],
)
def test_bad_target_is_one_clear_line(args, message):
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "no_such_module"], "--namespace no_such_module: cannot import no_such"),
        (["--impl", "nocolon"], "expected package.module:function"),
    ],
)
def test_a_refused_target_leaves_the_json_file_as_it_was(capsys, tmp_path, args, message):
    path = tmp_path / "previous.json"
    path.write_text('{"old": 1}\n')
    with pytest.raises(SystemExit) as exit_:
        main(["check", *args, "--json", str(path)])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert path.read_text() == '{"old": 1}\n'


def test_json_refused_for_a_folder_before_the_run(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--namespace", "numpy", "--json", str(tmp_path)])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"gatherx check: error: --json {tmp_path}: cannot write it (Is a directory)\n"


@pytest.mark.parametrize(
    ("source", "raised"),
    [
        ("raise RuntimeError('no device found')\n", "RuntimeError: no device found"),
        ("def f(:\n", "SyntaxError: "),
        ("import no_such_module_at_all\n", "ModuleNotFoundError: No module named"),
    ],
)
@pytest.mark.parametrize("option", ["--impl", "--namespace"])
def test_a_module_that_fails_to_import_is_a_usage_error(
    capsys, monkeypatch, tmp_path, source, raised, option
):
    name = f"fails_on_import_{abs(hash((source, option)))}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    target = f"{name}:gather" if option == "--impl" else name
    with pytest.raises(SystemExit) as exit_:
        main(["check", option, target])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"gatherx check: error: {option} {target}: cannot import ")
    assert f"({raised}" in err


@pytest.mark.parametrize("option", ["--impl", "--namespace"])
def test_modules_in_the_working_directory_are_found(capsys, monkeypatch, tmp_path, option):
    """As ``python -m`` finds them: a namespace as an implementation."""
    name = f"local_numpy_{option.strip('-')}"
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\nfrom numpy import *  # noqa: F403\n\n"
        "def take(data, indices, axis):\n    return np.take(data, indices, axis=axis)\n"
    )
    monkeypatch.chdir(tmp_path)
    target = f"{name}:take" if option == "--impl" else name
    assert main(["check", option, target]) == 0
    assert ", 0 failed" in capsys.readouterr().out


def test_docs_page_shows_the_output_of_today(capsys, monkeypatch, tmp_path):
    """Every example on docs/check.md is what the command prints now (rows may be left out),
    with the page's own mykernel.py as the implementations."""
    need("onnx")
    need("onnxruntime")
    with open(os.path.join(ROOT, "docs", "check.md"), encoding="utf-8") as f:
        page = f.read()
    (kernel,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    (tmp_path / "mykernel.py").write_text(kernel)
    monkeypatch.syspath_prepend(str(tmp_path))
    examples = re.findall(r"```text\n\$ gatherx check ([^\n]+)\n(.*?)\n```", page, flags=re.S)
    assert len(examples) == 5
    for args, shown in examples:
        main(["check", *args.split()])
        live = capsys.readouterr().out.splitlines()
        header, *rows = shown.splitlines()
        assert re.sub(r" \(.*?\)", "", header, count=1) == re.sub(r" \(.*?\)", "", live[0], count=1)
        missing = [row for row in rows if row not in live]
        assert not missing, (args, missing)


def test_library_warnings_and_logs_are_counted_not_printed(capsys, monkeypatch):
    monkeypatch.syspath_prepend(TESTS)
    code = main(["check", "--impl", "broken_gathers:noisy"])
    captured = capsys.readouterr()
    assert code == 0, captured.out  # under -W error too: a warning is no failure
    assert captured.err == ""
    n = sum(1 for c in cases() if c.group not in {"opsets", "refused-dtype"})
    assert f"note: {n} time(s) UserWarning: noisy: a library warning" in captured.out
    assert f"note: {n} time(s) noisy logged: noisy: a log record\n" in captured.out
