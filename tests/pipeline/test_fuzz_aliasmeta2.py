"""Fuzz follow-ups: layout changes (t_, unsqueeze_, ...) of aliased inputs in training (Note [Aliased Inputs In
Training], Note [Stale View Functions], Note [Subclass Inputs Passed Twice In Training])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor

_STALE_RULE = "or uses it after a write to the storage or after an in-place view op under no_grad"
_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"
_W = torch.arange(9.0).view(3, 3)  # position-dependent: a gradient read in the wrong layout shows


def test_same_input_written_then_transposed(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6485: a write, then an in-place view op through the other position, the first one returned
    def f(x0: T, x1: T) -> object:
        x0.add_(-1.0)
        x1.transpose_(1, 0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(1, 2)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_input_changed_after_a_write_and_read_before(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #454, #968: writes before the layout change, uses of other members after it
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2 * _W
        x0.mul_(_W)
        x2.t_()
        return x1 * _W, t0, x2

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 3)
        return (b0, b0[0:3], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("leaf", [False, True])
def test_same_input_changed_under_no_grad_and_returned(compile_fn: CompileFn | None, leaf: bool) -> None:
    # fuzz seed 7000 #1147, #3471, #4117, #8944: the changed member returned as it is, not used after the change
    def f(x0: T, x1: T) -> object:
        t0 = x1 * _W
        with torch.no_grad():
            x0.t_()
        return x0, t0

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(3, 3, requires_grad=True) if leaf else nonleaf(3, 3)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_changed_under_no_grad_beside_a_write(compile_fn: CompileFn | None) -> None:
    # The changed member is written beside and returned as it is: no rebuilt history of it is read
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        x0.mul_(2.0)
        return x0 * 2, x1

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 2)
        return (b0, b0[0:2])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_transposed_then_copied_into(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #3969 (the backward raised where eager's did not, when allowed): a write through the member
    # after its t_() sliced the base's gradient by its stale view function; one tensor passed twice is one input
    # since Note [One Tensor Passed Several Times]
    def f(x0: T, x1: T) -> object:
        x1.transpose_(0, 1)
        x1.copy_(x0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 4, 1)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_square_member_read_after_transpose_and_write_is_refused(compile_fn: CompileFn | None) -> None:
    # Wrong gradients with no error when allowed: a square member's rebuilt history reads them transposed
    def f(x0: T, x1: T) -> object:
        x1.t_()
        x1.mul_(2.0)
        return (x0 * _W,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 3)
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _STALE_RULE)


def test_member_set_to_another_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8478 (eager's backward raised, ours did not, when allowed): set_() keeps the earlier rule
    def f(x0: T, x1: T) -> object:
        x1.fill_(0.5)
        with torch.no_grad():
            set_to(x0, x1)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3)
        return (b0, b0.as_strided((), (), 2))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Subclass Inputs Passed Twice In Training]


@pytest.mark.parametrize("write_first", [False, True])
def test_subclass_passed_twice_transposed_and_written(compile_fn: CompileFn | None, write_first: bool) -> None:
    # fuzz seed 7000 #2688, #3989, #9855: t_() and a write through either position, read after
    def f(x0: T, x1: T) -> object:
        if write_first:
            x0.mul_(_W)
            x1.t_()
        else:
            x1.t_()
            x0.mul_(_W)
        return x0 * _W, x1.sum()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 3)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_passed_three_times_unsqueezed_and_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2657, #6609: no tensor output, the new value reaches the input through the Function
    def f(x0: T, x1: T, x2: T) -> object:
        x1.unsqueeze_(0)
        x2.mul_(0.5)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0, b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_leaf_passed_twice_changed_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1517: a leaf keeps Note [Aliased Subclass Inputs In Training]'s refusal
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(1)
        return (x0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(1, 2, requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


@pytest.mark.parametrize("twice", [False, True])
def test_layout_change_that_keeps_the_layout_then_written(compile_fn: CompileFn | None, twice: bool) -> None:
    # fuzz seed 7000 #9885: t_() of a member of one element per dim (or t_() twice) leaves the layout its view
    # function makes, so its rebuilt history is right
    def f(x0: T, x1: T) -> object:
        x1.t_()
        if twice:
            x1.t_()
        x1.mul_(_W if twice else 2.0)
        return x1 * (_W if twice else 3.0), x0

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 3)
        return (b0, b0) if twice else (b0[0:1, 0:1], b0[0:1, 0:1].unsqueeze(-1).squeeze(-1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
