"""Every error text gatherx raises for bad input, each built by one function here.

``fn`` is the public function the user called (``gather`` or ``gather_grad``): it prefixes the text.
"""

from __future__ import annotations

from collections.abc import Sequence


def describe(x: object) -> str:
    """A short name for an object's framework and type: ``torch.Tensor``, ``builtins.str``."""
    module = type(x).__module__.partition(".")[0]
    return f"{module}.{type(x).__qualname__}"


def _a(text: str) -> str:
    """``text`` after its indefinite article: a torch.Tensor, an array_api_strict.Array."""
    return f"an {text}" if text[:1] in "aeiou" else f"a {text}"


def _is_jax_tracer(x: object) -> bool:
    return type(x).__module__.startswith("jax") and "Tracer" in type(x).__name__


def _static_under_jit(fn: str) -> str:
    """How to keep ``fn``'s arguments that choose the program static under ``jax.jit``."""
    if fn == "gather_grad":  # shape is positional-only; there is no opset
        return 'jax.jit(gatherx.gather_grad, static_argnums=0, static_argnames="axis")'
    return f'jax.jit(gatherx.{fn}, static_argnames=("axis", "opset"))'


def _traced(x: object) -> bool:
    """A JAX tracer, or a sequence holding one (a shape of traced sizes)."""
    if isinstance(x, (list, tuple)):
        return any(map(_is_jax_tracer, x))
    return _is_jax_tracer(x)


def not_an_int(fn: str, what: str, value: object) -> TypeError:
    if _is_jax_tracer(value):
        msg = (
            f"{fn}: {what} must be a Python int, got a traced value ({type(value).__name__}); "
            f"under jax.jit mark it static: {_static_under_jit(fn)}"
        )
    else:
        msg = f"{fn}: {what} must be an int, got {type(value).__name__} {value!r}"
    return TypeError(msg)


def opset_too_low(fn: str, opset: int) -> ValueError:
    return ValueError(f"{fn}: opset must be >= 1 (Gather exists since opset 1), got {opset}")


def rank_zero(fn: str) -> ValueError:
    if fn == "gather_grad":  # it takes the data's shape, not the data
        return ValueError("gather_grad: shape must have rank >= 1 (at least one dimension), got ()")
    return ValueError(f"{fn}: data must have rank >= 1, got a rank-0 (scalar) array")


def axis_out_of_range(fn: str, axis: int, rank: int) -> ValueError:
    msg = (
        f"{fn}: axis {axis} is out of the accepted range [{-rank}, {rank - 1}] "
        f"for data of rank {rank}"
    )
    return ValueError(msg)


def data_dtype(name: str, opset: int, framework: str) -> TypeError:
    from ._rules import BFLOAT16_SINCE, data_dtypes

    if name == "bfloat16":
        msg = (
            f"gather: bfloat16 data needs opset >= {BFLOAT16_SINCE} (Gather-13), got opset {opset}"
        )
    else:
        allowed = ", ".join(sorted(data_dtypes(opset)))
        msg = (
            f"gather: {framework} data of dtype {name} is not an ONNX Gather type; "
            f"allowed: {allowed}"
        )
    return TypeError(msg)


def index_dtype(fn: str, name: str, framework: str) -> TypeError:
    return TypeError(f"{fn}: indices must be int32 or int64 ({framework}), got dtype {name}")


def grad_dtype(name: str, framework: str) -> TypeError:
    from ._rules import GRAD_DTYPES

    allowed = ", ".join(sorted(GRAD_DTYPES))
    return TypeError(
        f"gather_grad: {framework} grad of dtype {name} is not a numeric ONNX type; "
        f"allowed: {allowed}"
    )


def shape_type(shape: object) -> TypeError:
    if _traced(shape):
        return TypeError(
            "gather_grad: shape must be a sequence of Python ints, got a traced value; under "
            f"jax.jit mark it static: {_static_under_jit('gather_grad')}"
        )
    return TypeError(f"gather_grad: shape must be a sequence of ints, got {shape!r}")


def shape_negative(dims: tuple[int, ...]) -> ValueError:
    return ValueError(f"gather_grad: shape must have non-negative dimensions, got {dims}")


def shape_too_large(dims: tuple[int, ...]) -> ValueError:
    return ValueError(
        f"gather_grad: shape {dims} holds more than 2**63 - 1 elements, more than any array can"
    )


def grad_symbolic(got: tuple[int | None, ...]) -> ValueError:
    msg = (
        f"gather_grad: grad has shape {got}, whose dimensions of None are not known until the "
        "graph runs; the sum is built at the grad's shape: give grad a concrete shape"
    )
    return ValueError(msg)


