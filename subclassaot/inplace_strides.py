"""In-place ops that keep their tensor's strides under functionalization, as eager does.

Input: an in-place op called on a FunctionalTensor inside the functional run. Output: the op applied so that the
tensor keeps its strides (`apply_keeping_strides`), or None where the op needs no help. See Note [In-Place Strides].
"""

from __future__ import annotations

from typing import Any

import torch

from subclassaot.torch_internals import is_functional

__all__ = ["apply_keeping_strides"]

# Note [In-Place Strides]
# Eager's in-place ops never change their tensor's metadata. Functionalization computes `x.add_(y)` as the
# out-of-place `add(x, y)` and gives x that result's metadata; where x's layout leaves TensorIterator a choice (size-0
# or size-1 dims, gaps, an offset-free permutation broken by a size-1 dim) the result's strides differ from x's, and
# so do the strides of everything derived from x afterwards (`x.add_(x); x[:, :0].clone()`, fuzz seed 0 #52). On
# such a layout the op is traced as `x.copy_(op(x, ...))` instead: the same values, and functionalization's copy
# keeps x's strides (it clones with x's strides before copying). Whether the strides would differ cannot be read off
# the fake result: fake and real kernels choose differently in size-1 dims (fuzz seed 31 #1824), so every op on an
# undecided layout is rewritten. Ops with no out-of-place twin of the same overload and signature run as usual.

_SKIPPED = frozenset({"copy_", "set_", "resize_", "resize_as_"})


def _twin(func: Any) -> Any:
    """The out-of-place overload computing what in-place `func` writes, or None."""
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten":
        return None
    name = func.overloadpacket.__name__
    if not name.endswith("_") or name.startswith("_") or name in _SKIPPED:
        return None
    if torch.Tag.inplace_view in func.tags:
        return None
    written = [a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments]
    if written[:1] != [True] or any(written[1:]):
        return None  # writes more than its first argument (rrelu_with_noise_ writes its noise too)
    twin = getattr(getattr(torch.ops.aten, name[:-1], None), func._overloadname, None)
    if twin is None:
        return None
    names = [a.name for a in func._schema.arguments]
    return twin if [a.name for a in twin._schema.arguments] == names else None


def _layout_decided(x: torch.Tensor) -> bool:
    """Is the out-of-place result's layout x's own? Yes when x is dense, non-overlapping and has no size-0/1 dim:
    TensorIterator then orders the result's dims by x's strides alone."""
    if any(s <= 1 for s in x.shape):
        return False
    expected = 1
    for st, s in sorted(zip(x.stride(), x.shape, strict=True)):
        if st != expected:
            return False
        expected *= s
    return True


def apply_keeping_strides(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """Note [In-Place Strides]: run in-place `func` on FunctionalTensor args[0] traced as a copy into it where its
    layout leaves the out-of-place result's strides open; None where the caller should run `func` as usual."""
    if not args or not isinstance(args[0], torch.Tensor) or not is_functional(args[0]):
        return None
    x = args[0]
    twin = _twin(func)
    if twin is None or _layout_decided(x):
        return None
    result = twin(*args, **kwargs)
    if not isinstance(result, torch.Tensor) or result.shape != x.shape:
        raise AssertionError(f"{twin} gave {type(result).__name__} of another shape than {func}'s tensor")
    x.copy_(result)
    return x
