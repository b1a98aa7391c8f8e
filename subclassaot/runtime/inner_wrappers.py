"""Runtime, inner wrappers of nested subclasses after a wrapper-level set_() (Note [Wrapper Storage]): each takes its
first dense leaf's metadata and its class's wrapper storage, as eager's set_, repeated on each inner wrapper, left them.

Input: the plan's `InnerWrapperClass`es, the call's inputs (before the epilogue, for the anchors' storages) and its
built outputs. Output: the inner wrappers changed in place, without autograd or version counters.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import dense_leaves
from subclassaot.runtime.plan import storage_holder
from subclassaot.schemas import FlatInputs, InnerWrapperClass
from subclassaot.torch_internals import assign_wrapper_metadata, storage_nbytes

__all__ = ["inner_anchor_holders", "settle_inner_wrappers"]


def _at(t: object, attrs: tuple[str, ...]) -> torch.Tensor:
    for attr in attrs:
        t = getattr(t, attr)
    assert isinstance(t, torch.Tensor)
    return t


def inner_anchor_holders(
    flat: FlatInputs, classes: Sequence[InnerWrapperClass], values: Sequence[object]
) -> list[torch.Tensor | None]:
    """Per class, a plain tensor on its anchor inner wrapper's storage as received (None: no anchor); taken before the
    epilogue."""
    holders: list[torch.Tensor | None] = []
    for c in classes:
        if c.anchor is None:
            holders.append(None)
            continue
        holders.append(storage_holder(_at(values[flat.tensor_indices[c.anchor[0]]], c.anchor[1])))
    return holders


def settle_inner_wrappers(
    flat: FlatInputs,
    classes: Sequence[InnerWrapperClass],
    holders: Sequence[torch.Tensor | None],
    values: Sequence[object],
    result: Sequence[object],
) -> None:
    """Note [Wrapper Storage]: each member takes its first dense leaf's metadata, then its class's wrapper storage (a
    new one where the class has no anchor: a storage the call made)."""
    if not classes:
        return
    for c, holder in zip(classes, holders, strict=True):
        members = [_at(values[flat.tensor_indices[t]], attrs) for t, attrs in c.inputs]
        members += [_at(result[o], attrs) for o, attrs in c.outputs]
        for w in members:
            leaf = dense_leaves(w)[0]
            size, stride, offset = list(leaf.shape), list(leaf.stride()), int(leaf.storage_offset())
            if list(w.shape) != size or list(w.stride()) != stride or w.storage_offset() != offset:
                assign_wrapper_metadata(w, size, stride, offset)
        if holder is None:
            first = members[0]
            numel = max(storage_nbytes(m.untyped_storage()) for m in members) // first.element_size()
            holder = torch.Tensor._make_wrapper_subclass(  # private API: a storage with no data
                type(first), [numel], dtype=first.dtype, device=first.device
            )
        key = holder.untyped_storage()._cdata
        for w in members:
            if w.untyped_storage()._cdata != key:
                torch._functionalize_unsafe_set(w, holder)
