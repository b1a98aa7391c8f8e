"""The runtime's steps: the epilogue's plan per entry (`EpiloguePlan`, `copy_into`, `settle_version`), the steps
around the compiled call, and the output rebuild's steps (build order, tokens, holders). Each part below keeps its
own contract.

Epilogue steps around the compiled call that the analysis's rules name: the graph inputs made from the dense
leaves, accumulators held or made before the call, set_() repeated before it, the copy point and inverse view ops
of written subclass views, early view replays and their counters, and which input writes autograd does not see.

Input: the `RuntimePlan`'s analysis and layout, the real inputs of one call. Output: graph inputs, held
accumulators, replayed views, the epilogue's per-entry decisions (`early_grad_sets`, `copy_point`,
`training_roots`). Invariants: imports nothing from the analysis, the tracing or the eager record; the analysis
imports from here where it decides by the same rule (the graph inputs it traces with, the copy points it refuses
without, the set_() it repeats before the call).

Part: The epilogue's per-entry plan, and the writes of new values into inputs that every runner of an entry makes.

Input: a `RuntimePlan`. Output: `EpiloguePlan` (what the epilogue does, decided once per entry); `copy_into` and
`settle_version`, the input writes and version-counter fixes the generic runner (call.py) and the generated one
(straight_line.py) share. Invariants: a write autograd saw in eager is recorded here too, one it did not see is made
under no_grad (Note [Input Updates]); a settled version counter ends at eager's count (runtime/steps.py: Version Counters
As Eager's).

Part: Steps of the output rebuild that the analysis's rules name: version counters around replays of bumped views,
leaves set_() onto inputs or onto foreign storages, holders of outputs set_() under grad, and the order outputs
are built in by the object states their view chains pass.

Input: the real inputs, dense leaves and regenerated outputs of one call, and the `OutputInfo`/`Replay` records of
the plan. Output: rebuilt tensors, the build order. Invariants: imports nothing from the analysis, the tracing or
the eager record; the analysis imports the mark tokens from here (`state_token`, `state_of`), so that the marks it
records and the states the runtime reads are one encoding.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch.autograd.graph import GradientEdge, get_gradient_edge

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.runtime.plan import MetaEvaluator, RuntimePlan, requires_grad_changes
from subclassaot.schemas import (
    AliasGroup,
    AliasGroupRef,
    Analysis,
    AssignedWrite,
    DenseIndex,
    DenseLayout,
    GradSetNode,
    LeafMutation,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    StorageResize,
    UpdateKind,
    ViewStep,
)
from subclassaot.torch_internals import (
    assign_wrapper_metadata,
    get_version,
    grad_fn_raises,
    is_plain_autograd_view,
    leaf_view_of_its_own,
    refresh_view_grad_fn,
    set_to_tensor,
    set_version,
    symint_expr,
    with_bits,
    without_bits,
    wrapper_grad_accumulator,
)

aten = torch.ops.aten

# Version Counters As Eager's (referenced as "runtime/steps.py: Version Counters As Eager's")
# Eager advances a tensor's version counter once per in-place op (data or in-place view op: t_(), set_(), resize_ to
# another size, ctx.mark_dirty), on the counter every view and detach() of it shares; `.data` has a counter of its own,
# and ops a wrapper subclass runs on its inner tensors, below autograd, leave the wrapper's alone. Users read the count
# (`x._version`; autograd's saved-tensor check compares it), so the compiled call gives counters eager's count, not
# merely a moved one. The functional run counts eager's bumps per counter family (`SwapRecord.note_bump`; one
# dispatched op advances a counter once, however the run rewrites it), and, decided at compile time:
# - each input leaf and wrapper the epilogue settles is set to its count before the call plus eager's bumps
#   (`settle_version`; one `_unsafe_set_version_counter` call in a generated runner), whatever the epilogue's own
#   copy_, as_strided_ and set_ did to it;
# - outside inference_mode an op reading an inference tensor advances its fresh results' counters, and a
#   torch.library custom op each argument its `mutates_args` names once (bumps_written_args) and as often again as
#   its body writes a plain one: eager's kernels are asked how often (eager/kernel_counts.py, which the eager record
#   applies too; not for symbolic sizes, large operands, random ops or a kernel refusing zeros);
# - a fresh output eager wrote gets eager's count as it is built, where no other output shares its counter but views
#   replayed from it, after it (Analysis.output_versions); so does an intermediate base or intermediate subclass root
#   whose views are the only outputs on its counter, before they are replayed from it (base_versions, root_versions);
#   each root is given its count less one for each in-place view op (t_(), resize_, set_()) a replay from it repeats,
#   which advances the shared counter again (once per object: `return t, t` builds t once, OutputKind.SAME_AS, and a
#   chain object an earlier replay made is reused, its ops not repeated: Replay.marks); a detach() output over an
#   input takes the input's count;
# - one that requires grad from a node of the graph gets it in the training Function's forward, before the Function
#   saves it (graded_output_versions, the graded bases and roots: `function_counts`): autograd's check of a save
#   compares the count at the save, which eager's saving node took after the program's writes and the graph's took at
#   0. On the eager backend's native path (Note [Training Without A Function]) the runtime gives it once the graph
#   ran, as the others', where no save of the graph's is over it (`records_as_eager` sends the rest to the Function:
#   `native_counts`); one the program set_() under grad is returned as a holder of its own, a new tensor, whose set_
#   lands on that count (`land_on`, as the epilogue's counted steps below: set_under_grad_holder);
# - an output view replayed from an input after the epilogue with in-place view ops (Replay.keeps_counter), or set_()
#   by the runtime (Replay.then_set), gives the input its count back where no history can go stale (a then_set view
#   also where its history, stale by the set_() as eager's, reads fine: read first, so rebuilt; a view taken after
#   the epilogue then stays fresh, as eager's taken after the set_()); a keeps_counter view of an input requiring grad
#   is instead made at eager's count at the end, less the in-place view ops its replay repeats, whose repeat lands on
#   eager's count (given back after the replay, its history would read stale). Eager's count is the input's at entry
#   plus eager's bumps (`kept_counter_bumps`), not the one it has then: the epilogue keeps a wrapper's as it moved
#   where views are replayed from it (EpiloguePlan.viewed_wrappers), behind eager's, and made at that less the
#   repeats the view went below the count eager's was taken at (an in-place view op comes after its view is taken, so
#   eager's count less them never does). Only the repeats the replay makes count: the ops of a chain object an earlier
#   replay made, which it reuses (Note [Output Regeneration]), are not made again (`regenerate.own_bumps`).
# Known gaps: views replayed with history, or advanced to make them stale (Replay.bump_after), run ahead of eager's
# count (a fresh root's count is given less one for each stale view of it, whose build advances the shared counter;
# one replayed from an output over an input is made at the input's counter at entry instead: Replay.root_input);
# outputs sharing an intermediate's counter otherwise keep their own count (a root counted before its views lost their
# staleness, a base with a stale or set_() view); a result read from an inference tensor whose count the kernel
# could not be asked (above). The parity oracle's
# "counted" mode (tools/parity.py) reflects them; its default stays "moved". An output that requires grad from the
# graph of a program making new leaves (which compiles only on the native path), or one built outside the training
# Function, keeps the count it is built with; an input that is a view requiring grad whose counter moved as eager's
# keeps its count where eager recorded a node on its history (a write or set_() with grad: the epilogue's repeat of it
# made the view's grad_fn anew at its count, and moving it again regenerates it out of its order;
# EpiloguePlan.recorded). One rule gives such a plain input eager's count: the epilogue's last step on its counter
# (CountedStep: the set_() under grad repeated before the call, the copy of a write with grad or a Function's
# mark_dirty, the set_() repeated after the copies and layouts) makes the node eager's last op made, so the counter
# is set to eager's count less one just before it (`land_on`), and the node is made at eager's count
# (EpiloguePlan.counted; a synthetic base's copy where every member of its group lands on one count); where that step
# makes no node of eager's (a layout replay, a set_() whose node is eager's write's), none is given. Where eager recorded none (every write, in-place
# view op, set_(), resize_ and mark_dirty under no_grad), or advanced the counter after its last op that may record one
# (LeafMutation.bumps_after_grad: eager's grad_fn is made anew at the next read), nothing the call made has an edge to
# that grad_fn: it is stale at the end in eager and in ours alike, and the count is eager's (a subclass input, whose
# count EpiloguePlan.recorded_wrappers and viewed_wrappers keep, still runs behind there; viewed_wrappers names only
# those with a view made before the epilogue whose eager grad_fn reads fine, Replay.eager_raises). An early replay
# made at the input's advanced count is made at eager's final count, the input's plus eager's bumps of it
# (Replay.counter_at_end).


def own_stand_in_inputs(
    layout: DenseLayout, passed: Sequence[bool], gains: Container[int], gaining: Container[int] | None = None
) -> frozenset[int]:
    """Plain inputs (tensor positions) in an alias group that require no grad as passed and that the program makes
    require grad (`gains`), beside another member of the group that requires grad as passed, or beside another plain
    one the program makes require grad too (`gaining`, the inputs it does; `gains` where None): each runs as a
    stand-in of its own, a detached leaf over the group's storage, and gets a gradient of its own, as eager's leaf
    does (Note [Aliased Inputs In Training])."""
    position = {layout.leaves[ls[0]].owner: i for i, ls in enumerate(layout.leaves_of_input) if ls}
    gaining = gains if gaining is None else gaining
    beside = []
    for g in layout.groups:
        members = {position[layout.leaves[m].owner] for m in g.members}
        gained = [i for i in members if i in gaining and not passed[i] and layout.trees[i] is None]
        # (or alone over a storage that resize_() grows: a leaf of its own over the storage, its flag at the new size)
        beside.append(any(passed[i] for i in members) or len(gained) > 1 or grown_alone(g))
    return frozenset(
        i
        for i, leaves in enumerate(layout.leaves_of_input)
        if i in gains
        and not passed[i]
        and layout.trees[i] is None
        and any(leaves[0] in g.members and b for g, b in zip(layout.groups, beside, strict=True))
    )


def grown_alone(group: AliasGroup) -> bool:
    """Is `group` one input over its whole storage that it covers, element for element: nothing lies outside it
    for the program to reach but the tail a resize_() grows (Note [as_strided On Inputs])?"""
    if not group.whole_storage or group.freed or len(group.members) != 1:
        return False
    size, stride, offset = group.member_meta[0]
    if not all(isinstance(d, int) for d in (*size, *stride, offset)):
        return False
    numel = math.prod(cast("tuple[int, ...]", size))
    extent = 1 + sum((n - 1) * abs(cast(int, st)) for n, st in zip(size, stride, strict=True)) if numel else 0
    return offset == 0 and numel == extent == group.base_numel


def own_accumulator_inputs(layout: DenseLayout, values: Sequence[object]) -> frozenset[int]:
    """Plain inputs (tensor positions, `values` the real ones) in an alias group that are leaf views requiring grad
    by a flag of their own (`b[0].requires_grad_()` of a base requiring none, or a view taken under no_grad given
    requires_grad_()): eager's is a leaf with an accumulator of its own, its `._base` no autograd ancestor. Where it
    would not be its group's autograd root (`graph_example_inputs`: its `._base` requires grad, or another input of
    the group does), it runs as a stand-in of its own, as own_stand_in_inputs', a Function input whose gradient
    reaches that accumulator (Note [Aliased Inputs In Training]). So does a plain leaf that is no view beside a
    member with a history (`_detached_leaf_beside_history`), or beside another such leaf that is the group's root
    (`_second_leaf`)."""
    position = {layout.leaves[ls[0]].owner: i for i, ls in enumerate(layout.leaves_of_input) if ls}
    found = set()
    for group in layout.groups:
        inputs = {position[layout.leaves[m].owner] for m in group.members}
        for i in inputs:
            value = values[i]
            if layout.trees[i] is not None or not isinstance(value, torch.Tensor):
                continue
            others = [o for j in sorted(inputs) if isinstance(o := values[j], torch.Tensor) and o is not value]
            earlier = [o for j in sorted(inputs) if j < i and isinstance(o := values[j], torch.Tensor)]
            if _detached_leaf_beside_history(value, others) or _second_leaf(value, others, earlier):
                found.add(i)
                continue
            if not leaf_view_of_its_own(value):
                continue
            base = value._base
            beside = any(o.requires_grad for o in others)
            if beside or (base is not None and base.requires_grad):
                found.add(i)
    return frozenset(found)


def _detached_leaf_beside_history(value: torch.Tensor, others: Sequence[torch.Tensor]) -> bool:
    """A leaf that requires grad and is no view (`b.detach().requires_grad_()`) beside a member with a history
    (`b`, a non-leaf that requires grad), none of them its view: the group's autograd root is that member's, which
    eager's leaf is not."""
    if value._is_view() or not value.is_leaf or not value.requires_grad or any(o._base is value for o in others):
        return False
    return any(o.requires_grad and not o.is_leaf for o in others)


