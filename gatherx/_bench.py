"""``gatherx bench``: gatherx against each backend's native Gather formulations, timed interleaved.

The formulations compared with each other (one backend's one task: gatherx and the native
ones) run in interleaved rounds, one call batch each in a fresh random order, so load from
other processes hits all of them alike; groups run one after the other, so no other runtime's
worker threads compete with them.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ._rules import output_shape


@dataclass(frozen=True)
class Case:
    """One benchmark shape: float32 ``data`` gathered with int64 ``indices`` on ``axis``."""

    name: str
    data_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    axis: int
    large: bool = True

    @property
    def ax(self) -> int:
        return self.axis % len(self.data_shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return output_shape(self.data_shape, self.index_shape, self.ax)

    def describe(self) -> str:
        return f"{self.data_shape} / {self.index_shape} / axis {self.axis}"


CASES = (
    Case("tiny", (5, 4), (2, 2), 0, large=False),
    Case("small", (1000, 16), (100,), 0, large=False),
    Case("embed", (50000, 256), (64, 128), 0),
    Case("cols", (2048, 4096), (1024,), 1),
    Case("mid", (64, 512, 256), (2, 256), 1),
    Case("last", (256, 256, 64), (32,), -1),
)

BACKENDS = ("numpy", "torch", "jax", "onnxruntime")

#: (backend, task) -> (goal on large cases, the ratio it must stay within).
#: Ratio = gatherx time / best native time; ``np.add.at`` must be 3x slower than gather_grad.
GOALS: dict[tuple[str, str], tuple[str, float]] = {
    ("numpy", "forward"): ("<= 1.10", 1.10),
    ("torch", "forward"): ("<= 1.10", 1.10),
    ("jax", "forward (jit)"): ("<= 1.10", 1.10),
    ("torch", "forward+backward"): ("<= 1.10", 1.10),
    ("jax", "vjp (jit)"): ("<= 1.10", 1.10),
    ("numpy", "gather_grad"): (">= 3x faster", 1 / 3),
}
#: Dispatch overhead allowed over ``np.take`` on the tiny case, in seconds.
TINY_OVERHEAD = 4e-6


@dataclass
class Entry:
    """One timed formulation: ``kind`` is gatherx, native or memcpy."""

    backend: str
    task: str
    label: str
    kind: str
    fn: Callable[[], Any]
    check: Callable[[], Any] | None = None  # returns a NumPy result to compare, if not fn


# --------------------------------------------------------------------------- timing


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
#: Functions this slow or slower are timed call by call, interleaved (see `rounds`).
PER_CALL_SECONDS = 50e-6


def rounds(
    fns: dict[str, Callable[[], Any]],
    repeats: int,
    min_sample: float,
    clock: str = "wall",
    groups: dict[str, str] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each function in each of ``repeats`` interleaved rounds.

    Each sample is the mean of a batch of calls lasting about ``min_sample`` seconds; every
    round runs the functions in a fresh random order, so no function always follows the same
    neighbour (and inherits its cache and allocator state). Functions of at least
    ``PER_CALL_SECONDS`` are interleaved call by call within the round, each call timed:
    a batch of one function's calls reuses one output buffer, and where that address is slow
    (its cache sets, its pages) the whole batch was, a placement that differs from process to
    process and once made one of two identical XLA programs 1.5x slower for a whole run.
    Functions in one of ``groups`` (name -> group) run the same number of calls per batch,
    sized by the group's median time: the first call of a batch often pays for a fresh
    allocation that later ones reuse, and unequal batches would bias the comparison. The
    ``cpu`` clock counts this process's CPU time (all its threads), which other processes'
    load on a shared machine does not inflate.
    """
    now = CLOCKS[clock]
    names = list(fns)
    once = {}
    for name in names:
        fn = fns[name]
        start = time.perf_counter()
        fn()  # warm-up: compilation, caches, allocator
        once[name] = time.perf_counter() - start
        if once[name] < min_sample:  # a second call, now warm, to size the batch
            start = time.perf_counter()
            fn()
            once[name] = time.perf_counter() - start
    group_of = groups or {name: name for name in names}
    typical = {
        g: statistics.median(once[n] for n in names if group_of[n] == g)
        for g in set(group_of.values())
    }
    inner = {
        name: max(1, min(20_000, int(min_sample / max(typical[group_of[name]], 1e-8))))
        for name in names
    }
    per_call = min(typical.values()) >= PER_CALL_SECONDS
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        rng = random.Random(0)
        for _ in range(repeats):
            if per_call:
                total, left = dict.fromkeys(names, 0.0), dict(inner)
                while any(left.values()):
                    for name in rng.sample(names, len(names)):
                        if left[name]:
                            start = now()
                            fns[name]()
                            total[name] += now() - start
                            left[name] -= 1
                for name in names:
                    samples[name].append(total[name] / inner[name])
                continue
            for name in rng.sample(names, len(names)):
                fn, k = fns[name], inner[name]
                start = now()
                for _ in range(k):
                    fn()
                samples[name].append((now() - start) / k)
    finally:
        gc.enable()
    return samples


