"""Fuzz regression (seed 15000 #5346, lead): a tensor passed twice (one input, Note [One Tensor Passed Several Times])
beside a view of it given `.data =`; the analysis indexed tensor inputs by a leaf's flat position (IndexError).

With `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import pair

T = torch.Tensor


def _inputs() -> tuple[object, ...]:
    b0 = torch.randn((2,))
    return (b0, b0, b0[2:2:1])


def _pair_inputs() -> tuple[object, ...]:
    b0 = pair(2)
    return (b0, b0, b0[2:2:1])


def test_data_assigned_beside_a_tensor_passed_twice(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x2.data = x1
        return ()

    def returned(x0: T, x1: T, x2: T) -> object:
        x2.data = x1
        return (x2, x0.mul(2.0))

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            for fn in (f, returned):
                assert_matches_eager(fn, _inputs, compile_fn=compile_fn)
                assert_matches_eager(fn, _pair_inputs, compile_fn=compile_fn)
