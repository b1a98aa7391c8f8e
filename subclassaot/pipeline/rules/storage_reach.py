"""What functionalization cannot take as it comes under the storage-swap mode: inputs reached beyond their own
elements, resize_() and resize_as_(), and calls the modes run specially. Each part below keeps its own contract.

Inputs whose storage the program reaches beyond their own elements, and writes functionalization cannot take as
they come: the refusals and rewrites the storage-swap mode (storage_swaps.py) applies to them.

Input: the mode's `SwapRecord` and the tensors of one op. Output: StorageReachError (the driver then traces the
input over its whole storage), a precise UnsupportedError, or the tensor to read from. Invariants: see Note
[as_strided On Inputs].

Part: resize_() and resize_as_() under the storage-swap mode: what functionalization cannot take as it comes.

Input: the mode's `SwapRecord` and the arguments of one resize_ or resize_as_ of a FunctionalTensor (or of a traceable
wrapper subclass, for resize_as_). Output: resize_as_ as the resize_ eager runs for it; the strides a resize_ gives;
StorageReachError (the driver then traces the input over its whole storage, Note [as_strided On Inputs]) or a precise
UnsupportedError where functionalization's own resize_ would lose writes. Invariants: reads the record only.

Part: Single calls of the program's run that the swap record's modes handle specially: in-place foreach ops (run
tensor by tensor) and reads of tensors that require grad (set_() of a wrapper subclass onto a plain tensor, once
refused here, is Note [Wrapper Storage]).

Input: one torch function or aten op call of the program, as the modes see it. Output: a per-tensor method or a
flag. Invariants: pure reads of the call's arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.eager.kernel_counts import custom_op_body_bumps, inference_read_counts
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.set_storage_rules import program_nbytes
from subclassaot.pipeline.rules.stale_views import input_named
from subclassaot.pipeline.rules.swap_record import elements_of
from subclassaot.schemas import DenseIndex
from subclassaot.torch_internals import (
    has_data_mutation,
    has_view_chain,
    hint_of,
    inner_storage_offset,
    memory_format_strides,
    storage_key,
    tensors_in,
)

if TYPE_CHECKING:
    from subclassaot.pipeline.rules.swap_record import SwapRecord


class StorageReachError(UnsupportedError):
    """The program reaches storage elements outside an input that is its own graph input (Note [as_strided On
    Inputs]): the driver compiles again with the input's whole storage as a synthetic base."""

    def __init__(self, message: str, *, leaf: DenseIndex) -> None:
        super().__init__(message)
        self.leaf = leaf


# Note [as_strided On Inputs]
# Eager: as_strided names absolute storage offsets, so a view of an input can reach storage elements the input does not
# cover (x = base[1:3]; x.as_strided((1,), (1,), 0)), and eager reads and writes them; so does a resize_() that makes a
# view contiguous over its storage, a write into a view with distinct elements of a tensor whose elements overlap, and
# a set_() (or `.data =`) of an input grown by resize_() to a part of its grown storage, which eager keeps whole under
# the input (leaf_mutations.py: the analysis finds it).
# An input that is its own graph input holds only its own elements: when the program reaches others, the trace raises
# StorageReachError naming the input's leaf, and the driver compiles again with that leaf as a one-member alias group:
# its whole storage becomes a synthetic base (Note [Synthetic Bases]), the leaf a view of it, and writes anywhere in the
# storage reach the real one through the base's write-back; the guards check the storage's size. The same retrace serves
# a write below an expanded input (one as_strided_scatter into the base instead of a failing view-by-view write-back),
# and writes after an as_strided that is not first in its chain (pytorch/pytorch issue 104505; after x.t_() or x.set_(y)
# an input's chain is not empty). Inside the span `v.as_strided(...)` is taken from the chain's root, and
# `v.as_strided_(...)` rebinds v to that view of the root (Note [Storage Swaps By Rebinding]). Elsewhere (an
# intermediate) reaching beyond a tensor's own elements is refused precisely.
# Offsets: functionalization regenerates a written tensor from a fresh value at offset 0, so a view op run after the
# write computes its offset from that (after `x0.mul_(2.0)` on an input at offset 12, `x0[1:]` reports 3, eager's 15),
# while tensors that had an offset before keep eager's. Every offset crosses between the two frames by one shift, the
# input's original offset less its offset behind the wrapper:
# - eager's offsets are read (`eager_offset`) as the offset behind the wrapper plus the shift, for an input's final
#   metadata and outputs that alias an input's storage (views of inputs replay their chains and never read them);
# - absolute offsets the program names on written inputs (as_strided(), set_(storage, offset, ...)) are moved into the
#   regenerated frame (minus the shift), and the wrapper keeps eager's offset;
# - an as_strided() view holds an absolute offset in the frame of its time, and a later write through the input starts a
#   new frame, so its replay would name other elements: once the shift differs the trace raises StorageReachError and
#   the input is traced over its whole storage, whose synthetic base starts at 0 in every frame.
# Gradients follow the elements a history covers: eager's AsStridedBackward sends the gradient to x's elements only,
# but a history rebuilt after a version bump is an as_strided of x's base, reaching every element of the view, where
# the compiled program sends it through the input's elements in every case. So in training these are refused: views
# reaching beyond their input used with grad after a version bump of the storage; view inputs written (or bumped by a
# no_grad write: eager rebuilds their history at the next read) whose own history loses gradient its base's as_strided
# would give (checked on the real input, backward_errors.py), where the traced graph gives the input's value from
# before the call a gradient from some output (its own, or, for a member of a synthetic base that gets one, through
# the member's node as the program got it: one read only after a write renewed that node, or never, has eager's
# rebuilt history, an as_strided of the base): where none reaches it, neither history ever carries one; and writes
# through as_strided of a synthetic base that autograd records.


