"""``gatherx bench --sweep N --seed S``: N random cases, summarised in percentiles.

The cases are drawn from ``numpy.random.default_rng(S)`` alone (`draw_cases`), so a seed
names them; each is timed as the fixed cases are (`time_case`: verified formulations,
interleaved rounds), with fewer and shorter rounds, and gatherx's time is set against the
fastest native formulation of its backend and task in that case (the median of the paired
per-round ratios, as `summarize` computes them).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .cases import FLOOR_OF, FLOOR_TASK, Case, itemsize, numpy_dtype
from .formulations import Entry
from .harness import chosen_backends, emit, report_header, time_case
from .machine import Load, environment, huge_pages, machine_record
from .report import fmt_time, name_of, summarize

#: The backends a sweep times (onnxruntime's session takes float32 only: left out).
SWEEP_BACKENDS = ("numpy", "torch", "jax")
#: The dtypes of the data, one drawn per case.
SWEEP_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool")
#: The most bytes of output, of data (a strided view's whole buffer) and of indices.
MAX_BYTES = 64 * 2**20
#: The fewest output bytes drawn: the output size is log-uniform between the two.
MIN_BYTES = 4
#: Calls whose best native is faster than this are also summarised by gatherx's extra time.
FAST_CALL = 20e-6
#: The most indices per data slot in half precision on average: their gradient, a sum of that
#: many values in {-1, 0, 1}, stays below 2048 (float16) or 256 (bfloat16), where the dtype
#: still holds every integer.
HALF_DUPLICATES = {"float16": 2**16, "bfloat16": 2**11}
#: The order of the tasks in the tables.
TASKS = (
    "forward", "forward (out=)", "forward+backward", FLOOR_TASK, "gather_grad", "forward (jit)",
    "forward (eager)", "vjp (jit)", "gather_grad (eager)",
)  # fmt: skip


def draw_case(rng: np.random.Generator, name: str) -> Case:
    """One random case drawn from ``rng``, named ``name``.

    Data of rank 1-5 and any axis, negative ones as often as non-negative ones; indices of
    rank 0-3, empty in one of ten cases with indices of rank at least one; one of
    `SWEEP_DTYPES`; strided data in about a third of the cases. The output's size is drawn
    log-uniformly between `MIN_BYTES` and `MAX_BYTES`, then split at random over its
    dimensions; the size of the gathered axis is log-uniform up to what keeps the data
    within `MAX_BYTES`.

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator; the same state draws the same case.
    name : str
        The case's name.

    Returns
    -------
    Case
        The case drawn.
    """
    rank = int(rng.integers(1, 6))
    ax = int(rng.integers(0, rank))
    axis = ax - rank if rng.random() < 0.5 else ax
    k = int(rng.integers(0, 4))
    dtype = str(SWEEP_DTYPES[int(rng.integers(len(SWEEP_DTYPES)))])
    strided = bool(rng.random() < 0.35)
    empty = k > 0 and bool(rng.random() < 0.1)
    size_of = itemsize(dtype)
    out_cap = MAX_BYTES // size_of
    data_cap = out_cap // (2 if strided else 1)
    out_size = math.exp(rng.uniform(math.log(MIN_BYTES), math.log(MAX_BYTES))) / size_of
    dims = _split(rng, max(1.0, out_size), rank - 1 + k)
    _shrink(dims, list(range(len(dims))), out_cap)
    outer, index, inner = dims[:ax], dims[ax : ax + k], dims[ax + k :]
    if empty:
        index[int(rng.integers(k))] = 0
    rest = outer + inner
    _shrink(rest, list(range(len(rest))), data_cap)
    outer, inner = rest[:ax], rest[ax:]
    s_max = max(1, data_cap // max(1, math.prod(rest)))
    size = min(s_max, max(1, int(math.exp(rng.uniform(0.0, math.log(s_max + 1))))))
    limit = MAX_BYTES // 8  # int64 indices
    if dtype in HALF_DUPLICATES:
        limit = min(limit, HALF_DUPLICATES[dtype] * size)
    _shrink(index, list(range(k)), limit)
    data_shape = (*outer, size, *inner)
    if math.prod(data_shape) <= 1:
        strided = False  # no axis to stride along
    case = Case(name, data_shape, tuple(index), axis, dtype=dtype, strided=strided)
    return replace(case, large=case.out_bytes >= 2**20)


def _split(rng: np.random.Generator, total: float, parts: int) -> list[int]:
    """``parts`` sizes whose product is about ``total``, split log-uniformly at random."""
    if parts == 0:
        return []
    weights = rng.exponential(size=parts)
    logs = math.log(total) * weights / weights.sum()
    return [max(1, round(math.exp(w))) for w in logs]


def _shrink(sizes: list[int], at: list[int], limit: int) -> None:
    """Halve the largest of ``sizes[at]`` until their product is at most ``limit``."""
    while at and math.prod(sizes[i] for i in at) > limit:
        i = max(at, key=lambda j: sizes[j])
        sizes[i] //= 2


def draw_cases(n: int, seed: int) -> list[Case]:
    """The ``n`` cases of ``seed``: the first ``m`` of them are those of ``draw_cases(m,
    seed)``.

    Raises
    ------
    ValueError
        If ``n`` is negative.
    """
    if n < 0:
        msg = f"--sweep needs a number of cases >= 0, not {n}"
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    return [draw_case(rng, f"seed{seed}-{i:03d}") for i in range(n)]


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    """gatherx against the fastest native of one backend's task on one case of the sweep."""

    number: int
    case: Case
    backend: str
    task: str
    gatherx: float
    best_label: str
    best: float
    #: Median over rounds of gatherx's time over the best native's in the same round.
    ratio: float
    gatherx_rounds: list[float]
    best_rounds: list[float]

    def rerun(self) -> str:
        """A command line that times this case again, with the fixed cases' rounds."""
        return (f"python -m gatherx bench --case-spec {shlex.quote(self.case.spec())} "
                f"--backends {self.backend}")  # fmt: skip

    def record(self) -> dict[str, Any]:
        """The result as JSON: shapes, times in seconds, the ratio and the rounds."""
        c = self.case
        return {
            "number": self.number,
            "case": c.name,
            "spec": c.spec(),
            "data_shape": list(c.data_shape),
            "index_shape": list(c.index_shape),
            "axis": c.axis,
            "dtype": c.dtype,
            "strided": c.strided,
            "out_shape": list(c.out_shape),
            "out_bytes": c.out_bytes,
            "backend": self.backend,
            "task": self.task,
            "gatherx": self.gatherx,
            "best_label": self.best_label,
            "best": self.best,
            "ratio": self.ratio,
            "gatherx_rounds": self.gatherx_rounds,
            "best_rounds": self.best_rounds,
            "rerun": self.rerun(),
        }


