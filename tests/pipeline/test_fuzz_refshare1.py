"""Fuzz regressions (helper refshare1): a view taken under no_grad of an input that requires grad, which set_() then
leaves on the same storage with the same layout (Note [Storage Swaps By Rebinding]). Eager's view raises when
its grad_fn or is_leaf is read (set_() advanced the counter it shares); the compiled one came back as a leaf."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import (
    assert_refused,
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    twice,
)

T = torch.Tensor

_MAKERS = {
    "leaf": lambda: leaf(2, 3),
    "nonleaf": lambda: nonleaf(2, 3),
    "plain": lambda: torch.randn(2, 3),
    "view_nonleaf": lambda: nonleaf(4, 3)[1:3],
    "transposed_nonleaf": lambda: nonleaf(3, 2).t(),
    "pair_leaf": lambda: pair(2, 3, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(2, 3),
}
_SAME_LAYOUT_VIEWS: dict[str, Callable[[T], T]] = {
    "view_as": lambda x: x.view_as(x),
    "view": lambda x: x.view(x.shape),
    "slice": lambda x: x[:],
    "alias": torch.ops.aten.alias,
    "t_t": lambda x: x.t().t(),
}


@pytest.mark.parametrize("view", list(_SAME_LAYOUT_VIEWS), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_input_set_to_its_own_view_under_no_grad_returned(view: str, make: str, compile_fn: CompileFn | None) -> None:
    # the refshare helper's record (session 10): `v` came back a leaf under no_grad where eager's grad_fn raises
    take = _SAME_LAYOUT_VIEWS[view]

    def f(x: T) -> object:
        with torch.no_grad():
            v = take(x)
            set_to(x, v)
        return (v,)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("source", ["view_as", "detach"])
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_view_returned_after_input_set_to_a_same_layout_view(
    source: str, make: str, compile_fn: CompileFn | None
) -> None:
    # a variant: the view returned is another one (a select) than the one set_() takes, and the input too
    def f(x: T) -> object:
        with torch.no_grad():
            v = x[0]
            set_to(x, x.view_as(x) if source == "view_as" else x.detach())
        return (v, x)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("make", ["leaf", "nonleaf", "view_nonleaf", "pair_nonleaf"])
def test_views_before_and_after_the_set_returned(make: str, compile_fn: CompileFn | None) -> None:
    # a variant: eager's view taken before the set_() raises, the one after it does not (refused before in training)
    def f(x: T) -> object:
        with torch.no_grad():
            v = x.view_as(x)
            set_to(x, v)
            w = x.view_as(x)
        return (v, w)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("make", ["leaf", "nonleaf"])
def test_view_with_grad_then_set_to_storage_with_same_metadata(make: str, compile_fn: CompileFn | None) -> None:
    # a variant: set_(storage, offset, size, stride) with the input's own metadata
    def f(x: T) -> object:
        v = x.view_as(x)
        with torch.no_grad():
            x.set_(x.untyped_storage(), x.storage_offset(), x.shape, x.stride())
        return (v,)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)


def _views_of_one_base() -> tuple[T, T]:
    b = nonleaf(2, 3)
    return (b[:], b.view(2, 3))


def _base_and_view() -> tuple[T, T]:
    b = nonleaf(2, 3)
    return (b, b[:])


@pytest.mark.parametrize("make", [_views_of_one_base, _base_and_view])
def test_other_member_of_an_alias_group_set_to_its_own_view(
    make: Callable[[], tuple[T, T]], compile_fn: CompileFn | None
) -> None:
    # a variant: the set_() input shares its version counter with the one viewed
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, x0.view_as(x0))
        return (v,)

    def g(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, v)
        return (v, x1.mul(2.0))

    check_no_grad(f, make, compile_fn)
    check_no_grad(g, make, compile_fn)


@pytest.mark.parametrize("make", [lambda: leaf(2, 3), lambda: nonleaf(2, 3)])
def test_one_tensor_twice_set_to_its_own_view_is_refused(make: Callable[[], T], compile_fn: CompileFn | None) -> None:
    # a variant with one tensor at two positions (Note [One Tensor Passed Several Times]): refused, naming the output
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, x0.view_as(x0))
        return (v,)

    with torch.no_grad():
        assert_refused(f, twice(make), compile_fn, "out\\[0\\]: its grad_fn raises in eager")
