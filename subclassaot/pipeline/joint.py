"""Stage `trace` (training), the joint graph: one trace of the program's forward and of autograd's backward over
it (Note [Training Through A Joint Graph]); backward_trace/ partitions it and handles the program's own backward
errors.

Input: `JointSetup` (the call, `FlatInputs`, `DenseLayout`, `Analysis`, the inference `TracedGraph`, fakes) and fake
tangents.
Output: `TracedJoint`: the graph `(primals..., tangents...) -> (GraphOutputs..., grads..., backward mutations...)`.
Invariants: the graph is purely functional; tangents come in dense (subclass tangents flattened), one per
differentiable forward output, in forward-output order.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.fx
from torch.autograd.graph import GradientEdge, get_gradient_edge
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, intermediate_bases, own_leaves_of, run_functional
from subclassaot.pipeline.grad_scope import backward_changes
from subclassaot.pipeline.rules.autograd_state import is_program_function
from subclassaot.pipeline.rules.hidden_layouts import differentiated_as_eager
from subclassaot.pipeline.trace import TracedGraph, base_update, graph_output_values
from subclassaot.runtime.steps import training_roots
from subclassaot.schemas import (
    Analysis,
    BackwardReshape,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    LeafSource,
    OutputKind,
    ReplaySource,
    UpdateKind,
)
from subclassaot.torch_internals import (
    autograd_nodes,
    differentiable_dtype,
    from_functional,
    get_version,
    grad_fn_raises,
    mutation_counter,
    nested_coeff,
    new_functional_mode,
    storage_key,
    to_functional,
    trace_graph,
)

# Note [Training Through A Joint Graph]
# When an input requires grad, one make_fx trace over (primals, tangents) runs the program on the primals (under
# functionalization, with autograd on), then torch.autograd.grad of its differentiable outputs with respect to the user
# tensor inputs that require grad. The joint graph returns the forward graph's outputs (the inference graph's
# GraphOutputs: input updates, fresh leaves, intermediate bases, symbolic ints), the dense gradients, then the inputs the
# backward itself writes. Inputs gradients are taken for run as clones inside the trace, so that the program's writes to
# them happen to non-leaves, as in eager; the epilogue then writes the real input, and a primal the backward reads is
# copied first if the epilogue is about to write it. Not a plain leaf input the analysis finds only read, in a program
# returning no input or view of one (`_read_only_leaves`: a module's parameters, mostly): its clone would be a copy
# the partition drops (ops read the primal) with an identity backward, so the graphs are the same without it, and
# the trace runs one op fewer per such input; nothing changes such a leaf, so it is its own original too (the value
# `run_functional` keeps of each dense leaf as the program found it), one alias fewer, which the graph dropped as dead
# code (its node's name taken all the same, so later nodes keep theirs). The runtime runs forward and backward in one
# autograd.Function.
# Partition (partition.py): the forward region is the nodes the forward outputs need, every random op (eager draws it in
# the forward, once, even when unused) and every symbolic-int node that needs no tangent, with their ancestors; every
# other node the gradients need is the backward region (tangent-free ones too, recomputed from what is saved). Saved
# values are forward-region nodes the backward reads: a view is not saved but retaken from its source, a tuple result's
# element rather than the tuple, and ops read a primal rather than its clone. What is saved is what eager's formulas
# read (the joint graph *is* those formulas), never more than eager keeps; a random value drawn once in the forward is
# what the backward uses. The forward region never depends on a tangent (checked: a BUG otherwise).
# - Ops that read grad mode: a few kernels decide by grad mode whether to make what their backward reads (oneDNN's
#   `mkldnn_rnn_layer` returns its workspace only with grad on). An autograd.Function's forward runs with grad off, so a
#   forward holding such an op runs with grad on over detached inputs: the same outputs, and no history.
# - Fresh wrappers over input leaves: an op on a subclass may return a new wrapper (its own autograd node) around inner
#   tensors of its input (a jagged tensor's `x.sin()` keeps x's `_offsets`). Only the Function can give a wrapper that
#   history, so such an output comes from it, and a leaf that is an input's own is passed through as the very object
#   (`OutputLeaf.passthrough`); one the subclass's dispatch made by view ops of an input's leaf (torchao's Float8
#   detach() detaches `_scale`) as such an alias, no view and with a counter of its own (`passthrough_alias`).
# - Double backward: the backward graph reads saved values computed under no_grad, so differentiating it again would
#   miss their dependence on the inputs. With the eager backend a create_graph backward reruns the joint graph from the
#   primals instead, which autograd records. The rerun must see the forward's values: refused (UnsupportedError) for a
#   program with random ops or one that writes its inputs, and where a graph input (held by weak reference, with its
#   version) was freed or written since the forward.
# - The inference graph: a training entry runs the partitioned forward; the inference graph (the analysis's
#   `inference_outputs`) is traced only where the joint trace fails (Note [Backward Errors Are Deferred]) or a later
#   stage raises (first then, so that its own error is the one raised). With symbolic shapes it always runs: the guards
#   it adds to the ShapeEnv are the entry's. A failure of that no_grad trace alone does not refuse a training compile
#   with static shapes: eager runs the program with grad on.
# - One run: an inference compile (and a training one without a Function, below) takes its graph from the
#   analysis's own run, made inside make_fx (api.py `_analyzed_once`, trace.py `analyze_and_trace`), where that run
#   is the one the trace would make: the same run_functional over the same fakes in the same grad mode, with no argument the trace's lacks, replaying nothing it
#   did not answer the same. Decided before the run, from the inputs (`_runs_once`): no alias group in the layout
#   (the layout with the groups apart, `_analyzed_apart`, has none: that analysis's run traces too, and where it finds
#   a group touched the grouped one, with own-base views, runs alone: Note [Synthetic Bases]), no non-leaf
#   subclass input (a clone in the analysis only), no dispatch mode of the caller's (the facts `analyze` reads after
#   leaving its modes are read outside every mode of the trace); and after it, from the analysis (`_keeps_trace`): no new autograd leaf (the trace's run marks
#   those: Note [Training Without A Function]) and no input gaining grad (analyzed again with the flag). A training
#   compile takes the one run only for the native path (Note [Training Without A Function]): before the run, the
#   eager backend, called with grad on, and a module, if any, holding no state that requires no grad (a guess, which
#   costs time only where wrong: a training-mode BatchNorm writes its buffers, and the Function's compile has no use
#   for the graph); after it, `native_training_plan` holds. That run, the analysis's, is made with grad on, as
#   eager's: the graph holds the ops eager's autograd saw (a decomposition that reads an intermediate's requires_grad
#   decides as in eager), and `records_as_eager` checks that graph's run (on the fakes its eager run used where that
#   run left every input as it found it: one copy of the inputs); where the check fails, the Function trains
#   the program, and its inference graph, where it needs one, is traced under no_grad as before. The autograd reads
#   a trace would replay are this run's own answers (Note [Grad Mode And Autograd Reads]; the native path has none
#   but a program's making new leaves, which traces again); what the analysis's checks do to functional
#   tensors is traced too and dropped as dead code. Else the analysis stands and the graph is traced as before; a run
#   that raises inside make_fx, or reads a tensor's value as a number (an unbacked symbol: make_fx binds it to its
#   node, where the analysis leaves it pending and the trace refuses), gives way to the analysis alone, whose error
#   or outcome is the compile's.
# - Tangents: which forward outputs get a tangent, and its layout, are read from a run of the program with grad on
#   over clones of the inputs that require grad (`forward_example`). Where none of those inputs is written, relaid
#   or swapped, a clone changes only an output that is the input itself or a view of it, so the analysis's own run
#   (grad on, no alias group, no subclass, nothing replayed or held back) records the same answers
#   (`Analysis.tangent_examples`), and where every forward output is a fresh plain tensor or an update of a leaf it
#   wrote (an ORIGINAL one where the leaf kept its layout: the original itself), the trace takes them from there
#   (`examples_of_analysis`): one run fewer.


def forward_output_values(
    run: FunctionalRun, traced: TracedGraph, analysis: Analysis, wrapper_updates: tuple[int, ...]
) -> list[torch.Tensor]:
    """The forward graph's tensor outputs as user-level tensors (fresh subclass outputs wrapped), in order, then
    the new value of each subclass input in `wrapper_updates` (Note [Inputs Written In Training]), then
    the intermediate subclass roots (Note [Output Regeneration])."""
    run_output, finals, originals, graph_inputs = run.output, run.finals, run.originals, run.graph_inputs
    out: list[torch.Tensor] = []
    for update in traced.outputs.updates:
        if update.kind is UpdateKind.BASE:
            out.append(base_update(graph_inputs[update.target], run))
        elif update.kind is UpdateKind.ORIGINAL:
            relaid = analysis.mutations[update.target].history_from_base
            out.append(_original_value(originals[update.target], finals[update.target], relaid))
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


def _original_value(original: torch.Tensor, final: torch.Tensor, relaid: bool) -> torch.Tensor:
    """The value differentiated for an ORIGINAL update (Note [Input Updates]). `relaid`: the input's layout changed
    under no_grad alone (LeafMutation.history_from_base), so its traced history reads gradients in the layout it came
    with: the value is taken in that layout (its metadata put back under no_grad for the time of a clone())."""
    if leaf_meta(original) == leaf_meta(final) or storage_key(original) != storage_key(final):
        return original
    if not relaid:
        return final.as_strided(original.shape, original.stride(), original.storage_offset())
    size, stride, offset = final.shape, final.stride(), final.storage_offset()
    with torch.no_grad():
        final.as_strided_(original.shape, original.stride(), original.storage_offset())
    value = final.clone()
    with torch.no_grad():
        final.as_strided_(size, stride, offset)
    return value


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
    # See Note [Backward Errors Are Deferred]: differentiate with respect to this one of the gradients taken only
    wrt_only: int | None = None
    # tensor inputs run as a view of their clone (Note [Input Updates])
    view_clones: frozenset[int] = frozenset()
    # (position in diff, ctx) where the subclass asks for tangents of other metadata than its output's (Note
    # [Tangent Retrace])
    tangent_ctxs: tuple[tuple[int, object], ...] = ()


def tangent_like(o: torch.Tensor) -> torch.Tensor:
    """`o` with the metadata its tangent has (Note [Tangent Retrace])."""
    coerce = getattr(type(o), "__coerce_tangent_metadata__", None)
    if coerce is None or not is_traceable_subclass(o):
        return o
    out = coerce(o)
    return out if isinstance(out, torch.Tensor) else o


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedJoint:
    graph: torch.fx.GraphModule  # (primals..., tangents...) -> (GraphOutputs..., grads..., backward mutations...)
    num_fw_outputs: int
    unused: frozenset[int]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...]
    backward_mutations: tuple[DenseIndex, ...]
    backward_reshapes: tuple[BackwardReshape, ...]  # Note [Custom Functions]
    # per gradient taken (grad inputs, then synthetic bases): the diff outputs (positions in diff) from whose
    # autograd graph it is reachable; eager's gradient is None when no output with a tangent reaches it
    reach: tuple[frozenset[int], ...]
    # per tensor input: the diff outputs from whose autograd graph its node as the program got it is reachable (the
    # value from before the call read with grad); None where it had no node
    read_reach: tuple[frozenset[int] | None, ...] = ()
    # whether a gradient the backward took was a tensor subclass (an input's, an output's, or one the program made:
    # a double backward's rerun of the dense joint would not differentiate as eager's wrappers do)
    subclass_grads: bool = False


def trace_joint(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    tangent_trees: Sequence[SubclassNode | None] | None,
    reach_sink: list[frozenset[int]] | None = None,
    absent: frozenset[int] = frozenset(),
    read_sink: list[frozenset[int] | None] | None = None,
) -> TracedJoint:
    """make_fx of the program then autograd.grad (Note [Training Through A Joint Graph]). `tangent_trees`: each diff
    output's tangent structure (None: its own); `reach_sink`/`read_sink` get TracedJoint.reach/read_reach even when
    autograd.grad raises (Note [Backward Errors Are Deferred]); `absent`: diff outputs with no tangent (Note [Tangent Retrace])."""
    n_primals = len(setup.example)
    unused: set[int] = set()
    grad_trees: list[SubclassNode | None] = []
    stride_leaves: list[int | None] = []
    bw_mutated: list[DenseIndex] = []
    reshapes: list[BackwardReshape] = []
    reach: list[frozenset[int]] = [] if reach_sink is None else reach_sink
    read_reach: list[frozenset[int] | None] = [] if read_sink is None else read_sink
    n_fw_outputs, clone, read_only = [0], frozenset(setup.grad_inputs), _read_only_leaves(setup)
    saves, stand_ins = _saves_as_eager(setup)  # (its comment above)
    subclass_grads: list[bool] = []

    def joint_fn(*values: torch.Tensor) -> list[object]:
        primals, tangents = values[:n_primals], list(values[n_primals:])
        with new_functional_mode(), torch.enable_grad(), saves:
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
                own_base_views=setup.analysis.own_base_views,
                replay_reads=setup.analysis.autograd_reads,
                own_leaves=own_leaves_of(setup.analysis),
                read_only=read_only,
            )
            stand_ins.update(id(t) for t, f in zip(run.user_tensors, setup.user_fakes, strict=True) if f.is_leaf)
            fw_outs = graph_output_values(run, setup.traced.outputs.updates, setup.analysis)[0]
            n_fw_outputs[0] = len(fw_outs)
            outs = forward_output_values(run, setup.traced, setup.analysis, setup.wrapper_updates)
            diff_outs = [differentiated_as_eager(run.swaps, outs[i]) for i in setup.diff]
            grad_outs = _grad_outputs(setup, tangent_trees, tangents, diff_outs)
            wrt = _grad_wrt(setup, run)
            before = [mutation_counter(o) for o in run.originals]
            visited = [set(autograd_nodes([out.grad_fn])) for out in diff_outs]
            reach[:] = _autograd_reach(visited, wrt)
            read_reach[:] = [_node_reach(visited, node) for node in run.initial_nodes]
            given = [k for k in range(len(diff_outs)) if k not in absent]
            every = setup.wrt_only is None  # (a trace for one input's gradient: only the failing node's own nodes run)
            changes = backward_changes(
                setup.flat, run.user_tensors, setup.user_fakes, run.swaps, diff_outs, reshapes, _grouped(setup.layout)
            )
            with changes, _noting_subclass_grads(set().union(*visited), subclass_grads):
                renewed = [k for k, x in enumerate(wrt) if id(x) in run.swaps.self_sets]
                grads = _grads([diff_outs[k] for k in given], wrt, [grad_outs[k] for k in given], every, renewed)
            bw_mutated[:] = [DenseIndex(j) for j, o in enumerate(run.originals) if mutation_counter(o) != before[j]]
            grad_trees[:], stride_leaves[:] = [], []
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
        backward_reshapes=tuple(reshapes),
        reach=tuple(reach),
        read_reach=tuple(read_reach),
        subclass_grads=bool(subclass_grads),
    )


@contextlib.contextmanager
def _noting_subclass_grads(nodes: set[Any], sink: list[bool]) -> Iterator[None]:
    """TracedJoint.subclass_grads: appends to `sink` where a gradient flowing into one of the autograd `nodes` is a
    tensor subclass."""

    def hook(grads: tuple[torch.Tensor | None, ...]) -> None:
        if not sink and any(is_traceable_subclass(g) for g in grads):
            sink.append(True)

    handles = [n.register_prehook(hook) for n in nodes]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _read_only_leaves(setup: JointSetup) -> frozenset[int]:
    """The grad inputs the joint runs as themselves, not as clones (Note [Training Through A Joint Graph]): plain leaf
    inputs passed once, no view, at offset 0, in no alias group, that the analysis finds only read (nothing written,
    relaid, swapped or bumped, no flag set or dropped, no base, history or creation read of theirs), in a program
    that returns no input nor a view of one, applies no custom Function and assigns no `.data`."""
    a, flat, layout = setup.analysis, setup.flat, setup.layout
    if (
        a.data_assigned
        or a.function_returns
        or any(a.new_leaves)
        or a.own_base_views
        or a.marks_view_dirty_in_inference
    ):
        return frozenset()
    if any(o.replay is not None or o.input_index is not None for o in a.outputs) or any(
        leaf.source is not LeafSource.GRAPH for o in a.outputs for leaf in o.leaves
    ):
        return frozenset()
    grouped = {m for g in layout.groups for m in g.members}
    read = {p for p, _ in a.base_reads} | {
        *a.creation_meta_reads,
        *a.grad_fn_type_reads,
        *a.base_flag_reads,
        *a.unbumped_view_reads,
    }
    per_input = (
        a.inplace_view_ops, a.requires_grad_set, a.requires_grad_dropped, a.leaf_marked, a.gains_last,
        a.own_leaf_inputs, a.self_set, a.kept_accumulators, a.read_after_grad_set, a.read_after_nograd_set,
        a.read_after_set, a.read_after_hidden_resize, a.seen_after_layout_ops, a.input_set_blocks, a.inplace_replay,
    )  # fmt: skip
    found = set()
    for i in setup.grad_inputs:
        real = flat.values[flat.tensor_indices[i]]
        if (
            not isinstance(real, torch.Tensor)
            or layout.trees[i] is not None
            or not (real.requires_grad and real.grad_fn is None and not real._is_view())
            or real.storage_offset() != 0
            or sum(v is real for v in flat.values) != 1
            or i in read
            or any(i < len(flags) and flags[i] for flags in per_input)
            or a.wrapper_data[i] is not None
            or not a.requires_grad_after[i]
        ):
            continue
        mutations = [a.mutations[j] for j in layout.leaves_of_input[i]]
        if any(j in grouped for j in layout.leaves_of_input[i]) or any(
            m.any or m.version_bumped or m.resized for m in mutations
        ):
            continue
        found.add(i)
    return frozenset(found)


# Saves of a leaf whose flag drops (`_saves_as_eager`). The run's stand-in for a leaf input that requires grad is a
# clone, no leaf; where the program drops the leaf's flag (`.requires_grad = False`, requires_grad_(False)), even to turn
# it back on later, the stand-in is detach_()ed (Note [Grad Mode And Autograd Reads]). Eager's backward then still
# unpacks what ops saved of the leaf before the drop (a leaf's saves are never checked for a lost grad_fn), while autograd raises for a non-leaf detached
# in place after a save ("Trying to use a saved tensor that has been detached in-place"). So where the program drops a
# leaf input's flag, the joint trace packs every save with saved-tensor hooks of its own: a stand-in for a leaf input
# unpacks as it is, as eager's leaf does, and any other tensor saved with a grad_fn that a detach_() took since raises
# eager's error. Autograd checks no version counter of a save made through hooks (it cannot see through them), so the
# hooks check it as eager's unpacking does, after the detach_() check: a tensor written since its save (an
# intermediate the program writes after the flag drops) raises eager's "modified by an inplace operation".

_DETACHED_SAVE = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not supported, "
    "please use out-of-place `.detach()` instead"
)


def _grouped(layout: DenseLayout) -> frozenset[int]:
    """The positions of the plain tensor inputs traced as members of an alias group (Note [Synthetic Bases])."""
    members = {m for g in layout.groups for m in g.members}
    return frozenset(
        i
        for i, (tree, leaves) in enumerate(zip(layout.trees, layout.leaves_of_input, strict=True))
        if tree is None and any(j in members for j in leaves)
    )


def _saves_as_eager(setup: JointSetup) -> tuple[contextlib.AbstractContextManager[object], set[int]]:
    """The hooks to trace the joint under (none where the program drops no
    leaf input's flag), and the set the trace fills with the id() of each leaf input's stand-in."""
    stand_ins: set[int] = set()
    after = setup.analysis.requires_grad_after
    # (a flag turned back on since leaves the stand-in detach_()ed all the same)
    dropped = setup.analysis.requires_grad_dropped or (False,) * len(after)
    drops = (not a or d for a, d in zip(after, dropped, strict=True))
    if not any(f.is_leaf and f.requires_grad and d for f, d in zip(setup.user_fakes, drops, strict=True)):
        return contextlib.nullcontext(), stand_ins

    def pack(t: torch.Tensor) -> tuple[torch.Tensor, bool, int]:
        return t, t.grad_fn is not None, get_version(t)

    def unpack(packed: tuple[torch.Tensor, bool, int]) -> torch.Tensor:
        t, had_grad_fn, version = packed
        if had_grad_fn and t.grad_fn is None and id(t) not in stand_ins:
            raise RuntimeError(_DETACHED_SAVE)
        if get_version(t) != version:
            raise RuntimeError(_written_save_error(t, version))
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack), stand_ins


def _written_save_error(t: torch.Tensor, version: int) -> str:
    """Eager's error at unpacking a saved tensor written since the save (SavedVariable::unpack's text)."""
    node = t.grad_fn
    which = f", which is output {t.output_nr} of {node.name()}," if node is not None else ""
    return (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.type()} {list(t.shape)}]{which} is at version {get_version(t)}; expected version {version} instead. "
        "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )


def _grad_wrt(setup: JointSetup, run: FunctionalRun) -> list[torch.Tensor]:
    """What the joint's gradients are taken with respect to: the inputs', then the synthetic bases'."""
    # See Note [Leaves Laid Out Anew Under no_grad]: the clone made a leaf again stands for the input
    wrt = [
        run.user_tensors[i] if id(run.user_tensors[i]) in run.swaps.releafed else run.grad_leaves[i]
        for i in setup.grad_inputs
    ]
    wrt += [run.graph_grad_leaves[k] for k in setup.group_grads]
    return wrt if setup.wrt_only is None else [wrt[setup.wrt_only]]


