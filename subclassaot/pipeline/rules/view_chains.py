"""Stage `analyze`, output regeneration: how eager made each aliased output (the view chain from an input, an
earlier output or an intermediate base, with in-place view ops and wrapper-level set_() steps), and the in-place view
ops the epilogue replays on subclass inputs (which subclass tensors share a wrapper storage after the call is in
data_assignment.py). The facts about chains the analysis decides on (a detach() in the chain, a set_() under grad
before it, in-place view ops under mixed grad modes) are in chain_facts.py.

Input: a `FunctionalRun` and the output being analyzed. Output: `Replay` / `ViewStep` records for the runtime (Note
[Output Regeneration]). Invariants: pure reads of the run's records; a chain
is returned only when replaying it is exact, else None; only the `check_` refusals raise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.autograd_state import stale_at_end
from subclassaot.pipeline.rules.chain_facts import (
    detached_before_change,
    history_after_received,
    input_bumps,
    relaid_last_over_entry_history,
    requires_grad_as_eager,
)
from subclassaot.pipeline.rules.changed_views import early_marks, final_pass_marks
from subclassaot.pipeline.rules.data_assignment import (
    apart_from_leaves,
    assigned_root,
    leaves_moved,
    with_root_data_meta,
)
from subclassaot.pipeline.rules.set_under_grad import set_view_root
from subclassaot.pipeline.rules.swap_record import SET_OPS, InplaceViewRecord, ViewRecord, tensor_meta
from subclassaot.schemas import (
    DenseIndex,
    DenseLayout,
    InputArg,
    InputIndex,
    LeafMutation,
    LeafSource,
    Meta,
    OutputInfo,
    OutputLeaf,
    Replay,
    ReplaySource,
    SourceSize,
    ViewStep,
)
from subclassaot.torch_internals import (
    autograd_nodes,
    is_inference_mode_view,
    is_multi_output_view,
    is_nested_int,
    is_no_grad_view,
    is_plain_autograd_view,
    storage_key,
    symint_expr,
)


def root_replay(
    t: torch.Tensor,
    bases: dict[object, tuple[int, torch.Tensor]],
    steps: tuple[ViewStep, ...],
    meta: Meta | None = None,
    *,
    inputs: dict[object, tuple[int, torch.Tensor]] | None = None,
) -> Replay | None:
    """Replay from the intermediate subclass `t` rebuilt around its dense leaves, when they are all intermediate
    bases, or, given `inputs` (`kept_input_leaves`), input leaves themselves (Note [Output Regeneration]); no steps:
    the output is `t` itself. `meta`: the wrapper's metadata when the chain viewed it, where a `.data =` changed it
    since (Note [Wrapper Storage])."""
    if not is_traceable_subclass(t):
        return None
    node, root_leaves = flatten_subclass(t, "root")
    found = [bases.get(storage_key(leaf)) or (inputs or {}).get(storage_key(leaf)) for leaf in root_leaves]
    if all(b is not None and b[0] < 0 for b in found):
        return None  # (every leaf an input's: the rules for aliases of inputs decide)
    if any(b is not None and b[0] < 0 for b in found) and t.requires_grad and t.grad_fn is None:
        return None  # (a wrapper the program made a leaf that requires grad: no root rebuilt here is one)
    if not all(b is not None and b[1] is leaf for b, leaf in zip(found, root_leaves, strict=True)):
        return None
    meta = leaf_meta(t) if meta is None else meta
    return Replay(
        source=ReplaySource.WRAPPER,
        index=-1,
        steps=steps,
        root_tree=node,
        root_bases=tuple(b[0] for b in found if b is not None),
        root_meta=meta,
        root_stride_leaf=next((k for k, leaf in enumerate(root_leaves) if leaf_meta(leaf)[:2] == meta[:2]), None),
    )


def kept_input_leaves(run: FunctionalRun) -> dict[object, tuple[int, torch.Tensor]]:
    """Storage -> (-1 - j, leaf) for each dense input leaf `j` the program left the same object on its own storage
    (an NJT's offsets, which `nt * 2` shares; written or relaid in place, it is still the object eager's intermediate
    holds): an intermediate subclass holding it is rebuilt around the input's leaf (Replay.root_bases, Note [Output
    Regeneration])."""
    return {
        storage_key(d): (-1 - j, d)
        for j, d in enumerate(run.dense)
        if run.finals[j] is d and id(d) not in run.swaps.swapped_ids
    }


def replay_of(
    value: torch.Tensor,
    leaves: tuple[OutputLeaf, ...],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
    earlier: dict[int, int],
) -> Replay | None:
    """The view chain eager used to make `value` from an input, an earlier output or an intermediate base, if
    replaying it is exact; it names the eager objects it passes through (Note [Output Regeneration])."""
    chain: list[ViewStep] = []
    marks: list[tuple[int, int]] = []
    after: list[ViewStep | None] = []
    found = _replay_of(value, leaves, run, input_by_id, bases, earlier, (chain, marks, after))
    if found is None or found.steps != tuple(chain):
        return found
    if after and all(s is not None for s in after):  # Note [Output Regeneration]
        found = replace(found, base_after=tuple(s for s in after if s is not None))
    elif after:  # an op on the `._base` after the view that no step replays (a set_() onto another tensor)
        return None
    return replace(found, marks=early_marks(marks) if found.before_epilogue else tuple(marks)) if marks else found


def _chain_marks(
    segments: list[list[ViewStep]], objects: list[torch.Tensor], run: FunctionalRun, changed_base: int | None
) -> list[tuple[int, int]]:
    """(steps replayed, id() of the eager object they make) per segment whose object no in-place view op changed,
    or only after the chain viewed it where it is `changed_base`, the `._base` they are applied to once (Note
    [Output Regeneration])."""
    marks: list[tuple[int, int]] = []
    count = 0
    for segment, made in zip(reversed(segments), reversed(objects), strict=True):
        count += len(segment)
        if made is not objects[0] and id(made) in run.swaps.new_leaf_seq and not segment[0].makes_leaf:
            continue  # (a view mid-chain made a new leaf after this chain passed it: `_made_a_leaf`)
        unchanged = (
            id(made) not in run.swaps.inplace_views
            or (id(made) == changed_base and len(segment) == 1)
            or (len(segment) == 1 + len(run.swaps.inplace_views[id(made)]) and final_only(made, run))
        )
        if unchanged and id(made) not in run.swaps.swapped_ids:
            marks.append((count, id(made)))
        else:  # Note [Output Regeneration]
            marks.extend(final_pass_marks(made, len(segment), count, run))
    return marks


@dataclass(frozen=True, slots=True, kw_only=True)
class _Chain:
    """An output's view chain, walked back to the tensor it starts from (Note [Output Regeneration])."""

    value: torch.Tensor  # the output
    leaves: tuple[OutputLeaf, ...]  # its dense leaves (OutputInfo.leaves)
    source: torch.Tensor  # the tensor the chain's first view was taken from
    first: ViewRecord  # that view
    steps: tuple[ViewStep, ...]  # the steps from `source` to `value`, in the program's order


