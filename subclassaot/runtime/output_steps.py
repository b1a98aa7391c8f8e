"""Steps of the output rebuild that the analysis's rules name: version counters around replays of bumped views,
leaves set_() onto inputs or onto foreign storages, holders of outputs set_() under grad, and the order outputs
are built in by the object states their view chains pass.

Input: the real inputs, dense leaves and regenerated outputs of one call, and the `OutputInfo`/`Replay` records of
the plan. Output: rebuilt tensors, the build order. Invariants: imports nothing from the analysis, the tracing or
the eager record; the analysis imports the mark tokens from here (`state_token`, `state_of`), so that the marks it
records and the states the runtime reads are one encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.schemas import OutputInfo, Replay, ReplaySource
from subclassaot.torch_internals import get_version, grad_fn_raises, set_to_tensor, set_version


def lower_input_counter(
    replay: Replay, values: Sequence[object], entry: dict[int, int]
) -> tuple[torch.Tensor, int] | None:
    """Before replaying a bump_after view of an input: give the input its counter at entry (the input and the
    counter it has now), where the epilogue moved it and its grad_fn raises since (Replay.entry_counter too), or
    where eager's view is stale at the end (Replay.stale_view: Note [History Kept Through .data =])."""
    if replay.source is not ReplaySource.INPUT or replay.index not in entry:
        return None
    source = values[replay.index]
    assert isinstance(source, torch.Tensor), "BUG: an INPUT replay of a value that is no tensor"
    now = get_version(source)
    if now == entry[replay.index] or not (replay.stale_view or grad_fn_raises(source)):
        return None
    set_version(source, entry[replay.index])
    return source, now


def finish_bumped_view(view: torch.Tensor, lowered: tuple[torch.Tensor, int] | None, *, bump: bool) -> None:
    """After the replay: the input's counter back, then (`bump`) the view's advanced unless reading its grad_fn
    raises already, as eager's does."""
    if lowered is not None:
        set_version(*lowered)
    if bump and not grad_fn_raises(view):
        set_version(view, get_version(view) + 1)


def set_onto_inputs(
    value: torch.Tensor,
    info: OutputInfo,
    dense: Sequence[torch.Tensor],
    metas: Sequence[tuple[list[int], list[int], int]],
    wrapper: torch.Tensor,
) -> None:
    """Note [Outputs Over Another Storage]: each dense leaf of `value` (the Function's output) set_() onto the
    storage of its input with eager's metadata (`metas`, per leaf), under no_grad, its version counter kept; a
    subclass output also takes the wrapper storage of `wrapper`, the input it is a detach() of (as eager's aliasing
    correction gives a view op's output)."""
    leaves = flatten_subclass(value, "out")[1] if info.tree is not None else [value]
    for t, leaf, (size, stride, offset) in zip(leaves, info.leaves, metas, strict=True):
        assert leaf.onto_input is not None, "BUG: a detached output leaf names no input"
        version = get_version(t)
        with torch.no_grad():
            set_to_tensor(t, dense[leaf.onto_input].detach().as_strided(size, stride, offset))
        set_version(t, version)
    if info.tree is not None:
        torch._functionalize_unsafe_set(value, wrapper)  # the storage only: no dispatch, no autograd record


