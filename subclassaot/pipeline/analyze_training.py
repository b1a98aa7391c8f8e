"""Stage `analyze`, training facts: how the program used subclass inputs of an alias group (Note [Aliased Inputs
In Training]), outputs set_() under grad (Note [set_ Under Grad]), and views of inputs that run as
contiguous clones (`check_overlapping_clones`), subclass inputs that are views of a multi-output op
(`check_multi_output_view_inputs`).

Input: a `FunctionalRun`, the `DenseLayout`, the outputs' `OutputInfo`s. Output: per-input facts for `Analysis`,
output flags, refusals (UnsupportedError naming the output or input and the rule).
Invariants: pure reads of the run's records.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.chain_facts import detach_in_chain, viewed_after_grad_set
from subclassaot.pipeline.rules.set_under_grad import grad_set_view_root
from subclassaot.pipeline.rules.swap_record import SwapRecord, elements_of
from subclassaot.pipeline.rules.view_chains import replay_of, root_replay
from subclassaot.runtime.steps import input_root
from subclassaot.schemas import (
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    GradSetBase,
    InputIndex,
    LeafMutation,
    LeafSource,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    ViewStep,
)
from subclassaot.torch_internals import is_multi_output_view, is_view_op, recorded_size, storage_key, symint_expr


# Ops whose backward saves none of their tensor arguments (Note [Aliased Inputs In Training])
def wrapper_uses(
    run: FunctionalRun, layout: DenseLayout
) -> tuple[tuple[int | None, ...], tuple[int | None, ...], tuple[bool, ...], frozenset[int]]:
    """Analysis.wrapper_first_write, wrapper_last_use, dense_written and function_taken, from the program's own ops
    and the tensors custom Functions saved."""
    position: dict[int, int] = {}
    for i, t in enumerate(run.user_tensors):
        position.setdefault(id(t), i)

    def input_of(t: torch.Tensor) -> int | None:
        while (record := run.swaps.views.get(id(t))) is not None:
            t = record.source
        return position.get(id(t))

    n = len(run.user_tensors)
    first_write: list[int | None] = [None] * n
    last_use: list[int | None] = [None] * n
    for k, (func, tensors, writes) in enumerate(run.swaps.wrapper_ops):
        moves_data = torch.Tag.inplace_view not in getattr(func, "tags", ())
        for w in writes if moves_data else ():
            if (x := input_of(w)) is not None and first_write[x] is None:
                first_write[x] = k
        if is_view_op(func) or func is torch.ops.aten.detach.default:
            continue
        for t in tensors:
            if (x := input_of(t)) is not None:
                last_use[x] = k
    dense_written = tuple(
        any(storage_key(x) in run.swaps.dense_writes for j in leaves for x in (run.dense[j], run.originals[j]))
        for leaves in layout.leaves_of_input
    )
    taken = frozenset(x for saves in run.swaps.function_saves for t in saves if (x := input_of(t)) is not None)
    return tuple(first_write), tuple(last_use), dense_written, taken


# (Outputs set_() under grad: the outputs part of Note [set_ Under Grad].)


def set_under_grad(path: str, value: torch.Tensor, run: FunctionalRun, outputs: Sequence[object]) -> bool:
    if value.requires_grad and viewed_after_grad_set(value, run):
        if _view_of_grad_set_intermediate(value, run, outputs):
            return True
        raise UnsupportedError(
            f"{path} is a view of a tensor the program set_() with grad enabled before taking the view, so eager "
            "gives it an autograd history through set_ (whose derivative is not implemented), which a compiled "
            "output cannot have where that tensor is an input, a view, or (a view of it) returned too, or a view "
            "in the chain was taken under no_grad (Note [set_ Under Grad]). Call set_() under "
            "torch.no_grad(), or return a clone"
        )
    wrapper_set = run.swaps.wrapper_sets.get(id(value))
    if not value.requires_grad or not (
        id(value) in run.swaps.grad_set_ids or (wrapper_set is not None and wrapper_set[1])
    ):
        return False
    if _nested(value):
        # Not checked: a nested subclass set_() loses its inner wrappers' shared storage even in inference
        raise UnsupportedError(
            f"{path}: the program set_() this tensor subclass, whose inner tensors are tensor subclasses too, with "
            "grad enabled; in training this is not supported. Call set_() under torch.no_grad(), or return a clone"
        )
    if run.swaps.grad_set_view_of(value, run.user_tensors):
        return False  # rebuilt from the input the epilogue set_() under grad (Note [set_ Under Grad])
    if run.swaps.is_view(value) and id(run.swaps.view_root(value, through_swaps=True)) in run.swaps.view_set_gained:
        raise UnsupportedError(
            f"{path}: the program set_() this view with grad enabled, of a tensor that did not require grad, to a "
            "tensor that does: eager's autograd rebases the view's base on the set_, and a compiled output that is "
            "a view of that base cannot have its `._base` (Note [set_ Under Grad]). set_() a "
            "tensor that is not a view, or run the set_() under torch.no_grad()"
        )
    if run.swaps.is_view(value) and not _grad_view_of_intermediate(value, run, outputs):
        raise UnsupportedError(
            f"{path}: the program set_() this tensor with grad enabled, so eager gives it an autograd history through "
            "set_ "
            "(whose derivative is not implemented), which a compiled output that is a view cannot have. Call "
            "set_() under torch.no_grad(), or return a clone"
        )
    return True


def grad_set_base(
    path: str, value: torch.Tensor, run: FunctionalRun, bases: dict[object, tuple[int, torch.Tensor]]
) -> GradSetBase | None:
    """Where eager's `._base` of `value`, an output set_() under grad, is (Note [set_ Under Grad]); None where eager's output is no view."""
    if not run.swaps.is_view(value):
        return None
    root = run.swaps.view_root(value, through_swaps=True)
    if grad_set_view_root(value, run.swaps, set()) is None:
        return GradSetBase(source=None, meta=leaf_meta(root))  # views taken after the root's set_()
    if is_traceable_subclass(root):
        replay = root_replay(root, bases, ())
        if replay is not None:
            return GradSetBase(source=replay, meta=None, same_object=True)
    elif (found := bases.get(storage_key(root))) is not None:
        replay = Replay(source=ReplaySource.BASE, index=found[0], steps=())
        return GradSetBase(source=replay, meta=leaf_meta(root), same_object=found[1] is root)
    raise UnsupportedError(
        f"{path} is a view of an intermediate that the program set_() with grad enabled, and that intermediate (the "
        "output's `._base` in eager) does not end on storage of its own the compiled graph can return (Note [set_ "
        "Under Grad]). Call set_() under torch.no_grad(), or return a clone"
    )


def check_input_view_rebuilt(value: object, info: OutputInfo, run: FunctionalRun) -> None:
    """A view of an input set_() under grad is supported where it is rebuilt from that input: replayed, or as_strided
    of it (Note [set_ Under Grad]); a view the graph would compute (its chain not replayable on
    the input as it ends) would not be a view of eager's `._base`."""
    if not isinstance(value, torch.Tensor) or not run.swaps.grad_set_view_of(value, run.user_tensors):
        return
    if info.replay is not None and info.replay.source is ReplaySource.INPUT:
        return
    if (
        info.tree is None
        and info.replay is None
        and all(leaf.source is LeafSource.INPUT_ALIAS and leaf.is_view for leaf in info.leaves)
    ):
        return
    raise UnsupportedError(
        f"{info.path}: the program set_() this tensor with grad enabled, so eager gives it an autograd history through "
        "set_ (whose derivative is not implemented), which a compiled output that is a view cannot have where its "
        "view chain cannot be replayed on the input it views (Note [set_ Under Grad]). Call set_() "
        "under torch.no_grad(), or return a clone"
    )


