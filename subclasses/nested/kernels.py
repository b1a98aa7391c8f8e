"""Triton kernels over jagged tensors, their typed launchers, and the torch custom ops built on them.

Input: `values` (total_length, D) fp32 / bf16 / fp16 and `offsets` (B + 1,) int64; row i is
`values[offsets[i]:offsets[i + 1]]`.
Output: the custom ops `subclassaot_jagged::{sum, mean, amax, softmax, softmax_pool, to_padded, from_padded}`; each
traces as one opaque node, and all but amax have autograd formulas.
Invariants: each launcher computes what its twin in `reference.py` computes (fp32 accumulation); the path that ran
is `kernel_path(device)`. Offsets are trusted, not validated (that would need a device sync), but the kernels
clamp them to [0, total_length] so a bad offsets tensor cannot make them read or write out of bounds.
See Note [Empty Jagged Rows] and Note [Kernel Dispatch].
"""

import enum
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from subclasses.kernel_dispatch import KernelPath, custom_op, kernel_out_dtype, select_path
from subclasses.nested import reference


class Reduction(enum.Enum):
    """The reductions `jagged_reduce` runs over the ragged dim; see Note [Empty Jagged Rows]."""

    SUM = "sum"
    MEAN = "mean"
    AMAX = "amax"


# Kernels: a program owns one row (grid axis 0) and one block of features (axis 1), and loops over the row's
# length in blocks of BLOCK_L. Arithmetic is fp32. Defined only when Triton imports (in the `else:`, so that type
# checkers see them bound together with `triton`).

try:
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # the reference runs instead; see Note [Kernel Dispatch]
    _HAS_TRITON = False
    _INTERPRETED = False
