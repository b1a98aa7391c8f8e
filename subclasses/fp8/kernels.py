"""Triton kernels for FP8 scaling, their typed launchers, and the torch custom ops built on them.

Input: high-precision tensors (fp32 / bf16 / fp16) to quantize; fp8 data + fp32 scales to dequantize or multiply.
Output: the custom ops `subclassaot_fp8::{amax, quantize, cast_with_scale, dequantize, scaled_mm}`; each traces as one opaque node
(a fake impl gives its output shapes), and `dequantize` has an autograd formula.
Invariants: each launcher computes exactly what its twin in `reference.py` computes (same fp32 arithmetic, same
rounding of the final cast); the path that ran is `kernel_path(device)`. See Note [Kernel Dispatch] and
Note [FP8 Scaling Conventions].
"""

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from subclasses.fp8 import reference
from subclasses.fp8.reference import EPS, Granularity, fp8_max, scale_shape
from subclasses.kernel_dispatch import KernelPath, custom_op, kernel_out_dtype, select_path

# Note [Kernel Dispatch]
# Each launcher picks one of three paths, reported by `kernel_path(device)`:
#   COMPILED     Triton is importable, kernels were compiled (not interpreted), tensors are on CUDA.
#   INTERPRETER  Triton is importable and `triton.jit` built InterpretedFunctions, because TRITON_INTERPRET=1 was
#                set before the kernels were defined. The kernels run on the CPU in numpy. This is how CI tests
#                them without a GPU; tests/conftest.py sets the variable. The library itself never reads it:
#                we ask Triton what it built (the kernel object's type), so there is no hidden config.
#   REFERENCE    anything else (no Triton, or compiled kernels with CPU tensors): the `reference.py` twin runs.
# The custom ops call the launchers, so the same op works on every path, and the AOT pipeline only ever sees the
# op (its fake impl), never the path.

# Note [Narrow Casts In The Interpreter]
# Triton 3.9's interpreter converts fp32 to narrower floats with its own bit arithmetic (`_convert_float`), which
# is wrong for our purposes: fp32 -> bf16 truncates instead of rounding to nearest even, and fp32 -> fp8 drops
# the carry when rounding overflows the mantissa (125.06 -> 64.0 instead of 128.0 in float8_e4m3fn; about 13% of
# random values differ from torch's cast). Upcasts (fp8/bf16 -> fp32) are exact for finite values.
# So on the INTERPRETER path a kernel whose output is narrower than fp32 writes fp32 into a staging buffer and
# the launcher casts with torch, which rounds to nearest even, as the GPU's cvt instructions do. On the COMPILED
# path the kernel stores straight into the narrow dtype (the store casts to the pointer's element type), which is
# where the fused cast pays. The kernels are the same in both cases: only the output buffer's dtype differs.


