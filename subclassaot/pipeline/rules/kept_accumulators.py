"""Gradient accumulators of autograd leaves across `.data =`: which one eager's reads after an assignment feed, as the
functional run sees it, and the runtime's hold on the one eager keeps.

Input: the `_DataMode` of storage_swaps.py calls `note_grad_reads` after each op of the program and
`note_data_assignment` at each `.data =`. Output: `SwapRecord.kept_accumulators` (read by analyze) and
`SwapRecord.read_after_hidden_resize` entries (refused by hidden_set_rules); the runtime's hold on the accumulators
is runtime/steps.py's `hold_accumulators` and `make_assigned_accumulators`. Invariants: records only; nothing here
changes a tensor.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import grad_fn_raises, symint_expr

__all__ = [
    "assigned_accumulator_size",
    "note_data_assignment",
    "note_grad_reads",
    "note_self_set",
    "self_set_order",
]

# Note [Accumulators Kept Through .data =]
# `x.data = v` on an autograd leaf that requires grad keeps the leaf's gradient accumulator where one is alive then,
# and the engine reduces every gradient reaching it to the size it recorded when it was made (Note [data Assignment
# Keeps A Leaf's Accumulator]). One is alive where an op with grad read the leaf before and its result is still
# held (by references: no cycle may hold one until a collection, Note [Rewrapping Holds No Cycle]): in a program whose results are its locals, once any op with grad read the leaf before the assignment (the
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
#   eager's gradient): refused with the no_grad set_() it mirrors (Note [Leaves Laid Out Anew Under no_grad]). Views
#   the runtime replays after the epilogue make the new accumulator as eager's reads do. A wrapper
#   subclass keeps its inner tensors through `.data =` (Note [Wrapper Data Assignment]): its gradients keep their
#   sizes, and the compiled ones matched eager's (or its backward error: fuzz seed 41000 #2043) where checked; one
#   read after the assignment gets its accumulator then (Note [Subclass Accumulators Made After .data =]).


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
    read = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    view_op = view and not any(r is a for r in results for a in read)  # not an in-place op on a view
    for a in read:
        if not a.requires_grad:
            continue
        if not view_op:
            _note_accumulator_read(record, a)  # Note [Reads Around A set_ That Renews An Accumulator]
        if id(a) not in record.data_sets and id(a) not in record.wrapper_data:
            record.grad_read.add(id(a))
        elif id(a) in record.wrapper_data and id(a) not in record.kept_accumulators:
            record.assigned_reads.setdefault(id(a), tuple(a.shape))  # Note [Subclass Accumulators Made After .data =]
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


# Note [Subclass Accumulators Made After .data =]
# A tensor subclass leaf that requires grad, whose `.data =` no op with grad read before (so no accumulator was kept),
# gets its accumulator at the first read with grad after: in the wrapper size it has then, to which the engine
# reduces every gradient reaching it, or raises where that size does not expand to the gradient's (its inner tensors
# keep their sizes, so SinBackward0 of `x0.data = x1; x0.sin()` gives one of the old size). The compiled Function
# takes the input attached before the epilogue repeats the assignment, which would make the accumulator at the size
# the input came with: the Function's gradient (built at that size from ctx.input_meta) and every later one (the
# input returned, at its new size) would be checked against the wrong size. So where the graph reads the leaf after
# the assignment, the runtime makes the accumulator first, in the size the program read it at: it gives the wrapper
# that size (zero strides: the wrapper's storage holds it) by `.data =`, takes the accumulator, gives the old
# metadata back, and holds the accumulator until the Function's edge does. An accumulator already alive (the
# caller holds a graph through the leaf) is the one eager's read finds too, and stays. Only for inputs that are
# autograd leaves when called (a non-leaf's grad_fn recorded its size when it was made, in eager as here).
# The joint trace still runs the leaf as a clone of its old size, whose node checks each gradient against that size:
# exact where every gradient reaching the leaf has its inner size (x0.sin(), x0.mul(2), views of x0). A traced
# backward that fails that check (`x0.sum()`: a gradient of the new size) is refused
# (refuse_unreduced_assigned_gradients). A known gap: where the new size does not expand to the old one, our backward
# raises at that check for every backward reaching the leaf through the Function, eager's only where one does.


def assigned_accumulator_size(record: SwapRecord, t: torch.Tensor) -> tuple[int | sympy.Expr, ...] | None:
    """Note [Subclass Accumulators Made After .data =]: the size of subclass input `t` at the first read with grad
    after its `.data =` (None: none, or one before the assignment kept the accumulator)."""
    size = record.assigned_reads.get(id(t))
    if size is None or id(t) in record.kept_accumulators:
        return None
    return tuple(symint_expr(d) for d in size)


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


def _note_accumulator_read(record: SwapRecord, a: torch.Tensor) -> None:
    """`a`, read by an op with grad that is no view: note it, and the tensor it is a view of, as read then (Note
    [Reads Around A set_ That Renews An Accumulator])."""
    read = {id(a), record.family_of(a)}
    if a._is_view() and a._base is not None:
        read.add(id(a._base))
    record.grad_reads.update(read)
    record.read_after_self_set.update(read & record.self_sets)


def note_self_set(record: SwapRecord, t: torch.Tensor) -> None:
    """The program's `t.set_(t)` under no_grad (Note [set_ Renews A Leaf's Accumulator], Note [Reads Around A set_
    That Renews An Accumulator])."""
    record.self_sets.add(id(t))
    record.read_after_self_set.discard(id(t))  # reads after the last one only
    if id(t) in record.grad_reads:
        record.read_before_self_set.add(id(t))


def self_set_order(record: SwapRecord, t: torch.Tensor) -> str | None:
    """Where an op with grad read `t`, which the program set_() to itself under no_grad, relative to the last such
    set_(): "before", "after", "both" (None: not so set_(), or never read; Note [Reads Around A set_ That Renews An
    Accumulator])."""
    if id(t) not in record.self_sets:
        return None
    before, after = id(t) in record.read_before_self_set, id(t) in record.read_after_self_set
    return {(True, True): "both", (True, False): "before", (False, True): "after"}.get((before, after))
