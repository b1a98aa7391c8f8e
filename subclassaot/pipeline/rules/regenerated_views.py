"""Plain output views assigned `.data =` whose grad_fn eager's autograd regenerates from their base (Note [History
Kept Through .data =]).

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

_GRAD_FN_GETTERS = frozenset({"grad_fn", "is_leaf"})


def note_grad_fn_reads(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], seq_before: int
) -> None:
    """After a call of the program, which began at `seq_before`: note, for each tensor it took whose grad_fn autograd
    read, when (Note [History Kept Through .data =]). Autograd reads them before the op writes anything;
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
    end of the program, its counter last moved at seq `bump` (Note [History Kept Through .data =])?"""
    assigned = record.data_sets.get(id(value))
    if assigned is None or bump <= made:
        return False
    return bump > assigned[0] or record.reads_before_data.get(id(value), -1) < bump


def history_set_at(record: SwapRecord, t: torch.Tensor) -> int:
    """When autograd last set the history of `t`, a view the program took: made, or rebuilt by a read since."""
    found = record.views.get(id(t))
    return max(found.seq if found is not None else -1, record.grad_fn_reads.get(id(t), -1))
