"""Time the alternative formulations behind gatherx/_strategy.py, one backend section at a time.

Usage: python benchmarks/strategies.py SECTION [--repeats N] [--threads N] [--sweep SEED]
with SECTION one of numpy-forward, numpy-forward-strided, numpy-scalar, numpy-grad,
numpy-half, torch-forward, torch-out, torch-backward, torch-half, jax-forward, jax-vjp. Each
prints, per shape it applies to, the median time of every formulation (interleaved rounds).
With --sweep SEED, the shapes are the random cases ``gatherx bench --sweep 300 --seed SEED``
draws whose output holds at least 16 KiB (strided ones included).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from gatherx.bench import CASES, Case, fmt_time, make_inputs, rounds

#: The benchmark's cases plus shapes that separate the rules: tiny inner blocks, one outer row.
EXTRA = (
    Case("rows8", (4096, 8), (10000,), 0),
    Case("post4", (256, 1024, 4), (512,), 1),
    Case("pre1-mid", (1, 4096, 512), (1024,), 1),
    Case("mid64", (64, 1024, 64), (512,), 1),
    Case("mid16", (256, 1024, 16), (512,), 1),
    Case("mid-small", (8, 512, 256), (256,), 1),
    Case("rank4-f64", (16, 32, 16, 64), (4, 8), 2, dtype="float64"),
    Case("last-f64", (256, 256, 64), (32,), -1, dtype="float64"),
    Case("short-f64", (1000, 8), (200000,), 0, dtype="float64"),
    Case("rows4", (1000, 4), (200000,), 0),
    Case("rows32", (1000, 32), (50000,), 0),
    Case("last-wide", (64, 4096), (2048,), 1),
    Case("last-small", (64, 64), (32,), 1),
    Case("flat", (100000,), (200000,), 0),
    Case("rows8-sparse", (100000, 8), (20000,), 0),
    Case("rows8-even", (20000, 8), (20000,), 0),
    Case("rows2-pre4", (4, 5000, 2), (40000,), 1),
    # scalar indices: rows of 1 KiB, 4 KiB and 16 KiB behind 512, 64 and 1 outer rows
    Case("scalar-1k", (512, 16, 256), (), 1),
    Case("scalar-16k", (64, 64, 4096), (), 1),
    Case("scalar-pre1", (1, 4096, 4096), (), 1),
    # out= on 32-byte rows, from a few hundred indices to many
    Case("out8-256", (1000, 8), (256,), 0),
    Case("out8-1k", (1000, 8), (1024,), 0),
    Case("out8-4k", (1000, 8), (4096,), 0),
    Case("out8-64k", (1000, 8), (65536,), 0),
)
SHAPES = (*CASES, *EXTRA)
#: The half-precision gradients' shapes (the -half sections only): tables of a few rows to 64M
#: elements, few indices and many.
HALF = (
    Case("half-48", (48,), (), 0, dtype="float16"),
    Case("half-410", (410, 1), (6,), 0, dtype="float16"),
    Case("half-2000", (2000,), (40,), 0, dtype="float16"),
    Case("half-17x4", (17, 4), (2,), 0, dtype="float16"),
    Case("half-24553", (24553,), (8288,), 0, dtype="float16"),
    Case("half-62605", (62605,), (2455,), 0, dtype="float16"),
    Case("half-45954x27", (45954, 27), (38,), 0, dtype="float16"),
    Case("half-200000", (200000,), (30,), 0, dtype="float16"),
    Case("half-7465282", (7465282,), (4,), 0, dtype="float16"),
    Case("half-table", (1000000, 64), (4096,), 0, dtype="float16"),
)


def three_d(c: Case) -> tuple[int, int, int]:
    ax = c.ax
    return (math.prod(c.data_shape[:ax]), c.data_shape[ax], math.prod(c.data_shape[ax + 1 :]))


def _check(i: np.ndarray, size: int) -> None:
    """gatherx's own bounds check: every index in [-size, size - 1]."""
    if i.min() < -size or i.max() >= size:
        raise IndexError


