"""Views whose `._base` is on another storage than their own (and the Note on intermediates that views share).

Input: output leaves of a functional run (at analysis and trace), or real tensors (at run time).
Output: `foreign_root` and `foreign_base` (eager's `._base` of an output view that set_() left on another storage,
and where the runtime finds it; the run-time rebuild of such a view is runtime/output_steps.py's `view_onto`),
and the refusal of such views
that require grad (`check_grad_view_of_moved_input`, `check_view_of_input_set_off_it`) or that view an
intermediate with history (`check_moved_view_of_grad_intermediate`).
Invariants: analysis and trace decide the same foreign roots (the graph returns them as intermediate bases, numbered
after the others, in output order); regeneration never writes data and leaves every version counter as it found it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.schemas import LeafSource
from subclassaot.torch_internals import storage_key


def foreign_root(
    leaf: torch.Tensor, final_storages: set[object], original_storages: set[object]
) -> torch.Tensor | None:
    """Eager's `._base` of a plain output view that does not require grad, where that base is on another storage
    than the view (Note [Outputs Over Another Storage]) and is an intermediate (not on any input's storage)."""
    root = None if leaf.requires_grad else _moved_root(leaf)
    if root is None or root.requires_grad:
        # (an intermediate with history would come out of the compiled autograd.Function as a base: not done)
        return None
    key = storage_key(root)
    return None if key in final_storages or key in original_storages else root


def foreign_base(
    leaf: torch.Tensor,
    finals: Sequence[torch.Tensor],
    original_storages: set[object],
    bases: dict[object, tuple[int, torch.Tensor]],
    grad_set: bool = False,
) -> tuple[LeafSource, int] | None:
    """Where eager's `._base` of a plain output view on another storage is at run time: an input's dense leaf
    (INPUT_ALIAS, its DenseIndex: the leaf's autograd root, `input_root`) or an intermediate base (INTERMEDIATE_ALIAS, its number); None when it is neither
    or the view is on its base's storage (Note [Outputs Over Another Storage]). `grad_set`: a view of an input the
    program set_() there with grad on, which requires grad (Note [set_ Under Grad])."""
    root = None if leaf.requires_grad and not grad_set else _moved_root(leaf)
    if root is None:
        return None
    # the input itself, or the base an input is a view of: its autograd root
    inputs = [j for j, f in enumerate(finals) if f is root or f._base is root]
    if inputs:
        return LeafSource.INPUT_ALIAS, inputs[0]
    found = bases.get(storage_key(root))
    intermediate = foreign_root(leaf, {storage_key(f) for f in finals}, original_storages)
    if found is not None and intermediate is not None and found[1] is root:
        return LeafSource.INTERMEDIATE_ALIAS, found[0]
    return None


def check_grad_view_of_moved_input(path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor]) -> None:
    """A plain output view that requires grad whose eager `._base` is an input now on another storage: its history
    runs through the input as it was when the view was taken (its set_() under grad, say), which a view rebuilt after
    the call cannot have (Note [Outputs Over Another Storage])."""
    found = _index_of(_moved_root(leaf) if leaf.requires_grad else None, finals)
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of input {found}, taken while the input was on another storage "
            "than the one it ends on (set_() or `.data =` moved it after): eager's view keeps the autograd history the "
            "input had then, which a compiled output rebuilt after the call cannot have. Return a clone (.clone())"
        )


def check_view_of_input_set_off_it(
    path: str, value: torch.Tensor, user_tensors: Sequence[torch.Tensor], rebuilt_onto_base: bool
) -> None:
    """Refuse a plain output view with no replay that requires grad and whose eager `._base` is an input on another
    storage than the view (`t1 = x.view(16); with no_grad(): t1.set_(y); return t1.view(-1)`): rebuilt from its
    storage, it would be no view of the input, or a view of another (Note [Outputs Over Another Storage])."""
    found = _index_of(_moved_root(value) if value.requires_grad and not rebuilt_onto_base else None, user_tensors)
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of tensor input {found}, taken from a view of it that the program "
            "set_() (or assigned `.data`) onto another storage: eager's `._base` is the input, on another storage "
            "than the view, which a compiled output rebuilt with autograd history cannot be (Note [Outputs Over Another "
            "Storage]). Return the set_() view itself, or a clone"
        )


def check_moved_view_of_grad_intermediate(
    path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor], input_storages: set[object], bases: set[object]
) -> None:
    """Refuse a plain output view whose eager `._base` is an intermediate with autograd history on another storage,
    that the graph does not return as an intermediate base (`bases`: their storages): `t1 = t0.as_strided(...)` under
    no_grad, then `t1.data = x`. That base is eager's to read, but `foreign_root` gives none
    that requires grad, and a view rebuilt over the output's storage has the wrong `._base` (Note [Outputs Over Another
    Storage])."""
    root = _moved_root(leaf)
    if root is None or not root.requires_grad or any(f is root for f in finals):
        return
    key = storage_key(root)
    if key not in input_storages and key not in bases:
        raise UnsupportedError(
            f"{path} is a view whose `._base` is an intermediate with autograd history that set_() or `.data =` left "
            "on another storage: eager returns a view of that intermediate, which a compiled output cannot be here "
            "(Note [Outputs Over Another Storage]: supported where the base does not require grad). Return a clone "
            "(.clone())"
        )


def _index_of(root: torch.Tensor | None, tensors: Sequence[torch.Tensor]) -> int | None:
    """The position of `root` itself (not an equal tensor) among `tensors`, if there."""
    return None if root is None else next((k for k, t in enumerate(tensors) if t is root), None)


def _moved_root(leaf: torch.Tensor) -> torch.Tensor | None:
    if is_traceable_subclass(leaf) or not leaf._is_view():
        return None
    root = leaf._base
    if root is None or is_traceable_subclass(root) or storage_key(root) == storage_key(leaf):
        return None
    return root