@contextlib.contextmanager
def as_strided_chain_refused(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Iterator[None]:
    """Note [as_strided On Inputs]: functionalization's refusal, as a precise one of ours."""
    try:
        yield
    except RuntimeError as e:
        scatter = "as_strided_scatter is currently only supported for contiguous inputs" in str(e)
        if not scatter and "encountered a mutation on a view chain" not in str(e):
            raise
        schema = getattr(func, "_schema", None)
        written = [
            a
            for i, a_schema in enumerate(schema.arguments if schema is not None else ())
            if a_schema.is_write
            and isinstance(a := args[i] if i < len(args) else kwargs.get(a_schema.name), torch.Tensor)
        ]
        span = next((found for t in written if (found := record.input_spans.get(storage_key(t)))), None)
        if scatter:
            where = f"{span[1]}: " if span is not None else ""
            raise UnsupportedError(
                f"{where}{func}: an in-place write through a view of a tensor that requires grad and is not "
                "contiguous, where the view has eager's strides in size-1 dims only as an as_strided() view: "
                "autograd cannot write an as_strided() view of a non-contiguous tensor back (Note [as_strided On "
                "Inputs]). Write the tensor itself, or a view of a .contiguous() copy of it"
            ) from e
        message = (
            f"{func}: an in-place write through an as_strided() view that is not the first view of its chain "
            "(an as_strided() of a view, or of a tensor changed by an in-place view op like t_() or by set_()): "
            "functionalization cannot write it back (Note [as_strided On Inputs]). Take the "
            "as_strided() view of a tensor no view op made or changed (a .clone() of it)"
        )
        if span is not None:
            raise StorageReachError(f"{span[1]}: {message}", leaf=span[2]) from e
        raise UnsupportedError(message) from e


def frame_shift(record: SwapRecord, key: object) -> int | torch.SymInt:
    """Note [as_strided On Inputs]: eager's offsets on the input storage `key` minus the ones
    functionalization keeps behind the wrappers (0 until a write regenerates the input's value)."""
    original = record.input_originals.get(key)
    if original is None or not has_data_mutation(original):
        return 0
    return original.storage_offset() - inner_storage_offset(original)


def functional_frame_offset(record: SwapRecord, t: torch.Tensor, offset: int | torch.SymInt) -> int | torch.SymInt:
    """Note [as_strided On Inputs]: eager's absolute `offset` on FunctionalTensor `t`'s storage, as
    functionalization counts it behind the wrappers."""
    shift = frame_shift(record, storage_key(t))
    return offset if isinstance(shift, int) and shift == 0 else offset - shift


def note_absolute_view(record: SwapRecord, t: torch.Tensor) -> None:
    """Note [as_strided On Inputs]: the program took a view of FunctionalTensor `t`'s storage at an
    absolute offset."""
    key = storage_key(t)
    if key in record.input_originals and key not in record.alias_bases:
        record.absolute_frames.setdefault(key, []).append(frame_shift(record, key))


def strided_call_args(
    record: SwapRecord, x: torch.Tensor, source: torch.Tensor, rest: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`x.as_strided(*rest, **kwargs)` as an as_strided of `source` (x, or its view chain's root: Note [as_strided
    On Inputs]): an offset the program gave moved into functionalization's frame (Note [as_strided On Inputs]); none
    given, x's own, which eager takes (the root's would be another). Either is an absolute offset (Note [as_strided On
    Inputs])."""
    if kwargs.get("storage_offset") is not None:
        note_absolute_view(record, source)
        return rest, {**kwargs, "storage_offset": functional_frame_offset(record, source, kwargs["storage_offset"])}
    if len(rest) > 2 and rest[2] is not None:
        note_absolute_view(record, source)
        return strided_in_frame(record, source, rest), kwargs
    if source is x:
        return rest, kwargs  # (replayed at its base's offset: relative)
    note_absolute_view(record, source)
    return (*rest[:2], inner_storage_offset(x)), {k: v for k, v in kwargs.items() if k != "storage_offset"}


def check_inplace_strided_frame(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`x.as_strided_(size, stride, offset)`: Note [as_strided On Inputs] for an in-place view op,
    whose offset stays in x's wrapper; once the frame has shifted, the input is traced over its whole storage."""
    offset = args[3] if len(args) > 3 else kwargs.get("storage_offset")
    if offset is None:
        return
    key = storage_key(args[0])
    shift = frame_shift(record, key)
    if not (isinstance(shift, int) and shift == 0) and (span := record.input_spans.get(key)) is not None:
        raise StorageReachError(
            f"{span[1]}: as_strided_() at an absolute storage offset of this input, which sits at an offset of its "
            "storage, after a write to the input itself (Note [as_strided On Inputs])",
            leaf=span[2],
        )
    note_absolute_view(record, args[0])


