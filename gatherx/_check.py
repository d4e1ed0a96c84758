"""Run the conformance suite on an array namespace through gatherx, or on any Gather function."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import importlib
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ._conformance import (
    GATHERX_ONLY_GROUPS,
    ConformanceCase,
    cases,
    expected_grad,
    grad_for,
    to_numpy,
)
from ._options import require

#: Built-in ``--impl`` adapters: name -> the function in this module.
ADAPTERS = {"onnxruntime": "onnxruntime_gather", "onnx.reference": "onnx_reference_gather"}
#: What an adapter's runtime is known not to run, by dtype: the reason is printed.
ADAPTER_SKIPS: dict[str, dict[str, str]] = {
    "onnxruntime": {
        "string": "onnxruntime's CPU Gather is known to give wrong strings on axes other than "
        "the last, so strings are not asked of it",
        "complex64": "onnxruntime registers no complex64 tensors",
        "complex128": "onnxruntime registers no complex128 tensors",
        "bfloat16": "onnxruntime's Python API takes no bfloat16 NumPy inputs",
    },
    "onnx.reference": {},
}


@dataclasses.dataclass
class Result:
    """One check of one case: ``status`` is passed, failed or skipped (with ``reason``)."""

    case: ConformanceCase
    check: str
    status: str
    reason: str = ""
    reproducer: str = ""
    got: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        c = self.case
        want: dict[str, Any]
        if self.check.startswith("gather_grad"):
            grad = expected_grad(c, grad_for(c)[0])
            want = _describe_expected(grad)
        else:
            want = _describe_expected(_want(c))
        return {
            "case": c.name, "group": c.group, "check": self.check, "status": self.status,
            "reason": self.reason, "reproducer": self.reproducer,
            "data": {"shape": list(c.data.shape), "dtype": c.dtype, "expr": c.data_expr},
            "indices": {"shape": list(c.indices.shape), "dtype": c.indices.dtype.name,
                        "values": c.indices.tolist()},
            "axis": c.axis, "opset": c.opset, "expected": want, "got": self.got,
            "seconds": round(self.seconds, 6),
        }  # fmt: skip


@dataclasses.dataclass
class Report:
    """Every result of a run on one target (``namespace: cubed.array_api``, ``impl: ...``)."""

    target: str
    version: str
    checks: tuple[str, ...]
    results: list[Result]
    notes: list[str]

    @property
    def failed(self) -> bool:
        return any(r.status == "failed" for r in self.results)

    def rows(self) -> list[tuple[str, int, int, int, str]]:
        """(group, passed, failed, skipped, first failure) per group, in run order."""
        by_group: dict[str, list[Result]] = {}
        for r in self.results:
            by_group.setdefault(r.case.group, []).append(r)
        rows = []
        for group, results in by_group.items():
            passed, failed, skipped = (sum(r.status == s for r in results)
                                       for s in ("passed", "failed", "skipped"))  # fmt: skip
            first = next((r for r in results if r.status == "failed"), None)
            cell = f"{first.reproducer}  # {first.reason}" if first else ""
            rows.append((group, passed, failed, skipped, cell))
        return rows

    def as_json(self) -> dict[str, Any]:
        summary = {g: {"passed": p, "failed": f, "skipped": s}
                   for g, p, f, s, _ in self.rows()}  # fmt: skip
        return {
            "target": self.target, "version": self.version, "checks": list(self.checks),
            "failed": self.failed, "notes": self.notes, "groups": summary,
            "results": [r.as_json() for r in self.results],
        }  # fmt: skip


# -- comparing ----------------------------------------------------------------------------------


def _dtype_name(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "USO" else dtype.name


def _describe_expected(want: Any) -> dict[str, Any]:
    if isinstance(want, type):
        return {"raises": want.__name__}
    return {"shape": list(want.shape), "dtype": _dtype_name(want.dtype)}


def _equal(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise equality, NaN equal to NaN, strings by their text."""
    if want.dtype.kind in "USO":
        return np.asarray(got.astype(str) == want.astype(str))
    same = np.asarray(got == want)
    with contextlib.suppress(TypeError):  # no NaN in integers, bools
        same |= np.isnan(got) & np.isnan(want)
    return same


