"""Storage changes autograd does not see: set_() onto a wrapper subclass's storage, storage resize_() in the program,
and in training subclass inputs whose storage or size changes under no_grad. Each part below keeps its own contract.

`set_(storage, ...)` where the storage is a tensor subclass wrapper's own (Note [Autograd Sees The Wrapper]), and
storage resize_ in the program (Note [Storage Swaps By Rebinding]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `note_wrapper_storage`, and its
dispatch mode a set_() onto a storage of no input to `check_wrapper_storage_set` and each op to
`check_unwritten_reads` and `check_grad_write_into_grown_view`; torch_internals hands each `UntypedStorage.resize_` to `note_storage_resize`. Output: the
storage resizes in the SwapRecord; an UnsupportedError for the calls out of reach. Invariants: nothing here changes
a tensor or a storage.

Part: Training rules for tensor subclass inputs that require grad and whose storage or size the program changes where
autograd does not record it (under no_grad): which of them the epilogue changes exactly as inference does
(`set_under_no_grad_inputs`), and which are refused (`refuse_leaves_resized_under_no_grad`).

Input: `FlatInputs`, `DenseLayout`, `Analysis`. Output: tensor input indexes (positions in `DenseLayout.trees`), or
UnsupportedError naming the input and the rule. Invariants: pure functions of compile-time records, as the rest of
`training_rules`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import Elements, SwapRecord, elements_of
from subclassaot.schemas import Analysis, DenseLayout, FlatInputs, LeafMutation, StorageResize
from subclassaot.torch_internals import (
    DataDependentError,
    is_functional,
    is_view_op,
    no_torch_function,
    storage_key,
    storage_nbytes,
    symint_expr,
    untyped_storage_key,
)


def note_wrapper_storage(record: SwapRecord, func: Any, args: tuple[Any, ...], out: object) -> None:
    """After a call of the program: note the storage `untyped_storage()` gave for a tensor subclass wrapper."""
    if func is torch.Tensor.untyped_storage and args and isinstance(args[0], torch.Tensor):
        if is_traceable_subclass(args[0]) and isinstance(out, torch.UntypedStorage):
            record.wrapper_storages[untyped_storage_key(out)] = type(args[0]).__name__


def check_wrapper_storage_set(record: SwapRecord, storage: object) -> None:
    """Refuse `set_(storage, ...)` whose storage is a tensor subclass wrapper's (Note [Autograd Sees The Wrapper])."""
    name = record.wrapper_storages.get(untyped_storage_key(storage))
    if name is not None:
        raise UnsupportedError(
            f"{name}.set_(storage, ...) with the storage of a {name} (its untyped_storage()): a tensor subclass "
            "wrapper's storage holds no data, and eager sets the inner tensors onto it, whose values are then "
            "unowned memory (Note [Autograd Sees The Wrapper]). Pass a tensor instead: x.set_(t), or set_() "
            "the inner tensors onto their own storages"
        )


def note_traced_storage(record: SwapRecord, func: Any, args: tuple[Any, ...], out: object) -> None:
    """After a call of the program: note the storage `untyped_storage()` gave for a traced tensor (Note [Storage Swaps
    By Rebinding])."""
    if func is torch.Tensor.untyped_storage and args and isinstance(out, torch.UntypedStorage):
        if is_functional(args[0]) or is_traceable_subclass(args[0]):
            key = untyped_storage_key(out)
            record.traced_storages[key] = record.input_paths.get(key, ())


