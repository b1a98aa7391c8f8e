"""Fuzz follow-ups: alias groups in training whose members' metadata the program changes (Note [Aliased Inputs In
Training])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor

_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"
_SUBCLASS_RULE = "a tensor subclass input that requires grad has its metadata or storage changed in place"


def test_detached_member_changed_under_no_grad_beside_written_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #122: the member that requires grad is written and returned, its detached alias unsqueeze_()d
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(2)
        x0.add_(3.0)
        with torch.no_grad():
            x1.unsqueeze_(-2)
        t0.add_(t0)
        return x1[:, :, 1:3], x0.sin(), t0

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4, 4)
        return (b0.t(), b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_member_transposed_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #7299, seed 5000 #8148: t_() with grad on of a detached alias of a leaf that requires grad
    def f(x0: T, x1: T) -> object:
        t0 = x1[:, 1:2]
        x1.t_()
        return x1, t0, x0 * 2, x0.t()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(3, 2, requires_grad=True)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_that_requires_grad_changed_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A changed member that requires grad (here a view of a non-leaf, written beside) and is used after the change
    # keeps the refusal (Note [Stale View Functions]); returned as it is, it is supported (test_fuzz_aliasmeta2.py).
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        x0.mul_(2.0)
        return x0 * 2, x1 * 3

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 2)
        return (b0, b0[0:2])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Subclass Inputs Mutated In Training]


@pytest.mark.parametrize("return_input", [False, True])
def test_subclass_input_set_to_another_input_under_grad(compile_fn: CompileFn | None, return_input: bool) -> None:
    # fuzz seed 3000 #1495, seed 5000 #3738: a value computed before the swap carries its gradient to the input's
    # earlier history; the input itself, returned, fails its backward as eager's (derivative for set_)
    def f(x0: T, x1: T) -> object:
        t0 = x1.sin()
        set_to(x1, x0)
        return (t0, x1) if return_input else (t0, x1.detach())

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 3), pair_nonleaf(3, 2))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_input_written_then_set_to_a_computed_value(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #6938, #7047, #9740: writes recorded before the swap, a view taken before it, a new storage
    def f(x0: T) -> object:
        t0 = x0.reshape((1, -1, 6))
        x0.mul_(0.5)
        t1 = x0.add(2.0)
        set_to(x0, t1)
        return t0 * 3, x0.detach()

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 2, 3),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_input_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #4811 (wrong gradients when allowed): the history a no_grad set_() leaves reads the new layout
    def f(x0: T) -> object:
        t0 = x0.view((1, 2))
        with torch.no_grad():
            set_to(x0, t0)
        t0.add_(x0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1, 2),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _SUBCLASS_RULE)


def test_subclass_input_set_to_a_computed_empty_value_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #1301 (output strides differed when allowed): strides of a computed empty tensor
    def f(x0: T) -> object:
        t0 = x0[1:1:1].mul(0.5)
        set_to(x0, t0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1, 1),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _SUBCLASS_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Subclass Inputs Mutated In Training]


def pair_view(*shape: int) -> T:
    with torch.enable_grad():
        return pair(*shape, requires_grad=True).diagonal(0, 0, 1)


def test_subclass_view_transposed_and_written_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 5000 #1628: a view of a leaf that requires grad, t_() and mul_() under no_grad, returned
    def f(x0: T, x1: T) -> object:
        t0 = x1.reshape((1,))
        with torch.no_grad():
            x0.t_()
            x0.mul_(2.0)
        return t0, x0, x0 * 3

    def make_inputs() -> tuple[object, ...]:
        return (pair_view(2, 2, 4), torch.randn(()))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_nonleaf_written_under_no_grad_through_a_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 5000 #9092: a view taken before, a no_grad write through it and t_(), then a write through .data
    def f(x0: T) -> object:
        t0 = x0.reshape((2, 3))
        with torch.no_grad():
            t0.add_(t0)
            x0.t_()
        x0.data.mul_(2.0)
        return t0 * 2, x0.cos(), x0

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_leaf_changed_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A leaf keeps the refusal: the Function's gradient in the new layout would meet the old layout's accumulator
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
            x0.mul_(2.0)
        return x0 * 3, x0

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 3, requires_grad=True),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _SUBCLASS_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Aliased Subclass Inputs In Training]


def test_aliased_subclass_view_unsqueezed_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 5000 #4375: a view of a subclass leaf beside the leaf, its layout changed under no_grad
    def f(x0: T, x1: T) -> object:
        t0 = x1 * 2
        with torch.no_grad():
            x0.unsqueeze_(1)
        return x0, t0, x1

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair(2, 3, requires_grad=True)
            return (b0.unbind(0)[0], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_aliased_subclass_leaf_changed_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 5000 #3045 (the backward raised another error than eager's when allowed): the changed member is a leaf
    def f(x0: T, x1: T) -> object:
        t0 = x0.select(0, 1)
        with torch.no_grad():
            x1.unsqueeze_(1)
        return (t0.select(0, 1),)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 4, requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Aliased Inputs In Training]


@pytest.mark.parametrize("before", [False, True])
def test_aliased_view_data_assigned_from_another_member(compile_fn: CompileFn | None, before: bool) -> None:
    # fuzz seed 3000 #9371, seed 5000 #115: `.data =` of one member from a view of the other, used before or after
    def f(x0: T, x1: T) -> object:
        y = x1 * 2
        x1.data = x0[0:2] if before else x0[0:1]
        return (y, x1, x0 * 3) if before else (y, x1.detach(), x0.sin())

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 4)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_aliased_view_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # The same change by set_() under no_grad: the compiled backward raised where eager's did not when allowed
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0[0:1])
        return x1.cos(), x0

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 4)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


def test_aliased_leaf_data_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #784 (eager's backward raised, ours did not, when allowed): the member assigned is a leaf. One
    # leaf passed twice is one input (Note [One Tensor Passed Several Times]), whose backward failure the compiled
    # program reproduces (Note [Errors Raised Outside The Program]): supported
    def f(x0: T, x1: T) -> object:
        t0 = x0.as_strided((), (), 2)
        x1.data = t0
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(1, 4, 1, requires_grad=True)
        return (b0, b0)

    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