def _view_of_grad_set_intermediate(value: torch.Tensor, run: FunctionalRun, outputs: Sequence[object]) -> bool:
    """`value` is a chain of views (none of a multi-output op), all taken with grad on, of an intermediate `t` the
    program set_() with grad on before the first of them, where `t` is no view, no input, and no other output is `t` or
    a view of it: rebuilt as a view of a fresh tensor set_() under grad (Note [set_ Under Grad])."""
    chain = []
    t = value
    for record in run.swaps.chain(value):
        if not record.grad_enabled or id(t) in run.swaps.hidden or record.index is not None:
            return False  # (a view of a multi-output op: eager's refuses in-place writes, ours would not)
        chain.append(record.seq)
        t = record.source
    found = run.swaps.wrapper_sets.get(id(t)) or run.swaps.plain_sets.get(id(t))
    if found is None or not found[1] or not chain or found[0] >= chain[-1] or id(t) not in run.swaps.grad_set_ids:
        return False
    if not t.requires_grad or _nested(t) or any(t is u for u in run.user_tensors):
        return False
    return not any(
        o is not value and isinstance(o, torch.Tensor) and run.swaps.view_root(o, through_swaps=True) is t
        for o in outputs
    )


def _nested(t: torch.Tensor) -> bool:
    """A tensor subclass with a tensor subclass among its inner tensors."""
    if not is_traceable_subclass(t):
        return False
    attrs, _ = t.__tensor_flatten__()
    return any(is_traceable_subclass(getattr(t, a)) for a in attrs)


def _grad_view_of_intermediate(value: torch.Tensor, run: FunctionalRun, outputs: Sequence[object]) -> bool:
    """`value` is a chain of views, all taken with grad on, of a tensor the program computed and does not return
    (rebuilt otherwise, its `._base` would not be eager's): eager's set_() of it rebases only that intermediate
    (Note [set_ Under Grad])."""
    t = value
    for record in run.swaps.chain(value):
        if not record.grad_enabled or id(t) in run.swaps.hidden:
            return False
        t = record.source
    return t is not value and t.requires_grad and all(t is not u for u in (*run.user_tensors, *outputs))


