"""Stage `runtime` (training): the forward and backward graphs inside one autograd.Function.

Input: the `RuntimePlan`, the compiled forward and backward callables and the `BackwardPlan`.
Output: a `GraphCall` for `runtime.make_runner`: it runs the forward graph through the Function so that autograd
sees user-level tensors (subclass outputs wrapped inside the Function, subclass gradients rebuilt from dense ones).
Invariants: autograd happens above subclass desugaring; saved values are what the partitioned forward returns after
its GraphOutputs (tensors through save_for_backward, symbolic ints on ctx); a saved primal the epilogue is about to
mutate is copied first. See Note [Training Through A Joint Graph].
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from subclassaot.authoring.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.plan import (
    BackwardPlan,
    EagerSave,
    EagerSaves,
    GraphCall,
    GraphRunResult,
    MetaEvaluator,
    RetracedBackward,
    RuntimePlan,
    SettlingCall,
    non_view_alias,
    wrapper_write_recorded,
)
from subclassaot.runtime.regenerate import fresh_outer_stride, replay_steps, root_leaf_values, root_outer_stride
from subclassaot.runtime.steps import (
    base_write_hidden,
    epilogue_plan,
    epilogue_write_hidden,
    function_counts,
    training_roots,
)
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    FlatInputs,
    FunctionSlot,
    LeafSource,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    UpdateKind,
)
from subclassaot.torch_internals import (
    compiled_call_under_transform_message,
    differentiable_dtype,
    get_version,
    grad_fn_raises,
    output_zeros,
    set_version,
    storage_address,
    storage_key,
)

log = logging.getLogger(__name__)


def _unshared(result: Sequence[Any], grads: Sequence[object]) -> Sequence[Any]:
    """The Function's plain gradients, each a view of a received tangent replaced by a copy (Note [Gradient Accumulators
    Of Leaves]): the graph may reach an input by views alone where eager's nodes compute a new tensor (the
    as_strided backward of a view regenerated after an in-place change of its base), and AccumulateGrad would take
    the view, sharing the caller's memory where eager's `.grad` does not. (A copy where eager's takes a view is
    what eager does whenever someone else holds the gradient.)"""
    for r in result:  # (a loop, not a comprehension: this runs in every backward, mostly finding no view)
        if type(r) is torch.Tensor and r._is_view():
            break
    else:
        return result
    held = {storage_address(g) for g in grads if type(g) is torch.Tensor}
    out = list(result)
    for k, r in enumerate(result):
        if type(r) is torch.Tensor and r._is_view() and storage_address(r) in held:
            out[k] = r.clone()
    return out


def _tangent_leaves(g: torch.Tensor, expected: SubclassNode | None, *, coerce_ctx: bool) -> list[torch.Tensor] | None:
    """Dense leaves of a runtime tangent, coerced to the structure the backward graph was traced for by the
    subclass's hooks; None where it has another structure that no hook converts (Note [Tangent Retrace]). Another
    ctx of the same class is converted only with `coerce_ctx` (the fallback where a backward for the tangent's own
    ctx cannot be traced): eager's gradient takes its metadata from the tangent's."""
    if expected is None:
        return [g] if type(g) is torch.Tensor or not is_traceable_subclass(g) else None
    if not is_traceable_subclass(g) or type(g) is not expected.cls:
        coerce = getattr(expected.cls, "__coerce_tangent_from__", None)
        coerced = coerce(g, expected.ctx) if coerce is not None else None
        if coerced is None:
            return None
        g = coerced
    node, leaves = flatten_subclass(g, "grad")
    if node.ctx != expected.ctx:
        # Other metadata than the output's (a Replicate tangent for a Shard output): reading it with the traced
        # metadata would be a wrong gradient; the subclass converts it (same values, the traced metadata).
        coerce_same = getattr(g, "__coerce_same_metadata_as_tangent__", None) if coerce_ctx else None
        coerced = coerce_same(expected.ctx) if coerce_same is not None else None
        if coerced is None:
            return None
        node, leaves = flatten_subclass(coerced, "grad")
    return leaves


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


def _shared_grads(grads: Sequence[torch.Tensor | None]) -> frozenset[int]:
    seen: set[int] = set()
    shared: set[int] = set()
    for g in grads:
        if g is not None:
            (shared if id(g) in seen else seen).add(id(g))
    return frozenset(shared)


# per leaf behind an input that output views replayed before the call are taken of: (InputIndex, the leaf, its
# `.grad` as the forward found it: (id, version), or None, and the input's version counter then)
_LeafGrads = Sequence[tuple[int, "weakref.ref[torch.Tensor]", tuple[int, int] | None, int]]


def _grad_mark(t: torch.Tensor) -> tuple[int, int] | None:
    g = t.grad
    return None if g is None else (id(g), get_version(g))


def _early_sources(analysis: Analysis, bw_meta: BackwardPlan) -> tuple[int, ...]:
    """The inputs (InputIndex) that output views replayed before the call are taken of, where the backward raises
    the program's error (Note [Backward Errors Are Deferred])."""
    if bw_meta.error is None:
        return ()
    replays = [info.replay for info in analysis.outputs if info.replay is not None]
    return tuple(sorted({r.index for r in replays if r.before_epilogue and r.source is ReplaySource.INPUT}))


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


class _Same:
    """The marker for a tangent that has the traced structure (after the subclass's hooks)."""


_SAME = _Same()
TangentTree = SubclassNode | None | _Same


def _collect_tangents(
    grads: Sequence[torch.Tensor | None],
    bw_meta: BackwardPlan,
    zeros: list[list[ZeroMeta]],
    outer: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
    kept: Mapping[int, Mapping[int, torch.Tensor]] | None = None,
) -> tuple[list[list[torch.Tensor]], list[TangentTree], set[int], dict[int, list[torch.Tensor]]]:
    """Per diff output: the tangent's dense leaves and its structure (_SAME: the traced one); the outputs that got
    a tangent (the others get zeros: for a subclass output, what its class's zeros_like gives, as eager's engine
    materializes it: zeros for every inner tensor can mean no value at all, a Float8Tensor's scale 0); per output
    whose tangent has another ctx, its leaves converted to the traced ctx by the subclass, where it can (the fallback
    of a failed retrace, Note [Tangent Retrace]). `kept`: per diff output, the inner tensors it shares with its input
    (`_kept_leaves`), which its zeros share too."""
    per_output: list[list[torch.Tensor]] = []
    trees: list[TangentTree] = []
    present: set[int] = set()
    coerced: dict[int, list[torch.Tensor]] = {}
    for k, i in enumerate(bw_meta.diff_outputs):
        g = grads[i]
        tree = bw_meta.tangent_trees[k]
        if g is None and tree is not None and outer is not None:
            g = _zeros_like_output(tree, zeros[k], *outer[k], kept.get(k, {}) if kept else {})
        if g is None:
            per_output.append([torch.zeros(shape, dtype=dtype, device=device) for shape, dtype, device in zeros[k]])
            trees.append(_SAME)
            continue
        present.add(k)
        leaves = _tangent_leaves(g, bw_meta.tangent_trees[k], coerce_ctx=False)
        if leaves is not None:
            per_output.append(leaves)
            trees.append(_SAME)
        else:
            tree, dense = flatten_subclass(g, "grad") if is_traceable_subclass(g) else (None, [g])
            per_output.append(list(dense))
            trees.append(tree)
            if (fallback := _tangent_leaves(g, bw_meta.tangent_trees[k], coerce_ctx=True)) is not None:
                coerced[k] = fallback
    return per_output, trees, present, coerced


def _zeros_like_output(
    tree: SubclassNode,
    metas: list[ZeroMeta],
    size: tuple[int, ...],
    stride: tuple[int, ...],
    kept: Mapping[int, torch.Tensor],
) -> torch.Tensor | None:
    """The class's own zeros_like of an output of this structure (built over uninitialized leaves it never reads),
    where it is not simply zeros in every inner tensor of the same class (then None: the tangent stays absent, as
    traced). The inner tensors in `kept` are the output's own (a NestedTensor's offsets, which fix its ragged size)."""
    if tree.cls in _ZEROS_ARE_ZERO_LEAVES:
        return None
    leaves = [
        kept[p] if p in kept else torch.empty(shape, dtype=dtype, device=device)
        for p, (shape, dtype, device) in enumerate(metas)
    ]
    template = unflatten_subclass(tree, leaves, outer_size=size, outer_stride=stride, check_dtype_device=False)
    with torch.no_grad():
        zero = torch.zeros_like(template)
        if type(zero) is type(template) and is_traceable_subclass(zero):
            if all(not bool(leaf.any()) for leaf in flatten_subclass(zero, "zero")[1]):
                _ZEROS_ARE_ZERO_LEAVES.add(tree.cls)  # (decided once per class: PairTensor's, say)
                return None
    return zero


# classes whose zeros_like is zeros in every inner tensor, of the same class
_ZEROS_ARE_ZERO_LEAVES: set[type] = set()


def _plain_tangents(
    grads: Sequence[torch.Tensor | None], bw_meta: BackwardPlan, zeros: list[list[ZeroMeta]]
) -> tuple[list[list[torch.Tensor]], list[TangentTree], set[int], dict[int, list[torch.Tensor]]] | None:
    """`_collect_tangents` where every traced tangent is a plain tensor and every runtime one is one or None (the
    common case, without its per-output calls); None where some tangent is not (that function decides)."""
    per_output: list[list[torch.Tensor]] = []
    present: set[int] = set()
    for k, i in enumerate(bw_meta.diff_outputs):
        g = grads[i]
        if g is None:
            per_output.append([torch.zeros(shape, dtype=dtype, device=device) for shape, dtype, device in zeros[k]])
        elif type(g) is torch.Tensor:
            per_output.append([g])
            present.add(k)
        else:
            return None
    return per_output, [_SAME] * len(per_output), present, {}


def _coerced_instead(
    per_output: list[list[torch.Tensor]], trees: list[TangentTree], coerced: dict[int, list[torch.Tensor]]
) -> bool:
    """Put the subclass-converted tangents in place of those of another ctx (`_collect_tangents`), where every
    retyped tangent has one; False (nothing changed) otherwise."""
    retyped = [k for k, tree in enumerate(trees) if tree is not _SAME]
    if not all(k in coerced for k in retyped):
        return False
    for k in retyped:
        per_output[k], trees[k] = coerced[k], _SAME
    return True


