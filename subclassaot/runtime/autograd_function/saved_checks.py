"""Stage `runtime` (training), saved tensors eager's backward checks (backward_probe's comment on saved tensors):
per compile, which tensors' version counters the Function notes after the call and which of them a caller's write
makes its backward raise as eager's does; per call, the counters read and the saved tensors checked.

Input: the `RuntimePlan`, its `BackwardPlan` and the probe's `EagerSaves`.
Output: the per-compile checks (`_saved_checks`), and at run time the counters noted (`_note_counters`) and eager's
error where a saved tensor was written since (`_check_saved_tensors`).
Invariants: reads counters only; a tensor is matched by the counter it uses; nothing here keeps a tensor alive
(weak references, `_Held`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.runtime.plan import (
    BackwardPlan,
    EagerSave,
    EagerSaves,
    RuntimePlan,
)
from subclassaot.runtime.steps import (
    epilogue_write_hidden,
    training_roots,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    FlatInputs,
    LeafSource,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    UpdateKind,
)
from subclassaot.torch_internals import (
    get_version,
    grad_fn_raises,
)


def _through(
    plan: RuntimePlan,
    outputs: frozenset[int],
    fresh: tuple[int, ...],
    n_wrappers: int,
    new_values: Mapping[int, tuple[int, ...]],
) -> tuple[int, ...]:
    """The Function outputs the tangents of `outputs` come in through: a fresh output's own; an intermediate base's
    own (an output that is one, of `_intermediate_base_of`); a view's, the base it is replayed from (an intermediate base, the rebuilt subclass root, which the Function returns after the `n_wrappers`
    wrapper updates, or an earlier output's); an input's or a view of one's, the input's new value where the program
    wrote it (`new_values`, of `_new_values`)."""
    analysis, n_updates = plan.analysis, len(plan.graph_outputs.updates)
    roots = [r.root_bases for r in training_roots(analysis)]
    roots_at = n_updates + len(fresh) + plan.graph_outputs.num_bases + n_wrappers
    found: set[int] = set()
    todo, seen = sorted(outputs), set()
    while todo:
        o = todo.pop()
        if o in seen:
            continue
        seen.add(o)
        info = analysis.outputs[o]
        replay = info.replay
        if o in fresh:
            found.add(n_updates + fresh.index(o))
        elif info.kind is OutputKind.IS_INPUT and info.input_index is not None:
            found.update(new_values.get(info.input_index, ()))
        elif info.kind is OutputKind.SAME_AS and info.input_index is not None:
            todo.append(info.input_index)
        elif replay is not None and replay.source is ReplaySource.INPUT:
            found.update(new_values.get(replay.index, ()))
        elif replay is not None and replay.source is ReplaySource.BASE:
            found.add(n_updates + len(fresh) + replay.index)
        elif replay is None and (base := _intermediate_base_of(info)) is not None:
            found.add(n_updates + len(fresh) + base)
        elif replay is not None and replay.source is ReplaySource.WRAPPER:
            found.add(roots_at + roots.index(replay.root_bases))
        elif replay is not None and replay.source is ReplaySource.OUTPUT:
            todo.append(replay.index)
    return tuple(sorted(found))


def _held_at(save: EagerSave, flat: FlatInputs, new_values: Mapping[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The Function outputs carrying the new values of the inputs whose history eager's backward runs the saving
    node through (`EagerSave.held`)."""
    return tuple(sorted({k for p in save.held for k in new_values.get(flat.tensor_indices[p], ())}))


