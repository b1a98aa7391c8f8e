"""Views changed after they were taken: outputs viewing something the program wrote later, subclass view inputs
written among in-place view ops, subclass views whose history eager rebuilds from stale view functions, and chains
that pass one intermediate before and after its in-place view ops. Each part below keeps its own contract.

Outputs that view an intermediate (or an input) the program wrote after taking them (Note [Views That
Raise After A Bump]).

Input: the analysis's output infos and the eager objects they describe. Output: nothing, or UnsupportedError.
Invariants: an output whose Replay has bump_after shares its intermediate's storage only with outputs that have it
too, so the runtime's version-counter bump reaches no output whose eager grad_fn reads fine.

Part: Subclass inputs that are views, require grad (or gain it), are written and have their layout changed by in-place
view ops: where the epilogue copies their new value in among the replayed view ops (Note [Stale View
Functions]).

Input: the functional run's `SwapRecord` (analyze), `Analysis` and `DenseLayout` (backward trace, runtime). Output:
per input, how many of its replayed view ops come before the copy (`steps_before_last_write`; the epilogue's
`copy_point` and the value it copies, `undo_steps`, are runtime/steps.py's), and the refusal of what stays
unsupported. Invariants: no tracing here.

Part: Stage `analyze`, training outputs: a subclass view that an in-place view op of its own changed, whose history
eager then rebuilds from view functions that miss that op, where the replayed output keeps the history the op recorded;
and a subclass view of an input or another output that only a fresh base could rebuild.

Input: the analysis's output infos and the eager objects they describe, the run. Output: nothing, or
UnsupportedError. Invariants: pure reads of the run's records (Note [Stale View Functions], Note [Output Regeneration]).

Part: Stage `analyze` and the runtime, output regeneration: outputs whose view chains pass one intermediate, one
before the in-place view ops the program applied to it and one after them, share that object as in eager.

Input: a chain segment (the object it makes, its length, where it ends) and the run. Output: `Replay.marks`
entries, in the token encoding of runtime/steps.py, which reads them at run time (`build_order`,
`state_reached`, `use_only_tokens`). Invariants: Note [Output Regeneration].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.chain_facts import (
    from_program_function,
    input_bumps,
    made_seq,
    root_requires_grad_as_eager,
)
from subclassaot.pipeline.rules.swap_record import SET_OPS
from subclassaot.runtime.steps import MARK_STATES, build_order, copy_point, stale_bump, state_of, state_token
from subclassaot.schemas import (
    Analysis,
    DenseIndex,
    DenseLayout,
    InputIndex,
    LeafSource,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
)
from subclassaot.torch_internals import grad_fn_raises, is_plain_autograd_view, storage_key

# Note [Views That Raise After A Bump]
# Eager: a view made under no_grad, or one of the views a multi-output op made (unbind, split, chunk), raises on grad_fn
# and is_leaf once the version counter it shares with its base moved after it was made (a write with grad to the base,
# or any write where the view's base requires grad); one made after the last bump reads fine. A replayed output's
# counter is the runtime's, so each view is made where its counter says what eager's says:
# - Which bumps count: only writes to inputs' storages (each dense leaf's as received and as left, and a wrapper's own);
#   a write to an intermediate of its own storage moves no counter an input's view shares. Of those, only writes
#   through the input's own counter family (`view_chains.last_bump`): `t0.set_(x0); t0.fill_(1)` writes x0's storage
#   but moves t0's counter, which set_() leaves t0's own, so x0's multi-output view made before it reads fine. A view
#   refreshed by its own in-place view op takes that bump as its own (`inplace_view_bumps`).
# - Before or after the epilogue: an output view of an input replayed before the epilogue raises as eager's made before
#   the program's last write; one replayed after reads fine. An early replay's own in-place view ops (t_) move the
#   input's counter before its last view is made, so the raise comes from the epilogue settling the counter at eager's
#   count after it, as eager's came from a later in-place view op or write through another view of the input
#   (`t0.transpose_(0, 0)`, a no-op, counts); a subclass input that views made early read their grad_fn from keeps
#   its count instead, so not where the view's eager grad_fn raises (Replay.eager_raises). Whether the moved counter
#   makes the input's grad_fn raise is read only of a view of another kind than the default: a default view's read
#   rebuilds its history then, at its layout before the epilogue, where eager rebuilds it at the first read after
#   the call, at the layout a `.data =` of the program gave it (`_lower_early_bumps`). A view taken before an
#   in-place view op changed the input is replayed before the epilogue, though eager's may have been made after the
#   bump: a plain no_grad view is then taken
#   after the epilogue by as_strided() of the input under no_grad; otherwise the chain is split as eager ran it, steps
#   before the last bump replayed before the epilogue and trailing views after it (Replay.late_steps). A chain through a
#   detach() replays whole after the epilogue (Note [Output Regeneration]), so its in-place view ops before the detach()
#   count for `chain_bump_seq` too. A multi-output view taken with grad from an input the program first gave history
#   (`x.add_(w)`, x without grad) has eager's grad_fn, named in its error: it is replayed after the epilogue, which
#   gives the input that history, not before it (`chain_facts.history_after_received`).
# - Early views made after the last write: a view the runtime must make before the epilogue (a `.data =` moved the input
#   off the view's storage) but that eager made after the program's last write is made at the count eager's shared
#   counter ends with (the input's plus eager's bumps of it, a resize_ and a write two); the input gets its own counter
#   back for the epilogue, and that count again after it (Replay.counter_at_end).
#   Only for plain views whose steps all ran under no_grad and change no metadata in place (their grad_fn is None
#   whatever history the input had), or ran with grad, each a single-output view of the default kind, of an input
#   that came requiring grad and kept the flag, whose history no write autograd records changed (a write through a
#   detach() of it records none: `x1 = x0.detach(); x1.copy_(y); t0 = x0.view(-1); x0.data = ...`): eager's view
#   is then its view nodes over the input's history as it came, made at the layout it had then (ViewBackward0 keeps
#   that size), and fresh at the end. Made at the input's own count it would be stale once the epilogue advances the
#   counter, and its history, rebuilt at the next read over the layout the `.data =` gave the input, would reject
#   the gradient of the layout it was taken at (`_fresh_view_with_grad`). Its trailing views the runtime takes after
#   the epilogue (Replay.late_steps) are then taken of a fresh view, as eager's were. A chain whose first view came
#   before the last write is not such a view: eager rebuilt its stale history when the next view read it, over the
#   input as it was then, before the `.data =`.
# - Views of intermediates written after: the graph computes the intermediate with the write already in it, so the view
#   replayed from it (source BASE, WRAPPER, or OUTPUT) reads fine; the runtime advances its counter by one
#   (Replay.bump_after), so it raises as eager's: where it reads its grad_fn when built, once every output is built
#   (at once before a then_set or set_ under grad of the view), once per counter such views share; another output's
#   chain may take a view of it with grad, which eager took before the write and which raises if taken after. So is a
#   view with no history taken before such a write: eager's is stale, and rebuilds its grad_fn from its base once
#   the caller makes the base require grad (`stale_intermediate_view`, Replay.stale_view); it is bumped as soon as it
#   is built, outputs in program order, so views taken after the write stay fresh. Likewise a view of an input
#   replayed after the epilogue (source INPUT),
#   which keeps the input's counter changed (Note [Input Updates]); where the input is itself a view whose
#   grad_fn raises once its counter moves, it gets its entry counter back for the replay. A then_set (a set_() of such a
#   view) is that write too. A program under no_grad gets the same for no_grad views of inputs requiring grad. Another
#   no_grad or multi-output output view sharing the storage would see the bump too: refused unless it raises as well.
# - Views of a detach that gained grad (`t = x.detach(); t.copy_(x)` with grad; in a call under no_grad,
#   `t.requires_grad_()`): a no_grad view of t requires grad with no grad_fn, reading t's flag (no gradient reaches it,
#   where one of its own would make it a leaf that takes one), so the runtime calls requires_grad_() on the replayed
#   `._base` (a leaf no gradient reaches); after the outputs are built where the view replays after the epilogue, as
#   views taken from it before the write must not raise. A view taken before the write raises by the epilogue's write,
#   or by bump_after. Views of t with history are refused. So too, in a call under no_grad, for a no_grad (or
#   multi-output) view of an intermediate the program made a leaf requiring grad and then wrote (`t0 = x * 2;
#   t0.requires_grad_(); t1 = t0.view(-1); t0.add_(1)`): t1 reads t0's flag, and its grad_fn raises; the replayed
#   base, made anew from the graph, is given the flag (`chain_facts.base_gains_grad`), not the view a flag of its
#   own (a replayed view of an input likewise reads the real base's). Replayed from another output (t0 returned
#   too) or from a subclass wrapper, it is refused (analyze's `_check_flag_given_late`).
# - Outputs built after a runtime set_: where an output repeats the program's set_() (Replay.then_set) after the
#   epilogue, it advances the counter other views share; so outputs built after the epilogue are built in the program's
#   order (Replay.made), each seeing the counter eager's saw (always: Note [Epilogue Nodes In Eager's Order]). An
#   output whose chain repeats an in-place view op (t_, transpose_) advances the counter too, under no_grad as well:
#   the same order (`t0 = x.unsqueeze(2); t0.transpose_(3, 1); return x.unbind(2)[0], t0`: an unbind() output built
#   first raised at its grad_fn). Eager bumps the shared counter once per in-place view op, when it runs, whether on
#   the input or on a view of it, under no_grad too; so such an output is built at its chain's last in-place view op
#   (`chain_bump_seq`: its own, or one applied to a view up its chain before the next view was taken), not at its last
#   view (`x.reshape(...).transpose_(...)`, then `x.as_strided(...)`, then an expand() of the transposed view: the
#   as_strided() output, eager's taken after the bump, was built before the repeated one and raised). The chain's views
#   taken after that op are then made early: refused where an output built later repeats an in-place view op eager ran
#   before such a view was taken (`check_late_bump_order`). The input's own in-place view ops are the epilogue's.
# - Multi-output view inputs: a subclass input that is one of a multi-output op's views is rebuilt in the trace as a
#   wrapper of its own, so eager's check at a read with grad after a write through another view of the base does not
#   happen there: refused where the program writes the base through another input and reads this one with grad; an
#   output made by such an op from an input is refused where the program advances the shared base's counter through
#   another input, unless rebuilt before the epilogue or taken after that last write (Replay.split_made). An early
#   replay's in-place view op (resize_, as_strided_) that leaves such an input's grad_fn raising is undone for the
#   graph's run, its counter lowered and then given back: eager's reads of the input with grad came before it.
# - View inputs whose history raises: an input whose history autograd refuses once its counter moves (made by a
#   multi-output op, under no_grad, inside inference_mode, by a custom Function), and every view the program takes of
#   it (autograd passes that creation meta down a chain of views, whatever the grad mode), raises at the program's
#   first event that autograd checks: an in-place write of it with grad on ("... is being modified inplace", at once,
#   an in-place view op too), or a read of its history after a bump of that counter since it was made (a write through
#   the input, its base, a detach() of either or a view of those, under no_grad or inside inference_mode too, and a
#   resize_() that changes the size of one, growing or not; one to the size it has bumps nothing): an op with grad
#   that records a node over it, or a read of its grad_fn or is_leaf in any grad mode (its requires_grad, `._base`,
#   `.grad` read fine). One fact decides it (`autograd_state.raising_history`), read at reads of those attributes and
#   by `grad_scope.check_raising_view_input_reads` after each op (writes first, as autograd checks them first): the
#   run's stand-in is no such view (a plain input, or one over a synthetic base that never requires grad), so the run
#   raises eager's very error itself: the view's chain replayed on the real input as the program took it, its
#   history read with its counter moved by one and given back at once (for a write, autograd's header naming the
#   view itself). A read under no_grad, or before the bump, a view taken after the last bump (under no_grad: with
#   grad, taking it is the read), and a view of the default kind, read fine.
# - Whether a view requires grad (and so can raise) is eager's, not the run's: a view requires grad as the root of its
#   storage does, but inputs sharing a storage run as views of a synthetic base that never requires grad, so a view of
#   the input eager passed as that root, which gained requires_grad in the program, does not require grad in the run
#   (`chain_facts.requires_grad_as_eager` answers as eager); nor does its grad_fn raise there, so an early replay of it
#   is made at the counter it came with, not the advanced one, and a replay after the epilogue of one eager's raises
#   gets Replay.bump_after as if the run's raised (`input_view_raises_in_eager`; an input an in-place view op changes
#   runs as a view of a synthetic base too). A view's own flag (a requires_grad_() of a no_grad view without history)
#   does not count: autograd's check at the read asks the root's (`root_requires_grad_as_eager`), for a view rebuilt
#   from its leaves too (`regenerated_view_raises_in_eager`).
# - Views without history stale at the end (`t0 = x[0:2]; x.add_(1.0); return t0`, x requiring no grad): eager's view
#   keeps the counter autograd made it at, so once x requires grad (the caller's requires_grad_(), or Dynamo's after a
#   graph whose program called it) the first read of its grad_fn rebuilds it from x: AsStridedBackward0, a subclass
#   view by its view functions, an error for a no_grad or multi-output view. A replay after the epilogue, made at the
#   moved counter, would stay a leaf: it is made at the input's counter at entry (Replay.stale_view), whose writes come
#   after it as eager's did. Not for chains that repeat an in-place view op (its bump in the replay leaves the view
#   stale, as eager's: an in-place view op does not renew a view's counter), nor for views of intermediates or outputs
#   (no counter at entry to make them at: their history stays a leaf's). A stale view replayed from another output
#   whose chain starts at an input shares the input's counter: made at its counter at entry too, not advanced, which
#   would move the count the epilogue gave the input (Replay.root_input, `input_rooted_bumped_views`).
# - Views taken with grad of a source that required no grad then, in a program that turns requires_grad on (the
#   source may require grad by the end, through its base) or off on an input that required it (a view replayed before
#   the epilogue meets the input as passed, its flag dropped only after the graph): eager's view has no history, and
#   grad mode's creation meta (MULTI_OUTPUT_NODE for unbind: the prefix of its error says "A view was created in
#   no_grad mode" all the same, for want of a grad_fn). Replayed with grad from a source that requires grad by then,
#   it would have one; so such a step is replayed under no_grad and given grad mode's creation meta
#   (ViewStep.without_history). So too for a multi-output view of a source an in-place write with grad (a custom
#   Function's mark_dirty too) made require grad since: that write moved the counter, so eager's read raises for want
#   of a grad_fn, where a replay with grad would name the view's node (a single-output view's history is made again
#   over the source's: AsStridedBackward0, as a replay with grad gives).
#
# Histories Regenerated By as_strided:
# A plain view taken with grad whose input's version counter advanced after autograd last set its history (an
# in-place write under no_grad, a set_() inside inference_mode) is stale: the next read of its grad_fn (a view taken
# of it, an in-place view op on it, or the backward) regenerates its history as AsStridedBackward0 of its base, which
# computes a new gradient. The view ops' backward passes views of the tangent instead, and AccumulateGrad of a leaf
# behind them would take one, sharing the caller's memory where eager's `.grad` does not. So the chain from an input
# is replayed as eager's history is: an as_strided() with grad of the input to the layout of the last stale view when
# it was read, then the steps after it (same values, `._base` and version counter). An in-place view op (t_()) sets
# the history anew: a view relaid before the bump is stale at the end all the same, and is replayed after the
# epilogue so (replayed before it, its own t_() would take the bump the runtime gives the input); one relaid while
# stale is regenerated at its layout then, its in-place view ops from there replayed on it
# (SwapRecord.stale_relayouts). Only for plain single-output views taken with grad, with static layouts. The program's
# own read of such a view's grad_fn once its counter moved (no in-place view op, set_() or `.data =` on it) answers
# that node, AsStridedBackward0 (`autograd_state._regenerated_view_node`), where the run's functional view regenerates
# by replaying its view op (SelectBackward0); a read with grad or of grad_fn since keeps it, as eager's view does.
# Under view replay mode (`torch.autograd._force_original_view_tracking(True)`, guarded as ambient state) eager's view
# keeps its view ops and regenerates by them, its own node: such a read of a plain view is refused there by name.
# Stale views of leaf view inputs: the regenerated as_strided() is of the view's `._base`, the root of its storage, not
# of the tensor it was taken of. Where that is an input whose requires_grad is its own, a view of a base requiring none
# (`x0 = b.unsqueeze(0)`, then `x0.requires_grad_()`, before the call or in the program: SwapRecord.view_input_gains),
# the regenerated node's edge is that base's, which has none: eager's view still requires grad, but no gradient reaches
# the input through it, nor through the views taken of it with grad since (`t0 = x0.reshape(36, 1)`, `t0.mul_(-1.0)`
# inside inference_mode, `t0.unsqueeze(-1)` returned: x0.grad gets nothing from it). The run's stand-in for the input
# is the root of its own views, so the run's regenerated history reaches it. A replayed output is exact: its
# as_strided() is taken stale on the real input (ViewStep.from_root), and autograd regenerates it from the real base.
# Not a view taken of that input before its flag: it has no history, and its root requires none, so autograd has
# nothing to regenerate, for it or for the views taken of it with grad since (`t0 = x0.reshape(...)`, then
# `x0.requires_grad_()`, a write or `x0.set_(x0)`: `t0.select(0, 0)` requires no grad); its chain replays as taken.
# Any other op with grad that reads such a view (or a view taken of it since: SwapRecord.regenerated_from_base) is
# refused (`grad_scope.check_regenerated_view_reads`): the graph would send the input a gradient eager's does not; a
# tensor subclass view, whose regeneration fails eager's internal assert (new_fn), is refused at any read that records
# history. Which history autograd regenerates depends on whether the input is a view: a leaf input a stale view of
# which is read with grad is guarded on being one or not (SwapRecord.base_reads).
# View inputs rebuilt from their base: eager's view keeps the version its counter had when autograd last set its
# history; at a read of that history (an op with grad recording a node over it, a view taken of it with grad, the
# backward, a read of its grad_fn or is_leaf in any grad mode) with the counter moved since, autograd rebuilds it from
# the view's `._base` (the root of its storage) as AsStridedBackward0 (a subclass's by its view functions), so its
# gradient reaches that base whatever tensor the view was taken of. A view with history is
# rebuilt so, and a leaf view (`b0.expand(...)` taken while b0 required no grad, made to require grad) once its base
# requires grad, gained before the write or after it; any write moves the counter (under no_grad, inside
# inference_mode, a set_() of the view onto itself, a write of the base or another view of it), and the next read after
# each rebuilds. The run's stand-in for a view input keeps the history it came with, so one fact says whether eager
# rebuilds an input's history and where (`autograd_state.base_rebuild`, SwapRecord.base_rebuilds: the ops with grad
# that read it with its counter moved since its last rebuild); a view the program took of the input with grad shares
# it (its history is rebuilt from the same `._base`). The program's reads of an input's grad_fn / is_leaf answer from
# it (`autograd_state.read`: no leaf once rebuilt, the node eager's rebuild makes, replayed on a detach() of the base),
# and a requires_grad_(False) of the base after a rebuild is refused (eager's view keeps that history and its flag,
# where the run's follows the base's). Two rules read it:
# - an input with history that did not run to its base (`x[1:]` passed beside or without `x = b[1:].requires_grad_()`,
#   b requiring none): its rebuilt history has no edge to x, where the run's stand-in would send x its gradient (the
#   fake probe of eager's saves fails autograd's internal assert there). Refused by name at any op with grad that
#   records history (`grad_scope.check_regenerated_view_input_reads`); reads before the write keep the input's
#   history, as eager's. The base's flag decides it, so such a compile is guarded on it (SwapRecord.base_flag_reads);
# - a leaf view input the program made require grad and read with grad, whose base requires grad by the end
#   (`stale_views.refuse_leaf_views_rebuilt_after_a_read`): a read before the first rebuild made a gradient
#   accumulator for a tensor that is then no leaf (eager's backward through it raises "leaf variable has been moved
#   into the graph interior"), a read after it sends its gradient to the base, where the run's stand-in stays a leaf.
#   A base that is no input has its flag guarded too.
# Histories regenerated over a base without grad: a view the program took with grad of a tensor that required grad has
# history of its own; where its `._base` requires none (a view in between made to require grad with requires_grad_())
# and the counter they share moved since autograd last set that history, eager's next read of it (an op with grad that
# makes a node over it, a custom Function's apply) regenerates it by as_strided over that base: a node that reaches
# nothing. The run's view of a FunctionalTensor regenerates by replaying its view ops over its own `._base`, which
# requires no grad, so makes no node, and autograd fails an internal assert; so does the run's view whose `._base` is a
# synthetic base that never requires grad, where eager's base requires grad and regenerates fine. The run's `._base`
# (the tensor its replay runs over) decides it, with the record's counter facts, before the read
# (`grad_scope.history_rebuilt_over_no_grad_base`), not torch's assert caught by its message: an apply, which reads
# every input that requires grad, is refused before it runs, and so is a set_() with grad of such a source (it reaches
# no torch-function mode, and autograd reads its source's history before it dispatches: torch_internals'
# `tensor_sets_noted` sees it first); an op runs with that base requiring grad for its duration
# (its replay then makes a node, and nothing else of the run changes where the op reads no history) and is refused
# where it made a node (Note [The Eager Record], calls that build no node), as such a read did in eager or would fail
# in the run. The view made to require grad itself is a leaf whose history is never regenerated.


def _counted_storages(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> list[set[object]]:
    """Per output, the storages of the views whose grad_fn a version-counter bump can make raise (none for an output
    that is no view, or a view of the default kind, which reads its grad_fn whatever its counter)."""
    owned: list[set[object]] = []
    for info, value in zip(infos, leaves, strict=True):
        if (
            info.kind is not OutputKind.TENSOR
            or not isinstance(value, torch.Tensor)
            or not value._is_view()
            or is_plain_autograd_view(value)
        ):
            owned.append(set())
            continue
        owned.append({storage_key(d) for d in dense_leaves_of(value, info.path)[1]})
    return owned


def _shares_its_source_counter(info: OutputInfo) -> bool:
    """Does `info`'s replay, made after the epilogue, leave its view on its source's version counter, unmoved: no
    step with a counter of its own, no in-place view op or set_(), no set_() after it?"""
    replay = info.replay
    if replay is None or replay.before_epilogue or replay.then_set or replay.base_after or info.set_under_grad:
        return False
    return not any(
        s.own_version or s.op in SET_OPS or torch.Tag.inplace_view in getattr(s.op, "tags", ()) for s in replay.steps
    )


def input_rooted_bumped_views(infos: Sequence[OutputInfo]) -> tuple[OutputInfo, ...]:
    """`infos` with Replay.root_input set on each bump_after view replayed from another output whose chain of outputs
    starts at an input, every view on the input's counter: advanced after its build, the view would move the count
    the epilogue gave the input (Note [Views That Raise After A Bump])."""
    found = list(infos)
    for o, info in enumerate(infos):
        replay = info.replay
        if replay is None or replay.source is not ReplaySource.OUTPUT or not replay.bump_after:
            continue
        source: Replay | None = replay
        seen = 0
        while source is not None and source.source is ReplaySource.OUTPUT and seen <= len(infos):
            link = infos[source.index]
            source = link.replay if _shares_its_source_counter(link) else None
            seen += 1
        if source is not None and source.source is ReplaySource.INPUT and _shares_its_source_counter(info):
            found[o] = replace(info, replay=replace(replay, root_input=source.index))
    return tuple(found)


def check_bumped_views(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> None:
    """See Note [Views That Raise After A Bump]."""
    owned = _counted_storages(infos, leaves)
    for k, info in enumerate(infos):
        if info.replay is None or not info.replay.bump_after or stale_bump(info.replay):
            continue  # (a stale view is bumped as soon as it is built, before views taken after the write)
        for j, other in enumerate(infos):
            # (one whose eager grad_fn raises at the end as it is, Replay.eager_raises, raises after the bump too)
            bumped = other.replay is not None and (other.replay.bump_after or other.replay.eager_raises)
            if j != k and owned[j] & owned[k] and not bumped and other.kind is not OutputKind.SAME_AS:
                raise UnsupportedError(
                    f"{info.path} and {other.path} are views (made under no_grad, or by a multi-output op) of one "
                    f"tensor the program wrote between taking them: eager's {info.path} raises when its grad_fn is "
                    f"read, {other.path} does not, which compiled outputs sharing a version counter cannot be. Return "
                    f"a clone of {info.path} made before the write"
                )


def check_late_bump_order(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Views That Raise After A Bump]: outputs built after the epilogue whose chains repeat in-place view
    ops are built at their last such op, so a view a chain takes after it comes early; refused where an output built
    later bumps the counter it shares, a bump eager made before that view was taken (eager's reads fine, ours raises)."""
    owned = _counted_storages(infos, leaves)
    order = build_order(infos)
    for pos, k in enumerate(order):
        value, replay = leaves[k], infos[k].replay
        if not owned[k] or replay is None or replay.before_epilogue or not isinstance(value, torch.Tensor):
            continue
        if grad_fn_raises(value):
            continue
        record = run.swaps.views.get(id(value))
        taken = record.seq if record is not None else replay.made
        for j in order[pos + 1 :]:
            later = infos[j].replay
            if later is None or later.before_epilogue or not owned[j] & owned[k] or later.made >= taken:
                continue
            if any(torch.Tag.inplace_view in step.op.tags for step in later.steps):
                raise UnsupportedError(
                    f"{infos[k].path} is a view (made under no_grad, or by a multi-output op) taken after "
                    f"{infos[j].path}'s chain applied an in-place view op (t_, transpose_, ...): eager's {infos[k].path} reads its grad_fn, while the compiled call, "
                    "which repeats each chain's in-place view ops where it builds that output, would advance the "
                    f"version counter they share after building {infos[k].path}, whose grad_fn would then raise. "
                    "Return clones, or apply the in-place view ops to clones"
                )


