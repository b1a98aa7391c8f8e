"""Fuzz regressions (helper refsetgrad): training programs of fuzz seed 44000 that set_() with grad enabled, once
refused, now compiled exactly, and the narrow refusals left."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad, leaf, pair, refused_with_grad, twice

T = torch.Tensor


def test_clone_set_to_returned_subclass_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #8877: eager's set_ node stands between the loss and x0's AccumulateGrad, so x0 gets no
    # gradient although it is returned (Note [Leaves Behind A Raising set_ Node])
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (t0, x0)

    check_with_grad(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_clone_set_to_returned_plain_leaf_input_first(compile_fn: CompileFn | None) -> None:
    # a variant of seed 44000 #8877: plain, 2-d, the leaf returned first
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (x0, t0)

    check_with_grad(f, lambda: (leaf(2, 3),), compile_fn)


def test_view_after_set_of_a_sum_with_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #573: one leaf as both arguments; the output is a view of t0 taken after its set_
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(0)
        set_to(t0, x0)
        t1 = t0.select(0, 2)
        return (x1, t1)

    check_with_grad(f, twice(lambda: leaf(3, 2)), compile_fn)


def test_product_set_to_itself_beside_its_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #1187 (plain) and #6920 (PairTensor)
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        set_to(t0, t0)
        return (x0, t0)

    check_with_grad(f, lambda: (leaf(),), compile_fn)
    check_with_grad(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_subclass_sum_set_to_a_returned_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #3409: t0 is computed from x1 (no grad), set_() to the leaf x0 with grad
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x1)
        set_to(t0, x0)
        return (x0, t0)

    check_with_grad(f, lambda: (pair(2, 3, 4, requires_grad=True), pair(2)), compile_fn)


def test_returned_leaf_not_behind_the_set_node_stays_refused(compile_fn: CompileFn | None) -> None:
    # x0 is reached by the loss only directly: whether eager accumulates its gradient before t0's set_ node raises
    # depends on the order the engine runs its nodes
    def f(x0: T, x1: T) -> object:
        t0 = x1.mul(2.0)
        set_to(t0, x1)
        return (t0, x0)

    refused_with_grad(f, lambda: (leaf(3), leaf(3)), compile_fn, r"Leaves Behind A Raising set_ Node")
