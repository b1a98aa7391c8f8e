"""`.data =` with another dtype (Note [Storage Swaps By Rebinding]): eager's tensor takes the assigned tensor's dtype,
the run's functional tensor keeps the one it was made with. Which such assignments run (a fresh intermediate, the
graph's output as assigned: `SwapRecord.retyped`), and the refusals where the kept dtype would show: a resize_()
that grows the storage, requires_grad turned on, a write with grad whose history only one of the two dtypes records.

Input: the analysis run's `SwapRecord` and the op about to run. Output: `SwapRecord.retyped` kept up to date, or an
UnsupportedError (eager's own RuntimeError where eager raises). Invariants: reads of the run's tensors only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.storage_reach import writes_self
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.torch_internals import differentiable_dtype, storage_key


def check_data_dtype(record: SwapRecord, target: torch.Tensor, source: torch.Tensor) -> None:
    """`target.data = source` with another dtype (or device), target plain: eager's target takes the new dtype; the
    run's functional tensor keeps the one it was made with, and so would the input or the view the compiled call
    gives back. A fresh intermediate (no view, on no input's storage) is the graph's output as assigned, and runs
    (Note [Storage Swaps By Rebinding])."""
    if source.dtype == target.dtype and source.device == target.device:
        record.retyped.pop(id(target), None)
        return
    found = record.input_positions.get(id(target))
    inputs = {storage_key(t) for t in record.run_inputs if not is_traceable_subclass(t)}
    if found is None and not target._is_view() and storage_key(target) not in inputs:
        record.retyped[id(target)] = source.dtype
        return
    what = f"tensor input {found[0]}" if found is not None else "a view of an input or of an intermediate"
    raise UnsupportedError(
        f"`.data =` of {what} (dtype {target.dtype}, device {target.device}) with a tensor of dtype {source.dtype} "
        f"on {source.device}: eager's tensor takes the new dtype, which the compiled call cannot give it (the trace "
        "keeps each tensor's dtype). Assign a tensor of the same dtype (`x.data = y.to(x.dtype)`), or return the "
        "assigned tensor itself instead of the input"
    )


def check_retyped_resize(x: torch.Tensor, size: list[int], eager_dtype: torch.dtype) -> None:
    """resize_() of a tensor a `.data =` gave another dtype (Note [Storage Swaps By Rebinding]):
    eager counts its storage in the new dtype's elements, whose growth the run (whose tensor keeps the dtype it was
    made with) cannot make: refused. One that does not grow it runs as any resize_ within the storage."""
    count = x.storage_offset() + int(torch.Size(size).numel())
    if not bool(count * eager_dtype.itemsize > x.untyped_storage().nbytes()):
        return
    raise UnsupportedError(
        f"resize_() to {tuple(size)} of a tensor (dtype {x.dtype}) whose `.data` the program assigned a tensor of dtype "
        f"{eager_dtype}: eager's tensor took the new dtype, and its resize_() grows the storage in that dtype's "
        "elements, which the run (whose tensor keeps the dtype it was made with) cannot make. Resize the assigned "
        "tensor itself, or assign a tensor of the same dtype (`t.data = y.to(t.dtype)`)"
    )


def refuse_retyped_gain(eager_dtype: torch.dtype, run_dtype: torch.dtype) -> None:
    """requires_grad turned on for a fresh intermediate a `.data =` gave another dtype (`check_data_dtype`): eager's
    tensor has the new dtype, the run's its old one, so whether it can require grad, and the gradient's dtype, are
    not eager's. Eager's error where its dtype cannot require grad; refused otherwise."""
    if not differentiable_dtype(eager_dtype):
        raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
    raise UnsupportedError(
        f"the program turns requires_grad on for a tensor it computed and then assigned `.data =` a tensor of dtype "
        f"{eager_dtype} (it was {run_dtype}): eager's tensor takes the new dtype, which the compiled run cannot give "
        "it (the trace keeps each tensor's dtype). Assign a tensor of the same dtype (`t.data = y.to(t.dtype)`), or "
        "call requires_grad_() on the assigned tensor itself"
    )


def check_retyped_grad_write(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """An in-place write with grad of a value that requires grad into a tensor a `.data =` gave a dtype of the other
    kind (`check_data_dtype`): autograd records a write only into a floating point or complex tensor, so eager's
    (`t.data = x_float` on an integer t, then `t.copy_(y)`) gains a history (its views too) the run's cannot, or the
    other way round: refused. (Views taken after the assignment have eager's dtype in the run as well.)"""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or not writes_self(func) or not torch.is_grad_enabled():
        return
    eager_dtype = record.retyped.get(id(x))
    if eager_dtype is None or differentiable_dtype(eager_dtype) == differentiable_dtype(x.dtype):
        return
    if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args, kwargs))):
        return
    what = "records the write there" if differentiable_dtype(eager_dtype) else "records no history there"
    raise UnsupportedError(
        f"the program writes in place ({func.overloadpacket.__name__}), with grad, a value that requires grad into a "
        f"tensor it computed as {x.dtype} and then assigned `.data =` a tensor of dtype {eager_dtype}: eager's tensor "
        f"took the new dtype, so autograd {what}, which the compiled run cannot match (the trace keeps each tensor's "
        "dtype, and autograd records writes only into floating point ones). Write into the assigned tensor itself, "
        "or assign a tensor of the same dtype (`t.data = y.to(t.dtype)`)"
    )
