"""The op table of `Float8Tensor`: matmuls through the scaled-matmul kernel, layout-aware views, copies, fallbacks.

Input: aten ops reaching `Float8Tensor.__torch_dispatch__` (below autograd). Output: their results, Float8Tensors
for views and copies, plain high-precision tensors for computations. Invariants: a view's `qdata` is a view of
the input's `qdata` (WrapperTensor's aliasing correction then makes the wrapper alias too); an in-place op writes
into the inner tensors of its first argument and returns it. See Note [Float8 Op Semantics].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import torch
import torch.utils._pytree as pytree
from torch import Tensor
from torch._ops import OpOverload

from subclassaot.authoring.wrapper_tensor import OpHandler
from subclassaot.errors import UnsupportedError
from subclasses.fp8 import kernels
from subclasses.fp8.tensor import Float8Granularity, Float8Tensor, granularity_for_axis, quantize_with_scale

aten = torch.ops.aten
Args: TypeAlias = tuple[Any, ...]
Kwargs: TypeAlias = dict[str, Any]
implements = Float8Tensor.implements

# Note [Float8 Op Semantics]
# A Float8Tensor stands for the high-precision tensor `qdata.float() / scale` of dtype `orig_dtype`; every op
# behaves as it would on that tensor, with these choices:
# - mm / addmm (so matmul and linear, which decompose into them) go through the scaled-matmul kernel when the
#   operands' layouts are ones it takes (a: tensorwise or rowwise, b: tensorwise or colwise, both 2-d); a
#   high-precision operand is quantized first (float8_e4m3fn, dynamic scale, the layout the kernel wants). Other
#   layouts, and bmm, are computed on the dequantized operands. Results are plain tensors of `orig_dtype`.
# - Views (view, _unsafe_view, t, transpose, permute, slice, select, unsqueeze, expand, as_strided, alias, detach)
#   return Float8Tensors whose qdata is the same view of qdata and whose scale follows the layout, see
#   Note [Float8 Scale Layouts]; a view that no layout can express raises UnsupportedError.
# - clone / contiguous / detach copy both inner tensors; `_to_copy` moves them, and a high-precision `dtype=`
#   changes `orig_dtype` only (the fp8 payload is unchanged); any other dtype returns a plain converted tensor.
# - copy_ from a Float8Tensor of the same ctx copies qdata and scale (bit-exact, as torchao does; on a view of a
#   tensorwise tensor that rewrites the scale every view shares). From anything else it writes the source's
#   values quantized with the destination's *current* scale, saturating.
# - set_ to a Float8Tensor of the same ctx points qdata and scale at the source's (the wrapper follows them, as every
#   WrapperTensor's set_ does), so the target aliases the source as a plain set_() would. A tensorwise scale is the one
#   object every view of the tensor shares, so its set_() reaches the target's other views too (whose qdata stays). Any other set_ (a plain or
#   other-ctx source, a storage, none) raises UnsupportedError: a Float8Tensor cannot alias what is not fp8 data of its
#   ctx, and the write-back below would copy values rather than alias (the runtime's rebuild of a view set_() to its
#   own leaves relies on set_ aliasing: Note [Output Regeneration]).
# - Every other functional op (pointwise, reductions, ...) runs on the dequantized tensors and returns plain
#   high-precision results: fp8 is a storage format here, not a compute dtype.
# - Other in-place ops (add_, mul_, zero_, ...) compute on the dequantized value and write it back quantized with
#   the current scale, saturating. The scale is never recomputed in place: a scale is shared by every view of the
#   tensor, and rescaling through one view would change the values of the others. To rescale, quantize again.


def _dequantize_tree(tree: Any) -> Any:
    return pytree.tree_map_only(Float8Tensor, Float8Tensor.dequantize, tree)


def _rebuild(x: Float8Tensor, qdata: Tensor, scale: Tensor, granularity: Float8Granularity) -> Float8Tensor:
    return Float8Tensor(qdata, scale, x.orig_dtype, x.fp8_dtype, granularity)


def _arg(args: Args, kwargs: Kwargs, index: int, name: str, default: Any) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


# -- matmuls -----------------------------------------------------------------------------------------------------
_A_LAYOUTS = (Float8Granularity.TENSORWISE, Float8Granularity.ROWWISE)
_B_LAYOUTS = (Float8Granularity.TENSORWISE, Float8Granularity.COLWISE)


def _as_operand(x: Tensor, other: Tensor, layout: Float8Granularity) -> Float8Tensor:
    if isinstance(x, Float8Tensor):
        return x
    tensorwise = isinstance(other, Float8Tensor) and other.granularity is Float8Granularity.TENSORWISE
    return Float8Tensor.from_hp(x, granularity=Float8Granularity.TENSORWISE if tensorwise else layout)


def scaled_matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for 2-d operands, at least one a Float8Tensor; see Note [Float8 Op Semantics]."""
    if a.dtype != b.dtype:
        raise TypeError(f"Float8Tensor mm: operands stand for {a.dtype} and {b.dtype}; both must be the same dtype")
    fa = _as_operand(a, b, Float8Granularity.ROWWISE)
    fb = _as_operand(b, a, Float8Granularity.COLWISE)
    if fa.dim() == 2 and fb.dim() == 2 and fa.granularity in _A_LAYOUTS and fb.granularity in _B_LAYOUTS:
        return kernels.scaled_mm_op(fa.qdata, fb.qdata, fa.scale, fb.scale, fa.orig_dtype)
    return torch.mm(fa.dequantize(), fb.dequantize())


