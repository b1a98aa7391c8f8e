"""Fuzz regressions of helper r2crash: set_() under grad, to a value that requires grad, of an input that shares
storage with another input (Note [Inputs That Gain Grad In Training]; fuzz seed 3001 #1275)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused

T = torch.Tensor

_RULE = r"set_\(\) with grad enabled, to a tensor that requires grad, of a tensor in the storage that inputs args\[1\], args\[2\] share"


def _inputs(kind: str, x0_nonleaf: bool = False) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            if kind == "plain":
                b0, b1 = torch.randn((1, 1), requires_grad=True), torch.randn((3,))
            else:
                b0 = PairTensor.from_tensor(torch.randn((1, 1)), requires_grad=True)
                b1 = PairTensor.from_tensor(torch.randn((3,)))
            if x0_nonleaf:
                b0 = b0.clone()
            return (b0, b1, b1.as_strided((1,), (2,), 0))

    return make_inputs


def _zero_other(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.zero_()
    return ()


def _zero_other_returned(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.zero_()
    return (x1, x2)


def _scale_other(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.mul_(2)
    return x1.sum()


@pytest.mark.parametrize("f", [_zero_other, _zero_other_returned, _scale_other])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_set_under_grad_into_shared_storage_refused(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    # seed 3001 #1275 (plain, _zero_other): the functional run crashed with "a leaf Variable that requires grad is
    # being used in an in-place operation"; the pair variant of _scale_other returned an output without eager's
    # requires_grad (DIVERGED)
    with torch.enable_grad():
        assert_refused(f, _inputs(kind), compile_fn, _RULE)


def test_set_under_grad_to_nonleaf_into_shared_storage_refused(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_refused(_zero_other, _inputs("plain", x0_nonleaf=True), compile_fn, _RULE)


@pytest.mark.parametrize("f", [_zero_other, _zero_other_returned, _scale_other])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_set_under_no_grad_into_shared_storage_matches_eager(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(f, _inputs(kind), compile_fn=compile_fn)


def test_set_into_shared_storage_that_requires_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    # the inputs' storage already has a history (a clone of a leaf): the rule does not apply
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = torch.randn((3,), requires_grad=True).clone()
            return (torch.randn((1, 1), requires_grad=True), b1, b1.as_strided((1,), (2,), 0))

    with torch.enable_grad():
        assert_matches_eager(_scale_other, make_inputs, compile_fn=compile_fn)
