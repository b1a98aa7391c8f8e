"""Stage `analyze`, facts about view chains the analysis decides on: a detach() in the chain (and whether the
replayed `._base` must gain requires_grad), a set_() under grad before a view, a hidden intermediate base, in-place
view ops under mixed grad modes, when the program made a value or split its chain, how a detach() of an
intermediate changed in place since replays, and whether a chain starts at one of the program's custom Functions.

Input: a `FunctionalRun` and a value of it. Output: booleans, sequence numbers, a `Meta` or a `Replay`.
Invariants: pure reads of the run's records; only `check_mixed_grad_view_ops` raises. (Split out of view_chains.py, which builds the
chains themselves: Note [Output Regeneration].)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.autograd_state import is_program_function
from subclassaot.pipeline.rules.leaf_mutations import alias_meta
from subclassaot.pipeline.rules.swap_record import ViewRecord
from subclassaot.schemas import DenseIndex, FlatInputs, InputIndex, Meta, Replay, ReplaySource, ViewStep
from subclassaot.torch_internals import (
    custom_function_of,
    grad_fn_raises,
    is_multi_output_view,
    is_no_grad_view,
    requires_grad_through_base,
    storage_key,
    symint_expr,
)


def detached_in_chain(value: torch.Tensor, run: FunctionalRun) -> bool:
    """`value` is a detach() or a view of one (`t = x.detach(); t.copy_(x)` with grad)."""
    return detach_in_chain(value, run) is not None


def detach_in_chain(value: torch.Tensor, run: FunctionalRun) -> torch.Tensor | None:
    """The detach() that `value` is or views, if any (the nearest)."""
    t = value
    while (record := run.swaps.views.get(id(t))) is not None:
        if record.func is torch.ops.aten.detach.default:
            return t
        t = record.source
    return None


def from_program_function(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Is `value` an output of a custom autograd.Function of the program's (not the pipeline's own), or a view of one?"""
    t: torch.Tensor | None = value
    while t is not None:
        cls = custom_function_of(t)
        if cls is not None:
            return is_program_function(cls)
        record = run.swaps.views.get(id(t))
        t = None if record is None else record.source
    return False


