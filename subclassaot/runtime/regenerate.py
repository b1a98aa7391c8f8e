"""Output regeneration: the user's outputs rebuilt from the graph's outputs and the real inputs after the epilogue.

Input: a `RuntimePlan`, the real inputs and dense leaves, the graph's outputs, the symbol values of this call.
Output: the output pytree, with views of inputs and intermediates replayed as eager makes them.
Invariants: Note [Output Regeneration]; an output that replays from another output is built after it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import replace
from typing import cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import (
    TraceableWrapperSubclass,
    flatten_subclass,
    is_traceable_subclass,
    unflatten_subclass,
)
from subclassaot.runtime.plan import (
    MetaEvaluator,
    RuntimePlan,
    assign_data_meta,
    fresh_output,
    non_view_alias,
    probed_layout,
    probed_stride,
    set_target_layout,
    share_wrapper_storages,
    wrapper_layout,
)
from subclassaot.runtime.steps import (
    build_order,
    bump_views_late,
    call_token,
    finish_bumped_view,
    fresh_counts,
    input_root,
    lower_input_counter,
    set_onto_inputs,
    set_under_grad_holder,
    settle_base_counters,
    state_reached,
    use_only_tokens,
    view_onto,
)
from subclassaot.schemas import (
    GradSetBase,
    InputArg,
    LeafSource,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    ViewStep,
)
from subclassaot.torch_internals import (
    as_parameter,
    get_version,
    give_base_grad,
    give_grad_mode_creation_meta,
    grad_fn_raises,
    history_less_view,
    mark_inference_mode_view,
    requires_grad_through_base,
    set_to_tensor,
    set_version,
    storage_key,
    take_creation_meta,
    with_bits,
)

# Note [Output Regeneration]
# The graph is functional, so a user output that is a view of an input (or of an intermediate it shares with other
# outputs) cannot come out of the graph as such: the graph would return a copy. Instead the epilogue rebuilds it from
# the real tensor it aliases, after input mutations are applied: by replaying its view chain, by `source.as_strided(size,
# stride, offset)` when eager returns a view (so `._base` and storage sharing match eager), or as a non-view alias
# sharing the storage when eager returns one (detach-like). Sizes, strides and offsets are expressions over the guards'
# symbols, evaluated per call. Intermediate bases come out of the graph once and every output aliasing them is rebuilt
# from that one tensor, so two outputs that share storage in eager share it here too. Eager's objects must match too:
# - Views sharing an intermediate (`t0 = x.detach(); return t0.view(...), t0.t()`) have one `._base`. The analysis names
#   each intermediate object a chain passes through (Replay.marks), and a memo that lives for one call hands the first
#   rebuild of each to every later chain through it (runtime `_replay`; hidden bases too, OutputLeaf.hidden_key: among
#   them the alias a subclass's dispatch made of an input's leaf, no view and on a counter of its own, which a DTensor
#   split piece's to_local() returns under no_grad: chain_facts.hidden_base).
#   Outputs of one multi-output view (`return x.split(2, -1)`) come from one call too (ViewStep.call; that memo holds
#   its other outputs): eager's share one grad_fn, whose backward an NJT's needs every gradient of (a missing one is
#   zeros of a nested size, which its kernel cannot make).
# - In-place view ops on a `._base` after its views (`t1 = t0.view(-1, 1, 1); t0.unsqueeze_(0); return t1`): the chain
#   makes t0 as it was when t1 was taken; the ops applied after (Replay.base_after) are applied to the replayed `._base`
#   once every output is built, once per object, in the grad mode each ran in, advancing its counter as eager's did
#   (a base on an input's counter keeps the count the epilogue gave it, which has those ops already).
#   Only for the output's `._base` (an op on a view mid-chain leaves nothing an output observes). An object such ops
#   changed is named only by chains through it after all of them, where no chain names it as it was before.
# - Views across those ops (`t0 = x.detach(); a = t0.view(-1); t0.t_(); return a, t0.unsqueeze(0)`): a chain that passes
#   t0 after the first j of its in-place view ops names it in each state 0..j (id(t0), then `state_token`s that are never
#   an id()). At run time it takes t0 in the latest state an earlier chain made, applies the ops from there to its own
#   state and hands t0 out in that state only; outputs are built in order of the states they pass (`build_order`), and
#   base_after applies only the ops past the state a chain left. Not for views rebuilt before the epilogue.
# - Views between in-place view ops (`x.resize_((4, 1)); t = x.detach(); x.t_()`), and detach()es of an intermediate or
#   output changed in place since, can be replayed neither before the epilogue nor after it from the input as it ends;
#   as_strided alone would lose their aliasing (`._base`, a subclass's wrapper storage). So the chain is replayed after
#   the epilogue from `x.as_strided(...)` with x's metadata when the chain first viewed it (the input's own metadata are
#   eager's: Note [as_strided On Inputs]). Only without autograd history, and for a subclass whose dense leaves are laid
#   out as the wrapper is; otherwise a detach of an output is `t1.detach()` set_() without autograd to a wrapper of its
#   own leaves (below), and a view of such a detach is refused.
# - Input views with cut history (a step under no_grad, or a detach()): where their chain cannot be replayed (a `.data =`
#   moved a tensor of it), they are rebuilt as that as_strided() under no_grad, then, where eager's has a dead-end
#   grad_fn, a view() of it with grad on; only where nothing bumped the input's version after it was made.
# - Views through a view assigned `.data =` (`t0 = x.detach(); t1 = t0[:, 1:1]; t1.data = x; return t1.t()`): eager's
#   t1 stays a view of t0 with the assigned layout and t1's requires_grad, so t1.t()'s `._base` is t0. Where t1 has no
#   history and shares its base's storage, and nothing wrote that storage, the chain makes t1 by as_strided() of t0 to
#   the layout the next view saw (rules/view_chains.py); such a view of a detach() is refused otherwise.
# - Views of an output through a tensor a resize_() grew (`t0 = x.detach(); t1 = t0[0:1]; t1.resize_(4); return t0,
#   t1`): the growth reallocates the storage in place and leaves `._base` as it was, so eager's t1 is a view of t0 (an
#   output, no view) whose layout no replay of its chain gives. It is rebuilt by as_strided() of that output to its
#   final layout, taken in the grad mode (or inside inference_mode) that gives eager's creation meta; only without
#   history. A multi-output view's creation meta no as_strided() gives: one taken with grad is refused.
# Subclass intermediate roots:
# Outputs that are views of one intermediate subclass tensor (`out = x * 3; return out.view(-1), out.t()`) are replayed
# from a wrapper rebuilt around the intermediate's dense leaves (the graph returns them as bases). Eager has one such
# intermediate, so the wrapper is built once per call and every output views it (their `._base` is one object).
# A leaf the intermediate shares with an input, the very object (an NJT's offsets after `nt * 2`, `PairTensor(x.a,
# x.b * 2)`), is the input's leaf as the call received it (Replay.root_bases, negative): eager's intermediate holds
# that object, written or relaid in place as the input's is. Not where a set_() or `.data =` moved it, nor for a
# wrapper the program made a leaf that requires grad; the generated runner leaves such roots to the generic one.
# - Training: a wrapper rebuilt around dense leaves would have no autograd history (autograd runs above the subclass), so
#   the compiled Function builds the root inside it from the intermediate bases and returns it as one more
#   differentiable output (after the wrapper updates); its inner tensors are the very bases other outputs (`y.a`) alias,
#   and the views replay on it with grad enabled, so every gradient reaches the root's tangent, as in eager.
# - Fallback in training: an output that views an intermediate nobody else sees and whose chain does not replay exactly
#   (`y = x.clone(); return y.view(-1)`, or a view a custom Function returns of a tensor it made, torchao's Float8Linear
#   `mm_result.reshape(...)`, where its base is no intermediate base the graph returns: Note [Custom Functions]) is
#   computed by the graph like a fresh output and returned as `fresh.view(fresh.shape)`: a view of a tensor nobody
#   else sees. Two fallbacks of one intermediate are refused, and so is a fallback whose eager
#   `._base` is an input or another output, or has another layout than the view (a root over an input's leaf the
#   rule above leaves out). One whose wrapper was set_() after its chain
#   (Replay.then_set) replays. A wrapper that is no view (`DTensor.from_local(x + 1, ...)`, which wraps a no_grad view
#   of x + 1) is rebuilt from its fresh leaves as no view; refused where eager's inner tensor requires grad.
# - Views rebuilt by set_: where a wrapper-level view's chain is not exact (its base changed metadata or storage after the
#   view: t_(), set_(), the same object passed twice), the output is still made a view of eager's base: an alias() of the
#   base, then set_() without autograd to a wrapper of the output's dense leaves (Note [Wrapper Storage]); the subclass's
#   set_ points the alias's inner tensors (never autograd views, as in eager) at the leaves, and the runtime gives the
#   view back its base's version counter value and wrapper storage. Only for outputs without autograd history.
# - Views set_() off their base (`t0 = x1.add(3.0); t1 = t0.reshape(1, -1, 2); t1.set_(x1); return t1`, x1 a
#   PairTensor): t1 stays a wrapper-level view of t0 while its inner tensors point at x1's. It is rebuilt as above from
#   t0 as it ends, rebuilt around its dense leaves the graph returns (`set_view_root`). Only for a view without
#   history, set_() after it was taken, whose base is an intermediate subclass whose `.data` the program did not assign.
# - Intermediates set_() onto inputs (`t0 = x0.mul(x0); x0.set_(t0); return t0.unsqueeze(-1), t0.view(1, 1, 1)`): t0's
#   dense leaves end on the input's storages; its views are rebuilt from a wrapper around aliases of those leaves, built
#   once per call per eager intermediate, so their `._base` is one object.


# Note [Views Of Inputs Whose History Raises]
# Eager: a view made by a multi-output op (unbind, split, chunk; MULTI_OUTPUT_NODE) or under no_grad (NO_GRAD_MODE)
# raises when its grad_fn is read once the version counter it shares with its base moved after autograd set its
# history; so does every view taken of it with grad before that write (a view of a view inherits its creation meta,
# and shares the counter). A view taken with grad after the write is no such view: taking it reads the source's
# grad_fn, which raises in the program. So an output rebuilt by as_strided() with grad of an input whose grad_fn raises
# by then (`t0 = x.view(-1)` of an unbind() output x, then a resize_() and a write of t0 in inference_mode) is eager's
# view taken before the write, and raises too: "Output 0 of <its node> is a view and its base ... has been modified
# inplace. This view is the output of a function that returns multiple views ...". Taking it of the input itself would
# raise here; it is taken with grad of the input's `._base` (never a view, its grad_fn reads fine, and it is eager's
# `._base` of the output), with that base's counter one below its count, then given back, so the view is stale by one
# write as eager's, and given the input's creation meta. Counters keep eager's counts. Under no_grad the as_strided()
# reads no grad_fn, and a view taken so reads fine as eager's does.
# A stale view that reads fine is regenerated at its next read as an as_strided() of its `._base`, its root, not of the
# view it was taken of: the output of a view input x (`t0 = x.select(0, 0)`, x a diagonal of b), stale after a write of
# t0 under inference_mode or no_grad, has eager's node as_strided(b, ...), whose gradient reaches every element of b
# t0 covers, where one taken of x would give b only x's (a resize_() can give t0 elements past x's). Such an output
# (OutputLeaf.from_base) is rebuilt by as_strided() of the input's `._base`: eager's node, and eager's `._base`. Not
# where the input was set_() (or `.data =`) off its base's storage (`x1.set_(x0)`): its base no longer holds the
# output's elements, which are then taken from the input itself (a view of the same `._base` still). Nor where the
# input's `._base` has another dtype (`c.imag`, `view_as_real(c)`): the output's meta counts the input's elements.


def build_outputs(
    plan: RuntimePlan,
    ev: MetaEvaluator,
    values: Sequence[object],
    dense: list[torch.Tensor],
    outs: list[object],
    symbols: dict[str, int],
    prewrapped: dict[int, torch.Tensor],
    given: tuple[dict[tuple[int, ...], torch.Tensor], dict[int, torch.Tensor], tuple[dict[int, int], dict[int, int]]],
    holders: Sequence[torch.Tensor | None],
) -> list[object]:
    """The program's outputs, by OutputIndex (the caller unflattens them)."""
    gout = plan.graph_outputs
    fresh_start = len(gout.updates)
    base_start = fresh_start + gout.num_fresh
    symint_start = base_start + gout.num_bases
    bases = _counted_bases(plan, outs[base_start:symint_start])
    infos = _probed_layouts(plan, ev, outs, bases, symbols)  # Note [Strides The Kernels Choose]
    result: list[object] = [_PENDING] * len(infos)
    given_roots, shared, (entry, ends) = given
    roots = _counted_roots(plan, ev, (bases, dense), given_roots, symbols)  # Note [Output Regeneration]
    # `get` itself, for its recursion, emptied once the outputs are built: a closure naming itself would be a cycle
    # holding every output of the graph, and their graph, until a garbage collection (Note [Gradient Accumulators Of Leaves])
    builder: list[Callable[[int], object]] = []
    gains_late: list[torch.Tensor] = []
    bumped_late: list[torch.Tensor] = []
    memo: _BuildMemo = ((bases, roots), shared, entry, ends, bumped_late)
    counts = (_fresh_counts(plan) if plan.analysis.output_versions else {}, dict(plan.analysis.output_input_counters))

    def get(o: int) -> object:
        # Outputs are built on demand: a view replays from another output, which is built first.
        if result[o] is not _PENDING:
            return result[o]
        info = infos[o]
        value: object
        if o in prewrapped:
            value = prewrapped[o]
            if info.set_under_grad and torch.is_grad_enabled() and isinstance(value, torch.Tensor):
                # the Function's output: its set_ node, made here (Note [Epilogue Nodes In Eager's Order])
                value = _function_output_holder(plan, infos, o, value)
        elif info.kind is not OutputKind.TENSOR:
            value = _non_tensor_output(plan, o, values, outs, builder[0])
        else:
            value = _tensor_output(info, ev, values, dense, outs, fresh_start, symbols, builder[0], memo)
        if isinstance(value, torch.Tensor) and (o in counts[0] or o in counts[1]):
            _give_count(value, o, info, counts, values)
        if info.leaves and info.leaves[0].onto_input is not None and isinstance(value, torch.Tensor):
            owner = values[plan.layout.leaves[info.leaves[0].onto_input].owner]
            assert isinstance(owner, torch.Tensor)
            set_onto_inputs(value, info, dense, [ev.meta(leaf.meta, symbols) for leaf in info.leaves], owner)
        if info.data_from is not None and isinstance(value, torch.Tensor):  # Note [History Kept Through .data =]
            value.data = _kept_data(info, ev, dense, outs, fresh_start, bases, symbols, shared)
        if info.base_gains_grad and isinstance(value, torch.Tensor):
            _give_base_grad(info, value, gains_late)
        onto = info.leaves[0].storage_of if info.leaves else None
        if onto is not None and isinstance(value, torch.Tensor):  # Note [Outputs Over Another Storage]
            _set_keeping_version(value, dense[onto], ev.meta(info.leaves[0].meta, symbols))
        value = _retyped(plan, o, value, ev, symbols, outs)
        _give_autograd_state(info, value)
        result[o] = value
        return value

    builder.append(get)
    try:
        for o in build_order(infos):  # Note [Output Regeneration]
            get(o)
    finally:
        builder.clear()
    bump_views_late(bumped_late)
    _change_bases(infos, result, ev, symbols, values, shared)
    if any(info.inference or info.inference_leaves or info.counterless for info in infos):
        _as_inference_tensors(infos, result)
    for view in gains_late:
        give_base_grad(view)
    _give_flags_last(infos, result)
    if plan.analysis.wrapper_storage:
        _share_storages(plan, holders, values, result)
    return result


