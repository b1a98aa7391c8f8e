"""Fuzz follow-ups: tensor subclass inputs that require grad and whose storage or metadata the program changes where
autograd does not record it (fuzz seeds 10000 and 11000). See Note [Subclass Inputs Mutated In Training]."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair, pair_nonleaf

T = torch.Tensor

_RULE = "a tensor subclass input that requires grad has its metadata or storage changed in place"


def test_leaf_set_under_no_grad_to_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #998 (shrunk); seed 11000 #3834 is the same with the operands' roles swapped
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1, 4, 3), pair(3, requires_grad=True)), compile_fn=compile_fn)


def test_leaf_set_under_no_grad_after_uses(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #998: an output computed from the input before the set_() reaches its old history
    def f(x0: T, x1: T) -> object:
        a = x1.mul(3.0)
        with torch.no_grad():
            set_to(x1, x0)
        return (x0.detach(), a, x0.mul(2.0))

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, 3, requires_grad=True), pair(3, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_under_no_grad_to_input_that_requires_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #9420: the source requires grad and is set_() to itself with grad after
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        set_to(x0, x0)
        return (x0, x0)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(), pair(3, 4, 3, requires_grad=True).expand((-1, 4, -1)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_under_no_grad_to_own_views(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #7502, #9652; seed 11000 #7875, #8285 (shrunk): set_() to a view of the input itself
    def expand(x0: T) -> object:
        t0 = x0.expand((1,))
        with torch.no_grad():
            set_to(x0, t0)
        return ()

    def unbind(x0: T) -> object:
        t0 = x0.unbind(1)[0]
        with torch.no_grad():
            set_to(x0, t0)
        return ()

    def view(x0: T) -> object:
        t0 = x0.view((1, 6))
        with torch.no_grad():
            set_to(x0, t0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(expand, lambda: (pair(requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(
            unbind, lambda: (pair(requires_grad=True).view((1, 1, 1)).transpose(2, 0),), compile_fn=compile_fn
        )
        assert_matches_eager(view, lambda: (pair_nonleaf(2, 3, 1),), compile_fn=compile_fn)


def test_set_under_no_grad_then_returned(compile_fn: CompileFn | None) -> None:
    # the input itself, returned after the set_(): eager's and ours are the same object
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        return (x0, x1.mul(2.0))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(2, requires_grad=True), pair_nonleaf(4)), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (pair_nonleaf(3), pair_nonleaf(2, 2)), compile_fn=compile_fn)


def test_read_after_set_under_no_grad_at_the_same_size(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #5481 (a view taken before, read after: autograd rebuilds it from the input), and reads of the
    # input itself and of views taken after, with gradients that tell the layouts apart
    w = torch.arange(4.0).view(2, 2)

    def before(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(x0, x0.t())
        return (t0 * w, t0)

    def after(x0: T, x1: T) -> object:
        a = x0 * 3.0
        with torch.no_grad():
            set_to(x0, x1)
        return (a, x0 * w, x0.t()[0])

    with torch.enable_grad():
        assert_matches_eager(before, lambda: (pair(2, 2, requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(before, lambda: (pair_nonleaf(2, 2),), compile_fn=compile_fn)
        assert_matches_eager(after, lambda: (pair(2, 2, requires_grad=True), pair(2, 2)), compile_fn=compile_fn)
        assert_matches_eager(after, lambda: (pair_nonleaf(2, 2), pair_nonleaf(2, 2)), compile_fn=compile_fn)


def test_write_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # eager records the write on the input (its grad_fn, its gradient), the epilogue would not: wrong gradients
    def itself(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        x0.mul_(2.0)
        return (x0,)

    def view(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        x0[0].mul_(2.0)
        return (x0,)

    # since pairset, the rule for plain inputs (Note [Writes With Grad After .data =]) refuses the first
    hidden_set = r"args\[0\] requires grad, and the program set_\(\) it under no_grad to another input's storage"
    with torch.enable_grad():
        assert_refused(itself, lambda: (pair_nonleaf(2, 2), pair(2, 2)), compile_fn, hidden_set)
        assert_refused(view, lambda: (pair_nonleaf(2, 2), pair(2, 2)), compile_fn, _RULE)


def test_read_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A read with grad after a set_() to another size: eager's gradient reaches the leaf in its new layout, the compiled
    # Function's input has the old one (the compiled backward raised where eager's did not)
    def f(x0: T) -> object:
        with torch.no_grad():
            set_to(x0, x0.view(-1))
        return (x0.sum(),)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(2, 3, requires_grad=True),), compile_fn, _RULE)


def test_write_with_grad_before_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        with torch.no_grad():
            set_to(x0, x1)
        return (x0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2), pair(2, 2)), compile_fn, _RULE)


def test_no_grad_view_op_then_write(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #3577 (shrunk; see Note [Subclass Inputs Mutated In Training]): a non-square
    # transpose_ under no_grad, then a write autograd records; the backward through the input raises in both
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.transpose_(1, 0)
        x0.mul_(3.0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(3, 4, 2),), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 2, 2),), compile_fn=compile_fn)  # square: no error


def test_write_then_no_grad_view_op(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #6031 (shrunk): a write through a view with grad, then unsqueeze_() under no_grad; autograd
    # sums the gradient of the new layout down to the old one
    def f(x0: T) -> object:
        t0 = x0.expand((-1, 4))
        t0.mul_(3.0)
        with torch.no_grad():
            x0.unsqueeze_(-2)
        return (t0, x0, x0.sin())

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 4),), compile_fn=compile_fn)


def test_no_grad_view_op_then_copy(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #5999 (shrunk): unsqueeze_() under no_grad, then a copy_ with grad (of itself, of another)
    def itself(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(-2)
        x0.copy_(x0)
        return (x0,)

    def other(x0: T, x1: T) -> object:
        a = x0.mul(2.0)
        with torch.no_grad():
            x0.transpose_(0, 1)
        x0.copy_(x1)
        return (a, x0.sum())

    with torch.enable_grad():
        assert_matches_eager(itself, lambda: (pair_nonleaf(1),), compile_fn=compile_fn)
        assert_matches_eager(other, lambda: (pair_nonleaf(2, 3), pair_nonleaf(3, 2)), compile_fn=compile_fn)


def test_leaf_written_through_data_then_no_grad_view_op_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #7862 (shrunk): a leaf keeps the refusal (Note [Subclass Inputs Mutated In Training])
    def f(x0: T) -> object:
        x0.data.fill_(3.0)
        with torch.no_grad():
            x0.unsqueeze_(0)
        return ()

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(requires_grad=True),), compile_fn, _RULE)


def test_leaf_with_no_grad_view_op_written_through_an_alias(compile_fn: CompileFn | None) -> None:
    # Note [Subclass Inputs Mutated In Training]: a leaf written with grad through a tensor set_() to it
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.t_()
            set_to(x1, x0)
        x1.mul_(2.0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(2, 3, requires_grad=True), pair(1)), compile_fn=compile_fn)
