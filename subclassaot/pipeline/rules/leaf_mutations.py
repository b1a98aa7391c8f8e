"""What the program did to each dense input leaf, the `LeafMutation`s of stage `analyze`, and the rules of `.data =`
on leaves and outputs with autograd history (Note [History Kept Through .data =]): plain inputs written with grad
after a `.data =` gave them another storage (which the epilogue writes with their own history,
`LeafMutation.written_after_data`), and outputs with history whose `.data` the program assigned (which the runtime
rebuilds exactly: the graph gives the history, a `.data =` the storage).

Input: the `FunctionalRun` of the program and the `DenseLayout` of its inputs; for the checks, `FlatInputs`, the
`Analysis` and the user fakes; for an output, its value in the functional run, its path and its alias leaves.
Output: one `LeafMutation` per dense leaf (data written, metadata changed, storage swapped by set_() or `.data =`,
grown, hidden from autograd, ...), per tensor input the outer metadata a subclass input ends with, the leaf an
output's `.data` is regenerated from, and an UnsupportedError for what is refused.
Invariants: reads the run only; no graph is built.

Part: Where the functional run's storage offsets are not eager's, and eager's from them.

Input: functional tensors of the analysis's run. Output: eager's offset of a tensor on a written input's storage
(`eager_offset`), eager's metadata of a leaf on an input's storage (`alias_meta`).
Invariants: reads the run only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import guard_bool

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.pipeline.rules.set_under_grad import source_bumps_at_set
from subclassaot.pipeline.rules.stale_views import rebuilt_at_entry_layout
from subclassaot.pipeline.rules.storage_reach import StorageReachError
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.pipeline.rules.view_bases import autograd_apart
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    AssignedWrite,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    GradSetNode,
    LeafMutation,
    LeafSource,
    Meta,
    OutputLeaf,
)
from subclassaot.torch_internals import (
    has_data_mutation,
    inner_storage_offset,
    mutations_hidden_from_autograd,
    storage_key,
    symint_expr,
)


def leaf_mutations(run: FunctionalRun, layout: DenseLayout, values: Sequence[object]) -> tuple[LeafMutation, ...]:
    """One `LeafMutation` per dense input leaf, with the set_()-under-grad marks of its input. `values`: the real
    inputs (FlatInputs.values)."""
    mutations = tuple(_leaf_mutation(i, run, layout) for i in range(len(layout.leaves)))
    mutations = tuple(
        replace(m, history_from_base=True) if _history_from_base(m, values[layout.leaves[i].owner]) else m
        for i, m in enumerate(mutations)
    )
    # Note [Inputs Written In Training]: a member apart from the others in autograd gains its own history
    mutations = tuple(
        replace(m, history_of_its_own=True) if _gains_history_apart(i, m, run, layout, values) else m
        for i, m in enumerate(mutations)
    )
    # (a view input's grad_fn is rebuilt from its base, written through it or another view: no node of its own)
    mutations = tuple(
        replace(m, written_after_growth=False)
        if m.written_after_growth and _is_view(values[layout.leaves[i].owner])
        else m
        for i, m in enumerate(mutations)
    )
    # (a leaf that requires grad, no view, written with grad only through a detach() beside it that shares its
    # counter: autograd records the write on that one alone; through itself or a view of it, eager raises, and the
    # copy with grad does too)
    mutations = tuple(
        replace(m, visible_through_self=False, written_after_growth=False)
        if m.visible_through_self
        and _grad_leaf(values[layout.leaves[i].owner])
        and not _written_through_itself(run.swaps, run.dense[i])
        else m
        for i, m in enumerate(mutations)
    )
    # Note [History Kept Through .data =]
    mutations = tuple(
        replace(m, kept_at_entry=True)
        if m.assigned_write is AssignedWrite.KEPT and _written_before_data_only(run.swaps, run.finals[i])
        else m
        for i, m in enumerate(mutations)
    )
    # Note [Stale View Functions]
    mutations = tuple(
        replace(m, rebuilt_at_entry_layout=True)
        if not _in_subclass(i, layout) and rebuilt_at_entry_layout(run.swaps, run.finals[i])
        else m
        for i, m in enumerate(mutations)
    )
    return _with_wrapper_grad_sets(mutations, run, layout)


def _is_view(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value._is_view()


def _grad_leaf(value: object) -> bool:
    if not isinstance(value, torch.Tensor) or is_traceable_subclass(value):
        return False
    return value.requires_grad and value.is_leaf and not value._is_view()


def _written_through_itself(swaps: SwapRecord, t: torch.Tensor) -> bool:
    """Did a write autograd records go through `t` or a view of it (not a detach())?"""
    for k in swaps.visible_seq:
        w = swaps.pinned.get(k)
        while isinstance(w, torch.Tensor) and w is not t and swaps.is_view(w):
            w = swaps.views[id(w)].source
        if w is t:
            return True
    return False


def _history_from_base(m: LeafMutation, value: object) -> bool:
    """`LeafMutation.history_from_base`: a plain view input that requires grad (guarded: a view), written with grad
    through itself, laid out anew only under no_grad (Note [Input Updates])."""
    if not (m.metadata_hidden and m.data and m.autograd_visible and m.visible_through_self) or m.storage_changed:
        return False
    return type(value) is torch.Tensor and value.requires_grad and value._is_view()


def _gains_history_apart(
    i: int, m: LeafMutation, run: FunctionalRun, layout: DenseLayout, values: Sequence[object]
) -> bool:
    """`LeafMutation.history_of_its_own` of dense leaf `i`: a plain input passed without grad, in an alias group, apart
    in autograd from every other member, that ends requiring grad by a write (not requires_grad_(), not set_()), its
    storage and layout kept."""
    t = next(t for t, leaves in enumerate(layout.leaves_of_input) if i in leaves)
    user = run.user_tensors[t]
    real = values[layout.leaves[i].owner]
    if layout.trees[t] is not None or not isinstance(real, torch.Tensor) or real.requires_grad:
        return False
    gains = user.requires_grad and id(user) not in run.swaps.requires_grad_set
    kept = not (m.metadata or m.storage_changed or m.swapped or m.resized)
    return gains and kept and autograd_apart(layout, values, DenseIndex(i))


def _set_source(run: FunctionalRun, final: torch.Tensor, layout: DenseLayout, i: int) -> DenseIndex | None:
    """Input `i`, set_() off its storage, ends on the first input's storage that is `final`'s (None: a new one), or
    on the one a resize_() grew from another input's (before or after the swap): eager grows that storage in place
    and both end on it. The growth makes that input traced as a view of a synthetic base, whose write-back grows the
    real storage and writes all of it before the epilogue's set_()s (Note [Storage Swaps By Rebinding]); refused
    where it is not."""
    keys = [storage_key(other) for other in run.originals]
    if storage_key(final) in keys:
        # of inputs sharing that storage (`x.detach()` passed beside x), the one eager's set_ node has its edge to
        taken = _grad_set_root(final, run)
        own = next((j for j, d in enumerate(run.dense) if taken is not None and d is taken), None)
        if own is not None and keys[own] == storage_key(final):
            return DenseIndex(own)
        return DenseIndex(keys.index(storage_key(final)))
    root = run.swaps.grown_root(storage_key(final))
    if root not in keys or root == keys[i]:  # (its own, grown: _check_grown_then_left)
        return None
    source = DenseIndex(keys.index(root))
    if _in_group(source, layout):
        return source
    raise UnsupportedError(
        f"{layout.leaves[i].path}: the program set_()s this input (or assigns its `.data`) onto the storage of "
        f"{layout.leaves[source].path}, another input, and resize_() grows that storage, which is not traced as a "
        "synthetic base: eager grows the other input's storage in place and both end on it, which the compiled "
        "call's epilogue does not repeat. Resize a .clone() instead"
    )


def _metadata_hidden(run: FunctionalRun, final: torch.Tensor) -> bool:
    """A plain input whose metadata the program changed by in-place view ops and set_()s all run under no_grad
    (`LeafMutation.metadata_hidden`): its last set_() among them (an earlier one under grad recorded a node)."""
    if is_traceable_subclass(final) or not any(final is t for t in run.user_tensors):
        return False
    view_ops = run.swaps.inplace_views.get(id(final), [])
    if any(r.grad_enabled for r in view_ops) or id(final) in run.swaps.grad_set_ids:
        return False
    last_set = run.swaps.plain_sets.get(id(final))  # (seq, grad enabled)
    return bool(view_ops) or (last_set is not None and not last_set[1])


def _resized_itself(run: FunctionalRun, final: torch.Tensor) -> bool:
    """Did the program resize_() (or resize_as_()) this very tensor, not only a tensor over its storage? (A growth
    rebinds it, recorded apart from the in-place view ops: `SwapRecord.self_grown_ids`.)"""
    if id(final) in run.swaps.self_grown_ids:
        return True
    resizes = (torch.ops.aten.resize_.default, torch.ops.aten.resize_as_.default)
    return any(r.func in resizes for r in run.swaps.inplace_views.get(id(final), []))


def _set_to_moved_clone(layout: DenseLayout, i: int, set_source: DenseIndex) -> UnsupportedError:
    return UnsupportedError(
        f"{layout.leaves[i].path}: the program set_()s this tensor (or assigns its `.data`) to "
        f"{layout.leaves[set_source].path}, an input that runs as a clone in training (a non-leaf tensor "
        "subclass that requires grad) whose clone is laid out differently (it is expanded or starts at an "
        "offset); not supported. Pass a contiguous tensor, or set_() to a clone of it"
    )


def _final_bits(orig: torch.Tensor, final: torch.Tensor, storage_changed: bool) -> tuple[bool, bool] | None:
    """LeafMutation.final_bits: `final`'s conjugate and negative bits where the epilogue's swap onto another
    storage may not give them, or they are not `orig`'s."""
    bits = (final.is_conj(), final.is_neg())
    return bits if storage_changed or bits != (orig.is_conj(), orig.is_neg()) else None


