"""Fuzz regressions of helper r3crash: a view op replayed on a layout other than the one the program took it on
(after t_(), unsqueeze_(), set_() or `.data =`), which crashed the functional run (fuzz seed 8000 #4353, #6029,
#6268, #6485). Each is refused, naming the input and the rule (Note [Stale View Functions])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair_nonleaf

T = torch.Tensor

_STALE = r"args\[0\] and args\[1\]: the program changes the layout .*\(Note \[Stale View Functions\]"
_FAILS = r"args\[0\]: a view taken with grad enabled is used with grad after .* by set_\(\) .* does not apply"


def _two_views(*shape: int) -> Callable[[], tuple[object, ...]]:
    """Two views of one base: the same object passed twice runs as its own base in the joint trace, whose view
    functions are exact (Note [Aliased Inputs In Training]; test_fuzz_gradtype.py)."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(*shape)
        return (b0.view(shape), b0.view(shape))

    return make_inputs


def _unsqueeze_transpose_write(x0: T, x1: T) -> object:
    x0.unsqueeze_(-2)
    t0 = x0.transpose(0, 2)
    t0.mul_(t0)
    return ()


def _t_expand_write_other(x0: T, x1: T) -> object:
    x0.t_()
    t0 = x0.expand((4, 1))
    x1.mul_(0.5)
    t0.transpose(0, 1)
    return ()


def test_stale_view_function_replay_fails_refused_4353(compile_fn: CompileFn | None) -> None:
    # seed 8000 #4353: autograd rebuilt t0's history by the synthetic base's view function, which misses
    # unsqueeze_(): transpose(0, 2) of a 2-d tensor (IndexError); there one object passed twice, which now passes
    # (test_fuzz_gradtype.py), here two views of one base
    with torch.enable_grad():
        assert_refused(_unsqueeze_transpose_write, _two_views(1, 2), compile_fn, _STALE)


def test_stale_view_function_replay_fails_refused_6029(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6029: the same, the function missing t_(): expand((4, 1)) of a (1, 4) tensor (RuntimeError)
    with torch.enable_grad():
        assert_refused(_t_expand_write_other, _two_views(1, 4), compile_fn, _STALE)


def _select_data_write(x0: T) -> object:
    t0 = x0.select(0, -4)
    x0.data = t0
    t0.mul_(0.5)
    return ()


def test_select_of_data_assigned_0d_refused_6268(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6268: the check of views used after an in-place view op replayed select() on the 0-d layout
    # `.data =` gave x0 (IndexError); the program is refused by the rule on writes and `.data =` of another size
    with torch.enable_grad():
        assert_refused(
            _select_data_write,
            lambda: (pair_nonleaf(4),),
            compile_fn,
            r"args\[0\]: the program writes this input where autograd records it and assigns its `\.data`",
        )


def _t_then_set_3d(x0: T) -> object:
    t0 = x0.reshape((1, 1, 4))
    t1 = x0.t()
    with torch.no_grad():
        set_to(x0, t0)
    t1.reshape((1, 1, 4))
    return ()


@pytest.mark.parametrize("make", [lambda: (pair_nonleaf(4).t(),), lambda: (nonleaf(4),)], ids=["pair", "plain"])
def test_view_replay_fails_after_no_grad_set_refused_6485(
    make: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    # seed 8000 #6485 (pair): x0.set_() under no_grad bumps the version, and autograd rebuilt t1's history by
    # replaying t() on x0's new 3-d layout (RuntimeError); eager's as_strided() does not replay it
    with torch.enable_grad():
        assert_refused(_t_then_set_3d, make, compile_fn, _FAILS)


def _t_then_no_grad_t_(x0: T) -> object:
    t1 = x0.t()
    with torch.no_grad():
        x0.t_()
    return (t1 * 2,)


def test_view_replayed_after_no_grad_t_still_supported(compile_fn: CompileFn | None) -> None:
    # The replay of t() applies to the new layout: an in-place view op under no_grad is not refused for it
    with torch.enable_grad():
        assert_matches_eager(_t_then_no_grad_t_, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