# --------------------------------------------------------------------------- inputs


@dataclass
class Inputs:
    """Host arrays of one case: data, indices, output gradient, and the NumPy oracles."""

    case: Case
    data: np.ndarray
    indices: np.ndarray
    grad: np.ndarray
    out: np.ndarray
    data_grad: np.ndarray

    @property
    def key(self) -> tuple[Any, ...]:
        return (slice(None),) * self.case.ax + (self.indices,)


def make_inputs(case: Case, seed: int = 0) -> Inputs:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(case.data_shape, dtype=np.float32)
    size = case.data_shape[case.ax]
    indices = rng.integers(0, size, size=case.index_shape, dtype=np.int64)
    grad = rng.standard_normal(case.out_shape, dtype=np.float32)
    out = np.take(data, indices, axis=case.ax)
    data_grad = np.zeros(case.data_shape, np.float32)
    key: tuple[Any, ...] = (*(slice(None),) * case.ax, indices)
    np.add.at(data_grad, key, grad)
    return Inputs(case, data, indices, grad, out, data_grad)


# --------------------------------------------------------------------------- formulations


def numpy_entries(x: Inputs) -> list[Entry]:
    import gatherx

    c, d, i, g = x.case, x.data, x.indices, x.grad
    key = x.key
    buf = np.empty_like(x.out)

    def add_at() -> np.ndarray:
        z = np.zeros(c.data_shape, g.dtype)
        np.add.at(z, key, g)
        return z

    return [
        Entry("numpy", "forward", "memcpy of output", "memcpy", partial(np.copyto, buf, x.out),
              check=lambda: x.out),
        Entry("numpy", "forward", "gatherx", "gatherx", partial(gatherx.gather, d, i, axis=c.axis)),
        Entry("numpy", "forward", "np.take", "native", partial(np.take, d, i, axis=c.axis)),
        Entry("numpy", "forward", "fancy indexing", "native", lambda: d[key]),
        Entry("numpy", "gather_grad", "gatherx", "gatherx",
              partial(gatherx.gather_grad, c.data_shape, i, g, axis=c.axis)),
        Entry("numpy", "gather_grad", "np.add.at", "native", add_at),
    ]  # fmt: skip


