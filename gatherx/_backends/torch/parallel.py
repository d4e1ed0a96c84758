"""A tensor-parallel style for modules that gather from their own weight."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import ParallelStyle


class RowwiseGatherParallel(ParallelStyle):
    """Shard a module's table on the gathered axis over a 1-D device mesh, for
    ``torch.distributed.tensor.parallel.parallelize_module``.

    The module's parameter ``weight`` becomes a DTensor sharded on ``axis`` (each rank holds
    a block of its rows), the module's tensor inputs become replicated DTensors, and
    :func:`gatherx.gather` on that weight reads on each rank only the rows it holds, the
    others' masked out; the partial results are summed into the output, so ranks exchange
    the output, never the table, and the gradient stays sharded like the weight. The
    module's forward must call :func:`gatherx.gather` (or :class:`gatherx.torch.Gather`) on
    ``self.<weight>`` at ``axis``.

    Parameters
    ----------
    weight : str, optional
        The name of the module's table parameter. Default ``"weight"``.
    axis : int, optional
        The axis the module gathers on. Default 0.
    use_local_output : bool, optional
        Return the output as a plain tensor, whole on every rank (True, the default), or as a
        replicated DTensor.

    Examples
    --------
    In each rank of a ``torch.distributed`` job (``mesh = init_device_mesh("cpu", (2,))``)::

        class Table(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.randn(1000, 16))

            def forward(self, ids):
                return gatherx.gather(self.weight, ids)

        table = parallelize_module(Table(), mesh, RowwiseGatherParallel())
    """

    def __init__(self, *, weight: str = "weight", axis: int = 0, use_local_output: bool = True):
        super().__init__()
        self.weight = weight
        self.axis = axis
        self.use_local_output = use_local_output

    def _partition(self, name: str, module: torch.nn.Module, mesh: DeviceMesh) -> None:
        if name:  # the style applies to the module it is given, not to its children
            return
        table = getattr(module, self.weight, None)
        if not isinstance(table, torch.nn.Parameter):
            msg = (
                f"RowwiseGatherParallel: {type(module).__name__} has no parameter "
                f"{self.weight!r} to shard"
            )
            raise TypeError(msg)
        axis = self.axis % table.ndim
        sharded = distribute_tensor(table.data, mesh, [Shard(axis)])
        module.register_parameter(self.weight, torch.nn.Parameter(sharded, table.requires_grad))

    @staticmethod
    def _inputs(module: torch.nn.Module, inputs: Any, mesh: DeviceMesh) -> Any:
        return tuple(
            DTensor.from_local(x, mesh, [Replicate()], run_check=False)
            if isinstance(x, torch.Tensor) and not isinstance(x, DTensor)
            else x
            for x in inputs
        )

    def _outputs(self, module: torch.nn.Module, output: Any, mesh: DeviceMesh) -> Any:
        whole = output.redistribute(mesh, [Replicate()])
        return whole.to_local() if self.use_local_output else whole

    def _apply(self, module: torch.nn.Module, device_mesh: DeviceMesh) -> torch.nn.Module:
        if device_mesh.ndim != 1:
            msg = f"RowwiseGatherParallel takes a 1-D device mesh, got {device_mesh.ndim} dims"
            raise ValueError(msg)
        return distribute_module(module, device_mesh, self._partition, self._inputs,
                                 self._outputs)  # fmt: skip
