"""JaggedTensor's op table: aten handlers (below autograd) and torch-function implementations (above it).

Input: JaggedTensors, dense tensors and scalars as PyTorch passes them to `__torch_dispatch__` / `__torch_function__`.
Output: JaggedTensors (ops that keep the rows: pointwise, linear, layer norm, softmax, views, in-place ops) or dense
tensors (reductions over the ragged dim, `to_padded`, `unbind`).
Invariants: no op reads offsets' data except the constructors named in Note [Jagged Ragged Size], `unbind`,
`from_padded` without total_length, and the eager same-rows check of Note [Jagged Same Rows]; every
JaggedTensor result keeps its input's offsets object and ragged size; the reductions, softmax and padding run the
`subclassaot_jagged` custom ops (one opaque node each under tracing). See Note [Jagged Ops Above Autograd].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch import Tensor
from torch._ops import OpOverload

from subclassaot.errors import UnsupportedError
from subclasses.nested import kernels
from subclasses.nested.tensor import (
    JaggedTensor,
    as_2d,
    from_padded,
    from_padded_like,
    jagged,
    jagged_like,
    max_row_length,
    readable,
    rewrap,
    size_arg,
    to_padded,
    validate_rows,
    values_of,
)

aten = torch.ops.aten
Args = tuple[Any, ...]
Kwargs = dict[str, Any]

# Note [Jagged Ops Above Autograd]
# An aten op reaches __torch_dispatch__ below autograd, so autograd differentiates it with its own formula at the
# wrapper level. For pointwise ops that formula is pointwise too and the gradient is a JaggedTensor. For reductions
# over the ragged dim, softmax, linear (a CompositeImplicit op that would reshape (B, R, D) to (B * R, D)) and
# padding, it is not: SumBackward expands a dense (B, D) grad to a dense (B, R, D). Those ops are therefore taken
# in `__torch_function__` and written on the values: `values_of(x)` (an autograd.Function whose backward wraps the
# values' gradient with x's offsets) -> dense ops / custom ops with autograd formulas -> `jagged_like(x, values)`
# (whose backward unwraps). Autograd then sees only dense values and the kernels' formulas. Reductions still have
# aten handlers, for the reductions autograd itself runs (`sum_to_size` of a broadcast dense operand's grad).
# Rows with holes (`lengths`): reductions and softmax mask the hole positions with the reduction's identity first,
# then run the kernels over each row's whole slot (Note [Empty Jagged Rows] in reference.py).


# -- row bookkeeping -----------------------------------------------------------------------------------------------
def row_ids(x: JaggedTensor) -> Tensor:
    """The row of every packed position, (total_length,) int64 (sizes from shapes only: traceable)."""
    slots = x.offsets[1:] - x.offsets[:-1]
    batch = torch.arange(x.offsets.shape[0] - 1, device=x.offsets.device)
    return torch.repeat_interleave(batch, slots, output_size=x.flat_values.shape[0])


def valid_mask(x: JaggedTensor) -> Tensor | None:
    """(total_length,) bool: the positions inside rows (None when x has no holes)."""
    if x.lengths is None:
        return None
    rows = row_ids(x)
    positions = torch.arange(x.flat_values.shape[0], device=rows.device) - x.offsets[rows]
    return positions < x.lengths[rows]


def _masked(x: JaggedTensor, values: Tensor, fill: float) -> Tensor:
    mask = valid_mask(x)
    if mask is None:
        return values
    mask = mask.view(-1, *([1] * (values.dim() - 1)))
    return torch.where(mask, values, torch.full((), fill, dtype=values.dtype, device=values.device))


def _dense_operand(ref: JaggedTensor, t: Tensor) -> Tensor:
    """A dense operand of a pointwise op as a (total_length, *features)-broadcastable tensor."""
    n_features = ref.dim() - 2
    if t.dim() <= n_features:
        return t
    if t.dim() == ref.dim() and t.shape[1] == 1:
        per_row = t.reshape(t.shape[0], *t.shape[2:])
        return per_row[0] if t.shape[0] == 1 else per_row[row_ids(ref)]
    raise UnsupportedError(
        f"JaggedTensor {tuple(ref.shape)}: a dense operand of shape {tuple(t.shape)} does not broadcast against the "
        f"rows without padding; give one of shape (*features) = {tuple(ref.shape[2:])} or (batch, 1, *features), "
        "or pad first: x.to_padded(0.0)"
    )


def _check_same_rows(ref: JaggedTensor, other: JaggedTensor, what: object) -> None:
    if other is not ref and not ref.same_rows(other):
        raise ValueError(
            f"{what}: JaggedTensors with different rows (offsets {tuple(ref.offsets.shape)} vs "
            f"{tuple(other.offsets.shape)}) cannot be combined position by position; see Note [Jagged Same Rows]"
        )


def _first_jagged(tree: object) -> JaggedTensor:
    for leaf in pytree.tree_leaves(tree):
        if isinstance(leaf, JaggedTensor):
            return leaf
    raise AssertionError("BUG: a JaggedTensor handler was called without a JaggedTensor")


# -- aten handlers (below autograd) --------------------------------------------------------------------------------
def _on_values(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> tuple[JaggedTensor, Any]:
    ref = _first_jagged((args, kwargs))

    def convert(t: Tensor) -> Tensor:
        if isinstance(t, JaggedTensor):
            _check_same_rows(ref, t, func)
            return t.flat_values
        return _dense_operand(ref, t)

    new_args, new_kwargs = pytree.tree_map_only(Tensor, convert, (args, kwargs))
    return ref, func(*new_args, **new_kwargs)


def pointwise(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    """Any op tagged pointwise: run on the values (other jagged operands must have the same rows)."""
    if any(a.is_out for a in func._schema.arguments):
        raise UnsupportedError(f"JaggedTensor: out= variants ({func}) are not supported; use the functional op")
    if func._schema.is_mutable:
        if not isinstance(args[0], JaggedTensor):
            raise UnsupportedError(f"{func}: an in-place op on a dense tensor cannot take a JaggedTensor operand")
        _on_values(func, args, kwargs)
        return args[0]
    ref, out = _on_values(func, args, kwargs)
    return rewrap(ref, out)


JaggedTensor.pointwise_handler = pointwise


@JaggedTensor.implements(aten.fill_, aten.zero_)
def _inplace_values(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    _on_values(func, args, kwargs)
    return args[0]


@JaggedTensor.implements(aten.copy_)
def _copy_(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    dst, src = args[0], args[1]
    if not isinstance(dst, JaggedTensor):
        raise UnsupportedError("copy_ of a JaggedTensor into a dense tensor: use x.to_padded() first")
    if isinstance(src, JaggedTensor):
        _check_same_rows(dst, src, func)
    value = src.flat_values if isinstance(src, JaggedTensor) else _dense_operand(dst, src)
    dst.flat_values.copy_(value, *args[2:], **kwargs)
    return dst


@JaggedTensor.implements(aten.detach, aten.alias, aten.clone, aten.contiguous)
def _copy_like(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: JaggedTensor = args[0]
    values = func(x.flat_values, *args[1:], **kwargs)
    if func.overloadpacket is aten.clone:
        lengths = None if x.lengths is None else x.lengths.clone()
        return JaggedTensor(values, x.offsets.clone(), x.ragged_size_tensor.clone(), lengths)
    return rewrap(x, values)


@JaggedTensor.implements(aten._to_copy)
def _to_copy(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: JaggedTensor = args[0]
    values = func(x.flat_values, **kwargs)
    device = values.device
    if device == x.offsets.device:
        return rewrap(x, values)
    lengths = None if x.lengths is None else x.lengths.to(device)
    return JaggedTensor(values, x.offsets.to(device), x.ragged_size_tensor.to(device), lengths)


@JaggedTensor.implements(aten.zeros_like, aten.ones_like, aten.empty_like, aten.full_like, aten.rand_like)
def _like(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: JaggedTensor = args[0]
    kwargs = {k: v for k, v in kwargs.items() if k != "memory_format"}
    return jagged_like(x, func(x.flat_values, *args[1:], **kwargs))


@JaggedTensor.implements(aten.view, aten._unsafe_view)
def _view(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: JaggedTensor = args[0]
    shape = list(args[1])
    if len(shape) < 2 or not (shape[0] == x.shape[0] and shape[1] == x.shape[1]):
        raise UnsupportedError(
            f"JaggedTensor {tuple(x.shape)}.view{tuple(shape)}: only the feature dims can be reshaped (batch and "
            "ragged dims stay); reshape the padded tensor instead: x.to_padded(0.0).view(...)"
        )
    values = func(x.flat_values, [x.flat_values.shape[0], *shape[2:]])
    return rewrap(x, values)


@JaggedTensor.implements(aten.is_same_size)
def _is_same_size(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> bool:
    return tuple(args[0].shape) == tuple(args[1].shape)


@JaggedTensor.implements(aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.amax.default)
def _reduce_aten(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    name = func.overloadpacket.__name__
    if func is aten.sum.default:
        return reduce(name, args[0], None, False, kwargs.get("dtype"))
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return reduce(name, args[0], dims, bool(keepdim), kwargs.get("dtype"))


# -- reductions ----------------------------------------------------------------------------------------------------
_IDENTITY = {"sum": 0.0, "mean": 0.0, "amax": float("-inf")}
_ROW_OPS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "sum": kernels.jagged_sum_op,
    "mean": kernels.jagged_mean_op,
    "amax": kernels.jagged_amax_op,
}


def _normalize_dims(x: JaggedTensor, dims: int | Sequence[int] | None) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, Sequence) and len(dims) == 0):
        return tuple(range(x.dim()))
    chosen = (dims,) if isinstance(dims, int) else tuple(dims)
    return tuple(sorted({d % x.dim() for d in chosen}))


def reduce(name: str, x: JaggedTensor, dims: int | Sequence[int] | None, keepdim: bool, dtype: object) -> Tensor:
    """sum / mean / amax of x over `dims`: a JaggedTensor over feature dims only, else a dense tensor."""
    chosen = _normalize_dims(x, dims)
    values = values_of(x)
    if isinstance(dtype, torch.dtype):
        values = values.to(dtype)
    feature_dims = [d - 1 for d in chosen if d >= 2]  # dims of the values
    if 1 not in chosen:
        if 0 in chosen:
            raise UnsupportedError(f"JaggedTensor.{name} over the batch dim alone has no meaning; add dim 1 too")
        return jagged_like(x, _dense_reduce(name, values, feature_dims, keepdim))
    values = _masked(x, values, _IDENTITY[name])
    if 0 in chosen:
        out = _reduce_all_rows(name, x, values)  # (*features)
        out = _dense_reduce(name, out, [d - 1 for d in feature_dims], keepdim)
        return out.reshape(1, 1, *out.shape) if keepdim else out
    out = _reduce_rows(name, x, values)  # (B, *features)
    out = _dense_reduce(name, out, feature_dims, keepdim)
    return out.unsqueeze(1) if keepdim else out


def _dense_reduce(name: str, t: Tensor, dims: Sequence[int], keepdim: bool) -> Tensor:
    if not dims:
        return t
    if name == "amax":
        return t.amax(tuple(dims), keepdim)
    return t.sum(tuple(dims), keepdim) if name == "sum" else t.mean(tuple(dims), keepdim)


def _reduce_all_rows(name: str, x: JaggedTensor, values: Tensor) -> Tensor:
    if name == "amax":
        return values.amax(0)
    total = values.sum(0)
    if name == "sum":
        return total
    count = x.row_lengths().sum() if x.lengths is not None else values.shape[0]
    return total / count


def _reduce_rows(name: str, x: JaggedTensor, values: Tensor) -> Tensor:
    features = values.shape[1:]
    flat = as_2d(values)
    if name == "amax" and flat.requires_grad:
        # The amax kernel has no autograd formula: go through padding (to_padded has one).
        ragged = x.shape[1]
        width = ragged if ragged != 0 else 1  # a symbolic R is >= 2: no guard
        padded = kernels.jagged_to_padded_op(flat, x.offsets, size_arg(width), float("-inf"))
        out = padded.amax(1)
    elif name == "mean" and x.lengths is not None:
        out = kernels.jagged_sum_op(flat, x.offsets) / x.lengths.to(flat.dtype)[:, None]
    else:
        out = _ROW_OPS[name](flat, x.offsets)
    return out.reshape(out.shape[0], *features)


def _reduction_call(name: str) -> Callable[..., Tensor]:
    def impl(x: JaggedTensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> Tensor:
        return reduce(name, x, dim, keepdim, dtype)

    impl.__name__ = f"jagged_{name}"
    return impl


JaggedTensor.function(torch.sum, Tensor.sum)(_reduction_call("sum"))
JaggedTensor.function(torch.mean, Tensor.mean)(_reduction_call("mean"))
JaggedTensor.function(torch.amax, Tensor.amax)(_reduction_call("amax"))


# -- softmax, linear, layer norm -----------------------------------------------------------------------------------
@JaggedTensor.function(torch.softmax, Tensor.softmax, F.softmax)
def softmax(x: JaggedTensor, dim: int, *args: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> JaggedTensor:
    """Softmax over the ragged dim (each row's positions, per feature) or over a feature dim."""
    dtype = dtype if dtype is not None else next((a for a in args if isinstance(a, torch.dtype)), None)
    values = values_of(x) if dtype is None else values_of(x).to(dtype)
    dim = dim % x.dim()
    if dim == 0:
        raise UnsupportedError(
            "JaggedTensor.softmax over the batch dim is not supported; use dim=1 (ragged) or a feature dim"
        )
    if dim >= 2:
        return jagged_like(x, torch.softmax(values, dim - 1))
    # Holes get the lowest finite value, not -inf: a row that is all hole then stays finite (and is masked below).
    probs = kernels.jagged_softmax_op(as_2d(_masked(x, values, torch.finfo(values.dtype).min)), x.offsets)
    return jagged_like(x, _masked(x, probs.reshape(values.shape), 0.0))


def softmax_pool(x: JaggedTensor) -> Tensor:
    """(B, *features): `(x.softmax(1) * x).sum(1)`, the softmax over the ragged dim weighting x itself.

    One fused kernel (`subclassaot_jagged::softmax_pool`) instead of a softmax, a product and a sum; rows with holes
    take that composite path. See Note [Fused Softmax Pool].
    """
    if x.dim() < 2:
        raise UnsupportedError(f"softmax_pool: x must be a JaggedTensor of >= 2 dims (B, R, ...); got {x.dim()}-d")
    if x.lengths is not None:
        return (x.softmax(1) * x).sum(1)
    values = values_of(x)
    out = kernels.jagged_softmax_pool_op(as_2d(values), x.offsets)
    return out.reshape(out.shape[0], *values.shape[1:])


@JaggedTensor.function(F.linear)
def linear(x: JaggedTensor, weight: Tensor, bias: Tensor | None = None) -> JaggedTensor:
    """`x @ weight.T + bias` over the last feature dim."""
    if isinstance(weight, JaggedTensor):
        raise UnsupportedError("F.linear with a JaggedTensor weight is not supported; the input may be jagged")
    return jagged_like(x, F.linear(values_of(x), weight, bias))


@JaggedTensor.function(torch.matmul, Tensor.matmul, Tensor.__matmul__)
def matmul(x: JaggedTensor, other: Tensor) -> JaggedTensor:
    """`x @ other` for a dense 2-d `other` (over the last feature dim)."""
    if isinstance(other, JaggedTensor) or other.dim() != 2:
        raise UnsupportedError("JaggedTensor matmul: only jagged @ dense 2-d matrix is supported")
    return jagged_like(x, values_of(x) @ other)


@JaggedTensor.function(F.layer_norm, torch.layer_norm)
def layer_norm(
    x: JaggedTensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    *args: Any,
) -> JaggedTensor:
    """Layer norm over trailing feature dims (never over the ragged dim)."""
    if len(normalized_shape) > x.dim() - 2:
        raise UnsupportedError("JaggedTensor layer_norm: normalized_shape may only cover feature dims")
    return jagged_like(x, F.layer_norm(values_of(x), list(normalized_shape), weight, bias, eps))


@JaggedTensor.function(Tensor.unbind, torch.unbind)
def unbind(x: JaggedTensor, dim: int = 0) -> tuple[Tensor, ...]:
    """Per-row tensors (len_i, *features), views of the values; reads the offsets (a device sync)."""
    if dim != 0:
        raise UnsupportedError("JaggedTensor.unbind: only dim=0 (one tensor per row) is supported")
    if not readable(x.offsets):
        raise UnsupportedError(
            "JaggedTensor.unbind reads the row offsets, which hold no data under tracing; unbind outside the "
            "compiled function, or use to_padded()"
        )
    values = values_of(x)
    starts, lens = x.offsets[:-1].tolist(), x.row_lengths().tolist()
    return tuple(values[s : s + n] for s, n in zip(starts, lens, strict=True))


__all__ = [
    "from_padded",
    "from_padded_like",
    "jagged",
    "jagged_like",
    "layer_norm",
    "linear",
    "matmul",
    "max_row_length",
    "pointwise",
    "reduce",
    "rewrap",
    "row_ids",
    "softmax",
    "to_padded",
    "unbind",
    "valid_mask",
    "validate_rows",
    "values_of",
]
