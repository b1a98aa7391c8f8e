"""Refusals about autograd state that the compiled program cannot reproduce: tensors the program makes requiring
grad itself, and metadata mutations of inputs that the program's own backward (a custom autograd.Function) makes.

Input: the analysis's record of grad-requiring factory calls; the tensors the program received in the joint trace.
Output: nothing, or an UnsupportedError naming the call or the input and the rule; the metadata changes of inputs
the backward makes that the runtime replays.
Invariants: pure reads; no guards are added on symbolic sizes.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.autograd_state import (
    RaisingHistory,
    base_rebuild,
    flagless_view_source,
    history_set_at,
    is_autograd_read,
    is_base_read,
    note_base_rebuilds,
    raising_history,
    reads_unpassed_base,
    requires_grad_through_gained_base,
    view_without_history,
)
from subclassaot.pipeline.rules.stale_views import input_named
from subclassaot.pipeline.rules.storage_reach import reads_grad
from subclassaot.pipeline.rules.swap_record import RawMeta, tensor_meta
from subclassaot.runtime.steps import input_root
from subclassaot.schemas import BackwardReshape, FlatInputs
from subclassaot.torch_internals import (
    autograd_nodes,
    autograd_sequence_nr,
    below_autograd,
    get_version,
    grad_fn_raises,
    has_grad_fn,
    may_return_view,
    no_torch_function,
    storage_key,
    symint_expr,
)

if TYPE_CHECKING:
    from subclassaot.pipeline.rules.swap_record import SwapRecord


# Note [Grad Mode And Autograd Reads]
# A call compiles for training (a joint graph behind one autograd.Function) when grad mode is on and some input requires
# grad, else for inference, whose graph outputs carry no autograd history. Eager decides nothing up front, so each way
# the program itself could make or observe history is matched or refused:
# - Inference runs in the caller's grad mode (analyzed and traced in it, not under no_grad: Python code may read the
#   mode, and DTensor's `to_local()` differs by it). An inference entry guards the grad mode.
# - Tensors made requiring grad inside the program are leaves of their own: with grad on, outputs computed from them
#   carry a grad_fn although no input requires grad. Refused for inference with grad on; in training the outputs carry
#   history through the Function, and the leaf's own gradient is not observable outside the program.
# - Grad mode turned on inside a no_grad call (`with torch.enable_grad(): out = x.cos()`) gives eager outputs with a
#   grad_fn. The analysis of the inference compile records every torch function that ran with grad on and read a
#   tensor requiring grad; where there is one (GradReenabledError), the call compiles again for training, over the
#   program wrapped in torch.no_grad() and with grad on around it: a program that switches grad off at its start and
#   on again in a region, which the training pipeline takes as it takes any no_grad region. The entry runs with grad
#   on around it (so its autograd.Function records), and the ambient guard (Note [State The Program Reads]) keeps it
#   for calls under no_grad. A training compile that needs its inference graph (Note [Training Through A Joint Graph])
#   traces it under no_grad; where the program turns grad on inside and that trace fails so (a view it took there is a
#   no_grad view, written through its base and then used with grad on), the graph is traced again with grad on, as
#   eager runs the program and the analysis ran it (subclass inputs and synthetic bases that require grad run as
#   clones, non-leaves as eager's: a leaf stand-in raises on the first write); refused where that fails too.
# - A program may switch grad mode for good (`torch.set_grad_enabled(False)` called, not entered): every run of it in
#   the compile is put back in the compile's mode after it, and where the analysis's run left another mode than the
#   caller's, the entry leaves that mode behind after each call, as eager's program does.
# - Autograd inside the program: torch.func.grad / vjp / jacrev differentiate their own wrapped tensors (one autograd
#   level each), traced like any op. torch.autograd.grad / backward() on the program's own level is refused.
# - Autograd reads (`t.is_leaf`, `t.requires_grad`, `t.grad_fn`, `t._base`, `t._is_view()`) become Python constants or
#   branches, so every run answers as eager does (rules/autograd_state.py). Every run after the first analysis (the
#   analysis again once an input gains grad, whose stand-in then requires grad from the start; trace_inference under
#   no_grad, where a view whose base was written since reads as a no_grad view and raises; the joint and its example)
#   takes each read's answer from the first, in call order (reads that raise there raise out of it, as eager's); only
#   the program's: reads inside an op's dispatch (the pipeline's rules, a subclass's __torch_dispatch__) are each run's.
# - Reads of inputs: the run's inputs are functional tensors or rebuilt wrappers. An input that requires grad stays a
#   leaf or non-leaf until detach_()ed, so is_leaf answers the real input's, and grad_fn the real input's where it cannot
#   have changed (eager's error where its read raises: Note [Views That Raise After A Bump]); a non-leaf written with
#   grad gets a new node and the run's answer stands. Inputs are laid out anew
#   under no_grad, so a grad_fn read of a view of an input whose base requires grad and was written raises where eager's
#   answers: refused by name. `._base` / `._is_view()` of an input or a view of it answer from the real input (None or
#   the input where it is no view; the other input where it views one passed; refused for a base not passed); reads from
#   an intermediate answer the run's own; `.requires_grad` of a no_grad view of a view input that came requiring none,
#   with no flag of its own, answers False, its root base's (that input's base, not passed), where the run's root is
#   the stand-in; conversely, of a view input (or a no_grad view of one) whose `._base` is another input the program
#   made require grad, True, where the run lays the two out apart (`requires_grad_through_gained_base`), and a custom
#   Function applied to it under no_grad returns it detached, as eager's apply does to an input that requires grad
#   (`function_outputs_as_eager`). The guards check each input's requires_grad, is_leaf where it requires grad,
#   and, for inputs so read, that each is still no view or a view of that input. A view eager's autograd gives no
#   requires_grad where the run's follows an input it made require grad is read through a detach() (flagless views,
#   below `flagless_view_source`).
# - requires_grad_() and the `.requires_grad =` setter (one rule). Turning on a flag a tensor has is a no-op, which
#   on an input the program wrote a value requiring grad into with grad on, or set_() onto a source requiring grad
#   with grad on (set_'s node) (its own flag, not its base's: eager's is then no leaf) the record leaves out
#   (SwapRecord.grad_written). On an input: turned on, the call compiles for
#   training with it requiring grad from the start (after a read of it, or of another tensor over its storage, with
#   grad on, eager's earlier results carry no history: a leaf or a view (of a base requiring none) passed alone is
#   laid out anew, Note [Leaves Laid Out Anew Under no_grad]; a plain view run as a view of another stand-in is marked
#   in the eager backend's graph, Note [Training Without A Function]; a
#   plain input sharing storage with another, whose stand-in is a view of a synthetic base that gains the flag at the
#   call as eager's does, compiles where the reads were of the other inputs over the storage only (not of it, of an
#   input whose `._base` it is, or of views of those: their stand-ins would require grad from the start), views of
#   those taken before replayed as Note [Leaves Laid Out Anew Under no_grad] has it; one whose flag is its own (a
#   half, a detach(), a view of a passed base, or a base whose view inputs the program neither writes, re-lays out,
#   moves nor flags) runs as a leaf of its own until the flag (functional_run.own_leaf_inputs); others compile where
#   eager's program, run on static fakes, records the same autograd graphs for its outputs and the inputs it leaves with the input requiring grad from the start
#   (nothing the caller sees reaches the earlier results: backward_probe.gain_unobserved), and are refused
#   otherwise; in a call under no_grad that stays one, the flag is set before a graph autograd does not record; a
#   custom Function applied under no_grad before the flag to such an input whose stand-in requires grad from the start
#   returns it detached in the run, where eager's apply, meeting an input that requires none, returns the input it
#   marked dirty as itself: the run's apply returns it so too, and refuses any other output aliasing it, eager's a view
#   of it made under no_grad, which the run cannot tell from a forward's own `x.detach()`); a plain input turned on
#   after a read with grad of its storage (the cases above refuse, or mark) where no torch function writes that storage
#   after the call, nor reads it with grad where eager's histories show it (eager's run with the flag set once it
#   returned records the same graphs: backward_probe.gain_last_unobserved), nor turns the flag off, gains it last
#   (Analysis.gains_last): the compile trains none of it, its
#   graph's results (its written value too, no differentiable output where other inputs train) keep eager's lack of
#   history, and the runtime sets the flag once the outputs are built (its views
#   among them, replayed before, follow it as eager's taken before do; its group is not traced apart, where the reads
#   of the others would be none of its: as the run began, a set_() to another storage since leaving it of its group);
#   turned off, the run's stand-in (no leaf, where both raise) is detach_()ed and the runtime drops the real leaf's flag after the graph and before the epilogue's
#   writes (refused where another input shares its storage); turned off and on again, eager's input is one leaf
#   throughout: results computed from it before the drop have its history in both (what ops saved of it stays
#   readable: joint's saves), but one computed with grad after the flag came back has history to the run's stand-in,
#   a leaf of its own: refused where the input ends requiring grad and an output, or a write, holds a result that
#   requires grad (SwapRecord.read_after_regain); views of it taken with grad after the flag went off and
#   replayed before the epilogue, so before the drop, are replayed without history (Note [Views That Raise After A
#   Bump]). On a view or an intermediate: in a call under no_grad, only the flag changes, which its views share (the
#   call itself acts alike whatever the grad mode: one inside a torch.enable_grad() block of that call is the same
#   call, and what later ops with grad on compute from the tensor is theirs), and the outputs that are such tensors are
#   made to require grad once built (OutputInfo.gains_grad), as are no_grad views given a flag of their own where they
#   would read their base's, whether or not it requires grad (SwapRecord.own_flags: a view of a view input reads its
#   root base's in eager, which may require none, where the run's reads the stand-in's; the program's reads of such a
#   view answer its own flag, not that base's); in a call begun with grad on, eager makes a new leaf the outputs'
#   histories end in (Note [Training Without A Function]).
# - Inside inference_mode autograd records nothing whatever the grad mode, except a custom Function applied with grad
#   on (its result, an inference tensor with a grad_fn, is refused as an output). A view taken there of a normal tensor
#   is a normal tensor in eager with creation meta INFERENCE_MODE (it acts as a view taken under no_grad, its errors
#   naming inference mode), an inference tensor (or a failed view op) in the trace: of a plain tensor the run takes it
#   again outside inference mode, under no_grad, and gives it that creation meta, and an output's ViewSteps replay
#   it inside inference_mode; of a subclass it is refused where that shows (rules in functional_run.py and
#   analyze.py). Autograd propagates that creation meta to every view of such a view, whatever the grad mode then,
#   so an output the runtime rebuilds by other steps (as_strided() under no_grad after a `.data =`) is given it once
#   built (OutputInfo.inference_view). An output eager computed inside the block, or a view of one, is an inference tensor with
#   no view relation: in a call made outside inference_mode the runtime rebuilds it inside one over a copy of its
#   storage (one per storage, so outputs sharing one still do; a subclass from such copies of its inner tensors).


def check_gained_after_read(
    gained_after_read: set[int], user_tensors: Sequence[torch.Tensor], flat: FlatInputs
) -> None:
    """Refuse requires_grad_() on an input after the program computed from it with grad on (ids in
    `gained_after_read`): the compiled call makes it require grad from the start."""
    for t, k in zip(user_tensors, flat.tensor_indices, strict=True):
        if id(t) in gained_after_read:
            raise UnsupportedError(
                f"{flat.leaves[k].path}: the program calls requires_grad_() on this input after computing from it "
                "(or from another tensor over its storage, an input that is a view of it) with grad mode on; eager's "
                "earlier results carry no autograd history, but the compiled call makes this input (one sharing "
                "storage with another input) require grad before the graph runs, so they would. A leaf or view "
                "input passed alone compiles, and so does a plain input sharing storage whose earlier reads were only "
                "of other inputs over it (not of this input, an input that is a view of it, or views of those), a "
                "plain input other inputs are views of where the program writes, re-lays out or moves none of them "
                "and flags none of those views, any input where no "
                "output or input reaches what was computed from it before, and a plain input whose storage nothing "
                "writes after the call, nor reads with grad into what an output or input holds. Call requires_grad_() "
                "before the first use of the input, or outside the compiled function"
            )


# Flagless views (Note [Grad Mode And Autograd Reads]). Eager: requires_grad_() on an input that is a view of a base
# requiring none makes the input a leaf with a flag of its own; a view of it taken before that call, or under no_grad,
# takes requires_grad from that base (a view's `._base` is the root base, not the view it was taken from) or has no
# history: it requires none, so an op with grad that reads it records nothing of it (an operand that requires grad
# records its own history only). The run's view follows the input's stand-in, which requires grad (the program's call,
# or a training compile setting the flag from the start), and would record the input's history. So an op with grad on
# reads each such view (`flagless_view_source`) through a detach() of it (`flagless_views_detached`): the same
# elements, version counter and storage, no history. So too, before the flag, an input viewing another input the
# program flags later, whose stand-in the compile flags from the start (`flagged_before_eager`): eager's requires none
# yet. Not for an op that may return a view (`_may_alias`: view ops, reshape(), contiguous(), indexing): its view would be a view of the detach(), whose `._base` eager's is not; a view
# op's result is replayed from the real input, and one of these that copies is refused after it, by name. Not for what
# is no read of the elements (attribute getters, autograd reads, `._base`, storage getters, in-place view ops and
# requires_grad_()). A write into such a view where no other operand requires grad records nothing in eager: it too goes
# through the detach() (same storage and counter; the record notes the program's write). Where an operand requires grad
# (or the write is an in-place view op, or an `out=`), eager's write records history on the input's base (not passed,
# not verified further), and the run's would follow the input (or fail autograd's check of a no_grad
# view): refused by name (`check_flagless_view_reads`). The program's reads of such a view's autograd state answer
# eager's (no flag, a leaf, no grad_fn: autograd_state.read) where no requires_grad_() gave it a flag and no write with
# grad reached its storage: the run's view op with grad after the flag records history eager's does not. The guards
# keep the input a view (`SwapRecord.base_reads`). A custom Function's apply with grad reads them so too (eager's
# records nothing where no other input requires grad, and its outputs require none): an output that is the detach()
# comes back as the view, one over it (a view_as() of the input, a view the forward took) as a view of the view
# (`storage_swaps._note_function_apply`), so that its `._base` is the input's base, as eager's.

# torch functions whose first argument's object, layout or storage the call acts on, not its elements
_NO_DETACH = frozenset(
    {"__get__", "__set__", "__delete__", "__hash__", "__deepcopy__", "__reduce_ex__", "untyped_storage", "storage",
     "_typed_storage", "set_", "t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "swapdims_", "swapaxes_",
     "resize_", "resize_as_", "detach_", "retain_grad", "requires_grad_", "register_hook", "share_memory_"}
)  # fmt: skip


def _writes(name: str) -> bool:
    """Does the torch function `name` write its first argument in place? (resize_() records no history: Note
    [resize_ And requires_grad])"""
    writes = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") or name == "__setitem__"
    return writes and name not in _RESIZES


def flagless_views_detached(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`, `kwargs` of an op with grad on with each view eager's autograd gives no requires_grad (Note [Grad Mode
    And Autograd Reads], flagless views) that the run's requires grad replaced by a detach() of it; the tensor the op
    writes (its first argument, `out=`) stays where an operand requires grad, for `check_flagless_view_reads`."""
    name = getattr(func, "__name__", "")
    if not record.view_input_gains or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return args, kwargs
    if name in _NO_DETACH or is_autograd_read(func) or is_base_read(func) or not args:
        return args, kwargs
    made: dict[int, torch.Tensor] = {}

    def detached(a: object) -> object:
        if not isinstance(a, torch.Tensor):
            return a
        if id(a) not in made:
            with no_torch_function():  # (the pipeline's reads, not the program's)
                source = flagless_view_source(record, a) if a.requires_grad else None
            found = None if source is None else record.input_positions.get(id(source))
            # (eager's view requires none because the input is a view of a base that requires none, or none yet: the
            # input of a base it flags later, which the run flags first: guarded)
            guard = (found[0], -1) if found is not None else flagged_before_eager(record, a)
            if guard is None:
                return a
            record.base_reads.append(guard)
            with torch.no_grad():
                made[id(a)] = a.detach()
        return made[id(a)]

    rest = pytree.tree_map(detached, args[1:])
    new_kwargs = {k: v if k == "out" else pytree.tree_map(detached, v) for k, v in kwargs.items()}
    first = args[0]
    if not _writes(name) and may_return_view(name, unknown=False):
        return args, kwargs  # (a view op's result is replayed from the real input; a copy is refused after it)
    if not _writes(name):
        first = detached(first)
    elif "out" not in kwargs and not _reads_grad((rest, new_kwargs)):
        first = detached(first)  # (a write eager's autograd records nothing of: no operand requires grad)
    if not made:
        return args, kwargs
    return (first, *rest), new_kwargs