_PENDING = object()


def _give_base_grad(info: OutputInfo, value: torch.Tensor, gains_late: list[torch.Tensor]) -> None:
    """OutputInfo.base_gains_grad: `value`'s base made to require grad, at once or once every output is built (into
    `gains_late`: Note [Views That Raise After A Bump]; and for a view of a new leaf held back, gains_grad_last: the
    other outputs replayed from the same base are views eager's program took before the flag)."""
    if info.replay is not None and (info.replay.bump_after or info.gains_grad_last):
        gains_late.append(value)
    else:
        give_base_grad(value)


def _give_flags_last(infos: Sequence[OutputInfo], result: Sequence[object]) -> None:
    """OutputInfo.gains_grad_last: the flag of a new leaf seen by its flag alone, given once every output is built,
    the outputs replayed from it among them: eager's took those views before the flag."""
    for info, value in zip(infos, result, strict=True):
        if info.gains_grad_last and not info.base_gains_grad and isinstance(value, torch.Tensor):
            _give_flag(value)


def _probed_layouts(
    plan: RuntimePlan, ev: MetaEvaluator, outs: list[object], bases: list[object], symbols: dict[str, int]
) -> Sequence[OutputInfo]:
    """The outputs, each leaf rebuilt over an intermediate base that names a layout probe given the probe's real
    layout (Note [Strides The Kernels Choose])."""
    infos = plan.analysis.outputs
    if not plan.analysis.stride_probes:
        return infos
    probed = list(infos)
    for o, info in enumerate(infos):
        leaves = list(info.leaves)
        for n, leaf in enumerate(leaves):
            base = bases[leaf.index] if leaf.layout_probe is not None else None
            if leaf.layout_probe is not None and isinstance(base, torch.Tensor):
                size, stride, offset = probed_layout(plan, outs, leaf.layout_probe, base, ev.meta(leaf.meta, symbols))
                leaves[n] = replace(leaf, meta=(tuple(size), tuple(stride), offset))
        probed[o] = replace(info, leaves=tuple(leaves)) if leaves != list(info.leaves) else info
    return probed


