"""Marks on instances, and the policy in force for a tensor derived from marks, hooks, torch's marks and defaults.

Input: a tensor or subclass instance (seen through `__tensor_flatten__` only), user policies by path, the default
kind for dims nobody spoke about. Output: a complete policy (`TensorPolicy`, or `SubclassSymbolicPolicy` with an
entry for every inner tensor), each dim stamped with its `Origin`. Invariants: marks live on the instance (attribute
`_subclassaot_policy`); torch's `_dynamo_dynamic_indices` is read, never written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, cast

import torch

from policies.errors import PolicyError
from policies.spec import (
    DimKind,
    DimPolicy,
    Origin,
    Policy,
    SubclassSymbolicPolicy,
    TensorPolicy,
    affine,
    dynamic,
    equal,
    inner,
    outer,
)
from policies.spec import marked as marked
from policies.spec import unspecified as unspecified

MARK_ATTR = "_subclassaot_policy"

# Note [Policy Precedence]
# For each tensor node (outer or inner) at source path p, the first of these that speaks decides, per dim:
#   1. a policy given for p by the user (`policies={p: ...}` at compile);
#   2. the entry for this attribute in the parent's policy (its own given policy, mark or hook);
#   3. marks on the instance (mark_dynamic / mark_static, possibly through the class's __tensor_mark_dynamic__);
#   4. torch's own marks (torch's mark_dynamic sets `_dynamo_dynamic_indices`, mark_static the static ones);
#   5. the compile's default: static (dynamic=False), dynamic (True) or automatic (None).
# A dim whose DimPolicy has origin DEFAULT is "unspecified": a mark that names dim 0 leaves dim 1 to the next rule.
# Marks and given policies win over the `dynamic` setting in every mode, as torch's mark_dynamic does.


class MarkDynamicHook(Protocol):
    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> SubclassSymbolicPolicy: ...


def nested_int_coeff(value: int | torch.SymInt) -> int | None:
    """The coefficient c of a nested int `c * j` (a jagged NestedTensor's ragged size or stride); None otherwise."""
    if isinstance(value, torch.SymInt) and value.node.is_nested_int():
        return int(value.node.nested_int_coeff())
    return None


def inner_tensors(x: torch.Tensor) -> tuple[tuple[str, torch.Tensor], ...] | None:
    """(attr, inner tensor) pairs of a traceable subclass through its `__tensor_flatten__`; None for a plain tensor."""
    if type(x) is torch.Tensor or not hasattr(type(x), "__tensor_flatten__"):
        return None
    if not hasattr(type(x), "__tensor_unflatten__"):
        return None
    attrs, _ = x.__tensor_flatten__()  # type: ignore[attr-defined]  # checked by hasattr above
    out: list[tuple[str, torch.Tensor]] = []
    for attr in attrs:
        value = getattr(x, attr)
        if isinstance(value, torch.Tensor):
            out.append((attr, value))
    return tuple(out)


def _normalize_dims(x: torch.Tensor, dims: int | Iterable[int] | None, what: str) -> tuple[int, ...]:
    raw = range(x.dim()) if dims is None else ((dims,) if isinstance(dims, int) else tuple(dims))
    out = []
    for d in raw:
        if x.dim() == 0 or not -x.dim() <= d < x.dim():
            raise PolicyError(
                f"{what}(x, {d}): x ({type(x).__name__} of shape {tuple(x.shape)}) has {x.dim()} dims, so dim {d} "
                f"does not exist; use a dim in [-{x.dim()}, {x.dim() - 1}]"
            )
        out.append(d % x.dim())
    return tuple(sorted(set(out)))


def _restamp(policy: Policy, origin: Origin) -> Policy:
    """Give every dim that says something (origin other than DEFAULT) the origin `origin`."""

    def dim(p: DimPolicy) -> DimPolicy:
        return p if p.origin is Origin.DEFAULT else p.with_origin(origin)

    def tensor(t: TensorPolicy) -> TensorPolicy:
        strides = None if t.strides is None else tuple(None if s is None else dim(s) for s in t.strides)
        return TensorPolicy(sizes=tuple(dim(s) for s in t.sizes), strides=strides)

    if isinstance(policy, TensorPolicy):
        return tensor(policy)
    return SubclassSymbolicPolicy(
        outer=tensor(policy.outer),
        inner={k: _restamp(v, origin) for k, v in policy.inner.items()},
        relations=policy.relations,
        share_outer_dims=policy.share_outer_dims,
    )


def _merge_tensor(old: TensorPolicy, new: TensorPolicy) -> TensorPolicy:
    if len(old.sizes) != len(new.sizes):
        return new
    sizes = tuple(n if n.origin is not Origin.DEFAULT else o for o, n in zip(old.sizes, new.sizes, strict=True))
    strides = new.strides if new.strides is not None else old.strides
    return TensorPolicy(sizes=sizes, strides=strides)


def merge(old: Policy | None, new: Policy) -> Policy:
    """`new` over `old`, dim by dim: a dim `new` leaves unspecified keeps what `old` said."""
    if old is None:
        return new
    if isinstance(old, TensorPolicy) and isinstance(new, TensorPolicy):
        return _merge_tensor(old, new)
    old_s = old if isinstance(old, SubclassSymbolicPolicy) else SubclassSymbolicPolicy(outer=old)
    new_s = new if isinstance(new, SubclassSymbolicPolicy) else SubclassSymbolicPolicy(outer=new)
    inner = dict(old_s.inner)
    for attr, p in new_s.inner.items():
        inner[attr] = merge(inner.get(attr), p)
    relations = (*old_s.relations, *(r for r in new_s.relations if r not in old_s.relations))
    return SubclassSymbolicPolicy(
        outer=_merge_tensor(old_s.outer, new_s.outer),
        inner=inner,
        relations=relations,
        share_outer_dims=new_s.share_outer_dims,
    )


def _default_mark(x: torch.Tensor, dims: tuple[int, ...], policy: DimPolicy) -> Policy:
    """The outer dims and, recursively, the same dims of every inner tensor of the same rank."""
    outer_policy = marked(x.dim(), dims, policy)
    inners = inner_tensors(x)
    if inners is None:
        return outer_policy
    inner = {attr: _default_mark(t, dims, policy) for attr, t in inners if t.dim() == x.dim()}
    return SubclassSymbolicPolicy(outer=outer_policy, inner=inner)


def get_mark(x: torch.Tensor) -> Policy | None:
    found = getattr(x, MARK_ATTR, None)
    return found if isinstance(found, TensorPolicy | SubclassSymbolicPolicy) else None


def mark_dynamic(x: torch.Tensor, dims: int | Iterable[int], *, min: int | None = None, max: int | None = None) -> None:
    """Mark `dims` of `x` dynamic (with an optional inclusive range). The mark lives on this instance.

    On a subclass: the class's `__tensor_mark_dynamic__(dims, min, max)` if it has one (torch's DTensor: the policy
    of policies.dtensor), else the outer dims and the same dims of every inner tensor of the same rank (recursively).
    """
    chosen = _normalize_dims(x, dims, "mark_dynamic")
    hook = getattr(type(x), "__tensor_mark_dynamic__", None)
    from policies.dtensor import dtensor_mark_dynamic, is_dtensor  # it imports this module

    if hook is None and is_dtensor(x):  # See Note [DTensor Dims Are Tied To Their Local Dims]
        new = _restamp(dtensor_mark_dynamic(x, chosen, min, max), Origin.HOOK)
    elif hook is not None and inner_tensors(x) is not None:
        result = cast("MarkDynamicHook", x).__tensor_mark_dynamic__(chosen, min, max)
        if not isinstance(result, SubclassSymbolicPolicy):
            raise PolicyError(
                f"{type(x).__name__}.__tensor_mark_dynamic__ returned {type(result).__name__}; it must return a "
                "SubclassSymbolicPolicy (outer=..., inner={attr: ...}, relations=[...])"
            )
        new = _restamp(result, Origin.HOOK)
    else:
        new = _default_mark(x, chosen, dynamic(min=min, max=max).with_origin(Origin.MARK))
    setattr(x, MARK_ATTR, merge(get_mark(x), new))


def mark_static(x: torch.Tensor, dims: int | Iterable[int] | None = None) -> None:
    """Mark `dims` (all by default) of `x`, and the same dims of same-rank inner tensors, static."""
    chosen = _normalize_dims(x, dims, "mark_static") if x.dim() else ()
    new = _default_mark(x, chosen, DimPolicy(kind=DimKind.STATIC, origin=Origin.MARK))
    setattr(x, MARK_ATTR, merge(get_mark(x), new))


def _torch_marks(x: torch.Tensor) -> TensorPolicy | None:
    dyn = getattr(x, "_dynamo_dynamic_indices", None)
    # torch's unguarded mark (the jagged NestedTensor sets it on its ragged dim and on `_values`' packed dim)
    propagated = getattr(x, "_dynamo_propagated_dynamic_indices", None)
    stat = getattr(x, "_dynamo_static_indices", None)
    if not dyn and not stat and not propagated:
        return None
    dyn_set = set(dyn) if isinstance(dyn, Iterable) else set()
    dyn_set |= set(propagated) if isinstance(propagated, Iterable) else set()
    stat_set = set(stat) if isinstance(stat, Iterable) else set()
    sizes = []
    for d in range(x.dim()):
        if d in dyn_set:
            sizes.append(dynamic().with_origin(Origin.TORCH_MARK))
        elif d in stat_set:
            sizes.append(DimPolicy(kind=DimKind.STATIC, origin=Origin.TORCH_MARK))
        else:
            sizes.append(unspecified())
    return TensorPolicy(sizes=tuple(sizes))


# Note [Jagged Layout Policy]
# A jagged NestedTensor (layout torch.jagged: torch's NJT, seen through its flatten dunders) has shape
# (B, ..., j, ...) with j at `ctx["ragged_idx"]`: a nested int that stands for the row lengths held in `_offsets`
# (or `_lengths`). It has no value to guard or to make a symbol of; it is dynamic by nature, and what it stands for
# is guarded through the inner tensors it comes from. Its class policy (below torch's marks in Note [Policy
# Precedence], above the default) says how the other sizes follow the outer ones:
#   _offsets.size(0) == size(0) + 1, _lengths.size(0) == size(0), and every non-ragged `_values` dim equals its
#   outer dim, so `mark_dynamic(nt, 0)` makes the batch dynamic everywhere with one symbol;
#   `_values`' packed dim (the total length) is dynamic: torch marks it (`_dynamo_propagated_dynamic_indices`), as it
#   marks the `(seqlen, 0)` min/max tensors' dim 0 (`_dynamo_dynamic_indices`);
#   the other outer dims (features) are static: they make the coefficient of the nested stride (Note [Nested Int
#   Dims]).
# So batches of other lengths reuse an entry; a new batch size recompiles once under automatic dynamic, never under
# mark_dynamic(nt, 0). `policies.plan` plans each nested int dim (size or stride `c * j`) as its coefficient c.


def _jagged_layout_policy(x: torch.Tensor) -> SubclassSymbolicPolicy | None:
    if x.layout != torch.jagged or not hasattr(type(x), "__tensor_flatten__"):
        return None
    attrs, ctx = x.__tensor_flatten__()  # type: ignore[attr-defined]  # checked by hasattr above
    ragged = ctx.get("ragged_idx") if isinstance(ctx, dict) else None
    values = getattr(x, "_values", None)
    if not isinstance(ragged, int) or "_values" not in attrs or "_offsets" not in attrs:
        return None
    if not isinstance(values, torch.Tensor) or values.dim() != x.dim() - 1:
        return None
    relations = [affine(inner("_offsets", 0), outer(0), offset=1)]
    if "_lengths" in attrs:
        relations.append(equal(inner("_lengths", 0), outer(0)))
    relations += [equal(inner("_values", d - 1), outer(d)) for d in range(1, x.dim()) if d != ragged]
    feature = DimPolicy(kind=DimKind.STATIC, origin=Origin.CLASS)
    return SubclassSymbolicPolicy(
        outer=TensorPolicy(sizes=tuple(unspecified() if d in (0, ragged) else feature for d in range(x.dim()))),
        relations=relations,
        share_outer_dims=False,
    )


def _fill_defaults(p: TensorPolicy, default: DimKind) -> TensorPolicy:
    def fill(d: DimPolicy) -> DimPolicy:
        return DimPolicy(kind=default, origin=Origin.DEFAULT) if d.origin is Origin.DEFAULT else d

    return TensorPolicy(sizes=tuple(fill(s) for s in p.sizes), strides=p.strides)


def _check_rank(policy: TensorPolicy, x: torch.Tensor, path: str) -> None:
    if len(policy.sizes) != x.dim():
        raise PolicyError(
            f"{path}: the policy {policy!r} has {len(policy.sizes)} dims but the tensor has {x.dim()} "
            f"(shape {tuple(x.shape)}); give one DimPolicy per dim"
        )


def derive_policy(
    x: torch.Tensor,
    path: str,
    *,
    given: Mapping[str, Policy] | None = None,
    default: DimKind = DimKind.STATIC,
    parent_entry: Policy | None = None,
) -> Policy:
    """The policy in force for `x` at `path`, complete and stamped (see Note [Policy Precedence])."""
    given = {} if given is None else given
    layers = [given.get(path), parent_entry, get_mark(x), _torch_marks(x), _jagged_layout_policy(x)]
    own: Policy = TensorPolicy(sizes=tuple(unspecified() for _ in range(x.dim())))
    for layer in reversed(layers):
        if layer is not None:
            own = merge(own, layer)
    inners = inner_tensors(x)
    if inners is None:
        if isinstance(own, SubclassSymbolicPolicy):
            raise PolicyError(
                f"{path}: a SubclassSymbolicPolicy was given for a plain {type(x).__name__}; "
                "use a TensorPolicy(sizes=...) for a plain tensor"
            )
        _check_rank(own, x, path)
        return _fill_defaults(own, default)
    own_s = own if isinstance(own, SubclassSymbolicPolicy) else SubclassSymbolicPolicy(outer=own)
    _check_rank(own_s.outer, x, path)
    names = [attr for attr, _ in inners]
    for attr in own_s.inner:
        if attr not in names:
            raise PolicyError(
                f"{path}: the policy names inner tensor {attr!r}, but {type(x).__name__}.__tensor_flatten__() gives "
                f"{names}; name one of those"
            )
    inner = {
        attr: derive_policy(t, f"{path}.{attr}", given=given, default=default, parent_entry=own_s.inner.get(attr))
        for attr, t in inners
    }
    from policies.dtensor import dtensor_relations, is_dtensor, uneven_dims  # it imports this module

    relations, outer_policy = own_s.relations, own_s.outer
    if is_dtensor(x):  # See Note [DTensor Dims Are Tied To Their Local Dims]
        relations = relations or tuple(dtensor_relations(x))
        keep = uneven_dims(x)
        outer_policy = TensorPolicy(
            sizes=tuple(
                DimPolicy(kind=DimKind.STATIC, origin=Origin.HOOK) if d in keep and p.origin is Origin.DEFAULT else p
                for d, p in enumerate(outer_policy.sizes)
            ),
            strides=outer_policy.strides,
        )
    return SubclassSymbolicPolicy(
        outer=_fill_defaults(outer_policy, default),
        inner=inner,
        relations=relations,
        share_outer_dims=own_s.share_outer_dims,
    )


def policy_for(
    x: torch.Tensor, path: str = "x", *, dynamic: bool | None = False, given: Mapping[str, Policy] | None = None
) -> Policy:
    """The policy in force for `x`: marks, class hooks, torch's marks, then the default for `dynamic`
    (False: static, True: dynamic, None: automatic)."""
    default = DimKind.AUTOMATIC if dynamic is None else (DimKind.DYNAMIC if dynamic else DimKind.STATIC)
    return derive_policy(x, path, given=given, default=default)
