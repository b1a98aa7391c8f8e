"""Stage `runtime` (training), what the Function's backward checks before its graph runs, and what its forward holds
for those checks: saved tensors written since (eager's saved-version error), leaves eager grades before the failing
node (Note [Backward Errors Are Deferred]), the program's deferred error, and a double backward's inputs.

Input: the `_Step`, the Function's context and what its forward noted.
Output: nothing, or the error eager's backward raises there (or an UnsupportedError where the compiled backward
cannot raise it at eager's point).
Invariants: the checks read version counters and `.grad` marks only; held tensors are weak references.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.autograd_function.saved_checks import _checked_ref, _counter_holders
from subclassaot.runtime.autograd_function.step import _Step
from subclassaot.runtime.plan import (
    BackwardPlan,
)
from subclassaot.torch_internals import (
    get_version,
    grad_fn_raises,
    storage_key,
)


def _live_primals(refs: list[tuple[weakref.ref[torch.Tensor], int]]) -> list[torch.Tensor]:
    """The graph inputs for a double backward's rerun, as the forward saw them (Note [Training Through A
    Joint Graph]); refused where one was freed or written since."""
    out = []
    for k, (ref, version) in enumerate(refs):
        t = ref()
        if t is None or get_version(t) != version:
            raise UnsupportedError(
                f"double backward (create_graph=True): graph input {k} of the compiled program was "
                f"{'freed' if t is None else 'modified in place'} after the forward, and the double backward "
                "recomputes from it (Note [Training Through A Joint Graph]). Keep the inputs alive and unchanged "
                "until the backward"
            )
        out.append(t)
    return out


# per leaf behind an input that output views replayed before the call are taken of: (InputIndex, the leaf, its
# `.grad` as the forward found it: (id, version), or None, and the input's version counter then)
_LeafGrads = Sequence[tuple[int, "weakref.ref[torch.Tensor]", tuple[int, int] | None, int]]


def _grad_mark(t: torch.Tensor) -> tuple[int, int] | None:
    g = t.grad
    return None if g is None else (id(g), get_version(g))


def _leaf_grads(values: Sequence[object], sources: Sequence[int]) -> _LeafGrads:
    """The leaves (that require grad) of the inputs at `sources`, each the input or the tensor it is a view of, and
    their `.grad` now (`_check_early_leaves`). A view whose history raises autograd's view-after-write error once
    read (the program wrote its base: `grad_fn_raises`) is not read: it is no leaf with a gradient to watch (one that
    requires grad had its node), and eager reads nothing of it there."""
    found = []
    for i in sources:
        t = values[i]
        if isinstance(t, torch.Tensor):
            for leaf in (t, t._base):
                if leaf is not None and leaf.requires_grad and not grad_fn_raises(leaf) and leaf.is_leaf:
                    found.append((i, weakref.ref(leaf), _grad_mark(leaf), get_version(t)))
    return found


_SAVED_VERSION_ERROR = "modified by an inplace operation"  # (autograd's unpacking of a saved tensor written since)


def _check_early_leaves(s: _Step, early_grads: _LeafGrads, bw_meta: BackwardPlan) -> None:
    """Refuse where the leaf behind an output view replayed before the call got its gradient before this backward
    raised the program's error (Note [Backward Errors Are Deferred]): the caller wrote that view after the call, so
    its node, rebuilt at its next read, is newer than the compiled one and ran first, where eager's failing node (the
    first node after the output whose size the program changed behind autograd, or the one that saved a written
    tensor) may run before it. Not where that error is a saved tensor's version check: the node that unpacks it is
    the program's, older than the remade view node in eager too, which runs first there as well."""
    if _SAVED_VERSION_ERROR in str(bw_meta.error):
        return
    for i, ref, mark, version in early_grads:
        leaf = ref()
        if leaf is None or leaf.grad is None or _grad_mark(leaf) == mark or get_version(leaf) == version:
            continue  # (the counter unmoved: no view of the input written since, its views' nodes are the call's)
        raise UnsupportedError(
            f"the program's backward fails in eager ({bw_meta.error}), and {s.plan.flat.leaves[i].path}, an autograd "
            "leaf an output is a view of, got its gradient before the compiled backward raised that error: the "
            "view was written after the call, so its node, made again at its next read, ran first, where eager's "
            "failing node may run before it and leave the leaf without a gradient (Note [Backward Errors Are "
            "Deferred]). Do not write the program's outputs in place between the call and backward"
        )