def section_numpy_forward(c: Case) -> dict[str, Callable[[], Any]]:
    """gatherx's indices (negatives included) unless the name says "wrapped"."""
    import gatherx
    from gatherx._backends import numpy as nb

    x = make_inputs(c)
    d, i, w, ax = x.data, x.indices, x.wrapped, c.ax
    size = c.data_shape[ax]
    key = (slice(None),) * ax + (i,)

    def checked(f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            _check(i, size)
            return f()

        return run

    fns: dict[str, Callable[[], Any]] = {
        "np.take wrapped": partial(np.take, d, w, axis=ax),
        "fancy wrapped": lambda: d[x.key],
        "check + take wrap": checked(partial(d.take, i, axis=ax, mode="wrap")),
        "check + take clip wrapped": checked(partial(d.take, w, axis=ax, mode="clip")),
        "fancy": lambda: d[key],
    }
    for plan in nb.FORWARD_PLANS:
        fns[f"plan {plan}"] = partial(nb.take_by_plan, plan, d, i, ax)
    fns["gatherx"] = partial(gatherx.gather, d, i, axis=c.axis)
    return fns


def section_numpy_forward_strided(c: Case) -> dict[str, Callable[[], Any]]:
    """The same on non-contiguous data: every other element of a twice-as-long last axis."""
    import gatherx
    from gatherx._backends import numpy as nb

    x = make_inputs(c)
    wide = np.repeat(x.data[..., None], 2, axis=-1).reshape(*c.data_shape[:-1], -1)
    d, i, ax = wide[..., ::2], x.indices, c.ax
    fns: dict[str, Callable[[], Any]] = {"np.take wrapped": partial(np.take, d, x.wrapped, axis=ax)}
    for plan in ("raise", "fancy"):
        fns[f"plan {plan}"] = partial(nb.take_by_plan, plan, d, i, ax)
    fns["gatherx"] = partial(gatherx.gather, d, i, axis=c.axis)
    return fns


def section_numpy_scalar(c: Case) -> dict[str, Callable[[], Any]] | None:
    """A scalar index (cases with one only): ``ndarray.take`` against a copy of the slice."""
    if c.index_shape:
        return None
    import gatherx

    x = make_inputs(c)
    d, ax, value = x.data, c.ax, int(x.wrapped)
    key = (slice(None),) * ax + (value,)
    return {
        "take": partial(d.take, x.wrapped, ax),
        "slice copy": lambda: d[key].copy(),
        "fancy": lambda: d[(slice(None),) * ax + (x.wrapped,)],
        "gatherx": partial(gatherx.gather, d, x.indices, axis=c.axis),
    }


def section_numpy_grad(c: Case) -> dict[str, Callable[[], Any]]:
    import gatherx
    from gatherx._backends import numpy as nb

    x = make_inputs(c)
    i, g = x.indices, x.grad

    def add_at() -> np.ndarray:
        z = np.zeros(c.data_shape, g.dtype)
        np.add.at(z, x.key, g)
        return z

    fns: dict[str, Callable[[], Any]] = {"np.add.at": add_at}
    for plan in nb.GRAD_PLANS:  # the plans take checked, non-negative indices
        fns[plan] = partial(nb.grad_by_plan, plan, c.data_shape, x.wrapped, g, c.ax)
    fns["gatherx"] = partial(gatherx.gather_grad, c.data_shape, i, g, axis=c.axis)
    # Half precision: summed in float32 (float64 by the columns plan), rounded once.
    halves: dict[str, Any] = {"float16": np.float16}
    try:
        import ml_dtypes

        halves["bfloat16"] = ml_dtypes.bfloat16
    except ImportError:  # no bfloat16 without ml_dtypes
        pass
    for name, dtype in halves.items():
        half = g.astype(dtype)
        fns[f"gatherx {name}"] = partial(gatherx.gather_grad, c.data_shape, i, half, axis=c.axis)
    return fns


def section_torch_forward(c: Case) -> dict[str, Callable[[], Any]] | None:
    import torch

    if c.strided:  # (the views below need contiguous data)
        return None
    x = make_inputs(c)
    ax, (pre, s, post) = c.ax, three_d(c)
    td = torch.from_numpy(x.data)
    flat = torch.from_numpy(x.wrapped).reshape(-1)
    flat32 = flat.int()
    n = flat.numel()
    shape = c.out_shape
    d3, d4 = td.view(pre, s, post), td.view(pre, 1, s, post)
    fns = {
        "index_select": lambda: torch.index_select(td, ax, flat).view(shape),
        "index_select int32": lambda: torch.index_select(td, ax, flat32).view(shape),
        "3-D index_select(1)": lambda: torch.index_select(d3, 1, flat).view(shape),
        "3-D index_select(1) int32": lambda: torch.index_select(d3, 1, flat32).view(shape),
        "4-D index_select(2)": lambda: torch.index_select(d4, 2, flat).view(shape),
        "3-D indexing": lambda: d3[:, flat].view(shape),
        "rows flat": lambda: torch.index_select(
            td.view(pre * s, post), 0, (torch.arange(0, pre * s, s)[:, None] + flat).view(-1)
        ).view(shape),
        "movedim indexing": lambda: torch.movedim(torch.movedim(td, ax, 0)[flat], 0, ax),
        "moved out": partial(_moved_out, d3, flat, shape),
    }
    if pre == 1:
        d2 = td.view(s, post)
        fns["2-D index_select(0)"] = lambda: torch.index_select(d2, 0, flat).view(shape)
        fns["embedding"] = lambda: torch.nn.functional.embedding(flat, d2).view(shape)
    if post == 1:
        d2 = td.view(pre, s)
        fns["gather expand"] = lambda: torch.gather(d2, 1, flat.expand(pre, n)).view(shape)
        dims = [1] * td.ndim
        dims[ax] = n
        wide = list(td.shape)
        wide[ax] = n
        fns["gather as given"] = lambda: torch.gather(td, ax, flat.view(dims).expand(wide)).view(
            shape
        )
    return fns


def section_torch_out(c: Case) -> dict[str, Callable[[], Any]] | None:
    """``out=`` on rows of at most 32 bytes on axis 0 (cases with such rows only): NumPy's
    writer on the tensors' memory against ``index_select(out=)``, both after gatherx's check."""
    pre, s, post = three_d(c)
    if pre != 1 or post * np.dtype(c.dtype).itemsize > 32 or not c.index_shape:
        return None
    import torch

    import gatherx
    from gatherx import _rules
    from gatherx._backends import numpy as nb

    x = make_inputs(c)
    td, ti = torch.from_numpy(x.data), torch.from_numpy(x.indices)
    out = torch.empty(c.out_shape, dtype=td.dtype)
    flat_out = out.view(-1, *c.data_shape[1:])

    def numpy_writer() -> Any:
        return nb.OUT_WRITER.take_checked(td.numpy(), ti.numpy(), 0, out.numpy(), 13)

    def index_select() -> Any:
        wrapped = torch.from_numpy(_rules.host_wrapped(ti.numpy(), s, 13)).reshape(-1)
        return torch.index_select(td, 0, wrapped, out=flat_out)

    return {
        "numpy writer": numpy_writer,
        "host wrap + index_select(out=)": index_select,
        "gatherx": partial(gatherx.gather, td, ti, out=out),
    }


def _moved_out(d3: Any, flat: Any, shape: tuple[int, ...]) -> Any:
    """index_select on dim 0 of the (size, pre, post) view, written through the same view of a
    contiguous (pre, n, post) output: ATen's per-index slice copy, parallel over indices."""
    import torch

    out = d3.new_empty((d3.shape[0], flat.shape[0], d3.shape[2]))
    torch.index_select(d3.transpose(0, 1), 0, flat, out=out.transpose(0, 1))
    return out.view(shape)


def section_torch_backward(c: Case) -> dict[str, Callable[[], Any]]:
    import torch

    x = make_inputs(c)
    ax, (pre, s, post) = c.ax, three_d(c)
    flat = torch.from_numpy(x.wrapped).reshape(-1)
    flat32 = flat.int()
    n = flat.numel()
    g = torch.from_numpy(x.grad)
    g3 = g.view(pre, n, post)
    shape = c.data_shape
    gshape = (*shape[:ax], n, *shape[ax + 1 :])

    def index_add(index: torch.Tensor) -> torch.Tensor:
        return g.new_zeros(shape).index_add_(ax, index, g.view(gshape))

    def index_add_3d(index: torch.Tensor) -> torch.Tensor:
        return g.new_zeros((pre, s, post)).index_add_(1, index, g3).view(shape)

    def scatter_add() -> torch.Tensor:
        idx = flat.view(1, n, 1).expand(pre, n, post)
        return g.new_zeros((pre, s, post)).scatter_add_(1, idx, g3).view(shape)

    def index_put() -> torch.Tensor:
        out = g.new_zeros((s, pre, post))
        return out.index_put_((flat,), g3.transpose(0, 1), accumulate=True).transpose(0, 1)

    def sorted_add() -> torch.Tensor:
        order = torch.argsort(flat, stable=True)
        return g.new_zeros((pre, s, post)).index_add_(1, flat[order], g3[:, order]).view(shape)

    fns = {
        "index_add_": partial(index_add, flat),
        "index_add_ int32": partial(index_add, flat32),
        "3-D index_add_(1)": partial(index_add_3d, flat),
        "3-D index_add_(1) int32": partial(index_add_3d, flat32),
        "3-D scatter_add_": scatter_add,
        "sorted 3-D index_add_": sorted_add,
        "zeros only": lambda: g.new_zeros(shape),
    }
    if pre == 1:
        fns["index_put_ accumulate"] = index_put
        fns["embedding_backward"] = lambda: torch.ops.aten.embedding_dense_backward(
            g.view(n, post), flat, s, -1, False
        )
    return fns


def section_torch_half(c: Case) -> dict[str, Callable[[], Any]]:
    """float16 gradients summed in float32 and rounded once, by either plan of
    ``half_grad_plan``, and float16's own ``index_add_`` for scale."""
    import torch

    x = make_inputs(c)
    ax, shape = c.ax, c.data_shape
    flat = torch.from_numpy(x.wrapped).reshape(-1)
    g = torch.from_numpy(x.grad).view((*shape[:ax], flat.numel(), *shape[ax + 1 :]))

    def distinct() -> torch.Tensor:
        rows, slot = torch.unique(flat, return_inverse=True)
        sums = g.new_zeros((*shape[:ax], rows.numel(), *shape[ax + 1 :]), dtype=torch.float32)
        sums.index_add_(ax, slot, g.float())
        return g.new_zeros(shape).index_copy_(ax, rows, sums.to(g.dtype))

    return {
        "distinct": distinct,
        "float32 table": lambda: (
            g.new_zeros(shape, dtype=torch.float32).index_add_(ax, flat, g.float()).to(g.dtype)
        ),
        "float16 index_add_": lambda: g.new_zeros(shape).index_add_(ax, flat, g),
    }


def section_numpy_half(c: Case) -> dict[str, Callable[[], Any]]:
    """The same on NumPy: gatherx's two plans (the float32 one by the plan ``grad_by_plan``
    picks for float32), and ``np.add.at`` in float16 itself for scale."""
    from gatherx._backends import numpy as nb

    x = make_inputs(c)
    shape, ax = c.data_shape, c.ax
    pre, s, post = three_d(c)
    flat = x.wrapped.reshape(-1)
    g = x.grad

    def add_at() -> np.ndarray:
        out = np.zeros(shape, g.dtype)
        np.add.at(out, (*(slice(None),) * ax, x.wrapped), g)
        return out

    return {
        "distinct": lambda: nb._half_distinct(shape, pre, s, post, flat, g),
        "float32 table": lambda: nb.grad_by_plan(
            None, shape, x.wrapped, g.astype(np.float32), ax
        ).astype(g.dtype),
        "float16 np.add.at": add_at,
    }


def _lax_take(d: Any, i: Any, axis: int, mode: Any) -> Any:
    from jax import lax

    dnums = lax.GatherDimensionNumbers(
        offset_dims=(*range(axis), *range(axis + i.ndim, d.ndim + i.ndim - 1)),
        collapsed_slice_dims=(axis,),
        start_index_map=(axis,),
    )
    sizes = (*d.shape[:axis], 1, *d.shape[axis + 1 :])
    return lax.gather(d, i[..., None], dnums, sizes, mode=mode)


def _jax_variants(c: Case) -> dict[str, Callable[[Any, Any], Any]]:
    import jax.numpy as jnp
    from jax import lax

    ax, (pre, s, post) = c.ax, three_d(c)
    fd, pib = lax.GatherScatterMode.FILL_OR_DROP, lax.GatherScatterMode.PROMISE_IN_BOUNDS
    shape = c.out_shape

    def in3d(mode: Any) -> Callable[[Any, Any], Any]:
        return lambda d, i: _lax_take(d.reshape(pre, s, post), i.reshape(-1), 1, mode).reshape(
            shape
        )

    return {
        "jnp.take": lambda d, i: jnp.take(d, i, axis=ax),
        "lax.gather fill": lambda d, i: _lax_take(d, i, ax, fd),
        "lax.gather promise": lambda d, i: _lax_take(d, i, ax, pib),
        "3-D lax.gather fill": in3d(fd),
        "3-D lax.gather promise": in3d(pib),
        "moveaxis lax.gather fill": lambda d, i: jnp.moveaxis(
            _lax_take(jnp.moveaxis(d, ax, 0), i, 0, fd), tuple(range(i.ndim)),
            tuple(range(ax, ax + i.ndim))),
    }  # fmt: skip


def section_jax_forward(c: Case) -> dict[str, Callable[[], Any]]:
    import jax
    import jax.numpy as jnp

    x = make_inputs(c)
    jd, ji = jnp.asarray(x.data), jnp.asarray(x.indices)
    out = {}
    for name, f in _jax_variants(c).items():
        jf = jax.jit(f)
        out[name] = lambda jf=jf: jf(jd, ji).block_until_ready()
    return out


def section_jax_vjp(c: Case) -> dict[str, Callable[[], Any]]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = make_inputs(c)
    jd, ji, jg = jnp.asarray(x.data), jnp.asarray(x.indices), jnp.asarray(x.grad)
    pre, s, post = three_d(c)
    out = {}
    for name, f in _jax_variants(c).items():
        jf = jax.jit(lambda d, i, g, f=f: jax.vjp(lambda t: f(t, i), d)[1](g)[0])
        out[name] = lambda jf=jf: jf(jd, ji, jg).block_until_ready()

    def scatter(mode: Any, sort: bool) -> Callable[[Any, Any], Any]:
        def f(i: Any, g: Any) -> Any:
            flat = i.reshape(-1)
            g3 = g.reshape(pre, flat.shape[0], post)
            if sort:
                order = jnp.argsort(flat)
                flat, g3 = flat[order], g3[:, order]
            dn = lax.ScatterDimensionNumbers(
                update_window_dims=(0, 2), inserted_window_dims=(1,),
                scatter_dims_to_operand_dims=(1,))  # fmt: skip
            z = jnp.zeros((pre, s, post), g.dtype)
            r = lax.scatter_add(z, flat[:, None], g3, dn, mode=mode, indices_are_sorted=sort)
            return r.reshape(c.data_shape)

        return f

    for name, mode in (("fill", lax.GatherScatterMode.FILL_OR_DROP),
                       ("promise", lax.GatherScatterMode.PROMISE_IN_BOUNDS)):  # fmt: skip
        for sort in (False, True):
            jf = jax.jit(scatter(mode, sort))
            label = f"3-D scatter_add {name}{' sorted' if sort else ''}"
            out[label] = lambda jf=jf: jf(ji, jg).block_until_ready()
    return out


SECTIONS: dict[str, Callable[[Case], dict[str, Callable[[], Any]] | None]] = {
    "numpy-forward": section_numpy_forward,
    "numpy-forward-strided": section_numpy_forward_strided,
    "numpy-scalar": section_numpy_scalar,
    "numpy-grad": section_numpy_grad,
    "torch-forward": section_torch_forward,
    "torch-out": section_torch_out,
    "torch-backward": section_torch_backward,
    "torch-half": section_torch_half,
    "numpy-half": section_numpy_half,
    "jax-forward": section_jax_forward,
    "jax-vjp": section_jax_vjp,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("section", choices=list(SECTIONS))
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--cases", default=None, help="comma-separated shape names")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--sweep",
        type=int,
        default=None,
        metavar="SEED",
        help="the sweep's random cases of this seed, outputs of 16 KiB or more",
    )
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    shapes = HALF if args.section.endswith("-half") else SHAPES
    if args.sweep is not None:
        from gatherx.bench.sweep import draw_cases

        shapes = tuple(c for c in draw_cases(300, args.sweep) if c.out_bytes >= 2**14)
    wanted = args.cases.split(",") if args.cases else [c.name for c in shapes]
    for case in shapes:
        if case.name not in wanted:
            continue
        fns = SECTIONS[args.section](case)
        if fns is None:  # the section does not apply to this shape
            continue
        samples = rounds(fns, args.repeats, 2e-3, args.clock)
        times = {name: statistics.median(s) for name, s in samples.items()}
        base = next(iter(times.values()))
        cells = ", ".join(f"{k} {fmt_time(v)} ({v / base:.2f})" for k, v in times.items())
        print(f"{case.name} {case.describe()} {three_d(case)}: {cells}", flush=True)


if __name__ == "__main__":
    main()
