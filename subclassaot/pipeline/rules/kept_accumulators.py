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

# Note [Gradient Accumulators Of Leaves]
# Eager: a leaf that requires grad feeds the accumulator alive when a node reading it was made, and the engine reduces
# every gradient reaching an accumulator to the size it recorded when it was made (or raises where that does not expand
# to the gradient's). `.data =` keeps the leaf's accumulator where one is alive; set_() (under no_grad: with grad it
# raises) gives the leaf a new one, even `x.set_(x)`: nodes made before feed the old, uses after the new. One is alive
# where an op with grad read the leaf before and its result is still held, so whether eager's backward raises depends
# on what lives: nothing per call may be kept by a reference cycle until a collection (`_rewrap` recurses through the
# module-level `_build`; regenerate.build_outputs drops its hold on itself once the outputs are built).
# - `.data =`, kept: a plain input swapped only by `.data =` within its own storage gets its layout by `.data =` too,
#   not set_(). The joint trace reduces the graph's gradients to the old size already; reads the runtime replays after
#   the epilogue must find the old accumulator too, and the Function may hold none (the leaf goes in detached), so the
#   runtime takes it before the epilogue and holds it until the outputs are built (`kept_accumulators`). The functional
#   run keeps every result, so analyze asks eager, run on static fakes where results die as in eager
#   (backward_probe.eager_accumulator_sizes): where the outputs' graphs reach an accumulator of the leaf in another
#   size (the read before went into a temporary that died), eager's reads after made a new one, refused as below.
# - `.data =`, made afresh on a plain leaf: a read with grad by a non-view op at another size than the leaf had would be
#   reduced to the old size by the trace where eager's has the new one: refused with the no_grad set_() it mirrors
#   (Note [Leaves Laid Out Anew Under no_grad]). Views replayed after the epilogue make the new one as eager's reads do.
# - `.data =`, made afresh on a subclass leaf (its inner tensors keep their sizes, so gradients keep theirs): where the
#   graph reads the leaf after the assignment, the runtime makes the accumulator first, in the size the program read it
#   at (a `.data =` of that size with zero strides, the accumulator taken, the old metadata given back) and holds it
#   until the Function's edge does. Only for inputs that are leaves when called; an accumulator already alive stays. A
#   traced backward that fails the clone's size check (`x0.sum()`) is refused (refuse_unreduced_assigned_gradients);
#   where the new size does not expand to the old, ours raises for every backward through the Function: a known gap.
# - set_() renews: x.set_(x) changes nothing else, so the trace sees no swap; the runtime renews the accumulator by
#   set_() of the input to itself under no_grad, before the call where the program read the leaf with grad only after
#   its last such set_() (`Analysis.self_set_first`: eager's nodes then feed the accumulator the returned leaf feeds),
#   after it otherwise. A read is an op with grad, no view op, of the leaf or a view of it wherever taken (the set_()
#   moved the counter the views share). Read before and after the last set_(), eager's nodes feed two accumulators and
#   the Function's one edge cannot: a backward error is refused where such a leaf is an input and an output is (a view
#   of) an input (backward_trace's refuse_reads_around_self_set). Other set_() calls are replayed as set_() already.


def note_grad_reads(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
    """After an op of the program (Note [Gradient Accumulators Of Leaves]): note the leaves it read with grad."""
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
            _note_accumulator_read(record, a)  # Note [Gradient Accumulators Of Leaves]
        if id(a) not in record.data_sets and id(a) not in record.wrapper_data:
            record.grad_read.add(id(a))
        elif id(a) in record.wrapper_data and id(a) not in record.kept_accumulators:
            record.assigned_reads.setdefault(id(a), tuple(a.shape))  # Note [Gradient Accumulators Of Leaves]
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


def assigned_accumulator_size(record: SwapRecord, t: torch.Tensor) -> tuple[int | sympy.Expr, ...] | None:
    """Note [Gradient Accumulators Of Leaves]: the size of subclass input `t` at the first read with grad
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
    [Gradient Accumulators Of Leaves])."""
    read = {id(a), record.family_of(a)}
    if a._is_view() and a._base is not None:
        read.add(id(a._base))
    record.grad_reads.update(read)
    record.read_after_self_set.update(read & record.self_sets)


def note_self_set(record: SwapRecord, t: torch.Tensor) -> None:
    """The program's `t.set_(t)` under no_grad (Note [Gradient Accumulators Of Leaves])."""
    record.self_sets.add(id(t))
    record.read_after_self_set.discard(id(t))  # reads after the last one only
    if id(t) in record.grad_reads:
        record.read_before_self_set.add(id(t))


def self_set_order(record: SwapRecord, t: torch.Tensor) -> str | None:
    """Where an op with grad read `t`, which the program set_() to itself under no_grad, relative to the last such
    set_(): "before", "after", "both" (None: not so set_(), or never read; Note [Gradient Accumulators Of
    Leaves])."""
    if id(t) not in record.self_sets:
        return None
    before, after = id(t) in record.read_before_self_set, id(t) in record.read_after_self_set
    return {(True, True): "both", (True, False): "before", (False, True): "after"}.get((before, after))