class _Variants:
    """Backward graphs for tangent structures other than the traced one, traced on first sight (Note [Tangent
    Retrace]) by the compile's own callable (Note [Tangent Retrace]); keyed by the
    tangents' structure and dense sizes, strides and dtypes."""

    def __init__(self) -> None:
        # None: a retrace for missing tangents only that failed; the compiled backward runs (Note [Tangent
        # Retrace])
        # (an UnsupportedError: a retrace for other tangent types that failed, raised again without tracing)
        self._cache: list[tuple[object, RetracedBackward | UnsupportedError | None]] = []
        self._lock = threading.Lock()

    def get(
        self,
        bw_meta: BackwardPlan,
        trees: list[TangentTree],
        per_output: list[list[torch.Tensor]],
        absent: frozenset[int] = frozenset(),
        zeros: Sequence[Sequence[ZeroMeta]] = (),
    ) -> RetracedBackward | None:
        """`zeros`: per diff output, its dense leaves' sizes (dtypes, devices) in this call (ctx.zeros)."""
        resolved = [bw_meta.tangent_trees[k] if isinstance(tree, _Same) else tree for k, tree in enumerate(trees)]
        key = (resolved, [[(t.shape, t.stride(), t.dtype) for t in ts] for ts in per_output], absent)
        with self._lock:
            for seen, found in self._cache:
                if seen == key:
                    if isinstance(found, UnsupportedError):
                        raise found
                    return found
            reasons = [
                f"output {bw_meta.diff_outputs[k]}: a {_describe(tree)} tangent, traced for "
                f"{_describe(bw_meta.tangent_trees[k])}"
                for k, tree in enumerate(trees)
                if not isinstance(tree, _Same)
            ]
            reasons += [f"output {bw_meta.diff_outputs[k]}: no tangent" for k in sorted(absent)]
            log.info("retracing the backward for new tangent types: %s", "; ".join(reasons))
            try:
                variant = bw_meta.retrace(resolved, per_output, absent, [[z[0] for z in zs] for zs in zeros])
            except UnsupportedError as e:
                if any(not isinstance(tree, _Same) for tree in trees):
                    self._cache.append((key, e))
                    raise
                log.info("the retrace for missing tangents failed; running the compiled backward")
                self._cache.append((key, None))
                return None
            self._cache.append((key, variant))
            return variant


def _describe(tree: SubclassNode | None) -> str:
    return "plain" if tree is None else f"{tree.cls.__name__} (ctx {tree.ctx!r})"


