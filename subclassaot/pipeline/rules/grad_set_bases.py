"""Eager's `._base` of outputs set_() under grad: where it is found at analysis, and the holder built at run time.

Input: output leaves of a functional run and its `SwapRecord` (analysis and trace); at run time, a regenerated
output and the value of the tensor eager's output is a view of.
Output: `grad_set_view_root` (the intermediate a view set_() under grad still views, which the graph returns as an
intermediate base); runtime/output_steps.py's `set_under_grad_holder` rebuilds the output by a set_() under grad of
a fresh tensor, a view of eager's base where eager's output is a view.
Invariants: Note [Outputs set_() Under Grad]; analysis and trace find the same roots (they are intermediate
bases, numbered after the others, in output order).
"""

from __future__ import annotations

import torch

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import storage_key


def _is_grad_set(value: torch.Tensor, swaps: SwapRecord) -> bool:
    wrapper_set = swaps.wrapper_sets.get(id(value))
    return id(value) in swaps.grad_set_ids or (wrapper_set is not None and wrapper_set[1])


def grad_set_view_root(
    value: object, swaps: SwapRecord, input_storages: set[object]
) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
    """The intermediate r (and its dense leaves) that `value`, a view of r set_() under grad that requires grad,
    still views in eager, when r is on storages of its own (Note [Outputs set_() Under Grad])."""
    if not isinstance(value, torch.Tensor) or not value.requires_grad or not swaps.is_view(value):
        return None
    if not _is_grad_set(value, swaps):
        return None
    root = swaps.view_root(value, through_swaps=True)
    if root is value or not root.requires_grad:
        return None
    leaves = flatten_subclass(root, "root")[1] if is_traceable_subclass(root) else [root]
    if any(storage_key(leaf) in input_storages for leaf in leaves):
        return None
    return root, leaves


def no_grad_set_view_root(value: object, swaps: SwapRecord, input_storages: set[object]) -> torch.Tensor | None:
    """The plain intermediate r with history that `value`, a plain view of r the program took with grad and then
    set_() under no_grad onto another storage, still views in eager (Note [Outputs Over Another Storage])."""
    if not isinstance(value, torch.Tensor) or not value.requires_grad or is_traceable_subclass(value):
        return None
    record = swaps.plain_sets.get(id(value))
    if record is None or record[1] or id(value) in swaps.swapped_by_data or not swaps.is_view(value):
        return None
    root = swaps.view_root(value, through_swaps=True)
    if root is value or is_traceable_subclass(root) or not root.requires_grad or id(root) in swaps.swapped_ids:
        return None
    key = storage_key(root)
    return None if key in input_storages or key == storage_key(value) else root


def set_view_root(
    value: object, swaps: SwapRecord, input_storages: set[object]
) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
    """The intermediate subclass (and its dense leaves) that `value`, a subclass view the program set_() after
    taking it, still views in eager (Note [Subclass Intermediate Roots])."""
    if not isinstance(value, torch.Tensor) or not is_traceable_subclass(value) or not value._is_view():
        return None
    made, moved = swaps.views.get(id(value)), swaps.wrapper_sets.get(id(value))
    root = value._base
    if made is None or moved is None or moved[0] < made.seq or root is None or not is_traceable_subclass(root):
        return None
    if (torch.is_grad_enabled() and value.requires_grad) or id(root) in swaps.wrapper_data:
        return None
    leaves = flatten_subclass(root, "root")[1]
    return None if any(storage_key(leaf) in input_storages for leaf in leaves) else (root, leaves)


def sets_without_history(value: torch.Tensor, swaps: SwapRecord) -> bool:
    """Did the program set_() wrappers only where autograd records nothing: every wrapper set_() under no_grad or of
    tensors none of which requires grad (a detach() set_() to its own view in training), or
    `value`'s own, as Note [Subclass Intermediate Roots] rebuilds it?"""
    return (bool(swaps.wrapper_sets) and not swaps.grad_set_ids) or set_view_root(value, swaps, set()) is not None
