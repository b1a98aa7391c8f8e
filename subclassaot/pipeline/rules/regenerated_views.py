"""Plain output views assigned `.data =` whose grad_fn eager's autograd regenerates from their base (Note [Plain
Views Assigned .data After A Write]).

Input: the `_DataMode` of storage_swaps.py calls `note_grad_fn_reads` after each call of the program and
`note_assignment_reads` at each plain `.data =`; view_chains asks `stale_at_end` for an output view replayed from an
input and then assigned. Output: the record's `grad_fn_reads` / `reads_before_data`, and the answer.
Invariants: records only; nothing here changes a tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.pipeline.rules.swap_record import SwapRecord

__all__ = ["history_set_at", "note_assignment_reads", "note_grad_fn_reads", "stale_at_end"]

# Note [Plain Views Assigned .data After A Write]
# `t0 = x0.diagonal(1, 0, 1); x1.mul_(-1.0); t0.data = x0; return t0` with grad on, x0 an expand() of the non-leaf
# x1: `.data =` gives t0 x0's size, stride and offset but keeps its version counter (x1's)
# and its view record (t0 stays a view of x1). Reading its grad_fn then finds the counter moved since the view
# recorded it (the write), and autograd regenerates the view's history from its base's current one: for a plain
# view (no view function recorded: no tensor subclass in its chain) an AsStridedBackward0 of the size, stride and
# offset the tensor has *then*, the assigned ones ((2, 2) here, where the diagonal was (1,)). A read of t0 that
# reaches its grad_fn (an op with grad enabled taking it, `t0.grad_fn`, `t0.is_leaf`) after the write and before
# the `.data =` regenerates it earlier, with the view's own metadata, and takes the counter as t0's own: no later
# read regenerates it again without another write. So eager's history at the end is that of the assigned metadata
# exactly where the view's counter moved after the view was made and either after the assignment or with no such
# read in between (`stale_at_end`).
# The runtime replays the output after the epilogue from the input (Replay.then_set with set_by_data), at the
# counter the epilogue leaves: its history would be the replayed view ops' (DiagonalBackward0 of size (1,), whose
# gradient went to the wrong elements). Where eager's is stale at the end, the replay runs at the input's counter at
# entry instead (Replay.stale_view; the mechanism of Note [Views Of Intermediates Written After]), and once the
# counter is back and the `.data =` repeated, the first read of the output's grad_fn regenerates it as eager's. A
# tensor subclass view records view functions and regenerates by them, with the metadata it was taken with: the
# replay's own history, which it has already. Views replayed from an intermediate or an earlier output have no
# counter at entry to take: see view_chains (refused there where eager's would be stale).

_GRAD_FN_GETTERS = frozenset({"grad_fn", "is_leaf"})


def note_grad_fn_reads(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], seq_before: int
) -> None:
    """After a call of the program, which began at `seq_before`: note, for each tensor it took whose grad_fn autograd
    read, when (Note [Plain Views Assigned .data After A Write]). Autograd reads them before the op writes anything;
    the tensor an in-place op writes gets its history rebuilt after the write."""
    name = getattr(func, "__name__", "")
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    if not (owner in _GRAD_FN_GETTERS and name == "__get__") and not torch.is_grad_enabled():
        return
    for a in pytree.tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor):
            record.grad_fn_reads[id(a)] = seq_before
    if torch.is_grad_enabled() and name.endswith("_") and not name.endswith("__") and args:
        if isinstance(args[0], torch.Tensor):
            record.grad_fn_reads[id(args[0])] = record.seq


def note_assignment_reads(record: SwapRecord, target: torch.Tensor) -> None:
    """At `target.data = ...` (before the record's seq advances for it): when autograd last read target's grad_fn."""
    record.reads_before_data[id(target)] = record.grad_fn_reads.get(id(target), -1)


def stale_at_end(record: SwapRecord, value: torch.Tensor, made: int, bump: int) -> bool:
    """Is eager's `value`, a plain view made at seq `made` and last assigned `.data =` (its last swap), stale at the
    end of the program, its counter last moved at seq `bump` (Note [Plain Views Assigned .data After A Write])?"""
    assigned = record.data_sets.get(id(value))
    if assigned is None or bump <= made:
        return False
    return bump > assigned[0] or record.reads_before_data.get(id(value), -1) < bump


def history_set_at(record: SwapRecord, t: torch.Tensor) -> int:
    """When autograd last set the history of `t`, a view the program took: made, or rebuilt by a read since."""
    found = record.views.get(id(t))
    return max(found.seq if found is not None else -1, record.grad_fn_reads.get(id(t), -1))
