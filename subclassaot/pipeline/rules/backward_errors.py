"""Backward errors and lost gradients in training: eager backward errors raised only by nodes the compiled program
shares, deferred errors (views of leaf inputs replayed before the compiled call), written view inputs whose history
loses gradients, and leaves whose gradient a raising set_() node blocks. Each part below keeps its own contract.

Part of stage `trace` (training): eager backward errors raised only by nodes the compiled program shares.

Input: a `JointSetup` of a program that assigned `.data` and whose traced backward ran.
Output: `raises_outside_program(setup)`: whether every backward of eager's that fails, through any set of the
program's outputs, fails at a node the compiled program keeps as eager's (Note [Probing Eager's Backward]).
Invariants: runs the probe of Note [Probing Eager's Backward] (static fakes; no real tensor read, no guard added).

Part: Stage `trace` (training), deferred backward errors: views of leaf inputs replayed before the compiled call, so
that autograd runs their nodes after the Function's, as eager ran them after the failing node (Note [Backward Errors
Are Deferred]).

Input: the `Analysis`, `FlatInputs` and `DenseLayout`, and the outputs that bypass the Function to a leaf input
(`TangentPatterns.leaf_bypass`).
Output: those views, where each of those outputs is such a view or such a leaf returned as itself that the Function
takes attached (else None); the analysis with their replays made early.
Invariants: only outputs whose source input the program leaves untouched: replayed before or after the epilogue,
they are the same views of the same tensor.

Part: Part of stage `trace` (training): refuse a written view input whose own autograd history loses the gradient of
elements it reaches (Note [as_strided On Inputs]).

Input: `FlatInputs` (the real values of this call), `DenseLayout`, `Analysis` (`written_escaping_views`: those
inputs); then the inputs whose value from before the call the traced graph gives a gradient (None: not known).
Output: None, or an UnsupportedError naming the input.
Invariants: reads the real inputs' autograd graphs only (autograd.grad to their bases: nothing accumulates).

Part: Stage `analyze` (training) and the runtime's output rebuild: input leaves whose gradient eager never
accumulates because a raising node of an output set_() under grad stands between them and the loss.

Input: an output set_() under grad and the functional run's user tensors (analyze); the holder the runtime rebuilds
that output from and the real inputs (runtime). Output: which inputs are behind the output's raising node
(`inputs_behind_raising_nodes`; those behind an input's set_ node: `input_set_blocks`; those behind the raising node of
an input's write after `.data =`, read from eager's graph on static fakes: `raising_write_blocks`) and the refusal of
the rest (`check_set_under_grad`); runtime/steps.py's `blocking_holder` makes a holder whose history reaches those
inputs. Invariants: the analysis only reads autograd graphs; the runtime's node never runs its backward (the set_ or
write node in front of it raises first).

Part: Stage `trace` (training), deferred backward errors: the intermediate bases and subclass roots no backward
reaches, every output over them a view taken of them under no_grad (Note [Backward Errors Are Deferred]).

Input: the `Analysis`. Output: `behind_no_grad_views`, those bases' numbers and those roots.
Invariants: reads the outputs' replays only.

Part: Stage `trace` (training), deferred backward errors: a traced backward that reaches a set_() node where eager's
backward through every output, probed, completes (Note [set_ Under Grad]).

Input: the `JointSetup`, the probe's `TangentPatterns` and the traced backward's error. Output: None, or an
UnsupportedError. Invariants: reads the patterns and the analysis only.

Part: Stage `trace` (training), deferred backward errors: refuse a view of a leaf returned as itself, written without
grad, whose history the caller rebuilds after the Function's node (`refuse_returned_view_behind_raise`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence, Set
from typing import Any, cast

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import (
    MAX_PROBED_OUTPUTS,
    SHAPE_CHECK_ERROR,
    BackwardEnd,
    _trial,
    cut_by_no_grad,
    eager_run,
    probe_eager_backward,
)
from subclassaot.pipeline.joint import JointSetup
from subclassaot.pipeline.rules.set_under_grad import through_function
from subclassaot.schemas import (
    Analysis,
    AssignedWrite,
    DenseLayout,
    FlatInputs,
    InputIndex,
    LeafMutation,
    LeafSource,
    OutputInfo,
    OutputKind,
    ReplaySource,
)
from subclassaot.torch_internals import autograd_nodes, grad_fn_or_none

_ROOT_INDEX = re.compile(r"^invalid gradient at index (\d+) ")


class _Watch:
    """The roots of one probed backward and the nodes it entered, in order (Note [Probing Eager's
    Backward])."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.entered: list[str] = []  # the type names of the nodes entered
        self.keep: list[torch.Tensor] = []  # views keeping leaf roots' accumulators alive

    def install(self, positions: list[int], roots: list[torch.Tensor]) -> None:
        self.roots = positions
        todo = []
        for r in roots:
            if r.grad_fn is None:  # a leaf: its AccumulateGrad, found through (never run) the node of a view of it
                self.keep.append(r.view_as(r))
                r = self.keep[-1]
            todo.append(r.grad_fn)
        for node in autograd_nodes(todo):
            node.register_prehook(self._entered(node))

    def _entered(self, node: torch.autograd.graph.Node) -> Callable[[object], None]:
        # the hook holds neither the node nor the watch (which holds views of the roots): the node holds the hook, so
        # either would be a cycle, keeping the probe's graph until a collection (Note [Gradient Accumulators Of Leaves])
        entered, name = self.entered, type(node).__name__

        def hook(_: object) -> None:
            entered.append(name)

        return hook


