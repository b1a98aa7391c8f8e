"""Fuzz regressions (helper setview): plain views of leaves set_() under no_grad onto another storage, then read
or returned with grad (Note [Stale View Functions]); cases found beside fuzz seed 43000
(r14b c1, c2, c3) and variants."""

from __future__ import annotations

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
    refused_with_grad,
)

T = torch.Tensor
SET_OFF = r"view that requires grad of tensor input 1, taken from a view of it that the program set_\(\)"


def test_unsqueezed_transpose_set_to_a_product_returned_and_summed(compile_fn: CompileFn | None) -> None:
    # r14b c1: the backward through t2 (an intermediate base) and t2.sum() replayed t2's stale view function,
    # unsqueeze(0) ("invalid gradient ... expected shape compatible with [1, 4, 4]"); eager's goes through
    # as_strided() of x1 at t2's new layout
    def f(x0: T, x1: T) -> object:
        t2 = x1.t().unsqueeze(0)
        with torch.no_grad():
            set_to(t2, x0 * 2)
        return t2, t2.sum()

    check_with_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn)
    check_no_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn)


def test_view_set_to_another_input_then_read_with_grad(compile_fn: CompileFn | None) -> None:
    # refused before (test_fuzz_set43.py): eager's history reads no values, so t0's own values with x0's
    # as_strided() history are exact
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0.clone(), t0.mul(x1))

    check_with_grad(f, lambda: (leaf(2, 2), torch.randn(2, 2)), compile_fn)
    check_with_grad(f, lambda: (leaf(2, 2), leaf(2, 2)), compile_fn)


def test_view_set_to_a_smaller_tensor_read_with_grad(compile_fn: CompileFn | None) -> None:
    # another shape: a flat view set_() to a (2, 3) product, read by an op whose backward reads its operand
    def f(x0: T, x1: T) -> object:
        t1 = x1.view(12)
        with torch.no_grad():
            set_to(t1, x0.mul(3.0))
        return (t1.mul(x0).sum(), x1)

    check_with_grad(f, lambda: (leaf(2, 3), leaf(3, 4)), compile_fn)


def test_view_of_a_nonleaf_set_off_its_base_read_with_grad(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t1 = x1.t()
        with torch.no_grad():
            set_to(t1, x0.add(1.0))
        return (t1.exp(),)

    check_with_grad(f, lambda: (nonleaf(3, 3), nonleaf(3, 3)), compile_fn)


def test_subclass_view_set_off_its_base_read_with_grad(compile_fn: CompileFn | None) -> None:
    # a PairTensor view: eager replays its view ops (left alone by the stand-ins)
    def f(x0: T, x1: T) -> object:
        t1 = x1.t()
        with torch.no_grad():
            set_to(t1, x0.mul(2.0))
        return (t1.sum(), t1)

    check_with_grad(f, lambda: (pair(3, 3, requires_grad=True), pair(3, 3, requires_grad=True)), compile_fn)


def test_view_of_a_view_set_off_its_base_returned_is_refused(compile_fn: CompileFn | None) -> None:
    # r14b c2: eager's output is a view of x1 (its `._base`) on x0 * 2's storage; ours came back as no view (training)
    # or a view of the intermediate without grad (inference); refused (Note [Views Set Onto Another Storage])
    def f(x0: T, x1: T) -> object:
        t2 = x1.view(16)
        with torch.no_grad():
            set_to(t2, x0 * 2)
        return (t2.view(-1),)

    refused_with_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn, SET_OFF)
    with torch.no_grad():
        assert_refused(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn, SET_OFF)


def test_view_of_a_view_set_to_another_input_returned_is_refused(compile_fn: CompileFn | None) -> None:
    # the same onto input 0's storage: ours was a view of args[0]
    def f(x0: T, x1: T) -> object:
        t2 = x1[1]
        with torch.no_grad():
            set_to(t2, x0)
        return (t2.view(-1), x0)

    refused_with_grad(f, lambda: (nonleaf(4, 4), nonleaf(4, 4)), compile_fn, SET_OFF)


def test_view_of_a_view_set_off_its_base_without_grad(compile_fn: CompileFn | None) -> None:
    # inputs that do not require grad: rebuilt onto its base (Note [Views Set Onto Another Storage]), not refused
    def f(x0: T, x1: T) -> object:
        t2 = x1.view(16)
        set_to(t2, x0 * 2)
        return (t2.view(-1),)

    check_with_grad(f, lambda: (torch.randn(4, 4), torch.randn(4, 4)), compile_fn)
