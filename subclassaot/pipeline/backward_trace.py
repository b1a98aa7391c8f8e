"""Stage `trace` (training), the backward: the joint graph traced and partitioned into a forward and a backward
graph (joint.py traces it), or the program's own backward error, deferred or refused by what eager's backward does
(Note [Backward Errors Are Deferred], Note [Probing Eager's Backward]).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the inference `TracedGraph` (its GraphOutputs), dense
fakes, fake mode.
Output: `BackwardGraph`: the forward graph `(primals...) -> (GraphOutputs..., saved...)` and the backward graph
`(saved..., tangents...) -> (grads per user tensor input (dense)..., backward-mutated inputs...)`, or the program's
own backward error; `BackwardVariant`: a backward retraced for tangents of another structure (Note [Tangent
Retrace]); `backward_plan`: the runtime's `BackwardPlan` of a `BackwardGraph`.
Invariants: see Note [Training Through A Joint Graph] (joint.py); both graphs are purely functional.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn, cast

import torch
import torch.fx

from subclassaot.authoring.protocol import SubclassNode
from subclassaot.errors import SubclassAOTError, UnsupportedError
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
    reaches_output_node,
    refuse_layout_changed_behind_autograd,
    refuse_unreduced_assigned_gradients,
    tangent_patterns,
)
from subclassaot.pipeline.functional_run import own_leaves_of, own_stand_ins
from subclassaot.pipeline.joint import (
    JointSetup,
    TracedJoint,
    forward_example,
    trace_joint,
    trace_joint_views,
)
from subclassaot.pipeline.partition import Partition, partition_backward_like, partition_joint
from subclassaot.pipeline.rules.backward_errors import (
    behind_no_grad_views,
    early_leaf_views,
    raises_outside_program,
    refuse_changed_leaf_views,
    refuse_returned_view_behind_raise,
    refuse_set_node_eager_skips,
    refuse_written_escaping_views,
    written_escaping_views,
)
from subclassaot.pipeline.rules.changed_views import refuse_written_views_changed_in_place
from subclassaot.pipeline.rules.set_under_grad import refuse_layout_node_order, refuse_view_set_order
from subclassaot.pipeline.rules.training_rules import (
    duplicate_wrappers,
    grad_bases,
    group_of,
    wrapper_update_inputs,
)
from subclassaot.pipeline.trace import TracedGraph
from subclassaot.runtime.plan import BackwardPlan, RetracedBackward, wrapper_write_recorded
from subclassaot.runtime.steps import (
    early_grad_sets,
    epilogue_write_hidden,
    graph_example_inputs,
    training_roots,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    AssignedWrite,
    BackwardReshape,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    InputIndex,
    LeafSource,
    OutputKind,
    ReplaySource,
    UpdateKind,
)
from subclassaot.torch_internals import (
    DATA_DEPENDENT_ERRORS,
    fresh_static_fake,
    hint_of,
    refresh_view_grad_fn,
    try_expr_of,
)

# Raised at compile time, never deferred: refusals, and a trace that needs tensor values (a size made of a boolean
# mask's count): that is no error of the program (eager's backward has the values); api.py refuses it.
_RAISED_NOW: tuple[type[Exception], ...] = (UnsupportedError, *DATA_DEPENDENT_ERRORS)

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


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardGraph:
    """The training compile's backward. A field that BackwardPlan (runtime/plan.py) also has means what its comment
    there says, `graph` None being its "no backward graph" (backward_plan() hands those fields on); the comments here
    are for the compile-time fields."""

    graph: torch.fx.GraphModule | None  # (saved..., tangents...) -> (grads..., backward mutations...); None: `error`
    # (primals...) -> (the forward graph's outputs (GraphOutputs)..., saved...); None when the joint trace failed
    # (the inference graph is the forward then)
    forward: torch.fx.GraphModule | None
    error: RuntimeError | None
    raising_tangents: frozenset[int] = frozenset()
    raising_patterns: frozenset[frozenset[int]] | None = None
    unprobed_values: tuple[tuple[int, str], ...] = ()
    detached: frozenset[int] = frozenset()
    # with raising_patterns: outputs replayed before the call (Note [Backward Errors Are Deferred])
    early_views: frozenset[int] = frozenset()
    diff_outputs: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    unused: frozenset[int]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...] = ()
    tangent_deps: tuple[frozenset[int], ...]
    backward_mutations: tuple[DenseIndex, ...]
    backward_reshapes: tuple[BackwardReshape, ...] = ()
    tangent_trees: tuple[SubclassNode | None, ...]
    wrapper_updates: tuple[int, ...]
    group_grads: tuple[int, ...] = ()
    tangent_strides: tuple[tuple[int, ...] | None, ...] = ()
    tangent_orders: tuple[tuple[int, ...] | None, ...] = ()
    # per dense tangent: the sizes it was traced with (symbolic ones shape a retrace's: Note [Tangent Retrace])
    tangent_sizes: tuple[tuple[_Dim, ...], ...] = ()
    example_inputs: tuple[object, ...]  # the backward graph's (fake tensors, symbolic ints)
    num_saved: int = 0
    # The joint graph itself, kept where it can run again from the primals for double backward (no random op in
    # the forward: a rerun would draw other values); see Note [Training Through A Joint Graph]
    joint: torch.fx.GraphModule | None = None
    num_fw_outputs: int = 0  # the joint graph's outputs before the gradients
    subclass_grads: bool = False  # TracedJoint.subclass_grads
    # Compile-time records for a tangent retrace (Note [Tangent Retrace]); the per-call path never reads them
    setup: JointSetup | None = None
    partition: Partition | None = None
    forward_reads_grad_mode: bool = False
    saved_primals: tuple[int | None, ...] = ()
    saved_clones: tuple[int | None, ...] = ()


def _overwritten_originals(
    traced: TracedGraph, analysis: Analysis, dense_fakes: Sequence[torch.Tensor]
) -> frozenset[int]:
    """Forward-output positions of ORIGINAL updates that are not differentiated (Note [Input
    Updates])."""
    updates = traced.outputs.updates
    finals = {u.target for u in updates if u.kind is UpdateKind.FINAL}
    out = set()
    for k, u in enumerate(updates):
        if u.kind is not UpdateKind.ORIGINAL or u.target not in finals:
            continue
        m = analysis.mutations[u.target]
        hidden = m.storage_changed or m.swapped or m.hidden_from_autograd or not m.autograd_visible
        if not hidden and not dense_fakes[u.target]._is_view():
            out.add(k)
    return frozenset(out)


def _swapped_updates(traced: TracedGraph, analysis: Analysis) -> frozenset[int]:
    """Forward-output positions of updates of leaves whose storage set_() swapped: the epilogue copies them in
    under no_grad (the swap is the op autograd sees: Note [set_ Under Grad], Note [Inputs Written In
    Training]), so they get no gradient, and differentiating them would raise set_'s backward error for a
    backward eager completes. Not a FINAL update copied in with grad (Note [History Kept Through .data =])."""
    return frozenset(
        k
        for k, u in enumerate(traced.outputs.updates)
        if u.kind is not UpdateKind.BASE
        and analysis.mutations[u.target].storage_changed
        and not (
            u.kind is UpdateKind.FINAL
            and analysis.mutations[u.target].assigned_write in (AssignedWrite.AFTER, AssignedWrite.KEPT)
        )
    )


def _last_gain_updates(traced: TracedGraph, layout: DenseLayout, analysis: Analysis) -> frozenset[int]:
    """Forward-output positions of updates of the leaves of inputs that gain grad last (Analysis.gains_last): eager's
    value was final when requires_grad_() found it without history (nothing took its storage after), so it gets no
    tangent, and the epilogue writes it below autograd before the runtime sets the flag (Note [Grad Mode And
    Autograd Reads])."""
    last = {j for i, late in enumerate(analysis.gains_last) if late for j in layout.leaves_of_input[i]}
    return frozenset(
        k for k, u in enumerate(traced.outputs.updates) if u.kind is not UpdateKind.BASE and u.target in last
    )


def _hidden_gain_updates(
    traced: TracedGraph,
    layout: DenseLayout,
    analysis: Analysis,
    real: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
) -> frozenset[int]:
    """Forward-output positions of the updates the epilogue writes hidden from autograd (runtime.steps.
    epilogue_write_hidden) of the leaves of inputs that require no grad as passed and that the compile makes require
    grad (Note [Leaves Laid Out Anew Under no_grad], inputs made to require grad): eager's input comes without history
    and such writes give it none, so its new value gets no tangent and has no node of its own to run. Differentiated,
    the run's ORIGINAL, an alias taken of the input's clone before the clone was made a leaf again, would keep the
    clone's history where no write moved its counter (`x.data.add_(1)`): a path to the graph input, whose gradient
    the joint does not take (it takes the input's with respect to the new leaf), that raises when run."""
    late = {
        j
        for i, (r, fake) in enumerate(zip(real, user_fakes, strict=True))
        if fake.requires_grad and not r.requires_grad
        for j in layout.leaves_of_input[i]
    }
    return frozenset(
        k
        for k, u in enumerate(traced.outputs.updates)
        if u.kind is not UpdateKind.BASE
        and u.target in late
        and epilogue_write_hidden(analysis.mutations[cast(DenseIndex, u.target)], u.kind)
    )


def _inner_base_updates(traced: TracedGraph, layout: DenseLayout, group_grads: Sequence[int]) -> frozenset[int]:
    """Forward-output positions of the updates of synthetic bases no gradient is taken for whose members are all
    inner tensors of subclass inputs: autograd sees the wrappers, not their inner tensors (Note [Aliased Inputs In
    Training]), so the program's writes give such a base no history, and its new value gets no tangent. Where its
    members require grad, the joint's base requires grad with a placeholder's history only (a FunctionalTensor's
    mirrored grad_fn), whose backward raises."""
    wrapped = {j for tree, leaves in zip(layout.trees, layout.leaves_of_input, strict=True) if tree for j in leaves}
    inner = {
        k
        for k, item in enumerate(layout.graph_inputs)
        if isinstance(item, AliasGroupRef)
        and k not in group_grads
        and all(m in wrapped for m in layout.groups[item.group].members)
    }
    return frozenset(k for k, u in enumerate(traced.outputs.updates) if u.kind is UpdateKind.BASE and u.target in inner)


def _example_inputs(
    layout: DenseLayout,
    dense_fakes: Sequence[torch.Tensor],
    group_grads: Sequence[int],
    own: frozenset[int],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
) -> list[torch.Tensor]:
    """The joint graph's example inputs: a synthetic base a gradient is taken for requires grad; a stand-in of its
    own (`own`, tensor positions) is never its group's autograd root, as at run time (Note [Aliased Inputs In
    Training]), else the base would require grad through it where eager's requires none."""
    example = graph_example_inputs(layout, dense_fakes, {j for i in own for j in layout.leaves_of_input[i]})
    with fake_mode:
        for k in group_grads:  # a base taken from a member that does not require grad (x.detach(), x)
            if not example[k].requires_grad:
                example[k] = example[k].detach().requires_grad_(True)
    return example


def trace_backward(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced: TracedGraph,
    dense_fakes: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None = None,
) -> BackwardGraph:
    group_grads, grad_inputs = _grad_inputs(flat, layout, analysis, user_fakes)
    own = own_stand_ins(flat, layout, user_fakes, own_leaves_of(analysis))
    example = _example_inputs(layout, dense_fakes, group_grads, own, fake_mode)
    wrapper_updates = wrapper_update_inputs(layout, analysis, user_fakes)
    real = [cast(torch.Tensor, flat.values[k]) for k in flat.tensor_indices]
    refuse_written_views_changed_in_place(layout, analysis, real, wrapper_updates)
    escaping = written_escaping_views(flat, layout, analysis)  # refused once the graph says which it reaches
    refuse_view_set_order(call, flat, layout, analysis)
    refuse_layout_node_order(call, flat, layout, analysis)  # Note [Epilogue Nodes In Eager's Order]
    # Every input gradients are taken for runs as a clone: a write to it, or an in-place view op on a view of it,
    # then happens to a non-leaf as in eager (Note [Training Through A Joint Graph]).
    # (not an input of its own beside an alias requiring grad: its stand-in is a detached leaf over the group's
    # storage, as eager's is a leaf)
    clone = frozenset(grad_inputs) - own
    with fake_mode, torch.enable_grad():
        fw_example = forward_example(
            call, flat, layout, analysis, traced, example, user_fakes, clone, wrapper_updates, group_grads
        )
    overwritten = _overwritten_originals(traced, analysis, dense_fakes) | _swapped_updates(traced, analysis)
    overwritten |= _last_gain_updates(traced, layout, analysis) | _inner_base_updates(traced, layout, group_grads)
    overwritten |= _hidden_gain_updates(traced, layout, analysis, real, user_fakes)
    diff = tuple(i for i, (grad, _, _, _) in enumerate(fw_example) if grad and i not in overwritten)
    with fake_mode:
        tangent_fakes = tuple(torch.empty_like(t) for i in diff for t in fw_example[i][1])
    tangents = _Tangents(
        fakes=tangent_fakes, trees=tuple(fw_example[i][2] for i in diff), leaves=tuple(fw_example[i][1] for i in diff)
    )
    setup = JointSetup(
        call=call,
        flat=flat,
        layout=layout,
        analysis=analysis,
        traced=traced,
        user_fakes=tuple(user_fakes),
        fake_mode=fake_mode,
        decompositions=decompositions,
        example=tuple(example),
        grad_inputs=grad_inputs,
        group_grads=group_grads,
        wrapper_updates=wrapper_updates,
        diff=diff,
        tangent_ctxs=tuple((k, fw_example[i][3][0]) for k, i in enumerate(diff) if fw_example[i][3]),
    )
    reach: list[frozenset[int]] = []
    error: RuntimeError | None = None
    raising: frozenset[int] = frozenset()
    value_sets: frozenset[frozenset[int]] | None = None
    try:
        setup, joint = _traced_joint(setup, tangents.fakes, reach, escaping)
    except _RAISED_NOW:
        raise
    except (IndexError, ValueError) as e:
        if isinstance(e, SubclassAOTError):
            raise
        raise _view_replay_refusal(layout, analysis, e) from e  # Note [Backward Errors Are Deferred]
    except (RuntimeError, AttributeError) as e:
        # The program's backward itself fails (set_ has no derivative, a saved tensor was modified in place):
        # eager raises only when backward runs, and so do we (Note [Backward Errors Are Deferred]).
        error = e if isinstance(e, RuntimeError) else _nested_int_backward_error(setup, e)
        found = _with_deferred_error(setup, tangents, reach, error)
        if isinstance(found, BackwardGraph):
            return found
        setup, joint, raising, value_sets = found
    if error is None:
        refuse_layout_changed_behind_autograd(call, flat, layout, analysis, None)
        probed = analysis.data_assigned or analysis.grad_set_intermediate_read
        if probed and (deferred := _defer_probed_error(setup, joint.reach, tangents.trees)) is not None:
            return deferred
    return _graph_of(setup, joint, tangents, raising, error, value_sets)


def _graph_of(
    setup: JointSetup,
    joint: TracedJoint,
    tangents: _Tangents,
    raising: frozenset[int],
    error: RuntimeError | None,
    value_sets: frozenset[frozenset[int]] | None,
) -> BackwardGraph:
    """The BackwardGraph of the traced joint, without the tangents at `raising`: where `value_sets` (those left out
    are inputs' new values, probed as roots), it raises `error` for those sets and refuses the others giving one
    (Note [Backward Errors Are Deferred], errors through input values only)."""
    if value_sets is None:
        return _partitioned(setup, joint, tangents, raising, *_with_bump_error(setup, joint, error))
    graph = _partitioned(setup, joint, tangents, raising, error, value_sets)
    return dataclasses.replace(graph, unprobed_values=_unprobed_values(setup, None, raising))


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


def _grad_inputs(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """BackwardGraph.group_grads and BackwardGraph.grad_inputs: the synthetic bases that require grad, and the tensor
    inputs that get a gradient of their own (not through such a base, nor as a duplicate wrapper)."""
    own = own_stand_ins(flat, layout, user_fakes, own_leaves_of(analysis))
    group_grads = grad_bases(layout, user_fakes, own)
    in_groups = {layout.leaves[m].owner for k in group_grads for m in layout.groups[group_of(layout, k)].members}
    duplicates = duplicate_wrappers(layout)  # Note [Aliased Inputs In Training]
    grad_inputs = tuple(
        i
        for i, t in enumerate(user_fakes)
        if t.requires_grad and (flat.tensor_indices[i] not in in_groups or i in own) and i not in duplicates
    )
    return group_grads, grad_inputs


@dataclass(frozen=True, slots=True, kw_only=True)
class _Tangents:
    """The tangents the joint graph is traced with."""

    fakes: tuple[torch.Tensor, ...]  # per dense tangent (the diff outputs' dense leaves, in order): its fake
    trees: tuple[SubclassNode | None, ...]  # per diff output: the subclass structure its tangent must have
    leaves: tuple[Sequence[torch.Tensor], ...]  # per diff output: its dense leaves (to shape the tangents)


def _nested_int_backward_error(setup: JointSetup, e: AttributeError) -> NoReturn:
    """The trace met a plain nested int as an op's argument in the backward (an NJT gradient of a nested size:
    `mean(dim=1, keepdim=True)`'s expand): refused, naming the NJT inputs that require grad (Note [Nested Int
    Dims]). Eager's backward may raise there too (NJT's kernels reject such a gradient); the probe that would show
    it cannot run on NJT (no static fakes), so no error is deferred as the program's."""
    if "NestedIntNode" not in str(e):
        raise e
    names = [
        leaf.path
        for leaf, v in zip(setup.flat.leaves, setup.flat.values, strict=True)
        if isinstance(v, torch.Tensor) and v.is_nested and v.requires_grad
    ]
    raise UnsupportedError(
        f"the program's backward takes the gradient of {', '.join(names) or 'a jagged NestedTensor'} through an op "
        "whose backward takes a ragged (nested int) size as an argument, say a mean over the ragged dim (its "
        "backward expands to the nested size, where eager's NJT backward fails too): the backward trace cannot "
        "carry a nested int as an op's argument (Note [Nested Int Dims]); not supported in training. Reduce under "
        "torch.no_grad()"
    ) from e


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
        refuse_set_node_eager_skips(setup, patterns, e)  # Note [set_ Under Grad]
        _refuse_values_completing_alone(setup, tangents.leaves, e, patterns)
        early = _early_beside_unverified(setup, patterns, reach, e)
    return _error_graph(setup, e, reach, tangents.trees, verified, early, patterns)


def _early_beside_unverified(
    setup: JointSetup, patterns: TangentPatterns | None, reach: Sequence[frozenset[int]], error: RuntimeError
) -> frozenset[int]:
    """Where the raising sets are not verified (no `_deferred_exactly`) but outputs are views the runtime rebuilds
    from a leaf input (`TangentPatterns.leaf_bypass`), and eager's backward through some set of outputs with one of
    them raises before any gradient: those views replayed before the call, so that their nodes run after the
    Function's and the epilogue's, as eager's ran after its failing node, where no such set gives a leaf its gradient
    first (Note [Probing Eager's Backward]); else none. A view of a leaf the program changes, which no replay before
    the call keeps older than the failing node: refused (`refuse_changed_leaf_views`)."""
    if patterns is None:
        return frozenset()
    outputs = setup.analysis.outputs
    # (an output set_() under grad gets a set_ node of its own, numbered above every node, as eager's)
    views = {
        o
        for o in patterns.leaf_bypass
        if outputs[o].kind is OutputKind.TENSOR
        and not outputs[o].set_under_grad
        and (r := outputs[o].replay) is not None
        and r.source is ReplaySource.INPUT
        and not r.then_set
    }
    ends = probe_eager_backward(setup.call, setup.flat) if views else None
    with_views = [end for chosen, end in (ends or {}).items() if chosen & views]
    if BackwardEnd.RAISES not in with_views:
        return frozenset()  # (after the call, the views' nodes run first: as eager's where it completes)
    attached = {
        InputIndex(setup.flat.tensor_indices[i])
        for k, i in enumerate(setup.grad_inputs)
        if k < len(reach) and reach[k] & patterns.full
    }
    raising = {o for chosen, end in (ends or {}).items() if end is BackwardEnd.RAISES for o in chosen & views}
    refuse_changed_leaf_views(setup.analysis, setup.flat, setup.layout, raising, attached, error)
    early = early_leaf_views(setup.analysis, setup.flat, setup.layout, patterns.leaf_bypass, attached)
    if early is None or BackwardEnd.RAISES_AFTER_GRADS in with_views:
        return frozenset()  # (a view of a leaf the program changes: a known gap, Note [Probing Eager's Backward])
    return early


def _refuse_returned_leaves_unprobed(setup: JointSetup, returned: frozenset[int], error: RuntimeError) -> None:
    """Refuse a raising backward where eager's probe, with the leaves at `returned` (tensor input positions) returned
    as themselves, left one of them a gradient other than the compiled backward gives it (Note [Backward Errors Are
    Deferred])."""
    paths = ", ".join(setup.flat.leaves[setup.flat.tensor_indices[i]].path for i in sorted(returned))
    raise UnsupportedError(
        f"{paths} (an autograd leaf returned as itself) and the program's backward fails in eager ({error}): eager's "
        "backward through the outputs does not give that leaf its gradient as the compiled one would (it raises "
        "before the leaf's AccumulateGrad runs, say at the engine's check of a root's gradient against an output "
        "whose size `.data =` changed, which precedes every node), where the compiled backward raises in its own "
        "node, after that leaf's AccumulateGrad, a root, gave it its gradient (Note [Backward Errors Are Deferred]); "
        "not supported in training. Return a clone of the leaf"
    ) from error


def _partitioned(
    setup: JointSetup,
    joint: TracedJoint,
    tangents: _Tangents,
    raising: frozenset[int],
    error: RuntimeError | None,
    patterns: frozenset[frozenset[int]] | None,
) -> BackwardGraph:
    """The BackwardGraph of the traced joint graph, partitioned into forward and backward. `patterns`: the sets of
    diff positions whose backward raises `error` instead of running the graph (Note [Backward Errors Are Deferred])."""
    analysis, example, diff = setup.analysis, setup.example, setup.diff
    o = setup.traced.outputs
    if joint.num_fw_outputs != len(o.updates) + o.num_fresh + o.num_bases + o.num_symints + len(analysis.stride_probes):
        raise AssertionError("BUG: the joint graph's forward outputs differ from the inference graph's")
    parts = partition_joint(joint.graph, len(example), joint.num_fw_outputs)
    return BackwardGraph(
        joint=None if parts.has_random else joint.graph,
        num_fw_outputs=joint.num_fw_outputs,
        subclass_grads=joint.subclass_grads,
        graph=parts.backward,
        forward=parts.forward,
        num_saved=parts.num_saved,
        saved_primals=parts.saved_primals,
        saved_clones=parts.saved_clones,
        error=error,
        diff_outputs=diff,
        grad_inputs=setup.grad_inputs,
        unused=joint.unused,
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        tangent_deps=joint.reach,
        backward_mutations=joint.backward_mutations,
        backward_reshapes=joint.backward_reshapes,
        tangent_trees=tangents.trees,
        example_inputs=parts.backward_example,
        wrapper_updates=setup.wrapper_updates,
        group_grads=setup.group_grads,
        tangent_strides=tuple(_static_strides(t) for t in tangents.fakes),
        tangent_orders=tuple(_dense_order(t) for t in tangents.fakes),
        tangent_sizes=tuple(tuple(t.shape) for t in tangents.fakes),
        setup=setup,
        partition=parts,
        forward_reads_grad_mode=parts.reads_grad_mode,
        raising_tangents=raising,
        raising_patterns=patterns,
    )


def _wrappers_at(setup: JointSetup) -> int:
    """The forward-output position of the first wrapper update: after the updates, one output per fresh output (a
    subclass one has several graph leaves: see forward_output_values) and the bases."""
    outputs = setup.traced.outputs
    n_fresh = sum(
        1
        for info in setup.analysis.outputs
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    )
    return len(outputs.updates) + n_fresh + outputs.num_bases


def _input_values(setup: JointSetup) -> frozenset[int]:
    """Forward-output positions holding new values of inputs (updates, then wrapper updates)."""
    wrappers_at = _wrappers_at(setup)
    return frozenset(
        {*range(len(setup.traced.outputs.updates)), *range(wrappers_at, wrappers_at + len(setup.wrapper_updates))}
    )


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


def _probe(
    setup: JointSetup, returned: frozenset[int] = frozenset(), values: frozenset[int] = frozenset()
) -> TangentPatterns | None:
    """Note [Probing Eager's Backward]: how eager's backward through each set of outputs ends, by the tangents the
    compiled Function gets for them. `returned`: tensor input positions of leaves given to the Function detached
    (Note [Backward Errors Are Deferred]); `values`: tensor input positions whose new values are probed as roots
    too (probe_eager_backward)."""
    at = frozenset(setup.flat.tensor_indices[i] for i in returned)
    written = frozenset(setup.flat.tensor_indices[i] for i in values)
    ends = probe_eager_backward(setup.call, setup.flat, at, written)
    if ends is None:
        return None
    outputs = setup.traced.outputs
    return tangent_patterns(
        setup.analysis,
        setup.layout,
        setup.flat,
        outputs.updates,
        outputs.num_bases,
        setup.wrapper_updates,
        [r.root_bases for r in training_roots(setup.analysis)],
        setup.diff,
        ends,
        returned,
    )


def refuse_set_beside_returned_leaves(
    setup: JointSetup, reach: Sequence[frozenset[int]], returned: frozenset[int]
) -> None:
    """An input set_() under grad and returned beside a leaf the Function takes detached, in a raising backward,
    whose set_ node the runtime cannot place where eager's is (Note [set_ Under Grad]).
    `returned`: tensor input positions of the leaves given to the Function detached."""
    flat, layout, analysis = setup.flat, setup.layout, setup.analysis
    reals = [flat.values[index] for index in flat.tensor_indices]
    read = {i for k, i in enumerate(setup.grad_inputs) if k < len(reach) and reach[k]}
    early = early_grad_sets(analysis, layout)
    # outputs the Function computes (not an input, nor regenerated from one after the epilogue)
    computed = [
        o
        for o, info in enumerate(analysis.outputs)
        if info.kind is OutputKind.TENSOR and (info.replay is None or info.replay.source is not ReplaySource.INPUT)
    ]
    for o, info in enumerate(analysis.outputs):
        if info.kind is not OutputKind.IS_INPUT or info.input_index is None or not computed:
            continue
        real = flat.values[info.input_index]
        same = [t for t, r in enumerate(reals) if r is real]  # the same object passed at several positions
        if any(t in returned for t in same) or not read.intersection(same):
            continue
        late = [t for t in same if t not in early]  # its set_ node made in the epilogue
        if not any(analysis.mutations[j].set_under_grad for t in late for j in layout.leaves_of_input[t]):
            continue
        if reaches_output_node(setup.call, flat, computed, [o]) is False:
            continue  # eager's set_ node waits behind no node of the program either
        raise UnsupportedError(
            f"{flat.leaves[info.input_index].path} is set_() with grad enabled and returned, beside a leaf input "
            "returned as itself, in a backward that raises: eager's set_ node waits behind the program's nodes that "
            "read it after the set_(), which orders that leaf's gradient against its error as the compiled program's "
            "set_ node, made after its call, cannot (Note [set_ Under Grad]). Return a clone of the leaf, or read a clone of the set_() input"
        )


def refuse_reads_around_self_set(setup: JointSetup, error: Exception) -> None:
    """Refuse a raising backward where the program read a leaf with grad both before and after its set_() under
    no_grad, by ops whose results live on (Note [Gradient Accumulators Of Leaves])."""
    flat, analysis = setup.flat, setup.analysis
    # outputs eager's backward reaches the leaf's last accumulator through outside the Function: the input itself,
    # or a view the runtime regenerates from an input
    outside = any(
        info.kind is OutputKind.IS_INPUT or (info.replay is not None and info.replay.source is ReplaySource.INPUT)
        for info in analysis.outputs
    )
    for i in setup.grad_inputs:
        real = flat.values[flat.tensor_indices[i]]
        if outside and analysis.self_set_mixed[i] and isinstance(real, torch.Tensor) and real.is_leaf:
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} is set_() under no_grad (to itself or to another "
                "tensor) and read with grad both before and after its last such set_(), by ops whose results live on, "
                f"and the program's backward fails in eager ({error}): "
                "eager's nodes feed two gradient accumulators of that leaf, the output that is (a view of) it the "
                "last one, which the compiled Function's one edge cannot reproduce, nor so which gradients eager "
                "accumulates before it raises (Note [Gradient Accumulators Of Leaves]). Read a clone "
                "of it on one side of the set_()"
            ) from error


def _traced_joint(
    setup: JointSetup, tangent_fakes: Sequence[torch.Tensor], reach: list[frozenset[int]], escaping: frozenset[int]
) -> tuple[JointSetup, TracedJoint]:
    """trace_joint_views, then the refusal of the `escaping` inputs (Note [as_strided On Inputs]) whose value from
    before the call the trace gives a gradient; where it raises, of those its forward reached (the program's own
    backward error: Note [Backward Errors Are Deferred]), or of every one where the forward itself raised."""
    read_reach: list[frozenset[int] | None] = []
    try:
        setup, joint = trace_joint_views(setup, tangent_fakes, reach, read_sink=read_reach)
    except Exception:
        traced = len(read_reach) == len(setup.flat.tensor_indices)
        refuse_written_escaping_views(
            setup.flat, escaping, _gradient_reached(setup, reach, read_reach) if traced else None
        )
        raise
    refuse_written_escaping_views(setup.flat, escaping, _gradient_reached(setup, joint.reach, joint.read_reach))
    return setup, joint


def _gradient_reached(
    setup: JointSetup, reach: Sequence[frozenset[int]], read_reach: Sequence[frozenset[int] | None]
) -> frozenset[int] | None:
    """The tensor inputs whose value before the call some diff output's gradient reaches in the trace: through a
    gradient of their own, or as members of a synthetic base that gets one (`reach`: the grad inputs', then the
    synthetic bases') whose own node some output's history holds (`read_reach`, TracedJoint.read_reach: a member the
    program never reads before a write renews its node gives its own history no gradient, in eager too), and every
    input that gets neither (its gradient taken elsewhere: not known here); None where the trace was not of every
    gradient."""
    layout, flat, n = setup.layout, setup.flat, len(setup.grad_inputs)
    if setup.wrt_only is not None or len(reach) != n + len(setup.group_grads):
        return None
    reached = {i for k, i in enumerate(setup.grad_inputs) if reach[k]}
    accounted = set(setup.grad_inputs)
    for j, k in enumerate(setup.group_grads):
        owners = {layout.leaves[m].owner for m in layout.groups[group_of(layout, k)].members}
        members = {i for i, index in enumerate(flat.tensor_indices) if index in owners}
        accounted |= members
        if reach[n + j]:
            reached |= {i for i in members if i >= len(read_reach) or read_reach[i] is None or read_reach[i]}
    return frozenset(reached | (set(range(len(flat.tensor_indices))) - accounted))


def _reached(setup: JointSetup, reach: Sequence[frozenset[int]]) -> list[int]:
    """The tensor inputs whose gradient some diff output reaches in the trace."""
    return [i for k, i in enumerate(setup.grad_inputs) if k < len(reach) and reach[k]]


def _returned_leaves(
    setup: JointSetup, patterns: TangentPatterns | None, reach: Sequence[frozenset[int]]
) -> frozenset[int]:
    """Tensor input positions of the leaves of Note [Backward Errors Are Deferred]."""
    if patterns is None:
        return frozenset()
    flat, analysis = setup.flat, setup.analysis
    returned = {info.input_index for info in analysis.outputs if info.kind is OutputKind.IS_INPUT}
    out = set()
    for k, i in enumerate(setup.grad_inputs):
        real = flat.values[flat.tensor_indices[i]]
        if not (isinstance(real, torch.Tensor) and real.is_leaf) or flat.tensor_indices[i] not in returned:
            continue
        muts = [analysis.mutations[j] for j in setup.layout.leaves_of_input[i]]
        if k < len(reach) and not reach[k] & patterns.full and not any(m.any or m.version_bumped for m in muts):
            out.add(i)
    return frozenset(out)


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


def _view_replay_refusal(layout: DenseLayout, analysis: Analysis, error: Exception) -> UnsupportedError:
    """Note [Backward Errors Are Deferred]."""
    named = _replayed_views(layout, analysis)
    first = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if not named:  # no input's storage or layout changed: an op's backward formula raised while traced
        return UnsupportedError(
            f"the program's backward raises while it is traced ({first}), with no view of a changed input to "
            "replay: an op's backward formula fails on these inputs (as eager's backward of a jagged NestedTensor's "
            "softmax over its last dim does, its forward running); not supported in training. Run the program under "
            "torch.no_grad(), or use an op whose backward supports the input"
        )
    return UnsupportedError(
        f"{named}: the program's backward fails rebuilding the autograd history of a view ({first}): autograd "
        "replays the view's ops on the tensor it is a view of, which the program set_() or changed in place to a "
        "layout they do not apply to (Note [Backward Errors Are Deferred]); eager's backward fails so for a subclass "
        "view, but such a failure is not deferred to the backward: not supported in training. Compute from a clone "
        "of the view, or set_() a clone of its base"
    )


def _replayed_views(layout: DenseLayout, analysis: Analysis) -> str:
    """Paths of the tensor inputs that are views of another input whose storage or layout the program changed
    ("args[0] (a view of args[2])"), else of the inputs whose storage or layout it changed."""

    def changed(i: int) -> bool:
        return any(analysis.mutations[j].swapped or analysis.mutations[j].metadata for j in layout.leaves_of_input[i])

    def path(i: int) -> str:
        return layout.leaves[layout.leaves_of_input[i][0]].path.split(".")[0]

    views = [
        f"{path(i)} (a view of {path(k)})"
        for i, k in enumerate(layout.view_of)
        if k is not None and layout.leaves_of_input[i] and layout.leaves_of_input[k] and changed(k)
    ]
    if views:
        return ", ".join(views)
    return ", ".join(path(i) for i in range(len(layout.trees)) if layout.leaves_of_input[i] and changed(i))


def _refuse_view_replay_limit(error: Exception) -> None:
    """Refuse a traced backward that fails by a limit of autograd's view replay, not by the program's own error."""
    if "CopySlices returned an invalid gradient" in str(error):
        # A limit of autograd's view replay, which it uses on functional tensors: a write through a view whose
        # shape an in-place view op changed replays the view without that op; eager's
        # backward, which takes the view with as_strided, runs.
        raise UnsupportedError(
            f"the program writes in place through a view whose shape an in-place view op changed (t = x.t(); "
            f"t.unsqueeze_(0); t.add_(1)), and its traced backward fails ({error}) where eager's runs: autograd "
            "replays such a view without the in-place view op under functionalization; not supported in training. "
            "Use the out-of-place view op (t = t.unsqueeze(0)), or write under torch.no_grad()"
        ) from error


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


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardVariant:
    """A backward graph for tangents of another structure than the traced one (Note [Tangent Retrace]). Its fields
    mean what RetracedBackward's (runtime/plan.py) do, `graph` being the `run` it compiles to."""

    graph: torch.fx.GraphModule
    saved_index: tuple[int, ...]
    example_inputs: tuple[object, ...]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...]
    unused: frozenset[int]
    tangent_deps: tuple[frozenset[int], ...]


