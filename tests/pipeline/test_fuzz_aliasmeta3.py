"""Fuzz follow-ups (round 7): subclass alias groups whose members that need no gradient change their layout (Note
[Metadata Changes Of Grad-Free Subclass Members])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, pair, pair_nonleaf

T = torch.Tensor

_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"


def test_detached_subclass_member_changed_beside_one_object_transposed(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #9327: a detached alias unsqueeze_()d (no_grad and grad) and written; the object behind it,
    # passed twice, written below autograd and t_()d with grad, is returned
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            x1.unsqueeze_(0)
        x1.unsqueeze_(0)
        x0.data.copy_(t0)
        x1.mul_(-1.0)
        x2.t_()
        return (x2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf()
        return (b0, b0.detach(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad_mode", [False, True])
@pytest.mark.parametrize("write", ["none", "detached", "member"])
def test_detached_subclass_member_changed_beside_written_member(
    compile_fn: CompileFn | None, grad_mode: bool, write: str
) -> None:
    # The detached member's layout changes; the member that requires grad keeps its layout, is written or not, and
    # is read after the change
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.set_grad_enabled(grad_mode):
            x1.transpose_(0, 1)
        if write == "detached":
            x1.mul_(3.0)
        elif write == "member":
            x0.add_(t0)
        return x0.sin(), t0, x1 * 2, x0

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2, 3)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad_mode", [False, True])
def test_detached_subclass_member_changed_beside_transposed_member(
    compile_fn: CompileFn | None, grad_mode: bool
) -> None:
    # Both change their layout: the member that requires grad by t_() with grad enabled (one object: Note [Subclass
    # Inputs Passed Twice In Training]), not written: a value computed before the change is returned
    def f(x0: T, x1: T) -> object:
        v = x0[0] * 2
        with torch.set_grad_enabled(grad_mode):
            x1.unsqueeze_(1)
        x0.t_()
        return v, x0.cos(), x1

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_subclass_member_changed_beside_leaf(compile_fn: CompileFn | None) -> None:
    # The member that requires grad is a leaf, read before and after the detached member's change
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            x1.t_()
        return t0, x0.sin(), x1 + 1

    def make_inputs() -> tuple[object, ...]:
        return (b0 := pair(2, 3, requires_grad=True), b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_changed_under_no_grad_beside_written_detached_member_is_refused(compile_fn: CompileFn | None) -> None:
    # The member that requires grad (a leaf) changes its layout under no_grad and tensors are returned: as Note
    # [No-Grad Layout Changes Of Aliased Subclass Inputs], the leaf keeps the refusal whatever its detached alias does
    def f(x0: T, x1: T) -> object:
        t0 = x0.select(0, 1)
        x1.mul_(2.0)
        with torch.no_grad():
            x0.unsqueeze_(1)
        return (t0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 4, requires_grad=True)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _GROUP_RULE)