def _autograd_reach(visited: Sequence[set[object]], wrt: Sequence[torch.Tensor]) -> list[frozenset[int]]:
    """For each tensor in `wrt`: the outputs whose autograd graph (`visited`: per output, its nodes) reaches it (eager
    gives it a gradient, maybe zeros, exactly when one of those outputs gets a tangent). Read off the autograd graph,
    not the traced fx graph, whose data dependencies differ (a zero gradient may be a constant there)."""
    result = []
    for x in wrt:
        result.append(frozenset(j for j, seen in enumerate(visited) if _autograd_node_of(x, seen)))
    return result


def _node_reach(visited: Sequence[set[object]], node: object | None) -> frozenset[int] | None:
    """The outputs whose autograd graph (`visited`: per output, its nodes) holds `node`; None for no node."""
    return None if node is None else frozenset(j for j, seen in enumerate(visited) if node in seen)


def _autograd_node_of(x: torch.Tensor, seen: set[object]) -> bool:
    if x.grad_fn is not None:
        return x.grad_fn in seen
    return any(getattr(node, "variable", None) is x for node in seen)


def _uncovered_ends(outs: Sequence[torch.Tensor], wrt: Sequence[torch.Tensor]) -> list[GradientEdge]:
    """The edges into the nodes that end the paths of `outs`' autograd graph that reach none of `wrt` (Note
    [Backward Errors Are Deferred])."""
    # read as _autograd_reach reads them (get_gradient_edge would rebuild a view's grad_fn through a dispatch)
    targets = {x.grad_fn for x in wrt if x.grad_fn is not None}
    leaves = {id(x) for x in wrt if x.grad_fn is None}
    order: list[Any] = []  # nodes, each after every node it leads to
    seen: set[object] = set()
    stack: list[tuple[Any, bool]] = [(o.grad_fn, False) for o in outs]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend((parent, False) for parent, _ in node.next_functions)
    covered: set[object] = set()
    for node in order:
        if (
            node in targets
            or id(getattr(node, "variable", None)) in leaves
            or any(parent in covered for parent, _ in node.next_functions)
        ):
            covered.add(node)
    return [
        GradientEdge(node, 0)
        for node in order
        if node not in covered
        and all(parent is None for parent, _ in node.next_functions)
        # a leaf's accumulator: graph inputs that no gradient is taken for (a synthetic base's members, whose
        # nodes the trace, not eager, has) are left alone
        and getattr(node, "variable", None) is None
    ]