def torch_entries(x: Inputs, device: str) -> list[Entry]:
    import torch

    import gatherx

    c, ax = x.case, x.case.ax
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    td = torch.from_numpy(x.data).to(dev)
    ti = torch.from_numpy(x.indices).to(dev)
    tg = torch.from_numpy(x.grad).to(dev)

    key = (slice(None),) * ax + (ti,)
    oshape = c.out_shape
    leaf = td.clone().requires_grad_(True)
    k = ti.ndim
    moved_back = (tuple(range(k)), tuple(range(ax, ax + k)))

    def timed(f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            out = f()
            sync()
            return out

        return run

    def host(t: Any) -> np.ndarray:
        return (t[0] if isinstance(t, tuple) else t).detach().cpu().numpy()

    def fwd_bwd(f: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], Any]:
        return timed(lambda: torch.autograd.grad(f(leaf), leaf, tg))

    def index_add() -> torch.Tensor:
        source = tg.reshape((*c.data_shape[:ax], ti.numel(), *c.data_shape[ax + 1 :]))
        return tg.new_zeros(c.data_shape).index_add_(ax, ti.reshape(-1), source)

    gx = partial(gatherx.gather, axis=c.axis)
    entries = [
        ("forward", "gatherx", "gatherx", lambda: gx(td, ti)),
        ("forward", "index_select", "native",
         lambda: torch.index_select(td, ax, ti.reshape(-1)).view(oshape)),
        ("forward", "advanced indexing", "native", lambda: td[key]),
        ("forward", "movedim + indexing", "native",
         lambda: torch.movedim(torch.movedim(td, ax, 0)[ti], *moved_back)),
        ("forward", "movedim + index_select", "native",
         lambda: torch.movedim(
             torch.index_select(torch.movedim(td, ax, 0), 0, ti.reshape(-1)).view(
                 ti.shape + td.movedim(ax, 0).shape[1:]), *moved_back)),
        ("forward+backward", "gatherx", "gatherx", fwd_bwd(lambda t: gx(t, ti))),
        ("forward+backward", "index_select autograd", "native",
         fwd_bwd(lambda t: torch.index_select(t, ax, ti.reshape(-1)).view(oshape))),
        ("forward+backward", "advanced indexing autograd", "native", fwd_bwd(lambda t: t[key])),
        ("gather_grad", "gatherx", "gatherx",
         lambda: gatherx.gather_grad(c.data_shape, ti, tg, axis=c.axis)),
        ("gather_grad", "zeros + index_add_", "native", index_add),
    ]  # fmt: skip
    if ax == 0:
        rows = (c.data_shape[0], -1)
        emb = torch.nn.functional.embedding
        entries.insert(5, ("forward", "embedding", "native",
                           lambda: emb(ti, td.view(rows)).view(oshape)))  # fmt: skip
        entries.append(("forward+backward", "embedding autograd", "native",
                        fwd_bwd(lambda t: emb(ti, t.view(rows)).view(oshape))))  # fmt: skip
    out = []
    for task, label, kind, f in entries:
        run = f if task == "forward+backward" else timed(f)
        out.append(Entry("torch", task, label, kind, run, check=partial(_host_of, host, run)))
    return out


def _host_of(host: Callable[[Any], np.ndarray], run: Callable[[], Any]) -> np.ndarray:
    return host(run())


