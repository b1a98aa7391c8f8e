"""Stage `trace` (training), the backward: `trace_backward`, the joint graph traced and partitioned into a forward
and a backward graph (joint.py traces it), with the updates that get no tangent, or the program's own backward error
(deferred.py).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the inference `TracedGraph` (its GraphOutputs), dense
fakes, fake mode.
Output: `BackwardGraph` (graph.py).
Invariants: see Note [Training Through A Joint Graph] (joint.py); both graphs are purely functional.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn, cast

import torch
import torch.fx

from subclassaot.errors import SubclassAOTError, UnsupportedError
from subclassaot.pipeline.backward_probe import (
    refuse_layout_changed_behind_autograd,
)
from subclassaot.pipeline.backward_trace.deferred import _defer_probed_error, _with_deferred_error
from subclassaot.pipeline.backward_trace.graph import _RAISED_NOW, BackwardGraph, _partitioned, _Tangents, _traced_joint
from subclassaot.pipeline.backward_trace.input_values import _unprobed_values, _with_bump_error
from subclassaot.pipeline.backward_trace.leaves_and_views import _view_replay_refusal
from subclassaot.pipeline.functional_run import own_leaves_of, own_stand_ins
from subclassaot.pipeline.joint import (
    JointSetup,
    TracedJoint,
    forward_example,
)
from subclassaot.pipeline.rules.backward_errors import (
    written_escaping_views,
)
from subclassaot.pipeline.rules.changed_views import refuse_written_views_changed_in_place
from subclassaot.pipeline.rules.set_under_grad import refuse_layout_node_order, refuse_view_set_order
from subclassaot.pipeline.rules.training_rules import (
    duplicate_wrappers,
    grad_bases,
    group_of,
    wrapper_update_inputs,
)
from subclassaot.pipeline.trace import TracedGraph
from subclassaot.runtime.steps import (
    epilogue_write_hidden,
    graph_example_inputs,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    AssignedWrite,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    UpdateKind,
)


def _overwritten_originals(
    traced: TracedGraph, analysis: Analysis, dense_fakes: Sequence[torch.Tensor]
) -> frozenset[int]:
    """Forward-output positions of ORIGINAL updates that are not differentiated (Note [Input
    Updates])."""
    updates = traced.outputs.updates
    finals = {u.target for u in updates if u.kind is UpdateKind.FINAL}
    out = set()
    for k, u in enumerate(updates):
        if u.kind is not UpdateKind.ORIGINAL or u.target not in finals:
            continue
        m = analysis.mutations[u.target]
        hidden = m.storage_changed or m.swapped or m.hidden_from_autograd or not m.autograd_visible
        if not hidden and not dense_fakes[u.target]._is_view():
            out.add(k)
    return frozenset(out)


def _swapped_updates(traced: TracedGraph, analysis: Analysis) -> frozenset[int]:
    """Forward-output positions of updates of leaves whose storage set_() swapped: the epilogue copies them in
    under no_grad (the swap is the op autograd sees: Note [set_ Under Grad], Note [Inputs Written In
    Training]), so they get no gradient, and differentiating them would raise set_'s backward error for a
    backward eager completes. Not a FINAL update copied in with grad (Note [History Kept Through .data =])."""
    return frozenset(
        k
        for k, u in enumerate(traced.outputs.updates)
        if u.kind is not UpdateKind.BASE
        and analysis.mutations[u.target].storage_changed
        and not (
            u.kind is UpdateKind.FINAL
            and analysis.mutations[u.target].assigned_write in (AssignedWrite.AFTER, AssignedWrite.KEPT)
        )
    )


def _last_gain_updates(traced: TracedGraph, layout: DenseLayout, analysis: Analysis) -> frozenset[int]:
    """Forward-output positions of updates of the leaves of inputs that gain grad last (Analysis.gains_last): eager's
    value was final when requires_grad_() found it without history (nothing took its storage after), so it gets no
    tangent, and the epilogue writes it below autograd before the runtime sets the flag (Note [Grad Mode And
    Autograd Reads])."""
    last = {j for i, late in enumerate(analysis.gains_last) if late for j in layout.leaves_of_input[i]}
    return frozenset(
        k for k, u in enumerate(traced.outputs.updates) if u.kind is not UpdateKind.BASE and u.target in last
    )


def _hidden_gain_updates(
    traced: TracedGraph,
    layout: DenseLayout,
    analysis: Analysis,
    real: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
) -> frozenset[int]:
    """Forward-output positions of the updates the epilogue writes hidden from autograd (runtime.steps.
    epilogue_write_hidden) of the leaves of inputs that require no grad as passed and that the compile makes require
    grad (Note [Leaves Laid Out Anew Under no_grad], inputs made to require grad): eager's input comes without history
    and such writes give it none, so its new value gets no tangent and has no node of its own to run. Differentiated,
    the run's ORIGINAL, an alias taken of the input's clone before the clone was made a leaf again, would keep the
    clone's history where no write moved its counter (`x.data.add_(1)`): a path to the graph input, whose gradient
    the joint does not take (it takes the input's with respect to the new leaf), that raises when run."""
    late = {
        j
        for i, (r, fake) in enumerate(zip(real, user_fakes, strict=True))
        if fake.requires_grad and not r.requires_grad
        for j in layout.leaves_of_input[i]
    }
    return frozenset(
        k
        for k, u in enumerate(traced.outputs.updates)
        if u.kind is not UpdateKind.BASE
        and u.target in late
        and epilogue_write_hidden(analysis.mutations[cast(DenseIndex, u.target)], u.kind)
    )


def _inner_base_updates(traced: TracedGraph, layout: DenseLayout, group_grads: Sequence[int]) -> frozenset[int]:
    """Forward-output positions of the updates of synthetic bases no gradient is taken for whose members are all
    inner tensors of subclass inputs: autograd sees the wrappers, not their inner tensors (Note [Aliased Inputs In
    Training]), so the program's writes give such a base no history, and its new value gets no tangent. Where its
    members require grad, the joint's base requires grad with a placeholder's history only (a FunctionalTensor's
    mirrored grad_fn), whose backward raises."""
    wrapped = {j for tree, leaves in zip(layout.trees, layout.leaves_of_input, strict=True) if tree for j in leaves}
    inner = {
        k
        for k, item in enumerate(layout.graph_inputs)
        if isinstance(item, AliasGroupRef)
        and k not in group_grads
        and all(m in wrapped for m in layout.groups[item.group].members)
    }
    return frozenset(k for k, u in enumerate(traced.outputs.updates) if u.kind is UpdateKind.BASE and u.target in inner)


def _example_inputs(
    layout: DenseLayout,
    dense_fakes: Sequence[torch.Tensor],
    group_grads: Sequence[int],
    own: frozenset[int],
    fake_mode: torch._subclasses.fake_tensor.FakeTensorMode,
) -> list[torch.Tensor]:
    """The joint graph's example inputs: a synthetic base a gradient is taken for requires grad; a stand-in of its
    own (`own`, tensor positions) is never its group's autograd root, as at run time (Note [Aliased Inputs In
    Training]), else the base would require grad through it where eager's requires none."""
    example = graph_example_inputs(layout, dense_fakes, {j for i in own for j in layout.leaves_of_input[i]})
    with fake_mode:
        for k in group_grads:  # a base taken from a member that does not require grad (x.detach(), x)
            if not example[k].requires_grad:
                example[k] = example[k].detach().requires_grad_(True)
    return example


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
    group_grads, grad_inputs = _grad_inputs(flat, layout, analysis, user_fakes)
    own = own_stand_ins(flat, layout, user_fakes, own_leaves_of(analysis))
    example = _example_inputs(layout, dense_fakes, group_grads, own, fake_mode)
    wrapper_updates = wrapper_update_inputs(layout, analysis, user_fakes)
    real = [cast(torch.Tensor, flat.values[k]) for k in flat.tensor_indices]
    refuse_written_views_changed_in_place(layout, analysis, real, wrapper_updates)
    escaping = written_escaping_views(flat, layout, analysis)  # refused once the graph says which it reaches
    refuse_view_set_order(call, flat, layout, analysis)
    refuse_layout_node_order(call, flat, layout, analysis)  # Note [Epilogue Nodes In Eager's Order]
    # Every input gradients are taken for runs as a clone: a write to it, or an in-place view op on a view of it,
    # then happens to a non-leaf as in eager (Note [Training Through A Joint Graph]).
    # (not an input of its own beside an alias requiring grad: its stand-in is a detached leaf over the group's
    # storage, as eager's is a leaf)
    clone = frozenset(grad_inputs) - own
    with fake_mode, torch.enable_grad():
        fw_example = forward_example(
            call, flat, layout, analysis, traced, example, user_fakes, clone, wrapper_updates, group_grads
        )
    overwritten = _overwritten_originals(traced, analysis, dense_fakes) | _swapped_updates(traced, analysis)
    overwritten |= _last_gain_updates(traced, layout, analysis) | _inner_base_updates(traced, layout, group_grads)
    overwritten |= _hidden_gain_updates(traced, layout, analysis, real, user_fakes)
    diff = tuple(i for i, (grad, _, _, _) in enumerate(fw_example) if grad and i not in overwritten)
    with fake_mode:
        tangent_fakes = tuple(torch.empty_like(t) for i in diff for t in fw_example[i][1])
    tangents = _Tangents(
        fakes=tangent_fakes, trees=tuple(fw_example[i][2] for i in diff), leaves=tuple(fw_example[i][1] for i in diff)
    )
    setup = JointSetup(
        call=call,
        flat=flat,
        layout=layout,
        analysis=analysis,
        traced=traced,
        user_fakes=tuple(user_fakes),
        fake_mode=fake_mode,
        decompositions=decompositions,
        example=tuple(example),
        grad_inputs=grad_inputs,
        group_grads=group_grads,
        wrapper_updates=wrapper_updates,
        diff=diff,
        tangent_ctxs=tuple((k, fw_example[i][3][0]) for k, i in enumerate(diff) if fw_example[i][3]),
    )
    reach: list[frozenset[int]] = []
    error: RuntimeError | None = None
    raising: frozenset[int] = frozenset()
    value_sets: frozenset[frozenset[int]] | None = None
    try:
        setup, joint = _traced_joint(setup, tangents.fakes, reach, escaping)
    except _RAISED_NOW:
        raise
    except (IndexError, ValueError) as e:
        if isinstance(e, SubclassAOTError):
            raise
        raise _view_replay_refusal(layout, analysis, e) from e  # Note [Backward Errors Are Deferred]
    except (RuntimeError, AttributeError) as e:
        # The program's backward itself fails (set_ has no derivative, a saved tensor was modified in place):
        # eager raises only when backward runs, and so do we (Note [Backward Errors Are Deferred]).
        error = e if isinstance(e, RuntimeError) else _nested_int_backward_error(setup, e)
        found = _with_deferred_error(setup, tangents, reach, error)
        if isinstance(found, BackwardGraph):
            return found
        setup, joint, raising, value_sets = found
    if error is None:
        refuse_layout_changed_behind_autograd(call, flat, layout, analysis, None)
        probed = analysis.data_assigned or analysis.grad_set_intermediate_read
        if probed and (deferred := _defer_probed_error(setup, joint.reach, tangents.trees)) is not None:
            return deferred
    return _graph_of(setup, joint, tangents, raising, error, value_sets)


def _graph_of(
    setup: JointSetup,
    joint: TracedJoint,
    tangents: _Tangents,
    raising: frozenset[int],
    error: RuntimeError | None,
    value_sets: frozenset[frozenset[int]] | None,
) -> BackwardGraph:
    """The BackwardGraph of the traced joint, without the tangents at `raising`: where `value_sets` (those left out
    are inputs' new values, probed as roots), it raises `error` for those sets and refuses the others giving one
    (Note [Backward Errors Are Deferred], errors through input values only)."""
    if value_sets is None:
        return _partitioned(setup, joint, tangents, raising, *_with_bump_error(setup, joint, error))
    graph = _partitioned(setup, joint, tangents, raising, error, value_sets)
    return dataclasses.replace(graph, unprobed_values=_unprobed_values(setup, None, raising))


def _grad_inputs(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """BackwardGraph.group_grads and BackwardGraph.grad_inputs: the synthetic bases that require grad, and the tensor
    inputs that get a gradient of their own (not through such a base, nor as a duplicate wrapper)."""
    own = own_stand_ins(flat, layout, user_fakes, own_leaves_of(analysis))
    group_grads = grad_bases(layout, user_fakes, own)
    in_groups = {layout.leaves[m].owner for k in group_grads for m in layout.groups[group_of(layout, k)].members}
    duplicates = duplicate_wrappers(layout)  # Note [Aliased Inputs In Training]
    grad_inputs = tuple(
        i
        for i, t in enumerate(user_fakes)
        if t.requires_grad and (flat.tensor_indices[i] not in in_groups or i in own) and i not in duplicates
    )
    return group_grads, grad_inputs


def _nested_int_backward_error(setup: JointSetup, e: AttributeError) -> NoReturn:
    """The trace met a plain nested int as an op's argument in the backward (an NJT gradient of a nested size:
    `mean(dim=1, keepdim=True)`'s expand): refused, naming the NJT inputs that require grad (Note [Nested Int
    Dims]). Eager's backward may raise there too (NJT's kernels reject such a gradient); the probe that would show
    it cannot run on NJT (no static fakes), so no error is deferred as the program's."""
    if "NestedIntNode" not in str(e):
        raise e
    names = [
        leaf.path
        for leaf, v in zip(setup.flat.leaves, setup.flat.values, strict=True)
        if isinstance(v, torch.Tensor) and v.is_nested and v.requires_grad
    ]
    raise UnsupportedError(
        f"the program's backward takes the gradient of {', '.join(names) or 'a jagged NestedTensor'} through an op "
        "whose backward takes a ragged (nested int) size as an argument, say a mean over the ragged dim (its "
        "backward expands to the nested size, where eager's NJT backward fails too): the backward trace cannot "
        "carry a nested int as an op's argument (Note [Nested Int Dims]); not supported in training. Reduce under "
        "torch.no_grad()"
    ) from e