def _check_flagless_copies(
    record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """After an op that may return a view (not read through a detach()): refuse it where it read such a view and made
    a result that is no view of it (reshape() or contiguous() copying), which follows the input's history."""
    if out is None or not may_return_view(name, unknown=False):
        return
    read = [
        (t, source)
        for t in pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor) and (source := flagless_view_source(record, t)) is not None
    ]
    made = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not read or all(storage_key(o) == storage_key(read[0][0]) for o in made):
        return
    raise UnsupportedError(
        f"{input_named(record, read[0][1])}the program turns requires_grad on for this input (or it came so), a "
        f"view of a tensor that does not require grad, and then computes with grad enabled ({name}) a copy of a view "
        "of it taken before the flag or under no_grad, by an op that may return a view: eager's view requires no "
        "grad, so its results carry none, while the compiled run's view follows the input. Take the view after "
        "requires_grad_() with grad enabled, compute from .detach() of it, or call requires_grad_() outside the "
        "compiled function"
    )


def _reads_grad(tree: object) -> bool:
    with no_torch_function():  # (the pipeline's reads, not the program's)
        return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(tree))


def check_flagless_view_reads(
    record: SwapRecord,
    name: str,
    args: tuple[Any, ...],
    call_args: tuple[Any, ...],
    kwargs: dict[str, Any],
    out: object = None,
) -> None:
    """Refuse, before it runs, an op with grad on that writes in place a view eager's autograd gives no requires_grad of
    an input the program made require grad, which is a view of a tensor requiring none (an in-place view op too).
    Eager's view takes requires_grad from that base, or was made under no_grad: its write runs, and records history on
    that base, not passed; the run's stand-in is a view of the input itself, so its write would carry the input's
    history, or fail autograd's check. So too before the program's requires_grad_() on such an input, whose stand-in a
    training compile makes require grad from the start. Its reads are made through a detach() (Note [Grad Mode And
    Autograd Reads], flagless views)."""
    if not record.view_input_gains or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    if not args:
        return
    if not _writes(name):
        _check_flagless_copies(record, name, args, kwargs, out)
        return
    if out is not None:
        return
    written = [args[0] if call_args[0] is args[0] else None, kwargs.get("out")]
    read = [
        (t, source)
        for t in pytree.tree_leaves(written)
        if isinstance(t, torch.Tensor) and (source := flagless_view_source(record, t)) is not None
    ]
    if not read:
        return
    raise UnsupportedError(
        f"{input_named(record, read[0][1])}the program turns requires_grad on for this input (or it came so), a "
        f"view of a tensor that does not require grad, and then computes with grad enabled ({name}) into a view of "
        "it taken before the flag or under no_grad: eager's view requires no grad (it takes the flag from that base, "
        "or was made without history), so its write records history on that base, while the compiled run's view "
        "follows the input. Take the view after requires_grad_() with grad enabled, write under torch.no_grad(), "
        "or call requires_grad_() outside the compiled function"
    )