def jax_entries(x: Inputs) -> list[Entry]:
    import jax
    import jax.numpy as jnp

    import gatherx

    c, ax = x.case, x.case.ax
    jd, ji, jg = jnp.asarray(x.data), jnp.asarray(x.indices), jnp.asarray(x.grad)

    def gx(d: Any, i: Any) -> Any:
        return gatherx.gather(d, i, axis=c.axis)

    def take(d: Any, i: Any) -> Any:
        return jnp.take(d, i, axis=ax)

    def index(d: Any, i: Any) -> Any:
        return d[(slice(None),) * ax + (i,)]

    def vjp(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        return lambda d, i, g: jax.vjp(lambda t: f(t, i), d)[1](g)[0]

    def ready(f: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        return lambda: f(*args).block_until_ready()

    return [
        Entry("jax", "forward (jit)", "gatherx in jit", "gatherx", ready(jax.jit(gx), jd, ji)),
        Entry("jax", "forward (jit)", "jnp.take", "native", ready(jax.jit(take), jd, ji)),
        Entry("jax", "forward (jit)", "indexing", "native", ready(jax.jit(index), jd, ji)),
        Entry("jax", "forward (eager)", "gatherx", "gatherx", ready(gx, jd, ji)),
        Entry("jax", "forward (eager)", "jnp.take", "native", ready(take, jd, ji)),
        Entry("jax", "forward (eager)", "indexing", "native", ready(index, jd, ji)),
        Entry("jax", "vjp (jit)", "gatherx in jit", "gatherx", ready(jax.jit(vjp(gx)), jd, ji, jg)),
        Entry("jax", "vjp (jit)", "jnp.take", "native", ready(jax.jit(vjp(take)), jd, ji, jg)),
        Entry("jax", "vjp (jit)", "indexing", "native", ready(jax.jit(vjp(index)), jd, ji, jg)),
        Entry("jax", "gather_grad (eager)", "gatherx", "gatherx",
              ready(partial(gatherx.gather_grad, c.data_shape, axis=c.axis), ji, jg)),
        Entry("jax", "gather_grad (eager)", "jnp.take vjp (jit)", "native",
              ready(jax.jit(vjp(take)), jd, ji, jg)),
    ]  # fmt: skip


def ort_entries(x: Inputs) -> list[Entry]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    c = x.case
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=c.axis)
    graph = helper.make_graph(
        [node],
        "gather",
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, list(c.data_shape)),
            helper.make_tensor_value_info("indices", TensorProto.INT64, list(c.index_shape)),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(c.out_shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"data": x.data, "indices": x.indices}

    def run() -> np.ndarray:
        return session.run(None, feeds)[0]

    return [Entry("onnxruntime", "forward", "InferenceSession", "native", run)]


def build_entries(x: Inputs, backends: Sequence[str], torch_device: str) -> list[Entry]:
    entries = numpy_entries(x) if "numpy" in backends else numpy_entries(x)[:1]
    if "torch" in backends:
        entries += torch_entries(x, torch_device)
    if "jax" in backends:
        entries += jax_entries(x)
    if "onnxruntime" in backends:
        entries += ort_entries(x)
    return entries


def verify(entries: Sequence[Entry], x: Inputs) -> None:
    """Every formulation must compute Gather (or its gradient) before its time means anything."""
    for e in entries:
        got = np.asarray(e.check() if e.check is not None else e.fn())
        grad = "grad" in e.task or "backward" in e.task or "vjp" in e.task
        want = x.data_grad if grad else x.out
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-4):
            msg = f"bench: {e.backend} {e.task} {e.label} on {x.case.name} computes a wrong result"
            raise AssertionError(msg)


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    case: Case
    backend: str
    task: str
    gatherx: float
    best_label: str
    best: float
    memcpy: float
    #: Median over rounds of gatherx's time over the best native's in the same round.
    ratio: float

    def goal(self) -> tuple[str, bool | None]:
        """The goal text and whether it is met; None where the issue sets no goal."""
        if self.case.name == "tiny" and (self.backend, self.task) == ("numpy", "forward"):
            extra = self.gatherx - self.best
            return f"{extra * 1e6:+.1f} us (<= +4 us)", extra <= TINY_OVERHEAD
        goal = GOALS.get((self.backend, self.task))
        if goal is None or not self.case.large:
            return "", None
        text, limit = goal
        return text, self.ratio <= limit


def summarize(case: Case, entries: Sequence[Entry], samples: dict[str, list[float]]) -> list[Row]:
    """One row per (backend, task): gatherx against the native formulation of least median.

    The ratio pairs the two formulations' times round by round: on a shared machine whose
    speed drifts between rounds, a round's two times saw the same conditions, and the median
    of their ratios varies less from run to run than the ratio of the two medians.
    """
    times = {name: statistics.median(s) for name, s in samples.items()}
    by_group: dict[tuple[str, str], dict[str, str]] = {}
    memcpy = math.nan
    for e in entries:
        name = name_of(e)
        if e.kind == "memcpy":
            memcpy = times[name]
            continue
        group = by_group.setdefault((e.backend, e.task), {})
        if e.kind == "gatherx":
            group["gatherx"] = name
        elif "native" not in group or times[name] < times[group["native"]]:
            group["native"] = name
    rows = []
    for (backend, task), group in by_group.items():
        if "gatherx" in group and "native" in group:
            gx, native = group["gatherx"], group["native"]
            ratio = statistics.median(
                g / b for g, b in zip(samples[gx], samples[native], strict=True)
            )
            label = native.rpartition(" | ")[2]
            rows.append(Row(case, backend, task, times[gx], label, times[native], memcpy, ratio))
    return rows


