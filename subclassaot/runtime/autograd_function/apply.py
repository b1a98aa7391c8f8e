"""Stage `runtime` (training): `training_call`, the `GraphCall` that applies `CompiledStep` per call, and
`engine_node_apply`, the Function's backward as the torch.compile backend calls it.

Input: the `RuntimePlan`, the compiled forward and backward callables and the `BackwardPlan`.
Output: a `GraphCall` for `runtime.make_runner`: it runs the forward graph through the Function so that autograd sees
user-level tensors (subclass outputs wrapped inside the Function, subclass gradients rebuilt from dense ones).
Invariants: inputs the Function takes detached go in detached (Note [Backward Errors Are Deferred]); a plain step is
applied through autograd's C apply without the general path's Python.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.runtime.autograd_function.backward_checks import _leaf_grads, _LeafGrads
from subclassaot.runtime.autograd_function.function import CompiledStep
from subclassaot.runtime.autograd_function.outputs import _relabel_function_views
from subclassaot.runtime.autograd_function.plain import _plain_step
from subclassaot.runtime.autograd_function.saved_checks import _note_counters
from subclassaot.runtime.autograd_function.step import _detached_inputs, _Step
from subclassaot.runtime.autograd_function.tangents import _restride
from subclassaot.runtime.plan import (
    BackwardPlan,
    EagerSaves,
    GraphCall,
    GraphRunResult,
    RuntimePlan,
    SettlingCall,
)
from subclassaot.torch_internals import (
    compiled_call_under_transform_message,
    grad_fn_raises,
    storage_address,
)


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
