"""Stage `trace` (training): the joint forward+backward graph, partitioned into a forward and a backward graph.

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the inference `TracedGraph` (its GraphOutputs), dense
fakes, fake mode.
Output: `BackwardGraph`: the forward graph `(primals...) -> (GraphOutputs..., saved...)` and the backward graph
`(saved..., tangents...) -> (grads per user tensor input (dense)..., backward-mutated inputs...)`, or the program's
own backward error (Note [Backward Errors Are Deferred]).
Invariants: see Note [Training Through A Joint Graph]; both graphs are purely functional; tangents come in dense
(subclass tangents flattened), one per differentiable forward output, in forward-output order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree

from subclassaot.backward_probe import (
    BackwardEnd,
    TangentPatterns,
    probe_eager_backward,
    refuse_layout_changed_behind_autograd,
    tangent_patterns,
)
from subclassaot.desugar import graph_example_inputs, leaf_meta
from subclassaot.errors import UnsupportedError
from subclassaot.functional_run import FunctionalRun, intermediate_bases, run_functional
from subclassaot.grad_scope import check_backward_metadata, metadata_of
from subclassaot.partition import Partition, partition_backward_like, partition_joint
from subclassaot.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.schemas import (
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    LeafSource,
    OutputKind,
    Replay,
    ReplaySource,
)
from subclassaot.torch_internals import (
    from_functional,
    grad_fn_raises,
    mutation_counter,
    new_functional_mode,
    storage_key,
    to_functional,
    trace_graph,
)
from subclassaot.trace import TracedGraph, UpdateKind, graph_output_values
from subclassaot.training_rules import duplicate_wrappers, grad_bases, group_of, wrapper_update_inputs

# Note [Training Through A Joint Graph]
# When an input requires grad, one make_fx trace over (primals, tangents) runs the program on the primals (under
# functionalization, with autograd on), then torch.autograd.grad of its differentiable outputs with respect to the
# user tensor inputs that require grad. The joint graph returns the forward graph's outputs (exactly the inference
# graph's GraphOutputs: input updates, fresh leaves, intermediate bases, symbolic ints), then the dense gradients,
# then the inputs the backward itself writes. partition.py splits it (Note [Partitioning The Joint Graph]): the
# forward graph also returns the saved values, and the backward graph takes (saved..., tangents...). The runtime
# runs both in one autograd.Function (autograd_runtime.py). So a random op is drawn once, in the forward, and its
# value is saved for the backward (gradients agree with the forward and the generator advances as in eager), and
# what is saved is what autograd's formulas read, never more than eager keeps. Inputs gradients are taken for run as
# clones inside the trace, so that the program's writes to them happen to non-leaves, as in eager; the epilogue
# then writes the real input, and a primal the backward reads is copied first if the epilogue is about to write it.

# Note [Double Backward By Recompute]
# The backward graph reads saved values the forward computed under no_grad: differentiating it again
# (create_graph=True) would miss their dependence on the inputs. So with the eager backend (whose graphs run aten ops
# autograd records) a double backward runs the joint graph again from the primals instead, which autograd records
# from the inputs on, as eager does. That rerun must see the forward's values: it is refused (UnsupportedError) for
# a program with random ops (it would draw again) or one that writes its inputs (the epilogue has changed them).
# The Function keeps weak references to its graph inputs (and their versions) for that: one freed or written since
# the forward is refused too, rather than recomputed from other values.


# Note [Backward Errors Are Deferred]
# Some programs run forward fine in eager and fail only in backward: x.mul_(x) on a tensor autograd saved, set_() on
# a tensor that requires grad, a custom backward that raises. Tracing our backward graph hits the same error at
# compile time. Raising it there would fail a call that eager completes, so the error is kept with the entry and
# raised, unchanged, when (and only when) the backward runs. That is eager's behaviour only when
#   * every differentiable output's backward fails alone (else eager's backward through the others succeeds: a
#     backward for some tangents only is not traced, so such a program is refused). Checked for the program's
#     outputs only, not the new values of the inputs it writes: a backward through those alone (after the call)
#     still raises where eager's may not (a spurious error, never a wrong gradient), and
#   * no input reached from the program's outputs has a gradient that avoids the failing node (checked by one
#     trace per input, `JointSetup.wrt_only`): eager accumulates such a gradient before the failing node runs or
#     not, by the order autograd runs its nodes (refused); inputs that require grad but are reached by no output
#     are given to the Function detached, so that their own gradient (a returned input) is not held back behind
#     our raising backward.
# Both checks read the functional trace, whose saved values and version counters are not eager's. So first the
# compile runs eager's own backward on fakes (Note [Probing Eager's Backward]): where it shows every backward through
# all of the outputs raising before any gradient, the error is deferred without the checks, and a backward through
# other outputs is refused when it runs unless the probe saw that set raise so too; where it shows that backward
# completing, Note [Backward Errors Through Input Values Only] may apply.


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardGraph:
    graph: torch.fx.GraphModule | None  # (saved..., tangents...) -> (grads..., backward mutations...); None: `error`
    # (primals...) -> (the forward graph's outputs (GraphOutputs)..., saved...); None when the joint trace failed
    # (the inference graph is the forward then)
    forward: torch.fx.GraphModule | None
    # the program's own backward error, raised when backward runs (`graph` None) or when one of the diff outputs at
    # positions `raising_tangents` gets a tangent (Note [Backward Errors Through Input Values Only])
    error: RuntimeError | None
    raising_tangents: frozenset[int] = frozenset()
    # `graph` None: the sets of diff positions given a tangent for which eager's backward was seen to raise before
    # any gradient (Note [Probing Eager's Backward]); another set is refused when backward runs. None: not probed
    raising_patterns: frozenset[frozenset[int]] | None = None
    diff_outputs: tuple[int, ...]  # forward-output positions (tensor outputs) that receive a tangent
    grad_inputs: tuple[int, ...]  # tensor-input positions (FlatInputs.tensor_indices order) that get a gradient
    unused: frozenset[int]  # positions in grad_inputs whose gradient eager leaves None (unreachable from outputs)
    grad_trees: tuple[SubclassNode | None, ...]  # per grad input: the gradient's subclass structure (None: plain)
    # per grad input: the dense leaf (position among its leaves) whose size and stride its subclass gradient had
    # while tracing (Note [Subclass Gradient Strides])
    grad_stride_leaves: tuple[int | None, ...] = ()
    # per grad input: the diff outputs (positions in diff_outputs) whose tangents reach its gradient in the graph
    tangent_deps: tuple[frozenset[int], ...]
    # dense inputs the backward itself writes (a custom Function's backward updating a buffer); their new values
    # follow the gradients in the graph's outputs, and the runtime copies them into the real inputs
    backward_mutations: tuple[DenseIndex, ...]
    tangent_trees: tuple[SubclassNode | None, ...]  # per diff output: the subclass structure its tangent must have
    wrapper_updates: tuple[int, ...]  # tensor inputs whose new value the Function returns as a wrapper (last outputs)
    # graph inputs (synthetic bases of aliased inputs) that require grad: Function inputs after the user tensors,
    # their gradients after the user inputs' (Note [Aliased Inputs In Training])
    group_grads: tuple[int, ...] = ()
    tangent_strides: tuple[tuple[int, ...] | None, ...] = ()  # per dense tangent: its traced strides (static ones)
    example_inputs: tuple[object, ...]  # the backward graph's (fake tensors, symbolic ints)
    num_saved: int = 0  # forward outputs after the GraphOutputs ones, the backward's first inputs
    # The joint graph itself, kept where it can run again from the primals for double backward (no random op in
    # the forward: a rerun would draw other values); see Note [Double Backward By Recompute]
    joint: torch.fx.GraphModule | None = None
    num_fw_outputs: int = 0  # the joint graph's outputs before the gradients
    # Compile-time records for a tangent retrace (Note [Tangent Retrace]); the per-call path never reads them
    setup: JointSetup | None = None
    partition: Partition | None = None
    saved_primals: tuple[int | None, ...] = ()  # per saved value: the graph input it is, if it is one


def forward_output_values(
    run: FunctionalRun, traced: TracedGraph, analysis: Analysis, wrapper_updates: tuple[int, ...]
) -> list[torch.Tensor]:
    """The forward graph's tensor outputs as user-level tensors (fresh subclass outputs wrapped), in order, then
    the new value of each subclass input in `wrapper_updates` (Note [Subclass Inputs Mutated In Training]), then
    the intermediate subclass roots (Note [Intermediate Roots In Training])."""
    run_output, finals, originals, graph_inputs = run.output, run.finals, run.originals, run.graph_inputs
    out: list[torch.Tensor] = []
    for update in traced.outputs.updates:
        if update.kind is UpdateKind.BASE:
            out.append(graph_inputs[update.target])
        elif update.kind is UpdateKind.ORIGINAL:
            out.append(_original_value(originals[update.target], finals[update.target]))
        else:
            out.append(finals[DenseIndex(update.target)])
    leaves, _ = pytree.tree_flatten(run_output)
    for info, value in zip(analysis.outputs, leaves, strict=True):
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves):
            assert isinstance(value, torch.Tensor)
            out.append(value)
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(finals)}
    original = {storage_key(o): DenseIndex(j) for j, o in enumerate(originals)}
    bases = intermediate_bases(leaves, current, original, run.swaps)
    out.extend(base for _, base in sorted(bases.values(), key=lambda item: item[0]))
    out.extend(run.user_tensors[i] for i in wrapper_updates)
    out.extend(_root_values(run, analysis, leaves))
    return out


# Note [Subclass Gradient Strides]
# A subclass gradient is rebuilt from its dense leaves after the backward graph ran. Its outer strides are what
# autograd's later nodes read: the user's own ViewBackward (x = leaf.view(...)) reshapes it, which views it where its
# outer strides allow and then views each inner tensor. So where the traced gradient had the size and stride of one
# of its leaves (a wrapper taking them from its first inner tensor, as eager's did), it takes that leaf's real
# strides; otherwise the input's own size and stride.


# Note [Original Values After In-Place View Ops]
# The new data of an input in its original layout (an ORIGINAL update) is read through an alias taken before the
# program ran. Once the program writes the input, autograd rebuilds that alias's grad_fn from the input's current
# history, which an in-place view op (x.transpose_(0, 1), x.as_strided_(...)) has left in another layout: the alias
# then sends its gradient, in the original layout, to a node expecting the new one (autograd raises "invalid
# gradient ... got [1, 2] but expected shape compatible with [2, 1]"). So where the input ends in another layout on
# the same storage, the differentiated value is a view of the input as it ends instead, taken after the program,
# with the original size, stride and offset: the same elements, through a history autograd keeps consistent. (A
# non-view input is mostly not differentiated there at all: Note [Overwritten Original Updates].)


def _original_value(original: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
    """The value differentiated for an ORIGINAL update (Note [Original Values After In-Place View Ops])."""
    if leaf_meta(original) == leaf_meta(final) or storage_key(original) != storage_key(final):
        return original
    return final.as_strided(original.shape, original.stride(), original.storage_offset())


# Note [Intermediate Roots In Training]
# Outputs that view one intermediate subclass tensor (`y = x.clone(); return y.view(-1), y.t()`) are replayed from
# a wrapper around the intermediate's dense leaves (Note [Subclass Intermediate Roots]). In training that wrapper is
# the intermediate itself as the compiled autograd.Function returns it: one more differentiable output per root
# (after the wrapper updates), built inside the Function from the intermediate bases, so that its inner tensors are
# the very bases other outputs (`y.a`) alias. The views are replayed on it with grad enabled: each output is a view
# of one shared `_base` and the gradients of all of them reach the root's tangent, as in eager.


def training_roots(analysis: Analysis) -> tuple[Replay, ...]:
    """The distinct intermediate subclass roots the outputs replay from, in output order."""
    seen: dict[tuple[int, ...], Replay] = {}
    for info in analysis.outputs:
        r = info.replay
        if info.kind is OutputKind.TENSOR and r is not None and r.source is ReplaySource.WRAPPER:
            seen.setdefault(r.root_bases, r)
    return tuple(seen.values())


def _root_values(run: FunctionalRun, analysis: Analysis, leaves: list[object]) -> list[torch.Tensor]:
    """Per training root: the intermediate subclass tensor of the traced run (the source of its view chain)."""
    found: dict[tuple[int, ...], torch.Tensor] = {}
    for info, value in zip(analysis.outputs, leaves, strict=True):
        r = info.replay
        if info.kind is not OutputKind.TENSOR or r is None or r.source is not ReplaySource.WRAPPER:
            continue
        assert isinstance(value, torch.Tensor)
        t = value
        while (record := run.swaps.views.get(id(t))) is not None:
            t = record.source
        found.setdefault(r.root_bases, t)
    return [found[r.root_bases] for r in training_roots(analysis)]


@dataclass(frozen=True, slots=True, kw_only=True)
class JointSetup:
    """What tracing the joint graph needs (compile time only; a tangent retrace keeps it in a closure)."""

    call: Callable[..., object]
    flat: FlatInputs
    layout: DenseLayout
    analysis: Analysis
    traced: TracedGraph
    user_fakes: tuple[torch.Tensor, ...]  # per tensor input
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None
    example: tuple[torch.Tensor, ...]  # per graph input: its fake (the primals)
    grad_inputs: tuple[int, ...]  # see BackwardGraph
    group_grads: tuple[int, ...]
    wrapper_updates: tuple[int, ...]
    diff: tuple[int, ...]  # BackwardGraph.diff_outputs
    # Note [Backward Errors Are Deferred]: differentiate with respect to this one of the gradients taken only
    wrt_only: int | None = None
    # tensor inputs run as a view of their clone (Note [Writes To Plain View Inputs Make Plain Gradients])
    view_clones: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedJoint:
    graph: torch.fx.GraphModule  # (primals..., tangents...) -> (GraphOutputs..., grads..., backward mutations...)
    num_fw_outputs: int
    unused: frozenset[int]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...]
    backward_mutations: tuple[DenseIndex, ...]
    # per gradient taken (grad inputs, then synthetic bases): the diff outputs (positions in diff) from whose
    # autograd graph it is reachable; eager's gradient is None when no output with a tangent reaches it
    reach: tuple[frozenset[int], ...]


def trace_joint(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    tangent_trees: Sequence[SubclassNode | None] | None,
    reach_sink: list[frozenset[int]] | None = None,
    absent: frozenset[int] = frozenset(),
) -> TracedJoint:
    """make_fx of the program then autograd.grad (Note [Training Through A Joint Graph]). `tangent_trees`: the
    structure each diff output's tangent is rebuilt with (None: the output's own structure). `reach_sink` receives
    TracedJoint.reach even when autograd.grad then raises (Note [Backward Errors Are Deferred]). `absent`: positions
    in diff whose outputs get no tangent (their tangent placeholders stay unread; Note [Gradient Types Follow The
    Tangents Given])."""
    n_primals = len(setup.example)
    unused: set[int] = set()
    grad_trees: list[SubclassNode | None] = []
    stride_leaves: list[int | None] = []
    bw_mutated: list[DenseIndex] = []
    n_fw_outputs = [0]
    reach: list[frozenset[int]] = [] if reach_sink is None else reach_sink
    clone = frozenset(setup.grad_inputs)

    def joint_fn(*values: torch.Tensor) -> list[object]:
        primals, tangents = values[:n_primals], list(values[n_primals:])
        with new_functional_mode(), torch.enable_grad():
            tangents = [to_functional(t) for t in tangents]
            run = run_functional(
                setup.call,
                setup.flat,
                setup.layout,
                primals,
                requires_grad_like=setup.user_fakes,
                clone_inputs=clone,
                clone_graph_inputs=frozenset(setup.group_grads),
                view_clone_inputs=setup.view_clones,
            )
            fw_outs = graph_output_values(run, setup.traced.outputs.updates, setup.analysis)[0]
            n_fw_outputs[0] = len(fw_outs)
            outs = forward_output_values(run, setup.traced, setup.analysis, setup.wrapper_updates)
            diff_outs = [outs[i] for i in setup.diff]
            trees = tangent_trees if tangent_trees is not None else [_tree_of(o) for o in diff_outs]
            grad_outs = [_rewrap_tangent(tree, tangents) for tree in trees]
            wrt = [run.grad_leaves[i] for i in setup.grad_inputs]
            wrt += [run.graph_grad_leaves[k] for k in setup.group_grads]
            if setup.wrt_only is not None:
                wrt = [wrt[setup.wrt_only]]
            before = [mutation_counter(o) for o in run.originals]
            metas = [metadata_of(t) for t in run.user_tensors]
            reach[:] = _autograd_reach(diff_outs, wrt)
            given = [k for k in range(len(diff_outs)) if k not in absent]
            grads = _grads([diff_outs[k] for k in given], wrt, [grad_outs[k] for k in given])
            check_backward_metadata(setup.flat, run.user_tensors, metas)
            bw_mutated[:] = [DenseIndex(j) for j, o in enumerate(run.originals) if mutation_counter(o) != before[j]]
            grad_trees.clear()
            stride_leaves.clear()
            dense = _dense_grads(grads, wrt, unused, grad_trees, stride_leaves)
            return [*fw_outs, *dense, *(from_functional(run.originals[j]) for j in bw_mutated)]

    with setup.fake_mode:
        joint = trace_graph(joint_fn, [*setup.example, *tangent_fakes], setup.decompositions)
    return TracedJoint(
        graph=joint,
        num_fw_outputs=n_fw_outputs[0],
        unused=frozenset(unused),
        grad_trees=tuple(grad_trees),
        grad_stride_leaves=tuple(stride_leaves),
        backward_mutations=tuple(bw_mutated),
        reach=tuple(reach),
    )


def _autograd_reach(outs: Sequence[torch.Tensor], wrt: Sequence[torch.Tensor]) -> list[frozenset[int]]:
    """For each tensor in `wrt`: the outputs whose autograd graph reaches it (eager gives it a gradient, maybe zeros,
    exactly when one of those outputs gets a tangent). Read off the autograd graph, not the traced fx graph, whose
    data dependencies differ (a zero gradient may be a constant there)."""
    visited: list[set[object]] = []
    for out in outs:
        seen: set[object] = set()
        stack: list[Any] = [out.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            stack.extend(parent for parent, _ in node.next_functions)
        visited.append(seen)
    result = []
    for x in wrt:
        result.append(frozenset(j for j, seen in enumerate(visited) if _autograd_node_of(x, seen)))
    return result


def _autograd_node_of(x: torch.Tensor, seen: set[object]) -> bool:
    if x.grad_fn is not None:
        return x.grad_fn in seen
    return any(getattr(node, "variable", None) is x for node in seen)


# Note [Overwritten Original Updates]
# A plain input the program writes and then changes the metadata of (x.mul_(2); x.t_()) gets an ORIGINAL update
# (copied in before the view ops are replayed) and a FINAL one (copied in after, with grad). The FINAL copy_
# replaces everything of the input autograd can see, so the ORIGINAL value's gradient is zero, in eager's history
# as in ours; it is not differentiated (differentiating it through the traced in-place view ops fails). Only where
# no one else sees the original storage through autograd: the input is not a view, keeps its storage, and its
# writes are visible to autograd (else the FINAL copy is not recorded).


def _overwritten_originals(
    traced: TracedGraph, analysis: Analysis, dense_fakes: Sequence[torch.Tensor]
) -> frozenset[int]:
    """Forward-output positions of ORIGINAL updates that are not differentiated (Note [Overwritten Original
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
    under no_grad (the swap is the op autograd sees: Note [set_ Under Grad], Note [Inputs That Gain Grad In
    Training]), so they get no gradient, and differentiating them would raise set_'s backward error for a
    backward eager completes."""
    return frozenset(
        k
        for k, u in enumerate(traced.outputs.updates)
        if u.kind is not UpdateKind.BASE and analysis.mutations[u.target].storage_changed
    )


def _tree_of(t: torch.Tensor) -> SubclassNode | None:
    return flatten_subclass(t, "tangent")[0] if is_traceable_subclass(t) else None


def _grads(
    diff_outs: list[torch.Tensor], wrt: list[torch.Tensor], grad_outs: list[torch.Tensor]
) -> list[torch.Tensor | None]:
    live = [k for k, x in enumerate(wrt) if x.requires_grad]  # detach_() in the program drops an input
    found = (
        torch.autograd.grad(diff_outs, [wrt[k] for k in live], grad_outs, allow_unused=True)
        if diff_outs and live
        else [None] * len(live)
    )
    grads: list[torch.Tensor | None] = [None] * len(wrt)
    for k, g in zip(live, found, strict=True):
        grads[k] = g
    return grads


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
    group_grads = grad_bases(layout, user_fakes)
    in_groups = {layout.leaves[m].owner for k in group_grads for m in layout.groups[group_of(layout, k)].members}
    duplicates = duplicate_wrappers(layout)  # Note [Aliased Subclass Inputs In Training]
    grad_inputs = tuple(
        i
        for i, t in enumerate(user_fakes)
        if t.requires_grad and flat.tensor_indices[i] not in in_groups and i not in duplicates
    )
    example = graph_example_inputs(layout, dense_fakes)
    with fake_mode:
        for k in group_grads:  # a base taken from a member that does not require grad (x.detach(), x)
            if not example[k].requires_grad:
                example[k] = example[k].detach().requires_grad_(True)
    wrapper_updates = wrapper_update_inputs(layout, analysis, user_fakes)
    # Every input gradients are taken for runs as a clone: a write to it, or an in-place view op on a view of it,
    # then happens to a non-leaf as in eager (Note [Training Through A Joint Graph]).
    clone = frozenset(grad_inputs)
    with fake_mode, torch.enable_grad():
        fw_example = _forward_example(
            call, flat, layout, analysis, traced, example, user_fakes, clone, wrapper_updates, group_grads
        )
    overwritten = _overwritten_originals(traced, analysis, dense_fakes) | _swapped_updates(traced, analysis)
    diff = tuple(i for i, (grad, _, _) in enumerate(fw_example) if grad and i not in overwritten)
    with fake_mode:
        tangent_fakes = [torch.empty_like(t) for i in diff for t in fw_example[i][1]]
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
    )
    tangent_trees = tuple(fw_example[i][2] for i in diff)
    reach: list[frozenset[int]] = []
    error: RuntimeError | None = None
    raising: frozenset[int] = frozenset()
    try:
        setup, joint = _trace_joint_views(setup, tangent_fakes, reach)
    except UnsupportedError:
        raise
    except RuntimeError as e:
        # The program's backward itself fails (set_ has no derivative, a saved tensor was modified in place):
        # eager raises only when backward runs, and so do we (Note [Backward Errors Are Deferred]).
        error = e
        _refuse_view_replay_limit(e)
        refuse_layout_changed_behind_autograd(call, flat, layout, analysis, e)
        patterns = _probe(setup)
        found = _backward_without_input_values(setup, tangent_fakes, reach, patterns)
        if found is not None:
            setup, joint, raising = found
        else:
            verified = _deferred_exactly(setup, patterns)
            if verified is None:
                _check_deferred_error(setup, [fw_example[i][1] for i in diff], reach, e)
                _refuse_by_probe(patterns, e)
            return BackwardGraph(
                raising_patterns=verified,
                graph=None,
                forward=None,
                error=e,
                diff_outputs=diff,
                grad_inputs=grad_inputs,
                unused=frozenset(),
                grad_trees=(),
                tangent_deps=tuple(reach),
                backward_mutations=(),
                tangent_trees=tangent_trees,
                example_inputs=(),
                wrapper_updates=wrapper_updates,
                group_grads=group_grads,
            )
    if error is None:
        refuse_layout_changed_behind_autograd(call, flat, layout, analysis, None)
    o = traced.outputs
    if joint.num_fw_outputs != len(o.updates) + o.num_fresh + o.num_bases + o.num_symints:
        raise AssertionError("BUG: the joint graph's forward outputs differ from the inference graph's")
    parts = partition_joint(joint.graph, len(example), joint.num_fw_outputs)
    return BackwardGraph(
        joint=None if parts.has_random else joint.graph,
        num_fw_outputs=joint.num_fw_outputs,
        graph=parts.backward,
        forward=parts.forward,
        num_saved=parts.num_saved,
        saved_primals=parts.saved_primals,
        error=error,
        diff_outputs=diff,
        grad_inputs=grad_inputs,
        unused=joint.unused,
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        tangent_deps=joint.reach,
        backward_mutations=joint.backward_mutations,
        tangent_trees=tangent_trees,
        example_inputs=parts.backward_example,
        wrapper_updates=wrapper_updates,
        group_grads=group_grads,
        tangent_strides=tuple(_static_strides(t) for t in tangent_fakes),
        setup=setup,
        partition=parts,
        raising_tangents=raising,
    )


# Note [Writes To Plain View Inputs Make Plain Gradients]
# An in-place op on a view makes autograd's CopySlices node on its base: its backward writes the op's gradient for
# the view's old value into a buffer made from the base's incoming gradient (grad.new_empty_strided(...), then
# copy_), so that gradient takes the incoming gradient's type. A plain input that is a view, written with a subclass
# operand (x1.mul_(pair)), thus gets a plain gradient along that path in eager where a write to a non-view gets the
# subclass one (fuzz seed 3001 #1564). The joint trace runs each input a gradient is taken for as a clone (Note
# [Training Through A Joint Graph]), a non-view; so where a plain input that is a view gets a subclass gradient in
# that trace, the joint is traced again with the input run as a view of its clone (`view_as`), whose writes go
# through CopySlices as eager's do. The gradient's values are the same either way. Plain inputs that require grad
# and are not leaves are guarded on being views (guards.py), so an entry is not reused across the two.


def _plain_views_with_subclass_grads(setup: JointSetup, joint: TracedJoint) -> frozenset[int]:
    """Grad inputs that are plain views with a subclass gradient in `joint` (Note [Writes To Plain View Inputs
    Make Plain Gradients])."""
    found = set()
    for i, tree in zip(setup.grad_inputs, joint.grad_trees, strict=False):
        real = setup.flat.values[setup.flat.tensor_indices[i]]
        if setup.layout.trees[i] is None and tree is not None and isinstance(real, torch.Tensor) and real._is_view():
            found.add(i)
    return frozenset(found)


def _trace_joint_views(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    absent: frozenset[int] = frozenset(),
) -> tuple[JointSetup, TracedJoint]:
    """trace_joint, again with plain view inputs run as views where needed (Note [Writes To Plain View Inputs Make
    Plain Gradients])."""
    joint = trace_joint(setup, tangent_fakes, None, reach, absent=absent)
    if views := _plain_views_with_subclass_grads(setup, joint):
        setup = dataclasses.replace(setup, view_clones=views)
        joint = trace_joint(setup, tangent_fakes, None, reach, absent=absent)
    return setup, joint


def _input_values(setup: JointSetup) -> frozenset[int]:
    """Forward-output positions holding new values of inputs (updates, then wrapper updates)."""
    outputs = setup.traced.outputs
    # one forward output per fresh output (a subclass one has several graph leaves): see forward_output_values
    n_fresh = sum(
        1
        for info in setup.analysis.outputs
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    )
    wrappers_at = len(outputs.updates) + n_fresh + outputs.num_bases
    return frozenset({*range(len(outputs.updates)), *range(wrappers_at, wrappers_at + len(setup.wrapper_updates))})


# Note [Backward Errors Through Input Values Only]
# A program may write an input so that a backward through the input's new value fails (x0.mul_(x0) on a non-leaf
# saves the x0 it overwrites) while a backward through its outputs completes, in eager and in a joint trace that
# takes no tangent for the new values of inputs that no output reaches (`absent`: those a backward through all the
# outputs gives none, TangentPatterns.full). Where the probe (Note [Probing Eager's Backward]) shows eager's
# backward through all the outputs completing, the backward graph is that trace: its placeholders for the absent
# tangents stay unread,
# and the program's error is raised, unchanged, when one of those tangents is given (a backward through the written
# input after the call, which fails in eager too).


def _backward_without_input_values(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    patterns: TangentPatterns | None,
) -> tuple[JointSetup, TracedJoint, frozenset[int]] | None:
    """The joint traced without tangents for the new values of inputs, and their positions in diff, where that
    is eager's backward through the outputs (Note [Backward Errors Through Input Values Only]); else None."""
    if patterns is None:
        return None
    values = _input_values(setup)
    absent = frozenset(p for p, d in enumerate(setup.diff) if d in values) - patterns.full
    if not absent:
        return None
    if patterns.ends.get(patterns.full) is not BackwardEnd.COMPLETES:
        return None
    try:
        traced_setup, joint = _trace_joint_views(setup, tangent_fakes, reach, absent)
    except RuntimeError:
        return None
    return traced_setup, joint, absent


def _probe(setup: JointSetup) -> TangentPatterns | None:
    """Note [Probing Eager's Backward]: how eager's backward through each set of outputs ends, by the tangents the
    compiled Function gets for them."""
    ends = probe_eager_backward(setup.call, setup.flat)
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
    )


def _deferred_exactly(setup: JointSetup, patterns: TangentPatterns | None) -> frozenset[frozenset[int]] | None:
    """Where eager's backward through every output raises before any gradient, and so does the Function's:
    the sets of diff positions whose backward raises so (Note [Probing Eager's Backward]); else None."""
    if patterns is None or patterns.leaf_bypass or not patterns.full:
        return None
    if patterns.ends.get(patterns.full) is not BackwardEnd.RAISES:
        return None
    if patterns.ends.get(frozenset(), BackwardEnd.COMPLETES) is not BackwardEnd.COMPLETES:
        return None  # outputs whose backward never reaches the Function raise in eager
    return frozenset(p for p, end in patterns.ends.items() if end is BackwardEnd.RAISES)


def _refuse_view_replay_limit(error: Exception) -> None:
    """Refuse a traced backward that fails by a limit of autograd's view replay, not by the program's own error."""
    if "CopySlices returned an invalid gradient" in str(error):
        # A limit of autograd's view replay, which it uses on functional tensors: a write through a view whose
        # shape an in-place view op changed replays the view without that op (fuzz seed 7000 #3857); eager's
        # backward, which takes the view with as_strided, runs.
        raise UnsupportedError(
            f"the program writes in place through a view whose shape an in-place view op changed (t = x.t(); "
            f"t.unsqueeze_(0); t.add_(1)), and its traced backward fails ({error}) where eager's runs: autograd "
            "replays such a view without the in-place view op under functionalization; not supported in training. "
            "Use the out-of-place view op (t = t.unsqueeze(0)), or write under torch.no_grad()"
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


def _check_deferred_error(
    setup: JointSetup, diff_leaves: Sequence[Sequence[torch.Tensor]], reach: Sequence[frozenset[int]], error: Exception
) -> None:
    """Refuse a backward error that deferring would not reproduce exactly (Note [Backward Errors Are Deferred]).
    `diff_leaves`: per diff output, its dense leaves (to shape the tangents)."""
    input_values = _input_values(setup)
    returns_tensors = any(info.kind in (OutputKind.TENSOR, OutputKind.IS_INPUT) for info in setup.analysis.outputs)
    if "encountered a mutation on a view chain" in str(error) and returns_tensors:
        # A limit of functionalization, not the program's own error: eager's backward through the outputs (or
        # views of the inputs it returns) runs.
        raise UnsupportedError(
            "the program writes through an as_strided() view with grad, and its backward would write back through "
            "a view chain in which the as_strided() is not the first view (Note [Writes After as_strided In A View "
            "Chain]); not supported in training. Take the as_strided() view of a clone, or write under "
            "torch.no_grad()"
        ) from error
    if len(setup.diff) > 1:
        for d, leaves in zip(setup.diff, diff_leaves, strict=True):
            if d in input_values:
                continue  # an input's new value: backward through it alone is rare; deferring is kept for it
            with setup.fake_mode:
                tangents = [torch.empty_like(t) for t in leaves]
            try:
                trace_joint(dataclasses.replace(setup, diff=(d,)), tangents, None)
            except RuntimeError:
                continue
            raise UnsupportedError(
                f"the program's backward fails in eager ({error}) through some of its differentiable outputs but "
                f"not through forward output {d}: a backward for some outputs only is not supported (Note [Backward "
                "Errors Are Deferred]). Return a clone, or do not write the tensor whose backward fails"
            )
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
            f"the program's backward fails in eager ({error}), but the gradient of an input that requires grad "
            "does not depend on the failing step: eager accumulates it before it raises or not, by the order "
            "autograd runs its nodes, which the compiled backward does not reproduce (Note [Backward Errors Are "
            "Deferred])"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardVariant:
    """A backward graph for tangents of another structure than the traced one (Note [Tangent Retrace])."""

    graph: torch.fx.GraphModule  # (saved[saved_index]..., tangents...) -> (grads..., backward mutations...)
    saved_index: tuple[int, ...]  # per saved placeholder: its position among the forward's saved values
    example_inputs: tuple[object, ...]
    tangent_trees: tuple[SubclassNode | None, ...]  # per diff output: its tangent's structure
    grad_trees: tuple[SubclassNode | None, ...]  # as BackwardGraph's, for this backward
    grad_stride_leaves: tuple[int | None, ...]  # as BackwardGraph's, for this backward
    unused: frozenset[int]
    tangent_deps: tuple[frozenset[int], ...]


def retrace_backward(
    meta: BackwardGraph,
    trees: Sequence[SubclassNode | None],
    dense_tangents: Sequence[Sequence[torch.Tensor]],
    absent: frozenset[int] = frozenset(),
) -> BackwardVariant:
    """The backward for runtime tangents of structure `trees` (dense leaves `dense_tangents`, per diff output),
    where the diff outputs at positions `absent` got no tangent (Note [Gradient Types Follow The Tangents Given])."""
    setup, reference = meta.setup, meta.partition
    if setup is None or reference is None:
        raise AssertionError("BUG: a tangent retrace of an entry without a partition")
    with setup.fake_mode:
        fakes = [setup.fake_mode.from_tensor(t, static_shapes=True) for ts in dense_tangents for t in ts]
    # Note [Backward Errors Through Input Values Only]: those tangents are never given to this backward
    joint = trace_joint(setup, fakes, trees, absent=absent | meta.raising_tangents)
    if joint.backward_mutations != meta.backward_mutations:
        raise UnsupportedError(
            "the backward retraced for a new tangent type writes other inputs than the compiled one; pass "
            "tangents of the type of the outputs"
        )
    graph, index, example = partition_backward_like(joint.graph, len(setup.example), joint.num_fw_outputs, reference)
    return BackwardVariant(
        graph=graph,
        saved_index=index,
        example_inputs=example,
        tangent_trees=tuple(trees),
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        unused=joint.unused,
        tangent_deps=joint.reach,
    )


def _dense_grads(
    grads: list[torch.Tensor | None],
    wrt: list[torch.Tensor],
    unused: set[int],
    grad_trees: list[SubclassNode | None],
    stride_leaves: list[int | None],
) -> list[torch.Tensor]:
    """The gradients' dense leaves (user inputs, then synthetic bases); records their structure in `grad_trees`
    and, for a subclass gradient, the leaf whose size and stride it has in `stride_leaves` (Note [Subclass Gradient
    Strides])."""
    dense: list[torch.Tensor] = []
    for k, (g, x) in enumerate(zip(grads, wrt, strict=True)):
        if g is None:
            unused.add(k)
            # Never read by the runtime (eager's gradient is None). Zeros made from sizes, not from x (zeros_like
            # would make the backward read x, and the forward save it).
            node, zero_of = flatten_subclass(x, "grad") if is_traceable_subclass(x) else (None, [x])
            grad_trees.append(node)
            stride_leaves.append(None)
            dense.extend(from_functional(torch.zeros(t.shape, dtype=t.dtype, device=t.device)) for t in zero_of)
            continue
        if is_traceable_subclass(g):
            node, leaves = flatten_subclass(g, "grad")
            grad_trees.append(node)
            outer = leaf_meta(g)[:2]
            stride_leaves.append(next((j for j, leaf in enumerate(leaves) if leaf_meta(leaf)[:2] == outer), None))
        else:
            grad_trees.append(None)
            stride_leaves.append(None)
            leaves = [g]
        dense.extend(from_functional(leaf) for leaf in leaves)
    return dense


def _static_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    strides = t.stride()
    return tuple(int(s) for s in strides) if all(isinstance(s, int) for s in strides) else None


def _rewrap_tangent(tree: SubclassNode | None, tangents: list[torch.Tensor]) -> torch.Tensor:
    if tree is None:
        return tangents.pop(0)
    taken = [tangents.pop(0) for _ in range(tree.num_leaves)]
    return unflatten_subclass(tree, taken)


def _forward_example(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced: TracedGraph,
    example: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    clone: frozenset[int],
    wrapper_updates: tuple[int, ...],
    group_grads: tuple[int, ...],
) -> list[tuple[bool, list[torch.Tensor], SubclassNode | None]]:
    with new_functional_mode():
        run = run_functional(
            call,
            flat,
            layout,
            example,
            requires_grad_like=user_fakes,
            clone_inputs=clone,
            clone_graph_inputs=frozenset(group_grads),
        )
        outs = forward_output_values(run, traced, analysis, wrapper_updates)
        # Per output: whether it gets a tangent, its dense leaves (plain fakes, to shape the tangents) and its
        # subclass structure (what a runtime tangent is checked and coerced against).
        result: list[tuple[bool, list[torch.Tensor], SubclassNode | None]] = []
        for o in outs:
            node, leaves = flatten_subclass(o, "out") if is_traceable_subclass(o) else (None, [o])
            # A no_grad view of an input that requires grad may report requires_grad under tracing; it has no grad_fn.
            # One whose grad_fn raises (a no_grad view whose base was written since: fuzz seed 7000 #4719) gets no
            # tangent: eager's raises when autograd reads it, and so does the runtime's (analyze._output_info).
            grad = o.requires_grad and not grad_fn_raises(o) and o.grad_fn is not None and o.dtype.is_floating_point
            result.append((grad, [from_functional(leaf) for leaf in leaves], node))
        return result
