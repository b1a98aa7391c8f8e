"""Fuzz follow-up (seed 16000 #6616): a plain input that requires grad, given another storage by `.data =`, then
written with grad through itself or a view of it: eager records the write on the input's own history (Note [Writes
With Grad After .data =]); ours kept the input's old grad_fn, and its gradient lost the write (a wrong sign)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

T = torch.Tensor
Maker = Callable[[], tuple[object, ...]]


def _plain_makers() -> list[Maker]:
    def view_input() -> tuple[object, ...]:
        base = nonleaf(3, 2, 3)
        return (base[0], torch.randn(2, 3), leaf(2, 3))

    return [
        lambda: (nonleaf(), torch.randn(2, 3), leaf(2, 3)),  # 0-d: the (2, 3) gradient is summed back
        lambda: (nonleaf(2, 3), torch.randn(2, 3), leaf(2, 3)),
        lambda: (nonleaf(3), torch.randn(2, 3), leaf(2, 3)),
        lambda: (nonleaf(2, 3), nonleaf(2, 3), leaf(2, 3)),  # the assigned input has a history of its own
        lambda: (torch.randn(2, 3), torch.randn(2, 3), leaf(2, 3)),  # no grad anywhere but w
        view_input,
    ]


def test_write_through_a_view_after_data_assignment(compile_fn: CompileFn | None) -> None:
    # fuzz seed 16000 #6616: leaf b0's gradient had the wrong sign (ours +0.068, eager -0.068)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x0[:, 0:2:1]
        with torch.no_grad():
            x1.copy_(x0)
        t0.mul_(-1.0)
        return (t0, x1)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((), requires_grad=True)
            return (b0.clone(), torch.randn((2, 3)).contiguous())

    check_with_grad(f, make_inputs, compile_fn)


def test_writes_after_data_assignment_variants(compile_fn: CompileFn | None) -> None:
    def sliced_mul(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        t0 = x0[:, 0:2:1]
        t0.mul_(2.0)
        return (t0, x1)

    def sliced_add(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        t0 = x0[:, 0:2:1]
        t0.add_(1.0)
        return (t0,)

    def whole(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        x0.mul_(-1.0)
        return (x0, x1)

    def by_tensor(x0: T, x1: T, w: T) -> object:  # w gets its gradient through x0's history
        x0.data = x1
        x0.mul_(w)
        return (x0,)

    def row(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        x0[0].mul_(-1.0)
        return (x0,)

    def unreturned(x0: T, x1: T, w: T) -> object:  # x0's history after the call is eager's
        x0.data = x1
        x0.mul_(-1.0)
        return ()

    def fresh(x0: T, x1: T, w: T) -> object:
        x0.data = x1.clone()
        x0.mul_(-1.0)
        return (x0,)

    def assigned_written_after(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        x0.mul_(-1.0)
        x1.add_(1.0)
        return (x0, x1)

    def read_then_written(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        y = x0 * 2
        x0.mul_(x0)
        return (x0.view(-1), y)

    def no_grad_write_first(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        with torch.no_grad():
            x0.mul_(2.0)
        x0.add_(1.0)
        return (x0,)

    def view_taken_before(x0: T, x1: T, w: T) -> object:
        x0.data = x1
        t = x0.t()
        x0.mul_(-1.0)
        return (t,)

    for fn in (sliced_mul, sliced_add, whole, by_tensor, row, unreturned, fresh, assigned_written_after):
        for k, make in enumerate(_plain_makers()):
            if fn is by_tensor and k == 4:  # an input that gains grad below autograd: refused by its own rule
                refused_with_grad(fn, make, compile_fn, "does not require grad, and the program set_")
            else:
                check_with_grad(fn, make, compile_fn)
            check_no_grad(fn, make, compile_fn)
    for fn in (read_then_written, no_grad_write_first, view_taken_before):
        for make in _plain_makers():
            check_with_grad(fn, make, compile_fn)
            check_no_grad(fn, make, compile_fn)  # view_taken_before: eager's no_grad t raises when read


def test_writes_after_data_assignment_of_subclass_inputs(compile_fn: CompileFn | None) -> None:
    # PairTensor inputs keep their wrapper-level rule (Note [Subclass Inputs Mutated In Training])
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x0[:, 0:2:1]
        t0.mul_(-1.0)
        return (t0, x1)

    def whole(x0: T, x1: T) -> object:
        x0.data = x1
        x0.mul_(-1.0)
        return (x0,)

    for fn in (f, whole):
        for make in (lambda: (pair_nonleaf(2, 3), pair(2, 3)), lambda: (pair(2, 3), pair(2, 3))):
            check_with_grad(fn, make, compile_fn)
            check_no_grad(fn, make, compile_fn)


def test_writes_around_data_assignment_refused(compile_fn: CompileFn | None) -> None:
    def written_before_last(x0: T, x1: T, w: T) -> object:  # eager's history is of x1's storage, x0 ends on w's
        x0.data = x1
        x0.mul_(-1.0)
        x0.data = w.detach()
        return (x0,)

    def transposed_after(x0: T, x1: T, w: T) -> object:  # eager's TBackward0 turns the gradient back to (2, 3)
        x0.data = x1
        x0.mul_(-1.0)
        x0.t_()
        return (x0,)

    make = _plain_makers()[1]
    refused_with_grad(written_before_last, make, compile_fn, r"then assigns its `\.data` again")
    refused_with_grad(transposed_after, make, compile_fn, "changes its layout in place")
    check_no_grad(written_before_last, make, compile_fn)
    check_no_grad(transposed_after, make, compile_fn)
    refused_with_grad(transposed_after, _plain_makers()[0], compile_fn, "changes its layout in place")


def test_write_after_data_assignment_whose_backward_raises(compile_fn: CompileFn | None) -> None:
    # a (4,) input written at (2, 2): eager's backward through it raises (its CloneBackward0 recorded (4,)), and so
    # does the epilogue's copy_ (AssignedWrite.AFTER_RAISING); without a backward through it the program runs
    # (test_fuzz_setcrash's `_data_transpose_write`)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        x0.transpose(0, 1).mul_(2.0)
        return (x0,)

    def unreturned(x0: T, x1: T) -> object:
        x0.data = x1
        x0.mul_(2.0)
        return (x1.sin(),)

    def make() -> tuple[object, ...]:
        return (nonleaf(4), torch.randn(2, 2))

    # returned, eager's backward error is one the compiled backward cannot raise at the same step: refused
    refused_with_grad(f, make, compile_fn, r"Note \[Errors Only Eager's Backward Sees\]")
    check_with_grad(unreturned, make, compile_fn)
    for fn in (f, unreturned):
        check_no_grad(fn, make, compile_fn)
