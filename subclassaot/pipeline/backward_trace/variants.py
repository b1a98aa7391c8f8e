"""Stage `trace` (training), backwards for tangents of another structure (Note [Tangent Retrace]) and the runtime's
plan of a backward.

Input: a `BackwardGraph` and the fakes of a tangent's structure.
Output: `BackwardVariant`: a backward retraced for tangents of another structure; `backward_plan`: the runtime's
`BackwardPlan` of a `BackwardGraph`.
Invariants: a retrace runs at most once per tangent structure, from the runtime through `RetracedBackward`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.fx

from subclassaot.authoring.protocol import SubclassNode
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_trace.graph import BackwardGraph, _dense_strides, _Dim
from subclassaot.pipeline.joint import (
    trace_joint,
)
from subclassaot.pipeline.partition import partition_backward_like
from subclassaot.runtime.plan import BackwardPlan, RetracedBackward
from subclassaot.torch_internals import (
    fresh_static_fake,
    refresh_view_grad_fn,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardVariant:
    """A backward graph for tangents of another structure than the traced one (Note [Tangent Retrace]). Its fields
    mean what RetracedBackward's (runtime/plan.py) do, `graph` being the `run` it compiles to."""

    graph: torch.fx.GraphModule
    saved_index: tuple[int, ...]
    example_inputs: tuple[object, ...]
    grad_trees: tuple[SubclassNode | None, ...]
    grad_stride_leaves: tuple[int | None, ...]
    unused: frozenset[int]
    tangent_deps: tuple[frozenset[int], ...]


def retrace_backward(
    meta: BackwardGraph,
    trees: Sequence[SubclassNode | None],
    dense_tangents: Sequence[Sequence[torch.Tensor]],
    absent: frozenset[int] = frozenset(),
    output_sizes: Sequence[Sequence[torch.Size]] = (),
) -> BackwardVariant:
    """The backward for runtime tangents of structure `trees` (dense leaves `dense_tangents`, per diff output),
    where the diff outputs at positions `absent` got no tangent (Note [Tangent Retrace]). `output_sizes`: per diff
    output, its dense leaves' sizes in the call whose backward this is."""
    setup, reference = meta.setup, meta.partition
    if setup is None or reference is None:
        raise AssertionError("BUG: a tangent retrace of an entry without a partition")
    for value in setup.flat.values:
        if isinstance(value, torch.Tensor):
            # The compile-time inputs are read while the joint trace runs (is_leaf): a view among them whose base
            # a later call wrote rebuilds its grad_fn on that read, on real tensors, so it does it here, outside
            # the fake mode (Note [Aliased Inputs In Training]: a member written rebases the others).
            refresh_view_grad_fn(value)
    fakes = _retrace_tangent_fakes(meta, trees, dense_tangents, output_sizes)
    # See Note [Backward Errors Are Deferred]: those tangents are never given to this backward
    joint = trace_joint(setup, fakes, trees, absent=absent | meta.raising_tangents)
    # (a change whose custom Function nodes no given tangent reaches is not made: Note [Custom Functions])
    given = frozenset(range(len(meta.diff_outputs))) - absent - meta.raising_tangents
    reshapes = tuple(r for r in meta.backward_reshapes if all(reached & given for reached in r.reached_by))
    if joint.backward_mutations != meta.backward_mutations or joint.backward_reshapes != reshapes:
        raise UnsupportedError(
            "the backward retraced for a new tangent type writes other inputs than the compiled one; pass "
            "tangents of the type of the outputs"
        )
    graph, index, example = partition_backward_like(joint.graph, len(setup.example), joint.num_fw_outputs, reference)
    return BackwardVariant(
        graph=graph,
        saved_index=index,
        example_inputs=example,
        grad_trees=joint.grad_trees,
        grad_stride_leaves=joint.grad_stride_leaves,
        unused=joint.unused,
        tangent_deps=joint.reach,
    )


