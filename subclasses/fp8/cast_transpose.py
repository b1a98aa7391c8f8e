"""The fused cast-transpose kernel: one read of a high-precision matrix gives both fp8 layouts a linear needs.

Input: a 2-D high-precision tensor x (M, K) (fp32 / bf16 / fp16); for delayed scaling, its amax history.
Output: the custom ops `subclassaot_fp8::{cast_transpose, cast_transpose_delayed}`, each one opaque node under
tracing: `data` (M, K) row-major, `data_t` (K, M) contiguous (x.t() quantized), their shared fp32 `scale`, and for
delayed scaling the updated history (returned, not written: the caller copies it into its buffer).
Invariants: each launcher computes what its twin in `reference.py` computes, bit for bit (same fp32 arithmetic,
torch's rounding of the final cast on the interpreter path); data_t is exactly data.t().contiguous().
See Note [Fused Cast Transpose], Note [Kernel Dispatch] and Note [FP8 Scaling Conventions].
"""

import torch
from torch import Tensor

from subclasses.fp8 import kernels, reference
from subclasses.fp8.kernels import LaunchConfig
from subclasses.fp8.reference import EPS, Granularity, fp8_max, scale_shape
from subclasses.kernel_dispatch import KernelPath, custom_op, kernel_out_dtype

# Note [Fused Cast Transpose]
# Float8Linear's three matmuls want each fp8 operand in two layouts, because fp8 tensor cores take both operands
# K-major (see `kernels.scaled_mm`): x (M, K) row-major for out = x @ w.t() and K-major over M for
# grad_w = g.t() @ x; w (N, K) row-major for the forward and transposed for grad_x = g @ w; g (M, N) row-major for
# grad_x and transposed for grad_w. Casting once and transposing in the matmul launcher reads the fp8 data a second
# time and writes it a third; this kernel writes both layouts from one read of the high-precision tensor.
# The scale must be known before any element is cast, which decides the number of passes:
#   TENSORWISE  two launches: the grid-stride amax pass (`kernels.amax`), then the cast-transpose over 2-D tiles,
#               each program deriving fp8_max / amax itself. A one-pass tensorwise kernel would need a grid-wide
#               barrier (all tiles' amax before any cast), which Triton does not offer. Cost: x is read twice, so
#               a bf16 x moves 6 bytes per element instead of the minimal 4 (the unfused quantize + transposed
#               copy moves 7, in three launches); the second read hits L2 only when x fits in it.
#   ROWWISE     two launches: torch's max |x| per row and `reference.amax_to_scale` (the reference's scale to the
#               bit), then the cast-transpose over 2-D tiles, each program loading its rows' scales. The scale
#               (M, 1) is rowwise for data and, transposed to (1, M), colwise for data_t: the same numbers, so data_t
#               is still exactly data.t(). (A one-launch kernel whose programs owned whole rows, an amax loop then
#               a cast loop, wrote wrong data_t bytes on an H200 with Triton 3.6 whenever the column count was a
#               multiple of 16, while passing in the interpreter; it also ran at 15-45% of copy bandwidth.)
#   DELAYED     two launches, like tensorwise: the amax pass, then the cast-transpose, whose programs each compute
#               the updated history's max (the new amax and history[:-1]) and the scale from it; program 0 also
#               writes the new history and the scale. The history comes back as an output rather than being
#               written in place, so the op stays functional (no mutated arguments); the caller's
#               `history.copy_(new_history)` is the one mutation the AOT pipeline sees, as before the fusion.
# Float8Linear is tensorwise (tensorwise scales survive transposition, Note [Float8 Linear Recipe]), so it runs
# TENSORWISE or DELAYED; ROWWISE is for callers that scale per row of x, such as a rowwise recipe's forward.
# Without Triton, or on CPU tensors without the interpreter, the twins in `reference.py` run (quantize, then a
# transposed copy). Tile sizes: `LaunchConfig.ct_block_m` / `ct_block_n`; GPU_CONFIG's are untuned (64 x 64).

try:
    import triton
    import triton.language as tl
except ImportError:  # the reference runs instead; see Note [Kernel Dispatch]
    pass
