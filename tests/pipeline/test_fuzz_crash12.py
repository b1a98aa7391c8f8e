"""Fuzz follow-ups (seed 12000): crashes of the epilogue where eager runs (Note [set_ Renews A Leaf's Accumulator],
Note [In-Place Ops On A View Whose Base Gained Grad], Note [Inputs That Gain Grad In Training])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair

T = torch.Tensor


@pytest.mark.parametrize("subclass", [False, True])
def test_self_set_of_multi_output_view_under_no_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # fuzz seed 12000 #1059: x0.set_(x0) under no_grad of unbind's output: its grad_fn then raises when read (as in
    # eager), so the runtime's accumulator renewal must not take it for a leaf
    def f(x0: T) -> object:
        x0.set_(x0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return ()

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair(4, 2, requires_grad=True) if subclass else torch.randn(4, 2, requires_grad=True)
            return (b0.unbind(0)[3],)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_inplace_view_op_on_member_whose_base_gains_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #2613: x2.t_() on a view of a subclass input x1 that gains grad by x1.copy_(x0) after it; the
    # epilogue copies first and replays t_() after, on a view whose grad_fn autograd has not made yet
    def f(x0: T, x1: T, x2: T) -> object:
        x2.t_()
        x1.copy_(x0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b1 = pair(2)
        return (nonleaf(), b1, b1.select(0, -1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_inplace_view_op_on_2d_member_whose_base_gains_grad(compile_fn: CompileFn | None) -> None:
    # as above, where t_() changes the metadata, and the written input is returned
    def f(x0: T, x1: T, x2: T) -> object:
        x2.t_()
        x1.copy_(x0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b1 = pair(2, 3, 4)
        return (nonleaf(3, 4), b1, b1.select(0, -1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("transposed", [False, True])
def test_member_used_after_another_gains_grad_is_refused(compile_fn: CompileFn | None, transposed: bool) -> None:
    # #2613's neighbour: x2 read after x1.copy_(x0) gave x1 grad; eager's x2, a view of x1, then requires grad, the
    # trace's own wrapper for it does not (before the refusal: output without grad_fn, args[0].grad None)
    def f(x0: T, x1: T, x2: T) -> object:
        if transposed:
            x2.t_()
        x1.copy_(x0)
        return (x2 * 2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = pair(2)
        return (nonleaf(), b1, b1.select(0, -1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "share storage and do not require grad; a write with grad")
