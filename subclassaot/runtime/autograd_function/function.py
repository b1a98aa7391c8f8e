"""Stage `runtime` (training): `CompiledStep`, the autograd.Function that runs the forward and backward graphs (Note
[Training Through A Joint Graph]), and the gradients it hands back per input.

Input: the `_Step` of a compile and the user-level inputs.
Output: the forward graph's outputs through the Function; in backward, one gradient per Function input.
Invariants: autograd happens above subclass desugaring; saved values are what the partitioned forward returns after
its GraphOutputs (tensors through save_for_backward, symbolic ints on ctx); a saved primal the epilogue is about to
mutate is copied first.
"""

from __future__ import annotations

import weakref
from collections.abc import Container, Sequence
from typing import Any, cast

import torch

from subclassaot.authoring.protocol import SubclassNode, flatten_subclass, unflatten_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.autograd_function.backward_checks import (
    _check_double_backward,
    _check_early_leaves,
    _hold_checked,
    _LeafGrads,
    _live_primals,
    _raise_deferred,
    _refuse_written_unprobed_wrappers,
    _remade_leaves,
    _save_values,
    _written_view_leaves,
)
from subclassaot.runtime.autograd_function.outputs import (
    _distinct_outputs,
    _fresh_output,
    _kept_leaves,
    _root_values,
    _wrapper_values,
)
from subclassaot.runtime.autograd_function.plain import _give_counts, _plain_backward, _plain_forward, _saved_tensors
from subclassaot.runtime.autograd_function.saved_checks import _check_saved_tensors, _hold_remade
from subclassaot.runtime.autograd_function.step import _Step
from subclassaot.runtime.autograd_function.tangents import (
    _SAME,
    _coerced_instead,
    _collect_tangents,
    _dense_strides,
    _dense_zeros,
    _plain_tangents,
    _restride,
    _shared_grads,
    _unshared,
)
from subclassaot.runtime.plan import (
    BackwardPlan,
    RetracedBackward,
    non_view_alias,
)
from subclassaot.torch_internals import (
    differentiable_dtype,
    get_version,
    set_version,
)


def _note_backward_targets(
    ctx: Any, bw_meta: BackwardPlan, graph_dense: Sequence[torch.Tensor], user: Sequence[torch.Tensor]
) -> None:
    """On `ctx`: the dense inputs the backward writes, and the inputs it reshapes (Note [Custom Functions])."""
    ctx.bw_targets = [graph_dense[j] for j in bw_meta.backward_mutations] if bw_meta.backward_mutations else []
    ctx.bw_reshapes = [(user[r.position], r) for r in bw_meta.backward_reshapes] if bw_meta.backward_reshapes else ()