else:
    _HAS_TRITON = True

    @triton.jit
    def _jagged_reduce_kernel(
        values_ptr: tl.tensor,
        offsets_ptr: tl.tensor,
        out_ptr: tl.tensor,
        total_length: tl.tensor,
        D: tl.tensor,
        stride_vt: tl.tensor,
        stride_vd: tl.tensor,
        stride_ob: tl.tensor,
        stride_od: tl.tensor,
        REDUCTION: tl.constexpr,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ) -> None:
        row = tl.program_id(0)
        end = tl.minimum(tl.load(offsets_ptr + row + 1), total_length)
        start = tl.minimum(tl.load(offsets_ptr + row), end)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        if REDUCTION == "amax":
            acc = tl.full((BLOCK_D,), float("-inf"), tl.float32)
        else:
            acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for pos in tl.range(start, end, BLOCK_L):
            ts = pos + tl.arange(0, BLOCK_L)
            mask = (ts < end)[:, None] & (cols < D)[None, :]
            x = tl.load(values_ptr + ts[:, None] * stride_vt + cols[None, :] * stride_vd, mask=mask, other=0.0)
            x = x.to(tl.float32)
            if REDUCTION == "amax":
                acc = tl.maximum(acc, tl.max(tl.where(mask, x, float("-inf")), axis=0))
            else:
                acc = acc + tl.sum(x, axis=0)
        if REDUCTION == "mean":
            # NaN for an empty row, without dividing by zero (numpy would warn in the interpreter).
            count = (end - start).to(tl.float32)
            acc = tl.where(count > 0, tl.math.div_rn(acc, tl.maximum(count, 1.0)), float("nan"))
        tl.store(out_ptr + row * stride_ob + cols * stride_od, acc, mask=cols < D)

    @triton.jit
    def _jagged_softmax_kernel(
        values_ptr: tl.tensor,
        offsets_ptr: tl.tensor,
        out_ptr: tl.tensor,
        total_length: tl.tensor,
        D: tl.tensor,
        stride_vt: tl.tensor,
        stride_vd: tl.tensor,
        stride_ot: tl.tensor,
        stride_od: tl.tensor,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ) -> None:
        # Online softmax: one pass keeps a running max and a sum rescaled to it, a second pass writes.
        row = tl.program_id(0)
        end = tl.minimum(tl.load(offsets_ptr + row + 1), total_length)
        start = tl.minimum(tl.load(offsets_ptr + row), end)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        row_max = tl.full((BLOCK_D,), float("-inf"), tl.float32)
        row_sum = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for pos in tl.range(start, end, BLOCK_L):
            ts = pos + tl.arange(0, BLOCK_L)
            mask = (ts < end)[:, None] & (cols < D)[None, :]
            x = tl.load(values_ptr + ts[:, None] * stride_vt + cols[None, :] * stride_vd, mask=mask, other=0.0)
            # Only positions past the row's end become -inf; feature lanes past D stay finite (0), so that no
            # lane computes exp(-inf - -inf) = NaN. Every block holds at least one real position, so after the
            # first block the running max is finite.
            x = tl.where((ts < end)[:, None], x.to(tl.float32), float("-inf"))
            new_max = tl.maximum(row_max, tl.max(x, axis=0))
            row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max[None, :]), axis=0)
            row_max = new_max
        for pos in tl.range(start, end, BLOCK_L):
            ts = pos + tl.arange(0, BLOCK_L)
            mask = (ts < end)[:, None] & (cols < D)[None, :]
            x = tl.load(values_ptr + ts[:, None] * stride_vt + cols[None, :] * stride_vd, mask=mask, other=0.0)
            probs = tl.math.div_rn(tl.exp(x.to(tl.float32) - row_max[None, :]), row_sum[None, :])
            tl.store(out_ptr + ts[:, None] * stride_ot + cols[None, :] * stride_od, probs, mask=mask)

    @triton.jit
    def _jagged_to_padded_kernel(
        values_ptr: tl.tensor,
        offsets_ptr: tl.tensor,
        out_ptr: tl.tensor,
        total_length: tl.tensor,
        D: tl.tensor,
        max_len: tl.tensor,
        padding_value: tl.tensor,
        stride_vt: tl.tensor,
        stride_vd: tl.tensor,
        stride_ob: tl.tensor,
        stride_ol: tl.tensor,
        stride_od: tl.tensor,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ) -> None:
        row = tl.program_id(0)
        end = tl.minimum(tl.load(offsets_ptr + row + 1), total_length)
        start = tl.minimum(tl.load(offsets_ptr + row), end)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        for pos in tl.range(0, max_len, BLOCK_L):
            ls = pos + tl.arange(0, BLOCK_L)
            in_row = (ls < end - start)[:, None] & (cols < D)[None, :]
            src = values_ptr + (start + ls)[:, None] * stride_vt + cols[None, :] * stride_vd
            # `where`, not `load(other=padding_value)`: `other` would be cast to the values' dtype first.
            x = tl.where(in_row, tl.load(src, mask=in_row, other=0.0), padding_value)
            dst = out_ptr + row * stride_ob + ls[:, None] * stride_ol + cols[None, :] * stride_od
            tl.store(dst, x, mask=(ls < max_len)[:, None] & (cols < D)[None, :])

    @triton.jit
    def _jagged_from_padded_kernel(
        padded_ptr: tl.tensor,
        offsets_ptr: tl.tensor,
        out_ptr: tl.tensor,
        total_length: tl.tensor,
        D: tl.tensor,
        max_len: tl.tensor,
        stride_pb: tl.tensor,
        stride_pl: tl.tensor,
        stride_pd: tl.tensor,
        stride_vt: tl.tensor,
        stride_vd: tl.tensor,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ) -> None:
        row = tl.program_id(0)
        end = tl.minimum(tl.load(offsets_ptr + row + 1), total_length)
        start = tl.minimum(tl.load(offsets_ptr + row), end)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        for pos in tl.range(0, end - start, BLOCK_L):
            ls = pos + tl.arange(0, BLOCK_L)
            in_row = (ls < end - start)[:, None] & (cols < D)[None, :]
            # Positions past max_len were truncated by to_padded: they read as 0 (Note [Empty Jagged Rows]).
            in_pad = in_row & (ls < max_len)[:, None]
            src = padded_ptr + row * stride_pb + ls[:, None] * stride_pl + cols[None, :] * stride_pd
            x = tl.load(src, mask=in_pad, other=0.0)
            tl.store(out_ptr + (start + ls)[:, None] * stride_vt + cols[None, :] * stride_vd, x, mask=in_row)

    @triton.jit
    def _jagged_softmax_pool_kernel(
        values_ptr: tl.tensor,
        offsets_ptr: tl.tensor,
        out_ptr: tl.tensor,
        total_length: tl.tensor,
        D: tl.tensor,
        stride_vt: tl.tensor,
        stride_vd: tl.tensor,
        stride_ob: tl.tensor,
        stride_od: tl.tensor,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ) -> None:
        # See Note [Fused Softmax Pool]: one pass, a running max, and two sums rescaled to it.
        row = tl.program_id(0)
        end = tl.minimum(tl.load(offsets_ptr + row + 1), total_length)
        start = tl.minimum(tl.load(offsets_ptr + row), end)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        row_max = tl.full((BLOCK_D,), float("-inf"), tl.float32)
        row_sum = tl.zeros((BLOCK_D,), dtype=tl.float32)
        row_dot = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for pos in tl.range(start, end, BLOCK_L):
            ts = pos + tl.arange(0, BLOCK_L)
            in_row = (ts < end)[:, None]
            mask = in_row & (cols < D)[None, :]
            x = tl.load(values_ptr + ts[:, None] * stride_vt + cols[None, :] * stride_vd, mask=mask, other=0.0)
            x = x.to(tl.float32)
            # As in the softmax kernel: only positions past the row's end are -inf (their weight is exp(-inf) = 0),
            # and the products use x itself (0 there), so no lane computes 0 * -inf.
            new_max = tl.maximum(row_max, tl.max(tl.where(in_row, x, float("-inf")), axis=0))
            alpha = tl.exp(row_max - new_max)
            weights = tl.exp(tl.where(in_row, x, float("-inf")) - new_max[None, :])
            row_sum = row_sum * alpha + tl.sum(weights, axis=0)
            row_dot = row_dot * alpha + tl.sum(weights * x, axis=0)
            row_max = new_max
        # An empty row has no positions: its sum is 0 (Note [Empty Jagged Rows]), not 0 / 0.
        out = tl.where(row_sum > 0, tl.math.div_rn(row_dot, tl.maximum(row_sum, 1e-30)), 0.0)
        tl.store(out_ptr + row * stride_ob + cols * stride_od, out, mask=cols < D)

    _INTERPRETED = isinstance(_jagged_reduce_kernel, InterpretedFunction)


