"""Fuzz regressions of helper n5952: a no_grad view of a detach() whose base the program then wrote with a value that
requires grad, replayed after the epilogue (fuzz seed 16000 #5952, diverged). Eager's view requires grad through its
`._base` and its grad_fn raises autograd's view-after-write error; ours came back without requires_grad, as the
replayed `._base` was given requires_grad only for views rebuilt before the epilogue. The runtime's bump of the
view's counter after the replay (Replay.bump_after) makes ours raise too (Note [Views Of A Detach That Gained
Grad])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, pair, pair_nonleaf, twice

T = torch.Tensor

_MAKERS: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(4),
    "nonleaf": lambda: nonleaf(4),
    "pair": lambda: pair(4, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(4),
}
_KINDS = sorted(_MAKERS)


def _seed_16000_5952(x0: T, x1: T, x2: T) -> object:
    # fuzz seed 16000 #5952 as generated: x0, x1 and x2 are one tensor
    with torch.no_grad():
        x1.t_()
    t0 = x2.detach()
    with torch.no_grad():
        x1.zero_()
        t1 = t0.view((4, 1, 1))
    t0.mul_(x2)
    return (x1, t1, x2)


@pytest.mark.parametrize("kind", _KINDS)
def test_seed_16000_5952(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952 (generated with a PairTensor leaf; plain and non-leaf inputs behave the same)
    def make_inputs() -> tuple[object, ...]:
        x = _MAKERS[kind]()
        return (x, x, x)

    check_with_grad(_seed_16000_5952, make_inputs, compile_fn)


def _shrunk(x: T) -> object:
    # the t_() under no_grad makes the view replay after the epilogue; without it, it replays before (as tested in
    # test_fuzz_nogradreq.py)
    with torch.no_grad():
        x.t_()
    t0 = x.detach()
    with torch.no_grad():
        t1 = t0.view((4, 1, 1))
    t0.mul_(x)
    return (t1,)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_after_in_place_view_op(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952, shrunk
    check_with_grad(_shrunk, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_after_in_place_view_op_no_grad(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952, shrunk, under no_grad: nothing gains grad
    check_no_grad(_shrunk, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_without_t(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952 without the t_(): replayed before the epilogue (passed before)
    def f(x0: T, x1: T) -> object:
        t0 = x1.detach()
        with torch.no_grad():
            x0.zero_()
            t1 = t0.view((4, 1, 1))
        t0.mul_(x1)
        return (x0, t1, x1)

    check_with_grad(f, twice(_MAKERS[kind]), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "pair_nonleaf"])
def test_no_grad_view_of_detach_of_other_input_after_unsqueeze(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: another in-place view op, and two views of the detach, a view of a view, and an
    # output computed from the input
    def f(x: T) -> object:
        with torch.no_grad():
            x.unsqueeze_(0)
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
            t2 = t0.unsqueeze(0)
        t3 = t1.squeeze(-1)
        t0.mul_(x)
        return (t1, t2, t3, x.sin())

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["nonleaf", "pair"])
def test_no_grad_views_of_detach_written_through_a_slice(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: the write reaches the detach through a view of it, the view taken by unbind()
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0[1:]
        a, _ = t0.view(2, 2).unbind(0)
        t0[:2].mul_(x[:2])
        return (t1, a)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "pair"])
def test_no_grad_view_of_detach_copied_with_grad_after_data_write(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a data write and a t_() of the input under no_grad, the detach written by copy_
    def f(x: T) -> object:
        with torch.no_grad():
            x.mul_(2)
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.copy_(x)
        return (t1,)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["nonleaf", "pair"])
def test_no_grad_view_of_detach_of_other_input(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: the detach of one input written with the other
    def f(x: T, y: T) -> object:
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(x)
        return (t1,)

    check_with_grad(f, lambda: (_MAKERS[kind](), _MAKERS[kind]()), compile_fn)


@pytest.mark.parametrize("kind", ["pair", "pair_nonleaf"])
def test_no_grad_view_of_detach_of_subclass_intermediate(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a subclass intermediate's detach, its view replayed from the intermediate
    def f(x: T) -> object:
        y = x * 2
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(x)
        return (t1, y)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


def test_no_grad_view_of_detach_written_without_grad(compile_fn: CompileFn | None) -> None:
    # beside fuzz seed 16000 #5952: a write without grad leaves the detach and its view without requires_grad
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(2.0)
        return (t1, t0)

    check_with_grad(f, lambda: (nonleaf(4),), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "nonleaf", "pair_nonleaf"])
def test_views_of_no_grad_view_of_detach_on_square_input(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a t_() that moves the layout, a view of the no_grad view taken with grad before
    # the write, both returned (the `._base` gains requires_grad only once both are built)
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0[0]
        t2 = t1.unsqueeze(0)
        t0.add_(x * 2)
        return (t2, t1, x * 3)

    makers: dict[str, Callable[[], T]] = {
        "leaf": lambda: leaf(3, 3),
        "nonleaf": lambda: nonleaf(3, 3),
        "pair_nonleaf": lambda: pair_nonleaf(3, 3),
    }
    check_with_grad(f, lambda: (makers[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["pair", "pair_nonleaf"])
def test_views_of_no_grad_view_of_detach_of_subclass_intermediate(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a view taken with grad of the no_grad view, before the write
    def f(x: T) -> object:
        y = x * 2
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t3 = t1.squeeze(-1)
        t0.mul_(x)
        return (t1, t3)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)
