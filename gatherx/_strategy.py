"""Which formulation each backend uses for which shape: the rules and the timings behind them.

Every rule works on the canonical view of a gather: data as ``(pre, size, post)``, where
``pre`` and ``post`` multiply the dimensions before and after the axis, and ``n_index``
indices. Timings come from ``benchmarks/strategies.py`` (median of interleaved rounds, CPU
clock, one thread, a shared 2-core x86 VM); the ratios matter, not the absolute times.
"""

from __future__ import annotations

import math

# --------------------------------------------------------------------------- NumPy
# Forward: ``ndarray.take`` always. np.take, fancy indexing and take(mode="clip") run the same
# copy loop on large inputs (embed 1.8 ms each) and fancy indexing on an inner axis is 3-30x
# slower (cols 27 ms vs 10 ms, last 8.7 ms vs 1.5 ms); the method skips np.take's Python
# wrapper: 0.22 us vs 1.03 us on the tiny case.
#
# gather_grad, against np.add.at (ms; "rows" and "elements" are the plans below):
#   (pre, size, post) / n        repeated   np.add.at   rows          elements
#   embed (1, 50000, 256) / 8192   0.08       27.4        9.5 (2.9x)    24.5 (1.1x)
#   cols (2048, 4096, 1) / 1024    0.21       66.1       48.0 (1.4x)    14.5 (4.6x)
#   mid (64, 512, 256) / 512       0.64      116.0       36.1 (3.2x)    26.2 (4.4x)
#   last (65536, 64, 1) / 32       0.34       45.3       40.4 (1.1x)     6.6 (6.9x)
#   (256, 1024, 4) / 512           0.39       12.4        4.5 (2.8x)     1.8 (6.9x)
#   (256, 1024, 16) / 512          0.39       49.8       16.6 (3.0x)    19.8 (2.5x)
#   (1, 4096, 8) / 10000           0.99        0.85       1.46 (0.6x)    0.29 (2.9x)
#   (1, 2000, 256) / 8000          0.98       25.3        6.4 (4.0x)    18.1 (1.4x)
#   (16, 500, 64) / 2000           0.99       31.7        9.3 (3.4x)     5.3 (6.0x)
#   (16, 4000, 256) / 1000         0.20       47.0       11.1 (4.3x)    15.0 (3.1x)
#   (64, 500, 16) / 1000           0.87       22.1        5.3 (4.1x)     3.3 (6.8x)
#   (1, 64, 8) / 64                0.6        0.012      0.116          0.025
# "repeated" is the share of index positions whose value occurs more than once. Rows wins
# with whole rows of 16+ elements unless most indices repeat across several outer rows;
# elements wins for short rows; below ~2k gradient elements the plain np.add.at (whose 1-D
# loop is fast) beats both because they cost ~10-20 us of fixed overhead.

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
# Forward on CPU (ms, wall clock). The contiguous data is viewed as (size, post) when
# pre == 1, else as (pre, size, post); ATen's index_select then takes its row-memcpy loop
# on dim 0 (parallel) or its contiguous loop on dim 1 (serial, with a float special case):
#   case (pre, size, post) / n        threads  as given  (pre,size,post) dim 1  rows flat  adv. idx
#   last (65536, 64, 1) / 32             1       19.6        1.19                  -        4.91
#   last                                 2        9.33       1.50                  -        4.33
#   cols (2048, 4096, 1) / 1024          1        6.99       6.93                  -       18.9
#   mid (64, 512, 256) / 512             1       24.4       24.6                 21.3      26.4
#   mid                                  2       21.7       21.9                 16.4      19.3
#   (64, 1024, 64) / 512                 2        1.79       1.79                 1.41      2.67
#   (256, 1024, 16) / 512                2        3.77       3.77                 3.40      7.43
#   (8, 512, 256) / 256                  2        0.063      0.063                0.073     0.32
#   pre1-mid (1, 4096, 512) / 1024       2        0.090      0.087 (2-D dim 0: 0.050)
#   embed (1, 50000, 256) / 8192         2        1.26       1.87  (2-D dim 0: 1.23)
# "as given" is index_select(data, axis): on a dim >= 2 ATen copies one strided slice per
# index (16x slower on "last"). "rows flat" is dim 0 of the (pre * size, post) view at the
# row numbers pre_i * size + index: parallel whole-row copies, worth its pre * n int64 index
# with several threads, rows of 16+ elements and a few MiB of output. Advanced indexing is
# never the fastest contiguous result. int32 vs int64 indices: no difference beyond noise,
# so the index is used as given; non-contiguous data keeps the plain call (a view would
# copy it).
#
# Backward (scatter-add into zeros; ms, one thread): index_add_ on the data's own shape:
#   case               index_add_  int32 index  3-D index_add_(1)  3-D scatter_add_  sorted  zeros
#   embed                 26.8        28.6           29.5              35.3         38.1    26.8
#   cols                  30.1        59.9           59.9              67.2         62.5    18.2
#   mid                   24.6        27.2           26.7              36.1         52.0    15.9
#   last                   2.45       26.7           26.8              38.9         29.4     0.74
#   (4096, 8) / 10000      0.18        0.58           0.69              0.19         1.45    0.003
# ATen's index_add_ runs a parallel scatter_add_ when the indexed dim is the innermost
# one, which needs int64 indices: int32 and the 3-D view both lose it (11x on "last").
# Zero-filling dominates "embed" (torch.zeros page-faults every 4 KiB page; setting
# THP_MEM_ALLOC_ENABLE=1 lets torch's allocator use huge pages).

