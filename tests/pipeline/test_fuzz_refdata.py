"""Fuzz follow-ups (helper refdata, seed 44000): programs around `.data =` on plain tensors, once refused."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import assert_refused, check_with_grad, leaf, nonleaf

T = torch.Tensor


def _inputs(*makers: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        return tuple(m() for m in makers)

    return make_inputs


def _leaf_view() -> T:
    with torch.enable_grad():
        return leaf(4, 4, 4).transpose(0, 2)


def test_view_input_returned_after_data_of_another_size(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #6891 (shrunk): x0's TransposeBackward0 (the caller's) expects [4, 4, 4]; eager's backward
    # fails its root check for the [4, 4] gradient, and so does ours on the same object (Note [Errors Raised Outside
    # The Program]); it was refused as an error only eager's backward sees
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t2 = t0.detach().unbind(0)[1]
        x0.data = t2
        return (x0,)

    def plain(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0,)

    check_with_grad(f, _inputs(_leaf_view), compile_fn)
    check_with_grad(plain, _inputs(_leaf_view, lambda: torch.randn(4, 4)), compile_fn)
    check_with_grad(plain, _inputs(lambda: nonleaf(3, 4), lambda: torch.randn(2)), compile_fn)


def test_leaf_passed_twice_returned_after_data_of_another_size(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #9643 (shrunk): x1 and x2 are one leaf; t0's backward fails in x1's AccumulateGrad (the only
    # leaf), x2's at its root check: the same nodes in ours (Note [Errors Raised Outside The Program])
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.mul(3.0)
        x2.data = x0
        return (t0, x2)

    def make_inputs() -> tuple[object, ...]:
        b1 = leaf(3, 4)
        return (torch.randn(()), b1, b1)

    check_with_grad(f, make_inputs, compile_fn)


def test_leaf_read_then_returned_after_data_of_another_size(compile_fn: CompileFn | None) -> None:
    # variants of #9643: a single leaf read before the assignment, returned or not, and a view of a leaf
    def returned(x0: T, x1: T) -> object:
        t = x0 * 2
        x0.data = x1
        return (t, x0)

    def two_leaves(x0: T, x1: T, x2: T) -> object:
        t = x0 * x2
        x0.data = x1
        return (t,)

    check_with_grad(returned, _inputs(lambda: leaf(3, 4), lambda: torch.randn(2)), compile_fn)
    check_with_grad(returned, _inputs(lambda: leaf(4, 3).t(), lambda: torch.randn(2)), compile_fn)
    check_with_grad(two_leaves, _inputs(lambda: leaf(3, 4), lambda: torch.randn(2), lambda: leaf(3, 4)), compile_fn)


def test_raise_inside_the_program_stays_refused(compile_fn: CompileFn | None) -> None:
    # an intermediate whose `.data` shrank: eager's TBackward0 -> DiagonalBackward0 fails inside the program, which
    # the compiled backward cannot repeat at the same step (Note [Errors Only Eager's Backward Sees])
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        t0.data = t0[1:3:1]
        return (t0.t(),)

    with torch.enable_grad():
        assert_refused(f, lambda: (leaf(2, 3, 4),), compile_fn, "Errors Only Eager's Backward Sees")
