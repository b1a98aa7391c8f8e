"""Part of stage `trace` (training): how eager's own backward ends, for a program whose traced backward fails.

Input: the call and `FlatInputs` (the real values of this call), the `Analysis`.
Output: `probe_eager_backward(...)`: per nonempty set of the program's tensor outputs that require grad, how eager's
backward through them ends (`BackwardEnd`), or None where the program cannot be probed; `tangent_patterns(...)`:
the same by the Function outputs each set gives tangents to; `refuse_layout_changed_behind_autograd(...)`: an
UnsupportedError for a program whose backward's size checks the compiled one would not repeat.
Invariants: see Note [Probing Eager's Backward]; the probe runs on static fakes in a fresh fake mode (or on meta
copies where the fakes fail), so it reads no real tensor, draws no random number and adds no guard.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import gc
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, NoReturn, TypeVar, cast

import torch
from torch.autograd.graph import get_gradient_edge
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.inputs import unflatten_call
from subclassaot.pipeline.rules.new_leaves import (
    NewLeafHold,
    ShownLeaves,
    flag_read_args,
    makes_leaf_itself,
    turns_flag_on,
)
from subclassaot.runtime.plan import EagerSave, EagerSaves, MetaEvaluator, fresh_output
from subclassaot.runtime.regenerate import intermediate_base, replay_from
from subclassaot.runtime.steps import (
    epilogue_write_hidden,
    graph_example_inputs,
    own_accumulator_inputs,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    DenseLayout,
    FlatInputs,
    GraphOutputs,
    InputIndex,
    InputUpdate,
    LeafSource,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    UpdateKind,
)
from subclassaot.torch_internals import (
    EXAMPLE_INPUT_HISTORY_ERROR,
    after_accumulating,
    autograd_nodes,
    get_version,
    grad_fn_or_none,
    grad_fn_raises,
    innermost_dispatch_mode,
    is_plain_autograd_view,
    outside_current_modes,
    requires_grad_through_base,
    set_version,
    static_fake_copies,
    static_meta_copies,
    storage_key,
    wrapper_grad_accumulator,
)

# Note [Probing Eager's Backward]
# Where the traced backward fails (Note [Backward Errors Are Deferred]), or may pass where eager's fails, what eager's
# backward does is fixed by the program's autograd graph: on CPU the engine runs the ready node with the highest
# sequence number (creation order), and a leaf's AccumulateGrad, numbered above all, as soon as it is ready. So the
# compile runs the program once more, eagerly, on static fakes of the real inputs (aliasing kept, and version counters
# shared as eager's: a detach() passed beside its tensor, whose writes a node that saved the other sees), and calls backward
# through each nonempty set of its outputs that require grad (tangents do not change the order), to see whether it
# raises and whether some input leaf got its gradient first; only leaf inputs can (those passed, and those the program
# made leaves by `x.requires_grad_()`: `_leaves_made`), and the probe reads their `.grad`.
# Each probed set is mapped to the Function outputs it gives tangents to (`tangent_patterns`). Outputs beyond
# MAX_PROBED_OUTPUTS are not probed (2^n backwards).
# - Non-leaf inputs' fakes keep no history: their node (autograd's Error node) raises EXAMPLE_INPUT_HISTORY_ERROR, is
#   numbered above all and runs as soon as ready. A non-leaf input returned as it came would end the probe first, so it
#   is left out of the probe's roots (eager runs that history after the program's nodes). Reached through a node of the
#   program it would end the probe before another node raises, so a fake that shares no storage (and is no view) gets
#   a history made before the call instead (`_InputHistory`: numbered below the program's nodes, it runs after them
#   as eager's does, and raises the same). So does a base of views among the inputs (of the default kind: not made
#   under no_grad), where every input over its storage is the base or such a view: the views are taken again from
#   it, by as_strided() at their layouts. Other fakes that share storage keep the Error node: a known limit.
# - Deferring is exact for a backward through all of the outputs where eager's raises before any input leaf's gradient,
#   and no output that requires grad is, or is regenerated from, a leaf input that requires grad (its AccumulateGrad
#   would run outside the Function). The leaf a view input is a view of counts as an input leaf: a write under no_grad
#   makes eager rebuild the view's node at its next read, and one made after the raising node runs first and hands
#   that leaf its gradient (`with no_grad(): x0.add_(2)`, then `t1.mul_(t1)`, then `x0 * 2`).
#   Not where that view is itself among the roots: returned as itself, it is rebuilt outside the compiled Function
#   as in eager (a backward through it and through another output that reads it after the raising node: a known gap).
#   A leaf the program makes require grad (`x.requires_grad_()`) is an input leaf too. Where the raising sets are not
#   verified so, but no probed set gives a leaf its gradient before eager raises, views of unchanged leaf inputs among
#   the outputs are replayed before the call as well (their nodes then run after the Function's, as eager's after its
#   set_ node or saved-tensor check). A view of a leaf the program changes cannot be (the epilogue writes the leaf
#   after the call, and autograd makes the view's node again): where a probed set with it raises before any gradient,
#   it is refused by name (`refuse_changed_leaf_views`: its node would give the leaf a gradient eager's never does).
#   Eager's probe on fakes also raises eager's own error where a node saves an inference input (batch norm's running
#   stats, made inside inference_mode, beside a weight that requires grad): the trace's stand-ins are no inference
#   tensors, so it is raised from there.
# - Sizes changed behind autograd: `.data =` with a tensor of another layout, or an in-place view op under no_grad,
#   leaves nodes made before it (a grad_fn, a leaf's AccumulateGrad kept alive by a view's backward) expecting the old
#   size, and eager's backward checks each gradient against it ("returned an invalid gradient ... expected shape
#   compatible with", or a broadcast check on accumulation), while the functional trace, whose tensors carry each value's
#   own size, runs. These checks read sizes only, which the static fakes have as eager's tensors do. So a program that
#   assigned `.data` (or changed an input's layout so) and whose traced backward ran is probed too: where eager's
#   backward through every output raises before any gradient, that error (the same text) is deferred as the program's;
#   where some backward raises otherwise, the program is refused. A traced backward that fails such a check for an input
#   that is a leaf or a view is refused as well (eager's may run or fail elsewhere; the fakes do not tell). A leaf
#   changed under no_grad before any read with grad runs as a leaf in the trace instead (Note [Leaves Laid Out Anew Under
#   no_grad]). The same guards a set_() under no_grad onto another layout of the input's own storage followed by an
#   in-place view op with grad (eager's node fails its size check; ours maps the gradient back to the storage). Where
#   the sizes agree (a square x0 set_() to x0.t()) eager's gradient lands on other elements: a known gap. And a set_()
#   under no_grad of an input that is the `._base` of another input requiring grad: a read of that view with grad
#   rebuilds its history over the base's new size, and eager's backward fails there; only backwards through outputs
#   the graph computes count (a view input returned as itself keeps eager's own history).
# - Fakes are a subclass to autograd: it rebuilds a fake view's history by replaying its view ops where eager uses
#   as_strided() at the view's layout now, so after an in-place view op with grad on a view (`x1.t_()` on a diagonal
#   input, then a write that rebuilds it) the fakes' history expects the old size and their backward fails the size
#   check where eager's runs. Such a size-check failure is not deferred but refused (`Analysis.views_relaid_with_grad`).
# - Where the fakes fail an internal assert eager does not: a custom autograd.Function applied with grad mode on inside
#   a torch.inference_mode() block that marks dirty a view requiring grad (eager rebases the view's history there;
#   Analysis.marks_view_dirty_in_inference: the analysis run saw that mark), the saves are probed on meta copies of
#   the inputs (`static_meta_copies`: sizes, strides, storage sharing, views, requires_grad, leafness; meta tensors
#   keep autograd), plain tensors with no mode around them, on which eager's own autograd, view and inference-mode
#   code runs (`eager_saves`' `copies`). Where even those cannot run it (an op without a meta kernel, a tensor made on
#   another device), a caller's write after the call of a tensor eager saved would not fail the compiled backward as
#   it fails eager's: refused. (Other programs the probe cannot run on fakes are left unprobed: the Function checks
#   its own saves' counters only.)
# - Errors raised outside the program: where the raise is at a node the compiled program shares with eager there is
#   nothing to defer: at a root that is a plain input returned as itself and not written where autograd records it (the
#   engine checks the root's gradient against the caller's node, "invalid gradient at index k"), or at the AccumulateGrad
#   of the one leaf input that requires grad ("doesn't match the broadcast shape"). The probe keeps a program only where
#   each set of outputs completes or raises before any leaf's gradient in one of those ways. A root whose history
#   raises when read (a view of unbind()'s output whose base was written in place since) fails eager's backward before
#   any node (BackwardEnd.RAISES_AT_ROOT), as does a root that requires grad only through its base (a view taken under
#   no_grad: no history of its own); such a set says nothing of the Function's tangents and makes no pattern, so
#   a backward through the same tangents by another way (the written base's new value alone) is refused when it runs.
#   Nor does a set with an output set_() under grad onto another tensor's storage (`t0.set_(x0)`, x0 written): its
#   set_ node (eager's, and the holder's the epilogue makes: Note [set_ Under Grad]) passes no gradient on, but the
#   compiled output is rebuilt from that storage's value, so the set would map to x0's new value, a tangent that a
#   backward through x0 alone gives the Function too, where eager's meets no set_ node and completes. An output set_()
#   onto its own storage (`t0.set_(t0)`, or a base its view's set_() rebased) maps to its own fresh value, which no
#   backward reaches but through that output: its set is kept.
# - Only backwards through the program's outputs are probed. Where no probed set is kept, a backward through the new
#   values of written inputs alone that no output reaches is refused when it runs: eager's may never reach the failing
#   node (a custom Function's backward unpacking a saved input that a copy_ into it bumped after the save). Where the
#   graph would be traced without the raising tangents (Note [Backward Errors Are Deferred]), such new values are
#   probed too, as roots beside the outputs (`probe_eager_backward`'s `values`).
# Saved values are checked as eager's (runtime/autograd_function/):
# Autograd checks each tensor a node saved against the version its counter had at the save, and unpacking a view
# made under no_grad whose base was written since raises too. Eager's nodes save what eager's formulas read, each
# with its own counter; the compiled Function saves what its backward graph reads, and those values need not use
# the counters of eager's saved tensors, nor be read by every backward eager's would run:
#   t0 = F.apply(x0); x0.data = t0     F saved x0 (x0's counter); ours saves t0's value, an output: writing t0
#                                      after the call fails ours only
#   y.mul_(2); a = x.exp(); b = x * 2  a backward through b alone never runs ExpBackward; ours unpacks everything
#   with no_grad(): x0.copy_(x0)       ours saves the unbind() view of x0 its forward took under no_grad, and the
#   t0 = x0.unbind(0)[0]               epilogue then moves x0's counter: unpacking the view raises
# So the Function saves each value through `.data` (the same memory; a counter of its own, no view, no history:
# nothing the program, the epilogue or the caller writes moves it) and raises eager's errors itself, from the
# counters of the tensors eager's nodes saved, matched by the counter they use, where a tangent reaches an output
# whose backward runs such a node (backward_probe's comment on saved tensors). Where that probe could not run, the
# values themselves are saved: autograd's checks then raise where eager's may not, never the other way, but for a
# subclass input's or output's inner tensors, which a write through the wrapper leaves at their count: a backward
# after such a write of an input or output whose inner tensors the Function saved is refused (eager's node may have
# saved the wrapper: `x * x`, `x.exp()`'s result). An
# input the graph reads through the clone the joint graph took of it (one at an offset: partition.py keeps that clone)
# is saved beside the clone, unread, so that autograd checks its own counter (`_Step.held_inputs`). Where each
# tensor eager saved over a counter is a view made under no_grad (or by a multi-output op), eager's unpacking raises
# that view's error, not the version check's: the probe records its message (EagerSave.view_error). A
# create_graph backward recomputes from the primals and reads no saved value (Note [Training Through A Joint Graph]).

MAX_PROBED_OUTPUTS = 4

SHAPE_CHECK_ERROR = "invalid gradient at index"
BROADCAST_ERROR = "doesn't match the broadcast shape"
SET_BACKWARD_ERROR = "derivative for set_ is not implemented"  # Note [set_ Under Grad]
# Checks eager makes on real data that fake kernels skip (a write through repeated elements of an expand), and
# autograd's own checks of saved versions and gradient sizes, which the probe's run on fakes does not always reach as
# eager's does (a saved view's version moved by a set_() or layout change; a storage grown by resize_()): the probe
# cannot be trusted to see eager raise these (Note [Backward Errors Are Deferred])
UNPROBED_ERRORS = (
    "refers to a single memory location",
    "modified by an inplace operation",
    "invalid gradient at index",
)


class BackwardEnd(enum.Enum):
    COMPLETES = "completes"  # no node of the program raises
    RAISES = "raises"  # a node of the program raises before any input leaf gets its gradient
    RAISES_AFTER_GRADS = "raises after gradients"  # ... after some input leaf got its gradient
    # reading a root's history raises, before any node runs: a view of a multi-output view op (unbind()) whose base
    # was written in place since; no tangent reaches the Function (Note [Probing Eager's Backward])
    RAISES_AT_ROOT = "raises at a root"


def probe_eager_backward(
    call: Callable[..., object],
    flat: FlatInputs,
    returned: frozenset[int] = frozenset(),
    values: frozenset[int] = frozenset(),
) -> Mapping[frozenset[int], BackwardEnd] | None:
    """Per nonempty set of the program's tensor outputs that require grad (positions among its output pytree's
    leaves): how eager's backward through them ends (Note [Probing Eager's Backward]). None where the program does
    not run on static fakes, has no such output, or more than MAX_PROBED_OUTPUTS. `returned`: positions in
    `flat.values` of leaf inputs given to the Function detached (Note [Backward Errors Are
    Deferred]): their gradient counts where it is there exactly when the leaf itself is among the chosen outputs.
    `values`: positions in `flat.values` of inputs whose new values are roots too, where the program wrote them with
    grad and returns no output that is the input itself, each at position (number of output leaves) + its position
    in `flat.values`."""
    return _sized_as_eager(lambda copies, errors: _probed_ends(call, flat, returned, values, copies, errors))


_T = TypeVar("_T")


def _sized_as_eager(probe: Callable[[_Copies, list[RuntimeError]], _T | None]) -> _T | None:
    """`probe`'s answer on static fakes (None: it did not run; the errors its backwards raised go into the list
    given), or where one of those failed autograd's size check, its answer on meta copies where they run. Fakes are a
    subclass to autograd: a fake view's history, made again after a write, replays its view ops at its old size where
    eager's takes as_strided() at its size now (`x0.set_(x2)` of a view input), so their size check can fail where
    eager's passes, ahead of the node that raises in eager; meta copies run eager's own view handling (Note [Probing
    Eager's Backward])."""
    errors: list[RuntimeError] = []
    found = probe(static_fake_copies, errors)
    if found is None or not any(SHAPE_CHECK_ERROR in str(e) for e in errors):
        return found
    on_meta = probe(static_meta_copies, [])
    return found if on_meta is None else on_meta


def _probed_ends(
    call: Callable[..., object],
    flat: FlatInputs,
    returned: frozenset[int],
    values: frozenset[int],
    copies: _Copies,
    errors: list[RuntimeError],
) -> Mapping[frozenset[int], BackwardEnd] | None:
    """probe_eager_backward's answer, its programs run on `copies` of the inputs (the errors raised: `errors`)."""
    try:
        grad_outputs, _ = _trial(call, flat, None, values=values, copies=copies)
        if not 0 < len(grad_outputs) <= MAX_PROBED_OUTPUTS:
            return None
        ends: dict[frozenset[int], BackwardEnd] = {}
        for chosen in _output_sets(grad_outputs):
            _, end = _trial(call, flat, chosen, errors, returned=returned, values=values, copies=copies)
            if end is None:
                return None
            ends[chosen] = end
    except Exception:  # a program the probe cannot run: the caller keeps its own checks
        return None
    return ends


def grad_output_count(call: Callable[..., object], flat: FlatInputs) -> int | None:
    """How many of the program's tensor outputs require grad, run on static fakes; None where it does not run."""
    try:
        return len(_trial(call, flat, None)[0])
    except Exception:  # a program the probe cannot run
        return None


def eager_backward_error(call: Callable[..., object], flat: FlatInputs) -> RuntimeError | None:
    """The error eager's backward through every output that requires grad raises on static fakes, if any; where
    theirs is autograd's size check, on meta copies, as probe_eager_backward answers (Note [Probing Eager's
    Backward])."""
    found = _sized_as_eager(lambda copies, errors: _full_backward_errors(call, flat, copies, errors))
    return found[0] if found else None


def _full_backward_errors(
    call: Callable[..., object], flat: FlatInputs, copies: _Copies, found: list[RuntimeError]
) -> list[RuntimeError] | None:
    """`found`, given the errors of eager's backward through every output that requires grad, the program run on
    `copies` of the inputs; None where it does not run."""
    try:
        grad_outputs, _ = _trial(call, flat, None, copies=copies)
        if grad_outputs:
            _trial(call, flat, frozenset(grad_outputs), found, copies=copies)
    except Exception:  # a program the probe cannot run
        return None
    return found


def eager_backward_errors(call: Callable[..., object], flat: FlatInputs) -> tuple[RuntimeError, ...] | None:
    """The errors eager's backward raises on static fakes (Note [Probing Eager's Backward]): through each nonempty set
    of the outputs that require grad (every output at once beyond MAX_PROBED_OUTPUTS), and through each input that
    leaves the call with a history the program made (written with grad), alone. None where the program, or a backward
    through its outputs, does not run on static fakes (a subclass without fakes, an op its fakes lack)."""
    found: list[RuntimeError] = []

    def through_inputs(outs: Sequence[object], values: Sequence[object]) -> None:
        for v in values:
            if not isinstance(v, torch.Tensor) or not v.requires_grad or v.grad_fn is None:
                continue
            if type(v.grad_fn).__name__ in _HISTORY_NODES:
                continue  # not written by the program: the history made before the call
            tangent = torch.ones_like(v)  # (outside the try: a probe that cannot make it cannot run)
            try:
                torch.autograd.backward([v], [tangent], retain_graph=True)
            except RuntimeError as e:
                if EXAMPLE_INPUT_HISTORY_ERROR not in str(e):
                    found.append(e)

    try:
        grad_outputs, _ = _trial(call, flat, None, after_call=through_inputs)
        for chosen in _output_sets(grad_outputs):
            _trial(call, flat, chosen, found, before_backward=_tangents_made)
    except Exception:  # a program the probe cannot run
        return None
    return tuple(found)


def _output_sets(grad_outputs: list[int]) -> list[frozenset[int]]:
    """Each nonempty set of `grad_outputs`; beyond MAX_PROBED_OUTPUTS (2^n backwards), only all of them at once."""
    n = len(grad_outputs)
    masks = range(1, 1 << n) if n <= MAX_PROBED_OUTPUTS else [(1 << n) - 1]
    return [frozenset(p for k, p in enumerate(grad_outputs) if mask >> k & 1) for mask in masks]


def _tangents_made(positions: list[int], roots: list[torch.Tensor]) -> None:
    """Make the probe's tangents once before its backward: where the fakes cannot (`ones_like` of a subclass that
    lacks it), the probe cannot run, and that error is none of eager's backward."""
    for root in roots:
        torch.ones_like(root)


# what a probe runs the program in (a fake mode; for meta copies, nothing), and what makes its copies of the inputs
_Mode = contextlib.AbstractContextManager[object]
_Copies = Callable[[Sequence[object]], tuple[_Mode, list[object]]]


@dataclass(slots=True, kw_only=True)
class _ProbeRun:
    """One run of the program on fresh static fakes, inside its fake mode (`_probe_run`), for backwards through it."""

    outs: list[object]  # the output pytree's leaves
    values: list[object]  # per flat input (FlatInputs.values): its fake (or the value itself)
    grad_outputs: list[int]  # positions in `outs` of the tensor outputs that require grad
    leaves: list[torch.Tensor]  # leaf inputs (and leaves the program made) whose gradient counts
    apart: list[torch.Tensor]  # the `returned` inputs, which the Function takes detached
    bases: list[tuple[torch.Tensor, list[torch.Tensor]]]  # leaves view inputs are views of, with those views


@contextlib.contextmanager
def _probe_run(
    call: Callable[..., object],
    flat: FlatInputs,
    returned: frozenset[int],
    values_at: frozenset[int] = frozenset(),
    copies: _Copies = static_fake_copies,
) -> Iterator[_ProbeRun]:
    """Run the program on fresh static fakes (`returned`: flat inputs the Function takes detached; `values_at`: flat
    inputs whose new values follow the outputs as roots, `probe_eager_backward`; `copies`: meta copies in their place,
    Note [Probing Eager's Backward]); the fake mode and grad mode stay on while the caller runs backwards through it."""
    mode, values = copies(flat.values)
    _histories_before_call(mode, values)
    apart = [v for k, v in enumerate(values) if k in returned and isinstance(v, torch.Tensor)]
    leaves, bases = _graded_inputs(values, apart)
    with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
        state, args, kwargs = unflatten_call(flat, values)
        outs = pytree.tree_leaves(call(state, args, kwargs))
        if values_at:
            outs += [_written_value(v, outs) if k in values_at else None for k, v in enumerate(values)]
        yield _ran(outs, values, leaves, apart, bases)


def _graded_inputs(
    values: Sequence[object], apart: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], list[tuple[torch.Tensor, list[torch.Tensor]]]]:
    """Before a probe's run (`_ProbeRun`): its leaf inputs but `apart`, and the leaves view inputs are views of."""
    leaves = [
        v
        for v in values
        if isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf and not any(v is a for a in apart)
    ]
    # ... and the leaves view inputs are views of (their fakes keep that history), with those views: eager gives
    # such a leaf its gradient outside the program, and first where the program read the view after making the
    # raising node; a view returned as itself does so outside the compiled Function too
    bases: list[tuple[torch.Tensor, list[torch.Tensor]]] = []
    for v in values:
        base = v._base if isinstance(v, torch.Tensor) else None
        if base is None or not base.requires_grad or not base.is_leaf or any(base is w for w in (*leaves, *apart)):
            continue
        found = next((views for b, views in bases if b is base), None)
        if found is None:
            bases.append((base, [cast(torch.Tensor, v)]))
        else:
            found.append(cast(torch.Tensor, v))
    return leaves, bases


def _ran(
    outs: list[object],
    values: list[object],
    leaves: list[torch.Tensor],
    apart: list[torch.Tensor],
    bases: list[tuple[torch.Tensor, list[torch.Tensor]]],
) -> _ProbeRun:
    """A probe's run once the program returned `outs` (`leaves`, `apart`, `bases`: as `_graded_inputs` found them)."""
    leaves = [*leaves, *_leaves_made(values, (*leaves, *apart))]
    grad_outputs = [p for p, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    return _ProbeRun(outs=outs, values=values, grad_outputs=grad_outputs, leaves=leaves, apart=apart, bases=bases)


def _trial(
    call: Callable[..., object],
    flat: FlatInputs,
    chosen: frozenset[int] | None,
    errors: list[RuntimeError] | None = None,
    returned: frozenset[int] = frozenset(),
    before_backward: Callable[[list[int], list[torch.Tensor]], None] | None = None,
    after_call: Callable[[Sequence[object], Sequence[object]], None] | None = None,
    values: frozenset[int] = frozenset(),
    copies: _Copies = static_fake_copies,
) -> tuple[list[int], BackwardEnd | None]:
    """Run the program on fresh static fakes; with `chosen`, backward through those outputs. Returns the positions
    of the tensor outputs that require grad and how the backward ended (None: not run, or a `returned` leaf whose
    gradient is not as the compiled backward gives it). `before_backward(positions, roots)` runs just before the
    backward, with the outputs it takes as roots (and their positions); `after_call(outputs, values)` right after the
    program, with its output pytree's leaves and the fakes of `flat.values` (the caller's writes after the call).
    `values`: as probe_eager_backward's; `copies`: as `_probe_run`'s."""
    with _probe_run(call, flat, returned, values, copies) as run:
        if after_call is not None:
            after_call(run.outs, run.values)
        if chosen is None:
            return run.grad_outputs, None
        return run.grad_outputs, _backward_end(run, chosen, errors, before_backward)


def _backward_end(
    run: _ProbeRun,
    chosen: frozenset[int],
    errors: list[RuntimeError] | None = None,
    before_backward: Callable[[list[int], list[torch.Tensor]], None] | None = None,
) -> BackwardEnd | None:
    """How eager's backward through the outputs `chosen` of `run` ends (`_trial`)."""
    apart = run.apart
    at = _probed_at(run, chosen)
    roots = [cast(torch.Tensor, run.outs[p]) for p in at]
    if not roots:
        return _apart_as_returned(apart, roots, BackwardEnd.COMPLETES)
    if before_backward is not None:
        before_backward(at, roots)
    try:
        torch.autograd.backward(roots, [torch.ones_like(o) for o in roots])
    except RuntimeError as e:
        if EXAMPLE_INPUT_HISTORY_ERROR in str(e):
            return _apart_as_returned(apart, roots, BackwardEnd.COMPLETES)
        if errors is not None:
            errors.append(e)
        if any(_history_unreadable(r) or requires_grad_through_base(r) for r in roots):
            return BackwardEnd.RAISES_AT_ROOT
        graded = any(leaf.grad is not None for leaf in run.leaves) or any(
            base.grad is not None and not any(r is v for r in roots for v in views) for base, views in run.bases
        )
        end = BackwardEnd.RAISES_AFTER_GRADS if graded else BackwardEnd.RAISES
        return _apart_as_returned(apart, roots, end)
    return _apart_as_returned(apart, roots, BackwardEnd.COMPLETES)


def _written_value(v: object, outs: Sequence[object]) -> torch.Tensor | None:
    """`v` (an input's fake after the call) where the program wrote it with grad (a history it made) and it is no
    output itself: a root of its own (`probe_eager_backward`'s `values`)."""
    if not isinstance(v, torch.Tensor) or not v.requires_grad or any(v is o for o in outs):
        return None
    node = grad_fn_or_none(v)
    return v if node is not None and type(node).__name__ not in _HISTORY_NODES else None


def _probed_at(run: _ProbeRun, chosen: frozenset[int]) -> list[int]:
    """The positions among `chosen` of the outputs a probe's backward takes as roots: a non-leaf input returned as it
    came is left out, as its fake's history node is numbered above all (it would run first and end the probe, where
    eager's runs after the program's nodes: Note [Probing Eager's Backward])."""
    given = {id(v) for v in run.values}
    return [
        p
        for p in sorted(chosen)
        if not (id(run.outs[p]) in given and type(cast(torch.Tensor, run.outs[p]).grad_fn).__name__ in _HISTORY_NODES)
    ]


def _leaves_made(values: Sequence[object], known: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The inputs the program made leaves that require grad (`x.requires_grad_()` on an input, or on a view input of a
    base that requires none), other than `known`: eager's engine gives them their gradient as it does the leaves
    passed, so whether one got it before the failing node ran counts too (Note [Probing Eager's Backward])."""
    return [
        v
        for v in values
        if isinstance(v, torch.Tensor)
        and v.requires_grad
        and not grad_fn_raises(v)
        and v.is_leaf
        and not any(v is k for k in known)
    ]


def _history_unreadable(t: torch.Tensor) -> bool:
    """Does reading `t.grad_fn` raise (a view of a multi-output view op whose base was written in place since)?"""
    try:
        _ = t.grad_fn
    except RuntimeError:
        return True
    return False


class _InputHistory(torch.autograd.Function):
    """A non-leaf input's history made before the call: a node numbered below the program's, which raises
    EXAMPLE_INPUT_HISTORY_ERROR when eager's backward reaches it (Note [Probing Eager's Backward])."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> NoReturn:
        raise RuntimeError(EXAMPLE_INPUT_HISTORY_ERROR)


_HISTORY_NODES = ("Error", "_InputHistoryBackward")


def _histories_before_call(mode: _Mode, values: list[object]) -> None:
    """Give each fake in `values` that is a non-leaf requiring grad, no view, sharing no storage with another value
    and laid out as its clone is, a history made now (`_InputHistory`) in place of its fake's Error node, numbered
    above all (Note [Probing Eager's Backward]); likewise the base of views among `values`
    (`_view_histories_before_call`)."""
    keys = [_storage_keys(v) if isinstance(v, torch.Tensor) else [] for v in values]
    for k, v in enumerate(values):
        if not isinstance(v, torch.Tensor) or type(v.grad_fn).__name__ != "Error" or v._is_view():
            continue
        if any(key in other for j, other in enumerate(keys) if j != k for key in keys[k]):
            continue
        fresh = _input_history(mode, v)
        if fresh is not None:
            values[k] = fresh
    _view_histories_before_call(mode, values, keys)


def _input_history(mode: _Mode, v: torch.Tensor) -> torch.Tensor | None:
    """`_InputHistory` applied to `v`, where its result is laid out as `v` (same strides, offset, storage size)."""
    with mode, torch.enable_grad():
        fresh = cast(torch.Tensor, _InputHistory.apply(v))  # type: ignore[no-untyped-call]  # untyped in torch
    if fresh.stride() == v.stride() and all(
        (a.stride(), a.storage_offset(), a.untyped_storage().nbytes())
        == (b.stride(), b.storage_offset(), b.untyped_storage().nbytes())
        for a, b in zip(_dense_leaves(fresh), _dense_leaves(v), strict=True)
    ):
        return fresh
    return None


def _view_histories_before_call(mode: _Mode, values: list[object], keys: Sequence[Sequence[object]]) -> None:
    """For each non-leaf base (history an Error node) of autograd views of the default kind among `values`, where
    every value over its storage is one of those views or the base itself: the base with a history made now
    (`_InputHistory`), and each of those values taken again from it (as_strided() at its layout, with grad), so
    that eager's backward through a view input reaches the base's history after the program's nodes, as eager's
    does (Note [Probing Eager's Backward]). Left as they are where a view taken again is not laid out as before."""
    bases: dict[int, torch.Tensor] = {}
    for v in values:
        base = v._base if isinstance(v, torch.Tensor) else None
        if base is not None and type(base.grad_fn).__name__ == "Error":
            bases[id(base)] = base
    for base in bases.values():
        key = _storage_keys(base)
        shared = [k for k, other in enumerate(keys) if any(part in other for part in key)]
        members = [cast(torch.Tensor, values[k]) for k in shared]
        if not all(m is base or (m._base is base and is_plain_autograd_view(m)) for m in members):
            continue
        fresh = _input_history(mode, base)
        taken = None if fresh is None else _views_again(mode, fresh, base, members)
        if taken is not None:
            for k, t in zip(shared, taken, strict=True):
                values[k] = t


def _views_again(
    mode: _Mode, fresh: torch.Tensor, base: torch.Tensor, members: Sequence[torch.Tensor]
) -> list[torch.Tensor] | None:
    """`members` (`base` or views of it) taken again from `fresh` (as_strided() with grad), or None where one is not
    laid out as before (a subclass whose as_strided() lays out its inner tensors otherwise, or has none)."""
    taken = []
    try:
        with mode, torch.enable_grad():
            for m in members:
                taken.append(fresh if m is base else fresh.as_strided(m.shape, m.stride(), m.storage_offset()))
    except Exception:  # a subclass without as_strided(): its views keep the Error node
        return None
    for t, m in zip(taken, members, strict=True):
        layouts = [[(d.shape, d.stride(), d.storage_offset()) for d in _dense_leaves(x)] for x in (t, m)]
        if layouts[0] != layouts[1]:
            return None
    return taken


def _dense_leaves(t: torch.Tensor) -> list[torch.Tensor]:
    return list(flatten_subclass(t, "probe")[1]) if is_traceable_subclass(t) else [t]


def _storage_keys(t: torch.Tensor) -> list[object]:
    return [storage_key(leaf) for leaf in _dense_leaves(t)]


@contextlib.contextmanager
def eager_run(
    call: Callable[..., object], flat: FlatInputs, before: Callable[[list[object]], None] | None = None
) -> Iterator[tuple[list[object], list[object]]]:
    """The program run with grad on fresh static fakes of `flat.values` (the RNG state restored after): its output
    pytree's leaves and the fakes, for a block run inside the fakes' mode. `before` sees the fakes before the call."""
    mode, values = static_fake_copies(flat.values)
    if before is not None:
        before(values)
    with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
        state, args, kwargs = unflatten_call(flat, values)
        yield pytree.tree_leaves(call(state, args, kwargs)), values


def reaches_output_node(
    call: Callable[..., object], flat: FlatInputs, starts: Sequence[int], targets: Sequence[int]
) -> bool | None:
    """Whether, in eager's autograd graph on static fakes, the node of an output at a position in `starts` (among
    the output pytree's leaves) reaches the grad_fn of one at a position in `targets` (Note [set_ Under
    Grad]). None where the program does not run on static fakes."""
    try:
        with eager_run(call, flat) as (outs, _):
            wanted = {
                node for p in targets if isinstance(o := outs[p], torch.Tensor) and (node := o.grad_fn) is not None
            }
            start_nodes = [o.grad_fn for p in starts if isinstance(o := outs[p], torch.Tensor)]
    except Exception:  # a program the probe cannot run
        return None
    return any(node in wanted for node in autograd_nodes(start_nodes))


def eager_accumulator_sizes(
    call: Callable[..., object], flat: FlatInputs, leaves: Sequence[int]
) -> dict[int, frozenset[tuple[int, ...]]] | None:
    """Of the leaf inputs at positions `leaves` in `flat.values`: the sizes their gradient accumulators that the
    outputs' graphs reach in eager, run on static fakes, recorded (none reached: empty), so where results die as in
    eager (Note [Gradient Accumulators Of Leaves]). None where the program does not run on static fakes."""
    try:
        with eager_run(call, flat) as (outs, values):
            sizes = _accumulator_sizes([o.grad_fn for o in outs if isinstance(o, torch.Tensor)])
    except Exception:  # a program the probe cannot run
        return None
    return {i: frozenset(sizes.get(id(values[i]), ())) for i in leaves}


def old_accumulators_dead(call: Callable[..., object], flat: FlatInputs, leaves: Sequence[int]) -> frozenset[int]:
    """Of the leaf inputs at positions `leaves` in `flat.values`, each read with grad before and after its last set_()
    under no_grad: those whose accumulators from before that set_() no graph reaches in eager, run on static fakes
    (the outputs', and the inputs' as the program leaves them), so where results die as in eager: every node a read
    before made died with its result (`x.data.copy_(x)`, a discarded `x.sin()`), and the leaf's one live accumulator
    is the one the reads after made (Note [Gradient Accumulators Of Leaves]). Empty where the program does not run on
    static fakes."""
    dead: set[int] = set()
    try:
        with eager_run(call, flat) as (outs, values):
            tensors = [t for t in (*outs, *values) if isinstance(t, torch.Tensor)]
            nodes = list(autograd_nodes([t.grad_fn for t in tensors]))
            for i in leaves:
                leaf = cast(torch.Tensor, values[i])
                if not leaf.requires_grad or leaf.grad_fn is not None:
                    continue
                own = (wrapper_grad_accumulator if is_traceable_subclass(leaf) else get_gradient_edge)(leaf).node
                if not any(getattr(n, "variable", None) is leaf and n is not own for n in nodes):
                    dead.add(i)
    except Exception:  # a program the probe cannot run
        return frozenset()
    return frozenset(dead)


def gain_unobserved(call: Callable[..., object], flat: FlatInputs, gained: Sequence[int]) -> bool:
    """Does eager's program, run with grad on, on static fakes of the inputs, record the same autograd graphs (of its
    outputs, and of the inputs as it leaves them) when the inputs at positions `gained` in `flat.values`, which it
    makes require grad after computing from them, require grad from the start, as the compiled call has them? Then
    what it computed from them before has no history anywhere the caller can see, in eager as in the compiled call
    (Note [Grad Mode And Autograd Reads]). False where the program does not run on static fakes. Runs outside the
    modes of a trace in progress."""
    with outside_current_modes():
        as_called = _autograd_picture(call, flat, ())
        return as_called is not None and as_called == _autograd_picture(call, flat, gained)


def gain_last_unobserved(call: Callable[..., object], flat: FlatInputs, gained: Sequence[int]) -> bool:
    """As gain_unobserved, for inputs at `gained` that the program makes require grad and then reads with grad (no
    write) and that gain the flag only once it returned, as the compiled call has them (Analysis.gains_last): then
    nothing it computed from them after the flag has history anywhere the caller can see."""
    with outside_current_modes():
        as_called = _autograd_picture(call, flat, ())
        return as_called is not None and as_called == _autograd_picture(call, flat, (), late=gained)


class _FlagsHeldBack(TorchFunctionMode):
    """Skips the program's requires_grad_() and `.requires_grad = True` on the tensors `held` (their id()s): a run
    in which they gain the flag only once the program returned."""

    def __init__(self, held: set[int]) -> None:
        super().__init__()
        self.held = held

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        on, setter = turns_flag_on(func, args, kwargs)
        if on and args and id(args[0]) in self.held:
            return None if setter else args[0]
        return func(*args, **kwargs)


def _autograd_picture(
    call: Callable[..., object], flat: FlatInputs, early: Sequence[int], late: Sequence[int] = ()
) -> list[object] | None:
    """`_autograd_shape` of each output and each input as left, of an eager run on static fakes whose inputs at
    positions `early` are made to require grad first, and those at positions `late` only once it returned (the
    program's own calls turning their flag on skipped); None where the run fails, or reading its histories does."""
    try:
        mode, values = static_fake_copies(flat.values)
        held = {id(values[k]) for k in late}
        with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
            for k in early:
                cast(torch.Tensor, values[k]).requires_grad_()
            state, args, kwargs = unflatten_call(flat, values)
            with _FlagsHeldBack(held) if held else contextlib.nullcontext():
                outs = pytree.tree_leaves(call(state, args, kwargs))
            for k in late:
                cast(torch.Tensor, values[k]).requires_grad_()
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        # (reading a view's grad_fn after its base was written regenerates it; a fake replays the view's function
        # over the base, which gives no node where the base requires no grad: autograd's "new_fn INTERNAL ASSERT",
        # where eager's plain tensor gets an AsStridedBackward0)
        return [_autograd_shape(t, tensors) if isinstance(t, torch.Tensor) else None for t in [*outs, *tensors]]
    except Exception:  # a program the probe cannot run, or whose histories it cannot read
        return None


class _NewLeafFlags(TorchFunctionMode):
    """Counts the program's calls turning a tensor's requires_grad on, in call order; skips those at the places in
    `held` (Note [Training Without A Function]). With `logging`, notes what each op shows of autograd (`log`) and the
    places of the calls that would make a new leaf (`candidates`: on a tensor no input, requiring no grad, or one a
    candidate made a leaf)."""

    def __init__(self, held: frozenset[int], logging: bool = False) -> None:
        super().__init__()
        self.held = held
        self.logging = logging
        self.calls = 0
        self.log: list[object] = []
        self.candidates: set[int] = set()
        # (held weakly, so that a leaf nothing of the program's holds once it returned is dead to `dead_entries`;
        # identity, not id(), tells them apart)
        self.made: list[weakref.ref[torch.Tensor]] = []
        self.flagged: list[weakref.ref[torch.Tensor]] = []  # what every call turning a flag on was made on
        self.inputs: list[torch.Tensor] = []
        self.fake_mode: object = None  # the probe's fake mode: on top of the dispatch stack in the program's own calls
        # leaves made of views requiring grad through their base, and whether anything took one after: the same flag
        # before and after, where only the leaf's own accumulator tells the runs apart; so is any view made a leaf,
        # whose base may come to require grad after (its requires_grad_() then: the view reports the flag either way)
        self.quiet: list[weakref.ref[torch.Tensor]] = []
        # per entry of `log`: whether the op took one of `quiet`, and its results where all are tensors (weakly
        # held: `dead_entries`); a flag call's entry has neither
        self.touches: list[bool] = []
        self.results: list[tuple[weakref.ref[torch.Tensor], ...]] = []

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if makes_leaf_itself(func, kwargs):
            return self._factory(func, types, args, kwargs)
        on, setter = turns_flag_on(func, args, kwargs)
        if on:
            place, self.calls = self.calls, self.calls + 1
            leaf = self.logging and isinstance(args[0], torch.Tensor) and self._makes_leaf(args[0])
            if isinstance(args[0], torch.Tensor):
                self.flagged.append(weakref.ref(args[0]))
            if leaf:
                self.candidates.add(place)
                self.made.append(weakref.ref(args[0]))
                if args[0].requires_grad or args[0]._is_view():  # (through its base: see `quiet`)
                    self.quiet.append(weakref.ref(args[0]))
                self._note(("flag", place), False, None)
                if place in self.held:
                    return _held_back(args, setter)
                return func(*args, **kwargs)
            if place in self.held:
                return _held_back(args, setter)
        # (the program's own calls, not those of the fake mode's code run inside an op, which its cache skips)
        if not self.logging or innermost_dispatch_mode() is not self.fake_mode:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        # (an attribute read, `t.shape`, reads no flag: a flag read's answer is what it returns; nor does a read of
        # the storage or the layout, which records no history)
        computes = torch.is_grad_enabled() and name != "__get__" and name not in _LAYOUT_READS
        leaves = pytree.tree_leaves((args, kwargs))
        read = pytree.tree_leaves(flag_read_args(func, args, kwargs))
        flags = tuple(t.requires_grad for t in read if isinstance(t, torch.Tensor)) if computes else ()
        # (with grad off, an op records no history: a quiet leaf shows its own accumulator to none)
        touches = torch.is_grad_enabled() and any(t is q() for t in leaves for q in self.quiet)
        out = func(*args, **kwargs)
        if _inference_views(out):  # (a view of an inference tensor outside the block: one too, with no history)
            flags = ()
        shown = _shown(out, torch.is_grad_enabled())
        owner = getattr(getattr(func, "__self__", None), "__name__", None)
        if owner == "grad_fn" and isinstance(args[0], torch.Tensor):  # (the history read, not just its last node)
            shown = [_autograd_shape(args[0], self.inputs)]
        # (`x.data = y` changes x alone, which `dead_entries` takes as its result)
        self._note((name, computes, flags, shown), touches, args[0] if owner == "data" and name == "__set__" else out)
        return out

    def _factory(self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A factory's requires_grad=True, the factory's result given requires_grad_() (`makes_leaf_itself`): a flag
        call held back as that form's is; made, the call goes on as called (one call of the program's, as eager's
        record counts it), or, logging, as the two calls of that form."""
        if self.logging:
            made = self.__torch_function__(func, types, args, {**kwargs, "requires_grad": False})
            return self.__torch_function__(torch.Tensor.requires_grad_, types, (made,), {})
        place, self.calls = self.calls, self.calls + 1
        return func(*args, **{**kwargs, "requires_grad": place not in self.held})

    def _note(self, entry: object, touches: bool, out: object) -> None:
        results = pytree.tree_leaves(out)
        self.log.append(entry)
        self.touches.append(touches)
        tensors = results and all(isinstance(r, torch.Tensor) for r in results)
        self.results.append(tuple(weakref.ref(cast(torch.Tensor, r)) for r in results) if tensors else ())

    def dead_entries(self) -> frozenset[int]:
        """The entries of `log` of ops whose results, all tensors, nothing holds once the program returned (call it
        then, with its outputs and inputs held): no output, input, view base, autograd node or Python object the caller
        can reach takes them, so what they show of autograd the caller cannot see (Note [Training Without A
        Function])."""
        gc.collect()
        return frozenset(k for k, refs in enumerate(self.results) if refs and all(_shows_none(r()) for r in refs))

    def _makes_leaf(self, t: torch.Tensor) -> bool:
        """(a view requiring grad only through its base, never flagged before, gets a flag of its own: a new leaf)"""
        if any(t is made() for made in self.made):
            return True
        if any(t is i for i in self.inputs) or any(t is f() for f in self.flagged):
            return False
        return not t.requires_grad or requires_grad_through_base(t)


_LAYOUT_READS = frozenset(
    ("untyped_storage", "size", "stride", "dim", "numel", "storage_offset", "data_ptr", "is_contiguous", "element_size")
)


def _inference_views(out: object) -> bool:
    """Are an op's results, run outside inference_mode, all inference tensors: views of one, which eager makes
    inference tensors requiring no grad and with no history whatever the flag of what they view (a new leaf made inside
    the block among them)?"""
    results = pytree.tree_leaves(out)
    return (
        bool(results)
        and not torch.is_inference_mode_enabled()
        and all(isinstance(r, torch.Tensor) and r.is_inference() for r in results)
    )


def _shows_none(t: torch.Tensor | None) -> bool:
    """Is an op's result dead (`_NewLeafFlags.dead_entries`), or a tensor of a dtype autograd records no history of
    (integer or bool: `max()`'s indices) that is no view? Such a tensor shows its values alone, which no flag changes,
    and reaches no tensor of the program's (no `._base`, no history)."""
    return t is None or not (t.is_floating_point() or t.is_complex() or t._is_view())


def _held_back(args: tuple[Any, ...], setter: bool) -> object:
    """What a held-back flag call returns; the modes below, which it never reaches, are told that the program made
    it (`held_call`: the functional run counts it among the program's calls, SwapRecord.call_seqs)."""
    stack = torch.overrides._get_current_function_mode_stack()  # type: ignore[no-untyped-call]  # untyped in torch
    for mode in stack:
        note = getattr(mode, "held_call", None)
        if callable(note):
            note()
    return None if setter else args[0]


def _shown(out: object, grad: bool) -> object:
    """What an op's result shows of autograd: requires_grad of each tensor made with grad on (one made with grad off,
    the leaf itself written in place, or a view of it, shows it only where a later op uses it), a flag read's answer,
    a node's type."""

    def one(v: object) -> object:
        if isinstance(v, torch.Tensor):
            return ("tensor", v.requires_grad if grad else None)
        if v is None or isinstance(v, bool | int | float | str):
            return v
        return type(v).__name__

    return [one(v) for v in pytree.tree_leaves(out)]


def holding_back_flags(call: Callable[..., object], hold: NewLeafHold) -> Callable[..., object]:
    """`call` with the program's requires_grad-on calls at the places `hold` decided skipped; as called while it is
    undecided, where the analysis run holds them back itself (Note [Training Without A Function])."""

    def run(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        if not hold.held:
            return call(state, args, kwargs)
        with _NewLeafFlags(hold.held):
            return call(state, args, kwargs)

    return run


def _leaf_run(
    wrap: Callable[[Callable[..., object]], Callable[..., object]],
    call: Callable[..., object],
    flat: FlatInputs,
    held: frozenset[int],
) -> _LeafRun | None:
    """One eager run of the program on static fakes, its flag calls at `held` skipped, under the caller's grad mode
    (`_LeafRun`); None where it raises."""
    flags = _NewLeafFlags(held, logging=True)

    def logged(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        with flags:
            return call(state, args, kwargs)

    # (the objects older than the run are frozen: `dead_entries`' collection looks at the run's own alone, where a full
    # one would walk every object of the process, most of a compile's time in a large one)
    gc.freeze()
    try:
        mode, values = static_fake_copies(flat.values)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        flags.inputs = [*tensors, *(d for t in tensors for d in _dense_leaves(t))]
        flags.fake_mode = mode
        with torch.random.fork_rng(devices=[]), mode:
            state, args, kwargs = unflatten_call(flat, values)
            outs = pytree.tree_leaves(wrap(logged)(state, args, kwargs))
        shapes = [_autograd_shape(t, tensors) if isinstance(t, torch.Tensor) else None for t in [*outs, *tensors]]
        dead = flags.dead_entries()  # (outputs and inputs held here, as the caller holds them)
    except Exception:  # a program the probe cannot run, or whose histories it cannot read
        return None
    finally:
        gc.unfreeze()
    made = frozenset(k for k, o in enumerate(outs) if any(o is m() for m in flags.made))
    quiet = frozenset(k for k, o in enumerate(outs) if any(o is q() for q in flags.quiet))
    based = frozenset(
        k
        for k, o in enumerate(outs)
        if isinstance(o, torch.Tensor)
        and (base := o._base) is not None
        and any(base is m() for m in flags.made)
        and not any(base is p for p in outs)
    )
    return _LeafRun(flags, shapes, made, quiet, dead, based)


class _LeafRun(NamedTuple):
    """What `_leaf_run` saw: the mode that logged it, the `_autograd_shape` of each output and each input as left,
    the positions among the outputs of the tensors a flag call made (or would make) new leaves, and of those among
    them in `quiet`, the entries of its log whose results were dead once it returned (`_NewLeafFlags.dead_entries`),
    and the positions of the outputs that are views of such a leaf, which no output returns as itself."""

    flags: _NewLeafFlags
    shapes: list[object]
    made: frozenset[int]
    quiet: frozenset[int]
    dead: frozenset[int]
    based: frozenset[int]


# An output that is a new leaf, as eager's run as called leaves it and as the run with the flag call skipped does:
# a leaf requiring grad through no base, with no history, against one requiring none (view or not, in both alike).
_FLAGGED_LEAF = (True, False, None)
_UNFLAGGED = (False, False, None)
_THROUGH_BASE = (True, True, None)  # (a view made under no_grad of a base requiring grad, flagged or not: `quiet`)


def unobserved_new_leaves(
    wrap: Callable[[Callable[..., object]], Callable[..., object]],
    call: Callable[..., object],
    flat: FlatInputs,
    held: frozenset[int],
    calls: int | None,
) -> ShownLeaves | None:
    """Does skipping the program's calls at the places `held` (in call order, among its calls turning a flag on),
    each making a new autograd leaf, change nothing eager's run shows but the flag of outputs that are those leaves
    themselves, or views of them taken before the flag that read it through their base (Note [Training Without A
    Function])? The positions of those outputs among the program's (its pytree leaves; empty: nothing changes); None
    where one is observed otherwise, one of them makes no new leaf in eager, or eager's run makes other than `calls`
    calls turning a flag on (None: not asked; an analysis run below the caller's modes also sees the calls they make).
    `call`: the program over the flat inputs; `wrap`: what the driver puts around it (its ambient modes). Runs under
    the grad mode it is called in, outside the modes of a trace in progress."""
    with outside_current_modes():
        as_called = _leaf_run(wrap, call, flat, frozenset())
        if as_called is None or not held <= as_called.flags.candidates:
            return None
        if calls is not None and as_called.flags.calls != calls:
            return None
        skipped = _leaf_run(wrap, call, flat, held)
    if skipped is None or len(skipped.flags.log) != len(as_called.flags.log):
        return None
    # (an op whose results are dead in both runs once the program returned shows the caller nothing)
    dead = as_called.dead & skipped.dead
    live = [k for k in range(len(as_called.flags.log)) if k not in dead]
    if any(as_called.flags.touches[k] or skipped.flags.log[k] != as_called.flags.log[k] for k in live):
        return None
    shapes, made, quiet, skipped_shapes = as_called.shapes, as_called.made, as_called.quiet, skipped.shapes
    differ = frozenset(k for k, (a, b) in enumerate(zip(shapes, skipped_shapes, strict=True)) if a != b)
    # (a quiet leaf returned: the same flag in both runs, and in eager's as called an accumulator of its own, which the
    # flag given once it is rebuilt, as the program gave it, makes too)
    through_base = frozenset(k for k in quiet - differ if isinstance(s := shapes[k], tuple) and s[:3] == _THROUGH_BASE)
    # (one whose history raises in both runs, a view made under no_grad whose base was written since with grad: any
    # use of it with grad raises as its grad_fn read does, so its own accumulator is out of the caller's reach)
    raising = frozenset(k for k in quiet - differ if _history_raises(shapes[k]))
    if not quiet <= differ | through_base | raising:
        return None
    bases: set[int] = set()
    for k in differ:
        mine, theirs = cast(tuple[object, ...], shapes[k]), cast(tuple[object, ...], skipped_shapes[k])
        if k in as_called.based - made and mine[:3] in (_FLAGGED_LEAF, _THROUGH_BASE) and theirs[:3] == _UNFLAGGED:
            bases.add(k)  # (a view of the leaf, with no history, which reads its flag through its base)
            continue
        # (a view made under no_grad reads as requiring grad through its base once flagged, whatever its base's)
        flagged = (_FLAGGED_LEAF, _THROUGH_BASE) if k in quiet else (_FLAGGED_LEAF,)
        if k not in made or mine[:3] not in flagged or theirs[:3] != _UNFLAGGED or mine[3] != theirs[3]:
            return None
    return ShownLeaves((differ | through_base) - bases, frozenset(bases))


def _history_raises(shape: object) -> bool:
    """Does an `_autograd_shape` say that reading the tensor's grad_fn raises?"""
    history = shape[2] if isinstance(shape, tuple) else None
    return isinstance(history, tuple) and bool(history) and history[0] == "raises"


def _accumulator_sizes(starts: Sequence[object]) -> dict[int, set[tuple[int, ...]]]:
    """id() of each leaf whose AccumulateGrad the nodes `starts` reach -> the sizes those accumulators recorded."""
    found: dict[int, set[tuple[int, ...]]] = {}
    for node in autograd_nodes(starts):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            meta = getattr(node, "_input_metadata", ())
            if meta:
                found.setdefault(id(variable), set()).add(tuple(int(d) for d in meta[0].shape))
    return found


def _apart_as_returned(
    apart: Sequence[torch.Tensor], roots: Sequence[torch.Tensor], end: BackwardEnd
) -> BackwardEnd | None:
    """`end`, where each leaf given to the Function detached got a gradient exactly when it is itself a root, as the
    compiled backward gives it (Note [Backward Errors Are Deferred]); else None. (A view of a leaf given detached
    hands its leaf the gradient by its own node, outside the program in eager as in the compiled call.)"""
    for leaf in apart:
        if leaf.is_leaf and (leaf.grad is not None) != any(r is leaf for r in roots):
            return None
    return end


def refuse_layout_changed_behind_autograd(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    error: RuntimeError | None,
) -> None:
    """Refuse a program whose backward's size checks ours would not repeat as eager's do (Note [Probing Eager's
    Backward]). `error`: the traced backward's own failure (None: it ran)."""
    if error is not None and SHAPE_CHECK_ERROR not in str(error):
        return
    counted: set[int] | None = None  # the output positions whose backwards count (None: all)
    if error is None:
        # a write or in-place view op under grad before `.data =`: autograd's nodes keep what it made; an in-place
        # view op with grad after a set_() under no_grad onto the input's own storage; or a set_() under no_grad of
        # an input that is the `._base` of another input requiring grad, whose history a read with grad rebuilds
        # over the base's new layout (Note [Probing Eager's Backward])
        changed = [
            d
            for d, m in enumerate(analysis.mutations)
            if m.autograd_visible and (m.swapped_by_data or (m.swapped and not (m.set_under_grad or m.storage_changed)))
        ]
        bases = _bases_of_inputs_requiring_grad(flat)
        set_bases = [
            d
            for d, m in enumerate(analysis.mutations)
            if m.swapped and not m.set_under_grad and id(flat.values[layout.leaves[d].owner]) in bases
        ]
        # only backwards through outputs the graph computes count there: an input returned as itself keeps eager's
        # own history (and error)
        counted = (
            {k for k, o in enumerate(analysis.outputs) if o.kind is not OutputKind.IS_INPUT}
            if set_bases and not changed
            else None
        )
        changed = changed or set_bases
    else:
        # a leaf runs as a clone in the joint trace, and eager remakes a view's node after a write: another
        # non-leaf's node fails in the trace as in eager
        changed = [
            d
            for d, m in enumerate(analysis.mutations)
            if (m.swapped_by_data or m.metadata_hidden) and _leaf_or_view(flat.values[layout.leaves[d].owner])
        ]
    if not changed:
        return
    if error is None:
        ends = probe_eager_backward(call, flat)
        if not ends or all(end is BackwardEnd.COMPLETES for s, end in ends.items() if counted is None or s <= counted):
            return
    ours = "runs where eager's fails" if error is None else f"fails ({error}) where eager's may run"
    paths = ", ".join(layout.leaves[d].path for d in changed)
    raise UnsupportedError(
        f"{paths}: the program changes the size of a tensor that requires grad behind autograd (`.data =` with "
        "a tensor of another shape, set_() or an in-place view op under torch.no_grad()), and eager's backward checks "
        f"gradients against the sizes autograd recorded before or after that change: the compiled backward {ours} "
        "(Note [Probing Eager's Backward]); not supported in training. Assign "
        "`.data` a tensor of the same shape, or use out-of-place view ops (x = x.unsqueeze(-1))"
    ) from error


def refuse_unreduced_assigned_gradients(
    flat: FlatInputs, analysis: Analysis, reached: Sequence[int], error: RuntimeError
) -> None:
    """Note [Gradient Accumulators Of Leaves]: the traced backward checks a subclass leaf's gradients
    against its old size (the leaf runs as a clone there), where eager checks each against the new size. Refuse
    where the traced backward failed such a check (eager's may run: `x.data = y; return x.sum()`). `reached`: the
    tensor inputs some diff output's gradient reaches in the trace (the others get none from the Function)."""
    if SHAPE_CHECK_ERROR not in str(error) and BROADCAST_ERROR not in str(error):
        return
    paths = [
        flat.leaves[flat.tensor_indices[i]].path
        for i, size in enumerate(analysis.accumulator_sizes)
        if size is not None and i in reached and _is_leaf(flat.values[flat.tensor_indices[i]])
    ]
    if paths:
        raise UnsupportedError(
            f"{', '.join(paths)}: the program assigns `.data` of this tensor subclass leaf a tensor of another "
            "size, then reads it with grad: eager checks each gradient reaching it against its new size, the "
            f"compiled backward against the size it came with first, and it fails ({error}) where eager's may run "
            "(Note [Gradient Accumulators Of Leaves]); not supported in training. Assign `.data` a tensor "
            "of the same shape, or read a clone"
        ) from error


def _is_leaf(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.is_leaf


def _bases_of_inputs_requiring_grad(flat: FlatInputs) -> set[int]:
    """ids of the input tensors that are the `._base` of another input that requires grad."""
    inputs = {id(v) for v in flat.values if isinstance(v, torch.Tensor)}
    return {
        id(v._base)
        for v in flat.values
        if isinstance(v, torch.Tensor) and v.requires_grad and v._base is not None and id(v._base) in inputs
    }


def _leaf_or_view(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad and (value.is_leaf or value._is_view())


@dataclass(frozen=True, slots=True, kw_only=True)
class TangentPatterns:
    """How the probed backwards show in the compiled Function (Note [Probing Eager's Backward])."""

    # per set of diff positions given a tangent by a backward through some outputs: how eager's backward through
    # those outputs ends (None: sets of outputs giving the same positions end differently in eager)
    ends: Mapping[frozenset[int], BackwardEnd | None]
    # the positions a backward through every output gives (but those whose history raises when read, which no
    # backward through them reaches: BackwardEnd.RAISES_AT_ROOT)
    full: frozenset[int]
    # the outputs that require grad and are, or are regenerated from, a leaf input that requires grad: its
    # AccumulateGrad runs outside the Function
    leaf_bypass: frozenset[int]


def tangent_patterns(
    analysis: Analysis,
    layout: DenseLayout,
    flat: FlatInputs,
    updates: Sequence[InputUpdate],
    num_bases: int,
    wrapper_updates: Sequence[int],
    roots: Sequence[tuple[int, ...]],
    diff: Sequence[int],
    ends: Mapping[frozenset[int], BackwardEnd],
    returned: frozenset[int] = frozenset(),
) -> TangentPatterns | None:
    """The diff positions (Function outputs given a tangent) of each probed set of outputs (and of inputs' new
    values: probe_eager_backward's `values`); None where an output's path to the Function is not modelled here.
    `roots`: the intermediate subclass roots' bases, in their order among the forward outputs
    (runtime.steps.training_roots). An output regenerated from an input is taken to reach
    every new value of that input the epilogue writes with grad: where it reaches fewer, the set given at run time
    matches none probed, and is refused then; one rebuilt through a view taken under no_grad reaches nothing
    (`cut_by_no_grad`). `returned`: tensor input positions of leaves given to the Function
    detached, whose outputs reach nothing in it (Note [Backward Errors Are Deferred])."""
    n_fresh = sum(
        1
        for info in analysis.outputs
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
    )
    reach = _FunctionReach(
        analysis=analysis,
        layout=layout,
        flat=flat,
        updates=updates,
        wrapper_updates=wrapper_updates,
        roots=roots,
        returned=returned,
        n_fresh=n_fresh,
        wrappers_at=len(updates) + n_fresh + num_bases,
    )
    fresh_rank, leaf_inputs = reach.fresh_rank, reach.leaf_inputs
    position = {d: p for p, d in enumerate(diff)}
    for o, info in enumerate(analysis.outputs):  # fresh outputs are numbered in output order
        if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves):
            fresh_rank.setdefault(o, len(fresh_rank))
    patterns: dict[frozenset[int], BackwardEnd | None] = {}
    per_output: dict[int, frozenset[int]] = {}
    bypass: set[int] = set()
    # the Function outputs that only an output set_() under grad reads: its fresh value, behind its holder
    own = {len(updates) + rank for o, rank in fresh_rank.items() if analysis.outputs[o].set_under_grad}
    set_reach: dict[int, set[int] | None] = {}
    for chosen, end in ends.items():
        if end is BackwardEnd.RAISES_AT_ROOT:
            continue  # no tangent reaches the Function: that backward says nothing of a pattern's
        shared = False
        for o in chosen:
            if o < len(analysis.outputs) and analysis.outputs[o].set_under_grad:
                if o not in set_reach:
                    set_reach[o] = reach.of_output(o)
                found = set_reach[o]
                if found is None:
                    return None
                shared |= not found <= own
        if shared:
            # an output set_() under grad onto another tensor's storage: the set would map to that storage's
            # tangent, which a backward without eager's set_ node gives too (Note [Probing Eager's Backward])
            continue
        pattern: set[int] = set()
        for o in chosen:
            if o not in per_output:
                seen = len(leaf_inputs)
                reached = reach.of_output(o)
                if reached is None:
                    return None
                if len(leaf_inputs) > seen:
                    bypass.add(o)
                per_output[o] = frozenset(position[d] for d in reached if d in position)
            pattern |= per_output[o]
        key = frozenset(pattern)
        patterns[key] = end if patterns.get(key, end) is end else None
    return TangentPatterns(ends=patterns, full=frozenset().union(*per_output.values()), leaf_bypass=frozenset(bypass))


def cut_by_no_grad(replay: Replay) -> bool:
    """Whether a view op of `replay`'s chain was taken under no_grad: that view has no history, so no gradient passes
    from the output to the chain's source (nor from what a caller computes from it). Not a stale view's, which the
    runtime may rebuild otherwise."""
    return not replay.stale_view and any(not step.grad_enabled for step in replay.steps)


@dataclass(frozen=True, slots=True, kw_only=True)
class _FunctionReach:
    """Which forward outputs of the compiled Function each program output reaches (tangent_patterns' arguments)."""

    analysis: Analysis
    layout: DenseLayout
    flat: FlatInputs
    updates: Sequence[InputUpdate]
    wrapper_updates: Sequence[int]
    roots: Sequence[tuple[int, ...]]
    returned: frozenset[int]
    n_fresh: int  # fresh outputs (each one forward output)
    wrappers_at: int  # the forward-output position of the first wrapper update
    fresh_rank: dict[int, int] = field(default_factory=dict)  # per fresh output: its rank among them
    leaf_inputs: list[int] = field(default_factory=list)  # leaf inputs reached, once per path

    def of_input(self, i: int) -> set[int] | None:
        flat, layout, updates, wrappers_at = self.flat, self.layout, self.updates, self.wrappers_at
        if i in self.returned:
            return None  # reached otherwise than as the output it is: not modelled
        real = flat.values[flat.tensor_indices[i]]
        # (a leaf the program makes require grad, `x.requires_grad_()`, has its AccumulateGrad outside too)
        made = self.analysis.requires_grad_set[i]
        if isinstance(real, torch.Tensor) and (real.requires_grad or made) and real.is_leaf:
            self.leaf_inputs.append(i)
        # the same object passed at several positions: the epilogue writes it once per position
        same = [j for j, k in enumerate(flat.tensor_indices) if flat.values[k] is real]
        found = {wrappers_at + k for k, w in enumerate(self.wrapper_updates) if w in same}
        own = {leaf for j in same for leaf in layout.leaves_of_input[j]}
        # a member apart in autograd that gains history by a write (its FINAL copied in with grad, after the BASE
        # copy) had none through the base, which its new value does not reach (LeafMutation.history_of_its_own)
        apart = any(self.analysis.mutations[leaf].history_of_its_own for leaf in own)
        for k, u in enumerate(updates):
            if u.kind is UpdateKind.BASE:
                item = layout.graph_inputs[u.target]
                if not apart and isinstance(item, AliasGroupRef) and own & set(layout.groups[item.group].members):
                    found.add(k)
            elif u.target in own and not epilogue_write_hidden(self.analysis.mutations[u.target], u.kind):
                found.add(k)
        return found

    def of_output(self, o: int) -> set[int] | None:
        analysis, flat, layout, updates = self.analysis, self.flat, self.layout, self.updates
        n_fresh, wrappers_at, wrapper_updates = self.n_fresh, self.wrappers_at, self.wrapper_updates
        if o >= len(analysis.outputs):  # an input's new value probed as a root (probe_eager_backward's `values`)
            return self.of_input(flat.tensor_indices.index(InputIndex(o - len(analysis.outputs))))
        info = analysis.outputs[o]
        if info.kind is OutputKind.SAME_AS:
            assert info.input_index is not None
            return self.of_output(info.input_index)
        if info.kind is OutputKind.IS_INPUT:
            assert info.input_index is not None
            i = flat.tensor_indices.index(info.input_index)
            return set() if i in self.returned else self.of_input(i)
        if info.kind is not OutputKind.TENSOR:
            return None
        r = info.replay
        if r is not None:  # the view replayed by the epilogue from its source (regenerate._replay_source)
            if r.then_set:
                return None
            if cut_by_no_grad(r):
                return set()
            if r.source is ReplaySource.WRAPPER:
                return {wrappers_at + len(wrapper_updates) + list(self.roots).index(r.root_bases)}
            if r.source is ReplaySource.OUTPUT:
                return self.of_output(r.index)
            if r.source is ReplaySource.BASE:
                return {len(updates) + n_fresh + r.index}
            if r.source is ReplaySource.INPUT:
                return self.of_input(flat.tensor_indices.index(InputIndex(r.index)))
            return None
        if all(leaf.source is LeafSource.GRAPH for leaf in info.leaves):
            return {len(updates) + self.fresh_rank[o]}
        found: set[int] = set()
        for leaf in info.leaves:
            if leaf.source is LeafSource.GRAPH:
                return None
            reached = (
                {len(updates) + n_fresh + leaf.index}
                if leaf.source is LeafSource.INTERMEDIATE_ALIAS
                else self.of_input(flat.tensor_indices.index(layout.leaves[leaf.index].owner))
            )
            if reached is None:
                return None
            found |= reached
        return found


# Note [Training Without A Function]
# With the eager backend the compiled forward is the traced aten graph, run by Python; where running that graph with
# grad on records the very autograd graph eager's program records, autograd itself is the compiled backward: its C++
# nodes, eager's own grad_fns on the outputs, double backward, retain_graph and saved-tensor hooks as eager has them,
# and no Python autograd.Function around the call (whose own cost is most of a small training call's). The compile
# checks that, on static fakes of the inputs, instead of assuming it:
# - the program writes no input (one that makes new leaves may write the data of plain inputs that require grad
#   neither before nor after, or throughout but under no_grad alone, change their layout by in-place view ops, grow
#   them by resize_() or set_() them to themselves (those that require grad neither before nor after), or resize
#   their storages: autograd records none of it, and the runtime does it around the graph's run, as for a call that
#   trains nothing, but where the graph saves such an input for the backward whose counter the runtime moves after
#   it ran), assigns no `.data`, changes no input's requires_grad (one making new leaves may turn it on, never off:
#   the runtime sets it on the caller's input before the graph runs, as the check's run does; neither requires_grad_()
#   nor detach_() / requires_grad_(False): the graph runs on the caller's inputs as they came, so its results would
#   carry the history that eager's, computed after the drop, lack), reads no autograd state, `._base` or `._is_view()` (but for
#   one making new leaves: the trace takes eager's answers, as the Function path's does, and the guards check them),
#   and takes and returns plain tensors that share no
#   storage (but for those of a program making new leaves that require grad neither before nor after: the graph takes
#   a flat view of their storage, Note [Synthetic Bases]; an output may be a plain view chain of an input (there, of
#   an earlier output or an intermediate too), replayed after the graph ran, or eager's inference tensor, copied
#   from the graph's value with no history, as the runtime makes them and the check below compares them); what it
#   writes in place (dropout's mask, an intermediate) it writes before anything saves it for the backward: every
#   tensor saved (seen by a saved-tensor hook of the check's) has the version counter it was saved with at the end,
#   where eager's backward would otherwise raise and the functional graph's would not, and no write after its save
#   reached its storage (through `.data`, which moves no counter of its: eager's backward reads the written values,
#   the graph's saves hold those before); and no write runs while the
#   program's own saved-tensor hooks are innermost (a checkpoint's hide its saves from the check's);
# - each tensor output's autograd graph (node types, the edges between them with their input numbers, and which input
#   each AccumulateGrad accumulates into) is the same from eager's run of the program and from the graph's run, each
#   on its own fakes of the inputs as passed (eager's run may change their autograd state). A custom
#   autograd.Function, a no_grad or inference_mode region, a detach(), a checkpoint or a decomposed op all change it
#   (but in a program making new leaves, the fresh results of a call it ran with grad off are detached in the graph:
#   no history, as eager's; new_leaves.note_no_history_results).
# Otherwise the joint graph and the Function stand (Note [Training Through A Joint Graph]).
# New leaves: eager's requires_grad_() on a tensor that is no input (an intermediate, a view, a detach()), in a call
# begun with grad on, makes it an autograd leaf the later results' histories end in, with no edge into the inputs.
# The trace marks each with a `new_autograd_leaf` node where the call was made, so the graph's run makes the same leaf
# (its own value, or a detached alias where the graph's run gave it the history eager's did not). The graph's run
# takes its views with grad on, so where eager's leaf is a view whose chain's last view of a kind of its own was taken
# under no_grad (SwapRecord.made_under_no_grad, asked by the analysis run, whose grad modes are the program's, where
# the trace's may run under no_grad throughout: Analysis.no_grad_leaf_views), the node gives it that creation meta,
# which autograd passes down to the views taken of it: their grad_fn and is_leaf raise once their counter moves, and
# so does a write of them with grad, as eager's (the graph's unbind, with grad on, would name a multi-output op
# instead). Only this path can run that node, so a program making one compiles only here (even with no input requiring grad), or is refused. An
# intermediate made a leaf and returned as itself beside views of it is an intermediate base the graph returns: the
# runtime returns the graph's value, the leaf the other outputs' histories end in, and replays the views on it after
# the graph ran (`_returned_intermediate`; one taken before the flag has no history, as eager's). A
# view made a leaf and returned is replayed (on the input, the intermediate base or the earlier output it views) and
# made to require grad (OutputInfo.gains_grad); one mid-chain, flagged before the chain's next view with no in-place
# view op between, is made one by the replay where it makes it (ViewStep.makes_leaf), once per call (the replays share
# it as eager's histories do, and this check's replays share it too; a chain taken before the flag shares nothing); but a plain view of an input the call leaves as it came, made a leaf
# or with a history ending in one (analyze._graph_leaf_view), is the graph's own value, returned as it is: the graph's
# run takes it of the caller's input (eager's layout, `._base` and counter), and its leaf is the one the other
# outputs' histories end in, where a replayed view would be another leaf or have no history. A replayed one, taken
# under no_grad or inside inference_mode of a tensor that requires grad too (it reports the flag of its base, with no
# gradient of its own, until requires_grad_() makes it a leaf), or taken with grad (a select, an unbind piece) of one
# that required none then and requires it now, which reads its base's flag alike (history_less_view): where no
# output's history ends in that leaf (the check tells leaves among the outputs apart, and those from views requiring
# grad only through their base), it is eager's. A view of an
# input whose data the program wrote before (under no_grad, through `.data`), made a leaf and saved for the backward,
# is not: the graph's leaf lies on the input's new value, apart from the input's version counter, which eager's
# shares, so a write of the input after the call fails eager's backward and not the graph's (the check finds an
# eager save over a written input's storage where the graph's run saves none over it). A view of an
# input requiring grad neither as passed nor ever in the program, stale at the end (Replay.stale_view), is replayed at
# the input's counter at entry, as for a call that trains nothing: autograd records none of it either way.
# An input that requires no grad and is no leaf laid out anew (a view; Note [Leaves Laid Out Anew Under no_grad]),
# made to require grad after a read with grad on, is marked the same way (Analysis.leaf_marked): the graph runs on the
# caller's input, so its node is eager's own requires_grad_() on it, at the same point (reads before it untracked, after
# it tracked), kept where nothing reads it after; the runtime leaves the flag to it. The next call passes the input
# requiring grad, which the guards send to an entry of its own.
# Unobserved new leaves: eager's requires_grad_() (or `.requires_grad = True`) on a tensor that is no input and requires
# no grad makes it a new autograd leaf (above), which the compiled graph can make only on the eager backend's native
# path. Where nothing the caller can see depends on that flag, the program with the call skipped is eager's, and is
# compiled instead. A compile decides that once, without a second try: its first analysis run that completes holds back
# every call making a new leaf where the compile as called would refuse it or may (storage_swaps' _held_back: a plain
# tensor or a subclass, in a call begun with grad on), skipped before the run's modes see it, and notes its place (the
# calls turning a flag on counted in call order, the same in every run of the program) and the refusal it meets as
# called; every later run holds back the same places. Programs making no new leaf pay nothing more. Where it noted one,
# the driver runs the program twice in eager on static fakes of the inputs, under the caller's grad mode, once as called
# and once with those calls skipped, and compares what each run shows: per op, which of its tensor arguments require
# grad where grad mode is on (an op with grad off records no history, and one whose behaviour a flag changes raises in
# one run; of `x.data = y`, x's alone: set_data takes none of y's, new_leaves.flag_read_args), what it returns
# (requires_grad of the tensors it makes with grad on; the answers of flag reads, `t.requires_grad` or `t.is_leaf`;
# the history a grad_fn read reaches), and at the end `_autograd_shape` of each output
# and of each input as left. A later op with grad on over the leaf, over a view of it taken before the flag (whose
# requires_grad is its base's) or after, over a value computed from it (a custom Function's result), a read of its
# flags, returning it or a view of it, or an input it was set_() into and then read: each shows in what is compared.
# But an op whose results (all tensors) nothing holds once the program returned, in either run, shows the caller
# nothing: no output, input, view base, autograd node or Python object it can reach takes them (what the op writes in
# place is its result, held), and a later op taking one of them with grad shows in its own answers; its answers are
# left out (`_NewLeafFlags.dead_entries`, weak references checked after a collection).
# Equal answers mean eager's leaf reaches nothing the caller observes, and the analysis stands. So it does where they
# differ only at outputs that are such leaves themselves, each a leaf requiring grad as called and one requiring none
# skipped (no flag through a base, no history, a view in both runs or in neither): the caller sees that leaf by its own
# flag alone, which the runtime gives the output once built (OutputInfo.gains_grad), as it gives a tensor flagged in a
# call under no_grad; once every output is built (gains_grad_last): other outputs replayed from it are views of it
# that show the same in both runs (taken before the flag, in eager), and are built as the run without the flag builds
# them. Otherwise (or a run raises, or a held place makes no leaf in eager's run) the leaf is observed: a
# subclass's is refused as the compile as called refuses it; a plain one is compiled as called, where the native path
# takes it or refuse_new_leaves refuses it. Where the analysis of the program with the calls held back fails, the same
# comparison decides: unobserved, its error is the program's; observed, the program is compiled as called. A second flag
# call on the same leaf is held back too (in the skipped run it would make the leaf there). Only the program's own calls
# count (not those the fake mode's code makes inside an op, which its cache skips); set_() reaches no torch-function
# mode, but what it gives history shows in the flags and histories compared. A view requiring grad through its base
# (made under no_grad) reports the same flag before and after its requires_grad_(), and the histories through it differ
# only by its own accumulator: such a leaf counts as observed wherever an op run with grad on whose results live takes
# it again after the call (one run with grad off records no history: it reaches no accumulator). Returned, and
# requiring grad through its base in both runs (so not written since), it is seen by its flag
# alone too: eager's has an accumulator of its own, which the flag the runtime gives the rebuilt view (a view made
# under no_grad of the same base) makes as eager's requires_grad_() did. So is one whose base requires no grad, which
# reads as requiring grad through its base once flagged (a view made under no_grad answers its own flag or its base's).
# Returned with a history that raises in both runs (its base written with grad since), it shows nothing: every use of
# it with grad raises as its grad_fn read does. A leaf returned by no output but seen through views of it taken before
# its flag (no history; each reads the flag through its `._base`) is seen by that flag alone: the runtime replays each
# view and flags its rebuilt base once every output is built (ShownLeaves.bases, OutputInfo.base_gains_grad), a leaf
# as eager's base is.
# Constructor flags: a traceable subclass built with `_make_wrapper_subclass(..., requires_grad=True)`
# (`PairTensor(a, b, requires_grad=True)`, issue #27) is eager's new leaf as `PairTensor(a, b).requires_grad_()` is,
# but no torch-function mode sees a constructor. While the pipeline runs the program (inputs.flatten_call's `call`)
# the wrapper is built without the flag (new_leaves.ConstructorFlags) and gets it from a requires_grad_() call of the
# program's, under the grad and inference modes it was built in, just before the first torch call that takes it or
# once the program returned: nothing reads its flag in between, so every mode sees eager's leaf, and it takes the
# requires_grad_() form's path (held back where unobserved, refused where observed). Except, with grad on, where a
# torch call that is no view op takes it first (arithmetic, `p.requires_grad`) in a call taking a tensor requiring
# grad (`TwoTensor(x * 1, x * 2) * 3`, all over torch's subclass tests), or a read of its flag does in any call:
# it gets the flag there as the constructor gives it, outside the modes; the compiled step's history stands for
# eager's, which ends in it and gives the inputs no gradient. Refused after (ConstructorFlags.as_built): the
# wrapper returned, or the base of a returned view; after a read in a call taking nothing requiring grad, any
# other call taking it (no step to give its results history).


class _WriteSeen(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    """Notes whether any op that reaches the dispatcher writes in place or out= (its schema is mutable), the storages
    it writes, in order, and whether one ran while saved-tensor hooks other than `pack`'s were the innermost (the
    program's own: a checkpoint's)."""

    def __init__(self, pack: Callable[[torch.Tensor], object]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # untyped in torch
        self.pack = pack
        self.wrote = False
        self.other_hooks = False
        self.written: list[object] = []  # per write of a tensor argument, in call order: its storage key

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[object] = (),
        kwargs: Mapping[str, object] | None = None,
    ) -> object:
        # (None where no hooks are set: torch's stub leaves that out)
        top = cast("tuple[object, object] | None", torch._C._autograd._top_saved_tensors_default_hooks(False))
        if top is None or top[0] is not self.pack:
            self.other_hooks = True
        if func._schema.is_mutable:
            self.wrote = True
            values = [*args, *(kwargs or {}).values()]
            for a, value in zip(func._schema.arguments, values, strict=False):
                if a.alias_info is not None and a.alias_info.is_write and isinstance(value, torch.Tensor):
                    self.written.append(storage_key(value))
        return func(*args, **(kwargs or {}))


def _unpacked(t: torch.Tensor) -> torch.Tensor:
    return t


def _saving(saved: list[tuple[torch.Tensor, int]]) -> Callable[[torch.Tensor], torch.Tensor]:
    """A saved-tensor pack hook noting each tensor saved, with its version counter then."""

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((t, t._version))
        return t

    return pack


# Saved tensors eager's backward checks: eager's autograd saves a tensor as itself (an `exp()`'s result, a `sin()`'s
# input, what a custom Function saves), so its backward raises where that tensor was written after the save: its
# version counter moved. The compiled Function saves what its backward graph reads, which need not be that tensor: a
# subclass's inner tensors (a write through the wrapper moves no inner counter: the class's `__torch_dispatch__` runs
# below ADInplaceOrView), or nothing at all (a custom Function that saves its input and only changes its metadata in
# the backward). So the Function also notes, per such tensor (an output it returns fresh or a view of one, an output
# the runtime builds outside it, such as an alias of an input with a counter of its own that `t0.data = x0` leaves, or
# an input), its counter as the call leaves it, and its backward raises eager's error where the counter moved since and a
# tangent reached an output through whose history eager's backward would run the node that saved it
# (`EagerSave.outputs`: the probe walks each output's grad_fn graph on static fakes and reads the nodes' saved
# tensors), or an input the call gave a new history, which the caller holds returned or not (`EagerSave.held`: through
# the Function outputs carrying its new value). An output whose history raises when read (a view of unbind()'s output
# whose base the program wrote) runs no node in eager's backward, which raises at that root: the walk skips it
# (`grad_fn_or_none`) rather than fail, for unprobed the Function keeps only its own saves' counters (and refuses a
# backward after a write of a subclass input or output whose inner tensors it saved, or of an input that a custom
# Function of the program saved, whose backward may read only its metadata: Note [Probing Eager's Backward]).
# A tensor is matched by the one whose version counter it uses (a view's base): writing any view of a saved
# tensor moves the saved one's counter; so is one over another layout that shares that counter (`.data =` keeps a
# tensor's counter over the new layout: a detach() of a saved x0 relaid so, returned and written by the caller). The counter is read once the call's epilogue has written the inputs: an input
# the program wrote before the save was saved at the count eager ends the program with, which the runtime reaches
# only after the graph has run (a write after the save fails eager's backward on its own: the analysis's concern).
# Eager's engine runs later-made nodes first and a leaf's AccumulateGrad as soon as it is ready (Note [Probing Eager's
# Backward]), so before the saving node raises a leaf may get its gradient: one returned as itself that no node of the
# program reaches (a root, ready at once), or one behind a view input returned as itself (whose node a write remakes at
# the backward's read, numbered above the program's: `x0.contiguous()` returning an `expand()` of a leaf), or one
# behind a view input the program wrote hidden from autograd, returned or not (remade so, that node goes straight to
# the leaf: a backward through the written inputs runs it first; `_views_written_apart`, where no output but a view
# of that leaf reaches it: the program's read of the view with grad makes it a leaf graded as any other). As the
# compiled backward may raise elsewhere too (a deferred error, the epilogue's set_ node), every program's such inputs
# that the Function gives no gradient go into it detached (`EagerSaves.detached`), so that their leaf's AccumulateGrad
# waits on no node of ours either; where another leaf is reached by a path around every saving node, the
# probe runs eager's backward on static fakes, the saved tensor's counter moved after the call, through each set of
# outputs that reaches a saving node, and where some leaf gets its gradient first (`EagerSave.graded_first`) the
# compiled backward refuses (UnsupportedError) where it would raise: its one node computes every gradient at once. The
# probe drives outputs only: a node reached through a held input's history, around which a leaf is reached, is refused.
# Every save is probed on one run of the program and one backward per set of outputs, no counter moved
# (`_graded_together`: the comment on `_UnpackOrder`), as each would be on a run of its own with its counter
# moved, but where an output that requires grad is a view (reading its history after its counter moved remakes its
# node), where a custom Function's backward runs, where a leaf input goes to the Function detached, or where a
# backward raises or moves a counter.
# A caller who also writes an output view of an input (`x0.unsqueeze(1)` returned beside the Function) makes that
# view's node again at the backward's read, numbered above the program's: eager runs it first and may then give its
# leaf the gradient, where the compiled Function, which that leaf's AccumulateGrad waits on, raises first. The probe
# runs again with those views written too (`EagerSave.graded_after_view_writes`), and the compiled backward refuses
# where it finds such a view's counter moved since the call (`_written_view_leaves`).


def eager_saves(call: Callable[..., object], flat: FlatInputs, analysis: Analysis) -> EagerSaves:
    """The saved tensors of the comment above, and the inputs the Function takes detached; none where the program
    cannot run on fakes (Note [Probing Eager's Backward])."""
    on_meta = analysis.marks_view_dirty_in_inference
    copies: _Copies = static_meta_copies if on_meta else static_fake_copies
    first: EagerSaves | _FirstRun | None = None
    if not on_meta and _shares_its_run(flat):
        try:
            first = _first_run(call, flat, analysis, copies, _UnpackOrder())
        except Exception:  # (a run that cannot stand for the grading's, or fails: as before, with a run of its own)
            first = None
    try:  # (static fakes of a nested tensor's sizes need a shape environment: not probed)
        first = _first_run(call, flat, analysis, copies, None) if first is None else first
    except Exception as e:  # (the program's own error is the trace's to raise; a class the walk cannot read)
        if "Inference tensors cannot be saved for backward" in str(e):
            raise  # eager's own: its node saves an inference input (its fake is one; the trace's stand-in is not)
        if on_meta:
            raise UnsupportedError(
                "a custom autograd.Function applied with grad mode on inside a torch.inference_mode() block marks "
                "dirty (ctx.mark_dirty) a view that requires grad, which the probe of the tensors eager's backward "
                "saves cannot run on fake tensors, and the program fails on meta copies of its inputs too "
                f"({type(e).__name__}: {(str(e).splitlines() or [''])[0][:80]}): without the probe, a "
                "tensor eager saved that the caller writes after the call would not fail the compiled backward as "
                "it fails eager's (Note [Probing Eager's Backward]). Apply the Function outside the inference_mode "
                "block, pass it a clone, or use torch.no_grad() there"
            ) from e
        return EagerSaves(taken=analysis.function_taken)
    if isinstance(first, EagerSaves):
        return first
    found, around, detached = first.found, first.around, first.detached
    # the outputs that require grad, from a run without backward: the same for every save (not run where none needs it)
    grad_outputs = functools.cache(lambda: _trial(call, flat, None, copies=copies)[0])
    views = any(info.replay is not None and info.replay.source is ReplaySource.INPUT for info in analysis.outputs)
    probed = [e for e, a in zip(found, around, strict=True) if a and not e.held]
    known = first.known if first.graded else _graded_together(call, flat, probed, detached, copies=copies)
    together = iter(known if known is not None else [None] * len(probed))
    saves = tuple(
        _graded(call, flat, e, detached, grad_outputs, views, None if e.held else next(together), copies) if a else e
        for e, a in zip(found, around, strict=True)
    )
    return EagerSaves(saves=saves, detached=detached, probed=True)


@dataclass(frozen=True, slots=True)
class _FirstRun:
    """What the probe's first run found (`_first_run`): the saves, whether a leaf is reached around each, the inputs
    taken detached, and where `graded`, `_graded_together`'s answer for the saves around which one is (`known`)."""

    found: tuple[EagerSave, ...]
    around: list[bool]
    detached: frozenset[int]
    known: list[bool] | None = None
    graded: bool = False


def _shares_its_run(flat: FlatInputs) -> bool:
    """May the probe's first run be `_graded_together`'s too? Where every tensor input is a leaf and no view: then
    `_probe_run` makes no history before the call (`_histories_before_call`), and reading the inputs' histories after
    the call remakes no node."""
    return all(not v._is_view() and v.grad_fn is None for v in flat.values if isinstance(v, torch.Tensor))


def _first_run(
    call: Callable[..., object],
    flat: FlatInputs,
    analysis: Analysis,
    copies: _Copies,
    order: _UnpackOrder | None,
) -> EagerSaves | _FirstRun:
    """The probe's run of the program on static fakes: the saves eager's backward checks (EagerSaves where none is
    found) and around which a leaf is reached. With `order` (`_shares_its_run`), the run is made under its hooks and
    also grades those saves (`_graded_together`), one run where there were two; it raises where its reads could
    differ from a run without those hooks (`_UnpackOrder.reads_as_unhooked`). Raises where the program does."""
    mode, values = copies(flat.values)
    inside = _SavesInsideCopySlices(order)
    with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
        state, args, kwargs = unflatten_call(flat, values)
        before = [_history(values[k]) for k in flat.tensor_indices]
        leaves, bases = _graded_inputs(values, ())  # (before the call, as `_probe_run` finds them)
        with inside:
            outs = pytree.tree_leaves((call if order is None else order.saving(call))(state, args, kwargs))
        held = {
            p: cast(torch.Tensor, values[k])
            for p, k in enumerate(flat.tensor_indices)
            if (h := _history(values[k])) is not None and h is not before[p]
        }
        detached = _unreached_returned_leaves(outs, values, flat) | _views_written_apart(held, values, outs)
        roots = [*outs, *held.values()]
        saves = _NodeSaves(inside.saves, order)  # (each node's saves read once: `around` reads them again)
        readers = _saved_readers(roots, saves)
        if order is not None and not order.reads_as_unhooked(readers):
            raise _Unshared
        found = _matched(readers, outs, tuple(held), values, flat, analysis)
        if not found:
            return EagerSaves(detached=detached, probed=True)
        apart = {id(t) for p in detached for t in _leaf_behind(values[flat.tensor_indices[p]])}
        around = [_leaf_around_savers(roots, values, _saved_value(e, outs, values, flat), apart, saves) for e in found]
        if order is None:
            return _FirstRun(found, around, detached)
        probed = [e for e, a in zip(found, around, strict=True) if a and not e.held]
        taken = {flat.tensor_indices[p] for p in detached}
        given = [v for k, v in enumerate(values) if k in taken and isinstance(v, torch.Tensor)]
        run = _ran(outs, values, leaves, given, bases)
        known = _graded_together(call, flat, probed, detached, copies=copies, shared=(run, order))
        return _FirstRun(found, around, detached, known, graded=True)


class _Unshared(Exception):
    """The probe's first run cannot stand for `_graded_together`'s (`_first_run`)."""


def _graded(
    call: Callable[..., object],
    flat: FlatInputs,
    save: EagerSave,
    detached: frozenset[int],
    first_trial: Callable[[], list[int]],
    views: bool,
    graded_first: bool | None = None,
    copies: _Copies = static_fake_copies,
) -> EagerSave:
    """`save` with EagerSave.graded_first and EagerSave.graded_after_view_writes (`views`: some output is a view of
    an input, replayed outside the compiled Function; `graded_first`: `_graded_first`'s answer where known; `copies`:
    as `_probe_run`'s)."""
    if graded_first is None:
        graded_first = bool(save.held) or _graded_first(call, flat, save, detached, first_trial, copies=copies)
    if graded_first:
        return replace(save, graded_first=True)
    if views and _graded_first(call, flat, save, detached, first_trial, views_written=True, copies=copies):
        return replace(save, graded_after_view_writes=True)
    return save


def _saved_value(save: EagerSave, outs: Sequence[object], values: Sequence[object], flat: FlatInputs) -> torch.Tensor:
    value = outs[save.output] if save.output is not None else values[flat.tensor_indices[cast(int, save.input)]]
    assert isinstance(value, torch.Tensor), "BUG: a saved wrapper that is no tensor"
    return value


def _unreached_returned_leaves(outs: Sequence[object], values: Sequence[object], flat: FlatInputs) -> frozenset[int]:
    """Tensor inputs requiring grad, passed once and returned as themselves, that are leaves or views of a leaf,
    whose leaf's AccumulateGrad no node of the outputs' grad_fn graphs reaches but the returned view's own: eager's
    engine runs that accumulator (a root numbered above all, or behind the view's node, remade after a write with a
    number above the program's) apart from the program's nodes, so the compiled Function takes them detached (the
    comment above)."""
    found = set()
    for p, k in enumerate(flat.tensor_indices):
        v = values[k]
        if not isinstance(v, torch.Tensor) or not v.requires_grad or sum(w is v for w in values) != 1:
            continue
        if grad_fn_raises(v):  # (a view the program wrote through its base: no leaf's, and is_leaf itself raises)
            continue
        leaf = v if v.is_leaf else v._base
        if leaf is None or not leaf.requires_grad or not leaf.is_leaf or not any(o is v for o in outs):
            continue
        others = [grad_fn_or_none(o) for o in outs if isinstance(o, torch.Tensor) and o is not v]
        if id(leaf) not in _accumulated(others):
            found.add(p)
            # the other inputs over that leaf (`b.t()` passed beside `b`) get no gradient either, and attached they
            # would make the leaf's AccumulateGrad wait on the Function's node
            found.update(
                q for q, j in enumerate(flat.tensor_indices) if any(t is leaf for t in _leaf_behind(values[j]))
            )
    return frozenset(found)


def _views_written_apart(
    held: dict[int, torch.Tensor], values: Sequence[object], outs: Sequence[object]
) -> frozenset[int]:
    """Tensor inputs (positions in `held`: given a new history by the call) requiring grad, passed once, that are
    views of a leaf written hidden from autograd (under no_grad or inference_mode): the node a read after the call
    remakes goes straight to their leaf, numbered above the program's, so eager's engine runs it, and that leaf's
    AccumulateGrad where nothing else feeds it, before a node of the program's raises; the compiled Function takes
    them detached where it gives them no gradient (`_apart_inputs`), as returned ones (the comment above). Not where
    the graph of an output that is no view of that leaf (those are the view input itself, or views the runtime
    replays outside the Function) reaches the leaf (a read of the view with grad in the program, `x0.sin()`
    returned): the Function gives it a gradient and the leaf's AccumulateGrad waits on the Function's node, so
    whether eager's engine grades the leaf before a saving node raises is the probe's (`EagerSave.graded_first`)."""
    found = set()
    for p, v in held.items():
        leaf = v._base
        if leaf is None or not leaf.requires_grad or not leaf.is_leaf or sum(w is v for w in values) != 1:
            continue
        others = [grad_fn_or_none(o) for o in outs if isinstance(o, torch.Tensor) and o._base is not leaf]
        if id(leaf) in _accumulated(others):
            continue
        node = grad_fn_or_none(v)
        nexts = [child for child, _ in node.next_functions] if node is not None else []
        if nexts and all(getattr(child, "variable", None) is leaf for child in nexts):
            found.add(p)
    return frozenset(found)


def _leaf_behind(value: object) -> tuple[torch.Tensor, ...]:
    """A tensor and the tensor it is a view of, if any."""
    if not isinstance(value, torch.Tensor):
        return ()
    return (value,) if value._base is None else (value, value._base)


def _accumulated(starts: Sequence[object]) -> set[int]:
    """id() of each tensor whose AccumulateGrad the nodes `starts` reach."""
    variables = (getattr(node, "variable", None) for node in autograd_nodes(starts))
    return {id(v) for v in variables if isinstance(v, torch.Tensor)}


def _leaf_around_savers(
    outs: Sequence[object],
    values: Sequence[object],
    saved: torch.Tensor,
    apart: set[int],
    saves: _NodeSaves,
) -> bool:
    """Does some output's grad_fn graph reach the AccumulateGrad of a leaf input (or of the leaf a view input is a
    view of), not in `apart`, by a path through no node that saved a tensor over `saved`'s version counter (as
    `_matched` keys saves: `_counter_identity`)? Only then may eager's engine give that leaf its gradient before such
    a node raises."""
    key = _counter_identity(saved)
    leaves = {
        id(leaf)
        for v in values
        if isinstance(v, torch.Tensor)
        for leaf in (v, v._base)
        if isinstance(leaf, torch.Tensor) and leaf.requires_grad and not grad_fn_raises(leaf)
        if leaf.is_leaf and id(leaf) not in apart
    }
    seen: set[int] = set()
    stack = [grad_fn_or_none(o) for o in outs if isinstance(o, torch.Tensor)]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if any(_counter_identity(t) == key for t in saves.of(node)):
            continue
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor) and id(variable) in leaves:
            return True
        stack.extend(child for child, _ in node.next_functions)
    return False


def _graded_first(
    call: Callable[..., object],
    flat: FlatInputs,
    save: EagerSave,
    detached: frozenset[int],
    first_trial: Callable[[], list[int]],
    views_written: bool = False,
    copies: _Copies = static_fake_copies,
) -> bool:
    """Whether eager's backward through some outputs that run a node saving `save`'s wrapper, written after the call,
    gives a leaf input its gradient before that node raises (the `detached` leaves as the compiled Function gives
    theirs), run on static fakes; True where that is not seen (more than MAX_PROBED_OUTPUTS outputs, a probe that
    fails). `first_trial()`: `_trial(call, flat, None)`'s outputs that require grad. `views_written`: the outputs
    that are views of inputs written too (their nodes, made again at the backward's read, run first). `copies`: as
    `_probe_run`'s."""

    def written(outs: Sequence[object], values: Sequence[object]) -> None:
        t = _saved_value(save, outs, values, flat)
        set_version(t, get_version(t) + 1)
        if views_written:
            for o in outs:
                if isinstance(o, torch.Tensor) and o._is_view() and _views_an_input(o, values):
                    set_version(o, get_version(o) + 1)

    returned = frozenset(flat.tensor_indices[p] for p in detached)
    try:
        grad_outputs = first_trial()
        if len(grad_outputs) > MAX_PROBED_OUTPUTS:
            return True
        for chosen in _output_sets(grad_outputs):
            if not chosen & save.outputs:
                continue
            _, end = _trial(call, flat, chosen, returned=returned, after_call=written, copies=copies)
            if end is not BackwardEnd.RAISES:
                return True
    except Exception:  # a program the probe cannot run
        return True
    return False


def _graded_together(
    call: Callable[..., object],
    flat: FlatInputs,
    saves: Sequence[EagerSave],
    detached: frozenset[int],
    copies: _Copies = static_fake_copies,
    shared: tuple[_ProbeRun, _UnpackOrder] | None = None,
) -> list[bool] | None:
    """`_graded_first` of each of `saves` (none held) from one run of the program and one backward per set of
    outputs, none of them written: what eager's engine unpacks and grades, in its order (`_UnpackOrder`), says where
    each save's node would raise (the comment on `_UnpackOrder`). None (each save is then probed on a run of
    its own) where an output that requires grad is a view (reading its history after a counter moved remakes its
    node, which a run of its own would not), where the graph runs a custom Function's backward (the program's own
    code, which may read what it saved otherwise), where some leaf input goes to the Function detached, where a
    backward raises or moves an input's or output's counter, or where the run fails. `shared`: the probe's first run,
    made under the order's hooks (`_first_run`), in place of a run of its own."""
    if not saves:
        return []
    try:
        if shared is not None:
            return _graded_on(*shared, flat, saves)
        order = _UnpackOrder()
        apart = frozenset(flat.tensor_indices[p] for p in detached)
        with _probe_run(order.saving(call), flat, apart, copies=copies) as run:
            return _graded_on(run, order, flat, saves)
    except Exception:  # a program the probe cannot run this way: each save on a run of its own
        return None


def _graded_on(run: _ProbeRun, order: _UnpackOrder, flat: FlatInputs, saves: Sequence[EagerSave]) -> list[bool] | None:
    """`_graded_together` on `run`, made under `order`'s hooks."""
    if len(run.grad_outputs) > MAX_PROBED_OUTPUTS:
        return [True] * len(saves)
    roots = [cast(torch.Tensor, run.outs[p]) for p in run.grad_outputs]
    if (
        run.apart
        or any(r._is_view() for r in roots)
        or any(
            isinstance(node, torch.autograd.function.BackwardCFunction)
            for node in autograd_nodes(r.grad_fn for r in roots)
        )
    ):
        return None
    if any(leaf.grad is not None for leaf in _graded_leaves(run)):
        return None  # (a gradient the program gave: graded before any node)
    tensors = [v for v in (*run.values, *run.outs) if isinstance(v, torch.Tensor) and not v.is_inference()]
    versions = [get_version(t) for t in tensors]
    over = [order.packed_over(_saved_value(save, run.outs, run.values, flat)) for save in saves]
    sets = [c for c in _output_sets(run.grad_outputs) if any(c & save.outputs for save in saves)]
    events = {chosen: order.backward(run, chosen) for chosen in sets}
    if [get_version(t) for t in tensors] != versions:
        return None
    return [
        any(_graded_before(events[c], keys) for c in sets if c & save.outputs)
        for save, keys in zip(saves, over, strict=True)
    ]


_Event = tuple[bool, int]  # (True, a saved tensor's index in `_UnpackOrder.packed`) or (False, 1: a counted leaf
# graded, 0: another leaf)


# Graded before the saving node (`_UnpackOrder`):
# Autograd checks a saved tensor's version counter when a node unpacks it, at the start of the node's run, and raises
# where the counter moved since the save: every tensor saved over that counter (a view shares its base's). Nothing
# else in eager's backward reads a counter, so a backward whose saved counter moved runs, up to the first node that
# unpacks a tensor over it, the nodes the unmoved backward runs, in the same order, and raises there. So which leaves
# eager's engine grades before a written save's node raises is read from one backward with no counter moved: the
# program runs under saved-tensor hooks (which turn autograd's own version check off: none raises), the unpack hook
# notes each unpack in order, each leaf's post-accumulate hook each gradient, and a save is graded first where a
# gradient came before the first unpack of a tensor over its counter (matched by moving the save's counter and
# reading which saved tensors moved with it), or where none is unpacked (that backward completes). Hooks of the
# program's own, innermost at a save, keep it from ours, as they keep it from autograd's check (hooks turn it off).
# Where a backward cannot be read so (it raises, it writes a counter, a custom Function's backward, a leaf given
# to the Function detached) each save is probed on a run of its own, its counter moved (`_graded_first`).
# That run is the probe's first where every input is a leaf and no view (`_shares_its_run`: no history is made before
# the call, and reading the inputs' histories after it remakes no node): the saves are then found under these hooks,
# read as they were packed (`_UnpackOrder.read`), and where a save was written since it was made (a read without
# hooks would have raised) or a saved view is one `_view_error` reads the history of, the first run is made again
# without them (`_first_run`).


class _UnpackOrder:
    """The tensors a run of the program saved, and per backward the unpacks and gradients in eager's engine's order
    (the comment above)."""

    def __init__(self) -> None:
        self.packed: list[torch.Tensor] = []  # per save under our hooks, in the program's order: the tensor saved
        self.versions: list[int | None] = []  # ... and its version counter then (None: an inference tensor's)
        self.events: list[_Event] | None = None  # while a backward runs: what it unpacked and graded, in order
        self.reads: list[int] | None = None  # while `read` reads a node's saved tensors: the saves unpacked

    def saving(self, call: Callable[..., object]) -> Callable[..., object]:
        def run(*args: object) -> object:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                return call(*args)

        return run

    def _pack(self, t: torch.Tensor) -> int:
        self.packed.append(t)
        self.versions.append(None if t.is_inference() else get_version(t))
        return len(self.packed) - 1

    def reads_as_unhooked(self, readers: dict[object, _Readers]) -> bool:
        """Do the nodes' saved tensors read now (`_saved_readers`) as they would from a run without these hooks?
        Not where one was written since its save (autograd's version check at the read, which hooks turn off, would
        have raised and the read skipped it), nor where `_view_error` would read a saved view's history after moving
        its counter (a view made under no_grad or by a multi-output op)."""
        if any(v is not None and get_version(t) != v for t, v in zip(self.packed, self.versions, strict=True)):
            return False
        return not any(
            t._is_view() and t.requires_grad and not is_plain_autograd_view(t)
            for reader in readers.values()
            for t in reader.saved
        )

    def _unpack(self, k: int) -> torch.Tensor:
        if self.events is not None:
            self.events.append((True, k))
        if self.reads is not None:
            self.reads.append(k)
        return self.packed[k]

    def read(self, node: torch.autograd.graph.Node, name: str) -> object:
        """`getattr(node, name)` as a run without these hooks reads it: the tensors saved under them as they were
        packed (an unpack hook's tensor comes back rewrapped, a view no more)."""
        reads: list[int] = []
        self.reads = reads
        try:
            value: object = getattr(node, name, None)
        finally:
            self.reads = None
        if not reads:
            return value
        many = isinstance(value, tuple | list)
        values: Sequence[object] = value if isinstance(value, tuple | list) else (value,)
        if sum(isinstance(v, torch.Tensor) for v in values) != len(reads):
            raise _Unshared  # (not one unpack per tensor read: the run is probed as before)
        return [self.packed[k] for k in reads] if many else self.packed[reads[0]]

    def packed_over(self, t: torch.Tensor) -> frozenset[int]:
        """The saved tensors over `t`'s version counter: those whose counter moves with `t`'s."""
        before = [get_version(p) for p in self.packed]
        at = get_version(t)
        set_version(t, at + 1)
        try:
            return frozenset(k for k, p in enumerate(self.packed) if get_version(p) != before[k])
        finally:
            set_version(t, at)

    def backward(self, run: _ProbeRun, chosen: frozenset[int]) -> list[_Event]:
        """Eager's backward through the outputs `chosen` of `run` (the roots `_backward_end` takes), the graph
        retained: its unpacks and gradients; raises where it does."""
        events: list[_Event] = []
        roots = [cast(torch.Tensor, run.outs[p]) for p in _probed_at(run, chosen)]
        # a gradient counts as `_backward_end` counts it: a leaf's, or a leaf view inputs are views of, where none of
        # those views is a root (its own node grades it, outside the program)
        counted = [*run.leaves, *(b for b, views in run.bases if not any(r is v for r in roots for v in views))]
        graded = {id(leaf) for leaf in counted}
        removals = [
            after_accumulating(leaf, lambda t: events.append((False, int(id(t) in graded and t.grad is not None))))
            for leaf in {id(leaf): leaf for leaf in _graded_leaves(run)}.values()
        ]
        self.events = events
        try:
            if roots:
                torch.autograd.backward(roots, [torch.ones_like(o) for o in roots], retain_graph=True)
        finally:
            self.events = None
            for remove in removals:
                remove()
            for leaf in _graded_leaves(run):
                leaf.grad = None
        return events


def _graded_leaves(run: _ProbeRun) -> tuple[torch.Tensor, ...]:
    """The leaves whose gradients a probe's backward reads: the run's leaves, and those view inputs are views of."""
    return (*run.leaves, *(base for base, _ in run.bases))


def _graded_before(events: Sequence[_Event], over: frozenset[int]) -> bool:
    """Whether a counted gradient comes before the first unpack of a tensor in `over` (or no such unpack comes: a
    backward that completes)."""
    for unpacked, k in events:
        if unpacked and k in over:
            return False
        if not unpacked and k:
            return True
    return True


def _views_an_input(o: torch.Tensor, values: Sequence[object]) -> bool:
    base = o._base
    return any(base is v or base is v._base for v in values if isinstance(v, torch.Tensor))


def _history(value: object) -> object:
    """A tensor input's grad_fn (None: a leaf, or none to read)."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return value.grad_fn
    except (RuntimeError, IndexError):  # (a view whose history raises when read: the analysis's concern)
        return None


def _matched(
    readers: dict[object, _Readers],
    outs: Sequence[object],
    held: Sequence[int],
    values: Sequence[object],
    flat: FlatInputs,
    analysis: Analysis,
) -> tuple[EagerSave, ...]:
    """`readers` index the outputs, then the tensor inputs at `held` (positions among the tensor inputs)."""
    n = len(outs)

    def save(output: int | None, input: int | None, reader: _Readers) -> EagerSave:
        at = reader.outputs
        held_at = frozenset(held[r - n] for r in at if r >= n)
        outputs = frozenset(r for r in at if r < n)
        return EagerSave(output=output, input=input, outputs=outputs, held=held_at, view_error=_view_error(reader))

    found = [
        save(p, None, reader)
        for p, (out, info) in enumerate(zip(outs, analysis.outputs, strict=False))
        if info.kind is OutputKind.TENSOR and isinstance(out, torch.Tensor)
        if (reader := _reader_of(readers, out)) is not None
    ]
    found += [
        save(None, p, reader)
        for p, k in enumerate(flat.tensor_indices)
        if isinstance(value := values[k], torch.Tensor) and (reader := _reader_of(readers, value)) is not None
    ]
    return tuple(found)


def _view_error(reader: _Readers) -> str | None:
    """Eager's error at unpacking a saved tensor over this counter once written, where each is a view made under
    no_grad or by a multi-output op (unpacking reads its grad_fn first, which raises): seen by moving its counter,
    then putting it back; None where any would fail the version check instead."""
    errors = set()
    for t in reader.saved:
        if not t._is_view() or not t.requires_grad or is_plain_autograd_view(t):
            return None
        version = get_version(t)
        set_version(t, version + 1)
        try:
            t.grad_fn  # noqa: B018  # the access itself is the check
        except RuntimeError as e:
            errors.add(str(e))
        except (ValueError, IndexError):  # (see grad_fn_raises: not the view-after-write error)
            return None
        else:
            return None
        finally:
            set_version(t, version)
    return errors.pop() if len(errors) == 1 else None


@dataclass(frozen=True, slots=True)
class _Readers:
    """The tensors nodes saved over one `_counter_identity`, and the outputs whose graph has such a node."""

    saved: tuple[torch.Tensor, ...]
    outputs: frozenset[int]


def _reader_of(readers: dict[object, _Readers], t: torch.Tensor) -> _Readers | None:
    """The saved tensors over `t`'s memory and layout that use `t`'s version counter, if any: a tensor over the same
    memory may count apart (`x0.data = t0` leaves x0 its own counter, over t0's storage). Else those of another
    layout that use its counter: `.data =` keeps a tensor's counter over the new layout (`t0.data = x0.unsqueeze(0)`,
    t0 a detach() of x0 that a Function saved)."""
    found = readers.get(_counter_identity(t))
    if found is not None and any(_shares_counter(t, saved) for saved in found.saved):
        return found
    return next((r for r in readers.values() if any(_shares_counter(t, saved) for saved in r.saved)), None)


def _shares_counter(t: torch.Tensor, other: torch.Tensor) -> bool:
    """Does a write of `t` move `other`'s version counter? (Seen by moving `t`'s, then putting it back.)"""
    if t.is_inference() or other.is_inference():
        return t.is_inference() and other.is_inference()
    version, before = get_version(t), get_version(other)
    set_version(t, version + 1)
    moved = get_version(other) != before
    set_version(t, version)
    return moved


def _saved_readers(outs: Sequence[object], saves: _NodeSaves) -> dict[object, _Readers]:
    """Each tensor a node of the outputs' autograd graphs saved, by `_counter_identity` (a saved output comes back as
    another tensor over the same memory, with its counter) -> those tensors and the outputs whose graph has such a
    node."""
    readers: dict[object, tuple[list[torch.Tensor], set[int]]] = {}
    for p, out in enumerate(outs):
        for node in autograd_nodes([grad_fn_or_none(out)] if isinstance(out, torch.Tensor) else []):
            for t in saves.of(node):
                saved, outputs = readers.setdefault(_counter_identity(t), ([], set()))
                saved.append(t)
                outputs.add(p)
    return {k: _Readers(tuple(saved), frozenset(outputs)) for k, (saved, outputs) in readers.items()}


def _counter_identity(t: torch.Tensor) -> object:
    """`_identity` of the tensor whose version counter `t` uses: its base, if it is a view."""
    base = t._base
    return _identity(t if base is None else base)


def _identity(t: torch.Tensor) -> object:
    """What tells a tensor of the static fake run apart: class, storages (of its inner tensors, recursively) and
    layout."""
    if is_traceable_subclass(t):
        values = [getattr(t, a) for a in t.__tensor_flatten__()[0]]
        inner: tuple[object, ...] = tuple(_identity(v) if isinstance(v, torch.Tensor) else id(v) for v in values)
    else:
        inner = (storage_key(t),)
    return (type(t), inner, tuple(t.shape), tuple(t.stride()), t.storage_offset())


# A write through a view of a tensor with history (`x.t().mul_(y)`, a view input's `mul_`) records a CopySlices node on
# the base, which runs the op's own node (MulBackward0, saving y) inside it: that node is in no next_functions, and
# CopySlices shows none of its saved tensors. The probe notes them as they are saved (a pack hook), per op, and gives
# them to the CopySlices node the op left on the written tensor's base.
_InsideSaves = dict[torch.autograd.graph.Node, list[torch.Tensor]]


class _SavesInsideCopySlices(TorchFunctionMode):
    """The tensors saved by each in-place op on a view that left a CopySlices node on its base (the comment above).
    Only around those ops is the pack hook on: what it saves stands for the tensor object itself (which a later
    `.data =` moves), where the other nodes keep the tensor as it was at the save."""

    def __init__(self, order: _UnpackOrder | None = None) -> None:
        super().__init__()
        self.saves: _InsideSaves = {}
        self.order = order  # hooks outside these (`_first_run`), which see the saves through them

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        name = getattr(func, "__name__", "")
        in_place = name.startswith("__i") or (name.endswith("_") and not name.endswith("__"))
        if not (in_place and args and isinstance(args[0], torch.Tensor) and args[0]._is_view()):
            return func(*args, **(kwargs or {}))
        packed: list[torch.Tensor] = []
        order = self.order

        def pack(t: torch.Tensor) -> object:
            packed.append(t)
            return t if order is None else order._pack(t)

        def unpack(k: Any) -> torch.Tensor:
            return cast(torch.Tensor, k) if order is None else order._unpack(cast(int, k))

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = func(*args, **(kwargs or {}))
        if packed and isinstance(out, torch.Tensor):
            node = (out if out._base is None else out._base).grad_fn
            if node is not None and type(node).__name__ == "CopySlices":
                self.saves.setdefault(node, []).extend(packed)
        return out


class _NodeSaves:
    """`_saved_by` per node, read once and kept: the probe's first run reads each node's saves for `_saved_readers`,
    then again per save it found (`_leaf_around_savers`), and nothing between writes a save or frees one (reading a
    saved tensor unpacks it: a fresh tensor over the same memory, or the one packed under `order`'s hooks)."""

    def __init__(self, inside: _InsideSaves, order: _UnpackOrder | None) -> None:
        self.inside, self.order = inside, order
        self.read: dict[torch.autograd.graph.Node, tuple[torch.Tensor, ...]] = {}

    def of(self, node: torch.autograd.graph.Node) -> tuple[torch.Tensor, ...]:
        found = self.read.get(node)
        if found is None:
            found = self.read[node] = tuple(_saved_by(node, self.inside, self.order))
        return found


def _saved_by(
    node: torch.autograd.graph.Node, inside: _InsideSaves, order: _UnpackOrder | None = None
) -> list[torch.Tensor]:
    """The tensors an autograd node saved (`_saved_*` of a built-in node, `saved_tensors` of a custom Function's, and
    those of the op a CopySlices node runs: `inside`); where the node saved them under `order`'s hooks, as they were
    saved (`_UnpackOrder.read`)."""
    names = [n for n in dir(node) if n.startswith("_saved_")] + ["saved_tensors"]
    found: list[torch.Tensor] = list(inside.get(node, ()))
    for name in names:
        try:
            value = getattr(node, name, None) if order is None else order.read(node, name)
        except RuntimeError:  # (a saved tensor freed, or none)
            continue
        found.extend(v for v in (value if isinstance(value, tuple | list) else (value,)) if isinstance(v, torch.Tensor))
    return found


# Node types the picture counts as one: the graph traces an expand to a tensor's own size as an alias (the comment
# above torch_internals._expands_to_itself), whose backward passes the gradient as eager's ExpandBackward0 does
_SAME_NODE = {"AliasBackward0": "ExpandBackward0"}


def _autograd_shape(root: torch.Tensor, inputs: Sequence[object], others: dict[int, int] | None = None) -> object:
    """A comparable picture of `root`'s autograd graph: node types, edges with their input numbers, nodes met again
    by their first-visit number, AccumulateGrad by the position of its tensor among `inputs` (-1: none of them; with
    `others`, shared by the pictures compared together, -2 - the first-visit number of that tensor among them: a new
    leaf two outputs' histories end in is one leaf in both runs or in neither);
    whether `root` requires grad only through its base (a view made under no_grad, which no gradient reaches, where
    a new leaf made of it is its own AccumulateGrad's); and whether it is a view (a dirty Function applied under
    no_grad returns a view input as it is where it requires no grad, and no view where it is a new leaf)."""
    numbers: dict[int, int] = {}

    def visit(node: object, nr: int) -> object:
        if node is None:
            return None
        if id(node) in numbers:
            return ("again", numbers[id(node)], nr)
        numbers[id(node)] = len(numbers)
        if type(node).__name__ == "AccumulateGrad":
            var = getattr(node, "variable", None)
            k = next((k for k, v in enumerate(inputs) if v is var), -1)
            if k == -1 and others is not None and var is not None:
                k = -2 - others.setdefault(id(var), len(others))
            return ("leaf", k, nr)
        edges = cast(Sequence[tuple[object, int]], getattr(node, "next_functions", ()))
        name = _SAME_NODE.get(type(node).__name__, type(node).__name__)
        return (name, nr, tuple(visit(child, k) for child, k in edges))

    try:
        history = visit(root.grad_fn, 0)
    except RuntimeError as e:  # (a view made under no_grad or by a multi-output op, whose base was written since)
        history = ("raises", str(e).split(".")[0])
    return (root.requires_grad, requires_grad_through_base(root), history, root._is_view())


def _compiled_outputs(
    outputs: Sequence[OutputInfo], graph: tuple[Sequence[object], Sequence[object]], values: Sequence[object]
) -> list[object]:
    """The compiled call's tensor outputs: the graph's (`graph`: its outputs after the inputs' updates, and the
    intermediate bases among them), or views of inputs, intermediate bases or earlier outputs (built first) the
    runtime replays after the graph ran (with grad on: their history is their source's as the graph's run left it);
    None for other outputs."""
    built: dict[int, object] = {}
    shared: dict[int, torch.Tensor] = {}  # the call's memo of rebuilt objects (Note [Output Regeneration])

    def build(o: int) -> object:
        if o not in built:
            info = outputs[o]
            built[o] = (
                None if info.kind is not OutputKind.TENSOR else _compiled_output(info, graph, values, build, shared)
            )
        return built[o]

    return [build(o) for o in range(len(outputs))]


def _compiled_output(
    info: OutputInfo,
    graph: tuple[Sequence[object], Sequence[object]],
    values: Sequence[object],
    earlier: Callable[[int], object],
    shared: dict[int, torch.Tensor],
) -> object:
    (fresh, bases), replay = graph, info.replay
    if replay is None and info.leaves[0].source is LeafSource.INTERMEDIATE_ALIAS:
        # (an intermediate base returned as itself, as the runtime returns it: `_returned_intermediate`)
        return intermediate_base(bases[info.leaves[0].index])
    if replay is None:
        out = cast(torch.Tensor, fresh[info.leaves[0].index])
        # (eager's is an inference tensor: the runtime's copy of it has no history either; a view of a graph
        # temporary without history is no view, as the runtime returns it)
        return out.detach() if info.inference or info.inference_leaves else fresh_output(out)
    sources = {
        ReplaySource.OUTPUT: earlier,
        ReplaySource.BASE: bases.__getitem__,
        ReplaySource.INPUT: values.__getitem__,
    }
    source = sources[replay.source](replay.index)
    if not isinstance(source, torch.Tensor):
        return None
    view = replay_from(source, 0, replay, MetaEvaluator(), {}, values, shared)
    return view.requires_grad_() if info.gains_grad else view  # (a new leaf: the runtime makes it one)


def _saves_left_written_inputs(
    values: Sequence[object],
    graph_values: Sequence[object],
    saved: Sequence[tuple[torch.Tensor, int]],
    graph_saved: Sequence[tuple[torch.Tensor, int]],
    written: set[object],
) -> bool:
    """Does eager's program save a new leaf over the storage of an input it wrote (a view of it made a leaf after a
    write under no_grad or through `.data`) where the graph's run saves nothing over that input's? The graph's is over
    the input's new value, computed apart, whose counter a caller's write of the input after the call leaves alone,
    while eager's backward then raises (Note [Training Without A Function])."""
    graph_keys = {storage_key(t) for t, _ in graph_saved}
    # (new leaves alone: an input saved as itself, as written, is the runtime's, Note [Training Without A Function])
    leaves = [t for t, _ in saved if t.requires_grad and t.grad_fn is None and not any(t is v for v in values)]
    for v, g in zip(values, graph_values, strict=True):
        if not isinstance(v, torch.Tensor) or not isinstance(g, torch.Tensor) or is_traceable_subclass(v):
            continue
        key = storage_key(v)
        if key in written and any(storage_key(t) == key for t in leaves) and storage_key(g) not in graph_keys:
            return True
    return False


def records_as_eager(
    call: Callable[..., object],
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced_graph: Callable[[], tuple[Callable[..., object], GraphOutputs]],
) -> bool:
    """Does running the traced forward (`traced_graph()`: the graph, traced only once eager's run passed, on the
    dense inputs, and where its fresh outputs start, after the inputs' updates) with grad on record the autograd graph eager's program records, on static fakes of this
    call's inputs? Note [Training Without A Function]; the plan-level conditions are `native_training_plan`'s."""
    mode, values = static_fake_copies(flat.values)
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    found = [(_as_found(t), grad_fn_or_none(t)) for t in tensors]  # (as the call passes them: `_left_as_found`)
    saved: list[tuple[torch.Tensor, int]] = []
    saved_at: list[int] = []  # per save: how many writes `seen` had noted

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((t, t._version))
        saved_at.append(len(seen.written))
        return t

    try:
        with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
            seen = _WriteSeen(pack)
            with torch.autograd.graph.saved_tensors_hooks(pack, _unpacked), seen:
                state, args, kwargs = unflatten_call(flat, values)
                outs = pytree.tree_leaves(call(state, args, kwargs))
        if len(outs) != len(analysis.outputs) or (seen.wrote and seen.other_hooks):
            return False
        if any(t._version != version for t, version in saved):  # eager's backward would find a saved tensor written
            return False
        # ... or read it as written, where the write moved no counter of its (through `.data`): the graph's saves hold
        # the values before the write
        if any(storage_key(t) in seen.written[at:] for (t, _), at in zip(saved, saved_at, strict=True)):
            return False
        # (eager's backward would read a storage the program resized; the graph's saves its own values)
        resized = {
            storage_key(cast(torch.Tensor, values[layout.leaves[r.leaf].owner])) for r in analysis.storage_resizes
        }
        if any(storage_key(t) in resized for t, _ in saved):
            return False
        # on fakes of the inputs as the call passes them, not as the program left them (Note [Training Without A
        # Function]): the compiled call runs the graph on the caller's inputs before anything of the program's; the
        # same fakes where eager's run left each as it found it (`_as_found`: no copy made twice)
        as_passed = not _gained_inputs(flat, analysis) and _left_as_found(tensors, found, set(seen.written))
        graph_mode, graph_values = (mode, values) if as_passed else static_fake_copies(flat.values)
        dense, graph_saved, mine_all, updates = _graph_run(
            flat, layout, analysis, traced_graph, graph_mode, graph_values
        )
    except Exception:  # a program the check cannot run: the Function stands
        return False
    # (an input whose counter the runtime moves after the graph ran, where eager's program moved it before its reads
    # saved it, `x.set_(x)`: the graph's saved input would fail eager's version check in the backward)
    bumped = {storage_key(dense[j]) for j, m in enumerate(analysis.mutations) if m.version_bumped}
    if any(storage_key(t) in bumped for t, _ in graph_saved):
        return False
    if _saves_left_written_inputs(values, graph_values, saved, graph_saved, set(seen.written)):
        return False
    if _saves_counted_outputs(analysis, graph_saved, mine_all):
        return False
    # (leaves among the outputs too: a history ending in a new leaf ends in the very leaf returned, as eager's)
    known = [*tensors, *outs]
    graph_known = [*(v for v in graph_values if isinstance(v, torch.Tensor)), *mine_all]
    others: tuple[dict[int, int], dict[int, int]] = ({}, {})
    for info, out, mine in zip(analysis.outputs, outs, mine_all, strict=True):
        if info.kind is not OutputKind.TENSOR:
            continue
        if not isinstance(out, torch.Tensor) or not isinstance(mine, torch.Tensor):
            return False
        if _autograd_shape(out, known, others[0]) != _autograd_shape(mine, graph_known, others[1]):
            return False
    return True


def _graph_run(
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced_graph: Callable[[], tuple[Callable[..., object], GraphOutputs]],
    mode: contextlib.AbstractContextManager[object],
    values: list[object],
) -> tuple[list[torch.Tensor], list[tuple[torch.Tensor, int]], list[object], list[tuple[InputUpdate, object]]]:
    """`records_as_eager`'s run of the traced forward with grad on, over fakes `values` of the inputs as the call
    passes them: the dense inputs, what it saved (with the counters then), the compiled call's tensor outputs, and
    each input update with its value."""
    graph, graph_outputs = traced_graph()  # (traced in the compile's own fake mode, outside this one)
    saved: list[tuple[torch.Tensor, int]] = []
    with torch.random.fork_rng(devices=[]), mode, torch.enable_grad():
        for k in _gained_inputs(flat, analysis):  # (as the runtime sets them before the graph runs)
            cast(torch.Tensor, values[k]).requires_grad_(True)
        dense = [cast(torch.Tensor, values[leaf.owner]) for leaf in layout.leaves]
        reals = [flat.values[k] for k in flat.tensor_indices]
        own = {j for i in own_accumulator_inputs(layout, reals) for j in layout.leaves_of_input[i]}
        graph_in = graph_example_inputs(layout, dense, own)  # (as runtime.call's, for these inputs)
        with torch.autograd.graph.saved_tensors_hooks(_saving(saved), _unpacked):
            graph_outs = list(cast(Sequence[object], graph(*graph_in)))
        fresh = graph_outs[len(graph_outputs.updates) :]
        bases = fresh[graph_outputs.num_fresh :]
        updates = list(zip(graph_outputs.updates, graph_outs, strict=False))
        return dense, saved, _compiled_outputs(analysis.outputs, (fresh, bases), values), updates


def _as_found(t: torch.Tensor) -> tuple[object, ...]:
    """What a graph run reads of a plain input fake (`records_as_eager`), that a program's run may change: its
    counter, storage, layout, flag and base; and its history, read last (a view's read after its counter moved
    would make a node: the counter differs first, and the history is not read)."""
    return (get_version(t), storage_key(t), t.shape, t.stride(), t.storage_offset(), t.requires_grad, t._base)


def _left_as_found(
    tensors: Sequence[torch.Tensor], found: Sequence[tuple[tuple[object, ...], object]], written: set[object]
) -> bool:
    """Did the program's run leave each of these plain input fakes as `_as_found` found it (before the run: with its
    history), history too, and write none of their storages (`written`: storage keys)?"""
    if any(is_traceable_subclass(t) or storage_key(t) in written for t in tensors):
        return False
    return all(_as_found(t) == f for t, (f, _) in zip(tensors, found, strict=True)) and all(
        grad_fn_or_none(t) is h for t, (_, h) in zip(tensors, found, strict=True)
    )


def _saves_counted_outputs(
    analysis: Analysis, graph_saved: Sequence[tuple[torch.Tensor, int]], outputs: Sequence[object]
) -> bool:
    """Is a save of the graph's run over an output the runtime would give eager's count once the graph ran
    (`_counted_after_graph`)? Eager's saving node saw the count, the graph's saved it at 0, and the backward's check
    of that save would raise: the Function gives the count before it saves instead (runtime/steps.py: Version
    Counters As Eager's). A program making new leaves compiles only on the native path: its outputs keep the count
    they are built with (`native_counts`)."""
    counted = _counted_after_graph(analysis) if graph_saved and not any(analysis.new_leaves) else []
    saved = {storage_key(t) for t, _ in graph_saved} if counted else set()
    return any(isinstance(m := outputs[k], torch.Tensor) and storage_key(m) in saved for k in counted)


def _counted_after_graph(analysis: Analysis) -> list[int]:
    """The outputs over the fresh outputs and intermediate bases that require grad from the graph and get eager's
    count (Analysis.graded_output_versions, base_versions): on the native path, given once the graph ran
    (`native_counts`)."""
    graded_bases = {b for b, _, graded in analysis.base_versions if graded}
    graded_roots = {root_bases for root_bases, _, graded in analysis.root_versions if graded}
    return [k for k, _ in analysis.graded_output_versions] + [
        k
        for k, info in enumerate(analysis.outputs)
        if (r := info.replay) is not None
        and (
            (r.source is ReplaySource.BASE and r.index in graded_bases)
            or (r.source is ReplaySource.WRAPPER and r.root_bases in graded_roots)
        )
    ]


def native_counts(analysis: Analysis) -> Analysis:
    """`analysis` for the native path (Note [Training Without A Function]): with no Function to give the counts of
    outputs and intermediate bases that require grad from the graph before it saves them, the runtime gives them once
    the graph ran, as the others' (`records_as_eager` found no graph save over them: runtime/steps.py: Version
    Counters As Eager's). A program making new leaves, which compiles only on this path, is left as it is: those
    outputs keep the count they are built with, which its graph's saves may have recorded."""
    if any(analysis.new_leaves) or not _counted_after_graph(analysis):
        return analysis
    return replace(
        analysis,
        output_versions=(*analysis.output_versions, *analysis.graded_output_versions),
        graded_output_versions=(),
        base_versions=tuple((b, count, False) for b, count, _ in analysis.base_versions),
        root_versions=tuple((root_bases, count, False) for root_bases, count, _ in analysis.root_versions),
    )


def refuse_new_leaves(flat: FlatInputs, analysis: Analysis, eager_backend: bool) -> NoReturn:
    """The program makes new autograd leaves (Analysis.new_leaves), which only autograd recording the eager backend's
    run of the graph makes as eager's (Note [Training Without A Function]), and that is not the compile's (or the call
    is made under no_grad)."""
    why = (
        "only the eager backend runs the graph's ops where autograd records them, in a call made with grad mode on; "
        "this compile's backend, or call, does not"
        if not eager_backend
        else "here it would not record eager's: the program writes an input, returns a view, an alias of an input or "
        "a tensor subclass, or computes what the outputs' histories pass through in a no_grad block, by detach() or "
        "in a custom autograd.Function"
    )
    marked = [flat.leaves[k].path for k, m in zip(flat.tensor_indices, analysis.leaf_marked, strict=True) if m]
    if marked:
        raise UnsupportedError(
            f"{marked[0]}: the program calls requires_grad_() (or sets `.requires_grad = True`) on this input, which "
            "does not require grad, after computing from it (or from another tensor over its storage) with grad mode "
            "on: eager's earlier results carry no autograd history and its later ones do. The compiled call "
            "reproduces that where it is the input's own graph that makes it require grad at that point, which "
            f"takes autograd recording the graph's run (Note [Training Without A Function]); {why}. Compile with "
            'backend="eager" a program that leaves its inputs unwritten and returns no view, call requires_grad_() '
            "before the input's first use, or outside the compiled function"
        )
    if any(analysis.new_leaves[k] for k in analysis.inference_new_leaves):
        raise UnsupportedError(
            "the program makes a tensor inside a torch.inference_mode() block require grad (requires_grad_(), "
            "`.requires_grad = True` or a factory's requires_grad=True) in a call made with grad mode on, and uses it "
            "after the block other than by returning it (computes from it with grad on, reads its flag or history): "
            "eager's is an inference tensor that is a new autograd leaf, which the histories of what the program "
            "computes from it with grad on end in; the compiled call gives an inference tensor the flag only once "
            "returned, where nothing else shows it. Compute from it inside the block, make it under torch.no_grad() "
            "instead, or call requires_grad_() on the output after the call"
        )
    # (a factory's requires_grad=True is eager's factory result given requires_grad_(): storage_swaps._DataMode._leaf)
    made = f"; here {analysis.grad_factories[0]}(..., requires_grad=True)" if analysis.grad_factories else ""
    raise UnsupportedError(
        "the program calls requires_grad_() (or sets `.requires_grad = True`) on a tensor that is not an input (a "
        f"view or an intermediate{made}) in a call made with grad mode on: eager makes it a new autograd leaf, which the outputs' "
        "histories end in, and the compiled call makes that leaf only where autograd, recording the graph's run, "
        f"records the graph eager's program records (Note [Training Without A Function]); {why}. Compile with "
        'backend="eager" a program that leaves its inputs unwritten, use torch.compile(fn, backend="subclassaot"), '
        "which splits the program there, or call requires_grad_() on the output after the call"
    )


def _gains_before_graph(analysis: Analysis, i: int) -> bool:
    """Does the program only turn tensor input `i`'s requires_grad on (never off), so that it requires grad when the
    program returns? The analysis took it as requiring grad from the start, and the runtime sets the flag on the
    caller's input before the graph runs (a no-op where it came requiring grad); `records_as_eager` checks that the
    graph's run so records eager's histories (what the program computed from it before the flag has none in eager)."""
    dropped = analysis.requires_grad_dropped[i] if analysis.requires_grad_dropped else True
    return analysis.requires_grad_set[i] and analysis.requires_grad_after[i] and not dropped


def _gained_inputs(flat: FlatInputs, analysis: Analysis) -> list[int]:
    """Flat positions of the inputs that come without requires_grad and that the runtime makes require grad before the
    graph runs (`_gains_before_graph`, not marked in the graph)."""
    return [
        k
        for i, (k, m) in enumerate(zip(flat.tensor_indices, analysis.leaf_marked, strict=True))
        if not m and _gains_before_graph(analysis, i) and not cast(torch.Tensor, flat.values[k]).requires_grad
    ]


def _drops_requires_grad(flat: FlatInputs, analysis: Analysis) -> bool:
    """Does the program end with an input that came requiring grad no longer requiring it (detach_(),
    requires_grad_(False), `.requires_grad = False`)? Eager's later results from it carry no history; the graph run
    on the caller's input, which still requires grad while it runs, would record one."""
    return any(
        cast(torch.Tensor, flat.values[k]).requires_grad and not after
        for k, after in zip(flat.tensor_indices, analysis.requires_grad_after, strict=True)
    )


def _gradless_inputs(flat: FlatInputs, analysis: Analysis) -> frozenset[int]:
    """The flat value indexes of the plain inputs that require grad neither as passed nor at any point of the program
    (requires_grad_() never called on them): autograd records nothing of them or of their views."""
    return frozenset(
        k
        for i, k in enumerate(flat.tensor_indices)
        if isinstance(v := flat.values[k], torch.Tensor)
        and not v.requires_grad
        and not analysis.requires_grad_set[i]
        and not analysis.requires_grad_after[i]
    )


def _input_view_replay(info: OutputInfo, new_leaves: bool, gradless: frozenset[int]) -> bool:
    """No replay, or a plain chain of views of an input (in a program making new leaves, also of an earlier output or
    of an intermediate the graph returns: the leaf itself, say), replayed on it after the graph ran as the inference
    runtime replays it (`records_as_eager` checks the history it gets); none of the replay's provisions for writes,
    set_(), `.data =` or metadata changed in place (which the plan excludes anyway), but for the counter at entry of
    an input in `gradless` (flat value indexes of inputs requiring grad neither as passed nor as the program leaves
    them), a view of which has no history either way: the runtime replays it as for a call that trains nothing."""
    replay = info.replay
    if replay is None:
        return True
    sources = (ReplaySource.INPUT, ReplaySource.OUTPUT, ReplaySource.BASE) if new_leaves else (ReplaySource.INPUT,)
    if replay.source not in sources:
        return False
    # (in a program making new leaves, a view of an input taken before the program wrote it, replayed on it before
    # the epilogue writes it, as the inference runtime replays it)
    early = new_leaves and replay.source is ReplaySource.INPUT and replay.before_epilogue
    # (a view of an input without grad, stale at the end: Note [Views That Raise After A Bump]; the graph's run
    # records nothing of it)
    entry = new_leaves and replay.source is ReplaySource.INPUT and replay.index in gradless and not early
    plain = Replay(
        source=replay.source,
        index=replay.index,
        steps=replay.steps,
        made=replay.made,
        split_made=replay.split_made,
        marks=replay.marks,
        before_epilogue=early,
        stale_view=replay.stale_view and entry,
        entry_counter=replay.entry_counter and entry,
    )
    return replay == plain


def _returned_intermediate(info: OutputInfo, leaf: OutputLeaf, new_leaves: bool) -> bool:
    """In a program making new leaves, is the output an intermediate base the graph returns, returned as itself (the
    leaf, say, with a view of it among the outputs), or a plain view chain of an earlier such output, replayed on it
    (Note [Training Without A Function])? The runtime returns the graph's value as it is (`intermediate_base`) and
    replays the view on it after the graph ran, as `_compiled_output` builds them for `records_as_eager` to compare."""
    if not new_leaves or leaf.source is not LeafSource.INTERMEDIATE_ALIAS:
        return False
    if leaf.foreign_base is not None or leaf.hidden_base is not None or leaf.set_steps is not None:
        return False
    if leaf.input_layout or leaf.from_base:
        return False
    if info.replay is None:
        return leaf.same_object and not leaf.is_view
    return info.replay.source is ReplaySource.OUTPUT


def _writes_outside_autograd(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> bool:
    """Are the program's input writes, if any, in a program that makes new leaves, data writes and in-place view ops
    alone (no set_() or `.data =`) on plain inputs that require grad neither as passed nor as the program leaves them
    (resize_()s that grow their storage too), or that require it throughout and are written under no_grad alone (not
    grown)? Autograd records nothing of those in eager, and the runtime's epilogue writes them (and replays the view
    ops and resize_()s) as it does for a call that trains nothing (Note [Training Without A Function])."""
    changed = [
        (flat.tensor_indices.index(layout.leaves[j].owner), m)
        for j, m in enumerate(analysis.mutations)
        if m.any or m.version_bumped
    ]
    if any(m.storage_changed or m.swapped for _, m in changed):
        return False
    # (one that requires grad: written under no_grad alone, where autograd records none of it in eager either)
    hidden = {i for i, m in changed if not m.autograd_visible and (not m.metadata or m.metadata_hidden)}
    hidden -= {i for i, m in changed if m.autograd_visible or (m.metadata and not m.metadata_hidden) or m.resized}
    reshaped = [i for i, ops in enumerate(analysis.inplace_view_ops) if ops]
    for i in {i for i, _ in changed} | set(reshaped):
        value = flat.values[flat.tensor_indices[i]]
        if not any(analysis.new_leaves) or not isinstance(value, torch.Tensor):
            return False
        flags = (value.requires_grad, analysis.requires_grad_after[i])
        if flags != (False, False) and (flags != (True, True) or i not in hidden):
            return False
    return True


def _resizes_outside_autograd(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> bool:
    """Are the program's storage resizes, if any, in a program that makes new leaves, of the storages of inputs that
    require no grad, or that autograd sees no write of (a resize is none)? The runtime resizes them around the graph's
    run as for a call that trains nothing; a tensor saved for the backward over such a storage keeps the program off
    this path (`records_as_eager`)."""
    return not analysis.storage_resizes or (
        any(analysis.new_leaves)
        and all(
            not cast(torch.Tensor, flat.values[layout.leaves[r.leaf].owner]).requires_grad
            or not analysis.mutations[r.leaf].autograd_visible
            for r in analysis.storage_resizes
        )
    )


def _self_sets_outside_autograd(flat: FlatInputs, analysis: Analysis) -> bool:
    """Are the program's `x.set_(x)` calls under no_grad, if any, in a program that makes new leaves, on inputs that
    require grad neither as passed nor as the program leaves them? It renews no gradient accumulator of theirs (Note
    [Gradient Accumulators Of Leaves]), and the runtime redoes it around the graph's run as for a call that trains
    nothing."""
    set_on = [i for i, s in enumerate(analysis.self_set) if s]
    if set_on and not any(analysis.new_leaves):
        return False
    return not any(
        cast(torch.Tensor, flat.values[flat.tensor_indices[i]]).requires_grad or analysis.requires_grad_after[i]
        for i in set_on
    )


def _groups_outside_autograd(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> bool:
    """Are the inputs traced as views of one synthetic base (Note [Synthetic Bases]), if any, in a program that makes
    new leaves, inputs that require grad neither as passed nor as the program leaves them? The graph runs on a flat
    view of their storage, where autograd records nothing of theirs, as eager's does not (Note [Training Without A
    Function])."""
    members = {layout.leaves[m].owner for g in layout.groups for m in g.members}
    if members and not any(analysis.new_leaves):
        return False
    for k in members:
        i = flat.tensor_indices.index(k)
        if cast(torch.Tensor, flat.values[k]).requires_grad or analysis.requires_grad_after[i]:
            return False
    return True


def native_training_plan(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> bool:
    """The plan-level conditions of Note [Training Without A Function]: plain inputs that share no storage, nothing
    written, moved or re-laid out, no requires_grad or autograd-state business, and outputs that are the graph's
    own plain tensors (or constants, sizes, inputs returned as they came, plain view chains of inputs)."""
    if any(tree is not None for tree in layout.trees) or not _groups_outside_autograd(flat, layout, analysis):
        return False
    if not _writes_outside_autograd(flat, layout, analysis):
        return False
    if analysis.data_assigned or any(d is not None for d in analysis.wrapper_data) or analysis.wrapper_storage:
        return False
    # (an input marked in the graph: its flag is the graph's business; in a program making new leaves, one it only
    # turns on, which the runtime turns on before the graph runs: Note [Training Without A Function])
    flags = any(
        s and not m and not (any(analysis.new_leaves) and _gains_before_graph(analysis, i))
        for i, (s, m) in enumerate(zip(analysis.requires_grad_set, analysis.leaf_marked, strict=True))
    )
    # (the reads' answers are eager's, replayed by the trace: only a program making new leaves has no other path)
    reads = bool(analysis.autograd_reads or analysis.base_reads) and not any(analysis.new_leaves)
    if flags or reads or analysis.grad_reenabled or any(analysis.gains_last):
        return False
    if _drops_requires_grad(flat, analysis):
        return False
    if not _resizes_outside_autograd(flat, layout, analysis):
        return False
    if not _self_sets_outside_autograd(flat, analysis):
        return False
    if any(analysis.kept_accumulators) or any(
        s is not None for s in (*analysis.accumulator_sizes, *analysis.releaf_sizes)
    ):
        return False
    gradless = _gradless_inputs(flat, analysis)
    for info in analysis.outputs:
        if info.kind in (OutputKind.CONSTANT, OutputKind.SYMINT, OutputKind.IS_INPUT, OutputKind.SAME_AS):
            continue
        if info.tree is not None or not _input_view_replay(info, any(analysis.new_leaves), gradless):
            return False
        if len(info.leaves) != 1 or info.function_view is not None or info.view_of_fresh:
            return False
        leaf, replayed = info.leaves[0], info.replay is not None
        source = LeafSource.INPUT_ALIAS if replayed else LeafSource.GRAPH
        if info.replay is not None and info.replay.source is ReplaySource.BASE:
            source = LeafSource.INTERMEDIATE_ALIAS  # (a view of an intermediate the graph returns, replayed on it)
        if leaf.source is not source and not _returned_intermediate(info, leaf, any(analysis.new_leaves)):
            return False
        if leaf.passthrough is not None or leaf.function_view:
            return False
        inference = info.inference or bool(info.inference_leaves)
        # (a view made a new leaf is replayed and made one; an inference tensor is the graph's value, copied)
        if (info.gains_grad and not replayed) or info.base_gains_grad or (inference and replayed):
            return False
        if info.data_from is not None or info.data_meta is not None or info.set_under_grad or info.history_size:
            return False
    return True
