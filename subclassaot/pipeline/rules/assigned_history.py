"""Stage `analyze`, outputs with autograd history whose `.data` the program assigned: which of them the runtime
can rebuild exactly (the graph gives the history, a `.data =` the storage), and the refusal of the others.

Input: one output (its value in the functional run, its path) and the `OutputLeaf`s found for it as an alias.
Output: the leaf its `.data` is regenerated from, or None where the rule does not apply; an UnsupportedError for what
is refused. Invariants: pure reads of the run's records (Note [History Kept Through .data =]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import LeafSource, OutputLeaf

__all__ = ["assigned_with_history", "check_unreplayed_assigned_view", "history_data_leaf"]


def assigned_with_history(value: torch.Tensor, run: FunctionalRun) -> bool:
    """`value`'s last storage swap was `.data =` and it has autograd history of its own."""
    if not (value.requires_grad and id(value) in run.swaps.swapped_by_data):
        return False
    try:
        return value.grad_fn is not None
    except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
        return False


def history_data_leaf(
    path: str, value: torch.Tensor, subclass: bool, leaves: Sequence[OutputLeaf], run: FunctionalRun
) -> OutputLeaf | None:
    """Note [History Kept Through .data =]: for such an output, the leaf its `.data` is regenerated from after
    the graph gave it its history (None: the graph's own value is eager's storage, or the rule does not apply)."""
    if not assigned_with_history(value, run) or (not subclass and run.swaps.is_view(value)):
        return None  # (a plain view: replayed, then assigned, where its chain allows: analyze._check_replay)
    leaf = leaves[0] if len(leaves) == 1 else None
    plain = not subclass and not is_traceable_subclass(value) and not value._is_view() and not run.swaps.is_view(value)
    if plain and leaf is not None and leaf.source is LeafSource.GRAPH and leaf.storage_of is None:
        return None  # `.data =` of a fresh intermediate: the graph's value is that storage already
    exact = (
        leaf is not None
        and leaf.source is LeafSource.INPUT_ALIAS
        and not leaf.is_view
        and leaf.hidden_base is None
        and leaf.foreign_base is None
        and not leaf.input_layout
    )
    if not (plain and exact):
        raise UnsupportedError(
            f"{path}: the program assigned `.data` of this tensor, which has autograd history: eager returns it with "
            "its own history over the assigned storage, which a compiled output cannot have here (Note [History "
            "Kept Through .data =]: supported for a plain tensor assigned an input or a view of one, or a "
            "fresh intermediate). Return the assigned tensor, or a clone"
        )
    return leaf


def check_unreplayed_assigned_view(
    path: str, value: torch.Tensor, run: FunctionalRun, rebuilt_as_view: bool, leaves: Sequence[OutputLeaf]
) -> None:
    """Refuse a plain view output with no replay that `.data =` of it, or of its view root with history, makes
    unreproducible. `rebuilt_as_view`: the output is rebuilt as a view onto its storage without replay (Note [Outputs
    Over Another Storage], or one without history of an input)."""
    if id(value) in run.swaps.swapped_by_data and run.swaps.is_view(value) and not rebuilt_as_view:
        raise UnsupportedError(
            f"{path}: the program assigned `.data` of this view, which eager keeps a view of its base; its view chain "
            "cannot be replayed here (it starts at an intermediate no output returns, or its source changed since), "
            "so the compiled output could not be that view. Return a clone, or assign `.data` of a tensor that is "
            "not a view"
        )
    if not (torch.is_grad_enabled() and value.requires_grad and run.swaps.is_view(value)):
        return
    root = run.swaps.view_root(value)
    if root is value or run.swaps.is_view(root) or not assigned_with_history(root, run):
        return  # (a view assigned `.data`: the rules on views, and Note [Probing Eager's Backward])
    if all(leaf.source is not LeafSource.GRAPH for leaf in leaves):
        raise UnsupportedError(
            f"{path} is a view of a tensor with autograd history whose `.data` the program assigned: eager's view keeps that history over the assigned storage, which a view rebuilt from that "
            "storage cannot have unless the tensor is returned too (Note [History Kept Through .data =]). "
            "Return that tensor as well, or a clone of the view"
        )