def results_of(
    number: int, case: Case, entries: Sequence[Entry], samples: dict[str, list[float]]
) -> list[Result]:
    """One `Result` per backend and task that has gatherx and a native on ``case``."""
    gatherx = {(e.backend, e.task): name_of(e) for e in entries if e.kind == "gatherx"}
    out = []
    for row in summarize(case, entries, samples):
        task = FLOOR_OF if row.task == FLOOR_TASK else row.task  # (the floor's: its gatherx)
        best = f"{row.backend} | {task} | {row.best_label}"
        out.append(Result(
            number, case, row.backend, row.task, row.gatherx, row.best_label, row.best,
            row.ratio, samples[gatherx[row.backend, task]], samples[best],
        ))  # fmt: skip
    return out


@dataclass
class Stats:
    """The sweep's summary of one backend's task: percentiles of gatherx / best native, over
    all calls and over those whose best native takes `FAST_CALL` or more (where the copy,
    not the call, takes the time), and of gatherx's extra time on the others."""

    backend: str
    task: str
    cases: int
    median: float
    p90: float
    p95: float
    worst: float
    fast: int
    extra_median: float
    extra_p95: float
    slow: int
    slow_median: float
    slow_p95: float


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear between order statistics); NaN if empty."""
    return float(np.percentile(values, q)) if len(values) else math.nan


def statistics_of(records: Sequence[Mapping[str, Any]]) -> list[Stats]:
    """The `Stats` of each backend and task among ``records`` (`Result.record` dicts, or
    anything with ``backend``, ``task``, ``ratio``, ``gatherx`` and ``best``), in the tables'
    order."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["backend"], r["task"]), []).append(r)
    order = list(SWEEP_BACKENDS)
    keys = sorted(groups, key=lambda k: (order.index(k[0]) if k[0] in order else len(order),
                                         TASKS.index(k[1]) if k[1] in TASKS else len(TASKS),
                                         k))  # fmt: skip
    out = []
    for backend, task in keys:
        group = groups[backend, task]
        ratios = [float(r["ratio"]) for r in group]
        extra = [float(r["gatherx"]) - float(r["best"]) for r in group if r["best"] < FAST_CALL]
        slow = [float(r["ratio"]) for r in group if r["best"] >= FAST_CALL]
        out.append(Stats(
            backend, task, len(ratios), percentile(ratios, 50), percentile(ratios, 90),
            percentile(ratios, 95), max(ratios), len(extra), percentile(extra, 50),
            percentile(extra, 95), len(slow), percentile(slow, 50), percentile(slow, 95),
        ))  # fmt: skip
    return out


def _us(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e6:+.1f} us"


