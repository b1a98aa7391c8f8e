"""Triton kernels for FP8 scaling, their typed launchers, and the torch custom ops built on them.

Input: high-precision tensors (fp32 / bf16 / fp16) to quantize; fp8 data + fp32 scales to dequantize or multiply.
Output: the custom ops `subclassaot_fp8::{amax, quantize, dequantize, scaled_mm}`; each traces as one opaque node
(a fake impl gives its output shapes), and `dequantize` has an autograd formula.
Invariants: each launcher computes exactly what its twin in `reference.py` computes (same fp32 arithmetic, same
rounding of the final cast); the path that ran is `kernel_path(device)`. See Note [Kernel Dispatch] and
Note [FP8 Scaling Conventions].
"""

import math
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
        # Each program reduces one block and folds it into a zero-initialized scalar: |x| >= 0, and max is
        # order-independent, so the atomic gives the same bits as a tree reduction.
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
        tl.atomic_max(amax_ptr, tl.max(tl.abs(x), axis=0))

    @triton.jit
    def _quantize_tensorwise_kernel(
        x_ptr: tl.tensor,
        amax_ptr: tl.tensor,
        data_ptr: tl.tensor,
        scale_ptr: tl.tensor,
        n_elements: tl.tensor,
        FP8_MAX: tl.constexpr,
        EPS: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
    ) -> None:
        # Tensorwise scaling needs the global amax before any element is scaled, hence a second launch after
        # `_amax_kernel`; every program derives the scale from the amax itself rather than waiting for a third.
        scale = tl.math.div_rn(FP8_MAX, tl.maximum(tl.load(amax_ptr), EPS))
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(data_ptr + offsets, tl.clamp(x * scale, -FP8_MAX, FP8_MAX), mask=mask)
        if tl.program_id(0) == 0:
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
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ) -> None:
        # Fully fused: a program owns BLOCK_M whole rows, so it can finish the amax pass before the cast pass.
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
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
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ) -> None:
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in tl.range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            a_mask = (rm < M)[:, None] & (rk < K)[None, :]
            b_mask = (rk < K)[:, None] & (rn < N)[None, :]
            a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak, mask=a_mask, other=0.0)
            b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn, mask=b_mask, other=0.0)
            if FP8_DOT:
                acc = tl.dot(a, b, acc)
            else:
                # fp8 values are exact in fp32 (and in tf32, which the GPU may use for an fp32 dot: 10 mantissa
                # bits >= 3), and the accumulator is fp32 either way, so upcasting loses nothing.
                acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
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

_BLOCK_SIZE = 1024  # elements per program, 1-D kernels
_BLOCK_M = 16  # rows per program, row-blocked kernels
_MAX_BLOCK_N = 128  # columns per loop step, row-blocked kernels
_MM_BLOCK_M, _MM_BLOCK_N, _MM_BLOCK_K = 64, 64, 32  # fixed tiles; no autotuning yet
_HP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def kernel_path(device: torch.device) -> KernelPath:
    """The path the launchers take for tensors on `device`; see Note [Kernel Dispatch]."""
    return select_path(device, has_triton=_HAS_TRITON, interpreted=_INTERPRETED)


def _block_n(n_cols: int) -> int:
    return min(_MAX_BLOCK_N, triton.next_power_of_2(max(n_cols, 1)))


def _check_hp(op: str, x: Tensor) -> None:
    if x.dtype not in _HP_DTYPES:
        raise TypeError(f"{op}: x has dtype {x.dtype}; expected one of {_HP_DTYPES}. Cast first: x.float().")


def amax(x: Tensor) -> Tensor:
    """max(|x|) over all elements, as an fp32 scalar (shape ()); 0 for an empty tensor."""
    _check_hp("amax", x)
    path = kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.amax(x)
    flat = x.contiguous().view(-1)
    out = torch.zeros((), dtype=torch.float32, device=x.device)
    if flat.numel() > 0:
        _amax_kernel[(triton.cdiv(flat.numel(), _BLOCK_SIZE),)](flat, out, flat.numel(), BLOCK_SIZE=_BLOCK_SIZE)
    return out


