"""Fuzz regressions (seed 12000): outputs' `._base` and requires_grad (helper base12).

Newly supported programs get a parity test; refusals get a test naming the rule. With `--identity-compile` (eager
against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair
from tests.pipeline.fuzz_helpers import check_with_grad as _check

T = torch.Tensor


def _unbound_pair_view() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = pair(2, 3, 3, requires_grad=True)
        return (b0.unbind(1)[1],)


# ---------------------------------------------------------------------------------------------------------------
# Views of an intermediate subclass whose `.data` was assigned after (Note [Views Of A Root Whose .data Was Assigned])


def test_no_grad_view_of_root_whose_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #4677: the output was computed as a fresh view (`._base` of shape (3, 2), no grad)
    def f(x0: T) -> object:
        t0 = x0.add(0.5)
        t1 = t0.expand((2, 3))
        t0.data = x0
        with torch.no_grad():
            t2 = t1.t()
        return (t2,)

    _check(f, _unbound_pair_view, compile_fn)


def test_views_of_root_whose_data_was_assigned_inference(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(0.5)
        t1 = t0.expand((2, 3))
        t0.data = x0
        return (t1.t(), t1)

    with torch.no_grad():
        assert_matches_eager(f, _unbound_pair_view, compile_fn=compile_fn)


def test_views_of_root_before_and_after_its_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # the first view replays from the root with its metadata before `.data =`, the second with it after
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.t()
        t0.data = x0
        t3 = t0.t()
        return (t1, t3.unsqueeze(0))

    _check(f, _unbound_pair_view, compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, _unbound_pair_view, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A subclass view of another output that the program set_() after taking the view


def test_view_of_output_set_after_the_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #5902: eager's out[1]._base is out[0]; the replayed view's `._base` was a detach of its own.
    # PairTensor: rebuilt as a view of out[0] set_() to its leaves (Note [Subclass Views Rebuilt By set_]) since the
    # chain is no longer taken as exact (an op on its `._base` after the view no step replays: seed 45000 #1194);
    # a plain tensor: refused
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.reshape((1, 1, 1))
        set_to(t0, t1)
        return (t0, t1)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, lambda: (pair(),), compile_fn=compile_fn)
            assert_refused(
                f,
                lambda: (torch.randn(()),),
                compile_fn,
                r"out\[1\] is a view of another output that the program set_\(\)",
            )
