"""``gather(..., out=)``: results equal NumPy's ``np.take``; every refusal leaves ``out`` as is."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from support import Backend, from_numpy, need, numpy_dtype, random_data, to_numpy

import gatherx
from gatherx._rules import ONNX_DATA_DTYPES

DTYPES = sorted(ONNX_DATA_DTYPES)
#: (data shape, index shape, axis): rows, inner axes, the last axis, a scalar index, rank 4,
#: many short rows (NumPy's doubled plan), an empty index, 1-D data (PyTorch's torch.take).
SHAPES = [
    ((6, 4), (2, 3), 0),
    ((3, 7, 5), (4,), 1),
    ((3, 4, 9), (2, 2), -1),
    ((5, 6), (), 1),
    ((7,), (), 0),
    ((2, 3, 5, 4), (3, 2), 2),
    ((500, 2), (4000,), 0),
    ((4, 3), (0,), 0),
    ((9,), (2, 3), 0),
    ((40,), (20,), -1),
]


def _indices(rng: np.random.Generator, size: int, shape: tuple[int, ...], dtype: str = "int64"):
    return rng.integers(-size, size, size=shape).astype(dtype)  # negatives included


def _oracle(data: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    want = np.empty(
        data.shape[: axis % data.ndim] + idx.shape + data.shape[axis % data.ndim + 1 :],
        data.dtype,
    )
    return np.take(data, idx % data.shape[axis], axis=axis, out=want)


# ----------------------------------------------------------------------------------- results


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_numpy_out_equals_numpy_take(name, index_dtype):
    rng = np.random.default_rng(0)
    for shape, ishape, axis in SHAPES:
        data = random_data(rng, shape, name)
        idx = _indices(rng, shape[axis], ishape, index_dtype)
        want = _oracle(data, idx, axis)
        out = np.empty_like(want)
        got = gatherx.gather(data, idx, axis=axis, out=out)
        assert got is out
        np.testing.assert_array_equal(out, want)
        assert out.dtype == want.dtype


@pytest.mark.parametrize("name", sorted(ONNX_DATA_DTYPES - {"string"}))
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_torch_out_equals_numpy_take(name, index_dtype):
    torch = need("torch")
    rng = np.random.default_rng(1)
    for shape, ishape, axis in SHAPES:
        host = random_data(rng, shape, name)
        idx = _indices(rng, shape[axis], ishape, index_dtype)
        want = _oracle(host, idx, axis)
        data = from_numpy(Backend.TORCH, host)
        out = torch.empty(want.shape, dtype=data.dtype)
        for ids in (torch.from_numpy(idx), idx, idx.tolist()):
            got = gatherx.gather(data, ids, axis=axis, out=out)
            assert got is out
            got_host = to_numpy(out)
            assert got_host.dtype == want.dtype
            np.testing.assert_array_equal(got_host, want)
            out.zero_()


@pytest.mark.parametrize(
    ("shape", "ishape", "axis"), [((3, 4), (0,), 0), ((3, 4), (2, 0), 1), ((0, 4), (0,), 0)]
)
def test_numpy_out_of_an_empty_index_skips_the_flow(monkeypatch, shape, ishape, axis):
    """An empty index writes nothing into its empty ``out``, which is returned without the
    flow's general checks; a wrong shape or dtype is still the flow's error."""
    from gatherx._backends import base

    flows = []
    general = base.Backend.gather_out
    monkeypatch.setattr(
        base.Backend, "gather_out", lambda *a, **k: flows.append(1) or general(*a, **k)
    )
    data = np.arange(float(np.prod(shape))).reshape(shape)
    idx = np.zeros(ishape, np.int64)
    want = np.take(data, idx, axis=axis)
    out = np.empty_like(want)
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    assert flows == []
    with pytest.raises(ValueError, match="out has shape"):
        gatherx.gather(data, idx, axis=axis, out=np.empty((*want.shape, 1)))
    with pytest.raises(TypeError, match="out has dtype"):
        gatherx.gather(data, idx, axis=axis, out=want.astype(np.float32))
    assert len(flows) == 2


@pytest.mark.parametrize(
    ("shape", "ishape", "axis"),
    [((3, 4), (0,), 0), ((3, 4), (2, 0), 1), ((0, 4), (0,), 0), ((0, 4), (2,), 1)],
)
def test_torch_out_of_an_empty_result_skips_the_flow(monkeypatch, shape, ishape, axis):
    """An empty result (an empty index, or empty slices) writes nothing into its empty
    ``out``, which is returned without the flow's general checks once the index is checked;
    a bad index, a wrong shape or dtype are still the flow's errors."""
    torch = need("torch")
    from gatherx._backends import base

    flows = []
    general = base.Backend.gather_out
    monkeypatch.setattr(
        base.Backend, "gather_out", lambda *a, **k: flows.append(1) or general(*a, **k)
    )
    data = torch.arange(float(np.prod(shape))).reshape(shape)
    idx = torch.full(ishape, -1)
    want = np.take(data.numpy(), idx.numpy(), axis=axis)
    out = torch.empty(want.shape)
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    assert flows == []
    with pytest.raises(ValueError, match="out has shape"):
        gatherx.gather(data, idx, axis=axis, out=torch.empty((*want.shape, 1)))
    with pytest.raises(TypeError, match="out has dtype"):
        gatherx.gather(data, idx, axis=axis, out=out.double())
    assert len(flows) == 2
    if idx.numel():
        with pytest.raises(IndexError, match=r"idx=4 at position \(0,\)"):
            gatherx.gather(data, idx + 5, axis=axis, out=out)