def check_history_over_alias(
    path: str,
    value: torch.Tensor,
    leaves: Sequence[OutputLeaf],
    run: FunctionalRun,
    bases: dict[object, tuple[int, torch.Tensor]],
    named: tuple[dict[int, InputIndex], dict[int, int]],
) -> None:
    """Note [Outputs Over Another Storage]. `named`: the input index of each input's id(), the first output index
    of each output's id() (to find the output's view chain)."""
    if all(leaf.source is LeafSource.GRAPH for leaf in leaves) or not value.requires_grad:
        return
    if not _has_history(value):
        _check_no_grad_view_over_set(path, value, leaves, run)
        return
    base = bases.get(storage_key(value))
    # (an intermediate subclass so assigned: Note [Wrapper Storage], data_assignment.py)
    if (
        base is not None
        and id(base[1]) in run.swaps.swapped_by_data
        and base[1].requires_grad
        and _viewed_before_resize(value, base[1], run)
    ):
        # the backward would raise "invalid gradient" (the base's history has its old size)
        raise UnsupportedError(
            f"{path} is a view of an intermediate that requires grad, taken before the program assigned its `.data` "
            "a tensor of another size (of a plain one: or strides): eager's view keeps the history of the old "
            "layout, and one regenerated from the intermediate as it ends cannot (Note [Outputs Over Another "
            "Storage]). Return a clone made before the assignment"
        )
    wrapper_set = run.swaps.wrapper_sets.get(id(value))
    no_grad_set = (id(value) in run.swaps.swapped_ids and id(value) not in run.swaps.grad_set_ids) or (
        wrapper_set is not None and not wrapper_set[1]
    )
    if no_grad_set and id(value) not in run.swaps.swapped_by_data and not run.swaps.is_view(value):
        raise UnsupportedError(
            f"{path}: the program set_() this tensor under no_grad after computing it with grad: eager returns it "
            "with its own autograd history over the storage it was set_() to, which a compiled output that shares "
            "that storage cannot have (Note [Outputs Over Another Storage]). Return a clone, or call set_() "
            "with grad enabled"
        )
    if (set_view := no_grad_set_in_view_chain(value, run)) is not None and not (
        set_view is value and _then_set_from_base(value, leaves, run, bases, named)
    ):
        what = (
            "a view the program took with grad and then set_() under no_grad"
            if set_view is value
            else "a view of a tensor the program computed with grad and set_() under no_grad before taking the view"
        )
        raise UnsupportedError(
            f"{path} is {what}: eager returns it with an autograd history of views over that tensor's own history "
            "(whose backward may raise on the changed size), on the storage it was set_() to, which a compiled "
            "output that shares that storage cannot have (Note [Outputs Over Another Storage]). Return a clone"
        )
    plain_owner = not is_traceable_subclass(value) and not run.swaps.is_view(value)
    if plain_owner and base is not None and base[1] is not value and id(value) not in run.swaps.swapped_ids:
        # `t0.set_(t1); return t1, t0.view(-1)`: the outputs' base is t0, which the views name; t1, computed by the
        # program, would come back as a plain alias of t0's storage without its history
        raise UnsupportedError(
            f"{path} has an autograd history of its own, and the program set_() another tensor onto its storage "
            "whose views it also returns: rebuilt as an alias of that storage, it would have no history (Note "
            "[Outputs Over Another Storage]). Return a clone"
        )
    over = any(leaf.source is LeafSource.INTERMEDIATE_ALIAS for leaf in leaves)
    detached = detach_in_chain(value, run) if over else None
    if detached is not None and detached.is_leaf and detached.requires_grad:  # (`nn.Parameter(t)`, requires_grad_())
        raise UnsupportedError(
            f"{path} is a view of a detach() of an intermediate that the program made a new autograd leaf requiring "
            "grad (nn.Parameter(t), t.detach().requires_grad_()): eager's view has an autograd history of its own "
            "that ends in that leaf's gradient, over the intermediate's storage; the compiled call can return the "
            "leaf itself, but rebuilds a view of it from the intermediate's storage, without that history (Note "
            "[Outputs Over Another Storage]). Return the leaf and take the view outside, or return a view of a clone"
        )
    if detached is not None:
        raise UnsupportedError(
            f"{path} is a detach() of an intermediate (or a view of one) that the program then wrote with a value "
            "that requires grad: eager gives it an autograd history of its own over the intermediate's storage, "
            "which a compiled output cannot have (Note [Outputs Over Another Storage]). Return a clone, or "
            "write into a clone"
        )


def _check_no_grad_view_over_set(
    path: str, value: torch.Tensor, leaves: Sequence[OutputLeaf], run: FunctionalRun
) -> None:
    """Note [Outputs Over Another Storage]: `value`, without history, requires grad only through its base (a view
    taken under no_grad, `requires_grad_through_base`), and that base is a tensor the program computed with grad and
    then set_() under no_grad onto an input's storage: eager's `value._base` is that tensor, with its own history
    over the input's storage, which a compiled output cannot have; rebuilt as a view of the input, `value` would not
    require grad. (Set onto an intermediate's storage, the graph computes that base with its history: exact.)"""
    on_input = any(leaf.source is LeafSource.INPUT_ALIAS for leaf in leaves)
    if not on_input or no_grad_set_in_view_chain(value, run) is None:
        return
    raise UnsupportedError(
        f"{path} is a view taken under no_grad of a tensor the program computed with grad and set_() under no_grad "
        "onto an input's storage before taking the view: eager's view requires grad through its `._base`, that "
        "tensor, whose autograd history is its own over the input's storage, which a compiled output that shares "
        "that storage cannot have (Note [Outputs Over Another Storage]). Return a clone, or call set_() with grad enabled"
    )


def _then_set_from_base(
    value: torch.Tensor,
    leaves: Sequence[OutputLeaf],
    run: FunctionalRun,
    bases: dict[object, tuple[int, torch.Tensor]],
    named: tuple[dict[int, InputIndex], dict[int, int]],
) -> bool:
    """Note [Outputs Over Another Storage]: replayed from an intermediate (a base, or an earlier output),
    then set_() as in eager."""
    replay = replay_of(value, tuple(leaves), run, named[0], bases, named[1])
    return replay is not None and replay.then_set and replay.source in (ReplaySource.BASE, ReplaySource.OUTPUT)