# Storage resize_ inside the program: `t.untyped_storage().resize_(n)` (FSDP2 frees a parameter's storage with
# resize_(0) after use and re-allocates it before the next) changes the bytes of a storage, not a tensor: every tensor
# on it keeps its metadata, and reads past the new end are out of bounds until it grows back, its grown bytes undefined
# until written. The storage method dispatches nothing, so torch_internals wraps UntypedStorage.resize_ and hands the
# call to `note_storage_resize` on the thread that runs the program: the resize is a fact of the run, and the
# functional tensors' storages are left as they are (the graph computes values, not byte counts).
# - The storage of a plain input (its own graph input, not shared with another input): each byte count is kept in
#   order (SwapRecord.storage_resizes, then Analysis.storage_resizes). The runtime resizes the real storage to the
#   first count above 0 before the compiled call where it has fewer bytes (eager's re-allocation: the graph may take
#   the input before the program's fill), and to the last count after the epilogue has written every input back and
#   the outputs are built (eager's free: an output that is a view of the input shares the freed storage, as eager's).
#   A count other than 0 must hold the input's elements (a shrink that cuts them is refused).
# - The storage of an input traced over its whole storage (a synthetic base of it alone: Note [as_strided On Inputs];
#   a resize_() of the input that grows its storage makes it one): the same, for the base, which is the whole storage
#   as the call passes it, or, where it came freed, as its elements need: a count other than 0 must be the base's
#   bytes (the trace holds no others), and a fill must cover all of the base. Where the input's resize_() grows the
#   storage after the program's last storage resize, the epilogue's growth of the base is the last count.
# - The storage of a tensor made inside the program: resize_(0), and resize_ back to its byte count before, change
#   nothing the graph computes (the storage dies with the program); an output over such a storage is refused.
# A storage freed, or re-allocated (an input may come with 0 bytes, freed before the call), holds no value until a
# write covers the elements of it the input (or the intermediate) has: copy_(), fill_() or zero_() of a tensor over
# all of them. Another op that reads a tensor over it before that (eager reads out of bounds, or undefined bytes), an
# input left re-allocated and unwritten, or an output over such a storage, is refused (`check_unwritten_reads`,
# `check_unwritten_at_end`); view ops read no bytes, but while the storage has no bytes eager's view ops raise out of
# bounds, and its writes too: any op but detach() over it is refused then (not over a tensor without elements, which
# reaches no byte: an empty input whose offset lies past its storage's end needs none, and is not freed). An
# intermediate's storage counts as written once a write covers all of its bytes, counted in the writing tensor's
# elements. Refused too: the storage of a tensor subclass wrapper, of a subclass input's inner tensor, of an input
# that shares its storage with another input, or one a resize_() of a tensor grew before (the epilogue repeats that
# growth after the program's run); a storage's nbytes() read after the program resized it, or of an input
# that came freed (the graph would answer the byte count before; torch_internals wraps UntypedStorage.nbytes for
# `check_resized_nbytes`); and Dynamo's inductor::resize_storage_bytes_ where it dispatches (the torch.compile
# adapter hands the pipeline the storage's resize_ in its place). Fix for those: resize the storage outside the
# compiled function, as FSDP2's hooks do with torch.compile. The pipeline's own reads of a byte count (whether
# resize_() grows a tensor; a wrapper's metadata) are no program's: `program_nbytes`, unchecked.
# Storage byte counts are not guarded (but a whole storage's, or that it comes freed: Note [as_strided On Inputs]): a
# graph that reads an input is called on it freed as eager reads it (out of bounds).
# The ops that point their self at another storage (or a fresh empty one): the old one is left as it was.
_REBINDS = frozenset(
    {
        torch.ops.aten.set_.source_Tensor,
        torch.ops.aten.set_.source_Storage,
        torch.ops.aten.set_.source_Storage_storage_offset,
        torch.ops.aten.set_.default,
    }
)

_FILL_OPS = frozenset(
    {
        torch.ops.aten.copy_.default,
        torch.ops.aten.fill_.Scalar,
        torch.ops.aten.fill_.Tensor,
        torch.ops.aten.zero_.default,
    }
)


def note_storage_resize(record: SwapRecord, storage: torch.UntypedStorage, size: object) -> bool:
    """`storage.resize_(size)` in the program (see the comment above): True where the run takes it (a traced
    tensor's storage), False to leave it to torch."""
    key = untyped_storage_key(storage)
    paths = record.traced_storages.get(key)
    if paths is None:
        return False
    if key in record.wrapper_storages:
        name = record.wrapper_storages[key]
        _refuse_storage_resize(paths or (f"a {name}",), f"it is a {name} wrapper's own storage, which holds no data")
    root = record.grown_root(key)
    if root != key and root in record.input_paths:
        _refuse_storage_resize(
            record.input_paths[root],
            "a tensor's resize_() grew the storage before, which the compiled call repeats after the program",
        )
    if not paths:
        return _note_intermediate_resize(record, key, storage, size)
    own = record.own_inputs.get(key) or record.lone_bases.get(key)
    original = record.input_originals.get(key)
    if own is None or original is None:
        _refuse_storage_resize(
            paths,
            "it is no input's own storage: one that two inputs share (as one synthetic base: Note [Synthetic Bases])",
        )
    need, span = _held(record, key, original)
    try:
        freed = bool(size == 0)
        if key in record.lone_bases and not freed and not bool(size == need):
            _refuse_storage_resize(paths, f"{size} bytes, where the input is traced over its whole storage of {need}")
        if not freed and not bool(size >= need):  # type: ignore[operator]  # an int or a SymInt
            _refuse_storage_resize(paths, f"{size} bytes do not hold the elements of the input")
    except DataDependentError:
        _refuse_storage_resize(paths, "a byte count that depends on tensor values")
    record.storage_resizes.setdefault(key, []).append(size)
    if freed:
        record.unwritten_storages[key] = (paths, span)
        record.freed_storages.add(key)
    else:
        record.freed_storages.discard(key)
    return True


