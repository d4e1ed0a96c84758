"""gatherx on an accelerator: correctness, no host sync, capture, determinism, compile, errors,
timings; one table. ``python benchmarks/device_check.py`` on a machine with a CUDA GPU (under
5 minutes); ``--cpu`` runs every check that needs no GPU on the CPU, with the device bounds
policy forced (see gatherx._policy), as CI does. Exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's gatherx, installed or not

import gatherx  # noqa: E402
from gatherx import _errors, _policy, _rules  # noqa: E402
from gatherx.bench.cases import CASES  # noqa: E402

#: (section, check, result, detail) rows of the table; result is ok, FAIL or skip.
ROWS: list[tuple[str, str, str, str]] = []
#: (case, backend, formulation, median seconds per call, ratio to the best native) rows.
TIMES: list[tuple[str, str, str, float, float]] = []
MESSAGE = "indices element out of data bounds"


class Skip(Exception):
    """A check that cannot run here; its text says why."""


def check(section: str, name: str) -> Callable[[Callable[[], str | None]], None]:
    """Run the decorated function now and record its row: its return value is the detail."""

    def run(fn: Callable[[], str | None]) -> None:
        start = time.perf_counter()
        try:
            detail, result = fn() or "", "ok"
        except Skip as why:
            detail, result = str(why), "skip"
        except Exception as exc:  # a failed check is a row, not the end of the run
            detail, result = f"{type(exc).__name__}: {exc}"[:300], "FAIL"
            traceback.print_exc(file=sys.stderr)
        took = time.perf_counter() - start
        ROWS.append((section, name, result, f"{detail} [{took:.1f} s]".strip()))

    return run


@contextlib.contextmanager
def device_policy(cpu: bool) -> Iterator[None]:
    """The accelerators' policy: their default, forced on the CPU with ``--cpu``."""
    with _policy.force("device") if cpu else contextlib.nullcontext():
        yield


# -- random cases ------------------------------------------------------------------------------

DATA_DTYPES = sorted(_rules.ONNX_DATA_DTYPES - {"string"})
GRAD_DTYPES = sorted(_rules.GRAD_DTYPES)


def random_case(rng: np.random.Generator) -> tuple[tuple[int, ...], np.ndarray, int]:
    """(data shape, indices in [-s, s-1], axis) of rank 1-3 data and rank 0-2 indices."""
    rank = int(rng.integers(1, 4))
    shape = tuple(int(n) for n in rng.integers(1, 9, rank))
    axis = int(rng.integers(-rank, rank))
    size = shape[axis]
    index_shape = tuple(int(n) for n in rng.integers(1, 6, int(rng.integers(0, 3))))
    return shape, rng.integers(-size, size, index_shape), axis


def host_values(shape: tuple[int, ...], name: str, rng: np.random.Generator) -> np.ndarray:
    """Small integer values in ``name`` (bfloat16 as float32): every sum of them is exact."""
    values = rng.integers(0 if name.startswith("uint") else -8, 9, shape)
    if name == "bool":
        return values > 0
    if name == "bfloat16":
        return values.astype(np.float32)
    return values.astype(name)


def wrapped(indices: np.ndarray, size: int) -> np.ndarray:
    return np.where(indices < 0, indices + size, indices)


# -- torch ---------------------------------------------------------------------------------


def torch_tensor(host: np.ndarray, name: str, device: str) -> Any:
    import torch

    if name == "bfloat16":
        return torch.from_numpy(host).to(device).to(torch.bfloat16)
    return torch.from_numpy(np.array(host)).to(device)


def torch_host(t: Any) -> np.ndarray:
    """A tensor's values on the host, bit for bit (bfloat16 and wide unsigned as their bits)."""
    import torch

    t = t.detach().cpu()
    twin = {torch.bfloat16: torch.int16, torch.uint16: torch.int16, torch.uint32: torch.int32,
            torch.uint64: torch.int64}.get(t.dtype)  # fmt: skip
    return (t.view(twin) if twin is not None else t).numpy()