def raises_outside_program(setup: JointSetup) -> bool:
    """Note [Probing Eager's Backward]."""
    try:
        grad_outputs, _ = _trial(setup.call, setup.flat, None)
        if not 0 < len(grad_outputs) <= MAX_PROBED_OUTPUTS:
            return False
        for mask in range(1, 1 << len(grad_outputs)):
            chosen = frozenset(p for k, p in enumerate(grad_outputs) if mask >> k & 1)
            errors: list[RuntimeError] = []
            watch = _Watch()
            _, end = _trial(setup.call, setup.flat, chosen, errors, before_backward=watch.install)
            if end is BackwardEnd.COMPLETES:
                continue
            if end is not BackwardEnd.RAISES or not errors or not _shared_node_raised(setup, str(errors[0]), watch):
                return False
    except Exception:  # a program the probe cannot run: it stays refused
        return False
    return True


def _shared_node_raised(setup: JointSetup, error: str, watch: _Watch) -> bool:
    if watch.entered:
        # the CPU engine runs one node at a time: the one that raised is the last one entered
        return watch.entered[-1] == "AccumulateGrad" and _single_grad_leaf(setup)
    found = _ROOT_INDEX.match(error)
    if found is None or SHAPE_CHECK_ERROR not in error or int(found.group(1)) >= len(watch.roots):
        return False
    return _caller_node(setup, watch.roots[int(found.group(1))])


def _single_grad_leaf(setup: JointSetup) -> bool:
    leaves = {id(v) for v in setup.flat.values if isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf}
    return len(leaves) == 1


def _caller_node(setup: JointSetup, position: int) -> bool:
    """Is output `position` a plain input returned as itself whose grad_fn the compiled program leaves the caller's?"""
    analysis, layout, flat = setup.analysis, setup.layout, setup.flat
    info = analysis.outputs[position]
    if info.kind is not OutputKind.IS_INPUT or info.input_index is None:
        return False
    t = flat.tensor_indices.index(int(info.input_index))
    if layout.trees[t] is not None:
        return False  # a tensor subclass: its `.data` is assigned as Note [Wrapper Storage] says
    muts = [analysis.mutations[j] for j in layout.leaves_of_input[t]]
    return all(m.swapped_by_data_only and not m.autograd_visible and not m.set_under_grad for m in muts)


def early_leaf_views(
    analysis: Analysis, flat: FlatInputs, layout: DenseLayout, outputs: Set[int], attached: Set[int]
) -> frozenset[int] | None:
    """`outputs` where each is a view replayed from a leaf input the program does not change, or such an input
    returned as itself that the Function takes attached (`attached`, InputIndex: its accumulator waits on the
    Function's node, as eager's on the program's); those views, else None."""
    views = set()
    for o in outputs:
        info = analysis.outputs[o]
        if info.kind is OutputKind.IS_INPUT and info.input_index is not None and info.input_index in attached:
            if not _unchanged_leaf(analysis, flat, layout, info.input_index):
                return None
            continue  # (no node of its own: only its accumulator, which waits on the Function's node)
        r = info.replay
        if info.kind is not OutputKind.TENSOR or r is None or r.source is not ReplaySource.INPUT:
            return None
        if r.then_set or r.late_steps or r.split_made:
            return None
        if not _unchanged_leaf(analysis, flat, layout, InputIndex(r.index)):
            return None
        views.add(o)
    return frozenset(views)