def test_numpy_out_layouts():
    """Strided data and out, another byte order: written where ``out`` lies."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((8, 10, 6))
    data = base[::2, :, ::-1]  # not contiguous
    idx = np.array([[4, -1], [0, 9]])
    want = _oracle(data, idx, 1)
    room = np.zeros((4, 2, 2, 12))
    out = room[..., ::2]  # not contiguous either
    assert gatherx.gather(data, idx, axis=1, out=out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(room[..., 1::2], 0)  # nothing written between its elements
    swapped = np.ascontiguousarray(base).astype(">f8")
    out = np.empty((8, 2, 2, 6), ">f8")
    gatherx.gather(swapped, idx, axis=1, out=out)
    np.testing.assert_array_equal(out, _oracle(swapped, idx, 1))


def test_torch_out_layouts():
    torch = need("torch")
    data = torch.arange(60.0).reshape(5, 12)[:, ::2]  # (5, 6), not contiguous
    idx = torch.tensor([[0, -1, 2]])
    want = _oracle(data.numpy(), idx.numpy(), 1)  # (5, 1, 3)
    room = torch.zeros(5, 1, 6)
    out = room[..., ::2]  # not contiguous
    assert gatherx.gather(data, idx, axis=1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(room[..., 1::2].numpy(), 0)
    out = torch.zeros(3, 1, 5).permute(2, 1, 0)  # (5, 1, 3), transposed
    gatherx.gather(data.contiguous(), idx, axis=1, out=out)
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("index_shape", [(2, 3), (20,), (5000,)])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("sign", ["both", "non-negative"])
@pytest.mark.parametrize("layout", ["contiguous", "strided_data", "strided_out"])
def test_torch_out_of_one_dimensional_data(monkeypatch, index_shape, index_dtype, sign, layout):
    """1-D data into ``out`` on every layout: np.take's values; ``torch.take`` writes into
    ``out`` itself at an int64 index holding a negative value, on contiguous data, strided
    data as given or a contiguous copy of it (made where the output is no smaller than the
    data); the forward too, and whatever the index's sign at two dimensions, or on strided
    data as given."""
    torch = need("torch")
    rng = np.random.default_rng(5)
    host = rng.standard_normal(80)
    data = torch.from_numpy(host)[::2] if layout == "strided_data" else torch.from_numpy(host[:40])
    idx = _indices(rng, 40, index_shape, index_dtype)
    if sign == "non-negative":
        idx %= 40
    want = _oracle(data.numpy(), idx, 0)
    room = torch.zeros((*want.shape, 2), dtype=torch.float64)
    out = room[..., 0] if layout == "strided_out" else torch.zeros(want.shape, dtype=torch.float64)
    calls = []
    real = torch.take

    def spy(source, index, **kwargs):
        calls.append(kwargs.get("out"))
        return real(source, index, **kwargs)

    monkeypatch.setattr(torch, "take", spy)
    assert gatherx.gather(data, torch.from_numpy(idx), out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    copied = idx.size >= data.numel()
    taken = index_dtype == "int64" and sign == "both"
    assert calls == ([out] if taken else [])
    calls.clear()  # the forward: torch.take also at an index of two dimensions of any sign
    got = gatherx.gather(data, torch.from_numpy(idx))
    np.testing.assert_array_equal(got.numpy(), want)
    as_given = layout == "strided_data" and not copied
    taken = taken or (index_dtype == "int64" and (idx.ndim == 2 or as_given))
    assert calls == ([None] if taken else [])


def _outs_of(monkeypatch, torch, name: str) -> list:
    """The ``out=`` argument (None if none) of each later call of ``torch.<name>``."""
    calls = []
    real = getattr(torch, name)

    def spy(source, dim, index, **kwargs):
        calls.append(kwargs.get("out"))
        return real(source, dim, index, **kwargs)

    monkeypatch.setattr(torch, name, spy)
    return calls


@pytest.mark.parametrize(
    ("indices", "axis", "written"),
    [([[0, -1, 2, 2, 5, 1] * 200], 1, True), ([1, 4], 1, False), ([1, -4], 0, True),
     ([[0, -1, 2, 2, 1, 3] * 40], 0, True), ([[0, -1, 2, 2, 1, 3]], 0, None)],
)  # fmt: skip
def test_torch_out_from_non_contiguous_data_follows_the_forward_plan(
    monkeypatch, indices, axis, written
):
    """Non-contiguous data into a contiguous ``out``: where the forward's plan copies the
    data (an output at least its size), ``index_select`` writes into ``out`` itself, and on
    dim 0 (read where it lies) always; elsewhere the forward's result is copied in (None: a
    small output at an index of two dimensions, read by advanced indexing, no
    ``index_select`` at all). np.take's values either way."""
    torch = need("torch")
    data = torch.arange(60.0).reshape(5, 12)[:, ::2]  # (5, 6), not contiguous
    idx = torch.tensor(indices)
    want = _oracle(data.numpy(), idx.numpy(), axis)
    out = torch.zeros(want.shape)
    calls = _outs_of(monkeypatch, torch, "index_select")
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    into = [c is not None and c.data_ptr() == out.data_ptr() for c in calls]
    assert into == ([True] if written else [False] * len(calls))
    if written is None:
        assert not calls


@pytest.mark.parametrize(
    ("shape", "view", "axis", "indices"),
    [((4, 5, 40), "stepped", 2, [0, -1, 3, 2, 5, 1, 4]),
     ((4, 5, 400), "stepped", -1, [[1, -2, 5] * 10, [0, 3, -1] * 10]),
     ((3, 4, 10, 6), "stepped", 2, [1, -1, 4]),
     ((30, 5, 4, 9), "permuted", 2, [[0, -5], [2, 4]]),
     ((6, 5, 4, 3), "permuted", -1, [5, -6, 0, 1, -2])],
)  # fmt: skip
def test_torch_out_from_non_contiguous_data_on_later_dims(monkeypatch, shape, view, axis, indices):
    """Non-contiguous data whose forward reads it by advanced indexing, gathered on dim 2 or
    later into a contiguous ``out``: ``index_select`` writes into ``out`` itself, reading the
    data where it lies (no copy of the data, no result copied in); np.take's values."""
    torch = need("torch")
    full = torch.arange(float(math.prod(shape))).reshape(shape)
    data = full[..., ::2] if view == "stepped" else full.permute(3, 2, 1, 0)
    assert not data.is_contiguous()
    idx = torch.tensor(indices)
    want = _oracle(data.numpy(), idx.numpy(), axis)
    assert want.size < data.numel()  # (the forward reads the data where it lies)
    out = torch.zeros(want.shape)
    calls = _outs_of(monkeypatch, torch, "index_select")
    copies = []
    real_contiguous = torch.Tensor.contiguous
    monkeypatch.setattr(
        torch.Tensor,
        "contiguous",
        lambda t, *a, **k: copies.append(t) or real_contiguous(t, *a, **k),
    )
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    assert [c is not None and c.data_ptr() == out.data_ptr() for c in calls] == [True]
    assert not [t for t in copies if t.data_ptr() == data.data_ptr()]


