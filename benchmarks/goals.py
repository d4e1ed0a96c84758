"""The project's performance goals, judged on the JSON that ``gatherx bench`` writes.

Usage::

    python -m gatherx bench --json cases.json
    python -m gatherx bench --sweep 300 --seed 1 --json sweep.json
    python -m gatherx bench --sparse --json sparse.json
    python benchmarks/goals.py cases.json sweep.json sparse.json

Each file is the fixed cases' JSON (``--json``: goals per case, below `GOALS`), a sweep's
(``--sweep N --json``: goals on the percentiles, `SWEEP_GOALS`) or the sparse gradients'
(``--sparse --json``: `SPARSE_GOALS`). One table per file
says for each goal whether it is met; the exit status is 1 if one is missed. A sweep's goals
are judged on a sweep of at least `MIN_SWEEP_CASES` cases: a smaller one's are reported, not
judged. The gradient tasks run on the cases of floating-point data only, and JAX (without
``jax_enable_x64``) on those of 32-bit or narrower data, so they see fewer of its cases.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gatherx.bench import CASES, Case
from gatherx.bench.sweep import FAST_CALL, Stats, statistics_of

#: The task of a gather into a preallocated ``out=``, beside the plain ``forward``.
OUT_TASK = "forward (out=)"
#: Scalar picks of at most 64 KiB of output, whose goal is a fixed overhead; the column of
#: a (4096, 4096) matrix (``pick_col``) is held to the ratio of the large cases.
SMALL_PICKS = ("pick_row", "pick_wide", "pick_tall")


@dataclass(frozen=True)
class Goal:
    """A performance goal of one backend's task on some fixed cases.

    ``kind`` is ``ratio`` (gatherx time / best native time, median of the paired rounds, at
    most ``limit``), ``faster`` (that ratio at most ``1 / limit``: gatherx at least ``limit``
    times faster) or ``extra`` (gatherx's median time at most ``limit`` seconds above the
    best native's). ``cases`` names the cases it covers; empty means every large case.
    """

    backend: str
    task: str
    kind: str
    limit: float
    cases: tuple[str, ...] = ()

    def covers(self, case: Case) -> bool:
        """Whether the goal applies to ``case``."""
        return case.name in self.cases if self.cases else case.large

    def text(self) -> str:
        """The goal as the tables print it."""
        if self.kind == "extra":
            return f"<= +{self.limit * 1e6:.0f} us"
        if self.kind == "faster":
            return f">= {self.limit:g}x faster"
        return f"<= {self.limit:.2f}"

    def met(self, ratio: float, extra: float) -> bool:
        """Whether a paired ``ratio`` or an ``extra`` time (seconds) meets the goal."""
        if self.kind == "extra":
            return extra <= self.limit
        if self.kind == "faster":
            return ratio <= 1 / self.limit
        return ratio <= self.limit


#: The goals of the fixed cases, the first that covers a case applying. NumPy's forward must
#: beat the best native NumPy formulation by 10% where the row copies are short (columns,
#: the last axis, many short rows), bounds check included, and never be slower than it. A
#: scalar pick, on every backend: at most 3 us over the best native up to 64 KiB of output,
#: at most 1.05 of it on the column of a (4096, 4096) matrix. Many short rows on PyTorch: at
#: most 1.40 of index_select on the wrapped index. Into ``out=`` (NumPy and PyTorch, large
#: cases): at most 1.10 of the fastest native ``out=`` formulation.
GOALS: tuple[Goal, ...] = (
    Goal("numpy", "forward", "ratio", 0.90, ("cols", "last", "short", "short_first")),
    Goal("numpy", "forward", "ratio", 1.05, ("pick_col",)),
    Goal("numpy", "forward", "ratio", 1.00),
    Goal("numpy", "forward", "extra", 4e-6, ("tiny",)),
    Goal("numpy", "forward", "extra", 3e-6, SMALL_PICKS),
    Goal("numpy", "gather_grad", "faster", 3),
    Goal("numpy", OUT_TASK, "ratio", 1.10),
    Goal("torch", "forward", "ratio", 1.40, ("short", "short_first")),
    Goal("torch", "forward", "ratio", 1.05),
    Goal("torch", "forward", "extra", 3e-6, ("tiny", *SMALL_PICKS)),
    Goal("torch", "forward+backward", "ratio", 1.05),
    Goal("torch", "forward+backward", "ratio", 1.50, ("tiny",)),
    Goal("torch", OUT_TASK, "ratio", 1.10),
    Goal("jax", "forward (jit)", "ratio", 1.05),
    Goal("jax", "forward (jit)", "extra", 3e-6, SMALL_PICKS),
    Goal("jax", "forward (eager)", "ratio", 2.00, ("tiny",)),
    Goal("jax", "vjp (jit)", "ratio", 1.05),
)


def goal_for(case: Case, backend: str, task: str) -> Goal | None:
    """The goal of ``backend``'s ``task`` on ``case``, or None where none is set."""
    for goal in GOALS:
        if (goal.backend, goal.task) == (backend, task) and goal.covers(case):
            return goal
    return None


@dataclass(frozen=True)
class SweepGoal:
    """A goal on one statistic of a sweep's `Stats`, for every backend and task.

    ``stat`` names a field of `Stats` (``median``, ``p95``, ``worst`` of gatherx / best
    native; ``extra_p95``: the 95th percentile of gatherx's time less the best native's, in
    seconds, over the calls whose best native takes under `FAST_CALL`), at most ``limit``;
    ``limits`` overrides ``limit`` per backend.
    """

    stat: str
    limit: float
    limits: tuple[tuple[str, float], ...] = ()

    def limit_for(self, backend: str) -> float:
        """The limit on ``backend``."""
        return dict(self.limits).get(backend, self.limit)

    def text(self, backend: str) -> str:
        """The goal as the tables print it."""
        limit = self.limit_for(backend)
        if self.stat.startswith("extra"):
            return f"95th pct of extra (best < {FAST_CALL * 1e6:.0f} us) <= +{limit * 1e6:.0f} us"
        return f"{_STAT_NAMES[self.stat]} <= {limit:.2f}"

    def value(self, stats: Stats) -> float:
        """The statistic judged, from ``stats``."""
        return float(getattr(stats, self.stat))


_STAT_NAMES = {"median": "median", "p90": "90th pct", "p95": "95th pct", "worst": "max"}
#: The fewest cases of a sweep whose goals are judged.
MIN_SWEEP_CASES = 300
#: The sweep's goals: gatherx / best native over random cases, median at most 1.02, 95th
#: percentile at most 1.20, worst at most 1.5; calls whose best native takes under 20 us at
#: most 3 us slower than it on NumPy and JAX and 5 us on PyTorch (95th percentile).
SWEEP_GOALS: tuple[SweepGoal, ...] = (
    SweepGoal("median", 1.02),
    SweepGoal("p95", 1.20),
    SweepGoal("worst", 1.5),
    SweepGoal("extra_p95", 3e-6, (("torch", 5e-6),)),
)


@dataclass(frozen=True)
class SparseGoal:
    """A goal of the sparse gradients (``gatherx bench --sparse``) on some of its cases.

    ``versus`` is ``native`` (gatherx's sparse gradient / ``F.embedding(sparse=True)``'s, the
    median of the paired rounds, at most ``limit``) or ``dense`` (gatherx's dense gradient /
    its sparse one, the same way, at least ``limit``: the sparse one that many times faster).
    """

    task: str
    versus: str
    limit: float
    cases: tuple[str, ...]

    def value(self, row: Mapping[str, Any]) -> float:
        """The ratio judged, from a row of the sparse JSON."""
        return float(row["ratio" if self.versus == "native" else "dense_ratio"])

    def met(self, row: Mapping[str, Any]) -> bool:
        value = self.value(row)
        return value <= self.limit if self.versus == "native" else value >= self.limit

    def text(self) -> str:
        """The goal as the tables print it."""
        if self.versus == "native":
            return f"gatherx / native <= {self.limit:.2f}"
        return f"dense / gatherx >= {self.limit:g}"


#: The sparse gradients' goals: on the (1_000_000, 64) table with 4096 ids (``table``) and on
#: ``embed``, forward+backward and an optimizer step (SparseAdam) within 1.10 of
#: ``F.embedding(sparse=True)``; forward+backward at least 100x faster than the dense
#: gradient on the large table.
SPARSE_GOALS: tuple[SparseGoal, ...] = (
    SparseGoal("forward+backward", "native", 1.10, ("table", "embed")),
    SparseGoal("forward+backward", "dense", 100.0, ("table",)),
    SparseGoal("optimizer step", "native", 1.10, ("table", "embed")),
)


def _mark(met: bool | None) -> str:
    return "not judged" if met is None else ("yes" if met else "**no**")


def judge_cases(payload: Mapping[str, Any]) -> tuple[str, list[bool]]:
    """The goal table of a fixed-case run's JSON, and whether each goal covering a row is
    met.

    Raises
    ------
    ValueError
        If the JSON has no ``rows`` (a run of an older ``gatherx bench``).
    """
    rows = payload.get("rows")
    if rows is None:
        msg = "no 'rows' in this JSON: rerun gatherx bench --json to record the ratios"
        raise ValueError(msg)
    cases = {c.name: c for c in CASES}
    lines = ["| case | backend | task | gatherx / best | gatherx - best | goal | met |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    verdicts = []
    for r in rows:
        case = cases.get(r["case"])
        goal = goal_for(case, r["backend"], r["task"]) if case is not None else None
        if goal is None:
            continue
        extra = r["gatherx"] - r["best"]
        met = goal.met(r["ratio"], extra)
        verdicts.append(met)
        lines.append(f"| {r['case']} | {r['backend']} | {r['task']} | {r['ratio']:.2f} | "
                     f"{extra * 1e6:+.1f} us | {goal.text()} | {_mark(met)} |")  # fmt: skip
    return "\n".join(lines), verdicts


def judge_sweep(payload: Mapping[str, Any]) -> tuple[str, list[bool]]:
    """The goal table of a sweep's JSON (statistics recomputed from its per-case results),
    and whether each judged goal is met."""
    stats = statistics_of(payload["results"])
    judged_sweep = payload["count"] >= MIN_SWEEP_CASES
    lines = ["| backend | task | cases | goal | value | met |", "|---|---|---|---|---|---|"]
    verdicts = []
    for s in stats:
        for goal in SWEEP_GOALS:
            value = goal.value(s)
            judged = judged_sweep and not math.isnan(value)
            met = value <= goal.limit_for(s.backend) if judged else None
            if met is not None:
                verdicts.append(met)
            shown = f"{value * 1e6:+.1f} us" if goal.stat.startswith("extra") else f"{value:.3f}"
            if math.isnan(value):
                shown = "-"
            lines.append(f"| {s.backend} | {s.task} | {s.cases} | {goal.text(s.backend)} | "
                         f"{shown} | {_mark(met)} |")  # fmt: skip
    return "\n".join(lines), verdicts


def judge_sparse(payload: Mapping[str, Any]) -> tuple[str, list[bool]]:
    """The goal table of a ``--sparse`` run's JSON, and whether each goal covering one of
    its rows is met."""
    lines = ["| case | task | goal | value | met |", "|---|---|---|---|---|"]
    verdicts = []
    for row in payload["rows"]:
        for goal in SPARSE_GOALS:
            if goal.task != row["task"] or row["case"] not in goal.cases:
                continue
            met = goal.met(row)
            verdicts.append(met)
            lines.append(f"| {row['case']} | {row['task']} | {goal.text()} | "
                         f"{goal.value(row):.3g} | {_mark(met)} |")  # fmt: skip
    return "\n".join(lines), verdicts


def main(argv: Sequence[str] | None = None) -> int:
    """Print the goal tables of the JSON files named; 1 if a goal is missed, else 0."""
    parser = argparse.ArgumentParser(
        prog="benchmarks/goals.py",
        description="Judge gatherx bench --json results (fixed cases, --sweep or --sparse) against "
        "the project's performance goals.",
    )
    parser.add_argument("paths", nargs="+", metavar="JSON", help="files of gatherx bench --json")
    args = parser.parse_args(argv)
    missed = 0
    for path in args.paths:
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
        kind = payload.get("kind")
        sweep = kind == "sweep"
        judge = {"sweep": judge_sweep, "sparse": judge_sparse}.get(kind, judge_cases)
        table, verdicts = judge(payload)
        what = f"sweep of {payload['count']} cases, seed {payload['seed']}" if sweep else "cases"
        what = "sparse gradients" if kind == "sparse" else what
        missed += verdicts.count(False)
        print(f"{path} ({what}): {verdicts.count(True)} of {len(verdicts)} goals met\n")
        print(table + "\n")
        if sweep and not verdicts:
            print(f"(a sweep's goals are judged on sweeps of at least {MIN_SWEEP_CASES} cases)\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
