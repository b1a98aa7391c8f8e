"""`Float8Linear`: an `nn.Linear` whose matmuls run in fp8, with dynamic or delayed scaling; `to_float8(model)`.

Input: a module (or model) with `nn.Linear`s and high-precision parameters. Output: the same module, its linears
swapped in place for `Float8Linear`s that share their parameters (an optimizer built before the swap still
updates them). Invariants: parameters stay high-precision; fp8 tensors live only inside one forward/backward;
with delayed scaling, the three amax history buffers are the module's only state besides its parameters.
See Note [Float8 Linear Recipe].
"""

from __future__ import annotations

import enum
from typing import Any

import torch
from torch import Tensor, nn

from subclasses.fp8 import cast_transpose, kernels
from subclasses.fp8.reference import Granularity, amax_to_scale
from subclasses.fp8.tensor import Float8Granularity, Float8Tensor

# Note [Float8 Linear Recipe]
# Forward: input and weight are cast to float8_e4m3fn (tensorwise scales), out = scaled_mm(x8, w8.t()) in the
# input's dtype, bias added in high precision. Backward: grad_output is cast to float8_e5m2 (wider range, for
# gradients), and both gradients are scaled matmuls too: grad_input = g8 @ w8, grad_weight = g8.t() @ x8, reusing
# the forward's fp8 input and weight (tensorwise scales survive transposition, which is why this recipe is
# tensorwise). All three matmuls go through Float8Tensor's mm, i.e. the `subclassaot_fp8::scaled_mm` kernel.
# Scaling (`ScalingType`):
#   DYNAMIC  scale = fp8_max / amax of the tensor being cast, computed now (the fused quantize kernel).
#   DELAYED  each of input, weight, grad_output has an amax history buffer of length H (`fp8_amax_history_*`,
#            newest first). A cast first records the current amax (shifting the history by one, in place), then
#            scales by fp8_max / max(history). Recording before scaling keeps the first steps (history still zero)
#            from saturating everything; torchao's removed delayed scaling used the same max-of-history rule.
#            grad_output's amax is recorded DURING THE BACKWARD, by `_Float8Matmul.backward`, with an in-place
#            copy_ into the buffer: a buffer mutated in the backward pass.
# Casts (`fused_cast`): by default each of input, weight and grad_output is cast once by the fused cast-transpose
# kernel, which writes the row-major copy and the transposed copy from one read (See Note [Fused Cast Transpose]);
# the forward saves only the transposed copies of input and weight, the ones the backward's matmuls take, so the
# scaled-matmul launcher never transposes. Same scales, same fp8 values, so the results are bit for bit those of
# `fused_cast=False`, which casts row-major only and leaves the launcher to transpose (kept as the baseline).

_E4M3 = torch.float8_e4m3fn
_E5M2 = torch.float8_e5m2


class ScalingType(enum.Enum):
    """How Float8Linear computes its scales; see Note [Float8 Linear Recipe]."""

    DYNAMIC = "dynamic"
    DELAYED = "delayed"


def record_amax(history: Tensor, x: Tensor) -> None:
    """Shift `history` by one (in place) and put amax(x) first."""
    amax = kernels.amax_op(x.detach())
    history.copy_(torch.cat([amax.reshape(1), history[:-1]]))


def _delayed_scale(history: Tensor, x: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    record_amax(history, x)
    return amax_to_scale(history.amax(), fp8_dtype)


def _cast(x: Tensor, history: Tensor | None, fp8_dtype: torch.dtype) -> Float8Tensor:
    if history is None:
        return Float8Tensor.from_hp(x, fp8_dtype=fp8_dtype)
    return Float8Tensor.from_hp_with_scale(x, _delayed_scale(history, x, fp8_dtype), fp8_dtype=fp8_dtype)


class _Float8Matmul(torch.autograd.Function):
    """x @ weight.t() in fp8 (forward e4m3, backward e5m2 grad_output); see Note [Float8 Linear Recipe]."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, weight: Tensor, x_scale: Tensor | None, w_scale: Tensor | None, grad_history: Tensor | None
    ) -> Tensor:
        x8 = (
            Float8Tensor.from_hp(x) if x_scale is None else Float8Tensor.from_hp_with_scale(x, x_scale, fp8_dtype=_E4M3)
        )
        w8 = (
            Float8Tensor.from_hp(weight)
            if w_scale is None
            else Float8Tensor.from_hp_with_scale(weight, w_scale, fp8_dtype=_E4M3)
        )
        ctx.delayed = grad_history is not None
        ctx.save_for_backward(x8, w8, *(() if grad_history is None else (grad_history,)))
        return torch.mm(x8, w8.t())

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x8, w8, *rest = ctx.saved_tensors
        g8 = _cast(grad_output.contiguous(), rest[0] if ctx.delayed else None, _E5M2)
        grad_x = torch.mm(g8, w8) if ctx.needs_input_grad[0] else None
        grad_w = torch.mm(g8.t(), x8) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w, None, None, None


def _cast_pair(x: Tensor, history: Tensor | None, fp8_dtype: torch.dtype) -> tuple[Float8Tensor, Float8Tensor]:
    """(x8, x8_t): tensorwise casts of a 2-D x, x8_t (K, M) contiguous; updates `history` in place if given."""
    if history is None:
        data, data_t, scale = cast_transpose.cast_transpose_op(x, fp8_dtype, Granularity.TENSORWISE.value)
    else:
        data, data_t, scale, new_history = cast_transpose.cast_transpose_delayed_op(x, history, fp8_dtype)
        history.copy_(new_history)
    meta = (x.dtype, fp8_dtype, Float8Granularity.TENSORWISE)
    return Float8Tensor(data, scale, *meta), Float8Tensor(data_t, scale, *meta)


class _Float8MatmulFused(torch.autograd.Function):
    """`_Float8Matmul` on operands cast by the fused cast-transpose; see Note [Float8 Linear Recipe]."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        weight: Tensor,
        x8: Float8Tensor,
        x8_t: Float8Tensor,
        w8: Float8Tensor,
        w8_t: Float8Tensor,
        grad_history: Tensor | None,
    ) -> Tensor:
        ctx.delayed = grad_history is not None
        ctx.save_for_backward(x8_t, w8_t, *(() if grad_history is None else (grad_history,)))
        return torch.mm(x8, w8.t())

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x8_t, w8_t, *rest = ctx.saved_tensors
        g8, g8_t = _cast_pair(grad_output, rest[0] if ctx.delayed else None, _E5M2)
        # Every operand is already K-major: g8 and g8_t row-major, x8_t.t() and w8_t.t() column-major.
        grad_x = torch.mm(g8, w8_t.t()) if ctx.needs_input_grad[0] else None
        grad_w = torch.mm(g8_t, x8_t.t()) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w, None, None, None, None, None