def _new_values(plan: RuntimePlan, bw_meta: BackwardPlan, fresh: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    """Tensor input (InputIndex) -> the Function outputs that carry the program's new value of it: its leaves'
    updates, its alias group's new base, its new wrapper (Note [Inputs Written In Training])."""
    layout, updates, mutations = plan.layout, plan.graph_outputs.updates, plan.analysis.mutations
    # (a member copied in with grad from a FINAL update of its own takes its history there, whatever its base holds)
    own = {
        u.target
        for u in updates
        if u.kind is UpdateKind.FINAL and not epilogue_write_hidden(mutations[u.target], u.kind)
    }
    found: dict[int, list[int]] = {}
    for k, u in enumerate(updates):
        item = layout.graph_inputs[u.target] if u.kind is UpdateKind.BASE else u.target
        members: Sequence[int] = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
        for j in members if u.kind is not UpdateKind.BASE else [m for m in members if m not in own]:
            found.setdefault(layout.leaves[j].owner, []).append(k)
    wrappers_at = len(updates) + len(fresh) + plan.graph_outputs.num_bases
    for n, t in enumerate(bw_meta.wrapper_updates):
        found.setdefault(plan.flat.tensor_indices[t], []).append(wrappers_at + n)
    return {i: tuple(ks) for i, ks in found.items()}


class _Held:
    """A strong reference with weakref.ref's call."""

    __slots__ = ("t",)

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def __call__(self) -> torch.Tensor:
        return self.t


def _checked_ref(
    tensors: Sequence[torch.Tensor], user: Sequence[torch.Tensor], out: int | None, inp: int | None
) -> Callable[[], torch.Tensor | None]:
    """A Function output by weak reference, an input by a strong one (`_hold_checked`); a program output built
    outside the Function, none yet (`_note_counters` binds it)."""
    if out is not None:
        return weakref.ref(tensors[out])
    if inp is not None:
        return _Held(user[inp])
    return _unbound


def _unbound() -> None:
    return None


def _hold_remade(ctx: Any, user: Sequence[torch.Tensor], noted: list[Any]) -> None:
    """Where the backward may raise the program's error: the autograd leaves behind the Function's inputs that are
    views of them, whose counters `_note_counters` reads once the call has written its inputs (`_remade_leaves`)."""
    ctx.remade_refs = [
        (p, weakref.ref(t._base))
        for p, t in enumerate(user)
        if t.requires_grad
        and not grad_fn_raises(t)
        and (base := t._base) is not None
        and base.is_leaf
        and base.requires_grad
    ]
    ctx.remade = ()
    if ctx.remade_refs:
        noted.append(ctx)


def _note_counters(noted: list[Any], outputs: Sequence[object] = ()) -> None:
    """The counters of the tensors eager's backward checks, as the call leaves them (backward_probe.eager_saves),
    and those of the leaves behind the inputs output views are replayed from (`_written_view_leaves`). `outputs`:
    the program's outputs as built (OutputIndex), of which those built outside the Function are bound here, by weak
    reference as the Function's own outputs are (`_saved_checks`)."""
    for ctx in noted:
        if ctx.step.checks:
            for k, (_, _, late, _, _, _) in enumerate(ctx.step.checks):
                if late is not None and isinstance(t := outputs[late] if late < len(outputs) else None, torch.Tensor):
                    ctx.checks[k] = (weakref.ref(t), *ctx.checks[k][1:])
            ctx.checked = [get_version(t) if (t := ref()) is not None else 0 for ref, _, _, _ in ctx.checks]
            ctx.viewed = [(i, ref, get_version(leaf)) for i, ref in ctx.viewed_refs if (leaf := ref()) is not None]
        ctx.remade = [(p, ref, get_version(leaf)) for p, ref in ctx.remade_refs if (leaf := ref()) is not None]
        ctx.unprobed = [(i, t, get_version(t)) for i, t in getattr(ctx, "unprobed_refs", ())]
        ctx.unprobed_outputs = [
            (k, ref, get_version(t)) for k, ref in getattr(ctx, "unprobed_output_refs", ()) if (t := ref()) is not None
        ]


def _saved_checks(
    plan: RuntimePlan,
    bw_meta: BackwardPlan,
    eager_saves: EagerSaves,
    fresh_outputs: tuple[int, ...],
    roots: tuple[Replay, ...],
) -> tuple[tuple[int | None, int | None, int | None, tuple[int, ...], tuple[bool, bool], str | None], ...]:
    """The tensors whose counters eager's backward checks (backward_probe.eager_saves): (Function output or None,
    tensor input or None, or the program output built outside the Function whose counter it uses (an alias of an
    input with a counter of its own: `t0.data = x0`), bound once the outputs are built (`_note_counters`), the
    Function outputs a tangent of an output whose backward runs the saving node comes
    through, whether eager may give a leaf its gradient before that node raises and whether it may where the caller
    wrote an output view of an input too, eager's error at unpacking a view)."""
    counter_of = _counter_holders(plan, bw_meta, fresh_outputs, roots)
    new_values = _new_values(plan, bw_meta, fresh_outputs)
    n_wrappers = len(bw_meta.wrapper_updates)
    sharers = _detached_sharers(plan)
    return tuple(
        (
            None if output is None else counter_of.get(output),
            inp,
            output if output is not None and output not in counter_of else None,
            at,
            (e.graded_first, e.graded_after_view_writes),
            e.view_error,
        )
        for e in eager_saves.saves
        if (at := _through(plan, e.outputs, fresh_outputs, n_wrappers, new_values) + _held_at(e, plan.flat, new_values))
        for output, inp in _sharing_counter(e, sharers)
    )


def _detached_sharers(plan: RuntimePlan) -> dict[int, tuple[int, ...]]:
    """Tensor input (position among the tensor inputs) -> the program outputs that are a detach() of it written
    with grad: eager's share its version counter, the compiled ones, set_() onto its storage, keep their own (Note
    [Outputs Over Another Storage])."""
    found: dict[int, list[int]] = {}
    for o, info in enumerate(plan.analysis.outputs):
        onto = info.leaves[0].onto_input if info.leaves else None
        if onto is None:
            continue
        for position, dense in enumerate(plan.layout.leaves_of_input):
            if onto in dense:
                found.setdefault(position, []).append(o)
    return {position: tuple(outputs) for position, outputs in found.items()}


def _sharing_counter(e: EagerSave, sharers: Mapping[int, tuple[int, ...]]) -> list[tuple[int | None, int | None]]:
    """The (program output, tensor input) pairs whose counter eager's saved tensor `e` uses: its own, and where that
    is an input's, each output eager made a detach() of it that shares it; where that is such an output's, the
    input too (Note [Outputs Over Another Storage])."""
    pairs: list[tuple[int | None, int | None]] = [(e.output, e.input)]
    if e.input is not None:
        pairs += [(o, None) for o in sharers.get(e.input, ())]
    elif e.output is not None:
        pairs += [(None, i) for i, outputs in sharers.items() if e.output in outputs]
    return pairs


def _viewed_inputs(analysis: Analysis) -> tuple[int, ...]:
    """The inputs (InputIndex) output views are replayed from, outside the Function."""
    replays = [info.replay for info in analysis.outputs if info.replay is not None]
    return tuple(sorted({r.index for r in replays if r.source is ReplaySource.INPUT}))


def _counter_holders(
    plan: RuntimePlan, bw_meta: BackwardPlan, fresh: tuple[int, ...], roots: tuple[Replay, ...]
) -> dict[int, int]:
    """Program output -> the Function output whose version counter it uses: its own, where it is fresh; the
    intermediate base it is or is a view of (an output other outputs share a base with: `t0, t1 = x.sort(0)` returning
    t1 and a view of it), or the subclass root it is a view of (Note [Output Regeneration]). Views of inputs
    have none."""
    n_updates, n_bases = len(plan.graph_outputs.updates), plan.graph_outputs.num_bases
    roots_at = n_updates + len(fresh) + n_bases + len(bw_meta.wrapper_updates)
    root_of = {r.root_bases: roots_at + k for k, r in enumerate(roots)}
    found: dict[int, int] = {}
    for o in range(len(plan.analysis.outputs)):
        source, replay = o, plan.analysis.outputs[o].replay
        while source not in fresh and replay is not None and replay.source is ReplaySource.OUTPUT:
            source, replay = replay.index, plan.analysis.outputs[replay.index].replay
        base = _intermediate_base_of(plan.analysis.outputs[source]) if replay is None else None
        if source in fresh:
            found[o] = n_updates + fresh.index(source)
        elif base is not None:
            found[o] = n_updates + len(fresh) + base
        elif replay is not None and replay.source is ReplaySource.BASE:
            found[o] = n_updates + len(fresh) + replay.index
        elif replay is not None and replay.source is ReplaySource.WRAPPER and replay.root_bases in root_of:
            found[o] = root_of[replay.root_bases]
    return found


def _intermediate_base_of(info: OutputInfo) -> int | None:
    """The base number of the intermediate base a plain output is (the very object) or is a view of, rebuilt over it
    so that it uses the base's version counter; None for any other output (an alias with a counter of its own)."""
    if info.kind is not OutputKind.TENSOR or info.tree is not None or len(info.leaves) != 1:
        return None
    leaf = info.leaves[0]
    if leaf.source is not LeafSource.INTERMEDIATE_ALIAS or leaf.hidden_base is not None or leaf.foreign_base:
        return None
    if not (leaf.is_view or leaf.same_object):
        return None
    return leaf.index


def _check_saved_tensors(
    checks: Sequence[tuple[Callable[[], torch.Tensor | None], tuple[int, ...], tuple[bool, bool], str | None]],
    versions: Sequence[int],
    grads: Sequence[torch.Tensor | None],
    written_views: Sequence[str],
) -> None:
    """Raise eager's error where a tensor eager's backward would unpack was written since the call (the saved
    tensors of backward_probe.eager_saves), if a tangent reached an output whose backward runs the node saving it;
    refuse where eager's engine may give some leaf its gradient before that node raises (EagerSave.graded_first, or
    EagerSave.graded_after_view_writes where the leaves at `written_views` had an output view written:
    `_written_view_leaves`)."""
    for (ref, positions, (graded_first, after_view_writes), view_error), version in zip(checks, versions, strict=True):
        t = ref()
        if t is None or not any(grads[k] is not None for k in positions) or get_version(t) <= version:
            continue
        error = view_error or (
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{type(t).__name__} {list(t.shape)}] is at version {get_version(t)}; expected version {version} "
            "instead (a tensor eager's autograd saved, written after the compiled call)"
        )
        if written_views and after_view_writes:
            raise UnsupportedError(
                f"the program's backward fails in eager ({error}), and an output view of {', '.join(written_views)} "
                "was written after the call: eager's engine runs that view's node, made again at the backward's "
                "read, first, and may give the leaf its gradient before the node that saved the written tensor "
                "raises, where the compiled backward raises before any gradient (backward_probe's comment on saved "
                "tensors). Do not write the program's outputs or inputs in place between the call and backward"
            )
        if graded_first:
            raise UnsupportedError(
                f"the program's backward fails in eager ({error}), and eager's engine may first give some leaf "
                "input its gradient (it runs the nodes made after the one that saved that tensor first), where the "
                "compiled backward computes every gradient in one node (backward_probe's comment on saved "
                "tensors). Do not write the program's outputs or inputs in place between the call and backward"
            )
        raise RuntimeError(error)