# What one call's output builds share: the intermediate bases and rebuilt subclass roots, the chain objects made
# (Note [Output Regeneration]), the inputs' counters at entry, eager's counts at the end of the inputs that
# Replay.keeps_counter views are replayed from (runtime/steps.py: Version Counters As Eager's), and the views whose
# counters are advanced once every output is built (Note [Views That Raise After A Bump]).
_BuildMemo = tuple[
    tuple[list[object], dict[tuple[int, ...], torch.Tensor]],
    dict[int, torch.Tensor],
    dict[int, int],
    dict[int, int],
    list[torch.Tensor],
]


def _bumps_late(info: OutputInfo) -> bool:
    """Whether the counter of `info`'s replayed view is advanced once every output is built, not at once: eager made
    it before the write, as it made every view replayed through it (Note [Views That Raise After A Bump]); a view the
    runtime then set_()s keeps the bump before that set_()."""
    replay = info.replay
    if replay is None or not replay.bump_after or replay.then_set or info.set_under_grad:
        return False
    return not replay.stale_view  # a stale view is bumped at once, built in program order (steps.build_order)


def _give_autograd_state(info: OutputInfo, value: object) -> None:
    """What eager's output has of autograd that its build does not give it (Note [Grad Mode And Autograd Reads]): the
    flag of a requires_grad_() on it under no_grad, or the new leaf it made of a view (one taken under no_grad of a
    tensor that requires grad reports the flag of its base: Note [Training Without A Function]); the creation meta of
    a view taken inside inference_mode (or of a view of one), whatever steps rebuilt it."""
    if not isinstance(value, torch.Tensor):
        return
    if info.gains_grad and not info.gains_grad_last:  # (the other: once every output is built)
        _give_flag(value)
    if info.flag_kept and value.requires_grad:
        value.requires_grad_()
    if info.inference_view:
        mark_inference_mode_view(value)


def _give_flag(value: torch.Tensor) -> None:
    """OutputInfo.gains_grad: `value` made to require grad, where it does not, or only through its base."""
    if not value.requires_grad or requires_grad_through_base(value) or _reads_base_flag(value):
        # (an inference tensor takes the flag only inside inference_mode, where eager's program gave it)
        with torch.inference_mode() if value.is_inference() else contextlib.nullcontext():
            value.requires_grad_()


def _reads_base_flag(value: torch.Tensor) -> bool:
    """A view taken with grad of a tensor that required no grad then and requires it now (replayed so: ViewStep.
    without_history): it reports requires_grad from its base, with no history nor a flag of its own, as a view taken
    under no_grad does (Note [Leaves Laid Out Anew Under no_grad]); an unbind() piece too."""
    return history_less_view(value)


def _non_tensor_output(
    plan: RuntimePlan, o: int, values: Sequence[object], outs: list[object], earlier: Callable[[int], object]
) -> object:
    """Output `o` when it is no tensor of its own: a constant, a symbolic int of the graph, an input returned as
    itself, or an earlier output returned again (built by `earlier`)."""
    info, gout = plan.analysis.outputs[o], plan.graph_outputs
    if info.kind is OutputKind.CONSTANT:
        return info.constant
    if info.kind is OutputKind.SYMINT:
        symints = outs[len(gout.updates) + gout.num_fresh + gout.num_bases :][: gout.num_symints]
        return symints[[p for p, i in enumerate(plan.analysis.outputs) if i.kind is OutputKind.SYMINT].index(o)]
    assert info.input_index is not None
    return values[info.input_index] if info.kind is OutputKind.IS_INPUT else earlier(info.input_index)


def _kept_data(
    info: OutputInfo,
    ev: MetaEvaluator,
    dense: list[torch.Tensor],
    outs: list[object],
    fresh_start: int,
    bases: list[object],
    symbols: dict[str, int],
    shared: dict[int, torch.Tensor],
) -> torch.Tensor:
    """The value a `.data =` gave the output (OutputInfo.data_from), built without history."""
    assert info.data_from is not None
    with torch.no_grad():  # see Note [History Kept Through .data =]
        return _from_leaves(
            replace(info, leaves=(info.data_from,)), ev, dense, outs, fresh_start, bases, symbols, shared
        )


def _share_storages(
    plan: RuntimePlan, holders: Sequence[torch.Tensor | None], values: Sequence[object], result: list[object]
) -> None:
    """Note [Wrapper Storage]: the outputs and inputs of each wrapper-storage class end on its wrapper storage."""
    dense_leaf = functools.partial(_dense_leaf, plan, values)
    share_wrapper_storages(plan.flat, plan.analysis.wrapper_storage, holders, values, result, dense_leaf)