def _compare(got: Any, want: np.ndarray | type[Exception], gatherx_error: bool) -> tuple[bool, str]:
    """(passed, why not) for a result or exception ``got`` against ``want``."""
    if isinstance(want, type):
        if not gatherx_error and want is IndexError and isinstance(got, Exception):
            return True, ""  # any error of the implementation's own for an out-of-range index
        if isinstance(got, want):
            own = str(got).startswith(("gather:", "gather_grad:"))
            if gatherx_error and not own:
                return False, f"raised {want.__name__} without gatherx's message: {_one_line(got)}"
            return True, ""
        if isinstance(got, BaseException):
            return False, f"expected {want.__name__}, raised {_one_line(got)}"
        if want is IndexError and not gatherx_error:
            return False, (f"expected an error for an out-of-range index, got an array of "
                           f"shape {got.shape}")  # fmt: skip
        return False, f"expected {want.__name__}, got an array of shape {got.shape}"
    if isinstance(got, BaseException):
        return False, f"raised {_one_line(got)}"
    if got.shape != want.shape:
        return False, f"shape {got.shape}, expected {want.shape}"
    if _dtype_name(got.dtype) != _dtype_name(want.dtype):
        return False, f"dtype {_dtype_name(got.dtype)}, expected {_dtype_name(want.dtype)}"
    same = _equal(got, want)
    if not same.all():
        bad = int(np.argmin(same.reshape(-1)))
        at = tuple(int(i) for i in np.unravel_index(bad, want.shape))
        return False, (f"{int((~same).sum())} of {same.size} values differ; at {at} got "
                       f"{_value(got[at])}, expected {_value(want[at])}")  # fmt: skip
    return True, ""


def _value(x: Any) -> str:
    """A NumPy scalar as Python spells it (``4.0``, not ``np.float32(4.0)``)."""
    item = x.item() if hasattr(x, "item") else x
    return repr(item if isinstance(item, (bool, int, float, complex, str)) else x)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}"


def _attempt(call: Callable[[], Any], like: type | None = None) -> tuple[Any, float, str]:
    """(the result as NumPy, or the exception; seconds; a complaint when the result is not of
    the type ``like``)."""
    start = time.perf_counter()
    wrong = ""
    try:
        raw = call()
        if like is not None and type(raw) is not like:
            wrong = f"returned a {_type_name(type(raw))}, not the data's {_type_name(like)}"
        got: Any = to_numpy(raw)
    except Exception as exc:  # a check reports every outcome instead of stopping
        got = exc
    return got, time.perf_counter() - start, wrong


class _Noise(logging.Handler):
    """Counts the warnings and log records a library emits during a run, by text."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        # By the first line: asyncio's "Future exception was never retrieved" and the like.
        self.add(f"{record.name} logged", record.getMessage().partition("\n")[0])

    def add(self, kind: str, message: str) -> None:
        text = " ".join(message.split())
        self.seen[f"{kind}: {text if len(text) <= 160 else text[:157] + '...'}"] += 1

    def notes(self) -> list[str]:
        notes = [f"{n} time(s) {text}" for text, n in self.seen.most_common(5)]
        if len(self.seen) > 5:
            notes.append(f"and {len(self.seen) - 5} other warning(s) or log record(s)")
        return notes


@contextlib.contextmanager
def _quiet() -> Iterator[_Noise]:
    """A library's warnings and log records (cubed's executor logs the errors of its tasks) are
    counted for the notes, never raised (under -W error) nor printed over the table."""
    noise = _Noise()
    root = logging.getLogger()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root.addHandler(noise)
        try:
            yield noise
            gc.collect()  # asyncio reports a failed task's unread error when it is collected
        finally:
            root.removeHandler(noise)
    for w in caught:
        noise.add(f"{w.category.__name__}", str(w.message))


def _type_name(kind: type) -> str:
    return f"{kind.__module__.partition('.')[0]}.{kind.__qualname__}"


def _got(got: Any) -> dict[str, Any]:
    if isinstance(got, BaseException):
        return {"raised": _one_line(got)}
    return {"shape": list(got.shape), "dtype": _dtype_name(got.dtype)}


def _want(c: ConformanceCase) -> np.ndarray | type[Exception]:
    if c.raises is not None:
        return c.raises
    assert c.expected is not None
    return c.expected


def _opset_arg(c: ConformanceCase) -> str:
    return "" if c.opset == 13 else f", opset={c.opset}"


# -- namespaces through gatherx -----------------------------------------------------------------


def user_module(option: str, name: str) -> Any:
    """The module ``name`` that ``option`` names, imported as ``python -m`` would (a module in
    the working directory resolves); ValueError with the reason where it cannot be."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except Exception as exc:  # whatever the module raises as it is imported
        msg = f"{option}: cannot import {name} ({_one_line(exc)})"
        raise ValueError(msg) from None
    finally:
        if added:
            sys.path.remove(here)


