"""Fakify: real inputs + their policies -> fresh fake tensors and fake subclasses with symbolic sizes.

Input: the real input tensors (plain or traceable subclasses) with their source paths, a fresh FakeTensorMode with a
ShapeEnv, the compile's `dynamic` setting, user policies by path, the automatic-dynamic state and the symbol cache
(both owned by the caller, one per compiled function). Output: `FakifyResult`: one fake per input, the policy and
plan used for each, every dim's expression, and where each free symbol is bound.
Invariants: fakes are made fresh from real inputs every time (never reused across compiles); inputs that alias
(the same tensor, views of one base, shared storage, inside subclasses too) give fakes that alias the same way;
subclasses are rebuilt through the checked `protocol.unflatten_subclass`; every free symbol appears bare as some
size or stride of some fake; the same inputs, policies and cache give the same symbol names in a fresh ShapeEnv.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from policies import (
    AutomaticDynamicState,
    DimAddress,
    DimKind,
    DimPlan,
    Policy,
    Prop,
    TensorPlan,
    derive_policy,
    describe,
    plan_input,
)
from policies import PolicyError as BasePolicyError
from subclassaot import torch_internals as ti
from subclassaot.authoring.protocol import (
    LeafInfo,
    SubclassNode,
    flatten_subclass,
    is_traceable_subclass,
    unflatten_subclass,
)
from subclassaot.errors import PolicyError, UnsupportedError

log = logging.getLogger(__name__)

# Note [Fakify Through The Symbol Cache]
# `policies.plan_input` decides every dim (static, new symbol, or an expression of another dim). Fakify then
#   1. creates the new symbols itself, with `ShapeEnv.create_symbol(DYNAMIC)` on a `PathSource` named like torch's
#      `TensorPropertySource` ("args[0].size()[0]"), ranges via `constrain_symbol_range` (`var_to_range`), and
#      divisibility as a ShapeEnv guard `Eq(Mod(s, k), 0)` (in `shape_env.guards`; we do not substitute s = k*t,
#      so every symbol stays readable from a real size);
#   2. computes every size/stride/offset expression: relations and shared dims are *expressions* of existing
#      symbols (`offsets.size(0)` is `s0 + 1`), never a new symbol plus a guard;
#   3. hands each plain leaf to `fake_mode.from_tensor` with a StatefulSymbolicContext whose per-ShapeEnv
#      source->symbol cache is pre-filled with those expressions, so torch's MetaConverter (and its memo on real
#      tensors and storages, which is what preserves aliasing and views) builds the fake with exactly our
#      expressions and creates no symbols of its own; where the call has no symbol at all (every expression a
#      number: a module's first compile), `from_tensor` with static shapes instead, the same fakes without the
#      ShapeEnv's work, but for 0-dim leaves (`ti.fake_leaf`: their item() symbol comes from the ShapeEnv path);
#   4. rebuilds subclasses bottom-up through `protocol.unflatten_subclass` with symbolic outer size and stride.
# Relations are expressions: torch ties an inner dim to an outer dim by giving both symbols and guarding their equality,
# which the ShapeEnv then turns into a replacement. We build the derived dim as the expression directly: fewer symbols,
# no guard, and the runtime check on the derived size is `offsets.size(0) == s0 + 1`, evaluated from where s0 is bound.
# Symbol names: the ShapeEnv names a symbol s<hash(source name) % 100>, probing upwards on collision, so the name
# depends on which symbols were created before it. `SymbolCache` (outside the ShapeEnv, one per compiled function)
# records every symbol created, in order; the next fakify creates the cached ones first in that order and reserves the
# names of cached symbols it no longer needs, which replays the same probing and yields the same names.
# Aliased inputs share one fake: the same real tensor reached by two paths (`f(x, x)`, `PairTensor(x, x)`) gets one fake
# under the policy of its first path in input order (depth-first inside subclasses); later paths are listed in
# `FakifyResult.aliases`. A view input is fakified from its base: the base's expressions are those of the input that is
# the base when there is one, else the base is static (the program observes its storage, not its sizes); the view's own
# sizes follow its own policy. Inputs that share a storage without a view relation share the fake storage (MetaConverter
# memoises storages).


class SymbolCache:
    """Source name -> symbol name, in creation order, across compiles of one function (outside any ShapeEnv).

    Not thread-safe: the caller serialises compiles of one function (fakify runs once per compile).
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {}  # "args[0].size()[0]" -> "s27", insertion = creation order

    def names(self) -> dict[str, str]:
        return dict(self._names)

    def record(self, source_name: str, symbol_name: str) -> None:
        old = self._names.get(source_name)
        if old is not None and old != symbol_name:
            log.debug("symbol for %s was %s and is now %s", source_name, old, symbol_name)
        self._names.setdefault(source_name, symbol_name)


