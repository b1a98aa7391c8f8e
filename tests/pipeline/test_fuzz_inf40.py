"""Fuzz regressions (seed 40000): in-place view ops on an output's `._base`, and on wrapper inputs that are views of
larger ones (helper inf40).

Newly supported programs get a parity test; refusals get a test naming the rule. With `--identity-compile` (eager
against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf

T = torch.Tensor

_MAKERS: dict[str, Callable[[], tuple[object, ...]]] = {
    "plain": lambda: (torch.randn(4, 1),),
    "pair": lambda: (pair(4, 1),),
    "nonleaf": lambda: (nonleaf(4, 1),),
    "pair_nonleaf": lambda: (pair_nonleaf(4, 1),),
}


def _check(
    f: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...]],
    compile_fn: CompileFn | None,
    grad: bool,
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# In-place view ops on an output's `._base` after the view (Note [In-Place View Ops On A Base After Its Views])


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", sorted(_MAKERS))
def test_base_changed_in_place_after_the_view(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #4668 (plain, no_grad): eager's t1._base is t0, of shape (1, 4, 1) after the unsqueeze_; the
    # replayed one kept (4, 1)
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.view((-1, 1, 1))
        t0.unsqueeze_(0)
        return (t1,)

    _check(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_two_views_of_a_base_changed_after(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # both outputs' `._base` is t0: one object, given the in-place view ops once
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.view((-1, 1, 1))
        t2 = t0.t()
        t0.unsqueeze_(0)
        t0.transpose_(0, 2)
        return (t1, t2)

    _check(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["nonleaf", "pair_nonleaf"])
def test_base_changed_after_then_input_written(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # the view is replayed before the epilogue writes the input; its `._base` changed after every output is built
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.unbind(1)[0]
        t2 = t0.view((-1, 1, 1))
        t0.unsqueeze_(0)
        x0.mul_(2)
        return (t1, t2, x0)

    _check(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_chain_through_a_base_changed_after(kind: str, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.data
        t1 = t0.view((-1, 1, 1))
        t2 = t1.squeeze(2)
        t0.as_strided_((2,), (1,), 1)
        return (t2,)

    _check(f, _MAKERS[kind], compile_fn, False)


# ---------------------------------------------------------------------------------------------------------------
# Inputs that are views of larger ones (Note [Wrapper Storage Of A View Input], Note [as_strided On Inputs])


def _empty_slice_of_pair(requires_grad: bool) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = PairTensor.from_tensor(torch.randn((1,)), requires_grad=requires_grad)
            return (b0[1:1:1],)

    return make


@pytest.mark.parametrize("requires_grad", [False, True])
def test_in_place_view_op_past_an_empty_wrapper_view(requires_grad: bool, compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #7513: the traced wrapper's own storage held no element; eager's is its base's (CRASHED:
    # setStorage out of bounds). Training: the input runs as a clone, which gets the same storage.
    def f(x0: T) -> object:
        t0 = x0.as_strided((), (), 0)
        with torch.no_grad():
            t0.unsqueeze_(0)
        return (t0,)

    _check(f, _empty_slice_of_pair(requires_grad), compile_fn, requires_grad)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_as_strided_in_place_past_an_input_view(kind: str, requires_grad: bool, compile_fn: CompileFn | None) -> None:
    # as_strided_ of an input onto storage elements it does not hold: traced over its whole storage, as as_strided
    # (it crashed: setStorage out of bounds); the epilogue's as_strided_ is no resize_, which raises on a tensor
    # that requires grad
    def make() -> tuple[object, ...]:
        b = pair(4, requires_grad=requires_grad) if kind == "pair" else torch.randn(4, requires_grad=requires_grad)
        return (b[1:2],)

    def f(x0: T) -> object:
        x0.as_strided_((2,), (1,), 1)
        return (x0 + 1,)

    _check(f, make, compile_fn, False)
