"""Stage `runtime` (training), what one compile's `CompiledStep` reads per call, decided once (`_Step`): the
outputs, updates and gradients the Function hands on, which inputs go into it detached (Note [Backward Errors Are
Deferred]), where each leaf of a subclass input written in training finds its new value.

Input: the `RuntimePlan`, the compiled forward and backward callables, the `BackwardPlan` and the probe's
`EagerSaves`.
Output: `_Step`, and `_detached_inputs`: the user inputs that go into the Function detached.
Invariants: decided at compile time; nothing here runs per call or holds a tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.runtime.autograd_function.saved_checks import _saved_checks, _viewed_inputs
from subclassaot.runtime.autograd_function.tangents import _Variants
from subclassaot.runtime.plan import (
    BackwardPlan,
    EagerSaves,
    MetaEvaluator,
    RuntimePlan,
    wrapper_write_recorded,
)
from subclassaot.runtime.steps import (
    base_write_hidden,
    epilogue_write_hidden,
    function_counts,
    training_roots,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    FunctionSlot,
    LeafSource,
    OutputKind,
    ReplaySource,
    UpdateKind,
)


def _early_sources(analysis: Analysis, bw_meta: BackwardPlan) -> tuple[int, ...]:
    """The inputs (InputIndex) that output views replayed before the call are taken of, where the backward raises
    the program's error (Note [Backward Errors Are Deferred])."""
    if bw_meta.error is None:
        return ()
    replays = [info.replay for info in analysis.outputs if info.replay is not None]
    return tuple(sorted({r.index for r in replays if r.before_epilogue and r.source is ReplaySource.INPUT}))


GroupSource = tuple[int, tuple[int, ...], tuple[int, ...], int]

# per apply of the program's Functions: FunctionOutputs' layout, the outputs it rebuilds (`_function_slots`)
# and those of them whose counter is advanced once built (FunctionSlot.bumped)
_Slots = tuple[tuple[tuple[int | None, ...], tuple[int, ...], frozenset[int]], ...]


def _member_of(outs: Sequence[object], source: GroupSource) -> torch.Tensor:
    """A group member's leaf as a view of its group's new base (a graph output)."""
    k, size, stride, offset = source
    return cast(torch.Tensor, outs[k]).as_strided(size, stride, offset)


def _ints(dims: Sequence[object]) -> tuple[int, ...]:
    assert all(isinstance(d, int) for d in dims), "BUG: alias-group metadata must be static"
    return tuple(int(cast(int, d)) for d in dims)