class CompiledStep(torch.autograd.Function):
    """The compiled forward and backward graphs as one autograd node (`CompiledStepBackward` in a grad_fn chain),
    shared by every compile: the first argument carries the compile's `_Step`."""

    @staticmethod
    def forward(
        ctx: Any,
        holder: tuple[_Step, list[torch.Tensor], list[torch.Tensor], dict[str, int], list[Any], _LeafGrads],
        *user: torch.Tensor,
    ) -> Any:
        if (p := (s := holder[0]).plain) is not None:
            if p.lone is not None:  # (`_PlainStep.lone`: the one output, as `_plain_forward` returns it)
                ctx.step = s
                out = s.plain_fw(*user)[0]
                ctx.set_materialize_grads(False)
                return (non_view_alias(out) if out._is_view() else out,)
            return _plain_forward(ctx, s, p, user)
        s, graph_in, graph_dense, symbols, noted, early_grads = holder
        ctx.step = s
        ctx.early_grads = early_grads
        if s.bw_meta.error is not None:
            _hold_remade(ctx, user, noted)
        bw_meta, n_updates = s.bw_meta, s.n_updates
        # Subclass gradients are rebuilt with the real inputs' outer size and stride (the traced ones may be
        # symbolic).
        ctx.input_meta = (
            {i: (tuple(user[i].shape), tuple(user[i].stride())) for i in s.subclass_inputs} if s.subclass_inputs else {}
        )
        # A Function's forward runs with grad mode off: the graph's ops record nothing.
        if bw_meta.forward_reads_grad_mode:  # Note [Training Through A Joint Graph]
            with torch.enable_grad():
                all_outs = list(cast("Sequence[Any]", s.fw(*[_detached(g) for g in graph_in])))
        else:
            all_outs = list(cast("Sequence[Any]", s.fw(*graph_in)))  # GraphOutputs, then the saved values
        n_outs = len(all_outs) - bw_meta.num_saved
        outs = _distinct_outputs(all_outs[:n_outs])  # tensors, then symbolic ints
        saved = all_outs[n_outs:]
        for k in s.clone_saved:
            saved[k] = saved[k].clone()  # the epilogue is about to write this input
        ctx.saved_ints = [(k, v) for k, v in enumerate(saved) if not isinstance(v, torch.Tensor)]
        # See Note [Training Through A Joint Graph]: weak references, so that the forward keeps no input alive.
        ctx.primals = [(weakref.ref(g), get_version(g)) for g in graph_in] if s.rerun is not None else None
        tensors = outs[:n_updates]
        for o in s.fresh_outputs:
            at = s.plain_fresh.get(o)
            if at is not None:  # a plain tensor, the graph's own (the loop's general case, decided once)
                tensors.append(outs[at])
            else:
                tensors.append(_fresh_output(s, o, user, outs, graph_dense, symbols))
        pos = n_updates + s.plan.graph_outputs.num_fresh
        n_bases = s.plan.graph_outputs.num_bases
        base_values = outs[pos : pos + n_bases]
        tensors.extend(base_values)
        # The graph's leaves of outputs rebuilt beside inner tensors of inputs (a jagged output sharing an input's
        # offsets), then the symbolic ints, then the stride probes (Note [Strides The Kernels Choose]): only
        # their strides are read, from aliases that are not the graph's outputs themselves (which may be returned
        # above too)
        tail = outs[pos + n_bases :]
        if s.rebuilt_leaves:
            tail = [outs[n_updates + k] for k in s.rebuilt_leaves] + tail
        symints = [o.detach() if isinstance(o, torch.Tensor) else o for o in tail] if tail else []
        if bw_meta.wrapper_updates:
            ctx.kept_leaves = _kept_leaves(s, graph_dense, len(tensors))
            tensors.extend(_wrapper_values(s, user, outs, graph_dense, symbols))
        if s.roots:
            tensors.extend(_root_values(s, base_values, graph_dense, symbols))
        ctx.zeros = [_dense_zeros(tensors[i]) for i in bw_meta.diff_outputs]
        if not s.plain_tangents:  # (a subclass output's zero tangent is its class's zeros_like: _collect_tangents)
            ctx.outer = [(tuple(tensors[i].shape), tuple(tensors[i].stride())) for i in bw_meta.diff_outputs]
        # The tail (symbolic ints, stride probes, the graph's leaves of an output rebuilt beside inner tensors
        # of an input: a jagged output sharing an input's offsets) has no tangent traced for it; as a Function
        # output it would otherwise take the Function's history, where eager's has none.
        tensors.extend(symints)
        if s.counts:
            _give_counts(s, tensors)
        non_diff = [t for i, t in enumerate(tensors) if i not in s.diff_set and isinstance(t, torch.Tensor)]
        if non_diff:
            ctx.mark_non_differentiable(*non_diff)
        _save_values(ctx, s, saved, (user, graph_in, graph_dense, tensors), noted)
        if s.checks:
            _hold_checked(ctx, s, tensors, user, noted)
        # Unused outputs send None: a gradient reached by no used output stays None, as in eager.
        ctx.set_materialize_grads(False)
        _note_backward_targets(ctx, bw_meta, graph_dense, user)
        return tuple(tensors)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
        s: _Step = ctx.step
        if s.plain is not None and (plain := _plain_backward(ctx, s, s.plain, grads)) is not None:
            return plain
        bw_meta, bw = s.bw_meta, s.bw
        if bw_meta.error is not None:
            _check_early_leaves(s, ctx.early_grads, bw_meta)
            _raise_deferred(bw_meta, bw is None, grads, _remade_leaves(s, ctx.remade))
        if bw is None:
            raise AssertionError("BUG: a backward without a graph or an error")
        create_graph = torch.is_grad_enabled()
        if create_graph:
            _check_double_backward(s, ctx.primals)
        if s.checks and ctx.checked is not None:
            _check_saved_tensors(ctx.checks, ctx.checked, grads, _written_view_leaves(s, ctx.viewed))
        if getattr(ctx, "unprobed", ()) or getattr(ctx, "unprobed_outputs", ()):
            _refuse_written_unprobed_wrappers(s, getattr(ctx, "unprobed", ()), getattr(ctx, "unprobed_outputs", ()))
        saved = _saved_tensors(ctx)
        for k, v in ctx.saved_ints:
            saved.insert(k, v)
        collected = _plain_tangents(grads, bw_meta, ctx.zeros) if s.plain_tangents else None
        if collected is None:
            collected = _collect_tangents(
                grads, bw_meta, ctx.zeros, getattr(ctx, "outer", None), getattr(ctx, "kept_leaves", {})
            )
        per_output, trees, present, coerced = collected
        retyped = any(tree is not _SAME for tree in trees)
        if retyped and create_graph and not _coerced_instead(per_output, trees, coerced):
            raise UnsupportedError(
                "double backward (create_graph=True) with a tangent of another type than the output's "
                "(Note [Tangent Retrace]); pass tangents of the type of the outputs"
            )
        absent = frozenset(s.typed_by - present)  # Note [Tangent Retrace]
        try:
            found = (
                s.variants.get(bw_meta, trees, per_output, absent, ctx.zeros)
                if retyped or (absent and not create_graph)
                else None
            )
        except UnsupportedError:
            if not retyped or not _coerced_instead(per_output, trees, coerced):
                raise
            found = s.variants.get(bw_meta, trees, per_output, absent, ctx.zeros) if absent else None
        if found is not None:
            dense_grads, shape = _run_variant(found, saved, per_output)
        else:
            # The backward graph was traced for tangents laid out like the forward outputs (views in it depend
            # on that layout): give the runtime tangents the same strides.
            tangents = [
                _restride(t, stride if order is None else _dense_strides(t.shape, order))
                for t, stride, order in zip(
                    [t for ts in per_output for t in ts], bw_meta.tangent_strides, bw_meta.tangent_orders, strict=True
                )
            ]  # Note [Tangent Retrace]
            if create_graph:
                assert s.rerun is not None
                all_outs = cast(Sequence[torch.Tensor], s.rerun(*_live_primals(ctx.primals), *tangents))
                dense_grads = list(all_outs[bw_meta.num_fw_outputs :])
            else:
                dense_grads = list(cast("Sequence[torch.Tensor]", bw(*saved, *tangents)))
            shape = (bw_meta.grad_trees, bw_meta.unused, bw_meta.tangent_deps, bw_meta.grad_stride_leaves)
        if ctx.bw_targets or ctx.bw_reshapes:
            dense_grads = _backward_writes(ctx.bw_targets, _reshapes_run(ctx.bw_reshapes, present), dense_grads)
        return (None, *_unshared(_input_grads(ctx, shape, dense_grads, present, grads), grads))