# autograd's nodes whose backward only raises: an op without a derivative (set_() under grad), an Error node
_RAISING_NODES = frozenset({"torch::autograd::NotImplemented", "torch::autograd::Error"})


def _unpack_saved(ends: Sequence[GradientEdge]) -> None:
    """Note [Backward Errors Are Deferred]."""
    for edge in ends:
        node = edge.node
        if node.name() in _RAISING_NODES:
            # raises its error ("derivative for set_ is not implemented"), as eager's backward running it does
            cast(Callable[[None], object], node)(None)
        for name in dir(node):
            if name.startswith("_saved_"):
                getattr(node, name)  # raises as the node's backward would


def _run_function_ends(ends: Sequence[GradientEdge], into: Sequence[torch.Tensor | None]) -> None:
    """A custom Function's node that ends a path runs in eager too, and its backward may change what it saved in place
    (a version bump, a metadata change its caller sees): it runs here on the gradient flowing into it, its result
    dropped (Note [Backward Errors Are Deferred]). Only a Function with one output; the others stay unrun."""
    for edge, grad in zip(ends, into, strict=True):
        node = edge.node
        if isinstance(node, torch.autograd.function.BackwardCFunction) and len(node._input_metadata) == 1:
            if grad is not None and is_program_function(node._forward_cls):
                with torch.no_grad():  # (eager's backward runs under no_grad)
                    node.apply(grad)


