"""Plain view inputs that require grad, relaid under no_grad (in-place view ops that lay out the same elements anew,
or set_()), then read with grad: each read with grad goes through `_Relaid`, whose backward takes the gradient from
the storage positions the view has now to the layout the input's traced history expects (Note [Stale View
Functions]).

Input: the `SwapRecord` of the functional run so far (`relaid_views`, `set_relaid_views`, filled by hidden_layouts'
`note_view_layout_op` and the swap mode's set_() through `note_view_set`), and the arguments of each torch call of the
program (seen by storage_swaps' torch-function mode). Output: the arguments with each such view replaced by a stand-in
over it (`with_relaid_view_histories`); `relaid_call` tells hidden_layouts' `note_view_reads` which reads the stand-ins
answer. Invariants: a stand-in reads exactly the view's elements (same storage, size, stride and offset); the program's
own tensors are never changed here.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.autograd_state import is_autograd_read
from subclassaot.pipeline.rules.swap_record import SwapRecord, layout_offsets
from subclassaot.torch_internals import may_return_view, no_torch_function, storage_key

Layout = tuple[tuple[Any, ...], tuple[Any, ...], Any]

# in-place view ops that lay out the same elements anew (`t_()`: the transpose of them)
PERMUTING_OPS = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "unsqueeze_", "squeeze_"})
# calls that read no history of a tensor argument, or act on the objects themselves (set_(): Note [set_ Under Grad]
# tracks its source by identity)
NO_STAND_INS = frozenset({"__get__", "__set__", "__delete__", "set_", "__hash__", "__deepcopy__", "__reduce_ex__"})
_INPLACE_VIEW_OPS = frozenset(
    {"t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "swapdims_", "swapaxes_", "resize_", "resize_as_",
     "set_", "detach_"}
)  # fmt: skip
_NOT_READS = frozenset({"retain_grad", "requires_grad_", "register_hook", "share_memory_"})
_INPLACE_DUNDERS = frozenset(
    {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
     "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"}
)  # fmt: skip
# the most elements `_within` compares position by position (more: not decided, the read stays refused)
_MOST_POSITIONS = 1 << 16


def writes_first(name: str) -> bool:
    """Does the torch function the program called write its first argument's elements in place?"""
    return (name.endswith("_") and not name.startswith("__")) or name in _INPLACE_DUNDERS


def keeps_first(name: str) -> bool:
    """Does the torch function the program called change its first argument's layout or storage, or act on the
    tensor object itself (not on its elements)?"""
    return name in _INPLACE_VIEW_OPS or name in _NOT_READS


def layout(t: torch.Tensor) -> Layout:
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def note_view_set(record: SwapRecord, t: torch.Tensor, before: Layout) -> None:
    """After a set_() of `t` standing for a plain view input that requires grad (`before`: its layout before it):
    under no_grad, the layout its traced history expects, where the first such set_() (in-place view ops before it
    permuting its elements alone) leaves that known; with grad or in inference mode, none (Note [Stale View
    Functions])."""
    if torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        record.set_relaid_views[id(t)] = None
    elif id(t) not in record.set_relaid_views:
        record.set_relaid_views[id(t)] = record.relaid_views.get(id(t), before)
        record.set_relaid_storages[id(t)] = storage_key(t)


def non_overlapping(found: Layout) -> bool:
    """Does each element of `found` (size, stride, offset) have a memory location of its own (False where that is
    not decidable here)?"""
    dims = sorted((s, n) for n, s in zip(found[0], found[1], strict=True) if n != 1)
    reach = 0
    for stride, size in dims:
        if not isinstance(stride, int) or not isinstance(size, int) or stride <= reach:
            return size == 0 if isinstance(size, int) else False
        reach += (size - 1) * stride
    return True


def _within(now: Layout, before: Layout) -> bool:
    """Are the storage positions of `now` among those of `before` (decidably)?"""
    mine, theirs = layout_offsets(*now, most=_MOST_POSITIONS), layout_offsets(*before, most=_MOST_POSITIONS)
    return mine is not None and theirs is not None and set(mine) <= set(theirs)


