"""In-place ops that read memory they write through another view of it (Note [In-Place Ops As Eager Runs Them]).

Input: an in-place op under functionalization, the tensor it writes and its arguments (their sizes, strides and
offsets). Output: `check_no_overlapping_read` refuses (UnsupportedError) where some element reads a location the op
writes at another index (eager's result then depends on its loop order, or eager's overlap check raises), except a
read eager's CPU loop makes before the write. With symbolic sizes it decides at the sizes of these inputs (their
hints) and guards the decision: a call whose sizes make the views meet where these did not fails the entry's guards,
and its compile decides anew (refused as a static one is).
Invariants: reads metadata only; adds ShapeEnv guards only where a symbolic layout's decision allows the op; an
unbacked size, or too many elements to list, is not decided (allowed, as for static sizes).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv, guard_bool, guard_int

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import Elements, dense_strides, elements_of, tensor_meta
from subclassaot.torch_internals import hint_of, storage_key

_Layout = tuple[list[int], list[int], int]  # sizes, strides, storage offset
_SymLayout = tuple[list[Any], list[Any], Any]  # the same, symbolic
_EAGER_GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE: TensorIterator runs serially below it
_MAX_LISTED = 1 << 14


def check_no_overlapping_read(func: Any, written: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse `func` writing `written` where it reads part of that memory through another argument (see above)."""
    key = storage_key(written)
    for other in [*args, *kwargs.values()]:
        if not isinstance(other, torch.Tensor) or other is written or is_traceable_subclass(other):
            continue
        if storage_key(other) != key or tensor_meta(other) == tensor_meta(written):
            continue
        mine, theirs = _hinted(written), _hinted(other)
        if mine is None or theirs is None:
            continue  # an unbacked size: not decidable here
        refused = _refused(func, written, args, mine, theirs)
        if refused:
            raise _overlapping_read(func)
        if refused is not None:
            with _guards_described(written, f"{func} writes memory apart from another view it reads"):
                _guard_decision(written, other)


def _refused(func: Any, written: torch.Tensor, args: tuple[Any, ...], mine: _Layout, theirs: _Layout) -> bool | None:
    """Does an element read a location the op writes at another index, at these layouts? None: not decidable."""
    if func is torch.ops.aten.copy_.default or torch.Tag.pointwise in func.tags:
        read = _broadcast(theirs, mine[0])
        at, reads = _offsets(mine), None if read is None else _offsets(read)
        if at is not None and reads is not None:
            # every index reads what it writes there, or memory the op does not write: exact
            targets = set(at)
            elsewhere = any(o in targets and o != i for o, i in zip(reads, at, strict=True))
            return elsewhere and not _reads_before_written(func, written, args, (mine, theirs), (at, reads))
    a, b = elements_of(*mine), elements_of(*theirs)
    if a is None or b is None:
        return None
    return _meet(a, b)


# the words for the ShapeEnv guards added here, for the guard's failure message (a recompile's reason)
_DESCRIBED: weakref.WeakKeyDictionary[ShapeEnv, dict[object, str]] = weakref.WeakKeyDictionary()


def guard_description(shape_env: ShapeEnv, expr: object) -> str | None:
    """What a ShapeEnv guard added here holds, in words; None for any other guard."""
    return _DESCRIBED.get(shape_env, {}).get(expr)


@contextlib.contextmanager
def _guards_described(t: torch.Tensor, words: str) -> Iterator[None]:
    shape_env = next((v.node.shape_env for v in (*t.shape, t.storage_offset()) if isinstance(v, torch.SymInt)), None)
    before = len(shape_env.guards) if shape_env is not None else 0
    yield
    if shape_env is not None:
        described = _DESCRIBED.setdefault(shape_env, {})
        described.update({g.expr: words for g in shape_env.guards[before:]})


def _guard_decision(written: torch.Tensor, other: torch.Tensor) -> None:
    """Hold the decision made at the hints for every size the entry accepts: where the two views lie apart, guards
    that they still do (`_hold_apart`); else each symbolic size, stride and offset of the two fixed."""
    mine: _SymLayout = (list(written.shape), list(written.stride()), written.storage_offset())
    theirs: _SymLayout = (list(other.shape), list(other.stride()), other.storage_offset())
    values = [*mine[0], *mine[1], mine[2], *theirs[0], *theirs[1], theirs[2]]
    if all(type(v) is int for v in values) or _hold_apart(mine, theirs):
        return
    for v in values:
        if isinstance(v, torch.SymInt):
            guard_int(v)