def _regenerated_view_root(record: SwapRecord, t: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor] | None:
    """Note [Views That Raise After A Bump], stale views of leaf view inputs: where `t` is a plain view the program
    took with grad of a leaf input (through views), stale now or marked regenerated from its base: that input's
    stand-in, its position and the real input."""
    view = record.views.get(id(t))
    if view is None or not view.grad_enabled or view.below_autograd:
        return None
    root = record.view_root(t)
    found = record.input_positions.get(id(root))
    if found is None or root is t or not found[1].is_leaf or not root.requires_grad:
        return None
    stale = record.family_last_bump.get(record.family_of(t), -1) > history_set_at(record, t)
    return (root, *found) if stale or id(t) in record.regenerated_from_base else None


def check_regenerated_view_reads(
    record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """Note [Views That Raise After A Bump], stale views of leaf view inputs: after an op with grad on that read a
    stale view of a leaf input, guard the input's being a view; where the input's flag is its own (a view of a base
    requiring none), note a view op's results as views whose history eager regenerated from that base, and refuse any
    other op."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    read = [
        (t, found)
        for t in pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor) and (found := _regenerated_view_root(record, t)) is not None
    ]
    for _, (_, position, real) in read:
        record.base_reads.append((position, None if real._base is None else -1))
    # (not a view eager's autograd gives no requires_grad: read through a detach(), Note [Grad Mode And Autograd
    # Reads], flagless views)
    cut = [
        (t, root)
        for t, (root, _, _) in read
        if id(root) in record.view_input_gains and flagless_view_source(record, t) is None
    ]
    if not cut:
        return
    made = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    writes = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") or name == "__setitem__"
    if not writes and not any(o.requires_grad for o in made):
        return  # (no history recorded, none read: `t.item()`, a comparison)
    subclass = next((root for t, root in cut if is_traceable_subclass(t)), None)
    if subclass is not None:
        raise UnsupportedError(
            f"{input_named(record, subclass)}{name}: reads with grad a tensor subclass view of this input, a view of a "
            "tensor that does not require grad made to require grad itself, after a write (under no_grad or inside "
            "inference_mode too) moved the version counter they share: eager's autograd fails an internal assert "
            "(new_fn) regenerating the view's history from that base. Take the view after the write, or compute "
            "from a clone of the input"
        )
    if not writes and all(storage_key(o) == storage_key(cut[0][0]) for o in made):
        # (a view op: its result is replayed from the real input, whose history autograd regenerates as eager's)
        record.regenerated_from_base.update(id(t) for t, _ in cut)
        record.regenerated_from_base.update(id(o) for o in made)
        return
    raise UnsupportedError(
        f"{input_named(record, cut[0][1])}{name}: reads with grad a view of this input, a view of a tensor that does "
        "not require grad made to require grad itself, after a write (under no_grad or inside inference_mode too) "
        "moved the version counter they share: eager regenerates the view's history from that base, so no gradient "
        "reaches the input through it, while the compiled run's view follows the input. Take the view after the "
        "write, compute from a clone of the input, or make the base require grad instead"
    )


def check_regenerated_view_input_reads(
    record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """Note [Views That Raise After A Bump], view inputs rebuilt from their base: after an op with grad that records
    history from a view input whose counter the program moved (or a view of it), note where eager rebuilt its
    history, and guard its base's flag where it came with history; refuse the op where that history did not run to
    its base (the base requiring no grad: the input requires grad through a view of that base made to require grad
    itself)."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    read = [
        (t, found)
        for t in pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor) and (found := base_rebuild(record, t)) is not None
    ]
    if not read:
        return
    writes = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") or name == "__setitem__"
    if not writes and not any(o.requires_grad for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)):
        return  # (no history recorded, none read: `t.item()`, a comparison)
    note_base_rebuilds(record, read)
    with_history = [found for _, found in read if not found.leaf]
    record.base_flag_reads.extend(found.position for found in with_history)
    cut = next((found.position for found in with_history if not found.history_from_base), None)
    if cut is None:
        return
    raise UnsupportedError(
        f"{record.run_input_paths[cut]}: {name}: reads with grad this input (or a view of it), a view whose `._base` "
        "requires no grad, requiring grad through a view of that base made to require grad itself, after a write "
        "(under no_grad or inside inference_mode too) moved the version counter they share: eager regenerates this "
        "input's history from its base then, so no gradient reaches the tensor it was taken of through it, while the "
        "compiled call's read follows that tensor. Read the input before the write, take it anew after the write "
        "(from the tensor that requires grad), or pass a clone"
    )


def history_rebuilt_over_no_grad_base(record: SwapRecord, t: object) -> bool:
    """Would the next read of `t`'s history regenerate it over the run's `._base` of it, which requires no grad (where
    eager's regenerates by as_strided, the run's replay fails: Note [Views That Raise After A Bump], histories
    regenerated over a base without grad)?"""
    if not isinstance(t, torch.Tensor) or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return False
    view = record.views.get(id(t))
    if view is None or not view.grad_enabled or view.below_autograd or not view.source_requires_grad:
        return False
    with no_torch_function():  # (the pipeline's reads, not the program's)
        base = t._base  # (the run's: the tensor its regeneration replays over, a synthetic base where one is laid out)
        if base is None or base.requires_grad or not t.requires_grad:
            return False
    return record.family_last_bump.get(record.family_of(t), -1) > history_set_at(record, t)


