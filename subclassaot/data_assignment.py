"""Stage `analyze`, `.data =` on wrapper subclasses: which outputs' wrappers an assignment set apart from their inner
tensors, how the epilogue repeats an assignment to a subclass input, and which of them cannot be repeated exactly.

Input: a `FunctionalRun` (its `SwapRecord.wrapper_data`) and the outputs analyzed so far. Output: whether an output's
wrapper takes recorded metadata (`OutputInfo.data_meta`), a `DataAssignmentPlan` per subclass input, and an
UnsupportedError for what is refused. Invariants: pure reads of the run's records (Note [Wrapper Data Assignment]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils import _pytree as pytree

from subclassaot.desugar import leaf_meta
from subclassaot.errors import UnsupportedError
from subclassaot.functional_run import FunctionalRun
from subclassaot.schemas import DataAssignmentPlan, FlatInputs, Meta, OutputInfo, ViewStep
from subclassaot.storage_swaps import DataAssignment
from subclassaot.torch_internals import storage_key, symint_expr

__all__ = ["check_data_meta_outputs", "data_assigned_in_chain", "wrapper_data_plans"]


def data_assigned_in_chain(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Does `value`'s wrapper disagree with its inner tensors because of a `.data =` (Note [Wrapper Data
    Assignment])? Where it was assigned to `value` itself or to its view chain's root; or to a tensor of the chain
    before the chain went on from it, from a tensor whose storage is not the root's (a later view's wrapper shares
    the assigned storage, its inner tensors view the root's)."""
    chain: list[tuple[torch.Tensor, int | None]] = []  # (tensor, seq of the view taken from it; None for `value`)
    t, taken = value, None
    while (record := run.swaps.views.get(id(t))) is not None and record.func is not torch.ops.aten.detach.default:
        chain.append((t, taken))
        t, taken = record.source, record.seq
    if id(t) in run.swaps.wrapper_data:
        return True
    for u, seq in chain:
        found = run.swaps.wrapper_data.get(id(u))
        last = found[-1] if found else None
        if last is not None and (seq is None or (last.seq < seq and storage_key(last.source) != storage_key(t))):
            return True
    return False


def wrapper_data_plans(
    flat: FlatInputs,
    run: FunctionalRun,
    replays: Sequence[tuple[ViewStep, ...]],
    wrapper_after: Sequence[Meta | None],
    user_fakes: Sequence[torch.Tensor],
    cloned: frozenset[int],
) -> tuple[DataAssignmentPlan | None, ...]:
    """Per tensor input, how the epilogue repeats the `.data =` assignments to it (None: there were none)."""
    off = _clones_off_layout(run, user_fakes, cloned)
    return tuple(_plan(i, flat, run, replays[i], wrapper_after, off) for i in range(len(run.user_tensors)))


def _plan(
    i: int,
    flat: FlatInputs,
    run: FunctionalRun,
    steps: tuple[ViewStep, ...],
    wrapper_after: Sequence[Meta | None],
    off: dict[object, int],
) -> DataAssignmentPlan | None:
    t = run.user_tensors[i]
    found = run.swaps.wrapper_data.get(id(t))
    if not found or next(k for k, u in enumerate(run.user_tensors) if u is t) != i:
        return None  # the same object passed twice: assigned once, for its first position
    path = flat.leaves[flat.tensor_indices[i]].path
    records = run.swaps.inplace_views.get(id(t), [])
    first, last = found[0], found[-1]
    if steps and any(first.seq < r.seq < last.seq for r in records):
        raise UnsupportedError(
            f"{path}.data = ...: the program assigns `.data` of this tensor subclass input more than once, with an "
            "in-place view op (t_, unsqueeze_) on it in between; replaying that op on the input needs the wrapper "
            "metadata of an assignment that a later one overwrites. Assign `.data` once, or rebind the name instead"
        )
    source = _unchanged_input(last.source, run, wrapper_after)
    size, stride, offset = last.meta
    meta = (tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset))
    plan = DataAssignmentPlan(
        after_steps=sum(1 for r in records if r.seq < first.seq),
        meta=meta,
        source=source,
        final=leaf_meta(t) == meta,
    )
    if storage_key(t) in off and not (plan.source is not None and plan.final):
        _refuse_off_layout(path, flat, off[storage_key(t)])
    return plan


def _resizes(assignments: Sequence[DataAssignment]) -> bool:
    return any(a.size_before != a.meta[0] for a in assignments)


def _unchanged_input(source: torch.Tensor, run: FunctionalRun, wrapper_after: Sequence[Meta | None]) -> int | None:
    """The tensor input `source` is, if the program leaves its own metadata and storage as they came (its real
    metadata at run time are then those it had when assigned)."""
    j = next((k for k, u in enumerate(run.user_tensors) if u is source), None)
    if j is None or wrapper_after[j] is not None:
        return None
    swaps = run.swaps
    if id(source) in swaps.inplace_views or id(source) in swaps.wrapper_data or id(source) in swaps.wrapper_sets:
        return None
    return j


def check_data_meta_outputs(
    flat: FlatInputs,
    run: FunctionalRun,
    user_fakes: Sequence[torch.Tensor],
    cloned: frozenset[int],
    outputs: Sequence[OutputInfo],
) -> None:
    """Refuse outputs whose wrapper metadata from a `.data =` cannot be given exactly: one that requires grad and
    took another size (eager's backward takes gradients of that size through the history of the inner tensors, the
    compiled autograd.Function does not), and one whose metadata were recorded on a clone with another layout."""
    off = _clones_off_layout(run, user_fakes, cloned)
    for info, value in zip(outputs, pytree.tree_leaves(run.output), strict=True):
        if info.data_meta is None or not isinstance(value, torch.Tensor):
            continue
        if torch.is_grad_enabled() and value.requires_grad and _resizes(run.swaps.wrapper_data.get(id(value), [])):
            raise UnsupportedError(
                f"{info.path}: the program assigned `.data` of this tensor subclass, which requires grad, from a tensor "
                "of another size: eager's autograd takes gradients of the new size through its history, which a "
                "compiled output cannot reproduce. Assign a tensor of its size, or return a clone made before"
            )
        if storage_key(value) in off:
            _refuse_off_layout(info.path, flat, off[storage_key(value)])


def _clones_off_layout(
    run: FunctionalRun, user_fakes: Sequence[torch.Tensor], cloned: frozenset[int]
) -> dict[object, int]:
    """Wrapper storage key -> subclass input that runs as a clone whose layout is not the input's (a non-leaf input
    that requires grad, in training: a storage offset, or strides of an overlapping input)."""
    return {
        run.initial_wrapper_keys[i]: i
        for i in sorted(cloned)
        if run.initial_wrapper_keys[i] is not None and leaf_meta(user_fakes[i]) != run.initial_metas[i]
    }


def _refuse_off_layout(path: str, flat: FlatInputs, i: int) -> None:
    raise UnsupportedError(
        f"{path}: the program assigned `.data` of this tensor subclass from a view of "
        f"{flat.leaves[flat.tensor_indices[i]].path}, a tensor subclass input that requires grad and is not a leaf, "
        "which runs in training as a clone whose layout (storage offset, strides) is not the input's; the wrapper's "
        "metadata after the assignment cannot be told exactly. Assign from a clone, or pass the input contiguous "
        "and at storage offset 0"
    )
