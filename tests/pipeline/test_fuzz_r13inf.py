"""Fuzz regressions of seed 13000's inference programs; each program is a shrunk fuzz program (seed and index in the
test's name)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import pair

T = torch.Tensor


def _no_grad_parity(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], cf: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=cf)


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