def _replay_of(
    value: torch.Tensor,
    leaves: tuple[OutputLeaf, ...],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
    earlier: dict[int, int],
    named: tuple[list[ViewStep], list[tuple[int, int]], list[ViewStep | None]],
) -> Replay | None:
    then_set = _set_after_made(value, run)
    if all(leaf.source is LeafSource.GRAPH for leaf in leaves) and not then_set:
        return None
    segments: list[list[ViewStep]] = []
    objects: list[torch.Tensor] = []  # per segment: the object its steps make
    t = value
    first: ViewRecord | None = None
    # in-place view ops on a tensor count until the next view was taken from it (for the output itself: until the
    # set_() that replaced its wrapper's contents)
    found = _set_record(value, run) if then_set else None
    upto = found[0] if found is not None else 1 << 62
    set_sources = _unchanged_subclass_inputs(run, input_by_id) if run.swaps.wrapper_sets else None
    changed_base: int | None = None
    while id(t) not in input_by_id and (id(t) not in earlier or _changed_since(t, first, run)):
        # (an earlier output whose metadata changed after this view was taken from it: replay from its own source)
        if _grown_base_output(t, value, earlier, run):
            break
        record = run.swaps.views.get(id(t))
        if record is None:
            break
        # set_(), .data = or a growing resize_() before the chain's next view was taken from it (the output itself,
        # or its `._base`, whose layout eager's output shows: ever): the view chain no longer says how it was made
        swapped = id(t) in run.swaps.swapped_ids and (run.swaps.first_swaps.get(id(t), 0) <= upto or t is value._base)
        assigned = _assigned_view_step(t, record, first, run) if swapped and t is not value else None
        if (swapped and not (then_set and t is value) and assigned is None) or id(t) in run.swaps.grown_ids:
            return None if swapped else _grown_view_of_output(value, run, earlier)
        own = [
            r
            for r in run.swaps.inplace_views.get(id(t), [])
            if record.seq < r.seq < upto and not (then_set and t is value and r.func in SET_OPS) and assigned is None
        ]  # (an earlier set_() of the output itself: the last one, replayed after the chain, overrides it)
        step = view_step(record) if assigned is None else assigned
        step = _chain_step(step, t, (record, first), own, run, assigned is not None)
        segment = [step, *(_before_grad(_inplace_step(r, set_sources), t, r, run) for r in own)]
        if any(s is None for s in segment):
            return None
        segments.append([s for s in segment if s is not None])
        objects.append(t)
        if t is value._base and t is not value:  # Note [Output Regeneration]
            named[2].extend(_inplace_step(r) for r in run.swaps.inplace_views.get(id(t), []) if r.seq > upto)
            changed_base = id(t) if named[2] and all(s is not None for s in named[2]) else None
        first, t, upto = record, record.source, record.seq
    if not segments or first is None:
        return None if then_set else root_replay(value, bases, ())
    steps = [s for segment in reversed(segments) for s in segment]
    named[0].extend(steps)
    named[1].extend(_chain_marks(segments, objects, run, changed_base))
    if then_set:
        by_data = id(value) in run.swaps.swapped_by_data
        replay = _replay_then_set(t, first, steps, run, input_by_id, bases, earlier, by_data)
        return _then_set_entry_counter(replay, value, t, run)
    if assigned_root(t, first, run, input_by_id, earlier):
        return with_root_data_meta(root_replay(t, bases, tuple(steps), _meta_exprs(first.source_meta)), t)
    chain = _Chain(value=value, leaves=leaves, source=t, first=first, steps=tuple(steps))
    if _meta_exprs(first.source_meta) != leaf_meta(t) or apart_from_leaves(t, first.seq, run) or leaves_moved(t, first):
        return _from_changed_source(chain, run, input_by_id, bases, earlier)
    if id(t) in input_by_id:
        return _from_input(chain, run, input_by_id)
    # (`.data =` or set_() moved the root after the chain viewed it: Note [Outputs Over Another Storage])
    if id(t) in run.swaps.swapped_ids and not is_traceable_subclass(value) and storage_key(t) != storage_key(value):
        return None
    if id(t) in earlier:
        return Replay(source=ReplaySource.OUTPUT, index=earlier[id(t)], steps=tuple(steps))
    if is_traceable_subclass(t):
        return root_replay(t, bases, tuple(steps), inputs=kept_input_leaves(run))
    base = bases.get(storage_key(t))
    if base is not None and base[1] is t and not is_traceable_subclass(value):
        return Replay(source=ReplaySource.BASE, index=base[0], steps=tuple(steps))
    if base is not None and not is_traceable_subclass(value):
        return _from_base_within(base, objects, segments, run)
    return None


def _chain_step(
    step: ViewStep | None,
    t: torch.Tensor,
    records: tuple[ViewRecord, ViewRecord | None],
    own: list[InplaceViewRecord],
    run: FunctionalRun,
    assigned: bool,
) -> ViewStep | None:
    """`step`, making `t` by view `records[0]` (`assigned`: an as_strided() for a `.data =`), with what eager's view
    has: no history (`_without_history`), a counter of its own (`.data`), a new leaf made of it (`_made_a_leaf`; the
    chain's next view of it: `records[1]`)."""
    if step is None:
        return None
    if not assigned and _without_history(records[0], run):
        step = replace(step, without_history=True)
    if id(t) in run.swaps.data_aliases:
        step = replace(step, own_version=True)  # `.data`: not eager's detach(), its version counter is its own
    return _made_a_leaf(step, t, records[1], own, run)


def _made_a_leaf(
    step: ViewStep | None, t: torch.Tensor, taken: ViewRecord | None, own: list[InplaceViewRecord], run: FunctionalRun
) -> ViewStep | None:
    """Note [Training Without A Function]: `step`, making `t`, a view mid-chain the program made a new autograd leaf
    before the chain's next view (`taken`) was taken of it, with no in-place view op on it between (`own`):
    ViewStep.makes_leaf, the replay flags it there. A chain through it taken before the flag shares no rebuilt object
    with it (`_chain_marks`)."""
    flagged = run.swaps.new_leaf_seq.get(id(t))
    if step is None or taken is None or flagged is None or not flagged < taken.seq:
        return step
    return step if own else replace(step, makes_leaf=True)


def _grown_base_output(t: torch.Tensor, value: torch.Tensor, earlier: dict[int, int], run: FunctionalRun) -> bool:
    """Is `t` an earlier output, eager's plain `._base` of plain output `value`, that a resize_() grew after the view
    was taken (`t0 = x.detach(); t1 = t0.view(...); t0.resize_(n); return t0, t1`)? A growing resize_() reallocates
    the storage in place, under every tensor over it: eager's `t1` stays a view of `t0`, over the storage `t0` ends
    on, so it is replayed from that output as it was laid out when viewed (`_from_changed_source`), not rebuilt over
    the input the chain started from (whose history and `._base` are not eager's)."""
    if id(t) not in earlier or id(t) not in run.swaps.grown_ids or id(t) in run.swaps.swapped_ids:
        return False
    return t is value._base and not is_traceable_subclass(t) and not is_traceable_subclass(value)


def _grown_view_of_output(value: torch.Tensor, run: FunctionalRun, earlier: dict[int, int]) -> Replay | None:
    """Note [Output Regeneration]: plain output `value`, whose view chain passes a tensor a growing resize_() grew
    (`t0 = x.detach(); t1 = t0[0:1]; t1.resize_(4); return t0, t1`), where eager's `._base` is another output
    (`_grown_view_base`): rebuilt by as_strided() of that output to the layout `value` ends with. Over the same
    storage, an as_strided() of a tensor that is no view is a view of it (eager's `._base`), sharing its counter;
    taken in the grad mode (or inside inference_mode) that gives it eager's creation meta. None otherwise."""
    base = _grown_view_base(value, run, earlier)
    if base is None or is_multi_output_view(value):  # (no single view op gives that creation meta: refused)
        return None
    size, stride, offset = leaf_meta(value)
    step = ViewStep(
        op=torch.ops.aten.as_strided.default,
        args=(list(size), list(stride), offset),
        kwargs=(),
        index=None,
        grad_enabled=not is_no_grad_view(value),
        inference_mode=is_inference_mode_view(value),
    )
    return Replay(source=ReplaySource.OUTPUT, index=earlier[id(base)], steps=(step,))


