"""`Float8Tensor`: fp8 data with fp32 scales, behaving as a tensor of its original (high-precision) dtype.

Purpose: the FP8-scaled sample subclass. Inner tensors `qdata` (float8_e4m3fn or float8_e5m2) and `scale` (fp32);
ctx `(orig_dtype, fp8_dtype, granularity)`. The outer dtype is `orig_dtype`, so `x.dtype` says what `x` stands
for, and `x.to_original()` gives it back. The op table lives in `ops.py` (the package imports it, which
registers it); the kernels are the `subclassaot_fp8` custom ops of `kernels.py`.
See Note [Float8 Scale Layouts] and Note [Float8 Op Semantics] (ops.py).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch._ops import OpOverload

from policies import SubclassSymbolicPolicy, TensorPolicy, dynamic, equal, inner, marked, outer, static
from subclassaot.authoring.wrapper_tensor import OpHandler, OuterMeta, WrapperTensor
from subclassaot.errors import ProtocolError, UnsupportedError
from subclasses.fp8 import kernels, reference
from subclasses.fp8.reference import Granularity

# Note [Float8 Scale Layouts]
# x ~= qdata.float() / scale (the quantizing-multiplier convention of Note [FP8 Scaling Conventions]), where
# `scale` is always stored broadcastable against `qdata` (keepdim), so that dequantizing is one broadcast division
# whatever view of the tensor we hold. Three layouts (`Float8Granularity`, a closed choice kept in ctx):
#   TENSORWISE  scale shape ()                                   one scale for everything
#   ROWWISE     scale shape qdata.shape[:-1] + (1,)               one scale per row (reduced over the last dim)
#   COLWISE     scale shape qdata.shape[:-2] + (1, shape[-1])     one scale per column: what transposing the last two
#                                                                 dims of a ROWWISE tensor gives (torch._scaled_mm's
#                                                                 scale_b layout)
# An axiswise layout has one "reduced axis" (the dim where the scale has size 1): ndim-1 for ROWWISE, ndim-2 for
# COLWISE. A view op maps the reduced axis like any other dim; if it lands on ndim-1 or ndim-2 the result is
# ROWWISE or COLWISE, anywhere else (transpose(0, 2) of a 3-d ROWWISE tensor) the layout is not one of the three and
# the op raises UnsupportedError naming the layout. Views of a TENSORWISE tensor share its scale *object*; views of
# an axiswise tensor hold a view of its scale.

_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
_HP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class Float8Granularity(enum.Enum):
    """How a Float8Tensor's scale is laid out; see Note [Float8 Scale Layouts]."""

    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    COLWISE = "colwise"

    def reduced_axis(self, ndim: int) -> int | None:
        """The dim in which the scale has size 1 (None for TENSORWISE)."""
        if self is Float8Granularity.TENSORWISE:
            return None
        return ndim - 1 if self is Float8Granularity.ROWWISE else ndim - 2


def granularity_for_axis(axis: int | None, ndim: int, *, what: str) -> Float8Granularity:
    """The layout whose reduced axis is `axis` in an `ndim`-d tensor; raises if no layout has it."""
    if axis is None:
        return Float8Granularity.TENSORWISE
    if axis == ndim - 1:
        return Float8Granularity.ROWWISE
    if axis == ndim - 2 and ndim >= 2:
        return Float8Granularity.COLWISE
    raise UnsupportedError(
        f"Float8Tensor: {what} would leave the scale reduced over dim {axis} of a {ndim}-d tensor, which is neither "
        "rowwise (last dim) nor colwise (second to last); see Note [Float8 Scale Layouts]. Dequantize first "
        "(x.to_original()) or quantize the result again with Float8Tensor.from_hp(...)"
    )


def scale_shape_for(shape: tuple[int | torch.SymInt, ...], granularity: Float8Granularity) -> tuple[Any, ...]:
    """The scale's shape for data of `shape`; see Note [Float8 Scale Layouts]."""
    if granularity is Float8Granularity.TENSORWISE:
        return ()
    if granularity is Float8Granularity.ROWWISE:
        return (*shape[:-1], 1)
    return (*shape[:-2], 1, shape[-1])


