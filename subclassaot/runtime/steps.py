"""Epilogue steps around the compiled call that the analysis's rules name: the graph inputs made from the dense
leaves, accumulators held or made before the call, set_() repeated before it, the copy point and inverse view ops
of written subclass views, early view replays and their counters, and which input writes autograd does not see.

Input: the `RuntimePlan`'s analysis and layout, the real inputs of one call. Output: graph inputs, held
accumulators, replayed views, the epilogue's per-entry decisions (`early_grad_sets`, `copy_point`,
`training_roots`). Invariants: imports nothing from the analysis, the tracing or the eager record; the analysis
imports from here where it decides by the same rule (the graph inputs it traces with, the copy points it refuses
without, the set_() it repeats before the call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.autograd.graph import GradientEdge, get_gradient_edge

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.runtime.plan import MetaEvaluator
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    AssignedWrite,
    DenseLayout,
    LeafMutation,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    StorageResize,
    UpdateKind,
    ViewStep,
)
from subclassaot.torch_internals import (
    assign_wrapper_metadata,
    get_version,
    set_version,
    symint_expr,
    wrapper_grad_accumulator,
)

aten = torch.ops.aten


def graph_example_inputs(layout: DenseLayout, dense_values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors standing for each graph placeholder (fake at compile time, real at run time)."""
    out = []
    for item in layout.graph_inputs:
        if isinstance(item, AliasGroupRef):
            group = layout.groups[item.group]
            members = [dense_values[m] for m in group.members]
            # From the members' autograd root (eager's `._base`), so that in training the gradient of the base
            # reaches the whole storage (Note [Aliased Inputs In Training]); offsets are absolute either way. A
            # member that requires grad names it (the first may be a detach() of it, with no history).
            first = next((m for m in members if m.requires_grad), members[0])
            root = first._base if first._base is not None else first
            stored = symint_expr(root.untyped_storage().nbytes() // root.element_size())
            if group.whole_storage and isinstance(stored, int) and stored < group.base_numel:
                # A fake with no elements has no storage: any fresh base of the real size traces the same, since
                # the group holds every input leaf of that storage. At run time the guards check its size.
                out.append(root.new_empty((group.base_numel,)).requires_grad_(root.requires_grad))
                continue
            out.append(root.as_strided((group.base_numel,), (1,), 0))
        else:
            out.append(dense_values[item])
    return out


def hold_accumulators(values: Sequence[object], indices: Sequence[int]) -> list[GradientEdge]:
    """The gradient accumulators of the flat inputs at `indices` (leaves that require grad), made now if none is
    alive: the caller holds them while the epilogue and the output replays run (Note [Gradient Accumulators Of
    Leaves])."""
    held = []
    for i in indices:
        x = values[i]
        if isinstance(x, torch.Tensor) and x.is_leaf and x.requires_grad:
            held.append(get_gradient_edge(x))
    return held


def make_assigned_accumulators(values: Sequence[object], sizes: Sequence[tuple[int, list[int]]]) -> list[GradientEdge]:
    """Note [Gradient Accumulators Of Leaves]: for each (flat input, size), the input's accumulator, made
    at that size if none is alive; the caller holds them until the compiled Function has taken the inputs."""
    held = []
    for i, size in sizes:
        x = values[i]
        if not isinstance(x, torch.Tensor) or not x.is_leaf or not x.requires_grad or list(x.shape) == size:
            continue
        if not is_traceable_subclass(x):  # a plain leaf (Note [Leaves Laid Out Anew Under no_grad])
            before = x.detach()  # shares x's storage, metadata and version counter
            with torch.no_grad():
                x.data = torch.empty((), dtype=x.dtype, device=x.device).expand(size)
            held.append(get_gradient_edge(x))
            with torch.no_grad():
                x.data = before
            continue
        if x.untyped_storage().nbytes() < x.element_size():
            continue  # the shell would move the wrapper to a new storage (an input with no elements: a known gap)
        old = (list(x.shape), list(x.stride()), int(x.storage_offset()))
        assign_wrapper_metadata(x, size, [0] * len(size), 0)
        held.append(wrapper_grad_accumulator(x))
        assign_wrapper_metadata(x, *old)
    return held


def early_grad_sets(analysis: Analysis, layout: DenseLayout) -> tuple[int, ...]:
    """Tensor inputs whose set_() under grad the runtime repeats before the compiled call (Note [set_ Under
    Grad])."""
    after = analysis.read_after_grad_set or (False,) * len(layout.trees)
    return tuple(
        t
        for t, leaves in enumerate(layout.leaves_of_input)
        if after[t]
        and any(analysis.mutations[j].set_under_grad for j in leaves)
        and not (layout.trees[t] is None and analysis.mutations[leaves[0]].set_source is not None)
    )


# out-of-place inverses of the in-place view ops (positional arguments only), applied to the op's result
_UNDO: dict[object, Callable[..., torch.Tensor]] = {
    aten.t_.default: lambda x: x.t(),
    aten.transpose_.default: lambda x, a, b: x.transpose(a, b),
    aten.unsqueeze_.default: lambda x, d: x.squeeze(d),
}


def copy_point(layout: DenseLayout, analysis: Analysis, i: int) -> int | None:
    """For subclass input `i`, a view whose new value comes from the compiled Function and whose in-place view ops
    the epilogue replays: after how many of them the epilogue copies the value in, or None where it cannot be
    eager's (Note [Stale View Functions])."""
    k = analysis.write_steps[i] if analysis.write_steps else None
    steps = analysis.inplace_replay[i]
    grouped = {m for g in layout.groups for m in g.members}
    if k is None or analysis.wrapper_data[i] is not None or any(j in grouped for j in layout.leaves_of_input[i]):
        return None
    if any(step.op not in _UNDO or step.kwargs for step in steps):
        return None
    return k


def undo_steps(
    value: torch.Tensor, steps: Sequence[ViewStep], ev: MetaEvaluator, symbols: dict[str, int]
) -> torch.Tensor:
    """`value`, which has the layout after `steps`, viewed back to the layout before them (out of place, recorded
    by autograd): the inverse of each step, last first."""
    for step in reversed(steps):
        args = ev.arg(step.args, symbols)
        assert isinstance(args, tuple), "BUG: view step arguments are a tuple"
        value = _UNDO[step.op](value, *args)
    return value


def epilogue_write_hidden(m: LeafMutation, kind: UpdateKind) -> bool:
    """The epilogue writes this input's new value (an update of `kind`) under no_grad (see runtime.epilogue_plan.copy_into):
    no gradient flows from the input back into the graph's output for it."""
    if kind is UpdateKind.FINAL and m.assigned_write is AssignedWrite.AFTER:
        return False  # Note [History Kept Through .data =]
    return not m.autograd_visible or m.hidden_from_autograd or m.storage_changed


def bumped_input_sources(infos: Sequence[OutputInfo]) -> tuple[int, ...]:
    """The inputs (flat value indexes) whose counter at entry the runtime keeps for Replay.bump_after."""
    found = {
        info.replay.index
        for info in infos
        if info.replay is not None
        and (info.replay.bump_after or info.replay.entry_counter or info.replay.stale_view)
        and info.replay.source is ReplaySource.INPUT
    }
    return tuple(sorted(found))


def replay_early(
    heads: Sequence[tuple[int, Replay]], values: Sequence[object], make: Callable[[Replay], torch.Tensor]
) -> tuple[dict[int, torch.Tensor], dict[int, int]]:
    """The early replays `heads` (output index, replay), each made by `make`; and, per input of a replay with
    Replay.counter_at_end, the count to give it after the epilogue (Note [Views That Raise After A Bump])."""
    made: dict[int, torch.Tensor] = {}
    at_end: dict[int, int] = {}
    for o, replay in heads:
        source = values[replay.index]
        if not replay.counter_at_end or not isinstance(source, torch.Tensor):
            made[o] = make(replay)
            continue
        came = get_version(source)
        at_end.setdefault(replay.index, came + 1)
        set_version(source, at_end[replay.index])
        made[o] = make(replay)
        set_version(source, came)
    return made, at_end


def settle_early_counters(at_end: dict[int, int], values: Sequence[object]) -> None:
    """After the epilogue: the counts of `replay_early` (Note [Views That Raise After A Bump])."""
    for i, version in at_end.items():
        source = values[i]
        assert isinstance(source, torch.Tensor), "BUG: an early replay of a value that is no tensor"
        set_version(source, version)


def training_roots(analysis: Analysis) -> tuple[Replay, ...]:
    """The distinct intermediate subclass roots the outputs replay from, in output order (Note [Subclass Intermediate
    Roots])."""
    seen: dict[tuple[int, ...], Replay] = {}
    for info in analysis.outputs:
        r = info.replay
        if info.kind is OutputKind.TENSOR and r is not None and r.source is ReplaySource.WRAPPER:
            seen.setdefault(r.root_bases, r)
    return tuple(seen.values())


def grow_storages(
    resizes: Sequence[StorageResize], dense: Sequence[torch.Tensor], ev: MetaEvaluator, symbols: dict[str, int]
) -> None:
    """Before the compiled call: the program's re-allocation of inputs' storages, where they have fewer bytes (Note
    [Storage Swaps By Rebinding])."""
    for r in resizes:
        if r.grow is not None:
            storage = dense[r.leaf].untyped_storage()
            nbytes = ev.dim(r.grow, symbols)
            if storage.nbytes() < nbytes:
                storage.resize_(nbytes)


def settle_storages(
    resizes: Sequence[StorageResize],
    storages: Sequence[torch.UntypedStorage],
    ev: MetaEvaluator,
    symbols: dict[str, int],
) -> None:
    """After the epilogue and the outputs: the program's last storage resize_ of each input's storage as passed (its
    free), `storages[k]` that of `resizes[k]`, taken before the call (a set_() may have moved the input since)."""
    for r, storage in zip(resizes, storages, strict=True):
        nbytes = ev.dim(r.final, symbols)
        if storage.nbytes() != nbytes:
            storage.resize_(nbytes)