def _leaf_mutation(i: int, run: FunctionalRun, layout: DenseLayout) -> LeafMutation:
    orig, final = run.originals[i], run.finals[i]
    # grown: on its own storage, grown by resize_() (not set_() elsewhere since, nor onto another storage that grew)
    grown = id(final) in run.swaps.grown_ids and run.swaps.grown_root(storage_key(final)) == storage_key(orig)
    storage_changed = storage_key(final) != storage_key(orig) and not grown
    left_grown = storage_changed and _grown_then_left(run, layout, i)
    set_source = _set_source(run, final, layout, i) if storage_changed else None
    if set_source is not None and set_source in run.moved_clones:
        raise _set_to_moved_clone(layout, i, set_source)
    # Two inputs set_() to one intermediate share its storage: the first makes it.
    new_storage_of = next(
        (
            DenseIndex(j)
            for j in range(i)
            if storage_changed and set_source is None and storage_key(run.finals[j]) == storage_key(final)
        ),
        None,
    )
    # Spurious data mutations of subclass leaves: functionalization reports a data mutation for in-place view ops on
    # views of a subclass's inner tensors; with no op that moves data into this leaf's storage, no set_() or growth, no
    # `.data` alias and no swap in the whole program, there is none (copying the values back with grad would make
    # autograd regenerate views taken of the input, losing their t_(): a wrong gradient, where only another input was
    # written).
    data = has_data_mutation(orig) and not (
        _in_subclass(i, layout)
        and not run.swaps.moved_by_swap
        and storage_key(orig) not in run.swaps.moved_storages
        and not run.swaps.data_aliases
        and not run.swaps.swapped_ids
        and not run.swaps.wrapper_data
    )
    final_meta, orig_meta = leaf_meta(final), leaf_meta(orig)
    if grown and id(final) in run.swaps.swapped_ids and not _in_group(DenseIndex(i), layout):
        _check_grown_then_swapped(final, (final_meta, orig_meta), layout.leaves[i].path, DenseIndex(i))
    if not storage_changed and not grown:  # Note [as_strided On Inputs]
        final_meta = (final_meta[0], final_meta[1], symint_expr(eager_offset(final, orig)))
    elif set_source is not None:  # on another input's storage: its offset there (Note [as_strided On Inputs])
        final_meta = alias_meta(final, run, set_source, set_source)
    swaps, keys = run.swaps, _eager_storage_keys(run.swaps, orig)
    return LeafMutation(
        data=data,
        metadata=final_meta != orig_meta,
        storage_changed=storage_changed,
        set_source=set_source,
        final_data=(storage_changed and set_source is None) or grown,
        hidden_from_autograd=data  # (a Function's write, run with grad off, autograd records if it marked it dirty)
        and (
            (mutations_hidden_from_autograd(orig) and not keys & swaps.dirty_storages)
            or not keys & swaps.visible_writes
        ),
        final_meta=final_meta,
        resized=grown or (_surely_greater(_extent(final_meta), _extent(orig_meta)) and not storage_changed),
        swapped=id(final) in swaps.swapped_ids,
        swapped_by_data=id(final) in swaps.swapped_by_data,
        swapped_by_data_only=id(final) in swaps.swapped_by_data
        and id(final) not in swaps.plain_sets
        and not _in_subclass(i, layout),
        final_bits=_final_bits(orig, final, storage_changed),
        version_bumps=swaps.bump_count(run.dense[i]),
        bumps_after_grad=swaps.bumps_after_grad(run.dense[i]),
        autograd_visible=bool(keys & swaps.visible_writes),
        written_after_growth=grown and _written_in_grown_storage(swaps, final, run.dense[i]),
        visible_through_self=swaps.family_of(run.dense[i]) in swaps.visible_families,
        self_set_with_grad=swaps.family_of(run.dense[i]) in swaps.grad_self_set_families,
        set_under_grad=id(final) in swaps.grad_set_ids,
        set_source_edge=_set_source_edge(i, run, layout, set_source, storage_changed),
        source_bumps_at_set=source_bumps_at_set(swaps, final),
        grad_set_input=None if storage_changed else _grad_set_input(final, run),
        view_set_under_grad=id(final) in swaps.view_set_bases,
        grad_set_node=swaps.grad_set_nodes.get(id(final), GradSetNode.SET),
        new_storage_of=new_storage_of,
        new_storage_numel=_storage_numel(final) if (storage_changed and set_source is None) or grown else None,
        metadata_hidden=_metadata_hidden(run, final),
        grown_under_it=grown and not _resized_itself(run, final),
        left_grown=left_grown,
        assigned_write=assigned_write(i, run, _in_subclass(i, layout), storage_changed),
        relaid_last=_relaid_last(swaps, final),
    )


