"""Stage `trace` (training), backward errors: which differentiable outputs make the program's own backward raise,
and the backward traced without them (Note [Backward Errors Through Some Outputs Only]).

Input: a `JointSetup` whose joint trace raised, the tangent fakes, and the trace function (joint.trace_joint).
Output: the positions in `diff` whose backward fails alone; the joint traced without their tangents, or None (the
error is then raised for every backward: Note [Backward Errors Are Deferred]); which forward outputs are new values
of which inputs, and which inputs the program returns (what the checks in joint._check_deferred_error read).
Invariants: the returned joint is traced for every diff output (the forward and its outputs are unchanged); only
the failing outputs' tangents stay unread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import torch

from subclassaot.schemas import AliasGroupRef, InputIndex, LeafSource, OutputKind
from subclassaot.trace import UpdateKind

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
# is accumulated, where eager may accumulate some first, by the order autograd runs its nodes: that is checked for
# a backward through the program's outputs, the new values of the inputs it returns included (such a program is
# refused: joint._check_deferred_error); not for a backward the user writes after the call through the new value of
# an input the program does not return (a known gap, as in Note [Backward Errors Are Deferred]).


class TraceJoint(Protocol):
    def __call__(
        self,
        setup: JointSetup,
        tangent_fakes: Sequence[torch.Tensor],
        reach: list[frozenset[int]],
        absent: frozenset[int] = frozenset(),
    ) -> tuple[JointSetup, TracedJoint]: ...


def failing_outputs(
    setup: JointSetup, diff_leaves: Sequence[Sequence[torch.Tensor]], trace: TraceJoint
) -> frozenset[int]:
    """Positions in `setup.diff` whose backward alone fails (Note [Backward Errors Through Some Outputs Only]), for
    a setup whose joint trace failed. `diff_leaves`: per diff output, its dense leaves (to shape its tangents)."""
    if len(setup.diff) < 2:
        return frozenset(range(len(setup.diff)))
    failing = set()
    for p, (d, leaves) in enumerate(zip(setup.diff, diff_leaves, strict=True)):
        with setup.fake_mode:
            tangents = [torch.empty_like(t) for t in leaves]
        try:
            trace(dataclasses.replace(setup, diff=(d,)), tangents, [])
        except RuntimeError:
            failing.add(p)
    return frozenset(failing)


def trace_without_failing(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    failing: frozenset[int],
    trace: TraceJoint,
) -> tuple[JointSetup, TracedJoint] | None:
    """The joint traced without the tangents of the diff outputs at positions `failing` (Note [Backward Errors
    Through Some Outputs Only]); None where every output fails or that backward fails too."""
    if not failing or len(failing) == len(setup.diff):
        return None
    try:
        return trace(setup, tangent_fakes, reach, failing)
    except RuntimeError:
        return None


def input_value_owners(setup: JointSetup) -> dict[int, frozenset[InputIndex]]:
    """Forward-output positions that are new values of inputs (updates, wrapper updates): the inputs each is of."""
    layout, updates = setup.layout, setup.traced.outputs.updates
    owners: dict[int, frozenset[InputIndex]] = {}
    for k, u in enumerate(updates):
        if u.kind is UpdateKind.BASE:
            item = layout.graph_inputs[u.target]
            members = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
            owners[k] = frozenset(layout.leaves[m].owner for m in members)
        else:
            owners[k] = frozenset((layout.leaves[u.target].owner,))
    outputs = setup.traced.outputs
    wrappers_at = len(updates) + outputs.num_fresh + outputs.num_bases
    for j, t in enumerate(setup.wrapper_updates):
        owners[wrappers_at + j] = frozenset((setup.flat.tensor_indices[t],))
    return owners


def returned_inputs(setup: JointSetup) -> frozenset[InputIndex]:
    """The inputs the program returns, or returns views of: eager's backward through its outputs runs through
    their new values."""
    found: set[InputIndex] = set()
    for info in setup.analysis.outputs:
        if info.kind is OutputKind.IS_INPUT and info.input_index is not None:
            found.add(info.input_index)
        elif info.kind is OutputKind.TENSOR:
            found.update(
                setup.layout.leaves[leaf.index].owner for leaf in info.leaves if leaf.source is LeafSource.INPUT_ALIAS
            )
    return frozenset(found)