def _relaid(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is `t` a plain view input relaid under no_grad by `PERMUTING_OPS` alone, or by set_()s of which the first
    knows the layout its traced history expects (`note_view_set`)?"""
    if id(t) in record.view_sets:
        return record.set_relaid_views.get(id(t)) is not None
    return record.relaid_views.get(id(t)) is not None


def _relaid_read(record: SwapRecord, name: str, t: torch.Tensor) -> bool:
    """Does the call `name` read `t` of `_relaid` with grad, through its history (Note [Stale View Functions])?"""
    return (
        _relaid(record, t)
        and t.requires_grad
        and torch.is_grad_enabled()
        and not torch.is_inference_mode_enabled()
        and name not in NO_STAND_INS
        and not may_return_view(name, unknown=True)  # (a view of the stand-in's result: made in a custom Function)
    )


def relaid_call(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], t: torch.Tensor) -> bool:
    """Does the call read `t` of `_relaid` only as `with_relaid_view_histories` gives it, or not through its history
    (a size read)? Not an autograd read (`.grad_fn`), a write of it, nor a call on the tensor object (retain_grad)."""
    name = getattr(func, "__name__", "")
    first = bool(args) and args[0] is t and (keeps_first(name) or writes_first(name))
    return _relaid(record, t) and not is_autograd_read(func) and not first and kwargs.get("out") is not t


def views_of(t: torch.Tensor, out: object) -> bool:
    """Is a result of the call a view of `t` (of the stand-in over it, then: a view of `t`'s base)?"""
    root = t if t._base is None else t._base
    return any(isinstance(o, torch.Tensor) and o._base is root for o in pytree.tree_leaves(out))


class _Relaid(torch.autograd.Function):
    """`t`'s elements in its layout now, with a history that takes their gradient to the layout `t`'s own history
    expects (`before`) at the same storage positions: Note [Stale View Functions]. The gradients of elements of one
    position are summed (as eager's as_strided() backward sums them), and a position `before` holds more than once
    gets an equal share in each of its elements (which the view's own history sums back)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, before: Layout) -> torch.Tensor:
        ctx.before, ctx.now = before, layout(t)
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (size, stride, offset), (now_size, now_stride, now_offset) = ctx.before, ctx.now
        extent = 1 + max(
            o + sum((n - 1) * st for n, st in zip(sz, sd, strict=True))
            for sz, sd, o in ((size, stride, offset), (now_size, now_stride, now_offset))
        )
        index = torch.arange(extent, device=grad.device)
        flat = grad.new_zeros((extent,))
        if non_overlapping(ctx.now):
            flat.as_strided(now_size, now_stride, now_offset).copy_(grad)
        else:
            flat.index_add_(0, index.as_strided(now_size, now_stride, now_offset).reshape(-1), grad.reshape(-1))
        if non_overlapping(ctx.before):
            return flat.as_strided(size, stride, offset), None
        count = grad.new_zeros((extent,))
        count.index_add_(0, index.as_strided(size, stride, offset).reshape(-1), grad.new_ones(size).reshape(-1))
        return flat.as_strided(size, stride, offset) / count.as_strided(size, stride, offset), None


class RefusedHistory(torch.autograd.Function):
    """A view of its input whose backward refuses the program: a gradient reached a history the trace cannot make
    eager's (Note [Stale View Functions]): e.g. eager's sends it to positions of the base the input's traced history
    cannot reach."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, message: str) -> torch.Tensor:
        ctx.message = message
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None]:
        raise UnsupportedError(ctx.message)


def _path(record: SwapRecord, key: int) -> str:
    """`"args[0]: "` for the input of id() `key`, "" where it is none."""
    found = record.input_positions.get(key)
    return (
        f"{record.run_input_paths[found[0]]}: " if found is not None and found[0] < len(record.run_input_paths) else ""
    )


def _stand_in(record: SwapRecord, t: torch.Tensor) -> torch.Tensor:
    """The tensor a call reads with grad in `t`'s place (`_relaid_read`)."""
    before = record.set_relaid_views[id(t)] if id(t) in record.view_sets else record.relaid_views[id(t)]
    assert before is not None, "BUG: a stand-in for a view input its record does not know the layout of"
    # (positions of the storage the input came with: another's, eager's base takes at their offsets there, which the
    # run's need not keep)
    if storage_key(t) == record.set_relaid_storages.get(id(t), storage_key(t)) and _within(layout(t), before):
        return cast(torch.Tensor, _Relaid.apply(t, before))  # type: ignore[no-untyped-call]  # untyped in torch
    message = (
        f"{_path(record, id(t))}an input that is a view and requires grad is set_() under torch.no_grad() to a "
        "layout over another storage, or over positions its own layout does not hold, and a gradient reaches a read of it with grad: "
        "eager's autograd rebuilds its history by as_strided() of its base at the new layout, sending that gradient "
        "to elements of the base the compiled history of the input does not reach (Note [Stale View Functions]); "
        "not supported in training. set_() a clone of it"
    )
    return cast(torch.Tensor, RefusedHistory.apply(t, message))  # type: ignore[no-untyped-call]  # untyped in torch


def note_relaid_view_results(
    record: SwapRecord, func: Any, args: tuple[Any, ...], out: object, t: torch.Tensor, root: int
) -> bool:
    """After a view op with grad (`func`) reading `t`, a view input of `_relaid` (`root`: the id of the input) or a
    view noted here: its results hold the input's traced history, not eager's (Note [Stale View Functions]), so each
    is noted with its version (a read with grad after that moved is refused by note_view_reads) and given a hook that
    refuses the program where a gradient reaches it. False (nothing noted) where the call is no view op, `t` is not
    its first argument, or a result is no view of `t`'s base."""
    name = getattr(func, "__name__", "")
    results = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not may_return_view(name, unknown=False) or not args or args[0] is not t or not results:
        return False
    with no_torch_function():  # (reads of the run's tensors the program does not make)
        root_base = t if t._base is None else t._base
        if any(o is t or o._base is not root_base for o in results):
            return False  # (contiguous() returning `t` itself: read as before)
    message = (
        f"{_path(record, root)}an input that is a view and requires grad is relaid under torch.no_grad() (an in-place "
        "view op or a set_()), and a view taken of it with grad after gets a gradient: eager rebuilds the input's "
        "history by as_strided() of its base at the new layout, the view's history reaches the compiled input's, "
        "which expects the old one (Note [Stale View Functions]); not supported in training. Use the out-of-place "
        "view op (x = x.t()), or view a clone"
    )

    def refuse(grad: torch.Tensor) -> None:
        raise UnsupportedError(message)

    with no_torch_function():
        for o in results:
            record.pin(o)
            record.relaid_view_results[id(o)] = o._version
            record.relaid_view_roots[id(o)] = root
            if o.requires_grad:
                o.register_hook(refuse)  # type: ignore[no-untyped-call]  # untyped in torch
    return True


def with_relaid_view_histories(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`, `kwargs` with each plain view input the call reads with grad after in-place view ops or set_()s under
    no_grad relaid it (`_relaid_read`) replaced by its stand-in (Note [Stale View Functions])."""
    if not (record.relaid_views or record.set_relaid_views) or not args:
        return args, kwargs
    made: dict[int, torch.Tensor] = {}

    def swap(a: object) -> object:
        if not isinstance(a, torch.Tensor) or not _relaid_read(record, name, a):
            return a
        if id(a) not in made:
            made[id(a)] = _stand_in(record, a)
        return made[id(a)]

    name = getattr(func, "__name__", "")
    first = args[0] if keeps_first(name) or writes_first(name) else swap(args[0])
    rest = pytree.tree_map(swap, args[1:])
    new_kwargs = {k: v if k == "out" else pytree.tree_map(swap, v) for k, v in kwargs.items()}  # out=: written
    return ((first, *rest), new_kwargs) if made else (args, kwargs)