class _Step:
    """What one compile's `CompiledStep` reads per call, decided once (the Function's forward and backward are
    shared by every compile and find it in their first argument)."""

    def __init__(
        self,
        plan: RuntimePlan,
        fw: Callable[..., object],
        bw: Callable[..., object] | None,
        bw_meta: BackwardPlan,
        differentiable_backward: bool,
        eager_saves: EagerSaves,
    ) -> None:
        analysis, layout, flat = plan.analysis, plan.layout, plan.flat
        self.plan, self.fw, self.bw, self.bw_meta = plan, fw, bw, bw_meta
        self.differentiable_backward = differentiable_backward
        self.n_updates = n_updates = len(plan.graph_outputs.updates)
        self.fresh_outputs = fresh_outputs = tuple(
            o
            for o, info in enumerate(analysis.outputs)
            if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
        )
        # fresh graph leaves of outputs that are not wholly fresh (rebuilt beside inner tensors of inputs)
        in_fresh_outputs = {leaf.index for o in fresh_outputs for leaf in analysis.outputs[o].leaves}
        self.rebuilt_leaves = tuple(k for k in range(plan.graph_outputs.num_fresh) if k not in in_fresh_outputs)
        self.roots = roots = training_roots(analysis)
        # given before the forward saves them
        self.counts = function_counts(plan, fresh_outputs, n_updates, len(bw_meta.wrapper_updates))
        self.checks = _saved_checks(plan, bw_meta, eager_saves, fresh_outputs, roots)
        # inputs an output view is replayed from outside the Function: where the caller writes one, its node, made
        # again at the backward's read, runs before the one eager's saving node is (backward_probe's comment on saved
        # tensors)
        self.viewed_inputs = _viewed_inputs(analysis) if any(graded[1] for _, _, _, _, graded, _ in self.checks) else ()
        self.apart = _apart_inputs(self, eager_saves.detached)
        self.apart_bases = _apart_bases(self)
        # (for alias group members: `_detach_apart_members`). An input the Function gives a gradient of its own keeps
        # its edge: `_apart_inputs` decides for it, and a written input's new history may reach it (`x0.copy_(x1)`).
        self.returned_apart = eager_saves.detached - frozenset(bw_meta.grad_inputs)
        self.saves_apart = eager_saves.probed  # Note [Probing Eager's Backward]
        self.taken = frozenset() if self.saves_apart else eager_saves.taken
        mutated_graph_inputs = set()
        for k, item in enumerate(layout.graph_inputs):
            members = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
            if any(analysis.mutations[m].any or analysis.mutations[m].version_bumped for m in members):
                mutated_graph_inputs.add(k)

        self.rerun = bw_meta.rerun if differentiable_backward and not mutated_graph_inputs else None

        self.variants = _Variants()
        self.clone_saved = [
            k for k, p in enumerate(bw_meta.saved_primals) if p is not None and p in mutated_graph_inputs
        ]
        self.held_inputs = () if self.saves_apart else _held_inputs(bw_meta, mutated_graph_inputs)
        n_user = len(layout.trees)
        self.n_results = n_results = n_user + len(bw_meta.group_grads)
        self.targets = [*bw_meta.grad_inputs, *range(n_user, n_results)]
        self.diff_set = frozenset(bw_meta.diff_outputs)
        self.subclass_inputs = [i for i, tree in enumerate(layout.trees) if tree is not None]
        self.releafed = frozenset(i for i, s in enumerate(analysis.releaf_sizes) if s is not None)
        self.early_sources = _early_sources(analysis, bw_meta)
        # See Note [Tangent Retrace]: the diff outputs a tensor subclass gradient depends on
        self.typed_by: set[int] = set().union(
            *(deps for tree, deps in zip(bw_meta.grad_trees, bw_meta.tangent_deps, strict=False) if tree is not None)
        )
        self.tensor_position: dict[int, int] = {k: p for p, k in enumerate(flat.tensor_indices)}  # InputIndex -> `user`

        self.plain_tangents = all(tree is None for tree in bw_meta.tangent_trees)
        self.plain_fresh = {
            o: n_updates + info.leaves[0].index
            for o in fresh_outputs
            if (info := analysis.outputs[o]).function_view is None
            and info.tree is None
            and len(info.leaves) == 1
            and info.leaves[0].passthrough is None
            and not info.leaves[0].function_view
        }
        self.function_slots = _function_slots(analysis)
        self.ev = MetaEvaluator()
        self._find_leaf_sources()
        # set by training_call where the step is plain (Note [Straight-Line Runners])
        self.plain: _PlainStep | None = None
        # the graphs as a plain step calls them: the backend's callable itself once its wrapper settled (`_plain_apply`)
        self.plain_fw = cast("Callable[..., Sequence[Any]]", fw)
        self.plain_bw = cast("Callable[..., Sequence[Any]]", bw)

    def _find_leaf_sources(self) -> None:
        """Where each leaf of a subclass input written in training finds its new value (`_update_sources`), the
        leaves left as they were (`_unchanged_leaves`) and their positions (`_kept_positions`, per call only the
        dense leaves are read)."""
        plan, bw_meta = self.plan, self.bw_meta
        self.unchanged = _unchanged_leaves(plan) if bw_meta.wrapper_updates else frozenset()
        self.original_update, self.final_update, self.group_source, self.group_final = _update_sources(
            plan, bw_meta, self.unchanged
        )
        self.kept_at = _kept_positions(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class _PlainStep:
    n_outs: int  # the graph's outputs before the saved values: the Function's outputs
    diff: tuple[int, ...]  # BackwardPlan.diff_outputs
    non_diff: tuple[int, ...]  # the other outputs
    strides: tuple[tuple[int, ...] | None, ...]  # per diff output: its tangent's traced strides
    reached: tuple[tuple[int, int], ...]  # (gradient position, input) of the gradients some tangent reaches
    deps: tuple[tuple[int, int, frozenset[int]], ...]  # ... with the diff outputs whose tangents reach it
    n_results: int
    # one output, differentiable, reaching one gradient, nothing saved, no counts given and no saved tensor checked:
    # the forward keeps only the step on its context, and the backward (`_lone_backward`) reads no more than the
    # tangent; (the gradient's position, the tangent's traced strides) of such a step, else None
    lone: tuple[int, tuple[int, ...] | None] | None = None


def _update_sources(
    plan: RuntimePlan, bw_meta: BackwardPlan, unchanged: frozenset[int]
) -> tuple[dict[int, int], dict[int, int], dict[int, GroupSource], dict[int, GroupSource]]:
    """Where each leaf of a tensor subclass input written in training finds its new value among the graph outputs
    (ORIGINAL and FINAL updates, alias-group members' regions of their group's new base); a leaf the program left
    alone (no write, no metadata or storage change, its counter kept: a NestedTensor's offsets, which its in-place
    ops never write) keeps its own tensor (`_unchanged_leaves`). Refused where the program changes some inner tensors
    of such an input but not others in another way."""
    analysis, layout, flat = plan.analysis, plan.layout, plan.flat
    original_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.ORIGINAL}
    final_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.FINAL}
    base_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.BASE}
    group_source: dict[int, GroupSource] = {}
    group_final: dict[int, GroupSource] = {}  # ... with its final metadata
    for k, item in enumerate(layout.graph_inputs):
        if isinstance(item, AliasGroupRef) and k in base_update:
            group = layout.groups[item.group]
            for m, (size, stride, offset) in zip(group.members, group.member_meta, strict=True):
                group_source[m] = (base_update[k], _ints(size), _ints(stride), _ints((offset,))[0])
                size, stride, offset = analysis.mutations[m].final_meta
                if all(isinstance(d, int) for d in (*size, *stride, offset)):
                    group_final[m] = (base_update[k], _ints(size), _ints(stride), _ints((offset,))[0])
    for i in bw_meta.wrapper_updates:
        if analysis.inplace_replay[i] and analysis.wrapper_meta_after[i]:
            needed: Container[int] = {*final_update, *group_final}  # Note [Aliased Inputs In Training]
        else:
            needed = {*original_update, *group_source}
        if any(j not in needed and j not in unchanged for j in layout.leaves_of_input[i]):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: the program writes some inner tensors of this tensor "
                "subclass input that requires grad but not others, or changes the others otherwise (x.a.add_(...) "
                "beside a write through the subclass); in training this is not supported yet. Write a clone "
                "(y = x.clone(); y.add_(...)) or, where the class writes all its inner tensors, write through the "
                "subclass (x.add_(...))"
            )
    return original_update, final_update, group_source, group_final