def retrace_backward(
    meta: BackwardGraph,
    trees: Sequence[SubclassNode | None],
    dense_tangents: Sequence[Sequence[torch.Tensor]],
    absent: frozenset[int] = frozenset(),
    output_sizes: Sequence[Sequence[torch.Size]] = (),
) -> BackwardVariant:
    """The backward for runtime tangents of structure `trees` (dense leaves `dense_tangents`, per diff output),
    where the diff outputs at positions `absent` got no tangent (Note [Tangent Retrace]). `output_sizes`: per diff
    output, its dense leaves' sizes in the call whose backward this is."""
    setup, reference = meta.setup, meta.partition
    if setup is None or reference is None:
        raise AssertionError("BUG: a tangent retrace of an entry without a partition")
    for value in setup.flat.values:
        if isinstance(value, torch.Tensor):
            # The compile-time inputs are read while the joint trace runs (is_leaf): a view among them whose base
            # a later call wrote rebuilds its grad_fn on that read, on real tensors, so it does it here, outside
            # the fake mode (Note [Aliased Inputs In Training]: a member written rebases the others).
            refresh_view_grad_fn(value)
    fakes = _retrace_tangent_fakes(meta, trees, dense_tangents, output_sizes)
    # See Note [Backward Errors Are Deferred]: those tangents are never given to this backward
    joint = trace_joint(setup, fakes, trees, absent=absent | meta.raising_tangents)
    # (a change whose custom Function nodes no given tangent reaches is not made: Note [Custom Functions])
    given = frozenset(range(len(meta.diff_outputs))) - absent - meta.raising_tangents
    reshapes = tuple(r for r in meta.backward_reshapes if all(reached & given for reached in r.reached_by))
    if joint.backward_mutations != meta.backward_mutations or joint.backward_reshapes != reshapes:
        raise UnsupportedError(
            "the backward retraced for a new tangent type writes other inputs than the compiled one; pass "
            "tangents of the type of the outputs"
        )
    graph, index, example = partition_backward_like(joint.graph, len(setup.example), joint.num_fw_outputs, reference)
    return BackwardVariant(
        graph=graph,
        saved_index=index,
        example_inputs=example,
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        unused=joint.unused,
        tangent_deps=joint.reach,
    )


