"""onnxruntime as an independent Gather oracle (numeric dtypes it runs; never strings)."""

from __future__ import annotations

import functools

import numpy as np
from support import need

#: What onnxruntime's CPU Gather runs from NumPy: no complex, no bfloat16, and strings are wrong
#: on non-last axes, so none of those are asked of it.
ORT_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64"]  # fmt: skip


@functools.cache
def _session(dtype: str, index_dtype: str, axis: int, opset: int, ranks: tuple[int, int]):
    onnx = need("onnx")
    ort = need("onnxruntime")
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype

    data_t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    index_t = np_dtype_to_tensor_dtype(np.dtype(index_dtype))
    node = helper.make_node("Gather", ["data", "indices"], ["output"], axis=axis)
    graph = helper.make_graph(
        [node], "gather",
        [helper.make_tensor_value_info("data", data_t, [None] * ranks[0]),
         helper.make_tensor_value_info("indices", index_t, [None] * ranks[1])],
        [helper.make_tensor_value_info("output", data_t, [None] * (sum(ranks) - 1))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def ort_gather(data: np.ndarray, indices: np.ndarray, axis: int, opset: int = 13) -> np.ndarray:
    session = _session(data.dtype.name, indices.dtype.name, axis, opset, (data.ndim, indices.ndim))
    return session.run(None, {"data": data, "indices": indices})[0]
