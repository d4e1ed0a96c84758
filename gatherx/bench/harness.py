"""``gatherx bench``: its options and the run, case by case and group by group."""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence

from .. import _options
from .cases import BACKENDS, CASES, Case
from .formulations import Entry, build_entries, make_inputs, verify
from .machine import Load, environment, huge_pages, machine_record
from .report import Row, detail_table, group_of, name_of, out_table, summarize, summary_table
from .timing import CLOCKS, rounds

#: What ``gatherx bench --help`` says the command does.
DESCRIPTION = (
    "Time gatherx against each backend's native gather formulations (np.take, "
    "torch.index_select, jnp.take, onnxruntime, ...), interleaved so that load from other "
    "processes hits all of them alike; print the tables, optionally a plot and JSON. "
    "With --sweep N: N random cases drawn from --seed, summarised in percentiles. With "
    "--sparse: PyTorch's sparse gradients (sparse_grad=True) against F.embedding(sparse=True) "
    "and the dense gradient, and over table sizes."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gatherx bench``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="few repeats and short samples: a smoke run in well under a minute",
    )
    parser.add_argument(
        "--repeats",
        type=_options.at_least_one,
        default=None,
        help="interleaved rounds per case (default 41, 2 with --quick; with --sweep 5, 2 with "
        "--quick)",
    )
    parser.add_argument(
        "--cases",
        default=None,
        help="comma-separated subset of: " + ", ".join(c.name for c in CASES),
    )
    parser.add_argument(
        "--case-spec",
        action="append",
        default=None,
        metavar="SPEC",
        help="time this case too (repeatable; without --cases, only these), e.g. "
        "data=64x4096,index=3x0,axis=-1,dtype=float16,strided: the text --sweep prints to "
        "rerun a case",
    )
    parser.add_argument(
        "--sweep",
        type=int,
        default=None,
        metavar="N",
        help="time N random cases instead (data rank 1-5, every axis, indices of rank 0-3 "
        "including empty ones, several dtypes, contiguous and strided data, outputs up to "
        "64 MiB) and print percentiles of gatherx / best native per backend and task",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="with --sweep: the seed the cases are drawn from (default 0); the same seed "
        "draws the same cases",
    )
    parser.add_argument(
        "--backends", default=None, help="comma-separated subset of: " + ", ".join(BACKENDS)
    )
    parser.add_argument(
        "--sparse",
        action="store_true",
        help="time PyTorch's sparse gradients instead: gatherx.gather(sparse_grad=True) against "
        "F.embedding(sparse=True) and the dense gradient, forward+backward and an optimizer "
        "step (SparseAdam, Adam), on the cases table and embed (--cases, --case-spec: 2-D, "
        "axis 0), then forward+backward over table sizes (--sparse-rows)",
    )
    parser.add_argument(
        "--sparse-rows",
        default=None,
        metavar="N,N,...",
        help="with --sparse: the table rows of the sweep over table sizes, 64 float32 columns "
        "and 4096 ids (default 10000,100000,1000000,10000000; none: no sweep)",
    )
    parser.add_argument("--torch-device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="save a plot to this path (with --sparse: the sweep over table "
                        "sizes)")  # fmt: skip
    parser.add_argument("--json", default=None, metavar="PATH", help="save raw times as JSON")
    parser.add_argument("--markdown", default=None, metavar="PATH",
                        help="also write the tables to this Markdown file")  # fmt: skip
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall",
                        help="wall (default) or cpu: this process's CPU time, which load from "
                        "other processes on a shared machine does not inflate")  # fmt: skip


def chosen_cases(args: argparse.Namespace, known: Sequence[Case]) -> list[Case]:
    """The ``--cases`` among ``known`` (all of them, unless ``--case-spec`` alone names the
    cases), then the ``--case-spec`` ones."""
    specs = [Case.from_spec(text) for text in args.case_spec or ()]
    cases: list[Case] = []
    if args.cases is not None or not specs:
        names = _options.names(args.cases, [c.name for c in known], "case(s)")
        cases = [c for c in known if c.name in names]
    return cases + specs


