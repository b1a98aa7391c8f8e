"""set_() under grad: where the runtime makes the set_ node of an input (before the compiled call or in the epilogue),
eager's `._base` of outputs set_() under grad, and the order eager's backward runs its nodes around a set_() of a
view (Note [set_ Under Grad]).

Input: the `_DataMode` of storage_swaps.py calls `note_reads_after_grad_set` after each op of the program; output
leaves of a functional run and its `SwapRecord`; at run time, a regenerated output and the value of the tensor
eager's output is a view of; for the order, the call, `FlatInputs`, `DenseLayout` and the `Analysis`.
Output: `SwapRecord.read_after_grad_set` (from which runtime/steps.py's `early_grad_sets` names the tensor inputs whose
set_() the runtime repeats before the call); `grad_set_view_root` (the intermediate a view set_() under grad still
views, which the graph returns as an intermediate base), whose output runtime/steps.py's
`set_under_grad_holder` rebuilds by a set_() under grad of a fresh tensor; `refuse_view_set_order(...)` and
`refuse_layout_node_order(...)`: None, or an UnsupportedError for a program whose backward eager runs in an order the
compiled one does not.
Invariants: records only; nothing here changes a tensor. Analysis and trace find the same roots (intermediate bases,
numbered after the others, in output order). Only programs with a view set_(), or an input relaid right after its
set_() under grad, are probed (Note [Probing Eager's Backward]); the probe adds no guard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import BackwardEnd, grad_output_count, probe_eager_backward
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.runtime.steps import early_grad_sets
from subclassaot.schemas import (
    Analysis,
    DenseLayout,
    FlatInputs,
    GradSetNode,
    InputIndex,
    LeafSource,
    OutputInfo,
    OutputKind,
    ReplaySource,
)
from subclassaot.torch_internals import (
    autograd_nodes,
    autograd_sequence_mark,
    get_version,
    grad_fn_or_none,
    is_program_node,
    no_torch_function,
    storage_key,
)

# Note [set_ Under Grad]
# Eager: set_() on a tensor that requires grad, with grad enabled, records a node whose backward raises ("derivative for
# set_ is not implemented"), even where the storage ends where it was (x.set_(x)); a set_ on a view taken with grad
# rebases its base's history on it (CopySlices over the set_ node) while the view stays a view. No gradient reaches the
# earlier history through that node. The functional trace sees an alias, whose backward runs, so each such node is
# repeated or its error deferred:
# - Inputs: the epilogue repeats `x.set_(x)` (which changes nothing else) under grad, so a backward through x raises as
#   in eager. Where an input was set_() to another input that requires grad (or a view of it taken with grad: not a
#   detach(), not a no_grad view) whose storage it still has, the epilogue's set_ takes that input (or a view of it) as
#   its source: eager's node has an edge to the source's history, whose gradient then waits behind the raising node.
#   That input, not another on the same storage (`x.detach()` passed beside x: `LeafMutation.set_source`). So too
#   where a plain input keeps its storage, set_() to another input over it (`x0.set_(x1)`, x1 a leaf of its own made
#   by `x0.detach().requires_grad_()`, or a view of x1): `LeafMutation.grad_set_input`, `set_source_edge`.
#   A view taken inside inference_mode requires grad but has no edge to its base's history: an input set_() to one
#   (gaining grad so or not) gets a node that holds no input back (`LeafMutation.set_source_edge`).
#   A later `x.set_(x)` under grad keeps that source (a subclass's, where no op wrote x between): its node's edge to
#   x's history reaches the earlier node's. Set_() to a tensor computed from inputs (`x0.set_(f(x1))`), x's node
#   holds back every input whose node its history reaches behind a set_ node (the run's history: the set_ node of a
#   view input, or of a view the program took with grad, is a CopySlices, `view_set_nodes`; so `x1[0].set_(x0)` holds
#   x0 back behind x1's node), which eager's backward never runs (`Analysis.input_set_blocks`): the
#   epilogue's set_ takes an alias with an edge to each (`blocking_holder`), so a returned view of a leaf behind it
#   (x1, whose node the caller's write after the call may renew) gives the leaf no gradient, as in eager.
#   A subclass input's is repeated at the wrapper level, its layout and its leaves' put back after; where the runtime
#   repeats it before the call instead (a subclass input read after its set_(), below), it is x.set_(x): a known gap.
# - Views of inputs set_() under grad (`t0 = x.diagonal(); t0.set_(y)`, x a non-leaf): after the epilogue's set_ on x,
#   a returned t0 is rebuilt by its view chain on x, by as_strided of x, or as a view of x set_() with grad onto
#   another input's storage (Note [Outputs Over Another Storage]): `._base`, storage, layout, version are eager's.
#   A base without grad gains it so (an input: Note [Inputs Written In Training]; an intermediate: set_() by the
#   runtime as in Note [set_ Under Grad]); a returned view of such an intermediate is refused.
# - Order: eager's set_ node sits in the program's creation order, behind the nodes of the program's later reads of the
#   input, while the epilogue's is made after the Function and runs first. Where the program read the input with grad
#   after its set_() (`Analysis.read_after_grad_set`; a read of a view counts, wherever taken: the set_ moved the
#   counter the view shares; so does a custom autograd.Function's, whose forward runs with grad off, seen as its node's
#   edge to the set_ node), the runtime repeats the set_ before the call instead, so the Function's edge goes through
#   it as eager's reads do. Only for an input returned as itself and read with grad before its set_() by no op but its
#   own history; elsewhere the epilogue's set_ stays (a plain input set_() to another input keeps it: its edge to that
#   input's history). Such an input returned beside a leaf the Function takes detached, with a raising backward, is
#   refused where eager's node waits behind the program's (backward_trace's refuse_set_beside_returned_leaves); one
#   whose set_ runs before the call though no output reads it after waits behind the Function: a known gap.
#   The node an input's history ends on after its set_() (its own, an in-place view op's, a write's) is made by
#   the epilogue in eager's order: Note [Epilogue Nodes In Eager's Order].
#   An input that is a view has its set_ node (the base's CopySlices) numbered among the program's nodes (a plain
#   input's NotImplemented node is numbered above all and runs as soon as ready, wherever made): where every node of
#   the program that the other outputs and the inputs as they end reach was made after its set_() (autograd's sequence
#   marks in the functional run), but the view nodes of outputs rebuilt from a leaf input (below), and that set_()
#   took the input or a view of it, its family unwritten before by any write autograd records (one under no_grad or
#   through a detach(), or x.set_(x) under no_grad, makes no node: `note_hidden_write`), eager runs those nodes first
#   and then raises (`t1 = f(x0)` after `x1.set_(x1)` gives x0 its gradient): the runtime repeats that set_ before
#   the call too, read after or not, returned or not. Several views of one base set_() so (`x1, x2 = b[0], b[1]`) go
#   together: the set_ nodes of the others that go before the call do not count, nor do their writes to the family
#   (its version counter moved by such set_()s and writes only). A view of a leaf input (`t1 = x0.view(-1)`) whose
#   first node the program made before the set_() of a view input waits behind that set_ node in eager, while its
#   replay after the set_ would run first and give x0 its gradient (a rebuilt view node, after a write of the
#   output, is newest in both): it is rebuilt before the call, ahead of a set_ repeated there
#   (`views_before_view_sets`), or refused where the program changes that leaf, or set_() or split the view's chain.
#   The same for a view made before the first in-place view op with grad right after a plain input's set_()
#   (GradSetNode.LAYOUT: `t0 = x0.view(4); x1.set_(x1); x1.unsqueeze_(1)`): eager runs the layout node, then the set_
#   node, which raises, before t0's, while the epilogue's layout node would be older than t0's rebuilt one.
# - Views' and leaves' order: a view's CopySlices node has the set_'s place too, so nodes made after it may hand a leaf
#   its gradient before it raises (`t0 = x[0]; t0.set_(t0); return t0, w * 2`); and its edge to the tensor set_() to
#   holds that tensor's gradient back (`t0.set_(w); return t0, w`), and so the gradient of every leaf behind a tensor
#   computed from inputs (`t0.set_(w.clone()); return t0, w * t1`, where the compiled Function hands w its gradient
#   first: any input leaf counts there, as the run's history does not name them). Such programs are probed (Note
#   [Probing Eager's Backward]) and refused where a backward raises after a leaf's gradient, or reaches a raising
#   node, or cannot run. Nodes made after the call (a view input's history regenerated after a write) are newer
#   than eager's CopySlices, and run first: the epilogue makes x's node as eager numbered it (Note [Epilogue Nodes In
#   Eager's Order]).
# - A plain input set_() under grad to another input that the program then set_() away (`x1.set_(x0); x0.set_(t0)`):
#   x1 keeps x0's old storage, while the epilogue's repeat takes its differentiable alias from x0 once x0 has its new
#   one. Refused (`refuse_grad_set_onto_moved_source`); the other order (x0 moved first, x1 set_() to it after) is
#   exact, and so is x1's set_() under no_grad.
# - Intermediates set_() under grad and read after (`t1 = x0.add(-1.0); t1.set_(x1.t()); return (t1 * 2,)`): eager's
#   backward reaches the set_ node and raises, the compiled one would give x1 a gradient. Outputs that are t1 or views
#   of it get the node from their holder (Note [set_ Under Grad]). Where the history of an output without a
#   holder reaches such a node (`Analysis.grad_set_intermediate_read`), eager's backward is probed although the traced
#   one ran, and its error deferred where every backward through all outputs raises before any gradient (Note [Probing
#   Eager's Backward]); else refused, never run with a backward that computes gradients.
#
# Outputs. Eager: `t = x * 3; t.set_(y); return t` with grad on records the set_ on t, whose grad_fn raises in backward
# (above). The output is built as usual (an alias of y's storage, from the input or the graph), then a fresh holder that
# requires grad is set_() to it with grad on: the same grad_fn, storage and metadata. Which leaves got a gradient before
# the raise depends on the engine's order; a set_ node runs as soon as it is ready, and ours (a holder's, for an output
# of the graph or of the Function alike) is ready no later than eager's, so only the loss's nodes and those made after the set_ run
# between: a leaf gets a gradient there only where the loss reaches it directly or none of its paths crosses a set_ node
# (refused by Note [Backward Errors Are Deferred]).
# - A subclass output gets a holder of its own class (a clone of a detached alias), set_() at the wrapper level, whose
#   wrapper storage is then the output's (Note [Wrapper Storage]).
# - Leaves behind the node: eager's set_ node has edges to the leaves its tensor's history reaches, and an
#   AccumulateGrad runs only once every node with an edge to it has run, so such a leaf never gets its gradient, even
#   where the loss reaches it directly. The analysis notes each input reached through a NotImplemented node
#   (`OutputInfo.set_blocks`), and the holder is made by an autograd Function with an edge to each (`blocking_holder`).
#   A returned leaf input not behind such a node of every output set_() under grad, or behind an output whose holder is
#   a view of eager's base object (`GradSetBase.same_object`), is refused (`check_set_under_grad`).
# - Views: the holder of a view must be a view of eager's `._base`, whose shape and values the user can read:
#   * views (with grad) of an intermediate r, the last of them then set_() (`t = (x * 2).t(); t.set_(y)`): r as it
#     ends is returned by the graph as an intermediate base (`grad_set_view_root`); the holder is a view of r where r
#     is that object and requires grad, so other outputs viewing r view the same object; else a view of a fresh tensor
#     set_() to r;
#   * an intermediate r set_() under grad, then viewed (`t0 = x * 2; t0.set_(y); return t0.t()`): the holder's base is a
#     fresh tensor set_() to the alias of the output's storage with r's final metadata (GradSetBase.meta), and the output
#     a view of it with its own geometry. Only where t0 is an intermediate no other output is or views, no view itself,
#     and every view in the chain was taken with grad on (none by unbind, split, ...).
#   Either way the base's history runs through a set_ node, as eager's does, and the output's backward raises. A view
#   of an intermediate (`t = (x * 2).view(-1); t.set_(y)`) stays a view whose history the set_ rebases: the holder is a
#   view of a base requiring grad with the intermediate's values, set_() the same way. Views of inputs follow Note
#   [set_ Under Grad]. Other views are refused.


def note_reads_after_grad_set(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
    """After an op of the program other than set_(): note the tensors set_() under grad before that it read (or
    wrote) with grad, itself or through a view (Note [set_ Under Grad])."""
    if not torch.is_grad_enabled():
        return
    if not any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(out)):
        return
    results = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    # a node apart from the input's own history: no view op, nor an in-place op on what it read
    apart = not all(t._is_view() for t in results) and not any(r is a for r in results for a in tensors)
    for a in tensors:
        read = {id(a), record.family_of(a)}
        if a._is_view() and a._base is not None:
            read.add(id(a._base))
        record.read_after_grad_set.update(read & record.grad_set_ids)
        if apart and a.requires_grad:
            record.read_before_grad_set.update(read - record.grad_set_ids)


def early_set_inputs(
    record: SwapRecord, flat: FlatInputs, tensors: Sequence[torch.Tensor], output: object, infos: Sequence[OutputInfo]
) -> tuple[bool, ...]:
    """Per tensor input: is its set_() under grad repeated before the compiled call? Where it was read with grad after
    and never apart from its own history before, and returned as itself; or where it is a view whose set_() came
    before every node of the program that a backward may reach but the set_ nodes of the other such views and the
    view nodes of outputs that are views of leaf inputs, rebuilt before the call where made before it (Note [set_
    Under Grad])."""
    leaves = [o for o in pytree.tree_leaves(output) if isinstance(o, torch.Tensor)]
    returned = {id(o) for o in leaves}
    rebuilt = _leaf_input_views(flat, output, infos)
    # a backward may start at the inputs too, as they end
    roots = [*(o for o in leaves if id(o) not in rebuilt), *tensors]
    views = [t for t in tensors if record.is_view_input(t) and id(t) in record.own_history_grad_sets]
    while True:  # the views whose set_() came first, each set_ node but theirs made after
        sets = {record.grad_set_marks[id(t)] + 1 for t in views}
        kept = [t for t in views if _set_before_any_node(record, t, roots, sets)]
        if len(kept) == len(views):
            break
        views = kept
    early = {id(t) for t in views}
    read = record.read_after_grad_set | _read_by_functions(record, tensors, leaves)
    return tuple(
        (id(t) in returned and id(t) in read and id(t) not in record.read_before_grad_set) or id(t) in early
        for t in tensors
    )


def _read_by_functions(record: SwapRecord, tensors: Sequence[torch.Tensor], leaves: Sequence[torch.Tensor]) -> set[int]:
    """id() of the tensor inputs set_() under grad whose set_ node (their grad_fn as they end) a node of the
    program has an edge to, where a custom autograd.Function read them: its forward runs with grad off, so no op
    `note_reads_after_grad_set` sees notes the read, but its node takes the input's history as it found it (Note
    [set_ Under Grad])."""
    ends = {
        id(t): node for t in tensors if id(t) in record.plain_grad_sets and (node := grad_fn_or_none(t)) is not None
    }
    if not ends:
        return set()
    found: set[int] = set()
    for node in autograd_nodes(grad_fn_or_none(o) for o in (*leaves, *tensors)):
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            found.update(k for k, end in ends.items() if any(child is end for child, _ in node.next_functions))
    return found


def _leaf_input_views(flat: FlatInputs, output: object, infos: Sequence[OutputInfo]) -> set[int]:
    """id() of the outputs (leaves of `output`, described by `infos`) that the runtime rebuilds by a view chain from
    an autograd leaf input that requires grad: where made before a view input's set_() under grad, they are rebuilt
    before the call (`views_before_view_sets`), ahead of that set_ repeated there (Note [set_ Under Grad])."""
    found: set[int] = set()
    for value, info in zip(pytree.tree_leaves(output), infos, strict=True):
        r = info.replay
        if r is None or r.source is not ReplaySource.INPUT or not isinstance(value, torch.Tensor):
            continue
        real = flat.values[r.index]
        if isinstance(real, torch.Tensor) and real.is_leaf and real.requires_grad:
            found.add(id(value))
    return found


def _layout_nodes(t: torch.Tensor) -> list[int]:
    """The sequence numbers of the nodes of the in-place view ops that `t`'s history ends on after its set_() under
    grad (GradSetNode.LAYOUT), down to its set_ node: a view's node numbered above the first of them runs before it
    reaches the set_ node, in eager as when rebuilt after the epilogue; one below it, after (Note [Epilogue Nodes In
    Eager's Order])."""
    seqs: list[int] = []
    node = grad_fn_or_none(t)
    while node is not None and type(node).__name__ != "NotImplemented" and len(seqs) < _MAX_LAYOUT_NODES:
        seqs.append(int(node._sequence_nr()))
        node = node.next_functions[0][0] if node.next_functions else None
    return seqs


_MAX_LAYOUT_NODES = 64


def _set_before_any_node(record: SwapRecord, t: torch.Tensor, roots: Sequence[torch.Tensor], sets: set[int]) -> bool:
    """Was the last set_() under grad of `t` (an input that is a view: its set_ node, the base's CopySlices, has a
    place among the program's) made before every node of the program that the other `roots` (outputs, inputs as they
    end) reach, but the set_ nodes numbered `sets` (those of the views of inputs set_() so: autograd's number right
    after the set_()'s mark) (Note [set_ Under Grad])?"""
    mark, start = record.grad_set_marks[id(t)], record.program_start_mark
    nodes = autograd_nodes(grad_fn_or_none(o) for o in roots if o is not t)
    return all(
        node._sequence_nr() > mark
        or not is_program_node(node, start)
        or (node._sequence_nr() in sets and type(node).__name__ == "CopySlices")
        for node in nodes
    )


def intermediate_read_after_grad_set(
    record: SwapRecord,
    tensors: Sequence[torch.Tensor],
    dense: Sequence[torch.Tensor],
    output: object,
    holders: Sequence[bool],
) -> bool:
    """Did the program set_() under grad a tensor other than an input (nor one of its dense leaves), not through a
    view, and read it with grad after, and does the history of an output reach a set_ node, other than an output
    that gets a holder's set_ node (`holders`, per leaf of `output`: Note [set_ Under Grad]) (Note [set_
    Under Grad])?"""
    inputs = {id(t) for t in (*tensors, *dense)}
    if not any(k in record.read_after_grad_set and k not in inputs for k in record.plain_grad_sets):
        return False
    leaves = pytree.tree_leaves(output)
    starts = [
        grad_fn_or_none(o)
        for o, holder in zip(leaves, holders, strict=True)
        if isinstance(o, torch.Tensor) and not holder
    ]
    return any(type(node).__name__ == "NotImplemented" for node in autograd_nodes(starts))


def view_set_nodes(record: SwapRecord, tensors: Sequence[torch.Tensor]) -> frozenset[int]:
    """The sequence numbers of the set_ nodes of the inputs that are views (`tensors`, as the run ends) set_() under
    grad, and of the views the program took with grad and set_() so (of an input, `t0 = x1[0]; t0.set_(x0)`, or of
    an intermediate): the CopySlices autograd numbers right after the set_()'s mark (Note [set_ Under Grad])."""
    return frozenset(
        record.grad_set_marks[id(t)] + 1 for t in tensors if id(t) in record.grad_set_marks and record.is_view_input(t)
    ) | frozenset(record.view_set_seqs)


def refuse_grad_set_onto_moved_source(
    paths: Sequence[str],
    user_tensors: Sequence[torch.Tensor],
    record: SwapRecord,
    sources: Sequence[int | None],
) -> None:
    """Note [set_ Under Grad]: refuse a plain input whose last set_() ran under grad onto another input (`sources`, per
    tensor input: the tensor input whose storage it took, None for none or a subclass) that the program set_() after."""
    for i, s in enumerate(sources):
        if s is None:
            continue
        mine = record.plain_sets.get(id(user_tensors[i]))
        theirs = record.plain_sets.get(id(user_tensors[s]))
        if mine is None or theirs is None or not mine[1] or theirs[0] <= mine[0]:
            continue
        raise UnsupportedError(
            f"{paths[i]}: an input set_() with grad enabled to another input, {paths[s]}, which the program then "
            "set_() to another storage: the compiled epilogue would take the alias for its set_ node from that "
            "input's new storage, not the one it left (Note [set_ Under Grad]); not supported in training. set_() "
            "it to a clone, or under torch.no_grad()"
        )


def _is_grad_set(value: torch.Tensor, swaps: SwapRecord) -> bool:
    wrapper_set = swaps.wrapper_sets.get(id(value))
    return id(value) in swaps.grad_set_ids or (wrapper_set is not None and wrapper_set[1])


def grad_set_view_root(
    value: object, swaps: SwapRecord, input_storages: set[object]
) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
    """The intermediate r (and its dense leaves) that `value`, a view of r set_() under grad that requires grad,
    still views in eager, when r is on storages of its own (Note [set_ Under Grad])."""
    if not isinstance(value, torch.Tensor) or not value.requires_grad or not swaps.is_view(value):
        return None
    if not _is_grad_set(value, swaps):
        return None
    root = swaps.view_root(value, through_swaps=True)
    if root is value or not root.requires_grad:
        return None
    leaves = flatten_subclass(root, "root")[1] if is_traceable_subclass(root) else [root]
    if any(storage_key(leaf) in input_storages for leaf in leaves):
        return None
    return root, leaves


def no_grad_set_view_root(value: object, swaps: SwapRecord, input_storages: set[object]) -> torch.Tensor | None:
    """The plain intermediate r with history that `value`, a plain view of r the program took with grad and then
    set_() under no_grad onto another storage, still views in eager (Note [Outputs Over Another Storage])."""
    if not isinstance(value, torch.Tensor) or not value.requires_grad or is_traceable_subclass(value):
        return None
    record = swaps.plain_sets.get(id(value))
    if record is None or record[1] or id(value) in swaps.swapped_by_data or not swaps.is_view(value):
        return None
    root = swaps.view_root(value, through_swaps=True)
    if root is value or is_traceable_subclass(root) or not root.requires_grad or id(root) in swaps.swapped_ids:
        return None
    key = storage_key(root)
    return None if key in input_storages or key == storage_key(value) else root


def set_view_root(
    value: object, swaps: SwapRecord, input_storages: set[object]
) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
    """The intermediate subclass (and its dense leaves) that `value`, a subclass view the program set_() after
    taking it, still views in eager (Note [Output Regeneration])."""
    if not isinstance(value, torch.Tensor) or not is_traceable_subclass(value) or not value._is_view():
        return None
    made, moved = swaps.views.get(id(value)), swaps.wrapper_sets.get(id(value))
    root = value._base
    if made is None or moved is None or moved[0] < made.seq or root is None or not is_traceable_subclass(root):
        return None
    if (torch.is_grad_enabled() and value.requires_grad) or id(root) in swaps.wrapper_data:
        return None
    leaves = flatten_subclass(root, "root")[1]
    return None if any(storage_key(leaf) in input_storages for leaf in leaves) else (root, leaves)


def sets_without_history(value: torch.Tensor, swaps: SwapRecord) -> bool:
    """Did the program set_() wrappers only where autograd records nothing: every wrapper set_() under no_grad or of
    tensors none of which requires grad (a detach() set_() to its own view in training), or
    `value`'s own, as Note [Output Regeneration] rebuilds it?"""
    return (bool(swaps.wrapper_sets) and not swaps.grad_set_ids) or set_view_root(value, swaps, set()) is not None


def refuse_view_set_order(
    call: Callable[..., object], flat: FlatInputs, layout: DenseLayout, analysis: Analysis
) -> None:
    """Note [set_ Under Grad]."""
    rebased = [j for j, m in enumerate(analysis.mutations) if m.view_set_under_grad]
    if not rebased or grad_output_count(call, flat) == 0:
        return  # no output to run a backward through
    ends = probe_eager_backward(call, flat)
    owners = [flat.values[leaf.owner] for leaf in layout.leaves]
    held = [j for j, m in enumerate(analysis.mutations) if m.view_set_source and _grad_leaf(owners[j])]
    if held and (ends is None or any(end is not BackwardEnd.COMPLETES for end in ends.values())):
        path = flat.leaves[layout.leaves[held[0]].owner].path
        raise UnsupportedError(
            f"{path}: the program set_() a view of an input with grad enabled to (a view of) this input, an autograd "
            "leaf that requires grad: eager's set_ node holds back its gradient (so it does for every leaf behind a "
            "tensor computed from inputs that a view is set_() to) where a backward reaches that node, which the "
            "compiled backward does not (Note [set_ Under Grad]). set_() to a tensor that does not require grad "
            "(a detached clone), or under torch.no_grad()"
        )
    early = set(early_grad_sets(analysis, layout))
    leaves = [t for t, i in enumerate(flat.tensor_indices) if _grad_leaf(flat.values[i])]
    if (
        ends is not None
        and BackwardEnd.RAISES in ends.values()
        and early & {t for t, js in enumerate(layout.leaves_of_input) if any(j in rebased for j in js)}
        and leaves
    ):
        # the set_ repeated before the call: the Function's node comes after the raising one and runs first, where
        # eager runs the nodes made before the set_() after it
        path = flat.leaves[flat.tensor_indices[leaves[0]]].path
        raise UnsupportedError(
            f"{path}: the program set_() a view of another input with grad enabled and read it after, and eager's "
            "backward raises at that set_'s node before this autograd leaf gets its gradient from the nodes made "
            "before the set_(); the compiled backward runs them, as one node made after it, first "
            "(Note [set_ Under Grad]). Call set_() under torch.no_grad(), or on a clone"
        )
    if ends is not None and BackwardEnd.RAISES_AFTER_GRADS not in ends.values():
        return
    paths = ", ".join(sorted({flat.leaves[layout.leaves[j].owner].path for j in rebased}))
    raise UnsupportedError(
        f"{paths}: the program set_() a view of this input with grad enabled, which rebases the input's autograd "
        "history on a node that raises in backward; eager's backward runs the nodes the program made after that "
        "set_() first, and one of them gives an input leaf its gradient before it raises (or the backward could not "
        "be probed), which the compiled backward does not reproduce (Note [set_ Under Grad]). "
        "Call set_() under torch.no_grad(), or on a clone"
    )


def refuse_layout_node_order(
    call: Callable[..., object], flat: FlatInputs, layout: DenseLayout, analysis: Analysis
) -> None:
    """Note [Epilogue Nodes In Eager's Order]'s known gap: an input relaid with grad right after its set_() under grad
    (GradSetNode.LAYOUT), whose node eager numbered below the program's later nodes, beside an output whose gradient
    the compiled Function takes: where eager's backward raises after a leaf's gradient, refused."""
    relaid = [
        t
        for t, leaves in enumerate(layout.leaves_of_input)
        if any(
            analysis.mutations[j].set_under_grad and analysis.mutations[j].grad_set_node is GradSetNode.LAYOUT
            for j in leaves
        )
    ]
    if not relaid or not grad_output_count(call, flat):
        return
    through = {o for o, info in enumerate(analysis.outputs) if through_function(analysis, info)}
    ends = probe_eager_backward(call, flat)
    if ends is None or not any(
        end is BackwardEnd.RAISES_AFTER_GRADS and chosen & through for chosen, end in ends.items()
    ):
        return
    path = flat.leaves[flat.tensor_indices[relaid[0]]].path
    raise UnsupportedError(
        f"{path}: the program set_() this input with grad enabled and then changed its layout by an in-place view op "
        "with grad, whose node eager numbers below the nodes the program made after it: eager's backward runs those "
        "first, giving an autograd leaf its gradient before this input's set_ node raises; the compiled backward "
        "runs them, as one node made before the epilogue's layout node, after it (Note [Epilogue Nodes In Eager's "
        "Order]). Call set_() under torch.no_grad(), or relay out a clone"
    )


def through_function(analysis: Analysis, info: OutputInfo) -> bool:
    """Does the output's gradient go into the compiled Function (a value the graph computes, not a view of an input
    rebuilt after the epilogue, nor an input returned as itself)?"""
    if info.kind is OutputKind.SAME_AS:
        assert info.input_index is not None
        return through_function(analysis, analysis.outputs[info.input_index])
    return info.kind is OutputKind.TENSOR and any(leaf.source is not LeafSource.INPUT_ALIAS for leaf in info.leaves)


def _grad_leaf(real: object) -> bool:
    return isinstance(real, torch.Tensor) and real.requires_grad and real.is_leaf


def note_grad_set_place(record: SwapRecord, x: torch.Tensor, source: torch.Tensor | None, written: bool) -> None:
    """At a set_() of `x` under grad (`written`: its family was written before): the autograd sequence mark, and
    whether eager's set_ node holds back no history but `x`'s own as it came (Note [set_ Under Grad])."""
    record.grad_set_marks[id(x)] = autograd_sequence_mark()
    own = source is None or record.view_root(source, through_swaps=True) is x
    family, version = record.family_of(x), get_version(x)  # (the set_'s own bump comes after this)
    if own and (not written or record.own_set_versions.get(family) == version):
        record.own_history_grad_sets.add(id(x))
        record.own_set_versions[family] = version + 1  # written since by own set_()s only, while it stays so
    else:
        record.own_history_grad_sets.discard(id(x))
        record.own_set_versions.pop(family, None)


def source_bumps_at_set(swaps: SwapRecord, x: torch.Tensor) -> int | None:
    """`LeafMutation.source_bumps_at_set` (None: no source): eager's `found` of the last set_() of `x` under grad for
    its source, from its event in the record, else the run's `bump_count` there (Note [The Eager Record])."""
    simulated, place = swaps.grad_set_source_bumps.get(id(x)), swaps.grad_set_places.get(id(x))
    if simulated is None or place is None or swaps.eager is None:
        return simulated
    record = swaps.eager.record()
    event = None if record is None else record.try_get_event("Tensor.set_", *place)
    if event is None or not event.grad_enabled or len(event.inputs) < 2 or event.inputs[1] == event.inputs[0]:
        return simulated  # (eager raised before it, or the place holds no set_() of a tensor onto another)
    return event.found[1]


def note_write_after_grad_set(record: SwapRecord, t: torch.Tensor) -> None:
    """After a write of `t`'s data that autograd records (with grad on, `t` requiring grad, or a custom Function's
    write of `t` marked dirty; an in-place view op, such as a t_() after the set_(), keeps its own path, the
    epilogue's replay): where it rebases the history of a tensor set_() under grad as itself (`t` or the root of its
    view chain taken with grad), that tensor's node is the write's, numbered as the program made it, no longer its
    set_ node (Note [set_ Under Grad]). So too for a detach() alias set_() under grad itself (`x.detach()` passed),
    whether or not eager's set_ node has an edge to its source's history: the write is hidden from its base's
    history, not from the alias's own, which the set_ gave it; its node, numbered below the histories the caller
    regenerates after the call (a view of the base, whose counter the set_ bumped), lets the leaves behind those
    alone take their gradient before the set_ node raises."""
    with no_torch_function():  # (the pipeline's read, no autograd read of the program's: those are replayed in order)
        if not t.requires_grad:
            return
    if id(t) in record.hidden:
        if id(t) in record.plain_grad_sets:
            record.grad_set_nodes[id(t)] = GradSetNode.NUMBERED
        return
    root = t
    for view in record.chain(t):
        if not view.grad_enabled or id(root) in record.hidden:
            return  # (a view taken under no_grad: the write rebases no history of its base)
        root = view.source
    if id(root) in record.plain_grad_sets:
        record.grad_set_nodes[id(root)] = GradSetNode.NUMBERED


def note_hidden_write(record: SwapRecord, t: torch.Tensor, before: int, written: bool) -> None:
    """After a write that autograd does not record and that changes no layout (of `t`'s data under no_grad or through
    a detach(), or `t.set_(t)` under no_grad): `before`, its family's version counter as the write found it;
    `written`, was the family written before. Where every write to the family before was a set_() under grad that
    held back no history but its own, or none was, such set_()s after still hold back no other (Note [set_ Under
    Grad])."""
    family = record.family_of(t)
    if not written or record.own_set_versions.get(family) == before:
        record.own_set_versions[family] = get_version(t) + 1  # (the write's own bump comes after this)


def views_before_view_sets(
    record: SwapRecord,
    flat: FlatInputs,
    tensors: Sequence[torch.Tensor],
    changed: Sequence[bool],
    output: object,
    infos: tuple[OutputInfo, ...],
) -> tuple[OutputInfo, ...]:
    """Note [set_ Under Grad]: `infos` with each output view of a leaf input whose nodes the program made before the
    set_() under grad of a view input, or before the first in-place view op with grad right after another input's
    set_() under grad (GradSetNode.LAYOUT), replayed before the compiled call instead (before the set_ repeated there
    too, or in the epilogue); refuses one made across such a set_(), or of a leaf input the program changes. Per
    tensor input (`tensors`, as the run had them): `changed`, did the program change it."""
    marks = [
        record.grad_set_marks[id(t)] for t in tensors if id(t) in record.grad_set_marks and record.is_view_input(t)
    ]
    relaid = [
        seqs
        for t in tensors
        if id(t) in record.grad_set_marks
        and not record.is_view_input(t)
        and record.grad_set_nodes.get(id(t)) is GradSetNode.LAYOUT
        and (seqs := _layout_nodes(t))
    ]
    marks += [min(seqs) for seqs in relaid]
    if not marks:
        return infos
    leaves = pytree.tree_leaves(output)
    found = list(infos)
    for o, (value, info) in enumerate(zip(leaves, infos, strict=True)):
        r = info.replay
        if r is None or r.source is not ReplaySource.INPUT or r.before_epilogue or not isinstance(value, torch.Tensor):
            continue
        real = flat.values[r.index]
        if not (isinstance(real, torch.Tensor) and real.is_leaf and real.requires_grad):
            continue  # (a node of its own history, made before the program, waits behind the set_ node in both)
        start = record.program_start_mark
        seqs = [int(n._sequence_nr()) for n in autograd_nodes([grad_fn_or_none(value)]) if is_program_node(n, start)]
        if not seqs or min(seqs) > max(marks):
            continue  # made after each: its first view's node runs before the set_ nodes, in eager as in ours
        unchanged = not changed[flat.tensor_indices.index(InputIndex(r.index))]
        if unchanged and not (r.then_set or r.late_steps or r.split_made):
            found[o] = replace(info, replay=replace(r, before_epilogue=True))
            continue
        raise UnsupportedError(
            f"{info.path}: a view of an autograd leaf input taken with grad enabled before the program set_() a view "
            "of another input with grad enabled, which the compiled call cannot rebuild before its call (the program "
            "changes the leaf, or set_() or split the view's chain): eager's backward raises at that set_'s node "
            "before the view's first node runs, the compiled one would give the leaf its gradient first (Note [set_ "
            "Under Grad]). Call set_() under torch.no_grad(), or return a clone of the view"
        )
    return tuple(found)
