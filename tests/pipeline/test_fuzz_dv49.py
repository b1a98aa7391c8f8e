"""Fuzz regressions from dev seed 49000: views taken after an in-place view op on an input (Note [No-Grad Views Made
After The Bump]), a set_() of a leaf's neighbour in a raising backward (Note [set_ Under Grad Before The
Call]), and views set_() onto another storage whose `._base` is an input's own base (Note [Views Set Onto Another
Storage]); each program is a shrunk fuzz program or a variant of one (seed and index in the test's name)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
)

T = torch.Tensor

_METADATA_CHANGES: tuple[Callable[[T], object], ...] = (
    lambda x: x.t_(),
    lambda x: x.transpose_(0, 1),
    lambda x: x.unsqueeze_(0),
    lambda x: x.as_strided_((2, 3), (1, 2), 1),
)


# fuzz seed 49000 #2330: the as_strided view is taken before x0.t_(), its unbind() after: eager's multi-output view
# was made after the bump and reads fine; replayed before the epilogue, ours raised on grad_fn
def test_seed49000_2330_multi_output_view_after_inplace_view_op(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.as_strided((1, 2), (0, 0), 0)
        x0.t_()
        t1 = t0.unbind(1)[1]
        return (t1.unsqueeze(-2),)

    check_with_grad(f, lambda: (pair_nonleaf(4, 4),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(4, 4),), compile_fn)
    check_no_grad(f, lambda: (pair(4, 4),), compile_fn)
    check_no_grad(f, lambda: (nonleaf(4, 4),), compile_fn)


# variant of fuzz seed 49000 #2330: other in-place view ops, and split()/chunk() after them, plain and PairTensor
def test_seed49000_2330_split_after_metadata_changes(compile_fn: CompileFn | None) -> None:
    for change in _METADATA_CHANGES:

        def f(x0: T, change: Callable[[T], object] = change) -> object:
            t0 = x0.as_strided((1, 2), (0, 0), 0)
            change(x0)
            return (torch.split(t0, 1, -1)[0], t0.chunk(2, 0)[-1].unsqueeze(0))

        check_with_grad(f, lambda: (nonleaf(3, 4),), compile_fn)
        check_with_grad(f, lambda: (pair_nonleaf(3, 4),), compile_fn)
        check_no_grad(f, lambda: (leaf(3, 4),), compile_fn)


# variant of fuzz seed 49000 #2330: a plain view() taken first, the split after x0.unsqueeze_(0)
def test_seed49000_2330_split_of_view_after_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view(-1)
        x0.unsqueeze_(0)
        return (torch.split(t0, 1, -1)[0],)

    check_with_grad(f, lambda: (nonleaf(3, 4),), compile_fn)
    check_with_grad(f, lambda: (pair_nonleaf(3, 4),), compile_fn)


# fuzz seed 49000 #3836: x2 (x1 passed again) set_() to itself with grad, then read: eager's set_ node waits behind
# the mul's, and the leaf x0 gets its gradient before the backward raises; ours, whose set_ node was made after the
# compiled call, raised first (was refused); the runtime now repeats that set_ before the call (Note [set_ Under Grad
# Before The Call])
def test_seed49000_3836_set_beside_returned_leaf(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x2, x2)
        t0 = x1.mul(x1)
        return (x0, x1, t0)

    def make_pair() -> tuple[object, ...]:
        b1 = pair_nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    def make_plain() -> tuple[object, ...]:
        b1 = nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(f, make_pair, compile_fn)
    check_with_grad(f, make_plain, compile_fn)

    def g(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x0, x1, x1.mul(x1))

    check_with_grad(g, lambda: (leaf(4), pair_nonleaf(4, 1, 2)), compile_fn)
    check_with_grad(g, lambda: (pair(4, requires_grad=True), nonleaf(4, 1, 2)), compile_fn)


# variants of fuzz seed 49000 #3836 that eager orders as ours: no read after the set_(), a read before it, or only a
# view of the set_() input returned
def test_seed49000_3836_set_beside_returned_leaf_supported(compile_fn: CompileFn | None) -> None:
    def unread(x0: T, x1: T, x2: T) -> object:
        set_to(x2, x2)
        return (x0, x1)

    def read_before(x0: T, x1: T, x2: T) -> object:
        t0 = x1.mul(x1)
        set_to(x2, x2)
        return (x0, x1, t0)

    def make_pair() -> tuple[object, ...]:
        b1 = pair_nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(unread, make_pair, compile_fn)
    check_with_grad(read_before, make_pair, compile_fn)

    def viewed(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x0, x1.view(-1), x1.mul(x1))

    check_with_grad(viewed, lambda: (leaf(4), nonleaf(4, 1, 2)), compile_fn)
    check_with_grad(viewed, lambda: (leaf(4), pair_nonleaf(4, 1, 2)), compile_fn)


# fuzz seed 49000 #4037: t3, a view of x1's base (x1 a view), set_() onto an intermediate: eager's `t3._base` is that
# base, not the intermediate
def test_seed49000_4037_view_set_onto_intermediate_keeps_input_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x1.expand((3, 3, 1))
        t2 = x1.mul(3.0).transpose(1, 2)
        t3 = t0.select(0, -1)
        x1.transpose_(2, 1)
        set_to(t3, t2)
        return (t3,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 1, 2))
        return (b0.view((2, 1)), b0.diagonal(0, 2, 1).unsqueeze(-3))

    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)

    def g(x1: T) -> object:
        return f(x1, x1)

    check_no_grad(g, lambda: (torch.randn(1, 1, 2).diagonal(0, 2, 1).unsqueeze(-3),), compile_fn)
    check_no_grad(g, lambda: (torch.randn(1, 1, 1),), compile_fn)


# variant of fuzz seed 49000 #4037: set_() onto another input's storage, x1 a view of a base it shares with x0 or not
def test_seed49000_4037_view_set_onto_input_keeps_input_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t3 = x1.unsqueeze(0).select(0, 0)
        set_to(t3, x0.t())
        return (t3, t3.unsqueeze(0))

    def shared() -> tuple[object, ...]:
        b = torch.randn(2, 2, 3)
        return (b[0], b[1])

    check_no_grad(f, shared, compile_fn)
    check_no_grad(f, lambda: (torch.randn(3, 2), torch.randn(4, 2, 3)[1]), compile_fn)
    check_no_grad(f, lambda: (torch.randn(3, 2), torch.randn(2, 3)), compile_fn)


# variant of fuzz seed 49000 #4037 with grad: x1, a view of a non-leaf, viewed and set_() onto x0 with grad on
def test_seed49000_4037_grad_view_set_onto_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t3 = x1.unsqueeze(0).select(0, 0)
        set_to(t3, x0)
        return (t3, x1)

    def shared() -> tuple[object, ...]:
        b = nonleaf(2, 2, 3)
        return (b[0], b[1])

    check_with_grad(f, shared, compile_fn)
    check_with_grad(f, lambda: (nonleaf(2, 3), nonleaf(4, 2, 3)[1]), compile_fn)
