"""Stage `trace`: make_fx + functionalization over the dense inputs -> one purely functional graph (inference).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the dense fake inputs and their fake mode.
Output: `TracedGraph`: the fx GraphModule and the meaning of each of its outputs (`GraphOutputs`).
Invariants: the graph contains no mutation; its outputs are, in order, the new values of mutated inputs
(Note [Input Updates]), the fresh tensor leaves of the user's outputs, the intermediate bases that aliased outputs
are regenerated from, and the symbolic ints the user returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.fx
from torch.utils import _pytree as pytree

from subclassaot.pipeline.functional_run import (
    FunctionalRun,
    dense_leaves_of,
    intermediate_bases,
    own_leaves_of,
    own_stand_in_leaves,
    run_functional,
)
from subclassaot.pipeline.opaque_ops import kept_in_graph
from subclassaot.pipeline.rules.new_leaves import NewLeafHold
from subclassaot.pipeline.rules.strides_and_offsets import output_in_eager_layout
from subclassaot.runtime.steps import graph_example_inputs
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    GraphInputIndex,
    GraphOutputs,
    InputUpdate,
    LeafSource,
    OutputKind,
    UpdateKind,
)
from subclassaot.torch_internals import (
    from_functional,
    hint_of,
    new_autograd_leaf,
    new_functional_mode,
    storage_key,
    trace_graph,
)

# Note [Input Updates]
# An input whose storage the program wrote gets its new value back from the graph, and the epilogue writes it into
# the real input. Three values can be needed per dense leaf, each a separate graph output:
#   ORIGINAL  the leaf's original storage seen through its original metadata (copy_ into the real input before any
#             metadata change or set_: this is how a write through an old view survives a later set_()),
#   FINAL     the leaf's value with its final metadata (after a metadata change that may have grown the storage, or
#             after set_() to a fresh storage),
#   BASE      the whole storage of an alias group (Note [Synthetic Bases]), written back once for all members; where
#             a resize_() grew it (through a detach() of a member, say), all of the grown storage (`base_update`),
#             which holds the final value of each member grown with it: those get no FINAL of their own.
# The epilogue applies, per leaf: copy ORIGINAL; then set_ / resize_ / as_strided_ to the final metadata; then copy
# FINAL. Eager's observable state after the call is the same; the epilogue's ops advance the version counter by their
# own count, so each counter it settles is then set to eager's (runtime/steps.py: Version Counters As Eager's): eager bumps once
# per in-place op; writes hidden from autograd (`x.data.mul_(2)`) bump none, and only top-level tensors' counters
# count (a wrapper's inner counters are not observable through it). In training:
# - An ORIGINAL overwritten by a FINAL (x.mul_(2); x.t_()) gets zero gradient in eager's history as in ours, so it is not
#   differentiated (through the traced in-place view ops that fails). Only where no one else sees the original storage
#   through autograd: the input is not a view, keeps its storage, and its writes are visible to autograd.
# - A member that is no view, grown by resize_() (inside inference_mode where it requires grad: elsewhere eager raises)
#   and then written with grad through itself (LeafMutation.written_after_growth) ends, in eager, on a node recorded
#   at the grown layout, whose gradient its history from before the growth rejects: a backward through it raises at
#   that node, after the branches autograd runs first have accumulated. The BASE copy alone, before the resize_, would
#   leave it a node at the old layout, rejected at the backward's root before any branch runs; so it takes a FINAL
#   too, copied in with grad after the resize_. Written with grad only before its growth, it keeps the BASE copy's
#   node at the old layout, as eager's. A member grown only under it, by another tensor's resize_() (its detach(),
#   say: LeafMutation.grown_under_it), keeps the layout its own in-place view ops gave it, and the history they
#   recorded where run with grad (`x.t_()` with grad, then `x.detach().resize_(n)`): its layout op is then replayed
#   where autograd sees it, as for an input never grown, not inside inference_mode as a resize_() of itself is. Who
#   grew it is the fact, not what it is: a view input that requires grad, grown by its own resize_() (which eager runs
#   only inside inference_mode), stays there, its storage grown by its detach() first or not; a growth rebinds the
#   tensor in the run, below the record of in-place view ops, so it is noted apart (SwapRecord.self_grown_ids).
# - An ORIGINAL read through an alias taken before the program ran would have its grad_fn rebuilt from the input's
#   history, which an in-place view op left in another layout ("invalid gradient"). Where the input ends in another
#   layout on the same storage, the differentiated value is a view of the input as it ends, taken after the program,
#   with the original size, stride and offset: the same elements, through a history autograd keeps consistent.
#   Where the layout changed under no_grad alone (a plain view input, LeafMutation.history_from_base), the traced
#   history still reads gradients in the old layout, while eager rebuilds the view's grad_fn from its base at the new
#   one: the value is taken with the old metadata put back under no_grad, and the FINAL is copied in below autograd.
# - Writes through a set_() alias: a tensor set_() or `.data =`-assigned to an input's storage is a family of its own,
#   whose writes change the input's values but not its history or counter. An input written only so
#   (LeafMutation.visible_through_self false) is written below autograd and its version put back at once (a recorded
#   copy_ raises on a leaf requiring grad, gives a non-leaf a grad_fn eager's has not, and raises on a multi-output view);
#   subclass inputs likewise, at the wrapper level (`_copy_wrapper`).
# - Writes to plain view inputs: autograd's CopySlices builds the base's gradient from the incoming one's type, so a plain
#   input that is a view, written with a subclass operand (x1.mul_(pair)), gets a plain gradient in eager. The joint runs
#   inputs as non-view clones; where such an input gets a subclass gradient there, the joint is traced again with it run
#   as a view of its clone (`view_as`). Plain non-leaf inputs that require grad are guarded on being views.
# - Inference inputs (made inside inference_mode; whether each written leaf is one is guarded): eager's in-place or
#   out= op on one outside inference_mode raises (its counter cannot advance), which the run raises too
#   (SwapRecord.inference_tensors); a kernel's write of an op neither in-place nor out= (batch norm's running stats)
#   passes, as one inside inference_mode does. The epilogue writes them inside inference_mode, and the graph keeps no
#   write of one (api's `_inference_graph_call`): a subclass input's wrapper-level copy_ only where the wrapper itself
#   is one (a normal wrapper's inner writes run below ADInplaceOrView, and autograd records its copy_, as eager's
#   write), a synthetic base's where the base is, a written leaf's where the leaf is; decided when compiled
#   (RuntimePlan.inference_wrappers, .inference_bases, .inference_leaves, runtime.call.with_inference_copies), not
#   read per call.


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedGraph:
    # None: a training entry whose forward the joint graph gave, which needed no inference graph (Note [Training
    # Through A Joint Graph], api.py)
    graph: torch.fx.GraphModule | None
    outputs: GraphOutputs
    example_inputs: tuple[torch.Tensor, ...]  # fake, one per placeholder (compile time only)


def input_updates(layout: DenseLayout, analysis: Analysis) -> tuple[InputUpdate, ...]:
    updates: list[InputUpdate] = []
    for k, item in enumerate(layout.graph_inputs):
        if isinstance(item, AliasGroupRef):
            members = layout.groups[item.group].members
            # (a member's storage grown by resize_(): the base was rebound onto the grown storage with it, and holds
            # the writes past the members' elements, also where the member left it since: Note [Storage Swaps By
            # Rebinding])
            if any(m.data or m.resized or m.left_grown for m in (analysis.mutations[j] for j in members)):
                updates.append(InputUpdate(kind=UpdateKind.BASE, target=GraphInputIndex(k)))
            for m in members:
                # (a member grown with the group's storage: the BASE update holds its final elements, written
                # through the base as eager's were; a copy_ into a multi-output view that requires grad raises;
                # one written with grad after its growth takes a FINAL too, for eager's node at the grown layout)
                mutation = analysis.mutations[m]
                final = (mutation.final_data and mutation.storage_changed) or mutation.written_after_data
                if final or mutation.written_after_growth or mutation.history_of_its_own:
                    updates.append(InputUpdate(kind=UpdateKind.FINAL, target=m))
            continue
        mutation = analysis.mutations[item]
        if mutation.data:
            updates.append(InputUpdate(kind=UpdateKind.ORIGINAL, target=item))
        # (Note [History Kept Through .data =]: the value that carries the input's history of the write)
        final = mutation.final_data or mutation.written_after_data
        if final or (mutation.data and mutation.metadata and not mutation.storage_changed):
            updates.append(InputUpdate(kind=UpdateKind.FINAL, target=item))
    return tuple(updates)


def inference_outputs(layout: DenseLayout, analysis: Analysis) -> GraphOutputs:
    """The inference graph's outputs, as the analysis decides them (the trace checks that it makes them)."""
    return GraphOutputs(
        updates=input_updates(layout, analysis),
        num_fresh=sum(
            1
            for info in analysis.outputs
            if info.kind is OutputKind.TENSOR
            for leaf in info.leaves
            if leaf.source is LeafSource.GRAPH
        ),
        num_bases=analysis.num_intermediate_bases,
        num_symints=sum(1 for info in analysis.outputs if info.kind is OutputKind.SYMINT),
    )


