"""Peak extra memory of gatherx's forward and gather_grad, per backend, on the bench's cases.

Usage: python benchmarks/memory.py [--cases NAMES] [--backends numpy,torch]
       python benchmarks/memory.py --sparse [--cases table,embed]

"Extra" is the peak of the bytes allocated during the call, less the result's own bytes: what
the call needs besides its output (with ``out=`` the result is the caller's: all of the peak).
NumPy's allocations are read with ``tracemalloc`` (NumPy reports its data buffers to it);
PyTorch's CPU allocator keeps no counters, so its allocations are read from
``torch.profiler``'s memory events (``profile_memory=True``), their running sum in time order
giving the peak. JAX's CPU client reports no memory statistics.

``--sparse``: the backward of a gather on the tables of ``gatherx bench --sparse`` (PyTorch,
CPU), ``torch.autograd.grad(out, table, g)`` with a dense ``g`` made beforehand, as is the
forward: gatherx's ``sparse_grad=True`` gradient, ``F.embedding(sparse=True)``'s, and
gatherx's dense one for contrast. The peak of the bytes allocated during the backward, its
result included, is set against the gathered output's bytes: a sparse gradient holds the
output's values and the ids, so its backward should need at most `SPARSE_PEAK` times the
output, whatever the size of the table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from gatherx.bench import CASES, Case, make_inputs

#: The most a sparse backward should allocate, in output bytes (the result included).
SPARSE_PEAK = 2.0


def numpy_peak(fn: Callable[[], Any]) -> tuple[int, int]:
    """(peak bytes allocated during ``fn()``, bytes of its result)."""
    fn()  # warm: first-call caches are not the call's own cost
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, np.asarray(out).nbytes


def torch_peak(fn: Callable[[], Any]) -> tuple[int, int]:
    """The same from the profiler's memory events of ``fn()``."""
    peak, out = torch_peak_of(fn)
    return peak, out.numel() * out.element_size()


def torch_peak_of(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(peak bytes allocated during ``fn()``, its result), from the profiler's memory events."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    quiet = contextlib.redirect_stderr(io.StringIO())
    with quiet, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()  # type: ignore[union-attr]
        if e.name() == "[memory]"
    )
    running = peak = 0
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return peak, out


def mib(n: float) -> str:
    return f"{n / 2**20:.2f}"


def rows_for(case: Case, backends: list[str]) -> list[str]:
    import gatherx

    x = make_inputs(case)
    c = x.case
    rows = []

    def add(backend: str, task: str, label: str, measured: tuple[int, int]) -> None:
        peak, out = measured
        rows.append(f"| {c.name} | {backend} | {task} | {label} | {mib(out)} | {mib(peak - out)} |")

    if "numpy" in backends:
        d, i, w, g = x.data, x.indices, x.wrapped, x.grad

        def add_at() -> np.ndarray:
            z = np.zeros(c.data_shape, g.dtype)
            np.add.at(z, x.key, g)
            return z

        add("numpy", "forward", "gatherx", numpy_peak(lambda: gatherx.gather(d, i, axis=c.axis)))
        add("numpy", "forward", "np.take", numpy_peak(lambda: np.take(d, w, axis=c.ax)))
        buf = np.empty_like(x.out)  # out=: the result is the caller's, all of the peak extra
        peak, _ = numpy_peak(lambda: gatherx.gather(d, i, axis=c.axis, out=buf))
        add("numpy", "forward (out=)", "gatherx", (peak, 0))
        grad = numpy_peak(lambda: gatherx.gather_grad(c.data_shape, i, g, axis=c.axis))
        add("numpy", "gather_grad", "gatherx", grad)
        add("numpy", "gather_grad", "np.add.at", numpy_peak(add_at))
    if "torch" in backends:
        import torch

        td, ti, tg = (torch.from_numpy(a) for a in (x.data, x.indices, x.grad))
        tw = torch.from_numpy(x.wrapped).reshape(-1)
        shape = c.out_shape
        gx = torch_peak(lambda: gatherx.gather(td, ti, axis=c.axis))
        add("torch", "forward", "gatherx", gx)
        add("torch", "forward", "index_select",
            torch_peak(lambda: torch.index_select(td, c.ax, tw).view(shape)))  # fmt: skip
        tbuf = torch.empty(shape, dtype=td.dtype)
        peak, _ = torch_peak(lambda: gatherx.gather(td, ti, axis=c.axis, out=tbuf))
        add("torch", "forward (out=)", "gatherx", (peak, 0))
        add("torch", "gather_grad", "gatherx",
            torch_peak(lambda: gatherx.gather_grad(c.data_shape, ti, tg, axis=c.axis)))  # fmt: skip
        source = tg.reshape((*c.data_shape[: c.ax], tw.numel(), *c.data_shape[c.ax + 1 :]))
        zeros = partial(tg.new_zeros, c.data_shape)
        add("torch", "gather_grad", "zeros + index_add_",
            torch_peak(lambda: zeros().index_add_(c.ax, tw, source)))  # fmt: skip
    return rows


def sparse_rows(case: Case) -> list[str]:
    """The backward of ``case``'s gather (PyTorch, CPU), gradient by gradient."""
    import torch

    from gatherx.bench.sparse import FORWARD_BACKWARD, LABELS, forwards, make_lookup

    x = make_lookup(case.data_shape, case.index_shape, case.dtype, "cpu")
    upstream = torch.randn(case.out_shape, generator=torch.Generator().manual_seed(1))
    out = case.out_bytes
    rows = []
    for role, forward in forwards(x).items():
        result = forward(x.table)  # the forward is not the backward's cost

        def backward(result: Any = result) -> Any:
            return torch.autograd.grad(result, x.table, upstream, retain_graph=True)[0]

        peak, grad = torch_peak_of(backward)
        met = "yes" if peak <= SPARSE_PEAK * out else "**no**"
        rows.append(
            f"| {case.name} | {LABELS[FORWARD_BACKWARD][role]} | {grad.layout} | {mib(out)} | "
            f"{peak} | {mib(peak)} | {peak / out:.3f} | {met if role != 'dense' else '-'} |"
        )
        del result, grad
    return rows


def sparse_main(wanted: list[str] | None) -> None:
    """Print the backward memory of the sparse task's cases."""
    from gatherx.bench.sparse import SPARSE_CASES

    print("| case | gradient | layout | output MiB | peak bytes | peak MiB | peak / output | "
          f"peak <= {SPARSE_PEAK:g}x output |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for case in SPARSE_CASES:
        if wanted is None or case.name in wanted:
            print("\n".join(sparse_rows(case)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    parser.add_argument("--backends", default="numpy,torch")
    parser.add_argument(
        "--sparse", action="store_true", help="the sparse gradients' backward: table, embed"
    )
    args = parser.parse_args()
    if args.sparse:
        sparse_main(args.cases.split(",") if args.cases else None)
        return
    wanted = args.cases.split(",") if args.cases else [c.name for c in CASES]
    backends = args.backends.split(",")
    print("| case | backend | task | formulation | result MiB | peak extra MiB |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        if case.name in wanted:
            print("\n".join(rows_for(case, backends)), flush=True)


if __name__ == "__main__":
    main()
