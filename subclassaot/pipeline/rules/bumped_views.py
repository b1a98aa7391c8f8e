"""Outputs that view an intermediate (or an input) the program wrote after taking them (Note [Views That
Raise After A Bump]).

Input: the analysis's output infos and the eager objects they describe. Output: nothing, or UnsupportedError.
Invariants: an output whose Replay has bump_after shares its intermediate's storage only with outputs that have it
too, so the runtime's version-counter bump reaches no output whose eager grad_fn reads fine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.chain_facts import requires_grad_as_eager
from subclassaot.schemas import InputIndex, OutputInfo, OutputKind, Replay, ReplaySource
from subclassaot.torch_internals import (
    grad_fn_raises,
    is_plain_autograd_view,
    storage_key,
)

# Note [Views That Raise After A Bump]
# Eager: a view made under no_grad, or one of the views a multi-output op made (unbind, split, chunk), raises on grad_fn
# and is_leaf once the version counter it shares with its base moved after it was made (a write with grad to the base,
# or any write where the view's base requires grad); one made after the last bump reads fine. A replayed output's
# counter is the runtime's, so each view is made where its counter says what eager's says:
# - Which bumps count: only writes to inputs' storages (each dense leaf's as received and as left, and a wrapper's own);
#   a write to an intermediate of its own storage moves no counter an input's view shares. A view refreshed by its own
#   in-place view op takes that bump as its own (`inplace_view_bumps`).
# - Before or after the epilogue: an output view of an input replayed before the epilogue raises as eager's made before
#   the program's last write; one replayed after reads fine. A view taken before an in-place view op changed the input
#   is replayed before the epilogue, though eager's may have been made after the bump: a plain no_grad view is then taken
#   after the epilogue by as_strided() of the input under no_grad; otherwise the chain is split as eager ran it, steps
#   before the last bump replayed before the epilogue and trailing views after it (Replay.late_steps). A chain through a
#   detach() replays whole after the epilogue (Note [Output Regeneration]).
# - Early views made after the last write: a view the runtime must make before the epilogue (a `.data =` moved the input
#   off the view's storage) but that eager made after the program's last write is made at the input's counter plus one;
#   the input gets its own counter back for the epilogue, and the advanced count again after it (Replay.counter_at_end).
#   Only for plain views whose steps all ran under no_grad and change no metadata in place.
# - Views of intermediates written after: the graph computes the intermediate with the write already in it, so the view
#   replayed from it (source BASE, WRAPPER, or OUTPUT) reads fine; the runtime advances its counter by one
#   (Replay.bump_after), so it raises as eager's. Likewise a view of an input replayed after the epilogue (source INPUT),
#   which keeps the input's counter changed (Note [Input Updates]); where the input is itself a view whose
#   grad_fn raises once its counter moves, it gets its entry counter back for the replay. A then_set (a set_() of such a
#   view) is that write too. A program under no_grad gets the same for no_grad views of inputs requiring grad. Another
#   no_grad or multi-output output view sharing the storage would see the bump too: refused unless it raises as well.
# - Views of a detach that gained grad (`t = x.detach(); t.copy_(x)` with grad): a no_grad view of t requires grad with
#   no grad_fn, so the runtime calls requires_grad_() on the replayed `._base` (a leaf no gradient reaches); after the
#   outputs are built where the view replays after the epilogue, as views taken from it before the write must not raise.
#   A view taken before the write raises by the epilogue's write, or by bump_after. Views of t with history are refused.
# - Outputs built after a runtime set_: where an output repeats the program's set_() (Replay.then_set) after the
#   epilogue, it advances the counter other views share; so outputs built after the epilogue are built in the program's
#   order (Replay.made), each seeing the counter eager's saw. Without such an output, the output order stands. An
#   output whose chain repeats an in-place view op (t_, transpose_) advances the counter too, under no_grad as well:
#   the same order (`t0 = x.unsqueeze(2); t0.transpose_(3, 1); return x.unbind(2)[0], t0`: an unbind() output built
#   first raised at its grad_fn).
# - Multi-output view inputs: a subclass input that is one of a multi-output op's views is rebuilt in the trace as a
#   wrapper of its own, so eager's check at a read with grad after a write through another view of the base does not
#   happen there: refused where the program writes the base through another input and reads this one with grad; an
#   output made by such an op from an input is refused where the program advances the shared base's counter through
#   another input, unless rebuilt before the epilogue or taken after that last write (Replay.split_made).
# - Whether a view requires grad (and so can raise) is eager's, not the run's: a view requires grad as the root of its
#   storage does, but inputs sharing a storage run as views of a synthetic base that never requires grad, so a view of
#   the input eager passed as that root, which gained requires_grad in the program, does not require grad in the run
#   (`chain_facts.requires_grad_as_eager` answers as eager); nor does its grad_fn raise there, so an early replay of it
#   is made at the counter it came with, not the advanced one.


def check_bumped_views(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> None:
    """See Note [Views That Raise After A Bump]."""
    owned: list[set[object]] = []
    for info, value in zip(infos, leaves, strict=True):
        # (an output that is no view, or a view of the default kind, reads its grad_fn whatever its counter)
        if (
            info.kind is not OutputKind.TENSOR
            or not isinstance(value, torch.Tensor)
            or not value._is_view()
            or is_plain_autograd_view(value)
        ):
            owned.append(set())
            continue
        owned.append({storage_key(d) for d in dense_leaves_of(value, info.path)[1]})
    for k, info in enumerate(infos):
        if info.replay is None or not info.replay.bump_after:
            continue
        for j, other in enumerate(infos):
            bumped = other.replay is not None and other.replay.bump_after
            if j != k and owned[j] & owned[k] and not bumped and other.kind is not OutputKind.SAME_AS:
                raise UnsupportedError(
                    f"{info.path} and {other.path} are views (made under no_grad, or by a multi-output op) of one "
                    f"tensor the program wrote between taking them: eager's {info.path} raises when its grad_fn is "
                    f"read, {other.path} does not, which compiled outputs sharing a version counter cannot be. Return "
                    f"a clone of {info.path} made before the write"
                )


def counter_at_end(
    replay: Replay, value: torch.Tensor, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> Replay:
    """`replay`, an early replay of `value`, marked Replay.counter_at_end where Note [Views That Raise After A
    Bump] applies."""
    sources = [t for t in run.user_tensors if input_by_id.get(id(t)) == replay.index]
    if (
        replay.source is not ReplaySource.INPUT
        or replay.late_steps
        or not sources
        or is_traceable_subclass(value)
        or is_traceable_subclass(sources[0])
        or not value._is_view()
        or is_plain_autograd_view(value)
        or grad_fn_raises(value)
        or _raises_in_eager(value, sources[0], replay, run)
        or not run.swaps.bumps(sources[0])
        or any(s.grad_enabled or s.own_version or torch.Tag.inplace_view in s.op.tags for s in replay.steps)
    ):
        return replay
    return replace(replay, counter_at_end=True)


def _raises_in_eager(value: torch.Tensor, source: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """Eager's `value` requires grad where the run's does not (requires_grad_as_eager), and the program wrote
    its input after making it: eager's grad_fn raises, whatever the run's answers."""
    if value.requires_grad or not requires_grad_as_eager(value, source, replay.steps, run):
        return False
    return run.swaps.last_bump.get(storage_key(source), 0) > replay.made