def _dense_strides(sizes: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """The strides of a dense tensor whose dims, outermost first, are `order` (Note [Tangent Retrace])."""
    out = [1] * len(sizes)
    step = 1
    for d in reversed(order):
        out[d] = step
        step *= max(sizes[d], 1)
    return tuple(out)


def _restride(t: torch.Tensor, stride: tuple[int, ...] | None) -> torch.Tensor:
    """A tangent in the traced strides (None: its own), without a negative bit (`_neg_view(g)`): the backward graph
    was traced for tangents without one, and inductor's kernels read the storage as it is (wrong values)."""
    if stride is None or tuple(t.stride()) == stride and not t.is_neg():
        return t.resolve_neg()  # (t itself where it has no bit)
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


ZeroMeta = tuple[torch.Size, torch.dtype, torch.device]


def _dense_zeros(t: torch.Tensor) -> list[ZeroMeta]:
    """What zero tangents for `t`'s dense leaves need (shape, dtype, device only: nothing is kept alive)."""
    if type(t) is torch.Tensor or not is_traceable_subclass(t):
        return [(t.shape, t.dtype, t.device)]
    return [(leaf.shape, leaf.dtype, leaf.device) for leaf in flatten_subclass(t, "out")[1]]


GroupSource = tuple[int, tuple[int, ...], tuple[int, ...], int]
# per apply of the program's Functions: FunctionOutputs' layout, the outputs it rebuilds (`_function_slots`)
# and those of them whose counter is advanced once built (FunctionSlot.bumped)
_Slots = tuple[tuple[tuple[int | None, ...], tuple[int, ...], frozenset[int]], ...]


def _member_of(outs: Sequence[object], source: GroupSource) -> torch.Tensor:
    """A group member's leaf as a view of its group's new base (a graph output)."""
    k, size, stride, offset = source
    return cast(torch.Tensor, outs[k]).as_strided(size, stride, offset)


def _ints(dims: Sequence[object]) -> tuple[int, ...]:
    assert all(isinstance(d, int) for d in dims), "BUG: alias-group metadata must be static"
    return tuple(int(cast(int, d)) for d in dims)


def _passthrough(
    graph_dense: list[torch.Tensor], leaf: OutputLeaf, ev: MetaEvaluator, symbols: dict[str, int]
) -> torch.Tensor:
    assert leaf.passthrough is not None
    source = graph_dense[leaf.passthrough]
    if leaf.passthrough_alias:
        # an alias the subclass's dispatch made of an input's inner tensor (a Float8 detach()'s `_scale`): no view,
        # with a counter of its own, as a view op below autograd makes it
        return non_view_alias(source, ev.meta(leaf.meta, symbols))
    if not leaf.is_view:
        # An inner tensor of a subclass input is no input of the Function: returned as is, it would take the
        # Function's history itself. Where the program's Function made a view of it (DTensor.to_local: view_as),
        # so do we (Note [Custom Functions]); an inner tensor a wrapper output shares with an
        # input (a jagged output's offsets) is the input's own object, as in eager.
        return source.view_as(source) if leaf.function_view else source
    if leaf.passthrough_base is not None:  # Note [Custom Functions]
        source = non_view_alias(source, ev.meta(leaf.passthrough_base, symbols))
    return source.as_strided(*ev.meta(leaf.meta, symbols))


def _contiguous_strides(size: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(size):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


class _Step:
    """What one compile's `CompiledStep` reads per call, decided once (the Function's forward and backward are
    shared by every compile and find it in their first argument)."""

    def __init__(
        self,
        plan: RuntimePlan,
        fw: Callable[..., object],
        bw: Callable[..., object] | None,
        bw_meta: BackwardPlan,
        differentiable_backward: bool,
        eager_saves: EagerSaves,
    ) -> None:
        analysis, layout, flat = plan.analysis, plan.layout, plan.flat
        self.plan, self.fw, self.bw, self.bw_meta = plan, fw, bw, bw_meta
        self.differentiable_backward = differentiable_backward
        self.n_updates = n_updates = len(plan.graph_outputs.updates)
        self.fresh_outputs = fresh_outputs = tuple(
            o
            for o, info in enumerate(analysis.outputs)
            if info.kind is OutputKind.TENSOR and all(leaf.source is LeafSource.GRAPH for leaf in info.leaves)
        )
        # fresh graph leaves of outputs that are not wholly fresh (rebuilt beside inner tensors of inputs)
        in_fresh_outputs = {leaf.index for o in fresh_outputs for leaf in analysis.outputs[o].leaves}
        self.rebuilt_leaves = tuple(k for k in range(plan.graph_outputs.num_fresh) if k not in in_fresh_outputs)
        self.roots = roots = training_roots(analysis)
        # given before the forward saves them
        self.counts = function_counts(plan, fresh_outputs, n_updates, len(bw_meta.wrapper_updates))
        self.checks = _saved_checks(plan, bw_meta, eager_saves, fresh_outputs, roots)
        # inputs an output view is replayed from outside the Function: where the caller writes one, its node, made
        # again at the backward's read, runs before the one eager's saving node is (backward_probe's comment on saved
        # tensors)
        self.viewed_inputs = _viewed_inputs(analysis) if any(graded[1] for _, _, _, _, graded, _ in self.checks) else ()
        self.apart = _apart_inputs(self, eager_saves.detached)
        self.apart_bases = _apart_bases(self)
        # (for alias group members: `_detach_apart_members`). An input the Function gives a gradient of its own keeps
        # its edge: `_apart_inputs` decides for it, and a written input's new history may reach it (`x0.copy_(x1)`).
        self.returned_apart = eager_saves.detached - frozenset(bw_meta.grad_inputs)
        self.saves_apart = eager_saves.probed  # Note [Probing Eager's Backward]
        self.taken = frozenset() if self.saves_apart else eager_saves.taken
        mutated_graph_inputs = set()
        for k, item in enumerate(layout.graph_inputs):
            members = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
            if any(analysis.mutations[m].any or analysis.mutations[m].version_bumped for m in members):
                mutated_graph_inputs.add(k)

        self.rerun = bw_meta.rerun if differentiable_backward and not mutated_graph_inputs else None

        self.variants = _Variants()
        self.clone_saved = [
            k for k, p in enumerate(bw_meta.saved_primals) if p is not None and p in mutated_graph_inputs
        ]
        self.held_inputs = () if self.saves_apart else _held_inputs(bw_meta, mutated_graph_inputs)
        n_user = len(layout.trees)
        self.n_results = n_results = n_user + len(bw_meta.group_grads)
        self.targets = [*bw_meta.grad_inputs, *range(n_user, n_results)]
        self.diff_set = frozenset(bw_meta.diff_outputs)
        self.subclass_inputs = [i for i, tree in enumerate(layout.trees) if tree is not None]
        self.releafed = frozenset(i for i, s in enumerate(analysis.releaf_sizes) if s is not None)
        self.early_sources = _early_sources(analysis, bw_meta)
        # See Note [Tangent Retrace]: the diff outputs a tensor subclass gradient depends on
        self.typed_by: set[int] = set().union(
            *(deps for tree, deps in zip(bw_meta.grad_trees, bw_meta.tangent_deps, strict=False) if tree is not None)
        )
        self.tensor_position: dict[int, int] = {k: p for p, k in enumerate(flat.tensor_indices)}  # InputIndex -> `user`

        self.plain_tangents = all(tree is None for tree in bw_meta.tangent_trees)
        self.plain_fresh = {
            o: n_updates + info.leaves[0].index
            for o in fresh_outputs
            if (info := analysis.outputs[o]).function_view is None
            and info.tree is None
            and len(info.leaves) == 1
            and info.leaves[0].passthrough is None
            and not info.leaves[0].function_view
        }
        self.function_slots = _function_slots(analysis)
        self.ev = MetaEvaluator()
        self._find_leaf_sources()
        # set by training_call where the step is plain (Note [Straight-Line Runners])
        self.plain: _PlainStep | None = None
        # the graphs as a plain step calls them: the backend's callable itself once its wrapper settled (`_plain_apply`)
        self.plain_fw = cast("Callable[..., Sequence[Any]]", fw)
        self.plain_bw = cast("Callable[..., Sequence[Any]]", bw)

    def _find_leaf_sources(self) -> None:
        """Where each leaf of a subclass input written in training finds its new value (`_update_sources`), the
        leaves left as they were (`_unchanged_leaves`) and their positions (`_kept_positions`, per call only the
        dense leaves are read)."""
        plan, bw_meta = self.plan, self.bw_meta
        self.unchanged = _unchanged_leaves(plan) if bw_meta.wrapper_updates else frozenset()
        self.original_update, self.final_update, self.group_source, self.group_final = _update_sources(
            plan, bw_meta, self.unchanged
        )
        self.kept_at = _kept_positions(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class _PlainStep:
    n_outs: int  # the graph's outputs before the saved values: the Function's outputs
    diff: tuple[int, ...]  # BackwardPlan.diff_outputs
    non_diff: tuple[int, ...]  # the other outputs
    strides: tuple[tuple[int, ...] | None, ...]  # per diff output: its tangent's traced strides
    reached: tuple[tuple[int, int], ...]  # (gradient position, input) of the gradients some tangent reaches
    deps: tuple[tuple[int, int, frozenset[int]], ...]  # ... with the diff outputs whose tangents reach it
    n_results: int
    # one output, differentiable, reaching one gradient, nothing saved, no counts given and no saved tensor checked:
    # the forward keeps only the step on its context, and the backward (`_lone_backward`) reads no more than the
    # tangent; (the gradient's position, the tangent's traced strides) of such a step, else None
    lone: tuple[int, tuple[int, ...] | None] | None = None


def _plain_step(s: _Step, unreached: Sequence[int], stand_ins: frozenset[int]) -> _PlainStep | None:
    """The step's per-call choices where it is plain (Note [Straight-Line Runners]), else None."""
    plan, bw_meta, layout = s.plan, s.bw_meta, s.plan.layout
    analysis, gout = plan.analysis, plan.graph_outputs
    n = len(s.fresh_outputs)
    inputs_plain = all(tree is None for tree in layout.trees) and tuple(layout.graph_inputs) == tuple(
        range(len(layout.trees))
    )
    outputs_plain = (
        s.n_updates == 0
        and gout.num_fresh == n
        and not (gout.num_bases or gout.num_symints or analysis.stride_probes)
        and tuple(s.plain_fresh.get(o) for o in s.fresh_outputs) == tuple(range(n))
        and not any(analysis.outputs[o].view_of_fresh for o in s.fresh_outputs)
        and not (s.rebuilt_leaves or s.roots or bw_meta.wrapper_updates)
    )
    backward_plain = (
        bw_meta.error is None
        and s.bw is not None
        and s.rerun is None
        and not bw_meta.forward_reads_grad_mode
        and s.plain_tangents
        and not s.typed_by
        and all(order is None for order in bw_meta.tangent_orders)
        and len(bw_meta.tangent_strides) == len(bw_meta.diff_outputs)
        and len(bw_meta.tangent_deps) == len(bw_meta.grad_inputs)
        and all(tree is None for tree in bw_meta.grad_trees)
        and not (bw_meta.group_grads or bw_meta.backward_mutations or bw_meta.backward_reshapes)
    )
    # (an empty epilogue: the counters of the tensors eager's backward checks are final when the forward returns)
    call_plain = epilogue_plan(plan).empty and not (
        s.clone_saved
        or s.held_inputs
        or s.taken
        or s.apart
        or unreached
        or stand_ins
        or s.subclass_inputs
        or s.viewed_inputs
        or any(late is not None for _, _, late, _, _, _ in s.checks)  # (bound once the outputs are built)
    )
    if not (inputs_plain and outputs_plain and backward_plain and call_plain):
        return None
    deps = tuple((k, i, bw_meta.tangent_deps[k]) for k, i in enumerate(s.targets) if k not in bw_meta.unused)
    # (a 0-dim tangent's stride is always (): nothing to compare per call)
    strides = tuple(None if stride == () else stride for stride in bw_meta.tangent_strides)
    reached = tuple((k, i) for k, i, d in deps if d)
    lone = None
    if n == 1 and bw_meta.diff_outputs == (0,) and not (bw_meta.num_saved or s.counts or s.checks):
        if len(reached) == 1 and reached[0][0] == 0 and len(s.targets) == 1:
            lone = (reached[0][1], strides[0])
    return _PlainStep(
        n_outs=n,
        diff=bw_meta.diff_outputs,
        non_diff=tuple(k for k in range(n) if k not in s.diff_set),
        strides=strides,
        reached=reached,
        deps=deps,
        n_results=s.n_results,
        lone=lone,
    )


def _plain_forward(ctx: Any, s: _Step, p: _PlainStep, user: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """CompiledStep.forward of a plain step (Note [Straight-Line Runners]): what the general one does for it. No
    zeros' metadata is kept per call: a missing tangent's zeros come from the node's own record of the output
    (`output_zeros`)."""
    ctx.step = s
    all_outs: Sequence[Any] = s.plain_fw(*user)
    n = p.n_outs
    if n == 1 and len(all_outs) == 1:  # (one output, saving nothing: `_distinct_outputs` without its loop)
        out = all_outs[0]
        ctx.saved_ints, ctx.saves_tensors = (), False
        outs: tuple[Any, ...] = (non_view_alias(out) if out._is_view() else out,)
        if s.counts:
            _give_counts(s, outs)
    else:
        outs = tuple(_distinct_outputs(all_outs[:n]))
        if s.counts:
            _give_counts(s, outs)
        _plain_saves(ctx, s, all_outs[n:])
    if p.non_diff:
        ctx.mark_non_differentiable(*[outs[k] for k in p.non_diff])
    if s.checks:  # (nothing writes an input after the forward: `_note_counters` now, not after an epilogue)
        _hold_checked(ctx, s, outs, user, [])
        _note_counters([ctx])
    # Unused outputs send None: a gradient reached by no used output stays None, as in eager.
    ctx.set_materialize_grads(False)
    return outs


def _give_counts(s: _Step, outs: Sequence[Any]) -> None:
    """The Function's fresh outputs and intermediate bases get eager's counts (steps.function_counts) before the
    forward saves them: a save of one records its count then, and autograd's check of it reads the count eager's
    saving node saw, after the program's writes (runtime/steps.py: Version Counters As Eager's)."""
    for k, count in s.counts:
        set_version(outs[k], count)


def _plain_saves(ctx: Any, s: _Step, saved: Sequence[Any]) -> None:
    """`ctx`'s saved values of a plain step: the graph's outputs after the Function's."""
    ctx.saved_ints = [(k, v) for k, v in enumerate(saved) if not isinstance(v, torch.Tensor)]
    # See Note [Probing Eager's Backward]: each through an alias with a counter of its own.
    tensors = [v for v in saved if isinstance(v, torch.Tensor)]
    ctx.save_for_backward(*[v.data for v in tensors] if s.saves_apart else tensors)
    ctx.saves_tensors = bool(tensors)


def _saved_tensors(ctx: Any) -> list[torch.Tensor]:
    """The tensors the forward saved. A forward that saved none reads nothing: eager's backward runs again through
    nodes that saved no tensor (a copy_()'s), where a second read of `ctx.saved_tensors` raises once its buffers
    were freed ("backward through the graph a second time")."""
    if not ctx.saves_tensors:
        return []
    saved = list(ctx.saved_tensors)  # (unpacking checks the counters of the inputs held after the values, too)
    return saved[: getattr(ctx, "num_kept", len(saved))]


def _to_general(ctx: Any, p: _PlainStep) -> None:
    """The context of a plain step's forward made ready for the general backward (what the general forward leaves
    it: Note [Straight-Line Runners])."""
    ctx.primals, ctx.input_meta, ctx.bw_targets, ctx.bw_reshapes = None, {}, [], ()
    if p.lone is not None:  # (its forward kept no record of its saves: there are none)
        ctx.saved_ints, ctx.saves_tensors = (), False
    zeros = [output_zeros(ctx, i) for i in p.diff]
    ctx.zeros = [[(z.shape, z.dtype, z.device)] for z in zeros]


def _plain_backward(
    ctx: Any, s: _Step, p: _PlainStep, grads: Sequence[torch.Tensor | None]
) -> tuple[torch.Tensor | None, ...] | None:
    """CompiledStep.backward of a plain step without create_graph (Note [Straight-Line Runners]); None, with the
    context made ready for the general backward, where grad mode is on (create_graph) or a tangent is no plain
    tensor (the general backward decides)."""
    if torch.is_grad_enabled():
        _to_general(ctx, p)
        return None
    if s.checks:
        _check_saved_tensors(ctx.checks, ctx.checked, grads, ())
    tangents = []
    present = 0
    for k, i in enumerate(p.diff):
        g = grads[i]
        if g is None:
            g = output_zeros(ctx, i)
        elif type(g) is not torch.Tensor:
            _to_general(ctx, p)
            return None
        else:
            present += 1
        stride = p.strides[k]
        tangents.append(g if (stride is None or g.stride() == stride) and not g.is_neg() else _restride(g, stride))
    if p.lone is not None:  # (nothing saved)
        dense_grads: Sequence[torch.Tensor] = s.plain_bw(*tangents)
    elif ctx.saves_tensors:
        saved: list[Any] = list(ctx.saved_tensors)
        for k, v in ctx.saved_ints:
            saved.insert(k, v)
        dense_grads = s.plain_bw(*saved, *tangents)
    elif ctx.saved_ints:
        dense_grads = s.plain_bw(*[v for _, v in ctx.saved_ints], *tangents)
    else:
        dense_grads = s.plain_bw(*tangents)
    result: list[torch.Tensor | None] = [None] * p.n_results
    if present == len(p.diff):
        for k, i in p.reached:
            result[i] = dense_grads[k]
    else:
        given = frozenset(k for k, i in enumerate(p.diff) if grads[i] is not None)
        for k, i, deps in p.deps:
            if deps & given:
                result[i] = dense_grads[k]
    return (None, *_unshared(result, grads))


def _update_sources(
    plan: RuntimePlan, bw_meta: BackwardPlan, unchanged: frozenset[int]
) -> tuple[dict[int, int], dict[int, int], dict[int, GroupSource], dict[int, GroupSource]]:
    """Where each leaf of a tensor subclass input written in training finds its new value among the graph outputs
    (ORIGINAL and FINAL updates, alias-group members' regions of their group's new base); a leaf the program left
    alone (no write, no metadata or storage change, its counter kept: a NestedTensor's offsets, which its in-place
    ops never write) keeps its own tensor (`_unchanged_leaves`). Refused where the program changes some inner tensors
    of such an input but not others in another way."""
    analysis, layout, flat = plan.analysis, plan.layout, plan.flat
    original_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.ORIGINAL}
    final_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.FINAL}
    base_update = {u.target: k for k, u in enumerate(plan.graph_outputs.updates) if u.kind is UpdateKind.BASE}
    group_source: dict[int, GroupSource] = {}
    group_final: dict[int, GroupSource] = {}  # ... with its final metadata
    for k, item in enumerate(layout.graph_inputs):
        if isinstance(item, AliasGroupRef) and k in base_update:
            group = layout.groups[item.group]
            for m, (size, stride, offset) in zip(group.members, group.member_meta, strict=True):
                group_source[m] = (base_update[k], _ints(size), _ints(stride), _ints((offset,))[0])
                size, stride, offset = analysis.mutations[m].final_meta
                if all(isinstance(d, int) for d in (*size, *stride, offset)):
                    group_final[m] = (base_update[k], _ints(size), _ints(stride), _ints((offset,))[0])
    for i in bw_meta.wrapper_updates:
        if analysis.inplace_replay[i] and analysis.wrapper_meta_after[i]:
            needed: Container[int] = {*final_update, *group_final}  # Note [Aliased Inputs In Training]
        else:
            needed = {*original_update, *group_source}
        if any(j not in needed and j not in unchanged for j in layout.leaves_of_input[i]):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: the program writes some inner tensors of this tensor "
                "subclass input that requires grad but not others, or changes the others otherwise (x.a.add_(...) "
                "beside a write through the subclass); in training this is not supported yet. Write a clone "
                "(y = x.clone(); y.add_(...)) or, where the class writes all its inner tensors, write through the "
                "subclass (x.add_(...))"
            )
    return original_update, final_update, group_source, group_final


def _unchanged_leaves(plan: RuntimePlan) -> frozenset[int]:
    """Dense leaves of subclass inputs the program left as they were: no write (through any alias), no metadata or
    storage change, the version counter kept. The new value of their input (`_wrapper_values`) holds the leaf itself,
    as eager's wrapper does after an in-place op of its class that writes only its other inner tensors."""
    mutations, layout = plan.analysis.mutations, plan.layout
    return frozenset(
        j
        for i, tree in enumerate(layout.trees)
        if tree is not None
        for j in layout.leaves_of_input[i]
        if not mutations[j].any and not mutations[j].version_bumped and not mutations[j].final_data
    )


def _held_inputs(bw_meta: BackwardPlan, mutated: set[int]) -> tuple[int, ...]:
    """The graph inputs the Function saves beside their clone, where eager's saves were not probed (Note [Probing
    Eager's Backward]): those the program leaves unwritten (`mutated`: the graph inputs it writes)."""
    return tuple(sorted({p for p in bw_meta.saved_clones if p is not None and p not in mutated}))


def _apart_inputs(s: _Step, returned: frozenset[int]) -> tuple[int, ...]:
    """The leaves (and views of leaves) returned as themselves that the Function takes detached (`returned`:
    backward_probe.eager_saves), where it gives them no gradient: eager's engine accumulates theirs apart from the
    program's nodes, so a backward that raises (a saved tensor written after the call, a deferred error, the
    epilogue's set_ node) does not hold theirs back (backward_probe's comment on saved tensors)."""
    bw_meta = s.bw_meta
    if len(bw_meta.tangent_deps) < len(bw_meta.grad_inputs):
        return ()
    hidden = _hidden_updates(s)
    no_grad_from_here = {
        i for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False) if deps <= hidden
    }
    return tuple(sorted(i for i in returned if i in no_grad_from_here and i not in bw_meta.detached))


