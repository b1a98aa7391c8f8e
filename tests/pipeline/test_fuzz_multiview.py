"""Views made by a multi-output op (unbind) and views whose grad_fn raises in eager (fuzz seeds 9000, 10000, 11000;
Note [No-Grad Views Made After The Bump])."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch

from subclassaot.torch_internals import grad_fn_raises
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def test_unread_unbind_input_beside_its_base(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 9000, program 5294 (crashed): the early replay of t_() advances the base's counter, and the unbind()
    # output x0, which the program never reads, was handed to the autograd.Function, which read its grad_fn.
    def f(x0: T, x1: T) -> object:
        t0 = x1[3:4:2]
        t0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4)
        return (b0.unbind(0)[1], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        x0, x1 = (cast(T, x) for x in make_inputs())
        f(x0, x1)
        assert grad_fn_raises(x0)  # eager's input after the call: the test reaches the case


def test_set_onto_detached_unbind_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 9000, program 8076 (crashed): the set_() contents were regenerated as an autograd view of the unbind()
    # input after the epilogue advanced its counter (set_ through a detach() shares it).
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.transpose(0, 0)
        set_to(t1, t0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((4, 3), requires_grad=True)
            return (b0.unbind(0)[3],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_unbind_input_after_write(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 2529 (crashed): the chain's first view, taken with grad enabled before the no_grad
    # write, was replayed after the epilogue's write, reading the unbind() input's grad_fn; now it is taken before
    # the epilogue and the no_grad view after it.
    def f(x0: T) -> object:
        t0 = x0.view((3, 1, -1))
        with torch.no_grad():
            t0.mul_(-1.0)
            t1 = t0.view((1, 1, 3))
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair(2, 3, requires_grad=True)
            return (b0.unbind(0)[0],)

    def make_plain() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((2, 3), requires_grad=True).unbind(0)[0],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_plain, compile_fn=compile_fn)


def _raises_in_eager(f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], k: int) -> None:
    """The test reaches the case: eager's out[k] has a grad_fn that raises."""
    with torch.enable_grad():
        out = cast(tuple[T, ...], f(*make_inputs()))
        assert grad_fn_raises(out[k])


def test_no_grad_view_of_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 7533 (refused before): Note [Views Of Intermediates Written After].
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        with torch.no_grad():
            t1 = t0.select(0, -1)
        t0.mul_(2.0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((1,), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_subclass_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 1981 (refused before): a PairTensor intermediate's unbind() output, replayed from the
    # intermediate the autograd.Function returns.
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.unbind(0)[0]
        t0.copy_(x0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_subclass_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 4550 (refused before).
    def f(x0: T) -> object:
        t1 = x0.unsqueeze(1).clone()
        with torch.no_grad():
            t2 = t1.select(2, 3)
        t1.mul_(3.0)
        return (t2,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 4, requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_returned_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000, program 5304 (refused before): the view replays from the intermediate, itself an output.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        return (t0, t1)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 1)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_raising_view_beside_a_no_grad_view_made_after_the_write_is_refused(compile_fn: CompileFn | None) -> None:
    # The version bump would reach out[1], a no_grad view eager made after the write (its grad_fn reads fine).
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        with torch.no_grad():
            t2 = t0[0]
        return (t1, t2)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "of one tensor the program wrote between taking them")


def test_raising_view_beside_a_default_view_made_after_the_write(compile_fn: CompileFn | None) -> None:
    # A view of the default kind rebuilds its grad_fn whatever the counter: supported beside the bumped one.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        return (t1, t0[0])

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_input_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 2418 (refused before): a no_grad view of an input after an in-place view op, the
    # input then written with grad; replayed after the epilogue, its counter advanced.
    def f(x0: T) -> object:
        x0.unsqueeze_(0)
        with torch.no_grad():
            t0 = x0.view((1, 1))
        x0.mul_(-1.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_leaf_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 1602 (refused before); y saves the input after the set_(), and its backward runs
    # as eager's does.
    def f(x0: T) -> object:
        t0 = x0.unbind(2)[1]
        with torch.no_grad():
            set_to(x0, x0)
        y = x0 * x0
        return (t0, y)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 1, 4), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_diagonal_of_subclass_input_then_transposed(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 9029 (refused before).
    def f(x0: T) -> object:
        x0.unsqueeze_(1)
        with torch.no_grad():
            t0 = x0.diagonal(1, 0, 2)
        x0.transpose_(1, 1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 4),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_input_passed_twice_then_set(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 6701 (refused before).
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = x1[:, 0:1:2]
        set_to(x0, x1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(1, 1)
        return (b0, b0)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_views_of_unbind_input_and_overlapping_input_written_through_detach(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000, program 6991 (refused before; crashed once out[2] was supported): out[0] is a view of the
    # unbind() input x0 made before the program set_() a detach() of a view of x2, which shares x0's eager base
    # (traced apart): replayed after the epilogue with x0's counter at entry, it raises as eager's does.
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.transpose(0, 0)
        with torch.no_grad():
            t1 = x2.select(1, 0)
        t2 = x0.view((6, 2))
        t1.unbind(0)[7]
        t4 = t1.detach()
        set_to(t4, t0)
        return (t2, t4, t1)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair_nonleaf(4, 3, 4)
            return (b0.unbind(2)[1], pair(2), b0.reshape((-1, 6)))

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