def refuse_changed_leaf_views(
    analysis: Analysis, flat: FlatInputs, layout: DenseLayout, views: Set[int], attached: Set[int], error: Exception
) -> None:
    """Refuse where an output in `views`, with which eager's backward raises before any leaf gets its gradient, is a
    view replayed after the call of an autograd leaf the program changes (a write under no_grad), that the Function
    does not take attached: the replayed view's node is newer than the Function's and runs first, giving the leaf its
    gradient, where eager's view node, older than the failing one, never runs (Note [Probing Eager's Backward])."""
    for o in sorted(views):
        r = analysis.outputs[o].replay
        index = None if r is None else InputIndex(r.index)
        real = None if index is None else flat.values[index]
        if index is None or index in attached or not isinstance(real, torch.Tensor) or not real.is_leaf:
            continue
        if _unchanged_leaf(analysis, flat, layout, index):
            continue
        raise UnsupportedError(
            f"the program's backward fails in eager ({error}) before any autograd leaf gets its gradient, and output "
            f"{o} is a view of {flat.leaves[index].path}, an autograd leaf the program changes (written under no_grad "
            "or through .data): the compiled call takes that view after the call, once the leaf has its new value, so "
            "its backward node runs before the failing one and gives the leaf a gradient eager's does not (Note "
            "[Probing Eager's Backward]). Return a clone of the view, or change a clone of the leaf"
        )


def _unchanged_leaf(analysis: Analysis, flat: FlatInputs, layout: DenseLayout, index: InputIndex) -> bool:
    """Is input `index` an autograd leaf whose data, metadata and version counter the program leaves as they were?"""
    real = flat.values[index]
    if not isinstance(real, torch.Tensor) or not real.is_leaf:
        return False
    t = flat.tensor_indices.index(index)
    return not any(analysis.mutations[j].any or analysis.mutations[j].version_bumped for j in layout.leaves_of_input[t])


def replays_before_call(analysis: Analysis, outputs: Set[int]) -> Analysis:
    """The analysis with the replays of `outputs` made before the compiled call."""
    infos = tuple(
        dataclasses.replace(info, replay=dataclasses.replace(info.replay, before_epilogue=True))
        if o in outputs and info.replay is not None
        else info
        for o, info in enumerate(analysis.outputs)
    )
    return dataclasses.replace(analysis, outputs=infos)


_MAX_CHAIN = 16


def written_escaping_views(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> frozenset[int]:
    """Note [as_strided On Inputs]: the tensor inputs (FlatInputs.tensor_indices positions) that are written
    as_strided() views whose own history loses gradient their base's as_strided() would give."""
    found = set()
    for i, k in enumerate(flat.tensor_indices):
        real = flat.values[k]
        if not isinstance(real, torch.Tensor) or not real.requires_grad or real.is_leaf or real._base is None:
            continue
        own = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in own]
        # a write autograd records sends the gradient to the base; any other bump of the counter the view shares
        # makes eager rebuild its history from the base at its next read (Note [Stale View Functions]); a change of
        # another input over the storage (`.data =` of the base) makes the compiled call
        # send the group's gradients through the base, where eager's view keeps its own history
        # as does a group over the whole storage (the program reads outside its members)
        groups = [g for g in layout.groups if set(own) & set(g.members)]
        others = [analysis.mutations[m] for g in groups for m in g.members]
        if (
            not any((m.data and m.autograd_visible and not m.hidden_from_autograd) or m.version_bumped for m in muts)
            and not any(m.any or m.version_bumped for m in others)
            and not any(g.whole_storage for g in groups)
        ):
            continue
        if _has_as_strided(real) and _history_loses_gradient(real, real._base):
            found.add(i)
    return frozenset(found)


def refuse_written_escaping_views(flat: FlatInputs, escaping: Set[int], reached: Set[int] | None) -> None:
    """Note [as_strided On Inputs]: refuse the `escaping` inputs (written_escaping_views) whose gradient the compiled
    program sends through their own history: those `reached` (tensor input positions some diff output's gradient
    reaches in the traced graph, directly or through a synthetic base); every one where that is not known (None)."""
    for i in sorted(escaping):
        if reached is not None and i not in reached:
            continue
        raise UnsupportedError(
            f"{flat.leaves[flat.tensor_indices[i]].path}: an as_strided() view that reaches elements of its base "
            "that the view it was taken of does not, and that the program writes (or changes in place, or changes "
            "another input over its storage, or reads outside the inputs over it), and whose value before the call "
            "a returned value's gradient reaches: eager's write sends the "
            "gradient to the base, or eager rebuilds the view's history from the base at its next read, while "
            "the view's own history loses it (Note [as_strided On Inputs]); not supported in training. Take the "
            "as_strided() view of the base itself (base.as_strided(...)), or write a clone"
        )


