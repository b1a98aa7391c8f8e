"""Stage `trace` (training), the program's own backward error, deferred or refused by what eager's backward does
(Note [Backward Errors Are Deferred], Note [Probing Eager's Backward]).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the traced backward's error and eager's probe.
Output: a `BackwardGraph` that holds the error (raised when its backward runs), or an UnsupportedError where the
deferral would not be eager's.
Invariants: only eager's errors are deferred, unchanged; nothing is raised at compile time that eager raises only in
backward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import torch
import torch.fx

from subclassaot.authoring.protocol import SubclassNode
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import (
    BROADCAST_ERROR,
    SET_BACKWARD_ERROR,
    SHAPE_CHECK_ERROR,
    UNPROBED_ERRORS,
    BackwardEnd,
    TangentPatterns,
    eager_backward_error,
    eager_backward_errors,
    probe_eager_backward,
    refuse_layout_changed_behind_autograd,
    refuse_unreduced_assigned_gradients,
)
from subclassaot.pipeline.backward_trace.graph import BackwardGraph, _input_values, _probe, _reached, _Tangents
from subclassaot.pipeline.backward_trace.input_values import (
    _backward_without_input_values,
    _backward_without_raising_tangents,
    _deferred_exactly,
    _unprobed_values,
)
from subclassaot.pipeline.backward_trace.leaves_and_views import (
    _early_beside_unverified,
    _refuse_returned_leaves_unprobed,
    _refuse_view_replay_limit,
    _returned_leaves,
    refuse_reads_around_self_set,
    refuse_set_beside_returned_leaves,
)
from subclassaot.pipeline.joint import (
    JointSetup,
    TracedJoint,
    trace_joint,
)
from subclassaot.pipeline.rules.backward_errors import (
    raises_outside_program,
)
from subclassaot.schemas import (
    OutputKind,
)

# Note [Backward Errors Are Deferred]
# Some programs run forward fine in eager and fail only in backward: x.mul_(x) on a tensor autograd saved, set_() on a
# tensor that requires grad, a custom backward that raises. Tracing our backward graph hits the same error at compile
# time; raising it there would fail a call eager completes, so the error is kept with the entry and raised, unchanged,
# when (and only when) the backward runs. The compiled backward (one Function node) raises before anything behind it
# runs, and before it only the epilogue's and the caller's nodes run. That is eager's behaviour only where
#   * every differentiable output's backward fails alone (a backward for some tangents only is not traced, so where
#     eager's through the others would succeed the program is refused; an input's new value only where eager's
#     backward through it alone was probed to complete and no graph without the raising tangents is found: a node saved
#     a detach() of the input, whose shared counter the write moved, `_refuse_values_completing_alone`), and
#   * no input reached from the outputs gets a gradient that avoids the failing node (one trace per input,
#     `JointSetup.wrt_only`): eager would accumulate it before the failing node runs or not, by the engine's order.
# Both checks read the functional trace, whose saved values and version counters are not eager's, so eager's own
# backward is run first on fakes (Note [Probing Eager's Backward]): where every backward through all of the outputs
# raises before any gradient, the error is deferred without the checks, and a backward through another set of outputs
# than one probed to raise so is refused when it runs (UnsupportedError), never answered with a guess.
# - Errors through input values only: a write may make a backward through the input's new value fail (x0.mul_(x0) on a
#   non-leaf saves the x0 it overwrites) while one through the outputs completes. Where the probe shows that, the
#   backward graph is the joint traced without tangents for those new values (`absent`, TangentPatterns.full); the
#   program's error is raised when one of those tangents is given, as eager's backward through the input raises.
#   The joint is first traced without the hidden ones alone (new values the epilogue writes hidden from autograd, which
#   no caller's backward gives): where that traces, the error was theirs (the trace's accumulator of a leaf made at its
#   old size, where eager makes none), and a backward through the other new values runs.
#   A new value's tangent need not raise alone: the error may come of the two together, each backward completing
#   alone (a custom Function's backward `t0.t_()` on a saved intermediate, which SinFn saved before the program wrote
#   x0 with its result: eager runs that later-made node first and SinFn's unpacking then raises, through t2 and x0's new
#   value at once, never through either alone). So the new values left out are probed too, as roots of their own
#   beside the outputs (`_raising_value_sets`): the sets giving one of their tangents that raise before any gradient
#   raise (`raising_patterns` with the graph); any other backward giving one is refused when it runs, naming the input
#   (the graph lacks that tangent, and eager's completes or first gives a leaf its gradient), and the rest run the
#   graph. Where that probe cannot run, each tangent left out raises whenever given (`raising_tangents` alone).
#   Likewise where each probed backward raises before any gradient exactly when it gives a tangent that no completing
#   one gives (a Function's output that saved a no_grad view, beside the written input returned), without those. The
#   new values of written inputs that no output's backward reaches are probed then as roots of their own (`t0 =
#   x1.sin()`, then `x1.mul_(-1.0)`, t0 returned and x1 not): eager's backward through them alone completes.
#   Where the deferral is otherwise not exact (an output view of a leaf bypasses the Function, or some set raises only
#   after a gradient), as long as each backward that gives none of those tangents completes in eager, the graph is
#   still traced without them: a backward through a written input's new value alone runs (`x0.sin()`, then
#   `x0.mul_(-1.0)`, beside `x1.diagonal()`), and one that gives such a tangent raises as it would without a graph.
#   A view taken under no_grad passes no gradient to its source: an intermediate base or subclass root that outputs
#   reach only through such views (or views of them) gets no tangent from any backward, so the graph is traced
#   without it too, and runs where every probed backward completes (a custom Function saving x0, then `x0.mul_(2)`,
#   a no_grad view of its result returned beside x0).
# - Leaves outside the Function: an input that requires grad but that no output's gradient reaches (or only new values
#   written under no_grad or through `.data`) goes in detached where the program changes its metadata (a subclass's own
#   size by `.data =` too) or the backward raises: eager never puts it in the graph, and an attached input would make its
#   accumulator now, at its metadata now, and would hold its own gradient (a returned input) behind our raising node.
#   So does an input that requires grad, gets no gradient of its own from the Function (unread) and whose metadata the
#   program changes: attached, it would make its leaf's accumulator at the old size, which eager's backward through the
#   leaf (returned as itself, resized under inference_mode) then fails. A synthetic base whose gradient only hidden new
#   values reach goes in detached whatever the program does: no node of eager's program reaches the members' leaf,
#   whose accumulator eager's engine may run from a member's own node (remade at its read after a write hidden from
#   autograd, say `x0 = b.t()` written through `x2 = b.detach()`) before a node of the program's raises (a saved tensor
#   the caller wrote after the call); attached, it would wait on ours. (A member's FINAL value copied in with grad, its
#   history its own, is no hidden value: runtime.steps.epilogue_write_hidden.) Other unreached inputs stay attached (outputs
#   computed from a no_grad view of one still require grad in eager); where every input that requires grad went in
#   detached, the first goes in as a fresh alias leaf that requires grad, so the outputs require grad as eager's. A leaf returned as itself whose gradient reaches it only through a written input's
#   new value gets it in eager from its AccumulateGrad, numbered above all nodes, before the raising node: it goes in
#   detached, and the probe counts its gradient as the compiled backward gives it; where it does not (eager's raises at
#   a root's own size check, before that leaf's AccumulateGrad), the program is refused. So does one
#   no node reaches, read through a no_grad view alone; where it is the only input requiring grad, as a stand-in.
# - Leaf views replayed before the call: the runtime regenerates an output view of a leaf input after the Function, so
#   its node would run first and give the leaf a gradient eager's engine (latest-made node first) never gives before the
#   failing node. Where every output that bypasses the Function to a leaf is such a view of an input the program does
#   not change, the view is replayed before the call (Replay.before_epilogue) and the error is deferred exactly. A leaf
#   the program does not change, returned as itself, bypasses nothing where every backward through all of the outputs
#   reaches its gradient through the Function (it goes in attached): its accumulator waits on our node as eager's on
#   the program's (`t0 = x0.diagonal(); t1, t2 = x1.max(0); t2.set_(t2)`, returning x1, t1 and t0). Other leaves
#   returned as is, or views of leaves the program changes, are not deferred so. A caller who writes such a view after
#   the call makes its node again at its next read, newer than ours, so it runs first; eager's failing check (at an
#   output resized behind autograd, say: the roots' sizes are checked before any node runs) may still come before it.
#   The backward refuses (UnsupportedError) where it finds the leaf's `.grad` changed since the forward before it would
#   raise (runtime `_check_early_leaves`); not for a saved tensor's version check, raised by a node the program made,
#   older than the remade view node in eager too. Where a view of the leaf goes into the Function, the leaf's
#   accumulator waits on ours and no `.grad` changes: the backward refuses where the leaf's counter moved since the
#   call (a written view of it, remade newer: `_remade_leaves`).
# - Only eager's errors are deferred: the trace may fail for reasons of its own (functional tensors, symbolic sizes), so
#   eager's backward is first run on fakes through each set of outputs and through each input the program wrote
#   (`eager_backward_errors`); a traced error whose type none of those raised is refused at compile time. The type
#   only: on fakes eager's backward may fail another check first (a size check, where fakes rebuild a view's history
#   by its view ops and eager by as_strided: Note [Probing Eager's Backward]), and the texts name other nodes and
#   versions. Not the checks fake kernels skip, nor autograd's saved-version and gradient-size checks, which the
#   probe's fakes do not always reach as eager's do (UNPROBED_ERRORS). Known gaps: an error only fakes raise
#   (`.numpy()` in a custom backward) passes as eager's; a program the probe cannot run (a subclass without static
#   fakes, NJT; an op its fakes lack) is deferred unseen, as before the probe.
# - Only RuntimeErrors are deferred (the probe and the runtime's raise take those). A traced backward that fails by
#   replaying a view's ops on a base the program set_() or changed in layout (IndexError) is refused, naming those views
#   of inputs (`_replayed_views`; below for the forward output that gets no tangent then).
# Every node runs (joint.py):
# Eager's backward through the outputs runs every node of their autograd graph; autograd.grad runs only the nodes on a
# path to the tensors it differentiates. A node on no such path, where the program cut the history (`with
# torch.no_grad(): t1 = x.view(-1)`, and the graph of t1.clone() ends there), still runs in eager, and its error (a
# tensor "modified by an inplace operation") is the program's. So the joint trace also takes the gradient flowing into
# each node that ends such a path (a GradientEdge: every node before it runs) and drops it: the failing node raises while
# tracing, and the error is deferred as above. Nothing is added where every node is on a
# path, nor for paths that end at a leaf's accumulator (the trace's own inputs, whose nodes eager does not have).
# - The end node itself: eager runs it too, unpacking the tensors it saved, which raises where one was written since
#   (or, for a no_grad or multi-output view written through its base, raises the view error when the check reads its
#   grad_fn). So before taking the gradients the joint trace reads each such node's saved tensors (the `_saved_*`
#   attributes of autograd's generated nodes). A custom Function's node (one output) is run instead, under no_grad, on
#   the gradient flowing into it, its result dropped: its backward reads what it saved where it chooses to, and may
#   change it in place (a saved view's `t_()` bumps the counter of the input it views). A node whose backward only raises (NotImplemented: `x0.set_(t1)` under grad, t1 a no_grad
#   view, records one with no edge, since t1 has no history) is called, so its error is the one eager's backward gets.
# - Outputs whose history cannot be rebuilt: a set_() that bumps the counter a subclass view shares with its base makes
#   autograd rebuild the view's grad_fn by replaying its view ops on a base now of another layout, which raises
#   (IndexError), as eager's does after the call (a wrapper subclass has no as_strided replay). Such a forward output (a
#   subclass one whose grad_fn read raises IndexError or ValueError) gets no tangent, as one does whose read raises the
#   view-after-write RuntimeError: no backward of eager's goes through it, and the runtime's output raises the same when
#   read. A plain output is not covered (eager rebuilds it by as_strided(), which does not raise); a backward that fails
#   so while tracing is refused (above).
# Counters the backward moves: a custom Function's backward that changes a tensor it saved in place (`x.t_()`, a
# write) moves that tensor's version counter, which every view of its storage shares (`x1 = x0.expand(2, -1)` passed
# beside x0, or `x1.t()` taken in the program); a node that saved another of those views and runs later (latest-made
# first) then fails eager's saved-version check. The joint trace runs each input gradients are taken for as a clone
# with a counter of its own, so its backward passes there. Where the traced backward moved an input's counter
# (BackwardReshape.bumps), eager's backward is probed; where a set of outputs fails that check there, the error is
# kept with the graph: a backward through a set probed to raise before any gradient raises it before the graph runs
# (`raising_patterns` with a graph), any other set runs the graph, as eager's completes. Exact only where every probed
# set completes or raises so, and no output view of a leaf is replayed outside the Function: refused otherwise. As for
# every deferred error, what eager's nodes did before the failing one (that t_()) is not done.


def _with_deferred_error(
    setup: JointSetup, tangents: _Tangents, reach: list[frozenset[int]], e: RuntimeError
) -> tuple[JointSetup, TracedJoint, frozenset[int], frozenset[frozenset[int]] | None] | BackwardGraph:
    """Where the joint trace raised the program's own backward error `e` (Note [Backward Errors Are Deferred]): the
    joint traced without the tangents of the inputs' new values (the setup, the joint, the diff positions whose
    tangent is left out, and the sets giving one of those whose backward raises, where probed: None where each
    raises), or the BackwardGraph that raises `e` when backward runs; or a refusal."""
    _refuse_view_replay_limit(e)
    refuse_reads_around_self_set(setup, e)
    refuse_layout_changed_behind_autograd(setup.call, setup.flat, setup.layout, setup.analysis, e)
    refuse_unreduced_assigned_gradients(setup.flat, setup.analysis, _reached(setup, reach), e)
    _refuse_unseen_error(setup, e)
    patterns = _probe(setup)
    without_values = _backward_without_input_values(setup, tangents.fakes, reach, patterns)
    if without_values is not None:
        return without_values
    found = _backward_without_raising_tangents(setup, tangents.fakes, reach, patterns)
    if found is not None:
        return (*found, None)
    verified, early = _deferred_exactly(setup, patterns, reach)
    if verified is None and (returned := _returned_leaves(setup, patterns, reach)):
        refuse_set_beside_returned_leaves(setup, reach, returned)
        probed = _probe(setup, returned)
        if probed is None:
            _refuse_returned_leaves_unprobed(setup, returned, e)
        verified, early = _deferred_exactly(setup, probed, reach)
        if verified is not None:
            graph = _error_graph(setup, e, reach, tangents.trees, verified, early, patterns)
            return dataclasses.replace(graph, detached=returned)
    if verified is None:
        _check_deferred_error(setup, tangents.leaves, reach, e, patterns)
        _refuse_by_probe(patterns, e)
        # the backwards that give none of the raising tangents still run, as eager's complete
        found = _backward_without_raising_tangents(setup, tangents.fakes, reach, patterns, exact=False)
        if found is not None:
            return (*found, None)
        _refuse_values_completing_alone(setup, tangents.leaves, e, patterns)
        early = _early_beside_unverified(setup, patterns, reach, e)
    return _error_graph(setup, e, reach, tangents.trees, verified, early, patterns)


def _defer_probed_error(
    setup: JointSetup, reach: Sequence[frozenset[int]], tangent_trees: tuple[SubclassNode | None, ...]
) -> BackwardGraph | None:
    """The BackwardGraph deferring eager's error where the probe sees eager's backward raise though ours ran
    (Note [Probing Eager's Backward]); else None."""
    patterns = _probe(setup)
    verified, early = _deferred_exactly(setup, patterns, reach)
    error = eager_backward_error(setup.call, setup.flat)
    if setup.analysis.grad_set_intermediate_read:  # Note [set_ Under Grad]
        if verified is not None and error is not None and SET_BACKWARD_ERROR in str(error):
            return _error_graph(setup, error, reach, tangent_trees, verified, early, patterns)
        raise UnsupportedError(
            "the program set_() with grad enabled a tensor other than an input, not through a view (so eager records "
            "set_'s node, whose derivative is not implemented) and read it with grad afterwards into an output, "
            "so eager's backward through that output raises, which the compiled backward cannot reproduce at the same "
            "step here (eager's backward through the other outputs, or a gradient it accumulates first: Note [set_ "
            "Under Grad]); not supported in training. Call set_() under torch.no_grad(), or "
            "set_() a tensor that requires grad"
        ) from error
    if error is None or not any(text in str(error) for text in (SHAPE_CHECK_ERROR, BROADCAST_ERROR)):
        return None  # only the size checks the trace does not make: other errors the fakes may not share
    if setup.analysis.views_relaid_with_grad:
        raise UnsupportedError(
            f"eager's backward of the program fails on fake tensors ({error}), but the program changes a view that "
            "requires grad by an in-place view op with grad (t_, transpose_, ...): fake tensors rebuild such a view's "
            "history by replaying its view ops, eager by as_strided() at its layout now, so the failure may be the "
            "fakes' alone and the compiled backward cannot follow it (Note [Probing Eager's Backward]); not supported "
            "in training. Use the out-of-place view op (x = x.t())"
        ) from error
    if verified is None:
        ends = probe_eager_backward(setup.call, setup.flat) or {}
        if not any(end is not BackwardEnd.COMPLETES for end in ends.values()) or raises_outside_program(setup):
            return None  # See Note [Probing Eager's Backward]
        # the failing node is not behind the Function (an output regenerated from an input leaf), or eager
        # accumulates a gradient first: the compiled backward cannot raise where eager's does
        raise UnsupportedError(
            f"the program assigns `.data` (a tensor of another size), and eager's backward fails ({error}) where "
            "the compiled backward, which sees the sizes of the values as computed, runs and cannot raise at the "
            "same step (Note [Probing Eager's Backward]); not supported in training. Assign `.data` a "
            "tensor of the same shape"
        ) from error
    return _error_graph(setup, error, reach, tangent_trees, verified, early, patterns)


def _error_graph(
    setup: JointSetup,
    error: RuntimeError,
    reach: Sequence[frozenset[int]],
    tangent_trees: tuple[SubclassNode | None, ...],
    verified: frozenset[frozenset[int]] | None,
    early: frozenset[int],
    patterns: TangentPatterns | None,
) -> BackwardGraph:
    """The BackwardGraph of a program whose backward raises `error` (Note [Backward Errors Are Deferred])."""
    return BackwardGraph(
        raising_patterns=verified,
        unprobed_values=() if verified is not None else _unprobed_values(setup, patterns),
        early_views=early,
        graph=None,
        forward=None,
        error=error,
        diff_outputs=setup.diff,
        grad_inputs=setup.grad_inputs,
        unused=frozenset(),
        grad_trees=(),
        tangent_deps=tuple(reach),
        backward_mutations=(),
        tangent_trees=tangent_trees,
        example_inputs=(),
        wrapper_updates=setup.wrapper_updates,
        group_grads=setup.group_grads,
    )


_AS_STRIDED_CHAIN = "as_strided() is non-compositional"


def _refuse_unseen_error(setup: JointSetup, error: RuntimeError) -> None:
    """Refuse a traced backward's error that eager's backward was not seen to raise (Note [Backward Errors Are
    Deferred]): it is a failure of the trace, not the program's own error, and deferring it would raise where eager's
    backward completes."""
    if any(text in str(error) for text in (*UNPROBED_ERRORS, _AS_STRIDED_CHAIN)):
        return  # (an as_strided() chain written: refused by name below, Note [as_strided On Inputs])
    seen = eager_backward_errors(setup.call, setup.flat)
    # (the type only: fakes may fail another check first, where a view's history is rebuilt by its view ops)
    if seen is None or any(type(s) is type(error) for s in seen):
        return  # (a program the probe cannot run keeps the checks that follow: a known gap)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    raise UnsupportedError(
        f"the program's backward fails when traced ({type(error).__name__}: {first}), but eager's backward, run on "
        "fakes of the inputs through the outputs and through the inputs the program wrote, raises no "
        f"{type(error).__name__}: a failure of the trace is not deferred as the program's own error, which would "
        "raise where eager's backward completes (Note [Backward Errors Are Deferred]); not supported in training. "
        "Run the program in eager, or report the error"
    ) from error


def _refuse_by_probe(patterns: TangentPatterns | None, error: Exception) -> None:
    """Refuse a deferred backward error where the probe saw eager's backward through every output raise only
    after an input leaf got its gradient (Note [Probing Eager's Backward])."""
    # A probe that completes is not trusted on its own: fake tensors skip checks eager makes on real data (the
    # memory overlap of a write through an expand), so only a raise the probe saw decides here.
    end = None if patterns is None else patterns.ends.get(patterns.full)
    if end is BackwardEnd.RAISES_AFTER_GRADS:
        raise UnsupportedError(
            f"the program's backward fails in eager ({error}) after eager accumulated the gradient of an input "
            "leaf, by the order autograd runs its nodes, which the compiled backward does not reproduce (Note "
            "[Probing Eager's Backward]). Write a clone instead of the tensor whose backward fails"
        ) from error


def _backward_failure(setup: JointSetup, patterns: TangentPatterns | None, error: Exception) -> str:
    """How the traced backward's failure `error` stands to eager's, in words: a refusal claims that eager's backward
    fails only where the probe saw it fail, and quotes the probe's error where it has one (the traced one may be
    another, a fake's size check: Note [Probing Eager's Backward])."""
    end = None if patterns is None else patterns.ends.get(patterns.full)
    if end in (BackwardEnd.RAISES, BackwardEnd.RAISES_AFTER_GRADS):
        return f"the program's backward fails in eager ({eager_backward_error(setup.call, setup.flat) or error})"
    if end is BackwardEnd.COMPLETES:
        # (the probe's fakes skip checks eager makes on real data: eager's may still fail there)
        return f"the program's traced backward fails ({error}; eager's, run on fakes of the inputs, did not)"
    return f"the program's traced backward fails ({error})"


def _check_deferred_error(
    setup: JointSetup,
    diff_leaves: Sequence[Sequence[torch.Tensor]],
    reach: Sequence[frozenset[int]],
    error: Exception,
    patterns: TangentPatterns | None,
) -> None:
    """Refuse a backward error that deferring would not reproduce exactly (Note [Backward Errors Are Deferred]).
    `diff_leaves`: per diff output, its dense leaves (to shape the tangents); `patterns`: what the probe saw."""
    input_values = _input_values(setup)
    returns_tensors = any(info.kind in (OutputKind.TENSOR, OutputKind.IS_INPUT) for info in setup.analysis.outputs)
    if "encountered a mutation on a view chain" in str(error) and returns_tensors:
        # A limit of functionalization, not the program's own error: eager's backward through the outputs (or
        # views of the inputs it returns) runs.
        raise UnsupportedError(
            "the program writes through an as_strided() view with grad, and its backward would write back through "
            "a view chain in which the as_strided() is not the first view (Note [as_strided On Inputs]); not "
            "supported in training. Take the as_strided() view of a clone, or write under torch.no_grad()"
        ) from error
    # (an input's new value: deferring is kept for it, but where `_refuse_values_completing_alone` refuses)
    _refuse_partial_failure(setup, diff_leaves, error, patterns, (d not in input_values for d in setup.diff))
    by_outputs = [p for p, d in enumerate(setup.diff) if d not in input_values]
    user_diff = dataclasses.replace(setup, diff=tuple(setup.diff[p] for p in by_outputs))
    with setup.fake_mode:
        tangents = [torch.empty_like(t) for p in by_outputs for t in diff_leaves[p]]
    for k, r in enumerate(reach):
        if not r & set(by_outputs):
            continue
        try:
            trace_joint(dataclasses.replace(user_diff, wrt_only=k), tangents, None)
        except RuntimeError:
            continue  # this input's gradient runs through the failing node: eager never accumulates it either
        raise UnsupportedError(
            f"{_backward_failure(setup, patterns, error)}, but the gradient of an input that requires grad does not depend "
            "on the failing step: the compiled backward, which raises once for all of its gradients, cannot give "
            "that gradient as eager's order of autograd's nodes does (Note [Backward Errors Are Deferred])"
        )


def _refuse_partial_failure(
    setup: JointSetup,
    diff_leaves: Sequence[Sequence[torch.Tensor]],
    error: Exception,
    patterns: TangentPatterns | None,
    checked: Iterable[bool],
) -> None:
    """Refuse where the backward through one `checked` diff output alone traces, the traced backward through all of
    them having failed with `error` (Note [Backward Errors Are Deferred])."""
    if len(setup.diff) <= 1:
        return
    for d, leaves, check in zip(setup.diff, diff_leaves, checked, strict=True):
        if not check:
            continue
        with setup.fake_mode:
            tangents = [torch.empty_like(t) for t in leaves]
        try:
            trace_joint(dataclasses.replace(setup, diff=(d,)), tangents, None)
        except RuntimeError:
            continue
        raise UnsupportedError(
            f"{_backward_failure(setup, patterns, error)} through some of its differentiable outputs but not through "
            f"forward output {d} alone: the compiled backward cannot raise for some outputs and run for others "
            "(Note [Backward Errors Are Deferred]). Return a clone, or do not write the tensor whose backward fails"
        )


def _refuse_values_completing_alone(
    setup: JointSetup, diff_leaves: Sequence[Sequence[torch.Tensor]], error: Exception, patterns: TangentPatterns | None
) -> None:
    """Where no graph without the raising tangents was found: refuse an input's new value whose backward alone the
    probe saw complete in eager and the trace's does too (a node saved another input, whose shared counter a write to
    this one moved), rather than defer the error to it (Note [Backward Errors Are Deferred])."""
    if patterns is None:
        return
    values = _input_values(setup)
    completing = (
        d in values and patterns.ends.get(frozenset({p})) is BackwardEnd.COMPLETES for p, d in enumerate(setup.diff)
    )
    _refuse_partial_failure(setup, diff_leaves, error, patterns, completing)
