"""``gatherx bench --sparse``: PyTorch's sparse gradients of a gather, timed.

``gatherx.gather(w, ids, sparse_grad=True)`` gives the table ``w`` a ``torch.sparse_coo``
gradient that holds the gathered rows alone, as ``F.embedding(ids, w, sparse=True)`` (and
``nn.Embedding(sparse=True)``) does. On each case (a 2-D float table gathered on axis 0; by
default `SPARSE_CASES`), with ``loss = out.sum()``, two tasks are timed, gatherx's sparse
gradient against the native's and against gatherx's dense gradient:

- ``forward+backward``: the gather and ``torch.autograd.grad`` of the loss;
- ``optimizer step``: ``zero_grad``, forward, backward and ``step``, with
  ``torch.optim.SparseAdam`` on the sparse gradients and ``torch.optim.Adam`` on the dense
  one, each on a copy of the table of its own.

Then forward+backward over table sizes (`SWEEP_ROWS` rows of `SWEEP_COLUMNS` columns) at a
fixed lookup of `SWEEP_IDS` ids: the dense gradient's cost grows with the table, the sparse
one's with the lookup. gatherx gets the ids as drawn, from [-rows, rows-1]; the native gets
them made non-negative. Every formulation is verified before it is timed, and the three of a
task are timed in interleaved rounds (`rounds`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from .. import _options
from .cases import CASES, Case
from .harness import check_outputs, check_torch_device, chosen_cases, emit, report_header
from .machine import Load, environment, huge_pages, machine_record
from .report import fmt_time
from .timing import rounds

#: The large table: a million rows of 64 float32 (256 MB), 4096 ids.
TABLE = Case("table", (1_000_000, 64), (4096,), 0)
#: The cases timed by default: the large table and the bench's ``embed``.
SPARSE_CASES = (TABLE, *(c for c in CASES if c.name == "embed"))
#: The table rows of the size sweep, and its fixed lookup: that many ids, that many columns.
SWEEP_ROWS = (10**4, 10**5, 10**6, 10**7)
SWEEP_COLUMNS = 64
SWEEP_IDS = 4096
#: About the seconds the rounds of one size of the sweep take: a size whose calls are slower
#: gets fewer rounds (no fewer than `MIN_SWEEP_REPEATS`, no more than the cases').
SWEEP_SECONDS = 20.0
MIN_SWEEP_REPEATS = 3
#: The dtypes of the tables the task takes (those of ``F.embedding`` and both optimizers).
DTYPES = ("float32", "float64")

FORWARD_BACKWARD = "forward+backward"
STEP = "optimizer step"
#: The formulations of each task, by role: gatherx's sparse gradient, the native's sparse
#: gradient, gatherx's dense gradient.
ROLES = ("gatherx", "native", "dense")
#: The batches of calls timed alike within a round (`rounds`): the two sparse gradients
#: the same number of calls, the dense one, slower by up to thousands of times, its own.
GROUPS = {"gatherx": "sparse", "native": "sparse", "dense": "dense"}
LABELS = {
    FORWARD_BACKWARD: {
        "gatherx": "gatherx sparse_grad=True",
        "native": "F.embedding(sparse=True)",
        "dense": "gatherx sparse_grad=False",
    },
    STEP: {
        "gatherx": "gatherx sparse_grad=True + SparseAdam",
        "native": "F.embedding(sparse=True) + SparseAdam",
        "dense": "gatherx sparse_grad=False + Adam",
    },
}


# --------------------------------------------------------------------------- formulations


@dataclass
class Lookup:
    """A torch table (a leaf that requires grad) and its ids.

    ``ids`` are gatherx's, negative ones included; ``wrapped`` the same made non-negative,
    for the native. ``touched`` holds the rows gathered, in increasing order, and ``counts``
    how often each is: the gradient of ``out.sum()`` is ``counts`` on those rows, zero
    elsewhere.
    """

    table: Any
    ids: Any
    wrapped: Any
    touched: np.ndarray
    counts: np.ndarray
    sync: Callable[[], None]


def make_lookup(
    shape: tuple[int, ...], index_shape: tuple[int, ...], dtype: str, device: str, seed: int = 0
) -> Lookup:
    """A table of ``shape`` and ``dtype`` on ``device`` and ids of ``index_shape`` drawn
    from [-rows, rows-1], from ``seed``: the same arguments give the same lookup."""
    import torch

    rows = shape[0]
    rng = np.random.default_rng(seed)
    ids = np.asarray(rng.integers(-rows, rows, size=index_shape, dtype=np.int64))
    wrapped = ids % rows
    touched, counts = np.unique(wrapped, return_counts=True)
    dev = torch.device(device)
    generator = torch.Generator(dev).manual_seed(seed)
    table = torch.randn(shape, generator=generator, dtype=getattr(torch, dtype), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    return Lookup(
        table.requires_grad_(), torch.from_numpy(ids).to(dev),
        torch.from_numpy(wrapped).to(dev), touched, counts, sync,
    )  # fmt: skip


def forwards(x: Lookup) -> dict[str, Callable[[Any], Any]]:
    """The gather of each role, as a function of the table."""
    import torch.nn.functional as F

    import gatherx

    return {
        "gatherx": lambda t: gatherx.gather(t, x.ids, sparse_grad=True),
        "native": lambda t: F.embedding(x.wrapped, t, sparse=True),
        "dense": lambda t: gatherx.gather(t, x.ids),
    }


def backward_formulations(x: Lookup) -> dict[str, Callable[[], Any]]:
    """Forward and ``torch.autograd.grad`` of ``out.sum()`` by role; each returns the
    table's gradient."""
    import torch

    def grad_of(forward: Callable[[Any], Any]) -> Callable[[], Any]:
        def run() -> Any:
            (grad,) = torch.autograd.grad(forward(x.table).sum(), x.table)
            x.sync()
            return grad

        return run

    return {role: grad_of(f) for role, f in forwards(x).items()}