def quantize_with_scale(x: Tensor, scale: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    """saturate(x * scale).to(fp8_dtype) for a scale that is already known (delayed scaling, in-place writes).

    A tensorwise scale runs the fused cast kernel; any other scale shape, the pure-torch twin.
    """
    if scale.dim() == 0:
        return kernels.cast_with_scale_op(x, scale, fp8_dtype)
    return reference.cast_with_scale(x, scale, fp8_dtype)


class Float8Tensor(WrapperTensor):
    """fp8 `qdata` and fp32 `scale` standing for a tensor of dtype `orig_dtype`: x ~= qdata.float() / scale.

    Build with `Float8Tensor.from_hp(x, ...)`; read back with `to_original()`. See Note [Float8 Scale Layouts].
    """

    inner_names: ClassVar[tuple[str, ...]] = ("qdata", "scale")
    ctx_names: ClassVar[tuple[str, ...]] = ("orig_dtype", "fp8_dtype", "granularity")
    # The dequantizing fallback for ops without a handler, set by ops.py (Note [Float8 Op Semantics]).
    fallback_for: ClassVar[Callable[[OpOverload[..., Any]], OpHandler | None] | None] = None
    qdata: Tensor
    scale: Tensor
    orig_dtype: torch.dtype
    fp8_dtype: torch.dtype
    granularity: Float8Granularity

    @classmethod
    def outer_meta(cls, fields: Mapping[str, object]) -> OuterMeta:
        qdata, scale = fields["qdata"], fields["scale"]
        orig_dtype, fp8_dtype, granularity = fields["orig_dtype"], fields["fp8_dtype"], fields["granularity"]
        assert isinstance(qdata, Tensor) and isinstance(scale, Tensor), "BUG: _bind_fields checks inner tensors"
        if orig_dtype not in _HP_DTYPES:
            raise ProtocolError(f"Float8Tensor: orig_dtype must be one of {_HP_DTYPES}, got {orig_dtype!r}")
        if fp8_dtype not in _FP8_DTYPES or qdata.dtype != fp8_dtype:
            raise ProtocolError(
                f"Float8Tensor: qdata has dtype {qdata.dtype} and fp8_dtype is {fp8_dtype!r}; both must be the same "
                f"one of {_FP8_DTYPES}"
            )
        if not isinstance(granularity, Float8Granularity):
            raise ProtocolError(f"Float8Tensor: granularity must be a Float8Granularity, got {granularity!r}")
        expected_ndim = 0 if granularity is Float8Granularity.TENSORWISE else qdata.dim()
        if scale.dtype != torch.float32 or scale.dim() != expected_ndim:
            raise ProtocolError(
                f"Float8Tensor: a {granularity.value} scale for {qdata.dim()}-d data must be a {expected_ndim}-d "
                f"float32 tensor, got {scale.dim()}-d {scale.dtype}; see Note [Float8 Scale Layouts]"
            )
        return OuterMeta(
            size=tuple(qdata.size()),
            stride=tuple(qdata.stride()),
            storage_offset=qdata.storage_offset(),
            dtype=orig_dtype,
            device=qdata.device,
            layout=qdata.layout,
        )

    @classmethod
    def from_hp(
        cls,
        x: Tensor,
        *,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
        granularity: Float8Granularity = Float8Granularity.TENSORWISE,
    ) -> Float8Tensor:
        """Quantize `x` with a scale from its current amax (the fused kernel). Not differentiable: see linear.py."""
        if x.dtype not in _HP_DTYPES:
            raise TypeError(f"Float8Tensor.from_hp: x has dtype {x.dtype}; expected one of {_HP_DTYPES}")
        if granularity is Float8Granularity.COLWISE:
            if x.dim() < 2:
                raise ValueError(f"Float8Tensor.from_hp: colwise scaling needs >= 2 dims, got shape {tuple(x.shape)}")
            data_t, scale_t = kernels.quantize_op(x.mT, fp8_dtype, Granularity.ROWWISE.value)
            data, scale = data_t.mT, scale_t.mT
        else:
            data, scale = kernels.quantize_op(x, fp8_dtype, granularity.value)
        return cls(data, scale, x.dtype, fp8_dtype, granularity)

    @classmethod
    def from_hp_with_scale(cls, x: Tensor, scale: Tensor, *, fp8_dtype: torch.dtype) -> Float8Tensor:
        """Quantize `x` with a given tensorwise `scale` (shape (), fp32): delayed scaling."""
        return cls(quantize_with_scale(x, scale, fp8_dtype), scale, x.dtype, fp8_dtype, Float8Granularity.TENSORWISE)

    @classmethod
    def try_get_handler(cls, func: OpOverload[..., Any]) -> OpHandler | None:
        """The op table's handler, else the dequantizing fallback; see Note [Float8 Op Semantics] in ops.py."""
        fallback = cls.fallback_for
        return super().try_get_handler(func) or (fallback(func) if fallback is not None else None)

    def __reduce_ex__(self, proto: Any) -> tuple[Any, ...]:
        # torch 2.13 cannot unpickle a float8 tensor ("UntypedStorage has no attribute dtype"): pickle the fp8
        # payload as its uint8 bits (same element size, so any strides view) and view it back on load.
        ctx = (self.orig_dtype, self.fp8_dtype, self.granularity)
        meta = (tuple(self.size()), tuple(self.stride()), self.requires_grad)
        return (_unpickle, (self.qdata.view(torch.uint8), self.scale, ctx, meta))

    def dequantize(self) -> Tensor:
        """qdata.float() / scale in orig_dtype, as a plain tensor, read from the inner tensors (no autograd link)."""
        if self.granularity is Float8Granularity.COLWISE:
            return kernels.dequantize_op(self.qdata.mT, self.scale.mT, self.orig_dtype).mT
        return kernels.dequantize_op(self.qdata, self.scale, self.orig_dtype)

    def to_original(self) -> Tensor:
        """The high-precision tensor this stands for; differentiable (the gradient passes straight through)."""
        out: Tensor = _ToOriginal.apply(self)  # type: ignore[no-untyped-call]  # torch's stub leaves apply untyped
        return out

    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> SubclassSymbolicPolicy:
        """qdata's dims follow the outer dims; a tensorwise scale stays static; an axiswise one follows its rows."""
        ndim = self.dim()
        reduced = self.granularity.reduced_axis(ndim)
        scale_dims = () if reduced is None else tuple(d for d in dims if d != reduced)
        scale_policy = TensorPolicy(sizes=())
        if reduced is not None:
            # Dims nobody marked stay unspecified (an earlier mark survives the merge); the reduced axis is size 1.
            row_sizes = marked(ndim, scale_dims, dynamic()).sizes
            scale_policy = TensorPolicy(sizes=tuple(static() if d == reduced else p for d, p in enumerate(row_sizes)))
        return SubclassSymbolicPolicy(
            outer=marked(ndim, dims, dynamic(min=min, max=max)),
            inner={"qdata": marked(ndim, dims, dynamic()), "scale": scale_policy},
            relations=[
                *(equal(inner("qdata", d), outer(d)) for d in dims),
                *(equal(inner("scale", d), outer(d)) for d in scale_dims),
            ],
        )


def _unpickle(
    bits: Tensor,
    scale: Tensor,
    ctx: tuple[torch.dtype, torch.dtype, Float8Granularity],
    meta: tuple[tuple[int, ...], tuple[int, ...], bool],
) -> Float8Tensor:
    size, stride, requires_grad = meta
    inner_tensors = {"qdata": bits.view(ctx[1]), "scale": scale}
    out = Float8Tensor.__tensor_unflatten__(inner_tensors, ctx, size, stride)
    assert isinstance(out, Float8Tensor), "BUG: Float8Tensor.__tensor_unflatten__ builds a Float8Tensor"
    out.requires_grad_(requires_grad)
    return out


class _ToOriginal(torch.autograd.Function):
    """Float8Tensor -> its high-precision value; the gradient passes through unchanged (straight-through)."""

    @staticmethod
    def forward(ctx: Any, x: Float8Tensor) -> Tensor:
        return x.dequantize()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad


def example() -> Float8Tensor:
    """A small tensorwise float8_e4m3fn Float8Tensor standing for a (4, 6) float32 tensor."""
    x = torch.linspace(-3.0, 3.0, 24, dtype=torch.float32).reshape(4, 6)
    return Float8Tensor.from_hp(x)


def rowwise_example() -> Float8Tensor:
    """A small rowwise float8_e4m3fn Float8Tensor standing for a (4, 6) bfloat16 tensor."""
    x = torch.linspace(-3.0, 3.0, 24, dtype=torch.bfloat16).reshape(4, 6)
    return Float8Tensor.from_hp(x, granularity=Float8Granularity.ROWWISE)