def _grown_view_base(value: torch.Tensor, run: FunctionalRun, earlier: dict[int, int]) -> torch.Tensor | None:
    """Eager's `._base` of plain output `value`, where it is another output (no view, then), and `value`'s view chain
    back to it passes a tensor a growing resize_() grew, `value` itself or a view it was taken from. A resize_()
    reallocates the storage in place and leaves a view's `._base` as it was: eager's `value` is a view of that output
    over the grown storage, which no replay of the chain remakes (its view ops no longer give the layout). Only where
    neither has history (a flag the program gave `value` by requires_grad_() under no_grad is given after it is
    built: OutputInfo.gains_grad) nor was set_() or `.data =`-assigned; else None."""
    base = value._base
    if is_traceable_subclass(value) or base is None or id(base) not in earlier or is_traceable_subclass(base):
        return None
    flag_given = id(value) in run.swaps.requires_grad_set and not torch.is_grad_enabled()
    if (value.requires_grad and not flag_given) or base.requires_grad or storage_key(base) != storage_key(value):
        return None
    if id(value) in run.swaps.swapped_ids or id(base) in run.swaps.swapped_ids:
        return None
    t, grown = value, False
    while t is not base and (record := run.swaps.views.get(id(t))) is not None:
        grown = grown or id(t) in run.swaps.grown_ids
        t = record.source
    return base if t is base and grown else None


def check_grown_multi_output_view(path: str, value: torch.Tensor, run: FunctionalRun, earlier: dict[int, int]) -> None:
    """Refuse output `value` of `_grown_view_base`, not replayed, made by a multi-output view op (split, unbind,
    chunk) with grad enabled: eager's is a view of another output with that creation meta, which no as_strided()
    gives (rebuilt over the input instead, its `._base` would not be eager's)."""
    if _grown_view_base(value, run, earlier) is None or not is_multi_output_view(value):
        return
    raise UnsupportedError(
        f"{path} is a view, made with grad enabled by a multi-output view op (split, unbind, chunk), of another output "
        "over a storage a resize_() grew since (`t1 = t0.chunk(3)[0]; t1.resize_(n); return t0, t1`): eager's stays "
        "a view of that output, which the compiled call rebuilds only by as_strided(), without the creation meta of "
        "such a view (Note [Output Regeneration]). Take the view with a single-output op (t0[0:1]), or return a clone"
    )


def _without_history(record: ViewRecord, run: FunctionalRun) -> bool:
    """Is `record` one of the views taken with grad of a source that required no grad then, which Note [Views That
    Raise After A Bump] replays under no_grad (ViewStep.without_history)? Not where the source's base, another input,
    had been made to require grad before: eager's source requires grad through it, and its view has history
    (ViewRecord.source_base_gained); nor where a write moved its counter since (`_written_since_over_own_root`)."""
    without = not record.source_requires_grad and not record.source_base_gained
    if not (record.grad_enabled and without):
        return False
    if _input_flag_dropped(run):
        return True
    if run.swaps.requires_grad_set:
        return not _written_since_over_own_root(record, run)
    # the source gained grad by an in-place write since (a custom Function's mark_dirty too): a multi-output view's
    # grad_fn, read once the write moved the counter, raises "A view was created in no_grad mode" for want of one (a
    # single-output view's is made again over the source's history: AsStridedBackward0)
    return record.index is not None and record.source.requires_grad


def _written_since_over_own_root(record: ViewRecord, run: FunctionalRun) -> bool:
    """A single-output view whose counter moved after it was taken (a write to it or its source, `t0.copy_(x0)`), of
    a source that is no view in eager (its own root): eager rebuilds its history over the source at the next read where
    the source requires grad, so its view has history as the replay with grad gives it. Not
    of a view (an input passed as one): the root's flag decides there, which the run's need not be."""
    if record.index is not None or record.inference_mode or run.swaps.bump_count(record.source) == record.bumps:
        return False
    position = run.swaps.input_positions.get(id(record.source))
    if position is not None:
        return not position[1]._is_view()
    return not run.swaps.is_view(record.source)


def _input_flag_dropped(run: FunctionalRun) -> bool:
    """Does the program leave an input that required grad as passed without it?"""
    return any(
        real.requires_grad and not run.swaps.run_inputs[position].requires_grad
        for position, real in run.swaps.input_positions.values()
    )


def _before_grad(
    step: ViewStep | None, t: torch.Tensor, record: InplaceViewRecord, run: FunctionalRun
) -> ViewStep | None:
    """Note [Leaves Laid Out Anew Under no_grad]: an in-place view op with grad on a view taken before the program made
    its root require grad ran before that flag (eager raises for one after it, on a view of a leaf that requires
    grad), with no history: replayed under no_grad, as the view steps before it (ViewStep.without_history)."""
    if step is None or not record.grad_enabled or id(t) not in run.swaps.views_before_grad:
        return step
    return replace(step, without_history=True)


def _assigned_view_step(
    t: torch.Tensor, record: ViewRecord, taken: ViewRecord | None, run: FunctionalRun
) -> ViewStep | None:
    """Note [Output Regeneration]: a plain view `t` in an output's chain, without history, whose `.data` the program
    assigned before the chain's next view (`taken`) was taken from it, onto its own `._base`'s storage (`t0 =
    x.detach(); t1 = t0[:, 1:1]; t1.data = x; return t1.t()`): eager's `t1` stays a view of its base with the
    assigned layout, so the chain makes it by as_strided() of that base to the layout the next view saw; None where
    this does not apply (history, another storage, a write to the storage, symbolic metadata)."""
    if taken is None or is_traceable_subclass(t) or t.requires_grad or id(t) not in run.swaps.swapped_by_data:
        return None
    assigned = run.swaps.data_sets.get(id(t))
    base = t._base
    if assigned is None or not assigned[0] < taken.seq or base is None or storage_key(base) != storage_key(t):
        return None
    size, stride, offset = taken.source_meta
    if run.swaps.bumps(t) or not all(isinstance(d, int) for d in (*size, *stride, offset)):
        return None
    return ViewStep(
        op=torch.ops.aten.as_strided.default,
        args=(list(size), list(stride), offset),
        kwargs=(),
        index=None,
        grad_enabled=record.grad_enabled,
    )


def _from_base_within(
    base: tuple[int, torch.Tensor], objects: list[torch.Tensor], segments: list[list[ViewStep]], run: FunctionalRun
) -> Replay | None:
    """The steps after the intermediate base the graph returns, where the chain passes through that object after its
    start (`t1.detach().unsqueeze(-1)`: eager's `._base` is the detach()), replayed on the real base, whose strides
    the kernels chose (Note [Strides The Kernels Choose]); None where no in-place view op, set_() or `.data =` left
    the base as the later views took it. `objects` / `segments`: per chain object, from the output back."""
    made = next((j for j, o in enumerate(objects) if o is base[1]), None)
    changed = id(base[1]) in run.swaps.inplace_views or id(base[1]) in run.swaps.swapped_ids
    if not made or changed or id(base[1]) in run.swaps.grown_ids:
        return None
    steps = [s for segment in reversed(segments[:made]) for s in segment]
    return Replay(source=ReplaySource.BASE, index=base[0], steps=tuple(steps))