@pytest.mark.parametrize(
    ("shape", "axis", "index_shape", "given"),
    [((4, 300), 1, (16, 16), True), ((5, 300), 1, (5, 41), False),
     ((1024, 3), 0, (2, 2), True), ((2, 9, 6), -2, (3, 1, 2), True),
     ((300, 2, 2), 0, (16, 16), True), ((300, 2, 2), 0, (257, 1), False)],
)  # fmt: skip
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint16", "bool"])
@pytest.mark.parametrize("strided", [False, True])
def test_torch_out_small_at_an_index_of_two_dimensions_takes_the_forwards_indexing(
    monkeypatch, shape, axis, index_shape, given, index_dtype, dtype, strided
):
    """``out=`` at an index of two or more dimensions, into at most 1024 elements
    (``TORCH_OUT_GIVEN_MAX_ELEMENTS``) where the forward reads it by advanced indexing: the
    index checked, not wrapped, advanced indexing at the index as given, its result copied
    into ``out``; into 1025 or 1028 elements the index is wrapped first. np.take's values; a
    bad value raises the flow's error and leaves ``out`` as it was."""
    torch = need("torch")
    from gatherx._backends.torch import out as torch_out

    rng = np.random.default_rng(7)
    full = (*shape[:-1], shape[-1] * (2 if strided else 1))
    host = rng.integers(0, 2 if dtype == "bool" else 200, full).astype(np.float32)
    base = torch.from_numpy(host).to(getattr(torch, dtype))
    data = base[..., ::2] if strided else base
    size = shape[axis]
    idx = torch.from_numpy(_indices(rng, size, index_shape, index_dtype))
    given_values = idx.numpy().copy()
    want = _oracle(data.float().numpy(), given_values, axis)
    wraps = []
    real = torch_out.eager_bounded
    monkeypatch.setattr(
        torch_out, "eager_bounded", lambda *a, **k: wraps.append(1) or real(*a, **k)
    )
    out = torch.zeros(want.shape, dtype=data.dtype)
    assert gatherx.gather(data, idx, axis=axis, out=out) is out
    np.testing.assert_array_equal(out.float().numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), given_values)  # never written
    assert wraps == ([] if given else [1])
    bad = idx.clone()
    bad.view(-1)[-1] = -size - 1
    _refused(data, bad, out, IndexError, f"idx={-size - 1}", axis=axis)


@pytest.mark.parametrize("columns", [60, 200])  # the forward copies the data; reads it as given
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])  # half: moved as int16
def test_torch_out_columns_written_by_gather_in_place(monkeypatch, columns, index_dtype, dtype):
    """Columns of many rows at many indices, from contiguous or strided data:
    ``torch.gather`` writes into ``out`` itself, np.take's values."""
    torch = need("torch")
    idx = torch.from_numpy((np.arange(64) * 7 % 60 - 30).astype(index_dtype))
    wide = (torch.arange(70 * columns) % 1000 - 500).reshape(70, columns).to(getattr(torch, dtype))
    calls = _outs_of(monkeypatch, torch, "gather")
    for data in (wide[:, :30], wide[:, ::2]):
        want = _oracle(data.double().numpy(), idx.numpy(), 1)
        out = torch.zeros(want.shape, dtype=data.dtype)
        assert gatherx.gather(data, idx, axis=1, out=out) is out
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out.double().numpy(), want)
        assert calls.pop().data_ptr() == out.data_ptr()


def test_torch_out_under_no_grad():
    """torch's own ``out=`` functions take tensors requiring grad where nothing is recorded."""
    torch = need("torch")
    leaf = torch.arange(12.0).reshape(4, 3).requires_grad_()
    out = torch.empty(2, 3)
    with torch.no_grad():
        gatherx.gather(leaf, [3, -4], out=out)
    np.testing.assert_array_equal(out.numpy(), _oracle(leaf.detach().numpy(), np.array([3, -4]), 0))


@pytest.mark.parametrize("view", ["conj", "neg", "requires_grad", "strided_out", "strided_data"])
def test_torch_out_short_rows_on_every_layout(view):
    """Many short rows take NumPy's writer on the tensors' memory: views NumPy cannot read
    as they are (a conjugate or negative bit, a tensor requiring grad) and strided out or data
    give the same values as NumPy's take."""
    torch = need("torch")
    rng = np.random.default_rng(3)
    values = rng.standard_normal((300, 2)) + 1j * rng.standard_normal((300, 2))
    base = torch.from_numpy(values.astype(np.complex64))
    idx = torch.from_numpy(rng.integers(-300, 300, 5000))
    room = torch.zeros(5000, 4, dtype=base.dtype)
    out = room[:, ::2] if view == "strided_out" else room[:, :2].contiguous()
    data = {
        "conj": base.conj(),
        "neg": torch.ops.aten._neg_view(base),
        "requires_grad": base.clone().requires_grad_(),
        "strided_out": base,
        "strided_data": torch.from_numpy(np.repeat(values, 2, axis=1).astype(np.complex64))[:, ::2],
    }[view]
    plain = data.detach().resolve_conj().resolve_neg().numpy()
    with torch.no_grad():
        assert gatherx.gather(data, idx, out=out) is out
    np.testing.assert_array_equal(out.numpy(), _oracle(plain, idx.numpy(), 0))


