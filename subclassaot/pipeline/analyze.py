"""Stage `analyze`: run the program once under functionalization and record every observable effect.

Input: the traced call, `FlatInputs`, `DenseLayout` and the fake inputs. Output: `Analysis` — per dense input leaf
what happened to it (data, metadata, storage swap by set_, hidden from autograd, under no_grad), per output what it
is (a constant, a symint, an input itself, a fresh tensor, a view of an input or of an intermediate).
Invariants: no graph is built here; the analysis alone decides the graph's output layout (see trace.py).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import replace
from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import SubclassNode, is_traceable_subclass
from subclassaot.eager.record import EagerAsk
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.analyze_training import (
    check_history_over_alias,
    check_input_view_rebuilt,
    check_overlapping_clones,
    check_wrapper_grad_gains,
    check_writes_after_hidden_set,
    check_written_overlapping_views,
    grad_set_base,
    outputs_set_onto_inputs,
    set_under_grad,
    wrapper_uses,
)
from subclassaot.pipeline.backward_probe import (
    eager_accumulator_sizes,
    gain_last_unobserved,
    gain_unobserved,
    old_accumulators_dead,
)
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import (
    FunctionalRun,
    dense_leaves_of,
    intermediate_bases,
    own_leaf_inputs,
    own_leaves_of,
    own_stand_in_leaves,
    own_stand_ins,
    run_functional,
)
from subclassaot.pipeline.grad_scope import check_gained_after_read
from subclassaot.pipeline.inputs import SameTensorAs, refuse_sparse
from subclassaot.pipeline.rules.autograd_state import (
    assigned_accumulator_size,
    check_retained_outputs,
    history_set_at,
    rebuilt_before_read,
    self_set_order,
)
from subclassaot.pipeline.rules.backward_errors import (
    check_set_under_grad,
    input_set_blocks,
    inputs_behind_raising_nodes,
    raising_write_blocks,
)
from subclassaot.pipeline.rules.chain_facts import (
    base_gains_grad,
    check_mixed_grad_view_ops,
    detached_in_chain,
    from_program_function,
    hidden_base,
    hidden_base_shares_counter,
    history_kept_over_swap,
    made_seq,
    set_after_viewed,
    split_seq,
)
from subclassaot.pipeline.rules.changed_views import (
    check_bumped_views,
    check_late_bump_order,
    check_rebuilt_view_relation,
    check_stale_subclass_outputs,
    counter_at_end,
    input_rooted_bumped_views,
    input_view_raises_in_eager,
    late_build_seq,
    refuse_early_view_after_grad_set,
    regenerated_view_raises_in_eager,
    steps_before_last_write,
)
from subclassaot.pipeline.rules.data_assignment import (
    check_assigned_view,
    check_data_meta_outputs,
    inner_wrapper_classes,
    wrapper_data_plans,
    wrapper_storage_classes,
)
from subclassaot.pipeline.rules.function_views import (
    check_built_wrapper_output,
    check_dirty_inputs,
    check_fresh_inner_grad,
    check_function_input_unwritten,
    check_graph_leaf_shared_under_grad,
    check_rebuilt_over_input,
    check_wrapper_over_history,
    check_written_function_view,
    detached_output_leaves,
    dispatch_alias_base,
    function_slots,
    function_view_of_fresh,
    function_view_replay,
    holds_input_leaves,
    made_as_function_view,
)
from subclassaot.pipeline.rules.hidden_layouts import (
    check_view_taken_before_grad,
    read_after_nograd_set,
    refuse_stale_view_layouts,
    releaf_size,
    seen_after_layout_ops,
)
from subclassaot.pipeline.rules.leaf_mutations import (
    alias_meta,
    check_unreplayed_assigned_view,
    history_data_leaf,
    leaf_mutations,
    wrappers_after,
)
from subclassaot.pipeline.rules.new_leaves import NewLeafHold, made_parameter
from subclassaot.pipeline.rules.set_storage_rules import storage_resize_plan
from subclassaot.pipeline.rules.set_under_grad import (
    early_set_inputs,
    intermediate_read_after_grad_set,
    refuse_grad_set_onto_moved_source,
    sets_without_history,
    view_set_nodes,
    views_before_view_sets,
)
from subclassaot.pipeline.rules.stale_views import (
    refuse_leaf_views_rebuilt_after_a_read,
    refuse_views_of_assigned_bases_kept,
    refuse_views_read_after_base_set,
    views_read_after_own_set,
)
from subclassaot.pipeline.rules.storage_reach import (
    check_output_past_grown_input,
    check_output_relaid_by_growth,
    check_relaid_family_member,
    refuse_grad_through_hidden_grow,
)
from subclassaot.pipeline.rules.strides_and_offsets import check_written_relaid_to_repeats, meta_overlaps
from subclassaot.pipeline.rules.swap_record import (
    InplaceViewRecord,
    SwapRecord,
    counter_keeping_replays,
    elements_of,
    output_input_counters,
    outputs_counted_first,
)
from subclassaot.pipeline.rules.training_rules import (
    gains_grad,
    grad_bases,
    one_tensor_passed_again,
    wrapper_update_inputs,
)
from subclassaot.pipeline.rules.view_bases import (
    check_grad_view_of_moved_input,
    check_moved_view_of_grad_intermediate,
    check_own_base_run,
    check_view_of_input_set_off_it,
    eager_base_input_off,
    foreign_base,
    with_own_base_views,
)
from subclassaot.pipeline.rules.view_chains import (
    check_grown_multi_output_view,
    cut_history_replay,
    detached_chains_without_grad,
    early_input_replay,
    inplace_replay,
    last_bump,
    replay_of,
    root_replay,
    set_source_steps,
    stale_intermediate_view,
    view_rebuilt_by_set,
    viewed_before_set,
)
from subclassaot.runtime.steps import graph_example_inputs, own_stand_in_inputs
from subclassaot.schemas import (
    AliasGroup,
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    InputIndex,
    LeafMutation,
    LeafSource,
    Meta,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    StrideProbe,
    TangentExample,
    TangentExamples,
)
from subclassaot.torch_internals import (
    differentiable_dtype,
    from_functional,
    grad_fn_or_none,
    grad_fn_raises,
    is_inference_mode_view,
    is_nested_int,
    new_functional_mode,
    outside_current_modes,
    reads_flag_of_base,
    storage_key,
)

_CONSTANT_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout)


def analyze(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    dense_fakes: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
    nonleaf_wrappers: frozenset[int] = frozenset(),
    replay_reads: tuple[object, ...] | None = None,
    own_base_views: bool | None = None,
    hold: NewLeafHold | None = None,
    own_leaves: frozenset[int] | None = None,
    eager: EagerAsk | None = None,
) -> Analysis:
    """`nonleaf_wrappers`: subclass inputs that require grad and are not leaves in eager (the program may mutate
    them in place); the analysis runs them as clones, which are non-leaves too. `replay_reads`: the answers of an
    earlier analysis's autograd reads, given back in order (Note [Grad Mode And Autograd Reads]). `own_base_views`:
    Note [Aliased Inputs In Training] (None: tried as `with_own_base_views` says). `hold`: the compile's choice of
    the calls making new leaves it holds back, made by the first run that completes (Note [Training Without A
    Function]). `own_leaves`: the first analysis's Analysis.own_leaf_inputs, as tensor positions, given to every
    later one (functional_run.own_leaf_inputs); None in the first, which finds them. `eager`: the program's eager
    record, asked for by the rules that read a fact of it (SwapRecord.eager)."""
    if own_base_views is None:
        args = (call, flat, layout, dense_fakes, user_fakes, fake_mode, nonleaf_wrappers, replay_reads)
        return with_own_base_views(
            layout,
            flat,
            lambda views: analyze(*args, own_base_views=views, hold=hold, own_leaves=own_leaves, eager=eager),
        )
    given = grouped_own_leaves(flat, layout, own_leaves)
    graph_fakes = graph_example_inputs(layout, dense_fakes, own_stand_in_leaves(flat, layout, user_fakes, given))
    grad_groups = cloned_bases(flat, layout, user_fakes, given) if torch.is_grad_enabled() else frozenset()
    with fake_mode:
        for k in grad_groups:
            graph_fakes[k] = graph_fakes[k].detach().requires_grad_(True)
    if hold is not None:
        hold.run_starts()
    with fake_mode, new_functional_mode():
        run = run_functional(
            call,
            flat,
            layout,
            graph_fakes,
            requires_grad_like=user_fakes,
            clone_inputs=nonleaf_wrappers,
            clone_graph_inputs=grad_groups,
            own_base_views=own_base_views,
            replay_reads=replay_reads,
            hold=hold,
            own_leaves=given,
        )
        run.swaps.eager = eager
        if hold is not None:
            hold.run_completed(run.swaps.flag_calls)
        facts = _CheckedRun(
            call, flat, layout, run, user_fakes, nonleaf_wrappers, own_base_views, None if own_leaves is None else given
        )
        # (the run forward_example would make where the inputs it clones are not written, and nothing else differs)
        same = not (grad_groups or nonleaf_wrappers or own_base_views or replay_reads is not None)
        examples = _tangent_examples(layout, run, facts.mutations, user_fakes) if same else None
    analysis = _analysis(call, flat, layout, user_fakes, own_base_views, facts)
    return analysis if examples is None else replace(analysis, tangent_examples=examples)


def grouped_own_leaves(flat: FlatInputs, layout: DenseLayout, own_leaves: frozenset[int] | None) -> frozenset[int]:
    """`own_leaves` of the layout's alias groups (an untouched group traced apart has none)."""
    grouped = {layout.leaves[m].owner for g in layout.groups for m in g.members}
    return frozenset(i for i in own_leaves or () if flat.tensor_indices[i] in grouped)


def cloned_bases(
    flat: FlatInputs, layout: DenseLayout, user_fakes: Sequence[torch.Tensor], given: frozenset[int]
) -> frozenset[int]:
    """The synthetic bases that require grad, which a run with grad on takes as clones, as the backward trace
    does (Note [Aliased Inputs In Training]): an in-place op on a member then happens to a non-leaf, as in eager.
    `given`: `grouped_own_leaves`."""
    return frozenset(grad_bases(layout, user_fakes, own_stand_ins(flat, layout, user_fakes, given)))


def _tangent_examples(
    layout: DenseLayout, run: FunctionalRun, mutations: Sequence[LeafMutation], user_fakes: Sequence[torch.Tensor]
) -> TangentExamples | None:
    """What the backward trace's forward example would read of each output and written leaf of this run, where its
    run is this one (Note [Training Through A Joint Graph], bullet "Tangents"): grad on, plain inputs, no alias
    group, no call making a new leaf (held back or not), no input that requires grad written, relaid or swapped (the
    example runs those as clones), no storage swapped or grown, no intermediate base; called under the run's modes."""
    if not torch.is_grad_enabled() or run.swaps.flag_calls or layout.groups or any(layout.trees):
        return None
    grad_leaves = [
        j for fake, js in zip(user_fakes, layout.leaves_of_input, strict=True) if fake.requires_grad for j in js
    ]
    if any(mutations[j].any or mutations[j].version_bumped or mutations[j].swapped for j in grad_leaves):
        return None
    if any(m.storage_changed or m.resized or m.swapped for m in mutations):
        return None
    leaves = pytree.tree_leaves(run.output)
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(run.finals)}
    original = {storage_key(o): DenseIndex(j) for j, o in enumerate(run.originals)}
    if intermediate_bases(leaves, current, original, run.swaps):
        return None
    return TangentExamples(
        outputs=tuple(_tangent_example(o) for o in leaves),
        finals=tuple(_tangent_example(f) if m.any else None for f, m in zip(run.finals, mutations, strict=True)),
        originals=tuple(
            _tangent_example(o) if m.any and leaf_meta(o) == leaf_meta(f) else None
            for o, f, m in zip(run.originals, run.finals, mutations, strict=True)
        ),
    )


def _tangent_example(o: object) -> TangentExample | None:
    """forward_example's answers for plain tensor `o` (static sizes), read as it reads them."""
    if not isinstance(o, torch.Tensor) or is_traceable_subclass(o):
        return None
    value = from_functional(o)
    size, stride = tuple(value.shape), tuple(value.stride())
    if not all(type(v) is int for v in (*size, *stride)):
        return None
    grad = o.requires_grad and not grad_fn_raises(o) and o.grad_fn is not None and differentiable_dtype(o.dtype)
    return TangentExample(grad=grad, size=size, stride=stride, dtype=value.dtype, device=value.device)


def analysis_of_run(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    run: FunctionalRun,
    user_fakes: Sequence[torch.Tensor],
    eager: EagerAsk | None = None,
) -> Analysis:
    """The analysis of `run`, a run of the program as `analyze` makes it for an inference compile without alias
    groups or non-leaf subclass inputs (no clones, no own-base views, nothing replayed), made by a trace in progress
    (Note [Training Through A Joint Graph]: one run); called under the run's fake and functional modes, as `analyze`
    checks its run. The rest, which `analyze` reads after leaving those modes, is read outside every mode of the
    trace (its probes run the program on fakes of their own)."""
    run.swaps.eager = eager
    facts = _CheckedRun(call, flat, layout, run, user_fakes, frozenset(), False, None)
    with outside_current_modes():
        return _analysis(call, flat, layout, user_fakes, False, facts)