def untraced_inference(layout: DenseLayout, analysis: Analysis, dense_fakes: Sequence[torch.Tensor]) -> TracedGraph:
    """A TracedGraph without its graph (Note [Training Through A Joint Graph], api.py)."""
    example = graph_example_inputs(layout, dense_fakes)
    return TracedGraph(graph=None, outputs=inference_outputs(layout, analysis), example_inputs=tuple(example))


def trace_inference(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    dense_fakes: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None = None,
    clones: tuple[frozenset[int], frozenset[int]] | None = None,
) -> TracedGraph:
    """`clones`: the inputs and the synthetic bases (graph inputs, made leaves of their own first) the run takes as
    clones, as the analysis with grad on does (non-leaves, as eager's are), and its groups' own base views."""
    outputs = inference_outputs(layout, analysis)
    clone_inputs, clone_bases = clones or (frozenset(), frozenset())
    updates = outputs.updates
    counts = {"fresh": 0, "bases": 0, "symints": 0}

    def graph_fn(*graph_values: torch.Tensor) -> list[object]:
        graph_values = tuple(
            v.detach().requires_grad_(True) if k in clone_bases else v for k, v in enumerate(graph_values)
        )
        with new_functional_mode():
            run = run_functional(
                call,
                flat,
                layout,
                graph_values,
                requires_grad_like=user_fakes,
                clone_inputs=clone_inputs,
                clone_graph_inputs=clone_bases,
                own_base_views=clones is not None and analysis.own_base_views,
                replay_reads=analysis.autograd_reads,
                new_leaves=analysis.new_leaves,
                no_grad_leaf_views=analysis.no_grad_leaf_views,
                input_base_leaf_views=analysis.input_base_leaf_views,
                no_history_calls=analysis.no_history_calls,
                function_returns=analysis.function_returns,
                own_leaves=own_leaves_of(analysis),
            )
            outs, counts["fresh"], counts["bases"], counts["symints"] = graph_output_values(run, updates, analysis)
            return outs

    own = own_stand_in_leaves(flat, layout, user_fakes, own_leaves_of(analysis))
    example = graph_example_inputs(layout, dense_fakes, own)
    with fake_mode:
        gm = trace_graph(graph_fn, example, decompositions)
    return _traced(gm, counts, outputs, example)


