"""Subclass inputs that are views, require grad (or gain it), are written and have their layout changed by in-place
view ops: where the epilogue copies their new value in among the replayed view ops (Note [Stale View
Functions]).

Input: the functional run's `SwapRecord` (analyze), `Analysis` and `DenseLayout` (backward trace, runtime). Output:
per input, how many of its replayed view ops come before the copy (`steps_before_last_write`; the epilogue's
`copy_point` and the value it copies, `undo_steps`, are runtime/steps.py's), and the refusal of what stays
unsupported. Invariants: no tracing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.steps import copy_point
from subclassaot.schemas import Analysis, DenseLayout

if TYPE_CHECKING:
    from subclassaot.pipeline.rules.swap_record import SwapRecord

aten = torch.ops.aten

_SCALING = frozenset({aten.mul_.Tensor, aten.div_.Tensor})


def steps_before_last_write(t: torch.Tensor, ndim: int, swaps: SwapRecord) -> int | None:
    """How many of the in-place view ops on input `t` (as the run ran it; `ndim` dims as it came) came before the
    program's last write of its data, through it or a view of it; None if it had none of either, or where the
    epilogue cannot give it eager's history (Note [Stale View Functions])."""
    records = swaps.inplace_views.get(id(t), [])
    family = swaps.family_of(t)
    others = [
        seq
        for k, seqs in swaps.wrapper_data_writes.items()
        if k != id(t) and swaps.family.get(k) == family
        for seq in seqs
    ]
    own = swaps.wrapper_data_writes.get(id(t), [])
    if not records or not (own or others) or any(seq > records[0].seq for seq in others):
        return None
    last = max([*own, *others])
    changes = layout_changes([(r.func, r.args) for r in records], ndim)
    if any(change and not r.grad_enabled for r, change in zip(records, changes, strict=True)):
        return None  # the trace's history of its non-view clone does not see it, the inverse views do
    changed = next((r.seq for r, change in zip(records, changes, strict=True) if change), None)
    if changed is not None and not _fresh_reads(t, changed, own, swaps):
        return None
    return sum(1 for r in records if r.seq < last)


def layout_changes(ops: Sequence[tuple[object, tuple[object, ...]]], ndim: int) -> list[bool]:
    """Per in-place view op (op, its arguments after the tensor) applied in turn to a tensor of `ndim` dims: may it
    change the layout? (Conservatively: all but a t_() of a 0-d or 1-d tensor and a transpose_() of a dim with
    itself.)"""
    out = []
    for func, args in ops:
        a, b = (args[0], args[1]) if len(args) == 2 else (None, None)
        if func is aten.t_.default and ndim < 2:
            out.append(False)
        elif func is aten.transpose_.default and isinstance(a, int) and isinstance(b, int):
            out.append(a % max(ndim, 1) != b % max(ndim, 1))
        else:
            out.append(True)
        ndim += 1 if func is aten.unsqueeze_.default else 0
    return out


def _fresh_reads(t: torch.Tensor, changed: int, own: Sequence[int], swaps: SwapRecord) -> bool:
    """After the layout change at seq `changed`: no op with grad reads `t`, or a view of it, once a bump made
    eager's rebuilt history stale, and every write into `t` hands its other arguments layout-free gradients."""
    family = swaps.family_of(t)
    bumps = [seq for seq in own if seq > changed]
    for (func, _, written), (before, read) in zip(swaps.wrapper_ops, swaps.wrapper_op_reads, strict=True):
        if before < changed:
            continue
        if any(w is t for w in written):
            if torch.Tag.inplace_view in func.tags:
                continue
            if not all(isinstance(a.numel(), int) and a.numel() == 1 for a in read):
                return False
            if func in _SCALING and any(a.requires_grad for a in read):
                return False
            continue
        stale = any(changed < seq <= before for seq in bumps)
        if stale and any(is_traceable_subclass(a) and swaps.family_of(a) == family for a in (*read, *written)):
            return False
    return True


def refuse_written_views_changed_in_place(
    layout: DenseLayout, analysis: Analysis, real: Sequence[torch.Tensor], wrapper_updates: Sequence[int]
) -> None:
    """Note [Stale View Functions]. `real`: the real tensor inputs (guarded: `_is_view()`)."""
    for i in wrapper_updates:
        tree = layout.trees[i]
        if (
            tree is not None
            and real[i]._is_view()
            and analysis.inplace_replay[i]
            and copy_point(layout, analysis, i) is None
            # ops that leave the layout as it came (x.transpose_(1, 1)) leave no stale history: as for any input
            and any(layout_changes([(s.op, s.args) for s in analysis.inplace_replay[i]], real[i].dim()))
        ):
            raise UnsupportedError(
                f"{tree.path}: a tensor subclass input that is a view and requires grad (or gains it) is written and "
                "has its metadata changed by in-place view ops (t_, unsqueeze_, ...), where eager's autograd rebuilds "
                "its history from the layout it came with: the program reads it with grad after such an op and a "
                "write, writes it from a tensor of several elements (or multiplies it by one that requires grad) "
                "after such an op, changes its layout under no_grad, writes a view of it after such an op, shares "
                "its storage with another input or assigns its `.data`; in training this is not supported yet (Note "
                "[Stale View Functions]). Pass the base, or change a clone"
            )