def _raise_deferred(
    bw_meta: BackwardPlan, no_graph: bool, grads: Sequence[torch.Tensor | None], remade: Sequence[str]
) -> None:
    """Raise the program's own backward error where this backward is eager's failing one (Note [Backward Errors
    Are Deferred]); refuse one the probe did not see (Note [Probing Eager's Backward]), or one where the caller
    wrote the leaf behind the view inputs at `remade` since the call (`_remade_leaves`)."""
    error = bw_meta.error
    assert error is not None, "BUG: no deferred error to raise"
    given = frozenset(k for k, i in enumerate(bw_meta.diff_outputs) if grads[i] is not None)
    if not no_graph and bw_meta.raising_patterns is not None:  # Note [Backward Errors Are Deferred]
        if given not in bw_meta.raising_patterns:
            _refuse_values_left_out(bw_meta, given & bw_meta.raising_tangents)
            return
    elif not no_graph and not given & bw_meta.raising_tangents:
        return
    unprobed = dict(bw_meta.unprobed_values) if no_graph and bw_meta.raising_patterns is None else {}
    if given and given <= unprobed.keys():
        paths = ", ".join(sorted({unprobed[p] for p in given}))
        raise UnsupportedError(
            f"the program's backward through its outputs fails in eager ({error}), and this backward is through the "
            f"new value of {paths} alone, which the program wrote and none of its outputs' backward reaches: eager's "
            "backward through it may complete (it need not reach the failing node, say a custom Function's backward "
            "unpacking a saved input the program wrote afterwards), which was not probed, and the compiled backward "
            "(one node) cannot run it without the failing part (Note [Probing Eager's Backward]). Call backward "
            "through the program's outputs, or write a clone of the input"
        )
    if no_graph and bw_meta.raising_patterns is not None and given not in bw_meta.raising_patterns:
        raise UnsupportedError(
            f"the program's backward fails in eager ({error}), and this backward, through some of its outputs "
            "only, was not checked to fail there before any gradient is accumulated (Note [Probing Eager's "
            "Backward]). Call backward through all of the outputs that require grad"
        )
    if remade:
        raise UnsupportedError(
            f"the program's backward fails in eager ({error}), and the autograd leaf behind {', '.join(remade)} (a "
            "view of it) was written after the call: eager's engine runs that view's node, made again at its next "
            "read, first, and may give the leaf its gradient before the failing node raises, where the compiled "
            "backward, which that leaf's gradient waits on, raises before any (Note [Backward Errors Are "
            "Deferred]). Do not write the program's outputs or inputs in place between the call and backward"
        )
    raise _fresh_error(error) from error


def _refuse_values_left_out(bw_meta: BackwardPlan, given: frozenset[int]) -> None:
    """Refuse a backward giving a tangent at the diff positions `given`, new values of written inputs the graph was
    traced without, where eager's probed backward through this set does not raise before any gradient (Note
    [Backward Errors Are Deferred], errors through input values only)."""
    if not given:
        return
    paths = ", ".join(sorted({path for p, path in bw_meta.unprobed_values if p in given})) or "an input"
    raise UnsupportedError(
        f"the program's backward fails in eager ({bw_meta.error}) through the new value of {paths} (written by the "
        "program) together with other outputs, and this backward, through that new value without them, completes "
        "there (or gives a leaf its gradient before it raises): the compiled backward was traced without that "
        "value's tangent, as its one node cannot run the failing part apart (Note [Backward Errors Are Deferred]). "
        "Call backward through the program's outputs, or write a clone of the input"
    )


def _fresh_error(error: RuntimeError) -> RuntimeError:
    """Eager's error anew, of its type and with its arguments (NotImplementedError from a subclass's missing op stays
    one), at every backward that raises it; the stored one keeps the traceback of the compile that found it."""
    try:
        fresh = copy.copy(error)  # (an exception's copy: its class called with its args, then its __dict__)
    except Exception:  # a class that cannot be rebuilt from its arguments: eager's message as a RuntimeError
        return RuntimeError(str(error))
    return fresh if type(fresh) is type(error) and str(fresh) == str(error) else RuntimeError(str(error))