# ---------------------------------------------------------------------------------------------------------------
# Kernels. Every runtime argument is a `tl.tensor` inside the kernel (scalars included); block sizes are
# constexprs. Loads upcast to fp32 and all arithmetic is fp32, like the reference; divisions are `div_rn` (IEEE,
# as torch divides) because Triton's `/` is the approximate div.full.f32 on NVIDIA GPUs. They are defined only when
# Triton imports (in the `else:`, so that type checkers see them bound together with `triton`).

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
    def _amax_kernel(x_ptr: tl.tensor, amax_ptr: tl.tensor, n_elements: tl.tensor, BLOCK_SIZE: tl.constexpr) -> None:
        # Grid-stride: program p reduces blocks p, p + grid, p + 2 grid, ... and folds its max into a
        # zero-initialized scalar with one atomic (a capped grid keeps the atomics on that one address few).
        # |x| >= 0, and max is order-independent, so this gives the same bits as a tree reduction.
        acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
        for start in tl.range(tl.program_id(0) * BLOCK_SIZE, n_elements, tl.num_programs(0) * BLOCK_SIZE):
            offsets = start + tl.arange(0, BLOCK_SIZE)
            x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
            acc = tl.maximum(acc, tl.abs(x))
        tl.atomic_max(amax_ptr, tl.max(acc, axis=0))

    @triton.jit
    def _quantize_tensorwise_kernel(
        x_ptr: tl.tensor,
        amax_ptr: tl.tensor,
        data_ptr: tl.tensor,
        scale_ptr: tl.tensor,
        n_elements: tl.tensor,
        FP8_MAX: tl.constexpr,
        EPS: tl.constexpr,
        REVERSE: tl.constexpr,
        SCALE_GIVEN: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
    ) -> None:
        # Tensorwise scaling needs the global amax before any element is scaled, hence a second launch after
        # `_amax_kernel`; every program derives the scale from the amax itself rather than waiting for a third.
        # REVERSE walks the blocks last to first: the first programs to run then read the blocks the amax pass read
        # last, which are still in L2 (see Note [FP8 Launch Configs]).
        # SCALE_GIVEN (delayed scaling): the scale is read from scale_ptr and amax_ptr is unused: a plain cast.
        block = tl.num_programs(0) - 1 - tl.program_id(0) if REVERSE else tl.program_id(0)
        if SCALE_GIVEN:
            scale = tl.load(scale_ptr)
        else:
            scale = tl.math.div_rn(FP8_MAX, tl.maximum(tl.load(amax_ptr), EPS))
        offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(data_ptr + offsets, tl.clamp(x * scale, -FP8_MAX, FP8_MAX), mask=mask)
        if not SCALE_GIVEN and tl.program_id(0) == 0:
            tl.store(scale_ptr, scale)

    @triton.jit
    def _quantize_rowwise_kernel(
        x_ptr: tl.tensor,
        data_ptr: tl.tensor,
        scale_ptr: tl.tensor,
        n_rows: tl.tensor,
        n_cols: tl.tensor,
        stride_xm: tl.tensor,
        stride_xn: tl.tensor,
        stride_dm: tl.tensor,
        stride_dn: tl.tensor,
        FP8_MAX: tl.constexpr,
        EPS: tl.constexpr,
        ONE_PASS: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ) -> None:
        # Fully fused: a program owns BLOCK_M whole rows, so it can finish the amax pass before the cast pass.
        # ONE_PASS (the row fits in one BLOCK_N): the block is loaded once and kept in registers for both passes,
        # so x is read from memory once; otherwise the second loop reads the rows again.
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        if ONE_PASS:
            cols = tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
            x = x.to(tl.float32)
            scale = tl.math.div_rn(FP8_MAX, tl.maximum(tl.max(tl.abs(x), axis=1), EPS))
            tl.store(scale_ptr + rows, scale, mask=row_mask)
            scaled = tl.clamp(x * scale[:, None], -FP8_MAX, FP8_MAX)
            tl.store(data_ptr + rows[:, None] * stride_dm + cols[None, :] * stride_dn, scaled, mask=mask)
        else:
            row_amax = tl.zeros((BLOCK_M,), dtype=tl.float32)
            for start in tl.range(0, n_cols, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = row_mask[:, None] & (cols < n_cols)[None, :]
                x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
                row_amax = tl.maximum(row_amax, tl.max(tl.abs(x.to(tl.float32)), axis=1))
            scale = tl.math.div_rn(FP8_MAX, tl.maximum(row_amax, EPS))
            tl.store(scale_ptr + rows, scale, mask=row_mask)
            for start in tl.range(0, n_cols, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = row_mask[:, None] & (cols < n_cols)[None, :]
                x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
                scaled = tl.clamp(x.to(tl.float32) * scale[:, None], -FP8_MAX, FP8_MAX)
                tl.store(data_ptr + rows[:, None] * stride_dm + cols[None, :] * stride_dn, scaled, mask=mask)

    @triton.jit
    def _dequantize_kernel(
        data_ptr: tl.tensor,
        scale_ptr: tl.tensor,
        out_ptr: tl.tensor,
        n_rows: tl.tensor,
        n_cols: tl.tensor,
        stride_dm: tl.tensor,
        stride_dn: tl.tensor,
        stride_om: tl.tensor,
        stride_on: tl.tensor,
        ROWWISE: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ) -> None:
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        data = tl.load(data_ptr + rows[:, None] * stride_dm + cols[None, :] * stride_dn, mask=mask, other=0.0)
        if ROWWISE:
            scale = tl.load(scale_ptr + rows, mask=rows < n_rows, other=1.0)[:, None]
        else:
            scale = tl.load(scale_ptr)
        out = tl.math.div_rn(data.to(tl.float32), scale)
        tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, out, mask=mask)

    @triton.jit
    def _scaled_mm_kernel(
        a_ptr: tl.tensor,
        b_ptr: tl.tensor,
        scale_a_ptr: tl.tensor,
        scale_b_ptr: tl.tensor,
        out_ptr: tl.tensor,
        M: tl.tensor,
        N: tl.tensor,
        K: tl.tensor,
        stride_am: tl.tensor,
        stride_ak: tl.tensor,
        stride_bk: tl.tensor,
        stride_bn: tl.tensor,
        stride_om: tl.tensor,
        stride_on: tl.tensor,
        A_ROWWISE: tl.constexpr,
        B_COLWISE: tl.constexpr,
        FP8_DOT: tl.constexpr,
        EVEN_K: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        MAX_IMPRECISE_ACC: tl.constexpr,
    ) -> None:
        # One program per output tile, in grouped order: GROUP_M consecutive row tiles walk the column tiles
        # together, so the b tiles they share are still in L2 when the next row tile needs them.
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_in_group = GROUP_M * tl.cdiv(N, BLOCK_N)
        first_pid_m = (pid // num_pid_in_group) * GROUP_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
        pid_n = (pid % num_pid_in_group) // group_size_m
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        # Rows and columns past the edge wrap around (they read valid memory and are masked at the store), so the
        # tile loads need a mask only on K, and none when BLOCK_K divides K.
        a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in tl.range(0, K, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=(k0 + rk < K)[None, :], other=0.0)
                b = tl.load(b_ptrs, mask=(k0 + rk < K)[:, None], other=0.0)
            if FP8_DOT:  # MAX_IMPRECISE_ACC: see Note [FP8 Dot Accumulation]
                acc = tl.dot(a, b, acc, max_num_imprecise_acc=MAX_IMPRECISE_ACC)
            else:
                # fp8 values are exact in fp32 (and in tf32, which the GPU may use for an fp32 dot: 10 mantissa
                # bits >= 3), and the accumulator is fp32 either way, so upcasting loses nothing.
                acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        if A_ROWWISE:
            scale_a = tl.load(scale_a_ptr + rm, mask=rm < M, other=1.0)[:, None]
        else:
            scale_a = tl.load(scale_a_ptr)
        if B_COLWISE:
            scale_b = tl.load(scale_b_ptr + rn, mask=rn < N, other=1.0)[None, :]
        else:
            scale_b = tl.load(scale_b_ptr)
        out = tl.math.div_rn(acc, scale_a * scale_b)
        out_mask = (rm < M)[:, None] & (rn < N)[None, :]
        tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, out, mask=out_mask)

    _INTERPRETED = isinstance(_amax_kernel, InterpretedFunction)


# ---------------------------------------------------------------------------------------------------------------
# Dispatch and launchers.

_HP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# Note [FP8 Launch Configs]
# Tile sizes and launch parameters live in one `LaunchConfig` per path, never in the kernels:
#   INTERPRETER_CONFIG  small tiles: the interpreter runs each program in numpy, so small tiles over the small
#                       tensors of tests keep CI fast (num_warps / num_stages are ignored there).
#   GPU_CONFIG          tuned on an H100 with benchmarks/fp8_tune.py (figures in benchmarks/README.md): large
#                       matmul tiles that feed the fp8 tensor cores (128x256x128, 8 warps, 3 stages; 256x128 when
#                       both scales are tensorwise), one-pass rowwise quantize up to 16384 columns (one row of
#                       8192 per program: 100% of a bf16 copy's bandwidth, against 54% for two passes), a capped
#                       grid for the amax reduction, and the tensorwise cast walking its blocks in reverse (+4-7%).
# Launchers take `config=` so tests run GPU_CONFIG's tiles (and so its ONE_PASS / EVEN_K / GROUP_M branches) in
# the interpreter, and the tuning script can time alternatives; the custom ops always use the path's default.


# Note [FP8 Dot Accumulation]
# Hopper's fp8 tensor cores add products into an accumulator with fewer bits than fp32 ("fast accumulation").
# Triton's `tl.dot(..., max_num_imprecise_acc=N)` moves the partial sum into a full fp32 accumulator every N
# products along K; None leaves the compiler's default, which on sm_90 is never (2**30), the same arithmetic as
# torch._scaled_mm(use_fast_accum=True). Measured on an H100 at 8192^3 (benchmarks/README.md, fp8 section):
#   fast (None)   rel. error vs an fp64 product 2.0e-3, the same as torch._scaled_mm fast; 1.13-1.26k TFLOP/s
#   N = BLOCK_K   1.3e-4, the same as torch._scaled_mm's default; but Triton 3.6 then spills: 0.44-0.92k TFLOP/s
# GPU_CONFIG therefore uses fast accumulation, as torchao's Float8Linear does for its forward matmul; the
# training SQNR tests hold with it (the fp8 cast's own error is far larger). A caller who needs the precise sum
# can pass a LaunchConfig with mm_max_imprecise_acc=mm_block_k to `scaled_mm`. The interpreter computes exact
# fp32 sums either way.


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchConfig:
    """How the FP8 launchers tile and launch their kernels; see Note [FP8 Launch Configs]."""

    block_size: int  # elements per block, 1-D kernels (amax, tensorwise quantize)
    elementwise_warps: int  # num_warps of the 1-D and row-blocked kernels
    max_reduce_programs: int  # grid cap of the grid-stride amax reduction
    reverse_cast: bool  # tensorwise quantize casts the blocks last to first (L2 reuse after the amax pass)
    row_block_m: int  # rows per program, row-blocked kernels
    max_block_n: int  # columns per loop step, row-blocked kernels
    one_pass_max_n: int  # rowwise quantize keeps whole rows in registers up to this many columns
    ct_block_m: int  # rows per tile, fused cast-transpose (see Note [Fused Cast Transpose] in cast_transpose.py)
    ct_block_n: int  # columns per tile, fused cast-transpose
    one_pass_elements: int  # ... with up to this many elements per program (rows = this // columns, at least 1)
    mm_block_m: int
    mm_block_n: int
    mm_tensorwise_block_mn: tuple[int, int]  # (BLOCK_M, BLOCK_N) when both scales are tensorwise
    mm_block_k: int
    mm_group_m: int
    mm_warps: int
    mm_stages: int
    mm_max_imprecise_acc: int | None  # see Note [FP8 Dot Accumulation]; None: the compiler's default

    def __post_init__(self) -> None:
        if self.mm_max_imprecise_acc is not None and not 0 < self.mm_max_imprecise_acc <= self.mm_block_k:
            raise ValueError(
                f"LaunchConfig: mm_max_imprecise_acc={self.mm_max_imprecise_acc} must be None or in "
                f"[1, mm_block_k={self.mm_block_k}] (Triton promotes within one tile product)."
            )


INTERPRETER_CONFIG = LaunchConfig(
    block_size=1024, elementwise_warps=4, max_reduce_programs=1024, reverse_cast=True, row_block_m=16,
    max_block_n=128, one_pass_max_n=128, one_pass_elements=2048, ct_block_m=16, ct_block_n=32,
    mm_block_m=64, mm_block_n=64, mm_tensorwise_block_mn=(64, 64), mm_block_k=32, mm_group_m=8, mm_warps=4, mm_stages=2, mm_max_imprecise_acc=32,
)  # fmt: skip
GPU_CONFIG = LaunchConfig(
    block_size=2048, elementwise_warps=8, max_reduce_programs=1024, reverse_cast=True, row_block_m=16,
    max_block_n=128, one_pass_max_n=16384, one_pass_elements=8192, ct_block_m=64, ct_block_n=64,
    mm_block_m=128, mm_block_n=256, mm_tensorwise_block_mn=(256, 128), mm_block_k=128, mm_group_m=8, mm_warps=8, mm_stages=3, mm_max_imprecise_acc=None,
)  # fmt: skip


def kernel_path(device: torch.device) -> KernelPath:
    """The path the launchers take for tensors on `device`; see Note [Kernel Dispatch]."""
    return select_path(device, has_triton=_HAS_TRITON, interpreted=_INTERPRETED)


def _config(path: KernelPath, config: LaunchConfig | None) -> LaunchConfig:
    if config is not None:
        return config
    return INTERPRETER_CONFIG if path is KernelPath.INTERPRETER else GPU_CONFIG


def _block_n(n_cols: int, config: LaunchConfig) -> int:
    return min(config.max_block_n, triton.next_power_of_2(max(n_cols, 1)))


def _check_hp(op: str, x: Tensor) -> None:
    if x.dtype not in _HP_DTYPES:
        raise TypeError(f"{op}: x has dtype {x.dtype}; expected one of {_HP_DTYPES}. Cast first: x.float().")


def amax(x: Tensor, *, config: LaunchConfig | None = None) -> Tensor:
    """max(|x|) over all elements, as an fp32 scalar (shape ()); 0 for an empty tensor."""
    _check_hp("amax", x)
    path = kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.amax(x)
    cfg = _config(path, config)
    flat = x.contiguous().view(-1)
    out = torch.zeros((), dtype=torch.float32, device=x.device)
    if flat.numel() > 0:
        grid = (min(triton.cdiv(flat.numel(), cfg.block_size), cfg.max_reduce_programs),)
        _amax_kernel[grid](flat, out, flat.numel(), BLOCK_SIZE=cfg.block_size, num_warps=cfg.elementwise_warps)
    return out


def quantize(
    x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity, *, config: LaunchConfig | None = None
) -> tuple[Tensor, Tensor]:
    """(data, scale): fused amax + scale + saturating cast; see Note [FP8 Scaling Conventions].

    Tensorwise takes any shape (flattened); rowwise scales each row of the last dim.
    """
    _check_hp("quantize", x)
    bound = fp8_max(fp8_dtype)
    path = kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.quantize(x, fp8_dtype, granularity)
    cfg = _config(path, config)
    staged = torch.empty(x.shape, dtype=kernel_out_dtype(fp8_dtype, path), device=x.device)
    scale = torch.empty(scale_shape(x.shape, granularity), dtype=torch.float32, device=x.device)
    if granularity is Granularity.TENSORWISE:
        flat = x.contiguous().view(-1)
        _cast_tensorwise(flat, staged, scale, amax(flat, config=cfg), bound, cfg)
    else:
        n_rows, n_cols = math.prod(x.shape[:-1]), x.shape[-1]
        x2 = x.reshape(n_rows, n_cols)
        data2 = staged.view(n_rows, n_cols)
        one_pass = n_cols <= cfg.one_pass_max_n
        block_n = triton.next_power_of_2(max(n_cols, 1)) if one_pass else _block_n(n_cols, cfg)
        block_m = max(1, cfg.one_pass_elements // block_n) if one_pass else cfg.row_block_m
        if n_rows > 0:
            _quantize_rowwise_kernel[(triton.cdiv(n_rows, block_m),)](
                x2, data2, scale, n_rows, n_cols, *x2.stride(), *data2.stride(),
                FP8_MAX=bound, EPS=EPS, ONE_PASS=one_pass, BLOCK_M=block_m, BLOCK_N=block_n,
                num_warps=cfg.elementwise_warps,
            )  # fmt: skip
    return staged.to(fp8_dtype), scale


def cast_with_scale(x: Tensor, scale: Tensor, fp8_dtype: torch.dtype, *, config: LaunchConfig | None = None) -> Tensor:
    """saturate(x * scale).to(fp8_dtype) for a known tensorwise scale (shape (), fp32): delayed scaling's cast."""
    _check_hp("cast_with_scale", x)
    _check_tensorwise_scale("cast_with_scale", scale)
    bound = fp8_max(fp8_dtype)
    path = kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.cast_with_scale(x, scale, fp8_dtype)
    cfg = _config(path, config)
    staged = torch.empty(x.shape, dtype=kernel_out_dtype(fp8_dtype, path), device=x.device)
    _cast_tensorwise(x.contiguous().view(-1), staged, scale, None, bound, cfg)
    return staged.to(fp8_dtype)


def _cast_tensorwise(
    flat: Tensor, staged: Tensor, scale: Tensor, x_amax: Tensor | None, bound: float, cfg: LaunchConfig
) -> None:
    """staged = saturate(flat * scale); with `x_amax`, scale = fp8_max / amax is computed and written first."""
    # At least one program, so that program 0 writes the scale even for an empty tensor.
    grid = (max(1, triton.cdiv(flat.numel(), cfg.block_size)),)
    _quantize_tensorwise_kernel[grid](
        flat, scale if x_amax is None else x_amax, staged, scale, flat.numel(), FP8_MAX=bound, EPS=EPS,
        REVERSE=cfg.reverse_cast and x_amax is not None, SCALE_GIVEN=x_amax is None, BLOCK_SIZE=cfg.block_size,
        num_warps=cfg.elementwise_warps,
    )  # fmt: skip


def _check_tensorwise_scale(op: str, scale: Tensor) -> None:
    if scale.dtype != torch.float32 or scale.dim() != 0:
        raise ValueError(
            f"{op}: scale has shape {tuple(scale.shape)} and dtype {scale.dtype}; expected an fp32 scalar (shape ())."
        )


def _check_scale(op: str, data: Tensor, scale: Tensor) -> bool:
    """Whether `scale` is rowwise for `data` (else tensorwise); raises on any other shape."""
    if scale.dtype != torch.float32:
        raise TypeError(f"{op}: scale has dtype {scale.dtype}; expected torch.float32.")
    if scale.dim() == 0:
        return False
    if data.dim() == 0 or tuple(scale.shape) != scale_shape(data.shape, Granularity.ROWWISE):
        raise ValueError(
            f"{op}: scale has shape {tuple(scale.shape)} for data of shape {tuple(data.shape)}; expected () "
            "(tensorwise) or data.shape[:-1] + (1,) (rowwise). See Note [FP8 Scaling Conventions]."
        )
    return True


def dequantize(data: Tensor, scale: Tensor, out_dtype: torch.dtype, *, config: LaunchConfig | None = None) -> Tensor:
    """data.float() / scale, cast to out_dtype (scale shape () or data.shape[:-1] + (1,))."""
    rowwise = _check_scale("dequantize", data, scale)
    path = kernel_path(data.device)
    if path is KernelPath.REFERENCE:
        return reference.dequantize(data, scale, out_dtype)
    cfg = _config(path, config)
    n_rows, n_cols = (math.prod(data.shape[:-1]), data.shape[-1]) if data.dim() > 0 else (1, 1)
    data2 = data.reshape(n_rows, n_cols)
    staged = torch.empty(data.shape, dtype=kernel_out_dtype(out_dtype, path), device=data.device)
    out2 = staged.view(n_rows, n_cols)
    block_n = _block_n(n_cols, cfg)
    grid = (triton.cdiv(n_rows, cfg.row_block_m), triton.cdiv(n_cols, block_n))
    if data.numel() > 0:
        _dequantize_kernel[grid](
            data2, scale.contiguous(), out2, n_rows, n_cols, *data2.stride(), *out2.stride(),
            ROWWISE=rowwise, BLOCK_M=cfg.row_block_m, BLOCK_N=block_n, num_warps=cfg.elementwise_warps,
        )  # fmt: skip
    return staged.to(out_dtype)


def _fp8_dot_supported(device: torch.device) -> bool:
    # fp8 tensor cores: Ada (8.9) and Hopper (9.0) onwards. The interpreter could run an fp8 dot (it upcasts to
    # fp16), but the fp32 path is the one that is correct everywhere, so it is the default off-GPU.
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def _check_scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor) -> tuple[bool, bool]:
    """(a is rowwise, b is column-wise), after checking shapes and dtypes."""
    for name, t in (("a", a), ("b", b)):
        if t.dim() != 2 or t.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
            raise TypeError(f"scaled_mm: {name} must be a 2-D fp8 tensor; got {t.dim()}-D {t.dtype}.")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"scaled_mm: a is {tuple(a.shape)} and b is {tuple(b.shape)}; a.shape[1] != b.shape[0].")
    a_rowwise = _check_scale("scaled_mm (scale_a)", a, scale_a)
    if scale_b.dtype != torch.float32 or scale_b.shape not in ((), (1, b.shape[1])):
        raise ValueError(
            f"scaled_mm: scale_b has shape {tuple(scale_b.shape)} and dtype {scale_b.dtype}; expected fp32 of "
            f"shape () or (1, {b.shape[1]}). See Note [FP8 Scaling Conventions]."
        )
    return a_rowwise, scale_b.dim() > 0


