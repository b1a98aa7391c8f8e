"""Fuzz regressions (seed 40000): `.data =` assignments in training and inference.

Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
`--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad as _check
from tests.pipeline.fuzz_helpers import leaf as _leaf
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf
from tests.pipeline.fuzz_helpers import refused_with_grad as assert_refused

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# An output with history whose `.data` the program assigned (Note [Outputs Assigned .data With History])


def test_intermediate_assigned_its_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #4187: refused before; eager's output shares the input's storage and keeps AddBackward0
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        t0.data = x0
        return (t0,)

    _check(f, lambda: (_leaf(),), compile_fn)


def test_intermediate_assigned_an_empty_slice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #5126: eager's backward raises (the gradient's size is not the recorded one), ours too
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = x0[2:2:1]
        t0.data = t1
        return (t0,)

    _check(f, lambda: (_leaf(2),), compile_fn)


def test_reduction_assigned_its_input_sums_the_gradient(compile_fn: CompileFn | None) -> None:
    # the recorded size (1, 2) expands to the new one (3, 2): the engine sums the gradient back, in both
    def f(x0: T, x1: T) -> object:
        t0 = x0.sum(0, keepdim=True).mul(x1[:1])
        t0.data = x1
        return (t0, x0.cos())

    _check(f, lambda: (_leaf(3, 2), nonleaf(3, 2)), compile_fn)


def test_assigned_a_transposed_offset_view_then_written(compile_fn: CompileFn | None) -> None:
    # an input view with an offset and other strides; the write through the output reaches the input
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0)
        t0.data = x1[1:].t()
        t0.mul_(3.0)
        return (t0,)

    _check(f, lambda: (_leaf(2, 2), torch.randn(3, 2)), compile_fn)


def test_intermediate_assigned_a_fresh_value(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #9901: refused before; the graph's value is the assigned storage already
    def f(x0: T) -> object:
        t0 = x0.view((4, 1))
        t1 = t0.sum(1)
        t2 = x0.add(3.0)
        t2.data = t1
        return (t2,)

    _check(f, lambda: (nonleaf(2, 1, 2),), compile_fn)


def test_view_of_leaf_assigned_the_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #4275: refused before; replayed from the input with its history, then assigned
    def f(x0: T) -> object:
        t0 = x0.t()
        t0.data = x0
        return (t0,)

    _check(f, lambda: (_leaf(3),), compile_fn)


def test_subclass_intermediate_assigned_its_input(compile_fn: CompileFn | None) -> None:
    # the same program on a tensor subclass (Note [Wrapper Data Assignment])
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        t0.data = x0
        return (t0,)

    _check(f, lambda: (pair_nonleaf(3),), compile_fn)


def test_view_assigned_an_input_stays_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0).t()
        t0.data = x1
        return (t0,)

    assert_refused(f, lambda: (_leaf(2, 3), torch.randn(3, 2)), compile_fn, "assigned `.data` of this")


# ---------------------------------------------------------------------------------------------------------------
# A tensor subclass output that requires grad, given another size by `.data =` (Note [Subclass Outputs Resized
# Under Their History])


def _pair_leaf(*shape: int) -> T:
    return pair(*shape, requires_grad=True)


def test_subclass_intermediate_assigned_an_expanded_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #4383: refused before; eager sums the (3,) gradient back to the size () its history recorded
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(-1.0)
        t0.data = x0
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = _pair_leaf()
        return (b0.expand((3,)), b0)

    _check(f, make_inputs, compile_fn)


def test_subclass_intermediate_assigned_a_larger_input(compile_fn: CompileFn | None) -> None:
    # the recorded size (3, 1) expands to the assigned (3, 4): gradients summed back, in both
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0)
        t0.data = x1
        return (t0,)

    _check(f, lambda: (_pair_leaf(3, 1), pair_nonleaf(3, 4)), compile_fn)


def test_subclass_intermediate_assigned_twice_then_viewed(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t0.data = x0.expand(2, 3)
        t0.data = x0.expand(4, 3)
        return (t0,)

    _check(f, lambda: (_pair_leaf(1, 3),), compile_fn)


def test_subclass_intermediate_assigned_a_smaller_input_stays_refused(compile_fn: CompileFn | None) -> None:
    # the recorded size (3, 4) does not expand to (3, 1): whether eager's backward raises depends on the gradient
    # the subclass's ops give (its inner tensors keep the old size); refused
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0)
        t0.data = x1
        return (t0,)

    assert_refused(f, lambda: (_pair_leaf(3, 4), pair_nonleaf(3, 1)), compile_fn, "from a tensor of another size")


def test_subclass_view_of_input_assigned_the_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #137: refused before; replayed from the input, the view records its size as eager's did
    def f(x0: T) -> object:
        t0 = x0.unbind(1)[0]
        t0.data = x0
        return (t0,)

    _check(f, lambda: (_pair_leaf(1, 2, 2),), compile_fn)


def test_subclass_view_of_input_assigned_another_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #6450
    def f(x0: T, x1: T) -> object:
        t0 = x1.transpose(0, 1)
        t1 = x0.unsqueeze(-1)
        t0.data = t1
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = _pair_leaf(3, 4)
        return (b0, b0)

    _check(f, make_inputs, compile_fn)


def test_view_of_subclass_input_after_its_data_was_assigned_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1535: the view replays from the input after the epilogue's assignment, but eager's backward
    # raises at the input's own history (recorded with its old size) for the returned input, which the probe now
    # sees (the non-leaf input returned as-is is left out of it: seed 41000 #2043), and the compiled backward cannot
    # raise at the same step: refused (Note [Errors Only Eager's Backward Sees])
    def f(x0: T) -> object:
        t0 = x0.as_strided((2, 3), (3, 2), 1)
        x0.data = t0
        t1 = x0[0:0:2]
        t0.data.unsqueeze_(2)
        return (x0, t1)

    assert_refused(f, lambda: (pair_nonleaf(4, 4, 2),), compile_fn, "eager's backward fails")


def test_views_of_subclass_input_assigned_a_larger_one(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.t(), x0.mul(1.0))

    _check(f, lambda: (pair_nonleaf(1, 3), pair_nonleaf(3, 3)), compile_fn)


def test_subclass_view_whose_base_changed_layout_stays_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #727: the view's grad_fn is rebuilt when read (its base's t_()), after the assignment
    def f(x0: T) -> object:
        t0 = x0.expand((3, 4))
        x0.t_()
        t0.data = x0
        return (t0,)

    assert_refused(f, lambda: (pair_nonleaf(3, 4),), compile_fn, "from a tensor of another size")


# ---------------------------------------------------------------------------------------------------------------
# Strides of a computed tensor subclass assigned by `.data =`, in training (Note [Strides Of Assigned Tensors])


def test_view_of_input_assigned_a_computed_value_in_training(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #833: refused before (no stride probes in training); (1, 3) has a dim of size 1
    def f(x0: T) -> object:
        t0 = x0.select(2, 1)
        t1 = t0.mul(2.0)
        t0.data = t1
        return (t0,)

    _check(f, lambda: (pair_nonleaf(1, 3, 3),), compile_fn)


def test_input_assigned_a_computed_value_in_training(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #9250 (shrunk): refused before
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        x0.data = t0
        return (x0, t0)

    _check(f, lambda: (pair_nonleaf(3).view((3, 1)),), compile_fn)


def test_intermediate_assigned_a_computed_output_in_training(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = x0.sin()
        t0.data = t1
        return (t0, t1)

    _check(f, lambda: (_pair_leaf(3, 1),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A plain view whose `.data` the program assigned stays a view of its base (inference)


def _no_grad_check(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_intermediate_assigned_an_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #7702: refused before; eager's `._base` is the sum, the storage the input's
    def f(x0: T) -> object:
        t0 = x0.sum()
        t1 = t0.unsqueeze(-1)
        t1.data = x0
        return (t1,)

    _no_grad_check(f, lambda: (torch.randn(()),), compile_fn)


def test_view_of_input_assigned_its_own_view_then_input_transposed(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2384: refused before; rebuilt by as_strided() of the input (its `._base`)
    def f(x0: T) -> object:
        t0 = x0.select(0, 1)
        t1 = t0.unbind(0)[1]
        t0.data = t1
        x0.transpose_(1, 0)
        return (t0,)

    _no_grad_check(f, lambda: (torch.randn(3, 2),), compile_fn)


def test_view_of_input_assigned_after_the_input_was_set(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #8389: refused before
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(1)
        set_to(x0, t0)
        t1 = x0.unbind(2)[0]
        t0.data = t1
        return (t0,)

    _no_grad_check(f, lambda: (torch.randn(1, 2),), compile_fn)


def test_view_of_input_assigned_another_input_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0[1]
        t0.data = x1
        x0.t_()
        t0.add_(1.0)
        return (t0, x0)

    _no_grad_check(f, lambda: (torch.randn(3, 2), torch.randn(4)), compile_fn)


def test_views_of_one_intermediate_one_assigned_an_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0[0]
        t1.data = x1[1]
        return (t1, t0[1])

    _no_grad_check(f, lambda: (torch.randn(3, 2), torch.randn(3, 2)), compile_fn)
