"""set_() under grad of an intermediate that does not require grad onto a tensor that does, read afterwards."""

from __future__ import annotations

import pytest
import torch

from subclassaot.errors import UnsupportedError
from tests.oracle import assert_matches_eager
from tests.pipeline.corpus import set_to


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
    set_to(t1, t0)  # grad on: eager records a NotImplemented node ("derivative for set_ is not implemented")
    return (t1 * 2,)


def test_backward_through_read_of_intermediate_set_under_grad_raises_as_eager() -> None:
    # fuzz seed 19000 #3167: the compiled backward computed gradients; the oracle compares backward errors
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_then_read, _inputs)


def _set_onto_nograd_view_then_read_beside_input(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        t0 = x1.t()
    t1 = x0.add(-1.0)
    set_to(t1, t0)
    return (t1 * 2, x1 * 3)  # eager's backward through x1 * 3 alone completes; through both it raises


def test_read_of_intermediate_set_under_grad_beside_other_output_is_refused() -> None:
    # the compiled backward cannot raise at eager's step: refused at compile time rather than computing gradients
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=r"Reads Of Intermediates set_\(\) Under Grad"):
        assert_matches_eager(_set_onto_nograd_view_then_read_beside_input, _inputs)


def _set_onto_nograd_view_returned(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x1.t()
    t1 = x0.add(-1.0)
    set_to(t1, t0)
    return (t1,)  # the output's own set_ node (Note [Outputs set_() Under Grad])


def test_intermediate_set_under_grad_returned_itself_matches_eager() -> None:
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_returned, _inputs)