def _relaid_last(swaps: SwapRecord, final: torch.Tensor) -> bool:
    """LeafMutation.relaid_last: the last bump of `final`'s counter was its own in-place view op, run with grad."""
    ops, bump = swaps.inplace_views.get(id(final), []), swaps.inplace_view_bumps.get(id(final))
    return bool(ops) and ops[-1].grad_enabled and bump == swaps.family_last_bump.get(swaps.family_of(final))


def _written_before_data_only(swaps: SwapRecord, final: torch.Tensor) -> bool:
    """`LeafMutation.kept_at_entry` of a KEPT leaf: its family's last write with grad came before its last `.data =`."""
    assigned, last = swaps.data_sets.get(id(final)), swaps.family_last_visible_seq.get(swaps.family_of(final))
    return assigned is not None and last is not None and last < assigned[0]


def _written_in_grown_storage(swaps: SwapRecord, final: torch.Tensor, dense: torch.Tensor) -> bool:
    """`LeafMutation.written_after_growth` of a grown leaf: a write autograd records went into the storage it ends on
    (the one its last growth rebound it to) and through its own version-counter family."""
    return storage_key(final) in swaps.visible_writes and swaps.family_of(dense) in swaps.visible_families


def wrappers_after(
    layout: DenseLayout, run: FunctionalRun, mutations: Sequence[LeafMutation]
) -> tuple[Meta | None, ...]:
    """Per tensor input: a subclass's outer metadata at the end where they changed, else None. Against the wrapper
    as the program got it: a non-leaf input runs as a clone, whose layout is its own. The offset is eager's (Note
    [as_strided On Inputs]): that of the first of its dense leaves whose offset the wrapper had."""
    result: list[Meta | None] = []
    for tree, t, before, leaves in zip(
        layout.trees, run.user_tensors, run.initial_metas, layout.leaves_of_input, strict=True
    ):
        meta = leaf_meta(t)
        j = next((j for j in leaves if leaf_meta(run.finals[j])[2] == meta[2]), None)
        if j is not None:
            meta = (meta[0], meta[1], mutations[j].final_meta[2])
        result.append(None if tree is None or before == meta else meta)
    return tuple(result)