class _CheckedRun:
    """What the analysis reads of the program's run under functionalization, checked against what the pipeline
    supports; built under the run's fake and functional modes."""

    def __init__(
        self,
        call: Callable[..., object],
        flat: FlatInputs,
        layout: DenseLayout,
        run: FunctionalRun,
        user_fakes: Sequence[torch.Tensor],
        nonleaf_wrappers: frozenset[int],
        own_base_views: bool,
        own_leaves: frozenset[int] | None,
    ) -> None:
        self.run = run
        check_own_base_run(run.swaps, own_base_views)
        _settle_last_gains(call, run, flat, layout, user_fakes)
        own = _check_requires_grad_calls(call, run, flat, layout, own_leaves)
        check_dirty_inputs(flat, layout, run)
        check_mixed_grad_view_ops(flat, run)
        refuse_stale_view_layouts(  # Note [Stale View Functions]
            [
                flat.leaves[k].path
                for t, k in zip(run.user_tensors, flat.tensor_indices, strict=True)
                if id(t) in run.swaps.stale_view_layouts
            ]
        )
        self.mutations = mutations = leaf_mutations(run, layout, flat.values)
        self.own_leaves = own  # (their group written too: Note [Aliased Inputs In Training])
        refuse_views_read_after_base_set(flat, run.user_tensors, run.swaps)  # Note [Stale View Functions]
        refuse_views_of_assigned_bases_kept(run.swaps, run.user_tensors)  # Note [Stale View Functions]
        refuse_leaf_views_rebuilt_after_a_read(run.swaps, run.user_tensors)  # Note [Stale View Functions]
        owners = {j: k for k, leaves in enumerate(layout.leaves_of_input) for j in leaves}
        refuse_grad_set_onto_moved_source(  # Note [set_ Under Grad]
            [flat.leaves[k].path for k in flat.tensor_indices],
            run.user_tensors,
            run.swaps,
            [
                None if tree is not None or (s := mutations[leaves[0]].set_source) is None else owners[s]
                for tree, leaves in zip(layout.trees, layout.leaves_of_input, strict=True)
            ],
        )
        # Against the wrapper as the program got it: a non-leaf input runs as a clone, whose layout is its own.
        self.wrapper_after = wrapper_after = wrappers_after(layout, run, mutations)
        paths = [flat.leaves[k].path for k in flat.tensor_indices]
        self.inner_wrapper_storage = inner_wrapper_classes(run, paths)  # Note [Wrapper Storage]
        check_relaid_family_member(run.swaps, run.user_tensors, paths, [m is not None for m in wrapper_after])
        grad_paths = [p if t.requires_grad else None for p, t in zip(paths, run.user_tensors, strict=True)]
        check_written_relaid_to_repeats(grad_paths, layout.leaves_of_input, mutations)
        self.replays = replays = tuple(
            inplace_replay(i, t, run, layout, mutations) for i, t in enumerate(run.user_tensors)
        )
        self.data_plans, probes = wrapper_data_plans(flat, run, replays, wrapper_after, user_fakes, nonleaf_wrappers)
        outputs, self.spec, self.num_bases = _analyze_outputs(flat, layout, run, mutations)
        refuse_grad_through_hidden_grow(  # Note [Storage Swaps By Rebinding]
            run.swaps,
            [
                *(("out" + pytree.keystr(kp), o) for kp, o in pytree.tree_flatten_with_path(run.output)[0]),
                *((flat.leaves[k].path, t) for t, k in zip(run.user_tensors, flat.tensor_indices, strict=True)),
            ],
        )
        _check_views_of_inputs_losing_grad(flat, run, outputs)
        check_overlapping_clones(flat, layout, run, mutations, user_fakes, nonleaf_wrappers, outputs, replays)
        check_wrapper_grad_gains(flat, layout, run, mutations, user_fakes)
        check_writes_after_hidden_set(flat, layout, run, mutations, user_fakes)
        check_written_overlapping_views(flat, layout, run)
        outputs, probes = check_data_meta_outputs(flat, run, user_fakes, nonleaf_wrappers, outputs, probes)
        self.outputs, self.probes = outputs, probes = _probe_kernel_layouts(outputs, probes)
        self.wrapper_storage = wrapper_storage_classes(run, layout, outputs)
        self.wrapper_bumped = tuple(
            run.swaps.bump_count(t) if tree is not None else 0
            for tree, t in zip(layout.trees, run.user_tensors, strict=True)
        )
        self.stale = tuple(storage_key(o) in run.swaps.stale_reads for o in run.originals)


def _analysis(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    user_fakes: Sequence[torch.Tensor],
    own_base_views: bool,
    f: _CheckedRun,
) -> Analysis:
    uses = wrapper_uses(run := f.run, layout)
    (kept_by_layout, renewed), orders = _kept_accumulators(call, flat, run), _self_set_orders(call, flat, run)
    changed = [any(f.mutations[j].any or f.mutations[j].version_bumped for j in js) for js in layout.leaves_of_input]
    outputs = views_before_view_sets(run.swaps, flat, run.user_tensors, changed, run.output, f.outputs)
    blocks = input_set_blocks(flat, layout, f.mutations, run.user_tensors, view_set_nodes(run.swaps, run.user_tensors))
    return Analysis(
        mutations=f.mutations,
        wrapper_meta_after=f.wrapper_after,
        wrapper_version_bumps=f.wrapper_bumped,
        marks_view_dirty_in_inference=run.swaps.dirty_view_in_inference is not None,
        requires_grad_after=tuple(bool(t.requires_grad) for t in run.user_tensors),
        requires_grad_set=tuple(id(t) in run.swaps.requires_grad_set for t in run.user_tensors),
        inplace_replay=f.replays,
        write_steps=_write_steps(run, user_fakes, f.replays),
        inplace_view_ops=tuple(id(t) in run.swaps.inplace_views for t in run.user_tensors),
        inplace_self_sets_only=tuple(
            _self_sets_only(t, run.swaps.inplace_views.get(id(t), [])) for t in run.user_tensors
        ),
        stale_view_reads=f.stale,
        views_read_after_own_set=views_read_after_own_set(flat, run.user_tensors, run.swaps),
        read_after_nograd_set=tuple(read_after_nograd_set(run.swaps, t) for t in run.user_tensors),
        last_bumps=tuple(last_bump(t, run) for t in run.user_tensors),
        read_after_set=tuple(id(t) in run.swaps.read_after_set for t in run.user_tensors),
        read_after_hidden_resize=_read_after_hidden_resize(flat, run, renewed),
        self_set=tuple(id(t) in run.swaps.self_sets for t in run.user_tensors),
        self_set_first=tuple(order == "after" for order in orders),
        self_set_mixed=tuple(order == "both" for order in orders),
        set_inside_inference=tuple(id(t) in run.swaps.inference_sets - run.swaps.self_sets for t in run.user_tensors),
        read_after_grad_set=early_set_inputs(run.swaps, flat, run.user_tensors, run.output, f.outputs),
        input_set_blocks=blocks,
        raising_write_blocks=raising_write_blocks(call, flat, layout, f.mutations),
        kept_accumulators=_kept_accumulator_flags(flat, run, kept_by_layout, renewed),
        accumulator_sizes=tuple(assigned_accumulator_size(run.swaps, t) for t in run.user_tensors),
        releaf_sizes=tuple(releaf_size(run.swaps, t) for t in run.user_tensors),
        seen_after_layout_ops=tuple(seen_after_layout_ops(run.swaps, t, run.output) for t in run.user_tensors),
        own_base_views=own_base_views,
        data_assigned=bool(run.swaps.data_sets or run.swaps.wrapper_data),
        views_relaid_with_grad=run.swaps.views_relaid_with_grad,
        grad_set_intermediate_read=_grad_set_intermediate_read(f),
        wrapper_first_write=uses[0],
        wrapper_last_use=uses[1],
        dense_written=uses[2],
        function_taken=uses[3],
        wrapper_data=f.data_plans,
        outputs=input_rooted_bumped_views(counter_keeping_replays(outputs)),  # Note [set_ Under Grad]
        output_spec=f.spec,
        num_intermediate_bases=f.num_bases,
        stride_probes=f.probes,
        wrapper_storage=f.wrapper_storage,
        inner_wrapper_storage=f.inner_wrapper_storage,
        grad_factories=tuple(run.swaps.grad_factories),
        autograd_reads=tuple(run.swaps.autograd_reads),
        function_returns=tuple(run.swaps.function_returns),
        **_new_leaf_facts(run.swaps),
        leaf_marked=tuple(id(t) in run.swaps.leaf_marked for t in run.user_tensors),
        gains_last=tuple(id(t) in run.swaps.gains_last for t in run.user_tensors),
        own_leaf_inputs=tuple(i in f.own_leaves for i in range(len(run.user_tensors))),
        requires_grad_dropped=tuple(id(t) in run.swaps.requires_grad_dropped for t in run.user_tensors),
        gained_before_changes=run.swaps.gained_unchanged(run.user_tensors),
        base_reads=tuple(run.swaps.base_reads),
        creation_meta_reads=tuple(run.swaps.creation_meta_reads),
        grad_fn_type_reads=tuple(run.swaps.grad_fn_type_reads),
        base_flag_reads=tuple(run.swaps.base_flag_reads),
        unbumped_view_reads=tuple(run.swaps.unbumped_view_reads),
        grad_reenabled=tuple(run.swaps.grad_reenabled),
        storage_resizes=storage_resize_plan(run.swaps, layout),
        **_version_counts(run, outputs),
        grad_outputs=any(isinstance(o, torch.Tensor) and o.requires_grad for o in pytree.tree_leaves(run.output)),
        output_input_counters=output_input_counters(run.swaps, run.output, run.user_tensors, flat.tensor_indices),
    )


def _new_leaf_facts(record: SwapRecord) -> dict[str, Any]:
    """`Analysis.new_leaves` and what the trace's nodes for them replay (Note [Training Without A Function]): the
    places of the leaves that are no_grad views or views of an input, and, in a program making one, the calls run
    with grad off whose results the graph detaches."""
    return {
        "new_leaves": tuple(record.new_leaves),
        "no_grad_leaf_views": tuple(sorted(record.no_grad_leaf_views)),
        "inference_new_leaves": tuple(sorted(record.inference_new_leaves)),
        "input_base_leaf_views": tuple(sorted(record.input_base_leaf_views)),
        "no_history_calls": tuple(record.no_history_calls) if any(record.new_leaves) else (),
    }


def _version_counts(run: FunctionalRun, outputs: Any) -> dict[str, Any]:
    """`Analysis.output_versions`, `graded_output_versions`, `base_versions`, `root_versions` (outputs_counted_first),
    and the view inputs' counts at their first read with grad, `rebuilt_before_read`."""
    counts = outputs_counted_first(run.swaps, run.output, (*run.user_tensors, *run.dense), outputs)
    return {
        "output_versions": counts.outputs,
        "graded_output_versions": counts.graded,
        "base_versions": counts.bases,
        "root_versions": counts.roots,
        "rebuilt_before_read": rebuilt_before_read(run.swaps),
    }


def _grad_set_intermediate_read(f: _CheckedRun) -> bool:
    """`Analysis.grad_set_intermediate_read`, from the run's outputs and those set_() under grad."""
    run = f.run
    sets = [info.set_under_grad for info in f.outputs]
    return intermediate_read_after_grad_set(run.swaps, run.user_tensors, run.dense, run.output, sets)


def _write_steps(
    run: FunctionalRun, user_fakes: Sequence[torch.Tensor], replays: Sequence[object]
) -> tuple[int | None, ...]:
    """`Analysis.write_steps`: per tensor input with in-place view ops, how many ran before its last write."""
    return tuple(
        steps_before_last_write(t, u.dim(), run.swaps) if r else None
        for t, u, r in zip(run.user_tensors, user_fakes, replays, strict=True)
    )


def _read_after_hidden_resize(flat: FlatInputs, run: FunctionalRun, renewed: Container[int]) -> tuple[bool, ...]:
    """Per tensor input: read after a resize_() the functional run hides, or its accumulator renewed by one."""
    return tuple(
        id(t) in run.swaps.read_after_hidden_resize or flat.tensor_indices[k] in renewed
        for k, t in enumerate(run.user_tensors)
    )


def _kept_accumulator_flags(
    flat: FlatInputs, run: FunctionalRun, kept_by_layout: Container[int], renewed: Container[int]
) -> tuple[bool, ...]:
    """Per tensor input: whether its gradient accumulator is kept (Note [Gradient Accumulators Of Leaves])."""
    return tuple(
        (id(t) in run.swaps.kept_accumulators and flat.tensor_indices[k] not in renewed)
        or flat.tensor_indices[k] in kept_by_layout
        for k, t in enumerate(run.user_tensors)
    )


def _self_set_orders(call: Callable[..., object], flat: FlatInputs, run: FunctionalRun) -> tuple[str | None, ...]:
    """Per tensor input, where ops with grad read it around its last set_() under no_grad (`self_set_order`); a leaf
    read both before and after, whose reads before made nodes that all died in eager (the functional run keeps every
    result, so the probe asks eager), counts as read after only (Note [Gradient Accumulators Of Leaves])."""
    orders = [self_set_order(run.swaps, t) for t in run.user_tensors]
    both = [flat.tensor_indices[k] for k, order in enumerate(orders) if order == "both"]
    dead = old_accumulators_dead(call, flat, both) if both else frozenset()
    return tuple("after" if flat.tensor_indices[k] in dead else order for k, order in enumerate(orders))


def _kept_accumulators(
    call: Callable[..., object], flat: FlatInputs, run: FunctionalRun
) -> tuple[frozenset[InputIndex], frozenset[InputIndex]]:
    """The inputs whose gradient accumulator eager keeps through a layout change, and those it renews."""
    # See Note [Leaves Laid Out Anew Under no_grad]
    layout_kept = [flat.tensor_indices[k] for k, t in enumerate(run.user_tensors) if id(t) in run.swaps.layout_kept]
    # See Note [Gradient Accumulators Of Leaves]: a `.data =` keeps an accumulator only while a result holds it
    data_kept = [
        flat.tensor_indices[k]
        for k, t in enumerate(run.user_tensors)
        if id(t) in run.swaps.kept_accumulators and id(t) in run.swaps.data_sets
    ]
    probed = eager_accumulator_sizes(call, flat, layout_kept + data_kept) if layout_kept or data_kept else {}
    kept_by_layout = frozenset(i for i in layout_kept if probed is None or _came_with(flat, i) in probed[i])
    # eager's outputs reach an accumulator made after the change: the gradient arrives in the new layout, where the
    # compiled graph computes a result from the leaf in the old one (the size it came with: not a leaf an earlier op
    # made a leaf again)
    computed = [
        flat.tensor_indices[k]
        for k, t in enumerate(run.user_tensors)
        if id(t) in run.swaps.layout_read_after and id(t) not in run.swaps.releafed
    ]
    renewed = frozenset(
        i for i in data_kept + computed if probed is not None and any(s != _came_with(flat, i) for s in probed[i])
    )
    return kept_by_layout, renewed


def _came_with(flat: FlatInputs, index: int) -> tuple[int, ...]:
    """The size flat input `index` came with."""
    return tuple(cast(torch.Tensor, flat.values[index]).shape)


