"""The ``gatherx`` command: ``check`` (ONNX cases on every backend, or the conformance suite on
a namespace or any Gather), ``explain``, ``bench``."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from . import __version__, _options
from ._rules import index_range, normalize_axis, output_shape

if TYPE_CHECKING:
    from ._check import Report

#: Backends `check` knows, in display order: name -> module that must be importable.
BACKENDS = {
    "numpy": "numpy",
    "torch": "torch",
    "jax": "jax",
    "array-api-strict": "array_api_strict",
    "dask": "dask.array",
}


#: Prefixes gatherx's own exceptions start with, which the command's own prefix replaces.
_MESSAGE_PREFIX = re.compile(r"^(?:gatherx(?:\.\w+)?|gather(?:_grad)?|bench): ")


def plain(text: str) -> str:
    """Docstring markup (``literal``, :func:`name`) as the plain text a terminal shows."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def _error_line(prog: str, message: str) -> str:
    """``prog: error: message`` with the message's own prefix dropped, one line per line."""
    first, *rest = str(message).strip().splitlines() or [""]
    first = _MESSAGE_PREFIX.sub("", first)
    return "\n".join([f"{prog}: error: {first}", *(f"  {line}" for line in rest)]) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, _error_line(self.prog, message))


def installed_backends() -> list[str]:
    return _options.backends(None, BACKENDS)[0]


def converter(backend: str) -> Callable[[np.ndarray], Any]:
    """A function moving a NumPy array into ``backend``'s array type."""
    if backend == "numpy":
        return np.asarray
    if backend == "torch":
        import torch

        return lambda a: torch.from_numpy(np.array(a))
    if backend == "jax":
        import jax.numpy as jnp

        return jnp.asarray
    if backend == "array-api-strict":
        import array_api_strict as xps

        return xps.asarray
    if backend == "dask":
        import dask.array as da

        return lambda a: da.from_array(np.array(a), chunks=-1)
    msg = f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}"
    raise ValueError(msg)


def run_check(backends: Sequence[str], out: Any = None) -> int:
    """Run every reference case on each backend; print a table; 0 only if all pass."""
    out = sys.stdout if out is None else out  # the stdout of the call, redirected or not
    from . import gather
    from ._cases import onnx_cases, spec_examples
    from ._conformance import to_numpy

    _options.require("onnx", "running the official ONNX cases", "'gatherx[check]'")
    cases = [*onnx_cases(), *spec_examples()]
    rows, failures = [], []
    for backend in backends:
        to_backend = converter(backend)
        passed, start = 0, time.perf_counter()
        for case in cases:
            got: Any
            try:
                got = to_numpy(gather(to_backend(case.data), to_backend(case.indices),
                                   axis=case.axis, opset=case.opset))  # fmt: skip
                ok = got.dtype == case.expected.dtype and np.array_equal(got, case.expected)
            except Exception as exc:  # a check reports every failure instead of stopping
                ok, got = False, exc
            if ok:
                passed += 1
            else:
                failures.append(f"{backend}: {case.name}: got {got!r}")
        elapsed = time.perf_counter() - start
        rows.append((backend, f"{passed}/{len(cases)}", f"{elapsed * 1e3:.1f} ms"))
    n_onnx = sum(c.source == "onnx" for c in cases)
    print(f"gatherx check: {n_onnx} official ONNX Gather cases + "
          f"{len(cases) - n_onnx} spec examples per backend", file=out)  # fmt: skip
    header = ("backend", "cases passed", "time")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip(), file=out)
    for line in failures:
        print(f"FAIL {line}", file=out)
    return 0 if not failures else 1


def print_report(report: Report, out: Any = None) -> int:
    """The table of a conformance run (one row per case group); 1 if any check failed."""
    out = sys.stdout if out is None else out
    n_cases = len({r.case.name for r in report.results})
    checks = ", ".join(report.checks)
    print(f"gatherx check --{report.target} ({report.version}): {n_cases} cases, "
          f"{len(report.checks)} check(s) each ({checks}), against NumPy", file=out)  # fmt: skip
    header = ("group", "passed", "failed", "skipped", "first failure (a reproducer)")
    rows = [(g, str(p), str(f), str(k), first) for g, p, f, k, first in report.rows()]
    totals = [sum(int(row[i]) for row in rows) for i in (1, 2, 3)]
    rows.append(("total", str(totals[0]), str(totals[1]), str(totals[2]), ""))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, tuple("-" * len(cell) for cell in header), *rows]:
        cells = [cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip(), file=out)
    for note in report.notes:
        print(f"note: {note}", file=out)
    verdict = "FAILED" if report.failed else "passed"
    print(f"{verdict}: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped", file=out)
    return 1 if report.failed else 0


def run_conformance(args: argparse.Namespace, out: Any = None) -> int:
    """``check --namespace`` or ``check --impl``: the suite, its table and ``--json``."""
    import json

    from ._check import run_impl, run_namespace

    if args.json:
        # A path that cannot be written fails before the run, not after it; the file itself is
        # written only once there is a report, so a refused target leaves an old one as it was.
        _options.writable("--json", args.json)
    report = run_namespace(args.namespace) if args.namespace is not None else run_impl(args.impl)
    code = print_report(report, out)
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as target:
                json.dump(report.as_json(), target, indent=1, default=str)
        except OSError as exc:
            msg = f"--json {args.json}: cannot write it ({exc.strerror})"
            raise ValueError(msg) from None
    return code


