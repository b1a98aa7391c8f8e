"""Fuzz regressions (training): clones of inputs taken at a storage offset, and output views of a written input
that an in-place view op changed after they were taken.

- `t0 = x.clone()` of an input at an offset (an empty `b[2:2:2]`, or `b[1:]`) read the input itself in the
  partitioned graph; a write to t0 then kept the input's offset, and so did the output views of t0 (partition.py, clones
  of inputs at an offset; seed 40000 #5854).
- `x.mul_(0.5); t0 = x.select(2, 0); t0.t_(); return t0` with a PairTensor x: t0 was replayed before the epilogue's
  write to x, whose bump left its grad_fn stale, regenerated without the t_() (Note [No-Grad Views Made After The Bump];
  seed 40000 #7249).
- A plain input x2 and a view of it x1 (both inputs), x2 written with a PairTensor operand: x1's gradient is a
  PairTensor in eager; the group was traced from its synthetic base, whose CopySlices made it plain (Note [Aliased
  Inputs In Training]; seed 11000 #6100, whose test is in test_fuzz_gradtype.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _clone_written_then_viewed(x0: T) -> tuple[T]:
    # seed 40000 #5854, shrunk
    t0 = x0.clone()
    t0.unsqueeze_(-1)
    t1 = t0.view((1, -1))
    t0.mul_(3.0)
    t2 = t1.transpose(0, 0)
    return (t2,)


def _with_grad_input(x0: T, y: T) -> tuple[T, T]:
    (t,) = _clone_written_then_viewed(x0)
    return t, y * 2


def _empty_nonleaf() -> tuple[T]:
    return (nonleaf(2)[2:2:2],)


def _sliced_nonleaf() -> tuple[T]:
    return (nonleaf(4)[1:],)


def _empty_pair() -> tuple[T]:
    return (pair_nonleaf(2)[2:2:2],)


@pytest.mark.parametrize("make_inputs", [_empty_nonleaf, _sliced_nonleaf, _empty_pair], ids=["empty", "slice", "pair"])
def test_clone_of_input_at_offset_written_then_viewed(
    make_inputs: Callable[[], tuple[T]], compile_fn: CompileFn | None
) -> None:
    # "output[0]: storage_offset 2 vs eager 0": the write to the clone kept the input's offset
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(_clone_written_then_viewed, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("part", [slice(1, None), slice(2, 2)], ids=["slice", "empty"])
def test_clone_of_input_without_grad_at_offset(part: slice, compile_fn: CompileFn | None) -> None:
    # The input itself takes no gradient (no clone of it in the joint graph): the program's clone is the first one.
    def make_inputs() -> tuple[T, T]:
        return torch.randn(4)[part], torch.randn(3, requires_grad=True)

    with torch.enable_grad():
        assert_matches_eager(_with_grad_input, make_inputs, compile_fn=compile_fn)


def _select_then_t_(x0: T) -> tuple[T]:
    # seed 40000 #7249
    x0.mul_(0.5)
    t0 = x0.select(2, -3)
    t0.t_()
    return (t0,)


def _index_then_transpose_(x0: T) -> tuple[T]:
    x0.mul_(0.5)
    t0 = x0[0]
    t0.transpose_(0, 1)
    return (t0,)


def _t_then_unsqueeze_returned_with_input(x0: T) -> tuple[T, T]:
    x0.mul_(0.5)
    t0 = x0[0]
    t0.t_()
    t0.unsqueeze_(0)
    return (t0, x0)


def _t_then_view_unsqueeze_(x0: T) -> tuple[T]:
    x0.mul_(0.5)
    t0 = x0[0]
    t0.t_()
    t1 = t0[1]
    t1.unsqueeze_(0)
    return (t1,)


@pytest.mark.parametrize(
    "fn",
    [_select_then_t_, _index_then_transpose_, _t_then_unsqueeze_returned_with_input, _t_then_view_unsqueeze_],
    ids=["select_t_", "transpose_", "unsqueeze_with_input", "view_of_view"],
)
@pytest.mark.parametrize("make_input", [pair_nonleaf, nonleaf], ids=["pair", "plain"])
def test_written_input_view_changed_by_inplace_view_op(
    fn: Callable[[T], tuple[T, ...]], make_input: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # "leaf 0 behind args[0].grad.a: values differ from eager" (6/27 elements: the transposed ones)
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(fn, lambda: (make_input(3, 3, 3),), compile_fn=compile_fn)


def _written_with_operand(x0: T, x1: T, x2: T) -> tuple[T, ...]:
    x2.mul_(x0)
    return (x1,)


def _viewed_then_written(x0: T, x1: T, x2: T) -> tuple[T, ...]:
    v = x2.view(-1)
    x2.mul_(x0)
    return (v, x1, x2)


def _written_then_set(x0: T, x1: T, x2: T) -> tuple[T, ...]:
    # a storage moved: analyzed from the synthetic base, as before (Note [Aliased Inputs In Training])
    v = x2.t()
    x2.mul_(x0)
    set_to(x2, x2.sin())
    return (x1, v)


def _t_view(requires_grad: bool) -> tuple[T, T, T]:
    b1 = nonleaf(2, 1)
    return (pair(requires_grad=requires_grad), b1.t(), b1)


def _reshaped_view(requires_grad: bool) -> tuple[T, T, T]:
    b1 = nonleaf(2, 3)
    return (pair(3, requires_grad=requires_grad), b1.view(3, 2), b1)


def _row_view(requires_grad: bool) -> tuple[T, T, T]:
    b1 = nonleaf(2, 3)
    return (pair(3, requires_grad=requires_grad), b1[1], b1)


@pytest.mark.parametrize(
    "fn",
    [_written_with_operand, _viewed_then_written, _written_then_set],
    ids=["written", "viewed_then_written", "written_then_set"],
)
@pytest.mark.parametrize("make", [_t_view, _reshaped_view, _row_view], ids=["t", "view", "row"])
@pytest.mark.parametrize("operand_grad", [False, True], ids=["operand", "operand_grad"])
def test_input_and_its_view_written_with_pair_operand(
    fn: Callable[..., tuple[T, ...]],
    make: Callable[[bool], tuple[T, T, T]],
    operand_grad: bool,
    compile_fn: CompileFn | None,
) -> None:
    # "leaf 0 behind args[1].grad: type 'Tensor' vs eager 'PairTensor'"
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(fn, lambda: make(operand_grad), compile_fn=compile_fn)


def _t_then_write_through_view_of_view(x0: T) -> tuple[T]:
    x0.mul_(0.5)
    t0 = x0[0]
    t0.t_()
    t1 = t0[1]
    t1.mul_(2)
    return (t0,)


def test_write_through_view_of_view_changed_by_t_is_refused(compile_fn: CompileFn | None) -> None:
    # found while fixing seed 40000 #7249: a write through a view taken of a view after the view's t_() sent the
    # leaf's gradient to the untransposed elements (the joint trace's view functions miss the t_(): Note [Stale View
    # Functions], now refused for any plain view, not only members of an alias group)
    rule = r"args\[0\]: the program changes the layout .* of a view .*\(Note \[Stale View Functions\]"
    with torch.enable_grad():
        assert_refused(_t_then_write_through_view_of_view, lambda: (nonleaf(3, 3, 3),), compile_fn, rule)


def _t_then_view_of_view_unsqueeze_(x0: T) -> tuple[T]:
    t0 = x0[0]
    t0.t_()
    t1 = t0[1]
    t1.unsqueeze_(0)
    return (t0,)


def test_pair_view_changed_by_t_then_bumped_by_view_of_it_is_refused(compile_fn: CompileFn | None) -> None:
    # found while fixing seed 40000 #7249: t1.unsqueeze_() of a view t1 of t0 bumps t0's counter after t0.t_(); eager
    # then regenerates a PairTensor t0's grad_fn from view functions that miss the t_() (its leaf gradient is
    # transposed), ours kept the TBackward (Note [Stale View Functions])
    rule = r"out\[0\] is a view of a tensor subclass that an in-place view op .* of its own changed"
    with torch.enable_grad():
        assert_refused(_t_then_view_of_view_unsqueeze_, lambda: (pair_nonleaf(3, 3, 3),), compile_fn, rule)
        assert_matches_eager(_t_then_view_of_view_unsqueeze_, lambda: (nonleaf(3, 3, 3),), compile_fn=compile_fn)
