"""Stage `trace` (training), a synthetic base's clone: where a plain input of an alias group is its own base in
eager, the trace runs that input as the clone and the base as a view of it (Note [Aliased Inputs In Training]).

Input: `DenseLayout`, `FlatInputs` (the real inputs) and the functional value of a synthetic base placeholder.
Output: the base's clone, and the dense leaves made from the clone of one member instead.
Invariants: the clone holds the base's elements at the base's storage positions; values are those of a plain clone.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord, dense_strides
from subclassaot.schemas import AliasGroup, AliasGroupRef, DenseIndex, DenseLayout, FlatInputs, Meta

_T = TypeVar("_T")

# Plain inputs traced as their own base (Note [Aliased Inputs In Training]). Plain inputs that share storage are
# traced as views of their group's synthetic base, which training clones. A write to a member then goes through
# autograd's CopySlices on that clone, whose backward gives the write's gradient the type of the base's incoming
# gradient (Note [Input Updates]), where eager's write on a member that is no view
# (f(x, x)) is recorded on x itself: `x.mul_(pair)` sends x MulBackward's PairTensor gradient. So where a plain member
# that requires grad is no view, its elements are the base's exactly (offset 0, dense strides), and every member is
# that one object, the trace runs it as a clone of the base's elements in its own layout and the base as a flat view
# of that clone; the runtime's base is an as_strided view of x, through which the base's gradient reaches x with its
# type. The member requires grad and so is a leaf (never a view) or guarded on being no view (guards.py). Where the
# other members are views of x (x and x.t()), they run as views of the clone, as eager's are views of x (guarded:
# `own_base_guards`). That changes their `._base` in the run, so the analysis traces a group so only where the
# program then moves no tensor to another storage (set_(), `.data =`, a growing resize_()) and no rule refuses it,
# else it runs again from the base (`with_own_base_views`); the joint trace does as the analysis did
# (Analysis.own_base_views).


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
    """The position in `group` of the member traced as its own base, else None."""
    reals = [flat.values[layout.leaves[m].owner] for m in group.members]
    if (
        len(reals) < 2
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
        if all(views and isinstance(r, torch.Tensor) and r._base is real for r in others):
            return pos
        return None
    return None


class _StorageMoved(Exception):
    """The program moved a tensor to another storage in a run with Analysis.own_base_views (Note [Aliased Inputs In
    Training]): analyzed again from the base."""


def check_own_base_run(swaps: SwapRecord, views: bool) -> None:
    """Note [Aliased Inputs In Training]: raise _StorageMoved where a run with `views` moved a tensor."""
    if views and (swaps.swapped_ids or swaps.grown_ids):
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
    base member has among the others only as a view of it stays such a view (Note [Aliased Inputs In Training])."""
    conds = []
    for g in layout.groups:
        pos = own_base_member(layout, flat, g, True)
        if pos is None or pos == own_base_member(layout, flat, g, False):
            continue
        root = flat.values[layout.leaves[g.members[pos]].owner]
        for m in g.members:
            if flat.values[layout.leaves[m].owner] is not root:
                conds.append(f"{accesses[m]}._base is {accesses[g.members[pos]]}")
    return conds