def _eager_storage_keys(swaps: SwapRecord, orig: torch.Tensor) -> set[object]:
    """The run's storages that are eager's one storage under input leaf `orig`: its own, and each fresh storage a
    resize_() grown from it rebound it (or a tensor sharing it) to, which eager grows in place (Note [Storage Swaps
    By Rebinding]); a write autograd records into any of them (x.detach().resize_(n), then x.mul_(2)) is one into
    the input."""
    key = storage_key(orig)
    return {key} | {k for k in swaps.grown_from if swaps.grown_root(k) == key}


def _in_group(j: DenseIndex, layout: DenseLayout) -> bool:
    """Is dense leaf `j` traced as a view of a synthetic base (Note [Synthetic Bases])? Grown, its base's write-back
    holds the whole grown storage (Note [Input Updates])."""
    return any(j in group.members for group in layout.groups)


def _check_grown_then_swapped(final: torch.Tensor, metas: tuple[Meta, Meta], path: str, leaf: DenseIndex) -> None:
    """An input grown by resize_() then set_() (or its `.data` assigned) within its grown storage, its own graph
    input: the epilogue grows the input's storage and copies the final value in at the final layout, which writes
    eager's grown storage only where that layout covers all of it from the input's offset on. Where it does not,
    eager's elements outside it (the old ones, those the program wrote before the set_()) stay in the storage, where
    a base of the input, or the caller's views of it, show them: the program reaches storage elements outside the
    input, and the input is traced over its whole storage (Note [as_strided On Inputs]), whose synthetic base's
    write-back grows the storage and writes all of it (Note [Storage Swaps By Rebinding])."""
    (final_meta, orig_meta), numel = metas, _storage_numel(final)
    size, _, offset = final_meta
    count: int | sympy.Expr = 1
    for s in size:
        count = count * _expr(s)
    covers = (
        numel is not None
        and torch._prims_common.is_non_overlapping_and_dense_or_false(final)
        and sympy.simplify(_expr(offset) - _expr(orig_meta[2])) == 0
        and sympy.simplify(_expr(offset) + _expr(count) - numel) == 0
    )
    if not covers:
        raise StorageReachError(
            f"{path}: the program grows this input with resize_() and then set_()s it (or assigns its `.data`) to a "
            "part of its grown storage; eager keeps the whole grown storage under the input, which the compiled "
            "call's epilogue writes back only at the input's final layout. Resize and set_() a .clone() instead",
            leaf=leaf,
        )


def _grown_then_left(run: FunctionalRun, layout: DenseLayout, i: int) -> bool:
    """`LeafMutation.left_grown` of input leaf `i`, which ends on another storage: a resize_() grew its own during the
    program, and eager's storage, grown in place, holds what the program wrote into it after. A plain input traced as
    a view of a synthetic base (the growth makes it one: Note [Storage Swaps By Rebinding]) whose values carry no
    history has the base's write-back, untracked, grow and write that storage before the epilogue moves the input,
    as eager's steps came (grow, write, set_()); refused otherwise (the epilogue would only move the input: eager's
    base of the input would gain a history from values written with one). Refused too where the program never
    set_() the input (nor assigned its `.data`): the run moved it to the grown storage as a tensor over it, not as the
    input grown (a subclass input's inner tensor, grown through an alias)."""
    key, swaps, path = storage_key(run.originals[i]), run.swaps, layout.leaves[i].path
    if not any(k != key and swaps.grown_root(k) == key for k in swaps.grown_from):
        return False
    owner = run.user_tensors[next(k for k, leaves in enumerate(layout.leaves_of_input) if i in leaves)]
    if not any(id(t) in swaps.swapped_ids or id(t) in swaps.wrapper_data for t in (run.finals[i], owner)):
        raise UnsupportedError(
            f"{path}: the program grows this input's storage with resize_() through an alias of it (a detach(), "
            "`.data` or a view of it: `x.detach().resize_(n)`); eager grows the storage in place under the input, "
            "and the compiled call's run takes this tensor to the grown storage as a tensor moved there (as it "
            "does a tensor subclass input's inner tensors), not as the input grown, which its epilogue does not "
            "repeat. Resize a .clone() of the input instead"
        )
    base = next(
        (
            run.graph_inputs[k]
            for k, item in enumerate(layout.graph_inputs)
            if isinstance(item, AliasGroupRef) and i in layout.groups[item.group].members
        ),
        None,
    )
    if not _in_subclass(i, layout) and base is not None and not base.requires_grad:
        return True
    raise UnsupportedError(
        f"{path}: the program grows this input's storage with resize_() and then set_()s the input (or assigns "
        "its `.data`) onto another storage; eager leaves the storage it left grown in place and holding what the "
        "program wrote into it (a base of the input, or any view of it the caller holds, shows them), which the "
        "compiled call's epilogue does not repeat for a tensor subclass input's inner tensor, an input not traced "
        "as a synthetic base, or values written there with a history (it only moves the input). Resize and set_() "
        "a .clone() of the input instead"
    )


