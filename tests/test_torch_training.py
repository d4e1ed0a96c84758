"""Training through gatherx.gather follows the native-op trajectory; the Gather nn.Module."""

from __future__ import annotations

import copy

import pytest
from support import need

torch = need("torch")

import gatherx  # noqa: E402
from gatherx.torch import Gather  # noqa: E402

VOCAB, DIM, STEPS = 23, 6, 20


class _Bag(torch.nn.Module):
    """A learned table read at token ids, mean-pooled, then a linear head."""

    def __init__(self, lookup) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(VOCAB, DIM, dtype=torch.float64))
        self.head = torch.nn.Linear(DIM, 3, dtype=torch.float64)
        self.lookup = lookup

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.lookup(self.table, ids)  # (batch, length, DIM)
        return self.head(torch.tanh(rows).mean(dim=1))


def _gatherx_lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return gatherx.gather(table, ids, axis=0)


def _native_lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.index_select(table, 0, ids.reshape(-1)).reshape(*ids.shape, table.shape[1])


def _batches():
    gen = torch.Generator().manual_seed(11)
    # Short vocabulary, long rows: many repeated ids, so gradients accumulate. A few fixed
    # batches, cycled, so the loss visibly falls.
    data = [
        (torch.randint(0, VOCAB, (8, 12), generator=gen), torch.randint(0, 3, (8,), generator=gen))
        for _ in range(4)
    ]
    for step in range(STEPS):
        yield data[step % len(data)]


def _train(model: torch.nn.Module, make_opt) -> tuple[list[float], dict[str, torch.Tensor]]:
    opt = make_opt(model.parameters())
    losses = []
    for ids, labels in _batches():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


OPTIMIZERS = {
    "sgd-momentum": lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.05),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("lookup", ["function", "module"])
def test_trajectory_matches_index_select(optimizer, lookup):
    torch.manual_seed(0)
    reference = _Bag(_native_lookup)
    model = copy.deepcopy(reference)
    model.lookup = _gatherx_lookup if lookup == "function" else Gather(axis=0)
    losses, params = _train(model, OPTIMIZERS[optimizer])
    ref_losses, ref_params = _train(reference, OPTIMIZERS[optimizer])
    assert sum(losses[-4:]) < sum(losses[:4])  # it trained at all
    torch.testing.assert_close(losses, ref_losses, rtol=1e-12, atol=1e-12)
    for name, value in ref_params.items():
        torch.testing.assert_close(params[name], value, rtol=1e-12, atol=1e-12, msg=name)


def test_sequential_with_fixed_indices_trains_like_native_column_selection():
    cols = [4, 0, -1, 4]
    torch.manual_seed(1)
    body = torch.nn.Linear(5, 5, dtype=torch.float64)
    head = torch.nn.Linear(4, 1, dtype=torch.float64)
    model = torch.nn.Sequential(copy.deepcopy(body), torch.nn.Tanh(), Gather(axis=1, indices=cols),
                                copy.deepcopy(head))  # fmt: skip
    index = torch.tensor(cols)

    class Native(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, index]

    reference = torch.nn.Sequential(body, torch.nn.Tanh(), Native(), head)
    gen = torch.Generator().manual_seed(2)
    data = [torch.randn(7, 5, generator=gen, dtype=torch.float64) for _ in range(10)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, reference)]
    for x in data:
        for m, opt in zip((model, reference), opts, strict=True):
            opt.zero_grad()
            (m(x) ** 2).mean().backward()
            opt.step()
    for p, p_ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, p_ref, rtol=1e-12, atol=1e-12)


# The module's own contract.
def test_module_fixed_indices_are_a_buffer():
    layer = Gather(axis=-1, indices=[[2, 0]])
    assert layer.indices.dtype == torch.int64
    assert torch.equal(layer.state_dict()["indices"], torch.tensor([[2, 0]]))
    x = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(layer(x), x[:, [[2, 0]]])
    assert layer.to(torch.float64).indices.dtype == torch.int64  # ints are not cast
    assert "axis=-1, opset=13, indices=(1, 2)" in repr(layer)


def test_module_empty_list_of_fixed_indices_is_int():
    x = torch.ones(3, 2)
    assert Gather(indices=[])(x).shape == (0, 2)


def test_module_argument_errors():
    x = torch.ones(3, 2)
    with pytest.raises(TypeError, match="forward needs indices"):
        Gather()(x)
    with pytest.raises(TypeError, match="fixed at construction"):
        Gather(indices=[0])(x, [1])
    with pytest.raises(ValueError, match="opset must be >= 1"):
        Gather(opset=0)
    with pytest.raises(TypeError, match="axis must be an int"):
        Gather(axis=1.0)
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        Gather(indices=[0.5])
    with pytest.raises(IndexError, match=r"idx=3 at position \(1,\) of indices"):
        Gather(axis=0)(x, torch.tensor([0, 3]))
