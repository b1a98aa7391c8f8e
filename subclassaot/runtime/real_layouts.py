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
