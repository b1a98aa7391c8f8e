"""Stage `analyze`, checks run while the program runs: views whose history autograd regenerates from a layout that
an in-place view op changed, which the traced backward does not repeat as eager does.

Two cases, one cause (autograd's view replay under functionalization does not see in-place view ops):
- Note [Stale View Functions]: `check_stale_views` refuses a view used with grad
  after an in-place view op on a tensor of its view chain.
- Note [Stale View Functions]: for views of a synthetic base changed by an in-place view op themselves,
  storage_swaps.py calls `note_before` and `note_reads` before recording an op and `note_layout` after; the result
  is `SwapRecord.stale_reads`, which training_rules reads.
Input: the `SwapRecord` of the functional run so far and the arguments of one torch call of the program.
Output: UnsupportedError naming the rule, or entries of the record. Invariants: never changes a tensor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import SubclassAOTError, UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.rules.autograd_state import base_rebuild, history_set_at, is_autograd_read
from subclassaot.pipeline.rules.swap_record import SwapRecord, ViewRecord
from subclassaot.schemas import FlatInputs
from subclassaot.torch_internals import (
    DataDependentError,
    is_view_op,
    no_dispatch,
    storage_key,
    symint_expr,
)


def check_stale_views(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note [Stale View Functions]."""
    if not torch.is_grad_enabled():
        return
    for t in pytree.tree_leaves((args, kwargs)):
        if not isinstance(t, torch.Tensor) or not t.requires_grad or (changed := _changed_base(record, t)) is None:
            continue
        op, fails, grad = changed
        if fails:
            raise UnsupportedError(
                f"{input_named(record, t)}a view taken with grad enabled is used with grad after the program changed "
                f"the layout of the tensor it is a view of by {op}() (with grad enabled or not), and the view op "
                "does not apply to that tensor's new layout: autograd rebuilds the view's history by replaying the "
                "view op on it, which fails under functionalization where eager's as_strided() does not (Note [Stale "
                f"View Functions]). Take the view again after {op}(), or use a clone"
            )
        raise UnsupportedError(
            f"{input_named(record, t)}a view taken with grad enabled is used with grad after the program changed the "
            f"layout of the tensor it is a view of by {op}() {grad}: autograd regenerates the view's "
            "history from that tensor's new layout, which the traced backward cannot repeat as eager does (Note "
            "[Stale View Functions]). Take the view again after the in-place view op, or use a clone"
        )


def input_named(record: SwapRecord, t: torch.Tensor) -> str:
    """`"args[0]: "`, naming the inputs whose storage `t` is over, or "" where it is over none."""
    for leaf in flatten_subclass(t, "t")[1] if is_traceable_subclass(t) else [t]:
        # (a storage resize_() grew is still the input's: Note [Storage Swaps By Rebinding])
        paths = record.input_paths.get(record.grown_root(storage_key(leaf)))
        if paths:
            return f"{' and '.join(paths)}: "
    return ""


def _changed_base(record: SwapRecord, t: torch.Tensor) -> tuple[str, bool, str] | None:
    """The name of an in-place view op run on a tensor of `t`'s view chain after the view of it was taken, where
    replaying the view on that tensor's layout now gives another layout than eager's view has, and whether the
    replay fails, and the grad mode of the op in words; else None. An op under no_grad counts only where the replay
    fails or makes the view's shape over other elements (its version bump makes autograd replay the view all the same:
    the replay raises where eager's as_strided() does not, or sends gradients to the wrong elements)."""
    return next((changed for view in record.chain(t) if (changed := _change_of(record, view)) is not None), None)


def _change_of(record: SwapRecord, view: ViewRecord) -> tuple[str, bool, str] | None:
    """One step of `_changed_base`: the in-place view op (or set_) on `view`'s source after it, and whether the
    view's replay fails."""
    source = view.source
    # (a source that stopped requiring grad since, by `.requires_grad = False` or detach_(), leaves the view's history
    # in place: autograd rebuilds it all the same; one that started since, by requires_grad_(), gives the view a
    # history at its first rebuild all the same)
    requires_grad = view.source_requires_grad or source.requires_grad
    if not view.grad_enabled or not requires_grad or _replays_the_same(view, source):
        return None
    fails = _replay_fails(view, source)
    for op in record.inplace_views.get(id(source), []):
        name = str(getattr(op.func, "__name__", op.func)).split(".")[0]
        # (a subclass view has no as_strided(): eager replays its view function too)
        reorders = name != "set_" and not is_traceable_subclass(source) and _replay_reorders(view, source)
        counts = op.grad_enabled or fails or reorders
        if counts and op.seq > view.seq:
            return name, fails, "with grad enabled" if op.grad_enabled else "under no_grad"
    # (a resize_() that grows the storage rebinds the tensor, below the record of in-place view ops: it counts where
    # the replay fails; one that reorders is left to the rules of growths inside inference_mode, Note [Storage Swaps By
    # Rebinding])
    grown = record.self_grown_ids.get(id(source))
    if fails and grown is not None and grown > view.seq:
        return "resize_", fails, ""
    plain_set = record.plain_sets.get(id(source))  # a plain tensor's set_() is not among its in-place views
    if fails and plain_set is not None and plain_set[0] > view.seq:
        return "set_", fails, ""
    return None


def _replay_reorders(view: ViewRecord, source: torch.Tensor) -> bool:
    """Does the view op, replayed on `source` as it is now, make a view of the shape it made then over other elements
    (`x.view(2, 2)` after `x.t_()`)? Autograd's history rebuilt so passes gradients to the wrong elements, with no
    shape error to show it. False where that is not decidable here."""
    replayed = _replayed(view, source)
    if not isinstance(replayed, tuple):
        return False
    then, again = replayed
    if then[0] != again[0] or 0 in then[0]:
        return False
    kept = [i for i, n in enumerate(then[0]) if n != 1]
    return [then[1][i] for i in kept] != [again[1][i] for i in kept] or then[2] != again[2]