# Note [Fused Softmax Pool]
# The jagged block of benchmarks/jagged.py ends in `(y.softmax(1) * y).sum(1)`: softmax over each row's positions,
# a pointwise product, a sum over the positions. Unfused that is three launches (softmax kernel, mul, sum kernel)
# that write and read two (total_length, D) intermediates; the block is host-bound on a GPU (a few us of work per
# launch), so the launch count is its time. `softmax_pool` does it in one launch and one read of y, with the online
# softmax recurrence (one running max m, and S = sum exp(y - m), P = sum exp(y - m) * y, both rescaled by
# exp(m_old - m_new) when m grows), and out = P / S. The result equals the unfused one up to fp32 rounding (the
# order of the sums differs), not bit for bit. The backward recomputes the softmax (one softmax launch) instead of
# saving it: d out / d y_t = p_t * (1 + y_t - out), per row and feature. Rows with holes (`lengths`) take the
# unfused path in `ops.softmax_pool`, which masks the holes first.


# ---------------------------------------------------------------------------------------------------------------
# Dispatch: the same three paths as the FP8 kernels (See Note [Kernel Dispatch]), and narrow outputs staged in
# fp32 in the interpreter (See Note [Narrow Casts In The Interpreter]); both Notes live in subclasses/fp8/kernels.py.

# A row's programs walk its positions one block after another, so the longest row sets the kernel's time: wide
# position blocks and narrow feature blocks (more programs per row) shorten that walk. On an H100, the benchmark's
# batch (one row of 1024, mean 64, 256 features) ran the softmax in 81 us with (16, 64) and 30 us with (64, 32),
# the sum in 30 us and 12 us; see benchmarks/README.md.
_BLOCK_L = 64  # positions per loop step
_MAX_BLOCK_D = 32  # features per program
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def kernel_path(device: torch.device) -> KernelPath:
    """The path the launchers take for tensors on `device`; see Note [Kernel Dispatch]."""
    return select_path(device, has_triton=_HAS_TRITON, interpreted=_INTERPRETED)


def _check_values(op: str, values: Tensor, ndim: int) -> None:
    if values.dim() != ndim or values.dtype not in _DTYPES:
        raise TypeError(f"{op}: expected a {ndim}-D tensor of {_DTYPES}; got {values.dim()}-D {values.dtype}.")


def _check_offsets(op: str, offsets: Tensor) -> None:
    if offsets.dim() != 1 or offsets.dtype != torch.int64 or offsets.shape[0] < 1:
        raise TypeError(
            f"{op}: offsets must be 1-D int64 of length B + 1 >= 1; got {offsets.dim()}-D {offsets.dtype} of shape "
            f"{tuple(offsets.shape)}. Build them as a leading 0 followed by the cumulative sum of the row lengths."
        )


