"""Fuzz follow-ups (helper aliasin): a tensor subclass leaf resized by an in-place view op under no_grad, then read
with grad (Note [Leaves Laid Out Anew Under no_grad]); found while compiling fuzz seed 40000 #2813 as one input."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import pair

T = torch.Tensor


def test_subclass_leaf_resized_under_no_grad_then_read(compile_fn: CompileFn | None) -> None:
    # the compiled backward raised where eager's ran (t_), or left `.grad` in the old size (unsqueeze_ of a 0-d
    # leaf); refused until Note [Leaves Laid Out Anew Under no_grad] (helper nogradlayout)
    def transposed(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        return (x0.mul(2.0),)

    def unsqueezed(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(0)
        return (x0.sin(),)

    with torch.enable_grad():
        assert_matches_eager(transposed, lambda: (pair(3, 2, requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(transposed, lambda: (pair(3, 1, requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(unsqueezed, lambda: (pair(requires_grad=True),), compile_fn=compile_fn)


def test_subclass_leaf_resized_under_no_grad_not_read_after(compile_fn: CompileFn | None) -> None:
    # still supported: read before the op, or returned as is (the input itself)
    def read_before(x0: T) -> object:
        y = x0.mul(2.0)
        with torch.no_grad():
            x0.t_()
        return (y,)

    def returned(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(read_before, lambda: (pair(3, 2, requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(returned, lambda: (pair(3, 2, requires_grad=True),), compile_fn=compile_fn)