def namespace(name: str) -> Any:
    """The module ``name`` as an array namespace; ValueError when it is none."""
    if not name.strip():
        msg = "--namespace is empty: name a module such as numpy or array_api_strict"
        raise ValueError(msg)
    xp = user_module(f"--namespace {name}", name)
    if not callable(getattr(xp, "asarray", None)):
        msg = f"--namespace {name}: {name} is not an array namespace (it has no asarray)"
        raise ValueError(msg)
    return xp


def _chunked(xp: Any) -> bool:
    """Whether ``xp.asarray`` splits arrays into the blocks ``chunks`` asks for (Dask, cubed):
    then arrays are cut in blocks of 2 along every axis, so that gathers cross block boundaries,
    where chunked libraries go wrong."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = xp.asarray(np.zeros(4), chunks=2)
    except Exception:  # no chunks argument, whatever the library raises for it
        return False
    blocks = getattr(probe, "chunks", None)
    return isinstance(blocks, tuple) and len(blocks) == 1 and len(blocks[0]) == 2


def run_namespace(name: str, selected: Iterable[ConformanceCase] | None = None) -> Report:
    """Every case through gatherx on namespace ``name``: gather and gather_grad, each with NumPy
    indices and with the namespace's own."""
    xp = namespace(name)
    chunks = _chunked(xp)
    kwargs: dict[str, Any] = {"chunks": 2} if chunks else {}
    checks = ("gather", f"gather/{name} indices", "gather_grad", f"gather_grad/{name} indices")
    results: list[Result] = []
    lacking: dict[str, str] = {}
    with _quiet() as noise:
        for c in selected if selected is not None else cases():
            results += _namespace_checks(c, xp, name, checks, kwargs, lacking)
    notes = _suite_notes(results)
    notes += [f"{name} cannot hold {dtype} arrays ({why}): those cases are skipped"
              for dtype, why in lacking.items()]  # fmt: skip
    refused = {r.case.dtype: r.reason for r in results
               if r.status == "skipped" and r.reason.startswith("gatherx refuses")}  # fmt: skip
    notes += [f"{why}: those checks are skipped" for why in refused.values()]
    notes += noise.notes()
    if chunks:
        notes.append(f"{name}.asarray takes chunks: arrays are split into blocks of 2 along "
                     "every axis")  # fmt: skip
    return Report(f"namespace {name}", _version(name), checks, results, notes)


def _namespace_checks(c: ConformanceCase, xp: Any, name: str, checks: tuple[str, ...],
                      kwargs: dict[str, Any], lacking: dict[str, str]) -> list[Result]:  # fmt: skip
    """The four checks of case ``c`` on namespace ``xp`` (skipped where it cannot hold the
    arrays; ``lacking`` learns why)."""
    import gatherx

    put = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    results: list[Result] = []
    data, why = _hold(xp, c.data, kwargs)
    if data is None:
        lacking.setdefault(c.dtype, why)
        return [Result(c, check, "skipped", why) for check in checks]
    index, index_why = _hold(xp, c.indices, kwargs, index=True)
    grad_np, grad_expr = grad_for(c)
    grad, grad_why = _hold(xp, grad_np, kwargs)
    needs = "".join(f", {m}" for m in c.needs.split())
    head = (f"import numpy as np, gatherx, {name} as xp{needs}; data = {c.data_expr}; "
            f"indices = {c.indices_expr}")  # fmt: skip
    own = f"xp.asarray(indices{put})"
    gather_rep = (
        f"{head}; gatherx.gather(xp.asarray(data{put}), {{}}, axis={c.axis}{_opset_arg(c)})"
    )
    grad_rep = (f"{head}; grad = {grad_expr}; gatherx.gather_grad({c.data.shape!r}, {{}}, "
                f"xp.asarray(grad{put}), axis={c.axis})")  # fmt: skip
    want, want_grad = _want(c), expected_grad(c, grad_np)
    for check, idx, spelled in ((checks[0], c.indices, "indices"), (checks[1], index, own)):
        if idx is None:
            results.append(Result(c, check, "skipped", index_why))
            continue
        call = functools.partial(gatherx.gather, data, idx, axis=c.axis, opset=c.opset)
        results.append(_result(c, check, call, want, gather_rep.format(spelled), type(data)))
    for check, idx, spelled in ((checks[2], c.indices, "indices"), (checks[3], index, own)):
        if grad is None or idx is None:
            results.append(Result(c, check, "skipped", grad_why or index_why))
            continue
        call = functools.partial(gatherx.gather_grad, c.data.shape, idx, grad, axis=c.axis)
        rep = grad_rep.format(spelled)
        results.append(_result(c, check, call, want_grad, rep, type(data)))
    return results