def _grid(n_rows: int, d: int) -> tuple[tuple[int, int], int]:
    """(grid, BLOCK_D) for a row-by-feature-block launch."""
    block_d = min(_MAX_BLOCK_D, triton.next_power_of_2(max(d, 1)))
    return (n_rows, triton.cdiv(d, block_d)), block_d


# ---------------------------------------------------------------------------------------------------------------
# Launchers.


_REFERENCE_REDUCTIONS: dict[Reduction, Callable[[Tensor, Tensor], Tensor]] = {
    Reduction.SUM: reference.jagged_sum,
    Reduction.MEAN: reference.jagged_mean,
    Reduction.AMAX: reference.jagged_amax,
}


def jagged_reduce(values: Tensor, offsets: Tensor, reduction: Reduction) -> Tensor:
    """(B, D): `reduction` over each row; see Note [Empty Jagged Rows] for empty rows."""
    _check_values(f"jagged {reduction.value}", values, 2)
    _check_offsets(f"jagged {reduction.value}", offsets)
    path = kernel_path(values.device)
    if path is KernelPath.REFERENCE:
        return _REFERENCE_REDUCTIONS[reduction](values, offsets)
    n_rows, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty((n_rows, d), dtype=kernel_out_dtype(values.dtype, path), device=values.device)
    grid, block_d = _grid(n_rows, d)
    if n_rows > 0 and d > 0:
        _jagged_reduce_kernel[grid](
            values, offsets, out, values.shape[0], d, *values.stride(), *out.stride(),
            REDUCTION=reduction.value, BLOCK_L=_BLOCK_L, BLOCK_D=block_d,
        )  # fmt: skip
    return out.to(values.dtype)


def jagged_softmax(values: Tensor, offsets: Tensor) -> Tensor:
    """(total_length, D): softmax over each row's positions, per feature."""
    _check_values("jagged softmax", values, 2)
    _check_offsets("jagged softmax", offsets)
    path = kernel_path(values.device)
    if path is KernelPath.REFERENCE:
        return reference.jagged_softmax(values, offsets)
    n_rows, d = offsets.shape[0] - 1, values.shape[1]
    # Zeros, not empty: positions no row covers (only with bad offsets) read as 0 rather than garbage.
    out = torch.zeros(values.shape, dtype=kernel_out_dtype(values.dtype, path), device=values.device)
    grid, block_d = _grid(n_rows, d)
    if n_rows > 0 and d > 0:
        _jagged_softmax_kernel[grid](
            values, offsets, out, values.shape[0], d, *values.stride(), *out.stride(),
            BLOCK_L=_BLOCK_L, BLOCK_D=block_d,
        )  # fmt: skip
    return out.to(values.dtype)


def jagged_softmax_pool(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): sum over each row of softmax(row) * row, per feature; see Note [Fused Softmax Pool]."""
    _check_values("jagged softmax_pool", values, 2)
    _check_offsets("jagged softmax_pool", offsets)
    path = kernel_path(values.device)
    if path is KernelPath.REFERENCE:
        return reference.jagged_softmax_pool(values, offsets)
    n_rows, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty((n_rows, d), dtype=kernel_out_dtype(values.dtype, path), device=values.device)
    grid, block_d = _grid(n_rows, d)
    if n_rows > 0 and d > 0:
        _jagged_softmax_pool_kernel[grid](
            values, offsets, out, values.shape[0], d, *values.stride(), *out.stride(),
            BLOCK_L=_BLOCK_L, BLOCK_D=block_d,
        )  # fmt: skip
    return out.to(values.dtype)


def jagged_to_padded(values: Tensor, offsets: Tensor, max_len: int, padding_value: float) -> Tensor:
    """(B, max_len, D): each row followed by `padding_value`; rows longer than max_len are truncated."""
    _check_values("jagged to_padded", values, 2)
    _check_offsets("jagged to_padded", offsets)
    path = kernel_path(values.device)
    if path is KernelPath.REFERENCE:
        return reference.to_padded(values, offsets, max_len, padding_value)
    n_rows, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty((n_rows, max_len, d), dtype=kernel_out_dtype(values.dtype, path), device=values.device)
    grid, block_d = _grid(n_rows, d)
    if n_rows > 0 and d > 0 and max_len > 0:
        _jagged_to_padded_kernel[grid](
            values, offsets, out, values.shape[0], d, max_len, padding_value, *values.stride(), *out.stride(),
            BLOCK_L=_BLOCK_L, BLOCK_D=block_d,
        )  # fmt: skip
    return out.to(values.dtype)


def jagged_from_padded(padded: Tensor, offsets: Tensor, total_length: int) -> Tensor:
    """(total_length, D): the rows of `padded` (B, max_len, D) packed by `offsets`; positions >= max_len get 0."""
    _check_values("jagged from_padded", padded, 3)
    _check_offsets("jagged from_padded", offsets)
    path = kernel_path(padded.device)
    if path is KernelPath.REFERENCE:
        return reference.from_padded(padded, offsets, total_length)
    n_rows, max_len, d = padded.shape
    out = torch.zeros((total_length, d), dtype=kernel_out_dtype(padded.dtype, path), device=padded.device)
    grid, block_d = _grid(n_rows, d)
    if n_rows > 0 and d > 0 and total_length > 0:
        _jagged_from_padded_kernel[grid](
            padded, offsets, out, total_length, d, max_len, *padded.stride(), *out.stride(),
            BLOCK_L=_BLOCK_L, BLOCK_D=block_d,
        )  # fmt: skip
    return out.to(padded.dtype)


# ---------------------------------------------------------------------------------------------------------------
# Custom ops: one opaque node each under tracing. Data-dependent sizes (max_len, total_length) are arguments, so the
# fake impls derive every size from their inputs and work with SymInts.


@custom_op("subclassaot_jagged::sum")
def jagged_sum_op(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the sum of each row (0 for an empty row)."""
    return jagged_reduce(values, offsets, Reduction.SUM)


