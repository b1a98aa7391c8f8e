"""Stage `desugar`: subclass inputs become their (recursively) flattened plain leaves; aliased leaves share a base.

Input: the fake tensor inputs (one per tensor input, plain or subclass) with their paths. Output: `DenseLayout`, and
`rebuild_user_tensors`, which turns graph-level values back into user-level tensors inside a trace.
Invariants: leaf order is depth-first by `__tensor_flatten__` attrs (Note [The Flatten Protocol]); every storage
shared by two or more dense leaves becomes exactly one graph input (Note [Synthetic Bases]).

Part: Subclass inputs that are views of one wrapper base the call does not pass (`f(x[0], x[0])`, x a PairTensor that
requires grad): compiled as a program that takes that base too.

Input: the user's function and one call's args/kwargs. Output: `HiddenBases` (which positions are views of which
base), the call with the bases added, the function the pipeline compiles in the user's place, and the compiled
entry's guards and runner over the user's values. Invariants: the bases go last, as keyword arguments the user's
function never sees; every other leaf keeps its position and path; an entry compiled this way runs only where the
same positions are views of one base object again (guarded by `is`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.guards import Guards
from subclassaot.schemas import AliasGroup, AliasGroupRef, DenseIndex, DenseLayout, DenseLeaf, InputIndex, Meta
from subclassaot.torch_internals import shares_version_counter, storage_key, symint_expr, with_bits

# Note [Synthetic Bases]
# Two inputs that share storage (f(x, x.view(-1)), two slices of one tensor, a PairTensor whose inner tensors are one
# tensor) must see each other's mutations inside the program. Functionalization tracks aliasing per storage it was
# given, so giving it two separate inputs would lose that. Instead every storage shared by two or more dense leaves
# becomes ONE graph input: a flat 1-D view of the whole storage (the synthetic base), and inside the trace each member is
# regenerated as `base.as_strided(size, stride, offset)`. A mutation of any member is then a mutation of the base, which
# the epilogue writes back once with `base.copy_`, so every alias sees it, exactly as in eager. Members' metadata is
# baked in as constants and guarded, because the aliasing pattern itself is part of what a compiled entry assumes (a
# call with a different pattern recompiles, with the reason printed).
# - Unmutated aliases stay apart: a synthetic base is only needed when the program writes to (or changes the metadata or
#   storage of) one of the aliases, or advances its version counter (an in-place view op on a view of it, which another
#   alias's unbind() views check when autograd reads their grad_fn); otherwise no alias can observe another, and each
#   member is traced as the separate input it is. Separate inputs keep the graph simple and let training handle
#   aliased inputs as autograd does in eager: each alias gets its own gradient. The guards still check the aliasing
#   pattern (`observed_groups`). The driver analyzes with every group apart first (tied weights: one analysis, not
#   two): a write, metadata change, in-place view op or version bump on a member shows on that member apart as in the
#   group, so where none shows (and no input gains grad) that analysis is the one the grouped analysis would lead to.
#   Else (or where it raises) it desugars with the groups, analyzes, and desugars again without the untouched ones.
# - One tensor passed several times: `f(x, x)` runs in eager as `g(y) = f(y, y)` does: one object, one storage, one
#   version counter, one autograd history and one `.grad`, whatever the program does through either name. As a base and
#   views of it the histories would not be the input's own. So a call whose arguments hold one tensor (plain or a
#   subclass) at several positions compiles the program of its first position: each repeated position holds a
#   `SameTensorAs(first)` marker, replaced by the tensor at `first` before the user's function is called, and every
#   stage treats it as one input (no alias group). The entry's guards check that the same positions hold the very same
#   object again (`is`), then the compiled guards; messages name the first position. Only functions called with their
#   own arguments (module state and captured tensors lift to inputs the marked function could not name); elsewhere a
#   subclass object passed twice is one alias group of that object alone (Note [Aliased Inputs In Training]), which
#   misses what one input has: a custom Function's ctx.mark_dirty rebases the wrapper's history, not its base's.


class DynamicAliasError(UnsupportedError):
    """Aliased inputs were fakified with dynamic shapes; the driver retries with static ones (`members`: each
    aliased dense leaf's path and rank)."""

    def __init__(self, message: str, members: Mapping[str, int]) -> None:
        super().__init__(message)
        self.members = dict(members)


def dense_layout(
    fakes: Sequence[torch.Tensor],
    paths: Sequence[str],
    owners: Sequence[InputIndex],
    reals: Sequence[torch.Tensor],
    *,
    untraced: frozenset[DenseIndex] = frozenset(),
    whole_storage: frozenset[DenseIndex] = frozenset(),
) -> DenseLayout:
    """Flatten every fake tensor input and group dense leaves by storage (families come from the real inputs).
    Groups whose first member is in `untraced` stay separate graph inputs (Note [Synthetic Bases]).
    A leaf in `whole_storage` is in a group even alone: the program reaches its whole storage (Note [as_strided On
    Inputs])."""
    trees: list[SubclassNode | None] = []
    leaves: list[DenseLeaf] = []
    leaf_values: list[torch.Tensor] = []
    leaves_of_input: list[tuple[DenseIndex, ...]] = []
    for fake, path, owner in zip(fakes, paths, owners, strict=True):
        if is_traceable_subclass(fake):
            node, inner = flatten_subclass(fake, path)
            trees.append(node)
            inner_paths = node.leaf_paths()
        else:
            trees.append(None)
            inner, inner_paths = [fake], (path,)
        start = len(leaves)
        for position, (leaf, leaf_path) in enumerate(zip(inner, inner_paths, strict=True)):
            leaves.append(DenseLeaf(path=leaf_path, owner=owner, position=position))
            leaf_values.append(leaf)
        leaves_of_input.append(tuple(DenseIndex(i) for i in range(start, len(leaves))))
    real_leaves = [
        leaf for real in reals for leaf in (flatten_subclass(real, "x")[1] if is_traceable_subclass(real) else [real])
    ]
    observed = _alias_groups(leaf_values, [leaf.path for leaf in leaves], whole_storage, real_leaves)
    groups = [g for g in observed if g.members[0] not in untraced]
    grouped = {m: g for g, group in enumerate(groups) for m in group.members}
    graph_inputs: list[DenseIndex | AliasGroupRef] = []
    seen_groups: set[int] = set()
    for i in range(len(leaves)):
        g = grouped.get(DenseIndex(i))
        if g is None:
            graph_inputs.append(DenseIndex(i))
        elif g not in seen_groups:
            seen_groups.add(g)
            graph_inputs.append(AliasGroupRef(group=g))
    leaf_families, wrapper_families = _version_families(reals)
    return DenseLayout(
        leaf_families=leaf_families,
        wrapper_families=wrapper_families,
        trees=tuple(trees),
        leaves=tuple(leaves),
        leaves_of_input=tuple(leaves_of_input),
        groups=tuple(groups),
        observed_groups=tuple(observed),
        graph_inputs=tuple(graph_inputs),
        same_wrapper=tuple(
            next((k for k in range(i) if reals[k] is real), None) if is_traceable_subclass(real) else None
            for i, real in enumerate(reals)
        ),
        view_of=tuple(_base_input(real, reals) for real in reals),
        wrapper_bytes=tuple(real.untyped_storage().nbytes() if is_traceable_subclass(real) else None for real in reals),
    )


def _base_input(real: torch.Tensor, reals: Sequence[torch.Tensor]) -> int | None:
    """The first subclass input that is `real`'s autograd `._base` (Note [Aliased Inputs In Training]): both
    require grad and are no autograd leaves (in training, both run as clones)."""
    base = real._base if is_traceable_subclass(real) and real._is_view() and real.requires_grad else None
    if base is None or base.is_leaf or not base.requires_grad:
        return None
    return next((k for k, other in enumerate(reals) if other is base and is_traceable_subclass(other)), None)


def _version_families(reals: Sequence[torch.Tensor]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Number the version counters of the real inputs: equal numbers share one counter in eager (views of one
    base, detach() of a tensor, the same tensor twice). Sharing is observed, not inferred: see `shares_version_counter`."""
    tensors: list[torch.Tensor] = []
    wrappers: list[int] = []
    leaves: list[int] = []
    for real in reals:
        if is_traceable_subclass(real):
            wrappers.append(len(tensors))
            tensors.append(real)
            inner = flatten_subclass(real, "x")[1]
        else:
            wrappers.append(-1)
            inner = [real]
        for leaf in inner:
            leaves.append(len(tensors))
            tensors.append(leaf)
    family = list(range(len(tensors)))
    for i, t in enumerate(tensors):
        for j in range(i):
            if family[j] == j and shares_version_counter(tensors[j], t):
                family[i] = j
                break
    return tuple(family[k] for k in leaves), tuple(family[k] if k >= 0 else -1 for k in wrappers)


def leaf_meta(t: torch.Tensor) -> Meta:
    return (
        tuple(symint_expr(s) for s in t.size()),
        tuple(symint_expr(s) for s in t.stride()),
        symint_expr(t.storage_offset()),
    )


def _alias_groups(
    values: Sequence[torch.Tensor],
    paths: Sequence[str],
    whole_storage: frozenset[DenseIndex],
    real_values: Sequence[torch.Tensor],
) -> list[AliasGroup]:
    by_storage: dict[object, list[int]] = {}
    for i, t in enumerate(values):
        by_storage.setdefault(storage_key(t), []).append(i)
    groups = []
    for members in by_storage.values():
        whole = any(DenseIndex(m) in whole_storage for m in members)
        if len(members) < 2 and not whole:
            continue
        dtypes = {values[m].dtype for m in members}
        if len(dtypes) > 1:
            names = ", ".join(f"{paths[m]} ({values[m].dtype})" for m in members)
            raise UnsupportedError(
                f"inputs {names} share one storage with different dtypes; aliasing across dtypes (view(dtype)) "
                "is not supported between inputs. Pass one of them and take the dtype view inside the function"
            )
        # A whole storage is as large as the real one (the fake of a tensor with no elements has no storage), or,
        # where it came freed, as its members need: the program re-allocates it before it reads them.
        first = real_values[members[0]] if whole else values[members[0]]
        nbytes = first.untyped_storage().nbytes()
        numel = symint_expr(nbytes // first.element_size())
        needed = max(_elements_needed(real_values[m]) for m in members) if whole else 0
        freed = isinstance(numel, int) and numel < needed
        numel = needed if freed else numel
        if not isinstance(numel, int) or any(
            not isinstance(d, int) for m in members for part in leaf_meta(values[m])[:2] for d in part
        ):
            raise DynamicAliasError(
                f"inputs {', '.join(paths[m] for m in members)} alias each other and have dynamic sizes; aliased "
                "inputs are compiled with static shapes. Mark them static (policies.mark_static) or pass dynamic=False",
                {paths[m]: values[m].dim() for m in members},
            )
        groups.append(
            AliasGroup(
                members=tuple(DenseIndex(m) for m in members),
                member_meta=tuple(leaf_meta(values[m]) for m in members),
                base_numel=numel,
                same_as=tuple(
                    next((k for k in range(i) if values[members[k]] is values[m]), None) for i, m in enumerate(members)
                ),
                member_bits=tuple((values[m].is_conj(), values[m].is_neg()) for m in members),
                whole_storage=whole,
                freed=freed,
            )
        )
    return groups


def _elements_needed(t: torch.Tensor) -> int:
    """The storage elements a real tensor reaches (none where it has no elements)."""
    if t.numel() == 0:
        return 0
    return int(t.storage_offset()) + 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))


def dense_from_graph_inputs(layout: DenseLayout, graph_values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Inside a trace: each dense leaf from the graph's placeholders (group members as views of their base)."""
    dense: list[torch.Tensor | None] = [None] * len(layout.leaves)
    for item, value in zip(layout.graph_inputs, graph_values, strict=True):
        if isinstance(item, AliasGroupRef):
            group = layout.groups[item.group]
            for i, (member, (size, stride, offset)) in enumerate(zip(group.members, group.member_meta, strict=True)):
                same = group.same_as[i]
                # The same tensor passed twice is one object in the program too (a t_() on one is seen on both).
                if same is not None:
                    dense[member] = dense[group.members[same]]
                elif _whole_hidden_base(layout, group, member, (size, stride, offset)):
                    dense[member] = value  # Note [Aliased Inputs In Training]: its views' chains start here
                else:
                    view = value.as_strided(_ints(size), _ints(stride), _int(offset))
                    dense[member] = with_bits(view, *group.member_bits[i]) if group.member_bits else view
        else:
            dense[item] = value
    assert all(d is not None for d in dense), "BUG: a dense leaf has no graph input"
    return [d for d in dense if d is not None]


def _whole_hidden_base(layout: DenseLayout, group: AliasGroup, member: DenseIndex, meta: Meta) -> bool:
    """`member` is an inner tensor of a base the call does not pass, added by Note [Aliased Inputs In Training], and it
    is its group's whole base (offset 0, contiguous): it is traced as the base itself, so that an
    as_strided() view of it (an input made by as_strided() replayed on it) is the first view of its chain (Note
    [as_strided On Inputs]). The program never sees that base, so nothing changes its layout."""
    size, stride, offset = meta
    return (
        not any(group.member_bits[group.members.index(member)])
        and is_hidden_base_path(layout.leaves[member].path)
        and list(size) == [group.base_numel]
        and list(stride) == [1]
        and offset == 0
    )


def rebuild_user_tensors(layout: DenseLayout, dense: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """User-level tensor inputs (subclasses unflattened, checked) over the given dense leaves."""
    out: list[torch.Tensor] = []
    traced = {m for g in layout.groups for m in g.members}
    for i, (tree, indices) in enumerate(zip(layout.trees, layout.leaves_of_input, strict=True)):
        same = layout.same_wrapper[i] if layout.same_wrapper else None
        # Untouched, the same wrapper twice is two separate inputs (Note [Synthetic Bases]).
        if same is not None and any(j in traced for j in indices):
            out.append(out[same])  # the same wrapper passed twice is one object in the program too
            continue
        leaves = [dense[j] for j in indices]
        out.append(leaves[0] if tree is None else unflatten_subclass(tree, leaves))
        if tree is not None and layout.wrapper_bytes:
            widen_wrapper_storage(out[-1], layout.wrapper_bytes[i])
    return out


def widen_wrapper_storage(wrapper: torch.Tensor, nbytes: int | None) -> None:
    meta = (*wrapper.shape, *wrapper.stride(), wrapper.storage_offset())
    if nbytes is None or any(isinstance(d, torch.SymInt) for d in meta):
        return
    if wrapper.untyped_storage().nbytes() >= nbytes:
        return
    holder = torch.Tensor._make_wrapper_subclass(  # private API: a storage with no data
        type(wrapper), (nbytes // wrapper.element_size(),), dtype=wrapper.dtype, device=wrapper.device
    )
    torch._functionalize_unsafe_set(wrapper, holder)


def _ints(dims: tuple[object, ...]) -> tuple[int, ...]:
    return tuple(_int(d) for d in dims)


def _int(d: object) -> int:
    assert isinstance(d, int), f"BUG: alias-group metadata must be static, got {d}"
    return d


_HIDDEN_KEY = "<base of "  # no identifier: no keyword argument of the user's function has such a name


def is_hidden_base_path(path: str) -> bool:
    """Is `path` (an input's, or one of its inner tensors') that of a base added by Note [Aliased Inputs In
    Training]?"""
    return path.startswith(f"kwargs['{_HIDDEN_KEY}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HiddenBases:
    views: tuple[tuple[int, ...], ...]  # per base: the flat leaves of (args, kwargs) that are views of it, >= 2
    keys: tuple[str, ...]  # per base: its keyword in the call the pipeline compiles


def find_hidden_bases(args: tuple[object, ...], kwargs: Mapping[str, object]) -> HiddenBases | None:
    """Subclass inputs that require grad and are views of one wrapper base the call does not pass, grouped by base
    (Note [Aliased Inputs In Training]); None where there are none."""
    values = pytree.tree_leaves((args, dict(kwargs)))
    paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path((args, dict(kwargs)))[0]]
    passed = {id(v) for v in values if isinstance(v, torch.Tensor)}
    by_base: dict[int, list[int]] = {}
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor) or not is_traceable_subclass(v) or not v.requires_grad:
            continue
        base = v._base
        if base is None or not is_traceable_subclass(base) or id(base) in passed:
            continue
        views = by_base.setdefault(id(base), [])
        if not any(values[k] is v for k in views):
            views.append(i)
    groups = tuple(tuple(views) for views in by_base.values() if len(views) >= 2)
    keys = tuple(f"{_HIDDEN_KEY}{_user_path(paths[views[0]])}>" for views in groups)
    if not groups or any(k in kwargs for k in keys):
        return None
    return HiddenBases(views=groups, keys=keys)


def _user_path(keystr: str) -> str:
    """`[0][1]` (a leaf of (args, kwargs)) -> `args[1]`; `[1]['k']` -> `kwargs['k']`."""
    root = "args" if keystr.startswith("[0]") else "kwargs"
    return root + keystr[3:]


def call_with_bases(
    hidden: HiddenBases, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[tuple[object, ...], dict[str, object]]:
    """The call with each base added as a keyword argument (after the user's own)."""
    values = pytree.tree_flatten((args, dict(kwargs)))[0]
    extra = {key: _base_of(values, views) for key, views in zip(hidden.keys, hidden.views, strict=True)}
    return args, {**kwargs, **extra}


def _base_of(values: Sequence[object], views: Sequence[int]) -> torch.Tensor:
    base = values[views[0]]
    assert isinstance(base, torch.Tensor) and base._base is not None, "BUG: not a view"
    return base._base


def dropping_bases(fn: Callable[..., object], hidden: HiddenBases) -> Callable[..., object]:
    """`fn` over the call with bases: drops them before it calls the user's function."""
    keys = set(hidden.keys)

    def without_bases(*args: object, **kwargs: object) -> object:
        return fn(*args, **{k: v for k, v in kwargs.items() if k not in keys})

    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        if hasattr(fn, attr):
            setattr(without_bases, attr, getattr(fn, attr))
    return without_bases


def hidden_base_guards(
    hidden: HiddenBases, inner: Guards, paths: Sequence[str]
) -> tuple[Guards, Callable[[Sequence[object]], list[object]]]:
    """Guards over the user's flat values (those of (args, kwargs): no lifted state) and the map from those values
    to the ones the compiled entry takes (the bases appended). `paths`: each flat leaf's source path."""
    views = hidden.views

    def with_bases(values: Sequence[object]) -> list[object]:
        return [*values, *(_base_of(values, group) for group in views)]

    def check(values: Sequence[object]) -> dict[str, int] | str:
        for group in views:
            first = values[group[0]] if len(values) > group[0] else None
            base = first._base if isinstance(first, torch.Tensor) else None
            for k in group:
                v = values[k] if len(values) > k else None
                if base is None or not isinstance(v, torch.Tensor) or v._base is not base:
                    names = ", ".join(paths[k] for k in group)
                    return f"input aliasing changed: compiled for {names} being views of one tensor not passed"
        return inner.check(with_bases(values))

    lines = "".join(
        "#   "
        + " and ".join(f"L[{k}]._base" for k in group)
        + " are one tensor  ("
        + ", ".join(paths[k] for k in group)
        + ")\n"
        for group in views
    )
    source = f"# Note [Aliased Inputs In Training]: first\n{lines}# then, with those bases appended:\n"
    source += inner.source
    return Guards(source=source, check=check, symbols=inner.symbols, fast_source=inner.fast_source), with_bases
