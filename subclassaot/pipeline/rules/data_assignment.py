"""Stage `analyze`, `.data =` on wrapper subclasses and alias groups (Note [Wrapper Storage]): which outputs'
wrappers an assignment set apart from their inner tensors, how the epilogue repeats an assignment to a subclass input,
which assignments cannot be repeated exactly; views of an intermediate subclass whose `.data` the program assigned
after taking them (replayed from the intermediate rebuilt as it was when viewed, which then takes the metadata
eager's `.data =` left on it); and in training, which assignments to plain members of an alias group leave the
group's gradients as eager's (Note [Aliased Inputs In Training]).

Input: a `FunctionalRun` (its `SwapRecord.wrapper_data`, its view records) and the outputs analyzed so far; for
alias groups, a group's members, the `Analysis` and the per-member facts `training_rules` derives.
Output: whether an output's wrapper takes recorded metadata (`OutputInfo.data_meta`), a `DataAssignmentPlan` per
subclass input, the `Replay` of such a view with its root's final metadata, whether a group's assignments keep
eager's gradients, and an UnsupportedError for what is refused.
Invariants: pure reads of the run's and the compile's records.

Part: Stage `analyze`, wrapper storages (Note [Wrapper Storage]): which subclass tensors share one wrapper storage
after the call, which tensor the runtime takes it from; and the inner wrappers of nested subclasses (a TwoTensor of
TwoTensors) after a wrapper-level set_(): which take their first dense leaf's metadata and which storage they share.
Input: a `FunctionalRun`, its `DenseLayout` and the analyzed outputs. Output: `WrapperStorageClass`es and
`InnerWrapperClass`es for the runtime (runtime/plan.py applies them), or an UnsupportedError where they cannot say
eager's result. Invariants: pure reads of the run's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import replace
from typing import NoReturn, cast

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import dense_leaves, inner_wrappers, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.swap_record import DataAssignment, ViewRecord
from subclassaot.schemas import (
    Analysis,
    DataAssignmentPlan,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    InnerWrapperClass,
    InputIndex,
    LeafMutation,
    LeafSource,
    Meta,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    StrideProbe,
    ViewStep,
    WrapperStorageClass,
)
from subclassaot.torch_internals import is_nested_expr, mutation_counter, recorded_size, storage_key, symint_expr


def check_assigned_view(
    path: str, value: torch.Tensor, replay: Replay | None, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> None:
    """Refuse a view whose view chain passes through a tensor whose `.data` the program assigned, where the view
    cannot be made as eager made it: not replayed at all (rebuilt, it would be no view), or replayed from an input
    before the epilogue while eager took it, under no_grad, after a write to the input (the epilogue's write would
    then break its autograd history)."""
    chain = [value]
    while (record := run.swaps.views.get(id(chain[-1]))) is not None:
        chain.append(record.source)
    if not value._is_view() or not any(id(t) in run.swaps.wrapper_data for t in chain):
        return
    if replay is None:
        raise UnsupportedError(
            f"{path} is a view of a tensor subclass whose `.data` the program assigned (Note [Wrapper Storage]), "
            "and its view chain cannot be replayed after the call (the metadata of a tensor in it "
            "changed since); the compiled output would not be a view. Return a clone instead"
        )
    assigned, viewed = replay.root_data_meta, replay.root_meta
    resized = assigned is not None and viewed is not None and assigned[0] != viewed[0]
    if resized and torch.is_grad_enabled() and value.requires_grad:
        raise UnsupportedError(
            f"{path} is a view, with autograd history, of an intermediate tensor subclass whose `.data` the program "
            "then assigned a tensor of another size: the compiled backward sees the intermediate at the assigned "
            "size, eager's its history's (Note [Wrapper Storage]). Return a clone made "
            "before the assignment"
        )
    written = any(run.swaps.bumps(t) for t in chain if id(t) in input_by_id)
    no_grad_step = not all(step.grad_enabled for step in replay.steps)
    if replay.before_epilogue and torch.is_grad_enabled() and no_grad_step and written:
        raise UnsupportedError(
            f"{path} is a view, partly taken under no_grad, of an input the program writes and whose `.data` it "
            "assigns (Note [Wrapper Storage]): it would be rebuilt before the input's write, whose version "
            "change then makes its grad_fn raise, unlike eager's. Return a clone instead"
        )


def apart_from_leaves(t: torch.Tensor, taken: int, run: FunctionalRun) -> bool:
    """Subclass input `t` was set_() after `taken` (a view's seq), then assigned `.data =` metadata unlike its dense
    leaves' (Note [Wrapper Storage]): a view chain replayed on `t` as it ends starts from those leaves, not
    from the layout the view was taken of, even where the wrapper's metadata are that layout again (`t0 = x2.detach();
    x2.set_(x1); x2.data = t0`)."""
    assigned, moved = run.swaps.wrapper_data.get(id(t)), run.swaps.wrapper_sets.get(id(t))
    if not assigned or moved is None or not taken < moved[0] < assigned[-1].seq:
        return False
    return any(leaf_meta(d) != leaf_meta(t) for d in dense_leaves_of(t, "")[1])


def leaves_moved(t: torch.Tensor, taken: ViewRecord) -> bool:
    """Note [Wrapper Storage]: do subclass `t`'s dense leaves end with other metadata than
    they had when the view `taken` was taken from it?"""
    if taken.source_leaves is None:
        return False
    then = tuple((_exprs(size), _exprs(stride), symint_expr(offset)) for size, stride, offset in taken.source_leaves)
    return then != tuple(leaf_meta(d) for d in dense_leaves_of(t, "")[1])


def _exprs(values: tuple[int | torch.SymInt, ...]) -> tuple[sympy.Expr | int, ...]:
    return tuple(symint_expr(v) for v in values)


def wrapper_data_plans(
    flat: FlatInputs,
    run: FunctionalRun,
    replays: Sequence[tuple[ViewStep, ...]],
    wrapper_after: Sequence[Meta | None],
    user_fakes: Sequence[torch.Tensor],
    cloned: frozenset[int],
) -> tuple[tuple[DataAssignmentPlan | None, ...], tuple[StrideProbe, ...]]:
    """Per tensor input, how the epilogue repeats the `.data =` assignments to it (None: there were none); and the
    stride probes the plans name."""
    off = _clones_off_layout(run, user_fakes, cloned)
    probes: list[StrideProbe] = []
    plans = tuple(_plan(i, flat, run, replays[i], wrapper_after, off, probes) for i in range(len(run.user_tensors)))
    return plans, tuple(probes)


def _plan(
    i: int,
    flat: FlatInputs,
    run: FunctionalRun,
    steps: tuple[ViewStep, ...],
    wrapper_after: Sequence[Meta | None],
    off: dict[object, int],
    probes: list[StrideProbe],
) -> DataAssignmentPlan | None:
    t = run.user_tensors[i]
    found = run.swaps.wrapper_data.get(id(t))
    if not found or next(k for k, u in enumerate(run.user_tensors) if u is t) != i:
        return None  # the same object passed twice: assigned once, for its first position
    path = flat.leaves[flat.tensor_indices[i]].path
    records = run.swaps.inplace_views.get(id(t), [])
    first, last = found[0], found[-1]
    if steps and any(first.seq < r.seq < last.seq for r in records):
        raise UnsupportedError(
            f"{path}.data = ...: the program assigns `.data` of this tensor subclass input more than once, with an "
            "in-place view op (t_, unsqueeze_) on it in between; replaying that op on the input needs the wrapper "
            "metadata of an assignment that a later one overwrites. Assign `.data` once, or rebind the name instead"
        )
    source = _unchanged_input(last.source, run, wrapper_after)
    probe = None
    if source is None and _strides_unknown(last, run):
        probe = _probe(f"{path}.data = ...", last, run, probes, StrideProbe(input_index=i, output_index=None, leaf=0))
    size, stride, offset = last.meta
    meta = (tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset))
    plan = DataAssignmentPlan(
        after_steps=sum(1 for r in records if r.seq < first.seq),
        meta=meta,
        source=source,
        final=leaf_meta(t) == meta,
        resizes=_resizes(found),
        stride_probe=probe,
    )
    if storage_key(t) in off and not (plan.source is not None and plan.final):
        _refuse_off_layout(path, flat, off[storage_key(t)])
    return plan


def _strides_unknown(a: DataAssignment, run: FunctionalRun) -> bool:
    """Note [Strides The Kernels Choose]."""
    computed = storage_key(a.source) not in {k for k in run.initial_wrapper_keys if k is not None}
    return computed and any(isinstance(s, int) and s in (0, 1) for s in a.meta[0])


def assigned_probe_leaf(a: DataAssignment, run: FunctionalRun) -> torch.Tensor | None:
    """Note [Strides The Kernels Choose]: the leaf of the assigned tensor whose real strides are the wrapper's."""
    swaps, v = run.swaps, a.source
    if not isinstance(v, torch.Tensor):
        return None
    changed = (swaps.inplace_views, swaps.wrapper_data, swaps.wrapper_sets, swaps.data_sets)
    if any(id(v) in d for d in changed) or id(v) in swaps.swapped_ids or leaf_meta(v)[:2] != a.meta[:2]:
        return None
    for leaf in dense_leaves_of(v, "")[1]:
        if any(id(leaf) in d for d in changed) or id(leaf) in swaps.swapped_ids:
            continue
        if leaf_meta(leaf)[:2] == leaf_meta(v)[:2] and mutation_counter(leaf) == 0:
            return leaf
    return None


def _probe(where: str, a: DataAssignment, run: FunctionalRun, probes: list[StrideProbe], probe: StrideProbe) -> int:
    """Register a stride probe for assignment `a` (its `leaf` found here), or refuse."""
    leaf = assigned_probe_leaf(a, run)
    if leaf is None:
        _refuse_unknown_strides(where)
    k = next(n for n, d in enumerate(dense_leaves_of(a.source, "")[1]) if d is leaf)
    probes.append(dataclasses.replace(probe, leaf=k))
    return len(probes) - 1


def _refuse_unknown_strides(where: str) -> NoReturn:
    raise UnsupportedError(
        f"{where}: the assigned tensor subclass has no elements, or the program computed it and it has a dimension "
        "of size 1: its strides come from the kernels, which the compiled program does not see (Note [Strides The "
        "Kernels Choose]). Assign an input or a view of one"
    )


def _resizes(assignments: Sequence[DataAssignment]) -> bool:
    return any(a.size_before != a.meta[0] for a in assignments)


def _unchanged_input(source: torch.Tensor, run: FunctionalRun, wrapper_after: Sequence[Meta | None]) -> int | None:
    """The tensor input `source` is, if the program leaves its own metadata and storage as they came (its real
    metadata at run time are then those it had when assigned)."""
    j = next((k for k, u in enumerate(run.user_tensors) if u is source), None)
    if j is None or wrapper_after[j] is not None:
        return None
    swaps = run.swaps
    if id(source) in swaps.inplace_views or id(source) in swaps.wrapper_data or id(source) in swaps.wrapper_sets:
        return None
    return j


def check_data_meta_outputs(
    flat: FlatInputs,
    run: FunctionalRun,
    user_fakes: Sequence[torch.Tensor],
    cloned: frozenset[int],
    outputs: Sequence[OutputInfo],
    probes: tuple[StrideProbe, ...],
) -> tuple[tuple[OutputInfo, ...], tuple[StrideProbe, ...]]:
    """The outputs, with the stride probes their wrappers take after a `.data =` (appended to `probes`). Refuse
    outputs whose wrapper metadata from a `.data =` cannot be given exactly: one that requires grad and
    took another size (eager's backward takes gradients of that size through the history of the inner tensors, the
    compiled autograd.Function does not), and one whose metadata were recorded on a clone with another layout."""
    off = _clones_off_layout(run, user_fakes, cloned)
    found, result = list(probes), list(outputs)
    for o, (info, value) in enumerate(zip(outputs, pytree.tree_leaves(run.output), strict=True)):
        if isinstance(value, torch.Tensor) and torch.is_grad_enabled() and value.requires_grad:
            t = value
            while (record := run.swaps.views.get(id(t))) is not None:
                t = record.source
                before = [a for a in run.swaps.wrapper_data.get(id(t), []) if a.seq < record.seq]
                if _resizes(before) and not _replayed_from_assigned_input(info, t, run):
                    # assigned before the view was taken from it: the view's gradients would be wrong
                    raise UnsupportedError(
                        f"{info.path} is a view of a tensor subclass that requires grad and whose `.data` the program "
                        "assigned from a tensor of another size: eager's autograd takes the view's gradients through "
                        "that tensor's history in the new size, which a compiled output cannot reproduce. Return a "
                        "clone made before the assignment"
                    )
        if info.data_meta is None or not isinstance(value, torch.Tensor):
            continue
        _check_ctx_kept(info.path, value, run)
        if torch.is_grad_enabled() and value.requires_grad and _resizes(run.swaps.wrapper_data.get(id(value), [])):
            result[o] = _resized_with_history(result[o], value, run)
        assignments = run.swaps.wrapper_data.get(id(value))
        if assignments and _strides_unknown(assignments[-1], run):
            probe = StrideProbe(input_index=None, output_index=o, leaf=0)
            k = _probe(f"{info.path}: its `.data` = ...", assignments[-1], run, found, probe)
            result[o] = dataclasses.replace(info, data_stride_probe=k)
        if storage_key(value) in off:
            _refuse_off_layout(info.path, flat, off[storage_key(value)])
    return tuple(result), tuple(found)


def _check_ctx_kept(path: str, value: torch.Tensor, run: FunctionalRun) -> None:
    """Refuse an output whose class's flatten ctx records its outer size or stride (DTensor's spec): eager's `.data =`
    that gave it another layout left the ctx as it was (the wrapper's Python attributes), while the compiled output,
    unflattened at its new layout, gets a ctx of that layout (Note [Wrapper Storage])."""
    if not is_traceable_subclass(value) or id(value) not in run.swaps.wrapper_data:
        return
    attrs, ctx = value.__tensor_flatten__()
    inner = {a: getattr(value, a) for a in attrs}
    rebuilt = type(value).__tensor_unflatten__(inner, ctx, value.shape, value.stride())
    if is_traceable_subclass(rebuilt) and rebuilt.__tensor_flatten__()[1] == ctx:
        return
    raise UnsupportedError(
        f"{path}: the program assigns this {type(value).__name__}'s `.data` a tensor of another size or stride: eager's "
        "wrapper keeps the flatten ctx it had (its Python attributes, which record its old size or stride), while the "
        "compiled output, rebuilt at its new layout, gets a ctx of that layout. Return the assigned tensor itself, or "
        "a clone of it"
    )


def _resized_with_history(info: OutputInfo, value: torch.Tensor, run: FunctionalRun) -> OutputInfo:
    """Note [Wrapper Storage]: `info` with the size its history recorded, or refuse."""
    recorded = recorded_size(value)
    assignments = run.swaps.wrapper_data[id(value)]
    fresh = all(leaf.source is LeafSource.GRAPH for leaf in info.leaves) and info.replay is None
    if recorded is not None and fresh and _expands_to(recorded, value.shape):
        return dataclasses.replace(info, history_size=tuple(symint_expr(d) for d in recorded))
    replayed = info.replay is not None and id(value) not in run.swaps.inplace_views
    if recorded is not None and replayed and recorded == assignments[0].size_before:
        return info
    raise UnsupportedError(
        f"{info.path}: the program assigned `.data` of this tensor subclass, which requires grad, from a tensor "
        "of another size: eager's autograd takes gradients of the new size through its history, which this "
        "compiled output cannot reproduce (Note [Wrapper Storage]: supported for an "
        "output the program computed, or a view replayed from an input or output). Assign a tensor of its size, or "
        "return a clone made before"
    )


def _expands_to(recorded: Sequence[int | torch.SymInt], size: Sequence[int | torch.SymInt]) -> bool:
    """The engine sums a gradient of `size` back to `recorded` (static sizes only)."""
    if not all(isinstance(d, int) for d in (*recorded, *size)) or len(recorded) > len(size):
        return False
    return all(r in (n, 1) for r, n in zip(reversed(recorded), reversed(size), strict=False))


def _replayed_from_assigned_input(info: OutputInfo, base: torch.Tensor, run: FunctionalRun) -> bool:
    """Note [Wrapper Storage]: a view of an input `base` (whose `.data` the program
    assigned before the view was taken) replayed from it after the epilogue repeated that assignment."""
    replay = info.replay
    return (
        replay is not None
        and replay.source is ReplaySource.INPUT
        and not replay.before_epilogue
        and any(base is u for u in run.user_tensors)
    )


def _clones_off_layout(
    run: FunctionalRun, user_fakes: Sequence[torch.Tensor], cloned: frozenset[int]
) -> dict[object, int]:
    """Wrapper storage key -> subclass input that runs as a clone whose layout is not the input's (a non-leaf input
    that requires grad, in training: a storage offset, or strides of an overlapping input)."""
    return {
        run.initial_wrapper_keys[i]: i
        for i in sorted(cloned)
        if run.initial_wrapper_keys[i] is not None and leaf_meta(user_fakes[i]) != run.initial_metas[i]
    }


def _refuse_off_layout(path: str, flat: FlatInputs, i: int) -> None:
    raise UnsupportedError(
        f"{path}: the program assigned `.data` of this tensor subclass from {flat.leaves[flat.tensor_indices[i]].path} "
        "or a view of it, a tensor subclass input that requires grad and is not a leaf, "
        "which runs in training as a clone whose layout (storage offset, strides) is not the input's; the wrapper's "
        "metadata after the assignment cannot be told exactly. Assign from a clone, or pass the input contiguous "
        "and at storage offset 0"
    )


def resimplified_data_metas(analysis: Analysis, shape_env: ShapeEnv) -> Analysis:
    """The `.data =` metadata simplified again once tracing is done: an assignment that makes a wrapper's outer size
    that of another input ties the two sizes, and the guards bind only the symbol that survives."""

    def meta(m: Meta) -> Meta:
        size, stride, offset = m
        return (
            tuple(_dim(d, shape_env) for d in size),
            tuple(_dim(d, shape_env) for d in stride),
            _dim(offset, shape_env),
        )

    plans = tuple(None if p is None else dataclasses.replace(p, meta=meta(p.meta)) for p in analysis.wrapper_data)
    outputs = tuple(
        o if o.data_meta is None else dataclasses.replace(o, data_meta=meta(o.data_meta)) for o in analysis.outputs
    )
    sizes = tuple(None if s is None else tuple(_dim(d, shape_env) for d in s) for s in analysis.accumulator_sizes)
    releaf = tuple(None if s is None else tuple(_dim(d, shape_env) for d in s) for s in analysis.releaf_sizes)
    return dataclasses.replace(
        analysis, wrapper_data=plans, outputs=outputs, accumulator_sizes=sizes, releaf_sizes=releaf
    )


def _dim(d: object, shape_env: ShapeEnv) -> int | sympy.Expr:
    if isinstance(d, int):
        return d
    if is_nested_expr(d):  # (a nested int is no expression of the shape environment's: Note [Nested Int Dims])
        return cast(sympy.Expr, d)
    simplified = shape_env.simplify(cast(sympy.Expr, d))
    return int(simplified) if isinstance(simplified, sympy.Integer) else cast(sympy.Expr, simplified)


def assigned_root(
    t: torch.Tensor,
    first: ViewRecord,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    earlier: dict[int, int],
) -> bool:
    """`t`, the intermediate subclass a view chain starts at, had its metadata changed only by `.data =` after
    the chain's first view (Note [Wrapper Storage])."""
    assignments = run.swaps.wrapper_data.get(id(t), [])
    return (
        bool(assignments)
        and is_traceable_subclass(t)
        and id(t) not in input_by_id
        and id(t) not in earlier
        and id(t) not in run.swaps.inplace_views
        and all(a.seq > first.seq for a in assignments)
    )


def with_root_data_meta(replay: Replay | None, t: torch.Tensor) -> Replay | None:
    """`replay` (from `t`, an `assigned_root`) with `t`'s metadata at the end where they differ from the root's when
    viewed (Note [Wrapper Storage])."""
    if replay is None or replay.root_meta == leaf_meta(t):
        return replay
    return replace(replay, root_data_meta=leaf_meta(t))


def data_assignments_allowed(meta: Sequence[DenseIndex], analysis: Analysis) -> bool:
    """Every changed member (`meta`) changed by `.data =` alone, as Note [Aliased Inputs In Training] allows."""
    return all(analysis.mutations[m].swapped_by_data for m in meta)


# Note [Wrapper Storage]
# A wrapper subclass has a storage of its own (no data): views share it (return_and_correct_aliasing), and since set_
# is an inplace_view op, `w.set_(src)` on a wrapper also replays on the wrapper itself, which then shares src's
# wrapper storage and takes its metadata, while the subclass's own set_ handler points the inner tensors at src's
# (the wrapper keeps its autograd identity: a view stays a view of its base). The functional run does all of this
# on the traced wrappers exactly as eager does, so at its end the traced wrappers' storages say which subclass inputs
# and outputs share one, and whether that is an input's storage as received. Two things reproduce it at run time,
# only for programs that set_() a wrapper (or assign its `.data`: below): an output that
# was a view when set_() replaced its contents is replayed as that view and then set_() (without autograd) to a
# wrapper of its dense leaves (`Replay.then_set`); and after the outputs are built, every member of a sharing class
# gets the class's storage (torch._functionalize_unsafe_set, which changes neither metadata nor version counters),
# an anchor's storage taken before the epilogue (which may move the anchor off it).
# - `w.set_(t)` with t a plain tensor puts w on t's own, real storage, and the subclass points every inner tensor at
#   it too. The class's storage is then that of a dense leaf (an input's inner tensor, a plain input, or an output's
#   leaf: `WrapperStorageClass.leaf`, else `output_leaf`), and the members get the storage that leaf has once the
#   epilogue ran and the outputs are built. Where no tensor the caller can see holds it any more, a storage of the
#   wrapper's own is as good as eager's: nothing observable shares it.
# - A wrapper input that is a view of a larger one (`b[1:1]`, `b[:2]`) shares its base's wrapper storage, which bounds
#   the in-place view ops it allows (`x.as_strided((), (), 0).unsqueeze_(0)` on an empty slice is legal). Rebuilt by
#   unflatten, the traced wrapper would get a storage sized for its own elements only, and the op would raise; so it
#   gets a (data-less) storage as large as the real input's, where that is larger and its metadata is static.
# - A nested subclass (a TwoTensor of TwoTensors): its dispatch runs set_ on its inner wrappers, each an inplace_view
#   op replayed on that wrapper, which takes its source's metadata and wrapper storage (and in-place view ops after
#   relay it). The runtime sets the dense leaves and the outer wrapper only, so once the outputs are built the inner
#   wrappers of an input set_() at the wrapper level, and of an output set_() (or a view of one), take their first
#   dense leaf's metadata and, by class as above, the wrapper storage they share in the run
#   (`InnerWrapperClass`, `inner_wrapper_classes`); refused where an inner wrapper's metadata are not its first leaf's or
#   its storage is a dense tensor's (set_() to a plain tensor).
# `.data =` on a wrapper (rules in storage_swaps.py and here) follows the same rule, by shallow copy, not set_:
# Eager: `w.data = v` on a wrapper subclass never dispatches: it shallow-copies v's TensorImpl into w's (size, stride,
# offset, storage, of the wrapper itself), while w's inner tensors (Python attributes), autograd history and version
# counter stay what they were; `w.data = w` changes nothing. So a wrapper can end with metadata that its inner tensors
# do not have, and a view of it taken before keeps the leaves' metadata of its time.
# The functional run does the same on the traced wrappers and records each assignment (its seq, v's metadata then), so
# at its end the traced wrappers hold eager's own metadata and wrapper storages. The runtime gives them to the real
# tensors in two parts:
# - metadata: a subclass input takes the assigned metadata in the epilogue, between the in-place view ops replayed
#   before and after the assignment; a subclass output whose own wrapper was assigned takes the metadata it had at the
#   end once it is built. Both by `t.data = shell`, shell an empty wrapper of that metadata on t's storage
#   (torch_internals.assign_wrapper_metadata): no autograd record, no version bump. Metadata that come from an input as
#   received are read from the real input (the run may have used a clone with another offset).
# - storage: as after a wrapper-level set_ (above), every subclass input and output ends on the
#   wrapper storage its class had in the run.
# Views: a view record of a subclass keeps its source's dense leaves' metadata (ViewRecord.source_leaves); the source
# counts as changed where they differ at the end, and the chain is replayed before the epilogue from the input as
# received. A view of an intermediate assigned after (`y = x.add(0.5); v = y.expand(...); y.data = x; return v.t()`) is
# replayed from the intermediate rebuilt around its leaves with the metadata it had when viewed; once every output is
# built, that root (eager's `._base`) takes the assigned metadata (Replay.root_data_meta). Only where no in-place view
# op changed the root; in training, a view requiring grad whose root the assignment relaid is refused.
# Sizes under history: `t = x.unbind(1)[0]; t.data = x; return t` keeps UnbindBackward0, recorded at t's old size, and
# the engine sums a gradient of the new size back to it where it expands (raises where not). So such an output leaves
# the Function at the size autograd recorded (OutputInfo.history_size, contiguous strides) and takes its assigned
# metadata after: the engine reduces the gradient before it reaches the Function, as for eager's. Only where the
# recorded size expands to the new one (else whether eager raises depends on the subclass's gradients). A view replayed
# from an input or output records its size when its view op runs again, which is exact where nothing recorded history
# on it since, and so is a view taken after an input's `.data =` and replayed after the epilogue repeated it.
# Refused (data_assignment.py): other outputs resized under their history, an input written where autograd records it
# and given another size, metadata recorded on a clone whose layout is not the input's or whose strides the kernels
# chose (Note [Strides The Kernels Choose]), and a view through an assigned tensor that cannot be replayed as eager
# made it. The same object passed twice stays one object in the trace.


def wrapper_storage_classes(
    run: FunctionalRun, layout: DenseLayout, outputs: tuple[OutputInfo, ...]
) -> tuple[WrapperStorageClass, ...]:
    if not run.swaps.wrapper_sets and not run.swaps.wrapper_data:
        return ()
    anchors: dict[object, int] = {}
    for t, key in enumerate(run.initial_wrapper_keys):
        if key is not None:
            anchors.setdefault(key, t)
    members: dict[object, tuple[list[int], list[int]]] = {}
    for t, (tree, u) in enumerate(zip(layout.trees, run.user_tensors, strict=True)):
        if tree is not None:
            members.setdefault(storage_key(u), ([], []))[0].append(t)
    values = pytree.tree_leaves(run.output)
    for o, (info, value) in enumerate(zip(outputs, values, strict=True)):
        if info.kind is OutputKind.TENSOR and info.tree is not None and isinstance(value, torch.Tensor):
            members.setdefault(storage_key(value), ([], []))[1].append(o)
    leaf_keys: dict[object, int] = {}  # Note [Wrapper Storage]
    for k, final in enumerate(run.finals):
        leaf_keys.setdefault(storage_key(final), k)
    output_keys: dict[object, tuple[int, int]] = {}
    for o, (info, value) in enumerate(zip(outputs, values, strict=True)):
        if info.kind is OutputKind.TENSOR and isinstance(value, torch.Tensor):
            tree, leaves = dense_leaves_of(value, "out")
            for pos, out_leaf in enumerate(leaves):
                output_keys.setdefault(storage_key(out_leaf), (o, pos if tree is not None else -1))
    classes = []
    for key, (ins, outs) in members.items():
        anchor = anchors.get(key)
        if outs or any(t != anchor for t in ins):
            leaf = leaf_keys.get(key) if anchor is None else None
            output_leaf = output_keys.get(key) if anchor is None and leaf is None else None
            ins_t, outs_t = tuple(ins), tuple(outs)
            classes.append(
                WrapperStorageClass(anchor=anchor, inputs=ins_t, outputs=outs_t, leaf=leaf, output_leaf=output_leaf)
            )
    return tuple(classes)


_InnerMember = tuple[int, tuple[str, ...]]


def inner_wrapper_classes(run: FunctionalRun, paths: Sequence[str]) -> tuple[InnerWrapperClass, ...]:
    """Note [Wrapper Storage]: the inner wrappers of nested subclass inputs set_() at the wrapper level, and of outputs
    (no input) set_(), views of one set_(), or holding such an input's inner storage, by the storage they end on."""
    swaps = run.swaps
    if not swaps.wrapper_sets:
        return ()
    anchors: dict[object, _InnerMember] = {}
    for t, (u, initial) in enumerate(zip(run.user_tensors, run.initial_inner_wrappers, strict=True)):
        for (attrs, _), (_, key) in zip(inner_wrappers(u, "t"), initial, strict=False):
            anchors.setdefault(key, (t, attrs))
    dense_keys = {storage_key(f) for f in run.finals}
    classes: dict[object, tuple[list[_InnerMember], list[_InnerMember]]] = {}
    for t, (path, u, initial) in enumerate(zip(paths, run.user_tensors, run.initial_inner_wrappers, strict=True)):
        if id(u) in swaps.wrapper_sets:
            found = inner_wrappers(u, path)
            if len(found) != len(initial):
                _refuse(path, path)
            for attrs, w in found:
                _check(w, ".".join((path, *attrs)), dense_keys)
                classes.setdefault(storage_key(w), ([], []))[0].append((t, attrs))
    for o, (kp, value) in enumerate(pytree.tree_flatten_with_path(run.output)[0]):
        if not isinstance(value, torch.Tensor) or any(value is u for u in run.user_tensors):
            continue
        set_in_chain = _set_in_chain(value, run)
        for attrs, w in inner_wrappers(value, "out"):
            if not set_in_chain and storage_key(w) not in classes:  # (else it holds what an input's inner wrapper took)
                continue
            _check(w, ".".join(("out" + pytree.keystr(kp), *attrs)), dense_keys)
            classes.setdefault(storage_key(w), ([], []))[1].append((o, attrs))
    return tuple(
        InnerWrapperClass(anchor=anchors.get(key), inputs=tuple(ins), outputs=tuple(outs))
        for key, (ins, outs) in classes.items()
    )


def _check(w: torch.Tensor, path: str, dense_keys: set[object]) -> None:
    """The runtime gives inner wrapper `w` its first dense leaf's metadata and a wrapper storage: refuse where eager's
    are other (metadata apart from its leaves', a dense tensor's storage)."""
    leaf = dense_leaves(w, path)[0]
    if leaf_meta(w) != leaf_meta(leaf) or storage_key(w) in dense_keys or storage_key(w) == storage_key(leaf):
        _refuse(path.split(".")[0], path)


def _set_in_chain(t: torch.Tensor, run: FunctionalRun) -> bool:
    """Was `t`, or a tensor up its chain of views, set_() at the wrapper level?"""
    while id(t) not in run.swaps.wrapper_sets:
        record = run.swaps.views.get(id(t))
        if record is None:
            return False
        t = record.source
    return True


def _refuse(path: str, inner: str) -> NoReturn:
    raise UnsupportedError(
        f"{path}: the program set_() this nested tensor subclass (its inner tensors are tensor subclasses too); "
        "eager repeats a wrapper's set_ (and its in-place view ops) on each inner wrapper, and "
        f"{inner} ends with metadata other than its first inner tensor's, or on a plain tensor's storage, which the "
        "compiled call does not give inner wrappers (Note [Wrapper Storage]). set_() the plain inner tensors, or a "
        "tensor subclass over plain tensors"
    )


def data_set_in_place(mutation: LeafMutation, real: torch.Tensor) -> bool:
    """Was the input's every storage swap `.data =` (set_data: autograd and the version counter see none of it) onto
    its own storage at its own layout (`x1.data = x0.view(x0.shape)`, x1 being `x0.detach().requires_grad_()`), a
    storage nothing writes? Eager's leaf then holds what it held, under its own flag, counter and accumulator: nothing
    of it changes. (Written too, the epilogue would update it as a swapped input, in place: refused.)"""
    entry = (tuple(real.shape), tuple(real.stride()), real.storage_offset())
    return (
        mutation.swapped_by_data_only
        and not (mutation.storage_changed or mutation.metadata or mutation.resized or mutation.data)
        and tuple(tuple(x) if isinstance(x, (list, tuple)) else x for x in mutation.final_meta) == entry
    )
