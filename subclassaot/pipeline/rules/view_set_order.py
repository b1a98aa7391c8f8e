"""Part of stage `trace` (training): inputs whose history a set_() of their view rebased, and the order eager's
backward runs its nodes in around that set_.

Input: the call, `FlatInputs` (the real values of this call), `DenseLayout`, the `Analysis`.
Output: `refuse_view_set_order(...)`: None, or an UnsupportedError for a program whose backward eager runs in an
order the compiled one does not (Note [set_ Under Grad]).
Invariants: only programs with such an input are probed (Note [Probing Eager's Backward]); the probe adds no guard.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import BackwardEnd, grad_output_count, probe_eager_backward
from subclassaot.runtime.steps import early_grad_sets
from subclassaot.schemas import Analysis, DenseLayout, FlatInputs

__all__ = ["refuse_view_set_order"]


def refuse_view_set_order(
    call: Callable[..., object], flat: FlatInputs, layout: DenseLayout, analysis: Analysis
) -> None:
    """Note [set_ Under Grad]."""
    rebased = [j for j, m in enumerate(analysis.mutations) if m.view_set_under_grad]
    if not rebased or grad_output_count(call, flat) == 0:
        return  # no output to run a backward through
    ends = probe_eager_backward(call, flat)
    held = [j for j, m in enumerate(analysis.mutations) if m.view_set_source and _grad_leaf(flat, layout, j)]
    if held and (ends is None or any(end is not BackwardEnd.COMPLETES for end in ends.values())):
        path = flat.leaves[layout.leaves[held[0]].owner].path
        raise UnsupportedError(
            f"{path}: the program set_() a view of an input with grad enabled to (a view of) this input, an autograd "
            "leaf that requires grad: eager's set_ node holds back its gradient (so it does for every leaf behind a "
            "tensor computed from inputs that a view is set_() to) where a backward reaches that node, which the "
            "compiled backward does not (Note [set_ Under Grad]). set_() to a tensor that does not require grad "
            "(a detached clone), or under torch.no_grad()"
        )
    early = set(early_grad_sets(analysis, layout))
    leaves = [t for t, i in enumerate(flat.tensor_indices) if _grad_leaf_value(flat.values[i])]
    if (
        ends is not None
        and BackwardEnd.RAISES in ends.values()
        and early & {t for t, js in enumerate(layout.leaves_of_input) if any(j in rebased for j in js)}
        and leaves
    ):
        # the set_ repeated before the call: the Function's node comes after the raising one and runs first, where
        # eager runs the nodes made before the set_() after it
        path = flat.leaves[flat.tensor_indices[leaves[0]]].path
        raise UnsupportedError(
            f"{path}: the program set_() a view of another input with grad enabled and read it after, and eager's "
            "backward raises at that set_'s node before this autograd leaf gets its gradient from the nodes made "
            "before the set_(); the compiled backward runs them, as one node made after it, first "
            "(Note [set_ Under Grad]). Call set_() under torch.no_grad(), or on a clone"
        )
    if ends is not None and BackwardEnd.RAISES_AFTER_GRADS not in ends.values():
        return
    paths = ", ".join(sorted({flat.leaves[layout.leaves[j].owner].path for j in rebased}))
    raise UnsupportedError(
        f"{paths}: the program set_() a view of this input with grad enabled, which rebases the input's autograd "
        "history on a node that raises in backward; eager's backward runs the nodes the program made after that "
        "set_() first, and one of them gives an input leaf its gradient before it raises (or the backward could not "
        "be probed), which the compiled backward does not reproduce (Note [set_ Under Grad]). "
        "Call set_() under torch.no_grad(), or on a clone"
    )


def _grad_leaf(flat: FlatInputs, layout: DenseLayout, j: int) -> bool:
    return _grad_leaf_value(flat.values[layout.leaves[j].owner])


def _grad_leaf_value(real: object) -> bool:
    return isinstance(real, torch.Tensor) and real.requires_grad and real.is_leaf