def _input_grads(
    ctx: Any,
    shape: tuple[Any, ...],
    dense_grads: list[torch.Tensor],
    present: Container[int],
    grads: Sequence[torch.Tensor | None],
) -> list[torch.Tensor | None]:
    """Gradients of the Function's inputs (the user tensors, then the synthetic bases of aliased inputs) from the
    backward graph's dense ones; `grads`: the tangents the Function received."""
    s: _Step = ctx.step
    result: list[torch.Tensor | None] = [None] * s.n_results
    pos = 0
    grad_trees, unused, deps, stride_leaves = shape
    shared = _shared_grads(dense_grads) if any(tree is not None for tree in grad_trees) else frozenset()
    for k, i in enumerate(s.targets):
        tree = grad_trees[k]
        width = 1 if tree is None else tree.num_leaves
        leaves = dense_grads[pos : pos + width]
        pos += width
        if tree is not None and shared:  # Note [Tangent Retrace]
            leaves = [g.clone() if id(g) in shared and differentiable_dtype(g.dtype) else g for g in leaves]
        if k in unused or not (deps[k] & present):
            continue  # eager's gradient is None: no used output reaches this input
        if tree is None:
            result[i] = leaves[0]
        elif i in ctx.input_meta:
            size, stride = ctx.input_meta[i]
            same = _tangent_passed_through(tree, leaves, size, grads)
            result[i] = (
                same
                if same is not None
                else _subclass_grad(tree, leaves, size, stride, i in s.releafed, stride_leaves[k])
            )
        else:  # a plain input's subclass gradient (`x.exp() + w`, x a subclass): the tangent itself where passed through
            rebuilt = unflatten_subclass(tree, leaves, check=False)
            same = _tangent_passed_through(tree, leaves, tuple(rebuilt.shape), grads)
            result[i] = rebuilt if same is None else same
    return result


