"""Stage `runtime` (training), plain steps (Note [Straight-Line Runners]): a compile whose Function needs none of the
general path's per-call work (no subclass tangents, retraces, deferred errors or held inputs) runs a forward and
backward that read only what `_PlainStep` keeps.

Input: the `_Step`.
Output: `_PlainStep` (or None where the step is not plain), and the plain forward and backward.
Invariants: a plain step computes what the general path computes; it falls back to the general path
(`_to_general`) where a call needs more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from subclassaot.runtime.autograd_function.backward_checks import _hold_checked
from subclassaot.runtime.autograd_function.outputs import _distinct_outputs
from subclassaot.runtime.autograd_function.saved_checks import _check_saved_tensors, _note_counters
from subclassaot.runtime.autograd_function.step import _PlainStep, _Step
from subclassaot.runtime.autograd_function.tangents import _restride, _unshared
from subclassaot.runtime.plan import (
    non_view_alias,
)
from subclassaot.runtime.steps import (
    epilogue_plan,
)
from subclassaot.torch_internals import (
    output_zeros,
    set_version,
)


def _plain_step(s: _Step, unreached: Sequence[int], stand_ins: frozenset[int]) -> _PlainStep | None:
    """The step's per-call choices where it is plain (Note [Straight-Line Runners]), else None."""
    plan, bw_meta, layout = s.plan, s.bw_meta, s.plan.layout
    analysis, gout = plan.analysis, plan.graph_outputs
    n = len(s.fresh_outputs)
    inputs_plain = all(tree is None for tree in layout.trees) and tuple(layout.graph_inputs) == tuple(
        range(len(layout.trees))
    )
    outputs_plain = (
        s.n_updates == 0
        and gout.num_fresh == n
        and not (gout.num_bases or gout.num_symints or analysis.stride_probes)
        and tuple(s.plain_fresh.get(o) for o in s.fresh_outputs) == tuple(range(n))
        and not any(analysis.outputs[o].view_of_fresh for o in s.fresh_outputs)
        and not (s.rebuilt_leaves or s.roots or bw_meta.wrapper_updates)
    )
    backward_plain = (
        bw_meta.error is None
        and s.bw is not None
        and s.rerun is None
        and not bw_meta.forward_reads_grad_mode
        and s.plain_tangents
        and not s.typed_by
        and all(order is None for order in bw_meta.tangent_orders)
        and len(bw_meta.tangent_strides) == len(bw_meta.diff_outputs)
        and len(bw_meta.tangent_deps) == len(bw_meta.grad_inputs)
        and all(tree is None for tree in bw_meta.grad_trees)
        and not (bw_meta.group_grads or bw_meta.backward_mutations or bw_meta.backward_reshapes)
    )
    # (an empty epilogue: the counters of the tensors eager's backward checks are final when the forward returns)
    call_plain = epilogue_plan(plan).empty and not (
        s.clone_saved
        or s.held_inputs
        or s.taken
        or s.apart
        or unreached
        or stand_ins
        or s.subclass_inputs
        or s.viewed_inputs
        or any(late is not None for _, _, late, _, _, _ in s.checks)  # (bound once the outputs are built)
    )
    if not (inputs_plain and outputs_plain and backward_plain and call_plain):
        return None
    deps = tuple((k, i, bw_meta.tangent_deps[k]) for k, i in enumerate(s.targets) if k not in bw_meta.unused)
    # (a 0-dim tangent's stride is always (): nothing to compare per call)
    strides = tuple(None if stride == () else stride for stride in bw_meta.tangent_strides)
    reached = tuple((k, i) for k, i, d in deps if d)
    lone = None
    if n == 1 and bw_meta.diff_outputs == (0,) and not (bw_meta.num_saved or s.counts or s.checks):
        if len(reached) == 1 and reached[0][0] == 0 and len(s.targets) == 1:
            lone = (reached[0][1], strides[0])
    return _PlainStep(
        n_outs=n,
        diff=bw_meta.diff_outputs,
        non_diff=tuple(k for k in range(n) if k not in s.diff_set),
        strides=strides,
        reached=reached,
        deps=deps,
        n_results=s.n_results,
        lone=lone,
    )