def input_root(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose views share `t`'s autograd base: `t._base`, or `t` itself where it is no view (Note [Outputs
    Over Another Storage])."""
    return t._base if t._base is not None else t


def view_onto(
    root: torch.Tensor,
    storage: torch.Tensor,
    size: Sequence[int],
    stride: Sequence[int],
    offset: int,
    grad: bool = False,
) -> torch.Tensor:
    """A view of `root` that lives on `storage`'s storage with this size, stride and offset (Note [Outputs Over Another
    Storage]). `grad`: made and set_() with grad on, as the program did (Note [set_ Under
    Grad]); otherwise without (eager's view does not require grad: foreign_root)."""
    version = get_version(root)
    if grad and torch.is_grad_enabled():
        # eager's set_ node has an edge to the source's history: a gradient of the source waits behind it
        view = root.as_strided((0,), (1,), root.storage_offset())
        set_to_tensor(view, storage.as_strided(size, stride, offset))
    else:
        with torch.no_grad():
            view = root.as_strided((0,), (1,), root.storage_offset())
            view.set_(storage.untyped_storage(), offset, list(size), list(stride))
    set_version(view, version)
    return view


def set_under_grad_holder(
    value: torch.Tensor,
    found: tuple[torch.Tensor, bool] | None,
    *,
    view: bool,
    viewed_after: bool,
    blocked: Sequence[object] = (),
) -> torch.Tensor:
    """`value` rebuilt as eager's output set_() under grad (Note [Outputs set_() Under Grad]). `found`: where eager's
    output is a view, the value of its `._base` and whether that is eager's base object itself (Note [Outputs set_()
    Under Grad]). `view`: the output was a view when set_(); `viewed_after`: it is a view taken of
    the tensor set_() (eager's base) after the set_. `blocked`: the inputs eager's set_ node stands in front of
    (Note [Outputs set_() Under Grad])."""
    root = None if found is None else found[0]
    if found is not None and found[1]:
        holder = found[0].view(found[0].shape)  # other outputs view that base too: one object, as in eager
        set_to_tensor(holder, value)
        return holder
    src = value if root is None else root
    if is_traceable_subclass(src):
        # a holder of the output's own class: a clone of a detached alias (Note [Outputs set_() Under Grad])
        holder = blocking_holder(src.detach().requires_grad_(), blocked)
    else:
        holder = blocking_holder(torch.empty(0, dtype=src.dtype, device=src.device, requires_grad=True), blocked)
    if root is not None:
        set_to_tensor(holder, root.detach())  # eager's base, set_() under grad
        if viewed_after:
            return holder.as_strided(value.shape, value.stride(), value.storage_offset())
        holder = holder.view(holder.shape)
    elif view:
        holder = holder.view(holder.shape)
    set_to_tensor(holder, value)
    return holder


class _Blocked(torch.autograd.Function):
    """A clone of `base` whose node has an edge to each of `blocked` (Note [Outputs set_() Under Grad])."""

    @staticmethod
    def forward(ctx: Any, base: torch.Tensor, *blocked: torch.Tensor) -> torch.Tensor:
        return base.clone()

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[None, ...]:
        raise AssertionError("BUG: the node behind a raising set_ node ran (Note [Outputs set_() Under Grad])")


def blocking_holder(base: torch.Tensor, blocked: Sequence[object]) -> torch.Tensor:
    """A clone of `base` (which requires grad), behind which the backward reaches each of `blocked` that requires
    grad (Note [Outputs set_() Under Grad])."""
    inputs = [b for b in blocked if isinstance(b, torch.Tensor) and b.requires_grad]
    if not inputs:
        return base.clone()
    return cast(torch.Tensor, _Blocked.apply(base, *inputs))  # type: ignore[no-untyped-call]  # untyped in torch


MARK_STATES = 64  # in-place view ops per object a chain may pass it after


def state_token(t: int, state: int) -> int:
    """The mark token of object `t` (its id) in state `state` (Note [Output
    Regeneration]): the id itself in state 0, else a negative number that is never an id."""
    return t if state == 0 else ~(t * MARK_STATES + state)


def state_of(token: int) -> tuple[int, int]:
    """(the object's token in state 0, the state) of a mark's token."""
    return (token, 0) if token >= 0 else divmod(~token, MARK_STATES)


def use_only_tokens(marks: Sequence[tuple[int, int]]) -> set[int]:
    """The tokens of states the chain then changes by in-place view ops: read, never handed out."""
    return {t for (_, t), (_, u) in zip(marks, marks[1:], strict=False) if u < 0 and state_of(u)[0] == state_of(t)[0]}


def _max_state(marks: Sequence[tuple[int, int]]) -> int:
    return max((state_of(t)[1] for _, t in marks), default=0)


def _set_bumps(replay: Replay | None) -> bool:
    return replay is not None and replay.then_set and not replay.runtime_set and not replay.set_by_data


def _inplace_view_bumps(replay: Replay | None) -> bool:
    """Does the chain repeat an in-place view op (t_, transpose_, ...)? Each bumps the version of the storage's
    views, under no_grad too."""
    return replay is not None and any(torch.Tag.inplace_view in step.op.tags for step in replay.steps)


def build_order(infos: Sequence[OutputInfo]) -> list[int]:
    """Outputs in the order of the object states their chains pass through, then output order (or, where an output
    repeats a set_() or an in-place view op, program order: Note [Views That Raise After A Bump])."""
    by_program = any(_set_bumps(info.replay) or _inplace_view_bumps(info.replay) for info in infos)

    def key(o: int) -> tuple[int, int]:
        replay = infos[o].replay
        if replay is None:
            return (0, 0)
        return (_max_state(replay.marks), replay.made if by_program and not replay.before_epilogue else 0)

    return sorted(range(len(infos)), key=key)


def state_reached(base: torch.Tensor, shared: dict[int, torch.Tensor]) -> int:
    """How many of its in-place view ops a chain applied to `base` already (a memo object in a later state)."""
    return max((state_of(t)[1] for t, v in shared.items() if t < 0 and v is base), default=0)
