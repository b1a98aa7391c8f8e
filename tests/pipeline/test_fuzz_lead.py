"""Fuzz regressions found and fixed by the lead in session 5 (each from a shrunk fuzz program)."""

from __future__ import annotations

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager

T = torch.Tensor


def _pair_nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return PairTensor.from_tensor(torch.randn(shape), requires_grad=True).clone()


def _nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone()


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_write_of_no_elements_through_an_expand_changes_nothing(
    compile_fn: CompileFn | None, kind: str, grad: bool
) -> None:
    # Fuzz seed 3000 #2073, #4995: an in-place op on an expand() to a size-0 dim writes nothing, so its zero strides
    # overlap nothing; it was refused as a write through overlapping memory. Eager still bumps the version counter.
    def f(b: T) -> object:
        t = b.expand((0, 2, 3))
        t.add_(1.0)
        d = b.diagonal(0, 1, 2).expand((3, 0, 1))
        d.mul_(0.5)
        return b * 2, t, d

    def make_inputs() -> tuple[T]:
        if grad:
            return (_pair_nonleaf(1, 1, 1) if kind == "pair" else _nonleaf(1, 1, 1),)
        return (PairTensor.from_tensor(torch.randn(1, 1, 1)) if kind == "pair" else torch.randn(1, 1, 1),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_elementwise_read_of_the_location_written_at_the_same_index_is_exact(
    compile_fn: CompileFn | None, kind: str
) -> None:
    # Fuzz seed 3000 #473: the column and the sub-diagonal of a (3, 4) tensor meet at one element, read and written
    # at the same index; #1365: copy_ of a view into its own expand(). Both were refused as reads of written memory.
    def f(x: T) -> object:
        x.select(1, -1).mul_(x.diagonal(-1, 1, 0))
        d = x.diagonal(0, 0, 1)
        d.expand((1, 3)).copy_(d)
        d.expand((1, 3)).add_(d)
        return x, d

    def make_inputs() -> tuple[T]:
        return (PairTensor.from_tensor(torch.randn(3, 4)) if kind == "pair" else torch.randn(3, 4),)

    assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_elementwise_read_of_a_location_written_at_another_index_stays_refused(compile_fn: CompileFn | None) -> None:
    # Note [Reads Of Written Memory]: row 1 reads row 0, which the same op writes (eager's loop order decides).
    def f(x: T) -> object:
        x[:, :2].add_(x[:, 1:3])
        return x

    if compile_fn is not None:
        return  # eager's result is unspecified: nothing to compare
    with pytest.raises(UnsupportedError, match="reads part of the memory it writes"):
        subclassaot.compile(f)(torch.randn(3, 4))
