"""Known surprises: what should happen, as strict xfails (they turn red when fixed), plus the clear errors the
pipeline gives instead of a wrong result where it cannot yet do what eager does."""

from __future__ import annotations

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import assert_matches_eager


def test_write_through_an_expanded_view_is_refused_not_wrong() -> None:
    # copy_ of varying values through an expand: which copy lands is up to eager's loop order
    def f(x: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        x.expand(3, 4).copy_(src)
        return x

    with pytest.raises(subclassaot.UnsupportedError, match="overlap in memory"):
        subclassaot.compile(f, backend="eager")(torch.randn(4), torch.randn(3, 4))


def test_uniform_write_through_an_expanded_view_matches_eager() -> None:
    # Note [In-Place Ops As Eager Runs Them]
    def f(x: torch.Tensor) -> torch.Tensor:
        x.expand(3, 4).zero_()
        return x + 1

    assert_matches_eager(f, lambda: (torch.randn(4),))


def test_training_set_of_a_subclass_input_under_no_grad_matches_eager() -> None:
    # Note [Inputs Written In Training]: the read after the set_() is at the same size
    def f(p: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            p.set_(p.clone())  # type: ignore[call-overload]  # torch stub lacks set_(Tensor)
        return p * 2

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(3), requires_grad=True) * 1.0,))


def test_training_set_of_a_subclass_input_under_no_grad_to_another_size_is_refused_clearly() -> None:
    def f(p: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            p.set_(p.clone().view(3, 1))  # type: ignore[call-overload]  # torch stub lacks set_(Tensor)
        return p * 2

    p = PairTensor.from_tensor(torch.randn(3), requires_grad=True) * 1.0
    with pytest.raises(subclassaot.UnsupportedError, match="metadata or storage changed in place"):
        subclassaot.compile(f, backend="eager")(p)


def test_training_set_of_a_subclass_input_under_grad_matches_eager() -> None:
    # Note [Inputs Written In Training]: the backward through p raises as eager's
    def f(p: torch.Tensor) -> torch.Tensor:
        p.set_(p.clone())  # type: ignore[call-overload]  # torch stub lacks set_(Tensor)
        return p * 2

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(3), requires_grad=True) * 1.0,))


def test_training_metadata_and_data_mutation_of_a_subclass_input_matches_eager() -> None:
    def f(p: torch.Tensor) -> torch.Tensor:
        p.t_()
        p.mul_(2)
        return p.sum()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(2, 3), requires_grad=True) * 1.0,))


def test_training_metadata_mutation_of_a_subclass_input_matches_eager() -> None:
    def f(p: torch.Tensor) -> torch.Tensor:
        p.t_()
        return p * 2

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(2, 3), requires_grad=True) * 1.0,))


def test_training_mutation_of_a_subclass_input_matches_eager() -> None:
    def f(p: torch.Tensor) -> torch.Tensor:
        p.mul_(2)
        return p.sum()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(3), requires_grad=True) * 1.0,))


def test_view_of_the_storage_an_input_had_before_set_matches_eager() -> None:
    # Once refused: the view is rebuilt from x before the epilogue swaps x's storage (it keeps the old one).
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        v = x.view(-1)
        x.set_(y)  # type: ignore[call-overload]  # torch stub lacks set_(Tensor)
        return v

    assert_matches_eager(f, lambda: (torch.randn(3), torch.randn(3)))