# Note [Outputs Over Another Storage]
# Eager can return a tensor whose autograd history, or `._base`, is its own while its storage is another tensor's. An
# output that aliases an input, or an intermediate other outputs share, is regenerated from that storage with a history
# of views at most; one the graph computes has the history but a storage of its own. So each such case is built by the
# graph and then moved onto the storage, or refused where it aliases storage (alone on an intermediate's storage it is
# computed by the graph, which is exact):
# - Intermediates an input was set_() to (`t0 = x * 2; x.set_(t0); return t0`, or `x.data = t0`, or under no_grad): the
#   graph computes t0 as a fresh output with the Function's history; after the epilogue gave x its new storage, t0 is
#   set_() under no_grad onto it with its own size, stride and offset, keeping its version counter. Only for a plain t0
#   that is no view, no input, not itself moved, within x's final elements (a resize_ or as_strided_ of t0 after the
#   set_() may give it a layout of its own there; the epilogue writes only x's elements), and no other output that is
#   a view of it or a subclass on that storage (t0 returned again is no other: that output is the same object,
#   OutputKind.SAME_AS; `return t0, t0` rebuilt from x would lose t0's history). A t0 without grad assigned to an x
#   with grad is built the same way, and so is a t0 computed with grad then set_() onto x under no_grad. Refused: a
#   view of t0 with history (`t1 = t0[:2]; t1.add_(y)`), and a tensor subclass with history over such a storage, where
#   x has none: both would be rebuilt from x.
# - Detached outputs written with grad (`t = x.detach(); t.add_(x); return t`): eager's t is no view, shares x's storage
#   and has its own history (AddBackward0). The graph computes it (the joint differentiates the same write), and once
#   the epilogue wrote x, each dense leaf is set_() under no_grad onto x's storage with eager's metadata. Only for the
#   detach() itself, on the storage its input keeps, of an input that requires grad and whose layout the program keeps,
#   with no `.data =` or set_() since and no other output a view of it. Eager's t shares x's version counter; ours, set_()
#   there, keeps its own (torch cannot share another's). So where eager's backward unpacks a tensor saved over that
#   counter (x saved by a Function that marks t dirty), the saved-tensor check of x is made on t too, and that of t on
#   x: the backward raises eager's error where either was written after the call (autograd_function's
#   `_sharing_counter`). x's `._version` after a write of t still differs from eager's, a count only
#   versions="exact" compares.
# - Views set under no_grad with history (`t0 = x * 2; t1 = t0.unsqueeze(-1); with no_grad(): t1.set_(x)`): t1 lives on
#   x's storage with history over t0's. The graph returns t0 as an intermediate base (`no_grad_set_view_root`); the
#   output replays its chain from it with grad, then is set_() under no_grad onto its dense leaf (Replay.then_set). Only
#   for a plain t0 with history of its own storage, not itself set_(), and a chain the replay reproduces exactly.
# - Views set onto another storage without history: a view keeps its `._base` when set_() moves it, or its base, to
#   another storage (`t1 = t0.diagonal(); t1.set_(x)`: t1 on x's storage, `t1._base` t0). Such a root is found at
#   analysis (`foreign_root`: an input, or an intermediate the graph returns as a base; an input that is a view stands
#   for its own `._base`, `input_root`), and the output is rebuilt as an empty view of it, then set_() onto eager's
#   storage and metadata (`view_onto`), putting back the shared version counter. Only for outputs that do not require
#   grad, unless the program's own set_() with grad moved it there (then the set_ runs with grad: Note [set_ Under
#   Grad]). A view set_() back onto its root's storage keeps that root as `._base` (`t1 = t0.select(2, 0); t2 =
#   t1[:, 1:1]; t2.set_(t1)`: `t2._base` is t0): the intermediate base of that storage is the root of the chain through
#   the set_(), not the view the chain stops at (`intermediate_bases`).
# Refused otherwise: tensors computed with grad then set_() under no_grad onto aliased storage, detach()es written
# with a value requiring grad, views with grad taken of an intermediate before a `.data =` relaid it, and views taken
# after a no_grad set_() of a tensor with history (ViewBackward0 over MulBackward0, which raises where the size changed),
# or under no_grad (no history, but they require grad through that tensor, their `._base`: `requires_grad_through_base`).


def outputs_set_onto_inputs(
    outputs: Sequence[object],
    run: FunctionalRun,
    storages: tuple[dict[object, DenseIndex], dict[object, DenseIndex]],
    mutations: Sequence[LeafMutation],
    names: tuple[Sequence[str], Sequence[tuple[str, torch.Tensor]]],
) -> dict[int, DenseIndex]:
    """Note [Outputs Over Another Storage]: id() of each such output -> the input's dense leaf (`storages`: the dense
    leaf each storage is, at the end and at the start; `names`: the output paths, per output leaf, and per dense leaf
    its path and the user tensor it belongs to)."""
    current, original = storages
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    path_of = {id(o): p for o, p in zip(outputs, names[0], strict=True)}
    no_grad_views = any(
        not r.grad_enabled and r.source.requires_grad and r.func not in (_aten.detach.default, _aten.alias.default)
        for r in run.swaps.views.values()  # (`.data` aliases: detach, alias)
    )
    if not torch.is_grad_enabled():
        return {}
    found: dict[int, DenseIndex] = {}
    for value in tensors:
        key = storage_key(value)
        j = current.get(key)
        if is_traceable_subclass(value) and value.requires_grad:
            _check_wrapper_history_kept(value, (current, mutations), (path_of[id(value)], names[1]))
        if j is None or is_traceable_subclass(value) or _viewed_by_others(value, tensors, run):
            continue
        if _set_onto_input_under_no_grad(value, run, j):
            if not no_grad_views:
                found[id(value)] = j
            continue
        if key in original:
            continue
        if not value.requires_grad and not run.finals[j].requires_grad:
            continue  # rebuilt from the input: it has no history to lose
        m = mutations[j]
        _check_view_history_kept(value, m, (path_of[id(value)], *names[1][j]))
        moved = id(value) in run.swaps.swapped_ids or id(value) in run.swaps.hidden or run.swaps.is_view(value)
        if not m.storage_changed or m.set_source is not None or moved or value._is_view():
            continue
        if any(value is u for u in run.user_tensors) or not _within_input(value, run.finals[j]):
            continue
        try:
            if value.requires_grad and value.grad_fn is None:
                continue
        except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
            continue
        if no_grad_views:
            # (a no_grad view of a tensor that requires grad: the trace's output has no grad, and the output rebuilt
            # from the input would have none either)
            raise UnsupportedError(
                "an output with autograd history shares the storage the program gave an input by set_() or `.data =`, "
                "in a program that also takes a view under no_grad of a tensor that requires grad: the compiled "
                "call can give the output neither that storage and its history (Note [Outputs Over Another "
                "Storage]). Return a clone, or take that view with grad enabled"
            )
        found[id(value)] = j
    return found


