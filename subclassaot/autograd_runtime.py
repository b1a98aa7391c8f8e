"""Stage `runtime` (training): the forward and backward graphs inside one autograd.Function.

Input: the `RuntimePlan`, the compiled forward and backward callables and the `BackwardGraph` record.
Output: a `GraphCall` for `runtime.make_runner`: it runs the forward graph through the Function so that autograd
sees user-level tensors (subclass outputs wrapped inside the Function, subclass gradients rebuilt from dense ones).
Invariants: autograd happens above subclass desugaring; saved tensors are the primals only (copies for the ones the
epilogue is about to mutate), see Note [Training By Recompute].
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.joint import BackwardGraph
from subclassaot.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.runtime import GraphCall, MetaEvaluator, RuntimePlan, non_view_alias, replay_steps
from subclassaot.schemas import AliasGroupRef, LeafSource, OutputKind, ReplaySource
from subclassaot.trace import UpdateKind


def _tangent_leaves(
    g: torch.Tensor, expected: SubclassNode | None, k: int, subclass_ok: bool = False
) -> list[torch.Tensor]:
    """Dense leaves of a runtime tangent, coerced to the structure the backward graph was traced for.
    `subclass_ok`: a subclass tangent of a plain output is passed as is (Note [Subclass Tangents Of Plain
    Outputs])."""
    if expected is None:
        if is_traceable_subclass(g) and not subclass_ok:
            raise UnsupportedError(
                f"the gradient for differentiable output {k} is a {type(g).__name__}, but the backward was compiled "
                "for a plain tensor; return a plain tensor from the loss path, or call the backward on a plain loss"
            )
        return [g]
    if not is_traceable_subclass(g) or type(g) is not expected.cls:
        coerce = getattr(expected.cls, "__coerce_tangent_from__", None)
        coerced = coerce(g, expected.ctx) if coerce is not None else None
        if coerced is None:
            raise UnsupportedError(
                f"the gradient for differentiable output {k} is a {type(g).__name__}, but the backward was compiled "
                f"for a {expected.cls.__name__} tangent; give {expected.cls.__name__} a classmethod "
                "__coerce_tangent_from__(tangent, ctx) that converts it"
            )
        g = coerced
    node, leaves = flatten_subclass(g, "grad")
    if node.ctx != expected.ctx:
        # The tangent has other metadata than the output it belongs to (a Replicate tangent for a Partial output):
        # let the subclass convert it, or refuse; reading it with the wrong metadata would be a wrong gradient.
        coerce_same = getattr(g, "__coerce_same_metadata_as_tangent__", None)
        coerced = coerce_same(expected.ctx) if coerce_same is not None else None
        if coerced is None:
            raise UnsupportedError(
                f"the gradient for differentiable output {k} ({type(g).__name__}) has ctx {node.ctx!r}, but the "
                f"backward was compiled for ctx {expected.ctx!r}; implement __coerce_same_metadata_as_tangent__"
                "(expected_ctx) on the class to convert it"
            )
        node, leaves = flatten_subclass(coerced, "grad")
    return leaves


def _replays_from(analysis: Any, o: int, first: int) -> bool:
    replay = analysis.outputs[o].replay
    return bool(
        analysis.outputs[o].kind is OutputKind.TENSOR  # not a second position of the same object
        and replay is not None
        and replay.source is ReplaySource.WRAPPER
        and replay.root_bases
        and replay.root_bases[0] == first
    )


# Note [Subclass Tangents Of Plain Outputs]
# A loss that mixes a subclass output with a plain one (`pair_out.sum() + plain_out.sum()`) gives the plain output a
# subclass gradient; eager's backward then runs the plain ops' derivatives on it, and the plain inputs get subclass
# gradients. The eager backend's backward graph is a graph of aten ops, which does the same when called with the
# subclass tangent as is. A compiled backend's kernels take plain tensors only: there such a tangent is refused, as is
# a gradient of a subclass input that such a tangent reaches (its dense leaves would be subclasses).


def _restride(t: torch.Tensor, stride: tuple[int, ...] | None) -> torch.Tensor:
    if stride is None or tuple(t.stride()) == stride:
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _dense_zeros(t: torch.Tensor) -> list[Callable[[], torch.Tensor]]:
    """Makers of zero tangents for `t`'s dense leaves (shape, dtype, device only: nothing is kept alive)."""
    leaves = flatten_subclass(t, "out")[1] if is_traceable_subclass(t) else [t]
    metas = [(tuple(leaf.shape), leaf.dtype, leaf.device) for leaf in leaves]
    return [functools.partial(torch.zeros, shape, dtype=dtype, device=device) for shape, dtype, device in metas]


