"""The benchmark's results: one row per backend and task, and its Markdown tables."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .cases import Case, goal_for
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
    #: Forward rows: the least median time of any native forward formulation of any backend
    #: (NumPy, PyTorch, JAX, onnxruntime) on the case, and its name.
    fastest: float = math.nan
    fastest_label: str = ""

    def goal(self) -> tuple[str, bool | None]:
        """The goal text and whether it is met; None where no goal is set."""
        goal = goal_for(self.case, self.backend, self.task)
        if goal is None:
            return "", None
        extra = self.gatherx - self.best
        met = goal.met(self.ratio, extra)
        if goal.kind == "extra":
            return f"{extra * 1e6:+.1f} us ({goal.text()})", met
        return goal.text(), met


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
    forward = [e for e in entries if e.kind == "native" and is_forward(e.task)]
    fastest = min(forward, key=lambda e: times[name_of(e)], default=None)
    rows = []
    for (backend, task), group in by_group.items():
        if "gatherx" in group and "native" in group:
            gx, native = group["gatherx"], group["native"]
            ratio = statistics.median(
                g / b for g, b in zip(samples[gx], samples[native], strict=True)
            )
            label = native.rpartition(" | ")[2]
            row = Row(case, backend, task, times[gx], label, times[native], memcpy, ratio)
            if fastest is not None and is_forward(task):
                row.fastest = times[name_of(fastest)]
                row.fastest_label = f"{fastest.backend} {fastest.label}"
            rows.append(row)
    return rows


def is_forward(task: str) -> bool:
    """Whether ``task`` is a plain forward gather (``forward``, ``forward (jit)``, ...)."""
    return task.startswith("forward") and "backward" not in task


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
        "gatherx / memcpy | gatherx / fastest of all | goal | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        goal, met = r.goal()
        mark = "" if met is None else ("yes" if met else "**no**")
        note = f" (beats it by {(1 / r.ratio - 1) * 100:.0f}%)" if r.ratio < 0.95 else ""
        fastest = ""
        if not math.isnan(r.fastest):
            fastest = f"{r.gatherx / r.fastest:.2f} ({r.fastest_label})"
        lines.append(
            f"| {r.case.name} | {r.backend} | {r.task} | {fmt_time(r.gatherx)} | "
            f"{r.best_label} {fmt_time(r.best)} | {r.ratio:.2f}{note} | "
            f"{r.gatherx / r.memcpy:.2f} | {fastest} | {goal} | {mark} |"
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