def _note_intermediate_resize(record: SwapRecord, key: object, storage: torch.UntypedStorage, size: object) -> bool:
    if isinstance(size, int) and size == 0:
        if key not in record.freed_intermediates:
            record.freed_intermediates[key] = storage_nbytes(storage)
        record.unwritten_storages[key] = ((), None)  # (all of its bytes: `_covers` counts them in elements)
        record.freed_storages.add(key)
        return True
    if key in record.freed_intermediates and isinstance(size, int) and size == record.freed_intermediates[key]:
        record.freed_storages.discard(key)
        return True  # back to its byte count: still unwritten
    _refuse_storage_resize((), "only resize_(0), and resize_ back to its byte count after, are supported")
    return False


def note_freed_inputs(record: SwapRecord, reals: Sequence[tuple[object, torch.Tensor]]) -> None:
    """Before the program: the storage (by key) of an input whose real tensor's storage came freed (fewer bytes than
    its elements need; its fake has them all) is unwritten."""
    for key, real in reals:
        need, span = _held(record, key, real)
        own = key in record.own_inputs or key in record.lone_bases
        if own and isinstance(need, int) and storage_nbytes(real.untyped_storage()) < need:
            record.unwritten_storages[key] = (record.input_paths.get(key, ()), span)
            record.freed_storages.add(key)


def _held(record: SwapRecord, key: object, t: torch.Tensor) -> tuple[int | torch.SymInt, Elements | None]:
    """What the graph holds of the storage `key` of input `t` (see the comment above): its bytes, and the storage
    elements a write must cover to fill it (None: a tensor with `t`'s layout) — `t`'s own elements, or where the
    input is traced over its whole storage (a synthetic base of it alone), all of the base's."""
    base = record.alias_bases.get(key) if key in record.lone_bases else None
    if base is None:
        span = record.input_spans.get(key)
        return _bytes_needed(t), span[0] if span is not None else None
    return base.numel() * base.element_size(), Elements(0, base.numel() - 1, None)