def _made_in_inference_mode(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Is `value` over a storage the program made inside an inference_mode block, though the call is not made under
    inference mode (a view of an inference tensor, one itself in eager, taken outside the block)?"""
    return not torch.is_inference_mode_enabled() and storage_key(value) in run.swaps.inference_made


def _check_inference_storages(infos: list[OutputInfo], leaves: list[object], current: dict[object, DenseIndex]) -> None:
    """The runtime makes an inference-tensor output over a copy of its storage: refused where an input, or an output
    that is no inference tensor, shares that storage in eager (set_() onto it)."""
    tensors = [(i, v) for i, v in zip(infos, leaves, strict=True) if isinstance(v, torch.Tensor)]
    plain = [(i, v) for i, v in tensors if not is_traceable_subclass(v)]
    made = {storage_key(v): i.path for i, v in plain if i.inference}
    for i, v in tensors:  # (a subclass's leaves made inside the block: OutputInfo.inference_leaves)
        if is_traceable_subclass(v) and i.inference_leaves:
            dense = dense_leaves_of(v, i.path)[1]
            made.update((storage_key(dense[k]), i.path) for k in i.inference_leaves)
    others = {storage_key(v) for i, v in plain if not i.inference}
    for i, v in tensors:  # ... and a subclass's leaves made outside the block (`t0.set_(t1)` applied to each leaf)
        if is_traceable_subclass(v) and not i.inference:
            dense = dense_leaves_of(v, i.path)[1]
            others.update(storage_key(d) for k, d in enumerate(dense) if k not in i.inference_leaves)
    for key in made.keys() & (others | current.keys()):
        raise UnsupportedError(
            f"{made[key]}: eager's is an inference tensor (computed inside a torch.inference_mode() block) whose "
            "storage another tensor shares (set_() onto it: an input, or an output made outside the block); the "
            "compiled call makes inference tensors over a copy of their storage. Return a clone, or set_() to one"
        )


_SUBCLASS_VIEW_IN_INFERENCE = (
    "{path}: a tensor subclass view taken inside a torch.inference_mode() block of a subclass made outside it (or a "
    "view of one): eager's wrapper is an inference tensor, with no view relation, over views of the input's inner "
    "tensors, which the compiled call, replaying the view after the block, does not make. Take the view outside "
    "the inference_mode block, or use torch.no_grad() there"
)


def _with_inference_leaves(
    path: str, value: torch.Tensor, info: OutputInfo, run: FunctionalRun, current: dict[object, DenseIndex]
) -> OutputInfo:
    """`info` with what of eager's output is an inference tensor (OutputInfo.inference, .inference_leaves)."""
    subclass = is_traceable_subclass(value)
    dense = dense_leaves_of(value, path)[1] if subclass else [value]
    # the leaves over storage made inside an inference_mode block (the run makes every result inside the block an
    # inference tensor: a view of an input's inner tensor there is one, eager's is not)
    # (not through a wrapper set_() onto such leaves since: eager's target keeps its own dispatch keys)
    swapped = run.swaps.swapped_ids | run.swaps.wrapper_sets.keys()
    via_set = id(value) in swapped or any(id(r.source) in swapped for r in run.swaps.chain(value))
    made = (
        tuple(
            k
            for k, leaf in enumerate(dense)
            if _made_in_inference_mode(leaf, run) or (leaf.is_inference() and storage_key(leaf) not in current)
        )
        if subclass and not torch.is_inference_mode_enabled() and not via_set
        else ()
    )
    if subclass and info.replay is not None:
        _check_replayed_view_of_inference(path, value, run)
    if not _eager_inference_tensor(path, value, run):
        if id(value) in run.swaps.counterless and not torch.is_inference_mode_enabled():
            return replace(info, counterless=True, inference_leaves=made)
        # a wrapper made outside over such leaves (a detach() after the block): its leaves only
        return replace(info, inference_leaves=made) if made else info
    check_inference_output(path, value)
    if subclass and not made:  # a wrapper made inside the block over views of an input's inner tensors
        raise UnsupportedError(_SUBCLASS_VIEW_IN_INFERENCE.format(path=path))
    counted = not subclass and id(value) in run.swaps.counted_inference
    return replace(info, inference=True, inference_leaves=made if subclass else (0,), inference_counter=counted)


def _check_replayed_view_of_inference(path: str, value: torch.Tensor, run: FunctionalRun) -> None:
    """A subclass output the runtime replays as a view, eager's taken outside an inference_mode block of a subclass
    that was an inference tensor then (a `.data =` made it a normal one since): eager's view of an inference tensor
    keeps no view relation, is no inference tensor itself over inference inner tensors, which a replayed view is not."""
    if torch.is_inference_mode_enabled() or value.is_inference():
        return
    if any(r.source_inference and not r.source.is_inference() for r in run.swaps.chain(value)):
        raise UnsupportedError(
            f"{path}: a tensor subclass view, taken after a torch.inference_mode() block, of a subclass computed "
            "inside it, which a `.data =` then gave the data of a normal tensor: eager's view is no view (a view of "
            "an inference tensor keeps no view relation) over inference inner tensors, while the compiled call replays "
            "it as a view of that subclass. Take the view inside the block, or return a clone"
        )


def _eager_inference_tensor(path: str, value: torch.Tensor, run: FunctionalRun) -> bool:
    """Is eager's output an inference tensor that the runtime, outside inference mode, would not make one: computed
    inside an inference_mode block, or a view of such a tensor (one too, taken after the block as well), not a tensor
    made outside that `.data =` or set_() put over such a storage (nor a view of one taken since)?"""
    if torch.is_inference_mode_enabled():
        return False  # (the runtime runs inside it too)
    if is_traceable_subclass(value):
        made: torch.Tensor = value
        for record in run.swaps.chain(value):
            if made.is_inference() and not record.source.is_inference():
                raise UnsupportedError(_SUBCLASS_VIEW_IN_INFERENCE.format(path=path))
            made = record.source
        if not value.is_inference() and run.swaps.view_root(value, through_swaps=True).is_inference():
            raise UnsupportedError(
                f"{path}: a tensor subclass view, taken after a torch.inference_mode() block, of a subclass "
                "computed inside it: eager's inner tensors are inference tensors, its wrapper is not, which the "
                "compiled call cannot rebuild. Take the view inside the block, or return a clone"
            )
        return value.is_inference()
    swapped = run.swaps.swapped_ids
    for t in (value, *(r.source for r in run.swaps.chain(value))):
        # (`.data =` takes the new data's dispatch keys, and with them whether it is an inference tensor)
        if id(t) in run.swaps.inference_tensors and id(t) in swapped and id(t) not in run.swaps.swapped_by_data:
            raise UnsupportedError(
                f"{path}: eager's is an inference tensor (made inside a torch.inference_mode() block, or a view of "
                "one) that set_() moved onto another storage: it stays an inference tensor over that storage, which "
                "the compiled call cannot make. Return a clone made inside the block"
            )
    if id(value) in run.swaps.swapped_by_data:  # (the new data's dispatch keys)
        return run.swaps.data_inference.get(id(value), False)
    if not _made_in_inference_mode(value, run):
        return False
    # (a view taken before its source was moved stays what it was made: eager's view of an inference tensor keeps no
    # view relation, so a later `.data =` or set_() of the source does not reach it)
    first = run.swaps.first_swaps
    moved_before = any(id(r.source) in swapped and first.get(id(r.source), 0) < r.seq for r in run.swaps.chain(value))
    return id(value) not in swapped and not moved_before


def _settle_last_gains(
    call: Callable[..., object],
    run: FunctionalRun,
    flat: FlatInputs,
    layout: DenseLayout,
    user_fakes: Sequence[torch.Tensor],
) -> None:
    """The inputs made to require grad after an op with grad read their storage, which nothing of the program writes
    after, nor reads with grad where eager's histories would show it (SwapRecord.late_gains, read_after_gain): they
    gain the flag last, once the compiled call is done (SwapRecord.gains_last), neither requiring grad from the start
    (an analysis whose fake does, for training, keeps its refusal) nor marked in the graph (Note [Grad Mode And
    Autograd Reads])."""
    record = run.swaps
    passed = [flat.values[k] for k in flat.tensor_indices]
    settled: list[tuple[int, int, int]] = []  # per input that gains last: its position, stand-in's id(), place
    for key, (stand_in, place) in record.late_gains.items():
        i = next((i for i, t in enumerate(run.user_tensors) if id(t) == stand_in), None)
        if i is None or stand_in in record.touched_after_gain or stand_in in record.requires_grad_dropped:
            continue
        if _grown_view_returned(run, key):
            continue
        real = passed[i]
        if not isinstance(real, torch.Tensor) or real.requires_grad or user_fakes[i].requires_grad:
            continue
        if sum(r is real for r in passed) > 1 or _traced_apart(run, layout, passed, i):
            continue
        settled.append((i, stand_in, place))
    read = [flat.tensor_indices[i] for i, stand_in, _ in settled if stand_in in record.read_after_gain]
    if read and not gain_last_unobserved(call, flat, read):
        settled = [s for s in settled if s[1] not in record.read_after_gain]
    for _, stand_in, place in settled:
        record.gains_last.add(stand_in)
        record.gained_after_read.discard(stand_in)
        if stand_in in record.leaf_marked:  # (no leaf of the graph's either)
            record.leaf_marked.discard(stand_in)
            record.new_leaves[place] = False


def _grown_view_returned(run: FunctionalRun, key: object) -> bool:
    """Does the program return a tensor, other than an input itself, over the storage `key` where a resize_() grew
    it (or over the storage it grew into)? Eager's view of the input over it, taken before the flag, rebuilds its
    history from the input once that requires grad (its counter moved since), where the runtime's, replayed on the
    grown input after the graph ran, has none: the flag does not come last there. A view the program took after the
    last write (not stale at the end) has none in eager either: it does."""
    grown_from = run.swaps.grown_from
    related = {key, grown_from.get(key), *(new for new, old in grown_from.items() if old == key)}
    if not grown_from or related == {key, None}:
        return False
    inputs = {id(t) for t in run.user_tensors}
    return any(
        isinstance(o, torch.Tensor)
        and id(o) not in inputs
        and storage_key(o) in related
        and not _fresh_view(o, run, related)
        for o in pytree.tree_leaves(run.output)
    )


def _fresh_view(t: torch.Tensor, run: FunctionalRun, keys: set[object]) -> bool:
    """Is `t` a view the program took that no write, resize_() or in-place view op over the storages `keys` (one
    that resize_() grew and the one it grew into) followed, itself left as it was taken?"""
    record = run.swaps
    made = record.views.get(id(t))
    if made is None or id(t) in record.inplace_views or id(t) in record.grown_ids:
        return False
    family = record.family_of(t)
    unbumped = max(record.own_last_bump.get((k, family), 0) for k in keys) <= history_set_at(record, t)
    return unbumped and record.bump_count(t) == made.bumps


def _traced_apart(run: FunctionalRun, layout: DenseLayout, passed: Sequence[object], i: int) -> bool:
    """Does tensor input `i` share its storage with another passed plain tensor whose stand-in the run began over
    another storage (an alias group traced apart, Note [Synthetic Bases])? Its reads are then none of input `i`'s.
    (As the run began: a stand-in the program set_() to another storage since is still of its group.)"""
    real, mine = passed[i], _original_storage(run, layout, i)
    assert isinstance(real, torch.Tensor), "BUG: a tensor input that is no tensor"
    for j, other in enumerate(passed):
        if j == i or not isinstance(other, torch.Tensor) or is_traceable_subclass(other):
            continue
        if storage_key(other) == storage_key(real) and _original_storage(run, layout, j) != mine:
            return True
    return False


def _original_storage(run: FunctionalRun, layout: DenseLayout, i: int) -> object:
    """The storage of plain tensor input `i`'s stand-in as the run began."""
    (j,) = layout.leaves_of_input[i]
    return storage_key(run.originals[j])


def _changed_inputs(run: FunctionalRun, layout: DenseLayout, flat: FlatInputs) -> frozenset[int]:
    """The tensor inputs whose storage, layout or version counter the program changes (a write, an in-place view op,
    set_(), `.data =`, resize_())."""
    mutations = leaf_mutations(run, layout, flat.values)
    return frozenset(
        i
        for i, leaves in enumerate(layout.leaves_of_input)
        if any(mutations[j].any or mutations[j].version_bumped for j in leaves)
    )


def _check_requires_grad_calls(
    call: Callable[..., object],
    run: FunctionalRun,
    flat: FlatInputs,
    layout: DenseLayout,
    own_leaves: frozenset[int] | None,
) -> frozenset[int]:
    """Refuses the inputs made to require grad after a read with grad, but the first analysis's (`own_leaves`
    None) leaves of their own beside an alias (functional_run.own_leaf_inputs), which it returns; a later analysis
    returns `own_leaves`."""
    gained_after = run.swaps.gained_after_read
    own = frozenset() if own_leaves is None else own_leaves
    # (where what the program computed from them before has no history the caller can see, in eager as with the
    # flag set from the start, the compiled call's setting it first changes nothing: Note [Grad Mode And Autograd Reads])
    positions = [k for t, k in zip(run.user_tensors, flat.tensor_indices, strict=True) if id(t) in gained_after]
    observed = bool(positions) and not gain_unobserved(call, flat, positions)
    if own_leaves is None:
        # (and those flagged after an x.set_(x) with grad over their family, which eager records no node of: the
        # run's stand-in requires no grad there either, Note [Grad Mode And Autograd Reads])
        gained = [
            i
            for i, t in enumerate(run.user_tensors)
            if (observed and id(t) in gained_after) or id(t) in run.swaps.self_set_before_gain
        ]
        if gained:
            flagged = [i for i, t in enumerate(run.user_tensors) if id(t) in run.swaps.requires_grad_gained]
            own = own_leaf_inputs(flat, layout, gained, flagged, lambda: _changed_inputs(run, layout, flat))
    if observed:
        refused = {id(t) for i, t in enumerate(run.user_tensors) if id(t) in gained_after and i not in own}
        check_gained_after_read(refused, run.user_tensors, flat)
    # (requires_grad_() on a view input whose views eager gives no flag, read with grad: refused in the run,
    # grad_scope.check_flagless_view_reads)
    for t, k in zip(run.user_tensors, flat.tensor_indices, strict=True):
        real = flat.values[k]
        dropped = id(t) in run.swaps.requires_grad_dropped and id(t) not in run.swaps.requires_grad_set
        if dropped and t.requires_grad and isinstance(real, torch.Tensor) and real.is_leaf and real.requires_grad:
            raise UnsupportedError(
                f"{flat.leaves[k].path}: the program turns requires_grad off for this input, a leaf that requires "
                "grad, then writes into it a value that requires grad: eager's input becomes a non-leaf with that "
                "write's history, while the compiled call's write reaches a leaf that still requires grad. Write "
                "into a clone, or turn requires_grad off outside the compiled function"
            )
        # (results computed from it before the drop have its history in both: Note [Grad Mode And Autograd Reads])
        regained_read = id(t) in run.swaps.read_after_regain and t.requires_grad
        if regained_read and isinstance(real, torch.Tensor) and real.requires_grad and _graded_result(run):
            raise UnsupportedError(
                f"{flat.leaves[k].path}: the program turns requires_grad off for this input, which requires grad, "
                "and back on, then computes from it with grad mode on, and returns a tensor that requires grad (or "
                "writes one into a tensor): eager's input is one leaf throughout, and a result computed from it after "
                "the flag came back has history to it, while the compiled call's gradient does not reach it. Compute "
                "from the input before turning requires_grad off, leave it on, or change it outside the compiled "
                "function"
            )
    return own


def _graded_result(run: FunctionalRun) -> bool:
    """Does the program return a tensor that requires grad, or write a value that requires grad with grad on into a
    tensor (an input, or a view of one, may hold it), other than through `.data`?"""
    swaps = run.swaps
    hidden = swaps.data_aliases | swaps.data_views
    graded_write = any(i not in hidden for i in swaps.grad_written)
    return graded_write or any(isinstance(o, torch.Tensor) and o.requires_grad for o in pytree.tree_leaves(run.output))


def _analyze_outputs(
    flat: FlatInputs, layout: DenseLayout, run: FunctionalRun, mutations: tuple[LeafMutation, ...]
) -> tuple[tuple[OutputInfo, ...], pytree.TreeSpec, int]:
    leaves, spec = pytree.tree_flatten(run.output)
    paths = [("out" + pytree.keystr(kp)) for kp, _ in pytree.tree_flatten_with_path(run.output)[0]]
    input_by_id = {id(t): idx for t, idx in zip(run.user_tensors, flat.tensor_indices, strict=True)}
    repeated = frozenset(v.index for v in flat.values if isinstance(v, SameTensorAs))
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(run.finals)}
    original = {storage_key(o): DenseIndex(j) for j, o in enumerate(run.originals)}
    bases = intermediate_bases(leaves, current, original, run.swaps)
    owners = {j: run.user_tensors[i] for i, of_input in enumerate(layout.leaves_of_input) for j in of_input}
    dense_names = tuple((leaf.path, owners[DenseIndex(j)]) for j, leaf in enumerate(layout.leaves))
    set_targets = outputs_set_onto_inputs(leaves, run, (current, original), mutations, (paths, dense_names))
    # (a call under no_grad: analyze; one with grad makes new leaves: Note [Training Without A Function])
    own = run.swaps.requires_grad_gained | run.swaps.own_flags
    gained = not run.swaps.grad_at_start and bool(own - input_by_id.keys())
    infos: list[OutputInfo] = []
    graph_count = 0
    first_seen: dict[int, int] = {}
    untouched = _untouched_inputs(flat, layout, run, mutations)
    output_ids: dict[int, int] = {}  # id() of each tensor output -> its first OutputIndex (views replay from them)
    for k, value in enumerate(leaves):
        if isinstance(value, torch.Tensor) and id(value) not in input_by_id:
            output_ids.setdefault(id(value), k)
    for path, value in zip(paths, leaves, strict=True):
        if isinstance(value, torch.Tensor) and id(value) in first_seen and id(value) not in input_by_id:
            # `return t, t`: eager returns one object twice; so do we.
            earlier = first_seen[id(value)]
            infos.append(replace(infos[earlier], path=path, kind=OutputKind.SAME_AS, input_index=InputIndex(earlier)))
            continue
        grad_set = (
            isinstance(value, torch.Tensor)
            and id(value) not in input_by_id
            and set_under_grad(path, value, run, leaves)
        )
        others = {i: k for i, k in output_ids.items() if i != id(value)}
        maps = (input_by_id, current, original, bases, others, set_targets)
        info, graph_count = _output_info(path, value, run, maps, graph_count, repeated)
        if isinstance(value, torch.Tensor):
            first_seen[id(value)] = len(infos)
        if grad_set:
            info = replace(
                info,
                set_under_grad=True,
                set_under_grad_view=run.swaps.is_view(value),
                grad_set_base=grad_set_base(path, value, run, bases),
                set_blocks=tuple(
                    flat.tensor_indices[k] for k in sorted(inputs_behind_raising_nodes(value, run.user_tensors))
                ),
            )
        check_input_view_rebuilt(value, info, run)
        if gained and isinstance(value, torch.Tensor) and _flag_of_its_own(value, info, run):
            _check_flag_given_late(path, value, info, run)
            info = replace(info, gains_grad=True)  # Note [Grad Mode And Autograd Reads]
        elif isinstance(value, torch.Tensor) and _graph_leaf_view(value, info, run, untouched):
            graph_leaf = replace(info.leaves[0], source=LeafSource.GRAPH, index=graph_count)
            info, graph_count = replace(info, replay=None, leaves=(graph_leaf,)), graph_count + 1
        elif _new_leaf_view(value, info, run):  # Note [Training Without A Function]
            info = replace(info, gains_grad=True)
        if isinstance(value, torch.Tensor):
            check_view_taken_before_grad(path, value, run.swaps, set(input_by_id), info.gains_grad)
        if info.kind is OutputKind.TENSOR and isinstance(value, torch.Tensor):
            info = replace(_with_inference_leaves(path, value, info, run, current), parameter=made_parameter(value))
            info = replace(info, flag_kept=_flag_kept(value, run))
        infos.append(info)
    infos = function_slots(detached_chains_without_grad(infos), leaves)
    _check_inference_storages(infos, leaves, current)
    _check_views_of_fresh(infos, leaves, bases)
    check_graph_leaf_shared_under_grad(infos, leaves, current.keys() | original.keys())
    check_bumped_views(infos, leaves)
    check_late_bump_order(infos, leaves, run)
    check_rebuilt_view_relation(infos, leaves, run)
    check_stale_subclass_outputs(infos, leaves, run)
    check_set_under_grad(infos, flat, run.user_tensors)
    check_retained_outputs(paths, leaves, run.swaps)
    return tuple(infos), spec, len({b for b, _ in bases.values()})


