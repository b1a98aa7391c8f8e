"""Part of stage `trace` (training): inputs whose history a set_() of their view rebased, and the order eager's
backward runs its nodes in around that set_.

Input: the call, `FlatInputs` (the real values of this call), `DenseLayout`, the `Analysis`.
Output: `refuse_view_set_order(...)`: None, or an UnsupportedError for a program whose backward eager runs in an
order the compiled one does not (Note [Views Of Inputs set_() Under Grad]).
Invariants: only programs with such an input are probed (Note [Probing Eager's Backward]); the probe adds no guard.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import BackwardEnd, grad_output_count, probe_eager_backward
from subclassaot.schemas import Analysis, DenseLayout, FlatInputs

__all__ = ["refuse_view_set_order"]

# Note [Views Of Inputs set_() Under Grad]
# `t0 = x.diagonal(); t0.set_(y)` with grad on, x a non-leaf input that requires grad (on a leaf eager raises): eager
# records the set_ on t0 and rebases x's history on it (x.grad_fn: CopySlices over the set_'s node, which raises in
# backward), while t0 stays a view of x (`t0._base is x`) with y's storage and layout. The epilogue repeats `x.set_(x)`
# under grad (Note [set_ Under Grad]), so x and every view of it rebuilt after the epilogue get a history through a
# raising node; a returned t0 is rebuilt so, by its view chain on x (a subclass view then takes its contents without
# autograd: Note [Wrapper Storage After set_]), by as_strided of x where it stays on x's storage, or as a view of x
# set_() with grad onto another input's storage (Note [Views Set Onto Another Storage]): `._base`, storage,
# layout and version are eager's. A base that did not require
# grad gains it so (an input: Note [Inputs That Gain Grad In Training]; an intermediate: the graph's, set_() by the
# runtime as in Note [Outputs set_() Under Grad]); a returned view of such an
# intermediate is refused (its holder would be a view of a fresh base, not of eager's `._base`).
# Eager's CopySlices node has the set_'s place in the creation order: the nodes the program made after it run
# before it in backward (Note [Probing Eager's Backward]), and one of them may hand a leaf its gradient before the
# set_ raises (`t0 = x[0]; t0.set_(t0); return t0, w * 2`: w.grad is set). Ours are made by the epilogue, after the
# compiled Function's node, and raise before that node runs. So such a program is probed, and refused where the probe
# sees some backward raise after a leaf got its gradient (or cannot run it). Eager's set_ node also has an edge to
# the history of the tensor set_() to, whose gradient then waits behind it: an autograd leaf input (`t0.set_(w);
# return t0, w`) gets none where a backward reaches the node; ours, rebuilt on w's storage, has no such edge, so a
# program whose probe sees any backward reach a raising node is refused there.


def refuse_view_set_order(
    call: Callable[..., object], flat: FlatInputs, layout: DenseLayout, analysis: Analysis
) -> None:
    """Note [Views Of Inputs set_() Under Grad]."""
    rebased = [j for j, m in enumerate(analysis.mutations) if m.view_set_under_grad]
    if not rebased or grad_output_count(call, flat) == 0:
        return  # no output to run a backward through
    ends = probe_eager_backward(call, flat)
    held = [j for j, m in enumerate(analysis.mutations) if m.view_set_source and _grad_leaf(flat, layout, j)]
    if held and (ends is None or any(end is not BackwardEnd.COMPLETES for end in ends.values())):
        path = flat.leaves[layout.leaves[held[0]].owner].path
        raise UnsupportedError(
            f"{path}: the program set_() a view of an input with grad enabled to (a view of) this input, an autograd "
            "leaf that requires grad: eager's set_ node holds back its gradient where a backward reaches that node, "
            "which a compiled output rebuilt on its storage does not (Note [Views Of Inputs set_() Under Grad]). "
            "set_() to a clone of it, or under torch.no_grad()"
        )
    if ends is not None and BackwardEnd.RAISES_AFTER_GRADS not in ends.values():
        return
    paths = ", ".join(sorted({flat.leaves[layout.leaves[j].owner].path for j in rebased}))
    raise UnsupportedError(
        f"{paths}: the program set_() a view of this input with grad enabled, which rebases the input's autograd "
        "history on a node that raises in backward; eager's backward runs the nodes the program made after that "
        "set_() first, and one of them gives an input leaf its gradient before it raises (or the backward could not "
        "be probed), which the compiled backward does not reproduce (Note [Views Of Inputs set_() Under Grad]). "
        "Call set_() under torch.no_grad(), or on a clone"
    )


def _grad_leaf(flat: FlatInputs, layout: DenseLayout, j: int) -> bool:
    real = flat.values[layout.leaves[j].owner]
    return isinstance(real, torch.Tensor) and real.requires_grad and real.is_leaf