else:

    @triton.jit
    def _cast_transpose_kernel(
        x_ptr: tl.tensor,
        amax_ptr: tl.tensor,
        history_ptr: tl.tensor,
        data_ptr: tl.tensor,
        data_t_ptr: tl.tensor,
        scale_ptr: tl.tensor,
        new_history_ptr: tl.tensor,
        n_rows: tl.tensor,
        n_cols: tl.tensor,
        history_len: tl.tensor,
        stride_xm: tl.tensor,
        stride_xn: tl.tensor,
        stride_dm: tl.tensor,
        stride_dn: tl.tensor,
        stride_tm: tl.tensor,
        stride_tn: tl.tensor,
        FP8_MAX: tl.constexpr,
        EPS: tl.constexpr,
        DELAYED: tl.constexpr,
        ROWWISE: tl.constexpr,
        BLOCK_H: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ) -> None:
        # The second pass of Note [Fused Cast Transpose], one (BLOCK_M, BLOCK_N) tile per program. Rowwise: each
        # row's scale was computed by the first pass. Tensorwise and delayed: every program derives the scale from
        # the amax (and history) itself, so no third launch.
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        if ROWWISE:
            scale = tl.load(scale_ptr + rows, mask=rows < n_rows, other=1.0)[:, None]
        else:
            x_amax = tl.load(amax_ptr)
            if DELAYED:
                # new_history = [amax, history[0], ..., history[-2]]; entries are >= 0, so 0 pads the max safely.
                idx = tl.arange(0, BLOCK_H)
                shifted = tl.load(history_ptr + idx - 1, mask=(idx > 0) & (idx < history_len), other=0.0)
                new_history = tl.where(idx == 0, x_amax, shifted)
                x_amax = tl.max(new_history, axis=0)
                if tl.program_id(0) == 0 and tl.program_id(1) == 0:
                    tl.store(new_history_ptr + idx, new_history, mask=idx < history_len)
            scale = tl.math.div_rn(FP8_MAX, tl.maximum(x_amax, EPS))
            if tl.program_id(0) == 0 and tl.program_id(1) == 0:
                tl.store(scale_ptr, scale)
        x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        # data_t[c, r] = data[r, c]: the same clamped values stored twice, the second time through a transposed
        # pointer grid (the store casts to fp8 on the GPU; see Note [Narrow Casts In The Interpreter]).
        scaled = tl.clamp(x.to(tl.float32) * scale, -FP8_MAX, FP8_MAX)
        tl.store(data_ptr + rows[:, None] * stride_dm + cols[None, :] * stride_dn, scaled, mask=mask)
        tl.store(data_t_ptr + cols[None, :] * stride_tm + rows[:, None] * stride_tn, scaled, mask=mask)


def _check_matrix(op: str, x: Tensor) -> None:
    if x.dim() != 2 or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(
            f"{op}: x must be a 2-D fp32 / bf16 / fp16 tensor; got {x.dim()}-D {x.dtype}. "
            "Flatten the leading dims first: x.reshape(-1, x.shape[-1])."
        )


def _check_history(op: str, history: Tensor) -> None:
    if history.dim() != 1 or history.dtype != torch.float32 or history.shape[0] < 1:
        raise ValueError(
            f"{op}: history has shape {tuple(history.shape)} and dtype {history.dtype}; expected a 1-D fp32 "
            "tensor of length >= 1 (the amax history, newest first)."
        )


def _outputs(x: Tensor, fp8_dtype: torch.dtype, path: KernelPath) -> tuple[Tensor, Tensor]:
    """Staged (data, data_t) buffers; see Note [Narrow Casts In The Interpreter]."""
    staged = kernel_out_dtype(fp8_dtype, path)
    m, k = x.shape
    return torch.empty((m, k), dtype=staged, device=x.device), torch.empty((k, m), dtype=staged, device=x.device)