def counter_at_end(
    replay: Replay, value: torch.Tensor, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> Replay:
    """`replay`, an early replay of `value`, marked Replay.counter_at_end where Note [Views That Raise After A
    Bump] applies."""
    sources = [t for t in run.user_tensors if input_by_id.get(id(t)) == replay.index]
    if (
        replay.source is not ReplaySource.INPUT
        or (replay.late_steps and not all(s.grad_enabled for s in replay.steps))
        or not sources
        or is_traceable_subclass(value)
        or is_traceable_subclass(sources[0])
        or not value._is_view()
        or grad_fn_raises(value)
        or _raises_in_eager(value, sources[0], replay, run)
        or not run.swaps.bumps(sources[0])
        or any(s.own_version or torch.Tag.inplace_view in s.op.tags for s in replay.steps)
    ):
        return replay
    with_grad = [s.grad_enabled for s in replay.steps]
    if not any(with_grad) and is_plain_autograd_view(value):
        return replay
    if any(with_grad) and not (all(with_grad) and _fresh_view_with_grad(value, sources[0], replay, run)):
        return replay
    return replace(replay, counter_at_end=run.swaps.bump_count(sources[0]))


def refuse_early_view_after_grad_set(
    path: str, value: torch.Tensor, replay: Replay, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> None:
    """An output view of an input taken after the input's last set_() under grad, replayed before the epilogue (a
    `.data =` moved the input after it) and fresh at the end: eager's view is over the set_ node (its backward
    raises), ours, taken before the runtime repeats that set_(), would be over the history the input came with, or
    stale once the set_() moves the counter (Note [set_ Under Grad]). Refused. So is one taken with grad after a
    write autograd records on the input (through it or a view of it), fresh at the end: eager's view is over that
    write's node, ours over the history the input came with, and stale once the epilogue moves the counter, when
    autograd rebuilds it over the input in the layout the `.data =` gave it (another gradient, silently)."""
    if not replay.before_epilogue or replay.source is not ReplaySource.INPUT:
        return
    source = next((t for t in run.user_tensors if input_by_id.get(id(t)) == replay.index), None)
    if source is not None and value.requires_grad and any(s.grad_enabled for s in replay.steps):
        family, taken = run.swaps.family_of(source), _first_view_seq(value, source, run)
        written = run.swaps.family_visible_seq.get(family)
        if written is not None and written < taken and run.swaps.family_last_bump.get(family, 0) < taken:
            raise UnsupportedError(
                f"{path} is a view with grad of an input taken after the program wrote that input where autograd "
                "records it, and the program then assigns the input's `.data`: eager's view holds the write's node, "
                "while the compiled call builds the view before it repeats the write (its gradient would not be "
                "eager's; Note [History Kept Through .data =]); not supported in training. Return a clone of the view"
            )
    bumps = None if source is None else run.swaps.grad_set_bumps.get(id(source))
    t, first = value, None
    while source is not None and t is not source and (record := run.swaps.views.get(id(t))) is not None:
        t, first = record.source, record
    # (one the program's later write or in-place view op moved the counter of is stale, in eager's and ours alike)
    if bumps is None or t is not source or first is None or not bumps < first.bumps == run.swaps.bump_count(t):
        return
    raise UnsupportedError(
        f"{path} is a view of an input taken after the program set_() that input with grad enabled, and the program "
        "then moves the input (`.data =`): eager's view holds the set_ node, whose backward raises, while the compiled "
        "call builds the view before it repeats the set_(); not supported. Return a clone of the view"
    )


def _first_view_seq(value: torch.Tensor, source: torch.Tensor, run: FunctionalRun) -> int:
    """When the program took the first view of `value`'s chain back to `source` (0 where the chain is not found)."""
    t, seq = value, 0
    while t is not source and (record := run.swaps.views.get(id(t))) is not None:
        t, seq = record.source, record.seq
    return seq if t is source else 0


def _fresh_view_with_grad(value: torch.Tensor, source: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """Is eager's `value`, a view with grad of input `source` replayed before the epilogue, its view nodes over the
    history `source` came with, fresh at the end (Note [Views That Raise After A Bump], "Early views made after the
    last write")? A single-output view of the default kind, taken after the last bump of the counter it shares with
    `source`, which came requiring grad and kept the flag, and whose history no write autograd records changed."""
    swaps = run.swaps
    received = swaps.input_positions.get(id(source))
    family = swaps.family_of(source)
    flagged = swaps.requires_grad_set | swaps.requires_grad_gained | swaps.requires_grad_dropped
    return (
        is_plain_autograd_view(value)
        and value.requires_grad
        and received is not None
        and received[1].requires_grad
        and id(source) not in flagged
        and family not in swaps.visible_families
        and swaps.family_last_bump.get(family, 0) < _first_view_seq(value, source, run)
        and all(s.index is None and not s.without_history and not s.inference_mode for s in replay.steps)
    )


def input_view_raises_in_eager(
    value: torch.Tensor, replay: Replay | None, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> bool:
    """Does eager's grad_fn of `value`, a view made under no_grad (or by a multi-output op) of an input replayed after
    the epilogue, raise where the run's reads fine? The run's root of the input's storage need not require grad as
    eager's does (`requires_grad_as_eager`); eager's view then raises once the program wrote the input after making it
    (Note [Views That Raise After A Bump])."""
    if replay is None or replay.source is not ReplaySource.INPUT or replay.before_epilogue:
        return False
    if not value._is_view() or is_plain_autograd_view(value):
        return False
    sources = [t for t in run.user_tensors if input_by_id.get(id(t)) == replay.index]
    return bool(sources) and _raises_in_eager(value, sources[0], replay, run)


def regenerated_view_raises_in_eager(value: torch.Tensor, replay: Replay | None, run: FunctionalRun) -> bool:
    """Does eager's grad_fn of `value`, a view made under no_grad (or by a multi-output op) of an input and rebuilt from
    its leaves (no view chain to replay), raise where the run's reads fine? Eager's base is the input, which requires
    grad by the end (it came so, or gained it), and the program wrote the input after making the view; the run's root
    may be a synthetic base that never requires grad. The view's own requires_grad_() does not count: the root's flag
    decides (Note [Views That Raise After A Bump])."""
    if replay is not None or not value._is_view() or is_plain_autograd_view(value):
        return False
    base = value._base
    # (taken from the input itself, or from the synthetic base the run lays it over: not through a detach())
    if base is None or not any(u.requires_grad and (base is u or base is u._base) for u in run.user_tensors):
        return False
    key, made = storage_key(value), made_seq(value, run)
    for d, original in zip(run.dense, run.originals, strict=True):
        if key in (storage_key(d), storage_key(original)) and any(s > made for s in input_bumps(run, of=d)):
            return True
    return False


def _raises_in_eager(value: torch.Tensor, source: torch.Tensor, replay: Replay, run: FunctionalRun) -> bool:
    """The root of eager's storage of `value` requires grad where the run's does not (root_requires_grad_as_eager),
    and the program wrote its input after making it: eager's grad_fn raises, whatever the run's answers. A view's own
    requires_grad_() (`t.requires_grad_()` of a no_grad view) does not count: the root's flag decides, in both."""
    base = value._base
    if base is None or base.requires_grad or not root_requires_grad_as_eager(value, source, replay.steps, run):
        return False
    return run.swaps.last_bump.get(storage_key(source), 0) > replay.made


if TYPE_CHECKING:
    from subclassaot.pipeline.rules.swap_record import SwapRecord

aten = torch.ops.aten

_SCALING = frozenset({aten.mul_.Tensor, aten.div_.Tensor})


def steps_before_last_write(t: torch.Tensor, ndim: int, swaps: SwapRecord) -> int | None:
    """How many of the in-place view ops on input `t` (as the run ran it; `ndim` dims as it came) came before the
    program's last write of its data, through it or a view of it; None if it had none of either, or where the
    epilogue cannot give it eager's history (Note [Stale View Functions])."""
    records = swaps.inplace_views.get(id(t), [])
    family = swaps.family_of(t)
    others = [
        seq
        for k, seqs in swaps.wrapper_data_writes.items()
        if k != id(t) and swaps.family.get(k) == family
        for seq in seqs
    ]
    own = swaps.wrapper_data_writes.get(id(t), [])
    if not records or not (own or others) or any(seq > records[0].seq for seq in others):
        return None
    last = max([*own, *others])
    changes = layout_changes([(r.func, r.args) for r in records], ndim)
    if any(change and not r.grad_enabled for r, change in zip(records, changes, strict=True)):
        return None  # the trace's history of its non-view clone does not see it, the inverse views do
    changed = next((r.seq for r, change in zip(records, changes, strict=True) if change), None)
    if changed is not None and not _fresh_reads(t, changed, own, swaps):
        return None
    return sum(1 for r in records if r.seq < last)


def layout_changes(ops: Sequence[tuple[object, tuple[object, ...]]], ndim: int) -> list[bool]:
    """Per in-place view op (op, its arguments after the tensor) applied in turn to a tensor of `ndim` dims: may it
    change the layout? (Conservatively: all but a t_() of a 0-d or 1-d tensor and a transpose_() of a dim with
    itself.)"""
    out = []
    for func, args in ops:
        a, b = (args[0], args[1]) if len(args) == 2 else (None, None)
        if func is aten.t_.default and ndim < 2:
            out.append(False)
        elif func is aten.transpose_.default and isinstance(a, int) and isinstance(b, int):
            out.append(a % max(ndim, 1) != b % max(ndim, 1))
        else:
            out.append(True)
        ndim += 1 if func is aten.unsqueeze_.default else 0
    return out


def _fresh_reads(t: torch.Tensor, changed: int, own: Sequence[int], swaps: SwapRecord) -> bool:
    """After the layout change at seq `changed`: no op with grad reads `t`, or a view of it, once a bump made
    eager's rebuilt history stale, and every write into `t` hands its other arguments layout-free gradients."""
    family = swaps.family_of(t)
    bumps = [seq for seq in own if seq > changed]
    for (func, _, written), (before, read) in zip(swaps.wrapper_ops, swaps.wrapper_op_reads, strict=True):
        if before < changed:
            continue
        if any(w is t for w in written):
            if torch.Tag.inplace_view in func.tags:
                continue
            if not all(isinstance(a.numel(), int) and a.numel() == 1 for a in read):
                return False
            if func in _SCALING and any(a.requires_grad for a in read):
                return False
            continue
        stale = any(changed < seq <= before for seq in bumps)
        if stale and any(is_traceable_subclass(a) and swaps.family_of(a) == family for a in (*read, *written)):
            return False
    return True


def refuse_written_views_changed_in_place(
    layout: DenseLayout, analysis: Analysis, real: Sequence[torch.Tensor], wrapper_updates: Sequence[int]
) -> None:
    """Note [Stale View Functions]. `real`: the real tensor inputs (guarded: `_is_view()`)."""
    for i in wrapper_updates:
        tree = layout.trees[i]
        if (
            tree is not None
            and real[i]._is_view()
            and analysis.inplace_replay[i]
            and copy_point(layout, analysis, i) is None
            # ops that leave the layout as it came (x.transpose_(1, 1)) leave no stale history: as for any input
            and any(layout_changes([(s.op, s.args) for s in analysis.inplace_replay[i]], real[i].dim()))
        ):
            raise UnsupportedError(
                f"{tree.path}: a tensor subclass input that is a view and requires grad (or gains it) is written and "
                "has its metadata changed by in-place view ops (t_, unsqueeze_, ...), where eager's autograd rebuilds "
                "its history from the layout it came with: the program reads it with grad after such an op and a "
                "write, writes it from a tensor of several elements (or multiplies it by one that requires grad) "
                "after such an op, changes its layout under no_grad, writes a view of it after such an op, shares "
                "its storage with another input or assigns its `.data`; in training this is not supported yet (Note "
                "[Stale View Functions]). Pass the base, or change a clone"
            )


def _check_views_over_fresh_leaves(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Autograd Sees The Wrapper]."""
    named = {id(t): i for i, t in enumerate(run.user_tensors)}
    for info, value in zip(infos, leaves, strict=True):
        if info.kind is not OutputKind.TENSOR or info.tree is None or info.replay is not None:
            continue
        if not isinstance(value, torch.Tensor) or not value._is_view():
            continue
        if info.function_view is not None:
            continue
        if any(leaf.source is LeafSource.INPUT_ALIAS for leaf in info.leaves):
            continue
        if _view_op_aliases(value, run):
            # a set_() up the chain moved the data, not the view op (Note [Output Regeneration])
            continue
        root = run.swaps.view_root(value, through_swaps=True)
        base = root if id(root) in named else value._base
        if base is not None and id(base) in named and not _shares_inner_storage(value, base):
            raise _no_inner_views(info.path, f"input {named[id(base)]} (a {type(value).__name__}: eager's `._base`)")


def _no_inner_views(path: str, base: str) -> UnsupportedError:
    """See Note [Autograd Sees The Wrapper]: an output whose eager wrapper is a view of `base`, rebuilt from inner
    tensors that are no views of that tensor's, comes out as no view."""
    return UnsupportedError(
        f"{path} is a view of {base}, but its inner tensors are not views of that tensor's: the subclass's view op "
        "returns new inner tensors (or the same ones, or a set_() moved them), which breaks the views.alias rule of "
        "subclassaot.check_subclass, so the compiled output, rebuilt from them, could not be eager's view (Note "
        "[Autograd Sees The Wrapper]). Return a clone of the view, or make the view op return views of its input's "
        "inner tensors (return torch.utils._python_dispatch.return_and_correct_aliasing(func, args, kwargs, out))"
    )


def _check_replays_through_copies(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """A subclass view op that copies (a sharded view that gathers) took its values when it ran; a replay at the
    end of the call takes them after the program's writes. Refused where the copied tensor's family was written."""
    for info, value in zip(infos, leaves, strict=True):
        if info.kind is not OutputKind.TENSOR or info.replay is None or not isinstance(value, torch.Tensor):
            continue
        for t, record in run.swaps.subclass_view_steps(value):
            copied = not _shares_inner_storage(t, record.source)
            if copied and run.swaps.family_of(record.source) in run.swaps.written_families:
                raise UnsupportedError(
                    f"{info.path} is a view of a {type(value).__name__} made by a view op ({record.func}) whose inner "
                    "tensors are a copy of its source's, and the program writes that source's storage: eager's view "
                    "kept the values it copied, while the compiled output, replayed from the source at the end of the "
                    "call, would see the write (Note [Autograd Sees The Wrapper]). Return a clone of the view, or make "
                    "the view op return views of its source's inner tensors"
                )


def _view_op_aliases(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Did each view op up the chain that made `value` give inner tensors sharing storage with its source's? (Then
    the class's view ops alias, and a lost link to the input is a set_() further up the chain.)"""
    t, steps = value, 0
    moved = run.swaps.moved()
    while (record := run.swaps.views.get(id(t))) is not None:
        if record.func is torch.ops.aten.detach.default or not is_traceable_subclass(record.source):
            break
        if record.source is t or (steps > 0 and id(t) in moved):
            break  # (a set_() or `.data =` moved this tensor's data since the view was taken)
        if not _shares_inner_storage(t, record.source):
            return False
        t, steps = record.source, steps + 1
    return steps > 0


def check_rebuilt_view_relation(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """An output eager made as a view of a tensor the program computed, against the view relation its rebuild
    gives (Note [Output Regeneration], Note [Custom Functions]); refused, one message per
    way they differ: a plain view the program's Function made over a storage an input then moved onto, rebuilt over
    the graph's intermediate; a subclass view the program's Function made of its own tensor, with no chain replayed,
    no Function view and no fallback base (rebuilt from graph leaves as no view); one whose chain has a view op that
    made no views of the inner tensors; any other such view in a program that moved no input."""
    inputs = {id(t) for t in run.user_tensors}
    original = {storage_key(t) for t in run.originals}
    current = {storage_key(t): DenseIndex(j) for j, t in enumerate(run.finals)}
    for info, value in zip(infos, leaves, strict=True):
        if info.kind is not OutputKind.TENSOR or not isinstance(value, torch.Tensor):
            continue
        key = storage_key(value)
        if info.tree is None and info.leaves and info.leaves[0].function_view and key not in original:
            if key in current:
                raise _moved_onto_function_view(info.path, run, current[key])
        if info.tree is None or info.replay is not None or info.function_view is not None:
            continue
        if value._base is None or id(value._base) in inputs:  # (of an input: _check_views_over_fresh_leaves)
            continue
        rebuilt = not info.view_of_fresh  # (no fallback base: rebuilt from its leaves, no view)
        if rebuilt and from_program_function(value, run) and all(_rebuilt_graph_leaf(o) for o in info.leaves):
            raise UnsupportedError(
                f"{info.path} is a view a custom autograd.Function returned (or a view of one) of a "
                f"{type(value).__name__} its forward computed (eager's `._base`): with no input to replay that view "
                "from, the compiled output, rebuilt from the graph's inner tensors, would be no view (Note [Custom "
                "Functions]). Return a clone from the Function's forward"
            )
        if _chain_breaks_inner_views(value, run):
            raise _no_inner_views(info.path, f"a {type(value).__name__} the program computed (eager's `._base`)")
        if rebuilt and not run.swaps.moved():  # (moved: set_() under grad rebuilds views too; its rules decide)
            raise UnsupportedError(
                f"{info.path} is a view of a {type(value).__name__} the program computed (eager's `._base`) that no "
                "view chain replays from a rebuilt root: the compiled output, rebuilt from its inner tensors, would be "
                "no view (Note [Output Regeneration]). Return a clone of the view"
            )


def _rebuilt_graph_leaf(leaf: OutputLeaf) -> bool:
    """Is `leaf` computed by the graph and returned as is: no input's, set_() onto none, no view of another base?"""
    moved = (leaf.passthrough, leaf.storage_of, leaf.onto_input, leaf.hidden_base, leaf.foreign_base)
    return leaf.source is LeafSource.GRAPH and not leaf.function_view and all(m is None for m in moved)


def _moved_onto_function_view(path: str, run: FunctionalRun, at: DenseIndex) -> UnsupportedError:
    """Note [Custom Functions]: an output the program's custom Function made as a view of an intermediate whose
    storage dense input `at` ends on (`x.data = t0`, `x.set_(t0)`)."""
    named = run.swaps.input_paths.get(storage_key(run.originals[at]), ())
    return UnsupportedError(
        f"{path}: a custom autograd.Function returned this as a view of a tensor its forward made, and the program "
        f"then moved input {named[0] if named else f'#{at}'} onto that tensor's storage (`.data =` or set_()): "
        "eager's output shares the input's new storage, the compiled output, rebuilt as a view of the Function's "
        "tensor, would not (Note [Custom Functions]). Assign or set_() the input a clone instead"
    )


def _chain_breaks_inner_views(value: torch.Tensor, run: FunctionalRun) -> bool:
    """Did a view op up the chain that made `value` return inner tensors none of which is a view of its source's
    (new tensors, or the same objects)? Eager's wrapper is still a view (Note [Autograd Sees The Wrapper])."""
    for t, record in run.swaps.subclass_view_steps(value):
        keys = {storage_key(leaf): leaf for leaf in dense_leaves_of(record.source, "base")[1]}
        if not any(keys.get(storage_key(leaf), leaf) is not leaf for leaf in dense_leaves_of(t, "out")[1]):
            return True
    return False


def _shares_inner_storage(value: torch.Tensor, base: torch.Tensor, *, every: bool = False) -> bool:
    """Does one of `value`'s inner tensors (`every`: each of them) share storage with one of `base`'s?"""
    keys = {storage_key(leaf) for leaf in dense_leaves_of(base, "base")[1]}
    shared = (storage_key(leaf) in keys for leaf in dense_leaves_of(value, "out")[1])
    return all(shared) if every else any(shared)


def _check_fresh_views(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Output Regeneration]."""
    named = {id(t): f"input {i}" for i, t in enumerate(run.user_tensors)}
    named.update((id(v), info.path) for info, v in zip(infos, leaves, strict=True) if isinstance(v, torch.Tensor))
    for info, value in zip(infos, leaves, strict=True):
        base = value._base if info.view_of_fresh and isinstance(value, torch.Tensor) else None
        if base is None and isinstance(value, torch.Tensor) and _rebuilt_view_of_input(info, value, run):
            base = run.swaps.view_root(value, through_swaps=True)
        if base is not None and id(base) in named:
            raise UnsupportedError(
                f"{info.path} is a view of {named[id(base)]} (a tensor subclass) whose view chain cannot be replayed "
                "(it passes through a tensor the program set_() or changed in place after taking a view of it), so "
                "the compiled output could not be a view of it (Note [Output Regeneration]). "
                "Return a clone"
            )
        subclass_fallback = info.view_of_fresh and info.tree is not None and isinstance(value, torch.Tensor)
        if subclass_fallback and base is not None and _relaid_from(cast(torch.Tensor, value), base):
            # the fallback's `._base` is a view() of the output, with its layout (a root over an input's leaf that
            # was set_() or `.data =` off it, or a wrapper the program made a leaf requiring grad: no root replays)
            raise UnsupportedError(
                f"{info.path} is a view of an intermediate {type(base).__name__} (eager's `._base`) with another "
                "layout, that the compiled code cannot rebuild as a base (one of its inner tensors is an input's that "
                "the program moved, or the program made it a leaf, or its view chain does not replay): the compiled "
                "output's `._base` would have the view's own layout (Note [Output Regeneration]). Return a clone "
                "(.clone()) of the view"
            )


def _relaid_from(value: torch.Tensor, base: torch.Tensor) -> bool:
    """Has `base` (a subclass) another layout than its view `value`, at the wrapper level or in an inner tensor?"""
    metas = [[leaf_meta(d) for d in dense_leaves_of(t, "out")[1]] for t in (value, base)]
    return leaf_meta(value) != leaf_meta(base) or metas[0] != metas[1]


def _rebuilt_view_of_input(info: OutputInfo, value: torch.Tensor, run: FunctionalRun) -> bool:
    """A subclass output, a view of an input in eager, that the runtime would rebuild from its inner tensors (no
    replay: a set_() of a view in the chain, a view op of several outputs under no_grad), so no view of it."""
    if info.kind is not OutputKind.TENSOR or info.tree is None or not value._is_view():
        return False
    if info.replay is not None or info.function_view is not None:  # (rebuilt as a view of the input)
        return False
    root = run.swaps.view_root(value, through_swaps=True)
    # (a view op that makes new inner tensors breaks the views.alias rule: the checker's, not this one)
    if root is value or not any(root is u for u in run.user_tensors):
        return False
    return _shares_inner_storage(value, root, every=True)


def check_stale_subclass_outputs(infos: Sequence[OutputInfo], leaves: Sequence[object], run: FunctionalRun) -> None:
    """See Note [Stale View Functions] and Note [Output Regeneration]."""
    _check_views_over_fresh_leaves(infos, leaves, run)
    _check_replays_through_copies(infos, leaves, run)
    _check_fresh_views(infos, leaves, run)
    if not torch.is_grad_enabled():
        return
    returned = {id(v) for v in leaves if isinstance(v, torch.Tensor)}
    for info, value in zip(infos, leaves, strict=True):
        replayed = info.kind is OutputKind.TENSOR and info.replay is not None
        if not (replayed or info.kind is OutputKind.IS_INPUT) or not isinstance(value, torch.Tensor):
            continue
        own = run.swaps.inplace_views.get(id(value), [])
        # (an input aliased by others is traced as a member of their base, not a view: its family says enough)
        view = run.swaps.is_view(value) or info.kind is OutputKind.IS_INPUT
        if not (value.requires_grad and is_traceable_subclass(value) and view):
            continue
        if not any(r.grad_enabled for r in own):
            continue
        last, family = max(r.seq for r in own), run.swaps.family_of(value)
        for k, records in run.swaps.inplace_views.items():
            if k in returned or run.swaps.family.get(k, k) != family or all(r.seq < last for r in records):
                continue
            raise UnsupportedError(
                f"{info.path} is a view of a tensor subclass that an in-place view op (t_, unsqueeze_, ...) of its "
                "own changed with grad enabled, after which the program applied an in-place view op to another view "
                "of the same tensor that it does not return: eager then rebuilds the output's autograd history from "
                "view functions without its own op, which the output rebuilt at run time cannot repeat (Note [Stale "
                "View Functions]). Return a clone, or apply the in-place view ops to clones"
            )


def final_pass_marks(made: torch.Tensor, segment: int, count: int, run: FunctionalRun) -> list[tuple[int, int]]:
    """The marks of a segment of `segment` steps ending at step `count` that makes `made` and then applies the first
    of the in-place view ops the program applied to it, or [] where it does not."""
    ops = run.swaps.inplace_views.get(id(made), [])
    state = segment - 1
    if not 1 <= state <= len(ops) or state >= MARK_STATES or made._is_view() or id(made) in run.swaps.swapped_ids:
        return []
    return [(count - state + i, state_token(id(made), i)) for i in range(state + 1)]


def early_marks(marks: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """`marks` without those of `final_pass_marks`, for a chain replayed before the epilogue."""
    changed = {state_of(t)[0] for _, t in marks if t < 0}
    return tuple((c, t) for c, t in marks if t >= 0 and t not in changed)


def late_build_seq(value: torch.Tensor, replay: Replay, run: FunctionalRun) -> int:
    """Replay.made of an output built after the epilogue (Note [Views That Raise After A Bump])."""
    if replay.then_set:
        sets = run.swaps.wrapper_sets if is_traceable_subclass(value) else run.swaps.plain_sets
        if id(value) in run.swaps.swapped_by_data:
            sets = run.swaps.data_sets
        found = sets.get(id(value))
        if found is not None:
            return found[0]
    if any(torch.Tag.inplace_view in step.op.tags for step in replay.steps):
        bump = chain_bump_seq(value, run)
        if bump is not None:
            return bump  # the chain's last in-place view op: its bump, where eager's happened
    record = run.swaps.views.get(id(value))
    seqs = [record.seq] if record is not None else []
    seqs.extend(r.seq for r in run.swaps.inplace_views.get(id(value), []))
    return max(seqs, default=0)


def chain_bump_seq(value: torch.Tensor, run: FunctionalRun) -> int | None:
    """When eager ran the last in-place view op (t_, transpose_, ...) that a replay of `value`'s view chain repeats:
    `value`'s own, or one applied to a view up the chain before the next view was taken from it (not the chain's root,
    whose ops the epilogue applies), through a detach() too; None where the chain repeats none."""
    seqs = [r.seq for r in run.swaps.inplace_views.get(id(value), [])]
    records = []  # through a detach(), whose chain replays whole after the epilogue (so repeats the ops before it)
    while (record := run.swaps.views.get(id(value))) is not None:
        records.append(record)
        value = record.source
    for record in records[:-1]:
        seqs.extend(r.seq for r in run.swaps.inplace_views.get(id(record.source), []) if r.seq < record.seq)
    return max(seqs, default=None)