@custom_op("subclassaot_jagged::mean")
def jagged_mean_op(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the mean of each row (NaN for an empty row)."""
    return jagged_reduce(values, offsets, Reduction.MEAN)


@custom_op("subclassaot_jagged::amax")
def jagged_amax_op(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the max of each row (-inf for an empty row). No autograd formula."""
    return jagged_reduce(values, offsets, Reduction.AMAX)


@custom_op("subclassaot_jagged::softmax")
def jagged_softmax_op(values: Tensor, offsets: Tensor) -> Tensor:
    """(total_length, D): softmax over each row's positions."""
    return jagged_softmax(values, offsets)


@custom_op("subclassaot_jagged::softmax_pool")
def jagged_softmax_pool_op(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): sum over each row of softmax(row) * row (0 for an empty row); see Note [Fused Softmax Pool]."""
    return jagged_softmax_pool(values, offsets)


@custom_op("subclassaot_jagged::to_padded")
def jagged_to_padded_op(values: Tensor, offsets: Tensor, max_len: int, padding_value: float) -> Tensor:
    """(B, max_len, D): each row followed by `padding_value`; rows longer than max_len truncated."""
    return jagged_to_padded(values, offsets, max_len, padding_value)


@custom_op("subclassaot_jagged::from_padded")
def jagged_from_padded_op(padded: Tensor, offsets: Tensor, total_length: int) -> Tensor:
    """(total_length, D): the rows of `padded` packed by `offsets`."""
    return jagged_from_padded(padded, offsets, total_length)


def _reduce_fake(values: Tensor, offsets: Tensor) -> Tensor:
    _check_values("jagged reduction", values, 2)
    _check_offsets("jagged reduction", offsets)
    return values.new_empty((offsets.shape[0] - 1, values.shape[1]))


def _softmax_fake(values: Tensor, offsets: Tensor) -> Tensor:
    _check_values("jagged softmax", values, 2)
    _check_offsets("jagged softmax", offsets)
    return values.new_empty(values.shape)


def _to_padded_fake(values: Tensor, offsets: Tensor, max_len: int, padding_value: float) -> Tensor:
    _check_values("jagged to_padded", values, 2)
    _check_offsets("jagged to_padded", offsets)
    return values.new_empty((offsets.shape[0] - 1, max_len, values.shape[1]))


def _from_padded_fake(padded: Tensor, offsets: Tensor, total_length: int) -> Tensor:
    _check_values("jagged from_padded", padded, 3)
    _check_offsets("jagged from_padded", offsets)
    return padded.new_empty((total_length, padded.shape[2]))


for _name in ("sum", "mean", "amax", "softmax_pool"):
    torch.library.register_fake(f"subclassaot_jagged::{_name}", _reduce_fake)
torch.library.register_fake("subclassaot_jagged::softmax", _softmax_fake)
torch.library.register_fake("subclassaot_jagged::to_padded", _to_padded_fake)
torch.library.register_fake("subclassaot_jagged::from_padded", _from_padded_fake)


# Autograd. The backward formulas run under the AOT pipeline's joint trace, so they use custom ops or torch ops
# whose output sizes come from saved sizes (repeat_interleave with output_size), never from offsets' contents.


class _AutogradCtx(Protocol):
    """What our setup_context functions leave on the ctx: saved tensors plus the one size the backward needs
    that no saved tensor's shape carries (total_length for ops from values, max_len for from_padded)."""

    saved_tensors: tuple[Tensor, ...]
    size: int

    def save_for_backward(self, *tensors: Tensor) -> None: ...


def _broadcast_rows(per_row: Tensor, offsets: Tensor, total_length: int) -> Tensor:
    """(B, D) -> (total_length, D): row i's vector repeated at each of its positions."""
    return torch.repeat_interleave(per_row, reference.lengths(offsets), dim=0, output_size=total_length)


def _setup_from_values(ctx: _AutogradCtx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    values, offsets = inputs
    ctx.save_for_backward(offsets)
    ctx.size = values.shape[0]


def _sum_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None]:
    (offsets,) = ctx.saved_tensors
    return _broadcast_rows(grad, offsets, ctx.size), None


def _mean_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None]:
    # Empty rows divide by zero here, but they have no positions to broadcast to.
    (offsets,) = ctx.saved_tensors
    per_row = grad / reference.lengths(offsets).to(grad.dtype)[:, None]
    return _broadcast_rows(per_row, offsets, ctx.size), None