def scaled_mm(
    a: Tensor,
    b: Tensor,
    scale_a: Tensor,
    scale_b: Tensor,
    out_dtype: torch.dtype,
    *,
    fp8_dot: bool | None = None,
    config: LaunchConfig | None = None,
) -> Tensor:
    """(a.float() @ b.float()) / (scale_a * scale_b) for fp8 a (M, K), b (K, N); scales as in torch._scaled_mm.

    `fp8_dot` picks the tile product: fp8 tensor cores (True) or tiles upcast to fp32 (False); None decides from
    the device. Tests pass True to run the GPU's code path in the interpreter.
    """
    a_rowwise, b_colwise = _check_scaled_mm(a, b, scale_a, scale_b)
    path = kernel_path(a.device)
    if path is KernelPath.REFERENCE:
        return reference.scaled_mm(a, b, scale_a, scale_b, out_dtype)
    cfg = _config(path, config)
    # fp8 tensor cores take both operands K-major (a row-major, b column-major): Triton would otherwise stage a
    # transposed tile through a slow path (a training step's backward measured 5x slower on an H100). A copy of
    # the fp8 operand costs a byte per element, little next to the product.
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(0) != 1:
        b = b.t().contiguous().t()
    (m, k), n = a.shape, b.shape[1]
    staged = torch.empty((m, n), dtype=kernel_out_dtype(out_dtype, path), device=a.device)
    # The epilogue's scale loads change the compiled schedule enough that each case has its own best tile
    # (H100, 8192^3: tensorwise 1219 TFLOP/s at 256x128 vs 963 at 128x256; rowwise the other way round).
    block_m, block_n = (cfg.mm_block_m, cfg.mm_block_n) if a_rowwise or b_colwise else cfg.mm_tensorwise_block_mn
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    if m > 0 and n > 0:
        _scaled_mm_kernel[grid](
            a, b, scale_a.contiguous(), scale_b.contiguous(), staged, m, n, k,
            *a.stride(), *b.stride(), *staged.stride(),
            A_ROWWISE=a_rowwise, B_COLWISE=b_colwise,
            FP8_DOT=_fp8_dot_supported(a.device) if fp8_dot is None else fp8_dot,
            EVEN_K=k % cfg.mm_block_k == 0,
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=cfg.mm_block_k, GROUP_M=cfg.mm_group_m,
            MAX_IMPRECISE_ACC=cfg.mm_max_imprecise_acc, num_warps=cfg.mm_warps, num_stages=cfg.mm_stages,
        )  # fmt: skip
    return staged.to(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Custom ops: one opaque node each under tracing. The fake impls derive every size from input sizes, so they work
# with SymInts.


@custom_op("subclassaot_fp8::amax")
def amax_op(x: Tensor) -> Tensor:
    """max(|x|) as an fp32 scalar: the amax for delayed scaling."""
    return amax(x)


@custom_op("subclassaot_fp8::quantize")
def quantize_op(x: Tensor, fp8_dtype: torch.dtype, granularity: str) -> tuple[Tensor, Tensor]:
    """(data, scale); `granularity` is a `Granularity` value ("tensorwise" or "rowwise")."""
    return quantize(x, fp8_dtype, _granularity(granularity))


@custom_op("subclassaot_fp8::cast_with_scale")
def cast_with_scale_op(x: Tensor, scale: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    """saturate(x * scale).to(fp8_dtype) for a known tensorwise scale."""
    return cast_with_scale(x, scale, fp8_dtype)


@custom_op("subclassaot_fp8::dequantize")
def dequantize_op(data: Tensor, scale: Tensor, out_dtype: torch.dtype) -> Tensor:
    """data.float() / scale, cast to out_dtype."""
    return dequantize(data, scale, out_dtype)


@custom_op("subclassaot_fp8::scaled_mm")
def scaled_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype) -> Tensor:
    """(a.float() @ b.float()) / (scale_a * scale_b), cast to out_dtype."""
    return scaled_mm(a, b, scale_a, scale_b, out_dtype)


def _granularity(value: str) -> Granularity:
    try:
        return Granularity(value)
    except ValueError:
        choices = [g.value for g in Granularity]
        raise ValueError(f"quantize: granularity {value!r} is not one of {choices}.") from None


def _amax_fake(x: Tensor) -> Tensor:
    _check_hp("amax", x)
    return x.new_empty((), dtype=torch.float32)


def _quantize_fake(x: Tensor, fp8_dtype: torch.dtype, granularity: str) -> tuple[Tensor, Tensor]:
    _check_hp("quantize", x)
    fp8_max(fp8_dtype)  # validates the dtype
    shape = scale_shape(x.shape, _granularity(granularity))
    return x.new_empty(x.shape, dtype=fp8_dtype), x.new_empty(shape, dtype=torch.float32)


def _cast_with_scale_fake(x: Tensor, scale: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    _check_hp("cast_with_scale", x)
    _check_tensorwise_scale("cast_with_scale", scale)
    fp8_max(fp8_dtype)  # validates the dtype
    return x.new_empty(x.shape, dtype=fp8_dtype)


def _dequantize_fake(data: Tensor, scale: Tensor, out_dtype: torch.dtype) -> Tensor:
    _check_scale("dequantize", data, scale)
    return data.new_empty(data.shape, dtype=out_dtype)


def _scaled_mm_fake(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype) -> Tensor:
    _check_scaled_mm(a, b, scale_a, scale_b)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


torch.library.register_fake("subclassaot_fp8::amax", _amax_fake)
torch.library.register_fake("subclassaot_fp8::quantize", _quantize_fake)
torch.library.register_fake("subclassaot_fp8::cast_with_scale", _cast_with_scale_fake)
torch.library.register_fake("subclassaot_fp8::dequantize", _dequantize_fake)
torch.library.register_fake("subclassaot_fp8::scaled_mm", _scaled_mm_fake)


class _DequantizeCtx(Protocol):
    """What `_dequantize_setup_context` leaves on the autograd ctx for `_dequantize_backward`."""

    saved_tensors: tuple[Tensor, ...]
    data_dtype: torch.dtype

    def save_for_backward(self, *tensors: Tensor) -> None: ...


def _dequantize_setup_context(ctx: _DequantizeCtx, inputs: tuple[Tensor, Tensor, torch.dtype], output: Tensor) -> None:
    data, scale, _ = inputs
    ctx.save_for_backward(data, scale)
    ctx.data_dtype = data.dtype


def _dequantize_backward(ctx: _DequantizeCtx, grad: Tensor) -> tuple[Tensor, Tensor, None]:
    # The gradient of the reference, out = (data.float() / scale).to(out_dtype): d/d data = 1/scale (cast back
    # to data's dtype, as autograd casts a gradient to its input's dtype), d/d scale = -data / scale^2 summed
    # over the elements sharing a scale.
    data, scale = ctx.saved_tensors
    grad32 = grad.to(torch.float32)
    grad_data = (grad32 / scale).to(ctx.data_dtype)
    grad_scale = -grad32 * data.to(torch.float32) / (scale * scale)
    return grad_data, grad_scale.sum_to_size(scale.shape), None


torch.library.register_autograd(
    "subclassaot_fp8::dequantize", _dequantize_backward, setup_context=_dequantize_setup_context
)