def _retyped(
    plan: RuntimePlan, o: int, value: object, ev: MetaEvaluator, symbols: dict[str, int], outs: list[object]
) -> object:
    """Output `o` in the torch-function subclass eager's has (a Parameter, where the program made one), with the metadata a `.data =` left on it."""
    info = plan.analysis.outputs[o]
    cls = plan.output_types[o] if plan.output_types else None
    if cls is not None and isinstance(value, torch.Tensor) and type(value) is not cls:
        value = value.as_subclass(cls)  # what Tensor.__torch_function__ does to eager's result
    if info.parameter and isinstance(value, torch.Tensor):
        as_parameter(value)  # (after: eager's `nn.Parameter(t)` of such a subclass marks it)
    if info.data_meta is not None and isinstance(value, torch.Tensor):
        size, stride, offset = ev.meta(info.data_meta, symbols)
        stride = probed_stride(plan, outs, info.data_stride_probe, size, stride)
        assign_data_meta(value, size, stride, offset)  # Note [Wrapper Storage]
    return value


def _give_count(
    value: torch.Tensor,
    o: int,
    info: OutputInfo,
    counts: tuple[dict[int, int], dict[int, int]],
    values: Sequence[object],
) -> None:
    """A fresh output's eager count, before any view of it; a detach() of an input, the input's count
    (runtime/steps.py: Version Counters As Eager's)."""
    fresh_counts, counters = counts
    if o in fresh_counts:
        set_version(value, fresh_counts[o])
    elif info.replay is None:
        set_version(value, get_version(cast(torch.Tensor, values[counters[o]])))


def _set_keeping_version(value: torch.Tensor, onto: torch.Tensor, meta: tuple[list[int], list[int], int]) -> None:
    """Note [Outputs Over Another Storage]: `value` set_() without autograd onto `onto`'s storage with eager's size,
    stride and offset (`meta`), its version counter as it was."""
    size, stride, offset = meta
    version = get_version(value)
    with torch.no_grad():
        value.set_(onto.untyped_storage(), offset, size, stride)
    set_version(value, version)


def _as_inference_tensors(infos: Sequence[OutputInfo], result: list[object]) -> None:
    """The outputs eager computed inside a torch.inference_mode() block are inference tensors: each is rebuilt inside
    one (Note [Grad Mode And Autograd Reads])."""
    copies: dict[int, torch.UntypedStorage] = {}
    made: dict[int, torch.Tensor] = {}  # id() of a built output -> its inference tensor (`return t, t` is one object)
    wrappers: dict[object, torch.Tensor] = {}  # a built wrapper's storage -> the first wrapper rebuilt over it
    for o, info in enumerate(infos):
        value = result[o]
        if not (info.inference or info.inference_leaves or info.counterless) or not isinstance(value, torch.Tensor):
            continue
        if info.inference and value.is_inference() and not info.inference_counter:
            continue
        if info.counterless:  # a normal tensor with no version counter: eager's `.data =` onto an inference one
            if id(value) not in made:
                leaves = (
                    _inference_copy(value, info.inference_leaves, copies, False) if info.inference_leaves else value
                )
                made[id(value)] = _without_counter(leaves)
            result[o] = made[id(value)]
            continue
        if id(value) not in made:
            made[id(value)] = rebuilt = _inference_copy(value, info.inference_leaves, copies, info.inference)
            if info.inference_counter:  # eager's detach() after the block: an inference tensor with a counter
                made[id(value)] = rebuilt = rebuilt.detach()
            _share_wrapper_storages(value, rebuilt, wrappers)
            if info.gains_grad:  # a leaf made inside the block that requires grad (the copy has no flag)
                _give_flag(rebuilt)
        result[o] = made[id(value)]


def _share_wrapper_storages(value: torch.Tensor, rebuilt: torch.Tensor, wrappers: dict[object, torch.Tensor]) -> None:
    """Wrappers sharing a storage (a view and its base: return_and_correct_aliasing) still do once `value` is rebuilt
    as `rebuilt`, one kept as it is (given inference leaves in place) and one rebuilt as an inference wrapper too; so
    do the wrappers nested in them (a TwoTensor of TwoTensors), which the rebuild makes anew."""
    if not is_traceable_subclass(value) or not is_traceable_subclass(rebuilt):
        return
    try:
        key: object = storage_key(value)
    except (RuntimeError, NotImplementedError):  # a wrapper with no storage to name
        key = None
    first = wrappers.setdefault(key, rebuilt) if key is not None else rebuilt
    if first is not rebuilt:
        torch._functionalize_unsafe_set(rebuilt, first)
    for attr in value.__tensor_flatten__()[0]:
        inner, inner_rebuilt = getattr(value, attr), getattr(rebuilt, attr)
        if isinstance(inner, torch.Tensor) and isinstance(inner_rebuilt, torch.Tensor):
            _share_wrapper_storages(inner, inner_rebuilt, wrappers)


def _without_counter(value: torch.Tensor) -> torch.Tensor:
    """`value`'s storage and layout in a normal tensor with no version counter of its own, as eager's `t.data = value`
    makes of a `t` made inside an inference_mode block (a wrapper subclass: over `value`'s inner tensors)."""
    if is_traceable_subclass(value):  # (a wrapper keeps its inner tensors through `.data =`, as eager's does)
        tree, leaves = flatten_subclass(value, "output")
        with torch.inference_mode():
            holder = unflatten_subclass(tree, leaves, outer_size=value.size(), outer_stride=value.stride(), check=False)
        holder.data = value.detach()  # (its dispatch keys; the metadata a `.data =` gave `value`, the detach() not)
        assign_data_meta(holder, list(value.shape), list(value.stride()), int(value.storage_offset()))
        return holder
    with torch.inference_mode():
        holder = torch.empty(0, dtype=value.dtype, device=value.device)
    holder.data = value.detach()
    return holder


def _inference_copy(
    value: torch.Tensor, leaves_made: tuple[int, ...], copies: dict[int, torch.UntypedStorage], outer: bool = True
) -> torch.Tensor:
    """`value` over a copy of its storage made inside inference_mode, one copy per storage so that outputs sharing a
    storage still do; a subclass rebuilt around such copies of the dense leaves at `leaves_made` and its other
    leaves as they are (eager's share them with an input), inside inference_mode where `outer` (its wrapper is an
    inference tensor too), else outside."""
    if is_traceable_subclass(value) and not outer and _replace_leaves(value, leaves_made, copies):
        return value  # (the wrapper itself: its view relations to other outputs stay eager's)
    if is_traceable_subclass(value):
        tree, leaves = flatten_subclass(value, "output")
        kept = [_inference_copy(leaf, (0,), copies) if k in leaves_made else leaf for k, leaf in enumerate(leaves)]
        with torch.inference_mode() if outer else contextlib.nullcontext():
            rebuilt = unflatten_subclass(tree, kept, outer_size=value.size(), outer_stride=value.stride(), check=False)
        # (a wrapper made outside the block that is a view, of an intermediate: eager's is one too)
        return rebuilt.view(rebuilt.shape) if not outer and value._is_view() else rebuilt
    storage = value.untyped_storage()
    key = storage._cdata  # (the storage itself: empty ones all have data_ptr 0)
    copy = copies.get(key)
    if copy is None:
        copy = copies[key] = storage.clone()  # type: ignore[no-untyped-call]  # (UntypedStorage.clone has no stub)
    with torch.inference_mode():
        empty = torch.empty(0, dtype=value.dtype, device=value.device)
        return empty.set_(copy, value.storage_offset(), value.size(), value.stride())