def _grad_outputs(
    setup: JointSetup,
    tangent_trees: Sequence[SubclassNode | None] | None,
    tangents: list[torch.Tensor],
    diff_outs: list[torch.Tensor],
) -> list[torch.Tensor]:
    """The tangents as the diff outputs' gradients, rewrapped in each one's tangent structure (None: its own)."""
    ctxs = dict(setup.tangent_ctxs)
    trees = tangent_trees if tangent_trees is not None else [_tree_of(o, ctxs, k) for k, o in enumerate(diff_outs)]
    return [_rewrap_tangent(tree, tangents, o) for tree, o in zip(trees, diff_outs, strict=True)]


def _tree_of(t: torch.Tensor, ctxs: dict[int, object], k: int) -> SubclassNode | None:
    if not is_traceable_subclass(t):
        return None
    node = flatten_subclass(t, "tangent")[0]
    return dataclasses.replace(node, ctx=ctxs[k]) if k in ctxs else node


def _grads(
    diff_outs: list[torch.Tensor],
    wrt: list[torch.Tensor],
    grad_outs: list[torch.Tensor],
    every_node: bool,
    renewed: Sequence[int] = (),
) -> list[torch.Tensor | None]:
    """Gradients of `wrt`; `every_node`: run every node of the outputs' graph (Note [Backward Errors Are Deferred]);
    `renewed`: positions in `wrt` of leaves the program set_() to themselves under no_grad (`_renewed_accumulators`)."""
    live = [k for k, x in enumerate(wrt) if x.requires_grad]  # detach_() in the program drops an input
    extra = _uncovered_ends(diff_outs, [wrt[k] for k in live]) if diff_outs and every_node else []
    self_set = [wrt[k] if k in renewed else None for k in live]
    old = _renewed_accumulators(diff_outs, self_set) if diff_outs and renewed else []
    found: Sequence[torch.Tensor | None]
    if extra or old:
        _unpack_saved(extra)  # Note [Backward Errors Are Deferred]
        edges = [*(get_gradient_edge(wrt[k]) for k in live), *(GradientEdge(n, 0) for _, n in old), *extra]
        found = torch.autograd.grad(diff_outs, edges, grad_outs, allow_unused=True)
        _run_function_ends(extra, found[len(live) + len(old) :])  # Note [Backward Errors Are Deferred]
    elif diff_outs and live:
        found = torch.autograd.grad(diff_outs, [wrt[k] for k in live], grad_outs, allow_unused=True)
    else:
        found = (None,) * len(live)
    grads: list[torch.Tensor | None] = [None] * len(wrt)
    for k, g in zip(live, found[: len(live)], strict=True):
        grads[k] = g
    for (j, _), g in zip(old, found[len(live) : len(live) + len(old)], strict=True):
        k = live[j]  # (the renewal keeps the leaf's size: x.set_(x))
        if g is not None and tuple(g.shape) == tuple(wrt[k].shape):
            own = grads[k]
            grads[k] = g if own is None else own + g
    return grads