def note_escaping_view(record: SwapRecord, source: torch.Tensor, out: torch.Tensor) -> None:
    """Note [as_strided On Inputs]: remember an as_strided view `out` of the synthetic base
    `source` that reaches elements outside its input's own, taken with grad."""
    if not torch.is_grad_enabled() or not source.requires_grad:
        return
    key = storage_key(source)
    original = record.input_originals.get(key)
    if original is None:
        return
    own = elements_of(list(original.shape), list(original.stride()), original.storage_offset())
    wanted = elements_of(list(out.shape), list(out.stride()), out.storage_offset())
    if own is not None and wanted is not None and not own.covers(wanted):
        record.escaping_strided[id(out)] = (key, record.last_bump.get(key, 0), out)


def check_escaping_reads(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """Note [as_strided On Inputs]: refuse a use with grad of such a view (or of a view of
    it) after its storage's version advanced."""
    if not torch.is_grad_enabled():
        return
    for a in args:
        for t in _view_sources(record, a):
            entry = record.escaping_strided.get(id(t))
            if entry is None or entry[2] is not t:
                continue
            if record.last_bump.get(entry[0], 0) > entry[1]:
                paths = ", ".join(record.input_paths.get(entry[0], ("an input",)))
                raise UnsupportedError(
                    f"{paths}: {func} uses, with grad, an as_strided() view of this input that reaches storage "
                    "elements outside it, taken before a write to its storage: eager's autograd then rebuilds "
                    "the view's history from the input's base, whose gradient reaches those elements, and the "
                    "compiled program's does not (Note [as_strided On Inputs]); not "
                    "supported in training. Take the as_strided() view after the write, or of the base"
                )
            break


def _view_sources(record: SwapRecord, a: object, through_inference: bool = True) -> Iterator[torch.Tensor]:
    """`a` if it is a tensor, then the tensors its recorded view chain was taken from (at most 16 steps up); not past
    a view taken inside inference_mode unless `through_inference` (eager's has no edge to its source)."""
    t = a
    for _ in range(16):
        if not isinstance(t, torch.Tensor):
            return
        yield t
        view = record.views.get(id(t))
        t = None if view is None or (view.inference_mode and not through_inference) else view.source


def check_reads_after_hidden_grow(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """`hidden_grow_use` of an op of the program, noted for its call running now, whose results carry it
    (`note_grad_through_hidden_grow`)."""
    if record.hidden_grow_use is None:
        record.hidden_grow_use = hidden_grow_use(record, func, args)


def hidden_grow_use(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> str | None:
    """Note [Storage Swaps By Rebinding]: a use with grad of a leaf or view that requires grad (or of a view of it)
    after resize_() grew it with grad off (inside inference_mode, where eager allows it): eager's autograd then checks
    gradients against the grown size (a leaf's accumulator made at its next read, a view's history rebuilt), the
    compiled backward against the size the tensor came with: the message, None where there is none. Not through a
    view taken inside inference_mode: eager's use of it reaches no node, nor a use inside it, grad mode on or off
    (autograd records nothing there)."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return None
    for t in (t for a in args for t in _view_sources(record, a, through_inference=False)):
        if record.hidden_grows.get(id(t)) is t:
            paths = record.input_paths.get(record.grown_root(storage_key(t)), ())
            return (
                f"{''.join(p + ': ' for p in paths[:1])}{func}: uses with grad a tensor that requires grad (a leaf "
                "or a view), or a view of it, after resize_() grew its storage with grad off (inside a "
                "torch.inference_mode() block, or before the program made it require grad): eager's autograd then takes its gradient in the grown size, the compiled backward in the "
                "size it had before (Note [Storage Swaps By Rebinding]); not supported in training where a result "
                "of it with grad reaches an output or an input. Resize a .detach() of it, or grow it outside the "
                "function"
            )
    return None


# dunder methods starting "__i" that only read (the others are the in-place operators)
_DUNDER_READS = frozenset({"__index__", "__int__", "__invert__", "__iter__"})


def note_grad_through_hidden_grow(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """After a call of the program: where it used with grad a tensor grown inside inference_mode (or a result
    carrying such a use), its results that require grad carry the use, and so does the storage of a tensor it wrote
    (Note [Storage Swaps By Rebinding]); `refuse_grad_through_hidden_grow` refuses them where they reach the end."""
    message, record.hidden_grow_use = record.hidden_grow_use, None
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if message is None and torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        message = next(
            (m for t in tensors if t.requires_grad and (m := _carried_use(record, t)) is not None),
            None,
        )
    if message is None:
        return
    if getattr(func, "__name__", "") in ("backward", "grad"):  # (the program's own backward through it)
        raise UnsupportedError(message)
    for o in pytree.tree_leaves(out):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            record.grad_through_hidden_grow[id(o)] = message
    name = getattr(func, "__name__", "")
    itself = name == "set_" and len(args) > 1 and args[1] is args[0]  # (changes nothing: _sets_to_itself)
    dunder = name.startswith("__")  # (of those, __setitem__, a setter and the in-place operators write)
    writes = (name.endswith("_") and not dunder) or "out" in kwargs or name in ("__setitem__", "__set__")
    if not (writes or (dunder and name.startswith("__i") and name not in _DUNDER_READS)) or itself:
        return
    written = pytree.tree_leaves(kwargs["out"]) if "out" in kwargs else args[:1]
    for w in (w for w in written if isinstance(w, torch.Tensor)):
        record.grad_through_hidden_grow[id(w)] = message
        record.storages_through_hidden_grow[storage_key(w)] = message


def _carried_use(record: SwapRecord, t: torch.Tensor) -> str | None:
    """The use `t` carries (`note_grad_through_hidden_grow`): its own, or its storage's (or, where resize_() grew
    that storage since, the one it grew from)."""
    found = record.grad_through_hidden_grow.get(id(t))
    key: object = storage_key(t)
    for _ in range(16):
        if found is not None or key is None:
            return found
        found = record.storages_through_hidden_grow.get(key)
        key = record.grown_from.get(key)
    return found


def refuse_grad_through_hidden_grow(record: SwapRecord, ends: Sequence[tuple[str, object]]) -> None:
    """Note [Storage Swaps By Rebinding]: refuse an output or input (`ends`: path, value) that requires grad and
    carries a use with grad of a tensor grown inside inference_mode (`note_grad_through_hidden_grow`): eager's
    gradient through it arrives in the grown size. A use left unnoted (no call of the program ran it) counts for all."""
    if not record.hidden_grows:
        return
    if record.hidden_grow_use is not None:
        raise UnsupportedError(record.hidden_grow_use)
    for path, value in ends:
        for t in pytree.tree_leaves(value):
            if isinstance(t, torch.Tensor) and t.requires_grad and (message := _carried_use(record, t)) is not None:
                raise UnsupportedError(f"{path} carries a gradient: {message}")


def check_absolute_frames(record: SwapRecord) -> None:
    """Note [as_strided On Inputs]: refuse (retrace) once a view at an absolute offset is stale."""
    for key, shifts in record.absolute_frames.items():
        now = frame_shift(record, key)
        if all(statically_known_true(s == now) for s in shifts):
            continue
        message = (
            "the program took an as_strided() view (or a set_(storage, offset, ...)) at an absolute storage offset "
            "of this input, which sits at an offset of its storage, and then wrote the input itself: the compiled "
            "graph regenerates the input from a value at offset 0, where that view's offset names other elements "
            "(Note [as_strided On Inputs])"
        )
        span = record.input_spans.get(key)
        if span is not None:
            raise StorageReachError(f"{span[1]}: {message}", leaf=span[2])
        paths = ", ".join(record.input_paths.get(key, ("an input",)))
        raise UnsupportedError(f"{paths}: {message}. Take the view of a .clone() of the input, or after the write")


def strided_in_frame(record: SwapRecord, t: torch.Tensor, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """as_strided's arguments after the tensor (size, stride, storage offset), the offset, where given, moved into
    functionalization's frame (Note [as_strided On Inputs])."""
    if len(args) < 3 or args[2] is None:
        return args
    return (*args[:2], functional_frame_offset(record, t, args[2]), *args[3:])


def check_strided_reach(record: SwapRecord, args: tuple[Any, ...]) -> None:
    """Note [as_strided On Inputs]: as_strided() or as_strided_() of `args[0]` within its input's elements."""
    x = args[0]
    offset = args[3] if len(args) > 3 and args[3] is not None else x.storage_offset()
    span = record.input_spans.get(storage_key(x))
    wanted = elements_of(list(args[1]), list(args[2]), offset)
    if span is not None and wanted is not None and not span[0].covers(wanted):
        raise StorageReachError(
            f"{span[1]}: as_strided() reaches storage elements that are not the input's own elements; the "
            "compiled graph holds only those. Pass the tensor that owns the storage and take the view inside "
            "the function",
            leaf=span[2],
        )


def check_overlapping_input(record: SwapRecord, written: torch.Tensor) -> None:
    """A write into the storage of an input that is its own graph input and whose elements overlap (an
    expand()): the graph holds its repeats as separate values, of which the write would reach only some. The
    driver traces the input as a view of a synthetic base over its storage instead (Note [as_strided On
    Inputs]), where every repeat is one element."""
    key = storage_key(written)
    span = record.input_spans.get(key)
    if span is not None and key in record.overlapping_inputs:
        raise StorageReachError(
            f"{span[1]}: an in-place write into an input whose elements overlap in memory (an expanded input): "
            "the compiled graph holds its repeated elements as separate values. Pass the tensor it was expanded "
            "from and expand it inside the function",
            leaf=span[2],
        )


def storage_kept(
    record: SwapRecord, x: torch.Tensor, sharers: Sequence[torch.Tensor]
) -> tuple[int | torch.SymInt, torch.Tensor]:
    """The storage elements eager's storage, grown in place by x.resize_(), keeps for the program to read: the
    offset they start at and the elements from there to the storage's end, from a tensor that holds them
    contiguously (x, its view root, a tensor over the same storage, or the synthetic base over it), else in parts from
    those that hold runs of it densely (`_pieces_kept`). They start at the lowest element the program's tensors over
    the storage (`sharers`) reach, not at x's offset: a select() or slice of an intermediate grown keeps the elements
    before it under its base."""
    offset, stored = x.storage_offset(), program_nbytes(record, x.untyped_storage()) // x.element_size()
    base = record.alias_bases.get(storage_key(x))
    if base is not None:
        return 0, base.detach()[:stored]
    holders = [x, record.view_root(x)]
    while (source := record.data_of.get(id(holders[-1]))) is not None:
        holders += [source, record.view_root(source)]  # `.data` of a view: the same storage
    lowest = min([offset, *(t.storage_offset() for t in sharers if t.numel() > 0)])
    # (a view root set_() elsewhere since holds another storage's)
    over = [h for h in (*holders, *sharers) if storage_key(h) == storage_key(x)]
    kept = [
        h
        for h in over
        if h.is_contiguous() and h.storage_offset() <= lowest and h.storage_offset() + h.numel() == stored
    ]
    if kept:
        holder = min(kept, key=lambda h: h.storage_offset())
        return holder.storage_offset(), holder.detach().reshape(-1)
    pieces = _pieces_kept(over, lowest, stored)
    if pieces is None:
        raise UnsupportedError(
            "resize_() grows a tensor whose storage holds elements that neither it, the tensor it is a view of, nor "
            "another tensor over that storage holds contiguously up to the storage's end (a transposed or strided "
            "view); the grown storage keeps those elements in eager. Resize a .clone() of it instead"
        )
    return lowest, torch.cat(pieces)


def _pieces_kept(
    over: Sequence[torch.Tensor], lowest: int | torch.SymInt, stored: int | torch.SymInt
) -> list[torch.Tensor] | None:
    """The storage elements from `lowest` to `stored`, in storage order, as consecutive parts of tensors over the
    storage that each hold a run of it densely in some dim order (a transposed intermediate; an input and a view of
    it grown past its end), or None where they leave a gap (or sizes are symbolic)."""
    runs = []
    for h in over:
        flat = _storage_order(h)
        if flat is not None:
            runs.append((h.storage_offset(), h.storage_offset() + h.numel(), flat))
    if not isinstance(lowest, int) or not isinstance(stored, int):
        return None
    pieces, at = [], lowest
    while at < stored:
        fits = [r for r in runs if isinstance(r[0], int) and isinstance(r[1], int) and r[0] <= at < r[1]]
        if not fits:
            return None
        start, end, flat = max(fits, key=lambda r: int(r[1]))
        end = min(int(end), stored)
        pieces.append(flat[at - int(start) : end - int(start)])
        at = end
    return pieces


def _storage_order(h: torch.Tensor) -> torch.Tensor | None:
    """h's elements flat in the order they lie in its storage, where they fill a run of it without gaps or repeats
    (any dim order), else None."""
    shape, strides = list(h.shape), list(h.stride())
    if not all(isinstance(d, int) for d in (*shape, *strides)) or h.numel() == 0:
        return None
    if not torch._prims_common.is_non_overlapping_and_dense_or_false(h):
        return None
    order = sorted(range(h.dim()), key=lambda d: (shape[d] == 1, -strides[d]))
    return h.detach().permute(order).reshape(-1)


def check_write_through_base_strided(func: Any, written: torch.Tensor) -> None:
    if torch.is_grad_enabled() and written.requires_grad:
        raise UnsupportedError(
            f"{func}: an in-place write with grad through an as_strided() view of an input that shares storage "
            "with another input, or whose storage outside its own elements the program reaches (Note [as_strided On "
            "Inputs]); its gradients would not be eager's. Write through the input itself or a view of it taken "
            "without as_strided, or run the write under torch.no_grad()"
        )


def refuse_write_through_untiled_unfold(func: Any) -> None:
    """torch_internals.py, Unfold as the as_strided view it is: a write functionalization cannot give eager's value."""
    raise UnsupportedError(
        f"{func}: an in-place write through an unfold() of a tensor with a negative or conjugate bit that is not dense "
        "(`c.conj().imag`), whose windows overlap or leave elements out: functionalization writes such an unfold back "
        "only where its windows hold each element once. Write through an unfold of x.resolve_neg() (or "
        "x.resolve_conj()), or through windows that tile the dim"
    )


def writes_self(func: Any) -> bool:
    schema = getattr(func, "_schema", None)
    return (
        schema is not None
        and bool(schema.arguments)
        and schema.arguments[0].is_write
        and torch.Tag.inplace_view not in func.tags
        and func.overloadpacket not in (torch.ops.aten.resize_, torch.ops.aten.resize_as_, torch.ops.aten.set_)
    )


# set_ under grad into shared storage (Note [Inputs Written In Training]): `v.set_(w)` with grad on, w requiring
# grad and v not, v (a view of) an input that shares storage with other inputs, none of which requires grad (v not a
# `.data` or detach() alias): eager's autograd records the set_ as an in-place op on a view, so it rebases the view's
# base on it (CopySlices), and every other alias of that base then requires grad with a history whose backward raises;
# an alias that is itself a view even fails its next in-place op, unless its grad_fn was read first. The trace holds the
# inputs as views of a synthetic base that stands for no real tensor, so which of them eager makes require grad, and
# how, is not something it can reproduce: a plain input ended a leaf view that autograd refused to write, and a subclass
# input's values computed after the set_ lost the gradient requirement (a wrong result). Refused, naming the inputs that
# share the storage. The other way round (a write with grad through one input first), the histories of the others are
# read after each op with grad (`refresh_shared_histories`), so that their next in-place op does not take them for
# leaves.


def refresh_shared_histories(record: SwapRecord, func: Any) -> None:
    """After an op with grad (`func`, run by the program), read the history of every plain input over
    a shared storage that now requires grad. A write with grad through one of them (`x0.copy_(x1)`, x1 requiring
    grad) rebases the synthetic base; the others, its views, only regenerate their grad_fn when it is read, and an
    in-place op before that takes such a view for a leaf that requires grad and raises, where eager's input, no
    view, is a non-leaf (a later `x2.set_(x0)` is then refused by the rule on inputs that gain grad).

    Never from inside autograd regenerating a view's grad_fn, which holds that view's lock while it runs Python: the
    view op it replays (our dispatch handling calls torch functions: `record.dispatching`) and the reset of the
    view's `_backward_hooks` (a setter); a read of that view's grad_fn there waits on the lock forever. Neither is
    an op of the program's that makes history: the program's op that enclosed them refreshes once it returns."""
    if record.dispatching or getattr(func, "__name__", None) == "__set__":
        return
    for members in record.shared_members.values():
        for t in members:
            if t.requires_grad:
                with contextlib.suppress(RuntimeError, ValueError, IndexError):  # (a history that raises: analyze)
                    t.grad_fn  # noqa: B018  # regenerates a view's history, as eager's next use of it would


def check_shared_grad_set(record: SwapRecord, args: tuple[Any, ...], leaves: Sequence[torch.Tensor]) -> None:
    """Refuse a set_() under grad into a storage inputs share (see above); `leaves`: the set_ target's dense tensors
    (itself, if plain)."""
    target, source = args[0], args[1] if len(args) > 1 else None
    if not torch.is_grad_enabled() or target.requires_grad or id(target) in record.hidden:
        return  # (`.data` and detach() aliases are no views autograd rebases)
    if not isinstance(source, torch.Tensor) or not source.requires_grad:
        return
    for leaf in leaves:
        paths = record.shared_storages.get(storage_key(leaf))
        if paths is not None:
            raise UnsupportedError(
                f"set_() with grad enabled, to a tensor that requires grad, of a tensor in the storage that inputs "
                f"{', '.join(paths)} share, none of which requires grad: eager's autograd then rebases that storage's "
                "base on the set_, and its other aliases require grad with a history the compiled program cannot "
                "reproduce (Note [Inputs Written In Training]). set_() a clone of the input, run the set_() "
                "under torch.no_grad(), or pass inputs that do not share storage"
            )


# Members of a subclass family that gained grad (Note [Inputs Written In Training]): subclass inputs that are
# views of one wrapper (x1 and x2 = x1.select(0, -1)), none requiring grad, are each their own wrapper in the trace
# (Note [Aliased Inputs In Training]). A write with grad into one (x1.copy_(x0), x0 requiring grad), or its
# requires_grad_(), makes it require grad, in eager as here; eager's other members, autograd views of it, then require
# grad too, but the trace's do not, so what the program computes from them after the write (x2 * 2) would come out
# without eager's history. Refused; a member only written or changed before the write, or returned as it is, is
# supported.


def check_gained_family_member(record: SwapRecord, args: tuple[Any, ...]) -> None:
    """Refuse an op with grad on a grad-free member of a family
    another member of which has gained grad."""
    if not record.grad_free_members or not torch.is_grad_enabled():
        return
    for a in args:
        if not isinstance(a, torch.Tensor) or id(a) not in record.grad_free_members or a.requires_grad:
            continue
        gained = [
            w
            for w in record.family_wrappers.get(record.family_of(a), ())
            if w is not a and id(w) in record.grad_free_members and w.requires_grad
        ]
        if gained:
            keys = [storage_key(leaf) for leaf in flatten_subclass(a, "")[1]]
            paths = sorted({p for k in keys for p in record.input_paths.get(k, ())})
            raise UnsupportedError(
                f"tensor subclass inputs {', '.join(paths)} share storage and do not require grad; a write with "
                "grad (or requires_grad_()) makes one of them require grad (in eager its views then do too), and the "
                "program then uses another with grad enabled; this is not supported (Note [Inputs Written In "
                "Training]). Write into a clone, detach() the value, or call requires_grad_() outside the compiled "
                "function"
            )


def check_relaid_family_member(
    record: SwapRecord, user_tensors: Sequence[torch.Tensor], paths: Sequence[str], relaid: Sequence[bool]
) -> None:
    """Refuse a grad-free member laid out anew in place (t_()) while grad-free, another member of whose family then
    gained grad: eager regenerates the member's history from its view's creation alone, without the in-place view
    op (a backward through it raises on the shape, or takes the elements untransposed), where the compiled member
    holds both. (An in-place view op after the gain is refused as a use by `check_gained_family_member`.)"""
    for i, a in enumerate(user_tensors):
        if not relaid[i] or id(a) not in record.grad_free_members or a.requires_grad:
            continue
        family = record.family_wrappers.get(record.family_of(a), ())
        if any(w is not a and id(w) in record.grad_free_members and w.requires_grad for w in family):
            raise UnsupportedError(
                f"tensor subclass input {paths[i]} shares storage with another input, neither requiring grad; the "
                "program changed its size or strides in place (t_(), unsqueeze_(), ...) and then a write with grad "
                "made the other require grad: eager rebuilds this input's history from the view it was made by, "
                "without the in-place view op, which the compiled program cannot reproduce (Note [Inputs Written In "
                "Training]). Write into a clone, or change the layout out of place"
            )


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
    return memory_format_strides(size, memory_format)


def _hint(v: Any) -> Any:
    """A symbolic size by its hint, no guard added (Note [Storage Swaps By Rebinding]: where sizes are
    symbolic, the rule is decided for the sizes of the inputs compiled for)."""
    return hint_of(v) if isinstance(v, torch.SymInt) else v


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


def per_tensor_method(func: Any) -> Any:
    name = getattr(func, "__name__", "")
    if not (name.startswith("_foreach_") and name.endswith("_")):
        return None
    return getattr(torch.Tensor, name[len("_foreach_") :], None)


def reads_grad(tree: object) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(tree))


def _end(t: torch.Tensor) -> int:
    """One past the last storage element t covers (its offset where it is empty), by the hints of symbolic sizes."""
    size, stride = [hint_of(s) for s in t.shape], [hint_of(s) for s in t.stride()]
    if any(s == 0 for s in size):
        return hint_of(t.storage_offset())
    return hint_of(t.storage_offset()) + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def check_output_past_grown_input(
    path: str, value: torch.Tensor, record: SwapRecord, finals: Sequence[torch.Tensor]
) -> None:
    """An output over an input's storage that resize_() grew (through the input or a view of it) may reach only the
    elements the inputs over that storage hold at the end (`finals`: per dense input leaf, as the program left it):
    the epilogue grows the real storage in place and writes those inputs' final values, and the output is rebuilt
    over it; the rest of the grown storage is the graph's alone (Note [Storage Swaps By Rebinding])."""
    key = storage_key(value)
    over = [t for t in finals if storage_key(t) == key]
    if not any(id(t) in record.grown_ids for t in over) or any(value is t for t in over):
        return
    held = max(_end(t) for t in over)
    if _end(value) > held:
        paths = record.input_paths.get(record.grown_root(key), ("an input",))
        message = (
            f"{path} is a view over the storage of {' and '.join(paths)}, which resize_() grew, and reaches storage "
            f"elements past the input's own (to element {_end(value)}; the input ends at {held}): the compiled call "
            "writes back only the input's elements. Return a .clone() of it"
        )
        root = record.grown_root(key)
        if root in record.alias_bases or key in record.alias_bases:
            return  # (a synthetic base's write-back spans the storage grown under it)
        own = record.own_inputs.get(root)
        if own is not None:  # traced again over its whole storage, a synthetic base
            raise StorageReachError(message, leaf=own[1])
        raise UnsupportedError(message)


def note_kernel_layout(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """A functional op's results with a dim of size 0 or 1, computed from a tensor not laid out contiguously as its
    sizes give (a transposed (2, 1) of strides (1, 2)): strides a kernel chose, where the fakes may choose others
    (Note [Strides The Kernels Choose]). From canonical contiguous tensors both lay the result out so."""
    schema = getattr(func, "_schema", None)
    if schema is None or schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
        return
    results = [r for r in tensors_in(out) if _has_unit_dim(r)]
    if results and not all(_canonical(t) for t in tensors_in((args, kwargs))):
        record.kernel_chosen.update(id(r) for r in results)


def out_argument_sizes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[torch.Tensor, Any]]:
    """The tensors an out= op is given as out arguments, each with its size before the op (check_out_resize)."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    outs = [kwargs.get(a.name, args[i] if i < len(args) else None) for i, a in enumerate(schema.arguments) if a.is_out]
    tensors = [t for t in pytree.tree_leaves(outs) if isinstance(t, torch.Tensor)]
    inner = [m for t in tensors if is_traceable_subclass(t) for m in flatten_subclass(t, "t")[1]]  # (resized below)
    return [(t, t.shape) for t in [*tensors, *inner]]


def check_out_resize(record: SwapRecord, func: Any, before: list[tuple[torch.Tensor, Any]]) -> None:
    """An out= op resizes an out argument whose size is not the result's (resize_output: `torch.sigmoid(x, out=o)`
    of an empty `o`). Of a tensor the program made that is the new layout (torch_internals: Out arguments an out=
    op resized); of an input, or a view of one, eager grows the caller's tensor inside the kernel, where no
    resize_() shows it to the record that replays a growth (Note [Storage Swaps By Rebinding]): refused by name."""
    for t, size in before:
        if t.shape != size and (named := input_named(record, t)):
            raise UnsupportedError(
                f"{named}an out= op ({func}) resizes this input (or a view of it) from {list(size)} to "
                f"{list(t.shape)}: eager grows the caller's tensor inside the kernel, which the compiled call does "
                "not replay. Pass an out tensor of the result's size, or resize_() it before the op"
            )


def _has_unit_dim(t: torch.Tensor) -> bool:
    return any(type(d) is int and d in (0, 1) for d in t.shape)  # (a symbolic size is neither)


def _canonical(t: torch.Tensor) -> bool:
    """Are t's strides those torch.empty(t.shape) has (known without a guard)?"""
    want = torch._prims_common.make_contiguous_strides_for(t.shape)
    return all(statically_known_true(a == b) for a, b in zip(t.stride(), want, strict=True))