def _from_changed_source(
    chain: _Chain,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
    earlier: dict[int, int],
) -> Replay | None:
    """`chain`'s replay where its source changed shape after the view was taken (t_(), set_()): an input still as
    the program got it then is viewed before the epilogue changes it; anything else is regenerated."""
    value, t, first, steps, leaves = chain.value, chain.source, chain.first, chain.steps, chain.leaves
    if id(t) in input_by_id and _as_received(t, first, run) and _all_input_alias(leaves):
        late = _late_no_grad_view(value, t, leaves, run, steps, _meta_exprs(first.source_meta))
        if late is not None:
            return replace(late, index=input_by_id[id(t)])
        return Replay(
            source=ReplaySource.INPUT,
            index=input_by_id[id(t)],
            steps=steps,
            before_epilogue=True,
            late_steps=_no_grad_tail(value, t, run, len(steps), with_grad=True),
        )
    if id(t) in input_by_id and _all_input_alias(leaves) and _replays_between(value, t, steps):
        source_meta = _meta_exprs(first.source_meta)
        return Replay(source=ReplaySource.INPUT, index=input_by_id[id(t)], steps=steps, source_meta=source_meta)
    plain = not is_traceable_subclass(value) and not is_traceable_subclass(t)
    if plain and id(t) in earlier and not (torch.is_grad_enabled() and value.requires_grad):
        # an earlier output, eager's `._base`, relaid since the view was taken (t0.transpose_() after t0.view()):
        # the steps from it as laid out then, as_strided (also where the view came from the input)
        source_meta = _meta_exprs(first.source_meta)
        return Replay(source=ReplaySource.OUTPUT, index=earlier[id(t)], steps=steps, source_meta=source_meta)
    source = t  # Note [Output Regeneration]
    return detached_before_change(
        value, t, first.source_meta, steps, earlier.get(id(t)), lambda s: root_replay(source, bases, s)
    )


def _from_input(chain: _Chain, run: FunctionalRun, input_by_id: dict[int, InputIndex]) -> Replay | None:
    """`chain`'s replay where its source is an input, laid out as when the chain viewed it."""
    value, t, first, steps, leaves = chain.value, chain.source, chain.first, chain.steps, chain.leaves
    if any(leaf.source is not LeafSource.INPUT_ALIAS for leaf in leaves):
        return None
    if _swapped_after_view(t, value) or _on_replaced_storage(value, t, run):
        # set_() moved the input off the storage the view was taken from: view it before the epilogue swaps it
        # (as the program did), else regenerate the view from the input still holding that storage.
        as_received = _as_received(t, first, run)
        # (views the chain took after the set_() are taken after the epilogue: Note [Views That Raise After A Bump])
        tail = _no_grad_tail(value, t, run, len(steps), with_grad=True, bump=_bump_over_set(value, t, run))
        return (
            Replay(
                source=ReplaySource.INPUT,
                index=input_by_id[id(t)],
                steps=steps,
                before_epilogue=True,
                late_steps=tail,
            )
            if as_received
            else None
        )
    # the chain's last view, or its own last in-place view op's bump (Note [Views That Raise After A Bump])
    made = max(run.swaps.views[id(value)].seq, run.swaps.inplace_view_bumps.get(id(value), 0))
    requires_grad, bump = requires_grad_as_eager(value, t, steps, run), last_bump(t, run)
    early = (
        requires_grad
        # A subclass input: where eager advanced its wrapper's own version counter (a wrapper-level write)
        and (not is_traceable_subclass(t) or run.swaps.bumps(t))
        and (bump > made or relaid_last_over_entry_history(value, t, first, run, bump))
        and _as_received(t, first, run)  # before the epilogue the input is as the program got it
        and not history_after_received(value, t, run)  # ... with no history eager's view took
    )
    if early and requires_grad and _relaid_in_place(chain):
        # the early replay's own in-place view op would take the bump after it (Note [Views That Raise After A Bump])
        early = _regenerated_steps(chain, run) is None
    tail = 0 if early or not requires_grad else _split_at_bump(value, t, run, len(steps))
    if tail and _as_received(t, first, run):
        return Replay(
            source=ReplaySource.INPUT,
            index=input_by_id[id(t)],
            steps=steps,
            before_epilogue=True,
            late_steps=tail,
        )
    # made before a write to any input: the input may share an eager base with the one written, traced apart
    # (Note [Views That Raise After A Bump])
    # (by the chain's views: an in-place view op of its own at the end comes after them, as in eager)
    before_bump = not early and run.swaps.views[id(value)].seq < max(input_bumps(run, t), default=0)
    if not early and requires_grad:
        steps = _regenerated_steps(chain, run) or steps
    return Replay(
        source=ReplaySource.INPUT,
        index=input_by_id[id(t)],
        steps=steps,
        before_epilogue=early,
        entry_counter=before_bump,
        stale_view=not early and not requires_grad and _stale_without_history(value, t, steps, run),
    )


def _stale_without_history(
    value: torch.Tensor, t: torch.Tensor, steps: tuple[ViewStep, ...], run: FunctionalRun
) -> bool:
    """Is eager's `value`, a view of input `t` with no history (`t` requires no grad), stale at the end: did its
    counter move after the view was made (Note [Views That Raise After A Bump])? Not where the chain repeats an
    in-place view op: the replay's own bump leaves it stale, as eager's."""
    if value.requires_grad or any(torch.Tag.inplace_view in s.op.tags for s in steps):
        return False
    return run.swaps.views[id(value)].seq < last_bump(t, run)


