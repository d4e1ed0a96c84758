"""The ``xp`` fixture, and the routing of every test to the runs that have its backends.

``--backends`` narrows the ``xp`` fixture's parametrisation and keeps only the tests that need
one of the backends it names, so that each nox session runs each test where what it needs is
installed, and no test twice for nothing. A test's backends are the first found of:

1. its ``backend`` parameter;
2. its ``backends(*names)`` marker;
3. the backends its other parameters name (``"torch"``, ``"jax.numpy"``, ``Backend.JAX``);
4. what its code, and the module's functions it calls, ask ``need()`` for or name as
   ``Backend.X``;

with, in every case, what its module asks ``need()`` for at import; NumPy if that is nothing.
A test skipped for want of a backend it was not routed by would run in no session, so it fails,
naming the marker that fixes it. JAX tests whose outcome depends on its 64-bit mode get the
``x64`` marker, which the JAX_ENABLE_X64=1 runs select: those that read ``jax_enable_x64`` (or
a module constant made from it, or ``supports_dtype``) or name a 64-bit dtype, or whose
parameters are 64-bit dtypes or integers beyond int32.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from support import Backend, namespace

# CI (nox sets GATHERX_HYPOTHESIS=ci) draws the same examples every run, so a result is
# reproducible; a plain pytest run draws new ones each time and so keeps searching.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("GATHERX_HYPOTHESIS", "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=",".join(b.value for b in Backend),
        help="comma-separated Backend values: the xp fixture's parameters, and the tests kept, "
        "those that need one of them (default: all)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        wanted = metafunc.config.getoption("--backends").split(",")
        chosen = [b for b in Backend if b.value in wanted]
        metafunc.parametrize("backend", chosen, ids=[b.label for b in chosen])


@pytest.fixture
def xp(backend: Backend):
    """``backend``'s namespace; skipped if not installed, failed if GATHERX_REQUIRE names it."""
    return namespace(backend)


# ------------------------------------------------------------------------------------ routing

BACKENDS = frozenset(b.value for b in Backend)
NEEDS = pytest.StashKey[frozenset]()
#: Names whose use makes a test's outcome depend on JAX's 64-bit mode.
X64_NAMES = frozenset({"jax_enable_x64", "jax_x64", "supports_dtype"})
WIDE_DTYPES = frozenset({"int64", "uint64", "float64", "complex128"})
Function = ast.FunctionDef | ast.AsyncFunctionDef


def backend_named(value: Any) -> str | None:
    """The backend a parameter value or a module name (``"jax.numpy"``) names, if any."""
    if isinstance(value, Backend):
        return value.value
    if isinstance(value, str):
        top = value.partition(".")[0]
        top = "jax" if top == "jaxlib" else top
        return top if top in BACKENDS else None
    return None