def training_call(
    plan: RuntimePlan,
    fw: Callable[..., object],
    bw: Callable[..., object] | None,
    bw_meta: BackwardGraph,
    differentiable_backward: bool,
) -> GraphCall:
    analysis, layout, flat = plan.analysis, plan.layout, plan.flat
    n_updates = len(plan.graph_outputs.updates)
    fresh_outputs = [
        o
        for o, info in enumerate(analysis.outputs)
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    ]
    mutated_graph_inputs = set()
    for k, item in enumerate(layout.graph_inputs):
        members = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
        if any(analysis.mutations[m].any or analysis.mutations[m].version_bumped for m in members):
            mutated_graph_inputs.add(k)

    class CompiledStep(torch.autograd.Function):
        @staticmethod
        def forward(
            ctx: Any, holder: tuple[list[torch.Tensor], list[torch.Tensor], dict[str, int]], *user: torch.Tensor
        ) -> Any:
            graph_in, graph_dense, symbols = holder
            # Subclass gradients are rebuilt with the real inputs' outer size and stride (the traced ones may be
            # symbolic).
            ctx.input_meta = [(tuple(t.shape), tuple(t.stride())) for t in user]
            with torch.no_grad():
                outs = [
                    non_view_alias(o) if isinstance(o, torch.Tensor) and o._is_view() else o
                    for o in cast(Sequence[Any], fw(*graph_in))  # tensors, then symbolic ints
                ]
            saved = [g.clone() if k in mutated_graph_inputs else g for k, g in enumerate(graph_in)]
            ctx.save_for_backward(*saved)
            tensors = outs[:n_updates]
            pos = n_updates
            for o in fresh_outputs:
                info = analysis.outputs[o]
                leaves = [
                    # An input returned by the program's own autograd.Function: return it as is, and autograd
                    # makes the output a view of it with our backward, exactly as eager does.
                    graph_dense[leaf.passthrough] if leaf.passthrough is not None else out
                    for leaf, out in zip(info.leaves, outs[pos : pos + len(info.leaves)], strict=True)
                ]
                pos += len(info.leaves)
                if info.tree is None:
                    tensors.append(leaves[0])
                else:
                    assert info.outer_meta is not None
                    size, stride, _ = ev.meta(info.outer_meta, symbols)
                    tensors.append(
                        unflatten_subclass(info.tree, leaves, outer_size=size, outer_stride=stride, check=False)
                    )
            n_bases = plan.graph_outputs.num_bases
            tensors.extend(_fold_roots(outs[pos : pos + n_bases], symbols))
            symints = outs[pos + n_bases :]
            # Note [Subclass Inputs Mutated In Training]: the new value of such an input, as a wrapper.
            for i in bw_meta.wrapper_updates:
                tree = layout.trees[i]
                assert tree is not None
                leaves = [outs[original_update[j]] for j in layout.leaves_of_input[i]]
                real = user[i]
                tensors.append(
                    unflatten_subclass(tree, leaves, outer_size=real.shape, outer_stride=real.stride(), check=False)
                )
            non_diff = [t for i, t in enumerate(tensors) if i not in bw_meta.diff_outputs]
            ctx.mark_non_differentiable(*[t for t in non_diff if isinstance(t, torch.Tensor)])
            # Unused outputs send None: a gradient reached by no used output stays None, as in eager.
            ctx.set_materialize_grads(False)
            ctx.zeros = [_dense_zeros(tensors[i]) for i in bw_meta.diff_outputs]
            tensors.extend(symints)
            ctx.bw_targets = [graph_dense[j] for j in bw_meta.backward_mutations] if bw_meta.backward_mutations else []
            return tuple(tensors)

        @staticmethod
        def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
            if bw_meta.error is not None or bw is None:
                raise RuntimeError(str(bw_meta.error)) from bw_meta.error  # Note [Backward Errors Are Deferred]
            if torch.is_grad_enabled() and not differentiable_backward:
                # create_graph=True: the eager backend's backward graph runs aten ops autograd records (double
                # backward works); a compiled backend's kernels are opaque to autograd.
                raise UnsupportedError(
                    "double backward (create_graph=True) through a compiled backward: the backend's kernels are "
                    'not differentiable. Compile with backend="eager" to differentiate the gradient again'
                )
            saved = ctx.saved_tensors
            tangents: list[torch.Tensor] = []
            present: set[int] = set()
            for k, i in enumerate(bw_meta.diff_outputs):
                g = grads[i]
                if g is None:
                    tangents.extend(z() for z in ctx.zeros[k])
                    continue
                present.add(k)
                tangents.extend(_tangent_leaves(g, bw_meta.tangent_trees[k], k, subclass_ok=subclass_tangents_ok))
            # The backward graph was traced for tangents laid out like the forward outputs (views in it depend on
            # that layout): give the runtime tangents the same strides.
            tangents = [
                t if is_traceable_subclass(t) else _restride(t, s)
                for t, s in zip(tangents, bw_meta.tangent_strides, strict=True)
            ]
            dense_grads = list(cast(Sequence[torch.Tensor], bw(*saved, *tangents)))
            n_grads = len(dense_grads) - len(ctx.bw_targets)
            with torch.no_grad():
                # See BackwardGraph.backward_mutations: what the program's backward wrote, written for real.
                for target, value in zip(ctx.bw_targets, dense_grads[n_grads:], strict=True):
                    target.copy_(value)
            dense_grads = dense_grads[:n_grads]
            n_user = len(layout.trees)
            # Gradients of the Function's inputs: the user tensors, then the synthetic bases of aliased inputs.
            result: list[torch.Tensor | None] = [None] * (n_user + len(bw_meta.group_grads))
            pos = 0
            targets = [*bw_meta.grad_inputs, *range(n_user, n_user + len(bw_meta.group_grads))]
            for k, i in enumerate(targets):
                tree = bw_meta.grad_trees[k]
                width = 1 if tree is None else tree.num_leaves
                leaves = dense_grads[pos : pos + width]
                pos += width
                if k in bw_meta.unused or not (bw_meta.tangent_deps[k] & present):
                    continue  # eager's gradient is None: no used output reaches this input
                if tree is None:
                    result[i] = leaves[0]
                elif any(is_traceable_subclass(leaf) for leaf in leaves):
                    raise UnsupportedError(
                        f"the gradient of tensor input {i} (a {tree.cls.__name__}) reaches a subclass tangent given "
                        "to a plain output; the backward was compiled for plain tangents there. Call the backward "
                        "on a plain loss, or return a plain tensor from the loss path"
                    )
                elif i < n_user:
                    size, stride = ctx.input_meta[i]
                    result[i] = unflatten_subclass(tree, leaves, outer_size=size, outer_stride=stride, check=False)
                else:
                    result[i] = unflatten_subclass(tree, leaves, check=False)
            return (None, *result)

    n_wrappers = len(bw_meta.wrapper_updates)
    ev = MetaEvaluator()
    # Note [Subclass Tangents Of Plain Outputs]: only a backward graph of aten ops (the eager backend) can run on them.
    subclass_tangents_ok = differentiable_backward
    roots = analysis.wrapper_roots()
    replays = {
        first: analysis.outputs[o].replay
        for o in range(len(analysis.outputs))
        for first in roots
        if _replays_from(analysis, o, first)
    }

    def _fold_roots(bases: list[Any], symbols: dict[str, int]) -> list[Any]:
        # Note [Subclass Views Of Intermediates In Training]: each replayed-from intermediate subclass, wrapped.
        folded: list[Any] = []
        for number, base in enumerate(bases):
            if number in roots:
                replay = replays[number]
                assert replay is not None and replay.root_tree is not None and replay.root_meta is not None
                size, stride, _ = ev.meta(replay.root_meta, symbols)
                leaves = [bases[b] for b in roots[number]]
                folded.append(
                    unflatten_subclass(replay.root_tree, leaves, outer_size=size, outer_stride=stride, check=False)
                )
            elif not any(number in members for members in roots.values()):
                folded.append(base)
        return folded

    def _unfold_roots(folded: list[Any], prewrapped: dict[int, torch.Tensor], symbols: dict[str, int]) -> list[Any]:
        bases: list[Any] = [None] * plan.graph_outputs.num_bases
        values = iter(folded)
        for number in range(len(bases)):
            if number in roots:
                wrapper = next(values)
                for b, leaf in zip(roots[number], flatten_subclass(wrapper, "base")[1], strict=True):
                    bases[b] = leaf
                for o, info in enumerate(analysis.outputs):
                    if _replays_from(analysis, o, number):
                        assert info.replay is not None
                        prewrapped[o] = replay_steps(wrapper, info.replay.steps, ev, symbols)
            elif bases[number] is None and not any(number in members for members in roots.values()):
                bases[number] = next(values)
        return bases

    original_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.ORIGINAL}

    def call(
        values: Sequence[object], graph_in: list[torch.Tensor], dense: list[torch.Tensor], symbols: dict[str, int]
    ) -> tuple[list[object], dict[int, torch.Tensor], dict[int, torch.Tensor]]:
        user = [values[i] for i in flat.tensor_indices]
        bases = [graph_in[k] for k in bw_meta.group_grads]  # Note [Aliased Inputs In Training]
        tensors = list(CompiledStep.apply((graph_in, dense, symbols), *user, *bases))  # type: ignore[no-untyped-call]
        outs: list[object] = list(tensors[:n_updates])
        prewrapped: dict[int, torch.Tensor] = {}
        pos = n_updates
        for o in fresh_outputs:
            prewrapped[o] = tensors[pos]
            outs.extend([tensors[pos]] * len(analysis.outputs[o].leaves))  # placeholders keep the layout
            pos += 1
        n_bases = plan.graph_outputs.num_bases
        n_folded = n_bases - sum(len(members) - 1 for members in roots.values())
        outs.extend(_unfold_roots(tensors[pos : pos + n_folded], prewrapped, symbols))
        pos += n_folded
        wrappers = dict(zip(bw_meta.wrapper_updates, tensors[pos : pos + n_wrappers], strict=True))
        outs.extend(tensors[pos + n_wrappers :])  # the symbolic ints
        return outs, prewrapped, wrappers

    return call
