"""PyTorch beyond one process: DTensor data and indices over gloo ranks on 127.0.0.1, and
tensor subclasses. Oracle: ``torch.index_select`` and its autograd on the full tensors."""

from __future__ import annotations

import ast
import datetime
import gc
import os
import socket
import time
import traceback
from typing import Any

import numpy as np
import pytest
from support import need

torch = need("torch")
dist = need("torch.distributed")
mp = need("torch.multiprocessing")

import gatherx  # noqa: E402

#: Seconds a spawned group may take, start-up included, before the test fails (and kills it).
DEADLINE = 240
WAIT = datetime.timedelta(seconds=60)  # each collective's own bound


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, world: int, port: int, scenario: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=WAIT)
    try:
        result = SCENARIOS[scenario](rank, world)
    except Exception:
        result = "raised:\n" + traceback.format_exc()
    finally:
        # DDP and FSDP keep the group and its pending work in reference cycles; freed only
        # at exit, gloo's threads can outlive the interpreter and abort the process.
        gc.collect()
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
        f.write(repr(result))


def _spawn(scenario: str, world: int, tmp_path) -> list[Any]:
    """Run ``scenario`` on ``world`` ranks; each rank's result, within DEADLINE seconds."""
    out = str(tmp_path / scenario)
    ctx = mp.start_processes(_entry, args=(world, _free_port(), scenario, out), nprocs=world,
                             join=False, start_method="spawn")  # fmt: skip
    end = time.monotonic() + DEADLINE
    while not ctx.join(timeout=5):
        if time.monotonic() > end:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{scenario}: {world} ranks still running after {DEADLINE} s")
    results = []
    for rank in range(world):
        with open(f"{out}.{rank}", encoding="utf-8") as f:
            results.append(ast.literal_eval(f.read()))
    return results


# ------------------------------------------------------------------ what each rank runs


def _equivalence(rank: int, world: int) -> str:
    """Every placement of data and indices on a 1-D mesh (2 ranks) or a 2-D one (2 x 2):
    values and gradients, as full tensors, equal index_select's on the full tensors. Every
    data placement takes NumPy indices on every axis; with DTensor indices, every pair of
    placements on the 1-D mesh takes every axis, and on the 2-D mesh (81 pairs, four ranks)
    one axis each, in turn, so that each data placement meets every axis."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,) if world == 2 else (2, world // 2))
    kinds = [Replicate(), Shard(0), Shard(1)]
    choices = [[k] for k in kinds] if mesh.ndim == 1 else [[a, b] for a in kinds for b in kinds]
    axes = (0, 1, -1)
    runs = [(d, None, axis, "numpy") for d in choices for axis in axes]  # indices unplaced
    for a, d in enumerate(choices):
        for b, i in enumerate(choices):
            turn = axes if mesh.ndim == 1 else [axes[(a + b) % 3]]
            runs += [(d, i, axis, "dtensor") for axis in turn]
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(8, 6, dtype=torch.float64, generator=gen)
    raw = torch.tensor([[0, 3, -1, 5], [-6, 2, 5, 1]])
    failures = []
    for data_pl, index_pl, axis, kind in runs:
        size = table.shape[axis]
        ids = raw % size - (raw < 0) * size  # both signs, in range
        wrapped = ids % size
        case = f"data {data_pl} indices {index_pl} axis {axis} {kind}"
        data = distribute_tensor(table, mesh, data_pl).requires_grad_()
        given = (distribute_tensor(ids, mesh, index_pl) if kind == "dtensor"
                 else ids.numpy())  # fmt: skip
        out = gatherx.gather(data, given, axis=axis)
        full = table.clone().requires_grad_()
        want = torch.index_select(full, axis % 2, wrapped.reshape(-1))
        want = want.reshape(out.shape)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        if not isinstance(out, type(data)):
            failures.append(f"{case}: result {type(out).__name__}")
        elif not torch.equal(out.full_tensor(), want.detach()):
            failures.append(f"{case}: values")
        elif not torch.allclose(data.grad.full_tensor(), full.grad):
            failures.append(f"{case}: gradient")
    grad = distribute_tensor(torch.ones(2, 2, 4, dtype=torch.float64), mesh, choices[1])
    ids = distribute_tensor(torch.tensor([[0, 5], [-1, 5]]), mesh, choices[0])
    dense = gatherx.gather_grad((6, 4), ids, grad).full_tensor()
    want = torch.zeros(6, 4, dtype=torch.float64).index_add_(
        0, torch.tensor([0, 5, 5, 5]), torch.ones(4, 4, dtype=torch.float64)
    )
    if not torch.equal(dense, want):
        failures.append("gather_grad")
    return "ok" if not failures else "\n".join(failures)


def _bad_index_everywhere(rank: int, world: int) -> str:
    """One rank's shard holds the bad index; every rank raises the same IndexError."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    data = distribute_tensor(torch.arange(12.0).reshape(6, 2), mesh, [Replicate()])
    ids = distribute_tensor(torch.tensor([0, 1, 2, 3, 4, 6]), mesh, [Shard(0)])  # 6 on rank 1
    said = []
    try:
        gatherx.gather(data, ids)
        said.append("no error")
    except IndexError as err:
        said.append(f"IndexError: {err}")
    from gatherx import _policy

    with _policy.force("device"):  # an accelerator's policy: no host read, an assert
        try:
            gatherx.gather(data, ids)
            said.append("no error")
        except RuntimeError as err:
            said.append(f"RuntimeError: {err}")
    return "\n".join(said)