def is_wide(value: Any) -> bool:
    """Whether a parameter value is a 64-bit dtype or an integer JAX holds only in 64 bits."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -(2**31) <= value < 2**31
    if isinstance(value, str) and not re.fullmatch(r"[<>=|]?[a-z]+[0-9]*", value):
        return False
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        return False
    return dtype.kind in "iufc" and dtype.newbyteorder("=").name in WIDE_DTYPES


def names_in(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def asked_by(node: ast.AST, params: dict[str, Any]) -> set[str]:
    """The backends ``node`` itself asks for: ``need("X")``, ``need(param)``, ``Backend.X``."""
    found = set()
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "need" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant):
            found.add(backend_named(arg.value))
        elif isinstance(arg, ast.Name) and arg.id in params:
            found.add(backend_named(params[arg.id]))
    elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
          and node.value.id == "Backend" and node.attr in Backend.__members__):  # fmt: skip
        found.add(Backend[node.attr].value)
    return found - {None}


class Module:
    """What a test module's source asks for, at import and in each function."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        #: Every function by name and by the lines it starts on: its def, its decorators.
        self.defs: dict[int | str, Function] = {}
        for node in ast.walk(tree):
            if isinstance(node, Function):
                self.defs.setdefault(node.name, node)
                for line in [node.lineno, *(d.lineno for d in node.decorator_list)]:
                    self.defs.setdefault(line, node)
        at_import: list[ast.AST] = []
        todo: list[ast.AST] = [tree]
        while todo:
            node = todo.pop()
            at_import.append(node)
            todo += [c for c in ast.iter_child_nodes(node)
                     if not isinstance(c, (*Function.__args__, ast.Lambda))]  # fmt: skip
        self.at_import = {b for node in at_import for b in asked_by(node, {})}
        # Module constants made from the 64-bit mode: X64 = ..., FLOAT = ... if X64 else ...
        self.x64_names = set(X64_NAMES)
        assigns = [n for n in at_import if isinstance(n, (ast.Assign, ast.AnnAssign))]
        grown = True
        while grown:
            grown = False
            for node in assigns:
                if node.value is not None and names_in(node.value) & self.x64_names:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    new = {t.id for t in targets if isinstance(t, ast.Name)} - self.x64_names
                    self.x64_names |= new
                    grown |= bool(new)

    def function(self, obj: Any) -> Function | None:
        """The definition of a test function (unwrapped from Hypothesis' ``@given``)."""
        obj = getattr(getattr(obj, "hypothesis", None), "inner_test", obj)
        code = getattr(inspect.unwrap(obj), "__code__", None)
        if code is not None and code.co_firstlineno in self.defs:
            return self.defs[code.co_firstlineno]
        return self.defs.get(getattr(obj, "__name__", ""))

    def reached(self, func: Function) -> list[ast.AST]:
        """The nodes of ``func``'s body and of the bodies of the module's functions it names,
        transitively (decorators aside: parametrisations are read from the parameters)."""
        seen, todo, out = set(), [func], []
        while todo:
            func = todo.pop()
            if func.name in seen:
                continue
            seen.add(func.name)
            for part in [func.args, *func.body]:  # the defaults too: def f(x, dtype=FLOAT)
                for node in ast.walk(part):
                    out.append(node)
                    if isinstance(node, ast.Name) and node.id in self.defs:
                        todo.append(self.defs[node.id])
        return out

    def asked(self, func: Function, params: dict[str, Any]) -> set[str]:
        return {b for node in self.reached(func) for b in asked_by(node, params)}

    def reads_x64(self, func: Function) -> bool:
        """Whether ``func`` reads the 64-bit mode or names a 64-bit dtype (``np.int64``,
        ``"float64"``), itself or through the module's functions it calls."""
        reached = self.reached(func)
        used = set().union(*map(names_in, func.decorator_list), *map(names_in, reached))
        strings = {n.value for n in reached if isinstance(n, ast.Constant)}
        return bool(used & (self.x64_names | WIDE_DTYPES) or strings & WIDE_DTYPES)


@functools.cache
def module_at(path: Path) -> Module:
    return Module(path)


def route(item: pytest.Item) -> tuple[frozenset[str], bool]:
    """``item``'s backends, and whether its outcome depends on JAX's 64-bit mode."""
    if not isinstance(item, pytest.Function) or item.path.suffix != ".py":
        return BACKENDS, False  # the doctests of the docs pages: whatever the run has
    params = getattr(getattr(item, "callspec", None), "params", {})
    source = module_at(item.path)
    func = source.function(getattr(item, "obj", None))
    if isinstance(params.get("backend"), Backend):
        needs = {params["backend"].value}
    elif marks := list(item.iter_markers("backends")):
        needs = {name for mark in marks for name in mark.args}
    else:
        needs = {backend_named(v) for v in params.values()} - {None}
        needs = needs or (source.asked(func, params) if func else set())
    needs = frozenset(needs | source.at_import or {"numpy"})
    x64 = "jax" in needs and (
        bool(list(item.iter_markers("x64")))
        or any(map(is_wide, params.values()))
        or (func is not None and source.reads_x64(func))
    )
    return needs, x64


@pytest.hookimpl(tryfirst=True)  # before -m reads the x64 markers added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("--backends").split(","))
    kept, dropped = [], []
    for item in items:
        needs, x64 = route(item)
        item.stash[NEEDS] = needs
        if x64:
            item.add_marker("x64")
        (kept if needs & wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test skipped for want of a backend it is not routed by fails: no session runs it."""
    report = yield
    if report.skipped and call.excinfo is not None:
        found = re.fullmatch(r"(\S+) is not installed", str(call.excinfo.value))
        missing = backend_named(found.group(1)) if found else None
        needs = item.stash.get(NEEDS, frozenset())
        if missing and missing not in needs:
            report.outcome = "failed"
            report.longrepr = (
                f"skipped for want of {missing}, but routed to the runs of {sorted(needs)}: "
                f"no session would run it; mark it pytest.mark.backends({missing!r}, ...)"
            )
    return report