def grad_shape(
    got: tuple[int, ...],
    shape: tuple[int, ...],
    indices_shape: tuple[int, ...],
    axis: int,
    want: tuple[int, ...],
) -> ValueError:
    msg = (
        f"gather_grad: grad has shape {got}, but gather of data {shape} with "
        f"indices {indices_shape} on axis {axis} gives {want}"
    )
    return ValueError(msg)


def out_of_bounds(
    fn: str, value: int, position: Sequence[int] | None, size: int, axis: int, opset: int
) -> IndexError:
    """The error for one out-of-range index ``value`` at ``position`` (None: unknown)."""
    from ._rules import NEGATIVE_INDICES_SINCE, index_range

    lo, hi = index_range(size, opset)
    where = f" at position {tuple(position)} of indices" if position is not None else ""
    if size == 0:
        bounds = f"axis {axis} of data has size 0, so no index is valid"
    else:
        bounds = f"must be within the inclusive range [{lo},{hi}] for axis {axis} of size {size}"
    note = (
        f" (negative indices need opset >= {NEGATIVE_INDICES_SINCE})"
        if -size <= value < 0 and opset < NEGATIVE_INDICES_SINCE
        else ""
    )
    return IndexError(
        f"{fn}: indices element out of data bounds, idx={value}{where} {bounds}{note}"
    )


def traced_out_of_bounds(fn: str, axis: int, opset: int) -> str:
    """The text of an in-graph bounds assert, where the axis size may be symbolic."""
    from ._rules import NEGATIVE_INDICES_SINCE

    low = "-s" if opset >= NEGATIVE_INDICES_SINCE else "0"
    return (
        f"{fn}: indices element out of data bounds: indices must be within the inclusive "
        f"range [{low},s-1] for axis {axis}, where s = data.shape[{axis}]"
    )


def not_an_array(fn: str, role: str, x: object) -> TypeError:
    msg = (
        f"{fn}: {role} must be an array (NumPy, PyTorch, JAX or another array-API "
        f"library), got {describe(x)}; wrap it with np.asarray for NumPy"
    )
    return TypeError(msg)


def unsupported_array(fn: str, role: str, x: object, why: str, fix: str) -> TypeError:
    return TypeError(f"{fn}: {role} of type {describe(x)} are not supported ({why}); {fix}")


def mixed_dtensor(fn: str, data_is_dtensor: bool) -> TypeError:
    """A DTensor beside a plain torch.Tensor (indices and data or grad)."""
    if data_is_dtensor:
        msg = (
            f"{fn}: the data is a DTensor but the indices are a plain torch.Tensor; make them "
            "a DTensor on the same mesh (distribute_tensor(indices, mesh, [Replicate()]) or "
            "DTensor.from_local), or pass NumPy arrays or Python ints, which gatherx "
            "replicates over the mesh"
        )
    else:
        msg = (
            f"{fn}: the indices are a DTensor but the data is a plain torch.Tensor; "
            "distribute the data on the indices' mesh, or pass plain indices"
        )
    return TypeError(msg)


def _array_role(fn: str) -> str:
    """The argument the indices go with: gather's data, gather_grad's grad."""
    return "grad" if fn == "gather_grad" else "data"


def mixed_frameworks(
    fn: str, indices: object, framework: str, data: object, data_framework: str
) -> TypeError:
    role = _array_role(fn)
    msg = (
        f"{fn}: indices are {_a(describe(indices))} ({framework}) but {role} is "
        f"{_a(describe(data))} ({data_framework}); pass indices from the {role}'s framework, "
        "a NumPy array or Python ints"
    )
    return TypeError(msg)


def device_mismatch(fn: str, index_device: object, data_device: object) -> ValueError:
    role = _array_role(fn)
    msg = (
        f"{fn}: indices are on device {index_device} but {role} is on device {data_device}; "
        f"move the indices to the {role}'s device first (or pass a NumPy array or Python ints)"
    )
    return ValueError(msg)


def result_rank(fn: str, rank: int, limit: int, framework: str) -> ValueError:
    return ValueError(
        f"{fn}: the result would have rank {rank}, more than the {limit} dimensions "
        f"{_a(framework)} array can have"
    )


def not_int_indices(fn: str, value: object, position: tuple[int, ...]) -> TypeError:
    """A Python index that is no int (a bool, a float, a string, ...), as a wrong dtype."""
    kind = type(value).__name__
    return TypeError(
        f"{fn}: indices must be int32 or int64 (Python), got {kind} {value!r} at position "
        f"{position}"
    )


def bad_indices_type(fn: str, indices: object) -> TypeError:
    msg = (
        f"{fn}: indices must be an int32/int64 array, a Python int or a nested list of ints, "
        f"got {describe(indices)}"
    )
    return TypeError(msg)


def ragged_indices(fn: str, detail: str) -> ValueError:
    return ValueError(f"{fn}: indices must be a rectangular nested list of ints: {detail}")