def _unchanged_leaves(plan: RuntimePlan) -> frozenset[int]:
    """Dense leaves of subclass inputs the program left as they were: no write (through any alias), no metadata or
    storage change, the version counter kept. The new value of their input (`_wrapper_values`) holds the leaf itself,
    as eager's wrapper does after an in-place op of its class that writes only its other inner tensors."""
    mutations, layout = plan.analysis.mutations, plan.layout
    return frozenset(
        j
        for i, tree in enumerate(layout.trees)
        if tree is not None
        for j in layout.leaves_of_input[i]
        if not mutations[j].any and not mutations[j].version_bumped and not mutations[j].final_data
    )


def _held_inputs(bw_meta: BackwardPlan, mutated: set[int]) -> tuple[int, ...]:
    """The graph inputs the Function saves beside their clone, where eager's saves were not probed (Note [Probing
    Eager's Backward]): those the program leaves unwritten (`mutated`: the graph inputs it writes)."""
    return tuple(sorted({p for p in bw_meta.saved_clones if p is not None and p not in mutated}))


def _apart_inputs(s: _Step, returned: frozenset[int]) -> tuple[int, ...]:
    """The leaves (and views of leaves) returned as themselves that the Function takes detached (`returned`:
    backward_probe.eager_saves), where it gives them no gradient: eager's engine accumulates theirs apart from the
    program's nodes, so a backward that raises (a saved tensor written after the call, a deferred error, the
    epilogue's set_ node) does not hold theirs back (backward_probe's comment on saved tensors)."""
    bw_meta = s.bw_meta
    if len(bw_meta.tangent_deps) < len(bw_meta.grad_inputs):
        return ()
    hidden = _hidden_updates(s)
    no_grad_from_here = {
        i for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False) if deps <= hidden
    }
    return tuple(sorted(i for i in returned if i in no_grad_from_here and i not in bw_meta.detached))


