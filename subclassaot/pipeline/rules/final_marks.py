"""Stage `analyze` and the runtime, output regeneration: outputs whose view chains pass one intermediate, one
before the in-place view ops the program applied to it and one after them, share that object as in eager.

Input: a chain segment (the object it makes, its length, where it ends) and the run. Output: `Replay.marks`
entries, in the token encoding of runtime/output_steps.py, which reads them at run time (`build_order`,
`state_reached`, `use_only_tokens`). Invariants: Note [Views Across In-Place View Ops On An Intermediate].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.runtime.output_steps import MARK_STATES, state_of, state_token
from subclassaot.schemas import Replay

__all__ = ["early_marks", "final_pass_marks", "late_build_seq"]

# Note [Views Across In-Place View Ops On An Intermediate]
# `t0 = x.detach(); a = t0.view(-1); t0.t_(); return a, t0.unsqueeze(0)`: eager's outputs share one `._base`, t0,
# which a was viewed from before the t_() and the second output after it. Note [Views Sharing An Intermediate] names
# t0 as it was before (a's chain: a mark with token id(t0), and Replay.base_after applies the t_() to a's `._base`
# once every output is built). A chain that passes t0 after the first j of its in-place view ops (its segment is the
# view op that made t0, then those) names it in each state 0..j: id(t0) for state 0, then a token of state i that is
# never an id() (`state_token`). At run time it takes t0 in the latest state an earlier chain made, applies the ops
# from there to its own state (advancing t0's counter as eager's did, after the earlier views were taken), and hands
# t0 out in that state only: it changed the object the earlier states name. Outputs are built in order of the states
# they pass through (`build_order`), and Note [In-Place View Ops On A Base After Its Views] applies only the ops past
# the state a chain left the `._base` in. Fuzz: the strict xfail test_views_of_one_detach_transposed_in_place_between
# (test_view_bases.py). Not for views rebuilt before the epilogue (their own order).


def final_pass_marks(made: torch.Tensor, segment: int, count: int, run: FunctionalRun) -> list[tuple[int, int]]:
    """The marks of a segment of `segment` steps ending at step `count` that makes `made` and then applies the first
    of the in-place view ops the program applied to it, or [] where it does not."""
    ops = run.swaps.inplace_views.get(id(made), [])
    state = segment - 1
    if not 1 <= state <= len(ops) or state >= MARK_STATES or made._is_view() or id(made) in run.swaps.swapped_ids:
        return []
    return [(count - state + i, state_token(id(made), i)) for i in range(state + 1)]


def early_marks(marks: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """`marks` without those of `final_pass_marks`, for a chain replayed before the epilogue."""
    changed = {state_of(t)[0] for _, t in marks if t < 0}
    return tuple((c, t) for c, t in marks if t >= 0 and t not in changed)



def late_build_seq(value: torch.Tensor, replay: Replay, run: FunctionalRun) -> int:
    """Replay.made of an output built after the epilogue (Note [Views That Raise After A Bump])."""
    if replay.then_set:
        sets = run.swaps.wrapper_sets if is_traceable_subclass(value) else run.swaps.plain_sets
        if id(value) in run.swaps.swapped_by_data:
            sets = run.swaps.data_sets
        found = sets.get(id(value))
        if found is not None:
            return found[0]
    record = run.swaps.views.get(id(value))
    seqs = [record.seq] if record is not None else []
    seqs.extend(r.seq for r in run.swaps.inplace_views.get(id(value), []))
    return max(seqs, default=0)