def _retrace_tangent_fakes(
    meta: BackwardGraph,
    trees: Sequence[SubclassNode | None],
    dense_tangents: Sequence[Sequence[torch.Tensor]],
    output_sizes: Sequence[Sequence[torch.Size]],
) -> list[torch.Tensor]:
    """Fakes of a retrace's runtime tangents (Note [Tangent Retrace]). The primals are the compile's fakes, whose
    symbols are hinted by the compile's sizes: a dense contiguous floating leaf of a tangent with the output's class,
    of its output leaf's size in this call, takes the symbolic size its tangent was traced with; any other is a
    static fake of its own size (an integer leaf, an NJT's offsets that is an input's, is no primal:
    fresh_static_fake)."""
    mode = meta.setup.fake_mode if meta.setup is not None else None
    assert mode is not None, "BUG: a tangent retrace of an entry without a setup"
    fakes: list[torch.Tensor] = []
    start = 0
    for k, leaves in enumerate(dense_tangents):
        traced_tree = meta.tangent_trees[k]
        width = 1 if traced_tree is None else traced_tree.num_leaves
        traced = meta.tangent_sizes[start : start + width]
        start += width
        same = (trees[k] is None) == (traced_tree is None) and (
            traced_tree is None or cast(SubclassNode, trees[k]).cls is traced_tree.cls
        )
        sizes = output_sizes[k] if k < len(output_sizes) else ()
        for p, t in enumerate(leaves):
            strides = (
                _strides_over(t, traced[p])
                if same
                and len(leaves) == len(traced) == len(sizes)
                and t.dtype.is_floating_point
                and t.shape == sizes[p]
                and len(traced[p]) == t.dim()
                else None
            )
            with mode:
                fakes.append(
                    torch.empty_strided(traced[p], strides, dtype=t.dtype, device=t.device)
                    if strides is not None
                    else fresh_static_fake(mode, t)
                )
    return fakes


def _strides_over(t: torch.Tensor, sizes: Sequence[_Dim]) -> list[_Dim] | None:
    """`t`'s strides as expressions of `sizes` (its sizes, some symbolic), where `t` is dense in some dim order
    apart from expanded dims (stride 0: a `sum().backward()` tangent); None where it is laid out otherwise."""
    real = t.stride()
    kept = sorted((d for d in range(t.dim()) if real[d] != 0), key=lambda d: (-real[d], d))
    dense = _dense_strides([t.shape[d] for d in kept], range(len(kept)))
    if any(dense[i] != real[d] for i, d in enumerate(kept)):
        return None
    out: list[_Dim] = [0] * t.dim()
    for d, stride in zip(kept, _dense_strides([sizes[d] for d in kept], range(len(kept))), strict=True):
        out[d] = stride
    return out


def backward_plan(
    meta: BackwardGraph, compile_variant: Callable[[BackwardVariant], Callable[..., object]]
) -> BackwardPlan:
    """What the runtime needs of `meta`: no graph it does not run, no fake tensor, and a retrace that compiles its
    backward through `compile_variant` (Note [Tangent Retrace])."""

    def retrace(
        trees: Sequence[SubclassNode | None],
        dense_tangents: Sequence[Sequence[torch.Tensor]],
        absent: frozenset[int],
        output_sizes: Sequence[Sequence[torch.Size]],
    ) -> RetracedBackward:
        variant = retrace_backward(meta, trees, dense_tangents, absent, output_sizes)
        return RetracedBackward(
            run=compile_variant(variant),
            saved_index=variant.saved_index,
            grad_trees=variant.grad_trees,
            grad_stride_leaves=variant.grad_stride_leaves,
            unused=variant.unused,
            tangent_deps=variant.tangent_deps,
        )

    return BackwardPlan(
        error=meta.error,
        raising_tangents=meta.raising_tangents,
        raising_patterns=meta.raising_patterns,
        unprobed_values=meta.unprobed_values,
        detached=meta.detached,
        diff_outputs=meta.diff_outputs,
        grad_inputs=meta.grad_inputs,
        unused=meta.unused,
        grad_trees=meta.grad_trees,
        grad_stride_leaves=meta.grad_stride_leaves,
        tangent_deps=meta.tangent_deps,
        backward_mutations=meta.backward_mutations,
        backward_reshapes=meta.backward_reshapes,
        tangent_trees=meta.tangent_trees,
        wrapper_updates=meta.wrapper_updates,
        group_grads=meta.group_grads,
        tangent_strides=meta.tangent_strides,
        tangent_orders=meta.tangent_orders,
        num_saved=meta.num_saved,
        saved_primals=meta.saved_primals,
        saved_clones=meta.saved_clones,
        forward_reads_grad_mode=meta.forward_reads_grad_mode,
        rerun=meta.joint.forward if meta.joint is not None else None,
        num_fw_outputs=meta.num_fw_outputs,
        subclass_grads=meta.subclass_grads,
        retrace=retrace,
    )