def _replace_leaves(value: torch.Tensor, leaves_made: tuple[int, ...], copies: dict[int, torch.UntypedStorage]) -> bool:
    """Give wrapper `value` (not an inference tensor) inference copies of its dense leaves at `leaves_made` in place,
    by setting its inner-tensor attributes (depth-first, as flatten_subclass numbers them); False, changing nothing,
    where an attribute cannot be set."""
    found: list[tuple[object, str, torch.Tensor]] = []

    def walk(t: TraceableWrapperSubclass) -> None:
        for attr in t.__tensor_flatten__()[0]:
            inner = getattr(t, attr)
            if is_traceable_subclass(inner):
                walk(inner)
            elif isinstance(inner, torch.Tensor):
                if len(found_leaves) in leaves_made:
                    found.append((t, attr, inner))
                found_leaves.append(inner)

    found_leaves: list[torch.Tensor] = []
    assert is_traceable_subclass(value), "BUG: inner tensors replaced on a plain tensor"
    walk(value)
    done: list[tuple[object, str, torch.Tensor]] = []
    try:
        for owner, attr, inner in found:
            setattr(owner, attr, _inference_copy(inner, (0,), copies))
            done.append((owner, attr, inner))
    except AttributeError:  # (a read-only attribute: put back what was set)
        for owner, attr, inner in done:
            setattr(owner, attr, inner)
        return False
    return True


def intermediate_base(value: object) -> object:
    """An intermediate base as the graph returned it: never a view in eager; the eager backend may return one as a
    view of a temporary."""
    if isinstance(value, torch.Tensor) and value._is_view() and not value.requires_grad:
        return non_view_alias(value)
    return value


def _change_bases(
    infos: Sequence[OutputInfo],
    result: list[object],
    ev: MetaEvaluator,
    symbols: dict[str, int],
    values: Sequence[object],
    shared: dict[int, torch.Tensor],
) -> None:
    """Note [Output Regeneration], Note [Wrapper Storage]."""
    done: set[int] = set()
    for info, value in zip(infos, result, strict=True):
        replay = info.replay
        if replay is None or not (replay.base_after or replay.root_data_meta) or not isinstance(value, torch.Tensor):
            continue
        base = value._base
        assert base is not None, "BUG: an output with in-place changes of its `._base` is no view"
        if id(base) not in done:
            done.add(id(base))
            # (base_after counts the ops after this chain's view of the base; a state counts them all)
            own = state_reached(base, shared, {t for _, t in replay.marks})
            done_ops = state_reached(base, shared) - own  # Note [Output Regeneration]
            # a base on an input's counter (a chain from the input with no `.data`): the epilogue gave that counter
            # eager's count already, these ops included
            counted = replay.source is ReplaySource.INPUT and not any(s.own_version for s in replay.steps)
            version = get_version(base)
            replay_steps(base, replay.base_after[done_ops:], ev, symbols, values)
            if counted:
                set_version(base, version)
            if replay.root_data_meta is not None:
                assign_data_meta(base, *ev.meta(replay.root_data_meta, symbols))


def no_output(o: int) -> object:
    raise AssertionError(f"BUG: an output rebuilt before the epilogue replays from output {o}")


def unflatten_output(values: list[object], spec: pytree.TreeSpec, has_size: bool | None = None) -> object:
    """tree_unflatten, except that torch.Size nodes come back as torch.Size (pytree rebuilds them as tuples).
    `has_size`: whether `spec` holds a torch.Size node, when the caller knows it."""
    out = pytree.tree_unflatten(values, spec)
    return _restore_sizes(out, spec) if (has_size_spec(spec) if has_size is None else has_size) else out


def has_size_spec(spec: pytree.TreeSpec) -> bool:
    return spec.type is torch.Size or any(has_size_spec(c) for c in spec.children())


def _restore_sizes(value: object, spec: pytree.TreeSpec) -> object:
    if spec.type is torch.Size:
        return torch.Size(cast(Sequence[int], value))
    if not has_size_spec(spec):
        return value
    if isinstance(value, dict):
        return {k: _restore_sizes(v, c) for (k, v), c in zip(value.items(), spec.children(), strict=True)}
    if isinstance(value, list | tuple):
        rebuilt = [_restore_sizes(v, c) for v, c in zip(value, spec.children(), strict=True)]
        if type(value) in (list, tuple):
            return type(value)(rebuilt)
        make: Callable[..., object] = type(value)
        return make(*rebuilt)  # a namedtuple
    return value


def _tensor_output(
    info: OutputInfo,
    ev: MetaEvaluator,
    values: Sequence[object],
    dense: list[torch.Tensor],
    outs: list[object],
    fresh_start: int,
    symbols: dict[str, int],
    earlier: Callable[[int], object],
    memo: _BuildMemo,
) -> torch.Tensor:
    bases_and_roots, shared, entry, ends, bumped_late = memo
    bases, roots = bases_and_roots
    if info.replay is None:
        value = _from_leaves(info, ev, dense, outs, fresh_start, bases, symbols, shared)
    else:
        lowered = lower_input_counter(info.replay, values, entry)  # Note [Views That Raise After A Bump]
        source = values[info.replay.index] if info.replay.keeps_counter and lowered is None else None
        came = get_version(source) if isinstance(source, torch.Tensor) else None
        own = own_bumps(info.replay, shared)
        if isinstance(source, torch.Tensor) and came is not None and source.requires_grad and own:
            # a view with history is made at eager's count at the end less the bumps its replay repeats, landing on
            # eager's count (given back afterwards it would go stale): runtime/steps.py: Version Counters As Eager's
            set_version(source, ends[info.replay.index] - own)
        value = replay_view(info.replay, ev, values, bases_and_roots, symbols, earlier, dense, shared)
        if isinstance(source, torch.Tensor) and came is not None and not value.requires_grad:
            set_version(source, came)  # runtime/steps.py: Version Counters As Eager's
        if info.replay.bump_after or lowered is not None:
            # (a view made at its root input's counter at entry is stale by that input's count: no bump on top)
            bump = info.replay.bump_after and (info.replay.root_input is None or lowered is None)
            if finish_bumped_view(value, lowered, bump=bump, late=_bumps_late(info)):
                bumped_late.append(value)
        if info.replay.then_set:  # Note [Wrapper Storage]
            # only the contents' storage and metadata are used: no autograd view of an input whose grad_fn may raise
            # (an unbind() output whose version the epilogue advanced)
            with torch.no_grad():
                contents = _from_leaves(info, ev, dense, outs, fresh_start, bases, symbols, shared)
            if info.replay.runtime_set:
                _set_keeping_storage(value, contents)
                _keep_input_leaf_objects(value, contents, dense)
            elif info.replay.set_by_data:
                value.data = contents
            else:
                version = get_version(value)
                with torch.no_grad():
                    set_to_tensor(value, contents)
                # the program's set_(), counted already (runtime/steps.py: Version Counters As Eager's): given back
                # where the view requires no grad, or where its history, stale by the set_() as eager's, reads fine
                # and is read (so rebuilt) first; views made after the epilogue (late steps) stay fresh, as eager's
                # made after the set_()
                without = not value.requires_grad and (value._base is None or not value._base.requires_grad)
                if without or (value.requires_grad and not grad_fn_raises(value)):
                    set_version(value, version)
    if info.set_under_grad and torch.is_grad_enabled():  # Note [set_ Under Grad]
        root = _grad_set_root(info.grad_set_base, value, ev, bases_and_roots, symbols, earlier, values, dense)
        value = set_under_grad_holder(
            value,
            root,
            view=info.set_under_grad_view,
            viewed_after=info.grad_set_base is not None and info.grad_set_base.source is None,
            blocked=[values[i] for i in info.set_blocks],
        )
    return value