def _apart_bases(s: _Step) -> frozenset[int]:
    """Positions in `group_grads` of the synthetic bases that go into the Function detached: those no tangent the
    caller can give reaches the gradient of (the epilogue writes the new values that do hidden from autograd). Eager's
    program then reaches the members' leaf by no node of its own: attached, the base (a view of that leaf) would make
    the leaf's accumulator now, at its metadata now, where eager's, made at the read of a backward through the leaf,
    checks the gradient against its new size; and that accumulator would wait on the Function's node, which may raise
    (a deferred error, a saved tensor written after the call) where eager's engine accumulates it first from a
    member's own node (a returned view, or a view written hidden from autograd, remade at its read after the call:
    Note [Backward Errors Are Deferred])."""
    bw_meta = s.bw_meta
    n = len(bw_meta.grad_inputs)
    if len(bw_meta.tangent_deps) < n + len(bw_meta.group_grads):
        return frozenset()
    hidden = _hidden_updates(s)
    return frozenset(k for k in range(len(bw_meta.group_grads)) if bw_meta.tangent_deps[n + k] <= hidden)


def _hidden_updates(s: _Step) -> set[int]:
    """Diff outputs (positions in diff_outputs) that are new values of inputs the epilogue writes hidden from
    autograd: no gradient flows through them (Note [Backward Errors Are Deferred])."""
    plan, bw_meta, n_updates = s.plan, s.bw_meta, s.n_updates
    analysis, layout = plan.analysis, plan.layout
    n_wrappers = len(bw_meta.wrapper_updates)
    updates = plan.graph_outputs.updates
    hidden_updates = {
        p
        for p, d in enumerate(bw_meta.diff_outputs)
        if d < n_updates
        and (
            epilogue_write_hidden(analysis.mutations[updates[d].target], updates[d].kind)
            if updates[d].kind is not UpdateKind.BASE
            else base_write_hidden(analysis.mutations, _group_members(plan, updates[d].target))
        )
    }
    # ... and new values of tensor subclass inputs the epilogue copies in under no_grad
    wrappers_at = n_updates + len(s.fresh_outputs) + plan.graph_outputs.num_bases
    hidden_updates |= {
        p
        for p, d in enumerate(bw_meta.diff_outputs)
        if wrappers_at <= d < wrappers_at + n_wrappers
        and not wrapper_write_recorded(analysis, layout, bw_meta.wrapper_updates[d - wrappers_at])
    }
    return hidden_updates


def _group_members(plan: RuntimePlan, graph_input: int) -> tuple[int, ...]:
    """The members (DenseIndex) of the alias group whose synthetic base is graph input `graph_input`."""
    item = plan.layout.graph_inputs[graph_input]
    assert isinstance(item, AliasGroupRef), "BUG: a base update of a graph input that is no synthetic base"
    return tuple(plan.layout.groups[item.group].members)


def _detached_inputs(s: _Step) -> tuple[list[int], frozenset[int], list[int]]:
    """The user inputs that go into the Function detached (Note [Backward Errors Are Deferred]): those no gradient
    reaches, those of them that go in as stand-ins requiring grad, and those no output reads."""
    plan, bw_meta = s.plan, s.bw_meta
    analysis, layout, flat = plan.analysis, plan.layout, plan.flat
    hidden_updates = _hidden_updates(s)
    unreached = (  # Note [Backward Errors Are Deferred]
        [
            i
            for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False)
            if deps <= hidden_updates or i in bw_meta.detached
        ]
        if len(bw_meta.tangent_deps) >= len(bw_meta.grad_inputs)
        else []
    )

    def relaid(i: int) -> bool:
        return any(analysis.mutations[j].metadata for j in layout.leaves_of_input[i]) or (
            (assigned := analysis.wrapper_data[i]) is not None and assigned.resizes  # a subclass size, by `.data =`
        )

    changed = [i for i in unreached if relaid(i)]
    unreached = changed if bw_meta.error is None else unreached
    # Where the backward raises and no input would stay attached, the outputs still require grad in eager (through
    # a no_grad view: Note [Backward Errors Are Deferred]): such inputs go in as new leaves over the same data, which
    # require grad and whose accumulators nothing observes.
    stand_ins = (
        frozenset(i for i in unreached if i not in changed)
        if bw_meta.error is not None and len(unreached) == len(bw_meta.grad_inputs) and not bw_meta.group_grads
        else frozenset()
    )
    # Inputs no output reaches: where reading one's grad_fn raises when the Function takes it (an unbind() output
    # whose base an in-place view op replayed early, t_(), advanced), it goes in detached;
    # eager's program did not read it after that op.
    unread = (
        [
            i
            for i, deps in zip(bw_meta.grad_inputs, bw_meta.tangent_deps, strict=False)
            if not deps and i not in unreached
        ]
        if len(bw_meta.tangent_deps) >= len(bw_meta.grad_inputs)
        else []
    )
    # ... and likewise inputs that get no gradient of their own (an alias group's members, whose gradient goes to
    # the group's base, an unbind() output passed beside its base, unread by the program)
    with_grad = set(bw_meta.grad_inputs)
    unread.extend(i for i in range(len(flat.tensor_indices)) if i not in with_grad)
    # ... of which those that require grad and whose metadata the program changes go in detached, as unreached ones
    # do: attached, a leaf's accumulator would be made now, at its metadata now, where eager's, made at the read of
    # a backward through it (it is returned, say), checks the gradient against its new size
    user_fakes = [flat.values[k] for k in flat.tensor_indices]
    unreached += [
        i
        for i in unread
        if i not in unreached and relaid(i) and isinstance(t := user_fakes[i], torch.Tensor) and t.requires_grad
    ]
    return unreached, stand_ins, unread


def _distinct_outputs(values: Sequence[Any]) -> list[Any]:
    """The graph's outputs as the Function returns them: no view (autograd would take its base's history) and no
    tensor twice (a backend such as inductor returns one buffer for two outputs that alias, an input's new value
    and a fresh output; marked non-differentiable as the first, the second would lose its history too)."""
    seen: set[int] = set()
    outs: list[Any] = []
    for o in values:
        if isinstance(o, torch.Tensor):
            if o._is_view() or id(o) in seen:
                o = non_view_alias(o)
            seen.add(id(o))
        outs.append(o)
    return outs


def _note_backward_targets(
    ctx: Any, bw_meta: BackwardPlan, graph_dense: Sequence[torch.Tensor], user: Sequence[torch.Tensor]
) -> None:
    """On `ctx`: the dense inputs the backward writes, and the inputs it reshapes (Note [Custom Functions])."""
    ctx.bw_targets = [graph_dense[j] for j in bw_meta.backward_mutations] if bw_meta.backward_mutations else []
    ctx.bw_reshapes = [(user[r.position], r) for r in bw_meta.backward_reshapes] if bw_meta.backward_reshapes else ()


