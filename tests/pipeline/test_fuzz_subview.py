"""Writes to overlapping views of one tensor subclass base in training (fuzz seed 7000; Note [Aliased Subclass Inputs In
Training])."""

from __future__ import annotations

import torch

import subclassaot
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import pair_nonleaf

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
    # does too (without the family's counter advanced, the compiled backward ran: wrong); the probe of eager's
    # backward decides which sets of outputs raise, and the error is deferred exactly (Note [Probing Eager's Backward]).
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        x1.mul_(3.0)
        return (t0, x1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0[0], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


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


def test_view_member_used_after_base_written(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 1874 shape (refused before): a member whose `._base` is the written member is used
    # after the write; eager differentiates that use through the write (Note [Aliased Subclass Inputs In Training]).
    def f(x0: T, x1: T) -> object:
        x1.mul_(0.5)
        return (x0.sin(), x1 * 2)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3)
        return (b0.view(1, 3), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_base_member_used_after_view_written(compile_fn: CompileFn | None) -> None:
    # The other way round: the view is written, the base used after it (eager rebases the base on the write).
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        x0.add_(x1.sum())
        return (t0, x1.cos(), x0)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0[0], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_base_and_view_both_written(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, programs 6343, 8053, 8328 shape (refused before): writes through the base and its view.
    def f(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        x1.add_(1.0)
        return (x0.sin(), x1 * 3)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 3)
        return (b0.t(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_base_written_and_transposed_in_place(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 50 (refused before): the base is written, then t_() (of a 0-d tensor: no layout
    # change; a real one is refused by the rule on metadata changes of aliased subclass inputs); its view is read
    # under no_grad only.
    def f(x0: T, x1: T, x2: T) -> object:
        x2.mul_(-1.0)
        x2.t_()
        with torch.no_grad():
            x1.view((1, 1, 1))
        return (x2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = pair_nonleaf()
        return (torch.randn(3), b1.reshape((1, -1)).select(1, 0), b1)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_member_written_beside_traced_views(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 7000, program 221 (refused before): a detached alias (no grad) is written below autograd, beside a
    # base and its view that require grad; one of them is saved before the write (eager's backward through it
    # raises, ours too) and the other returned.
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0 * x0
        x1.mul_(0.5)
        return (t0, x2)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0[0], b0[1].detach(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_members_not_views_of_each_other_used_after_write(compile_fn: CompileFn | None) -> None:
    # Two overlapping views of a base the program does not get: neither is the other's `._base` (refused before);
    # they are compiled with that base added (Note [Subclass Views Of A Base Not Passed]), so a use of one after a
    # write through the other differentiates through the write, as in eager.
    def f(x0: T, x1: T) -> object:
        x1.mul_(0.5)
        return (x0.sin(),)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(4)
        return (b0[0:3], b0[1:4])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_base_relation_is_guarded() -> None:
    # Compiled for (x[0], x); called with (y[0], y.view_as(y)): the same storages and layouts, but the second input
    # is no `._base` of the first, so the entry's traced view link does not hold: the guard fails and recompiles
    # (for two views of a base not passed: Note [Subclass Views Of A Base Not Passed]), and the result is eager's.
    def f(x0: T, x1: T) -> object:
        x1.mul_(0.5)
        return (x0.sin(),)

    compiled = subclassaot.compile(f)
    with torch.enable_grad():
        b0 = pair_nonleaf(2, 3)
        compiled(b0[0], b0)
        assert compiled.compile_count == 1

        def views() -> tuple[object, ...]:
            b1 = pair_nonleaf(2, 3)
            return (b1[0], b1.view_as(b1))

        assert_matches_eager(f, views, compile_fn=lambda fn, **kwargs: compiled)
        assert compiled.compile_count == 2
        assert compiled.recompile_reasons[0] == "args[1]._is_view(): expected False, got True"