def _renewed_accumulators(
    outs: Sequence[torch.Tensor], self_set: Sequence[torch.Tensor | None]
) -> list[tuple[int, Any]]:
    """(position in `self_set`, node) of each gradient accumulator of a plain leaf there that the outputs' autograd
    graph reaches and that is no longer the leaf's own: the program's `x.set_(x)` under no_grad renewed it after a
    read (Note [Gradient Accumulators Of Leaves]). Eager's backward runs the nodes on the path to it, which may raise
    (a saved `x` the set_() bumped), and it accumulates into the same `.grad`: the joint takes the gradient flowing
    into it too, and adds it to the leaf's."""
    leaves = {
        id(x): k for k, x in enumerate(self_set) if x is not None and x.grad_fn is None and not is_traceable_subclass(x)
    }
    if not leaves:
        return []
    found = []
    for node in autograd_nodes([o.grad_fn for o in outs]):
        k = leaves.get(id(getattr(node, "variable", None)))
        if k is not None and node is not get_gradient_edge(cast(torch.Tensor, self_set[k])).node:
            found.append((k, node))
    return found


def _plain_views_with_subclass_grads(setup: JointSetup, joint: TracedJoint) -> frozenset[int]:
    """Grad inputs that are plain views with a subclass gradient in `joint` (Note [Input
    Updates])."""
    found = set()
    for i, tree in zip(setup.grad_inputs, joint.grad_trees, strict=False):
        real = setup.flat.values[setup.flat.tensor_indices[i]]
        if setup.layout.trees[i] is None and tree is not None and isinstance(real, torch.Tensor) and real._is_view():
            found.add(i)
    return frozenset(found)


