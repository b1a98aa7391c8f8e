"""`set_(storage, ...)` where the storage is a tensor subclass wrapper's own (Note [Autograd Sees The Wrapper]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `note_wrapper_storage`, and its
dispatch mode a set_() onto a storage of no input to `check_wrapper_storage_set`. Output: an UnsupportedError for
the calls out of reach. Invariants: checks only; nothing here changes a tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import is_functional

__all__ = [
    "check_storage_bytes_resize",
    "check_storage_resize",
    "check_wrapper_storage_set",
    "note_traced_storage",
    "note_wrapper_storage",
]


def note_wrapper_storage(record: SwapRecord, func: Any, args: tuple[Any, ...], out: object) -> None:
    """After a call of the program: note the storage `untyped_storage()` gave for a tensor subclass wrapper."""
    if func is torch.Tensor.untyped_storage and args and isinstance(args[0], torch.Tensor):
        if is_traceable_subclass(args[0]) and isinstance(out, torch.UntypedStorage):
            record.wrapper_storages[StorageWeakRef(out)] = type(args[0]).__name__  # type: ignore[no-untyped-call]  # untyped in torch


def check_wrapper_storage_set(record: SwapRecord, storage: object) -> None:
    """Refuse `set_(storage, ...)` whose storage is a tensor subclass wrapper's (Note [Autograd Sees The Wrapper])."""
    name = record.wrapper_storages.get(StorageWeakRef(storage))  # type: ignore[no-untyped-call]  # untyped in torch
    if name is not None:
        raise UnsupportedError(
            f"{name}.set_(storage, ...) with the storage of a {name} (its untyped_storage()): a tensor subclass "
            "wrapper's storage holds no data, and eager sets the inner tensors onto it, whose values are then "
            "unowned memory (Note [Autograd Sees The Wrapper]). Pass a tensor instead: x.set_(t), or set_() "
            "the inner tensors onto their own storages"
        )


def note_traced_storage(record: SwapRecord, func: Any, args: tuple[Any, ...], out: object) -> None:
    """After a call of the program: note the storage `untyped_storage()` gave for a traced tensor (Note [Storage Swaps
    By Rebinding])."""
    if func is torch.Tensor.untyped_storage and args and isinstance(out, torch.UntypedStorage):
        if is_functional(args[0]) or is_traceable_subclass(args[0]):
            key = StorageWeakRef(out)  # type: ignore[no-untyped-call]  # untyped in torch
            record.traced_storages[key] = record.input_paths.get(key, ())


# Storage resize_ inside the program: `t.untyped_storage().resize_(n)` (FSDP2 frees a parameter's storage with
# resize_(0) after use and re-allocates it before the next) changes the bytes of a storage, not a tensor: every tensor
# on it keeps its metadata, and reads past the new end are out of bounds until it grows back, its grown bytes undefined
# until written. The storage method dispatches nothing, and the epilogue replays data and metadata writes, not a
# storage's byte count, so a storage resize_ of any tensor the program traces is refused before torch's method runs,
# naming the input whose storage it is (torch_internals wraps UntypedStorage.resize_ so that this check runs on the
# thread that runs the program); Dynamo's inductor::resize_storage_bytes_ is refused where it dispatches. Fix: resize
# the storage outside the compiled function, as FSDP2's hooks do with torch.compile.
def check_storage_resize(record: SwapRecord, storage: torch.UntypedStorage) -> None:
    """Refuse `resize_` of the storage of a tensor the program traces (see the comment above)."""
    paths = record.traced_storages.get(StorageWeakRef(storage))  # type: ignore[no-untyped-call]  # untyped in torch
    if paths is not None:
        _refuse_storage_resize(paths)


def check_storage_bytes_resize(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """Refuse inductor::resize_storage_bytes_ (what Dynamo captures a storage resize_ as) of a traced tensor (Note
    [Storage Swaps By Rebinding])."""
    if func is torch.ops.inductor.resize_storage_bytes_.default and isinstance(args[0], torch.Tensor):
        key = StorageWeakRef(args[0].untyped_storage())  # type: ignore[no-untyped-call]  # untyped in torch
        _refuse_storage_resize(record.input_paths.get(key, ()))


def _refuse_storage_resize(paths: tuple[str, ...]) -> None:
    whose = f"the storage of {' and '.join(paths)}" if paths else "the storage of a tensor made inside the program"
    raise UnsupportedError(
        f"untyped_storage().resize_() of {whose}: the compiled program cannot change the byte size of a storage "
        "(FSDP2's free with resize_(0), or re-allocation before a copy_), and its epilogue would not replay it "
        "(Note [Storage Swaps By Rebinding]). Resize the storage outside the compiled function, before or "
        "after the call"
    )
