"""Fuzz regressions (helper r13grad): training programs of fuzz seed 13000 whose gradients or backward errors
differed from eager's."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused

T = torch.Tensor


def test_leaf_passed_twice_unsqueezed_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 13000 #2682: one leaf as both arguments; unsqueeze_ under no_grad through one, a view with grad
    # through the other: eager's gradient arrives in the new size (1, 1, 1); one input since Note [One Tensor Passed
    # Several Times]
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(-1)
        t0 = x0.view((1, 1, 1))
        return (t0,)

    def make() -> tuple[T, T]:
        b0 = torch.randn((1, 1), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_leaf_set_under_no_grad_to_a_smaller_tensor_then_multiplied_in(compile_fn: CompileFn | None) -> None:
    # fuzz seed 13000 #2390: leaf x1 (1, 4, 3) set_() under no_grad to x0 (1,), then x0.mul_(x1) with grad
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        t0 = x0.view(())
        x0.mul_(x1)
        return (t0,)

    def make() -> tuple[T, T]:
        return (torch.randn((1,)), torch.randn((1, 4, 3), requires_grad=True))

    with torch.enable_grad():
        rule = r"set_\(\) under torch\.no_grad\(\) to a tensor of another size.*\[Leaves Laid Out Anew Under no_grad\]"
        assert_refused(f, make, compile_fn, rule)


def test_data_assigned_a_sum_of_itself_after_a_copy_of_its_slice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 13000 #7958: eager's backward fails ("output with shape [] doesn't match the broadcast shape [4]"),
    # and so must ours (Note [Errors Only Eager's Backward Sees])
    def f(x0: T, x1: T) -> object:
        t0 = x1[3:4:2]
        x0.copy_(t0)
        t1 = x1.sum(0)
        x1.data = t1
        return (t1,)

    def make() -> tuple[T, T]:
        return (torch.randn(()).reshape((1,)), torch.randn((4,), requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
