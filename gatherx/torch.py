"""PyTorch layer for ONNX Gather: `Gather`, an ``nn.Module`` around :func:`gatherx.gather`."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

from . import _errors
from ._api import gather
from ._indices import host_indices
from ._rules import INT64_BOUNDS, check_flag, check_opset, first_outside

__all__ = ["Gather", "RowwiseGatherParallel"]  # noqa: F822 (the latter from __getattr__)


def __getattr__(name: str) -> Any:
    # torch.distributed's tensor parallelism, imported when its style is first asked for
    if name == "RowwiseGatherParallel":
        from ._backends.torch.parallel import RowwiseGatherParallel

        return RowwiseGatherParallel
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


class Gather(torch.nn.Module):
    """ONNX ``Gather`` as a layer: ``forward(data, indices)`` is :func:`gatherx.gather`.

    Differentiable in ``data`` (scatter-add backward, double backward, forward mode), usable
    under ``torch.func`` transforms, ``torch.compile`` and ``torch.export``.

    Parameters
    ----------
    axis : int, optional
        The axis of ``data`` to gather on, in [-r, r-1]. Default 0.
    opset : int, optional
        The ONNX opset whose Gather to follow (negative indices need >= 11). Default 13.
    sparse_grad : bool, optional
        Whether the gradient that reaches ``data`` is a ``torch.sparse_coo`` tensor of only
        the gathered slices (as ``nn.Embedding(sparse=True)`` gives), for large tables and
        the optimizers that take sparse gradients (``SGD``, ``SparseAdam``, ``Adagrad``).
        Default False: a dense gradient of the data's shape.
    indices : tensor, int or nested list of ints, optional
        Fixed indices, kept as a buffer (so they follow ``.to(device)`` and ``state_dict``);
        ``forward`` then takes ``data`` alone, which fits ``nn.Sequential``. Ints and lists
        are placed on PyTorch's default device (``torch.set_default_device``, a
        ``torch.device`` context), a tensor stays where it is. Default: none, and
        ``forward`` takes ``(data, indices)``.

    Raises
    ------
    TypeError, ValueError
        ``axis`` is not an int, or ``opset`` is not an int >= 1; ``forward`` raises what
        :func:`gatherx.gather` raises, and ``TypeError`` when indices are missing or given
        twice. Under ``torch.compile`` and ``torch.export`` out-of-bounds indices raise
        ``RuntimeError`` from an in-graph assert instead of ``IndexError``.

    Examples
    --------
    >>> import torch
    >>> from gatherx.torch import Gather
    >>> table = torch.nn.Parameter(torch.arange(6.0).reshape(3, 2))
    >>> rows = Gather(axis=0)(table, torch.tensor([2, -1, 0]))
    >>> rows.shape
    torch.Size([3, 2])
    >>> rows.sum().backward()
    >>> table.grad
    tensor([[1., 1.],
            [0., 0.],
            [2., 2.]])
    >>> big = torch.nn.Parameter(torch.ones(1000, 4))
    >>> Gather(sparse_grad=True)(big, torch.tensor([7, -1, 7])).sum().backward()
    >>> big.grad.layout, big.grad.coalesce().indices()
    (torch.sparse_coo, tensor([[  7, 999]]))
    >>> pick = torch.nn.Sequential(torch.nn.Identity(), Gather(axis=1, indices=[1, 0]))
    >>> pick(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[2., 1.],
            [4., 3.]])
    """

    indices: torch.Tensor | None

    def __init__(
        self, axis: int = 0, opset: int = 13, *, sparse_grad: bool = False, indices: Any = None
    ) -> None:
        super().__init__()
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise _errors.not_an_int("Gather", "axis", axis)
        self.axis = operator.index(axis)
        self.opset = check_opset(opset, "Gather")
        self.sparse_grad = check_flag(sparse_grad, "sparse_grad", "Gather")
        fixed = indices
        # the given values, kept on the CPU as a plain tensor: not a buffer (.to() leaves
        # it), and what torch.load(weights_only=True) reads in a saved module
        self._host: torch.Tensor | None = None
        if indices is not None and not isinstance(indices, torch.Tensor):
            # gather's own parsing: ints only, [] is an empty int64 list, not float
            host = host_indices(indices, "Gather")
            if host.dtype == object:  # ints beyond int64: out of range on any axis
                found = first_outside(host, *INT64_BOUNDS)
                assert found is not None
                raise _errors.out_of_bounds_symbolic("Gather", *found, self.axis, self.opset)
            self._host = torch.from_numpy(np.array(host))
            # on PyTorch's default device, as the parameters and buffers of torch's modules
            # (a torch.device context, torch.set_default_device); a copy: the buffer may be
            # written in place
            fixed = self._host.to(torch.get_default_device(), copy=True)
        self.register_buffer("indices", fixed)

    def reset_parameters(self) -> None:
        """Write the fixed indices given as ints back into their buffer, where it lies.

        A model built on the ``meta`` device keeps no values; after ``to_empty`` this
        restores them, as ``reset_parameters`` re-initialises torch's own modules. Indices
        given as a tensor, or none, are left as they are.
        """
        if self._host is not None and self.indices is not None:
            with torch.no_grad():
                self.indices.copy_(self._host)

    def forward(self, data: torch.Tensor, indices: Any = None) -> torch.Tensor:
        """Gather ``data`` at ``indices`` (or at the fixed indices) along ``self.axis``."""
        if indices is None and self.indices is None:
            msg = "Gather: forward needs indices (none were fixed at construction)"
            raise TypeError(msg)
        if indices is not None and self.indices is not None:
            msg = "Gather: indices were fixed at construction; forward takes data alone"
            raise TypeError(msg)
        chosen = self.indices if indices is None else indices
        return gather(data, chosen, axis=self.axis, opset=self.opset, sparse_grad=self.sparse_grad)

    def __prepare_scriptable__(self) -> Gather:
        """torch.jit.script calls this first: refuse with a reason, not a TorchScript trace."""
        msg = (
            "Gather: torch.jit.script cannot compile gatherx (its dispatch over frameworks "
            "and dtypes is Python); use torch.jit.trace, torch.compile or torch.export, "
            "or script the modules around it"
        )
        raise TypeError(msg)

    def extra_repr(self) -> str:
        fixed = "" if self.indices is None else f", indices={tuple(self.indices.shape)}"
        sparse = ", sparse_grad=True" if self.sparse_grad else ""
        return f"axis={self.axis}, opset={self.opset}{sparse}{fixed}"