def _softmax_setup(ctx: _AutogradCtx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    ctx.save_for_backward(output, inputs[1])
    ctx.size = output.shape[0]


def _softmax_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None]:
    # dx = y * (g - sum_row(g * y)), with the row sum itself a jagged kernel.
    probs, offsets = ctx.saved_tensors
    row_dot = jagged_sum_op(grad * probs, offsets)
    return probs * (grad - _broadcast_rows(row_dot, offsets, ctx.size)), None


def _softmax_pool_setup(ctx: _AutogradCtx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    values, offsets = inputs
    ctx.save_for_backward(values, offsets, output)
    ctx.size = values.shape[0]


def _softmax_pool_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None]:
    # d out / d y_t = p_t * (1 + y_t - out): the softmax is recomputed (Note [Fused Softmax Pool]).
    values, offsets, output = ctx.saved_tensors
    values32 = values.to(torch.float32)
    probs = jagged_softmax_op(values32, offsets)
    per_position = _broadcast_rows(output.to(torch.float32), offsets, ctx.size)
    grad_rows = _broadcast_rows(grad.to(torch.float32), offsets, ctx.size)
    return (grad_rows * probs * (1.0 + values32 - per_position)).to(values.dtype), None


def _to_padded_setup(ctx: _AutogradCtx, inputs: tuple[Tensor, Tensor, int, float], output: Tensor) -> None:
    _setup_from_values(ctx, inputs[:2], output)


def _to_padded_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None, None, None]:
    # Padding positions get no gradient; truncated positions get 0 (Note [Empty Jagged Rows]).
    (offsets,) = ctx.saved_tensors
    return jagged_from_padded_op(grad, offsets, ctx.size), None, None, None


def _from_padded_setup(ctx: _AutogradCtx, inputs: tuple[Tensor, Tensor, int], output: Tensor) -> None:
    padded, offsets, _ = inputs
    ctx.save_for_backward(offsets)
    ctx.size = padded.shape[1]


def _from_padded_backward(ctx: _AutogradCtx, grad: Tensor) -> tuple[Tensor, None, None]:
    (offsets,) = ctx.saved_tensors
    return jagged_to_padded_op(grad, offsets, ctx.size, 0.0), None, None


torch.library.register_autograd("subclassaot_jagged::sum", _sum_backward, setup_context=_setup_from_values)
torch.library.register_autograd("subclassaot_jagged::mean", _mean_backward, setup_context=_setup_from_values)
torch.library.register_autograd("subclassaot_jagged::softmax", _softmax_backward, setup_context=_softmax_setup)
torch.library.register_autograd(
    "subclassaot_jagged::softmax_pool", _softmax_pool_backward, setup_context=_softmax_pool_setup
)
torch.library.register_autograd("subclassaot_jagged::to_padded", _to_padded_backward, setup_context=_to_padded_setup)
torch.library.register_autograd(
    "subclassaot_jagged::from_padded", _from_padded_backward, setup_context=_from_padded_setup
)