def _apart_bases(s: _Step) -> frozenset[int]:
    """Positions in `group_grads` of the synthetic bases that go into the Function detached: those no tangent the
    caller can give reaches the gradient of (the epilogue writes the new values that do hidden from autograd). Eager's
    program then reaches the members' leaf by no node of its own: attached, the base (a view of that leaf) would make
    the leaf's accumulator now, at its metadata now, where eager's, made at the read of a backward through the leaf,
    checks the gradient against its new size; and that accumulator would wait on the Function's node, which may raise
    (a deferred error, a saved tensor written after the call) where eager's engine accumulates it first from a
    member's own node (a returned view, or a view written hidden from autograd, remade at its read after the call:
    Note [Backward Errors Are Deferred])."""
    bw_meta = s.bw_meta
    n = len(bw_meta.grad_inputs)
    if len(bw_meta.tangent_deps) < n + len(bw_meta.group_grads):
        return frozenset()
    hidden = _hidden_updates(s)
    return frozenset(k for k in range(len(bw_meta.group_grads)) if bw_meta.tangent_deps[n + k] <= hidden)


def _hidden_updates(s: _Step) -> set[int]:
    """Diff outputs (positions in diff_outputs) that are new values of inputs the epilogue writes hidden from
    autograd: no gradient flows through them (Note [Backward Errors Are Deferred])."""
    plan, bw_meta, n_updates = s.plan, s.bw_meta, s.n_updates
    analysis, layout = plan.analysis, plan.layout
    n_wrappers = len(bw_meta.wrapper_updates)
    updates = plan.graph_outputs.updates
    hidden_updates = {
        p
        for p, d in enumerate(bw_meta.diff_outputs)
        if d < n_updates
        and (
            epilogue_write_hidden(analysis.mutations[updates[d].target], updates[d].kind)
            if updates[d].kind is not UpdateKind.BASE
            else base_write_hidden(analysis.mutations, _group_members(plan, updates[d].target))
        )
    }
    # ... and new values of tensor subclass inputs the epilogue copies in under no_grad
    wrappers_at = n_updates + len(s.fresh_outputs) + plan.graph_outputs.num_bases
    hidden_updates |= {
        p
        for p, d in enumerate(bw_meta.diff_outputs)
        if wrappers_at <= d < wrappers_at + n_wrappers
        and not wrapper_write_recorded(analysis, layout, bw_meta.wrapper_updates[d - wrappers_at])
    }
    return hidden_updates


def _group_members(plan: RuntimePlan, graph_input: int) -> tuple[int, ...]:
    """The members (DenseIndex) of the alias group whose synthetic base is graph input `graph_input`."""
    item = plan.layout.graph_inputs[graph_input]
    assert isinstance(item, AliasGroupRef), "BUG: a base update of a graph input that is no synthetic base"
    return tuple(plan.layout.groups[item.group].members)


