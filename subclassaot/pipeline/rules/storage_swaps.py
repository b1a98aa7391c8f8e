"""Storage swaps (`set_`, `.data =`) and `.data` aliases, given eager semantics under functionalization.

Input: the FunctionalTensors of one functional run. Output: `SwapModes`, two modes entered around the user's program,
and what they saw (`SwapRecord`). Invariants: see Note [Storage Swaps By Rebinding].
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.eager.record import is_query
from subclassaot.errors import TRAINING_STEP_HINT, UnsupportedError
from subclassaot.pipeline.grad_scope import (
    bumped_input_reads,
    check_flagless_view_reads,
    check_gained_base_view_applies,
    check_raising_view_input_applies,
    check_raising_view_input_reads,
    check_regenerated_history_applies,
    check_regenerated_view_input_reads,
    check_regenerated_view_reads,
    check_unseen_histories,
    check_views_of_gained_bases,
    flagged_before_eager,
    flagless_view_history_raises,
    flagless_views_detached,
    function_outputs_as_eager,
    function_returns_as_analyzed,
    gained_base_views_as_leaves,
    note_flag_on_a_base,
    note_gain_on_a_base,
    note_grad_reenabled,
    regenerated_history_reads,
    resize_as_eager,
)
from subclassaot.pipeline.opaque_ops import check_higher_order, traced_in_place_of
from subclassaot.pipeline.rules.autograd_state import (
    RaisingHistory,
    base_read,
    flagged_base_view_read,
    is_autograd_read,
    is_base_read,
    is_program_function,
    is_read_with_grad,
    note_assignment_reads,
    note_data_assignment,
    note_detach,
    note_function_grad_reads,
    note_grad_fn_reads,
    note_grad_reads,
    note_retain_grad,
    note_self_set,
    note_set_source_read,
    raising_history,
    read,
    refuse_flag_off_after_rebuild,
)
from subclassaot.pipeline.rules.hidden_layouts import (
    check_nograd_set_write,
    check_relaid_view_applies,
    is_layout_op,
    note_first_read,
    note_layout_op,
    note_nograd_set,
    note_reads_after_layout,
    note_relaid_late_grad,
    note_view_layout_op,
    note_view_reads,
    original_of,
    view_layout,
    with_eager_view_histories,
)
from subclassaot.pipeline.rules.new_leaves import (
    NewLeafKind,
    makes_leaf_itself,
    note_no_history_results,
    note_parameter_detach,
    subclass_new_leaf_refusal,
    turns_flag_on,
)
from subclassaot.pipeline.rules.overlapping_reads import check_no_overlapping_read
from subclassaot.pipeline.rules.relaid_views import Layout, note_view_set
from subclassaot.pipeline.rules.retyped_data import (
    check_data_dtype,
    check_retyped_grad_write,
    check_retyped_resize,
    refuse_retyped_gain,
)
from subclassaot.pipeline.rules.set_storage_rules import (
    check_grad_write_into_grown_view,
    check_resized_nbytes,
    check_storage_bytes_resize,
    check_unwritten_reads,
    check_wrapper_storage_set,
    note_storage_resize,
    note_traced_storage,
    note_wrapper_storage,
    program_nbytes,
)
from subclassaot.pipeline.rules.set_under_grad import (
    note_grad_set_place,
    note_hidden_write,
    note_reads_after_grad_set,
    note_write_after_grad_set,
)
from subclassaot.pipeline.rules.stale_views import (
    check_assigned_view_inputs,
    check_stale_set,
    check_stale_views,
    check_views_of_assigned_bases,
    input_named,
    layout_of,
    note_assigned,
    note_assigned_view_input,
    note_before,
    note_layout,
    note_reads,
    stale_history_failures_refused,
)
from subclassaot.pipeline.rules.storage_reach import (
    StorageReachError,
    as_resize,
    as_strided_chain_refused,
    check_absolute_frames,
    check_escaping_reads,
    check_gained_family_member,
    check_inplace_strided_frame,
    check_out_resize,
    check_overlapping_input,
    check_reads_after_hidden_grow,
    check_resize_within_storage,
    check_shared_grad_set,
    check_strided_reach,
    check_write_through_base_strided,
    functional_frame_offset,
    hidden_grow_use,
    note_absolute_view,
    note_escaping_view,
    note_grad_through_hidden_grow,
    note_kernel_counts,
    note_kernel_layout,
    note_kernel_relaid,
    out_argument_sizes,
    per_tensor_method,
    reads_grad,
    refresh_shared_histories,
    refuse_write_through_untiled_unfold,
    resize_strides,
    storage_kept,
    strided_call_args,
    writes_self,
)
from subclassaot.pipeline.rules.strides_and_offsets import (
    apply_keeping_strides,
    call_with_eager_layouts,
    check_empty_write_through_overlap,
    check_write_after_set,
    copy_to_same_data,
    fill_in_memory_order,
    meta_overlaps,
    overlaps,
    uniform_write,
    view_with_eager_strides,
)
from subclassaot.pipeline.rules.swap_record import (
    SET_OPS,
    DataAssignment,
    InplaceViewRecord,
    RawMeta,
    SwapRecord,
    ViewRecord,
    bump_family_wrappers,
    elements_of,
    source_leaf_metas,
    tensor_meta,
)
from subclassaot.schemas import GradSetNode
from subclassaot.torch_internals import (
    FunctionApplyNoted,
    autograd_sequence_nr,
    bumps_written_args,
    chain_root,
    differentiates_inside_transform,
    dispatches_in_cpp,
    function_applies_noted,
    get_version,
    history_less_view,
    is_functional,
    is_functorch_wrapped,
    is_nested_int,
    is_no_grad_view,
    is_view_op,
    keep_bits_of_written,
    mark_inference_mode_view,
    marks_dirty_noted,
    module_with_backward_hooks_applying,
    no_torch_function,
    non_full_backward_hooks_noted,
    rebind_functional,
    rebuild_view_history_outside_inference_mode,
    requires_grad_through_base,
    resolved_in_another_layout,
    saved_tensors_hooks_noted,
    set_version,
    storage_key,
    storage_resizes_handled,
    tensor_sets_noted,
    trace_new_leaf,
    unfold_layout,
    unfold_tiles,
    untyped_storage_key,
    with_bits_of,
    wrapper_on_scratch,
)

# Note [Storage Swaps By Rebinding]
# Eager: `x.set_(src)` gives x src's storage, offset, size and stride, and keeps x's autograd identity (a view stays a
# view of its base). Views taken of x before keep the old storage, and share the version counter set_() advances: the
# bump belongs to the storage x leaves (for a wrapper, the wrapper and dense storages it left), not to src's, so a view
# of src taken before is not stale by it. `x.set_(x.untyped_storage())` makes x the whole storage, 1-D at offset 0.
# `x.data = y` is the same swap hidden from autograd and from the version counter; it never dispatches. A `.data` (or
# detach()) alias has a version counter of its own, and writes through it, or through views of it, are hidden from
# autograd. `x.resize_(size)` gives x `size` with contiguous strides (or the memory format asked for) at its offset,
# growing its storage where the new size needs more, and bumps x's version only where the size changes; resize_as_(x, y)
# is x.resize_(y.shape) followed by a restride to the memory format asked (preserve_format: the one y suggests), and
# runs as that resize_.
# Functionalization implements `x.set_(src)` by replacing x's value and then freezing x's old storage: any later write
# through a view taken before the set_ raises "cannot mutate tensors with frozen storage" (and torch.compile gets such
# programs wrong). So a dispatch mode above functionalization handles set_ by *rebinding* the FunctionalTensor x to a
# functional alias of src (its inner wrapper replaced, its own storage and metadata pointed at src's): later writes
# through x reach src, and writes through old views reach the old storage, which stays live. `.data = y` is the same
# rebinding, seen through a torch-function mode, and so is a resize_ that grows the storage: eager grows it in place,
# under every tensor over it, so the program's other tensors there (views, tensors set_() onto it) are rebound to the
# grown one too, each at its own layout, and it keeps every old element, those before x's offset too (its base reads
# them); an input grown is traced as a view of a synthetic base (over its whole storage: Note [as_strided On
# Inputs]), whose write-back grows the real storage and writes all of it first in the epilogue, before any set_():
# so an input set_() to a part of its grown storage, or another input set_() onto it (before or after the growth),
# ends on it as eager's; and an input grown, then set_() off its storage, leaves it grown and holding the program's
# writes, as eager's, where those carry no history (else refused: leaf_mutations.py, LeafMutation.left_grown);
# `.data` reads are tracked so
# that writes through them count as hidden from autograd, which functionalization does not record for us. Where the
# storage is an input's (grown through the input or through a view of it), the epilogue grows the real input's storage
# in place (`untyped_storage().resize_()`) and then writes the input's final values, so the caller's views of it see
# the grown storage as in eager; an output reaching its elements past the inputs' own is refused (they are the graph's
# alone). A write with grad into a view of an input grown so is refused (set_storage_rules.py: grad writes into a
# grown input's views).
# Inside inference_mode eager lets a leaf or a view that requires grad grow: taken as any growth, but a use with grad
# of it (or of a view of it, not through one taken inside inference_mode, whose uses reach no node) after is refused
# where a result of it that requires grad, or of a later read with grad of such a result or of a storage such a call
# wrote, reaches an output or an input (or the program's own backward), as eager's autograd then expects the grown
# size and the compiled backward the old one; results that reach neither carry no gradient anywhere.
# Eager's `.data = y` also gives x y's dtype; a rebound functional tensor keeps the dtype it was made with, so a `.data
# =` of another dtype onto an input, a view, or a tensor on an input's storage is refused (the input or the replayed
# view would come back in the old dtype); onto a fresh intermediate the graph returns the assigned value itself. That
# intermediate shares y's storage, counted in y's elements: where its own are larger, its layout reaches past the
# storage's bytes, and its wrapper's metadata set there would grow the storage in place, which the run would then read
# as larger than eager's (a later resize_() that grows y taken as none, the graph reading y past its end). So its
# metadata are set on a scratch storage and the wrapper then takes y's storage as it is (rebind_functional), and so
# are those its in-place view ops set (wrapper_on_scratch); its resize_() counts the storage in y's dtype, and one that
# grows it there is refused.
# A resize_ that does not grow the storage is recorded by functionalization as a view of the tensor as it is: an
# as_strided() of its current value, written back by an as_strided_scatter() into that value. Where the tensor had been
# made smaller before (x.resize_(0) ... x.resize_(n), FSDP's pattern), or is a view of a larger tensor
# (x[:2].resize_(4)), the new size covers storage elements its current value does not hold, and a write back is lost;
# functionalization also ignores resize_'s memory format. Both take a tensor on an input's storage to the synthetic-base
# trace (Note [as_strided On Inputs]), where the mode rebinds it to an as_strided() view of the base over the whole
# storage; elsewhere they are refused precisely. Symbolic sizes are decided by their hints, without a guard. A resize_
# of a storage itself (`t.untyped_storage().resize_(n)`) is refused (set_storage_rules.py).
# The swap record names tensors by id(). A freed object's address goes to the next object of its size, so a key that
# outlived its tensor would hand its facts to a later output or view, a wrong result that depends on the allocator: the
# record keeps alive every tensor the modes see (`pin`), so while it lives an id() names one object. Its other keys are
# storage keys (StorageWeakRef).


# In-place ops whose version bump is decided elsewhere (resize_ bumps only when the size changes).
_NO_VERSION_BUMP = frozenset({"aten::resize_", "aten::resize_as_"})

# Writes that store one value everywhere (Note [In-Place Ops As Eager Runs Them]).
_RESIZE_OPS = frozenset({torch.ops.aten.resize_.default, torch.ops.aten.resize_as_.default})
_UNFOLD = torch.ops.aten.unfold.default
_STRIDED_VIEWS = frozenset({torch.ops.aten.as_strided.default, _UNFOLD})  # (an unfold as its as_strided view)


# eager's error, raised where an op bumps the (absent) version counter of an inference tensor
_INFERENCE_WRITE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
    "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
)


@functools.cache
def _counted_writes(func: Any) -> tuple[tuple[int, str], ...]:
    """The (position, name) of each argument aten op `func` writes whose write advances eager's version counter (an
    in-place op's written arguments, an out= op's outputs; not detach_()'s), from its schema (a fact of the op)."""
    schema = getattr(func, "_schema", None)
    if schema is None or func is torch.ops.aten.detach_.default:
        return ()
    return tuple(
        (i, a.name) for i, a in enumerate(schema.arguments) if a.is_write and (schema.name.endswith("_") or a.is_out)
    )