def _storage_numel(t: torch.Tensor) -> int | None:
    nbytes: object = t.untyped_storage().nbytes()  # a SymInt where the storage's size is symbolic
    return nbytes // t.element_size() if isinstance(nbytes, int) else None


def _with_wrapper_grad_sets(
    mutations: tuple[LeafMutation, ...], run: FunctionalRun, layout: DenseLayout
) -> tuple[LeafMutation, ...]:
    """A subclass input set_() under grad (Note [set_ Under Grad]): marked on its leaves; so are the inputs a view
    of an input was set_() to under grad (Note [set_ Under Grad])."""
    marked: dict[int, tuple[bool, bool, GradSetNode]] = {
        j: (
            id(t) in run.swaps.view_set_bases,
            _edge_to_input(t, run),
            run.swaps.grad_set_nodes.get(id(t), GradSetNode.SET),
        )
        for i, t in enumerate(run.user_tensors)
        if layout.trees[i] is not None and id(t) in run.swaps.grad_set_ids
        for j in layout.leaves_of_input[i]
    }
    sources = {
        j
        for i, t in enumerate(run.user_tensors)
        if id(t) in run.swaps.view_set_sources
        for j in layout.leaves_of_input[i]
    }
    mutations = tuple(replace(m, view_set_source=True) if j in sources else m for j, m in enumerate(mutations))
    return tuple(
        replace(
            m,
            set_under_grad=True,
            view_set_under_grad=marked[j][0],
            grad_set_node=marked[j][2],
            set_source_edge=m.set_source is not None and marked[j][1],
        )
        if j in marked
        else m
        for j, m in enumerate(mutations)
    )


def _edge_to_input(t: torch.Tensor, run: FunctionalRun) -> bool:
    """Did the last set_() of `t` under grad take an input that requires grad, or a view of one taken with grad
    (eager's set_ node then has an edge to that input's history: Note [set_ Under Grad])?"""
    source = _grad_set_root(t, run)
    return source is not None and any(source is u for u in run.user_tensors)


def _set_source_edge(
    i: int, run: FunctionalRun, layout: DenseLayout, set_source: DenseIndex | None, storage_changed: bool
) -> bool:
    """`LeafMutation.set_source_edge` of dense leaf `i`: set_() under grad onto another input's storage, or, a plain
    input, onto another input over its own storage (`x0.set_(x1)`, x1 a `x0.detach().requires_grad_()`, or a view of
    x1 taken with grad): eager's set_ node has an edge to that input's history, though the storage stays."""
    if not _edge_to_input(run.finals[i], run):
        return False
    if set_source is not None:
        return True
    kept_onto = None if storage_changed else _grad_set_input(run.finals[i], run)
    return kept_onto is not None and kept_onto != i and not _in_subclass(i, layout)


def _grad_set_root(t: torch.Tensor, run: FunctionalRun) -> torch.Tensor | None:
    """The tensor the last set_() of `t` under grad took, or the root of the views taken with grad it is one of (the
    tensor eager's set_ node has its edge to); None where none requires grad, or a view op ran without grad."""
    source = run.swaps.grad_set_sources.get(id(t))
    if source is None:
        return None
    for record in run.swaps.chain(source):
        if not record.grad_enabled:
            return None
        source = record.source
    return source


def _grad_set_input(t: torch.Tensor, run: FunctionalRun) -> DenseIndex | None:
    """The dense input that the last set_() of `t` under grad took, itself or as the root of views taken with grad
    (`_grad_set_root`), if one."""
    source = _grad_set_root(t, run)
    return next((DenseIndex(j) for j, d in enumerate(run.dense) if source is not None and d is source), None)


def _extent(meta: Meta) -> int | sympy.Expr:
    """Elements of storage a view needs (offset + 1 + sum((size - 1) * stride)); symbolic where sizes are."""
    size, stride, offset = meta
    if any(isinstance(s, int) and s == 0 for s in size):
        return 0
    total = _expr(offset) + 1
    for s, st in zip(size, stride, strict=True):
        total = total + (_expr(s) - 1) * _expr(st)
    return int(total) if total.is_number else total


def _surely_greater(a: int | sympy.Expr, b: int | sympy.Expr) -> bool:
    """a > b when that is decidable from the expressions alone (symbolic sizes: only if it always holds)."""
    if isinstance(a, int) and isinstance(b, int):
        return a > b
    relation = sympy.simplify(_expr(a) - _expr(b))
    return bool(relation.is_number and relation > 0) or bool(relation.is_positive)


def _expr(d: int | sympy.Expr) -> sympy.Expr:
    return sympy.Integer(d) if isinstance(d, int) else d


def _in_subclass(i: int, layout: DenseLayout) -> bool:
    """Is dense leaf `i` an inner tensor of a subclass input? (`layout.trees` is indexed by tensor input, not by the
    flat position a leaf's `owner` names: they differ where a tensor passed twice holds a marker.)"""
    return any(layout.trees[t] is not None and i in leaves for t, leaves in enumerate(layout.leaves_of_input))


