"""Stage `trace` (training), refusals of deferred backward errors around leaves and views (Note [Backward Errors Are
Deferred], leaves outside the Function and leaf views replayed before the call): leaves eager grades before the
failing node, set_() nodes and reads beside returned leaves, and views replayed on a base the program changed.

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis` and the traced backward's error.
Output: nothing, or an UnsupportedError naming the input and the rule.
Invariants: pure reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.backward_probe import (
    BackwardEnd,
    TangentPatterns,
    probe_eager_backward,
    reaches_output_node,
)
from subclassaot.pipeline.joint import (
    JointSetup,
)
from subclassaot.pipeline.rules.backward_errors import (
    early_leaf_views,
    refuse_changed_leaf_views,
)
from subclassaot.runtime.steps import (
    early_grad_sets,
)
from subclassaot.schemas import (
    Analysis,
    DenseLayout,
    InputIndex,
    OutputKind,
    ReplaySource,
)


def _early_beside_unverified(
    setup: JointSetup, patterns: TangentPatterns | None, reach: Sequence[frozenset[int]], error: RuntimeError
) -> frozenset[int]:
    """Where the raising sets are not verified (no `_deferred_exactly`) but outputs are views the runtime rebuilds
    from a leaf input (`TangentPatterns.leaf_bypass`), and eager's backward through some set of outputs with one of
    them raises before any gradient: those views replayed before the call, so that their nodes run after the
    Function's and the epilogue's, as eager's ran after its failing node, where no such set gives a leaf its gradient
    first (Note [Probing Eager's Backward]); else none. A view of a leaf the program changes, which no replay before
    the call keeps older than the failing node: refused (`refuse_changed_leaf_views`)."""
    if patterns is None:
        return frozenset()
    outputs = setup.analysis.outputs
    # (an output set_() under grad gets a set_ node of its own, numbered above every node, as eager's)
    views = {
        o
        for o in patterns.leaf_bypass
        if outputs[o].kind is OutputKind.TENSOR
        and not outputs[o].set_under_grad
        and (r := outputs[o].replay) is not None
        and r.source is ReplaySource.INPUT
        and not r.then_set
    }
    ends = probe_eager_backward(setup.call, setup.flat) if views else None
    with_views = [end for chosen, end in (ends or {}).items() if chosen & views]
    if BackwardEnd.RAISES not in with_views:
        return frozenset()  # (after the call, the views' nodes run first: as eager's where it completes)
    attached = {
        InputIndex(setup.flat.tensor_indices[i])
        for k, i in enumerate(setup.grad_inputs)
        if k < len(reach) and reach[k] & patterns.full
    }
    raising = {o for chosen, end in (ends or {}).items() if end is BackwardEnd.RAISES for o in chosen & views}
    refuse_changed_leaf_views(setup.analysis, setup.flat, setup.layout, raising, attached, error)
    early = early_leaf_views(setup.analysis, setup.flat, setup.layout, patterns.leaf_bypass, attached)
    if early is None or BackwardEnd.RAISES_AFTER_GRADS in with_views:
        return frozenset()  # (a view of a leaf the program changes: a known gap, Note [Probing Eager's Backward])
    return early


def _refuse_returned_leaves_unprobed(setup: JointSetup, returned: frozenset[int], error: RuntimeError) -> None:
    """Refuse a raising backward where eager's probe, with the leaves at `returned` (tensor input positions) returned
    as themselves, left one of them a gradient other than the compiled backward gives it (Note [Backward Errors Are
    Deferred])."""
    paths = ", ".join(setup.flat.leaves[setup.flat.tensor_indices[i]].path for i in sorted(returned))
    raise UnsupportedError(
        f"{paths} (an autograd leaf returned as itself) and the program's backward fails in eager ({error}): eager's "
        "backward through the outputs does not give that leaf its gradient as the compiled one would (it raises "
        "before the leaf's AccumulateGrad runs, say at the engine's check of a root's gradient against an output "
        "whose size `.data =` changed, which precedes every node), where the compiled backward raises in its own "
        "node, after that leaf's AccumulateGrad, a root, gave it its gradient (Note [Backward Errors Are Deferred]); "
        "not supported in training. Return a clone of the leaf"
    ) from error


def refuse_set_beside_returned_leaves(
    setup: JointSetup, reach: Sequence[frozenset[int]], returned: frozenset[int]
) -> None:
    """An input set_() under grad and returned beside a leaf the Function takes detached, in a raising backward,
    whose set_ node the runtime cannot place where eager's is (Note [set_ Under Grad]).
    `returned`: tensor input positions of the leaves given to the Function detached."""
    flat, layout, analysis = setup.flat, setup.layout, setup.analysis
    reals = [flat.values[index] for index in flat.tensor_indices]
    read = {i for k, i in enumerate(setup.grad_inputs) if k < len(reach) and reach[k]}
    early = early_grad_sets(analysis, layout)
    # outputs the Function computes (not an input, nor regenerated from one after the epilogue)
    computed = [
        o
        for o, info in enumerate(analysis.outputs)
        if info.kind is OutputKind.TENSOR and (info.replay is None or info.replay.source is not ReplaySource.INPUT)
    ]
    for o, info in enumerate(analysis.outputs):
        if info.kind is not OutputKind.IS_INPUT or info.input_index is None or not computed:
            continue
        real = flat.values[info.input_index]
        same = [t for t, r in enumerate(reals) if r is real]  # the same object passed at several positions
        if any(t in returned for t in same) or not read.intersection(same):
            continue
        late = [t for t in same if t not in early]  # its set_ node made in the epilogue
        if not any(analysis.mutations[j].set_under_grad for t in late for j in layout.leaves_of_input[t]):
            continue
        if reaches_output_node(setup.call, flat, computed, [o]) is False:
            continue  # eager's set_ node waits behind no node of the program either
        raise UnsupportedError(
            f"{flat.leaves[info.input_index].path} is set_() with grad enabled and returned, beside a leaf input "
            "returned as itself, in a backward that raises: eager's set_ node waits behind the program's nodes that "
            "read it after the set_(), which orders that leaf's gradient against its error as the compiled program's "
            "set_ node, made after its call, cannot (Note [set_ Under Grad]). Return a clone of the leaf, or read a clone of the set_() input"
        )


def refuse_reads_around_self_set(setup: JointSetup, error: Exception) -> None:
    """Refuse a raising backward where the program read a leaf with grad both before and after its set_() under
    no_grad, by ops whose results live on (Note [Gradient Accumulators Of Leaves])."""
    flat, analysis = setup.flat, setup.analysis
    # outputs eager's backward reaches the leaf's last accumulator through outside the Function: the input itself,
    # or a view the runtime regenerates from an input
    outside = any(
        info.kind is OutputKind.IS_INPUT or (info.replay is not None and info.replay.source is ReplaySource.INPUT)
        for info in analysis.outputs
    )
    for i in setup.grad_inputs:
        real = flat.values[flat.tensor_indices[i]]
        if outside and analysis.self_set_mixed[i] and isinstance(real, torch.Tensor) and real.is_leaf:
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path} is set_() under no_grad (to itself or to another "
                "tensor) and read with grad both before and after its last such set_(), by ops whose results live on, "
                f"and the program's backward fails in eager ({error}): "
                "eager's nodes feed two gradient accumulators of that leaf, the output that is (a view of) it the "
                "last one, which the compiled Function's one edge cannot reproduce, nor so which gradients eager "
                "accumulates before it raises (Note [Gradient Accumulators Of Leaves]). Read a clone "
                "of it on one side of the set_()"
            ) from error


def _returned_leaves(
    setup: JointSetup, patterns: TangentPatterns | None, reach: Sequence[frozenset[int]]
) -> frozenset[int]:
    """Tensor input positions of the leaves of Note [Backward Errors Are Deferred]."""
    if patterns is None:
        return frozenset()
    flat, analysis = setup.flat, setup.analysis
    returned = {info.input_index for info in analysis.outputs if info.kind is OutputKind.IS_INPUT}
    out = set()
    for k, i in enumerate(setup.grad_inputs):
        real = flat.values[flat.tensor_indices[i]]
        if not (isinstance(real, torch.Tensor) and real.is_leaf) or flat.tensor_indices[i] not in returned:
            continue
        muts = [analysis.mutations[j] for j in setup.layout.leaves_of_input[i]]
        if k < len(reach) and not reach[k] & patterns.full and not any(m.any or m.version_bumped for m in muts):
            out.add(i)
    return frozenset(out)


def _view_replay_refusal(layout: DenseLayout, analysis: Analysis, error: Exception) -> UnsupportedError:
    """Note [Backward Errors Are Deferred]."""
    named = _replayed_views(layout, analysis)
    first = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if not named:  # no input's storage or layout changed: an op's backward formula raised while traced
        return UnsupportedError(
            f"the program's backward raises while it is traced ({first}), with no view of a changed input to "
            "replay: an op's backward formula fails on these inputs (as eager's backward of a jagged NestedTensor's "
            "softmax over its last dim does, its forward running); not supported in training. Run the program under "
            "torch.no_grad(), or use an op whose backward supports the input"
        )
    return UnsupportedError(
        f"{named}: the program's backward fails rebuilding the autograd history of a view ({first}): autograd "
        "replays the view's ops on the tensor it is a view of, which the program set_() or changed in place to a "
        "layout they do not apply to (Note [Backward Errors Are Deferred]); eager's backward fails so for a subclass "
        "view, but such a failure is not deferred to the backward: not supported in training. Compute from a clone "
        "of the view, or set_() a clone of its base"
    )


def _replayed_views(layout: DenseLayout, analysis: Analysis) -> str:
    """Paths of the tensor inputs that are views of another input whose storage or layout the program changed
    ("args[0] (a view of args[2])"), else of the inputs whose storage or layout it changed."""

    def changed(i: int) -> bool:
        return any(analysis.mutations[j].swapped or analysis.mutations[j].metadata for j in layout.leaves_of_input[i])

    def path(i: int) -> str:
        return layout.leaves[layout.leaves_of_input[i][0]].path.split(".")[0]

    views = [
        f"{path(i)} (a view of {path(k)})"
        for i, k in enumerate(layout.view_of)
        if k is not None and layout.leaves_of_input[i] and layout.leaves_of_input[k] and changed(k)
    ]
    if views:
        return ", ".join(views)
    return ", ".join(path(i) for i in range(len(layout.trees)) if layout.leaves_of_input[i] and changed(i))


def _refuse_view_replay_limit(error: Exception) -> None:
    """Refuse a traced backward that fails by a limit of autograd's view replay, not by the program's own error."""
    if "CopySlices returned an invalid gradient" in str(error):
        # A limit of autograd's view replay, which it uses on functional tensors: a write through a view whose
        # shape an in-place view op changed replays the view without that op; eager's
        # backward, which takes the view with as_strided, runs.
        raise UnsupportedError(
            f"the program writes in place through a view whose shape an in-place view op changed (t = x.t(); "
            f"t.unsqueeze_(0); t.add_(1)), and its traced backward fails ({error}) where eager's runs: autograd "
            "replays such a view without the in-place view op under functionalization; not supported in training. "
            "Use the out-of-place view op (t = t.unsqueeze(0)), or write under torch.no_grad()"
        ) from error
