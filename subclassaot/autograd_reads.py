"""The program's reads of autograd state (`t.is_leaf`, `t.requires_grad`, `t.grad_fn`) answered in the no_grad
trace as the analysis run answered them (Note [Autograd Reads Replayed In The Trace]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `read`; the analysis copies the
record's answers into Analysis.autograd_reads and trace_inference gives them back to its run. Output: the answer.
Invariants: the answers are replayed in call order; a run given none computes and records them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from subclassaot.swap_record import SwapRecord

__all__ = ["is_autograd_read", "note_detach", "read"]

# Note [Autograd Reads Replayed In The Trace]
# `t0 = x.diagonal(); x.mul_(-1); return t0 * 2, t0.is_leaf`, x a non-leaf that requires grad, grad on (session 11's
# open gap): the analysis runs the program with eager's grad mode, where reading t0.is_leaf after the write
# regenerates t0's history and answers False. The forward graph is traced again under no_grad (trace_inference),
# where t0 is a view made in no_grad mode whose base was written since, and the same read raises autograd's
# "A view was created in no_grad mode ..." error: a crash of the compiler for a program eager runs. The answer
# becomes a Python constant (or steers the program's control flow), and the constant the compiled function returns
# is the analysis run's: the trace only has to follow the same path. So the trace's run takes each such read's
# answer from the analysis run, in call order, instead of asking its own tensors (which have no_grad histories).
# Reads that raise in the analysis run raise out of it (eager raises there too, under its own grad mode). `._base`
# is not replayed: it answers a tensor of the run, and reads no grad_fn.

# Note [Autograd Reads Of Inputs]
# `a = x.is_leaf` on a plain leaf input that requires grad answered False (the run's x is a functional tensor, not
# the leaf), and `t0 = x.diagonal(); x.mul_(-1); return t0 * 2, x.is_leaf, x.grad_fn is None` under no_grad, x a
# PairTensor non-leaf that requires grad, answered True twice (the run's x is a wrapper rebuilt from its inner
# tensors, a fresh leaf given requires_grad). An input that requires grad stays a leaf or a non-leaf until the
# program detach_()es it: eager refuses writes to a leaf that requires grad with grad on, a write to a non-leaf keeps
# it one, and nothing under no_grad changes its history. So a read of is_leaf on the input object answers the real
# input's is_leaf, and of grad_fn the real input's where that cannot have changed (a leaf: None; run without grad:
# the input's node); a non-leaf written with grad on gets a new node, and the run's own answer (not None) stands. The
# guards check each input's requires_grad and, where it requires grad, is_leaf, so the answers hold for every call
# the entry serves (a node's name() may differ between calls: the program that returns it is out of reach).

_GETTERS = frozenset({"is_leaf", "requires_grad", "grad_fn"})


def is_autograd_read(func: Any) -> bool:
    """Is `func` the getter of one of the autograd attributes replayed (Note [Autograd Reads Replayed In The Trace])?"""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner in _GETTERS and getattr(func, "__name__", "") == "__get__"


def read(record: SwapRecord, func: Any, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """The answer of one autograd read `func(*args)`: the analysis run's where the record replays them, else
    `call()`'s (recorded)."""
    if record.replayed_reads is not None and record.replay_cursor < len(record.replayed_reads):
        answer = record.replayed_reads[record.replay_cursor]
        record.replay_cursor += 1
        return answer
    real = record.eager_inputs.get(id(args[0])) if args else None
    name = getattr(getattr(func, "__self__", None), "__name__", None)
    if real is not None and name == "is_leaf":  # Note [Autograd Reads Of Inputs]
        answer: object = real.is_leaf
    elif real is not None and name == "grad_fn" and (real.is_leaf or not record.grad_at_start):
        answer = real.grad_fn
    else:
        answer = call()
    record.autograd_reads.append(answer)
    return answer


def note_detach(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """`detach_()` makes its tensor a leaf (Note [Autograd Reads Of Inputs])."""
    if func in (torch.Tensor.detach_, torch.detach_) and args:
        record.eager_inputs.pop(id(args[0]), None)
