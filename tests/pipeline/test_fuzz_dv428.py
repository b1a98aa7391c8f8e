"""Fuzz follow-up (fuzz seed 47000 #428): a view of an input, taken before a write to its base and then assigned
`.data =`, returned: eager regenerates its history over the assigned layout (Note [Plain Views Assigned .data After
A Write]); a read of it with grad after that regeneration is refused (Note [Stale View Functions])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_with_grad, nonleaf, pair_nonleaf, refused_with_grad

T = torch.Tensor

_STALE = "Stale View Functions"


def _aliased(make: Callable[..., T], view: Callable[[T], T]) -> Callable[[], tuple[object, ...]]:
    """(a view of a non-leaf b, b)."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b = make(2)
            return (view(b), b)

    return make_inputs


def _expanded(b: T) -> T:
    return b.expand(2, -1)


def _unsqueezed(b: T) -> T:
    return b.unsqueeze(0)


_MAKERS = pytest.mark.parametrize("make", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
_INPUTS = pytest.mark.parametrize("view", [_expanded, _unsqueezed], ids=["expand", "unsqueeze"])


@_MAKERS
def test_shrunk(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 (shrunk): eager's t0 has AsStridedBackward0 of size (2, 2) over x1's MulBackward0
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        t0.data = x0
        return (t0,)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


@_MAKERS
def test_unshrunk(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        t0.data = x0
        return (x0, x1, t0)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b = make(2)
            return (b.expand((2, -1)).transpose(0, 1), b.transpose(0, 0))

    check_with_grad(f, make_inputs, compile_fn)


_ASSIGNED: dict[str, Callable[[T, T], T]] = {
    "x0": lambda x0, x1: x0,
    "x1": lambda x0, x1: x1,
    "x0_select": lambda x0, x1: x0[0],
    "x1_unsqueeze": lambda x0, x1: x1.unsqueeze(1),
    "fresh": lambda x0, x1: x1 * 2,
}


@_MAKERS
@_INPUTS
@pytest.mark.parametrize("assigned", sorted(_ASSIGNED))
@pytest.mark.parametrize("through", ["x0", "x1"])
def test_diagonal_assigned_after_write(
    make: Callable[..., T], view: Callable[[T], T], assigned: str, through: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 47000 #428, generalized: the assigned value, the input written (x0 only where it does not overlap)
    if through == "x0" and view is _expanded:
        pytest.skip("a write through an expand() is refused (overlapping elements)")

    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        (x0 if through == "x0" else x1).mul_(-1.0)
        t0.data = _ASSIGNED[assigned](x0, x1)
        return (t0,)

    check_with_grad(f, _aliased(make, view), compile_fn)


@_MAKERS
@pytest.mark.parametrize(
    "view_op",
    [lambda x: x.transpose(0, 1), lambda x: x.diagonal(1, 0, 1).unsqueeze(0), lambda x: x.select(0, 1)],
    ids=["transpose", "diagonal_unsqueeze", "select"],
)
def test_other_views_assigned_after_write(
    make: Callable[..., T], view_op: Callable[[T], T], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 47000 #428, generalized over the view op
    def f(x0: T, x1: T) -> object:
        t0 = view_op(x0)
        x1.mul_(-1.0)
        t0.data = x0
        return (t0, x1)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


@_MAKERS
def test_view_read_between_write_and_assignment(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant: the read rebuilds t0's history in its own layout before the `.data =`
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        y = t0 * 2
        t0.data = x0
        return (t0, y)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


@_MAKERS
def test_view_read_before_write(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant: a read before the write leaves t0 stale again
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        y = t0 * 2
        x1.add_(t0.sum())
        t0.data = x0
        return (t0, y)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


@_MAKERS
def test_write_after_assignment(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        t0.data = x0
        x1.mul_(-1.0)
        return (t0,)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


@_MAKERS
def test_write_under_no_grad_and_assigned_twice(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        with torch.no_grad():
            x1.mul_(-1.0)
        t0.data = x1
        t0.data = x0
        return (t0,)

    check_with_grad(f, _aliased(make, _unsqueezed), compile_fn)


@_MAKERS
def test_single_input(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant, no alias group
    def f(x: T) -> object:
        t0 = x.diagonal()
        x.mul_(-1.0)
        t0.data = x
        return (t0,)

    check_with_grad(f, lambda: (make(2, 2),), compile_fn)


def test_read_after_assignment_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant: `t0 * 2` reads a history eager rebuilds in the assigned layout; ours would replay
    # the diagonal
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        t0.data = x0
        return (t0, t0 * 2)

    refused_with_grad(f, _aliased(nonleaf, _expanded), compile_fn, _STALE)


def test_read_after_assignment_single_input_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant, no alias group; the write after the assignment
    def f(x: T) -> object:
        t0 = x.diagonal()
        t0.data = x
        x.mul_(-1.0)
        return (t0 * 1,)

    refused_with_grad(f, lambda: (nonleaf(2, 2),), compile_fn, _STALE)


@pytest.mark.parametrize("make", [pair_nonleaf], ids=["pair"])
def test_read_after_assignment_subclass(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant: a subclass view rebuilds its history by its view functions, in eager as here
    def f(x0: T, x1: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        t0.data = x0
        return (t0, t0 * 2)

    check_with_grad(f, _aliased(make, _expanded), compile_fn)


def test_view_of_earlier_output_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #428 variant: t0's chain starts at the earlier output v, which has no counter at entry
    def f(x0: T, x1: T) -> object:
        v = x0.view(1, 2)
        t0 = v.diagonal(1, 0, 1)
        x1.mul_(-1.0)
        t0.data = x0
        return (v, t0)

    refused_with_grad(f, _aliased(nonleaf, _unsqueezed), compile_fn, "Plain Views Assigned .data After A Write")
