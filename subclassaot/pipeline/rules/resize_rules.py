"""resize_() and resize_as_() under the storage-swap mode: what functionalization cannot take as it comes.

Input: the mode's `SwapRecord` and the arguments of one resize_ or resize_as_ of a FunctionalTensor (or of a traceable
wrapper subclass, for resize_as_). Output: resize_as_ as the resize_ eager runs for it; the strides a resize_ gives;
StorageReachError (the driver then traces the input over its whole storage, Note [as_strided On Inputs]) or a precise
UnsupportedError where functionalization's own resize_ would lose writes. Invariants: reads the record only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import optimization_hint

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.storage_reach import StorageReachError
from subclassaot.pipeline.rules.swap_record import elements_of
from subclassaot.torch_internals import has_view_chain, storage_key

if TYPE_CHECKING:
    from subclassaot.pipeline.rules.swap_record import SwapRecord


def as_resize(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Note [Storage Swaps By Rebinding]: the arguments of the resize_ a resize_as_(args, kwargs) is."""
    x, template = args[0], args[1]
    memory_format = args[2] if len(args) > 2 else kwargs.get("memory_format")
    if memory_format is torch.preserve_format:
        memory_format = torch._prims_common.suggest_memory_format(template)
    return (x, list(template.shape)), ({} if memory_format is None else {"memory_format": memory_format})


def resize_strides(size: list[Any], memory_format: torch.memory_format | None) -> list[Any]:
    """The strides eager's resize_ gives a tensor of `size` (contiguous, or in the memory format asked for)."""
    if memory_format is torch.preserve_format:
        raise UnsupportedError("resize_() with memory_format=torch.preserve_format, which raises in eager")
    if memory_format is torch.channels_last:
        return list(torch._prims_common.make_channels_last_strides_for(size))
    if memory_format is torch.channels_last_3d:
        return list(torch._prims_common.make_channels_last_3d_strides_for(size))
    return list(torch._prims_common.make_contiguous_strides_for(size))


def _hint(v: Any) -> Any:
    """A symbolic size by its hint, no guard added (Note [Storage Swaps By Rebinding]: where sizes are
    symbolic, the rule is decided for the sizes of the inputs compiled for)."""
    return optimization_hint(v) if isinstance(v, torch.SymInt) else v


def check_resize_within_storage(
    record: SwapRecord, x: torch.Tensor, size: list[Any], memory_format: torch.memory_format | None
) -> None:
    """Note [Storage Swaps By Rebinding], for a resize_ of FunctionalTensor x that does not grow its
    storage and is not on a synthetic base."""
    restrides = memory_format not in (None, torch.contiguous_format)
    if not restrides and not has_view_chain(x):
        return
    if not restrides:
        offset = _hint(x.storage_offset())
        new = elements_of([_hint(s) for s in size], resize_strides([_hint(s) for s in size], None), offset)
        held = elements_of([_hint(s) for s in x.shape], [_hint(s) for s in x.stride()], offset)
        if new is None or held is None or held.covers(new):
            return  # (too many elements to list: functionalization's resize_, as before this rule)
    why = (
        f"resize_() with memory_format={memory_format} (functionalization makes the tensor contiguous)"
        if restrides
        else "resize_() to a size that covers storage elements the tensor does not hold after an earlier resize_() "
        "or view op (functionalization would lose the writes to them)"
    )
    own = record.own_inputs.get(storage_key(x))
    if own is not None:
        raise StorageReachError(f"{own[0]}: {why}", leaf=own[1])
    raise UnsupportedError(
        f"{why}, of a tensor made inside the program: not supported (Note [Storage Swaps By Rebinding]). "
        "Make a new tensor of the size (torch.empty) and copy the elements into it instead"
    )
