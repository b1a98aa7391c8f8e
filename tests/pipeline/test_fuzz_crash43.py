"""Fuzz regressions of seed 43000 (helper crash43).

- An expanded input with no elements runs as a compact clone whose backward keeps the incoming gradient's type
  (functional_run._EmptyCompactClone; seed 43000 #4613).
- An output assigned `.data` from an input that is an unbind view, whose base the program then changed in place:
  the alias the runtime assigns is taken without an autograd record (reading the view's grad_fn raises by then), as
  Note [Outputs Assigned .data With History] says (seed 43000 #891).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _unbind_pair(b0: T, dim: int, at: int) -> tuple[T, T]:
    return (b0, b0.unbind(dim)[at])


def _data_from_multi_output_view(x0: T, x1: T) -> tuple[T]:
    t0 = x1.view(())
    t1 = t0.mul(x1)
    t1.data = t0
    x0.unsqueeze_(-1)
    return (t1,)


def test_data_from_unbind_view_then_base_unsqueeze_(compile_fn: CompileFn | None) -> None:
    # seed 43000 #891: the runtime raised "Output 1 of Unbind is a view and its base ... has been modified inplace"
    # while regenerating t1's .data; eager's forward passes and its backward raises (so must ours)
    check_with_grad(_data_from_multi_output_view, lambda: _unbind_pair(nonleaf(2), 0, 1), compile_fn)


def test_data_from_unbind_view_other_shape(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> tuple[T]:
        t0 = x1.view(-1)
        t1 = t0.add(x1)
        t1.data = t0
        x0.transpose_(0, 1)
        return (t1,)

    check_with_grad(f, lambda: _unbind_pair(nonleaf(3, 2), 1, 0), compile_fn)


def test_data_from_chunk_view_then_base_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[T, T]:
        b0 = nonleaf(4)
        return (b0, b0.chunk(2)[1])

    def f(x0: T, x1: T) -> tuple[T]:
        t0 = x1[1:]
        t1 = t0.mul(2.0)
        t1.data = t0
        x0.unsqueeze_(0)
        return (t1,)

    check_with_grad(f, make_inputs, compile_fn)


def test_data_from_unbind_view_no_grad(compile_fn: CompileFn | None) -> None:
    check_no_grad(_data_from_multi_output_view, lambda: _unbind_pair(nonleaf(2), 0, 1), compile_fn)


def _empty_expand(x: T) -> T:
    return x[4:4:1].expand((1, 0, 2))


def _slice_empty(x0: T) -> tuple[T]:
    t0 = x0.unsqueeze(1)
    t1 = t0[:, :, 0:0:2]
    return (t1.add(0.5),)


def test_empty_expanded_pair_view_gets_pair_gradient(compile_fn: CompileFn | None) -> None:
    # seed 43000 #4613: leaf 0 behind args[0].grad was a plain Tensor where eager's is a PairTensor
    check_with_grad(_slice_empty, lambda: (_empty_expand(pair_nonleaf(4, 1)),), compile_fn)


def test_empty_expanded_plain_view_gets_plain_gradient(compile_fn: CompileFn | None) -> None:
    check_with_grad(_slice_empty, lambda: (_empty_expand(nonleaf(4, 1)),), compile_fn)


def test_empty_expanded_plain_view_times_pair(compile_fn: CompileFn | None) -> None:
    # the gradient of the plain input comes from a PairTensor operand: eager's is a PairTensor
    def f(x0: T, x1: T) -> tuple[T]:
        return (x0.mul(x1),)

    check_with_grad(f, lambda: (_empty_expand(nonleaf(4, 1)), pair(1, 0, 2)), compile_fn)


def test_empty_expanded_pair_view_other_shape(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T]:
        return (x0.transpose(0, 2).mul(2.0),)

    check_with_grad(f, lambda: (pair_nonleaf(3, 0, 1).expand(3, 0, 5),), compile_fn)


def test_empty_expanded_pair_view_no_grad(compile_fn: CompileFn | None) -> None:
    check_no_grad(_slice_empty, lambda: (_empty_expand(pair_nonleaf(4, 1)),), compile_fn)
