"""Regressions found by the fifth PyTorch-derived corpus (tests/pipeline/corpus_pytorch5.py): tensors made by a
factory inside the program and written through a view with grad (Note [Factory Results Are No detach()]), with
their variants (factories, views, outputs, PairTensor sources, grad modes, called twice) and the detach() refusal
that still holds next to them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, pair, refused_with_grad

T = torch.Tensor

FACTORIES: dict[str, Callable[[], T]] = {
    "zeros": lambda: torch.zeros(2, 2),
    "ones": lambda: torch.ones(2, 2),
    "full": lambda: torch.full((2, 2), 3.0),
    "arange": lambda: torch.arange(4.0).reshape(2, 2),
    "randn_filled": lambda: torch.randn(2, 2).fill_(0.5),
}


@pytest.mark.parametrize("factory", sorted(FACTORIES))
def test_factory_diagonal_copied_with_grad_returns_view(factory: str, compile_fn: CompileFn | None) -> None:
    # test_functionalization.py test_copy_ (corpus fz_copy_same_shape_train): refused as a detach() of an
    # intermediate written with grad, the factory's result being recorded as a detach()
    make = FACTORIES[factory]

    def f(x: T) -> object:
        tmp = make()
        y = tmp.diagonal()
        y.copy_(x)
        return y.add_(x), tmp

    check_with_grad(f, lambda: (leaf(2),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(2),), compile_fn)
    check_no_grad(f, lambda: (leaf(2),), compile_fn)


def test_factory_view_written_with_grad_broadcast(compile_fn: CompileFn | None) -> None:
    # test_copy_ with a one-element source (corpus fz_copy_broadcast_train)
    def f(x: T) -> object:
        tmp = torch.zeros(2, 2)
        y = tmp.diagonal().copy_(x)
        return y.mul_(x), tmp.sum()

    check_with_grad(f, lambda: (leaf(1),), compile_fn)


def test_factory_slice_written_then_only_view_returned(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        tmp = torch.zeros(3, 2)
        v = tmp[1:]
        v.mul_(x)  # zeros times x: the history matters, not the values
        v.add_(x)
        return v

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(2),), compile_fn)


def test_factory_view_written_with_pair_value(compile_fn: CompileFn | None) -> None:
    # the written value a PairTensor: the fresh tensor made from it (new_zeros) is a PairTensor, no factory
    def f(x: T) -> object:
        tmp = x.new_zeros(2, 2)
        y = tmp.diagonal()
        y.copy_(x)
        return y, tmp

    pair_leaf: Callable[[], tuple[object, ...]] = lambda: (pair(2, requires_grad=True),)
    check_with_grad(f, pair_leaf, compile_fn)


def test_factory_view_written_called_twice(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        tmp = torch.ones(4)
        y = tmp.view(2, 2)[0]
        y.mul_(x)
        return y

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (leaf(2),), compile_fn=compile_fn, calls=3)


def test_detach_of_fresh_tensor_written_with_grad_still_refused(compile_fn: CompileFn | None) -> None:
    # next to the rule: an explicit detach() of a tensor the program made is still one (Note [Histories Over
    # Aliased Storage])
    def f(x: T) -> object:
        tmp = x.new_zeros(2, 2).detach()
        y = tmp.diagonal()
        y.copy_(x)
        return y

    refused_with_grad(f, lambda: (leaf(2),), compile_fn, match=r"is a detach\(\) of an intermediate")
