"""Every JAX transform through gatherx.gather, against np.take, np.add.at and native jnp.take."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same, need, to_numpy

import gatherx

jax = need("jax")
jnp = need("jax.numpy")
checkify = need("jax.experimental.checkify")
jax_test_util = need("jax.test_util")

X64 = bool(jax.config.jax_enable_x64)
#: The widest float JAX creates in this mode: float64 only with JAX_ENABLE_X64=1.
FLOAT = np.float64 if X64 else np.float32
TOL = {"rtol": 1e-12 if X64 else 1e-5, "atol": 1e-12 if X64 else 1e-5}

# (data shape, indices, axis): scalar, 1-D, 2-D and 3-D indices, duplicates, negatives,
# negative axes and zero-size dims.
CASES = [
    ((5,), 3, 0),
    ((5, 3), [0, 4, -1, 4, -5], 0),
    ((4, 3), [[0, 2], [-1, 2]], -1),
    ((2, 5, 3), [[[1, 1], [4, 0]], [[-2, 3], [1, 1]]], 1),
    ((3, 4, 2), [3, -4, 3], -2),
    ((3, 0), [2, 0], 0),
    ((0, 3), np.zeros((0, 2), np.int64), 0),
]
IDS = ["scalar", "1d-dup-neg", "2d-axis-1", "3d-idx", "neg-axis", "zero-cols", "empty-axis"]


def _rand(shape: tuple[int, ...], seed: int = 0, dtype: type = FLOAT) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _scatter_oracle(
    shape: tuple[int, ...], idx: np.ndarray, cot: np.ndarray, axis: int
) -> np.ndarray:
    """The VJP of np.take by np.add.at on host copies, in float64 then cast to ``cot``'s dtype."""
    axis %= len(shape)
    out = np.zeros(shape, np.float64)
    idx = np.where(idx < 0, idx + shape[axis], idx).reshape(-1)
    moved = np.moveaxis(out, axis, 0)
    g = cot.astype(np.float64).reshape((*shape[:axis], idx.size, *shape[axis + 1 :]))
    np.add.at(moved, idx, np.moveaxis(g, axis, 0))
    return out.astype(cot.dtype)


def _jacobian_oracle(shape: tuple[int, ...], idx: np.ndarray, axis: int) -> np.ndarray:
    """d gather / d data as a dense array: out.shape + data.shape, one 1 per output element."""
    n = int(np.prod(shape))
    flat = np.take(np.arange(n).reshape(shape), idx, axis=axis)
    jac = np.zeros((flat.size, n), FLOAT)
    jac[np.arange(flat.size), flat.reshape(-1)] = 1
    return jac.reshape(*flat.shape, *shape)


def _gx(axis: int):
    return lambda d, i: gatherx.gather(d, i, axis=axis)


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_jit_forward_matches_numpy(shape, indices, axis, index_dtype) -> None:
    data = _rand(shape)
    idx = np.asarray(indices, index_dtype)
    out = jax.jit(_gx(axis))(jnp.asarray(data), jnp.asarray(idx))
    assert_same(out, np.take(data, idx, axis=axis))