def _tangent_passed_through(
    tree: SubclassNode, leaves: Sequence[torch.Tensor], size: tuple[int, ...], grads: Sequence[torch.Tensor | None]
) -> torch.Tensor | None:
    """The tangent the Function received whose dense leaves the backward graph returns unchanged, object for object,
    as this subclass gradient, with its structure and size; None where there is none (Note [Gradient Accumulators Of
    Leaves])."""
    for g in grads:
        if g is None or type(g) is not tree.cls or tuple(g.shape) != size:
            continue
        node, own = flatten_subclass(g, "grad")
        if node.attrs == tree.attrs and node.ctx == tree.ctx and len(own) == len(leaves):
            if all(a is b for a, b in zip(own, leaves, strict=True)):
                return g
    return None


def _run_variant(
    variant: RetracedBackward, saved: list[Any], per_output: list[list[torch.Tensor]]
) -> tuple[list[torch.Tensor], tuple[Any, ...]]:
    flat_tangents = [t.resolve_neg() for ts in per_output for t in ts]  # (see _restride)
    dense_grads = list(
        cast(Sequence[torch.Tensor], variant.run(*[saved[j] for j in variant.saved_index], *flat_tangents))
    )
    return dense_grads, (variant.grad_trees, variant.unused, variant.tangent_deps, variant.grad_stride_leaves)


def _reshapes_run(
    reshapes: Sequence[tuple[torch.Tensor, Any]], present: Container[int]
) -> list[tuple[torch.Tensor, Any]]:
    """The backward's changes to inputs whose custom Function nodes eager runs for the tangents `present` (Note
    [Custom Functions]): a node no output with a tangent reaches does not run in eager."""
    found = []
    for target, reshape in reshapes:
        runs = [bool(any(k in present for k in reached)) for reached in reshape.reached_by]
        if all(runs):
            found.append((target, reshape))
        elif any(runs):
            raise UnsupportedError(
                f"input {reshape.position}: the backward of several custom autograd.Function nodes changes this input "
                "(an in-place op or metadata change on a saved tensor), and only some of those nodes run for the "
                "outputs given a gradient here, which the compiled backward cannot replay apart (Note [Custom "
                "Functions]). Call backward through all of the outputs that require grad, or change a clone in the "
                "backward"
            )
    return found


def _backward_writes(
    targets: list[torch.Tensor], reshapes: Sequence[tuple[torch.Tensor, Any]], dense_grads: list[torch.Tensor]
) -> list[torch.Tensor]:
    """What the program's backward wrote (BackwardPlan.backward_mutations, the last dense gradients) and reshaped,
    done for real; the gradients without those values."""
    reshaped = [get_version(target) for target, _ in reshapes] if reshapes else ()  # eager's count, before write-backs
    if targets:
        n_grads = len(dense_grads) - len(targets)
        with torch.no_grad():
            for target, value in zip(targets, dense_grads[n_grads:], strict=True):
                target.copy_(value)
        dense_grads = dense_grads[:n_grads]
    for (target, reshape), version in zip(reshapes, reshaped, strict=True) if reshapes else ():
        if reshape.size is not None and reshape.stride is not None:  # Note [Custom Functions]
            with torch.no_grad():
                target.as_strided_(reshape.size, reshape.stride, target.storage_offset())
        set_version(target, version + reshape.bumps)
    return dense_grads


def _subclass_grad(
    tree: SubclassNode,
    leaves: list[torch.Tensor],
    size: Sequence[int],
    stride: Sequence[int],
    releafed: bool,
    j: int | None,
) -> torch.Tensor:
    """A user input's gradient rebuilt from its dense leaves with the input's outer size and stride, or the layout
    of the leaf `j` the gradient's strides follow (Note [Tangent Retrace])."""
    if releafed:  # in the layout of eager's first read: Note [Leaves Laid Out Anew Under no_grad]
        first = leaves[0 if j is None else j]
        size = tuple(first.shape)
        stride = tuple(first.stride()) if j is not None else tuple(first.contiguous().stride())
    elif j is not None and tuple(leaves[j].shape) == size:
        stride = tuple(leaves[j].stride())
    return unflatten_subclass(tree, leaves, outer_size=size, outer_stride=stride, check=False)


def _detached(value: object) -> object:
    return value.detach() if isinstance(value, torch.Tensor) else value
