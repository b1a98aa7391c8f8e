"""Fuzz follow-ups (seed 44000): a tensor subclass input given another wrapper layout by `.data =`, where the program
also set_() it to itself (the epilogue's repeat of that set_ kept the wrapper's own metadata), and a subclass leaf
resized by `.data =` and read with grad after."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor


def test_wrapper_data_assigned_after_its_own_set_keeps_the_assigned_layout(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #6715 (shrunk): the epilogue repeats the program's `set_to(x0, x0)` (under grad: a raising
    # grad_fn; on a leaf under no_grad: a new accumulator) after it gave x0 its assigned metadata, and a wrapper's
    # set_ takes its inner tensors' layout: args[0] ended (4, 3, 4) where eager's is (12, 4)
    def f(x0: T) -> object:
        set_to(x0, x0)
        t0 = x0.reshape((12, -1))
        x0.data = t0
        return ()

    def permuted(x0: T) -> object:
        set_to(x0, x0)
        x0.data = x0.permute(2, 0, 1)
        return (x0,)

    def read(x0: T) -> object:
        set_to(x0, x0)
        x0.data = x0.view(12, 4)
        return (x0.sin(),)

    def set_after(x0: T) -> object:  # eager's last set_ gives the inner layout back
        set_to(x0, x0)
        x0.data = x0.reshape((12, -1))
        set_to(x0, x0)
        return (x0,)

    makers: list[Callable[[], tuple[object, ...]]] = [
        lambda: (pair_nonleaf(4, 3, 4),),
        lambda: (pair(4, 3, 4),),
    ]
    for fn in (f, permuted, read, set_after):
        for make in makers:
            check_with_grad(fn, make, compile_fn)
            check_no_grad(fn, make, compile_fn)
        # a leaf that requires grad: set_() is legal on it under no_grad only
        check_no_grad(fn, lambda: (pair(4, 3, 4, requires_grad=True),), compile_fn)


def test_wrapper_assigned_another_input_after_its_own_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x0)
        x0.data = x1
        return (x0, x1.sin())

    def nonleaf_and(*s1: int) -> Callable[[], tuple[object, ...]]:
        return lambda: (pair_nonleaf(4, 3, 4), pair(*s1))

    def leaf_and(*s1: int) -> Callable[[], tuple[object, ...]]:
        return lambda: (pair(4, 3, 4, requires_grad=True), pair(*s1))

    for s1 in ((4, 3, 4), (2, 6)):
        check_with_grad(f, nonleaf_and(*s1), compile_fn)
        check_no_grad(f, leaf_and(*s1), compile_fn)


def _leaves(s0: tuple[int, ...], s1: tuple[int, ...]) -> Callable[[], tuple[object, ...]]:
    return lambda: (pair(*s0, requires_grad=True), pair(*s1, requires_grad=True))


def test_subclass_leaf_read_after_data_gets_its_accumulator_at_the_new_size(compile_fn: CompileFn | None) -> None:
    # Note [Subclass Accumulators Made After .data =] (test_fuzz_r14a.py's former strict xfail): eager makes x0's
    # accumulator at the first read with grad after the assignment, in the new wrapper size, and reduces the
    # gradients of the inner size to it; the Function took x0 attached at its old size ("output with shape []
    # doesn't match the broadcast shape [4, 4]" in our backward, or x0.grad of the old size)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.sin(), x0)

    def scaled(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.mul(2.0),)

    def through_a_view(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.unsqueeze(0).cos(), x1)

    def with_x1(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.sin() + x1, x0.unsqueeze(0))

    for fn in (f, scaled, through_a_view, with_x1):
        for s0, s1 in (((4, 4), ()), ((2, 3), (3,)), ((4,), (1,))):
            check_with_grad(fn, _leaves(s0, s1), compile_fn)
            check_no_grad(fn, _leaves(s0, s1), compile_fn)
        check_with_grad(fn, lambda: (pair(4, 4, requires_grad=True), pair_nonleaf()), compile_fn)
        check_with_grad(fn, lambda: (pair(4, 4, requires_grad=True), pair()), compile_fn)
        check_with_grad(fn, lambda: (pair_nonleaf(4, 4), pair(requires_grad=True)), compile_fn)
    # eager's backward fails at its size check (the inner size does not reduce to the new one), and so does ours
    check_with_grad(f, _leaves((3,), (2, 3)), compile_fn)
    check_with_grad(scaled, _leaves((2, 3), (3, 2)), compile_fn)


def test_subclass_leaf_read_after_data_by_a_size_reading_op_is_refused(compile_fn: CompileFn | None) -> None:
    # x0.sum()'s gradient has x0's new wrapper size, which the joint trace (x0 a clone of the old size there)
    # checks against the old one: our backward raised "SumBackward0 returned an invalid gradient" where eager's runs
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.sum(), x0)

    for s0, s1 in (((4, 4), ()), ((2, 3), (3,))):
        refused_with_grad(f, _leaves(s0, s1), compile_fn, "Subclass Accumulators Made After .data =")
        check_no_grad(f, _leaves(s0, s1), compile_fn)