def step_formulations(x: Lookup) -> dict[str, Callable[[], Any]]:
    """One optimizer step by role, each on a copy of the table of its own (SparseAdam on the
    sparse gradients, Adam on the dense one); each returns its copy."""
    import torch

    def step(role: str, forward: Callable[[Any], Any]) -> Callable[[], Any]:
        param = torch.nn.Parameter(x.table.detach().clone())
        optimizer = (torch.optim.Adam if role == "dense" else torch.optim.SparseAdam)([param])

        def run() -> Any:
            optimizer.zero_grad()
            forward(param).sum().backward()
            optimizer.step()
            x.sync()
            return param

        return run

    return {role: step(role, f) for role, f in forwards(x).items()}


def _fail(name: str, task: str, role: str, what: str) -> NoReturn:
    msg = f"bench --sparse: {LABELS[task][role]} on {name} {what}"
    raise AssertionError(msg)


def verify_gradients(fns: dict[str, Callable[[], Any]], x: Lookup, name: str) -> None:
    """Each role's forward must gather ``table[wrapped]``, and its gradient be ``counts`` on
    the rows gathered and zero elsewhere: sparse for gatherx's and the native's, dense for
    the dense one. Runs every formulation once."""
    import torch

    table = x.table.detach()
    want_out = table[x.wrapped]
    for role, forward in forwards(x).items():
        with torch.no_grad():
            if not torch.equal(forward(table), want_out):
                _fail(name, FORWARD_BACKWARD, role, "gathers wrong values")
    rows = torch.from_numpy(x.touched).to(table.device)
    counts = torch.from_numpy(x.counts).to(table.device, table.dtype)
    want = counts[:, None].expand(-1, table.shape[1])
    for role, fn in fns.items():
        grad = fn()
        if (grad.layout == torch.sparse_coo) != (role != "dense"):
            _fail(name, FORWARD_BACKWARD, role, f"gives a gradient of layout {grad.layout}")
        if grad.shape != table.shape or grad.dtype != table.dtype:
            _fail(name, FORWARD_BACKWARD, role, "gives a gradient of the wrong shape or dtype")
        if role == "dense":
            right = torch.equal(grad[rows], want) and int(grad.count_nonzero()) == want.numel()
        else:
            grad = grad.coalesce()
            right = torch.equal(grad.indices()[0], rows) and torch.equal(grad.values(), want)
        if not right:
            _fail(name, FORWARD_BACKWARD, role, "computes a wrong gradient")


def verify_steps(fns: dict[str, Callable[[], Any]], x: Lookup, name: str) -> None:
    """After one step from the same table, gatherx's copy must equal the native's element
    for element, and the dense one be close to both: on its first step Adam moves the rows
    without a gradient by zero, as SparseAdam leaves them. Runs every formulation once."""
    import torch

    after = {role: fn().detach() for role, fn in fns.items()}
    if torch.equal(after["native"], x.table.detach()):
        _fail(name, STEP, "native", "leaves the table as it was")
    if not torch.equal(after["gatherx"], after["native"]):
        _fail(name, STEP, "gatherx", "updates the table unlike the native")
    if not torch.allclose(after["dense"], after["native"], rtol=1e-5, atol=1e-6):
        _fail(name, STEP, "dense", "updates the table unlike the native")


# --------------------------------------------------------------------------- timings


