"""Inputs that once took a path of their own: each gives the same answer on every backend."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import (
    Backend,
    assert_same,
    from_numpy,
    grads_at_the_rank_limit,
    need,
    numpy_max_rank,
    supports_dtype,
)

import gatherx

OOB = "indices element out of data bounds"


@pytest.mark.parametrize(
    ("shape", "axis"), [((0, 3), 1), ((3, 0), 0), ((2, 0, 4), 2), ((0,), 0)], ids=str
)
@pytest.mark.parametrize("kind", ["native", "numpy", "list"])
def test_out_of_range_index_with_an_empty_output(backend, xp, shape, axis, kind):
    """An empty output still checks its indices (NumPy's take does not)."""
    data = from_numpy(backend, np.zeros(shape, np.float32))
    host = np.array([7], np.int64)
    indices = {"native": lambda: from_numpy(backend, host), "numpy": lambda: host,
               "list": lambda: [7]}[kind]()  # fmt: skip
    with pytest.raises(IndexError, match=r"idx=7 at position \(0,\)"):
        gatherx.gather(data, indices, axis=axis)


@pytest.mark.parametrize(("shape", "axis"), [((0, 3), 1), ((3, 0), 0), ((2, 0, 4), 2)], ids=str)
def test_gather_grad_checks_its_index_with_an_empty_gradient(backend, xp, shape, axis):
    """An empty gradient adds nothing, and its indices are still checked."""
    grad_shape = (*shape[:axis], 1, *shape[axis + 1 :])
    grad = from_numpy(backend, np.zeros(grad_shape, np.float32))
    with pytest.raises(IndexError, match=r"idx=7 at position \(0,\)"):
        gatherx.gather_grad(shape, [7], grad, axis=axis)


def test_out_of_range_index_with_an_empty_output_through_onnx_run():
    need("onnx")
    from onnx import helper

    import gatherx.onnx

    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=1)
    with pytest.raises(IndexError, match="idx=7"):
        gatherx.onnx.run(node, [np.zeros((0, 3), np.float32), np.array([7], np.int64)])


@pytest.mark.parametrize("indices", [[1, True], [[0], [False]], True, [1, np.True_]])
def test_bools_in_python_indices_are_a_dtype_error(backend, xp, indices):
    data = from_numpy(backend, np.arange(3, dtype=np.float32))
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        gatherx.gather(data, indices)
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        gatherx.gather(data, np.array(indices, dtype=bool))


@pytest.mark.parametrize("value", [2**63, 2**64, -(2**63) - 1, 2**70])
def test_python_ints_beyond_int64_are_out_of_bounds(backend, xp, value):
    data = from_numpy(backend, np.arange(3, dtype=np.float32))
    pattern = rf"idx={value} at position \(1,\) of indices must be within .*\[-3,2\]"
    with pytest.raises(IndexError, match=pattern):
        gatherx.gather(data, [0, value])
    with pytest.raises(IndexError, match=rf"^gather_grad: .*idx={value}"):
        gatherx.gather_grad((3,), [0, value], from_numpy(backend, np.ones(2, np.float32)))
    with pytest.raises(IndexError, match=rf"idx={value} at position \(\)"):
        gatherx.gather(data, value)


@pytest.mark.parametrize(
    "indices",
    [[np.uint8(1)], [np.uint64(2), -1], [[np.int8(-3)], [np.uint32(0)]], [np.uint16(2), 0],
     [np.array([1], np.uint8)], [np.int32(1), np.int32(-1)]],
    ids=["uint8", "uint64-and-int", "int8-uint32", "uint16-and-int", "uint8-array", "int32"],
)  # fmt: skip
def test_numpy_integer_scalars_in_a_list_are_read_as_values(backend, xp, indices):
    """A list holds values: NumPy integer scalars of any type in it are ints."""
    values = np.array([[int(v) for v in np.ravel(row)] for row in indices] if isinstance(
        indices[0], list) else [int(np.ravel(v)[0]) for v in indices])  # fmt: skip
    values = values.reshape(np.shape(indices))
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = from_numpy(backend, host)
    assert_same(gatherx.gather(data, indices), np.take(host, values, axis=0), like=data)
    grad_host = np.ones((*values.shape, 4), np.float32)
    want = np.zeros((3, 4), np.float32)
    np.add.at(want, values, grad_host)
    grad = from_numpy(backend, grad_host)
    assert_same(gatherx.gather_grad((3, 4), indices, grad), want, like=grad)


