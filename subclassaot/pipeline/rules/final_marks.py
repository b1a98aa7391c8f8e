"""Stage `analyze` and the runtime, output regeneration: outputs whose view chains pass one intermediate, one
before the in-place view ops the program applied to it and one after them, share that object as in eager.

Input: a chain segment (the object it makes, its length, where it ends) and the run. Output: `Replay.marks`
entries, in the token encoding of runtime/output_steps.py, which reads them at run time (`build_order`,
`state_reached`, `use_only_tokens`). Invariants: Note [Output Regeneration].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.runtime.output_steps import MARK_STATES, state_of, state_token
from subclassaot.schemas import Replay

__all__ = ["early_marks", "final_pass_marks", "late_build_seq"]


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
