"""Fuzz regressions of helper r14c: a view of a tensor whose `.data` the program then assigned to a layout the view
op does not apply to, read with grad after a write moved their version (fuzz seed 14000 #8176). Autograd rebuilds
the view's history by replaying the view op on the assigned tensor, which raised in the functional run where eager's
as_strided() does not: refused where the read fails, naming the input and the rule (Note [Stale View Functions]). Where
no write follows, or the replay applies, the program stays supported."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, check_no_grad, check_with_grad, nonleaf, pair_nonleaf

T = torch.Tensor

_REPLAY_FAILS = (
    r"args\[0\]: a view taken with grad enabled is used with grad after the program assigned `\.data` of the tensor "
    r"it is a view of .*IndexError: select\(\) cannot be applied to a 0-dim tensor"
)


def _select_assign_write_view(x0: T) -> object:
    t0 = x0.select(0, -2)
    x0.data = t0
    x0.mul_(x0)
    t0.view(())
    return ()


def _select_assign_no_grad_write(x0: T) -> object:
    t0 = x0.select(0, -2)
    x0.data = t0
    with torch.no_grad():
        x0.mul_(2.0)
    return (t0.view(()) * 2,)


def _view_of_view_read_after_write(x0: T) -> object:
    t0 = x0.select(0, -2)
    x0.data = t0
    t1 = t0.view(())
    x0.mul_(x0)
    return (t1 * 2,)


@pytest.mark.parametrize("f", [_select_assign_write_view, _select_assign_no_grad_write, _view_of_view_read_after_write])
def test_view_replay_fails_after_data_assignment_refused_8176(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # seed 14000 #8176 (shrunk: the first): x0.mul_() bumps the version t0 shares, so autograd rebuilt t0's history
    # by replaying select(0, -2) on x0, `.data =`-assigned 0-d (IndexError); eager's as_strided() applies. The write
    # under no_grad bumps it all the same; a view of t0 taken before the write reads the same rebuilt history.
    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(2),), compile_fn, _REPLAY_FAILS)


def _select_assign_read(x0: T) -> object:
    t0 = x0.select(0, -2)
    x0.data = t0
    return (t0.view(()) * 2, x0 + 1)


def test_view_read_after_data_assignment_without_write_supported(compile_fn: CompileFn | None) -> None:
    # `.data =` bumps no version: with no write after it autograd keeps t0's history, and nothing is replayed
    check_with_grad(_select_assign_read, lambda: (nonleaf(2),), compile_fn)
    check_with_grad(_select_assign_read, lambda: (nonleaf(3),), compile_fn)


@pytest.mark.parametrize("f", [_select_assign_no_grad_write, _select_assign_write_view])
def test_view_after_data_assignment_and_write_under_no_grad_supported(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # the whole program under no_grad: no history, nothing replayed
    check_no_grad(f, lambda: (nonleaf(2),), compile_fn)


def test_subclass_view_after_data_assignment_and_write_supported(compile_fn: CompileFn | None) -> None:
    # a PairTensor: `.data =` assigns the wrapper's metadata (Note [Wrapper Data Assignment]), and its views are
    # rebuilt from view functions in eager too
    with torch.enable_grad():
        assert_matches_eager(_select_assign_no_grad_write, lambda: (pair_nonleaf(2),), compile_fn=compile_fn)


def _slice_assign_no_grad_write(x0: T) -> object:
    t0 = x0[1:3]
    x0.data = x0[2:]
    with torch.no_grad():
        x0.mul_(2.0)
    return (t0 * 2,)


def test_view_replay_that_applies_after_data_assignment_supported(compile_fn: CompileFn | None) -> None:
    # the replayed slice applies to x0's new layout: nothing fails, nothing is refused
    check_with_grad(_slice_assign_no_grad_write, lambda: (nonleaf(4),), compile_fn)
