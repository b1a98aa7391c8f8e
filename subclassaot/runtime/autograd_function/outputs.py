"""Stage `runtime` (training), the Function's outputs as the caller gets them: fresh outputs (subclass ones wrapped
inside the Function), views a custom Function of the program returned (`FunctionOutputs`), and the values the
epilogue rebuilds wrappers and roots from.

Input: the `_Step` and the forward graph's outputs.
Output: the tensors the Function returns, and those the epilogue reads.
Invariants: no output is a view or appears twice among the Function's outputs (`_distinct_outputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch

from subclassaot.authoring.protocol import unflatten_subclass
from subclassaot.runtime.autograd_function.step import _member_of, _Slots, _Step
from subclassaot.runtime.plan import (
    MetaEvaluator,
    non_view_alias,
)
from subclassaot.runtime.regenerate import fresh_outer_stride, replay_steps, root_leaf_values, root_outer_stride
from subclassaot.schemas import (
    OutputLeaf,
)
from subclassaot.torch_internals import (
    get_version,
    grad_fn_raises,
    set_version,
    storage_key,
)


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
