"""``gatherx bench --sweep``: random cases from a seed, verified, timed and summarised; and the
project's goals (``benchmarks/goals.py``) judged on the JSON the bench writes."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest
from support import need

from gatherx.bench import Case, Load, draw_cases, make_inputs, verify
from gatherx.bench.cases import itemsize
from gatherx.bench.formulations import Entry, build_entries
from gatherx.bench.sweep import MAX_BYTES, SWEEP_DTYPES
from gatherx.cli import main

#: The dtypes whose data has gradients (an independent list: the bench times those tasks).
FLOATS = {"float16", "bfloat16", "float32", "float64"}

ROOT = Path(__file__).resolve().parents[1]


def _goals():
    """``benchmarks/goals.py`` as a module (``benchmarks/`` is no package)."""
    if "bench_goals" in sys.modules:
        return sys.modules["bench_goals"]
    path = ROOT / "benchmarks" / "goals.py"
    spec = importlib.util.spec_from_file_location("bench_goals", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_goals"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _small_seed(n: int, most: int = 64 * 2**10) -> int:
    """The first seed whose ``n`` cases have at most ``most`` bytes of data and output, and
    at least one gradient task (a floating dtype): a sweep of them runs in seconds."""
    for seed in range(1000):
        cases = draw_cases(n, seed)
        sizes = [max(c.out_bytes, math.prod(c.data_shape) * 8) for c in cases]
        if max(sizes) <= most and any(c.dtype.startswith("float") for c in cases):
            return seed
    raise AssertionError("no small seed")


# ------------------------------------------------------------------------------ the draw


def test_sweep_cases_reproduce_from_the_seed():
    first = draw_cases(40, 7)
    assert draw_cases(40, 7) == first
    assert draw_cases(10, 7) == first[:10]  # a longer sweep extends a shorter one
    assert draw_cases(40, 8) != first
    assert len({c.name for c in first}) == 40


def test_sweep_covers_ranks_axes_indices_dtypes_and_layouts():
    cases = draw_cases(300, 0)
    pairs = {(len(c.data_shape), c.axis) for c in cases}
    assert pairs == {(r, a) for r in range(1, 6) for a in range(-r, r)}  # every axis, both signs
    assert {len(c.index_shape) for c in cases} == {0, 1, 2, 3}
    assert any(0 in c.index_shape for c in cases)  # empty indices
    assert {c.dtype for c in cases} == set(SWEEP_DTYPES)
    every = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"}
    assert every <= set(SWEEP_DTYPES)
    assert {c.strided for c in cases} == {True, False}
    out = [c.out_bytes for c in cases]
    assert min(b for b in out if b) <= 16
    assert 16 * 2**20 <= max(out) <= MAX_BYTES
    for c in cases:
        data = math.prod(c.data_shape) * itemsize(c.dtype) * (2 if c.strided else 1)
        assert data <= MAX_BYTES
        assert math.prod(c.index_shape) * 8 <= MAX_BYTES
        assert Case.from_spec(c.spec(), c.name) == c  # the rerun line names exactly the case


def test_case_spec_reads_back_and_rejects_nonsense():
    case = Case.from_spec("data=5x4x3,index=scalar,axis=-2,dtype=uint8,strided")
    assert (case.data_shape, case.index_shape, case.axis) == ((5, 4, 3), (), -2)
    assert (case.dtype, case.strided, case.first_non_negative) == ("uint8", True, False)
    assert Case.from_spec(case.spec()) == case
    assert Case.from_spec("data=7,index=2x0").index_shape == (2, 0)
    for bad, says in [
        ("data=5x4", "data= and index= are required"),
        ("data=5x4,index=2,colour=red", "unknown part 'colour=red'"),
        ("data=5x4,index=2,axis=2", "axis 2 is out of range for data of rank 2"),
        ("data=5xfour,index=2", "'5xfour' is no shape"),
        ("data=5x4,index=2,dtype=float99", "unknown dtype 'float99'"),
    ]:
        with pytest.raises(ValueError, match=says):
            Case.from_spec(bad)


# --------------------------------------------------------------------- inputs and verify


def test_strided_inputs_are_non_contiguous_views_with_a_right_oracle():
    case = Case("s", (6, 5, 4), (3, 2), -2, dtype="float16", strided=True)
    x = make_inputs(case)
    assert not x.data.flags.c_contiguous
    assert x.data.base is not None
    assert x.data.strides[-1] == 2 * x.data.itemsize  # every other element of the last axis
    assert (x.indices < 0).any()
    assert ((x.wrapped >= 0) & (x.wrapped < 5)).all()
    dense = np.ascontiguousarray(x.data)
    np.testing.assert_array_equal(x.out, dense[:, x.wrapped % 5, :])
    want = np.zeros((6, 5, 4))
    for pos in np.ndindex(*case.index_shape):
        want[:, x.wrapped[pos], :] += x.grad[(slice(None), *pos, slice(None))]
    np.testing.assert_array_equal(x.data_grad, want)
    # the axis of length one is never the strided one
    assert not make_inputs(Case("o", (3, 1), (2,), 0, strided=True)).data.flags.c_contiguous
    with pytest.raises(ValueError, match="needs an axis longer than one"):
        make_inputs(Case("p", (1, 1), (2,), 0, strided=True))


def test_inputs_of_every_dtype_and_a_scalar_output():
    for dtype in SWEEP_DTYPES:
        x = make_inputs(Case("d", (4,), (), -1, dtype=dtype))
        assert x.data.dtype == np.dtype(dtype)
        assert x.out.shape == ()
        assert isinstance(x.out, np.ndarray)  # a 0-d array, not a NumPy scalar
        assert x.out == x.data[x.wrapped]


@pytest.mark.parametrize("library", ["numpy", "torch", "jax"])
def test_every_formulation_verifies_on_strided_empty_and_scalar_cases(library):
    if library != "numpy":
        need(library)
    specs = [
        "data=6x5x4,index=3x2,axis=-2,dtype=float32,strided",
        "data=6x5,index=2x0,axis=1,dtype=float16",
        "data=7x5x3,index=40x30,axis=-2,dtype=bfloat16,strided",  # many repeats
        "data=9,index=scalar,axis=-1,dtype=int32,strided",
        "data=3x2x4,index=2,axis=0,dtype=bool,strided",
    ]
    for spec in specs:
        x = make_inputs(Case.from_spec(spec))
        entries = build_entries(x, [library], "cpu")
        tasks = {(e.backend, e.task) for e in entries if e.kind == "gatherx"}
        assert tasks, spec
        verify(entries, x)
        grads = any("grad" in t or "backward" in t or "vjp" in t for _, t in tasks)
        assert grads is (x.case.dtype in FLOATS), spec  # gradients on floats only


def test_verify_rejects_a_wrong_formulation():
    x = make_inputs(Case("w", (7, 3), (4,), 0, dtype="int32"))
    (good,) = [e for e in build_entries(x, ["numpy"], "cpu") if e.label == "np.take"]
    verify([good], x)
    shifted = np.take(x.data, (x.wrapped + 1) % 7, axis=0)
    wrong = [
        Entry("numpy", "forward", "shifted", "native", lambda: shifted),
        Entry("numpy", "forward", "as float", "native", lambda: x.out.astype(np.float64)),
        Entry("numpy", "forward", "flat", "native", lambda: x.out.reshape(-1, 1)),
    ]
    for e in wrong:
        with pytest.raises(AssertionError, match=f"{e.label} on w computes a wrong result"):
            verify([good, e], x)
    y = make_inputs(Case("g", (7, 3), (40,), 0))
    missing = Entry("numpy", "gather_grad", "one short", "native",
                    lambda: y.data_grad - (y.data_grad != 0))  # fmt: skip
    with pytest.raises(AssertionError, match="one short on g computes a wrong result"):
        verify([missing], y)


# ------------------------------------------------------------------------- the sweep run


def _sweep(tmp_path, capsys, backends: str, n: int) -> tuple[str, dict]:
    path = tmp_path / "sweep.json"
    seed = _small_seed(n)
    argv = ["bench", "--sweep", str(n), "--seed", str(seed), "--quick", "--backends", backends]
    assert main([*argv, "--json", str(path)]) == 0
    payload = json.loads(path.read_text())
    assert payload["seed"] == seed
    return capsys.readouterr().out, payload


def _check_sweep(text: str, payload: dict, backend: str) -> None:
    head, table, title, worst = text.split("\n\n")[:4]
    assert head.startswith(f"gatherx bench --sweep {payload['count']} --seed {payload['seed']}")
    header = table.splitlines()[0]
    assert header.startswith("| backend | task | cases | median | 90th pct | 95th pct | max |")
    assert "goal" not in text.lower()
    assert "met" not in header
    results = payload["results"]
    assert results
    tasks = {r["task"] for r in results}
    for task in tasks:
        assert f"| {backend} | {task} | " in table
    cases = draw_cases(payload["count"], payload["seed"])
    for r in results:
        assert r["backend"] == backend
        case = cases[r["number"]]
        assert r["spec"] == case.spec()
        assert r["data_shape"] == list(case.data_shape)
        assert r["index_shape"] == list(case.index_shape)
        assert (r["axis"], r["dtype"], r["strided"]) == (case.axis, case.dtype, case.strided)
        g, b = r["gatherx_rounds"], r["best_rounds"]
        assert len(g) == len(b) == payload["repeats"]
        assert r["gatherx"] == statistics.median(g)
        assert r["best"] == statistics.median(b)
        paired = statistics.median(x / y for x, y in zip(g, b, strict=True))
        assert r["ratio"] == pytest.approx(paired, rel=1e-12)
        assert r["best_label"]
        assert r["best_label"] != "gatherx"
        assert f"--case-spec {case.spec()} --backends {backend}" in r["rerun"]
    worst_ratio = max(r["ratio"] for r in results)
    assert title.startswith(f"The {min(10, len(results))} highest gatherx / best native")
    assert worst.splitlines()[2].startswith(f"| {worst_ratio:.3f} | ")
    for s in payload["summary"]:
        ratios = [r["ratio"] for r in results if (r["backend"], r["task"]) == (backend, s["task"])]
        assert s["cases"] == len(ratios)
        assert s["worst"] == max(ratios)
        assert s["median"] == pytest.approx(float(np.median(ratios)))
        # the calls whose best native takes 20 us or more, where the copy takes the time
        slow = [
            r["ratio"]
            for r in results
            if (r["backend"], r["task"]) == (backend, s["task"]) and r["best"] >= 20e-6
        ]
        assert s["slow"] == len(slow) == s["cases"] - s["fast"]
        if slow:
            assert s["slow_median"] == pytest.approx(float(np.median(slow)))
            assert s["slow_p95"] == pytest.approx(float(np.percentile(slow, 95)))
        else:
            assert math.isnan(s["slow_median"])
            assert math.isnan(s["slow_p95"])
        cells = [f"{v:.3f}" if slow else "-" for v in (s["slow_median"], s["slow_p95"])]
        row = next(line for line in table.splitlines() if f"| {backend} | {s['task']} | " in line)
        assert row.endswith(f"| {s['slow']} | {cells[0]} | {cells[1]} |")


def test_tiny_sweep_on_numpy_prints_percentiles_and_writes_its_times(tmp_path, capsys):
    text, payload = _sweep(tmp_path, capsys, "numpy", 3)
    _check_sweep(text, payload, "numpy")
    tasks = {r["task"] for r in payload["results"]}
    assert {"forward", "forward (out=)", "gather_grad"} == tasks


@pytest.mark.parametrize("library", ["torch", "jax"])
def test_tiny_sweep_on_torch_and_jax(tmp_path, capsys, library):
    need(library)
    text, payload = _sweep(tmp_path, capsys, library, 2)
    _check_sweep(text, payload, library)


def test_torch_sweep_times_gatherx_against_the_least_autograd_function(tmp_path, capsys):
    """The forward+backward of every differentiable case is also set against a minimal
    ``torch.autograd.Function`` (the design's floor), with the same gatherx rounds."""
    need("torch")
    from gatherx.bench.cases import FLOOR_TASK

    text, payload = _sweep(tmp_path, capsys, "torch", 3)
    results = payload["results"]
    pairs = {r["number"]: r for r in results if r["task"] == "forward+backward"}
    floors = {r["number"]: r for r in results if r["task"] == FLOOR_TASK}
    assert floors
    assert floors.keys() == pairs.keys()
    for number, floor in floors.items():
        assert floor["best_label"] == "minimal autograd.Function"
        assert floor["gatherx_rounds"] == pairs[number]["gatherx_rounds"]
    assert f"| torch | {FLOOR_TASK} | {len(floors)} | " in text


def test_a_printed_rerun_line_times_that_case(capsys):
    spec = "data=6x5,index=2x0,axis=-1,dtype=float16,strided"
    assert main(["bench", "--quick", "--repeats", "1", "--case-spec", spec,
                 "--backends", "numpy"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "float16 data (strided), int64 indices" in text.splitlines()[0]
    summary = text.split("\n\n")[1]
    assert f"| {spec} | numpy | forward | " in summary
    assert "| goal | met |" not in summary.splitlines()[0]


def test_sweep_refuses_fixed_cases_and_seed_needs_sweep(capsys):
    for argv, says in [
        (["bench", "--sweep", "2", "--cases", "tiny"], "--sweep draws its own cases"),
        (["bench", "--seed", "3"], "--seed draws the cases of --sweep"),
        (["bench", "--sweep", "-1"], "--sweep needs a number of cases >= 0, not -1"),
        (["bench", "--sweep", "2", "--backends", "onnxruntime"], "unknown backend(s) onnx"),
        (["bench", "--case-spec", "data=3,index=2,axis=1"], "axis 1 is out of range"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert says in capsys.readouterr().err


# ------------------------------------------------------------------------------ the goals


def _record(backend: str, task: str, ratio: float, best: float = 1e-3) -> dict:
    return {"backend": backend, "task": task, "ratio": ratio, "gatherx": best * ratio,
            "best": best}  # fmt: skip


def test_goals_judge_a_sweep_on_its_percentiles():
    goals = _goals()
    good = [_record("numpy", "forward", 1.0) for _ in range(300)]
    good[0] = _record("numpy", "forward", 1.4)
    good += [_record("numpy", "forward", 1.0, best=10e-6) for _ in range(10)]
    table, verdicts = goals.judge_sweep({"count": 310, "results": good})
    assert verdicts == [True] * 4
    assert "| numpy | forward | 310 | max <= 1.50 | 1.400 | yes |" in table
    slow = [*good[:-10], *(_record("numpy", "forward", 1.4, best=10e-6) for _ in range(10))]
    table, verdicts = goals.judge_sweep({"count": 310, "results": slow})
    assert verdicts == [True, True, True, False]  # +4 us over a 10 us native: > +3 us
    assert "<= +3 us | +4.0 us | **no** |" in table
    # torch's allowance is 5 us; a sweep of fewer than 300 cases is reported, not judged
    torch_slow = [{**r, "backend": "torch"} for r in slow]
    assert goals.judge_sweep({"count": 310, "results": torch_slow})[1] == [True] * 4
    assert goals.judge_sweep({"count": 40, "results": slow})[1] == []
    skewed = [_record("jax", "vjp (jit)", 1.03) for _ in range(300)]
    table, verdicts = goals.judge_sweep({"count": 300, "results": skewed})
    assert verdicts == [False, True, True]  # median 1.03 > 1.02; no call under 20 us
    assert (
        "| jax | vjp (jit) | 300 | 95th pct of extra (best < 20 us) <= +3 us | - | not judged |"
        in table
    )


def test_goals_judge_fixed_cases_from_the_bench_json(tmp_path, capsys):
    goals = _goals()
    path = tmp_path / "cases.json"
    assert main(["bench", "--quick", "--repeats", "1", "--cases", "tiny,pick_wide",
                 "--backends", "numpy", "--json", str(path)]) == 0  # fmt: skip
    capsys.readouterr()
    payload = json.loads(path.read_text())
    rows = {(r["case"], r["task"]): r for r in payload["rows"]}
    assert set(rows) >= {("tiny", "forward"), ("pick_wide", "forward"), ("tiny", "gather_grad")}
    table, verdicts = goals.judge_cases(payload)
    assert len(verdicts) == table.count("\n") - 1 == 2  # the small cases' forward goals
    tiny = rows["tiny", "forward"]
    extra = (tiny["gatherx"] - tiny["best"]) * 1e6
    assert f"| tiny | numpy | forward | {tiny['ratio']:.2f} | {extra:+.1f} us | <= +4 us |" in table
    assert "| pick_wide | numpy | forward | " in table
    # a large case's goals are ratios: columns 10% faster than np.take, gather_grad 3x
    cols = [{"case": "cols", "backend": "numpy", "task": task, "gatherx": 1.0, "best": 1.0,
             "best_label": "np.take", "ratio": ratio}
            for task, ratio in [("forward", 0.95), ("gather_grad", 0.3)]]  # fmt: skip
    payload["rows"] = [*payload["rows"], *cols]
    table, verdicts = goals.judge_cases(payload)
    assert "| cols | numpy | forward | 0.95 | +0.0 us | <= 0.90 | **no** |" in table
    assert "| cols | numpy | gather_grad | 0.30 | +0.0 us | >= 3x faster | yes |" in table
    path.write_text(json.dumps(payload))
    assert goals.main([str(path)]) == 1
    assert "| cols | numpy | forward | 0.95 | " in capsys.readouterr().out
    with pytest.raises(ValueError, match="no 'rows' in this JSON"):
        goals.judge_cases({"seconds": {}})


def test_the_wheel_holds_no_goals():
    import gatherx.bench as bench
    from gatherx.bench import cases, report

    for module in (bench, cases, report):
        assert not {"GOALS", "Goal", "goal_for"} & set(dir(module))
    assert "goal" not in (ROOT / "gatherx" / "bench" / "report.py").read_text().lower()


def test_sweep_plot_has_a_panel_per_backend():
    need("matplotlib")
    from gatherx.bench.plot import sweep_figure
    from gatherx.bench.sweep import Result

    cases = draw_cases(3, 0)
    results = [Result(i, c, b, "forward", 2e-6, "np.take", 1e-6, 2.0, [2e-6], [1e-6])
               for i, c in enumerate(cases) for b in ("numpy", "jax")]  # fmt: skip
    fig = sweep_figure(results, Load(cpus=2, samples=[1.0, 3.7]))
    assert [ax.get_title() for ax in fig.axes] == ["numpy", "jax"]
    assert "3 random cases; 2 CPUs, load 1.0 at the start, 3.7 at most" in fig.get_suptitle()
    assert "high load" in fig.get_suptitle()


class _Clock:
    """A clock that moves only when a timed function says it took some time: the rounds'
    batch sizes and samples then follow from the functions' times alone, whatever the
    machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from gatherx.bench import timing

    fake = _Clock()
    monkeypatch.setattr(timing, "time", fake)  # the warm-up calls' clock
    monkeypatch.setitem(timing.CLOCKS, "wall", fake.perf_counter)  # the rounds' clock
    return fake


def test_rounds_size_batches_from_a_warm_second_call(clock):
    """A function whose first call is slow (compilation, first allocation) is called a second
    time, warm, before its batches are sized: the batches then hold many calls, not the few
    that the slow first call would give."""
    from gatherx.bench.timing import rounds

    calls = []

    def slow_first() -> None:  # times in powers of two: the clock's sums are exact
        calls.append(None)
        clock.now += 2**-6 if len(calls) == 1 else 2**-10

    samples = rounds({"f": slow_first}, repeats=2, min_sample=2**-4)
    assert samples["f"] == [2**-10] * 2
    assert len(calls) - 2 == 2 * 64  # 2^-4 / 2^-10 per batch; 2^-4 / 2^-6 would be 4


def test_rounds_interleave_slow_calls_one_by_one(clock):
    """Functions of at least PER_CALL_SECONDS run call by call, interleaved, each for its own
    number of calls; each sample is the mean of its calls."""
    from gatherx.bench.timing import PER_CALL_SECONDS, rounds

    calls = {"short": 0, "long": 0}
    order = []

    def timed(name: str, seconds: float):
        def run() -> None:
            calls[name] += 1
            order.append(name)
            clock.now += seconds

        return run

    fns = {
        "short": timed("short", 2 * PER_CALL_SECONDS),
        "long": timed("long", 20 * PER_CALL_SECONDS),
    }
    samples = rounds(fns, repeats=3, min_sample=40 * PER_CALL_SECONDS)
    # a warm-up call and a sizing call each, then per round 40 / 2 calls of the short one and
    # 40 / 20 of the long one, the long ones among the first of the round's calls (interleaved)
    assert calls == {"short": 2 + 3 * 20, "long": 2 + 3 * 2}
    assert all("long" in order[4 + 22 * r : 4 + 22 * r + 4] for r in range(3))
    for name, seconds in (("short", 2 * PER_CALL_SECONDS), ("long", 20 * PER_CALL_SECONDS)):
        assert samples[name] == [pytest.approx(seconds)] * 3


def test_a_case_is_timed_in_batches_sized_by_a_warm_call(clock, monkeypatch):
    """Formulations that ran before (verified) are slow again on their first call after
    other work; the case's batches are sized by a warm call after it, so each sample holds
    the calls ``min_sample`` asks for, not the few that the cold call would give."""
    from gatherx.bench import harness

    calls = {"gatherx": 0, "native": 0}

    def formulation(name: str):
        def run() -> None:
            calls[name] += 1
            # verified first (1 call), then cold once after the pause, then warm
            clock.now += 2**-6 if calls[name] == 2 else 2**-10

        return run

    entries = [Entry("numpy", "forward", k, k, formulation(k)) for k in calls]
    monkeypatch.setattr(harness, "build_entries", lambda x, backends, device: entries)
    monkeypatch.setattr(harness, "verify", lambda entries, x: [e.fn() for e in entries])
    case = draw_cases(1, 0)[0]
    _, samples = harness.time_case(case, ["numpy"], "cpu", 2, 2**-4, "wall", 0.0)
    assert all(s == [2**-10] * 2 for s in samples.values())
    # verify's call, the cold one, the sizing one, then 2^-4 / 2^-10 = 64 per batch
    assert calls == {"gatherx": 3 + 2 * 64, "native": 3 + 2 * 64}


def _small_seed_with(dtype: str, n: int, most: int = 64 * 2**10) -> int:
    """The first seed whose ``n`` small cases (see `_small_seed`) include ``dtype`` data."""
    for seed in range(5000):
        cases = draw_cases(n, seed)
        sizes = [max(c.out_bytes, math.prod(c.data_shape) * 8) for c in cases]
        if max(sizes) <= most and any(c.dtype == dtype for c in cases):
            return seed
    raise AssertionError("no small seed")


@pytest.mark.parametrize("ml_dtypes", [True, False])
def test_sweep_times_bfloat16_data_or_says_what_it_needs(tmp_path, capsys, monkeypatch, ml_dtypes):
    """bfloat16 cases are timed, gradients included, where ml_dtypes gives NumPy the dtype;
    without it they are left out, and the run says so."""
    from gatherx.bench import sweep

    if not ml_dtypes:

        def missing(name: str) -> np.dtype:
            raise ImportError("No module named 'ml_dtypes'")

        monkeypatch.setattr(sweep, "numpy_dtype", missing)
    seed = _small_seed_with("bfloat16", 4)
    path = tmp_path / "sweep.json"
    argv = ["bench", "--sweep", "4", "--seed", str(seed), "--quick", "--backends", "numpy"]
    assert main([*argv, "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    timed = {(r["dtype"], r["task"]) for r in json.loads(path.read_text())["results"]}
    drawn = [c for c in draw_cases(4, seed) if c.dtype == "bfloat16"]
    if ml_dtypes:
        assert {("bfloat16", "forward"), ("bfloat16", "gather_grad")} <= timed
        assert "needs ml_dtypes" not in out + err
    else:
        assert not {d for d, _ in timed} & {"bfloat16"}
        assert f"ml_dtypes is not installed: {len(drawn)} bfloat16 cases left out" in err
        assert "(bfloat16 needs ml_dtypes) data" in out


def test_times_read_in_the_unit_of_their_size():
    """The report's times: microseconds below a millisecond, milliseconds above, and a dash
    for a formulation that was not timed."""
    from gatherx.bench.report import fmt_time

    assert [fmt_time(t) for t in (4.04e-6, 9.9949e-4, 1e-3, 0.0123456)] == [
        "4.0 us", "999.5 us", "1.00 ms", "12.35 ms"
    ]  # fmt: skip
    assert fmt_time(math.nan) == "-"