def _check_double_backward(s: _Step, primals: object) -> None:
    if not s.differentiable_backward:
        # create_graph=True: a compiled backend's kernels are opaque to autograd.
        raise UnsupportedError(
            "double backward (create_graph=True) through a compiled backward: the backend's kernels are "
            'not differentiable. Compile with backend="eager" to differentiate the gradient again'
        )
    if primals is None:
        raise UnsupportedError(
            "double backward (create_graph=True) of a program that draws random numbers or writes its "
            "inputs: the gradient is computed from values the forward saved without their history, and "
            "recomputing them would draw again or read the inputs after the write (Note [Training Through "
            "A Joint Graph]). Differentiate an eager version of the program twice instead"
        )
    # A subclass's primals are its dense leaves, which do not require grad (the wrapper does), and the joint graph
    # reads a subclass's saved values through the detach() autograd's saving and unpacking dispatch to it: a rerun
    # would give a gradient with no history to the wrapper, or one missing the terms through saved values.
    layout, bw_meta = s.plan.layout, s.bw_meta
    trees = [(f"input {i}", t) for i, t in enumerate(layout.trees)] + [
        (f"the gradient of output {o}", t) for o, t in zip(bw_meta.diff_outputs, bw_meta.tangent_trees, strict=False)
    ]
    where = next(((what, f"is a {t.cls.__name__}") for what, t in trees if t is not None), None)
    if where is None and bw_meta.subclass_grads:  # (a subclass the program built, as plain outputs' gradients flow)
        where = ("the program", "builds a tensor subclass its gradients flow through")
    if where is not None:
        raise UnsupportedError(
            f"double backward (create_graph=True) through a compiled backward of tensor subclasses ({where[0]} "
            f"{where[1]}): the compiled backward differentiates the subclass's dense inner tensors, "
            "which carry none of its autograd history, so its gradient cannot be differentiated again (Note "
            "[Training Through A Joint Graph]). Differentiate an eager version of the program twice instead"
        )


def _hold_checked(
    ctx: Any, s: _Step, tensors: Sequence[torch.Tensor], user: Sequence[torch.Tensor], noted: list[Any]
) -> None:
    """The tensors eager's backward checks (backward_probe.eager_saves): an output by weak reference (one held by its
    own node's ctx would never be freed), an input, which may be a stand-in made for this call, by a strong one. Their
    counters are read once the call has written its inputs (`_note_counters`)."""
    ctx.checks = [
        (_checked_ref(tensors, user, out, inp), positions, graded, view_error)
        for out, inp, _, positions, graded, view_error in s.checks
    ]
    ctx.checked = None
    ctx.viewed_refs = ctx.viewed = ()
    if not any(c is ctx for c in noted):
        ctx.remade_refs = ctx.remade = ()
        noted.append(ctx)


def _save_values(
    ctx: Any,
    s: _Step,
    saved: Sequence[object],
    inputs: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor], Sequence[torch.Tensor], Sequence[object]],
    noted: list[Any],
) -> None:
    """`ctx`'s saved tensors of the general step (`inputs`: the user's tensors, the graph's inputs, its dense
    leaves, the Function's outputs), and after them the graph inputs saved beside their clones
    (`_Step.held_inputs`), read by no backward: autograd checks their counters when the backward unpacks them (Note
    [Probing Eager's Backward])."""
    user, graph_in, graph_dense, outputs = inputs
    # See Note [Probing Eager's Backward]: each through an alias with a counter of its own.
    kept = [v.data if s.saves_apart else v for v in saved if isinstance(v, torch.Tensor)]
    held = [graph_in[p] for p in s.held_inputs]
    ctx.save_for_backward(*kept, *held)
    ctx.saves_tensors, ctx.num_kept = bool(kept or held), len(kept)
    _hold_unprobed_wrappers(ctx, s, (user, graph_dense, outputs), [*kept, *held], noted)


def _hold_unprobed_wrappers(
    ctx: Any,
    s: _Step,
    tensors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor], Sequence[object]],
    kept: Sequence[torch.Tensor],
    noted: list[Any],
) -> None:
    """Where eager's saves were not probed (the Function saves its values as themselves): the inputs whose counters
    `_note_counters` reads once the call has written its inputs (`_refuse_written_unprobed_wrappers`): subclass
    inputs some of whose inner tensors it saved (autograd checks theirs, not the wrapper's), and inputs a custom
    Function of the program saved (`EagerSaves.taken`: its backward may read none of their values), but for plain
    ones whose values it saved, which autograd checks as eager's unpacking does; and likewise the Function's
    subclass outputs some of whose inner tensors it saved (`exp()`'s result, which eager's node saves as the
    wrapper), by weak reference. `tensors`: the user's tensors, the graph's dense leaves, the Function's outputs."""
    if s.saves_apart:
        return
    user, graph_dense, outputs = tensors
    saved = {storage_key(v) for v in kept}
    layout = s.plan.layout

    def checked_apart(i: int) -> bool:
        values_saved = any(storage_key(graph_dense[j]) in saved for j in layout.leaves_of_input[i])
        if layout.trees[i] is None:
            return i in s.taken and not values_saved
        return i in s.taken or values_saved

    inputs = s.subclass_inputs or s.taken
    ctx.unprobed_refs = [(i, user[i]) for i in range(len(layout.trees)) if checked_apart(i)] if inputs else []
    ctx.unprobed_output_refs = [
        (k, weakref.ref(t))
        for k, t in enumerate(outputs)
        if k >= s.n_updates
        and isinstance(t, torch.Tensor)
        and is_traceable_subclass(t)
        and any(storage_key(leaf) in saved for leaf in flatten_subclass(t, "output")[1])
    ]
    ctx.unprobed = ctx.unprobed_outputs = ()
    if (ctx.unprobed_refs or ctx.unprobed_output_refs) and not any(c is ctx for c in noted):
        ctx.remade_refs = ctx.remade = ()
        noted.append(ctx)