# Note [History Kept Through .data =]
# Eager: a swap autograd does not see (`.data =`, or set_() under no_grad) gives a tensor another storage and metadata
# but keeps its own history and version counter; its gradient flows through that history, checked against the size
# recorded there (sum_to where it expands, an error where not). The functional run sees only the storage it now shares.
# - Outputs (`t = x.add(x); t.data = y; return t`): t stays no view, with AddBackward0. The graph computes it as a fresh
#   output of the Function (the joint traces the same history on the functional t, whose value is y's); where y's
#   storage is an input's, the runtime then assigns `.data` from an alias of the input taken after the epilogue, under
#   no_grad, with t's final metadata (OutputInfo.data_from). A plain view is replayed from its base with its history,
#   then assigned (Replay.set_by_data) where its chain allows. A view of such a t replays from t where t is returned too,
#   else is refused. Refused too: a tensor subclass (Note [Wrapper Storage]) and an alias of an intermediate
#   another output shares.
# - Writes with grad after the swap (`x0.data = x1; x0[:, 0:2].mul_(-1.0); return x0`, x0 a non-leaf input requiring
#   grad) record on x0's own history, not on that of the tensor whose storage x0 now shares; the epilogue would only
#   repeat the swap. So x0 (LeafMutation.written_after_data) gets a FINAL update, differentiated through the history the
#   trace recorded on it, copied in with grad after the `.data =` is repeated (epilogue_plan.copy_into): x0's grad_fn is
#   a CopyBackwards over the Function's; the same where the `.data =` kept x0's storage (`x0.data = x0.t()`): the write
#   lands in x0's own storage, still on x0's own history. Where the joint's backward through the write would fail
#   (AssignedWrite.AFTER_RAISING) the value is copied in with grad but not differentiated, and x0's node raises alone.
#   Eager's node of that write also has an edge to its operand's history, so every input whose history that reaches
#   (`x2.copy_(w); x0.copy_(x2); return x0, w`, w a leaf) waits behind the raising node and gets no gradient: the copy
#   takes its value through a holder made before the call with an edge to each of those inputs' history as the call
#   found it (`Analysis.raising_write_blocks`, read from eager's graph on static fakes; runtime/steps.py's
#   `blocking_holder`). Refused where that graph reaches an input apart from the raising node (a second write after
#   it), whose gradient eager may accumulate before the raise.
#   A set_() under no_grad onto another input's storage, the last swap, is one autograd sees no more than a `.data =`:
#   writes with grad after it take this path too (it bumps x0's counter, as the epilogue's repeated set_() does).
#   Writes with grad before the last `.data =` are on x0's history too, kept by the trace's stand-in across its
#   rebinding as by eager's tensor: a FINAL update the same way (KEPT) where no in-place view op relaid x0 and its size
#   at entry expands to its last. Where no write with grad follows the last `.data =` (LeafMutation.kept_at_entry)
#   and the assigned layout repeats one memory location (`x0.add_(x0); x0.data = x0.expand(2, 3)`), eager's node is
#   still the write's, at the entry layout: the epilogue copies the FINAL in with the input relaid, below autograd, at
#   one element per location, not into a narrowing of it (a CopySlices over a repeated layout, whose backward raises).
#   Refused: other writes before it (BEFORE), an in-place view op after it (RESHAPED), in-place view ops with grad and
#   a `.data =` but no write with grad (VIEWED), writes with grad after a no_grad set_() onto a storage the program
#   computed (and subclass kin; through the input or any view of it, taken before the set_() or after: eager records
#   each on the input's history by CopySlices, and an input that is a view has its history regenerated from its base's,
#   which recorded the write at the view's new layout), and writes with grad before a no_grad set_()
#   onto another storage that is the last swap (SET_BEFORE: the epilogue's copy into the old storage runs below
#   autograd, so the input kept the history it came with). Subclass inputs: Note [Inputs Written In Training].
# - Plain views assigned after a write (`t0 = x0.diagonal(1, 0, 1); x1.mul_(-1.0); t0.data = x0; return t0`, x0 a view
#   of the non-leaf x1): t0 keeps x1's counter and stays a view. Reading its grad_fn after the counter moved regenerates
#   it by AsStridedBackward0 of the metadata t0 has *then*, the assigned ones; a read reaching its grad_fn between the
#   write and the `.data =` regenerates it earlier and takes the counter as its own. So eager's history at the end is the
#   assigned metadata's exactly where the counter moved after the view and no such read came between (`stale_at_end`).
#   There the runtime replays the output at the input's counter at entry (Replay.stale_view, as in Note [Views That Raise
#   After A Bump]), so the first read after the repeated `.data =` regenerates it as eager's. Subclass views regenerate
#   by their view functions, as the replay already has; views replayed from an intermediate or an earlier output have no
#   counter at entry to take (refused in view_chains where eager's would be stale).


def assigned_write(i: int, run: FunctionalRun, in_subclass: bool, storage_changed: bool) -> AssignedWrite | None:
    """Note [History Kept Through .data =]: when plain input leaf `i`, which requires grad at the end and was
    assigned `.data =` (or set_() under no_grad onto another storage, its last swap), was written with grad through
    itself or a view of it, against its last assignment; None where it was not, or the rule does not apply."""
    final, swaps = run.finals[i], run.swaps
    if in_subclass or not final.requires_grad:
        return None
    by_data = id(final) in swaps.swapped_by_data
    assigned = swaps.data_sets.get(id(final)) if by_data else _no_grad_set(final, swaps, storage_changed)
    written = swaps.family_visible_seq.get(swaps.family_of(final))
    if assigned is None:
        return None
    if written is None:  # Note [History Kept Through .data =]
        viewed = by_data and storage_changed and any(r.grad_enabled for r in swaps.inplace_views.get(id(final), []))
        return AssignedWrite.VIEWED if viewed else None
    if written < assigned[0]:
        if not by_data:
            return AssignedWrite.SET_BEFORE
        return AssignedWrite.KEPT if _history_at_entry_layout(i, run, final) else AssignedWrite.BEFORE
    if any(r.seq > assigned[0] for r in swaps.inplace_views.get(id(final), [])):
        return AssignedWrite.RESHAPED
    if not _expands_to(run.originals[i].shape, final.shape):
        return AssignedWrite.AFTER_RAISING
    return AssignedWrite.AFTER