def _plain_forward(ctx: Any, s: _Step, p: _PlainStep, user: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """CompiledStep.forward of a plain step (Note [Straight-Line Runners]): what the general one does for it. No
    zeros' metadata is kept per call: a missing tangent's zeros come from the node's own record of the output
    (`output_zeros`)."""
    ctx.step = s
    all_outs: Sequence[Any] = s.plain_fw(*user)
    n = p.n_outs
    if n == 1 and len(all_outs) == 1:  # (one output, saving nothing: `_distinct_outputs` without its loop)
        out = all_outs[0]
        ctx.saved_ints, ctx.saves_tensors = (), False
        outs: tuple[Any, ...] = (non_view_alias(out) if out._is_view() else out,)
        if s.counts:
            _give_counts(s, outs)
    else:
        outs = tuple(_distinct_outputs(all_outs[:n]))
        if s.counts:
            _give_counts(s, outs)
        _plain_saves(ctx, s, all_outs[n:])
    if p.non_diff:
        ctx.mark_non_differentiable(*[outs[k] for k in p.non_diff])
    if s.checks:  # (nothing writes an input after the forward: `_note_counters` now, not after an epilogue)
        _hold_checked(ctx, s, outs, user, [])
        _note_counters([ctx])
    # Unused outputs send None: a gradient reached by no used output stays None, as in eager.
    ctx.set_materialize_grads(False)
    return outs


def _give_counts(s: _Step, outs: Sequence[Any]) -> None:
    """The Function's fresh outputs and intermediate bases get eager's counts (steps.function_counts) before the
    forward saves them: a save of one records its count then, and autograd's check of it reads the count eager's
    saving node saw, after the program's writes (runtime/steps.py: Version Counters As Eager's)."""
    for k, count in s.counts:
        set_version(outs[k], count)


def _plain_saves(ctx: Any, s: _Step, saved: Sequence[Any]) -> None:
    """`ctx`'s saved values of a plain step: the graph's outputs after the Function's."""
    ctx.saved_ints = [(k, v) for k, v in enumerate(saved) if not isinstance(v, torch.Tensor)]
    # See Note [Probing Eager's Backward]: each through an alias with a counter of its own.
    tensors = [v for v in saved if isinstance(v, torch.Tensor)]
    ctx.save_for_backward(*[v.data for v in tensors] if s.saves_apart else tensors)
    ctx.saves_tensors = bool(tensors)


def _saved_tensors(ctx: Any) -> list[torch.Tensor]:
    """The tensors the forward saved. A forward that saved none reads nothing: eager's backward runs again through
    nodes that saved no tensor (a copy_()'s), where a second read of `ctx.saved_tensors` raises once its buffers
    were freed ("backward through the graph a second time")."""
    if not ctx.saves_tensors:
        return []
    saved = list(ctx.saved_tensors)  # (unpacking checks the counters of the inputs held after the values, too)
    return saved[: getattr(ctx, "num_kept", len(saved))]


def _to_general(ctx: Any, p: _PlainStep) -> None:
    """The context of a plain step's forward made ready for the general backward (what the general forward leaves
    it: Note [Straight-Line Runners])."""
    ctx.primals, ctx.input_meta, ctx.bw_targets, ctx.bw_reshapes = None, {}, [], ()
    if p.lone is not None:  # (its forward kept no record of its saves: there are none)
        ctx.saved_ints, ctx.saves_tensors = (), False
    zeros = [output_zeros(ctx, i) for i in p.diff]
    ctx.zeros = [[(z.shape, z.dtype, z.device)] for z in zeros]


def _plain_backward(
    ctx: Any, s: _Step, p: _PlainStep, grads: Sequence[torch.Tensor | None]
) -> tuple[torch.Tensor | None, ...] | None:
    """CompiledStep.backward of a plain step without create_graph (Note [Straight-Line Runners]); None, with the
    context made ready for the general backward, where grad mode is on (create_graph) or a tangent is no plain
    tensor (the general backward decides)."""
    if torch.is_grad_enabled():
        _to_general(ctx, p)
        return None
    if s.checks:
        _check_saved_tensors(ctx.checks, ctx.checked, grads, ())
    tangents = []
    present = 0
    for k, i in enumerate(p.diff):
        g = grads[i]
        if g is None:
            g = output_zeros(ctx, i)
        elif type(g) is not torch.Tensor:
            _to_general(ctx, p)
            return None
        else:
            present += 1
        stride = p.strides[k]
        tangents.append(g if (stride is None or g.stride() == stride) and not g.is_neg() else _restride(g, stride))
    if p.lone is not None:  # (nothing saved)
        dense_grads: Sequence[torch.Tensor] = s.plain_bw(*tangents)
    elif ctx.saves_tensors:
        saved: list[Any] = list(ctx.saved_tensors)
        for k, v in ctx.saved_ints:
            saved.insert(k, v)
        dense_grads = s.plain_bw(*saved, *tangents)
    elif ctx.saved_ints:
        dense_grads = s.plain_bw(*[v for _, v in ctx.saved_ints], *tangents)
    else:
        dense_grads = s.plain_bw(*tangents)
    result: list[torch.Tensor | None] = [None] * p.n_results
    if present == len(p.diff):
        for k, i in p.reached:
            result[i] = dense_grads[k]
    else:
        given = frozenset(k for k, i in enumerate(p.diff) if grads[i] is not None)
        for k, i, deps in p.deps:
            if deps & given:
                result[i] = dense_grads[k]
    return (None, *_unshared(result, grads))
