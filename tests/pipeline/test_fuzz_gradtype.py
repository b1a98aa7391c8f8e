"""Fuzz regressions: gradient types (PairTensor vs Tensor) and gradient presence (None vs a tensor).

- A plain input that is its own base in eager, passed twice or with a view of it, written with a subclass operand:
  eager's gradient is the subclass one (Note [Aliased Inputs In Training]; seed 10000 #1788, 11000 #6100).
- A view of an input set_() onto itself under no_grad: eager regenerates its grad_fn (AsStridedBackward0), whose
  gradient of an empty view is plain (seed 9000 #4529).
- A leaf set_() onto itself under no_grad gets a new gradient accumulator, which a backward that raises in an older
  node still reaches (Note [set_ Renews A Leaf's Accumulator]; seed 10000 #2934).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import nonleaf, pair

T = torch.Tensor


def _leaf_and_nonleaf(*shape: int) -> tuple[T, T]:
    with torch.enable_grad():
        leaf = torch.randn(shape, requires_grad=True)
        return leaf, leaf.clone()


def test_one_object_passed_twice_written_with_pair(compile_fn: CompileFn | None) -> None:
    # seed 10000 #1788: leaf 0 behind args[0].grad was a plain Tensor where eager's is a PairTensor
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        x0.mul_(x1)
        return (x2,)

    def make_inputs() -> tuple[T, T, T]:
        b0 = nonleaf(1, 4)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_input_and_its_view_written_with_pair(compile_fn: CompileFn | None) -> None:
    # seed 11000 #6100: x1 is x2.t() (a view of x2), x2 written with a PairTensor operand
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        t1 = x0.add(-1.0)
        with torch.no_grad():
            x2.mul_(t1)
        x2.mul_(x0)
        return (x1,)

    def make_inputs() -> tuple[T, T, T]:
        b1 = nonleaf(2, 1)
        return (pair(requires_grad=True).t(), b1.contiguous().t(), b1)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_one_object_passed_twice_gradient_type_is_eagers(compile_fn: CompileFn | None) -> None:
    # The leaf's gradient is a PairTensor on both sides (the oracle compares types; this says which one it is).
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        x0.mul_(x1)
        return (x2,)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        leaf, b0 = _leaf_and_nonleaf(3)
        (out,) = cast(tuple[T], run(b0, pair(), b0))
        torch.autograd.backward(out.sum())
    assert type(leaf.grad) is PairTensor


def test_one_object_passed_twice_read_then_written(compile_fn: CompileFn | None) -> None:
    # A read through the other name before the write: eager's gradient sums both paths.
    def f(x0: T, x1: T, x2: T) -> tuple[T, T]:
        y = x2 * 2
        x0.mul_(x1)
        return (y, x2)

    def make_inputs() -> tuple[T, T, T]:
        b0 = nonleaf(2, 3)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_one_leaf_passed_twice_written_under_no_grad(compile_fn: CompileFn | None) -> None:
    # A leaf passed twice (no view either): its write under no_grad is hidden from autograd, as in eager.
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        with torch.no_grad():
            x0.mul_(x1)
        return (x2 * 3,)

    def make_inputs() -> tuple[T, T, T]:
        b0 = torch.randn(4, requires_grad=True)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_empty_view_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    # seed 9000 #4529: args[0].grad was a PairTensor (SliceBackward0 of the replayed view) where eager's is plain
    # (the view's grad_fn, regenerated after the set_() bumped its version, is AsStridedBackward0)
    def f(x0: T, x1: T) -> tuple[T, T]:
        t0 = x0[2:2:1]
        with torch.no_grad():
            set_to(t0, t0)
        t1 = x1.sum()
        return (t0, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2, 2, 1), pair(requires_grad=True)), compile_fn=compile_fn)


def test_view_set_to_itself_under_no_grad_has_eagers_grad_fn(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T]:
        t0 = x0[1:3]
        with torch.no_grad():
            set_to(t0, t0)
        return (t0,)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        (out,) = cast(tuple[T], run(nonleaf(4)))
    assert out.grad_fn is not None and type(out.grad_fn).__name__ == "AsStridedBackward0"
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4),), compile_fn=compile_fn)


def _same_twice(*shape: int) -> Callable[[], tuple[T, T]]:
    def make_inputs() -> tuple[T, T]:
        b0 = nonleaf(*shape)
        return (b0, b0)

    return make_inputs


def test_one_object_passed_twice_unsqueeze_then_transposed_write(compile_fn: CompileFn | None) -> None:
    # seed 8000 #4353 (test_fuzz_r3crash.py): refused while the object ran as a view of its synthetic base, whose
    # view function missed unsqueeze_(); as its own base the trace runs it as eager does
    def f(x0: T, x1: T) -> tuple[()]:
        x0.unsqueeze_(-2)
        t0 = x0.transpose(0, 2)
        t0.mul_(t0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(1, 2), compile_fn=compile_fn)


def test_one_object_passed_twice_t_then_expand(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6029 (test_fuzz_r3crash.py), likewise
    def f(x0: T, x1: T) -> tuple[()]:
        x0.t_()
        t0 = x0.expand((4, 1))
        x1.mul_(0.5)
        t0.transpose(0, 1)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(1, 4), compile_fn=compile_fn)


def _sin_then_set_to_itself(x0: T) -> tuple[T, T]:
    t0 = x0.sin()
    with torch.no_grad():
        set_to(x0, x0)
    t1 = t0.clone()
    return (x0, t1)


def test_pair_leaf_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    # seed 10000 #2934: eager's backward raises in SinBackward0 (x0 saved, then its version advanced) after the
    # returned x0 gave its new accumulator a gradient; ours had one accumulator, behind the raising Function
    with torch.enable_grad():
        assert_matches_eager(_sin_then_set_to_itself, lambda: (pair(2, requires_grad=True),), compile_fn=compile_fn)


def test_plain_leaf_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(
            _sin_then_set_to_itself, lambda: (torch.randn(2, requires_grad=True),), compile_fn=compile_fn
        )


def test_leaf_set_to_itself_then_returned_gets_its_gradient(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T, T]:
        t0 = x0.sin()
        with torch.no_grad():
            set_to(x0, x0)
        return (x0, t0)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        x = torch.randn(3, requires_grad=True)
        out, t0 = cast(tuple[T, T], run(x))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.backward([out.sum(), t0.sum()])
    assert x.grad is not None and torch.equal(x.grad, torch.ones(3))


def test_leaf_view_made_before_a_failing_node(compile_fn: CompileFn | None) -> None:
    # seed 9000 #8833: eager's SinBackward0 (made after t0) raises before t0's ViewBackward0 runs, so args[1].grad
    # stays None; ours regenerated t0 after the call, its node ran first (Note [Leaf Views Replayed Before A Raising
    # Backward])
    def f(x0: T, x1: T) -> tuple[T, T]:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        t0 = x1.view(())
        t1 = x0.sin()
        return (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn((), requires_grad=True)), compile_fn=compile_fn)


def test_leaf_view_made_after_a_failing_node(compile_fn: CompileFn | None) -> None:
    # The view made after sin: eager's ViewBackward0 runs first and args[1] gets its gradient before the raise;
    # the view stays replayed after the call
    def f(x0: T, x1: T) -> tuple[T, T]:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        t1 = x0.sin()
        t0 = x1.view(())
        return (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn((), requires_grad=True)), compile_fn=compile_fn)
