"""Stage `analyze`, a check run while the program runs: views used with grad after their base's layout changed.

Input: the `SwapRecord` of the functional run so far and the arguments of one torch call of the program.
Output: nothing, or UnsupportedError naming the rule. Invariants: pure reads of the record.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.desugar import leaf_meta
from subclassaot.errors import UnsupportedError
from subclassaot.swap_record import SwapRecord, ViewRecord
from subclassaot.torch_internals import no_dispatch, symint_expr

__all__ = ["check_stale_views"]


# Note [Views Used After An In-Place View Op On Their Base]
# `t0 = x.view(4, -1, 1); x.transpose_(1, 0); t0.add(2.0)` with grad on, x requiring grad: the in-place view op
# advances x's version, so autograd regenerates t0's grad_fn from x's new one when t0 is next used. Eager does that
# by as_strided() over the storage, which sends t0's gradient to the elements it reads. Under functionalization
# (the joint trace) autograd replays t0's own view op on x as x is now, transposed, and the traced backward sends
# the gradient to the transposed elements (fuzz seed 7000 #6722: wrong leaf gradients; t_(), as_strided_() and
# unsqueeze_() of a slice the same). So a view taken with grad of a tensor that requires grad, used with grad after
# an in-place view op with grad on that tensor (or on a tensor the view chain passes through), is refused.


def check_stale_views(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Note [Views Used After An In-Place View Op On Their Base]."""
    if not torch.is_grad_enabled():
        return
    for t in pytree.tree_leaves((args, kwargs)):
        if isinstance(t, torch.Tensor) and t.requires_grad and (changed := _changed_base(record, t)) is not None:
            raise UnsupportedError(
                f"a view taken with grad enabled is used with grad after the program changed the layout of the "
                f"tensor it is a view of by {changed}() with grad enabled: autograd regenerates the view's history "
                "from that tensor's new layout, which the traced backward cannot repeat as eager does (Note [Views "
                "Used After An In-Place View Op On Their Base]). Take the view again after the in-place view op, "
                "or use a clone"
            )


def _changed_base(record: SwapRecord, t: torch.Tensor) -> str | None:
    """The name of an in-place view op run with grad on a tensor of `t`'s view chain after the view of it was
    taken, where replaying the view on that tensor's layout now gives another layout than eager's view has; else
    None."""
    while (view := record.views.get(id(t))) is not None and view.func is not torch.ops.aten.detach.default:
        source = view.source
        if view.grad_enabled and source.requires_grad and not _replays_the_same(view, source):
            for op in record.inplace_views.get(id(source), []):
                if op.grad_enabled and op.seq > view.seq:
                    return str(getattr(op.func, "__name__", op.func)).split(".")[0]
        t = source
    return None


Meta = tuple[tuple[Any, ...], tuple[Any, ...], Any]


def _replays_the_same(view: ViewRecord, source: torch.Tensor) -> bool:
    """Does the view op, replayed on `source` as it is now, make the layout it made from `source` as it was? False
    where that is not decidable here (symbolic sizes)."""
    size, stride, offset = view.source_meta
    then = (tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset))
    if leaf_meta(source) == then:  # (as expressions: comparing SymInts would add guards)
        return True
    now: Meta = (tuple(source.shape), tuple(source.stride()), source.storage_offset())
    values = pytree.tree_leaves((now, view.source_meta, view.args, view.kwargs))
    if any(isinstance(v, torch.SymInt | torch.SymFloat | torch.Tensor) for v in values):
        return False
    with no_dispatch():
        try:
            return _geometry(view, now) == _geometry(view, view.source_meta)
        except RuntimeError:  # the view op does not apply to the new layout
            return False


def _geometry(view: ViewRecord, meta: Meta) -> Meta:
    size, stride, offset = meta
    extent = offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if s > 0)
    base = torch.empty((max(extent, 1),), device="meta").as_strided(size, stride, offset)
    out = view.func(base, *view.args, **view.kwargs)
    made = out[view.index] if view.index is not None else out
    return (tuple(made.shape), tuple(made.stride()), made.storage_offset())