def unknown_chunks(fn: str, what: str) -> ValueError:
    return ValueError(
        f"{fn}: {what} has unknown chunk sizes; call .compute_chunk_sizes() on it first"
    )


def bounds_policy(where: str, names: tuple[str, ...], value: object) -> ValueError:
    choices = ", ".join(repr(n) for n in names[:-1]) + f" or {names[-1]!r} (by device kind)"
    return ValueError(f"gatherx: {where} must be {choices}, got {value!r}")


def out_refused(fn: str, why: str) -> TypeError:
    """``out=`` where no result can be written into the caller's array; ``why`` says why."""
    return TypeError(f"{fn}: out= is not supported here: {why}; use the returned array instead")


def out_type(fn: str, out: object, want: str) -> TypeError:
    return TypeError(f"{fn}: out must be a {want} like the data, got {describe(out)}")


def out_shape(fn: str, got: tuple[int, ...], want: tuple[int, ...]) -> ValueError:
    return ValueError(f"{fn}: out has shape {got}, but the result has shape {want}")


def out_dtype(fn: str, got: object, want: object) -> TypeError:
    msg = f"{fn}: out has dtype {got}, but the result has dtype {want} (no casting)"
    return TypeError(msg)


def out_device(fn: str, got: object, want: object) -> ValueError:
    return ValueError(f"{fn}: out is on device {got}, but the result is on device {want}")


def out_read_only(fn: str, why: str = "") -> ValueError:
    return ValueError(f"{fn}: out is read-only{why}; pass a writeable array")


def out_self_overlap(fn: str) -> ValueError:
    return ValueError(
        f"{fn}: out has elements that share memory (a broadcast or overlapping view), so "
        "one would be written for several results; pass an array with a place for each"
    )


def out_overlap(fn: str, role: str) -> ValueError:
    msg = (
        f"{fn}: out shares memory with {role}, which the write would overwrite while it is "
        "read; pass a separate array"
    )
    return ValueError(msg)


def out_of_bounds_symbolic(
    fn: str, value: int, position: Sequence[int], axis: int, opset: int
) -> IndexError:
    """A host index that is bad for an axis of any size (its size is symbolic, s)."""
    from ._rules import NEGATIVE_INDICES_SINCE

    low = "-s" if opset >= NEGATIVE_INDICES_SINCE else "0"
    negative = value < 0 and opset < NEGATIVE_INDICES_SINCE
    note = f" (negative indices need opset >= {NEGATIVE_INDICES_SINCE})" if negative else ""
    return IndexError(
        f"{fn}: indices element out of data bounds, idx={value} at position "
        f"{tuple(position)} of indices must be within the inclusive range [{low},s-1] for "
        f"axis {axis}, where s = data.shape[{axis}]{note}"
    )


def not_a_flag(fn: str, what: str, value: object) -> TypeError:
    return TypeError(f"{fn}: {what} must be True or False, got {type(value).__name__} {value!r}")


def sparse_refused(fn: str, flag: str, framework: str, instead: str) -> TypeError:
    """``sparse_grad=True`` / ``sparse=True`` where the framework has no sparse gradients."""
    return TypeError(
        f"{fn}: {flag}=True asks for a torch.sparse_coo gradient, a PyTorch gradient layout; "
        f"{framework} arrays have none ({instead})"
    )


def sparse_dtype(fn: str, flag: str, name: str) -> TypeError:
    return TypeError(
        f"{fn}: PyTorch's sparse tensors cannot hold dtype {name}, so {flag}=True cannot "
        f"serve it; pass {flag}=False for a dense gradient"
    )


def sparse_mode(fn: str, flag: str, why: str) -> TypeError:
    return TypeError(f"{fn}: {flag}=True is not supported here: {why}; pass {flag}=False")


def beyond_held_dtype(
    fn: str, role: str, name: str, held: str, value: int, position: tuple[int, ...]
) -> TypeError:
    """NumPy integers that JAX, without 64-bit types, would hold in a narrower dtype: the
    data's dtype is one JAX lacks there (a TypeError, as for any dtype a library lacks)."""
    return TypeError(
        f"{fn}: numpy {role} of dtype {name} holds {value} at position {position}, beyond "
        f"{held}, the dtype JAX holds it in while jax_enable_x64 is off; turn jax_enable_x64 "
        f"on, or pass {role} within {held}"
    )


def library_lacks_dtype(
    fn: str,
    role: str,
    library: str,
    name: str,
    why: str,
    advice: str = "cast it to a dtype the library computes with, or gather a NumPy copy",
) -> TypeError:
    """An ONNX dtype that this array library can describe but not compute with."""
    msg = f"{fn}: {library} cannot compute with {role} of dtype {name} ({why}); {advice}"
    return TypeError(msg)
