"""The program's reads of autograd state (`t.is_leaf`, `t.requires_grad`, `t.grad_fn`) answered in the no_grad
trace as the analysis run answered them (Note [Grad Mode And Autograd Reads]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `read`; the analysis copies the
record's answers into Analysis.autograd_reads and trace_inference gives them back to its run. Output: the answer.
Invariants: the answers are replayed in call order; a run given none computes and records them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord

__all__ = ["base_read", "is_autograd_read", "is_base_read", "note_detach", "read"]

_GETTERS = frozenset({"is_leaf", "requires_grad", "grad_fn"})


def is_autograd_read(func: Any) -> bool:
    """Is `func` the getter of one of the autograd attributes replayed (Note [Grad Mode And Autograd Reads])?"""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner in _GETTERS and getattr(func, "__name__", "") == "__get__"


def read(record: SwapRecord, func: Any, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """The answer of one autograd read `func(*args)`: the analysis run's where the record replays them, else
    `call()`'s (recorded)."""
    if record.replayed_reads is not None and record.replay_cursor < len(record.replayed_reads):
        replayed = record.replayed_reads[record.replay_cursor]
        record.replay_cursor += 1
        return replayed
    real = record.eager_inputs.get(id(args[0])) if args else None
    name = getattr(getattr(func, "__self__", None), "__name__", None)
    if real is not None and name == "is_leaf":  # Note [Grad Mode And Autograd Reads]
        answer: object = real.is_leaf
    elif real is not None and name == "grad_fn" and (real.is_leaf or not record.grad_at_start):
        answer = real.grad_fn
    else:
        answer = _run_read(record, name, args, call)
    record.autograd_reads.append(answer)
    return answer


def _run_read(record: SwapRecord, name: object, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """`call()`, the run's own answer to a read of `name` (Note [Grad Mode And Autograd Reads])."""
    try:
        return call()
    except RuntimeError as e:
        t = args[0] if args else None
        if not isinstance(t, torch.Tensor) or not str(e).startswith("A view was created in no_grad mode"):
            raise
        found = record.input_positions.get(id(record.view_root(t, through_swaps=True)))
        if found is None:
            raise
        raise UnsupportedError(
            f"the program reads `.{name}` of a view of tensor input {found[0]} that its base's in-place write "
            "(with that base requiring grad) makes autograd rebuild: the compiler's run lays inputs out under "
            'no_grad, where autograd refuses that view\'s history ("A view was created in no_grad mode ...") and '
            "eager's view may have one (Note [Grad Mode And Autograd Reads]). Take the view after the "
            "write, or make the input require grad before the call"
        ) from e


def note_detach(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """`detach_()` makes its tensor a leaf (Note [Grad Mode And Autograd Reads])."""
    if func in (torch.Tensor.detach_, torch.detach_) and args:
        record.eager_inputs.pop(id(args[0]), None)


def is_base_read(func: Any) -> bool:
    """Is `func` the getter of `Tensor._base`, or `Tensor._is_view` (Note [Grad Mode And Autograd Reads])?"""
    if func is torch.Tensor._is_view:
        return True
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner == "_base" and getattr(func, "__name__", "") == "__get__"


def base_read(record: SwapRecord, func: Any, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """The answer of `args[0]._base` or `args[0]._is_view()` (Note [Grad Mode And Autograd Reads]); `call()` gives
    the run's own."""
    out = call()
    t = args[0] if args else None
    if not isinstance(t, torch.Tensor):
        return out
    root = record.view_root(t, through_swaps=True)
    found = record.input_positions.get(id(root))
    if found is None:
        return out
    position, real = found
    if func is torch.Tensor._is_view:
        if t is not root:
            return True
        record.base_reads.append((position, None if real._base is None else -1))
        return real._base is not None
    base = real._base
    if base is None:
        record.base_reads.append((position, None))
        return None if t is root else root
    for j, other in record.input_positions.values():
        if other is base:
            record.base_reads.append((position, j))
            return record.run_inputs[j]
    what = "tensor input" if t is root else "a view of tensor input"
    raise UnsupportedError(
        f"the program reads `._base` of {what} {position} (of shape {tuple(real.shape)}), which is a view of a "
        "tensor not passed to the program: eager's answer is that tensor, which the compiled program does not have "
        "(Note [Grad Mode And Autograd Reads]). Pass the base as an argument too, or test `._is_view()` instead"
    )