def check_inference_output(path: str, value: torch.Tensor) -> None:
    """An output eager computed inside a torch.inference_mode() block, or a view of one, is an inference tensor, with no
    view relation; the runtime makes it so (Note [Grad Mode And Autograd Reads]), a leaf made to require grad there
    too (given the flag inside inference_mode: OutputInfo.gains_grad), though not one with history."""
    if value.grad_fn is not None:
        raise UnsupportedError(
            f"{path}: eager's is an inference tensor (computed inside a torch.inference_mode() block) and it has "
            "autograd history (a custom autograd.Function applied there with grad on records one); the compiled call "
            "cannot make such an inference tensor. Compute it outside the inference_mode block, or under "
            "torch.no_grad()"
        )


def _check_views_of_fresh(
    infos: list[OutputInfo], leaves: list[object], bases: dict[object, tuple[int, torch.Tensor]]
) -> None:
    users: dict[int, list[str]] = {}
    for info, value in zip(infos, leaves, strict=True):
        if info.kind is not OutputKind.TENSOR or not isinstance(value, torch.Tensor):
            continue
        owned = {bases[k][0] for k in (storage_key(d) for d in dense_leaves_of(value, info.path)[1]) if k in bases}
        for b in owned:
            users.setdefault(b, []).append(info.path)
    # views a custom Function made of one intermediate the graph returns are rebuilt over that very base (Note
    # [Custom Functions]), as eager's share it
    over_base = {i.path for i in infos if i.tree is None and i.leaves and i.leaves[0].function_view_base is not None}
    for info in infos:
        if not info.view_of_fresh:
            continue
        shared = sorted({p for ps in users.values() if info.path in ps for p in ps} - {info.path})
        if info.path in over_base:
            shared = [p for p in shared if p not in over_base]
        if shared:
            raise UnsupportedError(
                f"{info.path} is a view of an intermediate tensor subclass that requires grad, and {', '.join(shared)} "
                "shares storage with it; in training outputs that alias one intermediate subclass are not supported "
                "yet. Return clones (.clone()) of all but one"
            )


# See Note [Views That Raise After A Bump]
_BUMPED_SOURCES = (ReplaySource.BASE, ReplaySource.WRAPPER, ReplaySource.OUTPUT, ReplaySource.INPUT)


# What an output's leaves are looked up in: input positions by id(), the dense inputs by their storage at the end and
# as passed, the intermediate bases, the earlier outputs by id(), the inputs set_() onto an output by its id()
_OutputMaps = tuple[
    dict[int, InputIndex],
    dict[object, DenseIndex],
    dict[object, DenseIndex],
    dict[object, tuple[int, torch.Tensor]],
    dict[int, int],
    dict[int, DenseIndex],
]


def _input_alias_leaf(
    path: str,
    leaf: torch.Tensor,
    in_subclass: bool,
    run: FunctionalRun,
    maps: _OutputMaps,
    is_view: Callable[[torch.Tensor], bool],
) -> tuple[OutputLeaf, bool]:
    """An output leaf over an input's storage at the end of the program, and whether it takes its layout from the
    graph (Note [Strides The Kernels Choose])."""
    input_by_id, current, original, bases, earlier, _ = maps
    key = storage_key(leaf)
    meta = leaf_meta(leaf)
    # (inputs sharing the storage at the end: the one that is eager's `._base`, where one is: after `x1.set_(x0)`, a
    # view of x0 has x1 as its base; or the input the program took it from, through tensors `.data =` or set_() moved
    # since)
    base = leaf._base if not in_subclass and leaf._is_view() else None
    root = run.swaps.view_root(leaf, through_swaps=True) if not in_subclass else None
    at = next(
        (DenseIndex(j) for j, f in enumerate(run.finals) if f is base and storage_key(f) == key),
        next((DenseIndex(j) for j, f in enumerate(run.finals) if f is root and storage_key(f) == key), current[key]),
    )
    _check_within_swapped_input(path, leaf, run, at)
    regrad = not in_subclass and run.swaps.grad_set_view_of(leaf, run.user_tensors)
    if not in_subclass and not regrad:
        check_grad_view_of_moved_input(path, leaf, run.finals)
    hidden = hidden_base(leaf, run, at, input_by_id, earlier, original.get(key))
    meta = alias_meta(leaf, run, at, original.get(key))  # Note [as_strided On Inputs]
    input_layout = key not in original and meta == leaf_meta(run.finals[at])
    foreign = None if in_subclass else foreign_base(leaf, run.finals, set(original), bases, regrad)
    steps = None
    if key not in original and not input_layout and foreign is None:  # Note [Strides The Kernels Choose]
        steps = set_source_steps(leaf, run, at, None if hidden is None else leaf._base)
    alias = OutputLeaf(
        source=LeafSource.INPUT_ALIAS,
        index=at,
        meta=meta,
        is_view=is_view(leaf),
        same_object=leaf is run.finals[at],
        input_layout=input_layout,
        hidden_base=hidden,
        foreign_base=foreign,
        foreign_grad=regrad,
        hidden_key=None if hidden is None else id(leaf._base),
        hidden_shares_counter=hidden is not None and hidden_base_shares_counter(leaf, run, at),
        set_steps=steps,
        from_base=not in_subclass
        and hidden is None
        and foreign is None
        and is_view(leaf)
        and _stale_at_end(leaf, run)
        and _reads_as_its_base(leaf),
        bits=_bits_apart(leaf, run.finals[at]),
    )
    return alias, key not in original and not input_layout and steps is None  # Note [Strides The Kernels Choose]


def _stale_at_end(view: torch.Tensor, run: FunctionalRun) -> bool:
    """Is `view`, a view the program took, stale when the program returns: its counter moved since autograd last set
    its history (Note [Views Of Inputs Whose History Raises])?"""
    return id(view) in run.swaps.views and last_bump(view, run) > history_set_at(run.swaps, view)


def _reads_as_its_base(view: torch.Tensor) -> bool:
    """Does as_strided() of `view`'s `._base` read its elements: the same dtype and conjugate and negative bits? Not
    an `.imag` or view(dtype) of a complex base: the view is then rebuilt from the input it was taken of."""
    base = view._base
    return (
        base is None or base.dtype == view.dtype and (base.is_conj(), base.is_neg()) == (view.is_conj(), view.is_neg())
    )


def _made_as_inference_tensor(t: torch.Tensor, run: FunctionalRun) -> bool:
    """Was `t` made as a view of an inference tensor (one itself, with no view relation) in a call made outside
    inference mode?"""
    inference = run.swaps.inference_made
    return not torch.is_inference_mode_enabled() and any(storage_key(r.source) in inference for r in run.swaps.chain(t))


def _history_of_its_own(leaf: torch.Tensor, base: torch.Tensor, run: FunctionalRun) -> bool:
    """Does a view requiring grad of an intermediate base that does not have history of its own, which a view of that
    base rebuilt at run time would lack? Not one the program made require grad under no_grad (requires_grad_()):
    the runtime makes it so once built (Note [Grad Mode And Autograd Reads])."""
    made_to = id(leaf) in run.swaps.requires_grad_set and not torch.is_grad_enabled()
    return leaf.requires_grad and not base.requires_grad and not made_to


def _output_leaves(
    path: str,
    value: torch.Tensor,
    parts: tuple[SubclassNode | None, list[torch.Tensor], bool],
    run: FunctionalRun,
    maps: _OutputMaps,
    graph_count: int,
) -> tuple[list[OutputLeaf], int, DenseIndex | None, list[DenseIndex]]:
    """One OutputLeaf per dense leaf of output `value` (`parts`: its subclass tree, dense leaves, and whether it needs
    the program's autograd history): computed by the graph, an alias of an input (over its storage at the end, or the
    one it had before a set_()), or of an intermediate base. Also the next graph output index, the input whose storage
    before set_() a leaf views, and the inputs whose layout a leaf takes from the graph (Note [Strides The Kernels
    Choose])."""
    tree, dense, fresh = parts
    input_by_id, current, original, bases, earlier, set_targets = maps
    out_leaves = []
    # an inner leaf made by the subclass's own dispatch is no autograd view (Note [Autograd Sees The Wrapper]), a
    # plain output such a dispatch made neither (a DTensor split piece's inner tensor, which to_local() returns as is
    # under no_grad), nor is one made as an inference tensor, which keeps no view relation after a `.data =` either
    viewed = run.swaps.is_autograd_view

    def is_view(t: torch.Tensor) -> bool:
        return viewed(t) and not _made_as_inference_tensor(t, run)

    replaced: DenseIndex | None = None  # an input whose storage before set_() an output leaf views
    own_layout: list[DenseIndex] = []
    for leaf in dense:
        key = storage_key(leaf)
        meta = leaf_meta(leaf)
        if fresh:
            out_leaves.append(_fresh_leaf(path, leaf, tree is None, run, (current, original, bases), graph_count))
            graph_count += 1
            continue
        if id(value) in set_targets:
            out_leaves.append(
                OutputLeaf(
                    source=LeafSource.GRAPH,
                    index=graph_count,
                    meta=meta,
                    is_view=False,
                    storage_of=set_targets[id(value)],
                )
            )
            graph_count += 1
            continue
        if key in current:
            alias, own = _input_alias_leaf(path, leaf, tree is not None, run, maps, is_view)
            out_leaves.append(alias)
            own_layout += [DenseIndex(alias.index)] if own else []
        elif key in original:
            # Only a view of the input made before the epilogue swaps it can reach that storage (below).
            replaced = replaced if replaced is not None else original[key]
            out_leaves.append(
                OutputLeaf(
                    source=LeafSource.INPUT_ALIAS,
                    index=original[key],
                    meta=meta,
                    is_view=is_view(leaf),
                    bits=_bits_apart(leaf, run.originals[original[key]]),
                )
            )
        elif key in bases and not _history_of_its_own(leaf, base := bases[key][1], run):
            out_leaves.append(
                OutputLeaf(
                    source=LeafSource.INTERMEDIATE_ALIAS,
                    index=bases[key][0],
                    meta=meta,
                    is_view=is_view(leaf),
                    same_object=base is leaf,
                    # the base or set_() to it (not an inference tensor's view_as(): Note [Strides The Kernels Choose])
                    base_layout=meta == leaf_meta(base) and (leaf is base or id(leaf) in run.swaps.swapped_ids),
                    foreign_base=None if tree is not None else foreign_base(leaf, run.finals, set(original), bases),
                    bits=_bits_apart(leaf, bases[key][1]),
                )
            )
        else:
            out_leaves.append(_graph_leaf(leaf, tree is None, bases, graph_count, run))
            graph_count += 1
    return out_leaves, graph_count, replaced, own_layout