def _grad_set_root(
    found: GradSetBase | None,
    value: torch.Tensor,
    ev: MetaEvaluator,
    bases_and_roots: tuple[list[object], dict[tuple[int, ...], torch.Tensor]],
    symbols: dict[str, int],
    earlier: Callable[[int], object],
    values: Sequence[object],
    dense: Sequence[torch.Tensor],
) -> tuple[torch.Tensor, bool] | None:
    """Eager's `._base` of an output set_() under grad, and whether it is that very object (Note [set_ Under Grad])."""
    if found is None:
        return None
    if found.source is None:
        assert found.meta is not None
        with torch.no_grad():
            return value.detach().as_strided(*ev.meta(found.meta, symbols)), False
    source = _replay_source(found.source, ev, values, bases_and_roots, symbols, earlier, dense)
    if found.same_object and source.requires_grad and not source._is_view():
        return source, True
    with torch.no_grad():
        if found.meta is None:
            return source.detach(), False
        return source.detach().as_strided(*ev.meta(found.meta, symbols)), False


def _set_keeping_storage(view: torch.Tensor, contents: torch.Tensor) -> None:
    """Note [Output Regeneration]: `view.set_(contents)`, leaving its version counter and wrapper storage."""
    version, holder = get_version(view), torch.empty(0, dtype=view.dtype, device=view.device)
    torch._functionalize_unsafe_set(holder, view)
    with torch.no_grad():
        set_to_tensor(view, contents)
    set_version(view, version)
    torch._functionalize_unsafe_set(view, holder)


def _keep_input_leaf_objects(value: torch.Tensor, contents: torch.Tensor, dense: Sequence[torch.Tensor]) -> None:
    """Note [Output Regeneration]: an inner tensor of `contents` that is an input's very leaf object (eager's output
    holds that object: a view op passed it through, as a tensorwise Float8Tensor's views pass their scale) is that
    object in the wrapper `value` set_() to `contents` too, not an alias the set_() pointed at it."""
    if not is_traceable_subclass(value) or not is_traceable_subclass(contents):
        return
    inputs = {id(d) for d in dense}
    for attr in contents.__tensor_flatten__()[0]:
        inner = getattr(contents, attr)
        if id(inner) in inputs and getattr(value, attr, None) is not inner:
            with contextlib.suppress(AttributeError):  # (a read-only attribute: the alias stays)
                setattr(value, attr, inner)


def _from_leaves(
    info: OutputInfo,
    ev: MetaEvaluator,
    dense: list[torch.Tensor],
    outs: list[object],
    fresh_start: int,
    bases: list[object],
    symbols: dict[str, int],
    shared: dict[int, torch.Tensor],
) -> torch.Tensor:
    leaves: list[torch.Tensor] = []
    for leaf in info.leaves:
        if leaf.source is LeafSource.GRAPH:
            value = outs[fresh_start + leaf.index]
            assert isinstance(value, torch.Tensor)
            leaves.append(fresh_output(value))
            continue
        source = dense[leaf.index] if leaf.source is LeafSource.INPUT_ALIAS else bases[leaf.index]
        assert isinstance(source, torch.Tensor)
        # The base itself only where the output was that very leaf object (another output sharing its storage, as
        # after `t0.set_(t1)`, is an alias of it).
        own = leaf.same_object
        meta = ev.meta(leaf.meta, symbols)
        if leaf.base_layout:  # Note [Strides The Kernels Choose]
            meta = (list(source.shape), list(source.stride()), int(source.storage_offset()))
        if leaf.set_steps is not None:  # Note [Strides The Kernels Choose]
            meta = _set_source_layout(meta, source, leaf.set_steps, ev, symbols)
        if leaf.foreign_base is not None:  # Note [Outputs Over Another Storage]
            kind, at = leaf.foreign_base
            root = input_root(dense[at]) if kind is LeafSource.INPUT_ALIAS else bases[at]
            assert isinstance(root, torch.Tensor)
            bits = leaf.bits or (source.is_conj(), source.is_neg())  # (OutputLeaf.bits: else its storage's)
            leaves.append(view_onto(root, source, *meta, grad=leaf.foreign_grad, bits=bits))
            continue
        if leaf.hidden_base is not None:
            hidden_meta = ev.meta(leaf.hidden_base, symbols)
            if leaf.set_steps is not None:  # (the tensor the input took, with its layout)
                hidden_meta = set_target_layout(hidden_meta, source)
            hidden = _hidden_base(source, hidden_meta, leaf.hidden_shares_counter)
            source = hidden if leaf.hidden_key is None else shared.setdefault(leaf.hidden_key, hidden)
        if leaf.input_layout:  # Note [Strides The Kernels Choose]; a view too
            meta = set_target_layout(meta, dense[leaf.index])
        base = source._base if leaf.from_base else None
        same_dtype = base is not None and base.dtype == source.dtype  # (a real view of a complex base: from itself)
        if base is not None and same_dtype and storage_key(base) == storage_key(source) and not grad_fn_raises(source):
            # Note [Views Of Inputs Whose History Raises]
            source = base
        leaves.append(regenerate_alias(source, meta, leaf.is_view, own, leaf.bits))
    if info.tree is None:
        return leaves[0]
    assert info.outer_meta is not None
    size, stride, _ = ev.meta(info.outer_meta, symbols)
    stride = fresh_outer_stride(info, leaves, size, stride)
    # The contract was checked when this entry was traced (same tree, symbolic sizes); not again per call.
    return unflatten_subclass(info.tree, leaves, outer_size=size, outer_stride=stride, check=False)


def _set_source_layout(
    meta: tuple[list[int], list[int], int],
    value: torch.Tensor,
    steps: Sequence[ViewStep],
    ev: MetaEvaluator,
    symbols: dict[str, int],
) -> tuple[list[int], list[int], int]:
    """Note [Strides The Kernels Choose]: the layout `steps` give the input's real final value `value`, where its
    size is the recorded one; else `meta`. Replayed on a meta tensor of that layout: in-place view ops on an alias
    would advance the input's version counter."""
    numel = value.untyped_storage().nbytes() // value.element_size()
    layout = torch.empty(numel, dtype=value.dtype, device="meta")
    with torch.no_grad():
        view = replay_steps(layout.as_strided(value.shape, value.stride(), value.storage_offset()), steps, ev, symbols)
    if list(view.shape) != meta[0]:
        return meta
    return meta[0], list(view.stride()), int(view.storage_offset())


def fresh_outer_stride(
    info: OutputInfo, leaves: Sequence[torch.Tensor], size: list[int], stride: list[int]
) -> list[int]:
    """Note [Strides The Kernels Choose]: the real strides of the leaf the wrapper's followed while tracing."""
    if info.outer_stride_leaf is None:
        return stride
    leaf = leaves[info.outer_stride_leaf]
    return list(leaf.stride()) if list(leaf.shape) == size else stride


def root_outer_stride(replay: Replay, leaves: Sequence[torch.Tensor], size: list[int], stride: list[int]) -> list[int]:
    """Note [Strides The Kernels Choose], for an intermediate subclass root."""
    if replay.root_stride_leaf is None:
        return stride
    leaf = leaves[replay.root_stride_leaf]
    return list(leaf.stride()) if list(leaf.shape) == size else stride