def test_jit_traces_indices_as_ordinary_arguments() -> None:
    traces = []

    def f(d: jax.Array, i: jax.Array) -> jax.Array:
        traces.append(i)
        return gatherx.gather(d, i)

    data = _rand((5, 2))
    jitted = jax.jit(f)
    for idx in ([0, 1, 2], [4, -1, 4], [-5, 3, 0]):
        got = jitted(jnp.asarray(data), jnp.asarray(idx, jnp.int32))
        assert_same(got, np.take(data, idx, axis=0))
    assert len(traces) == 1
    assert isinstance(traces[0], jax.core.Tracer)
    # Shapes alone are enough to lower it: no index value is ever needed at trace time.
    spec = jax.ShapeDtypeStruct((3,), jnp.int32)
    assert "gather" in jax.jit(f).lower(jnp.asarray(data), spec).as_text()


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_grad_matches_add_at_and_native_take(shape, indices, axis) -> None:
    data, idx = _rand(shape), np.asarray(indices)
    cot = _rand(np.take(data, idx, axis=axis).shape, seed=1)

    def loss(take):
        return lambda d: jnp.sum(take(d, jnp.asarray(idx), axis=axis) * cot)

    got = jax.jit(jax.grad(loss(gatherx.gather)))(jnp.asarray(data))
    assert_same(got, _scatter_oracle(shape, idx, cot, axis), exact=False, **TOL)
    if shape[axis] != 0:  # jnp.take drops the index dims when the axis is empty (jax 0.10)
        native = jax.grad(loss(jnp.take))(jnp.asarray(data))
        assert_same(got, to_numpy(native), exact=False, **TOL)


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_vjp_is_scatter_add(shape, indices, axis) -> None:
    data, idx = _rand(shape), np.asarray(indices)
    cot = _rand(np.take(data, idx, axis=axis).shape, seed=2)
    out, vjp = jax.vjp(lambda d: gatherx.gather(d, jnp.asarray(idx), axis=axis), jnp.asarray(data))
    assert_same(out, np.take(data, idx, axis=axis))
    (got,) = vjp(jnp.asarray(cot))
    assert_same(got, _scatter_oracle(shape, idx, cot, axis), exact=False, **TOL)


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_jvp_gathers_the_tangent(shape, indices, axis) -> None:
    data, tangent, idx = _rand(shape), _rand(shape, seed=3), np.asarray(indices)
    f = lambda d: gatherx.gather(d, jnp.asarray(idx), axis=axis)  # noqa: E731
    out, t_out = jax.jit(lambda d, t: jax.jvp(f, (d,), (t,)))(data, tangent)
    assert_same(out, np.take(data, idx, axis=axis))
    assert_same(t_out, np.take(tangent, idx, axis=axis))


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES[:5], ids=IDS[:5])
@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_is_one_hot(shape, indices, axis, jac) -> None:
    idx = np.asarray(indices)
    f = lambda d: gatherx.gather(d, jnp.asarray(idx), axis=axis)  # noqa: E731
    got = jax.jit(getattr(jax, jac)(f))(jnp.asarray(_rand(shape)))
    assert_same(got, _jacobian_oracle(shape, idx, axis))


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES[:5], ids=IDS[:5])
def test_hessian_matches_native_take(shape, indices, axis) -> None:
    data, idx = jnp.asarray(_rand(shape)), jnp.asarray(indices)

    def loss(take):
        return lambda d: jnp.sum(jnp.sin(take(d, idx, axis=axis)) * take(d, idx, axis=axis) ** 2)

    got = jax.jit(jax.hessian(loss(gatherx.gather)))(data)
    native = jax.jit(jax.hessian(loss(jnp.take)))(data)
    assert_same(got, to_numpy(native), exact=False, **TOL)


# Finite differences are slow in JAX's eager mode: a few cases that cover duplicates,
# negatives (-1 and s-1 on one row), 3-D indices and a middle axis; the rest is covered above.
@pytest.mark.parametrize(
    ("shape", "indices", "axis"), [CASES[i] for i in (1, 3)], ids=[IDS[i] for i in (1, 3)]
)
def test_check_grads_second_order(shape, indices, axis) -> None:
    idx = jnp.asarray(indices)
    # check_grads feeds NumPy arrays to its finite differences; gather wants JAX data.
    f = lambda d: jnp.tanh(gatherx.gather(jnp.asarray(d), idx, axis=axis))  # noqa: E731
    jax_test_util.check_grads(f, (_rand(shape, seed=4),), order=2, modes=("fwd", "rev"))


def test_vmap_over_data() -> None:
    batch, idx = _rand((3, 4, 5)), np.array([[4, -1], [0, 4]])
    got = jax.vmap(_gx(1), in_axes=(0, None))(batch, jnp.asarray(idx))
    assert_same(got, np.stack([np.take(b, idx, axis=1) for b in batch]))
    # Batch axis in the middle of the data, output batch axis last.
    idx = np.array([2, -3, 2])
    got = jax.vmap(_gx(0), in_axes=(1, None), out_axes=-1)(batch, jnp.asarray(idx))
    assert_same(got, np.stack([np.take(batch[:, k], idx, axis=0) for k in range(4)], axis=-1))