def stale_intermediate_view(value: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """Is eager's `value`, an output view with no history of a tensor the program made (a replay not from an input),
    stale at the end: did its counter move after the view was made? Its grad_fn then regenerates from its base once
    the base requires grad (`y.requires_grad_()` after the call), which the replay, made after the write, must be
    bumped to repeat (Note [Views That Raise After A Bump]). Not where the chain repeats an in-place view op."""
    if replay.source is ReplaySource.INPUT or replay.before_epilogue or value.requires_grad:
        return False
    record = run.swaps.views.get(id(value))
    if record is None or any(torch.Tag.inplace_view in s.op.tags for s in replay.steps):
        return False
    # (a write through a tensor another set_() onto this storage bumps that tensor's counter, not this view's)
    return record.seq < run.swaps.family_last_bump.get(run.swaps.family_of(value), 0)


def _regenerated_steps(chain: _Chain, run: FunctionalRun) -> tuple[ViewStep, ...] | None:
    """Note [Views That Raise After A Bump]: the steps whose history is eager's, where autograd regenerates
    the history of a view of the chain after a version bump of its input; None where it regenerates none or the
    chain is not one this rule covers."""
    value, t = chain.value, chain.source
    if is_traceable_subclass(value) or is_traceable_subclass(t) or not t.requires_grad:
        return None
    objects: list[torch.Tensor] = []  # the chain's views, the output first
    records: list[ViewRecord] = []
    relaid = 0  # the chain's in-place view ops
    u = value
    while u is not t and (record := run.swaps.views.get(id(u))) is not None:
        inplace = run.swaps.inplace_views.get(id(u), [])
        if (
            not record.grad_enabled
            or record.index is not None
            or record.inference_mode
            or record.func is torch.ops.aten.detach.default
            or not all(r.grad_enabled for r in inplace)
            or id(u) in run.swaps.data_aliases
            or id(u) in run.swaps.swapped_ids
        ):
            return None
        objects.append(u)
        records.append(record)
        relaid += len(inplace)
        u = record.source
    if u is not t or len(objects) + relaid != len(chain.steps):
        return None
    bump = last_bump(t, run)
    # (an input whose flag is its own, over a base requiring none: eager regenerates from that base, its root)
    gain = run.swaps.view_input_gains.get(id(t))
    from_root = gain is not None
    if gain is not None and records and records[-1].seq <= gain:
        return None  # (a chain taken before that flag has no history to regenerate, its root no flag to give one)
    # the output's history is read by the backward, after the program; a view of the chain by the next view taken
    # of it, made after the last bump where no later view is stale: made (or relaid in place) before it, it is
    # stale then. An in-place view op with grad reads the history of the view it relays: stale then, the history is
    # regenerated before it. One made before the last bump and relaid by it took its history then (if not stale).
    after = 0  # the steps of the views after `u`
    for u, record in zip(objects, records, strict=True):
        relaid = len(run.swaps.inplace_views.get(id(u), []))
        if max(record.seq, run.swaps.inplace_view_bumps.get(id(u), 0)) < bump:
            return _regenerated_from(tensor_meta(u), chain.steps[len(chain.steps) - after :], from_root)
        stale = run.swaps.stale_relayouts.get(id(u))
        if stale is not None:
            return _regenerated_from(stale[1], chain.steps[len(chain.steps) - after - relaid + stale[0] :], from_root)
        if record.seq < bump:
            return None
        after += 1 + relaid
    return None


def _regenerated_from(
    layout: tuple[tuple[Any, ...], tuple[Any, ...], Any], after: tuple[ViewStep, ...], from_root: bool
) -> tuple[ViewStep, ...] | None:
    """as_strided() with grad to a stale view's `layout` (its size, stride and offset when autograd regenerates
    its history), then the steps `after` it (None: a symbolic layout). `from_root`: the source is an input whose flag
    is its own, a view of a base requiring none, of which eager's history is regenerated (ViewStep.from_root)."""
    size, stride, offset = layout
    if not all(isinstance(d, int) for d in (*size, *stride, offset)):
        return None
    regen = ViewStep(
        op=torch.ops.aten.as_strided.default,
        args=(list(size), list(stride), offset),
        kwargs=(),
        index=None,
        grad_enabled=True,
        from_root=from_root,
    )
    return (regen, *after)


def _relaid_in_place(chain: _Chain) -> bool:
    """A view of the chain was changed by an in-place view op (t_(), transpose_())."""
    return any(torch.Tag.inplace_view in step.op.tags for step in chain.steps)


def view_rebuilt_by_set(
    value: torch.Tensor,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
    earlier: dict[int, int],
) -> Replay | None:
    """Note [Output Regeneration]: `value` as a view of eager's `._base` set_() to its own leaves."""
    if not is_traceable_subclass(value) or not value._is_view() or value._base is None:
        return None
    if torch.is_grad_enabled() and value.requires_grad:
        return None
    base = value._base
    if not run.swaps.wrapper_sets and storage_key(base) != storage_key(value):
        return None
    base_storages = {storage_key(leaf) for leaf in flatten_subclass(base, "base")[1]}
    copies = any(storage_key(leaf) not in base_storages for leaf in flatten_subclass(value, "out")[1])
    if copies and set_view_root(value, run.swaps, set()) is None:  # Note [Output Regeneration]
        return None  # an inner tensor that does not alias the base's: the subclass's view op copies (check_subclass)
    alias = ViewStep(op=torch.ops.aten.alias.default, args=(), kwargs=(), index=None, grad_enabled=False)
    found = (ReplaySource.OUTPUT, earlier[id(base)]) if id(base) in earlier else None
    found = (ReplaySource.INPUT, input_by_id[id(base)]) if id(base) in input_by_id else found
    if found is not None:
        return Replay(source=found[0], index=found[1], steps=(alias,), then_set=True, runtime_set=True)
    root = root_replay(base, bases, (alias,)) or _input_root(base, run, alias)
    return None if root is None else replace(root, then_set=True, runtime_set=True)


def _input_root(base: torch.Tensor, run: FunctionalRun, alias: ViewStep) -> Replay | None:
    """An intermediate subclass whose dense leaves all alias input leaves after set_() (`t0.set_(x0)`, or
    `x0.set_(t0)`), rebuilt around those."""
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(run.finals)}
    node, root_leaves = flatten_subclass(base, "root")
    found = [current.get(storage_key(leaf)) for leaf in root_leaves]
    if any(j is None for j in found):
        return None
    original = {storage_key(o) for o in run.originals}
    leaves = tuple(
        OutputLeaf(
            source=LeafSource.INPUT_ALIAS,
            index=j,
            meta=leaf_meta(leaf),
            is_view=False,
            # See Note [Strides The Kernels Choose]: the input's real layout
            input_layout=storage_key(leaf) not in original and leaf_meta(leaf) == leaf_meta(run.finals[j]),
        )
        for j, leaf in zip(found, root_leaves, strict=True)
        if j is not None
    )
    return Replay(
        source=ReplaySource.INPUT_ROOT,
        index=-1,
        steps=(alias,),
        root_tree=node,
        root_meta=leaf_meta(base),
        root_leaves=leaves,
        root_token=id(base),
    )


def early_input_replay(
    value: torch.Tensor,
    leaves: tuple[OutputLeaf, ...],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
) -> Replay | None:
    """A view of an earlier output that is, through it, a view of an input rebuilt before the epilogue writes it:
    the whole chain from the input, before the epilogue too (a view of an unbind() output,
    made before the program wrote the input; made from the rebuilt output after the write, it would raise)."""
    direct = replay_of(value, leaves, run, input_by_id, bases, {})
    if direct is not None and direct.source is ReplaySource.INPUT and direct.before_epilogue:
        return direct
    return None


def _changed_since(t: torch.Tensor, taken: ViewRecord | None, run: FunctionalRun) -> bool:
    """Did `t`'s metadata or storage change after the view `taken` was taken from it? (A set_() to a tensor of the
    same metadata moves the storage only, and a view of it replayed from the set_() output would be of the new one.)"""
    if taken is None:
        return False
    moved = _set_record(t, run)
    if _meta_exprs(taken.source_meta) != leaf_meta(t) or (moved is not None and moved[0] > taken.seq):
        return True
    # an in-place view op that left the metadata as it was (t_() of a 1-D tensor) still changed the object's
    # autograd state: a view taken from it afterwards may raise where eager's, taken before, did not
    return any(r.seq > taken.seq for r in run.swaps.inplace_views.get(id(t), []))


def viewed_before_set(value: torch.Tensor, run: FunctionalRun, earlier: dict[int, int]) -> torch.Tensor | None:
    """The earlier output that is eager's `value._base`, if the program set_() its wrapper after `value`'s view chain
    viewed it."""
    t = value
    while (record := run.swaps.views.get(id(t))) is not None:
        t = record.source
        moved = _set_record(t, run) if is_traceable_subclass(t) else None
        if t is value._base and id(t) in earlier and moved is not None and moved[0] > record.seq:
            return t
    return None


def _set_after_made(value: torch.Tensor, run: FunctionalRun) -> bool:
    """The program set_() the wrapper of subclass output `value` (Note [Wrapper Storage]) after making it
    as a view, in a way the runtime reproduces by a wrapper-level set_ without autograd: `value` does not require
    grad, or the set_ ran under no_grad."""
    found = _set_record(value, run)
    if found is None or id(value) not in run.swaps.views:
        return False
    # or a view of an input set_() under grad: Note [set_ Under Grad]
    return not value.requires_grad or not found[1] or run.swaps.grad_set_view_of(value, run.user_tensors)


def _set_record(value: torch.Tensor, run: FunctionalRun) -> tuple[int, bool] | None:
    """(seq, grad mode) of the last set_() of `value`'s wrapper or plain tensor, or of its last `.data =` (a plain
    view given other data stays a view of its base)."""
    if is_traceable_subclass(value):
        return run.swaps.wrapper_sets.get(id(value))
    if id(value) in run.swaps.swapped_by_data:
        return run.swaps.data_sets.get(id(value))
    return run.swaps.plain_sets.get(id(value))  # a plain view set_() to another storage stays a view


def _replay_then_set(
    t: torch.Tensor,
    first: ViewRecord,
    steps: list[ViewStep],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
    earlier: dict[int, int],
    by_data: bool,
) -> Replay | None:
    """The view chain of an output whose wrapper was set_() after it was made, from its root `t`."""
    if _meta_exprs(first.source_meta) != leaf_meta(t) or leaves_moved(t, first):
        return None  # its source changed shape since: the view is not replayable after the epilogue
    by_data = by_data and not is_traceable_subclass(t)
    found: tuple[ReplaySource, int] | None = (ReplaySource.INPUT, input_by_id[id(t)]) if id(t) in input_by_id else None
    found = (ReplaySource.OUTPUT, earlier[id(t)]) if id(t) in earlier else found
    if found is not None:
        if found[0] is ReplaySource.OUTPUT:
            _check_then_set_from_no_grad_view(t, first, steps, run, found[1])
        return Replay(source=found[0], index=found[1], steps=tuple(steps), then_set=True, set_by_data=by_data)
    base = bases.get(storage_key(t))
    if not is_traceable_subclass(t) and base is not None and base[1] is t:
        # See Note [Outputs Over Another Storage]
        return Replay(source=ReplaySource.BASE, index=base[0], steps=tuple(steps), then_set=True, set_by_data=by_data)
    root = root_replay(t, bases, tuple(steps))
    return None if root is None else replace(root, then_set=True)


