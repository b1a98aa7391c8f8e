"""What the program did to each dense input leaf: the `LeafMutation`s of stage `analyze`.

Input: the `FunctionalRun` of the program and the `DenseLayout` of its inputs. Output: one `LeafMutation` per dense
leaf (data written, metadata changed, storage swapped by set_() or `.data =`, grown, hidden from autograd, ...), and
per tensor input the outer metadata a subclass input ends with. Invariants: reads the run only; no graph is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sympy
import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.pipeline.rules.assigned_writes import assigned_write
from subclassaot.pipeline.rules.functional_offsets import alias_meta, eager_offset
from subclassaot.schemas import DenseIndex, DenseLayout, LeafMutation, Meta
from subclassaot.torch_internals import has_data_mutation, mutations_hidden_from_autograd, storage_key, symint_expr


def leaf_mutations(run: FunctionalRun, layout: DenseLayout) -> tuple[LeafMutation, ...]:
    """One `LeafMutation` per dense input leaf, with the set_()-under-grad marks of its input."""
    return _with_wrapper_grad_sets(
        tuple(_leaf_mutation(i, run, layout) for i in range(len(layout.leaves))), run, layout
    )


def _leaf_mutation(i: int, run: FunctionalRun, layout: DenseLayout) -> LeafMutation:
    orig, final = run.originals[i], run.finals[i]
    grown = id(final) in run.swaps.grown_ids
    storage_changed = storage_key(final) != storage_key(orig) and not grown
    set_source = None
    if storage_changed:
        for j, other in enumerate(run.originals):
            if storage_key(other) == storage_key(final):
                set_source = DenseIndex(j)
                break
    if set_source is not None and set_source in run.moved_clones:
        raise UnsupportedError(
            f"{layout.leaves[i].path}: the program set_()s this tensor (or assigns its `.data`) to "
            f"{layout.leaves[set_source].path}, an input that runs as a clone in training (a non-leaf tensor "
            "subclass that requires grad) whose clone is laid out differently (it is expanded or starts at an "
            "offset); not supported. Pass a contiguous tensor, or set_() to a clone of it"
        )
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
    if not storage_changed and not grown:  # Note [as_strided On Inputs]
        final_meta = (final_meta[0], final_meta[1], symint_expr(eager_offset(final, orig)))
    elif set_source is not None:  # on another input's storage: its offset there (Note [as_strided On Inputs])
        final_meta = alias_meta(final, run, set_source, set_source)
    swaps = run.swaps
    view_ops = swaps.inplace_views.get(id(final), []) if any(final is t for t in run.user_tensors) else []
    return LeafMutation(
        data=data,
        metadata=final_meta != orig_meta,
        storage_changed=storage_changed,
        set_source=set_source,
        final_data=(storage_changed and set_source is None) or grown,
        hidden_from_autograd=data
        and (mutations_hidden_from_autograd(orig) or storage_key(orig) not in swaps.visible_writes),
        final_meta=final_meta,
        resized=grown or (_surely_greater(_extent(final_meta), _extent(orig_meta)) and not storage_changed),
        swapped=id(final) in swaps.swapped_ids,
        swapped_by_data=id(final) in swaps.swapped_by_data,
        swapped_by_data_only=id(final) in swaps.swapped_by_data
        and id(final) not in swaps.plain_sets
        and not _in_subclass(i, layout),
        version_bumped=swaps.bumps(run.dense[i]),
        autograd_visible=storage_key(orig) in swaps.visible_writes,
        visible_through_self=swaps.family_of(run.dense[i]) in swaps.visible_families,
        set_under_grad=id(final) in swaps.grad_set_ids,
        view_set_under_grad=id(final) in swaps.view_set_bases,
        new_storage_of=new_storage_of,
        new_storage_numel=_storage_numel(final) if storage_changed and set_source is None else None,
        metadata_hidden=bool(view_ops)
        and not any(r.grad_enabled for r in view_ops)
        and not is_traceable_subclass(final),
        assigned_write=assigned_write(i, run, _in_subclass(i, layout), storage_changed),
    )


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


def _storage_numel(t: torch.Tensor) -> int | None:
    nbytes: object = t.untyped_storage().nbytes()  # a SymInt where the storage's size is symbolic
    return nbytes // t.element_size() if isinstance(nbytes, int) else None


def _with_wrapper_grad_sets(
    mutations: tuple[LeafMutation, ...], run: FunctionalRun, layout: DenseLayout
) -> tuple[LeafMutation, ...]:
    """A subclass input set_() under grad (Note [set_ Under Grad]): marked on its leaves; so are the inputs a view
    of an input was set_() to under grad (Note [set_ Under Grad])."""
    marked: dict[int, bool] = {
        j: id(t) in run.swaps.view_set_bases
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
        replace(m, set_under_grad=True, view_set_under_grad=marked[j]) if j in marked else m
        for j, m in enumerate(mutations)
    )


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
