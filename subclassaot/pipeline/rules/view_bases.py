"""Views' bases: a synthetic base's clone in training (an alias-group input that is its own base in eager), and views
whose `._base` is on another storage than their own. Each part below keeps its own contract.

Stage `trace` (training), a synthetic base's clone: where a plain input of an alias group is its own base in
eager, the trace runs that input as the clone and the base as a view of it (Note [Aliased Inputs In Training]).

Input: `DenseLayout`, `FlatInputs` (the real inputs) and the functional value of a synthetic base placeholder.
Output: the base's clone, and the dense leaves made from the clone of one member instead.
Invariants: the clone holds the base's elements at the base's storage positions; values are those of a plain clone.

Part: Views whose `._base` is on another storage than their own (and the Note on intermediates that views share).

Input: output leaves of a functional run (at analysis and trace), or real tensors (at run time).
Output: `foreign_root` and `foreign_base` (eager's `._base` of an output view that set_() left on another storage,
and where the runtime finds it; the run-time rebuild of such a view is runtime/steps.py's `view_onto`),
and the refusal of such views
that require grad (`check_grad_view_of_moved_input`, `check_view_of_input_set_off_it`) or that view an
intermediate with history (`check_moved_view_of_grad_intermediate`), or whose view chain does not end at
their storage's owner (`left_storage_refusal`).
Invariants: analysis and trace decide the same foreign roots (the graph returns them as intermediate bases, numbered
after the others, in output order); regeneration never writes data and leaves every version counter as it found it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord, dense_strides
from subclassaot.schemas import AliasGroup, AliasGroupRef, DenseIndex, DenseLayout, FlatInputs, LeafSource, Meta
from subclassaot.torch_internals import storage_key

_T = TypeVar("_T")

# Plain inputs traced as their own base (Note [Aliased Inputs In Training]). Plain inputs that share storage are
# traced as views of their group's synthetic base, which training clones (so is an input alone in a group over its
# whole storage: Note [as_strided On Inputs]). A write to a member then goes through
# autograd's CopySlices on that clone, whose backward gives the write's gradient the type of the base's incoming
# gradient (Note [Input Updates]), where eager's write on a member that is no view
# (f(x, x)) is recorded on x itself: `x.mul_(pair)` sends x MulBackward's PairTensor gradient. And a member that is
# no view in eager must be none in the run where a Function marks it dirty and returns two tensors: eager refuses
# that of a view that requires grad. So where a plain member that requires grad is no view, its elements are the
# base's exactly (offset 0, dense strides), and every other member is that one object or an alias that is no view
# and requires no grad (x.detach(): it runs detached, no view, either way) or there is none (a non-leaf input alone
# in its group, whose storage the program grows by a resize_() of an alias), the trace runs it as a clone of the
# base's elements in its own layout and the base as a flat view of that clone; the runtime's base is an as_strided
# view of x, through which the base's gradient reaches x with its type. The member requires grad and so is a leaf
# (never a view) or guarded on being no view (guards.py). Where the other members are views of x (x and x.t()), they
# run as views of the clone, as eager's are views of x (guarded: `own_base_guards`). That changes their `._base` in
# the run, so the analysis traces a group so only where the program then moves no tensor to another storage (set_(),
# `.data =`, a resize_() growing a tensor over an input's storage; growing a tensor the program made moves no input)
# and no rule refuses it, else it runs again from the base (`with_own_base_views`); the joint trace does as the
# analysis did (Analysis.own_base_views). Where a member that is no view in eager runs as a view all the same, a
# Function marking it dirty and returning two tensors is refused by name where autograd raises (functional_run).


def clone_synthetic_base(
    layout: DenseLayout, flat: FlatInputs, k: int, value: torch.Tensor, views: bool
) -> tuple[torch.Tensor, dict[DenseIndex, torch.Tensor]]:
    """The clone of synthetic base placeholder `k` (functional `value`) the program runs on, and where the group's
    members are made from the clone of their member rather than from it, those members (Note [Aliased Inputs In
    Training]; `views`: also where the other members are views of that one)."""
    item = layout.graph_inputs[k]
    assert isinstance(item, AliasGroupRef), "BUG: not a synthetic base"
    group = layout.groups[item.group]
    root = own_base_member(layout, flat, group, views)
    if root is None:
        return value.clone(), {}
    size, stride, _ = _ints(group.member_meta[root])
    clone = value.as_strided(size, stride, 0).clone(memory_format=torch.preserve_format)
    real = flat.values[layout.leaves[group.members[root]].owner]
    members = {
        # the others view the clone itself, as the base would (an as_strided() of a view cannot be written to)
        m: clone if flat.values[layout.leaves[m].owner] is real else clone.as_strided(*_ints(meta))
        for m, meta in zip(group.members, group.member_meta, strict=True)
    }
    return clone.as_strided(value.shape, value.stride(), 0), members


def _ints(meta: Meta) -> tuple[list[int], list[int], int]:
    """A member's static (size, stride, offset): alias groups are traced with static shapes."""
    size, stride, offset = meta
    assert all(isinstance(d, int) for d in (*size, *stride, offset)), "BUG: an alias group with dynamic metadata"
    return [int(d) for d in size], [int(d) for d in stride], int(offset)