def _check_then_set_from_no_grad_view(
    t: torch.Tensor, first: ViewRecord, steps: list[ViewStep], run: FunctionalRun, index: int
) -> None:
    """An output set_() after its chain viewed an earlier output made under no_grad, under grad, before the program
    advanced that output's version counter: the replay views it after the epilogue advanced
    it, which raises where eager's view was taken before. Refused."""
    # (a plain source: Note [Views That Raise After A Bump] refuses it or replays it at its entry counter)
    if not is_traceable_subclass(t) or not t._is_view() or is_plain_autograd_view(t) or not t.requires_grad:
        return
    viewed = [s for s in steps if s.grad_enabled and s.op is not torch.ops.aten.detach.default]
    if viewed and last_bump(t, run) > first.seq:
        raise UnsupportedError(
            f"out[{index}] is a view made under no_grad that requires grad; the program took a view of it under grad, "
            f"set_() that view, and advanced out[{index}]'s version counter after taking it: the compiled output "
            "cannot be viewed before that write. Take the view under no_grad as well, or return a clone of it"
        )


def _then_set_entry_counter(
    replay: Replay | None, value: torch.Tensor, t: torch.Tensor, run: FunctionalRun
) -> Replay | None:
    """`replay`, a then_set view of input `t`, marked Replay.entry_counter where the program took the view before a
    write to an input: the set_() itself advances the counter of an input it views (t1 = x.diagonal(); with
    no_grad: t1.set_(t0), x an unbind() output), whose grad_fn then raises, and eager's view
    was taken before that (Note [Views That Raise After A Bump]); and Replay.stale_view where eager's, assigned
    `.data =`, regenerates its history from its base (Note [History Kept Through .data =])."""
    if replay is None:
        return None
    made = run.swaps.views[id(value)].seq
    stale = replay.set_by_data and stale_at_end(run.swaps, value, made, last_bump(t, run))
    if replay.source is not ReplaySource.INPUT:
        if stale:  # no counter at entry to replay it at
            raise UnsupportedError(
                f"an output is a view of out[{replay.index}] that the program assigned `.data =` after a write to "
                "its storage (or wrote after): eager rebuilds its history over the assigned layout when it is "
                f"read, which the compiled output, viewed from the rebuilt out[{replay.index}], cannot repeat (Note "
                "[History Kept Through .data =]). Take the view from the input, or return a clone"
            )
        return replay
    found = _set_record(value, run)
    by_set = [] if found is None or id(value) in run.swaps.swapped_by_data else [found[0]]  # `.data =` bumps none
    bumps = [*input_bumps(run), *by_set]  # Note [Views That Raise After A Bump]
    return replace(replay, entry_counter=made < max(bumps, default=0), stale_view=stale)


def _swapped_after_view(source: torch.Tensor, view: torch.Tensor) -> bool:
    """A plain input's view whose storage is no longer the input's (set_() swapped the input afterwards)."""
    if is_traceable_subclass(source) or is_traceable_subclass(view):
        return False
    return storage_key(source) != storage_key(view)


def _late_no_grad_view(
    value: torch.Tensor,
    t: torch.Tensor,
    leaves: tuple[OutputLeaf, ...],
    run: FunctionalRun,
    steps: tuple[ViewStep, ...],
    source_meta: Meta,
) -> Replay | None:
    """Note [Views That Raise After A Bump]: the replay after the epilogue, where it applies (index: the caller's)."""
    record = run.swaps.views.get(id(value))
    if (
        is_traceable_subclass(value)
        or len(leaves) != 1
        or record is None
        or record.grad_enabled
        or id(t) in run.swaps.swapped_ids
        or id(t) in run.swaps.grown_ids
        or record.seq < last_bump(t, run)
    ):
        return None
    if any(s.op is torch.ops.aten.detach.default for s in steps[:-1]):
        # eager's `._base` is what the chain's detach() made, not the input
        return Replay(source=ReplaySource.INPUT, index=0, steps=steps, source_meta=source_meta)
    size, stride, offset = leaves[0].meta
    step = ViewStep(
        op=torch.ops.aten.as_strided.default, args=(size, stride, offset), kwargs=(), index=None, grad_enabled=False
    )
    if leaves[0].is_view:
        return Replay(source=ReplaySource.INPUT, index=0, steps=(step,))
    # eager's ends in a detach(), which is no view
    detach = ViewStep(op=torch.ops.aten.detach.default, args=(), kwargs=(), index=None, grad_enabled=False)
    return Replay(source=ReplaySource.INPUT, index=0, steps=(step, detach))


def cut_history_replay(
    value: torch.Tensor,
    leaves: tuple[OutputLeaf, ...],
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    bases: dict[object, tuple[int, torch.Tensor]],
) -> Replay | None:
    """Note [Output Regeneration], where it applies."""
    if is_traceable_subclass(value) or len(leaves) != 1 or leaves[0].hidden_base is not None:
        return None
    chain: list[ViewRecord] = []
    t = value
    while (record := run.swaps.views.get(id(t))) is not None:
        chain.append(record)
        t = record.source
    leaf = leaves[0]
    if leaf.source is LeafSource.INPUT_ALIAS and id(run.finals[leaf.index]) in input_by_id:
        source = run.finals[leaf.index]
        kind, index = ReplaySource.INPUT, int(input_by_id[id(source)])
    elif leaf.source is LeafSource.INTERMEDIATE_ALIAS and storage_key(value) in bases:
        index, source = bases[storage_key(value)]
        kind = ReplaySource.BASE
    else:
        return None
    if (
        not chain
        or not value.requires_grad
        or all(r.grad_enabled and r.func is not torch.ops.aten.detach.default for r in chain)
        or chain[0].seq < last_bump(source, run)
    ):
        return None
    try:
        grad_fn = value.grad_fn
    except (RuntimeError, ValueError, IndexError):
        return None
    if grad_fn is not None and _reaches_a_leaf(grad_fn):
        return None
    size, stride, offset = leaves[0].meta
    cut = (size, stride, offset)
    last: ViewStep | None = None
    if grad_fn is not None:
        # the view op the output was made by, replayed with grad on over the layout it was taken from (an error its
        # grad_fn raises names eager's op); a view() of the output's own layout where that is not known
        last = _last_view_step(value, chain[0], leaves[0].meta, run)
        cut = _source_layout(value, chain[0], leaves[0].meta) if last is not None else cut
        last = last or ViewStep(op=torch.ops.aten.view.default, args=(size,), kwargs=(), index=None, grad_enabled=True)
    steps = [ViewStep(op=torch.ops.aten.as_strided.default, args=cut, kwargs=(), index=None, grad_enabled=False)]
    steps += [last] if last is not None else []
    return Replay(source=kind, index=index, steps=tuple(steps))


def _last_view_step(value: torch.Tensor, record: ViewRecord, meta: Meta, run: FunctionalRun) -> ViewStep | None:
    """The step of the view op that made `value`, where it was taken with grad on, no in-place view op changed
    `value` since, and the layouts involved are static; else None."""
    step = view_step(record)
    own = (tuple(value.shape), tuple(value.stride()), value.storage_offset())
    static = all(isinstance(d, int) for part in (*meta[:2], *own[:2], *record.source_meta[:2]) for d in part)
    if step is None or not record.grad_enabled or not static or id(value) in run.swaps.inplace_views:
        return None
    if not isinstance(meta[2], int) or not isinstance(record.source_meta[2], int) or meta[:2] != own[:2]:
        return None
    return step


