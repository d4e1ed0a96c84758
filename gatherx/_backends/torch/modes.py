"""Which PyTorch machinery is active around a call: compiler, exporter, tracer, torch.func."""

from __future__ import annotations

import torch

# Module-level names: each attribute hop costs a cache miss on the eager path.
_is_compiling = torch.compiler.is_compiling
_is_exporting = torch.compiler.is_exporting
_tracing_state = torch._C._get_tracing_state
_functorch_active = torch._C._are_functorch_transforms_active
_forward_ad = torch.autograd.forward_ad
_grad_enabled = torch.is_grad_enabled


def compiling() -> bool:
    """Dynamo or torch.export is tracing: values cannot be read, the graph is specialised."""
    return _is_compiling() or _is_exporting()


_TENSOR = torch.Tensor
_FAKE = torch._subclasses.FakeTensor


def values_readable(t: torch.Tensor) -> bool:
    """Whether ``t`` holds values at all: not a fake tensor (``FakeTensorMode``, which tools
    and tracers run code under) nor a meta tensor, which have shapes only."""
    if t.is_meta:
        return False
    return type(t) is _TENSOR or not isinstance(t, _FAKE)  # (the common case in one test)


def tracing() -> bool:
    """The TorchScript tracer is recording (torch.jit.trace, the TorchScript ONNX exporter)."""
    return _tracing_state() is not None


def onnx_exporting() -> bool:
    """A ``torch.onnx`` exporter records this call (either exporter). Its ``Gather`` node
    checks and wraps negative indices itself, and the exporters drop gatherx's in-graph
    assert: no wrap is traced before the node, which would read [-2s, -s-1] as rows."""
    return torch.onnx.is_in_onnx_export()


def functorch_active() -> bool:
    return _functorch_active()


def plain_eager() -> bool:
    """No compiler, exporter, TorchScript tracer, torch.func transform or forward AD active."""
    return not (
        _is_compiling()
        or _is_exporting()
        or _tracing_state() is not None
        or _functorch_active()
        or _forward_ad._current_level >= 0
    )


def vmapping() -> bool:
    """A torch.func.vmap is active (alone or around or inside other transforms)."""
    if not _functorch_active():
        return False
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

    vmap = torch._C._functorch.TransformType.Vmap
    return any(i.key() == vmap for i in retrieve_all_functorch_interpreters())


def needs_autograd(x: torch.Tensor) -> bool:
    """Whether any autodiff could see this call; if not, a Function's overhead buys nothing.

    (The TorchScript tracer counts: ONNX export below opset 18 needs the Function's symbolic.)
    """
    return (x.requires_grad and _grad_enabled()) or not plain_eager()