def note_kernel_relaid(record: SwapRecord, sharers: Sequence[torch.Tensor]) -> None:
    """resize_() grows a storage, and each of `sharers` is rebuilt over the grown one with its layout in the trace.
    A tensor whose chain starts at a kernel's result with a dim of size 0 or 1 may have
    strides the kernel chose (note_kernel_layout), which the fakes may not match: noted, for outputs."""
    if not record.kernel_chosen:
        return
    for t in sharers:
        if id(record.view_root(t)) in record.kernel_chosen:
            record.kernel_relaid.add(id(t))


def check_output_relaid_by_growth(path: str, value: torch.Tensor, record: SwapRecord) -> None:
    """An output rebuilt over a storage a resize_() grew, with strides a kernel chose (note_kernel_relaid), or a view
    taken of one since: the graph lays it out with the trace's strides, eager with its kernel's."""
    t = value
    while id(t) not in record.grown_ids:  # (resize_() lays a tensor out contiguously itself: eager's strides)
        if id(t) in record.kernel_relaid:
            raise UnsupportedError(
                f"{path} is a tensor the program computed (or a view of one) with a dimension of size 0 or 1, whose "
                "storage a resize_() of another tensor over it grew: the compiled graph rebuilds it over the grown "
                "storage with the tracer's strides, which in such a dimension may not be those eager's kernel "
                "chose (Note [Strides The Kernels Choose]). Return a .clone() of it, or resize a .clone()"
            )
        view = record.views.get(id(t))
        if view is None or view.func is torch.ops.aten.detach.default:
            return
        t = view.source


def note_kernel_counts(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """The program's op advanced, in eager, counters that no run under a mode shows advancing (eager/kernel_counts.py:
    a read of an inference tensor, a custom op's body writing its argument): their families count those bumps
    (runtime/steps.py: Version Counters As Eager's)."""
    counts = inference_read_counts(func, args, kwargs, out, record.stays_inference)
    written = custom_op_body_bumps(func, args, kwargs, record.stays_inference)
    results = tensors_in(out) if counts else []
    for t, n in [*zip(results, counts, strict=True), *written]:
        for _ in range(n):
            record.note_bump(t)