def _source_layout(value: torch.Tensor, record: ViewRecord, meta: Meta) -> Meta:
    """The layout `record`'s view was taken from, at the output's offset in the storage it is replayed on."""
    size, stride, offset = record.source_meta
    shift = int(meta[2]) - (int(value.storage_offset()) - int(offset))
    return tuple(size), tuple(stride), shift


def _reaches_a_leaf(grad_fn: Any) -> bool:
    return any(hasattr(node, "variable") for node in autograd_nodes([grad_fn]))


def _no_grad_tail(
    value: torch.Tensor, t: torch.Tensor, run: FunctionalRun, total: int, *, with_grad: bool = False, bump: int = 0
) -> int:
    """How many of the last steps of `value`'s chain from input `t` are views the program took under no_grad (or,
    `with_grad`, in either grad mode) after `t`'s last version bump, with no in-place view op on what they made
    (Note [Views That Raise After A Bump]). `bump`: the last bump, where `last_bump` does not see it all."""
    bump = max(last_bump(t, run), bump)
    count, u = 0, value
    while count < total - 1 and (record := run.swaps.views.get(id(u))) is not None:
        if (
            (record.grad_enabled and not with_grad)
            or record.seq <= bump
            or id(u) in run.swaps.inplace_views
            or id(u) in run.swaps.data_aliases
            or id(u) in run.swaps.swapped_ids
        ):
            break
        count, u = count + 1, record.source
    return count


def _bump_over_set(value: torch.Tensor, t: torch.Tensor, run: FunctionalRun) -> int:
    """The last bump of the version counter `value`, a view of input `t` taken before a set_() moved `t` off the
    view's storage, shares with `t`: `t`'s last set_() and the last write to the storage the view is on, besides
    `last_bump` of `t` on the storage it ends with (a set_() counts against the storage it left)."""
    _, leaves = flatten_subclass(value, "out") if is_traceable_subclass(value) else (None, [value])
    on_view = [run.swaps.last_bump.get(storage_key(leaf), 0) for leaf in leaves]
    sets = (run.swaps.plain_sets.get(id(t), (0, False))[0], run.swaps.wrapper_sets.get(id(t), (0, False))[0])
    return max([*sets, *on_view])


def _split_at_bump(value: torch.Tensor, t: torch.Tensor, run: FunctionalRun, total: int) -> int:
    """Note [Views That Raise After A Bump], for a chain that the program took partly before `t`'s last version
    bump, with grad enabled, and ended under no_grad after it: replayed after the epilogue, its first view would read
    the input's grad_fn, which raises where the input is a multi-output view. How many
    trailing steps to take after the epilogue; 0 where the chain is not so split."""
    tail, bump = _no_grad_tail(value, t, run, total), last_bump(t, run)
    u, skipped, grad_step = value, 0, False
    while (record := run.swaps.views.get(id(u))) is not None and id(u) not in run.swaps.swapped_ids:
        if skipped >= tail:
            seqs = [record.seq, *(r.seq for r in run.swaps.inplace_views.get(id(u), []))]
            if max(seqs) > bump:
                return 0  # made or changed after the bump, with grad enabled: not a no_grad tail
            grad_step = grad_step or record.grad_enabled
        skipped, u = skipped + 1, record.source
    return tail if tail and grad_step and u is t else 0


def last_bump(t: torch.Tensor, run: FunctionalRun) -> int:
    """When the program last advanced `t`'s version counter: for a plain input, by a write over its storage through
    its own counter family (a tensor set_() onto that storage writes it with a counter of its own, which eager's views
    of `t` do not share: `t0.set_(x); t0.fill_(1)` leaves x's counter, and a multi-output view of x made before it, as
    they were); for a subclass input, through any input of its wrapper family (`x0 = b.detach()` written, `x1 = b`
    viewed), whose wrappers have storages of their own."""
    if not is_traceable_subclass(t):
        return run.swaps.own_last_bump.get((storage_key(t), run.swaps.family_of(t)), 0)
    family = run.swaps.family_of(t)
    keys = {storage_key(u) for u in run.user_tensors if is_traceable_subclass(u) and run.swaps.family_of(u) == family}
    # also by a wrapper-level write through another member of its alias group (Note [Aliased Inputs In Training])
    leaves = flatten_subclass(t, "input")[1]
    wrapper_bumps = [run.swaps.own_wrapper_bumps.get((storage_key(leaf), family), 0) for leaf in leaves]
    return max([run.swaps.own_last_bump.get((key, family), 0) for key in keys | {storage_key(t)}] + wrapper_bumps)


def _on_replaced_storage(value: torch.Tensor, t: torch.Tensor, run: FunctionalRun) -> bool:
    """A dense leaf of `value`, a view of input `t`, is on an input's storage as received, which set_() then
    replaced in `t` (a subclass input's view). Another input may still hold that storage
    (the same PairTensor's view passed too: `t0 = x1.detach(); x1.set_(y)`, x1 = x0.view(...)): `t` as it ends is
    still not what the view was taken of."""
    own = {storage_key(f) for f in dense_leaves_of(t, "")[1]}
    originals = {storage_key(o) for o in run.originals}
    _, leaves = flatten_subclass(value, "out") if is_traceable_subclass(value) else (None, [value])
    return any(storage_key(leaf) in originals and storage_key(leaf) not in own for leaf in leaves)


def _as_received(t: torch.Tensor, first: ViewRecord, run: FunctionalRun) -> bool:
    """Was input `t` as the program received it when the view was taken from it?"""
    position = next(k for k, u in enumerate(run.user_tensors) if u is t)
    earlier_ops = any(r.seq < first.seq for r in run.swaps.inplace_views.get(id(t), []))
    swapped = run.swaps.plain_sets.get(id(t))
    # a storage swap (set_, `.data =`) before the view: the view is of the storage the epilogue gives the input
    by_data = run.swaps.data_sets.get(id(t)) if id(t) in run.swaps.swapped_by_data else None
    earlier_swap = (swapped is not None and swapped[0] < first.seq) or (by_data is not None and by_data[0] < first.seq)
    return not earlier_ops and not earlier_swap and _meta_exprs(first.source_meta) == run.initial_metas[position]


def _replays_between(value: torch.Tensor, t: torch.Tensor, steps: tuple[ViewStep, ...]) -> bool:
    """Note [Output Regeneration]: can `value`'s chain replay from input `t` with its metadata then? Not where the
    output has history; nor where the input requires grad, unless it is plain and the chain detach()es it (`.data`
    too): eager's output has no history then, nor has the replay's, whose `._base` is the replayed detach(), not
    `t` (a subclass output is rebuilt around its leaves instead, no view)."""
    if value.requires_grad:
        return False
    detached = any(s.op is torch.ops.aten.detach.default for s in steps)
    if t.requires_grad and (is_traceable_subclass(t) or not detached):
        return False
    return not is_traceable_subclass(t) or all(leaf_meta(d) == leaf_meta(t) for d in dense_leaves_of(t, "")[1])


def _all_input_alias(leaves: tuple[OutputLeaf, ...]) -> bool:
    return all(leaf.source is LeafSource.INPUT_ALIAS for leaf in leaves)


def inplace_replay(
    i: int, t: torch.Tensor, run: FunctionalRun, layout: DenseLayout, mutations: tuple[LeafMutation, ...]
) -> tuple[ViewStep, ...]:
    """The in-place view ops applied to subclass input `i`, when replaying them reproduces its final state."""
    records = run.swaps.inplace_views.get(id(t), [])
    leaves = layout.leaves_of_input[i]
    if not records or layout.trees[i] is None or (layout.same_wrapper and layout.same_wrapper[i] is not None):
        return ()  # the same object passed twice: replayed once, for its first position
    if any(mutations[j].storage_changed or mutations[j].resized for j in leaves):
        return ()
    steps = [_inplace_step(r) for r in records]
    return tuple(s for s in steps if s is not None) if all(s is not None for s in steps) else ()


