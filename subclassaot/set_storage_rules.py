"""`set_(storage, ...)` where the storage is a tensor subclass wrapper's own (Note [set_ Onto A Wrapper's Own
Storage]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `note_wrapper_storage`, and its
dispatch mode a set_() onto a storage of no input to `check_wrapper_storage_set`. Output: an UnsupportedError for
the calls out of reach. Invariants: checks only; nothing here changes a tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from subclassaot.errors import UnsupportedError
from subclassaot.protocol import is_traceable_subclass
from subclassaot.swap_record import SwapRecord

__all__ = ["check_wrapper_storage_set", "note_wrapper_storage"]

# Note [set_ Onto A Wrapper's Own Storage]
# `x.set_(x.untyped_storage(), 0, (2,), (1,))`, x a PairTensor (session 11's open gap): a wrapper subclass's
# untyped_storage() is the wrapper's own, which holds no data (its data pointer is null; reading it raises "invalid
# python storage"). Eager's __torch_dispatch__ runs set_ on each inner tensor with that storage, and the inner
# tensors then point at no memory: the call returns, but any later read of x's values (the program's, or the
# caller's) reads unowned memory (a segmentation fault here, with torch 2.x on CPU). There is no eager value to
# match, so such a call is refused, naming the rule; the same set_ with a plain tensor's storage (its own or another
# input's) is supported (Note [set_ Onto A Whole Storage]), and so is x.set_(t) with a tensor.


def note_wrapper_storage(record: SwapRecord, func: Any, args: tuple[Any, ...], out: object) -> None:
    """After a call of the program: note the storage `untyped_storage()` gave for a tensor subclass wrapper."""
    if func is torch.Tensor.untyped_storage and args and isinstance(args[0], torch.Tensor):
        if is_traceable_subclass(args[0]) and isinstance(out, torch.UntypedStorage):
            record.wrapper_storages[StorageWeakRef(out)] = type(args[0]).__name__  # type: ignore[no-untyped-call]  # untyped in torch


def check_wrapper_storage_set(record: SwapRecord, storage: object) -> None:
    """Refuse `set_(storage, ...)` whose storage is a tensor subclass wrapper's (Note [set_ Onto A Wrapper's Own
    Storage])."""
    name = record.wrapper_storages.get(StorageWeakRef(storage))  # type: ignore[no-untyped-call]  # untyped in torch
    if name is not None:
        raise UnsupportedError(
            f"{name}.set_(storage, ...) with the storage of a {name} (its untyped_storage()): a tensor subclass "
            "wrapper's storage holds no data, and eager sets the inner tensors onto it, whose values are then "
            "unowned memory (Note [set_ Onto A Wrapper's Own Storage]). Pass a tensor instead: x.set_(t), or set_() "
            "the inner tensors onto their own storages"
        )
