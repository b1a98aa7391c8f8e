"""In-place ops and views whose strides under functionalization and fake tensors are eager's.

Input: an op called on a FunctionalTensor inside the functional run. Output: the op applied so that the tensor keeps
its strides (`apply_keeping_strides`, Note [In-Place Strides]) or so that a view gets eager's strides
(`view_with_eager_strides`, Note [View Strides In Size-1 Dims]), or None where the op needs no help.
"""

from __future__ import annotations

from typing import Any

import torch

from subclassaot.torch_internals import is_functional

__all__ = ["apply_keeping_strides", "eager_view_strides", "fill_in_memory_order", "view_with_eager_strides"]

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


# Note [Random Fills In Memory Order]
# Eager's in-place random fills (`bernoulli_`, `uniform_`, `exponential_`, ..., as dropout's `empty_like(x)
# .bernoulli_(1 - p)` on a transposed x runs) draw one number per element in memory order. Functionalization
# computes `x.bernoulli_(p)` as the out-of-place `bernoulli(x, p)`, whose result is contiguous: the same draws land
# on other elements, and dropout after a transpose (a transformer layer's) drops other units than eager. So a fill of
# a non-contiguous, non-overlapping tensor is traced as a fill of a contiguous tensor whose dims are x's in memory
# order, permuted back and copied into x: the draws, their count and their order are eager's, and so is the RNG state
# after the call. `normal_` is left as it is: eager fills a contiguous tensor with another algorithm than a strided
# one, so no contiguous fill reproduces a strided one.

_MEMORY_ORDER_FILLS = frozenset(
    {"bernoulli_", "uniform_", "exponential_", "geometric_", "cauchy_", "log_normal_", "random_"}
)


def fill_in_memory_order(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """Note [Random Fills In Memory Order]: in-place random fill `func` of FunctionalTensor args[0] traced as a
    contiguous fill in x's memory order; None where the caller should run `func` as usual."""
    if not isinstance(func, torch._ops.OpOverload) or func.overloadpacket.__name__ not in _MEMORY_ORDER_FILLS:
        return None
    if not args or not isinstance(args[0], torch.Tensor) or not is_functional(args[0]):
        return None
    x = args[0]
    shape, stride = list(x.shape), list(x.stride())
    if not all(type(v) is int for v in (*shape, *stride)) or x.is_contiguous():
        return None
    if any(st == 0 and sz > 1 for sz, st in zip(shape, stride, strict=True)):
        return None  # overlapping elements: eager draws once per memory location, left as it is
    perm = sorted(range(x.dim()), key=lambda d: -stride[d])  # outermost dim first, as TensorIterator walks memory
    rest = list(args[1:])
    if rest and isinstance(rest[0], torch.Tensor):  # bernoulli_.Tensor: p per element, in the same order
        rest[0] = rest[0].expand(shape).permute(perm)
    flat = torch.empty([shape[d] for d in perm], dtype=x.dtype, device=x.device)
    func(flat, *rest, **kwargs)
    x.copy_(flat.permute(sorted(range(x.dim()), key=perm.__getitem__)))
    return x


# Note [View Strides In Size-1 Dims]
# Eager's `view` (and `reshape` where it can view) takes its strides from ATen's computeStride; the fake kernel
# (torch._refs' reshape algorithm) picks other strides for size-1 dims, and keeps the source's strides outright when
# the shape is unchanged: `x[0:2:2].view(1, 3)` of a (3, 3) x has strides (3, 1) in eager, (6, 1) fake (fuzz seed
# 5000 #283). Everything the analysis derives from the view (an output's regenerated strides, a view made from it)
# would then differ from eager. Where the two disagree the view runs as `as_strided` with computeStride's strides:
# the same elements, eager's metadata, traced into the graph as such (the run records it as the program's `view`,
# which is what a replay repeats on real tensors).


def eager_view_strides(old_shape: list[int], old_stride: list[int], new_shape: list[int]) -> list[int] | None:
    """ATen's computeStride: the strides `view(new_shape)` gives, or None where no view is possible."""
    if not old_shape:
        return [1] * len(new_shape)
    numel = 1
    for s in old_shape:
        numel *= s
    if numel == 0:
        if old_shape == new_shape:
            return list(old_stride)
        contiguous = [1] * len(new_shape)
        for d in range(len(new_shape) - 2, -1, -1):
            contiguous[d] = max(new_shape[d + 1], 1) * contiguous[d + 1]
        return contiguous
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride, tensor_numel, view_numel = old_stride[-1], 1, 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride, tensor_numel, view_numel = old_stride[tensor_d - 1], 1, 1
    return new_stride if view_d == -1 else None


def view_with_eager_strides(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """Note [View Strides In Size-1 Dims]: `view` of FunctionalTensor args[0] as an as_strided with eager's strides
    where the fake kernel would choose others; None where the caller should run `func` as usual."""
    if func is not torch.ops.aten.view.default or kwargs or len(args) != 2 or not is_functional(args[0]):
        return None
    x, shape = args[0], args[1]
    old_shape, old_stride = list(x.shape), list(x.stride())
    if not all(type(v) is int for v in (*old_shape, *old_stride, *shape, x.storage_offset())):
        return None  # symbolic sizes: left to the fake kernel
    numel = 1
    for s in old_shape:
        numel *= s
    new_shape = list(shape)
    if -1 in new_shape:
        known = 1
        for s in new_shape:
            known *= s if s != -1 else 1
        if known == 0:
            return None
        new_shape[new_shape.index(-1)] = numel // known
    stride = eager_view_strides(old_shape, old_stride, new_shape)
    if stride is None:
        return None
    out = func(*args)
    assert isinstance(out, torch.Tensor), f"BUG: {func} returned {type(out).__name__}"
    if list(out.shape) != new_shape or list(out.stride()) == stride:
        return out
    strided: torch.Tensor = torch.ops.aten.as_strided.default(x, new_shape, stride, x.storage_offset())
    return strided