def check_unwritten_reads(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before an op of the program: refuse a read of a storage freed or re-allocated and not yet written; a fill of
    all of its elements makes it written (see the comment above)."""
    if not record.unwritten_storages or func is torch.ops.aten.detach.default:
        return
    if func in _REBINDS:  # set_() neither reads nor writes its self's old storage: only its sources count
        args = args[1:]
    for a in pytree.tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor) and storage_key(a) in record.freed_storages and _needs_bytes(a):
            paths = record.unwritten_storages[storage_key(a)][0]
            _refuse_unwritten(
                paths, f"{func} takes a tensor over it while it has no bytes (eager raises out of bounds)"
            )
    if is_view_op(func):
        return
    target = args[0] if args and func in _FILL_OPS and isinstance(args[0], torch.Tensor) else None
    for i, a in enumerate(pytree.tree_leaves((args, kwargs))):
        if not isinstance(a, torch.Tensor):
            continue
        entry = record.unwritten_storages.get(storage_key(a))
        if entry is None:
            continue
        paths, elements = entry
        if i == 0 and a is target and _covers(record, a, elements):
            continue
        _refuse_unwritten(paths, f"{func} reads it (or writes only part of it)")
    if target is not None and not any(
        storage_key(a) in record.unwritten_storages
        for a in pytree.tree_leaves((args[1:], kwargs))
        if isinstance(a, torch.Tensor)
    ):
        record.unwritten_storages.pop(storage_key(target), None)


# Grad writes into a grown input's views (part of Note [Storage Swaps By Rebinding]): a resize_() growing an input past its storage runs it as a view of its group's synthetic base (Note [as_strided On
# Inputs]), and rebinds it, and every tensor over it, to the grown storage (Note [Storage Swaps By Rebinding]); their
# autograd `._base` stays that base, at the size before the growth. Eager's input is no view: a write autograd records
# (grad on, a value that requires grad: `v.mul_(w)`, `v.set_(w)`) into a view v the program took of it gives the input
# a CopySlices node and regenerates v's history from the input as grown. The run's autograd replays v's view ops on
# the old base instead, which does not hold the elements v reaches: it raises where they need the grown size
# (`x.resize_(5); x.view(5, 1).mul_(w)`: "shape '[5, 1]' is invalid for input of size 4"). So such a write, into a
# view reaching past that base of an input that is no view in eager and requires no grad (eager's resize_ refuses one
# that does), is refused by name. Written without grad autograd replays nothing; a write into the input itself is
# refused after the run (check_gained_grad, Note [Inputs Written In Training]).


def check_grad_write_into_grown_view(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse the program's in-place op (its dispatch, below autograd)
    that autograd records into a tensor over an input's storage that the program grew, where the run's tensor is an
    autograd view whose base is left on the storage before the growth."""
    schema = getattr(func, "_schema", None)
    t = args[0] if args else None
    if (
        schema is None
        or not schema.arguments
        or not schema.arguments[0].is_write
        or not isinstance(t, torch.Tensor)
        or not is_functional(t)
        or not torch.is_grad_enabled()
        or torch.is_inference_mode_enabled()
    ):
        return
    key = storage_key(t)
    if key not in record.grown_from or not any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args, kwargs))
    ):
        return
    with no_torch_function():  # (the pipeline's reads, not the program's)
        base = t._base if t._is_view() else None
        paths = record.input_paths.get(record.grown_root(key))
        if base is None or not paths or not _reaches_past(t, base):
            return
        found = record.input_positions.get(id(record.view_root(t, through_swaps=True)))
        if found is None or id(t) in record.input_positions or found[1]._is_view() or found[1].requires_grad:
            return
    raise UnsupportedError(
        f"{' and '.join(paths)}: {func.overloadpacket.__name__}: the program grows this input's storage with resize_() "
        "and then, with grad enabled, writes a value that requires grad into a view of it; eager records that write "
        "on the input as grown, while the compiled run traces the grown input as a view of its storage at the old "
        "size and would replay the view there (Note [Storage Swaps By Rebinding]). Resize a clone of the "
        "input, or write under torch.no_grad() or a detach()ed value"
    )


def _reaches_past(t: torch.Tensor, base: torch.Tensor) -> bool:
    """Does `t` reach a storage element past the last that its autograd base `base` (left at its old size by the
    growth) covers? (Static sizes only: a symbolic one is left to the run.)"""
    last = t.storage_offset() + _extent(t)
    base_last = base.storage_offset() + _extent(base)
    return type(last) is int and type(base_last) is int and last > base_last


def _needs_bytes(t: torch.Tensor) -> bool:
    """Does `t` reach any byte of its storage (an op over a storage with none raises out of bounds)? Not where it has
    no elements (nor where that is symbolic: refused)."""
    n = cast("int | torch.SymInt", t.numel())  # (a SymInt where sizes are symbolic; typed int)
    return not (isinstance(n, int) and n == 0)


