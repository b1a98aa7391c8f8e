"""Fuzz regressions (helper div41): wrong results of dev seed 41000 (backward errors and the order of gradients)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair
from tests.pipeline.fuzz_helpers import leaf as _leaf

T = torch.Tensor


def test_returned_leaf_gets_its_gradient_before_a_raising_backward(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #1981 (Note [Returned Leaves Outside A Raising Backward]): t1's backward fails (x1 was saved,
    # then written); x0 reaches only x1's new value, so eager accumulates x0's gradient from the output x0 first
    def f(x0: T, x1: T) -> object:
        t0 = x0.expand(())
        t1 = x1.mul(x1)
        x1.add_(t0)
        return (t1, x0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_leaf(), nonleaf(3, 2)), compile_fn=compile_fn)


def test_returned_subclass_leaf_first_before_a_raising_backward(compile_fn: CompileFn | None) -> None:
    # #1981 with tensor subclasses, the leaf returned first
    def f(x0: T, x1: T) -> object:
        t1 = x1.mul(x1)
        x1.add_(x0)
        return (x0, t1)

    def make() -> tuple[T, T]:
        with torch.enable_grad():
            return pair(requires_grad=True), pair(3, 2, requires_grad=True).clone()

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_subclass_view_written_under_no_grad_before_a_raising_backward(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #7600: x0 (a view of a leaf) written under no_grad regenerates its grad_fn when the caller
    # reads it, after the program's nodes, so eager's leaf gets its gradient before t1's backward fails; the
    # epilogue copies x0's new value in under no_grad, so x0 goes in detached (Note [Unreached Inputs Are Detached])
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.add_(2.0)
            t0 = x0.reshape(())
        t1 = t0.mul(0.5)
        t1.mul_(t1)
        return (x0, t1)

    def make() -> tuple[T]:
        with torch.enable_grad():
            return (pair(requires_grad=True).reshape(()),)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_written_as_strided_view_escaping_its_slice_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #9801 (Note [as_strided On Inputs]): x0 reaches element 0, which the empty slice
    # it was taken of does not cover; eager's add_ sends that element's gradient to the base
    def f(x0: T) -> object:
        t0 = x0.expand(())
        t0.add_(2.0)
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (nonleaf(4)[1:1:2].as_strided((), (), 0),), compile_fn, r"args\[0\]: an as_strided\(\) view"
        )


def test_written_as_strided_view_inside_its_slice(compile_fn: CompileFn | None) -> None:
    # the same write through an as_strided() view that stays inside the slice it was taken of runs
    def f(x0: T) -> object:
        t0 = x0.expand(2)
        t0.add_(2.0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4)[1:3].as_strided((2,), (1,), 1),), compile_fn=compile_fn)


def test_data_assignment_keeps_the_leaf_accumulator(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #1312 (Note [data Assignment Keeps A Leaf's Accumulator]): eager's x0.grad keeps size (1,)
    def f(x0: T) -> object:
        t0 = x0.reshape(())
        t1 = x0.unsqueeze(1)
        x0.data = t1
        t2 = t0.clone()
        return (t2, x0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_leaf(1),), compile_fn=compile_fn)


def test_data_assignment_of_an_unsqueeze_keeps_the_leaf_accumulator(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.sum()
        x0.data = x0.unsqueeze(0)
        return (t0, x0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_leaf(3),), compile_fn=compile_fn)


def test_view_of_intermediate_assigned_an_intermediate(compile_fn: CompileFn | None) -> None:
    # the same over an intermediate's storage is a graph output, with its history
    def f(x0: T) -> object:
        t0 = x0.sin()
        t0.data = x0.cos()
        t1 = t0.view(())
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def test_data_assigned_subclass_backward_error_deferred_beside_a_returned_input(
    compile_fn: CompileFn | None,
) -> None:
    # fuzz seed 41000 #2043 (Note [Probing Eager's Backward]): eager's backward fails its size check at t0's node
    # before x1's history runs; the probe's stand-in for that history ran first and hid the error
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x0.add(-1.0)
        return (x1, t0)

    def make() -> tuple[T, T]:
        with torch.enable_grad():
            return pair(requires_grad=True), pair(2, 1, requires_grad=True).clone()

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