# Where "rows flat" applies, "moved out" (dim 0 of the (size, pre, post) view, written through
# the same view of a contiguous (pre, n, post) output with index_select's out=) is ATen's
# per-index slice copy, parallel over indices. Against rows flat (ms, 2 threads, 15 rounds):
#   (pre, size, post) / n       row bytes   rows flat   moved out
#   (64, 512, 256) / 512          1024        17.1        16.1 (0.94)
#   (16, 512, 1024) / 512         4096        17.2        16.1 (0.94)
#   (256, 512, 256) / 128         1024        18.8        18.2 (0.97)
#   (8, 4096, 512) / 512          2048        0.375       0.379 (1.01)
#   (32, 1024, 512) / 256         2048        2.52        2.54 (1.01)
#   (128, 512, 128) / 256          512        2.04        2.96 (1.46)
#   (64, 1024, 64) / 512           256        0.362       0.503 (1.39)
#   (128, 1024, 32) / 512          128        0.789       0.804 (1.02)
# so rows of 1 KiB and more take it. out= is an eager-only formulation: Dynamo, the
# TorchScript tracer and torch.func's batching rules keep rows flat.

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
    for its fast innermost-dim path). The measurements are CPU ones; other devices keep the
    index as given."""
    if device_type == "cpu" and index_dtype != "int64":
        return "index_add_int64"
    return "index_add"


# --------------------------------------------------------------------------- JAX
# Forward under jit (XLA CPU, ms): lax.gather on the data as given, in FILL_OR_DROP mode,
# is jnp.take (also fill mode) to within noise on every case; reshaping to (pre, size, post)
# or moving the axis first is fused away by XLA (0.97-1.03). PROMISE_IN_BOUNDS skips the
# per-index validity mask: small (1000, 16)/(100,) 8.8 us vs 31.5 us, (4096, 8)/(10000,)
# 33.7 us vs 57.5 us, (1, 4096, 512)/(1024,) 0.11 vs 0.14 ms; large cases within noise.
# It is only sound where the indices were checked on the host (eager, concrete indices);
# traced indices keep FILL_OR_DROP, so a bad index reads the fill value, never a clamped row.
#
# vjp under jit (the transpose, a scatter-add), ms, jnp.take's vjp = 1.00:
#   case      as given   axis moved first
#   embed       1.00          1.03
#   cols        0.98          0.83
#   mid         1.02          1.10
#   last        1.00          0.56
# XLA's CPU scatter is faster when the scattered axis is the leading one and each update
# a contiguous row: gathering on the last axis (post == 1) of rank >= 2 data moves the axis
# first (the forward is the same speed: XLA fuses the transposes into the gather).


def jax_layout_plan(shape: tuple[int, ...], axis: int) -> str:
    """``as_is`` or ``axis_first`` (move ``axis`` to the front, gather on axis 0 and move the
    index dimensions back): the latter for the last axis of data of rank >= 2."""
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    return "axis_first" if post == 1 and pre > 1 else "as_is"


def jax_gather_mode(indices_checked: bool) -> str:
    """``promise_in_bounds`` where the index values were checked on the host, else
    ``fill_or_drop`` (out-of-range reads give the fill value, writes are dropped)."""
    return "promise_in_bounds" if indices_checked else "fill_or_drop"
