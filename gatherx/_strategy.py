"""Which formulation each backend uses for which shape, on data viewed as (pre, size, post).

The timings that chose each rule are in docs/performance.md ("How each rule was chosen").
"""

from __future__ import annotations

import math

# --------------------------------------------------------------------------- NumPy
# Forward: ndarray.take always, the same copy loop as np.take without its Python wrapper.
# gather_grad: np.add.at's per-element loop is slow for repeated indices, so whole-row or
# flat-element scatters replace it except on gradients too small to repay their overhead.

#: At most this many gradient elements: np.add.at itself.
NUMPY_SMALL_GRAD = 2048
#: Rows shorter than this: the element plan.
NUMPY_ROW_POST = 16
#: With ``pre > 1``, a larger share of repeated index positions: the element plan.
NUMPY_ROW_REPEATED = 0.5


def numpy_grad_plan(pre: int, size: int, n_index: int, post: int, repeated: float | None) -> str:
    """The NumPy gather_grad formulation: ``add.at``, ``rows`` or ``elements``.

    ``repeated`` is the share of the ``n_index`` positions whose index value occurs more than
    once; where it is None and the choice depends on it, the answer is ``""`` (count first).

    - ``add.at``: ``np.add.at`` on the original shapes.
    - ``rows``: one fancy-index scatter of whole ``post``-long rows, then the repeated
      indices re-summed a vectorised round per occurrence number.
    - ``elements``: zeros, then the 1-D ``np.add.at`` loop at flat element positions.
    """
    if pre * n_index * post <= NUMPY_SMALL_GRAD:
        return "add.at"
    if post < NUMPY_ROW_POST:
        return "elements"
    if pre == 1:
        return "rows"
    if repeated is None:
        return ""
    return "elements" if repeated > NUMPY_ROW_REPEATED else "rows"


# --------------------------------------------------------------------------- PyTorch
# Forward: index_select on a view where ATen takes a fast loop (its row copy on dim 0, its
# contiguous loop on dim 1); on dim >= 2 it copies one strided slice per index.
# Backward: zeros().index_add_() on the data's own shape with an int64 index, which keeps
# ATen's parallel innermost-dim scatter.

#: "rows flat" needs at least this many bytes of output, rows this long, and 2+ threads.
TORCH_FLAT_ROWS_BYTES = 4 << 20
TORCH_FLAT_ROWS_POST = 16
#: In the "rows flat" regime, eager calls with rows of at least this many bytes: "moved out".
TORCH_MOVED_OUT_ROW_BYTES = 1024


def torch_forward_plan(
    shape: tuple[int, ...],
    axis: int,
    n_index: int,
    *,
    contiguous: bool = True,
    itemsize: int = 4,
    threads: int = 1,
    device_type: str = "cpu",
    eager: bool = False,
) -> str:
    """How the PyTorch forward calls ``index_select`` on data of ``shape`` along ``axis``.

    - ``index_select``: on the data as given (non-contiguous data).
    - ``rows``: dim 0 of the ``(size, post)`` view (``pre == 1``, axis 0 included).
    - ``rows_flat``: dim 0 of the ``(pre * size, post)`` view at ``pre_i * size + index``
      (CPU, several threads, long rows, large output).
    - ``moved_out``: where ``rows_flat`` would apply to rows of 1 KiB or more and the call is
      ``eager`` (not compiled, traced or under torch.func): dim 0 of the ``(size, pre, post)``
      view written through that view of a contiguous ``(pre, n, post)`` output.
    - ``index_select_3d``: dim 1 of the ``(pre, size, post)`` view.
    """
    if not contiguous:
        return "index_select"
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    if pre == 1:
        return "rows"
    out_bytes = pre * n_index * post * itemsize
    if (
        device_type == "cpu"
        and threads > 1
        and post >= TORCH_FLAT_ROWS_POST
        and out_bytes >= TORCH_FLAT_ROWS_BYTES
    ):
        return (
            "moved_out" if eager and post * itemsize >= TORCH_MOVED_OUT_ROW_BYTES else "rows_flat"
        )
    return "index_select_3d"


def torch_backward_plan(index_dtype: str, device_type: str) -> str:
    """``index_add`` (``zeros.index_add_`` on the data's shape, index as given) or
    ``index_add_int64`` (the same after widening an int32 index, which the CPU kernel needs
    for its fast innermost-dim path). Measured on CPU only: other devices keep the index."""
    if device_type == "cpu" and index_dtype != "int64":
        return "index_add_int64"
    return "index_add"


# --------------------------------------------------------------------------- JAX
# lax.gather as given matches jnp.take under jit; the transpose (a scatter-add) is faster with
# the scattered axis leading, and the validity mask is skipped only for host-checked indices.


def jax_layout_plan(shape: tuple[int, ...], axis: int) -> str:
    """``as_is`` or ``axis_first`` (move ``axis`` to the front, gather on axis 0 and move the
    index dimensions back): the latter for the last axis of data of rank >= 2."""
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    return "axis_first" if post == 1 and pre > 1 else "as_is"


def jax_gather_mode(indices_checked: bool) -> str:
    """``promise_in_bounds`` where the index values were checked on the host, else
    ``fill_or_drop`` (out-of-range reads give the fill value, writes are dropped)."""
    return "promise_in_bounds" if indices_checked else "fill_or_drop"
