"""Stage `analyze`/`trace`, while the program runs: plain views set_() under no_grad and then used with grad, given
the history eager's autograd gives them (Note [Stale View Functions]).

Input: the `SwapRecord` of the functional run so far, a set_() the storage-swap dispatch mode ran, and the arguments
of each torch call of the program (seen by the torch-function mode).
Output: the record's `nograd_set_layouts`; the arguments with each such view replaced by a stand-in with eager's
history, and the stand-in's result mapped back; or UnsupportedError naming the rule.
Invariants: a stand-in reads exactly the view's elements (same storage, size, stride and offset); the program's
own tensors are never changed here.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.stale_views import input_named, layout_of
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import is_functional, storage_key

__all__ = [
    "check_nograd_set_write",
    "differentiated_as_eager",
    "note_nograd_set",
    "original_of",
    "with_eager_view_histories",
]

# calls that read no history of a tensor argument, or act on the objects themselves (set_(): Note [set_ Under Grad]
# tracks its source by identity)
_NO_STAND_INS = frozenset({"__get__", "__set__", "__delete__", "set_", "__hash__", "__deepcopy__", "__reduce_ex__"})
_INPLACE_VIEW_OPS = frozenset(
    {"t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "swapdims_", "swapaxes_", "resize_", "resize_as_",
     "set_", "detach_"}
)  # fmt: skip
_NOT_READS = frozenset({"retain_grad", "requires_grad_", "register_hook", "share_memory_"})
_INPLACE_DUNDERS = frozenset(
    {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
     "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"}
)  # fmt: skip


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


class _RefusedHistory(torch.autograd.Function):
    """A view of its input whose backward refuses the program: a gradient reached a history the trace cannot make
    eager's (Note [Stale View Functions])."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, message: str) -> torch.Tensor:
        ctx.message = message
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None]:
        raise UnsupportedError(ctx.message)


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
        return cast(torch.Tensor, _RefusedHistory.apply(t, message))  # type: ignore[no-untyped-call]  # untyped in torch
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


def _writes_first(name: str) -> bool:
    """Does the torch function the program called write its first argument's elements in place?"""
    return (name.endswith("_") and not name.startswith("__")) or name in _INPLACE_DUNDERS


def _keeps_first(name: str) -> bool:
    """Does the torch function the program called change its first argument's layout or storage, or act on the
    tensor object itself (not on its elements)?"""
    return name in _INPLACE_VIEW_OPS or name in _NOT_READS


def with_eager_view_histories(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`, `kwargs` with each view of Note [Stale View Functions] the call reads with grad
    replaced by its stand-in (the same objects where there is none)."""
    if not record.nograd_set_layouts or not torch.is_grad_enabled() or not args:
        return args, kwargs
    name = getattr(func, "__name__", "")
    if name in _NO_STAND_INS:
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

    first = args[0] if _keeps_first(name) else swap(args[0], _writes_first(name))
    rest = pytree.tree_map(swap, args[1:])
    new_kwargs = {k: v if k == "out" else pytree.tree_map(swap, v) for k, v in kwargs.items()}  # out=: written
    if not any(found is not None for found in made.values()):
        return args, kwargs
    return (first, *rest), new_kwargs


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