def _bits_apart(leaf: torch.Tensor, source: torch.Tensor) -> tuple[bool, bool] | None:
    """OutputLeaf.bits: `leaf`'s conjugate and negative bits where they are not those of `source`, the tensor it is
    regenerated from (`x.conj().set_(t)`: t, over x's storage, reads it without x's bit); else None."""
    bits = (leaf.is_conj(), leaf.is_neg())
    return bits if bits != (source.is_conj(), source.is_neg()) else None


def _graph_leaf(
    leaf: torch.Tensor, plain: bool, bases: dict[object, tuple[int, torch.Tensor]], index: int, run: FunctionalRun
) -> OutputLeaf:
    """A leaf computed by the graph (graph output `index`), or, where eager's is a view the program's custom Function
    made of an intermediate, returned from the compiled Function as one (Note [Custom Functions])."""
    made_view = plain and leaf.requires_grad and made_as_function_view(leaf, run)
    return OutputLeaf(
        source=LeafSource.GRAPH,
        index=index,
        meta=leaf_meta(leaf),
        is_view=False,
        function_view=made_view,
        function_view_base=_function_view_base(leaf, bases) if made_view else None,
    )


def _function_view_base(leaf: torch.Tensor, bases: dict[object, tuple[int, torch.Tensor]]) -> int | None:
    """The intermediate base (its number) that is eager's `._base` of `leaf`, a view the program's custom Function
    made of an intermediate, if the graph returns that very tensor (Note [Custom Functions])."""
    found = bases.get(storage_key(leaf))
    return found[0] if found is not None and leaf._base is found[1] else None


def _fresh_leaf(
    path: str,
    leaf: torch.Tensor,
    plain: bool,
    run: FunctionalRun,
    maps: tuple[dict[object, DenseIndex], dict[object, DenseIndex], dict[object, tuple[int, torch.Tensor]]],
    index: int,
) -> OutputLeaf:
    """A leaf of an output that needs the program's autograd history: graph output `index` (`maps`: the dense inputs
    by their storage at the end and as passed, the intermediate bases)."""
    (current, original, bases), key, meta = maps, storage_key(leaf), leaf_meta(leaf)
    same = current.get(key) if key in original else None  # the input's own storage, not one set_() gave it
    # an alias of an input's inner tensor that the subclass's dispatch made (function_views.holds_input_leaves): no
    # view in eager, whatever its metadata
    alias = not plain and same is not None and leaf is not run.finals[same]
    view = same is not None and not alias and leaf_meta(run.finals[same]) != meta  # a view of it: returned as one
    # a view the program's Function made of an intermediate (DTensor.to_local of a computed DTensor)
    made_view = plain and made_as_function_view(leaf, run)  # (an input moved onto it: check_rebuilt_view_relation)
    return OutputLeaf(
        source=LeafSource.GRAPH,
        index=index,
        meta=meta,
        is_view=view,
        passthrough=same,
        passthrough_alias=alias,
        passthrough_base=dispatch_alias_base(path, leaf, run.finals[same], run)
        if view and plain and same is not None
        else None,
        function_view=made_view,
        function_view_base=_function_view_base(leaf, bases) if made_view else None,
    )


def _check_view_bases(
    path: str,
    value: torch.Tensor,
    parts: tuple[SubclassNode | None, list[torch.Tensor], list[DenseIndex]],
    replay: Replay | None,
    run: FunctionalRun,
    maps: tuple[
        dict[object, DenseIndex], dict[object, DenseIndex], dict[object, tuple[int, torch.Tensor]], dict[int, int]
    ],
) -> None:
    """Refuse an output view whose base eager keeps and its rebuild cannot: over a set_() target's empty storage, a
    view of a grad intermediate moved since, a view of another output `.data =` or set_() moved after the view
    (`parts`: its subclass tree, dense leaves, inputs whose layout it takes)."""
    tree, dense, own_layout = parts
    current, original, bases, earlier = maps
    # (a replayed view takes its strides from the real input, unless set_() to contents built from its leaves)
    for j in own_layout if replay is None or replay.then_set else ():
        _check_empty_set_target(path, run, j)
    for leaf in dense if tree is None else ():  # (after _check_replay: its refusals name their own rules)
        check_moved_view_of_grad_intermediate(path, leaf, run.finals, set(current) | set(original), set(bases))
    base = value._base if tree is None and value._is_view() else None
    set_since = base is not None and set_after_viewed(value, base, run)
    moved = base is not None and (id(base) in run.swaps.swapped_by_data or set_since)
    if tree is not None:  # a subclass view of an output set_() since
        base = viewed_before_set(value, run, earlier)
        moved = base is not None
    if base is not None and moved and id(base) in earlier:
        shared = replay is not None and any(token == id(base) for _, token in replay.marks)
        if replay is None or (replay.source is not ReplaySource.OUTPUT and not shared):
            # eager's `._base` is that output, which `.data =` or set_() moved since
            what = "that the program set_()" if tree is not None or set_since else "whose `.data` the program assigned"
            raise UnsupportedError(
                f"{path} is a view of another output {what} after taking the view; its `._base` cannot be made that "
                "output. Return a clone"
            )


def _replay_counters(
    path: str,
    value: torch.Tensor,
    replay: Replay | None,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    function_view: bool,
) -> tuple[Replay | None, bool]:
    """`replay` with the sequence points its view is built at, against the program's writes (Note [Views That Raise
    After A Bump]), and whether eager's grad_fn of `value` raises; refused where it raises and the replay cannot,
    unless it is a view the program's Function made, built through FunctionOutputs and bumped (FunctionSlot.bumped)."""
    if replay is not None and replay.before_epilogue:
        refuse_early_view_after_grad_set(path, value, replay, run, input_by_id)
        replay = counter_at_end(replace(replay, made=made_seq(value, run)), value, run, input_by_id)
    elif replay is not None and replay.source is ReplaySource.INPUT and torch.is_grad_enabled():
        replay = replace(replay, split_made=split_seq(value, run, input_by_id))
    if replay is not None and not replay.before_epilogue:
        replay = replace(replay, made=late_build_seq(value, replay, run))  # Note [Views That Raise After A Bump]
    rebuilt = replay is not None and (replay.before_epilogue or (replay.then_set and not replay.set_by_data))
    # (under no_grad too, and as eager's where the run's root of the storage does not require grad as eager's does:
    # Note [Views That Raise After A Bump])
    raises = (
        grad_fn_raises(value)
        or input_view_raises_in_eager(value, replay, run, input_by_id)
        or regenerated_view_raises_in_eager(value, replay, run)
    )
    if raises and replay is not None and replay.before_epilogue and not replay.late_steps:
        replay = replace(replay, eager_raises=True)  # (EpiloguePlan.viewed_wrappers)
    if raises and replay is not None and not replay.before_epilogue and replay.runtime_set and value._is_view():
        # A view the runtime itself set_()s (a subclass view of an input an in-place view op changed, rebuilt
        # over its storage: Note [Output Regeneration]) keeps a grad_fn that answers: its counter is
        # advanced after it is built instead (Note [Views That Raise After A Bump])
        rebuilt = False
    # (and a view with no history of a tensor the program wrote since, whose grad_fn eager regenerates once its base
    # requires grad)
    stale = replay is not None and not raises and stale_intermediate_view(value, replay, run)
    if (raises or stale) and not rebuilt and replay is not None and replay.source in _BUMPED_SOURCES:
        # Note [Views That Raise After A Bump]
        replay = replace(replay, bump_after=True, stale_view=replay.stale_view or stale)
    elif raises and not rebuilt and (torch.is_grad_enabled() or replay is None) and not function_view:
        # Only a view replayed exactly (then rebuilt before the epilogue writes it, or its counter advanced), or one
        # whose wrapper the runtime set_()s (Note [Wrapper Storage]), gets such a grad_fn at run time
        # (a no_grad view of an intermediate or swapped tensor would come back with none; one rebuilt by
        # as_strided after the epilogue, under no_grad too, with one that answers).
        raise UnsupportedError(
            f"{path}: its grad_fn raises in eager (a view made under no_grad, or one of the views of a multi-output "
            "op, whose base the program then wrote or set_()); returned, such a view is supported only where its "
            "view chain can be replayed. Return a clone made before the write"
        )
    return replay, raises


def _check_history_kept(
    path: str,
    value: torch.Tensor,
    parts: tuple[SubclassNode | None, Replay | None, tuple[OutputLeaf, ...]],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    repeated: frozenset[int],
) -> None:
    """Refuse an output whose autograd history (or the raising of its grad_fn) eager keeps and its rebuild cannot:
    a view of an input passed twice and set_(), an alias of an input with a history of its own, a subclass view taken
    between in-place view ops on its input (`parts`: its subclass tree, replay and leaves)."""
    tree, replay, out_leaves = parts
    passed = [] if replay is None else [t for t in run.user_tensors if input_by_id.get(id(t)) == replay.index]
    # an input passed twice (one input since Note [Synthetic Bases]: `repeated`) and set_()
    repeat = bool(passed) and (len(passed) > 1 or input_by_id[id(passed[0])] in repeated)
    set_input = repeat and id(passed[0]) in run.swaps.swapped_ids
    if set_input and tree is None and grad_fn_raises(value):
        # A set_() of its base, even under no_grad, makes eager's grad_fn raise (the base here
        # an input passed twice, one input since Note [Synthetic Bases]); the view rebuilt from the
        # input before the epilogue has none that raises.
        raise UnsupportedError(
            f"{path}: its grad_fn raises in eager (a view made under no_grad of a tensor that requires grad, whose "
            "base the program then set_() or wrote in place), which a compiled output cannot reproduce. Return a "
            "clone made before the set_()"
        )
    if (
        replay is None
        and tree is None
        and torch.is_grad_enabled()
        and id(value) in run.swaps.swapped_ids
        and id(value) not in run.swaps.grad_set_ids  # Note [set_ Under Grad]
        and grad_fn_or_none(value) is not None
        and out_leaves[0].source is LeafSource.INPUT_ALIAS
        and not out_leaves[0].is_view
        and not out_leaves[0].same_object
    ):
        # Rebuilt as an alias of the input made without autograd (runtime.non_view_alias): eager's has a history of
        # its own (set_() to the input under no_grad, then written with grad).
        raise UnsupportedError(
            f"{path} shares the storage of an input (set_() to it) and has an autograd history of its own, which an "
            "output rebuilt over the input's storage cannot have. Return a clone"
        )
    if (
        replay is None
        and tree is not None
        and torch.is_grad_enabled()
        and run.swaps.is_view(value)
        and id(value) not in run.swaps.swapped_ids
        and any(run.swaps.view_root(value) is u for u in run.user_tensors)
        and all(o.source is LeafSource.INPUT_ALIAS and not o.same_object for o in out_leaves)
        and grad_fn_or_none(value) is not None
    ):
        # Rebuilt from its dense leaves, it would have no autograd history (a view taken
        # between in-place view ops on the input)
        raise UnsupportedError(
            f"{path} is a view with autograd history of a tensor subclass input whose layout the program changed "
            "in place (t_, unsqueeze_, set_ ...) around taking the view, so its view chain cannot be replayed on the "
            "input, and an output rebuilt from its inner tensors would have no history. Return a clone"
        )


def _info(path: str, kind: OutputKind, **kw: Any) -> OutputInfo:
    blank = OutputInfo(
        path=path,
        kind=OutputKind.CONSTANT,
        constant=None,
        input_index=None,
        tree=None,
        outer_meta=None,
        leaves=(),
        replay=None,
    )
    return replace(blank, kind=kind, **kw)


def _non_tensor_info(path: str, value: object) -> OutputInfo:
    if is_nested_int(value):
        raise UnsupportedError(
            f"{path} is a nested int (a jagged NestedTensor's ragged size, as in a returned `nt.shape`): no graph "
            "output can carry one (Note [Nested Int Dims]). Return the tensor and read its size outside the "
            "compiled function"
        )
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return _info(path, OutputKind.SYMINT)
    if not isinstance(value, _CONSTANT_TYPES):
        raise UnsupportedError(
            f"{path}: the program returns a {type(value).__name__}; outputs must be tensors, symbolic ints or "
            "constants (int, float, bool, str, None, dtype, device). Return tensors and rebuild objects outside, "
            "or register the type with torch.utils._pytree.register_pytree_node, flatten_with_keys_fn included "
            "(its tensors become outputs and the object is rebuilt around them; a Hugging Face cache: "
            "transformers.integrations.executorch.register_dynamic_cache_export_support(), or use_cache=False)"
        )
    return _info(path, OutputKind.CONSTANT, constant=value)