def name_of(e: Entry) -> str:
    return f"{e.backend} | {e.task} | {e.label}"


def group_of(e: Entry) -> str:
    """The formulations timed against each other: one backend's one task (memcpy alone)."""
    return name_of(e) if e.kind == "memcpy" else f"{e.backend} | {e.task}"


def fmt_time(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def summary_table(rows: Sequence[Row]) -> str:
    lines = [
        "| case | backend | task | gatherx | best native | gatherx / best | "
        "gatherx / memcpy | goal | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        goal, met = r.goal()
        mark = "" if met is None else ("yes" if met else "**no**")
        note = f" (beats it by {(1 / r.ratio - 1) * 100:.0f}%)" if r.ratio < 0.95 else ""
        lines.append(
            f"| {r.case.name} | {r.backend} | {r.task} | {fmt_time(r.gatherx)} | "
            f"{r.best_label} {fmt_time(r.best)} | {r.ratio:.2f}{note} | "
            f"{r.gatherx / r.memcpy:.2f} | {goal} | {mark} |"
        )
    return "\n".join(lines)


def detail_table(cases: Sequence[Case], results: dict[str, dict[str, float]]) -> str:
    names: list[str] = []
    for case in cases:
        names += [n for n in results.get(case.name, {}) if n not in names]
    head = "| backend | task | formulation | " + " | ".join(c.name for c in cases) + " |"
    lines = [head, "|---|---|---|" + "---|" * len(cases)]
    for name in names:
        cells = [fmt_time(results.get(c.name, {}).get(name, math.nan)) for c in cases]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def environment() -> str:
    parts = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for module in ("torch", "jax", "onnxruntime"):
        if module in sys.modules:
            parts.append(f"{module} {sys.modules[module].__version__}")
    if "torch" in sys.modules:
        parts.append(f"torch threads {sys.modules['torch'].get_num_threads()}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    parts += [f"{os.cpu_count()} CPUs", f"load {load:.1f}", platform.machine()]
    return ", ".join(parts)


def plot(cases: Sequence[Case], rows: Sequence[Row], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r.backend, r.task) for r in rows}, key=lambda k: list(GOALS).index(k)
                    if k in GOALS else len(GOALS))  # fmt: skip
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), constrained_layout=True)
    width = 0.8 / max(1, len(groups))
    names = [c.name for c in cases]
    for j, group in enumerate(groups):
        values = []
        for c in cases:
            match = [r for r in rows if r.case.name == c.name and (r.backend, r.task) == group]
            values.append(match[0].ratio if match else math.nan)
        xs = [k + (j - (len(groups) - 1) / 2) * width for k in range(len(cases))]
        top.bar(xs, values, width, label=f"{group[0]} {group[1]}")
    top.axhline(1.10, color="black", linestyle="--", linewidth=1, label="goal 1.10")
    top.axhline(1 / 3, color="grey", linestyle=":", linewidth=1, label="gather_grad goal 1/3")
    top.set_yscale("log")
    top.set_xticks(range(len(cases)), names)
    top.set_ylabel("gatherx / best native (lower is better)")
    top.set_title("gatherx time divided by the fastest native formulation, same backend")
    top.legend(fontsize=7, ncol=3)
    forward = [g for g in groups if g[1].startswith("forward") and "backward" not in g[1]]
    width = 0.8 / max(1, 2 * len(forward))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, group in enumerate(forward):
        for half, which in enumerate(("gatherx", "best native")):
            values = []
            for c in cases:
                match = [r for r in rows if r.case.name == c.name and (r.backend, r.task) == group]
                r = match[0] if match else None
                t = (r.gatherx if which == "gatherx" else r.best) if r else math.nan
                values.append(t / r.memcpy if r else math.nan)
            bar = 2 * j + half
            xs = [k + (bar - (2 * len(forward) - 1) / 2) * width for k in range(len(cases))]
            bottom.bar(xs, values, width, color=colours[j % len(colours)],
                       hatch="" if which == "gatherx" else "//", edgecolor="white",
                       label=f"{group[0]} {group[1]}: {which}")  # fmt: skip
    bottom.axhline(1.0, color="black", linewidth=1, label="memcpy of the output")
    bottom.set_yscale("log")
    bottom.set_xticks(range(len(cases)), names)
    bottom.set_ylabel("time / memcpy of the output")
    bottom.set_title("Forward gather against a plain copy of the output bytes")
    bottom.legend(fontsize=7, ncol=3)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gatherx bench``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="few repeats and short samples: a smoke run in well under a minute",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="interleaved rounds per case (default 41, 3 with --quick)",
    )
    parser.add_argument(
        "--cases",
        default=None,
        help="comma-separated subset of: " + ", ".join(c.name for c in CASES),
    )
    parser.add_argument(
        "--backends", default=None, help="comma-separated subset of: " + ", ".join(BACKENDS)
    )
    parser.add_argument("--torch-device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--plot", default=None, metavar="PNG", help="save a plot to this path")
    parser.add_argument("--json", default=None, metavar="PATH", help="save raw times as JSON")
    parser.add_argument("--markdown", default=None, metavar="PATH",
                        help="also write the tables to this Markdown file")  # fmt: skip
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall",
                        help="wall (default) or cpu: this process's CPU time, which load from "
                        "other processes on a shared machine does not inflate")  # fmt: skip
    parser.add_argument(
        "--check-goals",
        action="store_true",
        help="exit with status 1 if a goal of the performance issue is missed",
    )


