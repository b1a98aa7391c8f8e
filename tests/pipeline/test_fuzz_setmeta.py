"""Fuzz follow-ups: set_() under no_grad of tensors with autograd history, and metadata parity after set_() and
in-place view ops (fuzz seeds 6000 and 7000)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor

_VIEW_AFTER_SET_RULE = "a view of a tensor the program computed with grad and set_\\(\\) under no_grad before taking"


def test_view_of_intermediate_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #9637: eager's output keeps its expand's history (AsStridedBackward0 reaching args[0]) over
    # args[1]'s storage; ours was a view of args[1] without grad (refused, then supported: Note [Views Set Under
    # no_grad With History])
    def f(x0: T, x1: T) -> object:
        t1 = x0.clone().expand((3, 1, 2))
        with torch.no_grad():
            set_to(t1, x1)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 2), requires_grad=True)
        return (b0[:, 2:4:2], torch.randn((2, 4)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_clone_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #8850: the same through view(); eager's `_base` is the clone, ours was args[0]
    def f(x0: T, x1: T) -> object:
        t1 = x1.clone().view((3, 1, -1))
        with torch.no_grad():
            set_to(t1, x0)
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (torch.randn((4, 2, 3)), torch.randn((3, 1), requires_grad=True)), compile_fn=compile_fn
        )


def test_view_taken_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #501: eager's view has ViewBackward0 over MulBackward0 of the old size (its backward raises);
    # ours was a leaf without grad
    def f(x0: T) -> object:
        t2 = x0.expand((6,)).mul(0.5)
        with torch.no_grad():
            set_to(t2, x0[1:1:2])
        return (t2.view((0,)),)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(2, 3).view((6,)),), compile_fn, _VIEW_AFTER_SET_RULE)


def test_subclass_view_taken_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t = x0 * 2
        with torch.no_grad():
            set_to(t, x1)
        return (t.view(-1),)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(4), pair(4)), compile_fn, _VIEW_AFTER_SET_RULE)


def test_subclass_view_of_input_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # Views of inputs are rebuilt with their own history: not refused
    def f(x0: T, x1: T) -> object:
        t = x0.view(-1)
        with torch.no_grad():
            set_to(t, x1)
        return (t,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(4), pair(4)), compile_fn=compile_fn)


def test_view_of_set_intermediate_used_by_the_graph(compile_fn: CompileFn | None) -> None:
    # A value computed from such a view is the graph's own: exact
    def f(x0: T, x1: T) -> object:
        t = x0 * 2
        with torch.no_grad():
            set_to(t, x1)
        return (t.view(-1) * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn(4)), compile_fn=compile_fn)


_WRITE_AFTER_SET_RULE = "set_\\(\\) it under no_grad to another input's storage and then wrote it with grad enabled"


def test_write_with_grad_after_no_grad_set_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #29: eager's fill_ is recorded on args[1]'s history (its gradient is zeros); ours gave the
    # leaf behind args[1] the output's gradient
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        x1.fill_(2.0)
        return (x1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (torch.randn((3, 4)), nonleaf(4)), compile_fn, _WRITE_AFTER_SET_RULE)


def test_write_through_other_input_after_no_grad_set(compile_fn: CompileFn | None) -> None:
    # The write goes through the set_() source, not the input that requires grad: not refused
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        x0.mul_(2.0)
        return (x1 * 1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(4), nonleaf(4)), compile_fn=compile_fn)


def test_detach_of_view_taken_before_resize(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7202: eager's detach() is no view; the as_strided() replay after the resize_() made one
    def f(x0: T) -> object:
        t0 = x0.view((12, 4))
        x0.resize_((4,))
        return (t0.detach(),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((4, 3, 4)),), compile_fn=compile_fn)


def test_view_of_view_taken_before_resize(compile_fn: CompileFn | None) -> None:
    # The same chain ending in a view stays a view of the input
    def f(x0: T) -> object:
        t0 = x0.view((12, 4))
        x0.resize_((4,))
        return (t0.view(-1),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((4, 3, 4)),), compile_fn=compile_fn)


_STALE_VIEW_RULE = "a view taken with grad enabled is used with grad after the program changed the layout of the tensor"


def test_view_used_after_transpose_of_its_base_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6722: the traced backward sent t0's gradient to the transposed elements of the leaf
    def f(x0: T) -> object:
        t0 = x0.view((4, -1, 1))
        x0.transpose_(1, 0)
        return (t0.add(2.0),)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(4, 4),), compile_fn, _STALE_VIEW_RULE + ".*transpose_\\(\\)")


def test_slice_of_intermediate_used_after_its_t_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t = x0 * 2
        v = t[1:]
        t.t_()
        return (v.add(2.0), t)

    with torch.enable_grad():
        assert_refused(f, lambda: (torch.randn(4, 4, requires_grad=True),), compile_fn, _STALE_VIEW_RULE)


def test_view_used_after_in_place_view_op_that_replays_the_same(compile_fn: CompileFn | None) -> None:
    # unsqueeze_() then view((4, -1, 1)) of the new layout is the same view, squeeze_() of a 4x4 changes nothing:
    # the regenerated histories agree, not refused
    def f(x0: T, x1: T) -> object:
        t0 = x0.view((4, -1, 1))
        t1 = x1[1:]
        x0.unsqueeze_(0)
        x1.squeeze_()
        return (t0.add(2.0), t1.mul(3.0))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4, 4), nonleaf(4, 4)), compile_fn=compile_fn)


_SUBCLASS_VIEW_RULE = "is a view with autograd history of a tensor subclass input whose layout the program changed"


def test_subclass_view_between_in_place_view_ops_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #5093: eager's output is a view of args[0] with history (whose backward raises); ours was
    # rebuilt from its inner tensors, without history
    def f(x0: T) -> object:
        x0.transpose_(0, 0)
        t0 = x0.transpose(0, 0)
        x0.unsqueeze_(-1)
        return (t0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(1),), compile_fn, _SUBCLASS_VIEW_RULE)


def test_subclass_view_after_t_then_unsqueeze_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0[0]
        x0.unsqueeze_(0)
        return (t0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2, 3),), compile_fn, _SUBCLASS_VIEW_RULE)


def test_subclass_view_after_t(compile_fn: CompileFn | None) -> None:
    # A view taken after the only in-place view op is replayed: not refused
    def f(x0: T) -> object:
        x0.t_()
        return (x0[0],)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 3),), compile_fn=compile_fn)


def test_subclass_view_set_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #9543: the first set_() was taken for an in-place step of the view chain, which it cannot
    # replay; eager's output is a view of args[0] (the last set_() overrides the first)
    def f(x0: T) -> object:
        t0 = x0.view((2, 1))
        t1 = t0.clone()
        set_to(t0, t1)
        set_to(t0, t1)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


def test_subclass_view_set_to_two_tensors(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view((2, 1))
        t1 = t0.clone()
        set_to(t0, t1.t())
        set_to(t0, t1 * 2)
        return (t0, t1)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


def test_subclass_intermediate_root_takes_its_leaf_strides(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #8603: t0, a root its view t1 replays from, was rebuilt with the fake trace's outer strides
    # (4, 1); eager's add of a (1, 4) tensor with strides (1, 1) keeps them
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0.add(3.0)
        return (t0, t0.diagonal(0, 0, 1))

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(4, 1),), compile_fn=compile_fn)


def test_subclass_intermediate_root_takes_its_leaf_strides_in_training(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.t().add(3.0)
        return (t0, t0.diagonal(0, 0, 1))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(4, 1, requires_grad=True),), compile_fn=compile_fn)