def _hold_apart(mine: _SymLayout, theirs: _SymLayout) -> bool:
    """Guards that two layouts apart at their hints stay apart, where one of these sufficient conditions holds at the
    hints: their spans of storage do not meet; or along the dim of `mine`'s largest stride both step alike, each
    view's other dims reach less than that step from the lower offset, and those other dims are apart (recursively:
    then the views meet only where those do, at any size of that dim: sibling slices of inner dims). False where
    none holds (the caller fixes the sizes)."""
    (size, stride, offset), (r_size, r_stride, r_offset) = mine, theirs
    if any(hint_of(s) == 0 for s in (*size, *r_size)):
        return False
    reach = sum(((s - 1) * st for s, st in zip(size, stride, strict=True)), start=cast("Any", 0))
    r_reach = sum(((s - 1) * st for s, st in zip(r_size, r_stride, strict=True)), start=cast("Any", 0))
    for below, above in ((offset + reach, r_offset), (r_offset + r_reach, offset)):
        if hint_of(below) < hint_of(above):
            guard_bool(below < above)
            return True
    if not size or len(size) != len(r_size):
        return False
    d = max(range(len(size)), key=lambda k: hint_of(stride[k]))
    step = stride[d]
    low = offset if hint_of(offset) <= hint_of(r_offset) else r_offset
    inner = (size[:d] + size[d + 1 :], stride[:d] + stride[d + 1 :], offset - low)
    r_inner = (r_size[:d] + r_size[d + 1 :], r_stride[:d] + r_stride[d + 1 :], r_offset - low)
    # each view's other dims lie below one step from the lower offset
    fits = [(inner[2] + reach - (size[d] - 1) * step, step), (r_inner[2] + r_reach - (r_size[d] - 1) * step, step)]
    if hint_of(step) != hint_of(r_stride[d]) or any(hint_of(a) >= hint_of(b) for a, b in fits):
        return False
    if not _hold_apart(inner, r_inner):
        return False
    guard_bool(step == r_stride[d])
    for a, b in fits:
        guard_bool(a < b)
    return True


def _hinted(t: torch.Tensor) -> _Layout | None:
    """`t`'s layout, symbolic sizes read as the sizes of these inputs (no guard); None for an unbacked size."""
    try:
        values = [hint_of(v) for v in (*t.shape, *t.stride(), t.storage_offset())]
    except Exception:  # an unbacked size: no hint
        return None
    return values[: t.dim()], values[t.dim() : -1], values[-1]


def _broadcast(layout: _Layout, size: list[int]) -> _Layout | None:
    """`layout` expanded to `size` (expand()'s rule); None where it does not broadcast."""
    own, stride, offset = layout
    if len(own) > len(size):
        return None
    pad = len(size) - len(own)
    strides = [0] * pad
    for s, st, want in zip(own, stride, size[pad:], strict=True):
        if s != want and s != 1:
            return None
        strides.append(st if s == want else 0)
    return list(size), strides, offset


def _offsets(layout: _Layout) -> list[int] | None:
    """The storage offset of each element, in index order; None when too many to list."""
    size, stride, offset = layout
    numel = 1
    for s in size:
        numel *= s
    if numel > _MAX_LISTED:
        return None
    offsets = [offset]
    for s, st in zip(size, stride, strict=True):
        offsets = [a + k * st for a in offsets for k in range(s)]
    return offsets


def _reads_before_written(
    func: Any,
    written: torch.Tensor,
    args: tuple[Any, ...],
    layouts: tuple[_Layout, _Layout],
    offsets: tuple[list[int], list[int]],
) -> bool:
    """Note [In-Place Ops As Eager Runs Them]: every location the other argument reads that the op writes at
    another index is read no later than it is written."""
    (mine, theirs), (at, reads) = layouts, offsets
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    simple = (
        func is not torch.ops.aten.copy_.default
        and written.device.type == "cpu"
        and all(t.dtype == written.dtype and t.device == written.device for t in tensors)
        and sum(1 for s in mine[0] if s != 1) <= 1
        and len(at) < _EAGER_GRAIN_SIZE
        and not (dense_strides(*mine[:2]) and dense_strides(*theirs[:2]))
    )
    if not simple:
        return False
    written_at = {o: i for i, o in enumerate(at)}
    return all(written_at.get(o, i) >= i for i, o in enumerate(reads))


def _overlapping_read(func: Any) -> UnsupportedError:
    return UnsupportedError(
        f"{func}: an in-place op reads part of the memory it writes through another view of it (Note [In-Place Ops "
        "As Eager Runs Them]); eager's result depends on its loop order. Read from a clone (.clone()) instead"
    )


def _meet(a: Elements, b: Elements) -> bool:
    if a.hi < a.lo or b.hi < b.lo or a.hi < b.lo or b.hi < a.lo:
        return False
    if a.exact is not None and b.exact is not None:
        return bool(a.exact & b.exact)
    return True