def _has_as_strided(t: torch.Tensor) -> bool:
    """Whether t's history back to its base holds an as_strided()."""
    base = t._base
    stop = None if base is None else base.grad_fn
    node = t.grad_fn
    for _ in range(_MAX_CHAIN):
        if node is None or node is stop:
            return False
        if type(node).__name__ == "AsStridedBackward0":
            return True
        node = node.next_functions[0][0] if node.next_functions else None
    return True  # a longer chain: checked by its gradients


def _history_loses_gradient(t: torch.Tensor, base: torch.Tensor) -> bool:
    try:
        with torch.enable_grad():
            weights = torch.ones_like(t)
            # None where the history does not reach the base (allow_unused)
            history = cast(
                torch.Tensor | None, torch.autograd.grad(t, base, weights, retain_graph=True, allow_unused=True)[0]
            )
            view = base.as_strided(t.size(), t.stride(), t.storage_offset())
            direct = cast(torch.Tensor | None, torch.autograd.grad(view, base, weights, allow_unused=True)[0])
    except RuntimeError:
        return False  # a history autograd cannot run now: the backward says so in eager too
    if history is None or direct is None:
        return history is not direct
    return not torch.equal(history, direct)


def inputs_behind_raising_nodes(
    value: torch.Tensor, user_tensors: Sequence[torch.Tensor], view_sets: frozenset[int] = frozenset()
) -> frozenset[int]:
    """Positions in `user_tensors` of the inputs whose node (an input's grad_fn, or a leaf's AccumulateGrad) the
    history of `value` reaches through a NotImplemented node, or a CopySlices numbered in `view_sets` (a view's set_
    node, which holds a NotImplemented one: Note [set_ Under Grad]). A view input counts where its base's node is
    reached: its own node may be one eager remade after a bump (x1 = b.expand(...); b.detach().set_(x1 * x0)), the
    node read then no longer its grad_fn, while the gradient it gives still waits on its base's."""
    nodes: dict[int, list[int]] = {}
    for k, u in enumerate(user_tensors):
        for t in (u, u._base):
            fn = None if t is None else grad_fn_or_none(t)
            if fn is not None:
                nodes.setdefault(id(fn), []).append(k)
    found: set[int] = set()
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[Any, bool]] = [(grad_fn_or_none(value), False)]
    while stack:
        node, behind = stack.pop()
        if node is None or (id(node), behind) in seen:
            continue
        seen.add((id(node), behind))
        if behind:
            found.update(nodes.get(id(node), ()))
        variable = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if behind and variable is not None:
            found.update(k for k, u in enumerate(user_tensors) if u is variable or u._base is variable)
        name = type(node).__name__
        behind = behind or name == "NotImplemented" or (name == "CopySlices" and node._sequence_nr() in view_sets)
        stack.extend((child, behind) for child, _ in node.next_functions)
    return frozenset(found)


def check_set_under_grad(infos: Sequence[OutputInfo], flat: FlatInputs, user_tensors: Sequence[torch.Tensor]) -> None:
    """Note [set_ Under Grad]: an autograd leaf input returned beside a set_() output is refused
    unless eager's set_ node of each such output stands between it and the loss. Whether it requires grad is read as
    the call leaves it (`user_tensors`, the analysis run's): a requires_grad_() in the program counts."""
    grad_set = [info for info in infos if info.set_under_grad]
    after = dict(zip(flat.tensor_indices, (t.requires_grad for t in user_tensors), strict=True))
    for info in infos if grad_set else ():
        index = info.input_index if info.kind is OutputKind.IS_INPUT else None
        real = None if index is None else flat.values[index]
        if index is None or not isinstance(real, torch.Tensor) or not after[index] or not real.is_leaf:
            continue
        if all(index in s.set_blocks and not _holder_shared(s) for s in grad_set):
            continue
        raise UnsupportedError(
            f"{grad_set[0].path}: the program set_() this tensor with grad enabled, so its backward raises in eager, "
            f"and {info.path} is {flat.leaves[index].path}, an autograd leaf that requires grad: whether eager "
            "accumulates its gradient before the backward raises depends on the order autograd runs its nodes (Note "
            "[set_ Under Grad]). Call set_() under torch.no_grad(), or return a clone"
        )