def _covers(record: SwapRecord, t: torch.Tensor, elements: Elements | None) -> bool:
    """Does a write of `t` cover `elements` of its storage (symbolic: does `t` have the input's own layout)? An
    intermediate's storage: all of the bytes it had, counted in `t`'s elements (its dtype may not be the first's)."""
    nbytes = record.freed_intermediates.get(storage_key(t))
    if isinstance(nbytes, int):
        elements = Elements(0, -(-nbytes // t.element_size()) - 1, None)
    covered = elements_of(list(t.shape), list(t.stride()), t.storage_offset())
    if elements is not None and covered is not None:
        return covered.covers(elements)
    original = record.input_originals.get(storage_key(t))
    if original is None or t.dim() != original.dim():
        return False
    try:
        pairs = zip(
            (*t.shape, *t.stride(), t.storage_offset()),
            (*original.shape, *original.stride(), original.storage_offset()),
            strict=True,
        )
        return all(bool(x == y) for x, y in pairs)
    except DataDependentError:
        return False


def check_unwritten_at_end(record: SwapRecord, outputs: Sequence[torch.Tensor]) -> None:
    """After the program: refuse an output over a storage it freed or left unwritten but for an input's freed storage
    (eager's output shares it, and so does the runtime's), and an input's storage re-allocated and left unwritten."""
    for key, (paths, _) in record.unwritten_storages.items():
        sizes = record.storage_resizes.get(key)
        if paths and sizes is not None and not (isinstance(sizes[-1], int) and sizes[-1] == 0):
            _refuse_unwritten(paths, "the program re-allocates it and leaves it unwritten (its bytes are undefined)")
    for o in outputs:
        entry = record.unwritten_storages.get(storage_key(o))
        if entry is not None and not entry[0]:
            raise UnsupportedError(
                "the program returns a tensor over the storage of a tensor made inside the program that it freed "
                "with untyped_storage().resize_(0) (Note [Storage Swaps By Rebinding]): eager's output holds no bytes. "
                "Free the storage outside the compiled function, or return a clone()"
            )


def storage_resize_plan(record: SwapRecord, layout: DenseLayout) -> tuple[StorageResize, ...]:
    """The runtime's storage resizes of the inputs' storages (see the comment above)."""
    owner = {j: t for t, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    plans = []
    for key, sizes in record.storage_resizes.items():
        path, leaf = record.own_inputs.get(key) or record.lone_bases[key]
        if layout.trees[owner[leaf]] is not None:
            _refuse_storage_resize((path,), "it is an inner tensor's storage of a tensor subclass input")
        grown = [n for n in sizes if not (isinstance(n, int) and n == 0)]
        grow = symint_expr(cast(int, grown[0])) if grown else None
        final = None if key in record.regrown_storages else symint_expr(cast(int, sizes[-1]))
        plans.append(StorageResize(leaf=leaf, grow=grow, final=final))
    return tuple(plans)


def check_resized_nbytes(record: SwapRecord, storage: torch.UntypedStorage) -> None:
    """Refuse `nbytes()` of a storage the program resized, or of an input's that came freed (see the comment above)."""
    key = untyped_storage_key(storage)
    if key in record.storage_resizes or key in record.unwritten_storages or key in record.freed_intermediates:
        _refuse_storage_resize(
            record.traced_storages.get(key, ()),
            "the program reads the storage's nbytes() after the resize, or of an input that came freed, which the "
            "graph would answer with the byte count before",
        )


def program_nbytes(record: SwapRecord, storage: torch.UntypedStorage) -> int | torch.SymInt:
    """The byte count eager's storage has at this point of the program: the last the program resized it to (the
    run's storage keeps its count: see the comment above), else its own; a read of the pipeline's, not checked."""
    sizes = record.storage_resizes.get(untyped_storage_key(storage))
    return cast("int | torch.SymInt", sizes[-1]) if sizes else storage_nbytes(storage)


def check_storage_bytes_resize(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """Refuse inductor::resize_storage_bytes_ (what Dynamo captures a storage resize_ as) of a traced tensor (Note
    [Storage Swaps By Rebinding])."""
    if func is torch.ops.inductor.resize_storage_bytes_.default and isinstance(args[0], torch.Tensor):
        key = storage_key(args[0])
        _refuse_storage_resize(record.input_paths.get(key, ()), "Dynamo captured it as inductor::resize_storage_bytes_")


def _extent(t: torch.Tensor) -> int | torch.SymInt:
    """How many storage elements past its offset `t` reaches (0 when it has none)."""
    if any(s == 0 for s in t.shape):
        return 0
    return cast("int | torch.SymInt", 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True)))


def _bytes_needed(t: torch.Tensor) -> int | torch.SymInt:
    """The bytes `t`'s storage must hold for it (none where it has no elements, whatever its offset; as torch's
    bounds checks count them)."""
    extent = _extent(t)
    if isinstance(extent, int) and extent == 0:
        return 0
    return (t.storage_offset() + extent) * t.element_size()


def _refuse_storage_resize(paths: tuple[str, ...], why: str) -> NoReturn:
    whose = f"the storage of {' and '.join(paths)}" if paths else "the storage of a tensor made inside the program"
    raise UnsupportedError(
        f"untyped_storage().resize_() of {whose}: {why}; the compiled program cannot replay that resize "
        "(Note [Storage Swaps By Rebinding]). Resize the storage outside the compiled function, before or "
        "after the call"
    )


def _refuse_unwritten(paths: tuple[str, ...], why: str) -> NoReturn:
    whose = f"the storage of {' and '.join(paths)}" if paths else "the storage of a tensor made inside the program"
    raise UnsupportedError(
        f"{whose} is freed (untyped_storage().resize_(0), in the program or before the call) or re-allocated and not "
        f"yet written whole, and {why}: eager reads bytes out of bounds or undefined (Note [Storage Swaps By "
        "Rebinding]). Fill it first (with torch.no_grad(): x.copy_(src)) after re-allocating it with "
        "x.untyped_storage().resize_(x.numel() * x.element_size())"
    )


def kernel_strides(m: LeafMutation) -> bool:
    """The leaf ends with no elements, or set_() to a tensor the program computed with a dim of size 1: strides the
    kernels choose (Note [Strides The Kernels Choose]), which the epilogue's fake-traced metadata may not match."""
    size = m.final_meta[0]
    computed = m.storage_changed and m.set_source is None
    return any(isinstance(d, int) and (d == 0 or (computed and d == 1)) for d in size)


def _lone_subclass_inputs(layout: DenseLayout, analysis: Analysis) -> Iterator[tuple[int, list[LeafMutation]]]:
    """Subclass inputs with dense leaves, in no alias group and with no `.data =` of the wrapper, and their leaves'
    mutations."""
    grouped = {m for g in layout.groups for m in g.members}
    for i, tree in enumerate(layout.trees):
        leaves = layout.leaves_of_input[i]
        if tree is None or not leaves or any(j in grouped for j in leaves) or analysis.wrapper_data[i] is not None:
            continue
        yield i, [analysis.mutations[j] for j in leaves]


def set_under_no_grad_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs set_() under no_grad only (Note [Inputs Written In Training])."""
    out = []
    for i, muts in _lone_subclass_inputs(layout, analysis):
        if analysis.inplace_replay[i] or (analysis.read_after_set and analysis.read_after_set[i]):
            continue
        if all(_hidden_swap(m) for m in muts):
            out.append(i)
    return tuple(out)


def _hidden_swap(m: LeafMutation) -> bool:
    return (
        m.swapped
        and not (m.swapped_by_data or m.set_under_grad or m.resized or m.autograd_visible)
        and not kernel_strides(m)
    )


def inner_written_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs whose inner tensors the program wrote directly, and nothing else (Note [Inputs Written In
    Training])."""
    out = []
    for i, muts in _lone_subclass_inputs(layout, analysis):
        if analysis.wrapper_version_bumps[i] or analysis.inplace_replay[i]:
            continue
        if any(m.storage_changed or m.swapped or m.resized or m.metadata or m.final_data for m in muts):
            continue
        if any(m.data for m in muts):
            out.append(i)
    return tuple(out)


def refuse_leaves_resized_under_no_grad(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """Note [Leaves Laid Out Anew Under no_grad];
    for `.data =`, Note [Gradient Accumulators Of Leaves]. A leaf the program makes require grad counts as one that
    requires it (its fake does: Note [Inputs Written In Training])."""
    if not analysis.grad_outputs and not any(m.autograd_visible for m in analysis.mutations):
        return  # (no tensor returned or written with history: no gradient ever reaches a leaf's accumulator)
    for i, (tree, index) in enumerate(zip(layout.trees, flat.tensor_indices, strict=True)):
        real = flat.values[index]
        if not isinstance(real, torch.Tensor) or not (real.is_leaf and user_fakes[i].requires_grad):
            continue
        read = bool(analysis.read_after_hidden_resize and analysis.read_after_hidden_resize[i])
        if tree is not None and analysis.releaf_sizes and analysis.releaf_sizes[i] is not None:
            continue  # made a leaf again in the trace: Note [Leaves Laid Out Anew Under no_grad]
        if tree is None and read:
            raise UnsupportedError(
                f"{flat.leaves[index].path}: an input that is an autograd leaf and requires grad is set_() under "
                "torch.no_grad() to a tensor of another size (or assigned one by `.data =` before any use with "
                "grad, or after uses whose results all died, or laid out anew so by an in-place view op under "
                "no_grad), and the program then uses it with grad: eager's gradient reaches it in the new size, where "
                "the compiled one is checked against the old (Note [Leaves Laid Out Anew Under no_grad], Note "
                "[Gradient Accumulators Of Leaves]); not supported in training. Call set_() on a clone, or use the "
                "other tensor itself"
            )
        if tree is not None and read:
            raise UnsupportedError(
                f"{tree.path}: a tensor subclass input that is an autograd leaf and requires grad gets another size "
                "from an in-place view op under torch.no_grad() (t_, transpose_, ...) or from a `.data =` before any "
                "use with grad, and the program then uses it with grad: eager's gradient reaches it in the new size, "
                "where the compiled one is checked against the old (Note [Leaves Laid Out Anew Under no_grad], "
                "Note [Gradient Accumulators Of Leaves]); not supported in training. Use the out-of-place view op "
                "(x = x.t()) or the assigned tensor itself, or change its size with grad enabled"
            )