def analyze_and_trace(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    dense_fakes: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None,
    analysis_of: Callable[[FunctionalRun], Analysis],
    traces: Callable[[Analysis], bool],
    hold: NewLeafHold | None = None,
) -> tuple[Analysis, TracedGraph | None]:
    """One run of the program that is both the analysis's and the inference trace's (Note [Training Through A
    Joint Graph]: one run): the run as `analyze` makes it, inside make_fx, its analysis (`analysis_of`, called under the
    run's modes), and the graph of its outputs where `traces(analysis)` (the graph `trace_inference` would make of
    that analysis); else None, and the graph, if wanted, is traced as usual. `hold`: as `analyze`'s (the run holds
    back the calls making new leaves the compile holds back, and notes them where undecided)."""
    found: list[tuple[Analysis, bool]] = []
    counts = {"fresh": 0, "bases": 0, "symints": 0}

    def graph_fn(*graph_values: torch.Tensor) -> list[object]:
        if hold is not None:
            hold.run_starts()
        with new_functional_mode():
            run = run_functional(call, flat, layout, graph_values, requires_grad_like=user_fakes, hold=hold)
            if hold is not None:
                hold.run_completed(run.swaps.flag_calls)
            analysis = analysis_of(run)
            found.append((analysis, traces(analysis)))
            if not found[0][1]:
                return []
            updates = input_updates(layout, analysis)
            outs, counts["fresh"], counts["bases"], counts["symints"] = graph_output_values(run, updates, analysis)
            return outs

    example = graph_example_inputs(layout, dense_fakes, own_stand_in_leaves(flat, layout, user_fakes))
    with fake_mode:
        gm = trace_graph(graph_fn, example, decompositions)
    ((analysis, traced),) = found
    if not traced:
        return analysis, None
    return analysis, _traced(gm, counts, inference_outputs(layout, analysis), example)