def input_set_blocks(
    flat: FlatInputs,
    layout: DenseLayout,
    mutations: Sequence[LeafMutation],
    tensors: Sequence[torch.Tensor],
    view_sets: frozenset[int],
) -> tuple[tuple[InputIndex, ...], ...]:
    """Per tensor input (`tensors`, as the run ends) set_() under grad to a tensor that is no input: the inputs whose
    node its history reaches behind a set_ node (`view_sets`: those of view inputs), which eager's backward never
    runs; the epilogue's set_ of it holds them back too. () elsewhere (Note [set_ Under Grad])."""
    blocks: list[tuple[InputIndex, ...]] = []
    for i, t in enumerate(tensors):
        own = layout.leaves_of_input[i]
        if not any(mutations[j].set_under_grad and not mutations[j].set_source_edge for j in own):
            blocks.append(())
            continue
        found = inputs_behind_raising_nodes(t, tensors, view_sets)
        blocks.append(tuple(flat.tensor_indices[k] for k in sorted(found) if k != i))
    return tuple(blocks)


def raising_write_blocks(
    call: Callable[..., object], flat: FlatInputs, layout: DenseLayout, mutations: Sequence[LeafMutation]
) -> tuple[tuple[InputIndex, ...], ...]:
    """Per tensor input written with grad after a `.data =` that its size at entry does not expand to
    (AssignedWrite.AFTER_RAISING): the other inputs whose history as the call found it (a leaf's accumulator, a
    non-leaf's grad_fn) eager's history of the input, run on static fakes, reaches behind the first such write's
    node, which raises before any of them runs. () elsewhere, and all () where the program does not run on static
    fakes. Refused where that history reaches one otherwise (Note [History Kept Through .data =])."""
    raising = [
        i
        for i, own in enumerate(layout.leaves_of_input)
        if any(mutations[j].assigned_write is AssignedWrite.AFTER_RAISING for j in own)
    ]
    if not raising:
        return ()
    entry: list[object] = []  # per tensor input: its grad_fn as the call finds it

    def note_entry(values: list[object]) -> None:
        entry.extend(grad_fn_or_none(cast(torch.Tensor, values[k])) for k in flat.tensor_indices)

    try:
        with eager_run(call, flat, before=note_entry) as (_, values):
            tensors = [cast(torch.Tensor, values[k]) for k in flat.tensor_indices]
            reach = {i: _write_reach(tensors, entry, i) for i in raising}
    except Exception:  # a program the probe cannot run: the copy is not held back, as before this rule
        return ()
    for i, (_, early) in reach.items():
        if early:
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: the program assigns `.data` of this input a tensor of a "
                "size its size at entry does not expand to, then writes it with grad more than once, or from a "
                f"history that also reaches {flat.leaves[flat.tensor_indices[min(early)]].path} apart from the "
                "write: eager's backward raises at the first write's node, and may give that input its gradient "
                "first, which the compiled program does not reproduce (Note [History Kept Through .data =]); not "
                "supported in training. Write it once after the `.data =`, or assign a tensor of its own shape"
            )
    return tuple(
        tuple(flat.tensor_indices[k] for k in sorted(reach[i][0])) if i in reach else ()
        for i in range(len(layout.leaves_of_input))
    )


def _write_reach(
    tensors: Sequence[torch.Tensor], entry: Sequence[object], i: int
) -> tuple[frozenset[int], frozenset[int]]:
    """Of `tensors` (eager's inputs after the call, `entry` their grad_fns before it) other than `i`: those whose
    history at entry the history of `i` reaches behind its raising write's node (the node on its chain of writes with
    an edge to its own history at entry; its last node where none is found), and those it reaches without passing
    that node."""
    final = grad_fn_or_none(tensors[i])
    node, raising = final, final
    for _ in range(_MAX_CHAIN):
        if node is None or not node.next_functions:
            break
        if node.next_functions[0][0] is entry[i]:
            raising = node
            break
        node = node.next_functions[0][0]
    behind = _entry_nodes_reached(tensors, entry, raising, None) - {i}
    early = _entry_nodes_reached(tensors, entry, final, raising) - {i}
    return frozenset(behind), frozenset(early)


