"""What the storage-swap modes record about one functional run (Note [Storage Swaps By Rebinding]).

Input: nothing (filled in by storage_swaps.py's modes while the program runs). Output: `SwapRecord` and its records
of views, in-place view ops and `.data =` assignments, and `Elements`, the storage elements a strided tensor covers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.eager.record import EagerAsk
from subclassaot.pipeline.rules.new_leaves import NewLeafHold
from subclassaot.runtime.steps import build_order, use_only_tokens
from subclassaot.schemas import DenseIndex, GradSetNode, OutputInfo, OutputKind, Replay, ReplaySource
from subclassaot.torch_internals import (
    DataDependentError,
    get_version,
    set_version,
    storage_key,
    tensors_in,
    untyped_storage_key,
)

# The SwapRecord facts a requires_grad_() gain changes (SwapRecord.open_gain)
_GAIN_FACTS = (
    "requires_grad_set",
    "requires_grad_gained",
    "gained_after_read",
    "view_input_gains",
    "views_before_grad",
    "views_of_gained_bases",
    "new_leaf_ids",
    "new_leaf_seq",
    "leaf_marked",
)


def _shallow_copy(value: object) -> object:
    return type(value)(value) if isinstance(value, (set, dict)) else value


# set_() overloads: each replaces a tensor's storage and metadata
SET_OPS = frozenset(
    {
        torch.ops.aten.set_.source_Tensor,
        torch.ops.aten.set_.source_Storage,
        torch.ops.aten.set_.source_Storage_storage_offset,
        torch.ops.aten.set_.source_Tensor_storage_offset,
    }
)


# size, stride, offset, as the tensor gives them (symbolic entries stay SymInts)
RawMeta = tuple[tuple[int | torch.SymInt, ...], tuple[int | torch.SymInt, ...], int | torch.SymInt]


def tensor_meta(t: torch.Tensor) -> RawMeta:
    return tuple(t.size()), tuple(t.stride()), t.storage_offset()


def source_leaf_metas(t: torch.Tensor) -> tuple[RawMeta, ...] | None:
    """ViewRecord.source_leaves: a subclass's dense leaves' metadata (None for a plain tensor)."""
    return tuple(tensor_meta(d) for d in flatten_subclass(t, "")[1]) if is_traceable_subclass(t) else None


@dataclass(frozen=True, slots=True)
class ViewRecord:
    func: Any  # the view OpOverload
    source: torch.Tensor  # its first argument
    args: tuple[Any, ...]  # the remaining arguments
    kwargs: dict[str, Any]
    index: int | None  # position in a multi-output view's result
    grad_enabled: bool
    source_meta: tuple[tuple[Any, ...], tuple[Any, ...], Any]  # the source's size, stride, offset at the time
    seq: int  # when it happened, among view and in-place view ops
    # a subclass source's dense leaves' size, stride, offset at the time (Note [Wrapper Storage])
    source_leaves: tuple[RawMeta, ...] | None = None
    # made inside a subclass's __torch_dispatch__, below autograd: eager gives it no `._base` (Note [Autograd Sees The
    # Wrapper])
    below_autograd: bool = False
    # taken inside a torch.inference_mode() block of a normal tensor: eager's has creation meta INFERENCE_MODE
    inference_mode: bool = False
    # the source required grad when the view was taken (it may stop since: `.requires_grad = False`, detach_())
    source_requires_grad: bool = False
    # the source was an inference tensor when the view was taken (a `.data =` may make it a normal one since)
    source_inference: bool = False
    # the source was (a view of) an input whose base, another input, the program had made require grad by then: eager's
    # source requires grad through that base, where the run's stand-in does not (Note [Grad Mode And Autograd Reads])
    source_base_gained: bool = False
    # a view() made by reshape() (reshape_as, flatten): eager's, of a plain tensor, is a _reshape_alias where the
    # source is not contiguous (ReshapeAliasBackward0, named in autograd's errors); replayed by reshape() so
    reshape: bool = False
    # the times eager had advanced the source's version counter in the program when the view was taken (`bump_count`):
    # a view whose history raises once that counter moves raises only at bumps after it (Note [Views That Raise
    # After A Bump])
    bumps: int = 0


@dataclass(frozen=True, slots=True)
class InplaceViewRecord:
    """An in-place view op (t_, unsqueeze_, transpose_, ...) applied to a tensor after it was made."""

    func: Any
    args: tuple[Any, ...]  # the arguments after the tensor itself
    kwargs: dict[str, Any]
    grad_enabled: bool
    seq: int


@dataclass(frozen=True, slots=True)
class DataAssignment:
    """`w.data = source` on a wrapper subclass `w` (Note [Wrapper Storage])."""

    source: torch.Tensor
    seq: int  # when it happened, among view and in-place view ops
    meta: tuple[tuple[Any, ...], tuple[Any, ...], Any]  # the source's size, stride, offset: w's own from then on
    size_before: tuple[Any, ...]  # w's size before it
    version: int = 0  # w's version counter just after it (a later write moves it: Note [Stale View Functions])


@dataclass(slots=True)
class SwapRecord:
    swapped_by_data: set[int] = field(default_factory=set)  # id() of tensors whose last swap was `.data =`
    # id() of tensors eager gives a version counter though they are inference tensors (a detach() of one after the
    # block), and of normal tensors eager gives none (`.data =` onto a tensor made inside the block): OutputInfo
    counted_inference: set[int] = field(default_factory=set)
    counterless: set[int] = field(default_factory=set)
    data_inference: dict[int, bool] = field(default_factory=dict)  # ... is eager's an inference tensor after it
    # id() of a fresh intermediate `.data =` gave another dtype -> eager's dtype (the run's tensor keeps its own)
    retyped: dict[int, torch.dtype] = field(default_factory=dict)
    swapped_ids: set[int] = field(default_factory=set)  # id() of tensors set_() or `.data =` was called on
    first_swaps: dict[int, int] = field(default_factory=dict)  # ... -> `seq` at the first of those calls
    grown_ids: set[int] = field(default_factory=set)  # id() of tensors resize_() grew beyond their storage
    # ... of those, the ones a resize_() of their own grew (the rest were over the storage another tensor's grew) ->
    # `seq` at its last growth, a layout change as an in-place view op's (Note [Stale View Functions])
    self_grown_ids: dict[int, int] = field(default_factory=dict)
    # id() of tensors over an intermediate's storage that a resize_() growth rebuilt with the trace's strides where a
    # kernel chose them (a dim of size 0 or 1): Note [Strides The Kernels Choose]
    kernel_relaid: set[int] = field(default_factory=set)
    # id() of functional results whose strides a kernel chose from inputs not laid out canonically (note_kernel_layout)
    kernel_chosen: set[int] = field(default_factory=set)
    # ... of those, leaves and views that require grad, grown with grad off (inside inference_mode): id() -> the
    # tensor (Note [Storage Swaps By Rebinding])
    hidden_grows: dict[int, torch.Tensor] = field(default_factory=dict)
    # ... the refusal a use with grad of one (or of a view of it) would earn, held until the program's call that made
    # it ends; then, by id(), the results of such calls that require grad, and of later calls with grad reading them,
    # and the storage keys such calls wrote: refused only where they reach an output or an input (Note [Storage Swaps
    # By Rebinding])
    hidden_grow_use: str | None = None
    grad_through_hidden_grow: dict[int, str] = field(default_factory=dict)
    storages_through_hidden_grow: dict[object, str] = field(default_factory=dict)
    # storage key a resize_() growth made -> the key of the storage it grew (eager's same storage, grown in place)
    grown_from: dict[object, object] = field(default_factory=dict)
    # id() of tensors set_() with grad on while they or the source required grad (autograd recorded a set_ node)
    grad_set_ids: set[int] = field(default_factory=set)
    # ... -> `bump_count` of the tensor set_() just before its last such set_() advanced it (a view taken after it has
    # ViewRecord.bumps above this)
    grad_set_bumps: dict[int, int] = field(default_factory=dict)
    # ... of those, the bases a set_() of their view rebased (Note [set_ Under Grad])
    view_set_bases: set[int] = field(default_factory=set)
    # ... of those, by id() (of the tensor set_() or the base of the view set_()), the node eager's history ends on,
    # updated op by op in program order (Note [Epilogue Nodes In Eager's Order])
    grad_set_nodes: dict[int, GradSetNode] = field(default_factory=dict)
    view_set_gained: set[int] = field(default_factory=set)  # ... of those, the ones that did not require grad before
    view_set_sources: set[int] = field(default_factory=set)  # ... the view roots of the tensors they were set_() to
    # ... the sequence numbers of the set_ nodes of those views (the base's CopySlices, numbered right after the
    # set_()'s mark), a view of an input or of an intermediate alike (Note [set_ Under Grad])
    view_set_seqs: set[int] = field(default_factory=set)
    # ... of those, the ones set_() as themselves, not through a view taken with grad on, by id() (Note [set_ Under
    # Grad])
    plain_grad_sets: dict[int, torch.Tensor] = field(default_factory=dict)
    requires_grad_set: set[int] = field(default_factory=set)  # id() of tensors the program called requires_grad_() on
    requires_grad_dropped: set[int] = field(default_factory=set)  # ... and those it turned requires_grad off on
    dropped_at: dict[int, int] = field(default_factory=dict)  # ... -> `seq` when it first did
    # ... of those, the ones an op with grad read after the flag came back on: eager's results of such a read have
    # history to the input, the run's to its stand-in made a leaf of its own (Note [Grad Mode And Autograd Reads])
    read_after_regain: set[int] = field(default_factory=set)
    # id() of input stand-ins whose real input is a view of another input the program made require grad (Note [Grad
    # Mode And Autograd Reads])
    views_of_gained_bases: set[int] = field(default_factory=set)
    # the results (and written tensors) of ops with grad that read such a view where eager's history differs from the
    # run's, each with its refusal: raised once the program reads a tensor over its storage again, or returns or leaves
    # one where the caller sees it (grad_scope.check_views_of_gained_bases)
    unseen_histories: list[tuple[torch.Tensor, Exception]] = field(default_factory=list)
    # ... the same in every run, the stand-in's flag before the call aside (one that requires grad from the start),
    # each with the `seq` of that flag (views taken with grad after it have a node in eager)
    views_of_flagged_bases: dict[int, int] = field(default_factory=dict)
    # ... of those, the ones that did not require grad
    requires_grad_gained: set[int] = field(default_factory=set)
    # ... of those, the ones whose flag came before any op of the program changed their storage (relaid a tensor over
    # it, set_() one onto it or off it, resized it, assigned a `.data` over it, or wrote it where autograd may record
    # the write): the run that requires grad from the start is eager's after the flag (Note [Inputs Written In
    # Training]); and the storage_key() of each storage such an op changed so far (`note_ordered_change`)
    gained_before_changes: set[int] = field(default_factory=set)
    # id() of the stand-ins made to require grad after an x.set_(x) with grad of their version-counter family, which
    # eager records no node of (functional_run.own_leaf_inputs)
    self_set_before_gain: set[int] = field(default_factory=set)
    ordered_changes: set[object] = field(default_factory=set)
    # ... of those, the ones a torch function read with grad mode on before (it made a tensor of them that eager's
    # autograd did not record), and the id() of every tensor such a read took
    gained_after_read: set[int] = field(default_factory=set)
    # ... of those, the ones whose real input is a view of a tensor that requires no grad -> `seq` at the flag: eager's
    # views of it taken before the flag, or under no_grad, require no grad (Note [Grad Mode And Autograd Reads])
    view_input_gains: dict[int, int] = field(default_factory=dict)
    # ... the views of those taken with grad whose history eager regenerated from that base (read with grad once
    # stale), and the views taken with grad of them: no gradient reaches the input through them (Note [Views That Raise
    # After A Bump])
    regenerated_from_base: set[int] = field(default_factory=set)
    # per requires_grad_() / `.requires_grad = True` call, in call order: whether eager makes a new autograd leaf
    # there (a tensor that is no input and requires no grad, in a run begun with grad on); the analysis run's answers
    # given back to the trace's run, which marks those leaves in its graph, and how many it took (Note [Training
    # Without A Function])
    new_leaves: list[bool] = field(default_factory=list)
    # id() of the tensors made new leaves (the analysis run's): a view made under no_grad of a tensor that requires
    # grad reports requires_grad from its base, so requires_grad_gained leaves it out
    new_leaf_ids: set[int] = field(default_factory=set)
    # ... -> `seq` at the call (a chain's view taken after it ends its history in the leaf: ViewStep.makes_leaf)
    new_leaf_seq: dict[int, int] = field(default_factory=dict)
    # id() of the tensors the program called retain_grad() on (pinned): eager's keep in .grad, after a backward, the
    # gradient that reached them from every use, inside the program too (`check_retained_outputs`)
    retained: set[int] = field(default_factory=set)
    # id() of the tensors no input that the program gave a flag of their own (requires_grad_()) where they would
    # read it from their base (a view taken under no_grad, whether or not its base requires grad), not turned off
    # since: eager's may read another base's, one that requires none (an input's own base, where the run lays the
    # input out anew), and its flag is then this one's (Note [Grad Mode And Autograd Reads])
    own_flags: set[int] = field(default_factory=set)
    replayed_new_leaves: tuple[bool, ...] | None = None
    # places in new_leaves of the leaves that are views with the creation meta the program's view ops gave them under
    # no_grad (`made_under_no_grad`, read by the analysis run, whose grad mode is the program's), and the trace's run's
    # copy of the analysis run's, whose graph's node gives its leaf that creation meta (Note [Training Without A
    # Function])
    no_grad_leaf_views: set[int] = field(default_factory=set)
    inference_new_leaves: set[int] = field(default_factory=set)  # (Analysis.inference_new_leaves)
    replayed_no_grad_leaf_views: frozenset[int] = frozenset()
    # ... and of the leaves that are views of an input (eager's `._base`) requiring no grad when made the leaf: the
    # node takes its leaf over the caller's input itself, whose flag the program turns on (Note [Training Without A
    # Function])
    input_base_leaf_views: set[int] = field(default_factory=set)
    replayed_input_base_leaf_views: frozenset[int] = frozenset()
    # the program's calls (`calls` after each) that ran with grad off and returned fresh plain tensors, eager's
    # without history; and the trace's run's copy of the analysis run's, whose graph detaches those results
    # (new_leaves.note_no_history_results)
    no_history_calls: list[int] = field(default_factory=list)
    replayed_no_history_calls: frozenset[int] = frozenset()
    new_leaf_cursor: int = 0
    # the compile's choice of the calls making new leaves it holds back; while undecided, this run holds back each
    # and notes it, counting the calls turning a flag on (`flag_calls`) as the held-back runs do (Note [Training
    # Without A Function])
    hold: NewLeafHold | None = None
    flag_calls: int = 0
    # id() of the inputs among those new leaves (plain inputs read with grad before the call; Note [Training Without
    # A Function])
    leaf_marked: set[int] = field(default_factory=set)
    # storage_key() of each plain input the program made require grad after an op with grad read its storage (one of
    # gained_after_read or leaf_marked) -> (the stand-in's id(), its call's place in new_leaves, or -1); and the id()s
    # of those whose storage a torch function took after that call: the others gain the flag last (Note [Grad Mode
    # And Autograd Reads])
    late_gains: dict[object, tuple[int, int]] = field(default_factory=dict)
    touched_after_gain: set[int] = field(default_factory=set)
    # ... and the id()s of those whose storage only a torch function with grad on read after that call (no write):
    # they gain the flag last where eager's histories show no such read (analyze's `_settle_last_gains`)
    read_after_gain: set[int] = field(default_factory=set)
    gains_last: set[int] = field(default_factory=set)  # ... the untouched ones (analyze's `_settle_last_gains`)
    # storage_key() of the tensors torch functions returned with inference mode on: eager's are inference tensors,
    # whose views (taken there or later) keep no view relation
    inference_made: set[object] = field(default_factory=set)
    # id() of the tensors made there over such a storage, and of the plain views of those (taken inside the block or
    # after it: the run's are none after it) (pinned): eager's stay inference tensors on any storage
    inference_tensors: set[int] = field(default_factory=set)
    # the program wrote such a view in place outside the block, which eager rejects: its run raised eager's error
    inference_write_raised: bool = False
    # a view of a normal tensor, taken inside inference_mode, is being taken again outside it (under no_grad): its
    # ViewRecords say `inference_mode` (storage_swaps._call_viewing_normal)
    retaking_inference_view: bool = False
    # id() of the tensors a custom autograd.Function marked dirty, where its apply recorded a node -> its class; the
    # storage keys of those tensors (Note [Custom Functions])
    marked_dirty: dict[int, type] = field(default_factory=dict)
    dirty_marks: set[int] = field(default_factory=set)  # id() of every tensor a Function marked dirty, recorded or not
    dirty_storages: set[object] = field(default_factory=set)
    # the class of a Function whose recorded apply marked a view dirty inside an inference_mode block, if any
    # (Note [Custom Functions]: functionalization cannot rebase the view's base there)
    dirty_view_in_inference: type | None = None
    # id() of the tensors an op with grad read -> `seq` at the last such read (Note [Stale View Functions])
    read_with_grad: dict[int, int] = field(default_factory=dict)
    # ... -> `seq` at the first such read
    first_read_with_grad: dict[int, int] = field(default_factory=dict)
    # ... -> eager's count of bumps of its counter then, outside inference_mode (autograd_state.rebuilt_before_read)
    grad_read_counts: dict[int, int] = field(default_factory=dict)
    # ... the storages of the plain ones: a requires_grad_() after a read of another tensor over the storage (a view
    # the caller passed too) leaves eager's earlier results without history (Note [Grad Mode And Autograd Reads])
    storages_read_with_grad: set[object] = field(default_factory=set)
    # torch functions the program called with requires_grad=True (Note [Grad Mode And Autograd Reads])
    grad_factories: list[str] = field(default_factory=list)
    # answers of the program's reads of is_leaf / requires_grad / grad_fn, in call order; the analysis run's answers
    # given back to the trace's run, and how many it took (Note [Grad Mode And Autograd Reads])
    autograd_reads: list[object] = field(default_factory=list)
    replayed_reads: tuple[object, ...] | None = None
    replay_cursor: int = 0
    # per custom Function apply of the program, in call order: per output, the position among the apply's tensor
    # arguments of the one it is (the very object), else -1; the analysis run's given back to the inference trace's
    # run, and how many it took (Note [Custom Functions])
    function_returns: list[tuple[int, ...]] = field(default_factory=list)
    # ... and, in the analysis run, the tensors its node saved for backward (Analysis.function_taken)
    function_saves: list[tuple[torch.Tensor, ...]] = field(default_factory=list)
    replayed_function_returns: tuple[tuple[int, ...], ...] | None = None
    function_cursor: int = 0
    # how many ops the swap mode is handling now, one per level of subclass __torch_dispatch__ it runs inside (1: the
    # program's own op). Reads made while > 0 (the mode's rules, a subclass's dispatch) are answered but neither
    # recorded nor replayed (Note [Grad Mode And Autograd Reads])
    dispatching: int = 0
    # id() of inputs (as the run passes them) that require grad in eager -> the real input (Note [Grad Mode And
    # Autograd Reads])
    eager_inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    # id() of every tensor input (as the run passes it) -> (its tensor position, the real input); the run's inputs by
    # position; the program's `._base` / `._is_view()` reads of inputs: (position, position of the input that is its
    # base; None: it is no view; -1: a view of a tensor not passed) (Note [Grad Mode And Autograd Reads])
    input_positions: dict[int, tuple[int, torch.Tensor]] = field(default_factory=dict)
    run_inputs: list[torch.Tensor] = field(default_factory=list)
    run_input_paths: list[str] = field(default_factory=list)  # ... their paths, by position
    base_reads: list[tuple[int, int | None]] = field(default_factory=list)
    # tensor positions of the inputs whose autograd creation meta a decision of the run read off the real input
    # (Note [What The Guards Compare])
    creation_meta_reads: list[int] = field(default_factory=list)
    # tensor positions of the inputs, no leaves, requiring grad, whose grad_fn the program read: the answer is the real
    # input's node (Note [What The Guards Compare]); id() of those inputs' stand-ins -> the node each came with
    grad_fn_type_reads: list[int] = field(default_factory=list)
    entry_nodes: dict[int, object] = field(default_factory=dict)
    # tensor positions of the view inputs requiring grad, no leaves, that an op with grad read stale: whether their
    # `._base` requires grad decides whether autograd's regenerated history reaches a gradient (Note [Views That Raise
    # After A Bump])
    base_flag_reads: list[int] = field(default_factory=list)
    # id() of view input stand-ins -> the `seq` of each op with grad at which eager rebuilt the input's history from its
    # `._base` (its first read after a write moved its counter), in order (Note [Views That Raise After A Bump])
    base_rebuilds: dict[int, list[int]] = field(default_factory=dict)
    # id() of views whose history eager's read rebuilt from their base (view inputs, plain views the program took) ->
    # (the counter's last bump, that node): what later reads find until the counter moves again (Note [Views That
    # Raise After A Bump])
    regenerated_nodes: dict[int, tuple[int, object]] = field(default_factory=dict)
    # eager's views of view inputs whose `._base`, another input, the program made require grad (views_of_flagged_bases),
    # in tensors of their own, by id() of the run's: their nodes link as eager's (autograd_state._flagged_base_view_mimic)
    flagged_view_mimics: dict[int, torch.Tensor] = field(default_factory=dict)
    # tensor positions of the view inputs read with grad through a throwaway leaf, their base made to require grad by
    # the program: eager's has no history only where no write moved its counter since it was taken (Note [Grad Mode
    # And Autograd Reads], views of gained bases)
    unbumped_view_reads: list[int] = field(default_factory=list)
    # storages untyped_storage() gave for tensor subclass wrappers -> the subclass's name (Note [Autograd Sees The
    # Wrapper])
    wrapper_storages: dict[object, str] = field(default_factory=dict)
    # storages untyped_storage() gave for the run's tensors -> the paths of the inputs over them (empty: a tensor made
    # inside the program) (Note [Storage Swaps By Rebinding])
    traced_storages: dict[object, tuple[str, ...]] = field(default_factory=dict)
    # the byte counts the program resized each input's storage to (untyped_storage().resize_(n)), in order, by storage
    # key; the storages whose bytes are freed or re-allocated and not yet written whole -> (the paths of the inputs over
    # them (empty: made inside the program), the storage elements a write must cover); an intermediate's storage the
    # program freed -> its byte count before (Note [Storage Swaps By Rebinding])
    storage_resizes: dict[object, list[object]] = field(default_factory=dict)
    regrown_storages: set[object] = field(default_factory=set)  # ... of those, grown by a tensor's resize_() after
    unwritten_storages: dict[object, tuple[tuple[str, ...], Elements | None]] = field(default_factory=dict)
    freed_intermediates: dict[object, object] = field(default_factory=dict)
    freed_storages: set[object] = field(default_factory=set)  # ... of those, the ones that have no bytes now
    # grad mode when the run began; torch functions that ran with grad mode turned back on inside a run begun
    # without it, on tensors that require grad (Note [Grad Mode And Autograd Reads])
    grad_at_start: bool = field(default_factory=torch.is_grad_enabled)
    grad_reenabled: list[str] = field(default_factory=list)
    hidden: set[int] = field(default_factory=set)  # id() of `.data` aliases and views of them
    # a resize_() runs now below autograd, eager's tensor requiring no grad: eager's autograd records nothing of it,
    # so the write is no visible one (Note [resize_ And requires_grad])
    resizing_unrecorded: bool = False
    # id() of autograd views set_() with grad on (and views of them): Note [Stale View Functions]
    set_views: set[int] = field(default_factory=set)
    # id() of as_strided views taken from a synthetic base (and views of them): Note [as_strided On Inputs]
    base_strided_views: set[int] = field(default_factory=set)
    # id() of unfolds functionalization writes back through unfold_backward though their windows do not tile (and
    # views of them): torch_internals.py, Unfold as the as_strided view it is
    untiled_unfolds: set[int] = field(default_factory=set)
    # id() of such a view taken with grad that reaches elements outside the input's own -> (the storage key, its
    # last version bump then, the view): Note [as_strided On Inputs]
    escaping_strided: dict[int, tuple[object, int, torch.Tensor]] = field(default_factory=dict)
    data_aliases: set[int] = field(default_factory=set)  # id() of the `.data` aliases themselves
    data_views: set[int] = field(default_factory=set)  # id() of views of them
    data_of: dict[int, torch.Tensor] = field(default_factory=dict)  # id() of a `.data` alias -> the tensor it is of
    visible_writes: set[object] = field(default_factory=set)  # storage keys written through autograd-visible tensors
    # every object whose id() a field of this record may name, by id(): Note [Storage Swaps By Rebinding]
    pinned: dict[int, object] = field(default_factory=dict)
    family: dict[int, int] = field(default_factory=dict)  # id() of a tensor -> id() of its version-counter root
    # roots whose version counter eager would bump -> how many times (runtime/steps.py: Version Counters As Eager's)
    written_families: dict[int, int] = field(default_factory=dict)
    # roots -> their count in `written_families` right after the last bump made by an op that may record a node (with
    # grad on, outside inference_mode): eager's grad_fn of a view on that counter was made there, or at its next read
    # where bumps followed (runtime/steps.py: Version Counters As Eager's)
    grad_bumps: dict[int, int] = field(default_factory=dict)
    # roots written through with grad enabled, not through .data/detach(): the writes autograd records on that
    # family (a tensor set_() or `.data =`-assigned to another's storage is of its own family)
    visible_families: set[int] = field(default_factory=set)
    visible_seq: dict[int, int] = field(default_factory=dict)  # id() of a tensor so written -> seq of its last write
    # the tensors the program's ops wrote in place with grad on (outside inference_mode; not out=, set_() or resize_())
    # since the last check of them: `grad_scope.check_raising_view_input_writes` (Note [Views That Raise After A Bump])
    grad_writes: list[torch.Tensor] = field(default_factory=list)
    # the same for writes of data alone (no in-place view op): Note [History Kept Through .data =]
    visible_data_seq: dict[int, int] = field(default_factory=dict)
    # id() of the tensors a write of data with grad on (outside inference_mode) gave history of their own, seen or
    # not by their base's (a detach()): an operand other than the tensor required grad, so eager's tensor requires
    # grad from then on (a requires_grad_() on it is a no-op: Note [Grad Mode And Autograd Reads]); so did a set_()
    # with grad on onto a source that requires grad (set_'s node)
    grad_written: set[int] = field(default_factory=set)
    # version-counter root (as `family`) -> seq of the first write so recorded through the family (Note [History Kept
    # Through .data =])
    family_visible_seq: dict[int, int] = field(default_factory=dict)
    # ... and of the last (Note [History Kept Through .data =])
    family_last_visible_seq: dict[int, int] = field(default_factory=dict)
    # id() of a wrapper subclass -> the `.data =` assignments to it, in order: each a shallow copy of the wrapper's
    # own metadata and storage; its inner tensors stay (Note [Wrapper Storage])
    wrapper_data: dict[int, list[DataAssignment]] = field(default_factory=dict)
    # id() of a wrapper subclass -> (seq, grad mode) of the last set_() called on the wrapper itself (Note [Wrapper
    # Storage])
    wrapper_sets: dict[int, tuple[int, bool]] = field(default_factory=dict)
    # id() of a wrapper subclass whose last set_() autograd recorded -> (its source tensor, the set_'s position in
    # `wrapper_ops`): Note [Inputs Written In Training]
    wrapper_grad_sets: dict[int, tuple[torch.Tensor | None, int]] = field(default_factory=dict)
    # id() of a tensor (plain or wrapper) set_() under grad -> the tensor the last such set_() took, where that one
    # required grad (eager's set_ node has an edge to its history), else None; `x.set_(x)` keeps the earlier one's
    # (Note [set_ Under Grad])
    grad_set_sources: dict[int, torch.Tensor | None] = field(default_factory=dict)
    # ... -> how many times the program had advanced the version counter of the tensor the last such set_() took,
    # when that set_() read its history (before the set_'s own advance)
    grad_set_source_bumps: dict[int, int] = field(default_factory=dict)
    # ... -> that set_()'s place among the program's set_()s (`last_set`), where the eager record has the count as
    # eager's set_ found it (`eager`; rules/set_under_grad.py `source_bumps_at_set`)
    grad_set_places: dict[int, tuple[int, int]] = field(default_factory=dict)
    # autograd's sequence mark when the program started (`autograd_sequence_mark`); id() of a tensor set_() under
    # grad -> the mark at its last such set_(); id() of those whose last one held back no history but their own: set_()
    # to themselves or a view of themselves, their family unwritten before but by such set_()s (Note [set_ Under Grad])
    program_start_mark: int = 0
    grad_set_marks: dict[int, int] = field(default_factory=dict)
    own_history_grad_sets: set[int] = field(default_factory=set)
    # family -> its version counter after the last of those set_()s, where every write to the family before was one
    # or one autograd does not record (a view input set_() so after another of its family's is still set_() before the
    # program's other nodes: `note_hidden_write`)
    own_set_versions: dict[int, int] = field(default_factory=dict)
    # id() of a wrapper subclass -> (seq, its size before) of the first set_() called on the wrapper itself; id() of
    # those a set_() gave another size; id() of those an op the program ran with grad enabled read after a set_()
    # had given them another size (Note [Inputs Written In Training])
    wrapper_first_sets: dict[int, tuple[int, tuple[Any, ...]]] = field(default_factory=dict)
    set_resized: set[int] = field(default_factory=set)
    # id() of a wrapper in set_resized -> seq of the later set_() that gave it its first size back (Note [Inputs
    # Written In Training])
    set_restored: dict[int, int] = field(default_factory=dict)
    read_after_set: set[int] = field(default_factory=set)
    plain_sets: dict[int, tuple[int, bool]] = field(default_factory=dict)  # the same for plain tensors' set_()
    # id() of a wrapper subclass that requires grad -> seq of the first in-place view op under no_grad that gave it
    # another size; id() of those an op with grad enabled read after it (Note [Leaves Laid Out Anew Under no_grad])
    hidden_resizes: dict[int, int] = field(default_factory=dict)
    # by id: the size a plain leaf had before a set_() under no_grad noted in hidden_resizes (its accumulator's)
    hidden_resize_from: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    read_after_hidden_resize: set[int] = field(default_factory=set)
    # See Note [Leaves Laid Out Anew Under no_grad], by id(): tensors standing for leaf inputs that require grad; those an
    # in-place view op under no_grad made leaves again -> their size at the first read with grad after (None: none yet)
    releafable: set[int] = field(default_factory=set)
    # ... tensors standing for leaf inputs that do not require grad when passed, which the program makes require grad
    # (Note [Leaves Laid Out Anew Under no_grad]): leaves without grad from the start, read before the flag without history
    late_grad: set[int] = field(default_factory=set)
    # ... of those, the ones an in-place view op relaid (under either grad mode): the accumulator the runtime makes at
    # the size of the first read with grad after the flag (`releafed`) matters for those alone
    relaid_late_grad: set[int] = field(default_factory=set)
    views_before_grad: set[int] = field(default_factory=set)  # ... views of them taken before the flag was set
    releafed: dict[int, tuple[Any, ...] | None] = field(default_factory=dict)
    # ... those an op with grad read before such an op, whose accumulator eager may keep (Note [Leaves Laid Out Anew
    # Under no_grad])
    layout_kept: set[int] = field(default_factory=set)
    # ... of those, the ones an op with grad other than a view op read after, itself or through a view: a result the
    # compiled graph computes from the leaf in its old layout (Note [Leaves Laid Out Anew Under no_grad])
    layout_read_after: set[int] = field(default_factory=set)
    # See Note [Stale View Functions], by id(): view inputs that require grad -> (the layout their
    # traced history expects, is a subclass); subclass views an in-place view op with grad gave another layout; those
    # an in-place view op under no_grad then bumped; those read with grad where their history is not eager's
    view_layouts: dict[int, tuple[tuple[Any, ...], bool]] = field(default_factory=dict)
    grad_changed_views: set[int] = field(default_factory=set)
    dropped_view_nodes: set[int] = field(default_factory=set)
    stale_view_layouts: set[int] = field(default_factory=set)
    view_sets: set[int] = field(default_factory=set)  # of those views, the ones set_() under no_grad
    # ... plain ones in-place view ops under no_grad relaid -> the layout their traced history expects (None: an op
    # other than a permutation of the elements, as_strided_(), relaid one too)
    relaid_views: dict[int, tuple[Any, ...] | None] = field(default_factory=dict)
    # ... plain ones set_() (relaid_views.py's note_view_set) -> the layout their traced history expects at the first
    # set_() under no_grad (None: a set_() with grad, or an in-place view op after, as_strided_() before)
    set_relaid_views: dict[int, tuple[Any, ...] | None] = field(default_factory=dict)
    set_relaid_storages: dict[int, object] = field(default_factory=dict)  # ... and the storage_key() they had then
    # ... views taken of those with grad after (or of such views; relaid_views.note_relaid_view_results) -> their
    # version then
    relaid_view_results: dict[int, int] = field(default_factory=dict)
    relaid_view_roots: dict[int, int] = field(default_factory=dict)  # ... -> the id of the input they are views of
    # an in-place view op with grad changed a view that requires grad (Note [Probing Eager's Backward])
    views_relaid_with_grad: bool = False
    # by id: tensors a set_() under no_grad gave another storage or layout -> that set_()'s `seq` (Note [Stale View
    # Functions])
    relaid_by_set: dict[int, int] = field(default_factory=dict)
    # See Note [Gradient Accumulators Of Leaves], by id(): tensors an op with grad read before any `.data =` to them;
    # leaves a `.data =` kept their accumulator for; those it left without one -> (seq before it, size before it)
    grad_read: set[int] = field(default_factory=set)
    kept_accumulators: set[int] = field(default_factory=set)
    fresh_accumulators: dict[int, tuple[int, tuple[Any, ...]]] = field(default_factory=dict)
    # ... tensor subclasses a `.data =` left without one -> their size at the first op with grad that read them
    # after (Note [Gradient Accumulators Of Leaves])
    assigned_reads: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    # id() of tensors the program called x.set_(x) on under no_grad (Note [Gradient Accumulators Of Leaves])
    self_sets: set[int] = field(default_factory=set)
    # ... and those it set_() inside inference_mode, which keeps their accumulator (same Note)
    inference_sets: set[int] = field(default_factory=set)
    # version-counter families of tensors the program called x.set_(x) on with grad on while they required none: an
    # in-place op autograd checks, which raises on a leaf requiring grad (Note [Inputs Written In Training])
    grad_self_set_families: set[int] = field(default_factory=set)
    # ... those an op with grad read before the last such set_, and after it (Note [Gradient Accumulators Of
    # Leaves]); `grad_reads`: every tensor an op with grad read so far
    read_before_self_set: set[int] = field(default_factory=set)
    read_after_self_set: set[int] = field(default_factory=set)
    grad_reads: set[int] = field(default_factory=set)
    # id() of tensors set_() under grad that an op with grad read after (Note [set_ Under Grad])
    read_after_grad_set: set[int] = field(default_factory=set)
    read_before_grad_set: set[int] = field(default_factory=set)  # ... read with grad apart from it before the set_
    data_sets: dict[int, tuple[int, bool]] = field(default_factory=dict)  # ... and `.data =` (grad mode: False)
    # id() -> seq when autograd last read the tensor's grad_fn; ... of those assigned `.data =`, the one before the last
    # assignment (-1: none): Note [History Kept Through .data =]
    grad_fn_reads: dict[int, int] = field(default_factory=dict)
    reads_before_data: dict[int, int] = field(default_factory=dict)
    # id() of plain view inputs the program assigned `.data =` -> (their layout before the first assignment, `seq`
    # when eager last set their history: -1, the one they came with, their input's name) (Note [Stale View
    # Functions])
    assigned_view_inputs: dict[int, tuple[tuple[object, ...], int, str]] = field(default_factory=dict)
    # id() of plain inputs the program assigned `.data =` -> (their layout before the first assignment, the input):
    # autograd rebuilds the history of the view inputs they are the `._base` of in their geometry at the time (Note
    # [Stale View Functions])
    assigned_bases: dict[int, tuple[tuple[object, ...], torch.Tensor]] = field(default_factory=dict)
    # id() of subclass views whose history autograd rebuilt, in the run, over a view input assigned `.data =` since
    # the view was taken (Note [Stale View Functions]: eager's rebuilds it over the input's base)
    rebuilt_over_assignment: set[int] = field(default_factory=set)
    views: dict[int, ViewRecord] = field(default_factory=dict)  # id() of a view op's output -> how it was made
    below_autograd_views: bool = False  # some record of `views` is below_autograd (`note_taken_out` reads one)
    # id() of a tensor whose last set_() or `.data =` gave it another tensor's storage and layout -> that tensor (Note
    # [Strides The Kernels Choose])
    layout_sources: dict[int, torch.Tensor] = field(default_factory=dict)
    inplace_views: dict[int, list[InplaceViewRecord]] = field(default_factory=dict)  # id() -> in-place view ops
    # id() -> seq of the version bump of the last in-place view op on it (Note [Views That Raise After A Bump])
    inplace_view_bumps: dict[int, int] = field(default_factory=dict)
    # id() of a view the program took -> how many in-place view ops it had before, and its layout, at its last
    # in-place view op with grad that found it stale (Note [Views That Raise After A Bump])
    stale_relayouts: dict[int, tuple[int, tuple[tuple[Any, ...], tuple[Any, ...], Any]]] = field(default_factory=dict)
    # id() of a subclass the program itself wrote (an op that moves data, not an in-place view op) -> the seqs of
    # those writes (Note [Stale View Functions])
    wrapper_data_writes: dict[int, list[int]] = field(default_factory=dict)
    # per entry of `wrapper_ops`: the seq before it ran, and the tensors among its arguments it does not write
    wrapper_op_reads: list[tuple[int, tuple[torch.Tensor, ...]]] = field(default_factory=list)
    # storage key -> seq of its last in-place op not through `.data`/detach()
    last_bump: dict[object, int] = field(default_factory=dict)
    # ... the same per version counter family (`family_of`): a set_() moves a tensor onto another's storage, not onto
    # its counter (Note [Views That Raise After A Bump])
    family_last_bump: dict[int, int] = field(default_factory=dict)
    # (storage key, counter family) -> seq of that family's last bump over that storage: a write through a tensor set_()
    # onto an input's storage is on the input's storage, not on its counter (`view_chains.last_bump`)
    own_last_bump: dict[tuple[object, int], int] = field(default_factory=dict)
    # storage key of an input that is its own graph input -> (the storage elements it covers, its path, its dense
    # index): the graph holds only those elements (Note [as_strided On Inputs])
    input_spans: dict[object, tuple[Elements, str, DenseIndex]] = field(default_factory=dict)
    # ... the same for every such input, its elements where they are symbolic too: (its path, its dense index)
    own_inputs: dict[object, tuple[str, DenseIndex]] = field(default_factory=dict)
    alias_bases: dict[object, torch.Tensor] = field(default_factory=dict)  # storage key -> synthetic base
    # ... of those, the bases over one input's storage alone (a one-member alias group, or one tensor passed several
    # times) -> (its path, its dense leaf): Note [Storage Swaps By Rebinding]
    lone_bases: dict[object, tuple[str, DenseIndex]] = field(default_factory=dict)
    # storage key of an input's dense leaf -> its alias with the original metadata (`FunctionalRun.originals`): the
    # frame of the offsets functionalization keeps behind the wrappers (Note [as_strided On Inputs])
    input_originals: dict[object, torch.Tensor] = field(default_factory=dict)
    # id() of every such alias, one per dense leaf (inputs in one alias group share a storage key): never rebound
    original_ids: set[int] = field(default_factory=set)
    # storage key of such a leaf -> the frame shifts at which the program took views of it at absolute offsets
    # (as_strided(), set_(storage, offset, ...)): Note [as_strided On Inputs]
    absolute_frames: dict[object, list[int | torch.SymInt]] = field(default_factory=dict)
    # storage key of an input's dense leaf (its clone's, where it runs as one) -> the paths of the inputs over it
    input_paths: dict[object, tuple[str, ...]] = field(default_factory=dict)
    # storage key of a synthetic base that two or more distinct inputs share -> their paths (Note [Inputs Written In
    # Training])
    shared_storages: dict[object, tuple[str, ...]] = field(default_factory=dict)
    # ... and the plain inputs over it, views of the base in the trace (`refresh_shared_histories`)
    shared_members: dict[object, tuple[torch.Tensor, ...]] = field(default_factory=dict)
    overlapping_inputs: set[object] = field(default_factory=set)  # storage keys of input_spans whose elements overlap
    # Ops on subclass tensors the program itself ran with grad enabled (not a subclass's inner ops), in order: (op,
    # its subclass arguments, those it writes). See Note [Aliased Inputs In Training].
    wrapper_ops: list[tuple[Any, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = field(default_factory=list)
    dense_writes: set[object] = field(default_factory=set)  # storage keys the program wrote below any subclass
    # storage keys an op that moves data (not an in-place view op, set_() or growth) wrote, at any depth: see leaf_mutations (spurious data mutations)
    moved_storages: set[object] = field(default_factory=set)
    moved_by_swap: bool = False  # set_() or growth moved data (their storages are not in moved_storages)
    # id() of clones that inputs run as, contiguous where the input is not: contiguous() copies them, as eager's
    # (Note [In-Place Ops As Eager Runs Them])
    copy_on_contiguous: set[int] = field(default_factory=set)
    contiguous_self: list[torch.Tensor] = field(default_factory=list)  # other tensors whose contiguous() was them
    # inner storage key -> seq of the last wrapper-level write the program made to a subclass over it (its wrapper
    # family's version counter advanced: views of another member see it; Note [Aliased Inputs In Training])
    wrapper_bumps: dict[object, int] = field(default_factory=dict)
    # ... the same per (inner storage key, counter family): a wrapper set_() onto an input's writes the input's inner
    # storages with a counter of its own (`view_chains.last_bump`)
    own_wrapper_bumps: dict[tuple[object, int], int] = field(default_factory=dict)
    # version-counter root (as `family`) -> the subclass inputs of that family as the program runs them, each its own
    # wrapper with its own counter here: Note [Aliased Inputs In Training]
    family_wrappers: dict[int, list[torch.Tensor]] = field(default_factory=dict)
    # id() of those that did not require grad as they came (Note [Inputs Written In Training])
    grad_free_members: set[int] = field(default_factory=set)
    # id() of a view of a synthetic base whose view function misses an in-place view op -> the seq at which its
    # history was last set; storage keys of such views read after their history was rebuilt (Note [Stale View
    # Functions])
    stale_views: dict[int, int] = field(default_factory=dict)
    stale_reads: set[object] = field(default_factory=set)
    function_layouts: dict[int, tuple[object, ...]] = field(default_factory=dict)  # ... the layout it makes
    # id() of a plain view set_() under no_grad -> the layout its view function makes (Note [Stale View Functions])
    nograd_set_layouts: dict[int, tuple[object, ...]] = field(default_factory=dict)
    seq: int = 0
    calls: int = 0  # torch functions the program called so far
    # per torch-level call of the program (the eager record's `Event.call` numbers them alike): `seq` as it began
    call_seqs: list[int] = field(default_factory=list)
    # the program's last set_() (no torch function: it takes the call it follows, as its event in the eager record
    # does): (that call, how many of the program's set_()s took it before); the eager record, asked for on demand
    last_set: tuple[int, int] | None = None
    eager: EagerAsk | None = None
    call_built_node: bool = False  # the program's call checked now made an autograd node (Note [The Eager Record],
    # calls that build no node): its results read its arguments' history
    # id() of a tensor requires_grad_() turned on -> (`calls` then, the gain's facts before it, its place in
    # new_leaves): a flag turned off again by the program's next call undoes the gain (`cancel_gain`)
    open_gains: dict[int, tuple[int, dict[str, object], int]] = field(default_factory=dict)

    def open_gain(self, t: torch.Tensor) -> None:
        """requires_grad_() is turning `t`'s flag on: keep the facts a gain changes as they are before it."""
        facts = {name: _shallow_copy(getattr(self, name)) for name in _GAIN_FACTS}
        self.open_gains[id(t)] = (self.calls, facts, len(self.new_leaves))

    def cancel_gain(self, t: torch.Tensor) -> bool:
        """The program turns `t`'s flag off: where requires_grad_() turned it on in the call just before, nothing
        run between, eager's tensor ends as it was (no leaf made, no history, no flag), so the gain is forgotten
        (its facts restored) and the turn-off is no change either; True where so."""
        found = self.open_gains.pop(id(t), None)
        if found is None or found[0] != self.calls - 1:
            return False
        _, facts, k = found
        for name, value in facts.items():
            setattr(self, name, value)
        if self.replayed_new_leaves is None and k < len(self.new_leaves):
            self.new_leaves[k] = False  # (the trace's run replays it: no leaf marked there either)
        return True

    def pin(self, tree: object) -> None:
        """Keep every tensor in `tree` (a pytree) alive as long as this record (Note [Storage Swaps By Rebinding])."""
        for t in tensors_in(tree):
            self.pinned.setdefault(id(t), t)

    def grad_set_view_of(self, value: torch.Tensor, inputs: Sequence[torch.Tensor]) -> bool:
        """`value` is a chain of views, all taken with grad on (none by a multi-output op, .data or detach()), of one
        of `inputs` whose history a set_() under grad of such a view rebased (Note [set_ Under
        Grad])."""
        t = value
        for record in self.chain(value):
            if not record.grad_enabled or id(t) in self.hidden or record.index is not None:
                return False
            t = record.source
        return t is not value and id(t) in self.view_set_bases and any(t is u for u in inputs)

    def unrecorded_before_grad(self, t: torch.Tensor, operands: Sequence[object]) -> bool:
        """A write with grad on of `t`, the stand-in of an input the program makes require grad later (`late_grad`)
        or one whose requires_grad it turned off (`requires_grad_dropped`), or a view of it, where neither `t` nor a tensor among the op's `operands` requires grad: eager's autograd
        records nothing (Note [Leaves Laid Out Anew Under no_grad]). Not once `t` is over the storage of an input that
        requires grad (a set_() to it): its own rules (Note [Inputs Written In Training])."""
        key = storage_key(t)
        if (
            t.requires_grad
            or any(u.requires_grad and storage_key(u) == key for u in self.run_inputs)
            or any(isinstance(o, torch.Tensor) and o.requires_grad for o in pytree.tree_leaves(operands))
        ):
            return False
        family = self.family_of(t)
        late = self.late_grad | self.requires_grad_dropped
        return any(self.family_of(s) == family for s in self.run_inputs if id(s) in late)

    def note_ordered_change(self, tensors: Iterable[object]) -> None:
        """An op changed the storage of each tensor among `tensors` in a way a flag turned on after it must follow
        (SwapRecord.gained_before_changes)."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self.ordered_changes.add(storage_key(t))
            elif isinstance(t, torch.UntypedStorage):  # (set_(storage))
                self.ordered_changes.add(untyped_storage_key(t))

    def changed_before_flag(self, t: torch.Tensor) -> bool:
        """An op changed `t`'s storage so before now (`note_ordered_change`), or resized it
        (untyped_storage().resize_())."""
        key = storage_key(t)
        return key in self.ordered_changes or key in self.storage_resizes

    def gained_unchanged(self, inputs: Sequence[torch.Tensor]) -> tuple[bool, ...]:
        """Per input: made to require grad before any op changed its storage so, and never turned off
        (Analysis.gained_before_changes)."""
        return tuple(id(t) in self.gained_before_changes and id(t) not in self.requires_grad_dropped for t in inputs)

    def note_visible_write(self, t: torch.Tensor, moves_data: bool) -> None:
        """A write of `t` at `seq` that eager's autograd records."""
        self.visible_writes.add(storage_key(t))
        self.visible_families.add(self.family_of(t))
        self.visible_seq[id(t)] = self.seq
        if moves_data:
            self.family_visible_seq.setdefault(self.family_of(t), self.seq)
            self.family_last_visible_seq[self.family_of(t)] = self.seq
            self.visible_data_seq[id(t)] = self.seq

    def note_inplace_view(self, t: torch.Tensor, op: InplaceViewRecord) -> None:
        """An in-place view op on `t`; one autograd records right after `t`'s set_() under grad makes the node `t`'s
        history ends on (Note [Epilogue Nodes In Eager's Order])."""
        self.inplace_views.setdefault(id(t), []).append(op)
        if op.grad_enabled and op.func not in SET_OPS and self.grad_set_nodes.get(id(t)) is GradSetNode.SET:
            self.grad_set_nodes[id(t)] = GradSetNode.LAYOUT

    def note_marked_dirty(self, t: torch.Tensor, recorded: bool) -> None:
        """`ctx.mark_dirty(t)`: eager's apply advances the counter of each tensor marked, written or not; `recorded`:
        its node rebases t's history."""
        self.dirty_marks.add(id(t))
        self.seq += 1
        self.note_last_bump(storage_key(t), t)
        self.note_bump(t, recorded)
        if is_traceable_subclass(t):
            for leaf in flatten_subclass(t, "marked dirty")[1]:
                self.note_wrapper_bump(storage_key(leaf), t)
            bump_family_wrappers(self, t)

    def note_inplace_view_read(self, t: torch.Tensor) -> None:
        """Before an in-place view op with grad on `t`: where `t` is a view the program took whose version counter
        moved since it was made or last relaid, autograd regenerates its history first (Note [Views That Raise After
        A Bump])."""
        record = self.views.get(id(t))
        if record is None or not torch.is_grad_enabled() or not t.requires_grad:
            return
        if self.last_bump.get(storage_key(t), 0) > max(record.seq, self.inplace_view_bumps.get(id(t), 0)):
            layout = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
            self.stale_relayouts[id(t)] = (len(self.inplace_views.get(id(t), [])), layout)

    def note_write_kind(self, t: torch.Tensor, moves_data: bool, wrapper: bool) -> None:
        """The write of `t` at `seq`: the bump of an in-place view op, or a write of data by the program into a
        subclass (`wrapper`: at the top level)."""
        if not moves_data:
            self.inplace_view_bumps[id(t)] = self.seq
        elif wrapper:
            self.wrapper_data_writes.setdefault(id(t), []).append(self.seq)

    def note_wrapper_op(
        self, func: Any, subclass_args: tuple[torch.Tensor, ...], written: tuple[torch.Tensor, ...], leaves: list[Any]
    ) -> None:
        """An op of the program on subclass tensors with grad enabled (`wrapper_ops`), and when (`leaves`: its
        arguments, of which the tensors not written are kept)."""
        self.wrapper_ops.append((func, subclass_args, written))
        read = tuple(a for a in leaves if isinstance(a, torch.Tensor) and not any(a is w for w in written))
        self.wrapper_op_reads.append((self.seq, read))

    def note_wrapper_set(self, t: torch.Tensor, seq: int, size_before: tuple[Any, ...]) -> None:
        """`t.set_(...)` on a wrapper subclass, at `seq`; `size_before`: t's size before it."""
        first = self.wrapper_first_sets.setdefault(id(t), (seq, size_before))
        if not same_size(tuple(t.shape), first[1]):
            self.set_resized.add(id(t))
            self.set_restored.pop(id(t), None)
        elif id(t) in self.set_resized:
            self.set_restored.setdefault(id(t), seq)  # Note [Inputs Written In Training]

    def note_reads_after_set(self, tensors: tuple[torch.Tensor, ...], writes: tuple[torch.Tensor, ...]) -> None:
        """`tensors`, read by an op with grad enabled that writes `writes`: mark each wrapper set_() before that it
        is, or whose view taken after its first set_() it is, where it is written or a set_() gave it another size
        (a view taken before reads the old storage, through the old history; where autograd rebuilds such a view
        from the wrapper, that is an op reading the wrapper itself)."""
        for t in tensors:
            written = any(t is w for w in writes)
            taken: int | None = None  # when the view below `t` in the chain was taken
            while True:
                first = self.wrapper_first_sets.get(id(t))
                restored = self.set_restored.get(id(t))
                back = restored is not None and (taken is None or taken > restored)
                changed = written or (id(t) in self.set_resized and not back)
                if first is not None and changed and (taken is None or taken > first[0]):
                    self.read_after_set.add(id(t))
                record = self.views.get(id(t))
                if record is None or record.func is torch.ops.aten.detach.default:
                    break
                taken, t = record.seq, record.source

    def note_hidden_resize(self, t: torch.Tensor, size_before: tuple[Any, ...], seq: int | None = None) -> None:
        """After an in-place view op on wrapper `t`, whose size was `size_before`: note it where it ran under
        no_grad and gave `t`, which requires grad, another size (Note [Leaves Laid Out Anew Under no_grad]); with
        `seq`, the same for a set_() of a plain tensor, at `seq` (Note [Leaves Laid Out Anew Under no_grad])."""
        size = tuple(t.shape)
        if seq is not None:  # a plain set_(): what matters is the size at each later read (a set_() back is none)
            if not torch.is_grad_enabled() and t.requires_grad and id(t) not in self.hidden_resizes:
                self.hidden_resizes[id(t)] = seq
                self.hidden_resize_from[id(t)] = size_before
            return
        changed = not all(isinstance(d, int) for d in (*size, *size_before)) or size != size_before
        if not torch.is_grad_enabled() and t.requires_grad and changed and id(t) not in self.hidden_resizes:
            self.hidden_resizes[id(t)] = self.inplace_views[id(t)][-1].seq

    def note_reads_after_hidden_resize(self, tensors: tuple[torch.Tensor, ...]) -> None:
        """`tensors`, read by an op with grad enabled: mark each wrapper an in-place view op under no_grad resized
        before, that it is, or whose view taken after that op it is (as `note_reads_after_set`)."""
        for t in tensors:
            taken: int | None = None  # when the view below `t` in the chain was taken
            while True:
                seq = self.hidden_resizes.get(id(t))
                before = self.hidden_resize_from.get(id(t))
                # a plain leaf read at the size its accumulator has (set_() back, or the same size: the comparison
                # guards symbolic sizes, as eager's engine compares them) is no resize
                resized = before is None or tuple(t.shape) != before
                if seq is not None and (taken is None or taken > seq) and resized:
                    self.read_after_hidden_resize.add(id(t))
                record = self.views.get(id(t))
                if record is None or record.func is torch.ops.aten.detach.default:
                    break
                taken, t = record.seq, record.source

    def forget_factory_detach(self, out: object, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
        """Factory results are no detach() (see below): `out`, the result of a factory call (one given no tensor, or a
        `*_like` one), when recorded as a detach() of a tensor that is none of the call's arguments, is a fresh root;
        of a traceable subclass, its inner tensors too (the wrapper's detach() detached them below autograd)."""
        if not isinstance(out, torch.Tensor):
            return
        given = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        record = self.views.get(id(out))
        if record is None or record.func is not torch.ops.aten.detach.default:
            return
        if (given and not name.endswith("_like")) or any(record.source is a for a in given):
            return
        made = [out]
        if is_traceable_subclass(out):
            made += flatten_subclass(out, "out")[1]
        for t in made:
            found = self.views.get(id(t))
            if found is not None and found.func is torch.ops.aten.detach.default:
                del self.views[id(t)]
                self.family[id(t)] = id(t)
                self.hidden.discard(id(t))

    # Factory results are no detach(): a factory (torch.zeros(2, 2), torch.ones, torch.empty, torch.zeros_like(x),
    # ...) called while the program is traced returns, through autograd's make_variable (variable_factories.h), a
    # shallow copy of the tensor the functional mode made when the run holds a reference to it, and a shallow copy of a
    # Python tensor dispatches aten.detach: the tracker records the result as a detach() of a tensor the program never
    # saw. Left so, writes through it would be hidden from autograd and `tmp = torch.zeros(2, 2); y = tmp.diagonal();
    # y.copy_(x); return y` (x requiring grad) would be refused as "a detach() of an intermediate written with a value
    # that requires grad" (`z = torch.zeros_like(x); z.add_(x * 2); return z` of a TwoTensor x so too, its inner
    # tensors detached by the wrapper's dispatch). A factory's detach() is of its own result, never of a tensor the
    # program holds, so its result's detach record is dropped: the result is a root of its own, as in eager.

    def family_of(self, t: torch.Tensor) -> int:
        found = self.family.get(id(t))
        if found is not None:
            return found
        root = t._base if t._is_view() and t._base is not None else t
        return self.family.get(id(root), id(root))

    def note_taken_out(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Note [Autograd Sees The Wrapper]: a plain tensor a subclass's dispatch made (below ADInplaceOrView) that
        the program holds (`x[1:].a`, a DTensor split piece's to_local() under no_grad) has a counter of its own."""
        if not self.below_autograd_views:
            return  # (no view made below autograd yet: no operand to walk for)
        for a in tensors_in((args, kwargs)):
            if (record := self.views.get(id(a))) is not None and record.below_autograd:
                if not is_traceable_subclass(a):
                    self.family[id(a)] = id(a)

    def is_autograd_view(self, t: torch.Tensor) -> bool:
        """Is `t` a view in eager's sense (`._base` set)? See Note [Autograd Sees The Wrapper]."""
        record = self.views.get(id(t))
        return self.is_view(t) and record is not None and not record.below_autograd

    def is_view(self, t: torch.Tensor) -> bool:
        """Did the program make `t` with a view op? (Functionalization turns in-place view ops like t.t_() into
        views internally, and inner tensors of subclasses are never autograd views: `_is_view()` can't tell.)"""
        record = self.views.get(id(t))
        return record is not None and record.func is not torch.ops.aten.detach.default

    def is_view_input(self, t: torch.Tensor) -> bool:
        """Does `t` stand for an input that is a view (its history's base is another tensor, passed or not)?"""
        found = self.input_positions.get(id(t))
        return found is not None and found[1]._is_view()

    def is_detach(self, t: torch.Tensor) -> bool:
        """Did the program make `t` with detach() (an alias that is no view: eager's `._base` of it is None)?"""
        record = self.views.get(id(t))
        return record is not None and record.func is torch.ops.aten.detach.default

    def grown_root(self, key: object) -> object:
        """The storage `key` is eager's, as grown in place by resize_(): the first of the run's storages it was grown
        from (Note [Storage Swaps By Rebinding])."""
        while (before := self.grown_from.get(key)) is not None:
            key = before
        return key

    def shares_input_storage(self, t: torch.Tensor) -> bool:
        """Does another of the run's inputs (another object) have `t`'s storage?"""
        key = storage_key(t)
        return any(u is not t and storage_key(u) == key for u in self.run_inputs)

    def chain(self, t: torch.Tensor) -> Iterator[ViewRecord]:
        """The view ops (not detach) that made `t`, from `t` back to the chain's root: each record's `source` is the
        tensor the next one made."""
        while (record := self.views.get(id(t))) is not None and record.func is not torch.ops.aten.detach.default:
            yield record
            t = record.source

    def made_under_no_grad(self, t: torch.Tensor) -> bool:
        """Has view `t` the creation meta the program's view ops gave it under no_grad: is the last op up its chain
        that gives a view a kind of its own (one taken under no_grad, or by a multi-output op with grad on) one taken
        under no_grad? Autograd passes that kind down a chain of views (propagate_creation_meta: anything over
        DEFAULT). A tensor that is no autograd view ends the chain, and so does a view taken inside inference_mode,
        whose kind holds over any. Asked by the analysis run, whose grad modes are the program's (Note [Training Without
        A Function])."""
        u = t
        for record in self.chain(t):
            if not u._is_view() or record.below_autograd or record.inference_mode:
                return False
            if not record.grad_enabled:
                return True
            if record.index is not None:
                return False
            u = record.source
        return False

    def moved(self) -> set[int]:
        """id() of the tensors a set_() or `.data =` gave other data (plain or wrapper)."""
        return self.swapped_ids | self.wrapper_sets.keys() | self.wrapper_data.keys()

    def subclass_view_steps(self, t: torch.Tensor) -> Iterator[tuple[torch.Tensor, ViewRecord]]:
        """(view, the record of the op that made it) up `t`'s chain while both are subclass tensors whose data no
        set_() or `.data =` moved since (the rules of set_ decide those): where a view op that copies (a sharded view
        that gathers) shows as inner tensors that are no views of the source's."""
        moved = self.moved()
        for record in self.chain(t):
            source = record.source
            if source is t or not (is_traceable_subclass(t) and is_traceable_subclass(source)):
                return
            if id(t) in moved or id(source) in moved:
                return
            yield t, record
            t = source

    def note_reshape(self, func: Any, out: object, seq_before: int) -> None:
        """After a torch function of the program: the view() a reshape() made (ViewRecord.reshape)."""
        if func not in _RESHAPES or not isinstance(out, torch.Tensor):
            return
        found = self.views.get(id(out))
        if found is not None and found.seq > seq_before and found.func is torch.ops.aten.view.default:
            self.views[id(out)] = replace(found, reshape=True)

    def note_detach(self, source: torch.Tensor, out: torch.Tensor) -> None:
        """`out = source.detach()`: after an inference_mode block, of an inference tensor, eager's is an inference
        tensor with a version counter of its own."""
        if not torch.is_inference_mode_enabled() and self.eager_inference(source):
            self.counted_inference.add(id(out))
            self.pin(out)

    def note_counter_after_data(self, t: torch.Tensor, data_inference: bool) -> None:
        """`t.data = d`: `t` keeps its own version counter (none, if made inside an inference_mode block) and takes
        `d`'s dispatch keys (an inference tensor's, or a normal one's)."""
        had_none = (self.eager_inference(t) and id(t) not in self.counted_inference) or id(t) in self.counterless
        self.counted_inference.discard(id(t))
        self.counterless.discard(id(t))
        if data_inference and not had_none:
            self.counted_inference.add(id(t))
        elif had_none and not data_inference:
            self.counterless.add(id(t))
        self.pin(t)

    def eager_inference(self, t: torch.Tensor) -> bool:
        """Is eager's `t` an inference tensor: made inside an inference_mode block, or a view of one (taken after the
        block too, where the run's is none)?"""
        return t.is_inference() or (not is_traceable_subclass(t) and storage_key(t) in self.inference_made)

    def note_view_made(self, source: torch.Tensor, view: torch.Tensor, family: int) -> None:
        """`view` of `source` (a view op's or detach()'s result): of `source`'s family; eager's view of a plain
        inference tensor is one (inference_tensors), taken after the block too."""
        self.family[id(view)] = family
        if not is_traceable_subclass(source) and self.stays_inference(source):
            self.inference_tensors.add(id(view))

    def note_set(self) -> None:
        """A set_() the program called (not one inside a subclass's dispatch): its place (`last_set`)."""
        call = len(self.call_seqs) - 1
        last = self.last_set
        self.last_set = (call, last[1] + 1 if last is not None and last[0] == call else 0)

    def stays_inference(self, t: torch.Tensor) -> bool:
        """Is eager's plain `t` an inference tensor now: made inside an inference_mode block or a view of one (on any
        storage set_() moved it to since), unless a `.data =` gave it the dispatch keys of other data since?"""
        if id(t) in self.swapped_by_data:
            return self.data_inference.get(id(t), False)
        return t.is_inference() or id(t) in self.inference_tensors

    def counter_absent(self, t: torch.Tensor) -> bool:
        """Has eager's plain `t` no version counter, so that an in-place op on it outside inference_mode raises: an
        inference tensor made inside the block or a view of one (not a detach() after the block: that has its own), or
        a tensor such a one's `.data =` left without one?"""
        return (self.stays_inference(t) and id(t) not in self.counted_inference) or id(t) in self.counterless

    def views_of(self, t: torch.Tensor) -> set[int]:
        """id() of the views taken so far whose chain of view ops (detach included) starts at `t`."""
        found = set()
        for vid, record in self.views.items():
            while record.source is not t and (up := self.views.get(id(record.source))) is not None:
                record = up
            if record.source is t:
                found.add(vid)
        return found

    def view_root(self, t: torch.Tensor, *, through_swaps: bool = False) -> torch.Tensor:
        """The tensor a chain of view ops (not detach) started from (eager's `._base`), as far as storage goes: a
        tensor set_() to another storage since it was made is the root of its storage's chain (its `._base` is no
        longer that). `through_swaps`: the chain as the program took it, past such tensors."""
        while (record := self.views.get(id(t))) is not None and record.func is not torch.ops.aten.detach.default:
            if not through_swaps and id(t) in self.swapped_ids:
                break
            t = record.source
        return t

    def base_gained(self, t: torch.Tensor) -> bool:
        """Is `t` (a view of) an input whose base, another input, the program has made require grad by now
        (ViewRecord.source_base_gained)?"""
        return (
            bool(self.views_of_gained_bases) and id(self.view_root(t, through_swaps=True)) in self.views_of_gained_bases
        )

    def bumps(self, t: torch.Tensor) -> bool:
        """Would eager have advanced `t`'s version counter during the program?"""
        return self.family_of(t) in self.written_families

    def bump_count(self, t: torch.Tensor) -> int:
        """How many times eager would have advanced `t`'s version counter during the program."""
        return self.written_families.get(self.family_of(t), 0)

    def note_last_bump(self, key: object, t: torch.Tensor) -> None:
        """The program's op now (`seq`) advanced the counter of `t`, over storage `key` (`last_bump`)."""
        self.last_bump[key] = self.seq
        self.family_last_bump[self.family_of(t)] = self.seq
        self.own_last_bump[key, self.family_of(t)] = self.seq

    def note_wrapper_bump(self, key: object, t: torch.Tensor) -> None:
        """The program's wrapper-level write now (`seq`) of subclass `t`, over inner storage `key` (`wrapper_bumps`)."""
        self.wrapper_bumps[key] = self.seq
        self.own_wrapper_bumps[key, self.family_of(t)] = self.seq

    def note_bump(self, t: torch.Tensor, recorded: bool | None = None) -> None:
        """Eager advances `t`'s version counter (shared by its family) once; `recorded`: by an op that may record a
        node (`grad_bumps`), by default one run with grad on, outside inference_mode."""
        family = self.family_of(t)
        self.written_families[family] = self.written_families.get(family, 0) + 1
        if recorded is None:
            recorded = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        if recorded:
            self.grad_bumps[family] = self.written_families[family]

    def bumps_after_grad(self, t: torch.Tensor) -> int:
        """Of `bump_count(t)`, how many eager made after the last one by an op that may record a node."""
        family = self.family_of(t)
        return max(0, self.written_families.get(family, 0) - self.grad_bumps.get(family, 0))


@dataclass(frozen=True, slots=True)
class Elements:
    """The storage elements a strided tensor covers: the range lo..hi, exactly the set `exact` when given."""

    lo: int
    hi: int
    exact: frozenset[int] | None

    def covers(self, other: Elements) -> bool:
        if other.hi < other.lo:
            return True
        if not (self.lo <= other.lo and other.hi <= self.hi):
            return False
        if self.exact is None:
            return True
        return other.exact is not None and other.exact <= self.exact


_MAX_ENUMERATED = 1 << 14


def elements_of(size: list[Any], stride: list[Any], offset: Any) -> Elements | None:
    """None when sizes are symbolic or too many elements to list (not decided: allowed)."""
    if not all(isinstance(v, int) for v in (*size, *stride, offset)):
        return None
    if any(s == 0 for s in size):
        return Elements(offset, offset - 1, frozenset())
    lo = offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if st < 0)
    hi = offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if st > 0)
    if dense_strides(size, stride):
        return Elements(lo, hi, None)
    addresses = layout_offsets(size, stride, offset)
    if addresses is None:
        return None
    return Elements(lo, hi, frozenset(addresses))


def element_offsets(t: torch.Tensor) -> list[int] | None:
    """The storage offset of each element of `t`, in index order; None when symbolic or too many to list."""
    return layout_offsets(list(t.shape), list(t.stride()), t.storage_offset())


def layout_offsets(
    size: Sequence[Any], stride: Sequence[Any], offset: Any, most: int = _MAX_ENUMERATED
) -> list[int] | None:
    """The storage offset of each element of a layout, in index order; None when symbolic or more than `most`."""
    if not all(isinstance(v, int) for v in (*size, *stride, offset)) or math.prod(size) > most:
        return None
    offsets = [int(offset)]
    for s, st in zip(size, stride, strict=True):
        offsets = [a + k * st for a in offsets for k in range(s)]
    return offsets


def reads_elsewhere_written(written: torch.Tensor, read: torch.Tensor) -> bool | None:
    """An elementwise op writing `written` and reading `read` (broadcast to its shape), both on one storage: does
    some index read a location the op writes at another index (eager's result then depends on its loop order)?
    None when not decidable here (symbolic sizes, too many elements, not broadcastable)."""
    try:
        read = read.expand_as(written)
    except RuntimeError:
        return None
    mine, theirs = element_offsets(written), element_offsets(read)
    if mine is None or theirs is None:
        return None
    targets = set(mine)
    return any(o in targets and o != at for o, at in zip(theirs, mine, strict=True))


def dense_strides(size: list[int], stride: list[int]) -> bool:
    """Non-overlapping and dense: the elements fill a contiguous range (in some dim order)."""
    expected = 1
    for st, s in sorted((abs(st), s) for s, st in zip(size, stride, strict=True) if s != 1):
        if st != expected:
            return False
        expected *= s
    return True


def output_version_counts(
    record: SwapRecord, output: object, inputs: Sequence[torch.Tensor]
) -> tuple[tuple[int, int], ...]:
    """Analysis.output_versions: (output index, eager's count) for each tensor output whose version counter is no
    input's and that eager advanced (runtime/steps.py: Version Counters As Eager's)."""
    input_families = {record.family_of(t) for t in inputs}
    found = []
    for k, value in enumerate(pytree.tree_leaves(output)):
        if isinstance(value, torch.Tensor) and record.family_of(value) not in input_families:
            count = record.bump_count(value)
            if count:
                found.append((k, count))
    return tuple(found)


def outputs_counted_first(
    record: SwapRecord, output: object, inputs: Sequence[torch.Tensor], outputs: Sequence[OutputInfo]
) -> FreshCounts:
    """The counts (`output_version_counts`) of fresh outputs whose counter no other output shares but views replayed
    from them, built after them, and of the intermediate bases whose views alone are the outputs on their counter:
    counted as built, no view of them goes stale; less each in-place view op a replay from them repeats, which
    advances the shared counter again (runtime/steps.py: Version Counters As Eager's). Those that require grad from
    a node of the graph are apart: the training Function gives them their counts before it saves them, and a count
    given after it would fail autograd's check of that save."""
    counts = output_version_counts(record, output, inputs)
    leaves = pytree.tree_leaves(output)
    families = [record.family_of(v) if isinstance(v, torch.Tensor) else None for v in leaves]
    repeated = Counter[tuple[ReplaySource, int | tuple[int, ...]]]()
    made: set[int] = set()  # the chain objects earlier replays built, which later ones reuse: as the runtime's memo
    for j in build_order(outputs):
        root = _counter_root(outputs, j, made)
        if root is not None:
            repeated[root[0]] += root[1]
        if (replay := outputs[j].replay) is not None:
            made |= {token for _, token in replay.marks} - use_only_tokens(replay.marks)
    plain: list[tuple[int, int]] = []
    graded: list[tuple[int, int]] = []
    for k, count in counts:
        others = [j for j, f in enumerate(families) if f == families[k] and j != k and leaves[j] is not leaves[k]]
        if outputs[k].replay is None and all(_replayed_from(outputs, j, k) for j in others):
            given = (k, count - repeated[(ReplaySource.OUTPUT, k)])
            (graded if _graph_grad(leaves[k], outputs[k]) else plain).append(given)
    bases: list[tuple[int, int, bool]] = []
    roots: list[tuple[tuple[int, ...], int, bool]] = []
    for key in dict.fromkeys(
        r for j in range(len(outputs)) if (r := _root_of(outputs, j)) and r[0] is not ReplaySource.OUTPUT
    ):
        views = [j for j in range(len(outputs)) if _root_of(outputs, j) == key]
        found = [count for k, count in counts if k in views]
        family = families[views[0]]
        if not found or any(_changed_after(outputs[j].replay) for j in views):
            continue
        if any(f == family and j not in views for j, f in enumerate(families)):
            continue  # (an output on the counter built otherwise)
        given = (found[0] - repeated[key], any(_graph_grad(leaves[j], outputs[j]) for j in views))
        if key[0] is ReplaySource.BASE:
            bases.append((cast(int, key[1]), *given))
        else:
            roots.append((cast(tuple[int, ...], key[1]), *given))
    return FreshCounts(tuple(plain), tuple(graded), tuple(sorted(bases)), tuple(roots))


@dataclass(frozen=True, slots=True)
class FreshCounts:
    """outputs_counted_first: (output index, count) of fresh outputs given their count once built, of those that
    require grad from a node of the graph, (base number, count, requires grad so) of intermediate bases, and
    (Replay.root_bases, count, requires grad so) of intermediate subclass roots."""

    outputs: tuple[tuple[int, int], ...]
    graded: tuple[tuple[int, int], ...]
    bases: tuple[tuple[int, int, bool], ...]
    roots: tuple[tuple[tuple[int, ...], int, bool], ...]


def _graph_grad(value: object, info: OutputInfo) -> bool:
    """Does the output require grad from a node of the graph (not only by a requires_grad_() the runtime repeats on
    it once it is built)?"""
    return isinstance(value, torch.Tensor) and value.requires_grad and not info.gains_grad


def _changed_after(replay: Replay | None) -> bool:
    """A view whose counter or storage the runtime changes after it is replayed (a stale or set_() view): its root's
    count is left to the ways Replay describes."""
    return replay is None or bool(
        replay.bump_after
        or replay.stale_view
        or replay.then_set
        or replay.base_after
        or replay.before_epilogue
        or replay.root_data_meta is not None
    )


def _root_of(outputs: Sequence[OutputInfo], j: int) -> tuple[ReplaySource, int | tuple[int, ...]] | None:
    """The fresh output, intermediate base or intermediate subclass root (its Replay.root_bases) output `j` is
    replayed from, through other outputs."""
    replay = outputs[j].replay
    while replay is not None and replay.source is ReplaySource.OUTPUT:
        if outputs[replay.index].replay is None:
            return (ReplaySource.OUTPUT, replay.index)
        replay = outputs[replay.index].replay
    if replay is not None and replay.source is ReplaySource.BASE:
        return (ReplaySource.BASE, replay.index)
    if replay is not None and replay.source is ReplaySource.WRAPPER:
        return (ReplaySource.WRAPPER, replay.root_bases)
    return None


def _counter_root(
    outputs: Sequence[OutputInfo], j: int, made: Container[int]
) -> tuple[tuple[ReplaySource, int | tuple[int, ...]], int] | None:
    """The root (`_root_of`) whose counter output `j`'s replay advances, and by how many in-place view ops of its own
    steps, past the last object of its chain an earlier replay built (`made`'s Replay.marks tokens; reused, as
    regenerate.own_bumps; None: none, on a counter of their own after a detach(), or the very object of an earlier
    output, built once)."""
    replay = outputs[j].replay
    root = _root_of(outputs, j)
    if replay is None or root is None or outputs[j].kind is OutputKind.SAME_AS:
        return None
    source: Replay | None = replay
    while source is not None and source.source is ReplaySource.OUTPUT:
        source = outputs[source.index].replay
        if source is not None and any(step.own_version for step in source.steps):
            return None  # (the chain left the root's counter before this replay)
    done, bumps = max((count for count, token in replay.marks if token in made), default=0), 0
    for k, step in enumerate(replay.steps):
        if step.own_version:
            break
        bumps += k >= done and (step.op in SET_OPS or torch.Tag.inplace_view in getattr(step.op, "tags", ()))
    return (root, bumps) if bumps else None


def _replayed_from(outputs: Sequence[OutputInfo], j: int, k: int) -> bool:
    replay = outputs[j].replay
    while replay is not None and replay.source is ReplaySource.OUTPUT:
        if replay.index == k:
            return True
        replay = outputs[replay.index].replay
    return False


def output_input_counters(
    record: SwapRecord, output: object, inputs: Sequence[torch.Tensor], flat_indices: Sequence[int]
) -> tuple[tuple[int, int], ...]:
    """Analysis.output_input_counters, for every tensor output on an input's counter; the runtime takes those it
    builds from dense leaves (runtime/steps.py: Version Counters As Eager's)."""
    families = {record.family_of(t): i for t, i in zip(inputs, flat_indices, strict=True)}
    found = []
    for k, value in enumerate(pytree.tree_leaves(output)):
        if isinstance(value, torch.Tensor) and not any(value is t for t in inputs):
            i = families.get(record.family_of(value))
            if i is not None:
                found.append((k, i))
    return tuple(found)


def counter_keeping_replays(outputs: Sequence[OutputInfo]) -> tuple[OutputInfo, ...]:
    """`outputs` with Replay.keeps_counter set where an output replayed from an input after the epilogue applies an
    in-place view op on the input's counter (runtime/steps.py: Version Counters As Eager's)."""
    found = []
    for info in outputs:
        replay = info.replay
        if replay is not None and replay.source is ReplaySource.INPUT and not replay.before_epilogue:
            bumping = False
            for step in replay.steps:
                if step.own_version:
                    break  # (a counter of its own from here)
                bumping = bumping or step.op in SET_OPS or torch.Tag.inplace_view in getattr(step.op, "tags", ())
            if bumping:
                info = replace(info, replay=replace(replay, keeps_counter=True))
        found.append(info)
    return tuple(found)


def bump_family_wrappers(record: SwapRecord, written: torch.Tensor) -> None:
    """Advance the version counters of the inputs of `written`'s wrapper family (Note [Aliased Inputs In Training])."""
    for member in record.family_wrappers.get(record.family_of(written), ()):
        if member is not written:
            set_version(member, get_version(member) + 1)


def same_size(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if len(a) != len(b):
        return False
    try:
        return all(bool(x == y) for x, y in zip(a, b, strict=True))
    except DataDependentError:  # an unbacked size
        return False


# The torch functions that run reshape(): eager's result, a view where the layout allows one, is a _reshape_alias of a
# plain tensor that is not contiguous (the functional run sees a view() of its stand-ins, tensor-subclass-like).
_RESHAPES = frozenset(
    {torch.Tensor.reshape, torch.reshape, torch.Tensor.reshape_as, torch.Tensor.flatten, torch.flatten}
)
