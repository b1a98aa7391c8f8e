"""Fuzz regressions (seed 7000): set_() under grad in training, outputs beside other outputs that require grad.

Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
`--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad as _check
from tests.pipeline.fuzz_helpers import leaf as _leaf
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf, twice
from tests.pipeline.fuzz_helpers import refused_with_grad as assert_refused

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# A set_() output beside other outputs that require grad (Note [Outputs set_() Under Grad])


def test_set_output_beside_returned_nonleaf_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #380: refused before; both backwards raise, no leaf gets a gradient
    def f(x0: T) -> object:
        t0 = x0.sum(0)
        set_to(t0, t0)
        return (x0, t0)

    _check(f, lambda: (nonleaf(2, 3, 3),), compile_fn)


def test_set_output_beside_intermediate_of_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #742
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.add(3.0)
        set_to(t1, x0)
        return (t0, t1)

    _check(f, lambda: (_leaf(4),), compile_fn)


def test_subclass_set_output_read_after_the_set(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1249: eager's set_ node waits for the add that reads t0 after the set_
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = x0.add(x0)
        set_to(t0, t1)
        t2 = t0.add(0.5)
        return (t2, t0)

    _check(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_set_output_to_input_read_after_the_set(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #9601
    def f(x0: T) -> object:
        t0 = x0.add(-1.0)
        set_to(t0, x0)
        t1 = x0.add(t0)
        return (t0, t1)

    _check(f, lambda: (_leaf(2, 3, 3),), compile_fn)


def test_subclass_set_output_beside_view_of_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1577 (one input passed twice)
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x0)
        t1 = x0.unsqueeze(0)
        set_to(t0, x0)
        return (t1, t0)

    _check(f, twice(pair_nonleaf), compile_fn)


def test_subclass_clone_set_to_returned_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8642
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (x0, t0)

    _check(f, lambda: (pair_nonleaf(2, 3),), compile_fn)


def test_set_output_of_reshaped_clone(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2259
    def f(x0: T) -> object:
        t0 = x0.reshape((1, 4, 2))
        t2 = x0.clone().reshape((2, 1, 4))
        set_to(t2, t2.contiguous())
        return (t0, t2)

    _check(f, lambda: (nonleaf(2, 4),), compile_fn)


def test_set_output_beside_returned_leaf_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4015: eager's add on x0 (reached only through the set_ node) keeps x0's gradient back; a
    # compiled x0 reached by the loss alone would get one
    def f(x0: T) -> object:
        t1 = x0.add(x0).t()
        set_to(t1, t1)
        return (t1, x0)

    assert_refused(f, lambda: (_leaf(1, 4),), compile_fn, "an autograd leaf that requires grad")


def test_set_output_after_returned_unused_leaf_refused(compile_fn: CompileFn | None) -> None:
    # eager's set_ node raises before the loss reaches x0; the Function's deferred error would not
    def f(x0: T, x1: T) -> object:
        t0 = x1.clone()
        set_to(t0, t0)
        return (x0, t0)

    assert_refused(f, lambda: (_leaf(3), nonleaf(3)), compile_fn, "an autograd leaf that requires grad")


def test_set_output_beside_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6854: one leaf passed twice is one input (Note [One Tensor Passed Several Times]), behind the
    # raising set_ node (Note [Leaves Behind A Raising set_ Node]): supported; a leaf the set_ node does not reach
    # (two distinct leaves) stays refused
    def f(x0: T, x1: T) -> object:
        t0 = x1.clone()
        set_to(t0, t0)
        return (t0, x0)

    _check(f, twice(lambda: _leaf(1, 3)), compile_fn)
    assert_refused(f, lambda: (_leaf(1, 3), _leaf(1, 3)), compile_fn, "an autograd leaf that requires grad")


# ---------------------------------------------------------------------------------------------------------------
# A view taken of an intermediate after the program set_() it under grad (Note [Outputs set_() Under Grad])


def test_view_after_set_of_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4697: refused before; eager's t1 is a view of t0 (returned by no one), its grad_fn through
    # the set_
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        set_to(t0, x0)
        t1 = t0.t()
        return (t1,)

    _check(f, lambda: (_leaf(2),), compile_fn)


def test_subclass_view_after_set_of_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1471
    def f(x0: T) -> object:
        t0 = x0.as_strided((), (), 2)
        t1 = x0.sin()
        set_to(t1, t0)
        return (t1.reshape(()),)

    _check(f, lambda: (pair(2, 2, 1, requires_grad=True),), compile_fn)


def test_view_chain_after_set_beside_another_output(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        set_to(t0, x0)
        return (t0.t().unsqueeze(0), x0 * 2)

    _check(f, lambda: (_leaf(2, 3),), compile_fn)


def test_subclass_view_after_set_of_clone(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, t0)
        return (t0[1:],)

    _check(f, lambda: (pair_nonleaf(3, 2),), compile_fn)


def test_view_after_set_of_returned_intermediate_refused(compile_fn: CompileFn | None) -> None:
    # eager's view has the returned t0 as its `_base`
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        set_to(t0, x0)
        return (t0.view(-1), t0)

    assert_refused(f, lambda: (_leaf(2, 3),), compile_fn, "before taking the view")


def test_view_after_set_of_view_of_input_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2196: t0 is a view of the input, whose history eager rebases on the set_ (refused by the stale-view rule, which runs first)
    def f(x0: T) -> object:
        t0 = x0.view((3, 1))
        set_to(t0, t0.transpose(1, 0))
        return (t0.reshape((1, -1, 1)),)

    assert_refused(
        f, lambda: (pair_nonleaf(1, 1, 3),), compile_fn, "used with grad after the program changed the layout"
    )


# ---------------------------------------------------------------------------------------------------------------
# An output that an input was set_() or `.data =`-assigned to (Note [Outputs That An Input Was set_() To])


def test_output_input_was_set_to_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #292: refused before; eager's t0 keeps MulBackward and shares x0's new storage
    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        set_to(x0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(),), compile_fn)


def test_output_input_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #523, #5356
    def f(x0: T) -> object:
        t1 = x0.mul(x0.clone())
        x0.data = t1
        return (t1,)

    _check(f, lambda: (nonleaf(1, 2, 2),), compile_fn)


def test_output_leaf_input_was_set_to_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #831
    def f(x0: T) -> object:
        t0 = x0.add(3.0)
        with torch.no_grad():
            set_to(x0, t0)
        return (t0,)

    _check(f, lambda: (_leaf(1, 4, 1),), compile_fn)


def test_output_leaf_passed_twice_set_to_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #3276
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            set_to(x1, t0)
        return (t0,)

    _check(f, twice(lambda: _leaf(1, 1, 3)), compile_fn)


def test_output_without_grad_assigned_to_leaf_data(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #3507: rebuilt from x0 it would require grad
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(2.0)
        x0.data = t0
        return (t0,)

    _check(f, lambda: (_leaf(), torch.randn(())), compile_fn)


def test_output_input_was_set_to_then_written(compile_fn: CompileFn | None) -> None:
    # the write through x0 reaches t0 (one storage), whose history saved exp's result
    def f(x0: T) -> object:
        t0 = x0.exp()
        set_to(x0, t0)
        with torch.no_grad():
            x0.mul_(2)
        return (t0,)

    _check(f, lambda: (nonleaf(3),), compile_fn)


def test_view_input_was_set_to_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #282: t1 is a view of t0; eager's `_base` is t0
    def f(x0: T) -> object:
        t1 = x0.clone().transpose(0, 1)
        set_to(x0, t1)
        return (t1,)

    assert_refused(f, lambda: (nonleaf(1, 3, 1),), compile_fn, "set_\\(\\) to a new tensor that requires grad")


def test_subclass_output_input_was_set_to_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7966
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(x0, t0)
        return (t0,)

    assert_refused(f, lambda: (pair_nonleaf(4),), compile_fn, "set_\\(\\) to a new tensor that requires grad")


def test_output_input_was_set_to_beside_view_of_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #292 (shortened): t2, a view of x1 (x0 passed twice) taken after the set_, shares t0's storage
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            set_to(x0, t0)
        t2 = x1.t()
        t2.unsqueeze_(0)
        return (t2, t0)

    _check(f, twice(nonleaf), compile_fn)


def test_output_assigned_to_data_after_no_grad_view_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7885: t1, a no_grad view of x0, makes eager's t2 require grad; the traced one would not
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t1 = x0.unsqueeze(-3).as_strided((), (), 2)
        t2 = x1.add(t1)
        x0.data = t2
        return (t2,)

    assert_refused(
        f, lambda: (nonleaf(4, 3, 3), torch.randn(3, 4)), compile_fn, "set_\\(\\) to a new tensor that requires grad"
    )