def _refuse_written_unprobed_wrappers(
    s: _Step,
    unprobed: Sequence[tuple[int, torch.Tensor, int]],
    outputs: Sequence[tuple[int, weakref.ref[torch.Tensor], int]] = (),
) -> None:
    """Refuse a backward after the caller wrote a tensor `_hold_unprobed_wrappers` holds, where eager's saves were
    not probed (backward_probe's comment on saved tensors): a subclass input or output whose inner tensors the
    Function saved (a write through the wrapper moves its counter, not its inner tensors', so the saved values pass
    autograd's check, while eager's node, if it saved the wrapper itself (`x * x`, `x.exp()`'s result), raises
    "modified by an inplace operation"), or an input a custom Function saved and may read only the metadata of (the
    graph then saves none of its values)."""
    written = [i for i, t, version in unprobed if get_version(t) != version]
    moved = [k for k, ref, version in outputs if (t := ref()) is not None and get_version(t) != version]
    if not written and not moved:
        return
    if not written:
        path, kind = _function_output_name(s, moved[0]), "tensor subclass output (or a view of it)"
        how = "the compiled backward reads its inner tensors as saved"
        saved_as = "the output itself (the node of an op that saves its result: exp(), tanh(), relu())"
        advice = "Do not write the output (or its views) in place between the call and backward, or write a clone"
    else:
        i = written[0]
        path = s.plan.flat.leaves[s.plan.flat.tensor_indices[i]].path
        how = (
            "a custom autograd.Function of the program saved it for a backward that may read none of its values"
            if i in s.taken
            else "the compiled backward reads its inner tensors as saved at the call"
        )
        kind = "input" if s.plan.layout.trees[i] is None else "tensor subclass input"
        saved_as = "the input itself (an op's node, the Function's save_for_backward)"
        advice = "Do not write the input in place between the call and backward, or pass a clone of it"
    raise UnsupportedError(
        f"{path}: this {kind} was written in place after the compiled call, and {how}; eager's backward may have "
        f"saved {saved_as} and then raises (modified by an inplace operation), which could not be checked here: "
        "eager's program does not run on the static fakes that find the tensors its backward saves "
        f"(backward_probe's comment on saved tensors). {advice}"
    )


def _function_output_name(s: _Step, k: int) -> str:
    """The first program output that uses the version counter of the Function's output `k` (`_counter_holders`:
    it, or a view of it, was written)."""
    holders = _counter_holders(s.plan, s.bw_meta, s.fresh_outputs, s.roots)
    return next((f"output {o}" for o, at in sorted(holders.items()) if at == k), "an intermediate the outputs view")


def _remade_leaves(s: _Step, remade: Sequence[tuple[int, weakref.ref[torch.Tensor], int]]) -> list[str]:
    """The paths of the inputs that are views of a leaf whose counter moved since the call: the caller wrote a view
    of that leaf, so the node of a view of it the caller holds (such an input), made again at its next read, is
    numbered above every node of the program's, and eager's engine runs it, and then the leaf's AccumulateGrad where
    no other node of the backward feeds it, before the program's failing node raises; the leaf's AccumulateGrad
    waits on the compiled Function, which raises first (Note [Backward Errors Are Deferred])."""
    n = len(s.plan.flat.tensor_indices)
    return sorted(
        {
            s.plan.flat.leaves[s.plan.flat.tensor_indices[p]].path if p < n else "an alias group's base"
            for p, ref, version in remade
            if (leaf := ref()) is not None and get_version(leaf) != version
        }
    )


def _written_view_leaves(s: _Step, viewed: Sequence[tuple[int, weakref.ref[torch.Tensor], int]]) -> list[str]:
    """The paths of the leaves behind inputs output views are replayed from whose counter moved since the call: the
    caller wrote such a view (or the leaf), so the view's node, made again at the backward's read, is numbered above
    every node of the program's, and eager's engine runs it, and then the leaf's AccumulateGrad where nothing else
    feeds it, before the node that saved a written tensor raises; the compiled Function, which the leaf's
    AccumulateGrad waits on, raises first (backward_probe's comment on saved tensors)."""
    return [
        s.plan.flat.leaves[i].path
        for i, ref, version in viewed
        if (leaf := ref()) is not None and get_version(leaf) != version
    ]