def check_failing_replay(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note [Stale View Functions]: a view op about to run on a tensor whose layout
    the program changed after it took that same view of it with grad, where the view op does not apply to the new
    layout. Autograd replays the view so where the program writes or set_()s the view (`t0 = x0.t(); x0.set_(y);
    t0.set_(t0)`, y 3-d), below the ops the program calls, where no check of the torch-function
    mode runs; eager's as_strided() does not fail. (A call of the program's own of the same op fails in eager too.)"""
    if not is_view_op(func) or torch.Tag.inplace_view in func.tags or not args:
        return
    rest = (tuple(args[1:]), kwargs)
    for view in list(record.views.values()):
        if view.source is not args[0] or view.func is not func or not _same_args((view.args, view.kwargs), rest):
            continue
        changed = _change_of(record, view)
        if changed is not None and changed[1]:
            raise UnsupportedError(
                f"{input_named(record, args[0])}a view taken with grad enabled is written or set_() after the "
                f"program changed the layout of the tensor it is a view of by {changed[0]}(), and the view op does "
                "not apply to that tensor's new layout: autograd rebuilds the view's history by replaying the view "
                "op on it, which fails under functionalization where eager's as_strided() does not (Note [Stale View "
                f"Functions]). Take the view again after {changed[0]}(), or use a clone"
            )


def _same_args(a: object, b: object) -> bool:
    """Are two view ops' non-tensor arguments equal (False where either holds a tensor or a symbol)?"""
    leaves = pytree.tree_leaves((a, b))
    if any(isinstance(v, torch.Tensor | torch.SymInt | torch.SymFloat | torch.SymBool) for v in leaves):
        return False
    return pytree.tree_flatten(a)[1] == pytree.tree_flatten(b)[1] and bool(a == b)


Meta = tuple[tuple[Any, ...], tuple[Any, ...], Any]


def _replays_the_same(view: ViewRecord, source: torch.Tensor) -> bool:
    """Does the view op, replayed on `source` as it is now, make the layout it made from `source` as it was? False
    where that is not decidable here (symbolic sizes)."""
    size, stride, offset = view.source_meta
    then = (tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset))
    if leaf_meta(source) == then:  # (as expressions: comparing SymInts would add guards)
        return True
    replayed = _replayed(view, source)
    return isinstance(replayed, tuple) and replayed[0] == replayed[1]


def _replay_fails(view: ViewRecord, source: torch.Tensor) -> bool:
    """Does the view op raise, replayed on `source` as it is now (t() of a tensor set_() to 3-d)? False where that is
    not decidable here."""
    return _replayed(view, source) == "fails"


def _replayed(view: ViewRecord, source: torch.Tensor) -> tuple[Meta, Meta] | Literal["fails"] | None:
    """The geometry the view op made from `source` as it was and makes from it as it is now; "fails" where it does
    not apply to the new layout; None where that is not decidable here (symbolic sizes)."""
    now = _concrete_layout(view, source)
    if now is None:
        return None
    with no_dispatch():
        try:
            again = _geometry(view, now)
        except (RuntimeError, IndexError):
            return "fails"
        try:
            return _geometry(view, view.source_meta), again
        except (RuntimeError, IndexError):
            return None


def _concrete_layout(view: ViewRecord, source: torch.Tensor) -> Meta | None:
    """`source`'s layout now, where it, the layout the view was taken from and the view op's arguments are all
    concrete; else None."""
    now: Meta = (tuple(source.shape), tuple(source.stride()), source.storage_offset())
    values = pytree.tree_leaves((now, view.source_meta, view.args, view.kwargs))
    if any(isinstance(v, torch.SymInt | torch.SymFloat | torch.Tensor) for v in values):
        return None
    return now


def _geometry(view: ViewRecord, meta: Meta) -> Meta:
    size, stride, offset = meta
    extent = offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if s > 0)
    base = torch.empty((max(extent, 1),), device="meta").as_strided(size, stride, offset)
    out = view.func(base, *view.args, **view.kwargs)
    made = out[view.index] if view.index is not None else out
    return (tuple(made.shape), tuple(made.stride()), made.storage_offset())