def _second_leaf(value: torch.Tensor, others: Sequence[torch.Tensor], earlier: Sequence[torch.Tensor]) -> bool:
    """A leaf that requires grad and is no view (`b.detach().requires_grad_()`) beside another such leaf (`b`), none
    of the others its view: each is a leaf with an accumulator of its own in eager. One of them is the group's
    autograd root (the one the others' views are of, else the first passed); each other runs as a stand-in of its own."""
    if not _own_leaf_no_view(value) or any(o._base is value for o in others):
        return False
    leaves = [o for o in others if _own_leaf_no_view(o) and o is not value]
    return any(any(v._base is o for v in others) for o in leaves) or any(o is leaf for o in earlier for leaf in leaves)


def _own_leaf_no_view(t: torch.Tensor) -> bool:
    return not t._is_view() and t.is_leaf and t.requires_grad


def graph_example_inputs(
    layout: DenseLayout, dense_values: Sequence[torch.Tensor], own: Container[int] = ()
) -> list[torch.Tensor]:
    """The tensors standing for each graph placeholder (fake at compile time, real at run time); `own`: dense leaves
    of own_stand_in_inputs, never taken as a group's autograd root."""
    out = []
    for item in layout.graph_inputs:
        if isinstance(item, AliasGroupRef):
            group = layout.groups[item.group]
            # (every member a stand-in of its own: a base that requires no grad, over their storage)
            members = [dense_values[m] for m in group.members if m not in own] or [
                dense_values[m].detach() for m in group.members
            ]
            # From the members' autograd root (eager's `._base`), so that in training the gradient of the base
            # reaches the whole storage (Note [Aliased Inputs In Training]); offsets are absolute either way. A
            # member that requires grad names it (the first may be a detach() of it, with no history).
            first = next((m for m in members if m.requires_grad), members[0])
            base = first._base
            # (not a base set_() moved the member off: autograd names it, the storage is another; nor a base of
            # another dtype, `c` of `c.imag`: the group counts elements in the members' dtype; nor the base of a
            # leaf view that requires grad where its base does not: that view is its own autograd root)
            same_storage = (
                base is not None
                and base.dtype == first.dtype
                and base.untyped_storage()._cdata == first.untyped_storage()._cdata
            )
            root = (
                base if base is not None and same_storage and (base.requires_grad or not first.requires_grad) else first
            )
            stored = symint_expr(root.untyped_storage().nbytes() // root.element_size())
            if group.whole_storage and isinstance(stored, int) and stored < group.base_numel:
                # A fake with no elements has no storage: any fresh base of the real size traces the same, since
                # the group holds every input leaf of that storage. At run time the guards check its size.
                out.append(root.new_empty((group.base_numel,)).requires_grad_(root.requires_grad))
                continue
            # (the storage as it is: each member takes its own conjugate and negative bits on top, AliasGroup)
            out.append(without_bits(root.as_strided((group.base_numel,), (1,), 0)))
        else:
            out.append(dense_values[item])
    return out


def hold_accumulators(values: Sequence[object], indices: Sequence[int]) -> list[GradientEdge]:
    """The gradient accumulators of the flat inputs at `indices` (leaves that require grad), made now if none is
    alive: the caller holds them while the epilogue and the output replays run (Note [Gradient Accumulators Of
    Leaves])."""
    held = []
    for i in indices:
        x = values[i]
        if isinstance(x, torch.Tensor) and x.is_leaf and x.requires_grad:
            held.append(get_gradient_edge(x))
    return held


def make_assigned_accumulators(values: Sequence[object], sizes: Sequence[tuple[int, list[int]]]) -> list[GradientEdge]:
    """Note [Gradient Accumulators Of Leaves]: for each (flat input, size), the input's accumulator, made
    at that size if none is alive; the caller holds them until the compiled Function has taken the inputs."""
    held = []
    for i, size in sizes:
        x = values[i]
        if not isinstance(x, torch.Tensor) or not x.is_leaf or not x.requires_grad or list(x.shape) == size:
            continue
        if not is_traceable_subclass(x):  # a plain leaf (Note [Leaves Laid Out Anew Under no_grad])
            before = x.detach()  # shares x's storage, metadata and version counter
            with torch.no_grad():
                x.data = torch.empty((), dtype=x.dtype, device=x.device).expand(size)
            held.append(get_gradient_edge(x))
            with torch.no_grad():
                x.data = before
            continue
        if x.untyped_storage().nbytes() < x.element_size():
            continue  # the shell would move the wrapper to a new storage (an input with no elements: a known gap)
        old = (list(x.shape), list(x.stride()), int(x.storage_offset()))
        assign_wrapper_metadata(x, size, [0] * len(size), 0)
        held.append(wrapper_grad_accumulator(x))
        assign_wrapper_metadata(x, *old)
    return held


def early_grad_sets(analysis: Analysis, layout: DenseLayout) -> tuple[int, ...]:
    """Tensor inputs whose set_() under grad the runtime repeats before the compiled call (Note [set_ Under
    Grad])."""
    after = analysis.read_after_grad_set or (False,) * len(layout.trees)
    return tuple(
        t
        for t, leaves in enumerate(layout.leaves_of_input)
        if after[t]
        and any(analysis.mutations[j].set_under_grad for j in leaves)
        and not (layout.trees[t] is None and analysis.mutations[leaves[0]].set_source is not None)
    )


# out-of-place inverses of the in-place view ops (positional arguments only), applied to the op's result
_UNDO: dict[object, Callable[..., torch.Tensor]] = {
    aten.t_.default: lambda x: x.t(),
    aten.transpose_.default: lambda x, a, b: x.transpose(a, b),
    aten.unsqueeze_.default: lambda x, d: x.squeeze(d),
}


def copy_point(layout: DenseLayout, analysis: Analysis, i: int) -> int | None:
    """For subclass input `i`, a view whose new value comes from the compiled Function and whose in-place view ops
    the epilogue replays: after how many of them the epilogue copies the value in, or None where it cannot be
    eager's (Note [Stale View Functions])."""
    k = analysis.write_steps[i] if analysis.write_steps else None
    steps = analysis.inplace_replay[i]
    grouped = {m for g in layout.groups for m in g.members}
    if k is None or analysis.wrapper_data[i] is not None or any(j in grouped for j in layout.leaves_of_input[i]):
        return None
    if any(step.op not in _UNDO or step.kwargs for step in steps):
        return None
    return k


def undo_steps(
    value: torch.Tensor, steps: Sequence[ViewStep], ev: MetaEvaluator, symbols: dict[str, int]
) -> torch.Tensor:
    """`value`, which has the layout after `steps`, viewed back to the layout before them (out of place, recorded
    by autograd): the inverse of each step, last first."""
    for step in reversed(steps):
        args = ev.arg(step.args, symbols)
        assert isinstance(args, tuple), "BUG: view step arguments are a tuple"
        value = _UNDO[step.op](value, *args)
    return value


def epilogue_write_hidden(m: LeafMutation, kind: UpdateKind) -> bool:
    """The epilogue writes this input's new value (an update of `kind`) under no_grad (see runtime.epilogue_plan.copy_into):
    no gradient flows from the input back into the graph's output for it."""
    if kind is UpdateKind.FINAL and m.assigned_write in (AssignedWrite.AFTER, AssignedWrite.KEPT):
        return False  # Note [History Kept Through .data =]
    if kind is UpdateKind.FINAL and m.history_from_base:
        return True  # Note [Input Updates]
    if kind is UpdateKind.FINAL and m.history_of_its_own:
        return False  # copied in with grad: Note [Inputs Written In Training]
    return not m.autograd_visible or m.hidden_from_autograd or m.storage_changed


def base_write_hidden(mutations: Sequence[LeafMutation], members: Sequence[int]) -> bool:
    """The epilogue writes the new value of a synthetic base with these members (DenseIndex) under no_grad (see
    runtime.call._copy_base): no member's write is one autograd records through the member itself. No gradient
    flows from the base back into the graph's output for it then. A member that left the storage a resize_() grew
    (`LeafMutation.left_grown`) wrote values there without a history."""
    stayed = [m for m in members if not mutations[m].left_grown]
    return not (
        any(mutations[m].autograd_visible and not mutations[m].hidden_from_autograd for m in stayed)
        and any(mutations[m].visible_through_self for m in stayed)
    )


def bumped_input_sources(infos: Sequence[OutputInfo]) -> tuple[int, ...]:
    """The inputs (flat value indexes) whose counter at entry the runtime keeps for Replay.bump_after."""
    found = {
        info.replay.index
        for info in infos
        if info.replay is not None
        and (info.replay.bump_after or info.replay.entry_counter or info.replay.stale_view)
        and info.replay.source is ReplaySource.INPUT
    }
    found |= {
        info.replay.root_input for info in infos if info.replay is not None and info.replay.root_input is not None
    }
    return tuple(sorted(found))


def kept_counter_bumps(plan: RuntimePlan) -> dict[int, int]:
    """Per input (flat value index) a Replay.keeps_counter view is replayed from: eager's bumps of its counter, which
    its count at entry plus these makes eager's count at the end (runtime/steps.py: Version Counters As Eager's)."""
    analysis, layout = plan.analysis, plan.layout
    position: dict[int, int] = {i: t for t, i in enumerate(plan.flat.tensor_indices)}
    found: dict[int, int] = {}
    for info in analysis.outputs:
        if info.replay is not None and info.replay.keeps_counter:
            t = position[info.replay.index]
            own = layout.trees[t] is None  # (a plain input: its dense leaf's counter; a subclass: its wrapper's)
            mutation = analysis.mutations[layout.leaves_of_input[t][0]] if own else None
            found[info.replay.index] = analysis.wrapper_version_bumps[t] if mutation is None else mutation.version_bumps
    return found


def counters_at_entry(
    values: Sequence[object], bumped: Sequence[int], kept: dict[int, int]
) -> tuple[dict[int, int], dict[int, int]]:
    """Per input, as the call starts: the counter of each of `bumped` (bumped_input_sources), and eager's count at the
    end of each of `kept` (kept_counter_bumps: its counter plus eager's bumps)."""
    entry = {i: get_version(cast(torch.Tensor, values[i])) for i in bumped}
    return entry, {i: get_version(cast(torch.Tensor, values[i])) + n for i, n in kept.items()}


def replay_early(
    heads: Sequence[tuple[int, Replay]], values: Sequence[object], make: Callable[[Replay], torch.Tensor]
) -> tuple[dict[int, torch.Tensor], dict[int, int], list[int]]:
    """The early replays `heads` (output index, replay), each made by `make`; per input of a replay with
    Replay.counter_at_end, the count to give it after the epilogue; and the counters lowered for the graph's run
    (`_lower_early_bumps`) (Note [Views That Raise After A Bump])."""
    made: dict[int, torch.Tensor] = {}
    at_end: dict[int, int] = {}
    came = [get_version(v) if isinstance(v := values[r.index], torch.Tensor) else 0 for _, r in heads]
    for o, replay in heads:
        source = values[replay.index]
        if not replay.counter_at_end or not isinstance(source, torch.Tensor):
            made[o] = make(replay)
            continue
        now = get_version(source)
        at_end.setdefault(replay.index, now + replay.counter_at_end)
        set_version(source, at_end[replay.index])
        made[o] = make(replay)
        set_version(source, now)
    return made, at_end, _lower_early_bumps(heads, values, came)


def _lower_early_bumps(heads: Sequence[tuple[int, Replay]], values: Sequence[object], came: Sequence[int]) -> list[int]:
    """After `replay_early`, before the graph: per early replay, its input's counter now, where the replay's in-place
    view ops moved it from `came` (its count before them) so that the input's grad_fn raises, given back `came` until
    the graph ran (`raise_early_bumps`); -1 for the others (Note [Views That Raise After A Bump]). A view of the
    default kind is not read: its read cannot raise, and would rebuild its history now, at the layout it has before
    the epilogue, where eager's is rebuilt at its first read after the call, at the layout a `.data =` gave it."""
    now: list[int] = []
    for (_, replay), before in zip(heads, came, strict=True):
        source = values[replay.index]
        moved = (
            isinstance(source, torch.Tensor)
            and get_version(source) != before
            and not is_plain_autograd_view(source)
            and grad_fn_raises(source)
        )
        now.append(get_version(cast(torch.Tensor, source)) if moved else -1)
        if moved:
            set_version(cast(torch.Tensor, source), before)
    return now


def raise_early_bumps(heads: Sequence[tuple[int, Replay]], values: Sequence[object], now: Sequence[int]) -> None:
    """After the graph: the counters `replay_early` lowered, as the early replays left them."""
    for (_, replay), version in zip(heads, now, strict=True):
        if version >= 0:
            set_version(cast(torch.Tensor, values[replay.index]), version)


def settle_early_counters(
    at_end: dict[int, int], values: Sequence[object], entry_views: Sequence[tuple[torch.Tensor, torch.Tensor]] = ()
) -> None:
    """After the epilogue: the counts of `replay_early` (Note [Views That Raise After A Bump]); then, every counter at
    its final count, the histories of `entry_views` (`entry_aliases`) rebuilt at the layout they came with, as eager's
    read after the program's last bump rebuilt them (Note [Stale View Functions]): each view takes its alias's data
    for the read of its grad_fn, then the data it was assigned back (`.data =` bumps no version, keeps the grad_fn)."""
    for i, version in at_end.items():
        source = values[i]
        assert isinstance(source, torch.Tensor), "BUG: an early replay of a value that is no tensor"
        set_version(source, version)
    for view, entry in entry_views:
        assigned = view.detach()
        view.data = entry
        refresh_view_grad_fn(view)
        view.data = assigned


def entry_rebuilt_views(plan: RuntimePlan) -> list[int]:
    """The flat positions of the plain view inputs whose history eager rebuilt at the layout they came with and
    keeps through their `.data =` (LeafMutation.rebuilt_at_entry_layout: Note [Stale View Functions])."""
    layout, mutations = plan.layout, plan.analysis.mutations
    return [
        plan.flat.tensor_indices[t]
        for t, leaves in enumerate(layout.leaves_of_input)
        if layout.trees[t] is None and any(mutations[j].rebuilt_at_entry_layout for j in leaves)
    ]


def entry_aliases(values: Sequence[object], positions: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Before the compiled call: each input at `positions` (`entry_rebuilt_views`) and an alias of it as it came."""
    return [(v, v.detach()) for v in (cast(torch.Tensor, values[i]) for i in positions)]


def training_roots(analysis: Analysis) -> tuple[Replay, ...]:
    """The distinct intermediate subclass roots the outputs replay from, in output order (Note [Output Regeneration])."""
    seen: dict[tuple[int, ...], Replay] = {}
    for info in analysis.outputs:
        r = info.replay
        if info.kind is OutputKind.TENSOR and r is not None and r.source is ReplaySource.WRAPPER:
            seen.setdefault(r.root_bases, r)
    return tuple(seen.values())


def grow_storages(
    resizes: Sequence[StorageResize], dense: Sequence[torch.Tensor], ev: MetaEvaluator, symbols: dict[str, int]
) -> None:
    """Before the compiled call: the program's re-allocation of inputs' storages, where they have fewer bytes (Note
    [Storage Swaps By Rebinding])."""
    for r in resizes:
        if r.grow is not None:
            storage = dense[r.leaf].untyped_storage()
            nbytes = ev.dim(r.grow, symbols)
            if storage.nbytes() < nbytes:
                storage.resize_(nbytes)


def settle_storages(
    resizes: Sequence[StorageResize],
    storages: Sequence[torch.UntypedStorage],
    ev: MetaEvaluator,
    symbols: dict[str, int],
) -> None:
    """After the epilogue and the outputs: the program's last storage resize_ of each input's storage as passed (its
    free), `storages[k]` that of `resizes[k]`, taken before the call (a set_() may have moved the input since); none
    where a tensor's resize_() grew the storage after it (the epilogue grew the real one, as eager's)."""
    for r, storage in zip(resizes, storages, strict=True):
        if r.final is None:
            continue
        nbytes = ev.dim(r.final, symbols)
        if storage.nbytes() != nbytes:
            storage.resize_(nbytes)


class CountedStep(enum.Enum):
    """The epilogue's step that makes a plain input's last node, landing on eager's count (EpiloguePlan.counted)."""

    EARLY_SET = "early set_"  # its set_() under grad, repeated before the compiled call (early_grad_sets)
    # the new value of its alias group's synthetic base, whose counter its members share (given where every member
    # lands there on one count)
    BASE_COPY = "base copy"
    ORIGINAL_COPY = "original copy"  # its new value, with its original layout
    FINAL_COPY = "final copy"  # its new value, with its final layout
    SET = "set_"  # its set_() under grad, repeated after the copies (grad_sets, grad_swaps)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpiloguePlan:
    """What the epilogue does, decided once per entry so that the per-call path only loops over real work."""

    base_copies: tuple[tuple[int, int], ...]  # (graph input, graph output) for alias-group bases
    original_copies: tuple[tuple[int, int], ...]  # (dense leaf, graph output): values of the original storage
    metadata: tuple[int, ...]  # dense leaves whose metadata or storage changes
    inplace_ops: tuple[int, ...]  # tensor inputs whose in-place view ops are replayed on the real input
    # tensor inputs whose in-place view ops or `.data =` assignments are replayed (Note [Wrapper Storage])
    reshaped: tuple[int, ...]
    final_copies: tuple[tuple[int, int], ...]  # (dense leaf, graph output): values with the final metadata
    versions: tuple[int, ...]  # dense leaves whose version counter is settled to eager's
    # ... of those, the ones eager recorded a node on (a write or set_() with grad) and advanced no more after: a view
    # requiring grad whose counter moved as eager's keeps its count (settle_version)
    recorded: frozenset[int] = frozenset()
    # ... and the wrappers of those (tensor inputs, of `wrappers`) with a leaf eager recorded a node on
    recorded_wrappers: frozenset[int] = frozenset()
    grad_sets: tuple[int, ...]  # tensor inputs set_() under grad: Note [set_ Under Grad]
    # (dense leaf, step) of the plain inputs of `recorded` whose last node the epilogue makes by `step` (CountedStep):
    # the counter is set to eager's count less one just before that step, whose bump then lands on eager's count as it
    # makes the node (runtime/steps.py: Version Counters As Eager's)
    counted: frozenset[tuple[int, CountedStep]] = frozenset()
    wrappers: tuple[int, ...]  # tensor inputs (subclasses) whose own metadata or version changes
    # plain tensor inputs set_() to a value requiring grad: See Note [Inputs Written In Training]
    grad_swaps: tuple[int, ...] = ()
    # (tensor input, copy point) where a view's value is copied in before some of its replayed in-place view ops
    # (Note [Stale View Functions]; applied when the real input is a view)
    copy_points: tuple[tuple[int, int], ...] = ()
    # grad_sets repeated before the compiled call instead (Note [set_ Under Grad])
    early_grad_sets: tuple[int, ...] = ()
    # grad_sets of plain inputs repeated before their metadata replay: an in-place view op with grad changed the
    # input's layout after its last set_() under grad (Note [set_ Under Grad])
    grad_sets_first: tuple[int, ...] = ()
    # the dense leaves of plain inputs relaid with grad right after their set_() under grad (GradSetNode.LAYOUT; their
    # set_() repeated early or first), of `metadata` even where their layout ends as it came (`t_()` of a tensor of
    # one dim or none): eager's layout op made a node over the set_'s all the same, which the epilogue's relayout
    # with grad makes too (Note [Epilogue Nodes In Eager's Order])
    layout_nodes: frozenset[int] = frozenset()
    # wrappers that outputs replayed before the epilogue view, whose grad_fn eager's reads: a counter moved again
    # would make theirs regenerate, or raise (`_kept_by`)
    viewed_wrappers: frozenset[int] = frozenset()
    # reshaped inputs the program makes require grad: eager ran their in-place view ops before the flag or under
    # no_grad (one with grad on a leaf requiring grad raises), so none recorded a node (Note [Inputs Written In
    # Training]); the epilogue replays them under no_grad
    reshaped_gaining_grad: frozenset[int] = frozenset()

    @property
    def empty(self) -> bool:
        return (
            not (self.base_copies or self.original_copies or self.metadata or self.final_copies or self.versions)
            and not self.wrappers
            and not self.reshaped
            and not self.grad_sets
            and not self.grad_swaps
        )


def _grows_under(m: LeafMutation) -> bool:
    """resize_() grew the leaf's storage (through it, or through a view of it, under it): the epilogue grows the real
    storage in place (Note [Storage Swaps By Rebinding])."""
    return m.resized and m.new_storage_numel is not None


def epilogue_plan(plan: RuntimePlan) -> EpiloguePlan:
    analysis, updates = plan.analysis, plan.graph_outputs.updates
    by_kind = {kind: tuple((u.target, k) for k, u in enumerate(updates) if u.kind is kind) for kind in UpdateKind}
    replayed = {t for t, steps in enumerate(analysis.inplace_replay) if steps}
    same = plan.layout.same_wrapper
    by_ops = {
        j
        for t in range(len(plan.layout.trees))
        if t in replayed or (same and same[t] in replayed)
        for j in plan.layout.leaves_of_input[t]
    }
    wrappers = tuple(
        t
        for t, (tree, after) in enumerate(zip(plan.layout.trees, analysis.wrapper_meta_after, strict=True))
        if tree is not None and (after is not None or analysis.wrapper_version_bumps[t])
    )
    recorded = frozenset(j for j, m in enumerate(analysis.mutations) if _recorded(m) and not m.bumps_after_grad)
    grad_sets = tuple(
        t
        for t, leaves in enumerate(plan.layout.leaves_of_input)
        if any(analysis.mutations[j].set_under_grad for j in leaves)
    )
    grad_swaps, early, first = _grad_swaps(plan), early_grad_sets(analysis, plan.layout), _grad_sets_first(plan)
    layout_nodes = frozenset(plan.layout.leaves_of_input[t][0] for t in _relaid_after_grad_sets(plan))
    layout_nodes |= _relaid_last(plan)  # (a plain view input's own in-place view op too: LeafMutation.relaid_last)
    return EpiloguePlan(
        base_copies=by_kind[UpdateKind.BASE],
        original_copies=by_kind[UpdateKind.ORIGINAL],
        metadata=tuple(
            j
            for j, m in enumerate(analysis.mutations)
            if (m.metadata or m.storage_changed or m.final_bits or _grows_under(m) or j in layout_nodes)
            and j not in by_ops
        ),
        inplace_ops=tuple(sorted(replayed)),
        reshaped=tuple(sorted(replayed | {t for t, d in enumerate(analysis.wrapper_data) if d is not None})),
        final_copies=by_kind[UpdateKind.FINAL],
        versions=tuple(j for j, m in enumerate(analysis.mutations) if m.any or m.version_bumped),
        recorded=recorded,
        recorded_wrappers=frozenset(
            t for t in wrappers if any(_recorded(analysis.mutations[j]) for j in plan.layout.leaves_of_input[t])
        ),
        wrappers=wrappers,
        grad_sets=grad_sets,
        grad_swaps=grad_swaps,
        reshaped_gaining_grad=frozenset(requires_grad_changes(plan)[0]),
        early_grad_sets=early,
        grad_sets_first=first,
        layout_nodes=layout_nodes,
        counted=_counted_steps(plan, recorded, (early, first, grad_sets, grad_swaps, replayed)),
        viewed_wrappers=frozenset(
            t for t in wrappers if any(_kept_by(info.replay, plan.flat.tensor_indices[t]) for info in analysis.outputs)
        ),
        copy_points=tuple((t, k) for t in sorted(replayed) if (k := copy_point(plan.layout, analysis, t)) is not None),
    )


def _kept_by(replay: Replay | None, index: int) -> bool:
    """Is `replay` an output view of the flat input `index` made before the epilogue settles the input's counter,
    whose grad_fn a move of it would make regenerate where eager's reads fine (EpiloguePlan.viewed_wrappers)? Not one
    built after the epilogue (made at the settled count), nor one eager's raises at the end (Replay.eager_raises: the
    move past the count it was made at makes it raise, as a later write or in-place view op made eager's)."""
    return (
        replay is not None
        and replay.source is ReplaySource.INPUT
        and replay.index == index
        and replay.before_epilogue
        and not replay.eager_raises
    )


def _grad_sets_first(plan: RuntimePlan) -> tuple[int, ...]:
    """Plain tensor inputs whose set_() under grad the epilogue repeats before it replays their new layout, which an
    in-place view op with grad gave them after that set_() (Note [set_ Under Grad])."""
    early = early_grad_sets(plan.analysis, plan.layout)
    return tuple(t for t in _relaid_after_grad_sets(plan) if t not in early)


def _relaid_after_grad_sets(plan: RuntimePlan) -> tuple[int, ...]:
    """Plain tensor inputs whose history ends on the node of an in-place view op with grad made right after their
    set_() under grad (GradSetNode.LAYOUT), the set_() repeated before the compiled call or in the epilogue: the
    epilogue's relayout with grad makes that node, whether the layout changed or not (Note [Epilogue Nodes In Eager's
    Order])."""
    analysis, layout = plan.analysis, plan.layout
    return tuple(
        t
        for t, leaves in enumerate(layout.leaves_of_input)
        if layout.trees[t] is None
        and (m := analysis.mutations[leaves[0]]).set_under_grad
        and m.grad_set_node is GradSetNode.LAYOUT
        and not m.storage_changed
    )


def _relaid_last(plan: RuntimePlan) -> frozenset[DenseIndex]:
    """The dense leaves of plain inputs whose history ends on the node of an in-place view op with grad
    (LeafMutation.relaid_last), relaid by the epilogue with grad whether the layout changed or not."""
    layout, mutations = plan.layout, plan.analysis.mutations
    return frozenset(
        j
        for t, leaves in enumerate(layout.leaves_of_input)
        if layout.trees[t] is None and (m := mutations[j := leaves[0]]).relaid_last and not m.storage_changed
    )


def _grad_swaps(plan: RuntimePlan) -> tuple[int, ...]:
    """Tensor inputs that gain grad by a storage swap (Note [Inputs Written In Training])."""
    analysis, layout = plan.analysis, plan.layout
    return tuple(
        t
        for t in range(len(layout.trees))
        if not plan.input_requires_grad[t]
        and analysis.requires_grad_after[t]
        and not analysis.requires_grad_set[t]
        and any(analysis.mutations[j].set_under_grad for j in layout.leaves_of_input[t])
    )


def _counted_steps(
    plan: RuntimePlan, recorded: frozenset[int], inputs: tuple[Container[int], ...]
) -> frozenset[tuple[int, CountedStep]]:
    """EpiloguePlan.counted. `inputs`: the tensor inputs whose set_() under grad the epilogue repeats before the call
    (early_grad_sets) and before their layouts (grad_sets_first), those set_() under grad (grad_sets), those it
    swaps to a value requiring grad (grad_swaps, repeated last), and those whose in-place view ops it replays."""
    analysis, layout, updates = plan.analysis, plan.layout, plan.graph_outputs.updates
    early, first, grad_sets, swaps, replayed = inputs
    copies = {
        (u.target, u.kind is UpdateKind.FINAL) for u in updates if u.kind in (UpdateKind.ORIGINAL, UpdateKind.FINAL)
    }
    based, relaid, relaid_last = _base_copied(plan), set(_relaid_after_grad_sets(plan)), _relaid_last(plan)
    found = set()
    for t, leaves in enumerate(layout.leaves_of_input):
        j = leaves[0] if leaves else None
        if layout.trees[t] is not None or j is None or j not in recorded or not analysis.mutations[j].version_bumps:
            continue
        m = analysis.mutations[j]
        # the epilogue's steps on the input's counter, in its order (call._epilogue); None: one that makes no node
        # of eager's (a layout step), after which no count is given
        steps: list[CountedStep | None] = []
        steps += [CountedStep.EARLY_SET] if t in early else []
        steps += [CountedStep.BASE_COPY] if j in based else []
        steps += [CountedStep.ORIGINAL_COPY] if (j, False) in copies else []
        layout_step = (
            t in first
            or t in relaid
            or j in relaid_last
            or t in replayed
            or m.metadata
            or m.storage_changed
            or m.resized
            or _grows_under(m)
        )
        steps += [None] if layout_step else []
        steps += [CountedStep.FINAL_COPY] if (j, True) in copies else []
        late_set = (t in grad_sets and t not in early and t not in first) or t in swaps
        steps += [CountedStep.SET if m.grad_set_node is GradSetNode.SET else None] if late_set else []
        if steps and steps[-1] is not None:
            found.add((j, steps[-1]))
    return frozenset(found)


def _base_copied(plan: RuntimePlan) -> set[int]:
    """The dense leaves of the alias groups whose synthetic base the epilogue copies a new value into."""
    layout = plan.layout
    return {
        m
        for u in plan.graph_outputs.updates
        if u.kind is UpdateKind.BASE
        for m in layout.groups[cast(AliasGroupRef, layout.graph_inputs[u.target]).group].members
    }


def _recorded(m: LeafMutation) -> bool:
    """Did eager record a node on the leaf's history (a write seen by autograd, a set_() or in-place view op with
    grad), so that the epilogue's repeat of it may have made a view's grad_fn anew at its count?"""
    with_grad = m.set_under_grad or m.self_set_with_grad or m.view_set_under_grad
    return m.autograd_visible or with_grad or (m.metadata and not m.metadata_hidden and not m.hidden_from_autograd)


def settle_version(t: torch.Tensor, before: int, bumps: int, *, recorded: bool = True) -> None:
    """Leave the version counter as eager does: `bumps` past its count before the call (runtime/steps.py: Version Counters
    As Eager's); `recorded`: EpiloguePlan.recorded."""
    now = get_version(t)
    if now == before + bumps:
        return
    if recorded and (now != before) == (bumps > 0) and t.requires_grad and t._is_view():
        return  # (moved as eager's: moving it again makes autograd regenerate the view's grad_fn, out of its order)
    set_version(t, before + bumps)


def settle_output_counters(outputs: Sequence[object], counts: Sequence[tuple[int, int]]) -> None:
    """Analysis.output_versions: the outputs (flat, in output order) whose counters are their own get eager's counts,
    once every output is built (runtime/steps.py: Version Counters As Eager's)."""
    for o, count in counts:
        value = outputs[o]
        assert isinstance(value, torch.Tensor), "BUG: a version count for an output that is no tensor"
        if value._base is None and get_version(value) != count:  # (a view moved now would be stale)
            set_version(value, count)


def fresh_counts(infos: Sequence[OutputInfo], counts: Sequence[tuple[int, int]]) -> dict[int, int]:
    """The fresh outputs (no replay) among `counts` (Analysis.output_versions, graded_output_versions) and the counts
    given them as each is built, before any view of it is replayed from it (a view counted after it was made would be
    stale): less one for each stale view replayed from it, whose build advances the shared counter (`stale_bump`)."""
    stale = Counter(
        info.replay.index
        for info in infos
        if info.replay is not None
        and info.kind is not OutputKind.SAME_AS  # (the very object of an earlier output, built once)
        and info.replay.source is ReplaySource.OUTPUT
        and stale_bump(info.replay)
    )
    return {o: max(0, count - stale[o]) for o, count in counts if infos[o].replay is None}


def function_counts(
    plan: RuntimePlan, fresh_outputs: Sequence[int], n_updates: int, n_wrappers: int
) -> tuple[tuple[int, int], ...]:
    """(position among the training Function's outputs, eager's count) of its fresh outputs, intermediate bases and
    intermediate subclass roots with a count (Analysis.output_versions, graded_output_versions, base_versions,
    root_versions; `n_wrappers` new values of subclass inputs come between the bases and the roots): given in its
    forward, before it saves them, so that autograd's check of a save reads the count eager's saving node saw
    (runtime/steps.py: Version Counters As Eager's)."""
    analysis = plan.analysis
    counts = fresh_counts(analysis.outputs, (*analysis.output_versions, *analysis.graded_output_versions))
    found = [(n_updates + k, counts[o]) for k, o in enumerate(fresh_outputs) if o in counts]
    found += [(n_updates + len(fresh_outputs) + b, count) for b, count, _ in analysis.base_versions]
    roots_at = n_updates + len(fresh_outputs) + plan.graph_outputs.num_bases + n_wrappers
    order = [r.root_bases for r in training_roots(analysis)]
    found += [(roots_at + order.index(root_bases), count) for root_bases, count, _ in analysis.root_versions]
    return tuple(found)


def settle_base_counters(bases: Sequence[object], counts: Sequence[tuple[int, int, bool]]) -> None:
    """Analysis.base_versions: the intermediate bases that require no grad from the graph get eager's counts before
    any view is replayed from them (the training Function gave the others theirs: `function_counts`)."""
    for b, count, graded in counts:
        value = bases[b]
        if not graded and isinstance(value, torch.Tensor) and get_version(value) != count:
            set_version(value, count)


def copy_into(
    x: torch.Tensor,
    value: torch.Tensor,
    mutation: LeafMutation,
    *,
    final: bool = False,
    count: int | None = None,
    inference: bool | None = None,
) -> None:
    # `count`: eager's count, the copy's to land on (EpiloguePlan.counted); `inference`: whether x is an inference
    # tensor, as the compile decided (RuntimePlan.inference_leaves; None: read here)
    if inference is None:
        inference = x.is_inference()
    if inference and not torch.is_inference_mode_enabled():  # Note [Input Updates]: inference inputs
        with torch.inference_mode():
            return copy_into(x, value, mutation, final=final, count=count, inference=False)
    if count is not None:
        land_on(x, count)
    # A mutation autograd saw in eager is recorded by autograd here too (copy_ outside no_grad), so the input's
    # grad_fn and version match eager; .data and no_grad mutations stay invisible to autograd, as in eager.
    hidden = not mutation.autograd_visible or mutation.hidden_from_autograd or mutation.storage_changed
    # See Note [Input Updates]; written through itself, a leaf that requires grad raises in eager, and
    # so does this copy.
    hidden = hidden or not mutation.visible_through_self
    hidden = hidden and not (final and mutation.written_after_data)  # Note [History Kept Through .data =]
    hidden = hidden and not (final and mutation.history_of_its_own)  # Note [Inputs Written In Training]
    hidden = hidden or (final and mutation.history_from_base)  # Note [Input Updates]
    whole = x
    x, value = once_per_location(x, value)
    if (x.requires_grad or value.requires_grad) and not hidden:
        if x is not whole and final and mutation.kept_at_entry:
            # Note [History Kept Through .data =]: eager's node is the write's, on the input itself; a copy_ into
            # a narrowing of its repeated layout would make a CopySlices whose backward raises. So the input takes
            # the narrowed layout for the copy, below autograd as `.data =` is, and its own back after
            assigned = whole.data
            whole.data = x.detach()
            whole.copy_(value)
            whole.data = assigned
            return
        x.copy_(value)
        return
    before = get_version(x)
    with torch.no_grad():
        x.copy_(value)
    if not mutation.version_bumped:
        set_version(x, before)


def land_on(x: torch.Tensor, count: int) -> None:
    """Before an epilogue step that advances x's counter once as it makes x's node (EpiloguePlan.counted): the
    counter at `count` less one, so that the node is made at `count`, eager's (runtime/steps.py: Version Counters As
    Eager's)."""
    set_version(x, count - 1)


def once_per_location(x: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`x` and `value` at index 0 of each dim where `x` repeats one memory location (a zero stride, after `.data =`
    of an expand()): copy_ refuses such a target, and the graph's value, a view of the same
    functional storage, holds one value at every repeat."""
    repeated = [d for d, (sz, st) in enumerate(zip(x.shape, x.stride(), strict=True)) if st == 0 and sz > 1]
    if repeated:
        value = value.expand_as(x)
        for d in repeated:
            x, value = x.narrow(d, 0, 1), value.narrow(d, 0, 1)
    return x, value


def lower_input_counter(
    replay: Replay, values: Sequence[object], entry: dict[int, int]
) -> tuple[torch.Tensor, int] | None:
    """Before replaying a bump_after view of an input: give the input its counter at entry (the input and the
    counter it has now), where the epilogue moved it and its grad_fn raises since (Replay.entry_counter too), or
    where eager's view is stale at the end (Replay.stale_view: Note [History Kept Through .data =], Note [Views That
    Raise After A Bump]). A view replayed from an output whose chain starts at an input (Replay.root_input) is made
    at that input's counter at entry wherever it moved."""
    if replay.root_input is not None and replay.root_input in entry:
        root = values[replay.root_input]
        assert isinstance(root, torch.Tensor), "BUG: a root input that is no tensor"
        return _lowered(root, entry[replay.root_input])
    if replay.source is not ReplaySource.INPUT or replay.index not in entry:
        return None
    if not (replay.bump_after or replay.entry_counter or replay.stale_view):
        # made after the program's last write to the input: eager's view reads fine at the counter it has now
        return None
    source = values[replay.index]
    assert isinstance(source, torch.Tensor), "BUG: an INPUT replay of a value that is no tensor"
    if not (replay.stale_view or grad_fn_raises(source)):
        return None
    return _lowered(source, entry[replay.index])


