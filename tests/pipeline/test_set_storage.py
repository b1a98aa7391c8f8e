"""set_() under grad of an intermediate that does not require grad onto a tensor that does, read afterwards."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import assert_matches_eager


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    with torch.enable_grad():
        b0 = torch.randn((1,))
        b1 = torch.randn((2, 2))
        b1.requires_grad_()
        b1 = b1.clone()
    return (b0, b1)


def _set_onto_nograd_view_then_read(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x1.t()  # a no_grad view of a non-leaf that requires grad: t0.requires_grad is True in eager
    t1 = x0.add(-1.0)  # an intermediate that does not require grad
    t1.set_(t0)  # grad on: eager records a NotImplemented node ("derivative for set_ is not implemented")
    return (t1 * 2,)


@pytest.mark.xfail(strict=True, reason="fuzz seed 19000 #3167: the compiled backward computes gradients")
def test_backward_through_read_of_intermediate_set_under_grad_raises_as_eager() -> None:
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_then_read, _inputs)
