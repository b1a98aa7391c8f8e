"""Fuzz follow-ups (seed 8000): view and alias metadata of outputs (storage offset, `_base`, view-ness, is_leaf)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, pair

T = torch.Tensor

_OFFSET_RULE = "set_\\(\\) this output onto a view of an input that it also writes in place"


def _pair_at_offset() -> tuple[object, ...]:
    return (pair(4, 2, 1).as_strided((1,), (2,), 2),)


def test_set_output_onto_view_of_written_input_at_offset_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2407: functionalization reports offset 0 for a view of the written input at offset 2 (Note
    # [Offsets Of Views Of Written Inputs]); the output came back at the wrong offset with wrong values
    def f(x0: T) -> object:
        x0.add_(x0)
        t0 = x0.unsqueeze(-2)
        t0.set_(t0)
        return (t0,)

    with torch.no_grad():
        assert_refused(f, _pair_at_offset, compile_fn, _OFFSET_RULE)


def test_set_output_onto_view_of_unwritten_input_at_offset(compile_fn: CompileFn | None) -> None:
    # the same program without the write stays supported
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(-2)
        t0.set_(t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, _pair_at_offset, compile_fn=compile_fn)
