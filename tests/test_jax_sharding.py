"""JAX sharding: gather and its gradients under jit on 4 devices, Auto and Explicit meshes.

XLA makes 4 host CPU devices only when ``XLA_FLAGS`` asks before JAX starts; the nox
``distributed`` session sets it. Elsewhere this file reruns itself in a fresh interpreter that
sets it, so the checks run in every session that has JAX.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import need

import gatherx

jax = need("jax")
jnp = need("jax.numpy")
sharding = need("jax.sharding")
P, NamedSharding, AxisType = sharding.PartitionSpec, sharding.NamedSharding, sharding.AxisType

DEVICE_FLAG = "--xla_force_host_platform_device_count=4"


def _four_devices():
    for devices in (jax.devices(), jax.devices("cpu")):
        if len(devices) >= 4:
            return devices[:4]
    return None


DEVICES = _four_devices()


if DEVICES is None:

    def test_sharding_in_a_fresh_interpreter_with_four_devices():
        env = dict(os.environ)
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {DEVICE_FLAG}".strip()
        env["GATHERX_REQUIRE"] = ",".join(filter(None, [env.get("GATHERX_REQUIRE"), "jax"]))
        here = Path(__file__).resolve()
        args = [sys.executable, "-m", "pytest", str(here), "-q", "-p", "no:cacheprovider"]
        run = subprocess.run(
            args, cwd=here.parents[1], env=env, capture_output=True, text=True, timeout=300
        )
        report = run.stdout[-4000:] + run.stderr[-2000:]
        assert run.returncode == 0, report
        summary = run.stdout.strip().splitlines()[-1]
        assert re.search(r"\b\d+ passed\b", summary), report
        assert "skipped" not in summary, report

else:
    X64 = bool(jax.config.jax_enable_x64)
    INT = np.int64 if X64 else np.int32
    DATA = np.arange(48, dtype=np.float32).reshape(8, 6) - 20.0
    INDICES = np.array([[0, 5, 3, 3], [2, 2, -1, -6]])  # valid on both axes, duplicates

    # (data sharding, indices sharding, axis, Explicit-mode output sharding by the rule that
    # gatherx._jax_sharding documents: dimensions off the axis keep the data's sharding,
    # index dimensions the indices' less mesh axes already used, the gathered axis's mesh
    # axes are dropped).
    CASES = [
        (P("x", None), P(), 0, P(None, None, None)),  # sharded along the axis
        (P(None, "y"), P(), 0, P(None, None, "y")),  # sharded across the axis
        (P("x", "y"), P(), 1, P("x", None, None)),  # along and across
        (P(("x", "y"), None), P("y", None), 0, P("y", None, None)),  # two mesh axes along
        (P("x", None), P(None, "x"), 1, P("x", None, None)),  # 'x' taken by the data already
        (P(None, "y"), P("y", "x"), 0, P(None, "x", "y")),  # sharded indices
        (P(None, None), P(None, "x"), 1, P(None, None, "x")),  # replicated data
    ]
    IDS = ["along", "across", "both", "two-axes", "shared-axis", "sharded-index", "replicated"]

    def _mesh(axis_type):
        return jax.make_mesh((2, 2), ("x", "y"), axis_types=(axis_type,) * 2, devices=DEVICES)

    def _oracles(axis, cot):
        idx = np.where(INDICES < 0, INDICES + DATA.shape[axis], INDICES)
        grad = np.zeros_like(DATA)
        q = INDICES.ndim
        np.add.at(
            np.moveaxis(grad, axis, 0), idx, np.moveaxis(cot, range(axis, axis + q), range(q))
        )
        return np.take(DATA, idx, axis=axis), grad

    def _run(mesh, data_spec, index_spec, axis):
        cot_shape = np.take(DATA, INDICES, axis=axis).shape
        # Integer-valued cotangents: every summation order gives exactly the same sums.
        cot = np.random.default_rng(axis).integers(-9, 9, cot_shape).astype(np.float32)
        with jax.set_mesh(mesh):
            data = jax.device_put(DATA, NamedSharding(mesh, data_spec))
            indices = jax.device_put(INDICES.astype(INT), NamedSharding(mesh, index_spec))
            out = jax.jit(lambda d, i: gatherx.gather(d, i, axis=axis))(data, indices)
            w = jax.device_put(cot, out.sharding)

            def loss(d, i, w):
                return jnp.sum(w * gatherx.gather(d, i, axis=axis))

            grad = jax.jit(jax.grad(loss))(data, indices, w)
            grad_fn = jax.jit(lambda i, w: gatherx.gather_grad(DATA.shape, i, w, axis=axis))
            scattered = grad_fn(indices, w)
        return cot, out, grad, scattered

    def _check(cot, out, grad, scattered, axis):
        want, want_grad = _oracles(axis, cot)
        assert len(out.sharding.device_set) == 4
        np.testing.assert_array_equal(np.asarray(out), want)
        np.testing.assert_array_equal(np.asarray(grad), want_grad)
        np.testing.assert_array_equal(np.asarray(scattered), want_grad)

    @pytest.mark.parametrize(("data_spec", "index_spec", "axis", "explicit_spec"), CASES, ids=IDS)
    def test_auto_mesh(data_spec, index_spec, axis, explicit_spec):
        _check(*_run(_mesh(AxisType.Auto), data_spec, index_spec, axis), axis)

    # Every case here shards the gathered axis, the indices or the gather's output (and so
    # gather_grad's input), which JAX's Explicit mode refuses without an output sharding.
    EXPLICIT = [pytest.param(*case, id=name) for case, name in zip(CASES, IDS, strict=True)]

    def _padded(spec, ndim):
        return tuple(spec) + (None,) * (ndim - len(spec))

    @pytest.mark.parametrize(("data_spec", "index_spec", "axis", "explicit_spec"), EXPLICIT)
    def test_explicit_mesh(data_spec, index_spec, axis, explicit_spec):
        cot, out, grad, scattered = _run(_mesh(AxisType.Explicit), data_spec, index_spec, axis)
        _check(cot, out, grad, scattered, axis)
        assert _padded(jax.typeof(out).sharding.spec, out.ndim) == _padded(explicit_spec, out.ndim)
        # The gradient has the data's sharding; gather_grad's scatter replicates the axis.
        assert _padded(jax.typeof(grad).sharding.spec, 2) == _padded(data_spec, 2)
        spec = _padded(explicit_spec, out.ndim)
        want = (*spec[:axis], None, *spec[axis + INDICES.ndim :])
        assert _padded(jax.typeof(scattered).sharding.spec, 2) == want

    @pytest.mark.parametrize("mesh_type", [AxisType.Auto, AxisType.Explicit], ids=str)
    @pytest.mark.parametrize("data_spec", [P(None, "y"), P("x", "y"), P(None, None)], ids=str)
    @pytest.mark.parametrize("at", [3, -1, 8, -9], ids=["in", "negative", "past", "before"])
    def test_traced_scalar_index_keeps_the_slice_sharding(mesh_type, data_spec, at):
        """One slice or, out of range, the fill, both laid out as the slice (Explicit meshes
        require the cond's branches alike); the gradient as jnp.take's."""
        mesh = _mesh(mesh_type)
        with jax.set_mesh(mesh):
            data = jax.device_put(DATA, NamedSharding(mesh, data_spec))
            index = jnp.asarray(at, INT)
            out = jax.jit(gatherx.gather)(data, index)
            grad = jax.jit(jax.grad(lambda d, i: gatherx.gather(d, i).sum()))(data, index)
        want = DATA[at] if -8 <= at < 8 else np.full(6, np.nan, np.float32)
        np.testing.assert_array_equal(np.asarray(out), want)
        if mesh_type == AxisType.Explicit:  # the data's sharding off the axis (the rule above)
            assert _padded(jax.typeof(out).sharding.spec, 1) == _padded(tuple(data_spec)[1:], 1)
        want_grad = np.zeros_like(DATA)
        if -8 <= at < 8:
            want_grad[at] = 1.0
        np.testing.assert_array_equal(np.asarray(grad), want_grad)

    def test_indices_committed_to_other_devices_than_the_data_are_refused_first():
        """As torch's indices on another device: gatherx's ValueError naming both places,
        before any value is read; an uncommitted index follows the data, as in JAX."""
        one, two = DEVICES[0], DEVICES[1]
        data = jax.device_put(DATA, two)
        grad = jax.device_put(np.ones((2, 6), np.float32), two)
        index = jax.device_put(np.array([0, 9], INT), one)  # out of range too: not read
        with pytest.raises(ValueError, match=rf"^gather: indices are on device {one} but "
                           rf"data is on device {two}; move the indices"):  # fmt: skip
            gatherx.gather(data, index)
        with pytest.raises(ValueError, match=rf"^gather_grad: indices are on device {one} "
                           rf"but grad is on device {two}"):  # fmt: skip
            gatherx.gather_grad((8, 6), index, grad)
        mesh = _mesh(AxisType.Auto)
        spread = jax.device_put(DATA, NamedSharding(mesh, P("x", "y")))
        with pytest.raises(ValueError, match=r"^gather: indices are on device .* but data "
                           r"is on device \[.*, .*, .*, .*\]"):  # fmt: skip
            gatherx.gather(spread, index)
        ok = jnp.asarray(np.array([0, -1], INT))  # uncommitted
        for where in (data, spread):
            out = gatherx.gather(where, ok)
            np.testing.assert_array_equal(np.asarray(out), DATA[[0, -1]])
        out = gatherx.gather(data, jax.device_put(np.array([2, -2], INT), two))
        np.testing.assert_array_equal(np.asarray(out), DATA[[2, -2]])
        assert out.devices() == {two}

    def test_an_empty_index_leaves_the_result_where_the_data_is():
        """jit makes a result that reads nothing on the default device: the empty gather and
        scatter-add are placed as any other result of committed data or grad."""
        two = DEVICES[1]
        data = jax.device_put(DATA, two)
        grad = jax.device_put(np.ones((0, 6), np.float32), two)
        for empty in (np.zeros(0, INT), jax.device_put(np.zeros(0, INT), two), []):
            out = gatherx.gather(data, empty)
            assert (out.shape, out.devices(), out.committed) == ((0, 6), {two}, True)
            summed = gatherx.gather_grad((8, 6), empty, grad)
            assert (summed.devices(), summed.committed) == ({two}, True)
            np.testing.assert_array_equal(np.asarray(summed), np.zeros((8, 6)))
        # on a mesh, laid out as a non-empty index's result: the sharding rules above
        for mesh_type in (AxisType.Auto, AxisType.Explicit):
            mesh = _mesh(mesh_type)
            for spec in (P("x", "y"), P(None, "y"), P("y", None)):
                spread = jax.device_put(DATA, NamedSharding(mesh, spec))
                some = gatherx.gather(spread, np.zeros((1, 2), INT))
                none = gatherx.gather(spread, np.zeros((0, 2), INT))
                assert none.shape == (0, 2, 6)
                assert _padded(none.sharding.spec, 3) == _padded(some.sharding.spec, 3)
                grads = [jax.device_put(np.ones((n, 2, 6), np.float32),
                                        NamedSharding(mesh, P(None, *spec[1:], None)))
                         for n in (1, 0)]  # fmt: skip
                sums = [gatherx.gather_grad((8, 6), np.zeros((n, 2), INT), g)
                        for n, g in zip((1, 0), grads, strict=True)]  # fmt: skip
                assert _padded(sums[1].sharding.spec, 2) == _padded(sums[0].sharding.spec, 2)
                np.testing.assert_array_equal(np.asarray(sums[1]), np.zeros((8, 6)))
        # pmap's results: on its mesh where JAX names it (newer JAX), else as jnp.take leaves
        # its empty result (older JAX's pmap sharding)
        mapped = jax.pmap(lambda v: v * 2)(jnp.asarray(DATA[:4]))
        got = gatherx.gather(mapped, np.zeros(0, INT))
        if isinstance(mapped.sharding, NamedSharding):
            assert (got.shape, got.devices(), got.committed) == ((0, 6), mapped.devices(), True)
        else:
            native = jnp.take(mapped, jnp.zeros(0, INT), axis=0)
            assert (got.shape, got.devices(), got.committed) == (
                native.shape, native.devices(), native.committed)  # fmt: skip
        # a one-device mesh whose grad spec names more dimensions than the result has
        single = jax.make_mesh((1,), ("y",), devices=DEVICES[:1])
        for spec in (P(None, None, "y"), P(None, "y", None)):
            grad = jax.device_put(np.ones((0, 2, 6), np.float32), NamedSharding(single, spec))
            summed = gatherx.gather_grad((8, 6), np.zeros((0, 2), INT), grad)
            np.testing.assert_array_equal(np.asarray(summed), np.zeros((8, 6)))
