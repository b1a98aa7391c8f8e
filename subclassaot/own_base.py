"""Stage `trace` (training), a synthetic base's clone: where a plain input of an alias group is its own base in
eager, the trace runs that input as the clone and the base as a view of it (Note [Plain Inputs Traced As Their Own
Base]).

Input: `DenseLayout`, `FlatInputs` (the real inputs) and the functional value of a synthetic base placeholder.
Output: the base's clone, and the dense leaves made from the clone of one member instead.
Invariants: the clone holds the base's elements at the base's storage positions; values are those of a plain clone.
"""

from __future__ import annotations

import math

import torch

from subclassaot.protocol import is_traceable_subclass
from subclassaot.schemas import AliasGroup, AliasGroupRef, DenseIndex, DenseLayout, FlatInputs, Meta
from subclassaot.swap_record import dense_strides

# Note [Plain Inputs Traced As Their Own Base]
# Plain inputs that share storage are traced as views of their group's synthetic base (Note [Synthetic Bases]),
# which training clones (Note [Training Through A Joint Graph]). A write to a member then goes through autograd's
# CopySlices on that clone, whose backward gives the write's gradient the type of the base's incoming gradient (Note
# [Writes To Plain View Inputs Make Plain Gradients]). Where the member's real tensor is no view (f(x, x)), eager's
# write is recorded on x itself: `x.mul_(pair)` sends x the PairTensor gradient of MulBackward (fuzz seed 10000
# #1788: a plain gradient where eager's is a PairTensor). So where a plain member that requires grad is no view,
# its elements are the base's exactly (offset 0, dense strides), and every member is that one object, the trace
# runs it as a clone of the base's elements in its own layout and the base as a flat view of that clone. Values are
# the same; writes are recorded as eager records them. The runtime's base is an as_strided view of x
# (desugar.graph_example_inputs), through which the base's gradient reaches x with its type. The member requires
# grad and so is a leaf (never a view) or guarded on being no view (guards.py). Not yet with views of x among the
# members (x and x.t(): seed 11000 #6100): the views' `._base` in the joint run then changes, and rules that read it
# refuse programs that pass today (test_training_grad_writes view_before_member_set).


def clone_synthetic_base(
    layout: DenseLayout, flat: FlatInputs, k: int, value: torch.Tensor
) -> tuple[torch.Tensor, dict[DenseIndex, torch.Tensor]]:
    """The clone of synthetic base placeholder `k` (functional `value`) the program runs on, and where the group's
    members are made from the clone of their member rather than from it, those members (Note [Plain Inputs Traced
    As Their Own Base])."""
    item = layout.graph_inputs[k]
    assert isinstance(item, AliasGroupRef), "BUG: not a synthetic base"
    group = layout.groups[item.group]
    root = _own_base_member(layout, flat, group)
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


def _own_base_member(layout: DenseLayout, flat: FlatInputs, group: AliasGroup) -> int | None:
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
        return pos if all(r is real for r in reals) else None
    return None
