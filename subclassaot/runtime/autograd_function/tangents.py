"""Stage `runtime` (training), the tangents the Function's backward receives: each coerced to the structure the
backward graph was traced for, or a backward retraced for its own (Note [Tangent Retrace]); zeros for outputs no
tangent reached; gradients handed back without views of a tangent.

Input: the tangents autograd gives `CompiledStep.backward`, the `SubclassNode` each diff output was traced with.
Output: the dense tangent leaves the backward graph takes, or the variant key of a retraced backward (`_Variants`).
Invariants: a tangent of another structure is converted only by the subclass's own hooks, never guessed; a retrace
happens once per tangent structure and is logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from subclassaot.authoring.protocol import SubclassNode, flatten_subclass, is_traceable_subclass, unflatten_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.plan import (
    BackwardPlan,
    RetracedBackward,
)
from subclassaot.torch_internals import (
    storage_address,
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


def _shared_grads(grads: Sequence[torch.Tensor | None]) -> frozenset[int]:
    seen: set[int] = set()
    shared: set[int] = set()
    for g in grads:
        if g is not None:
            (shared if id(g) in seen else seen).add(id(g))
    return frozenset(shared)


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
