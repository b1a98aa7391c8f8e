"""Training rule for `.data =` on plain members of alias groups: which assignments leave the group's gradients as
eager's (Note [Data Assignments To Aliased Inputs In Training]).

Input: a group's members, the `Analysis`, and the per-member facts `training_rules` derives (the tensor input of a
member, whether it is grad-free, whether it is an autograd leaf). Output: a bool. Invariants: pure reads of
compile-time records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subclassaot.schemas import Analysis, DenseIndex

# Note [Data Assignments To Aliased Inputs In Training]
# A plain member, not an autograd leaf, whose layout changes only by `.data =` (its last storage swap): eager records
# nothing of the assignment, the member's history stays as it came, and the epilogue's as_strided_ below autograd
# gives it the new layout, as for any member (Note [Metadata Changes Of Aliased Inputs In Training]). Checked (parity
# oracle) on fuzz seed 3000 #792, #9371, seed 5000 #115, #4391, #7093, and on views and clones assigned before or
# after a use, with or without later writes. A leaf keeps the refusal (seed 3000 #784: eager's backward raised
# through the leaf's new layout, ours did not; that leaf was passed twice, one input since Note [One Tensor Passed
# Several Times]) where another input of the group needs grad; a leaf whose group's other inputs are grad-free
# (`detach()`es of it, or of its views: Note [Metadata Changes Of Grad-Free Members]) is the only history there, and
# follows the same path (fuzz seed 44000 #9720: `x1.data = x0.unbind(1)[1]`, x0 a detach() of the leaf x1; checked
# also with uses before and after the assignment, writes to the detached alias, and three members). A set_() under
# no_grad in place of the assignment keeps the refusal (the compiled backward raised where eager's did not).


def data_assignments_allowed(
    meta: Sequence[DenseIndex],
    members: Sequence[DenseIndex],
    analysis: Analysis,
    input_of: Callable[[DenseIndex], int],
    grad_free: Callable[[int], bool],
    leaf: Callable[[DenseIndex], bool],
) -> bool:
    """Every changed member (`meta`) changed by `.data =` alone, as Note [Data Assignments To Aliased Inputs In
    Training] allows."""

    def alone(m: DenseIndex) -> bool:
        return all(grad_free(input_of(o)) for o in members if input_of(o) != input_of(m))

    return all(analysis.mutations[m].swapped_by_data and (not leaf(m) or alone(m)) for m in meta)
