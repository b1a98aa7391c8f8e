"""Stage `trace` (training), the backward graph itself: `BackwardGraph`, the joint traced (`_traced_joint`, every node
run: Note [Backward Errors Are Deferred]) and partitioned into a forward and a backward graph (`_partitioned`), and
the probe of eager's backward the deferral reads (`_probe`).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, a `JointSetup` and fakes.
Output: `BackwardGraph`: the forward graph `(primals...) -> (GraphOutputs..., saved...)` and the backward graph
`(saved..., tangents...) -> (grads per user tensor input (dense)..., backward-mutated inputs...)`, or the program's
own backward error.
Invariants: see Note [Training Through A Joint Graph] (joint.py); both graphs are purely functional.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.fx

from subclassaot.authoring.protocol import SubclassNode
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import (
    TangentPatterns,
    probe_eager_backward,
    tangent_patterns,
)
from subclassaot.pipeline.joint import (
    JointSetup,
    TracedJoint,
    trace_joint_views,
)
from subclassaot.pipeline.partition import Partition, partition_joint
from subclassaot.pipeline.rules.backward_errors import (
    refuse_written_escaping_views,
)
from subclassaot.pipeline.rules.training_rules import (
    group_of,
)
from subclassaot.runtime.steps import (
    training_roots,
)
from subclassaot.schemas import (
    BackwardReshape,
    DenseIndex,
    LeafSource,
    OutputKind,
)
from subclassaot.torch_internals import (
    DATA_DEPENDENT_ERRORS,
    hint_of,
    try_expr_of,
)

# Raised at compile time, never deferred: refusals, and a trace that needs tensor values (a size made of a boolean
# mask's count): that is no error of the program (eager's backward has the values); api.py refuses it.
_RAISED_NOW: tuple[type[Exception], ...] = (UnsupportedError, *DATA_DEPENDENT_ERRORS)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardGraph:
    """The training compile's backward. A field that BackwardPlan (runtime/plan.py) also has means what its comment
    there says, `graph` None being its "no backward graph" (backward_plan() hands those fields on); the comments here
    are for the compile-time fields."""

    graph: torch.fx.GraphModule | None  # (saved..., tangents...) -> (grads..., backward mutations...); None: `error`
    # (primals...) -> (the forward graph's outputs (GraphOutputs)..., saved...); None when the joint trace failed
    # (the inference graph is the forward then)
    forward: torch.fx.GraphModule | None
    error: RuntimeError | None
    raising_tangents: frozenset[int] = frozenset()
    raising_patterns: frozenset[frozenset[int]] | None = None
    unprobed_values: tuple[tuple[int, str], ...] = ()
    detached: frozenset[int] = frozenset()
    # with raising_patterns: outputs replayed before the call (Note [Backward Errors Are Deferred])
    early_views: frozenset[int] = frozenset()
    diff_outputs: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    unused: frozenset[int]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...] = ()
    tangent_deps: tuple[frozenset[int], ...]
    backward_mutations: tuple[DenseIndex, ...]
    backward_reshapes: tuple[BackwardReshape, ...] = ()
    tangent_trees: tuple[SubclassNode | None, ...]
    wrapper_updates: tuple[int, ...]
    group_grads: tuple[int, ...] = ()
    tangent_strides: tuple[tuple[int, ...] | None, ...] = ()
    tangent_orders: tuple[tuple[int, ...] | None, ...] = ()
    # per dense tangent: the sizes it was traced with (symbolic ones shape a retrace's: Note [Tangent Retrace])
    tangent_sizes: tuple[tuple[_Dim, ...], ...] = ()
    example_inputs: tuple[object, ...]  # the backward graph's (fake tensors, symbolic ints)
    num_saved: int = 0
    # The joint graph itself, kept where it can run again from the primals for double backward (no random op in
    # the forward: a rerun would draw other values); see Note [Training Through A Joint Graph]
    joint: torch.fx.GraphModule | None = None
    num_fw_outputs: int = 0  # the joint graph's outputs before the gradients
    subclass_grads: bool = False  # TracedJoint.subclass_grads
    # Compile-time records for a tangent retrace (Note [Tangent Retrace]); the per-call path never reads them
    setup: JointSetup | None = None
    partition: Partition | None = None
    forward_reads_grad_mode: bool = False
    saved_primals: tuple[int | None, ...] = ()
    saved_clones: tuple[int | None, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Tangents:
    """The tangents the joint graph is traced with."""

    fakes: tuple[torch.Tensor, ...]  # per dense tangent (the diff outputs' dense leaves, in order): its fake
    trees: tuple[SubclassNode | None, ...]  # per diff output: the subclass structure its tangent must have
    leaves: tuple[Sequence[torch.Tensor], ...]  # per diff output: its dense leaves (to shape the tangents)


def _partitioned(
    setup: JointSetup,
    joint: TracedJoint,
    tangents: _Tangents,
    raising: frozenset[int],
    error: RuntimeError | None,
    patterns: frozenset[frozenset[int]] | None,
) -> BackwardGraph:
    """The BackwardGraph of the traced joint graph, partitioned into forward and backward. `patterns`: the sets of
    diff positions whose backward raises `error` instead of running the graph (Note [Backward Errors Are Deferred])."""
    analysis, example, diff = setup.analysis, setup.example, setup.diff
    o = setup.traced.outputs
    if joint.num_fw_outputs != len(o.updates) + o.num_fresh + o.num_bases + o.num_symints + len(analysis.stride_probes):
        raise AssertionError("BUG: the joint graph's forward outputs differ from the inference graph's")
    parts = partition_joint(joint.graph, len(example), joint.num_fw_outputs)
    return BackwardGraph(
        joint=None if parts.has_random else joint.graph,
        num_fw_outputs=joint.num_fw_outputs,
        subclass_grads=joint.subclass_grads,
        graph=parts.backward,
        forward=parts.forward,
        num_saved=parts.num_saved,
        saved_primals=parts.saved_primals,
        saved_clones=parts.saved_clones,
        error=error,
        diff_outputs=diff,
        grad_inputs=setup.grad_inputs,
        unused=joint.unused,
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        tangent_deps=joint.reach,
        backward_mutations=joint.backward_mutations,
        backward_reshapes=joint.backward_reshapes,
        tangent_trees=tangents.trees,
        example_inputs=parts.backward_example,
        wrapper_updates=setup.wrapper_updates,
        group_grads=setup.group_grads,
        tangent_strides=tuple(_static_strides(t) for t in tangents.fakes),
        tangent_orders=tuple(_dense_order(t) for t in tangents.fakes),
        tangent_sizes=tuple(tuple(t.shape) for t in tangents.fakes),
        setup=setup,
        partition=parts,
        forward_reads_grad_mode=parts.reads_grad_mode,
        raising_tangents=raising,
        raising_patterns=patterns,
    )


def _wrappers_at(setup: JointSetup) -> int:
    """The forward-output position of the first wrapper update: after the updates, one output per fresh output (a
    subclass one has several graph leaves: see forward_output_values) and the bases."""
    outputs = setup.traced.outputs
    n_fresh = sum(
        1
        for info in setup.analysis.outputs
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    )
    return len(outputs.updates) + n_fresh + outputs.num_bases


def _input_values(setup: JointSetup) -> frozenset[int]:
    """Forward-output positions holding new values of inputs (updates, then wrapper updates)."""
    wrappers_at = _wrappers_at(setup)
    return frozenset(
        {*range(len(setup.traced.outputs.updates)), *range(wrappers_at, wrappers_at + len(setup.wrapper_updates))}
    )


def _probe(
    setup: JointSetup, returned: frozenset[int] = frozenset(), values: frozenset[int] = frozenset()
) -> TangentPatterns | None:
    """Note [Probing Eager's Backward]: how eager's backward through each set of outputs ends, by the tangents the
    compiled Function gets for them. `returned`: tensor input positions of leaves given to the Function detached
    (Note [Backward Errors Are Deferred]); `values`: tensor input positions whose new values are probed as roots
    too (probe_eager_backward)."""
    at = frozenset(setup.flat.tensor_indices[i] for i in returned)
    written = frozenset(setup.flat.tensor_indices[i] for i in values)
    ends = probe_eager_backward(setup.call, setup.flat, at, written)
    if ends is None:
        return None
    outputs = setup.traced.outputs
    return tangent_patterns(
        setup.analysis,
        setup.layout,
        setup.flat,
        outputs.updates,
        outputs.num_bases,
        setup.wrapper_updates,
        [r.root_bases for r in training_roots(setup.analysis)],
        setup.diff,
        ends,
        returned,
    )


def _traced_joint(
    setup: JointSetup, tangent_fakes: Sequence[torch.Tensor], reach: list[frozenset[int]], escaping: frozenset[int]
) -> tuple[JointSetup, TracedJoint]:
    """trace_joint_views, then the refusal of the `escaping` inputs (Note [as_strided On Inputs]) whose value from
    before the call the trace gives a gradient; where it raises, of those its forward reached (the program's own
    backward error: Note [Backward Errors Are Deferred]), or of every one where the forward itself raised."""
    read_reach: list[frozenset[int] | None] = []
    try:
        setup, joint = trace_joint_views(setup, tangent_fakes, reach, read_sink=read_reach)
    except Exception:
        traced = len(read_reach) == len(setup.flat.tensor_indices)
        refuse_written_escaping_views(
            setup.flat, escaping, _gradient_reached(setup, reach, read_reach) if traced else None
        )
        raise
    refuse_written_escaping_views(setup.flat, escaping, _gradient_reached(setup, joint.reach, joint.read_reach))
    return setup, joint


def _gradient_reached(
    setup: JointSetup, reach: Sequence[frozenset[int]], read_reach: Sequence[frozenset[int] | None]
) -> frozenset[int] | None:
    """The tensor inputs whose value before the call some diff output's gradient reaches in the trace: through a
    gradient of their own, or as members of a synthetic base that gets one (`reach`: the grad inputs', then the
    synthetic bases') whose own node some output's history holds (`read_reach`, TracedJoint.read_reach: a member the
    program never reads before a write renews its node gives its own history no gradient, in eager too), and every
    input that gets neither (its gradient taken elsewhere: not known here); None where the trace was not of every
    gradient."""
    layout, flat, n = setup.layout, setup.flat, len(setup.grad_inputs)
    if setup.wrt_only is not None or len(reach) != n + len(setup.group_grads):
        return None
    reached = {i for k, i in enumerate(setup.grad_inputs) if reach[k]}
    accounted = set(setup.grad_inputs)
    for j, k in enumerate(setup.group_grads):
        owners = {layout.leaves[m].owner for m in layout.groups[group_of(layout, k)].members}
        members = {i for i, index in enumerate(flat.tensor_indices) if index in owners}
        accounted |= members
        if reach[n + j]:
            reached |= {i for i in members if i >= len(read_reach) or read_reach[i] is None or read_reach[i]}
    return frozenset(reached | (set(range(len(flat.tensor_indices))) - accounted))


def _reached(setup: JointSetup, reach: Sequence[frozenset[int]]) -> list[int]:
    """The tensor inputs whose gradient some diff output reaches in the trace."""
    return [i for k, i in enumerate(setup.grad_inputs) if k < len(reach) and reach[k]]


_Dim = int | torch.SymInt


def _dense_order(t: torch.Tensor) -> tuple[int, ...] | None:
    """Note [Tangent Retrace]: the dims of `t` (a traced tangent with symbolic strides), outermost first,
    where its strides are the dense strides of that order; None where they are static or not so."""
    sizes, strides = t.shape, t.stride()
    if _static_strides(t) is not None or any(try_expr_of(v) is None for v in (*sizes, *strides)):
        return None
    order = tuple(sorted(range(t.dim()), key=lambda d: (-hint_of(strides[d]), d)))
    dense = _dense_strides(sizes, order)
    return order if all(try_expr_of(a) == try_expr_of(b) for a, b in zip(strides, dense, strict=True)) else None


def _dense_strides(sizes: Sequence[_Dim], order: Sequence[int]) -> list[_Dim]:
    """The strides of a dense tensor of `sizes` whose dims, outermost first, are `order` (as empty_like lays out)."""
    out: list[_Dim] = [1] * len(sizes)
    step: _Dim = 1
    for d in reversed(order):
        out[d] = step
        size = sizes[d]
        step = step * (max(size, 1) if isinstance(size, int) else size)
    return out


def _static_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    strides = t.stride()
    return tuple(int(s) for s in strides) if all(isinstance(s, int) for s in strides) else None
