"""Fuzz regressions (helper offset): absolute offsets on inputs at a nonzero storage offset. as_strided() views and
set_(storage, offset, ...) taken before a write to the input itself (Note [Offsets After A Write]),
as_strided_() of a view (Note [as_strided On Inputs]), as_strided() of a view without an offset. Source: helper
p109's hand-written variant (tests/pipeline/test_fuzz_p109.py) and its family, after torch's
test/functorch/test_aotdispatch.py (test_input_mutation_storage_offset, as_strided views of inputs)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import (
    assert_refused,
    check_no_grad,
    check_with_grad,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

T = torch.Tensor
ESCAPING_READ = r"outside it, taken before a write to its storage: .*Note \[as_strided On Inputs\]"
Maker = Callable[[], tuple[object, ...]]


def _inputs(make: Callable[..., T], shape: tuple[int, ...], view: Callable[[T], T], other: Callable[..., T]) -> Maker:
    """(a (2,) tensor, view(a tensor of `shape`)): the second input sits at a nonzero offset of its storage."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return other(2), view(make(*shape))

    return make_inputs


def _row(b: T) -> T:
    return b[1]  # offset 4 of a 12-element storage, elements 4..7


def _slice(b: T) -> T:
    return b[2:8]  # offset 2, elements 2..7


def _column(b: T) -> T:
    return b[:, 1]  # offset 1, elements 1, 5, 9


def _plain(shape: tuple[int, ...], view: Callable[[T], T]) -> Maker:
    return _inputs(torch.randn, shape, view, torch.randn)


def _check_all(f: Callable[..., object], compile_fn: CompileFn | None, views: tuple[Callable[[T], T], ...]) -> None:
    """Plain and PairTensor inputs, leaf and non-leaf, with grad and under no_grad."""
    for view in views:
        shape = (12,) if view is _slice else (3, 4)
        makers: tuple[tuple[Callable[..., T], Callable[..., T]], ...] = ((torch.randn, torch.randn), (pair, pair))
        for make, other in makers:
            check_no_grad(f, _inputs(make, shape, view, other), compile_fn)
            check_with_grad(f, _inputs(make, shape, view, other), compile_fn)
        for make, other in ((nonleaf, torch.randn), (pair_nonleaf, pair)):
            check_with_grad(f, _inputs(make, shape, view, other), compile_fn)