def _result(
    c: ConformanceCase, check: str, call: Callable[[], Any], want: Any, reproducer: str, like: type
) -> Result:
    got, seconds, wrong_type = _attempt(call, like)
    if _refuses_dtype(c, got) and want is not TypeError:
        # gatherx's own TypeError for an ONNX dtype this library cannot compute with: the
        # clear refusal the suite asks for where values cannot be had.
        why = f"gatherx refuses {c.dtype} here: {_one_line(got)}"
        return Result(c, check, "skipped", why, reproducer, _got(got), seconds)
    ok, why = _compare(got, want, gatherx_error=True)
    if ok and wrong_type:
        ok, why = False, wrong_type
    return Result(c, check, "passed" if ok else "failed", why, reproducer, _got(got), seconds)


def _refuses_dtype(c: ConformanceCase, got: Any) -> bool:
    text = str(got)
    return (
        isinstance(got, TypeError)
        and text.startswith(("gather:", "gather_grad:"))
        and f"dtype {c.dtype}" in text
    )


def _hold(
    xp: Any, host: np.ndarray, kwargs: dict[str, Any], index: bool = False
) -> tuple[Any, str]:
    """``host`` as an array of ``xp``, or None and why when ``xp`` cannot hold it exactly
    (int64 indices that become int32 ones of the same values are held: both are ONNX's)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. zarr on strings: the round trip decides
            x = xp.asarray(host, **kwargs)
            back = to_numpy(x)
    except Exception as exc:  # whatever the library raises, it has no such arrays
        return None, f"asarray raised {_one_line(exc)}"
    index_kinds = {"int32", "int64"}
    same_kind = index and {back.dtype.name, host.dtype.name} <= index_kinds
    if _dtype_name(back.dtype) != _dtype_name(host.dtype) and not same_kind:
        return None, f"asarray gives {_dtype_name(back.dtype)} for {_dtype_name(host.dtype)}"
    if back.shape != host.shape or not _equal(back, host).all():
        return None, "asarray does not keep the values"
    return x, ""


def _suite_notes(results: list[Result]) -> list[str]:
    if any(r.case.group == "onnx" for r in results):
        return []
    return ["the onnx package is not installed: the official ONNX cases are left out"]


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    top = module.partition(".")[0]
    for dist in (top, top.replace("_", "-")):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    found = getattr(sys.modules.get(top), "__version__", None)
    return f"{top} {found}" if found else top


# -- any Gather function ------------------------------------------------------------------------


def resolve_impl(spec: str) -> tuple[Callable[..., Any], str, dict[str, str]]:
    """(function, import spelling for reproducers, dtypes to skip with reasons) for ``--impl``."""
    if spec in ADAPTERS:
        for needs in dict.fromkeys(("onnx", spec.partition(".")[0])):  # onnx builds the model
            require(needs, f"--impl {spec}")
        where = f"gatherx._check import {ADAPTERS[spec]}"
        adapter: Callable[..., Any] = globals()[ADAPTERS[spec]]
        return adapter, where, ADAPTER_SKIPS[spec]
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        msg = (f"--impl {spec}: expected package.module:function (a function taking data, "
               f"indices, axis) or one of {', '.join(ADAPTERS)}")  # fmt: skip
        raise ValueError(msg)
    target: Any = user_module(f"--impl {spec}", module_name)
    for part in attr.split("."):
        if not hasattr(target, part):
            msg = f"--impl {spec}: {module_name} has no attribute {attr!r}"
            raise ValueError(msg)
        target = getattr(target, part)
    if not callable(target):
        msg = f"--impl {spec}: {module_name}.{attr} is not callable"
        raise ValueError(msg)
    return target, f"{module_name} import {attr.partition('.')[0]}", {}


def run_impl(spec: str, selected: Iterable[ConformanceCase] | None = None) -> Report:
    """Every case that needs no gatherx argument on ``fn(data, indices, axis)`` with NumPy
    inputs; out-of-range indices must raise (any exception)."""
    fn, where, skips = resolve_impl(spec)
    _, _, name = where.rpartition(" import ")
    attr = spec.partition(":")[2] if spec not in ADAPTERS else name
    results: list[Result] = []
    with _quiet() as noise:
        for c in selected if selected is not None else cases():
            if c.group not in GATHERX_ONLY_GROUPS:
                results.append(_impl_check(c, fn, where, attr, skips))
    notes = _suite_notes(results) + [f"{dtype} skipped: {why}" for dtype, why in skips.items()]
    notes += noise.notes()
    top = spec if spec in ADAPTERS else spec.partition(":")[0]
    return Report(f"impl {spec}", _version(top), ("gather",), results, notes)


def _impl_check(c: ConformanceCase, fn: Callable[..., Any], where: str, attr: str,
                skips: dict[str, str]) -> Result:  # fmt: skip
    if c.dtype in skips:
        return Result(c, "gather", "skipped", skips[c.dtype])
    data, indices = c.data.copy(), c.indices.copy()
    got, seconds, _ = _attempt(functools.partial(fn, data, indices, c.axis))
    ok, why = _compare(got, _want(c), gatherx_error=False)
    if ok and not (_equal(data, c.data).all() and np.array_equal(indices, c.indices)):
        ok, why = False, "the call changed its inputs"
    needs = "".join(f", {m}" for m in c.needs.split())
    reproducer = (f"import numpy as np{needs}; from {where}; data = {c.data_expr}; "
                  f"indices = {c.indices_expr}; {attr}(data, indices, {c.axis})")  # fmt: skip
    return Result(c, "gather", "passed" if ok else "failed", why, reproducer, _got(got), seconds)


# -- the built-in adapters ----------------------------------------------------------------------


@functools.cache
def gather_model(
    dtype: np.dtype, index_dtype: np.dtype, axis: int, ranks: tuple[int, int], opset: int = 13
) -> Any:
    """A one-node Gather model of ``opset`` for these dtypes, axis and ranks (dimensions left
    free), checked by ``onnx.checker``."""
    import onnx
    from onnx import helper

    data_t = (onnx.TensorProto.STRING if dtype.kind in "USO"
              else helper.np_dtype_to_tensor_dtype(dtype))  # fmt: skip
    index_t = helper.np_dtype_to_tensor_dtype(index_dtype)
    node = helper.make_node("Gather", ["data", "indices"], ["output"], axis=axis)
    graph = helper.make_graph(
        [node], "gather",
        [helper.make_tensor_value_info("data", data_t, [None] * ranks[0]),
         helper.make_tensor_value_info("indices", index_t, [None] * ranks[1])],
        [helper.make_tensor_value_info("output", data_t, [None] * (sum(ranks) - 1))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)  # what every onnxruntime of opset 13 reads
    onnx.checker.check_model(model)
    return model


@functools.cache
def _session(dtype: np.dtype, index_dtype: np.dtype, axis: int, ranks: tuple[int, int]) -> Any:
    import onnxruntime

    model = gather_model(dtype, index_dtype, axis, ranks)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # the errors the suite provokes are results, not log lines
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def onnxruntime_gather(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Gather by onnxruntime's CPU execution provider (one-node Gather-13 model)."""
    session = _session(data.dtype, indices.dtype, axis, (data.ndim, indices.ndim))
    return np.asarray(session.run(None, {"data": data, "indices": indices})[0])


def onnx_reference_gather(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """Gather by ``onnx.reference.ReferenceEvaluator`` (one-node Gather-13 model)."""
    from onnx.reference import ReferenceEvaluator

    model = gather_model(data.dtype, indices.dtype, axis, (data.ndim, indices.ndim))
    outputs: Any = ReferenceEvaluator(model).run(None, {"data": data, "indices": indices})
    return np.asarray(outputs[0])