def torch_checks(device: str, cpu: bool) -> None:
    import torch

    rng = np.random.default_rng(0)

    @check("correctness", f"torch gather on {device} vs CPU and NumPy, every dtype")
    def _() -> str:
        count = 0
        for name in DATA_DTYPES:
            for index_dtype in ("int32", "int64"):
                for _ in range(3):
                    shape, indices, axis = random_case(rng)
                    host = host_values(shape, name, rng)
                    expected = np.take(host, wrapped(indices, shape[axis]), axis=axis)
                    reference = torch_tensor(expected, name, "cpu")
                    data = torch_tensor(host, name, device)
                    index = torch.from_numpy(indices.astype(index_dtype)).to(device)
                    with _policy.force("exact"):
                        on_cpu = gatherx.gather(torch_tensor(host, name, "cpu"), indices, axis=axis)
                    with device_policy(cpu):
                        outs = [gatherx.gather(data, index, axis=axis),
                                gatherx.gather(data, indices, axis=axis)]  # fmt: skip
                    assert all(out.device == data.device for out in outs)
                    for out in (*outs, on_cpu):
                        np.testing.assert_array_equal(torch_host(out), torch_host(reference))
                    count += 1
        return f"{count} random cases, {len(DATA_DTYPES)} dtypes, device and host indices"

    @check("correctness", f"torch gather_grad and backward on {device}, every grad dtype")
    def _() -> str:
        count = 0
        for name in GRAD_DTYPES:
            for _ in range(3):
                shape, indices, axis = random_case(rng)
                out_shape = _rules.output_shape(shape, indices.shape, axis % len(shape))
                host = host_values(out_shape, name, rng)
                grad = torch_tensor(host, name, device)
                index = torch.from_numpy(indices).to(device)
                reference = gatherx.gather_grad(shape, indices, torch_tensor(host, name, "cpu"),
                                                axis=axis)  # fmt: skip
                with device_policy(cpu):
                    summed = gatherx.gather_grad(shape, index, grad, axis=axis)
                    if grad.is_floating_point() or grad.is_complex():
                        data = torch.zeros(shape, dtype=grad.dtype, device=device,
                                           requires_grad=True)  # fmt: skip
                        gatherx.gather(data, index, axis=axis).backward(grad)
                        np.testing.assert_array_equal(torch_host(data.grad), torch_host(reference))
                np.testing.assert_array_equal(torch_host(summed), torch_host(reference))
                count += 1
        return f"{count} random cases; half precision summed in float32"

    @check("no host sync", f"torch forward, backward, gather_grad on {device}")
    def _() -> str:
        data = torch.randn(64, 32, device=device, requires_grad=True)
        index = torch.randint(-64, 64, (16, 8), device=device)
        grad = torch.randn(16, 8, 32, device=device)

        def calls() -> None:
            out = gatherx.gather(data, index)
            out.backward(torch.ones_like(out))
            gatherx.gather_grad((64, 32), index, grad)
            gatherx.gather(data.detach(), index, axis=0)
            gatherx.gather(data.detach(), index[:, :2] % 32, axis=1)

        with device_policy(cpu):
            calls()  # warm: first calls may initialise the device
            if cpu:
                with no_host_read(torch) as ops:
                    calls()
                assert ops.count("aten._assert_async") == 4, ops
                return "no item/tolist/numpy or _local_scalar_dense; 4 device asserts"
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                calls()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
        return 'torch.cuda.set_sync_debug_mode("error") passed'

    @check("no host sync", f"torch host-list indices copied to {device}")
    def _() -> str:
        data = torch.randn(64, 32, device=device)
        expected = data[torch.tensor([[0, 63], [5, 63]], device=device)]
        with device_policy(cpu):
            gatherx.gather(data, [[0, -1], [5, 63]])
            if cpu:
                with no_host_read(torch):
                    out = gatherx.gather(data, [[0, -1], [5, 63]])
                np.testing.assert_array_equal(torch_host(out), torch_host(expected))
                return "checked on the host, no device read"
            torch.cuda.set_sync_debug_mode("error")
            try:
                out = gatherx.gather(data, [[0, -1], [5, 63]])
            finally:
                torch.cuda.set_sync_debug_mode("default")
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        return "pinned copy, non_blocking"

    @check("capture", "torch CUDA graph of gather and gather_grad, replayed on new indices")
    def _() -> str:
        if cpu:
            raise Skip("needs CUDA")
        data = torch.randn(128, 64, device=device)
        index = torch.randint(-128, 128, (256,), device=device)
        grad = torch.randn(256, 64, device=device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up outside the capture, as torch asks
            gatherx.gather(data, index)
            gatherx.gather_grad((128, 64), index, grad)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = gatherx.gather(data, index)
            summed = gatherx.gather_grad((128, 64), index, grad)
        for _ in range(3):
            index.copy_(torch.randint(-128, 128, (256,), device=device))
            graph.replay()
            flat = index % 128
            torch.testing.assert_close(out, data.index_select(0, flat), rtol=0, atol=0)
            expected = torch.zeros(128, 64, device=device).index_add_(0, flat, grad)
            torch.testing.assert_close(summed, expected)
        return "3 replays equal index_select / index_add_"

    @check("determinism", f"torch backward bit-identical run to run on {device}")
    def _() -> str:
        n = 20_000 if cpu else 1_000_000
        index = torch.randint(0, 50, (n,), device=device)  # many duplicates: atomics on CUDA
        grad = torch.randn(n, 64, device=device)
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            with device_policy(cpu):
                runs = []
                for _ in range(3):
                    data = torch.zeros(50, 64, device=device, requires_grad=True)
                    gatherx.gather(data, index).backward(grad)
                    runs.append((data.grad, gatherx.gather_grad((50, 64), index, grad)))
        finally:
            torch.use_deterministic_algorithms(previous)
        for g, s in runs[1:]:
            assert torch.equal(g, runs[0][0])
            assert torch.equal(s, runs[0][1])
        with device_policy(cpu):
            loose = {gatherx.gather_grad((50, 64), index, grad).sum().item() for _ in range(3)}
        return f"3 runs equal; without deterministic mode {len(loose)} distinct sum(s)"

    @check("compile", f"torch.compile inductor forward + backward on {device}")
    def _() -> str:
        def loss(d: Any, i: Any) -> Any:
            return (gatherx.gather(d, i, axis=1) ** 2).sum()

        compiled = torch.compile(loss, backend="inductor", fullgraph=True)
        data = torch.randn(16, 32, device=device, requires_grad=True)
        index = torch.randint(-32, 32, (4, 5), device=device)
        with device_policy(cpu):
            got = compiled(data, index)
            (g_got,) = torch.autograd.grad(got, data)
            want = loss(data, index)
            (g_want,) = torch.autograd.grad(want, data)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(g_got, g_want)
        return "equal to eager"

    clock = "perf_counter: the forced CPU path, not a CPU benchmark" if cpu else "CUDA events"

    @check("timings", f"torch on {device}: gatherx vs index_select, embedding ({clock})")
    def _() -> str:
        return torch_timings(device, cpu)


@contextlib.contextmanager
def no_host_read(torch: Any) -> Iterator[list[str]]:
    """Fail on any read of a tensor's values on the host (see tests/test_device_policy.py)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from gatherx._backends.torch import bounds

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an index value was read on the host")

    saved = [(bounds, n, getattr(bounds, n)) for n in ("read", "to_host")]
    saved += [(torch.Tensor, n, getattr(torch.Tensor, n)) for n in ("item", "tolist", "numpy")]
    ops: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            name = str(func.overloadpacket)
            assert "_local_scalar_dense" not in name, "a host read (a sync on CUDA)"
            ops.append(name)
            return func(*args, **(kwargs or {}))

    for owner, name, _ in saved:
        setattr(owner, name, refuse)
    try:
        with Record():
            yield ops
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def timer(device: str) -> Callable[[Callable[[], Any], int], float]:
    """Seconds per call of ``fn`` over ``k`` back-to-back calls: CUDA events on a GPU (the
    launch overhead included where the host is the bottleneck), perf_counter on the CPU."""
    import torch

    def cuda(fn: Callable[[], Any], k: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / k

    def host(fn: Callable[[], Any], k: int) -> float:
        start = time.perf_counter()
        for _ in range(k):
            fn()
        return (time.perf_counter() - start) / k

    return cuda if device.startswith("cuda") else host


def median_times(fns: dict[str, Callable[[], Any]], measure: Any, rounds: int) -> dict[str, float]:
    """The median over ``rounds`` interleaved rounds of each function's time per call."""
    for fn in fns.values():
        fn()
    k = {name: max(1, min(200, int(2e-3 / max(measure(fn, 1), 1e-7)))) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        for name in list(fns)[r % len(fns) :] + list(fns)[: r % len(fns)]:
            samples[name].append(measure(fns[name], k[name]))
    return {name: statistics.median(s) for name, s in samples.items()}


def record_times(case: str, backend: str, medians: dict[str, float]) -> None:
    native = [t for name, t in medians.items() if not name.startswith("gatherx")]
    best = min(native) if native else math.nan
    for name, t in medians.items():
        TIMES.append((case, backend, name, t, t / best))


def torch_timings(device: str, cpu: bool) -> str:
    import torch
    import torch.nn.functional as F

    measure = timer(device)
    cases = [c for c in CASES if not (cpu and c.large)]
    for case in cases:
        rng = np.random.default_rng(1)
        size = case.data_shape[case.ax]
        host = rng.standard_normal(case.data_shape).astype(np.float32)
        indices = rng.integers(-size, size, case.index_shape)
        data = torch.from_numpy(host).to(device)
        index = torch.from_numpy(indices).to(device)
        flat = torch.from_numpy(wrapped(indices, size).reshape(-1)).to(device)
        out_shape = case.out_shape
        fns: dict[str, Callable[[], Any]] = {
            "gatherx": lambda d=data, i=index, a=case.axis: gatherx.gather(d, i, axis=a),
            "index_select": lambda d=data, f=flat, a=case.ax, s=out_shape: torch.index_select(
                d, a, f
            ).view(s),
        }
        if case.ax == 0 and len(case.data_shape) == 2:
            w = torch.from_numpy(wrapped(indices, size)).to(device)
            fns["embedding"] = lambda d=data, w=w: F.embedding(w, d)
        with device_policy(cpu):
            medians = median_times(fns, measure, rounds=3 if cpu else 15)
            # the gatherx result, checked once more on the case itself
            np.testing.assert_array_equal(
                torch_host(fns["gatherx"]()), np.take(host, wrapped(indices, size), axis=case.ax)
            )
        record_times(case.name, f"torch {device}", medians)
    return f"{len(cases)} cases (table below)"


# -- JAX -----------------------------------------------------------------------------------


def jax_checks(cpu: bool) -> None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        ROWS.append(("correctness", "JAX", "skip", "jax is not installed"))
        return
    devices = [d for d in jax.devices() if d.platform != "cpu"]
    if not cpu and not devices:
        ROWS.append(("correctness", "JAX", "skip", "JAX sees no GPU (jax[cuda] not installed)"))
        return
    target = devices[0] if devices else jax.devices("cpu")[0]
    rng = np.random.default_rng(2)
    wide = {"int64", "uint64", "float64", "complex128"}
    names = [n for n in DATA_DTYPES if jax.config.jax_enable_x64 or n not in wide]

    from gatherx._backends import jax as jax_backend

    @check("correctness", f"JAX gather on {target.platform} vs NumPy, every dtype")
    def _() -> str:
        count = 0
        for name in names:
            for _ in range(3):
                shape, indices, axis = random_case(rng)
                host = host_values(shape, name, rng)
                expected = np.take(host, wrapped(indices, shape[axis]), axis=axis)
                data = jax.device_put(jnp.asarray(host, dtype=name), target)
                index = jax.device_put(jnp.asarray(indices), target)
                with device_policy(cpu):
                    out = gatherx.gather(data, index, axis=axis)
                got = np.asarray(out.astype(jnp.float32) if name == "bfloat16" else out)
                np.testing.assert_array_equal(got, expected)
                count += 1
        return f"{count} random cases, {len(names)} dtypes"

    @check("no host sync", f"JAX eager check on {target.platform}: two scalars, not the index")
    def _() -> str:
        data = jax.device_put(jnp.arange(1000.0), target)
        index = jax.device_put(jnp.asarray(np.arange(-500, 500)), target)
        reads: list[Any] = []
        whole, two = jax_backend.host_extremes, jax_backend.device_extremes

        def refuse(index: Any) -> Any:
            raise AssertionError("the whole index was read on the host")

        jax_backend.host_extremes = refuse
        jax_backend.device_extremes = lambda i: reads.append(1) or two(i)
        try:
            with device_policy(cpu):
                gatherx.gather(data, index).block_until_ready()
                gatherx.gather_grad((1000,), index, data).block_until_ready()
                eager = len(reads)
                jax.jit(gatherx.gather)(data, index).block_until_ready()
        finally:
            jax_backend.host_extremes, jax_backend.device_extremes = whole, two
        # gather_grad reads (min, max); an eager gather may check in its own kernel instead
        assert 1 <= eager <= 2, reads
        assert len(reads) == eager, reads
        return f"{eager} reads of (min, max) for 2 eager calls, none under jit"

    @check("timings", f"JAX on {target.platform}: gatherx vs jnp.take, under jit")
    def _() -> str:
        cases = [c for c in CASES if not (cpu and c.large)]
        gx = jax.jit(gatherx.gather, static_argnames=("axis",))
        take = jax.jit(jnp.take, static_argnames=("axis",))

        def measure(fn: Callable[[], Any], k: int) -> float:
            start = time.perf_counter()
            for _ in range(k):
                out = fn()
            out.block_until_ready()
            return (time.perf_counter() - start) / k

        for case in cases:
            rng1 = np.random.default_rng(1)
            size = case.data_shape[case.ax]
            data = jax.device_put(rng1.standard_normal(case.data_shape, np.float32), target)
            indices = rng1.integers(-size, size, case.index_shape).astype(np.int32)
            index = jax.device_put(indices, target)
            w = jax.device_put(wrapped(indices, size), target)
            fns = {
                "gatherx (jit)": lambda d=data, i=index, a=case.axis: gx(d, i, axis=a),
                "jnp.take (jit)": lambda d=data, w=w, a=case.axis: take(d, w, axis=a),
            }
            with device_policy(cpu):
                record_times(case.name, f"jax {target.platform}", median_times(
                    fns, measure, rounds=3 if cpu else 15))  # fmt: skip
        return f"{len(cases)} cases (table below), wall clock to block_until_ready"


# -- CuPy ----------------------------------------------------------------------------------


def cupy_checks(cpu: bool) -> None:
    @check("correctness", "CuPy (array-API path) gather and gather_grad vs NumPy")
    def _() -> str:
        if cpu:
            raise Skip("needs CUDA")
        try:
            import cupy
        except ImportError:
            raise Skip("cupy is not installed") from None
        rng = np.random.default_rng(3)
        count = 0
        for name in ("float32", "float64", "int32", "int64", "uint8", "bool", "complex64"):
            for _ in range(3):
                shape, indices, axis = random_case(rng)
                host = host_values(shape, name, rng)
                out = gatherx.gather(cupy.asarray(host), cupy.asarray(indices), axis=axis)
                expected = np.take(host, wrapped(indices, shape[axis]), axis=axis)
                np.testing.assert_array_equal(cupy.asnumpy(out), expected)
                count += 1
        return f"{count} random cases"


# -- what a user sees ----------------------------------------------------------------------

CHILD = """
import sys, gatherx
kind, device = sys.argv[1], sys.argv[2]
if kind.startswith("torch"):
    import torch
    data = torch.arange(10.0, device=device)
    bad = torch.tensor([0, 10], device=device)
    if kind == "torch-exact":
        with gatherx.exact_bounds():
            gatherx.gather(data, bad)
    else:
        out = gatherx.gather(data, bad)
        print("returned; the next sync raises", flush=True)
        if device != "cpu":
            torch.cuda.synchronize()
        print(out.cpu())
else:
    import jax, jax.numpy as jnp
    platform = "cpu" if device == "cpu" else "gpu"
    target = jax.devices(platform)[0]
    data = jax.device_put(jnp.arange(10.0), target)
    gatherx.gather(data, jax.device_put(jnp.array([0, 10]), target))
print("no error")
"""


def subprocess_checks(device: str, cpu: bool) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    if cpu:
        env[_policy.ENV] = "device"
    expected = {
        "torch": "RuntimeError" if cpu else "device-side assert",
        "torch-exact": "IndexError",
        "jax": "IndexError",
    }
    for kind, error in expected.items():

        @check("errors", f"out-of-bounds index, {kind} on {device}, in a subprocess")
        def _(kind: str = kind, error: str = error) -> str:
            if kind == "jax" and not cpu:
                import jax

                if not [d for d in jax.devices() if d.platform != "cpu"]:
                    raise Skip("JAX sees no GPU")
            done = subprocess.run(
                [sys.executable, "-c", CHILD, kind, device],
                capture_output=True, text=True, timeout=120, env=env, check=False,
            )  # fmt: skip
            output = done.stdout + done.stderr
            lines = [ln for ln in output.splitlines() if MESSAGE in ln or error in ln]
            assert done.returncode != 0, f"exit 0: {output[-500:]}"
            assert any(MESSAGE in ln for ln in lines), f"no gatherx message: {output[-800:]}"
            assert any(error in ln for ln in lines), f"no {error}: {output[-800:]}"
            return " | ".join(dict.fromkeys(ln.strip()[:160] for ln in lines))


# -- the table -----------------------------------------------------------------------------


def header(device: str, cpu: bool) -> str:
    import torch

    parts = [f"gatherx {gatherx.__version__}", f"torch {torch.__version__}"]
    if device.startswith("cuda"):
        parts.append(torch.cuda.get_device_name(0))
    try:
        import jax

        parts.append(f"jax {jax.__version__} {[d.platform for d in jax.devices()][:1]}")
    except ImportError:
        pass
    policy = "device policy forced on the CPU" if cpu else "default policy"
    return " · ".join([*parts, policy])


def table(device: str, cpu: bool) -> str:
    lines = [header(device, cpu), "", "| section | check | result | detail |", "|---|---|---|---|"]
    lines += [f"| {s} | {c} | {r} | {d.replace('|', '/')} |" for s, c, r, d in ROWS]
    if TIMES:
        lines += ["", "| case | backend | formulation | median per call | vs best native |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for case, backend, name, t, ratio in TIMES:
            shown = "" if math.isnan(ratio) else f"{ratio:.2f}"
            lines.append(f"| {case} | {backend} | {name} | {t * 1e6:.1f} us | {shown} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="no GPU: force the device policy")
    args = parser.parse_args(argv)
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device: run with --cpu", file=sys.stderr)
        return 2
    device = "cpu" if args.cpu else "cuda"
    start = time.perf_counter()

    @check("policy", "the policy table's defaults")
    def _() -> str:
        with _policy.force(None):
            assert (_policy.policy("cpu"), _policy.policy("cuda")) == ("exact", "device")
        text = _errors.traced_out_of_bounds("gather_grad", 99, 13)
        assert len(text.encode()) < 255  # CUDA's _assert_async message buffer
        return "cpu exact, accelerators device"

    torch_checks(device, args.cpu)
    jax_checks(args.cpu)
    cupy_checks(args.cpu)
    subprocess_checks(device, args.cpu)
    print(table(device, args.cpu))
    failed = [r for r in ROWS if r[2] == "FAIL"]
    print(f"\n{len(ROWS)} checks, {len(failed)} failed, {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
