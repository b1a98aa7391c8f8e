"""In-place view ops under no_grad on inputs that require grad. Autograd leaves whose layout such an op changes before
any read with grad: the joint trace makes them leaves again after the op, and the runtime makes their gradient
accumulator at the size eager's has (Note [Leaves Laid Out Anew Under no_grad]). Inputs that are views: which reads
after such an op the compiled history cannot give eager's rebuilt grad_fn, refused (Note [Stale View Functions]).

Input: the `_DataMode` of storage_swaps.py calls `note_layout_op`/`note_view_layout_op` after each in-place view op of
the program and `note_first_read`/`note_view_reads` after each op; run_functional marks the tensors standing for such
inputs (`SwapRecord.releafable`, `note_view_inputs`). Output: `SwapRecord.releafed` (by id: the size at the first
read with grad after the op, None until then), read by analyze (`Analysis.releaf_sizes`) and by the joint trace (the
tensors gradients are taken with respect to); `SwapRecord.layout_kept` (read by analyze, with
backward_probe.eager_accumulator_sizes); `SwapRecord.stale_view_layouts`, refused by analyze. Invariants:
records only, except the joint trace's detach_()/requires_grad_() of its own clone.

Part: plain views set_() under no_grad and then used with grad, given the history eager's autograd gives them (Note
[Stale View Functions]). Input: the `SwapRecord` of the functional run so far, a set_() the storage-swap dispatch mode
ran, and the arguments of each torch call of the program (seen by the torch-function mode). Output: the record's
`nograd_set_layouts`; the arguments with each such view replaced by a stand-in with eager's history, and the
stand-in's result mapped back; or UnsupportedError naming the rule. Invariants: a stand-in reads exactly the view's
elements (same storage, size, stride and offset); the program's own tensors are never changed here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import sympy
import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.autograd_state import is_autograd_read, is_read_with_grad, reads_history
from subclassaot.pipeline.rules.relaid_views import (
    NO_STAND_INS,
    PERMUTING_OPS,
    Layout,
    RefusedHistory,
    keeps_first,
    non_overlapping,
    note_relaid_view_results,
    relaid_call,
    views_of,
    with_relaid_view_histories,
    writes_first,
)
from subclassaot.pipeline.rules.stale_views import input_named, layout_of
from subclassaot.pipeline.rules.swap_record import SwapRecord, tensor_meta
from subclassaot.torch_internals import (
    is_functional,
    no_torch_function,
    storage_key,
    symint_expr,
)

# Note [Leaves Laid Out Anew Under no_grad]
# Eager: an autograd leaf that requires grad has no grad_fn; its gradient accumulator is made at the first op with grad
# that reads it, expects the size the leaf has then, and lives while a node of a live result holds it. So `with
# torch.no_grad(): x.t_()` (or another in-place view op, or a set_() to another size) records nothing, and an op with
# grad that reads x after makes the accumulator at the new size: the gradient arrives in the new layout. Where an op
# with grad read x before the change and its result is still alive, that old accumulator is found again, and eager's
# backward fails its size check ("... returned an invalid gradient ... expected shape compatible with ..."), or sums a
# gradient that expands to it down to it. On a non-leaf, a no_grad in-place view op (or set_()) leaves its grad_fn
# expecting the old layout, so the epilogue replays such a change under no_grad too, even where other writes make the
# input's mutation autograd-visible (a backward through the new x then raises, as in eager; a view's history is rebuilt
# from its base at the next read, or raises there for an output of unbind(), as eager's does).
# The joint trace runs the leaf as a clone (Note [Training Through A Joint Graph]), whose CloneBackward0 recorded the
# old size, and the compiled Function's edge to the real leaf's accumulator is made before the epilogue replays the
# change. So:
# - where the program's first such op on a leaf runs under no_grad before any op with grad read it, the joint trace
#   makes the clone a leaf again right after the op (detach_(), then requires_grad_(), which records nothing, as in
#   eager) and takes the input's gradient with respect to that new leaf; the runtime makes the real leaf's accumulator
#   first, at the size of that first read, and holds it until the Function's edge does (`Analysis.releaf_sizes`). An
#   accumulator already alive (the caller holds a graph through the leaf) is the one eager's read finds too, and stays:
#   both backwards then fail its check. Not for leaves in an alias group or run as views.
# - accumulators kept through layout ops: where an op with grad read the leaf before the op, the functional run keeps
#   every result alive, so it only notes such a leaf (`layout_kept`); analyze runs the program eagerly on static fakes
#   (backward_probe.eager_accumulator_sizes), where results die as in eager, and where the accumulator the outputs'
#   graphs reach has the size the leaf came with, the runtime holds that accumulator until the outputs are built (as
#   Note [Gradient Accumulators Of Leaves] has it), so views it replays on the real leaf find it. Where they reach only
#   an accumulator made after the op (the earlier read's results all died) and an op with grad other than a view op
#   read the leaf after the op (`layout_read_after`: the compiled graph computes that result from the leaf in its old
#   layout; not a leaf an earlier op made a leaf again), the program is refused as below; returned views replayed on the real leaf make the new accumulator there.
# - refused, because the Function's edge expects the old size where eager's gradient arrives in the new one: plain
#   leaves set_() to another size under no_grad (or given one by `.data =` before any use with grad) and then read with
#   grad (a set_() back to the old size is none), and subclass leaves resized under no_grad that an op with grad read
#   before the change (the alias-group and set_() rules passed them).
# A torch.inference_mode() block is no_grad here, grad mode on or off inside it (eager's leaf records nothing there
# either: no op there is a read with grad, `note_grad_reads`; and a resize_() within
# its storage there, which eager lets a leaf that requires grad take, is such an op; on a view that requires
# grad the op bumps the counter as under no_grad, and the next read rebuilds the view's history from its base the
# same way, so the no_grad rules decide it), but inference mode skips autograd's kernels, detach_()'s among them,
# which alone drops the clone's grad_fn: the trace leaves inference mode for its detach_() (else the gradient is taken
# through the clone in the old size, against an accumulator made in the new one).
# - Inputs made to require grad: a leaf input (plain or subclass; a view of a base that requires none too, which eager's
#   requires_grad_() makes a leaf of its own, its views still taking their flag from that base) that does not
#   require grad, which the program makes
#   require grad (requires_grad_(), `.requires_grad = True`), is read without history before that call in eager and
#   with history after. The compile goes for training with the input requiring grad (the runtime sets the flag before the graph
#   runs, as the program's own call would); the run's stand-in for such an input, in no alias group, is a
#   leaf without grad from the start (in training its clone, detach_()ed: `SwapRecord.late_grad`), so the program's
#   call turns the flag on where eager's does, and the joint trace takes the input's gradient with respect to that
#   leaf. Writes hidden from autograd (`x.data.add_(1)`) give eager's input no history, so the new value the epilogue
#   writes below autograd gets no tangent and is not differentiated (backward_trace.joint_backward._hidden_gain_updates): the run's
#   ORIGINAL alias of the input, taken of the clone before its detach_(), keeps the clone's history through the graph
#   input where no write moved the counter (one that did rebuilds it from the leaf).
#   Where an in-place view op relaid it (a resize_() within its storage too), or a set_() or `.data =` that autograd
#   records no node of (before the flag, or under no_grad after; `relaid_late_grad`), eager's accumulator is made at
#   the first read with grad after the flag, in the layout the leaf has then: the runtime makes the real leaf's at
#   that size first, as for the leaves
#   above (`Analysis.releaf_sizes`), and the epilogue's set_() or `.data =` gives the leaf its storage and layout. A write before the call, with grad on, of a value that requires no grad (into the input or a view of it) is
#   one autograd does not record, in eager as here (`SwapRecord.unrecorded_before_grad`): the leaf holds the written
#   value, and the epilogue copies it in below autograd. A view of the input taken before the call and returned
#   (here, under no_grad, over storage shared with another input: `SwapRecord.views_before_grad`) has no history in
#   eager: it requires grad through its base, and rebuilds a history from it at a read where its counter moved since.
#   The runtime replays it on the input, which requires grad by then, each step taken before the flag under no_grad
#   (ViewStep.without_history; an in-place view op too: one with grad after the flag raises in eager), at the counter
#   eager's view was made at, so autograd answers as eager's does; a returned view the program made a new leaf before
#   the flag (`v = x[1:]; v.requires_grad_(); x.requires_grad_()`) is then given its own flag (OutputInfo.gains_grad).
#   Refused where the chain starts at a tensor the program made (built from the graph's output, given the flag after),
#   passes another view the program gave a flag of its own, or passes one set_() or `.data =` moved.


def check_view_taken_before_grad(
    path: str, value: torch.Tensor, swaps: SwapRecord, inputs: set[int], flag_given: bool
) -> None:
    """An output that is (a view of) a view taken before the program made its root require grad
    (`SwapRecord.views_before_grad`): the runtime replays it on the input that requires grad by then, each step taken
    before the flag under no_grad (ViewStep.without_history), and autograd answers as eager's view does (requires_grad
    through its base, no history unless its counter moved since: then one rebuilt from the input). Refused where the
    chain starts at a tensor the program made (no input to replay it on before the flag; the runtime gives it the flag
    once built, Note [Grad Mode And Autograd Reads]), passes a view the program gave a flag of its own (a leaf in eager,
    replayed here as a view under no_grad without one; not the output itself where the runtime gives it that flag once
    built, `flag_given`: OutputInfo.gains_grad) or a tensor set_() or `.data =` moved."""
    if not swaps.views_before_grad:
        return
    chain = [value]
    while (record := swaps.views.get(id(chain[-1]))) is not None:
        chain.append(record.source)  # (detach() included: eager's `._base` chain stops there, the flag's too)
    if not {id(t) for t in chain} & swaps.views_before_grad:
        return
    moved = swaps.moved()
    # a flag of its own: not its base's
    flagged = any(id(t) in swaps.requires_grad_set for t in chain[1 if flag_given else 0 : -1])
    if id(chain[-1]) not in inputs or flagged or any(id(t) in moved for t in chain):
        raise UnsupportedError(
            f"{path} is a view of a tensor taken before the program made that tensor require grad "
            "(requires_grad_(), `.requires_grad = True`), or a view of such a view, where that tensor is not an input "
            "(the program made it), the program gave one of the chain's views a flag of its own (requires_grad_() "
            "on it), or a set_() or `.data =` moved one of the chain's tensors: eager's view has no "
            "history (or one rebuilt from its base, if written since), which the compiled call, building it from "
            "what the graph returns once the flag is set, cannot repeat (Note [Leaves Laid Out Anew Under no_grad]). "
            "Return a clone, or view after the call"
        )


_LAYOUT_OPS = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "unsqueeze_", "squeeze_", "as_strided_"})


def is_layout_op(func: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """`func` is one of the in-place view ops of Note [Leaves Laid Out Anew Under no_grad], called on a tensor."""
    name = getattr(func, "__name__", "")
    return (
        name in _LAYOUT_OPS
        and getattr(torch.Tensor, name, None) is func
        and bool(args)
        and isinstance(args[0], torch.Tensor)
    )


def note_relaid_late_grad(record: SwapRecord, t: torch.Tensor) -> None:
    """After an in-place view op, set_() or `.data =` on `t`: where it stands for an input the program makes require
    grad later, its accumulator is eager's at the first read with grad after the flag (Note [Leaves Laid Out Anew
    Under no_grad])."""
    if id(t) in record.late_grad:
        record.relaid_late_grad.add(id(t))


def note_layout_op(record: SwapRecord, t: torch.Tensor) -> None:
    """After an in-place view op on `t`: under no_grad, on a tensor standing for a leaf that no op with grad has
    read, make it a leaf again (a trace's clone) and note it (Note [Leaves Laid Out Anew Under no_grad]); on one an op
    with grad read before, note that eager may keep its accumulator (Note [Leaves Laid Out Anew Under no_grad])."""
    note_relaid_late_grad(record, t)
    if (torch.is_grad_enabled() and not torch.is_inference_mode_enabled()) or id(t) not in record.releafable:
        return
    if id(t) in record.grad_read:
        record.layout_kept.add(id(t))
        return
    if not t.requires_grad:
        return
    if t.grad_fn is not None:
        if t._is_view():
            return
        # outside inference mode, where detach_() drops the grad_fn (Note [Leaves Laid Out Anew Under no_grad])
        with torch.inference_mode(False) if torch.is_inference_mode_enabled() else nullcontext(), torch.no_grad():
            t.detach_()
            t.requires_grad_(True)
    record.releafed[id(t)] = None


def note_first_read(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """After an op of the program: the size of each releafed tensor at the first op with grad that read it."""
    if not torch.is_grad_enabled() or not record.releafed:
        return
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and id(a) in record.releafed and record.releafed[id(a)] is None:
            if id(a) in record.grad_read:
                record.releafed[id(a)] = tuple(a.shape)


def note_reads_after_layout(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], view_op: bool) -> None:
    """After an op with grad that is not a view op (`view_op`: its results are all views): the `layout_kept` leaves
    it read, itself or through a view (Note [Leaves Laid Out Anew Under no_grad])."""
    if not torch.is_grad_enabled() or not record.layout_kept or view_op:
        return
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            record.layout_read_after.update({id(a), record.family_of(a)} & record.layout_kept)


def releaf_size(record: SwapRecord, t: torch.Tensor) -> tuple[int | sympy.Expr, ...] | None:
    """`Analysis.releaf_sizes`: the size of input `t`'s accumulator in eager, where the runtime makes it first."""
    size = record.releafed.get(id(t))
    if id(t) in record.late_grad:
        if id(t) not in record.relaid_late_grad:
            return None  # (made to require grad and never relaid: the accumulator has the size the input came with)
        if size is None and t.requires_grad:
            size = tuple(t.shape)  # (no read with grad after the flag: eager's first comes after the call)
    return None if size is None else tuple(symint_expr(d) for d in size)


def seen_after_layout_ops(record: SwapRecord, t: torch.Tensor, output: object) -> bool:
    """`Analysis.seen_after_layout_ops`: after the last in-place view op on input `t`, an op with grad read it or a
    view of it (taken at any time), or the program returns it or such a view: what makes eager's gradient accumulator
    of a leaf relaid under no_grad at its new size (Note [Aliased Inputs In Training])."""
    ops = record.inplace_views.get(id(t))
    if not ops:
        return False
    last = ops[-1].seq
    returned = {id(o) for o in pytree.tree_leaves(output) if isinstance(o, torch.Tensor)}

    def reaches_t(vid: int) -> bool:
        while vid != id(t):
            found = record.views.get(vid)
            if found is None:
                return False
            vid = id(found.source)
        return True

    seen = {i for i, seq in record.read_with_grad.items() if seq >= last} | returned
    return any(reaches_t(i) for i in seen)


def read_after_nograd_set(record: SwapRecord, t: torch.Tensor) -> bool:
    """`Analysis.read_after_nograd_set`: an op with grad read input `t` after a set_() under no_grad gave it another
    storage or layout (a view's history eager then rebuilds at the new layout: Note [Aliased Inputs In Training])."""
    relaid = record.relaid_by_set.get(id(t))
    read = record.read_with_grad.get(id(t))
    return relaid is not None and read is not None and read >= relaid


def _assigned_only(record: SwapRecord, t: torch.Tensor) -> bool:
    """Did `.data =` alone (no in-place view op, no set_()) give `t`, a plain view input, its layout? The assignment
    bumps no version, so eager's read with grad keeps the history `t` came with, as the compiled Function does, until
    a bump (Note [Stale View Functions]: `check_assigned_view_inputs`)."""
    return (
        id(t) in record.assigned_view_inputs and not record.inplace_views.get(id(t)) and id(t) not in record.plain_sets
    )


def _squeezed(t: torch.Tensor) -> Layout:
    dims = [(n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1]
    return tuple(n for n, _ in dims), tuple(s for _, s in dims), t.storage_offset()


def note_view_inputs(record: SwapRecord, views: list[torch.Tensor]) -> None:
    """At the run's start: the tensors standing for view inputs that require grad, and the layout their traced
    history expects (Note [Stale View Functions])."""
    from subclassaot.authoring.protocol import is_traceable_subclass

    for t in views:
        subclass = is_traceable_subclass(t)
        record.view_layouts[id(t)] = (tensor_meta(t) if subclass else _squeezed(t), subclass)
        record.pin(t)


def note_view_layout_op(record: SwapRecord, t: torch.Tensor, before: Layout, name: str) -> None:
    """After an in-place view op `name` on `t` (its layout `before` the op)."""
    found = record.view_layouts.get(id(t))
    if found is None:
        return
    expected, subclass = found
    if not subclass and not torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        # Note [Stale View Functions]: the layout its traced history expects, where the elements stay the same
        kept = record.relaid_views.get(id(t), before) if id(t) not in record.view_sets else None
        # (`_Relaid` sums no gradients of elements over one memory location: eager's as_strided() would)
        record.relaid_views[id(t)] = kept if name in PERMUTING_OPS and non_overlapping(before) else None
    if id(t) in record.set_relaid_views:
        record.set_relaid_views[id(t)] = None  # (eager's history: the new layout's, then this op's node, if with grad)
    if torch.is_grad_enabled():
        if subclass and tensor_meta(t) != before:
            record.grad_changed_views.add(id(t))
        elif not subclass:
            record.view_layouts[id(t)] = (_squeezed(t), subclass)
    elif subclass and id(t) in record.grad_changed_views:
        record.dropped_view_nodes.add(id(t))


# calls returning no tensor at which eager rebuilds no tensor's history (a size, value or storage read)
_NO_HISTORY_QUERIES = frozenset(
    {"size", "stride", "dim", "ndimension", "numel", "nelement", "storage_offset", "is_contiguous", "is_complex",
     "is_floating_point", "element_size", "item", "tolist", "__len__", "__bool__", "__int__", "__float__", "__index__",
     "__contains__", "untyped_storage", "data_ptr", "get_device", "is_set_to", "is_same_size", "equal", "allclose"}
)  # fmt: skip


def _rebuilds_history(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> bool:
    """Does eager's call, made with grad on, rebuild the grad_fn of a view among its tensors whose counter moved? Where
    autograd records a node (a result it made or wrote requires grad), at an autograd read (`.grad_fn`, `.is_leaf`)
    and a call on the history (register_hook(), retain_grad(), backward(), `__setitem__`); not at a size or value read
    (`_NO_HISTORY_QUERIES`), a detach(), an op whose results require no grad (`x == 0`, `argmax()`), nor a
    contiguous() that returns the view itself."""
    if not reads_history(func):
        return False
    outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not outs:
        return getattr(func, "__name__", "") not in _NO_HISTORY_QUERIES
    return is_read_with_grad(func, args, kwargs, out) and any(o.requires_grad for o in outs)


def note_view_reads(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
    """After an op with grad: view inputs it read whose traced history is not eager's, where eager rebuilds it
    (`_rebuilds_history`). Not a read inside an op's dispatch (the swap mode's own, of the tensor set_() changes): no
    program's (Note [Grad Mode And Autograd Reads])."""
    if not torch.is_grad_enabled() or record.dispatching > 0 or not _rebuilds_history(func, args, kwargs, out):
        return
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and id(a) in record.relaid_view_results:
            _note_relaid_view_result_read(record, func, args, kwargs, out, a)
        if not isinstance(a, torch.Tensor) or id(a) not in record.view_layouts:
            continue
        if relaid_call(record, func, args, kwargs, a) and (
            not views_of(a, out) or note_relaid_view_results(record, func, args, out, a, id(a))
        ):
            continue  # (read through `_Relaid`: eager's history, or no history read; a view op: its results noted)
        _note_read_as_traced(record, a)


def _note_read_as_traced(record: SwapRecord, a: torch.Tensor) -> None:
    """A read with grad of `a`, a view input of `SwapRecord.view_layouts`, through its traced history (no stand-in):
    noted as stale where eager's rebuilt history is not that one."""
    expected, subclass = record.view_layouts[id(a)]
    set_before = record.set_relaid_views.get(id(a)) if id(a) in record.view_sets else None
    if set_before is not None and tensor_meta(a) != set_before:
        record.stale_view_layouts.add(id(a))  # (not through its stand-in: views_read_after_own_set skips it)
    elif subclass:
        if id(a) in record.dropped_view_nodes:
            record.stale_view_layouts.add(id(a))
    elif _assigned_only(record, a):
        return  # (eager rebuilds its history only after a bump: check_assigned_view_inputs refuses where it does)
    elif _squeezed(a) != expected and (_accepted(expected[0], _squeezed(a)[0]) or id(a) in record.view_sets):
        # (a set_() to another size: eager's as_strided history takes any size, where the traced one raises)
        record.stale_view_layouts.add(id(a))


def check_relaid_view_applies(record: SwapRecord, name: str, tensors: tuple[object, ...]) -> None:
    """Before a custom Function's apply with grad (`name`), whose ops run with grad off inside, so that the apply is
    the read with grad of its tensor arguments, and one no stand-in replaces (the torch-function mode never sees it):
    a view input among them whose traced history is not eager's rebuilt one is noted as stale (`_note_read_as_traced`),
    and a view the program took and set_() under no_grad to a layout its view function does not make is refused
    (Note [Stale View Functions])."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    with no_torch_function():  # (the pipeline's reads, not the program's)
        for a in tensors:
            if not isinstance(a, torch.Tensor):
                continue
            before = record.set_relaid_views.get(id(a)) if id(a) in record.view_sets else None
            # (a set_() to another size: refused as eager's size checks, after the training checks)
            if id(a) in record.view_layouts and (before is None or tuple(a.shape) == tuple(before[0])):
                _note_read_as_traced(record, a)
            if a.requires_grad and _stale(record, a):
                raise _refusal(record, a, f"{name} is then applied to it with grad enabled")


def _note_relaid_view_result_read(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: object, v: torch.Tensor
) -> None:
    """A read with grad of `v`, a view taken with grad of a relaid view input (`note_relaid_view_results`): refused
    (Note [Stale View Functions]) where its version moved since (eager rebuilds its history from the input's base at
    its layout, the trace by its view functions), where it is written in place or relaid, read by an autograd read,
    or viewed by a call other than a view op on it (whose results are noted as `v` is)."""
    name = getattr(func, "__name__", "")
    root = record.relaid_view_roots[id(v)]
    with no_torch_function():
        moved = v._version != record.relaid_view_results[id(v)]
    first = args[0] is v and (keeps_first(name) or writes_first(name))
    viewed = views_of(v, out) and not note_relaid_view_results(record, func, args, out, v, root)
    if moved or first or is_autograd_read(func) or kwargs.get("out") is v or viewed:
        record.stale_view_layouts.add(root)


def _accepted(expected: tuple[Any, ...], got: tuple[Any, ...]) -> bool:
    """The traced check accepts a gradient of (squeezed) size `got` for a node of `expected`: the same size, or one
    `expected` expands to (the engine sums the gradient down to it)."""
    if len(expected) > len(got):
        return False
    tail = got[len(got) - len(expected) :]
    return all(e == g or e == 1 for e, g in zip(expected, tail, strict=True))


def view_layout(t: object) -> Layout | None:
    return tensor_meta(t) if isinstance(t, torch.Tensor) else None


def refuse_stale_view_layouts(paths: list[str]) -> None:
    """Note [Stale View Functions]."""
    if paths:
        raise UnsupportedError(
            f"{', '.join(paths)}: an input that is a view and requires grad gets another layout from an in-place "
            "view op or a set_() under torch.no_grad() (t_, transpose_, ...) and is then read with grad: eager "
            "rebuilds its "
            "grad_fn from its base at that read (as_strided with its new layout for a plain view, its view "
            "function for a subclass one), which the compiled history of the input does not reproduce (Note [Stale "
            "View Functions]); not supported in training. Use the out-of-place view op (x = x.t()), or change a clone"
        )


# -- plain views set_() under no_grad, then used with grad (the module docstring's second part) ---------------
def note_nograd_set(record: SwapRecord, t: torch.Tensor, layout_before: tuple[object, ...]) -> None:
    """After `t.set_(...)` under no_grad, t a plain functional tensor: note the layout its view function makes where
    t is an autograd view the program took (Note [Stale View Functions])."""
    if torch.is_grad_enabled() or is_traceable_subclass(t) or not t._is_view():
        return
    if id(t) not in record.views:
        return
    record.nograd_set_layouts.setdefault(id(t), layout_before)  # the first: later set_()s keep its view function


def _stale(record: SwapRecord, t: torch.Tensor) -> bool:
    """t is a view set_() under no_grad last (not with grad since) whose layout its view function no longer makes."""
    layout = record.nograd_set_layouts.get(id(t))
    last = record.plain_sets.get(id(t))
    if layout is None or last is None or last[1] or not t._is_view():
        return False
    return layout_of(t) != layout


def _refusal(record: SwapRecord, t: torch.Tensor, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{input_named(record, t)}a view the program took is set_() under torch.no_grad() to a tensor of another "
        f"layout, and {what}: eager's autograd rebuilds the view's history by as_strided() of its base with the new "
        "layout, the traced one by replaying the view op, which makes the old layout (Note [Stale View Functions]); "
        "not supported in training. set_() a tensor that is not a view (a clone), or use the tensor it was set_() to"
    )


class _EagerHistory(torch.autograd.Function):
    """`t`'s elements with the history of `history` (Note [Stale View Functions])."""

    @staticmethod
    def forward(ctx: Any, history: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def _stand_in(record: SwapRecord, t: torch.Tensor, written: bool, recorded: bool) -> torch.Tensor | None:
    """The tensor read (or `written` in place) in `t`'s place with grad (Note [Stale View Functions]), or None.
    `recorded`: autograd records the call on `t` whether or not it requires grad (an in-place op on it with an operand
    that does)."""
    if not (t.requires_grad or recorded) or not _stale(record, t):
        return None
    base = t._base
    assert base is not None, "BUG: an autograd view has a base"
    if id(t) in record.swapped_by_data or storage_key(base) != storage_key(t):
        if written:
            raise _refusal(record, t, "the program then writes it in place with grad enabled")
        if _within(base, t):  # Note [Stale View Functions]
            history = base.as_strided(t.shape, t.stride(), t.storage_offset())
            return cast(torch.Tensor, _EagerHistory.apply(history, t))  # type: ignore[no-untyped-call]  # untyped in torch
        # refused where a gradient reaches it in the traced backward (not a read whose result nothing differentiates)
        message = _refusal(record, t, "a gradient reaches it at a layout its base's storage does not hold").args[0]
        return cast(torch.Tensor, RefusedHistory.apply(t, message))  # type: ignore[no-untyped-call]  # untyped in torch
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def _within(base: torch.Tensor, t: torch.Tensor) -> bool:
    """Does `base`'s storage hold every element of `t`'s layout (so that base.as_strided() can take it)?"""
    if t.numel() == 0:
        return True
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (
        t.storage_offset() >= 0
        and all(s >= 0 for s in t.stride())
        and last < base.untyped_storage().nbytes() // base.element_size()
    )


def differentiated_as_eager(record: SwapRecord, out: torch.Tensor) -> torch.Tensor:
    """The tensor the joint trace differentiates for the forward output `out`: its stand-in where it is a view of
    Note [Stale View Functions] (its own history is the stale view function's)."""
    if not torch.is_grad_enabled() or id(out) not in record.nograd_set_layouts or not is_functional(out):
        return out
    found = _stand_in(record, out, written=False, recorded=False)
    return out if found is None else found


def with_eager_view_histories(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`, `kwargs` with each view of Note [Stale View Functions] the call reads with grad replaced by its
    stand-in (the same objects where there is none): views set_() under no_grad, then relaid view inputs."""
    return with_relaid_view_histories(record, func, *_with_set_view_histories(record, func, args, kwargs))


def _with_set_view_histories(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not record.nograd_set_layouts or not torch.is_grad_enabled() or not args:
        return args, kwargs
    name = getattr(func, "__name__", "")
    if name in NO_STAND_INS or (name == "contiguous" and _contiguous_already(args, kwargs)):
        return args, kwargs
    made: dict[int, torch.Tensor | None] = {}
    grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args, kwargs)))

    def swap(a: object, written: bool = False) -> object:
        if not isinstance(a, torch.Tensor) or not is_functional(a) or id(a) not in record.nograd_set_layouts:
            return a
        if id(a) not in made:
            made[id(a)] = _stand_in(record, a, written, grad and written)
        found = made[id(a)]
        return a if found is None else found

    first = args[0] if keeps_first(name) else swap(args[0], writes_first(name))
    rest = pytree.tree_map(swap, args[1:])
    new_kwargs = {k: v if k == "out" else pytree.tree_map(swap, v) for k, v in kwargs.items()}  # out=: written
    if not any(found is not None for found in made.values()):
        return args, kwargs
    return (first, *rest), new_kwargs


def _contiguous_already(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does `args[0].contiguous(...)` return `args[0]` itself? Eager's then reads no history of it (no op runs)."""
    t = args[0]
    fmt = kwargs.get("memory_format", args[1] if len(args) > 1 else torch.contiguous_format)
    with no_torch_function():  # (the pipeline's read, not the program's)
        return (
            isinstance(t, torch.Tensor) and isinstance(fmt, torch.memory_format) and t.is_contiguous(memory_format=fmt)
        )


def original_of(out: object, name: str, args: tuple[Any, ...], call_args: tuple[Any, ...]) -> object:
    """The result of the call `name`, where it is a stand-in the call was given (`call_args`) the tensor it stands
    for."""
    if args and call_args[0] is not args[0] and layout_of(call_args[0]) != layout_of(args[0]):
        # an in-place op that changed the layout of the stand-in, not the view's: not one of _INPLACE_VIEW_OPS
        raise UnsupportedError(
            f"{name}() changed in place, with grad enabled, the layout of a view set_() under no_grad (Note [Stale "
            "View Functions]); not supported in training. Use the out-of-place op"
        )
    for a, c in zip(args, call_args, strict=True):
        if out is c and c is not a:
            return a
    return out


def check_nograd_set_write(record: SwapRecord, written: torch.Tensor, values: list[object]) -> None:
    """Refuse a data write with grad into a view of Note [Stale View Functions] whose view
    function is stale, where autograd records it (`values`, the op's arguments: one requires grad)."""
    if not torch.is_grad_enabled() or id(written) not in record.nograd_set_layouts or not _stale(record, written):
        return
    if any(isinstance(v, torch.Tensor) and v.requires_grad for v in values):
        raise _refusal(record, written, "the program then writes it in place with grad enabled")