def test_zero_d_integer_arrays_in_a_list_are_read_as_values(backend, xp):
    """0-d integer arrays in a list are ints (NumPy's, and the backend's own tensors);
    a 0-d bool is refused, not read as 0 or 1."""
    makers = [lambda value, dtype: np.array(value, dtype)]
    if backend is Backend.TORCH:
        torch = need("torch")
        makers.append(lambda value, dtype: torch.tensor(value, dtype=getattr(torch, dtype)))
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = from_numpy(backend, host)
    for make in makers:
        for indices, want in (
            ([make(2, "uint8"), make(-1, "int16"), make(0, "int64")], [2, -1, 0]),
            ([make(2, "uint64"), -1], [2, -1]),
        ):  # (NumPy: float64)
            assert_same(gatherx.gather(data, indices), host[want], like=data)
        with pytest.raises(TypeError, match=r"got \w+ .*True.* at position \(1,\)"):
            gatherx.gather(data, [0, make(True, "bool")])
    with pytest.raises(IndexError, match=r"idx=1180591620717411303424 at position \(1,\)"):
        gatherx.gather(data, [np.array(2), 2**70])


def test_two_mistakes_read_the_same_on_every_backend(backend, xp):
    """Python indices are read after the data, axis, opset and out have passed, as the flow
    checks them: the first mistake in that order is the one reported, everywhere."""
    data = from_numpy(backend, np.zeros((5, 2), np.float32))
    grad = from_numpy(backend, np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="gather: axis 9 is out of the accepted range"):
        gatherx.gather(data, [0.5], axis=9)
    with pytest.raises(ValueError, match="opset must be >= 1"):
        gatherx.gather(data, [True], opset=0)
    if supports_dtype(backend, "bfloat16") is None:  # (None: it holds them)
        half = from_numpy(backend, np.zeros(3, need("ml_dtypes").bfloat16))
        with pytest.raises(TypeError, match="bfloat16 data needs opset >= 13"):
            gatherx.gather(half, [0.5], opset=12)
    with pytest.raises(ValueError, match="gather_grad: axis 9 is out of the accepted range"):
        gatherx.gather_grad((5, 2), [0.5], grad, axis=9)
    bools = from_numpy(backend, np.zeros((1, 2), bool))
    with pytest.raises(TypeError, match="grad of dtype bool is not a numeric ONNX type"):
        gatherx.gather_grad((5, 2), [0.5], bools)
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        gatherx.gather(data, [0.5])


@pytest.mark.parametrize(
    ("shape", "indices"),
    [((2**70, 2), [0]), ((2**40, 2**40), [0]), ((3, 2**62, 2), [0]), ((2**63, 0), [])],
)
def test_gather_grad_shape_beyond_int64_elements(backend, xp, shape, indices):
    """A shape no array can have (more elements than int64 counts, or a dimension past it
    even with no elements) is refused first, before the grad is looked at."""
    grad = from_numpy(backend, np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match=r"gather_grad: shape .* holds more than 2\*\*63 - 1"):
        gatherx.gather_grad(shape, indices, grad)


def test_gather_grad_names_its_grad_in_mixed_inputs():
    torch = need("torch")
    with pytest.raises(TypeError, match=r"indices are a torch.Tensor \(torch\) but grad is a "
                       r"numpy.ndarray \(numpy\); pass indices from the grad's"):  # fmt: skip
        gatherx.gather_grad((5, 2), torch.tensor([0]), np.ones((1, 2)))


