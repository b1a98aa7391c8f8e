"""Fuzz regressions (helper r14b): subclass views of an input whose wrapper the program set_() to an intermediate
under no_grad, returned in training (Note [Subclass Views Of Intermediates In Training]), fuzz seed 14000 #2383 and
variants. Eager's output stays a view of the input (its `._base`), with the view chain's history; it was rebuilt
as a view of a fresh tensor instead."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, check_no_grad, check_with_grad, pair, pair_nonleaf

T = torch.Tensor


def _pair_leaf_and_view(*shape: int, transposed: bool = True) -> Callable[[], tuple[T, T]]:
    def make() -> tuple[T, T]:
        b0 = pair(*shape, requires_grad=True)
        with torch.enable_grad():
            return (b0.t() if transposed else b0.view(shape), b0)

    return make


def test_view_of_a_view_input_set_to_an_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 14000 #2383 (shrunk): t2 is a view of args[1] (x0's `._base`) in eager; ours was a view of a fresh
    # tensor ("output[0]._base: a view of output[0]._base vs eager a view of args[1]")
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(-2)
        t1 = t0.contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


@pytest.mark.parametrize("transposed", [True, False])
def test_view_chain_of_an_input_set_to_an_intermediate(compile_fn: CompileFn | None, transposed: bool) -> None:
    # two views of the leaf input, set_() to a product; a value read from the output too
    def f(x0: T, x1: T) -> object:
        t1 = x0 * 2.0
        t2 = x1.t().unsqueeze(0)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2, t2.sum())

    check_with_grad(f, _pair_leaf_and_view(4, 4, transposed=transposed), compile_fn)


def test_slice_set_to_a_flat_intermediate_then_read(compile_fn: CompileFn | None) -> None:
    # a slice set_() to a reshaped intermediate, read with grad after and returned
    def f(x0: T, x1: T) -> object:
        t1 = (x0 + 1.0).reshape(-1)
        t2 = x0[1:]
        with torch.no_grad():
            set_to(t2, t1)
        return (t2 * 3.0, t2)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_view_set_to_an_intermediate_without_history(compile_fn: CompileFn | None) -> None:
    # the intermediate has no history (a clone of a detach); the output still has the view chain's
    def f(x0: T, x1: T) -> object:
        t1 = x0.detach().clone()
        t2 = x0.view(4, 4)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_view_set_to_an_intermediate_called_under_no_grad(compile_fn: CompileFn | None) -> None:
    # the whole call under no_grad: eager's output still views the input that requires grad
    def f(x0: T, x1: T) -> object:
        t1 = x0.unsqueeze(-2).contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_no_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_output_is_still_a_view_of_the_input(compile_fn: CompileFn | None) -> None:
    # the fix itself, checked directly: `._base` is the leaf input and the history is the view chain's
    def f(x0: T, x1: T) -> T:
        t1 = x0.unsqueeze(-2).contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return t2

    run = f if compile_fn is not None else subclassaot.compile(f)
    x0, x1 = _pair_leaf_and_view(4, 4)()
    with torch.enable_grad():
        t2 = run(x0, x1)
    assert isinstance(t2, PairTensor) and t2._base is x1
    assert t2.shape == (4, 1, 4) and type(t2.grad_fn).__name__ == "ViewBackward0"


@pytest.mark.parametrize("grad", [True, False])
def test_view_of_a_view_set_to_an_intermediate_is_refused(compile_fn: CompileFn | None, grad: bool) -> None:
    # a view taken of the set_() view: its chain cannot be replayed, and the fallback made it a view of a fresh
    # tensor where eager's `._base` is the input (Note [Subclass Views Of Intermediates In Training])
    def f(x0: T, x1: T) -> object:
        t1 = x0.exp()
        t2 = x1.view(16)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2.view(-1),)

    with torch.set_grad_enabled(grad):
        rule = r"could not be a view of it \(Note \[Subclass Views Of Intermediates In Training\]\)"
        assert_refused(f, _pair_leaf_and_view(4, 4, transposed=False), compile_fn, rule)


@pytest.mark.parametrize("grad", [True, False])
def test_views_of_input_views_set_under_grad(compile_fn: CompileFn | None, grad: bool) -> None:
    # set_() with grad on (the call under grad or not): replayed from the input, then set_(), as fuzz seed 42000
    # #4220 (refused before, tests/pipeline/test_fuzz_setgrad8.py)
    def g(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        set_to(t0, x0.exp())
        return (t0, t0.sum())

    def h(x0: T) -> object:
        t0 = x0.t()
        set_to(t0, (x0 * 3.0).reshape(-1))
        return (t0,)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(g, lambda: (pair_nonleaf(3, 4).t(),), compile_fn=compile_fn)
        assert_matches_eager(h, lambda: (pair_nonleaf(4, 4)[1:],), compile_fn=compile_fn)