def _retrace_tangent_fakes(
    meta: BackwardGraph,
    trees: Sequence[SubclassNode | None],
    dense_tangents: Sequence[Sequence[torch.Tensor]],
    output_sizes: Sequence[Sequence[torch.Size]],
) -> list[torch.Tensor]:
    """Fakes of a retrace's runtime tangents (Note [Tangent Retrace]). The primals are the compile's fakes, whose
    symbols are hinted by the compile's sizes: a dense contiguous floating leaf of a tangent with the output's class,
    of its output leaf's size in this call, takes the symbolic size its tangent was traced with; any other is a
    static fake of its own size (an integer leaf, an NJT's offsets that is an input's, is no primal:
    fresh_static_fake)."""
    mode = meta.setup.fake_mode if meta.setup is not None else None
    assert mode is not None, "BUG: a tangent retrace of an entry without a setup"
    fakes: list[torch.Tensor] = []
    start = 0
    for k, leaves in enumerate(dense_tangents):
        traced_tree = meta.tangent_trees[k]
        width = 1 if traced_tree is None else traced_tree.num_leaves
        traced = meta.tangent_sizes[start : start + width]
        start += width
        same = (trees[k] is None) == (traced_tree is None) and (
            traced_tree is None or cast(SubclassNode, trees[k]).cls is traced_tree.cls
        )
        sizes = output_sizes[k] if k < len(output_sizes) else ()
        for p, t in enumerate(leaves):
            strides = (
                _strides_over(t, traced[p])
                if same
                and len(leaves) == len(traced) == len(sizes)
                and t.dtype.is_floating_point
                and t.shape == sizes[p]
                and len(traced[p]) == t.dim()
                else None
            )
            with mode:
                fakes.append(
                    torch.empty_strided(traced[p], strides, dtype=t.dtype, device=t.device)
                    if strides is not None
                    else fresh_static_fake(mode, t)
                )
    return fakes


