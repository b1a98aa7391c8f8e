"""Stage `trace` (training): the backward graph, traced from a joint forward+backward run.

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the forward `TracedGraph`, dense fakes, fake mode.
Output: `BackwardGraph`: a functional fx graph `(primals..., tangents...) -> grads per user tensor input (dense)`.
Invariants: see Note [Training By Recompute]; the graph is purely functional; tangents come in dense (subclass
tangents flattened), one per differentiable forward output, in forward-output order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.fx
from torch.utils import _pytree as pytree

from subclassaot.desugar import graph_example_inputs
from subclassaot.errors import UnsupportedError
from subclassaot.functional_run import FunctionalRun, intermediate_bases, run_functional
from subclassaot.protocol import SubclassNode, flatten_subclass, is_traceable_subclass
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    LeafSource,
    OutputKind,
    ReplaySource,
)
from subclassaot.torch_internals import (
    from_functional,
    mutation_counter,
    new_functional_mode,
    storage_key,
    to_functional,
    trace_graph,
)
from subclassaot.trace import TracedGraph, UpdateKind

# Note [Training By Recompute]
# When an input requires grad, the forward graph (the inference trace) runs inside one autograd.Function and the
# backward graph is traced from a joint run: the program runs again on the primals, then torch.autograd.grad of its
# differentiable outputs with respect to the user tensor inputs that require grad. The backward graph therefore
# recomputes the forward from the primals and saves nothing else: saved activations are the inputs alone (copies
# for inputs the epilogue mutates), never more than eager keeps. The partitioner that saves selected activations
# instead of recomputing them is future work (see the notes); the calling convention leaves room for it.


# Note [Backward Errors Are Deferred]
# Some programs run forward fine in eager and fail only in backward: x.mul_(x) on a tensor autograd saved, set_() on
# a tensor that requires grad, a custom backward that raises. Tracing our backward graph hits the same error at
# compile time. Raising it there would fail a call that eager completes, so the error is kept with the entry and
# raised, unchanged, when (and only when) the backward runs.


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardGraph:
    graph: torch.fx.GraphModule | None  # None when tracing the backward failed: see `error`
    error: RuntimeError | None  # the program's own backward error, raised when backward runs
    diff_outputs: tuple[int, ...]  # forward-output positions (tensor outputs) that receive a tangent
    grad_inputs: tuple[int, ...]  # tensor-input positions (FlatInputs.tensor_indices order) that get a gradient
    unused: frozenset[int]  # positions in grad_inputs whose gradient eager leaves None (unreachable from outputs)
    grad_trees: tuple[SubclassNode | None, ...]  # per grad input: the gradient's subclass structure (None: plain)
    # per grad input: the diff outputs (positions in diff_outputs) whose tangents reach its gradient in the graph
    tangent_deps: tuple[frozenset[int], ...]
    # dense inputs the backward itself writes (a custom Function's backward updating a buffer); their new values
    # follow the gradients in the graph's outputs, and the runtime copies them into the real inputs
    backward_mutations: tuple[DenseIndex, ...]
    tangent_trees: tuple[SubclassNode | None, ...]  # per diff output: the subclass structure its tangent must have
    wrapper_updates: tuple[int, ...]  # tensor inputs whose new value the Function returns as a wrapper (last outputs)
    # graph inputs (synthetic bases of aliased inputs) that require grad: Function inputs after the user tensors,
    # their gradients after the user inputs' (Note [Aliased Inputs In Training])
    group_grads: tuple[int, ...] = ()
    tangent_strides: tuple[tuple[int, ...] | None, ...] = ()  # per dense tangent: its traced strides (static ones)
    example_inputs: tuple[torch.Tensor, ...]


def forward_output_values(
    run: FunctionalRun, traced: TracedGraph, analysis: Analysis, wrapper_updates: tuple[int, ...]
) -> list[torch.Tensor]:
    """The forward graph's tensor outputs as user-level tensors (fresh subclass outputs wrapped), in order, then
    the new value of each subclass input in `wrapper_updates` (Note [Subclass Inputs Mutated In Training])."""
    run_output, finals, originals, graph_inputs = run.output, run.finals, run.originals, run.graph_inputs
    out: list[torch.Tensor] = []
    for update in traced.outputs.updates:
        if update.kind is UpdateKind.BASE:
            out.append(graph_inputs[update.target])
        else:
            out.append((originals if update.kind is UpdateKind.ORIGINAL else finals)[DenseIndex(update.target)])
    leaves, _ = pytree.tree_flatten(run_output)
    for info, value in zip(analysis.outputs, leaves, strict=True):
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves):
            assert isinstance(value, torch.Tensor)
            out.append(value)
    current = {storage_key(f): DenseIndex(j) for j, f in enumerate(finals)}
    original = {storage_key(o): DenseIndex(j) for j, o in enumerate(originals)}
    bases = intermediate_bases(leaves, current, original, run.swaps)
    roots = analysis.wrapper_roots()
    in_roots = {b for members in roots.values() for b in members}
    wrappers = _wrapper_root_values(analysis, leaves, run)
    for number, base in sorted(bases.values(), key=lambda item: item[0]):
        if number in roots:
            out.append(wrappers[number])  # Note [Subclass Views Of Intermediates In Training]
        elif number not in in_roots:
            out.append(base)
    out.extend(run.user_tensors[i] for i in wrapper_updates)
    return out


def _wrapper_root_values(analysis: Analysis, leaves: list[object], run: FunctionalRun) -> dict[int, torch.Tensor]:
    """First base number of each replayed-from intermediate subclass -> that subclass, as the run made it."""
    found: dict[int, torch.Tensor] = {}
    for info, value in zip(analysis.outputs, leaves, strict=True):
        replay = info.replay
        if replay is None or replay.source is not ReplaySource.WRAPPER or not isinstance(value, torch.Tensor):
            continue
        t = value
        while (record := run.swaps.views.get(id(t))) is not None:
            t = record.source
        found.setdefault(replay.root_bases[0], t)
    return found


# Note [Subclass Views Of Intermediates In Training]
# Autograd sees a subclass at the wrapper level, so a subclass output that is a view of an intermediate subclass
# (`(x * 2).view(-1)`) cannot be replayed from the intermediate's inner tensors (the graph's bases): they carry no
# history, and the output would not require grad. In training the Function returns the intermediate itself as a
# wrapper, differentiable, in place of its inner bases, and the view is replayed from it under autograd, as in eager.


# Note [Subclass Inputs Mutated In Training]
# Autograd sees a subclass at the wrapper level: its inner tensors carry no history. So when the program writes
# into a subclass input that requires grad, writing the new inner values into the real input (as inference does)
# would leave autograd blind. Instead the compiled autograd.Function also returns the input's new value as a
# wrapper (rebuilt from the graph's ORIGINAL updates of its leaves), differentiable like any output, and the
# epilogue applies `input.copy_(new)` at the wrapper level with grad enabled, which autograd records as eager does.
# In the backward graph the program runs on a clone of the input (Note [Training By Recompute]), whose mutated self
# is that output. Data mutations only: an input whose metadata or storage also changes is refused.


def wrapper_update_inputs(
    layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> tuple[int, ...]:
    """Subclass inputs that require grad and whose data the program writes (and nothing else)."""
    grouped = {m for g in layout.groups for m in g.members}
    out = []
    for i, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        leaves = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in leaves]
        if tree is None or not fake.requires_grad or not any(m.data for m in muts):
            continue
        if any(m.metadata or m.storage_changed or m.swapped or m.resized or m.final_data for m in muts):
            continue
        if any(j in grouped for j in leaves) or analysis.inplace_replay[i]:
            continue
        out.append(i)
    return tuple(out)


def trace_backward(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced: TracedGraph,
    dense_fakes: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None = None,
) -> BackwardGraph:
    group_grads = grad_bases(layout, user_fakes)
    in_groups = {layout.leaves[m].owner for k in group_grads for m in layout.groups[_group_of(layout, k)].members}
    grad_inputs = tuple(
        i for i, t in enumerate(user_fakes) if t.requires_grad and flat.tensor_indices[i] not in in_groups
    )
    example = graph_example_inputs(layout, dense_fakes)
    with fake_mode:
        for k in group_grads:  # a base taken from a member that does not require grad (x.detach(), x)
            if not example[k].requires_grad:
                example[k] = example[k].detach().requires_grad_(True)
    wrapper_updates = wrapper_update_inputs(layout, analysis, user_fakes)
    # Every input gradients are taken for runs as a clone: a write to it, or an in-place view op on a view of it,
    # then happens to a non-leaf as in eager (Note [Training By Recompute]).
    clone = frozenset(grad_inputs)
    with fake_mode, torch.enable_grad():
        fw_example = _forward_example(
            call, flat, layout, analysis, traced, example, user_fakes, clone, wrapper_updates, group_grads
        )
    diff = tuple(i for i, (grad, _, _) in enumerate(fw_example) if grad)
    with fake_mode:
        tangent_fakes = [torch.empty_like(t) for i in diff for t in fw_example[i][1]]
    n_primals = len(example)
    unused: set[int] = set()
    grad_trees: list[SubclassNode | None] = []
    bw_mutated: list[DenseIndex] = []

    def bw_fn(*values: torch.Tensor) -> list[torch.Tensor]:
        primals, tangents = values[:n_primals], list(values[n_primals:])
        with new_functional_mode(), torch.enable_grad():
            tangents = [to_functional(t) for t in tangents]
            run = run_functional(
                call,
                flat,
                layout,
                primals,
                requires_grad_like=user_fakes,
                clone_inputs=clone,
                clone_graph_inputs=frozenset(group_grads),
            )
            outs = forward_output_values(run, traced, analysis, wrapper_updates)
            diff_outs = [outs[i] for i in diff]
            grad_outs = [_rewrap_tangent(o, tangents) for o in diff_outs]
            wrt = [run.grad_leaves[i] for i in grad_inputs] + [run.graph_grad_leaves[k] for k in group_grads]
            before = [mutation_counter(o) for o in run.originals]
            live = [k for k, x in enumerate(wrt) if x.requires_grad]  # detach_() in the program drops an input
            found = (
                torch.autograd.grad(diff_outs, [wrt[k] for k in live], grad_outs, allow_unused=True)
                if diff_outs and live
                else [None] * len(live)
            )
            grads: list[torch.Tensor | None] = [None] * len(wrt)
            for k, g in zip(live, found, strict=True):
                grads[k] = g
            bw_mutated[:] = [DenseIndex(j) for j, o in enumerate(run.originals) if mutation_counter(o) != before[j]]
            dense: list[torch.Tensor] = []
            grad_trees.clear()
            for k, (g, x) in enumerate(zip(grads, wrt, strict=True)):  # user inputs, then synthetic bases
                if g is None:
                    unused.add(k)
                    g = torch.zeros_like(x)
                if is_traceable_subclass(g):
                    node, leaves = flatten_subclass(g, "grad")
                    grad_trees.append(node)
                else:
                    grad_trees.append(None)
                    leaves = [g]
                dense.extend(from_functional(leaf) for leaf in leaves)
            return dense + [from_functional(run.originals[j]) for j in bw_mutated]

    try:
        with fake_mode:
            gm = trace_graph(bw_fn, [*example, *tangent_fakes], decompositions)
    except RuntimeError as e:
        # The program's backward itself fails (set_ has no derivative, a saved tensor was modified in place):
        # eager raises only when backward runs, and so do we (Note [Backward Errors Are Deferred]).
        return BackwardGraph(
            graph=None,
            error=e,
            diff_outputs=diff,
            grad_inputs=grad_inputs,
            unused=frozenset(),
            grad_trees=(),
            tangent_deps=(),
            backward_mutations=(),
            tangent_trees=tuple(fw_example[i][2] for i in diff),
            example_inputs=(),
            wrapper_updates=wrapper_updates,
            group_grads=group_grads,
        )
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return BackwardGraph(
        graph=gm,
        error=None,
        diff_outputs=diff,
        grad_inputs=grad_inputs,
        unused=frozenset(unused),
        grad_trees=tuple(grad_trees),
        tangent_deps=_tangent_deps(gm, n_primals, diff, fw_example, grad_trees),
        backward_mutations=tuple(bw_mutated),
        tangent_trees=tuple(fw_example[i][2] for i in diff),
        example_inputs=(*example, *tangent_fakes),
        wrapper_updates=wrapper_updates,
        group_grads=group_grads,
        tangent_strides=tuple(_static_strides(t) for t in tangent_fakes),
    )


def _static_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    strides = t.stride()
    return tuple(int(s) for s in strides) if all(isinstance(s, int) for s in strides) else None


def _tangent_deps(
    gm: torch.fx.GraphModule,
    n_primals: int,
    diff: tuple[int, ...],
    fw_example: list[tuple[bool, list[torch.Tensor], SubclassNode | None]],
    grad_trees: list[SubclassNode | None],
) -> tuple[frozenset[int], ...]:
    """For each gradient output, which diff outputs' tangents it is computed from (graph reachability)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    owner: dict[torch.fx.Node, int] = {}
    pos = n_primals
    for k, i in enumerate(diff):
        for _ in fw_example[i][1]:
            owner[placeholders[pos]] = k
            pos += 1
    deps: dict[torch.fx.Node, frozenset[int]] = {}
    for node in gm.graph.nodes:
        found = {owner[node]} if node in owner else set()
        for parent in node.all_input_nodes:
            found |= deps.get(parent, frozenset())
        deps[node] = frozenset(found)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    flat_outs = [a for a in pytree.tree_leaves(output.args[0]) if isinstance(a, torch.fx.Node)]
    flat_outs = flat_outs[: sum(1 if t is None else t.num_leaves for t in grad_trees)]
    result = []
    start = 0
    for tree in grad_trees:
        width = 1 if tree is None else tree.num_leaves
        result.append(frozenset().union(*(deps[n] for n in flat_outs[start : start + width])))
        start += width
    return tuple(result)


