"""Lookups that torch.compile's tracer runs instead of tracing: their caches leave no guards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def constant_under_compile(fn: F) -> F:
    """Mark ``fn`` for Dynamo (``torch.compile``) as returning a constant for constant
    arguments (a type, a dtype): Dynamo calls it while tracing and keeps its result, where it
    would otherwise trace its body and guard on its cache as the first call found it. A cache
    filled by that first call would then fail the guard on the second call: one recompile
    (an error under ``torch.compiler.set_stance("fail_on_recompile")``).

    This sets the attribute ``torch.compiler.assume_constant_result`` sets, here, where torch
    may not be imported yet; in other code it changes nothing.
    """
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn
