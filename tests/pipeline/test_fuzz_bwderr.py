"""Fuzz regressions about backward errors and gradient presence (fuzz seeds 6000 and 7000): a backward that eager
completes must run, one eager raises must raise, and gradients eager accumulates before raising must match or the
program is refused with the rule's text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def check(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_backward_error_only_through_written_input(compile_fn: CompileFn | None) -> None:
    # seed 7000 #2947: only a backward through x1's new value fails (MulBackward saved x1 before x1.mul_ wrote
    # it); eager's backward through x0 runs.
    def f(x0: T, x1: T) -> object:
        x1.copy_(x0)
        x1.mul_(x0)
        x0.copy_(x0)
        return (x0,)

    check(f, lambda: (pair_nonleaf(), pair()), compile_fn)


def test_backward_error_only_through_written_plain_input(compile_fn: CompileFn | None) -> None:
    # seed 7000 #8804: x1.mul_(x1) makes x1's new value's backward fail; eager's backward through x0 runs.
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(x2)
        x1.mul_(x1)
        return (x0,)

    check(f, lambda: (pair(3), nonleaf(1, 2), torch.randn((), requires_grad=True)), compile_fn)


def test_backward_through_failing_written_input_still_raises(compile_fn: CompileFn | None) -> None:
    # Note [Backward Errors Are Deferred]: a backward through x1's new value raises, as in eager.
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(x2)
        x1.mul_(x1)
        return (x0,)

    compiled = (compile_fn or subclassaot.compile)(f)
    x1 = nonleaf(1, 2)
    with torch.enable_grad():
        compiled(pair(3), x1, torch.randn((), requires_grad=True))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.backward(x1.sum())


def test_grad_accumulated_before_error_through_returned_input_refused(compile_fn: CompileFn | None) -> None:
    # seed 6000 #7494: eager's backward through the returned x0 accumulates x1.grad (MulBackward of x0.mul_(x1))
    # before MulBackward of x0.mul_(x0) raises; the check looked at the program's own outputs only, not at the new
    # value of a returned input.
    def f(x0: T, x1: T) -> object:
        x0.mul_(x0)
        x0.mul_(x1)
        return (x0,)

    assert_refused(
        f,
        lambda: (nonleaf(1), torch.randn((), requires_grad=True)),
        compile_fn,
        "after eager accumulated the gradient of an input leaf",
    )


def test_set_to_returned_leaf_holds_its_grad_behind_set_node(compile_fn: CompileFn | None) -> None:
    # seed 6000 #544 (Note [set_ Under Grad]): eager's set_ node has an edge to x2's history, so x1 (the same leaf)
    # gets no gradient when the backward through x0 raises; the epilogue's x0.set_(x0) left x1's gradient free.
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x0, x2)
        return (x0, x1)

    def make_inputs() -> tuple[object, ...]:
        b1 = torch.randn((), requires_grad=True)
        return (nonleaf(), b1, b1)

    check(f, make_inputs, compile_fn)


def test_no_grad_set_to_own_view_renews_grad_accumulator(compile_fn: CompileFn | None) -> None:
    # seed 6000 #183: the epilogue gave x0 its new metadata with as_strided_, which keeps the leaf's gradient
    # accumulator made for the (4, 1, 1) layout; eager's set_ renews it, so the backward through t1 runs.
    def f(x0: T) -> object:
        t0 = x0.view((1, 1, 4))
        t1 = t0.view((4,))
        with torch.no_grad():
            set_to(x0, t1)
        return (t1,)

    check(f, lambda: (torch.randn((4, 1, 1), requires_grad=True),), compile_fn)


def test_write_through_view_reshaped_in_place_refused(compile_fn: CompileFn | None) -> None:
    # seed 7000 #3857: the traced backward raised "CopySlices returned an invalid gradient" (autograd's view replay
    # drops the unsqueeze_) where eager's backward runs; refused rather than deferred.
    def f(x0: T, x1: T) -> object:
        t0 = x0.transpose(1, 0)
        t0.unsqueeze_(-1)
        t0.add_(t0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 1)
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "whose shape an in-place view op changed")
