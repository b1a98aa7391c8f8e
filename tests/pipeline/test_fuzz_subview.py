"""Writes to overlapping views of one tensor subclass base in training (fuzz seed 7000; Note [Saved Members Of A
Written Wrapper Family], Note [Overlapping Subclass Members Written Through One])."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair_nonleaf

T = torch.Tensor


def test_member_saved_before_write_result_unused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 575 (refused before): a member saved by mul before another member's write; the
    # product is not returned, so eager's backward does not meet the stale saved value.
    def f(x0: T, x1: T) -> object:
        x1.mul(x0)  # saves both members; the product is dropped
        x0.mul_(3.0)
        return (x0 * 2, x1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf()
        return (b0, b0.expand(()))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_saved_before_write_backward_raises(compile_fn: CompileFn | None) -> None:
    # The saved member reaches an output: eager's backward raises (modified by an inplace operation), and the trace's
    # does too (without the family's counter advanced, the compiled backward ran: wrong); deferring that error is
    # not exact beside the written member's own output (Note [Backward Errors Are Deferred]): refused.
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        x1.mul_(3.0)
        return (t0, x1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0[0], b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "the program's backward fails in eager")


def test_member_saved_before_no_grad_write_backward_raises(compile_fn: CompileFn | None) -> None:
    # A write under no_grad advances the family's counter too: eager's backward through the saved member raises.
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            x1.mul_(3.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 3)
        return (b0.t(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_saved_by_the_write_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 7959 (refused before): the write saves the other member (mul_ by it), which the write
    # itself then changes; eager's backward through the written member raises.
    def f(x0: T, x1: T) -> object:
        x1.mul_(x0)
        x1.add_(2.0)
        return (x0, x0, x1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(4, 2, 1)
        return (b0.contiguous(), b0.transpose(2, 2))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_saved_before_write_views_returned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 8305 (refused before): members used before the write (sum, contiguous), a view of one
    # taken after it and returned with another member.
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.sum(2)
        x0.contiguous()
        x1.mul_(0.5)
        with torch.no_grad():
            set_to(t0, x0)
        t2 = x0.view((3, 1, 1))
        return (t2, x2)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1, 1, 3)
        return (b0.unsqueeze(2), b0, b0.unbind(1)[0])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_used_after_write_refused(compile_fn: CompileFn | None) -> None:
    # Eager's history of a member used after another member's write goes through the write: still refused.
    def f(x0: T, x1: T) -> object:
        x1.mul_(0.5)
        return (x0.sin(),)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3)
        return (b0.view(1, 3), b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "overlaps another input that is a view of the same tensor subclass")