def test_numpy_result_rank_beyond_numpys_limit():
    """NumPy arrays have at most 64 dimensions, 32 before NumPy 2 (a take past them can
    crash NumPy): such a result is refused before any work; one at the limit is gathered."""
    limit = numpy_max_rank()
    ones = (1,) * (limit // 2 + 1)  # data and indices: a result of limit + 1 dimensions
    for indices in (np.zeros(ones, np.int64), np.zeros(ones, np.int32).tolist()):
        with pytest.raises(ValueError, match=f"rank {limit + 1}, more than the {limit} "):
            gatherx.gather(np.zeros(ones), indices)
        out = np.zeros((1,) * limit)  # (no array has the result's rank)
        with pytest.raises(ValueError, match=f"result would have rank {limit + 1}"):
            gatherx.gather(np.zeros(ones), indices, out=out)
    data = np.arange(2.0).reshape((2,) + (1,) * (limit // 2))
    index = np.ones((1,) * (limit // 2), np.int64)
    np.testing.assert_array_equal(gatherx.gather(data, index), np.take(data, index, axis=0))
    with pytest.raises(ValueError, match=f"gather_grad: the result would have rank {limit + 1}"):
        gatherx.gather_grad((1,) * (limit + 1), 0, np.zeros((1,) * limit))
    for got in grads_at_the_rank_limit(lambda g: g, limit):
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("lib", ["array_api_strict", "dask"])
def test_libraries_on_numpy_arrays_have_numpys_rank_limit(lib):
    limit = numpy_max_rank()
    ones = (1,) * (limit // 2 + 1)
    host = np.zeros(ones, np.float32)
    if lib == "dask":
        data = need("dask.array").from_array(host, chunks=1)
    else:
        data = from_numpy(Backend.ARRAY_API_STRICT, host)
    text = f"rank {limit + 1}, more than the {limit} dimensions an? {lib} array"
    with pytest.raises(ValueError, match=text):
        gatherx.gather(data, np.zeros(ones, np.int64))
    index = np.zeros((1,) * (limit // 2), np.int64)  # a result at the limit: gathered
    assert np.asarray(gatherx.gather(data, index)).shape == (1,) * limit
    if lib == "dask":
        da = need("dask.array")

        def hold(x):
            return x.compute() if isinstance(x, da.Array) else da.from_array(x, chunks=2)
    else:

        def hold(x):
            return (
                np.asarray(x)
                if not isinstance(x, np.ndarray)
                else from_numpy(Backend.ARRAY_API_STRICT, x)
            )

    for got in grads_at_the_rank_limit(hold, limit):
        np.testing.assert_array_equal(*got)


def test_structured_dtype_names_do_not_depend_on_earlier_calls():
    plain = np.zeros(3, dtype=[("a", "f8")])
    for data, name in ((plain.view(np.recarray), "record64"), (plain, "void64")):
        with pytest.raises(TypeError, match=f"numpy data of dtype {name} is not an ONNX"):
            gatherx.gather(data, [0])


@pytest.mark.parametrize("dtype", [">i8", ">i4", "<i8"])
def test_index_byte_order(backend, xp, dtype):
    host = np.arange(12, dtype=np.float32).reshape(4, 3)
    indices = np.array([[2, -1], [0, 3]], dtype=dtype)
    expected = np.take(host, indices.astype(np.int64), axis=0)
    data = from_numpy(backend, host)
    assert_same(gatherx.gather(data, indices), expected, like=data)
    grad = from_numpy(backend, np.ones((2, 2, 3), np.float32))
    want = np.zeros((4, 3), np.float32)
    np.add.at(want, indices.astype(np.int64), 1.0)
    assert_same(gatherx.gather_grad((4, 3), indices, grad), want, like=grad)


@pytest.mark.parametrize("dtype", [">f4", ">i8", ">c16", "<U5", "S3"])
def test_numpy_data_byte_order_and_width_are_kept(dtype):
    data = np.array(["ab", "cde", "f"] if dtype[-2] in "US" else [1, 2, 3], dtype=dtype)
    for indices in ([2, -1], 1, np.array(-2)):
        out = gatherx.gather(data, indices)
        expected = np.take(data, indices)
        assert type(out) is np.ndarray
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_numpy_string_dtype_is_a_string_type(axis):
    """NumPy's own variable-width strings (StringDType) are ONNX strings, at every opset."""
    if not hasattr(np.dtypes, "StringDType"):
        pytest.skip("NumPy < 2 has no StringDType")
    data = np.array([["a", "bb", "ccc"], ["dd", "", "f"]], dtype=np.dtypes.StringDType())
    for indices in ([1, -1], np.array([[0, 1], [-2, 0]]), -1, list(range(-2, 2)) * 10):
        expected = np.take(data, np.asarray(indices) % data.shape[axis], axis=axis)
        for opset in (1, 13):
            if opset == 1 and np.min(indices) < 0:
                continue
            got = gatherx.gather(data, indices, axis=axis, opset=opset)
            assert got.dtype == data.dtype
            assert got.tolist() == expected.tolist()
        out = np.empty_like(expected)
        assert gatherx.gather(data, indices, axis=axis, out=out) is out
        assert out.tolist() == expected.tolist()


def test_rank_zero_numpy_results_keep_object_elements():
    data = np.empty(3, dtype=object)
    data[:] = [[1, 2], "x", 3.5]
    out = gatherx.gather(data, 0)
    assert out.dtype == object
    assert out.shape == ()
    assert out.item() == [1, 2]
    assert gatherx.gather(data, np.array(-2)).item() == "x"


def _matrix(values):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(values)


@pytest.mark.parametrize(
    "make",
    [lambda: np.ma.masked_array([0, 1], mask=[False, True]), lambda: _matrix([[0, 1]])],
    ids=["masked", "matrix"],
)
def test_numpy_subclasses_with_their_own_indexing_are_refused(backend, xp, make):
    indices = make()
    data = from_numpy(backend, np.arange(6, dtype=np.float32).reshape(3, 2))
    with pytest.raises(TypeError, match=r"indices of type numpy\.\w+ are not supported"):
        gatherx.gather(data, indices)
    with pytest.raises(TypeError, match=r"^gather_grad: indices of type numpy"):
        gatherx.gather_grad((3, 2), indices, from_numpy(backend, np.ones((2, 2), np.float32)))


def test_numpy_subclass_data_is_refused_or_viewed():
    data = np.arange(6.0).reshape(3, 2)
    with pytest.raises(TypeError, match="data of type numpy"):
        gatherx.gather(np.ma.masked_array(data), [0])
    with pytest.raises(TypeError, match="data of type numpy"):
        gatherx.gather(_matrix(data), [0])

    class Tagged(np.ndarray):
        pass

    out = gatherx.gather(data.view(Tagged), [2, 0])
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, data[[2, 0]])


@pytest.mark.parametrize("shape", [(3, 2.0), (3, True), ("32",), "32", b"\x01\x02", 3, None])
def test_gather_grad_shape_must_hold_ints(backend, xp, shape):
    """Sequences of ints only: a str or bytes is refused, though bytes iterate as ints."""
    grad = from_numpy(backend, np.ones((1, 2), np.float32))
    with pytest.raises(TypeError, match=r"^gather_grad: shape must be a sequence of ints"):
        gatherx.gather_grad(shape, from_numpy(backend, np.array([0])), grad)


@pytest.mark.parametrize("shape", [(-3, 2), (3, -2), [3, -2], (np.int64(3), -2)])
def test_gather_grad_shape_must_be_non_negative(backend, xp, shape):
    """A tuple of ints, a list or NumPy ints alike: a negative dimension is refused."""
    grad = from_numpy(backend, np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match=r"^gather_grad: shape must have non-negative dim"):
        gatherx.gather_grad(shape, from_numpy(backend, np.array([0])), grad)


def test_gather_grad_errors_name_gather_grad(backend, xp):
    grad = from_numpy(backend, np.ones((2, 4), np.float32))
    for call, error in [
        (lambda: gatherx.gather_grad((5, 4), [0, 5], grad), IndexError),
        (lambda: gatherx.gather_grad((5, 4), [0, 1], grad, axis=2), ValueError),
        (lambda: gatherx.gather_grad((5, 4), [0, 1], grad, axis=1.0), TypeError),
        (lambda: gatherx.gather_grad((5, 4), np.array([0.0, 1.0]), grad), TypeError),
        (lambda: gatherx.gather_grad((5, 4), [0, 1, 2], grad), ValueError),
        (lambda: gatherx.gather_grad((5, 4), [0, 1], "grad"), TypeError),
    ]:
        with pytest.raises(error, match=r"^gather_grad: "):
            call()


def test_read_only_numpy_indices_leave_no_warning(backend, xp):
    indices = np.array([2, -1, 0])
    indices.flags.writeable = False
    data = from_numpy(backend, np.arange(3, dtype=np.float32))
    # filterwarnings=error turns torch's "not writable" UserWarning into a failure
    assert_same(gatherx.gather(data, indices), np.array([2, 2, 0], np.float32), like=data)
    assert not indices.flags.writeable


@pytest.mark.parametrize(
    "make",
    [lambda: np.array([2, 0])[::-2], lambda: np.array([[2], [-5]])[::-2], lambda: np.array(-1)],
    ids=["1-d", "2-d", "0-d"],
)
def test_numpy_indices_contiguous_with_a_negative_stride(backend, xp, make):
    """NumPy counts an axis of length 1 as contiguous whatever its stride (torch refuses a
    negative one): such indices read as any other, in gather, out=, gather_grad and (PyTorch)
    a gather whose data requires grad or is a subclass."""
    indices = make()
    if indices.ndim:
        assert indices.flags.c_contiguous
        assert min(indices.strides) < 0
    host = np.arange(5, dtype=np.float32)
    data = from_numpy(backend, host)
    want = np.take(host, indices % 5)
    assert_same(gatherx.gather(data, indices), want, like=data)
    grad = np.ones(want.shape, np.float32)
    expected = np.zeros(5, np.float32)
    np.add.at(expected, indices % 5, grad)
    assert_same(gatherx.gather_grad((5,), indices, from_numpy(backend, grad)), expected, like=data)
    if backend in (Backend.NUMPY, Backend.TORCH):
        out = from_numpy(backend, np.full(want.shape, 7.0, np.float32))
        assert gatherx.gather(data, indices, out=out) is out
        assert_same(out, want, like=data)
    if backend is Backend.TORCH:
        leaf = data.clone().requires_grad_(True)
        gatherx.gather(leaf, indices).backward(from_numpy(backend, grad))
        assert_same(leaf.grad, expected, like=data)
        torch = need("torch")

        class Sub(torch.Tensor):  # a subclass: the general path's host read
            pass

        got = gatherx.gather(data.as_subclass(Sub), indices)
        assert type(got) is Sub
        assert_same(got.as_subclass(torch.Tensor), want, like=data)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_precision_gradients_are_summed_in_float32(backend, xp, name):
    reason = supports_dtype(backend, name)
    if reason:
        pytest.skip(reason)
    ml_dtypes = need("ml_dtypes")
    dtype = np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)
    host = np.full((2000, 3), 0.1, dtype)
    grad = from_numpy(backend, host)
    # The oracle sums in float64 and rounds once.
    want = np.zeros((4, 3))
    np.add.at(want, np.zeros(2000, np.int64), host.astype(np.float64))
    out = gatherx.gather_grad((4, 3), np.zeros(2000, np.int64), grad)
    assert_same(out, want.astype(dtype), like=grad)


def test_array_api_strict_devices():
    xp = need("array_api_strict")
    host = np.arange(6, dtype=np.float32)

    def values(x):
        return np.asarray(xp.asarray(x, device=xp.Device("CPU_DEVICE")))

    # a device without 64-bit types: host indices (int64 lists and arrays) are moved as int32
    no_x64 = xp.Device("no_x64")
    data = xp.asarray(host, device=no_x64)
    for indices in ([1, -1], np.array([1, -1]), np.array([[5], [0]], np.int32), -2):
        got = gatherx.gather(data, indices)
        assert got.device == no_x64
        np.testing.assert_array_equal(values(got), np.take(host, indices))
    grad = xp.ones(3, dtype=xp.float32, device=no_x64)
    expected = np.zeros(6, np.float32)
    np.add.at(expected, [1, -1, 1], 1.0)
    for indices in ([1, -1, 1], xp.asarray([1, -1, 1], dtype=xp.int32, device=no_x64)):
        got = gatherx.gather_grad((6,), indices, grad)
        np.testing.assert_array_equal(values(got), expected)
    # indices on another device than the data: gatherx's error, before any work
    one = xp.Device("device1")
    data = xp.asarray(host, device=one)
    np.testing.assert_array_equal(values(gatherx.gather(data, [2, 0])), host[[2, 0]])
    with pytest.raises(ValueError, match=r"^gather: indices are on device .*CPU_DEVICE.* but data"):
        gatherx.gather(data, xp.asarray([1, 2]))
    with pytest.raises(ValueError, match=r"^gather_grad: indices are on device .* but grad is on"):
        gatherx.gather_grad((6,), xp.asarray([1, 2]), xp.ones(2, device=one))


@pytest.mark.parametrize(
    ("indices", "plain"),
    [(0, True), (-(2**63), True), (2**63 - 1, True), (2**63, False), (True, False),
     ([], True), ([[], []], True), ([[1, 2], [3, 4]], True), ((1, (2,)), False),
     ([[1, 2], [3]], False), ([1, [2]], False), ([1.0], False), ([2**64], False),
     ([[True]], False), ([np.int64(1)], False), (np.array([1]), False), ("1", False)],
)  # fmt: skip
def test_plain_ints_are_what_a_tracer_holds_as_a_constant_tensor(indices, plain):
    """Python ints, or rectangular nests of lists and tuples of them within int64: what
    torch.compile turns into a constant tensor (anything else takes the NumPy path)."""
    from gatherx._indices import plain_ints_shape

    shape = plain_ints_shape(indices)
    assert (shape is not None) is plain
    if plain:  # read as NumPy reads them, as int64
        assert shape == np.asarray(indices, dtype=np.int64).shape == np.shape(indices)
