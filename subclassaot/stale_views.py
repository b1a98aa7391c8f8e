"""Layout changes of traced views of a synthetic base that autograd forgets (Note [Stale View Functions]).

Input: the storage-swap mode's record and each op it sees (storage_swaps.py calls `note_reads` before recording an
op and `note_layout` after). Output: `SwapRecord.stale_reads`, the synthetic-base storages whose views the program
read where autograd rebuilt their history from a view function that misses an in-place view op.
Invariants: reads the record and the op's arguments only; never changes a tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.swap_record import SwapRecord
from subclassaot.torch_internals import storage_key

# Note [Stale View Functions]
# Members of an alias group are traced as views of a synthetic base (Note [Synthetic Bases]). Functional tensors do
# not support as_strided replay, so autograd records, for each view, a function that rebuilds it from its base, and
# uses it to rebuild the view's history (grad_fn) whenever the storage's version counter moved since that history
# was set (a write through any alias, or an in-place view op under no_grad). An in-place view op on such a view
# (m.t_(), m.unsqueeze_(0)) changes the view but not that function (nor the functions of views taken from it later),
# so a history rebuilt after it reads gradients in the layout the view had before: wrong values, or a shape error,
# where eager's views (which do support as_strided) rebuild it in the layout they have now. A view whose history
# autograd never rebuilds after such an op is exact: a grad-enabled in-place view op records its own node on the
# view's history, as eager's. So the mode tracks, per view whose function is stale, the sequence number at which
# its history was last set; an op that reads it with grad enabled after the storage's counter moved past that
# number reads a rebuilt, wrong history. training_rules refuses those groups (fuzz seed 6000 #3969: t_() then a
# write, the member read after it: a shape error; a square one gives wrong gradients silently).


def note_before(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """Before an in-place view op runs: the layout a view of a synthetic base has while its view function is right."""
    if torch.Tag.inplace_view in getattr(func, "tags", ()) and args and isinstance(args[0], torch.Tensor):
        if id(args[0]) not in record.stale_views and storage_key(args[0]) in record.alias_bases:
            record.function_layouts[id(args[0])] = _layout(args[0])


def _layout(t: torch.Tensor) -> tuple[object, ...]:
    """What autograd's history of a view reads: its sizes, and the strides of its dims of more than one element."""
    strides = tuple(st if sz != 1 else 0 for sz, st in zip(t.shape, t.stride(), strict=True))
    return (tuple(t.shape), strides, t.storage_offset() if t.numel() else 0)


def _stale(record: SwapRecord, t: torch.Tensor) -> bool:
    """The view function of `t` no longer makes its layout (one that got back its layout is right again)."""
    before = record.function_layouts.get(id(t))
    return id(t) in record.stale_views and (before is None or before != _layout(t))


def note_reads(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before an op is recorded: note the storages of stale views it reads with a rebuilt history, or writes with
    grad enabled (autograd's CopySlices slices the base's gradient by the stale function)."""
    if not torch.is_grad_enabled() or not record.stale_views or getattr(func, "is_view", False):
        return  # a view op's output inherits the history it read (note_layout)
    schema = getattr(func, "_schema", None)
    written = [] if schema is None else _written(schema, args, kwargs)
    data_write = torch.Tag.inplace_view not in getattr(func, "tags", ())
    for a in pytree.tree_leaves((args, kwargs)):
        if not isinstance(a, torch.Tensor) or not a.requires_grad or not _stale(record, a):
            continue
        key = storage_key(a)
        rebuilt = record.last_bump.get(key, -1) > record.stale_views[id(a)]
        if rebuilt or (data_write and any(a is w for w in written)):
            record.stale_reads.add(key)


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
        if storage_key(src) not in record.alias_bases or any(src is b for b in record.alias_bases.values()):
            return
        # under no_grad the op records nothing: the history stays as set before it, and its own bump rebuilds it
        recorded = torch.is_grad_enabled() and src.requires_grad
        set_at = record.seq if recorded else min(seq_before, record.stale_views.get(id(src), seq_before))
        record.stale_views[id(src)] = set_at
        record.keep_alive.append(src)
    elif getattr(func, "is_view", False) and _stale(record, src):
        rebuilt = record.last_bump.get(storage_key(src), -1) > record.stale_views[id(src)]
        for o in out if isinstance(out, list | tuple) else (out,):
            if isinstance(o, torch.Tensor):
                record.stale_views[id(o)] = -1 if rebuilt and torch.is_grad_enabled() else record.seq
                record.keep_alive.append(o)