class CompiledStep(torch.autograd.Function):
    """The compiled forward and backward graphs as one autograd node (`CompiledStepBackward` in a grad_fn chain),
    shared by every compile: the first argument carries the compile's `_Step`."""

    @staticmethod
    def forward(
        ctx: Any,
        holder: tuple[_Step, list[torch.Tensor], list[torch.Tensor], dict[str, int], list[Any], _LeafGrads],
        *user: torch.Tensor,
    ) -> Any:
        if (p := (s := holder[0]).plain) is not None:
            if p.lone is not None:  # (`_PlainStep.lone`: the one output, as `_plain_forward` returns it)
                ctx.step = s
                out = s.plain_fw(*user)[0]
                ctx.set_materialize_grads(False)
                return (non_view_alias(out) if out._is_view() else out,)
            return _plain_forward(ctx, s, p, user)
        s, graph_in, graph_dense, symbols, noted, early_grads = holder
        ctx.step = s
        ctx.early_grads = early_grads
        if s.bw_meta.error is not None:
            _hold_remade(ctx, user, noted)
        bw_meta, n_updates = s.bw_meta, s.n_updates
        # Subclass gradients are rebuilt with the real inputs' outer size and stride (the traced ones may be
        # symbolic).
        ctx.input_meta = (
            {i: (tuple(user[i].shape), tuple(user[i].stride())) for i in s.subclass_inputs} if s.subclass_inputs else {}
        )
        # A Function's forward runs with grad mode off: the graph's ops record nothing.
        if bw_meta.forward_reads_grad_mode:  # Note [Training Through A Joint Graph]
            with torch.enable_grad():
                all_outs = list(cast("Sequence[Any]", s.fw(*[_detached(g) for g in graph_in])))
        else:
            all_outs = list(cast("Sequence[Any]", s.fw(*graph_in)))  # GraphOutputs, then the saved values
        n_outs = len(all_outs) - bw_meta.num_saved
        outs = _distinct_outputs(all_outs[:n_outs])  # tensors, then symbolic ints
        saved = all_outs[n_outs:]
        for k in s.clone_saved:
            saved[k] = saved[k].clone()  # the epilogue is about to write this input
        ctx.saved_ints = [(k, v) for k, v in enumerate(saved) if not isinstance(v, torch.Tensor)]
        # See Note [Training Through A Joint Graph]: weak references, so that the forward keeps no input alive.
        ctx.primals = [(weakref.ref(g), get_version(g)) for g in graph_in] if s.rerun is not None else None
        tensors = outs[:n_updates]
        for o in s.fresh_outputs:
            at = s.plain_fresh.get(o)
            if at is not None:  # a plain tensor, the graph's own (the loop's general case, decided once)
                tensors.append(outs[at])
            else:
                tensors.append(_fresh_output(s, o, user, outs, graph_dense, symbols))
        pos = n_updates + s.plan.graph_outputs.num_fresh
        n_bases = s.plan.graph_outputs.num_bases
        base_values = outs[pos : pos + n_bases]
        tensors.extend(base_values)
        # The graph's leaves of outputs rebuilt beside inner tensors of inputs (a jagged output sharing an input's
        # offsets), then the symbolic ints, then the stride probes (Note [Strides The Kernels Choose]): only
        # their strides are read, from aliases that are not the graph's outputs themselves (which may be returned
        # above too)
        tail = outs[pos + n_bases :]
        if s.rebuilt_leaves:
            tail = [outs[n_updates + k] for k in s.rebuilt_leaves] + tail
        symints = [o.detach() if isinstance(o, torch.Tensor) else o for o in tail] if tail else []
        if bw_meta.wrapper_updates:
            ctx.kept_leaves = _kept_leaves(s, graph_dense, len(tensors))
            tensors.extend(_wrapper_values(s, user, outs, graph_dense, symbols))
        if s.roots:
            tensors.extend(_root_values(s, base_values, graph_dense, symbols))
        ctx.zeros = [_dense_zeros(tensors[i]) for i in bw_meta.diff_outputs]
        if not s.plain_tangents:  # (a subclass output's zero tangent is its class's zeros_like: _collect_tangents)
            ctx.outer = [(tuple(tensors[i].shape), tuple(tensors[i].stride())) for i in bw_meta.diff_outputs]
        # The tail (symbolic ints, stride probes, the graph's leaves of an output rebuilt beside inner tensors
        # of an input: a jagged output sharing an input's offsets) has no tangent traced for it; as a Function
        # output it would otherwise take the Function's history, where eager's has none.
        tensors.extend(symints)
        if s.counts:
            _give_counts(s, tensors)
        non_diff = [t for i, t in enumerate(tensors) if i not in s.diff_set and isinstance(t, torch.Tensor)]
        if non_diff:
            ctx.mark_non_differentiable(*non_diff)
        _save_values(ctx, s, saved, (user, graph_in, graph_dense, tensors), noted)
        if s.checks:
            _hold_checked(ctx, s, tensors, user, noted)
        # Unused outputs send None: a gradient reached by no used output stays None, as in eager.
        ctx.set_materialize_grads(False)
        _note_backward_targets(ctx, bw_meta, graph_dense, user)
        return tuple(tensors)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
        s: _Step = ctx.step
        if s.plain is not None and (plain := _plain_backward(ctx, s, s.plain, grads)) is not None:
            return plain
        bw_meta, bw = s.bw_meta, s.bw
        if bw_meta.error is not None:
            _check_early_leaves(s, ctx.early_grads, bw_meta)
            _raise_deferred(bw_meta, bw is None, grads, _remade_leaves(s, ctx.remade))
        if bw is None:
            raise AssertionError("BUG: a backward without a graph or an error")
        create_graph = torch.is_grad_enabled()
        if create_graph:
            _check_double_backward(s, ctx.primals)
        if s.checks and ctx.checked is not None:
            _check_saved_tensors(ctx.checks, ctx.checked, grads, _written_view_leaves(s, ctx.viewed))
        if getattr(ctx, "unprobed", ()) or getattr(ctx, "unprobed_outputs", ()):
            _refuse_written_unprobed_wrappers(s, getattr(ctx, "unprobed", ()), getattr(ctx, "unprobed_outputs", ()))
        saved = _saved_tensors(ctx)
        for k, v in ctx.saved_ints:
            saved.insert(k, v)
        collected = _plain_tangents(grads, bw_meta, ctx.zeros) if s.plain_tangents else None
        if collected is None:
            collected = _collect_tangents(
                grads, bw_meta, ctx.zeros, getattr(ctx, "outer", None), getattr(ctx, "kept_leaves", {})
            )
        per_output, trees, present, coerced = collected
        retyped = any(tree is not _SAME for tree in trees)
        if retyped and create_graph and not _coerced_instead(per_output, trees, coerced):
            raise UnsupportedError(
                "double backward (create_graph=True) with a tangent of another type than the output's "
                "(Note [Tangent Retrace]); pass tangents of the type of the outputs"
            )
        absent = frozenset(s.typed_by - present)  # Note [Tangent Retrace]
        try:
            found = (
                s.variants.get(bw_meta, trees, per_output, absent, ctx.zeros)
                if retyped or (absent and not create_graph)
                else None
            )
        except UnsupportedError:
            if not retyped or not _coerced_instead(per_output, trees, coerced):
                raise
            found = s.variants.get(bw_meta, trees, per_output, absent, ctx.zeros) if absent else None
        if found is not None:
            dense_grads, shape = _run_variant(found, saved, per_output)
        else:
            # The backward graph was traced for tangents laid out like the forward outputs (views in it depend
            # on that layout): give the runtime tangents the same strides.
            tangents = [
                _restride(t, stride if order is None else _dense_strides(t.shape, order))
                for t, stride, order in zip(
                    [t for ts in per_output for t in ts], bw_meta.tangent_strides, bw_meta.tangent_orders, strict=True
                )
            ]  # Note [Tangent Retrace]
            if create_graph:
                assert s.rerun is not None
                all_outs = cast(Sequence[torch.Tensor], s.rerun(*_live_primals(ctx.primals), *tangents))
                dense_grads = list(all_outs[bw_meta.num_fw_outputs :])
            else:
                dense_grads = list(cast("Sequence[torch.Tensor]", bw(*saved, *tangents)))
            shape = (bw_meta.grad_trees, bw_meta.unused, bw_meta.tangent_deps, bw_meta.grad_stride_leaves)
        if ctx.bw_targets or ctx.bw_reshapes:
            dense_grads = _backward_writes(ctx.bw_targets, _reshapes_run(ctx.bw_reshapes, present), dense_grads)
        return (None, *_unshared(_input_grads(ctx, shape, dense_grads, present, grads), grads))


def _input_grads(
    ctx: Any,
    shape: tuple[Any, ...],
    dense_grads: list[torch.Tensor],
    present: Container[int],
    grads: Sequence[torch.Tensor | None],
) -> list[torch.Tensor | None]:
    """Gradients of the Function's inputs (the user tensors, then the synthetic bases of aliased inputs) from the
    backward graph's dense ones; `grads`: the tangents the Function received."""
    s: _Step = ctx.step
    result: list[torch.Tensor | None] = [None] * s.n_results
    pos = 0
    grad_trees, unused, deps, stride_leaves = shape
    shared = _shared_grads(dense_grads) if any(tree is not None for tree in grad_trees) else frozenset()
    for k, i in enumerate(s.targets):
        tree = grad_trees[k]
        width = 1 if tree is None else tree.num_leaves
        leaves = dense_grads[pos : pos + width]
        pos += width
        if tree is not None and shared:  # Note [Tangent Retrace]
            leaves = [g.clone() if id(g) in shared and differentiable_dtype(g.dtype) else g for g in leaves]
        if k in unused or not (deps[k] & present):
            continue  # eager's gradient is None: no used output reaches this input
        if tree is None:
            result[i] = leaves[0]
        elif i in ctx.input_meta:
            size, stride = ctx.input_meta[i]
            same = _tangent_passed_through(tree, leaves, size, grads)
            result[i] = (
                same
                if same is not None
                else _subclass_grad(tree, leaves, size, stride, i in s.releafed, stride_leaves[k])
            )
        else:  # a plain input's subclass gradient (`x.exp() + w`, x a subclass): the tangent itself where passed through
            rebuilt = unflatten_subclass(tree, leaves, check=False)
            same = _tangent_passed_through(tree, leaves, tuple(rebuilt.shape), grads)
            result[i] = rebuilt if same is None else same
    return result


def _tangent_passed_through(
    tree: SubclassNode, leaves: Sequence[torch.Tensor], size: tuple[int, ...], grads: Sequence[torch.Tensor | None]
) -> torch.Tensor | None:
    """The tangent the Function received whose dense leaves the backward graph returns unchanged, object for object,
    as this subclass gradient, with its structure and size; None where there is none (Note [Gradient Accumulators Of
    Leaves])."""
    for g in grads:
        if g is None or type(g) is not tree.cls or tuple(g.shape) != size:
            continue
        node, own = flatten_subclass(g, "grad")
        if node.attrs == tree.attrs and node.ctx == tree.ctx and len(own) == len(leaves):
            if all(a is b for a, b in zip(own, leaves, strict=True)):
                return g
    return None


def _function_view(s: _Step, leaf: OutputLeaf, outs: Sequence[Any], symbols: dict[str, int]) -> torch.Tensor:
    """A view the program's custom Function made of an intermediate (Note [Custom Functions]): the graph's base of it
    in eager's layout where it returns that base, else a view_as of the leaf's own graph output. That layout is the
    leaf's own graph output's where it views the base's storage, the trace's otherwise: the kernels' strides in dims
    of size 0 or 1 are not the fakes' (Note [Strides The Kernels Choose])."""
    out = cast(torch.Tensor, outs[s.n_updates + leaf.index])
    if leaf.function_view_base is None:
        return out.view_as(out)
    base = cast(torch.Tensor, outs[s.n_updates + s.plan.graph_outputs.num_fresh + leaf.function_view_base])
    size, stride, offset = s.ev.meta(leaf.meta, symbols)
    if list(out.shape) == list(size) and storage_key(out) == storage_key(base):
        stride, offset = list(out.stride()), int(out.storage_offset())
    return base.as_strided(size, stride, offset)