def test_vmap_over_indices() -> None:
    data = _rand((6, 2))
    idx = np.array([[0, 5, -6], [1, 1, 1], [-1, 2, 0], [3, 3, -3]], np.int32)
    got = jax.vmap(_gx(0), in_axes=(None, 0))(jnp.asarray(data), jnp.asarray(idx))
    assert_same(got, np.stack([np.take(data, i, axis=0) for i in idx]))
    # Scalar indices per batch element.
    got = jax.vmap(_gx(1), in_axes=(None, 0))(jnp.asarray(data), jnp.asarray([1, -1, 0]))
    assert_same(got, np.stack([np.take(data, i, axis=1) for i in (1, -1, 0)]))


def test_vmap_over_data_and_indices_and_per_example_grads() -> None:
    batch, idx = _rand((4, 5, 3)), np.array([[0, 0], [4, -1], [2, 3], [-5, -5]])
    got = jax.jit(jax.vmap(_gx(0)))(batch, jnp.asarray(idx))
    assert_same(got, np.stack([np.take(b, i, axis=0) for b, i in zip(batch, idx, strict=True)]))

    loss = lambda d, i: jnp.sum(gatherx.gather(d, i) ** 2)  # noqa: E731
    grads = jax.vmap(jax.grad(loss))(batch, jnp.asarray(idx))
    for g, b, i in zip(grads, batch, idx, strict=True):
        cot = 2 * np.take(b, i, axis=0)
        assert_same(g, _scatter_oracle(b.shape, i, cot, 0), exact=False, **TOL)


@pytest.mark.parametrize(("shape", "indices", "axis"), CASES, ids=IDS)
def test_linear_transpose_is_scatter_add(shape, indices, axis) -> None:
    idx = np.asarray(indices)
    cot = _rand(np.take(np.zeros(shape), idx, axis=axis).shape, seed=5)
    f = lambda d: gatherx.gather(d, jnp.asarray(idx), axis=axis)  # noqa: E731
    (got,) = jax.linear_transpose(f, jax.ShapeDtypeStruct(shape, FLOAT))(jnp.asarray(cot))
    assert_same(got, _scatter_oracle(shape, idx, cot, axis), exact=False, **TOL)


@pytest.mark.parametrize("errors", ["index_checks", "all_checks"])
@pytest.mark.parametrize(
    ("shape", "bad", "opset"),
    [((4, 3), 4, 13), ((4, 3), -5, 13), ((4, 3), 2**31 - 1, 13), ((4, 3), -1, 10), ((0, 3), 0, 13)],
    ids=["past-end", "below-minus-size", "int32-max", "negative-before-opset-11", "empty-axis"],
)
def test_checkify_reports_traced_out_of_bounds(shape, bad, opset, errors) -> None:
    f = jax.jit(lambda d, i: gatherx.gather(d, i, opset=opset))
    checked = checkify.checkify(f, errors=getattr(checkify, errors))
    data = jnp.zeros(shape, FLOAT)
    err, _ = checked(data, jnp.asarray([0, bad, 0], jnp.int32))
    assert err.get() is not None
    assert "out-of-bounds" in err.get()
    with pytest.raises(checkify.JaxRuntimeError, match="out-of-bounds"):
        err.throw()


@pytest.mark.parametrize("bad", [3, -4, 2**31 - 1])
def test_checkify_reports_a_traced_scalar_index(bad) -> None:
    checked = checkify.checkify(jax.jit(_gx(1)), errors=checkify.index_checks)
    data = jnp.zeros((2, 3), FLOAT)
    err, _ = checked(data, jnp.asarray(bad, jnp.int32))
    assert err.get() is not None
    assert f"index {bad} is out of bounds for axis 1 with size 3" in err.get()
    err, out = checked(data + 1, jnp.asarray(-3, jnp.int32))
    assert err.get() is None
    assert_same(out, np.ones(2, FLOAT))


def test_checkify_passes_in_bounds_indices() -> None:
    checked = checkify.checkify(jax.jit(_gx(0)), errors=checkify.index_checks)
    data = _rand((4, 3))
    err, out = checked(jnp.asarray(data), jnp.asarray([0, 3, -1, -4]))
    assert err.get() is None
    assert_same(out, np.take(data, [0, 3, -1, -4], axis=0))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool", "complex64"])
