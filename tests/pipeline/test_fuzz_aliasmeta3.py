"""Fuzz follow-ups (round 7): subclass alias groups whose members that need no gradient change their layout (Note
[Aliased Subclass Inputs In Training])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair, pair_nonleaf

T = torch.Tensor

_GROUP_RULE = "shares storage with another input that requires grad and the program changes the metadata"
_SUBCLASS_RULE = "a tensor subclass input that requires grad has its metadata or storage changed in place"


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
    # The member that requires grad (a leaf) changes its layout under no_grad and tensors are returned: as Note [Aliased
    # Subclass Inputs In Training], the leaf keeps the refusal whatever its detached alias does
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


# ---------------------------------------------------------------------------------------------------------------
# See Note [Subclass Inputs Mutated In Training]


def test_subclass_member_set_under_grad_to_a_view_of_another(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #8822: a member set_() with grad to a view of another member's unbind() output
    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            x0.mul(x0)
        t1 = x0.unbind(0)[0]
        set_to(x2, t1.view((1, 1)))
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3)
        return (b0[1:2:1], pair_nonleaf(3, 3).detach(), b0.as_strided((), (), 1).contiguous())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_base_set_under_grad_to_a_view_member(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #6116: the base, passed twice, written below autograd, then set_() with grad to a view member;
    # a view of it written with grad before
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1[1:1:1]
        t0.add_(0.5)
        x2.data.mul_(2.0)
        t1 = t0.add(-1.0)
        set_to(x2, x0)
        return (t0, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1)
        return (b0.t().reshape((1, 1, 1)), b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("which", ["view", "base"])
@pytest.mark.parametrize("after", ["none", "read_other", "write_other", "read_self", "write_self"])
def test_subclass_member_set_under_grad(compile_fn: CompileFn | None, which: str, after: str) -> None:
    # One member set_() with grad to a view of the other (a value computed before is returned), then the other
    # member or the one set_() is read or written with grad
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        changed, other = (x1, x0) if which == "view" else (x0, x1)
        set_to(changed, x0[1:] if which == "view" else x1[0:1])
        if after == "read_other":
            return t0, other.sin()
        if after == "write_other":
            other.mul_(2.0)
        if after == "read_self":
            return t0, changed.cos()
        if after == "write_self":
            changed.mul_(3.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("source", ["clone", "other"])
def test_subclass_object_passed_twice_set_under_grad(compile_fn: CompileFn | None, source: str) -> None:
    # The same object at two positions, set_() with grad to a clone of it or to another input's view of its storage
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0 * 2
        set_to(x1, x0.clone() if source == "clone" else x2)
        return t0, x2 * 3

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0, b0[0:2])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_member_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A set_() under no_grad keeps the refusal (Note [Subclass Inputs Mutated In Training]; here the subclass rule's)
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(x1, x0[1:])
        return t0, x1 * 3

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _SUBCLASS_RULE)
