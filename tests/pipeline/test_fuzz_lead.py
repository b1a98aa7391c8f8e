"""Fuzz regressions found and fixed by the lead in session 5 (each from a shrunk fuzz program)."""

from __future__ import annotations

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import nonleaf, pair_nonleaf

T = torch.Tensor


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
            return (pair_nonleaf(1, 1, 1) if kind == "pair" else nonleaf(1, 1, 1),)
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
    # Note [Writes Through Overlapping Memory]: row 1 reads row 0, which the same op writes (eager's loop order
    # decides).
    def f(x: T) -> object:
        x[:, :2].add_(x[:, 1:3])
        return x

    if compile_fn is not None:
        return  # eager's result is unspecified: nothing to compare
    with pytest.raises(UnsupportedError, match="reads part of the memory it writes"):
        subclassaot.compile(f)(torch.randn(3, 4))


@pytest.mark.parametrize("op", ["fill", "zero"])
def test_write_of_one_value_through_an_expand_with_grad_raises_in_backward_as_eager(
    compile_fn: CompileFn | None, op: str
) -> None:
    # Fuzz seed 3000 #1760, #7813 (refused before): fill_/zero_ through an expand() of a tensor that requires grad
    # is legal in eager, and eager's backward through it raises (its CopySlices copies the gradient into the
    # repeats); the compiled program writes the same memory once and its backward raises the same error.
    def f(b: T) -> object:
        t = b[:, 0:2:2].expand((2, 3))
        t.fill_(2.0) if op == "fill" else t.zero_()
        return b, t

    assert_matches_eager(f, lambda: (nonleaf(1, 3),), compile_fn=compile_fn)


def test_write_of_one_value_through_an_expand_in_the_middle_of_a_program(compile_fn: CompileFn | None) -> None:
    # After the write, gradients reach the written tensor only through the failing node; before it, they do not.
    def f(b: T) -> object:
        y = b.sin()
        b.expand((2, 1, 3)).fill_(0.5)
        return y, b * 2

    assert_matches_eager(f, lambda: (nonleaf(1, 3),), compile_fn=compile_fn)


def test_write_of_one_value_through_an_expand_of_a_strided_input_that_requires_grad_is_refused(
    compile_fn: CompileFn | None,
) -> None:
    # Fuzz seed 5000 #6159 (after the generator change): functionalization's as_strided_scatter of a non-contiguous
    # tensor that requires grad is an internal assert in torch; refused with the rule instead.
    def make_inputs() -> tuple[T]:
        return (nonleaf(4, 2, 4).as_strided((3,), (2,), 0),)

    def f(x: T) -> object:
        x.expand((2, -1)).zero_()
        return ()

    if compile_fn is not None:
        with torch.no_grad():
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        return
    with torch.no_grad(), pytest.raises(UnsupportedError, match="a write of one value through an expand"):
        subclassaot.compile(f)(*make_inputs())


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_leaf_transposed_under_no_grad_then_read_with_grad(compile_fn: CompileFn | None, kind: str) -> None:
    # found by the aliasmeta helper (the compiled backward raised 'invalid gradient'): Note [Leaves Laid Out Anew
    # Under no_grad]
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        return x.sin()

    def make_inputs() -> tuple[T]:
        t = torch.randn(2, 3)
        return (PairTensor.from_tensor(t, requires_grad=True) if kind == "pair" else t.requires_grad_(),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("twice", [False, True])
def test_view_of_a_view_set_to_a_tensor_of_the_same_metadata(compile_fn: CompileFn | None, twice: bool) -> None:
    # Fuzz seed 6000 #1268 (wrong values): t1 = t0.view((1,)) was replayed from the output t0, which set_() had
    # moved to another storage of the same metadata; eager's t1 stays a view of the input's storage.
    def f(*xs: T) -> object:
        t0 = xs[0].view(())
        t1 = t0.view((1,))
        set_to(t0, xs[-1].mul(xs[-1]))
        return t1, t0

    def make_inputs() -> tuple[T, ...]:
        b = torch.randn(())
        return (b, b) if twice else (b,)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