def test_jit_traced_out_of_bounds_fills_never_wraps(dtype) -> None:
    """Bad traced indices read lax's fill (NaN, the dtype's min/max, True), not a nearby row."""
    data = np.arange(12).reshape(4, 3).astype(dtype)
    idx = np.array([4, -5, 1, 2**31 - 1, -(2**31), -1], np.int32)
    got = to_numpy(jax.jit(_gx(0))(jnp.asarray(data), jnp.asarray(idx)))
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got[[2, 5]], data[[1, -1]])
    bad = got[[0, 1, 3, 4]]
    kind = np.dtype(dtype).kind
    if kind in "fc":
        assert np.isnan(bad).all()
    elif kind == "i":
        assert (bad == np.iinfo(dtype).min).all()
    elif kind == "u":
        assert (bad == np.iinfo(dtype).max).all()
    else:
        assert bad.all()


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool", "complex64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_jit_traced_scalar_index_slices_or_fills(dtype, axis) -> None:
    """A scalar index takes one slice; a bad traced one reads the same fill as a gather."""
    data = np.arange(24).reshape(4, 3, 2).astype(dtype)
    size = data.shape[axis]
    f = jax.jit(_gx(axis))
    for good in (0, size - 1, -1, -size):
        got = to_numpy(f(jnp.asarray(data), jnp.asarray(good, jnp.int32)))
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got, np.take(data, good, axis=axis))
    for bad in (size, -size - 1, 2**31 - 1, -(2**31)):
        got = to_numpy(f(jnp.asarray(data), jnp.asarray(bad, jnp.int32)))
        # oracle: jnp.take in fill mode, whose own wrap leaves these indices out of range
        want = to_numpy(jnp.take(jnp.asarray(data), bad, axis=axis, mode="fill"))
        np.testing.assert_array_equal(got, want)
        assert got.shape == want.shape


def test_jit_traced_scalar_index_gradients_and_vmap() -> None:
    data = _rand((4, 3))
    loss = lambda d, i: jnp.nansum(gatherx.gather(d, i, axis=1) * 2)  # noqa: E731
    grad = jax.jit(jax.grad(loss))
    for index, column in ((2, 2), (-1, 2), (3, None), (-4, None)):
        got = grad(jnp.asarray(data), jnp.asarray(index, jnp.int32))
        expected = np.zeros((4, 3), data.dtype)
        if column is not None:
            expected[:, column] = 2
        assert_same(got, expected)
    # vmap over scalar indices, a bad one among them: the batch is gathered, the bad one filled
    many = jnp.asarray([0, -1, 3, 1], jnp.int32)
    got = to_numpy(jax.jit(jax.vmap(lambda i: gatherx.gather(jnp.asarray(data), i, axis=1)))(many))
    np.testing.assert_array_equal(got[[0, 1, 3]], data[:, [0, -1, 1]].T)
    assert np.isnan(got[2]).all()


def test_jit_traced_out_of_bounds_gets_no_gradient() -> None:
    idx = jnp.asarray([4, 1, -5, 1], jnp.int32)
    loss = lambda d, i: jnp.nansum(gatherx.gather(d, i))  # noqa: E731
    got = jax.jit(jax.grad(loss))(jnp.ones((4, 2), FLOAT), idx)
    expected = np.zeros((4, 2), FLOAT)
    expected[1] = 2
    assert_same(got, expected)


def test_concrete_out_of_bounds_raises_index_error() -> None:
    data = jnp.zeros((4, 3), FLOAT)
    with pytest.raises(IndexError, match=r"idx=4 at position \(1,\)"):
        gatherx.gather(data, jnp.asarray([0, 4]))
    with pytest.raises(IndexError, match="idx=-5"):
        gatherx.gather(data, jnp.asarray([-5]))
    # Indices closed over by a jitted function are concrete: checked at trace time.
    idx = jnp.asarray([3])
    with pytest.raises(IndexError, match="idx=3"):
        jax.jit(lambda d: gatherx.gather(d, idx, axis=1))(data)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_grad_keeps_the_data_dtype(dtype) -> None:
    if dtype == "float64" and not X64:
        # Without x64 JAX has no float64 arrays: asking for one yields float32 (and a warning).
        with pytest.warns(UserWarning, match="float64"):
            assert jnp.zeros(2, dtype).dtype == jnp.float32
        return
    dtype = jnp.dtype(dtype)
    idx = jnp.asarray([0, 2, 2, -1])
    data = jnp.asarray(np.arange(12.0).reshape(4, 3), dtype)
    loss = lambda d: jnp.sum(gatherx.gather(d, idx).astype(jnp.float32) ** 2)  # noqa: E731
    got = jax.jit(jax.grad(loss))(data)
    cot = 2 * np.take(np.arange(12.0).reshape(4, 3), [0, 2, 2, -1], axis=0)
    # Small integers: exact in every float type, so the oracle is exact too.
    assert_same(got, _scatter_oracle((4, 3), np.asarray(idx), cot, 0).astype(to_numpy(data).dtype))


