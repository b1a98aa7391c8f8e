"""Fuzz regressions of seed 13000's inference programs; each program is a shrunk fuzz program (seed and index in the
test's name)."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import check_no_grad as _no_grad_parity
from tests.pipeline.fuzz_helpers import pair

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# resize_() to the size a tensor already has keeps its strides


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_seed13000_9159_resize_to_own_size_keeps_strides(kind: str, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.resize_((2,))
        x0.add_(0.5)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 3) if kind == "pair" else torch.randn(4, 3)
        return (b0.as_strided((2,), (2,), 1),)

    _no_grad_parity(f, make_inputs, compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_resize_to_own_size_of_a_strided_view_returned(grad: bool, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.resize_((3, 2))
        x0.mul_(2.0)
        return (x0, x0.sum())

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3).t(),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A view of an input's detach() taken after an in-place view op on the input (Note [No-Grad Views Made After The
# Bump]): eager's `._base` is the detach's result


def test_seed13000_545_view_of_detach_after_input_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        x0.unsqueeze_(-1)
        t1 = t0.view(())
        return (t1,)

    _no_grad_parity(f, lambda: (torch.randn(()),), compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_view_of_detached_view_after_input_t_(grad: bool, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0[1:].detach()
        x0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0).view(-1)
        return (t1, t0)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (torch.randn(3, 2),), compile_fn=compile_fn)
