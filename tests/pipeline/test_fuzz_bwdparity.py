"""Fuzz regressions (helper bwdparity): the compiled backward raises exactly where eager's does."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, pair

T = torch.Tensor


def test_failing_node_on_no_path_to_an_input(compile_fn: CompileFn | None) -> None:
    # Note [Backward Runs Every Node]: t1, a no_grad view, cuts the history, so MulBackward0 (which saved the t2 that
    # mul_ overwrites) is on no path to x0; eager's backward runs it and raises, autograd.grad did not
    def f(x0: T) -> object:
        with torch.no_grad():
            t1 = x0.view(-1)
        t2 = t1.clone()
        t3 = t2.view(-1)
        t2.mul_(t2)
        return (t3,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(2, requires_grad=True),), compile_fn=compile_fn)


def test_failing_node_on_no_path_input_returned_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #7477: as above on empty slices of a subclass passed twice and returned; eager accumulates the
    # returned input's gradient before the program's node raises
    def f(x0: T, x1: T) -> object:
        t0 = x0[0:0:1]
        with torch.no_grad():
            x0.mul_(-1.0)
            t1 = t0.view((0,))
        t2 = t1.clone()
        t3 = t2.view((0,))
        t2.mul_(t2)
        return (x1, x0, t3)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(2, requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_data_assigned_another_size_fails_eager_backward_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #2988, #6066: t0's DiagonalBackward0 keeps its size after `.data =`, so eager's backward fails
    # TBackward0's size check; the output is regenerated from the leaf x0, outside the compiled Function, whose
    # backward ran (Note [Errors Only Eager's Backward Sees])
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        t1 = t0[1:3:1]
        t0.data = t1
        t2 = t0.t()
        return (t2,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (torch.randn((2, 3, 4), requires_grad=True),), compile_fn, "Errors Only Eager's Backward Sees"
        )