def _ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def stats_table(stats: Sequence[Stats]) -> str:
    """The percentile table: one line per backend and task."""
    us = f"{FAST_CALL * 1e6:.0f} us"
    lines = [
        "| backend | task | cases | median | 90th pct | 95th pct | max | "
        f"calls, best < {us} | their extra: median | 95th pct | "
        f"calls, best >= {us} | their ratio: median | 95th pct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in stats:
        lines.append(
            f"| {s.backend} | {s.task} | {s.cases} | {s.median:.3f} | {s.p90:.3f} | "
            f"{s.p95:.3f} | {s.worst:.3f} | {s.fast} | {_us(s.extra_median)} | "
            f"{_us(s.extra_p95)} | {s.slow} | {_ratio(s.slow_median)} | {_ratio(s.slow_p95)} |"
        )
    return "\n".join(lines)


def worst_table(results: Sequence[Result], count: int = 10) -> str:
    """The ``count`` results of the highest gatherx / best native, each with its rerun."""
    worst = sorted(results, key=lambda r: r.ratio, reverse=True)[:count]
    lines = [
        "| gatherx / best | backend | task | case | gatherx | best native | rerun |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in worst:
        lines.append(
            f"| {r.ratio:.3f} | {r.backend} | {r.task} | {r.case.name}: {r.case.describe()} "
            f"| {fmt_time(r.gatherx)} | {r.best_label} {fmt_time(r.best)} | `{r.rerun()}` |"
        )
    return "\n".join(lines)


def run_sweep(args: argparse.Namespace) -> int:
    """Time ``args.sweep`` random cases of ``args.seed``; print and save their summary; 0."""
    seed = 0 if args.seed is None else args.seed
    cases = draw_cases(args.sweep, seed)
    try:
        numpy_dtype("bfloat16")
        dtypes = ", ".join(SWEEP_DTYPES)
    except ImportError:  # NumPy's bfloat16 is ml_dtypes' (jax installs it)
        left = [c for c in cases if c.dtype != "bfloat16"]
        others = ", ".join(d for d in SWEEP_DTYPES if d != "bfloat16")
        dtypes = f"{others} (bfloat16 needs ml_dtypes)"
        print(f"ml_dtypes is not installed: {len(cases) - len(left)} bfloat16 cases left out",
              file=sys.stderr, flush=True)  # fmt: skip
        cases = left
    backends, skipped = chosen_backends(args, SWEEP_BACKENDS)
    repeats = args.repeats or (2 if args.quick else 5)
    min_sample = 2e-4 if args.quick else 1.5e-3
    pause = 0.005 if args.quick else 0.02
    results: list[Result] = []
    load = Load()
    load.sample()
    start = time.perf_counter()
    for number, case in enumerate(cases):
        timed = ("gatherx", "native", "floor")  # not the copies: no ratio needs them
        entries, samples = time_case(
            case, backends, args.torch_device, repeats, min_sample, args.clock, pause,
            kinds=timed, collect_once=True,
        )  # fmt: skip
        results += results_of(number, case, entries, samples)
        if number % 10 == 9:
            load.sample()
        took = time.perf_counter() - start
        print(f"  {case.name} ({number + 1}/{len(cases)}): {case.describe()}, "
              f"{case.out_bytes / 2**10:.1f} KiB out, done ({took:.0f} s)",
              file=sys.stderr, flush=True)  # fmt: skip
    load.sample()
    elapsed = time.perf_counter() - start
    records = [r.record() for r in results]
    stats = statistics_of(records)
    torch = "torch" in backends
    header = (
        f"gatherx bench --sweep {args.sweep} --seed {seed}: {huge_pages(torch)}; {len(cases)} "
        f"random cases ({dtypes} data, contiguous and strided, int64 "
        f"indices), {repeats} interleaved rounds of {min_sample * 1e3:g} ms samples "
        "(ratios: gatherx / the fastest native of its backend and task, medians of the "
        f"per-round ratios), {args.clock} clock ({elapsed:.0f} s); {environment(load)}"
    )
    header = report_header(header, skipped, load)
    worst = f"The {min(10, len(results))} highest gatherx / best native:\n\n{worst_table(results)}"
    emit(f"{header}\n\n{stats_table(stats)}\n\n{worst}\n", args.markdown)
    if args.plot:
        from .plot import sweep_plot  # matplotlib only when a plot is asked for

        sweep_plot(results, args.plot, load)
        print(f"\nplot saved to {args.plot}")
    if args.json:
        payload = {
            "kind": "sweep",
            "seed": seed,
            "count": len(cases),
            "backends": backends,
            "repeats": repeats,
            "min_sample": min_sample,
            "clock": args.clock,
            "seconds": elapsed,
            **machine_record(load, torch),
            "summary": [vars(s) for s in stats],
            "results": records,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
    return 0
