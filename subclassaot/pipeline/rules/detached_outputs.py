"""Outputs that are a detach() of an input the program then wrote with a value that requires grad: computed by the
graph (with the compiled Function's history), then put on the input's storage.

Input (analysis): one output of the functional run, its dense leaves, the storage maps of `_analyze_outputs`.
Output: the output's leaves as GRAPH leaves naming the input each is set_() onto (`OutputLeaf.onto_input`), or None
where the rule does not apply; at run time, runtime/output_steps.py's `set_onto_inputs` moves them. Invariants:
only with grad enabled; the values the graph computes are those the epilogue writes into the input, so moving a
leaf changes no value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import DenseIndex, LeafSource, Meta, OutputLeaf
from subclassaot.torch_internals import grad_fn_raises, storage_key

__all__ = ["detached_output_leaves"]


def detached_output_leaves(
    value: torch.Tensor,
    dense: Sequence[torch.Tensor],
    run: FunctionalRun,
    placed: tuple[dict[object, DenseIndex], dict[object, DenseIndex]],
    graph_count: int,
    meta_of: Callable[[torch.Tensor, DenseIndex], Meta],
) -> tuple[OutputLeaf, ...] | None:
    """Note [Outputs Over Another Storage]: `value`'s leaves as GRAPH leaves (numbered from `graph_count`)
    set_() onto their inputs at run time, or None. `placed`: (storage key -> dense input whose storage it is at the
    end, ... as the inputs came); `meta_of`: eager's metadata of a leaf on that input's storage."""
    current, original = placed
    record = run.swaps.views.get(id(value))
    if record is None or record.func is not torch.ops.aten.detach.default or not torch.is_grad_enabled():
        return None
    if not value.requires_grad or grad_fn_raises(value) or value.grad_fn is None or not record.source.requires_grad:
        return None
    swaps = run.swaps
    if id(value) in swaps.swapped_ids or id(value) in swaps.data_aliases:
        return None
    if is_traceable_subclass(value) and not any(record.source is u for u in run.user_tensors):
        return None  # the wrapper shares the wrapper storage of the input it detached (set_onto_inputs)
    keys = [storage_key(leaf) for leaf in dense]
    if any(k not in current or original.get(k) != current[k] for k in keys):
        return None
    if any(leaf_meta(run.finals[current[k]]) != leaf_meta(run.originals[current[k]]) for k in keys):
        return None  # an input whose layout the program changed (x.t_() after the write: its output had no history)
    for other in pytree.tree_leaves(run.output):
        if isinstance(other, torch.Tensor) and other is not value and swaps.view_root(other) is value:
            return None
    return tuple(
        OutputLeaf(
            source=LeafSource.GRAPH,
            index=graph_count + k,
            meta=meta_of(leaf, current[key]),
            is_view=False,
            onto_input=current[key],
        )
        for k, (leaf, key) in enumerate(zip(dense, keys, strict=True))
    )
