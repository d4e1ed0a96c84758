"""The benchmark's shapes and goals: float32 data gathered with int64 indices."""

from __future__ import annotations

from dataclasses import dataclass

from .._rules import output_shape


@dataclass(frozen=True)
class Case:
    """One benchmark shape: float32 ``data`` gathered with int64 ``indices`` on ``axis``."""

    name: str
    data_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    axis: int
    large: bool = True

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
)

BACKENDS = ("numpy", "torch", "jax", "onnxruntime")

#: (backend, task) -> (goal on large cases, the ratio it must stay within).
#: Ratio = gatherx time / best native time; ``np.add.at`` must be 3x slower than gather_grad.
GOALS: dict[tuple[str, str], tuple[str, float]] = {
    ("numpy", "forward"): ("<= 1.10", 1.10),
    ("torch", "forward"): ("<= 1.10", 1.10),
    ("jax", "forward (jit)"): ("<= 1.10", 1.10),
    ("torch", "forward+backward"): ("<= 1.10", 1.10),
    ("jax", "vjp (jit)"): ("<= 1.10", 1.10),
    ("numpy", "gather_grad"): (">= 3x faster", 1 / 3),
}
#: Dispatch overhead allowed over ``np.take`` on the tiny case, in seconds.
TINY_OVERHEAD = 4e-6
