"""One bad input down every backend path: the same error type and the same text on each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import need

import gatherx

pytestmark = pytest.mark.parity

DATA = np.arange(20, dtype=np.float32).reshape(5, 4)
BAD = np.array([[0, 1], [7, 2]], dtype=np.int64)
GRAD = np.ones((2, 2, 4), np.float32)


def _torch_paths() -> dict[str, Callable[[Any, Any], Any]]:
    torch = need("torch")
    t = torch.from_numpy

    def forward_ad(indices: Any, axis: Any) -> Any:
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(t(DATA), torch.ones(5, 4))
            return gatherx.gather(dual, indices(t), axis=axis)

    return {
        "torch eager": lambda ix, axis: gatherx.gather(t(DATA), ix(t), axis=axis),
        "torch eager autograd": lambda ix, axis: gatherx.gather(
            t(DATA).requires_grad_(), ix(t), axis=axis
        ),
        "torch parameter": lambda ix, axis: gatherx.gather(
            torch.nn.Parameter(t(DATA)), ix(t), axis=axis
        ),
        "torch numpy indices": lambda ix, axis: gatherx.gather(t(DATA), ix(None), axis=axis),
        "torch list indices": lambda ix, axis: gatherx.gather(
            t(DATA), ix(None).tolist(), axis=axis
        ),
        "torch forward AD": forward_ad,
    }


def _paths() -> dict[str, Callable[[Any, Any], Any]]:
    """name -> call(indices maker, axis); the maker turns host indices into the path's kind."""
    paths: dict[str, Callable[[Any, Any], Any]] = {
        "numpy": lambda ix, axis: gatherx.gather(DATA, ix(None), axis=axis),
        "numpy list": lambda ix, axis: gatherx.gather(DATA, ix(None).tolist(), axis=axis),
        "numpy int32": lambda ix, axis: gatherx.gather(DATA, ix(None).astype(np.int32), axis=axis),
    }
    paths.update(_torch_paths())
    jnp = need("jax.numpy")
    paths["jax"] = lambda ix, axis: gatherx.gather(jnp.asarray(DATA), ix(jnp.asarray), axis=axis)
    paths["jax numpy indices"] = lambda ix, axis: gatherx.gather(
        jnp.asarray(DATA), ix(None), axis=axis
    )
    paths["numpy data, jax indices"] = lambda ix, axis: gatherx.gather(
        DATA, ix(jnp.asarray), axis=axis
    )
    xps = need("array_api_strict")
    paths["array-api-strict"] = lambda ix, axis: gatherx.gather(
        xps.asarray(DATA), ix(xps.asarray), axis=axis
    )
    da = need("dask.array")
    paths["dask numpy indices"] = lambda ix, axis: gatherx.gather(
        da.from_array(DATA, chunks=2), ix(None), axis=axis
    )
    paths["dask indices"] = lambda ix, axis: gatherx.gather(
        da.from_array(DATA, chunks=2), ix(lambda a: da.from_array(a, chunks=1)), axis=axis
    ).compute()
    return paths


def _host(values: np.ndarray) -> Callable[[Any], Any]:
    return lambda convert: values if convert is None else convert(values)


def _outcome(call: Callable[[], Any]) -> tuple[type, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is what is compared
        call()
    return info.type, str(info.value)


@pytest.mark.parametrize(
    ("indices", "axis", "error"),
    [
        (BAD, 0, IndexError),
        (BAD - 12, 0, IndexError),
        (np.array([0, 4]), 1, IndexError),
        (np.array([0]), 2, ValueError),
        (np.array([0]), -3, ValueError),
    ],
    ids=["too-large", "too-negative", "axis-1", "axis-2", "axis--3"],
)
def test_same_error_on_every_gather_path(indices, axis, error):
    seen = {
        name: _outcome(lambda c=call: c(_host(indices), axis)) for name, call in _paths().items()
    }
    reference = seen["numpy"]
    assert reference[0] is error
    for name, outcome in seen.items():
        assert outcome == reference, f"{name}: {outcome} != numpy's {reference}"


def _grad_paths() -> dict[str, Callable[[Any], Any]]:
    torch = need("torch")
    jnp = need("jax.numpy")
    xps = need("array_api_strict")
    da = need("dask.array")
    shape = (5, 4)
    return {
        "numpy": lambda ix: gatherx.gather_grad(shape, ix, GRAD),
        "numpy list": lambda ix: gatherx.gather_grad(shape, ix.tolist(), GRAD),
        "torch eager": lambda ix: gatherx.gather_grad(
            shape, torch.from_numpy(ix), torch.from_numpy(GRAD)
        ),
        "torch numpy indices": lambda ix: gatherx.gather_grad(shape, ix, torch.from_numpy(GRAD)),
        "torch autograd": lambda ix: gatherx.gather_grad(
            shape, torch.from_numpy(ix), torch.from_numpy(GRAD).requires_grad_()
        ),
        "jax": lambda ix: gatherx.gather_grad(shape, jnp.asarray(ix), jnp.asarray(GRAD)),
        "array-api-strict": lambda ix: gatherx.gather_grad(
            shape, xps.asarray(ix), xps.asarray(GRAD)
        ),
        "dask numpy indices": lambda ix: gatherx.gather_grad(shape, ix, da.from_array(GRAD)),
        "dask indices": lambda ix: gatherx.gather_grad(
            shape, da.from_array(ix, chunks=1), da.from_array(GRAD)
        ).compute(),
    }


@pytest.mark.parametrize("indices", [BAD, BAD - 12], ids=["too-large", "too-negative"])
def test_same_error_on_every_gather_grad_path(indices):
    seen = {name: _outcome(lambda c=call: c(indices)) for name, call in _grad_paths().items()}
    reference = seen["numpy"]
    assert reference[0] is IndexError
    assert reference[1].startswith("gather_grad: indices element out of data bounds, idx=")
    for name, outcome in seen.items():
        assert outcome == reference, f"{name}: {outcome} != numpy's {reference}"