# Note [Stale View Functions]
# Eager: once the version counter a view shares with its base moves past the version its history was set at (a write
# through any alias, an in-place view op, set_(), also under no_grad), autograd rebuilds the view's grad_fn from its
# base at its next use with grad: a plain view by as_strided() of the base with the layout the view has *then*, a tensor
# subclass view (no as_strided) by the view functions it was made by, which know nothing of in-place view ops since. In
# the trace every view is rebuilt by its view functions, as a subclass view is in eager. Where a view's layout changed
# without its view function (an in-place view op on it or on a tensor its chain passes through, set_(), `.data =`, a
# resize_() that grows the storage), a history rebuilt after that reads gradients in the old layout: wrong values, a
# shape error, or a replay that raises. A view whose history is never rebuilt after such a change is exact (a
# grad-enabled in-place view op records its own node on top). So the mode tracks, per view whose function is stale,
# the sequence number its history was last set at, and:
# - Refuses a view taken with grad of a tensor that required grad then (it may stop since: the view keeps its history)
#   or since (requires_grad_(): the view gets a history at its rebuild) and used with grad after an in-place view op on
#   that tensor or one its chain passes through (a no_grad one counts where the view op no longer applies, or, for a
#   plain view, where it makes the view's shape over other elements: `x.view(2, 2)` after `x.t_()`). `x.data = v` bumps no version: a view of x is replayed on v's layout only
#   after a later write. Alias-group members read with a stale history are refused by training_rules; a rebuild that
#   raises while the program runs is refused at the op that read the view (`stale_history_failures_refused`). A subclass
#   view whose replay on its base's `.data =` layout does not apply is refused there too where the replay runs (eager's
#   then fails in the rebuilt node's backward, select_backward's IndexError, fake tensors' otherwise); where that base
#   is a view input, eager replays on the input's own base (no failure) and the trace on the input: refused as well.
# - Views set_() under no_grad read with grad: eager's rebuilt history is the base's as_strided() with the view's new
#   layout, so each torch call that reads or writes such a view with grad reads a stand-in (`_EagerHistory`: the base's
#   as_strided() at the view's layout now, with the view's own values). Not for the view an in-place view op changes,
#   out= arguments, subclass views, nor a contiguous() that returns the view itself (no op runs, no history is read:
#   eager's view made under no_grad would raise at that read); refused where the base's storage cannot hold the layout and a gradient reaches it.
#   A later write with grad rebases the old base by as_strided with the new layout, which the trace's replay of the old
#   view ops does not cover: refused where gradient flows into the write.
# - Subclass views drop a grad-enabled t_() they recorded once another view's in-place view op bumps the shared counter;
#   the replayed output keeps the t_()'s node: refused in training where such an op of an unreturned view came after.
# - View inputs laid out anew under no_grad and read with grad are refused where eager's rebuilt history (plain:
#   as_strided at its layout now; subclass: its view function) and the joint's clone history expect different layouts.
#   Except plain ones relaid only by ops that lay out the same elements anew (t_, transpose_, swapdims_, squeeze_,
#   unsqueeze_; no set_(), no layout where elements share a memory location): eager's as_strided() sends the gradient
#   to the same elements of the base that the input's own history reaches, so each read with grad reads the run's
#   clone through `_Relaid` (relaid_views.py), which takes the gradient back to the layout that history expects.
#   The same for plain ones set_() under no_grad (the first set_() after such ops alone; no in-place view op after)
#   to positions of the storage they came with that their own layout holds: eager's as_strided() sends the gradient
#   to those positions of the base, which the input's own history reaches through the elements at them; `_Relaid`
#   sums the gradients of one position and shares them over the elements the old layout has there. Where the set_()
#   went to another storage (eager takes its offsets there as the base's, which the run's input need not keep) or to
#   other positions, the read goes through a stand-in whose backward refuses the program: a read nothing
#   differentiates compiles. A view of it taken with grad after by a view op (or of such a view) holds the input's
#   traced history: it gets a hook that refuses the program where a gradient reaches it in the joint's backward (a
#   returned one is replayed on the real input after the epilogue, as eager's is made), and a read with grad of it
#   after its version moved, a write into it, or a view of it by another call is refused
#   (`note_relaid_view_results`). A write into the input, or an autograd read of it after the change stay refused. Reads of attributes other than `.grad_fn` (and torch's own setter calls in set_()), and the
#   swap mode's reads inside a set_(), read no history.
# - A custom Function's apply with grad is the read with grad of its arguments (its ops run with grad off inside) and
#   no torch call the mode sees, so no stand-in takes their place there: a read the rules above give one is refused
#   instead (`check_relaid_view_applies`), and the stale views it reads are judged as an op's are (`note_reads`).
# - Written subclass view inputs changed in place (Note [Inputs Written In Training]): the epilogue's wrapper
#   copy_ makes autograd rebuild the view's grad_fn from its view function, at the layout the view came with, while eager
#   leaves that rebuilt grad_fn as of the program's last bump, with the nodes of later grad-enabled in-place view ops on
#   top. So the epilogue copies the new value in first, taken back to the original layout through the out-of-place
#   inverses of the ops (t, transpose, squeeze), then replays the ops before the last write under no_grad and the rest
#   under the grad mode each had (`Analysis.write_steps`). Exact only where eager's rebuilt histories are not read: once
#   an op changed the layout (anything but a t_() of a 0-d or 1-d view or a transpose_() of a dim with itself), refused
#   are a read with grad of the view or a view of it after the next bump, a write after the change that reads a tensor of
#   more than one element or multiplies by one that requires grad, a layout-changing op under no_grad, a write through
#   another view after its first in-place view op, alias-group members, inputs whose `.data` is assigned, and ops with
#   no inverse here.
# - Plain view inputs whose version the program moves: the compiled Function's edge is the history the input came
#   with, eager's reads after the bump use the rebuilt one (the base's as_strided() at the view's layout); they differ
#   for an as_strided() taken of another view whose elements it leaves (refused by backward_errors.py, Note
#   [as_strided On Inputs]).
# - Plain view inputs whose base, another input, the program set_() to another storage or layout (under no_grad: with
#   grad, set_ on a leaf raises): the shared counter moved, so eager's read of the view with grad rebuilds its history
#   as an as_strided() of the base in its new geometry, where the Function keeps the old one (a gradient of the base's
#   new size in eager, of its old one compiled). `refuse_views_read_after_base_set` refuses a view input read with
#   grad after the program set_() its base so (also a read whose result reaches no output: the run does not follow it).
# - Plain view inputs assigned `.data =` a tensor of another layout: the assignment bumps no version, but once the
#   counter they share with their base moves (a write to any tensor on it, under no_grad too; before the assignment
#   too, where no read with grad rebuilt their history in between), eager's next read with grad rebuilds their history
#   as an as_strided() of the base at the assigned layout, where the compiled Function keeps the history they came
#   with. `check_assigned_view_inputs` refuses such a read before the call, where the layout differs from the one
#   before the first assignment (`SwapRecord.assigned_view_inputs`); a subclass view input is rebuilt by its view
#   function in eager as in the trace. A read with grad (or of its grad_fn) after the counter's last move and before
#   the first assignment (or after it, at that layout) rebuilds the history eager's input keeps through the `.data =`
#   and returns with: an as_strided() of its base at the layout it came with, at the counter's final count. The
#   compiled call's input comes back with the history it came with, stale, which the first read after the call
#   rebuilds at the assigned layout. So where the input's layout before the first assignment is the one it came with
#   (no in-place view op, no set_() on it), `rebuilt_at_entry_layout` marks it (LeafMutation.rebuilt_at_entry_layout)
#   and the runtime, once the counter has its final count, gives the input that layout for a moment and reads its
#   grad_fn, then gives it back the assigned one (runtime/steps.py `settle_early_counters`).
# - Plain views (inputs, or views the program took of inputs) whose `._base`, another input, the program assigned
#   `.data =` a tensor of another layout: the base keeps its counter and accumulator, so a rebuild of the view's history
#   is an as_strided() of the base in its new geometry, whose gradient reaches the base (its accumulator, or its history
#   as it came) for other elements or in another shape. `check_views_of_assigned_bases` refuses a read with grad that
#   rebuilds so; `refuse_views_of_assigned_bases_kept` a view input whose history a read rebuilt after the counter's
#   last move (eager's keeps it; the compiled call's, written by the epilogue, is rebuilt at the base's new geometry).
# - Inside inference_mode: a custom Function applied there with grad on records a node (its apply reads grad mode,
#   not the dispatch keys inference mode excludes), and its edge to a stale view comes from the rebuild; eager's plain
#   view gets its as_strided() node whatever the mode, but a replay of view functions records nothing inside inference
#   mode (autograd then fails an internal assert, "new_fn"). The run's stand-in for an input may be such a view where
#   eager's is none (a member of a synthetic base), so before such an apply the run rebuilds each tensor argument's
#   history with inference mode off (`rebuild_view_history_outside_inference_mode`): the node eager's stands for.