def _check_view_history_kept(value: torch.Tensor, m: LeafMutation, names: tuple[str, str, torch.Tensor]) -> None:
    """Note [Outputs Over Another Storage]: a view with autograd history of the intermediate an input (`m`) was
    set_() to (`x.set_(t0); t1 = t0[:2]; t1.add_(y); return t1`) would be rebuilt as a view of the input, which has
    none; `names`: the output's path, the input's, and the input itself."""
    if not m.storage_changed or m.set_source is not None or names[2].requires_grad:
        return
    if not value.requires_grad or not value._is_view():
        return
    raise UnsupportedError(
        f"{names[0]} is a view, with autograd history, of the tensor that {names[1]} was set_() (or `.data =`-"
        "assigned) to: it shares the input's new storage, and the compiled call can rebuild it only as a view of the "
        "input, which has no history (Note [Outputs Over Another Storage]). Return a clone of the view, or the tensor "
        "the input was set_() to itself"
    )


def _check_wrapper_history_kept(
    value: torch.Tensor,
    facts: tuple[dict[object, DenseIndex], Sequence[LeafMutation]],
    names: tuple[str, Sequence[tuple[str, torch.Tensor]]],
) -> None:
    """Note [Outputs Over Another Storage]: a tensor subclass with autograd history over the storage an input that
    does not require grad was set_() to (`x.set_(t0); t0.add_(y); return t0`) would be rebuilt from the input's dense
    leaves, without history (`facts`: the dense leaf each storage ends on, and what happened to each; `names`: the
    output's path, and per dense leaf its path and the user tensor it belongs to)."""
    current, mutations = facts
    for leaf in dense_leaves_of(value, "out")[1]:
        j = current.get(storage_key(leaf))
        if j is None or not mutations[j].storage_changed or mutations[j].set_source is not None:
            continue
        path, owner = names[1][j]
        if not owner.requires_grad:
            raise UnsupportedError(
                f"{names[0]} is a tensor subclass with autograd history whose inner tensors share the storage that "
                f"{path} was set_() (or `.data =`-assigned) to; the compiled call can rebuild it only from that "
                "input, which has no history (Note [Outputs Over Another Storage]). Return a clone"
            )


def _within_input(value: torch.Tensor, final: torch.Tensor) -> bool:
    """Does `value` (on the storage input leaf `final` ends on) reach only elements of that input? The epilogue gives
    the input a fresh storage and writes only its own elements; `value` is set_() there with its own layout (a resize_
    or in-place view of the set_() source after the set_())."""
    if leaf_meta(final) == leaf_meta(value):
        return True
    have = elements_of(list(final.shape), list(final.stride()), final.storage_offset())
    want = elements_of(list(value.shape), list(value.stride()), value.storage_offset())
    return have is not None and want is not None and have.covers(want)


def _set_onto_input_under_no_grad(value: torch.Tensor, run: FunctionalRun, j: DenseIndex) -> bool:
    """`t0 = x0 + x1; with no_grad(): t0.set_(x1); return t0` (Note [Outputs Over Another Storage]): t0 has a
    history of its own, and the size that history expects, on the storage, size, stride and offset of input leaf
    `j` as it ends."""
    swaps = run.swaps
    if id(value) not in swaps.swapped_ids or id(value) in swaps.grad_set_ids or id(value) in swaps.swapped_by_data:
        return False
    if id(value) in swaps.hidden or swaps.is_view(value) or value._is_view() or not value.requires_grad:
        return False
    if any(value is u for u in run.user_tensors) or leaf_meta(run.finals[j]) != leaf_meta(value):
        return False
    size = recorded_size(value)  # None also where reading its grad_fn raises
    return size is not None and len(size) == value.dim() and all(a == b for a, b in zip(size, value.shape, strict=True))


def _viewed_by_others(value: torch.Tensor, outputs: Sequence[torch.Tensor], run: FunctionalRun) -> bool:
    """Another output is a view of `value` (its `_base` in eager), or a subclass over its storage. `value` itself
    returned again is no other: that output is the very object this one is rebuilt as (OutputKind.SAME_AS)."""
    for o in outputs:
        if o is value:
            continue
        if is_traceable_subclass(o):
            if any(storage_key(d) == storage_key(value) for d in dense_leaves_of(o, "out")[1]):
                return True
        elif storage_key(o) == storage_key(value) and run.swaps.view_root(o, through_swaps=True) is value:
            return True
    return False


def check_wrapper_grad_gains(
    flat: FlatInputs,
    layout: DenseLayout,
    run: FunctionalRun,
    mutations: Sequence[LeafMutation],
    user_fakes: Sequence[torch.Tensor],
) -> None:
    """Note [Inputs Written In Training]."""
    position = {id(u): i for i, u in enumerate(run.user_tensors)}

    def grad_root_of(t: torch.Tensor) -> torch.Tensor | None:
        """run.swaps.view_root(t, through_swaps=True) where every view of the chain was taken with grad on; else None."""
        for record in run.swaps.chain(t):
            if not record.grad_enabled:
                return None
            t = record.source
        return t

    for i, (u, fake) in enumerate(zip(run.user_tensors, user_fakes, strict=True)):
        if layout.trees[i] is None or fake.requires_grad or not u.requires_grad or id(u) not in run.swaps.grad_set_ids:
            continue
        recorded = run.swaps.wrapper_grad_sets.get(id(u))
        source = None if recorded is None else recorded[0]
        root = None if source is None else grad_root_of(source)
        taken = mutations[layout.leaves_of_input[i][0]].set_source
        owner = next((k for k, leaves in enumerate(layout.leaves_of_input) if taken in leaves), None)
        later = () if recorded is None else run.swaps.wrapper_ops[recorded[1] + 1 :]
        written_after = any(run.swaps.view_root(w, through_swaps=True) is u for _, _, writes in later for w in writes)
        set_seq = run.swaps.wrapper_sets[id(u)][0] if id(u) in run.swaps.wrapper_sets else None
        assigned_after = any(set_seq is None or a.seq > set_seq for a in run.swaps.wrapper_data.get(id(u), []))
        exact = root is not None and owner is not None and position.get(id(root)) == owner
        if not exact or written_after or assigned_after or _nested(u):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} does not require grad and the program set_()s it with "
                "grad enabled to a tensor that requires grad and is not an input or a view of one taken with grad "
                "enabled, or changes it after, or is a nested tensor subclass (Note [Inputs Written In "
                "Training]): autograd's history of it would not be eager's. set_() it to a clone made outside the "
                "function, or under torch.no_grad()"
            )


