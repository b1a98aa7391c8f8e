"""Activation checkpointing (torch.utils.checkpoint) while the pipeline runs the user's code.

Input: the user's program, run by the pipeline's stages (observe, functional run, joint trace) inside
`regions_run_inline()`.
Output: each `checkpoint(fn, *args, ...)` call runs `fn(*args)` once, in place, as eager's values and gradients
are; eager-only differences are refused.
Invariants: nothing is patched outside the `with` block; a checkpoint call outside the pipeline's runs is torch's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils.checkpoint as torch_checkpoint

from subclassaot.errors import UnsupportedError

# Note [Checkpointed Regions Run Inline]
# `checkpoint(fn, *args)` computes fn(*args); what it changes is what autograd keeps: eager frees the region's
# activations and the backward recomputes them, restoring the RNG state the forward had (preserve_rng_state=True, the
# default), so the recomputation draws the forward's random numbers (dropout's mask) and leaves the RNG as it was.
# Traced as eager runs it, the recomputation lands in the backward graph as fresh random ops (the RNG state it
# restores is no op of the graph): the backward would draw another mask. So while the pipeline runs the program, a
# checkpointed region runs once, inline: the joint graph saves what the partition decides, the forward draws the
# mask once and the backward uses it, exactly eager's values, gradients and final RNG state. Both variants:
#   * non-reentrant: `context_fn`'s forward context is entered around the region (a selective-checkpoint policy
#     only chooses what is saved, which the partition decides for us); the saved-tensor hooks are not installed;
#   * reentrant: eager runs the region under no_grad inside an autograd.Function whose outputs require grad iff an
#     input does; inline the region runs with grad where an input requires grad, else under no_grad (as eager, a
#     parameter used inside gets no gradient then). An output that eager's Function marks as requiring grad but
#     that does not depend on anything requiring grad inline (eager's backward raises) is refused.
# Refused: preserve_rng_state=False with grad enabled (eager's recomputation draws new numbers at backward time,
# which the compiled backward cannot draw). The patch swaps two module globals of torch.utils.checkpoint, which
# `checkpoint` reads on every call, for the duration of one run; a lock keeps concurrent compiles from nesting it.

_LOCK = threading.RLock()


def _no_random_redraw(preserve_rng_state: bool) -> None:
    if not preserve_rng_state and torch.is_grad_enabled():
        raise UnsupportedError(
            "the program calls torch.utils.checkpoint.checkpoint(..., preserve_rng_state=False): eager's backward "
            "recomputes the region with the RNG state it finds at backward time, so random ops inside it (dropout) "
            "draw other numbers than the forward did; the compiled backward cannot draw them. Pass "
            "preserve_rng_state=True (the default), or call the region without checkpoint"
        )


def _inline_non_reentrant(
    fn: Callable[..., object],
    preserve_rng_state: bool = True,
    context_fn: Callable[[], tuple[contextlib.AbstractContextManager[object], object]] = (
        torch_checkpoint.noop_context_fn
    ),
    *rest: object,
    **kwargs: object,
) -> Iterator[None]:
    _no_random_redraw(preserve_rng_state)
    forward_context, _ = context_fn()
    with forward_context:
        yield


class _InlineReentrant:
    @staticmethod
    def apply(fn: Callable[..., object], preserve_rng_state: bool, *args: object) -> object:
        _no_random_redraw(preserve_rng_state)
        tracks = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        with torch.set_grad_enabled(tracks):
            out = fn(*args)
        flat = out if isinstance(out, tuple) else (out,)
        if tracks and any(isinstance(t, torch.Tensor) and not t.requires_grad for t in flat):
            raise UnsupportedError(
                "the program calls torch.utils.checkpoint.checkpoint(..., use_reentrant=True) on a region with an "
                "output that depends on nothing requiring grad: eager's reentrant checkpoint marks it as requiring "
                "grad and its backward then fails. Detach that output, or use use_reentrant=False"
            )
        return out


@contextlib.contextmanager
def regions_run_inline() -> Iterator[None]:
    """Within: torch.utils.checkpoint's regions run inline (Note [Checkpointed Regions Run Inline])."""
    with _LOCK:
        saved: dict[str, Any] = {
            name: getattr(torch_checkpoint, name)
            for name in ("CheckpointFunction", "_checkpoint_without_reentrant_generator")
        }
        setattr(torch_checkpoint, "CheckpointFunction", _InlineReentrant)  # noqa: B010  # setattr: the module attributes are typed as their originals
        setattr(torch_checkpoint, "_checkpoint_without_reentrant_generator", _inline_non_reentrant)  # noqa: B010
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(torch_checkpoint, name, value)