def _strides_over(t: torch.Tensor, sizes: Sequence[_Dim]) -> list[_Dim] | None:
    """`t`'s strides as expressions of `sizes` (its sizes, some symbolic), where `t` is dense in some dim order
    apart from expanded dims (stride 0: a `sum().backward()` tangent); None where it is laid out otherwise."""
    real = t.stride()
    kept = sorted((d for d in range(t.dim()) if real[d] != 0), key=lambda d: (-real[d], d))
    dense = _dense_strides([t.shape[d] for d in kept], range(len(kept)))
    if any(dense[i] != real[d] for i, d in enumerate(kept)):
        return None
    out: list[_Dim] = [0] * t.dim()
    for d, stride in zip(kept, _dense_strides([sizes[d] for d in kept], range(len(kept))), strict=True):
        out[d] = stride
    return out


def backward_plan(
    meta: BackwardGraph, compile_variant: Callable[[BackwardVariant], Callable[..., object]]
) -> BackwardPlan:
    """What the runtime needs of `meta`: no graph it does not run, no fake tensor, and a retrace that compiles its
    backward through `compile_variant` (Note [Tangent Retrace])."""

    def retrace(
        trees: Sequence[SubclassNode | None],
        dense_tangents: Sequence[Sequence[torch.Tensor]],
        absent: frozenset[int],
        output_sizes: Sequence[Sequence[torch.Size]],
    ) -> RetracedBackward:
        variant = retrace_backward(meta, trees, dense_tangents, absent, output_sizes)
        return RetracedBackward(
            run=compile_variant(variant),
            saved_index=variant.saved_index,
            grad_trees=variant.grad_trees,
            grad_stride_leaves=variant.grad_stride_leaves,
            unused=variant.unused,
            tangent_deps=variant.tangent_deps,
        )

    return BackwardPlan(
        error=meta.error,
        raising_tangents=meta.raising_tangents,
        raising_patterns=meta.raising_patterns,
        unprobed_values=meta.unprobed_values,
        detached=meta.detached,
        diff_outputs=meta.diff_outputs,
        grad_inputs=meta.grad_inputs,
        unused=meta.unused,
        grad_trees=meta.grad_trees,
        grad_stride_leaves=meta.grad_stride_leaves,
        tangent_deps=meta.tangent_deps,
        backward_mutations=meta.backward_mutations,
        backward_reshapes=meta.backward_reshapes,
        tangent_trees=meta.tangent_trees,
        wrapper_updates=meta.wrapper_updates,
        group_grads=meta.group_grads,
        tangent_strides=meta.tangent_strides,
        tangent_orders=meta.tangent_orders,
        num_saved=meta.num_saved,
        saved_primals=meta.saved_primals,
        saved_clones=meta.saved_clones,
        forward_reads_grad_mode=meta.forward_reads_grad_mode,
        rerun=meta.joint.forward if meta.joint is not None else None,
        num_fw_outputs=meta.num_fw_outputs,
        subclass_grads=meta.subclass_grads,
        retrace=retrace,
    )