class FunctionOutputs(torch.autograd.Function):
    """The views the program's custom Function returned (Note [Custom Functions]), taken from the compiled Function
    and returned again at that apply's output numbers (`layout`: per output number, the position in `views` of the
    view there, else -1 for a placeholder tensor or None for none), so that their creation meta and output number,
    which a grad_fn read after a write to their base names, are eager's; gradients pass through as they are. Each
    view is returned as an as_strided of itself: an input returned as it is comes back as its view_as, which restrides
    its size-1 dimensions (`(1, 3, 2)` at `(6, 1, 3)` came back at `(3, 1, 3)`, eager's stride lost)."""

    @staticmethod
    def forward(ctx: Any, layout: tuple[int | None, ...], *views: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        ctx.set_materialize_grads(False)
        ctx.at = [layout.index(k) for k in range(len(views))]
        same = [v.as_strided(v.size(), v.stride(), v.storage_offset()) for v in views]
        return tuple(None if k is None else views[0].new_empty(0) if k < 0 else same[k] for k in layout)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        return (None, *(grads[n] for n in ctx.at))


def _function_slots(analysis: Analysis) -> _Slots:
    """Per apply of the program's Functions some outputs are views of (OutputInfo.function_slot): FunctionOutputs'
    layout, and the outputs in the order its views are given."""
    calls: dict[int, list[tuple[int, FunctionSlot]]] = {}
    for o, info in enumerate(analysis.outputs):
        if info.function_slot is not None and info.kind is OutputKind.TENSOR:
            calls.setdefault(info.function_slot.call, []).append((o, info.function_slot))
    found = []
    for members in calls.values():
        layout: list[int | None] = [None] * members[0][1].count
        for k, (_, slot) in enumerate(members):
            layout[slot.index] = k
        if members[0][1].multi and len(members) == 1:  # (another differentiable output makes it MULTI_OUTPUT_NODE)
            free = [n for n, k in enumerate(layout) if k is None]
            layout = [*layout, -1] if not free else [-1 if n == free[0] else k for n, k in enumerate(layout)]
        bumped = frozenset(o for o, slot in members if slot.bumped)
        found.append((tuple(layout), tuple(o for o, _ in members), bumped))
    return tuple(found)


def _with_grad(views: list[torch.Tensor], bumped: list[bool], aliases: dict[int, torch.Tensor]) -> list[torch.Tensor]:
    """`views`, each one to be bumped that the graph returns without grad (no tangent: eager's history raises) made
    again over an alias of its base that requires grad (`aliases`, by id() of the base: one per base, as eager's views
    share theirs), so that FunctionOutputs gives it eager's creation meta and output number; no gradient can pass it,
    as none passes eager's."""
    out = []
    for v, bump in zip(views, bumped, strict=True):
        if bump and not v.requires_grad:
            base = v if v._base is None else v._base
            if id(base) not in aliases:
                aliases[id(base)] = base.detach().requires_grad_()
            v = aliases[id(base)].as_strided(v.size(), v.stride(), v.storage_offset())
        out.append(v)
    return out


def _relabel_function_views(slots: _Slots, prewrapped: dict[int, torch.Tensor]) -> None:
    """The outputs `_function_slots` names, in `prewrapped`, rebuilt through FunctionOutputs; those whose base eager's
    program wrote after the apply then have their counter advanced, once per counter, so that their grad_fn raises
    as eager's (its base's version moved since autograd made them)."""
    aliases: dict[int, torch.Tensor] = {}
    for layout, outputs, bumped in slots:
        views = _with_grad([prewrapped[o] for o in outputs], [o in bumped for o in outputs], aliases)
        if not all(v.requires_grad for v in views):
            continue
        result = FunctionOutputs.apply(layout, *views)  # type: ignore[no-untyped-call]  # untyped in torch
        for k, o in enumerate(outputs):
            prewrapped[o] = result[layout.index(k)]
        for o in outputs:
            if o in bumped and not grad_fn_raises(prewrapped[o]):  # (another output's bump moved its counter)
                set_version(prewrapped[o], get_version(prewrapped[o]) + 1)


def _fresh_output(
    s: _Step, o: int, user: Sequence[torch.Tensor], outs: list[Any], dense: list[torch.Tensor], symbols: dict[str, int]
) -> torch.Tensor:
    """Fresh output `o` built from its graph leaves, where it is not a plain tensor of the graph's own."""
    info = s.plan.analysis.outputs[o]
    if info.function_view is not None:  # Note [Custom Functions]
        view = info.function_view
        return replay_steps(user[s.tensor_position[view.index]], view.steps, s.ev, symbols)
    leaves = [
        # An input (or a view of one) returned by the program's own autograd.Function: return it as is,
        # and autograd makes the output a view of it with our backward, exactly as eager does.
        _passthrough(dense, leaf, s.ev, symbols)
        if leaf.passthrough is not None
        else (_function_view(s, leaf, outs, symbols) if leaf.function_view else out)
        for leaf, out in ((leaf, outs[s.n_updates + leaf.index]) for leaf in info.leaves)
    ]
    if info.tree is None:
        return leaves[0]
    assert info.outer_meta is not None
    size, stride, _ = s.ev.meta(info.outer_meta, symbols)
    stride = fresh_outer_stride(info, leaves, size, stride)
    if info.history_size is not None:  # Note [Wrapper Storage]
        size = [s.ev.dim(d, symbols) for d in info.history_size]
        stride = _contiguous_strides(size)
    return unflatten_subclass(info.tree, leaves, outer_size=size, outer_stride=stride, check=False)


def _kept_positions(s: _Step) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """Per subclass input written in training (its place `n` among `bw_meta.wrapper_updates`), the positions `p` of
    its inner tensors that are the input's own (`_unchanged_leaves`) with their dense leaf `j`: fixed at compile
    time, read per call by `_kept_leaves`."""
    updated = {*s.original_update, *s.final_update}
    kept = []
    for n, i in enumerate(s.bw_meta.wrapper_updates):
        own = tuple(
            (p, j) for p, j in enumerate(s.plan.layout.leaves_of_input[i]) if j in s.unchanged and j not in updated
        )
        if own:
            kept.append((n, own))
    return tuple(kept)


def _kept_leaves(s: _Step, dense: list[torch.Tensor], wrappers_at: int) -> dict[int, dict[int, torch.Tensor]]:
    """Per diff output that is the new value of a subclass input written in training (from `wrappers_at` among
    the Function's outputs): its inner tensors that are the input's own, by position (`_kept_positions`)."""
    if not s.kept_at:
        return {}
    position = {d: k for k, d in enumerate(s.bw_meta.diff_outputs)}
    return {
        k: {p: dense[j] for p, j in own} for n, own in s.kept_at if (k := position.get(wrappers_at + n)) is not None
    }


def _wrapper_values(
    s: _Step, user: Sequence[torch.Tensor], outs: list[Any], dense: list[torch.Tensor], symbols: dict[str, int]
) -> list[torch.Tensor]:
    """See Note [Inputs Written In Training]: the new value of such an input, as a wrapper (a leaf the program left
    alone: the input's own, `dense`)."""
    analysis, layout = s.plan.analysis, s.plan.layout
    values = []
    for i in s.bw_meta.wrapper_updates:
        tree = layout.trees[i]
        assert tree is not None
        size, stride = list(user[i].shape), list(user[i].stride())
        after = analysis.wrapper_meta_after[i]
        updates, groups = s.original_update, s.group_source
        if analysis.inplace_replay[i] and after is not None:  # the value with the final metadata
            size, stride, _ = s.ev.meta(after, symbols)
            updates, groups = s.final_update, s.group_final
        leaves = [
            # See Note [Aliased Inputs In Training]: a member's region of its group's new base
            outs[updates[j]] if j in updates else dense[j] if j in s.unchanged else _member_of(outs, groups[j])
            for j in layout.leaves_of_input[i]
        ]
        values.append(unflatten_subclass(tree, leaves, outer_size=size, outer_stride=stride, check=False))
    return values


def _root_values(
    s: _Step, base_values: list[Any], dense: list[torch.Tensor], symbols: dict[str, int]
) -> list[torch.Tensor]:
    values = []
    for r in s.roots:  # Note [Output Regeneration]
        assert r.root_tree is not None and r.root_meta is not None
        size, stride, _ = s.ev.meta(r.root_meta, symbols)
        root_leaves = root_leaf_values(r, base_values, dense)
        stride = root_outer_stride(r, root_leaves, size, stride)
        values.append(unflatten_subclass(r.root_tree, root_leaves, outer_size=size, outer_stride=stride, check=False))
    return values


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


def _run_variant(
    variant: RetracedBackward, saved: list[Any], per_output: list[list[torch.Tensor]]
) -> tuple[list[torch.Tensor], tuple[Any, ...]]:
    flat_tangents = [t.resolve_neg() for ts in per_output for t in ts]  # (see _restride)
    dense_grads = list(
        cast(Sequence[torch.Tensor], variant.run(*[saved[j] for j in variant.saved_index], *flat_tangents))
    )
    return dense_grads, (variant.grad_trees, variant.unused, variant.tangent_deps, variant.grad_stride_leaves)


def _reshapes_run(
    reshapes: Sequence[tuple[torch.Tensor, Any]], present: Container[int]
) -> list[tuple[torch.Tensor, Any]]:
    """The backward's changes to inputs whose custom Function nodes eager runs for the tangents `present` (Note
    [Custom Functions]): a node no output with a tangent reaches does not run in eager."""
    found = []
    for target, reshape in reshapes:
        runs = [bool(any(k in present for k in reached)) for reached in reshape.reached_by]
        if all(runs):
            found.append((target, reshape))
        elif any(runs):
            raise UnsupportedError(
                f"input {reshape.position}: the backward of several custom autograd.Function nodes changes this input "
                "(an in-place op or metadata change on a saved tensor), and only some of those nodes run for the "
                "outputs given a gradient here, which the compiled backward cannot replay apart (Note [Custom "
                "Functions]). Call backward through all of the outputs that require grad, or change a clone in the "
                "backward"
            )
    return found


def _backward_writes(
    targets: list[torch.Tensor], reshapes: Sequence[tuple[torch.Tensor, Any]], dense_grads: list[torch.Tensor]
) -> list[torch.Tensor]:
    """What the program's backward wrote (BackwardPlan.backward_mutations, the last dense gradients) and reshaped,
    done for real; the gradients without those values."""
    reshaped = [get_version(target) for target, _ in reshapes] if reshapes else ()  # eager's count, before write-backs
    if targets:
        n_grads = len(dense_grads) - len(targets)
        with torch.no_grad():
            for target, value in zip(targets, dense_grads[n_grads:], strict=True):
                target.copy_(value)
        dense_grads = dense_grads[:n_grads]
    for (target, reshape), version in zip(reshapes, reshaped, strict=True) if reshapes else ():
        if reshape.size is not None and reshape.stride is not None:  # Note [Custom Functions]
            with torch.no_grad():
                target.as_strided_(reshape.size, reshape.stride, target.storage_offset())
        set_version(target, version + reshape.bumps)
    return dense_grads


def _subclass_grad(
    tree: SubclassNode,
    leaves: list[torch.Tensor],
    size: Sequence[int],
    stride: Sequence[int],
    releafed: bool,
    j: int | None,
) -> torch.Tensor:
    """A user input's gradient rebuilt from its dense leaves with the input's outer size and stride, or the layout
    of the leaf `j` the gradient's strides follow (Note [Tangent Retrace])."""
    if releafed:  # in the layout of eager's first read: Note [Leaves Laid Out Anew Under no_grad]
        first = leaves[0 if j is None else j]
        size = tuple(first.shape)
        stride = tuple(first.stride()) if j is not None else tuple(first.contiguous().stride())
    elif j is not None and tuple(leaves[j].shape) == size:
        stride = tuple(leaves[j].stride())
    return unflatten_subclass(tree, leaves, outer_size=size, outer_stride=stride, check=False)


def _through(
    plan: RuntimePlan,
    outputs: frozenset[int],
    fresh: tuple[int, ...],
    n_wrappers: int,
    new_values: Mapping[int, tuple[int, ...]],
) -> tuple[int, ...]:
    """The Function outputs the tangents of `outputs` come in through: a fresh output's own; an intermediate base's
    own (an output that is one, of `_intermediate_base_of`); a view's, the base it is replayed from (an intermediate base, the rebuilt subclass root, which the Function returns after the `n_wrappers`
    wrapper updates, or an earlier output's); an input's or a view of one's, the input's new value where the program
    wrote it (`new_values`, of `_new_values`)."""
    analysis, n_updates = plan.analysis, len(plan.graph_outputs.updates)
    roots = [r.root_bases for r in training_roots(analysis)]
    roots_at = n_updates + len(fresh) + plan.graph_outputs.num_bases + n_wrappers
    found: set[int] = set()
    todo, seen = sorted(outputs), set()
    while todo:
        o = todo.pop()
        if o in seen:
            continue
        seen.add(o)
        info = analysis.outputs[o]
        replay = info.replay
        if o in fresh:
            found.add(n_updates + fresh.index(o))
        elif info.kind is OutputKind.IS_INPUT and info.input_index is not None:
            found.update(new_values.get(info.input_index, ()))
        elif info.kind is OutputKind.SAME_AS and info.input_index is not None:
            todo.append(info.input_index)
        elif replay is not None and replay.source is ReplaySource.INPUT:
            found.update(new_values.get(replay.index, ()))
        elif replay is not None and replay.source is ReplaySource.BASE:
            found.add(n_updates + len(fresh) + replay.index)
        elif replay is None and (base := _intermediate_base_of(info)) is not None:
            found.add(n_updates + len(fresh) + base)
        elif replay is not None and replay.source is ReplaySource.WRAPPER:
            found.add(roots_at + roots.index(replay.root_bases))
        elif replay is not None and replay.source is ReplaySource.OUTPUT:
            todo.append(replay.index)
    return tuple(sorted(found))


def _held_at(save: EagerSave, flat: FlatInputs, new_values: Mapping[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The Function outputs carrying the new values of the inputs whose history eager's backward runs the saving
    node through (`EagerSave.held`)."""
    return tuple(sorted({k for p in save.held for k in new_values.get(flat.tensor_indices[p], ())}))


def _new_values(plan: RuntimePlan, bw_meta: BackwardPlan, fresh: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    """Tensor input (InputIndex) -> the Function outputs that carry the program's new value of it: its leaves'
    updates, its alias group's new base, its new wrapper (Note [Inputs Written In Training])."""
    layout, updates, mutations = plan.layout, plan.graph_outputs.updates, plan.analysis.mutations
    # (a member copied in with grad from a FINAL update of its own takes its history there, whatever its base holds)
    own = {
        u.target
        for u in updates
        if u.kind is UpdateKind.FINAL and not epilogue_write_hidden(mutations[u.target], u.kind)
    }
    found: dict[int, list[int]] = {}
    for k, u in enumerate(updates):
        item = layout.graph_inputs[u.target] if u.kind is UpdateKind.BASE else u.target
        members: Sequence[int] = layout.groups[item.group].members if isinstance(item, AliasGroupRef) else (item,)
        for j in members if u.kind is not UpdateKind.BASE else [m for m in members if m not in own]:
            found.setdefault(layout.leaves[j].owner, []).append(k)
    wrappers_at = len(updates) + len(fresh) + plan.graph_outputs.num_bases
    for n, t in enumerate(bw_meta.wrapper_updates):
        found.setdefault(plan.flat.tensor_indices[t], []).append(wrappers_at + n)
    return {i: tuple(ks) for i, ks in found.items()}


class _Held:
    """A strong reference with weakref.ref's call."""

    __slots__ = ("t",)

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def __call__(self) -> torch.Tensor:
        return self.t


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


def _checked_ref(
    tensors: Sequence[torch.Tensor], user: Sequence[torch.Tensor], out: int | None, inp: int | None
) -> Callable[[], torch.Tensor | None]:
    """A Function output by weak reference, an input by a strong one (`_hold_checked`); a program output built
    outside the Function, none yet (`_note_counters` binds it)."""
    if out is not None:
        return weakref.ref(tensors[out])
    if inp is not None:
        return _Held(user[inp])
    return _unbound


def _unbound() -> None:
    return None


def _hold_remade(ctx: Any, user: Sequence[torch.Tensor], noted: list[Any]) -> None:
    """Where the backward may raise the program's error: the autograd leaves behind the Function's inputs that are
    views of them, whose counters `_note_counters` reads once the call has written its inputs (`_remade_leaves`)."""
    ctx.remade_refs = [
        (p, weakref.ref(t._base))
        for p, t in enumerate(user)
        if t.requires_grad
        and not grad_fn_raises(t)
        and (base := t._base) is not None
        and base.is_leaf
        and base.requires_grad
    ]
    ctx.remade = ()
    if ctx.remade_refs:
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


def _note_counters(noted: list[Any], outputs: Sequence[object] = ()) -> None:
    """The counters of the tensors eager's backward checks, as the call leaves them (backward_probe.eager_saves),
    and those of the leaves behind the inputs output views are replayed from (`_written_view_leaves`). `outputs`:
    the program's outputs as built (OutputIndex), of which those built outside the Function are bound here, by weak
    reference as the Function's own outputs are (`_saved_checks`)."""
    for ctx in noted:
        if ctx.step.checks:
            for k, (_, _, late, _, _, _) in enumerate(ctx.step.checks):
                if late is not None and isinstance(t := outputs[late] if late < len(outputs) else None, torch.Tensor):
                    ctx.checks[k] = (weakref.ref(t), *ctx.checks[k][1:])
            ctx.checked = [get_version(t) if (t := ref()) is not None else 0 for ref, _, _, _ in ctx.checks]
            ctx.viewed = [(i, ref, get_version(leaf)) for i, ref in ctx.viewed_refs if (leaf := ref()) is not None]
        ctx.remade = [(p, ref, get_version(leaf)) for p, ref in ctx.remade_refs if (leaf := ref()) is not None]
        ctx.unprobed = [(i, t, get_version(t)) for i, t in getattr(ctx, "unprobed_refs", ())]
        ctx.unprobed_outputs = [
            (k, ref, get_version(t)) for k, ref in getattr(ctx, "unprobed_output_refs", ()) if (t := ref()) is not None
        ]


def _saved_checks(
    plan: RuntimePlan,
    bw_meta: BackwardPlan,
    eager_saves: EagerSaves,
    fresh_outputs: tuple[int, ...],
    roots: tuple[Replay, ...],
) -> tuple[tuple[int | None, int | None, int | None, tuple[int, ...], tuple[bool, bool], str | None], ...]:
    """The tensors whose counters eager's backward checks (backward_probe.eager_saves): (Function output or None,
    tensor input or None, or the program output built outside the Function whose counter it uses (an alias of an
    input with a counter of its own: `t0.data = x0`), bound once the outputs are built (`_note_counters`), the
    Function outputs a tangent of an output whose backward runs the saving node comes
    through, whether eager may give a leaf its gradient before that node raises and whether it may where the caller
    wrote an output view of an input too, eager's error at unpacking a view)."""
    counter_of = _counter_holders(plan, bw_meta, fresh_outputs, roots)
    new_values = _new_values(plan, bw_meta, fresh_outputs)
    n_wrappers = len(bw_meta.wrapper_updates)
    sharers = _detached_sharers(plan)
    return tuple(
        (
            None if output is None else counter_of.get(output),
            inp,
            output if output is not None and output not in counter_of else None,
            at,
            (e.graded_first, e.graded_after_view_writes),
            e.view_error,
        )
        for e in eager_saves.saves
        if (at := _through(plan, e.outputs, fresh_outputs, n_wrappers, new_values) + _held_at(e, plan.flat, new_values))
        for output, inp in _sharing_counter(e, sharers)
    )


def _detached_sharers(plan: RuntimePlan) -> dict[int, tuple[int, ...]]:
    """Tensor input (position among the tensor inputs) -> the program outputs that are a detach() of it written
    with grad: eager's share its version counter, the compiled ones, set_() onto its storage, keep their own (Note
    [Outputs Over Another Storage])."""
    found: dict[int, list[int]] = {}
    for o, info in enumerate(plan.analysis.outputs):
        onto = info.leaves[0].onto_input if info.leaves else None
        if onto is None:
            continue
        for position, dense in enumerate(plan.layout.leaves_of_input):
            if onto in dense:
                found.setdefault(position, []).append(o)
    return {position: tuple(outputs) for position, outputs in found.items()}


def _sharing_counter(e: EagerSave, sharers: Mapping[int, tuple[int, ...]]) -> list[tuple[int | None, int | None]]:
    """The (program output, tensor input) pairs whose counter eager's saved tensor `e` uses: its own, and where that
    is an input's, each output eager made a detach() of it that shares it; where that is such an output's, the
    input too (Note [Outputs Over Another Storage])."""
    pairs: list[tuple[int | None, int | None]] = [(e.output, e.input)]
    if e.input is not None:
        pairs += [(o, None) for o in sharers.get(e.input, ())]
    elif e.output is not None:
        pairs += [(None, i) for i, outputs in sharers.items() if e.output in outputs]
    return pairs


def _viewed_inputs(analysis: Analysis) -> tuple[int, ...]:
    """The inputs (InputIndex) output views are replayed from, outside the Function."""
    replays = [info.replay for info in analysis.outputs if info.replay is not None]
    return tuple(sorted({r.index for r in replays if r.source is ReplaySource.INPUT}))


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


def _counter_holders(
    plan: RuntimePlan, bw_meta: BackwardPlan, fresh: tuple[int, ...], roots: tuple[Replay, ...]
) -> dict[int, int]:
    """Program output -> the Function output whose version counter it uses: its own, where it is fresh; the
    intermediate base it is or is a view of (an output other outputs share a base with: `t0, t1 = x.sort(0)` returning
    t1 and a view of it), or the subclass root it is a view of (Note [Output Regeneration]). Views of inputs
    have none."""
    n_updates, n_bases = len(plan.graph_outputs.updates), plan.graph_outputs.num_bases
    roots_at = n_updates + len(fresh) + n_bases + len(bw_meta.wrapper_updates)
    root_of = {r.root_bases: roots_at + k for k, r in enumerate(roots)}
    found: dict[int, int] = {}
    for o in range(len(plan.analysis.outputs)):
        source, replay = o, plan.analysis.outputs[o].replay
        while source not in fresh and replay is not None and replay.source is ReplaySource.OUTPUT:
            source, replay = replay.index, plan.analysis.outputs[replay.index].replay
        base = _intermediate_base_of(plan.analysis.outputs[source]) if replay is None else None
        if source in fresh:
            found[o] = n_updates + fresh.index(source)
        elif base is not None:
            found[o] = n_updates + len(fresh) + base
        elif replay is not None and replay.source is ReplaySource.BASE:
            found[o] = n_updates + len(fresh) + replay.index
        elif replay is not None and replay.source is ReplaySource.WRAPPER and replay.root_bases in root_of:
            found[o] = root_of[replay.root_bases]
    return found


def _intermediate_base_of(info: OutputInfo) -> int | None:
    """The base number of the intermediate base a plain output is (the very object) or is a view of, rebuilt over it
    so that it uses the base's version counter; None for any other output (an alias with a counter of its own)."""
    if info.kind is not OutputKind.TENSOR or info.tree is not None or len(info.leaves) != 1:
        return None
    leaf = info.leaves[0]
    if leaf.source is not LeafSource.INTERMEDIATE_ALIAS or leaf.hidden_base is not None or leaf.foreign_base:
        return None
    if not (leaf.is_view or leaf.same_object):
        return None
    return leaf.index


def _check_saved_tensors(
    checks: Sequence[tuple[Callable[[], torch.Tensor | None], tuple[int, ...], tuple[bool, bool], str | None]],
    versions: Sequence[int],
    grads: Sequence[torch.Tensor | None],
    written_views: Sequence[str],
) -> None:
    """Raise eager's error where a tensor eager's backward would unpack was written since the call (the saved
    tensors of backward_probe.eager_saves), if a tangent reached an output whose backward runs the node saving it;
    refuse where eager's engine may give some leaf its gradient before that node raises (EagerSave.graded_first, or
    EagerSave.graded_after_view_writes where the leaves at `written_views` had an output view written:
    `_written_view_leaves`)."""
    for (ref, positions, (graded_first, after_view_writes), view_error), version in zip(checks, versions, strict=True):
        t = ref()
        if t is None or not any(grads[k] is not None for k in positions) or get_version(t) <= version:
            continue
        error = view_error or (
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{type(t).__name__} {list(t.shape)}] is at version {get_version(t)}; expected version {version} "
            "instead (a tensor eager's autograd saved, written after the compiled call)"
        )
        if written_views and after_view_writes:
            raise UnsupportedError(
                f"the program's backward fails in eager ({error}), and an output view of {', '.join(written_views)} "
                "was written after the call: eager's engine runs that view's node, made again at the backward's "
                "read, first, and may give the leaf its gradient before the node that saved the written tensor "
                "raises, where the compiled backward raises before any gradient (backward_probe's comment on saved "
                "tensors). Do not write the program's outputs or inputs in place between the call and backward"
            )
        if graded_first:
            raise UnsupportedError(
                f"the program's backward fails in eager ({error}), and eager's engine may first give some leaf "
                "input its gradient (it runs the nodes made after the one that saved that tensor first), where the "
                "compiled backward computes every gradient in one node (backward_probe's comment on saved "
                "tensors). Do not write the program's outputs or inputs in place between the call and backward"
            )
        raise RuntimeError(error)


def _call_inputs(
    step: _Step,
    values: Sequence[object],
    graph_in: list[torch.Tensor],
    unreached: Sequence[int],
    stand_ins: frozenset[int],
    unread: Sequence[int],
) -> tuple[list[Any], list[torch.Tensor]]:
    """The Function's tensor inputs for one call (detached where Note [Backward Errors Are Deferred] says), and the
    alias groups' bases (Note [Aliased Inputs In Training])."""
    flat, bw_meta = step.plan.flat, step.bw_meta
    user = [values[i] for i in flat.tensor_indices]
    for i in unreached:  # Note [Backward Errors Are Deferred]
        given = user[i]
        user[i] = detached = cast(torch.Tensor, given).detach()
        if i in stand_ins:
            detached.requires_grad_()
            # the same object passed again, at a position no gradient is taken for: it goes in detached too
            for j, other in enumerate(user):
                if other is given:
                    user[j] = user[i]
    for i in unread:
        if grad_fn_raises(cast(torch.Tensor, user[i])):
            user[i] = cast(torch.Tensor, user[i]).detach()
    bases = (
        [graph_in[k].detach() if p in step.apart_bases else graph_in[k] for p, k in enumerate(bw_meta.group_grads)]
        if bw_meta.group_grads
        else []
    )  # Note [Aliased Inputs In Training]
    if step.returned_apart and bases:  # (an alias group's members: no gradient input of the Function's)
        _detach_apart_members(cast(list[torch.Tensor], user), step.returned_apart)
    if step.apart:
        _detach_apart(cast(list[torch.Tensor], user), step.apart, any(b.requires_grad for b in bases))
    if (
        (unreached or step.apart_bases)
        and bw_meta.diff_outputs
        and not any(isinstance(t, torch.Tensor) and t.requires_grad for t in (*user, *bases))
    ):
        # Differentiable outputs (computed from a no_grad view of a detached input or base) still require grad in
        # eager, with no gradient flowing back: a fresh alias leaf that requires grad carries that, and gets None.
        if unreached:
            user[unreached[0]] = cast(torch.Tensor, user[unreached[0]]).requires_grad_(True)
        else:
            bases[min(step.apart_bases)].requires_grad_(True)
    return user, bases


def training_call(
    plan: RuntimePlan,
    fw: Callable[..., object],
    bw: Callable[..., object] | None,
    bw_meta: BackwardPlan,
    differentiable_backward: bool,
    eager_saves: EagerSaves | None = None,
) -> GraphCall:
    """`eager_saves`: backward_probe.eager_saves."""
    step = _Step(plan, fw, bw, bw_meta, differentiable_backward, eager_saves or EagerSaves())
    unreached, stand_ins, unread = _detached_inputs(step)
    analysis = plan.analysis
    n_updates, n_fresh, n_bases = step.n_updates, plan.graph_outputs.num_fresh, plan.graph_outputs.num_bases
    n_wrappers = len(bw_meta.wrapper_updates)
    fresh_outputs, roots, rebuilt_leaves = step.fresh_outputs, step.roots, step.rebuilt_leaves

    def call(
        values: Sequence[object], graph_in: list[torch.Tensor], dense: list[torch.Tensor], symbols: dict[str, int]
    ) -> GraphRunResult:
        user, bases = _call_inputs(step, values, graph_in, unreached, stand_ins, unread)
        noted: list[Any] = []
        early_grads = _leaf_grads(values, step.early_sources) if step.early_sources else ()
        tensors = list(_apply_step((step, graph_in, dense, symbols, noted, early_grads), *user, *bases))
        if noted and step.viewed_inputs:
            noted[0].viewed_refs = [(i, ref) for i, ref, _, _ in _leaf_grads(values, step.viewed_inputs)]
        outs: list[object] = list(tensors[:n_updates])
        prewrapped: dict[int, torch.Tensor] = {}
        fresh: list[object] = [None] * n_fresh  # the graph's fresh leaves, by OutputLeaf.index
        pos = n_updates
        for o in fresh_outputs:
            value = tensors[pos]
            # See Note [Output Regeneration]: a view of an intermediate only it sees.
            # (a plain one is a view already, as the compiled Function returned it: Note [Custom Functions])
            wrap = analysis.outputs[o].view_of_fresh and analysis.outputs[o].tree is not None
            prewrapped[o] = value.view(value.shape) if wrap else value
            for leaf in analysis.outputs[o].leaves:
                fresh[leaf.index] = value  # placeholders keep the layout
            pos += 1
        if step.function_slots:  # Note [Custom Functions]
            _relabel_function_views(step.function_slots, prewrapped)
        bases_at = pos
        pos += n_bases
        wrappers = (
            dict(zip(bw_meta.wrapper_updates, tensors[pos : pos + n_wrappers], strict=True)) if n_wrappers else {}
        )
        pos += n_wrappers
        root_values = (
            dict(zip((r.root_bases for r in roots), tensors[pos : pos + len(roots)], strict=True)) if roots else {}
        )
        pos += len(roots)
        for k in rebuilt_leaves:
            fresh[k] = tensors[pos]
            pos += 1
        outs.extend(fresh)
        outs.extend(tensors[bases_at : bases_at + n_bases])
        outs.extend(tensors[pos:])  # the symbolic ints
        return outs, prewrapped, wrappers, root_values, functools.partial(_note_counters, noted) if noted else None

    apply = _plain_apply(step, unreached, stand_ins, unread)
    return GraphCall(
        run=call,
        prewraps=frozenset(fresh_outputs),
        wrapper_updates=tuple(bw_meta.wrapper_updates),
        apply=apply,
        apply_outside_transforms=_plain_c_apply(step) if apply is not None and not unread else None,
    )


def _plain_apply(
    step: _Step, unreached: Sequence[int], stand_ins: frozenset[int], unread: Sequence[int]
) -> Callable[..., Sequence[torch.Tensor]] | None:
    """Where the step is plain (Note [Straight-Line Runners]; `step.plain` set here), it applied to the tensor inputs:
    the Function's outputs, the program's fresh outputs in order (what `training_call`'s call does for it); else
    None."""
    step.plain = _plain_step(step, unreached, stand_ins)
    if step.plain is None:
        return None
    for name, graph in (("plain_fw", step.fw), ("plain_bw", step.bw)):
        if isinstance(graph, SettlingCall):  # its wrapper leaves the path once needless (as the runner's does)
            graph.when_settled(functools.partial(setattr, step, name))
    holder: tuple[_Step, list[torch.Tensor], list[torch.Tensor], dict[str, int], list[Any], _LeafGrads] = (
        step, [], [], {}, [], ()
    )  # fmt: skip

    def apply(*user: torch.Tensor) -> Sequence[torch.Tensor]:
        if unread and any(grad_fn_raises(user[i]) for i in unread):
            user = tuple(u.detach() if i in unread and grad_fn_raises(u) else u for i, u in enumerate(user))
        if torch._C._are_functorch_transforms_active():
            raise UnsupportedError(compiled_call_under_transform_message("the call"))
        return cast("Sequence[torch.Tensor]", _c_apply(holder, *map(_unwrap_if_dead, user)))

    return apply


def _plain_c_apply(step: _Step) -> Callable[..., Sequence[torch.Tensor]]:
    """`CompiledStep`'s C apply bound to a plain step's holder (`_plain_apply`'s call outside functorch's
    transforms, for inputs that need no detaching)."""
    holder: tuple[_Step, list[torch.Tensor], list[torch.Tensor], dict[str, int], list[Any], _LeafGrads] = (
        step, [], [], {}, [], ()
    )  # fmt: skip
    return cast("Callable[..., Sequence[torch.Tensor]]", functools.partial(_c_apply, holder))


_c_apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, CompiledStep)
_grad_enabled = torch.is_grad_enabled


def engine_node_apply(ctx: Any, *grads: torch.Tensor | None) -> Any:
    """What the engine calls to run a CompiledStep node (its backward class's `apply`): BackwardCFunction.apply
    for this class (a `backward`, no `vjp`, no boxed gradients) without its two Python frames; a lone plain step
    (`_PlainStep.lone`) given its one tangent as a plain tensor, with grad off, runs its backward here: the tangent
    in its traced strides, the backward graph, the gradient unshared from the tangent (`_unshared`)."""
    s: _Step = ctx.step
    if (p := s.plain) is not None and (lone := p.lone) is not None and type(g := grads[0]) is torch.Tensor:
        if not _grad_enabled():
            at, stride = lone
            r = s.plain_bw(g if stride is None or g.stride() == stride else _restride(g, stride))[0]
            if type(r) is torch.Tensor and r._is_view() and storage_address(r) == storage_address(g):
                r = r.clone()
            if p.n_results == 1:
                return (None, r)
            result: list[torch.Tensor | None] = [None] * p.n_results
            result[at] = r
            return (None, *result)
    return CompiledStep.backward(ctx, *grads)


CompiledStep._backward_cls.apply = engine_node_apply  # type: ignore[attr-defined]  # FunctionMeta's, untyped
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def _apply_step(*args: object) -> Sequence[torch.Tensor]:
    """`CompiledStep.apply(*args)`: outside functorch's transforms, what torch's `Function.apply` does there (dead
    functorch wrappers unwrapped, then the C apply) without its Python frames (~4 us a call, more where a
    process-wide wrapper of `Function.apply` sits in front: torch_internals.function_applies_noted). Inside a
    transform, refused (See Note [Compiled Functions Inside torch.func Transforms])."""
    if torch._C._are_functorch_transforms_active():  # (torch's Function.apply would ask for setup_context)
        raise UnsupportedError(compiled_call_under_transform_message("the call"))
    return cast(
        "Sequence[torch.Tensor]",
        _c_apply(*(_unwrap_if_dead(a) if isinstance(a, torch.Tensor) else a for a in args)),
    )


def _detach_apart_members(user: list[torch.Tensor], returned: frozenset[int]) -> None:
    """The view inputs at `returned` (backward_probe.eager_saves' detached: returned as themselves, their leaf reached
    by no node of the program's) that are alias group members (no gradient input of the Function's: `_apart_inputs`
    leaves them), detached in `user` where no other input leads to their leaf: eager's program gives that leaf no
    gradient, and the Function's edge to it would hold its accumulator back behind the Function's node, which may
    raise (a deferred error) where eager's engine accumulates it first from the view's own node (backward_probe's
    comment on saved tensors)."""
    behind = {id(leaf) for i in returned for leaf in _leaf_of(user[i])}
    for i, t in enumerate(user):
        if i not in returned and t.requires_grad:  # another input leads to it: the Function's gradient may be its
            behind -= {id(leaf) for leaf in _leaf_of(t)}
    for i in returned:
        if any(id(leaf) in behind for leaf in _leaf_of(user[i])):
            user[i] = user[i].detach()


def _leaf_of(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The autograd leaf that requires grad `t` is or is a view of, if any."""
    leaf = t if t._base is None else t._base
    return (leaf,) if leaf.requires_grad and leaf.grad_fn is None else ()


def _detach_apart(user: list[torch.Tensor], apart: tuple[int, ...], bases_attached: bool) -> None:
    """The inputs of `_Step.apart` in `user`, detached. Where no other input that requires grad stays attached (nor
    an alias group's base: `bases_attached`), the first of them goes in as a stand-in instead, a new leaf over the
    same data that requires grad: the outputs keep their history as eager's do (computed from a no_grad view of the
    leaf, which requires grad with no edge to it), and nothing observes the stand-in's accumulator."""
    grads = [i for i in apart if user[i].requires_grad]
    if not grads:
        return
    attached = bases_attached or any(t.requires_grad for i, t in enumerate(user) if i not in apart)
    for i in apart:
        user[i] = user[i].detach()
    if not attached:
        user[grads[0]].requires_grad_()


def _detached(value: object) -> object:
    return value.detach() if isinstance(value, torch.Tensor) else value