def check_overlapping_clones(
    flat: FlatInputs,
    layout: DenseLayout,
    run: FunctionalRun,
    mutations: Sequence[LeafMutation],
    user_fakes: Sequence[torch.Tensor],
    cloned: frozenset[int],
    outputs: Sequence[OutputInfo],
    replays: Sequence[tuple[ViewStep, ...]],
) -> None:
    """A subclass input that requires grad runs as a clone, made contiguous where its elements overlap (expand()):
    a view the program took of it may be one eager's strides forbid (reshape() copies in eager), so returning a
    view of it is refused (replaying the view on the input itself may raise), except a chain of views that takes
    the same elements on the input's own strides, as the epilogue
    left them: after its in-place view ops (`replays`) where the view is replayed after the epilogue."""
    for i in cloned:
        t = user_fakes[i]
        if not any(st == 0 and sz != 1 for sz, st in zip(t.shape, t.stride(), strict=True)):
            continue
        leaves = set(layout.leaves_of_input[i])
        path = flat.leaves[flat.tensor_indices[i]].path
        aliased = any(
            (info.kind is OutputKind.IS_INPUT and info.input_index == flat.tensor_indices[i])
            or any(leaf.source is LeafSource.INPUT_ALIAS and leaf.index in leaves for leaf in info.leaves)
            for info in outputs
        )
        clone = run.user_tensors[i]
        if any(run.swaps.view_root(c) is clone for c in run.swaps.contiguous_self) and (
            aliased or any(mutations[j].any for j in leaves)
        ):
            raise UnsupportedError(
                f"{path}: the program calls contiguous() on a view of this tensor subclass input, which requires "
                "grad and whose elements overlap (expand()), and returns or writes the input: eager's may be a copy, "
                "the traced one a view of the input's contiguous clone (Note [In-Place Ops As "
                "Eager Runs Them]). Call .clone() instead"
            )
        grouped = any(j in g.members for g in layout.groups for j in leaves)
        for info in outputs:
            source, steps, early = _chain_from_input(info, outputs)
            if source == flat.tensor_indices[i]:
                changed = run.initial_metas[i] != leaf_meta(clone)
                exact = _same_views_on(t, () if early or not changed else replays[i] or None, steps)
            else:  # regenerated without a view chain (an alias of a group member may name another member's leaf)
                exact = (
                    grouped
                    or info.replay is not None
                    or not any(leaf.source is LeafSource.INPUT_ALIAS and leaf.index in leaves for leaf in info.leaves)
                )
            if not exact:
                raise UnsupportedError(
                    f"{info.path} is traced as a view of {path}, a tensor subclass "
                    "input that requires grad and whose elements overlap (expand()); in training it is traced "
                    "as a contiguous clone, whose views may differ from eager's. Pass it .contiguous(), or "
                    "return a clone"
                )


# View ops that take the same elements of their source whatever its strides, so that on an input whose elements
# overlap they give what the program's view of its contiguous clone gave; `view` too, where it succeeds on the
# input's own strides (there reshape() is a view in eager as well). Not as_strided, nor in-place view ops (t_ on a
# view of a subclass input that requires grad replays with other gradients than eager's).
_aten = torch.ops.aten
_STRIDE_AGNOSTIC = frozenset(
    {
        *(_aten.alias.default, _aten.diagonal.default, _aten.expand.default, _aten.narrow.default),
        *(_aten.permute.default, _aten.select.int, _aten.slice.Tensor, _aten.split.Tensor, _aten.unbind.int),
        *(_aten.split_with_sizes.default, _aten.squeeze.default, _aten.squeeze.dim, _aten.squeeze.dims),
        *(_aten.t.default, _aten.transpose.int, _aten.unfold.default, _aten.unsqueeze.default, _aten.view.default),
        _aten.reshape.default,  # (of a layout it views: ViewRecord.reshape)
    }
)


def _chain_from_input(info: OutputInfo, outputs: Sequence[OutputInfo]) -> tuple[int | None, tuple[ViewStep, ...], bool]:
    """The input an output is replayed from (through earlier outputs), the whole view chain from it, and whether
    the chain starts before the epilogue (from the input as the program got it)."""
    steps: tuple[ViewStep, ...] = ()
    replay = info.replay
    while replay is not None and replay.source is ReplaySource.OUTPUT:
        if replay.source_meta is not None:  # from an intermediate (Note [Output Regeneration])
            return None, (), False
        steps = replay.steps + steps
        earlier = outputs[replay.index]
        if earlier.kind is OutputKind.IS_INPUT:
            return earlier.input_index, steps, False
        replay = earlier.replay
    if replay is None or replay.source is not ReplaySource.INPUT:
        return None, (), False
    return replay.index, replay.steps + steps, replay.before_epilogue


# In-place view ops the epilogue replays on an input (`inplace_replay`) that, like _STRIDE_AGNOSTIC, take the same
# elements whatever the input's strides.
_INPLACE_STRIDE_AGNOSTIC = frozenset(
    {
        *(_aten.t_.default, _aten.transpose_.default, _aten.squeeze_.default, _aten.squeeze_.dim),
        *(_aten.squeeze_.dims, _aten.unsqueeze_.default),
    }
)


