"""PyTorch beyond one process: DTensor data and indices over gloo ranks on 127.0.0.1, and
tensor subclasses. Oracle: ``torch.index_select`` and its autograd on the full tensors."""

from __future__ import annotations

import datetime
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
            results.append(f.read())
    return results


# ------------------------------------------------------------------ what each rank runs


def _equivalence(rank: int, world: int) -> str:
    """Every placement of data and indices on a 1-D mesh (2 ranks) or a 2-D one (2 x 2):
    values and gradients, as full tensors, equal index_select's on the full tensors."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,) if world == 2 else (2, world // 2))
    kinds = [Replicate(), Shard(0), Shard(1)]
    choices = [[k] for k in kinds] if mesh.ndim == 1 else [[a, b] for a in kinds for b in kinds]
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(8, 6, dtype=torch.float64, generator=gen)
    raw = torch.tensor([[0, 3, -1, 5], [-6, 2, 5, 1]])
    failures = []
    for data_pl in choices:
        for index_pl in choices:
            for axis in (0, 1, -1):
                for kind in ("dtensor", "numpy"):
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


SCENARIOS = {f.__name__[1:]: f for f in (_equivalence, _bad_index_everywhere, _refusals)}


# ------------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("world", [2, 4], ids=["mesh-2", "mesh-2x2"])
def test_dtensor_placements_match_index_select(world, tmp_path):
    results = _spawn("equivalence", world, tmp_path)
    assert results == ["'ok'"] * world, "\n".join(results)


def test_a_bad_index_raises_on_every_rank(tmp_path):
    results = _spawn("bad_index_everywhere", 2, tmp_path)
    assert results[0] == results[1]
    exact, device = results[0].strip("'").split("\\n")
    assert exact.startswith(
        "IndexError: gather: indices element out of data bounds, idx=6 at position (5,)"
    )
    assert device.startswith("RuntimeError: gather: indices element out of data bounds")


def test_refusals_name_the_fix(tmp_path):
    first, second = _spawn("refusals", 2, tmp_path)
    assert first == second
    lines = first.strip("'").split("\\n")
    assert "indices are a plain torch.Tensor; make them a DTensor" in lines[0]
    assert "the indices are a DTensor but the data is a plain torch.Tensor" in lines[1]
    assert "a DTensor holds no sparse tensor; pass sparse_grad=False" in lines[2]


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