def trace_joint_views(
    setup: JointSetup,
    tangent_fakes: Sequence[torch.Tensor],
    reach: list[frozenset[int]],
    absent: frozenset[int] = frozenset(),
    read_sink: list[frozenset[int] | None] | None = None,
) -> tuple[JointSetup, TracedJoint]:
    """trace_joint, again with plain view inputs run as views where needed (Note [Input
    Updates])."""
    joint = trace_joint(setup, tangent_fakes, None, reach, absent=absent, read_sink=read_sink)
    if views := _plain_views_with_subclass_grads(setup, joint):
        setup = dataclasses.replace(setup, view_clones=views)
        joint = trace_joint(setup, tangent_fakes, None, reach, absent=absent, read_sink=read_sink)
    return setup, joint


def _dense_grads(
    grads: list[torch.Tensor | None],
    wrt: list[torch.Tensor],
    unused: set[int],
    grad_trees: list[SubclassNode | None],
    stride_leaves: list[int | None],
) -> list[torch.Tensor]:
    """The gradients' dense leaves (user inputs, then synthetic bases); records their structure in `grad_trees`
    and, for a subclass gradient, the leaf whose size and stride it has in `stride_leaves` (Note [Tangent
    Retrace])."""
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


def _rewrap_tangent(tree: SubclassNode | None, tangents: list[torch.Tensor], output: torch.Tensor) -> torch.Tensor:
    if tree is None:
        return tangents.pop(0)
    taken = [tangents.pop(0) for _ in range(tree.num_leaves)]
    # A runtime tangent's nested ints name the runtime's offsets; here they stand for the traced output's, which
    # the tangent must match (Note [Nested Int Dims]).
    size = _with_nested_of(tree.outer_size, tuple(output.shape))
    stride = _with_nested_of(tree.outer_stride, tuple(output.stride()))
    return unflatten_subclass(tree, taken, outer_size=size, outer_stride=stride)