def cast_transpose(
    x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity, *, config: LaunchConfig | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(data, data_t, scale) for a 2-D x; see Note [Fused Cast Transpose]."""
    _check_matrix("cast_transpose", x)
    bound = fp8_max(fp8_dtype)
    path = kernels.kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.cast_transpose(x, fp8_dtype, granularity)
    cfg = _launch_config(path, config)
    data, data_t = _outputs(x, fp8_dtype, path)
    scale = torch.empty(scale_shape(x.shape, granularity), dtype=torch.float32, device=x.device)
    if granularity is Granularity.TENSORWISE:
        x_amax = kernels.amax(x, config=cfg)
        _launch_tiles(x, x_amax, x_amax.reshape(1), data, data_t, scale, scale, bound, cfg, delayed=False)
    elif x.numel() > 0:
        # max |x| per row without an fp32 or |x| copy; exact, so the scale is reference.py's to the bit.
        scale = reference.amax_to_scale(torch.linalg.vector_norm(x, float("inf"), dim=-1, keepdim=True), fp8_dtype)
        unused = scale.reshape(-1)[:1]  # the amax and history arguments, read only by the other paths
        _launch_tiles(x, unused, unused, data, data_t, scale, scale, bound, cfg, delayed=False, rowwise=True)
    else:
        scale = reference.amax_to_scale(scale.zero_(), fp8_dtype)
    return data.to(fp8_dtype), data_t.to(fp8_dtype), scale


def cast_transpose_delayed(
    x: Tensor, history: Tensor, fp8_dtype: torch.dtype, *, config: LaunchConfig | None = None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(data, data_t, scale, new_history) for a 2-D x under delayed scaling; see Note [Fused Cast Transpose]."""
    _check_matrix("cast_transpose_delayed", x)
    _check_history("cast_transpose_delayed", history)
    bound = fp8_max(fp8_dtype)
    path = kernels.kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.cast_transpose_delayed(x, history, fp8_dtype)
    cfg = _launch_config(path, config)
    data, data_t = _outputs(x, fp8_dtype, path)
    scale = torch.empty((), dtype=torch.float32, device=x.device)
    new_history = torch.empty_like(history)
    x_amax = kernels.amax(x, config=cfg)
    _launch_tiles(x, x_amax, history.contiguous(), data, data_t, scale, new_history, bound, cfg, delayed=True)
    return data.to(fp8_dtype), data_t.to(fp8_dtype), scale, new_history


def _launch_config(path: KernelPath, config: LaunchConfig | None) -> LaunchConfig:
    if config is not None:
        return config
    return kernels.INTERPRETER_CONFIG if path is KernelPath.INTERPRETER else kernels.GPU_CONFIG


def _launch_tiles(
    x: Tensor,
    x_amax: Tensor,
    history: Tensor,
    data: Tensor,
    data_t: Tensor,
    scale: Tensor,
    new_history: Tensor,
    bound: float,
    cfg: LaunchConfig,
    *,
    delayed: bool,
    rowwise: bool = False,
) -> None:
    """The tiled second pass; at least one program, so that program 0 writes the scale even for an empty x."""
    (m, k), block_m, block_n = x.shape, cfg.ct_block_m, cfg.ct_block_n
    grid = (max(1, triton.cdiv(m, block_m)), max(1, triton.cdiv(k, block_n)))
    _cast_transpose_kernel[grid](
        x, x_amax, history, data, data_t, scale, new_history, m, k, history.shape[0],
        *x.stride(), *data.stride(), *data_t.stride(),
        FP8_MAX=bound, EPS=EPS, DELAYED=delayed, ROWWISE=rowwise, BLOCK_H=triton.next_power_of_2(history.shape[0]),
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=cfg.elementwise_warps,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Custom ops: one opaque node each under tracing; the fake impls derive every size from input sizes (SymInt-safe).


@custom_op("subclassaot_fp8::cast_transpose")
def cast_transpose_op(x: Tensor, fp8_dtype: torch.dtype, granularity: str) -> tuple[Tensor, Tensor, Tensor]:
    """(data, data_t, scale); `granularity` is a `Granularity` value ("tensorwise" or "rowwise")."""
    return cast_transpose(x, fp8_dtype, _granularity(granularity))


@custom_op("subclassaot_fp8::cast_transpose_delayed")
def cast_transpose_delayed_op(
    x: Tensor, history: Tensor, fp8_dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(data, data_t, scale, new_history) under delayed scaling (tensorwise)."""
    return cast_transpose_delayed(x, history, fp8_dtype)


def _granularity(value: str) -> Granularity:
    try:
        return Granularity(value)
    except ValueError:
        choices = [g.value for g in Granularity]
        raise ValueError(f"cast_transpose: granularity {value!r} is not one of {choices}.") from None


def _cast_transpose_fake(x: Tensor, fp8_dtype: torch.dtype, granularity: str) -> tuple[Tensor, Tensor, Tensor]:
    _check_matrix("cast_transpose", x)
    fp8_max(fp8_dtype)  # validates the dtype
    m, k = x.shape
    shape = scale_shape(x.shape, _granularity(granularity))
    return (
        x.new_empty((m, k), dtype=fp8_dtype),
        x.new_empty((k, m), dtype=fp8_dtype),
        x.new_empty(shape, dtype=torch.float32),
    )


def _cast_transpose_delayed_fake(
    x: Tensor, history: Tensor, fp8_dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _check_matrix("cast_transpose_delayed", x)
    _check_history("cast_transpose_delayed", history)
    fp8_max(fp8_dtype)  # validates the dtype
    m, k = x.shape
    return (
        x.new_empty((m, k), dtype=fp8_dtype),
        x.new_empty((k, m), dtype=fp8_dtype),
        x.new_empty((), dtype=torch.float32),
        history.new_empty(history.shape),
    )


torch.library.register_fake("subclassaot_fp8::cast_transpose", _cast_transpose_fake)
torch.library.register_fake("subclassaot_fp8::cast_transpose_delayed", _cast_transpose_delayed_fake)