def replay_view(
    replay: Replay,
    ev: MetaEvaluator,
    values: Sequence[object],
    bases_and_roots: tuple[list[object], dict[tuple[int, ...], torch.Tensor]],
    symbols: dict[str, int],
    earlier: Callable[[int], object],
    dense: Sequence[torch.Tensor] = (),
    shared: dict[int, torch.Tensor] | None = None,
) -> torch.Tensor:
    if shared is None or not replay.marks:
        src = _replay_source(replay, ev, values, bases_and_roots, symbols, earlier, dense)
        return replay_steps(src, replay.steps, ev, symbols, values, shared)
    if any(token in shared for _, token in replay.marks):
        return replay_from(None, 0, replay, ev, symbols, values, shared)
    src = _replay_source(replay, ev, values, bases_and_roots, symbols, earlier, dense)
    return replay_from(src, 0, replay, ev, symbols, values, shared)


def replay_from(
    src: torch.Tensor | None,
    done: int,
    replay: Replay,
    ev: MetaEvaluator,
    symbols: dict[str, int],
    values: Sequence[object],
    shared: dict[int, torch.Tensor],
) -> torch.Tensor:
    """The steps of `replay` after the first `done`, from `src` (what those made; None only where an earlier
    replay made an object of the chain past them)."""
    # See Note [Output Regeneration]: from the last object of the chain an earlier replay already made
    made = [(count, shared[token]) for count, token in replay.marks if count > done and token in shared]
    done, src = made[-1] if made else (done, src)
    assert src is not None, "BUG: a replay with no source and no shared object of its chain"
    changed = use_only_tokens(replay.marks)  # Note [Output Regeneration]
    for count, token in replay.marks:
        if count > done:
            src = replay_steps(src, replay.steps[done:count], ev, symbols, values, shared)
            src, done = (src if token in changed else shared.setdefault(token, src)), count
    return replay_steps(src, replay.steps[done:], ev, symbols, values, shared)


