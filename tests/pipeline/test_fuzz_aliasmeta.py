"""Fuzz follow-ups: alias groups in training whose members' metadata the program changes (Note [Metadata Changes Of
Grad-Free Members], Note [Metadata Changes Of Aliased Inputs In Training])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager

T = torch.Tensor

_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"


def nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone()


def assert_refused(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None, match: str
) -> None:
    """The pipeline raises UnsupportedError naming the rule; eager against eager (--identity-compile), the program
    must pass the oracle (it is eager-legal)."""
    if compile_fn is not None:
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        return
    with pytest.raises(UnsupportedError, match=match):
        subclassaot.compile(f)(*make_inputs())


def test_detached_member_changed_under_no_grad_beside_written_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #122: the member that requires grad is written and returned, its detached alias unsqueeze_()d
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(2)
        x0.add_(3.0)
        with torch.no_grad():
            x1.unsqueeze_(-2)
        t0.add_(t0)
        return x1[:, :, 1:3], x0.sin(), t0

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4, 4)
        return (b0.t(), b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_member_transposed_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #7299, seed 5000 #8148: t_() with grad on of a detached alias of a leaf that requires grad
    def f(x0: T, x1: T) -> object:
        t0 = x1[:, 1:2]
        x1.t_()
        return x1, t0, x0 * 2, x0.t()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(3, 2, requires_grad=True)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_member_that_requires_grad_changed_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # The lifted sub-case needs the changed member to be grad-free: a changed member that requires grad (here a
    # view of a non-leaf, written beside) keeps the refusal.
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        x0.mul_(2.0)
        return x0 * 2, x1

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 2)
        return (b0, b0[0:2])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)
