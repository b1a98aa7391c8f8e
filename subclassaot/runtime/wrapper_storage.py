"""Stage `runtime`, wrapper subclasses' own metadata and storage: what `set_()` and `.data =` leave on a wrapper that
its inner tensors do not say (Note [Wrapper Storage], Note [Wrapper Data Assignment]).

Input: the per-call values (flat inputs, outputs as built) and the analysis's `WrapperStorageClass`es and per-output
`data_meta`. Output: the same tensors, each wrapper on its class's storage and with eager's own size/stride/offset.
Invariants: nothing here dispatches to a subclass, records autograd history or moves a version counter.

Part: Layouts the epilogue takes from the graph's real results instead of the fake tensors of the analysis.

Input: the metadata the analysis recorded for an input after the call (a fake tensor's), and the real tensor the
graph returned for it. Output: the size, stride and offset the epilogue gives the input (`set_target_layout`) or its
wrapper (`wrapper_layout`). Invariants: only where the sizes agree; a layout eager computes from view ops alone
(the fake one is exact there) comes out the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from subclassaot.authoring.protocol import flatten_subclass
from subclassaot.schemas import FlatInputs, WrapperStorageClass
from subclassaot.torch_internals import assign_wrapper_metadata

__all__ = ["anchor_holders", "assign_data_meta", "set_target_layout", "share_wrapper_storages", "wrapper_layout"]


def anchor_holders(
    flat: FlatInputs, classes: Sequence[WrapperStorageClass], values: Sequence[object]
) -> list[torch.Tensor | None]:
    """Per class, a plain tensor on the wrapper storage its anchor input had as received (None: no anchor). Taken
    before the epilogue, which may move an anchor off it (`.data =`)."""
    holders: list[torch.Tensor | None] = []
    for c in classes:
        if c.anchor is None:
            holders.append(None)
            continue
        anchor = values[flat.tensor_indices[c.anchor]]
        assert isinstance(anchor, torch.Tensor)
        holder = torch.empty(0, dtype=anchor.dtype, device=anchor.device)
        torch._functionalize_unsafe_set(holder, anchor)
        holders.append(holder)
    return holders


def share_wrapper_storages(
    flat: FlatInputs,
    classes: Sequence[WrapperStorageClass],
    holders: Sequence[torch.Tensor | None],
    values: Sequence[object],
    result: Sequence[object],
    dense_leaf: Callable[[int], torch.Tensor],
) -> None:
    """Note [Wrapper Storage]: each member of a class ends on the class's wrapper storage. `holders`: from
    `anchor_holders`, taken before the epilogue; `dense_leaf(k)`: dense leaf k as the call left it."""
    targets: list[torch.Tensor] = []
    for c, holder in zip(classes, holders, strict=True):
        if c.leaf is not None:  # Note [Wrapper Storage]
            holder = dense_leaf(c.leaf)
        elif c.output_leaf is not None:
            o, pos = c.output_leaf
            out = result[o]
            assert isinstance(out, torch.Tensor)
            holder = out if pos < 0 else flatten_subclass(out, "out")[1][pos]
        if holder is None:
            # A storage the call made (set_() to an intermediate): a new wrapper storage, shared by no one else.
            first = values[flat.tensor_indices[c.inputs[0]]] if c.inputs else result[c.outputs[0]]
            assert isinstance(first, torch.Tensor)
            holder = torch.Tensor._make_wrapper_subclass(  # private API: a storage with no data
                type(first), first.shape, dtype=first.dtype, device=first.device
            )
        targets.append(holder)
    for c, holder in zip(classes, targets, strict=True):
        key = holder.untyped_storage()._cdata
        members = [values[flat.tensor_indices[t]] for t in c.inputs] + [result[o] for o in c.outputs]
        for m in members:
            if isinstance(m, torch.Tensor) and m.untyped_storage()._cdata != key:
                torch._functionalize_unsafe_set(m, holder)


def assign_data_meta(t: torch.Tensor, size: list[int], stride: list[int], offset: int) -> None:
    """Give wrapper `t` the size/stride/offset eager's `.data =` left on it (Note [Wrapper Data Assignment]), when
    they differ from those it was built with; its storage is its class's (`share_wrapper_storages`)."""
    if list(t.shape) != size or list(t.stride()) != stride or t.storage_offset() != offset:
        assign_wrapper_metadata(t, size, stride, offset)


Layout = tuple[list[int], list[int], int]


def set_target_layout(meta: Layout, value: object) -> Layout:
    """Note [Strides The Kernels Choose]: `value`'s (the graph's final value of the input) strides and offset,
    where its size is the recorded one; else `meta`."""
    size, stride, offset = meta
    if not isinstance(value, torch.Tensor) or list(value.shape) != size:
        return meta
    return size, list(value.stride()), int(value.storage_offset())


def wrapper_layout(meta: Layout, leaf_metas: Sequence[Layout], leaves: Sequence[torch.Tensor]) -> Layout:
    """Note [Strides The Kernels Choose]: a wrapper's outer layout `meta`, with the real strides of the first of
    its dense `leaves` whose recorded size and stride (`leaf_metas`) it had."""
    size, stride, offset = meta
    for (leaf_size, leaf_stride, _), leaf in zip(leaf_metas, leaves, strict=True):
        if leaf_size == size and leaf_stride == stride and list(leaf.shape) == size:
            return size, list(leaf.stride()), offset
    return meta