def note_assigned(record: SwapRecord, t: torch.Tensor, key: object, before: tuple[object, ...]) -> None:
    """After `t.data = ...`, t a view of a synthetic base (over storage `key`, in layout `before`, until then): the
    assignment changes t's layout but not its view function, as an in-place view op under no_grad does; it records
    nothing and bumps no version (an expand() of it set_() with grad then replays the view on the assigned layout).
    A plain view the program took counts wherever it is, with the history autograd last set on it, which a write
    may have made stale already (Note [History Kept Through .data =]: eager rebuilds it in the assigned
    layout, ours by the view function)."""
    taken = _taken_plain_view(record, t)
    if (key not in record.alias_bases and not taken) or any(t is b for b in record.alias_bases.values()):
        return
    if id(t) not in record.stale_views:
        record.function_layouts[id(t)] = before
    set_at = min(record.seq, history_set_at(record, t)) if taken else record.seq
    record.stale_views[id(t)] = min(set_at, record.stale_views.get(id(t), set_at))


def note_assigned_view_input(record: SwapRecord, t: torch.Tensor, before: tuple[object, ...]) -> None:
    """Before `t.data = ...`, t a plain input that is a view (`before`: its layout until then): note the layout
    autograd rebuilds its history at before the first assignment (Note [Stale View Functions])."""
    if record.is_view_input(t) and not is_traceable_subclass(t) and id(t) not in record.assigned_view_inputs:
        # (a read with grad, or of its grad_fn, before the assignment rebuilt its history then, if at all)
        set_at = record.grad_fn_reads.get(id(t), -1)
        record.assigned_view_inputs[id(t)] = (before, set_at, input_named(record, t))


def rebuilt_at_entry_layout(record: SwapRecord, t: torch.Tensor) -> bool:
    """Note [Stale View Functions]: does eager's `t`, a plain view input assigned `.data =` with no in-place view op
    or set_() on it, end with the history autograd rebuilt at the layout it came with: set (by a read with grad, or
    of its grad_fn) after its version counter last moved in the program?"""
    found = record.assigned_view_inputs.get(id(t))
    if found is None or record.inplace_views.get(id(t)) or id(t) in record.plain_sets:
        return False
    bump = record.family_last_bump.get(record.family_of(t), -1)
    return 0 <= bump <= found[1]


