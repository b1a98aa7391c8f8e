"""One run of the user's program under functionalization, shared by the `analyze` and `trace` stages.

Input: the call, `FlatInputs`, `DenseLayout` and graph-level values (fake at analysis, proxies while tracing).
Output: `FunctionalRun`: the program's view of its inputs before and after, and what it returned.
Invariants: deterministic: the same program run twice yields outputs, aliases and intermediate bases in the same
order, which is how the trace reproduces exactly the layout the analysis decided.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import (
    SubclassNode,
    dense_leaves,
    flatten_subclass,
    inner_wrappers,
    is_traceable_subclass,
    unflatten_subclass,
)
from subclassaot.errors import UnsupportedError, program_line
from subclassaot.pipeline.desugar import dense_from_graph_inputs, leaf_meta, rebuild_user_tensors, widen_wrapper_storage
from subclassaot.pipeline.grad_scope import (
    GradReenabledError,
    check_flagless_view_set,
    check_gained_after_read,
    check_grad_reenabled,
    check_unseen_histories,
)
from subclassaot.pipeline.inputs import unflatten_call
from subclassaot.pipeline.rules.hidden_layouts import note_view_inputs
from subclassaot.pipeline.rules.new_leaves import NewLeafHold
from subclassaot.pipeline.rules.set_storage_rules import check_unwritten_at_end, note_freed_inputs
from subclassaot.pipeline.rules.set_under_grad import grad_set_view_root, no_grad_set_view_root, set_view_root
from subclassaot.pipeline.rules.storage_reach import check_absolute_frames
from subclassaot.pipeline.rules.storage_swaps import swap_modes
from subclassaot.pipeline.rules.swap_record import Elements, SwapRecord, elements_of
from subclassaot.pipeline.rules.view_bases import (
    autograd_apart,
    clone_synthetic_base,
    foreign_root,
    left_storage_refusal,
)
from subclassaot.runtime.steps import grown_alone, own_accumulator_inputs, own_stand_in_inputs
from subclassaot.schemas import AliasGroupRef, Analysis, DenseIndex, DenseLayout, FlatInputs, Meta
from subclassaot.torch_internals import (
    DataDependentError,
    autograd_sequence_mark,
    clone_keeps_structure,
    flagless_no_grad_view,
    functional_alias,
    grad_fn_raises,
    is_fake,
    is_leaf_before_base_write,
    is_no_grad_view,
    is_value_read_type_error,
    leaf_view_of_its_own,
    replay_view,
    skip_alias_name,
    skip_node_name,
    storage_key,
    take_creation_meta,
    to_functional,
    with_bits,
    without_bits,
)

DATA_DEPENDENT_MESSAGE = (
    "the program reads a tensor's value as a Python number (.item(), float(t), bool(t), int(t), a 0-dim tensor "
    "passed as a size, or a library doing so: BatchNorm with momentum=None, nn.LSTM over a PackedSequence from "
    "pack_padded_sequence, a torch.distributions object validating its arguments); the compiled graph cannot depend "
    "on tensor values. Keep the value a tensor (torch.distributions: validate_args=False), or use "
    'torch.compile(fn, backend="subclassaot"), which runs the read eagerly between two graphs'
)


def _value_read_message(e: BaseException) -> str:
    """DATA_DEPENDENT_MESSAGE, with the program's line that read the value where the traceback shows one."""
    where = program_line(e.__traceback__)
    return DATA_DEPENDENT_MESSAGE + ("" if where is None else f". The read: {where}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionalRun:
    """What one run of the program under functionalization leaves behind (used by analyze and by trace)."""

    graph_inputs: list[torch.Tensor]  # per graph placeholder: its functional wrapper (a clone where asked)
    graph_grad_leaves: list[torch.Tensor]  # per graph placeholder: what gradients are taken with respect to
    swaps: SwapRecord  # storage swaps and .data aliases seen while the program ran
    dense: list[torch.Tensor]  # per dense leaf: the functional leaf handed to the program (clones for cloned inputs)
    user_tensors: list[torch.Tensor]  # per tensor input: the object the program received
    grad_leaves: list[torch.Tensor]  # per tensor input: what gradients are taken with respect to
    originals: list[torch.Tensor]  # per dense leaf: an alias of its original storage with its original metadata
    finals: list[torch.Tensor]  # per dense leaf: the leaf as the program left it (re-flattened for subclasses)
    initial_metas: list[Meta]  # per tensor input: the object's (size, stride, offset) when the program got it
    # per tensor input: the wrapper's own storage key when the program got it (None for plain tensors)
    initial_wrapper_keys: list[object | None]
    # per tensor input: (size, stride, offset) and storage key of each tensor subclass among its inner tensors
    # (`inner_wrappers`, in its order) when the program got it; () for a plain tensor or one over plain tensors only
    initial_inner_wrappers: list[tuple[tuple[Meta, object], ...]]
    # per tensor input: its autograd node when the program got it (None: none). A write renews a view's node, so a
    # history that holds this one read the value from before the call (joint.py `TracedJoint.read_reach`)
    initial_nodes: list[object | None]
    # per dense leaf of an input that runs as a clone: the input's storage offset minus the clone's (the clone's
    # offsets, which the leaf's views record, are shifted by it to be the input's)
    clone_offset_shift: dict[int, int | torch.SymInt]
    # dense leaves of inputs that run as a clone whose offsets or strides are not the input's
    moved_clones: frozenset[int]
    output: object  # what the program returned


def _note_shared_storage(
    record: SwapRecord,
    flat: FlatInputs,
    layout: DenseLayout,
    item: AliasGroupRef,
    base: torch.Tensor,
    user_tensors: Sequence[torch.Tensor],
) -> None:
    """A storage that two or more distinct inputs share, none of which requires grad (Note [Inputs Written In
    Training])."""
    group = layout.groups[item.group]
    input_of = {j: i for i, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    members = [m for m, same in zip(group.members, group.same_as, strict=True) if same is None]
    if any(user_tensors[input_of[m]].requires_grad for m in members):
        return
    paths = tuple(dict.fromkeys(flat.leaves[layout.leaves[m].owner].path for m in members))
    if len(paths) > 1:
        record.shared_storages[storage_key(base)] = paths
        plain = (user_tensors[input_of[m]] for m in members if layout.trees[input_of[m]] is None)
        record.shared_members[storage_key(base)] = tuple(dict.fromkeys(plain))


def _initial_layouts(
    layout: DenseLayout, user_tensors: Sequence[torch.Tensor]
) -> tuple[list[Meta], list[object | None], list[tuple[tuple[Meta, object], ...]]]:
    """FunctionalRun's initial_metas, initial_wrapper_keys and initial_inner_wrappers of the tensor inputs."""
    metas = [leaf_meta(t) for t in user_tensors]
    keys = [None if tree is None else storage_key(t) for tree, t in zip(layout.trees, user_tensors, strict=True)]
    inner = [tuple((leaf_meta(w), storage_key(w)) for _, w in inner_wrappers(t, "t")) for t in user_tensors]
    return metas, keys, inner


def _finals(layout: DenseLayout, user_tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """`FunctionalRun.finals`: the dense leaves of the inputs as the program left them."""
    finals: list[torch.Tensor] = []
    for tree, tensor in zip(layout.trees, user_tensors, strict=True):
        finals.extend([tensor] if tree is None else flatten_subclass(tensor, tree.path)[1])
    return finals


def run_functional(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    graph_values: Sequence[torch.Tensor],
    *,
    requires_grad_like: Sequence[torch.Tensor] | None = None,
    clone_inputs: frozenset[int] = frozenset(),
    clone_graph_inputs: frozenset[int] = frozenset(),
    view_clone_inputs: frozenset[int] = frozenset(),
    own_base_views: bool = False,
    replay_reads: tuple[object, ...] | None = None,
    new_leaves: tuple[bool, ...] | None = None,
    no_grad_leaf_views: tuple[int, ...] = (),
    input_base_leaf_views: tuple[int, ...] = (),
    no_history_calls: tuple[int, ...] = (),
    hold: NewLeafHold | None = None,
    function_returns: tuple[tuple[int, ...], ...] | None = None,
    own_leaves: frozenset[int] = frozenset(),  # the first analysis's Analysis.own_leaf_inputs (`own_leaf_inputs`)
    read_only: frozenset[int] = frozenset(),  # of clone_inputs: run uncloned (joint.py `_read_only_leaves`)
) -> FunctionalRun:
    """Run the program on functional views of `graph_values`; a FunctionalTensorMode must be active."""
    graph_fun, graph_grad_leaves, dense, detached, user_tensors = _functional_inputs(
        flat, layout, graph_values, requires_grad_like, clone_graph_inputs, own_base_views, own_leaves
    )
    grad_leaves = list(user_tensors)
    clone_inputs -= own_stand_ins(flat, layout, requires_grad_like or (), own_leaves)  # (its own stand-in: the leaf)
    viewed, uncloned = _traced_as_views(layout, clone_inputs), list(dense)  # (uncloned: the leaves before clones)
    shift, moved, restrided, copy_on_contiguous = _clone_inputs(
        flat, layout, dense, user_tensors, requires_grad_like, (clone_inputs, view_clone_inputs, viewed), read_only
    )
    originals = _originals(layout, dense, uncloned, read_only)
    initial_metas, initial_wrapper_keys, initial_inner_wrappers = _initial_layouts(layout, user_tensors)
    initial_nodes: list[object | None] = [t.grad_fn for t in user_tensors]
    tensor_at: dict[int, torch.Tensor] = dict(zip(flat.tensor_indices, user_tensors, strict=True))
    values = [tensor_at.get(k, v) for k, v in enumerate(flat.values)]
    state, args, kwargs = unflatten_call(flat, values)
    record = SwapRecord(copy_on_contiguous=copy_on_contiguous, hold=hold)  # (Note [Training Without A Function])
    leaf_views = (no_grad_leaf_views, input_base_leaf_views, no_history_calls)
    _give_replays(record, replay_reads, new_leaves, leaf_views, function_returns)
    record.pin((graph_fun, dense, originals, user_tensors, grad_leaves, detached))  # Note [Storage Swaps By Rebinding]
    record.hidden.update(id(t) for t in detached)  # writes through them are hidden from autograd, as in eager
    _note_grad_inputs(record, flat, layout, user_tensors, requires_grad_like, {*viewed, *view_clone_inputs}, own_leaves)
    _note_input_storages(record, flat, layout, graph_fun, dense, originals, user_tensors, moved)
    record.program_start_mark = autograd_sequence_mark()  # Note [set_ Under Grad]
    with swap_modes(record, [*dense, *originals]):
        try:
            output = call(state, args, kwargs)
        except DataDependentError as e:
            raise UnsupportedError(_value_read_message(e)) from e
        except TypeError as e:
            if is_value_read_type_error(e):
                raise UnsupportedError(_value_read_message(e)) from e
            raise
        except (RuntimeError, ValueError) as e:
            _refuse_run_error(e, record, (flat, layout, user_tensors), restrided)
            raise
        check_unseen_histories(record, (output, user_tensors, args, kwargs))  # (views of gained bases: grad_scope.py)
        if record.absolute_frames:
            check_absolute_frames(record)  # Note [as_strided On Inputs]: the outputs read them
        if record.unwritten_storages:  # Note [Storage Swaps By Rebinding]
            check_unwritten_at_end(record, [o for o in pytree.tree_leaves(output) if isinstance(o, torch.Tensor)])
    _check_containers_unchanged(flat, values, (state, args, kwargs))
    return FunctionalRun(
        graph_inputs=graph_fun,
        graph_grad_leaves=graph_grad_leaves,
        swaps=record,
        dense=dense,
        grad_leaves=grad_leaves,
        user_tensors=user_tensors,
        originals=originals,
        finals=_finals(layout, user_tensors),
        initial_metas=initial_metas,
        initial_wrapper_keys=initial_wrapper_keys,
        initial_inner_wrappers=initial_inner_wrappers,
        initial_nodes=initial_nodes,
        clone_offset_shift=shift,
        moved_clones=frozenset(moved),
        output=output,
    )


def _originals(
    layout: DenseLayout, dense: list[torch.Tensor], uncloned: list[torch.Tensor], read_only: frozenset[int]
) -> list[torch.Tensor]:
    """Each dense leaf's value as the program found it (`FunctionalRun.originals`): an alias, which keeps the value
    and layout the leaf had whatever the program does to the leaf. A leaf of a read-only input (joint.py
    `_read_only_leaves`: the analysis found it only read) that runs uncloned is its own original: nothing changes it,
    so the alias, an op through functionalization and the fake mode whose node the graph drops, is left out (its
    node's name taken, so that later nodes keep theirs: Note [Training Through A Joint Graph])."""
    own = {j for i in read_only for j in layout.leaves_of_input[i] if dense[j] is uncloned[j]}
    originals = []
    for j, d in enumerate(dense):
        if j in own:
            skip_alias_name(d)
            originals.append(d)
        else:
            originals.append(functional_alias(d))
    return originals


def _give_replays(
    record: SwapRecord,
    reads: tuple[object, ...] | None,
    new_leaves: tuple[bool, ...] | None,
    leaf_views: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    function_returns: tuple[tuple[int, ...], ...] | None,
) -> None:
    """The answers of the analysis run that this run replays, in call order (None: this run is the analysis's)."""
    record.replayed_reads = reads  # Note [Grad Mode And Autograd Reads]
    record.replayed_new_leaves = new_leaves  # Note [Training Without A Function]
    record.replayed_no_grad_leaf_views = frozenset(leaf_views[0])
    record.replayed_input_base_leaf_views = frozenset(leaf_views[1])
    record.replayed_no_history_calls = frozenset(leaf_views[2])  # (and the calls whose results it detaches)
    record.replayed_function_returns = function_returns  # Note [Custom Functions]


def _functional_inputs(
    flat: FlatInputs,
    layout: DenseLayout,
    graph_values: Sequence[torch.Tensor],
    requires_grad_like: Sequence[torch.Tensor] | None,
    clone_graph_inputs: frozenset[int],
    own_base_views: bool,
    own_leaves: frozenset[int],
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """The functional graph inputs, what gradients are taken with respect to, the dense leaves, the members
    detached from a base that requires grad, and the user's tensors rebuilt over the leaves."""
    graph_fun = [to_functional(v) for v in graph_values]
    graph_grad_leaves = list(graph_fun)
    own: dict[DenseIndex, torch.Tensor] = {}  # Note [Aliased Inputs In Training]
    for k in sorted(clone_graph_inputs):
        # A synthetic base that requires grad: the program mutates (views of) a clone, and gradients are taken
        # with respect to the base as it was (Note [Training Through A Joint Graph]).
        graph_fun[k], members = clone_synthetic_base(layout, flat, k, graph_fun[k], own_base_views)
        own.update(members)
    dense = dense_from_graph_inputs(layout, graph_fun)
    for m, member in own.items():
        dense[m] = member
    _retake_flagless_views(flat, layout, dense)
    detached = (
        []
        if requires_grad_like is None
        else _detach_members_without_grad(flat, layout, dense, requires_grad_like, own_leaves)
    )
    user_tensors = rebuild_user_tensors(layout, dense)
    if requires_grad_like is not None:
        # Rebuilt wrappers are fresh leaves: give them the requires_grad of the input they stand for.
        # (not one alone over its whole storage that requires none as passed: the leaf without grad it stands for
        # gets its accumulator at the flag, at the size the program gave it: `_leaf_inputs`)
        late = set(_leaf_inputs(flat, layout, set(), requires_grad=False)) if torch.is_grad_enabled() else set()
        for i, (t, like) in enumerate(zip(user_tensors, requires_grad_like, strict=True)):
            if like.requires_grad and not t.requires_grad and not (i in late and _alone_over_storage(layout, i)):
                t.requires_grad_(True)
    return graph_fun, graph_grad_leaves, dense, detached, user_tensors


def _clone_inputs(
    flat: FlatInputs,
    layout: DenseLayout,
    dense: list[torch.Tensor],
    user_tensors: list[torch.Tensor],
    requires_grad_like: Sequence[torch.Tensor] | None,
    which: tuple[frozenset[int], frozenset[int], dict[int, int]],
    read_only: frozenset[int] = frozenset(),
) -> tuple[dict[int, int | torch.SymInt], set[int], list[int], set[int]]:
    """Put clones of the inputs that run as a clone (`which`: those, those whose clone is a view, and those traced
    as views of another input) in their place in `user_tensors`, and the clones' leaves in `dense`; returns the
    clones' offset shifts, the dense leaves whose clone moved, those restrided, and the clones `contiguous()` copies."""
    clone_inputs, view_clone_inputs, viewed = which
    late = set(_made_to_require_grad(flat, layout, set(viewed) | set(view_clone_inputs), requires_grad_like))
    shift: dict[int, int | torch.SymInt] = {}
    grouped = {m for g in layout.groups for m in g.members}
    clones: dict[int, torch.Tensor] = {}  # id of the input object -> its clone (the same object passed twice)
    moved: set[int] = set()  # dense leaves whose clone has other offsets or strides than the input
    restrided: list[int] = []  # ... other strides (an input whose elements overlap is cloned contiguous)
    copy_on_contiguous: set[int] = set()
    for i in sorted(clone_inputs, key=lambda i: i in viewed):
        # The program runs on a clone of the input (autograd-visible): gradients are taken with respect to the
        # input as it was, and a wrapper that is a non-leaf in eager is one here too (see Note [Training
        # Through A Joint Graph]). The clone's leaves stand for the input's leaves from here on. A subclass input
        # that shares storage with another keeps its inner tensors (Note [Aliased Inputs In Training]).
        original = user_tensors[i]
        if i in read_only and i not in viewed and i not in view_clone_inputs and _clones_plainly(original):
            skip_node_name("clone")  # (the graph's later clones keep their names)
            continue
        clone = clones.get(id(original))
        if clone is None:
            shared = layout.trees[i] is not None and any(j in grouped for j in layout.leaves_of_input[i])
            if i in viewed:  # Note [Aliased Inputs In Training]
                view = cast(torch.Tensor, flat.values[flat.tensor_indices[i]])
                # (a flagless no_grad view is taken again under no_grad: Note [Aliased Inputs In Training])
                flagless = flagless_no_grad_view(view)
                with torch.set_grad_enabled(torch.is_grad_enabled() and not flagless):
                    clone = replay_view(view, user_tensors[viewed[i]])
                if flagless:
                    take_creation_meta(clone, view)  # (one taken inside inference_mode: eager's errors name it)
            elif shared:
                clone = cast(torch.Tensor, _SameStorageClone.apply(original))  # type: ignore[no-untyped-call]  # untyped in torch
            elif layout.trees[i] is not None and not clone_keeps_structure(_fake_of(requires_grad_like, original, i)):
                clone = cast(torch.Tensor, _InnerClone.apply(original))  # type: ignore[no-untyped-call]  # untyped in torch
            else:
                real = flat.values[flat.tensor_indices[i]]
                clone = _strided_clone(original, isinstance(real, torch.Tensor) and is_leaf_before_base_write(real))
            if i in view_clone_inputs and not clone._is_view():
                clone = clone.view_as(clone)  # Note [Input Updates]
            elif i in late and clone._is_view():
                # An input whose elements overlap runs as an expand() of a compact clone: a view, which detach_()
                # cannot make the leaf without grad it stands for (Note [Leaves Laid Out Anew Under no_grad]);
                # detach() makes one in the same layout, over the same storage.
                clone = clone.detach()
            clones[id(original)] = clone
            if not shared and clone.is_contiguous() and not original.is_contiguous():
                copy_on_contiguous.add(id(clone))  # Note [In-Place Ops As Eager Runs Them]
        user_tensors[i] = clone
        if layout.trees[i] is not None and layout.wrapper_bytes:
            widen_wrapper_storage(clone, layout.wrapper_bytes[i])  # Note [Wrapper Storage]
        leaves = [clone] if layout.trees[i] is None else flatten_subclass(clone, "clone")[1]
        for j, leaf in zip(layout.leaves_of_input[i], leaves, strict=True):
            shift[j] = dense[j].storage_offset() - leaf.storage_offset()
            if not _same_offsets(shift[j]) or leaf_meta(leaf)[1] != leaf_meta(dense[j])[1]:
                moved.add(j)
            if leaf_meta(leaf)[1] != leaf_meta(dense[j])[1]:
                restrided.append(j)
            dense[j] = leaf
    for i, t in enumerate(user_tensors):
        if id(t) in clones:  # the same object at a position not cloned itself: it is the clone too
            user_tensors[i] = clones[id(t)]
    return shift, moved, restrided, copy_on_contiguous


def _note_grad_inputs(
    record: SwapRecord,
    flat: FlatInputs,
    layout: DenseLayout,
    user_tensors: list[torch.Tensor],
    requires_grad_like: Sequence[torch.Tensor] | None,
    as_views: set[int],
    own_leaves: frozenset[int],
) -> None:
    """What the record needs of the inputs' autograd state (Note [Grad Mode And Autograd Reads])."""
    # See Note [Grad Mode And Autograd Reads]
    for index, tensor in zip(flat.tensor_indices, user_tensors, strict=True):
        real = flat.values[index]
        if isinstance(real, torch.Tensor) and real.requires_grad:
            record.eager_inputs[id(tensor)] = real
            # (the node eager's answers stand for until the run's changes: rules/autograd_state; not where reading
            # the history raises, a multi-output view whose base was written: the backward's retrace runs here too)
            if not grad_fn_raises(real) and not grad_fn_raises(tensor) and not real.is_leaf:
                record.entry_nodes[id(tensor)] = tensor.grad_fn
    for position, (index, tensor) in enumerate(zip(flat.tensor_indices, user_tensors, strict=True)):
        record.run_inputs.append(tensor)  # Note [Grad Mode And Autograd Reads]
        record.run_input_paths.append(flat.leaves[index].path)
        record.input_positions.setdefault(id(tensor), (position, cast(torch.Tensor, flat.values[index])))
        real = flat.values[index]
        like = None if requires_grad_like is None else requires_grad_like[position]
        ahead = like is not None and like.requires_grad  # (the program makes it require grad: set from the start)
        if isinstance(real, torch.Tensor) and (real.requires_grad or ahead) and _flag_of_its_own(real):
            # a view requiring grad of its own, over a base that requires none: eager's views of it taken under
            # no_grad require none (SwapRecord.view_input_gains, the flag there before the program's first op; so
            # too where the compile sets ahead a flag the program sets later, as eager's would run with it so)
            record.view_input_gains.setdefault(id(tensor), -1)
    # (inputs made to require grad: where grad mode is on at the call)
    late = _leaf_inputs(flat, layout, as_views, requires_grad=False) if torch.is_grad_enabled() else []
    # (and those over shared storage whose flag is their own: own_leaf_inputs, which the compile makes require grad)
    own = [] if requires_grad_like is None else [i for i in sorted(own_leaves) if requires_grad_like[i].requires_grad]
    record.late_grad = {id(user_tensors[i]) for i in (*late, *own)}
    if requires_grad_like is not None:  # Note [Leaves Laid Out Anew Under no_grad]
        made = [*_made_to_require_grad(flat, layout, as_views, requires_grad_like), *own]
        for i in made:
            if user_tensors[i].requires_grad:  # (a view clone was detach()ed by _clone_inputs)
                with torch.no_grad():
                    user_tensors[i].detach_()
            record.releafed[id(user_tensors[i])] = None
        # (and those made to require grad: eager's accumulator is made at the first read with grad after the flag,
        # at the size the program's in-place view ops gave the leaf by then)
        leaves = _leaf_inputs(flat, layout, as_views, requires_grad=True)
        record.releafable = {id(user_tensors[i]) for i in (*leaves, *made)}
        note_view_inputs(record, _view_inputs(flat, layout, user_tensors))  # Note [Stale View Functions]


def _flag_of_its_own(real: torch.Tensor) -> bool:
    """Is the input `real` a view whose flag, where it requires grad, is its own or its history's, its base requiring
    none (eager's views of it take requires_grad from that base)? One with history is a view taken with grad of such
    a leaf view (`v[1:]` of `b[0].requires_grad_()`): its history leads to that view's accumulator, not its base."""
    base = real._base
    return real._is_view() and base is not None and not base.requires_grad


def _note_inference_inputs(
    record: SwapRecord,
    flat: FlatInputs,
    layout: DenseLayout,
    dense: list[torch.Tensor],
    user_tensors: list[torch.Tensor],
) -> None:
    """The run's stand-ins of the input leaves that are inference tensors (their inference-ness guarded): eager's
    in-place op on one outside inference_mode raises (SwapRecord.counter_absent); a kernel's write of an argument it
    does not advance the counter of (batch norm's running stats) passes, and so does the epilogue's (Note [Input
    Updates])."""
    for i, index in enumerate(flat.tensor_indices):
        leaves = dense_leaves(cast(torch.Tensor, flat.values[index]))
        for j, leaf in zip(layout.leaves_of_input[i], leaves, strict=True):
            if leaf.is_inference():
                record.inference_tensors.add(id(dense[j]))
                if layout.trees[i] is None:
                    record.inference_tensors.add(id(user_tensors[i]))


def _note_input_storages(
    record: SwapRecord,
    flat: FlatInputs,
    layout: DenseLayout,
    graph_fun: list[torch.Tensor],
    dense: list[torch.Tensor],
    originals: list[torch.Tensor],
    user_tensors: list[torch.Tensor],
    moved: set[int],
) -> None:
    """What the record needs of the inputs' storages: synthetic bases, spans, paths, version counter families."""
    _note_inference_inputs(record, flat, layout, dense, user_tensors)  # (inputs without a version counter)
    for item, value in zip(layout.graph_inputs, graph_fun, strict=True):
        if isinstance(item, AliasGroupRef):
            record.alias_bases[storage_key(value)] = value
            group = layout.groups[item.group]
            if all(same is not None for same in group.same_as[1:]):  # (one tensor: Note [Storage Swaps By Rebinding])
                first = group.members[0]
                record.lone_bases[storage_key(value)] = (layout.leaves[first].path, first)
            _note_shared_storage(record, flat, layout, item, value, user_tensors)
    grouped = {m for g in layout.groups for m in g.members}
    for leaf_index, o in enumerate(originals):
        span = elements_of(list(o.shape), list(o.stride()), o.storage_offset())
        if span is not None and span.exact is not None and len(span.exact) < o.numel() and leaf_index not in moved:
            record.overlapping_inputs.add(storage_key(o))
        if leaf_index in moved:
            # Elements of the clone are not at the input's offsets: an as_strided view of it is refused (Note
            # [as_strided On Inputs]).
            span = Elements(0, -1, frozenset())
        if leaf_index not in grouped and span is not None:
            record.input_spans[storage_key(o)] = (span, layout.leaves[leaf_index].path, DenseIndex(leaf_index))
        if leaf_index not in grouped:
            record.own_inputs[storage_key(o)] = (layout.leaves[leaf_index].path, DenseIndex(leaf_index))
    for leaf_index, o in enumerate(originals):
        record.input_originals.setdefault(storage_key(o), o)
        record.original_ids.add(id(o))
        path = flat.leaves[layout.leaves[leaf_index].owner].path
        paths = record.input_paths.get(storage_key(o), ())
        record.input_paths[storage_key(o)] = paths if path in paths else (*paths, path)
    for leaf_family, d in zip(layout.leaf_families, dense, strict=True):
        record.family[id(d)] = -1 - leaf_family
    for t, fam in zip(user_tensors, layout.wrapper_families, strict=True):
        if fam >= 0:
            record.family[id(t)] = -1_000_000 - fam
            record.family_wrappers.setdefault(-1_000_000 - fam, []).append(t)
            if not t.requires_grad:
                record.grad_free_members.add(id(t))
    note_freed_inputs(  # Note [Storage Swaps By Rebinding]
        record,
        [
            (storage_key(originals[leaves[0]]), cast(torch.Tensor, flat.values[index]))
            for tree, leaves, index in zip(layout.trees, layout.leaves_of_input, flat.tensor_indices, strict=True)
            if tree is None and not is_fake(flat.values[index])
        ],
    )


# what autograd raises where a mark_dirty of a view rebases its base's history inside inference_mode under
# functionalization (the regenerated view, or its CopySlices, is made there as an inference tensor)
_REBASE_IN_INFERENCE = ("new_fn INTERNAL ASSERT", "Cannot set version_counter for inference tensor")


# what autograd raises where a custom Function that returns several tensors marks dirty an input that is a view
_DIRTY_VIEW_OF_MANY = "If your Function modifies inplace an input that is a view of another Tensor"


def _refuse_dirty_member(record: SwapRecord, flat: FlatInputs, e: RuntimeError | ValueError) -> None:
    """Refuse a custom Function returning several tensors that marks dirty an input which eager's is no view, where
    the run lays it out as a view of its group's synthetic base (Note [Aliased Inputs In Training]); where eager's
    is a view too, the error is eager's own."""
    for i, (position, real) in record.input_positions.items():
        if i in record.dirty_marks and not real._is_view():
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[position]].path}: a custom autograd.Function that returns several "
                "tensors writes this input in place and marks it dirty (ctx.mark_dirty); it shares storage with "
                "another input, so the compiled run lays it out as a view of their common storage (Note [Synthetic "
                "Bases]), where autograd refuses the mark (a dirty view must be the Function's only output), while "
                "eager's input is no view. Pass the inputs without shared storage (a clone of one), or return only "
                "the written tensor from the Function"
            ) from e


def _refuse_run_error(
    e: RuntimeError | ValueError,
    record: SwapRecord,
    inputs: tuple[FlatInputs, DenseLayout, Sequence[torch.Tensor]],
    restrided: Sequence[int],
) -> None:
    """The refusal, if any, that an error the program's run raised stands for: the rule the failing op broke (a
    refusal the run raised, or one its failure shows), else one the program broke before it; returns where the error
    is the program's own (or a refusal already)."""
    flat, layout, user_tensors = inputs
    # A program called under no_grad that turned grad back on and computed on tensors requiring grad is
    # refused whatever happened next (an in-place write of a subclass input's leaf fake raised here)
    check_grad_reenabled(record.grad_reenabled, training=False)
    if isinstance(e, UnsupportedError):  # (a rule the failing op broke: named over an earlier gain's, below)
        return
    raised_with_grad = (
        "a leaf Variable that requires grad is being used in an in-place",
        "with grad mode enabled",
    )
    if not record.grad_at_start and any(m in str(e) for m in raised_with_grad):
        # (under no_grad only an op run with grad on raises these; eager's input is no leaf, the stand-in of a
        # subclass input is; a view input is laid out under no_grad, eager's was taken with grad: a set_() the
        # record does not see as a call)
        raise GradReenabledError(
            "the program turns grad mode back on inside (torch.enable_grad() / set_grad_enabled(True)) and "
            "writes in place an input that requires grad (a tensor subclass, or a view input), while it is "
            "called under no_grad "
            "(Note [Grad Mode And Autograd Reads]). Call the compiled function with grad mode "
            "on, or write outside that region"
        ) from e
    check_flagless_view_set(record, e)  # (a set_() with grad on, which the record sees no call of)
    if "a leaf Variable that requires grad is being used in an in-place" in str(e):
        _refuse_flagged_stand_in_written(flat, user_tensors, e)
    _refuse_dirty_function(record, flat, e)
    if "Could not set tensor of type" in str(e) and record.swapped_by_data:
        raise UnsupportedError(
            "the program set_()s a tensor whose dtype a `.data =` changed: the run's tensor keeps the dtype it "
            "was made with, which set_() checks against its source. Assign a tensor of the same dtype, or "
            "set_() a fresh tensor"
        ) from e
    inference_view = (
        "Cannot set version_counter for inference tensor",
        "on inference tensor outside",
        "Inplace update to inference tensor outside InferenceMode",
    )
    if any(m in str(e) for m in inference_view) and not record.inference_write_raised:  # (eager's own error)
        raise UnsupportedError(
            "the program takes a view, inside a torch.inference_mode() block, of a tensor subclass made outside it, "
            "or writes outside the block a tensor the run made inside it: the functionalized run makes the "
            "results inside the block inference tensors (a subclass view's wrapper too), which take no version "
            f"counter of a base and no in-place write outside the block ({type(e).__name__}: "
            f"{str(e).splitlines()[0]}), as eager's do where eager makes them there (a plain tensor's view is taken "
            "again outside the block, with eager's creation meta: Note [Grad Mode And Autograd Reads]). Take the "
            "view outside the inference_mode block, or use torch.no_grad() there"
        ) from e
    if restrided and _is_view_stride_error(e):
        path = flat.leaves[layout.leaves[restrided[0]].owner].path
        raise UnsupportedError(
            f"{path}: this input requires grad and its elements overlap (an expand() or a zero stride), so in "
            "training the program runs on a contiguous clone of it (Note [Training Through A Joint Graph]), "
            f"and a view of it fails there that eager's strides allow ({type(e).__name__}: "
            f"{str(e).splitlines()[0]}). Pass the tensor before expand() and expand it inside the function, "
            "or use reshape()"
        ) from e
    # (an input made to require grad after a read with grad, where no rule names the failing op: the analysis may
    # let such a gain pass, but a run that failed has no end at which to judge it)
    check_gained_after_read(record.gained_after_read, user_tensors, flat)


def _refuse_dirty_function(record: SwapRecord, flat: FlatInputs, e: RuntimeError | ValueError) -> None:
    """Refuse a custom autograd.Function's mark_dirty() that autograd raised on in the run, where eager's ran."""
    if "a leaf Variable that requires grad has been used in an in-place" in str(e) and record.marked_dirty:
        raise UnsupportedError(
            "a custom autograd.Function writes in place and marks dirty (ctx.mark_dirty) a tensor that the run lays "
            "out as an autograd leaf where eager's is a view (of an input made to require grad by requires_grad_(), "
            "or of a tensor subclass input): autograd refuses the dirty leaf. Pass the Function a clone"
        ) from e
    if _DIRTY_VIEW_OF_MANY in str(e):
        _refuse_dirty_member(record, flat, e)
    if record.dirty_view_in_inference is not None and any(m in str(e) for m in _REBASE_IN_INFERENCE):
        raise UnsupportedError(
            f"the custom autograd.Function {record.dirty_view_in_inference.__name__} is applied with grad mode on "
            "inside a torch.inference_mode() block and marks dirty (ctx.mark_dirty) a view that requires grad: "
            "eager rebases the history of the view's base there (a CopySlices node), which the functionalized run "
            f"cannot do inside inference mode ({type(e).__name__}: {str(e).splitlines()[0][:80]}). Apply the "
            "Function outside the inference_mode block, pass it a clone, or use torch.no_grad() there"
        ) from e


def _refuse_flagged_stand_in_written(
    flat: FlatInputs, user_tensors: Sequence[torch.Tensor], e: RuntimeError | ValueError
) -> None:
    """Refuse a write in place (a set_() onto itself) with grad of an input passed without requires_grad whose
    stand-in requires grad from the start, as the program makes it later (requires_grad_()): eager's input needed
    no grad at the write and autograd let it; the run's leaf raises."""
    for k, t in zip(flat.tensor_indices, user_tensors, strict=True):
        real = flat.values[k]
        if isinstance(real, torch.Tensor) and not real.requires_grad and t.requires_grad and t.is_leaf:
            raise UnsupportedError(
                f"{flat.leaves[k].path} is set_() or written in place with grad enabled before the program makes it "
                "(or an input sharing its storage) require grad (requires_grad_()): eager's needs no grad at the write, "
                "the compiled call's requires grad from the start (Note [Grad Mode And Autograd Reads]). Call "
                "requires_grad_() outside the compiled function, before the write, or write under torch.no_grad()"
            ) from e


def _check_containers_unchanged(flat: FlatInputs, values: Sequence[object], call: object) -> None:
    """Refuse a program that assigned into a list or dict it was given (`d["a"] = d["a"] * 2`): the compiled
    program runs on containers rebuilt from the leaves, so the caller's would keep their old entries."""
    after, spec = pytree.tree_flatten(call)
    if spec != flat.spec:
        raise UnsupportedError(
            "the program adds, removes or replaces entries of a list or dict passed as an input; the caller's "
            "container would not change as in eager. Return the new values instead of storing them in the input"
        )
    for leaf, before, now in zip(flat.leaves, values, after, strict=True):
        if now is not before:
            raise UnsupportedError(
                f"{leaf.path}: the program stores a new value into the list or dict that held this input; the "
                "caller's container would keep the old one. Return the new value instead of storing it in the input"
            )


def _is_view_stride_error(e: Exception) -> bool:
    text = str(e)
    return "Cannot view a tensor with shape" in text or "view size is not compatible with input tensor's size" in text


def _same_offsets(shift: int | torch.SymInt) -> bool:
    return isinstance(shift, int) and shift == 0


def _retake_flagless_views(flat: FlatInputs, layout: DenseLayout, dense: list[torch.Tensor]) -> None:
    """A plain member of an alias group whose input is a view taken under no_grad of a tensor that requires grad,
    with no flag of its own (`flagless_no_grad_view`), is taken again under no_grad of its traced view of the
    synthetic base: it requires grad through that base and records no edge, as eager's does (Note [Aliased Inputs
    In Training]). One that requires_grad_() gave a flag of its own is a leaf with an accumulator of its own in eager:
    a plain one runs as a stand-in of its own (runtime.steps.own_accumulator_inputs); any other is refused. Not a
    view taken with grad of such a view: autograd gives it that view's NO_GRAD_MODE creation meta, but it has history
    (a node to that view's accumulator) and no flag of its own, traced as any view with history."""
    owner = {j: i for i, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    own = own_accumulator_inputs(layout, [flat.values[k] for k in flat.tensor_indices])
    for group in layout.groups:
        for m, same in zip(group.members, group.same_as, strict=True):
            i = owner[m]
            real = cast(torch.Tensor, flat.values[flat.tensor_indices[i]])
            if same is None and layout.trees[i] is None and dense[m].requires_grad and flagless_no_grad_view(real):
                with torch.no_grad():
                    dense[m] = dense[m].view_as(dense[m])
                take_creation_meta(dense[m], real)  # (one taken inside inference_mode: eager's errors name it)
            elif is_no_grad_view(real) and leaf_view_of_its_own(real) and i not in own:
                raise UnsupportedError(
                    f"{flat.leaves[flat.tensor_indices[i]].path}: a view taken under no_grad (or inside "
                    "inference_mode) that requires_grad_() gave a flag of its own, so eager's is a leaf with an "
                    "accumulator of its own, passed beside another input over the storage the program writes, and "
                    "not a plain tensor whose history is unread (a tensor subclass, or one whose base was written "
                    "since it was taken), which could run as a stand-in of its own: the compiled call traces it as a "
                    "view of the storage's base and would send its gradient there. Pass a .clone() of it, or call "
                    "requires_grad_() on a clone"
                )


def _detach_members_without_grad(
    flat: FlatInputs,
    layout: DenseLayout,
    dense: list[torch.Tensor],
    like: Sequence[torch.Tensor],
    own_leaves: frozenset[int],
) -> list[torch.Tensor]:
    """A plain input that shares storage with one that requires grad, and does not itself (x.detach(), x), is a
    view of the synthetic base that requires grad: detach it, so that gradients do not flow through it and writes
    through it stay hidden from autograd, as in eager. So too one the program makes require grad (a stand-in of its
    own, a leaf: runtime.steps.own_stand_in_inputs), and one that requires no grad apart in autograd from the other
    members (`view_bases.autograd_apart`) whatever the base: a write with grad gives it a history of its own, as
    eager's (Note [Inputs Written In Training]). Returns the detached members."""
    owner = {j: i for i, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    own = own_stand_ins(flat, layout, like, own_leaves)
    detached: list[torch.Tensor] = []
    for group in layout.groups:
        for k, m in enumerate(group.members):
            i = owner[m]
            same = group.same_as[k]
            if same is not None:
                dense[m] = dense[group.members[same]]
            elif (
                layout.trees[i] is None
                and (
                    i in own
                    or not like[i].requires_grad
                    and (dense[m].requires_grad or autograd_apart(layout, flat.values, m))
                )
                or layout.trees[i] is not None
                and dense[m].requires_grad
                and not dense_leaves(like[i])[layout.leaves[m].position].requires_grad
            ):
                dense[m] = dense[m].detach()
                detached.append(dense[m])
    return detached


def own_stand_ins(
    flat: FlatInputs, layout: DenseLayout, like: Sequence[torch.Tensor], own_leaves: Collection[int] = ()
) -> frozenset[int]:
    """runtime.steps.own_stand_in_inputs of the compile: the inputs' flags as passed; gaining, those `like` makes
    require grad; those of `own_leaves` (the first analysis's own_leaf_inputs) it makes require grad; and the leaf
    views with an accumulator of their own (runtime.steps.own_accumulator_inputs)."""
    reals = [flat.values[k] for k in flat.tensor_indices]
    passed = [cast(torch.Tensor, r).requires_grad for r in reals]
    gains = {i for i, t in enumerate(like) if t.requires_grad and not passed[i]}
    own = own_stand_in_inputs(layout, passed, gains) | own_accumulator_inputs(layout, reals)
    return own | frozenset(i for i in own_leaves if i in gains)


def own_stand_in_leaves(
    flat: FlatInputs, layout: DenseLayout, like: Sequence[torch.Tensor], own_leaves: Collection[int] = ()
) -> frozenset[DenseIndex]:
    """The dense leaves of `own_stand_ins`: never taken as their group's autograd root (steps.graph_example_inputs)."""
    return frozenset(j for i in own_stand_ins(flat, layout, like, own_leaves) for j in layout.leaves_of_input[i])


def own_leaves_of(analysis: Analysis) -> frozenset[int]:
    """Analysis.own_leaf_inputs as tensor positions (the first analysis's, given to every later run)."""
    return frozenset(i for i, own in enumerate(analysis.own_leaf_inputs) if own)


def own_leaf_inputs(
    flat: FlatInputs,
    layout: DenseLayout,
    gains: Collection[int],
    flagged: Collection[int],
    changed: Callable[[], Collection[int]] = frozenset,
) -> frozenset[int]:
    """Plain inputs among `gains` in an alias group no member of which requires grad as passed, whose flag is their
    own in eager: a view whose `._base` is no input in `flagged`, or a tensor no other input is a view of (x.detach()
    beside x, a view beside a sibling). Eager's requires_grad_() makes each a leaf of its own, leaving the others
    and the base without the flag. So too a tensor other inputs are views of, none of them in `flagged`, where no
    member of the group is in `changed()` (the inputs whose storage, layout or version counter the program changes):
    eager's views of it then read requires_grad from it with no history of their own, before the flag and after (no
    counter moved to regenerate one), as the run's views of the group's base do (Note [Grad Mode And Autograd Reads],
    views of gained bases); where the group is changed, a write before the flag would reach the run's earlier reads
    of those views as history. The compile's first analysis (its fakes requiring no grad) takes these among the
    inputs flagged after a read with grad (SwapRecord.gained_after_read), which would otherwise be refused, and
    records them (Analysis.own_leaf_inputs); every later run, given them, runs each as a stand-in of its own, a leaf
    without grad until the program's flag (Note [Leaves Laid Out Anew Under no_grad]), taken out of its group's
    autograd root, whose writes reach its values and none of its history (Note [Aliased Inputs In Training]). Where
    grad mode is off there is no such leaf."""
    if not torch.is_grad_enabled():
        return frozenset()
    reals = [cast(torch.Tensor, flat.values[k]) for k in flat.tensor_indices]
    owner = {j: i for i, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    found = set()
    for group in layout.groups:
        members = [owner[m] for m in group.members]
        if any(reals[i].requires_grad or layout.trees[i] is not None for i in members):
            continue
        for i in members:
            real = reals[i]
            if i not in gains or not isinstance(real, torch.Tensor):
                continue
            if real._is_view():
                if not any(reals[j] is real._base for j in flagged):
                    found.add(i)
                continue
            views = [j for j, r in enumerate(reals) if r._is_view() and r._base is real]
            if not views or (not any(j in flagged for j in views) and not any(j in changed() for j in members)):
                found.add(i)
    return frozenset(found)


def _traced_as_views(layout: DenseLayout, clone_inputs: frozenset[int]) -> dict[int, int]:
    """Cloned subclass inputs of an alias group that run as views of another cloned one, their `._base` -> it."""
    grouped = {m for g in layout.groups for m in g.members}
    out = {}
    for i, k in enumerate(layout.view_of):
        same = layout.same_wrapper[i] if layout.same_wrapper else None
        if k is None or same is not None or i not in clone_inputs or k not in clone_inputs:
            continue
        if any(j in grouped for j in layout.leaves_of_input[i]) and any(
            j in grouped for j in layout.leaves_of_input[k]
        ):
            out[i] = k
    return out


class _SameStorageClone(torch.autograd.Function):
    """A non-leaf wrapper over the very inner tensors of a subclass input (Note [Aliased Inputs In Training]): writes
    through it reach the other aliases of those inner tensors, and autograd sees a non-leaf."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        node, leaves = flatten_subclass(x, "clone")
        return unflatten_subclass(node, leaves, outer_size=x.shape, outer_stride=x.stride(), check=False)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


def _fake_of(like: Sequence[torch.Tensor] | None, original: torch.Tensor, i: int) -> torch.Tensor:
    return original if like is None else like[i]


class _InnerClone(torch.autograd.Function):
    """A wrapper over clones of a subclass input's inner tensors, for a subclass whose clone() is a plain tensor or
    has another flatten context than the input (a Partial DTensor's clone is Replicate).

    Many subclasses (torchao's quantized tensors, torch's CustomTensorPlainOut) answer most ops with plain tensors.
    A training run executes the program on a clone of each input gradients are taken for (Note [Training Through A
    Joint Graph]); for such a subclass that clone is this wrapper, whose backward passes the gradient through, so the
    program sees what it was given (same type and context, same inner values) and autograd sees a non-leaf. Whether clone() keeps
    the type is asked of the fake input outside the trace, so the question leaves no node in the graph.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        node, leaves = flatten_subclass(x, "clone")
        clones = [_strided_clone(leaf) for leaf in leaves]
        return unflatten_subclass(node, clones, outer_size=x.shape, outer_stride=x.stride(), check=False)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


class _EmptyCompactClone(torch.autograd.Function):
    """_strided_clone's compact clone of an expanded input with no elements.

    autograd's as_strided backward gives an input with no elements a plain zeros gradient whatever the type of the
    incoming one, where eager's ops on the input (slices, expand) keep a subclass gradient a subclass. So the view and
    clone run inside one Function whose backward makes the (empty) gradient with `new_zeros` of the incoming one.
    """

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, once: list[int]) -> torch.Tensor:
        ctx.size = tuple(t.shape)
        return _strided_clone(t.as_strided(once, t.stride(), t.storage_offset()))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.new_zeros(ctx.size), None


class _CompactClone(torch.autograd.Function):
    """_strided_clone's clone of an expanded input that is its own autograd root (a leaf, or a view whose base
    requires no grad): a compact clone of its elements, expanded as the input is. Eager gives such an input the
    gradient of each of its elements, overlap or not; autograd's expand and as_strided backwards would sum the
    gradients of the elements sharing memory and spread their mean. The backward passes the incoming gradient
    through, as eager's. A tensor subclass input too: its inner tensors are no autograd views, and eager's
    AccumulateGrad takes the wrapper's gradient per element as it does a plain tensor's."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, once: list[int]) -> torch.Tensor:
        compact = _strided_clone(t.as_strided(once, t.stride(), t.storage_offset()))
        return compact.expand(t.shape)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def _clones_plainly(t: torch.Tensor) -> bool:
    """Whether `_strided_clone(t)` is `t.clone()`: an input with no elements, one with symbolic sizes and a stride
    that may be 0, or one whose elements fill a range (clone() keeps its strides). A symbolic layout fills a range
    only where it does for every value of the symbols (no guard asked): clone() lays a non-dense input out
    contiguously, and which inputs are dense can depend on the values."""
    shape, stride = list(t.shape), list(t.stride())
    if _static(shape, stride) and any(st == 0 and s > 1 for s, st in zip(shape, stride, strict=True)):
        return False
    laid_out = all(_known(s > 0) and (_known(st > 0) or _known(s == 1)) for s, st in zip(shape, stride, strict=True))
    return not laid_out or _known_dense(shape, stride)


def _static(*dims: Sequence[int | torch.SymInt]) -> bool:
    return all(isinstance(d, int) for ds in dims for d in ds)


def _known(condition: bool | torch.SymBool) -> bool:
    return bool(statically_known_true(condition))


def _known_dense(shape: Sequence[int | torch.SymInt], stride: Sequence[int | torch.SymInt]) -> bool:
    """Non-overlapping and dense (the elements fill a contiguous range, in some dim order) for every value of the
    symbols: each dim of size other than 1, taken in turn, has the product of the sizes before it as its stride."""
    left = [(s, st) for s, st in zip(shape, stride, strict=True) if not _known(s == 1)]
    expected: int | torch.SymInt = 1
    while left:
        k = next((i for i, (_, st) in enumerate(left) if _known(st == expected)), None)
        if k is None:
            return False
        expected = expected * left.pop(k)[0]
    return True


def _strided_clone(t: torch.Tensor, own_root: bool = False) -> torch.Tensor:
    """A clone (autograd-visible) with the input's strides: eager's later ops see those strides (a size-1 dim's
    stride shows in the strides of results), and clone() makes a non-dense input contiguous. An input with zero
    strides (expand) is a clone of its elements, expanded as the input is: the strides of results of elementwise ops
    follow the input's zero strides in eager (a contiguous clone transposed gives (1, 2) where eager's `x.transpose(0,
    1).add(2)` is (3, 1)); `own_root` (the caller's input has no grad_fn): its gradient is taken per element
    (_CompactClone). Inputs whose elements overlap otherwise are cloned contiguous.
    A size-1 dim keeps its stride, 0 included: eager's views of the input show it (`x.transpose(0, 1)` of a (1, 2)
    input with strides (0, 2) has strides (2, 0)), and a subclass output viewing the input is rebuilt from the layout
    traced here."""
    if t.is_conj() or t.is_neg():  # (clone() resolves them: x.conj() of a conj input read as its own conjugate)
        return with_bits(_strided_clone(without_bits(t), own_root), t.is_conj(), t.is_neg())
    shape, stride = list(t.shape), list(t.stride())
    once = [1 if _known(st == 0) else s for s, st in zip(shape, stride, strict=True)]
    if _static(shape, stride) and once != shape:  # (an expanded input: its stride-0 dims are of size 1 in `once`)
        if t.numel() == 0:  # keeps a subclass gradient a subclass: see _EmptyCompactClone
            empty = _EmptyCompactClone.apply(t, once)  # type: ignore[no-untyped-call]  # untyped in torch
            return cast(torch.Tensor, empty).expand(shape)
        if own_root:  # a leaf's gradient per element, as eager's
            return cast(torch.Tensor, _CompactClone.apply(t, once))  # type: ignore[no-untyped-call]  # untyped in torch
        compact = _strided_clone(t.as_strided(once, stride, t.storage_offset()))
        return compact.expand(shape)
    if _clones_plainly(t):
        return t.clone()
    out = t.new_empty_strided(t.shape, t.stride())
    if type(out) is not type(t):  # a subclass whose op table falls back to plain tensors for it (Float8Tensor)
        return t.clone()
    return out.copy_(t)


def dense_leaves_of(value: torch.Tensor, path: str) -> tuple[SubclassNode | None, list[torch.Tensor]]:
    if is_traceable_subclass(value):
        return flatten_subclass(value, path)
    return None, [value]


def intermediate_bases(
    leaves: list[object],
    current: dict[object, DenseIndex],
    original: dict[object, DenseIndex],
    swaps: SwapRecord,
    required: frozenset[object] = frozenset(),
) -> dict[object, tuple[int, torch.Tensor]]:
    """Storages of outputs that are views of intermediates or shared by several outputs -> (base number, base).
    `required`: storages that are bases whatever this run shows (the analysis found them so: trace's
    `_analysis_bases`).

    The inner tensors of a subclass view are not autograd views (subclass ops run below autograd), so a subclass
    output that is a view of an intermediate subclass names its root's inner tensors as bases explicitly."""
    forced = _wrapper_roots(leaves, current, original, swaps)
    by_storage: dict[object, list[torch.Tensor]] = {}
    paths: dict[object, str] = {}
    for i, value in enumerate(leaves):
        if isinstance(value, torch.Tensor):
            for leaf in dense_leaves_of(value, f"out[{i}]")[1]:
                key = storage_key(leaf)
                if key not in current and key not in original:
                    by_storage.setdefault(key, []).append(leaf)
                    paths.setdefault(key, f"out[{i}]")
    bases: dict[object, tuple[int, torch.Tensor]] = {}
    for key, members in by_storage.items():
        distinct = {id(m) for m in members}
        if key in forced:
            bases[key] = (len(bases), forced[key])
            continue
        if len(distinct) < 2 and not swaps.is_view(members[0]) and key not in required:
            continue
        # a view the program did not set_() first: its chain leads to the storage's owner (`t0.set_(t1[0]); return
        # t0, t1[0]`: t0 is a view of an input, set_() onto the view, and not the storage's root)
        # (a view of a root with autograd history before one of a detach() of it: the detach's chain replays from
        # the root, not the reverse: `t1 = t0.t(); t2 = t0.detach().expand(...)`; with no history on either, under
        # no_grad, the same: a root that is a detach() comes last)
        views = sorted(
            (m for m in members if swaps.is_view(m)),
            key=lambda m: (
                id(m) in swaps.swapped_ids,
                not swaps.view_root(m).requires_grad,
                swaps.is_detach(swaps.view_root(m)),
            ),
        )
        # (not a tensor the program set_() onto the storage: the one whose storage it is keeps its autograd history,
        # `t0.set_(t1); return t0, t1`)
        owners = [m for m in members if id(m) not in swaps.swapped_ids]
        base = swaps.view_root(views[0]) if views else (owners or members)[0]
        if views and id(base) in swaps.swapped_ids:
            # set_() back onto its own root's storage: still a view of that root (Note [Outputs Over Another
            # Storage])
            through = swaps.view_root(views[0], through_swaps=True)
            base = through if storage_key(through) == key else base
        if storage_key(base) != key:
            moved_root = views and foreign_root(views[0], set(current), set(original)) is base
            if not moved_root or id(base) in swaps.retyped:
                raise left_storage_refusal(paths[key], base, views[0] if views else None, swaps)
            # (its base moved away without grad and nothing else holds the storage: the view is its own storage's
            # base, and its `._base` the moved root, Note [Outputs Over Another Storage])
            base = views[0]
        bases[key] = (len(bases), base)
    for value in leaves:  # Note [Outputs Over Another Storage]
        root = foreign_root(value, set(current), set(original)) if isinstance(value, torch.Tensor) else None
        if root is not None and storage_key(root) not in bases:
            bases[storage_key(root)] = (len(bases), root)
    inputs = set(current) | set(original)
    for value in leaves:  # Note [set_ Under Grad]
        found = grad_set_view_root(value, swaps, inputs)
        for leaf in found[1] if found is not None else ():
            bases.setdefault(storage_key(leaf), (len(bases), leaf))
    for value in leaves:  # Note [Outputs Over Another Storage]
        if (root := no_grad_set_view_root(value, swaps, inputs)) is not None:
            bases.setdefault(storage_key(root), (len(bases), root))
    for value in leaves:  # Note [Output Regeneration]
        for leaf in found[1] if (found := set_view_root(value, swaps, inputs)) is not None else ():
            bases.setdefault(storage_key(leaf), (len(bases), leaf))
    return bases


def _wrapper_roots(
    leaves: list[object], current: dict[object, DenseIndex], original: dict[object, DenseIndex], swaps: SwapRecord
) -> dict[object, torch.Tensor]:
    forced: dict[object, torch.Tensor] = {}
    for value in leaves:
        if not isinstance(value, torch.Tensor) or not is_traceable_subclass(value):
            continue
        t = cast(torch.Tensor, value)
        while (record := swaps.views.get(id(t))) is not None:
            t = record.source
        if t is cast(object, value) or not is_traceable_subclass(t):
            continue
        root_leaves = flatten_subclass(t, "root")[1]
        keys = [storage_key(leaf) for leaf in root_leaves]
        if any(k in current or k in original for k in keys):
            continue  # a view of an input: regenerated from the input, not from a base
        forced.update(zip(keys, root_leaves, strict=True))
    return forced


def _made_to_require_grad(
    flat: FlatInputs, layout: DenseLayout, as_views: set[int], requires_grad_like: Sequence[torch.Tensor] | None
) -> list[int]:
    """Leaf inputs that do not require grad as passed and that the compile made require grad, where grad mode is on
    at the call: the run's stand-in for each is a leaf without grad (Note [Leaves Laid Out Anew Under no_grad])."""
    if requires_grad_like is None or not torch.is_grad_enabled():
        return []
    late = _leaf_inputs(flat, layout, as_views, requires_grad=False)
    return [i for i in late if requires_grad_like[i].requires_grad]


def _leaf_inputs(flat: FlatInputs, layout: DenseLayout, as_views: set[int], *, requires_grad: bool) -> list[int]:
    """Positions of leaf inputs (plain or subclass, views of a base that requires none among them) that require grad
    as passed, or not, in no alias group and not
    run as views (Note [Leaves Laid Out Anew Under no_grad]: the leaves laid out anew, and the inputs made to require
    grad)."""
    grouped = {m for g in layout.groups for m in g.members}
    found = []
    for i, leaves in enumerate(layout.leaves_of_input):
        real = flat.values[flat.tensor_indices[i]]
        if (
            not isinstance(real, torch.Tensor)
            or not is_leaf_before_base_write(real)
            or real.requires_grad != requires_grad
        ):
            continue
        # (an input without grad alone over a storage that resize_() grows, too: runtime.steps.own_stand_in_inputs)
        alone = not requires_grad and layout.trees[i] is None and _alone_over_storage(layout, i)
        if i not in as_views and (alone or not any(j in grouped for j in leaves)):
            found.append(i)
    return found


def _alone_over_storage(layout: DenseLayout, i: int) -> bool:
    """Is input `i` alone over a storage that resize_() grows (`grown_alone`)?"""
    return any(grown_alone(g) and tuple(layout.leaves_of_input[i]) == g.members for g in layout.groups)


def _view_inputs(flat: FlatInputs, layout: DenseLayout, user_tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors the program gets for inputs that are views and require grad, in no alias group (Note [Stale View
    Functions] has their rule)."""
    grouped = {m for g in layout.groups for m in g.members}
    found = []
    for i, t in enumerate(user_tensors):
        real = flat.values[flat.tensor_indices[i]]
        if any(j in grouped for j in layout.leaves_of_input[i]):
            continue
        if isinstance(real, torch.Tensor) and real.requires_grad and real._is_view():
            found.append(t)
    return found