def _rewrap_tangent(out: torch.Tensor, tangents: list[torch.Tensor]) -> torch.Tensor:
    if not is_traceable_subclass(out):
        return tangents.pop(0)
    node, leaves = flatten_subclass(out, "tangent")
    from subclassaot.protocol import unflatten_subclass

    taken = [tangents.pop(0) for _ in leaves]
    return unflatten_subclass(node, taken)


def _forward_example(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced: TracedGraph,
    example: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    clone: frozenset[int],
    wrapper_updates: tuple[int, ...],
    group_grads: tuple[int, ...],
) -> list[tuple[bool, list[torch.Tensor], SubclassNode | None]]:
    with new_functional_mode():
        run = run_functional(
            call,
            flat,
            layout,
            example,
            requires_grad_like=user_fakes,
            clone_inputs=clone,
            clone_graph_inputs=frozenset(group_grads),
        )
        outs = forward_output_values(run, traced, analysis, wrapper_updates)
        # Per output: whether it gets a tangent, its dense leaves (plain fakes, to shape the tangents) and its
        # subclass structure (what a runtime tangent is checked and coerced against).
        result: list[tuple[bool, list[torch.Tensor], SubclassNode | None]] = []
        for o in outs:
            node, leaves = flatten_subclass(o, "out") if is_traceable_subclass(o) else (None, [o])
            # A no_grad view of an input that requires grad may report requires_grad under tracing; it has no grad_fn.
            grad = o.requires_grad and o.grad_fn is not None and o.dtype.is_floating_point
            result.append((grad, [from_functional(leaf) for leaf in leaves], node))
        return result


