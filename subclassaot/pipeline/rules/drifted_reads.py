"""Reads of tensors whose functional value lost the strides eager's tensor keeps.

Input: an op of the program about to run on FunctionalTensors inside the functional run. Output: the op run on its
arguments, where a read argument's current functional value has other strides than the tensor (the wrapper, whose
metadata is eager's) read through a strided copy of eager's layout (`call_with_eager_layouts`, Note [In-Place Ops
As Eager Runs Them]).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.torch_internals import from_functional, is_functional, no_dispatch, set_wrapper_metadata

__all__ = ["call_with_eager_layouts"]


def _drifted(a: object) -> bool:
    if not isinstance(a, torch.Tensor) or not is_functional(a):
        return False
    size, stride = list(a.shape), list(a.stride())
    if not all(type(v) is int for v in (*size, *stride)):
        return False  # symbolic sizes: left to the functional value
    if any(st == 0 and sz > 1 for sz, st in zip(size, stride, strict=True)):
        return False  # overlapping: no copy can hold it laid out so
    value = from_functional(a)
    return list(value.shape) == size and list(value.stride()) != stride


def _any_drifted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an argument of an aten op (a tensor, or one in a list of them: the only nesting aten schemas have)
    is drifted; the common case, none, then skips the tree_map."""
    for a in (*args, *kwargs.values()):
        if any(_drifted(b) for b in a) if isinstance(a, list | tuple) else _drifted(a):
            return True
    return False


def _eager_layout(a: object) -> object:
    if not _drifted(a):
        return a
    assert isinstance(a, torch.Tensor)
    out = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
    out.copy_(a)
    return out


def call_with_eager_layouts(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Note [In-Place Ops As Eager Runs Them]: `func(*args, **kwargs)`, its drifted read arguments replaced by
    copies in eager's layout where `func` is an aten op that neither writes nor views them; a view op's outputs of
    a drifted tensor get eager's strides."""
    schema = getattr(func, "_schema", None)
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten" or schema is None:
        return func(*args, **kwargs)
    if getattr(func, "is_view", False) and not schema.is_mutable:
        out = func(*args, **kwargs)
        if args and _drifted(args[0]):
            _give_eager_view_strides(func, args, kwargs, out)
        return out
    if schema.is_mutable or any(a.alias_info is not None for a in schema.arguments) or not _any_drifted(args, kwargs):
        return func(*args, **kwargs)
    new_args, new_kwargs = pytree.tree_map(_eager_layout, (args, kwargs))
    return func(*new_args, **new_kwargs)


def _give_eager_view_strides(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """The wrappers of view op `func`'s outputs `out` of drifted args[0] get the strides the op gives args[0]'s own
    layout (Note [In-Place Ops As Eager Runs Them])."""
    src = args[0]
    others = [a for a in pytree.tree_leaves((args[1:], kwargs)) if isinstance(a, torch.Tensor)]
    if others:
        return  # a view op reading another tensor (expand_as, view_as): left as it is
    with no_dispatch():
        meta = torch.empty_strided(src.shape, src.stride(), dtype=src.dtype, device="meta")
        made = func(meta, *args[1:], **kwargs)
    outs = out if isinstance(out, list | tuple) else (out,)
    metas = made if isinstance(made, list | tuple) else (made,)
    for o, m in zip(outs, metas, strict=True):
        if isinstance(o, torch.Tensor) and is_functional(o) and o.shape == m.shape and o.stride() != m.stride():
            set_wrapper_metadata(o, list(m.shape), list(m.stride()), int(o.storage_offset()))