def _traced(
    gm: torch.fx.GraphModule, counts: dict[str, int], outputs: GraphOutputs, example: Sequence[torch.Tensor]
) -> TracedGraph:
    """The traced graph without its dead code, checked to return the outputs the analysis laid out."""
    _drop_dead_code(gm)
    if counts != {"fresh": outputs.num_fresh, "bases": outputs.num_bases, "symints": outputs.num_symints}:
        raise AssertionError(f"BUG: the trace's outputs {counts} differ from the analysis's {outputs}")
    return TracedGraph(graph=gm, outputs=outputs, example_inputs=tuple(example))


def graph_output_values(
    run: FunctionalRun, updates: Sequence[InputUpdate], analysis: Analysis
) -> tuple[list[object], int, int, int]:
    """The graph's outputs (see GraphOutputs) from one functional run, with the number of fresh leaves, of
    intermediate bases and of symbolic ints among them."""
    outs: list[object] = [_update_value(u, run) for u in updates]
    fresh, bases, symints = _output_values(run, analysis)
    return outs + fresh + bases + symints + _stride_probes(run, analysis), len(fresh), len(bases), len(symints)


def _stride_probes(run: FunctionalRun, analysis: Analysis) -> list[object]:
    """Note [Strides The Kernels Choose]: the dense leaves whose real strides assigned wrappers take, and those whose
    layouts outputs rebuilt over intermediate bases take."""
    probes: list[object] = []
    outputs = pytree.tree_leaves(run.output)
    for probe in analysis.stride_probes:
        if probe.own:
            assert probe.output_index is not None
            probes.append(from_functional(dense_leaves_of(outputs[probe.output_index], "")[1][probe.leaf]))
            continue
        if probe.input_index is not None:
            target = run.user_tensors[probe.input_index]
        else:
            assert probe.output_index is not None
            target = outputs[probe.output_index]
        source = run.swaps.wrapper_data[id(target)][-1].source
        probes.append(from_functional(dense_leaves_of(source, "")[1][probe.leaf]))
    return probes


def _update_value(update: InputUpdate, run: FunctionalRun) -> torch.Tensor:
    if update.kind is UpdateKind.BASE:
        return from_functional(base_update(run.graph_inputs[update.target], run))
    source = run.originals if update.kind is UpdateKind.ORIGINAL else run.finals
    return from_functional(source[DenseIndex(update.target)])