# Note [Aliased Inputs In Training]
# Inputs that share storage are traced as views of one synthetic base (Note [Synthetic Bases]). In training, that base
# is what autograd sees: the runtime makes it from the real inputs (an as_strided view of one member, recorded by
# autograd), passes it to the compiled autograd.Function, and the backward returns the gradient with respect to it,
# which autograd carries back through the as_strided to the real tensors behind the members, the way eager's
# gradients reach them through both aliases. A mutation of a member is a copy into that base, which autograd
# records as well. Subclass members are not covered (refused).


def grad_bases(layout: DenseLayout, user_fakes: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """Graph inputs that are synthetic bases of plain inputs one of which requires grad."""
    requires_grad = {
        layout.leaves[leaves[0]].owner: fake.requires_grad
        for leaves, fake in zip(layout.leaves_of_input, user_fakes, strict=True)
        if leaves
    }
    return tuple(
        k
        for k, item in enumerate(layout.graph_inputs)
        if isinstance(item, AliasGroupRef)
        and any(requires_grad[layout.leaves[m].owner] for m in layout.groups[item.group].members)
    )


def _group_of(layout: DenseLayout, k: int) -> int:
    item = layout.graph_inputs[k]
    assert isinstance(item, AliasGroupRef), "BUG: not a synthetic base"
    return item.group


def _metadata_only_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs whose only change is in-place view ops the epilogue replays on the real input (autograd
    records them there, as in eager); no value comes out of the compiled Function for them."""
    out = []
    for i, tree in enumerate(layout.trees):
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[i]]
        if tree is None or not analysis.inplace_replay[i]:
            continue
        if not any(m.data or m.storage_changed or m.swapped or m.resized or m.final_data for m in muts):
            out.append(i)
    return tuple(out)


def check_training_supported(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    for group in layout.groups:
        owners = {layout.leaves[m].owner for m in group.members}
        needs_grad = any(fake.requires_grad for t, fake in enumerate(user_fakes) if flat.tensor_indices[t] in owners)
        changed = [m for m in group.members if analysis.mutations[m].metadata or analysis.mutations[m].storage_changed]
        if needs_grad and changed:
            raise UnsupportedError(
                f"{layout.leaves[changed[0]].path} shares storage with another input that requires grad and the "
                "program changes its metadata or storage in place (t_, set_, ...); in training this is not "
                "supported yet (its gradients would not be eager's). Pass one base tensor and take the views "
                "inside the function"
            )
        for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
            if flat.tensor_indices[t_index] in owners and fake.requires_grad and tree is not None:
                raise UnsupportedError(
                    f"{flat.leaves[flat.tensor_indices[t_index]].path} is a tensor subclass that requires grad and "
                    "shares storage with another input; in training this is not supported yet. Pass one base "
                    "tensor and take the views inside the function"
                )
    supported = (*wrapper_update_inputs(layout, analysis, user_fakes), *_metadata_only_inputs(layout, analysis))
    for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        if tree is not None and fake.requires_grad and t_index not in supported:
            if any(analysis.mutations[j].any for j in layout.leaves_of_input[t_index]):
                raise UnsupportedError(
                    f"{tree.path}: a tensor subclass input that requires grad has its metadata or storage changed "
                    "in place (t_, set_, resize_ ...); in training only data writes to such inputs are supported "
                    "yet. Change a clone instead, or run it under torch.no_grad()"
                )