def _detached_inputs(s: _Step) -> tuple[list[int], frozenset[int], list[int]]:
    """The user inputs that go into the Function detached (Note [Backward Errors Are Deferred]): those no gradient
    reaches, those of them that go in as stand-ins requiring grad, and those no output reads."""
    plan, bw_meta = s.plan, s.bw_meta
    analysis, layout, flat = plan.analysis, plan.layout, plan.flat
    hidden_updates = _hidden_updates(s)
    unreached = (  # Note [Backward Errors Are Deferred]
        [
            i
            for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False)
            if deps <= hidden_updates or i in bw_meta.detached
        ]
        if len(bw_meta.tangent_deps) >= len(bw_meta.grad_inputs)
        else []
    )

    def relaid(i: int) -> bool:
        return any(analysis.mutations[j].metadata for j in layout.leaves_of_input[i]) or (
            (assigned := analysis.wrapper_data[i]) is not None and assigned.resizes  # a subclass size, by `.data =`
        )

    changed = [i for i in unreached if relaid(i)]
    unreached = changed if bw_meta.error is None else unreached
    # Where the backward raises and no input would stay attached, the outputs still require grad in eager (through
    # a no_grad view: Note [Backward Errors Are Deferred]): such inputs go in as new leaves over the same data, which
    # require grad and whose accumulators nothing observes.
    stand_ins = (
        frozenset(i for i in unreached if i not in changed)
        if bw_meta.error is not None and len(unreached) == len(bw_meta.grad_inputs) and not bw_meta.group_grads
        else frozenset()
    )
    # Inputs no output reaches: where reading one's grad_fn raises when the Function takes it (an unbind() output
    # whose base an in-place view op replayed early, t_(), advanced), it goes in detached;
    # eager's program did not read it after that op.
    unread = (
        [
            i
            for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False)
            if not deps and i not in unreached
        ]
        if len(bw_meta.tangent_deps) >= len(bw_meta.grad_inputs)
        else []
    )
    # ... and likewise inputs that get no gradient of their own (an alias group's members, whose gradient goes to
    # the group's base, an unbind() output passed beside its base, unread by the program)
    with_grad = set(bw_meta.grad_inputs)
    unread.extend(i for i in range(len(flat.tensor_indices)) if i not in with_grad)
    # ... of which those that require grad and whose metadata the program changes go in detached, as unreached ones
    # do: attached, a leaf's accumulator would be made now, at its metadata now, where eager's, made at the read of
    # a backward through it (it is returned, say), checks the gradient against its new size
    user_fakes = [flat.values[k] for k in flat.tensor_indices]
    unreached += [
        i
        for i in unread
        if i not in unreached and relaid(i) and isinstance(t := user_fakes[i], torch.Tensor) and t.requires_grad
    ]
    return unreached, stand_ins, unread


def _function_slots(analysis: Analysis) -> _Slots:
    """Per apply of the program's Functions some outputs are views of (OutputInfo.function_slot): FunctionOutputs'
    layout, and the outputs in the order its views are given."""
    calls: dict[int, list[tuple[int, FunctionSlot]]] = {}
    for o, info in enumerate(analysis.outputs):
        if info.function_slot is not None and info.kind is OutputKind.TENSOR:
            calls.setdefault(info.function_slot.call, []).append((o, info.function_slot))
    found = []
    for members in calls.values():
        layout: list[int | None] = [None] * members[0][1].count
        for k, (_, slot) in enumerate(members):
            layout[slot.index] = k
        if members[0][1].multi and len(members) == 1:  # (another differentiable output makes it MULTI_OUTPUT_NODE)
            free = [n for n, k in enumerate(layout) if k is None]
            layout = [*layout, -1] if not free else [-1 if n == free[0] else k for n, k in enumerate(layout)]
        bumped = frozenset(o for o, slot in members if slot.bumped)
        found.append((tuple(layout), tuple(o for o, _ in members), bumped))
    return tuple(found)


def _kept_positions(s: _Step) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """Per subclass input written in training (its place `n` among `bw_meta.wrapper_updates`), the positions `p` of
    its inner tensors that are the input's own (`_unchanged_leaves`) with their dense leaf `j`: fixed at compile
    time, read per call by `_kept_leaves`."""
    updated = {*s.original_update, *s.final_update}
    kept = []
    for n, i in enumerate(s.bw_meta.wrapper_updates):
        own = tuple(
            (p, j) for p, j in enumerate(s.plan.layout.leaves_of_input[i]) if j in s.unchanged and j not in updated
        )
        if own:
            kept.append((n, own))
    return tuple(kept)