def _output_info(
    path: str, value: object, run: FunctionalRun, maps: _OutputMaps, graph_count: int, repeated: frozenset[int]
) -> tuple[OutputInfo, int]:
    input_by_id, current, original, bases, earlier, set_targets = maps
    if not isinstance(value, torch.Tensor):
        return _non_tensor_info(path, value), graph_count
    if id(value) in input_by_id:
        return _info(path, OutputKind.IS_INPUT, input_index=input_by_id[id(value)]), graph_count
    refuse_sparse(path, value)  # (a sparse output: to_sparse)
    # See Note [Wrapper Storage]: the wrapper's own metadata, given to it once it is built, where a `.data =` to
    # it set them (views taken after one from a tensor it was assigned to have their inner tensors' metadata)
    own = is_traceable_subclass(value) and id(value) in run.swaps.wrapper_data
    data_meta = leaf_meta(value) if own else None
    _check_wrapper_base_within(path, value, run, current)
    check_built_wrapper_output(path, value, run)
    tree, dense = dense_leaves_of(value, path)
    detached = _detached_info(path, value, run, (current, original), (tree, dense, data_meta), graph_count)
    if detached is not None:  # Note [Outputs Over Another Storage]
        return detached
    fresh = _needs_program_autograd(path, value, run)
    out_leaves, graph_count, replaced, own_layout = _output_leaves(
        path, value, (tree, dense, fresh), run, maps, graph_count
    )
    check_wrapper_over_history(path, value, dense, out_leaves)
    through = _function_view_through(path, value, run, input_by_id, tree, out_leaves, fresh)
    if through is not None:
        made = _info(path, OutputKind.TENSOR, tree=tree, outer_meta=leaf_meta(value), leaves=tuple(out_leaves))
        return replace(made, function_view=through), graph_count
    data_from = history_data_leaf(path, value, tree is not None, out_leaves, run)
    if data_from is not None:  # Note [History Kept Through .data =]
        graph_leaf = OutputLeaf(source=LeafSource.GRAPH, index=graph_count, meta=data_from.meta, is_view=False)
        return _info(path, OutputKind.TENSOR, leaves=(graph_leaf,), data_from=data_from), graph_count + 1
    on_input = any(o.source is LeafSource.INPUT_ALIAS for o in out_leaves)
    if on_input and value.requires_grad and grad_fn_or_none(value) is not None and detached_in_chain(value, run):
        raise UnsupportedError(
            f"{path} is a detach() of an input (or a view of one) that the program then wrote with a value that "
            "requires grad: eager gives it an autograd history of its own over the input's storage, which a compiled "
            "output cannot have. Return a clone, or write into a clone"
        )
    check_history_over_alias(path, value, out_leaves, run, bases, (input_by_id, earlier))
    outer = None if tree is None else leaf_meta(value)
    replay, raises = _output_replay(path, value, run, maps, (tree, dense, out_leaves), (replaced, own_layout), repeated)
    on_root = tree is not None and value.requires_grad and not (replay is not None and replay.then_set)
    if on_root and replay is None:
        replay = root_replay(value, bases, ())  # the intermediate itself, views of it returned too
    fresh_root = (
        _as_fresh_root(path, value, tree, out_leaves, (replay, raises, data_meta), graph_count) if on_root else None
    )
    if fresh_root is not None:
        return fresh_root
    if replay is None and tree is not None and value._is_view() and sets_without_history(value, run.swaps):
        # Built from its dense leaves, the wrapper would not be a view, and its leaves would be views where the
        # program's set_() (without grad) left eager's plain aliases
        raise UnsupportedError(
            f"{path} is a view of a tensor subclass whose view chain cannot be replayed (the program set_() it, or a "
            "tensor it was viewed from, onto another tensor), so the compiled output could not be that view. Return "
            "a clone, or set_() a tensor that is not a view"
        )
    if run.swaps.wrapper_data:
        check_assigned_view(path, value, replay, run, input_by_id)
    check_rebuilt_over_input(path, value, out_leaves, replay)
    stride_leaf = _outer_stride_leaf(outer, out_leaves) if replay is None else None
    return (
        _info(
            path,
            OutputKind.TENSOR,
            tree=tree,
            outer_meta=outer,
            leaves=tuple(out_leaves),
            replay=replay,
            outer_stride_leaf=stride_leaf,
            data_meta=data_meta,
            base_gains_grad=replay is not None and base_gains_grad(value, replay, run),
            view_of_fresh=replay is None and function_view_of_fresh(value, tuple(out_leaves), run),
            inference_view=is_inference_mode_view(value),  # Note [Grad Mode And Autograd Reads]
        ),
        graph_count,
    )


def _detached_info(
    path: str,
    value: torch.Tensor,
    run: FunctionalRun,
    maps: tuple[dict[object, DenseIndex], dict[object, DenseIndex]],
    parts: tuple[SubclassNode | None, list[torch.Tensor], Meta | None],
    graph_count: int,
) -> tuple[OutputInfo, int] | None:
    """Output `value` over another storage than the one it views (Note [Outputs Over Another Storage]), where it
    is one (`parts`: its subclass tree, dense leaves and the metadata a `.data =` gave the wrapper)."""
    (current, original), (tree, dense, data_meta) = maps, parts
    detached = detached_output_leaves(
        value,
        dense,
        run,
        (current, original),
        graph_count,
        lambda t, j: alias_meta(t, run, j, original.get(storage_key(t))),
    )
    if detached is None:
        return None
    outer = None if tree is None else leaf_meta(value)
    stride_leaf = _outer_stride_leaf(outer, list(detached))
    made = _info(path, OutputKind.TENSOR, tree=tree, outer_meta=outer, leaves=detached, outer_stride_leaf=stride_leaf)
    return replace(made, data_meta=data_meta), graph_count + len(detached)


def _output_replay(
    path: str,
    value: torch.Tensor,
    run: FunctionalRun,
    maps: _OutputMaps,
    parts: tuple[SubclassNode | None, list[torch.Tensor], list[OutputLeaf]],
    found: tuple[DenseIndex | None, list[DenseIndex]],
    repeated: frozenset[int],
) -> tuple[Replay | None, bool]:
    """How output `value` is rebuilt from what it views, if it is (`parts`: its subclass tree, dense leaves and
    OutputLeafs; `found`: what `_output_leaves` found besides), checked; and whether its grad_fn raises in eager."""
    input_by_id, current, original, bases, earlier, _ = maps
    (tree, dense, out_leaves), (replaced, own_layout) = parts, found
    replay = replay_of(value, tuple(out_leaves), run, input_by_id, bases, earlier)
    if replay is not None and replay.source is ReplaySource.OUTPUT:
        replay = early_input_replay(value, tuple(out_leaves), run, input_by_id, bases) or replay
    if replay is None and tree is not None and replaced is None:
        replay = view_rebuilt_by_set(value, run, input_by_id, bases, earlier)
    if replay is None and replaced is None and torch.is_grad_enabled():
        replay = cut_history_replay(value, tuple(out_leaves), run, input_by_id, bases)
    if replay is None and tree is None:
        check_grown_multi_output_view(path, value, run, earlier)
    _check_replay(path, value, (tree is not None, replay, replaced), run, out_leaves)
    _check_view_bases(path, value, (tree, dense, own_layout), replay, run, (current, original, bases, earlier))
    function_view = replay is None and tree is None and torch.is_grad_enabled() and out_leaves[0].function_view
    replay, raises = _replay_counters(path, value, replay, run, input_by_id, function_view)
    _check_history_kept(path, value, (tree, replay, tuple(out_leaves)), run, input_by_id, repeated)
    return replay, raises


def _function_view_through(
    path: str,
    value: torch.Tensor,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    tree: SubclassNode | None,
    out_leaves: list[OutputLeaf],
    fresh: bool,
) -> Replay | None:
    """The view a subclass output is of an input through the program's own autograd.Function (Note [Custom
    Functions]), where it is one; refuses such views the compiled output cannot be."""
    check_written_function_view(path, value, out_leaves, run)
    root = run.swaps.view_root(value, through_swaps=True) if fresh and from_program_function(value, run) else None
    if root is not None and id(root) in input_by_id:  # Note [Custom Functions]
        if tree is None:
            check_function_input_unwritten(path, root, run)
        elif value._is_view():
            return function_view_replay(path, value, run, input_by_id)
    elif fresh and tree is not None and value._is_view() and any(o.passthrough is not None for o in out_leaves):
        raise UnsupportedError(
            f"{path}: a view of a tensor subclass input with autograd history of the program's own, not returned by a "
            "custom autograd.Function; eager's is an autograd view of that input, which a compiled output cannot be. "
            "Return a clone"
        )
    return None


def _as_fresh_root(
    path: str,
    value: torch.Tensor,
    tree: SubclassNode | None,
    out_leaves: list[OutputLeaf],
    found: tuple[Replay | None, bool, Meta | None],
    graph_count: int,
) -> tuple[OutputInfo, int] | None:
    """An intermediate subclass output that requires grad, rebuilt from fresh graph leaves (Note [Output Regeneration]), where it is one."""
    replay, raises, data_meta = found
    if (
        any(o.source is LeafSource.INTERMEDIATE_ALIAS for o in out_leaves)
        and (replay is None or replay.source not in (ReplaySource.WRAPPER, ReplaySource.OUTPUT))
        and not raises  # no history to keep: rebuilt by its replay, whose grad_fn raises too
    ):
        # See Note [Output Regeneration]
        check_fresh_inner_grad(path, value)
        first = graph_count - sum(1 for o in out_leaves if o.source is LeafSource.GRAPH)
        fresh_leaves = tuple(
            OutputLeaf(source=LeafSource.GRAPH, index=first + k, meta=o.meta, is_view=False)
            for k, o in enumerate(out_leaves)
        )
        as_fresh = _info(
            path,
            OutputKind.TENSOR,
            tree=tree,
            outer_meta=leaf_meta(value),
            leaves=fresh_leaves,
            view_of_fresh=value._is_view(),  # (a wrapper made from a view of it is none: DTensor.from_local)
            data_meta=data_meta,
        )
        return as_fresh, first + len(fresh_leaves)
    return None


# Note [Strides The Kernels Choose]
# Where a kernel chooses the strides of its result (a dim of size 0 or 1), fake tensors may choose others: a (1, 3)
# result of a (1, 3) input with strides (1, 1) is (3, 1) fake, (1, 1) eager. Views take their strides from the view
# ops, whose fake metadata are the real ones; the offsets of views of a computed tensor follow its strides. So every
# layout that came from a kernel is taken from the graph's real results at run time, never from the fakes, trusting the
# backend to give the graph's results eager's kernels' strides (Note [What A Backend Receives And Returns]):
# - Fresh outputs: a plain one takes its strides from the graph's real result; a subclass one is rebuilt with the outer
#   strides recorded at analysis, except that a wrapper whose outer size and stride were those of one of its fresh
#   leaves (a WrapperTensor takes them from its first inner tensor) takes that leaf's real strides, as eager's wrapper
#   did; so does an intermediate subclass that outputs are replayed from (Replay.root_stride_leaf), and a wrapper
#   nested in either whose outer size and stride were one of its own leaves' (SubclassNode.stride_leaf: a TwoTensor
#   of TwoTensors sorted in a dim of size 0 or 1, its `.a` (1, 1) on fakes, (4, 5) in eager).
# - Inputs set to computed tensors (`x.set_(t)`, `x.data = t`, t computed by the program): the graph returns x's final
#   value, computed by the same ops on real tensors, and the epilogue gives x that value's strides and offset. An output
#   that is t, or another alias with x's final metadata (a view too), takes x's real layout after the epilogue
#   (OutputInfo.input_layout), as does each leaf of an intermediate subclass rebuilt around x's leaves (an INPUT_ROOT
#   replay) and a subclass input or output whose outer metadata were a dense leaf's. A view of t with a layout of its
#   own (`x.data = t; return t[:, :, 1:2]`) takes the layout its view ops, in-place ones too, give x's real value
#   (OutputLeaf.set_steps) where x ends with t's layout and nothing else relaid t or the chain; its hidden `._base`, t,
#   takes x's. Other such views are rebuilt from the fake strides: refused where t is empty. (A view of x itself
#   replays its view ops on the real x and is exact.)
# - Wrappers assigned a computed tensor (`x.data = x.mul(-1.0)`, Note [Wrapper Storage]): the graph returns the
#   dense leaf whose size and stride the assigned wrapper had as a stride probe, and the wrapper takes that leaf's real
#   strides. Only where nothing changed that leaf or the wrapper after it was made (no in-place view op, set_ or `.data
#   =` on either, no write to the leaf's storage, whose functional value need not keep the leaf's strides) and the
#   wrapper's metadata when assigned are the leaf's at the end; refused otherwise. In training the Function returns the
#   probes after its symbolic ints, as detached aliases it marks non-differentiable.
# - An output leaf over an intermediate base with that base's size, stride and offset in the trace (`t0.data = t1`, t1
#   the base) takes the real base's layout (OutputLeaf.base_layout): strides in its size-1 and empty dims included.
#   Only the base itself or a tensor set_() or `.data =` to it: another alias with the base's layout in the trace (a
#   view of an inference tensor, no autograd view) has its view op's strides in size-1 dims (computeStride), which
#   need not be the kernel's; it takes its own value's layout (OutputLeaf.layout_probe, below).
# - A view whose chain passes through the intermediate base after its start (`t1.detach().unsqueeze(-1)`: eager's
#   `._base`, the base the graph returns, is the detach()) replays the steps after the base on the real base, not
#   as_strided() with the trace's strides (sort, frexp of an empty input with gaps keep its strides: fake (1,), eager
#   (5,)); where the base was changed in place since, it is rebuilt from the trace's (rules/view_chains.py), or, with
#   a dim of size 0 or 1, with the layout of its own value in the graph, returned as a stride probe where it views the
#   base's storage (OutputLeaf.layout_probe: `t1 = t0[:, 1:3]; t0.t_()`, t0 laid out (1, 1) by eager's kernel).
# - A tensor a resize_() of another grows the storage under is rebuilt over it with the trace's strides: an output that
#   is one computed from a tensor not laid out as torch.empty would be, with a dim of size 0 or 1, is refused.
#
# Empty Results Laid Out As Eager:
# A meta kernel lays out an empty result contiguously where the CPU kernel may keep its input's strides (`x.sort(2)`
# on an empty slice of stride (3, 3, 1) gives (3, 3, 1) in eager, (1, 1, 1) on fakes), and a later view or return
# shows the difference. On static fakes (the eager record, the backward probe) a functional op whose tensor arguments
# are all empty CPU tensors and whose fake results are all empty asks the CPU kernel itself, on real empty tensors
# of the same layouts (nothing is allocated, no random number drawn), and takes its results' strides.
#
# Batch Norm Results Laid Out As Eager:
# batch_norm's CPU kernels (forward, and grad_input of the backward) lay their first result out contiguously in the
# input's suggested memory format; the meta kernels keep the strides of an argument (a transposed input's (1, 4)
# where eager's result is (3, 1)), and a view(-1) of the result or a resize_() over its storage failed in the trace
# or read other elements. Every fake mode of the pipeline (torch_internals._CacheKeepsStorage) relays that result of
# a CPU fake in place to eager's strides, on a cache hit too. Other devices keep the meta kernel's layout.


def _probe_kernel_layouts(
    outputs: Sequence[OutputInfo], probes: tuple[StrideProbe, ...]
) -> tuple[tuple[OutputInfo, ...], tuple[StrideProbe, ...]]:
    """Note [Strides The Kernels Choose]: the outputs, each dense leaf rebuilt over an intermediate base by
    as_strided() to the trace's layout, where that has a dim of size 0 or 1, naming a stride probe of its own value
    (appended to `probes`)."""
    found, result = list(probes), list(outputs)
    for o, info in enumerate(outputs):
        # (a replayed view set_() to its dense leaves afterwards is built over them: Note [Output Regeneration])
        if info.kind is not OutputKind.TENSOR or (info.replay is not None and not info.replay.then_set):
            continue
        leaves = list(info.leaves)
        for n, leaf in enumerate(leaves):
            if (
                leaf.source is LeafSource.INTERMEDIATE_ALIAS
                and not leaf.base_layout
                and leaf.foreign_base is None
                and leaf.hidden_base is None
                and any(type(d) is int and d <= 1 for d in leaf.meta[0])
            ):
                found.append(StrideProbe(input_index=None, output_index=o, leaf=n, own=True))
                leaves[n] = replace(leaf, layout_probe=len(found) - 1)
        result[o] = replace(info, leaves=tuple(leaves))
    return tuple(result), tuple(found)


