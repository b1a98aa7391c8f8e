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
# so do the strides of everything derived from x afterwards (`x.add_(x); x[:, :0].clone()`, fuzz seed 0 #52). Where
# the out-of-place result's strides differ from x's, the op is traced as `x.copy_(op(x, ...))` instead: the same
# values, and functionalization's copy keeps x's strides (it clones with x's strides before copying). Elsewhere the
# traced out-of-place result is dead and the op runs as usual. Ops that draw random numbers are left alone (tracing
# them twice would draw twice), as are ops with no out-of-place twin of the same overload and signature.

_SKIPPED = frozenset({"copy_", "set_", "resize_", "resize_as_"})


def _twin(func: Any) -> Any:
    """The out-of-place overload computing what in-place `func` writes, or None."""
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten":
        return None
    name = func.overloadpacket.__name__
    if not name.endswith("_") or name.startswith("_") or name in _SKIPPED:
        return None
    if torch.Tag.inplace_view in func.tags or torch.Tag.nondeterministic_seeded in func.tags:
        return None
    first = func._schema.arguments[0] if func._schema.arguments else None
    if first is None or first.alias_info is None or not first.alias_info.is_write:
        return None
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
    """Note [In-Place Strides]: run in-place `func` on FunctionalTensor args[0] traced as a copy into it where the
    out-of-place result's strides differ; None where the caller should run `func` as usual."""
    if not args or not isinstance(args[0], torch.Tensor) or not is_functional(args[0]):
        return None
    x = args[0]
    twin = _twin(func)
    if twin is None or _layout_decided(x):
        return None
    result = twin(*args, **kwargs)
    if not isinstance(result, torch.Tensor) or result.shape != x.shape or result.stride() == x.stride():
        return None  # the traced result is dead code, dropped with the graph's other dead nodes
    x.copy_(result)
    return x
