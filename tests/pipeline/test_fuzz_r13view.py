"""Fuzz regressions: chains of views through an intermediate that in-place view ops changed before any view was taken
from it share that one object (Note [Views Sharing An Intermediate]); each program is a shrunk fuzz program (seed and
index in the test's name) or a variant of one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf

T = torch.Tensor


def test_seed13000_6810_no_grad_view_of_a_transposed_view(compile_fn: CompileFn | None) -> None:
    # the returned t0 was replayed again after the no_grad view t1: its t_() advanced the input's counter a second
    # time, after t1 was made, so t1's grad_fn raised
    def f(x0: T) -> object:
        t0 = x0.expand(())
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return (t0, t1)

    assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def _changed_then_viewed(op: Callable[[T], object]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        op(t0)
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return t0, t1, t0.select(0, 0)

    return f


_OPS: dict[str, Callable[[T], object]] = {
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "twice": lambda t: (t.t_(), t.unsqueeze_(1)),
}


@pytest.mark.parametrize("op", sorted(_OPS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_of_a_view_changed_in_place_first(op: str, kind: str, compile_fn: CompileFn | None) -> None:
    make = nonleaf if kind == "plain" else pair_nonleaf
    assert_matches_eager(_changed_then_viewed(_OPS[op]), lambda: (make(2, 3),), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_of_a_view_changed_in_place_first_no_grad(kind: str, compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3) if kind == "plain" else pair(2, 3),)

    with torch.no_grad():
        assert_matches_eager(_changed_then_viewed(_OPS["t_"]), make_inputs, compile_fn=compile_fn)


def test_view_taken_before_the_in_place_view_op_stays_apart(compile_fn: CompileFn | None) -> None:
    # a's chain passes through t0 as it was before t_(); the chains through t0 after it still share it
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        a = t0.select(0, 0)
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return t0, t1, a

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
    assert_matches_eager(f, lambda: (pair_nonleaf(2, 3),), compile_fn=compile_fn)


def test_views_of_a_transposed_view_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        t0.add_(1)
        return t0, t1

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)


def test_views_of_a_detach_transposed_in_place_first(compile_fn: CompileFn | None) -> None:
    # eager's outputs share one `._base`, t0
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.t_()
        return t0.select(0, 0), t0.unsqueeze(0)

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
