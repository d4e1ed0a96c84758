"""Which formulation each backend uses for which shape, on data viewed as (pre, size, post).

The timings that chose each rule are in docs/performance_details.md ("How each rule was chosen").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ._rules import SMALL_HOST_INDEX

# --------------------------------------------------------------------------- all
#: float16/bfloat16 gradients are summed in float32, per backend: over each distinct index once
#: (after a sort of the indices, whose cost grows with them) where the data holds more than
#: this many elements per index plus a fixed count, and at least a multiple of the gradient's
#: elements, else in a float32 table of the data's shape (whose cost grows with the data).
#: NumPy's float32 table costs ~10x PyTorch's per element; JAX's sort on the CPU
#: (``jnp.unique``) ~200 ns an index, and its sums are added into the half-precision zeros
#: by a scatter slower per element than the float32 table's.
#: JAX's distinct sums of at most ``JAX_PAIRS_UP_TO`` indices, found without a sort, cost
#: less an index ("jax_pairs").
#: PyTorch's float32 table of at least ``TORCH_FRESH_FLOAT32`` elements is fresh memory on
#: every call, page-faulted as it is zeroed (1.5 ns an element against 0.12 reused): the
#: distinct sums pay from fewer elements an index there ("torch_fresh").
HALF_DISTINCT_BEYOND = {
    "numpy": (8, 2**12, 0),
    "torch": (512, 2**17, 0),
    "torch_fresh": (32, 0, 0),
    "jax": (2048, 2**14, 16),
    "jax_pairs": (256, 2**10, 16),
}
#: The float32 elements of 32 MiB: glibc's allocator maps a block this large afresh for
#: every request (its mmap threshold grows no further), and the kernel zero-fills each page
#: on its first touch; PyTorch's CPU allocator takes its memory from there.
TORCH_FRESH_FLOAT32 = 1 << 23
#: JAX finds the distinct indices of at most ``JAX_PAIRS_UP_TO`` values by comparing every
#: pair (an index's slot is the first position holding its value), without XLA's sort (47 us
#: for 64 values on the CPU).
JAX_PAIRS_UP_TO = 256
#: JAX adds the distinct sums (one nonzero sum a slot) into zeros as their 16 bits, an
#: integer scatter-add, for these dtypes: XLA's CPU adds bfloat16 in float32 over the whole
#: table, as costly as the float32 table; float16's own scatter-add costs less than uint16's.
JAX_HALF_SUMS_AS_BITS = frozenset({"bfloat16"})


#: PyTorch converts half-precision gradients of at least this many elements to float32 a
#: slice at a time, of about ``TORCH_HALF_SLICE`` elements: of index positions where each
#: slice is one block (nothing before the index's dimensions) or rows of at least
#: ``TORCH_HALF_SLICED_MIN_ROW`` elements, else of outer blocks (the dimensions before the
#: index's), on rows of more than one element each with at least that many elements a
#: position (on rows of one the add is one pass over the blocks' rows): a float32 copy of the whole
#: gradient (32 MiB and more, fresh memory on each call) cost 1.1-5x the slices' time there
#: (docs/performance_details.md).
TORCH_HALF_SLICED_FROM = TORCH_FRESH_FLOAT32
TORCH_HALF_SLICE = 1 << 21
TORCH_HALF_SLICED_MIN_ROW = 64


def half_grad_slice(
    grad_elements: int, n_index: int, shape: list[int], axis: int
) -> tuple[bool, int]:
    """How a PyTorch half-precision gradient of ``grad_elements`` (``shape``, its index's
    dimensions as one, ``n_index`` positions on ``axis``) is converted to float32 and added:
    ``(blocks, step)``, ``step`` index positions at a time (``blocks`` False) or ``step`` outer
    blocks at a time. All positions at once below ``TORCH_HALF_SLICED_FROM``; from it, as many
    as hold about ``TORCH_HALF_SLICE`` elements (at least one): of index positions with
    nothing but dimensions of one before ``axis`` or rows of at least
    ``TORCH_HALF_SLICED_MIN_ROW`` elements after it, else of outer blocks, on rows of more
    than one element at least as many as hold ``TORCH_HALF_SLICED_MIN_ROW`` elements a
    position: ``index_add_`` on an inner dimension loops over the positions, one slice of the
    blocks' rows each. (Index positions on shorter rows behind outer ones cost up to 1.9x what
    the copy saved: short blocks, and that loop once a slice.)"""
    if grad_elements < TORCH_HALF_SLICED_FROM:  # first: most gradients are smaller
        return False, n_index
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    if pre == 1 or post >= TORCH_HALF_SLICED_MIN_ROW:
        return False, max(1, TORCH_HALF_SLICE // (grad_elements // n_index))
    least = -(-TORCH_HALF_SLICED_MIN_ROW // post) if post > 1 else 1
    return True, max(least, TORCH_HALF_SLICE // (n_index * post))


#: The most table elements into which PyTorch adds a half-precision gradient whose index
#: repeats no slot by its own ``index_add_`` (one addition a slot: exact, and -0.0 made the
#: +0.0 a sum gives): one ATen call where ``index_copy_`` of the slices plus 0 takes two;
#: on larger tables its half-precision loop over the whole table costs more (0.62-0.84x at
#: 2048-4096 elements, 0.65-0.95x at 8192, up to 1.15x at 16384; docs/performance_details.md).
TORCH_HALF_ADDED_MAX_ELEMENTS = 4096


def torch_one_each_plan(table_elements: int) -> str:
    """How PyTorch writes a half-precision gradient whose index repeats no slot into zeros of
    ``table_elements``: ``index_add`` in half precision up to
    ``TORCH_HALF_ADDED_MAX_ELEMENTS``, else ``index_copy`` of the slices plus 0."""
    return "index_add" if table_elements <= TORCH_HALF_ADDED_MAX_ELEMENTS else "index_copy"


def half_grad_plan(
    backend: str, data_elements: int, n_index: int, repeated: bool = True, grad_elements: int = 0
) -> str:
    """How a half-precision gradient is summed in float32 and rounded once on ``backend``
    (``numpy``, ``torch`` or ``jax``): ``distinct`` (each distinct index's slices summed, at the
    gradient's size, then written into zeros) or ``float32`` (a float32 table of the data's
    shape, rounded); ``as_given`` where no index repeats a slot (``repeated`` False, known
    from the index's values or their count): each slot's sum is one slice, exact in half
    precision. PyTorch's float32 table of ``TORCH_FRESH_FLOAT32`` elements or more takes
    the ``torch_fresh`` rule."""
    if not repeated:
        return "as_given"
    if backend == "torch" and data_elements >= TORCH_FRESH_FLOAT32:
        backend = "torch_fresh"
    per_index, fixed, share = HALF_DISTINCT_BEYOND[backend]
    beyond = data_elements > per_index * n_index + fixed and data_elements >= share * grad_elements
    return "distinct" if beyond else "float32"


#: ATen runs its sorted row-sum kernel for ``index_add_`` on dim 0 of a contiguous 2-D CPU
#: table at an int64 index (x86 builds: FBGEMM's radix sort) on rows of at least this many
#: elements: ATen's own condition, not a tuned one. That kernel sums half precision in a
#: float32 buffer of one row per thread and rounds once.
TORCH_ROW_SUMS_MIN_ROW = 16
#: Rows at least this long: that kernel replaces the float32 table, and where axes precede
#: the gathered one, either plan (on a view of every outer block's rows as one table, at the
#: index repeated for each block). On shorter ones its sort and per-element conversions of
#: many indices cost up to 2x the plan they would replace.
TORCH_ROW_SUMS_LONG_ROW = 128


def torch_half_grad_plan(
    shape: list[int],
    axis: int,
    n_index: int,
    repeated: bool,
    row_sums: Callable[[], bool] | None,
) -> str:
    """:func:`half_grad_plan` for PyTorch, into a table of ``shape`` along ``axis``:
    ``row_sums`` where ``row_sums()``, asked last (None: no), says this PyTorch's
    ``index_add_`` sums rows in float32 and rounds once (a first answer tries it on the CPU):
    ATen's kernel alone, on the table seen as rows of the elements after the axis, in place of
    ``distinct`` (the sort and float32 sums) on rows of at least ``TORCH_ROW_SUMS_MIN_ROW``
    elements where nothing comes before the axis (0.42-0.88x on the sweep's such cases), and
    of ``distinct`` or ``float32`` (the float32 table) on rows of at least
    ``TORCH_ROW_SUMS_LONG_ROW`` (0.61-0.70x at the median; on shorter rows 0.9-1.0 at the
    median, up to 2x on many indices; docs/performance_details.md)."""
    plan = half_grad_plan("torch", math.prod(shape), n_index, repeated)
    if plan not in ("distinct", "float32") or row_sums is None:
        return plan
    least = TORCH_ROW_SUMS_LONG_ROW
    if plan == "distinct" and math.prod(shape[:axis]) == 1:
        least = TORCH_ROW_SUMS_MIN_ROW
    if math.prod(shape[axis + 1 :]) < least:
        return plan
    return "row_sums" if row_sums() else plan


def jax_half_grad_plan(
    data_elements: int, n_index: int, scalar: bool, post: int, grad_elements: int
) -> str:
    """:func:`half_grad_plan` for JAX, whose index values are unknown to the plan (one value
    repeats no slot): a ``scalar`` index into rows (``post > 1``) keeps the float32 table,
    where XLA writes its one slice and the rounding in one pass over the table and a
    half-precision scatter-add took up to 6x longer. ``pairs``: the sums of ``distinct``,
    each index's slot found by comparing every pair of the (few) indices."""
    if scalar and post > 1:
        return "float32"
    pairs = n_index <= JAX_PAIRS_UP_TO
    rule = "jax_pairs" if pairs else "jax"
    plan = half_grad_plan(rule, data_elements, n_index, n_index > 1, grad_elements)
    return "pairs" if pairs and plan == "distinct" else plan


# --------------------------------------------------------------------------- NumPy
# Forward: ndarray.take (np.take's copy loop without its Python wrapper) checks and maps each
# index as it copies, a branch that random negative indices mispredict; where that per-index
# cost shows (short rows), the indices are checked and made non-negative first, or fancy
# indexing of a one-element-per-row view does both in a loop of its own.
# gather_grad: np.add.at's per-element loop is slow for repeated indices, so whole-row or
# flat-element scatters replace it except on gradients too small to repay their overhead.

#: ``out=`` in mode "wrap" takes indices of both signs as given up to this many: its branch
#: on the sign mispredicts on many random ones (docs/performance_details.md), which a branch-free
#: pass to non-negative indices avoids.
NUMPY_OUT_AS_GIVEN_INDICES = 256
#: Outputs of fewer elements: ``raise`` (the other plans' extra calls cost more than they save).
NUMPY_PLAN_MIN_OUTPUT = 1 << 14
#: Rows (``post * itemsize`` bytes) of these lengths, with ``pre == 1``: ``rows1d``.
NUMPY_ROWS1D_BYTES = frozenset({1, 2, 4, 8, 16})
#: With ``pre == 1``, rows at most this long and data at most 1/8 of the output: ``doubled``.
NUMPY_DOUBLED_ROW_BYTES = 32
NUMPY_DOUBLED_DATA_SHARE = 8
#: With ``pre > 1``, rows at most this long: ``wrap``.
NUMPY_WRAP_ROW_BYTES = 16
#: A scalar index with ``pre > 1`` and rows at least this long: ``slice_copy``.
NUMPY_SCALAR_COPY_ROW_BYTES = 4096
#: Columns (``post == 1``) of at least this many outer rows, where the indices times the
#: outer rows' bytes (``size * itemsize``) are at most ``NUMPY_COLUMNS_FANCY_BYTES``: ``fancy``.
NUMPY_COLUMNS_MIN_ROWS = 1024
NUMPY_COLUMNS_FANCY_BYTES = 256
#: Columns of at least ``NUMPY_COLUMNS_SHORT_MIN_ROWS`` outer rows at most this long
#: (``size * itemsize``), of data that stays in the CPU's caches across one pass per index
#: (at most ``NUMPY_COLUMNS_SHORT_DATA_BYTES``), at any number of indices into an output of
#: at least ``NUMPY_PLAN_MIN_OUTPUT`` elements: ``fancy``. (On 56-byte rows one pass per
#: index read 1.25x ``ndarray.take``'s time at 6344 indices.)
NUMPY_COLUMNS_SHORT_ROW_BYTES = 32
NUMPY_COLUMNS_SHORT_MIN_ROWS = 32
NUMPY_COLUMNS_SHORT_DATA_BYTES = 1 << 20
#: ``out=`` at this many indices or more (32 MiB of intp, wrapped): ``blocks``.
NUMPY_OUT_BLOCKS_MIN_INDICES = 1 << 22
#: Non-contiguous data, an output at least this many times its size: the data copied
#: (by ``ndarray.take`` itself, or first), then the contiguous data's plan.
NUMPY_COPY_OUTPUT_SHARE = 4
#: Non-contiguous data: each inner loop of fancy indexing (a row per (outer row, index) pair,
#: or a column per index) costs about what this many more output elements cost.
NUMPY_FANCY_PAIR_ELEMENTS = 128


def numpy_forward_plan(
    pre: int, size: int, n_index: int, post: int, itemsize: int, contiguous: bool = True
) -> str:
    """The NumPy forward formulation for data viewed as ``(pre, size, post)``.

    - ``raise``: ``ndarray.take`` in mode "raise", checking each index as it copies.
    - ``wrap``: the indices checked and made non-negative at once, without a branch
      (:func:`gatherx._rules.host_wrapped`), then ``ndarray.take`` in mode "wrap", whose
      per-index step is cheaper than mode "raise"'s once no index needs it.
    - ``rows1d``: fancy indexing of the data viewed as one ``size``-long vector of
      ``post * itemsize``-byte elements (NumPy's one-dimensional indexing loop).
    - ``doubled``: ``ndarray.take`` on the data repeated twice along the axis, at the
      indices plus ``size``, in [0, 2 size - 1] exactly for valid indices, as the maximum of
      the sum read as unsigned integers checks (one pass over the index and a reduction).
    - ``fancy``: fancy indexing, which reads strided data where it lies (``ndarray.take``
      would first copy all of non-``contiguous`` data), and copies a few columns
      (``post == 1``) of many outer rows in one strided pass each (or any number of
      columns of short outer rows, while the data stays in the CPU's caches), where
      ``ndarray.take`` steps through every (outer row, index) pair; on long rows (a column
      of a (4096, 4096) matrix) or many columns, ``ndarray.take``'s one pass over the rows
      reads less memory.

    Non-contiguous data takes the contiguous data's plan where the output is at least
    ``NUMPY_COPY_OUTPUT_SHARE`` times its size (the copy of the data then costs at most a
    quarter of the output's), else ``fancy``; the output counted with
    ``NUMPY_FANCY_PAIR_ELEMENTS`` more elements per inner loop of fancy indexing: one per
    (outer row, index) pair in rows of more than one element (``post > 1``), one per index
    in columns of more than one outer row.
    """
    span = size * itemsize  # an outer row: where columns (post == 1) lie
    if post == 1 and (
        (pre >= NUMPY_COLUMNS_MIN_ROWS and n_index * span <= NUMPY_COLUMNS_FANCY_BYTES)
        or (
            span <= NUMPY_COLUMNS_SHORT_ROW_BYTES
            and pre >= NUMPY_COLUMNS_SHORT_MIN_ROWS
            and pre * span <= NUMPY_COLUMNS_SHORT_DATA_BYTES
            and pre * n_index >= NUMPY_PLAN_MIN_OUTPUT
        )
    ):
        return "fancy"
    out = pre * n_index * post
    if not contiguous:
        # fancy indexing's inner loops: a row per (outer row, index) pair in rows of more
        # than one element, a column of the outer rows per index in columns; one vector
        # loop for 1-D data
        loops = n_index * pre if post > 1 else n_index if pre > 1 else 0
        if out + NUMPY_FANCY_PAIR_ELEMENTS * loops < NUMPY_COPY_OUTPUT_SHARE * pre * size * post:
            return "fancy"
    if out < NUMPY_PLAN_MIN_OUTPUT:
        return "raise"
    row = post * itemsize
    if pre == 1:
        if row in NUMPY_ROWS1D_BYTES:
            return "rows1d"
        if row <= NUMPY_DOUBLED_ROW_BYTES and size * NUMPY_DOUBLED_DATA_SHARE <= n_index:
            return "doubled"
        return "raise"
    return "wrap" if row <= NUMPY_WRAP_ROW_BYTES else "raise"


def numpy_out_plan(
    pre: int,
    size: int,
    n_index: int,
    post: int,
    itemsize: int,
    contiguous: bool,
    scalar: bool,
    plain: bool,
    out_contiguous: bool = True,
) -> str:
    """The NumPy ``out=`` formulation: :func:`numpy_forward_plan`'s, written into ``out``.

    - ``fancy``: fancy indexing of non-``contiguous`` data into a result no larger than the
      data, then copied into ``out``, where ``ndarray.take(out=)`` would first copy the
      whole data; fancy indexing elsewhere becomes ``wrap``, which allocates nothing.
    - ``doubled``: only on one outer row of ``plain`` bytes (no objects) at a non-``scalar``
      index, where its view applies; ``raise`` otherwise.
    - ``blocks``: the plans that take ``ndarray.take(out=)`` at a wrapped copy of the index,
      on one outer row of ``plain`` bytes into an ``out_contiguous`` result, at
      ``NUMPY_OUT_BLOCKS_MIN_INDICES`` or more: the index checked by its extremes, then made
      non-negative and taken a cache-sized block of positions at a time into the matching
      rows of ``out``. A wrapped copy of the whole index (32 MiB or more) is memory the
      allocator maps afresh and the kernel zero-fills on every call, several milliseconds
      (whole calls 0.73-0.75x at the median on the sweep's such calls, worst 1.20).
    - the others: ``ndarray.take(out=)`` as :func:`numpy_forward_plan` names them.
    """
    plan = numpy_forward_plan(pre, size, n_index, post, itemsize, contiguous)
    if plan == "fancy":
        if not contiguous and n_index <= size:
            return "fancy"
        plan = "wrap"
    if plan == "doubled":
        if pre == 1 and plain and not scalar:
            return "doubled"
        plan = "raise"
    if pre == 1 and plain and out_contiguous and n_index >= NUMPY_OUT_BLOCKS_MIN_INDICES:
        return "blocks"
    return plan


def numpy_scalar_plan(pre: int, row_bytes: int) -> str:
    """``slice_copy`` or ``take`` for NumPy data viewed as ``(pre, size, post)`` at a scalar
    index, ``row_bytes = post * itemsize``.

    - ``slice_copy``: the basic slice at the index, copied: one strided copy of ``pre`` rows,
      0.89-1.02x the time of ``ndarray.take``'s loop over them once the rows are long
      (docs/performance_details.md).
    - ``take``: ``ndarray.take``, which copies one contiguous row (``pre == 1``) or a short
      strided column faster than the copy of a view.
    """
    return "slice_copy" if pre > 1 and row_bytes >= NUMPY_SCALAR_COPY_ROW_BYTES else "take"


#: At most this many gradient elements: np.add.at itself.
NUMPY_SMALL_GRAD = 2048
#: Rows shorter than this: the element plan.
NUMPY_ROW_POST = 16
#: With ``pre > 1``, a larger share of repeated index positions: the element plan.
NUMPY_ROW_REPEATED = 0.5
#: Short rows of a real floating gradient with at most this many (outer row, column) pairs,
#: and at least one index per ``NUMPY_COLUMNS_SLOTS`` slots of the axis: ``columns``.
NUMPY_COLUMNS_MAX = 16
NUMPY_COLUMNS_SLOTS = 2


def numpy_grad_small(elements: int) -> bool:
    """Whether a NumPy gradient of ``elements`` elements takes ``add.at`` whatever its shape
    (:func:`numpy_grad_plan`'s first rule: the other plans' setup costs more than it saves)."""
    return elements <= NUMPY_SMALL_GRAD


def numpy_grad_plan(
    pre: int, size: int, n_index: int, post: int, repeated: float | None, floating: bool = False
) -> str:
    """The NumPy gather_grad formulation: ``add.at``, ``rows``, ``elements`` or ``columns``.

    ``repeated`` is the share of the ``n_index`` positions whose index value occurs more than
    once; where it is None and the choice depends on it, the answer is ``""`` (count first).
    ``floating``: the gradient has a real floating dtype.

    - ``add.at``: ``np.add.at`` on the original shapes.
    - ``rows``: one fancy-index scatter of whole ``post``-long rows, then the repeated
      indices re-summed a vectorised round per occurrence number.
    - ``elements``: zeros, then the 1-D ``np.add.at`` loop at flat element positions.
    - ``columns``: one float64 ``np.bincount`` of the indices per (outer row, column),
      weighted by that column of the gradient.
    """
    if numpy_grad_small(pre * n_index * post):
        return "add.at"
    if post < NUMPY_ROW_POST:
        if floating and pre * post <= NUMPY_COLUMNS_MAX and n_index * NUMPY_COLUMNS_SLOTS >= size:
            return "columns"
        return "elements"
    if pre == 1:
        return "rows"
    if repeated is None:
        return ""
    return "elements" if repeated > NUMPY_ROW_REPEATED else "rows"


# --------------------------------------------------------------------------- PyTorch
# Forward: index_select on the data as given (one slice's select_copy for a scalar index read
# on the host, advanced indexing for small indices of two or more dimensions, torch.take on
# 1-D data where the index needs no wrap), except on most non-contiguous data, which ATen's
# index_select copies whole first on dim 1. Backward: zeros().index_add_() on the data's own
# shape (on short rows behind outer axes, its (pre, n x row) view) with an int64 index, which
# keeps ATen's parallel innermost-dim scatter.


#: The most indices at which non-contiguous CPU data gathered as columns on dim 2 or later is
#: read by ``index_select`` as given (see ``torch_forward_plan``).
TORCH_STRIDED_SELECT_MAX_INDICES = 8


def torch_forward_plan(
    contiguous: bool,
    data_elements: int,
    out_elements: int,
    shape: tuple[int, ...] = (),
    axis: int = 0,
    n_index: int = 0,
    device_type: str = "cpu",
    int64: bool = False,
    plain: bool = True,
) -> str:
    """How the PyTorch forward reads data of ``data_elements`` (of ``shape``) into
    ``out_elements``, gathered on dim ``axis`` at ``n_index`` indices (``int64``: of that
    dtype; ``plain``: plain tensors in plain eager code).

    - ``index_select``: ``torch.index_select`` on the data as given: contiguous data; on the
      CPU, non-contiguous data gathered on dim 2 or later into an output smaller than the
      data, in slices of more than one element, or as columns (no element after ``axis``)
      at up to ``TORCH_STRIDED_SELECT_MAX_INDICES`` indices. There ATen copies each index's
      strided slice where it lies (on dim 1 it copies the whole data first), where advanced
      indexing computes every element's offset: on columns 2-8x faster at 2-4 indices,
      0.9-1.9x at one, 0.4-4.9x at 8 (median 1.8), 0.3-4.0x at 16 (median 1.1); on slices
      0.56-1.02x the whole call
      (docs/performance_details.md).
    - ``indexing``: ``data[..., index, ...]``, which reads other non-contiguous data where it
      lies: an output smaller than the data costs what the output costs, where
      index_select's copy of the whole data cost 10-500x more (docs/performance_details.md).
    - ``take``: ``torch.take`` at the index as given (negative positions included), on 1-D
      data on the CPU at an int64 index (the only dtype it reads) into an output smaller
      than the data, in ``plain`` eager code (torch.func's vmap has no batching rule for
      it): one offset per element where advanced indexing builds its iterator,
      0.56-1.01x the whole kernel's time of advanced indexing (median 0.65; 35 such cases of
      two sweep seeds; docs/performance_details.md).
    - ``contiguous``: ``index_select`` on a contiguous copy of the data, made explicitly: an
      output at least the data's size pays the copy back, and ATen's own strided loops were
      up to 17x slower than copy and select.
    """
    if contiguous:
        return "index_select"
    if out_elements >= data_elements:
        return "contiguous"
    if device_type == "cpu":
        if len(shape) == 1 and int64 and plain:
            return "take"
        if axis >= 2 and (
            n_index <= TORCH_STRIDED_SELECT_MAX_INDICES or math.prod(shape[axis + 1 :]) > 1
        ):
            return "index_select"
    return "indexing"


#: The most indices at which ``out=`` reads non-contiguous rows of more than one element by
#: ``index_select`` on dim 0 (see ``torch_out_plan``).
TORCH_OUT_IN_PLACE_MAX_INDICES = 256


def torch_out_plan(
    contiguous_out: bool,
    forward: str,
    axis: int,
    n_index: int,
    post: int,
    whole: bool = True,
    lazy: bool = False,
) -> str:
    """How ``out=`` writes a PyTorch gather at ``n_index`` indices whose forward reads the
    data by ``forward`` (a :func:`torch_layout_plan` name, or ``indexing`` or ``take`` for
    non-contiguous data); ``post``: the elements of the data after ``axis``.

    - ``into``: the forward's kernel writes into a contiguous ``out`` viewed with the index
      as one dimension.
    - ``index_select``: ``index_select(out=)`` on non-contiguous data as given, where the
      forward reads it by advanced indexing, which has no ``out=``, or (1-D data) by
      ``torch.take``: ATen's loops on dim 0 and on dims 2 and later read such data where it
      lies and write ``out`` directly, where the forward's result would be copied in (on
      dim 1 ATen copies the whole data first); on dim 0 for rows of more than one element
      at up to ``TORCH_OUT_IN_PLACE_MAX_INDICES`` (its strided copy per index costs more
      than advanced indexing's loop on many) (docs/performance_details.md).
    - ``copy``: the forward's result copied into ``out``.

    ``whole``: whether ``out`` starts where the forward's elements can (``elements`` reads
    each row as one integer element; else ``index_select`` on the data as given writes it).
    ``lazy``: ``out`` is a conjugate or negative view and ``forward`` would view its memory
    as another dtype, which PyTorch refuses there: ``copy``.
    """
    if not contiguous_out or lazy:
        return "copy"
    if not whole:
        return "index_select"
    if forward != "indexing" and forward != "take":  # (take: non-contiguous 1-D data)
        return "into"
    if axis >= 2 or (axis == 0 and (post == 1 or n_index <= TORCH_OUT_IN_PLACE_MAX_INDICES)):
        return "index_select"
    return "copy"


#: The most output elements into which ``out=`` copies the forward's own result at an index
#: of two or more dimensions read as given (see ``torch_out_given``).
TORCH_OUT_GIVEN_MAX_ELEMENTS = 1024


def torch_out_given(forward: str, index_ndim: int, out_elements: int) -> bool:
    """Whether ``out=`` at an index of ``index_ndim`` dimensions into ``out_elements`` copies
    the forward's own result at the index as given, where the forward's plan at that index
    (read before its sign) is ``forward``: advanced indexing (``indexing``, which reads
    negative positions itself) at two or more dimensions into at most
    ``TORCH_OUT_GIVEN_MAX_ELEMENTS``. The index's extremes checked, one ATen call and a
    small copy in place of the wrap, the flatten, ``out``'s view and ``index_select(out=)``
    (whole calls 0.83-0.85x at the median on the sweep's such calls, worst 1.03; into more
    elements the copy grows, up to 1.56x; docs/performance_details.md). :func:`torch_out_plan`
    decides every other call, after the wrap."""
    small = out_elements <= TORCH_OUT_GIVEN_MAX_ELEMENTS
    return forward == "indexing" and index_ndim >= 2 and small


#: The fewest indices at which ``blocks``, and ``gather`` of one-byte elements, pay for
#: their extra Python calls.
TORCH_MIN_INDICES = 32
#: The fewest indices of ``gather`` of elements of two bytes or more: on fewer, its loop's
#: cost per outer row shows.
TORCH_GATHER_MIN_INDICES = 8
#: Data whose gathered dim is 2 or later behind at most this many outer rows: ``blocks``.
TORCH_BLOCKS_MAX_ROWS = 16
#: The fewest output elements of ``gather``; of float32 data that ATen's dim-1 loop would
#: read (dim 1 as given, or the ``blocks`` view), whose plain loop runs on one thread.
TORCH_GATHER_MIN_ELEMENTS = 4096
TORCH_GATHER_FLOAT32_MIN_ELEMENTS = 1 << 17
#: Rows of at most ``TORCH_GATHER_ROWS_MAX`` elements (more than one) of contiguous data behind
#: more than ``TORCH_BLOCKS_MAX_ROWS`` outer rows, at ``TORCH_GATHER_MIN_INDICES`` indices or
#: more and at least ``TORCH_GATHER_ROWS_MIN_BLOCKS`` (outer row, index) pairs, in outer rows of
#: at most ``TORCH_GATHER_ROWS_MAX_SPAN`` bytes: ``gather`` at the index expanded over each
#: row's elements.
TORCH_GATHER_ROWS_MAX = 4
TORCH_GATHER_ROWS_MIN_BLOCKS = 1 << 14
TORCH_GATHER_ROWS_MAX_SPAN = 1 << 20
#: Columns of dim 1 behind at least this many outer rows, not float32, that ``gather`` does
#: not take: ``columns``.
TORCH_COLUMNS_MIN_ROWS = 64
#: Dim 1 behind at least ``TORCH_SLICES_MIN_ROWS`` outer rows, in rows of at least
#: ``TORCH_SLICES_MIN_ROW_BYTES`` into at least ``TORCH_SLICES_MIN_BYTES`` of output:
#: ``slices``.
TORCH_SLICES_MIN_ROWS = 1024
TORCH_SLICES_MIN_ROW_BYTES = 512
TORCH_SLICES_MIN_BYTES = 1 << 21
#: The fewest indices and output elements of ``broadcast``.
TORCH_BROADCAST_MIN_INDICES = 4
TORCH_BROADCAST_MIN_ELEMENTS = 1 << 14
#: The most output elements of ``indexing``, at an index of two or more dimensions; at a
#: 1-D index holding a negative value (read on the host).
TORCH_INDEXING_MAX_ELEMENTS = 8192
TORCH_INDEXING_NEGATIVE_MAX_ELEMENTS = 1024
#: Rows of these many bytes (1, 2, 4, 8: an integer dtype's width) after the axis are read as
#: one integer element each (``elements``, ``gather_elements``); with only dimensions of one
#: before the axis, at ``TORCH_ELEMENTS_MIN_INDICES`` indices or more (the views cost 2 us).
TORCH_ELEMENT_BYTES = frozenset({1, 2, 4, 8})
TORCH_ELEMENTS_MIN_INDICES = 2048


def row_elements(row_bytes: int, offset: int) -> bool:
    """Whether rows of ``row_bytes`` bytes, the first ``offset`` bytes into their storage,
    can each be read as one integer element: a width of ``TORCH_ELEMENT_BYTES``, at an
    offset such an element can start at."""
    return row_bytes in TORCH_ELEMENT_BYTES and offset % row_bytes == 0


def torch_layout_plan(
    device_type: str,
    shape: tuple[int, ...],
    axis: int,
    n_index: int,
    float32: bool,
    index_ndim: int = 1,
    negative: bool | None = False,
    int64: bool = True,
    contiguous: bool = True,
    itemsize: int = 4,
    offset: int = 0,
) -> str:
    """Which ATen kernel reads CPU data of ``shape`` (of ``itemsize`` bytes an element,
    starting ``offset`` bytes into its storage) gathered on dim ``axis`` at ``n_index``
    indices, seen as ``(pre, size, post)``.

    ATen's CPU ``index_select`` has three loops for data of rank >= 2: on dim 0, one
    ``memcpy`` per index of its contiguous slice; on dim 1, one serial ``memcpy`` per (outer
    row, index) block (a plain loop for float32 columns); on any later dim, one strided copy
    of the index's whole slice per index, in parallel over the indices, whose fixed cost is
    that of about 16 blocks of the dim-1 loop. ``torch.gather`` on the index expanded over
    the outer rows reads one element per output element, in parallel over the rows, with no
    call per element: the loop for columns (docs/performance_details.md).

    - ``as_is``: ``index_select`` on the data as given.
    - ``blocks``: ``index_select`` on the ``(pre, size, post)`` view on dim 1 (contiguous
      data), where the original dim is 2 or later and ``pre`` is small: the dim-1 loop in
      place of a slice copy per index.
    - ``gather``: ``torch.gather`` for columns (``post == 1``) behind outer rows, at an
      output of at least ``TORCH_GATHER_MIN_ELEMENTS``, at ``TORCH_GATHER_MIN_INDICES`` or
      more (``TORCH_MIN_INDICES`` for one-byte elements, whose strided copies are cheaper):
      it reads each row once and writes each output row in order, where the strided copy
      per index of ``columns`` and of later dims reads every row again for each index and
      writes the output a column at a time (on fewer indices its loop's cost per row shows,
      and below that output its two extra calls' Python); for float32 on the dim-1 loop,
      whose plain loop beats it until ``torch.gather`` splits its rows over threads, at
      least ``TORCH_GATHER_FLOAT32_MIN_ELEMENTS``. Rows of 2-4 elements of ``contiguous``
      data as well (the rule under ``TORCH_GATHER_ROWS_MAX``), on the (pre, size x row) view
      at the index expanded over each row's elements, where ``index_select`` copies one short
      row per (outer row, index) pair or the whole slice per index: with fewer outer rows the
      expanded index costs as much as the output, at fewer than 8 indices the few slice copies
      cost less, and in outer rows past a MiB the reads scatter over memory either way.
    - ``gather_elements``: such rows where they hold 2, 4 or 8 bytes (``TORCH_ELEMENT_BYTES``)
      from an ``offset`` such an element can start at, behind any number of outer rows:
      ``torch.gather`` on the (pre, size) view of one integer element per row at the index
      itself (kernels alone 0.28-0.68x the index expanded over each row's elements; behind
      2-16 outer rows, where no index is expanded over the rows, 0.23-0.85x ``index_select``
      from 2^14 pairs, 0.65-1.0x at 2^13, 1.7-5.6x on few).
    - ``columns``: ``index_select`` on the ``(pre, 1, size, 1)`` view on dim 2 (contiguous
      data), for the columns of dim 1 behind many outer rows that ``gather`` does not take
      (few indices, whose loop per row would cost ``gather`` most): a strided column copy per
      index, in parallel, in place of the dim-1 loop's ``memcpy`` per element (float32 keeps
      its plain loop).
    - ``elements``: ``index_select`` on 1-D data of one integer element per row, where
      nothing but dimensions of one precede the axis and the rows of contiguous data (or its
      copy) hold 1, 2, 4 or 8 bytes at an ``offset`` that such an element can start at
      (``TORCH_ELEMENT_BYTES``, at ``TORCH_ELEMENTS_MIN_INDICES`` indices or more): ATen's
      1-D loop moves one element per index where its loop on dim 0 calls ``memcpy`` per row
      and on later dims copies a strided slice per index (kernels alone 0.36-0.65x at
      4096-10^5 indices, 0.5-0.9x at 10^6; 1.0-1.2x at 1024, where the views' 2 us show).
    - ``indexing``: advanced indexing on the data as given, at an index of ``index_ndim``
      >= 2 dimensions as given (negatives included, so it is not wrapped), where the output
      has at most ``TORCH_INDEXING_MAX_ELEMENTS``: one ATen call in place of the wrap, the
      flatten, ``index_select`` and the view, whose fixed costs outweigh its slower loop
      there; at a 1-D index that holds a negative value (``negative``), where the output has
      at most ``TORCH_INDEXING_NEGATIVE_MAX_ELEMENTS``: one ATen call in place of the wrap
      and ``index_select``.
    - ``take``: ``torch.take`` at the index as given, on ``contiguous`` 1-D data at an
      ``int64`` index: of two or more dimensions into at most ``TORCH_INDEXING_MAX_ELEMENTS``
      (one call, where advanced indexing's costs more and ``index_select`` needs the index
      flattened and its result viewed), or holding a negative value (its loop moves negative
      positions up as it reads them, where ``index_select`` needs a wrapped copy of the
      index: a new array, page faults and two passes over it), at fewer than
      ``ATEN_GRAIN_SIZE`` values or into at most ``TORCH_TAKE_MAX_BYTES`` of data at any
      count (0.3-0.97x the wrap and ``index_select`` at 4 10^4-5 10^6 values), and at an
      index of ``TORCH_TAKE_MEMORY_BYTES`` or more into at most as many (whole calls
      0.45-0.86x, median 0.63, at 1.2-6.9 10^6 values into 0.6-8 MiB). Between them
      ``take``'s reads, scattered over memory, cost about what the wrap saves (1-8 MiB at
      4 10^4-2.5 10^5 values: 0.86-1.24x, median 1.02); on
      strided data ``take`` computes each element's offset, and on other flat data the view
      of its result cost more than it saved.
    - ``take_negative``: ``take`` where the index, whose sign is not read yet (``negative``
      None), holds a negative value; where it holds none, ``index_select`` on the data as
      given (the plan for ``negative`` False there; the caller reads the extremes first).

    - ``slices``: ``index_select`` on dim 2 of the data seen with a leading dimension of one,
      for dim 1 behind ``TORCH_SLICES_MIN_ROWS`` outer rows or more, in rows of
      ``TORCH_SLICES_MIN_ROW_BYTES`` or more, into ``TORCH_SLICES_MIN_BYTES`` of output or more:
      ATen's loop for later dims copies each index's strided slice, split over torch's
      threads, where its dim-1 loop copies one block a (outer row, index) pair on one thread
      (kernels alone 0.52-0.91x there on 2 threads, every dtype; on fewer outer rows or
      shorter rows up to 1.5x, docs/performance_details.md).
    - ``broadcast``: the one slice of an axis of length 1 (which every valid index reads)
      expanded over the index, a view, copied into a new tensor (rows of 2, 4 or 8 bytes
      that :func:`row_elements` allows as one integer element each): one copy in place of a
      strided copy per index; the index is checked, never wrapped. At
      ``TORCH_BROADCAST_MIN_INDICES`` or more into ``TORCH_BROADCAST_MIN_ELEMENTS`` or more
      (below, its four calls cost more than the copies they save); non-contiguous data is
      copied first (an output at least the data's size: see ``torch_forward_plan``).

    Measured on the CPU only: other devices take the data as given. (Cheap tests first: most
    calls are small, and this runs in each.)
    """
    if device_type != "cpu":
        return "as_is"
    if (
        shape[axis] == 1
        and n_index >= TORCH_BROADCAST_MIN_INDICES
        and math.prod(shape) * n_index >= TORCH_BROADCAST_MIN_ELEMENTS
    ):
        return "broadcast"
    if len(shape) == 1 and int64 and contiguous and n_index:
        if index_ndim >= 2 and n_index <= TORCH_INDEXING_MAX_ELEMENTS:
            return "take"
        table = shape[0] * itemsize
        if negative is not False and (
            n_index < ATEN_GRAIN_SIZE
            or table <= TORCH_TAKE_MAX_BYTES
            or table <= TORCH_TAKE_MEMORY_BYTES <= n_index * 8
        ):
            return "take" if negative else "take_negative"
    if index_ndim >= 2 or negative:
        size = shape[axis]
        most = (
            TORCH_INDEXING_MAX_ELEMENTS if index_ndim >= 2 else TORCH_INDEXING_NEGATIVE_MAX_ELEMENTS
        )
        if not size or math.prod(shape) // size * n_index <= most:
            return "indexing"
    pre = math.prod(shape[:axis])
    row = math.prod(shape[axis + 1 :])
    if (
        pre == 1
        and n_index >= TORCH_ELEMENTS_MIN_INDICES
        and contiguous
        and len(shape) > 1
        and row_elements(row * itemsize, offset)
    ):
        return "elements"
    if axis == 0:
        return "as_is"
    column = row == 1
    many = n_index >= TORCH_MIN_INDICES
    blocks = axis >= 2 and 1 < pre <= TORCH_BLOCKS_MAX_ROWS
    fewest = TORCH_GATHER_MIN_INDICES if itemsize > 1 else TORCH_MIN_INDICES
    if n_index >= fewest and column and pre > 1:
        dim1_float32 = float32 and (axis == 1 or blocks)
        least = TORCH_GATHER_FLOAT32_MIN_ELEMENTS if dim1_float32 else TORCH_GATHER_MIN_ELEMENTS
        if pre * n_index >= least:
            return "gather"
    if (
        contiguous
        and pre > 1
        and 1 < row <= TORCH_GATHER_ROWS_MAX
        and n_index >= TORCH_GATHER_MIN_INDICES
        and pre * n_index >= TORCH_GATHER_ROWS_MIN_BLOCKS
        and shape[axis] * row * itemsize <= TORCH_GATHER_ROWS_MAX_SPAN
    ):
        if row_elements(row * itemsize, offset):
            return "gather_elements"  # (the index as given: few outer rows too)
        if pre > TORCH_BLOCKS_MAX_ROWS:
            return "gather"
    if axis == 1 and column and pre >= TORCH_COLUMNS_MIN_ROWS and not float32:
        return "columns"
    if (
        axis == 1
        and pre >= TORCH_SLICES_MIN_ROWS
        and row * itemsize >= TORCH_SLICES_MIN_ROW_BYTES
        and pre * n_index * row * itemsize >= TORCH_SLICES_MIN_BYTES
    ):
        return "slices"
    return "blocks" if many and blocks else "as_is"


#: ATen splits an elementwise loop over torch's thread pool from this many elements
#: (``at::internal::GRAIN_SIZE``, ATen's constant).
ATEN_GRAIN_SIZE = 32768
#: The most bytes of 1-D data that ``take`` reads at any count of indices (see
#: ``torch_layout_plan``; docs/performance_details.md).
TORCH_TAKE_MAX_BYTES = 1 << 19
#: An int64 index of at least this many bytes (its wrap a pass over memory into a new array,
#: about what ``index_select`` itself takes) into 1-D data of at most as many: ``take``.
TORCH_TAKE_MEMORY_BYTES = 1 << 23


def torch_extremes_plan(n_index: int) -> str:
    """How the PyTorch eager path reads the extremes of a CPU index of ``n_index`` values:
    ``aminmax`` (both in one ATen pass, split over torch's threads from 32768 values: 2.0-2.2
    us on 17-1000 int64 values against 3.0-3.3 us for ``numpy()`` and NumPy's two
    reductions; 0.13 against 0.18 ms on 10^6, 1.3 against 3.7 ms on 8 10^6) from more than
    ``SMALL_HOST_INDEX`` values; else ``host`` (:func:`gatherx._rules.host_extremes`: Python
    ints)."""
    return "aminmax" if n_index > SMALL_HOST_INDEX else "host"


#: The most values of a CPU index read by ``aminmax`` and made non-negative by ``remainder``.
TORCH_REMAINDER_MAX_INDICES = 1024


def torch_wrap_plan(n_index: int) -> str:
    """How the PyTorch eager path checks a CPU index of ``n_index`` values and makes it
    non-negative:

    - ``remainder``: ``torch.aminmax`` for its extremes, then, where one is negative,
      ``torch.remainder``: two ATen calls, no NumPy (64-1024 int64 values: the wrap 2.5-4.3
      us against 4.0-4.9 us by the host); from more than ``SMALL_HOST_INDEX`` values to
      ``TORCH_REMAINDER_MAX_INDICES``, past which its integer division costs more than the
      host's two passes (2048 values: 6.4 against 4.9 us).
    - ``sampled``: more values; where a sample of them holds no negative one
      (:func:`gatherx._rules.none_negative_in_sample`), ``torch.aminmax`` first, and the
      index as given where none is negative: one ATen pass, split over torch's threads,
      where NumPy's check reads two (its minimum and maximum) or, below
      ``HOST_EXTREMES_FIRST``, wraps into a new array (non-negative int64, the check: 2000
      values 7.3 -> 4.7 us, 6 10^4 36 -> 13 us, 4.7 10^6 1.46 -> 0.64 ms); else, and where
      a negative value hid from the sample, ``host``.
    - ``host``: :func:`gatherx._rules.host_wrapped` on the index's memory: a few values as
      Python ints, more checked and wrapped in three passes without a branch or a division.
    """
    if n_index <= SMALL_HOST_INDEX:
        return "host"
    return "remainder" if n_index <= TORCH_REMAINDER_MAX_INDICES else "sampled"


#: The most gradient elements that PyTorch's eager ``gather_grad`` on dim 0 adds by
#: ``index_put_`` at the index as given (see ``torch_grad_given``).
TORCH_GRAD_GIVEN_MAX_ELEMENTS = 1 << 12


def torch_grad_given(
    axis: int, n_index: int, grad_elements: int, shape: Sequence[int], half: bool
) -> bool:
    """Whether PyTorch's eager ``gather_grad`` on the CPU adds a gradient of
    ``grad_elements`` at ``n_index`` indices along ``axis`` into zeros of ``shape`` by
    ``index_put_(accumulate=True)`` at the index as given, which reads negative positions
    itself: the index checked by its extremes, neither wrapped nor flattened, the gradient not
    reshaped. On dim 0, at most ``TORCH_GRAD_GIVEN_MAX_ELEMENTS``; ``half`` (float16 or
    bfloat16) at more than ``SMALL_HOST_INDEX`` indices where :func:`half_grad_plan` makes
    the float32 table anyway, added in float32 and rounded once (fewer are read first: where
    none repeats, each slice is written as given, without the table). Whole calls 0.67-0.80x
    at the median on such sweep calls (half precision 0.60-0.64x). On later dims the
    operator's own call (the Python method takes no ``None`` for the leading dims) cost up to
    1.16x; on more elements its serial loop per element lost up to 1.33x to ``index_add_``
    (docs/performance_details.md)."""
    if axis or grad_elements > TORCH_GRAD_GIVEN_MAX_ELEMENTS:
        return False
    if not half:
        return True
    return (
        n_index > SMALL_HOST_INDEX
        and half_grad_plan("torch", math.prod(shape), n_index) == "float32"
    )


#: The fewest index positions from which PyTorch adds a gradient of one element a position
#: on the CPU by ``scatter_add_`` (see ``torch_backward_plan``).
TORCH_SCATTER_MIN_INDICES = 4096


def torch_backward_plan(
    index_dtype: str,
    device_type: str,
    n_index: int = 0,
    elements: int = 0,
    eager: bool = False,
    half: bool = False,
) -> str:
    """How PyTorch adds a gradient of ``elements`` at ``n_index`` positions into zeros:

    - ``scatter_add``: ``scatter_add_`` on the 1-D view of both, at an int64 index, where each
      position holds one element (1-D data, or other dims of one), from
      ``TORCH_SCATTER_MIN_INDICES`` positions, in plain (``eager``) CPU code, but for
      float16 and bfloat16 (``half``: their own plans, in float32). ATen's ``index_add_``
      of a 1-D table runs a serial loop that checks each position; ``scatter_add_`` adds in
      the same order (the same bits) in 0.44-0.88x its time at 10^5-10^6 positions,
      0.69-1.01x at 8192, 0.69-1.02x at 4096, and loses below 2048 (1.3x at 64-128; whole
      calls 0.78-0.81x at the median on the sweep's such cases; docs/performance_details.md).
    - ``index_add_int64``: ``zeros.index_add_`` on the data's shape after widening an int32
      index, which the CPU kernel needs for its fast innermost-dim path.
    - ``index_add``: the same at the index as given. Measured on CPU only: other devices keep
      the index and ``index_add_``.
    """
    if device_type != "cpu":
        return "index_add"
    if eager and not half and n_index == elements and n_index >= TORCH_SCATTER_MIN_INDICES:
        return "scatter_add"
    return "index_add_int64" if index_dtype != "int64" else "index_add"


#: PyTorch adds a gradient whose gathered axis has outer dimensions before it and rows of at
#: most ``TORCH_GRAD_ROWS_MAX`` elements after it on its (pre, n x row) view from these many
#: index positions: ``TORCH_GRAD_LAST_DIM_MIN_INDICES`` on rows of one element, else
#: ``TORCH_GRAD_ROWS_MIN_INDICES`` (see ``torch_grad_rows``).
TORCH_GRAD_LAST_DIM_MIN_INDICES = 32
TORCH_GRAD_ROWS_MIN_INDICES = 128
TORCH_GRAD_ROWS_MAX = 8


def torch_grad_rows(shape: Sequence[int], axis: int, index_ndim: int, device_type: str) -> int:
    """The row length (the elements after the index's dimensions) on which PyTorch adds a
    gradient of ``shape`` (the index's ``index_ndim`` dimensions at ``axis``) into zeros on
    the (pre, n x row) view of both, the gathered axis last, at the index expanded over each
    row's elements (rows of one: the index itself); 0 where it adds on the gradient's own
    dims. On the CPU, where the dimensions before the index's hold more than one element and
    rows hold at most ``TORCH_GRAD_ROWS_MAX``: from ``TORCH_GRAD_LAST_DIM_MIN_INDICES``
    positions on rows of one, from ``TORCH_GRAD_ROWS_MIN_INDICES`` on longer rows (whose
    expanded index costs two more calls; half precision picks its plan by the index's own
    positions, not the expanded ones). ATen's ``index_add_``
    on the last (or first) dim runs one ``scatter_add_`` over the rows; on an inner one it
    loops over the positions, one strided slice of the outer rows each (rows of one:
    0.07-0.78x that loop from 48
    positions, 0.31-0.96x at 32; rows of 2-12: 0.28-0.92x from 256 positions, 0.40-1.16x at
    128, up to 1.5x at 64 on few outer rows; rows of 16 and more gain little or lose:
    docs/performance_details.md)."""
    end = axis + index_ndim
    if device_type != "cpu" or end == len(shape):
        return 0
    row = math.prod(shape[end:])
    if row > TORCH_GRAD_ROWS_MAX or math.prod(shape[:axis]) <= 1:
        return 0
    least = TORCH_GRAD_LAST_DIM_MIN_INDICES if row == 1 else TORCH_GRAD_ROWS_MIN_INDICES
    return row if math.prod(shape[axis:end]) >= least else 0


# --------------------------------------------------------------------------- JAX
# lax.gather as given matches jnp.take under jit; the transpose (a scatter-add) is faster with
# the scattered axis leading, and the validity mask is skipped only for host-checked indices.


#: The last axis is moved first where the index holds at least 1 / this share of its length.
JAX_AXIS_FIRST_SHARE = 4


def jax_layout_plan(shape: tuple[int, ...], axis: int, n_index: int) -> str:
    """``as_is`` or ``axis_first`` (move ``axis`` to the front, gather on axis 0 and move the
    index dimensions back): the latter for the last axis of data of rank >= 2 at an index of
    at least a ``JAX_AXIS_FIRST_SHARE``-th of the axis's length, where the transpose scatters
    whole rows in place of single elements (0.49-0.57x on ``cols`` and ``last``, 0.18-0.75x
    from the axis's length on); on fewer values the moves of the whole table cost more than
    the scatter saves (1.6-4.8x at a tenth of the axis and below)."""
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    if post == 1 and pre > 1 and n_index * JAX_AXIS_FIRST_SHARE >= shape[axis]:
        return "axis_first"
    return "as_is"


def jax_index_plan(index_ndim: int, checked: bool = True, held: bool = True) -> str:
    """``slice`` (``lax.dynamic_index_in_dim``) for a scalar index, else ``gather``.

    One slice needs no gather: under ``jit`` the slice ran at 1.01-1.02 of ``data[:, i]``
    where the gather in fill mode took 1.16-1.26. It clamps a bad index, so an index not
    ``checked`` takes it behind a ``lax.cond`` on its validity, whose other branch is the
    gather's fill value as a constant of the data's dtype (docs/performance_details.md):
    data of a dtype JAX does not hold in its current mode (not ``held``: 64-bit data made
    before ``jax_enable_x64`` was turned off) has no such constant, and takes the gather,
    which fills it.
    """
    return "slice" if index_ndim == 0 and (checked or held) else "gather"


def jax_gather_mode(indices_checked: bool) -> str:
    """``promise_in_bounds`` where the index values were checked on the host, else
    ``fill_or_drop`` (out-of-range reads give the fill value, writes are dropped)."""
    return "promise_in_bounds" if indices_checked else "fill_or_drop"
