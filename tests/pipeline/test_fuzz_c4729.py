"""Fuzz regressions of helper c4729: outputs viewed from a no_grad view that the program then changed in place.

Fuzz seed 15000 #4729 (crashed): t2 viewed t1 under grad before `t1.t_()`, which left a 1-D t1's metadata as it was;
the replay viewed the returned t1 after its t_(), which raises for a view made under no_grad. Now a view replays from
an earlier output only where no in-place view op changed it since (view_chains._changed_since). Fuzz seed 45000
#8651 (crashed): the output set_() after its view of an earlier no_grad output, whose version counter the program
then advanced, is refused (a plain input already was, by Note [Views Of Intermediates Written After])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, pair, refused_with_grad

T = torch.Tensor


def _transposed_after_view(x0: T) -> object:
    # seed 15000 #4729, shrunk
    t0 = x0.add(3.0)
    with torch.no_grad():
        t1 = t0.expand(x0.shape)
    t2 = t1.transpose(0, 0)
    with torch.no_grad():
        t1.t_()
    return (t2, t1)


def _transposed_after_view_all_grad(x0: T) -> object:
    t0 = x0.add(3.0)
    t1 = t0.expand(x0.shape)
    t2 = t1.transpose(0, -1)
    t1.t_()
    return (t2, t1)


def _viewed_then_set(x0: T) -> object:
    # seed 45000 #8651, shrunk
    with torch.no_grad():
        t0 = x0.view((32, 1))
    t1 = t0.view((1, 32))
    t2 = x0.view((4, 8))
    with torch.no_grad():
        set_to(t1, t2)
    return (t0, t1)


def _viewed_under_no_grad_then_set(x0: T) -> object:
    with torch.no_grad():
        t0 = x0.view((32, 1))
        t1 = t0.view((1, 32))
    t2 = x0.view((4, 8))
    with torch.no_grad():
        set_to(t1, t2)
    return (t0, t1)


def _inputs(make: Callable[..., T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        if make is pair:
            return (pair(*shape, requires_grad=True),)
        return (make(*shape),)

    return make_inputs


@pytest.mark.parametrize("make", [pair, leaf], ids=["pair", "plain"])
@pytest.mark.parametrize("shape", [(4,), (4, 3)], ids=["1d", "2d"])
@pytest.mark.parametrize("fn", [_transposed_after_view, _transposed_after_view_all_grad])
def test_view_of_output_changed_in_place_after(
    fn: Callable[[T], object], shape: tuple[int, ...], make: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    check_with_grad(fn, _inputs(make, *shape), compile_fn)
    check_no_grad(fn, _inputs(make, *shape), compile_fn)


def test_set_view_of_no_grad_output_refused(compile_fn: CompileFn | None) -> None:
    make_inputs = _inputs(pair, 2, 4, 4)
    refused_with_grad(_viewed_then_set, make_inputs, compile_fn, r"out\[0\] is a view made under no_grad")
    check_no_grad(_viewed_then_set, make_inputs, compile_fn)


def test_set_view_taken_under_no_grad(compile_fn: CompileFn | None) -> None:
    check_with_grad(_viewed_under_no_grad_then_set, _inputs(pair, 2, 4, 4), compile_fn)
    check_no_grad(_viewed_under_no_grad_then_set, _inputs(pair, 2, 4, 4), compile_fn)