def _lowered(source: torch.Tensor, count: int) -> tuple[torch.Tensor, int] | None:
    """`source` given its counter at entry, `count`, where it moved since: (`source`, the counter it had)."""
    now = get_version(source)
    if now == count:
        return None
    set_version(source, count)
    return source, now


def finish_bumped_view(
    view: torch.Tensor, lowered: tuple[torch.Tensor, int] | None, *, bump: bool, late: bool = False
) -> bool:
    """After the replay: the input's counter back, then (`bump`) the view's advanced unless reading its grad_fn
    raises already, as eager's does: at once, or (`late`, returning True) left to `bump_views_late`."""
    if lowered is not None:
        set_version(*lowered)
    if not bump or grad_fn_raises(view):
        return False
    if not late:
        set_version(view, get_version(view) + 1)
    return late


def bump_views_late(views: Sequence[torch.Tensor]) -> None:
    """Advance each view's counter by one once every output is built, once per counter that views share: a view
    whose counter an earlier one of `views` moved is left (Note [Views That Raise After A Bump])."""
    built = [get_version(v) for v in views]
    for view, version in zip(views, built, strict=True):
        if get_version(view) == version:
            set_version(view, version + 1)


def set_onto_inputs(
    value: torch.Tensor,
    info: OutputInfo,
    dense: Sequence[torch.Tensor],
    metas: Sequence[tuple[list[int], list[int], int]],
    wrapper: torch.Tensor,
) -> None:
    """Note [Outputs Over Another Storage]: each dense leaf of `value` (the Function's output) set_() onto the
    storage of its input with eager's metadata (`metas`, per leaf), under no_grad, its version counter kept; a
    subclass output also takes the wrapper storage of `wrapper`, the input it is a detach() of (as eager's aliasing
    correction gives a view op's output)."""
    leaves = flatten_subclass(value, "out")[1] if info.tree is not None else [value]
    for t, leaf, (size, stride, offset) in zip(leaves, info.leaves, metas, strict=True):
        assert leaf.onto_input is not None, "BUG: a detached output leaf names no input"
        version = get_version(t)
        with torch.no_grad():
            set_to_tensor(t, dense[leaf.onto_input].detach().as_strided(size, stride, offset))
        set_version(t, version)
    if info.tree is not None:
        torch._functionalize_unsafe_set(value, wrapper)  # the storage only: no dispatch, no autograd record


