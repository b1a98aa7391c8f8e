"""Fuzz regressions (seed 40000): set_() with grad enabled of a view of an input (Note [Views Of Inputs set_() Under
Grad]).

Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
`--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad as _check
from tests.pipeline.fuzz_helpers import nonleaf, pair, pair_nonleaf
from tests.pipeline.fuzz_helpers import refused_with_grad as assert_refused

T = torch.Tensor

_ORDER_RULE = "set_\\(\\) a view of this input with grad enabled"


# ---------------------------------------------------------------------------------------------------------------
# A returned view of an input, set_() under grad: supported


def test_plain_view_of_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #26 (refused before)
    def f(x0: T) -> object:
        t0 = x0.diagonal(0, 1, 0)
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(1, 2),), compile_fn)


def test_subclass_view_of_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1538 (refused before)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, -1))
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(),), compile_fn)


def test_subclass_view_of_input_set_to_its_own_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2713 (refused before)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, -1))
        t1 = t0[:, 0:1:1]
        set_to(t0, t1)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(),), compile_fn)


def test_subclass_view_of_input_set_to_the_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2842 (refused before): t0 stays a view of x0, with x0's layout
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        set_to(t0, x0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(2, 2),), compile_fn)


def test_plain_view_of_input_set_to_the_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        set_to(t0, x0)
        return (t0,)

    _check(f, lambda: (nonleaf(2, 2),), compile_fn)


def test_plain_view_of_input_set_to_a_narrower_view(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.reshape((2, -1))
        set_to(t0, t0[:, 0:1])
        return (t0,)

    _check(f, lambda: (nonleaf(2, 3),), compile_fn)


def test_view_set_beside_the_input_and_another_view(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0[1]
        t0 = x0[0]
        set_to(t0, t0)
        return (t0, x0, t1, x0.t())

    _check(f, lambda: (nonleaf(2, 3),), compile_fn)
    _check(f, lambda: (pair_nonleaf(2, 3),), compile_fn)


def test_subclass_view_set_to_another_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0[0].unsqueeze(0)
        set_to(t0, x1)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(2, 3), pair(4)), compile_fn)


def test_view_set_then_input_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.mul_(x1)
        t0 = x0[0]
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn)


def test_view_of_input_view_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 42000 #4220 (diverged when first supported: the graph computed the view, whose `._base` was not
    # eager's; then refused): now replayed from the input, then set_() (Replay.then_set; fuzz seed 14000 #2383)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, 3, 1))
        t1 = t0.mul(2.0)
        set_to(t0, t1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 4, 1).diagonal(0, 0, 1),)

    _check(f, make_inputs, compile_fn)


def test_plain_view_of_input_set_onto_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #7491 (refused before): t0 stays a view of x0 (`._base`) on x1's storage
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        t0 = x0.t()
        set_to(t0, x1)
        with torch.no_grad():
            x1.unsqueeze(2)
        return (t0,)

    _check(f, lambda: (nonleaf(), nonleaf(4, 1)), compile_fn)


def test_views_of_input_set_onto_other_inputs(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        t1 = x0[1]
        set_to(t0, x1)
        set_to(t1, x1[1:])
        return (t0, t1, x1, x0)

    _check(f, lambda: (nonleaf(2, 3), torch.randn(4)), compile_fn)
    _check(f, lambda: (nonleaf(2, 3), nonleaf(4)), compile_fn)
    _check(f, lambda: (pair_nonleaf(2, 3), pair(4)), compile_fn)

    def g(x0: T, x1: T) -> object:
        t0 = x0.t()
        set_to(t0, x1)
        return (t0, x1, x0)

    _check(g, lambda: (torch.randn(2, 3), nonleaf(4)), compile_fn)  # x0 gains grad


def test_view_of_input_set_onto_grad_leaf_refused(compile_fn: CompileFn | None) -> None:
    # diverged when first supported (x1.grad a tensor vs eager None): eager's set_ node holds back x1's gradient
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        set_to(t0, x1)
        return (t0, x1)

    rule = "an autograd leaf that requires grad: eager's set_ node holds"
    assert_refused(f, lambda: (nonleaf(2, 3), torch.randn(4, requires_grad=True)), compile_fn, rule)
    assert_refused(f, lambda: (pair_nonleaf(2, 3), pair(4, requires_grad=True)), compile_fn, rule)


# ---------------------------------------------------------------------------------------------------------------
# Eager's backward gives a leaf its gradient before the set_'s node raises: refused


def test_view_set_beside_an_unrelated_output_refused(compile_fn: CompileFn | None) -> None:
    # w's gradient comes from a node made after the set_, which eager runs first
    def f(x0: T, w: T) -> object:
        t0 = x0[0]
        set_to(t0, t0)
        return (t0, w * 2)

    assert_refused(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)
    assert_refused(f, lambda: (pair_nonleaf(2, 3), pair(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)


def test_input_view_set_and_input_returned_beside_an_unrelated_output_refused(compile_fn: CompileFn | None) -> None:
    # diverged before (w.grad None vs eager a tensor): only the input is returned, not the view
    def f(x0: T, w: T) -> object:
        t0 = x0[0]
        set_to(t0, t0)
        return (w * 2, x0)

    assert_refused(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)


# ---------------------------------------------------------------------------------------------------------------
# set_() under grad of a view of a tensor that does not require grad, to one that does: eager rebases the base,
# which then requires grad (supported where no output is a view of that base, refused where one is)


def test_view_of_grad_free_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2672 (refused before): t0 gains grad by its view's set_
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.add(x0)
        t0.copy_(t0)
        t1 = t0.transpose(2, 1)
        x0.add_(0.5)
        x0.add_(t0)
        set_to(t1, x0)
        return (t0, x0, t0)

    _check(f, lambda: (nonleaf(3, 2, 1),), compile_fn)


def test_view_of_grad_free_input_set_to_grad_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #8747 (refused before): x0 gains grad by its view's set_; x1 and x2 are one leaf
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.t()
        t1 = t0.view((1,))
        t0.data.unsqueeze_(-1)
        set_to(t0, x1)
        t1.data.copy_(t0)
        return (x2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = torch.randn((), requires_grad=True)
        return (torch.randn(()), b1, b1)

    _check(f, make_inputs, compile_fn)


def test_view_of_grad_free_tensors_set_to_grad_input(compile_fn: CompileFn | None) -> None:
    def f_input(x0: T, x1: T) -> object:
        t0 = x0[0]
        set_to(t0, x1[0])
        return (x0, x0[1], x0 * 2)

    _check(f_input, lambda: (torch.randn(2, 3), nonleaf(2, 3)), compile_fn)

    def f_intermediate(x0: T) -> object:
        with torch.no_grad():
            t0 = x0 * 2
        t2 = t0[0]
        t1 = t0.t()
        set_to(t1, x0)
        return (t0, t0[1], t2)

    _check(f_intermediate, lambda: (nonleaf(2, 3),), compile_fn)


def test_returned_view_of_grad_free_intermediate_set_under_grad_refused(compile_fn: CompileFn | None) -> None:
    # the view would be rebuilt over a fresh base (Note [Outputs set_() Under Grad]), not eager's
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0 * 2
        t1 = t0.t()
        set_to(t1, x0)
        return (t1,)

    assert_refused(f, lambda: (nonleaf(2, 3),), compile_fn, "of a tensor that did not require grad")