def check_inference_write(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """An op of the program that writes (data, layout or storage), outside inference_mode, a plain tensor whose eager
    version counter is absent (SwapRecord.counter_absent) raises in eager. The run's view of an inference tensor taken
    after the block is none and has a counter, so its write would pass: raise eager's error (detach_() bumps no
    counter and passes in eager too; so does a kernel's write of an argument of an op neither in-place nor out=, which
    has no ADInplaceOrView kernel to advance it: batch norm's running stats)."""
    written = _counted_writes(func)
    if not written or torch.is_inference_mode_enabled():
        return
    for i, name in written:
        arg = args[i] if i < len(args) else kwargs.get(name)
        if not isinstance(arg, torch.Tensor) or is_traceable_subclass(arg):
            continue
        if not arg.is_inference() and record.counter_absent(arg):  # (the run's inference tensor raises itself)
            record.inference_write_raised = True
            raise RuntimeError(_INFERENCE_WRITE)


def _sets_to_itself(args: tuple[Any, ...], depth: int) -> bool:
    """`args[0].set_(args[1])` changes nothing but the version counter and, under no_grad, the gradient accumulator
    (Note [Gradient Accumulators Of Leaves]): the source is the tensor itself, or (under no_grad, where autograd
    records nothing of the source; the program's own set_, `depth` 0) a plain tensor over its storage in its very
    layout (`x.set_(x.expand(-1))`)."""
    x, source = args[0], args[1]
    if source is x:
        return True
    if torch.is_grad_enabled() or depth != 0 or not isinstance(source, torch.Tensor) or type(source) is not type(x):
        return False
    return is_functional(x) and _same_layout(x, source)


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether `a` and `b` are over one storage with the same size, strides and offset."""
    same = (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset())
    return same and storage_key(a) == storage_key(b)


def _ordered_change(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """An op whose change of its tensors' storages a requires_grad_() turned on after it must follow
    (SwapRecord.gained_before_changes): one that relays a tensor (an in-place view op, set_()), resizes one, or
    writes one where autograd may record the write (grad mode on, a tensor among its arguments requiring grad); an op
    of unknown schema counts as one. A write autograd records none of is not: it leaves the same values whether the
    flag comes before it or after (Note [Inputs Written In Training])."""
    schema = getattr(func, "_schema", None)
    if schema is None or getattr(func, "overloadpacket", None) is None:
        return True
    if not schema.is_mutable:
        return False
    if func in SET_OPS or torch.Tag.inplace_view in func.tags:
        return True
    if func.overloadpacket in (torch.ops.aten.resize_, torch.ops.aten.resize_as_):
        return True
    tensors = (t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


class _SwapDispatchMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    supports_higher_order_operators = True

    def __init__(self, record: SwapRecord, known: list[torch.Tensor]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        self.record = record
        self.known = known  # tensors whose storage a set_(storage, ...) may name
        self.native_pending: object = None  # the op a C++-dispatched subclass is about to run (dispatches_in_cpp)
        # id() of a wrapper a set_() is moving -> the storages (its own, then its leaves') it had before: the set_'s
        # version bump is theirs (Note [Storage Swaps By Rebinding])
        self.left_storages: dict[int, tuple[object, list[object]]] = {}
        # the first tensor argument of the program's op running now and its version counter before it (a write
        # through a subclass may move it inside the op: Note [set_ Under Grad])
        self.entry_version: tuple[torch.Tensor, int] | None = None
        # the program's write running now is one eager's autograd does not record (`unrecorded_before_grad`): a
        # subclass's inner writes below it are not either
        self.unrecorded_write = False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):  # (torch_internals.base_mode_rule)
            check_higher_order(func)
            return func(*args, **kwargs)  # one op to the record: its branches may neither write nor alias an operand
        func = traced_in_place_of(func, args)  # Note [What A Backend Receives And Returns], "Ordered effects"
        if self.native_pending is not None and func is self.native_pending:
            self.native_pending = None
            return NotImplemented  # the dispatcher runs the subclass's C++ dispatch, this mode still on the stack
        self.record.pin((args, kwargs))  # Note [Storage Swaps By Rebinding]
        if _ordered_change(func, args, kwargs):
            self.record.note_ordered_change(pytree.tree_leaves((args, kwargs)))  # SwapRecord.gained_before_changes
        counted = dict(self.record.written_families) if self.record.dispatching == 0 else None
        outs_before = out_argument_sizes(func, args, kwargs) if counted is not None else []
        self.record.dispatching += 1  # its autograd reads are no program's (Note [Grad Mode And Autograd Reads])
        try:
            out = self._dispatch(func, types, args, kwargs)
            keep_bits_of_written((args, kwargs))
        finally:
            self.record.dispatching -= 1
        check_out_resize(self.record, func, outs_before)
        if counted is not None and counted != self.record.written_families:
            # one op advances a counter once, however its handling here rewrote it (runtime/steps.py: Version Counters As Eager's)
            for family, bumps in self.record.written_families.items():
                self.record.written_families[family] = min(bumps, counted.get(family, 0) + 1)
        if counted is not None:
            note_kernel_counts(self.record, func, args, kwargs, out)  # runtime/steps.py: Version Counters As Eager's
        self.record.pin(out)
        note_kernel_layout(self.record, func, args, kwargs, out)  # Note [Strides The Kernels Choose]
        return out

    @property
    def depth(self) -> int:
        """How many subclass `__torch_dispatch__` calls the op handled now runs inside (0: the program's own op).
        The mode is popped while it handles an op, so it sees ops again only where `_dispatch_subclass` pushes it
        around a subclass's dispatch: one op handled per level, `record.dispatching` counts them."""
        return self.record.dispatching - 1

    def _dispatch(self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        check_storage_bytes_resize(self.record, func, args)  # Note [Storage Swaps By Rebinding]
        if self.depth == 0 and self.record.unwritten_storages:
            check_unwritten_reads(self.record, func, args, kwargs)  # Note [Storage Swaps By Rebinding]
        if func is torch.ops.aten.resize_as_.default:  # Note [Storage Swaps By Rebinding]
            func, (args, kwargs) = torch.ops.aten.resize_.default, as_resize(args, kwargs)
        if self.depth == 0:
            if getattr(func, "overloadpacket", None) is torch.ops.aten.set_:
                self.record.note_set()  # (its place, where the eager record logs it)
            first = args[0] if args and isinstance(args[0], torch.Tensor) else None
            with no_torch_function():  # (the pipeline's read: `x.real = 10` lifts a real scalar made below Python)
                self.entry_version = None if first is None else (first, get_version(first))
            if self.record.absolute_frames:
                check_absolute_frames(self.record)  # Note [as_strided On Inputs]
            note_before(self.record, func, args, kwargs)  # Note [Stale View Functions]
            check_inference_write(self.record, func, args, kwargs)
            check_grad_write_into_grown_view(self.record, func, args, kwargs)  # (before autograd replays its views)
            check_retyped_grad_write(self.record, func, args, kwargs)
            if self.record.escaping_strided:
                check_escaping_reads(self.record, func, args)  # Note [as_strided On Inputs]
            if self.record.hidden_grows:
                check_reads_after_hidden_grow(self.record, func, args)  # Note [Storage Swaps By Rebinding]
        subclass = _subclass_operand(func, args, kwargs)
        if (
            subclass is not None
            and copy_to_same_data(func, args, id(args[0]) in self.record.hidden)
            and self.depth == 0
        ):
            self._record_write(
                args[0], True
            )  # its inner tensors' copies run below autograd: no counter of theirs moves
            return args[0]
        if subclass is not None:
            return self._dispatch_subclass(subclass, func, args, kwargs, types)
        if func is torch.ops.aten.resize_.default and args and is_functional(args[0]):
            if self._resize(func, args, kwargs):
                return args[0]
        if func is torch.ops.aten.as_strided_.default and args and is_functional(args[0]):
            if self._as_strided_in_place(func, args, kwargs):
                return args[0]
        if func in _STRIDED_VIEWS and args and is_functional(args[0]):
            return self._as_strided(func, args, kwargs)
        if func is torch.ops.aten.set_.source_Tensor and len(args) > 1 and _sets_to_itself(args, self.depth):
            self._self_set(args)
            return args[0]
        if func in SET_OPS and args and is_functional(args[0]):
            self._functional_set(func, args, kwargs)
            return args[0]
        if (
            copy_to_same_data(func, args, id(args[0]) in self.record.hidden)
            or _unrecorded_empty_write(func, args, kwargs)
        ) and (is_functional(args[0]) and self.depth == 0):
            # (not a subclass's inner copy: the wrapper-level copy_ decided that, autograd may record it)
            note_reads(self.record, func, args, kwargs)
            self._record_write(args[0], True)
            return args[0]
        if args and is_functional(args[0]) and uniform_write(func, args[0]) and 0 in args[0].stride():
            self._write_over_repeats(func, args, kwargs)
            return args[0]
        if args and is_functional(args[0]) and writes_self(func) and self._through_overlap(args[0]):
            # See Note [as_strided On Inputs]: the same memory, as a view of the synthetic base.
            x = args[0]
            check_overlapping_input(self.record, x)
            meta = (list(x.shape), list(x.stride()), x.storage_offset())
            root = self._as_strided_source((x, *meta))
            if storage_key(root) in self.record.alias_bases:
                with as_strided_chain_refused(self.record, func, args, kwargs):
                    func(with_bits_of(root.as_strided(*meta), x), *args[1:], **kwargs)
                self._track(func, args, args[0], kwargs)
                return args[0]
        with as_strided_chain_refused(self.record, func, args, kwargs), self._retyped_wrapper(func, args):
            out = fill_in_memory_order(func, args, kwargs)  # Note [In-Place Ops As Eager Runs Them]
            if out is None:
                out = apply_keeping_strides(func, args, kwargs)  # Note [In-Place Ops As Eager Runs Them]
            if out is None:
                out = view_with_eager_strides(func, args, kwargs)  # Note [In-Place Ops As Eager Runs Them]
            if out is None:
                out = call_with_eager_layouts(func, args, kwargs)  # Note [In-Place Ops As Eager Runs Them]
        self._track(func, args, out, kwargs)
        return out

    def _dispatch_subclass(
        self, subclass: object, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], types: Any
    ) -> Any:
        # Let the subclass run with this mode still active, so its inner set_ calls are seen too. Its inner
        # ops run below autograd, so in eager they advance no version counter: count them as not writing.
        before = _size_and_stride(args[0]) if func in _RESIZE_OPS else None
        size_before = tuple(args[0].shape) if func in SET_OPS or torch.Tag.inplace_view in func.tags else ()
        if self.depth == 0 and torch.is_grad_enabled():
            self._note_wrapper_op(func, args, kwargs)
        # (the wrapper's own set_ below counts as a write before its _grad_set: Note [set_ Under Grad])
        # (a custom op's first argument may be an optional tensor passed None: no family, nothing written before)
        first = args[0] if isinstance(args[0], torch.Tensor) else None
        written_before = first is not None and self.record.family_of(first) in self.record.written_families
        if func in SET_OPS and self.depth == 0:
            leaves = flatten_subclass(args[0], "set_")[1]
            check_shared_grad_set(self.record, args, leaves)
            self.left_storages[id(args[0])] = (storage_key(args[0]), [storage_key(leaf) for leaf in leaves])
        outer = self.unrecorded_write
        if self.depth == 0 and func._schema.is_mutable and first is not None:
            self.unrecorded_write = self.record.unrecorded_before_grad(first, (*args, *kwargs.values()))
        try:
            with self:
                if dispatches_in_cpp(type(subclass)):
                    self.native_pending = func
                    out = func(*args, **kwargs)
                else:
                    out = getattr(type(subclass), "__torch_dispatch__")(func, types, args, kwargs)  # noqa: B009
        finally:
            self.native_pending = None
            self.unrecorded_write = outer
        self._track(func, args, out, kwargs)
        if isinstance(out, torch.Tensor) and is_traceable_subclass(out) and is_view_op(func):
            inner = flatten_subclass(out, "out")[1]
            if any(id(t) in self.record.base_strided_views for t in inner):
                self.record.base_strided_views.add(id(out))  # its inner views were: so is the wrapper
        if torch.Tag.inplace_view in func.tags and func not in SET_OPS and self.depth == 0:  # set_: its own rules
            self.record.note_hidden_resize(args[0], size_before)  # Note [Leaves Laid Out Anew Under no_grad]
        if func in SET_OPS and self.depth == 0:
            seq = self.record.inplace_views[id(args[0])][-1].seq  # set_ is an inplace_view op: _track saw it
            self.record.wrapper_sets[id(args[0])] = (seq, torch.is_grad_enabled())
            self.record.note_wrapper_set(args[0], seq, size_before)
            if not torch.is_grad_enabled():
                # any set_ under no_grad renews the accumulator, not only x.set_(x): a wrapper's epilogue lays out
                # its inner tensors, which renews nothing, so the runtime does
                note_self_set(self.record, args[0])  # Note [Gradient Accumulators Of Leaves]
            if len(args) > 1 and args[1] is args[0] and not (torch.is_grad_enabled() and args[0].requires_grad):
                counter = self._version_before(args[0])
                note_hidden_write(self.record, args[0], counter, written_before)  # Note [set_ Under Grad]
        if func in _RESIZE_OPS and self.depth == 0 and _size_and_stride(args[0]) != before:
            # The wrapper takes its new size with a set_ of its own, which advances its version counter (and
            # its base's, for a view), in eager.
            self.record.note_bump(args[0])
            note_relaid_late_grad(self.record, args[0])  # as a plain input's: Note [Leaves Laid Out Anew Under no_grad]
        source_grad = len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].requires_grad
        earlier = None
        if func in SET_OPS and self.depth == 0:
            earlier = self.record.wrapper_grad_sets.pop(id(args[0]), None)
        if func in SET_OPS and torch.is_grad_enabled() and (args[0].requires_grad or source_grad):
            if self.depth == 0:
                source = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
                self._grad_set(args[0], source, written_before)  # Note [set_ Under Grad], at the wrapper level
                if source is args[0]:  # x.set_(x): its node reaches the earlier set_'s source through x's history
                    source = self._source_kept(source, earlier)
                self.record.wrapper_grad_sets[id(args[0])] = (source, len(self.record.wrapper_ops) - 1)
        return out

    def _source_kept(self, x: torch.Tensor, earlier: tuple[torch.Tensor | None, int] | None) -> torch.Tensor:
        """The source of `x.set_(x)` under grad, wrapper `x`: that of its earlier set_() under grad, where it took
        one and no op since (before this set_(), the last of `wrapper_ops`) wrote `x` or a view of it; else `x`
        (Note [set_ Under Grad])."""
        if earlier is None or earlier[0] is None:
            return x
        since = self.record.wrapper_ops[earlier[1] + 1 : -1]
        written = any(self.record.view_root(w, through_swaps=True) is x for _, _, writes in since for w in writes)
        return x if written else earlier[0]

    def _retyped_wrapper(self, func: Any, args: tuple[Any, ...]) -> contextlib.AbstractContextManager[None]:
        """An in-place view op of a tensor a `.data =` gave another dtype runs on its wrapper over a scratch storage
        (Note [Storage Swaps By Rebinding])."""
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not is_functional(x) or id(x) not in self.record.retyped:
            return contextlib.nullcontext()
        if torch.Tag.inplace_view in getattr(func, "tags", ()):
            return wrapper_on_scratch(x)
        return contextlib.nullcontext()

    def _resize(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """resize_ of a FunctionalTensor; False where the op still runs as functionalization records it."""
        # Eager advances the version counter only when resize_ changes the size.
        if tuple(args[0].shape) != tuple(args[1]) and self.depth == 0:
            self.record.note_bump(args[0])
        if tuple(args[0].shape) == tuple(args[1]) and kwargs.get("memory_format") is None:
            # Eager's resize_ to the size a tensor has keeps its strides; functionalization's (and the synthetic
            # base rebinding below) would make it contiguous.
            return True
        if self.depth == 0:  # relaid as by an in-place view op: Note [Leaves Laid Out Anew Under no_grad]
            note_relaid_late_grad(self.record, args[0])
        self._check_resize_reach(args[0], list(args[1]))
        memory_format = kwargs.get("memory_format")
        retyped = self.record.retyped.get(id(args[0]))
        if retyped is not None:  # Note [Storage Swaps By Rebinding]
            check_retyped_resize(args[0], list(args[1]), retyped)
        elif self._grows(args):
            self._grow(args[0], list(args[1]), memory_format)
            return True
        base = self.record.alias_bases.get(storage_key(args[0]))
        if base is None and int(torch.Size(args[1]).numel()) == 0:
            # Eager's resize_() to no elements keeps the storage, from any offset; functionalization's counts the
            # offset as bytes it needs and refuses a view whose offset is past the storage's end.
            base = args[0]
        if base is None:
            check_resize_within_storage(self.record, args[0], list(args[1]), memory_format)
        else:
            # Within a synthetic base (Note [as_strided On Inputs]), or to no elements: x becomes the contiguous view
            # of the same storage from its offset, as eager's resize_ makes it (functionalization's resize_ of a view
            # loses later writes through it).
            size = list(args[1])
            strides = resize_strides(size, memory_format)
            rebind_functional(args[0], base, (size, strides, int(args[0].storage_offset())))
            self._track(func, args, args[0], kwargs)
            return True
        return False

    def _as_strided_in_place(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """as_strided_ of a FunctionalTensor; False where it runs as functionalization records it."""
        check_strided_reach(self.record, args)  # (an input's as_strided_ off its elements)
        check_inplace_strided_frame(self.record, args, kwargs)  # Note [as_strided On Inputs]
        source = self._as_strided_source(args)
        if source is not args[0]:  # Note [as_strided On Inputs]
            rest, strided_kwargs = strided_call_args(self.record, args[0], source, args[1:], kwargs)
            offset = rest[2] if len(rest) > 2 else strided_kwargs["storage_offset"]
            given = args[3] if len(args) > 3 else kwargs.get("storage_offset")
            eager = args[0].storage_offset() if given is None else given
            rebind_functional(args[0], source, (list(rest[0]), list(rest[1]), offset), wrapper_offset=eager)
            self._track(func, args, args[0], kwargs)
            return True
        return False

    def _as_strided(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Tracked against the tensor the program named (version counter family, view chain). An unfold is the
        # as_strided view of its layout (torch_internals.py: Unfold as the as_strided view it is), taken here from the
        # chain's root as one.
        strided, strided_kwargs = ((args[0], *unfold_layout(*args)), {}) if func is _UNFOLD else (args, kwargs)
        source = self._as_strided_source(strided)
        resolved = func is _UNFOLD and resolved_in_another_layout(args[0])
        if resolved or (func is _UNFOLD and (source is args[0] or source.is_neg() or source.is_conj())):
            out = func(*args, **kwargs)  # (the functional mode's: Unfold as the as_strided view it is)
            if resolved and not unfold_tiles(*args):
                self.record.untiled_unfolds.add(id(out))
        else:
            rest, strided_kwargs = strided_call_args(self.record, args[0], source, strided[1:], strided_kwargs)
            out = torch.ops.aten.as_strided.default(source, *rest, **strided_kwargs)
            out = with_bits_of(out, args[0])
        self._track(func, args, out, kwargs)
        if any(source is base for base in self.record.alias_bases.values()):
            self.record.base_strided_views.add(id(out))  # Note [as_strided On Inputs]
            note_escaping_view(self.record, source, out)  # Note [as_strided On Inputs]
        return out

    def _self_set(self, args: tuple[Any, ...]) -> None:
        # x.set_(x) changes nothing but the version counter (and, under grad, autograd's history).
        if torch.is_grad_enabled() and args[0].requires_grad and self.depth == 0:
            self._grad_set(args[0])
        elif self.depth == 0 and id(args[0]) not in self.record.data_aliases | self.record.data_views:
            if torch.is_grad_enabled():
                self.record.grad_self_set_families.add(self.record.family_of(args[0]))
            written = self.record.family_of(args[0]) in self.record.written_families
            note_hidden_write(self.record, args[0], get_version(args[0]), written)  # Note [set_ Under Grad]
        self.record.note_bump(args[0])
        if self.depth == 0 and id(args[0]) not in self.record.data_aliases | self.record.data_views:
            # a view taken before it is regenerated by autograd (eager's AsStridedBackward)
            self.record.seq += 1
            self.record.note_last_bump(storage_key(args[0]), args[0])
        if self.depth == 0 and not torch.is_grad_enabled():
            note_self_set(self.record, args[0])  # Note [Gradient Accumulators Of Leaves]

    def _leaf_input(self, t: torch.Tensor) -> bool:
        """Is `t` an input that is an autograd leaf (Note [Gradient Accumulators Of Leaves])?"""
        found = self.record.input_positions.get(id(t))
        with no_torch_function():  # (the pipeline's reads, not the program's)
            return found is not None and found[1].is_leaf

    def _functional_set(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """set_() of a FunctionalTensor: rebound (Note [Storage Swaps By Rebinding]), and what eager records of it."""
        # (autograd records nothing inside inference_mode, grad mode on or off: the set_() is no_grad's below)
        grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        if self.depth == 0 and not self.record.grad_at_start and grad and reads_grad((args, kwargs)):
            self.record.grad_reenabled.append("set_")  # Note [Grad Mode And Autograd Reads] (no torch function)
        if self.depth == 0:
            with no_torch_function():  # set_ never reaches the torch-function mode: its checks run here
                check_stale_views(self.record, args, kwargs)
                check_shared_grad_set(self.record, args, (args[0],))
                check_stale_set(self.record, args[0], args[1] if len(args) > 1 else None)
            if id(args[0]) in self.record.view_layouts and not self.record.view_layouts[id(args[0])][1]:
                note_view_set(self.record, args[0], tensor_meta(args[0]))  # Note [Stale View Functions]
            if not grad and id(args[0]) in self.record.view_layouts:
                self.record.view_sets.add(id(args[0]))  # Note [Stale View Functions]
        size_before, layout_before = tuple(args[0].shape), layout_of(args[0])
        key_before = storage_key(args[0])
        if self.record.stays_inference(args[0]):  # (a view of one too, taken inside the block or after it)
            self.record.inference_tensors.add(id(args[0]))  # eager's stays an inference tensor on the new storage
            self.record.pin(args[0])
        self._set(func, args, kwargs)
        if self.depth == 0:
            note_relaid_late_grad(self.record, args[0])  # Note [Leaves Laid Out Anew Under no_grad]
            note_nograd_set(self.record, args[0], layout_before)  # Note [Stale View Functions]
            if not grad and args[0].requires_grad:  # Note [Gradient Accumulators Of Leaves]
                note_self_set(self.record, args[0])
                if torch.is_inference_mode_enabled() and self._leaf_input(args[0]):
                    self.record.inference_sets.add(id(args[0]))
            if not grad and (layout_of(args[0]) != layout_before or storage_key(args[0]) != key_before):
                self.record.relaid_by_set[id(args[0])] = self.record.seq + 1  # Note [Stale View Functions]
        source_grad = len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].requires_grad
        if self.depth == 0:  # Note [Leaves Laid Out Anew Under no_grad]
            self.record.note_hidden_resize(args[0], size_before, self.record.seq + 1)
        if torch.is_grad_enabled() and (args[0].requires_grad or source_grad) and self.depth == 0:
            source = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
            self._grad_set(args[0], source)  # autograd recorded a set_ it cannot differentiate
            if grad and source is not None:  # (its node's edge: a read of the source with grad)
                with no_torch_function():  # (the pipeline's reads, not the program's)
                    note_set_source_read(self.record, args[0], source)
                    if self.record.releafable:  # Note [Leaves Laid Out Anew Under no_grad]
                        note_first_read(self.record, (source,), {})
                        note_reads_after_layout(self.record, (source,), {}, False)
        made_here = id(args[0]) in self.record.views  # a view the program took (not an aliased input's)
        if torch.is_grad_enabled() and made_here and args[0]._is_view() and id(args[0]) not in self.record.hidden:
            self.record.set_views.add(id(args[0]))  # Note [In-Place Ops As Eager Runs Them]
        # See Note [Stale View Functions]
        self.record.swapped_by_data.discard(id(args[0]))
        self.record.swapped_ids.add(id(args[0]))
        self.record.note_bump(args[0])
        if self.depth == 0:
            self.record.seq += 1
            self.record.plain_sets[id(args[0])] = (self.record.seq, grad)
            if id(args[0]) not in self.record.data_aliases | self.record.data_views:
                self.record.note_last_bump(key_before, args[0])  # Note [Storage Swaps By Rebinding]
        self.record.first_swaps.setdefault(id(args[0]), self.record.seq)

    def _write_over_repeats(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A write of one value into a FunctionalTensor with stride-0 dims (an expand()): once per element."""
        x = args[0]
        once = [1 if st == 0 and sz > 1 else sz for sz, st in zip(x.shape, x.stride(), strict=True)]
        meta = (once, list(x.stride()), x.storage_offset())
        # See Note [In-Place Ops As Eager Runs Them]: as_strided from the chain's root, which functionalization writes
        # back by one as_strided_scatter (a narrow at the end of the chain would scatter through the repeats)
        root = self._as_strided_source((x, *meta))
        check_overlapping_input(self.record, x)
        if overlaps(root) and storage_key(root) not in self.record.alias_bases:
            raise UnsupportedError(
                f"{func}: an in-place write into an input whose elements overlap in memory (an expanded input): "
                "the compiled graph holds its repeated elements as separate values. Pass the tensor it was "
                "expanded from and expand it inside the function"
            )
        if root.requires_grad and not root.is_contiguous():
            # functionalization writes it back by as_strided_scatter, which torch allows on contiguous tensors
            # only where they require grad (elsewhere: an internal assert)
            raise UnsupportedError(
                f"{func}: a write of one value through an expand() of a non-contiguous tensor that requires "
                "grad (an input's strided view) cannot be functionalized. Write into the tensor itself, or "
                "into a clone"
            )
        with as_strided_chain_refused(self.record, func, args, kwargs):
            func(with_bits_of(root.as_strided(*meta), x), *args[1:], **kwargs)
        self._track(func, args, args[0], kwargs)

    def _note_wrapper_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        subclass_args = tuple(
            a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor) and is_traceable_subclass(a)
        )
        schema = getattr(func, "_schema", None)
        written: tuple[torch.Tensor, ...] = ()
        if schema is not None and schema.is_mutable:
            written = tuple(
                arg
                for arg_schema, arg in _schema_operands(schema, args, kwargs)
                if arg_schema.is_write and isinstance(arg, torch.Tensor)
            )
        self.record.note_wrapper_op(func, subclass_args, written, pytree.tree_leaves((args, kwargs)))
        if self.record.wrapper_first_sets:
            self.record.note_reads_after_set(subclass_args, written)
        if self.record.hidden_resizes:
            self.record.note_reads_after_hidden_resize(subclass_args)

    def _grad_set(self, x: torch.Tensor, source: torch.Tensor | None = None, written: bool | None = None) -> None:
        """Note [set_ Under Grad]: set_() of `x` with grad on. On a view taken with grad on, eager's autograd
        rebases the view's base on the set_ node too: its history then raises in backward as well. `source`: the
        tensor set_() to (Note [set_ Under Grad]); `written`: was its family written before (None: ask the record).
        Inside inference_mode autograd records nothing, grad mode on or off."""
        if torch.is_inference_mode_enabled():
            return
        if id(x) in self.record.requires_grad_dropped and id(x) in self.record.input_positions:
            raise UnsupportedError(
                f"{input_named(self.record, x)}set_() with grad enabled of an input whose requires_grad the program "
                "turned off before: eager's set_() meets a tensor that does not require grad, the compiled call "
                "repeats the set_() on the input as passed, which does. Turn requires_grad off after the set_(), or "
                "outside the compiled function"
            )
        self.record.grad_set_ids.add(id(x))
        self.record.grad_set_bumps[id(x)] = self.record.bump_count(x)
        taken = source if source is not None and source.requires_grad else None
        earlier = self.record.grad_set_sources.get(id(x))
        if (source is None or source is x) and earlier is not None:
            taken = earlier  # x.set_(x): its node's edge to x's history reaches the earlier set_'s source
        self.record.grad_set_sources[id(x)] = taken
        if source is not None and source is not x:
            self.record.grad_set_source_bumps[id(x)] = self.record.bump_count(source)  # (eager's: `grad_set_places`)
            if self.record.last_set is not None:
                self.record.grad_set_places[id(x)] = self.record.last_set
        else:
            self.record.grad_set_source_bumps.pop(id(x), None)
            self.record.grad_set_places.pop(id(x), None)
        if written is None:
            written = self.record.family_of(x) in self.record.written_families
        note_grad_set_place(self.record, x, source, written)  # Note [set_ Under Grad]
        t = x
        for record in self.record.chain(x):
            if not record.grad_enabled or id(t) in self.record.hidden:
                return
            t = record.source
        if t is x:
            self.record.plain_grad_sets[id(x)] = x  # Note [set_ Under Grad]
            self.record.grad_set_nodes[id(x)] = GradSetNode.SET  # Note [Epilogue Nodes In Eager's Order]
        else:  # (Note [set_ Under Grad])
            self.record.grad_set_ids.add(id(t))
            self.record.view_set_bases.add(id(t))
            self.record.view_set_seqs.add(self.record.grad_set_marks[id(x)] + 1)
            self.record.grad_set_nodes[id(t)] = GradSetNode.NUMBERED
            if source is not None:
                root = self.record.view_root(source)
                self.record.view_set_sources.add(id(root))
                if source.requires_grad and all(root is not r for r in self.record.run_inputs):
                    # computed from inputs: eager's node holds back the leaves behind it,
                    # which the run's autograd graph does not name; any input leaf counts
                    self.record.view_set_sources.update(id(r) for r in self.record.run_inputs if r.requires_grad)
            if not t.requires_grad:
                self.record.view_set_gained.add(id(t))

    def _as_strided_source(self, args: tuple[Any, ...]) -> torch.Tensor:
        """Note [as_strided On Inputs]: the tensor to take an as_strided view of, checked against the input's span."""
        x = args[0]
        check_strided_reach(self.record, args)
        # as_strided's offsets are absolute: a view of the chain's root is the same view in eager, and
        # functionalization cannot write through as_strided at the end of a longer chain. Inputs that share storage
        # are views of their synthetic base (Note [Synthetic Bases]), one resize_() grew of the grown tensor (Note
        # [Storage Swaps By Rebinding]): the root of their chains (`chain_root`).
        root = chain_root(x)
        return x if root is None else root

    def _grows(self, args: tuple[Any, ...]) -> bool:
        x, size = args[0], list(args[1])
        numel = int(torch.Size(size).numel())
        # Eager's resize_() to no elements never touches the storage, even from an offset past its end.
        needed = x.storage_offset() + numel
        return bool(numel > 0 and needed > program_nbytes(self.record, x.untyped_storage()) // x.element_size())

    def _through_overlap(self, x: torch.Tensor) -> bool:
        """Does a write into x (whose own elements do not overlap) go through a view whose elements do, or did
        when the view was taken from it? Functionalization writes back through the chain as it was taken (a
        select() of an expanded input, which resize_() then made one element)."""
        if overlaps(x):
            return False  # refused as it is (_track)
        t = x
        while (record := self.record.views.get(id(t))) is not None:
            t = record.source
            if overlaps(t) or meta_overlaps(*record.source_meta):
                return True
        return False

    def _check_resize_reach(self, x: torch.Tensor, size: list[int]) -> None:
        """resize_() makes x contiguous from its offset: elements of its storage it did not cover become its own
        (Note [as_strided On Inputs] applies, the storage's tail too when it grows)."""
        span = self.record.input_spans.get(storage_key(x))
        if span is None:
            return
        stored = program_nbytes(self.record, x.untyped_storage()) // x.element_size()
        new = elements_of(size, list(torch._prims_common.make_contiguous_strides_for(size)), x.storage_offset())
        tail = elements_of([stored - x.storage_offset()], [1], x.storage_offset()) if self._grows((x, size)) else None
        if any(e is not None and not span[0].covers(e) for e in (new, tail)):
            raise StorageReachError(
                f"{span[1]}: resize_() makes storage elements that are not the input's own elements its own; the "
                "compiled graph holds only those. Pass the tensor that owns the storage and resize a view of it",
                leaf=span[2],
            )

    def _grow(self, x: torch.Tensor, size: list[int], memory_format: torch.memory_format | None) -> None:
        self.record.moved_by_swap = True
        # Eager grows the storage in place and keeps its old contents at the front (Note [Storage Swaps By
        # Rebinding] explains why functionalization cannot: here x is rebound to a fresh, larger tensor).
        sharers = self._sharers(x)
        start, old = storage_kept(self.record, x, sharers)
        # new_empty, not torch.empty: a factory called with no tensor inside an inference_mode block comes back from
        # the functional mode as a detach() of the value it made, and functionalization cannot write an as_strided()
        # view that follows another view in its chain back (Note [as_strided On Inputs])
        grown = x.new_empty(x.storage_offset() + int(torch.Size(size).numel()))
        grown[start : start + old.numel()].copy_(old)
        key_before = storage_key(x)
        rebind_functional(x, grown, (size, resize_strides(size, memory_format), int(x.storage_offset())))
        self.record.grown_ids.add(id(x))
        self.record.seq += 1
        self.record.self_grown_ids[id(x)] = self.record.seq
        recorded = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()  # (autograd's kernels run)
        if self.depth == 0 and not recorded and x.requires_grad and (x._is_view() or x.is_leaf):
            self.record.hidden_grows[id(x)] = x  # Note [Storage Swaps By Rebinding]
            if id(x) in self.record.input_positions and self.record.family_of(x) in self.record.visible_families:
                raise UnsupportedError(
                    f"{input_named(self.record, x)}resize_() grows this input, which requires grad, with grad off "
                    "(inside a torch.inference_mode() block) after the program wrote it with grad on: eager's "
                    "autograd recorded that write at the input's earlier size, the compiled call records its write "
                    "of the input's final value at the grown size (Note [Storage Swaps By Rebinding]). Grow a "
                    ".detach() of it, or write it after the growth"
                )
        self.record.grown_from[storage_key(x)] = key_before
        if (root := self.record.grown_root(key_before)) in self.record.storage_resizes:
            self.record.regrown_storages.add(root)  # (its last byte count is this growth's)
        if key_before in self.record.inference_made:  # (eager's storage, grown in place, stays an inference one)
            self.record.inference_made.add(storage_key(x))
        note_kernel_relaid(self.record, sharers)
        for t in sharers:  # each keeps its layout, on the grown storage (Note [Storage Swaps By Rebinding])
            rebind_functional(t, grown, (list(t.shape), list(t.stride()), t.storage_offset()))
            if id(t) in self.record.input_positions:  # an input whose storage grows under it, as eager's does
                self.record.grown_ids.add(id(t))

    def _sharers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The tensors over x's storage that eager's storage, grown in place by x.resize_(), takes along: those the
        program made or was passed (views of x, tensors set_() onto it, the input x is a view of) and the synthetic
        base over an input's storage, whose write back then holds the writes the growth made to its elements."""
        key = storage_key(x)
        candidates = {id(t): t for t in (*self.record.pinned.values(), *self.record.alias_bases.values())}
        return [
            t
            for t in candidates.values()
            if isinstance(t, torch.Tensor)
            and t is not x
            and id(t) not in self.record.original_ids
            and is_functional(t)
            and not is_traceable_subclass(t)
            and storage_key(t) == key
        ]

    # `x.set_(x.untyped_storage())` (aten.set_.source_Storage: no offset, size or stride) makes x the whole storage:
    # 1-D, offset 0, nbytes // itemsize elements, whatever x's shape was (a (4, 3) view's owner's storage gives x
    # (12,), not the owner's shape). The storage's elements beyond an input's own are reached as any strided view's
    # (Note [as_strided On Inputs]).
    def _set(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.record.moved_by_swap = True
        x = args[0]
        if func in (torch.ops.aten.set_.source_Tensor,):
            rebind_functional(x, args[1], None)
            self.record.layout_sources[id(x)] = args[1]
            return
        self.record.layout_sources.pop(id(x), None)
        source, rest = args[1], args[2:]
        owner: torch.Tensor | None
        if isinstance(source, torch.Tensor):
            owner = source
        else:
            owner = next((t for t in self.known if storage_key(t) == untyped_storage_key(source)), None)
            if owner is None:
                check_wrapper_storage_set(self.record, source)  # Note [Autograd Sees The Wrapper]
                raise UnsupportedError(
                    "set_(storage, ...) with a storage that belongs to no input or intermediate the compiler saw; "
                    "pass the tensor instead: x.set_(t) or x.set_(t.untyped_storage() of an input)"
                )
        offset = rest[0] if rest else kwargs.get("storage_offset", 0)
        size = rest[1] if len(rest) > 1 else kwargs.get("size", owner.shape)
        stride = rest[2] if len(rest) > 2 else kwargs.get("stride", None)
        if func is torch.ops.aten.set_.source_Storage:  # the whole storage, 1-D (see _set's comment)
            size, stride, offset = [source.nbytes() // x.element_size()], [1], 0
        if stride is None or len(stride) == 0:
            stride = torch._prims_common.make_contiguous_strides_for(size)
        check_strided_reach(self.record, (owner, size, stride, offset))  # Note [as_strided On Inputs]
        inner = functional_frame_offset(self.record, owner, offset)  # Note [as_strided On Inputs]
        rebind_functional(x, owner, (list(size), list(stride), inner), wrapper_offset=offset)
        note_absolute_view(self.record, owner)  # Note [as_strided On Inputs]

    def _track(self, func: Any, args: tuple[Any, ...], out: Any, kwargs: dict[str, Any] | None = None) -> None:
        kwargs = kwargs or {}
        if isinstance(out, torch.Tensor):
            self.known.append(out)
        schema = getattr(func, "_schema", None)
        if schema is None:
            return
        if self.depth == 0:
            self.record.note_taken_out(args, kwargs)
            note_reads(self.record, func, args, kwargs)
            # See Note [Leaves Laid Out Anew Under no_grad]
            if self.record.hidden_resizes and torch.is_grad_enabled():
                read = tuple(a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor))
                self.record.note_reads_after_hidden_resize(read)
        seq_before = self.record.seq
        self._track_op(func, schema, args, out, kwargs)
        if self.depth == 0:
            note_layout(self.record, func, args, out, seq_before)

    def _view_record(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        index: int | None,
        meta: RawMeta,
        leaves: tuple[RawMeta, ...] | None,
    ) -> ViewRecord:
        """The record of a view op's result, made now (`index`: its position in a multi-output op's result), of
        `args[0]` as it was before (`meta`, `leaves`)."""
        src = args[0]
        return ViewRecord(
            func,
            src,
            tuple(args[1:]),
            dict(kwargs),
            index,
            _recording(),
            meta,
            self.record.seq,
            leaves,
            self.depth > 0,
            self.depth == 0 and self.record.retaking_inference_view,
            # (eager's: a view input taken before the program flagged its base requires none, where the stand-in
            # of a compile that sets that flag from the start does)
            source_requires_grad=src.requires_grad and flagged_before_eager(self.record, src) is None,
            source_inference=src.is_inference(),
            source_base_gained=self.record.base_gained(src),
            bumps=self.record.bump_count(src),
        )

    def _track_op(self, func: Any, schema: Any, args: tuple[Any, ...], out: Any, kwargs: dict[str, Any]) -> None:
        if torch.Tag.inplace_view in getattr(func, "tags", ()) and args and isinstance(args[0], torch.Tensor):
            self.record.seq += 1
            self.record.note_inplace_view(
                args[0], InplaceViewRecord(func, tuple(args[1:]), dict(kwargs), _recording(), self.record.seq)
            )
        shares_version = is_view_op(func) or func is torch.ops.aten.detach.default
        if shares_version and args and isinstance(args[0], torch.Tensor):
            root = self.record.family_of(args[0])
            multi = isinstance(out, list | tuple)
            src, meta, leaves = args[0], tensor_meta(args[0]), source_leaf_metas(args[0])
            for i, o in enumerate(out if multi else (out,)):
                # (a no-op to() returns src itself: no view; nor is the copy a composite op that may alias makes where
                # it reaches the mode undecomposed, as under inference_mode: `x.t().contiguous()`, a reshape())
                if isinstance(o, torch.Tensor) and o is not src and not _copied_at_top(self.depth, src, o):
                    self.record.seq += 1
                    self.record.views[id(o)] = self._view_record(func, args, kwargs, i if multi else None, meta, leaves)
                    self.record.below_autograd_views |= self.depth > 0
                    self.record.note_view_made(src, o, root)
                    if func is torch.ops.aten.detach.default and self.depth == 0:
                        self.record.note_detach(src, o)
                    if id(args[0]) in self.record.set_views:
                        self.record.set_views.add(id(o))
                    if id(args[0]) in self.record.base_strided_views:
                        self.record.base_strided_views.add(id(o))
                    if id(args[0]) in self.record.untiled_unfolds:
                        self.record.untiled_unfolds.add(id(o))
                    if id(args[0]) in self.record.data_aliases or id(args[0]) in self.record.data_views:
                        self.record.data_views.add(id(o))  # shares the `.data` alias's own version counter
                    if id(args[0]) in self.record.hidden or func is torch.ops.aten.detach.default:
                        # Writes through detach() (and views of it) are invisible to autograd, as in eager.
                        self.record.hidden.add(id(o))
        if schema.is_mutable:
            # Eager bumps version counters in ADInplaceOrView kernels, which exist for in-place (`op_`) and
            # out= variants only: ops that mutate an argument otherwise (batch norm's running statistics in
            # _native_batch_norm_legit) leave its version alone. Follow it.
            # An op of another namespace bumps by its ADInplaceOrView kernel only, if it has one (a torch.library
            # custom op's `mutates_args`); its body's own writes are eager's to tell (custom_op_body_bumps).
            inplace, aten = schema.name.endswith("_") and schema.name not in _NO_VERSION_BUMP, func.namespace == "aten"
            bumped = (inplace and aten) or bumps_written_args(func)
            moves_data = torch.Tag.inplace_view not in func.tags  # t_() and the like change no data
            for arg_schema, arg in _schema_operands(schema, args, kwargs):
                if arg_schema.is_write and isinstance(arg, torch.Tensor) and moves_data:
                    check_overlapping_input(self.record, arg)
                if (
                    arg_schema.is_write
                    and isinstance(arg, torch.Tensor)
                    and self.depth == 0
                    and moves_data
                    and overlaps(arg, uniform=uniform_write(func, arg))
                ):
                    raise UnsupportedError(
                        f"{func}: an in-place write through a tensor whose elements overlap in memory (an expand() "
                        "or a zero stride) cannot be functionalized faithfully; write into the base tensor, or "
                        "call .contiguous()/.clone() before writing"
                    )
                if moves_data and arg_schema.is_write and id(arg) in self.record.set_views:  # (ids of tensors)
                    check_write_after_set(func, args, kwargs)
                if arg_schema.is_write and isinstance(arg, torch.Tensor) and moves_data and self.depth == 0:
                    check_nograd_set_write(self.record, arg, [*args, *kwargs.values()])
                if arg_schema.is_write and isinstance(arg, torch.Tensor) and id(arg) in self.record.base_strided_views:
                    check_write_through_base_strided(func, arg)
                if moves_data and arg_schema.is_write and id(arg) in self.record.untiled_unfolds:
                    refuse_write_through_untiled_unfold(func)
                if arg_schema.is_write and isinstance(arg, torch.Tensor) and moves_data:
                    check_no_overlapping_read(func, arg, args, kwargs)
                    if self.depth == 0 and not is_traceable_subclass(arg):  # subclasses: their own rule (analyze)
                        check_empty_write_through_overlap(func, arg, args, kwargs, self.record)
                    self.record.moved_storages.add(storage_key(arg))
                    if self.depth == 0 and not is_traceable_subclass(arg):
                        self.record.dense_writes.add(storage_key(arg))
                if arg_schema.is_write and isinstance(arg, torch.Tensor):
                    # In-place view ops count too: they advance the version counter autograd checks views against.
                    # (a kernel's write not in-place by name, batch norm's running statistics, moves no counter)
                    bumps = bumped or (arg_schema.is_out and aten)  # (a kwarg-only written argument is "out")
                    quiet = not bumps and func not in _RESIZE_OPS
                    self._record_write(arg, bumps, moves_data, (*args, *kwargs.values()), quiet)
                    if inplace and not arg_schema.is_out and self.depth == 0 and _recording():
                        self._note_grad_write(func, arg)

    def _note_grad_write(self, func: Any, arg: torch.Tensor) -> None:
        """An in-place write of `arg` with grad on, which eager's autograd checks first (Note [Views That Raise After
        A Bump]); not set_(), resize_() nor detach_(), whose own rules come first."""
        if func not in SET_OPS and func not in _RESIZE_OPS and func is not torch.ops.aten.detach_.default:
            self.record.grad_writes.append(arg)

    def _version_before(self, t: torch.Tensor) -> int:
        """`t`'s version counter before the program's op running now (Note [set_ Under Grad])."""
        entry = self.entry_version
        return entry[1] if entry is not None and entry[0] is t else get_version(t)

    def _record_write(
        self,
        arg: torch.Tensor,
        bumps: bool,
        moves_data: bool = True,
        operands: Sequence[object] = (),
        quiet: bool = False,
    ) -> None:
        if self.depth == 0 and moves_data and torch.is_grad_enabled() and arg.requires_grad:
            self._refuse_write_through_copying_view(arg)
        self.record.seq += 1
        self.record.note_write_kind(arg, moves_data, self.depth == 0 and is_traceable_subclass(arg))
        left = self.left_storages.pop(id(arg), None)  # Note [Storage Swaps By Rebinding]
        key = storage_key(arg) if left is None else left[0]
        if not quiet and id(arg) not in self.record.data_aliases and id(arg) not in self.record.data_views:
            # a `.data` alias (and its views) has a version counter of its own
            self.record.note_last_bump(key, arg)
            if self.depth == 0 and is_traceable_subclass(arg):
                leaf_keys = [storage_key(leaf) for leaf in flatten_subclass(arg, "written")[1]]
                for leaf_key in leaf_keys if left is None else left[1]:
                    self.record.note_wrapper_bump(leaf_key, arg)
                if bumps:
                    bump_family_wrappers(self.record, arg)
        # (through a detach() too: the write is hidden from the base's history, not from the alias's own)
        grad_on = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        visible = id(arg) not in self.record.hidden and grad_on
        # (a write into an input the program makes require grad later, before that call: Note [Leaves Laid Out Anew
        # Under no_grad])
        visible = visible and not self.unrecorded_write and not self.record.unrecorded_before_grad(arg, operands)
        visible = visible and not self.record.resizing_unrecorded  # Note [resize_ And requires_grad]
        own_counter = id(arg) not in self.record.data_aliases and id(arg) not in self.record.data_views
        if self.depth == 0 and bumps and moves_data and not visible and own_counter:
            written = self.record.family_of(arg) in self.record.written_families
            note_hidden_write(self.record, arg, self._version_before(arg), written)  # Note [set_ Under Grad]
        if self.depth == 0 and bumps:
            self.record.note_bump(arg)
        if visible:
            # Writes under no_grad, inside inference_mode (grad mode on or not) or through .data/detach() are
            # invisible to autograd in eager.
            self.record.note_visible_write(arg, moves_data)
            if self.depth == 0 and moves_data:
                note_write_after_grad_set(self.record, arg)  # Note [set_ Under Grad]
        elif self.depth == 0 and moves_data and grad_on and id(arg) in self.record.hidden:
            note_write_after_grad_set(self.record, arg)  # (a detach() alias's own history: Note [set_ Under Grad])
        sources = (o for o in pytree.tree_leaves(operands) if isinstance(o, torch.Tensor) and o is not arg)
        if self.depth == 0 and moves_data and grad_on and any(o.requires_grad for o in sources):
            self.record.grad_written.add(id(arg))

    def _refuse_write_through_copying_view(self, arg: torch.Tensor) -> None:
        """A write with grad through a subclass view whose view op copied (a sharded view that gathers): eager's
        autograd records it on the view's base (CopySlices: the base's gradient changes), while the data it writes is
        the copy's, which the base never sees; the compiled program computes one or the other."""
        for t, record in self.record.subclass_view_steps(arg):
            keys = {storage_key(leaf) for leaf in flatten_subclass(record.source, "source")[1]}
            if not any(storage_key(leaf) in keys for leaf in flatten_subclass(t, "view")[1]):
                raise UnsupportedError(
                    f"the program writes, with grad, a view of a {type(arg).__name__} made by a view op "
                    f"({record.func}) whose inner tensors are a copy of its source's: eager's autograd records the "
                    "write on the view's base, whose data never sees it, so its gradient and its values disagree, "
                    "which a compiled program cannot reproduce (Note [Autograd Sees The Wrapper]). Write a clone, or "
                    "make the view op return views of its source's inner tensors"
                )


def _size_and_stride(t: object) -> object:
    return (tuple(t.shape), tuple(t.stride())) if isinstance(t, torch.Tensor) else None


def _dense_leaves(tree: object) -> list[torch.Tensor]:
    """The plain tensors of `tree`, a traceable subclass's inner tensors (recursively) in its place."""
    leaves: list[torch.Tensor] = []
    for t in pytree.tree_leaves(tree):
        if _plain_tensor(t):
            leaves.append(t)
        elif isinstance(t, torch.Tensor) and is_traceable_subclass(t):
            leaves.extend(flatten_subclass(t, "t")[1])
    return leaves


def _plain_tensor(t: object) -> bool:
    return isinstance(t, torch.Tensor) and not is_traceable_subclass(t)


def _stands_for_leaf_input(record: SwapRecord, args: tuple[Any, ...]) -> bool:
    """Is args[0] the run's stand-in, no leaf, for a tensor input that is a leaf requiring grad in eager? (Not one the
    program wrote a value requiring grad into, SwapRecord.grad_written: eager's is no leaf then.)"""
    if not args or not isinstance(args[0], torch.Tensor) or is_functorch_wrapped(args[0]):
        return False
    found = record.input_positions.get(id(args[0]))
    leaf = found is not None and found[1].is_leaf and id(args[0]) not in record.grad_written
    return leaf and args[0].requires_grad and not args[0].is_leaf


def _input_flag_unset(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is `t` the stand-in, requiring no grad, of an input that requires grad neither as passed nor by the program's
    flag? Turning its flag off changes nothing, in eager as in the run: no drop (SwapRecord.requires_grad_dropped), so
    a later flag may still come last (Analysis.gains_last)."""
    found = record.input_positions.get(id(t))
    unset = found is not None and not found[1].requires_grad and id(t) not in record.requires_grad_set
    return unset and not t.requires_grad


def _note_touch_after_gain(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A torch function that takes the storage of an input made to require grad before it (SwapRecord.late_gains),
    with grad on (autograd would record the input there), or that may write, move or resize what it takes (an
    in-place method, a setter, out=) in any mode: no gain last for that input. A read under no_grad is none: its
    result has no history with the flag or without, and a view taken so requires grad through its base either way
    (Note [Grad Mode And Autograd Reads]); an attribute read's answer is the analysis run's."""
    name = getattr(func, "__name__", "")
    writes = name.endswith("_") or name == "__set__" or "out" in kwargs
    if not writes and (name == "__get__" or not torch.is_grad_enabled()):
        return
    # (requires_grad_() or `.requires_grad = True` again on a tensor that requires grad changes nothing)
    if turns_flag_on(func, args, kwargs)[0] and isinstance(args[0], torch.Tensor) and args[0].requires_grad:
        return
    # (a dunder other than an in-place operator or __setitem__ only reads)
    dunder_read = name.startswith("__") and not name.startswith("__i") and name not in ("__setitem__", "__set__")
    writes = writes and not dunder_read
    for t in _dense_leaves((args, kwargs)):
        found = record.late_gains.get(storage_key(t))
        if found is not None:
            (record.touched_after_gain if writes else record.read_after_gain).add(found[0])
    for t in pytree.tree_leaves((args, kwargs)):  # (the input itself, moved onto another storage since)
        moved = isinstance(t, torch.Tensor) and storage_key(t) not in record.late_gains
        if moved and any(id(t) == i for i, _ in record.late_gains.values()):
            record.touched_after_gain.add(id(t))


class _DataMode(TorchFunctionMode):
    def __init__(self, record: SwapRecord) -> None:
        super().__init__()
        self.record = record

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if not self.record.dispatching and not is_query(func):  # (eager runs a held-back call: SwapRecord.call_seqs)
            self.record.call_seqs.append(self.record.seq)
        if self._held_back(func, args, kwargs):  # See Note [Training Without A Function]
            return None if turns_flag_on(func, args, kwargs)[1] else args[0]
        method = per_tensor_method(func)
        if method is not None and args and isinstance(args[0], (list, tuple)):
            logged = len(self.record.call_seqs)
            for i, t in enumerate(args[0]):  # Note [In-Place Ops As Eager Runs Them]
                rest = tuple(a[i] if isinstance(a, (list, tuple)) else a for a in args[1:])
                family, version = self.record.family_of(t), get_version(t)
                bumps = self.record.written_families.get(family, 0)
                self.__torch_function__(method, types, (t, *rest), kwargs)
                if isinstance(t, torch.Tensor) and is_traceable_subclass(t) and bumps:
                    self.record.written_families[family] = bumps
                elif isinstance(t, torch.Tensor) and is_traceable_subclass(t):
                    self.record.written_families.pop(family, None)
                    set_version(t, version)
            del self.record.call_seqs[logged:]  # (one call of the program's, however it runs here)
            return args[0]  # (eager's returns its first list itself)
        self.record.pin((args, kwargs))  # Note [Storage Swaps By Rebinding]
        self.record.calls += 1
        check_unseen_histories(self.record, (args, kwargs))  # (views of gained bases: grad_scope.py)
        if self.record.late_gains:
            _note_touch_after_gain(self.record, func, args, kwargs)
        out = self._leaf(func, args, kwargs) if makes_leaf_itself(func, kwargs) else self._function(func, args, kwargs)
        self.record.pin(out)
        note_no_history_results(self.record, func, args, kwargs, out)  # Note [Training Without A Function]
        if self.record.hidden_grows:  # Note [Storage Swaps By Rebinding]
            note_grad_through_hidden_grow(self.record, func, args, kwargs, out)
        return out

    def _leaf(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A factory's requires_grad=True (`torch.zeros(..., requires_grad=True)`): eager's new leaf, run as the
        factory's result given requires_grad_(), whose rules give the outputs over it eager's flag, view metadata and
        history: under no_grad, Note [Grad Mode And Autograd Reads]; with grad on, the new leaf held back where eager's
        run shows the caller nothing of it, else made by the native path or refused (Note [Training Without A
        Function]), where the factory's result run with its flag lost a returned leaf's, or view's, flag and history."""
        self.record.grad_factories.append(
            f"{getattr(func, '__module__', None) or 'torch'}.{getattr(func, '__name__', '')}"
        )
        made = self._function(func, args, {**kwargs, "requires_grad": False})
        if self._held_back(torch.Tensor.requires_grad_, (made,), {}):
            return made
        return self._function(torch.Tensor.requires_grad_, (made,), {})

    def held_call(self) -> None:
        """A mode above held back one of the program's calls (backward_probe.holding_back_flags): eager runs it."""
        if not self.record.dispatching:
            self.record.call_seqs.append(self.record.seq)

    def _held_back(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """While the compile has not decided which calls making new leaves it holds back (SwapRecord.hold): does this
        call turn on the requires_grad of a tensor that is no input, making it a new leaf where the compile as called
        refuses or may refuse it? It is then held back (skipped before anything here sees it, as in the runs that
        hold it back later) and noted with its place among the calls turning a flag on."""
        hold = self.record.hold
        if hold is None or hold.held is not None:
            return False
        on, _ = turns_flag_on(func, args, kwargs)
        if not on:
            return False
        place, self.record.flag_calls = self.record.flag_calls, self.record.flag_calls + 1
        t = args[0]
        if not isinstance(t, torch.Tensor) or is_functorch_wrapped(t) or id(t) in self.record.input_positions:
            return False
        if id(t) in self.record.retyped:  # (the call's own refusal, as where it is not held back: _flag_pair)
            refuse_retyped_gain(self.record.retyped[id(t)], t.dtype)
        # (as _makes_new_leaf answers: in a call begun under no_grad, the flag alone changes, whatever the grad mode
        # at the call, Note [Grad Mode And Autograd Reads])
        if not self.record.grad_at_start:
            return False
        through_base = requires_grad_through_base(t) and id(t) not in self.record.requires_grad_set
        if t.requires_grad and not through_base:
            return False
        kind = NewLeafKind.SUBCLASS if is_traceable_subclass(t) else NewLeafKind.PLAIN
        hold.noted[place] = (kind, type(t).__name__)
        return True

    def _function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        name = getattr(func, "__name__", "")
        owner = getattr(getattr(func, "__self__", None), "__name__", None)
        if owner == "data" and name == "__set__" and self._data_set(args):
            return None
        _gradient_business(self.record, func, args, kwargs, name, owner)
        target = args[0] if args else None
        if (
            owner == "data"
            and name == "__set__"
            and isinstance(target, torch.Tensor)
            and is_traceable_subclass(args[0])
        ):
            if not is_functional(target):
                self._record_assignment(target, args[1])
        # requires_grad_(), or the `.requires_grad =` setter, which does the same
        setter = owner == "requires_grad" and name == "__set__"
        flag = setter or func is torch.Tensor.requires_grad_
        turns_on = flag and bool(args[1] if len(args) > 1 else kwargs.get("requires_grad", True))
        cancels = flag and self._flag_pair(args[0], turns_on)
        new_leaf = turns_on and self._makes_new_leaf(args[0])
        if flag and not cancels:
            self._requires_grad_change(args, turns_on)
        if flag and not cancels and (setter or not turns_on) and _stands_for_leaf_input(self.record, args):
            # See Note [Grad Mode And Autograd Reads]: the run's stand-in for a leaf input is no leaf, where the setter
            # and requires_grad_(False) raise; eager's leaf keeps requiring grad, or stops as by detach_() (what ops
            # saved of it before stays readable: joint._saves_as_eager)
            if not turns_on and args[0]._is_view():
                raise UnsupportedError(
                    f"{input_named(self.record, args[0]) or 'an input: '}the program turns requires_grad off on this "
                    "input, a leaf that requires grad, which the compiled run traces as a view over its whole storage "
                    "(a resize_() grows or regrows it): the run cannot stop that view requiring grad as eager stops "
                    "the leaf's. Pass the input .detach()ed, or resize a .clone()"
                )
            if not turns_on:
                # (the flag is no write: inference mode changes nothing; inference_mode(False) alone turns grad on)
                grad = torch.is_grad_enabled()
                with torch.inference_mode(False), torch.set_grad_enabled(grad):
                    self._function(torch.Tensor.detach_, (args[0],), {})
            return None if setter else args[0]
        # (an attribute read, or a call inside inference_mode, makes no result that requires grad)
        computes = name != "__get__" and not torch.is_inference_mode_enabled()
        if computes:
            note_grad_reenabled(self.record, func, args, kwargs)  # Note [Grad Mode And Autograd Reads]
        call_args, call_kwargs = with_eager_view_histories(self.record, func, args, kwargs)
        if name != "__set__":
            # (a setter reads no history; torch calls some from C++, `_backward_hooks` under set_(), where a raise
            # comes out as a SystemError)
            check_stale_views(self.record, call_args, call_kwargs)
            check_assigned_view_inputs(self.record, args, kwargs)
            check_views_of_assigned_bases(self.record, args, kwargs)
        check_gained_family_member(self.record, args)
        layout_op = is_layout_op(func, args)
        view_before = view_layout(args[0]) if layout_op and self.record.view_layouts else None
        if layout_op and torch.is_grad_enabled() and args[0].requires_grad:
            # a view, or a view input (run as a clone) (Note [Probing Eager's Backward])
            if args[0]._is_view() or id(args[0]) in self.record.view_layouts:
                self.record.views_relaid_with_grad = True
        seq_before, bumped = self.record.seq, bumped_input_reads(self.record, args, kwargs) if computes else []
        out = self._call(func, args, call_args, call_kwargs, name, layout_op)
        if computes:
            self._check_results(name, args, kwargs, out, bumped, seq_before)
        if new_leaf and self.record.replayed_new_leaves is not None:
            self._trace_new_leaf(args[0])  # Note [Training Without A Function]
        self._note_call(func, args, kwargs, out, seq_before, layout_op, view_before)
        if func in _UNIFORM_METHODS and _recorded_overlapping_write(out):
            _raise_in_backward(self.record, out)  # See Note [In-Place Ops As Eager Runs Them]
        if func is torch.Tensor.contiguous and args and out is args[0]:
            if id(out) in self.record.copy_on_contiguous and len(args) == 1 and not kwargs:
                return out.clone(memory_format=torch.contiguous_format)
            self.record.contiguous_self.append(out)
        if owner == "data" and name == "__get__" and isinstance(out, torch.Tensor):
            # `.data` has a version counter of its own: writes through it leave the original's unchanged.
            self.record.data_of[id(out)] = args[0]
            self.record.hidden.add(id(out))
            self.record.data_aliases.add(id(out))
            self.record.family[id(out)] = id(out)
        return out

    def _flag_pair(self, t: object, turns_on: bool) -> bool:
        """requires_grad_() turning `t`'s flag on opens a gain (SwapRecord.open_gain); turning it off right after,
        nothing run between, cancels it: True where so (no change at all, nor the gain)."""
        if not isinstance(t, torch.Tensor):
            return False
        if turns_on and id(t) in self.record.retyped:
            refuse_retyped_gain(self.record.retyped[id(t)], t.dtype)
        if turns_on and not t.requires_grad:
            self.record.open_gain(t)
        return not turns_on and self.record.cancel_gain(t)

    def _data_set(self, args: tuple[Any, ...]) -> bool:
        """`args[0].data = args[1]`: True where it is done here (nothing is left to run)."""
        self.record.note_ordered_change(args[:2])  # SwapRecord.gained_before_changes
        if args[1] is args[0]:
            # `x.data = x` copies x's metadata onto itself: nothing changes (Note [Wrapper Storage])
            return True
        if (
            isinstance(args[1], torch.Tensor)
            and self.record.eager_inference(args[1])
            and not self.record.eager_inference(args[0])
            # (inside the block, an intermediate's output is made an inference tensor: OutputInfo.inference)
            and (not torch.is_inference_mode_enabled() or id(args[0]) in self.record.input_positions)
        ):  # (a tensor subclass's too: its wrapper takes the new data's keys)
            raise UnsupportedError(
                f"{input_named(self.record, args[0])}`.data =` an inference tensor (made inside a "
                "torch.inference_mode() block) of a normal tensor: eager's becomes an inference tensor, which "
                "the compiled call does not make. Assign a clone made outside the block"
            )
        if is_functional(args[0]) and is_functional(args[1]):
            check_data_dtype(self.record, args[0], args[1])
            version, key, before = get_version(args[0]), storage_key(args[0]), layout_of(args[0])
            note_data_assignment(self.record, args[0], tuple(args[0].shape))
            note_assignment_reads(self.record, args[0])  # Note [History Kept Through .data =]
            note_assigned_view_input(self.record, args[0], before)  # Note [Stale View Functions]
            if id(args[0]) in self.record.input_positions and not is_traceable_subclass(args[0]):
                self.record.assigned_bases.setdefault(id(args[0]), (before, args[0]))
            # hidden from autograd (a no_grad view may take it with grad mode on); inside inference_mode, of a normal
            # tensor, outside it: the alias would be an inference tensor, eager's tensor keeps its own flags
            with torch.inference_mode(args[1].is_inference()), torch.no_grad():
                rebind_functional(args[0], args[1], None, own_bits=False)
            self.record.layout_sources[id(args[0])] = args[1]
            set_version(args[0], version)  # and from its version counter, which autograd checks views against
            note_assigned(self.record, args[0], key, before)  # Note [Stale View Functions]
            self.record.swapped_by_data.add(id(args[0]))
            note_relaid_late_grad(self.record, args[0])  # Note [Leaves Laid Out Anew Under no_grad]
            self.record.note_counter_after_data(args[0], self.record.eager_inference(args[1]))
            self.record.data_inference[id(args[0])] = self.record.eager_inference(args[1])
            self.record.swapped_ids.add(id(args[0]))
            self.record.seq += 1
            self.record.data_sets[id(args[0])] = (self.record.seq, False)  # hidden from autograd
            self.record.first_swaps.setdefault(id(args[0]), self.record.seq)
            return True
        return False

    def _trace_new_leaf(self, t: torch.Tensor) -> None:
        """The trace's `new_autograd_leaf` node for the program's call making `t` a new leaf, given the creation meta
        of a view taken under no_grad where the analysis run found eager's has it (its place in new_leaves: the
        cursor `_makes_new_leaf` just moved)."""
        k = self.record.new_leaf_cursor - 1
        no_grad_view = k in self.record.replayed_no_grad_leaf_views
        input_base = k in self.record.replayed_input_base_leaf_views
        trace_new_leaf(t, id(t) in self.record.input_positions, no_grad_view, input_base)

    def _makes_new_leaf(self, t: object) -> bool:
        """Does the program's requires_grad_() on `t` make it a new autograd leaf in eager (Note [Training Without A
        Function])? The analysis run answers and records; the trace's run replays its answers in call order."""
        record = self.record
        if record.replayed_new_leaves is not None:
            k, record.new_leaf_cursor = record.new_leaf_cursor, record.new_leaf_cursor + 1
            new = k < len(record.replayed_new_leaves) and record.replayed_new_leaves[k]
        elif not isinstance(t, torch.Tensor) or not record.grad_at_start or is_functorch_wrapped(t):
            new = False
        elif id(t) in record.input_positions:
            new = self._input_gains_after_read(t)
        elif flagged_base_view_read(record, "is_leaf", t) == (False,):
            new = False  # (eager's has a node and requires grad: `_flag_already_on`)
        else:
            # (a view of an input taken before the program made it require grad: check_view_taken_before_grad's;
            # and of a source that required grad when taken: it had history, whose replay after a `.data =` of its
            # source may raise where eager's does not: stale_views refuses it)
            view = record.views.get(id(t))
            through_base = requires_grad_through_base(t) or (
                (view is None or not view.source_requires_grad)
                and history_less_view(t)
                and id(t) not in record.views_before_grad
            )
            new = not t.requires_grad or (through_base and id(t) not in record.requires_grad_set)
            if new:
                _check_new_leaf(t)
        if record.replayed_new_leaves is None:
            record.new_leaves.append(new)
            if new:
                record.new_leaf_ids.add(id(t))
                record.new_leaf_seq[id(t)] = record.seq
                record.pin(t)
                if isinstance(t, torch.Tensor) and id(t) not in record.input_positions:
                    self._note_leaf_view(t, len(record.new_leaves) - 1)
                if isinstance(t, torch.Tensor) and record.eager_inference(t):
                    record.inference_new_leaves.add(len(record.new_leaves) - 1)
        if new and id(t) in record.input_positions:
            record.leaf_marked.add(id(t))
        return new

    def _note_leaf_view(self, t: torch.Tensor, k: int) -> None:
        """Note the new leaf `t` at place `k` in new_leaves among the views the trace's node gives the creation meta of
        one taken under no_grad, and among those of an input that requires no grad now (eager's `._base`: a write to
        it after the program turned its flag on, even the caller's after the call, rebuilds eager's leaf's history,
        and its backward then raises "leaf variable has been moved into the graph interior")."""
        if self.record.made_under_no_grad(t):
            self.record.no_grad_leaf_views.add(k)
        base = t._base if t._is_view() else None
        if base is not None and id(base) in self.record.input_positions and not base.requires_grad:
            self.record.input_base_leaf_views.add(k)

    def _input_gains_after_read(self, t: torch.Tensor) -> bool:
        """Is `t` the stand-in for a plain input that shares no storage with another, no leaf laid out anew (Note
        [Leaves Laid Out Anew Under no_grad]), that requires no grad and was read with grad on (Note [Training Without
        A Function])?"""
        real = self.record.input_positions[id(t)][1]
        if t.requires_grad or real.requires_grad or is_traceable_subclass(t) or id(t) in self.record.late_grad:
            return False
        return not self.record.shares_input_storage(t) and self._read_with_grad(t)

    def _flips_unread(self, t: torch.Tensor) -> list[torch.Tensor] | None:
        """For the stand-in `t` of a plain input sharing storage with another input, which requires_grad_() turns on
        after an op with grad read that storage: the stand-ins whose flag eager's call turns on (`t`, and the inputs
        whose `._base` is its input), where no op with grad read one of them or a view of one; else None. Those
        stand-ins, views of a synthetic base, gain the flag at the call as eager's tensors do, while reads of the
        others over the storage never had history in either (Note [Grad Mode And Autograd Reads])."""
        found = self.record.input_positions.get(id(t))
        if found is None or is_traceable_subclass(t) or not self.record.shares_input_storage(t):
            return None
        if not self._read_with_grad(t):
            return None
        real = found[1]
        flips = [t]
        for position, other in self.record.input_positions.values():
            if other is not real and other._is_view() and other._base is real:
                flips.append(self.record.run_inputs[position])
        read = self.record.read_with_grad
        if any(id(s) in read or self.record.views_of(s) & read.keys() for s in flips):
            return None
        return flips

    def _read_with_grad(self, t: torch.Tensor) -> bool:
        """Did an op with grad on read `t`, or another tensor over its storage?"""
        if id(t) in self.record.read_with_grad:
            return True
        return not is_traceable_subclass(t) and storage_key(t) in self.record.storages_read_with_grad

    def _requires_grad_change(self, args: tuple[Any, ...], turns_on: bool) -> None:
        """requires_grad_() or the `.requires_grad =` setter of `args[0]`: what eager does with it, noted or refused."""
        if isinstance(args[0], torch.Tensor):
            found = self.record.input_positions.get(id(args[0]))
            if not turns_on and not _input_flag_unset(self.record, args[0]):
                self.record.requires_grad_dropped.add(id(args[0]))
                self.record.dropped_at.setdefault(id(args[0]), self.record.seq)
                self.record.own_flags.discard(id(args[0]))
            passed = [real for _, real in self.record.input_positions.values()]
            changes = args[0].requires_grad != turns_on
            if found is not None and changes and sum(r is found[1] for r in passed) > 1:
                raise UnsupportedError(
                    f"{input_named(self.record, args[0])}the program turns requires_grad {'on' if turns_on else 'off'} "
                    "for a tensor it was passed more than once (f(x, x)): eager's one object changes at every "
                    "position, the compiled call's stand-ins for the other positions do not. Pass a copy, or set "
                    "requires_grad before the call"
                )
        if (
            turns_on
            and isinstance(args[0], torch.Tensor)
            and not is_functorch_wrapped(args[0])  # Note [Grad Mode And Autograd Reads]
            and not _flag_already_on(self.record, args[0])
        ):
            self.record.requires_grad_set.add(id(args[0]))
            if is_no_grad_view(args[0]) and id(args[0]) not in self.record.input_positions:
                self.record.own_flags.add(id(args[0]))
                self.record.pin(args[0])
            # (an input sharing storage with another, laid out as a view of a synthetic base that does not require
            # grad, may gain it here: where eager's history then differs, a narrower rule refuses it (a read before,
            # a write, views of it or of a base it views: Note [Grad Mode And Autograd Reads]), and where autograd
            # would rebuild a later view's history from that base, `_call` refuses its assert by name)
            _note_gain_on_view_input(self.record, args[0])
            note_flag_on_a_base(self.record, args[0])  # (in every run: Note [Grad Mode And Autograd Reads])
            if not args[0].requires_grad:
                note_gain_on_a_base(self.record, args[0])
                self.record.requires_grad_gained.add(id(args[0]))
                if self.record.family_of(args[0]) in self.record.grad_self_set_families:
                    self.record.self_set_before_gain.add(id(args[0]))
                if not self.record.changed_before_flag(args[0]):
                    self.record.gained_before_changes.add(id(args[0]))
                if id(args[0]) in self.record.late_grad:  # Note [Leaves Laid Out Anew Under no_grad]
                    self.record.views_before_grad.update(self.record.views_of(args[0]))
                elif self.record.grad_at_start and (flips := self._flips_unread(args[0])) is not None:
                    # (an input over shared storage: its stand-in gains the flag where eager's does; views of the
                    # tensors it flips taken before: Note [Grad Mode And Autograd Reads])
                    for s in flips:
                        self.record.views_before_grad.update(self.record.views_of(s))
                elif self._read_with_grad(args[0]) and self.record.grad_at_start:
                    # (one marked in the graph: Note [Training Without A Function]; in a call under no_grad the
                    # compiled call sets the flag before a graph autograd does not record: Note [Grad Mode And
                    # Autograd Reads])
                    marked = id(args[0]) in self.record.leaf_marked
                    if not marked:
                        self.record.gained_after_read.add(id(args[0]))
                    if not is_traceable_subclass(args[0]) and id(args[0]) in self.record.input_positions:
                        place = len(self.record.new_leaves) - 1 if marked else -1
                        self.record.late_gains[storage_key(args[0])] = (id(args[0]), place)
                elif self._read_with_grad(args[0]):  # (under no_grad: views taken before, with grad, keep no history)
                    self.record.views_before_grad.update(self.record.views_of(args[0]))
        input_off = not turns_on and id(args[0]) in self.record.input_positions and args[0].requires_grad
        if input_off and self.record.shares_input_storage(args[0]):
            raise UnsupportedError(
                f"{input_named(self.record, args[0])}the program turns requires_grad off on an input that shares "
                "storage with another input (requires_grad_(False), `.requires_grad = False`): the run lays the "
                "inputs over that storage out under no_grad, as views of one another, so the others' flags would "
                "follow this one's (or this one's the base's) where eager's keep their own. Pass the tensor once, or "
                "turn requires_grad off outside the compiled function"
            )
        if input_off:
            refuse_flag_off_after_rebuild(self.record, args[0])
        if input_off and args[0]._is_view() and self.record.input_positions[id(args[0])][1].is_leaf:
            raise UnsupportedError(
                f"{input_named(self.record, args[0])}the program turns requires_grad off (requires_grad_(False), "
                "`.requires_grad = False`) on an input that is a leaf requiring grad, which the compiled call runs "
                "as a view (of its whole storage, where the program reaches elements outside the input: a growing "
                "resize_(), as_strided()): a view's flag follows its base's, where eager's leaf drops its own. Turn "
                "requires_grad off outside the compiled function (x.requires_grad_(False) before the call)"
            )

    def _call(
        self,
        func: Any,
        args: tuple[Any, ...],
        call_args: tuple[Any, ...],
        call_kwargs: dict[str, Any],
        name: str,
        layout_op: bool,
    ) -> Any:
        if layout_op:
            self.record.note_inplace_view_read(args[0])  # Note [Views That Raise After A Bump]
        # (views eager's autograd gives no requires_grad: Note [Grad Mode And Autograd Reads])
        call_args, call_kwargs = flagless_views_detached(self.record, func, call_args, call_kwargs)
        # (views eager's autograd gives requires_grad through a gained base, and no history: same Note)
        call_args, call_kwargs = gained_base_views_as_leaves(self.record, func, call_args, call_kwargs)
        check_flagless_view_reads(self.record, name, args, call_args, call_kwargs)  # (a write would raise in the run)
        mark = autograd_sequence_nr()  # (did the call make a node: Note [The Eager Record])
        try:
            with (
                regenerated_history_reads(self.record, name, pytree.tree_leaves((args, call_kwargs))),
                stale_history_failures_refused(self.record, func, call_args, call_kwargs),
            ):
                if is_autograd_read(func):  # Note [Grad Mode And Autograd Reads]
                    out = read(self.record, func, args, lambda: func(*call_args, **call_kwargs))
                elif is_base_read(func):  # Note [Grad Mode And Autograd Reads]
                    out = base_read(self.record, func, args, lambda: func(*call_args, **call_kwargs))
                else:
                    # (a read eager's autograd records nothing of: Note [Grad Mode And Autograd Reads])
                    unrecorded = flagless_view_history_raises(self.record, call_args, call_kwargs)
                    with (
                        resize_as_eager(self.record, name, args),
                        torch.no_grad() if unrecorded else contextlib.nullcontext(),
                    ):
                        out = _call_viewing_normal(self.record, func, call_args, call_kwargs)
                    out = original_of(out, name, args, call_args)
        except RuntimeError as e:
            if layout_op and "A view was created in no_grad mode and is being modified inplace" in str(e):
                if (found := raising_history(self.record, args[0], write=True)) is not None:
                    raise found.error() from None  # (eager's view raises too: Note [Views That Raise After A Bump])
                raise UnsupportedError(
                    f"{input_named(self.record, args[0])}{name}: an in-place view op (t_, transpose_, ...) with grad "
                    "enabled on a view taken under no_grad of a tensor that requires grad: eager changes the view's "
                    "layout (only in-place writes to such a view raise), while the functionalized run records it as "
                    "a write and raises. Take the view with grad enabled, or use the out-of-place view op"
                ) from e
            raise
        self.record.call_built_node = autograd_sequence_nr() != mark
        return out

    def _check_results(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
        bumped: list[RaisingHistory],
        seq_before: int,
    ) -> None:
        """The checks of a call's results that made them (Note [Grad Mode And Autograd Reads]); `bumped`: the inputs
        (and views of them) it read whose history eager refused by then (Note [Views That Raise After A Bump])."""
        check_raising_view_input_reads(self.record, bumped, out, seq_before, pytree.tree_leaves((args, kwargs)))
        check_views_of_gained_bases(self.record, name, args, kwargs, out)
        check_flagless_view_reads(self.record, name, args, args, kwargs, out)
        check_regenerated_view_reads(self.record, name, args, kwargs, out)
        check_regenerated_view_input_reads(self.record, name, args, kwargs, out)

    def _note_call(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
        seq_before: int,
        layout_op: bool,
        view_before: Layout | None,
    ) -> None:
        """What the record keeps of a call the program made, once it ran."""
        # factory results are no detach()
        self.record.forget_factory_detach(out, args, kwargs, getattr(func, "__name__", ""))
        if torch.is_inference_mode_enabled():  # (an in-place op returns a storage made outside: not recorded)
            # (a subclass's inner tensors too: its __torch_dispatch__ makes them, out of this mode's sight)
            taken = {storage_key(a) for a in _dense_leaves((args, kwargs))}
            made = {storage_key(o) for o in _dense_leaves(out)}
            self.record.inference_made.update(made - taken)
            for o in _dense_leaves(out):
                if storage_key(o) in made - taken:
                    self.record.inference_tensors.add(id(o))
                    self.record.pin(o)
        if is_read_with_grad(func, args, kwargs, out):
            for a in pytree.tree_leaves((args, kwargs)):
                if isinstance(a, torch.Tensor):
                    self.record.read_with_grad[id(a)] = self.record.seq
                    self.record.first_read_with_grad.setdefault(id(a), self.record.seq)
                    if not torch.is_inference_mode_enabled():
                        self.record.grad_read_counts.setdefault(id(a), self.record.bump_count(a))
                    regained = id(a) in self.record.requires_grad_dropped and a.requires_grad
                    if regained and func is not torch.Tensor.requires_grad_:  # (the flag's own call reads nothing)
                        self.record.read_after_regain.add(id(a))
                    if not is_traceable_subclass(a) and not is_functorch_wrapped(a):
                        self.record.storages_read_with_grad.add(storage_key(a))
        note_detach(self.record, func, args)  # Note [Grad Mode And Autograd Reads]
        note_parameter_detach(func, out)  # (new_leaves.made_parameter)
        self.record.note_reshape(func, out, seq_before)
        note_wrapper_storage(self.record, func, args, out)  # Note [Autograd Sees The Wrapper]
        note_traced_storage(self.record, func, args, out)  # Note [Storage Swaps By Rebinding]
        # See Note [History Kept Through .data =]
        note_grad_fn_reads(self.record, func, (args, kwargs, out), seq_before)
        note_grad_reads(self.record, args, kwargs, out, seq_before)  # Note [Gradient Accumulators Of Leaves]
        # (set_() comes here as the method, or as an aten overload a subclass's __torch_function__ called)
        if self.record.grad_set_ids and func is not torch.Tensor.set_ and func not in SET_OPS:
            note_reads_after_grad_set(self.record, args, kwargs, out)  # Note [set_ Under Grad]
        if self.record.releafable:  # Note [Leaves Laid Out Anew Under no_grad]
            note_first_read(self.record, args, kwargs)
            if layout_op or (
                func in (torch.Tensor.resize_, torch.Tensor.resize_as_) and torch.is_inference_mode_enabled()
            ):
                note_layout_op(self.record, args[0])
            results = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
            note_reads_after_layout(self.record, args, kwargs, bool(results) and all(o._is_view() for o in results))
        if self.record.view_layouts:  # Note [Stale View Functions]
            if view_before is not None:
                note_view_layout_op(self.record, args[0], view_before, getattr(func, "__name__", ""))
            note_view_reads(self.record, func, args, kwargs, out)
        if self.record.shared_members and torch.is_grad_enabled():
            refresh_shared_histories(self.record, func)

    def _record_assignment(self, target: torch.Tensor, source: torch.Tensor) -> None:
        """`target.data = source`, target a wrapper subclass (Note [Wrapper Storage])."""
        if source.dtype != target.dtype:
            raise UnsupportedError(
                f"`.data =` of a {type(target).__name__} of dtype {target.dtype} with a tensor of dtype "
                f"{source.dtype}: eager's wrapper takes the new dtype, the compiled output is rebuilt as the wrapper "
                "was traced and would keep the old one. Assign a tensor of the same dtype, or use the source itself"
            )
        if any(is_nested_int(d) for d in (*target.shape, *source.shape)):
            raise UnsupportedError(
                f"{input_named(self.record, target)}`.data =` of a {type(target).__name__} with a ragged dim (a nested int size, as a jagged "
                "NestedTensor's): the compiled call cannot give a wrapper such metadata of its own apart from its inner "
                "tensors. Use the assigned tensor itself, or copy_() its values"
            )
        note_data_assignment(self.record, target, tuple(target.shape))
        self.record.seq += 1
        meta = (tuple(source.shape), tuple(source.stride()), source.storage_offset())
        try:
            version = get_version(target)
        except RuntimeError:  # a wrapper that keeps no version counter (made in inference_mode): never written
            version = 0
        assignment = DataAssignment(source, self.record.seq, meta, tuple(target.shape), version)
        self.record.wrapper_data.setdefault(id(target), []).append(assignment)
        # (the wrapper keeps its own version counter: none, if made inside an inference_mode block)
        self.record.note_counter_after_data(target, self.record.eager_inference(source))


_UNIFORM_METHODS = frozenset({torch.Tensor.fill_, torch.Tensor.zero_, torch.fill_, torch.zero_})
_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)


def _recorded_overlapping_write(t: object) -> bool:
    """A write autograd recorded on a tensor whose elements share memory (the backward of which raises in eager);
    inside inference_mode autograd records none, grad mode on or off."""
    if not isinstance(t, torch.Tensor) or not _recording() or not t.requires_grad or t.numel() == 0:
        return False
    return any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride(), strict=True))


class _OverlappingWriteBackward(torch.autograd.Function):
    """In-place identity whose backward raises eager's error for a write into overlapping memory: eager's CopySlices
    copies the gradient of the written view into a tensor of the view's strides, whose repeats it rejects."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        ctx.mark_dirty(t)
        return t

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(_OVERLAP_MESSAGE)


def _raise_in_backward(record: SwapRecord, out: torch.Tensor) -> None:
    """`_OverlappingWriteBackward` on `out`: its mark_dirty is the pipeline's, not a bump of eager's."""
    counted = dict(record.written_families)
    _OverlappingWriteBackward.apply(out)  # type: ignore[no-untyped-call]  # untyped in torch
    record.written_families = counted


_AUTOGRAD_CALLS = frozenset(
    {
        torch.autograd.grad,
        torch.autograd.backward,
        torch.Tensor.backward,
        torch.Tensor.register_hook,
        torch.Tensor.register_post_accumulate_grad_hook,
    }
)


def _recording() -> bool:
    """Does autograd record the op running now (grad mode on, outside inference_mode, where it records nothing)?"""
    return torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


_INFERENCE_VIEW_ERROR = "Cannot set version_counter for inference tensor"


def _flag_already_on(record: SwapRecord, t: torch.Tensor) -> bool:
    """Is requires_grad_() on `t`, the stand-in of an input that came requiring no grad, a no-op in eager? It is where
    the program wrote a value that requires grad into that input itself with grad on (SwapRecord.grad_written): eager's
    input is then no leaf and requires grad, which requires_grad_() leaves as it is. The run's stand-in, which requires
    grad there too, is no input made to require grad from the start (Note [Grad Mode And Autograd Reads]). So too on
    a view with a node of a view input whose base the program made require grad (`flagged_base_view_read`)."""
    if flagged_base_view_read(record, "is_leaf", t) == (False,):
        return True
    found = record.input_positions.get(id(t))
    return found is not None and not found[1].requires_grad and t.requires_grad and id(t) in record.grad_written


def _call_viewing_normal(record: SwapRecord, func: Any, args: Any, kwargs: Any) -> object:
    """Inside inference_mode, eager's view of a normal tensor is a normal tensor sharing its base's version counter,
    with creation meta INFERENCE_MODE; the functionalized run's view op fails to give it one, or makes an inference
    tensor. The view is taken again outside inference mode, under no_grad, and given that creation meta, which makes
    eager's tensor (Note [Grad Mode And Autograd Reads])."""
    base = args[0] if args else None
    normal = (
        torch.is_inference_mode_enabled()
        and isinstance(base, torch.Tensor)
        and _plain_tensor(base)
        and not base.is_inference()
    )
    if not normal:
        return func(*args, **kwargs)
    try:
        out = func(*args, **kwargs)
    except RuntimeError as e:
        if _INFERENCE_VIEW_ERROR not in str(e):
            raise
    else:
        assert isinstance(base, torch.Tensor)
        key = storage_key(base)
        made = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.is_inference()]
        if not any(storage_key(o) == key for o in made):
            return out
    # under no_grad: inside inference_mode autograd records nothing, grad mode on or off (inference_mode(False) alone
    # would turn grad mode on)
    record.retaking_inference_view = True
    try:
        with torch.inference_mode(False), torch.no_grad():
            out = func(*args, **kwargs)
    finally:
        record.retaking_inference_view = False
    for o in pytree.tree_leaves(out):
        if isinstance(o, torch.Tensor):
            mark_inference_mode_view(o)
    return out


@contextlib.contextmanager
def swap_modes(record: SwapRecord, known: list[torch.Tensor]) -> Iterator[None]:
    """Enter both modes (above an active FunctionalTensorMode)."""
    handle = functools.partial(note_storage_resize, record)  # Note [Storage Swaps By Rebinding]
    with (
        _DataMode(record),
        _SwapDispatchMode(record, known),
        storage_resizes_handled(handle, functools.partial(check_resized_nbytes, record)),
        marks_dirty_noted(functools.partial(_note_marked_dirty, record)),
        function_applies_noted(functools.partial(_note_function_apply, record)),
        non_full_backward_hooks_noted(_refuse_non_full_backward_hooks),
        saved_tensors_hooks_noted(_refuse_own_saved_tensors_hooks),
        tensor_sets_noted(functools.partial(_note_tensor_set, record)),
    ):
        yield


def _note_tensor_set(
    record: SwapRecord, target: torch.Tensor, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """Before the program's `target.set_(source)`, which no mode sees before autograd reads the source's history
    (where either requires grad, with grad on): refuse a source whose history eager regenerates over a base that
    requires no grad (Note [Views That Raise After A Bump], histories regenerated over a base without grad). A target
    that is such a view raises in eager and the run alike before that read (an in-place op on a view of a leaf)."""
    if record.dispatching == 0:
        source = args[0] if args else kwargs.get("source")
        check_regenerated_history_applies(record, "set_", (source,))
        # (with grad on, a source that requires grad gives the target a history (set_'s node): eager's target
        # requires grad from then on, and a requires_grad_() on it is a no-op, `_flag_already_on`; not a source
        # that is the stand-in of an input requiring none as passed, nor flagged yet, which may require grad from
        # the start in the run only)
        grad_on = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        early = id(source) in record.input_positions and id(source) not in record.eager_inputs
        early = early and id(source) not in record.requires_grad_set
        with no_torch_function():  # (the pipeline's reads, not the program's)
            if grad_on and isinstance(source, torch.Tensor) and source.requires_grad and not early:
                record.grad_written.add(id(target))


def _note_function_apply(
    record: SwapRecord, cls: type, args: tuple[object, ...], kwargs: dict[str, object]
) -> FunctionApplyNoted:
    """`_apply_noted`, then, for an apply of the program's own, the outputs that are its inputs noted or given back as
    the analysis run had them (Note [Custom Functions]); with grad on, the apply reads each flagless view through a
    detach() of it, as an op does (Note [Grad Mode And Autograd Reads], flagless views), each output that is such a
    detach() given back as the view itself."""
    _refuse_module_backward_hooks(cls)
    after = _apply_noted(record, cls, args, kwargs)
    if record.dispatching > 0 or not is_program_function(cls):
        return args, kwargs, after
    if record.view_layouts or record.nograd_set_layouts:  # Note [Stale View Functions]
        check_relaid_view_applies(record, f"{cls.__name__}.apply", tuple(pytree.tree_leaves((args, kwargs))))
    with no_torch_function():  # (the pipeline's reads, not the program's)
        note_reads(record, cls, args, kwargs)  # (the apply reads its arguments' histories, rebuilt or not)
    returns = function_returns_as_analyzed(record, args, kwargs)
    taken = flagless_views_detached(record, cls.apply, args, kwargs)  # type: ignore[attr-defined]  # a Function's
    given = pytree.tree_leaves(taken)
    swapped = {id(n): o for o, n in zip(pytree.tree_leaves((args, kwargs)), given, strict=True) if n is not o}

    def given_back(o: object) -> object:
        if o is None or not swapped:
            return o
        with no_torch_function():  # (the pipeline's reads, not the program's)
            base = o._base if isinstance(o, torch.Tensor) else None
        view = swapped.get(id(base)) if base is not None else None
        if view is None:
            return swapped.get(id(o), o)
        assert isinstance(o, torch.Tensor)
        if _same_layout(o, view):  # (an output that is an input comes back as its view_as(): eager's, of the view)
            return view.view_as(view)
        with torch.no_grad():  # (a view the forward took, with grad off: eager's is of the view)
            return view.as_strided(o.shape, o.stride(), o.storage_offset())

    def as_read(out: object) -> object:
        out = pytree.tree_map(given_back, out)
        return returns(out if after is None else after(out))

    return *taken, as_read


def _apply_noted(
    record: SwapRecord, cls: type, args: tuple[object, ...], kwargs: dict[str, object]
) -> Callable[[object], object] | None:
    """A custom Function reads its inputs with grad on (Note [Leaves Laid Out Anew Under no_grad]), and where the call
    began under no_grad, its result requires grad as eager's would (Note [Grad Mode And Autograd Reads]); under
    no_grad, what gives its result eager's objects, if anything does."""
    if torch.is_inference_mode_enabled() and torch.is_grad_enabled():
        for a in (*args, *kwargs.values()):  # Note [Stale View Functions]
            if isinstance(a, torch.Tensor):
                rebuild_view_history_outside_inference_mode(a)
    # (inside inference_mode too: autograd records a custom Function wherever grad mode is on)
    if not record.grad_at_start and torch.is_grad_enabled() and reads_grad((args, kwargs)):
        record.grad_reenabled.append(f"{cls.__name__}.apply")
    note_function_grad_reads(record, args, kwargs)  # Note [Gradient Accumulators Of Leaves]
    check_raising_view_input_applies(record, args, kwargs)  # Note [Views That Raise After A Bump]
    # Note [Views That Raise After A Bump], histories regenerated over a base without grad
    check_regenerated_history_applies(record, f"{cls.__name__}.apply", (*args, *kwargs.values()))
    check_gained_base_view_applies(record, f"{cls.__name__}.apply", (*args, *kwargs.values()))
    # (its ops run with grad off inside: the apply is the read with grad; a pipeline Function's stand-in is read by the
    # program's op that follows, which names it)
    if record.escaping_strided and is_program_function(cls):
        check_escaping_reads(record, f"{cls.__name__}.apply", tuple(pytree.tree_leaves((args, kwargs))))
    if torch.is_grad_enabled():  # (a read with grad, as a torch function's: its ops run with grad off inside)
        for a in pytree.tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor):
                record.read_with_grad[id(a)] = record.seq
                record.first_read_with_grad.setdefault(id(a), record.seq)
                record.grad_read_counts.setdefault(id(a), record.bump_count(a))
                if id(a) in record.requires_grad_dropped and a.requires_grad:
                    record.read_after_regain.add(id(a))
                if not is_traceable_subclass(a) and not is_functorch_wrapped(a):
                    record.storages_read_with_grad.add(storage_key(a))
    if not torch.is_grad_enabled():
        return function_outputs_as_eager(record, cls, args, kwargs)  # Note [Grad Mode And Autograd Reads]
    # (its ops run with grad off inside: the apply is the use with grad of a tensor resize_() grew hidden from
    # autograd, and its outputs that require grad carry it, as an op's do: Note [Storage Swaps By Rebinding])
    use = hidden_grow_use(record, f"{cls.__name__}.apply", (*args, *kwargs.values())) if record.hidden_grows else None
    carry = None if use is None else functools.partial(_carry_hidden_grow_use, record, use)
    if not record.releafable:
        return carry
    with no_torch_function():  # (the pipeline's reads, not the program's: a run under no_grad makes none)
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.Tensor) and a.requires_grad and id(a) not in record.data_sets:
                record.grad_read.add(id(a))
    note_first_read(record, args, kwargs)
    note_reads_after_layout(record, args, kwargs, False)
    return carry


def _carry_hidden_grow_use(record: SwapRecord, use: str, out: object) -> object:
    """The outputs of an apply that used a grown tensor with grad, marked as carrying that use (`_apply_noted`)."""
    for o in pytree.tree_leaves(out):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            record.grad_through_hidden_grow[id(o)] = use
    return out


def _note_marked_dirty(record: SwapRecord, cls: type, tensors: tuple[torch.Tensor, ...], recorded: bool) -> None:
    """A mark that rebases history (`recorded`) makes the Function's write (run with grad off) one autograd records,
    as a write with grad is (Note [Custom Functions]), except on a detach() or `.data` alias, whose own history alone
    takes it; any other mark changes nothing autograd sees."""
    record.pin(tensors)  # Note [Storage Swaps By Rebinding]
    for t in tensors:
        record.note_marked_dirty(t, recorded)
    if not recorded:
        return
    record.marked_dirty.update((id(t), cls) for t in tensors)
    if torch.is_inference_mode_enabled() and any(t._is_view() for t in tensors):
        record.dirty_view_in_inference = cls
    for t in tensors:
        if id(t) in record.hidden:  # a detach() or `.data` alias: its own history only (Note [Custom Functions])
            note_write_after_grad_set(record, t)  # (on that history: Note [set_ Under Grad])
            continue
        if is_traceable_subclass(t):
            record.note_visible_write(t, True)
        leaves = flatten_subclass(t, "marked dirty")[1] if is_traceable_subclass(t) else [t]
        for leaf in leaves:  # (a subclass: the writes of its inner tensors, as its ops make them under grad)
            record.note_visible_write(leaf, True)
            record.dirty_storages.add(storage_key(leaf))
        note_write_after_grad_set(record, t)  # Note [set_ Under Grad]


def _unrecorded_empty_write(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Note [In-Place Ops As Eager Runs Them]: an in-place op that writes only args[0], which has no element (its size
    known), where autograd records nothing: eager changes no value and moves only the version counter, as a copy to
    the same data does. Traced so, no value is rebuilt, and the views of it keep eager's strides (an empty expand's
    zero strides, which a functionalized write would lose)."""
    if not args or not isinstance(args[0], torch.Tensor) or not writes_self(func):
        return False
    if sum(a.is_write for a in func._schema.arguments) != 1:
        return False
    sizes = list(args[0].shape)
    if not all(type(n) is int for n in sizes) or 0 not in sizes:
        return False
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def _check_new_leaf(t: torch.Tensor) -> None:
    """A new autograd leaf the compiled graph cannot mark (Note [Training Without A Function]): refused."""
    if is_traceable_subclass(t):
        raise subclass_new_leaf_refusal(type(t).__name__)


def _note_gain_on_view_input(record: SwapRecord, t: torch.Tensor) -> None:
    """requires_grad_() on an input that is a view of a tensor requiring no grad: noted with when, to tell the views
    of it that eager's autograd gives no requires_grad (grad_scope.check_flagless_view_reads). The first call counts,
    whether or not the run's stand-in requires grad from the start (the joint trace's, for an input the program makes
    require grad: noted at the start as one that came requiring grad, -1, by functional_run, until this call)."""
    position = record.input_positions.get(id(t))
    if position is None:
        return
    real = position[1]
    if not real._is_view() or real._base is None or real._base.requires_grad:
        return
    if not real.requires_grad and record.view_input_gains.get(id(t)) == -1:
        record.view_input_gains[id(t)] = record.seq  # (views taken with grad before it are eager's without a flag)
    record.view_input_gains.setdefault(id(t), record.seq)


def _gradient_business(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str, owner: object
) -> None:
    """Refuse reading or assigning `.grad`, and autograd calls (backward, grad, hooks) inside the program; note its
    retain_grad() calls (`check_retained_outputs`)."""
    note_retain_grad(record, func, args)
    if owner == "grad" and args and isinstance(args[0], torch.Tensor):
        raise UnsupportedError(
            f"the program {'reads' if name == '__get__' else 'assigns'} a tensor's .grad inside the compiled "
            "function (an optimizer update, zero_grad(), gradient clipping): the compiled graph holds no "
            "gradients, so it would read None or lose the assignment. Do it outside the compiled function, "
            "after the backward, or pass the gradients in as arguments"
        )
    if func in _AUTOGRAD_CALLS and not differentiates_inside_transform(func, args, kwargs):
        raise UnsupportedError(
            f"the program calls {name or func}() inside the compiled function; subclassaot.compile does not "
            "differentiate or hook gradients inside the program. Call it on the compiled function's outputs "
            f"instead. {TRAINING_STEP_HINT}"
        )


def _refuse_module_backward_hooks(cls: type) -> None:
    """Refuse a module call that wires full backward hooks or backward pre-hooks into autograd (the module's own,
    `register_full_backward_hook` / `register_full_backward_pre_hook`, or the global `register_module_full_backward_*`
    ones): eager runs them in the middle of the backward, when the module's gradients are computed, and lets them
    replace those gradients; the compiled backward is one graph that stops nowhere in between, so they would be lost."""
    module = module_with_backward_hooks_applying(cls)
    if module is not None:
        raise _backward_hooks_refusal(
            module,
            "full backward hooks or backward pre-hooks (register_full_backward_hook, register_full_backward_pre_hook, "
            "or the global torch.nn.modules.module.register_module_full_backward_hook / _pre_hook)",
        )


def _refuse_non_full_backward_hooks(module: torch.nn.Module) -> None:
    """Refuse a module call that registers the module's non-full backward hooks (`register_backward_hook`, or the
    global `register_module_backward_hook`) on its output's grad_fn, for the same reason."""
    raise _backward_hooks_refusal(
        module,
        "non-full backward hooks (register_backward_hook, or the global "
        "torch.nn.modules.module.register_module_backward_hook), which eager registers on the grad_fn of its output",
    )


def _refuse_own_saved_tensors_hooks(hooks: torch.autograd.graph.saved_tensors_hooks) -> None:
    """Refuse saved-tensor hooks that the program enters itself, but for torch's own (save_on_cpu, checkpoint's): eager
    calls the pack hook at every save of every call and the unpack hook in its backward; the compiled call runs neither
    (its graph holds what the trace's calls computed), so their effects (offloading, counting, a changed value) would
    be lost. Hooks set around the compiled call are autograd's, and see the compiled call's saves."""
    owner = str(getattr(hooks.pack_hook, "__module__", None) or type(hooks).__module__)
    if owner.startswith(("torch.", "subclassaot.")):
        return
    raise UnsupportedError(
        f"the program enters torch.autograd.graph.saved_tensors_hooks({getattr(hooks.pack_hook, '__qualname__', '?')}, "
        "...) inside the compiled function: eager calls those hooks at every tensor autograd saves and at every "
        "unpack in the backward; the compiled call runs its graph and calls neither, so their effect would be lost. "
        "Enter the hooks around the compiled call instead (with saved_tensors_hooks(pack, unpack): out = compiled(x)), "
        'or compile with torch.compile(fn, backend="subclassaot"), whose Dynamo runs them as eager does'
    )


def _backward_hooks_refusal(module: torch.nn.Module, hooks: str) -> UnsupportedError:
    return UnsupportedError(
        f"a module of class {type(module).__qualname__}, called inside the compiled program, has {hooks}; eager runs "
        "them in the middle of the backward, where they may replace the module's gradients, and the compiled backward "
        "(one graph) does not stop there, so their effect would be lost. Remove the hooks while compiling with "
        "subclassaot.compile, hook the compiled call's own inputs or outputs instead (x.register_hook(...) outside the "
        'compiled function), or compile with torch.compile(module, backend="subclassaot"), whose Dynamo runs module '
        "backward hooks as eager does"
    )


def _subclass_operand(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The first traceable subclass among an op's positional operands, then its keyword ones (an out= tensor: the
    subclass's op however plain its inputs, else its inner writes went unseen); for a custom op that writes (not
    aten's: cat and the foreach ops keep their handling), one inside a tensor list too (its `Tensor(a!)[]` of
    TwoTensors: handled as a subclass's op, its inner writes are seen, as with a tensor argument); None if none."""
    schema = getattr(func, "_schema", None)
    custom_write = getattr(func, "namespace", "aten") != "aten" and schema is not None and schema.is_mutable
    operands = (*args, *kwargs.values())
    listed = (t for a in operands for t in (a if custom_write and isinstance(a, list | tuple) else (a,)))
    return next((a for a in listed if is_traceable_subclass(a) and not is_functional(a)), None)


def _schema_operands(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(argument schema, operand) pairs of a call, a tensor list (a custom op's written `Tensor(a!)[]`) giving one
    pair per tensor in it: each of them is written, as a tensor argument is."""
    pairs: list[tuple[Any, Any]] = []
    for i, arg_schema in enumerate(schema.arguments):
        arg = args[i] if i < len(args) else kwargs.get(arg_schema.name)
        items = arg if isinstance(arg, list | tuple) and all(isinstance(a, torch.Tensor) for a in arg) else (arg,)
        pairs += [(arg_schema, a) for a in items]
    return pairs


def _copied_at_top(depth: int, src: torch.Tensor, out: torch.Tensor) -> bool:
    """A plain result of an op declared aliasing, called by the program (not inside a subclass's dispatch, where
    `_copied_below_autograd` names such copies), on another storage than its source: eager's is no view."""
    plain = not (is_traceable_subclass(src) or is_traceable_subclass(out))
    strided = src.layout is torch.strided and out.layout is torch.strided
    return depth == 0 and plain and strided and storage_key(out) != storage_key(src)