def _with_nested_of(
    dims: tuple[int | torch.SymInt, ...], like: tuple[int | torch.SymInt, ...]
) -> tuple[int | torch.SymInt, ...]:
    if len(dims) != len(like):
        return dims
    return tuple(
        o if nested_coeff(d) is not None and nested_coeff(o) is not None else d for d, o in zip(dims, like, strict=True)
    )


def forward_example(
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
) -> list[tuple[bool, list[torch.Tensor], SubclassNode | None, tuple[object, ...]]]:
    """Per output: whether it gets a tangent, its tangent's dense leaves (plain fakes, to shape the tangents), its
    tangent's subclass structure (what a runtime tangent is checked and coerced against), and `(ctx,)` where that
    ctx is not the output's own (Note [Tangent Retrace]), else (). Read from the analysis's run where it recorded
    them (`examples_of_analysis`), else from a run of its own."""
    known = examples_of_analysis(traced, analysis, wrapper_updates, group_grads)
    if known is not None:
        return known
    with new_functional_mode():
        run = run_functional(
            call,
            flat,
            layout,
            example,
            requires_grad_like=user_fakes,
            clone_inputs=clone,
            clone_graph_inputs=frozenset(group_grads),
            own_base_views=analysis.own_base_views,
            replay_reads=analysis.autograd_reads,
            own_leaves=own_leaves_of(analysis),
        )
        outs = forward_output_values(run, traced, analysis, wrapper_updates)
        result: list[tuple[bool, list[torch.Tensor], SubclassNode | None, tuple[object, ...]]] = []
        for o in outs:
            like = tangent_like(o)
            node, leaves = flatten_subclass(like, "out") if is_traceable_subclass(o) else (None, [o])
            chosen = (node.ctx,) if node is not None and like is not o else ()
            # A no_grad view of an input that requires grad may report requires_grad under tracing; it has no grad_fn.
            # One whose grad_fn raises (a no_grad view whose base was written since) gets no
            # tangent: eager's raises when autograd reads it, and so does the runtime's (analyze._output_info). See
            # See Note [Backward Errors Are Deferred] for one whose rebuild of its history raises.
            grad = o.requires_grad and not grad_fn_raises(o) and _has_grad_fn(o) and differentiable_dtype(o.dtype)
            result.append((grad, [from_functional(leaf) for leaf in leaves], node, chosen))
        return result