def own_base_member(layout: DenseLayout, flat: FlatInputs, group: AliasGroup, views: bool) -> int | None:
    """The position in `group` of the member traced as its own base, else None (a group of one member: only one
    over its whole storage, which that member covers, a non-leaf: a leaf that requires grad still runs as a view of
    the base, which the rules for leaves grown over their storage (storage_swaps.py) are written for)."""
    reals = [flat.values[layout.leaves[m].owner] for m in group.members]
    alone = len(reals) == 1 and isinstance(reals[0], torch.Tensor) and not reals[0].is_leaf
    if (
        (len(reals) < 2 and not (group.whole_storage and alone))
        or group.base_numel == 0
        or any(not isinstance(r, torch.Tensor) or is_traceable_subclass(r) for r in reals)
    ):
        return None
    for pos, (real, (size, stride, offset)) in enumerate(zip(reals, group.member_meta, strict=True)):
        assert isinstance(real, torch.Tensor)
        if real._is_view() or not real.requires_grad:
            continue
        dims = [*size, *stride, offset]
        if not all(isinstance(d, int) for d in dims) or offset != 0:
            return None
        shape, strides = [int(d) for d in size], [int(d) for d in stride]
        if math.prod(shape) != group.base_numel or not dense_strides(shape, strides):
            return None
        others = [r for r in reals if r is not real]
        if all(_runs_detached(r) or (views and isinstance(r, torch.Tensor) and r._base is real) for r in others):
            return pos
        return None
    return None


def _runs_detached(member: object) -> bool:
    """A member that is no view and requires no grad (`x.detach()` passed beside x): it runs detached from the group
    either way, no view, as eager's is (Note [Aliased Inputs In Training])."""
    return isinstance(member, torch.Tensor) and not member._is_view() and not member.requires_grad


def autograd_apart(layout: DenseLayout, values: Sequence[object], m: DenseIndex) -> bool:
    """Plain dense leaf `m` shares storage with another input, and its autograd root (its `._base`, else itself) is
    no other member of its alias group nor another member's `._base`: autograd relates no other member to it
    (`x.detach()` passed beside x), so eager records a write to it on it alone (Note [Inputs Written In Training]).
    Not where it is passed twice. `values`: the real inputs (FlatInputs.values). Guarded by `apart_guards`."""
    real = values[layout.leaves[m].owner]
    group = next((g for g in layout.groups if m in g.members), None)
    if group is None or not isinstance(real, torch.Tensor) or is_traceable_subclass(real):
        return False
    root = real._base if real._base is not None else real
    others = [values[layout.leaves[o].owner] for o in group.members if o != m]
    return bool(others) and all(
        isinstance(o, torch.Tensor) and o is not real and o is not root and o._base is not root for o in others
    )


def apart_guards(layout: DenseLayout, accesses: Sequence[str], apart: Collection[DenseIndex]) -> list[str]:
    """Guard conditions (`accesses`: per dense leaf, the guard's expression for it) that each member of `apart`, a
    member the compile found `autograd_apart` (LeafMutation.history_of_its_own), stays so."""
    conds = []
    for g in layout.groups:
        for m in g.members:
            if m not in apart:
                continue
            x = accesses[m]
            root = f"({x} if {x}._base is None else {x}._base)"
            conds += [f"{accesses[o]} is not {root} and {accesses[o]}._base is not {root}" for o in g.members if o != m]
    return conds


