"""Outputs that view an intermediate (or an input) the program wrote after taking them (Note [Views Of
Intermediates Written After]).

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

# Note [Views Of Intermediates Written After]
# A view the program took of an intermediate under no_grad, or by a multi-output op (unbind), and whose base it then
# wrote with grad enabled, has a grad_fn that raises in eager: autograd refuses to rebase its history. The graph
# computes the intermediate with the write already in it, so the view replayed from it (Replay source BASE, or
# WRAPPER for a subclass) is made by the same ops in the same grad modes, hence with the same creation meta, but
# reads fine. The runtime then advances the view's version counter by one (Replay.bump_after), which the view
# shares with its base: the counter no longer matches the one recorded when the view was made, and reading its
# grad_fn or is_leaf raises the same error as eager's (fuzz seed 10000 #7533, #1981). The view may replay from an
# earlier output that is the intermediate itself (Replay source OUTPUT: seed 11000 #5304), whose counter eager's
# write advanced too; a tensor that is no view reads its grad_fn the same whatever its counter, and a view of the
# default kind rebuilds its grad_fn over its base's history as it stands (eager's does after any write to the base:
# fuzz seed 10000 #9450, a reshape() of the input beside the raising view). Likewise a view of an input replayed
# after the epilogue (source INPUT: seed 10000 #2418, #1602): the write or set_() that makes eager's raise advanced
# the input's counter in eager, and the extra step of ours keeps it changed, which is what is observable of an
# input's counter (Note [Parity Of Version Counters]). Where the input is itself a view whose grad_fn raises once its
# counter moves (an unbind() output the program wrote: fuzz seed 11000 #6991), the replay's first view, taken with
# grad enabled, would raise: the runtime gives the input back the counter it came with for the replay, as eager's
# view was taken before the write, then restores it, and only advances the view's if it does not raise already.
# The set_() of such a view (Replay.then_set) is that write too: it advances the counter the view shares with the
# input before the runtime's set_() repeats it (fuzz seed 15000 #6332). A program run under no_grad writes no base
# with grad enabled, but a view it made under no_grad of an input that requires grad raises all the same once the
# base's counter moved: where its replay reads fine, the runtime advances its counter too (`x0.data = x1; t0 =
# x0[:, 0:2]; t0.mul_(-1.0); return t0`, x0 a non-leaf: t0 is replayed after the epilogue, which repeats the
# `.data =`; fuzz seed 16000 #6616 under no_grad). Nothing is refused there that was not before.
# Another output that is a no_grad or multi-output view
# sharing that storage would see the bump too, where eager's may have been made after the write and read fine:
# refused unless its grad_fn raises as well.


def check_bumped_views(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> None:
    """See Note [Views Of Intermediates Written After]."""
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


# Note [Early Views Made After The Last Write]
# An output view of an input that the runtime makes before the epilogue (Replay.before_epilogue: a `.data =` moved
# the input off the storage the view was taken of, so only the input as it came gives the view eager's `._base`) is
# made at the counter the input came with, which the epilogue's writes then advance: a view made under no_grad
# whose base's counter moved since raises on grad_fn and is_leaf. Eager's may read fine: taken after the program's
# last write to the input, and before the `.data =`, which leaves the counter alone (fuzz seed 43000 #2024, under
# no_grad: `x0.add_(2.0); t0 = x1.expand(...); x0.data = x0.add(3.0)`, x0 and x1 one non-leaf). So where eager's
# reads fine and the program advanced the input's counter (Replay.counter_at_end), the runtime makes the view with
# the input's counter one past the one it came with, gives the input back the one it came with for the epilogue,
# and after the epilogue (before any other output is made) sets that advanced count again: the input ends
# advanced, as eager's (Note [Parity Of Version Counters]), at the count the view was made at. Early views made at
# the counter the input came with still raise, as eager's taken before a write do. Only for plain views whose steps
# all ran under no_grad and change no metadata in place: their grad_fn is None whatever history the input had when
# they were made, so making them before the epilogue's writes loses nothing else.


def counter_at_end(
    replay: Replay, value: torch.Tensor, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> Replay:
    """`replay`, an early replay of `value`, marked Replay.counter_at_end where Note [Early Views Made After The
    Last Write] applies."""
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
