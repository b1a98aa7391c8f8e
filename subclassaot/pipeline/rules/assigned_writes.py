"""Stage `analyze`, plain inputs written with grad after a `.data =` gave them another storage: which leaves the
epilogue writes with their own history (LeafMutation.written_after_data), and the refusal of what it cannot.

Input: the `FunctionalRun` and `DenseLayout` (marks), then `FlatInputs`, `Analysis` and the user fakes (checks).
Output: per dense leaf, whether the rule applies; an UnsupportedError for what is refused. Invariants: pure reads of
the run's records (Note [Writes With Grad After .data =]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import Analysis, AssignedWrite, DenseLayout, FlatInputs
from subclassaot.torch_internals import symint_expr

__all__ = ["assigned_write", "check_assigned_writes"]

# Note [Writes With Grad After .data =]
# Eager: a swap autograd does not see (`.data =`, or set_() under no_grad) gives x another storage and metadata but
# keeps x's own history and version counter. A write with grad through x after it (or through a view of it) records on
# x's history (MulBackward0, or CopySlices, over x's grad_fn), not on the history of the tensor whose storage x now
# shares, whose values change but whose history does not. The functional run sees a write to that other storage: x had
# no data mutation, the epilogue only repeats the swap, and x would keep its old grad_fn, missing the write. So, for
# `x0.data = x1; x0[:, 0:2].mul_(-1.0); return x0`, x0 a non-leaf input that requires grad:
# - such a leaf (LeafMutation.written_after_data) gets a FINAL update, the graph's x0 as it ends, differentiated in the
#   joint through the history the trace recorded on it; the epilogue copies it into x0 with grad after repeating the
#   `.data =` (runtime.epilogue_plan.copy_into). x0's grad_fn is then a CopyBackwards over the Function's, whose backward gives
#   eager's gradients (x0's old history gets zeros from the copy, and its share through the Function).
# - sizes: the engine checks those zeros against the size recorded on x0's old history (its size when the call began),
#   and eager's write checks its gradient against that same size, at the size its `.data =` gave it: both pass (with
#   sum_to where it expands), or both raise in a backward through x0. There (AssignedWrite.AFTER_RAISING) the FINAL
#   value is copied in with grad but not differentiated, as the joint's backward through the write would fail in the
#   trace: x0's CopyBackwards then raises alone.
# - refused: an in-place view op on x0 after its `.data =` (eager's node turns the gradient back to the written size:
#   AssignedWrite.RESHAPED); a write with grad before its last `.data =` (eager's history then records a storage x0 no
#   longer has: AssignedWrite.BEFORE); in-place view ops with grad and .data = and no write with grad (`x.data =
#   x.sin(); x.transpose_(0, 1)`: eager's TransposeBackward0, kept by `.data =`, transposes the gradient reaching x's
#   own history, where the epilogue's `.data =` leaves x's grad_fn as it came: AssignedWrite.VIEWED); and writes with
#   grad after a hidden set_ onto another input's storage (`with no_grad(): x.set_(y)`, then `x.mul_(2)`), and their
#   subclass kin on a wrapper set_() under no_grad.
# Writes under no_grad or through a `.data` alias are hidden from autograd; subclass inputs keep their wrapper-level
# rule (Note [Subclass Inputs Mutated In Training]).


def assigned_write(i: int, run: FunctionalRun, in_subclass: bool, storage_changed: bool) -> AssignedWrite | None:
    """Note [Writes With Grad After .data =]: when plain input leaf `i`, which requires grad at the end and was
    assigned `.data =`, was written with grad through itself or a view of it, against its last assignment; None
    where it was not, or the rule does not apply."""
    final, swaps = run.finals[i], run.swaps
    if in_subclass or id(final) not in swaps.swapped_by_data or not final.requires_grad:
        return None
    assigned, written = swaps.data_sets.get(id(final)), swaps.family_visible_seq.get(swaps.family_of(final))
    if assigned is None:
        return None
    if written is None:  # Note [Writes With Grad After .data =]
        viewed = storage_changed and any(r.grad_enabled for r in swaps.inplace_views.get(id(final), []))
        return AssignedWrite.VIEWED if viewed else None
    if written < assigned[0]:
        return AssignedWrite.BEFORE
    if not storage_changed:
        return None
    if any(r.seq > assigned[0] for r in swaps.inplace_views.get(id(final), [])):
        return AssignedWrite.RESHAPED
    if not _expands_to(run.originals[i].shape, final.shape):
        return AssignedWrite.AFTER_RAISING
    return AssignedWrite.AFTER


def check_assigned_writes(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """Refuse the writes of Note [Writes With Grad After .data =] the epilogue cannot give eager's history."""
    for i in range(len(user_fakes)):
        path = flat.leaves[flat.tensor_indices[i]].path
        for j in layout.leaves_of_input[i]:
            m = analysis.mutations[j]
            if m.assigned_write is AssignedWrite.BEFORE:
                raise UnsupportedError(
                    f"{path}: the program writes this input where autograd records it, then assigns its `.data` "
                    "again; eager's history of that write is of a storage the input no longer has, which the "
                    "compiled program does not reproduce (Note [Writes With Grad After .data =]). Write after the "
                    "last `.data =`, or under torch.no_grad()"
                )
            if m.assigned_write is AssignedWrite.VIEWED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, a tensor on another "
                    "storage and changes its layout in place (t_, transpose_, unsqueeze_) with grad enabled; the "
                    "compiled program cannot give it eager's history of that view op (Note [Writes With Grad After "
                    ".data =]). Use the out-of-place view op, or change the layout under torch.no_grad()"
                )
            if m.assigned_write is AssignedWrite.RESHAPED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, writes it where "
                    "autograd records it, and changes its layout in place (t_, unsqueeze_) after the `.data =`; the "
                    "compiled program cannot give it eager's history (Note [Writes With Grad After .data =]). Use the "
                    "out-of-place view op, or write a clone"
                )


def _expands_to(recorded: Sequence[int | torch.SymInt], size: Sequence[int | torch.SymInt]) -> bool:
    """Autograd sums a gradient of `size` back to `recorded` (dims compared as expressions: equal, or 1)."""
    if len(recorded) > len(size):
        return False
    pairs = zip(reversed(recorded), reversed(size), strict=False)
    return all((r := symint_expr(d)) == 1 or r == symint_expr(n) for d, n in pairs)