class _StorageMoved(Exception):
    """The program moved a tensor to another storage in a run with Analysis.own_base_views (Note [Aliased Inputs In
    Training]): analyzed again from the base."""


def check_own_base_run(swaps: SwapRecord, views: bool) -> None:
    """Note [Aliased Inputs In Training]: raise _StorageMoved where a run with `views` moved a tensor (set_(), `.data
    =`) or grew one over an input's storage."""
    if views and (swaps.swapped_ids or any(swaps.grown_root(k) in swaps.input_originals for k in swaps.grown_from)):
        raise _StorageMoved


def with_own_base_views(layout: DenseLayout, flat: FlatInputs, analyze: Callable[[bool], _T]) -> _T:
    """`analyze(True)` where some group traces a member as its own base only with views of it among the others,
    it moves no storage and no rule refuses it; else `analyze(False)` (Note [Aliased Inputs In Training])."""
    differs = torch.is_grad_enabled() and any(
        own_base_member(layout, flat, g, True) != own_base_member(layout, flat, g, False) for g in layout.groups
    )
    if differs:
        with contextlib.suppress(_StorageMoved, UnsupportedError):
            return analyze(True)
    return analyze(False)


def own_base_guards(layout: DenseLayout, flat: FlatInputs, accesses: Sequence[str]) -> list[str]:
    """Guard conditions (`accesses`: per dense leaf, the guard's expression for it): each member that a group's own
    base member has among the others only as a view of it stays such a view, and each that runs detached stays no
    view (Note [Aliased Inputs In Training])."""
    conds = []
    for g in layout.groups:
        pos = own_base_member(layout, flat, g, True)
        if pos is None or pos == own_base_member(layout, flat, g, False):
            continue
        root = flat.values[layout.leaves[g.members[pos]].owner]
        for m in g.members:
            member = flat.values[layout.leaves[m].owner]
            if member is not root:
                # (a member that runs detached stays no view; its flag is guarded with every input's)
                base = "None" if _runs_detached(member) else accesses[g.members[pos]]
                conds.append(f"{accesses[m]}._base is {base}")
    return conds


def foreign_root(
    leaf: torch.Tensor, final_storages: set[object], original_storages: set[object]
) -> torch.Tensor | None:
    """Eager's `._base` of a plain output view that does not require grad, where that base is on another storage
    than the view (Note [Outputs Over Another Storage]) and is an intermediate (not on any input's storage)."""
    root = None if leaf.requires_grad else _moved_root(leaf)
    if root is None or root.requires_grad:
        # (an intermediate with history would come out of the compiled autograd.Function as a base: not done)
        return None
    key = storage_key(root)
    return None if key in final_storages or key in original_storages else root


def foreign_base(
    leaf: torch.Tensor,
    finals: Sequence[torch.Tensor],
    original_storages: set[object],
    bases: dict[object, tuple[int, torch.Tensor]],
    grad_set: bool = False,
) -> tuple[LeafSource, int] | None:
    """Where eager's `._base` of a plain output view on another storage is at run time: an input's dense leaf
    (INPUT_ALIAS, its DenseIndex: the leaf's autograd root, `input_root`) or an intermediate base (INTERMEDIATE_ALIAS, its number); None when it is neither
    or the view is on its base's storage (Note [Outputs Over Another Storage]). `grad_set`: a view of an input the
    program set_() there with grad on, which requires grad (Note [set_ Under Grad])."""
    # (a call without grad makes no history: a view requiring grad through its base is rebuilt as one that does not)
    root = None if leaf.requires_grad and not grad_set and torch.is_grad_enabled() else _moved_root(leaf)
    if root is None:
        return None
    # the input itself, or the base an input is a view of: its autograd root
    inputs = [j for j, f in enumerate(finals) if f is root or f._base is root]
    if inputs:
        return LeafSource.INPUT_ALIAS, inputs[0]
    found = bases.get(storage_key(root))
    intermediate = foreign_root(leaf, {storage_key(f) for f in finals}, original_storages)
    if found is not None and intermediate is not None and found[1] is root:
        return LeafSource.INTERMEDIATE_ALIAS, found[0]
    return None


