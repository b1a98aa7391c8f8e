"""Stage `analyze`, training outputs: a subclass view that an in-place view op of its own changed, whose history eager
then rebuilds from view functions that miss that op, where the replayed output keeps the history the op recorded;
and a subclass view of an input or another output that only a fresh base could rebuild.

Input: the analysis's output infos and the eager objects they describe, the run. Output: nothing, or
UnsupportedError. Invariants: pure reads of the run's records (Note [Stale View Functions], Note [Subclass Intermediate
Roots]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.schemas import LeafSource, OutputInfo, OutputKind
from subclassaot.torch_internals import storage_key

__all__ = ["check_stale_subclass_outputs"]


def _check_views_over_fresh_leaves(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Autograd Sees The Wrapper]."""
    named = {id(t): i for i, t in enumerate(run.user_tensors)}
    for info, value in zip(infos, leaves, strict=True):
        if info.kind is not OutputKind.TENSOR or info.tree is None or info.replay is not None:
            continue
        if not isinstance(value, torch.Tensor) or not value._is_view():
            continue
        if info.function_view is not None or any(leaf.source is LeafSource.INPUT_ALIAS for leaf in info.leaves):
            continue
        if _view_op_aliases(value, run):
            # a set_() up the chain moved the data, not the view op (Note [Subclass Intermediate Roots])
            continue
        root = run.swaps.view_root(value, through_swaps=True)
        base = root if id(root) in named else value._base
        if base is not None and id(base) in named and not _shares_inner_storage(value, base):
            raise UnsupportedError(
                f"{info.path} is a view of input {named[id(base)]} (a {type(value).__name__}: eager's `._base`), but "
                "its inner tensors share no storage with that input's: the subclass's view op returns new inner "
                "tensors, which breaks the views.alias rule of subclassaot.check_subclass (Note [Autograd Sees The "
                "Wrapper]). Return a clone of the view, or make the view op alias the input's inner tensors (return "
                "torch.utils._python_dispatch.return_and_correct_aliasing(func, args, kwargs, out))"
            )


def _view_op_aliases(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Did the view op that made `value` give inner tensors sharing storage with its source's? (Then the class's
    view ops alias, and a lost link to the input is a set_() further up the chain.)"""
    record = run.swaps.views.get(id(value))
    if record is None or record.func is torch.ops.aten.detach.default or not is_traceable_subclass(record.source):
        return False
    return _shares_inner_storage(value, record.source)


def _shares_inner_storage(value: torch.Tensor, base: torch.Tensor) -> bool:
    keys = {storage_key(leaf) for leaf in dense_leaves_of(base, "base")[1]}
    return any(storage_key(leaf) in keys for leaf in dense_leaves_of(value, "out")[1])


def _check_fresh_views(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Subclass Intermediate Roots]."""
    named = {id(t): f"input {i}" for i, t in enumerate(run.user_tensors)}
    named.update((id(v), info.path) for info, v in zip(infos, leaves, strict=True) if isinstance(v, torch.Tensor))
    for info, value in zip(infos, leaves, strict=True):
        base = value._base if info.view_of_fresh and isinstance(value, torch.Tensor) else None
        if base is not None and id(base) in named:
            raise UnsupportedError(
                f"{info.path} is a view of {named[id(base)]} (a tensor subclass) whose view chain cannot be replayed "
                "(it passes through a tensor the program set_() or changed in place after taking a view of it), so "
                "the compiled output could not be a view of it (Note [Subclass Intermediate Roots]). "
                "Return a clone"
            )


def check_stale_subclass_outputs(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Stale View Functions] and Note [Subclass Intermediate Roots]."""
    _check_views_over_fresh_leaves(infos, leaves, run)
    _check_fresh_views(infos, leaves, run)
    if not torch.is_grad_enabled():
        return
    returned = {id(v) for v in leaves if isinstance(v, torch.Tensor)}
    for info, value in zip(infos, leaves, strict=True):
        replayed = info.kind is OutputKind.TENSOR and info.replay is not None
        if not (replayed or info.kind is OutputKind.IS_INPUT) or not isinstance(value, torch.Tensor):
            continue
        own = run.swaps.inplace_views.get(id(value), [])
        # (an input aliased by others is traced as a member of their base, not a view: its family says enough)
        view = run.swaps.is_view(value) or info.kind is OutputKind.IS_INPUT
        if not (value.requires_grad and is_traceable_subclass(value) and view):
            continue
        if not any(r.grad_enabled for r in own):
            continue
        last, family = max(r.seq for r in own), run.swaps.family_of(value)
        for k, records in run.swaps.inplace_views.items():
            if k in returned or run.swaps.family.get(k, k) != family or all(r.seq < last for r in records):
                continue
            raise UnsupportedError(
                f"{info.path} is a view of a tensor subclass that an in-place view op (t_, unsqueeze_, ...) of its "
                "own changed with grad enabled, after which the program applied an in-place view op to another view "
                "of the same tensor that it does not return: eager then rebuilds the output's autograd history from "
                "view functions without its own op, which the output rebuilt at run time cannot repeat (Note [Stale "
                "View Functions]). Return a clone, or apply the in-place view ops to clones"
            )