def test_complex_vjp_keeps_dtype() -> None:
    ctype = np.complex128 if X64 else np.complex64
    data = (_rand((3, 2)) + 1j * _rand((3, 2), seed=1)).astype(ctype)
    cot = (_rand((4, 2), seed=2) - 1j * _rand((4, 2), seed=3)).astype(ctype)
    idx = np.array([1, -1, 1, 0])
    _, vjp = jax.vjp(lambda d: gatherx.gather(d, jnp.asarray(idx)), jnp.asarray(data))
    expected = np.zeros((3, 2), ctype)
    np.add.at(expected, idx, cot)
    assert_same(vjp(jnp.asarray(cot))[0], expected, exact=False, **TOL)


def test_default_dtypes_follow_x64_mode() -> None:
    out = gatherx.gather(jnp.asarray(np.arange(6.0).reshape(3, 2)), [2, 0])
    assert out.dtype == (jnp.float64 if X64 else jnp.float32)
    grad = jax.grad(lambda d: gatherx.gather(d, 1).sum())(jnp.asarray(np.ones(3)))
    assert grad.dtype == out.dtype


# Traced indices pass through the checkify marker before the gather: every transform must
# see through it (its own tests above use mostly concrete, host-checked indices).
TRACED = [((5, 3), [0, 4, -1, 4, -5], 0), ((2, 5, 3), [[1, -2], [4, 0]], 1)]


@pytest.mark.parametrize(("shape", "indices", "axis"), TRACED)
def test_traced_indices_jvp_and_index_tangent(shape, indices, axis) -> None:
    data, tangent, idx = _rand(shape), _rand(shape, seed=6), np.asarray(indices)

    @jax.jit
    def both(d, t, i):
        f = lambda d, i: gatherx.gather(d, i, axis=axis)  # noqa: E731
        # An integer input's tangent is float0: the output tangent comes from the data alone.
        return jax.jvp(f, (d, i), (t, np.zeros(i.shape, jax.dtypes.float0)))

    out, t_out = both(data, tangent, jnp.asarray(idx))
    assert_same(out, np.take(data, idx, axis=axis))
    assert_same(t_out, np.take(tangent, idx, axis=axis))


@pytest.mark.parametrize(("shape", "indices", "axis"), TRACED)
def test_traced_indices_linear_transpose_and_grad(shape, indices, axis) -> None:
    idx = np.asarray(indices)
    cot = _rand(np.take(np.zeros(shape), idx, axis=axis).shape, seed=7)
    spec = jax.ShapeDtypeStruct(shape, FLOAT)

    @jax.jit
    def transposed(c, i):
        f = lambda d: gatherx.gather(d, i, axis=axis)  # noqa: E731
        return jax.linear_transpose(f, spec)(c)[0]

    want = _scatter_oracle(shape, idx, cot, axis)
    assert_same(transposed(jnp.asarray(cot), jnp.asarray(idx)), want, exact=False, **TOL)
    loss = lambda d, i: jnp.sum(gatherx.gather(d, i, axis=axis) * cot)  # noqa: E731
    got = jax.jit(jax.grad(loss))(jnp.asarray(_rand(shape)), jnp.asarray(idx))
    assert_same(got, want, exact=False, **TOL)


def test_export_round_trip_with_traced_indices() -> None:
    export = need("jax.export")
    f = jax.jit(lambda d, i: gatherx.gather(d, i, axis=1))
    specs = (jax.ShapeDtypeStruct((3, 5), FLOAT), jax.ShapeDtypeStruct((4,), jnp.int32))
    exported = export.deserialize(export.export(f)(*specs).serialize())
    assert "custom_call" not in exported.mlir_module()  # the marker lowers to nothing
    data, idx = _rand((3, 5)), np.array([0, 4, -1, -5], np.int32)
    assert_same(exported.call(jnp.asarray(data), jnp.asarray(idx)), np.take(data, idx, axis=1))
    got = to_numpy(exported.call(jnp.asarray(data), jnp.asarray([1, 5, -6, 2], jnp.int32)))
    assert np.isnan(got[:, [1, 2]]).all()
    np.testing.assert_array_equal(got[:, [0, 3]], data[:, [1, 2]])


