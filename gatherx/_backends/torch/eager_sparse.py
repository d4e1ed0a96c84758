"""The sparse gather and gradient run eagerly from compiled code (a graph break): Dynamo's
graphs hold no sparse tensor. Imported only when a compiler traces a sparse call, since
``torch.compiler.disable`` loads Dynamo, which costs a plain eager program a second."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..base import Backend

if TYPE_CHECKING:
    from . import TorchBackend

# Under fullgraph=True, Dynamo's error names this reason.
_EAGER = torch.compiler.disable(
    reason="gatherx makes sparse gradients outside compiled graphs, which hold no sparse tensor"
)


@_EAGER
def gather(backend: TorchBackend, data: Any, indices: Any, axis: Any, opset: Any) -> Any:
    return backend.gather(data, indices, axis, opset, True)


@_EAGER
def gather_grad(backend: TorchBackend, shape: Any, indices: Any, grad: Any, axis: Any) -> Any:
    return Backend.gather_grad(backend, shape, indices, grad, axis, True)