def _inplace_step(record: InplaceViewRecord, set_sources: dict[int, InputIndex] | None = None) -> ViewStep | None:
    """`set_sources`: inputs a wrapper-level `set_(src)` may name as a step (Note [Wrapper Storage])."""
    if (
        set_sources is not None
        and record.func is torch.ops.aten.set_.source_Tensor
        and len(record.args) == 1
        and id(record.args[0]) in set_sources
        and not (record.grad_enabled and record.args[0].requires_grad)
    ):
        return ViewStep(
            op=record.func,
            args=(InputArg(index=set_sources[id(record.args[0])]),),
            kwargs=(),
            index=None,
            grad_enabled=record.grad_enabled,
        )
    return _make_step(record.func, record.args, record.kwargs, None, record.grad_enabled)


def _unchanged_subclass_inputs(run: FunctionalRun, input_by_id: dict[int, InputIndex]) -> dict[int, InputIndex]:
    """Subclass inputs the program leaves as they came (metadata, storages, wrapper): a set_() step may name them,
    their value at run time being what it was when the program ran the set_ (writes aside, which storage carries)."""
    out: dict[int, InputIndex] = {}
    for t, meta in zip(run.user_tensors, run.initial_metas, strict=True):
        if not is_traceable_subclass(t) or id(t) not in input_by_id or leaf_meta(t) != meta:
            continue
        if id(t) in run.swaps.inplace_views or id(t) in run.swaps.wrapper_data:
            continue
        _, leaves = flatten_subclass(t, "input")
        if all(id(leaf) not in run.swaps.swapped_ids and id(leaf) not in run.swaps.grown_ids for leaf in leaves):
            out[id(t)] = input_by_id[id(t)]
    return out


def set_source_steps(
    leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex, hidden_root: torch.Tensor | None
) -> tuple[ViewStep, ...] | None:
    """Note [Strides The Kernels Choose]: the view ops (and in-place view ops) that made `leaf`, a tensor with a layout
    of its own over the storage a set_() (or `.data =`) gave dense input `j`, from the tensor the input took then,
    where replaying them on the input's real final value gives eager's layout: the input ends with that tensor's
    layout, and neither it nor the chain's tensors changed layout or storage otherwise. `hidden_root`: the leaf's eager
    `._base`, which must be that tensor, where the output is rebuilt over one (OutputLeaf.hidden_base); else None."""
    final, swaps = run.finals[j], run.swaps
    source = swaps.layout_sources.get(id(final))
    if source is None or (hidden_root is not None and hidden_root is not source):
        return None
    same_layout = leaf_meta(source) == leaf_meta(final) and storage_key(source) == storage_key(final)
    moved = (final, source) if same_layout else ()
    if not same_layout or any(id(t) in swaps.inplace_views or id(t) in swaps.grown_ids for t in moved):
        return None
    segments: list[list[ViewStep | None]] = []
    t, upto = leaf, 1 << 62  # (in-place view ops on a tensor count until the next view was taken from it)
    while t is not source:
        record = swaps.views.get(id(t))
        if record is None or id(t) in swaps.swapped_ids or id(t) in swaps.grown_ids:
            return None
        own = [r for r in swaps.inplace_views.get(id(t), []) if record.seq < r.seq < upto]
        if any(r.func in SET_OPS or r.func is torch.ops.aten.resize_.default for r in own):
            return None
        segments.append([view_step(record), *(_inplace_step(r) for r in own)])
        t, upto = record.source, record.seq
    steps = [s for segment in reversed(segments) for s in segment]
    if id(source) in swaps.swapped_ids or not all(s is not None for s in steps):
        return None
    return tuple(s for s in steps if s is not None)


# A view op that reads only another tensor's size (view_as, expand_as) is replayed as the op taking that size: it
# reaches a subclass's dispatch whole where autograd's decomposition does not run (inside inference_mode)
_OF_OTHERS_SIZE = {
    torch.ops.aten.view_as.default: torch.ops.aten.view.default,
    torch.ops.aten.expand_as.default: torch.ops.aten.expand.default,
}


def view_step(record: ViewRecord) -> ViewStep | None:
    """The recorded view op as a step to replay; None where one of its arguments is a tensor."""
    size = record.source_meta[0]
    func, args = record.func, record.args
    if func in _OF_OTHERS_SIZE and len(args) == 1 and isinstance(args[0], torch.Tensor) and not record.kwargs:
        func, args = _OF_OTHERS_SIZE[func], (list(args[0].shape),)
    step = _make_step(func, args, record.kwargs, record.index, record.grad_enabled, size)
    if step is not None and record.index is not None:  # (one seq per output of the call: the first's names it)
        step = replace(step, call=record.seq - record.index)
    if step is not None and record.reshape and not is_traceable_subclass(record.source):
        step = replace(step, op=torch.ops.aten.reshape.default)  # eager's node: ViewRecord.reshape
    return replace(step, inference_mode=True) if step is not None and record.inference_mode else step


def _make_step(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    index: int | None,
    grad_enabled: bool,
    source_size: tuple[Any, ...] = (),
) -> ViewStep | None:
    """`source_size`: the source's size when the op ran; a nested int argument that is one of its dims is replayed
    as that dim of the source at run time (SourceSize: Note [Nested Int Dims])."""
    nested = {symint_expr(d): k for k, d in enumerate(source_size) if is_nested_int(d)}

    def convert(a: object) -> object:
        if isinstance(a, torch.SymInt):
            expr = symint_expr(a)
            return SourceSize(dim=nested[expr]) if expr in nested else expr
        if isinstance(a, list | tuple):
            return type(a)(convert(x) for x in a)
        return a

    values = [*args, *kwargs.values()]
    if any(isinstance(a, torch.Tensor) for a in pytree.tree_leaves(values)):
        return None
    return ViewStep(
        op=func,
        args=tuple(convert(a) for a in args),
        kwargs=tuple((k, convert(v)) for k, v in kwargs.items()),
        index=index,
        grad_enabled=grad_enabled,
    )


def _meta_exprs(meta: tuple[tuple[Any, ...], tuple[Any, ...], Any]) -> Meta:
    size, stride, offset = meta
    return tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset)


def final_only(t: torch.Tensor, run: FunctionalRun) -> bool:
    """No chain names `t` as it was before its in-place view ops: it is a view (never an output's `._base`, so never
    named by Note [Output Regeneration]), or they all ran before any view was taken from it
    (Note [Output Regeneration])."""
    if t._is_view():
        return True
    last = run.swaps.inplace_views[id(t)][-1].seq
    return all(r.seq > last for r in run.swaps.views.values() if r.source is t)


def detached_chains_without_grad(infos: list[OutputInfo]) -> list[OutputInfo]:
    """Replays that end in a detach() (or `.data`) and share no chain object with another output, with every step
    before it taken without grad: only the last object is observable, and the grad mode of the steps before it
    changes neither its value, its `._base` nor its history (it has none). With grad, autograd checks a view of a
    written multi-output view input, which eager took before the write (Note [Output Regeneration])."""
    tokens = Counter(token for info in infos if info.replay is not None for _, token in info.replay.marks)
    out = []
    for info in infos:
        replay = info.replay
        if (
            replay is not None
            and len(replay.steps) > 1
            and (replay.steps[-1].op is torch.ops.aten.detach.default or replay.steps[-1].own_version)
            and all(tokens[token] == 1 for _, token in replay.marks)
            and any(step.grad_enabled for step in replay.steps[:-1])
        ):
            steps = (*(replace(step, grad_enabled=False) for step in replay.steps[:-1]), replay.steps[-1])
            info = replace(info, replay=replace(replay, steps=steps))
        out.append(info)
    return out