def _history_at_entry_layout(i: int, run: FunctionalRun, final: torch.Tensor) -> bool:
    """Note [History Kept Through .data =]: is the history that writes with grad before a `.data =` recorded on plain
    input leaf `i` (`final`, its stand-in at the end) at the layout it came with (no in-place view op on it), which
    the size it ends with expands to (eager's backward sums the gradient back)? The trace's stand-in keeps that
    history across the rebinding, as eager's tensor does, so its FINAL update is differentiated through it."""
    return not run.swaps.inplace_views.get(id(final)) and _expands_to(run.originals[i].shape, final.shape)


def _no_grad_set(final: torch.Tensor, swaps: SwapRecord, storage_changed: bool) -> tuple[int, bool] | None:
    """Note [History Kept Through .data =]: the record of the last swap of `final` (a plain input leaf that requires
    grad) where it was a set_() under no_grad onto another storage (none under grad): autograd sees it no more than a
    `.data =`; eager's set_() bumps the counter, which the epilogue's repeated set_() does too."""
    last_set = swaps.plain_sets.get(id(final))
    if not storage_changed or last_set is None or last_set[1] or id(final) in swaps.grad_set_ids:
        return None
    return last_set


def check_assigned_writes(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """Refuse the writes of Note [History Kept Through .data =] the epilogue cannot give eager's history."""
    for i in range(len(user_fakes)):
        path = flat.leaves[flat.tensor_indices[i]].path
        for j in layout.leaves_of_input[i]:
            m = analysis.mutations[j]
            if m.assigned_write is AssignedWrite.BEFORE:
                raise UnsupportedError(
                    f"{path}: the program writes this input where autograd records it, then assigns its `.data` "
                    "again, where an in-place view op (t_, unsqueeze_) changed its layout or its size at entry does "
                    "not expand to the one it ends with; eager's history of that write is at a layout the input no "
                    "longer has, which the compiled program does not reproduce (Note [History Kept Through .data =]). "
                    "Write after the last `.data =`, or under torch.no_grad()"
                )
            if m.assigned_write is AssignedWrite.SET_BEFORE:
                raise UnsupportedError(
                    f"{path}: the program writes this input, which requires grad, where autograd records it, then "
                    "set_()s it onto another storage under torch.no_grad(); eager keeps the history of that write (a "
                    "set_() under no_grad is not recorded), which the compiled program does not reproduce: it gives "
                    "the input's gradient as if the write had not happened (Note [History Kept Through .data =]). "
                    "Write after the set_(), set_() with grad enabled, or write into a clone"
                )
            if m.assigned_write is AssignedWrite.VIEWED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, a tensor on another "
                    "storage and changes its layout in place (t_, transpose_, unsqueeze_) with grad enabled; the "
                    "compiled program cannot give it eager's history of that view op (Note [History Kept Through .data "
                    "=]). Use the out-of-place view op, or change the layout under torch.no_grad()"
                )
            if m.written_after_data and _view_relaid(flat, i, m):
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, a view with autograd history, a tensor of "
                    "another size or strides, and writes it where autograd records it (before or after); eager "
                    "records the write on the view's base, and after the `.data =` at the assigned layout (CopySlices "
                    "over the base's elements that layout reaches), which the compiled program does not reproduce "
                    "(Note [History Kept Through .data =]). Assign a tensor of the view's own layout, or write a clone"
                )
            if m.assigned_write is AssignedWrite.RESHAPED:
                raise UnsupportedError(
                    f"{path}: the program assigns `.data` of this input, which requires grad, writes it where "
                    "autograd records it, and changes its layout in place (t_, unsqueeze_) after the `.data =`; the "
                    "compiled program cannot give it eager's history (Note [History Kept Through .data =]). Use the "
                    "out-of-place view op, or write a clone"
                )


def _view_relaid(flat: FlatInputs, i: int, m: LeafMutation) -> bool:
    """Is tensor input `i` a view whose `.data =` left it another size or strides than it came with (`m`: its
    leaf's mutation)?"""
    real = flat.values[flat.tensor_indices[i]]
    if not isinstance(real, torch.Tensor) or not real._is_view():
        return False
    size, stride, _ = m.final_meta
    came = [symint_expr(d) for d in (*real.shape, *real.stride())]
    return came != [*size, *stride]


def _expands_to(recorded: Sequence[int | torch.SymInt], size: Sequence[int | torch.SymInt]) -> bool:
    """Autograd sums a gradient of `size` back to `recorded` (each dim 1 or equal). Symbolic dims are compared at
    their hints, under a guard: two symbols of one value (dynamic=True gives each input's dims their own) are not
    equal as expressions, yet eager's engine sums back where their values agree."""
    if len(recorded) > len(size):
        return False
    pairs = zip(reversed(recorded), reversed(size), strict=False)
    return all(guard_bool(r == 1) or guard_bool(r == n) for r, n in pairs)


def assigned_with_history(value: torch.Tensor, run: FunctionalRun) -> bool:
    """`value`'s last storage swap was `.data =` and it has autograd history of its own."""
    if not (value.requires_grad and id(value) in run.swaps.swapped_by_data):
        return False
    try:
        return value.grad_fn is not None
    except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
        return False