def replay_steps(
    src: torch.Tensor,
    steps: Sequence[ViewStep],
    ev: MetaEvaluator,
    symbols: dict[str, int],
    values: Sequence[object] = (),
    shared: dict[int, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Apply the recorded view ops to `src`, each under the grad mode the program had (Note [Output Regeneration]).
    `values`: the flat inputs, for steps that name one (InputArg); `shared`: the call's memo, where a multi-output
    view's outputs wait for the replays of the same eager call (ViewStep.call)."""
    for step in steps:
        made = None
        if shared is not None and step.call is not None and step.index is not None:
            made = shared.get(call_token(step.call, step.index))
        if made is None:
            made = _replay_step(src, step, ev, symbols, values, shared)
        if step.without_history:
            give_grad_mode_creation_meta(made, src, step.index is not None)
        if step.makes_leaf:  # Note [Training Without A Function]
            made.requires_grad_()
        src = made
        if step.own_version:
            src = src.data
    return src


def _replay_step(
    src: torch.Tensor,
    step: ViewStep,
    ev: MetaEvaluator,
    symbols: dict[str, int],
    values: Sequence[object],
    shared: dict[int, torch.Tensor] | None,
) -> torch.Tensor:
    """One step of replay_steps; a multi-output view's other outputs left in `shared` for its other replays."""
    args = [values[a.index] if isinstance(a, InputArg) else ev.arg(a, symbols, src) for a in step.args]
    kwargs = {k: ev.arg(v, symbols, src) for k, v in step.kwargs}
    with _replay_mode(step, src), _one_count_behind(src) if step.from_root else contextlib.nullcontext():
        out = step.op(src, *args, **kwargs)
    if step.index is None:
        made: torch.Tensor = out
        return made
    if shared is not None and step.call is not None:
        for i, o in enumerate(out):
            shared.setdefault(call_token(step.call, i), o)
    made = out[step.index]
    return made


@contextlib.contextmanager
def _one_count_behind(src: torch.Tensor) -> Iterator[None]:
    """ViewStep.from_root: `src`'s counter one below its count while the view is taken, then given back: the view is
    stale by one write, and autograd regenerates its history from its `._base` (its root) at its next read, as
    eager's stale view's (Note [Views That Raise After A Bump])."""
    now = get_version(src)
    assert now > 0, "BUG: a history regenerated from its root without a write to regenerate it"
    set_version(src, now - 1)
    try:
        yield
    finally:
        set_version(src, now)


def _replay_mode(step: ViewStep, src: torch.Tensor) -> contextlib.AbstractContextManager[object]:
    """The grad mode the program had; inside inference_mode where it took the view there (eager's creation meta)."""
    if step.inference_mode:
        return torch.inference_mode()
    stack = contextlib.ExitStack()
    stack.enter_context(torch.set_grad_enabled(step.grad_enabled and not step.without_history))
    stack.enter_context(resize_inside_inference_mode(step, src))
    return stack


def resize_inside_inference_mode(step: ViewStep, t: torch.Tensor) -> contextlib.AbstractContextManager[object]:
    """resize_() of a tensor that requires grad raises outside inference_mode, so the program ran it inside one and
    the replay does too. Not `inference_mode(False)` otherwise: that turns grad mode on."""
    if step.op is torch.ops.aten.resize_.default and t.requires_grad:
        return torch.inference_mode()
    return contextlib.nullcontext()


def _replay_source(
    replay: Replay,
    ev: MetaEvaluator,
    values: Sequence[object],
    bases_and_roots: tuple[list[object], dict[tuple[int, ...], torch.Tensor]],
    symbols: dict[str, int],
    earlier: Callable[[int], object],
    dense: Sequence[torch.Tensor] = (),
) -> torch.Tensor:
    bases, roots = bases_and_roots
    if replay.source is ReplaySource.INPUT_ROOT:
        # See Note [Output Regeneration]: a wrapper (not a view) around aliases of the input leaves, one per
        # eager intermediate (Note [Output Regeneration])
        if replay.root_token is None:
            return _input_root(replay, ev, symbols, dense)
        key = (-1, replay.root_token)
        if key not in roots:
            roots[key] = _input_root(replay, ev, symbols, dense)
        return roots[key]
    if replay.source is ReplaySource.INPUT:
        return _as_then(cast(torch.Tensor, values[replay.index]), replay, ev, symbols)
    if replay.source is ReplaySource.OUTPUT:
        return _as_then(cast(torch.Tensor, earlier(replay.index)), replay, ev, symbols)
    if replay.source is ReplaySource.BASE:
        return cast(torch.Tensor, bases[replay.index])
    root = roots.get(replay.root_bases)
    if root is None:
        # Every view of one intermediate subclass replays from one wrapper, so that they share it as in eager.
        root = roots[replay.root_bases] = _wrapper_root(replay, ev, (bases, dense), symbols)
    return _as_then(root, replay, ev, symbols)


def root_leaf_values(replay: Replay, bases: Sequence[object], dense: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The dense leaves of a WRAPPER replay's root: per Replay.root_bases entry, the intermediate base it names, or
    (negative, -1 - j) the input's dense leaf `j` itself, as the call received it (the program kept it: an NJT's
    offsets; Note [Output Regeneration])."""
    return [cast(torch.Tensor, bases[b] if b >= 0 else dense[-1 - b]) for b in replay.root_bases]


def _wrapper_root(
    replay: Replay,
    ev: MetaEvaluator,
    bases_and_dense: tuple[Sequence[object], Sequence[torch.Tensor]],
    symbols: dict[str, int],
) -> torch.Tensor:
    """The intermediate subclass a WRAPPER replay views, rebuilt from the intermediate bases (and input leaves)."""
    assert replay.root_tree is not None and replay.root_meta is not None
    size, stride, _ = ev.meta(replay.root_meta, symbols)
    leaves = root_leaf_values(replay, *bases_and_dense)
    stride = root_outer_stride(replay, leaves, size, stride)
    root = unflatten_subclass(replay.root_tree, leaves, outer_size=size, outer_stride=stride, check=False)
    return root


def _function_output_holder(
    plan: RuntimePlan, infos: Sequence[OutputInfo], o: int, value: torch.Tensor
) -> torch.Tensor:
    """The training Function's output `o`, set_() under grad: a holder of its own, whose set_ lands on the count the
    Function gave the output, eager's (graded_output_versions; runtime/steps.py: Version Counters As Eager's)."""
    count = fresh_counts(infos, plan.analysis.graded_output_versions).get(o)
    return set_under_grad_holder(value, None, view=infos[o].set_under_grad_view, viewed_after=False, count=count)


def _fresh_counts(plan: RuntimePlan) -> dict[int, int]:
    """steps.fresh_counts of Analysis.output_versions (runtime/steps.py: Version Counters As Eager's)."""
    return fresh_counts(plan.analysis.outputs, plan.analysis.output_versions)


def _counted_bases(plan: RuntimePlan, outs: Sequence[object]) -> list[object]:
    """The intermediate bases as the graph returned them (`intermediate_base`), given their counts
    (Analysis.base_versions) before any view is replayed from them (runtime/steps.py: Version Counters As Eager's)."""
    bases = [intermediate_base(b) for b in outs]
    if plan.analysis.base_versions:
        settle_base_counters(bases, plan.analysis.base_versions)
    return bases


def _counted_roots(
    plan: RuntimePlan,
    ev: MetaEvaluator,
    bases_and_dense: tuple[Sequence[object], Sequence[torch.Tensor]],
    given: dict[tuple[int, ...], torch.Tensor],
    symbols: dict[str, int],
) -> dict[tuple[int, ...], torch.Tensor]:
    """The intermediate subclass roots the graph call gave (`given`), and those with a count (Analysis.root_versions)
    that require no grad from the graph, built first and given eager's counts before any view is replayed from them
    (the training Function built and counted the others: runtime/steps.py: Version Counters As Eager's)."""
    roots = dict(given)
    for root_bases, count, graded in plan.analysis.root_versions:
        if graded or root_bases in roots:
            continue
        replay = next(
            r
            for info in plan.analysis.outputs
            if (r := info.replay) is not None and r.source is ReplaySource.WRAPPER and r.root_bases == root_bases
        )
        root = roots[root_bases] = _wrapper_root(replay, ev, bases_and_dense, symbols)
        set_version(root, count)
    return roots


def _as_then(source: torch.Tensor, replay: Replay, ev: MetaEvaluator, symbols: dict[str, int]) -> torch.Tensor:
    """The source as it was when the chain viewed it (Note [Output Regeneration])."""
    if replay.source_meta is None:
        return source
    return source.as_strided(*ev.meta(replay.source_meta, symbols))


def _hidden_base(source: torch.Tensor, meta: tuple[list[int], list[int], int], shares_counter: bool) -> torch.Tensor:
    """Eager's hidden `._base` of an output over input `source`'s storage (OutputLeaf.hidden_base): no view, with the
    input's version counter where eager's is a detach() of the input (a detach() shares it), else one of its own."""
    if not shares_counter or source.is_inference():
        return non_view_alias(source.as_strided(*meta))
    hidden, version = source.detach(), get_version(source)
    with torch.no_grad():
        hidden.as_strided_(*meta)
    set_version(hidden, version)  # (as_strided_ advances it; eager's detach() took its layout with resize_())
    return hidden


def regenerate_alias(
    source: torch.Tensor,
    meta: tuple[list[int], list[int], int],
    is_view: bool,
    same_object: bool = True,
    bits: tuple[bool, bool] | None = None,
) -> torch.Tensor:
    size, stride, offset = meta
    if bits is not None and (source.is_conj(), source.is_neg()) != bits:  # (OutputLeaf.bits: a view that toggles)
        source = with_bits(source, source.is_conj() != bits[0], source.is_neg() != bits[1])
        same_object = False
    # The very object, strides included: fake strides can differ from the real kernel's (Note [Strides The
    # Kernels Choose])
    if same_object and not is_view and list(source.shape) == size and source.storage_offset() == offset:
        return source
    if is_view:
        if torch.is_grad_enabled() and grad_fn_raises(source):  # Note [Views Of Inputs Whose History Raises]
            return _stale_view_of(source, size, stride, offset)
        return source.as_strided(size, stride, offset)
    return non_view_alias(source, (size, stride, offset))


def _stale_view_of(source: torch.Tensor, size: list[int], stride: list[int], offset: int) -> torch.Tensor:
    """Note [Views Of Inputs Whose History Raises]: a view with history of `source`'s base, `source`'s creation meta,
    made one count before the counter they share, which raises when its grad_fn is read."""
    base = source._base
    assert base is not None, "BUG: a view whose grad_fn raises has a base"
    now = get_version(base)
    set_version(base, now - 1)
    try:
        view = base.as_strided(size, stride, offset)
    finally:
        set_version(base, now)
    take_creation_meta(view, source)
    return view


def _input_root(
    replay: Replay, ev: MetaEvaluator, symbols: dict[str, int], dense: Sequence[torch.Tensor]
) -> torch.Tensor:
    assert replay.root_tree is not None and replay.root_meta is not None
    metas = [ev.meta(leaf.meta, symbols) for leaf in replay.root_leaves]
    real = [
        set_target_layout(meta, dense[leaf.index]) if leaf.input_layout else meta
        for leaf, meta in zip(replay.root_leaves, metas, strict=True)
    ]
    leaves = [
        regenerate_alias(dense[leaf.index], meta, False, False)
        for leaf, meta in zip(replay.root_leaves, real, strict=True)
    ]
    # See Note [Strides The Kernels Choose]: the outer strides of the leaf it had them from
    size, stride, _ = wrapper_layout(ev.meta(replay.root_meta, symbols), metas, leaves)
    return unflatten_subclass(replay.root_tree, leaves, outer_size=size, outer_stride=stride, check=False)


def _dense_leaf(plan: RuntimePlan, values: Sequence[object], k: int) -> torch.Tensor:
    """Dense leaf `k` as the call left it: its owner input's inner tensor by attribute path (the epilogue's set_()
    keeps the object, so this is the very tensor the caller sees)."""
    t = values[plan.layout.leaves[k].owner]
    for attr in plan.leaf_attr_paths[k]:
        t = getattr(t, attr)
    assert isinstance(t, torch.Tensor)
    return t


def own_bumps(replay: Replay, shared: Container[int] = ()) -> int:
    """How many times a replay's steps advance its source's version counter: the in-place view ops it repeats, those
    after the last object of its chain an earlier replay made (`shared`'s tokens: replay_from), before a step that
    gives the chain a counter of its own (ViewStep.own_version)."""
    done = max((count for count, token in replay.marks if token in shared), default=0)
    n = 0
    for k, step in enumerate(replay.steps):
        if step.own_version:
            break
        n += k >= done and torch.Tag.inplace_view in getattr(step.op, "tags", ())
    return n
