"""Stage `analyze`, while the program runs: refusals of a use whose result may carry a history the trace cannot give
it as eager does, held until the program ends and raised only where that result reaches an output or an input.

Input: the `SwapRecord` of the functional run, each torch call of the program (its arguments, its result) and the
refusals its checks raised. Output: marks in the record; at the end, the first held refusal raised where an output
or an input (as the program leaves it) is marked. Invariants: never changes a tensor; with no refusal held, a call
costs one truth test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.errors import UnsupportedError
from subclassaot.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.swap_record import SwapRecord
from subclassaot.torch_internals import get_version, storage_key

__all__ = ["HeldRefusal", "hold", "note_call", "note_set", "raise_if_reached", "versions_before"]


# Note [Refusals Held Until A Use Reaches An Output]
# Some rules refuse a use with grad of a tensor whose history the trace cannot keep as eager does: a view used after
# an in-place view op changed the layout of its base (Note [Views Used After An In-Place View Op On Their Base]), a
# grad-free member of a subclass family another member of which gained grad (Note [Members Of A Subclass Family That
# Gained Grad]). What is wrong is the history (or the missing requires_grad) of what the use computes. A use whose
# result reaches no output and no input (`t1 = t0.view(1, 2)`, t1 never used again: fuzz seed 40000 #2942, #4209,
# #6381, seed 12000 #2613) changes nothing observable: the backward runs only through the outputs' histories. So
# those rules raise a `HeldRefusal`, which the torch-function mode catches and keeps: the call still runs, and its
# results are marked, as is everything computed from a marked tensor and the storage of each tensor a call with a
# marked argument wrote (its version counter advanced; set_() and `.data =` onto a marked tensor mark the target).
# At the end of the run the first held refusal is raised where an output, or an input as the program leaves it (its
# dense leaves' storages included), is marked. A refusal raised below the torch-function mode (the set_() checks)
# is not held.


class HeldRefusal(UnsupportedError):
    """A refusal that applies only where what the refused use computes reaches an output or an input (Note [Refusals
    Held Until A Use Reaches An Output])."""


def hold(record: SwapRecord, checks: Sequence[Callable[[], None]]) -> bool:
    """Run `checks`, keeping the HeldRefusal each raises; whether any did."""
    held = False
    for check in checks:
        try:
            check()
        except HeldRefusal as e:
            record.held_refusals.append(e)
            held = True
    return held


def versions_before(record: SwapRecord, held: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What `note_call` needs from before the call: None where nothing can be marked by it (the usual case)."""
    if not record.held_refusals:
        return None
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not held and not any(_marked(record, t) for t in tensors):
        return None
    return [(t, get_version(t)) for t in tensors]


def note_call(record: SwapRecord, before: Any, out: object) -> None:
    """Mark the results of a call with a held refusal or a marked argument (`before`: from `versions_before`), and
    the storages it wrote."""
    if before is None:
        return
    for t in pytree.tree_leaves(out):
        if isinstance(t, torch.Tensor):
            record.held_ids.add(id(t))
            record.keep_alive.append(t)
    for t, version in before:
        if get_version(t) != version:
            record.held_storages.update(_storages(t))


def note_set(record: SwapRecord, target: torch.Tensor, source: object) -> None:
    """`target.set_(source)` or `target.data = source`: target is marked where source is."""
    if record.held_refusals and isinstance(source, torch.Tensor) and _marked(record, source):
        record.held_ids.add(id(target))
        record.held_storages.update(_storages(target))
        record.keep_alive.append(target)


def raise_if_reached(record: SwapRecord, tensors: Sequence[object]) -> None:
    """At the end of the run: raise the first held refusal where one of `tensors` (the outputs' leaves, the inputs
    as the program leaves them and their dense leaves) is marked."""
    if not record.held_refusals:
        return
    for t in tensors:
        if isinstance(t, torch.Tensor) and _marked(record, t):
            raise record.held_refusals[0]


def _marked(record: SwapRecord, t: torch.Tensor) -> bool:
    return id(t) in record.held_ids or any(k in record.held_storages for k in _storages(t))


def _storages(t: torch.Tensor) -> list[object]:
    leaves = flatten_subclass(t, "t")[1] if is_traceable_subclass(t) else [t]
    return [storage_key(leaf) for leaf in leaves]
