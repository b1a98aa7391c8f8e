"""Fuzz regressions (helper refpair): subclass inputs that are views, written and changed by in-place view ops in
training (Note [Written Subclass Views Changed In Place])."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_with_grad, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor

RULE = r"args\[0\]: a tensor subclass input that is a view .* in-place view ops"


def test_view_transposed_then_written_from_a_grad_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #3672: the view gains grad from x1
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x0.copy_(x1)
        return ()

    check_with_grad(f, lambda: (pair(2).unsqueeze(1), pair(requires_grad=True)), compile_fn)


def test_view_transposed_then_written_returned(compile_fn: CompileFn | None) -> None:
    # seed 44000 #3672 returning the view: eager's rebuilt grad_fn expects the old layout (its backward raises where
    # the layout's size changed, and reads the gradient in the old layout where not), and so does ours
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x0.copy_(x1)
        return (x0,)

    check_with_grad(f, lambda: (pair(2).unsqueeze(1), pair(requires_grad=True)), compile_fn)
    check_with_grad(f, lambda: (pair_nonleaf(3, 3)[:, :], pair(requires_grad=True)), compile_fn)


def test_view_transposed_with_itself_then_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #7031 and #7690
    def f(x0: T) -> object:
        x0.transpose_(1, 1)
        x0.add_(3.0)
        return ()

    def g(x0: T) -> object:
        x0.transpose_(1, 1)
        x0.fill_(0.5)
        return (x0,)

    check_with_grad(f, lambda: (pair_nonleaf(2, 1, 2).view((4, -1)),), compile_fn)
    check_with_grad(g, lambda: (pair_nonleaf(1, 4).transpose(0, 0),), compile_fn)


def test_view_written_then_transposed(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #7375: the write comes first, the grad_fn then gets the t_() node on top of the rebuilt one
    def f(x0: T) -> object:
        x0.fill_(0.5)
        x0.t_()
        return ()

    def g(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        x0.add_(x1)
        x0.unsqueeze_(0)
        x0.t_()
        return (x0, x0.unsqueeze(0))

    check_with_grad(f, lambda: (pair_nonleaf(4, 3).diagonal(0, 1, 0),), compile_fn)
    check_with_grad(g, lambda: (pair_nonleaf(4, 3).diagonal(0, 1, 0), pair(requires_grad=True)), compile_fn)
    check_with_grad(g, lambda: (pair_nonleaf(2, 3).select(0, 1), pair(requires_grad=True)), compile_fn)


def test_view_written_between_layout_changes(compile_fn: CompileFn | None) -> None:
    # writes before and after in-place view ops: the copy goes in first, the ops before the last write replay under
    # no_grad (eager rebuilt the grad_fn at that write), the rest with grad
    def f(x0: T, x1: T) -> object:
        x0.unsqueeze_(0)
        x0.add_(x1)
        x0.transpose_(0, 1)
        x0.mul_(0.5)
        x0.t_()
        return (x0,)

    check_with_grad(f, lambda: (pair_nonleaf(3, 2).select(1, 0), pair(requires_grad=True)), compile_fn)
    check_with_grad(f, lambda: (pair(3, 2).select(1, 0), pair(requires_grad=True)), compile_fn)


def test_view_layout_changed_under_no_grad_then_written_refused(compile_fn: CompileFn | None) -> None:
    # the compiled Function's history of the input (traced on a non-view clone) misses the no_grad op, the inverse
    # views the epilogue copies through do not
    def f(x0: T) -> object:
        x0.mul_(2.0)
        with torch.no_grad():
            x0.transpose_(0, -1)
        return (x0.unsqueeze(0),)

    refused_with_grad(f, lambda: (pair_nonleaf(2, 1, 2).transpose(0, -1),), compile_fn, RULE)


def test_view_read_after_stale_history_refused(compile_fn: CompileFn | None) -> None:
    # after the layout change, the write makes eager rebuild x0's grad_fn in the old layout, which x0 * 3 reads
    def f(x0: T) -> object:
        x0.unsqueeze_(-1)
        x0.fill_(1.0)
        return (x0 * 3,)

    refused_with_grad(f, lambda: (pair_nonleaf(2, 3).diagonal(0, 0, 1),), compile_fn, RULE)


def test_view_scaled_by_a_grad_tensor_after_layout_change_refused(compile_fn: CompileFn | None) -> None:
    # eager's CopySlices hands x1 a gradient computed in the stale layout
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x0.mul_(x1)
        return (x0,)

    refused_with_grad(f, lambda: (pair_nonleaf(3, 3)[:, :], pair(requires_grad=True)), compile_fn, RULE)


def test_aliased_view_transposed_with_itself_then_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #7690: x0 shares storage with x1, x2; its transpose_(1, 1) leaves the layout as it came
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.contiguous()
        t0.reshape((1, 4, 1))
        x0.transpose_(1, 1)
        x0.fill_(0.5)
        return (x1,)

    def make() -> tuple[T, T, T]:
        b0 = pair_nonleaf(1, 4)
        return (b0.transpose(0, 0), b0, b0.reshape((1, 4, 1)))

    check_with_grad(f, make, compile_fn)