def check_assigned_view_inputs(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note [Stale View Functions]: before a torch call with grad, refuse a read of a plain view input assigned
    `.data =` whose version counter moved since autograd last set its history, where the layout it has now is
    another than the one its history was made at: eager rebuilds the history at that read by as_strided() of its base
    with the assigned layout, while the compiled Function's edge is the history the input came with."""
    if not torch.is_grad_enabled() or not record.assigned_view_inputs:
        return
    for t in pytree.tree_leaves((args, kwargs)):
        if not isinstance(t, torch.Tensor) or not t.requires_grad or id(t) not in record.assigned_view_inputs:
            continue
        layout, set_at, named = record.assigned_view_inputs[id(t)]
        if record.family_last_bump.get(record.family_of(t), -1) <= set_at:
            continue  # (no rebuild at this read: the history it has is the one it came with)
        if layout_of(t) != layout:
            raise UnsupportedError(
                f"{named}an input that is a view and requires grad is assigned `.data =` a tensor "
                "of another layout, and read with grad after a write (to it or any tensor sharing its version "
                "counter, also under no_grad) moved its version: eager rebuilds its history at that read by "
                "as_strided() of its base with the assigned layout, where the compiled Function keeps the history "
                "the input came with (gradients for other elements, or of another shape) (Note [Stale View "
                "Functions]); not supported in training. Assign `.data` of a clone of the input, or read the "
                "tensor assigned instead"
            )
        record.assigned_view_inputs[id(t)] = (layout, record.seq, named)  # (rebuilt here at the layout it came with)


def check_views_of_assigned_bases(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note [Stale View Functions]: before a torch call with grad, refuse a read of a plain view (an input, or one the
    program took of an input) whose `._base` is an input the program assigned `.data =` a tensor of another layout,
    where the view's version counter moved since autograd last set its history: eager rebuilds that history at the
    read as an as_strided() of the base in the base's new geometry (its gradient then reaches the base for other
    elements, or in another shape), where the compiled Function's edge is the history the view came with."""
    if not torch.is_grad_enabled() or not record.assigned_bases:
        return
    for t in pytree.tree_leaves((args, kwargs)):
        if not isinstance(t, torch.Tensor) or not t.requires_grad or is_traceable_subclass(t):
            continue
        found = _assigned_base_of(record, t)
        if found is None or layout_of(found[1]) == found[0] or not _rebuilt_at_read(record, t):
            continue
        raise UnsupportedError(
            f"{input_named(record, t)}a view that requires grad (an input, or one the program took of an input) is "
            "read with grad after a write (to it or any tensor sharing its version counter, also under no_grad) moved "
            "its version, and after the program assigned `.data =` of its base (another input) a tensor of another "
            "layout: eager rebuilds the view's history at that read by as_strided() of the base in its new geometry "
            "(its gradient then reaches the base for other elements), where the compiled Function keeps the history "
            "the view came with (Note [Stale View Functions]); not supported in training. Assign `.data` of a clone "
            "of the base, or read the view before the write"
        )


def refuse_views_of_assigned_bases_kept(record: SwapRecord, user_tensors: Sequence[torch.Tensor]) -> None:
    """Note [Stale View Functions]: refuse a plain view input whose `._base` is an input the program assigned `.data
    =` a tensor of another layout, where autograd last rebuilt the view's history in the program, after its version
    counter last moved: eager's keeps that history after the call, where the compiled call's real view, written by
    the epilogue, rebuilds it at its next read in the base's new geometry."""
    if not record.grad_at_start or not record.assigned_bases:
        return
    for t in user_tensors:
        found = _assigned_base_of(record, t) if not is_traceable_subclass(t) else None
        if found is None or layout_of(found[1]) == found[0] or not t.requires_grad:
            continue
        bump = record.family_last_bump.get(record.family_of(t), -1)
        if 0 <= bump <= record.grad_fn_reads.get(id(t), -1):
            raise UnsupportedError(
                f"{input_named(record, t)}an input that is a view and requires grad is read with grad after a write "
                "(to it or any tensor sharing its version counter, also under no_grad) moved its version, and the "
                "program assigns `.data =` of its base (another input) a tensor of another layout: eager's view keeps "
                "the history autograd rebuilt at that read, where the compiled call's, written again after the call, "
                "rebuilds it from the base in its new geometry (Note [Stale View Functions]); not supported in "
                "training. Assign `.data` of a clone of the base, or read the view before the write"
            )


def refuse_leaf_views_rebuilt_after_a_read(record: SwapRecord, user_tensors: Sequence[torch.Tensor]) -> None:
    """Note [Views That Raise After A Bump], view inputs rebuilt from their base: refuse a plain view input taken
    while its base required no grad (an autograd leaf: `b0.expand(...)` before `b0.requires_grad = True`) that the
    program makes require grad (requires_grad_(), `.requires_grad = True`; not moved by set_() or `.data =`) and reads
    with grad, whose version a write moves, where its base requires grad at the end: eager rebuilds the view's
    history from its base at its next read after the write, which the compiled call's stand-in, a leaf, does not
    follow. Where the base is no input, its flag is guarded."""
    if not record.grad_at_start:
        return
    for t in user_tensors:
        if id(t) not in record.input_positions or id(t) not in record.first_read_with_grad or is_traceable_subclass(t):
            continue
        if id(t) in record.swapped_ids or id(t) not in record.requires_grad_set:
            continue  # (moved by set_() or `.data =`: the storage swaps' rules; not flagged: the rules of gains)
        found = base_rebuild(record, t)
        if found is None or not found.leaf:
            continue
        if not found.base_input:
            record.base_flag_reads.append(found.position)
        if not found.rebuilds or not t.requires_grad:
            continue
        if found.read_before:
            how = (
                "a read before the write made a gradient accumulator for a tensor that is then no leaf (eager's "
                'backward raises "leaf variable has been moved into the graph interior")'
            )
        else:
            how = "its reads after the write send its gradient to the base"
        raise UnsupportedError(
            f"{input_named(record, t)}an input that is a view taken while its base required no grad (an autograd "
            "leaf) requires grad and is read with grad, and a write (to it or any tensor sharing its version "
            "counter, also under no_grad or inside inference_mode) moves its version while its base requires "
            f"grad: eager rebuilds its history from the base at its next read after the write, so {how}, where the "
            "compiled call's stays a leaf (Note [Views That Raise After A Bump], view inputs rebuilt from their "
            "base). Pass a clone of the view, or take it again after the write"
        )


def _assigned_base_of(record: SwapRecord, t: torch.Tensor) -> tuple[tuple[object, ...], torch.Tensor] | None:
    """The input `t`'s eager `._base` is, where the program assigned its `.data` (its layout before then, the input),
    `t` a view input or a view the program took of one, or of a base of view inputs; else None. (A view the program
    took of an input with no view input over it has the rules of views the program took.)"""
    root = t
    for view in record.chain(t):
        root = view.source
    position = record.input_positions.get(id(root))
    if position is None:
        return None
    real = position[1]
    if real._is_view():
        base = real._base
    elif root is not t and any(other._base is real for _, other in record.input_positions.values()):
        base = real  # (a view the program took of the base of view inputs: one alias group)
    else:
        return None
    for before, u in record.assigned_bases.values():
        if u is not t and record.input_positions[id(u)][1] is base:
            return before, u
    return None


def _rebuilt_at_read(record: SwapRecord, t: torch.Tensor) -> bool:
    """Has `t`'s version counter moved since autograd last set its history (made, read with grad, or its grad_fn
    read), so that a read with grad now rebuilds it?"""
    set_at = max(history_set_at(record, t), record.read_with_grad.get(id(t), -1))
    return record.family_last_bump.get(record.family_of(t), -1) > set_at


def _taken_plain_view(record: SwapRecord, t: torch.Tensor) -> bool:
    """A plain view made by a view op of the program (not an input, not a `.data` alias)."""
    found = record.views.get(id(t))
    return (
        found is not None
        and found.func is not torch.ops.aten.detach.default
        and t._is_view()
        and not is_traceable_subclass(t)
        and id(t) not in record.data_aliases
    )


def note_before(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before an op of the program runs: a view op's replay that fails (`check_failing_replay`); before an in-place
    view op: the layout a view of a synthetic base has while its view function is right."""
    check_failing_replay(record, func, args, kwargs)
    if torch.Tag.inplace_view in getattr(func, "tags", ()) and args and isinstance(args[0], torch.Tensor):
        if id(args[0]) not in record.stale_views and _has_view_function(record, args[0]):
            record.function_layouts[id(args[0])] = layout_of(args[0])


def _has_view_function(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is `t` a view whose history autograd rebuilds from a view function: a member of an alias group (not its
    synthetic base), or a plain view the program took (Note [Stale View Functions]). A subclass view is left out:
    eager's rebuilds its history from view functions too."""
    if storage_key(t) in record.alias_bases:
        return not any(t is b for b in record.alias_bases.values())
    return t._is_view() and not is_traceable_subclass(t)


def layout_of(t: torch.Tensor) -> tuple[object, ...]:
    """What autograd's history of a view reads: its sizes, and the strides of its dims of more than one element."""
    strides = tuple(st if sz != 1 else 0 for sz, st in zip(t.shape, t.stride(), strict=True))
    return (tuple(t.shape), strides, t.storage_offset() if t.numel() else 0)


def _stale(record: SwapRecord, t: torch.Tensor) -> bool:
    """The view function of `t` no longer makes its layout (one that got back its layout is right again)."""
    before = record.function_layouts.get(id(t))
    return id(t) in record.stale_views and (before is None or before != layout_of(t))


def note_reads(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before an op is recorded: note the storages of stale views it reads with a rebuilt history, or writes with
    grad enabled (autograd's CopySlices slices the base's gradient by the stale function)."""
    if not torch.is_grad_enabled() or not record.stale_views or is_view_op(func):
        return  # a view op's output inherits the history it read (note_layout)
    schema = getattr(func, "_schema", None)
    written = [] if schema is None else _written(schema, args, kwargs)
    data_write = torch.Tag.inplace_view not in getattr(func, "tags", ())
    for a in pytree.tree_leaves((args, kwargs)):
        if not isinstance(a, torch.Tensor) or not a.requires_grad or not _stale(record, a):
            continue
        key = storage_key(a)
        rebuilt = record.last_bump.get(key, -1) > record.stale_views[id(a)]
        write = data_write and any(a is w for w in written)
        # A member of an alias group is the training rules' to judge (Note [Aliased Inputs In Training]); a view the
        # program took of the group's synthetic base has its history rebuilt as any other view's.
        member = key in record.alias_bases and id(a) not in record.views
        if not member and (rebuilt or (write and not _uniform_write(record, a, func, args, kwargs))):
            raise _stale_refusal(record, a, "which sends the gradient to other elements")
        if rebuilt and id(a) in record.swapped_by_data and _taken_plain_view(record, a):
            # See Note [History Kept Through .data =]: in an alias group too (no member changed its layout)
            raise _stale_refusal(record, a, "which sends the gradient to other elements")
        if rebuilt or write:
            record.stale_reads.add(key)


def _uniform_write(
    record: SwapRecord, t: torch.Tensor, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """A write with scalar operands (the same gradient at every element; a copy_'s source only where it requires
    grad) to a plain view whose own in-place view ops left it over the elements its view function makes: autograd's
    CopySlices then slices the base's gradient by the stale function exactly as by the right one (`t0 =
    x.view(x.shape); t0.t_(); t0.add_(1)`: test_view_bases.py)."""
    before = record.function_layouts.get(id(t))
    copy = func is torch.ops.aten.copy_.default
    others = [
        a
        for a in pytree.tree_leaves((args, kwargs))
        if isinstance(a, torch.Tensor) and a is not t and (a.requires_grad or not copy)
    ]
    elements = None if before is None else _dims(before)
    return elements is not None and elements == _dims(layout_of(t)) and all(a.dim() == 0 for a in others)


def _dims(layout: tuple[object, ...]) -> tuple[object, ...] | None:
    """The elements a layout covers, as its (size, stride) pairs of dims of more than one element and its offset;
    None where symbolic."""
    size, stride, offset = layout
    assert isinstance(size, tuple) and isinstance(stride, tuple), "BUG: not a layout_of()"
    values = (*size, *stride, offset)
    if not all(isinstance(v, int) for v in values):
        return None
    return tuple(sorted((sz, st) for sz, st in zip(size, stride, strict=True) if sz != 1)), offset


@contextlib.contextmanager
def stale_history_failures_refused(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Iterator[None]:
    """Note [Stale View Functions]: an op of the program that fails where it reads, with grad, a view whose view
    function is stale: autograd rebuilt the view's history by that function, and the replay raised, where eager's
    as_strided() does not."""
    if torch.is_grad_enabled():
        _refuse_subclass_replay_after_assignment(record, func, args, kwargs)
    try:
        yield
    except (SubclassAOTError, DataDependentError):
        raise  # a refusal of the modes, or a read of a value: not a replay's failure
    except (RuntimeError, IndexError) as e:
        failure = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        for a in pytree.tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and (named := _set_after_view(record, a)) is not None:
                raise UnsupportedError(
                    f"{input_named(record, a)}a view is read after the program set_() the tensor it was taken of "
                    f"({named}) to a layout its view ops do not apply to: functionalization rebuilds the view by "
                    f"replaying them on that tensor, which fails ({failure}) where eager's view keeps its own layout "
                    "(Note [Stale View Functions]); not supported. Take the view of a clone, or set_() a clone"
                ) from e
        if not torch.is_grad_enabled():
            raise
        for a in pytree.tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and a.requires_grad and _stale(record, a):
                raise _stale_refusal(record, a, f"which fails here ({failure})") from e
            if isinstance(a, torch.Tensor) and a.requires_grad and _replay_fails_after_assignment(record, a):
                raise UnsupportedError(
                    f"{input_named(record, a)}a view taken with grad enabled is used with grad after the program "
                    "assigned `.data` of the tensor it is a view of (a layout the view op does not apply to) and a "
                    "write moved their version: autograd rebuilds the view's history by replaying the view op on "
                    f"that tensor, which fails under functionalization ({failure}) where eager's as_strided() does "
                    "not (Note [Stale View Functions]). Take the view again after the "
                    "`.data =` assignment, or assign `.data` of a clone"
                ) from e
        raise


def _refuse_subclass_replay_after_assignment(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Note [Stale View Functions]: an op about to read with grad a subclass view whose base's `.data` the program
    assigned, after the view was taken, a layout the view op does not apply to, and wrote since (a write by this op
    itself is another rule's: Note [Inputs Written In Training]). Eager's autograd rebuilds the
    view's history by replaying the view op on the wrapper as it is now, and eager's backward then fails in that
    node (select_backward at the new size: IndexError); fake tensors fail otherwise there (the engine's size check),
    so the compiled backward cannot raise eager's error. Where the assigned tensor is a view input, eager replays the
    view ops on the input's own base instead (the assignment left it as it was) and its backward runs, while the
    trace replays them on the input as assigned: refused wherever the replay makes another layout and a write since
    the view's history was last set rebuilds it at this read, by a call that makes a history over it (not an
    autograd read or requires_grad_(): the view's rebuilt node then passes no gradient)."""
    for a in pytree.tree_leaves((args, kwargs)):
        if not (isinstance(a, torch.Tensor) and is_traceable_subclass(a) and a.requires_grad):
            continue
        for view in record.chain(a):
            assigned = record.wrapper_data.get(id(view.source))
            last = assigned[-1] if assigned else None
            if last is None or not view.grad_enabled or last.seq <= view.seq:
                continue
            _refuse_rebuilt_over_view_input(record, func, a, view)
            if view.source._version == last.version:
                continue
            if _replay_fails(view, view.source):
                raise UnsupportedError(
                    f"{input_named(record, a)}a view of a {type(a).__name__} taken with grad enabled is used with grad "
                    "after the program assigned `.data` of the tensor it is a view of (a layout the view op does not "
                    "apply to) and a write moved their version: eager's autograd rebuilds the view's history by "
                    "replaying the view op on that tensor, and eager's backward then fails in the rebuilt node, with "
                    "an error the compiled backward cannot reproduce (Note [Stale View Functions]); not supported in "
                    "training. Take the view again after the `.data =` assignment, or assign `.data` of a clone"
                )


def _refuse_rebuilt_over_view_input(record: SwapRecord, func: Any, a: torch.Tensor, view: ViewRecord) -> None:
    """One step of `_refuse_subclass_replay_after_assignment`, where `view.source` is a view input assigned `.data`
    after `view` was taken: a read now after a write rebuilds `a`'s history in the trace on the input as assigned
    (noted: a read that makes no history, requires_grad_(), keeps that node all the same); refused at a call that
    makes a history over such a node."""
    if not record.is_view_input(view.source) or _replays_the_same(view, view.source):
        return
    if _rebuilt_here(record, a):
        record.rebuilt_over_assignment.add(id(a))
    if id(a) in record.rebuilt_over_assignment and _makes_history(func):
        raise UnsupportedError(
            f"{input_named(record, view.source)}a view of this {type(a).__name__} input, itself a view, taken "
            "with grad enabled, is used with grad after a write moved its version and the program assigned "
            "`.data` of the input since the view was taken (another layout): eager's autograd rebuilds the "
            "view's history by replaying its view ops on the input's own base, which the assignment left "
            "as it was, where the compiled trace replays them on the input as assigned (a gradient of "
            "another shape, or for other elements) (Note [Stale View Functions]); not supported in training. "
            "Take the view again after the `.data =` assignment, or assign `.data` of a clone"
        )


def _makes_history(func: Any) -> bool:
    """Does the torch function `func` make a result whose history goes through its arguments' (not an autograd read,
    a flag's setter or requires_grad_())?"""
    setter = getattr(func, "__name__", "") == "__set__"
    return not (setter or is_autograd_read(func) or func is torch.Tensor.requires_grad_)


def _rebuilt_here(record: SwapRecord, t: torch.Tensor) -> bool:
    """Has `t`'s version moved since autograd last set its history, so that a read with grad now rebuilds it?"""
    return record.last_bump.get(storage_key(t), -1) > history_set_at(record, t)


def _set_after_view(record: SwapRecord, t: torch.Tensor) -> str | None:
    """The tensor along `t`'s view chain that the program set_() after the view of it was taken (its input name, or
    "a tensor of the program"); else None."""
    for view in record.chain(t):
        found = record.plain_sets.get(id(view.source))
        # (set_() before the view was taken, of a tensor that is a view itself: the view inherits its stale chain)
        if found is not None and (found[0] > view.seq or view.source._is_view()):
            return input_named(record, view.source).rstrip(": ") or "a tensor of the program"
    return None


def _replay_fails_after_assignment(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is `t` a view, taken with grad, of a tensor (or through one, along its view chain) whose `.data` the program
    assigned after the view was taken, to a layout the view op does not apply to? The
    assignment bumps no version, so autograd replays the view only after a later write: this is asked only once an
    op that read `t` failed."""
    for view in record.chain(t):
        source = view.source
        assigned = record.data_sets.get(id(source))
        if view.grad_enabled and source.requires_grad and assigned is not None and assigned[0] > view.seq:
            if _replay_fails(view, source):
                return True
    return False


def check_stale_set(record: SwapRecord, target: torch.Tensor, source: object) -> None:
    """Note [Stale View Functions]: `target.set_(source)` with grad, where autograd records it (either requires
    grad), on a view whose view function is stale: autograd rebases the view's history by replaying that function
    once the set_ ran, below the ops the program calls (it may raise; where it does not, the history
    it makes is not eager's either)."""
    recorded = target.requires_grad or (isinstance(source, torch.Tensor) and source.requires_grad)
    if not (torch.is_grad_enabled() and recorded):
        return
    if (
        _stale(record, target)
        or _set_after_view(record, target) is not None
        or _replay_fails_after_assignment(record, target)  # (`.data =` of its base since)
    ):
        raise _stale_refusal(record, target, "for the set_(), which does not make eager's history")
    if _replay_fails_after_relayout(record, target):
        raise UnsupportedError(
            f"{input_named(record, target)}set_() with grad of a view taken with grad enabled, after the program "
            "changed the layout of the tensor it is a view of (resize_(), an in-place view op) to one the view op "
            "does not apply to: autograd rebases the view's history on the set_() by replaying the view op on that "
            "tensor, which fails under functionalization where eager's as_strided() does not (Note [Stale View "
            "Functions]); in training this is not supported. Take the view again after the layout change, or set_() "
            "a clone of it"
        )


def _replay_fails_after_relayout(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is `t` a view, taken with grad, of a tensor (or through one, along its view chain) whose layout the program
    changed after the view was taken (resize_() that grew its storage, t_(), ...), to one the view op does not apply
    to (it applied to the layout then)? A set_() of
    `t` that autograd records rebases its history whether or not that tensor requires grad, and the rebase replays the
    view op on it: under functionalization that raises, where eager's as_strided() does not."""
    return any(view.grad_enabled and _replay_fails(view, view.source) for view in record.chain(t))


def _stale_refusal(record: SwapRecord, t: torch.Tensor, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{input_named(record, t)}the program changes the layout (t_, unsqueeze_, set_(), `.data =`, ...) of a view (one it "
        "took, or an input that shares storage with another), then uses it, or a view of it taken after, with grad "
        "where autograd rebuilds its history (after a write to the storage, or a write or set_() of the view "
        f"itself): autograd replays the view without the layout change, {what}, where eager's does not (Note "
        "[Stale View Functions]); in training this is not supported. Take the view again after the layout change, "
        "or change the layout of a clone"
    )


def _written(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[object]:
    out = []
    for i, arg_schema in enumerate(schema.arguments):
        if arg_schema.is_write:
            out.append(args[i] if i < len(args) else kwargs.get(arg_schema.name))
    return out


def note_layout(record: SwapRecord, func: Any, args: tuple[Any, ...], out: Any, seq_before: int) -> None:
    """After an op ran: an in-place view op on a view of a synthetic base makes its view function stale; a view of
    a stale view is stale too, with the history it read (rebuilt wrong if the storage moved: stale from the start)."""
    if not args or not isinstance(args[0], torch.Tensor):
        return
    src = args[0]
    if torch.Tag.inplace_view in getattr(func, "tags", ()):
        if not _has_view_function(record, src):
            return
        # under no_grad the op records nothing: the history stays as set before it, and its own bump rebuilds it
        recorded = torch.is_grad_enabled() and src.requires_grad
        set_at = record.seq if recorded else min(seq_before, record.stale_views.get(id(src), seq_before))
        record.stale_views[id(src)] = set_at
    elif is_view_op(func) and _stale(record, src):
        rebuilt = record.last_bump.get(storage_key(src), -1) > record.stale_views[id(src)]
        for o in out if isinstance(out, list | tuple) else (out,):
            if isinstance(o, torch.Tensor):
                record.stale_views[id(o)] = -1 if rebuilt and torch.is_grad_enabled() else record.seq


def views_read_after_own_set(
    flat: FlatInputs, user_tensors: Sequence[torch.Tensor], record: SwapRecord
) -> tuple[str, ...]:
    """Note [Stale View Functions]: the paths of plain view inputs that require grad, read with grad by the program
    after it set_() them under no_grad to a tensor of another size, which they end with (the
    compiled backward would fail a shape check); refused after the training checks (by `refuse_stale_view_layouts`,
    whose own record misses this case), so their messages stand where they apply. (Another storage or layout of the same size is left to the other rules:
    a write with grad in between gives the view a history of the new layout.)"""
    paths = []
    for i, k in enumerate(flat.tensor_indices):
        real = flat.values[k]
        if not isinstance(real, torch.Tensor) or not real.requires_grad or is_traceable_subclass(real):
            continue
        if record.set_relaid_views.get(id(user_tensors[i])) is not None:
            continue  # (read through relaid_views.py's stand-ins, or refused by note_view_reads)
        read = record.read_with_grad.get(id(user_tensors[i]))
        relaid = record.relaid_by_set.get(id(user_tensors[i]))
        if real._base is None or read is None or relaid is None or read < relaid:
            continue
        # (asked only here: a size compared with a symbolic one would install a guard)
        if tuple(user_tensors[i].shape) != tuple(real.shape):
            paths.append(flat.leaves[k].path)
    return tuple(paths)


def refuse_views_read_after_base_set(
    flat: FlatInputs, user_tensors: Sequence[torch.Tensor], record: SwapRecord
) -> None:
    """Note [Stale View Functions]: refuse a plain view input that requires grad, read with grad by the program after
    its `._base`, another tensor input, was set_() under no_grad to another storage or layout."""
    reals = [flat.values[k] for k in flat.tensor_indices]
    for i, real in enumerate(reals):
        if not isinstance(real, torch.Tensor) or not real.requires_grad or is_traceable_subclass(real):
            continue
        base = real._base
        read = record.read_with_grad.get(id(user_tensors[i]))
        if base is None or read is None:
            continue
        for j, other in enumerate(reals):
            relaid = record.relaid_by_set.get(id(user_tensors[j]))  # a set_() under no_grad that relaid it
            if other is base and relaid is not None and read >= relaid:  # ... and a read after it
                raise UnsupportedError(
                    f"{flat.leaves[flat.tensor_indices[i]].path}: a view input that requires grad is read with grad after "
                    f"the program set_() its base {flat.leaves[flat.tensor_indices[j]].path} to another storage "
                    "or layout: eager rebuilds the view's history as an as_strided() of the base in its new geometry, "
                    "where the compiled one keeps the history the view came with (Note [Stale View Functions]); not "
                    "supported in training. set_() a clone of the base, or read the view before the set_()"
                )
