"""Fuzz regressions (helper refshare): one tensor passed at several positions whose layout the program changes
(Note [One Tensor Passed Several Times]), refused before as inputs sharing storage (fuzz seed 44000)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, twice

T = torch.Tensor


def test_leaf_twice_unsqueezed_under_no_grad_after_a_use(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #957
    def f(x0: T, x1: T) -> object:
        t0 = x1.mul(-1.0)
        with torch.no_grad():
            x0.unsqueeze_(-1)
        return (t0.view((1, 1)),)

    check_with_grad(f, twice(leaf), compile_fn)


def test_leaf_twice_data_assigned_a_select(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #1815
    def f(x0: T, x1: T) -> object:
        t0 = x0.select(1, 0)
        x0.data = t0
        return (t0,)

    check_with_grad(f, twice(lambda: leaf(2, 1, 1)), compile_fn)


def test_leaf_twice_data_assigned_a_transposed_select_returned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #2841 (#9720 shrank to the same shape with unbind)
    def f(x0: T, x1: T) -> object:
        t1 = x1.select(1, 0).t()
        x1.data = t1
        return (t1,)

    check_with_grad(f, twice(lambda: leaf(4, 2)), compile_fn)


@pytest.mark.parametrize("make", [lambda: leaf(2, 4), lambda: nonleaf(2, 4)])
def test_twice_transposed_under_no_grad_returned(make: Callable[[], T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #6033, #7686 (plain leaf), and a non-leaf
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.t_()
        return (x1,)

    check_with_grad(f, twice(make), compile_fn)


def test_nonleaf_twice_transposed_under_no_grad_then_read(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.t_()
        return (x1, x1.mul(2.0))

    check_with_grad(f, twice(lambda: nonleaf(2, 4)), compile_fn)


def test_nonleaf_twice_unsqueezed_under_no_grad_then_read(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #8348
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        return (x1.mul(0.5),)

    check_with_grad(f, twice(nonleaf), compile_fn)


def test_nonleaf_twice_unsqueezed_then_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #4896 (shrunk), three positions as in #7476
    def f(x0: T, x1: T, x2: T) -> object:
        x2.unsqueeze_(-2)
        x0.fill_(3.0)
        return (x1, x0.mul(x2))

    def make() -> tuple[T, T, T]:
        x = nonleaf(2, 4, 2)
        return (x, x, x)

    check_with_grad(f, make, compile_fn)


def test_twice_set_to_another_input_under_no_grad(compile_fn: CompileFn | None) -> None:
    # a variant: set_() of the repeated tensor, then a read through the other position, training and inference
    def f(x0: T, x1: T, y: T) -> object:
        with torch.no_grad():
            set_to(x0, y)
        return (x1.add(1.0), y.mul(2.0))

    def make() -> tuple[T, T, T]:
        x = nonleaf(3)
        return (x, x, torch.randn(2, 3))

    check_with_grad(f, make, compile_fn)
    check_no_grad(f, make, compile_fn)


def test_entry_for_one_tensor_twice_is_not_run_for_two(compile_fn: CompileFn | None) -> None:
    # the guard of Note [One Tensor Passed Several Times]: distinct tensors at the repeated positions recompile
    def f(x0: T, x1: T) -> tuple[T]:
        x0.t_()
        x1.mul_(2.0)
        return (x0.add(x1),)

    assert_matches_eager(f, twice(lambda: torch.randn(3, 3)), compile_fn=compile_fn)
    if compile_fn is not None:
        return  # eager against eager: no cache to check
    compiled = subclassaot.compile(f)
    a = torch.randn(2, 2)
    eager = a.clone()
    out = compiled(a, a)
    assert torch.equal(out[0], f(eager, eager)[0]) and torch.equal(a, eager)
    b, c = torch.randn(2, 2), torch.randn(2, 2)
    b2, c2 = b.clone(), c.clone()
    out = compiled(b, c)
    assert compiled.compile_count == 2
    assert "very same tensor" in compiled.recompile_reasons[0]
    assert torch.equal(out[0], f(b2, c2)[0]) and torch.equal(b, b2) and torch.equal(c, c2)


def _leaf_and_detach() -> tuple[T, T]:
    b0 = torch.randn((3, 3), requires_grad=True)
    return (b0.detach().transpose(1, 1), b0)


def test_leaf_data_assigned_a_view_of_its_detach(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #9720 (Note [Aliased Inputs In Training]): the leaf is the group's only
    # input that needs grad
    def f(x0: T, x1: T) -> object:
        t0 = x0.contiguous()
        t1 = x0.unbind(1)[1]
        x1.data = t1
        t2 = x0.clone()
        return (x1, t0, t2)

    check_with_grad(f, _leaf_and_detach, compile_fn)


def test_leaf_data_assigned_its_transposed_detach_used_before_and_after(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t = x1.exp()
        x1.data = x0.t()
        x0.mul_(2.0)
        return (t.sum() + x1.sum(), x1.mul(3.0), x1)

    check_with_grad(f, _leaf_and_detach, compile_fn)


def test_leaf_data_assigned_beside_two_detached_aliases(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        t = x1 * x2.sum()
        x1.data = x0.flip(0)
        with torch.no_grad():
            x2.mul_(2.0)
        return (t, x1)

    def make() -> tuple[T, T, T]:
        b0 = torch.randn((4,), requires_grad=True)
        return (b0.detach(), b0, b0.detach()[::2])

    check_with_grad(f, make, compile_fn)
