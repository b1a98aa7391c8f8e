"""In-place ops and views whose strides under functionalization and fake tensors are eager's.

Input: an op called on a FunctionalTensor inside the functional run. Output: the op applied so that the tensor keeps
its strides (`apply_keeping_strides`, Note [Eager's Layouts Under Functionalization]) or so that a view gets eager's
strides (`view_with_eager_strides`, Note [Eager's Layouts Under Functionalization]), or None where the op needs no help.
"""

from __future__ import annotations

from typing import Any

import torch

from subclassaot.torch_internals import is_functional

__all__ = ["apply_keeping_strides", "eager_view_strides", "fill_in_memory_order", "view_with_eager_strides"]

# Note [Eager's Layouts Under Functionalization]
# Eager's in-place ops never change their tensor's metadata, and eager's kernels choose the strides of results from
# their inputs' layouts. Functionalization and the fake kernels depart from both; each departure is fixed where the op
# runs, traced into the graph:
# - In-place strides. `x.add_(y)` is computed as `add(x, y)` and x takes that result's metadata; where x's layout leaves
#   TensorIterator a choice (size-0 or size-1 dims, gaps, an offset-free permutation broken by a size-1 dim) the strides
#   differ, and so do those of everything derived from x (`x.add_(x); x[:, :0].clone()`). On such a layout the op is
#   traced as `x.copy_(op(x, ...))`, whose functional copy keeps x's strides. Fake and real kernels choose differently
#   in size-1 dims, so every op on an undecided layout is rewritten; ops with no out-of-place twin of the same overload
#   run as usual.
# - Reads after a write through a view. Functionalization regenerates x after a write through one of its views by the
#   view's inverse, whose strides may differ in size-1 dims; ops reading x compute on that value, and their results'
#   strides follow it. An op that neither writes nor views its arguments reads such an argument through a copy laid out
#   as the wrapper is (empty_strided + copy_); a view of it gets the strides the view op gives eager's layout (the op
#   run on a meta tensor), so reads of the view are copied the same way.
# - View strides in size-1 dims. Eager's view (and reshape where it can view) takes its strides from ATen's
#   computeStride; the fake kernel picks others for size-1 dims and keeps the source's when the shape is unchanged
#   (`x[0:2:2].view(1, 3)` of a (3, 3) x: eager (3, 1), fake (6, 1)). Where the two disagree the view runs as as_strided
#   with computeStride's strides, recorded as the program's view (which is what a replay repeats on real tensors).
# - Random fills in memory order. Eager's in-place random fills (bernoulli_, uniform_, exponential_, ...; dropout's
#   `empty_like(x).bernoulli_(1 - p)`) draw one number per element in memory order, where the out-of-place result is
#   contiguous and the same draws land on other elements. A fill of a non-contiguous, non-overlapping tensor is traced
#   as a fill of a contiguous tensor whose dims are x's in memory order, permuted back and copied into x: the draws,
#   their order and the RNG state after are eager's. `normal_` is left as it is: eager fills a strided tensor with
#   another algorithm than a contiguous one.
# - contiguous() of a contiguous clone. An input that runs as a clone (Note [Training Through A Joint Graph]) is cloned
#   contiguous where its own strides overlap or leave gaps; its contiguous() would return the clone itself where eager's
#   copies the input, so the mode makes that call a copy (eager's own `clone(memory_format=torch.contiguous_format)`). A
#   view of such a clone whose contiguous() returns itself is refused where it matters (analyze).
# - In-place foreach ops run tensor by tensor. Functionalization and the run's records follow writes through Tensor
#   arguments, not lists, so `torch._foreach_mul_([a, b], [2, 3])` runs as `Tensor.mul_` on each tensor in turn, list
#   arguments indexed alongside: eager's own order on CPU. An out-of-place foreach op writes nothing and runs as it is.

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
    """Note [Eager's Layouts Under Functionalization]: run in-place `func` on FunctionalTensor args[0] traced as a copy
    into it where its layout leaves the out-of-place result's strides open; None where the caller should run `func` as
    usual."""
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


_MEMORY_ORDER_FILLS = frozenset(
    {"bernoulli_", "uniform_", "exponential_", "geometric_", "cauchy_", "log_normal_", "random_"}
)


def fill_in_memory_order(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """Note [Eager's Layouts Under Functionalization]: in-place random fill `func` of FunctionalTensor args[0] traced as
    a contiguous fill in x's memory order; None where the caller should run `func` as usual."""
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
    """Note [Eager's Layouts Under Functionalization]: `view` of FunctionalTensor args[0] as an as_strided with eager's
    strides where the fake kernel would choose others; None where the caller should run `func` as usual."""
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
