"""The epilogue's per-entry plan, and the writes of new values into inputs that every runner of an entry makes.

Input: a `RuntimePlan`. Output: `EpiloguePlan` (what the epilogue does, decided once per entry); `copy_into` and
`settle_version`, the input writes and version-counter fixes the generic runner (call.py) and the generated one
(straight_line.py) share. Invariants: a write autograd saw in eager is recorded here too, one it did not see is made
under no_grad (Note [Input Updates]); a version counter ends advanced iff eager's did.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from subclassaot.runtime.plan import RuntimePlan
from subclassaot.runtime.steps import copy_point, early_grad_sets
from subclassaot.schemas import LeafMutation, UpdateKind
from subclassaot.torch_internals import get_version, set_version


@dataclass(frozen=True, slots=True, kw_only=True)
class EpiloguePlan:
    """What the epilogue does, decided once per entry so that the per-call path only loops over real work."""

    base_copies: tuple[tuple[int, int], ...]  # (graph input, graph output) for alias-group bases
    original_copies: tuple[tuple[int, int], ...]  # (dense leaf, graph output): values of the original storage
    metadata: tuple[int, ...]  # dense leaves whose metadata or storage changes
    inplace_ops: tuple[int, ...]  # tensor inputs whose in-place view ops are replayed on the real input
    # tensor inputs whose in-place view ops or `.data =` assignments are replayed (Note [Wrapper Data Assignment])
    reshaped: tuple[int, ...]
    final_copies: tuple[tuple[int, int], ...]  # (dense leaf, graph output): values with the final metadata
    versions: tuple[int, ...]  # dense leaves whose version counter is settled to eager's
    grad_sets: tuple[int, ...]  # tensor inputs set_() under grad: Note [set_ Under Grad]
    wrappers: tuple[int, ...]  # tensor inputs (subclasses) whose own metadata or version changes
    # plain tensor inputs set_() to a value requiring grad: See Note [Inputs Written In Training]
    grad_swaps: tuple[int, ...] = ()
    # (tensor input, copy point) where a view's value is copied in before some of its replayed in-place view ops
    # (Note [Stale View Functions]; applied when the real input is a view)
    copy_points: tuple[tuple[int, int], ...] = ()
    # grad_sets repeated before the compiled call instead (Note [set_ Under Grad])
    early_grad_sets: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return (
            not (self.base_copies or self.original_copies or self.metadata or self.final_copies or self.versions)
            and not self.wrappers
            and not self.reshaped
            and not self.grad_sets
            and not self.grad_swaps
        )


def epilogue_plan(plan: RuntimePlan) -> EpiloguePlan:
    analysis, updates = plan.analysis, plan.graph_outputs.updates
    by_kind = {kind: tuple((u.target, k) for k, u in enumerate(updates) if u.kind is kind) for kind in UpdateKind}
    replayed = {t for t, steps in enumerate(analysis.inplace_replay) if steps}
    same = plan.layout.same_wrapper
    by_ops = {
        j
        for t in range(len(plan.layout.trees))
        if t in replayed or (same and same[t] in replayed)
        for j in plan.layout.leaves_of_input[t]
    }
    wrappers = tuple(
        t
        for t, (tree, after) in enumerate(zip(plan.layout.trees, analysis.wrapper_meta_after, strict=True))
        if tree is not None and (after is not None or analysis.wrapper_version_bumped[t])
    )
    return EpiloguePlan(
        base_copies=by_kind[UpdateKind.BASE],
        original_copies=by_kind[UpdateKind.ORIGINAL],
        metadata=tuple(
            j for j, m in enumerate(analysis.mutations) if (m.metadata or m.storage_changed) and j not in by_ops
        ),
        inplace_ops=tuple(sorted(replayed)),
        reshaped=tuple(sorted(replayed | {t for t, d in enumerate(analysis.wrapper_data) if d is not None})),
        final_copies=by_kind[UpdateKind.FINAL],
        versions=tuple(j for j, m in enumerate(analysis.mutations) if m.any or m.version_bumped),
        wrappers=wrappers,
        grad_sets=tuple(
            t
            for t, leaves in enumerate(plan.layout.leaves_of_input)
            if any(analysis.mutations[j].set_under_grad for j in leaves)
        ),
        grad_swaps=_grad_swaps(plan),
        early_grad_sets=early_grad_sets(plan.analysis, plan.layout),
        copy_points=tuple((t, k) for t in sorted(replayed) if (k := copy_point(plan.layout, analysis, t)) is not None),
    )


def _grad_swaps(plan: RuntimePlan) -> tuple[int, ...]:
    """Tensor inputs that gain grad by a storage swap (Note [Inputs Written In Training])."""
    analysis, layout = plan.analysis, plan.layout
    return tuple(
        t
        for t in range(len(layout.trees))
        if not plan.input_requires_grad[t]
        and analysis.requires_grad_after[t]
        and not analysis.requires_grad_set[t]
        and any(analysis.mutations[j].set_under_grad for j in layout.leaves_of_input[t])
    )


def settle_version(t: torch.Tensor, before: int, bumped: bool) -> None:
    """Leave the version counter as eager does: advanced iff eager advanced it (counts may differ)."""
    now = get_version(t)
    if not bumped and now != before:
        set_version(t, before)
    elif bumped and now == before:
        set_version(t, before + 1)


def copy_into(x: torch.Tensor, value: torch.Tensor, mutation: LeafMutation, *, final: bool = False) -> None:
    # A mutation autograd saw in eager is recorded by autograd here too (copy_ outside no_grad), so the input's
    # grad_fn and version match eager; .data and no_grad mutations stay invisible to autograd, as in eager.
    hidden = not mutation.autograd_visible or mutation.hidden_from_autograd or mutation.storage_changed
    # See Note [Input Updates]; written through itself, a leaf that requires grad raises in eager, and
    # so does this copy.
    hidden = hidden or not mutation.visible_through_self
    hidden = hidden and not (final and mutation.written_after_data)  # Note [History Kept Through .data =]
    x, value = once_per_location(x, value)
    if (x.requires_grad or value.requires_grad) and not hidden:
        x.copy_(value)
        return
    before = get_version(x)
    with torch.no_grad():
        x.copy_(value)
    if not mutation.version_bumped:
        set_version(x, before)


def once_per_location(x: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`x` and `value` at index 0 of each dim where `x` repeats one memory location (a zero stride, after `.data =`
    of an expand()): copy_ refuses such a target, and the graph's value, a view of the same
    functional storage, holds one value at every repeat."""
    repeated = [d for d, (sz, st) in enumerate(zip(x.shape, x.stride(), strict=True)) if st == 0 and sz > 1]
    if repeated:
        value = value.expand_as(x)
        for d in repeated:
            x, value = x.narrow(d, 0, 1), value.narrow(d, 0, 1)
    return x, value
