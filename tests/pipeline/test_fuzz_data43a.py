"""Fuzz follow-ups (seed 43000): `.data =` on an input passed twice: a no_grad view of it taken after the
program's last write to it (Note [Early Views Made After The Last Write]); a subclass view taken before a set_() of
its input's wrapper whose size a `.data =` then gives back."""

from __future__ import annotations

from collections.abc import Callable

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


def test_no_grad_view_after_the_last_write_reads_fine(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #2024 (shrunk): t0 was made after x0.add_ and before `.data =`, which leaves the counter alone:
    # eager's is_leaf reads True; ours, made before the epilogue's write, raised
    def f(x0: T, x1: T) -> object:
        x0.add_(2.0)
        t0 = x1.expand((2, -1, 4))
        t1 = x0.add(3.0)
        x0.data = t1
        return (t0,)

    def chained(x0: T, x1: T) -> object:  # several steps, one of a multi-output op, and the input returned
        x0.mul_(2.0)
        t0 = x1.unbind(0)[0].unsqueeze(0)
        x0.data = x0.add(3.0)
        x1.data = x0.mul(2.0)
        return (t0, x0)

    for fn in (f, chained):
        for make in (lambda: nonleaf(1, 4, 4), lambda: leaf(1, 4, 4), lambda: pair_nonleaf(1, 4, 4)):
            check_no_grad(fn, twice(make), compile_fn)


def test_no_grad_view_before_a_write_still_raises(compile_fn: CompileFn | None) -> None:
    # written after the view: eager's grad_fn raises; with the input passed twice that stays refused
    def f(x0: T, x1: T) -> object:
        x0.add_(2.0)
        t0 = x1.expand((2, -1, 4))
        x0.add_(1.0)
        x0.data = x0.add(3.0)
        return (t0,)

    def other_input(x0: T, x1: T) -> object:  # x1 a view of x0: the write advances the counter they share
        x0.add_(2.0)
        t0 = x0.expand((2, -1, 4))
        x1.add_(1.0)
        x0.data = x0.add(3.0)
        return (t0,)

    with torch.no_grad():
        assert_refused(f, twice(lambda: nonleaf(1, 4, 4)), compile_fn, "its grad_fn raises in eager")
    check_no_grad(other_input, lambda: (lambda b: (b, b[:]))(nonleaf(1, 4, 4)), compile_fn)


def _with_view(make: Callable[[], T], view: Callable[[T], T]) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        b0 = make()
        return (b0, view(b0), b0)

    return make_inputs


def test_subclass_view_before_a_wrapper_set_then_data_back(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #8272 (shrunk): `.data =` gives x2's wrapper back the size t0 was taken at, but its inner
    # tensors keep the set_() target's layout: t0 replayed from x2 after the epilogue got that layout, eager's not
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2.detach()
        set_to(x0, x1)
        x2.data = t0
        return (t0,)

    def unsqueezed(x0: T, x1: T, x2: T) -> object:
        t0 = x2.unsqueeze(0)
        set_to(x0, x1)
        x2.data = t0[0]
        return (t0, x2)

    makes = (
        _with_view(lambda: pair(3, 4, 4), lambda b: b.unbind(2)[3]),
        _with_view(lambda: pair_nonleaf(3, 4, 4), lambda b: b.unbind(2)[3]),
        _with_view(lambda: pair(3, 4, 4), lambda b: b[1:2]),
        _with_view(lambda: torch.randn(3, 4, 4), lambda b: b.unbind(2)[3]),
    )
    for fn in (f, unsqueezed):
        for make_inputs in makes:
            check_no_grad(fn, make_inputs, compile_fn)
    check_with_grad(f, makes[0], compile_fn)
    check_with_grad(unsqueezed, makes[2], compile_fn)


_DATA_RESIZE_RULE = r"to a tensor of another size \(or assigned one by `\.data =` before any use with grad\)"


def test_leaf_assigned_data_of_another_size_before_a_use_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #7773 (shrunk): eager makes x0's gradient accumulator at x0.sin(), in the size (3, 4, 1); ours
    # was made at the call in the size () and the gradient summed down to it
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x0.sin()
        return (t0,)

    def view_after(x0: T, x1: T) -> object:  # a view taken after the assignment, read with grad
        x0.data = x1
        t0 = x0.unsqueeze(0)
        return (t0.mul(2),)

    for fn in (f, view_after):
        for make_inputs in (lambda: (leaf(), torch.randn(3, 4, 1)), lambda: (leaf(2), torch.randn(3, 4, 2))):
            with torch.enable_grad():
                assert_refused(fn, make_inputs, compile_fn, _DATA_RESIZE_RULE)


def test_leaf_assigned_data_after_a_use_with_grad_keeps_its_accumulator(compile_fn: CompileFn | None) -> None:
    # read with grad first: eager's accumulator keeps the size it had then, as ours (Note [data Assignment Keeps A
    # Leaf's Accumulator]); a non-leaf's gradient goes through its own history; a same-size assignment is no resize
    def before(x0: T, x1: T) -> object:
        t = x0.mul(2)
        x0.data = x1
        return (x0.sin(), t)

    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.sin(),)

    check_with_grad(before, lambda: (leaf(), torch.randn(3, 4, 1)), compile_fn)
    check_with_grad(f, lambda: (nonleaf(), torch.randn(3, 4, 1)), compile_fn)
    check_with_grad(f, lambda: (leaf(3, 4, 1), torch.randn(3, 4, 1)), compile_fn)
    check_with_grad(f, lambda: (pair(requires_grad=True), pair(3, 4, 1)), compile_fn)