def regenerated_history_refusal(record: SwapRecord, name: str, arg: object) -> UnsupportedError:
    """The refusal of a read of a view `history_rebuilt_over_no_grad_base` holds for, by the op or apply `name`."""
    return UnsupportedError(
        f"{input_named(record, arg) if isinstance(arg, torch.Tensor) else ''}{name}: reads with grad a view whose "
        "history autograd regenerates by as_strided (a view of a tensor that requires no grad, made to require "
        "grad with requires_grad_(), whose base the program then wrote in place); the functionalized run "
        "cannot rebuild that history. Make a clone of the view require grad instead"
    )


def check_regenerated_history_applies(record: SwapRecord, name: str, args: Sequence[object]) -> None:
    """Before a call with grad on that reads the history of each of `args` that requires grad before any mode sees it
    (a custom Function's apply, set_() its source): refuse one whose history eager regenerates over a base that
    requires no grad (Note [Views That Raise After A Bump], histories regenerated over a base without grad)."""
    found = next((a for a in pytree.tree_leaves(list(args)) if history_rebuilt_over_no_grad_base(record, a)), None)
    if found is not None:
        raise regenerated_history_refusal(record, name, found)


@contextlib.contextmanager
def regenerated_history_reads(record: SwapRecord, name: str, args: Sequence[object]) -> Iterator[None]:
    """Around an op of the program with grad on: where it takes a view whose history eager regenerates over a base
    that requires no grad, the run's base requires grad while it runs, and an op that made a node is refused (Note
    [Views That Raise After A Bump], histories regenerated over a base without grad)."""
    views = [a for a in pytree.tree_leaves(list(args)) if history_rebuilt_over_no_grad_base(record, a)]
    if not views:
        yield
        return
    with no_torch_function():  # (the pipeline's, not the program's)
        bases = list({id(b): b for v in views if (b := v._base) is not None and not b.requires_grad}.values())
        for b in bases:
            b.requires_grad_(True)
    mark = autograd_sequence_nr()
    try:
        yield
    finally:
        with no_torch_function():
            for b in bases:
                if b.is_leaf:  # (a base the op wrote with grad has history now: the op is refused below)
                    b.requires_grad_(False)
    if autograd_sequence_nr() != mark:
        raise regenerated_history_refusal(record, name, args[0] if args else None)


def bumped_input_reads(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[RaisingHistory]:
    """Before an op with grad on: the inputs among its arguments, and the views the program took of them, whose
    history eager's autograd refuses at a read now (`raising_history`: their version counter moved since they were
    made), which `check_raising_view_input_reads` raises for after the op where it recorded a node."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled() or not record.written_families:
        return []
    leaves = pytree.tree_leaves((args, kwargs))
    return [found for t in leaves if (found := raising_history(record, t)) is not None]


def check_raising_view_input_reads(
    record: SwapRecord,
    read: Sequence[RaisingHistory],
    out: object,
    seq_before: int,
    operands: Sequence[object],
) -> None:
    """Raise eager's error where an op with grad on, which began at `seq_before`, raised in eager (Note [Views That
    Raise After A Bump]). First an in-place write with grad of an input whose history eager refuses, or of a view of
    one (`record.grad_writes`, which the check empties), as autograd checks the tensor an op writes before it reads
    the op's arguments; but where the op took the view it writes itself (`x0[0] = 1.0`), taking it read its source
    first. Then, where it recorded a node (a result with history that is not merely one of its `operands` handed
    back), a read of one whose version counter the program moved since it was made (`read`: `bumped_input_reads`,
    before the op): a write through any tensor sharing it (the input, its base, a detach() of either, a view of
    those), a resize_() of one that changes its size, a set_(). The run's stand-in is no such view, so nothing in the
    run raises."""
    written, record.grad_writes = record.grad_writes, []
    for t in written:
        if not any(t is o for o in operands):  # (a view the op took itself, `x0[0] = 1.0`: taking it read its source)
            taken_from = next((r for r in read if any(v.source is r.tensor for v in record.chain(t))), None)
            if taken_from is not None:
                raise taken_from.error() from None
        found = raising_history(record, t, write=True, before=seq_before + 1)
        if found is not None:
            raise found.error() from None
    if not read:
        return
    with no_torch_function():  # (the pipeline's reads, not the program's)
        results = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not any(has_grad_fn(o) for o in results):
            return
        if all(any(o is a for a in operands) for o in results) and not record.call_built_node:
            return  # (requires_grad_(), contiguous() of a contiguous input: no node, Note [The Eager Record])
    raise read[0].error() from None


def check_raising_view_input_applies(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`check_raising_view_input_reads` for a custom Function's apply with grad on, before it runs: where some input
    requires grad, autograd records its node, reading each input's grad_fn before the forward runs."""
    read = bumped_input_reads(record, args, kwargs)
    with no_torch_function():  # (the pipeline's reads, not the program's)
        if not read or not any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args, kwargs))
        ):
            return
    raise read[0].error() from None


# what autograd raises where an in-place op with grad on writes a view whose base is a leaf that requires grad, or
# a view taken under no_grad (or inside inference_mode) of a tensor that requires grad
VIEW_OF_GRAD_LEAF_WRITTEN = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation",
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled",
    "A view was created in inference mode and is being modified inplace in normal mode",
)


def check_flagless_view_set(record: SwapRecord, e: Exception) -> None:
    """Refuse the program's run failing with one of autograd's VIEW_OF_GRAD_LEAF_WRITTEN where the program made an
    input that is a view of a tensor requiring none require grad (`record.view_input_gains`): the write is one no
    torch function mode sees (set_() of a view taken before the flag, under no_grad or inside inference_mode), so
    `check_flagless_view_reads` could not refuse it before it ran. Eager's view takes requires_grad from the input's
    base (none) and its write records nothing; the run's view follows the input's stand-in, which requires grad,
    whose views taken before the flag or under no_grad autograd does not let be written. So too before the program's
    requires_grad_() on such an input, whose stand-in a training compile makes require grad from the start
    (`_flag_set_ahead`). (Where eager's write raises too, a refusal is as good.)"""
    if not any(m in str(e) for m in VIEW_OF_GRAD_LEAF_WRITTEN):
        return
    gained = next(
        (t for t in record.run_inputs if id(t) in record.view_input_gains or _flag_set_ahead(record, t)), None
    )
    if gained is None and not record.view_input_gains:
        return
    raise UnsupportedError(
        f"{'' if gained is None else input_named(record, gained)}the program turns requires_grad on for this input "
        "(or it came so), a view of a tensor that does not require grad, and then computes with grad enabled (set_(), "
        "an in-place op the compiled run sees no call of) from a view of it taken before the flag, under no_grad or "
        "inside inference_mode: "
        "eager's view requires no grad (it takes the flag from that base), so its write records nothing, while the "
        "compiled run's view follows the input, which requires grad, and autograd does not let it be written in place. "
        "Take the view after requires_grad_(), call set_() under torch.no_grad(), or call requires_grad_() outside the "
        "compiled function"
    ) from e


def _flag_set_ahead(record: SwapRecord, t: torch.Tensor) -> bool:
    """Does the run's stand-in `t` require grad where its input, a view of a tensor requiring none, does not (yet)?
    A training compile makes such an input, which the program makes require grad later, require it from the start
    (not a leaf laid out anew: Note [Leaves Laid Out Anew Under no_grad])."""
    found = record.input_positions.get(id(t))
    if found is None or not t.requires_grad:
        return False
    real = found[1]
    return not real.requires_grad and real._base is not None and not real._base.requires_grad


