"""Input makers and the refusal checks shared by the pipeline's regression tests (tests/pipeline/test_*.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager

__all__ = ["assert_refused", "nonleaf", "pair", "pair_nonleaf", "twice"]

T = torch.Tensor


def pair(*shape: int, requires_grad: bool = False) -> T:
    return PairTensor.from_tensor(torch.randn(shape), requires_grad=requires_grad)


def nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone()


def pair_nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return pair(*shape, requires_grad=True).clone()


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


def check_with_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """assert_matches_eager with grad enabled (a training program)."""
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def refused_with_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None, match: str
) -> None:
    """assert_refused with grad enabled."""
    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, match)


def leaf(*shape: int) -> T:
    """A plain leaf that requires grad."""
    return torch.randn(shape, requires_grad=True)


def check_no_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """assert_matches_eager under no_grad (an inference program)."""
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def twice(make: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    """An input maker passing one tensor from `make` as two arguments (an alias group of the same object)."""

    def make_inputs() -> tuple[object, ...]:
        x = make()
        return (x, x)

    return make_inputs


class SinFunction(torch.autograd.Function):
    """A plain custom Function: saves its input, returns a fresh tensor."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        grad: T = g * x.cos()
        return grad