def chosen_backends(args: argparse.Namespace, known: Sequence[str]) -> tuple[list[str], list[str]]:
    """The backends of ``known`` to time and those left out as not installed (on stderr):
    those ``--backends`` names, which must be installed, or every installed one; PyTorch's
    ``--torch-device`` is checked when PyTorch is among them, then the output files (the
    last checks before timing)."""
    backends, skipped = _options.backends(args.backends, {name: name for name in known})
    if skipped:
        print(f"not installed, skipped: {', '.join(skipped)}", file=sys.stderr, flush=True)
    if "torch" in backends:
        check_torch_device(args.torch_device)
    check_outputs(args)
    return backends, skipped


def check_torch_device(device: str) -> None:
    """Refuse a ``--torch-device`` that PyTorch cannot parse, finds no device of, or cannot put
    a tensor on and read it back from."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError) as exc:
        msg = f"--torch-device {device}: not a PyTorch device ({' '.join(str(exc).split())})"
        raise ValueError(msg) from None
    module = getattr(torch, dev.type, None)
    if dev.type != "cpu" and not getattr(module, "is_available", lambda: True)():
        msg = f"--torch-device {device}: PyTorch finds no {dev.type} device here"
        raise ValueError(msg)
    try:
        torch.zeros(1, device=dev).cpu()
    except Exception as exc:  # whatever the device's runtime raises
        text = " ".join(str(exc).split())
        msg = f"--torch-device {device}: cannot hold a tensor there ({type(exc).__name__}: {text})"
        raise ValueError(msg) from None


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any timing, an output file the run could not write at its end, and
    ``--plot`` without matplotlib."""
    for option, path in (("--json", args.json), ("--markdown", args.markdown),
                         ("--plot", args.plot)):  # fmt: skip
        if path:
            _options.writable(option, path)
    if args.plot:
        _options.require("matplotlib", "--plot")


def time_case(
    case: Case,
    backends: Sequence[str],
    torch_device: str,
    repeats: int,
    min_sample: float,
    clock: str,
    pause: float,
    kinds: Sequence[str] | None = None,
    collect_once: bool = False,
) -> tuple[list[Entry], dict[str, list[float]]]:
    """The formulations of ``case`` on ``backends``, verified, and their times per round.

    Parameters
    ----------
    case : Case
        The shapes, dtype and layout timed.
    backends : sequence of str
        The backends whose formulations run (NumPy's copies always do, unless ``kinds``
        leaves them out).
    torch_device : str
        PyTorch's device.
    repeats, min_sample, clock
        As for `rounds`: interleaved rounds, seconds per sample, the clock.
    pause : float
        Seconds of sleep after each group, for spinning worker threads to park.
    kinds : sequence of str, optional
        The kinds of `Entry` kept (``gatherx``, ``native``, ``memcpy``, ...); all by default.
    collect_once : bool, optional
        Collect garbage once before the first group rather than before each (`rounds`).

    Returns
    -------
    entries : list of Entry
        The formulations timed.
    samples : dict
        Seconds per call of each formulation (by `name_of`) in each round.
    """
    x = make_inputs(case)
    entries = build_entries(x, backends, torch_device)
    if kinds is not None:
        entries = [e for e in entries if e.kind in kinds]
    verify(entries, x)
    names = {name_of(e): e.fn for e in entries}
    if len(names) != len(entries):
        msg = "bench: duplicate formulation names"
        raise AssertionError(msg)
    samples: dict[str, list[float]] = {}
    if collect_once:
        gc.collect()
    for group in dict.fromkeys(group_of(e) for e in entries):
        members = {name_of(e): e.fn for e in entries if group_of(e) == group}
        together = dict.fromkeys(members, group)
        # verify compiled every formulation; rounds warms it again and sizes its batches
        samples |= rounds(members, repeats, min_sample, clock, together,
                          collect=not collect_once)  # fmt: skip
        time.sleep(pause)  # let spinning worker threads park
    return entries, samples


