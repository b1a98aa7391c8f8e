"""Refusals where the functional run's storage offsets are not eager's.

Input: an output's `OutputInfo` from the analysis, the functional run, and the per-leaf input mutations.
Output: nothing, or an UnsupportedError naming the output and the rule.
Invariants: only refuses; never changes a plan.
"""

from __future__ import annotations

from subclassaot.errors import UnsupportedError
from subclassaot.functional_run import FunctionalRun
from subclassaot.schemas import LeafMutation, LeafSource, OutputInfo

# Note [Offsets Of Views Of Written Inputs]
# Functionalization regenerates a written tensor from a fresh value, and a view taken of it afterwards reports that
# value's storage offset, not the offset the view has on the input's storage in eager (fuzz seed 8000 #2407: after
# `x0.add_(x0)` on an input at offset 2, `x0.unsqueeze(-2)` reports offset 0 for one inner tensor, 2 for the
# other). The pipeline mostly never reads those offsets: a view of an input is rebuilt by replaying its view chain
# on the input at run time. An output that the program set_() (`Replay.then_set`, the program's own set_) is
# rebuilt from the metadata its leaves had at analysis, so where a leaf is on the storage of an input that was
# written and does not start at offset 0, the rebuilt output would sit at the wrong offset: that is refused.


def check_set_output_offsets(info: OutputInfo, run: FunctionalRun, mutations: tuple[LeafMutation, ...]) -> None:
    """Refuse an output set_() by the program onto a view of a written input at a nonzero offset (see Note)."""
    replay = info.replay
    if replay is None or not replay.then_set or replay.runtime_set:
        return
    for leaf in info.leaves:
        if leaf.source is not LeafSource.INPUT_ALIAS or not mutations[leaf.index].data:
            continue
        offset = run.originals[leaf.index].storage_offset()
        if isinstance(offset, int) and offset == 0:
            continue
        raise UnsupportedError(
            f"{info.path}: the program set_() this output onto a view of an input that it also writes in place and "
            "that starts at a nonzero storage offset; the offsets of such views are not known when compiling (Note "
            "[Offsets Of Views Of Written Inputs]). Return a clone, or pass the input at storage offset 0"
        )


__all__ = ["check_set_output_offsets"]