def test_index_marker_jvp_rule() -> None:
    """JAX never asks an integer input for a tangent (float0 tangents stay symbolic zeros),
    so the marker's jvp rule is called here by hand, as JAX would (vmap over indices, above,
    runs its batching rule)."""
    ad = need("jax.interpreters.ad")
    idx = jnp.asarray([[1, 2], [0, 4]], jnp.int32)
    jaxpr = jax.make_jaxpr(lambda d, i: gatherx.gather(d, i))(jnp.zeros(5, FLOAT), idx)
    (inner,) = [e.params["jaxpr"] for e in jaxpr.eqns if "jaxpr" in e.params]
    (eqn,) = [e for e in inner.eqns if e.primitive.name == "gatherx_given_index"]
    assert eqn.outvars[0].aval == jax.typeof(idx)
    out, tangent = ad.primitive_jvps[eqn.primitive]((idx,), (None,), **eqn.params)
    assert_same(out, np.asarray(idx))
    assert type(tangent) is ad.Zero
    assert tangent.aval.shape == idx.shape
    assert tangent.aval.dtype == jax.dtypes.float0


def _policies() -> list[tuple[str, object]]:
    cp = jax.checkpoint_policies
    found = [(name, getattr(cp, name)) for name in ("dots_saveable", "checkpoint_dots",
             "dots_with_no_batch_dims_saveable", "nothing_saveable", "everything_saveable")
             if hasattr(cp, name)]  # fmt: skip
    found += [("save_only_these_names", cp.save_only_these_names("x")),
              ("save_any_names_but_these", cp.save_any_names_but_these("x")),
              ("none", None)]  # fmt: skip
    return found


@pytest.mark.parametrize(("name", "policy"), _policies(), ids=[n for n, _ in _policies()])
def test_remat_policies_see_gather_and_gather_grad_as_jnp_take(name, policy) -> None:
    """jax.checkpoint calls a policy with each primitive and its parameters: gatherx's add
    none that clashes with the policy's own arguments; gradients as jnp.take's."""
    data = jnp.asarray(_rand((4, 3)))
    ids = jnp.array([0, -1, 2, 2])

    def grads(take):
        loss = lambda d, i: (take(d, i) ** 2).sum()  # noqa: E731
        return jax.grad(jax.checkpoint(loss, policy=policy))(data, ids)

    assert_same(grads(gatherx.gather), grads(lambda d, i: jnp.take(d, i % 4, axis=0)), **TOL)
    seed = jnp.asarray(_rand((4, 3), 1))
    scatter = jax.checkpoint(lambda g, i: (gatherx.gather_grad((4, 3), i, g) * seed).sum(),
                             policy=policy)  # fmt: skip
    got = jax.jit(jax.grad(scatter))(data, ids)
    assert_same(got, np.take(np.asarray(seed), np.asarray(ids) % 4, axis=0), **TOL)


@pytest.mark.parametrize("axis", [0, 1])
def test_checkify_under_vmap_of_scalar_indices_reports_only_bad_ones(axis) -> None:
    """vmap runs both branches of a traced scalar index's cond: the fill branch holds no
    gather of its own for checkify to report; a bad index is reported as given."""
    data = jnp.asarray(_rand((4, 3)))
    table = lambda k: gatherx.gather(data, k, axis=axis)  # noqa: E731
    checked = jax.jit(checkify.checkify(jax.vmap(table), errors=checkify.index_checks))
    size = data.shape[axis]
    err, out = checked(jnp.array([1, -1, size - 1]))
    assert err.get() is None
    assert_same(out, np.moveaxis(np.take(np.asarray(data), [1, -1, size - 1], axis=axis), axis, 0))
    err, _ = checked(jnp.array([1, size + 4, 0]))
    assert f"index {size + 4} is out of bounds for axis {axis} with size {size}" in err.get()