_Dim = int | torch.SymInt


def _dense_order(t: torch.Tensor) -> tuple[int, ...] | None:
    """Note [Tangent Retrace]: the dims of `t` (a traced tangent with symbolic strides), outermost first,
    where its strides are the dense strides of that order; None where they are static or not so."""
    sizes, strides = t.shape, t.stride()
    if _static_strides(t) is not None or any(try_expr_of(v) is None for v in (*sizes, *strides)):
        return None
    order = tuple(sorted(range(t.dim()), key=lambda d: (-hint_of(strides[d]), d)))
    dense = _dense_strides(sizes, order)
    return order if all(try_expr_of(a) == try_expr_of(b) for a, b in zip(strides, dense, strict=True)) else None


def _dense_strides(sizes: Sequence[_Dim], order: Sequence[int]) -> list[_Dim]:
    """The strides of a dense tensor of `sizes` whose dims, outermost first, are `order` (as empty_like lays out)."""
    out: list[_Dim] = [1] * len(sizes)
    step: _Dim = 1
    for d in reversed(order):
        out[d] = step
        size = sizes[d]
        step = step * (max(size, 1) if isinstance(size, int) else size)
    return out


def _static_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    strides = t.stride()
    return tuple(int(s) for s in strides) if all(isinstance(s, int) for s in strides) else None
