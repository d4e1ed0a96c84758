"""gatherx: the ONNX Gather operator for NumPy, PyTorch, JAX and any array-API library."""

from __future__ import annotations

import importlib
from typing import Any

from ._api import gather, gather_grad
from ._policy import exact_bounds

__all__ = ["__version__", "exact_bounds", "gather", "gather_grad"]
__version__ = "0.2.0.dev0"

#: Public submodules, imported on first attribute access (PEP 562) as NumPy and JAX do, so
#: that ``import gatherx`` never imports torch, onnx or matplotlib.
_SUBMODULES = frozenset({"bench", "cli", "onnx", "torch"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    # The public names, lazy submodules included, for tab completion and help().
    return sorted({*__all__, *_SUBMODULES})
