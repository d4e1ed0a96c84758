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
    need("onnx")
    ort = need("onnxruntime")
    from gatherx._check import gather_model  # the model the onnxruntime adapter runs

    model = gather_model(np.dtype(dtype), np.dtype(index_dtype), axis, ranks, opset)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def ort_gather(data: np.ndarray, indices: np.ndarray, axis: int, opset: int = 13) -> np.ndarray:
    session = _session(data.dtype.name, indices.dtype.name, axis, opset, (data.ndim, indices.ndim))
    return session.run(None, {"data": data, "indices": indices})[0]
