"""Fuzz regressions (helper bwd12): backward "invalid gradient" errors ours raised where eager's backward runs."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import pair, pair_nonleaf

T = torch.Tensor


def test_view_op_on_subclass_view_beside_a_written_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #1766 (spurious data mutations of subclass leaves: leaf_mutations.py): only x0 is written; x1's
    # t_() was taken for a write too, and its wrapper-level copy_ rebuilt its grad_fn without the t_()
    def f(x0: T, x1: T) -> object:
        x0.fill_(-1.0)
        x1.t_()
        return (x1,)

    def make() -> tuple[T, T]:
        return pair(1), pair_nonleaf(3, 1, 2).diagonal(0, 1, 2)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_written_subclass_view_then_unsqueeze(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #2263 (Note [Written Subclass Views Changed In Place]): refused before, now supported
    def f(x0: T, x1: T) -> object:
        x0.copy_(x1)
        x0.unsqueeze_(-1)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(4, 1).unsqueeze(0), pair(requires_grad=True)), compile_fn=compile_fn)


def test_written_nonleaf_subclass_view_then_unsqueeze(compile_fn: CompileFn | None) -> None:
    # fuzz seed 9000 #3729 (Note [Written Subclass Views Changed In Place]): refused before, now supported
    def f(x0: T) -> object:
        x0.copy_(x0)
        x0.unsqueeze_(2)
        return (x0.transpose(0, 0),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(4, 1, 4).select(2, 2),), compile_fn=compile_fn)
