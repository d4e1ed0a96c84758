"""Interleaved timing rounds: every formulation of a group timed under the same conditions."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
#: Functions this slow or slower are timed call by call, interleaved (see `rounds`).
PER_CALL_SECONDS = 50e-6


def rounds(
    fns: dict[str, Callable[[], Any]],
    repeats: int,
    min_sample: float,
    clock: str = "wall",
    groups: dict[str, str] | None = None,
    collect: bool = True,
) -> dict[str, list[float]]:
    """Seconds per call of each function in each of ``repeats`` interleaved rounds.

    Each sample is the mean of a batch of calls lasting about ``min_sample`` seconds; every
    round runs the functions in a fresh random order, so no function always follows the same
    neighbour (and inherits its cache and allocator state). Functions of at least
    ``PER_CALL_SECONDS`` are interleaved call by call within the round, each call timed:
    a batch of one function's calls reuses one output buffer, and where that address is slow
    (its cache sets, its pages) the whole batch was, a placement that differs from process to
    process and once made one of two identical XLA programs 1.5x slower for a whole run.
    Functions in one of ``groups`` (name -> group) run the same number of calls per batch,
    sized by the group's median time: the first call of a batch often pays for a fresh
    allocation that later ones reuse, and unequal batches would bias the comparison. The
    ``cpu`` clock counts this process's CPU time (all its threads), which other processes'
    load on a shared machine does not inflate. Each function's first call here is a warm-up
    (compilation, caches, allocator); a second call, warm, sizes its batches: after other
    work, even a function that ran before is slow on its first call (on JAX's eager calls of
    10 us, 20x), and batches sized by it held a few calls where ``min_sample`` asks for
    hundreds, each batch then timing calls just after another function's, with the caches
    that function left.
    ``collect``: run a full garbage collection before the rounds (the collector is off during
    them either way); a caller timing many small groups in a row, with torch and JAX loaded,
    whose collection takes a sizeable fraction of a second, collects once for all of them.
    """
    now = CLOCKS[clock]
    names = list(fns)
    once = {}
    for name in names:
        fn = fns[name]
        start = time.perf_counter()
        fn()  # warm-up
        once[name] = time.perf_counter() - start
        if once[name] < min_sample:  # a second call, now warm, to size it
            start = time.perf_counter()
            fn()
            once[name] = time.perf_counter() - start
    group_of = groups or {name: name for name in names}
    typical = {
        g: statistics.median(once[n] for n in names if group_of[n] == g)
        for g in set(group_of.values())
    }
    inner = {
        name: max(1, min(20_000, int(min_sample / max(typical[group_of[name]], 1e-8))))
        for name in names
    }
    per_call = min(typical.values()) >= PER_CALL_SECONDS
    samples: dict[str, list[float]] = {name: [] for name in names}
    if collect:
        gc.collect()
    gc.disable()
    try:
        rng = random.Random(0)
        for _ in range(repeats):
            if per_call:
                total, left = dict.fromkeys(names, 0.0), dict(inner)
                while any(left.values()):
                    for name in rng.sample(names, len(names)):
                        if left[name]:
                            start = now()
                            fns[name]()
                            total[name] += now() - start
                            left[name] -= 1
                for name in names:
                    samples[name].append(total[name] / inner[name])
                continue
            for name in rng.sample(names, len(names)):
                fn, k = fns[name], inner[name]
                start = now()
                for _ in range(k):
                    fn()
                samples[name].append((now() - start) / k)
    finally:
        gc.enable()
    return samples
