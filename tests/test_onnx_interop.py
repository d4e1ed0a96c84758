"""gatherx.onnx: Gather nodes and models run by gatherx; torch modules exported to onnxruntime."""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest
from support import Backend, assert_same, from_numpy, need, to_numpy

import gatherx

onnx = need("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

gxo = need("gatherx.onnx")

# The torch.export-based exporter trips a deprecation inside torch's own pytree code.
DYNAMO_WARNING = "ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning"


def _official():
    """The official ``test_gather_*`` node cases of the installed onnx, models included."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # other operators' generators warn as they register
        import onnx.backend.test.case.node as node_cases

        try:
            # Importing the Gather module registers its cases: far faster than collecting all.
            import onnx.backend.test.case.node.gather  # noqa: F401

            found = list(node_cases._NodeTestCases)
        except (ImportError, AttributeError):
            found = []
        if not any(t.model.graph.node[0].op_type == "Gather" for t in found):
            found = node_cases.collect_testcases("Gather")
    return [t for t in found if t.model.graph.node[0].op_type == "Gather"]


OFFICIAL = _official()


def test_the_official_cases_are_there():
    assert {t.name for t in OFFICIAL} >= {
        "test_gather_0",
        "test_gather_1",
        "test_gather_2d_indices",
        "test_gather_negative_indices",
    }


@pytest.mark.parametrize("case", OFFICIAL, ids=[t.name for t in OFFICIAL])
@pytest.mark.parametrize("form", ["model", "graph", "node"])
def test_official_cases(backend, xp, case, form):
    model = case.model
    proto = {"model": model, "graph": model.graph, "node": model.graph.node[0]}[form]
    opset = None if form == "model" else gxo.opset_of(model)
    assert case.data_sets
    for inputs, outputs in case.data_sets:
        data, indices = (from_numpy(backend, x) for x in inputs)
        (out,) = gxo.run(proto, [data, indices], opset=opset)
        assert_same(out, outputs[0], like=data)
        names = list(model.graph.node[0].input)
        (out,) = gxo.run(proto, {names[0]: data, names[1]: indices}, opset=opset)
        assert_same(out, outputs[0], like=data)


def _gather_model(opset, axis=None, data_shape=(5, 3), indices_shape=(2,), initializers=()):
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Gather", ["data", "indices"], ["out"], **attrs)
    graph = helper.make_graph(
        [node],
        "gather",
        [
            helper.make_tensor_value_info(n, t, s)
            for n, t, s in [
                ("data", TensorProto.FLOAT, data_shape),
                ("indices", TensorProto.INT64, indices_shape),
            ]
            if n not in {i.name for i in initializers}
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@functools.cache
def newest_ort_opset() -> int:
    """The newest default-domain opset onnxruntime accepts a Gather model of."""
    ort = need("onnxruntime")
    for version in range(onnx.defs.onnx_opset_version(), 12, -1):
        try:
            ort.InferenceSession(_gather_model(version).SerializeToString())
        except Exception:  # onnxruntime's Fail/InvalidGraph: the opset is too new for it
            continue
        return version
    pytest.fail("onnxruntime accepts no Gather model from opset 13 up")


def _ort(model, feeds):
    ort = need("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString())
    return session.run(None, feeds)


DATA = np.arange(15, dtype=np.float32).reshape(5, 3)


@pytest.mark.parametrize("opset", [1, 10])
def test_models_before_opset_11_reject_negative_indices(backend, xp, opset):
    model = _gather_model(opset)
    data = from_numpy(backend, DATA)
    (out,) = gxo.run(model, [data, from_numpy(backend, np.array([4, 0]))])
    assert_same(out, DATA[[4, 0]], like=data)
    with pytest.raises(IndexError, match=re.escape("negative indices need opset >= 11")):
        gxo.run(model, [data, from_numpy(backend, np.array([0, -1]))])


@pytest.mark.parametrize("opset", [11, 13, "newest"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_models_agree_with_onnxruntime(opset, axis):
    opset = newest_ort_opset() if opset == "newest" else opset
    indices = np.array([[-1, 0], [2, -3]], dtype=np.int64)
    model = _gather_model(opset, axis, indices_shape=(2, 2))
    (want,) = _ort(model, {"data": DATA, "indices": indices})
    np.testing.assert_array_equal(want, np.take(DATA, indices, axis=axis or 0))
    (got,) = gxo.run(model, [DATA, indices])
    assert_same(got, want)


def test_initializers_feed_the_node(backend, xp):
    indices = np.array([[2, -1]], dtype=np.int64)
    model = _gather_model(13, 1, initializers=[numpy_helper.from_array(indices, "indices")])
    (want,) = _ort(model, {"data": DATA})
    data = from_numpy(backend, DATA)
    (got,) = gxo.run(model, [data])
    assert_same(got, want, like=data)
    # Data as an initializer: it moves to the framework and device of the given indices.
    model = _gather_model(13, 0, initializers=[numpy_helper.from_array(DATA, "data")])
    (want,) = _ort(model, {"indices": np.array([3, -5])})
    idx = from_numpy(backend, np.array([3, -5]))
    (got,) = gxo.run(model, {"indices": idx})
    assert_same(got, want, like=idx if backend is not Backend.NUMPY else None)


def test_a_table_in_the_model_runs_at_any_backends_indices(backend, xp):
    """A table held by the model moves to its indices' framework as that framework holds
    NumPy data: bfloat16 as a tensor of its bits on PyTorch; on JAX as NumPy data, so that
    what JAX cannot hold is refused as gather refuses it (64-bit integers beyond 32 bits
    without x64, strings), never wrapped; a dtype the library has no arrays of is named."""
    ml_dtypes = need("ml_dtypes")
    bfloat16 = np.arange(6.0).reshape(3, 2).astype(ml_dtypes.bfloat16)
    wide = np.array([[2**40, 7], [5, -(2**40)], [1, 2]])
    strings = np.array([["a", "b"], ["c", "d"], ["e", "f"]])
    jax_x64 = backend is Backend.JAX and bool(need("jax").config.jax_enable_x64)
    refused = {
        Backend.NUMPY: {},
        Backend.TORCH: {"str": "gatherx.onnx: .* dtype string cannot be moved to torch"},
        Backend.JAX: {"str": "JAX arrays hold no strings"}
        | ({} if jax_x64 else {"int": "holds 1099511627776 at position \\(0, 0\\), beyond int32"}),
        Backend.ARRAY_API_STRICT: {
            "bfl": "gatherx.onnx: .* dtype bfloat16 cannot be moved to array_api_strict",
            "str": "gatherx.onnx: .* dtype string cannot be moved to array_api_strict",
        },
    }[backend]
    host = np.array([2, -1, 0])
    for table in (bfloat16, wide, strings):
        model = _gather_model(13, 0, initializers=[numpy_helper.from_array(table, "data")])
        ids = from_numpy(backend, host)
        kind = table.dtype.name[:3]
        if kind in refused:
            with pytest.raises(TypeError, match=refused[kind]):
                gxo.run(model, [ids])
            continue
        (got,) = gxo.run(model, [ids])
        want = np.take(table, host % 3, axis=0)
        if kind == "str":  # (NumPy: object arrays of str, as onnx reads string tensors)
            assert np.asarray(got).tolist() == want.tolist()
        else:
            assert_same(got, want, like=ids if backend is not Backend.NUMPY else None)


@pytest.mark.parametrize(
    ("change", "error", "pattern"),
    [
        (
            lambda m: setattr(m.graph.node[0], "op_type", "GatherElements"),
            ValueError,
            "can only run a Gather node, got GatherElements",
        ),
        (
            lambda m: setattr(m.graph.node[0], "domain", "com.microsoft"),
            ValueError,
            "got com.microsoft::Gather",
        ),
        (
            lambda m: m.graph.node[0].attribute.append(helper.make_attribute("batch_dims", 1)),
            ValueError,
            "one int attribute, axis; got 'batch_dims'",
        ),
        (
            lambda m: m.graph.node.append(helper.make_node("Identity", ["out"], ["y"])),
            ValueError,
            r"one Gather node, got \['Gather', 'Identity'\]",
        ),
        (lambda m: m.graph.node[0].input.append("extra"), ValueError, "takes 2 inputs"),
    ],
)
def test_what_is_not_a_gather_is_refused(change, error, pattern):
    model = _gather_model(13)
    change(model)
    with pytest.raises(error, match=pattern):
        gxo.run(model, [DATA, np.array([0, 1])])


def test_inputs_and_opset_are_checked():
    model = _gather_model(13)
    with pytest.raises(ValueError, match="expected 2 input"):
        gxo.run(model, [DATA])
    with pytest.raises(ValueError, match=re.escape("no value for input(s) ['indices']")):
        gxo.run(model, {"data": DATA})
    with pytest.raises(ValueError, match="the model is opset 13, not 11"):
        gxo.run(model, [DATA, np.array([0])], opset=11)
    model.opset_import[0].domain = "com.example"
    with pytest.raises(ValueError, match="does not import the default ONNX domain"):
        gxo.run(model, [DATA, np.array([0])])


# ---- export ----------------------------------------------------------------------------------


def _modules():
    torch = need("torch")

    class Embedding(torch.nn.Module):
        """A lookup table: the data is a parameter, the indices the input."""

        def __init__(self) -> None:
            super().__init__()
            seeded = torch.Generator().manual_seed(0)
            self.table = torch.nn.Parameter(torch.randn(10, 4, generator=seeded))

        def forward(self, indices):
            return gatherx.gather(self.table, indices, axis=0)

    class Columns(torch.nn.Module):
        """Both operands are inputs; the gather sits between other operators."""

        def forward(self, x, indices):
            return torch.tanh(gatherx.gather(x * 2.0, indices, axis=-1)) + 1.0

    return Embedding().eval(), Columns().eval()


def _check_export(model, module, examples, opset):
    torch = need("torch")
    assert gxo.opset_of(model) == opset
    gathers = [n for n in model.graph.node if n.op_type == "Gather"]
    assert gathers, [n.op_type for n in model.graph.node]
    names = [i.name for i in model.graph.input]
    for args in examples:
        with torch.no_grad():
            want = module(*args).numpy()
        got = _ort(model, {n: a.numpy() for n, a in zip(names, args, strict=True)})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return gathers


def _examples():
    torch = need("torch")
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(1))
    embedding = [(torch.tensor([[1, 9], [0, 3]]),), (torch.tensor([[-1, 2], [5, -10]]),)]
    columns = [(x, torch.tensor([5, 0, 2])), (x + 1, torch.tensor([-1, -6, 3]))]
    return embedding, columns


@pytest.mark.parametrize("opset", [11, 13])
def test_export_below_opset_18_is_one_gather_node(opset, tmp_path):
    need("torch")
    need("onnxruntime")
    embedding, columns = _modules()
    embedding_args, columns_args = _examples()
    model = gxo.export(embedding, embedding_args[0], tmp_path / "embedding.onnx", opset=opset)
    (gather,) = _check_export(model, embedding, embedding_args, opset)
    # The whole graph is that one node, so gatherx can run the exported model itself.
    assert [n.op_type for n in model.graph.node] == ["Gather"]
    assert onnx.load(tmp_path / "embedding.onnx") == model
    for backend in (Backend.NUMPY, Backend.TORCH):
        indices = from_numpy(backend, embedding_args[1][0].numpy())
        (out,) = gxo.run(model, [indices])
        assert_same(
            out, _ort(model, {model.graph.input[0].name: to_numpy(indices)})[0], like=indices
        )
    model = gxo.export(columns, columns_args[0], opset=opset)
    (gather,) = _check_export(model, columns, columns_args, opset)
    assert helper.get_attribute_value(gather.attribute[0]) == 1  # axis -1 of rank 2


@pytest.mark.filterwarnings(DYNAMO_WARNING)
@pytest.mark.parametrize("opset", [11, 13, "newest"])
def test_export_at_negative_indices_keeps_the_bounds(opset):
    """The exported Gather wraps [-s, -1] and refuses [-2s, -s-1] itself: no wrap is traced
    before it (the model drops gatherx's in-graph assert, and a wrap would read them as rows),
    whatever the example's signs. Below opset 18 the model is the one node, and an
    out-of-range example is the eager IndexError."""
    torch = need("torch")
    need("onnxruntime")
    if opset == "newest":
        need("onnxscript")
        opset = newest_ort_opset()
    refused = need("onnxruntime.capi.onnxruntime_pybind11_state").InvalidArgument
    embedding, columns = _modules()
    embedding_args, columns_args = _examples()
    for example in embedding_args:
        model = gxo.export(embedding, example, opset=opset)
        _check_export(model, embedding, embedding_args, opset)
        name = model.graph.input[0].name
        for bad in (-11, -20):  # + 10 would read row 9, row 0
            with pytest.raises(refused, match="out of data bounds"):
                _ort(model, {name: np.array([[bad, 0], [1, 2]])})
        if opset < gxo.DYNAMO_MIN_OPSET:
            assert [n.op_type for n in model.graph.node] == ["Gather"]
    model = gxo.export(columns, columns_args[1], opset=opset)
    _check_export(model, columns, columns_args, opset)
    if opset < gxo.DYNAMO_MIN_OPSET:
        with pytest.raises(IndexError, match=r"idx=10 at position \(1,\) of indices"):
            gxo.export(embedding, (torch.tensor([0, 10]),), opset=opset)


def test_export_of_bfloat16_below_opset_13_is_refused():
    """ONNX has bfloat16 from opset 13: an export below it would write an invalid model."""
    torch = need("torch")
    need("onnxruntime")

    class Table(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(12.0).reshape(4, 3).bfloat16())

        def forward(self, indices):
            return gatherx.gather(self.table, indices)

    ids = (torch.tensor([0, -1]),)
    with pytest.raises(TypeError, match="bfloat16 values at opset 11: export at opset 13"):
        gxo.export(Table().eval(), ids, opset=11)
    model = gxo.export(Table().eval(), ids, opset=13)
    assert [n.op_type for n in model.graph.node] == ["Gather"]

    class Cast(torch.nn.Module):  # bfloat16 made inside the graph, typed nowhere
        def forward(self, data, indices):
            return gatherx.gather(data.to(torch.bfloat16), indices).float()

    args = (torch.randn(4, 3), torch.tensor([1, -1]))
    for opset in (11, 12):
        with pytest.raises(TypeError, match=f"bfloat16 values at opset {opset}: export at"):
            gxo.export(Cast().eval(), args, opset=opset)
    model = gxo.export(Cast().eval(), args, opset=13)
    onnx.checker.check_model(model, full_check=True)
    (got,) = _ort(model, {i.name: a.numpy() for i, a in zip(model.graph.input, args, strict=True)})
    want = args[0].to(torch.bfloat16)[[1, -1]].float().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings(DYNAMO_WARNING)
def test_export_at_the_newest_opset():
    need("torch")
    need("onnxruntime")
    need("onnxscript")
    opset = newest_ort_opset()
    embedding, columns = _modules()
    embedding_args, columns_args = _examples()
    _check_export(
        gxo.export(embedding, embedding_args[0], opset=opset), embedding, embedding_args, opset
    )
    _check_export(gxo.export(columns, columns_args[0], opset=opset), columns, columns_args, opset)


@pytest.mark.filterwarnings(DYNAMO_WARNING)
def test_plain_torch_onnx_export():
    """No gatherx helper: torch.onnx.export's default (dynamo) exporter writes a Gather."""
    torch = need("torch")
    need("onnxruntime")
    need("onnxscript")
    embedding, _ = _modules()
    embedding_args, _ = _examples()
    program = torch.onnx.export(embedding, embedding_args[0], dynamo=True)
    _check_export(program.model_proto, embedding, embedding_args, gxo.opset_of(program.model_proto))


def test_torchscript_exporter_writes_one_gather_node():
    """The autograd function's own ``symbolic`` serves a plain TorchScript export."""
    torch = need("torch")
    need("onnxruntime")
    _, columns = _modules()
    _, columns_args = _examples()
    import io

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated, and traces
        torch.onnx.export(columns, columns_args[0], buffer, dynamo=False, opset_version=13)
    model = onnx.load_from_string(buffer.getvalue())
    (gather,) = _check_export(model, columns, columns_args, 13)
    assert helper.get_attribute_value(gather.attribute[0]) == 1
