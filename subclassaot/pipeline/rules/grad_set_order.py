"""Where the runtime makes the set_ node of an input the program set_() under grad: before the compiled call or in
the epilogue (Note [set_ Under Grad Before The Call]).

Input: the `_DataMode` of storage_swaps.py calls `note_reads_after_grad_set` after each op of the program.
Output: `SwapRecord.read_after_grad_set` (read by analyze into `Analysis.read_after_grad_set`), from which
runtime/steps.py's `early_grad_sets` names the tensor inputs whose set_() the runtime repeats before the call.
Invariants: records only; nothing here changes a tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.pipeline.rules.swap_record import SwapRecord

__all__ = ["early_set_inputs", "intermediate_read_after_grad_set", "note_reads_after_grad_set"]

# Note [set_ Under Grad Before The Call]
# Eager's set_ node (Note [set_ Under Grad]) takes its place in the program's history: the nodes of the ops that read
# or wrote the input with grad after the set_ feed it, so it runs, and raises, only after they have, and those are
# numbered below every node the caller makes on the outputs. The epilogue's set_, made after the compiled Function,
# has edges from the caller's nodes alone, and its node, numbered above all (autograd gives NotImplemented nodes
# no sequence number), raised as soon as they had run: before the caller's nodes of a leaf returned beside it, which
# in eager get that leaf its gradient first (fuzz seed 49000 #3836: `x2.set_(x2); t1 = x1.mul(x1); x2.mul_(t1);
# return x0, x1, t1`, x1 and x2 one PairTensor, x0 a leaf: x0.grad stayed None). So where the program read the
# input with grad after its set_() under grad (`Analysis.read_after_grad_set`), the runtime repeats the set_ before
# the call (set_() of the input to itself: its metadata is the one it came with): the Function's edge to the input
# goes to that node, which waits behind the Function's backward (standing for the program's nodes) as eager's waits
# behind the program's. A read of a view of the input counts, wherever the view was taken: the set_ advanced the
# version counter the view shares, so eager regenerates the view's grad_fn from the input's set_ node (`v =
# x.view(-1); x.set_(x); return x0, x, v * v`). Where the program did not read it after, eager's set_ node is the
# input's last history and the epilogue's set_ stays where it is. Only for an input returned as itself, and read
# with grad before its set_() by no op apart from its own history (an in-place op on it, a view op): eager's set_
# node, which raises when it runs, then runs in every backward the caller takes through the input, and no gradient
# of the program's reads bypasses it. Elsewhere the Function's one edge would send it gradients eager never does
# (`t0 = x0 * 2; x1.set_(x0[1:]); x1.mul_(3.0); return t0`, x1 a view of x0: eager's backward completes), or send
# the gradients of reads before the set_() through it: the epilogue's set_ stays, and the refusal below covers it.
# A plain input set_() to another input's storage keeps its epilogue set_ from that input (Note [set_ Under Grad]):
# its node has an edge to that input's history too, which a set_ before the call cannot give. Where an input set_()
# under grad whose set_ stays in the epilogue is returned beside a leaf the Function takes detached, and the backward
# raises, the program is refused where eager's set_ node waits behind the program's nodes (eager's graph on static
# fakes: the node of an output the Function computes reaches the input's): backward_trace's
# refuse_set_beside_returned_leaves. (A known gap: an input whose set_ is made before the call though no output the
# Function computes reads it after the set_() gets a set_ node that waits behind the Function where eager's waits
# behind no node of the program.)


def note_reads_after_grad_set(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
    """After an op of the program other than set_(): note the tensors set_() under grad before that it read (or
    wrote) with grad, itself or through a view (Note [set_ Under Grad Before The Call])."""
    if not torch.is_grad_enabled():
        return
    if not any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(out)):
        return
    results = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    # a node apart from the input's own history: no view op, nor an in-place op on what it read
    apart = not all(t._is_view() for t in results) and not any(r is a for r in results for a in tensors)
    for a in tensors:
        read = {id(a), record.family_of(a)}
        if a._is_view() and a._base is not None:
            read.add(id(a._base))
        record.read_after_grad_set.update(read & record.grad_set_ids)
        if apart and a.requires_grad:
            record.read_before_grad_set.update(read - record.grad_set_ids)


def early_set_inputs(record: SwapRecord, tensors: Sequence[torch.Tensor], output: object) -> tuple[bool, ...]:
    """Per tensor input: set_() under grad, read with grad after and never apart from its own history before, and
    returned as itself (Note [set_ Under Grad Before The Call])."""
    returned = {id(o) for o in pytree.tree_leaves(output) if isinstance(o, torch.Tensor)}
    return tuple(
        id(t) in record.read_after_grad_set and id(t) not in record.read_before_grad_set and id(t) in returned
        for t in tensors
    )


# Note [Reads Of Intermediates set_() Under Grad]
# `t1 = x0.add(-1.0); t1.set_(x1.t()); return (t1 * 2,)` with grad on, x1 requiring grad: eager records set_'s node
# (NotImplemented) on t1, and a backward through the output reaches it and raises ("derivative for set_ is not
# implemented"). The functional trace records t1 as an alias of x1's storage, whose backward runs: the compiled
# backward would give x1 a gradient (fuzz seed 19000 #3167). An output that is t1 itself, or a view of it taken
# after the set_, gets the set_ node from its holder (Note [Outputs set_() Under Grad]); an input, from the epilogue
# (Note [set_ Under Grad]). Where the program set_() under grad a tensor other than an input, not through a view, and
# read it with grad afterwards, and the history of an output without a holder reaches a set_ node
# (`Analysis.grad_set_intermediate_read`: eager's backward through that output raises, whatever else it does),
# backward_trace probes eager's backward even though the traced
# one ran, and defers eager's error where the probe shows every backward through all of the outputs raising before
# any gradient (Note [Probing Eager's Backward]); elsewhere (the probe sees a backward complete or raise
# after a gradient, or cannot run, or ends at the history node of a non-leaf input's fake first: Note [Probing
# Eager's Backward]) the program is refused, never run with a backward that computes gradients.


def intermediate_read_after_grad_set(
    record: SwapRecord,
    tensors: Sequence[torch.Tensor],
    dense: Sequence[torch.Tensor],
    output: object,
    holders: Sequence[bool],
) -> bool:
    """Did the program set_() under grad a tensor other than an input (nor one of its dense leaves), not through a
    view, and read it with grad after, and does the history of an output reach a set_ node, other than an output
    that gets a holder's set_ node (`holders`, per leaf of `output`: Note [Outputs set_() Under Grad]) (Note [Reads
    Of Intermediates set_() Under Grad])?"""
    inputs = {id(t) for t in (*tensors, *dense)}
    if not any(k in record.read_after_grad_set and k not in inputs for k in record.plain_grad_sets):
        return False
    leaves = pytree.tree_leaves(output)
    stack: list[Any] = [
        _grad_fn(o) for o, holder in zip(leaves, holders, strict=True) if isinstance(o, torch.Tensor) and not holder
    ]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if type(node).__name__ == "NotImplemented":
            return True
        seen.add(id(node))
        stack.extend(parent for parent, _ in node.next_functions)
    return False


def _grad_fn(t: torch.Tensor) -> Any:
    try:
        return t.grad_fn
    except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
        return None
