"""Autograd state as eager's reads see it: reads of is_leaf / requires_grad / grad_fn answered in the no_grad trace,
gradient accumulators across `.data =`, and grad_fns regenerated from a base after `.data =`. Each part below keeps
its own contract.

The program's reads of autograd state (`t.is_leaf`, `t.requires_grad`, `t.grad_fn`) answered in the no_grad
trace as the analysis run answered them (Note [Grad Mode And Autograd Reads]).

Input: the `_DataMode` of storage_swaps.py hands each call of the program to `read`; the analysis copies the
record's answers into Analysis.autograd_reads and trace_inference gives them back to its run. Output: the answer.
Invariants: the answers are replayed in call order; a run given none computes and records them.

Part: Gradient accumulators of autograd leaves across `.data =`: which one eager's reads after an assignment feed, as
the functional run sees it, and the runtime's hold on the one eager keeps.

Input: the `_DataMode` of storage_swaps.py calls `note_grad_reads` after each op of the program and
`note_data_assignment` at each `.data =`. Output: `SwapRecord.kept_accumulators` (read by analyze) and
`SwapRecord.read_after_hidden_resize` entries (refused by set_storage_rules); the runtime's hold on the accumulators
is runtime/steps.py's `hold_accumulators` and `make_assigned_accumulators`. Invariants: records only; nothing here
changes a tensor.

Part: Plain output views assigned `.data =` whose grad_fn eager's autograd regenerates from their base (Note [History
Kept Through .data =]).

Input: the `_DataMode` of storage_swaps.py calls `note_grad_fn_reads` after each call of the program and
`note_assignment_reads` at each plain `.data =`; view_chains asks `stale_at_end` for an output view replayed from an
input and then assigned. Output: the record's `grad_fn_reads` / `reads_before_data`, and the answer.
Invariants: records only; nothing here changes a tensor.

Part: View inputs, and views the program took of them, whose history eager's autograd refuses at a read or a write
(Note [Views That Raise After A Bump]).

Input: the record, a tensor of the run and the event on it (a read of its history or an in-place write with grad);
`read` asks it at reads of grad_fn / is_leaf, grad_scope's rules at the program's ops. Output: a `RaisingHistory`
(or None), whose `error()` is eager's error. Invariants: the real input is left as it came (views of it are taken
and dropped; its version counter moved by one and given back at once).

Part: View inputs whose history eager rebuilds from their base (Note [Views That Raise After A Bump], view inputs
rebuilt from their base).

Input: the record and a tensor of the run (an input, or a view the program took of one); grad_scope notes where a
rebuild happens after each op with grad (`note_base_rebuilds`). Output: a `BaseRebuild` (or None): the one fact that
grad_scope's rule of view inputs with history and stale_views' rule of leaf view inputs read. Invariants: reads only
(the real input's `._base` and flags); records the `seq` of each rebuild.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import sympy
import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import SwapRecord, ViewRecord
from subclassaot.torch_internals import (
    grad_fn_error_after_bump,
    has_grad_fn,
    hint_of,
    is_leaf_before_base_write,
    is_no_grad_view,
    no_torch_function,
    outside_current_modes,
    reads_flag_of_base,
    rebuilt_view_node,
    storage_key,
    symint_expr,
    view_replay_enabled,
    view_write_error,
)

# The pipeline's own autograd.Functions (around input clones, the compiled step) live in subclassaot's modules; a
# Function class that subclassaot makes to stand for one of the program's (the torch.compile backend's, for a Function
# Dynamo captured) says so by this class attribute, set True.
PROGRAM_FUNCTION_FLAG = "subclassaot_program_function"


def is_program_function(cls: type) -> bool:
    """Is the autograd.Function class `cls` the program's (not one of the pipeline's own)?"""
    return getattr(cls, PROGRAM_FUNCTION_FLAG, False) is True or not cls.__module__.startswith("subclassaot.")


_GETTERS = frozenset({"is_leaf", "requires_grad", "grad_fn"})


def is_autograd_read(func: Any) -> bool:
    """Is `func` the getter of one of the autograd attributes replayed (Note [Grad Mode And Autograd Reads])?"""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner in _GETTERS and getattr(func, "__name__", "") == "__get__"


def read(record: SwapRecord, func: Any, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """The answer of one autograd read `func(*args)`: the analysis run's where the record replays them, else
    `call()`'s (recorded). A read made inside an op's dispatch (the swap mode's own rules, or a subclass's
    `__torch_dispatch__`, as torch's TwoTensor building its result) is no program's: answered as the run's, neither
    recorded nor replayed, since runs under different grad modes make different such reads."""
    inside = record.dispatching > 0
    name = getattr(getattr(func, "__self__", None), "__name__", None)
    if not inside and name in _GRAD_FN_GETTERS and args:
        found = raising_history(record, args[0])  # Note [Views That Raise After A Bump]
        if found is not None:
            raise found.error()
        if name == "grad_fn":
            _refuse_regenerated_under_replay(record, args[0])
    rebuilt = None if inside or not args else _rebuilt_at_read(record, name, args[0])
    if not inside and name == "grad_fn" and args and id(args[0]) in record.entry_nodes:
        record.grad_fn_type_reads.append(record.input_positions[id(args[0])][0])  # Note [What The Guards Compare]
    if not inside and record.replayed_reads is not None and record.replay_cursor < len(record.replayed_reads):
        replayed = record.replayed_reads[record.replay_cursor]
        record.replay_cursor += 1
        record.autograd_reads.append(replayed)  # what this run answered: the next run's replay
        return replayed
    real = record.eager_inputs.get(id(args[0])) if args else None
    if rebuilt is not None:  # Note [Views That Raise After A Bump], view inputs rebuilt from their base
        answer: object = (
            False if name == "is_leaf" else _kept_node(record, args[0], lambda: rebuilt_view_node(rebuilt.real))
        )
    elif real is not None and name == "is_leaf":  # Note [Grad Mode And Autograd Reads]
        answer = real.is_leaf
    elif (
        real is not None
        and name == "grad_fn"
        and (real.is_leaf or not record.grad_at_start or _as_passed(record, args[0], call))
    ):
        answer = real.grad_fn
    elif not inside and args and (flagged := flagged_base_view_read(record, name, args[0])) is not None:
        answer = flagged[0]  # Note [Grad Mode And Autograd Reads], views of gained bases
    elif name == "requires_grad" and not inside and args and reads_unpassed_base(record, args[0]):
        answer = False
    elif not inside and args and _flagless_at_read(record, args[0]):
        answer = {"is_leaf": True, "requires_grad": False}.get(str(name))  # eager's: no flag, no history (grad_fn None)
    else:
        answer = _run_read(record, name, args, call)
        if name == "requires_grad" and answer is False and not inside and args:
            answer = requires_grad_through_gained_base(record, args[0])
        elif name == "grad_fn" and answer is not None and not inside and args:
            answer = _regenerated_view_node(record, args[0]) or answer
    if not inside:
        record.autograd_reads.append(answer)
    return answer


def flagless_view_source(record: SwapRecord, t: torch.Tensor) -> torch.Tensor | None:
    """The input `t` is a view of, through view ops, where the program made that input require grad while it is a
    view of a tensor requiring none (`record.view_input_gains`) and a view op of the chain ran before the flag or under
    no_grad: eager's `t` requires no grad (its flag comes from that base, or it was made without history)."""
    flagless = False
    view = record.views.get(id(t))
    while view is not None:
        gain = record.view_input_gains.get(id(view.source))
        flagless = flagless or not view.grad_enabled or (gain is not None and view.seq <= gain)
        if gain is not None:
            return view.source if flagless else None
        view = record.views.get(id(view.source))
    return None


def _flagless_at_read(record: SwapRecord, t: object) -> bool:
    """Does the program read the autograd state of a view eager's autograd gives neither flag nor history
    (`flagless_view_source`; no requires_grad_() on it, no write with grad into its storage) where the run's follows
    the input's stand-in, which requires grad: a view op of it taken with grad after the flag records history in the
    run, none in eager? Eager's answers: requires_grad False, is_leaf True, grad_fn None (Note [Grad Mode And Autograd
    Reads], flagless views)."""
    if not isinstance(t, torch.Tensor) or not record.view_input_gains:
        return False
    marked = record.requires_grad_set | record.requires_grad_dropped | record.own_flags | record.new_leaf_ids
    with no_torch_function():  # (the pipeline's reads, not the program's)
        if id(t) in marked or flagless_view_source(record, t) is None or storage_key(t) in record.visible_writes:
            return False
    found = record.input_positions.get(id(record.view_root(t, through_swaps=True)))
    if found is not None:
        record.base_reads.append((found[0], -1))  # (eager's view requires none through the input's base: guarded)
    return True


def _as_passed(record: SwapRecord, t: object, call: Callable[[], object]) -> bool:
    """Is `t` an input, no leaf, whose stand-in still has the node it came with (`call()`, the run's read of it): no
    write with grad has given it one since, nor eager's (Note [Grad Mode And Autograd Reads])."""
    node = record.entry_nodes.get(id(t), record)  # (the record itself: no node at all)
    try:
        return call() is node
    except RuntimeError:  # (its read raises in the run: `_run_read` answers)
        return False


def _rebuilt_at_read(record: SwapRecord, name: object, t: object) -> BaseRebuild | None:
    """Note [Views That Raise After A Bump], view inputs rebuilt from their base: does the program's read of
    `t.grad_fn` or `t.is_leaf` (in any grad mode) rebuild eager's history of `t`, a view input whose counter moved since
    autograd last set it, that has history or whose base requires grad now, or one rebuilt before (a leaf view is no
    leaf after its first rebuild, whatever its base's flag)? Its fact then, a rebuild noted at this read; else None."""
    if name not in _GRAD_FN_GETTERS or not isinstance(t, torch.Tensor) or id(t) not in record.input_positions:
        return None
    found = base_rebuild(record, t)
    if found is None or not (found.rebuilt_at or found.rebuilds and found.pending):
        return None
    note_base_rebuilds(record, [(t, found)])
    return found


def refuse_flag_off_after_rebuild(record: SwapRecord, base: torch.Tensor) -> None:
    """At the program's requires_grad_(False) of `base`, an input that requires grad: refuse it where eager rebuilt
    from it so far the history of a view input (its `._base` is `base`'s real input): that view keeps the history,
    and requires grad, once the flag is off, in the program and after the call, where the run's view follows its
    base's flag (Note [Views That Raise After A Bump], view inputs rebuilt from their base)."""
    found = record.input_positions.get(id(base))
    if found is None:
        return
    for key, seqs in record.base_rebuilds.items():
        view = record.input_positions.get(key)
        if not seqs or view is None or view[1]._base is not found[1]:
            continue
        raise UnsupportedError(
            f"{record.run_input_paths[found[0]]}: the program turns requires_grad off (requires_grad_(False), "
            f"`.requires_grad = False`) on an input whose view, tensor input {view[0]}, had its history rebuilt from "
            "it (a read of that view's grad_fn or is_leaf, or an op with grad, after a write moved the version counter "
            "they share while this input required grad): eager's view keeps that history, and requires grad, once the "
            "flag is off, where the compiled call's follows its base's flag (Note [Views That Raise After A Bump]). "
            "Turn requires_grad off outside the compiled function"
        )


def _regenerated_view_node(record: SwapRecord, t: torch.Tensor) -> object | None:
    """Note [Views That Raise After A Bump], histories regenerated by as_strided: where `t` is a plain single-output
    view the program took with grad (no in-place view op, set_() or `.data =` on it since, no detach() in its making)
    whose version counter moved after it was made, the grad_fn eager's read finds: the history autograd regenerated
    from its `._base` by as_strided() at the first read after that move (AsStridedBackward0), where the run's
    functional view replays its own view op; else None."""
    view = record.views.get(id(t))
    if (
        view is None
        or not view.grad_enabled
        or view.below_autograd
        or view.index is not None
        or view.inference_mode
        or view.func is torch.ops.aten.detach.default
        or is_traceable_subclass(t)
        or record.inplace_views.get(id(t))
        or id(t) in record.moved() | record.data_aliases
        or record.family_last_bump.get(record.family_of(t), -1) <= view.seq
    ):
        return None
    return _kept_node(record, t, lambda: _as_strided_node(t))


def _refuse_regenerated_under_replay(record: SwapRecord, t: object) -> None:
    """Note [Views That Raise After A Bump], histories regenerated by as_strided, under view replay mode: the program's
    read of the grad_fn of `t`, a view it took with grad whose version counter moved since, is refused there (eager's
    regenerated node replays its view ops, which neither `_as_strided_node` nor the run's functional view answers). A
    subclass view's is its view op's under either mode: the run's answer stands."""
    view = record.views.get(id(t))
    if (
        not view_replay_enabled()
        or view is None
        or not view.grad_enabled
        or view.below_autograd
        or is_traceable_subclass(t)
        or record.family_last_bump.get(record.family_of(cast(torch.Tensor, t)), -1) <= view.seq
    ):
        return
    raise UnsupportedError(
        "the program reads the grad_fn of a view it took whose base or itself it wrote in place since, under view "
        "replay mode (torch.autograd._force_original_view_tracking(True)): eager's autograd regenerates that view's "
        "history by replaying its view ops there, which the compiled program does not model. Read it outside view "
        "replay mode, or outside the compiled function"
    )


def _kept_node(record: SwapRecord, t: torch.Tensor, make: Callable[[], object]) -> object:
    """The node eager's read of `t`'s grad_fn finds, `t` a view whose history autograd rebuilds from its base: `make()`
    at the first read after each move of its counter, the same node at the reads after it until the next."""
    bump = record.family_last_bump.get(record.family_of(t), -1)
    kept = record.regenerated_nodes.get(id(t))
    if kept is None or kept[0] != bump:
        kept = record.regenerated_nodes[id(t)] = (bump, make())
    return kept[1]


def _as_strided_node(t: torch.Tensor) -> object:
    """AsStridedBackward0 of an as_strided() to `t`'s layout, of a tensor requiring grad laid out as `t`'s `._base`
    (tensors of its own, outside every mode: the run records nothing of it). None for a view of another dtype than
    its base's, or a complex one (autograd rebuilds those by their own view ops)."""
    with no_torch_function():  # (the pipeline's reads, not the program's)
        base = t._base
        if base is None or base.dtype != t.dtype or t.is_complex():
            return None
        # (a symbolic layout by its hints, read without a guard: the node's kind is the answer's, sizes aside)
        layouts = [
            ([hint_of(d) for d in u.shape], [hint_of(d) for d in u.stride()], hint_of(u.storage_offset()))
            for u in (base, t)
        ]
    spans = [sum(max(n - 1, 0) * st for n, st in zip(size, stride, strict=True)) for size, stride, _ in layouts]
    extent = max(offset + span + 1 for (_, _, offset), span in zip(layouts, spans, strict=True))
    with outside_current_modes(), no_torch_function(), torch.inference_mode(False), torch.enable_grad():
        memory = torch.empty(extent, dtype=t.dtype, device="meta")
        root = memory.as_strided(*layouts[0]).detach().requires_grad_()
        return root.as_strided(*layouts[1]).grad_fn


def view_without_history(record: SwapRecord, t: torch.Tensor) -> tuple[int, torch.Tensor] | None:
    """(tensor position, real input) of the view input that `t` is, or is a view of, where eager's `t` requires grad
    through that input's `._base`, which the program made require grad, and has no history of its own (Note [Grad
    Mode And Autograd Reads], views of gained bases); None elsewhere."""
    chain = [t, *(view.source for view in record.chain(t))]
    if id(chain[-1]) not in record.views_of_flagged_bases or record.requires_grad_dropped:
        return None
    flagged = record.requires_grad_set | record.own_flags | record.moved()
    if any(id(s) in flagged for s in chain):
        return None
    root = chain[-1]
    found = record.input_positions.get(id(root))
    if found is None or found[1]._version != 0:
        return None  # (a counter moved before the call may have left the view stale: its history is regenerated)
    bumped = any(record.family_last_bump.get(record.family_of(s)) is not None for s in (t, root))
    return None if bumped or storage_key(root) in record.last_bump else found


def flagged_base_view_read(record: SwapRecord, name: object, t: object) -> tuple[object] | None:
    """Eager's answer (in a 1-tuple) to the program's read of `name` of `t`, a view it took of a view input whose
    `._base`, another input, it made require grad, with no history to that input (`view_without_history`): the run's
    stand-ins, laid out apart, require none. Eager's requires grad (its base's flag); it has a node where its own view
    op ran with grad after the flag (is_leaf False), that op's, whose edge for the input goes nowhere (Note [Grad Mode
    And Autograd Reads], views of gained bases). None elsewhere."""
    view = (
        record.views.get(id(t))
        if isinstance(t, torch.Tensor) and name in _GRAD_FN_GETTERS | {"requires_grad"}
        else None
    )
    if view is None or view.inference_mode or view.below_autograd or is_traceable_subclass(t):
        return None
    assert isinstance(t, torch.Tensor)
    with no_torch_function():  # (the pipeline's reads, not the program's)
        found = view_without_history(record, t)
    if found is None:
        return None
    root = [*record.chain(t)][-1].source
    node = view.grad_enabled and view.seq > record.views_of_flagged_bases[id(root)]
    if name != "grad_fn":
        return (not node,) if name == "is_leaf" else (True,)
    return (_flagged_base_view_mimic(record, t, root, found).grad_fn if node else None,)


def _flagged_base_view_mimic(
    record: SwapRecord, t: torch.Tensor, root: torch.Tensor, found: tuple[int, torch.Tensor]
) -> torch.Tensor:
    """Eager's `t` (`flagged_base_view_read`) in tensors of their own (meta, outside every mode), one per tensor of
    its chain of views (SwapRecord.flagged_view_mimics: the nodes link as eager's do): the layout of `found`'s real
    input, `root`'s, as a view of a base that requires grad, with no history or accumulator of its own, and each view
    op replayed over it as the program took it (without a node where taken before the flag), so the first node's
    edge goes nowhere."""
    chain = [t, *(v.source for v in record.chain(t))]
    mimics, k = (
        record.flagged_view_mimics,
        next((k for k, s in enumerate(chain) if id(s) in record.flagged_view_mimics), None),
    )
    with outside_current_modes(), no_torch_function(), torch.inference_mode(False), torch.enable_grad():
        if k is None:
            real, k = found[1], len(chain) - 1
            span = sum(max(n - 1, 0) * st for n, st in zip(real.shape, real.stride(), strict=True))
            base = torch.empty(real.storage_offset() + span + 1, dtype=real.dtype, device="meta")
            mimics[id(root)] = base.as_strided(real.shape, real.stride(), real.storage_offset())
            base.requires_grad_()
        for s in reversed(chain[:k]):
            step = record.views[id(s)]
            after = step.seq > record.views_of_flagged_bases[id(root)]
            try:
                mimics[id(s)] = _replayed_step(
                    replace(step, grad_enabled=step.grad_enabled and after), mimics[id(step.source)]
                )
            except TypeError as e:
                raise UnsupportedError(
                    f"the program reads the grad_fn of a view it took of tensor input {found[0]} by a view op taking a "
                    "tensor argument, after the input's `._base`, another input, was made to require grad: eager's node "
                    "is that view op's, which the compiled run, laying the inputs out apart, does not make. Read it "
                    "outside the compiled function"
                ) from e
    return mimics[id(t)]


def requires_grad_through_gained_base(record: SwapRecord, t: object) -> bool:
    """Does eager's `t` require grad where the run's does not: `t` is an input, or a flagless view of one taken under
    no_grad, whose `._base` is another input the program has made require grad? Eager's view reads its base's flag; the
    run lays the two inputs out apart (or as views of a synthetic base), so its stand-in keeps the flag it came with
    (Note [Grad Mode And Autograd Reads])."""
    if not isinstance(t, torch.Tensor) or not record.base_gained(t) or id(t) in record.own_flags:
        return False
    if id(t) in record.requires_grad_set or id(t) in record.requires_grad_dropped:
        return False
    with no_torch_function():  # (the pipeline's reads, not the program's)
        root = record.view_root(t, through_swaps=True)
        if t.requires_grad or (root is not t and not is_no_grad_view(t)):
            return False
        found = record.input_positions.get(id(root))
        base = None if found is None else found[1]._base
        return any(other is base and record.run_inputs[j].requires_grad for j, other in record.input_positions.values())


def reads_unpassed_base(record: SwapRecord, t: object) -> bool:
    """Is `t` a view (taken under no_grad, no flag of its own) whose flag is eager's root base's, the base of a view
    input that required no grad when passed, which is no input? That base requires none (neither did its view), and
    the program cannot reach it, where the run's root, the input's stand-in laid out anew, may have gained the flag
    since. Guarded: the input stays a view (Note [Grad Mode And Autograd Reads]). A program's read only: one inside an
    op's dispatch is the run's rules' (`read`)."""
    if not isinstance(t, torch.Tensor) or id(t) in record.own_flags or not reads_flag_of_base(t):
        return False
    root = record.view_root(t, through_swaps=True)
    found = record.input_positions.get(id(root))
    if found is None or root is t or record.view_root(t) is not root:
        return False
    position, real = found
    if real.requires_grad or real._base is None or any(o is real._base for _, o in record.input_positions.values()):
        return False
    record.base_reads.append((position, -1))
    return True


def _run_read(record: SwapRecord, name: object, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """`call()`, the run's own answer to a read of `name` (Note [Grad Mode And Autograd Reads])."""
    try:
        return call()
    except RuntimeError as e:
        t = args[0] if args else None
        if not isinstance(t, torch.Tensor) or not str(e).startswith("A view was created in no_grad mode"):
            raise
        found = record.input_positions.get(id(record.view_root(t, through_swaps=True)))
        if found is None:
            raise
        raise UnsupportedError(
            f"the program reads `.{name}` of a view of tensor input {found[0]} that its base's in-place write "
            "(with that base requiring grad) makes autograd rebuild: the compiler's run lays inputs out under "
            'no_grad, where autograd refuses that view\'s history ("A view was created in no_grad mode ...") and '
            "eager's view may have one (Note [Grad Mode And Autograd Reads]). Take the view after the "
            "write, or make the input require grad before the call"
        ) from e


def note_detach(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """`detach_()` makes its tensor a leaf (Note [Grad Mode And Autograd Reads])."""
    if func in (torch.Tensor.detach_, torch.detach_) and args:
        record.eager_inputs.pop(id(args[0]), None)


def is_base_read(func: Any) -> bool:
    """Is `func` the getter of `Tensor._base`, or `Tensor._is_view` (Note [Grad Mode And Autograd Reads])?"""
    if func is torch.Tensor._is_view:
        return True
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner == "_base" and getattr(func, "__name__", "") == "__get__"


# attributes whose getter reads no history (eager rebuilds no grad_fn there; `.T`, `.mT` and the like take views)
_NO_HISTORY_GETTERS = frozenset(
    {"requires_grad", "shape", "dtype", "device", "layout", "ndim", "data", "names", "is_cuda", "itemsize", "nbytes"}
)


def reads_history(func: Any) -> bool:
    """May the call read its tensors' histories (eager rebuilds a view's grad_fn there: an op autograd records, or an
    autograd read such as `t.grad_fn`)? Not an attribute's setter (torch's set_() sets `_backward_hooks`), nor
    requires_grad_(), nor a getter of `_NO_HISTORY_GETTERS`."""
    name = getattr(func, "__name__", "")
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return name not in ("__set__", "__delete__", "requires_grad_") and (
        name != "__get__" or owner not in _NO_HISTORY_GETTERS
    )


def is_read_with_grad(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> bool:
    """Is the call a read with grad of the tensors it received (SwapRecord.read_with_grad): made with grad on, it
    reads their histories (`reads_history`) into results autograd records? Not where it returns no tensor (an
    autograd read among them), or only tensors it was passed and writes none (`x.contiguous()` of a contiguous x,
    `x.to(x.dtype)`: the result is x itself, with x's history or none, so a requires_grad_() on x after it is no flag
    after a read with grad, Note [Grad Mode And Autograd Reads]); an in-place op returns its argument too, and records
    the write: a read."""
    if not torch.is_grad_enabled() or not reads_history(func):
        return False
    outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not outs:
        return False
    name = getattr(func, "__name__", "").split(".")[0]  # (an OpOverload's: `as_strided_.default`)
    schema = getattr(func, "_schema", None)
    if name.endswith("_") or name == "__set__" or "out" in kwargs or (schema is not None and schema.is_mutable):
        return True
    passed = {id(a) for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
    return not all(id(o) in passed for o in outs)


def base_read(record: SwapRecord, func: Any, args: tuple[Any, ...], call: Callable[[], object]) -> object:
    """The answer of `args[0]._base` or `args[0]._is_view()` (Note [Grad Mode And Autograd Reads]); `call()` gives
    the run's own."""
    out = call()
    t = args[0] if args else None
    if not isinstance(t, torch.Tensor):
        return out
    root = record.view_root(t, through_swaps=True)
    found = record.input_positions.get(id(root))
    if found is None:
        return out
    position, real = found
    if func is torch.Tensor._is_view:
        if t is not root:
            return True
        record.base_reads.append((position, None if real._base is None else -1))
        return real._base is not None
    base = real._base
    if base is None:
        record.base_reads.append((position, None))
        return None if t is root else root
    for j, other in record.input_positions.values():
        if other is base:
            record.base_reads.append((position, j))
            return record.run_inputs[j]
    what = "tensor input" if t is root else "a view of tensor input"
    raise UnsupportedError(
        f"the program reads `._base` of {what} {position} (of shape {tuple(real.shape)}), which is a view of a "
        "tensor not passed to the program: eager's answer is that tensor, which the compiled program does not have "
        "(Note [Grad Mode And Autograd Reads]). Pass the base as an argument too, or test `._is_view()` instead"
    )


# Note [Gradient Accumulators Of Leaves]
# Eager: a leaf that requires grad feeds the accumulator alive when a node reading it was made, and the engine reduces
# every gradient reaching an accumulator to the size it recorded when it was made (or raises where that does not expand
# to the gradient's). `.data =` keeps the leaf's accumulator where one is alive; set_() (under no_grad: with grad it
# raises) gives the leaf a new one, even `x.set_(x)`: nodes made before feed the old, uses after the new; inside
# inference_mode, where autograd's kernels do not run, set_() keeps the one alive (`note_self_set`). One is alive
# where an op with grad read the leaf before and its result is still held, so whether eager's backward raises depends
# on what lives: nothing per call may be kept by a reference cycle until a collection (`_rewrap` recurses through the
# module-level `_build`; regenerate.build_outputs drops its hold on itself once the outputs are built).
# - `.data =`, kept: a plain input swapped only by `.data =` within its own storage gets its layout by `.data =` too,
#   not set_(). The joint trace reduces the graph's gradients to the old size already; reads the runtime replays after
#   the epilogue must find the old accumulator too, and the Function may hold none (the leaf goes in detached), so the
#   runtime takes it before the epilogue and holds it until the outputs are built (`kept_accumulators`). The functional
#   run keeps every result, so analyze asks eager, run on static fakes where results die as in eager
#   (backward_probe.eager_accumulator_sizes): where the outputs' graphs reach an accumulator of the leaf in another
#   size (the read before went into a temporary that died), eager's reads after made a new one, refused as below.
# - `.data =`, made afresh on a plain leaf: a read with grad by a non-view op at another size than the leaf had would be
#   reduced to the old size by the trace where eager's has the new one: refused with the no_grad set_() it mirrors
#   (Note [Leaves Laid Out Anew Under no_grad]). Views replayed after the epilogue make the new one as eager's reads do.
# - `.data =`, made afresh on a subclass leaf (its inner tensors keep their sizes, so gradients keep theirs): where the
#   graph reads the leaf after the assignment, the runtime makes the accumulator first, in the size the program read it
#   at (a `.data =` of that size with zero strides, the accumulator taken, the old metadata given back) and holds it
#   until the Function's edge does. Only for inputs that are leaves when called; an accumulator already alive stays. A
#   traced backward that fails the clone's size check (`x0.sum()`) is refused (refuse_unreduced_assigned_gradients);
#   where the new size does not expand to the old, ours raises for every backward through the Function: a known gap.
# - set_() renews: x.set_(x) changes nothing else (nor does a set_ to a tensor over x's storage in x's very layout,
#   `x.set_(x.expand(-1))`, or, to autograd, a wrapper subclass's set_ whose epilogue lays out inner tensors only),
#   so the trace sees no swap; the runtime renews the accumulator by
#   set_() of the input to itself under no_grad, before the call where the program read the leaf with grad only after
#   its last such set_() (`Analysis.self_set_first`: eager's nodes then feed the accumulator the returned leaf feeds),
#   after it otherwise. A read is an op with grad, no view op, of the leaf or a view of it wherever taken (the set_()
#   moved the counter the views share), that makes a node: one returning its argument unwritten (`requires_grad_()`,
#   a `contiguous()`) makes none (the inputs the functional run takes as views have a history, the leaves none); a
#   custom Function's apply with grad makes one whose edges hold its inputs' accumulators, though its forward's ops
#   run with grad off. A read before counts only where a node it made lives on: one whose result died
#   (`x.data.copy_(x)`, a discarded `x.sin()`) left an accumulator nothing reaches, so the functional run, which keeps
#   every result, asks eager on static fakes (backward_probe.old_accumulators_dead).
#   Read before and after the last set_(), eager's nodes feed two accumulators and the Function's one edge cannot: a
#   backward error is refused where such a leaf is an input and an output is (a view of) an input
#   (backward_trace's refuse_reads_around_self_set).
# - set_() to another tensor under no_grad renews too: the epilogue replays it as set_(), which renews after the call
#   by itself; where every read comes after it, the runtime renews before the call as above and the epilogue's set_()
#   runs inside inference_mode, where it keeps the accumulator.
# - set_() inside inference_mode keeps the one alive, whatever holds it (a node of the program's read before, a view's
#   node, the caller's too: `b0.t()` passed beside b0), at its old size: a backward through the leaf, or through a
#   view made anew after, fails its size check. Where the program set_() the leaf inside inference_mode only, the
#   epilogue's set_() runs inside it too and keeps the same one (`Analysis.set_inside_inference`).
#
# Gradients Passed Through:
# Eager: a leaf's AccumulateGrad takes the incoming gradient as the leaf's `.grad` only where nothing else holds that
# tensor (its reference count; a view made by the backward, `x.view(-1)`'s, is a new tensor and is taken); otherwise
# it stores a clone. So where the backward passes the caller's gradient through unchanged (`x.clone()`, `x + y`, the
# caller holding `g` in `out.backward(g)`), the leaf's `.grad` never shares the caller's memory:
#   x = PairTensor(..., requires_grad=True); out = f(x); out.backward(g)     x.grad.a is a copy of g.a
# A plain gradient the backward graph returns unchanged is that very tensor, and AccumulateGrad copies it as eager's.
# A subclass gradient, though, is rebuilt around the graph's dense leaves: a new wrapper nobody else holds, which
# AccumulateGrad takes, its inner tensors the caller's. So where the graph returns a received tangent's dense leaves
# unchanged, object for object, with its structure and the input's size, the Function returns that tangent itself, as
# eager's node does, and AccumulateGrad copies it where eager's does. So for a plain input whose gradient is a
# subclass (`x.exp() + w`, x a PairTensor: w.grad is a PairTensor, a copy of the caller's tangent), with the size
# its rebuilt gradient has.


def note_grad_reads(
    record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object, seq_before: int
) -> None:
    """After an op of the program, which began at `seq_before` (Note [Gradient Accumulators Of Leaves]): note the
    leaves it read with grad (none inside inference_mode(), where autograd records nothing, grad mode on or off)."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    if not _makes_node(record, args, kwargs, out, seq_before):
        return
    results = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad and has_grad_fn(t)]
    read = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    view = all(t._is_view() for t in results)
    view_op = view and not any(r is a for r in results for a in read)  # not an in-place op on a view
    for a in read:
        if a.requires_grad:
            _note_read(record, a, view, view_op)


def note_set_source_read(record: SwapRecord, x: torch.Tensor, source: object) -> None:
    """`x.set_(source)` with grad on (not inside inference_mode), source requiring grad: autograd's set_ node has an
    edge to source's history, a leaf's accumulator made now at its size now, so it is a read with grad (Note
    [Gradient Accumulators Of Leaves]; set_() dispatches below the torch-function mode, which sees the other reads)."""
    if isinstance(source, torch.Tensor) and source is not x and source.requires_grad:
        _note_read(record, source, x._is_view(), False)


def _note_read(record: SwapRecord, a: torch.Tensor, view: bool, view_op: bool) -> None:
    """`a`, which requires grad, read by an op with grad (`view`: its results all views; `view_op`: it is a view op,
    no in-place op on a view): what `note_grad_reads` notes of it."""
    if not view_op:
        _note_accumulator_read(record, a)  # Note [Gradient Accumulators Of Leaves]
    if id(a) not in record.data_sets and id(a) not in record.wrapper_data:
        record.grad_read.add(id(a))
    elif id(a) in record.late_grad and record.releafed.get(id(a), ()) is None:
        # (assigned `.data =` before its flag: eager's accumulator is made here, at this size, Note [Leaves Laid
        # Out Anew Under no_grad])
        record.releafed[id(a)] = tuple(a.shape)
    elif id(a) in record.wrapper_data and id(a) not in record.kept_accumulators:
        record.assigned_reads.setdefault(id(a), tuple(a.shape))  # Note [Gradient Accumulators Of Leaves]
    if not view and record.fresh_accumulators:
        _note_read_after_assignment(record, a)


def _makes_node(
    record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: object, seq_before: int
) -> bool:
    """Did the op the program called (with grad on), which began at `seq_before`, make an autograd node? Its own
    arguments returned are read last, and only where the op wrote or relaid them: our read of a view's grad_fn after
    its version moved rebuilds its history (an as_strided() the mode counts), where eager's op made no read."""
    read = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    results = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    returned = [r for r in results if any(r is a for a in read)]
    if any(has_grad_fn(r) for r in results if not any(r is a for a in returned)):
        return True
    # its arguments themselves, neither written nor relaid (`requires_grad_()`, a `contiguous()`): no node
    # (an input run as a contiguous clone of eager's: eager's contiguous() copies it, a node)
    if record.seq == seq_before and not any(id(r) in record.copy_on_contiguous for r in returned):
        return False
    return any(has_grad_fn(r) for r in returned)


def note_function_grad_reads(record: SwapRecord, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """A custom Function's apply with grad on: where an input requires grad, autograd records its node, whose edge
    holds the accumulator of each input that is a leaf requiring grad, though no op of the forward (run with grad off)
    reads one with grad (Note [Gradient Accumulators Of Leaves])."""
    if not torch.is_grad_enabled():
        return
    with no_torch_function():  # (the pipeline's reads, not the program's)
        for a in pytree.tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                _note_accumulator_read(record, a)


def _note_read_after_assignment(record: SwapRecord, t: torch.Tensor) -> None:
    """`t`, read by an op with grad that is no view: mark each leaf a `.data =` left without an accumulator that it
    is, or whose view taken after the assignment it is, where its size is not the one it had before."""
    taken: int | None = None  # when the view below `t` in the chain was taken
    while True:
        fresh = record.fresh_accumulators.get(id(t))
        if fresh is not None and (taken is None or taken > fresh[0]) and tuple(t.shape) != fresh[1]:
            record.read_after_hidden_resize.add(id(t))
        found = record.views.get(id(t))
        if found is None or found.func is torch.ops.aten.detach.default:
            return
        taken, t = found.seq, found.source


def assigned_accumulator_size(record: SwapRecord, t: torch.Tensor) -> tuple[int | sympy.Expr, ...] | None:
    """Note [Gradient Accumulators Of Leaves]: the size of subclass input `t` at the first read with grad
    after its `.data =` (None: none, or one before the assignment kept the accumulator)."""
    size = record.assigned_reads.get(id(t))
    if size is None or id(t) in record.kept_accumulators:
        return None
    return tuple(symint_expr(d) for d in size)


def note_data_assignment(record: SwapRecord, target: torch.Tensor, size_before: tuple[Any, ...]) -> None:
    """At `target.data = ...` (before the record's seq advances for it): whether `target`, where it requires grad,
    keeps its accumulator, or gets a new one at its first read with grad (for a leaf: inputs run as views of their
    bases, so what is a leaf is the real input's to say)."""
    if not target.requires_grad or id(target) in record.fresh_accumulators:
        return
    if id(target) in record.grad_read:
        record.kept_accumulators.add(id(target))
    elif id(target) not in record.kept_accumulators and not is_traceable_subclass(target):
        record.fresh_accumulators[id(target)] = (record.seq, size_before)


def _note_accumulator_read(record: SwapRecord, a: torch.Tensor) -> None:
    """`a`, read by an op with grad that is no view: note it, and the tensor it is a view of, as read then (Note
    [Gradient Accumulators Of Leaves])."""
    read = {id(a), record.family_of(a)}
    if a._is_view() and a._base is not None:
        read.add(id(a._base))
    record.grad_reads.update(read)
    record.read_after_self_set.update(read & record.self_sets)


def note_self_set(record: SwapRecord, t: torch.Tensor) -> None:
    """The program's `t.set_(t)` under no_grad (Note [Gradient Accumulators Of Leaves]); inside inference_mode
    autograd's kernel of set_ does not run, and no accumulator is renewed."""
    if torch.is_inference_mode_enabled():
        return
    record.self_sets.add(id(t))
    record.read_after_self_set.discard(id(t))  # reads after the last one only
    if id(t) in record.grad_reads:
        record.read_before_self_set.add(id(t))


def self_set_order(record: SwapRecord, t: torch.Tensor) -> str | None:
    """Where an op with grad read `t`, which the program set_() to itself under no_grad, relative to the last such
    set_(): "before", "after", "both" (None: not so set_(), or never read; Note [Gradient Accumulators Of
    Leaves])."""
    if id(t) not in record.self_sets:
        return None
    before, after = id(t) in record.read_before_self_set, id(t) in record.read_after_self_set
    return {(True, True): "both", (True, False): "before", (False, True): "after"}.get((before, after))


_GRAD_FN_GETTERS = frozenset({"grad_fn", "is_leaf"})


def note_grad_fn_reads(
    record: SwapRecord, func: Any, call: tuple[tuple[Any, ...], dict[str, Any], object], seq_before: int
) -> None:
    """After a call of the program (`call`: its args, kwargs and result), which began at `seq_before`: note, for each
    tensor it took whose grad_fn autograd read, when (Note [History Kept Through .data =]). Autograd reads them before
    the op writes anything, where it makes a node (collecting its edges): not for an op whose results have no history
    of its making (`detach()`, `argmax()`, a `contiguous()` returning its argument); the tensor an in-place op writes
    gets its history rebuilt after the write."""
    args, kwargs, out = call
    name = getattr(func, "__name__", "")
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    getter = owner in _GRAD_FN_GETTERS and name == "__get__"
    if not getter and (not torch.is_grad_enabled() or not _makes_node(record, args, kwargs, out, seq_before)):
        return
    for a in pytree.tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor):
            record.grad_fn_reads[id(a)] = seq_before
    if torch.is_grad_enabled() and name.endswith("_") and not name.endswith("__") and args:
        if isinstance(args[0], torch.Tensor):
            record.grad_fn_reads[id(args[0])] = record.seq


def note_assignment_reads(record: SwapRecord, target: torch.Tensor) -> None:
    """At `target.data = ...` (before the record's seq advances for it): when autograd last read target's grad_fn."""
    record.reads_before_data[id(target)] = record.grad_fn_reads.get(id(target), -1)


def stale_at_end(record: SwapRecord, value: torch.Tensor, made: int, bump: int) -> bool:
    """Is eager's `value`, a plain view made at seq `made` and last assigned `.data =` (its last swap), stale at the
    end of the program, its counter last moved at seq `bump` (Note [History Kept Through .data =])?"""
    assigned = record.data_sets.get(id(value))
    if assigned is None or bump <= made:
        return False
    return bump > assigned[0] or record.reads_before_data.get(id(value), -1) < bump


def history_set_at(record: SwapRecord, t: torch.Tensor) -> int:
    """When autograd last set the history of `t`, a view the program took: made, or rebuilt by a read since."""
    found = record.views.get(id(t))
    return max(found.seq if found is not None else -1, record.grad_fn_reads.get(id(t), -1))


# ---------------------------------------------------------------------------------------------------------------------
# Part: view inputs whose history raises in eager (Note [Views That Raise After A Bump]).


@dataclass(frozen=True, slots=True)
class RaisingHistory:
    """An input of the program, or a view it took of one by view ops, whose eager history autograd refuses at the
    program's event on it now (`raising_history`), where the run's stand-in, no such view, lets it be. `chain`: the
    view ops that made it from the input, the input's end first; `write`: the event is an in-place write with grad."""

    tensor: torch.Tensor  # the run's
    position: int  # the input's tensor position
    real: torch.Tensor  # the real input
    chain: tuple[ViewRecord, ...]
    write: bool

    def error(self) -> RuntimeError:
        """Eager's very error: the chain replayed on the real input (each view op in the grad and inference mode the
        program took it in, so with eager's creation meta, output number and node), whose read of grad_fn runs with
        its counter moved by one and given back at once; for a write, autograd's header naming the view itself.
        UnsupportedError where the chain cannot be replayed so (an argument that is a tensor)."""
        view, error, cause = self.real, None, None
        try:
            with outside_current_modes(), no_torch_function():
                for step in self.chain:
                    view = _replayed_step(step, view)
                error = grad_fn_error_after_bump(view)
        except (RuntimeError, TypeError, ValueError, IndexError) as e:
            cause = e
        if error is None:
            raise UnsupportedError(
                f"the program {'writes' if self.write else 'reads'} with grad enabled a view it took of tensor input "
                f"{self.position}, an input whose history autograd refuses once its version counter moved (made by "
                "an op that returns several views, under no_grad, inside inference_mode or by a custom Function), as "
                "it does its views': eager raises there, and the compiled call cannot take that view of the real "
                "input to give eager's error (Note [Views That Raise After A Bump]). Use a .clone() of the input"
            ) from cause
        return view_write_error(error) if self.write else error


def _replayed_step(step: ViewRecord, source: torch.Tensor) -> torch.Tensor:
    """The view op of `step` run on `source` as the program ran it (see RaisingHistory.error)."""
    args, kwargs = pytree.tree_map(lambda v: hint_of(v) if isinstance(v, torch.SymInt) else v, (step.args, step.kwargs))
    if any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves((args, kwargs))):
        raise TypeError("a view op taking a tensor argument")
    with torch.inference_mode(step.inference_mode), torch.set_grad_enabled(step.grad_enabled):
        out = source.reshape(*args, **kwargs) if step.reshape else step.func(source, *args, **kwargs)
    return cast(torch.Tensor, out if step.index is None else out[step.index])


def raising_history(
    record: SwapRecord, t: object, *, write: bool = False, before: int | None = None
) -> RaisingHistory | None:
    """Does eager's autograd raise at the program's event on `t` now, its first event that raises (Note [Views That
    Raise After A Bump])? `t` is an input, or a view the program took of one by view ops (no detach(), set_() or
    `.data =` on its way, nor one inside an op's dispatch), whose eager tensor requires grad with a
    creation meta other than the default: made by an op returning several views, under no_grad, inside
    inference_mode or by a custom Function, or a view of such a view (autograd passes the creation meta down a chain
    of views). `write`: an in-place write of `t` with grad on, which raises at once ("... is being modified
    inplace"); else a read of its history (an op with grad on that records a node over it, a read of its grad_fn or
    is_leaf in any mode), which raises once the version counter `t` shares moved after `t` was made. None elsewhere,
    and where eager raised at an earlier event: a write with grad through the input or a view of it, before `before`
    (a `seq`; all so far by default)."""
    if not isinstance(t, torch.Tensor) or id(t) in record.hidden:
        return None
    chain = tuple(reversed(list(record.chain(t))))
    root = chain[0].source if chain else t
    found = record.input_positions.get(id(root))
    if found is None or any(step.below_autograd for step in chain):
        return None
    if not write and record.bump_count(t) <= (chain[-1].bumps if chain else 0):
        return None  # (its counter has not moved since it was made)
    moved = record.moved() if chain else set()
    if any(id(m) in moved for m in (*(step.source for step in chain), t)):
        return None  # (a set_() or `.data =` on its way: eager's is no such view of the input)
    real = found[1]
    with no_torch_function():  # (the pipeline's reads, not the program's)
        if real.requires_grad:  # (whether it raises is its creation meta's: guarded, Note [What The Guards Compare])
            record.creation_meta_reads.append(found[0])
        if grad_fn_error_after_bump(real) is None:
            return None  # (eager's input can raise no such error, nor can a view of it)
    limit = record.seq + 1 if before is None else before
    written = (record.pinned.get(i) for i, seq in record.visible_seq.items() if seq < limit)
    if any(isinstance(w, torch.Tensor) and record.view_root(w) is root for w in written):
        return None  # (eager raised at that write, autograd's own error)
    return RaisingHistory(t, found[0], real, chain, write)


# ---------------------------------------------------------------------------------------------------------------------
# Part: view inputs whose history eager rebuilds from their base.


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRebuild:
    """A view input whose version counter the program moved (Note [Views That Raise After A Bump], view inputs rebuilt
    from their base): whether eager rebuilds its history from its `._base` at a read, and where it did so far."""

    position: int  # the input's tensor position
    real: torch.Tensor  # the real input
    leaf: bool  # the input came with no history (taken while its base required no grad)
    base_input: bool  # its `._base` is an input too (its flag is the program's to change, not the caller's)
    base_requires_grad: bool  # whether eager's base requires grad now
    history_from_base: bool  # the history the input came with runs to its base (which required grad then)
    rebuilt_at: tuple[int, ...]  # the `seq` of each op with grad that rebuilt the input's history so far, in order
    pending: bool  # its counter moved since its last rebuild (or since entry): its next read rebuilds it
    first_read: int | None  # `seq` of the first op with grad that read the input itself

    @property
    def rebuilds(self) -> bool:
        """Does eager rebuild it at a read now: it has history, or its base requires grad by now?"""
        return not self.leaf or self.base_requires_grad

    @property
    def read_before(self) -> bool:
        """Did an op with grad read the history the input came with, before any rebuild (for a leaf: made its
        gradient accumulator, which a rebuild leaves behind)?"""
        return self.first_read is not None and (not self.rebuilt_at or self.first_read < self.rebuilt_at[0])


def base_rebuild(record: SwapRecord, t: torch.Tensor) -> BaseRebuild | None:
    """Where `t` is a view input whose version counter the program moved, or a view the program took of one with grad
    by view ops (no detach(), nor one inside an op's dispatch): the input's fact, whose `rebuilds` says whether eager
    rebuilds its history from its `._base` at a read now (Note [Views That Raise After A Bump], view inputs rebuilt
    from their base). None where the input is no view, a view made under no_grad with no history (whose
    reads raise instead), or where the program never moved its counter."""
    while (found := record.input_positions.get(id(t))) is None:
        view = record.views.get(id(t))
        if view is None or not view.grad_enabled or view.below_autograd or view.func is torch.ops.aten.detach.default:
            return None
        t = view.source
    bump = record.family_last_bump.get(record.family_of(t))
    if bump is None:
        return None
    position, real = found
    with no_torch_function():  # (the pipeline's reads, not the program's)
        base = real._base
        if base is None:
            return None
        # (read again by a tangent retrace after the call wrote it: is_leaf as the compile read it)
        leaf = is_leaf_before_base_write(real)
        if leaf and is_no_grad_view(real) or not leaf and not real.requires_grad:
            return None
        stand_in = next((record.run_inputs[k] for k, r in record.input_positions.values() if r is base), None)
        base_requires_grad = (stand_in if stand_in is not None else base).requires_grad
        history_from_base = not leaf and base.requires_grad
    rebuilt_at = tuple(record.base_rebuilds.get(id(t), ()))
    return BaseRebuild(
        position=position,
        real=real,
        leaf=leaf,
        base_input=stand_in is not None,
        base_requires_grad=base_requires_grad,
        history_from_base=history_from_base,
        rebuilt_at=rebuilt_at,
        pending=bump > (rebuilt_at[-1] if rebuilt_at else -1),
        first_read=record.first_read_with_grad.get(id(t)),
    )


def note_base_rebuilds(record: SwapRecord, reads: Sequence[tuple[torch.Tensor, BaseRebuild]]) -> None:
    """After an op with grad that recorded history over each tensor of `reads` (an input, or a view of one, and its
    fact): note where eager rebuilt the inputs read themselves (Note [Views That Raise After A Bump], view inputs
    rebuilt from their base)."""
    for t, found in reads:
        if found.rebuilds and found.pending and record.input_positions.get(id(t)) is not None:
            record.base_rebuilds.setdefault(id(t), []).append(record.seq)


def rebuilt_before_read(record: SwapRecord) -> tuple[tuple[int, int], ...]:
    """(tensor position, eager's count of bumps then) of each view input with history, from its base, whose counter
    the program moved before the first op with grad read it: eager's read rebuilt its history from its `._base` then
    (AsStridedBackward0, whose backward makes a fresh gradient), and that read's edge is the rebuilt node, not the one
    the input came with (Note [Views That Raise After A Bump], view inputs rebuilt from their base)."""
    found = []
    for t in record.run_inputs:
        count = record.grad_read_counts.get(id(t), 0)
        fact = base_rebuild(record, t) if count else None
        if fact is not None and not fact.leaf and fact.history_from_base:
            found.append((fact.position, count))
    return tuple(found)


def note_retain_grad(record: SwapRecord, func: Any, args: tuple[Any, ...]) -> None:
    """Note the program's `t.retain_grad()` (`check_retained_outputs`)."""
    if func is torch.Tensor.retain_grad and args and isinstance(args[0], torch.Tensor):
        record.retained.add(id(args[0]))
        record.pin(args[0])


def check_retained_outputs(paths: Sequence[str], outputs: Sequence[object], record: SwapRecord) -> None:
    """Refuse an output with history that the program called retain_grad() on: after a backward, eager's holds in
    .grad the gradient that reached it from every use, the program's own too; the compiled call's output is made by
    the compiled graph, and its .grad would hold none, or only the gradient of the caller's uses."""
    for path, value in zip(paths, outputs, strict=True):
        if isinstance(value, torch.Tensor) and id(value) in record.retained and not value.is_leaf:
            raise UnsupportedError(
                f"{path}: the program calls retain_grad() on this output inside the compiled function; after a "
                "backward, eager's output holds in .grad the gradient that reached it from every use, inside the "
                "program too, which the compiled backward (one graph) does not stop to keep, so its .grad would be "
                "None. Return what it is computed from and compute it outside the compiled function, or compile "
                'with torch.compile(fn, backend="subclassaot"), whose Dynamo runs retain_grad() as eager does'
            )
