"""Which in-place writes meet memory they also read or write twice: the overlap checks of the storage-swap modes.

Input: the tensors of an in-place op under functionalization (their sizes, strides and offsets). Output: refusals
(UnsupportedError) for reads of memory the op writes (Note [In-Place Ops As Eager Runs Them]), and `overlaps` /
`meta_overlaps` for writes through memory that several elements share; the checks the swap mode makes before a
write (Note [Stale View Functions], copies onto the same data, Note [In-Place Ops As Eager Runs Them]).
Invariants: reads metadata only; symbolic sizes that cannot be decided count as disjoint for reads and as not
overlapping for writes.
"""

from __future__ import annotations

from typing import Any

import torch

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import (
    Elements,
    SwapRecord,
    dense_strides,
    element_offsets,
    elements_of,
    reads_elsewhere_written,
)
from subclassaot.torch_internals import is_functional, storage_key

_EAGER_GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE: TensorIterator runs serially below it


def _dense(t: torch.Tensor) -> bool:
    return dense_strides(list(t.shape), list(t.stride()))


def _reads_before_written(func: Any, written: torch.Tensor, other: torch.Tensor, args: tuple[Any, ...]) -> bool:
    """Note [In-Place Ops As Eager Runs Them]: every location `other` reads that the op writes at
    another index is read no later than it is written."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    simple = (
        func is not torch.ops.aten.copy_.default
        and written.device.type == "cpu"
        and all(t.dtype == written.dtype and t.device == written.device for t in tensors)
        and sum(1 for s in written.shape if s != 1) <= 1
        and written.numel() < _EAGER_GRAIN_SIZE
        and not (_dense(written) and _dense(other))
    )
    if not simple:
        return False
    try:
        mine, theirs = element_offsets(written), element_offsets(other.expand_as(written))
    except RuntimeError:
        return False
    if mine is None or theirs is None:
        return False
    written_at = {o: i for i, o in enumerate(mine)}
    return all(written_at.get(o, i) >= i for i, o in enumerate(theirs))


def check_no_overlapping_read(func: Any, written: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    key = storage_key(written)
    mine = elements_of(list(written.shape), list(written.stride()), written.storage_offset())
    for other in [*args, *kwargs.values()]:
        if not isinstance(other, torch.Tensor) or other is written or is_traceable_subclass(other):
            continue
        if storage_key(other) != key or meta_triple(other) == meta_triple(written):
            continue
        if func is torch.ops.aten.copy_.default or torch.Tag.pointwise in func.tags:
            elsewhere = reads_elsewhere_written(written, other)
            if elsewhere is not None:
                if elsewhere and not _reads_before_written(func, written, other, args):
                    raise _overlapping_read(func)
                continue  # every index reads what it writes there, or memory the op does not write
        theirs = elements_of(list(other.shape), list(other.stride()), other.storage_offset())
        if mine is None or theirs is None or not _meet(mine, theirs):
            continue  # disjoint, or not decidable here (symbolic sizes)
        raise _overlapping_read(func)


def _overlapping_read(func: Any) -> UnsupportedError:
    return UnsupportedError(
        f"{func}: an in-place op reads part of the memory it writes through another view of it (Note [In-Place Ops "
        "As Eager Runs Them]); eager's result depends on its loop order. Read from a clone (.clone()) instead"
    )


def meta_triple(t: torch.Tensor) -> tuple[object, ...]:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset())


def _meet(a: Elements, b: Elements) -> bool:
    if a.hi < a.lo or b.hi < b.lo or a.hi < b.lo or b.hi < a.lo:
        return False
    if a.exact is not None and b.exact is not None:
        return bool(a.exact & b.exact)
    return True


def overlaps(t: torch.Tensor, uniform: bool = False) -> bool:
    """Do several elements share one memory location (a zero stride, or strides that meet, as_strided((3, 2),
    (2, 2)))? Eager writes such elements once per index, in an order it does not promise. `uniform`: the write
    stores one value everywhere, so zero-stride dims are harmless (Note [In-Place Ops As Eager Runs Them])."""
    return meta_overlaps(tuple(t.shape), tuple(t.stride()), t.storage_offset(), uniform)


def meta_overlaps(size: tuple[Any, ...], stride: tuple[Any, ...], offset: Any, uniform: bool = False) -> bool:
    """`overlaps` of a tensor of this size, stride and offset."""
    pairs = list(zip(size, stride, strict=True))
    if _numel(pairs) == 0:
        return False  # writes nothing
    pairs = [(sz, st) for sz, st in pairs if not (uniform and st == 0)]
    if any(st == 0 and sz > 1 for sz, st in pairs):
        return True
    found = elements_of([sz for sz, _ in pairs], [st for _, st in pairs], offset)
    return found is not None and found.exact is not None and len(found.exact) < _numel(pairs)


def _numel(pairs: list[tuple[int, int]]) -> int:
    n = 1
    for sz, _ in pairs:
        n *= sz
    return n


def check_empty_write_through_overlap(
    func: Any, written: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any], record: SwapRecord
) -> None:
    """Note [In-Place Ops As Eager Runs Them]."""
    if written.numel() != 0 or not torch.is_grad_enabled():
        return
    recorded = any(isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *kwargs.values()))
    chain = [view.source for view in record.chain(written)]
    if recorded and any(overlaps(c) for c in chain):
        raise UnsupportedError(
            f"{func}: an in-place write with grad into a view with no elements of a tensor whose elements overlap in "
            "memory (an expand()): autograd records it, and the compiled backward would scatter its gradient "
            "through the overlapping layout, which raises where eager's does not (Note [In-Place Ops As "
            "Eager Runs Them]). Drop the empty write, or run it under torch.no_grad()"
        )


_UNIFORM_WRITES = frozenset({torch.ops.aten.fill_, torch.ops.aten.zero_})


def check_write_after_set(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    values = [*args, *kwargs.values()]
    if torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values):
        raise UnsupportedError(
            f"{func}: an in-place write with grad into a tensor that was a view and then set_() to another tensor "
            "(or a view of such a tensor): autograd's gradient of the write would follow the view's old region "
            "(Note [Stale View Functions]). Write into the tensor it was set_() to, or set_() a tensor "
            "that is not a view"
        )


def copy_to_same_data(func: Any, args: tuple[Any, ...], hidden: bool) -> bool:
    """`dst.copy_(src)` where src views exactly dst's data: eager's copy_ returns at once (even through an expand,
    where a real copy would be refused) and only the version counter moves. Not where autograd records it (eager's
    backward of a copy into overlapping memory raises)."""
    if func is not torch.ops.aten.copy_.default or len(args) < 2:
        return False
    dst, src = args[0], args[1]
    # autograd records it where dst requires grad, or where src does and dst is no `.data`/detach() alias (which
    # eager then makes require grad)
    recorded = torch.is_grad_enabled() and (dst.requires_grad or (src.requires_grad and not hidden))
    if not isinstance(src, torch.Tensor) or recorded:
        return False
    if src is dst:
        return True
    wrappers = is_traceable_subclass(dst) and is_traceable_subclass(src)  # (a bool: no narrowing off Tensor)
    if wrappers and not is_functional(dst):
        # A wrapper's data are its inner tensors (a `.data =` can give two wrappers one wrapper storage and metadata
        # over different inner tensors): the same data only where every inner pair is.
        inner_dst, inner_src = flatten_subclass(dst, "dst")[1], flatten_subclass(src, "src")[1]
        return (
            meta_triple(src) == meta_triple(dst)
            and len(inner_dst) == len(inner_src)
            and all(_same_functional_data(d, s) for d, s in zip(inner_dst, inner_src, strict=True))
        )
    return _same_functional_data(dst, src)


def _same_functional_data(dst: torch.Tensor, src: torch.Tensor) -> bool:
    return src is dst or (
        is_functional(src)
        and is_functional(dst)
        and storage_key(src) == storage_key(dst)
        and src.dtype == dst.dtype
        and meta_triple(src) == meta_triple(dst)
    )


def uniform_write(func: Any, t: torch.Tensor) -> bool:
    """A uniform write; on a tensor subclass, one autograd does not record (the wrapper's repeats would be written
    back element by element)."""
    recorded = torch.is_grad_enabled() and t.requires_grad and is_traceable_subclass(t)
    return func.overloadpacket in _UNIFORM_WRITES and not recorded


# Functionalization writes a view's update back to its base through the view ops' inverses, and the inverse of
# expand computes (`base + sum_to(view - base)`): a write through an expanded view of a float8 tensor (the data of a
# Float8Tensor) becomes arithmetic that float8 has no kernels for, where eager's write stores the value directly.
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "sum"})
_FLOAT8 = frozenset(
    dtype for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if (dtype := getattr(torch, name, None)) is not None
)  # fmt: skip


def refuse_float8_arithmetic(gm: torch.fx.GraphModule) -> None:
    """Refuse a functional graph that computes arithmetic on float8 values (see the comment above)."""
    for node in gm.graph.nodes:
        name = getattr(getattr(node.target, "overloadpacket", None), "__name__", "")
        if node.op != "call_function" or name not in _ARITHMETIC:
            continue
        vals = [a.meta.get("val") for a in node.args if isinstance(a, torch.fx.Node)]
        if any(isinstance(v, torch.Tensor) and v.dtype in _FLOAT8 for v in vals):
            raise UnsupportedError(
                f"the functional graph computes {name}() on float8 values ({node}): a write through an expanded "
                "view of a float8 tensor (the data of a Float8Tensor) is written back to its base by "
                "functionalization as base + sum_to(view - base), and float8 has no arithmetic kernels. Write "
                "through a view that is not expanded, or into a clone"
            )