def _refusals(rank: int, world: int) -> str:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    data = distribute_tensor(torch.ones(4, 2), mesh, [Replicate()]).requires_grad_()
    ids = distribute_tensor(torch.tensor([0, -1]), mesh, [Replicate()])
    said = []
    for call in (
        lambda: gatherx.gather(data, torch.tensor([0])),
        lambda: gatherx.gather(torch.ones(4, 2), ids),
        lambda: gatherx.gather(data, ids, sparse_grad=True),
    ):
        try:
            call()
            said.append("no error")
        except TypeError as err:
            said.append(f"TypeError: {err}")
    return "\n".join(said)


def _row_sharded(rank: int, world: int) -> str:
    """A table sharded on the gathered axis: partial sums of the slices each rank holds (an
    all-reduce of the output, no all-gather of the table); the gradient stays sharded."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    mesh = init_device_mesh("cpu", (world,))
    gen = torch.Generator().manual_seed(1)
    table = torch.randn(11, 3, dtype=torch.float64, generator=gen)  # uneven shards: 6 and 5
    ids = torch.tensor([[10, -11, 5], [6, -1, 0]])
    said = []
    for axis in (0, 1):
        size = table.shape[axis]
        given = ids % size - (ids < 0) * size
        data = distribute_tensor(table, mesh, [Shard(axis)]).requires_grad_()
        with CommDebugMode() as comm:
            out = gatherx.gather(data, given.numpy(), axis=axis)
            whole = out.full_tensor()
            whole.pow(2).sum().backward()
        ops = {str(op).rsplit(".", 1)[-1]: n for op, n in comm.get_comm_counts().items()}
        full = table.clone().requires_grad_()
        want = torch.index_select(full, axis, (given % size).reshape(-1)).reshape(whole.shape)
        want.pow(2).sum().backward()
        said.append(
            f"axis {axis}: {out.placements == (Partial('sum'),)} "
            f"{torch.equal(whole, want.detach())} {data.grad.placements == (Shard(axis),)} "
            f"{torch.allclose(data.grad.full_tensor(), full.grad)} {sorted(ops)}"
        )
    plain = distribute_tensor(table, mesh, [Replicate()])
    said.append(str(torch.equal(gatherx.gather(plain, [3, -2]).full_tensor(), table[[3, 9]])))
    return "\n".join(said)


def _training(rank: int, world: int) -> str:
    """RowwiseGatherParallel on a model's own table trains as the same model in one process."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    from gatherx.torch import RowwiseGatherParallel

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = Table()
            self.head = torch.nn.Linear(4, 1, dtype=torch.float64)

        def forward(self, ids):
            return self.head(self.table(ids).mean(dim=1)).squeeze(-1)

    class Table(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(25, 4, dtype=torch.float64))

        def forward(self, ids):
            return gatherx.gather(self.weight, ids)

    torch.manual_seed(0)
    alone = Model()
    split = Model()
    split.load_state_dict(alone.state_dict())
    mesh = init_device_mesh("cpu", (world,))
    split = parallelize_module(split, mesh, {"table": RowwiseGatherParallel()})
    gen = torch.Generator().manual_seed(2)
    steps = []
    for model in (alone, split):
        gen.manual_seed(2)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        losses = []
        for _ in range(8):
            ids = torch.randint(-25, 25, (6, 3), generator=gen)
            target = torch.randn(6, dtype=torch.float64, generator=gen)
            loss = (model(ids) - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        steps.append(losses)
    close = all(abs(a - b) <= 1e-12 * max(1.0, abs(a)) for a, b in zip(*steps, strict=True))
    table = split.table.weight
    same = torch.allclose(table.full_tensor(), alone.table.weight, rtol=0, atol=1e-12)
    return f"{type(table).__name__} {table.placements} {close} {same}"


def _ddp_and_fsdp2(rank: int, world: int) -> str:
    """DDP and FSDP2 over a module that gathers from its own weight train as one process on
    the whole batch (each rank takes its part; both average the gradients)."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(25, 4, dtype=torch.float64))
            self.head = torch.nn.Linear(4, 1, dtype=torch.float64)

        def forward(self, ids):
            return self.head(gatherx.gather(self.weight, ids).mean(dim=1)).squeeze(-1)

    torch.manual_seed(0)
    start = Model().state_dict()
    said = []
    for kind, wrap in (("ddp", DistributedDataParallel), ("fsdp2", fully_shard)):
        models = [Model(), Model()]
        for m in models:
            m.load_state_dict(start)
        wrapped, alone = wrap(models[0]), models[1]
        opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (wrapped, alone)]
        gen = torch.Generator().manual_seed(5)
        mine = slice(2 * rank, 2 * rank + 2)
        for _ in range(5):
            ids = torch.randint(-25, 25, (2 * world, 3), generator=gen)
            target = torch.randn(2 * world, dtype=torch.float64, generator=gen)
            for model, opt, part in ((wrapped, opts[0], mine), (alone, opts[1], slice(None))):
                loss = (model(ids[part]) - target[part]).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        table = models[0].weight
        table = table.full_tensor() if kind == "fsdp2" else table
        same = torch.allclose(table.detach(), alone.weight.detach(), rtol=0, atol=1e-12)
        said.append(f"{kind} {same}")
    return ", ".join(said)


SCENARIOS = {
    f.__name__[1:]: f
    for f in (
        _equivalence,
        _bad_index_everywhere,
        _refusals,
        _row_sharded,
        _training,
        _ddp_and_fsdp2,
    )
}


# ------------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("world", [2, 4], ids=["mesh-2", "mesh-2x2"])
def test_dtensor_placements_match_index_select(world, tmp_path):
    results = _spawn("equivalence", world, tmp_path)
    assert results == ["ok"] * world, "\n".join(results)


def test_a_bad_index_raises_on_every_rank(tmp_path):
    results = _spawn("bad_index_everywhere", 2, tmp_path)
    assert results[0] == results[1]
    exact, device = results[0].split("\n")
    assert exact.startswith(
        "IndexError: gather: indices element out of data bounds, idx=6 at position (5,)"
    )
    assert device.startswith("RuntimeError: gather: indices element out of data bounds")


def test_refusals_name_the_fix(tmp_path):
    first, second = _spawn("refusals", 2, tmp_path)
    assert first == second
    lines = first.split("\n")
    assert "indices are a plain torch.Tensor; make them a DTensor" in lines[0]
    assert "the indices are a DTensor but the data is a plain torch.Tensor" in lines[1]
    assert "a DTensor holds no sparse tensor; pass sparse_grad=False" in lines[2]


def test_a_table_sharded_on_the_axis_sends_the_output_not_the_table(tmp_path):
    first, second = _spawn("row_sharded", 2, tmp_path)
    assert first == second
    lines = first.split("\n")
    for axis, line in enumerate(lines[:2]):
        assert line == f"axis {axis}: True True True True ['all_reduce']", line
    assert lines[2] == "True"


def test_rowwise_gather_parallel_trains_as_one_process(tmp_path):
    results = _spawn("training", 2, tmp_path)
    assert results == ["DTensor (Shard(dim=0),) True True"] * 2, results


def test_ddp_and_fsdp2_train_as_one_process(tmp_path):
    assert _spawn("ddp_and_fsdp2", 2, tmp_path) == ["ddp True, fsdp2 True"] * 2


# ---------------------------------------------------------------------- tensor subclasses


class Tagged(torch.Tensor):
    """A ``__torch_function__`` subclass, as users write them to tag tensors."""


class Wrapper(torch.Tensor):
    """A wrapper subclass whose values live in an inner tensor, not in its own storage."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)

    def __init__(self, inner):
        self.inner = inner

    def __tensor_flatten__(self):
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return Wrapper(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"gatherx ran {func} on the wrapper")


def test_a_torch_function_subclass_keeps_its_type():
    data = torch.arange(12.0).reshape(4, 3).as_subclass(Tagged)
    for ids in (torch.tensor([3, -1]).as_subclass(Tagged), [3, -1], torch.tensor([3, -1])):
        out = gatherx.gather(data, ids, axis=0)
        assert type(out) is type(torch.index_select(data, 0, torch.tensor([3, 3])))
        np.testing.assert_array_equal(out.as_subclass(torch.Tensor).numpy(), [[9, 10, 11]] * 2)


def test_a_wrapper_subclass_is_refused_by_name():
    wrapped = Wrapper(torch.ones(4, 2))
    with pytest.raises(TypeError, match=r"data of type test_torch_distributed\.Wrapper|Wrapper"):
        gatherx.gather(wrapped, [0])
    with pytest.raises(TypeError, match="wrapper tensor subclass"):
        gatherx.gather(torch.ones(4, 2), Wrapper(torch.tensor([0])))
