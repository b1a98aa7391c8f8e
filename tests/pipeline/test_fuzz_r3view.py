"""Fuzz follow-ups (seed 8000): view and alias metadata of outputs (storage offset, `_base`, view-ness, is_leaf)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _pair_at_offset() -> tuple[object, ...]:
    return (pair(4, 2, 1).as_strided((1,), (2,), 2),)


def test_set_output_onto_view_of_written_input_at_offset(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2407: functionalization reports offset 0 for a view of the written input at offset 2 (Note
    # [Offsets After A Write]); the output came back at the wrong offset with wrong values, then was refused; its leaves
    # now carry eager's offsets (helper p109)
    def f(x0: T) -> object:
        x0.add_(x0)
        t0 = x0.unsqueeze(-2)
        set_to(t0, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, _pair_at_offset, compile_fn=compile_fn)


def test_set_output_onto_view_of_unwritten_input_at_offset(compile_fn: CompileFn | None) -> None:
    # the same program without the write stays supported
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(-2)
        set_to(t0, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, _pair_at_offset, compile_fn=compile_fn)


def test_no_grad_view_returned_after_its_base_is_set_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #3759: eager's grad_fn (and is_leaf) of the view raises after set_() of its base, even under
    # no_grad; the compiled output was a leaf
    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((1,))
        t1 = t0[0:1:2]
        set_to(x1, t1)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf()
        return (b0, b0)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager \\(a view made under no_grad")


_VIEW_RULE = "is a view of a tensor subclass whose view chain cannot be replayed"


def test_view_of_subclass_view_set_to_itself_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2870: eager's output is a view (of the input) whose inner tensors are not views; the compiled
    # one was the other way round, and without requires_grad
    def f(x0: T) -> object:
        t0 = x0.as_strided((2, 3), (3, 0), 2)
        with torch.no_grad():
            set_to(t0, t0)
            t1 = t0.transpose(1, 0)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2, 3, 1),), compile_fn, _VIEW_RULE)


def test_subclass_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #7374: eager's output is a view of an intermediate, its inner tensors plain aliases of the input's
    # (refused until Note [Subclass Views set_() Off Their Base])
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.expand((2, -1, -1))
        set_to(t1, x0)
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 4),), compile_fn=compile_fn)


def test_view_of_output_whose_data_is_assigned_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2604: eager's `t1._base` is t0, returned too; the compiled t1 was a view of the input
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.t()
        t0.data = t1
        x0.data = t1
        return (t0, t1)

    with torch.no_grad():
        assert_refused(f, lambda: (torch.randn(3, 3),), compile_fn, "whose `.data` the program assigned after taking")


def test_no_grad_view_returned_after_its_base_is_set_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #3759 as generated: the set_() runs with grad enabled
    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((1,))
        with torch.no_grad():
            t1 = t0[0:1:2]
        t2 = x1.expand(())
        set_to(x1, t1)
        return (t2, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf()
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager \\(a view made under no_grad")
