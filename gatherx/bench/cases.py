"""The benchmark's shapes and goals: float32 data gathered with int64 indices."""

from __future__ import annotations

from dataclasses import dataclass

from .._rules import output_shape


@dataclass(frozen=True)
class Case:
    """One benchmark shape: ``dtype`` data gathered with int64 ``indices`` on ``axis``.

    The indices gatherx gets are drawn from the whole valid range [-s, s-1], negative ones
    included; the native formulations get the same values made non-negative.
    """

    name: str
    data_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    axis: int
    large: bool = True
    dtype: str = "float32"
    #: The first index drawn from [0, s-1], the others from [-s, s-1] (a late negative).
    first_non_negative: bool = False

    @property
    def ax(self) -> int:
        return self.axis % len(self.data_shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return output_shape(self.data_shape, self.index_shape, self.ax)

    def describe(self) -> str:
        return f"{self.data_shape} / {self.index_shape} / axis {self.axis}"


CASES = (
    Case("tiny", (5, 4), (2, 2), 0, large=False),
    Case("small", (1000, 16), (100,), 0, large=False),
    Case("embed", (50000, 256), (64, 128), 0),
    Case("cols", (2048, 4096), (1024,), 1),
    Case("mid", (64, 512, 256), (2, 256), 1),
    Case("last", (256, 256, 64), (32,), -1),
    Case("short", (1000, 8), (200000,), 0),
    Case("short_first", (1000, 8), (200000,), 0, first_non_negative=True),
    Case("rank4", (16, 32, 16, 64), (4, 8), 2),
    Case("scalar", (512, 16, 1024), (), 1),
    # one row or one column at a scalar index: 16 KiB, 256 B and 16 KiB of output
    Case("pick_row", (4096, 4096), (), 0, large=False),
    Case("pick_wide", (64, 4096), (), 1, large=False),
    Case("pick_tall", (4096, 64), (), 1, large=False),
    Case("pick_col", (4096, 4096), (), 1),
)
#: Scalar picks of at most 64 KiB of output, whose goal is a fixed overhead; the column of
#: a (4096, 4096) matrix (``pick_col``) is held to the ratio of the large cases.
SMALL_PICKS = ("pick_row", "pick_wide", "pick_tall")

BACKENDS = ("numpy", "torch", "jax", "onnxruntime")

#: The task of a gather into a preallocated ``out=``, beside the plain ``forward``.
OUT_TASK = "forward (out=)"


@dataclass(frozen=True)
class Goal:
    """A performance goal of one backend's task on some cases.

    ``kind`` is ``ratio`` (gatherx time / best native time, median of the paired rounds, at
    most ``limit``), ``faster`` (that ratio at most ``1 / limit``: gatherx at least ``limit``
    times faster) or ``extra`` (gatherx's median time at most ``limit`` seconds above the
    best native's).
    ``cases`` names the cases it covers; empty means every large case.
    """

    backend: str
    task: str
    kind: str
    limit: float
    cases: tuple[str, ...] = ()

    def covers(self, case: Case) -> bool:
        return case.name in self.cases if self.cases else case.large

    def text(self) -> str:
        if self.kind == "extra":
            return f"<= +{self.limit * 1e6:.0f} us"
        if self.kind == "faster":
            return f">= {self.limit:g}x faster"
        return f"<= {self.limit:.2f}"

    def met(self, ratio: float, extra: float) -> bool:
        """Whether a paired ``ratio`` or an ``extra`` time (seconds) meets the goal."""
        if self.kind == "extra":
            return extra <= self.limit
        if self.kind == "faster":
            return ratio <= 1 / self.limit
        return ratio <= self.limit


#: The goals, the first that covers a case applying. NumPy's forward must beat the best
#: native NumPy formulation by 10% where the row copies are short (columns, the last axis,
#: many short rows), bounds check included, and never be slower than it. A scalar pick, on
#: every backend: at most 3 us over the best native up to 64 KiB of output, at most 1.05 of
#: it on the column of a (4096, 4096) matrix. Many short rows on PyTorch: at most 1.40 of
#: index_select on the wrapped index. Into ``out=`` (NumPy and PyTorch, large cases): at most
#: 1.10 of the fastest native ``out=`` formulation.
GOALS: tuple[Goal, ...] = (
    Goal("numpy", "forward", "ratio", 0.90, ("cols", "last", "short", "short_first")),
    Goal("numpy", "forward", "ratio", 1.05, ("pick_col",)),
    Goal("numpy", "forward", "ratio", 1.00),
    Goal("numpy", "forward", "extra", 4e-6, ("tiny",)),
    Goal("numpy", "forward", "extra", 3e-6, SMALL_PICKS),
    Goal("numpy", "gather_grad", "faster", 3),
    Goal("numpy", OUT_TASK, "ratio", 1.10),
    Goal("torch", "forward", "ratio", 1.40, ("short", "short_first")),
    Goal("torch", "forward", "ratio", 1.05),
    Goal("torch", "forward", "extra", 3e-6, ("tiny", *SMALL_PICKS)),
    Goal("torch", "forward+backward", "ratio", 1.05),
    Goal("torch", "forward+backward", "ratio", 1.50, ("tiny",)),
    Goal("torch", OUT_TASK, "ratio", 1.10),
    Goal("jax", "forward (jit)", "ratio", 1.05),
    Goal("jax", "forward (jit)", "extra", 3e-6, SMALL_PICKS),
    Goal("jax", "forward (eager)", "ratio", 2.00, ("tiny",)),
    Goal("jax", "vjp (jit)", "ratio", 1.05),
)


def goal_for(case: Case, backend: str, task: str) -> Goal | None:
    """The goal of ``backend``'s ``task`` on ``case``, or None where none is set."""
    for goal in GOALS:
        if (goal.backend, goal.task) == (backend, task) and goal.covers(case):
            return goal
    return None
