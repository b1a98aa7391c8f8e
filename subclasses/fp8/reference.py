"""Pure-torch twins of the FP8 kernels: the oracle the kernels are tested against, and the fallback without Triton.

Input: high-precision tensors (fp32 / bf16 / fp16) or fp8 data with its fp32 scale.
Output: the same values the kernels in `kernels.py` produce, computed with plain torch ops.
Invariants: every function returns fresh tensors (never an input or a view of one), so the custom ops built on
them satisfy `torch.library.opcheck`'s no-aliasing rule. See Note [FP8 Scaling Conventions].
"""

import enum

import torch
from torch import Tensor

# Note [FP8 Scaling Conventions]
# `scale` is the *quantizing* multiplier, as in torchao's Float8Tensor: data = saturate(x * scale).to(fp8),
# x ~= data.float() / scale. (torch._scaled_mm takes the inverse, the dequantizing multiplier.)
#   scale = fp8_max / clamp(amax, min=EPS), computed in fp32
# so the largest |x| lands exactly on +-fp8_max and every other value inside the range; EPS keeps an all-zero
# input from producing an infinite scale (it gives a large finite one, and data of zeros).
# The clamp before the cast is not optional: torch's cast to float8_e4m3fn turns out-of-range values into NaN
# (the format has no inf), and x * scale can exceed fp8_max by an ulp of rounding.
# Granularity (closed choice, `Granularity`):
#   TENSORWISE  one scale for the whole tensor, shape ()
#   ROWWISE     one scale per row of the last dim, shape x.shape[:-1] + (1,), i.e. (rows, 1) for a matrix.
#               The trailing 1 keeps it broadcastable against x and data without reshapes.
# scaled_mm follows torch._scaled_mm's shapes: scale_a () or (M, 1), scale_b () or (1, N), and
#   out = (a.float() @ b.float()) / (scale_a * scale_b)
# so a column-wise scale for b is the rowwise scale of b.t(), transposed.

# Smallest amax used to compute a scale (the value torchao uses).
EPS = 1e-12

_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


class Granularity(enum.Enum):
    """How many scales a quantized tensor has; see Note [FP8 Scaling Conventions]."""

    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"


def fp8_max(dtype: torch.dtype) -> float:
    """The largest finite value of an fp8 dtype: 448 for float8_e4m3fn, 57344 for float8_e5m2."""
    if dtype not in _FP8_DTYPES:
        raise ValueError(
            f"fp8_max: {dtype} is not a supported fp8 dtype; use torch.float8_e4m3fn or torch.float8_e5m2."
        )
    return float(torch.finfo(dtype).max)


def scale_shape(shape: torch.Size, granularity: Granularity) -> tuple[int, ...]:
    """The shape of the scale for a tensor of `shape`; see Note [FP8 Scaling Conventions]."""
    if granularity is Granularity.TENSORWISE:
        return ()
    if len(shape) == 0:
        raise ValueError("quantize: rowwise scaling needs a tensor with at least one dim; got a 0-d tensor.")
    return (*shape[:-1], 1)


def amax(x: Tensor) -> Tensor:
    """max(|x|) as an fp32 scalar (0 for an empty tensor, which is what the kernel's zero-initialized max gives)."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float32, device=x.device)
    return x.abs().amax().to(torch.float32, copy=True)


def amax_to_scale(amax: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    """fp8_max / clamp(amax, min=EPS) in fp32."""
    clamped = amax.to(torch.float32).clamp(min=EPS)
    # Tensor / tensor: `float / tensor` is computed as reciprocal-then-multiply, one ulp away from a division.
    return torch.full_like(clamped, fp8_max(fp8_dtype)) / clamped


def quantize(x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity) -> tuple[Tensor, Tensor]:
    """(data, scale) with data = saturate(x * scale).to(fp8_dtype); see Note [FP8 Scaling Conventions]."""
    x32 = x.to(torch.float32)
    if granularity is Granularity.TENSORWISE:
        x_amax = amax(x)
    elif x.numel() == 0:
        x_amax = x32.new_zeros(scale_shape(x.shape, granularity))
    else:
        x_amax = x32.abs().amax(dim=-1, keepdim=True)
    scale = amax_to_scale(x_amax, fp8_dtype)
    bound = fp8_max(fp8_dtype)
    data = (x32 * scale).clamp(-bound, bound).to(fp8_dtype).contiguous()  # (the kernel's and the fake's layout)
    return data, scale


def cast_with_scale(x: Tensor, scale: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    """saturate(x * scale).to(fp8_dtype) for a scale that is already known (broadcasting against x)."""
    bound = fp8_max(fp8_dtype)
    return (x.to(torch.float32) * scale).clamp(-bound, bound).to(fp8_dtype).contiguous()  # (as quantize)


def dequantize(data: Tensor, scale: Tensor, out_dtype: torch.dtype) -> Tensor:
    """data.float() / scale, cast to out_dtype (scale broadcasts: shape () or data.shape[:-1] + (1,)); contiguous,
    as the Triton kernel writes it and the fake impl says (a transposed `data` gave a transposed result here, and a
    graph traced with the fake's strides made a view the real result could not)."""
    return (data.to(torch.float32) / scale).to(out_dtype).contiguous()


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype) -> Tensor:
    """(a.float() @ b.float()) / (scale_a * scale_b), cast to out_dtype; scale shapes as in torch._scaled_mm."""
    product = a.to(torch.float32) @ b.to(torch.float32)
    return (product / (scale_a * scale_b)).to(out_dtype)


def cast_transpose(x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity) -> tuple[Tensor, Tensor, Tensor]:
    """(data, data_t, scale) for a 2-D x: `quantize(x)` and its transpose made contiguous, data_t (K, M).

    A rowwise scale (M, 1) scales the rows of data and, transposed to (1, M), the columns of data_t.
    """
    data, scale = quantize(x, fp8_dtype, granularity)
    return data, data.t().contiguous(), scale


def cast_transpose_delayed(x: Tensor, history: Tensor, fp8_dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(data, data_t, scale, new_history): delayed scaling's cast of a 2-D x, with the amax history updated.

    new_history = [amax(x), history[0], ..., history[-2]] (newest first), scale = fp8_max / max(new_history).
    """
    new_history = torch.cat([amax(x).reshape(1), history[:-1].to(torch.float32)])
    scale = amax_to_scale(new_history.amax(), fp8_dtype)
    data = cast_with_scale(x, scale, fp8_dtype)
    return data, data.t().contiguous(), scale, new_history
