"""Stage `trace` (training), backward errors through the new values of written inputs (Note [Backward Errors Are
Deferred], errors through input values only; counters the backward moves): the graph traced without the tangents of
the new values whose backward raises in eager, and the error kept for a backward that gives one of them.

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the traced `BackwardGraph` pieces and eager's probe.
Output: a `BackwardGraph` without those tangents (with `TangentPatterns` saying which backwards raise), or None where
none is found.
Invariants: only eager's errors are kept (the probe's); a backward the probe did not cover is refused when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
import torch.fx

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import (
    BackwardEnd,
    TangentPatterns,
    eager_backward_error,
)
from subclassaot.pipeline.backward_trace.graph import _input_values, _probe, _wrappers_at
from subclassaot.pipeline.joint import (
    JointSetup,
    TracedJoint,
    trace_joint_views,
)
from subclassaot.pipeline.rules.backward_errors import (
    behind_no_grad_views,
    early_leaf_views,
    refuse_returned_view_behind_raise,
)
from subclassaot.runtime.plan import wrapper_write_recorded
from subclassaot.runtime.steps import (
    epilogue_write_hidden,
    training_roots,
)
from subclassaot.schemas import (
    DenseIndex,
    InputIndex,
    LeafSource,
    OutputKind,
    UpdateKind,
)

_SAVED_VERSION_ERROR = "modified by an inplace operation"  # (autograd's unpacking of a saved tensor written since)


def _with_bump_error(
    setup: JointSetup, joint: TracedJoint, error: RuntimeError | None
) -> tuple[RuntimeError | None, frozenset[frozenset[int]] | None]:
    """The traced joint's deferred `error` (with no raising patterns), or, where it traced without one, moved an
    input's counter and eager's backward on fakes fails a saved tensor's version check the traced one passed (Note
    [Backward Errors Are Deferred], counters the backward moves): eager's error and the sets of diff positions whose
    backward raises it before any gradient; (None, None) where the probe saw none fail so (or could not run); refused
    where one fails otherwise."""
    if error is not None or not any(r.bumps for r in joint.backward_reshapes):
        return error, None
    patterns = _probe(setup)
    if patterns is None or all(end is BackwardEnd.COMPLETES for end in patterns.ends.values()):
        return None, None
    error = eager_backward_error(setup.call, setup.flat)
    if error is None or _SAVED_VERSION_ERROR not in str(error):
        return None, None
    verified, early = _deferred_exactly(setup, patterns, joint.reach)
    exact = verified is not None and not early
    if not exact or any(end not in (BackwardEnd.COMPLETES, BackwardEnd.RAISES) for end in patterns.ends.values()):
        raise UnsupportedError(
            f"the program's backward fails in eager ({error}): a custom autograd.Function's backward changes a saved "
            "tensor in place (t_(), a write, ...), which moves the version counter a tensor another node saved shares "
            "with it (views of one storage, or aliased inputs), and that node then raises. The compiled backward "
            "keeps those tensors apart and cannot raise at the same step here (not before every gradient, or not "
            "for every set of outputs a backward goes through) (Note [Backward Errors Are Deferred]); not supported "
            "in training. Change a clone of the saved tensor in the backward instead"
        ) from error
    return error, verified


def _backward_without_input_values(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    patterns: TangentPatterns | None,
) -> tuple[JointSetup, TracedJoint, frozenset[int], frozenset[frozenset[int]] | None] | None:
    """The joint traced without tangents for the new values of inputs, their positions in diff, and the sets
    giving one of those whose backward raises (`_raising_value_sets`), where that is eager's backward through the
    outputs (Note [Backward Errors Are Deferred]); else None."""
    if patterns is None:
        return None
    values = _input_values(setup)
    absent = frozenset(p for p, d in enumerate(setup.diff) if d in values) - patterns.full
    if not absent:
        return None
    if patterns.ends.get(patterns.full) is not BackwardEnd.COMPLETES:
        return None
    # First without the hidden ones alone, which no caller's backward gives: where that traces, the error came
    # from them (an accumulator the trace made at a leaf's old size), and the other new values' tangents are kept
    hidden = absent & _hidden_values(setup)
    for without in (hidden, absent) if hidden and hidden != absent else (absent,):
        try:
            traced_setup, joint = trace_joint_views(setup, tangent_fakes, reach, without)
        except RuntimeError:
            continue
        given = without - hidden  # (hidden values no caller's backward gives)
        return traced_setup, joint, without, _raising_value_sets(setup, given) if given else None
    return None


def _raising_value_sets(setup: JointSetup, values: frozenset[int]) -> frozenset[frozenset[int]] | None:
    """The sets of diff positions giving a tangent at one of `values` (inputs' new values) whose backward eager's
    probe, with those values as roots of their own, sees raise before any gradient (Note [Backward Errors Are
    Deferred]); None where that probe cannot run."""
    owners = _value_owners(setup, values)
    probed = None if owners is None else _probe(setup, values=owners)
    if probed is None:
        return None
    return frozenset(p for p, end in probed.ends.items() if p & values and end is BackwardEnd.RAISES)


def _backward_without_raising_tangents(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    patterns: TangentPatterns | None,
    *,
    exact: bool = True,
) -> tuple[JointSetup, TracedJoint, frozenset[int]] | None:
    """The joint traced without the tangents that no completing backward gives, and their positions in diff, where
    eager's backward through each probed set of outputs raises before any gradient exactly when it gives one of
    those tangents, and completes otherwise (Note [Backward Errors Are Deferred]); else None. Not `exact`: where
    eager's backward through each set that gives none of them completes, however those that give one end (the
    raise deferred as it is without a graph, checked by the caller)."""
    if patterns is None or (exact and patterns.leaf_bypass):
        return None
    hidden = _hidden_values(setup) | _sources_without_tangents(setup)
    unprobed = frozenset(range(len(setup.diff))) - patterns.full
    if not unprobed <= hidden:
        # new values of inputs that no output's backward reaches: probed as roots of their own
        owners = _value_owners(setup, unprobed - hidden)
        patterns = None if owners is None else _probe(setup, values=owners)
        if patterns is None or (exact and patterns.leaf_bypass):
            return None
        unprobed = frozenset(range(len(setup.diff))) - patterns.full
        if not unprobed <= hidden:
            return None  # a tangent no probed backward gives that may reach the graph
    completing = [p for p, end in patterns.ends.items() if end is BackwardEnd.COMPLETES]
    raising = patterns.full - frozenset().union(*completing)
    if (raising and raising == patterns.full) or not raising | unprobed:
        return None  # (none raising: every probed backward completes without the tangents no caller gives)
    for pattern, end in patterns.ends.items():
        if (exact or not pattern & raising) and end is not (
            BackwardEnd.RAISES if pattern & raising else BackwardEnd.COMPLETES
        ):
            return None
    try:
        traced_setup, joint = trace_joint_views(setup, tangent_fakes, reach, raising | hidden)
    except RuntimeError:
        return None
    return traced_setup, joint, raising | hidden


def _value_owners(setup: JointSetup, positions: frozenset[int]) -> frozenset[int] | None:
    """The tensor input positions whose new values are at the diff `positions` (updates of their own leaves, or
    wrapper updates); None where one is another output (an alias group's base, a fresh output)."""
    updates, wrappers, layout = setup.traced.outputs.updates, setup.wrapper_updates, setup.layout
    wrappers_at = _wrappers_at(setup)
    owners: set[int] = set()
    for p in positions:
        d = setup.diff[p]
        if d < len(updates) and updates[d].kind is not UpdateKind.BASE:
            leaf = cast(DenseIndex, updates[d].target)
            owners.add(next(i for i, own in enumerate(layout.leaves_of_input) if leaf in own))
        elif wrappers_at <= d < wrappers_at + len(wrappers):
            owners.add(wrappers[d - wrappers_at])
        else:
            return None
    return frozenset(owners)


def _hidden_values(setup: JointSetup) -> frozenset[int]:
    """Diff positions of inputs' new values that the epilogue writes hidden from autograd: the caller's backward
    never gives them a tangent (runtime.steps.epilogue_write_hidden)."""
    analysis, wrappers = setup.analysis, setup.wrapper_updates
    updates = setup.traced.outputs.updates
    wrappers_at = _wrappers_at(setup)
    dense = {
        p
        for p, d in enumerate(setup.diff)
        if d < len(updates)
        and updates[d].kind is not UpdateKind.BASE
        and epilogue_write_hidden(analysis.mutations[cast(DenseIndex, updates[d].target)], updates[d].kind)
    }
    # ... and new values of tensor subclass inputs the epilogue copies in under no_grad
    return frozenset(dense).union(
        p
        for p, d in enumerate(setup.diff)
        if wrappers_at <= d < wrappers_at + len(wrappers)
        and not wrapper_write_recorded(analysis, setup.layout, wrappers[d - wrappers_at])
    )


def _sources_without_tangents(setup: JointSetup) -> frozenset[int]:
    """Diff positions of the intermediate bases and subclass roots every output over which is a view taken of them
    under no_grad: no caller's backward gives them a tangent (rules/backward_errors.behind_no_grad_views)."""
    bases, roots = behind_no_grad_views(setup.analysis)
    num_bases, wrappers_at = setup.traced.outputs.num_bases, _wrappers_at(setup)
    roots_at = wrappers_at + len(setup.wrapper_updates)
    found = {wrappers_at - num_bases + b for b in bases}
    found.update(roots_at + k for k, r in enumerate(training_roots(setup.analysis)) if r.root_bases in roots)
    return frozenset(p for p, d in enumerate(setup.diff) if d in found)


def _unprobed_values(
    setup: JointSetup, patterns: TangentPatterns | None, among: frozenset[int] | None = None
) -> tuple[tuple[int, str], ...]:
    """BackwardGraph.unprobed_values: the diff positions of inputs' new values that no program output's backward
    reaches (all of them where the probe did not run; `among` those positions only), each with the path of its
    input."""
    outputs, flat, layout = setup.traced.outputs, setup.flat, setup.layout
    wrappers_at = len(outputs.updates) + sum(
        1
        for info in setup.analysis.outputs
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    )
    wrappers_at += outputs.num_bases
    values, found = _input_values(setup), []
    for p, d in enumerate(setup.diff):
        if d not in values or (patterns is not None and p in patterns.full) or (among is not None and p not in among):
            continue
        if d < len(outputs.updates):
            update = outputs.updates[d]
            path = (
                "an aliased input's storage"
                if update.kind is UpdateKind.BASE
                else layout.leaves[cast(DenseIndex, update.target)].path
            )
        else:
            path = flat.leaves[flat.tensor_indices[setup.wrapper_updates[d - wrappers_at]]].path
        found.append((p, path))
    return tuple(found)


def _deferred_exactly(
    setup: JointSetup, patterns: TangentPatterns | None, reach: Sequence[frozenset[int]]
) -> tuple[frozenset[frozenset[int]] | None, frozenset[int]]:
    """Where eager's backward through every output raises before any gradient, and so does the Function's:
    the sets of diff positions whose backward raises so (Note [Probing Eager's Backward]), and the outputs replayed
    before the call for it (Note [Backward Errors Are Deferred]); else None. `reach`: per grad input, the diff
    positions whose tangents reach its gradient (TracedJoint.reach)."""
    if patterns is None or not patterns.full:
        return None, frozenset()
    attached = {  # leaves the Function's node stands before in every backward through all of the outputs
        InputIndex(setup.flat.tensor_indices[i])
        for k, i in enumerate(setup.grad_inputs)
        if k < len(reach) and reach[k] & patterns.full
    }
    early = early_leaf_views(setup.analysis, setup.flat, setup.layout, patterns.leaf_bypass, attached)
    if early is None or patterns.ends.get(patterns.full) is not BackwardEnd.RAISES:
        return None, frozenset()
    if patterns.ends.get(frozenset(), BackwardEnd.COMPLETES) is not BackwardEnd.COMPLETES:
        return None, frozenset()  # outputs whose backward never reaches the Function raise in eager
    refuse_returned_view_behind_raise(setup, attached)
    return frozenset(p for p, end in patterns.ends.items() if end is BackwardEnd.RAISES), early
