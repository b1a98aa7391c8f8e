"""Fuzz regressions (helper p109): set_() onto a view of an input at a storage offset, taken after the input was
written (Note [Offsets After A Write]), dev seed 44000 #109, and absolute offsets on such inputs (as_strided(),
set_(storage, offset, ...): Note [Offsets After A Write])."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _at_offset(make: object, shape: tuple[int, ...], view: object) -> tuple[T, T]:
    """(a (2,) tensor, view(a tensor of `shape`)): the second input sits at a nonzero offset of its storage."""
    assert callable(make) and callable(view)
    with torch.enable_grad():
        return make(2), view(make(*shape))


def test_set_to_unsqueezed_view_of_written_select_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #109: x0 ended at offset 0 of b1's storage (the offset the view reports after the write),
    # eager's is 2, with the values there
    def f(x0: T, x1: T) -> object:
        x1.add_(-1.0)
        t0 = x1.unsqueeze(0)
        set_to(x0, t0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b1 = torch.randn(4)
        return (torch.randn(1), b1.select(0, 2))

    check_no_grad(f, make_inputs, compile_fn)


def test_set_to_views_of_written_row_input(compile_fn: CompileFn | None) -> None:
    # other views of x1 (slice, transpose, expand), x0 also returned beside a view; with grad, and x1 requiring grad
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        t0 = x1[1:].unsqueeze(0).transpose(0, 1)
        set_to(x0, t0)
        return (x0, x1.unsqueeze(0).expand(2, 4).sum(0))

    check_no_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(nonleaf, (3, 4), lambda b: b[1]), compile_fn)


def test_set_to_view_of_written_pair_input(compile_fn: CompileFn | None) -> None:
    # a PairTensor at an offset; x0 then written through
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        set_to(x0, x1[1:3])
        x0.mul_(3.0)
        return (x0, x1)

    check_no_grad(f, lambda: _at_offset(pair, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(pair, (3, 4), lambda b: b.t()[1:]), compile_fn)


def test_set_to_written_input_itself_and_view_taken_before(compile_fn: CompileFn | None) -> None:
    # set_() onto x1 itself, and onto a view taken before the write: their offsets were eager's already
    def f(x0: T, x1: T, x2: T) -> object:
        t2 = x2[1:]
        x1.add_(-1.0)
        x2.add_(1.0)
        set_to(x0, x1)
        set_to(x2, t2)
        return (x0, x2)

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(3, 4)
        return (torch.randn(2), b[1], pair_nonleaf(3, 4)[2].detach())

    check_no_grad(f, make_inputs, compile_fn)


def test_set_storage_at_absolute_offset_of_written_input(compile_fn: CompileFn | None) -> None:
    # set_(storage, offset, ...) names eager's offset: after the write it named other elements (a wrong x0, or an
    # "out of bounds" setStorage error once x0 was read); offset 0 is outside x1's elements (a synthetic base)
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x0.set_(x1.untyped_storage(), x1.storage_offset() + 1, (2,), (1,))
        x0.mul_(2.0)
        return (x0, x0 * 2.0)

    def g(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x0.set_(x1.untyped_storage(), 0, (2,), (1,))
        return (x0 * 2.0, x0)

    for fn in (f, g):
        check_no_grad(fn, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
        check_with_grad(fn, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)


def test_as_strided_at_absolute_offset_of_written_input(compile_fn: CompileFn | None) -> None:
    # as_strided() after a write to an input at an offset: "setStorage: ... out of bounds" at main
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        y = x1.as_strided((2,), (1,), 5)
        return (y * 2.0, y)

    check_no_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)


def test_view_set_to_written_input_at_offset_then_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #1228 (also #4584, #7294): refused by Note [Offsets After A Write] until the
    # rebuilt output's leaves carried eager's offsets; x0 is an unbind() output at offset 6
    def f(x0: T) -> object:
        t0 = x0.view((1, 2, 1))
        set_to(t0, x0)
        t0.add_(x0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((2, 3, 3))
        return (b0.view((1, 2, 9)).unbind(2)[6],)

    check_no_grad(f, make_inputs, compile_fn)


def test_view_set_to_views_of_written_input_at_offset(compile_fn: CompileFn | None) -> None:
    # variants: the set_ source a view taken after the write (slice, transpose), a PairTensor input, with grad
    def f(x0: T) -> object:
        x0.add_(1.0)
        t0 = x0.view(-1).unsqueeze(0)
        set_to(t0, x0.unsqueeze(0).transpose(0, 1)[1:])
        t0.mul_(2.0)
        return (t0,)

    for make_inputs in (lambda: (torch.randn(3, 4)[1],), lambda: (pair(3, 4)[1],)):
        check_no_grad(f, make_inputs, compile_fn)
        check_with_grad(f, make_inputs, compile_fn)


def test_view_of_other_input_set_to_view_of_written_input(compile_fn: CompileFn | None) -> None:
    # a view of x0 set_() onto a slice of the written x1 (at offset 8), returned beside x0
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        t0 = x0[0:1]
        set_to(t0, x1[1:])
        t0.add_(x1.sum())
        return (t0, x0)

    for make_inputs in (lambda: (torch.randn(3), torch.randn(3, 4)[2]), lambda: (pair(3), pair(3, 4)[2])):
        check_no_grad(f, make_inputs, compile_fn)
        check_with_grad(f, make_inputs, compile_fn)
