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
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import sympy
import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import symint_expr

__all__ = [
    "is_layout_op",
    "view_layout",
    "note_first_read",
    "note_layout_op",
    "note_reads_after_layout",
    "note_view_inputs",
    "note_view_layout_op",
    "note_view_reads",
    "refuse_stale_view_layouts",
    "releaf_size",
]

# Note [Leaves Laid Out Anew Under no_grad]
# Eager: an autograd leaf that requires grad has no grad_fn; its gradient accumulator is made at the first op with grad
# that reads it, expects the size the leaf has then, and lives while a node of a live result holds it. So `with
# torch.no_grad(): x.t_()` (or another in-place view op, or a set_() to another size) records nothing, and an op with
# grad that reads x after makes the accumulator at the new size: the gradient arrives in the new layout. Where an op
# with grad read x before the change and its result is still alive, that old accumulator is found again, and eager's
# backward fails its size check ("... returned an invalid gradient ... expected shape compatible with ..."), or sums a
# gradient that expands to it down to it. On a non-leaf, a no_grad in-place view op leaves its grad_fn expecting the old
# layout, so the epilogue replays such a change under no_grad too, even where other writes make the input's mutation
# autograd-visible (a backward through the new x then raises, as in eager).
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
# A torch.inference_mode() block is no_grad here (eager's leaf records nothing there either), but inference mode skips
# autograd's kernels, detach_()'s among them, which alone drops the clone's grad_fn: the trace leaves inference mode
# for its detach_() (else the gradient is taken through the clone in the old size, against an accumulator made in
# the new one).
# - Inputs made to require grad: a leaf input (plain or subclass) that does not require grad, which the program makes
#   require grad (requires_grad_(), `.requires_grad = True`), is read without history before that call in eager and
#   with history after. The compile goes for training with the input requiring grad (the runtime sets the flag before the graph
#   runs, as the program's own call would); the run's stand-in for such an input, in no alias group and no view, is a
#   leaf without grad from the start (in training its clone, detach_()ed: `SwapRecord.late_grad`), so the program's
#   call turns the flag on where eager's does, and the joint trace takes the input's gradient with respect to that
#   leaf. A view of the input taken before the call and returned is refused (the runtime would replay it on the input
#   that requires grad, with history).

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


def note_layout_op(record: SwapRecord, t: torch.Tensor) -> None:
    """After an in-place view op on `t`: under no_grad, on a tensor standing for a leaf that no op with grad has
    read, make it a leaf again (a trace's clone) and note it (Note [Leaves Laid Out Anew Under no_grad]); on one an op
    with grad read before, note that eager may keep its accumulator (Note [Leaves Laid Out Anew Under no_grad])."""
    if torch.is_grad_enabled() or id(t) not in record.releafable:
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
    return None if size is None else tuple(symint_expr(d) for d in size)


Layout = tuple[tuple[Any, ...], tuple[Any, ...], Any]


def _squeezed(t: torch.Tensor) -> Layout:
    dims = [(n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1]
    return tuple(n for n, _ in dims), tuple(s for _, s in dims), t.storage_offset()


def _meta(t: torch.Tensor) -> Layout:
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def note_view_inputs(record: SwapRecord, views: list[torch.Tensor]) -> None:
    """At the run's start: the tensors standing for view inputs that require grad, and the layout their traced
    history expects (Note [Stale View Functions])."""
    from subclassaot.authoring.protocol import is_traceable_subclass

    for t in views:
        subclass = is_traceable_subclass(t)
        record.view_layouts[id(t)] = (_meta(t) if subclass else _squeezed(t), subclass)
        record.pin(t)


def note_view_layout_op(record: SwapRecord, t: torch.Tensor, before: Layout) -> None:
    """After an in-place view op on `t` (its layout `before` the op)."""
    found = record.view_layouts.get(id(t))
    if found is None:
        return
    expected, subclass = found
    if torch.is_grad_enabled():
        if subclass and _meta(t) != before:
            record.grad_changed_views.add(id(t))
        elif not subclass:
            record.view_layouts[id(t)] = (_squeezed(t), subclass)
    elif subclass and id(t) in record.grad_changed_views:
        record.dropped_view_nodes.add(id(t))


def note_view_reads(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """After an op with grad: view inputs it read whose traced history is not eager's."""
    if not torch.is_grad_enabled():
        return
    for a in (*args, *kwargs.values()):
        if not isinstance(a, torch.Tensor) or id(a) not in record.view_layouts:
            continue
        expected, subclass = record.view_layouts[id(a)]
        if subclass:
            if id(a) in record.dropped_view_nodes:
                record.stale_view_layouts.add(id(a))
        elif _squeezed(a) != expected and (_accepted(expected[0], _squeezed(a)[0]) or id(a) in record.view_sets):
            # (a set_() to another size: eager's as_strided history takes any size, where the traced one raises)
            record.stale_view_layouts.add(id(a))


def _accepted(expected: tuple[Any, ...], got: tuple[Any, ...]) -> bool:
    """The traced check accepts a gradient of (squeezed) size `got` for a node of `expected`: the same size, or one
    `expected` expands to (the engine sums the gradient down to it)."""
    if len(expected) > len(got):
        return False
    tail = got[len(got) - len(expected) :]
    return all(e == g or e == 1 for e, g in zip(expected, tail, strict=True))


def view_layout(t: object) -> Layout | None:
    return _meta(t) if isinstance(t, torch.Tensor) else None


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
