"""What an array-API library can do, decided once per namespace; the generic backend asks here."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from .._rules import NUMPY_MAX_RANK

#: How a library evaluates: at once, as a chunked graph computed later, or as a graph of
#: operators whose values a runtime computes (symbolic dimensions allowed).
EAGER, CHUNKED, GRAPH = "eager", "chunked", "graph"


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """The answers for one namespace; every generic path follows them, none guesses.

    Attributes
    ----------
    name : str
        The namespace's top-level module (``cubed``, ``ndonnx``, ``sparse``, ...).
    evaluation : str
        :data:`EAGER`, :data:`CHUNKED` (values only at compute: bounds checked in the graph)
        or :data:`GRAPH` (values may be unknown until a runtime runs the model).
    symbolic_shapes : bool
        Whether a dimension may be unknown (``None``) when the call is made.
    dlpack : bool
        Whether NumPy can read the library's arrays through DLPack.
    native_indices : bool
        Whether indices stay arrays of the library (on its device); if not, they are read
        into host NumPy arrays, which the library's own gather takes (pydata sparse).
    sparse : bool
        Whether arrays are sparse: the result keeps the data's sparse format.
    lacks : dict
        ONNX dtypes the library can name but not compute with, and why.
    ordered_sums : bool
        Whether its sums over an axis add each row's terms in one order whatever the array's
        shape, exactly for 64-bit integers. onnxruntime (ndonnx's evaluator) does neither:
        its ``ReduceSum`` adds a row's float terms in another order as the array holds more
        rows (two slots of the same terms read sums thousands of float32 ulps apart), and
        rounds 64-bit integers through float64 (with no uint64 ``Where``): there the masked
        sums are running sums (``CumSum``), term after term in index order as ``np.add.at``
        adds, for every row (of int64 for uint64, the same bits).
    strings_last_axis : bool
        Whether string data is gathered along its last axis only (axes moved there and
        back): onnxruntime's string Gather (ndonnx's evaluator, 1.32) copies one element per
        index where a slice holds more.
    max_rank : int or None
        The most dimensions its arrays have, where gatherx knows it (NumPy's, for libraries
        built on NumPy arrays).
    """

    name: str
    evaluation: str = EAGER
    symbolic_shapes: bool = False
    dlpack: bool = True
    native_indices: bool = True
    sparse: bool = False
    lacks: dict[str, str] = dataclasses.field(default_factory=dict)
    ordered_sums: bool = True
    strings_last_axis: bool = False
    max_rank: int | None = None


#: The libraries whose answers differ from an eager, dense, DLPack-capable namespace.
_KNOWN = {
    "cubed": Capabilities(
        "cubed",
        evaluation=CHUNKED,
        dlpack=False,
        lacks={"bfloat16": "Zarr, where cubed stores every array, has no bfloat16"},
        max_rank=NUMPY_MAX_RANK,
    ),
    "ndonnx": Capabilities(
        "ndonnx",
        evaluation=GRAPH,
        symbolic_shapes=True,
        dlpack=False,
        ordered_sums=False,
        strings_last_axis=True,
    ),
    # (sparse ravels a result's coordinates with NumPy, which takes one dimension fewer)
    "sparse": Capabilities(
        "sparse", dlpack=False, native_indices=False, sparse=True, max_rank=NUMPY_MAX_RANK - 1
    ),
}


#: Libraries built on NumPy arrays, and so held to NumPy's rank.
_ON_NUMPY = frozenset({"array_api_strict"})


def capabilities(xp: Any) -> Capabilities:
    """The answers for namespace ``xp``: a known library's, or found by one DLPack probe."""
    module = getattr(xp, "__name__", type(xp).__name__)
    name = module.partition(".")[0]
    if name == "array_api_compat":  # a library it wraps: array_api_compat.cupy is cupy
        name = module.split(".")[1] if "." in module else name
    known = _KNOWN.get(name)
    if known is not None:
        return known
    max_rank = NUMPY_MAX_RANK if name in _ON_NUMPY else None
    return Capabilities(name, dlpack=_reads_dlpack(xp), max_rank=max_rank)


def _reads_dlpack(xp: Any) -> bool:
    try:
        np.from_dlpack(xp.asarray(np.zeros(1, dtype=np.int64)))
    except Exception:  # any library's refusal (BufferError, AttributeError, TypeError) means no
        return False
    return True


#: Library dtype names that are an ONNX type under another name.
_ONNX_NAMES = {"utf8": "string"}


def dtype_name(dtype: Any) -> str:
    """The ONNX-side name of a library dtype (ndonnx's ``utf8`` is ONNX's ``string``)."""
    from .._rules import dtype_name as neutral

    name = neutral(dtype)
    return _ONNX_NAMES.get(name, name)


def read(x: Any, caps: Capabilities) -> np.ndarray | None:
    """``x``'s values as a host NumPy array, or None where they are not known yet."""
    if caps.evaluation == CHUNKED:
        return None  # computing would run the graph: the check goes into it instead
    if caps.sparse:
        return np.asarray(x.todense())
    if caps.evaluation == GRAPH:
        try:
            return np.asarray(x.unwrap_numpy())
        except ValueError:  # a graph input or a value derived from one
            return None
    if caps.dlpack:
        return host_copy(x)
    return np.asarray(x)


#: NumPy 2.1 gave ``from_dlpack`` its ``device`` and ``copy`` keywords.
_DLPACK_KEYWORDS = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


def host_copy(x: Any) -> np.ndarray:
    """A NumPy array of its own with the values of ``x``, read through DLPack."""
    if _DLPACK_KEYWORDS:
        return np.from_dlpack(x, device="cpu", copy=True)
    return np.array(np.from_dlpack(x))  # a view of x's memory before NumPy 2.1: copied


@functools.lru_cache(maxsize=64)
def holds_int64(xp: Any, device: Any) -> bool:
    """Whether ``xp`` holds int64 arrays on ``device`` (array-api-strict's ``no_x64`` device
    does not); a namespace without the standard's inspection functions is taken to."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return True
    return "int64" in info().dtypes(device=device, kind="signed integer")


def symbolic(shape: tuple[Any, ...]) -> bool:
    """Whether a shape holds a dimension that is not known yet."""
    return any(d is None for d in shape)