def test_as_strided_before_write_of_input_at_offset(compile_fn: CompileFn | None) -> None:
    # helper p109's variant: "setStorage: ... out of bounds" at main (y replayed at offset 5 on x1's regenerated
    # 4-element value); returned beside x1, and read after a second write
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1.add_(1.0)
        return (y * 2.0,)

    def g(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1.add_(1.0)
        x1.mul_(x0.sum())
        return (x1, y.sum(), y)

    _check_all(f, compile_fn, (_row, _slice))
    _check_all(g, compile_fn, (_row,))


def test_as_strided_before_write_reads_other_elements(compile_fn: CompileFn | None) -> None:
    # (1,) at offset 5 of x1 = b[2:8]: in bounds of the regenerated value, it read b[7] for eager's b[5] (a wrong
    # result at main, no error); a view of it taken before the write; the offset given by keyword
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((1,), (1,), 5)
        z = x1.as_strided((2,), (1,), 4)[1:]
        x1.add_(1.0)
        return (y * 2.0, z + x0)

    def g(x0: T, x1: T) -> object:
        y = torch.as_strided(x1, (2,), (1,), storage_offset=3)
        x1.sub_(x0.sum())
        return (y + x0,)

    _check_all(f, compile_fn, (_slice,))
    _check_all(g, compile_fn, (_slice,))


def test_as_strided_before_writes_through_view_and_input(compile_fn: CompileFn | None) -> None:
    # a write through a view of x1 keeps the frame, the next one through x1 itself moves it; y then written
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1[1:].add_(1.0)
        x1.mul_(2.0)
        y.add_(x0)
        return (y, x1)

    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(f, _plain(shape, view), compile_fn)
        check_no_grad(f, _inputs(pair, shape, view, pair), compile_fn)


def test_as_strided_before_write_under_no_grad_inside(compile_fn: CompileFn | None) -> None:
    # the write under torch.no_grad() inside a training program; y written first, then x1
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        with torch.no_grad():
            x1.add_(1.0)
        return (y * 2.0,)

    def g(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        y.mul_(2.0)
        x1.add_(1.0)
        return (y.sum(), x1)

    _check_all(f, compile_fn, (_row, _slice))
    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(g, _plain(shape, view), compile_fn)
        check_with_grad(g, _inputs(pair, shape, view, pair), compile_fn)


def test_set_storage_at_offset_before_write_of_input(compile_fn: CompileFn | None) -> None:
    # x0.set_(storage, 5, ...) rebinds x0 by an as_strided at offset 5: the same failure as an as_strided() view
    def f(x0: T, x1: T) -> object:
        x0.set_(x1.untyped_storage(), 5, (2,), (1,))
        x1.add_(1.0)
        return (x0 * 2.0, x0)

    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(f, _plain(shape, view), compile_fn)
        check_with_grad(f, _plain(shape, view), compile_fn)


def test_write_through_set_storage_target_refused(compile_fn: CompileFn | None) -> None:
    # then written through x0: functionalization's refusal of a write after an as_strided not first in its chain
    # (the crash of main's "setStorage: ... out of bounds" before it, on these inputs)
    def f(x0: T, x1: T) -> object:
        x0.set_(x1.untyped_storage(), 5, (2,), (1,))
        x1.mul_(2.0)
        x0.add_(1.0)
        return (x0, x1)

    with torch.no_grad():
        assert_refused(f, _plain((3, 4), _row), compile_fn, "not the first view of its chain")


def test_in_place_as_strided_and_write_of_input_at_offset(compile_fn: CompileFn | None) -> None:
    # as_strided_() before the write: a wrong offset and base at main with grad; after it: "out of bounds" at main
    def f(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,), 5)
        x1.add_(1.0)
        return (x1 * 2.0,)

    def g(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x1.as_strided_((2,), (1,), 5)
        return (x1 * 2.0, x1)

    for fn in (f, g):
        for view in (_row, _slice):
            shape = (12,) if view is _slice else (3, 4)
            check_no_grad(fn, _plain(shape, view), compile_fn)
            check_with_grad(fn, _plain(shape, view), compile_fn)


def test_in_place_as_strided_of_a_view_then_written(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: as_strided_() reaching outside x1 (x1 traced as a view of a synthetic base), or
    # of a column (not dense), then a write: wrong values at main
    def f(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,), 9)
        x1.add_(1.0)
        return (x1 * 2.0,)

    def g(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,))
        x1.add_(1.0)
        return (x1 * 2.0, x1)

    check_no_grad(f, _plain((3, 4), _row), compile_fn)
    check_no_grad(g, _plain((3, 4), _column), compile_fn)
    check_no_grad(g, _plain((3, 4), _row), compile_fn)


def test_as_strided_of_view_without_offset(compile_fn: CompileFn | None) -> None:
    # x1[1:].as_strided(size, stride) takes the view's own offset in eager; main took the chain root's
    def f(x0: T, x1: T) -> object:
        y = x1[1:].as_strided((2,), (1,))
        return (y * 2.0, y)

    def g(x0: T, x1: T) -> object:
        y = x1[1:].as_strided((2,), (1,))
        x1.add_(1.0)
        return (y * 2.0, y)

    for fn in (f, g):
        for view in (_row, _slice, _column):
            shape = (12,) if view is _slice else (3, 4)
            check_no_grad(fn, _plain(shape, view), compile_fn)
            check_with_grad(fn, _plain(shape, view), compile_fn)


def test_escaping_as_strided_view_used_after_write_refused(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: y reaches b[0, 3], outside x1 = b[1]; used with grad
    # after x1's write, eager's gradient reaches b[0, 3] through the base (a wrong gradient at main); also a view of
    # y, and the write under no_grad
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 3)
        x1.mul_(2.0)
        return (y * 1.0,)

    def g(x0: T, x1: T) -> object:
        z = x1.as_strided((2,), (1,), 3)[1:]
        with torch.no_grad():
            x1.add_(1.0)
        return (z + x0,)

    for fn in (f, g):
        refused_with_grad(fn, _inputs(nonleaf, (3, 4), _row, torch.randn), compile_fn, ESCAPING_READ)
        check_with_grad(fn, _inputs(pair_nonleaf, (3, 4), _row, pair), compile_fn)  # (a subclass's is exact)
        check_no_grad(fn, _inputs(torch.randn, (3, 4), _row, torch.randn), compile_fn)


def test_escaping_as_strided_view_used_before_write_or_taken_after(compile_fn: CompileFn | None) -> None:
    # the neighbours that are exact: used before the write, returned as it is, taken after the write
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 3)
        z = y * 1.0
        x1.mul_(2.0)
        return (z, y)

    def g(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        y = x1.as_strided((2,), (1,), 3)
        return (y * 1.0,)

    for fn in (f, g):
        check_with_grad(fn, _inputs(nonleaf, (3, 4), _row, torch.randn), compile_fn)
        check_with_grad(fn, _inputs(nonleaf, (3, 4), _column, torch.randn), compile_fn)
