"""Fuzz regressions: a view of a subclass input taken before an in-place view op changed the input, viewed again
under no_grad after it (fuzz seed 3001 #2001). See Note [No-Grad Views Made After The Bump]."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf

T = torch.Tensor


MAKERS: dict[str, Callable[[], T]] = {
    "plain": lambda: nonleaf(4, 1),
    "pair": lambda: pair_nonleaf(4, 1),
    "pair_no_grad": lambda: pair(4, 1),
    "pair_leaf": lambda: pair(4, 1, requires_grad=True),
}


def _run(f: Callable[..., object], kind: str, inference: bool, compile_fn: CompileFn | None) -> None:
    make = MAKERS[kind]
    with torch.no_grad() if inference else torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn)


def test_seed3001_program2001(compile_fn: CompileFn | None) -> None:
    # seed 3001 #2001 (inference): t1 was replayed before the epilogue, whose unsqueeze_() on the wrapper then moved
    # x0's version counter, and reading t1.is_leaf raised "A view was created in no_grad mode ...".
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        return (t1,)

    _run(f, "pair", True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("inference", [True, False])
def test_no_grad_views_after_bump(compile_fn: CompileFn | None, kind: str, inference: bool) -> None:
    # two views after the bump, in a no_grad block (the program itself may run with grad)
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.select(1, 0)
            x0.unsqueeze_(-2)
            t1 = t0.view((2, 2)).t()
        return (t1, x0 * 2)

    if kind == "pair_leaf" and not inference:
        pytest.skip("eager raises: an in-place view op on a view of a leaf that requires grad")
    _run(f, kind, inference, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_no_grad_view_between_bumps(compile_fn: CompileFn | None, kind: str) -> None:
    # t1 is made between two bumps: stale in eager too (its is_leaf raises on both sides), so it stays early
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        x0.squeeze_(-3)
        t2 = t0.view((2, 2))
        return (t1, t2)

    _run(f, kind, True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_no_grad_view_after_bump_not_returned(compile_fn: CompileFn | None, kind: str) -> None:
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        return (t1 + 1, t0)

    _run(f, kind, True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_multi_output_view_after_bump(compile_fn: CompileFn | None, kind: str) -> None:
    # the late step is one view of an op returning several (unbind)
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((2, 2)).unbind(0)[1]
        return (t1,)

    _run(f, kind, True, compile_fn)
