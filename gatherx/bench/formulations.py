"""The formulations timed: gatherx and each backend's native ways of writing a gather."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Literal

import numpy as np

from .._conformance import to_numpy
from .._rules import HALF_DTYPES
from .cases import OUT_TASK, Case, itemsize, numpy_dtype


@dataclass
class Entry:
    """One timed formulation: ``kind`` is gatherx, native, memcpy (a copy of the output into a
    preallocated buffer), alloc (a copy into a fresh one, the backend's allocator's), fresh
    (gatherx without ``out=``, timed in the ``out=`` group: what ``out=`` saves, paired) or
    floor (the least a gather written as a ``torch.autograd.Function`` costs: gatherx against
    it in a row of its own, :data:`gatherx.bench.cases.FLOOR_TASK`)."""

    backend: str
    task: str
    label: str
    kind: str
    fn: Callable[[], Any]
    check: Callable[[], Any] | None = None  # returns a NumPy result to compare, if not fn


@dataclass
class Inputs:
    """Host arrays of one case: data, indices, output gradient, and the NumPy oracles.

    ``indices`` (gatherx's) span [-s, s-1], about half of them negative; ``wrapped`` holds the
    same values made non-negative, for the native formulations, which cannot all take
    negative indices. ``grad`` holds small integers (-1, 0, 1): their sums are exact in any
    order, so every gradient formulation can be held to the oracle ``data_grad`` whatever
    its order of summation. Data of a dtype that has no gradient (integers, bool) gets zeros.
    """

    case: Case
    data: np.ndarray
    indices: np.ndarray
    wrapped: np.ndarray
    grad: np.ndarray
    out: np.ndarray
    data_grad: np.ndarray

    @property
    def key(self) -> tuple[Any, ...]:
        """The fancy-indexing key of the native formulations (non-negative indices)."""
        return (slice(None),) * self.case.ax + (self.wrapped,)


def differentiable(dtype: str | np.dtype[Any]) -> bool:
    """Whether data of ``dtype`` has gradients: the gradient tasks are timed on floats only."""
    name = str(dtype)
    return name in HALF_DTYPES or bool(np.issubdtype(np.dtype(name), np.floating))


def make_inputs(case: Case, seed: int = 0) -> Inputs:
    """The arrays of ``case``, drawn from ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    case : Case
        The shapes, dtype and layout; ``strided`` data is every other element along the last
        axis longer than one of an array twice as long there: a view no copy makes
        contiguous.
    seed : int, optional
        The generator's seed; the same case and seed give the same arrays.

    Returns
    -------
    Inputs
        The data, both sets of indices, the output gradient and the two oracles.

    Raises
    ------
    ValueError
        If ``case`` is strided but no axis of its data is longer than one.
    """
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(case.dtype)
    data = _data(rng, case)
    size = case.data_shape[case.ax]
    indices = np.asarray(rng.integers(-size, size, size=case.index_shape, dtype=np.int64))
    if case.first_non_negative and indices.size:
        indices.reshape(-1)[0] %= size
    wrapped = np.asarray(indices % size)  # 0-d arrays, not NumPy scalars, for a scalar index
    out = np.asarray(np.take(data, wrapped, axis=case.ax))  # 0-d, not a scalar, at rank 0
    if not differentiable(dtype):
        grad, data_grad = np.zeros(case.out_shape, dtype), np.zeros(case.data_shape, dtype)
        return Inputs(case, data, indices, wrapped, grad, out, data_grad)
    grad = rng.integers(-1, 2, size=case.out_shape, dtype=np.int8).astype(dtype)
    # half-precision sums in float64: exact, then rounded once (float16 holds integers to
    # 2048, bfloat16 to 256)
    total = np.zeros(case.data_shape, np.float64 if case.dtype in HALF_DTYPES else dtype)
    key: tuple[Any, ...] = (*(slice(None),) * case.ax, wrapped)
    np.add.at(total, key, grad)
    return Inputs(case, data, indices, wrapped, grad, out, total.astype(dtype, copy=False))


def _data(rng: np.random.Generator, case: Case) -> np.ndarray:
    """Data of ``case``'s shape and dtype; a strided view if ``case.strided``."""
    dtype = numpy_dtype(case.dtype)
    shape = list(case.data_shape)
    longer = [a for a, n in enumerate(shape) if n > 1]
    if case.strided:
        if not longer:
            msg = f"bench: strided data needs an axis longer than one, not {case.data_shape}"
            raise ValueError(msg)
        shape[longer[-1]] *= 2
    if dtype == np.float32 or dtype == np.float64:
        data = rng.standard_normal(shape).astype(dtype)
    elif differentiable(case.dtype):  # float16, bfloat16
        data = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    elif dtype == np.bool_:
        data = rng.integers(0, 2, size=shape, dtype=np.uint8).astype(bool)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(max(info.min, -100), min(info.max, 100), size=shape, dtype=dtype)
    if not case.strided:
        return data
    every_other = [slice(None)] * len(shape)
    every_other[longer[-1]] = slice(None, None, 2)
    return data[tuple(every_other)]


# --------------------------------------------------------------------------- formulations


def numpy_entries(x: Inputs) -> list[Entry]:
    import gatherx

    c, d, i, w, g = x.case, x.data, x.indices, x.wrapped, x.grad
    key = x.key
    buf = np.empty_like(x.out)

    def add_at() -> np.ndarray:
        z = np.zeros(c.data_shape, g.dtype)
        np.add.at(z, key, g)
        return z

    entries = [
        Entry("numpy", "forward", "memcpy of output", "memcpy", partial(np.copyto, buf, x.out),
              check=lambda: x.out),
        Entry("numpy", "forward", "gatherx", "gatherx", partial(gatherx.gather, d, i, axis=c.axis)),
        Entry("numpy", "forward", "np.take", "native", partial(np.take, d, w, axis=c.axis)),
        Entry("numpy", "forward", "fancy indexing", "native", lambda: d[key]),
        Entry("numpy", "gather_grad", "gatherx", "gatherx",
              partial(gatherx.gather_grad, c.data_shape, i, g, axis=c.axis)),
        Entry("numpy", "gather_grad", "np.add.at", "native", add_at),
        Entry("numpy", "forward", "allocating copy of output", "alloc", x.out.copy,
              check=lambda: x.out),
        *numpy_out_entries(x),
    ]  # fmt: skip
    return entries if differentiable(c.dtype) else [e for e in entries if not _is_grad(e)]


def _is_grad(e: Entry) -> bool:
    """Whether ``e`` computes a gradient (of the data: the oracle ``data_grad``)."""
    return "grad" in e.task or "backward" in e.task or "vjp" in e.task


def numpy_out_entries(x: Inputs) -> list[Entry]:
    """``out=`` into a preallocated buffer: gatherx and ``np.take``, whose mode "raise" copies
    ``out`` first (to leave it as it was on an error) and whose other modes need a check.

    All of them write into one buffer: two buffers of the same size can differ in speed
    (huge pages or not, cache sets), and that difference is no formulation's.
    """
    import gatherx

    c, d, i, w = x.case, x.data, x.indices, x.wrapped
    size = c.data_shape[c.ax]
    buf = np.empty_like(x.out)

    def take(mode: Literal["wrap", "clip"] | None) -> Callable[[], np.ndarray]:
        if mode is None:
            return partial(np.take, d, w, axis=c.ax, out=buf)

        def checked() -> np.ndarray:
            if w.size and (w.min() < 0 or w.max() >= size):
                msg = "index out of range"
                raise IndexError(msg)
            return np.take(d, w, axis=c.ax, out=buf, mode=mode)

        return checked

    def into(fn: Callable[[], Any]) -> Callable[[], Any]:
        return scribbled(buf, x.out, fn)

    return [
        Entry("numpy", "forward (out=)", "gatherx", "gatherx",
              partial(gatherx.gather, d, i, axis=c.axis, out=buf), check=into(
                  partial(gatherx.gather, d, i, axis=c.axis, out=buf))),
        Entry("numpy", "forward (out=)", "gatherx, fresh result", "fresh",
              partial(gatherx.gather, d, i, axis=c.axis)),
        Entry("numpy", "forward (out=)", "np.take(out=)", "native", take(None),
              check=into(take(None))),
        Entry("numpy", "forward (out=)", 'check + np.take(out=, mode="wrap")', "native",
              take("wrap"), check=into(take("wrap"))),
        Entry("numpy", "forward (out=)", 'check + np.take(out=, mode="clip")', "native",
              take("clip"), check=into(take("clip"))),
    ]  # fmt: skip


def scribbled(buf: Any, want: np.ndarray, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run after ``buf`` (an ``out=`` buffer the formulations share) was overwritten
    with values that differ from the result ``want``: verified, a formulation that writes
    nothing fails."""

    def run() -> Any:
        want_ = np.asarray(want)
        wrong = ~want_ if want_.dtype == np.bool_ else want_ + 1
        if isinstance(buf, np.ndarray):
            np.copyto(buf, wrong, casting="unsafe")
        else:
            buf.copy_(tensor_of(np.asarray(wrong)))
        return fn()

    return run


def tensor_of(a: np.ndarray) -> Any:
    """``a`` as a CPU tensor over its memory; bfloat16 (ml_dtypes', which torch does not read)
    through its bits."""
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(a)


@cache
def minimal_function() -> Any:
    """A gather as the least ``torch.autograd.Function``: ``index_select`` forward at a flat
    non-negative index, ``index_add_`` into zeros backward, no check: what the Python
    Function that gatherx's PyTorch gradients go through costs by itself."""
    import torch

    class MinimalGather(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, data: Any, flat: Any, axis: int) -> Any:
            ctx.save_for_backward(flat)
            ctx.shape, ctx.axis = data.shape, axis
            return torch.index_select(data, axis, flat)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> tuple[Any, None, None]:
            (flat,) = ctx.saved_tensors
            return grad.new_zeros(ctx.shape).index_add_(ctx.axis, flat, grad), None, None

    return MinimalGather


def torch_entries(x: Inputs, device: str) -> list[Entry]:
    import torch

    import gatherx

    c, ax = x.case, x.case.ax
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    td = tensor_of(x.data).to(dev)
    ti = torch.from_numpy(x.wrapped).to(dev)  # the natives' non-negative indices
    tn = torch.from_numpy(x.indices).to(dev)  # gatherx's, negative ones included
    tg = tensor_of(x.grad).to(dev)

    key = (slice(None),) * ax + (ti,)
    oshape = c.out_shape
    # The leaf keeps the data's strides (clone would make a strided one contiguous).
    leaf = td.clone() if td.is_contiguous() else torch.empty_strided(
        td.size(), td.stride(), dtype=td.dtype, device=dev).copy_(td)  # fmt: skip
    leaf.requires_grad_(differentiable(c.dtype))  # integers have no gradient
    k = ti.ndim
    moved_back = (tuple(range(k)), tuple(range(ax, ax + k)))

    def timed(f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            out = f()
            sync()
            return out

        return run

    def host(t: Any) -> np.ndarray:
        return to_numpy(t[0] if isinstance(t, tuple) else t)  # (bfloat16 as ml_dtypes')

    def fwd_bwd(f: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], Any]:
        return timed(lambda: torch.autograd.grad(f(leaf), leaf, tg))

    def index_add() -> torch.Tensor:
        source = tg.reshape((*c.data_shape[:ax], ti.numel(), *c.data_shape[ax + 1 :]))
        return tg.new_zeros(c.data_shape).index_add_(ax, ti.reshape(-1), source)

    gx = partial(gatherx.gather, axis=c.axis)
    tout = tensor_of(x.out).to(dev)  # a finished result, copied by "allocating copy"
    obuf = torch.empty_like(tout)  # the out= buffer, one for all (see numpy_out_entries)
    fshape = (*c.data_shape[:ax], ti.numel(), *c.data_shape[ax + 1 :])

    def select_into() -> torch.Tensor:
        torch.index_select(td, ax, ti.reshape(-1), out=obuf.view(fshape))
        return obuf

    entries = [
        ("forward", "gatherx", "gatherx", lambda: gx(td, tn)),
        ("forward", "index_select", "native",
         lambda: torch.index_select(td, ax, ti.reshape(-1)).view(oshape)),
        ("forward", "advanced indexing", "native", lambda: td[key]),
        ("forward", "movedim + indexing", "native",
         lambda: torch.movedim(torch.movedim(td, ax, 0)[ti], *moved_back)),
        ("forward", "movedim + index_select", "native",
         lambda: torch.movedim(
             torch.index_select(torch.movedim(td, ax, 0), 0, ti.reshape(-1)).view(
                 ti.shape + td.movedim(ax, 0).shape[1:]), *moved_back)),
        ("forward+backward", "gatherx", "gatherx", fwd_bwd(lambda t: gx(t, tn))),
        ("forward+backward", "index_select autograd", "native",
         fwd_bwd(lambda t: torch.index_select(t, ax, ti.reshape(-1)).view(oshape))),
        ("forward+backward", "advanced indexing autograd", "native", fwd_bwd(lambda t: t[key])),
        ("forward+backward", "minimal autograd.Function", "floor",
         fwd_bwd(lambda t: minimal_function().apply(t, ti.reshape(-1), ax).view(oshape))),
        ("gather_grad", "gatherx", "gatherx",
         lambda: gatherx.gather_grad(c.data_shape, tn, tg, axis=c.axis)),
        ("gather_grad", "zeros + index_add_", "native", index_add),
        ("forward", "allocating copy of output", "alloc", tout.clone),
        ("forward (out=)", "gatherx", "gatherx", lambda: gx(td, tn, out=obuf)),
        ("forward (out=)", "gatherx, fresh result", "fresh", lambda: gx(td, tn)),
        ("forward (out=)", "index_select(out=)", "native", select_into),
    ]  # fmt: skip
    if k == 0:
        # A 0-d index tensor indexes as an int: a view, no gather; not a rival formulation.
        # Its slice copied is one.
        entries = [e for e in entries if "indexing" not in e[1]]
        at = int(ti)
        entries.insert(2, ("forward", "select + clone", "native",
                           lambda: td.select(ax, at).clone()))  # fmt: skip
        entries.insert(6, ("forward+backward", "select + clone autograd", "native",
                           fwd_bwd(lambda t: t.select(ax, at).clone())))  # fmt: skip
    if ax == 0:
        rows = (c.data_shape[0], -1)
        emb = torch.nn.functional.embedding
        entries.insert(5, ("forward", "embedding", "native",
                           lambda: emb(ti, td.reshape(rows)).view(oshape)))  # fmt: skip
        entries.append(("forward+backward", "embedding autograd", "native",
                        fwd_bwd(lambda t: emb(ti, t.reshape(rows)).view(oshape))))  # fmt: skip
    if not differentiable(c.dtype):
        entries = [e for e in entries if e[0] not in ("forward+backward", "gather_grad")]
    out = []
    for task, label, kind, f in entries:
        run = f if task == "forward+backward" else timed(f)
        into = scribbled(obuf, x.out, run) if task == OUT_TASK and kind != "fresh" else run
        out.append(Entry("torch", task, label, kind, run, check=partial(_host_of, host, into)))
    return out


def _host_of(host: Callable[[Any], np.ndarray], run: Callable[[], Any]) -> np.ndarray:
    return host(run())


def jax_entries(x: Inputs) -> list[Entry]:
    import jax
    import jax.numpy as jnp

    import gatherx

    c, ax = x.case, x.case.ax
    grads = differentiable(c.dtype)
    jd = jnp.asarray(x.data)  # a copy of JAX's own: contiguous, whether or not x.data is
    jg = jnp.asarray(x.grad) if grads else None
    ji, jn = jnp.asarray(x.wrapped), jnp.asarray(x.indices)  # natives' and gatherx's

    def gx(d: Any, i: Any) -> Any:
        return gatherx.gather(d, i, axis=c.axis)

    def take(d: Any, i: Any) -> Any:
        return jnp.take(d, i, axis=ax)

    def index(d: Any, i: Any) -> Any:
        return d[(slice(None),) * ax + (i,)]

    def vjp(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        return lambda d, i, g: jax.vjp(lambda t: f(t, i), d)[1](g)[0]

    def ready(f: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        return lambda: f(*args).block_until_ready()

    take_vjp = jax.jit(vjp(take))  # one program for both tasks that time it: compiled once

    entries = [
        Entry("jax", "forward (jit)", "gatherx in jit", "gatherx", ready(jax.jit(gx), jd, jn)),
        Entry("jax", "forward (jit)", "jnp.take", "native", ready(jax.jit(take), jd, ji)),
        Entry("jax", "forward (jit)", "indexing", "native", ready(jax.jit(index), jd, ji)),
        Entry("jax", "forward (eager)", "gatherx", "gatherx", ready(gx, jd, jn)),
        Entry("jax", "forward (eager)", "jnp.take", "native", ready(take, jd, ji)),
        Entry("jax", "forward (eager)", "indexing", "native", ready(index, jd, ji)),
        Entry("jax", "vjp (jit)", "gatherx in jit", "gatherx", ready(jax.jit(vjp(gx)), jd, jn, jg)),
        Entry("jax", "vjp (jit)", "jnp.take", "native", ready(take_vjp, jd, ji, jg)),
        Entry("jax", "vjp (jit)", "indexing", "native", ready(jax.jit(vjp(index)), jd, ji, jg)),
        Entry("jax", "gather_grad (eager)", "gatherx", "gatherx",
              ready(partial(gatherx.gather_grad, c.data_shape, axis=c.axis), jn, jg)),
        Entry("jax", "gather_grad (eager)", "jnp.take vjp (jit)", "native",
              ready(take_vjp, jd, ji, jg)),
    ]  # fmt: skip
    return entries if grads else [e for e in entries if not _is_grad(e)]


def jax_holds(dtype: str) -> bool:
    """Whether JAX keeps ``dtype`` as it is: its 64-bit types only with ``jax_enable_x64``
    (without it, ``jnp.asarray`` makes 32-bit arrays of them, another gather than the
    case's)."""
    import jax

    return itemsize(dtype) < 8 or bool(jax.config.read("jax_enable_x64"))


def ort_entries(x: Inputs) -> list[Entry]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    c = x.case
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=c.axis)
    graph = helper.make_graph(
        [node],
        "gather",
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, list(c.data_shape)),
            helper.make_tensor_value_info("indices", TensorProto.INT64, list(c.index_shape)),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(c.out_shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"data": x.data, "indices": x.wrapped}

    def run() -> np.ndarray:
        return session.run(None, feeds)[0]

    return [Entry("onnxruntime", "forward", "InferenceSession", "native", run)]


def build_entries(x: Inputs, backends: Sequence[str], torch_device: str) -> list[Entry]:
    entries = numpy_entries(x)
    if "numpy" not in backends:  # the copies only: the floors of every backend's rows
        entries = [e for e in entries if e.kind in ("memcpy", "alloc")]
    if "torch" in backends:
        entries += torch_entries(x, torch_device)
    if "jax" in backends and jax_holds(x.case.dtype):
        entries += jax_entries(x)
    if "onnxruntime" in backends:
        entries += ort_entries(x)
    return entries


#: The relative error a half-precision gradient may show against its oracle (see `verify`).
_HALF_RTOL = {"float16": 4e-3, "bfloat16": 3.2e-2}


def verify(entries: Sequence[Entry], x: Inputs) -> None:
    """Every formulation must compute Gather (or its gradient) before its time means anything."""
    for e in entries:
        got = np.asarray(e.check() if e.check is not None else e.fn())
        grad = _is_grad(e)
        want = x.data_grad if grad else x.out
        # Exact: gathers copy, and the gradients sum small integers, exact in any order but
        # in float16 past 2048 and bfloat16 past 256, where the order of summation decides
        # the rounding: close (within four of the dtype's steps).
        rtol = _HALF_RTOL.get(x.case.dtype) if grad else None
        same = (
            got.shape == want.shape
            and got.dtype == want.dtype
            and (
                np.array_equal(got, want)
                or (rtol is not None and np.allclose(got, want.astype(np.float32), rtol=rtol))
            )
        )
        if not same:
            msg = f"bench: {e.backend} {e.task} {e.label} on {x.case.name} computes a wrong result"
            raise AssertionError(msg)
