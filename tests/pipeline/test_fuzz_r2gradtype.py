"""Fuzz regressions: a plain input that is a view, written in place with a subclass operand (fuzz seed 3001 #1564).

Eager's CopySlices gives the view's old value a gradient of the type of the base's incoming gradient (plain here),
where a write to a non-view gives the subclass one (Note [Writes To Plain View Inputs Make Plain Gradients]).
"""

from __future__ import annotations

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import pair

T = torch.Tensor


def plain_view(*shape: int) -> T:
    """A plain non-leaf view: x.clone().transpose(0, 0) of a leaf that requires grad."""
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone().transpose(0, 0)


def _mul_(x0: T, x1: T) -> tuple[T]:
    x1.mul_(x0)
    return (x1,)


@pytest.mark.parametrize("x0_grad", [False, True], ids=["pair", "pair_grad"])
def test_plain_view_written_with_pair(compile_fn: CompileFn | None, x0_grad: bool) -> None:
    # seed 3001 #1564: leaf 0 behind args[1].grad was a PairTensor where eager's is a plain Tensor
    def make_inputs() -> tuple[T, T]:
        return pair(1, requires_grad=x0_grad), plain_view(2)

    with torch.enable_grad():
        assert_matches_eager(_mul_, make_inputs, compile_fn=compile_fn)


def test_plain_view_written_with_pair_not_returned(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> tuple[T]:
        x1.mul_(x0)
        return (x0 * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1, requires_grad=True), plain_view(2)), compile_fn=compile_fn)


def test_plain_view_read_then_written_with_pair(compile_fn: CompileFn | None) -> None:
    # A read before the write sends a PairTensor gradient along another path: eager's sum is a PairTensor.
    def f(x0: T, x1: T) -> tuple[T, T]:
        y = x1 * x0
        x1.mul_(x0)
        return y, x1

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1), plain_view(2)), compile_fn=compile_fn)


def test_plain_slice_of_larger_base_written_with_pair(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[T, T]:
        with torch.enable_grad():
            return pair(1), torch.randn(4, requires_grad=True).clone()[1:3]

    with torch.enable_grad():
        assert_matches_eager(_mul_, make_inputs, compile_fn=compile_fn)


def test_plain_view_written_with_pair_inference(compile_fn: CompileFn | None) -> None:
    with torch.no_grad():
        assert_matches_eager(_mul_, lambda: (pair(1), plain_view(2)), compile_fn=compile_fn)


def _leaf_grad_type(fn: object, view: bool) -> type:
    with torch.enable_grad():
        leaf = torch.randn(2, requires_grad=True)
        x1 = leaf.clone()
        x1 = x1.transpose(0, 0) if view else x1
        (out,) = fn(pair(1), x1)  # type: ignore[operator]  # a compiled or eager callable
        out.sum().backward()
    assert leaf.grad is not None
    return type(leaf.grad)


def test_entry_not_reused_across_view_and_non_view() -> None:
    """An entry compiled for a view input is guarded on it: a non-view non-leaf recompiles, and each call gets
    eager's gradient type (plain for the view, PairTensor for the non-view)."""
    compiled = subclassaot.compile(_mul_)
    for view in (True, False, True):
        assert _leaf_grad_type(compiled, view) is _leaf_grad_type(_mul_, view)
    assert _leaf_grad_type(_mul_, True) is torch.Tensor
    assert _leaf_grad_type(_mul_, False) is PairTensor