def data_text(cases: Sequence[Case]) -> str:
    """The dtypes and layouts of ``cases``' data, e.g. ``float32 data``."""
    text = "/".join(dict.fromkeys(c.dtype for c in cases)) + " data"
    if any(c.strided for c in cases):
        text += " (strided in part)" if not all(c.strided for c in cases) else " (strided)"
    return text


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print its tables (with ``--sweep``, its percentiles; with
    ``--sparse``, the sparse gradients' times); 0."""
    if args.sparse:
        from .sparse import run_sparse

        return run_sparse(args)
    if args.sparse_rows is not None:
        msg = "--sparse-rows sets the table sizes of --sparse: add --sparse"
        raise ValueError(msg)
    if args.sweep is not None:
        if args.cases is not None or args.case_spec:
            msg = "--sweep draws its own cases: drop --cases and --case-spec"
            raise ValueError(msg)
        from .sweep import run_sweep

        return run_sweep(args)
    if args.seed is not None:
        msg = "--seed draws the cases of --sweep; without --sweep the cases are fixed"
        raise ValueError(msg)
    cases = chosen_cases(args, CASES)
    backends, skipped = chosen_backends(args, BACKENDS)
    repeats = args.repeats or (2 if args.quick else 41)
    min_sample = 2e-4 if args.quick else 5e-3

    results: dict[str, dict[str, float]] = {}
    rows: list[Row] = []
    load = Load()
    load.sample()
    start = time.perf_counter()
    for case in cases:
        pause = 0.01 if args.quick else 0.05
        entries, samples = time_case(
            case, backends, args.torch_device, repeats, min_sample, args.clock, pause
        )
        results[case.name] = {name: statistics.median(s) for name, s in samples.items()}
        rows += summarize(case, entries, samples)
        load.sample()  # once per case: the kernel updates its average every 5 s
        took = time.perf_counter() - start
        print(f"  {case.name}: {case.describe()} done ({took:.0f} s)", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start

    # Huge pages first: they decide how fast a fresh large output is, and PyTorch's are
    # off unless the user turned them on.
    torch = "torch" in backends
    header = (
        f"gatherx bench: {huge_pages(torch)}; {data_text(cases)}, int64 indices, {repeats} "
        "interleaved rounds (times: medians; ratios: medians of the per-round ratios), "
        f"{args.clock} clock ({elapsed:.0f} s); {environment(load)}"
    )
    header = report_header(header, skipped, load)
    tables = [summary_table(rows), detail_table(cases, results), out_table(cases, results)]
    emit(header + "".join(f"\n\n{t}" for t in tables) + "\n", args.markdown)
    if args.plot:
        from .plot import plot  # matplotlib only when a plot is asked for

        plot(cases, rows, args.plot, load)
        print(f"\nplot saved to {args.plot}")
    if args.json:
        payload = {
            **machine_record(load, torch),
            "repeats": repeats,
            "clock": args.clock,
            "cases": {c.name: c.describe() for c in cases},
            "specs": {c.name: c.spec() for c in cases},
            "seconds": results,
            "rows": [row_record(r) for r in rows],
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
    return 0


def row_record(r: Row) -> dict[str, object]:
    """A row of the summary table as JSON: its times in seconds and its paired ratio."""
    return {
        "case": r.case.name,
        "backend": r.backend,
        "task": r.task,
        "gatherx": r.gatherx,
        "best_label": r.best_label,
        "best": r.best,
        "ratio": r.ratio,
    }


def report_header(header: str, skipped: Sequence[str], load: Load) -> str:
    """``header`` with the backends skipped and the load warning, if any (also on stderr)."""
    if skipped:
        header += f"; not installed, skipped: {', '.join(skipped)}"
    warning = load.warning()
    if warning is not None:
        # In the header's paragraph, so whoever reads or splits the report sees it with it.
        header += f"\n{warning}"
        print(warning, file=sys.stderr, flush=True)
    return header


def emit(text: str, markdown: str | None) -> None:
    """Print the report, and write it to the ``--markdown`` file if one is given."""
    print(text)
    if markdown:
        with open(markdown, "w", encoding="utf-8") as f:
            f.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatherx bench", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