@implements(aten.mm)
def _mm(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Tensor:
    return scaled_matmul(args[0], args[1])


@implements(aten.addmm)
def _addmm(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Tensor:
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = _arg(args, kwargs, 3, "beta", 1), _arg(args, kwargs, 4, "alpha", 1)
    product = scaled_matmul(a, b)
    bias = bias.dequantize() if isinstance(bias, Float8Tensor) else bias
    return (bias if beta == 1 else bias * beta) + (product if alpha == 1 else product * alpha)


# -- views -------------------------------------------------------------------------------------------------------
def _axis(x: Float8Tensor) -> int | None:
    return x.granularity.reduced_axis(x.dim())


def _layout_view(
    x: Float8Tensor, what: str, data_op: Callable[[Tensor], Tensor], scale_op: Callable[[Tensor], Tensor], axis: int
) -> Float8Tensor:
    """Apply a view to qdata and to an axiswise scale, `axis` being where the reduced axis lands."""
    qdata = data_op(x.qdata)
    return _rebuild(x, qdata, scale_op(x.scale), granularity_for_axis(axis, qdata.dim(), what=what))


def _tensorwise_view(x: Float8Tensor, data_op: Callable[[Tensor], Tensor]) -> Float8Tensor:
    return _rebuild(x, data_op(x.qdata), x.scale, Float8Granularity.TENSORWISE)


@implements(aten.view, aten._unsafe_view)
def _view(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x, shape = args[0], args[1]
    qdata = func(x.qdata, shape)
    if x.granularity is Float8Granularity.TENSORWISE:
        return _rebuild(x, qdata, x.scale, x.granularity)
    kept = 1 if x.granularity is Float8Granularity.ROWWISE else 2
    if qdata.dim() < kept or tuple(qdata.shape[-kept:]) != tuple(x.shape[-kept:]):
        raise UnsupportedError(
            f"Float8Tensor: {func} from {tuple(x.shape)} to {tuple(qdata.shape)} changes the trailing dim(s) that a "
            f"{x.granularity.value} scale is laid out along; only the leading (row) dims may be reshaped. "
            "Dequantize first (x.to_original()) or use a tensorwise Float8Tensor"
        )
    scale_shape = (*qdata.shape[:-1], 1) if kept == 1 else (*qdata.shape[:-2], 1, qdata.shape[-1])
    return _rebuild(x, qdata, func(x.scale, scale_shape), x.granularity)


def _transposed(x: Float8Tensor, d0: int, d1: int) -> tuple[Callable[[Tensor], Tensor], int | None]:
    d0, d1 = d0 % max(x.dim(), 1), d1 % max(x.dim(), 1)
    axis = _axis(x)
    new_axis = d1 if axis == d0 else d0 if axis == d1 else axis
    return (lambda t: t.transpose(d0, d1)), new_axis


@implements(aten.transpose, aten.t)
def _transpose(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x = args[0]
    d0, d1 = (0, 1) if func.overloadpacket in (aten.t, aten.t_) or x.dim() < 2 else (args[1], args[2])
    if x.dim() < 2:
        return _rebuild(x, func(x.qdata), x.scale if _axis(x) is None else func(x.scale), x.granularity)
    op, axis = _transposed(x, d0, d1)
    if axis is None:
        return _tensorwise_view(x, op)
    return _layout_view(x, f"transpose({d0}, {d1})", op, op, axis)


@implements(aten.permute)
def _permute(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x = args[0]
    dims = [d % x.dim() for d in args[1]]
    axis = _axis(x)

    def op(t: Tensor) -> Tensor:
        return t.permute(dims)

    if axis is None:
        return _tensorwise_view(x, op)
    return _layout_view(x, f"permute({dims})", op, op, dims.index(axis))


@implements(aten.slice)
def _slice(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim", 0) % x.dim()
    start, end, step = (
        _arg(args, kwargs, i, n, d) for i, n, d in ((2, "start", None), (3, "end", None), (4, "step", 1))
    )

    def op(t: Tensor) -> Tensor:
        return func(t, dim, start, end, step)  # type: ignore[no-any-return]

    axis = _axis(x)
    if axis is None:
        return _tensorwise_view(x, op)
    # The reduced axis has size 1 in the scale: every element of the slice keeps that one scale.
    return _layout_view(x, "slice", op, (lambda t: t) if dim == axis else op, axis)


@implements(aten.select)
def _select(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x, dim, index = args[0], args[1] % args[0].dim(), args[2]
    axis = _axis(x)

    def op(t: Tensor) -> Tensor:
        return t.select(dim, index)

    if axis is None:
        return _tensorwise_view(x, op)
    if dim == axis:
        raise UnsupportedError(
            f"Float8Tensor: select({dim}, ...) on a {x.granularity.value} tensor picks one element per scale, which "
            "no layout expresses; dequantize first (x.to_original())"
        )
    return _layout_view(x, f"select({dim})", op, op, axis - 1 if dim < axis else axis)


@implements(aten.unsqueeze)
def _unsqueeze(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x = args[0]
    dim = args[1] % (x.dim() + 1)
    axis = _axis(x)

    def op(t: Tensor) -> Tensor:
        return t.unsqueeze(dim)

    if axis is None:
        return _tensorwise_view(x, op)
    return _layout_view(x, f"unsqueeze({dim})", op, op, axis + 1 if dim <= axis else axis)


@implements(aten.expand)
def _expand(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x, size = args[0], list(args[1])
    axis = _axis(x)

    def op(t: Tensor) -> Tensor:
        return t.expand(size)

    if axis is None:
        return _tensorwise_view(x, op)
    new_axis = axis + len(size) - x.dim()
    scale_size = [1 if d == new_axis else s for d, s in enumerate(size)]
    return _layout_view(x, "expand", op, lambda t: t.expand(scale_size), new_axis)


@implements(aten.as_strided)
def _as_strided(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x = args[0]
    if x.granularity is not Float8Granularity.TENSORWISE:
        raise UnsupportedError(
            f"Float8Tensor: as_strided on a {x.granularity.value} tensor cannot say which scale each element "
            "keeps; use a named view op (view, transpose, slice, ...) or a tensorwise Float8Tensor"
        )
    return _tensorwise_view(x, lambda t: func(t, *args[1:], **kwargs))


# In-place view ops: the out-of-place handler computes the result (and checks its layout); the inner tensors are
# then changed in place, as the base class's aliasing correction expects (it replays the op on the wrapper).
_INPLACE_VIEWS: dict[Any, tuple[OpHandler, OpOverload[..., Any]]] = {
    aten.t_: (_transpose, aten.t.default),
    aten.transpose_: (_transpose, aten.transpose.int),
    aten.unsqueeze_: (_unsqueeze, aten.unsqueeze.default),
    aten.as_strided_: (_as_strided, aten.as_strided.default),
}


@implements(*_INPLACE_VIEWS)
def _inplace_view(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Float8Tensor:
    x: Float8Tensor = args[0]
    handler, out_of_place = _INPLACE_VIEWS[func.overloadpacket]
    result: Float8Tensor = handler(out_of_place, args, kwargs)
    if result.granularity is not x.granularity:
        raise UnsupportedError(
            f"Float8Tensor: {func} would turn a {x.granularity.value} tensor {result.granularity.value}, and an "
            "in-place op cannot change a tensor's ctx; use the out-of-place op (x = x.t())"
        )
    func(x.qdata, *args[1:], **kwargs)
    if x.granularity is not Float8Granularity.TENSORWISE:
        func(x.scale, *args[1:], **kwargs)
    return x


# -- copies and conversions --------------------------------------------------------------------------------------
@implements(aten._to_copy)
def _to_copy(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Tensor:
    x = args[0]
    dtype = kwargs.get("dtype")
    inner_kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
    if dtype is not None and dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return func(x.dequantize(), **kwargs)  # type: ignore[no-any-return]
    qdata, scale = func(x.qdata, **inner_kwargs), func(x.scale, **inner_kwargs)
    return Float8Tensor(qdata, scale, x.orig_dtype if dtype is None else dtype, x.fp8_dtype, x.granularity)


@implements(aten.copy_)
def _copy_(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Tensor:
    dst, src = args[0], args[1]
    if not isinstance(dst, Float8Tensor):
        return func(dst, src.dequantize(), *args[2:], **kwargs)  # type: ignore[no-any-return]
    if isinstance(src, Float8Tensor) and src.__tensor_flatten__() == dst.__tensor_flatten__():
        func(dst.qdata, src.qdata, *args[2:], **kwargs)
        func(dst.scale, src.scale, *args[2:], **kwargs)
        return dst
    values = src.dequantize() if isinstance(src, Float8Tensor) else src
    _write_back(dst, values)
    return dst


@implements(aten.set_)
def _set_(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Tensor:
    dst, src = args[0], _arg(args, kwargs, 1, "source", None)
    same_ctx = isinstance(src, Float8Tensor) and src.__tensor_flatten__()[1] == dst.__tensor_flatten__()[1]
    if func is not aten.set_.source_Tensor or not same_ctx:
        raise UnsupportedError(
            f"Float8Tensor: {func} with a source of type {type(src).__name__}: set_ takes a Float8Tensor of the same "
            "ctx (orig_dtype, fp8_dtype, granularity) only, whose qdata and scale the target then aliases; "
            "use copy_ to write values"
        )
    for mine, theirs in ((dst.qdata, src.qdata), (dst.scale, src.scale)):
        if mine is not theirs:  # (set_ of a tensor to itself changes nothing below the wrapper: no inner write)
            func(mine, theirs)
    return dst  # type: ignore[no-any-return]  # args are untyped


def _write_back(dst: Float8Tensor, values: Tensor) -> None:
    """dst's qdata := values quantized with dst's current scale (saturating); see Note [Float8 Op Semantics]."""
    # Broadcasting: `values` may be smaller than dst (copy_ semantics) and the scale is laid out against dst.
    dst.qdata.copy_(quantize_with_scale(values, dst.scale, dst.fp8_dtype))


# -- the fallback ------------------------------------------------------------------------------------------------
def _dequantize_and_run(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    hp_args, hp_kwargs = _dequantize_tree((args, kwargs))
    return func(*hp_args, **hp_kwargs)


def _run_and_write_back(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    target = args[0]
    rest, hp_kwargs = _dequantize_tree((args[1:], kwargs))
    if not isinstance(target, Float8Tensor):
        func(target, *rest, **hp_kwargs)
        return target
    hp_target = target.dequantize()
    func(hp_target, *rest, **hp_kwargs)
    _write_back(target, hp_target)
    return target


def _writes_first_arg_only(func: OpOverload[..., Any]) -> bool:
    arguments: Sequence[Any] = func._schema.arguments
    written = [a for a in arguments if a.alias_info is not None and a.alias_info.is_write]
    return len(written) == 1 and written[0] is arguments[0] and len(func._schema.returns) == 1


def try_get_fallback(func: OpOverload[..., Any]) -> OpHandler | None:
    """The fallback for an op with no handler, or None; see Note [Float8 Op Semantics]."""
    schema = func._schema
    if not schema.is_mutable and all(r.alias_info is None for r in schema.returns):
        return _dequantize_and_run
    if torch.Tag.inplace in func.tags and _writes_first_arg_only(func):
        return _run_and_write_back
    return None


Float8Tensor.fallback_for = try_get_fallback
