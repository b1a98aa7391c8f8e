"""Gradient accumulators of autograd leaves across `.data =`: which one eager's reads after an assignment feed, as the
functional run sees it, and the runtime's hold on the one eager keeps.

Input: the `_DataMode` of storage_swaps.py calls `note_grad_reads` after each op of the program and
`note_data_assignment` at each `.data =`; the runtime calls `hold_accumulators` on the real inputs before the
epilogue. Output: `SwapRecord.kept_accumulators` (read by analyze) and `SwapRecord.read_after_hidden_resize` entries
(refused by hidden_set_rules); at run time, the held accumulators. Invariants: records only; nothing here changes a
tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.autograd.graph import GradientEdge, get_gradient_edge
from torch.utils import _pytree as pytree

from subclassaot.protocol import is_traceable_subclass
from subclassaot.swap_record import SwapRecord
from subclassaot.torch_internals import grad_fn_raises

__all__ = ["hold_accumulators", "note_data_assignment", "note_grad_reads"]

# Note [Accumulators Kept Through .data =]
# `x.data = v` on an autograd leaf that requires grad keeps the leaf's gradient accumulator where one is alive then,
# and the engine reduces every gradient reaching it to the size it recorded when it was made (Note [data Assignment
# Keeps A Leaf's Accumulator]). One is alive where an op with grad read the leaf before and its result is still
# held: in a program whose results are its locals, once any op with grad read the leaf before the assignment (the
# functional run keeps every result, so a read into a temporary, `x.data = x.expand(2, -1)`, counts too: a known
# gap, where eager's accumulator dies with the temporary). Without one, eager makes a new accumulator at the first
# read with grad after the assignment, in the leaf's size then.
# - Kept (`kept_accumulators`): the joint trace reduces the gradient of the graph's reads to the leaf's old size
#   already; reads the runtime replays after the epilogue (an output view of the leaf, or the leaf itself) must find
#   the old accumulator too. The compiled Function may hold none (the leaf goes in detached, Note [Unreached Inputs
#   Are Detached]), so the runtime takes the leaf's accumulator before the epilogue and holds it until the outputs
#   are built (fuzz seed 43000 #5247: `t0 = x1.expand((2, -1)); x0.data = t0; return x0.expand((2, 2))`, a PairTensor
#   leaf passed twice: args[0].grad had shape (2, 2) where eager's has (2,)).
# - Made afresh, on a plain leaf: a read by an op with grad that is no view (one whose gradient the graph computes),
#   of the leaf or of a view of it, at another size than the leaf had before the assignment, would get its gradient
#   reduced to the old size by the trace where eager's has the new one (`x0.data = x1; return x0.mul(2)`: twice
#   eager's gradient): refused with the no_grad set_() it mirrors (Note [Plain Leaves set_() To Another Size Under
#   no_grad]). Views the runtime replays after the epilogue make the new accumulator as eager's reads do. A wrapper
#   subclass keeps its inner tensors through `.data =` (Note [Wrapper Data Assignment]): its gradients keep their
#   sizes, and the compiled ones matched eager's (or its backward error: fuzz seed 41000 #2043) where checked.


def note_grad_reads(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
    """After an op of the program (Note [Accumulators Kept Through .data =]): note the leaves it read with grad."""
    if not torch.is_grad_enabled():
        return
    results = [
        t
        for t in pytree.tree_leaves(out)
        if isinstance(t, torch.Tensor) and t.requires_grad and not grad_fn_raises(t) and t.grad_fn is not None
    ]
    if not results:
        return
    view = all(t._is_view() for t in results)
    for a in pytree.tree_leaves((args, kwargs)):
        if not isinstance(a, torch.Tensor) or not a.requires_grad:
            continue
        if id(a) not in record.data_sets and id(a) not in record.wrapper_data:
            record.grad_read.add(id(a))
        if not view and record.fresh_accumulators:
            _note_read_after_assignment(record, a)


def _note_read_after_assignment(record: SwapRecord, t: torch.Tensor) -> None:
    """`t`, read by an op with grad that is no view: mark each leaf a `.data =` left without an accumulator that it
    is, or whose view taken after the assignment it is, where its size is not the one it had before."""
    taken: int | None = None  # when the view below `t` in the chain was taken
    while True:
        fresh = record.fresh_accumulators.get(id(t))
        if fresh is not None and (taken is None or taken > fresh[0]) and tuple(t.shape) != fresh[1]:
            record.read_after_hidden_resize.add(id(t))
        found = record.views.get(id(t))
        if found is None or found.func is torch.ops.aten.detach.default:
            return
        taken, t = found.seq, found.source


def note_data_assignment(record: SwapRecord, target: torch.Tensor, size_before: tuple[Any, ...]) -> None:
    """At `target.data = ...` (before the record's seq advances for it): whether `target`, where it requires grad,
    keeps its accumulator, or gets a new one at its first read with grad (for a leaf: inputs run as views of their
    bases, so what is a leaf is the real input's to say)."""
    if not target.requires_grad or id(target) in record.fresh_accumulators:
        return
    if id(target) in record.grad_read:
        record.kept_accumulators.add(id(target))
    elif id(target) not in record.kept_accumulators and not is_traceable_subclass(target):
        record.fresh_accumulators[id(target)] = (record.seq, size_before)


def hold_accumulators(values: Sequence[object], indices: Sequence[int]) -> list[GradientEdge]:
    """The gradient accumulators of the flat inputs at `indices` (leaves that require grad), made now if none is
    alive: the caller holds them while the epilogue and the output replays run (Note [Accumulators Kept Through
    .data =])."""
    held = []
    for i in indices:
        x = values[i]
        if isinstance(x, torch.Tensor) and x.is_leaf and x.requires_grad:
            held.append(get_gradient_edge(x))
    return held
