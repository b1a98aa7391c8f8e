"""Fuzz follow-ups (round 3, refusal classes): outputs made by multi-output view ops (unbind, split, chunk) of an
input whose base the program writes through another input (Note [No-Grad Views Made After The Bump])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _leaf_and_view(make: Callable[..., T], view: Callable[[T], T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = make(*shape)
            if not b0.requires_grad:
                b0.requires_grad_()
            return (b0, view(b0))

    return make_inputs


def _pair_leaf(*shape: int) -> T:
    return pair(*shape, requires_grad=True)


def _plain_leaf(*shape: int) -> T:
    return torch.randn(shape, requires_grad=True)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_after_no_grad_write_through_view_input(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4454: the base is advanced through the other input before the unbind was taken
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.add_(-1.0)
        t0 = x1.unbind(0)[0]
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b.view(1, 3, 1), 3), compile_fn=compile_fn)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_of_base_after_write_through_empty_view(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8006
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.add_(3.0)
        t0 = x0.unbind(0)[2]
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b[:, 1:1:1], 3, 3), compile_fn=compile_fn)


@pytest.mark.parametrize("make", [pair_nonleaf, nonleaf], ids=["pair", "plain"])
def test_split_chunk_after_grad_writes_through_other_input(
    make: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # Variants: writes with grad through the other input, several views of one op, then views of those.
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        x0[1].add_(1.0)
        a, b = torch.split(x0, 2, 0)
        c = x1.chunk(2, 1)[1]
        return a.t(), b, c.unsqueeze(0), (a * 2).sum()

    def make_inputs() -> tuple[object, ...]:
        b0 = make(4, 4)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_before_write_through_other_input(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # The write comes after the unbind: eager's view raises when autograd reads it, and so does ours (rebuilt
    # before the epilogue writes the base, Replay.before_epilogue).
    def f(x0: T, x1: T) -> object:
        t0 = x1.unbind(0)[0]
        with torch.no_grad():
            x0.add_(1.0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b.view(1, 3, 1), 3), compile_fn=compile_fn)