class Float8Linear(nn.Linear):
    """`nn.Linear` with fp8 matmuls (forward and backward); see Note [Float8 Linear Recipe].

    With `scaling=ScalingType.DELAYED` it holds buffers `fp8_amax_history_input`, `fp8_amax_history_weight` and
    `fp8_amax_history_grad_output`, each of length `history_len`, fp32. `fused_cast=False` casts without the
    fused cast-transpose kernel (the baseline; same results).
    """

    fp8_amax_history_input: Tensor
    fp8_amax_history_weight: Tensor
    fp8_amax_history_grad_output: Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        scaling: ScalingType = ScalingType.DYNAMIC,
        history_len: int = 16,
        fused_cast: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        if history_len < 1:
            raise ValueError(f"Float8Linear: history_len must be >= 1, got {history_len}")
        self.scaling = scaling
        self.history_len = history_len
        self.fused_cast = fused_cast
        if scaling is ScalingType.DELAYED:
            for role in ("input", "weight", "grad_output"):
                history = torch.zeros(history_len, dtype=torch.float32, device=self.weight.device)
                self.register_buffer(f"fp8_amax_history_{role}", history)

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        *,
        scaling: ScalingType = ScalingType.DYNAMIC,
        history_len: int = 16,
        fused_cast: bool = True,
    ) -> Float8Linear:
        """A Float8Linear sharing `linear`'s weight and bias Parameters (the same objects)."""
        new = cls(
            linear.in_features,
            linear.out_features,
            bias=linear.bias is not None,
            scaling=scaling,
            history_len=history_len,
            fused_cast=fused_cast,
            device="meta",
        )
        new.weight = linear.weight
        new.bias = linear.bias
        if scaling is ScalingType.DELAYED:
            for name, buffer in new.named_buffers():
                setattr(new, name, torch.zeros_like(buffer, device=linear.weight.device))
        return new

    def forward(self, x: Tensor) -> Tensor:
        x2 = x.reshape(-1, self.in_features)
        out = self._fused_matmul(x2) if self.fused_cast else self._matmul(x2)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    def _fused_matmul(self, x2: Tensor) -> Tensor:
        delayed = self.scaling is ScalingType.DELAYED
        with torch.no_grad():
            x8, x8_t = _cast_pair(x2, self.fp8_amax_history_input if delayed else None, _E4M3)
            w8, w8_t = _cast_pair(self.weight, self.fp8_amax_history_weight if delayed else None, _E4M3)
        grad_history = self.fp8_amax_history_grad_output if delayed else None
        out: Tensor = _Float8MatmulFused.apply(x2, self.weight, x8, x8_t, w8, w8_t, grad_history)  # type: ignore[no-untyped-call]  # untyped in torch
        return out

    def _matmul(self, x2: Tensor) -> Tensor:
        x_scale = w_scale = grad_history = None
        if self.scaling is ScalingType.DELAYED:
            with torch.no_grad():
                x_scale = _delayed_scale(self.fp8_amax_history_input, x2, _E4M3)
                w_scale = _delayed_scale(self.fp8_amax_history_weight, self.weight, _E4M3)
            grad_history = self.fp8_amax_history_grad_output
        # torch's stub leaves Function.apply untyped.
        out: Tensor = _Float8Matmul.apply(x2, self.weight, x_scale, w_scale, grad_history)  # type: ignore[no-untyped-call]  # untyped in torch
        return out

    def extra_repr(self) -> str:
        fused = "" if self.fused_cast else ", fused_cast=False"
        return f"{super().extra_repr()}, scaling={self.scaling.value}, history_len={self.history_len}{fused}"


def to_float8(
    model: nn.Module, *, scaling: ScalingType = ScalingType.DYNAMIC, history_len: int = 16, fused_cast: bool = True
) -> nn.Module:
    """Swap every `nn.Linear` in `model` (recursively, in place) for a `Float8Linear`; returns `model`.

    A bare `nn.Linear` cannot be replaced in place (it has no parent): for one, use the returned module.
    """
    if isinstance(model, nn.Linear) and not isinstance(model, Float8Linear):
        return Float8Linear.from_linear(model, scaling=scaling, history_len=history_len, fused_cast=fused_cast)
    for name, child in model.named_children():
        if isinstance(child, nn.Linear) and not isinstance(child, Float8Linear):
            swapped = Float8Linear.from_linear(child, scaling=scaling, history_len=history_len, fused_cast=fused_cast)
            setattr(model, name, swapped)
        else:
            to_float8(child, scaling=scaling, history_len=history_len, fused_cast=fused_cast)
    return model
