"""Fuzz regressions (helper set43): plain views set_() under no_grad and then used with grad (Note [Stale View
Functions]), dev seed 43000 #4392 and variants."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, pair, refused_with_grad

T = torch.Tensor
RULE = r"set_\(\) under (torch\.)?no_grad.*\(Note \[Stale View Functions\]\)"


def test_unsqueezed_view_set_to_its_base_then_cloned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #4392: eager rebuilds t0's history by as_strided() of x0 in t0's new layout (2, 2); the trace
    # replayed unsqueeze(0) and its backward raised ("invalid gradient ... expected shape compatible with [1, 2, 2]")
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x0)
        t1 = t0.clone()
        return (t1,)

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_transposed_view_set_to_its_base_same_shape(compile_fn: CompileFn | None) -> None:
    # a square t() set_() to its base: the replayed TBackward sent the gradient to the transposed elements
    def f(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(t0, x0)
        return (t0.mul(3.0),)

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_views_set_to_part_of_their_base(compile_fn: CompileFn | None) -> None:
    # set_() to a slice of the base, a select() set_() to the whole base, and a view of the view taken after
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        t1 = x1[1]
        with torch.no_grad():
            set_to(t0, x0[:, 1:])
            set_to(t1, x1)
        return (t0.clone(), t1.sum(0), t1.view(6).mul(2.0))

    check_with_grad(f, lambda: (leaf(2, 3), leaf(2, 3)), compile_fn)


def test_view_of_an_intermediate_set_to_it(compile_fn: CompileFn | None) -> None:
    # the base is an intermediate, returned too
    def f(x0: T) -> object:
        b = x0.mul(2.0)
        t0 = b.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, b)
        return (t0.mul(2.0), b)

    check_with_grad(f, lambda: (nonleaf(2, 2),), compile_fn)


def test_view_set_twice_read_in_between(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(t0, x0)
        a = t0.mul(2.0)
        with torch.no_grad():
            set_to(t0, x0[1])
        return (a, t0.mul(3.0))

    check_with_grad(f, lambda: (leaf(2, 3),), compile_fn)


def test_view_set_to_its_base_written_with_grad(compile_fn: CompileFn | None) -> None:
    # in-place writes with grad through the view: autograd rebases its base through eager's as_strided() view
    def f(x0: T, x1: T, x2: T) -> object:
        y = x0.mul(2.0)
        t0 = y.t()
        t1 = x1.t()
        with torch.no_grad():
            set_to(t0, y)
            set_to(t1, x1)
        t0.add_(x2)
        t0[0] = x2[1]
        t1.mul_(x2)
        return (y.mul(1.0), t1.mul(2.0))

    check_with_grad(f, lambda: (leaf(2, 2), torch.randn(2, 2), leaf(2, 2)), compile_fn)


def test_subclass_view_set_to_its_base(compile_fn: CompileFn | None) -> None:
    # a PairTensor view: eager rebuilds its history by replaying its view ops, as the trace does
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x0)
        return (t0.clone(), t0)

    check_with_grad(f, lambda: (pair(2, 2, requires_grad=True),), compile_fn)


def test_view_set_to_its_base_under_no_grad_program(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        set_to(t0, x0)
        return (t0.clone(), t0)

    check_no_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_view_set_to_a_larger_storage_then_read_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # eager's rebuilt history is as_strided() of x0 at t0's new layout, which x0's storage does not hold (a view set
    # to a tensor x0's storage holds is supported: Note [Stale View Functions])
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0.clone(),)

    refused_with_grad(f, lambda: (leaf(2, 2), torch.randn(3, 3)), compile_fn, RULE)


def test_subclass_view_of_an_intermediate_set_to_an_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #9334 (Note [Subclass Views set_() Off Their Base]): eager's t1 stays a wrapper-level view of
    # t0 with plain inner aliases of x1's; it came back as no view, with inner views of x1's
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        t1 = t0.reshape((1, -1, 2))
        set_to(t1, x1)
        return (t1,)

    check_with_grad(f, lambda: (leaf(1, 4, 3), pair(4)), compile_fn)


def test_subclass_views_set_off_their_base_under_no_grad(compile_fn: CompileFn | None) -> None:
    # the same without grad (refused before): a chain of two views, the base changed in place after, an
    # intermediate source, and a second view of the base returned too
    def f(x1: T, x2: T) -> object:
        t0 = x1.mul(2.0)
        t1 = t0.t()[1]
        t2 = t0[0]
        set_to(t1, x1[0])
        t0.add_(1.0)
        t3 = x2.add(1.0).view(6)
        set_to(t3, x2.mul(3.0))
        return (t1, t2, t3)

    check_no_grad(f, lambda: (pair(2, 3), pair(2, 3)), compile_fn)


def test_subclass_view_set_off_its_base_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        t1 = t0.reshape((2, 2))
        with torch.no_grad():
            set_to(t1, x1)
        t1.mul_(2.0)
        t0.t_()
        return (t1, x1)

    check_with_grad(f, lambda: (leaf(2), pair(4)), compile_fn)


def test_view_set_to_another_storage_read_but_not_differentiated(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #3583: the view on another storage is read with grad, but no gradient reaches what it made, so
    # only a backward through it is refused
    def f(x0: T, x1: T) -> object:
        t0 = x0.clone()
        t1 = x1.reshape((1, 1, 4))
        t0.transpose_(0, 0)
        with torch.no_grad():
            set_to(t1, t0)
        t1.unsqueeze(0)
        return (x0, t1.detach().mul(2.0))

    def make() -> tuple[T, T]:
        x = leaf(4)
        return x, x

    check_with_grad(f, make, compile_fn)


def test_view_set_to_another_storage_then_written_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        y = x0.mul(1.0)
        t0 = y.t()
        with torch.no_grad():
            set_to(t0, x1)
        t0.add_(x2)
        return (y, t0)

    refused_with_grad(f, lambda: (leaf(3, 2), torch.randn(3, 2), leaf(3, 2)), compile_fn, RULE)