def base_gains_grad(value: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """Note [Views That Raise After A Bump]: `value`'s replay makes a `._base` that must be given requires_grad."""
    if not value.requires_grad or not value._is_view():
        return False
    if not detached_in_chain(value, run):
        return _flagged_intermediate_base(value, replay, run)
    if not torch.is_grad_enabled():
        # a call under no_grad: the detach() gained the flag by the program's requires_grad_(), a leaf's
        base = value._base
        flagged = _flagged_detach_base(value, replay) or _flagged_intermediate_base(value, replay, run)
        return base is not None and base.grad_fn is None and flagged
    try:
        if value.grad_fn is not None:
            return False
    except RuntimeError:
        if not (replay.before_epilogue or replay.bump_after):  # eager's view-after-write error: ours too only if
            return False  # made before the epilogue, or advanced by the runtime after its replay
    except (ValueError, IndexError):  # its grad_fn cannot be replayed on fake tensors
        return False
    return _flagged_detach_base(value, replay)


def _flagged_intermediate_base(value: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """In a call under no_grad, `value` is a view taken under no_grad (or one of a multi-output op's views) of an
    intermediate the program made a leaf that requires grad (requires_grad_(), before the view or after it: a view
    reads its base's flag whenever asked; a detach() of one, a factory's requires_grad=True): it reads that flag from
    its `._base`, with no flag of its own. The replay's base, made anew from the graph's value (a subclass too,
    rebuilt from its leaves), requires none, and is given the flag: written since, the view's grad_fn
    raises as eager's once the runtime advances its counter (Replay.bump_after); not written, it is eager's view that
    a write by the caller makes raise (a flag of the view's own would read fine after that write)."""
    if torch.is_grad_enabled() or replay.source not in (ReplaySource.BASE, ReplaySource.WRAPPER):
        return False
    base = value._base
    if base is None or id(base) not in run.swaps.requires_grad_gained or any(base is u for u in run.user_tensors):
        return False
    own = id(value) in run.swaps.requires_grad_gained or id(value) in run.swaps.own_flags
    if own or not base.requires_grad or base.grad_fn is not None:
        return False
    return requires_grad_through_base(value) or (replay.bump_after and grad_fn_raises(value))


def _flagged_detach_base(value: torch.Tensor, replay: Replay) -> bool:
    """`value`'s `._base` requires grad, and its replay goes through a detach() (which makes that base anew)."""
    base = value._base
    detach = torch.ops.aten.detach.default
    return base is not None and base.requires_grad and any(step.op is detach for step in replay.steps)


def viewed_after_grad_set(value: torch.Tensor, run: FunctionalRun) -> bool:
    """A view taken (through its chain) of a subclass wrapper or a plain tensor, not an input, the program had set_()
    with grad enabled: its history goes through that set_ too. (An input's set_ under grad is repeated by the epilogue,
    and views of it replay after: Note [set_ Under Grad].)"""
    inputs = {id(u) for u in run.user_tensors}
    for record in run.swaps.chain(value):
        t = record.source
        found = run.swaps.wrapper_sets.get(id(t)) or run.swaps.plain_sets.get(id(t))
        if found is not None and found[0] < record.seq and found[1] and id(t) not in inputs:
            return True
    return False


def _chain_tensors(leaf: torch.Tensor, run: FunctionalRun) -> list[torch.Tensor]:
    """`leaf` and the tensors its view chain took it from, back to the chain's root."""
    return [leaf, *(record.source for record in run.swaps.chain(leaf))]


def hidden_base_shares_counter(leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex) -> bool:
    """Is eager's `._base` of `leaf`, a hidden base (`hidden_base`), in the version-counter family of input `j` (a
    detach() of it that a resize_() grew, set_() onto nothing)?"""
    root = leaf._base
    assert root is not None, "BUG: a hidden base without a `._base`"
    if not root._is_view() and dispatch_view_root(root, run) is run.finals[j]:
        return False  # an alias a subclass's dispatch made has a counter of its own
    return id(root) not in run.swaps.swapped_ids and run.swaps.family_of(root) == run.swaps.family_of(run.finals[j])


def dispatch_view_root(leaf: torch.Tensor, run: FunctionalRun) -> torch.Tensor:
    """The tensor a chain of view ops (detach() included) made inside a subclass's dispatch started from."""
    while (record := run.swaps.views.get(id(leaf))) is not None and record.below_autograd:
        leaf = record.source
    return leaf


def _set_onto_storage(root: torch.Tensor, run: FunctionalRun, inputs: dict[int, InputIndex]) -> bool:
    """Did a set_() (or `.data =`) put `root` on its storage, or the intermediate it is a detach() (or a view's
    detach()) of (`t0.set_(x); t1 = t0.detach()`, a custom Function's output under no_grad included)? Then `root` is
    no input's: a detach() shares the counter of its source, which set_() leaves its own. (A detach() of an input
    set_() is the input's: replayed on it.)"""
    t: torch.Tensor | None = root
    while t is not None and id(t) not in inputs:
        if id(t) in run.swaps.swapped_ids:
            return True
        record = run.swaps.views.get(id(t))
        t = None if record is None else record.source
    return False


def hidden_base(
    leaf: torch.Tensor,
    run: FunctionalRun,
    j: DenseIndex,
    input_by_id: dict[int, InputIndex],
    earlier: dict[int, int],
    original: DenseIndex | None,
) -> Meta | None:
    """A plain view of input `j`'s storage whose view chain starts at an intermediate that set_() made share it
    (`t1 = t0.t(); x.set_(t0)`), or one whose view chain passes a tensor a resize_() grew, which no replay remakes
    (`t0 = x.detach(); t1 = t0[1:]; t0.resize_(n)`): eager's `._base` is that intermediate, returned by no one."""
    if is_traceable_subclass(leaf) or not run.swaps.is_view(leaf) or not leaf._is_view():
        return None
    root = leaf._base  # eager's, set_() or not
    if root is None or root is run.finals[j] or id(root) in input_by_id or id(root) in earlier:
        return None
    own = run.swaps.grown_root(storage_key(root))  # (grown in place by resize_(): still the input's storage)
    # (a synthetic base is eager's input: Note [Synthetic Bases])
    made = not any(root is base for base in run.graph_inputs)
    grown = made and any(id(t) in run.swaps.grown_ids for t in _chain_tensors(leaf, run))
    moved = _set_onto_storage(root, run, input_by_id) or grown
    # (a detach() of the input whose layout the input then left, by resize_() or an in-place view op: eager's
    # `._base` keeps the layout the input had at the detach, which the input no longer has)
    detached = run.swaps.views.get(id(root))
    left = (
        made
        and detached is not None
        and detached.func is torch.ops.aten.detach.default
        and detached.source is run.finals[j]
        and leaf_meta(root) != leaf_meta(run.finals[j])
    )
    # (an alias a subclass's dispatch made of the input's leaf, no view: a DTensor's tensor_split() piece's inner
    # tensor, which to_local() under no_grad returns as is: Note [Output Regeneration])
    dispatched = made and not root._is_view() and dispatch_view_root(root, run) is run.finals[j]
    if not moved and not left and not dispatched and any(own == storage_key(o) for o in run.originals):
        # an input's own storage (a synthetic base of aliased inputs, ...) that no set_() put the root on (after
        # `t0.set_(x)`, t0 is) and no resize_() grew in the chain (which then replays)
        return None
    # (`original`: as alias_meta's, the base's metadata in eager's terms, as the output's own)
    return alias_meta(root, run, j, original) if storage_key(root) == storage_key(leaf) else None


# In-place view ops under mixed grad modes: an in-place view op (t_, unsqueeze_) on a tensor that requires grad
# rewrites its grad_fn in eager only with grad enabled; under no_grad it changes the layout and leaves the history
# alone, which then reads a gradient of the new layout as one of the old. The epilogue gives a plain input its final
# layout by one as_strided_, recorded by autograd or not: exact when all of the input's in-place view ops ran under
# one grad mode, not when they mix. Such an input is refused in training.
def check_mixed_grad_view_ops(flat: FlatInputs, run: FunctionalRun) -> None:
    if not torch.is_grad_enabled():
        return
    for t, index in zip(run.user_tensors, flat.tensor_indices, strict=True):
        modes = {r.grad_enabled for r in run.swaps.inplace_views.get(id(t), [])}
        if t.requires_grad and not is_traceable_subclass(t) and len(modes) > 1:
            raise UnsupportedError(
                f"{flat.leaves[index].path}: the program changes the layout of this input, which requires grad, by "
                "in-place view ops (t_, unsqueeze_, ...) both under no_grad and with grad enabled; eager's autograd "
                "history of it then reads gradients in a layout it no longer has, which the compiled epilogue does "
                "not reproduce. Run them all under one grad mode, or change a clone"
            )


def made_seq(value: torch.Tensor, run: FunctionalRun) -> int:
    """When the program made `value`: its view op's or its last in-place view op's sequence number."""
    record = run.swaps.views.get(id(value))
    seqs = [record.seq] if record is not None else []
    seqs.extend(r.seq for r in run.swaps.inplace_views.get(id(value), []))
    return max(seqs, default=0)


def input_bumps(run: FunctionalRun, of: torch.Tensor | None = None) -> list[int]:
    """Note [Views That Raise After A Bump]: the sequence numbers of the program's last version
    bump of each storage an input has or had. `of`, a plain input: only the inputs passed over its storage (only they
    can share its eager base, so its version counter), and on a storage a set_() moved one onto, only the bumps of
    its own counter family; a subclass input: the bumps of its wrapper's counter family."""
    if of is not None and is_traceable_subclass(of):
        # (a subclass input's counter is its wrapper's, which the inputs of its wrapper family share with it)
        seq = run.swaps.family_last_bump.get(run.swaps.family_of(of))
        return [] if seq is None else [seq]
    own = {storage_key(o) for d, o in zip(run.dense, run.originals, strict=True) if d is of} if of is not None else None
    if own:
        # (on a storage a set_() moved one onto, only the bumps of its own counter: the storage's other tensors keep
        # theirs)
        related = [j for j, o in enumerate(run.originals) if storage_key(o) in own]
        received = {storage_key(run.originals[j]) for j in related}
        families = {run.swaps.family_of(run.finals[j]) for j in related}
        return [seq for key, seq in run.swaps.last_bump.items() if key in received] + [
            seq for family, seq in run.swaps.family_last_bump.items() if family in families
        ]
    keys = {storage_key(t) for t in (*run.originals, *run.finals, *run.user_tensors)}
    keys.update(k for k in run.initial_wrapper_keys if k is not None)
    bumps = [seq for key, seq in run.swaps.last_bump.items() if key in keys]
    return bumps + [seq for key, seq in run.swaps.wrapper_bumps.items() if key in keys]


def requires_grad_as_eager(
    value: torch.Tensor, t: torch.Tensor, steps: tuple[ViewStep, ...], run: FunctionalRun
) -> bool:
    """Does eager's `value`, a view of input `t` by `steps`, require grad? A view requires grad as the
    root of its storage does, and the run's roots need not be eager's: inputs sharing a storage are laid out as views
    of a synthetic base of the layout's own, so an input that eager passed as that root, or another input passed as
    its root, that gained requires_grad in the program gives eager's views requires_grad, not the run's (Note [Views
    That Raise After A Bump]). Likewise for a subclass view of a subclass input that eager passed as a view of another
    (the run's wrapper inputs are wrappers of their own, no views of each other)."""
    return value.requires_grad or root_requires_grad_as_eager(value, t, steps, run)


def root_requires_grad_as_eager(
    value: torch.Tensor, t: torch.Tensor, steps: tuple[ViewStep, ...], run: FunctionalRun
) -> bool:
    """`requires_grad_as_eager`, whatever `value`'s own flag says: does the root of eager's storage, where the run's
    root is not eager's, require grad? A view's requires_grad_() (one without history) sets a flag of its own, which
    autograd's check at a read of its grad_fn ignores: the root's decides (Note [Views That Raise After A Bump])."""
    wrapper = is_traceable_subclass(value) or is_traceable_subclass(t)
    if not (wrapper or t._is_view()):
        return False
    if any(s.op is torch.ops.aten.detach.default or s.own_version for s in steps):
        return False
    found = run.swaps.input_positions.get(id(t))
    if found is None:
        return False
    base = found[1]._base
    if base is None:
        return t.requires_grad
    root = next((run.swaps.run_inputs[j] for j, real in run.swaps.input_positions.values() if real is base), None)
    return root is not None and root.requires_grad


def relaid_last_over_entry_history(
    value: torch.Tensor, t: torch.Tensor, first: ViewRecord, run: FunctionalRun, bump: int
) -> bool:
    """Is the last bump (`bump`) of plain input `t`'s counter `value`'s own in-place view op, on a chain whose first
    view the program took before any bump of `t`? Eager's `value` is then over `t`'s history as received, not stale
    at the end, where `t`'s own is rebuilt from its base (as_strided() at its layout, which may reach elements its
    chain does not: Note [as_strided On Inputs]); replayed after the epilogue it would take that rebuilt one, so it is
    replayed before, its in-place view op advancing the counter as eager's did (Note [Views That Raise After A
    Bump])."""
    own = run.swaps.inplace_view_bumps.get(id(value))
    return not is_traceable_subclass(t) and own is not None and own == bump and first.bumps == 0


def history_after_received(value: torch.Tensor, t: torch.Tensor, run: FunctionalRun) -> bool:
    """Was eager's `value`, a view of input `t` whose history raises after a bump (a multi-output view: unbind, split,
    chunk; or a view of a view taken under no_grad or inside inference_mode, whose creation meta it inherits), taken
    with grad from a tensor the program had made require grad (a write with grad into an input that came without)?
    Eager's then has a grad_fn (its view op's backward), whose read after a bump raises naming it ("Output 0 of Select
    is a view of a view which was created in inference mode ..."); one replayed from the input as received, before the
    epilogue gives it that history, has none and raises another error ("A view was created in ...") (Note [Views That
    Raise After A Bump])."""
    record = run.swaps.views.get(id(value))
    received = run.swaps.input_positions.get(id(t))
    if record is None or received is None or not (is_multi_output_view(value) or is_no_grad_view(value)):
        return False
    return record.grad_enabled and record.source_requires_grad and not received[1].requires_grad


def split_seq(value: torch.Tensor, run: FunctionalRun, input_by_id: dict[int, InputIndex]) -> int:
    """When the program took the first view of `value`'s chain (back to an input) that a multi-output view op
    (unbind, split) made with grad enabled; 0 if none (Note [Views That Raise After A Bump])."""
    t, seqs = value, []
    while id(t) not in input_by_id and (record := run.swaps.views.get(id(t))) is not None:
        if record.index is not None and record.grad_enabled:
            seqs.append(record.seq)
        t = record.source
    return min(seqs, default=0)


def set_after_viewed(value: torch.Tensor, base: torch.Tensor, run: FunctionalRun) -> bool:
    """The program set_() plain `base` (`value`'s `._base`) after the first view of `value`'s chain was taken from
    it: eager's `._base` is `base` with its new metadata and storage, which no replay from the chain makes (`t0 =
    x.detach(); t1 = t0.reshape(1, 1, 1); t0.set_(t1); return t0, t1`)."""
    found = run.swaps.plain_sets.get(id(base))
    if found is None:
        return False
    t, first = value, None
    while (record := run.swaps.views.get(id(t))) is not None:
        first = record.seq
        if record.source is base:
            break
        t = record.source
    return first is not None and found[0] > first


def detached_before_change(
    value: torch.Tensor,
    t: torch.Tensor,
    source_meta: tuple[tuple[Any, ...], tuple[Any, ...], Any],
    steps: tuple[ViewStep, ...],
    output: int | None,
    root_replay: Callable[[tuple[ViewStep, ...]], Replay | None],
) -> Replay | None:
    """Note [Output Regeneration]: `value`, whose chain `steps` detached `t` (the output `output`,
    else the intermediate subclass root that `root_replay(steps)` replays from) after viewing it with metadata
    `source_meta`, replayed from `t`."""
    detach = torch.ops.aten.detach.default
    at = [k for k, step in enumerate(steps) if step.op is detach]
    if not at or not is_traceable_subclass(t) or not is_traceable_subclass(value):
        return None
    if output is None and root_replay(()) is None:
        return None  # (an input, or a subclass not rebuilt from intermediate bases)
    if all(leaf_meta(d) == leaf_meta(t) for d in dense_leaves_of(t, "")[1]):
        size, stride, offset = source_meta
        meta = tuple(symint_expr(s) for s in size), tuple(symint_expr(s) for s in stride), symint_expr(offset)
        if output is not None:
            return Replay(source=ReplaySource.OUTPUT, index=output, steps=steps, source_meta=meta)
        root = root_replay(steps)
        return None if root is None else replace(root, source_meta=meta)
    if torch.is_grad_enabled() and value.requires_grad:
        return None  # (a history of its own after the detach: no set_() without autograd gives it)
    if value._is_view():
        raise UnsupportedError(
            f"an output is a view of a detach() of a {type(t).__name__} that an in-place view op (t_, unsqueeze_, "
            "...) then changed, and whose inner tensors are laid out unlike the wrapper: the detach's metadata at "
            "the time (the output's `._base`) cannot be rebuilt (Note [Output Regeneration]). "
            "Return a clone, or take the view before the detach()"
        )
    rebuilt = (steps[at[-1]],)
    if output is not None:
        return Replay(source=ReplaySource.OUTPUT, index=output, steps=rebuilt, then_set=True, runtime_set=True)
    root = root_replay(rebuilt)
    return None if root is None else replace(root, then_set=True, runtime_set=True)


def history_kept_over_swap(t: torch.Tensor, run: FunctionalRun) -> bool:
    """May a view with history of plain input `t`, taken with grad of `t` as received and then moved off by set_() or
    `.data =`, be rebuilt before the epilogue swaps the input? Eager's history is the view ops' backward over the
    grad_fn `t` came with, which the early replay on the real input takes too, where nothing bumped a counter of `t`'s
    storage (a write before the view gives eager's history a node the epilogue makes only after the replay; one
    after it, or a set_() under grad, leaves eager's view stale, rebuilt from `t` in its new layout) and `t` came
    requiring grad (not made to by the program: Note [Leaves Laid Out Anew Under no_grad])."""
    received = run.swaps.input_positions.get(id(t))
    if is_traceable_subclass(t) or received is None or not received[1].requires_grad or id(t) in run.swaps.late_grad:
        return False
    return not input_bumps(run, t)
