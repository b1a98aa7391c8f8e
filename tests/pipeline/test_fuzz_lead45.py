"""Fuzz regressions (seed 45000, lead): views whose `._base` was set_() after the view was taken from it.

With `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def test_view_of_detach_set_to_the_view_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #1194: eager's t2._base is t1 (a detach() is no view), set_() to t2 after, so of shape (1,);
    # the chain was replayed from t0 and gave a `._base` of shape (). A subclass chain with an op on its `._base`
    # after the view that no step replays is not exact; the wrapper t1 cannot be rebuilt (its leaves are views of
    # t0's), so it is refused.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.detach()
        t2 = t1.view((1,))
        set_to(t1, t2)
        return (t2,)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_refused(
                f, lambda: (pair(),), compile_fn, r"out\[0\] is a view of a tensor subclass whose view chain"
            )
            assert_matches_eager(f, lambda: (torch.randn(()),), compile_fn=compile_fn)
    # the program's input requires grad (the fuzzed one): the set_() runs with grad enabled but autograd records
    # nothing (neither t1 nor t2 requires grad); it was built as no view
    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(),), compile_fn, r"out\[0\] is a view of a tensor subclass whose")
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def test_plain_view_of_output_set_after_the_view_is_refused(compile_fn: CompileFn | None) -> None:
    # found beside seed 45000 #1194: eager's out[0]._base is out[1], set_() to out[0] after the view; ours was a
    # view of args[0] (wrong). Refused; returning only the view, or a base set_() before, is supported.
    def returned(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.view((1, 1, 1))
        set_to(t0, t1)
        return (t1, t0)

    def only_view(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.view((1, 1, 1))
        set_to(t0, t1)
        return (t1,)

    def detached(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.reshape((1, 1, 1))
        set_to(t0, t1)
        return (t1,)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_refused(
                returned,
                lambda: (torch.randn(()),),
                compile_fn,
                r"out\[0\] is a view of another output that the program set_\(\)",
            )
            for fn in (only_view, detached):
                assert_matches_eager(fn, lambda: (torch.randn(()),), compile_fn=compile_fn)
                assert_matches_eager(fn, lambda: (pair(),), compile_fn=compile_fn)
            assert_matches_eager(returned, lambda: (pair(),), compile_fn=compile_fn)


def _expanded_and_base() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((1, 4, 1), requires_grad=True).clone()
        return (b0.expand((1, 4, 2)), b0)


def test_empty_write_through_an_expand_is_refused_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #6667: the empty write was traced, and the compiled backward raised "more than one element of
    # the written-to tensor refers to a single memory location" where eager's ran (Note [Writes Through Overlapping
    # Memory]); under no_grad it passes, and so does a write that is not empty
    def f(x0: T, x1: T) -> object:
        t0 = x0[1:1:1]
        t0.zero_()
        return (t0,)

    def whole(x0: T, x1: T) -> object:
        t0 = x0[0:1]
        t0.zero_()
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f,
            _expanded_and_base,
            compile_fn,
            r"aten.zero_.default: an in-place write with grad into a view with no elements",
        )
        assert_matches_eager(whole, _expanded_and_base, compile_fn=compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, _expanded_and_base, compile_fn=compile_fn)
