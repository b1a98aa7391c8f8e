"""Inputs that share storage (alias groups, overlapping subclass views, detached aliases) in training: writes and
metadata changes of one member seen by the others, gradients and refusals (Note [Aliased Inputs In Training], Note
[Aliased Inputs In Training], Note [Input Updates]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
import subclassaot.api
from subclassaot.pipeline.analyze import analyze
from subclassaot.pipeline.trace import analyze_and_trace
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    DirtyScale,
    assert_refused,
    check_no_grad,
    check_with_grad,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)
from tests.pipeline.program_helpers import leaf as _leaf

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups: alias groups in training whose members' metadata the program changes (Note [Aliased Inputs In
# Training]).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor

_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"
_LEAF_RELAID_RULE = "gets another size from an in-place view op under torch.no_grad"
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
    # keeps the refusal (Note [Stale View Functions]); returned as it is, it is supported (tested in this file).
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
# See Note [Inputs Written In Training]


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
# See Note [Inputs Written In Training]


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
# See Note [Aliased Inputs In Training]


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

    with torch.enable_grad():  # (the one object passed twice is one input: the rule of one leaf refuses it)
        assert_refused(f, make_inputs, compile_fn, _LEAF_RELAID_RULE)


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
    # leaf passed twice is one input (Note [Synthetic Bases]), whose backward failure the compiled
    # program reproduces (Note [Probing Eager's Backward]): supported
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


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups: layout changes (t_, unsqueeze_, ...) of aliased inputs in training (Note [Aliased Inputs In
# Training], Note [Stale View Functions], Note [Aliased Inputs In Training]).
# ---------------------------------------------------------------------------------------------------------------------


_STALE_RULE = "or uses it after a write to the storage or after an in-place view op under no_grad"
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
    # since Note [Synthetic Bases]
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
    # fuzz seed 7000 #8478 (eager's backward raised, ours did not, when allowed): the group's write no longer keeps
    # the group rule; the probe of eager's backward refuses it (Note [Probing Eager's Backward])
    def f(x0: T, x1: T) -> object:
        x1.fill_(0.5)
        with torch.no_grad():
            set_to(x0, x1)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3)
        return (b0, b0.as_strided((), (), 2))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "changes the size of a tensor that requires grad behind autograd")


# Members set_() under no_grad onto their group's storage, none read with grad after its set_() (Note [Aliased Inputs
# In Training]): each member keeps the history it came with in eager, the set_() bumps the group's counter, and a view
# member returned has its history rebuilt from its base at the new layout, as the epilogue's repeat of the set_()
# does. Writes of the group, before the set_() or after it, with grad or without, are the group's like any other
# (the set_() member read by none with grad).


def _set_under_no_grad_programs() -> dict[str, tuple[Callable[..., object], Callable[[], tuple[object, ...]]]]:
    def leaf_onto_its_unbind_view(x0: T, x1: T) -> object:
        # fuzz seed 119400, program 7267: eager's x1.grad_fn raises (an unbind() output whose base was changed)
        with torch.no_grad():
            set_to(x0, x1)
        return (x1, x0, x1)

    def leaf_onto_its_view(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        return (x0, x1)

    def view_onto_its_leaf(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        return (x0, x1)

    def view_onto_another_view_others_read(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            set_to(x1, x2)
        return (x0 * _W[:2], x2 * 4, x1)

    def read_before_saved(x0: T, x1: T, x2: T) -> object:
        # sin() saves x1, whose counter the set_() moves: the backward raises, in eager as compiled
        y = x1.sin()
        with torch.no_grad():
            set_to(x1, x2)
        return (y, x0 * 2)

    def two_members_then_unsqueezed(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
            set_to(x2, x0[:, 1])
            x2.unsqueeze_(0)
        return (x1, x2, x0 * _W[:2])

    def intermediate_emptied(x0: T, x1: T) -> object:
        # fuzz seed 119200, program 832: set_() onto a view of the other member
        t0 = x0.add(x0)
        with torch.no_grad():
            t0.untyped_storage().resize_(0)
        t1 = x0.view((-1, 4, 1))
        with torch.no_grad():
            set_to(x1, t1)
        return (t1,)

    def written_under_no_grad_after(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            set_to(x1, x2)
            x0.add_(1.0)
            x1.mul_(2.0)
        return (x0 * _W[:2], x2 * 3, x1)

    def base_written_with_grad_after(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            set_to(x1, x2)
        x0.mul_(_W[:2])
        return (x0 * _W[:2], x1)

    def written_with_grad_before(x0: T, x1: T, x2: T) -> object:
        x1.mul_(_W[0])
        x2.add_(x1)
        with torch.no_grad():
            set_to(x1, x2)
        return (x0 * _W[:2], x1)

    def view_onto_its_base_then_written_in_inference_mode(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        with torch.inference_mode():
            x0.add_(1.0)
        return (x0 * _W[:2], x1)

    def leaf_row_set_then_leaf_written(x0: T, x1: T, x2: T) -> object:
        # fuzz seed 119900, program 2870 (called under no_grad)
        set_to(x2, x0)
        with torch.enable_grad():
            t0 = x0.mul(3.0)
        set_to(x2, x2)
        with torch.inference_mode():
            x0.add_(0.5)
        return (x1, x0, t0)

    def expanded_set_onto_rows_then_a_row_zeroed(x0: T, x1: T) -> object:
        # fuzz seed 119900, program 3302 (called under no_grad)
        set_to(x0, x1)
        x1.select(0, 1).zero_()
        t0 = x0.expand((-1, 2))
        with torch.enable_grad():
            t1 = t0.transpose(0, 1)
        return (x0, t1)

    def unbind_view_onto_its_leaf_then_written(x0: T, x1: T) -> object:
        # fuzz seed 119900, program 9084 (called under no_grad): the leaf written, the view by a Function's mark_dirty
        set_to(x0, x1)
        x1.add_(3.0)
        with torch.enable_grad():
            t0 = x1.mul(3.0)
        DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # untyped in torch
        return (t0, x1.add(x1))

    def unbind_leaf() -> tuple[object, ...]:
        with torch.enable_grad():  # (as every make_inputs here: the calls under no_grad take their views with grad)
            b0 = _leaf(4)
            return (b0.unbind(0)[1], b0)

    def flattened_and_rows() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = nonleaf(3, 2, 1)
            return (b0.reshape((-1,)).expand((-1,)), b0.reshape((3, -1)))

    def leaf_and_two_views() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = _leaf(2)
            return (b0, b0.view((2, 1)), b0.t().select(0, 1))

    def unbind_views() -> tuple[object, ...]:
        b0 = _leaf(1, 2, 4)
        return (b0, b0.unbind(1)[1].t())

    def transposed(base: Callable[..., T]) -> Callable[[], tuple[object, ...]]:
        def make() -> tuple[object, ...]:
            b = base(2, 3)
            return (b, b.t())

        return make

    def rows(base: Callable[..., T]) -> Callable[[], tuple[object, ...]]:
        def make() -> tuple[object, ...]:
            b = base(2, 3)
            return (b, b[0], b[1])

        return make

    def expanded() -> tuple[object, ...]:
        b0 = _leaf(4, 2)
        return (b0.reshape((8,)).expand((8,)), b0.unbind(0)[1].select(0, 0))

    return {
        "leaf_onto_its_unbind_view": (leaf_onto_its_unbind_view, unbind_views),
        "leaf_onto_its_view": (leaf_onto_its_view, transposed(_leaf)),
        "view_onto_its_leaf": (view_onto_its_leaf, transposed(_leaf)),
        "view_onto_its_nonleaf_base": (view_onto_its_leaf, transposed(nonleaf)),
        "view_onto_another_view_others_read": (view_onto_another_view_others_read, rows(_leaf)),
        "nonleaf_view_onto_another_view_others_read": (view_onto_another_view_others_read, rows(nonleaf)),
        "read_before_saved": (read_before_saved, rows(_leaf)),
        "two_members_then_unsqueezed": (two_members_then_unsqueezed, rows(nonleaf)),
        "intermediate_emptied": (intermediate_emptied, expanded),
        "written_under_no_grad_after": (written_under_no_grad_after, rows(_leaf)),
        "nonleaf_written_under_no_grad_after": (written_under_no_grad_after, rows(nonleaf)),
        "base_written_with_grad_after": (base_written_with_grad_after, rows(nonleaf)),
        "written_with_grad_before": (written_with_grad_before, rows(nonleaf)),
        "view_onto_its_base_then_written_in_inference_mode": (
            view_onto_its_base_then_written_in_inference_mode,
            transposed(_leaf),
        ),
        "leaf_row_set_then_leaf_written": (leaf_row_set_then_leaf_written, leaf_and_two_views),
        "expanded_set_onto_rows_then_a_row_zeroed": (expanded_set_onto_rows_then_a_row_zeroed, flattened_and_rows),
        "unbind_view_onto_its_leaf_then_written": (unbind_view_onto_its_leaf_then_written, unbind_leaf),
    }


# the fuzz programs of the table above, called under no_grad as they were found
_CALLED_UNDER_NO_GRAD = (
    "leaf_row_set_then_leaf_written",
    "expanded_set_onto_rows_then_a_row_zeroed",
    "unbind_view_onto_its_leaf_then_written",
)


@pytest.mark.parametrize("name", list(_set_under_no_grad_programs()))
def test_member_set_under_no_grad_onto_the_group_storage(compile_fn: CompileFn | None, name: str) -> None:
    f, make_inputs = _set_under_no_grad_programs()[name]
    with torch.set_grad_enabled(name not in _CALLED_UNDER_NO_GRAD):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, versions="exact")
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("written", [False, True])
def test_member_set_under_no_grad_then_read_is_refused(compile_fn: CompileFn | None, written: bool) -> None:
    # A view member read with grad after its set_() (by a write with grad too): eager rebuilds its history from its
    # base by as_strided() at the new layout (the gradient reaches b[1]), the traced view keeps b[0]'s (a wrong b.grad
    # when allowed)
    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            set_to(x1, x2)
        if written:
            x1.mul_(_W[0])
            return (x0 * _W[:2], x1)
        return (x0 * 2, x1 * 3)

    refused_with_grad(f, lambda: (lambda b: (b, b[0], b[1]))(nonleaf(2, 3)), compile_fn, _GROUP_RULE)


def test_subclass_member_set_under_no_grad_onto_the_group_storage_is_refused(compile_fn: CompileFn | None) -> None:
    # The PairTensor form of test_member_set_under_no_grad_onto_the_group_storage keeps the subclass refusal
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        return (x0, x1)

    def make_inputs() -> tuple[object, ...]:
        b = pair(2, 3, requires_grad=True)
        return (b, b.t())

    refused_with_grad(f, make_inputs, compile_fn, f"{_GROUP_RULE}|{_SUBCLASS_RULE}")


# ---------------------------------------------------------------------------------------------------------------
# See Note [Aliased Inputs In Training]


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


def test_subclass_leaf_passed_twice_changed_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1517, refused while a subclass passed twice was traced as two members of one alias group: the
    # same object is now one input (Note [Synthetic Bases]), whose layout change under no_grad is that of one leaf
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(1)
        return (x0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(1, 2, requires_grad=True)
        return (b0, b0)

    check_with_grad(f, make_inputs, compile_fn)


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


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (round 7): subclass alias groups whose members that need no gradient change their layout (Note
# [Aliased Inputs In Training]).
# ---------------------------------------------------------------------------------------------------------------------


def test_detached_subclass_member_changed_beside_one_object_transposed(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #9327: a detached alias unsqueeze_()d (no_grad and grad) and written; the object behind it,
    # passed twice, written below autograd and t_()d with grad, is returned
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            x1.unsqueeze_(0)
        x1.unsqueeze_(0)
        x0.data.copy_(t0)
        x1.mul_(-1.0)
        x2.t_()
        return (x2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf()
        return (b0, b0.detach(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad_mode", [False, True])
@pytest.mark.parametrize("write", ["none", "detached", "member"])
def test_detached_subclass_member_changed_beside_written_member(
    compile_fn: CompileFn | None, grad_mode: bool, write: str
) -> None:
    # The detached member's layout changes; the member that requires grad keeps its layout, is written or not, and
    # is read after the change
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.set_grad_enabled(grad_mode):
            x1.transpose_(0, 1)
        if write == "detached":
            x1.mul_(3.0)
        elif write == "member":
            x0.add_(t0)
        return x0.sin(), t0, x1 * 2, x0

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad_mode", [False, True])
def test_detached_subclass_member_changed_beside_transposed_member(
    compile_fn: CompileFn | None, grad_mode: bool
) -> None:
    # Both change their layout: the member that requires grad by t_() with grad enabled (one object: Note [Aliased
    # Inputs In Training]), not written: a value computed before the change is returned
    def f(x0: T, x1: T) -> object:
        v = x0[0] * 2
        with torch.set_grad_enabled(grad_mode):
            x1.unsqueeze_(1)
        x0.t_()
        return v, x0.cos(), x1

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_subclass_member_changed_beside_leaf(compile_fn: CompileFn | None) -> None:
    # The member that requires grad is a leaf, read before and after the detached member's change
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            x1.t_()
        return t0, x0.sin(), x1 + 1

    def make_inputs() -> tuple[object, ...]:
        return (b0 := pair(2, 3, requires_grad=True), b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_changed_under_no_grad_beside_written_detached_member_is_refused(compile_fn: CompileFn | None) -> None:
    # The member that requires grad (a leaf) changes its layout under no_grad and tensors are returned: as Note [Aliased
    # Inputs In Training], the leaf keeps the refusal whatever its detached alias does
    def f(x0: T, x1: T) -> object:
        t0 = x0.select(0, 1)
        x1.mul_(2.0)
        with torch.no_grad():
            x0.unsqueeze_(1)
        return (t0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 4, requires_grad=True)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Inputs Written In Training]


def test_subclass_member_set_under_grad_to_a_view_of_another(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #8822: a member set_() with grad to a view of another member's unbind() output
    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            x0.mul(x0)
        t1 = x0.unbind(0)[0]
        set_to(x2, t1.view((1, 1)))
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3)
        return (b0[1:2:1], pair_nonleaf(3, 3).detach(), b0.as_strided((), (), 1).contiguous())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_base_set_under_grad_to_a_view_member(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #6116: the base, passed twice, written below autograd, then set_() with grad to a view member;
    # a view of it written with grad before
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1[1:1:1]
        t0.add_(0.5)
        x2.data.mul_(2.0)
        t1 = t0.add(-1.0)
        set_to(x2, x0)
        return (t0, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1)
        return (b0.t().reshape((1, 1, 1)), b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("which", ["view", "base"])
@pytest.mark.parametrize("after", ["none", "read_other", "write_other", "read_self", "write_self"])
def test_subclass_member_set_under_grad(compile_fn: CompileFn | None, which: str, after: str) -> None:
    # One member set_() with grad to a view of the other (a value computed before is returned), then the other
    # member or the one set_() is read or written with grad
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        changed, other = (x1, x0) if which == "view" else (x0, x1)
        set_to(changed, x0[1:] if which == "view" else x1[0:1])
        if after == "read_other":
            return t0, other.sin()
        if after == "write_other":
            other.mul_(2.0)
        if after == "read_self":
            return t0, changed.cos()
        if after == "write_self":
            changed.mul_(3.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("source", ["clone", "other"])
def test_subclass_object_passed_twice_set_under_grad(compile_fn: CompileFn | None, source: str) -> None:
    # The same object at two positions, set_() with grad to a clone of it or to another input's view of its storage
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0 * 2
        set_to(x1, x0.clone() if source == "clone" else x2)
        return t0, x2 * 3

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0, b0[0:2])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_member_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A set_() under no_grad keeps the refusal (Note [Inputs Written In Training]; here the subclass rule's)
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(x1, x0[1:])
        return t0, x1 * 3

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _SUBCLASS_RULE)


# ---------------------------------------------------------------------------------------------------------------------
# Writes to overlapping views of one tensor subclass base in training (fuzz seed 7000; Note [Aliased Inputs In
# Training]).
# ---------------------------------------------------------------------------------------------------------------------


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
    # after the write; eager differentiates that use through the write (Note [Aliased Inputs In Training]).
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
    # they are compiled with that base added (Note [Aliased Inputs In Training]), so a use of one after a
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
    # (for two views of a base not passed: Note [Aliased Inputs In Training]), and the result is eager's.
    def f(x0: T, x1: T) -> object:
        x1.mul_(0.5)
        return (x0.sin(),)

    # (the eager backend: a guard of the entry; test_input_apart_from_its_aliases_is_guarded's entries on inductor)
    compiled = subclassaot.compile(f, backend="eager")
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


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (seed 40000): values that require grad written into tensors that do not (a tensor passed twice,
# a detach() returned), expanded subclass inputs written through another input, and the stale-view and
# gained-family-member refusals (kept).
# ---------------------------------------------------------------------------------------------------------------------


_STALE_RULE_detach8 = "a view taken with grad enabled is used with grad after the program changed the layout"
_FAMILY_RULE = r"share storage and do not require grad; a write with grad \(or requires_grad_\(\)\) makes one of them"


def test_stale_view_use_reaching_an_output_is_refused(compile_fn: CompileFn | None) -> None:
    # the same use as above, returned (or computed on, or written into an input), stays refused
    def returned(x0: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        return (t0.view((1, 1, 2)),)

    def computed_on(x0: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.view((1, 1, 2))
        return (t1 * 2,)

    def written(x0: T, x1: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.mul(2)
        x1.copy_(t1.sum())
        return ()

    def set_onto(x0: T, x1: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.mul(2)
        set_to(x1, t1)
        return ()

    with torch.enable_grad():
        for make_inputs in (lambda: (pair_nonleaf(2, 2),), lambda: (nonleaf(2, 2),)):
            assert_refused(returned, make_inputs, compile_fn, _STALE_RULE_detach8)
            assert_refused(computed_on, make_inputs, compile_fn, _STALE_RULE_detach8)
        assert_refused(written, lambda: (nonleaf(2, 2), nonleaf()), compile_fn, _STALE_RULE_detach8)
        assert_refused(set_onto, lambda: (nonleaf(2, 2), nonleaf(2)), compile_fn, _STALE_RULE_detach8)


def test_stale_view_write_into_its_input_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #5591 (shrunk): the use writes x0 through the view; x0 is an input, so it is reached
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(-1)
        x0.unsqueeze_(-1)
        t0.fill_(-1.0)
        return ()

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(),), compile_fn, _STALE_RULE_detach8)


def test_family_member_use_reaching_an_output_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x1.copy_(x0)
        return (x2.unsqueeze(0) * 2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = pair(2)
        return (nonleaf(), b1, b1.select(0, -1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _FAMILY_RULE)


_ALIASED_GAIN_RULE = "does not require grad, shares storage with another input, and the program writes a value"


def test_input_passed_twice_gains_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1161, #6072 (shrunk): x0 and x2 are one tensor that does not require grad; a write of a value
    # that requires grad gives it eager's history (Note [Inputs Written In Training])
    def written(x0: T, x1: T, x2: T) -> object:
        x2.add_(x1)
        return ()

    def returned(x0: T, x1: T, x2: T) -> object:
        x0.add_(x1)
        return (x2, x0 * 2)

    def through_view(x0: T, x1: T, x2: T) -> object:
        x2[0].mul_(x1)
        with torch.no_grad():
            x0[2].mul_(2.0)
        return (x0[1], x2)

    def make(second: T) -> tuple[object, ...]:
        b0 = torch.randn((4, 4))
        return (b0, second, b0)

    with torch.enable_grad():
        for f in (written, returned, through_view):
            assert_matches_eager(f, lambda: make(nonleaf(4)), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: make(torch.randn((4,), requires_grad=True)), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: make(pair_nonleaf()), compile_fn=compile_fn)


def test_aliased_inputs_gaining_grad_stay_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #6072: x2 a detach() alias of x0 (eager: only x0 gains grad; supported since its write is
    # recorded on it alone, test_input_apart_from_its_aliases_gains_grad), a view of x0 (refused: eager rebuilds the
    # view's history from x0's); #1161: one tensor passed twice whose layout the program changes (supported since Note
    # [Synthetic Bases])
    def written(x0: T, x1: T, x2: T) -> object:
        x0.add_(x1)
        return (x2 * 2, x0)

    def relaid(x0: T, x1: T, x2: T) -> object:
        x0.t_()
        x2.add_(x1)
        return (x2,)

    def detached() -> tuple[object, ...]:
        b0 = torch.randn((3, 3))
        return (b0, nonleaf(3), b0.detach())

    def viewed() -> tuple[object, ...]:
        b0 = torch.randn((3, 3))
        return (b0, nonleaf(3), b0.view(3, 3))

    def twice() -> tuple[object, ...]:
        b0 = torch.randn((4, 4))
        return (b0, nonleaf(4), b0)

    with torch.enable_grad():
        assert_matches_eager(written, detached, compile_fn=compile_fn)
        assert_refused(written, viewed, compile_fn, _ALIASED_GAIN_RULE)
        assert_matches_eager(relaid, twice, compile_fn=compile_fn)


def _added(x0: T, x1: T) -> object:
    x1.add_(x0)
    return (x1,)


def _multiplied(x0: T, x1: T) -> object:
    # x0's own history is kept: its output reads the new values with the gradient of x0's history, not the write's
    x1.mul_(x0)
    return (x1, x0 * 2)


def _written_under_no_grad_first(x0: T, x1: T) -> object:
    with torch.no_grad():
        x1.add_(x0)
    x1.add_(x0)
    return (x1.transpose(1, 1), x1)


def _through_a_view(x0: T, x1: T) -> object:
    x1.select(-1, 0).copy_(x0[..., 0])
    return (x1, x0 + 1)


def test_input_apart_from_its_aliases_gains_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 119000 #1216, #4976, #8886 (x1 a detach() of x0 that requires grad), #7292, #7865 (x2 a detach() of
    # x1, neither requiring grad, written with another input's value), #9686 (a view of a detach()): autograd relates
    # no other input to the written one, so eager records the write on it alone, and the others keep their history
    # (Note [Inputs Written In Training])
    def beside(make: Callable[[], T], first: bool = False) -> Callable[[], tuple[object, ...]]:
        def inputs() -> tuple[object, ...]:
            b0 = make()
            return (b0.detach(), b0) if first else (b0, b0.detach())

        return inputs

    with torch.enable_grad():
        for f in (_added, _multiplied, _written_under_no_grad_first, _through_a_view):
            assert_matches_eager(f, beside(lambda: nonleaf(2, 3)), compile_fn=compile_fn, versions="exact")
            assert_matches_eager(f, beside(lambda: _leaf(2, 3)), compile_fn=compile_fn)
            assert_matches_eager(f, beside(lambda: pair_nonleaf(2, 3)), compile_fn=compile_fn)
        assert_matches_eager(
            lambda x1, x0: _added(x0, x1), beside(lambda: nonleaf(3), first=True), compile_fn=compile_fn
        )


def test_view_of_an_input_apart_beside_a_member_whose_backward_raises(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121011 #5237: x0, a detach() of x1, gains its history by `x0.mul_(x1)`; `x1.mul_(x1)` then makes
    # eager's backward through x1 raise (it saved the x1 it overwrote), but not through a view of x0, whose new history
    # does not reach the group's base write. The probe took x0's view to reach it and the compiled backward raised.
    def written(x0: T, x1: T) -> object:
        x0.mul_(x1)
        x1.mul_(x1)
        return (x0.view((3, 1, -1))[:, :, 4:4:1], x0[1:] * 1)

    def inputs() -> tuple[object, ...]:
        b0 = nonleaf(4, 3, 3)
        return (b0.detach(), b0)

    with torch.enable_grad():
        assert_matches_eager(written, inputs, compile_fn=compile_fn)
        assert_matches_eager(written, inputs, compile_fn=compile_fn, after_call=write_outputs)


def test_input_apart_from_aliases_without_grad_gains_grad(compile_fn: CompileFn | None) -> None:
    # no member of the group requires grad: the written one still gains the write's history alone (seed 119000 #7292,
    # #7865), and a view of a detach() gains it through its own base, which no input is (#9686)
    def copied(x0: T, x1: T, w: T) -> object:
        x1.copy_(w)
        return (x1.view(-1), x0 * 2)

    def through_select(x0: T, x1: T, w: T) -> object:
        t0 = x1.select(0, -1)
        t0.copy_(w)
        return (x1, t0, x0)

    def multiplied(x0: T, x1: T, w: T) -> object:
        x1.mul_(w)
        return (x1, x0)

    def detach_of_view() -> tuple[object, ...]:
        b1 = torch.randn((3,))
        return (b1, b1.view((1, 3)).detach(), nonleaf(3))

    def view_of_detach() -> tuple[object, ...]:
        b1 = torch.randn((1, 3))
        return (b1.expand((1, 3)), b1.detach().reshape((3,)), pair_nonleaf(3))

    def twice(x0: T, x1: T, x2: T, w: T) -> object:
        # the twins gain grad, their detach() runs apart from them, untouched (Note [Synthetic Bases])
        x0.add_(w)
        return (x1 * 1, x2 * 1)

    def passed_twice() -> tuple[object, ...]:
        b0 = torch.randn(3)
        return (b0, b0, b0.detach(), nonleaf(3))

    with torch.enable_grad():
        for f in (copied, through_select, multiplied):
            assert_matches_eager(f, detach_of_view, compile_fn=compile_fn, versions="exact")
        for f in (copied, multiplied):
            assert_matches_eager(f, view_of_detach, compile_fn=compile_fn)
        assert_matches_eager(twice, passed_twice, compile_fn=compile_fn)


def test_input_apart_from_its_aliases_is_guarded() -> None:
    # compiled for x1 a detach() of x0, called with x1 a view of x0: eager gives x0 the write's history too, so the
    # guards fail and the new compile refuses (the view's history is x0's: Note [Inputs Written In Training])
    def f(x0: T, x1: T, w: T) -> object:
        x1.add_(w)
        return (x1 * 2, x0 + 1)

    compiled = subclassaot.compile(f)
    with torch.enable_grad():
        b0 = torch.randn(3)
        out = cast(tuple[T, T], compiled(b0, b0.detach(), _leaf(3)))
        assert out[0].requires_grad and not out[1].requires_grad and not b0.requires_grad
        b0 = torch.randn(3)
        with pytest.raises(subclassaot.UnsupportedError, match=_ALIASED_GAIN_RULE):
            compiled(b0, b0[:], _leaf(3))


def test_input_apart_from_its_aliases_stays_refused(compile_fn: CompileFn | None) -> None:
    # seed 119000 #5548: an input alone over its storage (an as_strided() reach makes its group); an input that is a
    # view of another: test_aliased_inputs_gaining_grad_stay_refused
    def reached(x0: T, x1: T) -> object:
        x1.mul_(x0)
        return (x1.as_strided((2,), (3,), 2) * 1, x0)

    def diagonal() -> tuple[object, ...]:
        return (nonleaf(2, 1), torch.randn((2, 4, 2)).unsqueeze(0).diagonal(-1, 1, 2))

    with torch.enable_grad():
        assert_refused(reached, diagonal, compile_fn, _ALIASED_GAIN_RULE)


_DETACH_RULE = "is a detach\\(\\) of an input \\(or a view of one\\) that the program then wrote with a value"


def test_detach_of_input_written_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2743, #2811, #5641, seed 11000 #7533: the detach() gets its history from the Function and
    # the input's storage (Note [Outputs Over Another Storage])
    def copied(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0)
        return (t0,)

    def multiplied(x0: T) -> object:
        t0 = x0.t()
        t1 = x0.detach()
        t1.mul_(t0)
        return (t1,)

    def added(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        return (t0, x0, t0 * 2)

    def written_twice(x0: T) -> object:
        t0 = x0.detach()
        with torch.no_grad():
            t0.mul_(2.0)
        t0.add_(x0 * 3.0)
        t0.mul_(x0)
        return (t0.sum(), t0, t0)

    with torch.enable_grad():
        assert_matches_eager(multiplied, lambda: (pair_nonleaf(),), compile_fn=compile_fn)  # (t() of 0-d: eager's own)
        assert_matches_eager(multiplied, lambda: (nonleaf(),), compile_fn=compile_fn)
        for f in (copied, added, written_twice):
            assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (nonleaf(3, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (_leaf(3, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (pair_nonleaf(),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (pair(3, 3, requires_grad=True),), compile_fn=compile_fn)


def test_detach_of_view_of_input_written_with_grad(compile_fn: CompileFn | None) -> None:
    def row(x0: T) -> object:
        t0 = x0[0].detach()
        t0.mul_(x0[1])
        return (t0,)

    def transposed(x0: T) -> object:
        t0 = x0.t().detach()
        t0.add_(x0.t())
        return (t0,)

    with torch.enable_grad():
        for f in (row, transposed):
            assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (_leaf(2, 3),), compile_fn=compile_fn)


def test_detach_of_input_written_with_grad_stays_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #8919: a view of the detach() taken after the write has it for `._base`; a no_grad view of it
    # returned beside it; an input that does not require grad; an input the program then transposes in place
    def selected(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        return (t0.select(1, -1),)

    def beside_no_grad_view(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        with torch.no_grad():
            t1 = t0.view(-1)
        return (t0, t1)

    def no_grad_input(x0: T, w: T) -> object:
        t0 = x0.detach()
        t0.add_(w)
        return (t0,)

    def transposed_after(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        x0.t_()
        return (t0,)

    with torch.enable_grad():
        assert_refused(selected, lambda: (pair(1, 2, requires_grad=True),), compile_fn, _DETACH_RULE)
        assert_refused(selected, lambda: (nonleaf(1, 2),), compile_fn, _DETACH_RULE)
        assert_refused(beside_no_grad_view, lambda: (nonleaf(2, 3),), compile_fn, _DETACH_RULE)
        assert_refused(no_grad_input, lambda: (torch.randn(2, 3), _leaf(3)), compile_fn, _DETACH_RULE)
        assert_refused(transposed_after, lambda: (nonleaf(2, 3),), compile_fn, _DETACH_RULE)


def test_expanded_subclass_input_written_through_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #5481, #9365: the expanded input is written only through the input it views (its base), whose
    # wrapper-level copy_ the epilogue makes; #5857 and seed 6000 #6885's no_grad neighbour: written below autograd
    def base_written(x0: T, x1: T) -> object:
        x1.mul_(3.0)
        return ()

    def first_written(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        return (x1 * 2,)

    def no_grad_fill(x0: T) -> object:
        with torch.no_grad():
            x0.fill_(-1.0)
        return ()

    def no_grad_column(x0: T) -> object:
        with torch.no_grad():
            x0[:, 0:1].zero_()
        return (x0 * 2, x0)

    def expanded_first() -> tuple[object, ...]:
        b0 = pair_nonleaf()
        return (b0.expand((2, 3)), b0)

    def expanded_second() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0, b0.reshape((2, 1, 1)).expand((-1, 1, 2)))

    with torch.enable_grad():
        assert_matches_eager(base_written, expanded_first, compile_fn=compile_fn)
        assert_matches_eager(first_written, expanded_second, compile_fn=compile_fn)
        assert_matches_eager(
            no_grad_fill,
            lambda: (pair(3, 4, 3, requires_grad=True).as_strided((1, 3), (2, 0), 0),),
            compile_fn=compile_fn,
        )
        assert_matches_eager(no_grad_column, lambda: (pair_nonleaf(3, 1, 1).expand((3, 2, 1)),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper c7422: an input written only through another input set_() (or `.data =`-assigned) to
# its storage (fuzz seed 44000 #7422, crashed). Eager's write leaves the input's autograd history and version counter
# as they were; the epilogue recorded its copy_ with autograd, which raises on a view made by an op that returns
# several views (unbind, split), and gave other non-leaf inputs a grad_fn eager's has not. Now the copy_ runs below
# autograd and the version is put back at once (Note [Input Updates]).
# ---------------------------------------------------------------------------------------------------------------------


def _set_then_write(x0: T, x1: T, x2: T) -> object:
    # seed 44000 #7422, shrunk: x1 and x2 are one tensor, set_() onto the unbind() view x0's storage, then written
    t0 = x0.contiguous()
    set_to(x2, t0)
    x1.add_(-1.0)
    return ()


def _set_then_scale_return(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0.contiguous())
    x1.mul_(2.0)
    return (x0, x1 * 1)


def _assign_data_then_scale_return(x0: T, x1: T, x2: T) -> object:
    x2.data = x0.contiguous()
    x1.mul_(2.0)
    return (x0,)


def _set_then_write_inputs() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn(())
        b0.requires_grad_()
        b0 = b0.clone()
        b1 = torch.randn(())
        return (b0.unsqueeze(-1).unbind(0)[0], b1, b1)


def _views(view: Callable[[T], T], make_base: Callable[..., T], grad_b1: bool) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = make_base(3) if grad_b1 else torch.randn(3)
            return (view(make_base(2, 3)), b1, b1)

    return make_inputs


def _unbind(b: T) -> T:
    return b.unbind(0)[1]


def _split(b: T) -> T:
    return torch.split(b, 1)[1].squeeze(0)


def _chunk(b: T) -> T:
    return b.chunk(2)[0].squeeze(0)


def _select(b: T) -> T:
    return b.select(0, 1)


def test_set_onto_unbind_input_then_write(compile_fn: CompileFn | None) -> None:
    check_with_grad(_set_then_write, _set_then_write_inputs, compile_fn)
    check_no_grad(_set_then_write, _set_then_write_inputs, compile_fn)


@pytest.mark.parametrize("view", [_unbind, _split, _chunk, _select])
@pytest.mark.parametrize("grad_b1", [False, True])
@pytest.mark.parametrize("f", [_set_then_scale_return, _assign_data_then_scale_return])
def test_write_through_alias_of_view_input(
    compile_fn: CompileFn | None, view: Callable[[T], T], grad_b1: bool, f: Callable[..., object]
) -> None:
    if not (grad_b1 and f is _assign_data_then_scale_return):  # refused by Note [Stale View Functions]
        check_with_grad(f, _views(view, nonleaf, grad_b1), compile_fn)
    check_no_grad(f, _views(view, nonleaf, grad_b1), compile_fn)


def test_write_through_alias_of_pair_unbind_input(compile_fn: CompileFn | None) -> None:
    # the same at the wrapper level: a PairTensor unbind() view written through another PairTensor set_() onto it
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = pair_nonleaf(3)
            return (pair_nonleaf(2, 3).unbind(0)[0], b1, b1)

    def make_plain_b1() -> tuple[object, ...]:
        b1 = pair(3)
        return (pair(2, 3).unbind(0)[0], b1, b1)

    check_with_grad(_set_then_scale_return, make_inputs, compile_fn)
    check_no_grad(_set_then_scale_return, make_inputs, compile_fn)
    check_no_grad(_set_then_scale_return, make_plain_b1, compile_fn)


def test_write_through_alias_of_aliased_unbind_inputs(compile_fn: CompileFn | None) -> None:
    # x0 and y overlap (one alias group, written through a synthetic base): its copy_ is below autograd too
    def f(x0: T, y: T, x1: T, x2: T) -> object:
        set_to(x2, x0.contiguous())
        x1.mul_(2.0)
        return (x0, y)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0, b1 = nonleaf(2, 3), torch.randn(3)
            return (b0.unbind(0)[0], b0[0], b1, b1)

    check_with_grad(f, make_inputs, compile_fn)
    check_no_grad(f, make_inputs, compile_fn)


def test_write_through_alias_keeps_eager_history(compile_fn: CompileFn | None) -> None:
    # the oracle compares only whether an input has a grad_fn: here, that it is eager's own (the view op's node)
    if compile_fn is not None:
        pytest.skip(
            "calls subclassaot.compile itself: another compile_fn (--identity-compile) has no pipeline history to check"
        )
    with torch.enable_grad():
        for view, node in ((_select, "SelectBackward0"), (_unbind, "UnbindBackward0")):
            x0, x1, x2 = (cast(T, x) for x in _views(view, nonleaf, False)())
            before = x0._version
            subclassaot.compile(_set_then_scale_return)(x0, x1, x2)
            assert type(x0.grad_fn).__name__ == node
            assert x0._version == before


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# trainalias (session 4): training programs over aliased inputs that were refused


def test_stride_agnostic_view_of_overlapping_subclass_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, programs 404 and 2654 (refused before): the input runs as a contiguous clone, but transpose
    # and select take the same elements on the input's own strides, so the view replays on it exactly.
    def f(x0: T) -> object:
        return (x0.transpose(2, 1), x0.select(0, -1))

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 3, requires_grad=True).expand(2, 2, 3),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_overlapping_subclass_input_valid_on_its_strides(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 6574 (refused before): view() succeeds on the input's own strides.
    def f(x0: T) -> object:
        return (x0.view(1, 3, 4),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 2, 2, requires_grad=True).expand(3, 2, 2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_under_grad_output_of_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 6800 (refused before): `t0.set_(t0)` with grad on, t0 the only output.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        set_to(t0, t0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)


def test_set_under_grad_output_beside_another_grad_output(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 262: refused before; no leaf gets a gradient before set_'s backward raises, in eager
    # and compiled alike (Note [set_ Under Grad])
    def f(x0: T) -> object:
        t0 = x0.mul(3.0)
        set_to(t0, x0)
        return (t0, x0 * 2)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, requires_grad=True),), compile_fn=compile_fn)


def test_overlapping_subclass_view_written_base_returned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1096 (refused before; wrong gradients with the refusal lifted alone: the base got a
    # wrapper update of its own that replaced the write's history). Only the member written gets an update (Note
    # [Aliased Inputs In Training]).
    def f(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0.reshape(2, 1, 1), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_overlapping_subclass_members_one_written_others_returned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3091 shape: the writer reads another member in the write itself (copy_ saves
    # nothing); views of the other member taken before and after the write are returned.
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        x1.copy_(x0[1])
        return (t0, x0.t(), x1 * 2)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 4)
        return (b0, b0[0])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_overlapping_subclass_unbind_member_viewed_before_write(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 4110 (crashed with the refusal lifted): a view of a member written through another
    # member is rebuilt before the epilogue writes the base (its grad_fn raises after, in eager too).
    def f(x0: T, x1: T) -> object:
        t0 = x0.transpose(0, 0)
        x1.fill_(2.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(4, 4)
        return (b0.unbind(0)[3], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_overlapping_subclass_member_saved_before_write(compile_fn: CompileFn | None) -> None:
    # mul saves x0 for its backward; eager's backward then fails its version check, and the trace's does too (Note
    # [Aliased Inputs In Training]); the probe of eager's backward shows it raises before any gradient, so the
    # deferred error is exact (Note [Probing Eager's Backward]).
    def f(x0: T, x1: T) -> object:
        y = x0 * x0
        x1.mul_(2.0)
        return (y,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 4)
        return (b0, b0[0])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_overlapping_subclass_member_written_under_no_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1418 (refused before): the second member is written under no_grad, which records
    # nothing; the one member written with grad is the only writer.
    def f(x0: T, x1: T) -> object:
        x0.add_(2.0)
        with torch.no_grad():
            x1.zero_()
        return (x0, x0 * 3)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0, b0.view(1, 2, 3))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_contiguous_of_overlapping_subclass_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 31, program 47 (wrong aliasing before: the traced contiguous clone's contiguous() is itself, so
    # the output came back as the input; eager's is a copy). Note [In-Place Ops As Eager Runs Them].
    def f(x0: T) -> object:
        y = x0.contiguous()
        y.mul_(2.0)
        return (y, x0.contiguous().t())

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True).expand(3, 4),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# A leaf view that requires grad over a base that does not is its own autograd root: the synthetic base of its group
# is taken from it, not from its `._base` (found by the wider gradient comparison of issue #27, where the program
# made the view require grad: test_grad_mode_switches.py::test_requires_grad_on_for_an_input_sharing_storage).
# PairTensor members are their own Function inputs (no view of a wrapper base): they matched before.
_LEAF_VIEW_LAYOUTS: dict[str, Callable[[T], tuple[T, T]]] = {
    "view_of_other": lambda b: (b[0:2], b),
    "sibling_views": lambda b: (b[0:2], b.t()),
    "sibling_view_at_offset": lambda b: (b[1:3], b[0]),
}


def _leaf_view_read_then_other_written(x: T, y: T) -> object:
    t = x.mul(2.0)
    with torch.no_grad():
        y.mul_(2.0)
    return (t,)


@pytest.mark.parametrize("passed_requiring_grad", [True, False], ids=["passed", "made_by_program"])
@pytest.mark.parametrize("layout", list(_LEAF_VIEW_LAYOUTS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_leaf_view_that_requires_grad_keeps_its_gradient_beside_a_written_alias(
    kind: str, layout: str, passed_requiring_grad: bool, compile_fn: CompileFn | None
) -> None:
    def make() -> tuple[T, T]:
        base = torch.randn(3, 3)
        x, y = _LEAF_VIEW_LAYOUTS[layout](PairTensor.from_tensor(base) if kind == "pair" else base)
        return (x.requires_grad_() if passed_requiring_grad else x, y)

    def f(x: T, y: T) -> object:
        x.requires_grad = True
        return _leaf_view_read_then_other_written(x, y)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# Alias groups analyzed apart first (Note [Synthetic Bases]; issue 29, compile time): where no member is touched the
# compile analyzes once, over the members apart; where one is, the grouped analysis decides as before.
# ---------------------------------------------------------------------------------------------------------------------


def _counting_analyses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The analyses a compile makes: alone, or in a run that traces the graph too (Note [Training Through A Joint
    Graph]: one run; the analysis apart makes one)."""
    calls: list[int] = []

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return analyze(*args, **kwargs)  # type: ignore[arg-type]  # the pipeline's own arguments, passed through

    def counted_with_trace(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return analyze_and_trace(*args, **kwargs)  # type: ignore[arg-type]  # as above

    monkeypatch.setattr(subclassaot.api, "analyze", counted)
    monkeypatch.setattr(subclassaot.api, "analyze_and_trace", counted_with_trace)
    return calls


_GROUP_PROGRAMS: dict[str, tuple[Callable[[T, T], object], int]] = {  # the program, analyses of its compile
    "read": (lambda x, y: x * 2 + y.sum(), 1),
    "write_one_read_other": (lambda x, y: (x.add_(1), y * 2)[1], 2),
    "inplace_view_op": (lambda x, y: (x.unsqueeze_(0), y + 1)[1], 2),
    "write_under_no_grad": (lambda x, y: (_no_grad_add(y), x * 3)[1], 2),
}


def _no_grad_add(t: T) -> T:
    with torch.no_grad():
        return t.add_(1)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("program", list(_GROUP_PROGRAMS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_alias_group_analyzed_apart_unless_touched(
    kind: str, program: str, grad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn, analyses = _GROUP_PROGRAMS[program]

    def make() -> tuple[T, T]:
        base = torch.randn(8)
        base = PairTensor.from_tensor(base) if kind == "pair" else base
        if grad:  # a non-leaf, so that its views may be written in place
            with torch.enable_grad():
                base = base.requires_grad_().clone()
        return (base[:4], base[4:])

    calls = _counting_analyses(monkeypatch)
    with torch.enable_grad() if grad else torch.no_grad():
        assert_matches_eager(fn, make, calls=1)
    assert len(calls) == analyses


class _Tied(torch.nn.Module):
    """Tied weights, as GPT-2's embedding and output layer: one Parameter at two names."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: T) -> T:
        return torch.relu(self.head(self.embed(ids)))


@pytest.mark.parametrize("train", [False, True])
def test_tied_weights_compile_with_one_analysis(train: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_analyses(monkeypatch)
    model = _Tied().train(train)
    with torch.enable_grad() if train else torch.no_grad():
        assert_matches_eager(model, lambda: (torch.randint(0, 10, (2, 3)),), calls=1)
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("view", ["t", "slice"])
@pytest.mark.parametrize("returned", [False, True])
def test_member_copied_from_a_leaf_returned_as_itself(
    compile_fn: CompileFn | None, kind: str, view: str, returned: bool
) -> None:
    # fuzz seed 117200 #1996: the leaf copied into a member, returned as itself, still gets its gradient through the
    # written inputs' new history (the Function keeps its edge to the leaf)
    def f(x0: T, x1: T, x2: T) -> object:
        x0.copy_(x1)
        return (x1,) if returned else (x1 * 2,)

    def make_inputs() -> tuple[object, ...]:
        if kind == "pair":
            base, source = pair_nonleaf(2, 2), pair(2, 2, requires_grad=True)
        else:
            base, source = nonleaf(2, 2), _leaf(2, 2)
        return (base.t() if view == "t" else base[0:2], source, base)

    check_with_grad(f, make_inputs, compile_fn)


def _copy_into_itself(x0: T, x1: T, x2: T) -> object:
    x2.copy_(x2)
    return ()


def _copy_into_itself_then_data_write(x0: T, x1: T, x2: T) -> object:
    x2.copy_(x2)
    x1[1:1:2].data.mul_(-1.0)  # (an empty slice: the `.data` write alone sends the backward to a retrace)
    return ()


def _copy_from_another_alias_then_data_write(x0: T, x1: T, x2: T) -> object:
    x2.copy_(x1.t() * 1)
    x1[0:1].data.mul_(-1.0)
    return ()


def _copy_into_itself_returned(x0: T, x1: T, x2: T) -> object:
    x2.copy_(x2)
    return (x1 * 2,)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("view", ["unbind", "split", "chunk"])
@pytest.mark.parametrize("shape", [(2,), (2, 3)])
@pytest.mark.parametrize(
    "f",
    [
        _copy_into_itself,
        _copy_into_itself_then_data_write,
        _copy_from_another_alias_then_data_write,
        _copy_into_itself_returned,
    ],
)
def test_backward_through_inputs_written_beside_a_multi_output_view_input(
    compile_fn: CompileFn | None, kind: str, view: str, shape: tuple[int, ...], f: Callable[..., object]
) -> None:
    # fuzz seed 123152 #200 (PairTensor): x0, a view of unbind()'s output, is passed beside its base and the base's
    # t(), which the program writes; eager's x0 then raises when its history is read, and the backward through the
    # written inputs (or some outputs only) retraced the joint over the compile's inputs, reading x0's is_leaf: it
    # raised there where eager's backward does not. The retrace now reads what the compile read.
    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(*shape) if kind == "pair" else nonleaf(*shape)
        with torch.enable_grad():
            x0 = {"unbind": b0.unbind(0)[0], "split": torch.split(b0, 1)[0], "chunk": b0.chunk(2)[1]}[view]
            return (x0, b0, b0.t())

    check_with_grad(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Leaf members laid out anew under no_grad that nothing sees after (Note [Aliased Inputs In Training])


_SUBCLASS_RELAID_RULE = "neither requiring grad; the program changed its size or strides in place"
_VIEW_RELAID_RULE = "the program changes the layout .* of a view"


def _relaid_leaf_members(kind: str) -> tuple[object, ...]:
    """A leaf of another size after `x1.unsqueeze_(0)`: `x1` a leaf that requires grad beside a view of it that keeps
    its history (`base`), or a view of a tensor requiring no grad yet, which the program makes require grad (`flag`)."""
    make = pair if kind.startswith("pair") else torch.randn
    if kind.endswith("base"):
        b0 = make(2, 3, requires_grad=True)
        return (b0[1:], b0)
    b0 = make(2, 3)
    return (b0, b0.select(0, 1).view(1, 3))


@pytest.mark.parametrize(
    ("kind", "grad"),
    [("plain-base", True), ("plain-flag", True), ("plain-flag", False), ("pair-base", True), ("pair-flag", False)],
)
def test_leaf_member_relaid_under_no_grad_and_never_seen_after(
    compile_fn: CompileFn | None, kind: str, grad: bool
) -> None:
    # fuzz seed 118100 #642, #4182: the relaid member is neither read with grad after its in-place view op nor
    # returned, so no gradient arrives in its new size (eager's accumulator is made at none)
    def f(x0: T, x1: T) -> object:
        if not x0.requires_grad:
            x0.requires_grad_()
        with torch.no_grad():
            x1.unsqueeze_(0)
            t0 = x1 * 2  # (a read under no_grad is none)
        with torch.enable_grad():
            return x0 * 3, t0

    def make_inputs() -> tuple[object, ...]:
        return _relaid_leaf_members(kind)

    if kind.startswith("pair"):
        # subclass members keep their refusals (Note [Aliased Inputs In Training]: gradients meet at the wrapper level)
        with torch.enable_grad() if grad else torch.no_grad():
            assert_refused(f, make_inputs, compile_fn, f"{_GROUP_RULE}|{_SUBCLASS_RELAID_RULE}")
        return
    (check_with_grad if grad else check_no_grad)(f, make_inputs, compile_fn)


@pytest.mark.parametrize("seen", ["read", "view-read", "returned"])
def test_leaf_member_relaid_under_no_grad_and_seen_after_is_refused(compile_fn: CompileFn | None, seen: str) -> None:
    # The relaid leaf read with grad after the op (itself, or through a view of it), or returned: eager's gradient
    # reaches it in the new size, where the compiled one is checked against the old
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(0)
        if seen == "read":
            return x0 * 3, x1 * 2
        if seen == "view-read":
            return x0 * 3, x1[:, 1] * 2
        return x0 * 3, x1

    with torch.enable_grad():
        assert_refused(f, lambda: _relaid_leaf_members("plain-base"), compile_fn, f"{_GROUP_RULE}|{_VIEW_RELAID_RULE}")


def _changed_member(x0: T, x1: T, how: str) -> None:
    """Change member `x0`'s metadata so that the group's gradients would not be eager's, were any output to carry one."""
    if how == "data":
        x0.data = x1
        return
    with torch.no_grad():
        if how == "set":
            set_to(x0, x1)
        else:
            x0.unsqueeze_(0)


@pytest.mark.parametrize("how", ["data", "set", "unsqueeze"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_member_changed_where_no_output_requires_grad(compile_fn: CompileFn | None, how: str, kind: str) -> None:
    # fuzz seed 118100 #3184, #3260, #7019: the group's members change metadata (`.data =`, set_() and an in-place
    # view op under no_grad, then read with grad), but every tensor returned is computed under no_grad or is a
    # detached member: no gradient leaves the call, as with no tensor returned at all
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0 * 2
        _changed_member(x0, x1, how)
        with torch.no_grad():
            t1 = t0 + x0.sum()
        return t1, x2

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(2, 3, requires_grad=True) if kind == "pair" else torch.randn(2, 3, requires_grad=True)
        return (b0, b0[1:], b0.detach())

    if kind == "pair" and how != "data":  # subclass members keep the group refusals (Note [Aliased Inputs In Training])
        refused_with_grad(f, make_inputs, compile_fn, "|".join((_GROUP_RULE, _SUBCLASS_RULE, _VIEW_RELAID_RULE)))
        return
    check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("how", ["data", "set", "unsqueeze"])
def test_member_changed_where_an_output_requires_grad_is_refused(compile_fn: CompileFn | None, how: str) -> None:
    # The same, returning the product computed with grad: the group refusal stays (for `.data =` of the leaf, the
    # refusal of its size change behind autograd: eager's x0 * 3 sends a [1, 3] gradient to the [2, 3] accumulator)
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0 * 2
        _changed_member(x0, x1, how)
        return t0, x0 * 3, x2

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(2, 3, requires_grad=True)
        return (b0, b0[1:], b0.detach())

    size_rule = "changes the size of a tensor that requires grad behind autograd"
    refused_with_grad(f, make_inputs, compile_fn, f"{_GROUP_RULE}|{_VIEW_RELAID_RULE}|{size_rule}")


@pytest.mark.parametrize("write", ["no_grad", "data", "other_no_grad"])
@pytest.mark.parametrize("read", ["other", "written", "both", "returned"])
@pytest.mark.parametrize("inputs", ["two", "overlapping", "with_base"])
def test_two_leaf_views_over_a_written_storage(inputs: str, read: str, write: str, compile_fn: CompileFn) -> None:
    """Two leaf views of one base that requires no grad (each made to require grad: an accumulator each), one written
    below autograd, then read with grad (helper h9872, issue #27): traced over one synthetic base, the whole gradient
    went to args[0]'s accumulator (args[0].grad a tensor where eager's is None, args[1].grad None; refused by name
    since). Each runs as a stand-in of its own now (runtime.steps.own_accumulator_inputs), the base requiring none."""

    def f(x0: torch.Tensor, y0: torch.Tensor, *base: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if write == "no_grad":
            with torch.no_grad():
                x0.mul_(-1.0)
        elif write == "data":
            x0.data.mul_(-1.0)
        else:
            with torch.no_grad():
                y0.add_(1.0)
        return {"other": (y0 * 3,), "written": (x0 * 3,), "both": (x0 * y0,), "returned": (x0, y0, x0 + y0)}[read]

    def make() -> tuple[torch.Tensor, ...]:
        b = torch.randn(4, 3, 3)
        if inputs == "overlapping":
            return b[0].requires_grad_(), b[:2].requires_grad_()
        return b[0].requires_grad_(), b[1].requires_grad_(), *((b,) if inputs == "with_base" else ())

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_two_leaves_no_views_over_a_written_storage_refused() -> None:
    """What stand-ins of their own do not cover, refused by name: two leaves requiring grad that are no views, each
    with a view of its own among the inputs (x, x.detach().requires_grad_(), a view of each: neither can run as a
    stand-in of its own; traced over one base, whose gradient reaches one of them)."""

    def f(x0: torch.Tensor, y0: torch.Tensor, *base: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.no_grad():
            x0.mul_(-1.0)
        return (x0 * y0, *(b * 2 for b in base))

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.randn(3, 3, requires_grad=True)
        y = x.detach().requires_grad_()
        return x, y, x[0], y[1]

    with torch.enable_grad():
        f(*make())  # legal in eager
        with pytest.raises(subclassaot.UnsupportedError, match="each a leaf that requires grad and no view"):
            subclassaot.compile(f)(*make())


def _own_view(kind: str, b: T) -> T:
    """A view of `b` (which requires no grad) made to require grad: a leaf with an accumulator of its own."""
    if kind == "no_grad_view":
        with torch.no_grad():
            return b[1].requires_grad_()
    return {"select": lambda: b[1], "t": b.t, "conj": b.conj}[kind]().requires_grad_()


_WRITES_KEEPING_THE_BASE_GRAD_FREE: dict[str, Callable[..., object]] = {
    "base": lambda v, b, d, w: b.mul_(2.0),
    "sibling": lambda v, b, d, w: b[2:].add_(1.0),
    "detach": lambda v, b, d, w: d.add_(2.0),
    "detach_gaining_grad": lambda v, b, d, w: d.mul_(w),
    "view_under_no_grad": lambda v, b, d, w: torch.no_grad()(lambda: v.mul_(2.0))(),
    "base_twice": lambda v, b, d, w: (b.add_(1.0), torch.no_grad()(lambda: b.mul_(3.0))()),
}


@pytest.mark.parametrize("write", list(_WRITES_KEEPING_THE_BASE_GRAD_FREE))
@pytest.mark.parametrize("kind", ["select", "t", "conj", "no_grad_view"])
@pytest.mark.parametrize("beside", ["detached_leaf", "leaf_view"])
def test_leaf_view_of_its_own_written_with_grad_over_a_base_requiring_none(
    compile_fn: CompileFn | None, write: str, kind: str, beside: str
) -> None:
    """A leaf view of its own (`b[1].requires_grad_()`, b requiring no grad) beside another leaf requiring grad over
    the storage (so it runs as a stand-in of its own), the storage written with grad on (through b, a view of b, a
    detach(), or the view itself under no_grad): eager reads the view's grad_fn after the write, rebuilding its
    history only from a base that requires grad; b requires none, so the view stays a leaf with its accumulator, as
    the stand-in of its own. It was refused as a view of its own over a storage written with grad on (fuzz seed
    121009 #9560: a .conj() view, written through a detach(); issue #27)."""

    def make() -> tuple[T, ...]:
        b = torch.randn(4, 4) * (1 + 0.5j) if kind == "conj" else torch.randn(4, 4)
        other = b.detach().requires_grad_() if beside == "detached_leaf" else b[3].requires_grad_()
        w = torch.tensor(2.0, requires_grad=True) * ((1 + 0j) if kind == "conj" else 1)
        return (_own_view(kind, b), b, b.detach(), other, w)

    def f(v: T, b: T, d: T, other: T, w: T) -> object:
        _WRITES_KEEPING_THE_BASE_GRAD_FREE[write](v, b, d, w)
        return (v * 3, other * 2, b + 1)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


_WRITES_GIVING_THE_BASE_GRAD: dict[str, Callable[..., object]] = {
    "base": lambda b, w: b.mul_(w),
    "sibling": lambda b, w: b[2:].copy_(w.expand(2, 4)),
    "flag_after_write_under_no_grad": lambda b, w: (torch.no_grad()(lambda: b.add_(1.0))(), b.requires_grad_()),
    "flag_before_write_under_no_grad": lambda b, w: (b.requires_grad_(), torch.no_grad()(lambda: b.add_(1.0))()),
}


@pytest.mark.parametrize("write", list(_WRITES_GIVING_THE_BASE_GRAD))
@pytest.mark.parametrize("beside", ["detached_leaf", "leaf_view", "nothing"])
def test_leaf_view_of_its_own_whose_base_gains_grad_stays_refused(
    compile_fn: CompileFn | None, write: str, beside: str
) -> None:
    """The storage written (with grad on or not) where the view's base requires grad by the program's end (a write
    of a value requiring grad through the base or a view of it, the base's requires_grad_()): eager's view, read
    after it, takes a history from its base (AsStridedBackward0), which the stand-in of its own does not. With the
    flag before a write under no_grad, the compiled backward raised ('leaf variable has been moved into the graph
    interior') where eager's ran, as it did with nothing else over the storage requiring grad (the view the group's
    root): refused now."""

    def make() -> tuple[T, ...]:
        b = torch.randn(4, 4)
        other = {"detached_leaf": b.detach(), "leaf_view": b[3], "nothing": torch.randn(4)}[beside].requires_grad_()
        return (b[1].requires_grad_(), b, other, torch.tensor(2.0, requires_grad=True))

    def f(v: T, b: T, other: T, w: T) -> object:
        _WRITES_GIVING_THE_BASE_GRAD[write](b, w)
        return (v * 3, other * 2, b + 1)

    gains = "writes a value that requires grad into it"  # (b beside its detach(): refused by that rule first)
    refused_with_grad(f, make, compile_fn, f"requires grad by a flag of its own|{gains}")


@pytest.mark.parametrize("write", ["no_grad", "inference_view", "data"])
@pytest.mark.parametrize("read", ["product", "returned", "view_of_second"])
def test_two_leaves_no_views_over_a_written_storage(write: str, read: str, compile_fn: CompileFn) -> None:
    """x and x.detach().requires_grad_() passed together (two leaves that are no views, an accumulator each), their
    storage written below autograd (fuzz seed 121000 #662, #1132, #4064; issue #27): refused by name before, as traced
    over one synthetic base whose gradient reaches one of them. The one the other inputs' views are of (else the first
    passed) is the group's root; the other runs as a stand-in of its own (runtime.steps.own_accumulator_inputs), its
    gradient reaching its own .grad, as eager's."""

    def f(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if write == "no_grad":
            with torch.no_grad():
                x1.mul_(x0.detach())
        elif write == "inference_view":
            t = x1.reshape(1, -1)
            with torch.inference_mode():
                t.zero_()
        else:
            x0.data.add_(0.5)
        if read == "product":
            return (x0 * x1,)
        if read == "returned":
            return (x0, x1, x1)
        return (x1.reshape(-1, 1), x0.sin())

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.randn(2, 3, requires_grad=True)
        return (x, x.detach().requires_grad_())

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize("op", ["exp", "mul", "sum"])
@pytest.mark.parametrize("order", ["base_first", "leaf_first"])
@pytest.mark.parametrize("returned", [False, True])
def test_detached_leaf_beside_a_written_nonleaf(op: str, order: str, returned: bool, compile_fn: CompileFn) -> None:
    """b.detach().requires_grad_() passed beside b, a non-leaf that requires grad, read with grad while the program
    writes b with grad (issue #27, helper hcrash): eager's is a leaf of its own whose gradient reaches its own .grad,
    b's leaf only b's part. Traced over one synthetic base from b, its gradient went to b's leaf (its .grad None, no
    error). It runs as a stand-in of its own now (runtime.steps.own_accumulator_inputs)."""

    def f(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t0 = x1.exp() if op == "exp" else x1 * 3.0 if op == "mul" else x1.sum()
        x0.mul_(2.0)
        return (t0, x0, *((x1,) if returned else ()))

    def g(x1: torch.Tensor, x0: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return f(x0, x1)

    def make() -> tuple[torch.Tensor, ...]:
        b = nonleaf(2, 3)
        return (b, b.detach().requires_grad_()) if order == "base_first" else (b.detach().requires_grad_(), b)

    with torch.enable_grad():
        assert_matches_eager(f if order == "base_first" else g, make, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# `.data =` of a leaf beside its own views that require grad (Note [Aliased Inputs In Training]), and views whose
# history autograd rebuilds over a base assigned so (Note [Stale View Functions]).

_ASSIGNED_BASE_RULE = "after the program assigned `.data =` of its base"
_ASSIGNED_BASE_KEPT_RULE = "the program assigns `.data =` of its base"


def _leaf_and_view(view: Callable[[T], T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(shape, requires_grad=True)
        return (b0, view(b0))

    return make_inputs


@pytest.mark.parametrize(
    "view,shape",
    [
        # fuzz seed 119200 #5812, #9954, #8498
        (lambda b: b.unsqueeze(2), (1, 4)),
        (lambda b: b.expand((4,)).reshape((1, 2, 2)), (4,)),
        (lambda b: b.unsqueeze(-2).as_strided((), (), 1), (4,)),
        (lambda b: b.t(), (2, 2)),
    ],
    ids=["unsqueeze", "reshape", "as_strided", "t"],
)
def test_leaf_data_assigned_its_own_view_input(
    compile_fn: CompileFn | None, view: Callable[[T], T], shape: tuple[int, ...]
) -> None:
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0, x0)

    check_with_grad(f, _leaf_and_view(view, *shape), compile_fn)


def test_leaf_data_assigned_its_transposed_view_used_before_and_after(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t = x0.sin()
        x0.data = x1
        return (t, x0.cos() * 2, x1 * 3, x0[0])

    check_with_grad(f, _leaf_and_view(lambda b: b.t(), 2, 2), compile_fn)


def test_leaf_data_assigned_a_view_of_its_view_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.data = x1.t()
        with torch.no_grad():
            x0.mul_(2.0)
        return (x0.sum(), x0)

    check_with_grad(f, _leaf_and_view(lambda b: b.view(3, 2), 2, 3), compile_fn)


@pytest.mark.parametrize("base", ["leaf", "nonleaf"])
def test_view_input_read_after_a_write_over_its_assigned_base_refused(compile_fn: CompileFn | None, base: str) -> None:
    # eager rebuilds x1's history by as_strided() of x0 in its assigned (transposed) geometry, so its gradient reaches
    # x0 transposed; the compiled call's kept the history x1 came with (a wrong x0.grad for the non-leaf before)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        with torch.no_grad():
            x1.mul_(2.0)
        return (x1 + 1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = _leaf(2, 2) if base == "leaf" else nonleaf(2, 2)
        return (b0, b0.t())

    refused_with_grad(f, make_inputs, compile_fn, _ASSIGNED_BASE_RULE)


def test_view_taken_of_view_input_read_after_a_write_over_its_assigned_base_refused(
    compile_fn: CompileFn | None,
) -> None:
    # x1[0]'s `._base` is x0 too: rebuilt over x0's assigned geometry
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t = x1[0]
        with torch.no_grad():
            x1.mul_(2.0)
        return (t * 2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 2)
        return (b0, b0.t())

    refused_with_grad(f, make_inputs, compile_fn, _ASSIGNED_BASE_RULE)


@pytest.mark.parametrize("base", ["leaf", "nonleaf"])
def test_view_input_rebuilt_before_its_base_assigned_refused(compile_fn: CompileFn | None, base: str) -> None:
    # x1's history is rebuilt at the read before the assignment, in x0's old geometry, and eager's x1 keeps it; the
    # compiled call's x1, written by the epilogue, rebuilds it over x0's new geometry after the call
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.mul_(2.0)
        y = x1 * 3
        x0.data = x1
        return (y,)

    def make_inputs() -> tuple[object, ...]:
        b0 = _leaf(2, 2) if base == "leaf" else nonleaf(2, 2)
        return (b0, b0.t())

    refused_with_grad(f, make_inputs, compile_fn, _ASSIGNED_BASE_KEPT_RULE)


def test_view_input_written_after_its_base_assigned_unread(compile_fn: CompileFn | None) -> None:
    # no read rebuilds x1's history in the program: eager's and the compiled call's rebuild it alike after the call
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.mul_(2.0)
        x0.data = x1
        return (x0 * 2, x0)

    check_with_grad(f, _leaf_and_view(lambda b: b.t(), 2, 2), compile_fn)


def test_view_taken_of_assigned_leaf_base_read_after_a_write_refused(compile_fn: CompileFn | None) -> None:
    # x0[0], taken before the assignment, is rebuilt after the write over x0's assigned (transposed) geometry
    def f(x0: T, x1: T) -> object:
        t = x0[0]
        x0.data = x1
        with torch.no_grad():
            x1.mul_(2.0)
        return (t * 2,)

    refused_with_grad(f, _leaf_and_view(lambda b: b.t(), 2, 2), compile_fn, _ASSIGNED_BASE_RULE)


def _two_gain_then_one_copied_into_a_third(x0: T, x1: T, x2: T) -> object:
    x1.requires_grad_()
    x2.requires_grad_()
    x0.copy_(x2)
    return (x0,)


def _two_gain_then_both_read(x0: T, x1: T, x2: T) -> object:
    x2.requires_grad_()
    x1.requires_grad_()
    return (x1 * 2, x2 * 3, x0 + 1)


@pytest.mark.parametrize(
    "f", [_two_gain_then_one_copied_into_a_third, _two_gain_then_both_read], ids=["copied", "read"]
)
@pytest.mark.parametrize("base_at", [0, 1])
def test_two_aliases_without_grad_made_to_require_grad_each_get_their_own_gradient(
    compile_fn: CompileFn | None, f: Callable[..., object], base_at: int
) -> None:
    """A tensor and its detach()es, none requiring grad as passed, two of them made to require grad: eager's are two
    leaves of their own, each with its own accumulator, and a gradient reaches only the one read. Each runs as a
    stand-in of its own, as one gaining the flag beside a member requiring grad does (fuzz seed 121002 #7962: the
    gradient went to x1, the group's autograd root, where eager's reached x2)."""

    def make() -> tuple[T, T, T]:
        b = torch.randn(3)
        members = [b.detach(), b.detach(), b.detach()]
        members[base_at] = b
        return (members[0], members[1], members[2])

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def _data_set_to_its_base_view(x0: T, x1: T) -> object:
    x1.data = x0.view((3, 2))  # (fuzz seed 121002 #2796)
    return ()


def _data_set_then_read(x0: T, x1: T) -> object:
    y = x1 * 2
    x1.data = x0.view(x0.shape)
    return (y, x1.exp(), x1, x0 * 3)


@pytest.mark.parametrize("f", [_data_set_to_its_base_view, _data_set_then_read], ids=["alone", "read"])
@pytest.mark.parametrize("base", ["leaf", "nonleaf"])
def test_detached_leaf_data_set_to_its_base_at_its_own_layout(
    compile_fn: CompileFn | None, f: Callable[..., object], base: str
) -> None:
    """b.detach().requires_grad_() beside b, `.data =`-assigned a view of b at its own layout: set_data leaves eager's
    leaf as it was (its storage, layout, flag, counter and accumulator), so its gradient reaches its own .grad. It was
    refused as a leaf of its own whose storage the program changes (issue #27)."""

    def make() -> tuple[T, T]:
        b = _leaf(3, 2) if base == "leaf" else nonleaf(3, 2)
        return (b, b.detach().requires_grad_())

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def _data_set_elsewhere(x0: T, x1: T, o: T) -> object:
    y = x1 * 2
    x1.data = o  # (fuzz seed 121009 #1110: onto another input's storage)
    return (y, x1 * 3, x0 * 2, x1, o)


def _data_set_transposed(x0: T, x1: T, o: T) -> object:
    x1.data = x0.t()  # (its own storage at another layout)
    with torch.no_grad():
        x1.mul_(2.0)
    return (x1 * 2, x0 * 3)


def _set_elsewhere_under_inference(x0: T, x1: T, o: T) -> object:
    t0 = x1.add(x0)
    with torch.inference_mode():
        set_to(x1, o)  # (fuzz seed 121009 #5461: a set_() below autograd)
    o.mul_(2.0)
    return (t0, x1 * 2, x1)


def _grown_under_inference(x0: T, x1: T, o: T) -> object:
    y = x1 * 2
    with torch.inference_mode():
        x1.resize_((8,))  # (fuzz seed 121009 #2568: grown below autograd, its storage reallocated)
        x1.fill_(3.0)
    return (y, x0 * 2)


_LEAF_CHANGES = [
    _data_set_elsewhere,
    _data_set_transposed,
    _set_elsewhere_under_inference,
    _grown_under_inference,
]


@pytest.mark.parametrize("f", _LEAF_CHANGES, ids=[f.__name__.strip("_") for f in _LEAF_CHANGES])
@pytest.mark.parametrize("base", ["leaf", "nonleaf"])
@pytest.mark.parametrize("order", ["base_first", "leaf_first"])
def test_detached_leaf_whose_layout_or_storage_changes(
    compile_fn: CompileFn | None, f: Callable[..., object], base: str, order: str
) -> None:
    """b.detach().requires_grad_() beside b, its layout or storage changed below autograd (`.data =`, set_() or
    resize_() under inference_mode): eager's leaf keeps its flag,
    counter and accumulator, autograd recording none of the change, as the compiled call's stand-in of its own (a
    detached leaf, its change replayed by the epilogue) does. It was refused as a leaf of its own whose layout or
    storage the program changes (issue #27)."""

    def make() -> tuple[T, T, T]:
        shape = (2, 2) if f is _data_set_transposed else (4,)
        b = _leaf(*shape) if base == "leaf" else nonleaf(*shape)
        d, o = b.detach().requires_grad_(), torch.randn(shape)
        return (b, d, o) if order == "base_first" else (d, b, o)

    def g(x0: T, x1: T, o: T) -> object:
        return f(x0, x1, o) if order == "base_first" else f(x1, x0, o)

    with torch.enable_grad():
        assert_matches_eager(g, make, compile_fn=compile_fn)
        assert_matches_eager(g, make, compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("change", ["data_set", "set_"])
def test_detached_leaf_changed_beside_a_recorded_write_stays_refused(compile_fn: CompileFn | None, change: str) -> None:
    """Its layout or storage changed, and a write autograd records over its storage (through b, a non-leaf): the
    epilogue would update the leaf in place with grad on, which autograd rejects."""

    def f(x0: T, x1: T, o: T) -> object:
        if change == "data_set":
            x1.data = x0.detach()[:]
        else:
            with torch.no_grad():
                set_to(x1, o)
        x0.mul_(2.0)
        return (x1 * 3, x0)

    def make() -> tuple[T, T, T]:
        b = nonleaf(2, 2)
        return (b, b.detach().requires_grad_(), torch.randn(2, 2))

    refused_with_grad(f, make, compile_fn, "requires grad by a flag of its own")
