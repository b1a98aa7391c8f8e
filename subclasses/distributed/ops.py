"""`ShardedTensor`'s op table: run each op on local tensors after bringing arguments to the placements a rule says.

Purpose: handlers convert arguments (plain tensors count as Replicate), ask a rule in `propagation.py` for a
`Decision`, redistribute local tensors as decided (below autograd: these are value-preserving, see Note
[Redistribute Backward] in tensor.py for the user-facing autograd Function), run the aten op on the local tensors
and wrap the result with its placement and global size. The global size of a result is its local size except
along the output's Shard dim, whose global length the handler knows from its inputs (no size lives in ctx).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import torch
import torch.utils._pytree as pytree
from torch._ops import OpOverload

from subclassaot.errors import UnsupportedError
from subclasses.distributed import collectives, propagation
from subclasses.distributed.mesh import MeshSpec
from subclasses.distributed.placement import Partial, Placement, Replicate, Shard, ShardingSpec
from subclasses.distributed.propagation import Linearity
from subclasses.distributed.tensor import ShardedTensor, rewrap

aten = torch.ops.aten
Args: TypeAlias = tuple[Any, ...]
Kwargs: TypeAlias = dict[str, Any]
Dim: TypeAlias = "int | torch.SymInt"


def _spec(args: Args, kwargs: Kwargs) -> ShardingSpec:
    specs = {x.spec.mesh: x.spec for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, ShardedTensor)}
    if len(specs) != 1:
        raise UnsupportedError(f"ShardedTensor: an op mixes tensors on different meshes {sorted(map(str, specs))}")
    return next(iter(specs.values()))


def _placement(t: torch.Tensor) -> Placement:
    return t.spec.placement if isinstance(t, ShardedTensor) else Replicate()


def _local_as(t: torch.Tensor, placement: Placement, mesh: MeshSpec) -> torch.Tensor:
    """`t`'s local tensor under `placement` (a plain tensor is the Replicate global tensor)."""
    if isinstance(t, ShardedTensor):
        return collectives.redistribute_local(t.local, t.shape, t.spec.placement, placement, mesh)
    return collectives.redistribute_local(t, t.shape, Replicate(), placement, mesh)


def _wrap(local: torch.Tensor, spec: ShardingSpec, placement: Placement, shard_len: Dim | None) -> ShardedTensor:
    size: list[Dim] = list(local.shape)
    if isinstance(placement, Shard):
        assert shard_len is not None, "BUG: a Shard result needs its global length"
        size[placement.dim] = shard_len
    return rewrap(local, spec.with_placement(placement), size)


# -- pointwise ---------------------------------------------------------------------------------------------------
_ADDITIVE = (aten.add.Tensor, aten.sub.Tensor)
_MULTIPLICATIVE = (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.neg.default)
_NONLINEAR = (
    aten.add.Scalar,
    aten.sub.Scalar,
    aten.relu.default,
    aten.gelu.default,
    aten.gelu_backward.default,
    aten.threshold_backward.default,
    aten.silu.default,
    aten.silu_backward.default,
    aten.sigmoid.default,
    aten.sigmoid_backward.default,
    aten.tanh.default,
    aten.tanh_backward.default,
    aten.exp.default,
    aten.log.default,
    aten.sqrt.default,
    aten.rsqrt.default,
    aten.abs.default,
    aten.pow.Tensor_Scalar,
    aten.pow.Tensor_Tensor,
    aten.where.self,
    aten.maximum.default,
    aten.minimum.default,
    aten.eq.Tensor,
    aten.eq.Scalar,
    aten.gt.Scalar,
    aten.lt.Scalar,
    aten.le.Scalar,
    aten.ge.Scalar,
)


def _linearity(func: OpOverload[..., Any], args: Args, tensors: Sequence[torch.Tensor]) -> Linearity:
    if func in _ADDITIVE:
        # P + 1 would add 1 once per rank: only tensor-tensor sums of Partials stay Partial.
        return Linearity.ADDITIVE if len(tensors) == 2 else Linearity.NONE
    if func in _MULTIPLICATIVE:
        divides_by_partial = func is aten.div.Tensor and isinstance(_placement(args[1]), Partial)
        return Linearity.NONE if divides_by_partial else Linearity.MULTIPLICATIVE
    return Linearity.NONE