def paired(a: Sequence[float], b: Sequence[float]) -> float:
    """The median over rounds of ``a``'s time over ``b``'s in the same round."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


@dataclass
class Timing:
    """One task on one table: each role's seconds per call in each round, and their medians.

    ``ratio`` is gatherx's sparse gradient over the native's, ``dense_ratio`` the dense
    gradient over gatherx's sparse one: medians of the per-round ratios.
    """

    case: str
    task: str
    data_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    dtype: str
    samples: dict[str, list[float]]

    @property
    def seconds(self) -> dict[str, float]:
        return {role: statistics.median(s) for role, s in self.samples.items()}

    @property
    def ratio(self) -> float:
        return paired(self.samples["gatherx"], self.samples["native"])

    @property
    def dense_ratio(self) -> float:
        return paired(self.samples["dense"], self.samples["gatherx"])

    @property
    def repeats(self) -> int:
        return len(self.samples["gatherx"])

    @property
    def table_bytes(self) -> int:
        return int(np.prod(self.data_shape)) * np.dtype(self.dtype).itemsize

    def record(self) -> dict[str, Any]:
        """The timing as JSON: shapes, labels, medians and ratios, and every round."""
        return {
            "case": self.case,
            "task": self.task,
            "data_shape": list(self.data_shape),
            "index_shape": list(self.index_shape),
            "dtype": self.dtype,
            "table_bytes": self.table_bytes,
            "repeats": self.repeats,
            "labels": LABELS[self.task],
            "seconds": self.seconds,
            "ratio": self.ratio,
            "dense_ratio": self.dense_ratio,
            "rounds": self.samples,
        }


def time_sparse_case(
    case: Case, device: str, repeats: int, min_sample: float, clock: str, pause: float
) -> list[Timing]:
    """Both tasks on ``case``, verified, timed in ``repeats`` interleaved rounds each."""
    x = make_lookup(case.data_shape, case.index_shape, case.dtype, device)
    timings = []
    tasks = ((FORWARD_BACKWARD, backward_formulations, verify_gradients),
             (STEP, step_formulations, verify_steps))  # fmt: skip
    for task, build, verify in tasks:
        fns = build(x)
        verify(fns, x, case.name)  # every formulation has run once: compiled
        samples = rounds(fns, repeats, min_sample, clock, GROUPS)
        timings.append(Timing(case.name, task, case.data_shape, case.index_shape, case.dtype,
                              samples))  # fmt: skip
        del fns  # the copies of the table and the optimizers' states
        time.sleep(pause)  # let spinning worker threads park
    return timings


def time_size(rows: int, device: str, repeats: int, min_sample: float, clock: str) -> Timing:
    """Forward+backward on a table of ``rows`` rows of the sweep, verified; as many rounds
    as fit in about `SWEEP_SECONDS`, from `MIN_SWEEP_REPEATS` to ``repeats``."""
    x = make_lookup((rows, SWEEP_COLUMNS), (SWEEP_IDS,), "float32", device)
    fns = backward_formulations(x)
    name = f"{rows} rows"
    verify_gradients(fns, x, name)
    start = time.perf_counter()
    for fn in fns.values():
        fn()  # one round, warm, to size the rest
    took = time.perf_counter() - start
    count = min(repeats, max(MIN_SWEEP_REPEATS, int(SWEEP_SECONDS / max(took, 1e-9))))
    samples = rounds(fns, count, min_sample, clock, GROUPS)
    return Timing(name, FORWARD_BACKWARD, (rows, SWEEP_COLUMNS), (SWEEP_IDS,), "float32", samples)


# --------------------------------------------------------------------------- the run


def check_case(case: Case) -> None:
    """Refuse a case the sparse task cannot time: it needs ``F.embedding``'s shape.

    Raises
    ------
    ValueError
        If the data is not 2-D, the axis not 0, the data strided or of another dtype than
        `DTYPES`.
    """
    if len(case.data_shape) != 2 or case.ax != 0 or case.strided or case.dtype not in DTYPES:
        msg = (
            f"--sparse times contiguous 2-D {' or '.join(DTYPES)} tables gathered on axis 0 "
            f"(as F.embedding does), not {case.describe()}"
        )
        raise ValueError(msg)


def sweep_rows(text: str | None) -> list[int]:
    """The table rows of ``--sparse-rows`` (`SWEEP_ROWS` without it, none for ``none``).

    Raises
    ------
    ValueError
        If ``text`` is no list of positive integers joined by commas.
    """
    if text is None:
        return list(SWEEP_ROWS)
    if text.strip() == "none":
        return []
    try:
        rows = [int(n) for n in text.split(",")]
    except ValueError:
        rows = []
    if not rows or min(rows) < 1:
        msg = f"--sparse-rows takes table rows >= 1 joined by commas (or none), not {text!r}"
        raise ValueError(msg)
    return rows


def sparse_plan(args: argparse.Namespace) -> tuple[list[Case], list[int]]:
    """The cases and the sweep's table rows that ``args`` ask for, checked before any work.

    Raises
    ------
    ValueError
        If ``args`` combine ``--sparse`` with an option of another task, name an unknown
        case or one `check_case` refuses, or PyTorch is not installed.
    """
    if args.sweep is not None or args.seed is not None:
        msg = "--sparse times its own cases and table sizes: drop --sweep and --seed"
        raise ValueError(msg)
    if args.backends not in (None, "torch"):
        msg = "--sparse times PyTorch alone: drop --backends"
        raise ValueError(msg)
    cases = chosen_cases(args, SPARSE_CASES)
    for case in cases:
        check_case(case)
    rows = sweep_rows(args.sparse_rows)
    if args.plot and not rows:
        msg = "--plot draws the sweep over table sizes, which --sparse-rows none leaves out"
        raise ValueError(msg)
    if not _options.installed("torch"):
        msg = "--sparse times PyTorch, which is not installed"
        raise ValueError(msg)
    check_torch_device(args.torch_device)
    return cases, rows


def cases_table(timings: Sequence[Timing]) -> str:
    """One line per case and task: the three medians and the two paired ratios."""
    lines = [
        "| case | task | gatherx sparse | native sparse | dense | gatherx / native | "
        "dense / gatherx |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        s = t.seconds
        lines.append(
            f"| {t.case} | {t.task} | {fmt_time(s['gatherx'])} | {fmt_time(s['native'])} | "
            f"{fmt_time(s['dense'])} | {t.ratio:.2f} | {t.dense_ratio:.1f} |"
        )
    return "\n".join(lines)


def sweep_table(points: Sequence[Timing]) -> str:
    """One line per table size of the sweep."""
    lines = [
        "| rows | table | rounds | gatherx sparse | native sparse | dense | dense / gatherx | "
        "gatherx / native |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        s = p.seconds
        lines.append(
            f"| {p.data_shape[0]} | {p.table_bytes / 2**20:.1f} MiB | {p.repeats} | "
            f"{fmt_time(s['gatherx'])} | {fmt_time(s['native'])} | {fmt_time(s['dense'])} | "
            f"{p.dense_ratio:.1f} | {p.ratio:.2f} |"
        )
    return "\n".join(lines)


def legend() -> str:
    """What each column's formulation is, task by task."""
    return "\n".join(
        f"- {task}: gatherx sparse = {labels['gatherx']}; native sparse = {labels['native']}; "
        f"dense = {labels['dense']}"
        for task, labels in LABELS.items()
    )