def _python_rule(values: list[int], size: int, opset: int, how: str) -> list[int] | None:
    """The oracle of the index rule, in Python ints: None if a value lies outside the range;
    else the values wrapped, or shifted up by s (from opset 11) or 0."""
    low = -size if opset >= 11 else 0
    if any(not low <= v < size for v in values):
        return None
    if how == "shifted":
        return [v - low for v in values]
    return [v + size if v < 0 else v for v in values]


@pytest.mark.parametrize("how", ["wrapped", "shifted"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("size", [0, 1, 7, 2**31 - 1, 2**31, 2**40, 2**62])
@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("count", [1, 5, 40])
def test_host_index_rules(how, index_dtype, size, opset, count):
    """The fast paths' checks of host indices, which wrap them (few read as Python ints,
    more by NumPy's unsigned arithmetic) or shift them up for the doubled rows, against the
    rule in Python ints, at every boundary and at the dtype's extremes."""
    from gatherx import _rules

    rule = _rules.host_wrapped if how == "wrapped" else _rules.host_shifted

    info = np.iinfo(index_dtype)
    edges = [info.min, info.min + 1, -size - 1, -size, -size + 1, -1, 0, 1, size - 1, size,
             size + 1, info.max - 1, info.max]  # fmt: skip
    edges = [v for v in edges if info.min <= v <= info.max]
    rng = np.random.default_rng(size % 1000 + count)
    draws = [rng.choice(edges, count) for _ in range(60)]
    draws += [np.array([v] * count) for v in edges]
    for values in draws:
        host = np.asarray(values, dtype=index_dtype)
        want = _python_rule([int(v) for v in host], size, opset, how)
        got = rule(host, size, opset)
        if want is None:
            assert got is None, (host, size, opset)
        else:
            assert got is not None, (host, size, opset)
            assert got.shape == host.shape
            assert [int(v) for v in got.reshape(-1)] == want
            if how == "wrapped" and count <= _rules.SMALL_HOST_INDEX and host.min() >= 0:
                assert got is host  # nothing to wrap: nothing allocated


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("size", [1, 7, 2**31 - 1, 2**31, 2**62])
def test_host_index_rule_on_many_values(index_dtype, size):
    """From ``HOST_EXTREMES_FIRST`` values the wrap reads the extremes first where a sample
    holds no negative value: the index itself where none is, the wrap where one hid from the
    sample, None where a bad value did; against NumPy's own wrap."""
    from gatherx import _rules

    n = _rules.HOST_EXTREMES_FIRST + 5
    info = np.iinfo(index_dtype)
    hi = min(size - 1, info.max)
    host = np.random.default_rng(size % 1000).integers(0, hi + 1, n, dtype=index_dtype)
    assert _rules.host_wrapped(host, size, 13) is host  # nothing to wrap: nothing allocated
    hidden = 1  # position 1 is never sampled (every n // 32-th value is)
    for value in (-1, -size, -size - 1, size, info.min, info.max):
        if not info.min <= value <= info.max:
            continue
        for at in (hidden, 0):  # hidden from the sample, then in it
            values = host.copy()
            values[at] = value
            given = values.copy()
            got = _rules.host_wrapped(values, size, 13)
            np.testing.assert_array_equal(values, given)  # never written
            if -size <= value < size:
                wide = values.astype(np.int64)
                np.testing.assert_array_equal(got, np.where(wide < 0, wide + size, wide))
            else:
                assert got is None, (value, at)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("size", [1, 7, 2**31 - 1, 2**31, 2**62])
@pytest.mark.parametrize(
    "shape", [(), (1,), (5,), (16,), (17,), (3, 2), (4, 10), (1024,), (1025,), (2, 3, 5)]
)
def test_torch_eager_index_rule(index_dtype, size, shape):
    """PyTorch's eager calls check and wrap CPU indices on the host (few read as Python ints,
    up to 1024 by aminmax and remainder, more as NumPy arrays): against the rule in Python
    ints, at every boundary, of every rank, as given or as one dimension; the tensor passed
    in is never changed."""
    torch = need("torch")
    from gatherx._backends.torch.domain import eager_bounded

    info = np.iinfo(index_dtype)
    edges = [info.min, -size - 1, -size, -size + 1, -1, 0, 1, size - 1, size, info.max]
    edges = [v for v in edges if info.min <= v <= info.max]
    count = int(np.prod(shape))
    rng = np.random.default_rng(size % 1000 + count)
    draws = [rng.choice(edges, shape) for _ in range(30)]
    draws += [np.full(shape, v) for v in edges]
    for values, opset, flat in itertools.product(draws, (1, 11, 13), (False, True)):
        host = np.asarray(values, dtype=index_dtype)
        index = torch.from_numpy(host.copy())
        want = _python_rule([int(v) for v in host.reshape(-1)], size, opset, "wrapped")
        got = eager_bounded(index, size, opset, flat)
        np.testing.assert_array_equal(index.numpy(), host)
        if want is None:
            assert got is None, (host, size, opset)
            continue
        assert got is not None, (host, size, opset)
        assert tuple(got.shape) == ((count,) if flat else shape)
        assert got.reshape(-1).tolist() == want


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    ("count", "remainders"), [(16, 0), (17, 1), (1024, 1), (1025, 0), (40000, 0)]
)
def test_torch_eager_index_wrapped_by_its_plan(monkeypatch, count, remainders, index_dtype):
    """Indices of 17 to 1024 values are wrapped by one ``torch.remainder`` after ``aminmax``
    read their extremes, others on the host; both give the rule's values, and indices with
    no negative value are used as given."""
    torch = need("torch")
    from gatherx._backends.torch.domain import eager_bounded

    calls = []
    remainder = torch.remainder

    def spy(*args, **kwargs):
        calls.append(args[1])
        return remainder(*args, **kwargs)

    monkeypatch.setattr(torch, "remainder", spy)
    size = 3 * count
    host = np.arange(-size, size, 6, dtype=index_dtype)[::-1].copy()  # count values, both signs
    index = torch.from_numpy(np.stack([host, host], 1))[:, 0]  # a strided view
    got = eager_bounded(index, size, 13)
    np.testing.assert_array_equal(got.numpy(), np.where(host < 0, host + size, host))
    assert calls == [size] * remainders
    calls.clear()
    non_negative = torch.from_numpy(host % size)
    got = eager_bounded(non_negative, size, 13)
    np.testing.assert_array_equal(got.numpy(), host % size)
    assert got is non_negative or not remainders
    assert calls == []


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("count", [1025, 40000, 70000])
@pytest.mark.parametrize("strided", [False, True])
def test_torch_eager_index_read_by_its_extremes_first(monkeypatch, count, strided, index_dtype):
    """From 1025 values, where a sample holds no negative value, ``aminmax`` reads the
    extremes first: the index itself where none is negative (no NumPy pass, nothing
    allocated), the host's wrap where one hid from the sample, None where a bad value did;
    where the sample holds a negative value, the host's wrap alone. Against NumPy's rule."""
    torch = need("torch")
    from gatherx._backends.torch import domain

    reads, wraps = [], []
    aminmax, wrapped = torch.aminmax, domain._rules.host_wrapped
    monkeypatch.setattr(torch, "aminmax", lambda t: reads.append(1) or aminmax(t))
    monkeypatch.setattr(domain._rules, "host_wrapped", lambda *a: wraps.append(1) or wrapped(*a))
    size = 3 * count
    host = np.random.default_rng(count).integers(0, size, count, dtype=index_dtype)
    hidden = 1  # position 1 is never sampled (every count // 32-th value is)
    for value, at in [(None, 0), (-1, hidden), (-size, hidden), (-size - 1, hidden),
                      (size, hidden), (-1, 0), (-size - 1, 0)]:  # fmt: skip
        values = host.copy()
        if value is not None:
            values[at] = value
        index = torch.from_numpy(np.stack([values, values], 1))[:, 0] if strided else (
            torch.from_numpy(values.copy()))  # fmt: skip
        reads.clear(), wraps.clear()
        got = domain.eager_bounded(index, size, 13)
        np.testing.assert_array_equal(index.numpy(), values)  # never written
        sampled = value is None or at == hidden  # the sample holds no negative value
        wrap = value is not None and (not sampled or -size <= value < 0)
        assert (len(reads), len(wraps)) == (sampled, wrap), (value, at)
        if value is None:
            assert got is index
        elif -size <= value < size:
            wide = values.astype(np.int64)
            np.testing.assert_array_equal(got.numpy(), np.where(wide < 0, wide + size, wide))
        else:
            assert got is None, (value, at)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("count", [1, 16, 17, 32767, 32768])
@pytest.mark.parametrize("strided", [False, True])
def test_torch_cpu_extremes_by_each_read(count, strided, index_dtype):
    """The extremes of a CPU index, read as Python ints, by aminmax or by NumPy (by count,
    ``torch_extremes_plan``), equal NumPy's, strided indices included."""
    torch = need("torch")
    from gatherx._backends.torch.domain import cpu_extremes

    rng = np.random.default_rng(count)
    info = np.iinfo(index_dtype)
    host = rng.integers(info.min, info.max, (count, 2), dtype=index_dtype, endpoint=True)
    index = torch.from_numpy(host)
    values = index[:, 1] if strided else index.reshape(-1)[:count]
    want = host[:, 1] if strided else host.reshape(-1)[:count]
    assert cpu_extremes(values) == (int(want.min()), int(want.max()))


@pytest.mark.parametrize("dtype", ["float64", "uint32", "bool"])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize(("shape", "axis"), [((2048, 1024), 1), ((6, 5, 4), 1), ((7, 3), 0)])
def test_torch_out_scalar_index_by_both_slice_plans(shape, axis, strided, dtype):
    """A scalar index writes its one slice (copied from the data's view at the position as
    given), a column of a wide matrix or a block of rows, into contiguous and strided out
    alike, uint32 (a dtype with few ATen kernels) and bool included."""
    torch = need("torch")
    host = (np.arange(np.prod(shape)) % 7).astype(dtype).reshape(shape)
    data = torch.from_numpy(host)
    want = _oracle(host, np.array(-2), axis)
    room = torch.zeros((*want.shape, 2), dtype=data.dtype)
    out = room[..., 0] if strided else torch.zeros(want.shape, dtype=data.dtype)
    assert gatherx.gather(data, torch.tensor(-2), axis=axis, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    if strided:
        np.testing.assert_array_equal(room[..., 1].numpy(), 0)


def test_out_none_is_the_plain_call():
    data = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(gatherx.gather(data, [1, -1], out=None), data[[1, -1]])


def test_loop_reuses_one_buffer():
    """The documented pattern: one buffer, refilled each step, never reallocated."""
    rng = np.random.default_rng(3)
    table = rng.standard_normal((100, 8)).astype(np.float32)
    batch = np.empty((16, 8), np.float32)
    for _ in range(5):
        ids = rng.integers(-100, 100, 16)
        assert gatherx.gather(table, ids, out=batch) is batch
        np.testing.assert_array_equal(batch, table[ids])


# ---------------------------------------------------------------------------------- refusals

DATA = np.arange(12.0).reshape(4, 3)


def _refused(data, indices, out, error, text, **kw):
    """The call raises ``error`` matching ``text`` and leaves ``out`` exactly as it was."""
    before = to_numpy(out).copy() if not isinstance(out, np.ndarray) else out.copy()
    with pytest.raises(error, match=text):
        gatherx.gather(data, indices, out=out, **kw)
    after = to_numpy(out) if not isinstance(out, np.ndarray) else out
    np.testing.assert_array_equal(after, before)


def _sentinel(shape, dtype=np.float64):
    return np.full(shape, -7, dtype)


@pytest.mark.parametrize(
    ("indices", "kw", "error", "text"),
    [
        ([[0, 4]], {}, IndexError, r"idx=4 at position \(0, 1\)"),
        ([[0, -5]], {}, IndexError, r"idx=-5 at position \(0, 1\)"),
        ([[0, 2**63]], {}, IndexError, r"idx=9223372036854775808 at position \(0, 1\)"),
        ([[-(2**63) - 1, 0]], {}, IndexError, r"idx=-9223372036854775809 at position \(0, 0\)"),
        ([[0, -1]], {"opset": 10}, IndexError, r"negative indices need opset >= 11"),
        (np.array([[0, 1]], np.int16), {}, TypeError, "int32 or int64"),
        ([[0, 1]], {"axis": 2}, ValueError, "axis 2 is out of the accepted range"),
        ([[0, 1]], {"opset": 0}, ValueError, "opset must be >= 1"),
    ],
)
def test_numpy_bad_inputs_leave_out_untouched(indices, kw, error, text):
    _refused(DATA, indices, _sentinel((1, 2, 3)), error, text, **kw)


def test_numpy_out_of_range_late_in_a_large_index_writes_nothing():
    """A bad index after many good ones: the check runs before any row is written."""
    data = np.random.default_rng(4).standard_normal((500, 2))
    idx = np.tile(np.arange(-500, 500), 4)
    idx[-1] = 500
    _refused(data, idx, _sentinel((4000, 2)), IndexError, r"idx=500 at position \(3999,\)")


@pytest.mark.parametrize(
    ("out", "error", "text"),
    [
        (_sentinel((2, 2)), ValueError, r"out has shape \(2, 2\), but the result has shape \(2, 3"),
        (_sentinel((2, 3), np.float32), TypeError, "float32, but the result has dtype float64"),
        (_sentinel((2, 3), ">f8"), TypeError, "out has dtype >f8"),
        (np.ma.masked_array(_sentinel((2, 3))), TypeError, "out of type numpy.MaskedArray"),
    ],
)  # fmt: skip
def test_numpy_out_mismatch(out, error, text):
    _refused(DATA, [0, 1], out, error, text)


def test_numpy_out_wrong_framework():
    torch = need("torch")
    out = torch.full((2, 3), -7.0, dtype=torch.float64)
    _refused(DATA, [0, 1], out, TypeError, "out must be a numpy.ndarray like the data, got torch")


def test_numpy_out_read_only():
    out = _sentinel((2, 3))
    out.flags.writeable = False
    _refused(DATA, [0, 1], out, ValueError, "out is read-only")


def test_numpy_out_overlaps():
    data = np.arange(24.0).reshape(8, 3)
    _refused(data, [0, 1], data[:2], ValueError, "out shares memory with data")
    _refused(data, [0, 1], data[6:], ValueError, "out shares memory with data")
    room = np.arange(8, dtype=np.int64)
    idx = room[:2]
    _refused(np.arange(10, dtype=np.int64), idx, room[1:3], ValueError, "with indices")
    # disjoint parts of one buffer are fine
    buf = np.zeros((10, 3))
    buf[:4] = DATA
    gatherx.gather(buf[:4], [3, 0], out=buf[6:8])
    np.testing.assert_array_equal(buf[6:8], DATA[[3, 0]])


def _torch_out(torch, shape=(2, 3), **kw):
    return torch.full(shape, -7.0, dtype=kw.pop("dtype", torch.float64), **kw)


def test_torch_out_mismatch_and_overlap():
    torch = need("torch")
    data = torch.from_numpy(DATA.copy())
    idx = torch.tensor([0, 1])
    _refused(data, idx, _torch_out(torch, (3, 2)), ValueError, r"out has shape \(3, 2\)")
    _refused(data, idx, _torch_out(torch, dtype=torch.float32), TypeError, "torch.float32")
    with pytest.raises(ValueError, match="out is on device meta, but the result is on device cpu"):
        gatherx.gather(data, idx, out=_torch_out(torch, device="meta"))
    _refused(data, idx, np.full((2, 3), -7.0), TypeError, "out must be a torch.Tensor")
    sparse = _torch_out(torch).to_sparse()
    with pytest.raises(TypeError, match=r"layout torch\.sparse_coo"):
        gatherx.gather(data, idx, out=sparse)
    _refused(data, idx, data[2:], ValueError, "out shares memory with data")
    ids = np.arange(6, dtype=np.int64)
    out = torch.from_numpy(ids)[:3]  # the host indices' own memory
    _refused(torch.arange(10), ids[2:5], out, ValueError, "with indices")
    _refused(data, [[0, 9]], _torch_out(torch, (1, 2, 3)), IndexError, "idx=9")


@pytest.mark.parametrize("who", ["data", "out"])
def test_torch_out_refuses_tensors_requiring_grad(who):
    torch = need("torch")
    data = torch.from_numpy(DATA.copy())
    out = _torch_out(torch)
    if who == "data":
        data.requires_grad_()
    else:
        out.requires_grad_()
    with pytest.raises(TypeError, match="autograd cannot differentiate a result written into out="):
        gatherx.gather(data, [0, 1], out=out)
    np.testing.assert_array_equal(out.detach().numpy(), -7.0)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
def test_torch_out_refused_under_transforms():
    torch = need("torch")
    data = torch.from_numpy(DATA.copy())
    idx = torch.tensor([0, 1])
    out = _torch_out(torch)

    def call(d, i):
        return gatherx.gather(d, i, out=out)

    with pytest.raises(TypeError, match=r"torch\.func transforms"):
        torch.func.vmap(lambda i: gatherx.gather(data, i, out=out[0]))(idx)
    with pytest.raises(TypeError, match=r"torch\.func transforms"):
        torch.func.grad(lambda d: call(d, idx).sum())(data)
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        dual = fwad.make_dual(data, torch.ones_like(data))
        with pytest.raises(TypeError, match="forward-mode AD"):
            call(dual, idx)
    with pytest.raises(TypeError, match="TorchScript tracer"):
        torch.jit.trace(call, (data, idx), check_trace=False)
    with pytest.raises(TypeError, match=r"torch\.compile and torch\.export"):
        torch.compile(call, backend="eager")(data, idx)
    np.testing.assert_array_equal(out.numpy(), -7.0)


def test_torch_out_refused_by_export():
    torch = need("torch")
    out = _torch_out(torch)

    class Mod(torch.nn.Module):
        def forward(self, d, i):
            return gatherx.gather(d, i, out=out)

    with pytest.raises(Exception, match=r"torch\.compile and torch\.export") as info:
        torch.export.export(Mod(), (torch.from_numpy(DATA.copy()), torch.tensor([0, 1])))
    assert isinstance(info.value, TypeError) or isinstance(info.value.__cause__, TypeError)
    np.testing.assert_array_equal(out.numpy(), -7.0)


@pytest.mark.parametrize("lib", ["jax", "dask", "array_api_strict"])
def test_immutable_and_lazy_arrays_refuse_out(lib):
    out = _sentinel((2, 3))
    if lib == "jax":
        data = need("jax.numpy").asarray(DATA)
    elif lib == "dask":
        data = need("dask.array").from_array(DATA, chunks=2)
    else:
        data = from_numpy(Backend.ARRAY_API_STRICT, DATA)
    lazy = f"{lib} arrays are immutable or computed lazily"
    why = "writes out= into NumPy arrays and PyTorch tensors only" if lib == "array_api_strict" \
        else lazy  # fmt: skip
    _refused(data, [0, 1], out, TypeError, why)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_out_whose_elements_share_memory_is_refused(lib):
    """A broadcast or overlapping view cannot hold a result (one place, several results):
    refused before any write; a transposed or reversed view, whose places are distinct, is
    written."""
    host = np.arange(10.0).reshape(5, 2)
    if lib == "numpy":
        data = host
        strided = np.lib.stride_tricks.as_strided
        views = [strided(np.full(2, -7.0), (3, 2), (0, 8), writeable=True),
                 strided(np.full(4, -7.0), (3, 2), (8, 8), writeable=True)]  # fmt: skip
        fine = [
            np.full((2, 3), -7.0).T,
            np.full((3, 4), -7.0)[::-1, ::2],
            strided(np.full(20, -7.0), (3, 2), (16, 24), writeable=True),
        ]  # interleaved
    else:
        torch = need("torch")
        data = torch.from_numpy(host.copy())
        views = [
            torch.full((1, 2), -7.0, dtype=torch.float64).expand(3, 2),
            torch.full((4,), -7.0, dtype=torch.float64).as_strided((3, 2), (1, 1)),
        ]
        fine = [
            torch.full((2, 3), -7.0, dtype=torch.float64).T,
            torch.full((3, 4), -7.0, dtype=torch.float64)[:, ::2],
            torch.full((20,), -7.0, dtype=torch.float64).as_strided((3, 2), (2, 3)),
        ]
    for out in views:
        _refused(data, [0, 1, 2], out, ValueError, "out has elements that share memory")
    for out in fine:
        assert gatherx.gather(data, [0, -1, 2], out=out) is out
        np.testing.assert_array_equal(to_numpy(out), host[[0, -1, 2]])


@pytest.mark.parametrize(
    ("shape", "strides"),
    [((3, 2), (0, 1)), ((3, 2), (1, 1)), ((3, 2), (2, 3)), ((3, 2), (-2, 3)), ((2, 3), (3, 1)),
     ((4, 3, 2), (1, 4, 12)), ((4, 3, 2), (1, 4, 11)), ((4, 3, 2), (1, 4, 3)), ((0, 3), (0, 0)),
     ((1, 5), (0, 1)), ((5, 1), (1, 0)), ((3, 3), (2, 1)), ((2, 2, 2), (5, 2, 1))],
)  # fmt: skip
def test_overlap_rule_against_every_elements_offset(shape, strides):
    """The rule's answer equals the brute force's: two elements at one offset (a unit of
    one element: PyTorch's strides) or, with elements of 4 units, closer than 4 apart."""
    from gatherx._rules import overlaps_itself

    offsets = sorted(
        sum(i * s for i, s in zip(at, strides, strict=True))
        for at in itertools.product(*(range(n) for n in shape))
    )
    for itemsize in (1, 4):
        expected = any(b - a < itemsize for a, b in itertools.pairwise(offsets))
        assert overlaps_itself(shape, strides, itemsize) == expected


def test_array_api_compat_wrappers_are_named_by_the_library():
    """A namespace array-api-compat wraps (array_api_compat.cupy) is named by its library."""
    import types

    from gatherx._backends.capabilities import capabilities

    wrapped = types.SimpleNamespace(__name__="array_api_compat.somelib")  # no arrays: no DLPack
    assert (capabilities(wrapped).name, capabilities(wrapped).dlpack) == ("somelib", False)


def test_numpy_dtype_names_in_messages():
    """A string dtype's length is part of it: U3 is not U7."""
    data = np.array(["abcdefg", "b"], dtype=numpy_dtype("string"))
    _refused(data, [1], np.array(["zzz"], "U3"), TypeError, "<U3")


def test_torch_out_reads_bounds_under_the_device_policy():
    """Where gatherx would check on the device, asynchronously, out= reads the index first:
    a bad index still leaves out untouched, with the host's IndexError."""
    torch = need("torch")
    from gatherx import _policy

    data = torch.from_numpy(DATA.copy())
    out = _torch_out(torch)
    with _policy.force("device"):
        _refused(data, torch.tensor([0, 7]), out, IndexError, r"idx=7 at position \(1,\)")
        gatherx.gather(data, torch.tensor([-1, 0]), out=out)
    np.testing.assert_array_equal(out.numpy(), DATA[[-1, 0]])


# ------------------------------------------------------------------------------------- bench


def test_bench_reports_huge_pages_first_and_the_out_task(capsys):
    from gatherx.bench import main

    assert main(["--quick", "--repeats", "1", "--cases", "small", "--backends", "numpy"]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    # Huge pages first (NumPy's setting where NumPy can tell, the system's); PyTorch's setting
    # only in a run that times PyTorch.
    pages = first.partition(";")[0]
    assert pages.startswith("gatherx bench: "), first
    assert "huge pages" in pages, first
    assert "PyTorch" not in pages
    summary, _, outs = text.split("\n\n")[1:4]
    assert "gatherx / preallocated copy | gatherx / allocating copy" in summary.splitlines()[0]
    assert "| small | numpy | forward (out=) | " in summary
    assert outs.splitlines()[0].startswith("| case | output | backend | gatherx | gatherx out= |")
    assert "| small | (100, 16) (0.0 MiB) | numpy |" in outs


@pytest.mark.parametrize(("value", "on"), [("1", True), ("0", False), (None, False)])
def test_bench_names_the_torch_huge_page_setting(monkeypatch, value, on):
    from gatherx.bench import machine

    if value is None:
        monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    else:
        monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", value)
    text = machine.huge_pages()
    assert text.startswith("PyTorch huge pages on" if on else "PyTorch huge pages off")
    assert "PyTorch" not in machine.huge_pages(torch=False)


def test_bench_out_entries_share_one_buffer_and_verify_catches_no_write():
    """The ``out=`` formulations write into one buffer (no buffer's placement favours one of
    them); a formulation that writes nothing fails verification, though the buffer holds a
    correct result from the one before."""
    from gatherx.bench.cases import CASES
    from gatherx.bench.formulations import (
        Entry,
        make_inputs,
        numpy_out_entries,
        scribbled,
        verify,
    )

    x = make_inputs(next(c for c in CASES if c.name == "small"))
    entries = [e for e in numpy_out_entries(x) if e.kind != "fresh"]
    results = [e.fn() for e in entries]
    assert len({r.__array_interface__["data"][0] for r in results}) == 1
    verify(entries, x)
    buf = results[0]
    lazy = Entry("numpy", "forward (out=)", "writes nothing", "native", lambda: buf,
                 check=scribbled(buf, x.out, lambda: buf))  # fmt: skip
    with pytest.raises(AssertionError, match="writes nothing on small computes a wrong result"):
        verify([*entries, lazy], x)


def test_numpy_out_flow_writes_doubled_rows():
    """Indices the fast path leaves to the flow (byte-swapped) on many short rows: the flow's
    check, then the rows twice over, give NumPy's values."""
    rng = np.random.default_rng(8)
    data = rng.standard_normal((300, 8)).astype(np.float32)  # 32-byte rows: doubled
    idx = rng.integers(-300, 300, 5000)
    out = np.full((5000, 8), np.nan, np.float32)
    assert gatherx.gather(data, idx.astype(">i8"), out=out) is out
    np.testing.assert_array_equal(out, _oracle(data, idx, 0))


@pytest.mark.parametrize("indices", [[0, 1], [[1], [-2]], 1, [0, 9]], ids=str)
def test_torch_inference_tensor_out_is_written_only_in_inference_mode(indices):
    """PyTorch writes an inference tensor only under inference_mode: refused outside it, before
    anything is read, with gatherx's message; written inside it, as torch's own out= does."""
    torch = need("torch")
    data = torch.arange(15.0).reshape(5, 3)
    index = torch.tensor(indices)
    shape = np.take(data.numpy(), np.zeros(np.shape(indices), np.int64), axis=0).shape
    with torch.inference_mode():
        out = torch.full(shape, -7.0)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        torch.index_select(data, 0, index.view(-1) % 5, out=out.view(-1, 3))  # torch's own
    for given in (index, indices):
        _refused(data, given, out, ValueError, r"^gather: out is read-only here: PyTorch writes "
                 r"an inference tensor only under torch.inference_mode\(\)")  # fmt: skip
    with torch.inference_mode():
        if indices == [0, 9]:
            _refused(data, index, out, IndexError, r"idx=9 at position \(1,\)")
        else:
            assert gatherx.gather(data, index, out=out) is out
            want = np.take(data.numpy(), np.asarray(indices), axis=0)
            np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize(
    "indices",
    [-3, [3, -4, 0], (1, -1), [], [[0, -1], [2, 3]], np.array([3, -4, 0]),
     np.array([3, -4, 0], np.int32), np.array([1, -2, 3], ">i8"), np.repeat([3, -4], 2)[::2]],
    ids=["int", "list", "tuple", "empty", "list-2d", "int64", "int32", "big-endian", "strided"],
)  # fmt: skip
def test_torch_out_of_host_indices_equals_numpy_take(indices):
    """Python ints, lists and NumPy arrays into a torch out=: np.take's values, in place."""
    torch = need("torch")
    data = torch.arange(16.0, dtype=torch.float64).reshape(4, 4)
    host = np.asarray(indices, dtype=np.int64)
    for axis in (0, 1):
        want = np.take(data.numpy(), host, axis=axis)
        out = torch.full(want.shape, -7.0, dtype=torch.float64)
        assert gatherx.gather(data, indices, axis=axis, out=out) is out
        np.testing.assert_array_equal(out.numpy(), want)
    _refused(data, [0, 4], torch.zeros(2, 4, dtype=torch.float64), IndexError, r"idx=4 at")
