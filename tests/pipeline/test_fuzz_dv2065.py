"""Fuzz regressions (helper dv2065): a view of an input set_() under no_grad and returned, beside a view of the input
taken after that set_() (Note [Outputs Built After A Runtime set_]). The runtime repeats the output's set_() when it
builds it, which advanced the counter of the later view built before it: its grad_fn and is_leaf raised, where
eager's read fine."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, pair, pair_nonleaf

T = torch.Tensor

_MAKERS = {
    "leaf": lambda: leaf(3, 4),
    "nonleaf": lambda: nonleaf(3, 4),
    "plain": lambda: torch.randn(3, 4),
    "pair_leaf": lambda: pair(3, 4, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(3, 4),
}
_VIEWS: dict[str, Callable[[T], T]] = {
    "unbind": lambda x: x.unbind(0)[1],
    "select": lambda x: x.select(0, 1),
    "slice": lambda x: x[1:2],
    "t": lambda x: x.t(),
    "view": lambda x: x.view(-1),
}
_TARGETS: dict[str, Callable[[T], T]] = {
    "input": lambda x: x,
    "slice": lambda x: x[0:2],
    "view_as": lambda x: x.view_as(x),
}
_LATER: dict[str, Callable[[T], T]] = {
    "slice": lambda x: x[2:3:2],
    "unbind": lambda x: x.unbind(0)[2],
    "select": lambda x: x[2],
}


def test_fuzz_seed47000_program2065(compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #2065 (shrunk): t1 came back with a grad_fn that raises, eager's is a leaf
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((3,), requires_grad=True),)

    def f(x0: T) -> object:
        t0 = x0.unbind(0)[1]
        set_to(t0, x0)
        t1 = x0[2:3:2]
        return (t1, t0)

    check_no_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("target", list(_TARGETS), ids=str)
@pytest.mark.parametrize("view", list(_VIEWS), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_view_taken_after_a_returned_view_set_to_the_input(
    make: str, view: str, target: str, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 47000 #2065: the view set_() (any view op), onto the input or a view of it
    def f(x: T) -> object:
        t0 = _VIEWS[view](x)
        set_to(t0, _TARGETS[target](x))
        t1 = x[2:3:2]
        return (t1, t0)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("returned", [True, False])
@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize("later", list(_LATER), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_views_before_or_after_the_set_with_or_without_the_set_view(
    make: str, later: str, after: bool, returned: bool, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 47000 #2065: the other view taken before the set_() (eager's raises) or after it, by a
    # slice, a multi-output view or a select; the view set_() returned (first) or not
    def f(x: T) -> object:
        t0 = x.unbind(0)[1]
        t1 = None if after else _LATER[later](x)
        set_to(t0, x)
        t1 = _LATER[later](x) if t1 is None else t1
        return (t0, t1) if returned else (t1,)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_set_under_no_grad_in_a_training_program(make: str, after: bool, compile_fn: CompileFn | None) -> None:
    # a variant of fuzz seed 47000 #2065 with grad enabled around a no_grad set_()
    def f(x: T) -> object:
        t0 = x.unbind(0)[1]
        t1 = None if after else x[2:3:2]
        with torch.no_grad():
            set_to(t0, x)
        t1 = x[2:3:2] if t1 is None else t1
        return (t1, t0)

    check_with_grad(f, lambda: (_MAKERS[make](),), compile_fn)
