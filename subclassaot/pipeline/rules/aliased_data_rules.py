"""Training rule for `.data =` on plain members of alias groups: which assignments leave the group's gradients as
eager's (Note [Aliased Inputs In Training]).

Input: a group's members, the `Analysis`, and the per-member facts `training_rules` derives (the tensor input of a
member, whether it is grad-free, whether it is an autograd leaf). Output: a bool. Invariants: pure reads of
compile-time records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subclassaot.schemas import Analysis, DenseIndex


def data_assignments_allowed(
    meta: Sequence[DenseIndex],
    members: Sequence[DenseIndex],
    analysis: Analysis,
    input_of: Callable[[DenseIndex], int],
    grad_free: Callable[[int], bool],
    leaf: Callable[[DenseIndex], bool],
) -> bool:
    """Every changed member (`meta`) changed by `.data =` alone, as Note [Aliased Inputs In Training] allows."""

    def alone(m: DenseIndex) -> bool:
        return all(grad_free(input_of(o)) for o in members if input_of(o) != input_of(m))

    return all(analysis.mutations[m].swapped_by_data and (not leaf(m) or alone(m)) for m in meta)
