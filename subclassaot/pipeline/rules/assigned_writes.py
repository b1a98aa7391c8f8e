"""Stage `analyze`, plain inputs written with grad after a `.data =` gave them another storage: which leaves the
epilogue writes with their own history (LeafMutation.written_after_data), and the refusal of what it cannot.

Input: the `FunctionalRun` and `DenseLayout` (marks), then `FlatInputs`, `Analysis` and the user fakes (checks).
Output: per dense leaf, whether the rule applies; an UnsupportedError for what is refused. Invariants: pure reads of
the run's records (Note [History Kept Through .data =]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import Analysis, AssignedWrite, DenseLayout, FlatInputs
from subclassaot.torch_internals import symint_expr

__all__ = ["assigned_write", "check_assigned_writes"]

# Note [History Kept Through .data =]
# Eager: a swap autograd does not see (`.data =`, or set_() under no_grad) gives a tensor another storage and metadata
# but keeps its own history and version counter; its gradient flows through that history, checked against the size
# recorded there (sum_to where it expands, an error where not). The functional run sees only the storage it now shares.
# - Outputs (`t = x.add(x); t.data = y; return t`): t stays no view, with AddBackward0. The graph computes it as a fresh
#   output of the Function (the joint traces the same history on the functional t, whose value is y's); where y's
#   storage is an input's, the runtime then assigns `.data` from an alias of the input taken after the epilogue, under
#   no_grad, with t's final metadata (OutputInfo.data_from). A plain view is replayed from its base with its history,
#   then assigned (Replay.set_by_data) where its chain allows. A view of such a t replays from t where t is returned too,
#   else is refused. Refused too: a tensor subclass (Note [Wrapper Data Assignment]) and an alias of an intermediate
#   another output shares.
# - Writes with grad after the swap (`x0.data = x1; x0[:, 0:2].mul_(-1.0); return x0`, x0 a non-leaf input requiring
#   grad) record on x0's own history, not on that of the tensor whose storage x0 now shares; the epilogue would only
#   repeat the swap. So x0 (LeafMutation.written_after_data) gets a FINAL update, differentiated through the history the
#   trace recorded on it, copied in with grad after the `.data =` is repeated (epilogue_plan.copy_into): x0's grad_fn is
#   a CopyBackwards over the Function's. Where the joint's backward through the write would fail
#   (AssignedWrite.AFTER_RAISING) the value is copied in with grad but not differentiated, and x0's node raises alone.
#   Refused: an in-place view op after the `.data =` (RESHAPED), a write with grad before the last `.data =` (BEFORE),
#   in-place view ops with grad and a `.data =` but no write with grad (VIEWED), and writes with grad after a no_grad
#   set_() onto another input's storage (and subclass kin). Subclass inputs keep their wrapper-level rule (Note
#   [Inputs Written In Training]).
# - Plain views assigned after a write (`t0 = x0.diagonal(1, 0, 1); x1.mul_(-1.0); t0.data = x0; return t0`, x0 a view
#   of the non-leaf x1): t0 keeps x1's counter and stays a view. Reading its grad_fn after the counter moved regenerates
#   it by AsStridedBackward0 of the metadata t0 has *then*, the assigned ones; a read reaching its grad_fn between the
#   write and the `.data =` regenerates it earlier and takes the counter as its own. So eager's history at the end is the
#   assigned metadata's exactly where the counter moved after the view and no such read came between (`stale_at_end`).
#   There the runtime replays the output at the input's counter at entry (Replay.stale_view, as in Note [Views That Raise
#   After A Bump]), so the first read after the repeated `.data =` regenerates it as eager's. Subclass views regenerate
#   by their view functions, as the replay already has; views replayed from an intermediate or an earlier output have no
#   counter at entry to take (refused in view_chains where eager's would be stale).


def assigned_write(i: int, run: FunctionalRun, in_subclass: bool, storage_changed: bool) -> AssignedWrite | None:
    """Note [History Kept Through .data =]: when plain input leaf `i`, which requires grad at the end and was
    assigned `.data =`, was written with grad through itself or a view of it, against its last assignment; None
    where it was not, or the rule does not apply."""
    final, swaps = run.finals[i], run.swaps
    if in_subclass or id(final) not in swaps.swapped_by_data or not final.requires_grad:
        return None
    assigned, written = swaps.data_sets.get(id(final)), swaps.family_visible_seq.get(swaps.family_of(final))
    if assigned is None:
        return None
    if written is None:  # Note [History Kept Through .data =]
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
    """Refuse the writes of Note [History Kept Through .data =] the epilogue cannot give eager's history."""
    for i in range(len(user_fakes)):
        path = flat.leaves[flat.tensor_indices[i]].path
        for j in layout.leaves_of_input[i]:
            m = analysis.mutations[j]
            if m.assigned_write is AssignedWrite.BEFORE:
                raise UnsupportedError(
                    f"{path}: the program writes this input where autograd records it, then assigns its `.data` "
                    "again; eager's history of that write is of a storage the input no longer has, which the "
                    "compiled program does not reproduce (Note [History Kept Through .data =]). Write after the "
                    "last `.data =`, or under torch.no_grad()"
                )
            if m.assigned_write is AssignedWrite.VIEWED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, a tensor on another "
                    "storage and changes its layout in place (t_, transpose_, unsqueeze_) with grad enabled; the "
                    "compiled program cannot give it eager's history of that view op (Note [History Kept Through .data "
                    "=]). Use the out-of-place view op, or change the layout under torch.no_grad()"
                )
            if m.assigned_write is AssignedWrite.RESHAPED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, writes it where "
                    "autograd records it, and changes its layout in place (t_, unsqueeze_) after the `.data =`; the "
                    "compiled program cannot give it eager's history (Note [History Kept Through .data =]). Use the "
                    "out-of-place view op, or write a clone"
                )


def _expands_to(recorded: Sequence[int | torch.SymInt], size: Sequence[int | torch.SymInt]) -> bool:
    """Autograd sums a gradient of `size` back to `recorded` (dims compared as expressions: equal, or 1)."""
    if len(recorded) > len(size):
        return False
    pairs = zip(reversed(recorded), reversed(size), strict=False)
    return all((r := symint_expr(d)) == 1 or r == symint_expr(n) for d, n in pairs)
