"""Fuzz regressions: a subclass input that is a view of another input, whose base the program set_() to a layout
the view's ops do not apply to (Note [Subclass Views Whose History Cannot Be Rebuilt], Note [Backward View Replays
That Raise]); found from fuzz seed 47000 #3046."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor

VIEWS: dict[str, Callable[[T], T]] = {
    "transpose": lambda b: b.transpose(1, 2),
    "select": lambda b: b.select(2, 3),
    "unsqueeze": lambda b: b.unsqueeze(3),
    "diagonal": lambda b: b.diagonal(0, 1, 2),
}


def _inputs(
    view: Callable[[T], T] = VIEWS["transpose"], shape: tuple[int, ...] = (2, 2), subclass: bool = True
) -> Callable[[], tuple[object, ...]]:
    """(a view of b, another tensor of `shape`, b), b a non-leaf (1, 3, 4) that requires grad."""

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1, 3, 4) if subclass else nonleaf(1, 3, 4)
        b1 = pair(*shape) if subclass else torch.randn(shape)
        return (view(b0), b1, b0)

    return make_inputs


def _write_view_then_set(x0: T, x1: T, x2: T) -> object:
    x0.mul_(3.0)
    set_to(x2, x1)
    return ()


# fuzz seed 47000 #3046 (shrunk): x0's grad_fn, rebuilt from x2 after the set_(), raises IndexError in eager and
# after the compiled call alike; it crashed the compile (reading it for a tangent).
def test_seed47000_3046_view_written_then_base_set(compile_fn: CompileFn | None) -> None:
    check_with_grad(_write_view_then_set, _inputs(), compile_fn)


# fuzz seed 47000 #3046, variants: other view ops and sizes set_() to, the view returned, the write through the
# base or both, and the plain counterpart (eager rebuilds a plain view by as_strided(): no error).
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("shape", [(2, 2), (4,), (), (2, 1, 2)])
def test_seed47000_3046_view_ops_and_sizes(view: str, shape: tuple[int, ...], compile_fn: CompileFn | None) -> None:
    check_with_grad(_write_view_then_set, _inputs(VIEWS[view], shape), compile_fn)


def test_seed47000_3046_view_returned(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(3.0)
        set_to(x2, x1)
        return (x0, x2)

    check_with_grad(f, _inputs(), compile_fn)


def test_seed47000_3046_written_through_base_and_view(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x2.add_(1.0)
        x0.mul_(2.0)
        set_to(x2, x1)
        return (x0,)

    check_with_grad(f, _inputs(VIEWS["select"]), compile_fn)


def test_seed47000_3046_output_computed_before_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(3.0)
        t1 = x0.mul(2.0)  # saves no x0: its backward rebuilds no history
        set_to(x2, x1)
        return (t1,)

    check_with_grad(f, _inputs(), compile_fn)


@pytest.mark.parametrize("subclass", [True, False])
def test_seed47000_3046_no_grad_and_plain(subclass: bool, compile_fn: CompileFn | None) -> None:
    check_no_grad(_write_view_then_set, _inputs(subclass=subclass), compile_fn)
    check_with_grad(_write_view_then_set, _inputs(subclass=subclass), compile_fn)


# fuzz seed 47000 #3046 (unshrunk): t1's backward unpacks x0, saved by the mul, and rebuilds its history from x2 as
# set_() left it: eager's backward raises IndexError, which is not deferred (Note [Backward View Replays That Raise]).
def test_seed47000_3046_backward_rebuilds_view_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(3.0)
        t0 = x0.mul(0.5)
        t1 = x0.mul(t0)
        x1.mul(2.0)
        set_to(x2, x1)
        return (t1,)

    refused_with_grad(f, _inputs(), compile_fn, r"args\[0\] \(a view of args\[2\]\).*Backward View Replays That Raise")
