"""Fuzz regressions (seed 8000): backward size checks against layouts changed behind autograd (`.data =` with
another shape, in-place view ops under no_grad), refused by Note [Layouts Changed Behind Autograd].

With `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import leaf as _leaf
from tests.pipeline.fuzz_helpers import nonleaf
from tests.pipeline.fuzz_helpers import refused_with_grad as assert_refused

T = torch.Tensor
RULE = r"changes the size of a tensor that requires grad behind autograd"


def test_data_assigned_after_in_place_transpose_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #800: eager's backward through x0 gives a [4, 1] gradient to the TransposeBackward node that
    # recorded [1, 4] and raises; the compiled backward ran
    def f(x0: T) -> object:
        t0 = x0.clone()
        x0.transpose_(0, 1)
        x0.data = t0
        return (x0,)

    # refused since d6570 by Note [Writes With Grad After .data =], which is checked first
    assert_refused(f, lambda: (nonleaf(4, 1),), compile_fn, r"args\[0\]: the program assigns `.data` .* in place")


def test_leaf_data_assigned_its_own_view_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #3539: the view's backward reaches the leaf's AccumulateGrad made at the leaf's old size
    def f(x0: T) -> object:
        t0 = x0[1:3:2]
        with torch.no_grad():
            x0.mul_(-1.0)
        x0.data = t0
        return (t0,)

    assert_refused(f, lambda: (_leaf(4, 2),), compile_fn, r"args\[0\]: the program " + RULE)


def test_leaf_unsqueezed_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #1466: eager's leaf gets its AccumulateGrad after the change and its backward runs; the joint
    # trace, which ran the leaf as a clone, failed the size check (refused until Note [Leaves Laid Out Anew Under
    # no_grad], helper nogradlayout)
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        return (x0.clone(),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_leaf(2),), compile_fn=compile_fn)


def test_view_unsqueezed_under_no_grad_after_write_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #1466 unshrunk: the write under no_grad makes eager remake the view's grad_fn at its new size
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.mul_(-1.0)
            x0.unsqueeze_(-1)
        return (x0.clone(),)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (_leaf(2).reshape(-1, 2),)

    assert_refused(f, make_inputs, compile_fn, RULE + r".*fails \(.*invalid gradient")


def test_non_leaf_transposed_under_no_grad_fails_as_eager(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #230 (not refused): the clone's node keeps its size in eager and in the trace, so eager's
    # backward through x0 fails, and the deferred error mirrors it
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        t0 = x0.detach()
        with torch.no_grad():
            x0.add_(3.0)
        return (x0, t0, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(1, 4),), compile_fn=compile_fn)
