"""The benchmark's shapes: data gathered with int64 indices, and their one-line specs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._rules import output_shape


def itemsize(name: str) -> int:
    """Bytes per element of the dtype named ``name`` (bfloat16's without ml_dtypes)."""
    return 2 if name == "bfloat16" else np.dtype(name).itemsize


def numpy_dtype(name: str) -> np.dtype[Any]:
    """NumPy's dtype named ``name``: ``bfloat16`` is ml_dtypes' (imported on first use;
    ImportError where it is not installed)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class Case:
    """One benchmark shape: ``dtype`` data gathered with int64 ``indices`` on ``axis``.

    The indices gatherx gets are drawn from the whole valid range [-s, s-1], negative ones
    included; the native formulations get the same values made non-negative. ``strided``
    data is a non-contiguous view (every other element along its last axis longer than one,
    see `make_inputs`); JAX copies it into a buffer of its own, as it does every array.
    ``large`` marks the cases whose output is large enough for their times to be memory
    traffic rather than call overhead.
    """

    name: str
    data_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    axis: int
    large: bool = True
    dtype: str = "float32"
    #: The first index drawn from [0, s-1], the others from [-s, s-1] (a late negative).
    first_non_negative: bool = False
    strided: bool = False

    @property
    def ax(self) -> int:
        return self.axis % len(self.data_shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return output_shape(self.data_shape, self.index_shape, self.ax)

    @property
    def out_bytes(self) -> int:
        """The output's size in bytes."""
        return math.prod(self.out_shape) * itemsize(self.dtype)

    def describe(self) -> str:
        text = f"{self.data_shape} / {self.index_shape} / axis {self.axis}"
        if self.dtype != "float32":
            text += f" / {self.dtype}"
        if self.strided:
            text += " / strided"
        return text

    def spec(self) -> str:
        """The case as ``--case-spec`` text, which `from_spec` reads back: no spaces, no
        characters a shell would expand, e.g. ``data=5x4,index=2x2,axis=-1,dtype=uint8``."""
        parts = [
            f"data={_shape_text(self.data_shape)}",
            f"index={_shape_text(self.index_shape)}",
            f"axis={self.axis}",
            f"dtype={self.dtype}",
        ]
        parts += [flag for flag in _FLAGS if getattr(self, flag)]
        return ",".join(parts)

    @classmethod
    def from_spec(cls, text: str, name: str | None = None) -> Case:
        """The case that ``text`` (from `spec`) describes, named ``name`` (default: ``text``).

        Raises
        ------
        ValueError
            If ``text`` lacks ``data=`` or ``index=``, or names an unknown key or dtype.
        """
        fields: dict[str, str] = {}
        flags: dict[str, bool] = {}
        for part in (p.strip() for p in text.split(",")):
            key, eq, value = part.partition("=")
            if not eq and key in _FLAGS:
                flags[key] = True
            elif eq and key in ("data", "index", "axis", "dtype"):
                fields[key] = value
            else:
                msg = (
                    f"case spec {text!r}: unknown part {part!r}; expected data=AxB, index=C "
                    f"(or index=scalar), axis=N, dtype=NAME, {', '.join(_FLAGS)}"
                )
                raise ValueError(msg)
        if "data" not in fields or "index" not in fields:
            msg = f"case spec {text!r}: data= and index= are required, e.g. data=5x4,index=2"
            raise ValueError(msg)
        dtype = fields.get("dtype", "float32")
        try:
            itemsize(dtype)
        except TypeError:
            msg = f"case spec {text!r}: unknown dtype {dtype!r}"
            raise ValueError(msg) from None
        data = _shape_of(fields["data"], text)
        if not data:
            msg = f"case spec {text!r}: the data needs at least one dimension"
            raise ValueError(msg)
        axis = int(fields.get("axis", "0"))
        if not -len(data) <= axis < len(data):
            msg = f"case spec {text!r}: axis {axis} is out of range for data of rank {len(data)}"
            raise ValueError(msg)
        index = _shape_of(fields["index"], text)
        ax = axis % len(data)
        large = math.prod(output_shape(data, index, ax)) * itemsize(dtype) >= 2**20
        return cls(name or text, data, index, axis, large, dtype, **flags)


#: The boolean fields a spec names by themselves when they are set.
_FLAGS = ("strided", "first_non_negative")


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def _shape_of(text: str, spec: str) -> tuple[int, ...]:
    if text == "scalar":
        return ()
    try:
        shape = tuple(int(n) for n in text.split("x"))
    except ValueError:
        shape = (-1,)
    if any(n < 0 for n in shape):
        msg = f"case spec {spec!r}: {text!r} is no shape (sizes joined by x, or scalar)"
        raise ValueError(msg)
    return shape


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
BACKENDS = ("numpy", "torch", "jax", "onnxruntime")

#: The task of a gather into a preallocated ``out=``, beside the plain ``forward``.
OUT_TASK = "forward (out=)"
#: gatherx's forward+backward (``FLOOR_OF``) against the least ``torch.autograd.Function``: a
#: row of its own, as that Function is slower than the natives, so never the best of them.
FLOOR_OF = "forward+backward"
FLOOR_TASK = f"{FLOOR_OF} / minimal Function"