def base_update(base: torch.Tensor, run: FunctionalRun) -> torch.Tensor:
    """A synthetic base's new contents (FunctionalTensor `base`, flat at offset 0 of its storage: Note [Input
    Updates]): over the whole storage where a resize_() grew it under the base (Note [Storage Swaps By Rebinding]),
    whose elements past the base's own the epilogue writes too: eager's tensors over them (a detach() of an input
    that grew) are the input storage's."""
    if storage_key(base) not in run.swaps.grown_from:
        return base
    value = from_functional(base)
    stored = value.untyped_storage().nbytes() // value.element_size()
    if value.dim() != 1 or hint_of(value.storage_offset()) != 0 or hint_of(stored) <= hint_of(value.numel()):
        return base
    return base.as_strided((stored,), (1,), 0)


def _output_values(run: FunctionalRun, analysis: Analysis) -> tuple[list[object], list[object], list[object]]:
    leaves, _ = pytree.tree_flatten(run.output)
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(run.finals)}
    original = {storage_key(o): DenseIndex(j) for j, o in enumerate(run.originals)}
    bases = intermediate_bases(leaves, current, original, run.swaps, _analysis_bases(analysis, leaves))
    fresh: list[object] = []
    symints: list[object] = []
    for info, value in zip(analysis.outputs, leaves, strict=True):
        if info.kind is OutputKind.SYMINT:
            symints.append(value)
        elif info.kind is OutputKind.TENSOR:
            assert isinstance(value, torch.Tensor)
            dense = dense_leaves_of(value, info.path)[1]
            for leaf_info, leaf in zip(info.leaves, dense, strict=True):
                if leaf_info.source is LeafSource.GRAPH:
                    fresh.append(output_in_eager_layout(leaf))
    ordered = sorted(bases.values(), key=lambda item: item[0])
    return fresh, [output_in_eager_layout(base) for _, base in ordered], symints


def _analysis_bases(analysis: Analysis, leaves: Sequence[object]) -> frozenset[object]:
    """The storages of the dense output leaves the analysis regenerates from an intermediate base of their own. The
    graph's bases are those the analysis found (GraphOutputs.num_bases: the runtime reads that many), but a training
    entry's inference graph, traced under no_grad (the forward where the joint trace raised the program's backward
    error), may see values alias otherwise than the analysis's run with grad did: a custom Function's input marked
    dirty comes back as itself where it does not require grad, as a detached alias where it does (`t1 =
    Dirty.apply(t0)` under no_grad: `t1 is t0` only without grad), and a view a custom Function returned of an
    intermediate (`(x * x).to_local()` of a DTensor x: a view_as of the product's local tensor) is one with grad only:
    computed by the graph (it has the Function's history), its storage is still a base the analysis counted. Each such
    storage is a base however many distinct tensors the trace shows over it."""
    keys: set[object] = set()
    for info, value in zip(analysis.outputs, leaves, strict=True):
        if info.kind is OutputKind.TENSOR and isinstance(value, torch.Tensor):
            for leaf_info, leaf in zip(info.leaves, dense_leaves_of(value, info.path)[1], strict=True):
                alias = leaf_info.source is LeafSource.INTERMEDIATE_ALIAS and leaf_info.foreign_base is None
                if alias or (leaf_info.source is LeafSource.GRAPH and leaf_info.function_view):
                    keys.add(storage_key(leaf))
    return frozenset(keys)


def _drop_dead_code(gm: torch.fx.GraphModule) -> None:
    def impure(node: torch.fx.Node) -> bool:
        # Random ops advance the generator in eager even when their result is unused: keep them. So is a new autograd
        # leaf made of an input, which the caller sees requiring grad (Note [Training Without A Function]).
        target = node.target
        if target is new_autograd_leaf:
            return isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder"
        return (
            node.op in ("placeholder", "output")
            or (isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags)
            or kept_in_graph(target)  # Note [What A Backend Receives And Returns], "Ordered effects"
        )

    if gm.graph.eliminate_dead_code(is_impure_node=impure):
        gm.recompile()  # make_fx's module already holds the code of the graph as it was
