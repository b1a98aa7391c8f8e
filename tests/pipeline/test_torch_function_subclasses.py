"""Inputs that are torch-function subclasses (`x.as_subclass(C)`, no __tensor_flatten__): outputs come back with
eager's types (Note [Ambient Modes]), and an override that changes what an op computes is refused
instead of compiled wrong. Programs in the spirit of torch's test/dynamo/test_subclasses.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import subclassaot
from tests.oracle import assert_matches_eager

T = torch.Tensor


class Plain(torch.Tensor):
    """Inherits Tensor.__torch_function__: every result is converted to the class."""


class Counting(torch.Tensor):
    calls = 0

    @classmethod
    def __torch_function__(cls, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        Counting.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


class Passthrough(torch.Tensor):
    """Calls the op with the subclass switched off: results stay plain tensors."""

    @classmethod
    def __torch_function__(cls, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class AddReturnsSelf(torch.Tensor):
    """Changes what torch.add computes: the compiled (plain) graph cannot say that."""

    @classmethod
    def __torch_function__(cls, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__):
            return args[0]
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


def arithmetic(x: T) -> object:
    return x * 2 + 1, torch.ones(2, 2), x.sum()


def mutate_and_view(x: T) -> object:
    x.add_(1)
    return x.view(-1), x.t() * 3


def mixed(x: T, y: T) -> object:
    z = x + y
    z.mul_(2)
    return z, z.view(-1)


@pytest.mark.parametrize("cls", [Plain, Counting, Passthrough], ids=lambda c: c.__name__)
@pytest.mark.parametrize("fn", [arithmetic, mutate_and_view], ids=lambda f: f.__name__)
def test_outputs_have_eager_types(cls: type[T], fn: Callable[[T], object]) -> None:
    assert_matches_eager(fn, lambda: (torch.randn(2, 2).as_subclass(cls),))


@pytest.mark.parametrize("cls", [Plain, Counting], ids=lambda c: c.__name__)
def test_training_outputs_and_gradients(cls: type[T]) -> None:
    with torch.enable_grad():
        assert_matches_eager(arithmetic, lambda: (torch.randn(2, 2).as_subclass(cls).requires_grad_(),))
        assert_matches_eager(mixed, lambda: (torch.randn(4, requires_grad=True).as_subclass(cls), torch.randn(4)))


def test_subclass_beside_plain_input() -> None:
    assert_matches_eager(mixed, lambda: (torch.randn(4), torch.randn(4).as_subclass(Plain)))


def test_override_that_changes_values_is_refused() -> None:
    def f(x: T) -> T:
        return torch.add(x, 1) * 2

    x = torch.randn(3).as_subclass(AddReturnsSelf)
    with pytest.raises(subclassaot.UnsupportedError, match=r"args\[0\]: its class's __torch_function__ changes"):
        subclassaot.compile(f, backend="eager")(x)
