"""Fuzz follow-ups (seed 14000): a tensor subclass leaf that requires grad, given another wrapper size by `.data =`
and reached by no gradient, goes into the compiled Function detached (Note [Unreached Inputs Are Detached])."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, pair, pair_nonleaf

T = torch.Tensor


def _inputs(make0: Callable[[], T], make1: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        return (make0(), make1())

    return make_inputs


def _pair_leaves(s0: tuple[int, ...], s1: tuple[int, ...]) -> Callable[[], tuple[object, ...]]:
    return _inputs(lambda: pair(*s0, requires_grad=True), lambda: pair(*s1, requires_grad=True))


def test_resized_subclass_leaf_returned_gets_a_fresh_accumulator(compile_fn: CompileFn | None) -> None:
    # fuzz seed 14000 #1219 (shrunk): the Function took x0 attached and made its accumulator at size (4, 4) before
    # the epilogue's `.data =`; eager makes it at the backward, at size (): our backward raised "output with shape
    # [] doesn't match the broadcast shape [4, 4]" where eager's ran
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x1.sin()
        return (t0, x0)

    def more(x0: T, x1: T) -> object:  # x0 returned with a view of it, x1 read by a non-view op
        x0.data = x1
        return (x1.mul(2.0), x0, x0.unsqueeze(0))

    def unreturned(x0: T, x1: T) -> object:
        x0.data = x1
        return (x1.cos(),)

    sizes: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((4, 4), ()), ((2, 3), (3,)), ((3,), (2, 3))]
    for fn in (f, more, unreturned):
        for s0, s1 in sizes:
            check_with_grad(fn, _pair_leaves(s0, s1), compile_fn)
            check_no_grad(fn, _pair_leaves(s0, s1), compile_fn)
        # x1 a non-leaf subclass, or one that needs no grad; plain leaves
        check_with_grad(fn, _inputs(lambda: pair(4, 4, requires_grad=True), lambda: pair_nonleaf(2)), compile_fn)
        check_with_grad(fn, _inputs(lambda: pair(4, 4, requires_grad=True), lambda: pair(2)), compile_fn)
        check_with_grad(fn, _inputs(lambda: leaf(4, 4), leaf), compile_fn)


def test_resized_subclass_leaf_read_after_the_assignment(compile_fn: CompileFn | None) -> None:
    # found beside seed 14000 #1219: x0 is read with grad after the assignment, so eager makes its accumulator then,
    # at the new wrapper size, and reduces SinBackward0's gradient (of the inner size) to it. The Function took x0
    # attached (its accumulator at the old size): our backward raised "output with shape [] doesn't match the
    # broadcast shape [4, 4]" where eager's runs (Note [Subclass Accumulators Made After .data =]; variants in
    # test_fuzz_pairdata.py)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.sin(), x0)

    check_with_grad(f, _pair_leaves((4, 4), ()), compile_fn)