def quantize(x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity) -> tuple[Tensor, Tensor]:
    """(data, scale): fused amax + scale + saturating cast; see Note [FP8 Scaling Conventions].

    Tensorwise takes any shape (flattened); rowwise scales each row of the last dim.
    """
    _check_hp("quantize", x)
    bound = fp8_max(fp8_dtype)
    path = kernel_path(x.device)
    if path is KernelPath.REFERENCE:
        return reference.quantize(x, fp8_dtype, granularity)
    staged = torch.empty(x.shape, dtype=kernel_out_dtype(fp8_dtype, path), device=x.device)
    scale = torch.empty(scale_shape(x.shape, granularity), dtype=torch.float32, device=x.device)
    if granularity is Granularity.TENSORWISE:
        flat = x.contiguous().view(-1)
        x_amax = amax(flat)
        # At least one program, so that program 0 writes the scale even for an empty tensor.
        grid = (max(1, triton.cdiv(flat.numel(), _BLOCK_SIZE)),)
        _quantize_tensorwise_kernel[grid](
            flat, x_amax, staged, scale, flat.numel(), FP8_MAX=bound, EPS=EPS, BLOCK_SIZE=_BLOCK_SIZE
        )
    else:
        n_rows, n_cols = math.prod(x.shape[:-1]), x.shape[-1]
        x2 = x.reshape(n_rows, n_cols)
        data2 = staged.view(n_rows, n_cols)
        if n_rows > 0:
            _quantize_rowwise_kernel[(triton.cdiv(n_rows, _BLOCK_M),)](
                x2, data2, scale, n_rows, n_cols, *x2.stride(), *data2.stride(),
                FP8_MAX=bound, EPS=EPS, BLOCK_M=_BLOCK_M, BLOCK_N=_block_n(n_cols),
            )  # fmt: skip
    return staged.to(fp8_dtype), scale


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


def dequantize(data: Tensor, scale: Tensor, out_dtype: torch.dtype) -> Tensor:
    """data.float() / scale, cast to out_dtype (scale shape () or data.shape[:-1] + (1,))."""
    rowwise = _check_scale("dequantize", data, scale)
    path = kernel_path(data.device)
    if path is KernelPath.REFERENCE:
        return reference.dequantize(data, scale, out_dtype)
    n_rows, n_cols = (math.prod(data.shape[:-1]), data.shape[-1]) if data.dim() > 0 else (1, 1)
    data2 = data.reshape(n_rows, n_cols)
    staged = torch.empty(data.shape, dtype=kernel_out_dtype(out_dtype, path), device=data.device)
    out2 = staged.view(n_rows, n_cols)
    block_n = _block_n(n_cols)
    grid = (triton.cdiv(n_rows, _BLOCK_M), triton.cdiv(n_cols, block_n))
    if data.numel() > 0:
        _dequantize_kernel[grid](
            data2, scale.contiguous(), out2, n_rows, n_cols, *data2.stride(), *out2.stride(),
            ROWWISE=rowwise, BLOCK_M=_BLOCK_M, BLOCK_N=block_n,
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
    a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype, *, fp8_dot: bool | None = None
) -> Tensor:
    """(a.float() @ b.float()) / (scale_a * scale_b) for fp8 a (M, K), b (K, N); scales as in torch._scaled_mm.

    `fp8_dot` picks the tile product: fp8 tensor cores (True) or tiles upcast to fp32 (False); None decides from
    the device. Tests pass True to run the GPU's code path in the interpreter.
    """
    a_rowwise, b_colwise = _check_scaled_mm(a, b, scale_a, scale_b)
    path = kernel_path(a.device)
    if path is KernelPath.REFERENCE:
        return reference.scaled_mm(a, b, scale_a, scale_b, out_dtype)
    (m, k), n = a.shape, b.shape[1]
    staged = torch.empty((m, n), dtype=kernel_out_dtype(out_dtype, path), device=a.device)
    grid = (triton.cdiv(m, _MM_BLOCK_M), triton.cdiv(n, _MM_BLOCK_N))
    if m > 0 and n > 0:
        _scaled_mm_kernel[grid](
            a, b, scale_a.contiguous(), scale_b.contiguous(), staged, m, n, k,
            *a.stride(), *b.stride(), *staged.stride(),
            A_ROWWISE=a_rowwise, B_COLWISE=b_colwise,
            FP8_DOT=_fp8_dot_supported(a.device) if fp8_dot is None else fp8_dot,
            BLOCK_M=_MM_BLOCK_M, BLOCK_N=_MM_BLOCK_N, BLOCK_K=_MM_BLOCK_K,
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


def _dequantize_fake(data: Tensor, scale: Tensor, out_dtype: torch.dtype) -> Tensor:
    _check_scale("dequantize", data, scale)
    return data.new_empty(data.shape, dtype=out_dtype)


def _scaled_mm_fake(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype) -> Tensor:
    _check_scaled_mm(a, b, scale_a, scale_b)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


torch.library.register_fake("subclassaot_fp8::amax", _amax_fake)
torch.library.register_fake("subclassaot_fp8::quantize", _quantize_fake)
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