def _entry_nodes_reached(
    tensors: Sequence[torch.Tensor], entry: Sequence[object], start: Any, stop: object
) -> set[int]:
    """Positions in `tensors` whose history at entry (`entry`, or a leaf's AccumulateGrad) the graph below `start`
    reaches, not passing through `stop`."""
    nodes = {id(fn): k for k, fn in enumerate(entry) if fn is not None}
    found: set[int] = set()
    seen: set[int] = set()
    stack = [] if start is None or start is stop else [child for child, _ in start.next_functions]
    while stack:
        node = stack.pop()
        if node is None or node is stop or id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in nodes:
            found.add(nodes[id(node)])
            continue  # (the history the call found: outside the program)
        variable = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        found.update(k for k, t in enumerate(tensors) if t is variable and entry[k] is None)
        stack.extend(child for child, _ in node.next_functions)
    return found


def _holder_shared(info: OutputInfo) -> bool:
    return info.grad_set_base is not None and info.grad_set_base.same_object


def behind_no_grad_views(analysis: Analysis) -> tuple[frozenset[int], frozenset[tuple[int, ...]]]:
    """The intermediate bases (by number) and subclass roots (by their bases) that outputs reach, and only through
    views taken of them under no_grad (or views of such views): autograd passes no gradient from such a view to its
    source, so no backward, through the outputs or through what the caller computes from them, gives the forward
    output of the base or root a tangent (Note [Backward Errors Are Deferred])."""
    bases: dict[int, bool] = {}
    roots: dict[tuple[int, ...], bool] = {}
    for info in analysis.outputs:
        cut = _cut_from_its_source(analysis, info)
        for leaf in info.leaves:
            if leaf.source is LeafSource.INTERMEDIATE_ALIAS:
                bases[leaf.index] = bases.get(leaf.index, True) and cut
        if info.replay is not None and info.replay.source is ReplaySource.WRAPPER:
            roots[info.replay.root_bases] = roots.get(info.replay.root_bases, True) and cut
    return frozenset(b for b, cut in bases.items() if cut), frozenset(r for r, cut in roots.items() if cut)


def _cut_from_its_source(analysis: Analysis, info: OutputInfo) -> bool:
    """Whether `info` is rebuilt by a chain of views, one of which (or of the output it is replayed from) is taken
    under no_grad."""
    r = info.replay
    if r is None or r.then_set or info.set_under_grad:
        return False
    if cut_by_no_grad(r):
        return True
    return r.source is ReplaySource.OUTPUT and _cut_from_its_source(analysis, analysis.outputs[r.index])


def refuse_returned_view_behind_raise(setup: JointSetup, attached: Set[int]) -> None:
    """Refuse an input returned as itself that is a plain view of a leaf requiring grad, its counter bumped by a write
    autograd records nothing of (inference_mode), not attached to the Function, where eager's backward through it and
    an output the Function computes raises: eager rebuilds the view's history from its base at the program's next read
    with grad, a node made before the raising one, so it runs after it and the leaf gets no gradient; ours is rebuilt
    by the caller after the call and runs first. (Over-refuses where the Function's own gradient feeds that leaf.)"""
    analysis, flat, layout = setup.analysis, setup.flat, setup.layout
    through = {o for o, info in enumerate(analysis.outputs) if through_function(analysis, info)}
    for o, info in enumerate(analysis.outputs):
        index = info.input_index
        if info.kind is not OutputKind.IS_INPUT or index is None or index in attached or not through:
            continue
        real = flat.values[index]
        base = real._base if type(real) is torch.Tensor else None
        if base is None or not (base.is_leaf and base.requires_grad):
            continue
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[flat.tensor_indices.index(index)]]
        if not any(m.version_bumped for m in muts) or any(m.autograd_visible or m.set_under_grad for m in muts):
            continue
        ends = probe_eager_backward(setup.call, flat) or {}
        if not any(end is BackwardEnd.RAISES and o in chosen and chosen & through for chosen, end in ends.items()):
            continue
        raise UnsupportedError(
            f"{flat.leaves[index].path} (returned as {info.path}): the program wrote this view of an autograd leaf "
            "without grad (inference_mode) and returns it as itself beside an output it computes, and eager's "
            "backward through them raises at set_'s node before the leaf gets a gradient: eager rebuilds the view's "
            "history at the program's next read with grad, a node it runs after the raising one; the view's history "
            "is rebuilt after the compiled call, so its leaf would get a gradient first (Note [set_ Under Grad]). "
            "Call set_() outside the compiled function, or return a clone of the view"
        )
