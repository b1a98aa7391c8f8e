"""Outputs whose aliasing depends on grad mode: a custom autograd.Function's view of an intermediate (training),
and a program that reads grad mode (inference is analyzed in the caller's grad mode, and guards it). DTensor's
`to_local()` is both at once (tests/subclasses/dtensor_scenarios.py: to_local)."""

from __future__ import annotations

from typing import Any

import torch

from tests.oracle import assert_call_matches_eager, assert_matches_eager


class _ViewAs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2


def _view_as(x: torch.Tensor) -> torch.Tensor:
    out = _ViewAs.apply(x)  # type: ignore[no-untyped-call]
    assert isinstance(out, torch.Tensor)
    return out


def test_custom_function_view_of_an_intermediate_is_a_view_in_training() -> None:
    assert_matches_eager(lambda x: _view_as(x * 3), lambda: (torch.randn(4, 6, requires_grad=True),))


def test_custom_function_view_of_an_intermediate_in_inference() -> None:
    assert_matches_eager(lambda x: _view_as(x * 3), lambda: (torch.randn(4, 6),))


def _grad_mode_view(x: torch.Tensor) -> torch.Tensor:
    # DTensor.to_local's rule: the tensor itself under no_grad, a custom Function's view of it with grad on
    return _view_as(x) if torch.is_grad_enabled() else x


def test_program_reading_grad_mode_compiles_per_mode() -> None:
    compiled = assert_matches_eager(_grad_mode_view, lambda: (torch.randn(3),))
    with torch.no_grad():
        assert_call_matches_eager(compiled, _grad_mode_view, lambda: (torch.randn(3),))
    assert compiled.recompile_reasons == ("torch.is_grad_enabled(): expected True, got False",)  # type: ignore[attr-defined]
    out = compiled(torch.randn(3))
    assert isinstance(out, torch.Tensor)
    assert out._is_view()