def examples_of_analysis(
    traced: TracedGraph, analysis: Analysis, wrapper_updates: tuple[int, ...], group_grads: tuple[int, ...]
) -> list[tuple[bool, list[torch.Tensor], SubclassNode | None, tuple[object, ...]]] | None:
    """`forward_example`'s answer read from the analysis's run (Note [Training Through A Joint Graph], bullet
    "Tangents"), where that run recorded one for every forward output `forward_output_values` would give: input
    updates (FINAL, or ORIGINAL of a leaf that kept its layout) only of leaves it wrote, fresh plain outputs, no
    intermediate base, root or wrapper update; None elsewhere. Makes fakes: the compile's fake mode must be active."""
    examples = analysis.tangent_examples
    if examples is None or wrapper_updates or group_grads or analysis.own_base_views or traced.outputs.num_bases:
        return None
    if len(examples.outputs) != len(analysis.outputs) or training_roots(analysis):
        return None
    found = []
    for update in traced.outputs.updates:
        # (an ORIGINAL update of a leaf that kept its layout differentiates the original itself: `_original_value`)
        by_kind = {UpdateKind.FINAL: examples.finals, UpdateKind.ORIGINAL: examples.originals}.get(update.kind)
        value = by_kind[update.target] if by_kind is not None else None
        if value is None:
            return None
        found.append(value)
    for info, example in zip(analysis.outputs, examples.outputs, strict=True):
        if info.kind is OutputKind.IS_INPUT:
            return None  # (the example's is a clone of it)
        if info.kind is not OutputKind.TENSOR:
            continue
        fresh = all(
            leaf.source is LeafSource.GRAPH
            and not (leaf.is_view or leaf.function_view or leaf.passthrough_alias)
            and leaf.passthrough is None
            for leaf in info.leaves
        )
        if example is None or not fresh or info.tree is not None or info.replay is not None or info.view_of_fresh:
            return None
        found.append(example)
    return [(e.grad, [torch.empty_strided(e.size, e.stride, dtype=e.dtype, device=e.device)], None, ()) for e in found]


def _has_grad_fn(o: torch.Tensor) -> bool:
    """`o.grad_fn is not None`; False for a subclass view whose history cannot be rebuilt (Note [Backward Errors Are Deferred])."""
    if not is_traceable_subclass(o):
        return o.grad_fn is not None
    try:
        return o.grad_fn is not None
    except (IndexError, ValueError):
        return False