def _same_views_on(t: torch.Tensor, prefix: Sequence[ViewStep] | None, steps: Sequence[ViewStep]) -> bool:
    """Replaying `steps` on `t`'s own (static) strides, after the epilogue's in-place view ops `prefix` (None: the
    epilogue changes `t`'s layout otherwise), is exact: each op is stride-agnostic and succeeds there
    (`check_overlapping_clones`: select(0, -4) after t_() must be checked on the layout after it)."""
    dims = [*t.shape, *t.stride()]
    if prefix is None or not all(isinstance(d, int) for d in dims):
        return False
    if not all(s.op in _INPLACE_STRIDE_AGNOSTIC for s in prefix) or not all(s.op in _STRIDE_AGNOSTIC for s in steps):
        return False
    src = torch.empty_strided(tuple(t.shape), tuple(t.stride()), device="meta")
    for step in (*prefix, *steps):
        args = pytree.tree_leaves((step.args, step.kwargs))
        if not all(isinstance(a, int | bool | str | None) for a in args):
            return False  # a symbolic size or an input argument: not checked here
        try:
            out = step.op(src, *step.args, **dict(step.kwargs))
        except (RuntimeError, ValueError, IndexError):  # ValueError, IndexError: the meta kernel's own messages
            return False  # eager's reshape() copies here
        src = out[step.index] if step.index is not None else out
    return True


def multi_output_view_input_reads(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """The tensor positions of the subclass inputs requiring grad whose creation meta `check_multi_output_view_inputs`
    decides on: used with grad, their base written through another input, not through themselves (Note [What The
    Guards Compare])."""
    if not analysis.wrapper_last_use:
        return ()
    reals = [flat.values[i] for i in flat.tensor_indices]
    roots = [input_root(r) if isinstance(r, torch.Tensor) else None for r in reals]
    found: list[int] = []
    for t, tree in enumerate(layout.trees):
        real = reals[t]
        if tree is None or not isinstance(real, torch.Tensor) or not real.requires_grad:
            continue
        writers = [
            u
            for u, root in enumerate(roots)
            if u != t and root is roots[t] and reals[u] is not real and analysis.wrapper_first_write[u] is not None
        ]
        written_through_others = bool(writers) and analysis.wrapper_first_write[t] is None
        if written_through_others and analysis.wrapper_last_use[t] is not None:
            found.append(t)
    return tuple(found)


def check_multi_output_view_inputs(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> None:
    """See Note [Views That Raise After A Bump]."""
    for t in multi_output_view_input_reads(flat, layout, analysis):
        real = flat.values[flat.tensor_indices[t]]
        if isinstance(real, torch.Tensor) and is_multi_output_view(real):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[t]].path} is a view made by an op that returns several views "
                "(unbind, split, chunk), the program writes its base through another input and uses it with grad "
                "enabled: eager raises when autograd reads it (Note [Views That Raise After A Bump]), which the "
                "compiled program does not reproduce. Pass the base tensor and take the views inside the function"
            )


