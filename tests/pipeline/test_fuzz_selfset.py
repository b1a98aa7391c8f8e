"""Fuzz regressions from dev seed 49000 about `x.set_(x)`: which gradient accumulator of a leaf set_() to itself under
no_grad the compiled Function feeds (Note [Reads Around A set_ That Renews An Accumulator]), and where the set_ node
of an input set_() under grad sits among the program's nodes (Note [set_ Under Grad Before The Call])."""

from __future__ import annotations

from collections.abc import Callable

import torch

import subclasses.pair
from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

T = torch.Tensor

_LEAVES: tuple[Callable[[], T], ...] = (leaf, lambda: pair(requires_grad=True))
_ALL: tuple[Callable[[], T], ...] = (*_LEAVES, nonleaf, pair_nonleaf)


def _self_set(x: T) -> None:
    with torch.no_grad():
        set_to(x, x)


# fuzz seed 49000 #9292: x0 set_() to itself under no_grad before any read; t1's backward raises (t0, saved by the
# mul, is written): eager's MulBackward0 feeds the accumulator the returned x0 feeds, so x0.grad stays None; ours
# renewed the accumulator after the call and gave the returned x0 a gradient
def test_seed49000_9292_self_set_before_reads(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    for make in _ALL:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_no_grad(f, lambda: (leaf(),), compile_fn)


# variants of fuzz seed 49000 #9292: no write (the backward completes), x0 not returned, returned as a view or first,
# an in-place write instead of the copy_, set_() twice, reads through a view taken after the set_
def test_seed49000_9292_variants(compile_fn: CompileFn | None) -> None:
    def no_write(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        return (x0.mul(t0), x0)

    def unreturned(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.copy_(t0)
        return (t1,)

    def viewed(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.mul_(2.0)
        return (x0.view(x0.shape), t1)

    def twice(x0: T) -> object:
        _self_set(x0)
        _self_set(x0)
        v = x0.view(x0.shape)
        t0 = v.add(-1.0)
        t1 = v.mul(t0)
        t0.copy_(t0)
        return (x0, t1)

    for f in (no_write, unreturned, viewed, twice):
        for make in _ALL:
            check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


# variants of fuzz seed 49000 #9292 read only before the set_(), or only between two of them: eager's nodes feed an
# earlier accumulator than the returned leaf's (fuzz seed 10000 #2934's rule)
def test_seed49000_9292_reads_before_self_set(compile_fn: CompileFn | None) -> None:
    def before(x0: T) -> object:
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        _self_set(x0)
        t0.copy_(t0)
        return (t1, x0)

    def between(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        _self_set(x0)
        t0.copy_(t0)
        return (t1, x0)

    for f in (before, between):
        for make in _ALL:
            check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


# variant of fuzz seed 49000 #9292 read with grad before and after the set_(), with a raising backward: eager's
# nodes feed two accumulators, the returned leaf's behind the raising node; refused for leaves (the backward that
# completes, and non-leaves, match)
def test_seed49000_9292_reads_around_self_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t = x0.mul(2.0)
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = t.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    def completes(x0: T) -> object:
        t = x0.mul(2.0)
        _self_set(x0)
        t0 = x0.add(-1.0)
        return (t.mul(t0), x0)

    match = "Reads Around A set_ That Renews An Accumulator"
    for make in _LEAVES:
        refused_with_grad(f, lambda make=make: (make(),), compile_fn, match)  # type: ignore[misc]
    for make in _ALL:
        check_with_grad(completes, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_with_grad(f, lambda: (nonleaf(),), compile_fn)
    check_with_grad(f, lambda: (pair_nonleaf(),), compile_fn)


# fuzz seed 49000 #3836 (unshrunk): x2 (x1 passed again) written, set_() to itself with grad, read and written after;
# eager's set_ node waits behind the program's nodes, so x0 gets its gradient before the backward raises; ours made
# the set_ node after the compiled call, where it raised before x0's caller nodes ran (x0.grad None)
def test_seed49000_3836_unshrunk(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((4,))
            b0.requires_grad_()
            b1: T = subclasses.pair.PairTensor.from_tensor(torch.randn((4, 1, 2)))
            b1.requires_grad_()
            b1 = b1.clone()
        return (b0, b1, b1)

    def f(x0: T, x1: T, x2: T) -> object:
        x2.add_(2.0)
        x0.add(x0)
        set_to(x2, x2)
        t1 = x1.mul(x1)
        with torch.no_grad():
            x2.diagonal(1, 2, 0)
        x2.mul_(t1)
        return (x0, x1, t1)

    check_with_grad(f, make_inputs, compile_fn)

    def plain() -> tuple[object, ...]:
        b1 = nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(f, plain, compile_fn)


# variants of fuzz seed 49000 #3836: the set_() input written after, returned first, not returned, read before too
def test_seed49000_3836_variants(compile_fn: CompileFn | None) -> None:
    def written(x0: T, x1: T) -> object:
        set_to(x1, x1)
        t0 = x1.mul(x1)
        x1.mul_(t0)
        return (x0, x1, t0)

    def first(x0: T, x1: T) -> object:
        set_to(x1, x1)
        t0 = x1.mul(x1)
        x1.mul_(t0)
        return (x1, t0, x0)

    def unreturned(x0: T, x1: T) -> object:
        x1.add_(1.0)
        set_to(x1, x1)
        return (x0, x1.mul(2.0))

    def viewed(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x1.mul(x1), x0.view(-1), x1)

    for f in (written, first, unreturned, viewed):
        check_with_grad(f, lambda: (leaf(4), pair_nonleaf(4, 1, 2)), compile_fn)
        check_with_grad(f, lambda: (leaf(4), nonleaf(4, 1, 2)), compile_fn)
        check_with_grad(f, lambda: (pair(4, requires_grad=True), nonleaf(4, 1, 2)), compile_fn)


# variants of fuzz seed 49000 #9292 read only through a view taken before the set_(): the set_() advanced the version
# the view shares, so eager regenerates its grad_fn from the new accumulator (x0.grad None, as for the program)
def test_seed49000_9292_view_taken_before_self_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        v = x0.view(-1)
        _self_set(x0)
        t0 = v.add(-1.0)
        t1 = v.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    def read_before(x0: T) -> object:
        v = x0.view(-1)
        t0 = v.add(-1.0)
        _self_set(x0)
        t1 = t0.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    for make in _ALL:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
        check_with_grad(read_before, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_no_grad(f, lambda: (leaf(),), compile_fn)


def _view_of(make: Callable[..., T]) -> Callable[..., T]:
    """An input maker giving a view (row 0) of a (2, *shape) tensor from `make`."""

    def view(*shape: int) -> T:
        return make(2, *shape)[0]

    return view


# variants of fuzz seed 49000 #3836: the set_() input read after only through a view taken before it (eager's set_
# node gets the view's regenerated node), set_() twice, and passed as a view of another tensor
def test_seed49000_3836_view_read_after_set(compile_fn: CompileFn | None) -> None:
    def view_read(x0: T, x1: T) -> object:
        v = x1.view(-1)
        set_to(x1, x1)
        return (x0, x1, v.mul(v))

    def set_twice(x0: T, x1: T) -> object:
        set_to(x1, x1)
        t0 = x1.mul(x1)
        set_to(x1, x1)
        return (x0, x1, x1.add(t0))

    for make in (nonleaf, pair_nonleaf, _view_of(nonleaf), _view_of(pair_nonleaf)):
        for f in (view_read, set_twice):
            check_with_grad(f, lambda make=make: (leaf(4), make(4)), compile_fn)  # type: ignore[misc]
            check_with_grad(f, lambda make=make: (pair(4, requires_grad=True), make(4)), compile_fn)  # type: ignore[misc]


# variant of fuzz seed 49000 #3836: a plain input set_() under grad to another input's storage and read after, beside
# a returned leaf: its set_ node, which has an edge to that input's history, stays in the epilogue, where the order of
# a raising backward is out of reach: refused (Note [set_ Under Grad Before The Call]); a PairTensor one matches
def test_seed49000_3836_set_to_other_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x1, x2)
        t0 = x1.mul(x1)
        return (x0, x1, t0)

    match = "set_ Under Grad Before The Call"
    refused_with_grad(f, lambda: (leaf(4), nonleaf(4), nonleaf(4)), compile_fn, match)
    refused_with_grad(f, lambda: (pair(4, requires_grad=True), nonleaf(4), nonleaf(4)), compile_fn, match)
    check_with_grad(f, lambda: (leaf(4), pair_nonleaf(4), pair_nonleaf(4)), compile_fn)
