"""The benchmark's results: one row per backend and task, and its Markdown tables."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .cases import FLOOR_OF, FLOOR_TASK, OUT_TASK, Case
from .formulations import Entry


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
    #: A copy of the output into a fresh array by the row's backend (NumPy's for backends
    #: without one): the floor of a gather that allocates its result.
    alloc: float = math.nan
    #: Forward rows: the least median time of any native forward formulation of any backend
    #: (NumPy, PyTorch, JAX, onnxruntime) on the case, and its name.
    fastest: float = math.nan
    fastest_label: str = ""


def summarize(case: Case, entries: Sequence[Entry], samples: dict[str, list[float]]) -> list[Row]:
    """One row per (backend, task): gatherx against the native formulation of least median.

    The ratio pairs the two formulations' times round by round: on a shared machine whose
    speed drifts between rounds, a round's two times saw the same conditions, and the median
    of their ratios varies less from run to run than the ratio of the two medians.
    """
    times = {name: statistics.median(s) for name, s in samples.items()}
    by_group: dict[tuple[str, str], dict[str, str]] = {}
    memcpy = math.nan
    alloc: dict[str, float] = {}
    for e in entries:
        name = name_of(e)
        if e.kind == "memcpy":
            memcpy = times[name]
            continue
        if e.kind == "alloc":
            alloc[e.backend] = times[name]
            continue
        if e.kind == "fresh":  # a reference for the out= table, no rival
            continue
        if e.kind == "floor":  # gatherx against it in a row of its own
            by_group.setdefault((e.backend, FLOOR_TASK), {})["native"] = name
            continue
        group = by_group.setdefault((e.backend, e.task), {})
        if e.kind == "gatherx":
            group["gatherx"] = name
            if e.task == FLOOR_OF:
                by_group.setdefault((e.backend, FLOOR_TASK), {})["gatherx"] = name
        elif "native" not in group or times[name] < times[group["native"]]:
            group["native"] = name
    # Into a fresh result or into out=: each row's rivals of all backends do the same.
    fastest: dict[bool, Entry] = {}
    for e in entries:
        if e.kind == "native" and is_forward(e.task):
            best = fastest.get(e.task == OUT_TASK)
            if best is None or times[name_of(e)] < times[name_of(best)]:
                fastest[e.task == OUT_TASK] = e
    rows = []
    for (backend, task), group in by_group.items():
        if "gatherx" in group and "native" in group:
            gx, native = group["gatherx"], group["native"]
            ratio = statistics.median(
                g / b for g, b in zip(samples[gx], samples[native], strict=True)
            )
            label = native.rpartition(" | ")[2]
            fresh = alloc.get(backend, alloc.get("numpy", math.nan))
            row = Row(case, backend, task, times[gx], label, times[native], memcpy, ratio, fresh)
            best = fastest.get(task == OUT_TASK)
            if best is not None and is_forward(task):
                row.fastest = times[name_of(best)]
                row.fastest_label = f"{best.backend} {best.label}"
            rows.append(row)
    return rows


def is_forward(task: str) -> bool:
    """Whether ``task`` is a plain forward gather (``forward``, ``forward (jit)``, ...)."""
    return task.startswith("forward") and "backward" not in task


def name_of(e: Entry) -> str:
    return f"{e.backend} | {e.task} | {e.label}"


def group_of(e: Entry) -> str:
    """The formulations timed against each other: one backend's one task (copies alone)."""
    return name_of(e) if e.kind in ("memcpy", "alloc") else f"{e.backend} | {e.task}"


def fmt_time(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def summary_table(rows: Sequence[Row]) -> str:
    """One line per row; forward rows set gatherx against a copy of their output into a
    preallocated buffer (the floor of any gather) and into a fresh one (the floor of one
    that allocates its result, as every call without ``out=`` does)."""
    lines = [
        "| case | backend | task | gatherx | best native | gatherx / best | "
        "gatherx / preallocated copy | gatherx / allocating copy | gatherx / fastest of all |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = f" (beats it by {(1 / r.ratio - 1) * 100:.0f}%)" if r.ratio < 0.95 else ""
        fastest = ""
        if not math.isnan(r.fastest):
            fastest = f"{r.gatherx / r.fastest:.2f} ({r.fastest_label})"
        floors = "- | -"
        if is_forward(r.task):
            floors = f"{_ratio(r.gatherx, r.memcpy)} | {_ratio(r.gatherx, r.alloc)}"
        lines.append(
            f"| {r.case.name} | {r.backend} | {r.task} | {fmt_time(r.gatherx)} | "
            f"{r.best_label} {fmt_time(r.best)} | {r.ratio:.2f}{note} | "
            f"{floors} | {fastest} |"
        )
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    return "-" if math.isnan(a) or math.isnan(b) or b <= 0 else f"{a / b:.2f}"


def out_table(cases: Sequence[Case], results: dict[str, dict[str, float]]) -> str:
    """Each backend's gatherx with and without ``out=`` on each case (timed in one group),
    beside the copies of the output into a preallocated and a fresh buffer: how much
    ``out=`` saves."""
    lines = [
        "| case | output | backend | gatherx | gatherx out= | speed-up | preallocated copy | "
        "allocating copy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        times = results.get(case.name, {})
        copy = times.get("numpy | forward | memcpy of output", math.nan)
        mib = case.out_bytes / 2**20
        for backend in ("numpy", "torch"):
            plain = times.get(f"{backend} | {OUT_TASK} | gatherx, fresh result", math.nan)
            into = times.get(f"{backend} | {OUT_TASK} | gatherx", math.nan)
            if math.isnan(plain) or math.isnan(into):
                continue
            fresh = times.get(f"{backend} | forward | allocating copy of output", math.nan)
            lines.append(
                f"| {case.name} | {case.out_shape} ({mib:.1f} MiB) | {backend} | "
                f"{fmt_time(plain)} | {fmt_time(into)} | {_ratio(plain, into)}x | "
                f"{fmt_time(copy)} | {fmt_time(fresh)} |"
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
