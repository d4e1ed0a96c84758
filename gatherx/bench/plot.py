"""The benchmark's plot: gatherx over the best native per task, and forward times over the
copies of the output into a preallocated and a fresh buffer."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from .cases import Case
from .machine import Load
from .report import Row


def plot(cases: Sequence[Case], rows: Sequence[Row], path: str, load: Load | None = None) -> None:
    """Save :func:`figure` to ``path`` as a PNG."""
    fig = figure(cases, rows, load)
    fig.savefig(path, dpi=110)


def figure(cases: Sequence[Case], rows: Sequence[Row], load: Load | None = None) -> Any:
    """The plot as a matplotlib ``Figure``: each case's shapes under its name, the load on top.

    A run under high load says so in red in the title, since its ratios are unreliable.
    """
    import matplotlib
    from matplotlib.figure import Figure

    # A bare Figure, not pyplot: the caller's backend (a notebook's inline one) stays as it is.
    fig = Figure(figsize=(max(11.0, 1.1 * len(cases)), 9), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    groups = list(dict.fromkeys((r.backend, r.task) for r in rows))  # the tables' order
    width = 0.8 / max(1, len(groups))
    # Data shape, index shape and axis under each name: a reader of the picture alone must
    # know what was gathered.
    names = [f"{c.name}\n{c.data_shape}\n/ {c.index_shape}, axis {c.axis}" for c in cases]
    for j, group in enumerate(groups):
        values = []
        for c in cases:
            match = [r for r in rows if r.case.name == c.name and (r.backend, r.task) == group]
            values.append(match[0].ratio if match else math.nan)
        xs = [k + (j - (len(groups) - 1) / 2) * width for k in range(len(cases))]
        top.bar(xs, values, width, label=f"{group[0]} {group[1]}")
    top.axhline(1.0, color="black", linestyle="--", linewidth=1, label="as fast as the best native")
    top.set_yscale("log")
    top.set_xticks(range(len(cases)), names, fontsize=8)
    top.set_ylabel("gatherx / best native (lower is better)")
    top.set_title("gatherx time divided by the fastest native formulation, same backend")
    top.legend(fontsize=7, ncol=3)
    forward = [g for g in groups if g[1].startswith("forward") and "backward" not in g[1]]
    width = 0.8 / max(1, 2 * len(forward))
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
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
    bottom.axhline(1.0, color="black", linewidth=1, label="copy into a preallocated buffer")
    # A fresh result's floor: the copy of the output into a new NumPy array, case by case.
    fresh = []
    for c in cases:  # rows of backends without an allocating copy of their own carry NumPy's
        match = [r for r in rows if r.case.name == c.name and r.backend != "torch"]
        fresh.append(match[0].alloc / match[0].memcpy if match else math.nan)
    bottom.scatter(range(len(cases)), fresh, marker="_", s=900, linewidths=2, color="black",
                   zorder=3, label="copy into a fresh NumPy array")  # fmt: skip
    bottom.set_yscale("log")
    bottom.set_xticks(range(len(cases)), names, fontsize=8)
    bottom.set_ylabel("time / copy of the output into a preallocated buffer")
    bottom.set_title("Forward gather against plain copies of the output bytes")
    bottom.legend(fontsize=7, ncol=3)
    machine = load.describe() if load is not None else "load not recorded"
    title = f"gatherx bench: float32 data, int64 indices; {machine}"
    if load is not None and load.high:
        title += "\nhigh load during the run: other processes competed, ratios are unreliable"
    fig.suptitle(title, fontsize=10, color="red" if load is not None and load.high else "black")
    return fig


def sweep_plot(results: Sequence[Any], path: str, load: Load | None = None) -> None:
    """Save :func:`sweep_figure` to ``path`` as a PNG."""
    sweep_figure(results, load).savefig(path, dpi=110)


def sweep_figure(results: Sequence[Any], load: Load | None = None) -> Any:
    """A sweep's results as a matplotlib ``Figure``: gatherx / best native of every case
    against the best native's time, one panel per backend.

    ``results`` are `gatherx.bench.sweep.Result` objects.
    """
    from matplotlib.figure import Figure

    backends = list(dict.fromkeys(r.backend for r in results))
    fig = Figure(figsize=(6 * max(1, len(backends)), 5), layout="constrained")
    axes = fig.subplots(1, max(1, len(backends)), squeeze=False)[0]
    for ax, backend in zip(axes, backends, strict=False):
        mine = [r for r in results if r.backend == backend]
        for task in dict.fromkeys(r.task for r in mine):
            points = [r for r in mine if r.task == task]
            ax.scatter([r.best for r in points], [r.ratio for r in points], s=12, alpha=0.7,
                       label=f"{task} ({len(points)})")  # fmt: skip
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("best native time (s)")
        ax.set_ylabel("gatherx / best native (lower is better)")
        ax.set_title(backend)
        ax.legend(fontsize=7)
    machine = load.describe() if load is not None else "load not recorded"
    cases = len({r.case.name for r in results})
    title = f"gatherx bench --sweep: {cases} random cases; {machine}"
    if load is not None and load.high:
        title += "\nhigh load during the run: other processes competed, ratios are unreliable"
    fig.suptitle(title, fontsize=10, color="red" if load is not None and load.high else "black")
    return fig


def sparse_plot(points: Sequence[Any], path: str, load: Load | None = None) -> None:
    """Save :func:`sparse_figure` to ``path`` as a PNG."""
    sparse_figure(points, load).savefig(path, dpi=110)


def sparse_figure(points: Sequence[Any], load: Load | None = None) -> Any:
    """The table-size sweep of ``gatherx bench --sparse`` as a matplotlib ``Figure``:
    forward+backward time against the table's rows, log-log, one line per formulation, the
    dense gradient's time over gatherx's sparse one written at each size.

    ``points`` are `gatherx.bench.sparse.Timing` objects of one lookup (ids and columns).
    """
    from matplotlib.figure import Figure

    from .sparse import FORWARD_BACKWARD, LABELS, ROLES

    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    rows = [p.data_shape[0] for p in points]
    labels = LABELS[FORWARD_BACKWARD]
    for role, marker in zip(ROLES, "os^", strict=True):
        times = [p.seconds[role] * 1e3 for p in points]
        ax.plot(rows, times, marker=marker, label=labels[role])
    for p in points:
        ax.annotate(f"{p.dense_ratio:.0f}x", (p.data_shape[0], p.seconds["dense"] * 1e3),
                    textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    columns = points[0].data_shape[1] if points else 0
    ids = points[0].index_shape[0] if points else 0
    ax.set_xlabel(f"table rows ({columns} {points[0].dtype if points else ''} columns)")
    ax.set_ylabel("forward + backward, median time (ms)")
    ax.set_title(f"{ids} ids, loss = out.sum(); at each size: dense time / gatherx sparse time")
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 2)  # room for the ratios above the highest point
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    if points:
        mib_per_row = points[0].table_bytes / rows[0] / 2**20

        def to_mib(r: Any) -> Any:
            return r * mib_per_row

        def to_rows(m: Any) -> Any:
            return m / mib_per_row

        ax.secondary_xaxis("top", functions=(to_mib, to_rows)).set_xlabel("table size (MiB)")
    machine = load.describe() if load is not None else "load not recorded"
    if "torch" in sys.modules:  # imported by whoever timed the points
        machine += f", torch threads {sys.modules['torch'].get_num_threads()}"
    title = f"gatherx bench --sparse: PyTorch sparse and dense gradients\n{machine}"
    if load is not None and load.high:
        title += "\nhigh load during the run: other processes competed, times are unreliable"
    fig.suptitle(title, fontsize=10, color="red" if load is not None and load.high else "black")
    return fig