def _tensor_slots(args: Args, kwargs: Kwargs) -> tuple[list[Any], pytree.TreeSpec, list[int]]:
    flat, tree = pytree.tree_flatten((args, kwargs))
    return flat, tree, [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]


@ShardedTensor.implements(*_ADDITIVE, *_MULTIPLICATIVE, *_NONLINEAR)
def _pointwise(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    spec = _spec(args, kwargs)
    flat, tree, slots = _tensor_slots(args, kwargs)
    tensors = [flat[i] for i in slots]
    shapes = [tuple(t.shape) for t in tensors]
    out_ndim = max(len(s) for s in shapes)
    placements = [_placement(t) for t in tensors]
    decision = propagation.pointwise(placements, shapes, out_ndim, _linearity(func, args, tensors))
    for i, t, p in zip(slots, tensors, decision.inputs, strict=True):
        flat[i] = _local_as(t, p, spec.mesh)
    inner_args, inner_kwargs = pytree.tree_unflatten(flat, tree)
    out = func(*inner_args, **inner_kwargs)
    shard_len = None
    if isinstance(decision.output, Shard):
        d = decision.output.dim
        lengths = [s[d - (out_ndim - len(s))] for s, p in zip(shapes, decision.inputs, strict=True)]
        shard_len = next(n for n, p in zip(lengths, decision.inputs, strict=True) if isinstance(p, Shard))
    return _wrap(out, spec, decision.output, shard_len)


_INPLACE: dict[OpOverload[..., Any], Linearity] = {
    aten.add_.Tensor: Linearity.ADDITIVE,
    aten.sub_.Tensor: Linearity.ADDITIVE,
    aten.mul_.Tensor: Linearity.MULTIPLICATIVE,
    aten.mul_.Scalar: Linearity.MULTIPLICATIVE,
    aten.div_.Tensor: Linearity.MULTIPLICATIVE,
    aten.div_.Scalar: Linearity.MULTIPLICATIVE,
    aten.copy_.default: Linearity.ADDITIVE,
    aten.addcmul_.default: Linearity.NONE,
    aten.addcdiv_.default: Linearity.NONE,
}


@ShardedTensor.implements(*_INPLACE)
def _inplace(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    """`self` keeps its placement: the other tensor arguments are brought to it (see `_inplace_targets`)."""
    self = args[0]
    if not isinstance(self, ShardedTensor):
        raise UnsupportedError(f"{func}: writing a ShardedTensor into a plain tensor; call .full_tensor() first")
    spec = self.spec
    flat, tree, slots = _tensor_slots(args[1:], kwargs)
    scalars = len(pytree.tree_leaves((args[1:], kwargs))) > len(slots) and func in (aten.add_.Tensor, aten.sub_.Tensor)
    for i in slots:
        target = _inplace_target(func, self, flat[i], scalars)
        flat[i] = _local_as(flat[i], target, spec.mesh)
    rest, inner_kwargs = pytree.tree_unflatten(flat, tree)
    func(self.local, *rest, **inner_kwargs)
    return self


def _inplace_target(func: OpOverload[..., Any], self: ShardedTensor, other: torch.Tensor, scalars: bool) -> Placement:
    p = self.spec.placement
    if isinstance(p, Shard):
        offset = self.dim() - other.dim()
        local_dim = p.dim - offset
        return Replicate() if local_dim < 0 or other.shape[local_dim] == 1 else Shard(local_dim)
    if isinstance(p, Replicate):
        return Replicate()
    linearity = _INPLACE[func]
    if linearity is Linearity.ADDITIVE and not scalars:
        return Partial()
    if linearity is Linearity.MULTIPLICATIVE and not isinstance(_placement(other), Partial):
        return Replicate()
    raise UnsupportedError(
        f"ShardedTensor: {func} on a Partial tensor is not linear in it; redistribute it first: "
        "x = x.redistribute((Replicate(),))"
    )


@ShardedTensor.implements(aten.zero_.default, aten.fill_.Scalar)
def _fill(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    self: ShardedTensor = args[0]
    partial_elsewhere = isinstance(self.spec.placement, Partial) and self.mesh.rank != 0
    if func is aten.fill_.Scalar and partial_elsewhere:
        self.local.zero_()  # a Partial constant lives on rank 0 only
    else:
        func(self.local, *args[1:], **kwargs)
    return self


# -- shape-preserving copies and factories ---------------------------------------------------------------------
@ShardedTensor.implements(
    aten.detach.default, aten.clone.default, aten.alias.default, aten._to_copy.default, aten.contiguous.default
)
def _same_layout(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    return rewrap(func(x.local, *args[1:], **kwargs), x.spec, x.shape)


@ShardedTensor.implements(aten.zeros_like.default, aten.empty_like.default)
def _like(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    return _same_layout(func, args, kwargs)


@ShardedTensor.implements(aten.ones_like.default, aten.full_like.default)
def _like_nonzero(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    placement = Replicate() if isinstance(x.spec.placement, Partial) else x.spec.placement
    return rewrap(func(x.local, *args[1:], **kwargs), x.spec.with_placement(placement), x.shape)


@ShardedTensor.implements(
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_empty.default,
    aten.new_full.default,
    aten.new_empty_strided.default,
)
def _new(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    local = func(x.local, *args[1:], **kwargs)
    return rewrap(local, x.spec.with_placement(Replicate()), local.shape)


@ShardedTensor.implements(aten.is_same_size.default)
def _is_same_size(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> bool:
    return bool(args[0].shape == args[1].shape)


# -- matmul ------------------------------------------------------------------------------------------------------
def _matmul(spec: ShardingSpec, a: torch.Tensor, b: torch.Tensor, batched: bool) -> ShardedTensor:
    rule = propagation.bmm if batched else propagation.mm
    decision = rule(_placement(a), _placement(b))
    a_local = _local_as(a, decision.inputs[0], spec.mesh)
    b_local = _local_as(b, decision.inputs[1], spec.mesh)
    out = (aten.bmm if batched else aten.mm)(a_local, b_local)
    lengths = (a.shape[0], a.shape[-2], b.shape[-1]) if batched else (a.shape[0], b.shape[1])
    shard_len = lengths[decision.output.dim] if isinstance(decision.output, Shard) else None
    return _wrap(out, spec, decision.output, shard_len)


@ShardedTensor.implements(aten.mm.default, aten.bmm.default)
def _mm(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    return _matmul(_spec(args, kwargs), args[0], args[1], func is aten.bmm.default)


@ShardedTensor.implements(aten.addmm.default)
def _addmm(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    bias, a, b = args[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    product = _matmul(_spec(args, kwargs), a, b, batched=False)
    scaled_bias = bias if beta == 1 else aten.mul.Tensor(bias, beta)
    scaled = product if alpha == 1 else aten.mul.Tensor(product, alpha)
    return _pointwise(aten.add.Tensor, (scaled_bias, scaled), {})


# -- reductions --------------------------------------------------------------------------------------------------
def _reduce_args(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> tuple[list[int] | None, bool, Kwargs]:
    x = args[0]
    if func in (aten.sum.default, aten.mean.default):
        return None, False, {"dtype": kwargs.get("dtype", args[1] if len(args) > 1 else None)}
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dtype = args[3] if len(args) > 3 else kwargs.get("dtype")
    return (None if dims is None or len(dims) == 0 else [d % x.dim() for d in dims]), bool(keepdim), {"dtype": dtype}


@ShardedTensor.implements(aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim)
def _reduce(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    dims, keepdim, extra = _reduce_args(func, args, kwargs)
    placement = propagation.reduction(x.spec.placement, x.dim(), dims, keepdim)
    all_dims = list(range(x.dim())) if dims is None else dims
    local = aten.sum.dim_IntList(x.local, all_dims, keepdim, **extra)
    if func.overloadpacket is aten.mean:
        count: Dim = math.prod([x.shape[d] for d in all_dims])
        local = aten.div.Tensor(local, count)
    source = x.spec.placement
    shard_len = x.shape[source.dim] if isinstance(placement, Shard) and isinstance(source, Shard) else None
    return _wrap(local, x.spec, placement, shard_len)


# -- views -------------------------------------------------------------------------------------------------------
ViewRule: TypeAlias = Callable[[ShardedTensor, Args], Placement]


def _view_rules() -> dict[OpOverload[..., Any], ViewRule]:
    def transpose(x: ShardedTensor, args: Args) -> Placement:
        return propagation.transpose(x.spec.placement, args[0] % x.dim(), args[1] % x.dim())

    def t(x: ShardedTensor, args: Args) -> Placement:
        return propagation.transpose(x.spec.placement, 0, 1) if x.dim() == 2 else x.spec.placement

    def unsqueeze(x: ShardedTensor, args: Args) -> Placement:
        return propagation.unsqueeze(x.spec.placement, args[0] % (x.dim() + 1))

    def expand(x: ShardedTensor, args: Args) -> Placement:
        p = x.spec.placement
        return Shard(p.dim + len(args[0]) - x.dim()) if isinstance(p, Shard) else p

    def same(x: ShardedTensor, args: Args) -> Placement:
        return x.spec.placement

    def permute(x: ShardedTensor, args: Args) -> Placement:
        return propagation.permute(x.spec.placement, args[0])

    return {
        aten.transpose.int: transpose,
        aten.t.default: t,
        aten.unsqueeze.default: unsqueeze,
        aten.expand.default: expand,
        aten.permute.default: permute,
        aten.slice.Tensor: same,
        aten.transpose_.default: transpose,
        aten.t_.default: t,
        aten.unsqueeze_.default: unsqueeze,
    }


_VIEW_RULES = _view_rules()


def _touches_shard(func: OpOverload[..., Any], x: ShardedTensor, args: Args) -> bool:
    p = x.spec.placement
    if not isinstance(p, Shard):
        return False
    if func is aten.slice.Tensor:
        return bool((args[0] if args else 0) % x.dim() == p.dim)
    if func is aten.expand.default:
        sizes = args[0]
        return sizes[p.dim + len(sizes) - x.dim()] not in (-1, x.shape[p.dim])
    return False


@ShardedTensor.implements(*_VIEW_RULES)
def _view_op(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    if _touches_shard(func, x, args[1:]):
        x = _gathered(x)
    placement = _VIEW_RULES[func](x, args[1:])
    rest = list(args[1:])
    if func is aten.expand.default and isinstance(placement, Shard):
        rest[0] = [*rest[0][: placement.dim], -1, *rest[0][placement.dim + 1 :]]
    if func in (aten.transpose_.default, aten.t_.default, aten.unsqueeze_.default):
        func(x.local, *rest, **kwargs)
        object.__setattr__(x, "spec", x.spec.with_placement(placement))
        return x
    local = func(x.local, *rest, **kwargs)
    shard_len = x.shape[x.spec.placement.dim] if isinstance(x.spec.placement, Shard) else None
    return _wrap(local, x.spec, placement, shard_len)


def _gathered(x: ShardedTensor) -> ShardedTensor:
    local = collectives.redistribute_local(x.local, x.shape, x.spec.placement, Replicate(), x.mesh)
    return rewrap(local, x.spec.with_placement(Replicate()), x.shape)


def _resolve_size(numel: Dim, size: Sequence[Dim]) -> list[Dim]:
    known = [s for s in size if not (isinstance(s, int) and s == -1)]
    if len(known) == len(size):
        return list(size)
    missing = numel // math.prod(known)
    return [missing if isinstance(s, int) and s == -1 else s for s in size]


@ShardedTensor.implements(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(func: OpOverload[..., Any], args: Args, kwargs: Kwargs) -> Any:
    x: ShardedTensor = args[0]
    size = _resolve_size(x.numel(), args[1])
    placement = propagation.view(x.spec.placement, tuple(x.shape), size, x.mesh.world_size)
    if placement is None:
        x = _gathered(x)
        placement = Replicate()
    local_size = list(size)
    if isinstance(placement, Shard):
        local_size[placement.dim] = -1
    local = func(x.local, local_size)
    return _wrap(local, x.spec, placement, size[placement.dim] if isinstance(placement, Shard) else None)