@dataclass(frozen=True, slots=True, kw_only=True)
class FakifyResult:
    fakes: tuple[torch.Tensor, ...]  # len = len(inputs); fakes[i] stands for inputs[i]
    plans: tuple[TensorPlan, ...]  # len = len(inputs); the per-dim decisions (`policies.describe(plan)`)
    # every free symbol -> the size/stride dim where it was created and appears bare (read it from there at runtime)
    symbol_bindings: Mapping[sympy.Symbol, DimAddress]
    # every size and stride dim of every tensor node but nested ints (Note [Nested Int Dims]), keyed by its address
    exprs: Mapping[DimAddress, sympy.Expr]
    aliases: Mapping[str, str]  # path of a repeated tensor node -> the first path it was reached by
    shape_env: ShapeEnv  # the ShapeEnv the symbols live in (the caller's)

    def describe(self) -> str:
        """`policies.describe` for every input: each dim's policy, its origin and what it became."""
        return "\n".join(describe(p) for p in self.plans)


def _default_kind(dynamic: bool | None) -> DimKind:
    return DimKind.AUTOMATIC if dynamic is None else (DimKind.DYNAMIC if dynamic else DimKind.STATIC)


def _collect_tensors(x: torch.Tensor, plan: TensorPlan, out: dict[str, torch.Tensor]) -> None:
    out[plan.path] = x
    for attr, child in zip(plan.attrs, plan.children, strict=True):
        inner = getattr(x, attr)
        assert isinstance(inner, torch.Tensor), f"BUG: {child.path} is not a tensor"
        _collect_tensors(inner, child, out)