def _check_replay(
    path: str,
    value: torch.Tensor,
    found: tuple[bool, Replay | None, DenseIndex | None],
    run: FunctionalRun,
    leaves: Sequence[OutputLeaf],
) -> None:
    """Refuse an output whose aliasing the replay found (or its absence) cannot make eager's. `found`: whether the
    output is a tensor subclass, its replay, the input whose storage before set_() it views."""
    subclass, replay, replaced = found
    # Rebuilt as a view of its base set onto the assigned storage (Note [Outputs Over Another Storage]), or, without
    # history, by as_strided() of the input it views, on that input's storage
    onto_base = any(leaf.foreign_base is not None for leaf in leaves)
    of_input = not value.requires_grad and all(
        leaf.source is LeafSource.INPUT_ALIAS and leaf.is_view and leaf.hidden_base is None for leaf in leaves
    )
    if not subclass:
        check_output_past_grown_input(path, value, run.swaps, run.finals)  # Note [Storage Swaps By Rebinding]
    for dense in dense_leaves_of(value, path)[1]:
        check_output_relaid_by_growth(path, dense, run.swaps)  # Note [Strides The Kernels Choose]
    if replay is None and not subclass:
        # (as_strided() of an input is eager's view only where the view's root is an input: `.data =` keeps a view of
        # an intermediate one of it)
        root = run.swaps.view_root(value, through_swaps=True)
        of_input = of_input and (root is value or any(root is u for u in run.user_tensors))
        check_unreplayed_assigned_view(path, value, run, onto_base or of_input, leaves)
        eager_base = eager_base_input_off(run.swaps, value, pytree.tree_leaves(run.output), run.user_tensors)
        check_view_of_input_set_off_it(path, value, run.user_tensors, onto_base, eager_base)
    early = replay is not None and replay.source is ReplaySource.INPUT and replay.before_epilogue
    with_history = torch.is_grad_enabled() and value.requires_grad
    if replaced is not None and (not early or (with_history and not history_kept_over_swap(run.dense[replaced], run))):
        # (with autograd history: the epilogue's writes and swaps come after it, in eager they came before)
        raise UnsupportedError(
            f"{path} is a view of the storage that input {replaced} had before set_() replaced it; such a view is "
            "supported only taken of the input as it came (it is rebuilt before the epilogue swaps the input), and "
            "with autograd history only where the input came requiring grad and no write or set_() moved its version "
            "counter (eager's view is then stale, or has history the epilogue gives after). Return a clone (.clone()) "
            "instead"
        )


def _outer_stride_leaf(outer: Meta | None, leaves: list[OutputLeaf]) -> int | None:
    if outer is None:
        return None
    return next(
        (
            k
            for k, leaf in enumerate(leaves)
            if ((leaf.source is LeafSource.GRAPH and leaf.passthrough is None) or leaf.input_layout)
            and leaf.meta[:2] == outer[:2]
        ),
        None,
    )


def _on_fresh_storage(run: FunctionalRun, j: DenseIndex) -> bool:
    """Input `j` was set_() onto an intermediate's storage: at run time a fresh one, holding its own elements. Not
    its own storage grown by resize_() (eager's, grown in place: Note [Storage Swaps By Rebinding])."""
    final, key = run.finals[j], storage_key(run.originals[j])
    if storage_key(final) == key or id(final) not in run.swaps.swapped_ids:
        return False
    if run.swaps.grown_root(storage_key(final)) == key:
        return False
    return not any(storage_key(final) == storage_key(o) for o in run.originals)  # else another input's storage


def _check_within_swapped_input(path: str, leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex) -> None:
    """An output aliasing an input that set_() pointed at an intermediate is rebuilt from the input's new storage,
    which holds the input's own elements only (copied from the graph)."""
    if not _on_fresh_storage(run, j):
        return
    final = run.finals[j]
    have = elements_of(list(final.shape), list(final.stride()), final.storage_offset())
    want = elements_of(list(leaf.shape), list(leaf.stride()), leaf.storage_offset())
    if have is None or want is None or not have.covers(want):
        raise UnsupportedError(
            f"{path} is a view of an intermediate that input {j} was set_() to, and reaches elements of it that the "
            "input does not cover; the input's new storage holds only its own elements. Return a clone instead"
        )
    _check_base_within(path, leaf._base, run, j)


def _check_empty_set_target(path: str, run: FunctionalRun, j: DenseIndex) -> None:
    """Note [Strides The Kernels Choose]. Not where the input's storage is its own grown by resize_() (of a view of
    it): what lies there was laid out by view ops and resize_(), as on the fakes, no kernel."""
    final = run.finals[j]
    if final.numel() == 0 and run.swaps.grown_root(storage_key(final)) != storage_key(run.originals[j]):
        raise UnsupportedError(
            f"{path} is a view, with a layout of its own, of an empty tensor the program computed and set_() input "
            f"{j} to (or assigned to its `.data`); eager's strides of such an empty tensor are the kernel's, which "
            "the compiled program does not see (Note [Strides The Kernels Choose]). Return a clone, or the "
            "tensor the input was set_() to itself"
        )


def _check_base_within(path: str, base: torch.Tensor | None, run: FunctionalRun, j: DenseIndex) -> None:
    """`base`, eager's `._base` of an output (a dense leaf of it), on the fresh storage of input `j`, must lie within
    the input's elements.

    An input set_() to part of an intermediate (`t0 = x * x; x.set_(t0[2:])`) ends, in eager, on the intermediate's
    storage, all of it holding the intermediate's values; the epilogue gives it a fresh storage and writes only the
    input's own elements. A returned view of the input's elements whose eager `._base` is that intermediate would get
    a `._base` whose other elements are uninitialized memory, so it is refused.
    """
    final = run.finals[j]
    if base is None or storage_key(base) != storage_key(final):
        return
    have = elements_of(list(final.shape), list(final.stride()), final.storage_offset())
    whole = elements_of(list(base.shape), list(base.stride()), base.storage_offset())
    if have is None or whole is None or not have.covers(whole):
        raise UnsupportedError(
            f"{path} is a view of an intermediate that input {j} was set_() to in part: eager's `._base` of it is "
            "that intermediate, whose elements the input does not cover are not kept by the compiled program. Return "
            "a clone, or set_() the input to the whole intermediate"
        )


def _check_wrapper_base_within(
    path: str, value: torch.Tensor, run: FunctionalRun, current: dict[object, DenseIndex]
) -> None:
    """_check_base_within for a tensor subclass output, whose `._base` is a wrapper (its inner tensors are no views
    in the trace)."""
    base = value._base
    if base is None or not is_traceable_subclass(base):
        return
    for leaf in dense_leaves_of(base, path)[1]:
        j = current.get(storage_key(leaf))
        if j is not None and _on_fresh_storage(run, j):
            _check_base_within(path, leaf, run, j)


def _needs_program_autograd(path: str, value: torch.Tensor, run: FunctionalRun) -> bool:
    """An output whose autograd history comes from the program itself (a custom autograd.Function returning a
    view of its input): only the compiled autograd.Function can give it that history, so it comes from the graph
    (its values and gradients match eager; its storage is not shared with the input)."""
    if not value.requires_grad:
        return False
    try:
        if value.grad_fn is None:
            return False
    except (RuntimeError, ValueError, IndexError):
        # A view taken under no_grad whose base was then written, or a view that an in-place view op (t_) of its
        # base made impossible to replay: reading grad_fn raises (eager's may not: it regenerates by as_strided,
        # functionalization replays the view ops). Either way such a view has no history of the program's own.
        return False
    if is_traceable_subclass(value) and id(value) not in run.swaps.views:
        # a wrapper made by an op, not a view: Note [Training Through A Joint Graph]; only one that holds inner
        # tensors of an input needs this, others are produced as before
        if any(value is u for u in (*run.user_tensors, *run.finals)):
            return False
        return holds_input_leaves(path, value, run)
    t = value
    while (record := run.swaps.views.get(id(t))) is not None:
        if record.func is torch.ops.aten.detach.default:
            # A detach() has no history of its own: one it has now came from an in-place write of a value that
            # requires grad, not from an autograd.Function (refused as for a detach() written so: chain_facts)
            return False
        if not record.grad_enabled:
            # A view made under no_grad has no grad_fn, unless an autograd.Function returned it (and gave it one);
            # a view taken of it later with grad on (`with no_grad(): t = x.view(); return t.view()`) replays.
            return grad_fn_or_none(t) is not None
        t = record.source
    return False


def _check_views_of_inputs_losing_grad(flat: FlatInputs, run: FunctionalRun, outputs: tuple[OutputInfo, ...]) -> None:
    """An output view of an input, taken with history before the program turned the input's requires_grad off: eager's
    keeps that history; the runtime drops the flag before it builds the outputs, so its view would have none."""
    values = pytree.tree_leaves(run.output)
    position = {id(t): k for k, t in enumerate(run.user_tensors)}
    for info, value in zip(outputs, values, strict=True):
        if info.kind is not OutputKind.TENSOR or not isinstance(value, torch.Tensor) or info.replay is None:
            continue
        k = position.get(id(run.swaps.view_root(value, through_swaps=True)))
        if k is None or run.user_tensors[k].requires_grad:
            continue
        real = flat.values[flat.tensor_indices[k]]
        # (the run's view may have lost the history its input's detach_() took: eager's, taken with grad of an input
        # passed requiring grad, keeps it)
        chain = list(run.swaps.chain(value))
        dropped = run.swaps.dropped_at.get(id(run.user_tensors[k]))
        if dropped is None and not (isinstance(real, torch.Tensor) and real.requires_grad):
            # the input never required grad: the view's history ends in a tensor the program made a leaf of (`y =
            # x.t(); y.requires_grad_(); return y[0]`), which the outputs rebuild as eager's
            continue
        taken_with_grad = isinstance(real, torch.Tensor) and real.requires_grad and bool(chain)
        taken_with_grad = taken_with_grad and all(r.grad_enabled for r in chain)
        taken_with_grad = taken_with_grad and dropped is not None and chain[-1].seq <= dropped
        if grad_fn_or_none(value) is None and not taken_with_grad:
            continue
        raise UnsupportedError(
            f"{info.path} is a view of {flat.leaves[flat.tensor_indices[k]].path}, taken with autograd history before "
            "the program turned that input's requires_grad off (`.requires_grad = False`, requires_grad_(False), "
            "detach_()); eager's view keeps the history, the compiled call drops the flag before it rebuilds the "
            "view. Take the view after turning requires_grad off, or return a clone"
        )


def _flag_of_its_own(value: torch.Tensor, info: OutputInfo, run: FunctionalRun) -> bool:
    """Whether tensor output `value` of a call under no_grad requires grad by a flag the runtime must give it once
    built. Not where it is a view of an input that reads the flag of its root base (taken under no_grad, no
    requires_grad_() of its own): it is replayed on the real input, and reads the real root base's, which the run's
    stand-in, laid out anew, does not share where the input is a view of a base that requires no grad (Note [Grad
    Mode And Autograd Reads]). So too where the program wrote that base since, so that its grad_fn raises: the
    replay raises as eager's by the input's own flag (Note [Views That Raise After A Bump]), and a flag of its own
    would outlive a change of the base's."""
    if info.kind is not OutputKind.TENSOR or not value.requires_grad:
        return False
    own = id(value) in run.swaps.requires_grad_gained or id(value) in run.swaps.own_flags
    if own or not reads_flag_of_base(value):
        return True
    if info.base_gains_grad:  # the runtime gives its rebuilt `._base` the flag it reads
        return False
    if info.replay is not None and info.replay.source is ReplaySource.INPUT:
        return False
    return not any(value._base is t for t in run.user_tensors)


def _flag_kept(value: torch.Tensor, run: FunctionalRun) -> bool:
    """OutputInfo.flag_kept: a view with history that the program gave requires_grad_()."""
    flagged = id(value) in run.swaps.requires_grad_set
    return flagged and run.swaps.is_view(value) and grad_fn_or_none(value) is not None


def _check_flag_given_late(path: str, value: torch.Tensor, info: OutputInfo, run: FunctionalRun) -> None:
    """Refuse output `value`, made to require grad once built (`_flag_of_its_own`), where its grad_fn raises in the
    run: the runtime's requires_grad_() on the rebuilt output reads fine. Not for a view replayed on an input that the
    program gave a flag of its own over its base's (SwapRecord.own_flags): rebuilt over the real base, it reads (or
    raises) as eager's, which reads its real base's flag, and the runtime sets its own only where it reads fine."""
    if not grad_fn_raises(value):
        return
    if id(value) in run.swaps.own_flags and info.replay is not None and info.replay.source is ReplaySource.INPUT:
        return
    raise UnsupportedError(
        f"{path}: its grad_fn raises in eager (a view made under no_grad of a tensor the program made "
        "require grad, whose base it then wrote in place); the compiled call makes the output require "
        "grad after it is built, which reads fine. Return a clone made before the write"
    )


def _new_leaf_view(value: object, info: OutputInfo, run: FunctionalRun) -> bool:
    """A view, replayed on an input, an intermediate base or an earlier output, that the program made a new autograd
    leaf in a call begun with grad on: the replayed view is made to require grad once built, as eager's (Note
    [Training Without A Function]). One taken under no_grad or inside inference_mode of a tensor that requires grad
    reads the flag of its base when rebuilt, with no accumulator of its own: the flag is given all the same."""
    replay = info.replay
    if not run.swaps.grad_at_start or replay is None:
        return False
    made = run.swaps.requires_grad_gained | run.swaps.new_leaf_ids
    if not isinstance(value, torch.Tensor) or id(value) not in made:
        return False
    return value.requires_grad and grad_fn_or_none(value) is None


def _untouched_inputs(
    flat: FlatInputs, layout: DenseLayout, run: FunctionalRun, mutations: tuple[LeafMutation, ...]
) -> frozenset[int]:
    """The flat indexes of the plain inputs the graph runs on as the caller passes them (in no alias group) and the
    program leaves as they came: not written, their counters not advanced, not set_() or changed by an in-place view
    op, requiring no grad as passed and their flag never set (`_graph_leaf_view`)."""
    grouped = {m for g in layout.groups for m in g.members}
    swaps = run.swaps
    flagged = swaps.requires_grad_set | swaps.requires_grad_gained | swaps.requires_grad_dropped
    return frozenset(
        k
        for t, k, of_input in zip(run.user_tensors, flat.tensor_indices, layout.leaves_of_input, strict=True)
        if isinstance(real := flat.values[k], torch.Tensor)
        and not real.requires_grad
        and not t.requires_grad
        and id(t) not in flagged
        and not any(mutations[j].any or mutations[j].version_bumped or j in grouped for j in of_input)
    )