def history_data_leaf(
    path: str, value: torch.Tensor, subclass: bool, leaves: Sequence[OutputLeaf], run: FunctionalRun
) -> OutputLeaf | None:
    """Note [History Kept Through .data =]: for such an output, the leaf its `.data` is regenerated from after
    the graph gave it its history (None: the graph's own value is eager's storage, or the rule does not apply)."""
    if not assigned_with_history(value, run) or (not subclass and run.swaps.is_view(value)):
        return None  # (a plain view: replayed, then assigned, where its chain allows: analyze._check_replay)
    leaf = leaves[0] if len(leaves) == 1 else None
    plain = not subclass and not is_traceable_subclass(value) and not value._is_view() and not run.swaps.is_view(value)
    if plain and leaf is not None and leaf.source is LeafSource.GRAPH and leaf.storage_of is None:
        return None  # `.data =` of a fresh intermediate: the graph's value is that storage already
    exact = (
        leaf is not None
        and leaf.source is LeafSource.INPUT_ALIAS
        and not leaf.is_view
        and leaf.hidden_base is None
        and leaf.foreign_base is None
        and not leaf.input_layout
    )
    if not (plain and exact):
        raise UnsupportedError(
            f"{path}: the program assigned `.data` of this tensor, which has autograd history: eager returns it with "
            "its own history over the assigned storage, which a compiled output cannot have here (Note [History "
            "Kept Through .data =]: supported for a plain tensor assigned an input or a view of one, or a "
            "fresh intermediate). Return the assigned tensor, or a clone"
        )
    return leaf


def check_unreplayed_assigned_view(
    path: str, value: torch.Tensor, run: FunctionalRun, rebuilt_as_view: bool, leaves: Sequence[OutputLeaf]
) -> None:
    """Refuse a plain view output with no replay that `.data =` of it, or of its view root with history, makes
    unreproducible. `rebuilt_as_view`: the output is rebuilt as a view onto its storage without replay (Note [Outputs
    Over Another Storage], or one without history of an input)."""
    if id(value) in run.swaps.swapped_by_data and run.swaps.is_view(value) and not rebuilt_as_view:
        raise UnsupportedError(
            f"{path}: the program assigned `.data` of this view, which eager keeps a view of its base; its view chain "
            "cannot be replayed here (it starts at an intermediate no output returns, or its source changed since), "
            "so the compiled output could not be that view. Return a clone, or assign `.data` of a tensor that is "
            "not a view"
        )
    if not rebuilt_as_view and _through_assigned_view_of_detach(value, run):
        raise UnsupportedError(
            f"{path} is a view of a view (of a detach()) whose `.data` the program assigned, and its view chain cannot "
            "be replayed here (the storage was written, or the view assigned again, after the chain viewed it): "
            "eager's output stays a view of that detach(), without history, which the compiled output, rebuilt from "
            "the input, could not be. Return a clone"
        )
    if not (torch.is_grad_enabled() and value.requires_grad and run.swaps.is_view(value)):
        return
    root = run.swaps.view_root(value)
    if root is value or not assigned_with_history(root, run):
        return  # (a view assigned `.data`: the rules on views, and Note [Probing Eager's Backward])
    # (a view assigned `.data` that the chain passes through keeps its history too: its view ops' sizes, where
    # eager's backward sums the gradient to the view's old size)
    if all(leaf.source is not LeafSource.GRAPH for leaf in leaves):
        raise UnsupportedError(
            f"{path} is a view of a tensor with autograd history whose `.data` the program assigned: eager's view keeps that history over the assigned storage, which a view rebuilt from that "
            "storage cannot have unless the tensor is returned too (Note [History Kept Through .data =]). "
            "Return that tensor as well, or a clone of the view"
        )


def _through_assigned_view_of_detach(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Does plain view `value`'s chain pass through another view whose `.data` the program assigned, back to a
    detach() (eager's `._base` of `value` is then that detach(), or a view of it)?"""
    records = list(run.swaps.chain(value))
    if not records or not any(id(r.source) in run.swaps.swapped_by_data for r in records):
        return False
    root = run.swaps.views.get(id(records[-1].source))
    return root is not None and root.func is torch.ops.aten.detach.default


def eager_offset(t: torch.Tensor, original: torch.Tensor) -> int | torch.SymInt:
    """Note [as_strided On Inputs]: eager's storage offset of FunctionalTensor `t`, which is on the storage of
    `original` (an input's alias with its original metadata); `t`'s own where nothing wrote that storage."""
    if not has_data_mutation(original):
        return t.storage_offset()
    return inner_storage_offset(t) + (original.storage_offset() - inner_storage_offset(original))


def alias_meta(leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex, original: DenseIndex | None) -> Meta:
    """Eager's metadata of FunctionalTensor `leaf`, on the storage dense input `j` has at the end (`original`: the
    input whose storage that was as the inputs came, if any): the offset shifted where the input runs as a clone at
    another offset, else corrected by Note [as_strided On Inputs]."""
    meta = leaf_meta(leaf)
    shift = run.clone_offset_shift.get(j)
    if shift is not None and not (isinstance(shift, int) and shift == 0):
        return (meta[0], meta[1], symint_expr(leaf.storage_offset() + shift))
    if original is not None:
        return (meta[0], meta[1], symint_expr(eager_offset(leaf, run.originals[original])))
    return meta
