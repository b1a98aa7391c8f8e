"""Stage `partition`: the joint forward+backward graph -> a forward graph and a backward graph.

Input: the joint fx graph `(primals..., tangents...) -> (forward outputs..., backward outputs...)` (joint.py), the
number of primals and of forward outputs.
Output: `Partition`: `forward: (primals...) -> (forward outputs..., saved...)` and
`backward: (saved..., tangents...) -> (backward outputs...)`, both purely functional, with their example inputs.
Invariants: see Note [Training Through A Joint Graph]; no node the forward runs is run again by the backward unless
it is a view (free to recompute); a random op that needs no tangent runs in the forward, exactly once (one that
does, drawn by a custom backward, stays in the backward, as in eager).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.fx

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.opaque_ops import kept_in_graph
from subclassaot.torch_internals import graph_module, storage_key, symint_expr

_READS_GRAD_MODE = frozenset({torch.ops.aten.mkldnn_rnn_layer.default})


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    forward: torch.fx.GraphModule  # (primals...) -> (forward outputs..., saved...)
    backward: torch.fx.GraphModule  # (saved..., tangents...) -> (backward outputs...)
    num_saved: int
    # per saved value: the primal position it is (the runtime copies one the epilogue mutates), or None
    saved_primals: tuple[int | None, ...]
    # per saved value: the primal position it is a clone of (joint.py's clone of an input at an offset, which the
    # ops keep reading: `_read_primals_not_clones`), or None
    saved_clones: tuple[int | None, ...]
    backward_example: tuple[object, ...]  # fake tensors and symbolic ints, one per backward placeholder
    has_random: bool  # the forward draws random numbers
    reads_grad_mode: (
        bool  # the forward holds an op whose saved outputs need grad mode on (Note [Training Through A Joint Graph])
    )
    # Compile time only (Note [Tangent Retrace]): the joint graph's forward-region nodes (graph order), saved nodes
    # (saved order) and primal placeholders
    forward_nodes: tuple[torch.fx.Node, ...]
    saved_nodes: tuple[torch.fx.Node, ...]
    primal_nodes: tuple[torch.fx.Node, ...]


def _is_random(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def _is_view(node: torch.fx.Node) -> bool:
    target = node.target
    return node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target.is_view


def _is_symbolic(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.SymInt | torch.SymFloat | torch.SymBool)


def _ancestors(roots: Iterable[torch.fx.Node]) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def _nodes(values: Sequence[torch.fx.node.Argument]) -> list[torch.fx.Node]:
    return [v for v in values if isinstance(v, torch.fx.Node)]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Regions:
    primals: list[torch.fx.Node]
    tangents: list[torch.fx.Node]
    forward: set[torch.fx.Node]  # forward-region nodes, placeholders excluded
    backward: set[torch.fx.Node]
    saved: list[torch.fx.Node]
    fw_outs: list[torch.fx.node.Argument]
    bw_outs: list[torch.fx.node.Argument]


def _regions(joint: torch.fx.GraphModule, num_primals: int, num_fw_outputs: int) -> _Regions:
    graph = joint.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    primals, tangents = placeholders[:num_primals], placeholders[num_primals:]
    _read_primals_not_clones(graph, set(primals))
    output = next(n for n in graph.nodes if n.op == "output")
    outs = list(output.args[0])
    fw_outs, bw_outs = outs[:num_fw_outputs], outs[num_fw_outputs:]
    needs_tangent: set[torch.fx.Node] = set(tangents)
    for node in graph.nodes:
        if any(p in needs_tangent for p in node.all_input_nodes):
            needs_tangent.add(node)
    # (a check no output reads runs in the forward, as eager's does: Note [What A Backend Receives And Returns],
    # "Ordered effects")
    extra = [
        n
        for n in graph.nodes
        if (_is_random(n) or _is_symbolic(n) or kept_in_graph(n.target)) and n not in needs_tangent
    ]
    forward = _ancestors([*_nodes(fw_outs), *extra]) - set(placeholders)
    if forward & needs_tangent:
        raise AssertionError("BUG: a forward output of the joint graph depends on a tangent")
    # Every element of a forward op's tuple result runs in the forward: a tuple is not a tensor to save.
    forward |= {n for n in graph.nodes if n.target is operator.getitem and n.args[0] in forward}
    backward = _ancestors(_nodes(bw_outs)) - forward - set(placeholders)
    available = forward | set(primals)
    saved = _saved(graph, available, backward, _nodes(bw_outs))
    while views := [n for n in saved if _is_view(n)]:
        # Recompute saved views in the backward from their sources (Note [Training Through A Joint Graph]).
        backward |= set(views)
        saved = _saved(graph, available, backward, _nodes(bw_outs))
    return _Regions(
        primals=primals,
        tangents=tangents,
        forward=forward,
        backward=backward,
        saved=saved,
        fw_outs=fw_outs,
        bw_outs=bw_outs,
    )


def partition_joint(joint: torch.fx.GraphModule, num_primals: int, num_fw_outputs: int) -> Partition:
    r = _regions(joint, num_primals, num_fw_outputs)
    position = {p: k for k, p in enumerate(r.primals)}
    return Partition(
        forward=_forward_module(joint, r.primals, r.forward, r.fw_outs, r.saved),
        backward=_backward_module(joint, r.saved, r.tangents, r.backward, r.bw_outs),
        num_saved=len(r.saved),
        saved_primals=tuple(position.get(n) for n in r.saved),
        saved_clones=tuple(_clone_of(n, position) for n in r.saved),
        backward_example=tuple(n.meta["val"] for n in [*r.saved, *r.tangents]),
        has_random=any(_is_random(n) for n in r.forward),
        reads_grad_mode=any(n.target in _READS_GRAD_MODE for n in r.forward),
        forward_nodes=tuple(n for n in joint.graph.nodes if n in r.forward),
        saved_nodes=tuple(r.saved),
        primal_nodes=tuple(r.primals),
    )


# Note [Tangent Retrace]
# The backward graph is traced for tangents shaped like the forward outputs (a PairTensor tangent for a PairTensor
# output, plain for plain, laid out like the output). The caller chooses the tangents at backward time:
# - Another type that no hook of the subclass converts (`__coerce_tangent_from__`), or another ctx of the same class
#   (eager's gradient takes the tangent's metadata: a Replicate tangent of a Shard output gives a Replicate gradient,
#   where converting it with `__coerce_same_metadata_as_tangent__` would give the output's placements; that hook is
#   the fallback where the retrace is refused, and is cached as refused), gets a backward of its own, traced lazily
#   on first sight and cached per tangent structure (types, ctx, dense sizes): the joint is traced again with such
#   tangents and only its backward region kept. The forward already ran, so that backward may read only what it saved: the new forward region runs the
#   same ops in the same order, which maps its nodes to the first joint's (symbolic size reads, which the tracer places
#   where first needed, by op and arguments: `_same_forward`), and a backward that needs an unsaved forward value is
#   refused with an UnsupportedError naming the node (never recomputed: it may be random).
# - Metadata of the subclass's choosing: DTensor's `__coerce_tangent_metadata__` turns a Partial output's tangent into
#   Replicate (a Partial gradient cannot be made from a user's). As AOTDispatch does, the backward is traced for the
#   coerced metadata; a runtime tangent of other metadata is then another ctx (above).
# - Some outputs only: eager's gradient of a subclass input is a subclass where some path from an output given a tangent
#   makes one, else plain (x1.copy_(x0) with a plain x1 sends x0 a plain gradient). So when an output that some subclass
#   gradient depends on gets no tangent, the backward is traced again without differentiating it, cached per such set;
#   a backward through every output, or missing only tangents no subclass gradient depends on, runs the compiled one,
#   and so does one whose retrace fails and a double backward (there types are a full backward's: a known gap).
# - Strides: with static strides the runtime copies a tangent of other strides into the traced ones. Symbolic strides
#   were not checked (an expanded tangent failed inductor's assert_size_stride), so such a tangent records its dim order
#   where its strides are the dense strides of that order, and the runtime lays a tangent out so from its real sizes.
# - Sizes: a retrace runs on the compile's primals, whose symbols are hinted by the compile's sizes, so a dense leaf of
#   a tangent of the output's class and of its output leaf's size in the call takes the traced symbolic size (and
#   strides over it); static sizes of another call would not meet the primals (NJT's view backward refused them).
# All of this is the one place where compile work reaches the per-call path: the plan holds no fake tensor, ShapeEnv or
# graph it does not run, so the compile hands the runtime one typed callable, `BackwardPlan.retrace`, closing over the
# compile-time records and returning only a compiled backward and the meaning of its outputs (`RetracedBackward`); the
# Function caches it per new structure, and a retrace that cannot be had raises UnsupportedError.
# Gradients: a subclass gradient is rebuilt from its dense leaves after the backward graph ran. Its outer strides are
# read by later nodes (the user's ViewBackward), so where the traced gradient had a leaf's size and stride (a
# WrapperTensor's first inner tensor) it takes that leaf's real strides, else the input's own. A tensor the graph
# returns more than once (a broadcast add's tangent) is cloned wherever it becomes an inner tensor of a subclass
# gradient: AccumulateGrad keeps the fresh wrapper and accumulates into it in place later, and eager's gradients never
# share storage. Integer leaves are structure, not gradient: two NJT gradients share their inputs' offsets as eager's
# do (a clone would mint another nested int, and autograd refuse the gradient's size).


def partition_backward_like(
    joint: torch.fx.GraphModule, num_primals: int, num_fw_outputs: int, reference: Partition
) -> tuple[torch.fx.GraphModule, tuple[int, ...], tuple[object, ...]]:
    """A backward graph from another joint graph of the same program, reading the values `reference`'s forward
    saves (Note [Tangent Retrace]): (graph, per placeholder of it: the reference's saved position, example)."""
    r = _regions(joint, num_primals, num_fw_outputs)
    same = _same_forward([n for n in joint.graph.nodes if n in r.forward], r.primals, reference)
    position = {n: k for k, n in enumerate(reference.saved_nodes)}
    missing = [n for n in r.saved if same.get(n) not in position]
    if missing:
        raise UnsupportedError(
            f"the backward retraced for a new tangent type needs the forward value {missing[0].name} "
            f"({missing[0].target}), which the compiled forward does not save; pass tangents of the type of the "
            "outputs, or give the subclass a __coerce_tangent_from__ hook"
        )
    graph = _backward_module(joint, r.saved, r.tangents, r.backward, r.bw_outs)
    example = tuple(n.meta["val"] for n in [*r.saved, *r.tangents])
    return graph, tuple(position[same[n]] for n in r.saved), example


def _same_forward(
    mine: Sequence[torch.fx.Node], primals: Sequence[torch.fx.Node], reference: Partition
) -> dict[torch.fx.Node, torch.fx.Node]:
    """Each forward-region node and primal of a retraced joint graph -> the reference joint's node of the same value
    (Note [Tangent Retrace]). The ops on tensors must be the same, in the same order; the size and stride reads of
    symbolic shapes (sym_size, sym_stride and arithmetic on them) are placed by the tracer where first needed, so a
    retrace for other tangents reads them in another order, or not at all: each is matched by its op and arguments,
    and one the reference does not run is left unmatched (refused only where the backward reads it)."""
    ops = [n for n in mine if not _is_symbolic(n)]
    ref_ops = [n for n in reference.forward_nodes if not _is_symbolic(n)]
    if len(ops) != len(ref_ops) or any(a.target != b.target for a, b in zip(ops, ref_ops, strict=False)):
        raise UnsupportedError(
            "the backward retraced for a new tangent type runs another forward than the one compiled (the program "
            "traces differently); pass tangents of the type of the outputs"
        )
    same = dict(zip(ops, ref_ops, strict=True)) | dict(zip(primals, reference.primal_nodes, strict=True))
    ref_symbolic = {key: n for n in reference.forward_nodes if _is_symbolic(n) and (key := _op_key(n, None))}
    for n in mine:
        if _is_symbolic(n) and (key := _op_key(n, same)) is not None and key in ref_symbolic:
            same[n] = ref_symbolic[key]
    return same


def _op_key(node: torch.fx.Node, same: dict[torch.fx.Node, torch.fx.Node] | None) -> tuple[object, ...] | None:
    """(target, arguments) of `node`, its argument nodes read through `same` (None: as they are); None where an
    argument node has no counterpart."""
    unmatched = False

    def read(arg: torch.fx.Node) -> torch.fx.Node:
        nonlocal unmatched
        found = arg if same is None else same.get(arg)
        unmatched = unmatched or found is None
        return arg if found is None else found

    args = torch.fx.node.map_arg((node.args, node.kwargs), read)
    return None if unmatched else (node.target, repr(args))


def _read_primals_not_clones(graph: torch.fx.Graph, primals: set[torch.fx.Node]) -> None:
    """Ops read a primal itself rather than the clone joint.py takes of each input gradients are taken for: in a
    functional graph both hold the same values (same strides and offset checked), and the clone would cost a copy
    per call and a saved copy of every parameter. An output that is the clone, or a view of it, keeps reading the
    clone (it must be a fresh tensor, not an alias of the input); one that only reads it (`x1 * x0`, a gradient
    `tangent * x0`) reads the primal, so that the backward saves the input itself, over its version counter (Note
    [Probing Eager's Backward]: where eager's saves are not probed, that counter is the one autograd checks)."""
    keep = _output_views(graph)
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.clone.default or node.kwargs or node.args[0] not in primals:
            continue
        source = node.args[0]
        assert isinstance(source, torch.fx.Node)
        value, original = node.meta.get("val"), source.meta.get("val")
        if not isinstance(value, torch.Tensor) or not isinstance(original, torch.Tensor):
            continue
        if value.stride() != original.stride() or symint_expr(value.storage_offset()) != symint_expr(
            original.storage_offset()
        ):
            # A write is functionalized as `aten.copy(t, new)`, whose result keeps t's storage offset. A clone of an
            # input reads at offset 0, the input itself may not (`b[1:]`): reading the primal instead would give the
            # program's clone, and the views of it the program returns, the input's offset where eager's have 0. Such
            # clones stay: one copy per call of an input taken at an offset.
            continue
        kept = frozenset(user for user in node.users if user in keep and _aliases(user, value))
        node.replace_all_uses_with(source, delete_user_cb=functools.partial(_reads_primal, kept))
        if not node.users:
            graph.erase_node(node)


def _reads_primal(kept: frozenset[torch.fx.Node], user: torch.fx.Node) -> bool:
    """Does `user` of an input's clone read the input instead: not the output, nor an output (or a view on the way
    to one) that aliases the clone (`kept`)?"""
    return user.op != "output" and user not in kept


def _clone_of(node: torch.fx.Node, position: dict[torch.fx.Node, int]) -> int | None:
    """The primal position `node` is a clone of, if it is one."""
    if node.target is not torch.ops.aten.clone.default or not node.args:
        return None
    source = node.args[0]
    return position.get(source) if isinstance(source, torch.fx.Node) else None


def _aliases(node: torch.fx.Node, value: torch.Tensor) -> bool:
    """Does `node`'s value (a tensor, or a tuple of them) share `value`'s storage? Unknown counts as yes."""
    found = node.meta.get("val")
    results = found if isinstance(found, tuple | list) else (found,)
    if not all(isinstance(r, torch.Tensor) for r in results):
        return True
    return any(storage_key(r) == storage_key(value) for r in results)


def _output_views(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose value an output is, or is a view of (walking view ops back to their source)."""
    output = next(n for n in graph.nodes if n.op == "output")
    stack = [n for n in output.all_input_nodes]
    seen: set[torch.fx.Node] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target.is_view:
            stack.extend(n.all_input_nodes[:1])
    return seen


def _saved(
    graph: torch.fx.Graph, available: set[torch.fx.Node], backward: set[torch.fx.Node], bw_outs: list[torch.fx.Node]
) -> list[torch.fx.Node]:
    """Forward-region nodes and primals (`available`) that the backward region reads, in graph order."""
    read = {p for n in backward for p in n.all_input_nodes} | set(bw_outs)
    return [n for n in graph.nodes if n in read and n in available and n not in backward]


def _forward_module(
    joint: torch.fx.GraphModule,
    primals: list[torch.fx.Node],
    forward: set[torch.fx.Node],
    fw_outs: list[torch.fx.node.Argument],
    saved: list[torch.fx.Node],
) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for p in primals:
        env[p] = g.node_copy(p)
    for node in joint.graph.nodes:
        if node.op != "placeholder" and node in forward:
            env[node] = g.node_copy(node, env.__getitem__)
    g.output([env[v] if isinstance(v, torch.fx.Node) else v for v in [*fw_outs, *saved]])
    return _module(joint, g)


def _backward_module(
    joint: torch.fx.GraphModule,
    saved: list[torch.fx.Node],
    tangents: list[torch.fx.Node],
    backward: set[torch.fx.Node],
    bw_outs: list[torch.fx.node.Argument],
) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in saved:
        placeholder = g.placeholder(f"saved_{node.name}")
        placeholder.meta = dict(node.meta)
        env[node] = placeholder
    for t in tangents:
        env[t] = g.node_copy(t)
    for node in joint.graph.nodes:
        if node.op != "placeholder" and node in backward:
            env[node] = g.node_copy(node, env.__getitem__)
    g.output([env[v] if isinstance(v, torch.fx.Node) else v for v in bw_outs])
    return _module(joint, g)


def _module(joint: torch.fx.GraphModule, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    gm = graph_module(joint, graph)
    gm.graph.lint()
    return gm