def _shape(text: str) -> tuple[int, ...]:
    text = text.strip().strip("()[]").strip()
    if text in ("", "scalar"):
        return ()
    parts = text.split(",")
    if len(parts) > 1 and not parts[-1].strip():
        parts.pop()  # a trailing comma, as in (5,)
    try:
        dims = tuple(int(part) for part in parts)  # int() refuses an empty field
    except ValueError:
        msg = f"invalid shape {text!r}: expected comma-separated integers such as 5,4"
        raise argparse.ArgumentTypeError(msg) from None
    if any(d < 0 for d in dims):
        msg = f"invalid shape {text!r}: dimensions must be non-negative"
        raise argparse.ArgumentTypeError(msg)
    return dims


def explain(data_shape: tuple[int, ...], indices_shape: tuple[int, ...], axis: int) -> str:
    """The output shape and the spec's index equation for these shapes."""
    ax = normalize_axis(axis, len(data_shape))
    out = output_shape(data_shape, indices_shape, ax)
    before = [f"j{k}" for k in range(ax)]
    after = [f"j{k}" for k in range(ax, len(data_shape) - 1)]
    idx = [f"i{k}" for k in range(len(indices_shape))]
    index_expr = f"indices[{', '.join(idx)}]" if idx else "indices"
    lhs = ", ".join([*before, *idx, *after])
    rhs = ", ".join([*before, index_expr, *after])
    size = data_shape[ax]
    output = f"output[{lhs}]" if lhs else "output"  # a 0-d output takes no subscript
    lines = [
        f"data shape {data_shape}, indices shape {indices_shape}, axis {axis}",
        f"output shape: {out}",
        f"{output} = data[{rhs}]",
    ]
    if size == 0:
        # index_range would give the empty range [0, -1], which reads as two valid indices.
        lines.append(f"valid indices: none: axis {axis} has size 0, so no index is valid")
        if 0 not in indices_shape:
            lines.append("note: these indices are not empty, so gather raises IndexError; "
                         "only indices with a 0 in their shape can be gathered here")  # fmt: skip
    else:
        lo11, hi = index_range(size, 11)
        lines.append(f"valid indices: [{lo11}, {hi}] (opset >= 11), [0, {hi}] (opset 1-10)")
    return "\n".join(lines)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gatherx", description=plain(__doc__ or ""))
    parser.add_argument("--version", action="version", version=f"gatherx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = sub.add_parser("check", help="run the ONNX Gather cases on every installed backend, "
                           "or the conformance suite on a namespace or a Gather function",
                           description="Run the official ONNX Gather cases and the spec's "
                           "examples on each backend and print a table. With --namespace or "
                           "--impl, run the conformance suite (ONNX cases, spec examples and a "
                           "generated grid of ranks, axes, index kinds and dtypes) instead: "
                           "one table of case groups, exit code 1 on any failure.")  # fmt: skip
    target = check.add_mutually_exclusive_group()
    target.add_argument("--backends", help="comma-separated subset of: " + ", ".join(BACKENDS))
    target.add_argument("--namespace", metavar="MODULE",
                        help="run the conformance suite through gatherx on this array "
                        "namespace (numpy, array_api_strict, cubed.array_api, ndonnx, "
                        "sparse, ...)")  # fmt: skip
    target.add_argument("--impl", metavar="SPEC",
                        help="run the conformance suite on a Gather function "
                        "fn(data, indices, axis) given as package.module:function, or on "
                        "onnxruntime or onnx.reference")  # fmt: skip
    check.add_argument("--json", metavar="PATH",
                       help="with --namespace or --impl: write every check's result "
                       "to this file")  # fmt: skip
    ex = sub.add_parser("explain", help="output shape and index equation for given shapes",
                        description="Print the output shape, the index equation of the "
                        "specification and the valid index range for these shapes.")  # fmt: skip
    ex.add_argument("--data-shape", type=_shape, required=True, help="e.g. 5,4")
    ex.add_argument("--indices-shape", type=_shape, required=True, help="e.g. 2,2 ('' = scalar)")
    ex.add_argument("--axis", type=int, default=0)
    from .bench.harness import DESCRIPTION, add_arguments

    bench = sub.add_parser("bench", help="time gatherx against native ops (see docs)",
                           description=DESCRIPTION)  # fmt: skip
    add_arguments(bench)
    return parser


#: The exit status of a command whose output pipe was closed early (``gatherx ... | head``),
#: as a shell reports a program that SIGPIPE ended: 128 + 13.
BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    prog = f"{parser.prog} {args.command}"  # as argparse names its own errors of the command
    try:
        code = _run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
    except BrokenPipeError:
        # The reader has gone (``| head``): the rest of the output goes nowhere, quietly, and
        # Python's own flush at exit finds nothing to complain about.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except ImportError as exc:  # an optional package that no check before the run caught
        hint = ("install matplotlib for --plot" if exc.name == "matplotlib"
                else "install the checks with pip install 'gatherx[check]'")  # fmt: skip
        parser.exit(2, _error_line(prog, f"{exc}; {hint}"))
    except (ValueError, TypeError, IndexError) as exc:
        parser.exit(2, _error_line(prog, str(exc)))
    return code


def _run(args: argparse.Namespace) -> int:
    if args.command == "check":
        if args.namespace is not None or args.impl is not None:
            return run_conformance(args)
        if args.json:
            msg = "--json needs --namespace or --impl"
            raise ValueError(msg)
        return run_check(_options.backends(args.backends, BACKENDS)[0])
    if args.command == "explain":
        if not args.data_shape:
            msg = "--data-shape '' is a scalar's shape: Gather's data has rank >= 1"
            raise ValueError(msg)
        print(explain(args.data_shape, args.indices_shape, args.axis))
        return 0
    from .bench import run

    return int(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
