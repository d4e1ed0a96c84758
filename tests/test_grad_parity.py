"""Gradient parity: torch and JAX autodiff through gatherx, gather_grad and the native ops agree."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same, need, to_numpy

import gatherx

torch = need("torch")
jax = need("jax")
jnp = need("jax.numpy")
xps = need("array_api_strict")

pytestmark = pytest.mark.parity

# Seeds of random problems: shape (rank 1-4, dims 0-5), axis (either sign), index shape
# (rank 0-3) and values drawn from [-s, s-1] from a pool small enough to repeat.
SEEDS = range(8)


def _problem(seed: int) -> tuple[tuple[int, ...], int, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 6, rank))
    axis = int(rng.integers(-rank, rank))
    if seed == 0 and rank > 1:  # a zero-size dim off the gather axis
        shape = tuple(0 if k == (axis + 1) % rank else d for k, d in enumerate(shape))
    size = shape[axis]
    idx_shape = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(0, 4))))
    pool = rng.integers(-size, size, 2)  # two values: duplicates guaranteed
    idx = rng.choice(pool, idx_shape).astype(np.int64)
    data = rng.standard_normal(shape).astype(np.float32)
    out_shape = (*shape[: axis % rank], *idx_shape, *shape[axis % rank + 1 :])
    # Small integers as the cotangent: every sum is exact, in any order and precision.
    cot = rng.integers(-4, 5, out_shape).astype(np.float32)
    return shape, axis, idx, data, cot


def _oracle(shape: tuple[int, ...], axis: int, idx: np.ndarray, cot: np.ndarray) -> np.ndarray:
    axis %= len(shape)
    out = np.zeros(shape, np.float64)
    flat = np.where(idx < 0, idx + shape[axis], idx).reshape(-1)
    g = cot.astype(np.float64).reshape((*shape[:axis], flat.size, *shape[axis + 1 :]))
    np.add.at(np.moveaxis(out, axis, 0), flat, np.moveaxis(g, axis, 0))
    return out.astype(cot.dtype)


def _torch_grad(take, data, axis, idx, cot) -> np.ndarray:
    d = torch.tensor(data, requires_grad=True)
    (torch.sum(take(d, axis, torch.as_tensor(idx)) * torch.as_tensor(cot))).backward()
    return to_numpy(d.grad)


def _torch_native(d, axis, index):
    axis %= d.ndim
    index = torch.where(index < 0, index + d.shape[axis], index)  # index_select wants [0, s)
    out = torch.index_select(d, axis, index.reshape(-1))
    return out.reshape((*d.shape[:axis], *index.shape, *d.shape[axis + 1 :]))


def _jax_grad(take, data, axis, idx, cot) -> np.ndarray:
    loss = lambda d, i: jnp.sum(take(d, i, axis=axis) * cot)  # noqa: E731
    return to_numpy(jax.jit(jax.grad(loss))(jnp.asarray(data), jnp.asarray(idx)))


@pytest.mark.parametrize("seed", SEEDS)
def test_every_gradient_agrees(seed: int) -> None:
    shape, axis, idx, data, cot = _problem(seed)
    expected = _oracle(shape, axis, idx, cot)
    grads = {
        "torch autograd via gatherx": _torch_grad(
            lambda d, a, i: gatherx.gather(d, i, axis=a), data, axis, idx, cot
        ),
        "torch.index_select autograd": _torch_grad(_torch_native, data, axis, idx, cot),
        "jax.grad via gatherx": _jax_grad(gatherx.gather, data, axis, idx, cot),
        "gather_grad numpy": gatherx.gather_grad(shape, idx, cot, axis=axis),
        "gather_grad array-api-strict": to_numpy(
            gatherx.gather_grad(shape, xps.asarray(idx), xps.asarray(cot), axis=axis)
        ),
        "gather_grad torch": to_numpy(
            gatherx.gather_grad(shape, torch.as_tensor(idx), torch.as_tensor(cot), axis=axis)
        ),
        "gather_grad jax": to_numpy(
            gatherx.gather_grad(shape, jnp.asarray(idx), jnp.asarray(cot), axis=axis)
        ),
    }
    if shape[axis] != 0:  # jnp.take returns the wrong shape on an empty axis (jax 0.10)
        grads["jax.grad of jnp.take"] = _jax_grad(jnp.take, data, axis, idx, cot)
    for name, got in grads.items():
        try:
            assert_same(got, expected)
        except AssertionError as exc:
            msg = f"{name} disagrees with np.add.at: {exc}"
            raise AssertionError(msg) from None


# torch's forward-mode AD scripts a helper on first use, which warns (torch 2.13).
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("seed", SEEDS)
def test_forward_and_jvp_agree(seed: int) -> None:
    shape, axis, idx, data, _ = _problem(seed)
    tangent = np.random.default_rng(seed + 100).standard_normal(shape).astype(np.float32)
    expected = np.take(data, idx, axis=axis)
    t_expected = np.take(tangent, idx, axis=axis)

    f = lambda d: gatherx.gather(d, jnp.asarray(idx), axis=axis)  # noqa: E731
    out, t_out = jax.jvp(f, (jnp.asarray(data),), (jnp.asarray(tangent),))
    assert_same(out, expected)
    assert_same(t_out, t_expected)

    fn = lambda d: gatherx.gather(d, torch.as_tensor(idx), axis=axis)  # noqa: E731
    out, t_out = torch.func.jvp(fn, (torch.tensor(data),), (torch.tensor(tangent),))
    assert_same(out, expected)
    assert_same(t_out, t_expected)


def test_jax_training_trajectory_matches_jnp_take() -> None:
    """A learned table read through gather, trained by SGD, follows the jnp.take model."""
    rng = np.random.default_rng(0)
    vocab, dim, batch, steps, lr = 11, 4, 16, 20, 0.5
    table0 = rng.standard_normal((vocab, dim)).astype(np.float32)
    head0 = rng.standard_normal((dim, 2)).astype(np.float32)
    tokens = rng.integers(-vocab, vocab, (steps, batch, 3))  # duplicates and negatives
    targets = rng.standard_normal((steps, batch, 2)).astype(np.float32)

    def trajectory(take) -> list[tuple[np.ndarray, np.ndarray, float]]:
        def loss(params, tok, tgt):
            table, head = params
            emb = jnp.mean(take(table, tok, axis=0), axis=1)  # (batch, dim)
            return jnp.mean((jnp.tanh(emb) @ head - tgt) ** 2)

        @jax.jit
        def step(params, tok, tgt):
            value, grads = jax.value_and_grad(loss)(params, tok, tgt)
            return jax.tree.map(lambda p, g: p - lr * g, params, grads), value

        params, history = (jnp.asarray(table0), jnp.asarray(head0)), []
        for t in range(steps):
            params, value = step(params, jnp.asarray(tokens[t]), jnp.asarray(targets[t]))
            history.append((to_numpy(params[0]), to_numpy(params[1]), float(value)))
        return history

    got, expected = trajectory(gatherx.gather), trajectory(jnp.take)
    assert expected[-1][2] < expected[0][2]  # it does learn
    for (table, head, value), (e_table, e_head, e_value) in zip(got, expected, strict=True):
        np.testing.assert_allclose(table, e_table, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(head, e_head, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value, e_value, rtol=1e-5)