def check_grad_view_of_moved_input(path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor]) -> None:
    """A plain output view that requires grad whose eager `._base` is an input now on another storage: its history
    runs through the input as it was when the view was taken (its set_() under grad, say), which a view rebuilt after
    the call cannot have (Note [Outputs Over Another Storage]). An input laid out over a synthetic base (one of
    several inputs over a storage) that still covers all of it, in its order, is eager's base of the others, and so
    the view's `._base`: the view, set_() onto another storage (under no_grad: `._base` kept), would be rebuilt from
    that storage's tensor, no view of the input. (An input moved off the storage, or covering part of it, is no
    base in eager: the view's `._base` is a tensor not passed.)"""
    root = _moved_root(leaf) if leaf.requires_grad and torch.is_grad_enabled() else None
    if root is not None:
        # a call without grad makes no history: a view of an input view moved onto the leaf's storage is rebuilt from
        # that input, whose `._base` (`root`) it takes, requiring grad through it, as eager's
        key = storage_key(leaf)
        root = None if any(f._base is root and storage_key(f) == key for f in finals) else root
    found = _index_of(root, finals)
    if found is None and root is not None:
        found = next((k for k, t in enumerate(finals) if t._base is root and _covers(t, root)), None)
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of input {found}, on another storage than the one the input ends "
            "on (set_() or `.data =` moved the input, or the view, after the view was taken): eager's view keeps the "
            "input as its `._base` and the autograd history the input had then, which a compiled output rebuilt "
            "after the call cannot have. Return a clone (.clone())"
        )


def check_view_of_input_set_off_it(
    path: str,
    value: torch.Tensor,
    user_tensors: Sequence[torch.Tensor],
    rebuilt_onto_base: bool,
    eager_base: int | None,
) -> None:
    """Refuse a plain output view with no replay that requires grad and whose eager `._base` is an input on another
    storage than the view (`t1 = x.view(16); with no_grad(): t1.set_(y); return t1.view(-1)`): rebuilt from its
    storage, it would be no view of the input, or a view of another (Note [Outputs Over Another Storage]).
    `eager_base`: `eager_base_input_off`, where the run's `._base` is not eager's."""
    found = _index_of(_moved_root(value) if value.requires_grad and not rebuilt_onto_base else None, user_tensors)
    found = eager_base if found is None and not rebuilt_onto_base else found
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of tensor input {found}, taken from a view of it that the program "
            "set_() (or assigned `.data`) onto another storage: eager's `._base` is the input, on another storage "
            "than the view, which a compiled output rebuilt with autograd history cannot be (Note [Outputs Over Another "
            "Storage]). Return the set_() view itself, or a clone"
        )


def eager_base_input_off(
    swaps: SwapRecord, value: torch.Tensor, outputs: Sequence[object], user_tensors: Sequence[torch.Tensor]
) -> int | None:
    """The input (tensor position) that eager's `._base` of output `value` is, on another storage than `value`, where
    the run's view chain of `value` ends at an input view the program moved (`.data =` or set_()): eager's view of it
    keeps that input's `._base`, the run's chain stops at the input (the record's fact, asked only there)."""
    root = swaps.view_root(value, through_swaps=True)
    moved_input = id(root) in swaps.moved() and any(root is u for u in user_tensors)
    record = swaps.eager.record() if moved_input and value.requires_grad and swaps.eager is not None else None
    k = next((k for k, v in enumerate(outputs) if v is value), None)
    if record is None or k is None or k >= len(record.outputs) or (node := record.outputs[k]) is None:
        return None
    facts = record.try_get_final(node)
    base = None if facts is None or facts.base is None else record.try_get_final(facts.base)
    if facts is None or base is None or base.storage == facts.storage or base.node not in record.inputs:
        return None
    return [n for n in record.inputs if n is not None].index(base.node)


