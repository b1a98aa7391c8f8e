"""Fuzz follow-ups: requires_grad, is_leaf and grad_fn of outputs (no_grad views of tensors that require grad, a
detach() written with a value that requires grad, set_() between outputs, a wrapper set_() after a view)."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair

T = torch.Tensor


def test_no_grad_view_of_input_changed_in_place(compile_fn: CompileFn | None) -> None:
    # fuzz seed 9000 #2949: x0 is given to the Function detached (its metadata changes, no gradient reaches it);
    # t3 still requires grad in eager (a no_grad view of x0 requires grad), with a grad_fn (Note [Unreached Inputs
    # Are Detached])
    def f(x0: T) -> object:
        x0.unsqueeze_(-1)
        t0 = x0.reshape((1,))
        with torch.no_grad():
            t1 = t0.unsqueeze(-2)
        t2 = t1[:, 1:1:2]
        t3 = t2.sum(1)
        return (t3,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def test_no_grad_view_of_input_changed_in_place_computed_with_grad(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.unsqueeze_(-1)
        with torch.no_grad():
            t1 = x0.view(-1)
        return (t1 * 2, x0.sin())

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(3),), compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_view_of_detach_written_with_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # fuzz seed 10000 #9135: t0 gains requires_grad by the copy_; its no_grad view requires grad through its
    # `._base` (Note [Views Of A Detach That Gained Grad])
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0)
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True) if subclass else torch.randn(1, 4, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_view_of_detach_then_written_with_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # the view is taken before the write: eager's grad_fn raises (and requires_grad is True)
    def f(x0: T) -> object:
        t0 = x0.detach()
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        t0.mul_(x0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True) if subclass else torch.randn(1, 4, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_views_of_detach_written_with_grad_and_computed_from(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0 * 2)
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        return (t1 * 3, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(1, 4),), compile_fn=compile_fn)


@pytest.mark.parametrize("order", ["set_first", "owner_first"])
def test_output_set_onto_another_keeps_the_others_history(compile_fn: CompileFn | None, order: str) -> None:
    # fuzz seed 11000 #7045: the intermediate base of the two outputs is t1 (whose storage it is, with its history),
    # not t0, which set_() moved onto it
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        return (t0, t1) if order == "set_first" else (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(1, 3, 1),), compile_fn=compile_fn)


def test_output_set_onto_another_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        t0.mul_(2)
        return (t0, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(1, 3, 1, requires_grad=True),), compile_fn=compile_fn)


def test_output_with_history_beside_views_of_tensor_set_onto_it(compile_fn: CompileFn | None) -> None:
    # the outputs' base is t0 (the view names it): t1 would come back as an alias without its history
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        return (t1, t0.view(-1))

    with torch.enable_grad():
        assert_refused(
            f, lambda: (nonleaf(1, 3, 1),), compile_fn, "has an autograd history of its own, and the program set_()"
        )


def test_view_of_subclass_input_before_wrapper_set_onto_it(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #2840 (inference): t1.set_(t0) bumps t1's version counter, not x0's, so t0 is a view made
    # after x0's last bump (Note [Storage Swaps By Rebinding])
    def f(x0: T) -> object:
        x0.add_(x0)
        t0 = x0.reshape((2, -1, 4))
        t1 = x0.add(3.0)
        set_to(t1, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 4, requires_grad=True),), compile_fn=compile_fn)
