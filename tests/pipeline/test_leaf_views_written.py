"""Inputs that are views of a leaf requiring grad (`leaf.view(2, 2)`, `leaf.unbind(0)[1]`), plain and PairTensor,
written in place with grad on: eager raises, and so does the compiled call, with eager's error; under no_grad the
write is legal and matches eager through the parity oracle."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.tools.parity import fresh_call
from tests.oracle import assert_matches_eager
from tests.pipeline.program_helpers import pair

T = torch.Tensor
Make = Callable[[], tuple[object, ...]]


def _plain(*shape: int) -> T:
    return torch.randn(shape, requires_grad=True)


MAKERS: dict[str, Make] = {
    "plain_view": lambda: (_plain(4).view(2, 2),),
    "plain_unbind": lambda: (_plain(2, 4).unbind(0)[1],),
    "pair_view": lambda: (pair(4, requires_grad=True).view(2, 2),),
    "pair_flat_view": lambda: (pair(4, 2, requires_grad=True).view(8),),
    "pair_unbind": lambda: (pair(2, 4, requires_grad=True).unbind(0)[1],),
}


def view_read_then_written(x0: T) -> object:
    t0 = x0.unbind(0)[0]
    x0.mul_(2)
    return (t0,)


def written_then_read(x0: T) -> object:
    x0.add_(1)
    return x0 * 2


def written_through_a_view(x0: T) -> object:
    x0.view(-1)[0:1].zero_()
    return x0.sum()


PROGRAMS = (view_read_then_written, written_then_read, written_through_a_view)


def _raised(fn: Callable[..., object], make: Make) -> BaseException:
    call = fresh_call(make)
    with pytest.raises(RuntimeError) as info:
        fn(*call.args, **call.kwargs)
    return info.value


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("inputs", sorted(MAKERS))
def test_written_view_of_a_leaf_raises_eager_error(program: Callable[..., object], inputs: str) -> None:
    make = MAKERS[inputs]
    expected = _raised(program, make)
    compiled = subclassaot.compile(program, backend="eager")
    got = _raised(compiled, make)
    assert type(got) is type(expected)
    assert _rule(got) == _rule(expected)


def _rule(e: BaseException) -> str:
    """The error's first line without the op it names: written through a view of an unbind() output, eager names
    that view (`Output 0 of Slice`) where the compiled call, which writes the input itself, names the input."""
    return re.sub(r"^Output \d+ of \w+", "Output of", str(e).splitlines()[0])


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("inputs", sorted(MAKERS))
def test_written_view_of_a_leaf_under_no_grad_matches_eager(program: Callable[..., object], inputs: str) -> None:
    def under_no_grad(x0: T) -> object:
        with torch.no_grad():
            return program(x0)

    assert_matches_eager(under_no_grad, MAKERS[inputs])
