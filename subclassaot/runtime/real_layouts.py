"""Layouts the epilogue takes from the graph's real results instead of the fake tensors of the analysis.

Input: the metadata the analysis recorded for an input after the call (a fake tensor's), and the real tensor the
graph returned for it. Output: the size, stride and offset the epilogue gives the input (`set_target_layout`) or its
wrapper (`wrapper_layout`). Invariants: only where the sizes agree; a layout eager computes from view ops alone
(the fake one is exact there) comes out the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["set_target_layout", "wrapper_layout"]

Layout = tuple[list[int], list[int], int]

# Note [Inputs Set To Computed Tensors]
# After `x.set_(t)` (or `x.data = t`) with `t` a tensor the program computed, eager's x has t's layout, which the
# kernel that made t chose. The analysis saw fake tensors, whose strides differ from the real kernels' where a dim
# has size 0 or 1 (Note [Fresh Subclass Output Strides]: `x.set_(x.mul(3.0))` of a (3, 1) input with strides
# (1, 3): fake (1, 1), eager (1, 3); fuzz seed 11000 #1397), and so do the offsets of views taken of t. The graph
# returns x's final value, computed by the same ops on real tensors (views are replayed as views, writes become a
# copy into the tensor written, which keeps its layout), so the epilogue gives x that value's strides and offset
# instead of the fake ones, as eager's x has them. An output that is t itself, or another non-view alias with x's
# final metadata, takes x's real layout after the epilogue (OutputLeaf.input_layout); so does a view with them (`t =
# x.mul(x[:, :, 0:0]).select(1, -1); x.data = t; return t`: an empty t, eager's strides (0, 2), fake (2, 1); fuzz
# seed 47000 #3804), and each leaf of an intermediate subclass rebuilt around x's leaves (an INPUT_ROOT replay),
# whose outer strides are then those of its leaf. A subclass input or output
# whose outer size and stride were those of one of its dense leaves (a WrapperTensor takes them from its first inner
# tensor) takes that leaf's real strides too (fuzz seed 11000 #6737). As for fresh outputs, this trusts the backend to give the graph's results eager's strides (Note
# [What A Backend Receives And Returns]).


def set_target_layout(meta: Layout, value: object) -> Layout:
    """Note [Inputs Set To Computed Tensors]: `value`'s (the graph's final value of the input) strides and offset,
    where its size is the recorded one; else `meta`."""
    size, stride, offset = meta
    if not isinstance(value, torch.Tensor) or list(value.shape) != size:
        return meta
    return size, list(value.stride()), int(value.storage_offset())


def wrapper_layout(meta: Layout, leaf_metas: Sequence[Layout], leaves: Sequence[torch.Tensor]) -> Layout:
    """Note [Inputs Set To Computed Tensors]: a wrapper's outer layout `meta`, with the real strides of the first of
    its dense `leaves` whose recorded size and stride (`leaf_metas`) it had."""
    size, stride, offset = meta
    for (leaf_size, leaf_stride, _), leaf in zip(leaf_metas, leaves, strict=True):
        if leaf_size == size and leaf_stride == stride and list(leaf.shape) == size:
            return size, list(leaf.stride()), offset
    return meta