class _Builder:
    """One fakify call: symbols, expressions and fakes for all inputs (private, lives for one call)."""

    def __init__(self, fake_mode: FakeTensorMode, plans: Sequence[TensorPlan], tensors: dict[str, torch.Tensor]):
        self.fake_mode = fake_mode
        self.shape_env = ti.shape_env_of(fake_mode)
        self.plans = plans
        self.tensors = tensors  # every node path -> its real tensor (keeps them alive: ids stay unique)
        self.canon: dict[str, str] = {}  # node path -> first path of the same real tensor
        first_by_id: dict[int, str] = {}
        for plan in plans:
            for node in plan.nodes():
                self.canon[node.path] = first_by_id.setdefault(id(tensors[node.path]), node.path)
        self.nodes = {n.path: n for p in plans for n in p.nodes()}
        self.dims = {d.address: d for p in plans for d in p.dims()}
        self.symbols: dict[DimAddress, sympy.Symbol] = {}
        self.exprs: dict[DimAddress, sympy.Expr] = {}
        self.fakes: dict[str, torch.Tensor] = {}  # canonical node path -> fake
        self.static = False  # no symbol and no nested int in the whole call (set by `create_symbols`)

    def canonical(self, a: DimAddress) -> DimAddress:
        return dataclasses.replace(a, path=self.canon[a.path])

    def create_symbols(self, cache: SymbolCache) -> None:
        needed = {
            d.address.source_name(): d
            for p in self.plans
            for d in p.free_dims()
            if self.canon[d.address.path] == d.address.path
        }
        cached = cache.names()
        for source_name, symbol_name in cached.items():
            if source_name in needed:
                self._create(needed.pop(source_name), cache)
            else:
                ti.reserve_symbol_name(self.shape_env, symbol_name)
        for d in needed.values():
            self._create(d, cache)
        self.static = not self.symbols and all(d.nested is None for d in self.dims.values())

    def _create(self, d: DimPlan, cache: SymbolCache) -> None:
        sym = ti.new_size_symbol(self.shape_env, d.hint, d.address.source_name())
        if d.policy.min is not None or d.policy.max is not None:
            ti.constrain_range(self.shape_env, sym, d.policy.min, d.policy.max)
        if d.policy.divisible_by is not None:
            ti.add_divisibility_guard(ti.make_symint(self.shape_env, sym, d.hint), d.policy.divisible_by)
        self.symbols[d.address] = sym
        cache.record(d.address.source_name(), str(sym))

    def expr(self, address: DimAddress) -> sympy.Expr:
        a = self.canonical(address)
        if a not in self.exprs:
            d = self.dims[a]
            assert d.nested is None, f"BUG: {a!r} is a nested int, which has no expression (Note [Nested Int Dims])"
            if d.derived is not None:
                src = self.expr(d.derived.source) * d.derived.scale
                src = src if d.derived.divisor == 1 else ti.floordiv_expr(src, d.derived.divisor)
                self.exprs[a] = sympy.expand(src + d.derived.offset)
            elif a in self.symbols:
                self.exprs[a] = self.symbols[a]
            elif d.inferred:
                self._infer_strides(self.nodes[a.path])
            else:
                self.exprs[a] = sympy.Integer(d.hint)
        return self.exprs[a]

    def _infer_strides(self, node: TensorPlan) -> None:
        # Mirrors ShapeEnv._compute_symbolic_stride so that whichever way torch takes (its candidates, or our cache)
        # it lands on the same expression: a stride equal to size*stride of a dim already seen is that product.
        sizes = [None if d.nested is not None else self.expr(d.address) for d in node.sizes]
        hints = [d.hint for d in node.strides]
        candidates: dict[int, sympy.Expr] = {}
        for i in sorted(range(len(hints)), key=lambda i: (hints[i], -i)):
            d = node.strides[i]
            contiguous = i != len(hints) - 1 and hints[i] == node.sizes[i + 1].hint * hints[i + 1]
            if d.nested is not None:
                continue
            if not d.inferred:
                out = self.expr(d.address)
            elif hints[i] in (0, 1) and not contiguous:
                out = sympy.Integer(hints[i])
            else:
                out = candidates.get(hints[i], sympy.Integer(hints[i]))
            self.exprs[self.canonical(d.address)] = out
            size = sizes[i]
            if size is not None:
                candidates[node.sizes[i].hint * hints[i]] = size * out

    def dim_exprs(self, node: TensorPlan, path: str | None = None) -> ti.DimExprs:
        return ti.DimExprs(
            path=node.path if path is None else path,
            sizes=tuple(self.expr(d.address) for d in node.sizes),
            strides=tuple(self.expr(d.address) for d in node.strides),
            storage_offset=sympy.Integer(node.storage_offset),
            inferred_strides=tuple(d.inferred for d in node.strides),
        )

    def _base_exprs(self, t: torch.Tensor, path: str) -> ti.DimExprs | None:
        base = t._base if t._is_view() else None
        if base is None or _moved_off_base(t):
            return None
        base_path = next((p for p, other in self.tensors.items() if other is base), None)
        if base_path is not None:
            return self.dim_exprs(self.nodes[self.canon[base_path]], path=f"{path}._base")
        static = tuple(sympy.Integer(s) for s in base.shape)
        strides = tuple(sympy.Integer(s) for s in base.stride())
        offset = sympy.Integer(int(base.storage_offset()))
        return ti.DimExprs(
            path=f"{path}._base",
            sizes=static,
            strides=strides,
            storage_offset=offset,
            inferred_strides=(False,) * len(static),
        )

    def fake(self, path: str) -> torch.Tensor:
        path = self.canon[path]
        if path in self.fakes:
            return self.fakes[path]
        node, t = self.nodes[path], self.tensors[path]
        if node.attrs:
            sub_node, _ = flatten_subclass(t, path)
            fake = unflatten_subclass(self._symbolic_node(sub_node), [self.fake(p) for p in sub_node.leaf_paths()])
        else:
            exprs = self.dim_exprs(node)
            source = _off_base_alias(path, t) if _moved_off_base(t) else t
            fake = ti.fake_leaf(self.fake_mode, source, exprs, self._base_exprs(t, path), static=self.static)
            self._check_leaf(fake, exprs)
        self.fakes[path] = fake
        return fake

    def _symbolic_node(self, node: SubclassNode) -> SubclassNode:
        plan = self.nodes[self.canon[node.path]]
        sizes = tuple(self._symbolic_dim(node, d) for d in plan.sizes)
        strides = tuple(self._symbolic_dim(node, d) for d in plan.strides)
        children = tuple(c if isinstance(c, LeafInfo) else self._symbolic_node(c) for c in node.children)
        return dataclasses.replace(node, outer_size=sizes, outer_stride=strides, children=children)

    def _symbolic_dim(self, node: SubclassNode, d: DimPlan) -> int | torch.SymInt:
        if d.nested is None:
            return ti.make_symint(self.shape_env, self.expr(d.address), d.hint)
        # See Note [Nested Int Dims]: the real input's own nested int (its subclass ties it to the fake offsets)
        real = self.tensors[node.path]
        value = real.size(d.address.dim) if d.address.prop is Prop.SIZE else real.stride(d.address.dim)
        nested_id = ti.nested_int_id(value)
        assert nested_id is not None, f"BUG: {d.address!r} was planned as a nested int"
        return ti.nested_int(nested_id, d.nested)

    def _check_leaf(self, fake: torch.Tensor, exprs: ti.DimExprs) -> None:
        got = tuple(ti.expr_of(s) for s in fake.size()), tuple(ti.expr_of(s) for s in fake.stride())
        if got != (exprs.sizes, exprs.strides) and self.canon.get(exprs.path) == exprs.path:
            raise AssertionError(
                f"BUG: {exprs.path}: the fake has sizes/strides {got}, fakify decided {(exprs.sizes, exprs.strides)}"
            )