def input_root(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose views share `t`'s autograd base: `t._base`, or `t` itself where it is no view (Note [Outputs
    Over Another Storage])."""
    return t._base if t._base is not None else t


def view_onto(
    root: torch.Tensor,
    storage: torch.Tensor,
    size: Sequence[int],
    stride: Sequence[int],
    offset: int,
    grad: bool = False,
    bits: tuple[bool, bool] = (False, False),
) -> torch.Tensor:
    """A view of `root` that lives on `storage`'s storage with this size, stride and offset (Note [Outputs Over Another
    Storage]). `grad`: made and set_() with grad on, as the program did (Note [set_ Under
    Grad]); otherwise without (eager's view does not require grad: foreign_root). `bits`: the view's conjugate and
    negative bits, which set_() keeps (a `.data =` gave them: `v = x[1:]; v.data = y.conj()`)."""
    version = get_version(root)
    if root.is_complex() and not storage.is_complex():  # (a real view of a complex root: `c.imag[1:]`)
        root = root.real
    root = with_bits(root, root.is_conj() != bits[0], root.is_neg() != bits[1])
    if grad and torch.is_grad_enabled():
        # eager's set_ node has an edge to the source's history: a gradient of the source waits behind it
        view = root.as_strided((0,), (1,), root.storage_offset())
        set_to_tensor(view, storage.as_strided(size, stride, offset))
    else:
        with torch.no_grad():
            view = root.as_strided((0,), (1,), root.storage_offset())
            view.set_(storage.untyped_storage(), offset, list(size), list(stride))
    set_version(view, version)
    return view


def set_under_grad_holder(
    value: torch.Tensor,
    found: tuple[torch.Tensor, bool] | None,
    *,
    view: bool,
    viewed_after: bool,
    blocked: Sequence[object] = (),
    count: int | None = None,
) -> torch.Tensor:
    """`value` rebuilt as eager's output set_() under grad (Note [set_ Under Grad]). `found`: where eager's
    output is a view, the value of its `._base` and whether that is eager's base object itself (Note [set_ Under Grad]). `view`: the output was a view when set_(); `viewed_after`: it is a view taken of
    the tensor set_() (eager's base) after the set_. `blocked`: the inputs eager's set_ node stands in front of
    (Note [set_ Under Grad]). `count`: eager's count of the output, which the set_ of a holder of its own (no `found`)
    lands on as it makes the holder's node (runtime/steps.py: Version Counters As Eager's)."""
    root = None if found is None else found[0]
    if found is not None and found[1]:
        holder = found[0].view(found[0].shape)  # other outputs view that base too: one object, as in eager
        set_to_tensor(holder, value)
        return holder
    src = value if root is None else root
    if is_traceable_subclass(src):
        # a holder of the output's own class: a clone of a detached alias (Note [set_ Under Grad])
        holder = blocking_holder(src.detach().requires_grad_(), blocked)
    else:
        holder = blocking_holder(torch.empty(0, dtype=src.dtype, device=src.device, requires_grad=True), blocked)
    if root is not None:
        set_to_tensor(holder, root.detach())  # eager's base, set_() under grad
        if viewed_after:
            return holder.as_strided(value.shape, value.stride(), value.storage_offset())
        holder = holder.view(holder.shape)
    elif view:
        holder = holder.view(holder.shape)
    if count is not None and root is None:
        land_on(holder, count)
    set_to_tensor(holder, value)
    return holder


class _Blocked(torch.autograd.Function):
    """A clone of `base` whose node has an edge to each of `blocked` (Note [set_ Under Grad])."""

    @staticmethod
    def forward(ctx: Any, base: torch.Tensor, *blocked: torch.Tensor) -> torch.Tensor:
        return base.clone()

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[None, ...]:
        raise AssertionError("BUG: the node behind a raising set_ node ran (Note [set_ Under Grad])")


def blocking_holder(base: torch.Tensor, blocked: Sequence[object]) -> torch.Tensor:
    """A clone of `base` (which requires grad), behind which the backward reaches each of `blocked` that requires
    grad (Note [set_ Under Grad])."""
    inputs = [b for b in blocked if isinstance(b, torch.Tensor) and b.requires_grad]
    if not inputs:
        return base.clone()
    return cast(torch.Tensor, _Blocked.apply(base, *inputs))  # type: ignore[no-untyped-call]  # untyped in torch


MARK_STATES = 64  # in-place view ops per object a chain may pass it after


def state_token(t: int, state: int) -> int:
    """The mark token of object `t` (its id) in state `state` (Note [Output
    Regeneration]): the id itself in state 0, else a negative number that is never an id."""
    return t if state == 0 else ~(t * MARK_STATES + state)


def call_token(call: int, index: int) -> int:
    """The token of output `index` of multi-output view call `call` (ViewStep.call) in a call's memo of rebuilt
    objects (Note [Output Regeneration]): a negative number that is neither an id nor a `state_token`."""
    return ~(((call << 32) | index) * MARK_STATES)


def state_of(token: int) -> tuple[int, int]:
    """(the object's token in state 0, the state) of a mark's token."""
    return (token, 0) if token >= 0 else divmod(~token, MARK_STATES)


def use_only_tokens(marks: Sequence[tuple[int, int]]) -> set[int]:
    """The tokens of states the chain then changes by in-place view ops: read, never handed out."""
    return {t for (_, t), (_, u) in zip(marks, marks[1:], strict=False) if u < 0 and state_of(u)[0] == state_of(t)[0]}


def _max_state(marks: Sequence[tuple[int, int]]) -> int:
    return max((state_of(t)[1] for _, t in marks), default=0)


def stale_bump(replay: Replay | None) -> bool:
    """A view with no history of a tensor the program wrote after taking it (Replay.stale_view, not from an input):
    its counter is advanced as soon as it is built, so views eager took after the write are built after it, fresh."""
    return replay is not None and replay.stale_view and replay.bump_after and replay.source is not ReplaySource.INPUT


def build_order(infos: Sequence[OutputInfo]) -> list[int]:
    """Outputs in the order of the object states their chains pass through, then in the program's order for those
    built after the epilogue (Replay.made), then output order: a repeated set_() or in-place view op advances a counter
    other views share (Note [Views That Raise After A Bump]), and each rebuilt view's node is numbered as eager's was
    among them, which orders eager's backward (Note [Epilogue Nodes In Eager's Order])."""

    def key(o: int) -> tuple[int, int]:
        replay = infos[o].replay
        if replay is None:
            return (0, 0)
        return (_max_state(replay.marks), 0 if replay.before_epilogue else replay.made)

    return sorted(range(len(infos)), key=key)


def state_reached(base: torch.Tensor, shared: dict[int, torch.Tensor], tokens: Container[int] | None = None) -> int:
    """How many of its in-place view ops a chain applied to `base` already (a memo object in a later state); with
    `tokens`, the chain naming those tokens."""
    return max(
        (state_of(t)[1] for t, v in shared.items() if t < 0 and v is base and (tokens is None or t in tokens)),
        default=0,
    )
