"""Reference cases: the official ONNX Gather node tests and the spec's worked examples."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    """One Gather evaluation with its expected output, as written by the ONNX project."""

    name: str
    data: np.ndarray
    indices: np.ndarray
    axis: int
    opset: int
    expected: np.ndarray
    source: str


def spec_examples() -> list[Case]:
    """The two worked examples of Gather-1/Gather-13 (``../shared/spec``), verbatim."""
    data = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)
    example_1 = Case(
        "spec_example_axis0",
        data,
        np.array([[0, 1], [1, 2]], dtype=np.int64),
        0,
        13,
        np.array([[[1.0, 1.2], [2.3, 3.4]], [[2.3, 3.4], [4.5, 5.7]]], dtype=np.float32),
        "spec",
    )
    data_2 = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], dtype=np.float32)
    example_2 = Case(
        "spec_example_axis1",
        data_2,
        np.array([[0, 2]], dtype=np.int64),
        1,
        13,
        np.array([[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]], dtype=np.float32),
        "spec",
    )
    # Gather-1 states the same examples; run them under opset 1 too.
    as_opset_1 = [
        dataclasses.replace(c, name=c.name + "_opset1", opset=1) for c in (example_1, example_2)
    ]
    return [example_1, example_2, *as_opset_1]


@functools.lru_cache(maxsize=1)
def onnx_cases() -> tuple[Case, ...]:
    """The official ``test_gather_*`` node cases; requires the ``onnx`` package.

    Importing only the Gather module of ``onnx.backend.test.case.node`` registers its cases in
    a fraction of a second; ``collect_testcases`` (which imports every operator) is the fallback.
    """
    with warnings.catch_warnings():
        # Other operators' case generators emit numpy RuntimeWarnings on import.
        warnings.simplefilter("ignore")
        import onnx.backend.test.case.node as node_cases

        try:
            import onnx.backend.test.case.node.gather  # noqa: F401

            found = [c for c in node_cases._NodeTestCases if _op_type(c) == "Gather"]
        except (ImportError, AttributeError):
            found = []
        if not found:
            found = node_cases.collect_testcases("Gather")

    cases = []
    for test in found:
        model: Any = test.model
        node = model.graph.node[0]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        data_sets = list(test.data_sets or ())
        for k, (inputs, outputs) in enumerate(data_sets):
            suffix = f"_{k}" if len(data_sets) > 1 else ""
            cases.append(
                Case(test.name + suffix, inputs[0], inputs[1], axis, opset, outputs[0], "onnx")
            )
    return tuple(cases)


def _op_type(test: object) -> str:
    return test.model.graph.node[0].op_type  # type: ignore[attr-defined]


def all_cases() -> list[Case]:
    """Official cases (when ``onnx`` is installed) followed by the spec's examples."""
    try:
        official = list(onnx_cases())
    except ImportError:
        official = []
    return official + spec_examples()