def _bindings(builder: _Builder) -> dict[sympy.Symbol, DimAddress]:
    bindings = {sym: address for address, sym in builder.symbols.items()}
    for e in builder.exprs.values():
        for free in e.free_symbols:
            assert free in bindings, f"BUG: symbol {free} is not bound to any size or stride"
    return bindings


def fakify_inputs(
    inputs: Sequence[torch.Tensor],
    paths: Sequence[str],
    *,
    fake_mode: FakeTensorMode,
    dynamic: bool | None,
    policies: Mapping[str, Policy],
    state: AutomaticDynamicState,
    symbol_cache: SymbolCache,
) -> FakifyResult:
    """Fresh fakes for `inputs` under their policies; see the module docstring and Note [Fakify Through The Symbol Cache].

    `dynamic`: what dims nobody spoke about become (None: automatic, True: dynamic, False: static); given policies
    (by path, inner paths too) and marks win in every mode. Fakify itself calls `state.observe` for every tensor
    node (see Note [Automatic Dynamic State]); the caller only keeps `state` and `symbol_cache` alive between
    compiles. Call it on a fresh ShapeEnv before anything else creates symbols in it (names replay creation order).
    """
    if len(inputs) != len(paths):
        raise AssertionError(f"BUG: {len(inputs)} inputs but {len(paths)} paths")
    for x, p in zip(inputs, paths, strict=True):
        if is_traceable_subclass(x):
            flatten_subclass(x, p)  # the protocol's own errors first (policies read subclasses through it too)
    try:
        used = tuple(
            derive_policy(x, p, given=policies, default=_default_kind(dynamic))
            for x, p in zip(inputs, paths, strict=True)
        )
        plans = tuple(plan_input(x, p, u, state=state) for x, p, u in zip(inputs, paths, used, strict=True))
    except BasePolicyError as e:
        if isinstance(e, PolicyError):
            raise
        raise PolicyError(str(e)) from e
    tensors: dict[str, torch.Tensor] = {}
    for x, plan in zip(inputs, plans, strict=True):
        _collect_tensors(x, plan, tensors)
    builder = _Builder(fake_mode, plans, tensors)
    builder.create_symbols(symbol_cache)
    fakes = tuple(builder.fake(p) for p in paths)
    exprs = {d.address: builder.expr(d.address) for plan in plans for d in plan.dims() if d.nested is None}
    return FakifyResult(
        fakes=fakes,
        plans=plans,
        symbol_bindings=_bindings(builder),
        exprs=exprs,
        aliases={p: c for p, c in builder.canon.items() if p != c},
        shape_env=builder.shape_env,
    )


def _moved_off_base(t: torch.Tensor) -> bool:
    """A view whose storage set_() replaced since: autograd still names its `._base`, whose storage it no longer
    shares, so a fake built as a view of the base's fake would take the wrong storage."""
    base = t._base if t._is_view() else None
    return base is not None and ti.storage_key(base) != ti.storage_key(t)


def _off_base_alias(path: str, t: torch.Tensor) -> torch.Tensor:
    """A tensor over `t`'s storage with `t`'s layout and no view relation, to fakify in `t`'s place (the converter's
    storage memo then ties its fake to the other inputs over that storage)."""
    if t.requires_grad:
        # (a plain view of a subclass's inner tensor, e.g. an NJT's values(), names the wrapper as its `._base`)
        base = t._base
        subclass_base = (
            base is not None and is_traceable_wrapper_subclass(base) and not is_traceable_wrapper_subclass(t)
        )
        why, instead = (
            (f"whose `._base` is a {type(base).__name__}, a tensor subclass holding its memory in inner tensors", "")
            if subclass_base
            else (
                "whose storage set_() replaced before the call (its `._base` is over another storage)",
                "a tensor made by set_() on a fresh tensor, or ",
            )
        )
        raise UnsupportedError(
            f"{path}: a view that requires grad, {why}: its autograd history runs through a base it does not share "
            f"memory with, which the compiled call cannot lay out. Pass {instead}a clone"
        )
    with torch.no_grad():
        alias = torch.empty(0, dtype=t.dtype, device=t.device)
        return alias.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