def flagless_view_history_raises(record: SwapRecord, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does an op with grad on read a view eager's autograd gives no requires_grad (`check_flagless_view_reads`) whose
    grad_fn raises in the run? The run's root of it is a synthetic base that requires grad (the input requires grad
    from the start of the joint trace), where eager's root, the input's own base, requires none: eager's op reads no
    history and records none, the run's would read a no_grad view's history after a bump and raise. Such an op runs
    under no_grad (a view op's result is replayed from the real input; any other op is refused after it)."""
    if not record.view_input_gains or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return False
    return any(
        isinstance(t, torch.Tensor) and flagless_view_source(record, t) is not None and grad_fn_raises(t)
        for t in pytree.tree_leaves((args, kwargs))
    )


# Note [resize_ And requires_grad]
# Eager: resize_() and resize_as_() raise "cannot resize variables that require grad" wherever their tensor requires
# grad, under no_grad too (not inside inference_mode, which skips autograd's kernels), and record nothing otherwise. A view's flag is its own (requires_grad_() on it), its
# history's (a view op with grad of a tensor that requires grad, a write with grad), or else its autograd root's: the
# `._base` of the input it views, or that input where it is no view. The functional run's tensor can disagree with
# eager's on the flag, and its resize_ then does what eager's does:
# - eager's requires grad where that root is another input the program made require grad, whose stand-in in the run
#   is a view of the synthetic base that does not gain the flag (note_gain_on_a_base): the run raises eager's error.
# - eager's requires none where the root requires none, no write with grad reached the tensor's storage, and the
#   program called requires_grad_() on no tensor of its chain of views, or only on an input that is a view of a tensor
#   requiring none, with a view op of the chain after it taken before that call or under no_grad
#   (`flagless_view_source`); the run's requires grad where its view follows that input (its base there), or
#   where a training compile made an input the program makes require grad later require it from the start (the
#   synthetic base of its alias group cloned requiring grad: Note [Aliased Inputs In Training]). The run resizes below
#   autograd, which records nothing, as eager's resize_ does, and the record counts it as no write with grad (the
#   epilogue would copy an earlier no_grad write into the input with grad: a leaf's raises). After a write with grad
#   eager's flag depends on what was written: refused.
# Elsewhere the run's flag is eager's, and so is its check.

_RESIZES = frozenset({"resize_", "resize_as_"})


def resize_as_eager(record: SwapRecord, name: str, args: tuple[Any, ...]) -> contextlib.AbstractContextManager[object]:
    """Where the program's call `name` is a resize_() or resize_as_() of `args[0]`, the context the run's call runs
    in: below autograd where eager's tensor requires no grad and the run's does; eager's error where eager's requires
    grad and the run's does not (Note [resize_ And requires_grad])."""
    t = args[0] if args else None
    if name not in _RESIZES or not isinstance(t, torch.Tensor) or torch.is_inference_mode_enabled():
        return contextlib.nullcontext()  # (inside inference_mode autograd's kernels, and their check, are skipped)
    eager = eager_requires_grad(record, t)
    if eager and not t.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if eager is not False or not t.requires_grad:
        return contextlib.nullcontext()
    if storage_key(t) in record.visible_writes or record.family_of(t) in record.visible_families:
        raise UnsupportedError(
            f"{input_named(record, record.view_root(t, through_swaps=True))}{name}: resizes a tensor over this input "
            "that the compiled run makes require grad where eager's requires none yet (a view taken before the input "
            "was made to require grad, or the input's storage before a requires_grad_() the compile moves to the "
            "start), after a write with grad enabled into that storage: whether eager's then requires grad depends on "
            "the value written. Write under torch.no_grad(), or resize before the write"
        )
    return _resized_unrecorded(record)


@contextlib.contextmanager
def _resized_unrecorded(record: SwapRecord) -> Iterator[None]:
    """The run's resize_() below autograd, noted in the record as a write eager's autograd records nothing of."""
    record.resizing_unrecorded = True
    try:
        with below_autograd():
            yield
    finally:
        record.resizing_unrecorded = False


def flagged_before_eager(record: SwapRecord, t: torch.Tensor) -> tuple[int, int] | None:
    """Does the run's `t`, an input passed requiring no grad or a view of one, require grad where eager's does not
    yet: the input is a view of another input, which the program flags later and a compile that moves that flag to
    the start flagged first (ViewRecord.source_requires_grad)? Not once a set_() or a write reached `t`'s storage
    (eager's may then require grad by its history). Where so, the positions of the input and of its `._base`."""
    with no_torch_function():  # (the pipeline's reads, not the program's)
        found = record.input_positions.get(id(record.view_root(t)))
        if not t.requires_grad or found is None or found[1].requires_grad or record.bump_count(t):
            return None
        if id(t) in record.requires_grad_set or any(id(v.source) in record.requires_grad_set for v in record.chain(t)):
            return None
        base = found[1]._base
        for position, real in record.input_positions.values():
            if base is not None and real is base:
                early = not real.requires_grad and id(record.run_inputs[position]) not in record.requires_grad_set
                return (found[0], position) if early else None
        return None


def eager_requires_grad(record: SwapRecord, t: torch.Tensor) -> bool | None:
    """Does eager's `t`, an input or a view of one, require grad now? None where the record cannot tell (Note
    [resize_ And requires_grad])."""
    root = record.view_root(t, through_swaps=True)
    found = record.input_positions.get(id(root))
    if found is None or id(t) in record.requires_grad_set or id(t) in record.requires_grad_dropped:
        return None
    if _root_requires_grad(record, found[1]):
        return True
    gained = [v.source for v in record.chain(t) if id(v.source) in record.requires_grad_set]
    if not gained:
        return False
    if len(gained) == 1 and flagless_view_source(record, t) is gained[0]:
        return False
    return None


def _root_requires_grad(record: SwapRecord, real: torch.Tensor) -> bool:
    """Does eager's autograd root of input `real` (its `._base`, else itself) require grad now?"""
    root = input_root(real)
    for position, other in record.input_positions.values():
        if other is root:
            s = record.run_inputs[position]
            changed = id(s) in record.requires_grad_set or id(s) in record.requires_grad_dropped
            return s.requires_grad if changed else other.requires_grad
    return root.requires_grad


def note_gain_on_a_base(record: SwapRecord, t: torch.Tensor) -> None:
    """requires_grad_() on the stand-in `t` of an input that requires no grad: the other inputs that are views of it
    in eager (their `._base` is it) take requires_grad from it from now on, where their stand-ins, laid out over one
    storage as views of a synthetic base (a subclass's: laid out apart), do not (Note [Grad Mode And Autograd
    Reads])."""
    found = record.input_positions.get(id(t))
    if found is None:
        return
    real = found[1]
    for key, (_, other) in record.input_positions.items():
        if other is not real and other._is_view() and other._base is real:
            record.views_of_gained_bases.add(key)


# Views of gained bases (Note [Grad Mode And Autograd Reads]). Eager: a view input whose `._base`, another input, the
# program makes require grad reads requires_grad from that base from then on, but its grad_fn stays None where no
# write moved the version counter since the view was taken (autograd regenerates a view's history from its base only
# then): it is no leaf with an accumulator of its own either, so an op with grad that reads it records a node whose
# edge for it goes nowhere (`x1.sum()`: a SumBackward0 with next_functions ((None, 0),)), and no gradient reaches the
# base or the view through it. Views of it the program took before the flag, or under no_grad, are alike; those taken
# with grad after it have a view node whose edge goes nowhere. The run's stand-in is a view of the alias group's
# synthetic base (its flag the compile's, not eager's), so such an op reads the view through a throwaway leaf, its
# detach() made to require grad (`gained_base_views_as_leaves`): the same elements, storage and counter, results
# that require grad and carry a node, and a gradient that reaches no input. Where eager's view has history (the
# program moved the counter first; a tensor of its chain given a flag of its own, set_() or `.data =`; an input that
# came with its counter moved: guarded, `SwapRecord.unbumped_view_reads`), and for an op that may return a view, a
# write, an `out=`, a custom Function's apply, or a hook, `check_views_of_gained_bases` refuses what would differ:
# at once for a hook, or where a result (a written tensor) is over an input's storage, else once the program reads
# one again or returns or leaves one where the caller sees it (a result no one sees has no history to tell apart).

# torch functions of the program that reach a tensor's autograd history or accumulator without computing from it
_HISTORY_CALLS = frozenset({"register_hook", "retain_grad", "register_post_accumulate_grad_hook", "backward"})


def _reads_through_leaf(name: str, kwargs: dict[str, Any]) -> bool:
    """Does the program's torch function `name` read its tensors' elements as an op that records history, without
    writing them or returning a view of them (Note [Grad Mode And Autograd Reads], views of gained bases)?"""
    return (
        name not in _NO_DETACH
        and not _writes(name)
        and "out" not in kwargs
        and not may_return_view(name, unknown=False)
    )


def _leaf_stand_ins_apply(record: SwapRecord, func: Any, kwargs: dict[str, Any]) -> bool:
    """May throwaway leaves stand in for operands of the program's call `func` now (`gained_base_views_as_leaves`)?"""
    if not record.views_of_flagged_bases or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return False
    name = getattr(func, "__name__", "")
    return not is_autograd_read(func) and not is_base_read(func) and _reads_through_leaf(name, kwargs)


def note_grad_reenabled(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The program's call `func`, one that computes, in a run begun under no_grad: where grad mode is on and it reads a
    tensor that requires grad, or a view eager's autograd gives requires_grad through a base the program made require
    grad (`_reads_views_without_history`), its result requires grad in eager: noted, so the call compiles for training
    (Note [Grad Mode And Autograd Reads])."""
    if record.grad_at_start or not torch.is_grad_enabled():
        return
    if reads_grad((args, kwargs)) or _reads_views_without_history(record, func, args, kwargs):
        record.grad_reenabled.append(getattr(func, "__name__", "") or str(func))


def _reads_views_without_history(record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does the program's call `func` read with grad a view that eager's autograd gives requires_grad through a base
    the program made require grad, and no history, where the run's stand-in may require none (Note [Grad Mode And
    Autograd Reads], views of gained bases)?"""
    if not _leaf_stand_ins_apply(record, func, kwargs):
        return False
    with no_torch_function():  # (the pipeline's reads, not the program's)
        tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        return any(view_without_history(record, a) is not None for a in tensors)


def gained_base_views_as_leaves(
    record: SwapRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`, `kwargs` of an op with grad on with each view eager's autograd gives requires_grad through a base the
    program made require grad, and no history (`view_without_history`), replaced by a throwaway leaf over its
    elements (Note [Grad Mode And Autograd Reads], views of gained bases)."""
    if not _leaf_stand_ins_apply(record, func, kwargs):
        return args, kwargs
    made: dict[int, torch.Tensor] = {}

    def stand_in(a: object) -> object:
        if not isinstance(a, torch.Tensor):
            return a
        if id(a) not in made:
            with no_torch_function():  # (the pipeline's reads, not the program's)
                found = view_without_history(record, a)
            if found is None:
                return a
            record.unbumped_view_reads.append(found[0])  # (its counter guarded at 0: `guards._unbumped_guards`)
            with torch.no_grad():
                leaf = a.detach()
            made[id(a)] = leaf.requires_grad_()
        return made[id(a)]

    new_args = tuple(pytree.tree_map(stand_in, args))
    new_kwargs = {k: pytree.tree_map(stand_in, v) for k, v in kwargs.items()}
    return (new_args, new_kwargs) if made else (args, kwargs)


def note_flag_on_a_base(record: SwapRecord, t: torch.Tensor) -> None:
    """requires_grad_() on the stand-in `t` of an input that came requiring no grad, whether or not the stand-in does
    (a compile may set the flag from the start): the other inputs that are views of it (their `._base` is it) read
    requires_grad from it from now on, with no history (Note [Grad Mode And Autograd Reads], views of gained bases)."""
    found = record.input_positions.get(id(t))
    if found is None or found[1].requires_grad:
        return
    for key, (_, other) in record.input_positions.items():
        if other is not found[1] and other._is_view() and other._base is found[1]:
            record.views_of_flagged_bases.setdefault(key, record.seq)


def check_views_of_gained_bases(
    record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """Refuse an op with grad on, other than a view op, that read an input (or a view of one) whose base the program
    made require grad, where the run's stand-in does not require grad and no throwaway leaf stood in for it
    (`gained_base_views_as_leaves`): eager's result carries history, the compiled call's cannot. (A view of it is
    replayed at run time from the real input, with eager's history; an op whose results hold no tensor records
    none.)"""
    if not record.views_of_gained_bases or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    read = [
        t
        for t in pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor)
        and not t.requires_grad
        and id(record.view_root(t, through_swaps=True)) in record.views_of_gained_bases
    ]
    if read and _reads_through_leaf(name, kwargs):
        with no_torch_function():  # (the pipeline's reads, not the program's)
            read = [t for t in read if view_without_history(record, t) is None]  # (a throwaway leaf stood in)
    if not read:
        return
    writes = name.endswith("_") or name.startswith("__i") or name == "__setitem__"
    made = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not writes and made and all(storage_key(o) == storage_key(read[0]) for o in made):
        return
    if not writes and not made and name not in _HISTORY_CALLS:
        return
    error = _gained_base_view_refusal(record, read[0], name)
    carriers = [*made, *([args[0]] if writes and args and isinstance(args[0], torch.Tensor) else [])]
    if not carriers:
        raise error
    record.unseen_histories.extend((c, error) for c in carriers)
    check_unseen_histories(record, record.run_inputs)


def check_unseen_histories(record: SwapRecord, seen: object) -> None:
    """Raise the refusal of an op's result whose history eager's differs from the run's
    (SwapRecord.unseen_histories) where a tensor among `seen` (a later call's arguments; the outputs and the inputs
    as the program leaves them) is over its storage."""
    if not record.unseen_histories:
        return
    with no_torch_function():  # (the pipeline's reads, not the program's)
        keys = {storage_key(t) for t in pytree.tree_leaves(seen) if isinstance(t, torch.Tensor)}
        for carrier, error in record.unseen_histories:
            if storage_key(carrier) in keys:
                raise error


def check_gained_base_view_applies(record: SwapRecord, name: str, args: Sequence[object]) -> None:
    """Before a custom Function's apply with grad on: refuse one that reads a view input (or a view of one) whose
    base the program made require grad: eager's result requires grad through it with no history to the base, the
    run's has none or history to its stand-in (Note [Grad Mode And Autograd Reads], views of gained bases)."""
    if not record.views_of_flagged_bases or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return
    read = [
        a
        for a in pytree.tree_leaves(args)
        if isinstance(a, torch.Tensor)
        and id(record.view_root(a, through_swaps=True)) in record.views_of_flagged_bases
        and id(a) not in record.requires_grad_set
    ]
    if read:
        raise _gained_base_view_refusal(record, read[0], name)


def _gained_base_view_refusal(record: SwapRecord, t: torch.Tensor, name: str) -> UnsupportedError:
    return UnsupportedError(
        f"{input_named(record, t)}the program turns requires_grad on for an input that another input is a view "
        "of (requires_grad_(), `.requires_grad = True`) and then computes with grad enabled from that view "
        f"({name}): eager's view takes requires_grad from its base, so its results carry history (to its base where a "
        "write moved the counter they share before, or through a custom Function, an in-place op, a view that copies, "
        "or a hook), while the compiled call lays the inputs out over one storage apart and the view's results have "
        "none. Call requires_grad_() outside the compiled function, or pass the view's values as a separate tensor"
    )


def function_outputs_as_eager(
    record: SwapRecord, cls: type, args: tuple[object, ...], kwargs: dict[str, object]
) -> Callable[[object], object] | None:
    """Before a custom Function's apply under no_grad (Note [Grad Mode And Autograd Reads]): where it takes an input
    whose stand-in requires grad only because the compiled call sets the flag from the start (the program's
    requires_grad_() on it, or on the input it is a view of, comes later), eager's apply meets an input that requires no
    grad and returns it as itself where the forward marked it dirty, where the run's returns a detached alias (so too
    for a no_grad view that reads eager's flag from an input's own base, not passed: `reads_unpassed_base`). The
    function that gives the apply's result eager's object there; it refuses any other output aliasing such an input
    (eager's is a view of it). Conversely, an input that eager's reads as requiring grad through its `._base`, another
    input the program made require grad, where the run's stand-in requires none: eager's apply returns it detached.
    None where no input is so."""
    if torch.is_grad_enabled():
        return None
    through_base = tuple(a for a in pytree.tree_leaves((args, kwargs)) if requires_grad_through_gained_base(record, a))
    detached = functools.partial(_detached_as_eager, through_base) if through_base else None
    with no_torch_function():  # (the pipeline's reads, not the program's)
        early = [
            (a, flag)
            for a in pytree.tree_leaves((args, kwargs))
            if isinstance(a, torch.Tensor)
            and a.requires_grad
            and (flag := reads_unpassed_base(record, a) or _flag_from_the_start(record, a)) is not False
        ]
    if not early:
        return detached
    marked_before = {id(a) for a, _ in early if id(a) in record.dirty_marks}

    def as_eager(out: object) -> object:
        outs = list(out) if isinstance(out, tuple) else [out]
        for k, o in enumerate(outs):
            with no_torch_function():
                a, flag = next(((a, flag) for a, flag in early if _detached_alias(o, a)), (None, None))
            if a is None:
                continue
            if not flag or id(a) in marked_before or id(a) not in record.dirty_marks:
                raise UnsupportedError(
                    f"{input_named(record, a)}a custom autograd.Function ({cls.__name__}) applied under no_grad "
                    "returns this input (or an alias of it), which the program makes require grad only later "
                    "(requires_grad_() on it or on the tensor it is a view of), or a no_grad view of it, whose flag "
                    "eager's reads from the input's own base, not passed: eager's apply meets an input that "
                    "requires no grad and returns it as itself or as a view of it, while the compiled call, in which "
                    "the input requires grad from the start, would return a detached alias. Call requires_grad_() "
                    "before the apply, or outside the compiled function"
                )
            outs[k] = a
        return tuple(outs) if isinstance(out, tuple) else outs[0]

    return as_eager if detached is None else lambda out: as_eager(detached(out))


def function_returns_as_analyzed(
    record: SwapRecord, args: tuple[object, ...], kwargs: dict[str, object]
) -> Callable[[object], object]:
    """Before a custom Function's apply (the program's own, not one inside an op's dispatch): the function of its
    result that notes which outputs are its very inputs, or, in a run given the analysis run's notes, gives back
    the input itself where the analysis's apply returned it and this run's returns a detached alias. A training
    compile traces its inference graph under no_grad, where an apply meeting an input that requires grad returns it
    detached; eager's, with grad on, returns the input it marked dirty as itself, which the program's later in-place
    view ops and set_() then change (Note [Custom Functions])."""
    tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    replayed = record.replayed_function_returns
    k, record.function_cursor = record.function_cursor, record.function_cursor + 1

    def as_analyzed(out: object) -> object:
        outs = list(out) if isinstance(out, tuple) else [out]
        if replayed is None:
            record.function_returns.append(tuple(next((i for i, a in enumerate(tensors) if o is a), -1) for o in outs))
            record.function_saves.append(_saved_by_apply(outs, tensors))
            return out
        returned = replayed[k] if k < len(replayed) else ()
        with no_torch_function():  # (the pipeline's reads, not the program's)
            for j, i in enumerate(returned):
                if 0 <= i < len(tensors) and j < len(outs) and _detached_alias(outs[j], tensors[i]):
                    outs[j] = tensors[i]
        return tuple(outs) if isinstance(out, tuple) else outs[0]

    return as_analyzed


def _saved_by_apply(outs: Sequence[object], tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The tensors a custom Function's apply saved for backward (`SwapRecord.function_saves`): its node's, read
    from the grad_fn of its outputs; all of its tensor arguments where they cannot be read."""
    try:  # (a grad_fn read that raises: a view made under no_grad written since; saves freed or written since)
        with no_torch_function():  # (the pipeline's reads, not the program's)
            node = next((g for o in outs if isinstance(o, torch.Tensor) and (g := o.grad_fn) is not None), None)
            saved = getattr(node, "saved_tensors", ()) if node is not None else ()
    except RuntimeError:
        return tuple(tensors)
    return tuple(t for t in saved if isinstance(t, torch.Tensor))


def _detached_as_eager(inputs: tuple[torch.Tensor, ...], out: object) -> object:
    """A custom Function's result under no_grad where eager's `inputs` require grad and the run's do not: each output
    that is one of them comes back from eager's apply as its detach() (an alias that is no view and requires no
    grad), where the run's returns the input itself."""
    outs = list(out) if isinstance(out, tuple) else [out]
    outs = [o.detach() if isinstance(o, torch.Tensor) and any(o is a for a in inputs) else o for o in outs]
    return tuple(outs) if isinstance(out, tuple) else outs[0]


def _flag_from_the_start(record: SwapRecord, a: torch.Tensor) -> bool | None:
    """Does input stand-in `a`, which requires grad, require it only because the compiled call sets the flag from
    the start, eager's input requiring none yet? None where a write to its family may have given eager's history."""
    found = record.input_positions.get(id(a))
    if found is None or found[1].requires_grad or id(a) in record.requires_grad_set:
        return False
    real = found[1]
    base = real._base if real._is_view() else None
    for position, other in record.input_positions.values():
        if base is not None and other is base and id(record.run_inputs[position]) in record.requires_grad_set:
            return False
    return None if record.family_of(a) in record.written_families else True


def _detached_alias(o: object, a: torch.Tensor) -> bool:
    """Is `o` another tensor over `a`'s storage (each dense leaf's, for a subclass) in `a`'s layout?"""
    if not isinstance(o, torch.Tensor) or o is a or type(o) is not type(a) or o.requires_grad:
        return False
    if (o.shape, o.stride(), o.storage_offset()) != (a.shape, a.stride(), a.storage_offset()):
        return False
    mine = flatten_subclass(o, "output")[1] if is_traceable_subclass(o) else [o]
    theirs = flatten_subclass(a, "input")[1] if is_traceable_subclass(a) else [a]
    return len(mine) == len(theirs) and all(storage_key(m) == storage_key(t) for m, t in zip(mine, theirs, strict=True))


class GradReenabledError(UnsupportedError):
    """A program compiled for inference turned grad mode on inside and computed on tensors requiring grad: the
    compile goes again for training (Note [Grad Mode And Autograd Reads])."""


def check_grad_reenabled(functions: Sequence[str], *, training: bool) -> None:
    """Refuse a program compiled for inference that turned grad mode on inside and computed on tensors needing it."""
    if functions and not training:
        raise GradReenabledError(
            f"the program turns grad mode back on inside (torch.enable_grad() / set_grad_enabled(True)) and calls "
            f"{functions[0]}() on tensors that require grad, while it is called under no_grad: eager's results of "
            "that region require grad, the compiled inference graph's cannot (Note [Grad Mode And Autograd "
            "Reads]). Call the compiled function with grad mode on, or compute that region outside it"
        )


def _surely_same(before: RawMeta, after: RawMeta) -> bool:
    """Equal without guarding on symbolic sizes (a backward may specialize them; that is no mutation). The
    expressions are compared, not the SymInts: `a == b` inside the joint trace would be traced, and `before`'s
    come from outside it (the proxy tracer has no proxy for them)."""
    pairs = [*zip(before[0], after[0], strict=False), *zip(before[1], after[1], strict=False)]
    pairs.append((before[2], after[2]))
    same_rank = len(before[0]) == len(after[0])
    return same_rank and all(bool(symint_expr(a) == symint_expr(b)) for a, b in pairs)


def views_of_inputs(record: SwapRecord, inputs: Sequence[torch.Tensor]) -> list[tuple[int, torch.Tensor]]:
    """(input position, tensor) for each view the program took of an input, as the record saw them."""
    position = {id(t): i for i, t in enumerate(inputs)}
    found = []
    for key in record.views:
        view = record.pinned.get(key)
        if isinstance(view, torch.Tensor):
            i = position.get(id(record.view_root(view, through_swaps=True)))
            if i is not None and view is not inputs[i]:
                found.append((i, view))
    return found


# (per input position: per custom Function node whose backward changed it, (the diff outputs reaching that node, the
# version bumps it made))
NodeChanges = dict[int, list[tuple[frozenset[int], int]]]


@contextlib.contextmanager
def function_node_changes(
    outs: Sequence[torch.Tensor],
    user_tensors: Sequence[torch.Tensor],
    views: Sequence[tuple[int, torch.Tensor]],
    found: NodeChanges,
) -> Iterator[None]:
    """While a backward through `outs` runs: which custom Function node changed which input, in its version counter
    (through a view of it too) or its metadata, and which of `outs` (positions) reach that node (Note [Custom
    Functions]: eager runs a node only where a used output reaches it)."""

    def state() -> tuple[list[int], list[RawMeta], list[int]]:
        return (
            [get_version(t) for t in user_tensors],
            [tensor_meta(t) for t in user_tensors],
            [get_version(v) for _, v in views],
        )

    reach: dict[Any, set[int]] = {}
    for k, out in enumerate(outs):
        for node in _graph_nodes(out.grad_fn):
            if isinstance(node, torch.autograd.function.BackwardCFunction):
                reach.setdefault(node, set()).add(k)
    before: dict[Any, tuple[list[int], list[RawMeta], list[int]]] = {}

    def changed(node: Any, reached: frozenset[int]) -> None:
        (v0, m0, w0), (v1, m1, w1) = before.pop(node), state()
        for i in range(len(user_tensors)):
            bumps = v1[i] - v0[i] or max(
                (b - a for (p, _), a, b in zip(views, w0, w1, strict=True) if p == i), default=0
            )
            if bumps or not _surely_same(m0[i], m1[i]):
                found.setdefault(i, []).append((reached, bumps))

    handles = []
    for node, ks in reach.items():
        handles.append(node.register_prehook(lambda _g, node=node: before.__setitem__(node, state())))
        handles.append(node.register_hook(lambda _gi, _go, node=node, ks=frozenset(ks): changed(node, ks)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def backward_changes(
    flat: FlatInputs,
    user_tensors: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    swaps: SwapRecord,
    outs: Sequence[torch.Tensor],
    sink: list[BackwardReshape],
    grouped: frozenset[int] = frozenset(),
) -> Iterator[None]:
    """While a backward through `outs` runs: the changes it makes to the inputs (`backward_reshapes`), into `sink`.
    `grouped`: the positions of the plain inputs traced as members of an alias group."""
    metas = [tensor_meta(t) for t in user_tensors]
    versions = [get_version(t) for t in user_tensors]
    views = views_of_inputs(swaps, user_tensors)
    view_versions = [get_version(v) for _, v in views]
    changes: NodeChanges = {}  # Note [Custom Functions]
    with function_node_changes(outs, user_tensors, views, changes):
        yield
    view_bumps = [(i, get_version(v) - n) for (i, v), n in zip(views, view_versions, strict=True)]
    sink[:] = backward_reshapes(flat, user_tensors, user_fakes, metas, versions, view_bumps, changes, grouped)


def _graph_nodes(start: Any) -> set[Any]:
    return set(autograd_nodes([start]))


def _reached_by(changes: list[tuple[frozenset[int], int]] | None, bumps: int) -> tuple[frozenset[int], ...]:
    """BackwardReshape.reached_by: () where the nodes seen do not account for every bump (a change made elsewhere:
    replayed whenever the backward runs)."""
    if not changes or sum(n for _, n in changes) != bumps:
        return ()
    return tuple(reached for reached, _ in changes)


def backward_reshapes(
    flat: FlatInputs,
    user_tensors: Sequence[torch.Tensor],
    user_fakes: Sequence[torch.Tensor],
    before: Sequence[RawMeta],
    versions: Sequence[int],
    view_bumps: Sequence[tuple[int, int]] = (),
    node_changes: NodeChanges | None = None,
    grouped: frozenset[int] = frozenset(),
) -> tuple[BackwardReshape, ...]:
    """The inputs whose metadata the program's backward changed (Note [Custom Functions]);
    refuse the changes the runtime cannot replay exactly. `view_bumps`: (input position, bumps) of the views the
    forward took of inputs, which share the input's version counter in eager (a saved view's `t_()` in the backward
    bumps the input's) where the trace's need not. `node_changes`: what `function_node_changes` saw. `grouped`: the
    positions of the inputs traced as members of an alias group."""
    found = []
    changes = node_changes or {}
    for i, (t, meta) in enumerate(zip(user_tensors, before, strict=True)):
        after = tensor_meta(t)
        bumps = get_version(t) - versions[i]
        if not bumps:  # (views of one input share one counter: the most any saw)
            bumps = max((n for k, n in view_bumps if k == i), default=0)
        reached_by = _reached_by(changes.get(i), bumps)
        if _surely_same(meta, after):
            # Values written (x.mul_(2)) or an in-place op that changes nothing (t_() of a 0-d tensor): no layout to
            # replay, only eager's count of bumps (on a subclass input, its wrapper's own counter: the in-place op
            # ran on the wrapper above autograd).
            if bumps:
                found.append(BackwardReshape(position=i, size=None, stride=None, bumps=bumps, reached_by=reached_by))
            continue
        path = flat.leaves[flat.tensor_indices[i]].path
        static = all(isinstance(v, int) for v in (*meta[0], *meta[1], meta[2], *after[0], *after[1], after[2]))
        replayable = (
            static
            and not is_traceable_subclass(user_fakes[i])
            # (an input traced as a clone at another offset: the runtime's as_strided_() keeps the input's own)
            and _surely_same((*meta[:2], 0), (*tensor_meta(user_fakes[i])[:2], 0))
            and after[2] == meta[2]
        )
        if not replayable:
            raise UnsupportedError(
                f"{path}: the program's backward (a custom autograd.Function) changes this input's metadata "
                "(transpose_, unsqueeze_, ... on a saved tensor) where the runtime cannot replay it exactly (a tensor "
                "subclass, symbolic sizes, a changed offset, or an input traced as a clone of other strides) (Note [Custom "
                "Functions]). Change the metadata of a clone in the backward instead"
            )
        size = tuple(int(v) for v in after[0])
        stride = tuple(int(v) for v in after[1])
        _check_sole_grad_leaf(flat, i, size != tuple(meta[0]))
        if i in grouped:
            _check_grouped_grad_leaf(flat, i, tuple(int(v) for v in meta[0]), size)
        found.append(BackwardReshape(position=i, size=size, stride=stride, bumps=bumps, reached_by=reached_by))
    return tuple(found)


def _check_grouped_grad_leaf(flat: FlatInputs, i: int, before: tuple[int, ...], after: tuple[int, ...]) -> None:
    """A leaf input the backward gives another size: eager's AccumulateGrad takes the gradient as it comes where its
    strides fit the leaf's new layout (equal in each dim not of size 1, none 0 in a dim of size 1), and copies it into
    that layout otherwise, which raises where the sizes do not broadcast. A leaf traced as a member of an alias group
    gets its gradient as a view of its synthetic base's, in the input's own strides, where eager's is the custom
    backward's result, whose strides its kernels chose; in a dim of size 0 or 1 those two need not agree (Note
    [Strides The Kernels Choose]), so neither need whether the accumulation raises: refused there."""
    real = flat.values[flat.tensor_indices[i]]
    # (a leaf: one that requires grad, or one the program makes require grad)
    if before == after or not isinstance(real, torch.Tensor) or not real.is_leaf:
        return
    if not any(n in (0, 1) for n in (*before, *after)):
        return
    raise UnsupportedError(
        f"{flat.leaves[flat.tensor_indices[i]].path}: the program's backward (a custom autograd.Function) gives this "
        f"leaf input another size in place ({before} -> {after}: t_(), unsqueeze_(), ... on a saved tensor), and it "
        "shares its storage with another input the program writes: its gradient reaches it through the storage they "
        "share, in its own strides, where eager's is the backward's own result, and in a dim of size 0 or 1 those "
        "strides decide whether eager's gradient accumulation raises (Note [Custom Functions]). Change the metadata "
        "of a clone in the backward instead, or pass the input apart (a clone)"
    )


def _check_sole_grad_leaf(flat: FlatInputs, i: int, resized: bool) -> None:
    """A leaf input the backward gives another size raises at its AccumulateGrad, in eager and in the compiled call
    alike; whether other inputs got their gradients before depends on the order of eager's nodes, while the compiled
    backward hands them all at once: refused where another input requires grad."""
    reals = [flat.values[k] for k in flat.tensor_indices]
    mine = reals[i]
    others = [t for j, t in enumerate(reals) if j != i and isinstance(t, torch.Tensor) and t.requires_grad]
    if resized and isinstance(mine, torch.Tensor) and mine.is_leaf and mine.requires_grad and others:
        raise UnsupportedError(
            f"{flat.leaves[flat.tensor_indices[i]].path}: the program's backward (a custom autograd.Function) gives "
            "this leaf input another size in place (t_(), unsqueeze_(), ... on a saved tensor), so that its gradient "
            "accumulation raises; whether eager's other inputs got their gradients before it depends on the order "
            "of eager's nodes, and the compiled backward hands them all at once (Note [Custom Functions]). Change the "
            "metadata of a clone in the backward instead"
        )
