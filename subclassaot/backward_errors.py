"""Stage `trace` (training), backward errors: which differentiable outputs make the program's own backward raise,
and the backward traced without them (Note [Backward Errors Through Some Outputs Only]).

Input: a `JointSetup` whose joint trace raised, the tangent fakes, and the trace function (joint.trace_joint).
Output: the joint traced without the failing outputs' tangents and their positions in `diff`, or None (the error
is then raised for every backward: Note [Backward Errors Are Deferred]).
Invariants: the returned joint is traced for every diff output (the forward and its outputs are unchanged); only
the failing outputs' tangents stay unread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from subclassaot.joint import JointSetup, TracedJoint

# Note [Backward Errors Through Some Outputs Only]
# A program may write an input so that only a backward through that input's new value fails (x1.mul_(x1) on an
# input x1 that requires grad: MulBackward saved x1's old value), while eager's backward through the outputs it
# returns runs (fuzz seed 7000 #2947, #8804). So where the joint trace raises, each differentiable output is traced
# alone: those whose backward then fails are the failing outputs, and the joint is traced once more with their
# tangents left unread (`absent`). The Function raises the program's error only when one of them gets a tangent
# (eager's backward reaches the failing node then too), else it runs that backward. Where every output fails, or
# the backward without the failing ones fails too, there is no such graph: the error is raised for every backward
# (Note [Backward Errors Are Deferred]). A backward through a failing output and others raises before any gradient
# is accumulated, where eager may accumulate some first, by the order autograd runs its nodes: the program's own
# outputs are checked for that (joint._check_deferred_error); new values of its inputs, differentiated only by a
# backward the user writes after the call, are not (a known gap, as in Note [Backward Errors Are Deferred]).


class TraceJoint(Protocol):
    def __call__(
        self,
        setup: JointSetup,
        tangent_fakes: Sequence[torch.Tensor],
        reach: list[frozenset[int]],
        absent: frozenset[int] = frozenset(),
    ) -> tuple[JointSetup, TracedJoint]: ...


def trace_without_failing(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    diff_leaves: Sequence[Sequence[torch.Tensor]],
    reach: list[frozenset[int]],
    trace: TraceJoint,
) -> tuple[JointSetup, TracedJoint, frozenset[int]] | None:
    """The joint traced without the tangents of the diff outputs whose backward fails alone, and their positions in
    `setup.diff` (Note [Backward Errors Through Some Outputs Only]); None where there is no such joint.
    `diff_leaves`: per diff output, its dense leaves (to shape its tangents alone)."""
    if len(setup.diff) < 2:
        return None
    failing = set()
    for p, (d, leaves) in enumerate(zip(setup.diff, diff_leaves, strict=True)):
        with setup.fake_mode:
            tangents = [torch.empty_like(t) for t in leaves]
        try:
            trace(dataclasses.replace(setup, diff=(d,)), tangents, [])
        except RuntimeError:
            failing.add(p)
    if not failing or len(failing) == len(setup.diff):
        return None
    try:
        found_setup, joint = trace(setup, tangent_fakes, reach, frozenset(failing))
    except RuntimeError:
        return None
    return found_setup, joint, frozenset(failing)