def run_sparse(args: argparse.Namespace) -> int:
    """Time the sparse gradients on the cases and over the table sizes; print the tables,
    save the plot and the JSON if asked; 0."""
    cases, sizes = sparse_plan(args)
    check_outputs(args)
    repeats = args.repeats or (2 if args.quick else 21)
    min_sample = 2e-4 if args.quick else 5e-3
    pause = 0.01 if args.quick else 0.05
    device = args.torch_device
    load = Load()
    load.sample()
    start = time.perf_counter()
    timings: list[Timing] = []
    for case in cases:
        timings += time_sparse_case(case, device, repeats, min_sample, args.clock, pause)
        load.sample()
        took = time.perf_counter() - start
        print(f"  {case.name}: {case.describe()} done ({took:.0f} s)", file=sys.stderr,
              flush=True)  # fmt: skip
    points: list[Timing] = []
    for rows in sizes:
        points.append(time_size(rows, device, repeats, min_sample, args.clock))
        load.sample()
        took = time.perf_counter() - start
        print(f"  {rows} rows done ({took:.0f} s)", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    header = (
        f"gatherx bench --sparse: {huge_pages()}; PyTorch {device}, int64 ids, loss = "
        f"out.sum(); {repeats} interleaved rounds per case (times: medians; ratios: medians of "
        f"the per-round ratios), {args.clock} clock ({elapsed:.0f} s); {environment(load)}"
    )
    header = report_header(header, [], load)
    parts = [header, legend()]
    if timings:
        parts.append(cases_table(timings))
    if points:
        parts.append(
            f"Forward+backward over table sizes: {SWEEP_COLUMNS} float32 columns, "
            f"{SWEEP_IDS} ids:\n\n{sweep_table(points)}"
        )
    emit("\n\n".join(parts) + "\n", args.markdown)
    if args.plot:
        from .plot import sparse_plot  # matplotlib only when a plot is asked for

        sparse_plot(points, args.plot, load)
        print(f"\nplot saved to {args.plot}")
    if args.json:
        payload = {
            "kind": "sparse",
            "device": device,
            **machine_record(load),
            "repeats": repeats,
            "min_sample": min_sample,
            "clock": args.clock,
            "seconds": elapsed,
            "cases": {c.name: c.describe() for c in cases},
            "specs": {c.name: c.spec() for c in cases},
            "rows": [t.record() for t in timings],
            "sweep": {
                "columns": SWEEP_COLUMNS,
                "ids": SWEEP_IDS,
                "points": [p.record() for p in points],
            },
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
    return 0
