"""The bounds policy: where gatherx reads index values to check them, per device kind.

Two policies, decided here for every backend:

``exact``
    Read the index's extremes on the host (a device-to-host sync where the index lives on an
    accelerator) and raise the ``IndexError`` that names the first bad value, its position and
    the valid range. The default on the CPU, where reading costs no sync.
``device``
    Read nothing on the host: negative indices are wrapped on the device and bad ones are
    caught by an asynchronous check on the device that carries gatherx's message (PyTorch: a
    device-side assert, the contract of ``torch.index_select`` on CUDA; JAX, which has no
    asynchronous error in eager code: two scalars, the minimum and maximum, computed on the
    device and read). Never a silent read. The default on accelerators (CUDA, ROCm, XPU, MPS,
    GPU and TPU JAX devices).

Host indices (Python ints, NumPy arrays) are on the host already: they are checked there,
exactly, under either policy, before they are copied to the data's device.

The process default comes from the environment variable ``GATHERX_BOUNDS_POLICY``, read when
gatherx is imported: ``exact``, ``device`` or ``auto`` (the default: by device kind).
:func:`exact_bounds` opts a block of code into the exact policy, and :func:`force` sets either
policy for a block, on every device (the test suite forces ``device`` on the CPU with it).
Both hold for the current thread and ``asyncio`` task only (a :class:`~contextvars.ContextVar`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from . import _errors

EXACT = "exact"
DEVICE = "device"
#: The value of ``GATHERX_BOUNDS_POLICY`` that decides by device kind (the default).
AUTO = "auto"
#: The environment variable that sets the process default.
ENV = "GATHERX_BOUNDS_POLICY"
#: Device kinds read without a sync: ``torch.device.type`` and JAX's ``Device.platform``.
HOST_KINDS = frozenset({"cpu"})


def _parse(value: str | None, where: str) -> str | None:
    """A policy name, or None for ``auto``."""
    if value is None or value == AUTO:
        return None
    if value not in (EXACT, DEVICE):
        raise _errors.bounds_policy(where, (EXACT, DEVICE, AUTO), value)
    return value


#: The policy forced on every device kind, or None to decide by kind. The default is read
#: once, from the environment; :func:`force` overrides it for a block.
_DEFAULT = _parse(os.environ.get(ENV) or None, ENV)
# The default, not a set() at import: threads start with an empty context.
_forced: ContextVar[str | None] = ContextVar("gatherx_bounds_policy", default=_DEFAULT)
#: Nonzero while some thread may see a forced policy (the environment's, or a :func:`force`
#: block's): a module global, the one thing hot paths read (and Dynamo can trace) before
#: asking the ContextVar.
FORCING = int(_DEFAULT is not None)
_lock = threading.Lock()


def policy(kind: str) -> str:
    """The policy for an index on a device of ``kind`` (``cpu``, ``cuda``, ``gpu``, ...).

    Parameters
    ----------
    kind : str
        A ``torch.device.type`` or a JAX ``Device.platform``.

    Returns
    -------
    str
        ``"exact"`` or ``"device"``.
    """
    forced = _forced.get() if FORCING else None
    if forced is not None:
        return forced
    return EXACT if kind in HOST_KINDS else DEVICE


def exact(kind: str) -> bool:
    """Whether indices on a device of ``kind`` are read on the host (the exact policy)."""
    if not FORCING:
        return kind in HOST_KINDS
    forced = _forced.get()
    if forced is None:
        return kind in HOST_KINDS
    return forced == EXACT


def _count(step: int) -> None:
    global FORCING
    with _lock:
        FORCING += step


@contextmanager
def force(name: str | None) -> Iterator[None]:
    """Use the policy ``name`` on every device kind inside the block (None: by device kind).

    Parameters
    ----------
    name : {"exact", "device", "auto"} or None
        The policy; ``"auto"`` and None restore the choice by device kind.

    Examples
    --------
    >>> import numpy as np
    >>> import gatherx
    >>> from gatherx import _policy
    >>> with _policy.force("device"):
    ...     _policy.policy("cpu")
    'device'
    >>> _policy.policy("cpu"), _policy.policy("cuda")
    ('exact', 'device')
    """
    token = _forced.set(_parse(name, "the bounds policy"))
    _count(1)
    try:
        yield
    finally:
        _count(-1)
        _forced.reset(token)


@contextmanager
def exact_bounds() -> Iterator[None]:
    """Check indices exactly on every device inside the block: the ``IndexError`` of the CPU.

    On accelerators gatherx checks indices on the device by default, without waiting for
    them: a bad index there raises later, as a device-side assert, which names the valid range
    but not the value, and which leaves a CUDA context unusable. Inside this block each call
    with device indices reads their minimum and maximum on the host first (one sync per call,
    which also breaks CUDA-graph capture) and raises the ``IndexError`` that names the first
    bad value, its position and the valid range, before any work, as on the CPU. Use it to
    debug a bad index, or where an input cannot be trusted and the process must survive it.
    Compiled and traced code is unaffected: its index values are unknown when it is traced.
    Also usable as a decorator; it holds for the current thread (and ``asyncio`` task) only.

    Examples
    --------
    >>> import numpy as np
    >>> import gatherx
    >>> with gatherx.exact_bounds():
    ...     gatherx.gather(np.arange(5.0), [0, -1])
    array([0., 4.])
    """
    with force(EXACT):
        yield