def _chosen(text: str | None, known: Sequence[str], what: str) -> list[str]:
    if text is None:
        return list(known)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        msg = f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}"
        raise ValueError(msg)
    return names


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print its tables; with ``--check-goals``, 1 if a goal is missed."""
    case_names = _chosen(args.cases, [c.name for c in CASES], "case(s)")
    cases = [c for c in CASES if c.name in case_names]
    wanted = _chosen(args.backends, BACKENDS, "backend(s)")
    module = {"onnxruntime": "onnxruntime", "torch": "torch", "jax": "jax", "numpy": "numpy"}
    backends = [b for b in wanted if importlib.util.find_spec(module[b]) is not None]
    skipped = sorted(set(wanted) - set(backends))
    repeats = args.repeats or (3 if args.quick else 41)
    min_sample = 5e-4 if args.quick else 5e-3
    if skipped:
        print(f"not installed, skipped: {', '.join(skipped)}")

    results: dict[str, dict[str, float]] = {}
    rows: list[Row] = []
    start = time.perf_counter()
    for case in cases:
        x = make_inputs(case)
        entries = build_entries(x, backends, args.torch_device)
        verify(entries, x)
        names = {name_of(e): e.fn for e in entries}
        if len(names) != len(entries):
            msg = "bench: duplicate formulation names"
            raise AssertionError(msg)
        samples: dict[str, list[float]] = {}
        for group in dict.fromkeys(group_of(e) for e in entries):
            members = {name_of(e): e.fn for e in entries if group_of(e) == group}
            together = dict.fromkeys(members, group)
            samples |= rounds(members, repeats, min_sample, args.clock, together)
            time.sleep(0.05)  # let the runtime's spinning worker threads park
        results[case.name] = {name: statistics.median(s) for name, s in samples.items()}
        rows += summarize(case, entries, samples)
        took = time.perf_counter() - start
        print(f"  {case.name}: {case.describe()} done ({took:.0f} s)", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start

    header = (
        f"gatherx bench: float32 data, int64 indices, {repeats} interleaved rounds (times: "
        "medians; ratios: medians of the per-round ratios), "
        f"{args.clock} clock ({elapsed:.0f} s); {environment()}"
    )
    text = f"{header}\n\n{summary_table(rows)}\n\n{detail_table(cases, results)}\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if args.plot:
        plot(cases, rows, args.plot)
        print(f"\nplot saved to {args.plot}")
    if args.json:
        payload = {
            "environment": environment(),
            "repeats": repeats,
            "clock": args.clock,
            "cases": {c.name: c.describe() for c in cases},
            "seconds": results,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
    missed = [r for r in rows if r.goal()[1] is False]
    return 1 if missed and args.check_goals else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatherx bench", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
