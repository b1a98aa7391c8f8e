"""Resolve a policy against a real input: one decision per dim (static, a new symbol, or an expression of another).

Input: a real tensor or subclass, its source path, the complete policy in force for it (`derive_policy`), the
automatic-dynamic state. Output: a `TensorPlan` tree (outer, then inner tensors depth-first) whose `DimPlan`s say
what `subclassaot.pipeline.fakify` must build. Invariants: every relation names existing attributes and dims and holds for
the input; ranges and divisibility hold for the input; derivations form no cycle; a derived dim has no range of
its own. `policies` decides here and never creates fake tensors or symbols.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from policies.automatic import AutomaticDynamicState
from policies.errors import PolicyError
from policies.marks import inner_tensors, nested_int_coeff
from policies.spec import (
    DimKind,
    DimPolicy,
    DimRef,
    Origin,
    Policy,
    Prop,
    Relation,
    SubclassSymbolicPolicy,
    linear_text,
)

# Note [Zero One Specialization]
# A dim that the policy makes dynamic but whose size is 0 or 1 in the input is planned static, as torch does: the
# ShapeEnv assumes every size symbol is >= 2 (that is what lets it decide broadcasting and contiguity without
# guards), so a symbol cannot stand for 0 or 1. The guard then pins that size; a later call with another size fails
# it and recompiles, and the dim becomes a symbol then. A `min` below 2 is therefore clamped to 2 for the symbol's
# range. A dim derived by a relation whose value is 0 or 1 (`local == size // 4` at size 2) is static too: the
# relation is checked on the input but not kept as an expression (the ShapeEnv would specialise it anyway).
# `describe` says so on the dim ("size 1 is static").

# Note [Inner Dims Share Outer Symbols]
# torch gives every inner tensor its own symbols and ties them to the outer ones afterwards by guarding
# `inner.size(d) == outer.size(d)` inside the unflatten check; a PairTensor then costs three symbols per dynamic dim
# and extra guards. Here an inner tensor of the outer's rank whose size in dim d equals the outer's, where the outer
# dim is a symbol and the inner dim is not explicitly static, constrained or related, is planned as the outer's
# expression itself (origin SHARED). Its runtime check is `inner.size(d) == <outer symbol>`, which fails (and
# recompiles) when the inner size stops following the outer size; the recompile then gives it its own symbol.


# Note [Nested Int Dims]
# A jagged NestedTensor's ragged size is a nested int j (and its strides multiples c * j): not an integer, but a
# name for the row lengths of one offsets (or lengths) tensor; tensors built from that tensor share j (and a
# deepcopy keeps j over copied offsets). Such a dim is planned as `DimPlan.nested = c` with hint -1 (torch's AOT convention for a nested int):
# dynamic by nature, never a new symbol, never constrained, never the source or target of a relation, and observed
# by automatic dynamic as the constant -1. Fakify gives the fake the input's own nested int (its subclass ties it to
# the fake offsets/lengths), and guards check it by structure (a nested int with coefficient c, and which inputs
# share one), since what it stands for lives in the guarded inner tensors.
# The fake's nested int is a plain nested int, not a ShapeEnv symbol (no graph input carries it), so a nested stride
# `c * j` needs a constant c: the other non-batch dims of a tensor with a nested stride are static (checked here).
# So is the nested int of an offsets tensor that is no NJT input's (passed plain, or made by the program) when NJT
# first asks for it inside the trace: the pipeline's fake modes make a plain one (torch_internals._CacheKeepsStorage),
# which the joint trace meets again as a constant. An output NJT with it is rebuilt by NJT's unflatten from the real
# offsets the call gives it, which gives the nested int eager's offsets tensor has (torch's registry: one per tensor
# object), so outputs share one exactly where they hold one offsets object. In training the Function returns each
# graph output as a tensor of its own: one computed offsets tensor held by two outputs is refused. Offsets passed
# plain that already have a nested int get a ShapeEnv symbol from torch's converter, which no output size names:
# refused.
# A view op's nested int argument (`nt.view(2, 20, nt.size(1))`) is a size of its source, replayed as that size at run
# time (schemas.SourceSize). A backward that takes one as an op's argument (a mean over the ragged dim expands its
# gradient to the nested size) does not trace (make_fx asks the nested int for a constant): refused, naming the NJT.
# A nested int returned as an output (`nt.shape`) is no graph value either: refused, naming the output.


@dataclass(frozen=True, slots=True, kw_only=True)
class DimAddress:
    """One size or stride dim of the tensor at `path`: where a symbol is bound or read."""

    path: str
    prop: Prop
    dim: int

    def __repr__(self) -> str:
        return f"{self.path}.{self.prop.value}({self.dim})"

    def source_name(self) -> str:
        """The name torch's ShapeEnv gives this dim's source (`TensorPropertySource.name`)."""
        return f"{self.path}.{self.prop.value}()[{self.dim}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Derivation:
    """`value == source * scale // divisor + offset`."""

    source: DimAddress
    scale: int = 1
    divisor: int = 1
    offset: int = 0
    origin: Origin  # SHARED or RELATION
    relation: Relation | None = None  # the declared relation, for RELATION

    def apply(self, value: int) -> int:
        return value * self.scale // self.divisor + self.offset

    def __repr__(self) -> str:
        return linear_text(repr(self.source), scale=self.scale, divisor=self.divisor, offset=self.offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class DimPlan:
    """The decision for one dim of one tensor node."""

    address: DimAddress
    hint: int  # the value in the real input
    policy: DimPolicy  # the policy in force; its origin says where it came from
    dynamic: bool  # a symbol (or, if derived, an expression of one) rather than the constant `hint`
    derived: Derivation | None = None
    inferred: bool = False  # a stride computed from the sizes (static where the layout is not dense)
    note: str = ""
    # `nested * j`: a nested int (see Note [Nested Int Dims]); `hint` is then -1 and `dynamic` True
    nested: int | None = None

    @property
    def needs_symbol(self) -> bool:
        return self.dynamic and self.derived is None and not self.inferred and self.nested is None


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorPlan:
    """One tensor node: a plain input, or a subclass (outer) with its inner tensors as `children`."""

    path: str
    type_name: str
    sizes: tuple[DimPlan, ...]  # len = ndim, indexed by dim
    strides: tuple[DimPlan, ...]  # len = ndim, indexed by dim
    storage_offset: int
    attrs: tuple[str, ...]  # inner tensor names for a subclass, () for a plain tensor
    children: tuple[TensorPlan, ...]  # len = len(attrs), children[i] belongs to attrs[i]
    relations: tuple[Relation, ...]  # declared on this node, as given
    share_outer_dims: bool

    def nodes(self) -> Iterator[TensorPlan]:
        """This node, then its inner tensors depth-first in attrs order."""
        yield self
        for child in self.children:
            yield from child.nodes()

    def dims(self) -> Iterator[DimPlan]:
        for node in self.nodes():
            yield from node.sizes
            yield from node.strides

    def free_dims(self) -> tuple[DimPlan, ...]:
        """The dims that need a new symbol, in traversal order."""
        return tuple(d for d in self.dims() if d.needs_symbol)


def _check_constraints(p: DimPolicy, address: DimAddress, value: int) -> None:
    rule = ""
    if p.min is not None and value < p.min:
        rule = f"min={p.min}"
    elif p.max is not None and value > p.max:
        rule = f"max={p.max}"
    elif p.divisible_by is not None and value % p.divisible_by:
        rule = f"divisible_by={p.divisible_by}"
    if rule:
        raise PolicyError(
            f"{address!r} is {value}, which breaks the policy {p!r} ({rule}, from {p.origin.value}); pass an input "
            "that satisfies it, or widen the policy"
        )


def _plan_dim(p: DimPolicy, address: DimAddress, value: int, state: AutomaticDynamicState | None) -> DimPlan:
    _check_constraints(p, address, value)
    note = ""
    if p.kind is DimKind.AUTOMATIC:
        is_dynamic = state is not None and state.is_dynamic(address.path, address.dim)
        note = "automatic: size changed" if is_dynamic else "automatic: first sighting"
    else:
        is_dynamic = p.kind is DimKind.DYNAMIC
    if is_dynamic and value in (0, 1):
        is_dynamic, note = False, f"{address.prop.value} {value} is static (see Note [Zero One Specialization])"
    return DimPlan(address=address, hint=value, policy=p, dynamic=is_dynamic, note=note)


def _nested_dim(p: DimPolicy, address: DimAddress, coeff: int) -> DimPlan:
    text = "j" if coeff == 1 else f"{coeff}*j"
    if p.min is not None or p.max is not None or p.divisible_by is not None:
        raise PolicyError(
            f"{address!r} is the nested int {text} (a jagged tensor's ragged dim), which has no value to constrain; "
            f"the policy {p!r} ({p.origin.value}) cannot hold for it. Drop the range, or constrain the packed "
            "values dim (`_values`) instead"
        )
    note = f"nested int {text}: dynamic by nature, guarded by structure (see Note [Nested Int Dims])"
    return DimPlan(address=address, hint=-1, policy=p, dynamic=True, nested=coeff, note=note)


def _plan_node(x: torch.Tensor, path: str, policy: Policy, state: AutomaticDynamicState | None) -> TensorPlan:
    shape = tuple(x.size())
    if state is not None:
        state.observe(path, tuple(-1 if nested_int_coeff(s) is not None else int(s) for s in shape))
    outer = policy.outer if isinstance(policy, SubclassSymbolicPolicy) else policy
    sizes = []
    for d, p in enumerate(outer.sizes):
        address = DimAddress(path=path, prop=Prop.SIZE, dim=d)
        coeff = nested_int_coeff(shape[d])
        sizes.append(_plan_dim(p, address, int(shape[d]), state) if coeff is None else _nested_dim(p, address, coeff))
    strides = []
    stride = tuple(x.stride())
    for d in range(x.dim()):
        address = DimAddress(path=path, prop=Prop.STRIDE, dim=d)
        sp = None if outer.strides is None else outer.strides[d]
        coeff = nested_int_coeff(stride[d])
        if coeff is not None:
            strides.append(_nested_dim(_INFERRED if sp is None else sp, address, coeff))
        elif sp is None:
            strides.append(
                DimPlan(address=address, hint=int(stride[d]), policy=_INFERRED, dynamic=False, inferred=True)
            )
        else:
            strides.append(_plan_dim(sp, address, int(stride[d]), None))
    _check_nested_coefficients(path, sizes, strides)
    children: list[TensorPlan] = []
    attrs: list[str] = []
    relations: tuple[Relation, ...] = ()
    share = True
    inners = inner_tensors(x)
    if inners is not None:
        assert isinstance(policy, SubclassSymbolicPolicy), f"BUG: {path}: plan needs the derived subclass policy"
        relations, share = tuple(policy.relations), policy.share_outer_dims
        for attr, t in inners:
            attrs.append(attr)
            children.append(_plan_node(t, f"{path}.{attr}", policy.inner[attr], state))
    return TensorPlan(
        path=path,
        type_name=type(x).__name__,
        sizes=tuple(sizes),
        strides=tuple(strides),
        storage_offset=int(x.storage_offset()),
        attrs=tuple(attrs),
        children=tuple(children),
        relations=relations,
        share_outer_dims=share,
    )


_INFERRED = DimPolicy(kind=DimKind.STATIC, origin=Origin.DEFAULT)


def _check_nested_coefficients(path: str, sizes: list[DimPlan], strides: list[DimPlan]) -> None:
    # See Note [Nested Int Dims]: a nested stride `c * j` needs a constant c, and c is made of the sizes of the dims
    # other than the batch (0) and the ragged ones.
    if not any(s.nested is not None for s in strides):
        return
    for d in sizes[1:]:
        if d.nested is None and d.dynamic:
            raise PolicyError(
                f"{d.address!r} is dynamic ({d.policy!r} from {d.policy.origin.value}), but {path} has a nested "
                "stride (c * j, j its ragged size) whose coefficient c is made of this dim's size; a nested int "
                "times a symbol cannot be represented. Keep the feature dims of a jagged tensor static "
                "(mark_dynamic only its batch dim 0)"
            )


def _resolve_ref(node: TensorPlan, ref: DimRef, rel: Relation) -> DimPlan:
    target = node
    for attr in ref.attr.split(".") if ref.attr else ():
        if attr not in target.attrs:
            raise PolicyError(
                f"{node.path}: relation `{rel!r}` names inner tensor {ref.attr!r}, but {target.path} "
                f"({target.type_name}) has inner tensors {list(target.attrs)}; name one of those"
            )
        target = target.children[target.attrs.index(attr)]
    dims = target.sizes if ref.prop is Prop.SIZE else target.strides
    if not 0 <= ref.dim < len(dims):
        raise PolicyError(
            f"{node.path}: relation `{rel!r}` names {ref.prop.value}({ref.dim}) of {target.path}, which has "
            f"{len(dims)} dims; use a dim in [0, {len(dims) - 1}]"
        )
    return dims[ref.dim]


def _apply_relations(node: TensorPlan, dims: dict[DimAddress, DimPlan]) -> None:
    for rel in node.relations:
        if rel.source.prop is Prop.STRIDE:
            raise PolicyError(
                f"{node.path}: relation `{rel!r}` reads a stride; relations derive a dim from a size, so state it "
                "the other way round or leave the stride inferred"
            )
        target = dims[_resolve_ref(node, rel.target, rel).address]
        source = dims[_resolve_ref(node, rel.source, rel).address]
        for end in (target, source):
            if end.nested is not None:
                raise PolicyError(
                    f"{node.path}: relation `{rel!r}` names {end.address!r}, a nested int (a jagged tensor's ragged "
                    "dim, tied to its offsets; see Note [Nested Int Dims]); relate the offsets' sizes instead"
                )
        expected = rel.apply(source.hint)
        if target.hint != expected:
            raise PolicyError(
                f"{node.path}: relation `{rel!r}` does not hold for this input: {target.address!r} is {target.hint} "
                f"but {rel.rhs()} is {expected} ({source.address!r} = {source.hint}); fix the relation or the input"
            )
        p = target.policy
        if p.min is not None or p.max is not None or p.divisible_by is not None:
            raise PolicyError(
                f"{node.path}: {target.address!r} is derived by relation `{rel!r}` but also has its own constraint "
                f"{p!r}; put ranges and divisibility on the source dim {source.address!r} instead"
            )
        derivation = Derivation(
            source=source.address,
            scale=rel.scale,
            divisor=rel.divisor,
            offset=rel.offset,
            origin=Origin.RELATION,
            relation=rel,
        )
        dims[target.address] = dataclasses.replace(target, derived=derivation, inferred=False, note="")


_EXPLICIT = (Origin.POLICY, Origin.MARK, Origin.HOOK, Origin.TORCH_MARK, Origin.CLASS)


def _share_outer_dims(node: TensorPlan, dims: dict[DimAddress, DimPlan]) -> None:
    if not node.share_outer_dims:
        return
    for child in node.children:
        if len(child.sizes) != len(node.sizes):
            continue
        for outer_dim, child_dim in zip(node.sizes, child.sizes, strict=True):
            o, c = dims[outer_dim.address], dims[child_dim.address]
            p = c.policy
            explicit_static = p.kind is DimKind.STATIC and p.origin in _EXPLICIT
            constrained = p.min is not None or p.max is not None or p.divisible_by is not None
            # A shared outer dim passes its symbol on to nested inner tensors; a related one does not (no cycles).
            related = o.derived is not None and o.derived.origin is not Origin.SHARED
            nested = o.nested is not None or c.nested is not None
            if related or nested or c.derived or o.hint != c.hint or explicit_static or constrained:
                continue
            if not _root(o.address, dims).dynamic:
                continue
            shared = Derivation(source=o.address, origin=Origin.SHARED)
            dims[c.address] = dataclasses.replace(c, derived=shared, note="")


def _root(address: DimAddress, dims: dict[DimAddress, DimPlan]) -> DimPlan:
    seen = [address]
    current = dims[address]
    while current.derived is not None:
        nxt = current.derived.source
        if nxt in seen:
            cycle = " -> ".join(repr(a) for a in (*seen, nxt))
            raise PolicyError(f"relations form a cycle ({cycle}); every chain of relations must end at a free dim")
        seen.append(nxt)
        current = dims[nxt]
    return current


def _rebuild(node: TensorPlan, dims: dict[DimAddress, DimPlan]) -> TensorPlan:
    return dataclasses.replace(
        node,
        sizes=tuple(dims[d.address] for d in node.sizes),
        strides=tuple(dims[d.address] for d in node.strides),
        children=tuple(_rebuild(c, dims) for c in node.children),
    )


def plan_input(x: torch.Tensor, path: str, policy: Policy, *, state: AutomaticDynamicState | None = None) -> TensorPlan:
    """Decide every dim of `x` (recursively) under `policy` (complete: from `derive_policy`); validates it."""
    raw = _plan_node(x, path, policy, state)
    dims = {d.address: d for d in raw.dims()}
    for node in raw.nodes():
        _apply_relations(node, dims)
    for node in raw.nodes():
        _share_outer_dims(node, dims)
    for address, plan in list(dims.items()):
        if plan.derived is None:
            continue
        if _root(address, dims).dynamic and plan.hint in (0, 1):
            note = f"{plan.hint} is static (see Note [Zero One Specialization]); relation checked, not kept"
            dims[address] = dataclasses.replace(plan, derived=None, dynamic=False, note=note)
        else:
            dims[address] = dataclasses.replace(plan, dynamic=_root(address, dims).dynamic)
    return _rebuild(raw, dims)