def check_multi_output_view_outputs(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> None:
    """See Note [Views That Raise After A Bump]."""
    position = {index: t for t, index in enumerate(flat.tensor_indices)}
    for k, info in enumerate(analysis.outputs):
        replay = info.replay
        if replay is None or replay.source is not ReplaySource.INPUT or replay.before_epilogue:
            continue
        if not any(step.index is not None and step.grad_enabled for step in replay.steps):
            continue
        source = position.get(InputIndex(replay.index))
        real = flat.values[replay.index]
        if source is None or not isinstance(real, torch.Tensor) or not real.requires_grad:
            continue
        root = input_root(real)
        for t, other in enumerate(flat.values[i] for i in flat.tensor_indices):
            if t == source or not isinstance(other, torch.Tensor) or other is real:
                continue
            if input_root(other) is not root:
                continue
            muts = [analysis.mutations[j] for j in layout.leaves_of_input[t]]
            if any(m.any or m.version_bumped for m in muts) and not _split_after_writes(replay, source, t, analysis):
                raise UnsupportedError(
                    f"out[{k}] is a view made by an op that returns several views (unbind, split, chunk) of "
                    f"{flat.leaves[replay.index].path}, whose base the program advances through "
                    f"{flat.leaves[flat.tensor_indices[t]].path}: eager's may raise when autograd reads its grad_fn "
                    "(Note [Views That Raise After A Bump]), which the rebuilt output does not reproduce. Return "
                    "a clone"
                )


def _split_after_writes(replay: Replay, source: int, other: int, analysis: Analysis) -> bool:
    """The program took the output's multi-output view after its last write through `source` or `other` (tensor
    input positions): eager's view was made after its base's counter advanced, as the one rebuilt after the epilogue
    is."""
    bumps = analysis.last_bumps
    return bool(bumps) and replay.split_made > max(bumps[source], bumps[other])


def no_grad_set_in_view_chain(value: torch.Tensor, run: FunctionalRun) -> torch.Tensor | None:
    """`value` if it is a view that the program set_() under no_grad after computing it with grad, or the tensor
    with grad history that it is a chain of views of, taken after the program set_() that one under no_grad
    (Note [Outputs Over Another Storage]); else None. A `value` that is no view is the rule before this one;
    inputs, and views of them, are rebuilt by the epilogue with their own history (Note [Output Regeneration])."""
    t, taken = value, None
    while True:
        record = run.swaps.plain_sets.get(id(t))
        wrapper = run.swaps.wrapper_sets.get(id(t))
        last = record if wrapper is None or (record is not None and record[0] > wrapper[0]) else wrapper
        if (
            last is not None
            and not last[1]
            and (taken is None or last[0] < taken)
            and id(t) not in run.swaps.swapped_by_data
            and (t is not value or run.swaps.is_view(t))
            and t.requires_grad
            and not _on_input_chain(t, run)
            and _has_history(t)
        ):
            return t
        view = run.swaps.views.get(id(t))
        if view is None or view.func is torch.ops.aten.detach.default:
            return None
        t, taken = view.source, view.seq


def _on_input_chain(t: torch.Tensor, run: FunctionalRun) -> bool:
    """`t` is an input or a chain of views of one."""
    root = run.swaps.view_root(t, through_swaps=True)
    return any(root is u for u in run.user_tensors)


def _viewed_before_resize(value: torch.Tensor, base: torch.Tensor, run: FunctionalRun) -> bool:
    """`value`'s view chain takes a view of `base` while it had another size or strides than it ends with (a
    `.data =` of another layout came after)."""
    t = value
    while (record := run.swaps.views.get(id(t))) is not None:
        if record.source is base:
            then = tuple(tuple(symint_expr(s) for s in part) for part in record.source_meta[:2])
            return then != leaf_meta(base)[:2]
        t = record.source
    return False


def _overlapping_view(t: object) -> bool:
    """A view whose elements may share memory locations (torch's check answers "yes" or "too hard to tell")."""
    return isinstance(t, torch.Tensor) and t._is_view() and torch._debug_has_internal_overlap(t) != 0


def _has_history(t: torch.Tensor) -> bool:
    try:
        return t.grad_fn is not None
    except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
        return False


def _written_with_grad_after(swaps: SwapRecord, t: torch.Tensor, seq: int) -> bool:
    """Was `t` written (or changed by an in-place view op) where autograd records it after `seq`, or its data written
    so through a view of it (taken before or after `seq`)? Eager records a write through a view on the view's base,
    `t`, whatever storage `t` has by then (CopySlices)."""
    if swaps.visible_seq.get(id(t), -1) > seq:
        return True
    for key, at in swaps.visible_data_seq.items():
        written = swaps.pinned.get(key)
        if at > seq and isinstance(written, torch.Tensor) and swaps.view_root(written, through_swaps=True) is t:
            return True
    return False


def check_written_overlapping_views(flat: FlatInputs, layout: DenseLayout, run: FunctionalRun) -> None:
    """A plain input that is a view requiring grad, whose elements overlap (a zero stride: expand()), written through
    itself (or a view of it) whose elements do not overlap, where autograd records it: the compiled backward scatters the gradient of its update
    into its base's through its own overlapping layout (as_strided_scatter), which raises where eager's backward does
    not. A write through another input over its storage passes."""
    for i, t in enumerate(run.user_tensors):
        real = flat.values[flat.tensor_indices[i]]
        if layout.trees[i] is not None or not isinstance(real, torch.Tensor) or not real.requires_grad:
            continue
        own = set(layout.leaves_of_input[i])
        if any(g.whole_storage and own & set(g.members) for g in layout.groups):
            continue  # traced over its whole storage: `check_overlapping_plain_groups`
        if real._is_view() and torch._debug_has_internal_overlap(real) == 1 and _written_through(run.swaps, t):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: a view that requires grad whose elements overlap (a zero "
                "stride, as from expand()), written by the program through itself or a view of it with grad enabled: "
                "the compiled backward writes the gradient of its update into its base's through that overlapping "
                "layout and raises, where eager's does not; not supported in training. Pass it .contiguous() (or "
                ".clone()), or write a clone inside the program"
            )


def _written_through(swaps: SwapRecord, t: torch.Tensor) -> bool:
    """Did the program write `t`'s data, where autograd records it, through `t` itself or a view taken of it whose
    elements do not overlap?"""
    for key in swaps.visible_data_seq:
        w = written = swaps.pinned.get(key)
        if not isinstance(written, torch.Tensor) or torch._debug_has_internal_overlap(written) == 1:
            continue  # (a write through repeated elements is traced over the whole storage)
        while isinstance(w, torch.Tensor) and w is not t and (record := swaps.views.get(id(w))) is not None:
            w = record.source
        if w is t:
            return True
    return False


def check_writes_after_hidden_set(
    flat: FlatInputs,
    layout: DenseLayout,
    run: FunctionalRun,
    mutations: Sequence[LeafMutation],
    user_fakes: Sequence[torch.Tensor],
) -> None:
    """Note [History Kept Through .data =]."""
    for i, t in enumerate(run.user_tensors):
        # a tensor subclass input: its wrapper's set_()
        sets = run.swaps.plain_sets if layout.trees[i] is None else run.swaps.wrapper_sets
        record = sets.get(id(t))
        if not user_fakes[i].requires_grad or record is None or record[1]:
            continue
        onto_input = any(mutations[j].set_source is not None for j in layout.leaves_of_input[i])
        # (or onto a storage the program computed: the write reads only that tensor's value too; for an input that is
        # a view, eager records the write on its base through the view's new layout, and the input's history after the
        # call is regenerated from that base, which the compiled program does not reproduce either)
        real = flat.values[flat.tensor_indices[i]]
        moved = any(mutations[j].storage_changed for j in layout.leaves_of_input[i])
        written_after = _written_with_grad_after(run.swaps, t, record[0])
        relaid = any(mutations[j].final_meta != leaf_meta(user_fakes[i]) for j in layout.leaves_of_input[i])
        if written_after and relaid and layout.trees[i] is None and _overlapping_view(real):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} is a view that requires grad whose elements overlap "
                "(a zero stride), and the program set_() it under no_grad to a tensor of another layout and then wrote "
                "it with grad enabled: eager records that write on its base through the view's new layout, where the "
                "compiled backward writes the base's gradient through the overlapping one it came with and raises "
                "(Note [History Kept Through .data =]). Call set_() with grad enabled, or write into a clone"
            )
        # (onto another input's storage, its last swap: the writes take the `.data =` path, LeafMutation.assigned_write)
        taken = onto_input and all(mutations[j].assigned_write is not None for j in layout.leaves_of_input[i])
        if (onto_input or moved) and written_after and not taken:
            onto = "another input's storage" if onto_input else "a tensor the program computed"
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} requires grad, and the program set_() it under no_grad "
                f"to {onto} and then wrote it with grad enabled (itself or through a view of it): eager records that "
                "write on the history it had before the set_() (an input that is a view: on its base, through its new "
                "layout), which the compiled graph, where the write reads only the tensor it was set_() to, cannot "
                "reproduce (Note [History Kept Through .data =]). Call set_() with grad enabled, or write into a clone"
            )
