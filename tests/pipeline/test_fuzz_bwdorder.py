"""Fuzz follow-ups: programs whose backward fails in eager, deferred where a probe of eager's own backward shows
what it does before raising (Note [Probing Eager's Backward], Note [Backward Errors Through Input Values Only])."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _same_twice(make: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        b0 = make()
        return (b0, b0)

    return make_inputs


def test_saved_input_written_through_its_other_name(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1788 (#5822, #6714 alike): the one input passed twice is saved by mul and then written, so
    # eager's backward raises before any gradient; the traced backward of the gradient alone succeeded (refused)
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(x0)
        x1.add_(0.5)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(lambda: pair_nonleaf(1, 3, 1)), compile_fn=compile_fn)


def test_saved_input_overwritten_by_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2777 (#9368 alike): sin saved x0, copy_ wrote it
    def f(x0: T) -> object:
        t0 = x0.sin()
        x0.copy_(x0)
        return (x0, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(3),), compile_fn=compile_fn)


def test_saved_plain_input_without_grad_changed_in_place(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #9546: mul saved x0 (no grad) for x2's gradient, then x0.t_() advanced its version; the other
    # output t4 only reaches x1's history
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2.mul(x0)
        x0.t_()
        t4 = x1.reshape((4, 2))
        return (t4, t0)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4), pair_nonleaf(4, 2).t(), pair_nonleaf(1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_fill_of_a_saved_view_of_a_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8556: eager's backward through both outputs runs t3's failing SinBackward before x0's
    # AccumulateGrad is ready (t2's path joins it there)
    def f(x0: T) -> object:
        t0 = x0.t()
        t1 = t0.sin()
        t2 = t0.clone()
        with torch.no_grad():
            t0.fill_(-1.0)
        t3 = t1.view((1, 1, 2))
        return (t3, t2)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(2, requires_grad=True),), compile_fn=compile_fn)


def test_backward_through_some_outputs_only(compile_fn: CompileFn | None) -> None:
    # Beside fuzz seed 7000 #6714: eager's backward through t2 alone completes, through t0 (alone or not) raises;
    # the compiled one raises eager's error for the sets the probe saw raise, and refuses the others when it runs
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(x0)
        x1.add_(3.0)
        t2 = x1.mul(-1.0)
        return (t0, t2)

    make_inputs = _same_twice(lambda: nonleaf(2, 2))
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        if compile_fn is not None:
            return
        g = subclassaot.compile(f)
        for chosen in ((0,), (0, 1)):
            x = nonleaf(2, 2)
            out = cast(tuple[T, T], g(x, x))
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                torch.autograd.backward([out[k].sum() for k in chosen])
        x = nonleaf(2, 2)
        out = cast(tuple[T, T], g(x, x))
        with pytest.raises(UnsupportedError, match="was not checked to fail there"):
            torch.autograd.backward(out[1].sum())


def test_gradient_accumulated_before_the_error_refused(compile_fn: CompileFn | None) -> None:
    # The probe sees y's AccumulateGrad run before x0's failing MulBackward (y's MulBackward is numbered after it);
    # the compiled backward would raise first
    def f(x0: T, y: T) -> object:
        x0.mul_(x0)
        t = y.mul(2.0)
        return (t.add(x0),)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (nonleaf(3), torch.randn(3, requires_grad=True)), compile_fn, "does not depend on the failing"
        )


def test_write_fails_backward_of_the_written_input_only(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6562: x0.mul_(x0) makes a backward through x0's new value fail; the output t1 does not reach
    # it, so eager's backward through it completes (refused before). A backward through x0 after the call raises
    # eager's error (Note [Backward Errors Through Input Values Only]).
    def f(x0: T, x1: T) -> object:
        x0.mul_(x0)
        t0 = x1.clone()
        t1 = t0.reshape((1, 2))
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1), pair(2, 1, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        if compile_fn is not None:
            return
        x0, x1 = pair_nonleaf(1), pair(2, 1, requires_grad=True)
        out = cast(tuple[T], subclassaot.compile(f)(x0, x1))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.backward(x0.sum() + out[0].sum())


def test_set_of_the_input_to_itself_after_a_clone(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8613: set_() under grad fails only a backward through x1's new value; t0 reaches x1's history
    def f(x0: T, x1: T) -> object:
        t0 = x1.clone()
        x1.add_(0.5)
        set_to(x1, x0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(lambda: nonleaf(2, 4)), compile_fn=compile_fn)


def test_view_of_a_leaf_returned_beside_a_failing_output(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1745: x0 is not a view of the leaf x1 (reshape copied); x1 returned as is gets its gradient
    # from eager's backward, which completes: only x0's new value's backward fails
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.sin()
        x0.mul_(x0)
        return (x1, x1, t0)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((4, 2), requires_grad=True)
        return (b0.as_strided((3, 2), (1, 0), 1).reshape((-1, 2, 3)), b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_written_input_returned_beside_another_whose_backward_fails(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8804 (DIVERGED before: our backward raised): x1.mul_(x1) fails only a backward through x1's
    # new value; the returned x0 is written from the leaf x2, and eager's backward through it completes. The
    # backward graph takes no tangent for x1's new value only (Note [Backward Errors Through Input Values Only]).
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(x2)
        x1.mul_(x1)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(3), nonleaf(1, 2), torch.randn((), requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_written_input_copied_into_itself_returned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2947 (DIVERGED before: our backward raised): only x1's new value (mul_ saved the x1 it wrote)
    # fails; the returned x0's backward completes in eager
    def f(x0: T, x1: T) -> object:
        x1.copy_(x0)
        x1.mul_(x0)
        x0.copy_(x0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(), pair()), compile_fn=compile_fn)


def test_input_passed_twice_returned_beside_a_failing_output(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1788 unshrunk: x1 (the object passed as x0 too) is returned; its tangent reaches the new values
    # of both positions, and a backward through both outputs raises eager's error, not a refusal
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(x0)
        x1.add_(0.5)
        return (t0, x1)

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(lambda: pair_nonleaf(1, 3, 1)), compile_fn=compile_fn)
        if compile_fn is not None:
            return
        x = pair_nonleaf(1, 3, 1)
        out = cast(tuple[T, T], subclassaot.compile(f)(x, x))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.backward([out[0].sum(), out[1].sum()])