def check_moved_view_of_grad_intermediate(
    path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor], input_storages: set[object], bases: set[object]
) -> None:
    """Refuse a plain output view whose eager `._base` is an intermediate with autograd history on another storage,
    that the graph does not return as an intermediate base (`bases`: their storages): `t1 = t0.as_strided(...)` under
    no_grad, then `t1.data = x`. That base is eager's to read, but `foreign_root` gives none
    that requires grad, and a view rebuilt over the output's storage has the wrong `._base` (Note [Outputs Over Another
    Storage])."""
    root = _moved_root(leaf)
    if root is None or not root.requires_grad or any(f is root for f in finals):
        return
    key = storage_key(root)
    if key not in input_storages and key not in bases:
        raise UnsupportedError(
            f"{path} is a view whose `._base` is an intermediate with autograd history that set_() or `.data =` left "
            "on another storage: eager returns a view of that intermediate, which a compiled output cannot be here "
            "(Note [Outputs Over Another Storage]: supported where the base does not require grad). Return a clone "
            "(.clone())"
        )


def _covers(t: torch.Tensor, root: torch.Tensor) -> bool:
    """Whether `t` holds every element of `root`'s storage span, in order (a contiguous tensor over the same storage,
    at the same offset, with as many elements)."""
    return (
        storage_key(t) == storage_key(root)
        and t.storage_offset() == root.storage_offset()
        and t.numel() == root.numel()
        and t.is_contiguous()
    )


def _index_of(root: torch.Tensor | None, tensors: Sequence[torch.Tensor]) -> int | None:
    """The position of `root` itself (not an equal tensor) among `tensors`, if there."""
    return None if root is None else next((k for k, t in enumerate(tensors) if t is root), None)


def _moved_root(leaf: torch.Tensor) -> torch.Tensor | None:
    if is_traceable_subclass(leaf) or not leaf._is_view():
        return None
    root = leaf._base
    if root is None or is_traceable_subclass(root) or storage_key(root) == storage_key(leaf):
        return None
    return root


def left_storage_refusal(
    path: str, base: torch.Tensor, view: torch.Tensor | None, swaps: SwapRecord
) -> UnsupportedError:
    """An output whose view chain does not end at its storage's owner (functional_run's `intermediate_bases`):
    `base` is where the chain of `view` (its first recorded view, if any) ends."""
    return _left_storage_refusal(path, base, _copied_below_autograd(view, swaps))


def _copied_below_autograd(leaf: torch.Tensor | None, swaps: SwapRecord) -> object | None:
    """The op recorded as a view up `leaf`'s chain that copied instead: a CompositeImplicitAutograd one whose schema
    declares an alias (reshape(), flatten()) reaches the swap mode undecomposed inside a subclass's __torch_dispatch__
    (below autograd), and where the layout forbids a view its result has a storage of its own."""
    t = leaf
    while t is not None and (record := swaps.views.get(id(t))) is not None:
        moved = id(t) in swaps.swapped_ids
        if record.below_autograd and not moved and storage_key(record.source) != storage_key(t):
            func: object = record.func
            return func
        t = record.source
    return None


def _left_storage_refusal(path: str, base: torch.Tensor, copied_by: object | None = None) -> UnsupportedError:
    """An output whose view chain does not end at its storage's owner (`intermediate_bases`); `copied_by`: the op
    inside a subclass's dispatch that copied where it was taken for a view (`_copied_below_autograd`)."""
    if copied_by is not None:
        # a column slice whose scale is `scale.view(...)[:, a:b].flatten()` (a copy) and whose data is a view
        return UnsupportedError(
            f"{path} is a view whose subclass's __torch_dispatch__ made an inner tensor by {copied_by}, which copied "
            "(its source's layout allows no view): eager's output is a view over that copy, which the compiled "
            "code cannot rebuild (Note [Autograd Sees The Wrapper]). Return a clone (.clone()) of the view, or make "
            "the subclass's view op return views of its input's inner tensors"
        )
    if is_traceable_subclass(base):
        # `(x * 2).values()` of an NJT x that shares its offsets with the input: the chain leads to a wrapper the
        # program computed, whose inner tensors are no bases here
        return UnsupportedError(
            f"{path} is a view of a {type(base).__name__} the program computed (eager's `._base` is that "
            f"{type(base).__name__}); the compiled code does not rebuild such an intermediate as a base (Note "
            "[Autograd Sees The Wrapper]). Return a clone (.clone()) of the view, or the subclass tensor itself"
        )
    # `t1 = t0.diagonal(); t0.data = x`: no tensor holds the storage t1 views
    return UnsupportedError(
        f"{path} is a view of an intermediate that `.data =` or set_() then moved to another storage; returning a "
        "view of the storage it left is not supported. Return a clone (.clone()) instead"
    )