def _graph_leaf_view(value: torch.Tensor, info: OutputInfo, run: FunctionalRun, untouched: Container[int]) -> bool:
    """A plain view of an input in `untouched` (`_untouched_inputs`) that the program made a new leaf in a call begun
    with grad on (`_new_leaf_view`), or whose history ends in such a leaf: the graph's `new_autograd_leaf` node makes
    that leaf of the caller's input, and the graph's value, returned as it is, is eager's view (eager's layout, `._base` and counter) with eager's history, ending in the very leaf eager's
    does, where a view replayed on the input after the graph would be another leaf, or have no history (Note [Training
    Without A Function]; `records_as_eager` checks it)."""
    replay = info.replay
    if replay is None or replay.source is not ReplaySource.INPUT or info.tree is not None or len(info.leaves) != 1:
        return False
    if (
        replay.index not in untouched
        or any(step.own_version for step in replay.steps)
        or info.inference
        or info.base_gains_grad
    ):
        return False
    flags = (replay.before_epilogue, replay.stale_view, replay.bump_after, replay.then_set, replay.runtime_set)
    if any(flags) or replay.set_by_data or replay.entry_counter or replay.keeps_counter or replay.eager_raises:
        return False
    if _new_leaf_view(value, info, run) and id(value) in run.swaps.new_leaf_ids:
        return not any(step.inference_mode for step in replay.steps)
    return run.swaps.grad_at_start and _history_ends_in(grad_fn_or_none(value), run.swaps.new_leaf_ids)


def _self_sets_only(t: torch.Tensor, ops: Sequence[InplaceViewRecord]) -> bool:
    """Analysis.inplace_self_sets_only of input `t` given the in-place view ops the program applied to it."""
    return bool(ops) and all(
        op.func is torch.ops.aten.set_.source_Tensor and bool(op.args) and op.args[0] is t and not op.grad_enabled
        for op in ops
    )


def _history_ends_in(node: object, leaves: Container[int]) -> bool:
    """Does the autograd history from `node` reach the accumulator of a tensor whose id() is in `leaves`?"""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if id(getattr(n, "variable", None)) in leaves:
            return True
        stack.extend(child for child, _ in cast(Sequence[tuple[object, int]], getattr(n, "next_functions", ())))
    return False


def check_written_inputs_gaining_grad(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, gains: Sequence[int]
) -> None:
    """Refuse an input the program both writes and calls `requires_grad_()` on: the runtime makes it require grad
    before the graph runs, so the epilogue's copy of the write would be recorded by autograd (or raise, on a leaf),
    where eager wrote it before it required grad (Note [Inputs Written In Training]). Not where every write is one
    autograd does not record (under no_grad, through `.data`/detach(), or before the flag of a value that requires no
    grad: Note [Leaves Laid Out Anew Under no_grad]) and keeps its storage and layout: those are the same before the
    flag and after, and the epilogue copies them in below autograd (nor its in-place view ops, on a leaf in no alias
    group and no view, which the epilogue replays below autograd too, nor, on such a plain leaf, a set_() or `.data =`
    autograd records no node of: the runtime makes its accumulator at the size of eager's first read with grad after
    the flag, Note [Leaves Laid Out Anew Under no_grad]); nor where the input is in an alias group that no
    input requiring grad is in and keeps its layout and storage (the epilogue writes the group's base). In a group
    beside an input requiring grad, any write counts, but for a plain input that runs as a stand-in of its own
    (runtime.steps.own_stand_in_inputs), where layout changes do, and writes with grad in its version-counter family
    and set_()s onto itself with grad where the flag did not come first (Analysis.gained_before_changes). A write through another input over its storage, which that input resized, counts too where the input's
    elements overlap. None counts where the input is plain, shares its storage with no other input (a group of one
    is traced for what a resize_() grows it into), and the flag came before any op of the program changed its storage
    but by writes autograd records none of (Analysis.gained_before_changes): eager's other changes all follow it, as
    the run's that requires grad from the start do, and the rules for inputs that require grad judge them."""
    beside_grad = {m for g in layout.groups if _group_requires_grad(flat, layout, g) for m in g.members}
    grouped = {m for g in layout.groups for m in g.members} - beside_grad
    passed = [cast(torch.Tensor, flat.values[k]).requires_grad for k in flat.tensor_indices]
    graded = own_stand_in_inputs(layout, passed, gains)  # (requiring grad from the start)
    own = graded | own_leaves_of(analysis)
    shared = {m for g in layout.groups if len(g.members) > 1 for m in g.members} | beside_grad
    for i in gains:
        alone = not any(j in shared for j in layout.leaves_of_input[i])
        first = bool(analysis.gained_before_changes) and analysis.gained_before_changes[i]
        if alone and layout.trees[i] is None and first:
            # (made to require grad before the program changed its storage, over a storage no other input shares:
            # every in-place view op, set_(), resize and `.data =` of eager's on it, and every write autograd may
            # record, comes after the flag, as the run that requires grad from the start orders them, under the rules
            # for inputs that require grad; a write before it that autograd records none of leaves the same values
            # either way; in an alias group the stand-in is a view of the group's base, or a leaf of its own that
            # requires grad from the start (a write with grad mode on before the flag is recorded on it), which the
            # rules below judge whatever the order; a tensor subclass keeps the rule: its wrapper's set_() onto
            # itself after the flag lost eager's saved-version error and accumulator)
            continue
        # (a leaf in no alias group, a view too: eager's in-place view ops on it record nothing, before the flag or
        # under no_grad after it, and the epilogue replays them so; the gradient arrives in the layout of the first
        # read with grad after the flag, Note [Leaves Laid Out Anew Under no_grad])
        # (not a set_() among them, which a wrapper's replay steps leave out where it sets it onto itself: eager's
        # renews the leaf's accumulator and fails the nodes that saved it before)
        steps = analysis.inplace_replay[i]
        wrapper = is_traceable_subclass(flat.values[flat.tensor_indices[i]])
        # (x.set_(x) below autograd, its only in-place view op, leaves it as it was but for its version counter: no
        # layout nor storage to order before the flag)
        # (only where it came before the flag: after it, eager's renews the accumulator and fails earlier saves)
        unmoved = bool(analysis.inplace_self_sets_only) and analysis.inplace_self_sets_only[i] and not first
        relaid = (
            _relaid_alone(flat, layout, i)
            and (bool(steps) or not wrapper)
            and (unmoved or not any(s.op.overloadpacket is torch.ops.aten.set_ for s in steps))
        )
        changed = (analysis.inplace_view_ops[i] and not relaid and not unmoved) or analysis.wrapper_data[i] is not None
        rebound = relaid and layout.trees[i] is None  # (a plain leaf in no alias group: `_written_without_grad`)
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[i]]
        # (one whose elements overlap, over a storage another input resized and then wrote: regenerated over the
        # grown storage, its gradient would be summed over its repeated elements)
        written = [m for m in muts if m.any or (m.final_data and m.resized and meta_overlaps(*m.final_meta))]
        if all(j in grouped for j in layout.leaves_of_input[i]):
            # (over a storage other inputs share, none requiring grad: the epilogue writes the group's base, not the
            # input, and the run's stand-in gains the flag where eager's does (Note [Grad Mode And Autograd Reads]);
            # only a change of its layout or storage needs ordering)
            written = [m for m in written if _moved(m)]
        # (beside an input requiring grad, written even below autograd: the stand-in is a view of the group's base,
        # which carries that input's history, where eager's input is a leaf of its own)
        beside = bool(written) and any(j in beside_grad for j in layout.leaves_of_input[i])
        if i in own:
            beside = _own_stand_in_written(written, muts, first=first, graded=i in graded)
            written = []
        if changed or beside or any(not _written_without_grad(m, relaid=relaid, rebound=rebound) for m in written):
            path = flat.leaves[flat.tensor_indices[i]].path
            raise UnsupportedError(
                f"{path} is written in place and made to require grad (requires_grad_()) by the program: the "
                "compiled call cannot order the write (or in-place view op) before the requires_grad_() as eager "
                "does. Call requires_grad_() outside the compiled function, or write into a clone"
            )


def _own_stand_in_written(
    written: Sequence[LeafMutation], muts: Sequence[LeafMutation], *, first: bool, graded: bool
) -> bool:
    """For an input running as a stand-in of its own (a detached leaf over its group's storage, as eager's input is a
    leaf; `written`: its leaves written, `muts`: all of them; `first`: Analysis.gained_before_changes): must its
    writes be ordered before the flag? A write below autograd reaches its values and none of its history; a layout or
    storage change counts; so does a write with grad in its version-counter family, which may be through itself, on
    the leaf that requires grad from the start, which raises where eager's, before the flag, does not (Note [Aliased
    Inputs In Training]), and, where the stand-in requires grad from the start (`graded`: beside an input requiring
    grad, runtime.steps.own_stand_in_inputs), a set_() onto itself with grad, which writes nothing; a leaf without
    grad until the program's flag (functional_run.own_leaf_inputs) meets that set_() requiring none, as eager's
    does, and autograd records no node of it. Not those where the flag came first: every write autograd may record
    and every set_() over its storage follows it in eager too, where one through the input itself or a view of it
    raises as on the stand-in, one through another tensor of its family records on that tensor in both, and a write
    with grad before it that autograd records none of is a read with grad before the flag, judged as one (Note
    [Grad Mode And Autograd Reads])."""
    moved = any(_moved(m) or (m.visible_through_self and not first) for m in written)
    return moved or (graded and not first and any(m.self_set_with_grad for m in muts))


def _group_requires_grad(flat: FlatInputs, layout: DenseLayout, group: AliasGroup) -> bool:
    """Some input over the group's storage requires grad as passed."""
    owners = {layout.leaves[m].owner for m in group.members}
    return any(cast(torch.Tensor, flat.values[k]).requires_grad for k in owners)


def _written_without_grad(m: LeafMutation, *, relaid: bool = False, rebound: bool = False) -> bool:
    """Only the values of a leaf changed (and its layout, within its storage, where `relaid`; its storage and layout
    by set_() or `.data =` too, where `rebound`), by writes, in-place view ops and swaps autograd does not record (Note
    [Inputs Written In Training]). A plain leaf in no alias group (`rebound`) set_() or `.data =` onto another storage
    or layout where autograd records no node: its stand-in takes the swap before the flag as eager's leaf does, the
    runtime makes the real leaf's accumulator at the size of the first read with grad after it (Note [Leaves Laid Out
    Anew Under no_grad]), and the epilogue's set_() or `.data =` of a leaf is no in-place op autograd checks."""
    swap = (m.storage_changed or m.swapped) and not (rebound and not m.set_under_grad)
    moved = swap or m.resized or (m.metadata and not relaid)
    return not moved and not m.autograd_visible and not m.visible_through_self


def _relaid_alone(flat: FlatInputs, layout: DenseLayout, i: int) -> bool:
    """Tensor input `i` is a leaf (a view too) in no alias group: the run's stand-in is a leaf of its own,
    relaid as eager's (Note [Leaves Laid Out Anew Under no_grad])."""
    value = cast(torch.Tensor, flat.values[flat.tensor_indices[i]])
    grouped = {m for g in layout.groups for m in g.members}
    return value.is_leaf and not any(j in grouped for j in layout.leaves_of_input[i])


def _moved(m: LeafMutation) -> bool:
    """The leaf's layout or storage changed."""
    return m.metadata or m.storage_changed or m.swapped or m.resized


def check_sets_before_gaining_grad(
    flat: FlatInputs, layout: DenseLayout, analyses: tuple[Analysis, Analysis], gains: Sequence[int]
) -> None:
    """Refuse an input set_() with grad before the program makes it, or another input (its view's base, the set_()'s
    source), require grad: eager records no set_ node then, and the analysis with the gaining inputs requiring grad
    from the start (`analyses`: before, after) records one that the runtime would repeat on an input requiring grad
    (a view of a leaf requiring grad: autograd raises)."""
    before, after = analyses
    gained = ", ".join(flat.leaves[flat.tensor_indices[i]].path for i in gains)
    for i, leaves in enumerate(layout.leaves_of_input):
        if any(after.mutations[j].set_under_grad and not before.mutations[j].set_under_grad for j in leaves):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} is set_() with grad enabled before the program makes "
                f"{'it' if i in gains else gained} require grad (requires_grad_()): eager records no set_ node then, "
                "but the compiled call makes that input require grad from the start (a view of it, or a tensor set_() "
                "to it, with it). Call requires_grad_() outside the compiled function, before the set_(), or call "
                "set_() under torch.no_grad()"
            )


def check_gained_grad(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """Refuse an input that starts without requires_grad and ends with it (a write or set_() of a value that
    requires grad) where the epilogue cannot give it eager's autograd history (Note [Inputs Written In
    Training]): a subclass input the Function cannot return as a wrapper (its inner tensors carry no history), one
    whose storage the program swaps, or a member of an alias group that is neither one tensor passed again nor apart
    from the others in autograd (LeafMutation.history_of_its_own)."""
    by_wrapper = wrapper_update_inputs(layout, analysis, user_fakes)
    grouped = {m for g in layout.groups for m in g.members}
    for i, fake in enumerate(user_fakes):
        if not gains_grad(analysis, i, fake):
            continue
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[i]]
        swapped = any(m.storage_changed or m.swapped for m in muts)
        if layout.trees[i] is None and swapped and not any(m.set_under_grad for m in muts):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} does not require grad, and the program set_()s it where "
                "autograd does not record that (under no_grad, or to a value that does not require grad) and then "
                "writes a value that requires grad into it; in training this is not supported (its new storage is "
                "written below autograd). Write into a clone, or detach() the value"
            )
        own = set(layout.leaves_of_input[i])
        # (a subclass input alone over its group's synthetic base, made for an as_strided() reach: its gradient was
        # lost; one grouped with other inputs is supported, Note [Aliased Inputs In Training])
        alone = all(set(g.members) <= own for g in layout.groups if own & set(g.members))
        if (
            (layout.trees[i] is None or alone)
            and not swapped
            and any(
                j in grouped
                and not one_tensor_passed_again(layout, analysis, j)
                and not analysis.mutations[j].history_of_its_own
                for j in layout.leaves_of_input[i]
            )
        ):
            # Its writes are copies into the group's synthetic base (Note [Aliased Inputs In Training]), which hands
            # a grad_fn to the tensor the base views: eager's only where that is the input itself (Note [Inputs Written
            # In Training]).
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} does not require grad, shares storage with another input, "
                "and the program writes a value that requires grad into it (so in eager it then requires grad); in "
                "training this is supported only where every input over that storage is this one tensor, or where "
                "none is its view, its base or a view of its base (a detach() passed beside it), and the program "
                "keeps its layout (Note [Inputs Written In Training]). Write into a clone, or detach() the value"
            )
        swapped_under_grad = any(m.storage_changed for m in muts) and all(m.set_under_grad for m in muts)
        if (
            layout.trees[i] is not None
            and not swapped_under_grad
            and (i not in by_wrapper or any(m.storage_changed for m in muts))
        ):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} does not require grad and the program writes or set_()s "
                "a value that requires grad into it (so in eager it then requires grad); in training this is not "
                "supported for tensor subclasses whose storage it swaps or whose changes autograd does not record "
                "(no_grad, .data) or that share storage with another input. Write into a clone, or detach() the value"
            )
