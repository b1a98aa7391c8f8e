"""Stage `runtime`: the per-call path of one compiled entry: unwrap -> compiled graph -> epilogue -> wrap.

Input: a `RuntimePlan` (no fake tensors, no ShapeEnv, no graphs it does not run) and the compiled callable.
Output: `run(values, symbols) -> output pytree`, given the real flat input leaves and the symbol values the guards
bound. Invariants: the epilogue applies input mutations in the order of Note [Input Updates]; outputs that alias
inputs or intermediates are regenerated from the real tensors after the epilogue (Note [Output Regeneration]).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import cast

import torch
from torch.autograd.graph import GradientEdge

from subclassaot.authoring.protocol import dense_leaves, is_traceable_subclass
from subclassaot.runtime.plan import (
    GraphCall,
    GraphRunResult,
    MetaEvaluator,
    RuntimePlan,
    anchor_holders,
    assign_data_meta,
    fresh_output,
    last_gains,
    non_view_alias,
    probed_stride,
    requires_grad_changes,
    set_target_layout,
    settle_inner_wrappers,
    wrapper_layout,
    wrapper_write_recorded,
)
from subclassaot.runtime.regenerate import (
    build_outputs,
    has_size_spec,
    no_output,
    replay_from,
    replay_view,
    resize_inside_inference_mode,
    unflatten_output,
)
from subclassaot.runtime.steps import (
    CountedStep,
    EpiloguePlan,
    base_write_hidden,
    blocking_holder,
    bumped_input_sources,
    copy_into,
    counters_at_entry,
    entry_aliases,
    entry_rebuilt_views,
    epilogue_plan,
    graph_example_inputs,
    grow_storages,
    hold_accumulators,
    kept_counter_bumps,
    land_on,
    make_assigned_accumulators,
    own_stand_in_inputs,
    raise_early_bumps,
    replay_early,
    settle_early_counters,
    settle_output_counters,
    settle_storages,
    settle_version,
    undo_steps,
)
from subclassaot.runtime.straight_line import EntryRunner, Runner, straight_line
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    DataAssignmentPlan,
    DenseIndex,
    Dim,
    GradSetNode,
    InputIndex,
    LeafMutation,
    LeafSource,
    OutputKind,
    Replay,
)
from subclassaot.torch_internals import (
    assign_wrapper_metadata,
    get_version,
    refresh_view_grad_fn,
    renew_grad_accumulator,
    set_to_self,
    set_to_tensor,
    set_version,
    set_wrapper_metadata,
    storage_key,
    with_bits,
)

# Note [Epilogue Nodes In Eager's Order]
# Eager: a backward runs, among the nodes ready, the one numbered highest first. Nodes are numbered as they are made; a
# set_ node (NotImplemented) and every gradient accumulator are numbered above all, so they run as soon as ready. Which
# backward error comes first, and which leaves got a gradient before it, follows from that order.
# Compiled: the program's nodes collapse into the call's one node; every node the epilogue makes is newer than it and
# older than the nodes the caller makes after the call (a view input's history regenerated after a write).
# Rule: where eager's history of an input or output ends on a node made after those the call stands for, the epilogue
# makes a node numbered the same way, in the order eager made them. For a tensor set_() under grad, the swap record
# keeps, op by op in program order, the node its history ends on (`GradSetNode`):
# - SET: its own set_() was the last op autograd recorded on it: the epilogue repeats the set_ (Note [set_ Under
#   Grad]) after its other steps on it. An output set_() under grad gets a holder set_() to it once built, whether the
#   value comes from the graph or from the compiled Function (whose deferred error would be numbered below the nodes
#   the caller makes after the call, and run after them: `t0.set_(t0); return t0, x0`, x0 written after the call).
# - LAYOUT: an in-place view op with grad right after it (`x.set_(x); x.unsqueeze_(1)`): its node sits over the set_
#   node, numbered in program order; the epilogue repeats the set_ first, then replays the layout with grad, even where
#   the ops leave it as it came (`t_()` of a 0-d x: eager's node is there all the same). An output
#   view of a leaf input that eager made before that op is rebuilt before the call instead (Note [set_ Under Grad]).
# - NUMBERED: a set_() through a view (the base's CopySlices) or a write autograd records (`x1.set_(x0);
#   x1.select(0, 0).mul_(3)`; a custom Function's of a tensor it marks dirty too, though its forward runs with grad
#   off: its node takes the history) came after: numbered in program order; once the outputs are built the epilogue
#   sets a view of x to itself under grad (version kept), a CopySlices newer than the call's node. An in-place view op
#   after such a node keeps it NUMBERED: its node is numbered in program order too, and the late CopySlices stands for
#   both (a subclass input, whose layout the epilogue replays without autograd, has no other).
# - Outputs rebuilt as views after the epilogue (Note [Output Regeneration]) are built in program order (`build_order`):
#   each view's node is numbered as eager's among them, so the one made last runs first (a view of a leaf taken after
#   `t0 = x0.t()`, x0 set_() under grad, gives the leaf its gradient before the set_ node raises, in either output order).
# Beyond reach: eager's nodes ordered among the program's own, which the one compiled node cannot interleave (a leaf
# the program made and read with grad after the op whose node raises: `x0.requires_grad_(); t0, t1 = x1.sort(0);
# t1.add_(t1); return t0, x0 * -1`, x0 graded before the raise): the backward probe refuses those (Note [Probing
# Eager's Backward]). So is a LAYOUT node, made after the call's: program nodes made after the layout op run after it
# where eager's run before, so where eager's backward through outputs the Function computes raises after a leaf's
# gradient the program is refused (`refuse_layout_node_order`: `x1.set_(x1); x1.unsqueeze_(1); return x1, x0 * 2`).
# Known gap: a subclass input, or a plain one set_() onto another storage, relaid after its set_() under grad gets
# its layout without autograd.


def inference_call(
    compiled: Callable[..., object],
    inputs_require_grad: bool,
    written: frozenset[int] = frozenset(),
    no_views: frozenset[int] = frozenset(),
) -> GraphCall:
    """`inputs_require_grad`: some graph input requires grad (a subclass input's inner tensor; guarded). `written`,
    `no_views`: GraphCall's (`written` only without `inputs_require_grad`)."""
    if not inputs_require_grad:

        def plain_call(
            values: Sequence[object], graph_in: list[torch.Tensor], dense: list[torch.Tensor], symbols: dict[str, int]
        ) -> GraphRunResult:
            return list(cast("Sequence[object]", compiled(*graph_in))), {}, {}, {}, None

        return GraphCall(run=plain_call, direct=compiled, written=written, no_views=no_views)
    if written:
        raise AssertionError("BUG: a graph that writes its inputs takes no input that requires grad")

    def call(
        values: Sequence[object], graph_in: list[torch.Tensor], dense: list[torch.Tensor], symbols: dict[str, int]
    ) -> GraphRunResult:
        # No user-level input requires grad here: autograd must not record the graph's ops on the inner tensors
        # of a subclass input that happen to require grad (eager runs subclass ops below autograd).
        with torch.no_grad():
            return list(cast("Sequence[object]", compiled(*graph_in))), {}, {}, {}, None

    return GraphCall(run=call)


def make_runner(plan: RuntimePlan, graph_call: GraphCall) -> EntryRunner:
    """The entry's per-call path: generated as straight-line code where its plan allows (Note [Straight-Line
    Runners]), else the generic runner below."""
    epilogue = epilogue_plan(plan)
    generic = functools.cache(lambda: generic_runner(plan, graph_call, epilogue))

    def fallback(values: Sequence[object], symbols: dict[str, int]) -> object:
        return generic()(values, symbols)

    generated = straight_line(plan, epilogue, graph_call, fallback)
    if generated is None and graph_call.written:
        raise AssertionError("BUG: a graph that writes its inputs runs the generated runner (runtime.graph_writes)")
    if generated is not None:
        return generated
    return EntryRunner(run=generic(), source=None)


def generic_runner(plan: RuntimePlan, graph_call: GraphCall, epilogue: EpiloguePlan) -> Runner:
    ev = MetaEvaluator()
    flat, layout = plan.flat, plan.layout
    dense_of = _dense_reader(plan)
    gains, loses = ([flat.tensor_indices[i] for i in ts] for ts in requires_grad_changes(plan))
    last = [flat.tensor_indices[i] for i in last_gains(plan)]  # Note [Grad Mode And Autograd Reads]
    self_set_first, self_set, kept, assigned_reads = _accumulator_inputs(plan)
    early_heads, late_tails = _early_replays(plan)

    def run(values: Sequence[object], symbols: dict[str, int]) -> object:
        counted = counters_at_entry(values, *counted_inputs)
        # the program's requires_grad_(): under no_grad autograd records nothing either way, and the graph's
        # functional writes (as_strided_scatter of a non-contiguous input) refuse an input that requires grad where
        # eager's in-place write does not, so the flag comes once the graph ran
        late_gains = gains if not torch.is_grad_enabled() else ()
        _turn_on(values, gains if not late_gains else ())
        _held = _accumulators_before(values, (kept, self_set_first, assigned_reads), ev, symbols)
        dense = dense_of(values)
        graph_in = graph_example_inputs(layout, dense, own)
        # version counters as the inputs came: an early replay of an in-place view op (t_) advances them already
        counters, entry_views = _versions(plan, epilogue, values, dense), entry_aliases(values, rebuilt)
        shared: dict[int, torch.Tensor] = {}  # Note [Output Regeneration]
        early, at_end, bumped = replay_early(  # Note [Views That Raise After A Bump]
            early_heads, values, lambda r: replay_view(r, ev, values, ([], {}), symbols, no_output, shared=shared)
        )
        holders, inner_holders = _storage_holders(plan, values)  # Note [Wrapper Storage]
        held = _write_holders(plan, values) if torch.is_grad_enabled() else {}  # Note [History Kept Through .data =]
        if early_sets and torch.is_grad_enabled():  # Note [set_ Under Grad]
            _early_self_sets(plan, epilogue, values, counters[0])
        _rebuild_before_read(values, rebuilt_first)
        outs, prewrapped, wrapper_values, roots, after = graph_call.run(values, graph_in, dense, symbols)
        raise_early_bumps(early_heads, values, bumped)
        _turn_on(values, late_gains)
        prewrapped.update(early)
        # a leaf's before its writes: eager's program wrote it only once it no longer required grad (a write to a
        # leaf that requires grad raises), which the epilogue's copies, made with grad on, must see too
        dropped = [i for i in loses if cast(torch.Tensor, values[i]).is_leaf]
        for i in dropped:
            cast(torch.Tensor, values[i]).requires_grad_(False)
        if not epilogue.empty:
            _epilogue(plan, epilogue, ev, values, dense, graph_in, outs, symbols, wrapper_values, counters, held)
        settle_early_counters(at_end, values, entry_views)
        for i in self_set:  # Note [Gradient Accumulators Of Leaves]
            renew_grad_accumulator(cast(torch.Tensor, values[i]))
        for o, r in late_tails:
            prewrapped[o] = replay_from(prewrapped[o], len(r.steps) - r.late_steps, r, ev, symbols, values, shared)
        for i in loses:  # (a view of an input dropped above follows it)
            if i not in dropped and cast(torch.Tensor, values[i]).requires_grad:
                cast(torch.Tensor, values[i]).detach_()  # the program's detach_()
        built: list[object]
        if fresh_only is not None and not prewrapped:
            # Every output a fresh plain tensor of the graph: no replay, no wrapping (the common case, kept short;
            # in training the autograd.Function's outputs are all of them).
            fresh = [fresh_output(cast(torch.Tensor, outs[k])) for k in fresh_only]
            settle_output_counters(fresh, output_versions)
            built = cast(list[object], fresh)
        elif fresh_only is not None and len(prewrapped) == len(fresh_only):
            given = [prewrapped[o] for o in range(len(fresh_only))]
            settle_output_counters(given, output_versions)
            built = cast(list[object], given)
        else:
            built = build_outputs(plan, ev, values, dense, outs, symbols, prewrapped, (roots, shared, counted), holders)
        settle_inner_wrappers(flat, plan.analysis.inner_wrapper_storage, inner_holders, values, built)
        if late_sets and torch.is_grad_enabled():
            _late_view_sets(plan, late_sets, values)
        _turn_on(values, last)
        if after is not None:
            after(built)
        return unflatten_output(built, plan.analysis.output_spec, has_size)

    early_sets, own, rebuilt = epilogue.early_grad_sets, _own_stand_in_leaves(plan), entry_rebuilt_views(plan)
    late_sets = tuple(  # Note [Epilogue Nodes In Eager's Order]
        t
        for t in epilogue.grad_sets
        if plan.analysis.mutations[layout.leaves_of_input[t][0]].grad_set_node is GradSetNode.NUMBERED
    )
    counted_inputs = (bumped_input_sources(plan.analysis.outputs), kept_counter_bumps(plan))
    output_versions, fresh_only = plan.analysis.output_versions, _fresh_only_outputs(plan)
    has_size, rebuilt_first = has_size_spec(plan.analysis.output_spec), _rebuilt_before_read(plan)
    return _resizing(run, plan, ev) if plan.analysis.storage_resizes else run


def _rebuilt_before_read(plan: RuntimePlan) -> list[tuple[int, int]]:
    """(flat position, eager's bumps then) of Analysis.rebuilt_before_read where the graph takes the input itself (a
    plain input in no alias group), no op that records a node moved its counter (the epilogue's own bumps make none),
    and the node rebuilt at the layout it came with is eager's: it ends with that layout, or is stale at the end (a
    later bump), as eager's is."""
    layout = plan.layout
    found: list[tuple[int, int]] = []
    for t, n in plan.analysis.rebuilt_before_read:
        j = layout.leaves_of_input[t][0]
        m = plan.analysis.mutations[j]
        if layout.trees[t] is not None or j not in layout.graph_inputs or m.bumps_after_grad != m.version_bumps:
            continue
        if n < m.version_bumps or not (m.metadata or m.storage_changed):
            found.append((plan.flat.tensor_indices[t], n))
    return found


def _rebuild_before_read(values: Sequence[object], bumps: Sequence[tuple[int, int]]) -> None:
    """Before the graph takes them: each input of `_rebuilt_before_read` at its count as eager's first read with grad
    found it (the bumps before it), so that autograd rebuilds its history from its base as that read did, and the
    graph's edge is that node (autograd_state.rebuilt_before_read); the epilogue's settle gives it eager's count."""
    for i, n in bumps:
        t = cast(torch.Tensor, values[i])
        set_version(t, get_version(t) + n)


def _storage_holders(
    plan: RuntimePlan, values: Sequence[object]
) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
    """Before the epilogue: the anchors' wrapper storages of the wrapper-storage classes, and of the inner wrappers'
    (Note [Wrapper Storage])."""
    outer, inner = plan.analysis.wrapper_storage, plan.analysis.inner_wrapper_storage
    return anchor_holders(plan.flat, outer, values), anchor_holders(plan.flat, inner, values)


def _own_stand_in_leaves(plan: RuntimePlan) -> set[int]:
    """The dense leaves of plain inputs requiring no grad as passed beside one that does (steps.own_stand_in_inputs,
    whichever gain the flag): those that gain it before the graph runs are stand-ins of their own, never their
    group's autograd root; the others never require grad here. So too leaf views with an accumulator of their own
    (steps.own_accumulator_inputs)."""
    gaining = [i for i, on in enumerate(plan.analysis.requires_grad_set) if on]
    own = own_stand_in_inputs(plan.layout, plan.input_requires_grad, range(len(plan.input_requires_grad)), gaining)
    own |= plan.own_accumulators
    leaves = {i for i, o in enumerate(plan.analysis.own_leaf_inputs) if o}  # (pipeline.functional_run.own_leaf_inputs)
    return {j for i in own | leaves for j in plan.layout.leaves_of_input[i]}


def with_inference_copies(plan: RuntimePlan, tensors: Sequence[torch.Tensor]) -> RuntimePlan:
    """`plan` with the copies that run inside inference_mode decided from the compile's tensors (RuntimePlan.
    inference_wrappers, .inference_bases; Note [Input Updates]): a written subclass input's wrapper-level copy_ where
    the wrapper itself is an inference tensor (its inner writes run below ADInplaceOrView, as eager's do), a
    synthetic base's copy where the base, made from its group's members as at run time, is one."""
    written = {j for j, m in enumerate(plan.analysis.mutations) if m.data or m.metadata or m.swapped}
    wrappers = frozenset(
        t
        for t, tree in enumerate(plan.layout.trees)
        if tree is not None and tensors[t].is_inference() and written.intersection(plan.layout.leaves_of_input[t])
    )
    groups = plan.layout.groups
    copied = [
        g
        for g, item in enumerate(plan.layout.graph_inputs)
        if isinstance(item, AliasGroupRef) and written.intersection(groups[item.group].members)
    ]
    based: frozenset[int] = frozenset()
    with torch.no_grad():
        dense = [leaf for t in tensors for leaf in dense_leaves(t)]
        if copied:
            bases = graph_example_inputs(plan.layout, dense, _own_stand_in_leaves(plan))
            based = frozenset(g for g in copied if bases[g].is_inference())
    # (a leaf the guards do not pin is read per call: None)
    leaves = tuple(leaf.is_inference() if j in written else None for j, leaf in enumerate(dense))
    return replace(plan, inference_wrappers=wrappers, inference_bases=based, inference_leaves=leaves)


def _copy_leaf(
    plan: RuntimePlan,
    dense: Sequence[torch.Tensor],
    j: int,
    value: torch.Tensor,
    counts: Mapping[tuple[int, CountedStep], int],
    *,
    final: bool,
) -> None:
    """steps.copy_into of `value` into dense leaf `j` (its ORIGINAL or, `final`, its FINAL update), with eager's
    count and whether the leaf is an inference tensor as the compile decided (RuntimePlan.inference_leaves; where it
    did not, read per call)."""
    step = CountedStep.FINAL_COPY if final else CountedStep.ORIGINAL_COPY
    inference = plan.inference_leaves[j] if j < len(plan.inference_leaves) else None
    mutation = plan.analysis.mutations[j]
    if j in plan.historyless_leaves:
        value = value.detach()
    copy_into(dense[j], value, mutation, final=final, count=counts.get((j, step)), inference=inference)


def _turn_on(values: Sequence[object], positions: Sequence[int]) -> None:
    """The program's requires_grad_() on the inputs at `positions`."""
    for i in positions:
        cast(torch.Tensor, values[i]).requires_grad_(True)


def _accumulators_before(
    values: Sequence[object],
    inputs: tuple[list[InputIndex], list[InputIndex], list[tuple[InputIndex, tuple[Dim, ...]]]],
    ev: MetaEvaluator,
    symbols: dict[str, int],
) -> list[GradientEdge]:
    """Before the graph (Note [Gradient Accumulators Of Leaves]): the accumulators held until the outputs are built
    (`kept`), those renewed first (every read with grad comes after the last x.set_(x), so the accumulators made at a
    read's size come after the renewal too), and those made at the size a read saw (`assigned_reads`)."""
    kept, self_set_first, assigned_reads = inputs
    held = hold_accumulators(values, kept)
    for i in self_set_first:
        renew_grad_accumulator(cast(torch.Tensor, values[i]))
    if assigned_reads:
        held += make_assigned_accumulators(values, [(i, ev.meta((s, (), 0), symbols)[0]) for i, s in assigned_reads])
    return held


def _dense_reader(plan: RuntimePlan) -> Callable[[Sequence[object]], list[torch.Tensor]]:
    """The dense leaves of the real inputs `values`, read through each leaf's inner-attribute path."""
    leaves, leaf_attr_paths = plan.layout.leaves, plan.leaf_attr_paths

    def dense_of(values: Sequence[object]) -> list[torch.Tensor]:
        dense: list[torch.Tensor] = []
        for leaf, attrs in zip(leaves, leaf_attr_paths, strict=True):
            t = values[leaf.owner]
            for a in attrs:
                t = getattr(t, a)
            dense.append(cast(torch.Tensor, t))
        return dense

    return dense_of


def _accumulator_inputs(
    plan: RuntimePlan,
) -> tuple[list[InputIndex], list[InputIndex], list[InputIndex], list[tuple[InputIndex, tuple[Dim, ...]]]]:
    """Flat input positions (Note [Gradient Accumulators Of Leaves]): inputs whose accumulator is renewed before the
    compiled call, those renewed after it, those whose accumulator is held, and (position, size expression) of the
    inputs that get an accumulator at the size a read saw."""
    flat, analysis = plan.flat, plan.analysis
    # See Note [Gradient Accumulators Of Leaves]: renewed before the compiled call, or after it
    first = analysis.self_set_first or (False,) * len(analysis.self_set)
    self_set_first = [flat.tensor_indices[t] for t, s in enumerate(first) if s]
    self_set = [flat.tensor_indices[t] for t, s in enumerate(analysis.self_set) if s and not first[t]]
    kept = [flat.tensor_indices[t] for t, k in enumerate(analysis.kept_accumulators) if k]
    assigned_reads = [(flat.tensor_indices[t], s) for t, s in enumerate(analysis.accumulator_sizes) if s is not None]
    # See Note [Leaves Laid Out Anew Under no_grad]
    assigned_reads += [(flat.tensor_indices[t], s) for t, s in enumerate(analysis.releaf_sizes) if s is not None]
    return self_set_first, self_set, kept, assigned_reads


def _early_replays(plan: RuntimePlan) -> tuple[list[tuple[int, Replay]], list[tuple[int, Replay]]]:
    """(output, replay) of the outputs replayed before the epilogue, in the program's order (Replay.made), without
    their late steps, and of those with late steps (Note [Views That Raise After A Bump])."""
    early_replays = sorted(
        (
            (o, info.replay)
            for o, info in enumerate(plan.analysis.outputs)
            if info.kind is OutputKind.TENSOR and info.replay is not None and info.replay.before_epilogue
        ),
        key=lambda item: item[1].made,  # in the program's order (Replay.made)
    )
    return [(o, _head(r)) for o, r in early_replays], [(o, r) for o, r in early_replays if r.late_steps]


def _early_self_sets(
    plan: RuntimePlan, epilogue: EpiloguePlan, values: Sequence[object], versions: Sequence[int]
) -> None:
    """Note [set_ Under Grad]: x.set_(x) on the inputs that require grad (epilogue.early_grad_sets), before the
    compiled call. `versions`: the counts of `epilogue.versions` as the call came (`_versions`)."""
    done: list[torch.Tensor] = []  # an input passed at several positions takes one set_, as in eager
    counted = _counted(plan, epilogue, versions)
    for t in epilogue.early_grad_sets:
        x = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
        if x.requires_grad and not any(x is d for d in done):
            if (count := counted.get((plan.layout.leaves_of_input[t][0], CountedStep.EARLY_SET))) is not None:
                land_on(x, count)
            _set_to_self_holding_back(x, [values[k] for k in _blocks_of(plan.analysis, t)])
            done.append(x)


def _late_view_sets(plan: RuntimePlan, late_sets: Sequence[int], values: Sequence[object]) -> None:
    """Note [set_ Under Grad]: on each tensor input in `late_sets` (its last set_() under grad a view's, or written
    with grad after it), once the outputs are built, a view's set_() to itself under grad, its version counter kept: x's history is then a
    CopySlices newer than every node of the call and older than every node made after it, as eager's is."""
    done: list[torch.Tensor] = []  # an input passed at several positions takes one, as in eager
    for t in late_sets:
        x = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
        if not x.requires_grad or x._is_view() or any(x is d for d in done):
            continue  # (a view input's own set_ made a CopySlices already)
        version = get_version(x)
        with torch.enable_grad():
            set_to_self(x.view_as(x))
        set_version(x, version)
        done.append(x)


def _resizing(run: Runner, plan: RuntimePlan, ev: MetaEvaluator) -> Runner:
    """`run` with the inputs' storages grown before it and settled after it (Note [Storage Swaps By Rebinding])."""
    dense_of, resizes = _dense_reader(plan), plan.analysis.storage_resizes

    def run_resizing(values: Sequence[object], symbols: dict[str, int]) -> object:
        dense = dense_of(values)
        grow_storages(resizes, dense, ev, symbols)  # Note [Storage Swaps By Rebinding]
        storages = [dense[r.leaf].untyped_storage() for r in resizes]  # (as passed: set_() may move the input)
        result = run(values, symbols)
        settle_storages(resizes, storages, ev, symbols)
        return result

    return run_resizing


def _head(replay: Replay) -> Replay:
    """An early replay without its late steps (Note [Views That Raise After A Bump])."""
    if not replay.late_steps:
        return replay
    kept = len(replay.steps) - replay.late_steps
    return replace(replay, steps=replay.steps[:kept], marks=tuple(m for m in replay.marks if m[0] <= kept))


def _fresh_only_outputs(plan: RuntimePlan) -> tuple[int, ...] | None:
    """Graph-output positions of the outputs when each is a fresh plain tensor of the graph (None otherwise)."""
    fresh_start = len(plan.graph_outputs.updates)
    out = []
    for info in plan.analysis.outputs:
        if info.kind is not OutputKind.TENSOR or info.tree is not None or info.replay is not None:
            return None
        leaf = info.leaves[0] if len(info.leaves) == 1 else None
        if (
            leaf is None
            or leaf.source is not LeafSource.GRAPH
            or leaf.storage_of is not None
            or leaf.onto_input is not None
        ):
            return None
        # (Note [History Kept Through .data =]; requires_grad_() on it; an inference tensor, or a view given the
        # creation meta of one taken inside inference_mode: Note [Grad Mode And Autograd Reads])
        if info.data_from is not None or info.gains_grad or info.inference or info.inference_leaves or info.counterless:
            return None
        if info.parameter:  # (made one: regenerate._retyped)
            return None
        if info.inference_view:
            return None
        out.append(fresh_start + info.leaves[0].index)
    if (
        plan.output_types
        or plan.graph_outputs.num_bases
        or plan.graph_outputs.num_symints
        or plan.analysis.stride_probes
    ):
        return None
    if plan.analysis.wrapper_storage:
        return None  # _outputs gives inputs their wrapper storage (Note [Wrapper Storage])
    return tuple(out)


def _base_count(plan: RuntimePlan, counted: Mapping[tuple[int, CountedStep], int], g: int) -> int | None:
    """The count the copy to the synthetic base of graph input `g` lands on (CountedStep.BASE_COPY): eager's, where
    it is every member's last step and their counts are one (members on one counter, eager's and ours)."""
    members = plan.layout.groups[cast(AliasGroupRef, plan.layout.graph_inputs[g]).group].members
    found = {counted.get((m, CountedStep.BASE_COPY)) for m in members}
    return next(iter(found)) if len(found) == 1 else None


def _copy_base(plan: RuntimePlan, base: torch.Tensor, value: torch.Tensor, g: int, count: int | None = None) -> None:
    """A synthetic base (graph input `g`) that requires grad is written where autograd records it (Note [Aliased
    Inputs In Training]); otherwise, as every input write the program hid from autograd, under no_grad. `count`:
    `_base_count`."""
    if g in plan.inference_bases and not torch.is_inference_mode_enabled():  # Note [Input Updates]: inference inputs
        with torch.inference_mode():
            return _copy_base(plan, base, value, g, count)
    mutations = plan.analysis.mutations
    members = plan.layout.groups[cast(AliasGroupRef, plan.layout.graph_inputs[g]).group].members
    # hidden where written only through tensors set_() or `.data =`-assigned to its storage: Note [Input Updates]
    # (through the base's own views, a leaf that requires grad raises in eager, and so does this copy_)
    hidden = base_write_hidden(mutations, members) or plan.historyless_leaves.issuperset(members)
    through_self = any(mutations[m].visible_through_self for m in members)
    before = get_version(base)
    if value.numel() > base.numel():  # the storage a resize_() grew under the base (trace.base_update)
        value = _copy_grown_tail(base, value)
    if count is not None:
        land_on(base, count)
    with torch.set_grad_enabled(torch.is_grad_enabled() and not hidden and (base.requires_grad or value.requires_grad)):
        base.copy_(value)
    if not through_self and not any(mutations[m].version_bumped for m in members):
        set_version(base, before)


def _copy_grown_tail(base: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Grow flat `base`'s storage to flat `value`'s size and write there, untracked, the elements of `value` past the
    base's own (the program's writes to them reach no input's history); return the rest, the base's own new value."""
    own = base.numel()
    _grow_storage_to(base, value.numel())
    with torch.no_grad():
        tail = base.detach().as_strided((value.numel() - own,), (1,), base.storage_offset() + own)
        tail.copy_(value.detach()[own:])
    return value[:own]


def _grad_swap_pair(
    plan: RuntimePlan, values: Sequence[object], dense: list[torch.Tensor], t: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Tensor input `t`, swapped to a value that requires grad, and the tensor whose storage it took (if an input):
    dense leaves for a plain input, wrappers for a subclass input (whose set_ autograd records at the wrapper level:
    Note [Inputs Written In Training])."""
    layout, mutations = plan.layout, plan.analysis.mutations
    j = layout.leaves_of_input[t][0]
    source = mutations[j].set_source
    if layout.trees[t] is None:
        source = mutations[j].grad_set_input if source is None else source  # (a set_() onto its own storage)
        return dense[j], None if source is None else dense[source]
    owner = None if source is None else next(s for s, ls in enumerate(layout.leaves_of_input) if source in ls)
    wrapper = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
    return wrapper, None if owner is None else cast(torch.Tensor, values[plan.flat.tensor_indices[owner]])


def _grad_swap_edge(
    plan: RuntimePlan, values: Sequence[object], dense: list[torch.Tensor], t: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`_grad_swap_pair`, without the source where eager's set_ node of another input's storage has no edge to that
    input's history (`_source_edge`); a set_() onto the input's own storage keeps it."""
    x, source = _grad_swap_pair(plan, values, dense, t)
    own = plan.analysis.mutations[plan.layout.leaves_of_input[t][0]].set_source is None
    return x, source if own or _source_edge(plan, t) else None


def _source_edge(plan: RuntimePlan, t: int) -> bool:
    """Has eager's set_ node of tensor input `t` an edge to its source input's history? Not where the source is a
    view of that input taken without grad: under no_grad, or inside inference_mode, whose view requires grad but
    cuts the history (Note [set_ Under Grad])."""
    return plan.analysis.mutations[plan.layout.leaves_of_input[t][0]].set_source_edge


def _source_counts(
    plan: RuntimePlan, inputs: Sequence[int], values: Sequence[object], dense: list[torch.Tensor]
) -> dict[int, int | None]:
    """Per plain input of `inputs` (`epilogue.grad_swaps` or `grad_sets`, when grad is enabled), its set_ source's
    version count now (None without a source, or where eager's set_ node has no edge to it: `_grad_swap_edge`),
    which `_counter_at` reads it at."""
    if not torch.is_grad_enabled():
        return {}
    counts: dict[int, int | None] = {}
    for t in inputs:
        if plan.layout.trees[t] is None:
            source = _grad_swap_edge(plan, values, dense, t)[1]
            counts[t] = None if source is None else get_version(source)
    return counts


def _at_set(plan: RuntimePlan, as_came: Mapping[int, int | None]) -> dict[int, int]:
    """Of `_source_counts` read before the epilogue wrote anything, each source's count as it came moved on by the
    program's advances of it before the set_() read it (`LeafMutation.source_bumps_at_set`). The epilogue's copies
    (to a synthetic base of both: Note [Aliased Inputs In Training]; into a storage the source shares) advance it
    before the layout step, where eager read the source before any later write (a multi-output view's history read
    after one raises)."""
    counts = {}
    for t, came in as_came.items():
        before = plan.analysis.mutations[plan.layout.leaves_of_input[t][0]].source_bumps_at_set
        if came is not None and before is not None:
            counts[t] = came + before
    return counts


@contextlib.contextmanager
def _counter_at(source: torch.Tensor | None, count: int | None) -> Iterator[None]:
    """`source`'s version counter set to `count` for the block, then moved on by what the block added to it.

    Eager's `x.set_(src)` under grad reads src's history (its grad_fn) before the set_ advances x's counter. The
    epilogue replays x's new layout without grad first (advancing x's counter) and repeats the set_ under grad after
    (Note [Inputs Written In Training]). Where x shares src's counter (x a detach() of src's base or of a view of it,
    src a view), the replay (and a copy to a synthetic base of both) moved src's counter past the count its history
    was taken at: a view of a multi-output op (unbind, split,
    chunk) would raise autograd's view-after-write error, which eager never met. So the repeat reads src at its count
    from before the layout step; the counter is settled to eager's count later (runtime/steps.py: Version Counters As
    Eager's). A write of src's base before the set_ is in that count already, so it still raises as eager's does."""
    if source is None or count is None or get_version(source) == count:
        yield
        return
    now = get_version(source)
    set_version(source, count)
    try:
        yield
    finally:
        set_version(source, now + get_version(source) - count)


def _repeat_swap_under_grad(x: torch.Tensor, source: torch.Tensor | None, blocked: Sequence[object] = ()) -> None:
    """`x.set_(alias)` under grad, `alias` a differentiable alias of x's storage and metadata: x gets eager's
    grad_fn for a set_ of a value that requires grad (Note [Inputs Written In Training]). Without a source that
    requires grad, the alias holds back `blocked` (`_holding_back`)."""
    held = None if source is not None and source.requires_grad else _holding_back(x, blocked)
    with torch.enable_grad():
        same = source is not None and (source.size(), source.stride()) == (x.size(), x.stride())
        if source is not None and source.requires_grad:
            if same and source.storage_offset() == x.storage_offset():
                alias = source  # a subclass need not implement as_strided
            else:
                alias = source.as_strided(x.size(), x.stride(), x.storage_offset())
        elif held is not None:
            alias = held
        elif is_traceable_subclass(x):
            alias = x.detach().requires_grad_(True)  # never reached by a backward: it stops at the set_
        else:
            alias = non_view_alias(x).requires_grad_(True)  # never reached by a backward: it stops at the set_
        set_to_tensor(x, alias)


def _repeat_grad_sets(
    plan: RuntimePlan,
    epilogue: EpiloguePlan,
    values: Sequence[object],
    dense: list[torch.Tensor],
    inputs: Sequence[int],
    counts: Mapping[int, int],
    source_counts: Mapping[int, int],
) -> list[int]:
    """The epilogue's repeat of the set_() under grad of each of the tensor inputs `inputs` (of `epilogue.grad_sets`:
    Note [set_ Under Grad]); returns the subclass inputs set_() to another input whose storages they still have,
    whose repeat waits for the wrapper's final metadata. `counts`: `_set_counts`; `source_counts`: per plain input
    set_() onto a view of its own storage, its source's count when eager's set_ read it (`_at_set`:
    the epilogue's copies moved a counter the two share past it, and a multi-output view read after raises)."""
    wrapper_sets = []
    for t in inputs:
        x = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
        if x.requires_grad and torch.is_grad_enabled() and t not in epilogue.early_grad_sets:
            _, source = _grad_swap_pair(plan, values, dense, t)
            if t in counts:
                land_on(x, counts[t])
            if not _source_edge(plan, t):
                _set_to_self_holding_back(x, [values[k] for k in _blocks_of(plan.analysis, t)])
            elif plan.layout.trees[t] is None and source is not None and storage_key(source) == storage_key(x):
                with _counter_at(source, source_counts.get(t)):
                    _repeat_swap_under_grad(x, source)
            elif _holds_set_source_storages(plan, dense, t):
                wrapper_sets.append(t)
            else:
                set_to_self(x)
    return wrapper_sets


def _eager_counts(plan: RuntimePlan, epilogue: EpiloguePlan, versions: Sequence[int]) -> dict[int, int]:
    """Per dense leaf of `epilogue.versions`, eager's count after the call (`versions`: the counts before it)."""
    bumps = [plan.analysis.mutations[j].version_bumps for j in epilogue.versions]
    return {j: before + n for j, before, n in zip(epilogue.versions, versions, bumps, strict=True)}


def _counted(plan: RuntimePlan, epilogue: EpiloguePlan, versions: Sequence[int]) -> dict[tuple[int, CountedStep], int]:
    """EpiloguePlan.counted: eager's count, per step that lands on it (`versions`: as in `_eager_counts`)."""
    if not epilogue.counted:
        return {}
    ends = _eager_counts(plan, epilogue, versions)
    return {(j, step): ends[j] for j, step in epilogue.counted}


def _set_counts(counted: Mapping[tuple[int, CountedStep], int], plan: RuntimePlan) -> dict[int, int]:
    """Of `counted` (`_counted`), per plain tensor input, the count its set_()'s repeat after the copies lands on."""
    return {
        t: counted[j, CountedStep.SET]
        for t, leaves in enumerate(plan.layout.leaves_of_input)
        if leaves and (j := leaves[0], CountedStep.SET) in counted
    }


def _repeat_swaps(
    plan: RuntimePlan,
    values: Sequence[object],
    dense: list[torch.Tensor],
    swap_counts: Mapping[int, int | None],
    set_counts: Mapping[int, int],
) -> None:
    """The epilogue's repeat under grad of the set_() of each plain input of `swap_counts` (`_source_counts`),
    its source read at its count there; `set_counts`: `_set_counts`."""
    for t, count in swap_counts.items():
        x, source = _grad_swap_edge(plan, values, dense, t)
        if t in set_counts:
            land_on(x, set_counts[t])
        with _counter_at(source, count):
            _repeat_swap_under_grad(x, source, [values[k] for k in _blocks_of(plan.analysis, t)])


def _write_holders(plan: RuntimePlan, values: Sequence[object]) -> dict[int, torch.Tensor]:
    """Before the graph (Note [History Kept Through .data =]): per dense leaf whose write after `.data =` raises in
    eager's backward, an empty holder behind a node with an edge to the history, as the call found it, of each input
    eager's node of that write holds back (`Analysis.raising_write_blocks`)."""
    holders: dict[int, torch.Tensor] = {}
    for t, blocked in enumerate(plan.analysis.raising_write_blocks):
        if blocked:
            x = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
            empty = torch.empty(0, dtype=x.dtype, device=x.device)
            for j in plan.layout.leaves_of_input[t]:
                holders[j] = blocking_holder(empty, [values[k] for k in blocked])
    return holders


def _held_back(holders: Mapping[int, torch.Tensor], j: int, value: torch.Tensor) -> torch.Tensor:
    """The value a FINAL copy writes into dense leaf `j`: in its holder of `_write_holders`, where it has one."""
    holder = holders.get(j)
    if holder is None:
        return value
    with torch.no_grad():
        set_to_tensor(holder, value.detach())
    return holder


def _blocks_of(analysis: Analysis, t: int) -> tuple[int, ...]:
    return analysis.input_set_blocks[t] if analysis.input_set_blocks else ()


def _holding_back(x: torch.Tensor, blocked: Sequence[object]) -> torch.Tensor | None:
    """An alias of x's storage and metadata, made under grad, whose history reaches that of each of `blocked` (inputs)
    that requires grad through a holder's set_ node, which never runs: eager's set_() of x to a tensor computed from
    them has an edge to their history, so their gradients wait behind its raising node (Note [set_ Under Grad]).
    None where none of them requires grad."""
    if not any(isinstance(b, torch.Tensor) and b.requires_grad for b in blocked):
        return None
    if is_traceable_subclass(x):
        holder = blocking_holder(x.detach().requires_grad_(), blocked)
    else:
        holder = blocking_holder(torch.empty(0, dtype=x.dtype, device=x.device, requires_grad=True), blocked)
    with torch.enable_grad():
        set_to_tensor(holder, x.detach())
    return holder


def _set_to_self_holding_back(x: torch.Tensor, blocked: Sequence[object]) -> None:
    """`x.set_(x)` under grad, its node holding back the histories of `blocked` (`_holding_back`); x keeps its
    metadata, as `set_to_self` leaves it."""
    alias = _holding_back(x, blocked)
    if alias is None:
        set_to_self(x)
        return
    size, stride, offset = list(x.shape), list(x.stride()), int(x.storage_offset())
    set_to_tensor(x, alias)
    if list(x.shape) != size or list(x.stride()) != stride or x.storage_offset() != offset:
        assign_wrapper_metadata(x, size, stride, offset)


def _holds_set_source_storages(plan: RuntimePlan, dense: list[torch.Tensor], t: int) -> bool:
    """Subclass input `t`, set_() under grad to another input, still holds that input's storage in every dense leaf
    (Note [set_ Under Grad]: the epilogue's set_ then takes that input as its source, at the wrapper level)."""
    if plan.layout.trees[t] is None:
        return False
    sources = [plan.analysis.mutations[j].set_source for j in plan.layout.leaves_of_input[t]]
    owners = {s for s, leaves in enumerate(plan.layout.leaves_of_input) if any(k in leaves for k in sources)}
    return (
        len(owners) == 1
        and t not in owners
        and all(
            k is not None and storage_key(dense[k]) == storage_key(dense[j])
            for j, k in zip(plan.layout.leaves_of_input[t], sources, strict=True)
        )
    )


def _repeat_wrapper_set_under_grad(wrapper: torch.Tensor, source: torch.Tensor | None) -> None:
    """`wrapper.set_(source)` under grad (the source an input that requires grad, whose storages the wrapper's dense
    leaves hold): eager's node, with its edge to the source's history, whose gradient then waits behind the raising
    node. Else `wrapper.set_(wrapper)` (Note [set_ Under Grad])."""
    if source is None or not source.requires_grad:
        set_to_self(wrapper)
        return
    with torch.enable_grad():
        set_to_tensor(wrapper, source)


@contextlib.contextmanager
def _layouts_kept(wrapper: torch.Tensor, leaves: Sequence[torch.Tensor]) -> Iterator[None]:
    """Around the epilogue's repeat of a subclass input's set_() under grad, made for its autograd record only: the
    wrapper and its dense `leaves` get back the layouts and version counters they had, eager's final ones (Note [set_
    Under Grad]). The set_ gives each leaf its source's leaf's layout, which need not be the wrapper's (a `.data =`
    the program made on the source set its wrapper's metadata apart from its leaves': Note [Wrapper Storage]), and the wrapper its first leaf's."""
    metas = [(t.size(), t.stride(), t.storage_offset(), get_version(t)) for t in leaves]
    size, stride, offset = list(wrapper.shape), list(wrapper.stride()), int(wrapper.storage_offset())
    version = get_version(wrapper)
    yield
    with torch.no_grad():
        for t, (t_size, t_stride, t_offset, t_version) in zip(leaves, metas, strict=True):
            if (t.size(), t.stride(), t.storage_offset()) != (t_size, t_stride, t_offset):
                t.as_strided_(t_size, t_stride, t_offset)
            set_version(t, t_version)
    if list(wrapper.shape) != size or list(wrapper.stride()) != stride or wrapper.storage_offset() != offset:
        assign_wrapper_metadata(wrapper, size, stride, offset)
    set_version(wrapper, version)


def _epilogue(
    plan: RuntimePlan,
    epilogue: EpiloguePlan,
    ev: MetaEvaluator,
    values: Sequence[object],
    dense: list[torch.Tensor],
    graph_in: list[torch.Tensor],
    outs: list[object],
    symbols: dict[str, int],
    wrapper_values: dict[int, torch.Tensor],
    counters: tuple[list[int], list[int]],
    holders: Mapping[int, torch.Tensor],
) -> None:
    """Apply input mutations in the order of Note [Input Updates]. `counters`: `_versions` before the call;
    `holders`: `_write_holders`'."""
    mutations = plan.analysis.mutations
    versions, wrapper_versions = counters
    counts = _counted(plan, epilogue, versions)
    counts_as_came = _source_counts(plan, epilogue.grad_swaps, values, dense)  # before a synthetic base's copy
    grad_set_counts = _at_set(plan, _source_counts(plan, epilogue.grad_sets, values, dense))
    for g, k in epilogue.base_copies:
        _copy_base(plan, graph_in[g], cast(torch.Tensor, outs[k]), g, _base_count(plan, counts, g))
    # See Note [Inputs Written In Training]: inputs whose view ops are replayed get their value after them.
    late = {t for t in wrapper_values if t in epilogue.inplace_ops}
    copy_points = dict(epilogue.copy_points)
    by_wrapper = {j for t in wrapper_values for j in plan.layout.leaves_of_input[t]}
    early = by_wrapper - {j for t in late for j in plan.layout.leaves_of_input[t]}
    for t, value in wrapper_values.items():
        if t not in late:
            _copy_wrapper(plan, values, t, value)
    for j, k in epilogue.original_copies:
        if j in early:
            continue
        _copy_leaf(plan, dense, j, cast(torch.Tensor, outs[k]), counts, final=False)
    # set_ sources as the inputs came: an input swapped away earlier in this loop still names its old storage
    sources = {
        m.set_source: dense[m.set_source].detach()
        for j in epilogue.metadata
        if (m := mutations[j]).set_source is not None
    }
    swap_counts = _source_counts(plan, epilogue.grad_swaps, values, dense) | _at_set(plan, counts_as_came)
    set_counts = _set_counts(counts, plan)
    if epilogue.grad_sets_first:  # Note [set_ Under Grad]: eager's layout op made its node above the set_'s
        _repeat_grad_sets(plan, epilogue, values, dense, epilogue.grad_sets_first, set_counts, grad_set_counts)
    _replay_layouts(plan, epilogue, ev, (dense, outs, symbols), sources)
    for t in epilogue.reshaped:
        wrapper = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
        # See Note [Stale View Functions]: a view takes its value first, in the layout it came with
        copy_at = copy_points.get(t) if t in late and wrapper._is_view() else None
        if copy_at is not None:
            steps = plan.analysis.inplace_replay[t]
            _copy_wrapper(plan, values, t, undo_steps(wrapper_values[t], steps, ev, symbols))
            late.discard(t)
        gained = t in epilogue.reshaped_gaining_grad
        _replay_wrapper_steps(plan, ev, (values, outs, symbols), t, (copy_at, gained))
    for t in late:
        _copy_wrapper(plan, values, t, wrapper_values[t])
    for j, k in epilogue.final_copies:
        if j not in by_wrapper:
            value = _held_back(holders, j, cast(torch.Tensor, outs[k]))
            _copy_leaf(plan, dense, j, value, counts, final=True)
    first = epilogue.grad_sets_first
    later = [t for t in epilogue.grad_sets if t not in first] if first else epilogue.grad_sets
    wrapper_sets = _repeat_grad_sets(plan, epilogue, values, dense, later, set_counts, grad_set_counts)
    _repeat_swaps(plan, values, dense, swap_counts, set_counts)
    for j, before in zip(epilogue.versions, versions, strict=True):
        settle_version(dense[j], before, mutations[j].version_bumps, recorded=j in epilogue.recorded)
    if epilogue.wrappers:
        _fix_wrappers(plan, epilogue, wrapper_versions, ev, values, symbols, dense)
    if epilogue.grad_swaps and torch.is_grad_enabled():
        for t in epilogue.grad_swaps:
            if plan.layout.trees[t] is not None:  # once its wrapper has its final metadata and version
                wrapper, source = _grad_swap_edge(plan, values, dense, t)
                with _layouts_kept(wrapper, [dense[j] for j in plan.layout.leaves_of_input[t]]):
                    _repeat_swap_under_grad(wrapper, source, [values[k] for k in _blocks_of(plan.analysis, t)])
    for t in wrapper_sets:
        wrapper, source = _grad_swap_pair(plan, values, dense, t)
        with _layouts_kept(wrapper, [dense[j] for j in plan.layout.leaves_of_input[t]]):
            _repeat_wrapper_set_under_grad(wrapper, source)


def _replay_wrapper_steps(
    plan: RuntimePlan,
    ev: MetaEvaluator,
    call: tuple[Sequence[object], list[object], dict[str, int]],
    t: int,
    at: tuple[int | None, bool],
) -> None:
    """Replay on tensor subclass input `t` the in-place view ops the program ran on it, and its `.data =` among
    them (`call`: the call's inputs, graph outputs and symbols; `at`: the step its value was copied in at, and whether
    the program makes it require grad: EpiloguePlan.reshaped_gaining_grad, replayed under no_grad)."""
    values, outs, symbols = call
    copy_at, gained = at
    wrapper = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
    data, steps = plan.analysis.wrapper_data[t], plan.analysis.inplace_replay[t]
    for k, step in enumerate(steps):
        if data is not None and k == data.after_steps:
            _assign_data(plan, ev, values, symbols, wrapper, data, outs)
        # Under the grad mode the program had: autograd records it on a wrapper that requires grad, as in eager.
        grad = step.grad_enabled and not gained and (copy_at is None or k >= copy_at)
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            refresh_view_grad_fn(wrapper)  # Note [Inputs Written In Training]
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()), resize_inside_inference_mode(step, wrapper):
            step.op(
                wrapper,
                *cast(tuple[object, ...], ev.arg(step.args, symbols)),
                **{k: ev.arg(v, symbols) for k, v in step.kwargs},
            )
    # With no step after it, only where it gives the final metadata (else _fix_wrappers gives them).
    if data is not None and data.after_steps >= len(steps) and (data.final or steps):
        _assign_data(plan, ev, values, symbols, wrapper, data, outs)


def _assign_data(
    plan: RuntimePlan,
    ev: MetaEvaluator,
    values: Sequence[object],
    symbols: dict[str, int],
    wrapper: torch.Tensor,
    data: DataAssignmentPlan,
    outs: Sequence[object],
) -> None:
    """Note [Wrapper Storage]: the wrapper takes the assigned tensor's own metadata (not its storage: see
    Note [Wrapper Storage]), without autograd or the version counter, as eager's `.data =`."""
    if data.source is not None:
        source = cast(torch.Tensor, values[plan.flat.tensor_indices[data.source]])
        size, stride, offset = list(source.shape), list(source.stride()), int(source.storage_offset())
    else:
        size, stride, offset = ev.meta(data.meta, symbols)
        stride = probed_stride(plan, outs, data.stride_probe, size, stride)
    assign_data_meta(wrapper, size, stride, offset)


def _copy_wrapper(plan: RuntimePlan, values: Sequence[object], t: int, value: torch.Tensor) -> None:
    """A wrapper-level copy_ that autograd records (Note [Inputs Written In Training])."""
    wrapper = cast(torch.Tensor, values[plan.flat.tensor_indices[t]])
    if t in plan.inference_wrappers and not torch.is_inference_mode_enabled():
        with torch.inference_mode():  # Note [Input Updates]: inference inputs
            return _copy_wrapper(plan, values, t, value)
    # Recorded only where the program wrote the input itself (or a view of it) with grad on: a write through an
    # alias autograd does not relate to it (a detach() passed beside it) is not (Note [Aliased Inputs In Training]).
    # Written through itself, a leaf that requires grad, or a view of one, raises eager's error here,
    # as it does in eager.
    visible = wrapper_write_recorded(plan.analysis, plan.layout, t)
    # written only through an alias set_() or `.data =`-assigned to its storage (Note [Input Updates])
    mutations = plan.analysis.mutations
    visible = visible and any(mutations[j].visible_through_self for j in plan.layout.leaves_of_input[t])
    before = get_version(wrapper)
    with torch.set_grad_enabled(visible and torch.is_grad_enabled()):
        wrapper.copy_(value)
    if not plan.analysis.wrapper_version_bumps[t]:
        set_version(wrapper, before)  # a write through `.data`: eager leaves the wrapper's counter alone


def _replay_metadata(
    dense: list[torch.Tensor],
    j: int,
    m: LeafMutation,
    meta: tuple[list[int], list[int], int],
    sources: dict[DenseIndex, torch.Tensor],
    *,
    relaid: bool = False,
) -> None:
    """`relaid`: EpiloguePlan.layout_nodes' (the relayout makes eager's node over the set_'s, changing the layout or
    not)."""
    size, stride, offset = meta
    x = dense[j]
    # An in-place view op on a non-leaf that requires grad rewrites its grad_fn in eager: let autograd see ours,
    # unless the program ran them all under no_grad (Note [Leaves Laid Out Anew Under no_grad]).
    visible = x.requires_grad and m.autograd_visible and not m.storage_changed and not m.metadata_hidden
    with torch.set_grad_enabled(visible and torch.is_grad_enabled()):
        if m.storage_changed and m.set_source is not None:
            source = sources[m.set_source]
            if m.swapped_by_data:
                x.data = source.as_strided(size, stride, offset)
            else:
                # set_(Tensor), as the program's: set_(storage, ...) refuses a tensor that requires grad
                set_to_tensor(x, source.detach().as_strided(size, stride, offset))
        elif m.storage_changed:
            numel = max(offset + _extent(size, stride), m.new_storage_numel or 0)  # eager's storage size
            fresh = torch.empty(numel, dtype=x.dtype, device=x.device)
            if m.new_storage_of is not None:  # the storage an earlier input was set_() to, grown to fit
                storage = dense[m.new_storage_of].untyped_storage()
                storage.resize_(max(storage.nbytes(), fresh.untyped_storage().nbytes()))
                fresh = torch.empty(0, dtype=x.dtype, device=x.device).set_(storage)
            if m.swapped_by_data:
                x.data = fresh.as_strided(size, stride, offset)
            else:
                x.set_(fresh.untyped_storage(), offset, size, stride)
        elif m.swapped and (m.resized or not visible or m.swapped_by_data_only):
            # set_() within its own storage (to another input sharing it, or to a view of itself): set_(Tensor) as
            # the program's. On a leaf, unlike as_strided_, it also renews the gradient accumulator autograd
            # checks the leaf's gradient against (x0.set_(x0.view(-1)) under no_grad). `.data =` alone: as the
            # program's, which autograd never sees (as_strided_ with grad would rewrite a non-leaf's grad_fn, and
            # raises on a view of a multi-output op such as unbind)
            if m.resized and m.new_storage_numel is not None:  # grown by resize_() before the swap: as eager's
                nbytes = max(offset + _extent(size, stride), m.new_storage_numel) * x.element_size()
                if nbytes > x.untyped_storage().nbytes():
                    x.untyped_storage().resize_(nbytes)
            if m.swapped_by_data_only:  # Note [Gradient Accumulators Of Leaves]
                x.data = x.detach().as_strided(size, stride, offset)
            else:
                set_to_tensor(x, x.detach().as_strided(size, stride, offset))
        elif m.resized and (offset + _extent(size, stride)) * x.element_size() > x.untyped_storage().nbytes():
            # (an as_strided_() onto elements of its storage past its own is no resize, where resize_ of an input
            # that requires grad raises)
            if x.requires_grad:
                # eager grew it before the program's requires_grad_() (a resize_ of a tensor that requires grad
                # raises), which the call made first: grow its storage as resize_ does, untracked as resize_ is
                x.untyped_storage().resize_((offset + _extent(size, stride)) * x.element_size())
                with torch.no_grad():
                    x.as_strided_(size, stride, offset)
                return
            x.resize_(size)
            _grow_storage_to(x, m.new_storage_numel)  # (a view of it grown further since)
            if list(x.stride()) != stride or x.storage_offset() != offset:
                x.as_strided_(size, stride, offset)
        else:
            _grow_storage_to(x, m.new_storage_numel if m.resized else None)
            # (resize_() of a tensor that requires grad raises outside inference_mode: the program's ran inside one,
            # where autograd neither checks the view nor rewrites its grad_fn; so does the replay. Grown only under
            # it, by a detach()'s resize_(), its layout is its in-place view ops', with grad where they had it)
            resized_itself = m.resized and not m.grown_under_it
            inside = torch.inference_mode() if resized_itself and x.requires_grad else contextlib.nullcontext()
            if m.metadata or relaid:  # (else only its storage grew under it)
                with inside:
                    x.as_strided_(size, stride, offset)


def _replay_layouts(
    plan: RuntimePlan,
    epilogue: EpiloguePlan,
    ev: MetaEvaluator,
    call: tuple[list[torch.Tensor], list[object], dict[str, int]],
    sources: dict[DenseIndex, torch.Tensor],
) -> None:
    """The dense inputs' metadata and storage changes (`call`: the dense inputs, the graph's outputs, the symbols)."""
    if not epilogue.metadata:
        return  # (the common call: nothing to lay out, nothing to work out per call)
    dense, outs, symbols = call
    mutations, finals, renewed = plan.analysis.mutations, dict(epilogue.final_copies), _renewed_before_the_call(plan)
    for j in epilogue.metadata:
        m, meta = mutations[j], ev.meta(mutations[j].final_meta, symbols)
        if m.storage_changed and m.set_source is None and j in finals:  # Note [Strides The Kernels Choose]
            meta = set_target_layout(meta, outs[finals[j]])
        # (inside inference_mode a set_() keeps the accumulator: the one renewed before the call, or the program's)
        keep = j in renewed and dense[j].is_leaf and dense[j].requires_grad
        with torch.inference_mode() if keep else contextlib.nullcontext():
            _replay_metadata(dense, j, m, meta, sources, relaid=j in epilogue.layout_nodes)
        if m.final_bits is not None and (dense[j].is_conj(), dense[j].is_neg()) != m.final_bits:
            x = dense[j]  # (the bits its `.data =` gave it, as eager's: with no record, nor a version bump)
            x.data = with_bits(x.detach(), x.is_conj() != m.final_bits[0], x.is_neg() != m.final_bits[1])


def _renewed_before_the_call(plan: RuntimePlan) -> frozenset[DenseIndex]:
    """The plain inputs whose gradient accumulator the runtime renewed before the compiled call, as the program's last
    set_() under no_grad did before every read with grad, and those the program set_() inside inference_mode only,
    which keeps the one alive (Note [Gradient Accumulators Of Leaves]): the epilogue's set_() keeps it."""
    first, layout = plan.analysis.self_set_first, plan.layout
    kept = plan.analysis.set_inside_inference or (False,) * len(layout.trees)
    return frozenset(
        j
        for t, (s, k) in enumerate(zip(first or (False,) * len(layout.trees), kept, strict=True))
        if (s or k) and layout.trees[t] is None
        for j in layout.leaves_of_input[t]
    )


def _grow_storage_to(x: torch.Tensor, numel: int | None) -> None:
    """Grow x's storage in place to `numel` elements where it has fewer: eager's resize_() of a tensor over it (x, or
    a view of x) grows the one storage x, its views and the caller's views of it share (Note [Storage Swaps By
    Rebinding]); the final copies write its values after."""
    if numel is not None and numel * x.element_size() > x.untyped_storage().nbytes():
        x.untyped_storage().resize_(numel * x.element_size())


def _versions(
    plan: RuntimePlan, epilogue: EpiloguePlan, values: Sequence[object], dense: list[torch.Tensor]
) -> tuple[list[int], list[int]]:
    """The version counters the epilogue settles (dense leaves, then wrappers), as they are now."""
    wrappers = [get_version(cast(torch.Tensor, values[plan.flat.tensor_indices[t]])) for t in epilogue.wrappers]
    return [get_version(dense[j]) for j in epilogue.versions], wrappers


def _extent(size: list[int], stride: list[int]) -> int:
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def _fix_wrappers(
    plan: RuntimePlan,
    epilogue: EpiloguePlan,
    versions: list[int],
    ev: MetaEvaluator,
    values: Sequence[object],
    symbols: dict[str, int],
    dense: Sequence[torch.Tensor],
) -> None:
    flat, analysis, viewed = plan.flat, plan.analysis, epilogue.viewed_wrappers
    for t, before in zip(epilogue.wrappers, versions, strict=True):
        wrapper = values[flat.tensor_indices[t]]
        assert isinstance(wrapper, torch.Tensor)
        after = analysis.wrapper_meta_after[t]
        data = analysis.wrapper_data[t]
        if after is not None and not analysis.inplace_replay[t] and not (data is not None and data.final):
            leaves = plan.layout.leaves_of_input[t]
            leaf_metas = [ev.meta(analysis.mutations[j].final_meta, symbols) for j in leaves]
            # See Note [Strides The Kernels Choose]
            size, stride, offset = wrapper_layout(ev.meta(after, symbols), leaf_metas, [dense[j] for j in leaves])
            if list(wrapper.shape) != size or list(wrapper.stride()) != stride or wrapper.storage_offset() != offset:
                # after a `.data =`, without autograd or the version counter (Note [Wrapper Storage])
                change = assign_wrapper_metadata if data is not None else set_wrapper_metadata
                with torch.no_grad():  # the program's set_ under grad, if any, is repeated (Note [set_ Under Grad])
                    change(wrapper, size, stride, offset)
        bumps, now = analysis.wrapper_version_bumps[t], get_version(wrapper)
        view = wrapper._is_view() and t in epilogue.recorded_wrappers  # (EpiloguePlan.recorded)
        regenerates = wrapper.requires_grad and (view or t in viewed)
        if now != before + bumps and not regenerates:
            set_version(wrapper, before + bumps)  # runtime/steps.py: Version Counters As Eager's
        elif bumps and now == before:
            # Only where the epilogue's own ops did not, by one: autograd regenerates the grad_fn of the input (a
            # view) or of an output view of it when its version moves, and after a replayed in-place view op (t_)
            # that would lose the op from its history.
            set_version(wrapper, now + 1)
